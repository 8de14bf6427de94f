/* SPDX-License-Identifier: BSD-2-Clause */
/* h2_mem.h: the allocator herald gives nghttp2, one per HTTP/2 session.
 *
 * nghttp2 allocates a 16 KiB frame buffer for every session and writes
 * only its first bytes for the small frames herald sends (DATA payloads
 * leave from the shared chunks, never through it). From malloc's heap that
 * block is usually resident whole, since earlier blocks (a TLS handshake's
 * buffers) touched its pages; from an anonymous mapping of its own only
 * the pages written are. So a block of H2_MEM_MAP_MIN bytes or more gets a
 * mapping of its own (up to H2_MEM_MAPS per session, then malloc's heap),
 * and everything smaller comes from malloc.
 *
 * The frame buffer's first page is written by every frame; between
 * frames its contents are dead. A session quiet for a while gives that
 * page back too (h2_mem_release), and the next frame takes a fresh zeroed
 * one. Only blocks marked as output buffers (those nghttp2 allocates while
 * a session is created, h2_mem_mark) are given back: a block that may hold
 * a frame half read must keep its bytes. */
#ifndef HERALD_H2_MEM_H
#define HERALD_H2_MEM_H

#include <nghttp2/nghttp2.h>
#include <stdbool.h>
#include <stddef.h>

#define H2_MEM_MAPS 4
#define H2_MEM_MAP_MIN 8192

struct h2_mem {
	nghttp2_mem mem; /* what nghttp2 is given; its mem_user_data is this struct */
	struct {
		void *p;
		size_t len;  /* the mapping's length, whole pages */
		bool output; /* an output buffer: its bytes are dead between frames */
	} map[H2_MEM_MAPS];
	bool marking; /* blocks mapped now are output buffers */
};

/* Set m up (it must stay where it is while nghttp2 uses &m->mem). */
void h2_mem_init(struct h2_mem *m);

/* While on, the blocks m maps are marked as output buffers. */
void h2_mem_mark(struct h2_mem *m, bool on);

/* Give the pages of the output buffers back to the kernel, which will
 * hand zeroed ones in when they are written again. Call it only when no
 * frame is in them (nghttp2 wants to write nothing). Returns the bytes
 * given back. */
size_t h2_mem_release(struct h2_mem *m);

/* The blocks m has mapped now (for tests). */
size_t h2_mem_mapped(const struct h2_mem *m);

#endif
