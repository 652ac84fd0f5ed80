/*
 * tests/test_program.c - kernels: the embedded sources build and run, the
 * CLGRAD_KERNEL_DIR override, the program binary cache (miss, hit,
 * corruption, off switch, the error state left alone) and build failures
 * with their log.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cl/internal.h"
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
    ck_assert_msg(cg__kernel_create(ctx, "measure", NULL, "copy4", &k) ==
                  CG_OK, "%s", cg_last_error());
    a = cg_buffer_new(ctx, n * 16);
    b = cg_buffer_new(ctx, n * 16);
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(cg_buffer_write(a, 0, host, n * 16), CG_OK);
    memset(host, 0, n * 16);
    ma = cg__buffer_mem(a);
    mb = cg__buffer_mem(b);
    clSetKernelArg(k, 0, sizeof ma, &ma);
    clSetKernelArg(k, 1, sizeof mb, &mb);
    clSetKernelArg(k, 2, sizeof n, &n);
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
    cl_kernel k;
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
    ck_assert_int_eq(cg__kernel_create(ctx, "nothing_here", NULL, "x", &k),
                     CG_EIO);
    ck_assert_ptr_nonnull(strstr(cg_last_error(), "nothing_here.cl"));
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
    tcase_add_test(tc, corrupted_cache_files_are_rebuilt);
    tcase_add_test(tc, cache_can_be_switched_off);
    tcase_add_test(tc, cache_io_leaves_the_error_state_alone);
    tcase_add_test(tc, syntax_error_reports_the_build_log);
    tcase_add_test(tc, cache_directory_follows_the_environment);
    suite_add_tcase(s, tc);
    return tt_run(s);
}
