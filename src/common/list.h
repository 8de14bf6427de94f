/* SPDX-License-Identifier: BSD-2-Clause */
/* list.h: one intrusive doubly linked list for every module that keeps
 * its objects on a list (readers on a hub, subscriptions under a topic,
 * connections in a pool, HTTP/2 sessions and streams). A node lives inside
 * the object (struct list_node), so linking and unlinking allocate nothing
 * and cost O(1); list_item turns a node back into its object.
 *
 * The list ends in NULL both ways and its head is one pointer, so a head
 * may move with what holds it (a hash table's slot being resized) without
 * touching a node: unlinking names the list instead of keeping a pointer
 * into the head. A node on no list has both links NULL (unlinking clears
 * them); list_holds says whether a given list holds it. Header only:
 * every use inlines.
 *
 * A list kept in order of arrival (oldest first) needs its last node as
 * well: struct list_fifo is a list with that one more pointer, appended to
 * with list_fifo_push and unlinked with list_fifo_unlink; every other
 * operation takes its `list` member. */
#ifndef HERALD_LIST_H
#define HERALD_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct list_node {
	struct list_node *next;
	struct list_node *prev;
};

struct list {
	struct list_node *first;
};

/* The object of type that holds node as its member. */
#define list_item(node, type, member) ((type *)(void *)((char *)(node)-offsetof(type, member)))

static inline bool list_empty(const struct list *l)
{
	return !l->first;
}

/* Put n first on l. */
static inline void list_push(struct list *l, struct list_node *n)
{
	n->prev = NULL;
	n->next = l->first;
	if (l->first)
		l->first->prev = n;
	l->first = n;
}

/* Take n off l, which holds it. */
static inline void list_unlink(struct list *l, struct list_node *n)
{
	if (n->prev)
		n->prev->next = n->next;
	else
		l->first = n->next;
	if (n->next)
		n->next->prev = n->prev;
	n->next = n->prev = NULL;
}

/* Whether n is on l (which may hold it or not). */
static inline bool list_holds(const struct list *l, const struct list_node *n)
{
	return n->prev || l->first == n;
}

/* A list that also knows its last node, so that it can be appended to in
 * O(1) (first in, first out). Its list member is an ordinary list for
 * list_empty, list_holds and list_each, never for list_push or
 * list_unlink (they would not keep last). */
struct list_fifo {
	struct list list;
	struct list_node *last;
};

/* Put n last on q. */
static inline void list_fifo_push(struct list_fifo *q, struct list_node *n)
{
	n->next = NULL;
	n->prev = q->last;
	if (q->last)
		q->last->next = n;
	else
		q->list.first = n;
	q->last = n;
}

/* Take n off q, which holds it. */
static inline void list_fifo_unlink(struct list_fifo *q, struct list_node *n)
{
	if (q->last == n)
		q->last = n->prev;
	list_unlink(&q->list, n);
}

/* Every node of l, first to last. The body may unlink (and free) the node
 * it is given, never another: the next one is taken before the body. */
#define list_each(l, n, tmp) for ((n) = (l)->first; (n) && ((tmp) = (n)->next, 1); (n) = (tmp))

#endif
