/* SPDX-License-Identifier: BSD-2-Clause */
/* metrics.c: the Prometheus text page, with the process's own CPU time,
 * memory and descriptor count read from /proc/self. It makes the body
 * only: the HTTP answer around it is the router's (server/api.c). */
#include "core/metrics.h"

#include <dirent.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/procstat.h"
#include "common/util.h"

static const double bucket_bounds[HIST_BUCKETS] = { 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
						    0.01,   0.025,   0.05,   0.1,   0.25,   1.0 };

void metrics_observe(struct histogram *h, uint64_t ns)
{
	double s = (double)ns / 1e9;
	size_t i = 0;
	while (i < HIST_BUCKETS && s > bucket_bounds[i])
		i++;
	h->counts[i]++;
	h->n++;
	h->sum += s;
}

void metrics_count_response(struct metrics *m, int status)
{
	if (status >= 100 && status < (int)ARRAY_LEN(m->responses))
		m->responses[status]++;
}

void metrics_count_refusal(struct metrics *m, int status, const char *cause)
{
	/* Causes are a small, fixed set of static strings: a linear search
	 * by pointer, then by text (the same message may sit at two
	 * addresses), costs nothing next to sending the refusal. */
	for (size_t i = 0; i < m->nrefusals; i++) {
		struct refusal_count *r = &m->refusals[i];
		if (r->status == status && (r->cause == cause || strcmp(r->cause, cause) == 0)) {
			r->n++;
			return;
		}
	}
	if (m->nrefusals == METRICS_CAUSES - 1 && strcmp(cause, "other") != 0) {
		metrics_count_refusal(m, status, "other");
		return;
	}
	if (m->nrefusals < METRICS_CAUSES)
		m->refusals[m->nrefusals++] = (struct refusal_count){ status, cause, 1 };
}

static void hist_add(struct histogram *to, const struct histogram *from)
{
	for (size_t i = 0; i <= HIST_BUCKETS; i++)
		to->counts[i] += from->counts[i];
	to->n += from->n;
	to->sum += from->sum;
}

void metrics_add(struct metrics *to, const struct metrics *from)
{
	/* Every field but the refusals and the start time is a counter or a
	 * histogram: listed here, so a new one must be added here too. */
	to->connections_accepted += from->connections_accepted;
	to->accept_fd_exhausted += from->accept_fd_exhausted;
	to->requests += from->requests;
	for (size_t i = 0; i < ARRAY_LEN(to->responses); i++)
		to->responses[i] += from->responses[i];
	for (size_t i = 0; i < from->nrefusals; i++) {
		const struct refusal_count *r = &from->refusals[i];
		size_t j = 0;
		while (j < to->nrefusals &&
		       !(to->refusals[j].status == r->status &&
			 (to->refusals[j].cause == r->cause || strcmp(to->refusals[j].cause, r->cause) == 0)))
			j++;
		if (j < to->nrefusals)
			to->refusals[j].n += r->n;
		else if (j < METRICS_CAUSES)
			to->refusals[to->nrefusals++] = *r;
	}
	if (from->start_time_s && (!to->start_time_s || from->start_time_s < to->start_time_s))
		to->start_time_s = from->start_time_s;
	to->events_published += from->events_published;
	to->publish_replays += from->publish_replays;
	to->events_read += from->events_read;
	to->frames_queued += from->frames_queued;
	to->bytes_written += from->bytes_written;
	to->batched_sends += from->batched_sends;
	to->batched_sealed_sends += from->batched_sealed_sends;
	to->readers_to_catchup += from->readers_to_catchup;
	to->readers_stalled_closed += from->readers_stalled_closed;
	to->heartbeats_sent += from->heartbeats_sent;
	to->readers_rotated += from->readers_rotated;
	to->readers_expired += from->readers_expired;
	to->token_verifications += from->token_verifications;
	to->token_cache_hits += from->token_cache_hits;
	to->auth_requests += from->auth_requests;
	to->auth_cache_hits += from->auth_cache_hits;
	to->auth_joined += from->auth_joined;
	to->auth_allowed += from->auth_allowed;
	to->auth_refused += from->auth_refused;
	to->auth_failures += from->auth_failures;
	to->auth_waiting += from->auth_waiting;
	to->resets_sent += from->resets_sent;
	to->store_busy += from->store_busy;
	to->group_commits += from->group_commits;
	to->log_outages += from->log_outages;
	to->mercure_judged += from->mercure_judged;
	to->mercure_judged_shared += from->mercure_judged_shared;
	to->mercure_match_steps += from->mercure_match_steps;
	to->own_events_dropped += from->own_events_dropped;
	to->webhook_deliveries += from->webhook_deliveries;
	to->webhook_failures += from->webhook_failures;
	to->webhook_events += from->webhook_events;
	to->webhook_skipped += from->webhook_skipped;
	to->webhook_lag += from->webhook_lag;
	to->webhook_in_flight += from->webhook_in_flight;
	for (size_t i = 0; i < METRICS_H2_ENDS; i++)
		to->http2_sessions_ended[i] += from->http2_sessions_ended[i];
	to->http2_round_sends += from->http2_round_sends;
	to->http2_round_streams += from->http2_round_streams;
	hist_add(&to->publish_seconds, &from->publish_seconds);
	hist_add(&to->commit_seconds, &from->commit_seconds);
	hist_add(&to->fanout_seconds, &from->fanout_seconds);
	hist_add(&to->flush_seconds, &from->flush_seconds);
	hist_add(&to->checkpoint_seconds, &from->checkpoint_seconds);
	hist_add(&to->catchup_seconds, &from->catchup_seconds);
	hist_add(&to->loop_pass_seconds, &from->loop_pass_seconds);
	to->loop_stalls += from->loop_stalls;
}

struct self_sample {
	double cpu_seconds;
	long rss_bytes;
	long open_fds;
};

/* The process's figures, read at most once a second: listing
 * /proc/self/fd alone takes milliseconds at tens of thousands of
 * descriptors, and /metrics must not let a client make the loop do that
 * at will. */
#define SAMPLE_EVERY_NS 1000000000ull

static long count_fds(void)
{
	/* Linux 6.2 and later report the count as the folder's size. */
	struct stat sb;
	if (stat("/proc/self/fd", &sb) == 0 && sb.st_size > 0)
		return (long)sb.st_size;
	long n = 0;
	DIR *d = opendir("/proc/self/fd");
	if (d) {
		while (readdir(d))
			n++;
		closedir(d);
		n -= 3; /* ".", ".." and the directory's own fd */
	}
	return n;
}

static void sample_self(struct self_sample *s)
{
	static struct self_sample cached;
	static uint64_t cached_at;
	uint64_t now = clock_mono_ns();
	if (cached_at && now - cached_at < SAMPLE_EVERY_NS) {
		*s = cached;
		return;
	}
	memset(s, 0, sizeof(*s));
	struct procstat ps;
	if (procstat_read(0, &ps) == 0) {
		s->cpu_seconds = (double)(ps.utime + ps.stime) / (double)procstat_clk_tck();
		s->rss_bytes = ps.rss_pages * procstat_page_size();
	}
	s->open_fds = count_fds();
	cached = *s;
	cached_at = now;
}

struct out {
	char *buf;
	size_t len, cap;
};

static void append(struct out *o, const char *text, size_t n)
{
	if (o->len + n > o->cap) {
		o->cap = (o->len + n) * 2;
		o->buf = xrealloc(o->buf, o->cap);
	}
	memcpy(o->buf + o->len, text, n);
	o->len += n;
}

static void put(struct out *o, const char *name, const char *type, const char *help, double v)
{
	char line[512];
	int n = snprintf(line, sizeof(line), "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
	append(o, line, (size_t)n);
}

static void put_histogram(struct out *o, const char *name, const char *help, const struct histogram *h)
{
	char line[512];
	int n = snprintf(line, sizeof(line), "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
	append(o, line, (size_t)n);
	uint64_t cum = 0;
	for (size_t i = 0; i <= HIST_BUCKETS; i++) {
		cum += h->counts[i];
		if (i < HIST_BUCKETS)
			n = snprintf(line, sizeof(line), "%s_bucket{le=\"%g\"} %llu\n", name, bucket_bounds[i],
				     (unsigned long long)cum);
		else
			n = snprintf(line, sizeof(line), "%s_bucket{le=\"+Inf\"} %llu\n", name,
				     (unsigned long long)cum);
		append(o, line, (size_t)n);
	}
	n = snprintf(line, sizeof(line), "%s_sum %.9g\n%s_count %llu\n", name, h->sum, name, (unsigned long long)h->n);
	append(o, line, (size_t)n);
}

static void put_responses(struct out *o, const struct metrics *m)
{
	static const char head[] = "# HELP herald_responses_total Responses sent, by status code (streams count once, "
				   "as 200).\n# TYPE herald_responses_total counter\n";
	append(o, head, sizeof(head) - 1);
	for (size_t code = 100; code < ARRAY_LEN(m->responses); code++) {
		if (!m->responses[code])
			continue;
		char line[96];
		int n = snprintf(line, sizeof(line), "herald_responses_total{code=\"%zu\"} %llu\n", code,
				 (unsigned long long)m->responses[code]);
		append(o, line, (size_t)n);
	}
}

/* A label value with \, " and line breaks escaped, as the text format asks. */
static void append_label(struct out *o, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			append(o, "\\", 1);
		if (*v == '\n')
			append(o, "\\n", 2);
		else
			append(o, v, 1);
	}
}

static void put_refusals(struct out *o, const struct metrics *m)
{
	static const char head[] = "# HELP herald_refusals_total Requests refused, by status and cause.\n"
				   "# TYPE herald_refusals_total counter\n";
	append(o, head, sizeof(head) - 1);
	for (size_t i = 0; i < m->nrefusals; i++) {
		char line[64];
		int n = snprintf(line, sizeof(line), "herald_refusals_total{code=\"%d\",cause=\"",
				 m->refusals[i].status);
		append(o, line, (size_t)n);
		append_label(o, m->refusals[i].cause);
		n = snprintf(line, sizeof(line), "\"} %llu\n", (unsigned long long)m->refusals[i].n);
		append(o, line, (size_t)n);
	}
}

static void put_http2_ended(struct out *o, const struct metrics *m)
{
	static const char head[] = "# HELP herald_http2_sessions_ended_total HTTP/2 sessions herald ended for a "
				   "protocol error or a limit, by cause.\n"
				   "# TYPE herald_http2_sessions_ended_total counter\n";
	static const char *const causes[METRICS_H2_ENDS] = {
		[METRICS_H2_PROTOCOL_ERROR] = "protocol_error",
		[METRICS_H2_FLOOD] = "flood",
		[METRICS_H2_STALLED] = "stall_timeout",
		[METRICS_H2_PING_UNANSWERED] = "ping_unanswered",
		[METRICS_H2_HEADER_SIZE] = "header_size",
		[METRICS_H2_INCOMPLETE] = "incomplete_requests",
	};
	append(o, head, sizeof(head) - 1);
	for (size_t i = 0; i < METRICS_H2_ENDS; i++) {
		char line[128];
		int n = snprintf(line, sizeof(line), "herald_http2_sessions_ended_total{cause=\"%s\"} %llu\n",
				 causes[i], (unsigned long long)m->http2_sessions_ended[i]);
		append(o, line, (size_t)n);
	}
}

/* herald_workers and one line per worker for its pid and its readers. */
static void put_workers(struct out *o, const struct metrics_gauges *g)
{
	char line[160];
	put(o, "herald_workers", "gauge", "Worker processes in the group.", (double)g->workers);
	static const char *const heads[] = {
		"# HELP herald_worker_readers Open event streams per worker.\n# TYPE herald_worker_readers gauge\n",
		"# HELP herald_worker_pid Process id of each running worker (0 while restarting).\n"
		"# TYPE herald_worker_pid gauge\n",
	};
	for (size_t h = 0; h < ARRAY_LEN(heads); h++) {
		append(o, heads[h], strlen(heads[h]));
		for (unsigned i = 0; i < g->workers; i++) {
			int n = h == 0 ? snprintf(line, sizeof(line), "herald_worker_readers{worker=\"%u\"} %zu\n", i,
						  g->worker_readers[i])
				       : snprintf(line, sizeof(line), "herald_worker_pid{worker=\"%u\"} %d\n", i,
						  g->worker_pids[i]);
			append(o, line, (size_t)n);
		}
	}
}

char *metrics_render(const struct metrics *m, const struct metrics_gauges *g, size_t *len)
{
	struct self_sample s;
	struct out o = { 0 };
	sample_self(&s);
	put(&o, "herald_readers", "gauge", "Open event streams.", (double)g->readers);
	put(&o, "herald_readers_catching_up", "gauge", "Streams being fed from the store.",
	    (double)g->readers_catching_up);
	put(&o, "herald_connections", "gauge",
	    "Open client connections (sockets: an HTTP/2 connection is one, whatever its streams).",
	    (double)g->connections);
	put(&o, "herald_http2_sessions", "gauge", "Open HTTP/2 connections.", (double)g->http2_sessions);
	put(&o, "herald_http2_streams", "gauge", "Open HTTP/2 streams being served (event streams and requests).",
	    (double)g->http2_streams);
	put(&o, "herald_last_event_id", "gauge", "Newest event id fanned out.", (double)g->last_event_id);
	put(&o, "herald_publish_pending", "gauge", "Publishes waiting for commit.", (double)g->publish_pending);
	if (g->workers)
		put_workers(&o, g);
	put(&o, "herald_connections_accepted_total", "counter", "Connections accepted.",
	    (double)m->connections_accepted);
	put(&o, "herald_accept_fd_exhausted_total", "counter", "Accepts that met EMFILE/ENFILE.",
	    (double)m->accept_fd_exhausted);
	put(&o, "herald_requests_total", "counter", "Requests parsed.", (double)m->requests);
	put_responses(&o, m);
	put_refusals(&o, m);
	put(&o, "herald_events_published_total", "counter", "Events committed through POST.",
	    (double)m->events_published);
	put(&o, "herald_publish_replays_total", "counter",
	    "Publishes answered with the event their Idempotency-Key stored before.", (double)m->publish_replays);
	put(&o, "herald_group_commits_total", "counter", "Transactions that committed publishes.",
	    (double)m->group_commits);
	put(&o, "herald_events_read_total", "counter", "Events read from the store for fan-out.",
	    (double)m->events_read);
	put(&o, "herald_frames_queued_total", "counter", "Event frames queued to readers.", (double)m->frames_queued);
	put(&o, "herald_bytes_written_total", "counter", "Bytes written to clients.", (double)m->bytes_written);
	put(&o, "herald_batched_sends_total", "counter",
	    "Stream round and opening sends made through one io_uring submission with others (io_uring = on).",
	    (double)m->batched_sends);
	put(&o, "herald_batched_tls_sends_total", "counter",
	    "Of those, sends of TLS records herald sealed itself (parked TLS streams).",
	    (double)m->batched_sealed_sends);
	put(&o, "herald_readers_to_catchup_total", "counter", "Readers moved from live to catch-up.",
	    (double)m->readers_to_catchup);
	put(&o, "herald_readers_stalled_closed_total", "counter", "Readers closed for not reading.",
	    (double)m->readers_stalled_closed);
	put(&o, "herald_heartbeats_total", "counter", "Heartbeat comments sent to readers sent nothing for an interval.",
	    (double)m->heartbeats_sent);
	put(&o, "herald_readers_rotated_total", "counter", "Streams ended by rotate_after.",
	    (double)m->readers_rotated);
	put(&o, "herald_resets_sent_total", "counter", "Reset events sent.", (double)m->resets_sent);
	put(&o, "herald_readers_expired_total", "counter", "Streams ended because their token expired.",
	    (double)m->readers_expired);
	put(&o, "herald_token_verifications_total", "counter", "Signatures of signed tokens checked.",
	    (double)m->token_verifications);
	put(&o, "herald_token_cache_hits_total", "counter",
	    "Signed tokens answered from the cache of verified ones (no signature check).",
	    (double)m->token_cache_hits);
	put(&o, "herald_auth_requests_total", "counter", "Requests sent to the application's auth_request URL.",
	    (double)m->auth_requests);
	put(&o, "herald_auth_cache_hits_total", "counter", "Stream opens answered from the cache of auth_request answers.",
	    (double)m->auth_cache_hits);
	put(&o, "herald_auth_joined_total", "counter",
	    "Stream opens that waited on an auth_request request already out for the same credentials and topics.",
	    (double)m->auth_joined);
	put(&o, "herald_auth_allowed_total", "counter", "Stream opens auth_request allowed.", (double)m->auth_allowed);
	put(&o, "herald_auth_refused_total", "counter", "Stream opens auth_request refused (401, 403).",
	    (double)m->auth_refused);
	put(&o, "herald_auth_failures_total", "counter",
	    "Stream opens refused for want of a usable auth_request answer (timeout, connection, status, body, "
	    "too many waiting).",
	    (double)m->auth_failures);
	put(&o, "herald_auth_waiting", "gauge", "Stream opens waiting for the application's answer.",
	    (double)m->auth_waiting);
	put(&o, "herald_store_busy_total", "counter", "Store calls that met another writer's lock.",
	    (double)m->store_busy);
	put(&o, "herald_mercure_judged_total", "counter",
	    "Mercure subscriptions' matchers run on an update's topics (one verdict each).", (double)m->mercure_judged);
	put(&o, "herald_mercure_judged_shared_total", "counter",
	    "Mercure verdicts taken from a subscription with the same matchers instead of run again.",
	    (double)m->mercure_judged_shared);
	put(&o, "herald_mercure_match_steps_total", "counter",
	    "Steps of URL pattern matching in those runs (at most width + 1 per topic byte).",
	    (double)m->mercure_match_steps);
	put(&o, "herald_log_available", "gauge",
	    "1 while the event log can be read and written (0: Redis unreachable).", g->log_available ? 1.0 : 0.0);
	put(&o, "herald_log_outages_total", "counter", "Times the connection to the event log (Redis) was lost.",
	    (double)m->log_outages);
	put(&o, "herald_own_events_dropped_total", "counter",
	    "herald's own events (presence joins and leaves, Mercure subscription events) never stored: "
	    "given up after a minute of failed appends, or dropped for room while the log failed.",
	    (double)m->own_events_dropped);
	put(&o, "herald_webhook_deliveries_total", "counter", "Webhook requests the application answered 2xx.",
	    (double)m->webhook_deliveries);
	put(&o, "herald_webhook_failures_total", "counter",
	    "Webhook attempts that failed (no answer in time, refused, not 2xx); each is tried again.",
	    (double)m->webhook_failures);
	put(&o, "herald_webhook_events_total", "counter", "Events delivered by webhook (acknowledged 2xx).",
	    (double)m->webhook_events);
	put(&o, "herald_webhook_skipped_total", "counter",
	    "Log ids retention removed before the webhook cursor reached them (skipped, never delivered).",
	    (double)m->webhook_skipped);
	put(&o, "herald_webhook_lag", "gauge", "The newest event id less the webhook cursor (0 when not delivering).",
	    (double)m->webhook_lag);
	put(&o, "herald_webhook_in_flight", "gauge", "Events in the webhook request out now.",
	    (double)m->webhook_in_flight);
	put_http2_ended(&o, m);
	put(&o, "herald_http2_round_sends_total", "counter",
	    "Sends of an HTTP/2 connection's DATA frames for all its streams in a stream round (one per connection "
	    "per round).",
	    (double)m->http2_round_sends);
	put(&o, "herald_http2_round_streams_total", "counter",
	    "HTTP/2 streams' writes carried by those sends (each stream's frames of one round).",
	    (double)m->http2_round_streams);
	put_histogram(&o, "herald_publish_seconds", "From a parsed POST to its queued 201 (group commit included).",
		      &m->publish_seconds);
	put_histogram(&o, "herald_store_commit_seconds", "One group commit's transaction.", &m->commit_seconds);
	put_histogram(&o, "herald_fanout_seconds", "Reading new rows and queueing them to every matching reader.",
		      &m->fanout_seconds);
	put_histogram(&o, "herald_flush_seconds", "One loop pass's writes to every connection with output.",
		      &m->flush_seconds);
	put_histogram(&o, "herald_checkpoint_seconds", "Copying the WAL into the database (at pauses in publishing).",
		      &m->checkpoint_seconds);
	put_histogram(&o, "herald_catchup_read_seconds",
		      "One catch-up read of the store for one reader (bounded by the read budget).",
		      &m->catchup_seconds);
	put_histogram(&o, "herald_loop_pass_seconds",
		      "One pass of the event loop: every callback it ran, its wait for events not counted.",
		      &m->loop_pass_seconds);
	put(&o, "herald_loop_stalls_total", "counter", "Loop passes that took loop_stall_warn or longer.",
	    (double)m->loop_stalls);
	put(&o, "process_cpu_seconds_total", "counter", "User and system CPU time.", s.cpu_seconds);
	put(&o, "process_start_time_seconds", "gauge", "Start time of the process since the Unix epoch.",
	    (double)m->start_time_s);
	put(&o, "process_resident_memory_bytes", "gauge", "Resident set size.", (double)s.rss_bytes);
	put(&o, "process_open_fds", "gauge", "Open file descriptors.", (double)s.open_fds);
	*len = o.len;
	return o.buf;
}
