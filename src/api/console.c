/* SPDX-License-Identifier: BSD-2-Clause */
/* console.c: the console page's response: a head of fixed fields and the
 * page's bytes, which the build embeds and which never change while
 * herald runs (the connection copies them into its HTTP/1.1 text, or
 * sends them as DATA on HTTP/2). */
#include "api/console.h"

#include "http/http.h"

/* The page is static, so inline script and style are all it runs; every
 * request goes to its own origin (the stream, metrics, publishing), and it
 * may not be framed (clickjacking its publish form) nor submit a form
 * anywhere. */
static const char csp[] = "default-src 'self'; style-src 'self' 'unsafe-inline'; script-src 'self' "
			  "'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; "
			  "form-action 'none'; frame-ancestors 'none'";

void console_serve(struct conn *c)
{
	struct http_head h;
	http_head_response(&h, 200, "text/html; charset=utf-8", console_page_len, conn_keep_alive(c));
	http_head_add(&h, "Cache-Control", "no-cache");
	http_head_add(&h, "X-Content-Type-Options", "nosniff");
	http_head_add(&h, "Content-Security-Policy", csp);
	http_head_add(&h, "Referrer-Policy", "no-referrer");
	conn_respond(c, &h, console_page, console_page_len);
	http_head_free(&h);
}
