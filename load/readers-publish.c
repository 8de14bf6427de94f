/* readers-publish.c: the publisher of load/readers. By INSERT into the
 * herald database (as another process would), or by POST over one keep-alive
 * connection whose answers are read in the readers' epoll loop (tag
 * UINT64_MAX), so a publish never waits for its answer. Each publish records
 * ev_t0/ev_t1 and, once known, hands the event's id to id_known(). */
#include "readers.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/time.h>
#include <unistd.h>

sqlite3 *db;
static sqlite3_stmt *ins;
char run_tag[32];

/* HTTP publisher: one keep-alive connection, answers read in the loop. */
struct tool_addr pub_addr;
int pub_fd = -1;
static char pub_in[8192];
static size_t pub_in_len;
static long pub_waiting[64]; /* event indexes awaiting an answer, in order */
static int pub_nwait;

int db_open(const char *path)
{
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
		fprintf(stderr, "readers: cannot open %s: %s\n", path, db ? sqlite3_errmsg(db) : "?");
		return -1;
	}
	sqlite3_busy_timeout(db, 5000);
	if (sqlite3_prepare_v2(db, "INSERT INTO events(type, topic, data, public) VALUES ('load', 'load', ?1, 1)", -1,
			       &ins, NULL) != SQLITE_OK) {
		fprintf(stderr, "readers: %s has no usable events table: %s\n", path, sqlite3_errmsg(db));
		return -1;
	}
	return 0;
}

void db_close(void)
{
	sqlite3_finalize(ins);
	sqlite3_close(db);
	ins = NULL;
	db = NULL;
}

int pub_connect(void)
{
	pub_fd = socket(pub_addr.family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (pub_fd < 0)
		return -1;
	struct timeval tv = { .tv_sec = 5 };
	setsockopt(pub_fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(pub_fd, (struct sockaddr *)&pub_addr.sa, pub_addr.len) != 0) {
		fprintf(stderr, "readers: cannot connect to %s to publish: %s\n", pub_addr.text, strerror(errno));
		close(pub_fd);
		pub_fd = -1;
		return -1;
	}
	pub_in_len = 0;
	pub_nwait = 0;
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = UINT64_MAX };
	epoll_ctl(ep, EPOLL_CTL_ADD, pub_fd, &ev);
	return 0;
}

static void pub_drop(void)
{
	if (pub_fd >= 0)
		close(pub_fd);
	pub_fd = -1;
	for (int j = 0; j < pub_nwait; j++) {
		ev_failed[pub_waiting[j]] = 1;
		fprintf(stderr, "readers: publish of event %ld got no answer (connection closed)\n",
			pub_waiting[j] + 1);
	}
	pub_nwait = 0;
}

/* Publish event k; ev_t0[k] is taken just before the insert or the send. */
void publish(long k)
{
	char data[128];
	snprintf(data, sizeof(data), "readers seq=%ld run=%s", k + 1, run_tag);
	n_published = k + 1;
	if (db) {
		sqlite3_bind_text(ins, 1, data, -1, SQLITE_TRANSIENT);
		ev_t0[k] = tool_now_ns();
		int rc = sqlite3_step(ins);
		ev_t1[k] = tool_now_ns();
		sqlite3_reset(ins);
		if (rc != SQLITE_DONE) {
			fprintf(stderr, "readers: insert of event %ld failed: %s\n", k + 1, sqlite3_errmsg(db));
			ev_failed[k] = 1;
			return;
		}
		id_known(k, sqlite3_last_insert_rowid(db));
		return;
	}
	char body[256], req[1024];
	int bl = snprintf(body, sizeof(body), "{\"type\":\"load\",\"topic\":\"load\",\"data\":\"%s\",\"public\":true}",
			  data);
	char auth[300] = "";
	if (opt.token)
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s\r\n", opt.token);
	int rl = snprintf(req, sizeof(req),
			  "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
			  "Content-Length: %d\r\n%s\r\n%s",
			  pub_addr.path[0] ? pub_addr.path : "/api/events",
			  pub_addr.family == AF_UNIX ? "localhost" : pub_addr.text, bl, auth, body);
	for (int attempt = 0; attempt < 2; attempt++) {
		if (pub_fd < 0 && pub_connect() != 0)
			break;
		ev_t0[k] = tool_now_ns();
		if (write(pub_fd, req, (size_t)rl) == rl) {
			if (pub_nwait < (int)(sizeof(pub_waiting) / sizeof(pub_waiting[0])))
				pub_waiting[pub_nwait++] = k;
			return;
		}
		pub_drop(); /* the server closed the idle keep-alive: reconnect once */
	}
	fprintf(stderr, "readers: POST of event %ld failed\n", k + 1);
	ev_failed[k] = 1;
}

/* Read POST answers: "HTTP/1.1 201 ...", Content-Length, {"id":N}. */
void pub_readable(void)
{
	ssize_t got = read(pub_fd, pub_in + pub_in_len, sizeof(pub_in) - 1 - pub_in_len);
	if (got <= 0) {
		if (got < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		pub_drop();
		return;
	}
	pub_in_len += (size_t)got;
	pub_in[pub_in_len] = '\0';
	for (;;) {
		char *e = strstr(pub_in, "\r\n\r\n");
		if (!e)
			break;
		size_t hl = (size_t)(e + 4 - pub_in);
		long clen = 0;
		for (char *p = pub_in; p && p < e; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
			if (strncasecmp(p, "content-length:", 15) == 0)
				clen = strtol(p + 15, NULL, 10);
		if (clen < 0 || hl + (size_t)clen > sizeof(pub_in) - 1) {
			pub_drop();
			return;
		}
		if (pub_in_len < hl + (size_t)clen)
			break;
		int status = atoi(pub_in + 9);
		char saved = pub_in[hl + (size_t)clen];
		pub_in[hl + (size_t)clen] = '\0';
		double idv = 0;
		long k = pub_nwait > 0 ? pub_waiting[0] : -1;
		if (pub_nwait > 0)
			memmove(pub_waiting, pub_waiting + 1, (size_t)--pub_nwait * sizeof(pub_waiting[0]));
		if (k >= 0) {
			ev_t1[k] = tool_now_ns();
			if (status == 201 && tool_json_number(pub_in + hl, "id", &idv) == 0 && idv > 0) {
				id_known(k, (int64_t)idv);
			} else {
				ev_failed[k] = 1;
				fprintf(stderr, "readers: POST of event %ld answered %d: %.200s\n", k + 1, status,
					pub_in + hl);
			}
		}
		pub_in[hl + (size_t)clen] = saved;
		size_t used = hl + (size_t)clen;
		memmove(pub_in, pub_in + used, pub_in_len - used + 1);
		pub_in_len -= used;
	}
	if (pub_in_len >= sizeof(pub_in) - 1)
		pub_drop();
}
