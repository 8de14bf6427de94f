/* SPDX-License-Identifier: BSD-2-Clause */
/* redis_sentinel.c: the primary's address from Redis Sentinel. Owns the
 * parsed list of sentinels and two kinds of connection, each driven by the
 * loop: a short-lived one per question (SENTINEL get-master-addr-by-name,
 * bounded by ASK_TIMEOUT_MS, then the next sentinel), and one long-lived
 * subscription to +switch-master. A connection is forgotten (its pointer
 * cleared) before it is freed, so that the NULL answers hiredis gives while
 * freeing it are told apart from a connection that failed on its own. */
#include "redis/redis_sentinel.h"

#include "common/log.h"
#include "common/loop.h"
#include "redis/redis_loop.h"
#include "common/util.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ASK_TIMEOUT_MS 1000 /* one sentinel's answer, at most */
#define FOLLOW_RETRY_MS 1000

struct sentinel_addr {
	char host[256];
	int port;
};

struct redis_sentinel {
	struct loop *lp;
	char master[256];
	char describe[512];
	struct sentinel_addr addr[REDIS_SENTINEL_MAX];
	size_t n;

	/* The question out: asked of addr[ask_idx] on ask_ac. */
	redisAsyncContext *ask_ac;
	size_t ask_idx;
	redis_sentinel_cb *ask_cb;
	void *ask_arg;
	struct loop_timer ask_timer;

	/* The subscription, on addr[follow_idx]. */
	redisAsyncContext *follow_ac;
	size_t follow_idx;
	redis_sentinel_cb *follow_cb;
	void *follow_arg;
	struct loop_timer follow_timer;
};

/* ---- the list ---- */

/* One entry "host[:port]" of n bytes into a; NULL or the reason. */
static const char *parse_entry(const char *s, size_t n, struct sentinel_addr *a)
{
	const char *host = s, *port = NULL;
	size_t hlen = n;
	if (n && s[0] == '[') {
		const char *end = memchr(s, ']', n);
		if (!end)
			return "an IPv6 address needs its closing ]";
		host = s + 1;
		hlen = (size_t)(end - host);
		if (end + 1 < s + n) {
			if (end[1] != ':')
				return "only :port may follow ]";
			port = end + 2;
		}
	} else {
		const char *colon = memchr(s, ':', n);
		if (colon) {
			if (memchr(colon + 1, ':', (size_t)(s + n - colon - 1)))
				return "an IPv6 address goes in [ ]";
			hlen = (size_t)(colon - s);
			port = colon + 1;
		}
	}
	if (hlen == 0)
		return "an entry has no host";
	if (hlen >= sizeof(a->host))
		return "a host name is too long";
	for (size_t i = 0; i < hlen; i++)
		if (host[i] <= ' ' || host[i] == ',' || host[i] == '/' || host[i] == '@')
			return "a host has only letters, digits, . - : and _";
	memcpy(a->host, host, hlen);
	a->host[hlen] = '\0';
	a->port = REDIS_SENTINEL_PORT;
	if (port) {
		long v = 0;
		const char *p = port;
		for (; p < s + n && *p >= '0' && *p <= '9' && v <= 65535; p++)
			v = v * 10 + (*p - '0');
		if (p == port || p != s + n || v < 1 || v > 65535)
			return "a port is a number from 1 to 65535";
		a->port = (int)v;
	}
	return NULL;
}

/* Parse list into addr (up to REDIS_SENTINEL_MAX); NULL or the reason. */
static const char *parse_list(const char *list, struct sentinel_addr *addr, size_t *n, char *buf, size_t len)
{
	*n = 0;
	const char *p = list;
	while (*p) {
		while (*p == ' ' || *p == '\t')
			p++;
		const char *end = strchr(p, ',');
		if (!end)
			end = p + strlen(p);
		const char *last = end;
		while (last > p && (last[-1] == ' ' || last[-1] == '\t'))
			last--;
		if (*n == REDIS_SENTINEL_MAX) {
			snprintf(buf, len, "more than %d sentinels", REDIS_SENTINEL_MAX);
			return buf;
		}
		const char *why = parse_entry(p, (size_t)(last - p), &addr[*n]);
		if (why) {
			snprintf(buf, len, "%s (entry %zu)", why, *n + 1);
			return buf;
		}
		(*n)++;
		p = *end ? end + 1 : end;
	}
	if (*n == 0) {
		snprintf(buf, len, "no sentinel named (host:port, comma-separated)");
		return buf;
	}
	return NULL;
}

const char *redis_sentinel_check_list(const char *list, char *buf, size_t len)
{
	struct sentinel_addr addr[REDIS_SENTINEL_MAX];
	size_t n;
	return parse_list(list, addr, &n, buf, len);
}

struct redis_sentinel *redis_sentinel_new(struct loop *lp, const char *list, const char *master, char *err,
					  size_t errlen)
{
	struct redis_sentinel *s = xcalloc(1, sizeof(*s));
	if (parse_list(list, s->addr, &s->n, err, errlen)) {
		free(s);
		return NULL;
	}
	s->lp = lp;
	snprintf(s->master, sizeof(s->master), "%s", master);
	snprintf(s->describe, sizeof(s->describe), "%s via Sentinel %s", master, list);
	return s;
}

const char *redis_sentinel_describe(const struct redis_sentinel *s)
{
	return s->describe;
}

/* The answer to get-master-addr-by-name: true with the address if it is
 * one ([host, port]). */
static bool addr_from_reply(const redisReply *r, char *host, size_t hostlen, int *port)
{
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_STRING ||
	    r->element[1]->type != REDIS_REPLY_STRING || r->element[0]->len >= hostlen)
		return false;
	long p = strtol(r->element[1]->str, NULL, 10);
	if (p < 1 || p > 65535)
		return false;
	memcpy(host, r->element[0]->str, r->element[0]->len);
	host[r->element[0]->len] = '\0';
	*port = (int)p;
	return true;
}

/* Why an answer is not an address, for the start-up error. */
static const char *reply_why(const redisReply *r)
{
	if (r && r->type == REDIS_REPLY_ERROR)
		return r->str;
	if (r && r->type == REDIS_REPLY_NIL)
		return "this sentinel does not monitor that master";
	return "an answer that is not an address";
}

int redis_sentinel_ask_now(struct redis_sentinel *s, int timeout_ms, char *host, size_t hostlen, int *port, char *err,
			   size_t errlen)
{
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	size_t used = 0;
	err[0] = '\0';
	for (size_t i = 0; i < s->n; i++) {
		const struct sentinel_addr *a = &s->addr[i];
		redisContext *c = redisConnectWithTimeout(a->host, a->port, tv);
		char why[300];
		bool ok = false;
		if (!c || c->err) {
			snprintf(why, sizeof(why), "%s", c ? c->errstr : "out of memory");
		} else {
			redisSetTimeout(c, tv);
			const char *argv[3] = { "SENTINEL", "get-master-addr-by-name", s->master };
			redisReply *r = redisCommandArgv(c, 3, argv, NULL);
			ok = addr_from_reply(r, host, hostlen, port);
			snprintf(why, sizeof(why), "%s", r ? reply_why(r) : c->errstr);
			freeReplyObject(r);
		}
		redisFree(c);
		if (ok)
			return 0;
		int w = snprintf(err + used, errlen - used, "%s%s:%d: %s", used ? "; " : "", a->host, a->port, why);
		if (w > 0)
			used = (size_t)w >= errlen - used ? errlen - 1 : used + (size_t)w;
	}
	return -1;
}

/* ---- asking from the loop ---- */

static void ask_next(void *arg);

/* Drop the question's connection (if any) and go on to the next sentinel,
 * from the loop rather than inside hiredis' callback. */
static void ask_failed(struct redis_sentinel *s, bool free_it)
{
	redisAsyncContext *ac = s->ask_ac;
	s->ask_ac = NULL;
	if (ac && free_it)
		redisAsyncFree(ac);
	s->ask_idx++;
	loop_timer_start(s->lp, &s->ask_timer, 0, ask_next, s);
}

static void on_ask_connect(const redisAsyncContext *ac, int status)
{
	struct redis_sentinel *s = ac->data;
	if (status != REDIS_OK && ac == s->ask_ac)
		ask_failed(s, false); /* hiredis frees it */
}

static void on_ask_disconnect(const redisAsyncContext *ac, int status)
{
	struct redis_sentinel *s = ac->data;
	(void)status;
	if (ac == s->ask_ac)
		ask_failed(s, false);
}

static void on_ask_answer(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct redis_sentinel *s = privdata;
	if (ac != s->ask_ac)
		return; /* being freed */
	char host[256];
	int port;
	if (!addr_from_reply(reply, host, sizeof(host), &port)) {
		const struct sentinel_addr *a = &s->addr[s->ask_idx];
		log_debug("redis: sentinel %s:%d: %s", a->host, a->port, reply ? reply_why(reply) : "no answer");
		ask_failed(s, reply != NULL); /* NULL: hiredis is freeing it */
		return;
	}
	s->ask_ac = NULL;
	redisAsyncFree(ac);
	loop_timer_stop(s->lp, &s->ask_timer);
	redis_sentinel_cb *cb = s->ask_cb;
	s->ask_cb = NULL;
	cb(s->ask_arg, host, port);
}

/* The question's timer: a sentinel that did not answer in time, or the
 * next one to ask. */
static void ask_next(void *arg)
{
	struct redis_sentinel *s = arg;
	if (s->ask_ac) {
		log_debug("redis: sentinel %s:%d: no answer within %d ms", s->addr[s->ask_idx].host,
			  s->addr[s->ask_idx].port, ASK_TIMEOUT_MS);
		ask_failed(s, true);
		return;
	}
	if (s->ask_idx >= s->n) {
		redis_sentinel_cb *cb = s->ask_cb;
		s->ask_cb = NULL;
		if (cb)
			cb(s->ask_arg, NULL, 0);
		return;
	}
	const struct sentinel_addr *a = &s->addr[s->ask_idx];
	char err[128];
	redisAsyncContext *ac = redis_loop_connect(s->lp, a->host, a->port, NULL, s, on_ask_connect, on_ask_disconnect,
						   err, sizeof(err));
	if (!ac) {
		log_debug("redis: sentinel %s:%d: %s", a->host, a->port, err);
		ask_failed(s, false);
		return;
	}
	s->ask_ac = ac;
	const char *argv[3] = { "SENTINEL", "get-master-addr-by-name", s->master };
	redisAsyncCommandArgv(ac, on_ask_answer, s, 3, argv, NULL);
	loop_timer_start(s->lp, &s->ask_timer, ASK_TIMEOUT_MS, ask_next, s);
}

static void ask_stop(struct redis_sentinel *s)
{
	loop_timer_stop(s->lp, &s->ask_timer);
	redisAsyncContext *ac = s->ask_ac;
	s->ask_ac = NULL;
	if (ac)
		redisAsyncFree(ac);
	s->ask_cb = NULL;
}

void redis_sentinel_ask(struct redis_sentinel *s, redis_sentinel_cb *cb, void *arg)
{
	ask_stop(s);
	if (!cb)
		return;
	s->ask_cb = cb;
	s->ask_arg = arg;
	s->ask_idx = 0;
	ask_next(s);
}

/* ---- following failovers ---- */

static void follow_start(void *arg);

/* The subscription's connection failed: the next sentinel, a little later. */
static void follow_failed(struct redis_sentinel *s, const char *why)
{
	const struct sentinel_addr *a = &s->addr[s->follow_idx];
	log_debug("redis: sentinel %s:%d: %s; following failovers through the next one", a->host, a->port, why);
	s->follow_ac = NULL;
	s->follow_idx = (s->follow_idx + 1) % s->n;
	loop_timer_start(s->lp, &s->follow_timer, FOLLOW_RETRY_MS, follow_start, s);
}

static void on_follow_connect(const redisAsyncContext *ac, int status)
{
	struct redis_sentinel *s = ac->data;
	if (status == REDIS_OK) {
		redisEnableKeepAlive((redisContext *)&ac->c);
		return;
	}
	if (ac == s->follow_ac)
		follow_failed(s, ac->errstr[0] ? ac->errstr : "could not connect");
}

static void on_follow_disconnect(const redisAsyncContext *ac, int status)
{
	struct redis_sentinel *s = ac->data;
	(void)status;
	if (ac == s->follow_ac)
		follow_failed(s, "the connection closed");
}

/* A message on the subscription: ["message", "+switch-master", "<master>
 * <old-ip> <old-port> <new-ip> <new-port>"], or the subscription's own
 * confirmation. */
static void on_follow_message(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct redis_sentinel *s = privdata;
	const redisReply *r = reply;
	if (!r || ac != s->follow_ac)
		return;
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 || r->element[0]->type != REDIS_REPLY_STRING ||
	    strcmp(r->element[0]->str, "message") != 0 || r->element[2]->type != REDIS_REPLY_STRING)
		return;
	char name[256], old_host[256], host[256];
	int old_port, port;
	if (sscanf(r->element[2]->str, "%255s %255s %d %255s %d", name, old_host, &old_port, host, &port) != 5 ||
	    strcmp(name, s->master) != 0 || port < 1 || port > 65535)
		return;
	log_notice("redis: Sentinel: the primary of %s moved from %s:%d to %s:%d", s->master, old_host, old_port, host,
		   port);
	if (s->follow_cb)
		s->follow_cb(s->follow_arg, host, port);
}

static void follow_start(void *arg)
{
	struct redis_sentinel *s = arg;
	const struct sentinel_addr *a = &s->addr[s->follow_idx];
	char err[128];
	redisAsyncContext *ac = redis_loop_connect(s->lp, a->host, a->port, NULL, s, on_follow_connect,
						   on_follow_disconnect, err, sizeof(err));
	if (!ac) {
		follow_failed(s, "could not start a connection");
		return;
	}
	s->follow_ac = ac;
	const char *argv[2] = { "SUBSCRIBE", "+switch-master" };
	redisAsyncCommandArgv(ac, on_follow_message, s, 2, argv, NULL);
}

void redis_sentinel_follow(struct redis_sentinel *s, redis_sentinel_cb *cb, void *arg)
{
	s->follow_cb = cb;
	s->follow_arg = arg;
	if (!s->follow_ac && !loop_timer_active(&s->follow_timer))
		follow_start(s);
}

void redis_sentinel_free(struct redis_sentinel *s)
{
	if (!s)
		return;
	ask_stop(s);
	loop_timer_stop(s->lp, &s->follow_timer);
	redisAsyncContext *ac = s->follow_ac;
	s->follow_ac = NULL;
	if (ac)
		redisAsyncFree(ac);
	free(s);
}
