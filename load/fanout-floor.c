/* SPDX-License-Identifier: BSD-2-Clause */
/* fanout-floor.c: the kernel's floor for fan-out, to compare a server with.
 * N connected loopback TCP socket pairs; this process holds one end of each
 * and writes one ~100-byte message to every socket from one thread, a second
 * process holds the other ends and reads them through epoll. Reported per
 * round: the writer's loop time and CPU, and the time until the last reader
 * has the message; the median of several rounds is the floor. No server can
 * deliver one event to N readers faster than this on the same machine.
 * With --procs W the N pairs are split over W such writers (each with its
 * own reading process), started at one moment: the floor for a group of W
 * herald workers, which fan out to their own readers side by side.
 * With --uring the writer hands the kernel one IORING_OP_SEND per socket
 * through one io_uring instead of calling write(2) for each: up to 4,096
 * sends a submission (io_uring_submit_and_wait), every completion reaped
 * before the next; the floor for a server that submits a round's sends in
 * batches, as herald's send_batch does. */
#include "tool.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MSG_LEN 100
/* --uring: the ring's submission entries, and so the most sends a submission. */
#define URING_ENTRIES 4096

static const char USAGE[] = "usage: load/fanout-floor N [--rounds R] [--procs W] [--unix] [--uring] [--json]\n";

static void help(const struct tool_opt *t)
{
	printf("%s", USAGE);
	printf("\n"
	       "The kernel's floor for fanning one message out to N readers: N connected\n"
	       "loopback TCP socket pairs, one %d-byte write to each from one thread while\n"
	       "a second process reads the other ends. Prints the writer's loop time, its\n"
	       "CPU, and the time until the last reader has the message (median, min and\n"
	       "max of R rounds) as a markdown table and one JSON line. With --procs W the\n"
	       "pairs are split over W writers that start at one moment. With --uring each\n"
	       "writer queues one send per socket into an io_uring instead and submits them\n"
	       "%d at a time: the floor for a server that hands a round's sends to the\n"
	       "kernel in batches.\n"
	       "\n",
	       MSG_LEN, URING_ENTRIES);
	tool_opt_help(t);
	printf("Exit status: 0; 1 when the pairs cannot be set up, or a write or send\n"
	       "does not take the whole message; 2 usage.\n");
}

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t w = write(fd, p, len);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

/* Read exactly len bytes within timeout seconds; 0 or -1. */
static int read_all(int fd, void *buf, size_t len, double timeout)
{
	char *p = buf;
	double deadline = tool_now_s() + timeout;
	while (len > 0) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		double left = deadline - tool_now_s();
		if (left <= 0)
			return -1;
		int r = poll(&pf, 1, (int)ceil(left * 1000));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		ssize_t got = read(fd, p, len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return -1;
		p += got;
		len -= (size_t)got;
	}
	return 0;
}

/* The reading side: connect n sockets, say so, then per round wait until
 * every socket has delivered one message and send back the monotonic time the
 * last one arrived. Exits when the writer closes the control pipe. */
/* Source addresses over TCP: 127.64.G.1 and up, a new one for every
 * SOURCE_SPAN sockets of group G. From one address, connect's search for a
 * free port slows as the ports fill (a million sockets from 127.0.0.1 did
 * not finish connecting in five minutes); load/readers spreads its clients
 * the same way. */
#define SOURCE_SPAN 4000

static int bind_source(int fd, long group, long i)
{
	struct sockaddr_in src = { .sin_family = AF_INET };
	src.sin_addr.s_addr = htonl(0x7F400000u | (uint32_t)(group & 0xff) << 8 | (uint32_t)(1 + i / SOURCE_SPAN));
	int one = 1;
	/* The port is chosen at connect, by the whole 4-tuple. */
	setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
	return bind(fd, (const struct sockaddr *)&src, sizeof(src));
}

static int reader_main(const struct sockaddr_storage *sa, socklen_t sl, long group, long n, int rounds, int ctl_out,
		       int go_in)
{
	int *fds = xmalloc((size_t)n * sizeof(*fds));
	for (long i = 0; i < n; i++) {
		fds[i] = socket(sa->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fds[i] >= 0 && sa->ss_family == AF_INET && bind_source(fds[i], group, i) != 0) {
			fprintf(stderr, "fanout-floor: reader bind to a source address: %s\n", strerror(errno));
			return 1;
		}
		if (fds[i] < 0 || connect(fds[i], (const struct sockaddr *)sa, sl) != 0) {
			fprintf(stderr, "fanout-floor: reader connect %ld: %s\n", i, strerror(errno));
			return 1;
		}
	}
	int ep = epoll_create1(EPOLL_CLOEXEC);
	for (long i = 0; i < n; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u64 = (uint64_t)i };
		if (epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev) != 0) {
			fprintf(stderr, "fanout-floor: epoll_ctl: %s\n", strerror(errno));
			return 1;
		}
	}
	uint32_t *got = xcalloc((size_t)n, sizeof(*got));
	char ready = 'R';
	if (write_all(ctl_out, &ready, 1) != 0)
		return 1;
	struct epoll_event *evs = xmalloc(1024 * sizeof(*evs));
	char buf[4096];
	for (int round = 1; round <= rounds; round++) {
		/* Wait for the writer's go, so the round's clock starts after we sit
		 * in epoll_wait like a real client would. */
		char go;
		if (read_all(go_in, &go, 1, 120) != 0)
			return 1;
		long complete = 0;
		int64_t last = 0;
		uint32_t want = (uint32_t)round * MSG_LEN;
		while (complete < n) {
			int k = epoll_wait(ep, evs, 1024, 30000);
			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0) {
				fprintf(stderr, "fanout-floor: reader waited 30 s; %ld of %ld had round %d\n", complete,
					n, round);
				return 1;
			}
			for (int j = 0; j < k; j++) {
				long i = (long)evs[j].data.u64;
				ssize_t r = read(fds[i], buf, sizeof(buf));
				if (r == 0)
					return 1; /* the writer gave up (and said why) */
				if (r < 0)
					continue;
				uint32_t before = got[i];
				got[i] += (uint32_t)r;
				if (before < want && got[i] >= want)
					complete++;
			}
			last = tool_now_ns();
		}
		if (write_all(ctl_out, &last, sizeof(last)) != 0)
			return 1;
	}
	free(evs);
	free(got);
	for (long i = 0; i < n; i++)
		close(fds[i]);
	free(fds);
	close(ep);
	return 0;
}

static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The parent's hold on one writer process of --procs: the pipes of its
 * round protocol (see group_run) and its pid. */
struct group {
	pid_t pid;
	int to, from; /* parent -> writer, writer -> parent */
};

/* One round's result from a writer process of --procs. */
struct group_round {
	double loop, cpu;
	int64_t last; /* monotonic time its last reader had the message */
};

/* --uring: a ring of URING_ENTRIES for one writer, made in the writer
 * itself after its reading process is forked (the reader holds no copy).
 * Asks for the flags that spare a lone submitter work (as herald's
 * send_batch does) and, on a kernel that knows none of them, for none.
 * 0, or -1 after saying why. */
static int uring_open(struct io_uring *ring)
{
	int r = io_uring_queue_init(URING_ENTRIES, ring,
				    IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SINGLE_ISSUER);
	if (r == -EINVAL)
		r = io_uring_queue_init(URING_ENTRIES, ring, 0);
	if (r < 0) {
		fprintf(stderr, "fanout-floor: io_uring_queue_init (%d entries): %s\n", URING_ENTRIES, strerror(-r));
		return -1;
	}
	return 0;
}

/* --uring: one round's sends of len bytes of msg to each of fds[0..n): an
 * IORING_OP_SEND per socket (MSG_DONTWAIT, so a socket without room fails
 * with -EAGAIN rather than waiting), submitted up to the ring's size at a
 * time with io_uring_submit_and_wait, and every completion of a submission
 * reaped before the next one is queued (the completion ring holds twice the
 * submission ring, so it never overflows). 0, or -1 after saying why: the
 * kernel not taking a submission whole, or any send's result other than
 * len (the first such named, with how many of its submission's failed). */
static int uring_round(struct io_uring *ring, const int *fds, long n, const char *msg, size_t len, long round)
{
	unsigned batch = ring->sq.ring_entries < URING_ENTRIES ? ring->sq.ring_entries : URING_ENTRIES;
	long failed = 0, first = -1;
	int first_res = 0;
	for (long i = 0; i < n;) {
		unsigned k = 0;
		for (; k < batch && i < n; k++, i++) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
			if (!sqe)
				break; /* not expected: every submission is reaped whole */
			io_uring_prep_send(sqe, fds[i], msg, len, MSG_DONTWAIT | MSG_NOSIGNAL);
			io_uring_sqe_set_data64(sqe, (uint64_t)i);
		}
		if (k == 0) {
			fprintf(stderr, "fanout-floor: io_uring has no free submission entry in round %ld\n", round);
			return -1;
		}
		int r;
		do
			r = io_uring_submit_and_wait(ring, k);
		while (r == -EINTR);
		if (r < 0) {
			fprintf(stderr, "fanout-floor: io_uring_submit_and_wait (%u sends) in round %ld: %s\n", k,
				round, strerror(-r));
			return -1;
		}
		unsigned submitted = (unsigned)r, got = 0;
		while (got < submitted) {
			struct io_uring_cqe *cqe;
			int w = io_uring_wait_cqe(ring, &cqe);
			if (w == -EINTR)
				continue;
			if (w < 0) {
				fprintf(stderr,
					"fanout-floor: io_uring_wait_cqe (%u of %u sends in) in round %ld: %s\n", got,
					submitted, round, strerror(-w));
				return -1;
			}
			unsigned head, seen = 0;
			io_uring_for_each_cqe(ring, head, cqe)
			{
				if (cqe->res != (int)len) {
					if (failed++ == 0) {
						first = (long)io_uring_cqe_get_data64(cqe);
						first_res = cqe->res;
					}
				}
				seen++;
			}
			io_uring_cq_advance(ring, seen);
			got += seen;
		}
		if (submitted < k) {
			fprintf(stderr, "fanout-floor: io_uring took %u of %u sends in round %ld\n", submitted, k,
				round);
			return -1;
		}
		if (failed > 0)
			break;
	}
	if (failed > 0) {
		if (first_res < 0)
			fprintf(stderr,
				"fanout-floor: io_uring send to socket %ld in round %ld: %s (%ld of its batch "
				"failed)\n",
				first, round, strerror(-first_res), failed);
		else
			fprintf(stderr,
				"fanout-floor: io_uring send to socket %ld in round %ld took %d of %zu bytes "
				"(%ld of its batch failed)\n",
				first, round, first_res, len, failed);
		return -1;
	}
	return 0;
}

/* Sleep until the monotonic clock reads t (ns). */
static void sleep_until(int64_t t)
{
	struct timespec ts = { .tv_sec = (time_t)(t / 1000000000), .tv_nsec = (long)(t % 1000000000) };
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* One writer and its reading process: set up n pairs, then run the rounds
 * (by write(2), or with use_uring through an io_uring: uring_round), each
 * round's loop time, CPU and time until the last reader had it into
 * loop[], cpu[] and last[] (seconds from the round's start). With sync_in
 * >= 0 (a writer of --procs) each round first says 'r' on sync_out once its
 * reader sits in epoll_wait, then waits for the start time on sync_in,
 * starts writing at that moment and answers a struct group_round; loop[]
 * and the others are not filled then. Returns 0, or 1 after saying why. */
/* In a forked process: end when the process that forked it ends, so that a
 * floor stopped by its caller (load/readers ends it after five minutes)
 * leaves no writer or reader behind. */
static void die_with_parent(void)
{
	pid_t parent = getppid();
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
}

static int group_run(long group, long n, long rounds, int use_unix, int use_uring, int sync_in, int sync_out,
		     double *loop, double *cpu, double *last)
{
	/* The listener: loopback TCP on a kernel-chosen port, or a unix socket
	 * in a temporary folder (removed as soon as both ends are connected). */
	struct sockaddr_storage sa;
	memset(&sa, 0, sizeof(sa));
	socklen_t sl;
	char tmpdir[256] = "", upath[300] = "";
	if (use_unix) {
		const char *tmp = getenv("TMPDIR");
		snprintf(tmpdir, sizeof(tmpdir), "%s/fanout-floor-XXXXXX", tmp && *tmp ? tmp : "/tmp");
		if (!mkdtemp(tmpdir)) {
			fprintf(stderr, "fanout-floor: mkdtemp: %s\n", strerror(errno));
			return 1;
		}
		struct sockaddr_un *un = (struct sockaddr_un *)&sa;
		snprintf(upath, sizeof(upath), "%s/s", tmpdir);
		if (strlen(upath) >= sizeof(un->sun_path)) {
			fprintf(stderr, "fanout-floor: %s is too long a socket path; set TMPDIR shorter\n", upath);
			rmdir(tmpdir);
			return 1;
		}
		un->sun_family = AF_UNIX;
		memcpy(un->sun_path, upath, strlen(upath) + 1);
		sl = sizeof(*un);
	} else {
		struct sockaddr_in *in = (struct sockaddr_in *)&sa;
		in->sin_family = AF_INET;
		in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sl = sizeof(*in);
	}
	int lfd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	long somax = 4096;
	procstat_sysctl("net.core.somaxconn", &somax);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sl) != 0 || listen(lfd, (int)(n < somax ? n : somax)) != 0 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &sl) != 0) {
		fprintf(stderr, "fanout-floor: listener: %s\n", strerror(errno));
		if (lfd >= 0)
			close(lfd);
		if (tmpdir[0]) {
			unlink(upath);
			rmdir(tmpdir);
		}
		return 1;
	}
	int ctl[2], go[2];
	if (pipe2(ctl, O_CLOEXEC) != 0 || pipe2(go, O_CLOEXEC) != 0) {
		fprintf(stderr, "fanout-floor: pipe: %s\n", strerror(errno));
		return 1;
	}
	fflush(stdout);
	pid_t child = fork();
	if (child < 0) {
		fprintf(stderr, "fanout-floor: fork: %s\n", strerror(errno));
		return 1;
	}
	if (child == 0) {
		close(lfd);
		close(ctl[0]);
		close(go[1]);
		if (sync_in >= 0) {
			close(sync_in);
			close(sync_out);
		}
		die_with_parent();
		_exit(reader_main(&sa, sl, group, n, (int)rounds, ctl[1], go[0]));
	}
	close(ctl[1]);
	close(go[0]);

	int *fds = xmalloc((size_t)n * sizeof(*fds));
	int rc = 1;
	long accepted = 0;
	struct io_uring ring;
	int have_ring = 0;
	for (; accepted < n; accepted++) {
		fds[accepted] = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fds[accepted] < 0) {
			fprintf(stderr, "fanout-floor: accept: %s\n", strerror(errno));
			goto out;
		}
		/* A round's write must not wait behind an unacknowledged one. */
		int one = 1;
		if (!use_unix)
			setsockopt(fds[accepted], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	close(lfd);
	lfd = -1;
	if (tmpdir[0]) {
		unlink(upath);
		rmdir(tmpdir);
		tmpdir[0] = '\0';
	}
	char ready;
	if (read_all(ctl[0], &ready, 1, 120) != 0) {
		fprintf(stderr, "fanout-floor: the reading process did not get ready\n");
		goto out;
	}
	if (use_uring) {
		if (uring_open(&ring) != 0)
			goto out;
		have_ring = 1;
	}

	char msg[MSG_LEN];
	memset(msg, 'x', sizeof(msg));
	memcpy(msg, "data: fanout-floor\n", 19);
	msg[MSG_LEN - 2] = '\n';
	msg[MSG_LEN - 1] = '\n';
	for (long r = 0; r < rounds; r++) {
		char g = 'g';
		if (write_all(go[1], &g, 1) != 0)
			goto out;
		tool_sleep(0.05, NULL); /* let the reader settle into epoll_wait */
		int64_t start = 0;
		if (sync_in >= 0) {
			/* Every writer starts at the moment the parent names. */
			char rd = 'r';
			if (write_all(sync_out, &rd, 1) != 0 || read_all(sync_in, &start, sizeof(start), 300) != 0)
				goto out;
			sleep_until(start);
		}
		double c0 = cpu_now();
		int64_t t0 = tool_now_ns();
		if (use_uring) {
			if (uring_round(&ring, fds, n, msg, sizeof(msg), r + 1) != 0)
				goto out;
		} else {
			for (long i = 0; i < n; i++)
				if (write(fds[i], msg, sizeof(msg)) != (ssize_t)sizeof(msg)) {
					fprintf(stderr, "fanout-floor: write: %s\n", strerror(errno));
					goto out;
				}
		}
		int64_t t1 = tool_now_ns();
		double c1 = cpu_now();
		int64_t tl;
		if (read_all(ctl[0], &tl, sizeof(tl), 60) != 0) {
			fprintf(stderr, "fanout-floor: no answer from the reading process in round %ld\n", r + 1);
			goto out;
		}
		if (sync_in >= 0) {
			struct group_round gr = { .loop = (double)(t1 - t0) / 1e9, .cpu = c1 - c0, .last = tl };
			if (write_all(sync_out, &gr, sizeof(gr)) != 0)
				goto out;
			continue;
		}
		loop[r] = (double)(t1 - t0) / 1e9;
		cpu[r] = c1 - c0;
		last[r] = (double)(tl - t0) / 1e9;
	}
	rc = 0;
out:
	if (have_ring)
		io_uring_queue_exit(&ring);
	close(go[1]);
	for (long i = 0; i < accepted; i++)
		close(fds[i]);
	free(fds);
	if (lfd >= 0)
		close(lfd);
	if (tmpdir[0]) {
		unlink(upath);
		rmdir(tmpdir);
	}
	close(ctl[0]);
	int st;
	waitpid(child, &st, 0);
	if (rc == 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
		rc = 1;
	return rc;
}

/* --procs W: W writer processes (each with its reading process) of about
 * n/W pairs each. Every round all of them start writing at one moment the
 * parent names, a little ahead; the round's time to the last reader is from
 * that moment until the last reader of all had the message, its loop time
 * the slowest writer's and its CPU the writers' sum. Returns 0 or 1. */
static int groups_run(long n, long rounds, int use_unix, int use_uring, long procs, double *loop, double *cpu,
		      double *last)
{
	struct group *g = xcalloc((size_t)procs, sizeof(*g));
	int rc = 1;
	long started = 0;
	fflush(stdout);
	for (; started < procs; started++) {
		int down[2], up[2];
		if (pipe2(down, O_CLOEXEC) != 0 || pipe2(up, O_CLOEXEC) != 0) {
			fprintf(stderr, "fanout-floor: pipe: %s\n", strerror(errno));
			goto out;
		}
		long share = n / procs + (started < n % procs);
		pid_t pid = fork();
		if (pid < 0) {
			fprintf(stderr, "fanout-floor: fork: %s\n", strerror(errno));
			close(down[0]);
			close(down[1]);
			close(up[0]);
			close(up[1]);
			goto out;
		}
		if (pid == 0) {
			for (long j = 0; j < started; j++) {
				close(g[j].to);
				close(g[j].from);
			}
			close(down[1]);
			close(up[0]);
			die_with_parent();
			_exit(group_run(started, share, rounds, use_unix, use_uring, down[0], up[1], NULL, NULL, NULL));
		}
		close(down[0]);
		close(up[1]);
		g[started] = (struct group){ .pid = pid, .to = down[1], .from = up[0] };
	}
	for (long r = 0; r < rounds; r++) {
		for (long j = 0; j < procs; j++) {
			char rd;
			if (read_all(g[j].from, &rd, 1, 300) != 0) {
				fprintf(stderr, "fanout-floor: writer %ld did not get ready for round %ld\n", j + 1,
					r + 1);
				goto out;
			}
		}
		/* Far enough ahead that every writer is asleep waiting for it. */
		int64_t start = tool_now_ns() + 20000000;
		for (long j = 0; j < procs; j++)
			if (write_all(g[j].to, &start, sizeof(start)) != 0)
				goto out;
		double lmax = 0, csum = 0;
		int64_t tl = start;
		for (long j = 0; j < procs; j++) {
			struct group_round gr;
			if (read_all(g[j].from, &gr, sizeof(gr), 120) != 0) {
				fprintf(stderr, "fanout-floor: no answer from writer %ld in round %ld\n", j + 1, r + 1);
				goto out;
			}
			lmax = gr.loop > lmax ? gr.loop : lmax;
			csum += gr.cpu;
			tl = gr.last > tl ? gr.last : tl;
		}
		loop[r] = lmax;
		cpu[r] = csum;
		last[r] = (double)(tl - start) / 1e9;
	}
	rc = 0;
out:
	for (long j = 0; j < started; j++) {
		close(g[j].to);
		close(g[j].from);
	}
	for (long j = 0; j < started; j++) {
		int st;
		waitpid(g[j].pid, &st, 0);
		if (rc == 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
			rc = 1;
	}
	free(g);
	return rc;
}

int main(int argc, char **argv)
{
	tool_usage("fanout-floor", USAGE);
	long n = -1, rounds = 7, procs = 1;
	int json_only = 0, use_unix = 0, use_uring = 0;
	const struct tool_opt opts[] = {
		TOOL_LONG("N", &n, 1, 2000000, "a number",
			  "  N             socket pairs (1 to 2000000; each process holds N descriptors,\n"
			  "                or its share of them with --procs)\n"),
		TOOL_LONG("--rounds", &rounds, 1, 1000, "a number",
			  "  --rounds R    rounds to take the median of (default 7)\n"),
		TOOL_LONG("--procs", &procs, 1, 64, "a number",
			  "  --procs W     W writer processes, each with its own reading process and\n"
			  "                listener, fanning out to their share of the N at one moment;\n"
			  "                the time is until the last reader of all has the message\n"
			  "                (the floor for a group of W herald workers; default 1)\n"),
		TOOL_FLAG("--unix", &use_unix, "  --unix        unix stream socket pairs instead of loopback TCP\n"),
		TOOL_FLAG("--uring", &use_uring,
			  "  --uring       send through an io_uring of 4096 entries instead of write(2):\n"
			  "                one IORING_OP_SEND per socket, submitted up to 4096 at a time\n"
			  "                (io_uring_submit_and_wait) and every completion reaped; a\n"
			  "                result short of the whole message fails the run\n"),
		TOOL_FLAG("--json", &json_only, "  --json        only the JSON line\n"),
		TOOL_HELP("  --help        this text\n"),
		TOOL_END,
	};
	int rc = tool_opt_parse(opts, argc, argv, help);
	if (rc >= 0)
		return rc;
	if (n < 0)
		return tool_usage_error("say how many socket pairs (N)");
	if (procs > n)
		return tool_usage_error("--procs may be at most N");
	char what[96];
	long per = n / procs + (n % procs != 0);
	snprintf(what, sizeof(what), "%ld socket pairs (in each of two processes)", per);
	if (tool_check_fds(per + 32, what) != 0)
		return 2;
	signal(SIGPIPE, SIG_IGN);

	double *loop = xmalloc((size_t)rounds * sizeof(double));
	double *cpu = xmalloc((size_t)rounds * sizeof(double));
	double *last = xmalloc((size_t)rounds * sizeof(double));
	rc = procs > 1 ? groups_run(n, rounds, use_unix, use_uring, procs, loop, cpu, last)
		       : group_run(0, n, rounds, use_unix, use_uring, -1, -1, loop, cpu, last);
	if (rc == 0) {
		tool_sort_doubles(loop, (size_t)rounds);
		tool_sort_doubles(cpu, (size_t)rounds);
		tool_sort_doubles(last, (size_t)rounds);
		double mloop = tool_percentile(loop, (size_t)rounds, 50);
		double mcpu = tool_percentile(cpu, (size_t)rounds, 50);
		double mlast = tool_percentile(last, (size_t)rounds, 50);
		double last_min = last[0];
		double last_max = last[rounds - 1];
		char b1[32], b2[32], b3[32], b4[32], b5[32], c1[32];
		if (!json_only) {
			printf("| floor: %s pairs (N), %s | writers | rounds | writer loop | per write | writer CPU | "
			       "last reader has it (median) | min – max |\n|---|---|---|---|---|---|---|---|\n",
			       use_unix ? "unix" : "TCP",
			       use_uring ? "io_uring sends (4,096 a submission)" : "write(2) to each");
			printf("| %s | %ld | %ld | %s | %.1f us | %s | **%s** | %s – %s |\n",
			       tool_fmt_count(n, c1, sizeof(c1)), procs, rounds, tool_fmt_dur(mloop, b1, sizeof(b1)),
			       mloop / (double)per * 1e6, tool_fmt_dur(mcpu, b2, sizeof(b2)),
			       tool_fmt_dur(mlast, b3, sizeof(b3)), tool_fmt_dur(last_min, b4, sizeof(b4)),
			       tool_fmt_dur(last_max, b5, sizeof(b5)));
		}
		tool_json_open(NULL, '{');
		tool_json_text("tool", "fanout-floor");
		tool_json_text("transport", use_unix ? "unix" : "tcp");
		tool_json_text("writer", use_uring ? "io_uring" : "write");
		tool_json_int("n", n);
		tool_json_int("procs", procs);
		tool_json_int("rounds", rounds);
		tool_json_int("msg_bytes", MSG_LEN);
		tool_json_num("loop_ms", mloop * 1e3);
		tool_json_num("per_write_us", mloop / (double)per * 1e6);
		tool_json_num("cpu_ms", mcpu * 1e3);
		tool_json_num("last_reader_ms", mlast * 1e3);
		tool_json_num("last_reader_min_ms", last_min * 1e3);
		tool_json_num("last_reader_max_ms", last_max * 1e3);
		tool_json_close();
	}
	free(loop);
	free(cpu);
	free(last);
	return rc;
}
