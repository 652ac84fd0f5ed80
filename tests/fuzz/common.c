/* SPDX-License-Identifier: MIT */
/*
 * tests/fuzz/common.c - the process-wide context, scratch directory and
 * assertion the fuzz targets share (see fuzz.h).
 */
#include "config.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"

int fuzz_no_device;

static char scratch[256];
static cg_context *shared_ctx;
static int ctx_tried;

static void
remove_tree(const char *dir)
{
    char path[1024];
    struct dirent *e;
    DIR *d = opendir(dir);

    if (d) {
        while ((e = readdir(d))) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            if (unlink(path) != 0)
                remove_tree(path);
        }
        closedir(d);
    }
    rmdir(dir);
}

static void
cleanup(void)
{
    if (shared_ctx)
        cg_context_free(shared_ctx);
    shared_ctx = NULL;
    if (*scratch)
        remove_tree(scratch);
}

const char *
fuzz_dir(void)
{
    const char *tmp = getenv("TMPDIR");

    if (*scratch)
        return scratch;
    snprintf(scratch, sizeof scratch, "%s/clgrad-fuzz-XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(scratch)) {
        perror("fuzz: mkdtemp");
        abort();
    }
    atexit(cleanup);
    return scratch;
}

const char *
fuzz_write(const char *name, const void *data, size_t size)
{
    static char path[512];
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", fuzz_dir(), name);
    f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f)) {
        perror(path);
        abort();
    }
    return path;
}

cg_context *
fuzz_context(void)
{
    char dir[512];
    int count = 0;

    if (ctx_tried)
        return shared_ctx;
    ctx_tried = 1;
    snprintf(dir, sizeof dir, "%s/cache", fuzz_dir());
    /* Kernels compile once per process; a cache shared between runs (the
     * caller's CLGRAD_CACHE_DIR, as make check sets) keeps replays fast. */
    if (!getenv("CLGRAD_CACHE_DIR"))
        setenv("CLGRAD_CACHE_DIR", dir, 1);
    snprintf(dir, sizeof dir, "%s/tuning", fuzz_dir());
    setenv("CLGRAD_TUNING_DIR", dir, 1);
    if (cg_device_count(&count) != CG_OK || count == 0) {
        fuzz_no_device = 1;
        return NULL;
    }
    shared_ctx = cg_context_new(NULL);
    if (!shared_ctx) {
        fprintf(stderr, "fuzz: no context: %s\n", cg_last_error());
        abort();
    }
    return shared_ctx;
}

void
fuzz_fail(const char *file, int line, const char *cond, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "%s:%d: FUZZ FINDING: %s: ", file, line, cond);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (cg_last_error: %s)\n", cg_last_error());
    fflush(stderr);
    /* Not abort(): once PoCL has compiled a kernel, LLVM's handler for
     * SIGABRT comes first and re-raises it with the default action, so
     * libFuzzer would never save the input.  LLVM passes a trap's SIGILL
     * on to libFuzzer's handler when the instruction runs again. */
    __builtin_trap();
}

void
fuzz_expect_error(const char *call)
{
    const char *e = cg_last_error();

    FUZZ_ASSERT(e && *e, "%s failed without a message", call);
}

unsigned
fuzz_u8(fuzz_input *in)
{
    unsigned v;

    if (in->n == 0)
        return 0;
    v = in->p[0];
    in->p++;
    in->n--;
    return v;
}

uint64_t
fuzz_u64(fuzz_input *in)
{
    uint64_t v = 0;
    int i;

    for (i = 0; i < 8; i++)
        v = v << 8 | fuzz_u8(in);
    return v;
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_dir();
    return 0;
}
