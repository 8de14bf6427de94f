/* server.c: start-up in order, signals through signalfd, reload, graceful
 * drain, and teardown in reverse order. */
#include "server.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conn.h"
#include "listener.h"
#include "log.h"
#include "publish.h"
#include "service.h"
#include "stream.h"
#include "tls.h"
#include "util.h"

#define FD_RESERVE 64 /* descriptors kept for the database, listeners and plain requests */
#define DRAIN_MS 3000
#define PRUNE_EVERY_MS 5000
#define PRUNE_STEP_ROWS 1000    /* rows per transaction: the loop never waits long */
#define PRUNE_AGAIN_MS 10       /* between steps while a backlog of old rows remains */
#define CHECKPOINT_QUIET_MS 100 /* copy the WAL once publishes pause this long */

static void pass_end(void *arg)
{
	struct server *srv = arg;
	srv->pass_end_scheduled = false;
	conn_pass_end(srv);
}

void server_schedule_pass_end(struct server *srv)
{
	if (!srv->pass_end_scheduled) {
		srv->pass_end_scheduled = true;
		loop_defer(srv->lp, pass_end, srv);
	}
}

/* Create the database's folder and any missing parents (as mkdir -p). */
static int ensure_db_dir(const char *db)
{
	const char *slash = strrchr(db, '/');
	if (!slash || slash == db)
		return 0;
	char *dir = xstrndup(db, (size_t)(slash - db));
	int r = 0;
	for (char *p = dir + 1;; p++) {
		bool last = *p == '\0';
		if (*p != '/' && !last)
			continue;
		*p = '\0';
		if (mkdir(dir, 0750) < 0 && errno != EEXIST) {
			log_err("creating the database folder %s: %s", dir, strerror(errno));
			r = -1;
			break;
		}
		if (last)
			break;
		*p = '/';
	}
	free(dir);
	return r;
}

void server_fail(struct server *srv)
{
	srv->exit_code = 1;
	loop_stop(srv->lp);
}

/* Token-less publishing trusts a loopback peer without X-Forwarded-For. A
 * listener that faces the network, or a proxy that adds no X-Forwarded-For
 * (a unix socket is how a proxy on this host is meant to connect), would
 * turn that into publishing for anyone: say so at start-up. */
static void warn_open_publish(const struct server *srv)
{
	if (srv->cfg.publish_token[0])
		return;
	for (size_t i = 0; i < srv->nlisteners; i++) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		if (getsockname(srv->listeners[i].fd, (struct sockaddr *)&ss, &len) < 0)
			continue;
		char text[64];
		bool loopback;
		addr_peer_text((struct sockaddr *)&ss, len, text, sizeof(text), &loopback);
		if (ss.ss_family == AF_UNIX || !loopback) {
			log_warn("publish_token is not set and %s %s: any client reaching it from this host without "
				 "X-Forwarded-For may publish, and so may anyone behind a proxy that does not add "
				 "X-Forwarded-For; set publish_token",
				 srv->listeners[i].name,
				 ss.ss_family == AF_UNIX ? "is a unix socket a proxy may use" : "is not on loopback");
			return;
		}
	}
}

static void compute_limits(struct server *srv)
{
	struct rlimit rl;
	int64_t fds = 1024;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		fds = rl.rlim_cur == RLIM_INFINITY ? INT64_C(1) << 20 : (int64_t)rl.rlim_cur;
	int64_t derived = fds > FD_RESERVE * 2 ? fds - FD_RESERVE : fds / 2;
	srv->max_readers = srv->cfg.max_readers ? MIN(srv->cfg.max_readers, derived) : derived;
	if (srv->cfg.max_readers > derived)
		log_warn("max_readers %lld is above what the open-file limit allows; using %lld (raise LimitNOFILE)",
			 (long long)srv->cfg.max_readers, (long long)derived);
}

static void raise_nofile(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			log_warn("raising the open-file limit to %llu: %s", (unsigned long long)rl.rlim_max,
				 strerror(errno));
	}
}

/* Retention in small steps: one short transaction per tick, soon again
 * while old rows remain. */
static void prune_tick(void *arg)
{
	struct server *srv = arg;
	uint64_t next = PRUNE_EVERY_MS;
	if (srv->cfg.retention_age_s || srv->cfg.retention_count) {
		int n = store_prune(srv->st, srv->cfg.retention_age_s, srv->cfg.retention_count, PRUNE_STEP_ROWS);
		if (n == PRUNE_STEP_ROWS || n == -EBUSY)
			next = PRUNE_AGAIN_MS;
		if (n > 0)
			server_note_commit(srv);
		if (n > 0)
			log_debug("retention removed %d events; oldest kept id is above %lld", n,
				  (long long)store_pruned_through(srv->st));
	}
	loop_timer_start(srv->lp, &srv->prune_timer, next, prune_tick, srv);
}

/* The WAL is copied into the database at a pause in publishing rather than
 * inside a commit, so a burst of publishes never waits for the file syncs
 * (publish.c also checkpoints when the WAL outgrows STORE_WAL_FORCE_PAGES
 * during a long, busy stretch). Armed only after our own writes: an idle
 * server keeps no timer for it. */
static void checkpoint_tick(void *arg)
{
	struct server *srv = arg;
	uint64_t quiet = loop_now(srv->lp) - srv->last_commit_ms;
	if (quiet < CHECKPOINT_QUIET_MS) {
		loop_timer_start(srv->lp, &srv->checkpoint_timer, CHECKPOINT_QUIET_MS - quiet, checkpoint_tick, srv);
		return;
	}
	if (store_wal_pages(srv->st) > 0)
		server_checkpoint(srv);
}

void server_note_commit(struct server *srv)
{
	srv->last_commit_ms = loop_now(srv->lp);
	if (!loop_timer_active(&srv->checkpoint_timer))
		loop_timer_start(srv->lp, &srv->checkpoint_timer, CHECKPOINT_QUIET_MS, checkpoint_tick, srv);
}

void server_checkpoint(struct server *srv)
{
	int pages = store_wal_pages(srv->st);
	uint64_t t0 = clock_mono_ns();
	int n = store_checkpoint(srv->st);
	uint64_t ns = clock_mono_ns() - t0;
	metrics_observe(&srv->m.checkpoint_seconds, ns);
	if (n >= 0)
		log_debug("checkpoint: %d of %d WAL pages copied in %.1f ms", n, pages, (double)ns / 1e6);
}

static void drain_tick(void *arg)
{
	struct server *srv = arg;
	if (srv->nconns == 0 || loop_now(srv->lp) >= srv->drain_deadline) {
		loop_stop(srv->lp);
		return;
	}
	loop_timer_start(srv->lp, &srv->drain_timer, 20, drain_tick, srv);
}

static void begin_drain(struct server *srv, const char *signame)
{
	if (srv->draining)
		return;
	log_info("%s: stopping: no new connections, ending %zu streams", signame, hub_readers(&srv->hub));
	srv->draining = true;
	service_stopping(srv);
	listeners_close(srv);
	/* End every stream once what is queued is written; idle keep-alive
	 * connections close now; requests in progress finish. */
	while (srv->hub.live)
		hub_end(&srv->hub, srv->hub.live);
	while (srv->hub.catchup)
		hub_end(&srv->hub, srv->hub.catchup);
	for (struct conn *c = srv->conns, *next; c; c = next) {
		next = c->next;
		if (c->state == CONN_READING && c->rlen == 0 && c->qlen == 0)
			conn_close(c, NULL);
	}
	srv->drain_deadline = loop_now(srv->lp) + DRAIN_MS;
	loop_timer_start(srv->lp, &srv->drain_timer, 0, drain_tick, srv);
}

static void reload(struct server *srv)
{
	struct config fresh;
	bool check;
	int code;
	log_info("SIGHUP: reloading configuration%s%s", srv->cfg.config_path ? " from " : "",
		 srv->cfg.config_path ? srv->cfg.config_path : "");
	service_reloading(srv);
	if (config_load(&fresh, srv->argc, srv->argv, &check, &code) != 0) {
		log_err("reload failed; the running configuration stays in force");
		service_ready(srv);
		return;
	}
	struct trust t;
	char err[256];
	if (trust_parse(&t, fresh.trusted_proxies, err, sizeof(err)) < 0) {
		log_err("reload failed: trusted_proxies: %s; the running configuration stays in force", err);
		config_free(&fresh);
		service_ready(srv);
		return;
	}
	/* Streams opened with a read token that is no longer valid must not
	 * go on receiving private events. */
	bool token_changed = strcmp(fresh.read_token, srv->cfg.read_token) != 0;
	/* Sockets and the database stay as they are until a restart. */
	bool same_listen = fresh.nlisten == srv->cfg.nlisten;
	for (size_t i = 0; same_listen && i < fresh.nlisten; i++)
		same_listen = strcmp(fresh.listen[i], srv->cfg.listen[i]) == 0;
	if (!same_listen || fresh.backlog != srv->cfg.backlog)
		log_warn("listen and backlog changes take effect at the next restart");
	if (strcmp(fresh.db, srv->cfg.db) != 0)
		log_warn("db changes take effect at the next restart");
	for (size_t i = 0; i < fresh.nlisten; i++)
		free(fresh.listen[i]);
	memcpy(fresh.listen, srv->cfg.listen, sizeof(fresh.listen));
	fresh.nlisten = srv->cfg.nlisten;
	srv->cfg.nlisten = 0;
	free(fresh.db);
	fresh.db = srv->cfg.db;
	srv->cfg.db = NULL;
	fresh.backlog = srv->cfg.backlog;
	config_free(&srv->cfg);
	srv->cfg = fresh;
	srv->trust = t;
	log_set_level((enum log_level)srv->cfg.log_level);
	compute_limits(srv);
	hub_reconfigure(&srv->hub);
	if (token_changed)
		hub_end_private(&srv->hub);
	tls_reload(srv);
	log_info("configuration reloaded; %zu readers kept", hub_readers(&srv->hub));
	service_ready(srv);
}

static void on_signal(void *arg, uint32_t events)
{
	struct server *srv = arg;
	struct signalfd_siginfo si;
	(void)events;
	while (read(srv->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGHUP)
			reload(srv);
		else
			begin_drain(srv, si.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM");
	}
}

static int setup_signals(struct server *srv)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		return -1;
	signal(SIGPIPE, SIG_IGN);
	srv->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (srv->sigfd < 0)
		return -1;
	return loop_watch(srv->lp, srv->sigfd, EPOLLIN, on_signal, srv);
}

int server_start(struct server *srv, int argc, char **argv)
{
	char err[512];
	srv->argc = argc;
	srv->argv = argv;
	srv->sigfd = -1;
	raise_nofile();
	compute_limits(srv);
	if (trust_parse(&srv->trust, srv->cfg.trusted_proxies, err, sizeof(err)) < 0) {
		log_err("trusted_proxies: %s", err);
		return -1;
	}
	srv->lp = loop_new();
	if (!srv->lp) {
		log_err("epoll_create1: %s", strerror(errno));
		return -1;
	}
	srv->started_ms = loop_now(srv->lp);
	srv->m.start_time_s = clock_wall_s();
	if (setup_signals(srv) < 0) {
		log_err("signal setup: %s", strerror(errno));
		return -1;
	}
	if (ensure_db_dir(srv->cfg.db) < 0)
		return -1;
	srv->st = store_open(srv->cfg.db, (int)srv->cfg.busy_timeout_ms, err, sizeof(err));
	if (!srv->st) {
		log_err("database %s: %s", srv->cfg.db, err);
		return -1;
	}
	if (tls_setup(srv) < 0 || listeners_open(srv) < 0)
		return -1;
	if (hub_init(&srv->hub, srv) < 0 || hub_watch_store(&srv->hub) < 0 || publish_init(srv) < 0)
		return -1;
	if (listeners_start(srv) < 0)
		return -1;
	loop_timer_start(srv->lp, &srv->prune_timer, 0, prune_tick, srv);
	warn_open_publish(srv);
	service_start(srv);
	log_info("herald ready: %zu listener(s), database %s, last event id %lld, up to %lld readers", srv->nlisteners,
		 srv->cfg.db, (long long)srv->hub.high_water, (long long)srv->max_readers);
	service_ready(srv);
	return 0;
}

int server_run(struct server *srv)
{
	int r = loop_run(srv->lp);
	if (r < 0) {
		log_err("event loop: %s", strerror(-r));
		return 1;
	}
	return srv->exit_code;
}

void server_free(struct server *srv)
{
	if (srv->lp) {
		listeners_close(srv);
		publish_shutdown(srv);
		for (struct conn *c = srv->conns, *next; c; c = next) {
			next = c->next;
			conn_close(c, NULL);
		}
		conn_pass_end(srv);
		if (srv->hub.srv)
			hub_shutdown(&srv->hub);
		conn_pass_end(srv);
		service_stop(srv);
		loop_timer_stop(srv->lp, &srv->drain_timer);
		loop_timer_stop(srv->lp, &srv->prune_timer);
		loop_timer_stop(srv->lp, &srv->checkpoint_timer);
	}
	stream_shutdown(srv);
	tls_teardown(srv);
	if (srv->st) {
		store_close(srv->st);
		srv->st = NULL;
	}
	free(srv->listeners);
	srv->listeners = NULL;
	if (srv->sigfd >= 0)
		close(srv->sigfd);
	loop_free(srv->lp);
	srv->lp = NULL;
	config_free(&srv->cfg);
}
