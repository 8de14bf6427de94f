/* publish.h: POST /api/events: the right to publish, the JSON body checked
 * and taken apart (with SQLite's JSON functions on a private in-memory
 * database), and group commit: every publish that arrives in one loop pass
 * is inserted in one transaction, then each is answered with its id. */
#ifndef HERALD_PUBLISH_H
#define HERALD_PUBLISH_H

#include <stdbool.h>
#include <stddef.h>

#include "conn.h"
#include "http.h"

struct server;

/* Returns 0, or -1 after logging why (SQLite could not open in memory). */
int publish_init(struct server *srv);
/* Commit what is pending (used at shutdown), then free everything. */
void publish_shutdown(struct server *srv);

/* Check what the head of a publish decides (rights, content type, length)
 * before its body is read: true when it would be taken, else false after
 * refusing it. */
bool publish_precheck(struct conn *c, const struct http_request *req);

void publish_handle(struct conn *c, const struct http_request *req, const char *body, size_t body_len);

/* c is closing while its publish waits for commit: the event is still
 * committed, but no answer is sent. */
void publish_cancel(struct conn *c);

/* Number of publishes waiting for their commit. */
size_t publish_pending(const struct server *srv);

#endif
