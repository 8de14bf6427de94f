/* SPDX-License-Identifier: BSD-2-Clause */
/* readers-report.c: what load/readers prints at the end: the markdown table,
 * the per-event table, the notes (errors by kind beside the figures, always),
 * one JSON line with every figure, and the --csv and --opens-csv files. It
 * only reads what the phases gathered. */
#include "readers.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const ERR_NAMES[E_KINDS] = { "refused", "reset", "timeout", "non200", "closed", "other" };

/* Percent of one core between two marks; NAN when unknown. */
static double cpu_pct(struct cpu_mark a, struct cpu_mark b)
{
	if (!a.ok || !b.ok || b.t <= a.t)
		return NAN;
	return (double)(b.ticks - a.ticks) / (double)procstat_clk_tck() / (b.t - a.t) * 100.0;
}

/* Figures of one event over the readers that had it. */
struct ev_fig {
	double min, p50, p99, max;
	long missing;
	int failed;
};

/* The "not opened" cell: how many of the c->n readers never had their opening
 * frame, and why, by HTTP status and by kind of network error. */
static void fmt_not_opened(const struct client *c, int interrupted, char *buf, size_t len)
{
	long count = c->n - c->c.opened;
	int o = snprintf(buf, len, "%ld", count);
	if (count <= 0)
		return;
	const char *sep = " (";
	for (int s = 0; s < 600 && o < (int)len - 40; s++)
		if (c->c.non200[s]) {
			o += snprintf(buf + o, len - (size_t)o, "%s%s%d: %ld", sep, s ? "" : "unparsable ", s,
				      c->c.non200[s]);
			sep = ", ";
		}
	for (int k = 0; k < E_KINDS && o < (int)len - 40; k++)
		if (k != E_NON200 && c->c.errs[k]) {
			o += snprintf(buf + o, len - (size_t)o, "%s%s %ld", sep, ERR_NAMES[k], c->c.errs[k]);
			sep = ", ";
		}
	if (interrupted && o < (int)len - 40) {
		o += snprintf(buf + o, len - (size_t)o, "%sinterrupted", sep);
		sep = ", ";
	}
	if (sep[0] == ',' && o < (int)len - 1)
		snprintf(buf + o, len - (size_t)o, ")");
}

static void write_csv(const struct client *c, const struct events *ev, const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "readers: cannot write %s: %s\n", path, strerror(errno));
		return;
	}
	fprintf(f, "reader,event,id,latency_ms\n");
	for (long i = 0; i < c->n; i++) {
		if (!c->r[i].t_open)
			continue;
		for (long k = 0; k < ev->k; k++) {
			int64_t t = ev->recv_ns[(size_t)i * (size_t)ev->k + (size_t)k];
			if (t)
				fprintf(f, "%ld,%ld,%lld,%.3f\n", i, k + 1, (long long)ev->id[k], ms(t - ev->t0[k]));
			else
				fprintf(f, "%ld,%ld,%lld,\n", i, k + 1, (long long)ev->id[k]);
		}
	}
	fclose(f);
}

/* Each reader's connect and open times, from the first connect. */
static void write_opens_csv(const struct client *c, const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "readers: cannot write %s: %s\n", path, strerror(errno));
		return;
	}
	int64_t t0 = 0;
	for (long i = 0; i < c->n; i++)
		if (c->r[i].t_start && (!t0 || c->r[i].t_start < t0))
			t0 = c->r[i].t_start;
	fprintf(f, "reader,connect_ms,open_ms\n");
	for (long i = 0; i < c->n; i++) {
		const struct reader *r = &c->r[i];
		if (!r->t_start)
			continue;
		if (r->t_open)
			fprintf(f, "%ld,%.3f,%.3f\n", i, ms(r->t_start - t0), ms(r->t_open - t0));
		else
			fprintf(f, "%ld,%.3f,\n", i, ms(r->t_start - t0));
	}
	fclose(f);
}

/* One report: what the run gathered, and the figures computed from it once
 * for every output. */
struct rep {
	const struct options *o;
	const struct run *m;
	const struct client *c;
	const struct events *ev;
	const struct tls *tls;
	int interrupted;
	struct ev_fig *fig; /* per event */
	long missing_total, failed_events;
	size_t n_all; /* events that reached at least one reader */
	double all_min, all_max, all_p50, ratio;
	double open_p50, open_p99;
	double cpu_ev, cpu_idle, client_cpu, cpu_open_ms, client_open_ms, cpu_per_event, wait_per_event, rss_per_reader;
	long long dovf, ddrop;
	long closed_total;
};

/* Each event's figures over the readers that had it, the time to all of
 * them, and each reader's open time. */
static void event_figures(struct rep *r)
{
	const struct client *c = r->c;
	const struct events *ev = r->ev;
	r->fig = xcalloc((size_t)ev->k, sizeof(*r->fig));
	double *lat = xmalloc((size_t)c->n * sizeof(double));
	double *to_all = xmalloc((size_t)ev->k * sizeof(double));
	for (long k = 0; k < ev->k; k++) {
		size_t got = 0;
		for (long i = 0; i < c->n; i++) {
			int64_t t = ev->recv_ns[(size_t)i * (size_t)ev->k + (size_t)k];
			if (t)
				lat[got++] = (double)(t - ev->t0[k]) / 1e9;
		}
		tool_sort_doubles(lat, got);
		struct ev_fig *f = &r->fig[k];
		f->missing = c->c.opened - (long)got;
		f->failed = k >= ev->published || ev->failed[k];
		r->failed_events += f->failed;
		r->missing_total += f->missing;
		f->min = got ? lat[0] : NAN;
		f->p50 = tool_percentile(lat, got, 50);
		f->p99 = tool_percentile(lat, got, 99);
		f->max = got ? lat[got - 1] : NAN;
		if (got)
			to_all[r->n_all++] = f->max;
	}
	tool_sort_doubles(to_all, r->n_all);
	r->all_min = r->n_all ? to_all[0] : NAN;
	r->all_max = r->n_all ? to_all[r->n_all - 1] : NAN;
	r->all_p50 = tool_percentile(to_all, r->n_all, 50);
	r->ratio = (!isnan(r->m->floor_s) && r->m->floor_s > 0) ? r->all_p50 / r->m->floor_s : NAN;

	size_t no = 0;
	for (long i = 0; i < c->n; i++)
		if (c->r[i].t_open)
			lat[no++] = (double)(c->r[i].t_open - c->r[i].t_start) / 1e9;
	tool_sort_doubles(lat, no);
	r->open_p50 = tool_percentile(lat, no, 50);
	r->open_p99 = tool_percentile(lat, no, 99);
	free(lat);
	free(to_all);
}

/* The server's CPU, memory and kernel counters over the phases, and this
 * client's own CPU. */
static void server_figures(struct rep *r)
{
	const struct run *m = r->m;
	const struct client *c = r->c;
	r->cpu_ev = cpu_pct(m->ev_a, m->ev_b);
	r->cpu_idle = cpu_pct(m->idle_a, m->idle_b);
	r->client_cpu = m->ev_b.t > m->ev_a.t ? (m->ev_b.self - m->ev_a.self) / (m->ev_b.t - m->ev_a.t) * 100.0 : NAN;
	r->cpu_open_ms = NAN;
	r->client_open_ms = m->open_b.t > m->open_a.t ? (m->open_b.self - m->open_a.self) * 1e3 : NAN;
	if (m->open_a.ok && m->open_b.ok)
		r->cpu_open_ms = (double)(m->open_b.ticks - m->open_a.ticks) / (double)procstat_clk_tck() * 1e3;
	r->cpu_per_event = NAN;
	if (m->ev_a.ok && m->ev_b.ok && m->ev_b.t > m->ev_a.t)
		r->cpu_per_event =
			(double)(m->ev_b.ticks - m->ev_a.ticks) / (double)procstat_clk_tck() * 1e3 / (double)r->ev->k;
	/* The time the server wanted a CPU and had none: on a shared machine,
	 * what stretches its rounds beside the CPU they took. */
	r->wait_per_event = NAN;
	if (m->ev_a.wait_ok && m->ev_b.wait_ok && m->ev_b.wait_ns >= m->ev_a.wait_ns)
		r->wait_per_event = (double)(m->ev_b.wait_ns - m->ev_a.wait_ns) / 1e6 / (double)r->ev->k;
	r->rss_per_reader = (m->rss_open >= 0 && m->rss_before >= 0 && c->c.opened > 0)
				    ? (double)(m->rss_open - m->rss_before) / (double)c->c.opened
				    : NAN;
	r->dovf = (m->ovf0 >= 0 && m->ovf1 >= 0) ? m->ovf1 - m->ovf0 : -1;
	r->ddrop = (m->drop0 >= 0 && m->drop1 >= 0) ? m->drop1 - m->drop0 : -1;
	for (int k = 0; k < E_KINDS; k++)
		r->closed_total += c->c.closed_after_open[k];
}

/* The markdown table: one row with the run's main figures. */
static void print_table(const struct rep *r)
{
	const struct run *m = r->m;
	const struct client *c = r->c;
	char cN[32], cO[32], b1[32], b2[32], b3[32], b4[32];
	char c_backlog[48], c_open[64], c_not[200], c_thr[32], c_ev[96], c_cpu1[32], c_cpu2[32], c_rss[32], c_ratio[32];
	/* Asked for c->n; the event figures are over the readers that opened. */
	tool_fmt_count(c->n, cN, sizeof(cN));
	tool_fmt_count(c->c.opened, cO, sizeof(cO));
	fmt_not_opened(c, r->interrupted, c_not, sizeof(c_not));
	if (m->backlog > 0 && m->backlog_effective > 0 && m->backlog_effective != m->backlog)
		snprintf(c_backlog, sizeof(c_backlog), "%d (capped to %d)", m->backlog, m->backlog_effective);
	else if (m->backlog > 0)
		snprintf(c_backlog, sizeof(c_backlog), "%d", m->backlog);
	else
		snprintf(c_backlog, sizeof(c_backlog), "?");
	if (c->c.opened == c->n)
		snprintf(c_open, sizeof(c_open), "**%s**", tool_fmt_dur(m->open_s, b1, sizeof(b1)));
	else
		snprintf(c_open, sizeof(c_open), "**%s** (%ld of %ld)", tool_fmt_dur(m->open_s, b1, sizeof(b1)),
			 c->c.opened, c->n);
	if (m->threads_open < 0)
		snprintf(c_thr, sizeof(c_thr), "n/a");
	else if (m->threads_max != m->threads_open)
		snprintf(c_thr, sizeof(c_thr), "%d (max %d)", m->threads_open, m->threads_max);
	else
		snprintf(c_thr, sizeof(c_thr), "%d", m->threads_open);
	if (r->n_all == 0)
		snprintf(c_ev, sizeof(c_ev), "none arrived");
	else if (r->missing_total || r->failed_events)
		snprintf(c_ev, sizeof(c_ev), "%s – %s (%ld missing)", tool_fmt_dur(r->all_min, b2, sizeof(b2)),
			 tool_fmt_dur(r->all_max, b3, sizeof(b3)), r->missing_total);
	else
		snprintf(c_ev, sizeof(c_ev), "%s – %s", tool_fmt_dur(r->all_min, b2, sizeof(b2)),
			 tool_fmt_dur(r->all_max, b3, sizeof(b3)));
	strcpy(c_cpu1, "n/a");
	strcpy(c_cpu2, "n/a");
	strcpy(c_rss, "n/a");
	strcpy(c_ratio, "n/a");
	if (!isnan(r->cpu_ev))
		snprintf(c_cpu1, sizeof(c_cpu1), "%.1f %% of a core", r->cpu_ev);
	if (!isnan(r->cpu_idle))
		snprintf(c_cpu2, sizeof(c_cpu2), "%.2f %%", r->cpu_idle);
	if (!isnan(r->rss_per_reader))
		snprintf(c_rss, sizeof(c_rss), "%.1f KiB", r->rss_per_reader);
	if (!isnan(r->ratio))
		snprintf(c_ratio, sizeof(c_ratio), "%.1fx", r->ratio);
	printf("| run | listen backlog | opens (%s) | not opened | threads, all open | event to all %s | CPU while "
	       "events flow | CPU idle | RSS per reader | kernel floor | vs floor |\n",
	       cN, cO);
	printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
	printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r->o->run, c_backlog, c_open, c_not, c_thr,
	       c_ev, c_cpu1, c_cpu2, c_rss, tool_fmt_dur(m->floor_s, b4, sizeof(b4)), c_ratio);
}

/* The per-event table: each event's time to its readers. */
static void print_per_event(const struct rep *r)
{
	const struct events *ev = r->ev;
	char cO[32];
	tool_fmt_count(r->c->c.opened, cO, sizeof(cO));
	printf("\nPer event, from just before the %s until each reader had it:\n\n", r->o->mercure   ? "Mercure POST"
										     : r->o->publish ? "POST"
												     : "insert");
	printf("| event | id | readers | missing | min | p50 | p99 | max (all %s) "
	       "|\n|---|---|---|---|---|---|---|---|\n",
	       cO);
	for (long k = 0; k < ev->k; k++) {
		char m1[32], m2[32], m3[32], m4[32];
		printf("| %ld | %lld | %ld | %ld%s | %s | %s | %s | %s |\n", k + 1, (long long)ev->id[k], ev->got[k],
		       r->fig[k].missing, r->fig[k].failed ? " (publish failed)" : "",
		       tool_fmt_dur(r->fig[k].min, m1, sizeof(m1)), tool_fmt_dur(r->fig[k].p50, m2, sizeof(m2)),
		       tool_fmt_dur(r->fig[k].p99, m3, sizeof(m3)), tool_fmt_dur(r->fig[k].max, m4, sizeof(m4)));
	}
}

/* The notes: the error split beside the figures, always. */
static void print_notes(const struct rep *r)
{
	const struct options *o = r->o;
	const struct run *m = r->m;
	const struct client *c = r->c;
	char cO[32], b1[32], b2[32], b3[32];
	tool_fmt_count(c->c.opened, cO, sizeof(cO));
	printf("\nOpens: %ld of %ld in %s (each: p50 %s, p99 %s). Errors: %ld refused, %ld reset, %ld timeout, "
	       "%ld non-200",
	       c->c.opened, c->n, tool_fmt_dur(m->open_s, b1, sizeof(b1)), tool_fmt_dur(r->open_p50, b2, sizeof(b2)),
	       tool_fmt_dur(r->open_p99, b3, sizeof(b3)), c->c.errs[E_REFUSED], c->c.errs[E_RESET],
	       c->c.errs[E_TIMEOUT], c->c.errs[E_NON200]);
	if (c->c.errs[E_NON200]) {
		printf(" (");
		for (int s = 0, first = 1; s < 600; s++)
			if (c->c.non200[s]) {
				printf("%s%s%d: %ld", first ? "" : ", ", s ? "" : "unparsable ", s, c->c.non200[s]);
				first = 0;
			}
		printf(")");
	}
	printf(", %ld closed before the opening frame, %ld other%s%s.\n", c->c.errs[E_CLOSED], c->c.errs[E_OTHER],
	       c->c.first_other_errno ? ": " : "", c->c.first_other_errno ? strerror(c->c.first_other_errno) : "");
	if (c->c.non200[429])
		printf("429 is the per-address cap: start herald with --per-address-limit 0 or spread --sources.\n");
	printf("Listen queue over the opens: ListenOverflows +%lld, ListenDrops +%lld (whole namespace).\n", r->dovf,
	       r->ddrop);
	if (r->missing_total || r->failed_events)
		printf("MISSING: %ld reader-events never arrived; %ld publishes failed.\n", r->missing_total,
		       r->failed_events);
	if (r->closed_total)
		printf("%ld readers were closed by the server after opening (%ld reset, %ld closed, %ld other).\n",
		       r->closed_total, c->c.closed_after_open[E_RESET], c->c.closed_after_open[E_CLOSED],
		       c->c.closed_after_open[E_OTHER]);
	if (!isnan(r->cpu_per_event))
		printf("Server CPU: %.1f ms per event while events flowed; RSS %ld KiB before, %ld KiB with all "
		       "open.\n",
		       r->cpu_per_event, m->rss_before, m->rss_open);
	if (!isnan(r->wait_per_event))
		printf("Server runnable but waiting for a CPU: %.1f ms per event while events flowed.\n",
		       r->wait_per_event);
	if (!isnan(r->client_cpu))
		printf("This client used %.1f %% of a core while events flowed.\n", r->client_cpu);
	if (!isnan(r->cpu_open_ms) && c->c.opened > 0)
		printf("Over the opens%s: server CPU %.0f ms (%.0f us per reader), this client %.0f ms.\n",
		       o->tls ? " (TLS handshakes included)" : "", r->cpu_open_ms,
		       r->cpu_open_ms * 1e3 / (double)c->c.opened, r->client_open_ms);
	if (r->tls->first_error[0])
		printf("First TLS error: %s.\n", r->tls->first_error);
	if (!isnan(r->ratio))
		printf("Event to all %s: p50 %s, %.1fx the kernel's floor of %s for %ld one-write fan-outs.\n", cO,
		       tool_fmt_dur(r->all_p50, b1, sizeof(b1)), r->ratio, tool_fmt_dur(m->floor_s, b2, sizeof(b2)),
		       c->c.opened);
}

/* The JSON line: every figure. */
static void print_json(const struct rep *r)
{
	const struct options *o = r->o;
	const struct run *m = r->m;
	const struct client *c = r->c;
	const struct events *ev = r->ev;
	tool_json_open(NULL, '{');
	tool_json_text("tool", "readers");
	tool_json_text("run", o->run);
	tool_json_text("server", o->server ? c->target.text : "own herald");
	tool_json_int("n", c->n);
	tool_json_int("backlog", m->backlog);
	tool_json_int("backlog_effective", m->backlog_effective);
	tool_json_int("ramp", o->ramp);
	tool_json_int("sources", o->sources ? o->sources : 1);
	tool_json_text("publish", o->mercure ? "mercure" : o->publish ? "post" : "insert");
	tool_json_bool("tls", o->tls);
	tool_json_int("opened", c->c.opened);
	tool_json_int("not_opened", c->n - c->c.opened);
	tool_json_int("event_to_all_n", c->c.opened); /* the readers "all" means below */
	tool_json_num("open_ms", m->open_s * 1e3);
	tool_json_num("open_p50_ms", r->open_p50 * 1e3);
	tool_json_num("open_p99_ms", r->open_p99 * 1e3);
	tool_json_int("open_errors", m->open_errors);
	tool_json_num("cpu_open_ms", r->cpu_open_ms);
	tool_json_num("client_cpu_open_ms", r->client_open_ms);
	tool_json_open("errors", '{');
	for (int k = 0; k < E_KINDS; k++)
		tool_json_int(ERR_NAMES[k], c->c.errs[k]);
	tool_json_close();
	tool_json_open("non200_status", '{');
	for (int s = 0; s < 600; s++)
		if (c->c.non200[s]) {
			char key[16];
			snprintf(key, sizeof(key), "%d", s);
			tool_json_int(key, c->c.non200[s]);
		}
	tool_json_close();
	tool_json_int("closed_after_open", r->closed_total);
	tool_json_int("still_open", m->still_open);
	tool_json_int("listen_overflows", r->dovf);
	tool_json_int("listen_drops", r->ddrop);
	tool_json_int("pid", m->pid);
	tool_json_int("threads_before", m->threads_before);
	tool_json_int("threads_open", m->threads_open);
	tool_json_int("threads_max", m->threads_max);
	tool_json_int("rss_before_kb", m->rss_before);
	tool_json_int("rss_open_kb", m->rss_open);
	tool_json_num("rss_per_reader_kb", r->rss_per_reader);
	tool_json_num("cpu_events_pct", r->cpu_ev);
	tool_json_num("cpu_idle_pct", r->cpu_idle);
	tool_json_num("cpu_ms_per_event", r->cpu_per_event);
	tool_json_num("wait_ms_per_event", r->wait_per_event);
	tool_json_num("client_cpu_events_pct", r->client_cpu);
	tool_json_int("events_published", ev->published);
	tool_json_int("events_failed", r->failed_events);
	tool_json_int("missing_total", r->missing_total);
	tool_json_open("events", '[');
	for (long k = 0; k < ev->k; k++) {
		tool_json_open(NULL, '{');
		tool_json_int("seq", k + 1);
		tool_json_int("id", ev->id[k]);
		tool_json_int("received", ev->got[k]);
		tool_json_int("missing", r->fig[k].missing);
		tool_json_num("min_ms", r->fig[k].min * 1e3);
		tool_json_num("p50_ms", r->fig[k].p50 * 1e3);
		tool_json_num("p99_ms", r->fig[k].p99 * 1e3);
		tool_json_num("max_ms", r->fig[k].max * 1e3);
		tool_json_num("publish_ms", ev->t1[k] ? ms(ev->t1[k] - ev->t0[k]) : NAN);
		tool_json_close();
	}
	tool_json_close();
	tool_json_num("event_to_all_min_ms", r->all_min * 1e3);
	tool_json_num("event_to_all_p50_ms", r->all_p50 * 1e3);
	tool_json_num("event_to_all_max_ms", r->all_max * 1e3);
	tool_json_num("floor_ms", m->floor_s * 1e3);
	tool_json_num("floor_ratio", r->ratio);
	tool_json_int("herald_exit", m->herald_exit);
	tool_json_bool("interrupted", r->interrupted);
	tool_json_close();
}

/* Print the table, the per-event table, the notes and the JSON line (and the
 * CSV); returns the exit status. */
int report(const struct options *o, const struct run *m, const struct client *c, const struct events *ev,
	   const struct tls *tls, int interrupted)
{
	struct rep r = { .o = o, .m = m, .c = c, .ev = ev, .tls = tls, .interrupted = interrupted };
	event_figures(&r);
	server_figures(&r);
	print_table(&r);
	print_per_event(&r);
	print_notes(&r);
	print_json(&r);
	if (o->csv)
		write_csv(c, ev, o->csv);
	if (o->opens_csv)
		write_opens_csv(c, o->opens_csv);
	free(r.fig);
	return (c->c.opened < c->n || r.missing_total > 0 || r.failed_events > 0 || interrupted) ? 1 : 0;
}
