/* SPDX-License-Identifier: MIT */
/*
 * tools/log.h - how the tools show what the library logs (cg_set_log):
 * on stderr after the program's name, like their own messages, so that a
 * skipped tuning file is seen and not silently slower.  Notes (an entry
 * for another device adapted) are left to clgrad-info's report.
 */
#ifndef CG_TOOLS_LOG_H
#define CG_TOOLS_LOG_H

#include <stdio.h>

#include "clgrad.h"

/* A cg_log_fn whose user data is the program's name:
 *     cg_set_log(tool_log, (void *)prog);                                 */
static inline void
tool_log(cg_log_level level, const char *message, void *user)
{
    if (level == CG_LOG_NOTE)   /* clgrad-info reports them */
        return;
    fprintf(stderr, "%s: %s: %s\n", (const char *)user,
            level == CG_LOG_WARNING ? "warning" : "note", message);
}

#endif
