/* SPDX-License-Identifier: MIT */
/*
 * tests/test_batch_norm.c - batch_norm on [N, C], [N, C, L] and [N, C, H,
 * W]: forward against a C reference in double and backward against finite
 * differences (tests/opcheck.h) in training and evaluation, with and
 * without affine, at odd sizes (1, 3, 7 channels); the running statistics
 * after a training step against the reference; PyTorch 1.13's outputs,
 * gradients and running statistics (tests/fixtures/batch_norm.txt);
 * bit-identical gradients from run to run; and
 * bad arguments failing with the right status, changing nothing.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "opcheck.h"

#define ASSERT_STATUS(name)                                                  \
    ck_assert_msg(strncmp(cg_last_error(), name ":", strlen(name) + 1) == 0, \
                  "expected %s, got \"%s\"", name, cg_last_error())

#define MOMENTUM 0.1f
#define EPS 1e-5f

/* Evaluation uses running statistics rm[c] = 0.1 c - 0.2, rv[c] = 0.5 +
 * 0.25 c (at most 8 channels). */
typedef struct { int training, affine; } bparam;

static double
ref_rm(int64_t c)
{
    return (double)(0.1f * (float)c - 0.2f);
}

static double
ref_rv(int64_t c)
{
    return (double)(0.5f + 0.25f * (float)c);
}

static cg_tensor *
run_bn(cg_tensor **in, const void *param)
{
    const bparam *p = param;
    int64_t shape[CG_MAX_DIMS], c;
    float rm[8], rv[8];
    cg_tensor *trm = NULL, *trv = NULL, *y;

    cg_tensor_shape(in[0], shape);
    for (c = 0; c < shape[1] && c < 8; c++) {
        rm[c] = (float)ref_rm(c);
        rv[c] = (float)ref_rv(c);
    }
    if (!p->training) {
        trm = cg_tensor_from_host(cg_tensor_context(in[0]), CG_F32, 1,
                                  shape + 1, rm);
        trv = cg_tensor_from_host(cg_tensor_context(in[0]), CG_F32, 1,
                                  shape + 1, rv);
        ck_assert(trm && trv);
    }
    y = cg_batch_norm(in[0], trm, trv, p->affine ? in[1] : NULL,
                      p->affine ? in[2] : NULL, p->training, MOMENTUM, EPS);
    cg_tensor_free(trm);
    cg_tensor_free(trv);
    return y;
}

/* mean and biased variance of channel c of x viewed as [N, C, L]. */
static void
ref_stats(const oc_tensor *x, int64_t c, double *mean, double *var)
{
    int64_t N = x->shape[0], C = x->shape[1], L = x->numel / (N * C), n, l;
    double m = 0, v = 0;

    for (n = 0; n < N; n++)
        for (l = 0; l < L; l++)
            m += x->data[(n * C + c) * L + l];
    m /= (double)(N * L);
    for (n = 0; n < N; n++)
        for (l = 0; l < L; l++) {
            double d = x->data[(n * C + c) * L + l] - m;

            v += d * d;
        }
    *mean = m;
    *var = v / (double)(N * L);
}

static void
ref_bn(const oc_tensor *in, oc_tensor *out, const void *param)
{
    const bparam *p = param;
    const oc_tensor *x = &in[0];
    int64_t N = x->shape[0], C = x->shape[1], L = x->numel / (N * C);
    int64_t n, c, l;

    out->ndim = x->ndim;
    memcpy(out->shape, x->shape, sizeof out->shape);
    oc_alloc(out);
    for (c = 0; c < C; c++) {
        double mean, var;

        if (p->training) {
            ref_stats(x, c, &mean, &var);
        } else {
            mean = ref_rm(c);
            var = ref_rv(c);
        }
        for (n = 0; n < N; n++)
            for (l = 0; l < L; l++) {
                int64_t o = (n * C + c) * L + l;
                double v = (x->data[o] - mean) / sqrt(var + (double)EPS);

                if (p->affine)
                    v = v * in[1].data[c] + in[2].data[c];
                out->data[o] = v;
            }
    }
}

START_TEST(batch_norm_matches_reference)
{
    static const struct { const char *x, *w; } cases[] = {
        { "5,3", "3" }, { "T7,3", "3" }, { "4,7,5", "7" },
        { "2,3,5,7", "3" }, { "3,1,3,3", "1" }, { "1,3,9", "3" },
        { "O2,7,3,5", "7" }, { "2,1", "1" },
    };
    static const char *names[2][2] = {
        { "batch_norm(eval)", "batch_norm(eval,w,b)" },
        { "batch_norm(train)", "batch_norm(train,w,b)" },
    };
    oc_op op = { 0 };
    size_t c;
    int t, a;

    op.run = run_bn;
    op.ref = ref_bn;
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (t = 0; t < 2; t++)
            for (a = 0; a < 2; a++) {
                bparam p = { t, a };

                op.name = names[t][a];
                op.ninputs = a ? 3 : 1;
                op.lo[1] = 0.5;
                op.hi[1] = 1.5;
                oc_check(&op, &p, cases[c].x, cases[c].w, cases[c].w);
            }
}
END_TEST

/* A training step updates the running statistics in place, with the
 * unbiased variance; evaluation leaves them alone. */
START_TEST(training_updates_running_statistics)
{
    int64_t shape[4] = { 3, 7, 5, 3 }, cs = 7, c;
    size_t n = 3 * 7 * 5 * 3;
    float *x = malloc(n * sizeof *x), rm[7], rv[7], rm1[7], rv1[7];
    cg_tensor *tx, *trm, *trv, *y;
    oc_tensor ox;
    size_t i;

    ck_assert_ptr_nonnull(x);
    for (i = 0; i < n; i++)
        x[i] = (float)oc_uniform(-1.0, 3.0);
    for (c = 0; c < 7; c++) {
        rm[c] = (float)ref_rm(c);
        rv[c] = (float)ref_rv(c);
    }
    tx = cg_tensor_from_host(tt_ctx(), CG_F32, 4, shape, x);
    trm = cg_tensor_from_host(tt_ctx(), CG_F32, 1, &cs, rm);
    trv = cg_tensor_from_host(tt_ctx(), CG_F32, 1, &cs, rv);
    ck_assert(tx && trm && trv);
    y = cg_batch_norm(tx, trm, trv, NULL, NULL, 1, MOMENTUM, EPS);
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(cg_tensor_to_host(trm, rm1, sizeof rm1), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(trv, rv1, sizeof rv1), CG_OK);
    memset(&ox, 0, sizeof ox);
    ox.ndim = 4;
    memcpy(ox.shape, shape, sizeof shape);
    ox.numel = (int64_t)n;
    ox.data = malloc(n * sizeof *ox.data);
    ck_assert_ptr_nonnull(ox.data);
    for (i = 0; i < n; i++)
        ox.data[i] = x[i];
    for (c = 0; c < 7; c++) {
        double mean, var, M = 3 * 5 * 3, wm;

        ref_stats(&ox, c, &mean, &var);
        wm = (1 - (double)MOMENTUM) * rm[c] + (double)MOMENTUM * mean;
        ck_assert_msg(fabs(rm1[c] - wm) <= 1e-6 * fmax(1, fabs(wm)),
                      "running_mean[%d] %g, want %g", (int)c, rm1[c], wm);
        wm = (1 - (double)MOMENTUM) * rv[c] +
             (double)MOMENTUM * var * M / (M - 1);
        ck_assert_msg(fabs(rv1[c] - wm) <= 1e-6 * fmax(1, fabs(wm)),
                      "running_var[%d] %g, want %g", (int)c, rv1[c], wm);
    }
    cg_tensor_free(y);
    /* Evaluation reads them and changes nothing. */
    y = cg_batch_norm(tx, trm, trv, NULL, NULL, 0, MOMENTUM, EPS);
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(cg_tensor_to_host(trm, rm, sizeof rm), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(trv, rv, sizeof rv), CG_OK);
    ck_assert(memcmp(rm, rm1, sizeof rm) == 0);
    ck_assert(memcmp(rv, rv1, sizeof rv) == 0);
    cg_tensor_free(y);
    cg_tensor_free(tx);
    cg_tensor_free(trm);
    cg_tensor_free(trv);
    free(ox.data);
    free(x);
}
END_TEST

/* Max |got - want| over max |want| (1 when want is all zero). */
static double
rel_err(const float *got, const fx_tensor *want)
{
    double err = 0, big = 0;
    int64_t i;

    for (i = 0; i < want->numel; i++) {
        double d = fabs((double)got[i] - want->data[i]);

        err = d > err ? d : err;
        big = fabs(want->data[i]) > big ? fabs(want->data[i]) : big;
    }
    return err / (big > 0 ? big : 1);
}

static cg_tensor *
fx_tensor_new(const fx_file *f, const char *what, int i)
{
    char name[64];
    const fx_tensor *t;
    cg_tensor *r;

    snprintf(name, sizeof name, "%s.%d", what, i);
    t = fx_get(f, name);
    ck_assert_msg(t != NULL, "batch_norm.txt: no %s", name);
    r = cg_tensor_from_host(tt_ctx(), CG_F32, t->ndim, t->shape, t->data);
    ck_assert_ptr_nonnull(r);
    return r;
}

/* Compares device tensor t with fixture tensor what.i, within 1e-5 of
 * the fixture's largest value. */
static void
expect_fixture(const fx_file *f, cg_tensor *t, const char *what, int i)
{
    char name[64];
    const fx_tensor *want;
    float *buf;
    double e;

    snprintf(name, sizeof name, "%s.%d", what, i);
    want = fx_get(f, name);
    ck_assert_msg(want != NULL, "batch_norm.txt: no %s", name);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(cg_tensor_numel(t), want->numel);
    buf = malloc((size_t)want->numel * sizeof *buf);
    ck_assert_ptr_nonnull(buf);
    ck_assert_int_eq(cg_tensor_to_host(t, buf, (size_t)want->numel *
                                       sizeof *buf), CG_OK);
    e = rel_err(buf, want);
    ck_assert_msg(e <= 1e-5, "%s: error %g", name, e);
    free(buf);
}

START_TEST(batch_norm_matches_pytorch_fixture)
{
    char err[256], key[32];
    fx_file *f = fx_load_fixture("batch_norm.txt", err, sizeof err);
    int n, i, c[2];

    ck_assert_msg(f != NULL, "%s", err);
    n = fx_config_int(f, "cases", 0);
    ck_assert_int_gt(n, 0);
    for (i = 0; i < n; i++) {
        cg_tensor *x, *w = NULL, *b = NULL, *rm, *rv, *g, *y, *prod, *l;

        snprintf(key, sizeof key, "case.%d", i);
        ck_assert_int_eq(fx_config_ints(f, key, c, 2), 2);
        x = fx_tensor_new(f, "input", i);
        ck_assert_int_eq(cg_tensor_set_requires_grad(x, 1), CG_OK);
        if (c[1]) {
            w = fx_tensor_new(f, "weight", i);
            b = fx_tensor_new(f, "bias", i);
            ck_assert_int_eq(cg_tensor_set_requires_grad(w, 1), CG_OK);
            ck_assert_int_eq(cg_tensor_set_requires_grad(b, 1), CG_OK);
        }
        rm = fx_tensor_new(f, "running_mean", i);
        rv = fx_tensor_new(f, "running_var", i);
        g = fx_tensor_new(f, "grad_output", i);
        y = cg_batch_norm(x, rm, rv, w, b, c[0], MOMENTUM, EPS);
        ck_assert_msg(y != NULL, "case %d: %s", i, cg_last_error());
        expect_fixture(f, y, "output", i);
        expect_fixture(f, rm, "running_mean_after", i);
        expect_fixture(f, rv, "running_var_after", i);
        prod = cg_mul(y, g);
        l = prod ? cg_sum(prod, 0, NULL, 0) : NULL;
        ck_assert_ptr_nonnull(l);
        ck_assert_int_eq(cg_backward(l, NULL, 0), CG_OK);
        expect_fixture(f, cg_tensor_grad(x), "grad_input", i);
        if (c[1]) {
            expect_fixture(f, cg_tensor_grad(w), "grad_weight", i);
            expect_fixture(f, cg_tensor_grad(b), "grad_bias", i);
        }
        cg_tensor_free(l);
        cg_tensor_free(prod);
        cg_tensor_free(y);
        cg_tensor_free(g);
        cg_tensor_free(rm);
        cg_tensor_free(rv);
        cg_tensor_free(w);
        cg_tensor_free(b);
        cg_tensor_free(x);
    }
    fx_free(f);
}
END_TEST

/* The per-channel sums are fixed trees: the same bits every run. */
START_TEST(batch_norm_gradients_are_deterministic)
{
    int64_t shape[4] = { 5, 3, 17, 19 }, cs = 3;
    size_t n = 5 * 3 * 17 * 19;
    float *first = malloc(n * sizeof *first), *again = malloc(n * sizeof
                                                               *again);
    float gw0[3], gw[3];
    int run;

    ck_assert(first && again);
    for (run = 0; run < 3; run++) {
        cg_tensor *x, *w, *y, *g, *prod, *l;

        ck_assert_int_eq(cg_manual_seed(tt_ctx(), 11), CG_OK);
        x = cg_rand_normal(tt_ctx(), 4, shape, 1.0f, 2.0f);
        w = cg_rand_normal(tt_ctx(), 1, &cs, 1.0f, 0.1f);
        g = cg_rand_normal(tt_ctx(), 4, shape, 0.0f, 1.0f);
        ck_assert(x && w && g);
        ck_assert_int_eq(cg_tensor_set_requires_grad(x, 1), CG_OK);
        ck_assert_int_eq(cg_tensor_set_requires_grad(w, 1), CG_OK);
        y = cg_batch_norm(x, NULL, NULL, w, NULL, 1, MOMENTUM, EPS);
        prod = y ? cg_mul(y, g) : NULL;
        l = prod ? cg_sum(prod, 0, NULL, 0) : NULL;
        ck_assert_ptr_nonnull(l);
        ck_assert_int_eq(cg_backward(l, NULL, 0), CG_OK);
        ck_assert_int_eq(cg_tensor_to_host(cg_tensor_grad(x),
                                           run ? again : first,
                                           n * sizeof *first), CG_OK);
        ck_assert_int_eq(cg_tensor_to_host(cg_tensor_grad(w),
                                           run ? gw : gw0, sizeof gw),
                         CG_OK);
        if (run) {
            ck_assert(memcmp(first, again, n * sizeof *first) == 0);
            ck_assert(memcmp(gw0, gw, sizeof gw) == 0);
        }
        cg_tensor_free(l);
        cg_tensor_free(prod);
        cg_tensor_free(y);
        cg_tensor_free(g);
        cg_tensor_free(w);
        cg_tensor_free(x);
    }
    free(first);
    free(again);
}
END_TEST

static uint64_t
in_use(void)
{
    cg_memory_stats st;

    ck_assert_int_eq(cg_context_stats(tt_ctx(), &st), CG_OK);
    return st.bytes_in_use;
}

static char failed_msg[512];

#define EXPECT_FAIL(call, name)                                              \
    do {                                                                     \
        uint64_t before_ = in_use();                                         \
        ck_assert_ptr_null(call);                                            \
        ASSERT_STATUS(name);                                                 \
        snprintf(failed_msg, sizeof failed_msg, "%s", cg_last_error());      \
        ck_assert_uint_eq(in_use(), before_);                                \
    } while (0)

START_TEST(bad_arguments_fail_and_change_nothing)
{
    int64_t s4[4] = { 2, 3, 2, 2 }, s1[1] = { 3 }, s5[1] = { 5 };
    int64_t s13[3] = { 1, 3, 1 }, s6[1] = { 6 };
    cg_tensor *x = cg_ones(tt_ctx(), 4, s4), *rm = cg_zeros(tt_ctx(), 1, s1);
    cg_tensor *rv = cg_ones(tt_ctx(), 1, s1), *r5 = cg_ones(tt_ctx(), 1, s5);
    cg_tensor *one = cg_ones(tt_ctx(), 3, s13), *x1 = cg_ones(tt_ctx(), 1, s6);
    float m[3], v[3];
    int c;

    ck_assert(x && rm && rv && r5 && one && x1);
    ck_assert_int_eq(cg_tensor_set_requires_grad(x, 1), CG_OK);
    EXPECT_FAIL(cg_batch_norm(x, r5, rv, NULL, NULL, 1, 0.1f, 1e-5f),
                "CG_ESHAPE");
    ck_assert_ptr_nonnull(strstr(failed_msg, "[5]"));
    ck_assert_ptr_nonnull(strstr(failed_msg, "[2, 3, 2, 2]"));
    EXPECT_FAIL(cg_batch_norm(x, rm, r5, NULL, NULL, 0, 0.1f, 1e-5f),
                "CG_ESHAPE");
    EXPECT_FAIL(cg_batch_norm(x, rm, rv, r5, NULL, 1, 0.1f, 1e-5f),
                "CG_ESHAPE");
    EXPECT_FAIL(cg_batch_norm(x, rm, rv, NULL, r5, 1, 0.1f, 1e-5f),
                "CG_ESHAPE");
    EXPECT_FAIL(cg_batch_norm(x1, NULL, NULL, NULL, NULL, 1, 0.1f, 1e-5f),
                "CG_ESHAPE");
    EXPECT_FAIL(cg_batch_norm(one, rm, rv, NULL, NULL, 1, 0.1f, 1e-5f),
                "CG_ESHAPE");
    ck_assert_ptr_nonnull(strstr(failed_msg, "more than 1"));
    EXPECT_FAIL(cg_batch_norm(x, NULL, NULL, NULL, NULL, 0, 0.1f, 1e-5f),
                "CG_EINVAL");
    EXPECT_FAIL(cg_batch_norm(x, rm, NULL, NULL, NULL, 1, 0.1f, 1e-5f),
                "CG_EINVAL");
    EXPECT_FAIL(cg_batch_norm(x, rm, rv, NULL, NULL, 1, 1.5f, 1e-5f),
                "CG_EINVAL");
    EXPECT_FAIL(cg_batch_norm(x, rm, rv, NULL, NULL, 1, 0.1f, -1.0f),
                "CG_EINVAL");
    EXPECT_FAIL(cg_batch_norm(NULL, rm, rv, NULL, NULL, 1, 0.1f, 1e-5f),
                "CG_EINVAL");
    /* Nothing changed: the running statistics are still 0 and 1. */
    ck_assert_int_eq(cg_tensor_to_host(rm, m, sizeof m), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(rv, v, sizeof v), CG_OK);
    for (c = 0; c < 3; c++)
        ck_assert(m[c] == 0.0f && v[c] == 1.0f);
    ck_assert_ptr_null(cg_tensor_grad(x));
    ck_assert(cg_tensor_is_leaf(x));
    cg_tensor_free(x);
    cg_tensor_free(rm);
    cg_tensor_free(rv);
    cg_tensor_free(r5);
    cg_tensor_free(one);
    cg_tensor_free(x1);
}
END_TEST

START_TEST(print_error_table)
{
    oc_report();
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("batch_norm");
    TCase *tc = tcase_create("batch_norm");

    tt_require_device();
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, batch_norm_matches_reference);
    tcase_add_test(tc, training_updates_running_statistics);
    tcase_add_test(tc, batch_norm_matches_pytorch_fixture);
    tcase_add_test(tc, batch_norm_gradients_are_deterministic);
    tcase_add_test(tc, bad_arguments_fail_and_change_nothing);
    tcase_add_test(tc, print_error_table);
    suite_add_tcase(s, tc);
    return tt_run(s);
}
