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
 *   readers-opens.c    --opens: the same opens against herald and against
 *                      load/minimal-sse, alternating, in one run
 *   readers-restart.c  --restart: a reconnect storm across a restart of
 *                      herald while events keep coming, every reader's ids
 *                      checked for gaps and duplicates
 *   readers-soak.c     --soak: readers, a steady event rate and a client
 *                      connecting and leaving in a loop, for minutes, with
 *                      herald's RSS and CPU sampled
 *   readers-steady.c   what --restart and --soak share: publishing at a
 *                      rate by INSERT, and the per-reader id check
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
	long port; /* of the herald started here; -1 unset (the kernel's choice) */
	int unix_listener, post, no_floor, keep;
	long events;
	double interval, idle, open_timeout, event_timeout;
	long ramp, sources;
	const char *path, *token, *csv, *opens_csv, *run;
	int tls, insecure;
	const char *cacert, *tls_cert, *tls_key;
	long opens;     /* --opens R: rounds against herald and minimal-sse */
	int restart;    /* --restart */
	double soak;    /* --soak S: its length in seconds, 0 = no soak */
	long rate;      /* --rate: events per second for --restart and --soak */
	double before;  /* --restart: publishing before the restart, and */
	double after;   /* after every reader resumed */
	double sample;  /* --soak: seconds between RSS samples */
	double warmup;  /* --soak: samples before this are the warm-up */
	long churn;     /* --soak: connects a second of the churning client */
	int no_last_id; /* --restart: reconnect without Last-Event-ID */
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

enum rstate { R_NEW, R_RETRY, R_CONNECTING, R_HANDSHAKE, R_HEAD, R_OPENING, R_OPEN, R_DEAD, R_DOWN };
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
	int64_t frame_id, frame_stamp; /* the frame being read, for client->frame */
	/* With client->track: the ids this reader read, checked to follow one
	 * another with no gap and no repeat (readers-steady.c's check). */
	uint8_t again; /* reconnecting after its stream ended (client->resume) */
	uint32_t seen, gaps, dups;
	int64_t first_id, last_id;
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
	/* With client->resume: streams that ended, readers waiting to
	 * reconnect, reconnects that opened, and why reconnects failed. */
	long ended, down, reopened;
	long reconnect_errs[E_KINDS];
	int64_t t_last_reopen;
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
	int track;      /* check each reader's ids (struct reader's seen..last_id) */
	int resume;     /* a stream that ends waits (R_DOWN) to be reconnected with
		     * Last-Event-ID by client_reconnect(), instead of failing */
	int no_last_id; /* reconnect without Last-Event-ID (to show the check) */
	/* Called when the socket watched with tag UINT64_MAX is readable. */
	void (*other)(void *arg);
	void *other_arg;
	/* When set: reader i's stream request (else `request` for all), and
	 * every id reader i reads (else recorded in ev, which may be NULL). */
	const char *(*request_for)(void *arg, long i, size_t *len);
	void (*saw)(void *arg, long i, int64_t id, int64_t t);
	void *hook_arg;
	/* When set, called at the end of each frame with an id instead of
	 * recording into ev: reader i, the frame's id, the number that starts
	 * its first data line (0 when none; load/rate puts the send time
	 * there), and the time of the read that ended it. */
	void (*frame)(void *arg, long i, int64_t id, int64_t stamp, int64_t now);
	void *frame_arg;
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
/* With c->resume: start reconnecting up to 256 readers whose streams ended
 * (R_DOWN), each sending Last-Event-ID with the last id it read. Returns
 * how many are still waiting. */
long client_reconnect(struct client *c);

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

/* ---- readers-steady.c: publishing at a rate, and the id check -------------- */

/* Events published by INSERT at a steady rate, on schedule from t0. */
struct steady {
	struct publisher *pub; /* its database must be open (pub_db_open) */
	long rate;             /* events per second */
	int64_t t0;
	long published, failed;
	int64_t first_id, last_id; /* of the events this run published */
	double insert_max_s;       /* the slowest INSERT (a restart holds the lock) */
};

/* Start publishing through p at rate events a second from now. */
void steady_start(struct steady *s, struct publisher *p, long rate);
/* Publish what is due by now (at most a second's worth at once); returns the
 * milliseconds until the next is due. */
int steady_tick(struct steady *s);

/* Reader r read an event with this id: count it, and a gap or a repeat when
 * it does not follow the last one it read. */
/* A client of o->n readers whose ids are checked (client->track), its
 * records in ev (set up here, and freed again when NULL is returned). */
struct client *tracked_client_new(const struct options *o, const struct tool_addr *target, const char *request,
				  struct tls *tls, struct events *ev);
void ids_check(struct reader *r, int64_t id);

/* The check over every reader that opened: each must have read exactly
 * first..last, in order, once each. */
struct id_verdict {
	long readers;     /* readers that opened */
	long complete;    /* read every id first..last once, in order */
	long with_gaps;   /* readers that missed some */
	long with_dups;   /* readers that read some twice */
	long behind;      /* readers whose last id is not last (or never read one) */
	long long gaps;   /* ids missed, over all readers */
	long long dups;   /* ids repeated, over all readers */
	int64_t min_last; /* the oldest last id a reader read (0: one read none) */
};
void ids_verdict(const struct client *c, int64_t first, int64_t last, struct id_verdict *v);
/* The verdict's JSON members (inside an open object). */
void ids_json(const struct id_verdict *v);

/* ---- readers-opens.c, readers-restart.c, readers-soak.c: the other modes ---- */

/* Each runs its whole experiment against the herald readers.c started (h,
 * reached at target, the stream request in request), prints its table and
 * JSON line, and returns the exit status: 0 when nothing was lost and every
 * reader opened, 1 otherwise. */
int opens_run(const struct options *o, struct tool_herald *h, const struct tool_addr *target, const char *request,
	      volatile int *stop);
int restart_run(const struct options *o, struct tool_herald *h, const struct tool_addr *target, const char *request,
		struct publisher *pub, volatile int *stop);
int soak_run(const struct options *o, struct tool_herald *h, const struct tool_addr *target, const char *request,
	     struct publisher *pub, volatile int *stop);

/* ---- readers-report.c ------------------------------------------------------------ */

/* Print the table, the per-event table, the notes and the JSON line (and the
 * CSV); returns the exit status. */
int report(const struct options *o, const struct run *m, const struct client *c, const struct events *ev,
	   const struct tls *tls, int interrupted);

#endif
