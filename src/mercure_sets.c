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
#include "mercure_sets.h"

#include <stdlib.h>
#include <string.h>

#include "mercure_update.h"
#include "metrics.h"
#include "urlpattern.h"
#include "util.h"

#define MIN_SLOTS 16
#define VERDICTS 16 /* a power of two */

struct verdict {
	int64_t id; /* 0: empty (ids start at 1) */
	int64_t created_at;
	size_t topic_len;
	bool hit;
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
	struct verdict verdicts[VERDICTS];
};

struct mercure_sets {
	struct mercure_set **slot;
	size_t nslots; /* 0 or a power of two */
	size_t n;
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
	mercure_matchers_free(&s->m);
	free(s->key);
	free(s->base);
	free(s);
}

/* Whether one of l's matchers matches one of ev's topics. */
static bool judge(const struct mercure_matchers *l, const char *base, const struct store_event *ev)
{
	const char *p = ev->topic, *end = ev->topic + ev->topic_len, *t;
	size_t tl;
	struct mercure_block b;
	if (ev->mercure && mercure_block_parse(ev->mercure, ev->mercure_len, &b) && b.topics) {
		p = b.topics;
		end = b.topics + b.topics_len;
	} else if (ev->topic_len == 0) {
		return false;
	}
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

size_t mercure_sets_count(const struct mercure_sets *ss)
{
	return ss->n;
}
