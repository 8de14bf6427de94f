/* fuzz.h: what a fuzz target (tests/fuzz/fuzz_<name>.c) gives the driver
 * (tests/fuzz/driver.c). The same fuzz_one also serves libFuzzer through a
 * thin LLVMFuzzerTestOneInput wrapper in the target. Tokens for the
 * mutators of both are in tests/fuzz/dict/<name>.dict, not here. */
#ifndef HERALD_FUZZ_H
#define HERALD_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* Run one input; abort() (or let a sanitizer fire) on a broken invariant.
 * data is followed by an inaccessible page. Returns 0. */
int fuzz_one(const uint8_t *data, size_t size);

/* Folders of seed inputs, relative to the repo root, NULL-terminated; every
 * file in them is replayed before mutation starts. A missing folder is
 * skipped (git keeps no empty ones), but at least one file must load. */
extern const char *fuzz_corpus_dirs[];

#endif
