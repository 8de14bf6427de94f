/* SPDX-License-Identifier: BSD-2-Clause */
/* guard.h: place test inputs so they end exactly where a PROT_NONE page
 * begins, so any read past an input's end crashes at once. */
#ifndef HERALD_GUARD_H
#define HERALD_GUARD_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define GUARD_ARENA_PAGES 64
static char *arena_end;
static size_t arena_size;

/* Map the arena and its guard page; exits the test on failure. */
static void arena_init(void)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	arena_size = GUARD_ARENA_PAGES * page;
	char *base = mmap(NULL, arena_size + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED || mprotect(base + arena_size, page, PROT_NONE) != 0) {
		perror("mmap guard page");
		exit(2);
	}
	arena_end = base + arena_size;
}

/* Copy n bytes of s to end right at the guard page; returns the copy. */
static const char *guarded(const char *s, size_t n)
{
	if (n > arena_size) {
		fprintf(stderr, "input of %zu bytes too big for the arena\n", n);
		exit(2);
	}
	memcpy(arena_end - n, s, n);
	return arena_end - n;
}

#endif
