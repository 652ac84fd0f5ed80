/* SPDX-License-Identifier: MIT */
/*
 * tools/outpath.c - the directory a tool's output lands in, and whether
 * it can be written (outpath.h).
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outpath.h"

out_status
out_check(const char *path, char *dir, size_t size, int *err)
{
    char real[PATH_MAX], *slash;
    const char *where = path;
    struct stat st;

    *err = 0;
    snprintf(dir, size, ".");
    if (!path[0])
        return OUT_EMPTY;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return OUT_IS_DIR;
        if (access(path, W_OK) != 0) {
            *err = errno;
            return OUT_NO_WRITE;
        }
        if (realpath(path, real))
            where = real;       /* written through a link: its target */
    }
    snprintf(dir, size, "%s", where);
    slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, size, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    if (stat(dir, &st) != 0) {
        *err = errno;
        return OUT_NO_DIR;
    }
    if (!S_ISDIR(st.st_mode)) {
        *err = ENOTDIR;
        return OUT_NO_DIR;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        *err = errno;
        return OUT_DIR_NO_WRITE;
    }
    return OUT_OK;
}
