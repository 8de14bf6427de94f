/* SPDX-License-Identifier: BSD-2-Clause */
/* webhook.h: webhook_url, the log's presence joins and leaves, Mercure
 * subscription events and (with webhook_publishes) every event, POSTed to
 * the application in signed JSON batches (webhook_body.h).
 *
 * The deliverer is a reader of the log with a cursor kept with the log
 * (store_lease), never a queue in memory: it reads the wanted rows after
 * the cursor (at most webhook_batch rows and about webhook_batch_bytes),
 * POSTs them as one request over the outbound client, and moves and stores
 * the cursor only after a 2xx. A failure is tried again after 1 s,
 * doubling to 60 s, with jitter, the batch read again from the log. So
 * memory is one batch, and an application that was down catches up from
 * the cursor; delivery is at least once, in id order (the application
 * drops ids it has seen).
 *
 * One deliverer at a time among every process that shares the log (the
 * workers of a group, the nodes on one Redis): the one that holds the
 * lease (LEASE_TTL_MS, renewed each second); another takes over when it
 * stops renewing. Rows retention removed before the cursor reached them
 * are skipped, counted and logged.
 *
 * Owned by the server; the store, hub and client are lent and outlive it
 * until webhook_stop; webhook_free comes after the store is closed (a
 * lease call out then has been answered). */
#ifndef HERALD_WEBHOOK_H
#define HERALD_WEBHOOK_H

#include <stdbool.h>

struct config;
struct hub;
struct http_client;
struct loop;
struct metrics;
struct store;
struct webhook;

/* A deliverer following cfg (read in place: a reload's values apply to
 * the next request); idle while webhook_url is "". Registers with the
 * hub's advance hook. */
struct webhook *webhook_new(struct loop *lp, struct store *st, struct hub *hub, struct http_client *http,
			    const struct config *cfg, struct metrics *m);

/* After a reload: start, or stop and release the lease, as webhook_url
 * now says. */
void webhook_reconfigure(struct webhook *w);

/* Stop delivering: the request out is cancelled (delivered again by the
 * next holder), the lease released with the cursor stored. Before the hub
 * and store go (NULL: nothing). */
void webhook_stop(struct webhook *w);

/* Whether no lease call of w is out (NULL: true): after webhook_stop, the
 * server's drain runs the loop until the release has been answered, so
 * it reaches a Redis that a closing connection would not flush to. */
bool webhook_settled(const struct webhook *w);

/* Free w (NULL: nothing), after webhook_stop and store_close. */
void webhook_free(struct webhook *w);

#endif
