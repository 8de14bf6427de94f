/* SPDX-License-Identifier: BSD-2-Clause */
/* topics.c: what an event costs herald when readers want different topics.
 * N readers (10,000 by default) each ask for T topics (?topic=a,b,...);
 * events go to random topics; every reader must get exactly the events of
 * its topics, once each, in order; and herald's CPU over the events,
 * divided by the events, is the figure.
 *
 * Scenarios, each against a fresh herald of its own:
 *   floor        each reader on its own topic, every event on a topic no
 *                reader asked for (but the last, to reader 0, which tells
 *                that herald has read them all): herald reads each row and
 *                sends it nowhere
 *   one          every reader on the same topic, every event on it
 *   t1, t4, t16  each reader on 1, 4 or 16 topics drawn from a pool of P
 *                (1,000 by default), so an event reaches N*T/P readers
 *   own          reader i on "user/i" (a per-user stream), events to random
 *                users: one reader per event
 *   own-subtree  reader i on the subtree of "user/i" (every topic under
 *                "user/i/"), events to "user/j/inbox"
 *
 * Events are INSERTed into herald's database B at a time, one transaction
 * per batch, as another program would; the next batch goes once every
 * reader has the last one (or --event-timeout passes), so herald is never
 * behind. CPU is utime+stime from /proc/PID/stat (in 10 ms ticks) and the
 * scheduler's own nanosecond count (/proc/PID/schedstat), both from just
 * before the first batch to the moment the last reader has the last event.
 * The readers are tools' SSE client (sse-client.c), each with
 * its own request. */
#include "sse-client.h"

#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char USAGE[] =
	"usage: load/topics [N] [--scenario NAME[,NAME...]] [--events K] [--batch B] [--pool P]\n"
	"       [--ramp M] [--event-timeout S] [--open-timeout S] [--port P] [--run LABEL] [--keep]\n";

static volatile int stop_flag;

enum kind { K_FLOOR, K_ONE, K_POOL, K_OWN, K_OWN_SUBTREE };

struct scenario_def {
	const char *name;
	enum kind kind;
	long per_reader; /* topics each reader asks for */
};

static const struct scenario_def scenarios[] = {
	{ "floor", K_FLOOR, 1 },
	{ "one", K_ONE, 1 },
	{ "t1", K_POOL, 1 },
	{ "t4", K_POOL, 4 },
	{ "t16", K_POOL, 16 },
	{ "own", K_OWN, 1 },
	{ "own-subtree", K_OWN_SUBTREE, 1 },
};

#define NSCEN ARRAY_LEN(scenarios)

struct topts {
	long n, events, batch, pool, ramp;
	double event_timeout, open_timeout;
	const char *only; /* --scenario */
	const char *run;
	int keep;
	long port; /* of each herald started here; 0: the kernel's choice */
};

/* What one scenario measured. */
struct result {
	const struct scenario_def *def;
	int ran;
	long opened, open_errors;
	long long frames_expected, frames, missing, doubled, unwanted;
	long published;
	double reach; /* readers per event, on average */
	uint64_t ticks;
	double cpu_s, sched_s;
	long rss_before_kb, rss_open_kb;
	double secs;
	int timed_out;
	int herald_exit;
};

/* One scenario's run: its readers' topics, the events, what arrived. */
struct ctx {
	const struct topts *o;
	const struct scenario_def *def;
	long universe;    /* topic ids 0 .. universe-1 */
	long *rt;         /* n * per_reader topic ids */
	long *readers_of; /* universe: readers asking for each topic */
	long *ev_topic;   /* events: the topic id, -1 for none */
	int64_t *ev_id;   /* events: the row id */
	long published;
	long *events_on;   /* universe: events published to each topic */
	int64_t *last;     /* n: the newest id reader i had */
	long *got;         /* n: events reader i had */
	long long arrived; /* frames of our events, every reader */
	long long doubled, unwanted;
	struct tool_addr target;
	char host[200];
	char req[4096];
};

/* ---- topics ---------------------------------------------------------------- */

static int fmt_pattern(const struct ctx *x, long t, char *buf, size_t len)
{
	switch (x->def->kind) {
	case K_ONE:
		return snprintf(buf, len, "news");
	case K_POOL:
		return snprintf(buf, len, "pool/%ld", t);
	case K_OWN_SUBTREE:
		return snprintf(buf, len, "user/%ld/*", t);
	default:
		return snprintf(buf, len, "user/%ld", t);
	}
}

static int fmt_event_topic(const struct ctx *x, long t, char *buf, size_t len)
{
	if (t < 0)
		return snprintf(buf, len, "elsewhere");
	if (x->def->kind == K_OWN_SUBTREE)
		return snprintf(buf, len, "user/%ld/inbox", t);
	return fmt_pattern(x, t, buf, len);
}

/* Deal every reader its topics: distinct ones, drawn from the pool. */
static void deal_topics(struct ctx *x)
{
	long n = x->o->n, per = x->def->per_reader;
	x->universe = x->def->kind == K_ONE ? 1 : x->def->kind == K_POOL ? x->o->pool : n;
	x->rt = xcalloc((size_t)(n * per), sizeof(*x->rt));
	x->readers_of = xcalloc((size_t)x->universe, sizeof(long));
	x->events_on = xcalloc((size_t)x->universe, sizeof(long));
	for (long i = 0; i < n; i++)
		for (long j = 0; j < per; j++) {
			long t;
			for (;;) {
				t = x->def->kind == K_ONE    ? 0
				    : x->def->kind == K_POOL ? (long)random_below((uint64_t)x->universe)
							     : i;
				int dup = 0;
				for (long q = 0; q < j; q++)
					dup |= x->rt[i * per + q] == t;
				if (!dup)
					break;
			}
			x->rt[i * per + j] = t;
			x->readers_of[t]++;
		}
}

static int reader_wants(const struct ctx *x, long i, long t)
{
	for (long j = 0; j < x->def->per_reader; j++)
		if (x->rt[i * x->def->per_reader + j] == t)
			return 1;
	return 0;
}

/* ---- the client's hooks ---------------------------------------------------- */

static const char *request_for(void *arg, long i, size_t *len)
{
	struct ctx *x = arg;
	size_t n = (size_t)snprintf(x->req, sizeof(x->req), "GET /api/events/stream?topic=");
	for (long j = 0; j < x->def->per_reader; j++) {
		if (j)
			x->req[n++] = ',';
		n += (size_t)fmt_pattern(x, x->rt[i * x->def->per_reader + j], x->req + n, sizeof(x->req) - n);
	}
	n += (size_t)snprintf(x->req + n, sizeof(x->req) - n,
			      " HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", x->host);
	*len = n;
	return x->req;
}

/* The event of this id: ids grow with each insert, so a binary search. */
static long event_of(const struct ctx *x, int64_t id)
{
	long lo = 0, hi = x->published - 1;
	while (lo <= hi) {
		long mid = lo + (hi - lo) / 2;
		if (x->ev_id[mid] == id)
			return mid;
		if (x->ev_id[mid] < id)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

static void saw(void *arg, long i, int64_t id, int64_t t)
{
	struct ctx *x = arg;
	(void)t;
	long k = event_of(x, id);
	if (k < 0 || x->ev_topic[k] < 0 || !reader_wants(x, i, x->ev_topic[k])) {
		x->unwanted++;
		return;
	}
	if (id <= x->last[i]) {
		x->doubled++; /* again, or out of order */
		return;
	}
	x->last[i] = id;
	x->got[i]++;
	x->arrived++;
}

/* ---- publishing -------------------------------------------------------------- */

static int insert_batch(struct ctx *x, sqlite3 *db, sqlite3_stmt *ins, long count, long long *expect)
{
	if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		return -1;
	for (long b = 0; b < count; b++) {
		long k = x->published;
		long t = (long)random_below((uint64_t)x->universe);
		/* The floor's events go where no reader looks, but for the last:
		 * reader 0's topic, so its arrival says herald has read them all. */
		if (x->def->kind == K_FLOOR)
			t = k + 1 == x->o->events ? x->rt[0] : -1;
		char topic[64];
		fmt_event_topic(x, t, topic, sizeof(topic));
		sqlite3_reset(ins);
		sqlite3_bind_text(ins, 1, topic, -1, SQLITE_TRANSIENT);
		if (sqlite3_step(ins) != SQLITE_DONE) {
			sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
			return -1;
		}
		x->ev_id[k] = sqlite3_last_insert_rowid(db);
		x->ev_topic[k] = t;
		x->published++;
		if (t >= 0) {
			x->events_on[t]++;
			*expect += x->readers_of[t];
		}
	}
	return sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
}

/* ---- one scenario -------------------------------------------------------------- */

static void run_client(struct client *c, double seconds, const long long *until, const long long *have)
{
	double end = tool_now_s() + seconds;
	while (!stop_flag && tool_now_s() < end && (!until || *have < *until))
		client_loop_once(c, 10);
}

static void run_scenario(const struct topts *o, const struct scenario_def *def, struct result *res)
{
	struct ctx x = { .o = o, .def = def };
	memset(res, 0, sizeof(*res));
	res->def = def;
	res->herald_exit = -1;
	deal_topics(&x);
	x.ev_topic = xcalloc((size_t)o->events, sizeof(long));
	x.ev_id = xcalloc((size_t)o->events, sizeof(int64_t));
	x.last = xcalloc((size_t)o->n, sizeof(int64_t));
	x.got = xcalloc((size_t)o->n, sizeof(long));

	struct tool_herald h;
	/* Heartbeats every hour: at 10,000 readers the usual ones would add
	 * their own CPU to the events'. */
	const char *extra[] = { "--heartbeat-interval", "1h", NULL };
	sqlite3 *db = NULL;
	sqlite3_stmt *ins = NULL;
	struct client *c = NULL;
	if (tool_herald_start(&h, (int)o->port, 1024, 0, extra) != 0)
		goto out;
	fprintf(stderr, "topics: %s: started herald %s (pid %d) on 127.0.0.1:%d\n", def->name, h.bin, (int)h.pid,
		h.port);
	res->ran = 1;
	char addr[64];
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", h.port);
	tool_parse_addr(addr, &x.target);
	snprintf(x.host, sizeof(x.host), "%s", x.target.text);
	if (sqlite3_open(h.db, &db) != SQLITE_OK || sqlite3_busy_timeout(db, 5000) != SQLITE_OK ||
	    sqlite3_prepare_v2(
		    db,
		    "INSERT INTO events(type, topic, data, public) VALUES('note', ?1, "
		    "'{\"text\":\"a notification of about a hundred bytes, as a per-user stream carries\"}', 1)",
		    -1, &ins, NULL) != SQLITE_OK) {
		fprintf(stderr, "topics: %s: %s\n", h.db, db ? sqlite3_errmsg(db) : "cannot open");
		goto stop;
	}
	struct tls plain = { 0 }; /* no TLS */
	c = client_new(o->n, &x.target, 1, "", &plain, NULL);
	if (!c)
		goto stop;
	c->request_for = request_for;
	c->saw = saw;
	c->hook_arg = &x;

	res->rss_before_kb = tool_rss_kb(h.pid, 0);
	fprintf(stderr, "topics: %s: opening %ld readers (%ld topic%s each)\n", def->name, o->n, def->per_reader,
		def->per_reader == 1 ? "" : "s");
	double open_end = tool_now_s() + o->open_timeout;
	while (c->c.settled < c->n && !stop_flag && tool_now_s() < open_end) {
		int more = client_connect_more(c, o->ramp);
		client_loop_once(c, more ? 0 : 10);
	}
	client_give_up(c);
	res->opened = c->c.opened;
	for (int k = 0; k < E_KINDS; k++)
		res->open_errors += c->c.errs[k];
	run_client(c, 0.3, NULL, NULL); /* let herald settle */
	res->rss_open_kb = tool_rss_kb(h.pid, 0);

	long long expect = 0;
	uint64_t t0 = 0, t1 = 0;
	tool_cpu_ticks(h.pid, 0, &t0);
	double s0 = tool_cpu_run_s(h.pid);
	double w0 = tool_now_s();
	fprintf(stderr, "topics: %s: %ld events in batches of %ld\n", def->name, o->events, o->batch);
	while (x.published < o->events && !stop_flag) {
		long count = MIN(o->batch, o->events - x.published);
		if (insert_batch(&x, db, ins, count, &expect) != 0) {
			fprintf(stderr, "topics: insert: %s\n", sqlite3_errmsg(db));
			break;
		}
		run_client(c, o->event_timeout, &expect, &x.arrived);
		if (x.arrived < expect) {
			res->timed_out = 1;
			break;
		}
	}
	tool_cpu_ticks(h.pid, 0, &t1);
	double s1 = tool_cpu_run_s(h.pid);
	res->secs = tool_now_s() - w0;
	run_client(c, 0.2, NULL, NULL); /* late doubles would show here */

	res->published = x.published;
	res->frames_expected = expect;
	res->frames = x.arrived;
	res->doubled = x.doubled;
	res->unwanted = x.unwanted;
	for (long i = 0; i < o->n; i++) {
		long want = 0;
		for (long j = 0; j < def->per_reader; j++)
			want += x.events_on[x.rt[i * def->per_reader + j]];
		if (want > x.got[i])
			res->missing += want - x.got[i];
	}
	res->reach = x.published ? (double)expect / (double)x.published : 0;
	res->ticks = t1 - t0;
	long hz = sysconf(_SC_CLK_TCK);
	res->cpu_s = (double)(t1 - t0) / (double)(hz > 0 ? hz : 100);
	res->sched_s = s1 - s0;
stop:
	client_free(c);
	sqlite3_finalize(ins);
	sqlite3_close(db);
	res->herald_exit = tool_herald_stop(&h, o->keep);
out:
	free(x.rt);
	free(x.readers_of);
	free(x.events_on);
	free(x.ev_topic);
	free(x.ev_id);
	free(x.last);
	free(x.got);
}

/* ---- the report ------------------------------------------------------------------- */

static const char *fmt_per_event(double s, long events, char *buf, size_t len)
{
	if (isnan(s) || events <= 0)
		return snprintf(buf, len, "-"), buf;
	return tool_fmt_dur(s / (double)events, buf, len);
}

static int print_report(const struct topts *o, const struct result *r, size_t nr)
{
	int ok = 1;
	char a[32], b[32], c[32], d[32];
	printf("| run | scenario | readers | topics each | readers per event | events | frames | missing / doubled / "
	       "unwanted | server CPU | CPU per event | on-CPU per event (schedstat) | RSS per reader |\n");
	printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
	for (size_t i = 0; i < nr; i++) {
		if (!r[i].ran)
			continue;
		double rss = r[i].opened ? (double)(r[i].rss_open_kb - r[i].rss_before_kb) / (double)r[i].opened : NAN;
		printf("| %s | %s | %s | %ld | %.1f | %ld | %s | %lld / %lld / %lld | %.2f s | %s | **%s** | %.2f KiB "
		       "|\n",
		       o->run, r[i].def->name, tool_fmt_count(r[i].opened, a, sizeof(a)), r[i].def->per_reader,
		       r[i].reach, r[i].published, tool_fmt_count(r[i].frames, b, sizeof(b)), r[i].missing,
		       r[i].doubled, r[i].unwanted, r[i].cpu_s, fmt_per_event(r[i].cpu_s, r[i].published, c, sizeof(c)),
		       fmt_per_event(r[i].sched_s, r[i].published, d, sizeof(d)), rss);
		if (r[i].opened != o->n || r[i].missing || r[i].doubled || r[i].unwanted || r[i].timed_out ||
		    r[i].published != o->events || r[i].herald_exit != 0)
			ok = 0;
	}
	printf("\n");
	for (size_t i = 0; i < nr; i++) {
		if (!r[i].ran) {
			printf("- %s: herald did not start\n", r[i].def->name);
			ok = 0; /* a scenario not measured is no success */
		} else if (r[i].opened != o->n)
			printf("- %s: %ld of %ld readers opened\n", r[i].def->name, r[i].opened, o->n);
		if (r[i].timed_out)
			printf("- %s: not every reader had its events within %.0f s\n", r[i].def->name,
			       o->event_timeout);
		if (r[i].ran && r[i].herald_exit != 0)
			printf("- %s: herald exited with %d\n", r[i].def->name, r[i].herald_exit);
	}
	printf("%s\n", ok ? "Every reader had exactly the events of its topics, once each, in order."
			  : "NOT every reader had exactly the events of its topics: see above.");
	printf("\n");
	tool_json_open(NULL, '{');
	tool_json_text("tool", "topics");
	tool_json_text("run", o->run);
	tool_json_int("readers", o->n);
	tool_json_int("events", o->events);
	tool_json_int("batch", o->batch);
	tool_json_int("pool", o->pool);
	tool_json_open("scenarios", '[');
	for (size_t i = 0; i < nr; i++) {
		if (!r[i].ran)
			continue;
		tool_json_open(NULL, '{');
		tool_json_text("name", r[i].def->name);
		tool_json_int("topics_each", r[i].def->per_reader);
		tool_json_int("opened", r[i].opened);
		tool_json_int("events", r[i].published);
		tool_json_num("readers_per_event", r[i].reach);
		tool_json_int("frames_expected", r[i].frames_expected);
		tool_json_int("frames", r[i].frames);
		tool_json_int("missing", r[i].missing);
		tool_json_int("doubled", r[i].doubled);
		tool_json_int("unwanted", r[i].unwanted);
		tool_json_num("cpu_s", r[i].cpu_s);
		tool_json_num("sched_s", r[i].sched_s);
		tool_json_num("cpu_us_per_event", r[i].published ? r[i].cpu_s * 1e6 / (double)r[i].published : NAN);
		tool_json_num("sched_us_per_event", r[i].published ? r[i].sched_s * 1e6 / (double)r[i].published : NAN);
		tool_json_int("rss_before_kb", r[i].rss_before_kb);
		tool_json_int("rss_open_kb", r[i].rss_open_kb);
		tool_json_num("seconds", r[i].secs);
		tool_json_close();
	}
	tool_json_close();
	tool_json_close();
	return ok ? 0 : 1;
}

/* ---- the command line --------------------------------------------------------------- */

static void help(const struct tool_opt *t)
{
	printf("%s", USAGE);
	printf("\n"
	       "Open N readers, each asking for its topics, publish events to random topics,\n"
	       "check that every reader had exactly the events of its topics, and report\n"
	       "herald's CPU per event, one scenario after another, each against a fresh\n"
	       "herald (started with heartbeats an hour apart). Scenarios: floor (events no\n"
	       "reader wants), one (every reader on one topic), t1, t4, t16 (1, 4 or 16\n"
	       "topics each from a pool), own (reader i on user/i), own-subtree (reader i on\n"
	       "the subtree of user/i). Prints a markdown table and one JSON line.\n"
	       "\n");
	tool_opt_help(t);
	printf("Exit status: 0 when every reader opened and had exactly its events; 1 otherwise; 2 usage.\n");
	tool_herald_help();
}

static int parse_args(struct topts *o, int argc, char **argv)
{
	const struct tool_opt t[] = {
		TOOL_LONG("N", &o->n, 1, 200000, "a number", "  N                  readers (default 10000)\n"),
		TOOL_STRING("--scenario", &o->only, "names",
			    "  --scenario LIST    only these, comma-separated (default: floor,one,t1,t4,t16,own,\n"
			    "                     own-subtree)\n"),
		TOOL_LONG("--events", &o->events, 1, 10000000, "a number",
			  "  --events K         events per scenario (default 2000)\n"),
		TOOL_LONG("--batch", &o->batch, 1, 100000, "a number",
			  "  --batch B          events per INSERT transaction (default 100)\n"),
		TOOL_LONG("--pool", &o->pool, 16, 10000000, "a number",
			  "  --pool P           topics t1, t4 and t16 draw from (default 1000)\n"),
		TOOL_LONG("--ramp", &o->ramp, 0, 1000000, "a number",
			  "  --ramp M           at most M connects in flight (default 0: no cap; a herald under\n"
			  "                     valgrind needs one)\n"),
		TOOL_SECONDS("--event-timeout", &o->event_timeout, 0.01, 3600,
			     "  --event-timeout S  give up on a batch after S seconds (default 30)\n"),
		TOOL_SECONDS("--open-timeout", &o->open_timeout, 0.01, 3600,
			     "  --open-timeout S   give up on opens after S seconds (default 120)\n"),
		TOOL_LONG("--port", &o->port, 0, 65535, "a port number",
			  "  --port P           the port of each herald started here, one scenario after the\n"
			  "                     other (default 0: one the kernel picks)\n"),
		TOOL_STRING("--run", &o->run, "a label",
			    "  --run LABEL        the label in the table's run column (default 1)\n"),
		TOOL_FLAG("--keep", &o->keep, "  --keep             keep each started herald's temporary folder\n"),
		TOOL_HELP("  --help             this text\n"),
		TOOL_END,
	};
	int rc = tool_opt_parse(t, argc, argv, help);
	if (rc >= 0)
		return rc;
	if (o->only) {
		for (const char *p = o->only;; p++) {
			size_t len = strcspn(p, ",");
			int found = 0;
			for (size_t i = 0; i < NSCEN; i++)
				found |= strlen(scenarios[i].name) == len && strncmp(scenarios[i].name, p, len) == 0;
			if (!found)
				return tool_usage_error(
					"no scenario '%.*s' (floor, one, t1, t4, t16, own, own-subtree)", (int)len, p);
			p += len;
			if (!*p)
				break;
		}
	}
	if (o->pool < 16)
		return tool_usage_error("--pool must be at least 16 (t16 draws 16 distinct topics)");
	return -1;
}

static int wanted(const struct topts *o, const char *name)
{
	if (!o->only)
		return 1;
	size_t n = strlen(name);
	for (const char *p = o->only; *p;) {
		size_t len = strcspn(p, ",");
		if (len == n && strncmp(p, name, n) == 0)
			return 1;
		p += len + (p[len] == ',');
	}
	return 0;
}

int main(int argc, char **argv)
{
	tool_usage("topics", USAGE);
	struct topts o = {
		.n = 10000,
		.events = 2000,
		.batch = 100,
		.pool = 1000,
		.event_timeout = 30,
		.open_timeout = 120,
		.run = "1",
	};
	int rc = parse_args(&o, argc, argv);
	if (rc >= 0)
		return rc;
	long soft = 0, hard = 0;
	tool_raise_nofile(&soft, &hard);
	char what[64];
	snprintf(what, sizeof(what), "%ld readers", o.n);
	if (tool_check_fds(o.n + 64, what) != 0)
		return 2;
	tool_catch_signals(&stop_flag);
	char bin[512];
	if (tool_herald_bin(bin, sizeof(bin)) != 0)
		return 1;
	fprintf(stderr, "topics: herald %s\n", bin);
	struct result res[NSCEN];
	memset(res, 0, sizeof(res));
	size_t nr = 0;
	for (size_t i = 0; i < NSCEN && !stop_flag; i++)
		if (wanted(&o, scenarios[i].name))
			run_scenario(&o, &scenarios[i], &res[nr++]);
	rc = print_report(&o, res, nr);
	return stop_flag ? 1 : rc;
}
