/* SPDX-License-Identifier: BSD-2-Clause */
/* http_client.h: herald's one outbound HTTP(S) client. Requests run on
 * libcurl's multi interface driven by herald's own loop (loop.c watches
 * curl's sockets and runs its one timer), so a request never blocks the
 * loop and no thread is started per request (name resolution is libcurl's
 * own resolver: Debian's libcurl resolves on a helper thread of its own,
 * one per lookup while it runs, never on the loop).
 *
 * Every request is bounded: a time for the whole exchange and a cap on the
 * response body (refused past it, never truncated). Only http and https,
 * no redirects, no proxy from the environment; TLS peers are verified
 * (certificate and host name) against the system's CAs or a CA file.
 *
 * curl_global_init runs once in main (http_client_global_init) before any
 * client exists, and curl_global_cleanup at exit. */
#ifndef HERALD_HTTP_CLIENT_H
#define HERALD_HTTP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct loop;
struct http_client;
struct http_call;

#define HTTP_CLIENT_TIMEOUT_MS 10000        /* a request's default time, whole */
#define HTTP_CLIENT_MAX_RESPONSE (1u << 20) /* a response body's default cap */
#define HTTP_CLIENT_HOST_CONNECTIONS 32     /* connections to one host at once, by default */

/* One request; the client copies what it needs before http_client_request
 * returns, so every pointer here may go right after. */
struct http_client_request {
	const char *method;         /* "GET" (NULL), "POST", ... */
	const char *url;            /* http:// or https:// */
	const char *const *headers; /* "Name: value" lines, nheaders of them */
	size_t nheaders;
	const void *body; /* sent as is (NULL: none) */
	size_t body_len;
	uint64_t timeout_ms; /* the whole exchange; 0: HTTP_CLIENT_TIMEOUT_MS */
	size_t max_response; /* the body's cap in bytes; 0: HTTP_CLIENT_MAX_RESPONSE */
	const char *ca_file; /* PEM CAs to verify the server with; NULL: the client's (http_client_set_ca_file) */
};

/* What came back. status is the HTTP status (any, 2xx or not), or a
 * negative errno when no complete response arrived:
 *   -ETIMEDOUT     the time ran out (connecting, sending or reading)
 *   -EMSGSIZE      the body was over max_response (the rest not read)
 *   -ECONNREFUSED  the server refused the connection
 *   -EHOSTUNREACH  the name did not resolve or the host is unreachable
 *   -EPROTO        TLS failed (an unverified peer too), or HTTP was broken
 *   -EIO           anything else
 * error is a one-line reason (libcurl's words) when status < 0, else "".
 * body is NUL-terminated (not counted in len); all of it, and the header
 * values http_response_header returns, are valid during the callback only. */
struct http_client_response {
	int status;
	const char *error;
	const char *body;
	size_t len;
	void *impl; /* the client's own, for http_response_header */
};

/* Called exactly once per request that was not cancelled, from the loop
 * (never from inside http_client_request). It may start new requests and
 * cancel other ones; it must not free the client. */
typedef void (*http_done_fn)(void *arg, const struct http_client_response *r);

/* Once per process, before any client (main). Returns 0 or -1. */
int http_client_global_init(void);
void http_client_global_cleanup(void);

/* A client on loop lp (which outlives it). NULL if libcurl fails. */
struct http_client *http_client_new(struct loop *lp);

/* The PEM CAs requests verify their servers with when the request names
 * none (NULL or "": the system's). Copied; requests already out keep
 * theirs. */
void http_client_set_ca_file(struct http_client *c, const char *path);

/* At most n connections to one host at once (0: no limit; by default
 * HTTP_CLIENT_HOST_CONNECTIONS), so a burst of requests does not become a
 * burst of connections to the application: the rest wait for one, their
 * time running. Connections are kept for reuse between requests. */
void http_client_set_host_connections(struct http_client *c, long n);

/* Cancel every request still out (no callbacks) and free the client. */
void http_client_free(struct http_client *c);

/* Start req; done(arg, response) is called once it ends. Returns the
 * request's handle, valid until done is called or it is cancelled; or
 * NULL with a one-line reason in err (a URL that is not http or https,
 * libcurl out of memory), and done is not called. */
struct http_call *http_client_request(struct http_client *c, const struct http_client_request *req, http_done_fn done,
				      void *arg, char *err, size_t errlen);

/* Stop call at once: its connection is closed and done is never called
 * (the caller is going away and has nothing to be told). */
void http_client_cancel(struct http_call *call);

/* How many requests are out. */
size_t http_client_pending(const struct http_client *c);

/* The value of the response's header name (any case), its last line if it
 * came more than once; NULL if absent. Valid during the callback only. */
const char *http_response_header(const struct http_client_response *r, const char *name);

/* Whether url may be fetched: http:// or https:// with a host, no user
 * or password; http only to a loopback host (127.0.0.0/8, [::1],
 * localhost) when https_only_remote is set. Pure. Returns NULL, or why not
 * (a static sentence). */
const char *http_client_url_check(const char *url, bool https_only_remote);

/* The seconds of a Cache-Control header's max-age, or -1 when it has none
 * (or no-store / no-cache, which leave nothing to keep). Pure. */
int64_t http_cache_max_age(const char *cache_control);

#endif
