/* SPDX-License-Identifier: BSD-2-Clause */
/* util.c: allocation wrappers that abort on failure, clocks, a seeded
 * random number for jitter and the kernel's random bytes for ids. */
#include "common/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static void oom(size_t n)
{
	fprintf(stderr, "herald: out of memory allocating %zu bytes\n", n);
	abort();
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		oom(n);
	return p;
}

void *xcalloc(size_t nmemb, size_t size)
{
	void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);
	if (!p)
		oom(nmemb * size);
	return p;
}

void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		oom(n);
	return q;
}

char *xstrdup(const char *s)
{
	return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
	char *p = xmalloc(n + 1);
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

uint64_t clock_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t clock_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int64_t clock_wall_s(void)
{
	return (int64_t)time(NULL);
}

/* splitmix64: small, fast, and plenty for spreading timers. */
static uint64_t rng_next(void)
{
	static uint64_t state;
	static int seeded;
	if (!seeded) {
		if (getrandom(&state, sizeof(state), GRND_NONBLOCK) != (ssize_t)sizeof(state))
			state = clock_mono_ns() ^ ((uint64_t)getpid() << 32);
		seeded = 1;
	}
	uint64_t z = (state += UINT64_C(0x9e3779b97f4a7c15));
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

uint64_t random_below(uint64_t n)
{
	if (n == 0)
		return 0;
	/* Reject the top sliver that would make the low values likelier. */
	uint64_t limit = UINT64_MAX - UINT64_MAX % n;
	uint64_t v;
	do
		v = rng_next();
	while (v >= limit);
	return v % n;
}

/* The pool random_bytes draws from: one page, wiped to zeros in a forked
 * child, so left == 0 there and the child fills its own. */
struct random_pool {
	size_t left;
	unsigned char bytes[4096 - sizeof(size_t)];
};

static void kernel_bytes(unsigned char *p, size_t n)
{
	while (n > 0) {
		ssize_t got = getrandom(p, n, 0);
		if (got <= 0) {
			/* Only before the kernel's pool is ready, or interrupted:
			 * fall back to the seeded generator for what is left. */
			for (; n > 0; n--)
				*p++ = (unsigned char)random_below(256);
			return;
		}
		p += got;
		n -= (size_t)got;
	}
}

void random_bytes(void *buf, size_t n)
{
	static struct random_pool *pool;
	static int tried;
	if (!tried) {
		tried = 1;
		void *m = mmap(NULL, sizeof(*pool), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m != MAP_FAILED && madvise(m, sizeof(*pool), MADV_WIPEONFORK) == 0)
			pool = m;
		else if (m != MAP_FAILED)
			munmap(m, sizeof(*pool));
	}
	if (!pool || n > sizeof(pool->bytes)) {
		kernel_bytes(buf, n);
		return;
	}
	if (pool->left < n) {
		kernel_bytes(pool->bytes, sizeof(pool->bytes));
		pool->left = sizeof(pool->bytes);
	}
	/* Hand out from the end and wipe what was handed out, so no byte is
	 * given twice nor kept in memory after use. */
	pool->left -= n;
	memcpy(buf, pool->bytes + pool->left, n);
	memset(pool->bytes + pool->left, 0, n);
}
