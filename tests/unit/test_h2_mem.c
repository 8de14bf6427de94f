/* SPDX-License-Identifier: BSD-2-Clause */
/* test_h2_mem.c: nghttp2's allocator of h2_mem.c. Small blocks come from
 * malloc, large ones from mappings of their own (zeroed, growing in place
 * or moving with their bytes, unmapped when freed, malloc once the table
 * is full); only blocks marked as output buffers give their pages back,
 * reading as zeros afterwards; and a real nghttp2 session made while
 * marking maps exactly its frame buffer, which it frees with itself. */
#include <nghttp2/nghttp2.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "h2/h2_mem.h"

static bool all_zero(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

static void test_blocks(void)
{
	struct h2_mem m;
	h2_mem_init(&m);
	nghttp2_mem *a = &m.mem;
	void *small = a->malloc(100, a->mem_user_data);
	CHECK(small && h2_mem_mapped(&m) == 0);
	unsigned char *big = a->calloc(1, H2_MEM_MAP_MIN, a->mem_user_data);
	CHECK(big && h2_mem_mapped(&m) == 1 && all_zero(big, H2_MEM_MAP_MIN));
	memset(big, 'b', H2_MEM_MAP_MIN);
	/* Growing keeps the bytes. */
	big = a->realloc(big, 3 * H2_MEM_MAP_MIN, a->mem_user_data);
	CHECK(big && h2_mem_mapped(&m) == 1 && big[0] == 'b' && big[H2_MEM_MAP_MIN - 1] == 'b');
	CHECK(all_zero(big + H2_MEM_MAP_MIN, 2 * H2_MEM_MAP_MIN));
	/* Not an output buffer: a release leaves it alone. */
	CHECK_EQ_INT(h2_mem_release(&m), 0);
	CHECK(big[0] == 'b');
	/* A full table: the next large block comes from malloc, and every
	 * block goes back where it came from. */
	void *more[H2_MEM_MAPS + 1];
	for (int i = 0; i < H2_MEM_MAPS; i++)
		more[i] = a->malloc(H2_MEM_MAP_MIN * 2, a->mem_user_data);
	CHECK_EQ_INT(h2_mem_mapped(&m), H2_MEM_MAPS);
	more[H2_MEM_MAPS] = NULL;
	for (int i = 0; i < H2_MEM_MAPS; i++) {
		CHECK(more[i] != NULL);
		memset(more[i], i, H2_MEM_MAP_MIN * 2);
	}
	a->free(big, a->mem_user_data);
	CHECK_EQ_INT(h2_mem_mapped(&m), H2_MEM_MAPS - 1);
	for (int i = 0; i < H2_MEM_MAPS; i++)
		a->free(more[i], a->mem_user_data);
	CHECK_EQ_INT(h2_mem_mapped(&m), 0);
	/* realloc of a small block stays in malloc; to 0 it frees. */
	small = a->realloc(small, 2 * H2_MEM_MAP_MIN, a->mem_user_data);
	CHECK(small && h2_mem_mapped(&m) == 0);
	a->free(small, a->mem_user_data);
	void *gone = a->realloc(a->malloc(H2_MEM_MAP_MIN, a->mem_user_data), 0, a->mem_user_data);
	CHECK(gone == NULL && h2_mem_mapped(&m) == 0);
	a->free(NULL, a->mem_user_data);
}

static void test_release(void)
{
	struct h2_mem m;
	h2_mem_init(&m);
	nghttp2_mem *a = &m.mem;
	h2_mem_mark(&m, true);
	unsigned char *out = a->malloc(16394, a->mem_user_data);
	h2_mem_mark(&m, false);
	unsigned char *other = a->malloc(16394, a->mem_user_data);
	CHECK(out && other && h2_mem_mapped(&m) == 2);
	memset(out, 'o', 16394);
	memset(other, 'k', 16394);
	CHECK_EQ_INT(h2_mem_release(&m), 20480); /* the output buffer's five pages */
	CHECK(all_zero(out, 16394));             /* fresh pages */
	CHECK(other[0] == 'k' && other[16393] == 'k');
	out[0] = 'n'; /* written again, as the next frame would */
	CHECK(out[0] == 'n');
	a->free(out, a->mem_user_data);
	a->free(other, a->mem_user_data);
	CHECK_EQ_INT(h2_mem_mapped(&m), 0);
}

static void test_session(void)
{
	struct h2_mem m;
	h2_mem_init(&m);
	nghttp2_session_callbacks *cbs;
	CHECK(nghttp2_session_callbacks_new(&cbs) == 0);
	nghttp2_session *ng = NULL;
	h2_mem_mark(&m, true);
	CHECK(nghttp2_session_server_new3(&ng, cbs, NULL, NULL, &m.mem) == 0);
	h2_mem_mark(&m, false);
	CHECK_EQ_INT(h2_mem_mapped(&m), 1); /* its frame buffer */
	CHECK(h2_mem_release(&m) > 0);
	/* Frames are made in it after the release as before. */
	nghttp2_settings_entry iv[] = { { NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100 } };
	CHECK(nghttp2_submit_settings(ng, NGHTTP2_FLAG_NONE, iv, 1) == 0);
	const uint8_t *data;
	ssize_t n = nghttp2_session_mem_send(ng, &data);
	CHECK(n == 9 + 6 && data[3] == NGHTTP2_SETTINGS && data[14] == 100);
	nghttp2_session_del(ng);
	CHECK_EQ_INT(h2_mem_mapped(&m), 0);
	nghttp2_session_callbacks_del(cbs);
}

int main(void)
{
	test_blocks();
	test_release();
	test_session();
	return check_done("test_h2_mem");
}
