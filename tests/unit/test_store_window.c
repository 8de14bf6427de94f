/* SPDX-License-Identifier: BSD-2-Clause */
/* test_store_window.c: the in-memory rows of a network backend
 * (src/store/store_window.c): the window's bounds in rows and bytes and the offer
 * before unread rows go, the page cache's bounds and its least recently
 * read eviction, reads by range and by filter (held to visibility.h's
 * rule), the gaps a read reports, and how far a read says it looked. */
#include "check.h"
#include "store/store_window.h"
#include "core/topic.h"
#include "common/util.h"
#include "store/visibility.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static char big[64 << 10];

static struct store_event event(int64_t id, const char *topic, bool public, size_t data_len)
{
	return (struct store_event){ .id = id,
				     .type = "t",
				     .type_len = 1,
				     .topic = topic,
				     .topic_len = strlen(topic),
				     .data = big,
				     .data_len = data_len,
				     .public = public,
				     .created_at = 1 };
}

static bool add(struct store_window *w, int64_t id, const char *topic, bool public)
{
	struct store_event ev = event(id, topic, public, 1);
	return store_window_add(w, &ev);
}

struct ids {
	int64_t id[20000];
	size_t n;
	size_t stop_at; /* stop after this many rows (0: never) */
	bool strings_ok;
};

static int collect(void *arg, const struct store_event *ev)
{
	struct ids *r = arg;
	if (r->n < 20000)
		r->id[r->n++] = ev->id;
	if (ev->topic[ev->topic_len] != '\0' || ev->type_len != 1 || strcmp(ev->type, "t") != 0)
		r->strings_ok = false;
	return r->stop_at && r->n == r->stop_at;
}

static int read_all(struct store_window *w, int64_t after, int64_t upto, size_t limit, const struct store_filter *f,
		    struct ids *r, int64_t *through, int64_t *gap)
{
	r->n = 0;
	r->strings_ok = true;
	return store_window_read(w, after, upto, limit, f, collect, r, through, gap);
}

/* The fan-out's read, as the hub makes it when offered rows. */
struct fanout {
	struct store_window *w;
	int offers;
	int64_t read_to;
	bool lazy; /* counts the offers, reads nothing */
};

static void offered(void *arg)
{
	struct fanout *fo = arg;
	static struct ids r;
	int64_t through = 0, gap;
	fo->offers++;
	if (fo->lazy)
		return;
	if (read_all(fo->w, fo->read_to, INT64_MAX, SIZE_MAX, NULL, &r, &through, &gap) > 0)
		fo->read_to = through;
}

static void test_rows_limit_and_offer(void)
{
	struct store_window w;
	struct fanout fo = { &w, 0, 10, false };
	store_window_init(&w, 10, offered, &fo);
	CHECK_EQ_INT(store_window_newest(&w), 10);
	CHECK(!add(&w, 10, "a", true)); /* not above the newest id */
	for (int64_t id = 11; id < 11 + STORE_WINDOW_ROWS; id++)
		CHECK(add(&w, id, "a", true) || !"added");
	CHECK_EQ_INT(w.newest.n, STORE_WINDOW_ROWS);
	CHECK_EQ_INT(fo.offers, 0);
	static struct ids r;
	int64_t through = 0, gap = 0;
	/* Every row is held; nothing unread has been dropped yet. */
	CHECK_EQ_INT(read_all(&w, 10, INT64_MAX, SIZE_MAX, NULL, &r, &through, &gap), STORE_WINDOW_ROWS);
	CHECK_EQ_INT(through, 10 + STORE_WINDOW_ROWS);
	CHECK_EQ_INT(gap, -1);
	CHECK(r.strings_ok);
	/* That read was the fan-out's: one more row drops the oldest without
	 * an offer. */
	fo.read_to = 10 + STORE_WINDOW_ROWS;
	CHECK(add(&w, 11 + STORE_WINDOW_ROWS, "a", true));
	CHECK_EQ_INT(fo.offers, 0);
	CHECK_EQ_INT(w.newest.n, STORE_WINDOW_ROWS);
	CHECK_EQ_INT(w.newest.lo, 11);
	/* The dropped row is a gap now: the read gets nowhere and says where
	 * to fetch from. */
	CHECK_EQ_INT(read_all(&w, 10, 20, 100, NULL, &r, &through, &gap), -EAGAIN);
	CHECK_EQ_INT(gap, 10);
	CHECK_EQ_INT(read_all(&w, 11, 20, 100, NULL, &r, &through, &gap), 9);
	CHECK_EQ_INT(gap, -1);
	store_window_free(&w);

	/* Rows no unfiltered read has reached are offered before the first
	 * of them goes, once per add; a filtered read does not count. */
	fo = (struct fanout){ &w, 0, 0, false };
	store_window_init(&w, 0, offered, &fo);
	for (int64_t id = 1; id <= STORE_WINDOW_ROWS; id++)
		add(&w, id, "a", true);
	struct store_filter all = { 0 };
	CHECK_EQ_INT(read_all(&w, 0, INT64_MAX, SIZE_MAX, &all, &r, &through, &gap), STORE_WINDOW_READ_BUDGET);
	CHECK(add(&w, STORE_WINDOW_ROWS + 1, "a", true));
	CHECK_EQ_INT(fo.offers, 1);
	CHECK_EQ_INT(fo.read_to, STORE_WINDOW_ROWS); /* offered before the new row came in */
	CHECK_EQ_INT(w.newest.n, STORE_WINDOW_ROWS);
	CHECK_EQ_INT(w.newest.lo, 1);
	for (int64_t id = STORE_WINDOW_ROWS + 2; id < STORE_WINDOW_ROWS + 10; id++)
		add(&w, id, "a", true);
	CHECK_EQ_INT(fo.offers, 1); /* the rows dropped had been read */
	/* A fan-out that does not read when offered: the rows go anyway,
	 * after one offer per add that drops unread rows (ROWS + 1 to
	 * ROWS + 14 here, the others had been read). */
	fo.lazy = true;
	int64_t next = STORE_WINDOW_ROWS + 10;
	for (int64_t id = next; id < next + STORE_WINDOW_ROWS + 5; id++)
		add(&w, id, "a", true);
	CHECK_EQ_INT(fo.offers, 1 + 14);
	CHECK_EQ_INT(w.newest.n, STORE_WINDOW_ROWS);
	CHECK_EQ_INT(w.newest.lo, next + 4);
	store_window_free(&w);
}

static void test_bytes_limit(void)
{
	struct store_window w;
	struct fanout fo = { &w, 0, 0, false };
	store_window_init(&w, 0, offered, &fo);
	CHECK_EQ_INT(store_window_row_size(&w), 256); /* a guess before any row */
	struct store_event ev = event(1, "a", true, sizeof(big));
	CHECK(store_window_add(&w, &ev));
	size_t one = w.newest.bytes;
	CHECK(one > sizeof(big));
	CHECK_EQ_INT(store_window_row_size(&w), one);
	for (int64_t id = 2; id <= 200; id++) {
		ev.id = id;
		store_window_add(&w, &ev);
		CHECK(w.newest.bytes <= STORE_WINDOW_BYTES);
	}
	CHECK_EQ_INT(w.newest.n, STORE_WINDOW_BYTES / one);
	CHECK_EQ_INT(w.newest.bytes, w.newest.n * one);
	CHECK_EQ_INT(w.newest.lo, 200 - (int64_t)w.newest.n);
	CHECK(fo.offers > 0);
	store_window_free(&w);
}

static void test_range_reads_and_through(void)
{
	struct store_window w;
	store_window_init(&w, 0, NULL, NULL);
	for (int64_t id = 1; id <= 100; id++)
		add(&w, id * 2, "a", id % 2); /* even ids only: the odd ones do not exist */
	static struct ids r;
	int64_t through = 0, gap = 0;
	CHECK_EQ_INT(read_all(&w, 0, 20, 100, NULL, &r, &through, &gap), 10);
	CHECK_EQ_INT(r.id[0], 2);
	CHECK_EQ_INT(r.id[9], 20);
	CHECK_EQ_INT(through, 20);
	/* From the middle of a missing id, up to one that does not exist. */
	CHECK_EQ_INT(read_all(&w, 3, 9, 100, NULL, &r, &through, &gap), 3);
	CHECK_EQ_INT(r.id[0], 4);
	CHECK_EQ_INT(through, 9);
	/* The limit: through is the last row passed. */
	CHECK_EQ_INT(read_all(&w, 0, 200, 5, NULL, &r, &through, &gap), 5);
	CHECK_EQ_INT(through, 10);
	CHECK_EQ_INT(gap, -1);
	/* The callback stops: the same. */
	r.stop_at = 3;
	CHECK_EQ_INT(read_all(&w, 10, 200, 100, NULL, &r, &through, &gap), 3);
	CHECK_EQ_INT(through, 16);
	r.stop_at = 0;
	/* Beyond the newest id: up to it. */
	CHECK_EQ_INT(read_all(&w, 190, 10000, 100, NULL, &r, &through, &gap), 5);
	CHECK_EQ_INT(through, 200);
	CHECK_EQ_INT(gap, -1);
	/* Nothing after the newest: no rows, and not a gap. */
	through = -5;
	CHECK_EQ_INT(read_all(&w, 200, 10000, 100, NULL, &r, &through, &gap), 0);
	CHECK_EQ_INT(through, 200);
	CHECK_EQ_INT(gap, -1);
	store_window_free(&w);
}

/* A filtered read looks at STORE_WINDOW_READ_BUDGET rows at most and says
 * how far it got; an unfiltered one has no such bound. */
static void test_filtered_budget(void)
{
	struct store_window w;
	store_window_init(&w, 0, NULL, NULL);
	int64_t rows = 3 * STORE_WINDOW_READ_BUDGET + 10;
	for (int64_t id = 1; id <= rows; id++)
		add(&w, id, id == rows ? "wanted" : "other", true);
	char *wanted[] = { "wanted" };
	struct store_filter f = { .ntopics = 1, .topics = wanted };
	static struct ids r;
	int64_t through = 0, gap = 0, pos = 0;
	int reads = 0;
	CHECK_EQ_INT(read_all(&w, 0, rows, 100, &f, &r, &through, &gap), 0);
	CHECK_EQ_INT(through, STORE_WINDOW_READ_BUDGET);
	CHECK_EQ_INT(gap, -1); /* spent, not a gap */
	for (pos = 0; pos < rows && reads < 10; reads++) {
		int n = read_all(&w, pos, rows, 100, &f, &r, &through, &gap);
		CHECK(n >= 0 && through > pos);
		pos = through;
	}
	CHECK_EQ_INT(reads, 4);
	CHECK_EQ_INT(r.n, 1);
	CHECK_EQ_INT(r.id[0], rows);
	CHECK_EQ_INT(read_all(&w, 0, rows, SIZE_MAX, NULL, &r, &through, &gap), rows);
	store_window_free(&w);
}

/* Random rows and reduced patterns: the rows a filtered read passes, step
 * by step, are exactly those visibility_passes passes. */
static void test_filtered_reads_follow_the_rule(void)
{
	static const char *const topics[] = { "a", "a/b", "a/b/c", "ab", "b", "b/a", "", "c/a/b" };
	static const char *const patterns[] = { "a", "a/*", "a/b", "a/b/*", "b", "b/*", "*", "ab", "c/*", "x" };
	enum { ROWS = 6000 };
	static const char *tp[ROWS + 1];
	static bool pb[ROWS + 1];
	struct store_window w;
	store_window_init(&w, 0, NULL, NULL);
	srandom(11);
	for (int64_t id = 1; id <= ROWS; id++) {
		tp[id] = topics[random() % 8];
		pb[id] = random() % 3 == 0;
		add(&w, id, tp[id], pb[id]);
	}
	static struct ids r, want;
	int mismatches = 0;
	for (int trial = 0; trial < 200; trial++) {
		char *tsel[4], *gsel[3];
		struct store_filter f = { .see_private = random() % 6 == 0, .topics = tsel, .grants = gsel };
		f.ntopics = (size_t)(random() % 4);
		f.ngrants = (size_t)(random() % 3);
		for (size_t i = 0; i < f.ntopics; i++)
			tsel[i] = xstrdup(patterns[random() % 10]);
		for (size_t i = 0; i < f.ngrants; i++)
			gsel[i] = xstrdup(patterns[random() % 10]);
		f.ntopics = topic_patterns_reduce(tsel, f.ntopics);
		f.ngrants = topic_patterns_reduce(gsel, f.ngrants);
		int64_t after = random() % 2000, upto = after + random() % 5000;
		want.n = 0;
		for (int64_t id = after + 1; id <= upto && id <= ROWS; id++)
			if (visibility_passes(&f, tp[id], strlen(tp[id]), pb[id]))
				want.id[want.n++] = id;
		r.n = 0;
		r.stop_at = 0;
		int64_t pos = after, through, gap;
		int64_t end = upto < ROWS ? upto : ROWS; /* a read goes no further than the newest id */
		for (int steps = 0; pos < end && steps < 1000; steps++) {
			int n = store_window_read(&w, pos, upto, 37, &f, collect, &r, &through, &gap);
			if (n < 0 || through <= pos) {
				CHECK(!"a read got nowhere");
				break;
			}
			pos = through;
		}
		if ((r.n != want.n || memcmp(r.id, want.id, want.n * sizeof(int64_t)) != 0) && mismatches++ < 3)
			fprintf(stderr, "trial %d: %zu rows, the rule says %zu\n", trial, r.n, want.n);
		for (size_t i = 0; i < f.ntopics; i++)
			free(tsel[i]);
		for (size_t i = 0; i < f.ngrants; i++)
			free(gsel[i]);
	}
	CHECK_EQ_INT(mismatches, 0);
	store_window_free(&w);
}

/* A page of the ids after `after`: rows after+1 .. after+n, of size bytes
 * of data each, covering up to hi. Returns page_end's answer. */
static int64_t make_page(struct store_window *w, int64_t after, int64_t first, int64_t last, int64_t hi, size_t size)
{
	struct store_span *p = store_window_page_begin(w, after);
	for (int64_t id = first; id <= last; id++) {
		struct store_event ev = event(id, "p", false, size);
		store_window_page_add(p, &ev);
	}
	return store_window_page_end(w, p, hi);
}

static bool page_held(struct store_window *w, int64_t after)
{
	static struct ids r;
	int64_t through, gap;
	return read_all(w, after, after + 1, 1, NULL, &r, &through, &gap) == 1;
}

static void test_pages(void)
{
	struct store_window w;
	store_window_init(&w, 100000, NULL, NULL);
	for (int64_t id = 100001; id <= 100010; id++)
		add(&w, id, "a", true);
	/* A page of 100 < id <= 200 whose first 20 ids were pruned; rows out
	 * of order or outside it are not kept. */
	struct store_span *p = store_window_page_begin(&w, 100);
	int64_t ids[] = { 121, 122, 122, 121, 50, 100, 130, 200, 201 };
	for (size_t i = 0; i < ARRAY_LEN(ids); i++) {
		struct store_event ev = event(ids[i], "p", true, 1);
		store_window_page_add(p, &ev);
	}
	CHECK_EQ_INT(store_window_page_end(&w, p, 200), 120);
	static struct ids r;
	int64_t through = 0, gap = 0;
	CHECK_EQ_INT(read_all(&w, 100, 300, 100, NULL, &r, &through, &gap), 4);
	CHECK_EQ_INT(r.id[0], 121);
	CHECK_EQ_INT(r.id[3], 200);
	CHECK_EQ_INT(through, 200);
	CHECK_EQ_INT(gap, 200); /* the page ends at 200: 201 is fetched next */
	/* An empty page covers its range: every id in it was pruned. */
	CHECK_EQ_INT(make_page(&w, 200, 1, 0, 100000, 1), 100000);
	CHECK_EQ_INT(read_all(&w, 100, 100010, 1000, NULL, &r, &through, &gap), 14);
	CHECK_EQ_INT(through, 100010);
	CHECK_EQ_INT(gap, -1);
	/* A page with no rows of which some id before hi existed: pruned. */
	CHECK_EQ_INT(make_page(&w, 300, 301, 305, 400, 1), 0);
	store_window_free(&w);

	/* STORE_WINDOW_PAGES slots, one kept free for the next page; the
	 * least recently read page goes. */
	store_window_init(&w, 1000000, NULL, NULL);
	for (int64_t k = 0; k < STORE_WINDOW_PAGES - 1; k++)
		make_page(&w, k * 10, k * 10 + 1, k * 10 + 10, k * 10 + 10, 1);
	CHECK_EQ_INT(w.npages, STORE_WINDOW_PAGES - 1);
	CHECK(page_held(&w, 0)); /* read: page 0 is now the most recent */
	make_page(&w, 5000, 5001, 5010, 5010, 1);
	CHECK_EQ_INT(w.npages, STORE_WINDOW_PAGES - 1);
	CHECK(page_held(&w, 0));
	CHECK(!page_held(&w, 10)); /* page 1 was the least recently read */
	CHECK(page_held(&w, 20));
	CHECK(page_held(&w, 5000));
	store_window_free(&w);

	/* At most STORE_WINDOW_PAGES_BYTES in all; a new page always stays. */
	store_window_init(&w, 1000000, NULL, NULL);
	size_t total = 0;
	for (int64_t k = 0; k < 40; k++) {
		make_page(&w, k * 100, k * 100 + 1, k * 100 + 4, k * 100 + 100, sizeof(big)); /* 256 KiB each */
		total = 0;
		for (size_t i = 0; i < w.npages; i++)
			total += w.pages[i].bytes;
		CHECK(total <= STORE_WINDOW_PAGES_BYTES || w.npages == 1);
		CHECK(page_held(&w, k * 100));
	}
	CHECK(w.npages < 16 && w.npages >= 14);
	CHECK(!page_held(&w, 0));
	/* One page larger than the whole cache is still kept, alone. */
	make_page(&w, 90000, 90001, 90070, 90100, sizeof(big));
	CHECK_EQ_INT(w.npages, 1);
	CHECK(page_held(&w, 90000));
	store_window_free(&w);
}

/* A Mercure update's block (its id, retry and topics) is kept with the
 * row, in the window and in pages alike: a resume from the update's id and
 * the Mercure frame need it. */
static int keep_block(void *arg, const struct store_event *ev)
{
	const char **seen = arg;
	*seen = ev->mercure ? ev->mercure : "(none)";
	CHECK(!ev->mercure || ev->mercure[ev->mercure_len] == '\0');
	return 0;
}

static void test_mercure_block_kept(void)
{
	struct store_window w;
	store_window_init(&w, 0, NULL, NULL);
	struct store_event ev = event(1, "a", true, 3);
	static const char block[] = "urn:x:1\n\nhttps://example.com/a\nhttps://example.com/b";
	char lent[sizeof(block)]; /* as a reply's strings are: gone after the add */
	memcpy(lent, block, sizeof(block));
	ev.mercure = lent;
	ev.mercure_len = sizeof(block) - 1;
	CHECK(store_window_add(&w, &ev));
	memset(lent, 'z', sizeof(lent) - 1);
	CHECK(add(&w, 2, "a", true));
	const char *seen[2] = { NULL, NULL };
	int64_t through = 0, gap = 0;
	CHECK(store_window_read(&w, 0, 1, 10, NULL, keep_block, &seen[0], &through, &gap) == 1);
	CHECK(seen[0] && strcmp(seen[0], block) == 0);
	CHECK(store_window_read(&w, 1, 2, 10, NULL, keep_block, &seen[1], &through, &gap) == 1);
	CHECK(seen[1] && strcmp(seen[1], "(none)") == 0);
	store_window_free(&w);
}

int main(void)
{
	test_mercure_block_kept();
	memset(big, 'x', sizeof(big));
	test_rows_limit_and_offer();
	test_bytes_limit();
	test_range_reads_and_through();
	test_filtered_budget();
	test_filtered_reads_follow_the_rule();
	test_pages();
	return check_done("store_window");
}
