/* SPDX-License-Identifier: BSD-2-Clause */
/* rate.h: the parts of load/rate, a sustained-rate test: a publisher that
 * sends on a fixed schedule whatever the readers do (open loop), N readers
 * on one epoll thread (the tools' SSE client, sse-client.c), and a step
 * through rates. Calls go one way, down this list:
 *
 *   rate.c         command line, the herald started here, the steps and
 *                  their sampling of the server, main
 *   rate-report.c  the markdown table, the JSON line and the CSV; only
 *                  reads what the steps gathered
 *   rate-pub.c     the open-loop publisher: POSTs over K keep-alive
 *                  connections, pipelined, each event's scheduled send time
 *                  in its data (struct rate_pub)
 *   rate-lat.c     what the readers received: a latency histogram per step
 *                  and, per reader, the ids seen, to prove none is missing,
 *                  repeated or out of order (struct rate_recv)
 *
 * The publisher's sockets are watched in the client's epoll set with the tag
 * UINT64_MAX (client->other); each reader's frames come through
 * client->frame, which rate.c points at rate_recv_frame. */
#ifndef HERALD_LOAD_RATE_H
#define HERALD_LOAD_RATE_H

#include "sse-client.h"

#define RATE_MAX_STEPS 32
#define LAT_BUCKETS 2368 /* see rate-lat.c: 64 exact, then 64 per power of two up to 2^42 us */

/* ---- rate-lat.c --------------------------------------------------------------- */

/* Latencies in microseconds, about 1.6 % apart; max exact. */
struct lat_hist {
	uint64_t count;
	uint64_t max_us;
	uint32_t b[LAT_BUCKETS];
};

void lat_add(struct lat_hist *h, uint64_t us);
/* The p-th percentile (0..100) in milliseconds (a bucket's lower bound, the
 * max for p = 100); NAN when empty. */
double lat_pct_ms(const struct lat_hist *h, double p);

/* One reader's ids so far. */
struct rate_reader {
	int64_t last_id; /* the newest id it had */
	long got;        /* events it had */
	long order_errs; /* an id not above the one before (a repeat or out of order) */
	long gaps;       /* an id more than one above the one before */
};

/* What one step's readers received. */
struct rate_step_recv {
	int64_t t0;          /* the step's first scheduled send; later stamps belong to it */
	uint64_t deliveries; /* frames carrying this step's events */
	int64_t last_arrival;
	struct lat_hist lat;
};

struct rate_recv {
	long n;
	struct rate_reader *r;
	struct rate_step_recv *step; /* RATE_MAX_STEPS */
	int nsteps;                  /* steps begun (step[nsteps-1] is the current one) */
	uint64_t foreign;            /* frames without a stamp of ours */
};

void rate_recv_init(struct rate_recv *rv, long n);
void rate_recv_free(struct rate_recv *rv);
/* Begin a step whose sends are scheduled from t0 on; returns its index. */
int rate_recv_step(struct rate_recv *rv, int64_t t0);
/* client->frame: reader i had the event with this id, sent at stamp. */
void rate_recv_frame(void *arg, long i, int64_t id, int64_t stamp, int64_t now);
/* Readers (of those open) whose newest id is below last_id. */
long rate_recv_behind(const struct rate_recv *rv, const struct client *c, int64_t last_id);

/* ---- rate-pub.c ----------------------------------------------------------------- */

struct rate_pconn {
	int fd;    /* -1 once failed */
	char *out; /* requests not yet taken by the socket */
	size_t outlen, outoff, outcap;
	char in[8192]; /* answers not yet parsed */
	size_t inlen;
	long inflight; /* requests sent, not yet answered */
};

struct rate_pub {
	struct tool_addr addr;
	int ep; /* the client's epoll set */
	int k;
	struct rate_pconn *c;
	long next; /* round robin */
	long sent, ok, http_err, net_err;
	int64_t max_id;     /* the newest id an answer gave */
	int64_t max_lag_ns; /* the latest a send left after its scheduled time */
	long max_inflight;  /* most requests unanswered at once, over all connections */
	size_t max_backlog; /* most request bytes the sockets had not taken yet */
	char host[200];
};

/* Connect k keep-alive connections to addr (an http:// address of herald)
 * and watch them in ep with the tag UINT64_MAX. Returns 0, or -1 after
 * saying why. */
int rate_pub_open(struct rate_pub *p, const struct tool_addr *addr, int k, int ep);
/* Send one event whose data is stamp, scheduled for stamp (the next
 * connection in turn; queued when its socket is full). now is the time of
 * sending, for the lag. */
void rate_pub_send(struct rate_pub *p, int64_t stamp, int64_t now);
/* Write what is queued and read what is answered, on every connection
 * (client->other, arg: the publisher). */
void rate_pub_pump(void *arg);
/* Requests not yet answered, over all connections. */
long rate_pub_unanswered(const struct rate_pub *p);
void rate_pub_close(struct rate_pub *p);

/* ---- rate.c and rate-report.c ------------------------------------------------- */

struct rate_opts {
	long n, k;
	double rates[RATE_MAX_STEPS];
	int nrates;
	double step_s, drain_s, p99_limit_ms;
	const char *csv, *run;
	int keep;
	long port; /* of the herald started here; 0: the kernel's choice */
	int tls;   /* TLS readers first, then plain ones, on the same herald */
	const char *readers; /* "plain" or "tls": the readers of the run being reported */
};

/* What one step measured. */
struct rate_step {
	double rate;  /* scheduled events per second */
	double dur_s; /* from the first scheduled send to the last */
	long sent, ok, failed;
	uint64_t deliveries;
	double deliver_s;  /* from the first send until the last delivery (or the drain's end) */
	double cpu_s;      /* server utime+stime from the first send to the end of the drain */
	double runq_s;     /* the server's time runnable but waiting for a CPU, the same window */
	double self_cpu_s; /* this client's CPU over the same */
	double wall_s;     /* the same window */
	long rss_kb_max, rss_kb_end;
	long long catchups; /* herald_readers_to_catchup_total over the step, -1 unknown */
	long lost;          /* expected deliveries never had, by the end of the run's last drain */
	uint64_t late;      /* deliveries of this step's events after its drain ended */
	long order_errs, gaps;
	long behind;       /* readers short of the newest event when the step's drain ended */
	double max_lag_ms; /* the latest a send left after its scheduled time */
	int keeps_up;
};

struct rate_run {
	pid_t pid;
	long opened;
	double open_s;
	long rss_open_kb;
	struct rate_step s[RATE_MAX_STEPS];
	int nsteps;
	double final_drain_s; /* the wait after the last step for what was still on its way */
	long final_behind;    /* readers still short of the newest event after it */
	long published;       /* publishes answered 2xx by then */
	int herald_exit;
};

/* Print the table, the notes, the JSON line (and write the CSV); returns
 * the exit status: 0 when every step lost nothing and kept order. */
int rate_report(const struct rate_opts *o, const struct rate_run *m, const struct rate_recv *rv, const struct client *c,
		int interrupted);

#endif
