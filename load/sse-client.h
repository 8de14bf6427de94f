/* SPDX-License-Identifier: BSD-2-Clause */
/* sse-client.h: the epoll client of Server-Sent Events streams that
 * load/readers, load/topics and load/rate share, part of the tools' library
 * ($(BUILD)/load/libtool.a). N readers on one thread, so the client is never
 * the bottleneck:
 *
 *   sse-client.c         connects, the stream request, reading and frame
 *                        scanning (struct client, one struct reader each);
 *                        records into struct events, or hands each frame to
 *                        the tool's callbacks
 *   sse-client-tls.c     OpenSSL: the client context, a certificate for a
 *                        herald started by the tool, reader I/O through SSL
 *                        (struct tls)
 *   sse-client-events.c  the run's events: when each reader had each one,
 *                        and ids seen before the publisher knew them
 *                        (struct events)
 *
 * The tool owns every struct here: it allocates struct tls and struct events
 * (or leaves them NULL), and the client keeps pointers to them, never
 * copies. The client calls upward only through the callbacks a tool sets in
 * struct client (other, request_for, saw, frame). */
#ifndef HERALD_LOAD_SSE_CLIENT_H
#define HERALD_LOAD_SSE_CLIENT_H

#include "tool.h"

#include <stdint.h>
#include <sys/epoll.h>
#include <sys/types.h>

#include <openssl/ssl.h>

/* ---- the reader ------------------------------------------------------------ */

enum rstate { R_NEW, R_RETRY, R_CONNECTING, R_HANDSHAKE, R_HEAD, R_OPENING, R_OPEN, R_DEAD, R_DOWN };
enum chunk_state { CH_SIZE, CH_SIZE_LINE, CH_DATA, CH_DATA_END, CH_DONE };
enum err_kind { E_REFUSED, E_RESET, E_TIMEOUT, E_NON200, E_CLOSED, E_OTHER, E_KINDS };

#define PART_MAX 28

/* One reader: its socket and where it is in its stream (sse-client.c's;
 * sse-client-tls.c does its I/O, a tool's report reads its times). */
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
	 * another with no gap and no repeat (ids_check; load/readers
	 * totals them). */
	uint8_t again; /* reconnecting after its stream ended (client->resume) */
	uint32_t seen, gaps, dups;
	int64_t first_id, last_id;
};

/* ---- sse-client-events.c: the run's events --------------------------------- */

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

/* ---- sse-client-tls.c: OpenSSL ---------------------------------------------- */

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

/* ---- sse-client.c: the epoll client --------------------------------------- */

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
	long heartbeats; /* ": hb" lines read by every reader together */
	int64_t t_last_reopen;
};

struct client {
	int ep;
	long n;
	struct reader *r;
	long next_connect; /* readers not started yet begin here */
	struct tool_addr target;
	long sources; /* spread source addresses over 127.0.0.1 .. 127.0.0.K */
	/* The first source address (host order) when not 127.0.0.1: set,
	 * every reader binds to it (plus i % sources), so client processes
	 * side by side each have their own ports. 0 by default. */
	uint32_t source_first;
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
	 * recording into ev: reader i, the frame's id (-1 for an id that is
	 * not a number), the number that starts
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

/* Reader r read an event with this id: count it, and a gap or a repeat when
 * it does not follow the last one it read. */
void ids_check(struct reader *r, int64_t id);

#endif
