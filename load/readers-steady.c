/* SPDX-License-Identifier: BSD-2-Clause */
/* readers-steady.c: what load/readers --restart and --soak share. Events
 * are published by INSERT into herald's database, as another program would,
 * at a steady rate: an INSERT needs no herald, so publishing goes on while
 * herald restarts. Every reader checks that the ids it reads follow one
 * another (herald's ids are the table's AUTOINCREMENT, and only this tool
 * writes, so the stored ids are consecutive): a jump is a missed event, a
 * step back or a repeat a duplicate. */
#include "readers.h"

#include <stdio.h>
#include <string.h>

void steady_start(struct steady *s, struct publisher *p, long rate)
{
	memset(s, 0, sizeof(*s));
	s->pub = p;
	s->rate = rate;
	s->t0 = tool_now_ns();
}

/* One INSERT; its id, or 0 when it failed. */
static int64_t insert_one(struct steady *s)
{
	struct publisher *p = s->pub;
	char data[96];
	snprintf(data, sizeof(data), "steady seq=%ld run=%s", s->published + 1, p->run_tag);
	sqlite3_bind_text(p->ins, 1, data, -1, SQLITE_TRANSIENT);
	int64_t a = tool_now_ns();
	int rc = sqlite3_step(p->ins);
	double took = (double)(tool_now_ns() - a) / 1e9;
	sqlite3_reset(p->ins);
	if (took > s->insert_max_s)
		s->insert_max_s = took;
	if (rc != SQLITE_DONE) {
		if (s->failed++ == 0)
			fprintf(stderr, "readers: insert failed: %s\n", sqlite3_errmsg(p->db));
		return 0;
	}
	return sqlite3_last_insert_rowid(p->db);
}

int steady_tick(struct steady *s)
{
	int64_t step = 1000000000LL / s->rate;
	int64_t now = tool_now_ns();
	long due = (long)((now - s->t0) / step) + 1;
	/* After a stall (a slow INSERT), catch up at most a second's worth. */
	if (due - (s->published + s->failed) > s->rate)
		s->t0 = now - (s->published + s->failed) * step;
	while (s->published + s->failed < due) {
		int64_t id = insert_one(s);
		if (!id)
			continue;
		if (!s->first_id)
			s->first_id = id;
		s->last_id = id;
		s->published++;
	}
	int64_t next = s->t0 + (s->published + s->failed) * step;
	int64_t left = (next - tool_now_ns()) / 1000000;
	return left < 0 ? 0 : (int)left;
}

struct client *tracked_client_new(const struct options *o, const struct tool_addr *target, const char *request,
				  struct tls *tls, struct events *ev)
{
	events_init(ev, o->n, 1);
	struct client *c = client_new(o->n, target, o->sources, request, tls, ev);
	if (!c) {
		events_free(ev);
		return NULL;
	}
	c->track = 1;
	return c;
}

void ids_verdict(const struct client *c, int64_t first, int64_t last, struct id_verdict *v)
{
	memset(v, 0, sizeof(*v));
	for (long i = 0; i < c->n; i++) {
		const struct reader *r = &c->r[i];
		if (!r->t_open)
			continue;
		if (v->readers++ == 0 || r->last_id < v->min_last)
			v->min_last = r->last_id;
		/* A first id after the first published one is a gap at the start. */
		long long gaps = r->gaps + (r->seen && r->first_id > first ? r->first_id - first : 0);
		v->gaps += gaps;
		v->dups += r->dups;
		v->with_gaps += gaps > 0;
		v->with_dups += r->dups > 0;
		int at_end = r->seen > 0 && r->last_id == last;
		v->behind += !at_end;
		if (at_end && gaps == 0 && r->dups == 0 && r->first_id == first && (int64_t)r->seen == last - first + 1)
			v->complete++;
	}
}

void ids_json(const struct id_verdict *v)
{
	tool_json_int("readers_checked", v->readers);
	tool_json_int("readers_complete", v->complete);
	tool_json_int("readers_with_gaps", v->with_gaps);
	tool_json_int("readers_with_duplicates", v->with_dups);
	tool_json_int("readers_behind", v->behind);
	tool_json_int("min_last_id", v->min_last);
	tool_json_int("ids_missed", v->gaps);
	tool_json_int("ids_duplicated", v->dups);
}
