/* SPDX-License-Identifier: BSD-2-Clause */
/* chunk.c: reference-counted immutable byte blocks. */
#include "common/chunk.h"

#include <stdlib.h>
#include <string.h>

#include "common/util.h"

struct chunk *chunk_new(size_t len)
{
	struct chunk *c = xmalloc(sizeof(*c) + len);
	c->refs = 1;
	c->len = (uint32_t)len;
	c->id = 0;
	return c;
}

struct chunk *chunk_from(const void *p, size_t len)
{
	struct chunk *c = chunk_new(len);
	memcpy(c->data, p, len);
	return c;
}

struct chunk *chunk_ref(struct chunk *c)
{
	c->refs++;
	return c;
}

void chunk_unref(struct chunk *c)
{
	if (c && --c->refs == 0)
		free(c);
}
