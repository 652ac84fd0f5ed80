/* SPDX-License-Identifier: MIT */
/*
 * tools/log.h - how the tools show what the library logs (cg_set_log):
 * on stderr after the program's name, like their own messages, so that a
 * skipped tuning file is seen and not silently slower.  Each message is
 * shown once: every context reads the tuning files again, and
 * clgrad-bench, which makes one per case, repeated a stale file's
 * warnings 13 times at --quick sizes and about 80 times in a GPU run,
 * burying its tables.  Notes (an entry for another device adapted) are
 * left to clgrad-info's report.
 */
#ifndef CG_TOOLS_LOG_H
#define CG_TOOLS_LOG_H

#include <stdint.h>
#include <stdio.h>

#include "clgrad.h"

/* Distinct messages remembered; past them, every message is shown. */
#define TOOL_LOG_SEEN 64

/* A cg_log_fn whose user data is the program's name:
 *     cg_set_log(tool_log, (void *)prog);
 * The library calls it from one thread at a time (cg_set_log). */
static inline void
tool_log(cg_log_level level, const char *message, void *user)
{
    static uint64_t seen[TOOL_LOG_SEEN];
    static int nseen;
    uint64_t h = 14695981039346656037ULL;    /* FNV-1a */
    const unsigned char *c;
    int i;

    if (level == CG_LOG_NOTE)   /* clgrad-info reports them */
        return;
    for (c = (const unsigned char *)message; *c; c++)
        h = (h ^ *c) * 1099511628211ULL;
    for (i = 0; i < nseen; i++)
        if (seen[i] == h)
            return;
    if (nseen < TOOL_LOG_SEEN)
        seen[nseen++] = h;
    fprintf(stderr, "%s: %s: %s\n", (const char *)user,
            level == CG_LOG_WARNING ? "warning" : "note", message);
}

#endif
