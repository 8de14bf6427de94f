/* SPDX-License-Identifier: BSD-2-Clause */
/* conn_fixture.h: what the unit tests of the connection layer share (one
 * copy, included by test_conn.c, test_conn_read.c and test_listener.c):
 * settings with generous timeouts and the default request limits, and a
 * hook that never asks for a body. */
#ifndef HERALD_CONN_FIXTURE_H
#define HERALD_CONN_FIXTURE_H

#include <stdbool.h>
#include <string.h>

#include "core/config.h"
#include "net/conn.h"

/* Timeouts of 10 s, so that no step of a test meets one on a busy machine;
 * the limits are herald's defaults. */
static inline void fixture_config(struct config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->header_timeout_ms = 10000;
	cfg->keepalive_timeout_ms = 10000;
	cfg->stall_timeout_ms = 10000;
	cfg->max_request_line = 8192;
	cfg->max_header_bytes = 16384;
	cfg->max_headers = 100;
	cfg->max_body = 65536;
}

static inline bool fixture_no_continue(void *owner, struct conn *c, const struct http_request *req)
{
	(void)owner, (void)c, (void)req;
	return false;
}

#endif
