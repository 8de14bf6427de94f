/* readers.h: what the parts of load/readers share: the reader record and its
 * state machine, the options, the run's counters and per-event records, and
 * the few functions one part calls in another.
 *
 *   readers.c          command line, setting up, the phases (open, events,
 *                      idle), the floor, main; owns opt and the event records
 *   readers-net.c      the epoll client: connects, the stream request, reading
 *                      and frame scanning, matching ids to publishes; owns the
 *                      readers and their counters
 *   readers-tls.c      OpenSSL: the client context, a certificate for the
 *                      herald started here, reader I/O through SSL
 *   readers-publish.c  publishing by INSERT or by POST on a keep-alive socket
 *   readers-report.c   the markdown tables, notes, JSON line and CSV
 *
 * One thread: every global here is touched only from the epoll loop or the
 * phases around it. */
#ifndef HERALD_LOAD_READERS_H
#define HERALD_LOAD_READERS_H

#include "proc.h"

#include <sqlite3.h>
#include <stdint.h>
#include <sys/types.h>

#include <openssl/ssl.h>

enum rstate { R_NEW, R_RETRY, R_CONNECTING, R_HANDSHAKE, R_HEAD, R_OPENING, R_OPEN, R_DEAD };
enum chunk_state { CH_SIZE, CH_SIZE_LINE, CH_DATA, CH_DATA_END, CH_DONE };
enum err_kind { E_REFUSED, E_RESET, E_TIMEOUT, E_NON200, E_CLOSED, E_OTHER, E_KINDS };

#define PART_MAX 28
#define PEND_MAX 4

struct reader {
	int fd;
	uint8_t state;
	uint8_t chunked;
	uint8_t cstate;
	uint8_t midline; /* inside a line whose start is in part[] */
	uint8_t partlen;
	uint8_t npend;
	char part[PART_MAX];
	uint32_t chunk_left;
	uint32_t headlen;
	char *head; /* header bytes so far, when they came in pieces */
	SSL *ssl;   /* with --tls */
	int64_t t_start, t_open;
	/* ids seen before the publisher knew them (POST answers can come after
	 * the event itself); resolved when the id becomes known. */
	int64_t pend_id[PEND_MAX];
	int64_t pend_t[PEND_MAX];
};

struct options {
	long n;
	const char *server;
	long pid;
	const char *db;
	const char *publish;
	long backlog;
	int unix_listener, post, no_floor, keep;
	long events;
	double interval, idle, open_timeout, event_timeout;
	long ramp, sources;
	const char *path, *token, *csv, *run;
	int tls, insecure;
	const char *cacert, *tls_cert, *tls_key;
};

/* A reading of the server's CPU (and this client's) at one moment. */
struct cpu_mark {
	uint64_t ticks;
	double t;
	double self; /* this client's own CPU seconds, to show it kept up */
	int ok;
};

/* What a run measured, gathered by the phases and printed by report(). */
struct run {
	int backlog, backlog_effective;
	int threads_before, threads_open, threads_max;
	long rss_before, rss_open;
	long long ovf0, ovf1, drop0, drop1;
	double open_s;
	long open_errors, still_open;
	struct cpu_mark open_a, open_b, ev_a, ev_b, idle_a, idle_b;
	int herald_exit;
	double floor_s;
};

static inline double ms(int64_t ns)
{
	return (double)ns / 1e6;
}

/* ---- readers.c: the run ---------------------------------------------------- */

extern struct options opt;
extern volatile int stop_flag;
extern long N;                  /* readers */
extern struct tool_addr target; /* where the readers connect */
extern pid_t server_pid;        /* sampled from /proc; 0 when unknown */

/* Events. */
extern long K;
extern int64_t *recv_ns; /* N*K: when reader i had event k, 0 = not (yet) */
extern int64_t *ev_id;   /* K: the id the publisher got, 0 = not known yet */
extern int64_t *ev_t0;   /* K: just before the insert or the POST */
extern int64_t *ev_t1;   /* K: the insert returned, or the POST's answer came */
extern long *ev_got;     /* K: readers that had it */
extern int *ev_failed;   /* K: the publish itself failed */
extern long n_published; /* publishes started */

/* ---- readers-net.c: the epoll client ------------------------------------- */

extern int ep;
extern struct reader *R;
extern char request[2048]; /* the stream request, built by setup() */
extern size_t request_len;

/* Counters. */
extern long n_settled, n_open, n_opened, n_inflight;
extern long errs[E_KINDS], closed_after_open[E_KINDS];
extern int first_other_errno;
extern long non200[600]; /* by status; [0] for an unparsable status line */
extern long n_retry;
extern int64_t t_last_open;

/* Start connecting reader i (R_NEW or R_RETRY); failures are counted. */
void reader_connect(long i);
/* Fail reader r with kind k; an open reader counts as closed after open. */
void reader_fail(struct reader *r, enum err_kind k);
/* Close r's socket and free its TLS state and header bytes; no counting. */
void reader_close(struct reader *r);
/* The publisher learned event k's id: credit readers that were faster. */
void id_known(long k, int64_t id);
/* One pass: wait up to timeout_ms and handle what is ready. */
void loop_once(int timeout_ms);

/* ---- readers-tls.c: OpenSSL ------------------------------------------------ */

extern SSL_CTX *tls_ctx;          /* NULL without --tls */
extern char tls_first_error[200]; /* the first handshake or record error */
extern char tls_cert_path[400], tls_key_path[400];

/* Remember the first TLS error (OpenSSL's queue, else errno) as "what: why"
 * in tls_first_error, and clear OpenSSL's queue. */
void tls_note_error(const char *what);
/* read(2)/write(2) on r, through SSL when r has it: -1 with errno EAGAIN
 * while the socket would block, 0 at the end. */
ssize_t conn_read(struct reader *r, void *buf, size_t len);
ssize_t conn_write(struct reader *r, const void *buf, size_t len);
/* Write a fresh certificate and key into a temporary folder (their paths in
 * tls_cert_path, tls_key_path). Returns 0, or -1 after saying why. */
int make_cert(void);
/* Remove make_cert()'s folder unless --keep. */
void remove_cert(void);
/* The port of the started herald's tls: listener, from its log; 0 if none. */
int tls_port_from_log(const char *log);
/* Make tls_ctx, trusting the PEM file trust (the system's CAs when NULL).
 * Returns 0, or -1 after saying why. */
int tls_client_setup(const char *trust);

/* ---- readers-publish.c: the publisher ------------------------------------ */

extern sqlite3 *db;               /* publishing by INSERT when open */
extern char run_tag[32];          /* in each event's data, to tell runs apart */
extern struct tool_addr pub_addr; /* publishing by POST to here */
extern int pub_fd;                /* the POST connection, -1 when none */

/* Open the herald database at path for inserts; 0, or -1 after saying why. */
int db_open(const char *path);
void db_close(void);
/* Connect the POST connection and watch it in the loop; 0 or -1. */
int pub_connect(void);
/* Publish event k, by INSERT or POST; a failure marks ev_failed[k]. */
void publish(long k);
/* Read the answers to POSTs waiting on pub_fd. */
void pub_readable(void);

/* ---- readers-report.c ------------------------------------------------------ */

/* Print the table, the per-event table, the notes and the JSON line (and the
 * CSV); returns the exit status. */
int report(const struct run *m);

#endif
