/* SPDX-License-Identifier: BSD-2-Clause */
/* readers.h: the parts of load/readers and the state each one owns. Nothing
 * is shared through globals: each part's state is a struct that readers.c
 * creates and hands down explicitly, and calls go one way, down this list:
 *
 *   readers.c          command line, setting up, the phases (open, events,
 *                      idle), the floor, main; owns every struct below
 *   readers-report.c   the markdown tables, notes, JSON line and CSV; only
 *                      reads what the phases gathered
 *   readers-publish.c  publishing by INSERT or by POST on a keep-alive
 *                      socket (struct publisher); records into struct events;
 *                      with --peer, to another server's publish URL, and
 *                      with --mercure, to herald's Mercure hub, its frames
 *                      matched to events by their data line
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
 *   readers-h2c.c      --h2c: the readers as HTTP/2 streams, K on each h2c
 *                      connection (prior knowledge), on nghttp2's client
 *                      side, every stream's ids checked
 *   readers-many.c     --procs: the readers spread over several client
 *                      processes (for more than one process's open files),
 *                      each reporting per event over a pipe; herald as a
 *                      group of --workers; the heartbeats' cost while idle
 *   readers-million.c  --procs: the system's limits checked before a run
 *                      (descriptors, ports, memory), and the kernel's
 *                      memory per reader read before and after the opens
 *
 * The epoll client, its TLS and its event records are the tools' shared
 * SSE client (sse-client.h). The one upward path, the publisher's POST
 * answers arriving in the client's epoll loop, is a callback readers.c
 * registers (client->other). */
#ifndef HERALD_LOAD_READERS_H
#define HERALD_LOAD_READERS_H

#include "sse-client.h"
#include "tool.h"

#include <sqlite3.h>
#include <stdint.h>
#include <sys/types.h>

struct options {
	long n;
	const char *server;
	long pid;
	const char *db;
	const char *publish;
	const char *peer; /* --peer nchan: --server is nginx+nchan, not herald */
	int mercure;      /* --mercure: --publish is herald's Mercure hub */
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
	long procs;     /* --procs P: client processes, 0 = the one-process run */
	long workers;   /* --workers W: herald's workers (started here, or measured) */
	int h2c;               /* --h2c: the readers are HTTP/2 streams */
	long streams_per_conn; /* --streams-per-conn K: streams on each h2c connection */
	double heartbeat; /* --heartbeat S: herald's heartbeat_interval (0: its own) */
};

/* A reading of the server's CPU (and this client's) at one moment. */
struct cpu_mark {
	uint64_t ticks;
	uint64_t wait_ns; /* the server runnable but waiting for a CPU (schedstat) */
	double t;
	double self; /* this client's own CPU seconds, to show it kept up */
	int ok, wait_ok;
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

/* ---- readers-publish.c: the publisher ---------------------------------------- */

struct publisher {
	struct events *ev;
	int ep;            /* the client's epoll set, to watch fd with tag UINT64_MAX */
	const char *token; /* sent as Authorization: Bearer */
	char run_tag[32];  /* in each event's data, to tell runs apart */
	int peer;          /* POST a plain body "ID run=TAG" to a peer (--peer) */
	int mercure;       /* POST a Mercure form, data "ID run=TAG" (--mercure) */
	int64_t peer_base; /* with peer or mercure, event k's id is peer_base + k + 1 */
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
/* With p->peer or p->mercure, the client's frame callback (arg: the
 * publisher): a peer's ids, and a Mercure update's, are not herald's
 * numbers, so reader i is credited with the event whose publisher id
 * (peer_base + sequence) starts the frame's data line (stamp). */
void pub_frame(void *arg, long i, int64_t id, int64_t stamp, int64_t now);

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

/* A client of o->n readers whose ids are checked (client->track), its
 * records in ev (set up here, and freed again when NULL is returned). */
struct client *tracked_client_new(const struct options *o, const struct tool_addr *target, const char *request,
				  struct tls *tls, struct events *ev);

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

/* --procs: the whole run against the herald readers.c started (h) or a
 * running one (o->server, o->pid), publishing through pub (its database
 * open); prints its tables and JSON line. Returns 0 when every reader opened
 * and had every event once and in order, 1 otherwise. */
int many_run(const struct options *o, struct tool_herald *h, const struct tool_addr *target, const char *request,
	     struct publisher *pub, volatile int *stop);

/* --h2c: the whole run over o->n HTTP/2 streams, o->streams_per_conn on
 * each h2c connection to target, publishing through pub (its events, its
 * database open or its POST address set); stops the herald started here
 * (h), prints its table and JSON line. Returns 0 when every stream opened
 * and read every event once and in order, 1 otherwise. */
int h2c_run(const struct options *o, struct tool_herald *h, const struct tool_addr *target, struct publisher *pub,
	    volatile int *stop);

/* Run load/fanout-floor N --json (--unix when over_unix, --procs W when
 * writers > 1, --uring when uring) and return its median time to the last
 * reader in seconds, NAN when it could not run; *cpu_s (when not NULL) is
 * the writers' CPU seconds for a round, summed. */
double run_floor(long n, int over_unix, long writers, int uring, double *cpu_s);

/* --procs without --sources: a client process binds one source address per
 * this many readers of its share. Connect's search for a free port on an
 * address walks past the ports in use, so it slows as they fill: 16,700
 * readers from one address each opened at 2,700 a second, from four at
 * 20,600 (100,000 readers, six client processes). */
#define MANY_PER_SOURCE 4000

/* ---- readers-million.c --------------------------------------------------------- */

/* Check that N readers over --procs client processes and --workers fit the
 * system (fs.file-max, fs.nr_open, ulimit -n, the ephemeral ports of a
 * source address, memory). Returns 0, or -1 after naming each setting that
 * is short and the value to give it. */
int many_check_limits(const struct options *o);

struct slab_row {
	char name[48];
	long bytes; /* objects allocated times their size */
};

/* The kernel's memory at one moment. */
struct kmem {
	long slab_kb, sunreclaim_kb, avail_kb;   /* /proc/meminfo */
	long sockets, tcp_inuse, tcp_mem_pages;  /* /proc/net/sockstat, -1 unknown */
	struct slab_row *rows;                   /* /proc/slabinfo, by name */
	size_t nrows, cap;
	int slabinfo;                            /* it was readable (root) */
};

#define KMEM_TOP 6

/* What grew between two readings, per reader. */
struct kmem_delta {
	double kernel_per_reader;  /* slab plus TCP buffers */
	double slab_per_reader;
	double buffers_per_reader; /* NAN unknown */
	long sockets;
	struct slab_row top[KMEM_TOP]; /* the caches that grew most (bytes grown) */
	size_t ntop;
};

int kmem_read(struct kmem *k);
void kmem_free(struct kmem *k);
void kmem_delta(const struct kmem *a, const struct kmem *b, long readers, struct kmem_delta *d);
/* Its table (markdown), and its JSON members inside an open object. */
void kmem_print(const struct kmem_delta *d, long readers);
void kmem_json(const struct kmem_delta *d);

/* ---- readers-report.c ------------------------------------------------------------ */

/* Print the table, the per-event table, the notes and the JSON line (and the
 * CSV); returns the exit status. */
int report(const struct options *o, const struct run *m, const struct client *c, const struct events *ev,
	   const struct tls *tls, int interrupted);

#endif
