/* SPDX-License-Identifier: BSD-2-Clause */
/* h2_mem.c: nghttp2's allocator with large blocks in mappings of their
 * own (see h2_mem.h for why). A session's mapped blocks are few, so they
 * are found by a scan of its short table; a pointer not in it came from
 * malloc. */
#include "h2/h2_mem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static size_t page_round(size_t n)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	return (n + page - 1) / page * page;
}

static int find(const struct h2_mem *m, const void *p)
{
	for (int i = 0; i < H2_MEM_MAPS; i++)
		if (p && m->map[i].p == p)
			return i;
	return -1;
}

/* A mapping of at least n bytes in a free slot, or NULL (no slot, or
 * mmap refused: the caller falls back to malloc). */
static void *map_new(struct h2_mem *m, size_t n)
{
	int i;
	for (i = 0; i < H2_MEM_MAPS && m->map[i].p; i++)
		;
	if (i == H2_MEM_MAPS)
		return NULL;
	size_t len = page_round(n);
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	m->map[i].p = p;
	m->map[i].len = len;
	m->map[i].output = m->marking;
	return p;
}

static void *mem_malloc(size_t n, void *arg)
{
	struct h2_mem *m = arg;
	void *p = n >= H2_MEM_MAP_MIN ? map_new(m, n) : NULL;
	return p ? p : malloc(n);
}

static void mem_free(void *p, void *arg)
{
	struct h2_mem *m = arg;
	int i = find(m, p);
	if (i < 0) {
		free(p);
		return;
	}
	munmap(p, m->map[i].len);
	memset(&m->map[i], 0, sizeof(m->map[i]));
}

static void *mem_calloc(size_t k, size_t n, void *arg)
{
	struct h2_mem *m = arg;
	if (n && k > SIZE_MAX / n)
		return NULL;
	/* A fresh mapping reads as zeros already, untouched. */
	void *p = k * n >= H2_MEM_MAP_MIN ? map_new(m, k * n) : NULL;
	return p ? p : calloc(k, n);
}

static void *mem_realloc(void *p, size_t n, void *arg)
{
	struct h2_mem *m = arg;
	if (!p)
		return mem_malloc(n, arg);
	int i = find(m, p);
	if (i < 0)
		return realloc(p, n); /* from malloc, it stays there */
	if (n == 0) {
		mem_free(p, arg);
		return NULL;
	}
	if (n <= m->map[i].len)
		return p; /* it fits in the pages it has */
	size_t len = page_round(n);
	void *q = mremap(p, m->map[i].len, len, MREMAP_MAYMOVE);
	if (q == MAP_FAILED)
		return NULL;
	m->map[i].p = q;
	m->map[i].len = len;
	return q;
}

void h2_mem_init(struct h2_mem *m)
{
	memset(m, 0, sizeof(*m));
	m->mem = (nghttp2_mem){ m, mem_malloc, mem_free, mem_calloc, mem_realloc };
}

void h2_mem_mark(struct h2_mem *m, bool on)
{
	m->marking = on;
}

size_t h2_mem_release(struct h2_mem *m)
{
	size_t n = 0;
	for (int i = 0; i < H2_MEM_MAPS; i++) {
		if (m->map[i].p && m->map[i].output && madvise(m->map[i].p, m->map[i].len, MADV_DONTNEED) == 0)
			n += m->map[i].len;
	}
	return n;
}

size_t h2_mem_mapped(const struct h2_mem *m)
{
	size_t n = 0;
	for (int i = 0; i < H2_MEM_MAPS; i++)
		n += m->map[i].p != NULL;
	return n;
}
