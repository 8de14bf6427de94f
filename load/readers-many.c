/* SPDX-License-Identifier: BSD-2-Clause */
/* readers-many.c: load/readers N --procs P [--workers W]. More readers than
 * one process may hold descriptors for: the N readers are spread over P
 * client processes forked here, process i binding its sockets to
 * 127.0.i+1.1 (.. 127.0.i+1.K with --sources K) so that no two share source
 * ports, against a herald running as a group of W workers (started here
 * with workers = W, or --server with --pid and --db).
 *
 * The parent publishes by INSERT and learns over pipes what each child saw;
 * CLOCK_MONOTONIC is one clock for every process on the machine, so a
 * child's receive times compare with the parent's publish times directly.
 *
 *   parent -> child (one pipe each)   EXPECT id: an event was published;
 *                                     MARK: say how many heartbeats so far;
 *                                     FINISH first last: report and exit
 *   child -> parent (one shared pipe) OPENED: its share has opened (or
 *                                     timed out); EVENT: how many of its
 *                                     readers had an id and when the last
 *                                     did, sent once all its open readers
 *                                     have it (or at FINISH); MARKED: the
 *                                     heartbeats so far; DONE: its
 *                                     per-reader id check (and heartbeats)
 * Every message is one fixed-size write below PIPE_BUF, so the children's
 * messages on the shared pipe never interleave.
 *
 * Each child checks every reader's ids itself: an id past the last one plus
 * one is a miss, the same id again a duplicate, an older one out of order.
 * Only this tool may write the database during a run (ids are consecutive). */
#include "readers.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- the messages -------------------------------------------------------- */

enum { TO_EXPECT = 1, TO_FINISH, TO_MARK };

struct to_child {
	int32_t type;
	int64_t id;          /* TO_EXPECT */
	int64_t first, last; /* TO_FINISH: the ids published, first..last */
};

enum { UP_OPENED = 1, UP_EVENT, UP_DONE, UP_MARKED };

struct up_msg {
	int32_t type, proc;
	double cpu;     /* the child's CPU seconds so far */
	long heartbeats; /* heartbeat comments its readers read so far */
	/* UP_OPENED */
	long n, opened, errs[E_KINDS];
	int64_t t_last_open;
	/* UP_EVENT */
	int64_t id;
	long count;
	int64_t t_last;
	/* UP_DONE */
	long checked, complete, still_open, with_missed, with_dups, with_disorder;
	long long missed, dups, disorder;
};

static double self_cpu(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Write all of a message; a full pipe blocks (the reader keeps reading). */
static int send_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

/* ---- a client process ------------------------------------------------------ */

/* One reader's ids so far. */
struct order {
	int64_t first, last;
	uint32_t seen, dups, disorder;
	int64_t missed;
};

/* One id seen by this process's readers. */
struct tally {
	int64_t id, t_last;
	long count;
	int expected, reported;
};

struct child {
	struct client *c;
	int proc, cmd, up;
	struct order *ord; /* one per reader */
	struct tally *t;
	long nt, cap;
	int finish, parent_gone;
	int64_t first, last;
	char in[sizeof(struct to_child) * 16];
	size_t in_len;
};

static struct tally *tally_of(struct child *ch, int64_t id)
{
	/* Few ids, newest last: search from the end. */
	for (long j = ch->nt - 1; j >= 0; j--)
		if (ch->t[j].id == id)
			return &ch->t[j];
	if (ch->nt == ch->cap)
		return NULL; /* more ids than were published: ignored */
	struct tally *t = &ch->t[ch->nt++];
	*t = (struct tally){ .id = id };
	return t;
}

/* The client's saw hook: reader i read id at time now. */
static void child_saw(void *arg, long i, int64_t id, int64_t now)
{
	struct child *ch = arg;
	struct order *o = &ch->ord[i];
	if (o->seen && id == o->last) {
		o->dups++;
		return;
	}
	if (o->seen && id < o->last) {
		o->disorder++;
		return;
	}
	if (!o->seen)
		o->first = id;
	else
		o->missed += id - o->last - 1;
	o->seen++;
	o->last = id;
	struct tally *t = tally_of(ch, id);
	if (t) {
		t->count++;
		if (now > t->t_last)
			t->t_last = now;
	}
}

/* The client's other hook: the parent's pipe is readable. */
static void child_command(void *arg)
{
	struct child *ch = arg;
	ssize_t r = read(ch->cmd, ch->in + ch->in_len, sizeof(ch->in) - ch->in_len);
	if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
		ch->parent_gone = 1;
		return;
	}
	if (r < 0)
		return;
	ch->in_len += (size_t)r;
	size_t used = 0;
	while (ch->in_len - used >= sizeof(struct to_child)) {
		struct to_child m;
		memcpy(&m, ch->in + used, sizeof(m));
		used += sizeof(m);
		if (m.type == TO_EXPECT) {
			struct tally *t = tally_of(ch, m.id);
			if (t)
				t->expected = 1;
		} else if (m.type == TO_FINISH) {
			ch->finish = 1;
			ch->first = m.first;
			ch->last = m.last;
		} else if (m.type == TO_MARK) {
			struct up_msg u = { .type = UP_MARKED, .proc = ch->proc, .cpu = self_cpu() };
			u.heartbeats = ch->c->c.heartbeats;
			send_all(ch->up, &u, sizeof(u));
		}
	}
	memmove(ch->in, ch->in + used, ch->in_len - used);
	ch->in_len -= used;
}

/* Report the expected ids every open reader has (all of them, when final). */
static void child_report(struct child *ch, int final)
{
	for (long j = 0; j < ch->nt; j++) {
		struct tally *t = &ch->t[j];
		if (!t->expected || t->reported || (!final && t->count < ch->c->c.open))
			continue;
		t->reported = 1;
		struct up_msg m = { .type = UP_EVENT, .proc = ch->proc, .cpu = self_cpu() };
		m.id = t->id;
		m.count = t->count;
		m.t_last = t->t_last;
		send_all(ch->up, &m, sizeof(m));
	}
}

/* Every opened reader's ids against first..last. */
static void child_verdict(struct child *ch, struct up_msg *m)
{
	int64_t want = ch->last >= ch->first && ch->first > 0 ? ch->last - ch->first + 1 : 0;
	for (long i = 0; i < ch->c->n; i++) {
		if (!ch->c->r[i].t_open)
			continue;
		const struct order *o = &ch->ord[i];
		m->checked++;
		int64_t missed = o->missed;
		if (!o->seen) {
			missed = want;
		} else {
			if (o->first > ch->first)
				missed += o->first - ch->first;
			if (o->last < ch->last)
				missed += ch->last - o->last;
		}
		m->missed += missed;
		m->dups += o->dups;
		m->disorder += o->disorder;
		m->with_missed += missed > 0;
		m->with_dups += o->dups > 0;
		m->with_disorder += o->disorder > 0;
		if (!missed && !o->dups && !o->disorder && (int64_t)o->seen == want)
			m->complete++;
	}
}

/* A client process: open share readers from its own source addresses, then
 * follow the parent's commands. Returns the exit status. */
static int child_main(const struct options *o, const struct tool_addr *target, const char *request, int proc,
		      long share, long events, int cmd, int up, volatile int *stop)
{
	struct child ch = { .proc = proc, .cmd = cmd, .up = up };
	struct tls plain = { .ctx = NULL }; /* the client asks it, and finds no TLS */
	ch.c = client_new(share, target, o->sources, request, &plain, NULL);
	if (!ch.c)
		return 1;
	ch.c->source_first = 0x7f000001u + ((uint32_t)(proc + 1) << 8);
	ch.c->saw = child_saw;
	ch.c->hook_arg = &ch;
	ch.c->other = child_command;
	ch.c->other_arg = &ch;
	ch.ord = xcalloc((size_t)share, sizeof(*ch.ord));
	ch.cap = events + 64;
	ch.t = xcalloc((size_t)ch.cap, sizeof(*ch.t));
	fcntl(cmd, F_SETFL, O_NONBLOCK);
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = UINT64_MAX };
	epoll_ctl(ch.c->ep, EPOLL_CTL_ADD, cmd, &ev);

	/* Each process keeps its own cap on connects in flight. */
	long ramp = o->ramp ? o->ramp : 200;
	int64_t deadline = tool_now_ns() + (int64_t)(o->open_timeout * 1e9);
	while (ch.c->c.settled < ch.c->n && !*stop && !ch.parent_gone && tool_now_ns() < deadline) {
		int more = client_connect_more(ch.c, ramp);
		client_loop_once(ch.c, more ? 0 : 10);
	}
	client_give_up(ch.c);
	struct up_msg m = { .type = UP_OPENED, .proc = proc, .cpu = self_cpu() };
	m.n = share;
	m.opened = ch.c->c.opened;
	m.heartbeats = ch.c->c.heartbeats;
	memcpy(m.errs, ch.c->c.errs, sizeof(m.errs));
	m.t_last_open = ch.c->c.t_last_open;
	send_all(up, &m, sizeof(m));

	while (!ch.finish && !ch.parent_gone && !*stop) {
		client_loop_once(ch.c, 100);
		child_report(&ch, 0);
	}
	int rc = 1;
	if (ch.finish) {
		child_report(&ch, 1);
		struct up_msg d = { .type = UP_DONE, .proc = proc };
		child_verdict(&ch, &d);
		d.still_open = ch.c->c.open;
		d.cpu = self_cpu();
		d.heartbeats = ch.c->c.heartbeats;
		rc = send_all(up, &d, sizeof(d)) == 0 ? 0 : 1;
	}
	client_free(ch.c);
	free(ch.ord);
	free(ch.t);
	return rc;
}

/* ---- the parent ------------------------------------------------------------- */

/* What the parent gathered, per client process and per event. */
struct many {
	long procs, events;
	int up; /* the children's shared pipe */
	char in[sizeof(struct up_msg) * 32];
	size_t in_len;
	struct up_msg *opened, *done, *marked; /* per child, .type 0 until it came */
	pid_t *pids;                  /* per child, 0 once found dead early */
	long alive;                   /* children not found dead early */
	double *cpu_last;             /* per child, its CPU at its last message */
	long n_opened, n_done, n_marked;
	const struct events *ev;
	long *ev_count, *ev_reports; /* per event */
	int64_t *ev_last;
};

/* The event whose id is id, or -1. */
static long event_of(const struct many *m, int64_t id)
{
	for (long k = 0; k < m->events; k++)
		if (m->ev->id[k] == id)
			return k;
	return -1;
}

static void take(struct many *m, const struct up_msg *u)
{
	if (u->proc < 0 || u->proc >= m->procs)
		return;
	m->cpu_last[u->proc] = u->cpu;
	if (u->type == UP_OPENED && !m->opened[u->proc].type) {
		m->opened[u->proc] = *u;
		m->n_opened++;
	} else if (u->type == UP_EVENT) {
		long k = event_of(m, u->id);
		if (k < 0)
			return;
		m->ev_count[k] += u->count;
		m->ev_reports[k]++;
		if (u->t_last > m->ev_last[k])
			m->ev_last[k] = u->t_last;
	} else if (u->type == UP_DONE && !m->done[u->proc].type) {
		m->done[u->proc] = *u;
		m->n_done++;
	} else if (u->type == UP_MARKED && !m->marked[u->proc].type) {
		m->marked[u->proc] = *u;
		m->n_marked++;
	}
}

/* Read what the children sent within timeout_ms. Returns -1 once every
 * child has closed the pipe. */
static int pump(struct many *m, int timeout_ms)
{
	struct pollfd pf = { .fd = m->up, .events = POLLIN };
	if (poll(&pf, 1, timeout_ms < 0 ? 0 : timeout_ms) <= 0)
		return 0;
	ssize_t r = read(m->up, m->in + m->in_len, sizeof(m->in) - m->in_len);
	if (r == 0)
		return -1;
	if (r < 0)
		return 0;
	m->in_len += (size_t)r;
	size_t used = 0;
	while (m->in_len - used >= sizeof(struct up_msg)) {
		struct up_msg u;
		memcpy(&u, m->in + used, sizeof(u));
		used += sizeof(u);
		take(m, &u);
	}
	memmove(m->in, m->in + used, m->in_len - used);
	m->in_len -= used;
	return 0;
}

/* Notice children that died before their FINISH (a crash), so that the
 * phases stop waiting for them: one that had not said OPENED counts as
 * having opened none. */
static void reap(struct many *m)
{
	for (long i = 0; i < m->procs; i++) {
		int st;
		if (!m->pids[i] || waitpid(m->pids[i], &st, WNOHANG) != m->pids[i])
			continue;
		fprintf(stderr, "readers: client process %ld ended early (%s %d)\n", i + 1,
			WIFEXITED(st) ? "status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
		m->pids[i] = 0;
		m->alive--;
		if (!m->opened[i].type) {
			m->opened[i].type = UP_OPENED;
			m->n_opened++;
		}
	}
}

static void tell_all(const int *cmd, long procs, const struct to_child *t)
{
	for (long i = 0; i < procs; i++)
		if (cmd[i] >= 0)
			send_all(cmd[i], t, sizeof(*t));
}

/* Processes in pid's group: pid and its children (herald's workers). */
static long group_procs(pid_t pid)
{
	DIR *d = opendir("/proc");
	if (!d)
		return -1;
	long count = 1;
	struct dirent *e;
	while ((e = readdir(d))) {
		char path[300], buf[512];
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		if (procstat_read_file(path, buf, sizeof(buf)) <= 0)
			continue;
		/* The parent's pid follows the state, after the name's ')'. */
		const char *rp = strrchr(buf, ')');
		int ppid = 0;
		char state;
		if (rp && sscanf(rp + 1, " %c %d", &state, &ppid) == 2 && ppid == (int)pid)
			count++;
	}
	closedir(d);
	return count;
}

/* Server CPU seconds of pid and its workers; NAN when unknown. */
static double server_cpu(pid_t pid)
{
	uint64_t ticks;
	if (pid <= 0 || tool_cpu_ticks(pid, 1, &ticks) != 0)
		return NAN;
	return (double)ticks / (double)procstat_clk_tck();
}

/* The figures of the run, for the tables and the JSON line. */
struct many_fig {
	long n, procs, workers, herald_procs, opened, open_errors, errs[E_KINDS];
	double open_s;
	long rss_before, rss_open;
	long long ovf, drops;
	long published, failed;
	double *last_s; /* per event: publish to the last reader */
	long *missing;
	double med_s, max_s;
	double cpu_events_s, events_wall_s, cpu_idle_s, idle_wall_s;
	double client_cpu_open, client_cpu_events, client_max_pct;
	struct up_msg v; /* the id checks summed */
	double floor_s, floor_cpu_s; /* the floor's time to the last reader, its writers' CPU a round */
	int herald_exit;
	/* The idle phase's heartbeats: the interval herald was given, how
	 * many the readers read, and the clients' CPU meanwhile. */
	double hb_interval_s;
	long hb_idle, hb_events; /* heartbeats read while idle, and while events flowed */
	double client_cpu_idle;
	struct kmem_delta kd; /* the kernel's memory over the opens */
};

static void print_report(const struct many_fig *f, const struct events *ev)
{
	char cN[32], b1[32], b2[32], b3[32], b4[32], b5[32], b6[32];
	tool_fmt_count(f->n, cN, sizeof(cN));
	double per_reader = f->rss_before >= 0 && f->rss_open >= 0 && f->opened
				    ? (double)(f->rss_open - f->rss_before) * 1024.0 / (double)f->opened
				    : NAN;
	double cpu_per_event = f->published ? f->cpu_events_s / (double)f->published : NAN;
	double ratio = f->med_s / f->floor_s;
	printf("| readers | herald processes | client processes | opens (%s) | not opened | event to the last "
	       "reader, median | worst | floor (%ld writers) | median / floor | memory per reader (PSS), all processes | "
	       "server CPU per event | CPU idle |\n",
	       cN, f->workers);
	printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
	printf("| %s | %ld | %ld | %s | %ld | **%s** | %s | %s | **%.2fx** | **%.0f B** | %s | %.1f %% |\n", cN,
	       f->herald_procs, f->procs, tool_fmt_dur(f->open_s, b1, sizeof(b1)), f->n - f->opened,
	       tool_fmt_dur(f->med_s, b2, sizeof(b2)), tool_fmt_dur(f->max_s, b3, sizeof(b3)),
	       tool_fmt_dur(f->floor_s, b4, sizeof(b4)), ratio, per_reader, tool_fmt_dur(cpu_per_event, b5, sizeof(b5)),
	       f->idle_wall_s > 0 ? f->cpu_idle_s / f->idle_wall_s * 100 : NAN);
	printf("\n| opens | opens per second | floor (batched sends) | floor CPU per send | herald CPU per event, "
	       "per reader |\n|---|---|---|---|---|\n");
	printf("| %s | %.0f | %s | %.2f us | %.2f us |\n\n", tool_fmt_dur(f->open_s, b1, sizeof(b1)),
	       (double)f->opened / f->open_s, tool_fmt_dur(f->floor_s, b2, sizeof(b2)),
	       f->floor_cpu_s / (double)f->opened * 1e6, cpu_per_event / (double)f->opened * 1e6);
	kmem_print(&f->kd, f->opened);
	double hb_cpu = f->hb_idle > 0 ? f->cpu_idle_s / (double)f->hb_idle : NAN;
	double per_min = f->opened && f->idle_wall_s > 0 ? f->cpu_idle_s / (double)f->opened / f->idle_wall_s * 60 : NAN;
	printf("| heartbeat_interval | heartbeats read while events flowed | idle | heartbeats read | per second | herald CPU idle | herald CPU per "
	       "heartbeat | floor CPU per send | herald CPU per reader per minute | client CPU per heartbeat |\n"
	       "|---|---|---|---|---|---|---|---|---|---|\n");
	printf("| %s | %ld | %s | %ld | %.0f | %.1f %% | **%.2f us** | %.2f us | %.2f us | %.2f us |\n",
	       tool_fmt_dur(f->hb_interval_s, b1, sizeof(b1)), f->hb_events, tool_fmt_dur(f->idle_wall_s, b2, sizeof(b2)),
	       f->hb_idle,
	       f->idle_wall_s > 0 ? (double)f->hb_idle / f->idle_wall_s : NAN,
	       f->idle_wall_s > 0 ? f->cpu_idle_s / f->idle_wall_s * 100 : NAN, hb_cpu * 1e6,
	       f->floor_cpu_s / (double)f->opened * 1e6, per_min * 1e6,
	       f->hb_idle > 0 ? f->client_cpu_idle / (double)f->hb_idle * 1e6 : NAN);
	printf("\n| event | id | readers that had it | missing | publish to the last reader |\n|---|---|---|---|---|"
	       "\n");
	for (long k = 0; k < f->published; k++)
		printf("| %ld | %lld | %ld | %ld | %s |\n", k + 1, (long long)ev->id[k], f->opened - f->missing[k],
		       f->missing[k], tool_fmt_dur(f->last_s[k], b6, sizeof(b6)));
	printf("\n| readers checked | every event once, in order | ids missed | duplicated | out of order | client "
	       "CPU over the opens | client CPU while events flow | busiest client process |\n"
	       "|---|---|---|---|---|---|---|---|\n");
	printf("| %ld | %ld | %lld | %lld | %lld | %s | %s | %.0f %% of a core |\n\n", f->v.checked, f->v.complete,
	       f->v.missed, f->v.dups, f->v.disorder, tool_fmt_dur(f->client_cpu_open, b1, sizeof(b1)),
	       tool_fmt_dur(f->client_cpu_events, b2, sizeof(b2)), f->client_max_pct);
	if (f->n - f->opened)
		printf("Not opened: refused %ld, reset %ld, timeout %ld, non-200 %ld, closed %ld, other %ld.\n\n",
		       f->errs[E_REFUSED], f->errs[E_RESET], f->errs[E_TIMEOUT], f->errs[E_NON200], f->errs[E_CLOSED],
		       f->errs[E_OTHER]);

	static const char *const names[E_KINDS] = { "refused", "reset", "timeout", "non200", "closed", "other" };
	tool_json_open(NULL, '{');
	tool_json_text("tool", "readers");
	tool_json_text("mode", "procs");
	tool_json_int("n", f->n);
	tool_json_int("procs", f->procs);
	tool_json_int("workers", f->workers);
	tool_json_int("herald_processes", f->herald_procs);
	tool_json_int("opened", f->opened);
	tool_json_int("open_errors", f->open_errors);
	tool_json_open("errors", '{');
	for (int k = 0; k < E_KINDS; k++)
		tool_json_int(names[k], f->errs[k]);
	tool_json_close();
	tool_json_num("open_ms", f->open_s * 1e3);
	tool_json_num("opens_per_s", (double)f->opened / f->open_s);
	tool_json_int("rss_before_kb", f->rss_before);
	tool_json_int("rss_open_kb", f->rss_open);
	tool_json_num("rss_per_reader_bytes", per_reader);
	tool_json_int("listen_overflows", f->ovf);
	tool_json_int("listen_drops", f->drops);
	tool_json_int("events_published", f->published);
	tool_json_int("events_failed", f->failed);
	tool_json_open("events", '[');
	for (long k = 0; k < f->published; k++) {
		tool_json_open(NULL, '{');
		tool_json_int("id", ev->id[k]);
		tool_json_int("received", f->opened - f->missing[k]);
		tool_json_int("missing", f->missing[k]);
		tool_json_num("last_ms", f->last_s[k] * 1e3);
		tool_json_close();
	}
	tool_json_close();
	tool_json_num("event_last_median_ms", f->med_s * 1e3);
	tool_json_num("event_last_max_ms", f->max_s * 1e3);
	tool_json_num("server_cpu_per_event_ms", cpu_per_event * 1e3);
	tool_json_num("server_cpu_events_pct", f->events_wall_s > 0 ? f->cpu_events_s / f->events_wall_s * 100 : NAN);
	tool_json_num("server_cpu_idle_pct", f->idle_wall_s > 0 ? f->cpu_idle_s / f->idle_wall_s * 100 : NAN);
	tool_json_num("client_cpu_open_s", f->client_cpu_open);
	tool_json_num("client_cpu_events_s", f->client_cpu_events);
	tool_json_num("client_busiest_pct", f->client_max_pct);
	tool_json_int("readers_checked", f->v.checked);
	tool_json_int("readers_complete", f->v.complete);
	tool_json_int("readers_with_missed", f->v.with_missed);
	tool_json_int("readers_with_duplicates", f->v.with_dups);
	tool_json_int("readers_out_of_order", f->v.with_disorder);
	tool_json_int("ids_missed", f->v.missed);
	tool_json_int("ids_duplicated", f->v.dups);
	tool_json_int("ids_out_of_order", f->v.disorder);
	tool_json_int("still_open", f->v.still_open);
	tool_json_num("floor_ms", f->floor_s * 1e3);
	tool_json_int("floor_writers", f->workers);
	tool_json_text("floor_writer", "io_uring");
	tool_json_num("floor_ratio", ratio);
	tool_json_num("floor_cpu_per_send_us", f->floor_cpu_s / (double)f->opened * 1e6);
	kmem_json(&f->kd);
	tool_json_num("heartbeat_interval_s", f->hb_interval_s);
	tool_json_num("idle_s", f->idle_wall_s);
	tool_json_int("heartbeats_idle", f->hb_idle);
	tool_json_int("heartbeats_events", f->hb_events);
	tool_json_num("heartbeat_cpu_us", hb_cpu * 1e6);
	tool_json_num("heartbeat_cpu_per_reader_minute_us", per_min * 1e6);
	tool_json_num("client_cpu_idle_s", f->client_cpu_idle);
	tool_json_int("herald_exit", f->herald_exit);
	tool_json_close();
}

/* Fork the client processes, each with its own command pipe (cmd[i]) and
 * the shared pipe up to the parent (m->up). Returns how many started. */
static long start_children(const struct options *o, const struct tool_addr *target, const char *request, struct many *m,
			   pid_t *pids, int *cmd, volatile int *stop)
{
	int up[2];
	if (pipe2(up, O_CLOEXEC) != 0)
		return 0;
	m->up = up[0];
	fflush(stdout);
	fflush(stderr);
	long started = 0;
	for (; started < m->procs; started++) {
		int p[2];
		if (pipe2(p, O_CLOEXEC) != 0)
			break;
		long share = o->n / m->procs + (started < o->n % m->procs);
		pid_t pid = fork();
		if (pid < 0) {
			close(p[0]);
			close(p[1]);
			break;
		}
		if (pid == 0) {
			close(up[0]);
			close(p[1]);
			for (long j = 0; j < started; j++)
				close(cmd[j]);
			int rc = child_main(o, target, request, (int)started, share, o->events, p[0], up[1], stop);
			/* Leave the parent's state (stdio, the database) alone. */
			_exit(rc);
		}
		close(p[0]);
		pids[started] = pid;
		cmd[started] = p[1];
	}
	close(up[1]);
	return started;
}

int many_run(const struct options *o, struct tool_herald *h, const struct tool_addr *target, const char *request,
	     struct publisher *pub, volatile int *stop)
{
	struct events *ev = pub->ev;
	pid_t hp = o->server ? (pid_t)o->pid : h->pid;
	struct many_fig f = { .n = o->n, .procs = o->procs, .workers = o->workers ? o->workers : 1 };
	f.floor_s = f.floor_cpu_s = NAN;
	f.hb_interval_s = o->heartbeat > 0 ? o->heartbeat : 15;
	f.open_s = NAN;
	f.herald_procs = hp ? group_procs(hp) : -1;
	f.rss_before = hp ? tool_rss_kb(hp, 1) : -1;
	long long ovf0 = tool_tcpext_now("ListenOverflows"), drop0 = tool_tcpext_now("ListenDrops");

	struct many m = { .procs = o->procs, .events = ev->k, .ev = ev, .up = -1 };
	m.opened = xcalloc((size_t)m.procs, sizeof(*m.opened));
	m.done = xcalloc((size_t)m.procs, sizeof(*m.done));
	m.marked = xcalloc((size_t)m.procs, sizeof(*m.marked));
	m.cpu_last = xcalloc((size_t)m.procs, sizeof(*m.cpu_last));
	m.ev_count = xcalloc((size_t)m.events, sizeof(long));
	m.ev_reports = xcalloc((size_t)m.events, sizeof(long));
	m.ev_last = xcalloc((size_t)m.events, sizeof(int64_t));
	m.pids = xcalloc((size_t)m.procs, sizeof(pid_t));
	int *cmd = xcalloc((size_t)m.procs, sizeof(int));
	f.last_s = xcalloc((size_t)m.events, sizeof(double));
	f.missing = xcalloc((size_t)m.events, sizeof(long));

	fprintf(stderr, "readers: opening %ld readers from %ld client processes to %s (herald pid %d)\n", o->n,
		o->procs, target->text, (int)hp);
	struct kmem k0, k1;
	kmem_read(&k0);
	int64_t t_begin = tool_now_ns();
	long started = start_children(o, target, request, &m, m.pids, cmd, stop);
	if (started < m.procs) {
		fprintf(stderr, "readers: could start only %ld of %ld client processes: %s\n", started, m.procs,
			strerror(errno));
		m.procs = started;
	}
	m.alive = m.procs;

	/* Open: every child says how its share went. */
	double deadline = tool_now_s() + o->open_timeout + 30;
	double note = tool_now_s();
	while (m.n_opened < m.procs && !*stop && tool_now_s() < deadline) {
		if (pump(&m, 200) < 0)
			break;
		reap(&m);
		if (tool_now_s() - note > 5) {
			note = tool_now_s();
			fprintf(stderr, "readers: %ld of %ld client processes opened their share after %.0f s\n",
				m.n_opened, m.procs, (double)(tool_now_ns() - t_begin) / 1e9);
		}
	}
	int64_t t_open = 0;
	for (long i = 0; i < m.procs; i++) {
		f.opened += m.opened[i].opened;
		f.client_cpu_open += m.opened[i].cpu;
		for (int k = 0; k < E_KINDS; k++)
			f.errs[k] += m.opened[i].errs[k];
		if (m.opened[i].t_last_open > t_open)
			t_open = m.opened[i].t_last_open;
	}
	for (int k = 0; k < E_KINDS; k++)
		f.open_errors += f.errs[k];
	if (t_open)
		f.open_s = (double)(t_open - t_begin) / 1e9;
	f.rss_open = hp ? tool_rss_kb(hp, 1) : -1;
	kmem_read(&k1);
	kmem_delta(&k0, &k1, f.opened, &f.kd);
	kmem_free(&k0);
	kmem_free(&k1);
	long long ovf1 = tool_tcpext_now("ListenOverflows"), drop1 = tool_tcpext_now("ListenDrops");
	f.ovf = ovf0 >= 0 && ovf1 >= 0 ? ovf1 - ovf0 : -1;
	f.drops = drop0 >= 0 && drop1 >= 0 ? drop1 - drop0 : -1;
	fprintf(stderr, "readers: %ld of %ld open in %.3f s; herald PSS %ld -> %ld KiB\n", f.opened, o->n, f.open_s,
		f.rss_before, f.rss_open);

	/* Events: on schedule, --interval apart; each child says when all its
	 * readers had one. */
	long next = 0, reported = 0;
	double cpu_a = server_cpu(hp), t_a = tool_now_s();
	int64_t t_ev = tool_now_ns(), step = (int64_t)(o->interval * 1e9), stragglers = 0;
	while (f.opened > 0 && !*stop) {
		int64_t now = tool_now_ns();
		if (next < ev->k && now >= t_ev + next * step) {
			publish(pub, next);
			if (!ev->failed[next]) {
				struct to_child t = { .type = TO_EXPECT, .id = ev->id[next] };
				tell_all(cmd, m.procs, &t);
			}
			if (++next == ev->k)
				stragglers = tool_now_ns() + (int64_t)(o->event_timeout * 1e9);
			continue;
		}
		while (reported < next && (ev->failed[reported] || m.ev_reports[reported] >= m.alive)) {
			long k = reported++;
			if (!ev->failed[k])
				fprintf(stderr, "readers: event %ld/%ld (id %lld): %ld readers, the last in %.1f ms\n",
					k + 1, ev->k, (long long)ev->id[k], m.ev_count[k],
					ms(m.ev_last[k] - ev->t0[k]));
		}
		if (next == ev->k && (reported == ev->k || now > stragglers))
			break;
		int64_t wait = (next < ev->k ? t_ev + next * step : stragglers) - now;
		if (pump(&m, (int)(wait / 1000000 > 50 ? 50 : wait / 1000000)) < 0)
			break;
		reap(&m);
	}
	f.cpu_events_s = server_cpu(hp) - cpu_a;
	f.events_wall_s = tool_now_s() - t_a;
	for (long i = 0; i < m.procs; i++)
		f.client_cpu_events += m.cpu_last[i] - m.opened[i].cpu;
	for (long i = 0; i < m.procs; i++) {
		double pct = (m.cpu_last[i] - m.opened[i].cpu) / f.events_wall_s * 100;
		if (pct > f.client_max_pct)
			f.client_max_pct = pct;
	}

	/* Idle: the heartbeats each child's readers read from here on. */
	struct to_child mark = { .type = TO_MARK };
	tell_all(cmd, m.procs, &mark);
	deadline = tool_now_s() + 10;
	while (m.n_marked < m.alive && !*stop && tool_now_s() < deadline) {
		if (pump(&m, 50) < 0)
			break;
		reap(&m);
	}
	double cpu_i = server_cpu(hp), t_i = tool_now_s();
	if (o->idle > 0 && f.opened > 0 && !*stop) {
		fprintf(stderr, "readers: idle for %g s\n", o->idle);
		while (!*stop && tool_now_s() - t_i < o->idle)
			if (pump(&m, 100) < 0)
				break;
	}
	f.cpu_idle_s = server_cpu(hp) - cpu_i;
	f.idle_wall_s = tool_now_s() - t_i;

	/* Finish: each child reports what is left and its id check, and exits. */
	int64_t first = 0, last = 0;
	for (long k = 0; k < next; k++) {
		if (ev->failed[k])
			continue;
		if (!first)
			first = ev->id[k];
		last = ev->id[k];
	}
	struct to_child fin = { .type = TO_FINISH, .first = first, .last = last };
	tell_all(cmd, m.procs, &fin);
	deadline = tool_now_s() + 60;
	while (m.n_done < m.procs && tool_now_s() < deadline)
		if (pump(&m, 200) < 0)
			break;
	for (long i = 0; i < m.procs; i++) {
		close(cmd[i]);
		int st;
		if (m.pids[i] && waitpid(m.pids[i], &st, WNOHANG) == 0) {
			kill(m.pids[i], SIGTERM);
			waitpid(m.pids[i], &st, 0);
		}
	}
	close(m.up);
	for (long i = 0; i < m.procs; i++) {
		const struct up_msg *d = &m.done[i];
		if (m.marked[i].type)
			f.hb_events += m.marked[i].heartbeats - m.opened[i].heartbeats;
		if (d->type && m.marked[i].type) {
			f.hb_idle += d->heartbeats - m.marked[i].heartbeats;
			f.client_cpu_idle += d->cpu - m.marked[i].cpu;
		}
		f.v.checked += d->checked;
		f.v.complete += d->complete;
		f.v.still_open += d->still_open;
		f.v.with_missed += d->with_missed;
		f.v.with_dups += d->with_dups;
		f.v.with_disorder += d->with_disorder;
		f.v.missed += d->missed;
		f.v.dups += d->dups;
		f.v.disorder += d->disorder;
	}
	/* Readers whose child never reported its check count as unchecked. */
	f.published = next;
	double *sorted = xcalloc((size_t)(next ? next : 1), sizeof(double));
	size_t ns = 0;
	for (long k = 0; k < next; k++) {
		f.failed += ev->failed[k] != 0;
		f.missing[k] = f.opened - m.ev_count[k];
		f.last_s[k] = m.ev_last[k] && !ev->failed[k] ? (double)(m.ev_last[k] - ev->t0[k]) / 1e9 : NAN;
		if (!isnan(f.last_s[k]))
			sorted[ns++] = f.last_s[k];
	}
	tool_sort_doubles(sorted, ns);
	f.med_s = tool_percentile(sorted, ns, 50);
	f.max_s = ns ? sorted[ns - 1] : NAN;
	free(sorted);

	f.herald_exit = o->server ? 0 : tool_herald_stop(h, o->keep);
	if (!o->no_floor && !*stop && f.opened > 0) {
		fprintf(stderr,
			"readers: measuring the kernel's floor for %ld readers over %ld writers "
			"(load/fanout-floor --uring)\n",
			f.opened, f.workers);
		f.floor_s = run_floor(f.opened, 0, f.workers, 1, &f.floor_cpu_s);
	}
	print_report(&f, ev);

	long missing = 0;
	for (long k = 0; k < f.published; k++)
		missing += f.missing[k];
	int ok = f.opened == o->n && f.v.checked == o->n && f.v.complete == o->n && !f.v.missed && !f.v.dups &&
		 !f.v.disorder && !missing && !f.failed && f.published == ev->k && f.herald_exit == 0 && !*stop;
	free(m.opened);
	free(m.done);
	free(m.marked);
	free(m.cpu_last);
	free(m.ev_count);
	free(m.ev_reports);
	free(m.ev_last);
	free(m.pids);
	free(cmd);
	free(f.last_s);
	free(f.missing);
	return ok ? 0 : 1;
}
