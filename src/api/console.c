/* SPDX-License-Identifier: BSD-2-Clause */
/* console.c: the console page's responses. The page never changes while
 * herald runs, so each of its four responses (GET or HEAD, keep-alive or
 * close) is formatted once, on first use, and kept: a request then costs
 * one reference to a shared chunk, like an event frame. */
#include "api/console.h"

#include "common/chunk.h"
#include "http/http.h"

/* The page is static, so inline script and style are all it runs; every
 * request goes to its own origin (the stream, metrics, publishing), and it
 * may not be framed (clickjacking its publish form) nor submit a form
 * anywhere. */
#define CONSOLE_HEADERS                                                                                     \
	"Cache-Control: no-cache\r\n"                                                                       \
	"X-Content-Type-Options: nosniff\r\n"                                                               \
	"Content-Security-Policy: default-src 'self'; style-src 'self' 'unsafe-inline'; script-src 'self' " \
	"'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "  \
	"frame-ancestors 'none'\r\n"                                                                        \
	"Referrer-Policy: no-referrer\r\n"

/* [head_only][keep_alive]; freed only at exit, with the process. */
static struct chunk *responses[2][2];

static struct chunk *response(bool head_only, bool keep_alive)
{
	struct chunk **slot = &responses[head_only][keep_alive];
	if (!*slot) {
		*slot = http_format_response(200, "text/html; charset=utf-8", CONSOLE_HEADERS, console_page,
					     console_page_len, keep_alive);
		/* HEAD: the same head, Content-Length included, and no body. */
		if (head_only)
			(*slot)->len -= (uint32_t)console_page_len;
	}
	return *slot;
}

void console_serve(struct conn *c, bool head_only)
{
	bool keep = conn_keep_alive(c);
	conn_respond(c, 200, chunk_ref(response(head_only, keep)), keep);
}
