/* SPDX-License-Identifier: MIT */
/*
 * tests/testutil.h - what every test program shares: one context for the
 * whole program (PoCL builds are slow; hundreds of contexts would be too),
 * and the rule that a missing OpenCL device skips outside CI and fails in
 * CI.
 */
#ifndef CG_TESTUTIL_H
#define CG_TESTUTIL_H

#include <check.h>

#include "clgrad.h"

/* The program's shared context, created on first use.  Without a device
 * the program exits 77 (SKIP), or 1 when CI is set in the environment. */
cg_context *tt_ctx(void);

/* Exits 77 / 1 as above if no OpenCL device exists. */
void tt_require_device(void);

/* Runs the suite without forking (OpenCL state does not survive fork),
 * frees the shared context and returns the exit status for main. */
int tt_run(Suite *s);

/* A fresh temporary directory (removed at exit with its contents). */
const char *tt_tmpdir(void);

/* Nonzero when the program runs under a memory checker (make
 * check-valgrind, make check-oclgrind set CLGRAD_TEST_CHECKER), which makes
 * it 20-100 times slower: tests then check fewer elements by finite
 * differences and skip repeats that only add numerical coverage; every
 * code path still runs. */
int tt_checker(void);

/* Nonzero under a host memory checker (valgrind, ASan), which checks the
 * host code and not the kernels (Oclgrind does those): tests whose cases
 * differ only in the kernel they build, on one host path, may run one case
 * per host path there. */
int tt_host_checker(void);

/* Nonzero under Oclgrind (make check-oclgrind), whose --check-api fails
 * a test for every OpenCL call that returns an error: cases that make
 * one fail on purpose (a source that does not build, a kernel name its
 * program lacks) are left to the other runs. */
int tt_api_checker(void);

/* The 16-bit dtypes a test loops over: both (float16, bfloat16), or under
 * a host memory checker only the first (the host path is one; the second
 * variant's kernels are Oclgrind's to check). */
#define TT_NDTYPES (tt_host_checker() ? 1 : 2)

/* Runs $TEST_BUILDDIR/tools/<tool> (or ./tools/<tool>) with `args`,
 * `env` ("VAR='value' ..." or NULL) set for it; returns its stdout (the
 * caller frees it) and sets *status to its exit status (-1 if it did not
 * exit).  Its stderr goes to the test's log only when it crashed (status
 * -1 or 128 and up: a signal, a sanitizer's abort). */
char *tt_run_tool(const char *env, const char *tool, const char *args,
                  int *status);

/* Launches of kernel `name` in ctx's profile (a profiling context; the
 * profile's first 64 kernels). */
int tt_launches(cg_context *ctx, const char *name);

/* Whether an entry for `kernel` `shape` is in force in ctx: into *out. */
int tt_in_force(const cg_context *ctx, const char *kernel, const char *shape,
                cg_tuning_entry *out);

/* The last error, for ck_assert messages. */
#define TT_ERR cg_last_error()

#endif
