/* SPDX-License-Identifier: BSD-2-Clause */
/* rate-report.c: load/rate's output: one markdown row per step, notes on
 * the highest rate that kept up and on what happened past it, one JSON line
 * with every figure, and with --csv one row per step for load/plot. Only
 * reads what the steps gathered. */
#include "rate.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static double pct(double part, double whole)
{
	return whole > 0 ? 100 * part / whole : NAN;
}

/* Server CPU per delivery in microseconds. */
static double us_per_delivery(const struct rate_step *s)
{
	return s->deliveries ? s->cpu_s * 1e6 / (double)s->deliveries : NAN;
}

static double deliveries_per_s(const struct rate_step *s)
{
	return s->deliver_s > 0 ? (double)s->deliveries / s->deliver_s : NAN;
}

static void write_csv(const struct rate_opts *o, const struct rate_run *m, const struct rate_recv *rv)
{
	FILE *f = fopen(o->csv, "w");
	if (!f) {
		fprintf(stderr, "rate: cannot write %s: %s\n", o->csv, strerror(errno));
		return;
	}
	fprintf(f, "rate,sent,ok,deliveries,deliveries_per_s,p50_ms,p99_ms,max_ms,lost,order_errors,catchups,"
		   "cpu_us_per_delivery,server_cpu_pct,server_runq_wait_pct,server_rss_kb,client_cpu_pct,keeps_up\n");
	for (int i = 0; i < m->nsteps; i++) {
		const struct rate_step *s = &m->s[i];
		const struct lat_hist *h = &rv->step[i].lat;
		fprintf(f, "%g,%ld,%ld,%llu,%.0f,%.3f,%.3f,%.3f,%ld,%ld,%lld,%.3f,%.1f,%.1f,%ld,%.1f,%d\n", s->rate,
			s->sent, s->ok, (unsigned long long)s->deliveries, deliveries_per_s(s), lat_pct_ms(h, 50),
			lat_pct_ms(h, 99), lat_pct_ms(h, 100), s->lost, s->order_errs + s->gaps, s->catchups,
			us_per_delivery(s), pct(s->cpu_s, s->wall_s), pct(s->runq_s, s->wall_s), s->rss_kb_max,
			pct(s->self_cpu_s, s->wall_s), s->keeps_up);
	}
	fclose(f);
}

int rate_report(const struct rate_opts *o, const struct rate_run *m, const struct rate_recv *rv, const struct client *c,
		int interrupted)
{
	char a[32], b[32], d[32], e[32], f[32], g[32], k[32];
	long open = c ? c->c.open : 0;
	printf("| rate (ev/s) | sent | deliveries/s | p50 | p99 | max | lost | order errors | catch-ups | server CPU "
	       "per "
	       "delivery | server CPU | server waiting for a CPU | server RSS | client CPU | keeps up |\n");
	printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
	int best = -1, bad = 0;
	for (int i = 0; i < m->nsteps; i++) {
		const struct rate_step *s = &m->s[i];
		const struct lat_hist *h = &rv->step[i].lat;
		printf("| %s | %s | %s | %s | %s | %s | %ld | %ld | %s | **%.2f us** | %.0f %% | %.0f %% | %.1f MiB | "
		       "%.0f %% | %s |\n",
		       tool_fmt_count((long long)s->rate, a, sizeof(a)), tool_fmt_count(s->sent, b, sizeof(b)),
		       tool_fmt_count((long long)deliveries_per_s(s), d, sizeof(d)),
		       tool_fmt_dur(lat_pct_ms(h, 50) / 1e3, e, sizeof(e)),
		       tool_fmt_dur(lat_pct_ms(h, 99) / 1e3, f, sizeof(f)),
		       tool_fmt_dur(lat_pct_ms(h, 100) / 1e3, g, sizeof(g)), s->lost, s->order_errs + s->gaps,
		       s->catchups >= 0 ? tool_fmt_count(s->catchups, k, sizeof(k)) : "?", us_per_delivery(s),
		       pct(s->cpu_s, s->wall_s), pct(s->runq_s, s->wall_s), (double)s->rss_kb_max / 1024,
		       pct(s->self_cpu_s, s->wall_s), s->keeps_up ? "yes" : "no");
		if (s->keeps_up && (best < 0 || s->rate > m->s[best].rate))
			best = i;
		if (s->lost || s->order_errs || s->gaps || s->failed)
			bad = 1;
	}
	/* Every reader, over the whole run: exactly the events published, in order. */
	long short_readers = 0, total_missing = 0, order = 0;
	long published = m->published;
	for (long i = 0; c && i < rv->n; i++) {
		if (c->r[i].state != R_OPEN)
			continue;
		const struct rate_reader *r = &rv->r[i];
		if (r->got < published) {
			short_readers++;
			total_missing += published - r->got;
		}
		order += r->order_errs + r->gaps;
	}
	if (total_missing || order)
		bad = 1;
	printf("\n");
	printf("%ld of %ld readers open (opened in %s); %ld events published in %d steps of %g s (drain up to %g s); "
	       "at the end every open reader %s.\n",
	       open, o->n, tool_fmt_dur(m->open_s, a, sizeof(a)), published, m->nsteps, o->step_s, o->drain_s,
	       total_missing || order ? "did NOT get every event in order" : "had every event, in order, once");
	if (best >= 0)
		printf("Highest rate that kept up (p99 under %g ms, every event to every reader by the end of the "
		       "drain): %s events/s to %ld readers.\n",
		       o->p99_limit_ms, tool_fmt_count((long long)m->s[best].rate, a, sizeof(a)), open);
	else
		printf("No rate kept up (p99 under %g ms, every event to every reader by the end of the drain).\n",
		       o->p99_limit_ms);
	for (int i = 0; i < m->nsteps; i++) {
		const struct rate_step *s = &m->s[i];
		if (!s->keeps_up || s->catchups > 0)
			printf("- %g ev/s: %lld readers moved to catch-up, RSS at most %.1f MiB (%.1f MiB with the "
			       "readers "
			       "open); when its drain ended %ld readers were behind, and %llu deliveries of its events "
			       "came "
			       "later; sends up to %.1f ms late%s.\n",
			       s->rate, s->catchups, (double)s->rss_kb_max / 1024, (double)m->rss_open_kb / 1024,
			       s->behind, (unsigned long long)s->late, s->max_lag_ms,
			       s->failed ? "; some publishes failed" : "");
	}
	if (m->final_behind)
		printf("After the last step and %.1f s more, %ld readers had still not had the newest event.\n",
		       m->final_drain_s, m->final_behind);
	if (interrupted)
		printf("Interrupted: the figures cover what ran.\n");

	tool_json_open(NULL, '{');
	tool_json_text("tool", "rate");
	tool_json_text("run", o->run);
	tool_json_text("readers", o->readers);
	tool_json_int("n", o->n);
	tool_json_int("opened", c ? c->c.opened : 0);
	tool_json_num("open_ms", m->open_s * 1e3);
	tool_json_num("step_s", o->step_s);
	tool_json_int("connections", o->k);
	tool_json_num("p99_limit_ms", o->p99_limit_ms);
	tool_json_int("published", published);
	tool_json_int("lost_total", total_missing);
	tool_json_int("readers_short", short_readers);
	tool_json_int("order_errors_total", order);
	tool_json_int("foreign_frames", (long long)rv->foreign);
	if (best >= 0)
		tool_json_num("highest_keeping_up", m->s[best].rate);
	else
		tool_json_null("highest_keeping_up");
	tool_json_int("rss_open_kb", m->rss_open_kb);
	tool_json_num("final_drain_s", m->final_drain_s);
	tool_json_int("final_behind", m->final_behind);
	tool_json_open("steps", '[');
	for (int i = 0; i < m->nsteps; i++) {
		const struct rate_step *s = &m->s[i];
		const struct lat_hist *h = &rv->step[i].lat;
		tool_json_open(NULL, '{');
		tool_json_num("rate", s->rate);
		tool_json_int("sent", s->sent);
		tool_json_int("ok", s->ok);
		tool_json_int("failed", s->failed);
		tool_json_int("deliveries", (long long)s->deliveries);
		tool_json_num("deliveries_per_s", deliveries_per_s(s));
		tool_json_num("p50_ms", lat_pct_ms(h, 50));
		tool_json_num("p99_ms", lat_pct_ms(h, 99));
		tool_json_num("max_ms", lat_pct_ms(h, 100));
		tool_json_int("lost", s->lost);
		tool_json_int("order_errors", s->order_errs);
		tool_json_int("gaps", s->gaps);
		tool_json_int("behind", s->behind);
		tool_json_int("late", (long long)s->late);
		tool_json_int("catchups", s->catchups);
		tool_json_num("server_cpu_s", s->cpu_s);
		tool_json_num("cpu_us_per_delivery", us_per_delivery(s));
		tool_json_num("server_cpu_pct", pct(s->cpu_s, s->wall_s));
		tool_json_num("server_runq_wait_pct", pct(s->runq_s, s->wall_s));
		tool_json_int("server_rss_kb_max", s->rss_kb_max);
		tool_json_int("server_rss_kb_end", s->rss_kb_end);
		tool_json_num("client_cpu_pct", pct(s->self_cpu_s, s->wall_s));
		tool_json_num("wall_s", s->wall_s);
		tool_json_num("max_send_lag_ms", s->max_lag_ms);
		tool_json_bool("keeps_up", s->keeps_up);
		tool_json_close();
	}
	tool_json_close();
	tool_json_int("herald_exit", m->herald_exit);
	tool_json_close();
	if (o->csv)
		write_csv(o, m, rv);
	return bad || interrupted || !c || (c && c->c.opened < o->n) ? 1 : 0;
}
