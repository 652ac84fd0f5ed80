/* SPDX-License-Identifier: MIT */
/*
 * tests/fuzz/fuzz_bincache.c - the kernel binary cache reader
 * (lib/cl/program.c).  The target builds one small program into a cache
 * directory of its own, keeps the file clgrad wrote, then for each input
 * writes a damaged version of that file in its place and builds the
 * program again.  The first input byte picks the damage:
 *   0  the rest of the input is the whole file
 *   1  the file's 48-byte header (magic, key, length, checksum) and the
 *      rest of the input as the binary
 *   2  the file cut to a length read from the input
 *   3  the file with bytes replaced at (offset, value) pairs of the input
 * Whatever the file holds, the build must succeed - from the cache only
 * when the file is intact, else from source - and the program must work:
 * its kernel runs and doubles a buffer.  A payload that comes with a valid
 * checksum of itself is trusted (the cache guards against damage, not
 * against forgery), so the modes never recompute the checksum.
 */
#include "config.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "cl/internal.h"

#define HEADER 48

static const char source[] =
    "__kernel void twice(__global float *a)\n"
    "{\n"
    "    a[get_global_id(0)] *= 2.0f;\n"
    "}\n";

static unsigned char *good;    /* the file clgrad wrote */
static size_t good_len;
static char good_path[1024];

static cg__program *
build(cg_context *ctx)
{
    cg__program *p = NULL;
    int rc;

    /* Drop the program the last input built, so that this build goes to
     * the cache file again. */
    cg__programs_free(ctx);
    rc = cg__program_get_source(ctx, "fuzz_bincache", source, NULL, &p);
    FUZZ_ASSERT(rc == CG_OK && p, "the build failed (%d)", rc);
    return p;
}

/* Runs the program's kernel on a small buffer. */
static void
check_runs(cg_context *ctx, cg__program *p)
{
    float h[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    size_t n = 8;
    cl_int rc;
    cl_kernel k = clCreateKernel(p->program, "twice", &rc);
    cl_mem m;
    int i;

    FUZZ_ASSERT(rc == CL_SUCCESS, "clCreateKernel: %d", rc);
    m = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                       sizeof h, h, &rc);
    FUZZ_ASSERT(rc == CL_SUCCESS, "clCreateBuffer: %d", rc);
    FUZZ_ASSERT(clSetKernelArg(k, 0, sizeof m, &m) == CL_SUCCESS &&
                clEnqueueNDRangeKernel(ctx->queue, k, 1, NULL, &n, NULL, 0,
                                       NULL, NULL) == CL_SUCCESS &&
                clEnqueueReadBuffer(ctx->queue, m, CL_TRUE, 0, sizeof h, h,
                                    0, NULL, NULL) == CL_SUCCESS,
                "running the kernel");
    for (i = 0; i < 8; i++)
        FUZZ_ASSERT(h[i] == 2.0f * (float)(i + 1), "element %d is %g", i,
                    h[i]);
    clReleaseMemObject(m);
    clReleaseKernel(k);
}

/* Builds once into an empty cache directory and keeps the file. */
static int
setup(cg_context *ctx)
{
    char dir[768];
    struct dirent *e;
    DIR *d;
    FILE *f;

    snprintf(dir, sizeof dir, "%s/bincache", fuzz_dir());
    setenv("CLGRAD_CACHE_DIR", dir, 1);
    build(ctx);
    FUZZ_ASSERT((d = opendir(dir)) != NULL, "no cache directory %s", dir);
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".bin"))
            snprintf(good_path, sizeof good_path, "%s/%s", dir, e->d_name);
    closedir(d);
    FUZZ_ASSERT(*good_path, "no cache file was written in %s", dir);
    FUZZ_ASSERT((f = fopen(good_path, "rb")) != NULL, "%s", good_path);
    fseek(f, 0, SEEK_END);
    good_len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    good = malloc(good_len);
    FUZZ_ASSERT(good && fread(good, 1, good_len, f) == good_len &&
                good_len > HEADER, "reading %s", good_path);
    fclose(f);
    return 0;
}

/* The damaged file for this input, in a new buffer of *len bytes. */
static unsigned char *
damage(fuzz_input *in, size_t *len)
{
    unsigned mode = fuzz_u8(in) & 3;
    unsigned char *f;
    size_t n;

    switch (mode) {
    case 0:
        n = in->n;
        f = malloc(n + 1);
        memcpy(f, in->p, n);
        break;
    case 1:
        n = HEADER + in->n;
        f = malloc(n);
        memcpy(f, good, HEADER);
        memcpy(f + HEADER, in->p, in->n);
        break;
    case 2:
        n = (size_t)(fuzz_u64(in) % good_len);
        f = malloc(n + 1);
        memcpy(f, good, n);
        break;
    default:
        n = good_len;
        f = malloc(n);
        memcpy(f, good, n);
        while (in->n >= 3) {
            size_t at = (fuzz_u8(in) << 8 | fuzz_u8(in));

            /* Offsets past the header mostly land in the binary. */
            f[at < HEADER * 2 ? at % HEADER : at % n] = (unsigned char)
                fuzz_u8(in);
        }
        break;
    }
    FUZZ_ASSERT(f != NULL, "out of host memory");
    *len = n;
    return f;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cg_context *ctx = fuzz_context();
    fuzz_input in = { data, size };
    unsigned char *file;
    cg__program *p;
    size_t len;
    FILE *f;

    if (!ctx || (!good && setup(ctx)))
        return 0;
    file = damage(&in, &len);
    f = fopen(good_path, "wb");
    FUZZ_ASSERT(f && (len == 0 || fwrite(file, 1, len, f) == len) &&
                fclose(f) == 0, "writing %s", good_path);
    p = build(ctx);
    FUZZ_ASSERT(p->from_cache == (len == good_len &&
                                  memcmp(file, good, len) == 0),
                "a %s file was %s", p->from_cache ? "damaged" : "intact",
                p->from_cache ? "loaded" : "rejected");
    check_runs(ctx, p);
    free(file);
    return 0;
}
