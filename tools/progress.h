/* SPDX-License-Identifier: MIT */
/*
 * tools/progress.h - how the tools tell their user that kernels are being
 * compiled (cg_set_compile_progress): one line on stderr,
 *     clgrad-train: compiling OpenCL kernels for DEVICE (once per device;
 *     cached in DIR)
 * at the process's first compile, whenever that comes (a later phase,
 * sampling say, may be the first to need a kernel that is not cached),
 * and never again in the same process; nothing when everything comes from
 * the cache.  On a terminal a second line counts the compiled kernels in
 * place; written to a file or a pipe there is only the one line.
 *
 * The callback also measures the wall time spent compiling (the union of
 * the intervals during which at least one program was being built, so
 * builds in parallel threads count once): tool_compile_seconds(), which
 * clgrad-train subtracts from its throughput.  tool_progress_silent set
 * keeps the measurement and prints nothing (--quiet).
 */
#ifndef CG_TOOLS_PROGRESS_H
#define CG_TOOLS_PROGRESS_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "clgrad.h"

/* State of the progress line; one per program.  The library never calls
 * the callback concurrently (cg_set_compile_progress), so no lock. */
static int tool_progress_started, tool_progress_open, tool_progress_count;
static int tool_progress_silent;
static int tool_compile_pending;            /* builds under way */
static double tool_compile_since, tool_compile_total;

static inline double
tool_progress_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Seconds this process has spent compiling kernels so far (a build under
 * way counts up to now). */
static inline double
tool_compile_seconds(void)
{
    return tool_compile_total + (tool_compile_pending
                                 ? tool_progress_now() - tool_compile_since
                                 : 0);
}

/* Ends an in-place line left open, before the tool's own output. */
static inline void
tool_progress_end(void)
{
    if (tool_progress_open)
        fputc('\n', stderr);
    tool_progress_open = 0;
}

/* A cg_compile_fn whose user data is the program's name:
 *     cg_set_compile_progress(tool_progress, (void *)prog);              */
static inline void
tool_progress(const cg_compile_event *e, void *user)
{
    const char *prog = user;
    int tty;

    if (!e->done) {
        if (tool_compile_pending++ == 0)
            tool_compile_since = tool_progress_now();
    } else if (!e->from_cache && tool_compile_pending > 0 &&
               --tool_compile_pending == 0) {
        tool_compile_total += tool_progress_now() - tool_compile_since;
    }
    if (tool_progress_silent)
        return;
    tty = isatty(fileno(stderr));
    if (e->from_cache || (e->done && !tty))
        return;
    if (!tool_progress_started) {
        tool_progress_started = 1;
        if (tty)
            atexit(tool_progress_end);
        /* "\r\033[K": a progress bar may be on the line already. */
        fprintf(stderr, "%s%s: compiling OpenCL kernels for %s (once per "
                "device; %s%s)\n", tty ? "\r\033[K" : "", prog, e->device,
                e->cache_dir ? "cached in " : "no cache: CLGRAD_CACHE=0",
                e->cache_dir ? e->cache_dir : "");
    }
    if (!tty)
        return;
    if (e->done)
        tool_progress_count++;
    fprintf(stderr, "\r%s: %d compiled%s%s%s\033[K", prog,
            tool_progress_count, e->done ? "" : ", now ",
            e->done ? "" : e->file,
            !e->done && e->kernel ? " " : "");
    if (!e->done && e->kernel)
        fputs(e->kernel, stderr);
    tool_progress_open = 1;
    fflush(stderr);
}

#endif
