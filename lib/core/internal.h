/* SPDX-License-Identifier: MIT */
/*
 * lib/core/internal.h - errors and small helpers shared by every layer of
 * libclgrad.  Nothing here knows OpenCL beyond the error names.
 */
#ifndef CG_CORE_INTERNAL_H
#define CG_CORE_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "clgrad.h"

#if defined(__GNUC__)
#define CG__PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define CG__PRINTF(f, a)
#endif

/* Records `status` with a formatted message as this thread's last error and
 * returns `status`, so that a failing path reads
 *     return cg__error(CG_EINVAL, "x is NULL");                           */
int cg__error(int status, const char *fmt, ...) CG__PRINTF(2, 3);

/* Appends text to the last error message (for build logs, device lists). */
void cg__error_append(const char *fmt, ...) CG__PRINTF(1, 2);

/* Clears the last error; public entry points call it on entry. */
void cg__error_clear(void);

/* Between enter and leave (which nest), cg__error, cg__error_append and
 * cg__error_clear leave this thread's error state alone: for work whose
 * failure is not the caller's error, such as the program cache's file
 * I/O, which must neither replace nor clear the message it is called
 * under.  cg__error still returns its status. */
void cg__error_quiet_enter(void);
void cg__error_quiet_leave(void);

/* Passes a message to the application's log callback (cg_set_log), if it
 * has set one; formats nothing otherwise.  Never touches the error state. */
void cg__log(cg_log_level level, const char *fmt, ...) CG__PRINTF(2, 3);

/* Passes a compilation event to the callback of cg_set_compile_progress,
 * if one is set (under the log lock). */
void cg__compile_progress(const cg_compile_event *event);

/* The status of the last cg__error on this thread (CG_OK after a clear):
 * how a function that returned NULL failed. */
int cg__last_status(void);

/* Name of an OpenCL error code ("CL_INVALID_VALUE"), or NULL if unknown. */
const char *cg__cl_error_name(int code);

/* 128-bit FNV-1a, streamed: the program-cache key and file checksums. */
typedef struct cg__hash { uint64_t hi, lo; } cg__hash;
void cg__hash_init(cg__hash *h);
void cg__hash_update(cg__hash *h, const void *data, size_t len);
/* Hashes a string and its terminating zero, so "ab"+"c" != "a"+"bc". */
void cg__hash_str(cg__hash *h, const char *s);
void cg__hash_hex(const cg__hash *h, char out[33]);

/* Checked arithmetic for every size, offset and stride: each stores
 * a op b in *r and returns 0, or returns 1 (leaving *r unspecified) when
 * the exact result does not fit the type, as __builtin_mul_overflow does.
 * They set no error: the caller names its operands in a CG_ESHAPE message
 * (or uses the cg__checked_* forms below, which do). */
#if defined(HAVE_BUILTIN_OVERFLOW)
static inline int
cg__mul_i64(int64_t a, int64_t b, int64_t *r)
{
    return __builtin_mul_overflow(a, b, r);
}
static inline int
cg__add_i64(int64_t a, int64_t b, int64_t *r)
{
    return __builtin_add_overflow(a, b, r);
}
static inline int
cg__mul_size(size_t a, size_t b, size_t *r)
{
    return __builtin_mul_overflow(a, b, r);
}
static inline int
cg__add_size(size_t a, size_t b, size_t *r)
{
    return __builtin_add_overflow(a, b, r);
}
#else
static inline int
cg__mul_i64(int64_t a, int64_t b, int64_t *r)
{
    if (a != 0 && b != 0) {
        if (a > 0 ? (b > 0 ? a > INT64_MAX / b : b < INT64_MIN / a)
                  : (b > 0 ? a < INT64_MIN / b : a < INT64_MAX / b))
            return 1;
    }
    *r = a * b;
    return 0;
}
static inline int
cg__add_i64(int64_t a, int64_t b, int64_t *r)
{
    if (b > 0 ? a > INT64_MAX - b : a < INT64_MIN - b)
        return 1;
    *r = a + b;
    return 0;
}
static inline int
cg__mul_size(size_t a, size_t b, size_t *r)
{
    if (a != 0 && b > SIZE_MAX / a)
        return 1;
    *r = a * b;
    return 0;
}
static inline int
cg__add_size(size_t a, size_t b, size_t *r)
{
    if (b > SIZE_MAX - a)
        return 1;
    *r = a + b;
    return 0;
}
#endif

/* The same, recording CG_ESHAPE "what: a * b overflows" (or "+") on
 * overflow; CG_OK otherwise.  `what` names the computation, e.g.
 * "cg_concat: total size of dimension 0". */
int cg__checked_mul_i64(int64_t a, int64_t b, int64_t *r, const char *what);
int cg__checked_add_i64(int64_t a, int64_t b, int64_t *r, const char *what);
int cg__checked_mul_size(size_t a, size_t b, size_t *r, const char *what);
int cg__checked_add_size(size_t a, size_t b, size_t *r, const char *what);

/* Host allocation that records CG_EHOSTMEM on failure.  cg__realloc
 * leaves `p` as it was when it fails, like realloc. */
void *cg__malloc(size_t bytes);
void *cg__calloc(size_t n, size_t size);
void *cg__realloc(void *p, size_t bytes);
char *cg__strdup(const char *s);

/* Fault injection, for tests of the failure paths (in the spirit of
 * SQLite's OOM tests).  Each place where the library asks the host or the
 * OpenCL runtime for something that can fail calls cg__fault(kind) first
 * and, when it returns nonzero, fails as that call would: */
enum {
    CG__FAULT_HOST_ALLOC = 1 << 0,  /* cg__malloc, cg__calloc, cg__realloc */
    CG__FAULT_DEVICE_ALLOC = 1 << 1, /* clCreateBuffer for the pool */
    CG__FAULT_BUILD = 1 << 2,       /* a program build (cached or not) */
    CG__FAULT_LAUNCH = 1 << 3,      /* an enqueue: cg__launch, a fill, a
                                     * CLBlast GEMM */
    CG__FAULT_TRANSFER = 1 << 4,    /* clEnqueueRead/WriteBuffer */
    CG__FAULT_FILE_WRITE = 1 << 5,  /* cg__write_parts_atomic: create,
                                     * write, sync, close, rename */
    CG__FAULT_ALL = (1 << 6) - 1
};

/* After `n` more sites of a kind in `mask` on this thread, the next one
 * fails, once; n < 0 (the default) injects nothing.  Returns the previous
 * countdown, -1 when no failure was pending (it fired, or none was set),
 * so a test can tell whether its failure happened.  Off, a site costs one
 * thread-local compare, so the switch stays compiled in. */
long cg__fault_after(unsigned mask, long n);

/* Nonzero when this site, of kind `kind`, is the one to fail. */
int cg__fault(unsigned kind);

/* The kind of the last fault that fired on this thread (0 if none since
 * the last cg__fault_after): for tests that report what they swept. */
unsigned cg__fault_fired_kind(void);

/* cg__fault_after(CG__FAULT_HOST_ALLOC, n): host allocations only. */
long cg__alloc_fail_after(long n);

/* The environment variables the library reads, checked: unset or empty
 * gives CG_OK with *set 0.  cg__env_flag wants "0" or "1"; cg__env_long
 * a decimal integer in [lo, hi]; cg__env_choice one of the n names of
 * choices (*value its index).  Anything else is CG_EINVAL naming the
 * variable, its value and what it wants. */
int cg__env_flag(const char *name, int *value, int *set);
int cg__env_long(const char *name, long lo, long hi, long *value, int *set);
int cg__env_choice(const char *name, const char *const *choices, int n,
                   int *value, int *set);

/* Reads a whole file into a new NUL-terminated buffer (caller frees);
 * NULL with CG_EIO set if it cannot. */
char *cg__read_file(const char *path, size_t *len);

/* Creates a directory and its parents (mode 0700 for new ones). */
int cg__mkdir_p(const char *path);

/* Writes `len` bytes to `path` atomically: a temporary file in the same
 * directory, fsync, rename over the target, fsync the directory.  A crash
 * at any point leaves either the old file or the new one under `path`
 * (and possibly a stray path.tmp.PID), never a partial one.  A symbolic
 * link is written through (the file it names is replaced, the link stays),
 * and an existing file keeps its mode; a directory is refused. */
int cg__write_file_atomic(const char *path, const void *data, size_t len);

/* The same for `nparts` pieces written one after another, creating the
 * file with `mode` (before the umask). */
int cg__write_parts_atomic(const char *path, int mode, int nparts,
                           const void *const *parts, const size_t *lens);

#endif
