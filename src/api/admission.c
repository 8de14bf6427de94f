/* SPDX-License-Identifier: BSD-2-Clause */
/* admission.c: the caps on open streams and the places streams hold: a
 * chained hash table of this process's open streams per address key, and
 * in a worker of a group the group's shared counts (group.h). See
 * admission.h for the contract. */
#include "api/admission.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/group.h"
#include "common/util.h"

#define KEY_BUCKETS 4096
#define KEY_MAX 64 /* an address key's room, as group.c's */

/* The streams open in this process under one key. Every ticket given under
 * the key is this one record, so a stream costs no allocation of its own;
 * the record goes with the last place it counts. In a group it mirrors
 * this worker's column of the shared count, so a release knows its key. */
struct admission_ticket {
	struct admission_ticket *next; /* the bucket's chain */
	size_t held;                   /* places given and not yet released */
	char key[KEY_MAX];
};

struct admission {
	struct admission_ticket *buckets[KEY_BUCKETS];
};

struct admission *admission_new(void)
{
	return xcalloc(1, sizeof(struct admission));
}

void admission_free(struct admission *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < KEY_BUCKETS; i++)
		while (a->buckets[i]) {
			struct admission_ticket *t = a->buckets[i];
			a->buckets[i] = t->next;
			free(t);
		}
	free(a);
}

/* The link that points at key's record, or the chain's NULL end. */
static struct admission_ticket **key_slot(struct admission *a, const char *key)
{
	unsigned hash = 2166136261u; /* FNV-1a */
	for (const char *p = key; *p; p++)
		hash = (hash ^ (unsigned char)*p) * 16777619u;
	struct admission_ticket **pp = &a->buckets[hash % KEY_BUCKETS];
	while (*pp && strcmp((*pp)->key, key) != 0)
		pp = &(*pp)->next;
	return pp;
}

size_t admission_count(const struct admission *a, const char *key)
{
	if (group_on())
		return group_count(key);
	/* key_slot changes nothing; it only hands out a link it could. */
	struct admission_ticket *t = *key_slot((struct admission *)a, key);
	return t ? t->held : 0;
}

/* Count one more place under key in the table. */
static struct admission_ticket *hold(struct admission *a, const char *key)
{
	struct admission_ticket **pp = key_slot(a, key);
	if (!*pp) {
		*pp = xcalloc(1, sizeof(**pp));
		snprintf((*pp)->key, sizeof((*pp)->key), "%s", key);
	}
	(*pp)->held++;
	return *pp;
}

enum admission_refusal admission_admit(struct admission *a, const char *key, const struct admission_caps *caps,
				       size_t open_here, struct admission_ticket **ticket)
{
	*ticket = NULL;
	if (group_on()) {
		/* The group's caps are checked and counted together, so that
		 * streams opening at the same moment on several workers cannot
		 * pass a cap together. */
		int r = group_count_admit(key, caps->per_address_limit > 0 ? (size_t)caps->per_address_limit : 0,
					  caps->max_readers > 0 ? (size_t)caps->max_readers : 0);
		if (r == -1)
			return ADMISSION_FULL;
		if (r == -2)
			return ADMISSION_ADDRESS_FULL;
	} else {
		if (caps->max_readers > 0 && (int64_t)open_here >= caps->max_readers)
			return ADMISSION_FULL;
		if (caps->per_address_limit > 0 && (int64_t)admission_count(a, key) >= caps->per_address_limit)
			return ADMISSION_ADDRESS_FULL;
	}
	*ticket = hold(a, key);
	return ADMISSION_OK;
}

void admission_release(struct admission *a, struct admission_ticket *ticket)
{
	if (!ticket)
		return;
	if (group_on())
		group_count_del(ticket->key);
	if (--ticket->held > 0)
		return;
	struct admission_ticket **pp = key_slot(a, ticket->key);
	*pp = ticket->next; /* key_slot found this record: keys are unique */
	free(ticket);
}
