/* SPDX-License-Identifier: BSD-2-Clause */
/* console.h: the console page at GET /: one static page (src/api/console.html,
 * embedded by the build) that follows the event stream, shows the
 * server's figures and publishes, all from the browser. */
#ifndef HERALD_CONSOLE_H
#define HERALD_CONSOLE_H

#include <stdbool.h>
#include <stddef.h>

#include "net/conn.h"

/* The page's bytes, generated from src/api/console.html at build time. */
extern const char console_page[];
extern const size_t console_page_len;

/* Answer c with the page: 200 text/html with no-cache, nosniff and a
 * Content-Security-Policy that lets it reach only its own origin (to HEAD,
 * the connection sends the head alone). */
void console_serve(struct conn *c);

#endif
