/* readers-report.c: what load/readers prints at the end: the markdown table,
 * the per-event table, the notes (errors by kind beside the figures, always),
 * one JSON line with every figure, and the --csv file. It only reads what the
 * phases gathered. */
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
	return (double)(b.ticks - a.ticks) / (double)proc_clk_tck() / (b.t - a.t) * 100.0;
}

/* Figures of one event over the readers that had it. */
struct ev_fig {
	double min, p50, p99, max;
	long missing;
	int failed;
};

/* The "not opened" cell: how many of the N readers never had their opening
 * frame, and why, by HTTP status and by kind of network error. */
static void fmt_not_opened(char *buf, size_t len)
{
	long count = N - n_opened;
	int o = snprintf(buf, len, "%ld", count);
	if (count <= 0)
		return;
	const char *sep = " (";
	for (int s = 0; s < 600 && o < (int)len - 40; s++)
		if (non200[s]) {
			o += snprintf(buf + o, len - (size_t)o, "%s%s%d: %ld", sep, s ? "" : "unparsable ", s,
				      non200[s]);
			sep = ", ";
		}
	for (int k = 0; k < E_KINDS && o < (int)len - 40; k++)
		if (k != E_NON200 && errs[k]) {
			o += snprintf(buf + o, len - (size_t)o, "%s%s %ld", sep, ERR_NAMES[k], errs[k]);
			sep = ", ";
		}
	if (stop_flag && o < (int)len - 40) {
		o += snprintf(buf + o, len - (size_t)o, "%sinterrupted", sep);
		sep = ", ";
	}
	if (sep[0] == ',' && o < (int)len - 1)
		snprintf(buf + o, len - (size_t)o, ")");
}

static void write_csv(const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "readers: cannot write %s: %s\n", path, strerror(errno));
		return;
	}
	fprintf(f, "reader,event,id,latency_ms\n");
	for (long i = 0; i < N; i++) {
		if (!R[i].t_open)
			continue;
		for (long k = 0; k < K; k++) {
			int64_t t = recv_ns[(size_t)i * (size_t)K + (size_t)k];
			if (t)
				fprintf(f, "%ld,%ld,%lld,%.3f\n", i, k + 1, (long long)ev_id[k], ms(t - ev_t0[k]));
			else
				fprintf(f, "%ld,%ld,%lld,\n", i, k + 1, (long long)ev_id[k]);
		}
	}
	fclose(f);
}

/* Print the table, the per-event table, the notes and the JSON line (and the
 * CSV); returns the exit status. */
int report(const struct run *m)
{
	struct ev_fig *ev = xcalloc((size_t)K, sizeof(*ev));
	double *lat = xmalloc((size_t)N * sizeof(double));
	double *to_all = xmalloc((size_t)K * sizeof(double));
	long missing_total = 0, failed_events = 0;
	size_t n_all = 0;
	for (long k = 0; k < K; k++) {
		size_t got = 0;
		for (long i = 0; i < N; i++) {
			int64_t t = recv_ns[(size_t)i * (size_t)K + (size_t)k];
			if (t)
				lat[got++] = (double)(t - ev_t0[k]) / 1e9;
		}
		tool_sort_doubles(lat, got);
		ev[k].missing = n_opened - (long)got;
		ev[k].failed = k >= n_published || ev_failed[k];
		failed_events += ev[k].failed;
		missing_total += ev[k].missing;
		ev[k].min = got ? lat[0] : NAN;
		ev[k].p50 = tool_percentile(lat, got, 50);
		ev[k].p99 = tool_percentile(lat, got, 99);
		ev[k].max = got ? lat[got - 1] : NAN;
		if (got)
			to_all[n_all++] = ev[k].max;
	}
	tool_sort_doubles(to_all, n_all);
	double all_min = n_all ? to_all[0] : NAN, all_max = n_all ? to_all[n_all - 1] : NAN;
	double all_p50 = tool_percentile(to_all, n_all, 50);
	double ratio = (!isnan(m->floor_s) && m->floor_s > 0) ? all_p50 / m->floor_s : NAN;

	size_t no = 0;
	for (long i = 0; i < N; i++)
		if (R[i].t_open)
			lat[no++] = (double)(R[i].t_open - R[i].t_start) / 1e9;
	tool_sort_doubles(lat, no);
	double open_p50 = tool_percentile(lat, no, 50), open_p99 = tool_percentile(lat, no, 99);

	double cpu_ev = cpu_pct(m->ev_a, m->ev_b), cpu_idle = cpu_pct(m->idle_a, m->idle_b);
	double client_cpu =
		m->ev_b.t > m->ev_a.t ? (m->ev_b.self - m->ev_a.self) / (m->ev_b.t - m->ev_a.t) * 100.0 : NAN;
	double cpu_open_ms = NAN,
	       client_open_ms = m->open_b.t > m->open_a.t ? (m->open_b.self - m->open_a.self) * 1e3 : NAN;
	if (m->open_a.ok && m->open_b.ok)
		cpu_open_ms = (double)(m->open_b.ticks - m->open_a.ticks) / (double)proc_clk_tck() * 1e3;
	double cpu_per_event = NAN;
	if (m->ev_a.ok && m->ev_b.ok && m->ev_b.t > m->ev_a.t)
		cpu_per_event = (double)(m->ev_b.ticks - m->ev_a.ticks) / (double)proc_clk_tck() * 1e3 / (double)K;
	double rss_per_reader = (m->rss_open >= 0 && m->rss_before >= 0 && n_opened > 0)
					? (double)(m->rss_open - m->rss_before) / (double)n_opened
					: NAN;
	long long dovf = (m->ovf0 >= 0 && m->ovf1 >= 0) ? m->ovf1 - m->ovf0 : -1;
	long long ddrop = (m->drop0 >= 0 && m->drop1 >= 0) ? m->drop1 - m->drop0 : -1;
	long closed_total = 0;
	for (int k = 0; k < E_KINDS; k++)
		closed_total += closed_after_open[k];

	/* The table. */
	char cN[32], cO[32], b1[32], b2[32], b3[32], b4[32];
	char c_backlog[48], c_open[64], c_not[200], c_thr[32], c_ev[96], c_cpu1[32], c_cpu2[32], c_rss[32], c_ratio[32];
	/* Asked for N; the event figures are over the readers that opened. */
	tool_fmt_count(N, cN, sizeof(cN));
	tool_fmt_count(n_opened, cO, sizeof(cO));
	fmt_not_opened(c_not, sizeof(c_not));
	if (m->backlog > 0 && m->backlog_effective > 0 && m->backlog_effective != m->backlog)
		snprintf(c_backlog, sizeof(c_backlog), "%d (capped to %d)", m->backlog, m->backlog_effective);
	else if (m->backlog > 0)
		snprintf(c_backlog, sizeof(c_backlog), "%d", m->backlog);
	else
		snprintf(c_backlog, sizeof(c_backlog), "?");
	if (n_opened == N)
		snprintf(c_open, sizeof(c_open), "**%s**", tool_fmt_dur(m->open_s, b1, sizeof(b1)));
	else
		snprintf(c_open, sizeof(c_open), "**%s** (%ld of %ld)", tool_fmt_dur(m->open_s, b1, sizeof(b1)),
			 n_opened, N);
	if (m->threads_open < 0)
		snprintf(c_thr, sizeof(c_thr), "n/a");
	else if (m->threads_max != m->threads_open)
		snprintf(c_thr, sizeof(c_thr), "%d (max %d)", m->threads_open, m->threads_max);
	else
		snprintf(c_thr, sizeof(c_thr), "%d", m->threads_open);
	if (n_all == 0)
		snprintf(c_ev, sizeof(c_ev), "none arrived");
	else if (missing_total || failed_events)
		snprintf(c_ev, sizeof(c_ev), "%s – %s (%ld missing)", tool_fmt_dur(all_min, b2, sizeof(b2)),
			 tool_fmt_dur(all_max, b3, sizeof(b3)), missing_total);
	else
		snprintf(c_ev, sizeof(c_ev), "%s – %s", tool_fmt_dur(all_min, b2, sizeof(b2)),
			 tool_fmt_dur(all_max, b3, sizeof(b3)));
	strcpy(c_cpu1, "n/a");
	strcpy(c_cpu2, "n/a");
	strcpy(c_rss, "n/a");
	strcpy(c_ratio, "n/a");
	if (!isnan(cpu_ev))
		snprintf(c_cpu1, sizeof(c_cpu1), "%.1f %% of a core", cpu_ev);
	if (!isnan(cpu_idle))
		snprintf(c_cpu2, sizeof(c_cpu2), "%.2f %%", cpu_idle);
	if (!isnan(rss_per_reader))
		snprintf(c_rss, sizeof(c_rss), "%.1f KiB", rss_per_reader);
	if (!isnan(ratio))
		snprintf(c_ratio, sizeof(c_ratio), "%.1fx", ratio);
	printf("| run | listen backlog | opens (%s) | not opened | threads, all open | event to all %s | CPU while "
	       "events flow | CPU idle | RSS per reader | kernel floor | vs floor |\n",
	       cN, cO);
	printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
	printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", opt.run, c_backlog, c_open, c_not, c_thr,
	       c_ev, c_cpu1, c_cpu2, c_rss, tool_fmt_dur(m->floor_s, b4, sizeof(b4)), c_ratio);

	printf("\nPer event, from just before the %s until each reader had it:\n\n", opt.publish ? "POST" : "insert");
	printf("| event | id | readers | missing | min | p50 | p99 | max (all %s) "
	       "|\n|---|---|---|---|---|---|---|---|\n",
	       cO);
	for (long k = 0; k < K; k++) {
		char m1[32], m2[32], m3[32], m4[32];
		printf("| %ld | %lld | %ld | %ld%s | %s | %s | %s | %s |\n", k + 1, (long long)ev_id[k], ev_got[k],
		       ev[k].missing, ev[k].failed ? " (publish failed)" : "", tool_fmt_dur(ev[k].min, m1, sizeof(m1)),
		       tool_fmt_dur(ev[k].p50, m2, sizeof(m2)), tool_fmt_dur(ev[k].p99, m3, sizeof(m3)),
		       tool_fmt_dur(ev[k].max, m4, sizeof(m4)));
	}

	/* Notes: the error split beside the figures, always. */
	printf("\nOpens: %ld of %ld in %s (each: p50 %s, p99 %s). Errors: %ld refused, %ld reset, %ld timeout, "
	       "%ld non-200",
	       n_opened, N, tool_fmt_dur(m->open_s, b1, sizeof(b1)), tool_fmt_dur(open_p50, b2, sizeof(b2)),
	       tool_fmt_dur(open_p99, b3, sizeof(b3)), errs[E_REFUSED], errs[E_RESET], errs[E_TIMEOUT], errs[E_NON200]);
	if (errs[E_NON200]) {
		printf(" (");
		for (int s = 0, first = 1; s < 600; s++)
			if (non200[s]) {
				printf("%s%s%d: %ld", first ? "" : ", ", s ? "" : "unparsable ", s, non200[s]);
				first = 0;
			}
		printf(")");
	}
	printf(", %ld closed before the opening frame, %ld other%s%s.\n", errs[E_CLOSED], errs[E_OTHER],
	       first_other_errno ? ": " : "", first_other_errno ? strerror(first_other_errno) : "");
	if (non200[429])
		printf("429 is the per-address cap: start herald with --per-address-limit 0 or spread --sources.\n");
	printf("Listen queue over the opens: ListenOverflows +%lld, ListenDrops +%lld (whole namespace).\n", dovf,
	       ddrop);
	if (missing_total || failed_events)
		printf("MISSING: %ld reader-events never arrived; %ld publishes failed.\n", missing_total,
		       failed_events);
	if (closed_total)
		printf("%ld readers were closed by the server after opening (%ld reset, %ld closed, %ld other).\n",
		       closed_total, closed_after_open[E_RESET], closed_after_open[E_CLOSED],
		       closed_after_open[E_OTHER]);
	if (!isnan(cpu_per_event))
		printf("Server CPU: %.1f ms per event while events flowed; RSS %ld KiB before, %ld KiB with all "
		       "open.\n",
		       cpu_per_event, m->rss_before, m->rss_open);
	if (!isnan(client_cpu))
		printf("This client used %.1f %% of a core while events flowed.\n", client_cpu);
	if (!isnan(cpu_open_ms) && n_opened > 0)
		printf("Over the opens%s: server CPU %.0f ms (%.0f us per reader), this client %.0f ms.\n",
		       opt.tls ? " (TLS handshakes included)" : "", cpu_open_ms, cpu_open_ms * 1e3 / (double)n_opened,
		       client_open_ms);
	if (tls_first_error[0])
		printf("First TLS error: %s.\n", tls_first_error);
	if (!isnan(ratio))
		printf("Event to all %s: p50 %s, %.1fx the kernel's floor of %s for %ld one-write fan-outs.\n", cO,
		       tool_fmt_dur(all_p50, b1, sizeof(b1)), ratio, tool_fmt_dur(m->floor_s, b2, sizeof(b2)),
		       n_opened);

	/* The JSON line: every figure. */
	tool_json_open(NULL, '{');
	tool_json_text("tool", "readers");
	tool_json_text("run", opt.run);
	tool_json_text("server", opt.server ? target.text : "own herald");
	tool_json_int("n", N);
	tool_json_int("backlog", m->backlog);
	tool_json_int("backlog_effective", m->backlog_effective);
	tool_json_int("ramp", opt.ramp);
	tool_json_int("sources", opt.sources ? opt.sources : 1);
	tool_json_text("publish", opt.publish ? "post" : "insert");
	tool_json_bool("tls", opt.tls);
	tool_json_int("opened", n_opened);
	tool_json_int("not_opened", N - n_opened);
	tool_json_int("event_to_all_n", n_opened); /* the readers "all" means below */
	tool_json_num("open_ms", m->open_s * 1e3);
	tool_json_num("open_p50_ms", open_p50 * 1e3);
	tool_json_num("open_p99_ms", open_p99 * 1e3);
	tool_json_int("open_errors", m->open_errors);
	tool_json_num("cpu_open_ms", cpu_open_ms);
	tool_json_num("client_cpu_open_ms", client_open_ms);
	tool_json_open("errors", '{');
	for (int k = 0; k < E_KINDS; k++)
		tool_json_int(ERR_NAMES[k], errs[k]);
	tool_json_close();
	tool_json_open("non200_status", '{');
	for (int s = 0; s < 600; s++)
		if (non200[s]) {
			char key[16];
			snprintf(key, sizeof(key), "%d", s);
			tool_json_int(key, non200[s]);
		}
	tool_json_close();
	tool_json_int("closed_after_open", closed_total);
	tool_json_int("still_open", m->still_open);
	tool_json_int("listen_overflows", dovf);
	tool_json_int("listen_drops", ddrop);
	tool_json_int("pid", server_pid);
	tool_json_int("threads_before", m->threads_before);
	tool_json_int("threads_open", m->threads_open);
	tool_json_int("threads_max", m->threads_max);
	tool_json_int("rss_before_kb", m->rss_before);
	tool_json_int("rss_open_kb", m->rss_open);
	tool_json_num("rss_per_reader_kb", rss_per_reader);
	tool_json_num("cpu_events_pct", cpu_ev);
	tool_json_num("cpu_idle_pct", cpu_idle);
	tool_json_num("cpu_ms_per_event", cpu_per_event);
	tool_json_num("client_cpu_events_pct", client_cpu);
	tool_json_int("events_published", n_published);
	tool_json_int("events_failed", failed_events);
	tool_json_int("missing_total", missing_total);
	tool_json_open("events", '[');
	for (long k = 0; k < K; k++) {
		tool_json_open(NULL, '{');
		tool_json_int("seq", k + 1);
		tool_json_int("id", ev_id[k]);
		tool_json_int("received", ev_got[k]);
		tool_json_int("missing", ev[k].missing);
		tool_json_num("min_ms", ev[k].min * 1e3);
		tool_json_num("p50_ms", ev[k].p50 * 1e3);
		tool_json_num("p99_ms", ev[k].p99 * 1e3);
		tool_json_num("max_ms", ev[k].max * 1e3);
		tool_json_num("publish_ms", ev_t1[k] ? ms(ev_t1[k] - ev_t0[k]) : NAN);
		tool_json_close();
	}
	tool_json_close();
	tool_json_num("event_to_all_min_ms", all_min * 1e3);
	tool_json_num("event_to_all_p50_ms", all_p50 * 1e3);
	tool_json_num("event_to_all_max_ms", all_max * 1e3);
	tool_json_num("floor_ms", m->floor_s * 1e3);
	tool_json_num("floor_ratio", ratio);
	tool_json_int("herald_exit", m->herald_exit);
	tool_json_bool("interrupted", stop_flag);
	tool_json_close();

	if (opt.csv)
		write_csv(opt.csv);
	free(ev);
	free(lat);
	free(to_all);
	return (n_opened < N || missing_total > 0 || failed_events > 0 || stop_flag) ? 1 : 0;
}
