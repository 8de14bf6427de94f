/* SPDX-License-Identifier: BSD-2-Clause */
/* shared_map.c: a mapping that begins with a robust, process-shared mutex
 * (see shared_map.h). */
#include "common/shared_map.h"

#include <errno.h>
#include <sys/mman.h>

void *shared_map_new(size_t len, bool shared)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	int r = pthread_mutex_init((pthread_mutex_t *)p, &a);
	pthread_mutexattr_destroy(&a);
	if (r != 0) {
		munmap(p, len);
		errno = r;
		return NULL;
	}
	return p;
}
