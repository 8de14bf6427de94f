/* SPDX-License-Identifier: BSD-2-Clause */
/* check.h: the smallest unit-test harness. CHECK records a failure with its
 * line and goes on; check_done() prints the counts and gives the exit code. */
#ifndef HERALD_CHECK_H
#define HERALD_CHECK_H

#include <stdio.h>

static int check_passed, check_failed;

#define CHECK(cond)                                                                              \
	do {                                                                                     \
		if (cond) {                                                                      \
			check_passed++;                                                          \
		} else {                                                                         \
			check_failed++;                                                          \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
		}                                                                                \
	} while (0)

#define CHECK_EQ_INT(a, b)                                                                                             \
	do {                                                                                                           \
		long long a_ = (long long)(a), b_ = (long long)(b);                                                    \
		if (a_ == b_) {                                                                                        \
			check_passed++;                                                                                \
		} else {                                                                                               \
			check_failed++;                                                                                \
			fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", __FILE__, __LINE__, #a, #b, a_, b_); \
		}                                                                                                      \
	} while (0)

static inline int check_done(const char *name)
{
	printf("%s: %d checks passed, %d failed\n", name, check_passed, check_failed);
	return check_failed ? 1 : 0;
}

#endif
