/* SPDX-License-Identifier: BSD-2-Clause */
/* redis_loop.h: hiredis' asynchronous connections driven by herald's event
 * loop (loop.c): hiredis says when it wants to read or write, the loop
 * watches the socket and hands readiness back. No thread, no timer of
 * hiredis' own (the caller keeps its own timeouts). */
#ifndef HERALD_REDIS_LOOP_H
#define HERALD_REDIS_LOOP_H

#include <hiredis/async.h>

struct loop;

/* Drive ac from lp until hiredis frees it (the adapter's state goes with
 * it). Returns 0, or -1 if ac already has an adapter. */
int redis_loop_attach(redisAsyncContext *ac, struct loop *lp);

/* Start a connection to the unix socket path (when non-empty) or to
 * host:port, driven by lp, with ac->data and the connect and disconnect
 * callbacks set. Returns it, or NULL with a short reason in err (nothing to
 * free). */
redisAsyncContext *redis_loop_connect(struct loop *lp, const char *host, int port, const char *path, void *data,
				      redisConnectCallback *on_connect, redisDisconnectCallback *on_disconnect,
				      char *err, size_t errlen);

#endif
