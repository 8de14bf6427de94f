/* SPDX-License-Identifier: BSD-2-Clause */
/* shared_map.h: the memory a group's processes share (presence's table,
 * the shared records): one anonymous mapping, shared with the processes
 * forked after it (or private, for one process), that begins with a
 * process-shared, robust mutex. A holder that dies leaves the mutex to the
 * next one with EOWNERDEAD, which repairs what it must and says so
 * (pthread_mutex_consistent). */
#ifndef HERALD_SHARED_MAP_H
#define HERALD_SHARED_MAP_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

/* A zeroed mapping of len bytes (MAP_NORESERVE: untouched pages cost
 * nothing) whose first bytes are a pthread_mutex_t, initialised; the
 * caller's struct must start with it. NULL with errno set on failure. The
 * caller unmaps it (munmap with len). */
void *shared_map_new(size_t len, bool shared);

#endif
