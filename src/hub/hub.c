/* SPDX-License-Identifier: BSD-2-Clause */
/* hub.c: live readers, fan-out of each new event (encoded once, shared by
 * every matching reader, found through the topic index), heartbeats and
 * stall checks, and catch-up from the store for readers that resume or
 * fall behind. See hub.h for the invariant that keeps every reader's ids
 * gap-free and duplicate-free. */
#include "hub/hub_private.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hub/frame.h"
#include "common/log.h"
#include "store/store.h"
#include "core/topic.h"
#include "common/util.h"
#include "store/visibility.h"

#define POLL_PAGE 256 /* rows read per store call by the live path */
#define POLL_PAGES 16 /* store calls per hub_poll before yielding to the loop */
/* The time the live path's reading and fan-out may take in one pass: a row
 * may be as large as max_body, and another program's batch of 2,000 rows of
 * 20 KB held the loop 40-180 ms when only rows were counted. At least one
 * row goes out per pass, whatever it costs. */
#define POLL_PASS_NS 4000000
#define CATCHUP_PAGE 128 /* rows read per store call for one catch-up reader */
#define CATCHUP_PAGES 8  /* store calls per drain before yielding to the loop */
#define NO_INOTIFY_POLL_MS 1000

/* The time between turns: every reader is visited every half interval. */
static uint64_t heartbeat_tick_ms(const struct hub *h)
{
	uint64_t t = (uint64_t)h->cfg->heartbeat_interval_ms / (2 * HEARTBEAT_SLOTS);
	return t ? t : 1;
}

/* The reader whose list node n is; NULL for NULL (the end of a list). */
static struct reader *reader_at(struct list_node *n)
{
	return n ? list_item(n, struct reader, node) : NULL;
}

/* Visibility: public, or private with the read token or a granted topic. */
static bool reader_may_see(const struct reader *r, const struct store_event *ev)
{
	if (r->accepts)
		return r->accepts(r->accepts_arg, ev);
	return visibility_may_see(r->see_private, r->grants, r->ngrants, ev->topic, ev->topic_len, ev->public);
}

/* The rule, the same on every path an event takes (live, catch-up, resume):
 * a topic the reader asked for, and visible to it. store_read_matching
 * applies it in SQL; the live fan-out gets the topic part from the index. */
static bool reader_wants(const struct reader *r, const struct store_event *ev)
{
	if (r->accepts)
		return r->accepts(r->accepts_arg, ev);
	return visibility_wants(r->topics, r->ntopics, ev->topic, ev->topic_len) && reader_may_see(r, ev);
}

/* The index r is in while LIVE: the rules index for a reader with its own
 * rule, else the topic index. */
static struct topic_index *index_of(const struct hub *h, const struct reader *r)
{
	return r->accepts ? h->rules : h->index;
}

/* Index r under patterns pats[0..n). None, or "*" among them, is one
 * subscription to every topic (the others add nothing); a pattern given
 * twice is indexed once, since the index wants no owner twice on one key. */
static void index_reader(struct hub *h, struct reader *r, char *const *pats, size_t n)
{
	struct topic_index *ix = index_of(h, r);
	bool every = n == 0;
	for (size_t i = 0; i < n && !every; i++)
		every = strcmp(pats[i], "*") == 0;
	r->nsubs = 0;
	if (every) {
		topic_index_add(ix, &r->subs[r->nsubs++], "*", r);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		bool repeated = false;
		for (size_t j = 0; j < i && !repeated; j++)
			repeated = strcmp(pats[i], pats[j]) == 0;
		if (!repeated)
			topic_index_add(ix, &r->subs[r->nsubs++], pats[i], r);
	}
}

/* r becomes LIVE: on the live list and in the index. */
static void live_add(struct hub *h, struct reader *r)
{
	r->mode = READER_LIVE;
	list_push(&h->live, &r->node);
	h->nlive++;
	if (r->accepts) {
		/* Its keys mean something only with a prober to give an
		 * event's; without one, every event. */
		index_reader(h, r, r->keys, h->probe ? r->nkeys : 0);
		h->nrules++;
	} else {
		index_reader(h, r, r->topics, r->ntopics);
	}
}

/* r stops being LIVE (its caller sets the new mode). */
static void live_del(struct hub *h, struct reader *r)
{
	for (size_t i = 0; i < r->nsubs; i++)
		topic_index_del(index_of(h, r), &r->subs[i]);
	if (r->accepts)
		h->nrules--;
	r->nsubs = 0;
	list_unlink(&h->live, &r->node);
	h->nlive--;
}

/* Take r off the catch-up list (where catchup_retry may have meant to
 * resume). */
static void catchup_del(struct hub *h, struct reader *r)
{
	if (h->catchup_resume == r)
		h->catchup_resume = reader_at(r->node.next);
	list_unlink(&h->catchup, &r->node);
	h->ncatchup--;
}

static void to_live(struct hub *h, struct reader *r)
{
	catchup_del(h, r);
	if (r->skip_through < r->cursor)
		r->skip_through = r->cursor;
	live_add(h, r);
}

static void catchup_retry(void *arg);

static void to_catchup(struct hub *h, struct reader *r)
{
	live_del(h, r);
	r->mode = READER_CATCHUP;
	r->cursor = r->ops->drop(r->sink);
	list_push(&h->catchup, &r->node);
	h->ncatchup++;
	h->m->readers_to_catchup++;
	if (r->ops->queued(r->sink) == 0)
		loop_timer_start(h->lp, &h->catchup_timer, 0, catchup_retry, h);
	log_debug("reader %s fell behind; catching up from id %lld", r->client, (long long)r->cursor);
}

struct fanout {
	struct hub *h;
	int64_t last;
	uint64_t until_ns; /* the pass's fan-out ends at this time */
	bool yielded;      /* it did, with rows left */
};

/* One event on its way through the index to the live readers. */
struct offer {
	struct hub *h;
	const struct store_event *ev;
	struct chunk *frames[FRAME_FORMATS]; /* each format encoded once, when a reader needs it */
};

/* The index found r by one of its patterns. r may be visited again through
 * another: skip_through, raised to the event's id on the first visit,
 * turns that one away. r may leave the index here (to catch-up) or be
 * freed (its sink closes as it is sent to), which the walk allows. */
static void offer_event(void *owner, void *arg)
{
	struct reader *r = owner;
	struct offer *o = arg;
	const struct store_event *ev = o->ev;
	if (ev->id <= r->skip_through)
		return;
	r->skip_through = ev->id;
	if (!reader_may_see(r, ev))
		return;
	struct chunk **ch = &o->frames[r->format];
	if (!*ch)
		*ch = frame_encode(r->format, ev);
	if (r->ops->queued(r->sink) + (*ch)->len > (size_t)o->h->cfg->queue_limit) {
		to_catchup(o->h, r);
		return;
	}
	r->ops->send(r->sink, *ch, ev->id, true);
	o->h->m->frames_queued++;
}

/* One of the event's keys (hub_rule_probe): the readers with their own
 * rule indexed under it. */
static void offer_by_key(void *arg, const char *key, size_t n)
{
	struct offer *o = arg;
	topic_index_each_keyed(o->h->rules, key, n, offer_event, o);
}

static int fanout_row(void *arg, const struct store_event *ev)
{
	struct fanout *f = arg;
	struct hub *h = f->h;
	struct offer o = { h, ev, { NULL, NULL, NULL } };
	topic_index_each(h->index, ev->topic, ev->topic_len, offer_event, &o);
	if (h->nrules) {
		/* Readers with their own rule: those of every event, then
		 * those the event's keys find (none looked for while no
		 * reader has keys). */
		topic_index_each_every(h->rules, offer_event, &o);
		if (topic_index_keys(h->rules))
			h->probe(h->probe_arg, ev, offer_by_key, &o);
	}
	for (size_t i = 0; i < FRAME_FORMATS; i++)
		chunk_unref(o.frames[i]);
	f->last = ev->id;
	h->high_water = ev->id;
	h->m->events_read++;
	if (clock_mono_ns() >= f->until_ns) {
		f->yielded = true;
		return 1;
	}
	return 0;
}

static void poll_pages(struct hub *h);
static void send_reset(struct hub *h, struct reader *r, const char *reason, int64_t resume);

static void retry_poll(void *arg)
{
	struct hub *h = arg;
	loop_label(h->lp, "reading new rows (fan-out)", NULL);
	hub_poll(h);
}

void hub_poll(struct hub *h)
{
	uint64_t t0 = clock_mono_ns();
	int64_t before = h->high_water;
	poll_pages(h);
	if (h->high_water != before) {
		metrics_observe(&h->m->fanout_seconds, clock_mono_ns() - t0);
		if (h->advanced)
			h->advanced(h->advanced_arg);
	}
}

/* The highest id retention removed among the rows r may read: with
 * namespaces, only theirs count (a quiet namespace's reader is not reset
 * for what a chatty one pruned). */
static int64_t pruned_for(struct hub *h, const struct reader *r)
{
	const struct namespaces *t = &h->cfg->namespaces;
	if (t->n == 0)
		return store_pruned_through(h->st);
	int64_t most = 0;
	for (int i = -1; i < (int)t->n; i++) {
		if (r->accepts || namespace_reached(t, i, r->topics, r->ntopics))
			most = MAX(most, store_pruned_namespace(h->st, i));
	}
	return most;
}

/* Retention removed rows this hub had not read yet (its fan-out was
 * behind, or another process pruned): every live reader might have wanted
 * one, so each gets a reset (never a silent gap) and goes on live. */
static void behind_retention(struct hub *h)
{
	int64_t pruned = store_pruned_through(h->st);
	if (h->high_water >= pruned)
		return;
	int64_t from = h->high_water;
	h->high_water = pruned; /* the reset's id: a client resumes past the gap */
	struct list_node *n, *next;
	list_each(&h->live, n, next) {
		send_reset(h, list_item(n, struct reader, node), "retention", from);
	}
	log_warn("retention removed events %lld to %lld before they were fanned out: live readers were sent a reset",
		 (long long)from + 1, (long long)pruned);
}

/* Fan out up to POLL_PAGES pages of new rows; continue from a timer. */
static void poll_pages(struct hub *h)
{
	behind_retention(h);
	/* A large batch from another writer is fanned out a few thousand rows
	 * or POLL_PASS_NS per pass, so sockets and timers keep being served
	 * meanwhile. */
	uint64_t until = clock_mono_ns() + POLL_PASS_NS;
	for (int page = 0;; page++) {
		if (page == POLL_PAGES) {
			loop_timer_start(h->lp, &h->retry_timer, 0, retry_poll, h);
			return;
		}
		struct fanout f = { h, h->high_water, until, false };
		int n = store_read_range(h->st, h->high_water, INT64_MAX, POLL_PAGE, fanout_row, &f);
		if (f.yielded) {
			loop_timer_start(h->lp, &h->retry_timer, 0, retry_poll, h);
			return;
		}
		if (n == -EAGAIN)
			return; /* the store fetches; its changed hook calls again */
		if (n == -EBUSY) {
			h->m->store_busy++;
			loop_timer_start(h->lp, &h->retry_timer, STORE_BUSY_RETRY_MS, retry_poll, h);
			return;
		}
		if (n < 0) {
			loop_timer_start(h->lp, &h->retry_timer, NO_INOTIFY_POLL_MS, retry_poll, h);
			return;
		}
		if (n < POLL_PAGE)
			return;
	}
}

/* The store says rows may have been added, or a fetch it started for a
 * read that returned -EAGAIN is in: fan out, and feed the catch-up readers
 * that were waiting for it. */
static void on_store_changed(void *arg)
{
	struct hub *h = arg;
	loop_label(h->lp, "reading new rows (fan-out)", NULL);
	if (h->catchup_waiting) {
		h->catchup_waiting = false;
		catchup_retry(h); /* polls first */
	} else {
		hub_poll(h);
	}
}

static void on_store_fatal(void *arg)
{
	struct hub *h = arg;
	h->on_fatal(h->fatal_arg);
}

/* Every reader is visited twice per heartbeat_interval, in one of
 * HEARTBEAT_SLOTS turns spread over each half (readers are dealt into
 * slots as they arrive), so 10,000 readers never get their heartbeats in
 * one burst. With no readers the timer stops (hub_open starts it again). A
 * visit sends a heartbeat to a reader whose queue is empty and that has
 * been sent nothing for (nearly) a whole interval, so a reader that events
 * reach at least once an interval gets none, an idle one gets one per
 * interval, and none is silent for more than 1.5 intervals. The sixteenth
 * of an interval spared is for the time between queuing a heartbeat and
 * its write (the stream round's gap, a late turn): without it the visit one
 * interval after a heartbeat could find it a few milliseconds short and
 * wait another half interval. The heartbeat goes out with the next stream
 * round, in its batch of sends. A visit also closes a reader that accepted
 * no bytes for stall_timeout and ends a stream due for rotation. */
static void sweep_list(struct hub *h, struct list *l, unsigned slot)
{
	uint64_t now = loop_now(h->lp);
	uint64_t interval = (uint64_t)h->cfg->heartbeat_interval_ms;
	uint64_t quiet = interval - interval / 16;
	uint64_t stall = (uint64_t)h->cfg->stall_timeout_ms;
	struct list_node *n, *next;
	list_each(l, n, next) {
		struct reader *r = list_item(n, struct reader, node);
		if (r->slot != slot)
			continue;
		if (r->rotate_at && now >= r->rotate_at) {
			h->m->readers_rotated++;
			hub_end(h, r);
			continue;
		}
		uint64_t idle = r->ops->idle_ms(r->sink);
		if (r->ops->queued(r->sink) == 0) {
			if (idle >= quiet) {
				h->m->heartbeats_sent++;
				r->ops->send(r->sink, h->heartbeat, 0, true);
			}
		} else if (idle >= stall) {
			h->m->readers_stalled_closed++;
			log_info("closing stream of %s: no bytes accepted for %llu ms", r->client,
				 (unsigned long long)stall);
			r->ops->close(r->sink); /* the sink reports the close: r is freed */
		}
	}
}

/* A turn: visit its slot's readers, then sleep until the next turn that
 * has readers (a few readers, or one, wake the process once per half
 * interval, not at every turn). */
static void heartbeat_tick(void *arg)
{
	struct hub *h = arg;
	unsigned slot = h->sweep_slot;
	sweep_list(h, &h->live, slot);
	sweep_list(h, &h->catchup, slot);
	if (!hub_readers(h))
		return;
	unsigned k = 1;
	while (k < HEARTBEAT_SLOTS && !h->slot_readers[(slot + k) % HEARTBEAT_SLOTS])
		k++;
	h->sweep_slot = (slot + k) % HEARTBEAT_SLOTS;
	loop_timer_start(h->lp, &h->heartbeat_timer, k * heartbeat_tick_ms(h), heartbeat_tick, h);
}

struct hub *hub_new(struct loop *lp, struct store *st, const struct config *cfg, struct metrics *m,
		    void (*on_fatal)(void *arg), void *fatal_arg)
{
	struct hub *h = xcalloc(1, sizeof(*h));
	h->lp = lp;
	h->st = st;
	h->cfg = cfg;
	h->m = m;
	h->on_fatal = on_fatal;
	h->fatal_arg = fatal_arg;
	int r = store_max_id(st, &h->high_water);
	if (r < 0) {
		log_err("reading the newest event id: %s", strerror(-r));
		free(h);
		return NULL;
	}
	store_watch(st, &(struct store_hooks){ on_store_changed, on_store_fatal, h });
	h->index = topic_index_new();
	h->rules = topic_index_new();
	h->heartbeat = frame_heartbeat();
	return h;
}

void hub_set_rule_probe(struct hub *h, hub_rule_probe probe, void *arg)
{
	h->probe = probe;
	h->probe_arg = arg;
}

void hub_on_advance(struct hub *h, void (*fn)(void *arg), void *arg)
{
	h->advanced = fn;
	h->advanced_arg = arg;
}

void hub_reconfigure(struct hub *h)
{
	if (hub_readers(h))
		loop_timer_start(h->lp, &h->heartbeat_timer, heartbeat_tick_ms(h), heartbeat_tick, h);
}

void hub_free(struct hub *h)
{
	if (!h)
		return;
	/* Each close comes back through hub_reader_closed. */
	struct reader *r;
	while ((r = reader_at(h->live.first)))
		r->ops->close(r->sink);
	while ((r = reader_at(h->catchup.first)))
		r->ops->close(r->sink);
	struct loop_timer *timers[] = { &h->heartbeat_timer, &h->retry_timer, &h->catchup_timer };
	for (size_t i = 0; i < ARRAY_LEN(timers); i++)
		loop_timer_stop(h->lp, timers[i]);
	topic_index_free(h->index); /* empty: every reader has closed */
	topic_index_free(h->rules);
	chunk_unref(h->heartbeat);
	free(h);
}

/* The newest id there is, as far as this node knows: what the hub has read,
 * or more when the store knows of rows not yet read (a busy store). */
static int64_t newest_id(struct hub *h)
{
	int64_t newest = h->high_water;
	if (store_max_id(h->st, &newest) < 0 || newest < h->high_water)
		newest = h->high_water;
	return newest;
}

static void send_reset(struct hub *h, struct reader *r, const char *reason, int64_t resume)
{
	struct chunk *ch = frame_reset(h->high_water, reason, resume);
	r->ops->send(r->sink, ch, h->high_water, false);
	chunk_unref(ch);
	h->m->resets_sent++;
}

/* The reader's token has expired: end the stream after what is queued (so
 * at an event boundary), saying why and when to come back; the client
 * reconnects with a fresh token and its Last-Event-ID, and misses nothing. */
static void token_expired(void *arg)
{
	struct reader *r = arg;
	struct hub *h = r->hub;
	if (r->mode == READER_ENDED)
		return;
	char text[64];
	int n = snprintf(text, sizeof(text), ": token expired\nretry: %lld\n\n", (long long)h->cfg->retry_ms);
	struct chunk *ch = chunk_from(text, (size_t)n);
	r->ops->send(r->sink, ch, 0, false);
	chunk_unref(ch);
	h->m->readers_expired++;
	hub_end(h, r);
}

/* A uniformly drawn rotation time: rotate_after with up to 10% jitter
 * either way, so streams opened together do not all reconnect together. */
static uint64_t rotation_due(uint64_t opened_ms, int64_t rotate_after_ms)
{
	uint64_t jitter = (uint64_t)rotate_after_ms / 10;
	return opened_ms + (uint64_t)rotate_after_ms - jitter + random_below(jitter * 2 + 1);
}

struct reader *hub_open(struct hub *h, struct reader_spec *spec, const struct hub_sink_ops *ops, void *sink)
{
	/* Repeated and covered patterns go once, here, for every path that
	 * reads by them: the topic index, the store's filtered reads. */
	spec->ntopics = topic_patterns_reduce(spec->topics, spec->ntopics);
	spec->ngrants = topic_patterns_reduce(spec->grants, spec->ngrants);
	size_t nsubs = spec->ntopics > spec->nkeys ? spec->ntopics : spec->nkeys;
	nsubs = nsubs ? nsubs : 1;
	/* One block: the reader, its index nodes and its topics' pointers
	 * (an idle stream is mostly this block and its connection). */
	struct reader *r = xcalloc(1, sizeof(*r) + nsubs * sizeof(r->subs[0]) + spec->ntopics * sizeof(char *));
	r->topics = (char **)(r->subs + nsubs);
	r->hub = h;
	r->ops = ops;
	r->sink = sink;
	r->see_private = spec->see_private;
	r->format = spec->format;
	r->accepts = spec->accepts;
	r->accepts_arg = spec->accepts_arg;
	r->accepts_free = spec->accepts_free;
	spec->accepts_arg = NULL;
	r->nkeys = spec->nkeys;
	r->keys = spec->keys;
	spec->nkeys = 0;
	spec->keys = NULL;
	if (r->accepts) {
		/* Every row, decided by its own rule: indexed under "*", read
		 * from the store unfiltered. */
		r->see_private = true;
		for (size_t i = 0; i < spec->ntopics; i++)
			free(spec->topics[i]);
		spec->ntopics = 0;
		for (size_t i = 0; i < spec->ngrants; i++)
			free(spec->grants[i]);
		free(spec->grants);
		spec->ngrants = 0;
		spec->grants = NULL;
	}
	r->ntopics = spec->ntopics;
	memcpy(r->topics, spec->topics, spec->ntopics * sizeof(char *));
	spec->ntopics = 0; /* the topics are the reader's now */
	r->ngrants = spec->ngrants;
	r->grants = spec->grants;
	spec->ngrants = 0;
	spec->grants = NULL;
	if (spec->expires_at > 0) {
		int64_t left = spec->expires_at - clock_wall_s();
		loop_timer_start(h->lp, &r->expiry_timer, left > 0 ? (uint64_t)left * 1000 : 0, token_expired, r);
	}
	r->client = spec->client;
	if (spec->rotate_after_ms > 0)
		r->rotate_at = rotation_due(loop_now(h->lp), spec->rotate_after_ms);
	r->slot = h->next_slot;
	h->slot_readers[r->slot]++;
	h->next_slot = (h->next_slot + 1) % HEARTBEAT_SLOTS;
	if (!loop_timer_active(&h->heartbeat_timer))
		loop_timer_start(h->lp, &h->heartbeat_timer, heartbeat_tick_ms(h), heartbeat_tick, h);

	int64_t resume_id = spec->resume;
	if (resume_id >= 0) {
		/* Learn of rows other writers committed, so the id checks below
		 * compare against the real newest id. If the store was busy the
		 * hub may still lag it; the store's own newest id decides then. */
		hub_poll(h);
		if (resume_id > newest_id(h)) {
			uint64_t ticket = store_sync_begin(h->st);
			if (store_sync_done(h->st, ticket)) {
				send_reset(h, r, "unknown_id", resume_id);
				resume_id = -1;
			} else {
				/* Another node may have assigned it a moment ago:
				 * decided once this node has read everything
				 * committed before now (hub_reader_drained). */
				r->sync_pending = true;
				r->sync_ticket = ticket;
				r->opened_at_id = h->high_water;
			}
		} else if (resume_id < pruned_for(h, r)) {
			send_reset(h, r, "retention", resume_id);
			resume_id = -1;
		}
	}
	if (!r->sync_pending && (resume_id < 0 || resume_id >= h->high_water)) {
		/* Live from here; a resume point past what the hub has read yet
		 * (the store was busy) means those ids were already seen. */
		int64_t from = resume_id > h->high_water ? resume_id : h->high_water;
		r->skip_through = from;
		ops->set_resume_point(sink, from);
		live_add(h, r);
		return r;
	}
	r->mode = READER_CATCHUP;
	r->cursor = resume_id;
	ops->set_resume_point(sink, resume_id);
	list_push(&h->catchup, &r->node);
	h->ncatchup++;
	/* Fed once the head is written (hub_reader_drained). */
	return r;
}

/* Take r off the list of its mode. */
static void unlist(struct hub *h, struct reader *r)
{
	if (r->mode != READER_ENDED)
		h->slot_readers[r->slot]--;
	if (r->mode == READER_LIVE) {
		live_del(h, r);
	} else if (r->mode == READER_CATCHUP) {
		catchup_del(h, r);
	}
	r->mode = READER_ENDED;
}

void hub_reader_closed(struct reader *r)
{
	struct hub *h = r->hub;
	unlist(h, r);
	loop_timer_stop(h->lp, &r->expiry_timer);
	for (size_t i = 0; i < r->ntopics; i++)
		free(r->topics[i]);
	for (size_t i = 0; i < r->ngrants; i++)
		free(r->grants[i]);
	free(r->grants);
	for (size_t i = 0; i < r->nkeys; i++)
		free(r->keys[i]);
	free(r->keys);
	if (r->accepts_free)
		r->accepts_free(r->accepts_arg);
	free(r);
}

void hub_end(struct hub *h, struct reader *r)
{
	unlist(h, r);
	loop_timer_stop(h->lp, &r->expiry_timer);
	r->ops->end(r->sink);
}

void hub_end_all(struct hub *h)
{
	struct reader *r;
	while ((r = reader_at(h->live.first)))
		hub_end(h, r);
	while ((r = reader_at(h->catchup.first)))
		hub_end(h, r);
}

void hub_end_private(struct hub *h)
{
	struct list *lists[] = { &h->live, &h->catchup };
	size_t ended = 0;
	for (size_t i = 0; i < ARRAY_LEN(lists); i++) {
		struct list_node *n, *next;
		list_each(lists[i], n, next) {
			struct reader *r = list_item(n, struct reader, node);
			if (r->see_private && !r->accepts) {
				hub_end(h, r);
				ended++;
			}
		}
	}
	if (ended)
		log_info("read_token changed: ended %zu streams opened with the old one", ended);
}

/* Whether catch-up reads may still run in this loop pass. */
static bool pass_budget_left(struct hub *h)
{
	uint64_t pass = loop_iterations(h->lp);
	if (pass != h->pass) {
		h->pass = pass;
		h->pass_spent_ns = 0;
	}
	return h->pass_spent_ns < CATCHUP_PASS_NS;
}

/* One catch-up read: its start, and the part of its time spent queuing
 * the rows it sent (the delivery, which the pass's budget does not count;
 * the rest, the store's search and the rule judging rows, it does). */
struct feed {
	struct hub *h;
	struct reader *r;
	uint64_t t0;
	uint64_t sent_ns;
};

/* The time a read started at f->t0 has cost the pass by now. */
static uint64_t feed_cost(const struct feed *f, uint64_t now)
{
	return now - f->t0 - f->sent_ns;
}

/* A row of a catch-up read: sent if the reader wants it. The read stops
 * after this row when the reader's queue is half full, or when the pass's
 * time is spent: a reader with its own rule (a Mercure subscriber's URL
 * patterns) judges every row, and judging is work the store's own budget
 * does not see. The cursor is this row either way, so the next read goes
 * on right after it. */
static int feed_row(void *arg, const struct store_event *ev)
{
	struct feed *f = arg;
	struct reader *r = f->r;
	struct hub *h = f->h;
	r->cursor = ev->id;
	bool wanted = reader_wants(r, ev);
	uint64_t now = clock_mono_ns();
	if (wanted) {
		uint64_t t = now;
		struct chunk *ch = frame_encode(r->format, ev);
		r->ops->send(r->sink, ch, ev->id, true);
		chunk_unref(ch);
		h->m->frames_queued++;
		now = clock_mono_ns();
		f->sent_ns += now - t;
		if (r->ops->queued(r->sink) >= (size_t)h->cfg->queue_limit / 2)
			return 1;
	}
	return h->pass_spent_ns + feed_cost(f, now) >= CATCHUP_PASS_NS;
}

/* A resume point beyond the newest id: once the store has caught up with
 * everything committed before the reader came, either the id has turned up
 * (go on as usual) or it is unknown: a reset, then every event after the
 * newest id of the moment the reader came. Returns false while waiting. */
static bool resume_checked(struct hub *h, struct reader *r)
{
	if (!r->sync_pending)
		return true;
	if (!store_sync_done(h->st, r->sync_ticket)) {
		h->catchup_waiting = true;
		return false;
	}
	r->sync_pending = false;
	hub_poll(h);
	if (r->cursor > newest_id(h)) {
		send_reset(h, r, "unknown_id", r->cursor);
		r->cursor = r->opened_at_id;
	}
	return true;
}

void hub_reader_drained(struct reader *r)
{
	struct hub *h = r->hub;
	if (r->mode != READER_CATCHUP || !resume_checked(h, r))
		return;
	if (r->cursor < pruned_for(h, r)) {
		/* Retention removed events this reader had not yet been sent. */
		send_reset(h, r, "retention", r->cursor);
		r->cursor = h->high_water;
		to_live(h, r);
		return;
	}
	struct store_filter filter = { r->see_private, r->ntopics, r->topics, r->ngrants, r->grants };
	for (int page = 0; page < CATCHUP_PAGES; page++) {
		if (r->cursor >= h->high_water) {
			to_live(h, r);
			return;
		}
		if (!pass_budget_left(h)) {
			/* Fed in a later pass (catchup_retry), from this reader on. */
			if (!h->catchup_resume)
				h->catchup_resume = r;
			if (!loop_timer_active(&h->catchup_timer))
				loop_timer_start(h->lp, &h->catchup_timer, 0, catchup_retry, h);
			return;
		}
		struct feed f = { h, r, clock_mono_ns(), 0 };
		int64_t through = r->cursor;
		int n = store_read_matching(h->st, r->cursor, h->high_water, CATCHUP_PAGE, &filter, feed_row, &f,
					    &through);
		uint64_t now = clock_mono_ns();
		h->pass_spent_ns += feed_cost(&f, now);
		metrics_observe(&h->m->catchup_seconds, now - f.t0);
		if (n == -EAGAIN) {
			h->catchup_waiting = true; /* the store fetches; its changed hook feeds us */
			return;
		}
		if (n < 0) {
			if (n == -EBUSY)
				h->m->store_busy++;
			loop_timer_start(h->lp, &h->catchup_timer, STORE_BUSY_RETRY_MS, catchup_retry, h);
			return;
		}
		if (through > r->cursor)
			r->cursor = through;
		if (r->cursor < pruned_for(h, r)) {
			/* The fetch found the rows after the cursor pruned. */
			hub_reader_drained(r);
			return;
		}
		if (r->cursor >= h->high_water) {
			to_live(h, r);
			return;
		}
		if (r->ops->queued(r->sink))
			return; /* fed again when this drains */
	}
	/* A long run of rows it does not want: continue on the next pass. */
	loop_timer_start(h->lp, &h->catchup_timer, 0, catchup_retry, h);
}

/* Feed every catch-up reader whose queue is empty (after a busy store, a
 * long run of rows it does not want, or a drop that emptied its queue),
 * each at most once, starting where the last pass ran out of time: every
 * reader gets its turn, and a pass spends at most its budget. */
static void catchup_retry(void *arg)
{
	struct hub *h = arg;
	loop_label(h->lp, "catch-up reads", NULL);
	hub_poll(h);
	size_t left = h->ncatchup;
	if (!h->catchup_resume)
		h->catchup_resume = reader_at(h->catchup.first);
	while (left-- > 0 && h->catchup_resume) {
		if (!pass_budget_left(h)) {
			loop_timer_start(h->lp, &h->catchup_timer, 0, catchup_retry, h);
			return;
		}
		struct reader *r = h->catchup_resume;
		h->catchup_resume =
			reader_at(r->node.next ? r->node.next : h->catchup.first); /* catchup_del keeps it valid */
		if (r->ops->queued(r->sink) == 0)
			hub_reader_drained(r);
	}
}

size_t hub_readers(const struct hub *h)
{
	return h->nlive + h->ncatchup;
}

size_t hub_catching_up(const struct hub *h)
{
	return h->ncatchup;
}

int64_t hub_high_water(const struct hub *h)
{
	return h->high_water;
}
