/* SPDX-License-Identifier: MIT */
/*
 * tests/test_pooling.c - max_pool2d, avg_pool2d and adaptive_avg_pool2d:
 * forward against a C reference in double and backward against finite
 * differences (tests/opcheck.h) at odd sizes (1, 3, 7 channels, odd H and
 * W, stride 2, padding, dilation, ceil_mode, count_include_pad,
 * divisor_override, non-contiguous inputs); max_pool2d's ties and NaN as
 * PyTorch's CPU kernel; bit-identical gradients from run to run; and bad
 * geometry failing with CG_ESHAPE / CG_EINVAL, allocating nothing; and
 * PyTorch 1.13's results (tests/fixtures/pool.txt).
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

/* One pooling call: kind 0 max, 1 avg, 2 adaptive. */
typedef struct pparam {
    int kind;
    int k[2], s[2], pd[2], dl[2];
    int ceil_mode, include_pad, divisor;
    int64_t oh, ow;
} pparam;

/* Case tables: kernel, stride (0,0: the kernel), padding, dilation and
 * ceil_mode; for avg_pool2d ceil_mode, count_include_pad and the divisor
 * override instead of the dilation. */
#define MP(k0, k1, s0, s1, p0, p1, d0, d1, cm)                               \
    { .kind = 0, .k = { k0, k1 }, .s = { s0, s1 }, .pd = { p0, p1 },         \
      .dl = { d0, d1 }, .ceil_mode = cm }
#define AP(k0, k1, s0, s1, p0, p1, cm, ip, dv)                               \
    { .kind = 1, .k = { k0, k1 }, .s = { s0, s1 }, .pd = { p0, p1 },         \
      .dl = { 1, 1 }, .ceil_mode = cm, .include_pad = ip, .divisor = dv }

static cg_tensor *
run_pool(cg_tensor **in, const void *param)
{
    const pparam *p = param;

    if (p->kind == 0)
        return cg_max_pool2d(in[0], p->k, p->s[0] ? p->s : NULL, p->pd,
                             p->dl, p->ceil_mode);
    if (p->kind == 1)
        return cg_avg_pool2d(in[0], p->k, p->s[0] ? p->s : NULL, p->pd,
                             p->ceil_mode, p->include_pad, p->divisor);
    return cg_adaptive_avg_pool2d(in[0], p->oh, p->ow);
}

/* The output size, written out from PyTorch's pooling_output_shape. */
static int64_t
ref_out(int64_t n, int k, int s, int pd, int dl, int ceil_mode)
{
    double v = (double)(n + 2 * pd - dl * (k - 1) - 1) / s;
    int64_t o = (int64_t)(ceil_mode ? ceil(v) : floor(v)) + 1;

    if (ceil_mode && (o - 1) * s >= n + pd)
        o--;
    return o;
}

static void
ref_pool(const oc_tensor *in, oc_tensor *out, const void *param)
{
    const pparam *p = param;
    const oc_tensor *x = &in[0];
    int nd = x->ndim, s0 = p->s[0] ? p->s[0] : p->k[0];
    int s1 = p->s[0] ? p->s[1] : p->k[1];
    int64_t H = x->shape[nd - 2], W = x->shape[nd - 1], OH, OW, pl, planes;
    int64_t oh, ow, h, w;

    if (p->kind == 2) {
        OH = p->oh;
        OW = p->ow;
    } else {
        OH = ref_out(H, p->k[0], s0, p->pd[0], p->dl[0], p->ceil_mode);
        OW = ref_out(W, p->k[1], s1, p->pd[1], p->dl[1], p->ceil_mode);
    }
    out->ndim = nd;
    memcpy(out->shape, x->shape, sizeof out->shape);
    out->shape[nd - 2] = OH;
    out->shape[nd - 1] = OW;
    oc_alloc(out);
    planes = x->numel / (H * W);
    for (pl = 0; pl < planes; pl++)
        for (oh = 0; oh < OH; oh++)
            for (ow = 0; ow < OW; ow++) {
                const double *xp = x->data + pl * H * W;
                double v = 0;

                if (p->kind == 0) {
                    int i, j;

                    v = -INFINITY;
                    for (i = 0; i < p->k[0]; i++)
                        for (j = 0; j < p->k[1]; j++) {
                            h = oh * s0 - p->pd[0] + i * p->dl[0];
                            w = ow * s1 - p->pd[1] + j * p->dl[1];
                            if (h >= 0 && h < H && w >= 0 && w < W &&
                                xp[h * W + w] > v)
                                v = xp[h * W + w];
                        }
                } else if (p->kind == 1) {
                    int64_t h0 = oh * s0 - p->pd[0], w0 = ow * s1 - p->pd[1];
                    int64_t h1 = h0 + p->k[0], w1 = w0 + p->k[1], n = 0;
                    int64_t full = ((h1 < H + p->pd[0] ? h1 : H + p->pd[0]) -
                                    h0) *
                                   ((w1 < W + p->pd[1] ? w1 : W + p->pd[1]) -
                                    w0);

                    for (h = h0; h < h1; h++)
                        for (w = w0; w < w1; w++)
                            if (h >= 0 && h < H && w >= 0 && w < W) {
                                v += xp[h * W + w];
                                n++;
                            }
                    v /= p->divisor ? p->divisor :
                         p->include_pad ? full : n;
                } else {
                    int64_t h0 = (int64_t)floor((double)oh * H / OH);
                    int64_t h1 = (int64_t)ceil((double)(oh + 1) * H / OH);
                    int64_t w0 = (int64_t)floor((double)ow * W / OW);
                    int64_t w1 = (int64_t)ceil((double)(ow + 1) * W / OW);

                    for (h = h0; h < h1; h++)
                        for (w = w0; w < w1; w++)
                            v += xp[h * W + w];
                    v /= (double)((h1 - h0) * (w1 - w0));
                }
                out->data[(pl * OH + oh) * OW + ow] = v;
            }
}

START_TEST(max_pool2d_matches_reference)
{
    static const struct { const char *x; pparam p; } cases[] = {
        { "1,1,5,5", MP(2,2, 0,0, 0,0, 1,1, 0) },
        { "2,3,7,9", MP(3,3, 2,2, 1,1, 1,1, 0) },
        { "1,7,9,7", MP(3,2, 2,1, 1,1, 2,1, 0) },
        { "3,7,5", MP(2,3, 2,2, 1,0, 1,2, 1) },
        { "2,3,7,7", MP(3,3, 2,2, 0,0, 1,1, 1) },
        { "1,3,11,13", MP(5,3, 3,2, 2,1, 2,3, 1) },
        { "T1,3,9,7", MP(2,2, 0,0, 1,1, 1,1, 0) },
        { "O2,1,6,5", MP(1,1, 2,2, 0,0, 1,1, 0) },
        { "1,3,5,5", MP(2,2, 2,2, 1,1, 1,1, 1) },   /* ceil drops one */
        /* rows of 18 outputs: the kernel's 8-lane loads at stride 1
         * and 2, and a partial last block */
        { "2,2,4,19", MP(2,2, 1,1, 0,0, 1,1, 0) },
        { "1,2,5,37", MP(3,3, 2,2, 0,0, 1,1, 0) },
    };
    oc_op op = { 0 };
    size_t c;

    op.name = "max_pool2d";
    op.ninputs = 1;
    op.run = run_pool;
    op.ref = ref_pool;
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++)
        oc_check(&op, &cases[c].p, cases[c].x);
}
END_TEST

START_TEST(avg_pool2d_matches_reference)
{
    static const struct { const char *x; pparam p; } cases[] = {
        { "1,1,5,5", AP(2,2, 0,0, 0,0, 0, 1, 0) },
        { "2,3,7,9", AP(3,3, 2,2, 1,1, 0, 1, 0) },
        { "2,3,7,9", AP(3,3, 2,2, 1,1, 0, 0, 0) },
        { "1,7,9,7", AP(3,2, 2,1, 1,1, 1, 1, 0) },
        { "1,7,9,7", AP(3,2, 2,1, 1,1, 1, 0, 0) },
        { "3,7,5", AP(2,3, 2,2, 1,0, 1, 1, 5) },
        { "1,3,11,13", AP(5,3, 3,2, 2,1, 1, 0, 0) },
        { "T1,3,9,7", AP(2,2, 0,0, 1,1, 0, 1, 0) },
        { "1,3,5,5", AP(2,2, 2,2, 1,1, 1, 1, 0) },  /* ceil drops one */
        { "1,3,6,5", AP(3,2, 2,2, 1,1, 1, 0, 0) },
    };
    oc_op op = { 0 };
    size_t c;

    op.name = "avg_pool2d";
    op.ninputs = 1;
    op.run = run_pool;
    op.ref = ref_pool;
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++)
        oc_check(&op, &cases[c].p, cases[c].x);
}
END_TEST

START_TEST(adaptive_avg_pool2d_matches_reference)
{
    static const struct { const char *x; int64_t oh, ow; } cases[] = {
        { "1,1,5,5", 1, 1 }, { "2,3,7,9", 3, 4 }, { "1,7,9,7", 4, 3 },
        { "3,7,5", 7, 5 }, { "1,3,5,3", 7, 4 }, { "T1,3,9,7", 2, 5 },
    };
    oc_op op = { 0 };
    size_t c;

    op.name = "adaptive_avg_pool2d";
    op.ninputs = 1;
    op.run = run_pool;
    op.ref = ref_pool;
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        pparam p = { .kind = 2 };

        p.oh = cases[c].oh;
        p.ow = cases[c].ow;
        oc_check(&op, &p, cases[c].x);
    }
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

static const fx_tensor *
fx_need(const fx_file *f, const char *what, int i)
{
    char name[64];
    const fx_tensor *t;

    snprintf(name, sizeof name, "%s.%d", what, i);
    t = fx_get(f, name);
    ck_assert_msg(t != NULL, "pool.txt: no %s", name);
    return t;
}

/* PyTorch 1.13's outputs and input gradients (tests/fixtures/gen_pool.py),
 * each tensor within 1e-5 of its largest value. */
START_TEST(pool_matches_pytorch_fixture)
{
    char err[256], key[32];
    fx_file *f = fx_load_fixture("pool.txt", err, sizeof err);
    int n, i, c[14];

    ck_assert_msg(f != NULL, "%s", err);
    n = fx_config_int(f, "cases", 0);
    ck_assert_int_gt(n, 0);
    for (i = 0; i < n; i++) {
        const fx_tensor *x = fx_need(f, "input", i);
        const fx_tensor *y = fx_need(f, "output", i);
        const fx_tensor *go = fx_need(f, "grad_output", i);
        const fx_tensor *gi = fx_need(f, "grad_input", i);
        cg_tensor *in[1], *out, *g, *prod, *l;
        float *buf;
        pparam p;
        double e;

        snprintf(key, sizeof key, "case.%d", i);
        ck_assert_int_eq(fx_config_ints(f, key, c, 14), 14);
        memset(&p, 0, sizeof p);
        p.kind = c[0];
        p.k[0] = c[1], p.k[1] = c[2], p.s[0] = c[3], p.s[1] = c[4];
        p.pd[0] = c[5], p.pd[1] = c[6], p.dl[0] = c[7], p.dl[1] = c[8];
        p.ceil_mode = c[9], p.include_pad = c[10], p.divisor = c[11];
        p.oh = c[12], p.ow = c[13];
        in[0] = cg_tensor_from_host(tt_ctx(), CG_F32, x->ndim, x->shape,
                                    x->data);
        g = cg_tensor_from_host(tt_ctx(), CG_F32, go->ndim, go->shape,
                                go->data);
        ck_assert(in[0] && g);
        ck_assert_int_eq(cg_tensor_set_requires_grad(in[0], 1), CG_OK);
        out = run_pool(in, &p);
        ck_assert_msg(out != NULL, "case %d: %s", i, cg_last_error());
        ck_assert_int_eq(cg_tensor_numel(out), y->numel);
        buf = malloc((size_t)(x->numel > y->numel ? x->numel : y->numel) *
                     sizeof *buf);
        ck_assert_ptr_nonnull(buf);
        ck_assert_int_eq(cg_tensor_to_host(out, buf,
                                           (size_t)y->numel * sizeof *buf),
                         CG_OK);
        e = rel_err(buf, y);
        ck_assert_msg(e <= 1e-5, "case %d: output error %g", i, e);
        prod = cg_mul(out, g);
        l = prod ? cg_sum(prod, 0, NULL, 0) : NULL;
        ck_assert_ptr_nonnull(l);
        ck_assert_int_eq(cg_backward(l, NULL, 0), CG_OK);
        ck_assert_int_eq(cg_tensor_to_host(cg_tensor_grad(in[0]), buf,
                                           (size_t)x->numel * sizeof *buf),
                         CG_OK);
        e = rel_err(buf, gi);
        ck_assert_msg(e <= 1e-5, "case %d: gradient error %g", i, e);
        free(buf);
        cg_tensor_free(l);
        cg_tensor_free(prod);
        cg_tensor_free(out);
        cg_tensor_free(g);
        cg_tensor_free(in[0]);
    }
    fx_free(f);
}
END_TEST

/* Ties go to the first maximum in scan order (rows, then columns); a NaN
 * wins (the last NaN in the window) and the gradient follows. */
START_TEST(max_pool2d_ties_and_nan_follow_pytorch)
{
    /* One 3 x 4 plane, kernel 2, stride 1: windows overlap. */
    static const float x[12] = { 1, 1, 0, 5,
                                 1, 1, NAN, 5,
                                 0, 2, 2, 5 };
    /* PyTorch 1.13 (CPU): */
    static const int32_t want_max_pos[6] = { 0, 6, 6, 9, 6, 6 };
    int64_t shape[4] = { 1, 1, 3, 4 }, oshape[4];
    int k[2] = { 2, 2 }, s[2] = { 1, 1 };
    cg_tensor *t = cg_tensor_from_host(tt_ctx(), CG_F32, 4, shape, x);
    cg_tensor *y, *sum, *g;
    float out[6], gx[12], want_g[12] = { 0 };
    int i;

    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(cg_tensor_set_requires_grad(t, 1), CG_OK);
    y = cg_max_pool2d(t, k, s, NULL, NULL, 0);
    ck_assert_ptr_nonnull(y);
    cg_tensor_shape(y, oshape);
    ck_assert(oshape[2] == 2 && oshape[3] == 3);
    ck_assert_int_eq(cg_tensor_to_host(y, out, sizeof out), CG_OK);
    for (i = 0; i < 6; i++) {
        float w = x[want_max_pos[i]];

        ck_assert_msg(isnan(w) ? isnan(out[i]) : out[i] == w,
                      "output %d: %g", i, out[i]);
        want_g[want_max_pos[i]] += 1.0f;
    }
    sum = cg_sum(y, 0, NULL, 0);
    ck_assert_ptr_nonnull(sum);
    ck_assert_int_eq(cg_backward(sum, NULL, 0), CG_OK);
    g = cg_tensor_grad(t);
    ck_assert_ptr_nonnull(g);
    ck_assert_int_eq(cg_tensor_to_host(g, gx, sizeof gx), CG_OK);
    for (i = 0; i < 12; i++)
        ck_assert_msg(gx[i] == want_g[i], "gx[%d] = %g, want %g", i, gx[i],
                      want_g[i]);
    cg_tensor_free(sum);
    cg_tensor_free(y);
    cg_tensor_free(t);
}
END_TEST

/* Overlapping windows: the gathers give the same bits every run. */
START_TEST(pool_gradients_are_deterministic)
{
    int64_t shape[4] = { 2, 3, 17, 19 };
    int k[2] = { 3, 3 }, s[2] = { 1, 2 }, pd[2] = { 1, 1 };
    float *first = NULL, *again;
    size_t n = 2 * 3 * 17 * 19;
    int run, kind;

    first = malloc(n * sizeof *first);
    again = malloc(n * sizeof *again);
    ck_assert(first && again);
    for (kind = 0; kind < 3; kind++)
        for (run = 0; run < 3; run++) {
            cg_tensor *x, *y, *w, *l;

            ck_assert_int_eq(cg_manual_seed(tt_ctx(), 7), CG_OK);
            x = cg_rand_normal(tt_ctx(), 4, shape, 0.0f, 1.0f);
            ck_assert_ptr_nonnull(x);
            ck_assert_int_eq(cg_tensor_set_requires_grad(x, 1), CG_OK);
            y = kind == 0 ? cg_max_pool2d(x, k, s, pd, NULL, 1) :
                kind == 1 ? cg_avg_pool2d(x, k, s, pd, 1, 0, 0) :
                cg_adaptive_avg_pool2d(x, 5, 7);
            ck_assert_ptr_nonnull(y);
            {
                int64_t ys[4];
                cg_tensor *yw;

                cg_tensor_shape(y, ys);
                w = cg_rand_normal(tt_ctx(), 4, ys, 0.0f, 1.0f);
                ck_assert_ptr_nonnull(w);
                yw = cg_mul(y, w);
                ck_assert_ptr_nonnull(yw);
                l = cg_sum(yw, 0, NULL, 0);
                cg_tensor_free(yw);
            }
            ck_assert_ptr_nonnull(l);
            ck_assert_int_eq(cg_backward(l, NULL, 0), CG_OK);
            ck_assert_int_eq(cg_tensor_to_host(cg_tensor_grad(x),
                                               run ? again : first,
                                               n * sizeof *first), CG_OK);
            if (run)
                ck_assert(memcmp(first, again, n * sizeof *first) == 0);
            cg_tensor_free(l);
            cg_tensor_free(w);
            cg_tensor_free(y);
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

START_TEST(bad_geometry_fails_and_changes_nothing)
{
    int64_t s4[4] = { 1, 2, 5, 5 }, s2[2] = { 5, 5 };
    cg_tensor *x = cg_ones(tt_ctx(), 4, s4), *x2 = cg_ones(tt_ctx(), 2, s2);
    int k2[2] = { 2, 2 }, k7[2] = { 7, 7 }, k3[2] = { 3, 3 };
    int p2[2] = { 2, 2 }, p1[2] = { 1, 1 }, z[2] = { 0, 0 };
    int neg[2] = { -1, 1 }, d3[2] = { 3, 3 };

    ck_assert(x && x2);
    ck_assert_int_eq(cg_tensor_set_requires_grad(x, 1), CG_OK);
    EXPECT_FAIL(cg_max_pool2d(x2, k2, NULL, NULL, NULL, 0), "CG_ESHAPE");
    ck_assert_ptr_nonnull(strstr(failed_msg, "[5, 5]"));
    EXPECT_FAIL(cg_max_pool2d(x, k7, NULL, NULL, NULL, 0), "CG_ESHAPE");
    ck_assert_ptr_nonnull(strstr(failed_msg, "[1, 2, 5, 5]"));
    ck_assert_ptr_nonnull(strstr(failed_msg, "(5 + 2 * 0 - 1 * (7 - 1) - 1)"));
    EXPECT_FAIL(cg_max_pool2d(x, k2, NULL, p2, NULL, 0), "CG_ESHAPE");
    ck_assert_ptr_nonnull(strstr(failed_msg, "padding 2"));
    EXPECT_FAIL(cg_avg_pool2d(x, k3, NULL, p2, 0, 1, 0), "CG_ESHAPE");
    EXPECT_FAIL(cg_max_pool2d(x, k3, NULL, NULL, d3, 0), "CG_ESHAPE");
    ck_assert_ptr_nonnull(strstr(failed_msg,
                                 "(5 + 2 * 0 - 3 * (3 - 1) - 1) / 3"));
    EXPECT_FAIL(cg_max_pool2d(x, z, NULL, NULL, NULL, 0), "CG_EINVAL");
    EXPECT_FAIL(cg_max_pool2d(x, k2, neg, NULL, NULL, 0), "CG_EINVAL");
    EXPECT_FAIL(cg_max_pool2d(x, k2, NULL, neg, NULL, 0), "CG_EINVAL");
    EXPECT_FAIL(cg_max_pool2d(x, NULL, NULL, NULL, NULL, 0), "CG_EINVAL");
    EXPECT_FAIL(cg_max_pool2d(NULL, k2, NULL, NULL, NULL, 0), "CG_EINVAL");
    EXPECT_FAIL(cg_avg_pool2d(x, k2, NULL, p1, 0, 1, -1), "CG_EINVAL");
    EXPECT_FAIL(cg_adaptive_avg_pool2d(x, 0, 3), "CG_ESHAPE");
    EXPECT_FAIL(cg_adaptive_avg_pool2d(x2, 2, 3), "CG_ESHAPE");
    ck_assert_ptr_null(cg_tensor_grad(x));
    ck_assert(cg_tensor_is_leaf(x));
    cg_tensor_free(x);
    cg_tensor_free(x2);
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
    Suite *s = suite_create("pooling");
    TCase *tc = tcase_create("pooling");

    tt_require_device();
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, max_pool2d_matches_reference);
    tcase_add_test(tc, avg_pool2d_matches_reference);
    tcase_add_test(tc, adaptive_avg_pool2d_matches_reference);
    tcase_add_test(tc, pool_matches_pytorch_fixture);
    tcase_add_test(tc, max_pool2d_ties_and_nan_follow_pytorch);
    tcase_add_test(tc, pool_gradients_are_deterministic);
    tcase_add_test(tc, bad_geometry_fails_and_changes_nothing);
    tcase_add_test(tc, print_error_table);
    suite_add_tcase(s, tc);
    return tt_run(s);
}
