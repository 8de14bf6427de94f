/* SPDX-License-Identifier: BSD-2-Clause */
/* token_cache.c: verified tokens by the hash of their text (token_cache.h).
 * A hash table of chains, indexed by the key's first bytes (a SHA-256 is
 * uniform, and only tokens that verified get in, so nobody can crowd one
 * chain), and a list from most to least recently used for eviction. Each
 * entry is one allocation: its header, the pattern pointers, the strings. */
#include "auth/token_cache.h"

#include <stdlib.h>
#include <string.h>

#include "common/util.h"

struct entry {
	unsigned char key[TOKEN_CACHE_KEY_LEN];
	int64_t verified_at, valid_until, exp;
	size_t nsubscribe, npublish, npresence;
	char *sub;                   /* the token's subject, or NULL; in the strings */
	size_t size;                 /* what it counts against max_bytes */
	struct entry *chain;         /* the next in its bucket */
	struct entry *newer, *older; /* the use list */
	char *patterns[];            /* subscribe, publish, then presence; the strings follow */
};

struct token_cache {
	size_t max_entries, max_bytes;
	size_t n, bytes;
	size_t mask; /* buckets - 1 */
	struct entry **buckets;
	struct entry *newest, *oldest;
};

struct token_cache *token_cache_new(size_t max_entries, size_t max_bytes)
{
	struct token_cache *c = xcalloc(1, sizeof(*c));
	size_t nb = 16;
	while (nb < max_entries)
		nb *= 2;
	c->max_entries = max_entries ? max_entries : 1;
	c->max_bytes = max_bytes;
	c->mask = nb - 1;
	c->buckets = xcalloc(nb, sizeof(*c->buckets));
	return c;
}

static struct entry **bucket(const struct token_cache *c, const unsigned char *key)
{
	uint64_t h;
	memcpy(&h, key, sizeof(h));
	return &c->buckets[h & c->mask];
}

static void use_unlink(struct token_cache *c, struct entry *e)
{
	if (e->newer)
		e->newer->older = e->older;
	else
		c->newest = e->older;
	if (e->older)
		e->older->newer = e->newer;
	else
		c->oldest = e->newer;
	e->newer = e->older = NULL;
}

static void use_push(struct token_cache *c, struct entry *e)
{
	e->newer = NULL;
	e->older = c->newest;
	if (c->newest)
		c->newest->newer = e;
	else
		c->oldest = e;
	c->newest = e;
}

static void drop(struct token_cache *c, struct entry *e)
{
	struct entry **pp = bucket(c, e->key);
	while (*pp != e)
		pp = &(*pp)->chain;
	*pp = e->chain;
	use_unlink(c, e);
	c->n--;
	c->bytes -= e->size;
	free(e);
}

void token_cache_free(struct token_cache *c)
{
	if (!c)
		return;
	while (c->oldest)
		drop(c, c->oldest);
	free(c->buckets);
	free(c);
}

static struct entry *find(const struct token_cache *c, const unsigned char *key)
{
	struct entry *e = *bucket(c, key);
	while (e && memcmp(e->key, key, TOKEN_CACHE_KEY_LEN) != 0)
		e = e->chain;
	return e;
}

/* A new array of copies of the n strings at from (NULL when n is 0). */
static char **copy_list(char *const *from, size_t n)
{
	if (n == 0)
		return NULL;
	char **list = xmalloc(n * sizeof(*list));
	for (size_t i = 0; i < n; i++)
		list[i] = xstrdup(from[i]);
	return list;
}

bool token_cache_get(struct token_cache *c, const unsigned char key[TOKEN_CACHE_KEY_LEN], int64_t now,
		     struct jwt_rights *r)
{
	memset(r, 0, sizeof(*r));
	struct entry *e = find(c, key);
	if (!e)
		return false;
	if (now > e->valid_until || now < e->verified_at) {
		drop(c, e);
		return false;
	}
	use_unlink(c, e);
	use_push(c, e);
	r->subscribe = copy_list(e->patterns, e->nsubscribe);
	r->nsubscribe = e->nsubscribe;
	r->publish = copy_list(e->patterns + e->nsubscribe, e->npublish);
	r->npublish = e->npublish;
	r->presence = copy_list(e->patterns + e->nsubscribe + e->npublish, e->npresence);
	r->npresence = e->npresence;
	r->sub = e->sub ? xstrdup(e->sub) : NULL;
	r->exp = e->exp;
	return true;
}

/* The i-th of r's patterns, counting subscribe, publish, then presence. */
static const char *pattern_at(const struct jwt_rights *r, size_t i)
{
	if (i < r->nsubscribe)
		return r->subscribe[i];
	i -= r->nsubscribe;
	return i < r->npublish ? r->publish[i] : r->presence[i - r->npublish];
}

void token_cache_put(struct token_cache *c, const unsigned char key[TOKEN_CACHE_KEY_LEN], const struct jwt_rights *r,
		     int64_t now, int64_t valid_until)
{
	struct entry *old = find(c, key);
	if (old)
		drop(c, old);
	size_t np = r->nsubscribe + r->npublish + r->npresence, size = sizeof(struct entry) + np * sizeof(char *);
	for (size_t i = 0; i < np; i++)
		size += strlen(pattern_at(r, i)) + 1;
	if (r->sub)
		size += strlen(r->sub) + 1;
	if (size > c->max_bytes)
		return;
	while (c->oldest && (c->n >= c->max_entries || c->bytes + size > c->max_bytes))
		drop(c, c->oldest);
	struct entry *e = xmalloc(size);
	memcpy(e->key, key, TOKEN_CACHE_KEY_LEN);
	e->verified_at = now;
	e->valid_until = valid_until;
	e->exp = r->exp;
	e->nsubscribe = r->nsubscribe;
	e->npublish = r->npublish;
	e->npresence = r->npresence;
	e->size = size;
	char *w = (char *)&e->patterns[np];
	for (size_t i = 0; i < np; i++) {
		const char *s = pattern_at(r, i);
		size_t len = strlen(s) + 1;
		memcpy(w, s, len);
		e->patterns[i] = w;
		w += len;
	}
	e->sub = NULL;
	if (r->sub) {
		memcpy(w, r->sub, strlen(r->sub) + 1);
		e->sub = w;
	}
	struct entry **b = bucket(c, key);
	e->chain = *b;
	*b = e;
	use_push(c, e);
	c->n++;
	c->bytes += size;
}

size_t token_cache_entries(const struct token_cache *c)
{
	return c->n;
}

size_t token_cache_bytes(const struct token_cache *c)
{
	return c->bytes;
}
