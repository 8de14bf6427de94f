/* SPDX-License-Identifier: BSD-2-Clause */
/* store_redis.c: the event log on a Redis stream, for several herald nodes
 * that serve one ordered stream. Owns two connections driven by the event
 * loop (redis_loop.c): one for commands (appends, catch-up reads, retention,
 * id checks) and one that tails the stream with XREAD BLOCK. What the tail
 * brings is kept in memory (store_window.c: the newest entries, within
 * fixed bounds), so the hub's fan-out and a reader resuming a little behind
 * read memory; older ranges are fetched with XRANGE into a few cached
 * pages, and the read that asked returns -EAGAIN until they are in. Memory
 * per node is so bounded whatever the events' size: entries the hub has not
 * fanned out yet are offered to it before they are dropped.
 *
 * Ids: the function library (store_redis.lua, loaded at every connect)
 * assigns consecutive integers from one counter and adds entry "<n>-0", so
 * every node and every other publisher share one id space, the integers
 * Last-Event-ID carries. A Mercure update's id is kept in a sorted set
 * beside the stream ({name}:mercure, trimmed with it) that every node asks
 * (herald_mercure_find) when a subscriber resumes from one. Entries are never missing between two that exist,
 * except where retention removed them: a read that finds the first entry
 * after a range's start further on than the next id learns that retention
 * removed the ones between. An entry the library did not add (another
 * program's XADD) is not an event: the tail stops at one above the counter
 * it knows and asks herald_sweep, which removes it (its id would otherwise
 * drag the next ids up to it) or says the counter has passed it (an older
 * node's unmarked event); catch-up pages skip such entries.
 *
 * Connections: two Redis links (redis_link.c: connecting, login, Sentinel
 * and its failovers, backoff), the command one always running and the tail
 * one started once the command one has set up (herald_floor answered), so
 * that an outage is one link's tries. Faults: an error, a closed connection,
 * -READONLY or an answer overdue by DEAD_AFTER_MS closes both; appends out
 * are answered -ENOTCONN, later ones too until Redis answers again; the
 * command link tries again with backoff (at once when Sentinel announces a
 * new primary); the tail resumes after the newest id seen, so nothing is
 * skipped or read twice. */
#include "store/store_redis.h"
#include "store/store_redis_private.h"

#include "core/config.h"
#include "store/idempotency.h"
#include "store/mercure_update.h"
#include "common/log.h"
#include "common/loop.h"
#include "core/metrics.h"
#include "redis/redis_link.h"
#include "store/store_backend.h"
#include "store/store_window.h"
#include "common/util.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAIL_COUNT 1000          /* entries per XREAD answer */
#define TAIL_BLOCK_MS 2000       /* how long one XREAD waits for entries */
#define DEAD_AFTER_MS 3000       /* an answer overdue by this much: the connection is dead */
#define FETCH_ROWS 512           /* entries per catch-up XRANGE, at most */
#define FETCH_BYTES (256u << 10) /* about this much per XRANGE */
#define MAX_FETCHES 32           /* catch-up XRANGEs out at once */
#define WATCHDOG_MS 500
#define SWEEP_RETRY_MS 1000 /* herald_sweep refused: asked again after */

struct fetch {
	struct store_redis *st;
	int64_t after;
	int64_t known; /* the newest id committed when it was sent */
	int count;     /* the COUNT asked for */
	struct fetch *next;
};

struct append {
	struct store_redis *st;
	store_append_cb done;
	void *arg;
	size_t n;
	int rc;
	int64_t first;
	bool wait;                  /* a WAIT follows; its answer finishes */
	struct store_appended *res; /* a keyed batch's answer per row, else NULL */
	size_t per;                 /* its numbers per row: 2, or 3 in the Mercure form */
};

/* ---- entries ---- */

/* What an entry of the stream is to herald. */
enum entry_kind {
	ENTRY_EVENT,   /* an event: its id is <n>-0 */
	ENTRY_PASSED,  /* not an event, at or below the counter: passed over where it is */
	ENTRY_FOREIGN, /* not an event as far as this node knows, above the counter */
};

/* A stream id "<ms>-<seq>"; false if it is not one. */
static bool parse_stream_id(const char *s, size_t len, uint64_t *ms, uint64_t *seq)
{
	uint64_t v[2] = { 0, 0 };
	size_t i = 0;
	for (int k = 0; k < 2; k++) {
		size_t start = i;
		for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
			if (v[k] > (UINT64_MAX - 9) / 10)
				return false;
			v[k] = v[k] * 10 + (uint64_t)(s[i] - '0');
		}
		if (i == start || (k == 0 && (i == len || s[i++] != '-')))
			return false;
	}
	*ms = v[0];
	*seq = v[1];
	return i == len;
}

/* The same rule as event_id in store_redis.lua: an event has the id
 * "<n>-0" and either the field id = n (herald_publish writes it) or n at
 * most the counter (entries of older versions, written without the field,
 * are all at or below it). counter_seen may lag the counter, which only
 * grows: an unmarked entry above it is asked about (herald_sweep). */
static enum entry_kind judge(const struct store_redis *st, const redisReply *e, int64_t *id)
{
	const redisReply *rid = e->element[0], *f = e->element[1];
	uint64_t ms, seq;
	if (!parse_stream_id(rid->str, rid->len, &ms, &seq))
		return ENTRY_PASSED; /* Redis never answers this */
	if (ms > (uint64_t)INT64_MAX)
		return ENTRY_FOREIGN;
	*id = (int64_t)ms;
	if (seq != 0)
		return ms < (uint64_t)st->counter_seen ? ENTRY_PASSED : ENTRY_FOREIGN;
	if (*id == 0)
		return ENTRY_PASSED;
	if (*id <= st->counter_seen)
		return ENTRY_EVENT;
	size_t digits = rid->len - 2; /* without "-0" */
	for (size_t i = 0; i + 1 < f->elements; i += 2) {
		const redisReply *k = f->element[i], *v = f->element[i + 1];
		if (k->type == REDIS_REPLY_STRING && v->type == REDIS_REPLY_STRING && strcmp(k->str, "id") == 0)
			return v->len == digits && memcmp(v->str, rid->str, digits) == 0 ? ENTRY_EVENT : ENTRY_FOREIGN;
	}
	return ENTRY_FOREIGN;
}

/* An entry of an XRANGE or XREAD answer, [id, [field, value, ...]], as
 * kind says; *ev is the event (ENTRY_EVENT only), its strings the
 * answer's. */
static enum entry_kind event_from_reply(const struct store_redis *st, const redisReply *e, struct store_event *ev)
{
	if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 || e->element[0]->type != REDIS_REPLY_STRING ||
	    e->element[1]->type != REDIS_REPLY_ARRAY)
		return ENTRY_PASSED;
	int64_t id = 0;
	enum entry_kind kind = judge(st, e, &id);
	if (kind != ENTRY_EVENT)
		return kind;
	const redisReply *f = e->element[1];
	const char *type = "message", *topic = "", *data = "", *mercure = NULL;
	size_t type_len = 7, topic_len = 0, data_len = 0, mercure_len = 0;
	bool public = false;
	int64_t t = 0;
	for (size_t i = 0; i + 1 < f->elements; i += 2) {
		const redisReply *k = f->element[i], *v = f->element[i + 1];
		if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
			continue;
		if (strcmp(k->str, "type") == 0 && v->len > 0) {
			type = v->str;
			type_len = v->len;
		} else if (strcmp(k->str, "topic") == 0) {
			topic = v->str;
			topic_len = v->len;
		} else if (strcmp(k->str, "data") == 0) {
			data = v->str;
			data_len = v->len;
		} else if (strcmp(k->str, "public") == 0) {
			public = v->len == 1 && v->str[0] == '1';
		} else if (strcmp(k->str, "time") == 0) {
			t = strtoll(v->str, NULL, 10);
		} else if (strcmp(k->str, "mercure") == 0 && v->len > 0) {
			mercure = v->str;
			mercure_len = v->len;
		}
	}
	*ev = (struct store_event){ .id = id,
				    .type = type,
				    .type_len = type_len,
				    .topic = topic,
				    .topic_len = topic_len,
				    .data = data,
				    .data_len = data_len,
				    .public = public,
				    .created_at = t,
				    .mercure = mercure,
				    .mercure_len = mercure_len };
	return ENTRY_EVENT;
}

/* The address, for logs. */
static const char *where(const struct store_redis *st)
{
	return redis_link_where(st->cmd_link);
}

static void note_pruned(struct store_redis *st, int64_t through)
{
	if (through > st->pruned_through)
		st->pruned_through = through;
}

/* ---- connections ---- */

static void send_tail(struct store_redis *st);
static void send_sync(struct store_redis *st);
static void send_sweep(struct store_redis *st);
static void sweep_again(void *arg);
static void tell_foreign(struct store_redis *st, const char *id, const char *what);

static void changed(struct store_redis *st)
{
	if (st->watching)
		st->hooks.changed(st->hooks.arg);
}

/* The window is about to drop entries the hub has not fanned out: it
 * reads them now. */
static void offer_rows(void *arg)
{
	changed(arg);
}

/* Both connections closed (the one that failed is already gone); what was
 * out is answered NULL by hiredis as each is freed. The command link tries
 * again after its backoff; the tail's waits for it. */
static void lost(struct store_redis *st, const char *why)
{
	if (st->up) {
		log_warn("redis: lost the event log at %s (%s); publishes are answered 503 and streams wait "
			 "until it is back",
			 where(st), why);
		st->m->log_outages++;
		st->down_since = loop_now(st->lp);
	} else if (st->watching && !st->warned_down) {
		/* Unreachable since start-up, or again after a reconnect
		 * failed: said once, then the link's tries at debug level. */
		log_warn("redis: cannot reach the event log at %s (%s); publishes are answered 503 until it "
			 "answers; trying again with backoff",
			 where(st), why);
	}
	st->warned_down = true;
	st->up = false;
	st->cmd = st->tail = NULL;
	redis_link_stop(st->tail_link);
	redis_link_drop(st->cmd_link, why);
	st->cmd_out = 0;
	st->tail_out = false;
	st->trim_out = false;
	st->sweep_out = false;
	loop_timer_stop(st->lp, &st->sweep_timer);
}

static void on_cmd_down(void *arg, const char *why)
{
	struct store_redis *st = arg;
	st->cmd = NULL;
	lost(st, why);
}

static void on_tail_down(void *arg, const char *why)
{
	struct store_redis *st = arg;
	st->tail = NULL;
	lost(st, why);
}

static void answered(struct store_redis *st)
{
	if (st->cmd_out)
		st->cmd_out--;
	st->cmd_progress = loop_now(st->lp);
}

static void sent(struct store_redis *st)
{
	if (st->cmd_out++ == 0)
		st->cmd_progress = loop_now(st->lp);
}

/* Send on the command connection; cb gets privdata. */
static int cmd_argv(struct store_redis *st, redisCallbackFn *cb, void *privdata, int argc, const char **argv,
		    const size_t *lens)
{
	if (!st->cmd || redisAsyncCommandArgv(st->cmd, cb, privdata, argc, argv, lens) != REDIS_OK)
		return -1;
	sent(st);
	return 0;
}

static bool is_error(const redisReply *r)
{
	return r && r->type == REDIS_REPLY_ERROR;
}

/* An answer on the command connection: counted as progress for the
 * watchdog. NULL (the connection went away, nothing was answered) passes
 * through uncounted. */
static redisReply *command_answer(struct store_redis *st, void *reply)
{
	if (reply)
		answered(st);
	if (redis_link_readonly(st->cmd_link, reply))
		return NULL; /* a demoted primary: the link leaves it */
	return reply;
}

int store_redis_send(struct store_redis *st, redisCallbackFn *cb, void *privdata, int argc, const char **argv)
{
	return st->up ? cmd_argv(st, cb, privdata, argc, argv, NULL) : -1;
}

redisReply *store_redis_answer(struct store_redis *st, void *reply)
{
	return reply ? command_answer(st, reply) : NULL;
}

const char *store_redis_where(const struct store_redis *st)
{
	return where(st);
}

static void on_setup(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct store_redis *st = redis_link_user(ac);
	redisReply *r = command_answer(st, reply);
	(void)privdata;
	if (!r)
		return;
	if (is_error(r)) {
		log_err("redis: %s: %s", where(st), r->str);
		lost(st, "setting up the connection failed");
	}
}

/* The answer of herald_floor, the last setup step: the node is up. */
static void on_floor(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct store_redis *st = redis_link_user(ac);
	redisReply *r = command_answer(st, reply);
	(void)privdata;
	if (!r)
		return;
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 || r->element[0]->type != REDIS_REPLY_INTEGER ||
	    r->element[1]->type != REDIS_REPLY_INTEGER) {
		log_err("redis: %s: herald_floor: %s", where(st), is_error(r) ? r->str : "unexpected answer");
		lost(st, "herald's function did not answer as expected");
		return;
	}
	int64_t before = r->element[0]->integer;
	note_pruned(st, r->element[2]->integer);
	if (before < store_window_newest(&st->win))
		log_err("redis: the log at %s went back from id %" PRId64 " to %" PRId64
			" (restarted without its data?); new events continue after %" PRId64,
			where(st), store_window_newest(&st->win), before, store_window_newest(&st->win));
	st->up = true;
	st->warned_down = false;
	redis_link_works(st->cmd_link);
	if (st->down_since)
		log_notice("redis: the event log at %s is back after %.1f s", where(st),
			   (double)(loop_now(st->lp) - st->down_since) / 1000.0);
	else
		log_info("redis: connected to %s, stream %s", where(st), st->key_events);
	st->down_since = 0;
	/* From the newest event read: after a Redis that lost its data, new
	 * events may sit below entries the tail had passed over. */
	st->counter_seen = r->element[1]->integer;
	snprintf(st->tail_from, sizeof(st->tail_from), "%" PRId64 "-0", store_window_newest(&st->win));
	redis_link_start(st->tail_link, true); /* on_tail_up sends the first XREAD */
	if (st->sync_sent > st->sync_done)
		send_sync(st);
	changed(st); /* reads that waited for the connection go again */
}

/* The command link's connection: herald's function loaded, then
 * herald_floor, whose answer says the node is up. */
static void on_cmd_up(void *arg, redisAsyncContext *ac)
{
	struct store_redis *st = arg;
	st->cmd = ac;
	const char *load[4] = { "FUNCTION", "LOAD", "REPLACE", store_redis_function };
	cmd_argv(st, on_setup, NULL, 4, load, NULL);
	char seen[24];
	snprintf(seen, sizeof(seen), "%" PRId64, store_window_newest(&st->win));
	const char *floor[6] = { "FCALL", "herald_floor", "2", st->key_events, st->key_last, seen };
	cmd_argv(st, on_floor, NULL, 6, floor, NULL);
}

static void on_tail_up(void *arg, redisAsyncContext *ac)
{
	struct store_redis *st = arg;
	st->tail = ac;
	send_tail(st);
}

/* ---- the tail ---- */

static void check_sync(struct store_redis *st)
{
	if (st->sync_wait_ticket && store_window_newest(&st->win) >= st->sync_wait_target) {
		st->sync_done = st->sync_wait_ticket;
		st->sync_wait_ticket = 0;
	}
}

static void changed(struct store_redis *st);

static void on_tail(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct store_redis *st = redis_link_user(ac);
	redisReply *r = reply;
	(void)privdata;
	if (!r || ac != st->tail)
		return;
	st->tail_out = false;
	if (is_error(r)) {
		log_err("redis: reading %s: %s", st->key_events, r->str);
		lost(st, "XREAD failed");
		return;
	}
	size_t added = 0;
	bool ask = false;
	/* [[key, [entry, ...]]], or nil when BLOCK ran out. */
	if (r->type == REDIS_REPLY_ARRAY && r->elements == 1 && r->element[0]->type == REDIS_REPLY_ARRAY &&
	    r->element[0]->elements == 2) {
		const redisReply *entries = r->element[0]->element[1];
		for (size_t i = 0; entries->type == REDIS_REPLY_ARRAY && i < entries->elements && !ask; i++) {
			const redisReply *e = entries->element[i];
			struct store_event ev;
			enum entry_kind kind = event_from_reply(st, e, &ev);
			const char *id = e->type == REDIS_REPLY_ARRAY && e->elements == 2 &&
							 e->element[0]->type == REDIS_REPLY_STRING
						 ? e->element[0]->str
						 : "?";
			if (kind == ENTRY_FOREIGN) {
				/* Perhaps an event of an older node above the counter
				 * this node knows: herald_sweep decides (and removes
				 * it if not), then the tail reads on from here. */
				snprintf(st->foreign, sizeof(st->foreign), "%s", id);
				ask = true;
				continue;
			}
			snprintf(st->tail_from, sizeof(st->tail_from), "%s", id);
			if (kind == ENTRY_PASSED) {
				tell_foreign(st, id, "skipped");
				continue;
			}
			st->foreign_told = false; /* an event ends a run of other entries */
			if (store_window_add(&st->win, &ev))
				added++;
		}
	}
	if (ask)
		send_sweep(st);
	else
		send_tail(st);
	if (added) {
		check_sync(st);
		changed(st);
	}
}

static void send_tail(struct store_redis *st)
{
	if (!st->tail || st->tail_out || st->sweep_out || !st->up)
		return;
	char count[16], block[16];
	snprintf(count, sizeof(count), "%d", TAIL_COUNT);
	snprintf(block, sizeof(block), "%d", TAIL_BLOCK_MS);
	const char *argv[8] = { "XREAD", "COUNT", count, "BLOCK", block, "STREAMS", st->key_events, st->tail_from };
	if (redisAsyncCommandArgv(st->tail, on_tail, NULL, 8, argv, NULL) == REDIS_OK) {
		st->tail_out = true;
		st->tail_sent = loop_now(st->lp);
	}
}

/* Said once per run of entries that are not events (an event ends it):
 * another program's XADD is a mistake to hear of, not once per entry. */
static void tell_foreign(struct store_redis *st, const char *id, const char *what)
{
	if (st->foreign_told)
		return;
	st->foreign_told = true;
	log_warn("redis: entry %s of %s was not added by herald_publish, so it is not an event: %s; publish with "
		 "FCALL herald_publish (logged once per run of such entries)",
		 id, st->key_events, what);
}

static void on_sweep(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct store_redis *st = redis_link_user(ac);
	redisReply *r = command_answer(st, reply);
	(void)privdata;
	if (!r)
		return; /* the tail meets the entry again once reconnected */
	st->sweep_out = false;
	if (is_error(r) && strstr(r->str, "herald_publish did not add")) {
		/* Too many to remove: the tail cannot go past them, and no
		 * event can be added after them either. Asked again until
		 * someone removes them. */
		if (!st->foreign_told)
			log_err("redis: %s: %s", where(st), r->str);
		st->foreign_told = true;
		loop_timer_start(st->lp, &st->sweep_timer, SWEEP_RETRY_MS, sweep_again, st);
		return;
	}
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_INTEGER ||
	    r->element[1]->type != REDIS_REPLY_INTEGER) {
		/* Likely another library in its place (an older herald's,
		 * loaded when it reconnected): connecting loads this one. */
		log_err("redis: %s: herald_sweep: %s", where(st), is_error(r) ? r->str : "unexpected answer");
		lost(st, "herald's function did not answer as expected");
		return;
	}
	int64_t newest = r->element[0]->integer;
	if (newest > st->counter_seen)
		st->counter_seen = newest;
	uint64_t ms, seq;
	if (parse_stream_id(st->foreign, strlen(st->foreign), &ms, &seq) &&
	    (ms > (uint64_t)st->counter_seen || (ms == (uint64_t)st->counter_seen && seq > 0))) {
		char what[160];
		if (r->element[1]->integer > 0)
			snprintf(what, sizeof(what),
				 "skipped, and removed from the stream (%lld entries in all) so that "
				 "ids go on from %" PRId64,
				 r->element[1]->integer, newest);
		else
			snprintf(what, sizeof(what),
				 "skipped (already removed from the stream); ids go on from %" PRId64, newest);
		tell_foreign(st, st->foreign, what);
	}
	send_tail(st);
}

static void send_sweep(struct store_redis *st)
{
	if (st->sweep_out || !st->up)
		return;
	const char *argv[5] = { "FCALL", "herald_sweep", "2", st->key_events, st->key_last };
	if (cmd_argv(st, on_sweep, NULL, 5, argv, NULL) == 0)
		st->sweep_out = true;
}

static void sweep_again(void *arg)
{
	send_sweep(arg);
}

/* Connections that stopped answering (a host gone, a network cut) close
 * here: TCP would take minutes to notice. */
static void watchdog(void *arg)
{
	struct store_redis *st = arg;
	uint64_t now = loop_now(st->lp);
	if (st->tail_out && now - st->tail_sent > TAIL_BLOCK_MS + DEAD_AFTER_MS)
		lost(st, "no answer to XREAD");
	else if ((st->cmd || st->tail) && st->cmd_out && now - st->cmd_progress > DEAD_AFTER_MS)
		lost(st, "no answer for 3 s");
	if (st->sync_wait_ticket && now - st->sync_wait_since > DEAD_AFTER_MS) {
		/* The ids asked about were trimmed before the tail saw them. */
		st->sync_done = st->sync_wait_ticket;
		st->sync_wait_ticket = 0;
		changed(st);
	}
	loop_timer_start(st->lp, &st->watchdog_timer, WATCHDOG_MS, watchdog, st);
}

/* ---- the interface ---- */

/* The log's identity ({name}:identity, 48 random bits: mercure_update.h),
 * made by the first node to start on the log (SET NX) and read by every
 * one, set for this process's Mercure ids. */
static void redis_close(void *be);

static void *redis_open(const struct config *cfg, struct loop *lp, struct metrics *m, char *err, size_t errlen)
{
	struct store_redis *st = xcalloc(1, sizeof(*st));
	st->cfg = cfg;
	st->lp = lp;
	st->m = m;
	store_window_init(&st->win, 0, offer_rows, st);
	snprintf(st->key_events, sizeof(st->key_events), "{%s}:events", cfg->redis_stream);
	snprintf(st->key_last, sizeof(st->key_last), "{%s}:last", cfg->redis_stream);
	snprintf(st->key_mercure, sizeof(st->key_mercure), "{%s}:mercure", cfg->redis_stream);
	snprintf(st->key_retention, sizeof(st->key_retention), "{%s}:retention", cfg->redis_stream);
	snprintf(st->key_identity, sizeof(st->key_identity), "{%s}:identity", cfg->redis_stream);
	struct redis_link_spec spec = { cfg->redis_url, cfg->redis_sentinels, cfg->redis_master_name, "redis:" };
	struct redis_link_hooks cmd = { on_cmd_up, on_cmd_down, st }, tail = { on_tail_up, on_tail_down, st };
	st->cmd_link = redis_link_new(lp, &spec, &cmd, err, errlen);
	st->tail_link = st->cmd_link ? redis_link_new(lp, &spec, &tail, err, errlen) : NULL;
	if (!st->tail_link || store_redis_sync_connect(st, err, errlen) < 0) {
		redis_close(st);
		return NULL;
	}
	return st;
}

static void redis_watch(void *be, const struct store_hooks *h)
{
	struct store_redis *st = be;
	st->hooks = *h;
	st->watching = true;
	redis_link_start(st->cmd_link, true); /* the tail's once the command link is set up */
	loop_timer_start(st->lp, &st->watchdog_timer, WATCHDOG_MS, watchdog, st);
}

static void redis_close(void *be)
{
	struct store_redis *st = be;
	if (!st)
		return;
	st->watching = false; /* no hooks */
	loop_timer_stop(st->lp, &st->watchdog_timer);
	loop_timer_stop(st->lp, &st->sweep_timer);
	st->up = false;
	st->cmd = st->tail = NULL;
	redis_link_free(st->cmd_link); /* appends out are answered -ENOTCONN */
	redis_link_free(st->tail_link);
	while (st->fetches) {
		struct fetch *f = st->fetches;
		st->fetches = f->next;
		free(f);
	}
	store_window_free(&st->win);
	namespaces_free(&st->ns_patterns);
	free(st->ns_pruned);
	free(st);
}

static void finish_append(struct append *a)
{
	if (a->rc == 0 && !a->res) {
		/* The plain form answers the first id; the rest follow it. */
		a->res = xmalloc(a->n * sizeof(*a->res));
		for (size_t i = 0; i < a->n; i++)
			a->res[i] = (struct store_appended){ a->first + (int64_t)i, STORE_STORED, 0 };
	}
	if (a->rc == 0) {
		a->done(a->arg, 0, a->res);
	} else {
		a->done(a->arg, a->rc, NULL);
	}
	free(a->res);
	free(a);
}

/* A keyed batch's answer: {outcome, id} per row (store_redis.lua). */
static bool keyed_answer(struct append *a, const redisReply *r)
{
	if (r->type != REDIS_REPLY_ARRAY || r->elements != a->per * a->n)
		return false;
	for (size_t i = 0; i < a->n; i++) {
		const redisReply *o = r->element[a->per * i], *id = r->element[a->per * i + 1];
		if (o->type != REDIS_REPLY_INTEGER || id->type != REDIS_REPLY_INTEGER || o->integer < 1 ||
		    o->integer > 3 || id->integer < 1)
			return false;
		if (a->per == 3) {
			const redisReply *e = r->element[3 * i + 2];
			if (e->type != REDIS_REPLY_INTEGER || e->integer < 0)
				return false;
			a->res[i].earlier = e->integer;
		}
		a->res[i].id = id->integer;
		a->res[i].outcome = o->integer == 1   ? STORE_STORED
				    : o->integer == 2 ? STORE_REPLAYED
						      : STORE_KEY_CONFLICT;
	}
	return true;
}

static void on_append(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct append *a = privdata;
	struct store_redis *st = redis_link_user(ac);
	redisReply *r = reply;
	if (!r) {
		a->rc = -ENOTCONN;
	} else {
		answered(st);
		if (redis_link_readonly(st->cmd_link, r)) {
			a->rc = -ENOTCONN; /* a demoted primary: the link leaves it */
		} else if (a->res ? keyed_answer(a, r) : r->type == REDIS_REPLY_INTEGER && r->integer > 0) {
			a->rc = 0;
			a->first = a->res ? a->res[0].id : r->integer;
		} else {
			log_err("redis: herald_publish at %s: %s", where(st),
				is_error(r) ? r->str : "unexpected answer");
			a->rc = -EIO;
		}
	}
	if (!a->wait)
		finish_append(a);
}

static void on_wait(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct append *a = privdata;
	struct store_redis *st = redis_link_user(ac);
	redisReply *r = reply;
	if (!r) /* the connection went first: whether a replica has them is unknown */
		a->rc = -ENOTCONN;
	if (r) {
		answered(st);
		if (a->rc == 0 && r->type == REDIS_REPLY_INTEGER && r->integer < st->cfg->redis_wait_replicas)
			log_warn("redis: events %" PRId64 "-%" PRId64 " reached %lld of %lld replicas within %lld ms",
				 a->first, a->first + (int64_t)a->n - 1, r->integer,
				 (long long)st->cfg->redis_wait_replicas, (long long)st->cfg->redis_wait_timeout_ms);
	}
	finish_append(a);
}

/* The Redis key of an Idempotency-Key, beside the stream (same hash tag):
 * "{name}:idem:" and a digest of the publisher and the key, so any
 * publisher name and key make a short, plain key. */
static void idem_key_name(const struct store_redis *st, const struct store_new_event *ev, char *out, size_t len)
{
	char d[IDEM_HEX_LEN];
	const char *pub = ev->idem_publisher ? ev->idem_publisher : "";
	idem_digest(pub, strlen(pub), ev->idem_key, strlen(ev->idem_key), d);
	size_t prefix = strlen(st->key_events) - strlen("events");
	snprintf(out, len, "%.*sidem:%s", (int)prefix, st->key_events, d);
}

static void redis_append(void *be, const struct store_new_event *evs, size_t n, store_append_cb done, void *arg)
{
	struct store_redis *st = be;
	if (!st->up || n == 0) {
		done(arg, n ? -ENOTCONN : 0, NULL);
		return;
	}
	/* Three forms (store_redis.lua): the plain one (4 fields an event);
	 * with any Idempotency-Key the keyed one (the keys' names after the
	 * stream's, a window, 6 fields an event); with any Mercure update the
	 * Mercure one (the map's name third, "mercure", a window, 8 fields). */
	size_t keyed = 0;
	bool mercure = false;
	for (size_t i = 0; i < n; i++) {
		keyed += evs[i].idem_key != NULL;
		mercure |= evs[i].mercure_id || evs[i].mercure;
	}
	size_t nkeys = 2 + (mercure ? 1 : 0) + keyed;
	size_t per = mercure ? 8 : keyed ? 6 : 4;
	size_t head_n = 3 + nkeys + (mercure ? 1 : 0) + (keyed || mercure ? 1 : 0);
	int argc = (int)(head_n + per * n);
	const char **argv = xmalloc((size_t)argc * sizeof(*argv));
	size_t *lens = xmalloc((size_t)argc * sizeof(*lens));
	char(*names)[320] = keyed ? xmalloc(keyed * sizeof(*names)) : NULL;
	char(*slots)[24] = per > 4 ? xmalloc(n * sizeof(*slots)) : NULL;
	char numkeys[24], window[24];
	snprintf(numkeys, sizeof(numkeys), "%zu", nkeys);
	snprintf(window, sizeof(window), "%lld", (long long)st->cfg->idempotency_window_s);
	size_t h = 0;
	argv[h++] = "FCALL";
	argv[h++] = "herald_publish";
	argv[h++] = numkeys;
	argv[h++] = st->key_events;
	argv[h++] = st->key_last;
	if (mercure)
		argv[h++] = st->key_mercure;
	size_t first_slot = h - 2; /* the index Lua gives the first key after the fixed ones */
	for (size_t i = 0, k = 0; i < n; i++)
		if (evs[i].idem_key) {
			idem_key_name(st, &evs[i], names[k], sizeof(names[k]));
			argv[h++] = names[k++];
		}
	if (mercure)
		argv[h++] = "mercure";
	if (keyed || mercure)
		argv[h++] = window;
	for (size_t i = 0; i < h; i++)
		lens[i] = strlen(argv[i]);
	for (size_t i = 0, k = 0; i < n; i++) {
		const char **a = argv + head_n + per * i;
		size_t *l = lens + head_n + per * i;
		a[0] = evs[i].type;
		l[0] = strlen(evs[i].type);
		a[1] = evs[i].topic;
		l[1] = strlen(evs[i].topic);
		a[2] = evs[i].data;
		l[2] = evs[i].data_len;
		a[3] = evs[i].public ? "1" : "0";
		l[3] = 1;
		if (per > 4) {
			snprintf(slots[i], sizeof(slots[i]), "%zu", evs[i].idem_key ? first_slot + k++ : 0);
			a[4] = slots[i];
			l[4] = strlen(slots[i]);
			a[5] = evs[i].idem_key && evs[i].idem_hash ? evs[i].idem_hash : "";
			l[5] = strlen(a[5]);
		}
		if (per > 6) {
			a[6] = evs[i].mercure_id ? evs[i].mercure_id : "";
			l[6] = strlen(a[6]);
			a[7] = evs[i].mercure ? evs[i].mercure : "";
			l[7] = evs[i].mercure ? evs[i].mercure_len : 0;
		}
	}
	struct append *ap = xcalloc(1, sizeof(*ap));
	*ap = (struct append){
		st, done, arg, n, -ENOTCONN, 0, st->cfg->redis_wait_replicas > 0, NULL, mercure ? 3 : 2
	};
	if (per > 4)
		ap->res = xcalloc(n, sizeof(*ap->res));
	int r = cmd_argv(st, on_append, ap, argc, argv, lens);
	free(argv);
	free(lens);
	free(names);
	free(slots);
	if (r < 0) {
		free(ap->res);
		free(ap);
		done(arg, -ENOTCONN, NULL);
		return;
	}
	if (ap->wait) {
		char want[16], ms[24];
		snprintf(want, sizeof(want), "%lld", (long long)st->cfg->redis_wait_replicas);
		snprintf(ms, sizeof(ms), "%lld", (long long)st->cfg->redis_wait_timeout_ms);
		const char *w[3] = { "WAIT", want, ms };
		if (cmd_argv(st, on_wait, ap, 3, w, NULL) < 0)
			ap->wait = false; /* on_append finishes it */
	}
}

/* ---- Mercure ids ---- */

/* A find out: whom to answer. */
struct find {
	struct store_redis *st;
	store_found_cb found;
	void *arg;
};

static void on_find(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct find *f = privdata;
	struct store_redis *st = f->st;
	redisReply *r = reply ? command_answer(st, reply) : NULL;
	struct store_event ev;
	(void)ac;
	if (!r) {
		f->found(f->arg, -ENOTCONN, NULL);
	} else if (r->type == REDIS_REPLY_INTEGER && r->integer == 0) {
		f->found(f->arg, 0, NULL);
	} else if (r->type == REDIS_REPLY_ARRAY && event_from_reply(st, r, &ev) == ENTRY_EVENT) {
		f->found(f->arg, 1, &ev);
	} else {
		log_err("redis: herald_mercure_find at %s: %s", where(st), is_error(r) ? r->str : "unexpected answer");
		f->found(f->arg, -EIO, NULL);
	}
	free(f);
}

static void redis_mercure_find(void *be, const char *mercure_id, store_found_cb found, void *arg)
{
	struct store_redis *st = be;
	struct find *f = xmalloc(sizeof(*f));
	*f = (struct find){ st, found, arg };
	const char *argv[7] = { "FCALL",      "herald_mercure_find", "3",       st->key_events,
				st->key_last, st->key_mercure,       mercure_id };
	if (!st->up || cmd_argv(st, on_find, f, 7, argv, NULL) < 0) {
		free(f);
		found(arg, -ENOTCONN, NULL);
	}
}

static void on_fetch(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct fetch *f = privdata;
	struct store_redis *st = f->st;
	redisReply *r = reply;
	for (struct fetch **pp = &st->fetches; *pp; pp = &(*pp)->next)
		if (*pp == f) {
			*pp = f->next;
			st->nfetches--;
			break;
		}
	if (!r) {
		free(f);
		return; /* the reconnect says changed */
	}
	(void)ac;
	answered(st);
	if (r->type != REDIS_REPLY_ARRAY) {
		log_err("redis: XRANGE %s: %s", st->key_events, is_error(r) ? r->str : "unexpected answer");
		free(f);
		return;
	}
	struct store_span *p = store_window_page_begin(&st->win, f->after);
	/* The page covers ids up to its last entry (an event or not), but no
	 * further than the newest event the tail had read when it was asked:
	 * what lies beyond is the tail's to judge. */
	int64_t last = f->after;
	bool beyond = false;
	for (size_t i = 0; i < r->elements && !beyond; i++) {
		const redisReply *e = r->element[i];
		struct store_event ev;
		enum entry_kind kind = event_from_reply(st, e, &ev);
		uint64_t ms = 0, seq = 0;
		const char *id = "?";
		if (e->type == REDIS_REPLY_ARRAY && e->elements == 2 && e->element[0]->type == REDIS_REPLY_STRING) {
			id = e->element[0]->str;
			parse_stream_id(id, e->element[0]->len, &ms, &seq);
		}
		if (ms > (uint64_t)f->known || (ms == (uint64_t)f->known && seq > 0)) {
			beyond = true;
			continue;
		}
		if ((int64_t)ms > last)
			last = (int64_t)ms;
		if (kind != ENTRY_EVENT) {
			if (!st->warned_pages)
				log_warn("redis: skipping entry %s of %s: not added by herald_publish, so not an event "
					 "(logged once)",
					 id, st->key_events);
			st->warned_pages = true;
			continue;
		}
		store_window_page_add(p, &ev);
	}
	/* A full page ends at its last entry; a short one reached the end of
	 * the stream, so it covers every id committed when it was asked. */
	int64_t hi = beyond ? f->known : r->elements >= (size_t)f->count ? last : (last > f->known ? last : f->known);
	note_pruned(st, store_window_page_end(&st->win, p, hi));
	free(f);
	changed(st);
}

/* Ask for the entries after pos (unless that is already out). */
static void fetch_after(struct store_redis *st, int64_t pos)
{
	if (!st->up || st->nfetches >= MAX_FETCHES)
		return;
	for (struct fetch *f = st->fetches; f; f = f->next)
		if (f->after == pos)
			return;
	char from[32], count[16];
	snprintf(from, sizeof(from), "(%" PRId64 "-0", pos);
	/* About FETCH_BYTES of entries as large as the recent ones. */
	size_t avg = store_window_row_size(&st->win);
	size_t rows = FETCH_BYTES / (avg ? avg : 1);
	int n = rows < 16 ? 16 : rows > FETCH_ROWS ? FETCH_ROWS : (int)rows;
	snprintf(count, sizeof(count), "%d", n);
	const char *argv[6] = { "XRANGE", st->key_events, from, "+", "COUNT", count };
	struct fetch *f = xcalloc(1, sizeof(*f));
	*f = (struct fetch){ st, pos, store_window_newest(&st->win), n, st->fetches };
	if (cmd_argv(st, on_fetch, f, 6, argv, NULL) < 0) {
		free(f);
		return;
	}
	st->fetches = f;
	st->nfetches++;
}

/* A read of (after, upto], filtered by f unless f is NULL, from what the
 * window holds; a gap is fetched, and the read asked again once it is in. */
static int redis_read(struct store_redis *st, int64_t after, int64_t upto, size_t limit, const struct store_filter *f,
		      store_row_cb cb, void *arg, int64_t *through)
{
	if (f && (f->ntopics > STORE_MAX_TOPICS || f->ngrants > STORE_MAX_GRANTS))
		return -EINVAL;
	int64_t gap;
	int n = store_window_read(&st->win, after, upto, limit, f, cb, arg, through, &gap);
	if (gap >= 0)
		fetch_after(st, gap); /* what follows comes later */
	return n;
}

static int redis_max_id(void *be, int64_t *max_id)
{
	struct store_redis *st = be;
	*max_id = store_window_newest(&st->win);
	return 0;
}

static int64_t redis_pruned_through(const void *be)
{
	const struct store_redis *st = be;
	return st->pruned_through;
}

static void on_sync(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct store_redis *st = redis_link_user(ac);
	redisReply *r = command_answer(st, reply);
	uint64_t ticket = (uint64_t)(uintptr_t)privdata;
	if (!r)
		return; /* sent again once reconnected */
	int64_t newest = r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : 0;
	if (store_window_newest(&st->win) >= newest) {
		if (ticket > st->sync_done)
			st->sync_done = ticket;
		changed(st);
	} else {
		st->sync_wait_ticket = ticket;
		st->sync_wait_target = newest;
		st->sync_wait_since = loop_now(st->lp);
	}
}

static void send_sync(struct store_redis *st)
{
	const char *argv[2] = { "GET", st->key_last };
	cmd_argv(st, on_sync, (void *)(uintptr_t)st->sync_sent, 2, argv, NULL);
}

static uint64_t redis_sync_begin(void *be)
{
	struct store_redis *st = be;
	st->sync_sent++;
	if (st->up)
		send_sync(st);
	return st->sync_sent;
}

static bool redis_sync_done(const void *be, uint64_t ticket)
{
	const struct store_redis *st = be;
	return st->sync_done >= ticket;
}

static void on_trim(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct store_redis *st = redis_link_user(ac);
	redisReply *r = command_answer(st, reply);
	(void)privdata;
	if (!r)
		return;
	st->trim_out = false;
	if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[1]->type == REDIS_REPLY_INTEGER) {
		if (r->element[0]->integer > 0)
			log_debug("retention removed %lld events from %s; oldest kept id is above %lld",
				  r->element[0]->integer, st->key_events, r->element[1]->integer);
		note_pruned(st, r->element[1]->integer);
	} else {
		log_err("redis: herald_trim at %s: %s", where(st), is_error(r) ? r->str : "unexpected answer");
	}
}

static int redis_prune(void *be, int64_t max_age_s, int64_t max_count, size_t max_rows)
{
	struct store_redis *st = be;
	if (!st->up || st->trim_out)
		return 0;
	char count[24], age[24], step[24];
	snprintf(count, sizeof(count), "%lld", (long long)max_count);
	snprintf(age, sizeof(age), "%lld", (long long)max_age_s);
	snprintf(step, sizeof(step), "%zu", max_rows);
	const char *argv[9] = { "FCALL", "herald_trim", "3", st->key_events, st->key_last, st->key_mercure,
				count,   age,           step };
	if (cmd_argv(st, on_trim, NULL, 9, argv, NULL) == 0)
		st->trim_out = true;
	return 0;
}

static void on_trim_ns(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct store_redis *st = redis_link_user(ac);
	redisReply *r = command_answer(st, reply);
	if (!r)
		return;
	st->trim_out = false;
	size_t n = st->ns_patterns.n + 1;
	bool shaped = r->type == REDIS_REPLY_ARRAY && r->elements == 3 + n;
	for (size_t i = 0; shaped && i < r->elements; i++)
		shaped = r->element[i]->type == REDIS_REPLY_INTEGER;
	if (!shaped) {
		if ((uint64_t)(uintptr_t)privdata == st->ns_gen)
			log_err("redis: herald_trim_ns at %s: %s", where(st),
				is_error(r) ? r->str : "unexpected answer");
		return;
	}
	if ((uint64_t)(uintptr_t)privdata != st->ns_gen)
		return; /* asked for patterns a reload has since changed */
	if (r->element[0]->integer > 0)
		log_debug("retention by namespace removed %lld events from %s", r->element[0]->integer, st->key_events);
	note_pruned(st, r->element[2]->integer);
	st->ns_pruned = xrealloc(st->ns_pruned, n * sizeof(*st->ns_pruned));
	for (size_t i = 0; i < n; i++)
		st->ns_pruned[i] = r->element[3 + i]->integer;
	st->ns_known = n;
}

static int redis_prune_namespaces(void *be, const struct namespaces *t, const struct namespace *defaults,
				  size_t max_rows, bool *more)
{
	struct store_redis *st = be;
	*more = false;
	if (!namespaces_same_patterns(&st->ns_patterns, t)) {
		namespaces_copy(&st->ns_patterns, t);
		st->ns_known = 0; /* until the first answer: the log's pruned-through */
		st->ns_gen++;
	}
	if (!st->up || st->trim_out)
		return 0;
	enum { FIXED = 8 };
	const char *argv[FIXED + 3 * (NAMESPACE_MAX + 1)];
	char nums[2 * (NAMESPACE_MAX + 1)][24], step[24], count[24];
	snprintf(step, sizeof(step), "%zu", max_rows ? max_rows : 1);
	snprintf(count, sizeof(count), "%zu", t->n);
	size_t a = 0;
	const char *head[FIXED] = { "FCALL",         "herald_trim_ns",  "4", st->key_events, st->key_last,
				    st->key_mercure, st->key_retention, step };
	for (; a < FIXED; a++)
		argv[a] = head[a];
	argv[a++] = count;
	for (size_t i = 0; i <= t->n; i++) {
		const struct namespace *ns = i == 0 ? defaults : &t->ns[i - 1];
		snprintf(nums[2 * i], sizeof(nums[0]), "%lld", (long long)ns->retention_count);
		snprintf(nums[2 * i + 1], sizeof(nums[0]), "%lld", (long long)ns->retention_age_s);
		argv[a++] = i == 0 ? "" : ns->pattern;
		argv[a++] = nums[2 * i];
		argv[a++] = nums[2 * i + 1];
	}
	if (cmd_argv(st, on_trim_ns, (void *)(uintptr_t)st->ns_gen, (int)a, argv, NULL) == 0)
		st->trim_out = true;
	return 0;
}

static int64_t redis_pruned_namespace(const void *be, int i)
{
	const struct store_redis *st = be;
	if ((size_t)(i + 1) >= st->ns_known)
		return st->pruned_through;
	return st->ns_pruned[i + 1];
}

static bool redis_available(const void *be)
{
	const struct store_redis *st = be;
	return st->up;
}

static int redis_read_range(void *be, int64_t after, int64_t upto, size_t limit, store_row_cb cb, void *arg)
{
	return redis_read(be, after, upto, limit, NULL, cb, arg, NULL);
}

static int redis_read_matching(void *be, int64_t after, int64_t upto, size_t limit, const struct store_filter *f,
			       store_row_cb cb, void *arg, int64_t *through)
{
	return redis_read(be, after, upto, limit, f, cb, arg, through);
}

static bool redis_chosen(const struct config *cfg)
{
	return (cfg->redis_url && cfg->redis_url[0]) || (cfg->redis_sentinels && cfg->redis_sentinels[0]);
}

const struct store_backend store_redis_backend = {
	.kind = "redis",
	.chosen = redis_chosen,
	.open = redis_open,
	.watch = redis_watch,
	.close = redis_close,
	.append = redis_append,
	.read_range = redis_read_range,
	.read_matching = redis_read_matching,
	.max_id = redis_max_id,
	.pruned_through = redis_pruned_through,
	.sync_begin = redis_sync_begin,
	.sync_done = redis_sync_done,
	.prune = redis_prune,
	.prune_namespaces = redis_prune_namespaces,
	.pruned_namespace = redis_pruned_namespace,
	.available = redis_available,
	.mercure_find = redis_mercure_find,
	.lease = store_redis_lease,
};
