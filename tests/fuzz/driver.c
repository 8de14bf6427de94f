/* SPDX-License-Identifier: BSD-2-Clause */
/* driver.c: a standalone fuzz driver, so replaying the corpora needs no
 * libFuzzer (`make unit`, `make check` and `make test` link it with each
 * target, see fuzz.h). It replays every file in the target's corpus folders,
 * tests/fuzz/corpus/<name> and tests/fuzz/regressions/<name> (the program
 * fuzz_http's name is http), then feeds random mutations of them (bit flips,
 * byte inserts and deletes, interesting bytes, runs, dictionary tokens,
 * splices) to fuzz_one for --seconds (default 1) from a fixed seed, so a run
 * is repeatable. The mutations are blind to coverage: `make fuzz` runs the
 * same targets under libFuzzer for real fuzzing. Every input is copied to end
 * exactly at a PROT_NONE page: an over-read faults at once. Sanitizers catch
 * the rest; the input being run when the process dies is written to
 * --crash-dir (default /tmp) first.
 *
 *   build/asan/fuzz/fuzz_http [--seconds N] [--seed N] [--runs N] [--max-len N]
 *                             [--crash-dir DIR] [--dict FILE] [FILE|DIR]...
 *
 * The dictionary is tests/fuzz/dict/<name>.dict (fuzz_http: http.dict) unless
 * --dict names another; it is in libFuzzer's format, so both fuzzers share
 * one file. With FILE or DIR arguments only those inputs run (reproducing a
 * crash). */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fuzz.h"

/* Present only in sanitizer builds; called when a sanitizer ends the run. */
extern void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

struct input {
	char *name;
	uint8_t *data;
	size_t len;
};

static struct input *inputs;
static size_t ninputs, cap_inputs;

static uint8_t *guard_end; /* first byte of the PROT_NONE page */
static size_t guard_cap;

/* The input running now, for the crash writer. */
static const uint8_t *volatile cur_data;
static volatile size_t cur_len;
static char crash_path[4096];

static uint64_t rng_state;

static size_t min_sz(size_t a, size_t b)
{
	return a < b ? a : b;
}

static uint64_t rnd(void)
{
	/* splitmix64: tiny and good enough to pick mutations. */
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* A number in [0, n), n > 0. */
static size_t below(size_t n)
{
	return (size_t)(rnd() % n);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void write_crash(void)
{
	/* Only async-signal-safe calls: this runs from a signal handler too. */
	const uint8_t *d = cur_data;
	size_t n = cur_len;
	if (!d || !crash_path[0])
		return;
	int fd = open(crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return;
	while (n > 0) {
		ssize_t w = write(fd, d, n);
		if (w <= 0)
			break;
		d += w;
		n -= (size_t)w;
	}
	close(fd);
	static const char msg1[] = "fuzz: crashing input written to ";
	if (write(2, msg1, sizeof(msg1) - 1) < 0 || write(2, crash_path, strlen(crash_path)) < 0 ||
	    write(2, "\n", 1) < 0)
		return;
}

static void on_fatal_signal(int sig)
{
	write_crash();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void install_crash_writer(void)
{
	static const int sanitizer_handled[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL };
	if (__sanitizer_set_death_callback) {
		/* Leave faults to the sanitizer (it prints the report, then calls
		 * back); abort() from a failed invariant is ours. */
		__sanitizer_set_death_callback(write_crash);
		signal(SIGABRT, on_fatal_signal);
		return;
	}
	for (size_t i = 0; i < sizeof(sanitizer_handled) / sizeof(sanitizer_handled[0]); i++)
		signal(sanitizer_handled[i], on_fatal_signal);
	signal(SIGABRT, on_fatal_signal);
}

static void setup_guard(size_t max_len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	guard_cap = (max_len + page - 1) / page * page;
	if (guard_cap == 0)
		guard_cap = page;
	uint8_t *base = mmap(NULL, guard_cap + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED || mprotect(base + guard_cap, page, PROT_NONE) != 0) {
		perror("fuzz: guard page");
		exit(2);
	}
	guard_end = base + guard_cap;
}

static void run(const uint8_t *data, size_t len)
{
	uint8_t *p = guard_end - len;
	if (len)
		memcpy(p, data, len);
	cur_data = p;
	cur_len = len;
	fuzz_one(p, len);
	cur_data = NULL;
}

static void add_input(const char *name, const uint8_t *data, size_t len)
{
	if (ninputs == cap_inputs) {
		cap_inputs = cap_inputs ? 2 * cap_inputs : 64;
		inputs = realloc(inputs, cap_inputs * sizeof(*inputs));
		if (!inputs)
			abort();
	}
	struct input *in = &inputs[ninputs++];
	in->name = strdup(name);
	in->data = malloc(len ? len : 1);
	if (!in->name || !in->data)
		abort();
	memcpy(in->data, data, len);
	in->len = len;
}

/* Load one file, truncated to max_len bytes. Returns false if unreadable. */
static bool load_file(const char *path, size_t max_len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return false;
	uint8_t *buf = malloc(max_len ? max_len : 1);
	if (!buf)
		abort();
	size_t n = fread(buf, 1, max_len, f);
	bool ok = !ferror(f);
	fclose(f);
	if (ok)
		add_input(path, buf, n);
	free(buf);
	return ok;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Load every regular file of a folder, in name order so runs repeat. */
static void load_dir(const char *dir, size_t max_len)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			names = realloc(names, cap * sizeof(*names));
			if (!names)
				abort();
		}
		size_t pl = strlen(dir) + strlen(e->d_name) + 2;
		names[n] = malloc(pl);
		if (!names[n])
			abort();
		snprintf(names[n], pl, "%s/%s", dir, e->d_name);
		n++;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), cmp_str);
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode) && !load_file(names[i], max_len))
			fprintf(stderr, "fuzz: cannot read %s: %s\n", names[i], strerror(errno));
		free(names[i]);
	}
	free(names);
}

static void free_inputs(void)
{
	for (size_t i = 0; i < ninputs; i++) {
		free(inputs[i].name);
		free(inputs[i].data);
	}
	free(inputs);
	inputs = NULL;
	ninputs = cap_inputs = 0;
}

static const uint8_t interesting[] = { '\r', '\n', ':', ' ', '\t', 0,    0xff, 0x7f, 0x80, '%', '+', '&',
				       '=',  '?',  '/', ',', '"',  '\\', '0',  '9',  '-',  '*', 0x01 };

/* Dictionary tokens: bytes, not strings, as a token may hold a NUL. */
struct token {
	uint8_t *data;
	size_t len;
};
static struct token *dict;
static size_t ndict;

static int hex_val(int c)
{
	return isdigit(c) ? c - '0' : tolower(c) - 'a' + 10;
}

/* Decode one dictionary line, libFuzzer's format: blank lines and lines
 * starting with '#' are skipped; otherwise an optional name, '=', and a
 * quoted value whose only escapes are \\, \" and \xHH. Returns 1 for a
 * token (in *out, *out_len), 0 for a line to skip, -1 for a malformed one. */
static int dict_line(char *line, uint8_t *out, size_t *out_len)
{
	size_t l = 0, r = strlen(line);
	while (l < r && isspace((unsigned char)line[l]))
		l++;
	while (r > l && isspace((unsigned char)line[r - 1]))
		r--;
	if (l == r || line[l] == '#')
		return 0;
	if (r - l < 3 || line[r - 1] != '"')
		return -1;
	r--; /* the closing quote */
	while (l < r && line[l] != '"')
		l++;
	if (l == r)
		return -1;
	size_t n = 0;
	for (size_t i = l + 1; i < r; i++) {
		unsigned char c = (unsigned char)line[i];
		if (!isprint(c) && !isspace(c))
			return -1;
		if (c != '\\') {
			out[n++] = c;
		} else if (i + 1 < r && (line[i + 1] == '\\' || line[i + 1] == '"')) {
			out[n++] = (uint8_t)line[++i];
		} else if (i + 3 < r && line[i + 1] == 'x' && isxdigit((unsigned char)line[i + 2]) &&
			   isxdigit((unsigned char)line[i + 3])) {
			out[n++] = (uint8_t)(hex_val((unsigned char)line[i + 2]) << 4 |
					     hex_val((unsigned char)line[i + 3]));
			i += 3;
		} else {
			return -1;
		}
	}
	*out_len = n;
	return 1;
}

/* Load the dictionary at path into dict[]. A missing default file means no
 * dictionary; a missing named one, or any malformed line, is an error. */
static bool load_dict(const char *path, bool named)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		if (!named && errno == ENOENT)
			return true;
		fprintf(stderr, "fuzz: cannot read dictionary %s: %s\n", path, strerror(errno));
		return false;
	}
	char *line = NULL;
	size_t cap = 0, lineno = 0;
	bool ok = true;
	while (getline(&line, &cap, f) >= 0) {
		lineno++;
		uint8_t *tok = malloc(strlen(line) + 1);
		size_t n = 0;
		if (!tok)
			abort();
		int r = dict_line(line, tok, &n);
		if (r <= 0) {
			free(tok);
			if (r < 0) {
				fprintf(stderr, "fuzz: %s:%zu: not a dictionary entry\n", path, lineno);
				ok = false;
				break;
			}
			continue;
		}
		dict = realloc(dict, (ndict + 1) * sizeof(*dict));
		if (!dict)
			abort();
		dict[ndict++] = (struct token){ tok, n };
	}
	free(line);
	fclose(f);
	return ok;
}

static void free_dict(void)
{
	for (size_t i = 0; i < ndict; i++)
		free(dict[i].data);
	free(dict);
	dict = NULL;
	ndict = 0;
}

/* Insert n bytes at pos into buf[0..len), keeping within cap. Returns the
 * new length. */
static size_t insert(uint8_t *buf, size_t len, size_t cap, size_t pos, const uint8_t *src, size_t n)
{
	if (n > cap - len)
		n = cap - len;
	memmove(buf + pos + n, buf + pos, len - pos);
	if (src)
		memmove(buf + pos, src, n);
	return len + n;
}

/* Apply one random mutation to buf[0..len) (capacity cap); returns the new
 * length. */
static size_t mutate_once(uint8_t *buf, size_t len, size_t cap)
{
	const struct input *other = &inputs[below(ninputs)];
	switch (below(12)) {
	case 0: /* flip a bit */
		if (len)
			buf[below(len)] ^= (uint8_t)(1u << below(8));
		return len;
	case 1: /* a random byte */
		if (len)
			buf[below(len)] = (uint8_t)rnd();
		return len;
	case 2: /* an interesting byte in place */
		if (len)
			buf[below(len)] = interesting[below(sizeof(interesting))];
		return len;
	case 3: /* insert an interesting byte */
		return insert(buf, len, cap, below(len + 1), &interesting[below(sizeof(interesting))], 1);
	case 4: { /* delete a range */
		if (!len)
			return len;
		size_t pos = below(len), n = 1 + below(min_sz(len - pos, 16));
		memmove(buf + pos, buf + pos + n, len - pos - n);
		return len - n;
	}
	case 5: { /* duplicate a range of itself */
		if (!len)
			return len;
		size_t pos = below(len), n = 1 + below(min_sz(len - pos, 64));
		uint8_t tmp[64];
		memcpy(tmp, buf + pos, n);
		return insert(buf, len, cap, below(len + 1), tmp, n);
	}
	case 6: { /* splice: our head, another input's tail */
		size_t pos = below(len + 1), opos = below(other->len + 1);
		size_t n = min_sz(other->len - opos, cap - pos);
		memcpy(buf + pos, other->data + opos, n);
		return pos + n;
	}
	case 7: { /* insert a piece of another input */
		if (!other->len)
			return len;
		size_t opos = below(other->len), n = 1 + below(min_sz(other->len - opos, 256));
		return insert(buf, len, cap, below(len + 1), other->data + opos, n);
	}
	case 8: { /* insert a dictionary token */
		if (!ndict)
			return mutate_once(buf, len, cap);
		const struct token *tok = &dict[below(ndict)];
		return insert(buf, len, cap, below(len + 1), tok->data, tok->len);
	}
	case 9: { /* insert a run of one byte, now and then a long one */
		size_t n = below(8) == 0 ? 1 + below(20000) : 1 + below(16);
		size_t pos = below(len + 1);
		uint8_t c = below(2) ? interesting[below(sizeof(interesting))] : (uint8_t)('a' + below(26));
		len = insert(buf, len, cap, pos, NULL, n);
		memset(buf + pos, c, min_sz(n, len - pos));
		return len;
	}
	case 10: /* truncate */
		return len ? below(len) : 0;
	default: { /* nudge an ASCII digit */
		if (!len)
			return len;
		size_t pos = below(len);
		for (size_t i = 0; i < len; i++) {
			size_t j = (pos + i) % len;
			if (buf[j] >= '0' && buf[j] <= '9') {
				buf[j] = (uint8_t)('0' + below(10));
				break;
			}
		}
		return len;
	}
	}
}

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s [--seconds N] [--seed N] [--runs N] [--max-len N] [--crash-dir DIR] [--dict FILE]\n"
		"          [FILE|DIR]...\n"
		"Replays the corpus, then runs random mutations for N seconds (default 1).\n"
		"With FILE/DIR arguments, runs only those inputs.\n",
		prog);
}

static unsigned long long num_arg(const char *prog, const char *opt, const char *v)
{
	char *end;
	errno = 0;
	unsigned long long n = v ? strtoull(v, &end, 0) : 0;
	if (!v || errno || end == v || *end) {
		fprintf(stderr, "%s: %s needs a number\n", prog, opt);
		exit(2);
	}
	return n;
}

int main(int argc, char **argv)
{
	const char *prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	double seconds = 1;
	uint64_t seed = 0x68657261;
	unsigned long long max_runs = 0;
	size_t max_len = 65536;
	const char *crash_dir = "/tmp";
	const char *dict_path = NULL;
	char **only = calloc((size_t)argc + 1, sizeof(*only));
	size_t nonly = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--seconds")) {
			seconds = (double)num_arg(prog, a, v);
			i++;
		} else if (!strcmp(a, "--seed")) {
			seed = num_arg(prog, a, v);
			i++;
		} else if (!strcmp(a, "--runs")) {
			max_runs = num_arg(prog, a, v);
			i++;
		} else if (!strcmp(a, "--max-len")) {
			max_len = (size_t)num_arg(prog, a, v);
			i++;
		} else if (!strcmp(a, "--crash-dir")) {
			if (!v) {
				usage(stderr, prog);
				return 2;
			}
			crash_dir = v;
			i++;
		} else if (!strcmp(a, "--dict")) {
			if (!v) {
				usage(stderr, prog);
				return 2;
			}
			dict_path = v;
			i++;
		} else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout, prog);
			return 0;
		} else if (a[0] == '-') {
			usage(stderr, prog);
			return 2;
		} else {
			only[nonly++] = argv[i];
		}
	}
	if (max_len == 0)
		max_len = 1;

	snprintf(crash_path, sizeof(crash_path), "%s/herald-crash-%s-%ld.bin", crash_dir, prog, (long)getpid());
	setup_guard(max_len);
	install_crash_writer();

	if (nonly) {
		for (size_t i = 0; i < nonly; i++) {
			struct stat st;
			if (stat(only[i], &st) == 0 && S_ISDIR(st.st_mode))
				load_dir(only[i], max_len);
			else if (!load_file(only[i], max_len))
				fprintf(stderr, "%s: cannot read %s: %s\n", prog, only[i], strerror(errno));
		}
		for (size_t i = 0; i < ninputs; i++)
			run(inputs[i].data, inputs[i].len);
		printf("%s: ran %zu inputs\n", prog, ninputs);
		free_inputs();
		free(only);
		return 0;
	}

	/* A missing folder is skipped (git keeps no empty ones), but at least
	 * one input must load. */
	const char *name = strncmp(prog, "fuzz_", 5) ? prog : prog + 5;
	char corpus_dir[4096], regress_dir[4096];
	snprintf(corpus_dir, sizeof(corpus_dir), "tests/fuzz/corpus/%s", name);
	snprintf(regress_dir, sizeof(regress_dir), "tests/fuzz/regressions/%s", name);
	load_dir(corpus_dir, max_len);
	load_dir(regress_dir, max_len);
	if (ninputs == 0) {
		fprintf(stderr, "%s: no corpus files found in %s or %s (run from the repo root)\n", prog, corpus_dir,
			regress_dir);
		return 1;
	}
	double t0 = now_s();
	for (size_t i = 0; i < ninputs; i++)
		run(inputs[i].data, inputs[i].len);
	size_t corpus_n = ninputs;

	char default_dict[4096];
	if (!dict_path)
		snprintf(default_dict, sizeof(default_dict), "tests/fuzz/dict/%s.dict", name);
	if (!load_dict(dict_path ? dict_path : default_dict, dict_path != NULL))
		return 2;
	rng_state = seed;
	uint8_t *buf = malloc(max_len);
	if (!buf)
		abort();
	unsigned long long execs = 0;
	double deadline = t0 + seconds;
	while (max_runs == 0 || execs < max_runs) {
		if ((execs & 15) == 0 && now_s() >= deadline)
			break;
		const struct input *in = &inputs[below(ninputs)];
		size_t len = min_sz(in->len, max_len);
		memcpy(buf, in->data, len);
		size_t nmut = 1 + below((size_t)1 << below(4));
		for (size_t m = 0; m < nmut; m++)
			len = mutate_once(buf, len, max_len);
		run(buf, len);
		execs++;
	}
	double dt = now_s() - t0;
	printf("%s: %zu corpus inputs replayed, %llu mutated execs in %.1f s (%.0f/s), seed %llu, %zu tokens\n", prog,
	       corpus_n, execs, dt, dt > 0 ? (double)execs / dt : 0.0, (unsigned long long)seed, ndict);

	free(buf);
	free_inputs();
	free_dict();
	free(only);
	return 0;
}
