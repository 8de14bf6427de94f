/* SPDX-License-Identifier: BSD-2-Clause */
/* metrics.h: counters kept by every module, and the Prometheus text served
 * at /metrics, with the process's own CPU and memory read from /proc. */
#ifndef HERALD_METRICS_H
#define HERALD_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/chunk.h"

/* Upper bounds of the histogram buckets, in seconds (a last one is +Inf). */
#define HIST_BUCKETS 12

#define METRICS_CAUSES 96 /* distinct refusal causes counted (more are counted as "other") */

struct histogram {
	uint64_t counts[HIST_BUCKETS + 1];
	uint64_t n;
	double sum;
};

/* Why herald ended an HTTP/2 session itself (the client's own close, an
 * idle session and a graceful stop are not counted). */
enum metrics_h2_end {
	METRICS_H2_PROTOCOL_ERROR,  /* nghttp2 found a protocol error or passed one of its limits */
	METRICS_H2_FLOOD,           /* PING, SETTINGS or other frames faster than allowed */
	METRICS_H2_STALLED,         /* output not taken within stall_timeout */
	METRICS_H2_PING_UNANSWERED, /* a silent client's PING not answered within stall_timeout */
	METRICS_H2_HEADER_SIZE,     /* a header block decoded past twice the header limit */
	METRICS_H2_INCOMPLETE,      /* incomplete requests: streams opened on refusal, a header block left unfinished */
	METRICS_H2_ENDS
};

struct metrics {
	uint64_t connections_accepted;
	uint64_t accept_fd_exhausted; /* EMFILE/ENFILE at accept */
	uint64_t requests;
	uint64_t responses[600]; /* by status code */
	struct refusal_count {
		int status;
		const char *cause; /* the refusal's static message */
		uint64_t n;
	} refusals[METRICS_CAUSES];
	size_t nrefusals;
	int64_t start_time_s;      /* Unix time the process started serving */
	uint64_t events_published; /* committed through POST */
	uint64_t publish_replays;  /* answered with an event an Idempotency-Key stored before */
	uint64_t events_read;      /* rows read from the store by the hub */
	uint64_t frames_queued;    /* event frames queued to readers */
	uint64_t bytes_written;
	uint64_t batched_sends;        /* stream round and opening sends queued in an io_uring submission */
	uint64_t batched_sealed_sends; /* of them, TLS records sealed by herald (parked streams) */
	uint64_t readers_to_catchup; /* moves from live to catch-up */
	uint64_t readers_stalled_closed;
	uint64_t heartbeats_sent; /* heartbeat comments queued to idle readers */
	uint64_t readers_rotated;
	uint64_t readers_expired;     /* streams ended because their token expired */
	uint64_t token_verifications; /* signatures of signed tokens checked */
	uint64_t token_cache_hits;    /* signed tokens answered from the cache of verified ones */
	/* auth_request (api/auth_hook.h): requests sent to the application;
	 * opens answered from the cache and opens that joined a request out;
	 * opens it allowed, refused (401/403) and that got no usable answer
	 * (502/503: time, connection, status, body, too many waiting); opens
	 * waiting for an answer now (a gauge). */
	uint64_t auth_requests, auth_cache_hits, auth_joined, auth_allowed, auth_refused, auth_failures;
	uint64_t auth_waiting;
	uint64_t resets_sent;
	uint64_t store_busy; /* calls that met another writer's lock */
	uint64_t group_commits;
	uint64_t log_outages;                /* the event log's server (Redis) lost */
	uint64_t mercure_judged;             /* a Mercure subscription's matchers run on an update's topics */
	uint64_t mercure_judged_shared;      /* verdicts taken from another subscription of the same matchers */
	uint64_t mercure_match_steps;        /* URL pattern steps (urlpattern_steps) those runs took */
	uint64_t own_events_dropped;         /* herald's own rows (event_batch.h) never stored */
	/* Webhooks (webhook.h): requests answered 2xx, attempts that failed,
	 * events delivered and skipped (log ids retention removed before
	 * delivery); and, as gauges kept here so that a group sums them (only
	 * the lease holder's are not 0), the cursor's lag behind the newest
	 * id and the events of the request out. */
	uint64_t webhook_deliveries, webhook_failures, webhook_events, webhook_skipped;
	int64_t webhook_lag, webhook_in_flight;
	struct histogram publish_seconds;    /* POST parsed until its 201 is queued */
	struct histogram commit_seconds;     /* one group commit's transaction */
	struct histogram fanout_seconds;     /* reading new rows and queueing them to readers */
	struct histogram flush_seconds;      /* one pass's writes to every connection with output */
	struct histogram checkpoint_seconds; /* copying the WAL into the database */
	struct histogram catchup_seconds;    /* one catch-up read of the store for one reader */
	struct histogram loop_pass_seconds;  /* one pass of the event loop, its wait for events not counted */
	uint64_t loop_stalls;                /* passes that took loop_stall_warn or longer */
	/* HTTP/2 sessions herald ended, by enum metrics_h2_end. */
	uint64_t http2_sessions_ended[METRICS_H2_ENDS];
	/* Stream rounds' gathered sends of HTTP/2 sessions (one per session
	 * per round) and the stream writes they carried. */
	uint64_t http2_round_sends;
	uint64_t http2_round_streams;
};

/* Count a response with this status. */
void metrics_count_response(struct metrics *m, int status);

/* Count a refusal by status and cause (a static message string). */
void metrics_count_refusal(struct metrics *m, int status, const char *cause);

/* Add one observation of ns nanoseconds to h. */
void metrics_observe(struct histogram *h, uint64_t ns);

/* Add every counter and histogram of from into to (refusals merged by
 * status and cause; start_time_s the earliest). */
void metrics_add(struct metrics *to, const struct metrics *from);

/* Figures of the moment that belong to other modules, given to the page. */
struct metrics_gauges {
	size_t readers, readers_catching_up;
	size_t connections; /* sockets: an HTTP/2 session is one, whatever its streams */
	size_t http2_sessions, http2_streams;
	int64_t last_event_id;
	size_t publish_pending;
	bool log_available; /* store_available */
	/* A group of workers (0: one process): herald_workers, and each
	 * worker's pid and readers. */
	unsigned workers;
	const int *worker_pids;
	const size_t *worker_readers;
};

/* Render the metrics page's body (Prometheus text format 0.0.4): a
 * malloc'd text of *len bytes, not NUL-terminated, that the caller frees. */
char *metrics_render(const struct metrics *m, const struct metrics_gauges *g, size_t *len);

#endif
