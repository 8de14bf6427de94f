/* SPDX-License-Identifier: BSD-2-Clause */
/* store_redis.h: the Redis Streams backend of store.h (see store_redis.c),
 * chosen when the configuration names a redis_url, and used only through
 * store.c's table. */
#ifndef HERALD_STORE_REDIS_H
#define HERALD_STORE_REDIS_H

struct store_backend;

/* The backend table (store_backend.h). Its open connects at once (the
 * function library loaded, the newest id read) and fails with a reason if
 * the server does not answer; later losses of the connection are ridden
 * out. */
extern const struct store_backend store_redis_backend;

/* The Lua source of the function library herald loads (FUNCTION LOAD). */
extern const char store_redis_function[];

#endif
