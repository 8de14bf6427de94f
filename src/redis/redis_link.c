/* SPDX-License-Identifier: BSD-2-Clause */
/* redis_link.c: a Redis connection's life, for every user of Redis (see
 * redis_link.h). A link owns its hiredis context (NULL while down), its
 * reconnect timer and backoff, and, through Sentinel, a finder of its own
 * for asking where the primary is. The +switch-master subscription is not
 * a link's: one follower per sentinel list is shared by every link on it
 * in the process (a static list, the process being single-threaded), so a
 * failover is heard, and logged, once, and each link then reconnects to
 * the new primary at once, backoff reset. A connection is forgotten (its
 * pointer cleared) before it is freed, so that the NULL answers hiredis
 * gives while freeing it are told apart from a connection that failed. */
#include "redis/redis_link.h"

#include "common/log.h"
#include "common/loop.h"
#include "common/util.h"
#include "redis/redis_loop.h"
#include "redis/redis_sentinel.h"
#include "redis/redis_url.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BACKOFF_MIN_MS 100 /* first reconnect delay, doubled per failure */
#define BACKOFF_MAX_MS 5000

struct follower;

struct redis_link {
	struct loop *lp;
	struct redis_link_hooks hooks;
	char label[64];
	struct redis_url url;            /* through Sentinel: the primary last named */
	char where[REDIS_URL_MAX + 600]; /* without password, for logs */
	struct redis_sentinel *asker;    /* NULL unless through Sentinel */
	struct follower *fol;            /* the shared follower, likewise */
	struct redis_link *next;         /* among fol's links */

	redisAsyncContext *ac; /* NULL while down */
	bool running;          /* started and not stopped: tries go on */
	bool asking;           /* Sentinel asked where the primary is */
	uint64_t backoff_ms;
	struct loop_timer timer;
};

/* One +switch-master subscription per sentinel list and master. */
struct follower {
	char *key; /* "master list" */
	struct redis_sentinel *s;
	struct redis_link *links;
	struct follower *next;
};

static struct follower *followers;

/* ---- losing and reconnecting ---- */

static void connect_now(void *arg);

/* The connection is gone (or bad: closed here); tell the user if tell, then
 * try again after the backoff unless the user stopped the link or a try
 * is already due. The try is logged at debug level: the user says an
 * outage in its own words. */
static void lose(struct redis_link *l, const char *why, bool tell)
{
	redisAsyncContext *ac = l->ac;
	l->ac = NULL;
	if (ac)
		redisAsyncFree(ac); /* inside its own callback, hiredis frees it after */
	if (tell)
		l->hooks.down(l->hooks.arg, why);
	if (!l->running || l->ac || l->asking || loop_timer_active(&l->timer))
		return;
	log_debug("%s %s: %s; trying again in %llu ms", l->label, l->where, why, (unsigned long long)l->backoff_ms);
	loop_timer_start(l->lp, &l->timer, l->backoff_ms, connect_now, l);
	l->backoff_ms = MIN(l->backoff_ms * 2, (uint64_t)BACKOFF_MAX_MS);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
	struct redis_link *l = ac->data;
	if (ac != l->ac)
		return; /* freed here */
	l->ac = NULL;
	lose(l, status == REDIS_OK ? "the server closed the connection" : (ac->errstr[0] ? ac->errstr : "error"), true);
}

static void on_connect(const redisAsyncContext *ac, int status)
{
	struct redis_link *l = ac->data;
	if (status == REDIS_OK) {
		if (!l->url.path[0]) /* a dead peer over TCP is noticed in minutes, not hours */
			redisEnableKeepAlive((redisContext *)&ac->c);
		return;
	}
	on_disconnect(ac, REDIS_ERR); /* hiredis frees it after this returns */
}

/* AUTH's or SELECT's answer. */
static void on_setup(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct redis_link *l = privdata;
	const redisReply *r = reply;
	if (!r || ac != l->ac || r->type != REDIS_REPLY_ERROR)
		return;
	log_err("%s %s: %s", l->label, l->where, r->str);
	lose(l, "setting up the connection failed", true);
}

/* ROLE's answer, through Sentinel: a server demoted since it was named is
 * left, and Sentinel asked again. */
static void on_role(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct redis_link *l = privdata;
	const redisReply *r = reply;
	if (!r || ac != l->ac)
		return;
	if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 || r->element[0]->type != REDIS_REPLY_STRING ||
	    strcmp(r->element[0]->str, "master") != 0)
		lose(l, "not a primary (ROLE); asking Sentinel again", true);
}

/* AUTH and SELECT as the URL asks, argv ready for either kind of
 * connection; returns how many (0 to 2) went into cmds. */
struct login_cmd {
	int argc;
	const char *argv[3];
};

static size_t login_cmds(const struct redis_link *l, char *db, size_t dblen, struct login_cmd *cmds)
{
	size_t n = 0;
	snprintf(db, dblen, "%d", l->url.db);
	if (l->url.password[0] && l->url.user[0])
		cmds[n++] = (struct login_cmd){ 3, { "AUTH", l->url.user, l->url.password } };
	else if (l->url.password[0])
		cmds[n++] = (struct login_cmd){ 2, { "AUTH", l->url.password, NULL } };
	if (l->url.db)
		cmds[n++] = (struct login_cmd){ 2, { "SELECT", db, NULL } };
	return n;
}

/* Open the connection to l->url, queue the login, and hand it over. */
static void open_conn(struct redis_link *l)
{
	char err[128];
	redisAsyncContext *ac = redis_loop_connect(l->lp, l->url.host, l->url.port, l->url.path, l, on_connect,
						   on_disconnect, err, sizeof(err));
	if (!ac) {
		lose(l, err, true);
		return;
	}
	l->ac = ac;
	char db[16];
	struct login_cmd cmds[2];
	size_t n = login_cmds(l, db, sizeof(db), cmds);
	for (size_t i = 0; i < n; i++)
		redisAsyncCommandArgv(ac, on_setup, l, cmds[i].argc, cmds[i].argv, NULL);
	if (l->asker) {
		const char *role[1] = { "ROLE" };
		redisAsyncCommandArgv(ac, on_role, l, 1, role, NULL);
	}
	l->hooks.up(l->hooks.arg, ac);
}

static void set_primary(struct redis_link *l, const char *host, int port)
{
	snprintf(l->url.host, sizeof(l->url.host), "%s", host);
	l->url.port = port;
	bool v6 = strchr(host, ':') != NULL;
	snprintf(l->where, sizeof(l->where), "%s%s%s:%d (%s)", v6 ? "[" : "", host, v6 ? "]" : "", port,
		 redis_sentinel_describe(l->asker));
}

/* Sentinel's answer to where the primary is: connect there. */
static void on_primary(void *arg, const char *host, int port)
{
	struct redis_link *l = arg;
	l->asking = false;
	if (!host) {
		snprintf(l->where, sizeof(l->where), "%s", redis_sentinel_describe(l->asker));
		lose(l, "no sentinel named the primary", true);
		return;
	}
	set_primary(l, host, port);
	open_conn(l);
}

static void connect_now(void *arg)
{
	struct redis_link *l = arg;
	if (!l->running || l->ac || l->asking)
		return;
	if (!l->asker) {
		open_conn(l);
		return;
	}
	l->asking = true;
	redis_sentinel_ask(l->asker, on_primary, l);
}

static void cancel_ask(struct redis_link *l)
{
	if (l->asking) {
		l->asking = false;
		redis_sentinel_ask(l->asker, NULL, NULL);
	}
}

/* ---- following failovers ---- */

/* A failover announced: leave the old primary now, and connect to the new
 * one without waiting out the backoff. A connection already there (made
 * after asking Sentinel, set up or on its way) is kept: the store's two
 * links would otherwise start over for nothing. */
static void link_switch(struct redis_link *l, const char *host, int port)
{
	if (!l->running || (l->ac && strcmp(host, l->url.host) == 0 && port == l->url.port))
		return;
	cancel_ask(l); /* an answer from before the move may be stale */
	loop_timer_stop(l->lp, &l->timer);
	if (l->ac) {
		redisAsyncContext *ac = l->ac;
		l->ac = NULL;
		redisAsyncFree(ac);
		l->hooks.down(l->hooks.arg, "Sentinel moved the primary");
		if (!l->running || l->ac) /* stopped, or started again, by the user */
			return;
		cancel_ask(l);
		loop_timer_stop(l->lp, &l->timer);
	}
	l->backoff_ms = BACKOFF_MIN_MS;
	set_primary(l, host, port);
	open_conn(l);
}

static void on_switch(void *arg, const char *host, int port)
{
	struct follower *f = arg;
	struct redis_link *next;
	for (struct redis_link *l = f->links; l; l = next) {
		next = l->next;
		link_switch(l, host, port);
	}
}

static struct follower *follower_join(struct redis_link *l, struct loop *lp, const char *list, const char *master,
				      char *err, size_t errlen)
{
	size_t len = strlen(master) + 1 + strlen(list) + 1;
	char *key = xmalloc(len);
	snprintf(key, len, "%s %s", master, list);
	struct follower *f = followers;
	while (f && strcmp(f->key, key) != 0)
		f = f->next;
	if (f) {
		free(key);
	} else {
		struct redis_sentinel *s = redis_sentinel_new(lp, list, master, err, errlen);
		if (!s) {
			free(key);
			return NULL;
		}
		f = xcalloc(1, sizeof(*f));
		*f = (struct follower){ key, s, NULL, followers };
		followers = f;
	}
	l->next = f->links;
	f->links = l;
	return f;
}

static void follower_leave(struct redis_link *l)
{
	struct follower *f = l->fol;
	if (!f)
		return;
	for (struct redis_link **pp = &f->links; *pp; pp = &(*pp)->next)
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	if (f->links)
		return;
	for (struct follower **pp = &followers; *pp; pp = &(*pp)->next)
		if (*pp == f) {
			*pp = f->next;
			break;
		}
	redis_sentinel_free(f->s);
	free(f->key);
	free(f);
}

/* ---- the interface ---- */

struct redis_link *redis_link_new(struct loop *lp, const struct redis_link_spec *spec,
				  const struct redis_link_hooks *hooks, char *err, size_t errlen)
{
	struct redis_link *l = xcalloc(1, sizeof(*l));
	l->lp = lp;
	l->hooks = *hooks;
	l->backoff_ms = BACKOFF_MIN_MS;
	snprintf(l->label, sizeof(l->label), "%s", spec->label);
	if (spec->sentinels && spec->sentinels[0]) {
		l->asker = redis_sentinel_new(lp, spec->sentinels, spec->master, err, errlen);
		if (!l->asker) {
			free(l);
			return NULL;
		}
		l->fol = follower_join(l, lp, spec->sentinels, spec->master, err, errlen);
		if (!l->fol) {
			redis_sentinel_free(l->asker);
			free(l);
			return NULL;
		}
		snprintf(l->where, sizeof(l->where), "%s", redis_sentinel_describe(l->asker));
		l->url.port = 6379;
		return l;
	}
	redis_url_redact(spec->url, l->where, sizeof(l->where));
	const char *why = redis_url_parse(spec->url, &l->url);
	if (why) {
		snprintf(err, errlen, "redis_url %s: %s", l->where, why);
		free(l);
		return NULL;
	}
	return l;
}

void redis_link_start(struct redis_link *l, bool now)
{
	l->running = true;
	if (l->fol)
		redis_sentinel_follow(l->fol->s, on_switch, l->fol);
	if (l->ac || l->asking || loop_timer_active(&l->timer))
		return;
	if (now)
		connect_now(l);
	else
		loop_timer_start(l->lp, &l->timer, 0, connect_now, l);
}

void redis_link_stop(struct redis_link *l)
{
	l->running = false;
	loop_timer_stop(l->lp, &l->timer);
	if (l->asker)
		cancel_ask(l);
	redisAsyncContext *ac = l->ac;
	l->ac = NULL;
	if (ac)
		redisAsyncFree(ac); /* answers out come back NULL */
}

void redis_link_drop(struct redis_link *l, const char *why)
{
	lose(l, why, false);
}

void redis_link_works(struct redis_link *l)
{
	l->backoff_ms = BACKOFF_MIN_MS;
}

bool redis_link_readonly(struct redis_link *l, const redisReply *r)
{
	if (!r || r->type != REDIS_REPLY_ERROR || strncmp(r->str, "READONLY", 8) != 0)
		return false;
	if (l->ac) {
		log_notice("%s %s: %s; leaving it (a replica now)", l->label, l->where, r->str);
		lose(l, "the server is a replica now", true);
	}
	return true;
}

const char *redis_link_where(const struct redis_link *l)
{
	return l->where;
}

void *redis_link_user(const redisAsyncContext *ac)
{
	const struct redis_link *l = ac->data;
	return l->hooks.arg;
}

redisContext *redis_link_connect_now(struct redis_link *l, int timeout_ms, char *err, size_t errlen)
{
	if (l->asker) {
		char host[256], why[900];
		int port;
		if (redis_sentinel_ask_now(l->asker, timeout_ms, host, sizeof(host), &port, why, sizeof(why)) < 0) {
			const char *d = redis_sentinel_describe(l->asker);
			snprintf(err, errlen, "no sentinel named the primary of %.*s: %s", (int)strcspn(d, " "), d,
				 why);
			return NULL;
		}
		set_primary(l, host, port);
	}
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	redisContext *c = l->url.path[0] ? redisConnectUnixWithTimeout(l->url.path, tv)
					 : redisConnectWithTimeout(l->url.host, l->url.port, tv);
	if (!c || c->err) {
		snprintf(err, errlen, "connecting to %s: %s", l->where, c ? c->errstr : "out of memory");
		redisFree(c);
		return NULL;
	}
	redisSetTimeout(c, tv);
	char db[16];
	struct login_cmd cmds[3];
	size_t n = login_cmds(l, db, sizeof(db), cmds);
	if (l->asker)
		cmds[n++] = (struct login_cmd){ 1, { "ROLE", NULL, NULL } };
	for (size_t i = 0; i < n; i++) {
		redisReply *r = redisCommandArgv(c, cmds[i].argc, cmds[i].argv, NULL);
		bool ok = r && r->type != REDIS_REPLY_ERROR;
		if (!r)
			snprintf(err, errlen, "%s at %s: %s", cmds[i].argv[0], l->where, c->errstr);
		else if (!ok)
			snprintf(err, errlen, "%s at %s: %s", cmds[i].argv[0], l->where, r->str);
		else if (strcmp(cmds[i].argv[0], "ROLE") == 0 &&
			 (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
			  r->element[0]->type != REDIS_REPLY_STRING || strcmp(r->element[0]->str, "master") != 0)) {
			snprintf(err, errlen, "%s is not a primary (ROLE), though Sentinel names it", l->where);
			ok = false;
		}
		freeReplyObject(r);
		if (!ok) {
			redisFree(c);
			return NULL;
		}
	}
	return c;
}

void redis_link_free(struct redis_link *l)
{
	if (!l)
		return;
	redis_link_stop(l);
	follower_leave(l);
	redis_sentinel_free(l->asker);
	free(l);
}
