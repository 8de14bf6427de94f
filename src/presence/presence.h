/* SPDX-License-Identifier: BSD-2-Clause */
/* presence.h: who reads which topic. Every open stream is registered with
 * its reduced topic patterns (none asked: "*") and, when it presented a
 * signed token with a "sub", its subject; the counts live in a
 * presence_table (presence_table.h): this process's own, or in a worker of
 * a group the group's shared one, so an answer covers every worker.
 *
 * A stream counts for topic T when one of its patterns matches T (the
 * patterns of one stream never overlap once reduced, so it counts once):
 * the readers of T are the sum over the patterns that match T ("room/1",
 * "room/" "*", "*") of the streams registered under each. Opening and closing
 * cost in proportion to the stream's patterns; nothing is added to the
 * delivery of events.
 *
 * With presence_events on, a subject's first stream on a pattern is a join
 * and its last one closing is a leave, each an event appended to the log
 * (type presence.join or presence.leave, private, on the topic
 * PRESENCE_TOPIC_PREFIX + pattern, data {"action","topic","subject"}). A
 * leave waits presence_grace: a stream of the same subject on the same
 * pattern within it (a reconnect, here or on another worker) is neither a
 * leave nor a join. */
#ifndef HERALD_PRESENCE_H
#define HERALD_PRESENCE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/config.h"
#include "hub/hub.h"
#include "common/loop.h"
#include "core/metrics.h"
#include "store/store.h"

/* herald's own topics begin with '$', which no publisher may write
 * (topic.h); readers granted them may read them. */
#define PRESENCE_TOPIC_PREFIX "$presence/"

struct presence;
struct presence_redis;

/* One stream's registration (opaque), owned by the presence until
 * presence_unregister. */
struct presence_reg;

/* A registry for this process, or in a worker of a group on the group's
 * shared table; join and leave events are appended to st (and hub told)
 * when cfg says so. st and hub may be NULL (no events: unit tests).
 * Returns NULL with errno set when the table cannot be mapped. */
struct presence *presence_new(struct loop *lp, struct store *st, struct hub *hub, const struct config *cfg,
			      struct metrics *m);

/* Free p (NULL: nothing) once every registration is gone, before the
 * store: join and leave events not yet stored get one attempt
 * (event_batch_close), and what the log does not take is dropped with an
 * error line. */
void presence_free(struct presence *p);

/* Count a stream that reads the n valid patterns (reduced: none covers
 * another; n == 0: every topic), with subject (NULL: none). Copies what
 * it keeps. Never NULL. */
struct presence_reg *presence_register(struct presence *p, char *const *patterns, size_t n, const char *subject);

/* The stream closed: count it out (NULL: nothing); reg is freed (the one
 * of a stream of every topic with no subject is shared, and kept). */
void presence_unregister(struct presence *p, struct presence_reg *reg);

/* What an asker may learn. */
struct presence_scope {
	bool every_topic;    /* any topic; else only those the grants cover */
	char *const *grants; /* topic patterns (a token's presence claim) */
	size_t ngrants;
	bool subjects; /* subjects may be shown */
};

/* Whether scope covers topic (a valid pattern). */
bool presence_scope_covers(const struct presence_scope *s, const char *topic);

/* The answer for the n topics (valid patterns the scope covers), or with
 * n == 0 the topics with the most readers the scope covers (at most
 * cfg->presence_top): {"topics": {"T": {"readers": N, "subjects": [...],
 * "subjects_total": M}}}, with at most cfg->presence_limit subjects per
 * topic (sorted), and "subjects" only when the scope allows them. Returns
 * a new NUL-terminated buffer (the caller frees it) and its length. */
char *presence_answer(struct presence *p, char *const *topics, size_t n, const struct presence_scope *scope,
		      size_t *len);

/* The answer of presence_answer, for the whole cluster when the event log
 * is on Redis (every live node's share summed there; cb then runs later,
 * from the loop) or for this process or group otherwise (cb runs before
 * this returns), each topic answered under its label (labels NULL: under
 * the topic itself; a Mercure topic is counted under another name,
 * mercure.h, and answered under its own). cb owns body (free it); body
 * NULL: Redis cannot answer now. topics, labels and scope are copied. */
typedef void presence_answer_cb(void *arg, char *body, size_t len);
void presence_ask(struct presence *p, char *const *topics, char *const *labels, size_t n,
		  const struct presence_scope *scope, presence_answer_cb *cb, void *arg);

/* The readers of topic (a valid pattern) in this process or group, as an
 * answer counts them. */
size_t presence_readers(struct presence *p, const char *topic);

/* This node's share in Redis when the event log is there (p's, lent), so
 * that the Mercure endpoint's subscriptions live beside the counts
 * (presence_redis.h); NULL otherwise or for NULL p. */
struct presence_redis *presence_share(struct presence *p);

#endif
