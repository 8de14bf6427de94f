/* SPDX-License-Identifier: BSD-2-Clause */
/* server.c: start-up in order, the wiring of the layers, signals through
 * signalfd, reload, graceful drain, and teardown in reverse order. */
#include "server/server.h"

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

#include "server/config_check.h"
#include "core/group.h"
#include "common/log.h"
#include "mercure/mercure_sets.h"
#include "mercure/mercure_subs.h"
#include "presence/presence.h"
#include "api/publish.h"
#include "redis/redis_url.h"
#include "server/service.h"
#include "server/jwks_fetch.h"
#include "net/http_client.h"
#include "net/tls_context.h"
#include "common/util.h"
#include "webhook/webhook.h"

#define FD_RESERVE 64 /* descriptors kept for the database, listeners and plain requests */
#define DRAIN_MS 3000
#define PRUNE_EVERY_MS 5000
/* Rows per pruning transaction follow its time, not a fixed count: an
 * event may be as large as max_body, and 1,000 rows of 20 KB took 322 ms
 * in one step. A step starts small, doubles while it is quick and halves
 * while it is slow, so it stays near PRUNE_STEP_NS whatever the rows hold. */
#define PRUNE_STEP_MAX 1000
#define PRUNE_STEP_FIRST 64
#define PRUNE_STEP_NS 2000000
#define PRUNE_AGAIN_MS 10  /* between steps while a backlog of old rows remains */
#define STAMP_MS 250       /* a worker's stamp into the group's region */
#define JWKS_CHECK_MS 1000 /* jwt_jwks_file looked at for a change */

/* The hub's fatal hook: the database file is gone (the hub logged it).
 * Stop with exit code 1; systemd restarts herald on the file there now. */
static void fail(void *arg)
{
	struct server *srv = arg;
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
	for (size_t i = 0; i < srv->listeners.n; i++) {
		const struct listener *ls = &srv->listeners.ls[i];
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		if (getsockname(ls->fd, (struct sockaddr *)&ss, &len) < 0)
			continue;
		char text[64];
		bool loopback;
		addr_peer_text((struct sockaddr *)&ss, len, text, sizeof(text), &loopback);
		if (ss.ss_family == AF_UNIX || !loopback) {
			log_warn("publish_token is not set and %s %s: any client reaching it from this host without "
				 "X-Forwarded-For may publish, and so may anyone behind a proxy that does not add "
				 "X-Forwarded-For; set publish_token",
				 ls->name,
				 ss.ss_family == AF_UNIX ? "is a unix socket a proxy may use" : "is not on loopback");
			return;
		}
	}
}

static void group_peers_wake(void *arg)
{
	(void)arg;
	group_wake_others();
}

static void group_peers_taken(void *arg)
{
	(void)arg;
	group_wake_taken();
}

/* The caps on streams: max_readers as set (0: none), counting every
 * stream (in a group, the group's); and, always, the descriptors this
 * process's readers may hold (the open-file limit less a reserve): one per
 * HTTP/1.1 reader and per HTTP/2 connection, none per HTTP/2 stream. */
static void compute_limits(struct server *srv)
{
	struct rlimit rl;
	int64_t fds = 1024;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		fds = rl.rlim_cur == RLIM_INFINITY ? INT64_C(1) << 20 : (int64_t)rl.rlim_cur;
	int64_t derived = fds > FD_RESERVE * 2 ? fds - FD_RESERVE : fds / 2;
	streams_set_limits(srv->streams, srv->cfg.max_readers, derived);
	int64_t all = group_on() ? derived * (int64_t)group_workers() : derived;
	if (srv->cfg.max_readers > all && group_index() <= 0)
		log_warn("max_readers %lld is above the %lld descriptors the open-file limit%s allow%s for readers: "
			 "HTTP/1.1 readers past them are refused (raise LimitNOFILE); HTTP/2 streams are not",
			 (long long)srv->cfg.max_readers, (long long)all, group_on() ? "s of the workers" : "",
			 group_on() ? "" : "s");
}

static size_t count_http2_sockets(void *arg)
{
	return h2_server_sessions(arg);
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
	loop_label(srv->lp, "pruning the log (retention)", NULL);
	const struct namespaces *ns = &srv->cfg.namespaces;
	if (srv->cfg.retention_age_s || srv->cfg.retention_count || ns->n) {
		if (!srv->prune_rows)
			srv->prune_rows = PRUNE_STEP_FIRST;
		uint64_t t0 = clock_mono_ns();
		bool more = false;
		/* With namespaces, each keeps its own rows by its own rules. */
		int n = ns->n ? store_prune_namespaces(srv->st, ns, &srv->cfg.ns_defaults, srv->prune_rows, &more)
			      : store_prune(srv->st, srv->cfg.retention_age_s, srv->cfg.retention_count,
					    srv->prune_rows);
		uint64_t took = clock_mono_ns() - t0;
		if (n > 0 && took > PRUNE_STEP_NS && srv->prune_rows > 1)
			srv->prune_rows /= 2;
		else if (n == (int)srv->prune_rows && took < PRUNE_STEP_NS / 2 && srv->prune_rows < PRUNE_STEP_MAX)
			srv->prune_rows = MIN(srv->prune_rows * 2, (size_t)PRUNE_STEP_MAX);
		if ((n > 0 && (size_t)n >= srv->prune_rows) || n == -EBUSY || more)
			next = PRUNE_AGAIN_MS;
		if (n > 0) {
			log_debug("retention removed %d events in %.1f ms; oldest kept id is above %lld; next step %zu "
				  "rows",
				  n, (double)took / 1e6, (long long)store_pruned_through(srv->st), srv->prune_rows);
		}
	}
	loop_timer_start(srv->lp, &srv->prune_timer, next, prune_tick, srv);
}

/* A worker of a group: show life and copy its figures and counters into
 * the shared region, for the main process's watchdog and the group's
 * /metrics. */
static void stamp_tick(void *arg)
{
	struct server *srv = arg;
	struct group_figures f = { .connections = api_sockets(&srv->api),
				   .http2_sessions = h2_server_sessions(srv->h2),
				   .http2_streams = h2_server_streams(srv->h2),
				   .readers_catching_up = hub_catching_up(srv->hub),
				   .publish_pending = publish_pending(srv->pubq),
				   .last_event_id = hub_high_water(srv->hub) };
	group_stamp(&f, &srv->m);
	loop_timer_start(srv->lp, &srv->stamp_timer, STAMP_MS, stamp_tick, srv);
}

static void drain_tick(void *arg)
{
	struct server *srv = arg;
	/* An HTTP/2 session goes once its GOAWAY and its streams' ends are
	 * out. */
	if ((conn_pool_count(srv->pool) == 0 && h2_server_sessions(srv->h2) == 0 && webhook_settled(srv->webhook)) ||
	    loop_now(srv->lp) >= srv->drain_deadline) {
		loop_stop(srv->lp);
		return;
	}
	loop_timer_start(srv->lp, &srv->drain_timer, 20, drain_tick, srv);
}

static void begin_drain(struct server *srv, const char *signame)
{
	if (srv->draining)
		return;
	log_info("%s: stopping: no new connections, ending %zu streams", signame, hub_readers(srv->hub));
	srv->draining = true;
	service_stopping();
	/* No new connections; every stream ends once what is queued is
	 * written; idle keep-alive connections close now; requests in
	 * progress finish. */
	conn_pool_drain(srv->pool);
	h2_server_drain(srv->h2);
	listeners_close(&srv->listeners);
	hub_end_all(srv->hub);
	webhook_stop(srv->webhook); /* the lease released while the loop still runs */
	srv->drain_deadline = loop_now(srv->lp) + DRAIN_MS;
	loop_timer_start(srv->lp, &srv->drain_timer, 0, drain_tick, srv);
}

static void status_line(void *arg, char *buf, size_t len)
{
	const struct server *srv = arg;
	/* Events read counts every writer's rows (POSTs and other programs'
	 * INSERTs); frames sent is events times the readers they reached. */
	snprintf(buf, len,
		 "%zu readers, %zu connections, last event id %lld, %llu events read (%llu posted), %llu frames sent",
		 hub_readers(srv->hub), api_sockets(&srv->api), (long long)hub_high_water(srv->hub),
		 (unsigned long long)srv->m.events_read, (unsigned long long)srv->m.events_published,
		 (unsigned long long)srv->m.frames_queued);
}

/* The keys a reload found changed but cannot apply (at most every key
 * flagged restart-only). */
struct restart_keys {
	const char *names[12];
	size_t n;
};

static void restart_key_changed(const char *key, void *arg)
{
	struct restart_keys *rk = arg;
	/* A worker of a group: the main process warns of workers changes. */
	if ((strcmp(key, "workers") == 0 && group_on()) || rk->n == ARRAY_LEN(rk->names))
		return;
	rk->names[rk->n++] = key;
}

/* Keep what a reload cannot change (sockets, the event log: the keys the
 * key table flags) from the running configuration, with one warning that
 * names each the new one asks to change ("listen and backlog changes"). */
static void keep_restart_only(struct config *fresh, struct config *cur)
{
	struct restart_keys rk = { .n = 0 };
	config_keep_restart_keys(fresh, cur, restart_key_changed, &rk);
	if (!rk.n)
		return;
	char names[256];
	size_t len = 0;
	for (size_t i = 0; i < rk.n && len < sizeof(names); i++)
		len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%s",
					i == 0          ? ""
					: i + 1 == rk.n ? " and "
							: ", ",
					rk.names[i]);
	log_warn("%s changes take effect at the next restart", names);
}

/* Build the signed-token verifier from cfg (its keys were checked when cfg
 * was loaded) and give it to the handlers, freeing the one it replaces: a
 * new verifier has an empty cache, so no token verified with a key that is
 * gone is answered from it. Streams already open keep going. Returns 0, or
 * -1 after logging why (the previous verifier stays). jwt_jwks_file's
 * stat is taken first, so a change while it is read is seen next tick. */
static int set_jwt(struct server *srv)
{
	struct jwt_settings js;
	struct jwt_verifier *v;
	char err[768];
	srv->jwks_st_ok = srv->cfg.jwt_jwks_file[0] && stat(srv->cfg.jwt_jwks_file, &srv->jwks_st) == 0;
	jwt_settings_from_config(&srv->cfg, &js);
	/* jwt_jwks_url: the set last fetched (none yet: no keys). */
	js.jwks_text = jwks_fetch_text(srv->jwks_url, &js.jwks_len);
	if (jwt_verifier_new(&js, &v, err, sizeof(err)) < 0) {
		log_err("jwt: %s", err);
		return -1;
	}
	if (v && srv->jwks_url)
		jwt_verifier_on_unknown_kid(v, jwks_fetch_unknown_kid, srv->jwks_url);
	streams_set_jwt(srv->streams, v);
	publish_set_jwt(srv->pubq, v);
	jwt_verifier_free(srv->jwt);
	srv->jwt = v;
	return 0;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* An identity provider's key rotation is a change of jwt_jwks_file: its
 * stat is compared each JWKS_CHECK_MS (one stat(2): a file replaced by a
 * rename, written in place, removed or back all show), and a change reads
 * the keys again as SIGHUP does. A file that does not parse keeps the
 * keys in force; the next change is read again. */
static void jwks_tick(void *arg)
{
	struct server *srv = arg;
	const char *path = srv->cfg.jwt_jwks_file;
	struct stat st;
	if (!path[0])
		return; /* a reload turned it off; one that turns it on starts this again */
	if (!srv->draining) {
		bool ok = stat(path, &st) == 0;
		if (ok != srv->jwks_st_ok || (ok && !same_file(&st, &srv->jwks_st))) {
			log_info("jwt_jwks_file %s changed: reading its keys again", path);
			if (set_jwt(srv) == 0)
				log_info("jwt: %zu keys from jwt_jwks_file in force", jwt_verifier_keys(srv->jwt));
			else
				log_err("jwt: signed tokens keep the previous keys");
		}
	}
	loop_timer_start(srv->lp, &srv->jwks_timer, JWKS_CHECK_MS, jwks_tick, srv);
}

/* jwt_jwks_url's set arrived (it parses): a new verifier, as a changed
 * jwt_jwks_file makes one. */
static void jwks_url_keys(void *arg, const char *text, size_t len)
{
	struct server *srv = arg;
	(void)text;
	(void)len;
	if (set_jwt(srv) == 0)
		log_info("jwt: %zu keys from jwt_jwks_url in force", jwt_verifier_keys(srv->jwt));
	else
		log_err("jwt: signed tokens keep the previous keys");
}

/* Start, follow or stop jwt_jwks_url after a load; the verifier is built
 * after this, so it is told whom to tell of an unknown kid. */
static void jwks_url_follow(struct server *srv)
{
	const char *url = srv->cfg.jwt_jwks_url;
	http_client_set_ca_file(srv->http, srv->cfg.outbound_ca_file);
	if (!url[0]) {
		/* The verifier in force stays if the next one fails to build:
		 * it must not call a fetcher that is gone. */
		if (srv->jwt && srv->jwks_url)
			jwt_verifier_on_unknown_kid(srv->jwt, NULL, NULL);
		jwks_fetch_free(srv->jwks_url);
		srv->jwks_url = NULL;
	} else if (!srv->jwks_url) {
		srv->jwks_url = jwks_fetch_new(srv->lp, srv->http, url, jwks_url_keys, srv);
	} else {
		jwks_fetch_again(srv->jwks_url, url);
	}
}

static void reload(struct server *srv)
{
	struct config fresh;
	bool check;
	const char *command;
	int code;
	log_info("SIGHUP: reloading configuration%s%s", srv->cfg.config_path ? " from " : "",
		 srv->cfg.config_path ? srv->cfg.config_path : "");
	service_reloading();
	if (config_load_checked(&fresh, srv->argc, srv->argv, &check, &command, &code) != 0) {
		log_err("reload failed; the running configuration stays in force");
		service_ready();
		return;
	}
	/* Streams opened with a read token that is no longer valid must not
	 * go on receiving private events. */
	bool token_changed = strcmp(fresh.read_token, srv->cfg.read_token) != 0;
	keep_restart_only(&fresh, &srv->cfg);
	/* Every module reads srv->cfg through a pointer: the new values take
	 * effect in place. */
	config_free(&srv->cfg);
	srv->cfg = fresh;
	log_set_level((enum log_level)srv->cfg.log_level);
	compute_limits(srv);
	hub_reconfigure(srv->hub);
	cors_set(&srv->cors, srv->cfg.allow_origin);
	streams_reconfigure(srv->streams);
	jwks_url_follow(srv);
	webhook_reconfigure(srv->webhook);
	if (set_jwt(srv) < 0)
		log_err("jwt: the key could not be loaded again; signed tokens keep the previous key");
	if (srv->cfg.jwt_jwks_file[0] && !loop_timer_active(&srv->jwks_timer))
		loop_timer_start(srv->lp, &srv->jwks_timer, JWKS_CHECK_MS, jwks_tick, srv);
	if (token_changed)
		hub_end_private(srv->hub);
	tls_reload(srv->tls, &srv->cfg);
	log_info("configuration reloaded; %zu readers kept", hub_readers(srv->hub));
	service_ready();
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
	srv->lp = loop_new();
	if (!srv->lp) {
		log_err("epoll_create1: %s", strerror(errno));
		return -1;
	}
	srv->started_ms = loop_now(srv->lp);
	stall_guard_start(&srv->stall, srv->lp, &srv->cfg, &srv->m);
	srv->m.start_time_s = clock_wall_s();
	if (setup_signals(srv) < 0) {
		log_err("signal setup: %s", strerror(errno));
		return -1;
	}
	bool redis = srv->cfg.redis_url[0] || srv->cfg.redis_sentinels[0];
	srv->st = store_open(&srv->cfg, srv->lp, &srv->m, err, sizeof(err));
	if (!srv->st) {
		if (redis)
			log_err("the event log on Redis: %s", err);
		else
			log_err("database %s: %s", srv->cfg.db, err);
		return -1;
	}
	if (group_on()) {
		/* The group's workers wake each other after their commits. */
		struct store_peers p = { group_wake_fd(), group_index() == 0, group_peers_wake, group_peers_taken,
					 NULL };
		store_set_peers(srv->st, &p);
	}
	srv->hub = hub_new(srv->lp, srv->st, &srv->cfg, &srv->m, fail, srv);
	if (!srv->hub)
		return -1;
	cors_set(&srv->cors, srv->cfg.allow_origin);
	srv->pubq = publish_new(srv->lp, srv->st, srv->hub, &srv->cfg, &srv->cors, &srv->m);
	if (!srv->pubq)
		return -1;
	srv->streams = streams_new(srv->hub, &srv->cfg, &srv->cors, &srv->m);
	srv->http = http_client_new(srv->lp);
	streams_set_http(srv->streams, srv->lp, srv->http);
	if (!srv->http) {
		log_err("libcurl could not make a client for outbound requests");
		return -1;
	}
	/* jwt_jwks_url: start-up does not wait for the set; tokens are
	 * refused (unknown key id) until it arrives. */
	jwks_url_follow(srv);
	if (set_jwt(srv) < 0)
		return -1;
	if (srv->cfg.jwt_jwks_file[0])
		loop_timer_start(srv->lp, &srv->jwks_timer, JWKS_CHECK_MS, jwks_tick, srv);
	if (srv->cfg.presence)
		srv->presence = presence_new(srv->lp, srv->st, srv->hub, &srv->cfg, &srv->m);
	if (srv->cfg.presence && !srv->presence) {
		log_err("mapping the presence table (presence_max_keys %lld): %s",
			(long long)srv->cfg.presence_max_keys, strerror(errno));
		return -1;
	}
	streams_set_presence(srv->streams, srv->presence);
	/* The Mercure endpoint's active subscriptions, beside presence (the
	 * subscriptions API is on only with presence, config_check.c). */
	if (srv->cfg.presence)
		srv->msubs = mercure_subs_new(srv->lp, srv->st, srv->hub, &srv->m);
	/* With the log on Redis, kept in the node's presence share there too,
	 * so that any node answers for the cluster; else in a group of
	 * workers, in the group's shared records, so that any worker answers
	 * for the group. Whatever mercure_subscriptions says now: a reload
	 * may turn it on. */
	if (srv->msubs)
		mercure_subs_share(srv->msubs, presence_share(srv->presence));
	srv->msets = mercure_sets_new(&srv->m);
	hub_set_rule_probe(srv->hub, mercure_sets_probe, srv->msets);
	/* webhook_url: a reader of the log beside the hub; idle until set. */
	srv->webhook = webhook_new(srv->lp, srv->st, srv->hub, srv->http, &srv->cfg, &srv->m);
	compute_limits(srv);

	/* The layers, wired once: connections hand complete requests to the
	 * router, which hands them to the stream and publish handlers. */
	srv->api = (struct api){ .lp = srv->lp,
				 .cfg = &srv->cfg,
				 .trust = &srv->cfg.trust,
				 .cors = &srv->cors,
				 .hub = srv->hub,
				 .st = srv->st,
				 .streams = srv->streams,
				 .presence = srv->presence,
				 .pubq = srv->pubq,
				 .msets = srv->msets,
				 .msubs = srv->msubs,
				 .m = &srv->m,
				 .stall = &srv->stall,
				 .started_ms = srv->started_ms };
	struct conn_hooks hooks;
	api_hooks(&srv->api, &hooks);
	srv->pool = conn_pool_new(srv->lp, &srv->cfg, &srv->m, &hooks);
	srv->api.pool = srv->pool;
	/* A client opening with HTTP/2's preface is handed to the sessions,
	 * whose streams come back to the pool as connections. */
	srv->h2 = h2_server_new(srv->lp, &srv->cfg, &srv->m, srv->pool);
	srv->api.h2 = srv->h2;
	streams_set_http2_sockets(srv->streams, count_http2_sockets, srv->h2);
	struct conn_takeover takeover = h2_server_takeover(srv->h2);
	conn_pool_set_takeover(srv->pool, &takeover);
	struct conn_gatherer gatherer = h2_server_gatherer(srv->h2);
	conn_pool_set_gatherer(srv->pool, &gatherer);

	if (tls_setup(&srv->tls, srv->lp, &srv->cfg) < 0)
		return -1;
	if (group_on()) {
		/* A worker: its sockets came from the main process. */
		srv->listeners.lp = srv->lp;
		srv->listeners.pool = srv->pool;
		srv->listeners.m = &srv->m;
		srv->listeners.tls = srv->tls;
		if (listeners_adopt(&srv->listeners) < 0)
			return -1;
	} else {
		srv->listeners = (struct listeners){ .lp = srv->lp, .pool = srv->pool, .m = &srv->m, .tls = srv->tls };
		if (listeners_open(&srv->listeners, &srv->cfg) < 0)
			return -1;
	}
	if (listeners_start(&srv->listeners) < 0)
		return -1;
	/* One worker of a group prunes: the others would only contend. */
	if (group_index() <= 0) {
		loop_timer_start(srv->lp, &srv->prune_timer, 0, prune_tick, srv);
		warn_open_publish(srv);
	}
	service_start(srv->lp, status_line, srv);
	char where[REDIS_URL_MAX + 64];
	if (redis) {
		char url[REDIS_URL_MAX + 8];
		if (srv->cfg.redis_sentinels[0])
			snprintf(url, sizeof(url), "(primary %s found through Sentinel)", srv->cfg.redis_master_name);
		else
			redis_url_redact(srv->cfg.redis_url, url, sizeof(url));
		snprintf(where, sizeof(where), "event log on Redis %s, stream {%s}:events", url, srv->cfg.redis_stream);
	} else {
		snprintf(where, sizeof(where), "database %s", srv->cfg.db);
	}
	if (group_on()) {
		stamp_tick(srv);
		group_set_ready();
		log_info("worker %d ready: %zu listener(s), %s, last event id %lld, descriptors for %lld readers here, "
			 "max_readers %lld in the group (0: none)",
			 group_index(), srv->listeners.n, where, (long long)hub_high_water(srv->hub),
			 (long long)streams_max_sockets(srv->streams), (long long)streams_max_readers(srv->streams));
		return 0;
	}
	log_info("herald ready: %zu listener(s), %s, last event id %lld, descriptors for %lld readers, "
		 "max_readers %lld (0: none)",
		 srv->listeners.n, where, (long long)hub_high_water(srv->hub),
		 (long long)streams_max_sockets(srv->streams), (long long)streams_max_readers(srv->streams));
	service_ready();
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
		listeners_free(&srv->listeners);
		webhook_stop(srv->webhook); /* the lease released for the next holder */
		/* Pending publishes are committed (one attempt) and answered
		 * before their connections close. */
		publish_free(srv->pubq);
		srv->pubq = NULL;
		h2_server_free(srv->h2); /* closes its streams' connections first */
		srv->h2 = NULL;
		conn_pool_free(srv->pool); /* every reader's close frees it in the hub */
		srv->pool = NULL;
		mercure_subs_free(srv->msubs); /* every subscription has closed */
		srv->msubs = NULL;
		presence_free(srv->presence); /* every stream has left it */
		srv->presence = NULL;
		hub_free(srv->hub);
		srv->hub = NULL;
		mercure_sets_free(srv->msets); /* every subscriber has released its sets */
		srv->msets = NULL;
		service_stop();
		loop_timer_stop(srv->lp, &srv->drain_timer);
		loop_timer_stop(srv->lp, &srv->prune_timer);
		loop_timer_stop(srv->lp, &srv->stamp_timer);
		loop_timer_stop(srv->lp, &srv->jwks_timer);
	}
	jwks_fetch_free(srv->jwks_url);
	srv->jwks_url = NULL;
	http_client_free(srv->http);
	srv->http = NULL;
	streams_free(srv->streams);
	srv->streams = NULL;
	cors_free(&srv->cors);
	jwt_verifier_free(srv->jwt);
	srv->jwt = NULL;
	tls_teardown(srv->tls);
	srv->tls = NULL;
	if (srv->st) {
		store_close(srv->st);
		srv->st = NULL;
	}
	webhook_free(srv->webhook); /* after the store: a lease call out has been answered */
	srv->webhook = NULL;
	if (srv->sigfd >= 0)
		close(srv->sigfd);
	stall_guard_stop(&srv->stall);
	loop_free(srv->lp);
	srv->lp = NULL;
	config_free(&srv->cfg);
	group_destroy();
}
