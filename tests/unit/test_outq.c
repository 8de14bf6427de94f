/* SPDX-License-Identifier: BSD-2-Clause */
/* test_outq.c: the connection's output ring without a socket: order, partial
 * writes, growth across the ring's end, and what a drop keeps (response
 * heads, resets, a frame half on the wire) and what resume point it gives. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "net/outq.h"

static struct chunk *text(const char *s)
{
	return chunk_from(s, strlen(s));
}

/* Push a fresh chunk holding s (the queue takes its own reference). */
static void push(struct outq *q, const char *s, int64_t id, bool droppable)
{
	struct chunk *c = text(s);
	outq_push(q, c, id, droppable);
	chunk_unref(c);
}

/* Everything queued, as one string (what a writev would send). */
static void contents(const struct outq *q, char *out, size_t outlen)
{
	struct iovec iov[64];
	size_t total, n = 0;
	int k = outq_iov(q, iov, 64, &total);
	for (int i = 0; i < k && n + iov[i].iov_len < outlen; i++) {
		memcpy(out + n, iov[i].iov_base, iov[i].iov_len);
		n += iov[i].iov_len;
	}
	out[n] = '\0';
}

static void test_order_and_partial_writes(void)
{
	struct outq q = { 0 };
	char buf[256];
	push(&q, "HEAD|", 0, false);
	push(&q, "e1|", 1, true);
	push(&q, "e2|", 2, true);
	CHECK_EQ_INT(q.len, 3);
	CHECK_EQ_INT(q.bytes, 11);
	contents(&q, buf, sizeof(buf));
	CHECK(strcmp(buf, "HEAD|e1|e2|") == 0);
	/* The socket takes 7 bytes: the head and 2 of e1. */
	outq_consume(&q, 7);
	CHECK_EQ_INT(q.len, 2);
	CHECK_EQ_INT(q.bytes, 4);
	CHECK(outq_head_started(&q));
	CHECK_EQ_INT(q.written_id, 0);
	contents(&q, buf, sizeof(buf));
	CHECK(strcmp(buf, "|e2|") == 0);
	outq_consume(&q, 1); /* e1 done: the written id moves */
	CHECK_EQ_INT(q.written_id, 1);
	CHECK(!outq_head_started(&q));
	outq_consume(&q, 3);
	CHECK_EQ_INT(q.len, 0);
	CHECK_EQ_INT(q.bytes, 0);
	CHECK_EQ_INT(q.written_id, 2);
	outq_free(&q);
}

static void test_growth_across_the_end(void)
{
	struct outq q = { 0 };
	char want[512] = "", got[512], one[16];
	/* Fill, consume some, fill past the capacity: the ring wraps, then
	 * grows, and order holds. */
	for (int i = 0; i < 6; i++) {
		snprintf(one, sizeof(one), "a%d,", i);
		push(&q, one, i + 1, true);
	}
	outq_consume(&q, 3 * 3); /* a0, a1, a2 */
	for (int i = 0; i < 20; i++) {
		snprintf(one, sizeof(one), "b%02d,", i);
		push(&q, one, 100 + i, true);
	}
	strcat(want, "a3,a4,a5,");
	for (int i = 0; i < 20; i++) {
		snprintf(one, sizeof(one), "b%02d,", i);
		strcat(want, one);
	}
	contents(&q, got, sizeof(got));
	CHECK(strcmp(got, want) == 0);
	CHECK_EQ_INT(q.written_id, 3);
	outq_free(&q);
	CHECK_EQ_INT(q.len, 0);
}

static void test_drop_keeps_what_must_arrive(void)
{
	struct outq q = { 0 };
	char buf[256];
	q.written_id = 10; /* the reader's starting point */
	push(&q, "HEAD|", 0, false);
	push(&q, "e11|", 11, true);
	push(&q, "hb|", 0, true);
	push(&q, "RESET20|", 20, false);
	push(&q, "e21|", 21, true);
	push(&q, "e22|", 22, true);
	/* Events and heartbeats go; the head and the reset stay, in order;
	 * the resume point is the reset's id. */
	CHECK_EQ_INT(outq_drop(&q, false), 20);
	contents(&q, buf, sizeof(buf));
	CHECK(strcmp(buf, "HEAD|RESET20|") == 0);
	CHECK_EQ_INT(q.bytes, strlen("HEAD|RESET20|"));
	outq_free(&q);

	/* Nothing kept carries an id: the resume point is what was written. */
	q = (struct outq){ .written_id = 7 };
	push(&q, "e8|", 8, true);
	push(&q, "e9|", 9, true);
	CHECK_EQ_INT(outq_drop(&q, false), 7);
	CHECK_EQ_INT(q.len, 0);
	CHECK_EQ_INT(q.bytes, 0);
	outq_free(&q);
}

static void test_drop_finishes_a_frame_on_the_wire(void)
{
	struct outq q = { .written_id = 4 };
	char buf[256];
	push(&q, "event5|", 5, true);
	push(&q, "event6|", 6, true);
	outq_consume(&q, 3); /* half of event 5 is on the wire */
	CHECK_EQ_INT(outq_drop(&q, false), 5);
	contents(&q, buf, sizeof(buf));
	CHECK(strcmp(buf, "nt5|") == 0);
	outq_free(&q);

	/* With TLS the first frame may be committed with nothing written yet
	 * (encrypted, waiting for the socket): kept too. */
	q = (struct outq){ .written_id = 4 };
	push(&q, "event5|", 5, true);
	push(&q, "event6|", 6, true);
	CHECK_EQ_INT(outq_drop(&q, 1), 5);
	CHECK_EQ_INT(q.len, 1);
	outq_free(&q);

	/* One record may carry several frames (joined, or a round's frames
	 * sealed for a batch): every frame its bytes touch is kept, from a
	 * head half written on; the frames after it go. */
	q = (struct outq){ .written_id = 4 };
	push(&q, "event5|", 5, true);
	push(&q, "event6|", 6, true);
	push(&q, "event7|", 7, true);
	push(&q, "event8|", 8, true);
	outq_consume(&q, 2);
	CHECK_EQ_INT(outq_drop(&q, 5 + 7 + 1), 7); /* into event7's first byte */
	contents(&q, buf, sizeof(buf));
	CHECK(strcmp(buf, "ent5|event6|event7|") == 0);
	CHECK_EQ_INT(q.bytes, strlen("ent5|event6|event7|"));
	outq_free(&q);
	q = (struct outq){ .written_id = 4 };
	push(&q, "event5|", 5, true);
	push(&q, "event6|", 6, true);
	push(&q, "event7|", 7, true);
	CHECK_EQ_INT(outq_drop(&q, 14), 6); /* exactly two frames */
	CHECK_EQ_INT(q.len, 2);
	outq_free(&q);
}

static void test_iov_batch_limit(void)
{
	struct outq q = { 0 };
	for (int i = 0; i < 10; i++)
		push(&q, "xy", 0, false);
	struct iovec iov[4];
	size_t total;
	CHECK_EQ_INT(outq_iov(&q, iov, 4, &total), 4);
	CHECK_EQ_INT(total, 8);
	outq_free(&q);
}

/* An entry packs its id with the droppable mark, and the written part of
 * a frame belongs to the head alone: large ids come back whole, and the
 * frame after a finished partial one is written from its start. */
static void test_ids_and_offsets_of_packed_entries(void)
{
	struct outq q = { 0 };
	char buf[256];
	int64_t big = ((int64_t)1 << 61) + 3;
	push(&q, "keep|", big, false);
	push(&q, "gone|", big + 1, true);
	CHECK_EQ_INT(outq_drop(&q, false), big);
	CHECK_EQ_INT(q.len, 1);
	outq_consume(&q, 2);
	push(&q, "next|", big + 2, true);
	outq_consume(&q, 3); /* "keep|" done */
	CHECK_EQ_INT(q.written_id, big);
	CHECK(!outq_head_started(&q));
	contents(&q, buf, sizeof(buf));
	CHECK(strcmp(buf, "next|") == 0);
	outq_consume(&q, 1);
	contents(&q, buf, sizeof(buf));
	CHECK(strcmp(buf, "ext|") == 0);
	CHECK_EQ_INT(outq_drop(&q, false), big + 2);
	outq_consume(&q, 4);
	CHECK_EQ_INT(q.written_id, big + 2);
	CHECK_EQ_INT(q.bytes, 0);
	outq_free(&q);
}

/* One chunk in two queues, as one event in two readers' rings: its id
 * reaches both resume points, and whether it may be dropped is each
 * queue's own (the mark is in the entry, not in the chunk). */
static void test_a_chunk_shared_by_two_queues(void)
{
	struct outq a = { 0 }, b = { 0 };
	struct chunk *ev = text("event|");
	outq_push(&a, ev, 41, true);
	outq_push(&b, ev, 41, false);
	chunk_unref(ev); /* the queues hold it now */
	CHECK_EQ_INT(outq_drop(&a, false), 0);
	CHECK_EQ_INT(a.len, 0);
	CHECK_EQ_INT(outq_drop(&b, false), 41);
	CHECK_EQ_INT(b.len, 1);
	outq_consume(&b, 6);
	CHECK_EQ_INT(b.written_id, 41);
	CHECK_EQ_INT(b.len, 0);
	outq_free(&a);
	outq_free(&b);
}

int main(void)
{
	test_order_and_partial_writes();
	test_growth_across_the_end();
	test_drop_keeps_what_must_arrive();
	test_drop_finishes_a_frame_on_the_wire();
	test_iov_batch_limit();
	test_ids_and_offsets_of_packed_entries();
	test_a_chunk_shared_by_two_queues();
	return check_done("test_outq");
}
