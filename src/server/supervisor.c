/* SPDX-License-Identifier: BSD-2-Clause */
/* supervisor.c: the main process of a group of workers: listeners, the
 * shared region, fork, signals, restarts with backoff, and systemd's
 * notifications for the group. See supervisor.h.
 *
 * Forks happen only at the top of supervisor_run, outside the loop: a
 * callback that wants a worker started marks it due and stops the loop, so
 * a new worker never starts inside one of the main process's callbacks. */
#include "server/supervisor.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "server/config_check.h"
#include "core/group.h"
#include "common/log.h"
#include "common/loop.h"
#include "core/metrics.h"
#include "server/service.h"
#include "store/store.h"
#include "common/util.h"

#define TICK_MS 100          /* readiness, stop deadline */
#define RESTART_FIRST_MS 100 /* backoff before the first restart, doubling */
#define RESTART_MAX_MS 5000
#define RESTART_RESET_MS 10000 /* a worker that ran this long starts the backoff afresh */
#define STOP_GRACE_MS 8000     /* after SIGTERM: then SIGKILL to what remains */
#define ALIVE_MIN_MS 1000      /* a worker stamps every 250 ms */
#define FD_RESERVE 64          /* as server.c keeps per process */

struct worker_proc {
	pid_t pid; /* 0: not running */
	bool due;  /* to fork at the next turn */
	uint64_t started_ms;
	unsigned restarts; /* in a row, for the backoff */
	struct loop_timer restart_timer;
	struct supervisor *sup;
};

struct supervisor {
	struct config *cfg;
	int argc;
	char **argv;
	struct loop *lp;
	int sigfd;
	struct listeners ls;
	unsigned n;
	struct worker_proc w[GROUP_MAX_WORKERS];
	struct loop_timer tick;
	bool stopping;
	bool ready; /* READY=1 sent */
	int exit_code;
	uint64_t stop_deadline;
	uint64_t alive_ms; /* the watchdog's window for every worker's stamp */
};

static unsigned running(const struct supervisor *sup)
{
	unsigned k = 0;
	for (unsigned i = 0; i < sup->n; i++)
		k += sup->w[i].pid > 0;
	return k;
}

static void status_line(void *arg, char *buf, size_t len)
{
	struct supervisor *sup = arg;
	struct metrics *m = xcalloc(1, sizeof(*m));
	struct group_figures f;
	struct group_worker w[GROUP_MAX_WORKERS];
	unsigned n = group_sum(m, &f, w);
	size_t readers = 0;
	for (unsigned i = 0; i < n; i++)
		readers += w[i].readers;
	snprintf(buf, len,
		 "%u of %u workers, %zu readers, %zu connections, last event id %lld, %llu events read (%llu posted), "
		 "%llu frames sent",
		 running(sup), n, readers, f.connections, (long long)f.last_event_id,
		 (unsigned long long)m->events_read, (unsigned long long)m->events_published,
		 (unsigned long long)m->frames_queued);
	free(m);
}

static bool all_alive(void *arg)
{
	struct supervisor *sup = arg;
	return !sup->stopping && group_all_alive(sup->alive_ms);
}

static void begin_stop(struct supervisor *sup, const char *why, int code)
{
	if (code)
		sup->exit_code = code;
	if (sup->stopping)
		return;
	sup->stopping = true;
	log_info("%s: stopping %u workers", why, running(sup));
	service_stopping();
	/* The workers keep their own copies until they have drained; the
	 * main process's go now (and the unix socket's path with them). */
	listeners_close(&sup->ls);
	for (unsigned i = 0; i < sup->n; i++) {
		loop_timer_stop(sup->lp, &sup->w[i].restart_timer);
		sup->w[i].due = false;
		if (sup->w[i].pid > 0)
			kill(sup->w[i].pid, SIGTERM);
	}
	sup->stop_deadline = loop_now(sup->lp) + STOP_GRACE_MS;
	if (running(sup) == 0)
		loop_stop(sup->lp);
}

static void restart_due(void *arg)
{
	struct worker_proc *w = arg;
	if (w->sup->stopping)
		return;
	w->due = true;
	loop_stop(w->sup->lp); /* forks happen outside the loop */
}

static void reap(struct supervisor *sup)
{
	int st;
	pid_t pid;
	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		unsigned i = 0;
		while (i < sup->n && sup->w[i].pid != pid)
			i++;
		if (i == sup->n)
			continue;
		struct worker_proc *w = &sup->w[i];
		w->pid = 0;
		group_worker_gone(i);
		bool clean = WIFEXITED(st) && WEXITSTATUS(st) == 0;
		char how[64];
		if (WIFSIGNALED(st))
			snprintf(how, sizeof(how), "was killed by signal %d", WTERMSIG(st));
		else
			snprintf(how, sizeof(how), "exited with %d", WEXITSTATUS(st));
		if (sup->stopping) {
			if (!clean) {
				log_warn("worker %u (pid %d) %s while stopping", i, (int)pid, how);
				sup->exit_code = 1;
			}
			if (running(sup) == 0)
				loop_stop(sup->lp);
			continue;
		}
		if (!sup->ready) {
			/* It never served: the same start-up would fail again
			 * (the database, a certificate): stop, as one process
			 * that cannot start does. */
			log_err("worker %u (pid %d) %s before the group was ready", i, (int)pid, how);
			begin_stop(sup, "start-up failed", 1);
			continue;
		}
		uint64_t now = loop_now(sup->lp);
		if (now - w->started_ms >= RESTART_RESET_MS)
			w->restarts = 0;
		uint64_t delay = RESTART_FIRST_MS << MIN(w->restarts, 6u);
		delay = MIN(delay, (uint64_t)RESTART_MAX_MS);
		w->restarts++;
		log_warn("worker %u (pid %d) %s; its readers are gone; starting it again in %llu ms", i, (int)pid, how,
			 (unsigned long long)delay);
		loop_timer_start(sup->lp, &w->restart_timer, delay, restart_due, w);
	}
}

/* SIGHUP: check the new configuration here, so a broken file is reported
 * once; if it loads, every worker reloads it as one process does. */
static void reload(struct supervisor *sup)
{
	struct config fresh;
	bool check;
	const char *command;
	int code;
	log_info("SIGHUP: checking the configuration and passing it to %u workers", running(sup));
	service_reloading();
	if (config_load_checked(&fresh, sup->argc, sup->argv, &check, &command, &code) != 0) {
		log_err("reload failed; the running configuration stays in force");
		service_ready();
		return;
	}
	if (fresh.workers != sup->cfg->workers)
		log_warn("workers changes take effect at the next restart");
	log_set_level((enum log_level)fresh.log_level);
	config_free(&fresh);
	for (unsigned i = 0; i < sup->n; i++)
		if (sup->w[i].pid > 0)
			kill(sup->w[i].pid, SIGHUP);
	service_ready();
}

static void on_signal(void *arg, uint32_t events)
{
	struct supervisor *sup = arg;
	struct signalfd_siginfo si;
	(void)events;
	while (read(sup->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGCHLD)
			reap(sup);
		else if (si.ssi_signo == SIGHUP)
			reload(sup);
		else
			begin_stop(sup, si.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM", 0);
	}
}

static void tick(void *arg)
{
	struct supervisor *sup = arg;
	if (!sup->ready && !sup->stopping && group_all_ready()) {
		sup->ready = true;
		log_info("herald ready: %u workers, %zu listener(s)", sup->n, sup->ls.n);
		service_ready();
	}
	if (sup->stopping && loop_now(sup->lp) >= sup->stop_deadline) {
		for (unsigned i = 0; i < sup->n; i++) {
			if (sup->w[i].pid > 0) {
				log_warn("worker %u (pid %d) has not stopped; killing it", i, (int)sup->w[i].pid);
				kill(sup->w[i].pid, SIGKILL);
			}
		}
		sup->exit_code = 1;
		sup->stop_deadline = UINT64_MAX;
	}
	loop_timer_start(sup->lp, &sup->tick, TICK_MS, tick, sup);
}

/* The open-file limit every worker inherits, raised to its hard limit. */
static int64_t fd_limit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return 1024;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	return rl.rlim_cur == RLIM_INFINITY ? INT64_C(1) << 20 : (int64_t)rl.rlim_cur;
}

/* Open the event log once before any worker does, so that a database
 * that cannot open (or a first migration) is met here, once. */
static int check_store(struct supervisor *sup)
{
	char err[512];
	struct metrics *m = xcalloc(1, sizeof(*m));
	struct store *st = store_open(sup->cfg, sup->lp, m, err, sizeof(err));
	if (!st)
		log_err("%s: %s", sup->cfg->redis_url[0] ? "the event log on Redis" : sup->cfg->db, err);
	else
		store_close(st);
	free(m);
	return st ? 0 : -1;
}

static int setup(struct supervisor *sup)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGCHLD);
	/* Blocked before any fork: a worker inherits the mask, so a signal
	 * that reaches it before its own signalfd waits instead of killing it. */
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		return -1;
	signal(SIGPIPE, SIG_IGN);
	sup->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (sup->sigfd < 0 || loop_watch(sup->lp, sup->sigfd, EPOLLIN, on_signal, sup) < 0)
		return -1;
	return 0;
}

/* The child's side of fork: drop what belongs to the main process. */
static void become_worker(struct supervisor *sup, unsigned index, pid_t parent, struct listeners *mine)
{
	/* A worker outlives no main process: its SIGTERM drains it. */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		raise(SIGTERM);
	group_enter(index);
	/* systemd hears from the main process only (NotifyAccess=main). */
	static const char *const mains[] = { "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID",
					     "LISTEN_FDS",    "LISTEN_PID",    "LISTEN_FDNAMES" };
	for (size_t i = 0; i < ARRAY_LEN(mains); i++)
		unsetenv(mains[i]);
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_UNBLOCK, &chld, NULL);
	listeners_pick(&sup->ls, index, mine);
	service_stop();
	loop_free(sup->lp);
	sup->lp = NULL;
	close(sup->sigfd);
}

int supervisor_run(struct config *cfg, int argc, char **argv, struct listeners *mine, int *worker)
{
	static struct supervisor s; /* its timers live as long as the loop */
	struct supervisor *sup = &s;
	*worker = -1;
	*sup = (struct supervisor){ .cfg = cfg, .argc = argc, .argv = argv, .sigfd = -1, .n = (unsigned)cfg->workers };
	int64_t fds = fd_limit();
	int64_t per = fds > FD_RESERVE * 2 ? fds - FD_RESERVE : fds / 2;
	int64_t cap = cfg->max_readers ? cfg->max_readers : per * sup->n;
	sup->lp = loop_new();
	if (!sup->lp) {
		log_err("epoll_create1: %s", strerror(errno));
		return 1;
	}
	int r = group_create(sup->n, (size_t)MIN(cap, INT64_C(1) << 21), (size_t)cfg->presence_max_keys);
	if (r < 0) {
		log_err("mapping the workers' shared memory: %s", strerror(-r));
		loop_free(sup->lp);
		return 1;
	}
	if (setup(sup) < 0) {
		log_err("signal setup: %s", strerror(errno));
		sup->exit_code = 1;
		goto out;
	}
	if (check_store(sup) < 0 || listeners_open_group(&sup->ls, cfg, sup->n) < 0) {
		sup->exit_code = 1;
		goto out;
	}
	uint64_t usec = 0;
	sup->alive_ms = ALIVE_MIN_MS;
	if (sd_watchdog_enabled(0, &usec) > 0 && usec / 2000 > ALIVE_MIN_MS)
		sup->alive_ms = usec / 2000;
	service_start(sup->lp, status_line, sup);
	service_watch_alive(all_alive, sup);
	loop_timer_start(sup->lp, &sup->tick, TICK_MS, tick, sup);
	log_info("starting %u workers", sup->n);
	for (unsigned i = 0; i < sup->n; i++)
		sup->w[i] = (struct worker_proc){ .due = true, .sup = sup };

	pid_t self = getpid();
	for (;;) {
		for (unsigned i = 0; i < sup->n && !sup->stopping; i++) {
			struct worker_proc *w = &sup->w[i];
			if (!w->due)
				continue;
			w->due = false;
			pid_t pid = fork();
			if (pid == 0) {
				become_worker(sup, i, self, mine);
				*worker = (int)i;
				return 0;
			}
			if (pid < 0) {
				log_err("fork worker %u: %s; trying again", i, strerror(errno));
				loop_timer_start(sup->lp, &w->restart_timer, RESTART_MAX_MS, restart_due, w);
				continue;
			}
			w->pid = pid;
			w->started_ms = group_clock_ms();
			group_worker_started(i, pid);
			log_info("worker %u started (pid %d)", i, (int)pid);
		}
		if (sup->stopping && running(sup) == 0)
			break;
		int lr = loop_run(sup->lp);
		if (lr < 0) {
			log_err("event loop: %s", strerror(-lr));
			begin_stop(sup, "event loop failure", 1);
		}
	}
out:
	for (unsigned i = 0; i < sup->n; i++)
		if (sup->w[i].pid > 0)
			kill(sup->w[i].pid, SIGKILL);
	service_stop();
	listeners_free(&sup->ls);
	if (sup->sigfd >= 0)
		close(sup->sigfd);
	loop_free(sup->lp);
	group_destroy();
	return sup->exit_code;
}
