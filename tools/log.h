/* SPDX-License-Identifier: MIT */
/*
 * tools/log.h - how the tools show what the library logs (cg_set_log):
 * on stderr after the program's name, like their own messages, so that a
 * skipped tuning file is seen and not silently slower.
 */
#ifndef CG_TOOLS_LOG_H
#define CG_TOOLS_LOG_H

#include <stdio.h>
#include <stdlib.h>

#include "clgrad.h"

/* CLBlast compiles its kernels with the options of CLBLAST_BUILD_OPTIONS
 * (CLBlast reads it at each build), and the OpenCL compiler may print a
 * count of their warnings ("8 warnings generated.", clang's, which PoCL
 * lets through to stderr) that is nothing a user of the tools can act
 * on.  The tools are the application here: they ask for OpenCL's
 * standard -w (no warnings) unless the user set the variable.  Call
 * before the first context; the library itself never sets it (an
 * environment is the application's). */
static inline void
tool_quiet_clblast(void)
{
    setenv("CLBLAST_BUILD_OPTIONS", "-w", 0);
}

/* A cg_log_fn whose user data is the program's name:
 *     cg_set_log(tool_log, (void *)prog);                                 */
static inline void
tool_log(cg_log_level level, const char *message, void *user)
{
    fprintf(stderr, "%s: %s: %s\n", (const char *)user,
            level == CG_LOG_WARNING ? "warning" : "note", message);
}

#endif
