/* SPDX-License-Identifier: BSD-2-Clause */
/* namespace_admit.h: the namespaces' rules for a stream that opens
 * (namespace.h): anonymous = off refuses a reader without a token whose
 * topics reach into the namespace (401), and max_readers caps the streams
 * reading one topic pattern of the namespace at once (503): in this
 * process, and in a group of workers in the group's shared counts too
 * (group.h), checked and taken in one step. The counts live here, one
 * record per pattern with streams open. */
#ifndef HERALD_NAMESPACE_ADMIT_H
#define HERALD_NAMESPACE_ADMIT_H

#include <stdbool.h>
#include <stddef.h>

struct config;
struct topic_caps;
struct topic_hold;

struct topic_caps *topic_caps_new(void);
/* Every hold must have been released. */
void topic_caps_free(struct topic_caps *tc);

/* Judge a reader of topics[0..n) (none: every topic), tokened when it
 * showed a valid token. Returns 0 with *hold the places it takes (NULL:
 * none; release with namespace_release), or 401 or 503 with *cause (a
 * short name for logs and metrics) and the reason written into why. */
int namespace_admit(struct topic_caps *tc, const struct config *cfg, char *const *topics, size_t n, bool tokened,
		    struct topic_hold **hold, const char **cause, char *why, size_t len);

/* Give back what namespace_admit took (NULL: nothing). */
void namespace_release(struct topic_caps *tc, struct topic_hold *hold);

/* Keep hold under owner (a stream's address), so that a stream record
 * need not grow by a pointer for the rare stream that holds places; and
 * release the one kept under owner. */
void namespace_hold_keep(struct topic_caps *tc, struct topic_hold *hold, const void *owner);
void namespace_release_owner(struct topic_caps *tc, const void *owner);

/* Streams counted now under pattern (for tests and metrics). */
size_t topic_caps_count(const struct topic_caps *tc, const char *pattern);

#endif
