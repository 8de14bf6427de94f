/* SPDX-License-Identifier: BSD-2-Clause */
/* fuzz_frame.c: fuzz target for frame_event in src/hub/frame.c. The input is
 *   byte 0-7   the event id (little-endian, any int64)
 *   byte 8     the type's length (up to the bytes left)
 *   then       the type, then the data (all the rest)
 * and inputs shorter than 9 bytes are taken as data alone with id 1 and no
 * type. The data is the tail of the input, so it ends at the driver's
 * PROT_NONE page. Invariant: the frame read back by an EventSource-style
 * parser (tests/unit/sse_parse.h) is exactly one event with that id, the
 * type cut at its first line break ("message" if that leaves nothing), and
 * the data with CRLF and CR turned into LF; and the frame is no larger than
 * the worst case of the encoding. The data also serves as frame_reset's
 * reason (when it is a plain word-like string): the reset reads back with
 * the id, type "reset" and the reason and resume id in its JSON. Up to its
 * first NUL it is frame_refusal's cause too: the body reads back as one
 * event named "refused" with the id and a one-line JSON error as data.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/sse_parse.h"
#include "hub/frame.h"
#include "fuzz.h"

int fuzz_one(const uint8_t *data, size_t size)
{
	int64_t id = 1;
	const char *type = NULL, *d = (const char *)data;
	size_t tn = 0, dn = size;
	if (size >= 9) {
		uint64_t u = 0;
		for (int i = 7; i >= 0; i--)
			u = u << 8 | data[i];
		id = (int64_t)u;
		tn = data[8];
		if (tn > size - 9)
			tn = size - 9;
		type = (const char *)data + 9;
		d = type + tn;
		dn = size - 9 - tn;
	}
	struct store_event ev = { .id = id, .type = type, .type_len = tn, .data = d, .data_len = dn, .topic = "" };
	struct chunk *c = frame_event(&ev);
	FUZZ_ASSERT(c && c->refs == 1);
	/* Each data byte at most once, each line "data: " + LF, plus id and type. */
	size_t breaks = 0;
	for (size_t i = 0; i < dn; i++)
		breaks += d[i] == '\r' || d[i] == '\n';
	FUZZ_ASSERT(c->len <= 4 + 20 + 8 + (tn > 7 ? tn : 7) + 1 + dn + 7 * (breaks + 2) + 1);
	FUZZ_ASSERT(sse_frame_matches(c->data, c->len, id, type, tn, d, dn, stderr));
	chunk_unref(c);

	/* frame_reset with the data as the reason (its callers pass internal
	 * words: no line breaks, quotes or NULs, so those inputs are skipped). */
	if (dn < 4096 && !memchr(d, '\n', dn) && !memchr(d, '\r', dn) && !memchr(d, '"', dn) && !memchr(d, '\0', dn) &&
	    !memchr(d, '\\', dn)) {
		char *reason = malloc(dn + 1);
		FUZZ_ASSERT(reason);
		memcpy(reason, d, dn);
		reason[dn] = '\0';
		int64_t resume = (int64_t)(tn * 7919) - 3;
		c = frame_reset(id, reason, resume);
		FUZZ_ASSERT(c && c->refs == 1);
		char *want = malloc(dn + 128);
		FUZZ_ASSERT(want);
		int wn = snprintf(want, dn + 128, "{\"reason\":\"%s\",\"last_event_id\":%lld", reason,
				  (long long)resume);
		struct sse s;
		sse_parse(&s, c->data, c->len);
		char idtext[32];
		int idn = snprintf(idtext, sizeof(idtext), "%lld", (long long)id);
		FUZZ_ASSERT(s.nev == 1 && !s.pending && s.nunknown == 0);
		FUZZ_ASSERT(sse_buf_is(&s.ev[0].id, idtext, (size_t)idn));
		FUZZ_ASSERT(sse_buf_is(&s.ev[0].type, "reset", 5));
		FUZZ_ASSERT(s.ev[0].data.n > (size_t)wn && memcmp(s.ev[0].data.p, want, (size_t)wn) == 0);
		FUZZ_ASSERT(s.ev[0].data.p[s.ev[0].data.n - 1] == '}');
		sse_free(&s);
		free(want);
		free(reason);
		chunk_unref(c);
	}
	/* frame_refusal with the data up to its first NUL as the cause: the
	 * body reads back as one event named "refused", with the id (none for a
	 * negative one) and the JSON error as its one data line, whatever bytes
	 * the cause holds. */
	size_t cn = strnlen(d, dn < 65536 ? dn : 65536);
	char *cause = malloc(cn + 1);
	FUZZ_ASSERT(cause);
	memcpy(cause, d, cn);
	cause[cn] = '\0';
	int status = tn & 1 ? 503 : 429;
	struct http_head h;
	size_t rn;
	char *rb = frame_refusal(&h, status, (int64_t)tn * 31, id, cause, &rn);
	c = http_head_text(&h, rb, rn);
	http_head_free(&h);
	free(rb);
	FUZZ_ASSERT(c && c->refs == 1);
	const char *end = memmem(c->data, c->len, "\r\n\r\n", 4);
	FUZZ_ASSERT(end);
	const char *body = end + 4;
	size_t bn = c->len - (size_t)(body - c->data);
	char tail[40];
	int tailn = snprintf(tail, sizeof(tail), "\",\"status\":%d}", status);
	struct sse r;
	sse_parse(&r, body, bn);
	FUZZ_ASSERT(r.nev == 1 && !r.pending && r.nunknown == 0 && r.retry == (long long)tn * 31);
	FUZZ_ASSERT(sse_buf_is(&r.ev[0].type, "refused", 7));
	if (id >= 0) {
		char idtext[32];
		int idn = snprintf(idtext, sizeof(idtext), "%lld", (long long)id);
		FUZZ_ASSERT(sse_buf_is(&r.ev[0].id, idtext, (size_t)idn));
	} else {
		FUZZ_ASSERT(r.ev[0].id.n == 0);
	}
	const struct sse_buf *j = &r.ev[0].data;
	FUZZ_ASSERT(j->n >= 10 + cn + (size_t)tailn && j->n <= 10 + 6 * cn + (size_t)tailn);
	FUZZ_ASSERT(memcmp(j->p, "{\"error\":\"", 10) == 0 && memcmp(j->p + j->n - tailn, tail, (size_t)tailn) == 0);
	for (size_t i = 0; i < j->n; i++)
		FUZZ_ASSERT((unsigned char)j->p[i] >= 0x20 && j->p[i] != 0x7f);
	sse_free(&r);
	free(cause);
	chunk_unref(c);
	return 0;
}
