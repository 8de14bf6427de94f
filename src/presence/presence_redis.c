/* SPDX-License-Identifier: BSD-2-Clause */
/* presence_redis.c: this node's presence share in Redis (see
 * presence_redis.h): one Redis link (redis_link.c, which connects, logs
 * in, follows the primary and backs off), the heartbeat and sweep timers,
 * the scripts that decide joins and leaves atomically, and beside the
 * counts the node's Mercure subscriptions (whose records it only keeps,
 * lists and hands back for closing when their node died).
 *
 * States: down (the link is trying again), or up (a connection whose first
 * commands, queued before it even completes, are the link's login and the
 * whole share; every count after goes behind them on the same connection,
 * so Redis sees them in order). Up is not yet working: the link works once
 * Redis has answered the share's first write (so a server that refuses
 * connections, or a replica, never counts as back, nor resets the link's
 * backoff). An outage is said once when it begins and once when a link
 * works again; the link logs the tries between at debug level. */
#include "presence/presence_redis.h"

#include <errno.h>
#include <hiredis/async.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "core/presence_table.h"
#include "redis/redis_link.h"
#include "common/util.h"

#define SHARE_CHUNK 512      /* keys per script call when the share is written whole */
#define SWEEP_MS 500         /* how often dead nodes and due leaves are looked for */
#define SUBS_CLOSE_CHUNK 256 /* dead nodes' subscriptions one sweep closes (another follows at once) */
#define SUBS_PUT_CHUNK 256   /* subscriptions per HSET when they are written whole */

/* Lua shared by the scripts: Redis' clock, the live nodes (KEYS[1]), and
 * a key's streams over them (ARGV[1] is the nodes' hash prefix). */
#define LUA_COMMON                                                                                      \
	"local function now_ms() local t = redis.call('TIME') "                                         \
	"return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) end "                         \
	"local function live(now) return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf') end " \
	"local function total(nodes, k) local s = 0 for _, n in ipairs(nodes) do "                      \
	"s = s + (tonumber(redis.call('HGET', ARGV[1] .. n, k)) or 0) end return s end "

/* KEYS nodes, announced, leaving, mine; ARGV prefix, key. 1: a join. */
static const char lua_add[] = "redis.call('HINCRBY', KEYS[4], ARGV[2], 1) "
			      "if redis.call('HEXISTS', KEYS[2], ARGV[2]) == 1 then "
			      "redis.call('ZREM', KEYS[3], ARGV[2]) return 0 end "
			      "redis.call('HSET', KEYS[2], ARGV[2], 1) return 1";

/* KEYS nodes, announced, leaving, mine; ARGV prefix, key. */
static const char lua_del[] = LUA_COMMON "local n = redis.call('HINCRBY', KEYS[4], ARGV[2], -1) "
					 "if n <= 0 then redis.call('HDEL', KEYS[4], ARGV[2]) end "
					 "if redis.call('HEXISTS', KEYS[2], ARGV[2]) == 0 then return 0 end "
					 "local now = now_ms() "
					 "if total(live(now), ARGV[2]) == 0 then "
					 "redis.call('ZADD', KEYS[3], 'NX', now, ARGV[2]) end return 0";

/* KEYS nodes, announced, leaving, closing; ARGV prefix, grace ms, the
 * subscriptions' hash prefix, how many to close, the swept marks' prefix,
 * the caller's id (never its own sweeper: a node that ran late finds
 * itself expired, and its next heartbeat brings it back), the
 * subscriptions' ids prefix.
 * Two arrays: the keys that leave now and the dead nodes' subscription
 * records to close now (this caller announces both). A dead node's
 * records go onto the closing list whole, with its counts' removal, so
 * its death is handled once; a mark says so to the node, should it come
 * back (a day: a node away longer finds none). */
static const char lua_sweep[] =
	LUA_COMMON "local now = now_ms() local nodes = live(now) "
		   "for _, d in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)) do "
		   "if d ~= ARGV[6] then local h = ARGV[1] .. d "
		   "for _, k in ipairs(redis.call('HKEYS', h)) do "
		   "if redis.call('HEXISTS', KEYS[2], k) == 1 and total(nodes, k) == 0 then "
		   "redis.call('ZADD', KEYS[3], 'NX', now, k) end end "
		   "redis.call('DEL', h) "
		   "local sh = ARGV[3] .. d local recs = redis.call('HVALS', sh) "
		   "for i = 1, #recs, 1000 do "
		   "redis.call('RPUSH', KEYS[4], unpack(recs, i, math.min(i + 999, #recs))) end "
		   "if #recs > 0 then redis.call('SET', ARGV[5] .. d, 1, 'PX', 86400000) end "
		   "redis.call('DEL', sh, ARGV[7] .. d) redis.call('ZREM', KEYS[1], d) end end "
		   "local out = {} "
		   "for _, k in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now - tonumber(ARGV[2]))) do "
		   "redis.call('ZREM', KEYS[3], k) "
		   "if total(nodes, k) == 0 then redis.call('HDEL', KEYS[2], k) out[#out + 1] = k end end "
		   "local closes = redis.call('LRANGE', KEYS[4], 0, tonumber(ARGV[4]) - 1) "
		   "if #closes > 0 then redis.call('LTRIM', KEYS[4], #closes, -1) end "
		   "return {out, closes}";

/* KEYS nodes, mine, my subscriptions, their ids; ARGV prefix, id, ttl ms. 1, or 0
 * when the node was not among the nodes: a sweep took it for dead (it did
 * not beat for the TTL) or Redis lost its data; nothing is written then,
 * the node writes its share again. */
static const char lua_heartbeat[] = LUA_COMMON "if not redis.call('ZSCORE', KEYS[1], ARGV[2]) then return 0 end "
					       "local now = now_ms() "
					       "redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2]) "
					       "redis.call('PEXPIRE', KEYS[2], 2 * tonumber(ARGV[3])) "
					       "redis.call('PEXPIRE', KEYS[3], 2 * tonumber(ARGV[3])) "
					       "redis.call('PEXPIRE', KEYS[4], 2 * tonumber(ARGV[3])) return 1";

/* KEYS the mark a sweep left when it closed this node's subscriptions.
 * 1: there was one (taken, so said once). */
static const char lua_swept[] = "if redis.call('DEL', KEYS[1]) == 1 then return 1 end return 0";

/* KEYS nodes; ARGV the subscriptions' hash prefix, their ids' prefix, an
 * id or its start, exact (1/0), cap. {cut (1/0), records}: the live nodes'
 * records whose id is (exact) or starts with the given one, at most cap,
 * found through each node's ids in order (a range, not a scan). */
static const char lua_subs_list[] =
	LUA_COMMON "local out, cut, cap, want = {}, 0, tonumber(ARGV[5]), ARGV[3] "
		   "for _, n in ipairs(live(now_ms())) do local h = ARGV[1] .. n "
		   "if ARGV[4] == '1' then local v = redis.call('HGET', h, want) "
		   "if v then if #out < cap then out[#out + 1] = v else cut = 1 end end "
		   "else local room = cap - #out "
		   "local ids = redis.call('ZRANGEBYLEX', ARGV[2] .. n, '[' .. want, '[' .. want .. '\\255', "
		   "'LIMIT', 0, room + 1) "
		   "if #ids > room then cut = 1 ids[#ids] = nil end "
		   "if #ids > 0 then for _, v in ipairs(redis.call('HMGET', h, unpack(ids))) do "
		   "if v then out[#out + 1] = v end end end end end "
		   "return {cut, out}";

/* KEYS nodes, announced, leaving, mine; ARGV prefix, id, ttl ms, first
 * chunk (1/0), announce (1/0), then key, count pairs. The keys whose join
 * goes out now. */
static const char lua_share[] =
	LUA_COMMON "if ARGV[4] == '1' then redis.call('DEL', KEYS[4]) end "
		   "local out = {} "
		   "for i = 6, #ARGV, 2 do local k = ARGV[i] "
		   "redis.call('HSET', KEYS[4], k, ARGV[i + 1]) "
		   "if ARGV[5] == '1' and string.find(k, '\\31', 1, true) then "
		   "if redis.call('HEXISTS', KEYS[2], k) == 1 then redis.call('ZREM', KEYS[3], k) "
		   "else redis.call('HSET', KEYS[2], k, 1) out[#out + 1] = k end end end "
		   "local now = now_ms() "
		   "redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2]) "
		   "redis.call('PEXPIRE', KEYS[4], 2 * tonumber(ARGV[3])) return out";

/* KEYS nodes; ARGV prefix. Every live node's keys, summed: key, n, ... */
static const char lua_snapshot[] =
	LUA_COMMON "local sum, order = {}, {} "
		   "for _, n in ipairs(live(now_ms())) do "
		   "local kv = redis.call('HGETALL', ARGV[1] .. n) "
		   "for i = 1, #kv, 2 do local v = tonumber(kv[i + 1]) if v > 0 then "
		   "if not sum[kv[i]] then sum[kv[i]] = 0 order[#order + 1] = kv[i] end "
		   "sum[kv[i]] = sum[kv[i]] + v end end end "
		   "local out = {} for _, k in ipairs(order) do out[#out + 1] = k out[#out + 1] = sum[k] end "
		   "return out";

struct presence_redis {
	struct loop *lp;
	const struct config *cfg;
	struct presence_redis_hooks hooks;
	struct presence_redis_subs_hooks subs; /* closed NULL: no subscriptions kept here */
	struct redis_link *link;
	redisAsyncContext *ac; /* the link's connection; NULL while down */
	bool up;               /* the share was written on ac */
	bool working;          /* Redis answered the share's first write on ac */
	bool warned;           /* the loss was logged, and no link has worked since */
	struct loop_timer heartbeat_timer, sweep_timer;
	char id[24];
	char key_nodes[256], key_announced[256], key_leaving[256], key_mine[300], prefix[256];
	char key_subs_closing[256], key_subs_mine[300], subs_prefix[256], swept_prefix[256], key_swept_mine[300];
	char ids_prefix[256], key_ids_mine[300];
	/* The share being written: key, count pairs for the next script. */
	const char **share_argv;
	size_t *share_lens;
	char **share_owned;
	size_t share_n;
	bool share_first;
	/* The subscriptions being written whole: id, record pairs for the
	 * next HSET. */
	bool subs_batch;
	char **subs_owned;
	size_t *subs_lens;
	size_t subs_n;
};

/* The link's connection went: said once an outage; the link tries again. */
static void on_down(void *arg, const char *why)
{
	struct presence_redis *r = arg;
	if (!r->warned)
		log_warn("presence: lost Redis at %s (%s); answers are refused until it is back, then this node's "
			 "share is written again",
			 redis_link_where(r->link), why);
	r->warned = true;
	r->up = false;
	r->working = false;
	r->ac = NULL;
	loop_timer_stop(r->lp, &r->heartbeat_timer);
	loop_timer_stop(r->lp, &r->sweep_timer);
}

/* Send a script on the connection; NULL cb: the answer is only checked
 * for an error. */
static void on_checked(redisAsyncContext *ac, void *reply, void *privdata);

static int send_argv(struct presence_redis *r, redisCallbackFn *cb, void *privdata, int argc, const char **argv,
		     const size_t *lens)
{
	if (!r->ac)
		return -1;
	return redisAsyncCommandArgv(r->ac, cb ? cb : on_checked, privdata, argc, argv, lens) == REDIS_OK ? 0 : -1;
}

/* An error answer: logged; a server that is a replica now (a failover
 * demoted it) is left by the link, which asks Sentinel again. */
static void answer_error(struct presence_redis *r, const redisReply *rep)
{
	if (redis_link_readonly(r->link, rep))
		return;
	log_warn("presence: Redis at %s: %s", redis_link_where(r->link), rep->str);
}

static void on_checked(redisAsyncContext *ac, void *reply, void *privdata)
{
	redisReply *rep = reply;
	(void)privdata;
	if (rep && rep->type == REDIS_REPLY_ERROR)
		answer_error(redis_link_user(ac), rep);
}

/* Redis answered a write on the connection: it works (again). */
static void link_works(struct presence_redis *r)
{
	if (r->working)
		return;
	r->working = true;
	redis_link_works(r->link);
	if (r->warned)
		log_notice("presence: Redis at %s is back; this node's share is written again",
			   redis_link_where(r->link));
	r->warned = false;
}

/* An answer naming keys: lua_add's (privdata the key added: 1 is its
 * join) or lua_share's (privdata NULL: an array of joins). */
static void on_keys(redisAsyncContext *ac, void *reply, void *privdata)
{
	redisReply *rep = reply;
	struct presence_redis *r = redis_link_user(ac);
	char *added = privdata;
	if (rep && rep->type == REDIS_REPLY_ERROR) {
		answer_error(r, rep);
	} else if (rep && added) {
		if (rep->type == REDIS_REPLY_INTEGER && rep->integer == 1)
			r->hooks.join(r->hooks.arg, added);
	} else if (rep && rep->type == REDIS_REPLY_ARRAY) {
		link_works(r);
		for (size_t i = 0; i < rep->elements; i++)
			if (rep->element[i]->type == REDIS_REPLY_STRING)
				r->hooks.join(r->hooks.arg, rep->element[i]->str);
	}
	free(added);
}

static void send_script(struct presence_redis *r, redisCallbackFn *cb, void *privdata, const char *script, int nkeys,
			const char *const *keys, int nargs, const char *const *args)
{
	const char *argv[16]; /* EVAL, the script, the count, up to 13 keys and args */
	char n[8];
	int argc = 0;
	if (nkeys + nargs > 13) {
		log_err("presence: a script of %d keys and %d arguments is not sent", nkeys, nargs);
		return;
	}
	snprintf(n, sizeof(n), "%d", nkeys);
	argv[argc++] = "EVAL";
	argv[argc++] = script;
	argv[argc++] = n;
	for (int i = 0; i < nkeys; i++)
		argv[argc++] = keys[i];
	for (int i = 0; i < nargs; i++)
		argv[argc++] = args[i];
	if (send_argv(r, cb, privdata, argc, argv, NULL) < 0 && cb == on_keys)
		free(privdata);
}

static void share_again(struct presence_redis *r);
static void share_clear(struct presence_redis *r);
static void subs_flush(struct presence_redis *r);
static void subs_expire(struct presence_redis *r);

/* lua_heartbeat's answer: 0, the node was taken for dead while it did not
 * beat (paused, stalled) and its share is gone: written again at once, on
 * this connection (what follows goes behind it). */
static void on_heartbeat(redisAsyncContext *ac, void *reply, void *privdata)
{
	redisReply *rep = reply;
	(void)privdata;
	if (!rep)
		return;
	struct presence_redis *r = redis_link_user(ac);
	if (rep->type == REDIS_REPLY_ERROR) {
		answer_error(r, rep);
	} else if (rep->type == REDIS_REPLY_INTEGER && rep->integer == 0 && r->ac == ac) {
		log_notice("presence: Redis at %s no longer had this node (taken for dead while it did not beat for "
			   "presence_ttl); its share is written again",
			   redis_link_where(r->link));
		share_again(r);
	}
}

/* lua_swept's answer: 1, a sweep closed this node's subscriptions. */
static void on_swept(redisAsyncContext *ac, void *reply, void *privdata)
{
	redisReply *rep = reply;
	(void)privdata;
	if (!rep || rep->type != REDIS_REPLY_INTEGER || rep->integer != 1)
		return;
	struct presence_redis *r = redis_link_user(ac);
	if (r->subs.swept)
		r->subs.swept(r->subs.arg);
}

static void heartbeat(void *arg)
{
	struct presence_redis *r = arg;
	char ttl[24];
	snprintf(ttl, sizeof(ttl), "%lld", (long long)r->cfg->presence_ttl_ms);
	const char *keys[4] = { r->key_nodes, r->key_mine, r->key_subs_mine, r->key_ids_mine };
	const char *args[3] = { r->prefix, r->id, ttl };
	send_script(r, on_heartbeat, NULL, lua_heartbeat, 4, keys, 3, args);
	loop_timer_start(r->lp, &r->heartbeat_timer, MAX((uint64_t)r->cfg->presence_ttl_ms / 3, (uint64_t)100),
			 heartbeat, r);
}

static void sweep(void *arg);

/* lua_sweep's answer: the leaves, then the dead nodes' subscriptions this
 * node closes; a full chunk of them: the next sweep at once. */
static void on_sweep(redisAsyncContext *ac, void *reply, void *privdata)
{
	redisReply *rep = reply;
	struct presence_redis *r = redis_link_user(ac);
	(void)privdata;
	if (!rep)
		return;
	if (rep->type == REDIS_REPLY_ERROR) {
		answer_error(r, rep);
		return;
	}
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 || rep->element[0]->type != REDIS_REPLY_ARRAY ||
	    rep->element[1]->type != REDIS_REPLY_ARRAY)
		return;
	const redisReply *leaves = rep->element[0], *closes = rep->element[1];
	for (size_t i = 0; i < leaves->elements; i++)
		if (leaves->element[i]->type == REDIS_REPLY_STRING)
			r->hooks.leave(r->hooks.arg, leaves->element[i]->str);
	for (size_t i = 0; i < closes->elements && r->subs.closed; i++)
		if (closes->element[i]->type == REDIS_REPLY_STRING)
			r->subs.closed(r->subs.arg, closes->element[i]->str, closes->element[i]->len);
	if (closes->elements >= SUBS_CLOSE_CHUNK && r->ac)
		loop_timer_start(r->lp, &r->sweep_timer, 0, sweep, r);
}

static void sweep(void *arg)
{
	struct presence_redis *r = arg;
	char grace[24], chunk[24];
	snprintf(grace, sizeof(grace), "%lld", (long long)r->cfg->presence_grace_ms);
	snprintf(chunk, sizeof(chunk), "%d", r->subs.closed ? SUBS_CLOSE_CHUNK : 0);
	const char *keys[4] = { r->key_nodes, r->key_announced, r->key_leaving, r->key_subs_closing };
	const char *args[7] = { r->prefix, grace, r->subs_prefix, chunk, r->swept_prefix, r->id, r->ids_prefix };
	send_script(r, on_sweep, NULL, lua_sweep, 4, keys, 7, args);
	loop_timer_start(r->lp, &r->sweep_timer, SWEEP_MS, sweep, r);
}

/* The whole share on the connection, ahead of the counts that follow: on
 * a connection, and when a heartbeat finds the node taken for dead. */
static void share_again(struct presence_redis *r)
{
	loop_timer_stop(r->lp, &r->heartbeat_timer);
	loop_timer_stop(r->lp, &r->sweep_timer);
	r->up = false;
	r->share_first = true;
	share_clear(r);
	/* The subscriptions are written whole too: whether a sweep closed
	 * them asked first, then the hash emptied. */
	if (r->subs.connected) {
		const char *argv[4] = { "EVAL", lua_swept, "1", r->key_swept_mine };
		send_argv(r, on_swept, NULL, 4, argv, NULL);
	}
	const char *del[3] = { "DEL", r->key_subs_mine, r->key_ids_mine };
	send_argv(r, NULL, NULL, 3, del, NULL);
	r->hooks.connected(r->hooks.arg); /* the share, then presence_redis_share_done */
	if (r->subs.connected && r->ac) {
		r->subs_batch = true;
		r->subs.connected(r->subs.arg); /* puts, gathered in HSETs of SUBS_PUT_CHUNK */
		subs_flush(r);
		r->subs_batch = false;
		subs_expire(r);
	}
}

/* A connection (again): the login is queued ahead; the share follows. */
static void on_up(void *arg, redisAsyncContext *ac)
{
	struct presence_redis *r = arg;
	r->ac = ac;
	share_again(r);
}

struct presence_redis *presence_redis_new(struct loop *lp, const struct config *cfg,
					  const struct presence_redis_hooks *hooks, char *err, size_t errlen)
{
	struct presence_redis *r = xcalloc(1, sizeof(*r));
	r->lp = lp;
	r->cfg = cfg;
	r->hooks = *hooks;
	struct redis_link_spec spec = { cfg->redis_url, cfg->redis_sentinels, cfg->redis_master_name,
					"presence: Redis at" };
	struct redis_link_hooks lh = { on_up, on_down, r };
	r->link = redis_link_new(lp, &spec, &lh, err, errlen);
	if (!r->link) {
		free(r);
		return NULL;
	}
	snprintf(r->id, sizeof(r->id), "%08llx%08llx", (unsigned long long)random_below(UINT32_MAX),
		 (unsigned long long)((uint64_t)getpid() ^ random_below(UINT32_MAX)));
	snprintf(r->key_nodes, sizeof(r->key_nodes), "{%s}:presence:nodes", cfg->redis_stream);
	snprintf(r->key_announced, sizeof(r->key_announced), "{%s}:presence:announced", cfg->redis_stream);
	snprintf(r->key_leaving, sizeof(r->key_leaving), "{%s}:presence:leaving", cfg->redis_stream);
	snprintf(r->prefix, sizeof(r->prefix), "{%s}:presence:node:", cfg->redis_stream);
	snprintf(r->key_mine, sizeof(r->key_mine), "%s%s", r->prefix, r->id);
	snprintf(r->key_subs_closing, sizeof(r->key_subs_closing), "{%s}:presence:subs:closing", cfg->redis_stream);
	snprintf(r->subs_prefix, sizeof(r->subs_prefix), "{%s}:presence:subs:node:", cfg->redis_stream);
	snprintf(r->key_subs_mine, sizeof(r->key_subs_mine), "%s%s", r->subs_prefix, r->id);
	snprintf(r->swept_prefix, sizeof(r->swept_prefix), "{%s}:presence:subs:swept:", cfg->redis_stream);
	snprintf(r->key_swept_mine, sizeof(r->key_swept_mine), "%s%s", r->swept_prefix, r->id);
	snprintf(r->ids_prefix, sizeof(r->ids_prefix), "{%s}:presence:subs:ids:", cfg->redis_stream);
	snprintf(r->key_ids_mine, sizeof(r->key_ids_mine), "%s%s", r->ids_prefix, r->id);
	redis_link_start(r->link, false); /* from the loop: the hooks' owner has r in hand by then */
	return r;
}

static void share_clear(struct presence_redis *r)
{
	for (size_t i = 0; i < r->share_n; i++)
		free(r->share_owned[i]);
	r->share_n = 0;
}

void presence_redis_free(struct presence_redis *r)
{
	if (!r)
		return;
	loop_timer_stop(r->lp, &r->heartbeat_timer);
	loop_timer_stop(r->lp, &r->sweep_timer);
	/* By now a clean stop's streams have closed during the drain, their
	 * counts taken out on this connection; the node's entry then expires
	 * with its TTL. Pending answers come back NULL. */
	r->ac = NULL;
	redis_link_free(r->link);
	share_clear(r);
	subs_flush(r); /* nothing is left to send: frees what a batch held */
	free(r->subs_owned);
	free(r->subs_lens);
	free(r->share_argv);
	free(r->share_lens);
	free(r->share_owned);
	free(r);
}

bool presence_redis_up(const struct presence_redis *r)
{
	return r->up && r->ac;
}

void presence_redis_add(struct presence_redis *r, const char *key, bool announce)
{
	if (!r->up)
		return;
	if (!announce) {
		const char *argv[4] = { "HINCRBY", r->key_mine, key, "1" };
		send_argv(r, NULL, NULL, 4, argv, NULL);
		return;
	}
	const char *keys[4] = { r->key_nodes, r->key_announced, r->key_leaving, r->key_mine };
	const char *args[2] = { r->prefix, key };
	send_script(r, on_keys, xstrdup(key), lua_add, 4, keys, 2, args);
}

void presence_redis_del(struct presence_redis *r, const char *key, bool announce)
{
	if (!r->up)
		return;
	const char *keys[4] = { r->key_nodes, r->key_announced, r->key_leaving, r->key_mine };
	const char *args[2] = { r->prefix, key };
	if (announce)
		send_script(r, NULL, NULL, lua_del, 4, keys, 2, args);
	else
		send_script(r, NULL, NULL,
			    "if redis.call('HINCRBY', KEYS[4], ARGV[2], -1) <= 0 then "
			    "redis.call('HDEL', KEYS[4], ARGV[2]) end return 0",
			    4, keys, 2, args);
}

/* Send the pairs gathered so far as one lua_share call. */
static void share_flush(struct presence_redis *r)
{
	char ttl[24];
	snprintf(ttl, sizeof(ttl), "%lld", (long long)r->cfg->presence_ttl_ms);
	size_t argc = 0, cap = 3 + 4 + 5 + r->share_n;
	const char **argv = xmalloc(cap * sizeof(*argv));
	argv[argc++] = "EVAL";
	argv[argc++] = lua_share;
	argv[argc++] = "4";
	argv[argc++] = r->key_nodes;
	argv[argc++] = r->key_announced;
	argv[argc++] = r->key_leaving;
	argv[argc++] = r->key_mine;
	argv[argc++] = r->prefix;
	argv[argc++] = r->id;
	argv[argc++] = ttl;
	argv[argc++] = r->share_first ? "1" : "0";
	argv[argc++] = r->cfg->presence_events ? "1" : "0";
	for (size_t i = 0; i < r->share_n; i++)
		argv[argc++] = r->share_owned[i];
	send_argv(r, on_keys, NULL, (int)argc, argv, NULL);
	free(argv);
	share_clear(r);
	r->share_first = false;
}

void presence_redis_share(struct presence_redis *r, const char *key, uint32_t n)
{
	if (!r->ac)
		return;
	if (!r->share_owned)
		r->share_owned = xmalloc(2 * SHARE_CHUNK * sizeof(*r->share_owned));
	char num[16];
	snprintf(num, sizeof(num), "%u", n);
	r->share_owned[r->share_n++] = xstrdup(key);
	r->share_owned[r->share_n++] = xstrdup(num);
	if (r->share_n == 2 * SHARE_CHUNK)
		share_flush(r);
}

void presence_redis_share_done(struct presence_redis *r)
{
	if (!r->ac)
		return;
	share_flush(r); /* the last pairs, or none: the first call also clears and beats */
	r->up = true;   /* counts may follow the share; whether it works, its answer says */
	loop_timer_start(r->lp, &r->heartbeat_timer, MAX((uint64_t)r->cfg->presence_ttl_ms / 3, (uint64_t)100),
			 heartbeat, r);
	if (r->cfg->presence_events || r->subs.closed)
		loop_timer_start(r->lp, &r->sweep_timer, SWEEP_MS, sweep, r);
}

struct snapshot_ask {
	presence_redis_snapshot_cb *cb;
	void *arg;
};

static void on_snapshot(redisAsyncContext *ac, void *reply, void *privdata)
{
	redisReply *rep = reply;
	struct snapshot_ask *ask = privdata;
	(void)ac;
	if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements % 2) {
		ask->cb(ask->arg, NULL, NULL, (size_t)-1);
		free(ask);
		return;
	}
	size_t n = rep->elements / 2;
	const char **keys = xmalloc((n + 1) * sizeof(*keys));
	uint32_t *totals = xmalloc((n + 1) * sizeof(*totals));
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		redisReply *kr = rep->element[2 * i], *vr = rep->element[2 * i + 1];
		if (kr->type != REDIS_REPLY_STRING || vr->type != REDIS_REPLY_INTEGER || vr->integer <= 0)
			continue;
		keys[k] = kr->str;
		totals[k++] = (uint32_t)MIN(vr->integer, (long long)UINT32_MAX);
	}
	ask->cb(ask->arg, keys, totals, k);
	free(keys);
	free(totals);
	free(ask);
}

int presence_redis_snapshot(struct presence_redis *r, presence_redis_snapshot_cb *cb, void *arg)
{
	if (!presence_redis_up(r))
		return -1;
	struct snapshot_ask *ask = xmalloc(sizeof(*ask));
	*ask = (struct snapshot_ask){ cb, arg };
	const char *argv[5] = { "EVAL", lua_snapshot, "1", r->key_nodes, r->prefix };
	if (send_argv(r, on_snapshot, ask, 5, argv, NULL) < 0) {
		free(ask);
		return -1;
	}
	return 0;
}

/* ---- the Mercure endpoint's active subscriptions ------------------------ */

void presence_redis_subs_hooks(struct presence_redis *r, const struct presence_redis_subs_hooks *h)
{
	static const struct presence_redis_subs_hooks none = { 0 };
	r->subs = h ? *h : none;
}

/* The hash lives as long as the node's counts, even before the next
 * heartbeat (a hash emptied is gone, and comes back without one). */
static void subs_expire(struct presence_redis *r)
{
	char ms[24];
	snprintf(ms, sizeof(ms), "%lld", 2 * (long long)r->cfg->presence_ttl_ms);
	const char *argv[3] = { "PEXPIRE", r->key_subs_mine, ms };
	send_argv(r, NULL, NULL, 3, argv, NULL);
	argv[1] = r->key_ids_mine;
	send_argv(r, NULL, NULL, 3, argv, NULL);
}

/* Send the pairs gathered so far as one HSET, and their ids as one
 * ZADD. */
static void subs_flush(struct presence_redis *r)
{
	if (r->subs_n) {
		size_t argc = 2 + r->subs_n;
		const char **argv = xmalloc(argc * sizeof(*argv));
		size_t *lens = xmalloc(argc * sizeof(*lens));
		argv[0] = "HSET";
		lens[0] = 4;
		argv[1] = r->key_subs_mine;
		lens[1] = strlen(r->key_subs_mine);
		for (size_t i = 0; i < r->subs_n; i++) {
			argv[2 + i] = r->subs_owned[i];
			lens[2 + i] = r->subs_lens[i];
		}
		send_argv(r, NULL, NULL, (int)argc, argv, lens);
		/* The ids in order (all of score 0), for ranges by prefix. */
		argv[0] = "ZADD";
		argv[1] = r->key_ids_mine;
		lens[1] = strlen(r->key_ids_mine);
		for (size_t i = 0; i < r->subs_n; i += 2) {
			argv[2 + i] = "0";
			lens[2 + i] = 1;
			argv[3 + i] = r->subs_owned[i];
			lens[3 + i] = r->subs_lens[i];
		}
		send_argv(r, NULL, NULL, (int)argc, argv, lens);
		free(argv);
		free(lens);
	}
	for (size_t i = 0; i < r->subs_n; i++)
		free(r->subs_owned[i]);
	r->subs_n = 0;
}

int presence_redis_subs_put(struct presence_redis *r, const char *id, const char *record, size_t len)
{
	if (!r->ac)
		return -1;
	if (r->subs_batch) {
		if (!r->subs_owned) {
			r->subs_owned = xmalloc(2 * SUBS_PUT_CHUNK * sizeof(*r->subs_owned));
			r->subs_lens = xmalloc(2 * SUBS_PUT_CHUNK * sizeof(*r->subs_lens));
		}
		r->subs_lens[r->subs_n] = strlen(id);
		r->subs_owned[r->subs_n++] = xstrdup(id);
		r->subs_lens[r->subs_n] = len;
		r->subs_owned[r->subs_n++] = xstrndup(record, len);
		if (r->subs_n == 2 * SUBS_PUT_CHUNK)
			subs_flush(r);
		return 0;
	}
	const char *argv[4] = { "HSET", r->key_subs_mine, id, record };
	size_t lens[4] = { 4, strlen(r->key_subs_mine), strlen(id), len };
	if (send_argv(r, NULL, NULL, 4, argv, lens) < 0)
		return -1;
	const char *zadd[4] = { "ZADD", r->key_ids_mine, "0", id };
	send_argv(r, NULL, NULL, 4, zadd, NULL);
	subs_expire(r);
	return 0;
}

void presence_redis_subs_del(struct presence_redis *r, const char *id)
{
	const char *argv[3] = { "HDEL", r->key_subs_mine, id };
	send_argv(r, NULL, NULL, 3, argv, NULL);
	const char *zrem[3] = { "ZREM", r->key_ids_mine, id };
	send_argv(r, NULL, NULL, 3, zrem, NULL);
}

struct subs_ask {
	presence_redis_subs_cb *cb;
	void *arg;
};

static void on_subs_list(redisAsyncContext *ac, void *reply, void *privdata)
{
	redisReply *rep = reply;
	struct subs_ask *ask = privdata;
	(void)ac;
	if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
	    rep->element[1]->type != REDIS_REPLY_ARRAY) {
		if (rep && rep->type == REDIS_REPLY_ERROR)
			answer_error(redis_link_user(ac), rep);
		ask->cb(ask->arg, NULL, NULL, (size_t)-1, false);
		free(ask);
		return;
	}
	const redisReply *list = rep->element[1];
	const char **recs = xmalloc((list->elements + 1) * sizeof(*recs));
	size_t *lens = xmalloc((list->elements + 1) * sizeof(*lens)), n = 0;
	for (size_t i = 0; i < list->elements; i++) {
		if (list->element[i]->type != REDIS_REPLY_STRING)
			continue;
		recs[n] = list->element[i]->str;
		lens[n++] = list->element[i]->len;
	}
	bool cut = rep->element[0]->type == REDIS_REPLY_INTEGER && rep->element[0]->integer == 1;
	ask->cb(ask->arg, recs, lens, n, cut);
	free(recs);
	free(lens);
	free(ask);
}

int presence_redis_subs_list(struct presence_redis *r, const char *prefix, bool exact, size_t cap,
			     presence_redis_subs_cb *cb, void *arg)
{
	if (!presence_redis_up(r))
		return -1;
	struct subs_ask *ask = xmalloc(sizeof(*ask));
	*ask = (struct subs_ask){ cb, arg };
	char num[24];
	snprintf(num, sizeof(num), "%zu", cap);
	const char *argv[9] = { "EVAL", lua_subs_list,     "1", r->key_nodes, r->subs_prefix, r->ids_prefix,
				prefix, exact ? "1" : "0", num };
	if (send_argv(r, on_subs_list, ask, 9, argv, NULL) < 0) {
		free(ask);
		return -1;
	}
	return 0;
}
