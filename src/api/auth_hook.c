/* SPDX-License-Identifier: BSD-2-Clause */
/* auth_hook.c: questions to the application's auth_request URL: the
 * request, its answer read and checked, the cache of answers and the
 * joining of equal questions onto one request.
 *
 * Each distinct question (its key, a SHA-256) has at most one entry in a
 * chained hash table. An entry is either out (call set: a request is on
 * its way, its waiters listed) or kept (an answer cached until expires, on
 * the oldest-first list). An entry out whose last waiter leaves has its
 * request cancelled and goes; an answer that may not be kept (no max-age,
 * or an answer that is not 200/401/403) goes once its waiters are told.
 *
 * Telling is bounded per loop pass (TELL_PER_PASS waiters: each may open a
 * stream): an answer many opens wait on is told over several passes, its
 * entry on the telling list meanwhile, kept alive (an entry taken out of
 * the table while telling is freed when its telling ends). */
#include "api/auth_hook.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/list.h"
#include "common/log.h"
#include "common/loop.h"
#include "common/util.h"
#include "core/config.h"
#include "core/metrics.h"
#include "core/topic.h"
#include "http/http.h"
#include "net/http_client.h"

#define KEY_LEN 32
#define BUCKETS 16384     /* a power of two, above AUTH_HOOK_CACHE_MAX */
#define TELL_PER_PASS 256 /* waiters told their answer in one loop pass */

struct entry {
	unsigned char key[KEY_LEN];
	struct entry *next; /* in its bucket */
	struct auth_hook *h;
	struct http_call *call;            /* out: the request; NULL once answered */
	struct list waiters;               /* out: struct auth_wait, newest first */
	bool telling;                      /* its waiters are being told (on h->telling): only the telling frees it */
	bool in_table;                     /* in the table (a question out or an answer kept) */
	struct list_node tell_link;        /* on h->telling */
	char why[300];                     /* the answer's why, when it is not static */
	char *asked[AUTH_HOOK_MAX_TOPICS]; /* out: the topics asked, to judge a narrowing */
	size_t nasked;
	struct list_node age;        /* kept: on h->kept, oldest first */
	uint64_t expires;            /* kept: loop time it goes */
	struct auth_hook_answer ans; /* kept: the answer (why static; topics and subject owned) */
};

struct auth_wait {
	struct list_node link; /* on its entry's waiters */
	struct entry *e;
	auth_hook_fn fn;
	void *arg;
};

struct auth_hook {
	struct loop *lp;
	struct http_client *client;
	struct metrics *m;
	struct entry *table[BUCKETS];
	struct list_fifo kept;        /* cached answers, oldest first */
	struct list_fifo telling;     /* entries whose waiters are being told, first answered first */
	struct loop_timer tell_timer; /* the next pass's telling */
	size_t nkept, waiting;
};

/* The hook of namespace i (-1: the defaults'), NULL for none. */
static const char *hook_of(const struct config *cfg, int i)
{
	const char *u = i < 0 ? cfg->auth_request : cfg->namespaces.ns[i].auth_request;
	return u && u[0] ? u : NULL;
}

const char *auth_hook_url(const struct config *cfg, char *const *topics, size_t ntopics, bool *mixed)
{
	*mixed = false;
	const struct namespaces *t = &cfg->namespaces;
	if (t->n == 0)
		return hook_of(cfg, -1);
	/* Every namespace the reader's patterns reach must agree: one
	 * application answers for the whole stream. */
	const char *url = NULL;
	bool first = true;
	for (int i = -1; i < (int)t->n; i++) {
		if (!namespace_reached(t, i, topics, ntopics))
			continue;
		const char *u = hook_of(cfg, i);
		if (first) {
			url = u;
			first = false;
		} else if ((u == NULL) != (url == NULL) || (u && strcmp(u, url) != 0)) {
			*mixed = true;
			return NULL;
		}
	}
	return url;
}

struct auth_hook *auth_hook_new(struct loop *lp, struct http_client *client, struct metrics *m)
{
	struct auth_hook *h = xcalloc(1, sizeof(*h));
	h->lp = lp;
	h->client = client;
	h->m = m;
	return h;
}

void auth_hook_answer_clear(struct auth_hook_answer *a)
{
	for (size_t i = 0; i < a->ntopics; i++)
		free(a->topics[i]);
	free((void *)a->topics);
	free((void *)a->subject);
	memset(a, 0, sizeof(*a));
}

static struct entry **slot(struct auth_hook *h, const unsigned char *key)
{
	uint32_t v;
	memcpy(&v, key, sizeof(v));
	return &h->table[v & (BUCKETS - 1)];
}

static struct entry *find(struct auth_hook *h, const unsigned char *key)
{
	for (struct entry *e = *slot(h, key); e; e = e->next)
		if (memcmp(e->key, key, KEY_LEN) == 0)
			return e;
	return NULL;
}

/* Take e out of the table (and off the kept list). */
static void detach(struct entry *e)
{
	struct auth_hook *h = e->h;
	if (e->in_table) {
		struct entry **pp = slot(h, e->key);
		while (*pp != e)
			pp = &(*pp)->next;
		*pp = e->next;
		e->next = NULL;
		e->in_table = false;
	}
	if (list_holds(&h->kept.list, &e->age)) {
		list_fifo_unlink(&h->kept, &e->age);
		h->nkept--;
	}
}

static void free_entry(struct entry *e)
{
	for (size_t i = 0; i < e->nasked; i++)
		free(e->asked[i]);
	auth_hook_answer_clear(&e->ans);
	free(e);
}

/* Take e out of the table and free it, or leave that to its telling. */
static void drop(struct entry *e)
{
	detach(e);
	if (!e->telling)
		free_entry(e);
}

void auth_hook_free(struct auth_hook *h)
{
	if (!h)
		return;
	loop_timer_stop(h->lp, &h->tell_timer);
	while (h->telling.list.first) {
		struct entry *e = list_item(h->telling.list.first, struct entry, tell_link);
		list_fifo_unlink(&h->telling, &e->tell_link);
		e->telling = false;
		if (!e->in_table) {
			while (e->waiters.first) {
				struct auth_wait *w = list_item(e->waiters.first, struct auth_wait, link);
				list_unlink(&e->waiters, &w->link);
				free(w);
			}
			free_entry(e);
		}
	}
	for (size_t i = 0; i < BUCKETS; i++)
		while (h->table[i]) {
			struct entry *e = h->table[i];
			if (e->call) /* none should be: every waiter has cancelled */
				http_client_cancel(e->call);
			while (e->waiters.first) {
				struct auth_wait *w = list_item(e->waiters.first, struct auth_wait, link);
				list_unlink(&e->waiters, &w->link);
				free(w);
			}
			drop(e);
		}
	free(h);
}

size_t auth_hook_waiting(const struct auth_hook *h)
{
	return h->waiting;
}

size_t auth_hook_cached(const struct auth_hook *h)
{
	return h->nkept;
}

/* The question's key: SHA-256 over each part with its length before it,
 * so that no two questions' parts run together into the same bytes. */
static void question_key(const struct auth_hook_question *q, unsigned char *key)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	if (!md)
		abort();
	EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	const char *parts[3 + AUTH_HOOK_MAX_TOPICS];
	size_t lens[3 + AUTH_HOOK_MAX_TOPICS], n = 0;
	parts[n] = q->url, lens[n++] = strlen(q->url);
	parts[n] = q->cookie ? q->cookie : "", lens[n++] = q->cookie ? q->cookie_len : 0;
	parts[n] = q->authorization ? q->authorization : "", lens[n++] = q->authorization ? q->authorization_len : 0;
	for (size_t i = 0; i < q->ntopics && i < AUTH_HOOK_MAX_TOPICS; i++)
		parts[n] = q->topics[i], lens[n++] = strlen(q->topics[i]);
	for (size_t i = 0; i < n; i++) {
		uint64_t len = lens[i];
		EVP_DigestUpdate(md, &len, sizeof(len));
		EVP_DigestUpdate(md, parts[i], lens[i]);
	}
	unsigned int out = KEY_LEN;
	EVP_DigestFinal_ex(md, key, &out);
	EVP_MD_CTX_free(md);
}

/* The key's first bytes in hex, to name a question in a log line. */
static const char *key_shown(const unsigned char *key, char *buf)
{
	snprintf(buf, 17, "%02x%02x%02x%02x%02x%02x%02x%02x", key[0], key[1], key[2], key[3], key[4], key[5], key[6],
		 key[7]);
	return buf;
}

/* Tell w its answer (it is off every list) and free it. */
static void tell(struct auth_hook *h, struct auth_wait *w, const struct auth_hook_answer *a)
{
	if (a->status == 200)
		h->m->auth_allowed++;
	else if (a->status == 401 || a->status == 403)
		h->m->auth_refused++;
	else
		h->m->auth_failures++;
	auth_hook_fn fn = w->fn;
	void *arg = w->arg;
	free(w);
	fn(arg, a);
}

int auth_hook_parse_answer(const char *body, size_t len, char *const *asked, size_t nasked,
			   struct auth_hook_answer *out)
{
	memset(out, 0, sizeof(*out));
	size_t skip = 0;
	while (skip < len && (body[skip] == ' ' || body[skip] == '\t' || body[skip] == '\r' || body[skip] == '\n'))
		skip++;
	out->status = 200;
	if (skip == len)
		return 0; /* no body: allowed as asked */
	struct json_value root, v;
	if (json_parse(body, len, &root) != JSON_OK || root.type != JSON_OBJECT) {
		out->status = 503;
		out->why = "the application's answer is not a JSON object";
		return 503;
	}
	if (json_member(&root, "subject", 7, &v) && v.type != JSON_NULL) {
		if (v.type != JSON_STRING || v.n - 2 > AUTH_HOOK_MAX_SUBJECT || v.n <= 2) {
			out->status = 502;
			out->why = "the application's subject is not a string of 1 to 256 bytes";
			return 502;
		}
		size_t n;
		out->subject = json_string_dup(&v, &n);
	}
	if (json_member(&root, "topics", 6, &v) && v.type != JSON_NULL) {
		if (v.type != JSON_ARRAY) {
			out->status = 502;
			out->why = "the application's topics is not an array of topics";
			goto bad;
		}
		char **topics = xcalloc(AUTH_HOOK_MAX_TOPICS, sizeof(*topics));
		out->topics = topics;
		out->narrowed = true;
		struct json_iter it;
		struct json_value t;
		json_iter_start(&it, &v);
		while (json_iter_next(&it, NULL, &t)) {
			if (out->ntopics == AUTH_HOOK_MAX_TOPICS) {
				out->status = 502;
				out->why = "the application's topics names more than 16";
				goto bad;
			}
			size_t n = 0;
			char *s = t.type == JSON_STRING ? json_string_dup(&t, &n) : NULL;
			if (!s || n == 0 || n > 128 || strlen(s) != n || !topic_pattern_valid(s, n)) {
				free(s);
				out->status = 502;
				out->why = "the application's topics holds something that is not a topic";
				goto bad;
			}
			topics[out->ntopics++] = s;
			bool covered = nasked == 0;
			for (size_t i = 0; i < nasked && !covered; i++)
				covered = topic_pattern_covers(asked[i], s);
			if (!covered) {
				out->status = 502;
				out->why = "the application's topics names a topic the reader did not ask for";
				goto bad;
			}
		}
		if (out->ntopics == 0) {
			out->status = 403;
			out->why = "the application allows none of the topics asked for";
			goto bad;
		}
	}
	return 0;
bad: {
	int status = out->status;
	const char *why = out->why;
	auth_hook_answer_clear(out);
	out->status = status;
	out->why = why;
	return status;
}
}

/* The response r as an answer for e (whose topics were asked) in *a;
 * *keep_s is how long it may be kept (0: not). */
static void judge(struct entry *e, const struct http_client_response *r, struct auth_hook_answer *a, int64_t *keep_s,
		  char *why, size_t whylen)
{
	*keep_s = 0;
	memset(a, 0, sizeof(*a));
	if (r->status < 0) {
		a->status = 503;
		snprintf(why, whylen, "%s",
			 r->status == -ETIMEDOUT      ? "the application did not answer within auth_timeout"
			 : r->status == -ECONNREFUSED ? "the application refused the connection"
			 : r->status == -EMSGSIZE     ? "the application's answer is over 16 KiB"
						      : r->error);
		a->why = why;
		return;
	}
	int64_t age = http_cache_max_age(http_response_header(r, "Cache-Control"));
	if (r->status == 401 || r->status == 403) {
		a->status = r->status;
		a->why = r->status == 401 ? "the application does not know the reader (auth_request answered 401)"
					  : "the application refuses the reader (auth_request answered 403)";
		*keep_s = age > 0 ? age : 0;
		return;
	}
	if (r->status < 200 || r->status > 299) {
		a->status = 503;
		snprintf(why, whylen, "the application answered HTTP %d", r->status);
		a->why = why;
		return;
	}
	if (auth_hook_parse_answer(r->body, r->len, e->asked, e->nasked, a) == 0) {
		a->status = 200;
		*keep_s = age > 0 ? age : 0;
	} else if (a->status == 403) {
		*keep_s = age > 0 ? age : 0;
	}
}

static void tell_due(void *arg);

/* Tell waiters their entry's answer, at most TELL_PER_PASS this pass, the
 * entries first answered first; an entry whose waiters are all told (or
 * gone) leaves the telling list, and is freed if it is out of the table.
 * What is left is told in the next pass. */
static void tell_some(struct auth_hook *h)
{
	size_t budget = TELL_PER_PASS;
	while (h->telling.list.first) {
		struct entry *e = list_item(h->telling.list.first, struct entry, tell_link);
		while (e->waiters.first && budget) {
			struct auth_wait *w = list_item(e->waiters.first, struct auth_wait, link);
			list_unlink(&e->waiters, &w->link);
			h->waiting--;
			h->m->auth_waiting--;
			budget--;
			tell(h, w, &e->ans);
		}
		if (e->waiters.first)
			break;
		list_fifo_unlink(&h->telling, &e->tell_link);
		e->telling = false;
		if (!e->in_table)
			free_entry(e);
	}
	if (h->telling.list.first && !loop_timer_active(&h->tell_timer))
		loop_timer_start(h->lp, &h->tell_timer, 0, tell_due, h);
}

static void tell_due(void *arg)
{
	tell_some(arg);
}

/* The application's response to e's request: the answer is kept for its
 * max-age (before anyone is told, so that a question asked while they are
 * finds it), or e leaves the table; then its waiters are told. */
static void answered(void *arg, const struct http_client_response *r)
{
	struct entry *e = arg;
	struct auth_hook *h = e->h;
	char shown[17];
	e->call = NULL;
	int64_t keep_s;
	judge(e, r, &e->ans, &keep_s, e->why, sizeof(e->why));
	if (e->ans.why && e->ans.why != e->why) {
		snprintf(e->why, sizeof(e->why), "%s", e->ans.why);
		e->ans.why = e->why;
	}
	if (e->ans.status >= 500)
		log_warn("auth_request: question %s: %s", key_shown(e->key, shown), e->ans.why);
	for (size_t i = 0; i < e->nasked; i++)
		free(e->asked[i]);
	e->nasked = 0;
	e->telling = true;
	list_fifo_push(&h->telling, &e->tell_link);
	if (keep_s > 0) {
		e->expires = loop_now(h->lp) + (uint64_t)keep_s * 1000;
		list_fifo_push(&h->kept, &e->age);
		h->nkept++;
		while (h->nkept > AUTH_HOOK_CACHE_MAX)
			drop(list_item(h->kept.list.first, struct entry, age));
	} else {
		detach(e);
	}
	tell_some(h);
}

/* The request body: {"topics":[...],"last_event_id":N|null}. */
static char *question_body(const struct auth_hook_question *q, size_t *len)
{
	size_t cap = 64;
	for (size_t i = 0; i < q->ntopics; i++)
		cap += 6 * strlen(q->topics[i]) + 3;
	char *b = xmalloc(cap), *w = b;
	w += sprintf(w, "{\"topics\":[");
	if (q->ntopics == 0)
		w += sprintf(w, "\"*\"");
	for (size_t i = 0; i < q->ntopics; i++) {
		if (i)
			*w++ = ',';
		*w++ = '"';
		w += http_json_escape(q->topics[i], w);
		*w++ = '"';
	}
	if (q->last_event_id >= 0)
		w += sprintf(w, "],\"last_event_id\":%lld}", (long long)q->last_event_id);
	else
		w += sprintf(w, "],\"last_event_id\":null}");
	*len = (size_t)(w - b);
	return b;
}

/* "Name: value" as a new string. */
static char *header_line(const char *name, const char *v, size_t n)
{
	size_t nl = strlen(name);
	char *s = xmalloc(nl + 2 + n + 1);
	memcpy(s, name, nl);
	memcpy(s + nl, ": ", 2);
	memcpy(s + nl + 2, v, n);
	s[nl + 2 + n] = 0;
	return s;
}

/* Send q's request for the new entry e. Returns 0, or -1 with why set. */
static int send_question(struct auth_hook *h, struct entry *e, const struct auth_hook_question *q, char *why,
			 size_t whylen)
{
	char *lines[3];
	size_t n = 0;
	lines[n++] = xstrdup("Content-Type: application/json");
	if (q->cookie)
		lines[n++] = header_line("Cookie", q->cookie, q->cookie_len);
	if (q->authorization)
		lines[n++] = header_line("Authorization", q->authorization, q->authorization_len);
	size_t len;
	char *body = question_body(q, &len);
	struct http_client_request req = { .method = "POST",
					   .url = q->url,
					   .headers = (const char *const *)lines,
					   .nheaders = n,
					   .body = body,
					   .body_len = len,
					   .timeout_ms = q->timeout_ms,
					   .max_response = AUTH_HOOK_MAX_RESPONSE };
	e->call = http_client_request(h->client, &req, answered, e, why, whylen);
	free(body);
	for (size_t i = 0; i < n; i++)
		free(lines[i]);
	if (!e->call)
		return -1;
	h->m->auth_requests++;
	return 0;
}

/* Tell fn at once (no wait made). */
static void tell_now(struct auth_hook *h, auth_hook_fn fn, void *arg, const struct auth_hook_answer *a)
{
	struct auth_wait *w = xmalloc(sizeof(*w));
	*w = (struct auth_wait){ .fn = fn, .arg = arg };
	tell(h, w, a);
}

struct auth_wait *auth_hook_ask(struct auth_hook *h, const struct auth_hook_question *q, auth_hook_fn fn, void *arg)
{
	unsigned char key[KEY_LEN];
	char shown[17];
	question_key(q, key);
	struct entry *e = find(h, key);
	if (e && !e->call && loop_now(h->lp) >= e->expires) {
		drop(e); /* its max-age has passed */
		e = NULL;
	}
	if (e && !e->call) {
		h->m->auth_cache_hits++;
		/* The most recently used is the last to go. */
		list_fifo_unlink(&h->kept, &e->age);
		list_fifo_push(&h->kept, &e->age);
		struct auth_hook_answer a = e->ans;
		a.cached = true;
		tell_now(h, fn, arg, &a);
		return NULL;
	}
	if (q->max_waiting && h->waiting >= q->max_waiting) {
		log_info("auth_request: %zu stream opens wait for the application already (auth_max_waiting): "
			 "refusing one more",
			 h->waiting);
		struct auth_hook_answer a = { .status = 503,
					      .why = "too many stream opens wait for the application's answer "
						     "(auth_max_waiting)" };
		tell_now(h, fn, arg, &a);
		return NULL;
	}
	if (e) {
		h->m->auth_joined++;
	} else {
		e = xcalloc(1, sizeof(*e));
		memcpy(e->key, key, KEY_LEN);
		e->h = h;
		for (size_t i = 0; i < q->ntopics && i < AUTH_HOOK_MAX_TOPICS; i++)
			e->asked[e->nasked++] = xstrdup(q->topics[i]);
		struct entry **sl = slot(h, key);
		e->next = *sl;
		*sl = e;
		e->in_table = true;
		char why[256];
		if (send_question(h, e, q, why, sizeof(why)) < 0) {
			log_warn("auth_request: question %s: %s", key_shown(key, shown), why);
			drop(e);
			struct auth_hook_answer a = { .status = 503, .why = "the application cannot be asked" };
			tell_now(h, fn, arg, &a);
			return NULL;
		}
	}
	struct auth_wait *w = xmalloc(sizeof(*w));
	*w = (struct auth_wait){ .e = e, .fn = fn, .arg = arg };
	list_push(&e->waiters, &w->link);
	h->waiting++;
	h->m->auth_waiting++;
	return w;
}

void auth_hook_cancel(struct auth_wait *w)
{
	if (!w)
		return;
	struct entry *e = w->e;
	struct auth_hook *h = e->h;
	list_unlink(&e->waiters, &w->link);
	free(w);
	h->waiting--;
	h->m->auth_waiting--;
	if (list_empty(&e->waiters) && e->call && !e->telling) {
		/* Nobody wants the answer any more. */
		http_client_cancel(e->call);
		e->call = NULL;
		drop(e);
	}
}
