/* SPDX-License-Identifier: MIT */
/*
 * tools/progress.h - how the tools tell their user that the first run
 * compiles kernels (cg_set_compile_progress): one line on stderr,
 *     clgrad-train: compiling OpenCL kernels for DEVICE (first run only;
 *     cached in DIR)
 * at the first compile, nothing when everything comes from the cache.  On
 * a terminal a second line counts the compiled kernels in place; written
 * to a file or a pipe there is only the one line.
 */
#ifndef CG_TOOLS_PROGRESS_H
#define CG_TOOLS_PROGRESS_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "clgrad.h"

/* State of the progress line; one per program. */
static int tool_progress_started, tool_progress_open, tool_progress_count;

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
    int tty = isatty(fileno(stderr));

    if (e->from_cache || (e->done && !tty))
        return;
    if (!tool_progress_started) {
        tool_progress_started = 1;
        if (tty)
            atexit(tool_progress_end);
        fprintf(stderr, "%s: compiling OpenCL kernels for %s (first run "
                "only; %s%s)\n", prog, e->device, e->cache_dir ?
                "cached in " : "no cache: CLGRAD_CACHE=0",
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
