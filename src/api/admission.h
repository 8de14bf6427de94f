/* SPDX-License-Identifier: BSD-2-Clause */
/* admission.h: whether one more stream may open, and the place each open
 * stream holds: the global cap (max_readers) and the per-address cap
 * (per_address_limit, counted under an address key from addr_count_key).
 *
 * A stream asks admission_admit before it opens and gets either a ticket
 * (its place, counted at once) or the cap that refuses it; it gives the
 * ticket back with admission_release when it is refused after all or when
 * its connection closes. Between the two, the place counts against the
 * caps. In a worker of a group (group_on()) the counts live in the group's
 * shared region, so the caps hold for the whole group, and the check and
 * the count are one step there; otherwise in this module's own table. */
#ifndef HERALD_ADMISSION_H
#define HERALD_ADMISSION_H

#include <stddef.h>
#include <stdint.h>

/* The caps a request is checked against (0: no cap). */
struct admission_caps {
	int64_t max_readers;       /* streams open at once; in a group, the group's */
	int64_t per_address_limit; /* streams open at once under one key */
};

/* Why admission_admit refused. */
enum admission_refusal {
	ADMISSION_OK = 0,
	ADMISSION_FULL,         /* max_readers */
	ADMISSION_ADDRESS_FULL, /* per_address_limit under the key */
};

/* The counts of one process (opaque). */
struct admission;

/* One stream's place (opaque, owned by the admission). Streams under one key
 * share one, counted once per stream. */
struct admission_ticket;

/* A new, empty admission. Never NULL (allocation failure aborts). */
struct admission *admission_new(void);

/* Free a and its table (NULL: nothing). Tickets still held go with it
 * (at exit; in a group, the main process drops a gone worker's counts). */
void admission_free(struct admission *a);

/* Whether one more stream counted under key may open, with open_here
 * streams open in this process now (the hub's readers). Checks, in order:
 * in a group the group's max_readers and per_address_limit in one step
 * with the count (open_here unused); otherwise max_readers, then
 * per_address_limit. Returns ADMISSION_OK with *ticket set to the place now
 * counted, or the cap that refuses with *ticket NULL and nothing counted. */
enum admission_refusal admission_admit(struct admission *a, const char *key, const struct admission_caps *caps,
				       size_t open_here, struct admission_ticket **ticket);

/* Give back the place ticket holds (NULL: nothing); ticket is then
 * invalid. Each ticket from admission_admit is released once. */
void admission_release(struct admission *a, struct admission_ticket *ticket);

/* Streams open under key: this process's, or in a worker of a group the
 * whole group's. */
size_t admission_count(const struct admission *a, const char *key);

#endif
