/* hub.c: live readers, fan-out of each new event (encoded once, shared by
 * every matching reader), heartbeats and stall checks, and catch-up from
 * the store for readers that resume or fall behind. See hub.h for the
 * invariant that keeps every reader's ids gap-free and duplicate-free. */
#include "hub.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "frame.h"
#include "log.h"
#include "server.h"
#include "store.h"
#include "util.h"

#define POLL_PAGE 256    /* rows read per store call by the live path */
#define POLL_PAGES 16    /* store calls per hub_poll before yielding to the loop */
#define CATCHUP_PAGE 128 /* rows read per store call for one catch-up reader */
#define CATCHUP_PAGES 8  /* store calls per drain before yielding to the loop */
#define BUSY_RETRY_MS 5
#define NO_INOTIFY_POLL_MS 1000
#define HEARTBEAT_SLOTS 4 /* turns per heartbeat_interval in which readers are visited */

/* The head every stream shares; with allow_origin = * it carries the CORS
 * header too (a list of origins needs a head per request: stream.c). */
static struct chunk *stream_head_for_all(const struct server *srv)
{
	bool any = strcmp(srv->cfg.allow_origin, "*") == 0;
	return frame_stream_head(srv->cfg.retry_ms, any ? "Access-Control-Allow-Origin: *\r\n" : NULL);
}

static uint64_t heartbeat_tick_ms(const struct hub *h)
{
	uint64_t t = (uint64_t)h->srv->cfg.heartbeat_interval_ms / HEARTBEAT_SLOTS;
	return t ? t : 1;
}

static void list_push(struct reader **head, struct reader *r)
{
	r->prev = NULL;
	r->next = *head;
	if (*head)
		(*head)->prev = r;
	*head = r;
}

static void list_del(struct reader **head, struct reader *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else
		*head = r->next;
	if (r->next)
		r->next->prev = r->prev;
	r->next = r->prev = NULL;
}

static bool reader_wants(const struct reader *r, const struct store_event *ev)
{
	if (!ev->public && !r->see_private)
		return false;
	if (r->ntopics == 0)
		return true;
	for (size_t i = 0; i < r->ntopics; i++)
		if (strcmp(r->topics[i], ev->topic) == 0)
			return true;
	return false;
}

static void to_live(struct hub *h, struct reader *r)
{
	list_del(&h->catchup, r);
	h->ncatchup--;
	r->mode = READER_LIVE;
	list_push(&h->live, r);
	h->nlive++;
}

static void catchup_retry(void *arg);

static void to_catchup(struct hub *h, struct reader *r)
{
	list_del(&h->live, r);
	h->nlive--;
	r->mode = READER_CATCHUP;
	r->cursor = conn_drop_queue(r->c);
	list_push(&h->catchup, r);
	h->ncatchup++;
	h->srv->m.readers_to_catchup++;
	if (r->c->qlen == 0)
		loop_timer_start(h->srv->lp, &h->catchup_timer, 0, catchup_retry, h);
	log_debug("reader %s fell behind; catching up from id %lld", r->client, (long long)r->cursor);
}

struct fanout {
	struct hub *h;
	int64_t last;
};

static int fanout_row(void *arg, const struct store_event *ev)
{
	struct fanout *f = arg;
	struct hub *h = f->h;
	size_t limit = (size_t)h->srv->cfg.queue_limit;
	struct chunk *ch = NULL;
	struct reader *r = h->live, *next;
	for (; r; r = next) {
		next = r->next;
		if (ev->id <= r->skip_through || !reader_wants(r, ev))
			continue;
		if (!ch)
			ch = frame_event(ev);
		if (r->c->qbytes + ch->len > limit) {
			to_catchup(h, r);
			continue;
		}
		conn_enqueue_frame(r->c, ch, ev->id);
		h->srv->m.frames_queued++;
	}
	chunk_unref(ch);
	f->last = ev->id;
	h->high_water = ev->id;
	h->srv->m.events_read++;
	return 0;
}

static void poll_pages(struct hub *h);

static void retry_poll(void *arg)
{
	hub_poll(arg);
}

void hub_poll(struct hub *h)
{
	struct server *srv = h->srv;
	uint64_t t0 = clock_mono_ns();
	int64_t before = h->high_water;
	poll_pages(h);
	if (h->high_water != before)
		metrics_observe(&srv->m.fanout_seconds, clock_mono_ns() - t0);
}

/* Fan out up to POLL_PAGES pages of new rows; continue from a timer. */
static void poll_pages(struct hub *h)
{
	struct server *srv = h->srv;
	/* A large batch from another writer is fanned out a few thousand rows
	 * per pass, so sockets and timers keep being served meanwhile. */
	for (int page = 0;; page++) {
		if (page == POLL_PAGES) {
			loop_timer_start(srv->lp, &h->retry_timer, 0, retry_poll, h);
			return;
		}
		struct fanout f = { h, h->high_water };
		int n = store_read_range(srv->st, h->high_water, INT64_MAX, POLL_PAGE, fanout_row, &f);
		if (n == -EBUSY) {
			srv->m.store_busy++;
			loop_timer_start(srv->lp, &h->retry_timer, BUSY_RETRY_MS, retry_poll, h);
			return;
		}
		if (n < 0) {
			loop_timer_start(srv->lp, &h->retry_timer, NO_INOTIFY_POLL_MS, retry_poll, h);
			return;
		}
		if (n < POLL_PAGE)
			return;
	}
}

/* A writer's commit shows in the -wal file (inotify) a moment before it
 * becomes visible: the wal-index in the -shm file is updated through mmap,
 * which inotify does not see. So a wake-up without a data_version change is
 * checked again a few times: on the next pass, then from 1 ms to a quarter
 * second later (the writer may still be syncing the -wal file in between). */
static const unsigned confirm_delays_ms[] = { 0, 1, 1, 2, 4, 8, 16, 64, 250 };

/* The database file was deleted or replaced under us: what we write would go
 * to an unlinked file. Stop with an error, so systemd starts herald again on
 * the file that is there now. Returns true when stopping. */
static bool store_file_gone(struct hub *h)
{
	int r = store_check_file(h->srv->st);
	if (r == 0)
		return false;
	log_err("the database file %s was %s while herald had it open; stopping so that a restart opens the "
		"file that is there now",
		h->srv->cfg.db, r == -ENOENT ? "deleted" : "replaced by another file");
	server_fail(h->srv);
	return true;
}

static void confirm_change(void *arg)
{
	struct hub *h = arg;
	bool changed = store_changed(h->srv->st);
	if (store_file_gone(h))
		return;
	if (changed) {
		h->confirm_step = 0;
		hub_poll(h);
		return;
	}
	if (h->confirm_step < ARRAY_LEN(confirm_delays_ms))
		loop_timer_start(h->srv->lp, &h->confirm_timer, confirm_delays_ms[h->confirm_step++], confirm_change,
				 h);
	else
		h->confirm_step = 0;
}

static void on_store_change(void *arg, uint32_t events)
{
	struct hub *h = arg;
	(void)events;
	h->confirm_step = 0;
	loop_timer_stop(h->srv->lp, &h->confirm_timer);
	confirm_change(h);
}

static void slow_poll(void *arg)
{
	struct hub *h = arg;
	bool changed = store_changed(h->srv->st);
	if (store_file_gone(h))
		return;
	if (changed)
		hub_poll(h);
	loop_timer_start(h->srv->lp, &h->watch_timer, NO_INOTIFY_POLL_MS, slow_poll, h);
}

int hub_watch_store(struct hub *h)
{
	int fd = store_watch_fd(h->srv->st);
	if (fd < 0) {
		log_warn("inotify is not available; checking the database for other writers every %d ms",
			 NO_INOTIFY_POLL_MS);
		loop_timer_start(h->srv->lp, &h->watch_timer, NO_INOTIFY_POLL_MS, slow_poll, h);
		return 0;
	}
	return loop_watch(h->srv->lp, fd, EPOLLIN, on_store_change, h);
}

/* Every reader is visited once per heartbeat_interval, in one of
 * HEARTBEAT_SLOTS turns spread over the interval (readers are dealt into
 * slots as they arrive), so 10,000 readers never get their heartbeats in
 * one burst. With no readers the timer stops (hub_add starts it again). A visit sends a heartbeat to a reader whose queue is empty and
 * that has had nothing for half an interval (so at most 1.5 intervals of
 * silence), closes one that accepted no bytes for stall_timeout, and ends a
 * stream due for rotation. */
static void sweep_list(struct hub *h, struct reader *r, unsigned slot)
{
	struct server *srv = h->srv;
	uint64_t now = loop_now(srv->lp);
	uint64_t quiet = (uint64_t)srv->cfg.heartbeat_interval_ms / 2;
	struct reader *next;
	for (; r; r = next) {
		next = r->next;
		if (r->slot != slot)
			continue;
		struct conn *c = r->c;
		if (r->rotate_at && now >= r->rotate_at) {
			srv->m.readers_rotated++;
			hub_end(h, r);
			continue;
		}
		if (c->qlen == 0) {
			if (now - c->last_progress >= quiet)
				conn_enqueue_frame(c, h->heartbeat, 0);
		} else if (now - c->last_progress >= (uint64_t)srv->cfg.stall_timeout_ms) {
			srv->m.readers_stalled_closed++;
			log_info("closing stream of %s: no bytes accepted for %lld ms", r->client,
				 (long long)srv->cfg.stall_timeout_ms);
			conn_close(c, NULL);
		}
	}
}

static void heartbeat_tick(void *arg)
{
	struct hub *h = arg;
	unsigned slot = h->sweep_slot;
	h->sweep_slot = (h->sweep_slot + 1) % HEARTBEAT_SLOTS;
	sweep_list(h, h->live, slot);
	sweep_list(h, h->catchup, slot);
	if (hub_readers(h))
		loop_timer_start(h->srv->lp, &h->heartbeat_timer, heartbeat_tick_ms(h), heartbeat_tick, h);
}

int hub_init(struct hub *h, struct server *srv)
{
	memset(h, 0, sizeof(*h));
	h->srv = srv;
	int r = store_max_id(srv->st, &h->high_water);
	if (r < 0) {
		log_err("reading the newest event id: %s", strerror(-r));
		return -1;
	}
	h->heartbeat = frame_heartbeat();
	h->stream_head = stream_head_for_all(srv);
	return 0;
}

void hub_reconfigure(struct hub *h)
{
	struct server *srv = h->srv;
	chunk_unref(h->stream_head);
	h->stream_head = stream_head_for_all(srv);
	loop_timer_start(srv->lp, &h->heartbeat_timer, heartbeat_tick_ms(h), heartbeat_tick, h);
}

void hub_shutdown(struct hub *h)
{
	struct server *srv = h->srv;
	while (h->live)
		conn_close(h->live->c, NULL);
	while (h->catchup)
		conn_close(h->catchup->c, NULL);
	loop_timer_stop(srv->lp, &h->heartbeat_timer);
	loop_timer_stop(srv->lp, &h->retry_timer);
	loop_timer_stop(srv->lp, &h->watch_timer);
	loop_timer_stop(srv->lp, &h->catchup_timer);
	loop_timer_stop(srv->lp, &h->confirm_timer);
	chunk_unref(h->heartbeat);
	chunk_unref(h->stream_head);
	h->heartbeat = h->stream_head = NULL;
}

static void send_reset(struct hub *h, struct reader *r, const char *reason, int64_t resume)
{
	struct chunk *ch = frame_reset(h->high_water, reason, resume);
	conn_enqueue(r->c, ch, h->high_water);
	chunk_unref(ch);
	h->srv->m.resets_sent++;
}

void hub_add(struct hub *h, struct reader *r, int64_t resume_id)
{
	struct server *srv = h->srv;
	r->slot = h->next_slot;
	h->next_slot = (h->next_slot + 1) % HEARTBEAT_SLOTS;
	if (!loop_timer_active(&h->heartbeat_timer))
		loop_timer_start(srv->lp, &h->heartbeat_timer, heartbeat_tick_ms(h), heartbeat_tick, h);
	if (resume_id >= 0) {
		/* Learn of rows other writers committed, so the id checks below
		 * compare against the real newest id. If the store was busy the
		 * hub may still lag it; the store's own newest id decides then. */
		hub_poll(h);
		int64_t newest = h->high_water;
		if (store_max_id(srv->st, &newest) < 0 || newest < h->high_water)
			newest = h->high_water;
		if (resume_id > newest) {
			send_reset(h, r, "unknown_id", resume_id);
			resume_id = -1;
		} else if (resume_id < store_pruned_through(srv->st)) {
			send_reset(h, r, "retention", resume_id);
			resume_id = -1;
		}
	}
	if (resume_id < 0 || resume_id >= h->high_water) {
		/* Live from here; a resume point past what the hub has read yet
		 * (the store was busy) means those ids were already seen. */
		int64_t from = resume_id > h->high_water ? resume_id : h->high_water;
		r->mode = READER_LIVE;
		r->skip_through = from;
		r->c->written_id = from;
		list_push(&h->live, r);
		h->nlive++;
		return;
	}
	r->mode = READER_CATCHUP;
	r->cursor = resume_id;
	r->c->written_id = resume_id;
	list_push(&h->catchup, r);
	h->ncatchup++;
	/* Fed once the head is written (hub_on_drained). */
}

void hub_remove(struct hub *h, struct reader *r)
{
	if (r->mode == READER_LIVE) {
		list_del(&h->live, r);
		h->nlive--;
	} else if (r->mode == READER_CATCHUP) {
		list_del(&h->catchup, r);
		h->ncatchup--;
	}
	r->mode = READER_ENDED;
}

void hub_end(struct hub *h, struct reader *r)
{
	hub_remove(h, r);
	conn_end_after_flush(r->c);
}

void hub_end_private(struct hub *h)
{
	struct reader *lists[] = { h->live, h->catchup };
	size_t ended = 0;
	for (size_t i = 0; i < ARRAY_LEN(lists); i++)
		for (struct reader *r = lists[i], *next; r; r = next) {
			next = r->next;
			if (r->see_private) {
				hub_end(h, r);
				ended++;
			}
		}
	if (ended)
		log_info("read_token changed: ended %zu streams opened with the old one", ended);
}

struct feed {
	struct hub *h;
	struct reader *r;
	bool full;
};

static int feed_row(void *arg, const struct store_event *ev)
{
	struct feed *f = arg;
	struct reader *r = f->r;
	r->cursor = ev->id;
	if (!reader_wants(r, ev))
		return 0;
	struct chunk *ch = frame_event(ev);
	conn_enqueue_frame(r->c, ch, ev->id);
	chunk_unref(ch);
	f->h->srv->m.frames_queued++;
	if (r->c->qbytes >= (size_t)f->h->srv->cfg.queue_limit / 2) {
		f->full = true;
		return 1;
	}
	return 0;
}

void hub_on_drained(struct hub *h, struct reader *r)
{
	struct server *srv = h->srv;
	if (r->mode != READER_CATCHUP || r->c->close_after_flush)
		return;
	if (r->cursor < store_pruned_through(srv->st)) {
		/* Retention removed events this reader had not yet been sent. */
		send_reset(h, r, "retention", r->cursor);
		r->cursor = h->high_water;
		to_live(h, r);
		return;
	}
	struct store_filter filter = { r->see_private, r->ntopics, r->topics };
	for (int page = 0; page < CATCHUP_PAGES; page++) {
		struct feed f = { h, r, false };
		int n = store_read_matching(srv->st, r->cursor, h->high_water, CATCHUP_PAGE, &filter, feed_row, &f);
		if (n < 0) {
			if (n == -EBUSY)
				srv->m.store_busy++;
			loop_timer_start(srv->lp, &h->catchup_timer, BUSY_RETRY_MS, catchup_retry, h);
			return;
		}
		if (!f.full && n < CATCHUP_PAGE)
			r->cursor = h->high_water;
		if (r->cursor >= h->high_water) {
			to_live(h, r);
			return;
		}
		if (r->c->qlen)
			return; /* fed again when this drains */
	}
	/* Only filtered-out rows so far: continue on the next pass. */
	loop_timer_start(srv->lp, &h->catchup_timer, 0, catchup_retry, h);
}

/* Feed every catch-up reader whose queue is empty (after a busy store, a
 * long run of rows it does not want, or a drop that emptied its queue). */
static void catchup_retry(void *arg)
{
	struct hub *h = arg;
	struct reader *r = h->catchup, *next;
	hub_poll(h);
	for (; r; r = next) {
		next = r->next;
		if (r->c->qlen == 0)
			hub_on_drained(h, r);
	}
}

size_t hub_readers(const struct hub *h)
{
	return h->nlive + h->ncatchup;
}
