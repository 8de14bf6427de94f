/* SPDX-License-Identifier: BSD-2-Clause */
/* store_redis_connect.c: the Redis backend's start-up, before the loop
 * runs (store_redis_sync_connect): the command link's blocking connection
 * (login, ROLE through Sentinel), herald's function library loaded, the
 * counter and the pruned-through id read, and the log's identity (the
 * number Mercure ids are made from) read or set once for every node. */
#include "store/store_redis_private.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/util.h"
#include "redis/redis_link.h"
#include "store/mercure_update.h"
#include "store/store_redis.h"

#define CONNECT_TIMEOUT_MS 2000 /* at start-up only, before the loop runs */

static int log_identity(struct store_redis *st, redisContext *c, char *err, size_t errlen)
{
	uint64_t mine;
	random_bytes(&mine, sizeof(mine));
	char made[24];
	snprintf(made, sizeof(made), "%llu", (unsigned long long)(mine & ((UINT64_C(1) << 48) - 1)));
	const char *set[] = { "SET", st->key_identity, made, "NX" }, *get[] = { "GET", st->key_identity };
	redisReply *r = redisCommandArgv(c, 4, set, NULL);
	if (r && r->type != REDIS_REPLY_ERROR) {
		freeReplyObject(r);
		r = redisCommandArgv(c, 2, get, NULL);
	}
	char *end = NULL;
	unsigned long long v = r && r->type == REDIS_REPLY_STRING ? strtoull(r->str, &end, 10) : 0;
	if (!r || r->type != REDIS_REPLY_STRING || !end || *end) {
		snprintf(err, errlen, "reading the log's identity (%s) at %s: %s", st->key_identity,
			 store_redis_where(st),
			 !r                             ? c->errstr
			 : r->type == REDIS_REPLY_ERROR ? r->str
							: "not a number");
		if (r)
			freeReplyObject(r);
		return -1;
	}
	freeReplyObject(r);
	mercure_log_identity_set(v);
	return 0;
}

int store_redis_sync_connect(struct store_redis *st, char *err, size_t errlen)
{
	redisContext *c = redis_link_connect_now(st->cmd_link, CONNECT_TIMEOUT_MS, err, errlen);
	if (!c)
		return -1;
	char zero[] = "0";
	struct step {
		const char *what;
		int argc;
		const char *argv[6];
	} steps[] = {
		{ "loading herald's function (FUNCTION LOAD)",
		  4,
		  { "FUNCTION", "LOAD", "REPLACE", store_redis_function } },
		{ "herald_floor", 6, { "FCALL", "herald_floor", "2", st->key_events, st->key_last, zero } },
	};
	int rc = 0;
	for (size_t i = 0; i < ARRAY_LEN(steps) && rc == 0; i++) {
		redisReply *r = redisCommandArgv(c, steps[i].argc, steps[i].argv, NULL);
		if (!r) {
			snprintf(err, errlen, "%s at %s: %s", steps[i].what, store_redis_where(st), c->errstr);
			rc = -1;
		} else if (r->type == REDIS_REPLY_ERROR) {
			snprintf(err, errlen, "%s at %s: %s", steps[i].what, store_redis_where(st), r->str);
			rc = -1;
		} else if (i == 1) {
			if (r->type != REDIS_REPLY_ARRAY || r->elements != 3) {
				snprintf(err, errlen, "herald_floor at %s: unexpected answer", store_redis_where(st));
				rc = -1;
			} else {
				st->counter_seen = r->element[1]->integer;
				store_window_start_at(&st->win, st->counter_seen);
				st->pruned_through = r->element[2]->integer;
			}
		}
		freeReplyObject(r);
	}
	if (rc == 0)
		rc = log_identity(st, c, err, errlen);
	redisFree(c);
	return rc;
}
