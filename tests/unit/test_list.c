/* SPDX-License-Identifier: BSD-2-Clause */
/* test_list.c: the intrusive list (src/common/list.h): push and unlink
 * at the first, a middle and the last node, list_holds before and after,
 * list_each unlinking the node it visits, and a head that moves between
 * operations (as a hash table's slot does when the table is resized);
 * and the first-in first-out variant: appends keep their order, and
 * unlinking its last node (alone, or among others) keeps the tail right
 * for the next append. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "common/list.h"

struct item {
	int value;
	struct list_node link;
};

/* The values of l, first to last, as digits ("321"). */
static const char *values(const struct list *l)
{
	static char buf[32];
	size_t n = 0;
	struct list_node *x, *tmp;
	list_each(l, x, tmp)
	{
		buf[n++] = (char)('0' + list_item(x, struct item, link)->value);
	}
	buf[n] = 0;
	return buf;
}

int main(void)
{
	struct item it[5];
	struct list l = { NULL };
	CHECK(list_empty(&l));
	for (int i = 0; i < 5; i++) {
		it[i] = (struct item){ .value = i };
		list_push(&l, &it[i].link);
	}
	CHECK(!list_empty(&l));
	CHECK(strcmp(values(&l), "43210") == 0);
	CHECK(list_item(l.first, struct item, link) == &it[4]);

	/* A middle node, the first, the last. */
	list_unlink(&l, &it[2].link);
	CHECK(strcmp(values(&l), "4310") == 0);
	CHECK(!list_holds(&l, &it[2].link));
	CHECK(it[2].link.next == NULL && it[2].link.prev == NULL);
	list_unlink(&l, &it[4].link);
	CHECK(strcmp(values(&l), "310") == 0);
	list_unlink(&l, &it[0].link);
	CHECK(strcmp(values(&l), "31") == 0);
	CHECK(list_holds(&l, &it[3].link) && list_holds(&l, &it[1].link));

	/* The head moves: nodes keep no pointer into it. */
	struct list *moved = malloc(sizeof(*moved));
	CHECK(moved != NULL);
	memcpy(moved, &l, sizeof(l));
	memset(&l, 0xa5, sizeof(l));
	list_unlink(moved, &it[3].link);
	CHECK(strcmp(values(moved), "1") == 0);
	list_push(moved, &it[2].link);
	CHECK(strcmp(values(moved), "21") == 0);

	/* list_each may unlink the node it visits: every one, here. */
	struct list_node *x, *tmp;
	int seen = 0;
	list_each(moved, x, tmp)
	{
		list_unlink(moved, x);
		seen++;
	}
	CHECK(seen == 2 && list_empty(moved));
	free(moved);

	/* First in, first out. */
	struct list_fifo q = { { NULL }, NULL };
	for (int i = 0; i < 4; i++)
		list_fifo_push(&q, &it[i].link);
	CHECK(strcmp(values(&q.list), "0123") == 0);
	CHECK(q.last == &it[3].link);
	list_fifo_unlink(&q, &it[3].link); /* the last */
	CHECK(q.last == &it[2].link && !list_holds(&q.list, &it[3].link));
	list_fifo_push(&q, &it[4].link);
	CHECK(strcmp(values(&q.list), "0124") == 0);
	list_fifo_unlink(&q, &it[0].link); /* the first */
	list_fifo_unlink(&q, &it[2].link); /* a middle one */
	CHECK(strcmp(values(&q.list), "14") == 0 && q.last == &it[4].link);
	list_fifo_unlink(&q, &it[4].link);
	list_fifo_unlink(&q, &it[1].link); /* the only one: first and last */
	CHECK(list_empty(&q.list) && q.last == NULL);
	list_fifo_push(&q, &it[2].link);
	CHECK(strcmp(values(&q.list), "2") == 0 && q.last == &it[2].link && q.list.first == &it[2].link);
	return check_done("test_list");
}
