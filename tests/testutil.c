/* SPDX-License-Identifier: MIT */
/*
 * tests/testutil.c - shared context and runner for the test programs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static cg_context *shared_ctx;
static char tmpdir[256];

static void
no_device(const char *why)
{
    const char *ci = getenv("CI");

    if (ci && *ci && strcmp(ci, "false") != 0) {
        fprintf(stderr, "FAIL: no OpenCL device in CI: %s\n", why);
        exit(1);
    }
    fprintf(stderr, "SKIP: no OpenCL device: %s\n", why);
    exit(77);
}

void
tt_require_device(void)
{
    int n = 0;

    if (cg_device_count(&n) != CG_OK || n == 0)
        no_device(cg_last_error());
}

cg_context *
tt_ctx(void)
{
    if (!shared_ctx) {
        tt_require_device();
        shared_ctx = cg_context_new(NULL);
        if (!shared_ctx)
            no_device(cg_last_error());
    }
    return shared_ctx;
}

static void
remove_tmpdir(void)
{
    char cmd[300];

    if (!tmpdir[0])
        return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "warning: could not remove %s\n", tmpdir);
}

const char *
tt_tmpdir(void)
{
    if (!tmpdir[0]) {
        const char *base = getenv("TMPDIR");

        snprintf(tmpdir, sizeof tmpdir, "%s/clgrad-test-XXXXXX",
                 base && *base ? base : "/tmp");
        if (!mkdtemp(tmpdir)) {
            perror("mkdtemp");
            exit(99);
        }
        atexit(remove_tmpdir);
    }
    return tmpdir;
}

int
tt_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    int failed;

    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    cg_context_free(shared_ctx);
    shared_ctx = NULL;
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

int
tt_checker(void)
{
    const char *c = getenv("CLGRAD_TEST_CHECKER");

    return c != NULL && *c != '\0';
}

int
tt_host_checker(void)
{
    const char *c = getenv("CLGRAD_TEST_CHECKER");

    return c != NULL && (strcmp(c, "valgrind") == 0 || strcmp(c, "asan") == 0);
}

int
tt_api_checker(void)
{
    const char *c = getenv("CLGRAD_TEST_CHECKER");

    return c != NULL && strcmp(c, "oclgrind") == 0;
}

char *
tt_run_tool(const char *env, const char *tool, const char *args, int *status)
{
    const char *bld = getenv("TEST_BUILDDIR");
    char cmd[2048], errf[1024];
    size_t cap = 1 << 16, len = 0, n;
    char *out = malloc(cap);
    FILE *p;
    int rc;

    ck_assert_ptr_nonnull(out);
    snprintf(errf, sizeof errf, "%s/%s.stderr", tt_tmpdir(), tool);
    snprintf(cmd, sizeof cmd, "%s%s'%s/tools/%s' %s 2>'%s'",
             env ? env : "", env ? " " : "", bld ? bld : ".", tool, args,
             errf);
    p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    while ((n = fread(out + len, 1, cap - len - 1, p)) > 0) {
        len += n;
        if (len + 1 == cap) {
            out = realloc(out, cap *= 2);
            ck_assert_ptr_nonnull(out);
        }
    }
    out[len] = '\0';
    rc = pclose(p);
    *status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    /* a crash (the shell's 128 + signal, or a sanitizer's abort): its
     * stderr into the test's log */
    if (*status < 0 || *status >= 128) {
        FILE *e = fopen(errf, "r");
        char line[512];

        fprintf(stderr, "%s %s: exit status %d; its stderr:\n", tool, args,
                *status);
        while (e && fgets(line, sizeof line, e))
            fputs(line, stderr);
        if (e)
            fclose(e);
    }
    remove(errf);
    return out;
}

int
tt_launches(cg_context *ctx, const char *name)
{
    cg_profile_entry pe[64];
    int i, n = 0, count = 0;

    ck_assert_int_eq(cg_context_profile(ctx, pe, 64, &n), CG_OK);
    for (i = 0; i < n && i < 64; i++)
        if (strcmp(pe[i].name, name) == 0)
            count += (int)pe[i].launches;
    return count;
}

int
tt_in_force(const cg_context *ctx, const char *kernel, const char *shape,
            cg_tuning_entry *out)
{
    int i, n;

    ck_assert_int_eq(cg_context_tuning_count(ctx, &n), CG_OK);
    for (i = 0; i < n; i++) {
        ck_assert_int_eq(cg_context_tuning_entry(ctx, i, out), CG_OK);
        if (strcmp(out->kernel, kernel) == 0 &&
            strcmp(out->shape, shape) == 0)
            return 1;
    }
    return 0;
}
