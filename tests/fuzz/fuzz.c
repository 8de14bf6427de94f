/* SPDX-License-Identifier: BSD-2-Clause */
/* fuzz.c: what every fuzz target shares whichever program runs it: the
 * report of a failed invariant, and libFuzzer's entry point (unused by the
 * standalone driver, whose main() calls fuzz_one itself). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz.h"

void fuzz_fail(const char *file, int line, const char *cond)
{
	fprintf(stderr, "%s: invariant failed at %s:%d: %s\n", program_invocation_short_name, file, line, cond);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return fuzz_one(data, size);
}
