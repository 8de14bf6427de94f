/* SPDX-License-Identifier: BSD-2-Clause */
/* webhook.c: the deliverer (webhook.h). It owns its lease state and cursor
 * in memory (the stored ones are the store's), the one request out and the
 * timers; the batch's body lives only while its request is being started
 * (the client copies it). */
#include "webhook/webhook.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/loop.h"
#include "common/util.h"
#include "core/config.h"
#include "core/metrics.h"
#include "hub/hub.h"
#include "net/http_client.h"
#include "presence/presence.h"
#include "store/store.h"
#include "webhook/webhook_body.h"

#define LEASE_NAME "webhook"
#define LEASE_TTL_MS 5000    /* a holder that stops renewing is replaced after this */
#define LEASE_EVERY_MS 1000  /* renewal (and the try of those that do not hold it) */
#define LEASE_MARGIN_MS 1000 /* a holder that could not renew stops this long before it may have lost it */
#define RETRY_FIRST_MS 1000
#define RETRY_MAX_MS 60000
#define FETCH_RETRY_MS 20 /* the store is fetching an old range (Redis) */
#define STORE_RETRY_MS 1000
#define PAGES_PER_PASS 16 /* pages of unwanted rows read per pass before yielding */
#define RESPONSE_MAX (64u << 10)

struct webhook {
	struct loop *lp;
	struct store *st;
	struct hub *hub;
	struct http_client *http;
	const struct config *cfg;
	struct metrics *m;
	int64_t owner;       /* this process's lease owner number */
	bool holding;        /* this process delivers */
	uint64_t held_until; /* loop time the lease may have run out by */
	bool lease_out;      /* a store_lease call not answered yet */
	bool save_wanted;    /* the cursor moved while one was out */
	bool release_wanted; /* let go while one was out: release once it is answered */
	bool stopped;
	bool on;                /* webhook_url was set at the last (re)configuration */
	int64_t lost_said;      /* a namespace's loss logged up to this id */
	char url_said[256];     /* the application of the batch out, for the logs (cut) */
	int64_t on_since;       /* the newest id then: where a log with no cursor starts */
	int64_t cursor;         /* delivered (or skipped) through, while holding */
	struct http_call *call; /* the request out, or NULL */
	int64_t batch_next;     /* the cursor once it is acknowledged */
	size_t batch_count;
	uint64_t backoff_ms; /* the last wait after a failure; 0: none in this run */
	bool failing;        /* this run of failures was logged */
	struct loop_timer lease_timer, pump_timer, retry_timer;
};

/* Where the events go: url and secret. */
struct webhook_target {
	const char *url;
	const char *secret;
};

/* The application that receives ev: its namespace's webhook_url (a
 * join's or a leave's namespace is its pattern's, the topic after
 * "$presence/"), else webhook_url; signed with webhook_secret. A batch
 * holds events of one target (batch_row). */
static struct webhook_target target_for(const struct config *cfg, const struct store_event *ev)
{
	if (cfg->namespaces.n) {
		const char *topic = ev->topic;
		size_t len = ev->topic_len, pre = strlen(PRESENCE_TOPIC_PREFIX);
		if (len > pre && memcmp(topic, PRESENCE_TOPIC_PREFIX, pre) == 0) {
			topic += pre;
			len -= pre;
		}
		const char *u = config_rules(cfg, topic, len)->webhook_url;
		return (struct webhook_target){ u ? u : cfg->webhook_url, cfg->webhook_secret };
	}
	return (struct webhook_target){ cfg->webhook_url, cfg->webhook_secret };
}

/* Whether any application is to be told: webhook_url, or a namespace's. */
static bool delivering(const struct config *cfg)
{
	if (cfg->webhook_url[0])
		return true;
	for (size_t i = 0; i < cfg->namespaces.n; i++)
		if (cfg->namespaces.ns[i].webhook_url && cfg->namespaces.ns[i].webhook_url[0])
			return true;
	return false;
}

/* The patterns of the rows delivered: herald's own topics, or every row. */
static char *const own_topics[] = { "$presence/*", "$mercure/*" };

/* How far retention has removed every row the deliverer reads: the log's
 * pruned-through; with namespaces, the least of those its rows fall in
 * (others may have lost more: said by the caller). */
static int64_t gone_through(const struct webhook *w, int64_t *most)
{
	const struct namespaces *t = &w->cfg->namespaces;
	*most = store_pruned_through(w->st);
	if (!t->n)
		return *most;
	int64_t least = INT64_MAX;
	*most = 0;
	for (int i = -1; i < (int)t->n; i++) {
		if (!w->cfg->webhook_publishes && !namespace_reached(t, i, own_topics, ARRAY_LEN(own_topics)))
			continue;
		int64_t p = store_pruned_namespace(w->st, i);
		least = MIN(least, p);
		*most = MAX(*most, p);
	}
	return least == INT64_MAX ? 0 : least;
}

static bool same_target(const struct webhook_target *a, const struct webhook_target *b)
{
	return strcmp(a->url, b->url) == 0 && strcmp(a->secret, b->secret) == 0;
}

static void pump(struct webhook *w);
static void lease_call(struct webhook *w);
static void on_lease(void *arg, int rc, bool held, int64_t stored);

static void pump_cb(void *arg)
{
	pump(arg);
}

static void pump_soon(struct webhook *w)
{
	if (!w->stopped && !loop_timer_active(&w->pump_timer))
		loop_timer_start(w->lp, &w->pump_timer, 0, pump_cb, w);
}

static void set_lag(struct webhook *w)
{
	int64_t newest = hub_high_water(w->hub);
	w->m->webhook_lag = w->holding && newest > w->cursor ? newest - w->cursor : 0;
}

static void let_go(struct webhook *w, const char *why)
{
	if (w->holding)
		log_msg(w->stopped ? LOG_LVL_INFO : LOG_LVL_WARN,
			"webhook: this process stops delivering (%s); the request out, if any, is sent again by the "
			"next holder",
			why);
	w->holding = false;
	if (w->call)
		http_client_cancel(w->call);
	w->call = NULL;
	w->m->webhook_in_flight = 0;
	loop_timer_stop(w->lp, &w->retry_timer);
	set_lag(w);
}

/* Release the lease with the cursor stored, now or, when a call is out
 * (whose answer may say it is held again), once that call is answered. */
static void release(struct webhook *w)
{
	if (w->lease_out) {
		w->release_wanted = true;
		return;
	}
	w->release_wanted = false;
	w->lease_out = true;
	store_lease(w->st, LEASE_NAME, w->owner, 0, w->cursor, on_lease, w);
}

static void on_lease(void *arg, int rc, bool held, int64_t stored)
{
	struct webhook *w = arg;
	w->lease_out = false;
	if (w->release_wanted) {
		w->release_wanted = false;
		if (rc == 0 && held)
			release(w);
		return;
	}
	if (w->stopped || !w->on)
		return;
	if (rc < 0) {
		/* Kept until it may have run out (pump checks). */
		log_debug("webhook: the lease could not be renewed: %s", strerror(-rc));
	} else if (held) {
		w->held_until = loop_now(w->lp) + LEASE_TTL_MS - LEASE_MARGIN_MS;
		if (!w->holding) {
			w->holding = true;
			/* No cursor yet (webhooks turned on for the first
			 * time): from when they were, not the history. */
			w->cursor = stored >= 0 ? stored : w->on_since;
			w->save_wanted |= stored < 0;
			w->backoff_ms = 0;
			w->failing = false;
			log_info("webhook: this process delivers to %s, from after id %lld%s",
				 w->cfg->webhook_url[0] ? w->cfg->webhook_url : "the namespaces' applications",
				 (long long)w->cursor,
				 stored >= 0 ? "" : " (no cursor was stored yet: from when webhooks were turned on)");
		} else if (stored > w->cursor) {
			w->cursor = stored;
		}
	} else {
		let_go(w, "another process holds the lease");
	}
	if (w->save_wanted && w->holding) {
		w->save_wanted = false;
		lease_call(w);
	}
	pump_soon(w);
}

/* Take or renew the lease, storing the cursor when held. */
static void lease_call(struct webhook *w)
{
	if (w->lease_out) {
		w->save_wanted = true;
		return;
	}
	w->lease_out = true;
	w->save_wanted = false; /* this call carries the cursor */
	store_lease(w->st, LEASE_NAME, w->owner, LEASE_TTL_MS, w->holding ? w->cursor : -1, on_lease, w);
}

static void lease_tick(void *arg)
{
	struct webhook *w = arg;
	loop_label(w->lp, "webhook lease", NULL);
	if (!delivering(w->cfg))
		return;
	lease_call(w);
	loop_timer_start(w->lp, &w->lease_timer, LEASE_EVERY_MS, lease_tick, w);
}

static void failed(struct webhook *w, const char *why)
{
	w->m->webhook_failures++;
	uint64_t wait = w->backoff_ms ? MIN(w->backoff_ms * 2, (uint64_t)RETRY_MAX_MS) : RETRY_FIRST_MS;
	w->backoff_ms = wait;
	/* Jitter: anywhere in [wait/2, wait], so that nodes after one outage
	 * do not come back together. */
	uint64_t delay = wait / 2 + random_below(wait / 2 + 1);
	if (!w->failing)
		log_warn("webhook %s: %s; the batch after id %lld is sent again in %.1f s, and then with a backoff to "
			 "%d s",
			 w->url_said, why, (long long)w->cursor, (double)delay / 1000, RETRY_MAX_MS / 1000);
	else
		log_debug("webhook %s: %s (still); again in %.1f s", w->url_said, why, (double)delay / 1000);
	w->failing = true;
	loop_timer_start(w->lp, &w->retry_timer, delay, pump_cb, w);
}

static void on_done(void *arg, const struct http_client_response *r)
{
	struct webhook *w = arg;
	w->call = NULL;
	w->m->webhook_in_flight = 0;
	if (r->status >= 200 && r->status < 300) {
		if (w->failing)
			log_info("webhook %s answers again", w->url_said);
		w->failing = false;
		w->backoff_ms = 0;
		w->m->webhook_deliveries++;
		w->m->webhook_events += w->batch_count;
		if (w->batch_next > w->cursor)
			w->cursor = w->batch_next;
		set_lag(w);
		lease_call(w); /* stores the cursor; the next batch waits for it */
		pump_soon(w);
		return;
	}
	char why[512];
	if (r->status < 0)
		snprintf(why, sizeof(why), "%s", r->error);
	else
		snprintf(why, sizeof(why), "answered HTTP %d", r->status);
	failed(w, why);
}

/* One page's batch being read. */
struct page {
	struct webhook *w;
	struct webhook_body body;
	struct webhook_target target;
	int64_t last; /* the last row taken or passed over */
	bool stopped; /* the batch is full, or the next row is for another target */
};

static int batch_row(void *arg, const struct store_event *ev)
{
	struct page *pg = arg;
	const struct config *cfg = pg->w->cfg;
	enum webhook_kind k = webhook_kind_of(ev, cfg->webhook_publishes);
	if (k == WEBHOOK_SKIP) {
		pg->last = ev->id;
		return 0;
	}
	struct webhook_target t = target_for(cfg, ev);
	if (!t.url[0]) {
		pg->last = ev->id; /* no application for it */
		return 0;
	}
	if (!pg->body.count) {
		pg->target = t;
	} else if (!same_target(&pg->target, &t)) {
		pg->stopped = true; /* the next batch begins with it */
		return 1;
	}
	webhook_body_add(&pg->body, k, ev);
	pg->last = ev->id;
	if (pg->body.n >= (size_t)cfg->webhook_batch_bytes) {
		pg->stopped = true;
		return 1;
	}
	return 0;
}

static void post(struct webhook *w, struct page *pg)
{
	webhook_body_end(&pg->body);
	int64_t ts = clock_wall_s();
	char sig[WEBHOOK_SIG_HEX];
	webhook_sign(pg->target.secret, ts, pg->body.p, pg->body.n, sig);
	char h_ts[64], h_sig[96], h_ids[96];
	snprintf(h_ts, sizeof(h_ts), "Herald-Timestamp: %lld", (long long)ts);
	snprintf(h_sig, sizeof(h_sig), "Herald-Signature: sha256=%s", sig);
	snprintf(h_ids, sizeof(h_ids), "Herald-Events: %lld-%lld", (long long)pg->body.first, (long long)pg->body.last);
	const char *headers[] = { "Content-Type: application/json", "User-Agent: herald", h_ts, h_sig, h_ids };
	struct http_client_request req = { .method = "POST",
					   .url = pg->target.url,
					   .headers = headers,
					   .nheaders = ARRAY_LEN(headers),
					   .body = pg->body.p,
					   .body_len = pg->body.n,
					   .timeout_ms = (uint64_t)w->cfg->webhook_timeout_ms,
					   .max_response = RESPONSE_MAX };
	char err[256];
	snprintf(w->url_said, sizeof(w->url_said), "%s", pg->target.url);
	w->batch_count = pg->body.count;
	w->call = http_client_request(w->http, &req, on_done, w, err, sizeof(err));
	webhook_body_free(&pg->body);
	if (!w->call) {
		failed(w, err);
		return;
	}
	w->m->webhook_in_flight = (int64_t)w->batch_count;
}

/* Deliver what follows the cursor: one batch out at a time, and only
 * while the lease is held and its last renewal is stored. */
static void pump(struct webhook *w)
{
	loop_label(w->lp, "webhook delivery", NULL);
	if (w->stopped || !delivering(w->cfg) || !w->holding || w->call || w->lease_out ||
	    loop_timer_active(&w->retry_timer))
		return;
	if (loop_now(w->lp) >= w->held_until) {
		let_go(w, "the lease could not be renewed in time");
		return;
	}
	int64_t most, pruned = gone_through(w, &most);
	if (w->cursor < pruned) {
		log_warn("webhook: retention removed ids %lld to %lld before they were delivered: skipped",
			 (long long)w->cursor + 1, (long long)pruned);
		w->m->webhook_skipped += (uint64_t)(pruned - w->cursor);
		w->cursor = pruned;
		w->save_wanted = true;
	}
	if (most > w->cursor && most > w->lost_said) {
		/* A namespace lost rows after the cursor that another still
		 * has beside them: read on, what is left is delivered. */
		log_warn("webhook: retention of a namespace removed rows up to id %lld before they were delivered",
			 (long long)most);
		w->lost_said = most;
	}
	int64_t newest = hub_high_water(w->hub);
	struct store_filter f = { .see_private = true,
				  .ntopics = w->cfg->webhook_publishes ? 0 : ARRAY_LEN(own_topics),
				  .topics = own_topics };
	for (int pages = 0; pages < PAGES_PER_PASS; pages++) {
		set_lag(w);
		if (w->cursor >= newest)
			break;
		struct page pg = { .w = w, .last = w->cursor };
		webhook_body_begin(&pg.body);
		int64_t through = w->cursor;
		int n = store_read_matching(w->st, w->cursor, newest, (size_t)w->cfg->webhook_batch, &f, batch_row, &pg,
					    &through);
		if (n < 0) {
			webhook_body_free(&pg.body);
			if (n == -EBUSY)
				w->m->store_busy++;
			else if (n != -EAGAIN)
				log_err("webhook: reading the log after id %lld: %s", (long long)w->cursor,
					strerror(-n));
			loop_timer_start(w->lp, &w->pump_timer,
					 n == -EAGAIN  ? FETCH_RETRY_MS
					 : n == -EBUSY ? STORE_BUSY_RETRY_MS
						       : STORE_RETRY_MS,
					 pump_cb, w);
			return;
		}
		int64_t next = pg.stopped ? pg.last : MAX(through, pg.last);
		if (!pg.body.count) {
			webhook_body_free(&pg.body);
			if (next <= w->cursor)
				break; /* nothing examined (a read budget spent): on the next change */
			w->cursor = next;
			w->save_wanted = true;
			continue;
		}
		w->batch_next = next;
		post(w, &pg);
		return;
	}
	set_lag(w);
	if (w->cursor < newest)
		pump_soon(w);
	else if (w->save_wanted)
		lease_call(w); /* skipped rows: the cursor stored, at once or with the next renewal */
}

static void on_advance(void *arg)
{
	struct webhook *w = arg;
	if (w->holding)
		pump_soon(w);
	else
		set_lag(w);
}

struct webhook *webhook_new(struct loop *lp, struct store *st, struct hub *hub, struct http_client *http,
			    const struct config *cfg, struct metrics *m)
{
	struct webhook *w = xcalloc(1, sizeof(*w));
	w->lp = lp;
	w->st = st;
	w->hub = hub;
	w->http = http;
	w->cfg = cfg;
	w->m = m;
	/* Positive and below 2^53, so that every backend keeps it exactly. */
	random_bytes(&w->owner, sizeof(w->owner));
	w->owner = (int64_t)((uint64_t)w->owner >> 12) | 1;
	hub_on_advance(hub, on_advance, w);
	webhook_reconfigure(w);
	return w;
}

void webhook_reconfigure(struct webhook *w)
{
	if (!w || w->stopped)
		return;
	if (delivering(w->cfg)) {
		if (!w->on)
			w->on_since = hub_high_water(w->hub);
		w->on = true;
		if (!loop_timer_active(&w->lease_timer))
			lease_tick(w);
		pump_soon(w);
		return;
	}
	w->on = false;
	loop_timer_stop(w->lp, &w->lease_timer);
	if (w->holding || w->lease_out) {
		let_go(w, "webhook_url is off");
		release(w);
	}
}

void webhook_stop(struct webhook *w)
{
	if (!w || w->stopped)
		return;
	bool held = w->holding;
	w->stopped = true;
	let_go(w, "stopping");
	hub_on_advance(w->hub, NULL, NULL);
	loop_timer_stop(w->lp, &w->lease_timer);
	loop_timer_stop(w->lp, &w->pump_timer);
	loop_timer_stop(w->lp, &w->retry_timer);
	/* Released, so that another process takes over at once (a call out
	 * may be a renewal, or the first take: released after its answer). */
	if (held || w->lease_out)
		release(w);
}

bool webhook_settled(const struct webhook *w)
{
	return !w || !w->lease_out;
}

void webhook_free(struct webhook *w)
{
	free(w);
}
