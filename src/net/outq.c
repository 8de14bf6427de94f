/* SPDX-License-Identifier: BSD-2-Clause */
/* outq.c: the output ring of a connection (see outq.h for the invariant).
 * Its capacity is always a power of two, so a slot is found with a mask:
 * these run once per delivery, and a division there showed in profiles. */
#include "net/outq.h"

#include <stdlib.h>

#include "common/util.h"

static struct outq_entry *at(const struct outq *q, size_t i)
{
	return &q->q[(q->head + i) & (q->cap - 1)];
}

static struct chunk *entry_chunk(const struct outq_entry *e)
{
	return (struct chunk *)(e->word & ~(uintptr_t)1);
}

static int64_t entry_id(const struct outq_entry *e)
{
	return entry_chunk(e)->id;
}

static bool entry_droppable(const struct outq_entry *e)
{
	return e->word & 1;
}

void outq_push(struct outq *q, struct chunk *ch, int64_t id, bool droppable)
{
	if (q->len == q->cap) {
		size_t ncap = q->cap ? q->cap * 2 : 4;
		struct outq_entry *nq = xmalloc(ncap * sizeof(*nq));
		for (size_t i = 0; i < q->len; i++)
			nq[i] = *at(q, i);
		free(q->q);
		q->q = nq;
		q->cap = ncap;
		q->head = 0;
	}
	ch->id = id;
	q->q[(q->head + q->len) & (q->cap - 1)] = (struct outq_entry){ (uintptr_t)chunk_ref(ch) | droppable };
	q->len++;
	q->bytes += ch->len;
}

int outq_iov(const struct outq *q, struct iovec *iov, int max, size_t *total)
{
	int n = 0;
	*total = 0;
	size_t off = q->head_off; /* only the head can be partly written */
	for (size_t i = 0; i < q->len && n < max; i++) {
		const struct outq_entry *e = at(q, i);
		const struct chunk *c = entry_chunk(e);
		iov[n].iov_base = (char *)c->data + off;
		iov[n].iov_len = c->len - off;
		*total += iov[n].iov_len;
		n++;
		off = 0;
	}
	return n;
}

void outq_consume(struct outq *q, size_t n)
{
	q->bytes -= n;
	while (n) {
		struct outq_entry *e = at(q, 0);
		struct chunk *c = entry_chunk(e);
		size_t rest = c->len - q->head_off;
		if (n < rest) {
			q->head_off += (uint32_t)n;
			return;
		}
		n -= rest;
		q->head_off = 0;
		if (c->id > 0)
			q->written_id = c->id;
		chunk_unref(c);
		q->head = (q->head + 1) & (q->cap - 1);
		q->len--;
	}
}

bool outq_head_started(const struct outq *q)
{
	return q->len && q->head_off > 0;
}

int64_t outq_drop(struct outq *q, size_t committed)
{
	int64_t resume = q->written_id;
	size_t kept = 0, before = 0; /* unwritten bytes ahead of entry i */
	/* A frame half on the wire must be finished, or the stream breaks. */
	bool head_started = outq_head_started(q);
	for (size_t i = 0; i < q->len; i++) {
		struct outq_entry e = *at(q, i);
		bool on_its_way = before < committed || (i == 0 && head_started);
		before += entry_chunk(&e)->len - (i == 0 ? q->head_off : 0);
		if (!entry_droppable(&e) || on_its_way) {
			*at(q, kept++) = e;
			if (entry_id(&e) > 0)
				resume = entry_id(&e);
			continue;
		}
		/* Only a head that has not started is dropped: no offset. */
		q->bytes -= entry_chunk(&e)->len;
		chunk_unref(entry_chunk(&e));
	}
	q->len = kept;
	return resume;
}

void outq_free(struct outq *q)
{
	for (size_t i = 0; i < q->len; i++)
		chunk_unref(entry_chunk(at(q, i)));
	free(q->q);
	q->q = NULL;
	q->len = q->cap = q->head = q->bytes = 0;
	q->head_off = 0;
}
