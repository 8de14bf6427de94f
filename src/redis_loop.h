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

#endif
