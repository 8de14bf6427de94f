/* SPDX-License-Identifier: BSD-2-Clause */
/* store_backend.h: what a backend of the event log gives store.c, one
 * table of operations per backend, chosen once at store_open (as redis
 * chooses a ConnectionType per connection). store.c forwards each call of
 * store.h to the table with the backend's own state; nothing else calls
 * the table. A new backend is a new table and its line in store.c's list.
 *
 * Each operation means what the store.h call of the same name says, with
 * the same return codes, and is called only with a state its open
 * returned. The state belongs to the backend: open allocates it, close
 * frees it (store.c never looks inside). */
#ifndef HERALD_STORE_BACKEND_H
#define HERALD_STORE_BACKEND_H

#include "store/store.h"

struct store_backend {
	const char *kind; /* store_kind: "sqlite", "redis" */
	/* Whether cfg names this backend; store_open opens the first one in
	 * its list that says yes. */
	bool (*chosen)(const struct config *cfg);
	/* Open as store_open says: the state, or NULL with a one-line reason
	 * in err. lp and m stay valid until close. */
	void *(*open)(const struct config *cfg, struct loop *lp, struct metrics *m, char *err, size_t errlen);
	void (*watch)(void *be, const struct store_hooks *h);
	/* Optional (NULL: ignored): store_set_peers, before watch. */
	void (*set_peers)(void *be, const struct store_peers *p);
	/* Answer appends in flight (-ENOTCONN), release everything, free be. */
	void (*close)(void *be);
	/* done runs exactly once, possibly before append returns. */
	void (*append)(void *be, const struct store_new_event *evs, size_t n, store_append_cb done, void *arg);
	int (*read_range)(void *be, int64_t after, int64_t upto, size_t limit, store_row_cb cb, void *arg);
	int (*read_matching)(void *be, int64_t after, int64_t upto, size_t limit, const struct store_filter *f,
			     store_row_cb cb, void *arg, int64_t *through);
	int (*max_id)(void *be, int64_t *max_id);
	int64_t (*pruned_through)(const void *be);
	/* A backend that always has every commit (one file) returns 0 and
	 * true. */
	uint64_t (*sync_begin)(void *be);
	bool (*sync_done)(const void *be, uint64_t ticket);
	int (*prune)(void *be, int64_t max_age_s, int64_t max_count, size_t max_rows);
	bool (*available)(const void *be);
	/* Optional (NULL: store_prune_namespaces is -ENOTSUP and
	 * store_pruned_namespace is pruned_through). */
	int (*prune_namespaces)(void *be, const struct namespaces *t, const struct namespace *defaults, size_t max_rows,
				bool *more);
	int64_t (*pruned_namespace)(const void *be, int i);
	/* store_mercure_find; NULL: the backend keeps no Mercure ids. */
	void (*mercure_find)(void *be, const char *mercure_id, store_found_cb found, void *arg);
};

#endif
