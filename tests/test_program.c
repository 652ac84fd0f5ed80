/* SPDX-License-Identifier: MIT */
/*
 * tests/test_program.c - kernels: the embedded sources build and run, the
 * CLGRAD_KERNEL_DIR override, the program binary cache (miss, hit,
 * corruption, forged payloads, off switch, the error state left alone),
 * build failures with their log, and the kernel table generated from the
 * sources (build-aux/cltable.sh).
 */
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cl/internal.h"
#include "tune/tuner.h"
#include "testutil.h"

/* Runs copy4 from program `name` over n float4s of 0, 1, 2, ... and
 * returns the output. */
static float *
run_copy4(cg_context *ctx, cl_uint n)
{
    cg_buffer *a, *b;
    cl_kernel k;
    cl_mem ma, mb;
    float *host = malloc(n * 16);
    size_t i, local = 64, global = (n + 63) / 64 * 64;

    for (i = 0; i < 4 * (size_t)n; i++)
        host[i] = (float)i;
    ck_assert_msg(cg__kernel_create(ctx, CG__K_COPY4, NULL, &k) == CG_OK,
                  "%s", cg_last_error());
    a = cg_buffer_new(ctx, n * 16);
    b = cg_buffer_new(ctx, n * 16);
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(cg_buffer_write(a, 0, host, n * 16), CG_OK);
    memset(host, 0, n * 16);
    ma = cg__buffer_mem(a);
    mb = cg__buffer_mem(b);
    ck_assert_int_eq(cg__args(k, CG__ARG(ma), CG__ARG(mb), CG__ARG(n)), CG_OK);
    ck_assert_int_eq(cg__launch(ctx, k, 1, &global, &local, NULL), CG_OK);
    ck_assert_int_eq(cg_buffer_read(b, 0, host, n * 16), CG_OK);
    clReleaseKernel(k);
    cg_buffer_free(a);
    cg_buffer_free(b);
    return host;
}

START_TEST(embedded_kernel_builds_and_runs)
{
    cg_memory_stats before, after;
    float *out;
    cl_uint n = 1000;   /* not a multiple of the work-group size */
    size_t i;

    ck_assert_ptr_nonnull(cg__kernel_source_embedded("measure"));
    ck_assert_ptr_null(cg__kernel_source_embedded("no_such_kernel"));
    cg_context_stats(tt_ctx(), &before);
    out = run_copy4(tt_ctx(), n);
    for (i = 0; i < 4 * (size_t)n; i++)
        ck_assert_float_eq(out[i], (float)i);
    free(out);
    cg_context_stats(tt_ctx(), &after);
    ck_assert_uint_eq(after.kernels_enqueued, before.kernels_enqueued + 1);
}
END_TEST

START_TEST(kernel_dir_override_reads_sources_from_disk)
{
    char path[512];
    FILE *f;
    cg_context *ctx;
    cg__program *p;
    float *out;
    size_t i;

    snprintf(path, sizeof path, "%s/measure.cl", tt_tmpdir());
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("__kernel void copy4(__global const float4 *s, __global float4 *d,"
          " uint n) { uint i = get_global_id(0); if (i < n) d[i] = 2.0f * "
          "s[i]; }\n", f);
    fclose(f);
    setenv("CLGRAD_KERNEL_DIR", tt_tmpdir(), 1);
    ctx = cg_context_new(NULL);
    ck_assert_ptr_nonnull(ctx);
    out = run_copy4(ctx, 77);
    for (i = 0; i < 4 * 77; i++)
        ck_assert_float_eq(out[i], 2.0f * (float)i);
    free(out);
    /* A kernel file missing from the directory is an I/O error. */
    ck_assert_int_eq(cg__program_get(ctx, "nothing_here", NULL, &p), CG_EIO);
    ck_assert_ptr_nonnull(strstr(cg_last_error(), "nothing_here.cl"));
    cg_context_free(ctx);
    unsetenv("CLGRAD_KERNEL_DIR");
}
END_TEST

/* Every kernel of the generated table exists in its file's program, built
 * with the file's tunables: a kernel the generator misread, or a file
 * that needs a default the table does not give, fails here.  Under a host
 * memory checker only each file's first kernel: every other one takes the
 * same host path, and loading all 215 programs took 78 s of this
 * program's 5 minutes under memcheck (the native run checks them all). */
START_TEST(every_table_kernel_builds)
{
    int seen[CG__KF_COUNT] = { 0 };
    cl_kernel k;
    char name[128];
    size_t len;
    int i;

    for (i = 0; i < CG__K_COUNT; i++) {
        if (tt_host_checker() && seen[cg__kernel_table[i].file]++)
            continue;
        ck_assert_msg(cg__kernel(tt_ctx(), (cg__kid)i, &k) == CG_OK,
                      "%s: %s", cg__kernel_table[i].name, cg_last_error());
        ck_assert_int_eq(clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME,
                                         sizeof name, name, &len), CL_SUCCESS);
        ck_assert_str_eq(name, cg__kernel_table[i].name);
    }
    for (i = 0; i < CG__P_COUNT; i++)
        ck_assert_int_gt(cg__param_table[i].ncand, 0);
}
END_TEST

/* Every kernel file compiles without a warning in each storage variant
 * (-DCG_T, kernels/common.cl): built from source (no cache) with -Werror
 * and its tunables' defaults, a warning fails the build, and its log names
 * the line.  PoCL prints the log of a build that warns on stderr, past the
 * library, so a warning would reach the user.  Under valgrind PoCL sees a
 * CPU without AVX-512, where 16-wide vectors warn.  Under a host memory
 * checker each file builds in one storage variant, the three taking turns
 * over the files: under memcheck all 60 builds took 136 s. */
START_TEST(every_kernel_file_builds_without_warnings)
{
    cg_context *ctx = tt_ctx();
    char opts[1024], *src, *log;
    size_t n, len;
    cl_program prog;
    cl_int rc;
    int f, i, t;

    for (t = 0; t < 3; t++)
    for (f = 0; f < CG__KF_COUNT; f++) {
        if (tt_host_checker() && f % 3 != t)
            continue;
        ck_assert_int_eq(cg__kernel_source(cg__kfile_names[f], &src), CG_OK);
        n = (size_t)snprintf(opts, sizeof opts,
                             "-cl-std=CL1.2 -Werror -DCG_T=%d", t);
        for (i = 0; i < CG__P_COUNT; i++)
            if (cg__param_table[i].file == (cg__kfile)f)
                n += (size_t)snprintf(opts + n, sizeof opts - n, " -D%s=%ld",
                                      cg__param_table[i].name,
                                      cg__param_table[i].dflt);
        prog = clCreateProgramWithSource(ctx->context, 1,
                                         (const char **)&src, NULL, &rc);
        ck_assert_int_eq(rc, CL_SUCCESS);
        rc = clBuildProgram(prog, 1, &ctx->device, opts, NULL, NULL);
        if (rc != CL_SUCCESS) {
            len = 0;
            clGetProgramBuildInfo(prog, ctx->device, CL_PROGRAM_BUILD_LOG, 0,
                                  NULL, &len);
            log = calloc(1, len + 1);
            clGetProgramBuildInfo(prog, ctx->device, CL_PROGRAM_BUILD_LOG,
                                  len, log, NULL);
            ck_abort_msg("%s.cl with \"%s\": %s", cg__kfile_names[f], opts,
                         log);
        }
        clReleaseProgram(prog);
        free(src);
    }
}
END_TEST

/* Whether line l (up to its newline) starts a function definition in
 * the kernels' style, its name opening the next line: "float\ncmul(". */
static int
definition_header(const char *l)
{
    const char *next = strchr(l, '\n'), *p;

    if (!(isalpha((unsigned char)*l) || *l == '_') || !next++)
        return 0;
    for (p = l; isalnum((unsigned char)*p) || *p == '_'; p++)
        ;
    if (*p == '(')          /* a macro's use: CG_F16_FNS_(2) */
        return 0;
    for (p = next; isalnum((unsigned char)*p) || *p == '_' || *p == '#'; p++)
        ;
    return p > next && *p == '(' && !isdigit((unsigned char)*next);
}

/* Whether line l holds `word` as a whole word before its newline. */
static int
line_has(const char *l, const char *word)
{
    size_t n = strlen(word);
    const char *end = strchr(l, '\n'), *p;

    for (p = l; (p = strstr(p, word)) && (!end || p < end); p++)
        if ((p == l || !(isalnum((unsigned char)p[-1]) || p[-1] == '_')) &&
            !(isalnum((unsigned char)p[n]) || p[n] == '_'))
            return 1;
    return 0;
}

/* Every function a kernel file (common.cl included) defines is a kernel
 * or static, and so is what CG_KERNEL_IF makes of a kernel a program
 * does not build: clang compiles a function that is neither (a plain or
 * inline definition) as external code in every program, so each
 * elementwise kernel's own program (@split) held all 160 of its file's
 * kernels and helpers as code, and built in twice the time on PoCL.  A
 * header's first word may be a macro the file defines as either
 * (gemm.cl's INLINE and KERNEL). */
START_TEST(kernel_helpers_are_static)
{
    char *src, *l, *w, macros[16][32];
    int f, i, nm, bad, line;

    for (f = 0; f < CG__KF_COUNT; f++) {
        ck_assert_int_eq(cg__kernel_source(cg__kfile_names[f], &src), CG_OK);
        nm = 0;
        for (l = src; l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
            if (strncmp(l, "#define ", 8) == 0 &&
                (line_has(l, "static") || line_has(l, "__kernel")) &&
                nm < 16 && sscanf(l + 8, "%31[A-Za-z0-9_]", macros[nm]) == 1)
                nm++;
        line = 1;
        for (l = src; l; l = strchr(l, '\n'), l = l ? l + 1 : NULL, line++) {
            if (strncmp(l, "#define CG_KERNEL_IF_0", 22) == 0)
                ck_assert_msg(line_has(l, "static"),
                              "%s.cl's source, line %d: CG_KERNEL_IF_0 is "
                              "not static", cg__kfile_names[f], line);
            if (!definition_header(l) || line_has(l, "__kernel") ||
                line_has(l, "static"))
                continue;
            bad = 1;
            for (w = l; isalnum((unsigned char)*w) || *w == '_'; w++)
                ;
            for (i = 0; i < nm; i++)
                if (strlen(macros[i]) == (size_t)(w - l) &&
                    strncmp(l, macros[i], (size_t)(w - l)) == 0)
                    bad = 0;
            ck_assert_msg(!bad, "%s.cl's source (common.cl first), line "
                          "%d: %.40s defines a function that is neither "
                          "__kernel nor static", cg__kfile_names[f], line,
                          l);
        }
        free(src);
    }
}
END_TEST

/* A kernel argument the kernel refuses is reported with its index and
 * the kernel's name. */
START_TEST(argument_errors_name_the_kernel)
{
    cl_kernel k;
    cl_mem m = NULL;
    cl_uchar small = 0;

    ck_assert_int_eq(cg__kernel(tt_ctx(), CG__K_COPY4, &k), CG_OK);
    ck_assert_int_ne(cg__args(k, CG__ARG(m), CG__ARG(small)), CG_OK);
    ck_assert_ptr_nonnull(strstr(cg_last_error(), "clSetKernelArg(1)"));
    ck_assert_ptr_nonnull(strstr(cg_last_error(), "copy4"));
}
END_TEST

/* Setting a tunable rebuilds its file's kernels with the new value (the
 * work-group size the kernel requires follows) and leaves the others;
 * clearing the tuning brings back the table's defaults. */
START_TEST(setting_a_tunable_rebuilds_its_file)
{
    cg_context *ctx = cg_context_new(NULL);
    cl_kernel k, other, again;
    size_t wg[3];

    ck_assert_ptr_nonnull(ctx);
    ck_assert_int_eq(cg__kernel(ctx, CG__K_COPY4, &other), CG_OK);
    cg__param_set(ctx, CG__P_REDUCE_RWG, 32);
    ck_assert_int_eq(cg__kernel(ctx, CG__K_REDUCE_SUM, &k), CG_OK);
    ck_assert_int_eq(clGetKernelWorkGroupInfo(k, ctx->device,
                     CL_KERNEL_COMPILE_WORK_GROUP_SIZE, sizeof wg, wg, NULL),
                     CL_SUCCESS);
    ck_assert_uint_eq(wg[0], 32);
    cg__param_set(ctx, CG__P_REDUCE_RWG, 16);
    ck_assert_ptr_null(ctx->k[CG__KV_F32][CG__K_REDUCE_SUM]);
    ck_assert_int_eq(cg__kernel(ctx, CG__K_REDUCE_SUM, &k), CG_OK);
    ck_assert_int_eq(clGetKernelWorkGroupInfo(k, ctx->device,
                     CL_KERNEL_COMPILE_WORK_GROUP_SIZE, sizeof wg, wg, NULL),
                     CL_SUCCESS);
    ck_assert_uint_eq(wg[0], 16);
    ck_assert_int_eq(cg__kernel(ctx, CG__K_COPY4, &again), CG_OK);
    ck_assert_ptr_eq(again, other);
    ck_assert_int_eq(cg_context_clear_tuning(ctx), CG_OK);
    ck_assert_int_eq(cg__param(ctx, CG__P_REDUCE_RWG),
                     cg__param_table[CG__P_REDUCE_RWG].dflt);
    cg_context_free(ctx);
}
END_TEST

/* A kernel file read from CLGRAD_KERNEL_DIR gets its list files inlined,
 * as the embedded sources do. */
START_TEST(kernel_dir_inlines_list_files)
{
    char path[512];
    FILE *f;
    cg_context *ctx;
    cg__program *p;
    cl_kernel k;
    cl_int rc;

    snprintf(path, sizeof path, "%s/fam.def", tt_tmpdir());
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("K(one)\nK(two)\n", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/fam.cl", tt_tmpdir());
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("#define K(n) __kernel void n(__global int *x) { x[0] = 1; }\n"
          "#include \"fam.def\"\n", f);
    fclose(f);
    setenv("CLGRAD_KERNEL_DIR", tt_tmpdir(), 1);
    ctx = cg_context_new(NULL);
    ck_assert_ptr_nonnull(ctx);
    ck_assert_msg(cg__program_get(ctx, "fam", NULL, &p) == CG_OK, "%s",
                  cg_last_error());
    k = clCreateKernel(p->program, "two", &rc);
    ck_assert_int_eq(rc, CL_SUCCESS);
    clReleaseKernel(k);
    cg_context_free(ctx);
    unsetenv("CLGRAD_KERNEL_DIR");
}
END_TEST

/* The one .bin file in `dir`, or "" if there is none or more than one. */
static void
only_cache_file(const char *dir, char *out, size_t size)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int count = 0;

    out[0] = '\0';
    if (!d)
        return;
    while ((e = readdir(d)) != NULL)
        if (strstr(e->d_name, ".bin") &&
            strlen(e->d_name) == 36 && count++ == 0)
            snprintf(out, size, "%s/%s", dir, e->d_name);
    closedir(d);
    if (count != 1)
        out[0] = '\0';
}

static const char *src_a =
    "__kernel void twice(__global float *x) { x[get_global_id(0)] *= 2; }\n";

/* Builds src_a in a fresh context; returns whether it came from the
 * cache. */
static int
build_fresh(const char *options)
{
    cg_context *ctx = cg_context_new(NULL);
    cg__program *p;
    int from_cache;

    ck_assert_ptr_nonnull(ctx);
    ck_assert_msg(cg__program_get_source(ctx, "twice", src_a, options, &p) ==
                  CG_OK, "%s", cg_last_error());
    from_cache = p->from_cache;
    cg_context_free(ctx);
    return from_cache;
}

static void
use_cache_dir(const char *name, char *dir, size_t size)
{
    snprintf(dir, size, "%s/%s", tt_tmpdir(), name);
    setenv("CLGRAD_CACHE_DIR", dir, 1);
}

START_TEST(cache_misses_then_hits)
{
    char dir[512], file[600];

    use_cache_dir("hit", dir, sizeof dir);
    ck_assert_int_eq(build_fresh(NULL), 0);
    only_cache_file(dir, file, sizeof file);
    ck_assert_msg(file[0], "no cache file written in %s", dir);
    ck_assert_int_eq(build_fresh(NULL), 1);
    /* Other options are another key: a miss, then a second file. */
    ck_assert_int_eq(build_fresh("-DUNUSED=1"), 0);
    only_cache_file(dir, file, sizeof file);
    ck_assert_str_eq(file, "");
    ck_assert_int_eq(build_fresh("-DUNUSED=1"), 1);
}
END_TEST

/* What the progress callback saw: the events of the last builds. */
static struct {
    int n, starts, hits, dones;
    char file[64], dir[512];
} seen;

static void
count_events(const cg_compile_event *e, void *user)
{
    seen.n++;
    seen.starts += !e->done;
    seen.hits += e->done && e->from_cache;
    seen.dones += e->done && !e->from_cache && !e->failed;
    snprintf(seen.file, sizeof seen.file, "%s", e->file);
    snprintf(seen.dir, sizeof seen.dir, "%s", e->cache_dir ? e->cache_dir
             : "");
    ck_assert_ptr_eq(user, &seen);
    ck_assert_ptr_nonnull(e->device);
}

/* The progress callback hears of a compile before and after it, of a
 * cache hit once, and nothing once it is unset. */
START_TEST(compile_progress_reports_builds)
{
    char dir[512];

    use_cache_dir("progress", dir, sizeof dir);
    cg_set_compile_progress(count_events, &seen);
    memset(&seen, 0, sizeof seen);
    ck_assert_int_eq(build_fresh("-DPROGRESS=1"), 0);
    ck_assert_int_eq(seen.n, 2);
    ck_assert_int_eq(seen.starts, 1);
    ck_assert_int_eq(seen.dones, 1);
    ck_assert_str_eq(seen.file, "twice");
    ck_assert_str_eq(seen.dir, dir);
    memset(&seen, 0, sizeof seen);
    ck_assert_int_eq(build_fresh("-DPROGRESS=1"), 1);
    ck_assert_int_eq(seen.n, 1);
    ck_assert_int_eq(seen.hits, 1);
    cg_set_compile_progress(NULL, NULL);
    memset(&seen, 0, sizeof seen);
    ck_assert_int_eq(build_fresh("-DPROGRESS=2"), 0);
    ck_assert_int_eq(seen.n, 0);
}
END_TEST

static void
corrupt(const char *path, long offset, const char *bytes, size_t n,
        int truncate_it)
{
    FILE *f = fopen(path, "r+b");

    ck_assert_ptr_nonnull(f);
    if (truncate_it) {
        ck_assert_int_eq(ftruncate(fileno(f), offset), 0);
    } else {
        fseek(f, offset, SEEK_SET);
        fwrite(bytes, 1, n, f);
    }
    fclose(f);
}

START_TEST(corrupted_cache_files_are_rebuilt)
{
    char dir[512], file[600];
    int i;

    use_cache_dir("corrupt", dir, sizeof dir);
    ck_assert_int_eq(build_fresh(NULL), 0);
    only_cache_file(dir, file, sizeof file);
    ck_assert(file[0]);
    for (i = 0; i < 5; i++) {
        switch (i) {
        case 0: corrupt(file, 0, NULL, 0, 1); break;        /* empty */
        case 1: corrupt(file, 30, NULL, 0, 1); break;       /* short header */
        case 2: corrupt(file, 100, NULL, 0, 1); break;      /* truncated */
        case 3: corrupt(file, 0, "XXXX", 4, 0); break;      /* magic */
        case 4: corrupt(file, 60, "\xde\xad\xbe\xef", 4, 0); break; /* data */
        }
        /* Rebuilt from source, never an error... */
        ck_assert_int_eq(build_fresh(NULL), 0);
        /* ...and the file rewritten, so the next build hits. */
        ck_assert_int_eq(build_fresh(NULL), 1);
    }
}
END_TEST

/* Builds src_a in a fresh context and runs it over 0..n-1: each element
 * must come out doubled.  Returns whether the program came from the
 * cache. */
static int
build_and_run_fresh(void)
{
    cg_context *ctx = cg_context_new(NULL);
    float host[37];
    size_t i, global = 37;
    cg__program *p;
    cg_buffer *buf;
    cl_kernel k;
    cl_mem m;
    cl_int rc;
    int from_cache;

    ck_assert_ptr_nonnull(ctx);
    ck_assert_msg(cg__program_get_source(ctx, "twice", src_a, "-DSEAL=1",
                                         &p) == CG_OK, "%s", cg_last_error());
    from_cache = p->from_cache;
    for (i = 0; i < 37; i++)
        host[i] = (float)i + 0.5f;
    buf = cg_buffer_new(ctx, sizeof host);
    ck_assert_ptr_nonnull(buf);
    ck_assert_int_eq(cg_buffer_write(buf, 0, host, sizeof host), CG_OK);
    k = clCreateKernel(p->program, "twice", &rc);
    ck_assert_int_eq(rc, CL_SUCCESS);
    m = cg__buffer_mem(buf);
    ck_assert_int_eq(cg__args(k, CG__ARG(m)), CG_OK);
    ck_assert_int_eq(cg__launch(ctx, k, 1, &global, NULL, NULL), CG_OK);
    ck_assert_int_eq(cg_buffer_read(buf, 0, host, sizeof host), CG_OK);
    for (i = 0; i < 37; i++)
        ck_assert_float_eq(host[i], 2.0f * ((float)i + 0.5f));
    clReleaseKernel(k);
    cg_buffer_free(buf);
    cg_context_free(ctx);
    return from_cache;
}

static unsigned char *
slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    unsigned char *d;
    long n;

    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    d = malloc((size_t)n);
    ck_assert_int_eq(fread(d, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return d;
}

static void
spit(const char *path, const unsigned char *d, size_t len)
{
    FILE *f = fopen(path, "wb");

    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fwrite(d, 1, len, f), len);
    fclose(f);
}

/* Issue 16, defect 5: a cache file whose header is consistent with a
 * truncated or altered binary (its length and a checksum of what is
 * there, as anyone can compute) used to reach clCreateProgramWithBinary,
 * where PoCL's deserializer asserts and aborts.  Only a binary sealed with
 * the cache directory's secret is loaded: these are rebuilt from source,
 * the program still gives the right results, and the file is rewritten. */
START_TEST(forged_cache_payloads_are_rebuilt)
{
    char dir[512], file[600], keyfile[600];
    unsigned char *orig, *forged;
    size_t len, i;
    int kase;

    use_cache_dir("sealed", dir, sizeof dir);
    snprintf(keyfile, sizeof keyfile, "%s/cache.key", dir);
    ck_assert_int_eq(build_and_run_fresh(), 0);
    only_cache_file(dir, file, sizeof file);
    ck_assert(file[0]);
    ck_assert_int_eq(access(keyfile, R_OK), 0);
    ck_assert_int_eq(build_and_run_fresh(), 1);
    orig = slurp(file, &len);
    ck_assert_uint_gt(len, 48 + 16);
    forged = malloc(len);
    for (kase = 0; kase < 4; kase++) {
        size_t binlen = len - 48;
        cg__hash h;

        memcpy(forged, orig, len);
        switch (kase) {
        case 0: binlen /= 2; break;                  /* truncated */
        case 1: binlen = 1; break;                   /* one byte left */
        case 2: forged[48 + binlen / 2] ^= 0x5a; break;  /* altered */
        case 3: memcpy(forged, "CLGRADB1", 8); break;  /* format 1 */
        }
        /* The header made consistent: the length of what is there and an
         * unkeyed hash of it in the checksum field. */
        for (i = 0; i < 8; i++)
            forged[24 + i] = (unsigned char)((uint64_t)binlen >> (8 * i));
        cg__hash_init(&h);
        cg__hash_update(&h, forged + 48, binlen);
        for (i = 0; i < 8; i++) {
            forged[32 + i] = (unsigned char)(h.hi >> (8 * i));
            forged[40 + i] = (unsigned char)(h.lo >> (8 * i));
        }
        spit(file, forged, 48 + binlen);
        ck_assert_msg(build_and_run_fresh() == 0, "case %d loaded", kase);
        ck_assert_msg(build_and_run_fresh() == 1, "case %d not rewritten",
                      kase);
    }
    /* An intact file whose directory lost its secret (or was copied
     * elsewhere) is a miss too; a new secret is made and used. */
    ck_assert_int_eq(unlink(keyfile), 0);
    ck_assert_int_eq(build_and_run_fresh(), 0);
    ck_assert_int_eq(access(keyfile, R_OK), 0);
    ck_assert_int_eq(build_and_run_fresh(), 1);
    /* A secret of the wrong length is replaced, not trusted. */
    spit(keyfile, (const unsigned char *)"short", 5);
    ck_assert_int_eq(build_and_run_fresh(), 0);
    ck_assert_int_eq(build_and_run_fresh(), 1);
    free(forged);
    free(orig);
}
END_TEST

/* The cache's file I/O, a miss, a write, a hit, and a write that fails,
 * leaves the error state as it was: a long message (a build log runs to
 * kilobytes) whole, and its status. */
START_TEST(cache_io_leaves_the_error_state_alone)
{
    static char msg[8000];
    const char *dirs[3] = { NULL, NULL, "/dev/null/not-a-dir" };
    char dir[512];
    cg_context *ctx;
    cg__program *p;
    int i;

    memset(msg, 'x', sizeof msg - 4);
    memcpy(msg + sizeof msg - 4, "end", 4);
    use_cache_dir("quiet", dir, sizeof dir);
    dirs[0] = dirs[1] = dir;
    for (i = 0; i < 3; i++) {
        setenv("CLGRAD_CACHE_DIR", dirs[i], 1);
        ctx = cg_context_new(NULL);
        ck_assert_ptr_nonnull(ctx);
        cg__error(CG_EIO, "%s", msg);
        ck_assert_int_eq(cg__program_get_source(ctx, "twice", src_a,
                                                "-DQUIET=1", &p), CG_OK);
        ck_assert_int_eq(p->from_cache, i == 1);
        ck_assert_int_eq(cg__last_status(), CG_EIO);
        ck_assert_str_eq(cg_last_error() + strlen("CG_EIO: "), msg);
        cg_context_free(ctx);
    }
    setenv("CLGRAD_CACHE_DIR", dir, 1);
}
END_TEST

START_TEST(cache_can_be_switched_off)
{
    char dir[512], file[600];

    use_cache_dir("off", dir, sizeof dir);
    setenv("CLGRAD_CACHE", "0", 1);
    ck_assert_int_eq(build_fresh(NULL), 0);
    ck_assert_int_eq(build_fresh(NULL), 0);
    only_cache_file(dir, file, sizeof file);
    ck_assert_str_eq(file, "");
    unsetenv("CLGRAD_CACHE");
}
END_TEST

START_TEST(cache_directory_follows_the_environment)
{
    char dir[4096];

    setenv("CLGRAD_CACHE_DIR", "/x/y", 1);
    ck_assert_int_eq(cg__cache_dir(dir, sizeof dir), 1);
    ck_assert_str_eq(dir, "/x/y");
    unsetenv("CLGRAD_CACHE_DIR");
    setenv("XDG_CACHE_HOME", "/cache", 1);
    ck_assert_int_eq(cg__cache_dir(dir, sizeof dir), 1);
    ck_assert_str_eq(dir, "/cache/clgrad");
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/home/u", 1);
    ck_assert_int_eq(cg__cache_dir(dir, sizeof dir), 1);
    ck_assert_str_eq(dir, "/home/u/.cache/clgrad");
}
END_TEST

START_TEST(syntax_error_reports_the_build_log)
{
    cg__program *p = NULL;
    const char *bad = "__kernel void broken(__global float *x) {\n"
                      "    x[0] = undeclared_thing + ;\n}\n";
    const char *e;

    ck_assert_int_eq(cg__program_get_source(tt_ctx(), "broken", bad,
                                            "-DMARK=7", &p), CG_EBUILD);
    ck_assert_ptr_null(p);
    e = cg_last_error();
    ck_assert_ptr_nonnull(strstr(e, "CG_EBUILD"));
    ck_assert_ptr_nonnull(strstr(e, "'broken'"));
    ck_assert_ptr_nonnull(strstr(e, "-DMARK=7"));
    ck_assert_ptr_nonnull(strstr(e, "CL_BUILD_PROGRAM_FAILURE"));
    /* The compiler's own words about the bad identifier. */
    ck_assert_msg(strstr(e, "undeclared_thing") != NULL, "%s", e);
    /* The context is still usable afterwards. */
    free(run_copy4(tt_ctx(), 3));
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("program");
    TCase *tc = tcase_create("program");

    tt_require_device();
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, embedded_kernel_builds_and_runs);
    tcase_add_test(tc, kernel_dir_override_reads_sources_from_disk);
    tcase_add_test(tc, cache_misses_then_hits);
    tcase_add_test(tc, compile_progress_reports_builds);
    tcase_add_test(tc, corrupted_cache_files_are_rebuilt);
    tcase_add_test(tc, forged_cache_payloads_are_rebuilt);
    tcase_add_test(tc, cache_can_be_switched_off);
    tcase_add_test(tc, cache_io_leaves_the_error_state_alone);
    tcase_add_test(tc, syntax_error_reports_the_build_log);
    tcase_add_test(tc, cache_directory_follows_the_environment);
    tcase_add_test(tc, every_table_kernel_builds);
    tcase_add_test(tc, every_kernel_file_builds_without_warnings);
    tcase_add_test(tc, kernel_helpers_are_static);
    tcase_add_test(tc, argument_errors_name_the_kernel);
    tcase_add_test(tc, setting_a_tunable_rebuilds_its_file);
    tcase_add_test(tc, kernel_dir_inlines_list_files);
    suite_add_tcase(s, tc);
    return tt_run(s);
}
