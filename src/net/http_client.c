/* SPDX-License-Identifier: BSD-2-Clause */
/* http_client.c: outbound HTTP(S) requests on libcurl's multi interface,
 * driven by loop.c (http_client.h). libcurl says through its socket
 * callback which sockets it wants watched for what, and through its timer
 * callback when it must next be called; the loop watches those sockets and
 * runs that one timer, and each wake-up is handed back to
 * curl_multi_socket_action. Finished transfers are collected after each
 * such call and answered.
 *
 * Ownership: the client owns its multi handle, its calls (each an easy
 * handle, its header list, and the body read so far) and a small record
 * per watched socket (given to libcurl with curl_multi_assign, freed when
 * libcurl says the socket is removed). A call is freed after its callback
 * returns, or when cancelled. */
#include "net/http_client.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>

#include "common/list.h"
#include "common/log.h"
#include "common/loop.h"
#include "common/util.h"

struct http_client {
	struct loop *lp;
	CURLM *multi;
	struct loop_timer timer; /* libcurl's one timeout */
	struct list calls;       /* out now */
	size_t pending;
	char *ca_file; /* NULL: the system's CAs */
};

struct http_call {
	struct list_node node;
	struct http_client *c;
	CURL *easy;
	struct curl_slist *headers;
	char *buf; /* the body so far, NUL-terminated */
	size_t len, cap, max;
	bool too_big;
	http_done_fn done;
	void *arg;
	char errbuf[CURL_ERROR_SIZE];
};

/* A socket libcurl asked to be watched. */
struct http_sock {
	struct http_client *c;
	int fd;
};

int http_client_global_init(void)
{
	return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

void http_client_global_cleanup(void)
{
	curl_global_cleanup();
}

static void call_free(struct http_call *call)
{
	curl_easy_cleanup(call->easy);
	curl_slist_free_all(call->headers);
	free(call->buf);
	free(call);
}

static int errno_of(struct http_call *call, CURLcode rc)
{
	if (call->too_big || rc == CURLE_FILESIZE_EXCEEDED)
		return -EMSGSIZE;
	switch (rc) {
	case CURLE_OPERATION_TIMEDOUT:
		return -ETIMEDOUT;
	case CURLE_COULDNT_RESOLVE_HOST:
		return -EHOSTUNREACH;
	case CURLE_COULDNT_CONNECT: {
		long os = 0;
		curl_easy_getinfo(call->easy, CURLINFO_OS_ERRNO, &os);
		return os == EHOSTUNREACH || os == ENETUNREACH ? -EHOSTUNREACH : -ECONNREFUSED;
	}
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_WEIRD_SERVER_REPLY:
	case CURLE_GOT_NOTHING:
	case CURLE_UNSUPPORTED_PROTOCOL:
	case CURLE_HTTP2:
		return -EPROTO;
	default:
		return -EIO;
	}
}

/* Answer every transfer libcurl has finished. A callback may start
 * requests (added to the multi handle, run by its next wake-up) or cancel
 * others (removing a handle drops its message from the queue). */
static void collect(struct http_client *c)
{
	CURLMsg *msg;
	int left;
	while ((msg = curl_multi_info_read(c->multi, &left))) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		CURLcode rc = msg->data.result;
		struct http_call *call = NULL;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&call);
		curl_multi_remove_handle(c->multi, call->easy);
		list_unlink(&c->calls, &call->node);
		c->pending--;
		struct http_client_response r = { .body = call->buf ? call->buf : "",
						  .len = call->len,
						  .impl = call->easy };
		if (rc == CURLE_OK) {
			long status = 0;
			curl_easy_getinfo(call->easy, CURLINFO_RESPONSE_CODE, &status);
			r.status = (int)status;
			r.error = "";
		} else {
			r.status = errno_of(call, rc);
			r.error = call->too_big     ? "the response is larger than its cap"
				  : call->errbuf[0] ? call->errbuf
						    : curl_easy_strerror(rc);
			r.body = "";
			r.len = 0;
		}
		call->done(call->arg, &r);
		call_free(call);
	}
}

static void on_io(void *arg, uint32_t events)
{
	struct http_sock *hs = arg;
	struct http_client *c = hs->c; /* hs may be freed inside socket_action */
	int flags = 0, running;
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
		flags |= CURL_CSELECT_IN;
	if (events & (EPOLLOUT | EPOLLERR))
		flags |= CURL_CSELECT_OUT;
	if (events & EPOLLERR)
		flags |= CURL_CSELECT_ERR;
	loop_label(c->lp, "outbound HTTP", NULL);
	curl_multi_socket_action(c->multi, hs->fd, flags, &running);
	collect(c);
}

static void on_timer(void *arg)
{
	struct http_client *c = arg;
	int running;
	loop_label(c->lp, "outbound HTTP (timer)", NULL);
	curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	collect(c);
}

static int socket_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
	struct http_client *c = userp;
	struct http_sock *hs = socketp;
	(void)easy;
	if (what == CURL_POLL_REMOVE) {
		loop_unwatch(c->lp, s);
		free(hs);
		curl_multi_assign(c->multi, s, NULL);
		return 0;
	}
	if (!hs) {
		hs = xcalloc(1, sizeof(*hs));
		hs->c = c;
		hs->fd = s;
		curl_multi_assign(c->multi, s, hs);
	}
	uint32_t ev = ((what & CURL_POLL_IN) ? EPOLLIN : 0) | ((what & CURL_POLL_OUT) ? EPOLLOUT : 0);
	if (loop_watch(c->lp, s, ev, on_io, hs) < 0) {
		log_err("outbound HTTP: watching a socket failed");
		return -1; /* libcurl fails the transfer */
	}
	return 0;
}

/* libcurl's timeout: -1 none, else run it after ms (0: on the next pass,
 * never from inside this callback, which libcurl forbids). */
static int timer_cb(CURLM *multi, long ms, void *userp)
{
	struct http_client *c = userp;
	(void)multi;
	if (ms < 0)
		loop_timer_stop(c->lp, &c->timer);
	else
		loop_timer_start(c->lp, &c->timer, (uint64_t)ms, on_timer, c);
	return 0;
}

struct http_client *http_client_new(struct loop *lp)
{
	CURLM *multi = curl_multi_init();
	if (!multi)
		return NULL;
	struct http_client *c = xcalloc(1, sizeof(*c));
	c->lp = lp;
	c->multi = multi;
	curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
	curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, c);
	curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, timer_cb);
	curl_multi_setopt(multi, CURLMOPT_TIMERDATA, c);
	http_client_set_host_connections(c, HTTP_CLIENT_HOST_CONNECTIONS);
	return c;
}

void http_client_cancel(struct http_call *call)
{
	struct http_client *c = call->c;
	curl_multi_remove_handle(c->multi, call->easy);
	list_unlink(&c->calls, &call->node);
	c->pending--;
	call_free(call);
}

void http_client_free(struct http_client *c)
{
	if (!c)
		return;
	while (c->calls.first)
		http_client_cancel(list_item(c->calls.first, struct http_call, node));
	/* Closes the connections libcurl kept for reuse (each socket's
	 * removal comes through socket_cb, which frees its record). */
	curl_multi_cleanup(c->multi);
	loop_timer_stop(c->lp, &c->timer);
	free(c->ca_file);
	free(c);
}

void http_client_set_host_connections(struct http_client *c, long n)
{
	curl_multi_setopt(c->multi, CURLMOPT_MAX_HOST_CONNECTIONS, n);
}

void http_client_set_ca_file(struct http_client *c, const char *path)
{
	free(c->ca_file);
	c->ca_file = path && path[0] ? xstrdup(path) : NULL;
}

size_t http_client_pending(const struct http_client *c)
{
	return c ? c->pending : 0;
}

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
	struct http_call *call = arg;
	size_t len = size * n;
	if (len > call->max - call->len) {
		call->too_big = true;
		return 0; /* libcurl ends the transfer with a write error */
	}
	if (call->len + len + 1 > call->cap) {
		size_t cap = call->cap ? call->cap : 4096;
		while (cap < call->len + len + 1)
			cap *= 2;
		call->buf = xrealloc(call->buf, cap);
		call->cap = cap;
	}
	memcpy(call->buf + call->len, data, len);
	call->len += len;
	call->buf[call->len] = '\0';
	return len;
}

static bool has_scheme(const char *url)
{
	return strncasecmp(url, "http://", 7) == 0 || strncasecmp(url, "https://", 8) == 0;
}

struct http_call *http_client_request(struct http_client *c, const struct http_client_request *req, http_done_fn done,
				      void *arg, char *err, size_t errlen)
{
	if (!req->url || !has_scheme(req->url)) {
		snprintf(err, errlen, "only http:// and https:// URLs are fetched");
		return NULL;
	}
	CURL *e = curl_easy_init();
	if (!e) {
		snprintf(err, errlen, "libcurl could not make a request");
		return NULL;
	}
	struct http_call *call = xcalloc(1, sizeof(*call));
	call->c = c;
	call->easy = e;
	call->done = done;
	call->arg = arg;
	call->max = req->max_response ? req->max_response : HTTP_CLIENT_MAX_RESPONSE;
	uint64_t timeout = req->timeout_ms ? req->timeout_ms : HTTP_CLIENT_TIMEOUT_MS;
	const char *method = req->method ? req->method : "GET";
	bool ok = true;
	for (size_t i = 0; i < req->nheaders && ok; i++) {
		struct curl_slist *l = curl_slist_append(call->headers, req->headers[i]);
		ok = l != NULL;
		if (l)
			call->headers = l;
	}
#define SET(opt, val) (ok = ok && curl_easy_setopt(e, opt, val) == CURLE_OK)
	SET(CURLOPT_URL, req->url);
	SET(CURLOPT_PRIVATE, (void *)call);
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_PROTOCOLS_STR, "http,https");
	SET(CURLOPT_FOLLOWLOCATION, 0L);
	SET(CURLOPT_PROXY, ""); /* never one from the environment */
	SET(CURLOPT_SSL_VERIFYPEER, 1L);
	SET(CURLOPT_SSL_VERIFYHOST, 2L);
	const char *ca = req->ca_file && req->ca_file[0] ? req->ca_file : c->ca_file;
	if (ca)
		SET(CURLOPT_CAINFO, ca);
	SET(CURLOPT_TIMEOUT_MS, (long)timeout);
	SET(CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)call->max);
	SET(CURLOPT_WRITEFUNCTION, on_body);
	SET(CURLOPT_WRITEDATA, (void *)call);
	SET(CURLOPT_ERRORBUFFER, call->errbuf);
	SET(CURLOPT_USERAGENT, "herald/" HERALD_VERSION);
	if (call->headers)
		SET(CURLOPT_HTTPHEADER, call->headers);
	if (req->body) {
		SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
		SET(CURLOPT_COPYPOSTFIELDS, (const char *)req->body);
	}
	if (strcmp(method, "HEAD") == 0)
		SET(CURLOPT_NOBODY, 1L);
	else if (strcmp(method, "GET") != 0 || req->body)
		SET(CURLOPT_CUSTOMREQUEST, method);
#undef SET
	if (!ok || curl_multi_add_handle(c->multi, e) != CURLM_OK) {
		snprintf(err, errlen, "libcurl refused the request's settings");
		call_free(call);
		return NULL;
	}
	list_push(&c->calls, &call->node);
	c->pending++;
	return call;
}

const char *http_response_header(const struct http_client_response *r, const char *name)
{
	struct curl_header *h;
	CURL *e = r->impl;
	if (!e || curl_easy_header(e, name, 0, CURLH_HEADER, -1, &h) != CURLHE_OK)
		return NULL;
	if (h->amount > 1 && curl_easy_header(e, name, h->amount - 1, CURLH_HEADER, -1, &h) != CURLHE_OK)
		return NULL;
	return h->value;
}

/* ---- pure helpers --------------------------------------------------- */

static bool loopback_host(const char *host, size_t n)
{
	char text[64];
	if (n == 9 && strncasecmp(host, "localhost", 9) == 0)
		return true;
	if (n >= sizeof(text))
		return false;
	if (host[0] == '[') {
		if (n < 2 || host[n - 1] != ']')
			return false;
		struct in6_addr a6;
		memcpy(text, host + 1, n - 2);
		text[n - 2] = '\0';
		return inet_pton(AF_INET6, text, &a6) == 1 && memcmp(&a6, &in6addr_loopback, sizeof(a6)) == 0;
	}
	struct in_addr a4;
	memcpy(text, host, n);
	text[n] = '\0';
	return inet_pton(AF_INET, text, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127;
}

const char *http_client_url_check(const char *url, bool https_only_remote)
{
	bool https = strncasecmp(url, "https://", 8) == 0;
	if (!https && strncasecmp(url, "http://", 7) != 0)
		return "not an https:// URL";
	for (const char *p = url; *p; p++) {
		if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
			return "the URL holds a space, a control character or a byte outside ASCII";
	}
	const char *auth = url + (https ? 8 : 7);
	size_t alen = strcspn(auth, "/?#");
	if (memchr(auth, '@', alen))
		return "the URL holds a user name or password";
	size_t hlen;
	if (auth[0] == '[') {
		const char *close = memchr(auth, ']', alen);
		if (!close)
			return "the URL's IPv6 address has no closing ]";
		hlen = (size_t)(close - auth) + 1;
	} else {
		const char *colon = memchr(auth, ':', alen);
		hlen = colon ? (size_t)(colon - auth) : alen;
	}
	if (hlen == 0)
		return "the URL has no host";
	if (hlen < alen) {
		if (auth[hlen] != ':' || hlen + 1 == alen || alen - hlen - 1 > 5)
			return "the URL's port is not a number from 1 to 65535";
		long port = 0;
		for (size_t i = hlen + 1; i < alen; i++) {
			if (auth[i] < '0' || auth[i] > '9')
				return "the URL's port is not a number from 1 to 65535";
			port = port * 10 + (auth[i] - '0');
		}
		if (port < 1 || port > 65535)
			return "the URL's port is not a number from 1 to 65535";
	}
	if (!https && https_only_remote && !loopback_host(auth, hlen))
		return "http:// is taken only to a loopback address (127.0.0.0/8, [::1], localhost); use https://";
	return NULL;
}

int64_t http_cache_max_age(const char *cc)
{
	if (!cc)
		return -1;
	const char *p = cc;
	while (*p) {
		p += strspn(p, " \t,");
		size_t n = strcspn(p, "=, \t");
		if (n == 7 && strncasecmp(p, "max-age", 7) == 0 && p[n] == '=') {
			const char *v = p + n + 1;
			bool quoted = *v == '"';
			v += quoted;
			if (*v < '0' || *v > '9')
				return -1;
			int64_t s = 0;
			for (; *v >= '0' && *v <= '9'; v++)
				s = s > INT64_C(1) << 40 ? s : s * 10 + (*v - '0');
			return s;
		}
		p += strcspn(p, ",");
	}
	return -1;
}
