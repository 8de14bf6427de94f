/* SPDX-License-Identifier: BSD-2-Clause */
/* fuzz.h: the wrapper every fuzz target (tests/fuzz/fuzz_<name>.c) is built
 * with. A target is only its body: it includes this header, defines
 * fuzz_one, and checks its invariants with FUZZ_ASSERT. Everything else is
 * shared and linked in by the Makefile:
 *   - tests/fuzz/fuzz.c: FUZZ_ASSERT's report, and LLVMFuzzerTestOneInput,
 *     libFuzzer's entry point, which calls fuzz_one;
 *   - tests/fuzz/driver.c: main() of the standalone driver (`make unit`,
 *     `make check`, `make test` build it with gcc), which replays
 *     tests/fuzz/corpus/<name> and tests/fuzz/regressions/<name> and
 *     mutates them.
 * `make fuzz` links the same target with fuzz.c under libFuzzer instead
 * (clang; HERALD_LIBFUZZER is defined when compiling the target, for the
 * rare body that runs differently there). Tokens for the mutators of both
 * are in tests/fuzz/dict/<name>.dict. */
#ifndef HERALD_FUZZ_H
#define HERALD_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* Run one input; abort() (or let a sanitizer fire) on a broken invariant.
 * data is followed by an inaccessible page. Returns 0. Defined by the
 * target. */
int fuzz_one(const uint8_t *data, size_t size);

/* Say which invariant failed (the program, file:line and the condition's
 * text) on stderr, then abort(). */
_Noreturn void fuzz_fail(const char *file, int line, const char *cond);

/* Check an invariant of the target: abort with its text when cond is false. */
#define FUZZ_ASSERT(cond) ((cond) ? (void)0 : fuzz_fail(__FILE__, __LINE__, #cond))

#endif
