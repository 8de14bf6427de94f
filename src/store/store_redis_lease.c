/* SPDX-License-Identifier: BSD-2-Clause */
/* store_redis_lease.c: store_lease on Redis (store.h): the lease of name is
 * the key {stream}:name:lease, holding its owner and expiring by itself
 * (PX), its cursor {stream}:name:cursor; the function herald_lease
 * (store_redis.lua) reads and writes both in one call, so two nodes never
 * both hold it. Answered when Redis answers; -ENOTCONN while it is down or
 * when the connection goes with the call out. */
#include "store/store_redis_private.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/log.h"
#include "common/util.h"

struct lease_call {
	struct store_redis *st;
	store_lease_cb done;
	void *arg;
};

static void on_lease(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct lease_call *l = privdata;
	struct store_redis *st = l->st;
	redisReply *r = store_redis_answer(st, reply);
	(void)ac;
	if (!r) {
		l->done(l->arg, -ENOTCONN, false, 0);
	} else if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[0]->type == REDIS_REPLY_INTEGER &&
		   r->element[1]->type == REDIS_REPLY_INTEGER) {
		st->lease_failing = false;
		l->done(l->arg, 0, r->element[0]->integer == 1, r->element[1]->integer);
	} else {
		/* Asked each second (a node whose library has no herald_lease
		 * loaded it last, in a rolling upgrade): said once a run. */
		if (!st->lease_failing)
			log_err("redis: herald_lease at %s: %s", store_redis_where(st),
				r->type == REDIS_REPLY_ERROR ? r->str : "unexpected answer");
		st->lease_failing = true;
		l->done(l->arg, -EIO, false, 0);
	}
	free(l);
}

/* The stream's hash tag on both keys: one slot with it. */
void store_redis_lease(void *be, const char *name, int64_t owner, uint64_t ttl_ms, int64_t cursor, store_lease_cb done,
		       void *arg)
{
	struct store_redis *st = be;
	char k_lease[320], k_cursor[320], o[24], t[24], c[24];
	snprintf(k_lease, sizeof(k_lease), "{%s}:%s:lease", st->cfg->redis_stream, name);
	snprintf(k_cursor, sizeof(k_cursor), "{%s}:%s:cursor", st->cfg->redis_stream, name);
	snprintf(o, sizeof(o), "%" PRId64, owner);
	snprintf(t, sizeof(t), "%" PRIu64, ttl_ms);
	snprintf(c, sizeof(c), "%" PRId64, cursor);
	const char *argv[8] = { "FCALL", "herald_lease", "2", k_lease, k_cursor, o, t, c };
	struct lease_call *l = xmalloc(sizeof(*l));
	*l = (struct lease_call){ st, done, arg };
	if (store_redis_send(st, on_lease, l, 8, argv) < 0) {
		free(l);
		done(arg, -ENOTCONN, false, 0);
	}
}
