/* SPDX-License-Identifier: BSD-2-Clause */
/* util.h: allocation that aborts on failure, and small helpers shared by
 * every module. Fatal exits happen only here (out of memory) and at start-up. */
#ifndef HERALD_UTIL_H
#define HERALD_UTIL_H

#include <stddef.h>
#include <stdint.h>

void *xmalloc(size_t n);
void *xcalloc(size_t nmemb, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);

/* Milliseconds on the monotonic clock. */
uint64_t clock_mono_ms(void);
/* Nanoseconds on the monotonic clock (for measuring short spans). */
uint64_t clock_mono_ns(void);
/* Seconds since the Unix epoch (wall clock). */
int64_t clock_wall_s(void);

/* A uniformly distributed number in [0, n) (0 when n is 0), from a
 * generator seeded from the kernel on first use. Not for secrets. */
uint64_t random_below(uint64_t n);

/* n unpredictable bytes from the kernel (getrandom), drawn from a page
 * refilled a page at a time so that an id per request costs no system
 * call. The page is wiped in a forked child (MADV_WIPEONFORK), so workers
 * never hand out the same bytes; without that, every call asks the kernel. */
void random_bytes(void *buf, size_t n);

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

#endif
