/* SPDX-License-Identifier: MIT */
/*
 * tests/fuzz/fuzz.h - what the fuzz targets share: the libFuzzer entry
 * points each defines, one OpenCL context per process, a scratch file and
 * directory per process, and the harness's own assertion.
 *
 * Each target is built two ways.  With configure --enable-fuzzing it links
 * libFuzzer (clang -fsanitize=fuzzer) and is run by `make fuzz`; otherwise
 * tests/fuzz/replay.c supplies main() and make check replays the target's
 * committed corpus, tests/fuzz/corpus/<target>/, one file at a time.
 */
#ifndef CG_FUZZ_H
#define CG_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "clgrad.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The process's context, created on the first call (CLGRAD_CACHE_DIR and
 * CLGRAD_TUNING_DIR point into the scratch directory first, so that a
 * fuzz run never reads or writes the user's caches); NULL when there is
 * no OpenCL device, which the replay driver reports as a skip. */
cg_context *fuzz_context(void);
extern int fuzz_no_device;

/* A directory of the process's own, removed at exit. */
const char *fuzz_dir(void);

/* Writes data to `name` inside fuzz_dir() (replacing it) and returns the
 * full path (static storage). */
const char *fuzz_write(const char *name, const void *data, size_t size);

/* The harness's assertion: a broken promise of the library prints what
 * and where and aborts, which libFuzzer and the replay driver report as
 * a finding with the input that caused it. */
#define FUZZ_ASSERT(cond, ...) \
    ((cond) ? (void)0 : fuzz_fail(__FILE__, __LINE__, #cond, __VA_ARGS__))
void fuzz_fail(const char *file, int line, const char *cond,
               const char *fmt, ...);

/* A failed call: NULL or a negative status must come with a message. */
void fuzz_expect_error(const char *call);

/* Reads bytes from the input; past its end every read gives 0. */
typedef struct fuzz_input {
    const uint8_t *p;
    size_t n;
} fuzz_input;

unsigned fuzz_u8(fuzz_input *in);
uint64_t fuzz_u64(fuzz_input *in);

#endif
