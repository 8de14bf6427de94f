/* SPDX-License-Identifier: BSD-2-Clause */
/* mercure_sets.c: interned matcher lists and their verdicts
 * (mercure_sets.h).
 *
 * A set's identity is its key: the hub URL, then each matcher's kind and
 * text, NUL-separated, in the list's order. Sets sit in a chained hash
 * table by the key's FNV-1a hash, which doubles past one set per slot.
 * Each set remembers its verdicts on the last updates in a small table
 * indexed by the update's id: the subscribers of one set visited for one
 * update (the live fan-out) or reading the same rows (catch-ups in step)
 * judge it once. An entry also holds the row's creation time and topic
 * length, so an id reused by a log started afresh is judged again. */
#include "mercure/mercure_sets.h"

#include <stdlib.h>
#include <string.h>

#include "store/mercure_update.h"
#include "core/metrics.h"
#include "mercure/urlpattern.h"
#include "common/util.h"

#define MIN_SLOTS 16
#define VERDICTS 16 /* a power of two */

struct verdict {
	int64_t id; /* 0: empty (ids start at 1) */
	int64_t created_at;
	size_t topic_len;
	bool hit;
};

/* A folder that path-relative topics resolve into (the hub URL's path up
 * to its last '/'), with a hub URL that has it; one per folder in use. */
struct folder {
	struct folder *next;
	char *path; /* owned */
	char *base; /* owned: the first set's hub URL with this folder */
	size_t refs;
};

struct mercure_set {
	struct mercure_sets *owner;
	struct mercure_set *chain; /* the next set in its slot */
	uint64_t hash;
	size_t refs;
	char *key; /* owned; key_len bytes */
	size_t key_len;
	char *base; /* owned: the hub URL the matchers resolve against */
	struct mercure_matchers m;
	struct folder *folder;
	char **keys; /* owned (with the strings): where the hub's index finds it; none: every update */
	size_t nkeys;
	struct verdict verdicts[VERDICTS];
};

struct mercure_sets {
	struct mercure_set **slot;
	size_t nslots; /* 0 or a power of two */
	size_t n;
	struct folder *folders;
	struct metrics *m;
};

struct mercure_sets *mercure_sets_new(struct metrics *m)
{
	struct mercure_sets *ss = xcalloc(1, sizeof(*ss));
	ss->m = m;
	return ss;
}

void mercure_sets_free(struct mercure_sets *ss)
{
	if (!ss)
		return;
	free(ss->slot);
	free(ss);
}

/* The identity of l against base, malloc'd, its length in *len. */
static char *key_of(const struct mercure_matchers *l, const char *base, size_t *len)
{
	size_t n = strlen(base) + 1;
	for (size_t i = 0; i < l->n; i++)
		n += 1 + l->v[i].len + 1;
	char *k = xmalloc(n), *p = k;
	memcpy(p, base, strlen(base) + 1);
	p += strlen(base) + 1;
	for (size_t i = 0; i < l->n; i++) {
		*p++ = (char)('0' + l->v[i].kind);
		memcpy(p, l->v[i].text, l->v[i].len);
		p += l->v[i].len;
		*p++ = '\0';
	}
	*len = n;
	return k;
}

static uint64_t hash_of(const char *k, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)k[i]) * 0x100000001b3ull;
	return h ^ (h >> 29);
}

static void resize(struct mercure_sets *ss, size_t nslots)
{
	struct mercure_set **slot = xcalloc(nslots, sizeof(*slot));
	for (size_t i = 0; i < ss->nslots; i++)
		while (ss->slot[i]) {
			struct mercure_set *s = ss->slot[i];
			ss->slot[i] = s->chain;
			size_t j = s->hash & (nslots - 1);
			s->chain = slot[j];
			slot[j] = s;
		}
	free(ss->slot);
	ss->slot = slot;
	ss->nslots = nslots;
}

/* The folder of base, one reference more. */
static struct folder *folder_get(struct mercure_sets *ss, const char *base)
{
	/* What "x" resolves to, less the "x". */
	struct urlpattern_url u;
	size_t n;
	urlpattern_url_parse(&u, "x", 1, base);
	const char *path = urlpattern_url_path(&u, &n);
	n = n ? n - 1 : 0;
	struct folder *f = ss->folders;
	while (f && !(strlen(f->path) == n && memcmp(f->path, path, n) == 0))
		f = f->next;
	if (!f) {
		f = xcalloc(1, sizeof(*f));
		f->path = xstrndup(path, n);
		f->base = xstrdup(base);
		f->next = ss->folders;
		ss->folders = f;
	}
	urlpattern_url_free(&u);
	f->refs++;
	return f;
}

static void folder_put(struct mercure_sets *ss, struct folder *f)
{
	if (--f->refs > 0)
		return;
	struct folder **pp = &ss->folders;
	while (*pp != f)
		pp = &(*pp)->next;
	*pp = f->next;
	free(f->path);
	free(f->base);
	free(f);
}

/* Add key[0..n) to s's keys unless it is there. */
static void key_add(struct mercure_set *s, const char *key, size_t n)
{
	for (size_t i = 0; i < s->nkeys; i++)
		if (strlen(s->keys[i]) == n && memcmp(s->keys[i], key, n) == 0)
			return;
	s->keys = xrealloc(s->keys, (s->nkeys + 1) * sizeof(*s->keys));
	s->keys[s->nkeys++] = xstrndup(key, n);
}

/* Where the hub's index finds s's subscribers, as topic patterns for
 * topic_index (mercure_sets_probe gives an update's strings): an exact
 * matcher under its text; a URL pattern under its path's literal prefix
 * up to its last '/', as a subtree ("/books/" + "*", found by a path
 * "/books/..." probed with a '?' after it, so that a path ending at that
 * '/' is found too). A matcher with no such prefix ("*", a path that
 * starts with a variable, "/" alone) leaves the set with no keys: every
 * update. */
static void keys_make(struct mercure_set *s)
{
	for (size_t i = 0; i < s->m.n; i++) {
		const struct mercure_matcher *m = &s->m.v[i];
		size_t n = 0;
		const char *prefix = m->kind == MERCURE_URLPATTERN ? urlpattern_path_prefix(m->up, &n) : NULL;
		while (n > 0 && prefix[n - 1] != '/')
			n--;
		if (m->kind == MERCURE_EXACT) {
			key_add(s, m->text, m->len);
		} else if (n > 1) {
			char *k = xmalloc(n + 2);
			memcpy(k, prefix, n);
			memcpy(k + n, "*", 2);
			key_add(s, k, n + 1);
			free(k);
		} else {
			for (size_t j = 0; j < s->nkeys; j++)
				free(s->keys[j]);
			free(s->keys);
			s->keys = NULL;
			s->nkeys = 0;
			return;
		}
	}
}

struct mercure_set *mercure_sets_intern(struct mercure_sets *ss, struct mercure_matchers *l, const char *base)
{
	size_t len;
	char *key = key_of(l, base, &len);
	uint64_t h = hash_of(key, len);
	for (struct mercure_set *s = ss->nslots ? ss->slot[h & (ss->nslots - 1)] : NULL; s; s = s->chain)
		if (s->hash == h && s->key_len == len && memcmp(s->key, key, len) == 0) {
			free(key);
			mercure_matchers_free(l);
			s->refs++;
			return s;
		}
	if (ss->n + 1 > ss->nslots)
		resize(ss, ss->nslots ? ss->nslots * 2 : MIN_SLOTS);
	struct mercure_set *s = xcalloc(1, sizeof(*s));
	s->owner = ss;
	s->hash = h;
	s->refs = 1;
	s->key = key;
	s->key_len = len;
	s->base = xstrdup(base);
	s->m = *l;
	memset(l, 0, sizeof(*l));
	s->folder = folder_get(ss, base);
	keys_make(s);
	size_t j = h & (ss->nslots - 1);
	s->chain = ss->slot[j];
	ss->slot[j] = s;
	ss->n++;
	return s;
}

void mercure_sets_release(struct mercure_sets *ss, struct mercure_set *s)
{
	if (--s->refs > 0)
		return;
	struct mercure_set **pp = &ss->slot[s->hash & (ss->nslots - 1)];
	while (*pp != s)
		pp = &(*pp)->chain;
	*pp = s->chain;
	if (--ss->n == 0) {
		free(ss->slot);
		ss->slot = NULL;
		ss->nslots = 0;
	}
	folder_put(ss, s->folder);
	for (size_t i = 0; i < s->nkeys; i++)
		free(s->keys[i]);
	free(s->keys);
	mercure_matchers_free(&s->m);
	free(s->key);
	free(s->base);
	free(s);
}

/* The lines of ev's topics into [*p, *end) for mercure_block_next_topic:
 * its update's, else its row's topic (none when empty). */
static void topics_of(const struct store_event *ev, const char **p, const char **end)
{
	struct mercure_block b;
	if (ev->mercure && mercure_block_parse(ev->mercure, ev->mercure_len, &b) && b.topics) {
		*p = b.topics;
		*end = b.topics + b.topics_len;
	} else {
		*p = ev->topic;
		*end = ev->topic + ev->topic_len;
	}
}

/* Whether one of l's matchers matches one of ev's topics. */
static bool judge(const struct mercure_matchers *l, const char *base, const struct store_event *ev)
{
	const char *p, *end, *t;
	size_t tl;
	topics_of(ev, &p, &end);
	while (mercure_block_next_topic(&p, end, &t, &tl))
		if (mercure_matchers_match(l, t, tl, base))
			return true;
	return false;
}

bool mercure_set_wants(struct mercure_set *s, const struct store_event *ev)
{
	struct verdict *v = &s->verdicts[(uint64_t)ev->id & (VERDICTS - 1)];
	struct metrics *m = s->owner->m;
	if (ev->id > 0 && v->id == ev->id && v->created_at == ev->created_at && v->topic_len == ev->topic_len) {
		m->mercure_judged_shared++;
		return v->hit;
	}
	uint64_t steps = urlpattern_steps();
	bool hit = judge(&s->m, s->base, ev);
	m->mercure_match_steps += urlpattern_steps() - steps;
	m->mercure_judged++;
	*v = (struct verdict){ ev->id, ev->created_at, ev->topic_len, hit };
	return hit;
}

const struct mercure_matchers *mercure_set_matchers(const struct mercure_set *s)
{
	return &s->m;
}

char **mercure_set_keys(const struct mercure_set *s, size_t *n)
{
	*n = s->nkeys;
	if (!s->nkeys)
		return NULL;
	char **k = xmalloc(s->nkeys * sizeof(*k));
	for (size_t i = 0; i < s->nkeys; i++)
		k[i] = xstrdup(s->keys[i]);
	return k;
}

void mercure_sets_probe(void *arg, const struct store_event *ev, void (*hit)(void *ctx, const char *key, size_t n),
			void *ctx)
{
	struct mercure_sets *ss = arg;
	const char *p, *end, *t;
	size_t tl;
	topics_of(ev, &p, &end);
	while (mercure_block_next_topic(&p, end, &t, &tl)) {
		hit(ctx, t, tl); /* exact matchers */
		/* Its path, as each folder in use resolves it (one but for
		 * a path-relative topic while mercure_url's path changes). */
		for (struct folder *f = ss->folders; f; f = f->next) {
			struct urlpattern_url u;
			size_t n;
			urlpattern_url_parse(&u, t, tl, f->base);
			const char *path = urlpattern_url_path(&u, &n);
			if (!u.too_long) {
				char *k = xmalloc(n + 1);
				memcpy(k, path, n);
				k[n] = '?';
				hit(ctx, k, n + 1);
				free(k);
			}
			urlpattern_url_free(&u);
		}
	}
}

size_t mercure_sets_count(const struct mercure_sets *ss)
{
	return ss->n;
}
