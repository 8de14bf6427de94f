/* SPDX-License-Identifier: BSD-2-Clause */
/* readers-million.c: what load/readers --procs needs around a run of very
 * many readers: the system's limits checked before anything opens (a run
 * that would run out of descriptors, ports or memory half way is refused
 * up front, with the setting that is short and the value to give it), and
 * the kernel's memory read before and after the opens (/proc/meminfo's
 * slab, /proc/net/sockstat's TCP buffer pages, /proc/slabinfo's caches),
 * so that a reader's cost in the kernel is a measured figure beside
 * herald's own. */
#include "readers.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* ---- the limits ------------------------------------------------------------ */

/* What a reader costs the whole machine at most, both ends and the kernel
 * included: 988,000 readers took 8.3 GB here (issue 37), 8.4 KB each. */
#define BYTES_PER_READER 10240L

static long read_long_file(const char *path, int field)
{
	char buf[256];
	if (procstat_read_file(path, buf, sizeof(buf)) <= 0)
		return -1;
	long v[4] = { -1, -1, -1, -1 };
	sscanf(buf, "%ld %ld %ld", &v[0], &v[1], &v[2]);
	return field < 3 ? v[field] : -1;
}

/* A field of /proc/meminfo in KiB, -1 when missing. */
static long meminfo_kb(const char *text, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, name, n) == 0 && p[n] == ':')
			return strtol(p + n + 1, NULL, 10);
	return -1;
}

static const char *count(long v, char *buf, size_t len)
{
	return tool_fmt_count(v, buf, len);
}

int many_check_limits(const struct options *o)
{
	long n = o->n, procs = o->procs, workers = o->workers ? o->workers : 1;
	long sources = o->sources > 1 ? o->sources : 1;
	int short_ = 0;
	char a[32], b[32], c[32], d[32];

	/* Every reader is a socket at each end: the clients' and herald's. */
	long file_max = read_long_file("/proc/sys/fs/file-max", 0);
	long file_used = read_long_file("/proc/sys/fs/file-nr", 0);
	long files_need = 2 * n + 4096;
	if (file_max > 0 && file_used >= 0 && file_max - file_used < files_need) {
		fprintf(stderr,
			"readers: short: fs.file-max is %s and %s files are open on the system; %s readers need "
			"%s more (a socket at each end). Set it: sysctl -w fs.file-max=%ld\n",
			count(file_max, a, sizeof(a)), count(file_used, b, sizeof(b)), count(n, c, sizeof(c)),
			count(files_need, d, sizeof(d)), file_used + files_need + files_need / 4);
		short_ = 1;
	}

	/* Per process: a client's share, and a worker's share with room for
	 * SO_REUSEPORT's uneven spread (the hash of each connection's
	 * addresses picks the worker). */
	long per_client = n / procs + (n % procs != 0) + 64;
	long per_worker_base = n / workers + (n % workers != 0);
	long per_worker = o->server ? 0 : per_worker_base + (long)(4 * sqrt((double)per_worker_base)) + 256;
	long per_proc = per_client > per_worker ? per_client : per_worker;
	const char *who = per_client >= per_worker ? "each client process" : "each herald worker";
	long nr_open = read_long_file("/proc/sys/fs/nr_open", 0);
	if (nr_open > 0 && nr_open < per_proc) {
		fprintf(stderr,
			"readers: short: fs.nr_open is %s, the most descriptors one process may be allowed; %s "
			"needs about %s. Set it: sysctl -w fs.nr_open=%ld (or use more --procs and --workers)\n",
			count(nr_open, a, sizeof(a)), who, count(per_proc, b, sizeof(b)), per_proc + per_proc / 4);
		short_ = 1;
	}
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY && (long)rl.rlim_max < per_proc) {
		long more_w = per_worker_base > 0 && !o->server
				      ? (long)((double)n / ((double)rl.rlim_max * 0.9 - 256) + 1)
				      : 0;
		fprintf(stderr,
			"readers: short: ulimit -n allows %s descriptors a process (hard limit); %s needs about %s "
			"(%s readers over %ld client processes and %ld workers). Raise it (ulimit -Hn %ld as "
			"root, nofile in /etc/security/limits.conf) or spread the readers wider",
			count((long)rl.rlim_max, a, sizeof(a)), who, count(per_proc, b, sizeof(b)),
			count(n, c, sizeof(c)), procs, workers, per_proc + per_proc / 4);
		if (more_w > workers && more_w <= 64)
			fprintf(stderr, " (--workers %ld --procs %ld)", more_w, more_w > procs ? more_w : procs);
		fprintf(stderr, "\n");
		short_ = 1;
	}

	/* Ephemeral ports: the kernel hands a source address the range once
	 * per destination; client i binds 127.0.i+1.1 .. 127.0.i+1.K. */
	long lo = 32768, hi = 60999;
	char buf[64];
	if (procstat_read_file("/proc/sys/net/ipv4/ip_local_port_range", buf, sizeof(buf)) > 0)
		sscanf(buf, "%ld %ld", &lo, &hi);
	long range = hi - lo + 1;
	long per_source = (n / procs + (n % procs != 0) + sources - 1) / sources;
	if (per_source > range) {
		long need_sources = (n / procs + range - 1) / range + 1;
		fprintf(stderr,
			"readers: short: net.ipv4.ip_local_port_range gives %s ports a source address and each "
			"client process opens %s readers from %ld; use --sources %ld or more --procs, or widen it: "
			"sysctl -w net.ipv4.ip_local_port_range=\"1024 65535\"\n",
			count(range, a, sizeof(a)), count(n / procs, b, sizeof(b)), sources, need_sources);
		short_ = 1;
	}

	/* Memory: what the machine has free for both ends and the kernel. */
	char mi[8192];
	long avail = procstat_read_file("/proc/meminfo", mi, sizeof(mi)) > 0 ? meminfo_kb(mi, "MemAvailable") : -1;
	long mem_need_kb = n * (BYTES_PER_READER / 1024);
	if (avail > 0 && avail < mem_need_kb) {
		fprintf(stderr,
			"readers: short: memory: %s MiB available, and %s readers need about %s MiB (about %ld KiB "
			"a reader: two sockets in the kernel, herald and the client). Free memory or ask for fewer "
			"readers\n",
			count(avail / 1024, a, sizeof(a)), count(n, b, sizeof(b)), count(mem_need_kb / 1024, c, sizeof(c)),
			BYTES_PER_READER / 1024);
		short_ = 1;
	}
	/* TCP memory: the kernel charges sockets' queued data and what they
	 * hold in reserve to net.ipv4.tcp_mem, in pages; right after a
	 * publish (or a round of heartbeats) most readers hold a frame their
	 * client has not read yet. Measured here with 3,000 loopback pairs
	 * (/proc/net/sockstat's TCP mem): 0.8 page a socket with one small
	 * frame unread, on top of about 0.9 held after the opens; so a page
	 * and a half a reader. Past the second value the kernel is under
	 * pressure (it shrinks buffers and may drop what a socket receives),
	 * past the third new data waits; the million's first run reached it. */
	long tm[3] = { -1, -1, -1 };
	if (procstat_read_file("/proc/sys/net/ipv4/tcp_mem", buf, sizeof(buf)) > 0)
		sscanf(buf, "%ld %ld %ld", &tm[0], &tm[1], &tm[2]);
	long tcp_need = n + n / 2 + 4096;
	if (tm[1] > 0 && tm[1] < tcp_need) {
		long max = tm[2] > tcp_need + tcp_need / 2 ? tm[2] : tcp_need + tcp_need / 2;
		fprintf(stderr,
			"readers: short: net.ipv4.tcp_mem is \"%ld %ld %ld\" pages; %s readers with an event or a "
			"heartbeat unread at once hold about %s pages of TCP memory (a page and a half a reader), "
			"over the pressure threshold (%s), where the kernel shrinks buffers and drops. Set it: "
			"sysctl -w net.ipv4.tcp_mem=\"%ld %ld %ld\"\n",
			tm[0], tm[1], tm[2], count(n, a, sizeof(a)), count(tcp_need, b, sizeof(b)),
			count(tm[1], c, sizeof(c)), tm[0], tcp_need, max);
		short_ = 1;
	}
	if (short_)
		fprintf(stderr, "readers: nothing was opened.\n");
	return short_ ? -1 : 0;
}

/* ---- the kernel's memory ------------------------------------------------------ */

static int slab_cmp(const void *x, const void *y)
{
	return strcmp(((const struct slab_row *)x)->name, ((const struct slab_row *)y)->name);
}

int kmem_read(struct kmem *k)
{
	memset(k, 0, sizeof(*k));
	char mi[8192];
	if (procstat_read_file("/proc/meminfo", mi, sizeof(mi)) <= 0)
		return -1;
	k->slab_kb = meminfo_kb(mi, "Slab");
	k->sunreclaim_kb = meminfo_kb(mi, "SUnreclaim");
	k->avail_kb = meminfo_kb(mi, "MemAvailable");
	char ss[2048];
	k->tcp_inuse = k->tcp_mem_pages = k->sockets = -1;
	if (procstat_read_file("/proc/net/sockstat", ss, sizeof(ss)) > 0) {
		const char *p = strstr(ss, "sockets: used");
		if (p)
			sscanf(p, "sockets: used %ld", &k->sockets);
		p = strstr(ss, "\nTCP:");
		if (p) {
			const char *q = strstr(p, "inuse");
			if (q)
				sscanf(q, "inuse %ld", &k->tcp_inuse);
			q = strstr(p, " mem ");
			if (q)
				sscanf(q, " mem %ld", &k->tcp_mem_pages);
		}
	}
	/* Readable by root only: without it the slab's total still says
	 * most of it, but not which caches. */
	FILE *f = fopen("/proc/slabinfo", "r");
	if (!f)
		return 0;
	char line[512];
	while (fgets(line, sizeof(line), f)) {
		struct slab_row r;
		long active, num, size;
		if (line[0] == '#' || strncmp(line, "slabinfo", 8) == 0)
			continue;
		if (sscanf(line, "%47s %ld %ld %ld", r.name, &active, &num, &size) != 4)
			continue;
		r.bytes = num * size;
		if (k->nrows == k->cap) {
			k->cap = k->cap ? 2 * k->cap : 256;
			k->rows = xrealloc(k->rows, k->cap * sizeof(*k->rows));
		}
		k->rows[k->nrows++] = r;
	}
	fclose(f);
	qsort(k->rows, k->nrows, sizeof(*k->rows), slab_cmp);
	k->slabinfo = 1;
	return 0;
}

void kmem_free(struct kmem *k)
{
	free(k->rows);
	k->rows = NULL;
	k->nrows = k->cap = 0;
}

static long slab_bytes(const struct kmem *k, const char *name)
{
	struct slab_row key;
	snprintf(key.name, sizeof(key.name), "%s", name);
	const struct slab_row *r = bsearch(&key, k->rows, k->nrows, sizeof(*k->rows), slab_cmp);
	return r ? r->bytes : 0;
}

void kmem_delta(const struct kmem *a, const struct kmem *b, long readers, struct kmem_delta *d)
{
	memset(d, 0, sizeof(*d));
	double n = readers > 0 ? (double)readers : NAN;
	d->slab_per_reader = (double)(b->slab_kb - a->slab_kb) * 1024.0 / n;
	d->buffers_per_reader = a->tcp_mem_pages >= 0 && b->tcp_mem_pages >= 0
					? (double)(b->tcp_mem_pages - a->tcp_mem_pages) * 4096.0 / n
					: NAN;
	d->sockets = a->sockets >= 0 && b->sockets >= 0 ? b->sockets - a->sockets : -1;
	d->kernel_per_reader = d->slab_per_reader + (isnan(d->buffers_per_reader) ? 0 : d->buffers_per_reader);
	if (!a->slabinfo || !b->slabinfo)
		return;
	/* The caches that grew most, biggest first. */
	for (size_t i = 0; i < b->nrows; i++) {
		long grew = b->rows[i].bytes - slab_bytes(a, b->rows[i].name);
		size_t at = d->ntop;
		while (at > 0 && d->top[at - 1].bytes < grew)
			at--;
		if (at >= KMEM_TOP)
			continue;
		if (d->ntop < KMEM_TOP)
			d->ntop++;
		memmove(&d->top[at + 1], &d->top[at], (d->ntop - 1 - at) * sizeof(d->top[0]));
		snprintf(d->top[at].name, sizeof(d->top[at].name), "%s", b->rows[i].name);
		d->top[at].bytes = grew;
	}
}

void kmem_print(const struct kmem_delta *d, long readers)
{
	printf("| kernel memory per reader (both ends) | slab (/proc/meminfo) | TCP buffers (/proc/net/sockstat) | "
	       "sockets opened |\n|---|---|---|---|\n");
	printf("| **%.0f B** | %.0f B | %.0f B | %ld |\n\n", d->kernel_per_reader, d->slab_per_reader,
	       d->buffers_per_reader, d->sockets);
	if (!d->ntop) {
		printf("(/proc/slabinfo was not readable: no caches named.)\n\n");
		return;
	}
	printf("| slab cache (/proc/slabinfo) | grew by | per reader |\n|---|---|---|\n");
	for (size_t i = 0; i < d->ntop; i++)
		printf("| %s | %.1f MiB | %.0f B |\n", d->top[i].name, (double)d->top[i].bytes / 1048576.0,
		       readers > 0 ? (double)d->top[i].bytes / (double)readers : NAN);
	printf("\n");
}

void kmem_json(const struct kmem_delta *d)
{
	tool_json_num("kernel_bytes_per_reader", d->kernel_per_reader);
	tool_json_num("kernel_slab_bytes_per_reader", d->slab_per_reader);
	tool_json_num("kernel_tcp_buffer_bytes_per_reader", d->buffers_per_reader);
	tool_json_int("kernel_sockets_opened", d->sockets);
	tool_json_open("kernel_slab_caches", '{');
	for (size_t i = 0; i < d->ntop; i++)
		tool_json_int(d->top[i].name, d->top[i].bytes);
	tool_json_close();
}
