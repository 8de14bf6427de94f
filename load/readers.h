/* readers.h: the parts of load/readers and the state each one owns. Nothing
 * is shared through globals: each part's state is a struct that readers.c
 * creates and hands down explicitly, and calls go one way, down this list:
 *
 *   readers.c          command line, setting up, the phases (open, events,
 *                      idle), the floor, main; owns every struct below
 *   readers-report.c   the markdown tables, notes, JSON line and CSV; only
 *                      reads what the phases gathered
 *   readers-publish.c  publishing by INSERT or by POST on a keep-alive
 *                      socket (struct publisher); records into struct events
 *   readers-net.c      the epoll client: connects, the stream request,
 *                      reading and frame scanning (struct client); records
 *                      into struct events, reads and writes through
 *                      readers-tls.c
 *   readers-tls.c      OpenSSL: the client context, a certificate for the
 *                      herald started here, reader I/O through SSL
 *                      (struct tls)
 *   readers-events.c   the run's events: when each reader had each one,
 *                      and ids seen before the publisher knew them
 *                      (struct events)
 *
 * The one upward path, the publisher's POST answers arriving in the
 * client's epoll loop, is a callback readers.c registers (client->other). */
#ifndef HERALD_LOAD_READERS_H
#define HERALD_LOAD_READERS_H

#include "tool.h"

#include <sqlite3.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/types.h>

#include <openssl/ssl.h>

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
	pid_t pid; /* the server sampled from /proc; 0 when unknown */
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

/* ---- the reader ------------------------------------------------------------ */

enum rstate { R_NEW, R_RETRY, R_CONNECTING, R_HANDSHAKE, R_HEAD, R_OPENING, R_OPEN, R_DEAD };
enum chunk_state { CH_SIZE, CH_SIZE_LINE, CH_DATA, CH_DATA_END, CH_DONE };
enum err_kind { E_REFUSED, E_RESET, E_TIMEOUT, E_NON200, E_CLOSED, E_OTHER, E_KINDS };

#define PART_MAX 28

/* One reader: its socket and where it is in its stream (readers-net.c's;
 * readers-tls.c does its I/O, the report reads its times). */
struct reader {
	int fd;
	uint8_t state;
	uint8_t chunked;
	uint8_t cstate;
	uint8_t midline; /* inside a line whose start is in part[] */
	uint8_t partlen;
	char part[PART_MAX];
	uint32_t chunk_left;
	uint32_t headlen;
	char *head; /* header bytes so far, when they came in pieces */
	SSL *ssl;   /* with --tls */
	int64_t t_start, t_open;
};

/* ---- readers-events.c: the run's events --------------------------------- */

#define PEND_MAX 4

/* Ids one reader saw before the publisher knew them (POST answers can come
 * after the event itself); resolved when the id becomes known. */
struct pending {
	int n;
	int64_t id[PEND_MAX];
	int64_t t[PEND_MAX];
};

struct events {
	long n;            /* readers */
	long k;            /* events */
	int64_t *recv_ns;  /* n*k: when reader i had event k, 0 = not (yet) */
	int64_t *id;       /* k: the id the publisher got, 0 = not known yet */
	int64_t *t0;       /* k: just before the insert or the POST */
	int64_t *t1;       /* k: the insert returned, or the POST's answer came */
	long *got;         /* k: readers that had it */
	int *failed;       /* k: the publish itself failed */
	long published;    /* publishes started */
	int64_t max_known; /* the newest id a publish got */
	struct pending *pend;
};

/* Allocate the records of k events for n readers; events_free releases. */
void events_init(struct events *e, long n, long k);
void events_free(struct events *e);
/* Reader i read a frame with this id at time t: credit the event it belongs
 * to, or keep it until the publisher learns the id; ids of other writers'
 * events are ignored. */
void events_saw(struct events *e, long i, int64_t id, int64_t t);
/* The publisher learned event k's id: credit the readers that were faster. */
void events_id_known(struct events *e, long k, int64_t id);
/* The time the last reader had event k so far (0 when none has). */
int64_t events_last_arrival(const struct events *e, long k);

/* ---- readers-tls.c: OpenSSL ---------------------------------------------- */

struct tls {
	SSL_CTX *ctx;          /* NULL without --tls */
	char first_error[200]; /* the first handshake or record error */
	char cert_path[400];   /* the pair given to the herald started here */
	char key_path[400];
	char dir[300]; /* tls_make_cert's folder, "" when none */
};

/* Remember the first TLS error (OpenSSL's queue, else errno) as "what: why"
 * in t->first_error, and clear OpenSSL's queue. */
void tls_note_error(struct tls *t, const char *what);
/* read(2)/write(2) on r, through SSL when r has it: -1 with errno EAGAIN
 * while the socket would block, 0 at the end. */
ssize_t conn_read(struct tls *t, struct reader *r, void *buf, size_t len);
ssize_t conn_write(struct tls *t, struct reader *r, const void *buf, size_t len);
/* Write a fresh certificate and key into a temporary folder (their paths in
 * t->cert_path, t->key_path). Returns 0, or -1 after saying why. */
int tls_make_cert(struct tls *t);
/* Remove tls_make_cert()'s folder unless keep is set. */
void tls_remove_cert(struct tls *t, int keep);
/* The port of the started herald's tls: listener, from its log; 0 if none. */
int tls_port_from_log(const char *log);
/* Make t->ctx: unless insecure, the server's certificate is checked against
 * trust (a PEM file; the system's CAs when NULL) and target's address.
 * Returns 0, or -1 after saying why. */
int tls_client_setup(struct tls *t, const char *trust, int insecure, const struct tool_addr *target);

/* ---- readers-net.c: the epoll client --------------------------------------- */

/* What the opens came to. */
struct counts {
	long settled, open, opened, inflight, retry;
	long errs[E_KINDS], closed_after_open[E_KINDS];
	int first_other_errno;
	long non200[600]; /* by status; [0] for an unparsable status line */
	int64_t t_last_open;
};

struct client {
	int ep;
	long n;
	struct reader *r;
	long next_connect; /* readers not started yet begin here */
	struct tool_addr target;
	long sources; /* spread source addresses over 127.0.0.1 .. 127.0.0.K */
	char request[2048];
	size_t request_len;
	struct counts c;
	struct tls *tls;
	struct events *ev;
	/* Called when the socket watched with tag UINT64_MAX is readable. */
	void (*other)(void *arg);
	void *other_arg;
	/* When set: reader i's stream request (else `request` for all), and
	 * every id reader i reads (else recorded in ev, which may be NULL). */
	const char *(*request_for)(void *arg, long i, size_t *len);
	void (*saw)(void *arg, long i, int64_t id, int64_t t);
	void *hook_arg;
	char rbuf[65536];
	struct epoll_event evbuf[4096];
};

/* A client of n readers for target sending request, its epoll set made;
 * NULL after saying why. tls and ev are kept, not copied. */
struct client *client_new(long n, const struct tool_addr *target, long sources, const char *request, struct tls *tls,
			  struct events *ev);
/* Close every reader's socket and the epoll set; the records stay for the
 * report. */
void client_close(struct client *c);
/* Close what is open and free c (NULL is fine). */
void client_free(struct client *c);
/* Start up to 256 more connects, keeping at most ramp in flight (0: no
 * cap), and retry those a full unix listener turned away. Returns whether
 * readers are left to start. */
int client_connect_more(struct client *c, long ramp);
/* Count every reader that has not opened by now as timed out. */
void client_give_up(struct client *c);
/* One pass: wait up to timeout_ms and handle what is ready. */
void client_loop_once(struct client *c, int timeout_ms);

/* ---- readers-publish.c: the publisher ---------------------------------------- */

struct publisher {
	struct events *ev;
	int ep;            /* the client's epoll set, to watch fd with tag UINT64_MAX */
	const char *token; /* sent as Authorization: Bearer */
	char run_tag[32];  /* in each event's data, to tell runs apart */
	sqlite3 *db;       /* publishing by INSERT when open */
	sqlite3_stmt *ins;
	struct tool_addr addr; /* publishing by POST to here */
	int fd;                /* the POST connection, -1 when none */
	char in[8192];
	size_t in_len;
	long waiting[64]; /* event indexes awaiting an answer, in order */
	int nwait;
};

/* A publisher recording into ev, not connected and with no database. */
void pub_init(struct publisher *p, struct events *ev, const char *token);
/* Open the herald database at path for inserts; 0, or -1 after saying why. */
int pub_db_open(struct publisher *p, const char *path);
/* Connect the POST connection and watch it in p->ep; 0 or -1. */
int pub_connect(struct publisher *p);
/* Publish event k, by INSERT or POST; a failure marks it failed. */
void publish(struct publisher *p, long k);
/* Read the answers to POSTs waiting on the connection (arg: the publisher). */
void pub_readable(void *arg);
/* Close the connection and the database. */
void pub_close(struct publisher *p);

/* ---- readers-report.c ------------------------------------------------------------ */

/* Print the table, the per-event table, the notes and the JSON line (and the
 * CSV); returns the exit status. */
int report(const struct options *o, const struct run *m, const struct client *c, const struct events *ev,
	   const struct tls *tls, int interrupted);

#endif
