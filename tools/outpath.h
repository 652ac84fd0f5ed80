/* SPDX-License-Identifier: MIT */
/*
 * tools/outpath.h - whether a tool can write the file a user named, checked
 * before any time is spent (clgrad-train's --checkpoint and --plot,
 * clgrad-tune's database).  A write replaces the file atomically (a
 * temporary file beside it, then rename), so what must be writable is the
 * directory the write lands in: that of the file itself, or, when the path
 * is a symbolic link, that of the file the link names, whose directory the
 * library writes into (cg__write_parts_atomic).
 */
#ifndef CG_TOOLS_OUTPATH_H
#define CG_TOOLS_OUTPATH_H

#include <stddef.h>

typedef enum {
    OUT_OK,
    OUT_EMPTY,          /* path is "" */
    OUT_IS_DIR,         /* path names a directory */
    OUT_NO_WRITE,       /* the file exists and cannot be written */
    OUT_NO_DIR,         /* the directory is missing or not a directory */
    OUT_DIR_NO_WRITE    /* no files can be created in the directory */
} out_status;

/* Checks path; dir (size bytes) receives the directory the write lands
 * in, *err the errno of a failed check (0 when none applies). */
out_status out_check(const char *path, char *dir, size_t size, int *err);

#endif
