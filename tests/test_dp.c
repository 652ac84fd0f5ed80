/* SPDX-License-Identifier: MIT */
/*
 * tests/test_dp.c - data parallelism in one process (cg_dp_new): two
 * replicas on two contexts (two OpenCL devices when there are: the
 * program asks PoCL for two, POCL_DEVICES="pthread pthread", unless the
 * environment says otherwise) train an MLP for 20 steps on halves of a
 * global batch of 32 and end equal, to 1e-6 of each parameter's scale, to
 * one replica trained on the whole batch; the replicas stay bit-identical
 * to each other; two runs are bit-identical; the first gradient bucket is
 * read while backward is still being queued (queue order, not time);
 * mismatched replicas (a shape, the parameter count), 16-bit parameters, a shared context and a failing
 * replica give clear errors and change nothing; bucket sizes come from
 * cg_dp_options, else the tuning entry "dp", else PyTorch's defaults.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "dp_model.h"
#include "testutil.h"
#include "tune/tuner.h"

#define BATCH 32
#define STEPS DPM_MAX_STEPS
#define NPARAM DPM_NPARAM
#define IN DPM_IN
#define HID DPM_HID
#define OUT DPM_OUT
#define MAXN 2          /* replicas */

static cg_context *ctxs[MAXN];

static cg_context *
ctx_of(int i)
{
    if (!ctxs[i]) {
        int count = 0;
        char sel[16];

        cg_device_count(&count);
        snprintf(sel, sizeof sel, "%d", count > 1 ? i : 0);
        ctxs[i] = cg_context_new(sel);
        ck_assert_msg(ctxs[i] != NULL, "%s", TT_ERR);
    }
    return ctxs[i];
}

static cg_module *
mlp(cg_context *ctx, int hid)
{
    cg_module *m = dpm_mlp(ctx, hid);

    ck_assert_msg(m != NULL, "%s", TT_ERR);
    return m;
}

static cg_optimizer *
optimizer(cg_module *m, int adam)
{
    cg_optimizer *o = dpm_optimizer(m, adam);

    ck_assert_msg(o != NULL, "%s", TT_ERR);
    return o;
}

static void
params_host(cg_module *m, float *out[NPARAM])
{
    int64_t count[NPARAM];

    ck_assert_msg(dpm_params_host(m, out, count) == CG_OK, "%s", TT_ERR);
}

static void
free_params(float *v[NPARAM])
{
    int i;

    for (i = 0; i < NPARAM; i++)
        free(v[i]);
}

/* Trains STEPS steps on `n` replicas (n = 1: one device, whole batch);
 * returns replica r's parameters in got[r]. */
static void
train(int n, int adam, const cg_dp_options *o, float *got[MAXN][NPARAM],
      cg_dp_stats *stats)
{
    cg_module *m[MAXN];
    cg_optimizer *opt[MAXN];
    cg_dp *dp;
    dpm_arg a = { 0, BATCH / n, -1 };
    float losses[MAXN];
    int r;

    for (r = 0; r < n; r++) {
        m[r] = mlp(ctx_of(r), HID);
        opt[r] = optimizer(m[r], adam);
        ck_assert(opt[r]);
    }
    dp = cg_dp_new(n, m, opt, o);
    ck_assert_msg(dp != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_dp_world_size(dp), n);
    ck_assert_int_eq(cg_dp_local_count(dp), n);
    for (a.step = 0; a.step < STEPS; a.step++) {
        ck_assert_msg(cg_dp_step(dp, dpm_loss, NULL, &a, losses) == CG_OK,
                      "%s", TT_ERR);
        for (r = 0; r < n; r++)
            ck_assert(isfinite(losses[r]) && losses[r] > 0);
    }
    if (stats)
        ck_assert_int_eq(cg_dp_get_stats(dp, stats), CG_OK);
    cg_dp_free(dp);
    for (r = 0; r < n; r++) {
        params_host(m[r], got[r]);
        cg_optim_free(opt[r]);
        cg_module_free(m[r]);
    }
}

/* max |a - b| <= tol * max |b| over each parameter. */
static void
assert_close(float *a[NPARAM], float *b[NPARAM], double tol,
             const char *what)
{
    static const int64_t sizes[NPARAM] = { HID * IN, HID, OUT * HID, OUT };
    int i;
    int64_t j;

    for (i = 0; i < NPARAM; i++) {
        double scale = 0, err = 0;

        for (j = 0; j < sizes[i]; j++) {
            scale = fmax(scale, fabs(b[i][j]));
            err = fmax(err, fabs((double)a[i][j] - b[i][j]));
        }
        printf("%-28s param %d: max |diff| %.3g of scale %.3g\n", what, i,
               err, scale);
        ck_assert_msg(err <= tol * scale, "%s: parameter %d differs by %g "
                      "(scale %g)", what, i, err, scale);
    }
}

static void
equal_case(int adam)
{
    float *one[MAXN][NPARAM], *two[MAXN][NPARAM], *again[MAXN][NPARAM];
    cg_dp_options o = { 0 };
    int i;

        train(1, adam, NULL, one, NULL);
    o.first_bucket_mb = 1e-3;       /* several buckets */
    o.bucket_mb = 1e-3;
    train(2, adam, &o, two, NULL);
    assert_close(two[0], one[0], 1e-6, adam ? "adam: 2 replicas vs 1"
                                            : "sgd: 2 replicas vs 1");
    assert_close(two[1], two[0], 0, "replica 1 vs replica 0");
    train(2, adam, &o, again, NULL);
    assert_close(again[0], two[0], 0, "second run vs first");
    for (i = 0; i < MAXN; i++) {
        if (i < 1)
            free_params(one[i]);
        free_params(two[i]);
        free_params(again[i]);
    }
}

START_TEST(sgd_equals_one_device)
{
    equal_case(0);
}
END_TEST

START_TEST(adam_equals_one_device)
{
    equal_case(1);
}
END_TEST

/* Buckets of one parameter each: four buckets, and the first (the last
 * layer's bias) read while backward still had launches to queue. */
START_TEST(buckets_overlap_backward)
{
    float *got[MAXN][NPARAM];
    cg_dp_options o = { 0 };
    cg_dp_stats st;
    int r;

        o.first_bucket_mb = 1e-6;
    o.bucket_mb = 1e-6;
    train(2, 0, &o, got, &st);
    printf("buckets %d, %g bytes, backward launches %d, first bucket read "
           "after %d; reduce %.3g s, exposed %.3g s\n", st.buckets, st.bytes,
           st.backward_launches, st.first_bucket_after, st.reduce_s,
           st.exposed_s);
    ck_assert_int_eq(st.world_size, 2);
    ck_assert_int_eq(st.buckets, NPARAM);
    ck_assert_int_eq(st.params, NPARAM);
    ck_assert(st.bytes == 4.0 * (HID * IN + HID + OUT * HID + OUT));
    ck_assert_int_gt(st.backward_launches, 0);
    ck_assert_int_lt(st.first_bucket_after, st.backward_launches);
    ck_assert(st.exposed_s <= st.reduce_s);
    /* Default sizes: everything in the first 1 MiB bucket. */
    for (r = 0; r < MAXN; r++)
        free_params(got[r]);
    train(2, 0, NULL, got, &st);
    ck_assert_int_eq(st.buckets, 1);
    for (r = 0; r < MAXN; r++)
        free_params(got[r]);
}
END_TEST

/* The bucket sizes: an entry "dp" of a tuning file in the user's
 * directory is in force where cg_dp_options leaves a size 0; a size given
 * wins; without either, PyTorch's 25 and 1 MiB.  cg_dp_get_stats says
 * which and from where.  No step: the sizes are fixed by cg_dp_new. */
START_TEST(bucket_sizes_from_tuning)
{
    char dir[512], path[4096];
    cg_device_info info;
    cg_tuning_db *db;
    cg_tuning_entry e;
    cg_context *ctx;
    cg_module *m;
    cg_optimizer *opt;
    cg_dp *dp;
    cg_dp_stats st;
    cg_dp_options o = { 0 };

    ck_assert_int_eq(cg_context_device_info(ctx_of(0), &info), CG_OK);
    snprintf(dir, sizeof dir, "%s/dptuning", tt_tmpdir());
    ck_assert_int_eq(setenv("CLGRAD_TUNING_DIR", dir, 1), 0);
    ck_assert_int_eq(cg_tuning_path(&info, path, sizeof path), CG_OK);
    db = cg_tuning_db_new(&info);
    ck_assert_msg(db != NULL, "%s", TT_ERR);
    memset(&e, 0, sizeof e);
    snprintf(e.kernel, sizeof e.kernel, "dp");
    snprintf(e.shape, sizeof e.shape, "any");
    e.nparams = 2;
    snprintf(e.names[0], sizeof e.names[0], "bucket_kb");
    e.values[0] = 3;
    snprintf(e.names[1], sizeof e.names[1], "first_bucket_kb");
    e.values[1] = 1;
    e.time_us = e.default_time_us = 1;
    ck_assert_int_eq(cg_tuning_db_put(db, &e), CG_OK);
    ck_assert_msg(cg_tuning_db_save(db, path) == CG_OK, "%s", TT_ERR);
    cg_tuning_db_free(db);
    ctx = cg_context_new(NULL);
    unsetenv("CLGRAD_TUNING_DIR");
    ck_assert_msg(ctx != NULL, "%s", TT_ERR);
    m = mlp(ctx, HID);
    opt = optimizer(m, 0);
    /* From the file: 1 KiB, then 3 KiB buckets (of 1312 bytes). */
    dp = cg_dp_new(1, &m, &opt, NULL);
    ck_assert_msg(dp != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_dp_get_stats(dp, &st), CG_OK);
    printf("tuning file: %g MiB, first %g MiB, %d buckets (%s)\n",
           st.bucket_mb, st.first_bucket_mb, st.buckets, st.bucket_origin);
    ck_assert(st.bucket_mb == 3.0 / 1024 && st.first_bucket_mb == 1.0 / 1024);
    ck_assert_msg(strncmp(st.bucket_origin, "tuning (", 8) == 0 &&
                  strstr(st.bucket_origin, path) != NULL, "%s",
                  st.bucket_origin);
    ck_assert_int_gt(st.buckets, 1);
    cg_dp_free(dp);
    /* A size given wins; the other still comes from the file. */
    o.bucket_mb = 2;
    dp = cg_dp_new(1, &m, &opt, &o);
    ck_assert_msg(dp != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_dp_get_stats(dp, &st), CG_OK);
    ck_assert(st.bucket_mb == 2 && st.first_bucket_mb == 1.0 / 1024);
    ck_assert_msg(strncmp(st.bucket_origin, "cg_dp_options; first bucket "
                          "tuning (", 36) == 0, "%s", st.bucket_origin);
    cg_dp_free(dp);
    o.first_bucket_mb = 1e-3;
    dp = cg_dp_new(1, &m, &opt, &o);
    ck_assert_msg(dp != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_dp_get_stats(dp, &st), CG_OK);
    ck_assert(st.bucket_mb == 2 && st.first_bucket_mb == 1e-3);
    ck_assert_str_eq(st.bucket_origin, "cg_dp_options");
    cg_dp_free(dp);
    /* Without the entry: PyTorch's. */
    ck_assert_int_eq(cg_context_clear_tuning(ctx), CG_OK);
    dp = cg_dp_new(1, &m, &opt, NULL);
    ck_assert_msg(dp != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_dp_get_stats(dp, &st), CG_OK);
    ck_assert(st.bucket_mb == 25 && st.first_bucket_mb == 1);
    ck_assert_str_eq(st.bucket_origin, "default");
    ck_assert_int_eq(st.buckets, 1);
    cg_dp_free(dp);
    /* Bad sizes: an error, nothing made. */
    o.bucket_mb = -1;
    ck_assert(cg_dp_new(1, &m, &opt, &o) == NULL);
    ck_assert_int_eq(cg__last_status(), CG_EINVAL);
    ck_assert_msg(strstr(cg_last_error(), "bucket_mb") != NULL, "%s",
                  TT_ERR);
    /* Entries a context refuses: another shape, an unknown parameter, a
     * size out of range. */
    snprintf(e.shape, sizeof e.shape, "H64");
    ck_assert_int_eq(cg_context_set_tuning(ctx, &e), CG_EINVAL);
    snprintf(e.shape, sizeof e.shape, "any");
    e.values[0] = 0;
    ck_assert_int_eq(cg_context_set_tuning(ctx, &e), CG_EINVAL);
    e.values[0] = 3;
    snprintf(e.names[1], sizeof e.names[1], "WG");
    ck_assert_int_eq(cg_context_set_tuning(ctx, &e), CG_EINVAL);
    e.nparams = 1;
    ck_assert_int_eq(cg_context_set_tuning(ctx, &e), CG_OK);
    cg_optim_free(opt);
    cg_module_free(m);
    cg_context_free(ctx);
}
END_TEST

START_TEST(bad_configurations)
{
    cg_module *m[MAXN], *odd;
    cg_optimizer *opt[MAXN], *odd_opt;
    cg_dp *dp;
    float *before[NPARAM], *after[NPARAM];
    dpm_arg a = { 0, BATCH / 2, 1 };
    int r;

        for (r = 0; r < MAXN; r++) {
        m[r] = mlp(ctx_of(r), HID);
        opt[r] = optimizer(m[r], 0);
    }
    ck_assert(cg_dp_new(0, m, opt, NULL) == NULL);
    ck_assert_int_eq(cg__last_status(), CG_EINVAL);
    ck_assert(cg_dp_new(2, NULL, opt, NULL) == NULL);
    ck_assert_int_eq(cg__last_status(), CG_EINVAL);
    /* A replica with another hidden size. */
    odd = mlp(ctx_of(1), HID + 1);
    odd_opt = optimizer(odd, 0);
    {
        cg_module *mm[2] = { m[0], odd };
        cg_optimizer *oo[2] = { opt[0], odd_opt };

        ck_assert(cg_dp_new(2, mm, oo, NULL) == NULL);
        ck_assert_int_eq(cg__last_status(), CG_ESHAPE);
        ck_assert_msg(strstr(cg_last_error(), "parameter 0") != NULL, "%s",
                      TT_ERR);
    }
    /* A replica with a layer more: two parameters more. */
    {
        cg_module *big = mlp(ctx_of(1), HID);
        cg_tensor *p[NPARAM + 2];
        cg_sgd_options so = { 0 };
        cg_optimizer *big_opt;

        ck_assert_int_eq(cg_module_add(big, "extra",
                                       cg_linear_new(ctx_of(1), OUT, OUT,
                                                     1)), CG_OK);
        ck_assert_int_eq(cg_module_params(big, p, NPARAM + 2), NPARAM + 2);
        so.lr = 0.1;
        big_opt = cg_optim_sgd_new(ctx_of(1), p, NPARAM + 2, &so);
        ck_assert_msg(big_opt != NULL, "%s", TT_ERR);
        {
            cg_module *mm[2] = { m[0], big };
            cg_optimizer *oo[2] = { opt[0], big_opt };

            ck_assert(cg_dp_new(2, mm, oo, NULL) == NULL);
            ck_assert_int_eq(cg__last_status(), CG_ESHAPE);
            ck_assert_msg(strstr(cg_last_error(), "replica 1 has 6 "
                                 "parameters, replica 0 has 4") != NULL,
                          "%s", TT_ERR);
        }
        cg_optim_free(big_opt);
        cg_module_free(big);
    }
    /* 16-bit parameters: refused (autocast keeps them float32).  A
     * cast kernel: natively only. */
    if (!tt_host_checker()) {
        cg_module *half = mlp(ctx_of(1), HID);
        cg_optimizer *half_opt = optimizer(half, 0);
        cg_module *mm[2] = { m[0], half };
        cg_optimizer *oo[2] = { opt[0], half_opt };

        ck_assert_int_eq(cg_module_to_dtype(half, CG_BF16), CG_OK);
        ck_assert(cg_dp_new(2, mm, oo, NULL) == NULL);
        ck_assert_int_eq(cg__last_status(), CG_EDTYPE);
        ck_assert_msg(strstr(cg_last_error(), "replica 1 is bfloat16") &&
                      strstr(cg_last_error(), "autocast"), "%s", TT_ERR);
        cg_optim_free(half_opt);
        cg_module_free(half);
    }
    /* Both replicas on one context. */
    if (cg_tensor_context(cg_module_param(m[0], 0, NULL)) !=
        cg_tensor_context(cg_module_param(m[1], 0, NULL))) {
        cg_module *mm[2] = { m[0], m[0] };
        cg_optimizer *oo[2] = { opt[0], opt[0] };

        ck_assert(cg_dp_new(2, mm, oo, NULL) == NULL);
        ck_assert_int_eq(cg__last_status(), CG_ECONTEXT);
    }
    /* A replica whose loss fails: an error naming it, no step. */
    dp = cg_dp_new(2, m, opt, NULL);
    ck_assert_msg(dp != NULL, "%s", TT_ERR);
    params_host(m[0], before);
    ck_assert_int_ne(cg_dp_step(dp, dpm_loss, NULL, &a, NULL), CG_OK);
    ck_assert_msg(strstr(cg_last_error(), "replica 1") != NULL, "%s",
                  TT_ERR);
    params_host(m[0], after);
    assert_close(after, before, 0, "after a failed step");
    /* And the next good step works. */
    a.fail_rank = -1;
    ck_assert_msg(cg_dp_step(dp, dpm_loss, NULL, &a, NULL) == CG_OK, "%s",
                  TT_ERR);
    ck_assert(cg_dp_step(dp, NULL, NULL, &a, NULL) == CG_EINVAL);
    cg_dp_free(dp);
    free_params(before);
    free_params(after);
#ifndef HAVE_MPI
    ck_assert(cg_dp_new_mpi(m[0], opt[0], NULL) == NULL);
    ck_assert_int_eq(cg__last_status(), CG_EUNSUPPORTED);
#endif
    cg_optim_free(odd_opt);
    cg_module_free(odd);
    for (r = 0; r < MAXN; r++) {
        cg_optim_free(opt[r]);
        cg_module_free(m[r]);
    }
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("dp");
    TCase *tc = tcase_create("dp");
    int rc, i;

    /* Two OpenCL devices from PoCL, unless the environment chose. */
    setenv("POCL_DEVICES", "pthread pthread", 0);
    tt_require_device();
    tcase_set_timeout(tc, 0);
    tcase_add_test(tc, sgd_equals_one_device);
    tcase_add_test(tc, adam_equals_one_device);
    tcase_add_test(tc, buckets_overlap_backward);
    tcase_add_test(tc, bad_configurations);
    tcase_add_test(tc, bucket_sizes_from_tuning);
    suite_add_tcase(s, tc);
    rc = tt_run(s);
    for (i = 0; i < MAXN; i++)
        cg_context_free(ctxs[i]);
    return rc;
}
