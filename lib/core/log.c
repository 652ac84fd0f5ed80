/* SPDX-License-Identifier: MIT */
/*
 * lib/core/log.c - the application's log callback (cg_set_log) and
 * compilation progress callback (cg_set_compile_progress).
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>

#include "core/internal.h"

/* The callback is called under the lock: calls never overlap, so it need
 * not be thread-safe, and once cg_set_log returns the old one is never
 * called again (its user data may be freed).  Logging is rare; the lock
 * costs nothing that matters. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static cg_log_fn log_fn;
static void *log_user;

void
cg_set_log(cg_log_fn fn, void *user)
{
    pthread_mutex_lock(&lock);
    log_fn = fn;
    log_user = fn ? user : NULL;
    pthread_mutex_unlock(&lock);
}

void
cg__log(cg_log_level level, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;

    pthread_mutex_lock(&lock);
    if (log_fn) {
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        log_fn(level, msg, log_user);
    }
    pthread_mutex_unlock(&lock);
}

static cg_compile_fn progress_fn;
static void *progress_user;

void
cg_set_compile_progress(cg_compile_fn fn, void *user)
{
    pthread_mutex_lock(&lock);
    progress_fn = fn;
    progress_user = fn ? user : NULL;
    pthread_mutex_unlock(&lock);
}

void
cg__compile_progress(const cg_compile_event *event)
{
    pthread_mutex_lock(&lock);
    if (progress_fn)
        progress_fn(event, progress_user);
    pthread_mutex_unlock(&lock);
}
