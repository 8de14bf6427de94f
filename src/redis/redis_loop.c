/* SPDX-License-Identifier: BSD-2-Clause */
/* redis_loop.c: the adapter between hiredis' asynchronous API and loop.c.
 * hiredis calls addRead/delRead/addWrite/delWrite as its needs change; the
 * adapter keeps the wanted epoll events and registers the socket with the
 * loop the first time any is wanted. hiredis may free the context inside
 * redisAsyncHandleRead (the server closed the connection): cleanup then
 * only marks the adapter dead, and the readiness callback that is still
 * running frees it on its way out. */
#include "redis/redis_loop.h"

#include "common/log.h"
#include "common/loop.h"
#include "common/util.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>

struct redis_watch {
	redisAsyncContext *ac;
	struct loop *lp;
	int fd;
	uint32_t events; /* what hiredis wants now */
	bool watched;    /* registered with the loop */
	bool dead;       /* hiredis freed the context */
	bool running;    /* inside on_ready */
};

static void on_ready(void *arg, uint32_t events)
{
	struct redis_watch *w = arg;
	w->running = true;
	/* An error or hang-up is reported to whichever side is waiting; a
	 * read then finds the end of the stream and hiredis disconnects. */
	if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
		redisAsyncHandleRead(w->ac);
	if (!w->dead && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) && (w->events & EPOLLOUT))
		redisAsyncHandleWrite(w->ac);
	w->running = false;
	if (w->dead)
		free(w);
}

static void update(struct redis_watch *w, uint32_t events)
{
	if (w->dead || events == w->events)
		return;
	w->events = events;
	if (!w->watched) {
		if (loop_watch(w->lp, w->fd, events, on_ready, w) < 0) {
			log_err("redis: watching the connection's socket failed");
			return;
		}
		w->watched = true;
	} else {
		loop_modify(w->lp, w->fd, events);
	}
}

static void add_read(void *arg)
{
	struct redis_watch *w = arg;
	update(w, w->events | EPOLLIN);
}

static void del_read(void *arg)
{
	struct redis_watch *w = arg;
	update(w, w->events & ~(uint32_t)EPOLLIN);
}

static void add_write(void *arg)
{
	struct redis_watch *w = arg;
	update(w, w->events | EPOLLOUT);
}

static void del_write(void *arg)
{
	struct redis_watch *w = arg;
	update(w, w->events & ~(uint32_t)EPOLLOUT);
}

static void cleanup(void *arg)
{
	struct redis_watch *w = arg;
	if (w->watched)
		loop_unwatch(w->lp, w->fd);
	w->watched = false;
	w->dead = true;
	if (!w->running)
		free(w);
}

int redis_loop_attach(redisAsyncContext *ac, struct loop *lp)
{
	if (ac->ev.data)
		return -1;
	struct redis_watch *w = xcalloc(1, sizeof(*w));
	w->ac = ac;
	w->lp = lp;
	w->fd = ac->c.fd;
	ac->ev.data = w;
	ac->ev.addRead = add_read;
	ac->ev.delRead = del_read;
	ac->ev.addWrite = add_write;
	ac->ev.delWrite = del_write;
	ac->ev.cleanup = cleanup;
	return 0;
}

redisAsyncContext *redis_loop_connect(struct loop *lp, const char *host, int port, const char *path, void *data,
				      redisConnectCallback *on_connect, redisDisconnectCallback *on_disconnect,
				      char *err, size_t errlen)
{
	redisAsyncContext *ac = path && path[0] ? redisAsyncConnectUnix(path) : redisAsyncConnect(host, port);
	if (!ac || ac->err) {
		snprintf(err, errlen, "%s", ac ? ac->errstr : "out of memory");
		if (ac)
			redisAsyncFree(ac);
		return NULL;
	}
	ac->data = data;
	redis_loop_attach(ac, lp);
	redisAsyncSetConnectCallback(ac, on_connect);
	redisAsyncSetDisconnectCallback(ac, on_disconnect);
	return ac;
}
