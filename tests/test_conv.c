/* SPDX-License-Identifier: MIT */
/*
 * tests/test_conv.c - conv2d and conv1d: forward against a C reference in
 * double and gradients of x, weight and bias against finite differences
 * (tests/opcheck.h) at odd sizes - 1, 3 and 7 channels, 1x1, 3x3 and 5x2
 * kernels, stride 2, dilation 2, groups 1, 2 and C (depthwise), padding
 * 0, 1 and "same", a bias that is a view at an offset; forced chunking of
 * the batch against one chunk, bit for bit; PyTorch 1.13's outputs and gradients (tests/fixtures/conv.txt,
 * written by gen_conv.py); bad shapes and options, which must fail with
 * the right status, name the shapes and enqueue nothing; and the Conv2d
 * layer (PyTorch's names, shapes and initial bounds).  The test case
 * "conv_transpose" (CK_RUN_CASE=conv_transpose) checks conv_transpose2d
 * the same ways: a C reference that scatters, finite differences,
 * chunking, PyTorch's (tests/fixtures/conv_transpose.txt, written by
 * gen_conv_transpose.py), and bad shapes and options.
 *
 * The reference, finite-difference, chunking and PyTorch checks of conv2d
 * and conv1d run once per algorithm (im2col + GEMM, direct), forced with
 * CLGRAD_CONV_ALGO, and the reference and finite-difference checks once
 * more by im2col with no gradient for the weight (whose forward, with
 * groups 1, writes the columns straight into the packed GEMM's operand;
 * its chunking too); the two algorithms agree on larger shapes, the direct one is the
 * same bits run after run, and the choice follows the variable, the
 * tuning entries of the shape classes and the built-in rule.  The case
 * "conv_transpose_algos" does the same for conv_transpose2d's two
 * algorithms and its transposed shape classes.  The case "fftconv" checks
 * conv1d's FFT algorithm: the reference and finite differences, the
 * direct algorithm's outputs and gradients (first and second order, and
 * forward mode), and its choice.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"    /* cg__last_status */
#include "ops/internal.h"     /* cg__conv_set_col_limit, cg__conv_algo */
#include "tune/internal.h"    /* cg__gemm_class, cg__gemm_class_name */
#include "tune/tuner.h"       /* cg_context_set_tuning */
#include "fixture.h"
#include "opcheck.h"

typedef struct {
    int sh, sw, ph, pw, dh, dw, groups, same, bias, one_d;
} cparam;

static const char *const algo_names[2] = { "im2col", "direct" };

/* Forces algorithm i (a loop test's _i) on every convolution that
 * follows, forward and backward, until use_auto. */
static void
use_algo(int i)
{
    ck_assert_int_eq(setenv("CLGRAD_CONV_ALGO", algo_names[i], 1), 0);
}

static void
use_auto(void)
{
    ck_assert_int_eq(unsetenv("CLGRAD_CONV_ALGO"), 0);
}

static cg_conv_options
options_of(const cparam *p)
{
    cg_conv_options o;

    memset(&o, 0, sizeof o);
    o.stride[0] = p->sh; o.stride[1] = p->sw;
    o.padding[0] = p->ph; o.padding[1] = p->pw;
    o.dilation[0] = p->dh; o.dilation[1] = p->dw;
    o.groups = p->groups;
    o.padding_same = p->same;
    return o;
}

static cg_tensor *
run_conv(cg_tensor **in, const void *param)
{
    const cparam *p = param;
    cg_conv_options o = options_of(p);

    return p->one_d ? cg_conv1d(in[0], in[1], p->bias ? in[2] : NULL, &o)
                    : cg_conv2d(in[0], in[1], p->bias ? in[2] : NULL, &o);
}

static int
dflt(int v)
{
    return v ? v : 1;
}

/* Output size and leading padding of one dimension, as PyTorch. */
static void
ref_dim(int64_t in, int64_t k, int st, int pad, int dil, int same,
        int64_t *lead, int64_t *out)
{
    int64_t total = same ? (int64_t)dil * (k - 1) : 2 * (int64_t)pad;

    *lead = same ? total / 2 : pad;
    *out = (in + total - (int64_t)dil * (k - 1) - 1) / st + 1;
}

static void
ref_conv(const oc_tensor *in, oc_tensor *out, const void *param)
{
    const cparam *p = param;
    const oc_tensor *x = &in[0], *w = &in[1];
    int od = p->one_d;
    int64_t N = x->shape[0], C = x->shape[1], H = od ? 1 : x->shape[2];
    int64_t W = x->shape[od ? 2 : 3], K = w->shape[0];
    int64_t R = od ? 1 : w->shape[2], S = w->shape[od ? 2 : 3];
    int sh = od ? 1 : dflt(p->sh), sw = dflt(od ? p->sh : p->sw);
    int dh = od ? 1 : dflt(p->dh), dw = dflt(od ? p->dh : p->dw);
    int G = dflt(p->groups);
    int64_t Cg = C / G, Kg = K / G, OH, OW, ph, pw, n, k, oh, ow, c, r, s;

    ref_dim(H, R, sh, od ? 0 : p->ph, dh, p->same, &ph, &OH);
    ref_dim(W, S, sw, od ? p->ph : p->pw, dw, p->same, &pw, &OW);
    out->ndim = od ? 3 : 4;
    out->shape[0] = N;
    out->shape[1] = K;
    if (od) {
        out->shape[2] = OW;
    } else {
        out->shape[2] = OH;
        out->shape[3] = OW;
    }
    oc_alloc(out);
    for (n = 0; n < N; n++)
        for (k = 0; k < K; k++)
            for (oh = 0; oh < OH; oh++)
                for (ow = 0; ow < OW; ow++) {
                    double acc = p->bias ? in[2].data[k] : 0.0;
                    int64_t g = k / Kg;

                    for (c = 0; c < Cg; c++)
                        for (r = 0; r < R; r++)
                            for (s = 0; s < S; s++) {
                                int64_t h = oh * sh - ph + r * dh;
                                int64_t ww = ow * sw - pw + s * dw;

                                if (h < 0 || h >= H || ww < 0 || ww >= W)
                                    continue;
                                acc += x->data[((n * C + g * Cg + c) * H + h)
                                               * W + ww] *
                                       w->data[((k * Cg + c) * R + r) * S + s];
                            }
                    out->data[((n * K + k) * OH + oh) * OW + ow] = acc;
                }
}

START_TEST(conv2d_matches_reference_and_finite_differences)
{
    static const struct { const char *x, *w, *b; cparam p; } cases[] = {
        { "1,1,5,4", "1,1,1,1", "1", { 0, 0, 0, 0, 0, 0, 0, 0, 1, 0 } },
        { "2,3,7,6", "5,3,3,3", "O5", { 0, 0, 1, 1, 0, 0, 0, 0, 1, 0 } },
        { "2,3,7,8", "4,3,5,2", "4", { 2, 2, 0, 0, 0, 0, 0, 0, 1, 0 } },
        { "1,3,9,8", "3,3,3,3", "3", { 1, 1, 1, 1, 2, 2, 0, 0, 0, 0 } },
        { "2,2,6,7", "4,1,3,3", "4", { 2, 1, 1, 0, 1, 2, 2, 0, 1, 0 } },
        { "2,7,5,5", "7,1,3,3", "7", { 0, 0, 1, 1, 0, 0, 7, 0, 1, 0 } },
        { "1,7,6,5", "14,1,5,2", "14", { 1, 1, 0, 0, 1, 2, 7, 1, 1, 0 } },
        { "3,4,5,6", "6,2,3,3", "6", { 1, 1, 0, 0, 2, 1, 2, 1, 0, 0 } },
        { "2,3,5,5", "7,3,1,1", "7", { 2, 2, 1, 0, 0, 0, 0, 0, 1, 0 } },
        { "T3,2,5,4", "2,2,3,3", "2", { 0, 0, 1, 1, 0, 0, 0, 0, 1, 0 } },
        /* depthwise 3x3: stride 2, dilation 2, both, padding "same" */
        { "2,3,7,8", "3,1,3,3", "3", { 2, 2, 1, 1, 0, 0, 3, 0, 1, 0 } },
        { "1,3,9,8", "3,1,3,3", "3", { 1, 1, 0, 0, 2, 2, 3, 1, 0, 0 } },
        { "2,7,9,8", "7,1,3,3", "7", { 2, 2, 1, 2, 2, 2, 7, 0, 1, 0 } },
        { "1,7,6,7", "7,1,3,3", "7", { 1, 1, 0, 0, 1, 1, 7, 1, 1, 0 } },
        /* rows long enough for the kernels' 8-wide steps at stride 1 and
         * 2, and more rows than one work-item of im2col and col2im
         * takes (8) */
        { "1,2,10,19", "3,2,3,3", "3", { 1, 1, 1, 1, 0, 0, 0, 0, 1, 0 } },
        { "1,2,9,21", "2,2,3,3", "2", { 2, 2, 0, 0, 0, 0, 0, 0, 0, 0 } },
        /* the direct kernels' 3 x 3 stride-1 path (4 output rows per
         * work-item, here 4, 4 and 3): two output channels per input
         * channel, rows past the padding, a row of 19 */
        { "2,3,11,19", "6,1,3,3", "6", { 1, 1, 2, 0, 1, 1, 3, 0, 1, 0 } },
        /* stride 1, "same" padding uneven along W (0 before, 1 after),
         * and dilation 2 with padding 2 */
        { "2,3,6,7", "4,3,5,2", "4", { 1, 1, 0, 0, 1, 1, 0, 1, 1, 0 } },
        { "1,2,7,9", "3,2,3,3", "3", { 1, 1, 2, 1, 2, 2, 0, 0, 1, 0 } },
    };
    static const char *const names[4][2] = {
        { "conv2d/im2col", "conv2d(b)/im2col" },
        { "conv2d/direct", "conv2d(b)/direct" },
        { "conv2d/im2col-packed", "conv2d(b)/im2col-packed" },
        { "conv2d/im2col-shift", "conv2d(b)/im2col-shift" }
    };
    oc_op op = { 0 };
    size_t c;

    /* 2: im2col with no gradient for w, so no columns kept for it: the
     * forward's columns go straight into the packed product (groups 1,
     * and at stride 1 below the shift rule's taps); 3: the forward reads
     * the padded images in place wherever it can (groups 1, stride 1) */
    use_algo(_i == 1);
    op.no_grad[1] = _i == 2;
    cg__conv_set_shift(_i == 3 ? 1 : _i == 2 ? -1 : 0);
    op.run = run_conv;
    op.ref = ref_conv;
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        op.name = names[_i][cases[c].p.bias];
        op.ninputs = cases[c].p.bias ? 3 : 2;
        oc_check(&op, &cases[c].p, cases[c].x, cases[c].w, cases[c].b);
    }
    cg__conv_set_shift(-1);
    use_auto();
}
END_TEST

START_TEST(conv1d_matches_reference_and_finite_differences)
{
    static const struct { const char *x, *w, *b; cparam p; } cases[] = {
        { "2,3,9", "5,3,3", "5", { 0, 0, 1, 0, 0, 0, 0, 0, 1, 1 } },
        { "3,1,8", "2,1,1", "2", { 2, 0, 0, 0, 0, 0, 0, 0, 1, 1 } },
        { "1,4,11", "4,2,5", "4", { 0, 0, 0, 0, 2, 0, 2, 1, 0, 1 } },
        { "2,7,7", "7,1,3", "7", { 2, 0, 1, 0, 2, 0, 7, 0, 1, 1 } },
    };
    static const char *const names[3][2] = {
        { "conv1d/im2col", "conv1d(b)/im2col" },
        { "conv1d/direct", "conv1d(b)/direct" },
        { "conv1d/im2col-packed", "conv1d(b)/im2col-packed" }
    };
    oc_op op = { 0 };
    size_t c;

    use_algo(_i % 2);
    op.no_grad[1] = _i == 2;
    op.run = run_conv;
    op.ref = ref_conv;
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        op.name = names[_i][cases[c].p.bias];
        op.ninputs = cases[c].p.bias ? 3 : 2;
        oc_check(&op, &cases[c].p, cases[c].x, cases[c].w, cases[c].b);
    }
    use_auto();
}
END_TEST

typedef struct {
    int sh, sw, ph, pw, oph, opw, dh, dw, groups, bias;
} tparam;

static cg_conv_transpose_options
toptions_of(const tparam *p)
{
    cg_conv_transpose_options o;

    memset(&o, 0, sizeof o);
    o.stride[0] = p->sh; o.stride[1] = p->sw;
    o.padding[0] = p->ph; o.padding[1] = p->pw;
    o.output_padding[0] = p->oph; o.output_padding[1] = p->opw;
    o.dilation[0] = p->dh; o.dilation[1] = p->dw;
    o.groups = p->groups;
    return o;
}

static cg_tensor *
run_convt(cg_tensor **in, const void *param)
{
    const tparam *p = param;
    cg_conv_transpose_options o = toptions_of(p);

    return cg_conv_transpose2d(in[0], in[1], p->bias ? in[2] : NULL, &o);
}

/* PyTorch's definition, as a scatter: each x[n, c, h, w] adds x w[c, k,
 * r, s] to y[n, g Kg + k, h sh - ph + r dh, w sw - pw + s dw] (c in group
 * g), where that lies inside y. */
static void
ref_convt(const oc_tensor *in, oc_tensor *out, const void *param)
{
    const tparam *p = param;
    const oc_tensor *x = &in[0], *w = &in[1];
    int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2];
    int64_t W = x->shape[3], Kg = w->shape[1], R = w->shape[2];
    int64_t S = w->shape[3], G = dflt(p->groups), K = Kg * G, Cg = C / G;
    int sh = dflt(p->sh), sw = dflt(p->sw), dh = dflt(p->dh);
    int dw = dflt(p->dw);
    int64_t OH = (H - 1) * sh - 2 * p->ph + dh * (R - 1) + p->oph + 1;
    int64_t OW = (W - 1) * sw - 2 * p->pw + dw * (S - 1) + p->opw + 1;
    int64_t n, c, h, ww, k, r, s, oh, ow, i;

    out->ndim = 4;
    out->shape[0] = N; out->shape[1] = K;
    out->shape[2] = OH; out->shape[3] = OW;
    oc_alloc(out);
    for (i = 0; p->bias && i < out->numel; i++)
        out->data[i] = in[2].data[i / (OH * OW) % K];
    for (n = 0; n < N; n++)
        for (c = 0; c < C; c++)
            for (h = 0; h < H; h++)
                for (ww = 0; ww < W; ww++)
                    for (k = 0; k < Kg; k++)
                        for (r = 0; r < R; r++)
                            for (s = 0; s < S; s++) {
                                oh = h * sh - p->ph + r * dh;
                                ow = ww * sw - p->pw + s * dw;
                                if (oh < 0 || oh >= OH || ow < 0 || ow >= OW)
                                    continue;
                                out->data[((n * K + c / Cg * Kg + k) * OH +
                                           oh) * OW + ow] +=
                                    x->data[((n * C + c) * H + h) * W + ww] *
                                    w->data[((c * Kg + k) * R + r) * S + s];
                            }
}

/* 1 and 3 channels; 3x3, 2x3 and 1-pixel inputs; stride 1, 2 and (2, 1);
 * padding 0, 1 and more than the kernel reaches; output_padding 1 with
 * stride 2 and with dilation 2 at stride 1 (groups 1 and 2); groups 1, 2
 * and C; a transposed view as input and a bias at an offset. */
START_TEST(conv_transpose2d_matches_reference_and_finite_differences)
{
    static const struct { const char *x, *w, *b; tparam p; } cases[] = {
        { "1,1,4,5", "1,1,3,3", "1", { 0, 0, 0, 0, 0, 0, 0, 0, 0, 1 } },
        { "2,3,5,4", "3,2,2,3", "2", { 2, 2, 1, 1, 1, 1, 0, 0, 0, 1 } },
        { "2,2,4,3", "2,3,3,3", "O6", { 0, 0, 1, 1, 0, 0, 2, 2, 2, 1 } },
        { "1,3,3,5", "3,1,3,3", "1", { 2, 1, 0, 1, 1, 0, 1, 2, 0, 0 } },
        { "2,4,3,4", "4,1,2,3", "2", { 0, 0, 0, 1, 1, 1, 2, 2, 2, 1 } },
        { "T1,3,5,5", "3,3,3,3", "3", { 2, 2, 1, 1, 0, 0, 0, 0, 0, 1 } },
        { "2,3,4,4", "3,1,3,3", "3", { 2, 2, 0, 0, 1, 1, 0, 0, 3, 1 } },
        { "3,1,1,2", "1,3,2,3", "3", { 0, 0, 0, 0, 0, 0, 0, 0, 0, 1 } },
        { "1,2,5,5", "2,2,3,3", "2", { 2, 2, 3, 3, 0, 0, 0, 0, 0, 1 } },
        /* conv_direct_dx's 3 x 3 stride-1 path: rows of 11, 7 rows */
        { "2,4,5,11", "4,2,3,3", "4", { 1, 1, 0, 1, 0, 0, 1, 1, 2, 1 } },
        /* groups 1 at stride 1 with output_padding (dilation 2), of
         * rows, then of columns */
        { "1,2,4,5", "2,3,3,3", "3", { 1, 1, 1, 0, 1, 0, 2, 2, 0, 1 } },
        { "1,2,5,4", "2,1,3,2", "1", { 1, 1, 0, 1, 0, 1, 2, 2, 0, 0 } },
    };
    oc_op op = { 0 };
    size_t c;

    op.run = run_convt;
    op.ref = ref_convt;
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        op.name = cases[c].p.bias ? "conv_transpose2d(b)"
                                  : "conv_transpose2d";
        op.ninputs = cases[c].p.bias ? 3 : 2;
        oc_check(&op, &cases[c].p, cases[c].x, cases[c].w, cases[c].b);
    }
}
END_TEST

static cg_tensor *
random_tensor(int ndim, const int64_t *shape, int grad)
{
    int64_t n = 1, i;
    float *v;
    cg_tensor *t;
    int d;

    for (d = 0; d < ndim; d++)
        n *= shape[d];
    v = malloc((size_t)n * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (i = 0; i < n; i++)
        v[i] = (float)oc_uniform(-1.0, 1.0);
    t = cg_tensor_from_host(tt_ctx(), CG_F32, ndim, shape, v);
    free(v);
    ck_assert_msg(t != NULL, "%s", TT_ERR);
    if (grad)
        ck_assert_int_eq(cg_tensor_set_requires_grad(t, 1), CG_OK);
    return t;
}

static float *
host_copy(const cg_tensor *t)
{
    size_t n = (size_t)cg_tensor_numel(t);
    float *v = malloc(n * sizeof *v);

    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(cg_tensor_to_host(t, v, n * sizeof *v), CG_OK);
    return v;
}

/* The ways a test runs one convolution, compared: each of got's three
 * host arrays (y and the gradients, n[t] floats; NULL: none this way)
 * becomes ref[t] where there is none yet, else must equal it within tol
 * relative to 1 + |ref| (what names the way in a failure) and is freed. */
static void
same_as_first(float **ref, float **got, const size_t *n, float tol,
              const char *what)
{
    size_t j;
    int t;

    for (t = 0; t < 3; t++) {
        if (!got[t])
            continue;
        if (!ref[t]) {
            ref[t] = got[t];
            continue;
        }
        for (j = 0; j < n[t]; j++)
            ck_assert_msg(fabsf(got[t][j] - ref[t][j]) <=
                          tol * (1.0f + fabsf(ref[t][j])),
                          "%s, tensor %d, element %zu: %g, the first "
                          "way's %g", what, t, j, got[t][j], ref[t][j]);
        free(got[t]);
    }
}

/* y, dx, dw and db of y, a convolution of x, w and b, as host arrays. */
static void
grads_of(cg_tensor *y, cg_tensor *x, cg_tensor *w, cg_tensor *b,
         float **out)
{
    cg_tensor *s;

    ck_assert_msg(y != NULL, "%s", TT_ERR);
    s = cg_sum(y, 0, NULL, 0);
    ck_assert_msg(s != NULL, "%s", TT_ERR);
    cg_tensor_zero_grad(x);
    cg_tensor_zero_grad(w);
    cg_tensor_zero_grad(b);
    ck_assert_msg(cg_backward(s, NULL, 0) == CG_OK, "%s", TT_ERR);
    out[0] = host_copy(y);
    out[1] = host_copy(cg_tensor_grad(x));
    out[2] = host_copy(cg_tensor_grad(w));
    out[3] = host_copy(cg_tensor_grad(b));
    cg_tensor_free(s);
    cg_tensor_free(y);
}

/* The same of one convolution (transposed: conv_transpose2d) with padding
 * 1 and `groups`. */
static void
conv_all(int transposed, cg_tensor *x, cg_tensor *w, cg_tensor *b,
         int groups, float **out)
{
    cg_conv_options o;
    cg_conv_transpose_options ot;

    memset(&o, 0, sizeof o);
    memset(&ot, 0, sizeof ot);
    o.padding[0] = o.padding[1] = ot.padding[0] = ot.padding[1] = 1;
    o.groups = ot.groups = groups;
    grads_of(transposed ? cg_conv_transpose2d(x, w, b, &ot)
                        : cg_conv2d(x, w, b, &o), x, w, b, out);
}

/* With the column buffer limited to one or two images, the batch runs in
 * chunks: y and dx are the same bits as in one chunk (each image's
 * products are the same); dw and db add the chunks' shares in another
 * order, so they are compared to float32 rounding of the sums.  x is [5,
 * 4, 7, 6] and y [5, 6, 7, 6] either way; an image's columns are C R S OH
 * OW floats of the convolution (conv_transpose2d's transposes one from 6
 * channels to 4).  The direct algorithm has no columns: the limit must
 * not change it. */
static void
check_chunking(int transposed)
{
    static const int64_t xs[4] = { 5, 4, 7, 6 }, bs[1] = { 6 };
    static const int groups[2] = { 1, 2 };
    size_t per = (size_t)(transposed ? 6 : 4) * 4 * 9 * 42;
    size_t limits[2] = { per, 2 * per };
    size_t numel[4] = { 5 * 6 * 42, 5 * 4 * 42, 0, 6 }, j;
    int gi, li, t;

    for (gi = 0; gi < 2; gi++) {
        int64_t w2[4] = { transposed ? 4 : 6, (transposed ? 6 : 4) /
                          groups[gi], 3, 3 };
        cg_tensor *x = random_tensor(4, xs, 1), *w = random_tensor(4, w2, 1);
        cg_tensor *b = random_tensor(1, bs, 1);
        float *one[4], *many[4];

        numel[2] = (size_t)(w2[0] * w2[1] * 9);
        cg__conv_set_col_limit(0);
        conv_all(transposed, x, w, b, groups[gi], one);
        for (li = 0; li < 2; li++) {
            cg__conv_set_col_limit(limits[li]);
            conv_all(transposed, x, w, b, groups[gi], many);
            for (t = 0; t < 4; t++) {
                for (j = 0; j < numel[t]; j++) {
                    if (t < 2)
                        ck_assert_msg(memcmp(&one[t][j], &many[t][j],
                                             sizeof(float)) == 0,
                                      "tensor %d element %zu: %g vs %g "
                                      "(groups %d, limit %zu)", t, j,
                                      one[t][j], many[t][j], groups[gi],
                                      limits[li]);
                    else
                        ck_assert_msg(fabsf(one[t][j] - many[t][j]) <=
                                      1e-5f * (1.0f + fabsf(one[t][j])),
                                      "tensor %d element %zu: %g vs %g",
                                      t, j, one[t][j], many[t][j]);
                }
                free(many[t]);
            }
        }
        cg__conv_set_col_limit(0);
        for (t = 0; t < 4; t++)
            free(one[t]);
        cg_tensor_free(x);
        cg_tensor_free(w);
        cg_tensor_free(b);
    }
}

START_TEST(chunked_batch_equals_one_chunk)
{
    use_algo(_i);
    check_chunking(0);
    use_auto();
}
END_TEST

/* The forward of w with no gradient (im2col's columns straight into the
 * packed product): chunks of one and two images give the same bits as
 * one chunk, and all agree with the forward that keeps the columns for
 * w's gradient to float32 rounding.  Rows of 6 (groups of 8 columns span
 * two output rows), 42 columns an image (the last panel partly past
 * them). */
START_TEST(packed_forward_chunked_equals_one_chunk)
{
    static const int64_t xs[4] = { 5, 4, 7, 6 }, ws[4] = { 6, 4, 3, 3 };
    size_t per = (size_t)4 * 9 * 42 * 4, limits[3] = { 0, per, 2 * per };
    size_t n = 5 * 6 * 42, j;
    cg_tensor *x = random_tensor(4, xs, 0), *w = random_tensor(4, ws, 0);
    float *wv = host_copy(w), *one = NULL, *many, *kept;
    cg_tensor *wg = cg_tensor_from_host(tt_ctx(), CG_F32, 4, ws, wv), *y;
    cg_conv_options o;
    int li;

    /* wg: w's values, with a gradient */
    ck_assert_msg(wg != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_set_requires_grad(wg, 1), CG_OK);
    free(wv);
    memset(&o, 0, sizeof o);
    o.padding[0] = o.padding[1] = 1;
    use_algo(0);
    for (li = 0; li < 3; li++) {
        cg__conv_set_col_limit(limits[li]);
        y = cg_conv2d(x, w, NULL, &o);
        ck_assert_msg(y != NULL, "%s", TT_ERR);
        many = host_copy(y);
        cg_tensor_free(y);
        if (!one) {
            one = many;
            continue;
        }
        for (j = 0; j < n; j++)
            ck_assert_msg(memcmp(&one[j], &many[j], sizeof(float)) == 0,
                          "element %zu: %g vs %g (limit %zu)", j, one[j],
                          many[j], limits[li]);
        free(many);
    }
    cg__conv_set_col_limit(0);
    y = cg_conv2d(x, wg, NULL, &o);
    ck_assert_msg(y != NULL, "%s", TT_ERR);
    kept = host_copy(y);
    for (j = 0; j < n; j++)
        ck_assert_msg(fabsf(one[j] - kept[j]) <= 1e-5f * (1.0f +
                                                          fabsf(kept[j])),
                      "element %zu: %g vs %g", j, one[j], kept[j]);
    use_auto();
    free(one);
    free(kept);
    cg_tensor_free(y);
    cg_tensor_free(x);
    cg_tensor_free(w);
    cg_tensor_free(wg);
}
END_TEST

/* The forward of groups 1 without kept columns writes packed columns for
 * clgrad's kernels where the GEMM's choice for its product (K x P x C R
 * S NN over the images, one W) is clgrad's (PoCL's rule at this size),
 * and columns for CLBlast where a tuning entry of the product's class, or
 * CLGRAD_GEMM, says CLBlast; the outputs agree (1e-5), and a kept-columns
 * forward (w with a gradient) never packs them. */
START_TEST(forward_columns_follow_the_gemm_choice)
{
    static const int64_t xs[4] = { 3, 4, 7, 6 }, ws[4] = { 6, 4, 3, 3 };
    cg_context_options co = { NULL, 1, 1 };
    cg_context *ctx = cg_context_new_with(&co);
    cg_tensor *x, *w, *y;
    cg__gemm_backend use;
    cg_tuning_entry e;
    cg_conv_options o;
    float *ref = NULL, *got;
    size_t n = 3 * 6 * 42, j;
    int way;

    ck_assert_msg(ctx != NULL, "%s", TT_ERR);
    memset(&o, 0, sizeof o);
    o.padding[0] = o.padding[1] = 1;
    x = cg_rand_normal(ctx, 4, xs, 0.0f, 1.0f);
    w = cg_rand_normal(ctx, 4, ws, 0.0f, 1.0f);
    ck_assert_msg(x && w, "%s", TT_ERR);
    use_algo(0);
    for (way = 0; way < 4; way++) {
        if (way == 1) {         /* the class's entry: CLBlast */
            memset(&e, 0, sizeof e);
            strcpy(e.kernel, "gemm");
            cg__gemm_class_name(cg__gemm_class(0, 0, 6, 42, 36), e.shape,
                                sizeof e.shape);
            ck_assert_int_eq(cg_kernel_source_hash("gemm", e.source_hash),
                             CG_OK);
            strcpy(e.names[0], "clblast");
            e.values[0] = 1;
            e.nparams = 1;
            ck_assert_msg(cg_context_set_tuning(ctx, &e) == CG_OK, "%s",
                          TT_ERR);
        } else if (way == 2) {  /* CLGRAD_GEMM=clblast */
            ck_assert_int_eq(cg_context_clear_tuning(ctx), CG_OK);
            cg__gemm_force(ctx, CG__GEMM_CLBLAST);
        } else if (way == 3) {  /* the columns kept for dW */
            cg__gemm_force(ctx, CG__GEMM_AUTO);
            ck_assert_int_eq(cg_tensor_set_requires_grad(w, 1), CG_OK);
        }
        ck_assert_int_eq(cg__gemm_backend_of(ctx, 0, 0, 6, 42, 36, 0, 3,
                                             &use), CG_OK);
        ck_assert_int_eq(use == CG__GEMM_CLBLAST, way == 1 || way == 2);
        ck_assert_int_eq(cg_context_profile_reset(ctx), CG_OK);
        y = cg_conv2d(x, w, NULL, &o);
        ck_assert_msg(y != NULL, "%s", TT_ERR);
        got = host_copy(y);
        ck_assert_int_eq(tt_launches(ctx, "conv_im2col_packed"), way == 0);
        ck_assert_int_eq(tt_launches(ctx, "conv_im2col"), way != 0);
        cg_tensor_free(y);
        if (!ref) {
            ref = got;
            continue;
        }
        for (j = 0; j < n; j++)
            ck_assert_msg(fabsf(ref[j] - got[j]) <= 1e-5f * (1.0f +
                                                             fabsf(ref[j])),
                          "way %d, element %zu: %g vs %g", way, j, ref[j],
                          got[j]);
        free(got);
    }
    use_auto();
    free(ref);
    cg_tensor_free(x);
    cg_tensor_free(w);
    cg_context_free(ctx);
}
END_TEST

/* The forward at stride 1 by gemm_shift where the rule says (16 input
 * channels of 3 x 3 taps, 144 of them; 7 x 9 outputs padded to 9 x 11,
 * 1.57 times as many), with or without a gradient for w (no columns
 * kept), dW by gemm_shift_dw and dx by gemm_shift (17 channels, 153
 * taps); columns where CLBlast would run the product, where the stride
 * is 2, and where cg__conv_set_shift says never.  Every way gives the
 * same y and gradients. */
START_TEST(stride_one_forward_follows_the_rule)
{
    static const int64_t xs[4] = { 2, 16, 7, 9 }, ws[4] = { 17, 16, 3, 3 };
    cg_context_options co = { NULL, 1, 1 };
    cg_context *ctx = cg_context_new_with(&co);
    cg_tensor *x, *w, *y, *s;
    cg_conv_options o;
    float *ref[3] = { NULL, NULL, NULL }, *got[3];
    size_t n[3] = { 2 * 17 * 63, 2 * 16 * 63, 17 * 16 * 9 };
    char what[48];
    int way, t;

    ck_assert_msg(ctx != NULL, "%s", TT_ERR);
    memset(&o, 0, sizeof o);
    o.padding[0] = o.padding[1] = 1;
    x = cg_rand_normal(ctx, 4, xs, 0.0f, 1.0f);
    w = cg_rand_normal(ctx, 4, ws, 0.0f, 1.0f);
    ck_assert_msg(x && w, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_set_requires_grad(x, 1), CG_OK);
    use_algo(0);
    for (way = 0; way < 5; way++) {
        int shift = way < 2;

        cg__conv_set_shift(way == 4 ? 0 : -1);
        cg__gemm_force(ctx, way == 2 ? CG__GEMM_CLBLAST : CG__GEMM_AUTO);
        o.stride[0] = way == 3 ? 2 : 1;
        ck_assert_int_eq(cg_tensor_set_requires_grad(w, way != 1), CG_OK);
        ck_assert_int_eq(cg_context_profile_reset(ctx), CG_OK);
        y = cg_conv2d(x, w, NULL, &o);
        ck_assert_msg(y != NULL, "%s", TT_ERR);
        ck_assert_int_eq(tt_launches(ctx, "gemm_shift"), shift);
        ck_assert_int_eq(tt_launches(ctx, "conv_im2col_packed") +
                         tt_launches(ctx, "conv_im2col"), !shift);
        s = cg_sum(y, 0, NULL, 0);
        ck_assert_msg(s && cg_backward(s, NULL, 0) == CG_OK, "%s", TT_ERR);
        ck_assert_int_eq(tt_launches(ctx, "gemm_shift_dw"), way == 0);
        ck_assert_int_eq(tt_launches(ctx, "gemm_shift"), 2 * shift);
        ck_assert_int_eq(tt_launches(ctx, "conv_col2im"), !shift);
        if (way == 3) {         /* another shape: stride 2 */
            cg_tensor_free(s);
            cg_tensor_free(y);
            ck_assert_int_eq(cg_tensor_zero_grad(x), CG_OK);
            ck_assert_int_eq(cg_tensor_zero_grad(w), CG_OK);
            continue;
        }
        got[0] = host_copy(y);
        got[1] = host_copy(cg_tensor_grad(x));
        got[2] = way != 1 ? host_copy(cg_tensor_grad(w)) : NULL;
        cg_tensor_free(s);
        cg_tensor_free(y);
        ck_assert_int_eq(cg_tensor_zero_grad(x), CG_OK);
        ck_assert_int_eq(cg_tensor_zero_grad(w), CG_OK);
        snprintf(what, sizeof what, "way %d", way);
        same_as_first(ref, got, n, 1e-4f, what);
    }
    cg__conv_set_shift(-1);
    cg__gemm_force(ctx, CG__GEMM_AUTO);
    use_auto();
    for (t = 0; t < 3; t++)
        free(ref[t]);
    cg_tensor_free(x);
    cg_tensor_free(w);
    cg_context_free(ctx);
}
END_TEST

/* The stride-1 products (gemm_shift forward and for dx, gemm_shift_dw for
 * dW) at micro-tiles of several shapes (kernels/gemm_pack.cl's PVW, PMR,
 * PTN, as a tuning entry sets them): 17 output channels, so that a tile
 * of PTN > 1 vectors has columns past N, and 7 x 9 outputs computed 7 x 11
 * wide (the columns between output rows are dropped).  Each gives the
 * defaults' y and gradients: the same sums in the same order.  A tile of
 * more than one vector stored the dropped columns' values of its second
 * and later vectors over the next output row's.  Under a host memory
 * checker, one set besides the defaults. */
START_TEST(stride_one_products_at_every_micro_tile)
{
    static const int64_t xs[4] = { 2, 16, 7, 9 }, ws[4] = { 17, 16, 3, 3 };
    /*                             PVW PMR PTN */
    static const int sets[4][3] = { { 0, 0, 0 }, { 16, 8, 2 }, { 8, 4, 3 },
                                    { 4, 2, 4 } };
    static const cg__pid pid[3] = {
        CG__P_GEMM_PACK_PVW, CG__P_GEMM_PACK_PMR, CG__P_GEMM_PACK_PTN
    };
    cg_context_options co = { NULL, 1, 1 };
    cg_context *ctx = cg_context_new_with(&co);
    cg_tensor *x, *w, *y, *s;
    cg_conv_options o;
    float *ref[3] = { NULL, NULL, NULL }, *got[3];
    size_t n[3] = { 2 * 17 * 63, 2 * 16 * 63, 17 * 16 * 9 };
    char what[48];
    long def[3];
    int set, t, p;

    ck_assert_msg(ctx != NULL, "%s", TT_ERR);
    memset(&o, 0, sizeof o);
    o.padding[0] = o.padding[1] = 1;
    x = cg_rand_normal(ctx, 4, xs, 0.0f, 1.0f);
    w = cg_rand_normal(ctx, 4, ws, 0.0f, 1.0f);
    ck_assert_msg(x && w, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_set_requires_grad(x, 1), CG_OK);
    ck_assert_int_eq(cg_tensor_set_requires_grad(w, 1), CG_OK);
    for (p = 0; p < 3; p++)
        def[p] = cg__param(ctx, pid[p]);
    use_algo(0);
    cg__conv_set_shift(1);
    for (set = 0; set < 4; set++) {
        /* a host memory checker sees the same host code in every set */
        if (tt_host_checker() && set != 0 && set != 2)
            continue;
        for (p = 0; p < 3; p++)
            cg__param_set(ctx, pid[p], set ? sets[set][p] : def[p]);
        ck_assert_int_eq(cg_context_profile_reset(ctx), CG_OK);
        y = cg_conv2d(x, w, NULL, &o);
        ck_assert_msg(y != NULL, "%s", TT_ERR);
        s = cg_sum(y, 0, NULL, 0);
        ck_assert_msg(s && cg_backward(s, NULL, 0) == CG_OK, "%s", TT_ERR);
        ck_assert_int_eq(tt_launches(ctx, "gemm_shift"), 2);
        ck_assert_int_eq(tt_launches(ctx, "gemm_shift_dw"), 1);
        got[0] = host_copy(y);
        got[1] = host_copy(cg_tensor_grad(x));
        got[2] = host_copy(cg_tensor_grad(w));
        cg_tensor_free(s);
        cg_tensor_free(y);
        ck_assert_int_eq(cg_tensor_zero_grad(x), CG_OK);
        ck_assert_int_eq(cg_tensor_zero_grad(w), CG_OK);
        snprintf(what, sizeof what, "PVW %d PMR %d PTN %d", sets[set][0],
                 sets[set][1], sets[set][2]);
        same_as_first(ref, got, n, 1e-5f, what);
    }
    for (p = 0; p < 3; p++)
        cg__param_set(ctx, pid[p], def[p]);
    cg__conv_set_shift(-1);
    use_auto();
    for (t = 0; t < 3; t++)
        free(ref[t]);
    cg_tensor_free(x);
    cg_tensor_free(w);
    cg_context_free(ctx);
}
END_TEST

/* The stride-1 backward of a "same" 3 x 3 convolution with bias: the
 * forward adds the bias in its product and keeps x's padded planes, the
 * backward pads dy once for both gradients, and a second backward adds
 * dx into x's gradient in its product (no axpy for x).  Each gradient as
 * the columns' path gives it, and the second exactly twice the first. */
START_TEST(stride_one_backward_shares_planes_and_adds_dx)
{
    static const int64_t xs[4] = { 2, 16, 7, 9 }, ws[4] = { 17, 16, 3, 3 };
    static const int64_t bs[1] = { 17 }, ys[4] = { 2, 17, 7, 9 };
    cg_context_options co = { NULL, 1, 1 };
    cg_context *ctx = cg_context_new_with(&co);
    cg_tensor *in[3], *g, *y;
    cg_conv_options o;
    float *ref[4], *got[4], *again;
    size_t n[4] = { 2 * 17 * 63, 2 * 16 * 63, 17 * 16 * 9, 17 }, j;
    int way, t;

    ck_assert_msg(ctx != NULL, "%s", TT_ERR);
    memset(&o, 0, sizeof o);
    o.padding[0] = o.padding[1] = 1;
    in[0] = cg_rand_normal(ctx, 4, xs, 0.0f, 1.0f);
    in[1] = cg_rand_normal(ctx, 4, ws, 0.0f, 1.0f);
    in[2] = cg_rand_normal(ctx, 1, bs, 0.0f, 1.0f);
    g = cg_rand_normal(ctx, 4, ys, 0.0f, 1.0f);
    ck_assert_msg(in[0] && in[1] && in[2] && g, "%s", TT_ERR);
    for (t = 0; t < 3; t++)
        ck_assert_int_eq(cg_tensor_set_requires_grad(in[t], 1), CG_OK);
    use_algo(0);
    for (way = 0; way < 2; way++) {     /* 0: columns, 1: the rule */
        float **v = way ? got : ref;

        cg__conv_set_shift(way ? -1 : 0);
        ck_assert_int_eq(cg_context_profile_reset(ctx), CG_OK);
        y = cg_conv2d(in[0], in[1], in[2], &o);
        ck_assert_msg(y != NULL, "%s", TT_ERR);
        ck_assert_int_eq(tt_launches(ctx, "gemm_shift"), way);
        ck_assert_int_eq(tt_launches(ctx, "conv_bias"), !way);
        ck_assert_int_eq(cg_context_profile_reset(ctx), CG_OK);
        ck_assert_int_eq(cg_backward(y, g, 1), CG_OK);
        if (way) {
            ck_assert_int_eq(tt_launches(ctx, "gemm_shift"), 1);
            ck_assert_int_eq(tt_launches(ctx, "gemm_shift_dw"), 1);
            /* Copies: dy's planes (x's are the forward's), the flipped
             * weights for dx, dW from dW^T (the engine reads g itself) */
            ck_assert_int_eq(tt_launches(ctx, "copy32v"), 3);
        }
        v[0] = host_copy(y);
        for (t = 0; t < 3; t++)
            v[t + 1] = host_copy(cg_tensor_grad(in[t]));
        if (way) {
            ck_assert_int_eq(cg_context_profile_reset(ctx), CG_OK);
            ck_assert_int_eq(cg_backward(y, g, 1), CG_OK);
            /* w's and b's gradients added by the engine, x's by dx's
             * product */
            ck_assert_int_eq(tt_launches(ctx, "axpy"), 2);
            ck_assert_int_eq(tt_launches(ctx, "gemm_shift"), 1);
            again = host_copy(cg_tensor_grad(in[0]));
            for (j = 0; j < n[1]; j++)
                ck_assert_msg(again[j] == 2.0f * got[1][j],
                              "x's gradient %zu: %g twice is not %g", j,
                              got[1][j], again[j]);
            free(again);
        }
        for (t = 0; t < 3; t++)
            ck_assert_int_eq(cg_tensor_zero_grad(in[t]), CG_OK);
        cg_tensor_free(y);
    }
    for (t = 0; t < 4; t++) {
        for (j = 0; j < n[t]; j++)
            ck_assert_msg(fabsf(ref[t][j] - got[t][j]) <=
                          1e-4f * (1.0f + fabsf(ref[t][j])),
                          "tensor %d, element %zu: %g vs %g", t, j,
                          ref[t][j], got[t][j]);
        free(ref[t]);
        free(got[t]);
    }
    cg__conv_set_shift(-1);
    use_auto();
    for (t = 0; t < 3; t++)
        cg_tensor_free(in[t]);
    cg_tensor_free(g);
    cg_context_free(ctx);
}
END_TEST

START_TEST(conv_transpose2d_chunked_batch_equals_one_chunk)
{
    check_chunking(1);
}
END_TEST

static cg_tensor *
fx_tensor_new(const fx_file *f, int k, const char *what, int grad)
{
    char name[32];
    const fx_tensor *t;
    cg_tensor *d;

    snprintf(name, sizeof name, "%d.%s", k, what);
    t = fx_get(f, name);
    ck_assert_msg(t != NULL, "the fixture lacks %s", name);
    d = cg_tensor_from_host(tt_ctx(), CG_F32, t->ndim, t->shape, t->data);
    ck_assert_msg(d != NULL, "%s", TT_ERR);
    if (grad)
        ck_assert_int_eq(cg_tensor_set_requires_grad(d, 1), CG_OK);
    return d;
}

/* max |got - want| / max |want| over the tensor: at most 1e-5. */
static void
fx_compare(const fx_file *f, int k, const char *what, const cg_tensor *t)
{
    const char *algo = getenv("CLGRAD_CONV_ALGO");
    char name[32];
    const fx_tensor *want;
    float *got;
    double big = 0, err = 0;
    int64_t i;

    snprintf(name, sizeof name, "%d.%s", k, what);
    want = fx_get(f, name);
    ck_assert_msg(want != NULL && t != NULL, "case %s missing", name);
    ck_assert_int_eq(cg_tensor_numel(t), want->numel);
    got = host_copy(t);
    for (i = 0; i < want->numel; i++) {
        double d = fabs((double)got[i] - want->data[i]);

        big = fabs(want->data[i]) > big ? fabs(want->data[i]) : big;
        err = d > err ? d : err;
    }
    free(got);
    ck_assert_msg(err <= 1e-5 * big, "%s (%s): max error %g of largest %g",
                  name, algo ? algo : "auto", err, big);
}

/* Case k of a fixture: y = run(x, w, b) and the gradients of sum(y *
 * grad_output), each tensor within 1e-5 of its largest value of
 * PyTorch's: float32 sums of at most a few hundred products round to
 * about 1e-6 of that. */
static void
fx_check_case(const fx_file *f, int k, int bias,
              cg_tensor *(*run)(cg_tensor **in, const void *param),
              const void *param)
{
    cg_tensor *in[3] = { NULL, NULL, NULL }, *g, *y, *yg, *s;
    int i;

    in[0] = fx_tensor_new(f, k, "x", 1);
    in[1] = fx_tensor_new(f, k, "w", 1);
    if (bias)
        in[2] = fx_tensor_new(f, k, "b", 1);
    g = fx_tensor_new(f, k, "grad_output", 0);
    y = run(in, param);
    ck_assert_msg(y != NULL, "case %d: %s", k, TT_ERR);
    yg = cg_mul(y, g);
    s = yg ? cg_sum(yg, 0, NULL, 0) : NULL;
    ck_assert_msg(s != NULL, "%s", TT_ERR);
    ck_assert_msg(cg_backward(s, NULL, 0) == CG_OK, "%s", TT_ERR);
    fx_compare(f, k, "y", y);
    fx_compare(f, k, "grad_x", cg_tensor_grad(in[0]));
    fx_compare(f, k, "grad_w", cg_tensor_grad(in[1]));
    if (bias)
        fx_compare(f, k, "grad_b", cg_tensor_grad(in[2]));
    cg_tensor_free(s);
    cg_tensor_free(yg);
    cg_tensor_free(y);
    cg_tensor_free(g);
    for (i = 0; i < 3; i++)
        cg_tensor_free(in[i]);
}

/* PyTorch's conv2d / conv1d (tests/fixtures/conv.txt). */
START_TEST(conv_matches_pytorch)
{
    char err[512];
    fx_file *f = fx_load_fixture("conv.txt", err, sizeof err);
    int ncases, k, v[10];

    ck_assert_msg(f != NULL, "%s", err);
    use_algo(_i);
    ncases = fx_config_int(f, "cases", 0);
    ck_assert_int_gt(ncases, 0);
    for (k = 0; k < ncases; k++) {
        char key[16];
        cparam p;

        snprintf(key, sizeof key, "case.%d", k);
        ck_assert_int_eq(fx_config_ints(f, key, v, 10), 10);
        p.one_d = v[0]; p.sh = v[1]; p.sw = v[2]; p.ph = v[3]; p.pw = v[4];
        p.dh = v[5]; p.dw = v[6]; p.groups = v[7]; p.same = v[8];
        p.bias = v[9];
        fx_check_case(f, k, p.bias, run_conv, &p);
    }
    fx_free(f);
    use_auto();
}
END_TEST

/* PyTorch's conv_transpose2d (tests/fixtures/conv_transpose.txt): strides
 * 1, 2, 3 and (2, 1), output_padding up to 2, dilation 2, groups 1, 2
 * and C. */
static void
check_convt_fixture(void)
{
    char err[512];
    fx_file *f = fx_load_fixture("conv_transpose.txt", err, sizeof err);
    int ncases, k, v[10];

    ck_assert_msg(f != NULL, "%s", err);
    ncases = fx_config_int(f, "cases", 0);
    ck_assert_int_gt(ncases, 0);
    for (k = 0; k < ncases; k++) {
        char key[16];
        tparam p;

        snprintf(key, sizeof key, "case.%d", k);
        ck_assert_int_eq(fx_config_ints(f, key, v, 10), 10);
        p.sh = v[0]; p.sw = v[1]; p.ph = v[2]; p.pw = v[3];
        p.oph = v[4]; p.opw = v[5]; p.dh = v[6]; p.dw = v[7];
        p.groups = v[8]; p.bias = v[9];
        fx_check_case(f, k, p.bias, run_convt, &p);
    }
    fx_free(f);
}

START_TEST(conv_transpose2d_matches_pytorch)
{
    check_convt_fixture();
}
END_TEST

/* A failing call returns NULL with the status and a message naming what
 * is wrong. */
static void
expect_fail(cg_tensor *x, cg_tensor *w, cg_tensor *b,
            const cg_conv_options *o, int one_d, int status,
            const char *needle)
{
    cg_tensor *y = one_d ? cg_conv1d(x, w, b, o) : cg_conv2d(x, w, b, o);

    ck_assert_ptr_null(y);
    ck_assert_int_eq(cg__last_status(), status);
    ck_assert_msg(strstr(cg_last_error(), needle) != NULL,
                  "message \"%s\" lacks \"%s\"", cg_last_error(), needle);
}

START_TEST(bad_shapes_and_options_fail_cleanly)
{
    static const int64_t xs[4] = { 2, 4, 5, 5 }, w3[4] = { 6, 3, 3, 3 };
    static const int64_t w4[4] = { 6, 4, 3, 3 }, big[4] = { 6, 4, 7, 3 };
    static const int64_t w22[4] = { 6, 2, 3, 3 }, b5[1] = { 5 };
    static const int64_t x1[3] = { 2, 4, 5 }, wk[3] = { 3, 4, 9 };
    cg_tensor *x = random_tensor(4, xs, 0), *wa = random_tensor(4, w3, 0);
    cg_tensor *wb = random_tensor(4, w4, 0), *wc = random_tensor(4, big, 0);
    cg_tensor *wd = random_tensor(4, w22, 0), *b = random_tensor(1, b5, 0);
    cg_tensor *xl = random_tensor(3, x1, 0), *wl = random_tensor(3, wk, 0);
    cg_conv_options o;

    /* the same errors whether conv1d runs by FFT or not (_i 1) */
    if (_i)
        ck_assert_int_eq(setenv("CLGRAD_CONV_ALGO", "fft", 1), 0);
    memset(&o, 0, sizeof o);
    expect_fail(x, wa, NULL, &o, 0, CG_ESHAPE, "[6, 3, 3, 3]");
    expect_fail(x, wc, NULL, &o, 0, CG_ESHAPE, "larger than the padded");
    expect_fail(x, wb, b, &o, 0, CG_ESHAPE, "bias [5]");
    o.groups = 3;
    expect_fail(x, wd, NULL, &o, 0, CG_ESHAPE, "groups 3 must divide");
    o.groups = 0;
    o.stride[0] = -1;
    expect_fail(x, wb, NULL, &o, 0, CG_EINVAL, "must not be negative");
    o.stride[0] = 2;
    o.padding_same = 1;
    expect_fail(x, wb, NULL, &o, 0, CG_EINVAL, "needs stride 1");
    o.stride[0] = 0;
    o.padding_same = 0;
    o.dilation[1] = 3;
    expect_fail(x, wb, NULL, &o, 0, CG_ESHAPE, "dilation 3 * (3 - 1) + 1");
    o.dilation[1] = 0;
    expect_fail(xl, wl, NULL, &o, 1, CG_ESHAPE, "kernel length 9");
    o.groups = 3;
    expect_fail(xl, wl, NULL, &o, 1, CG_ESHAPE, "channels of [2, 4, 5]");
    o.groups = 0;
    expect_fail(x, wl, NULL, &o, 0, CG_ESHAPE, "must have 4 dimensions");
    expect_fail(xl, wb, NULL, &o, 0, CG_ESHAPE, "must have 4 dimensions");
    expect_fail(xl, wb, NULL, &o, 1, CG_ESHAPE, "must have 3 dimensions");
    expect_fail(NULL, wb, NULL, &o, 0, CG_EINVAL, "input");
    cg_tensor_free(x);
    cg_tensor_free(wa);
    cg_tensor_free(wb);
    cg_tensor_free(wc);
    cg_tensor_free(wd);
    cg_tensor_free(b);
    cg_tensor_free(xl);
    cg_tensor_free(wl);
    use_auto();
}
END_TEST

/* A failing conv_transpose2d returns NULL with the status and a message
 * naming what is wrong, and neither allocates nor enqueues anything. */
static void
expect_convt_fail(cg_tensor *x, cg_tensor *w, cg_tensor *b,
                  const cg_conv_transpose_options *o, int status,
                  const char *needle)
{
    cg_memory_stats before, after;

    ck_assert_int_eq(cg_context_stats(tt_ctx(), &before), CG_OK);
    ck_assert_ptr_null(cg_conv_transpose2d(x, w, b, o));
    ck_assert_int_eq(cg__last_status(), status);
    ck_assert_msg(strstr(cg_last_error(), needle) != NULL,
                  "message \"%s\" lacks \"%s\"", cg_last_error(), needle);
    ck_assert_int_eq(cg_context_stats(tt_ctx(), &after), CG_OK);
    ck_assert_uint_eq(after.kernels_enqueued, before.kernels_enqueued);
    ck_assert_uint_eq(after.allocations, before.allocations);
    ck_assert_uint_eq(after.bytes_in_use, before.bytes_in_use);
}

START_TEST(conv_transpose2d_bad_shapes_fail_cleanly)
{
    static const int64_t xs[4] = { 2, 4, 5, 5 }, x1s[4] = { 2, 4, 1, 5 };
    static const int64_t w3[4] = { 3, 2, 3, 3 }, w4[4] = { 4, 3, 3, 3 };
    static const int64_t w11[4] = { 4, 3, 1, 1 }, b5[1] = { 5 };
    static const int64_t x3[3] = { 2, 4, 5 };
    cg_tensor *x = random_tensor(4, xs, 0), *x1 = random_tensor(4, x1s, 0);
    cg_tensor *wa = random_tensor(4, w3, 0), *wb = random_tensor(4, w4, 0);
    cg_tensor *wc = random_tensor(4, w11, 0), *b = random_tensor(1, b5, 0);
    cg_tensor *xl = random_tensor(3, x3, 0);
    cg_conv_transpose_options o;

    memset(&o, 0, sizeof o);
    expect_convt_fail(x, wa, NULL, &o, CG_ESHAPE,
                      "weight [3, 2, 3, 3] must have input [2, 4, 5, 5]'s 4 "
                      "channels");
    expect_convt_fail(x, wb, b, &o, CG_ESHAPE, "bias [5] must be [3]");
    o.groups = 2;
    expect_convt_fail(x, wb, b, &o, CG_ESHAPE, "bias [5] must be [6]");
    o.groups = 3;
    expect_convt_fail(x, wb, NULL, &o, CG_ESHAPE, "groups 3 must divide");
    o.groups = 0;
    o.stride[0] = 2;
    o.output_padding[0] = 2;
    expect_convt_fail(x, wb, NULL, &o, CG_ESHAPE,
                      "output_padding 2 (height) must be smaller than the "
                      "stride 2 or the dilation 1");
    o.stride[0] = 0;
    o.output_padding[0] = 0;
    o.output_padding[1] = 1;
    expect_convt_fail(x, wb, NULL, &o, CG_ESHAPE,
                      "output_padding 1 (width) must be smaller than the "
                      "stride 1 or the dilation 1");
    o.output_padding[1] = 0;
    o.padding[0] = 1;
    expect_convt_fail(x1, wc, NULL, &o, CG_ESHAPE, "output height (1 - 1) * "
                      "1 - 2 * 1 + 1 * (1 - 1) + 0 + 1 = -1 < 1");
    o.padding[0] = 0;
    o.output_padding[0] = -1;
    expect_convt_fail(x, wb, NULL, &o, CG_EINVAL, "must not be negative");
    o.output_padding[0] = 0;
    expect_convt_fail(xl, wb, NULL, &o, CG_ESHAPE, "must have 4 dimensions");
    expect_convt_fail(NULL, wb, NULL, &o, CG_EINVAL, "input");
    expect_convt_fail(x, NULL, NULL, NULL, CG_EINVAL, "weight");
    cg_tensor_free(x);
    cg_tensor_free(x1);
    cg_tensor_free(wa);
    cg_tensor_free(wb);
    cg_tensor_free(wc);
    cg_tensor_free(b);
    cg_tensor_free(xl);
}
END_TEST

/* The Conv2d layer: PyTorch's parameter names, shapes and initial bounds,
 * its forward equal to cg_conv2d with its options (alone and in a
 * sequential container), and bad sizes refused. */
START_TEST(conv2d_layer_is_pytorchs)
{
    static const int kernel[2] = { 3, 2 };
    cg_context *ctx = tt_ctx();
    cg_conv_options o;
    cg_module *m, *seq, *nb;
    cg_tensor *x, *y1, *y2, *y3;
    const char *name;
    int64_t xs[4] = { 2, 6, 7, 5 }, ws[4];
    double bound = 1.0 / sqrt(3.0 * 3.0 * 2.0);
    float *w, *a, *b, lo = 1, hi = -1;
    size_t i, n;

    memset(&o, 0, sizeof o);
    o.stride[0] = 2;
    o.padding[0] = o.padding[1] = 1;
    o.groups = 2;
    m = cg_conv2d_new(ctx, 6, 4, kernel, 1, &o);
    ck_assert_msg(m != NULL, "%s", TT_ERR);
    ck_assert_str_eq(cg_module_kind(m), "conv2d");
    ck_assert_int_eq(cg_module_num_params(m), 2);
    ck_assert_ptr_nonnull(cg_module_param(m, 0, &name));
    ck_assert_str_eq(name, "weight");
    ck_assert_int_eq(cg_tensor_ndim(cg_module_param(m, 0, NULL)), 4);
    ck_assert_int_eq(cg_tensor_shape(cg_module_param(m, 0, NULL), ws), CG_OK);
    ck_assert(ws[0] == 4 && ws[1] == 3 && ws[2] == 3 && ws[3] == 2);
    ck_assert_ptr_nonnull(cg_module_param(m, 1, &name));
    ck_assert_str_eq(name, "bias");
    ck_assert_int_eq(cg_tensor_numel(cg_module_param(m, 1, NULL)), 4);
    /* U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = 6 / 2 * 3 * 2 */
    w = host_copy(cg_module_param(m, 0, NULL));
    n = (size_t)cg_tensor_numel(cg_module_param(m, 0, NULL));
    for (i = 0; i < n; i++) {
        ck_assert(fabs(w[i]) <= bound);
        lo = w[i] < lo ? w[i] : lo;
        hi = w[i] > hi ? w[i] : hi;
    }
    ck_assert_msg(hi - lo > bound, "72 weights span only %g", hi - lo);
    free(w);

    x = random_tensor(4, xs, 0);
    y1 = cg_conv2d_forward(m, x);
    ck_assert_msg(y1 != NULL, "%s", TT_ERR);
    y2 = cg_conv2d(x, cg_module_param(m, 0, NULL),
                   cg_module_param(m, 1, NULL), &o);
    ck_assert_msg(y2 != NULL, "%s", TT_ERR);
    seq = cg_sequential_new(ctx);
    ck_assert_int_eq(cg_module_add(seq, NULL, m), CG_OK);
    y3 = cg_module_forward(seq, x);
    ck_assert_msg(y3 != NULL, "%s", TT_ERR);
    ck_assert_ptr_nonnull(cg_module_find_param(seq, "0.weight"));
    ck_assert_ptr_nonnull(cg_module_find_param(seq, "0.bias"));
    ck_assert_int_eq(cg_tensor_numel(y1), cg_tensor_numel(y2));
    a = host_copy(y1);
    b = host_copy(y2);
    ck_assert(memcmp(a, b, (size_t)cg_tensor_numel(y1) * 4) == 0);
    free(b);
    b = host_copy(y3);
    ck_assert(memcmp(a, b, (size_t)cg_tensor_numel(y1) * 4) == 0);
    free(a);
    free(b);
    cg_tensor_free(y1);
    cg_tensor_free(y2);
    cg_tensor_free(y3);
    cg_tensor_free(x);
    cg_module_free(seq);

    nb = cg_conv2d_new(ctx, 3, 5, kernel, 0, NULL);
    ck_assert_msg(nb != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_module_num_params(nb), 1);
    cg_module_free(nb);
    ck_assert_ptr_null(cg_conv2d_new(ctx, 6, 5, kernel, 1, &o));
    ck_assert_int_eq(cg__last_status(), CG_EINVAL);
    ck_assert_ptr_nonnull(strstr(TT_ERR, "groups 2"));
    ck_assert_ptr_null(cg_conv2d_new(ctx, 0, 5, kernel, 1, NULL));
    ck_assert_int_eq(cg__last_status(), CG_EINVAL);
    o.padding[1] = -1;
    ck_assert_ptr_null(cg_conv2d_new(ctx, 6, 4, kernel, 1, &o));
    ck_assert_int_eq(cg__last_status(), CG_EINVAL);
    ck_assert_ptr_null(cg_conv2d_new(NULL, 6, 4, kernel, 1, NULL));
    ck_assert_ptr_null(cg_conv2d_new(ctx, 6, 4, NULL, 1, NULL));
    ck_assert_ptr_null(cg_conv2d_forward(NULL, NULL));
}
END_TEST

/* Larger shapes than the finite differences afford (rows of several
 * float8 tiles, partial blocks of output channels): the direct kernels
 * against im2col + GEMM (y, dx, dw, db within 1e-5 of each tensor's
 * largest value: float32 sums of up to 2 * 23 * 21 = 966 products (dw of
 * the 5x5 case), in different orders, round to about sqrt(966) * 6e-8 =
 * 2e-6 of that), and the direct ones run twice, a work-item per whole
 * row and per piece of 8 outputs (cg__conv_set_direct_items), give the
 * same bits (fixed summation order, no atomics, whatever the pieces).
 * The last two cases: the 3 x 3 stride-1 path (4 rows an item) on rows
 * of 37, and a depthwise conv1d's rows of 300 (268 outputs). */
START_TEST(algorithms_agree_and_direct_is_deterministic)
{
    static const struct {
        int64_t x[4], w[4];
        int stride, pad, dil, groups;
    } cases[] = {
        { { 3, 16, 29, 30 }, { 16, 1, 3, 3 }, 2, 1, 1, 16 },
        { { 2, 12, 17, 19 }, { 24, 1, 3, 3 }, 1, 2, 2, 12 },
        { { 2, 3, 23, 21 }, { 10, 3, 5, 5 }, 1, 2, 1, 1 },
        { { 2, 14, 11, 13 }, { 6, 7, 3, 3 }, 1, 1, 1, 2 },
        { { 2, 8, 13, 12 }, { 12, 4, 3, 3 }, 2, 1, 2, 2 },
        { { 2, 6, 9, 37 }, { 6, 1, 3, 3 }, 1, 1, 1, 6 },
        { { 1, 4, 1, 300 }, { 4, 1, 1, 33 }, 1, 0, 1, 4 },
    };
    size_t c;
    int t;

    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t bs[1] = { cases[c].w[0] };
        cg_tensor *x = random_tensor(4, cases[c].x, 1);
        cg_tensor *w = random_tensor(4, cases[c].w, 1);
        cg_tensor *b = random_tensor(1, bs, 1);
        size_t numel[4];
        float *out[3][4];
        cg_conv_options o;
        int a;

        memset(&o, 0, sizeof o);
        o.stride[0] = o.stride[1] = cases[c].stride;
        o.padding[0] = o.padding[1] = cases[c].pad;
        o.dilation[0] = o.dilation[1] = cases[c].dil;
        o.groups = cases[c].groups;
        for (a = 0; a < 3; a++) {
            use_algo(a ? 1 : 0);
            cg__conv_set_direct_items(a == 1 ? 1 : SIZE_MAX);
            grads_of(cg_conv2d(x, w, b, &o), x, w, b, out[a]);
        }
        cg__conv_set_direct_items(0);
        use_auto();
        {
            cg_tensor *y = cg_conv2d(x, w, b, &o);

            ck_assert_msg(y != NULL, "%s", TT_ERR);
            numel[0] = (size_t)cg_tensor_numel(y);
            cg_tensor_free(y);
        }
        numel[1] = (size_t)cg_tensor_numel(x);
        numel[2] = (size_t)cg_tensor_numel(w);
        numel[3] = (size_t)bs[0];
        for (t = 0; t < 4; t++) {
            double big = 0, err = 0;
            size_t j;

            ck_assert_msg(memcmp(out[1][t], out[2][t],
                                 numel[t] * sizeof(float)) == 0,
                          "case %zu tensor %d: direct by whole rows and by "
                          "pieces of 8 differ", c, t);
            for (j = 0; j < numel[t]; j++) {
                double d = fabs((double)out[0][t][j] - out[1][t][j]);

                big = fabs(out[0][t][j]) > big ? fabs(out[0][t][j]) : big;
                err = d > err ? d : err;
            }
            ck_assert_msg(err <= 1e-5 * big, "case %zu tensor %d: direct "
                          "differs from im2col by %g (largest %g)", c, t,
                          err, big);
            for (a = 0; a < 3; a++)
                free(out[a][t]);
        }
        cg_tensor_free(x);
        cg_tensor_free(w);
        cg_tensor_free(b);
    }
}
END_TEST

/* 0 im2col + GEMM, 1 direct, for C, K, groups in direction bwd. */
static int
algo_of(cg_context *ctx, int bwd, int64_t C, int64_t K, int64_t G)
{
    int a = -1;

    ck_assert_msg(cg__conv_algo(ctx, bwd, C, K, G, &a) == CG_OK, "%s",
                  TT_ERR);
    return a;
}

static cg_tuning_entry
conv_entry(const char *shape, long algo)
{
    cg_tuning_entry e;

    memset(&e, 0, sizeof e);
    strcpy(e.kernel, "conv");
    snprintf(e.shape, sizeof e.shape, "%s", shape);
    e.nparams = 1;
    strcpy(e.names[0], "algo");
    e.values[0] = algo;
    return e;
}

/* The built-in rule (direct for depthwise, im2col else), a class's tuning
 * entry over it, CLGRAD_CONV_ALGO over both; a bad value of the variable
 * fails the convolution with CG_EINVAL before anything runs, and bad
 * entries are refused. */
START_TEST(algorithm_choice_follows_env_tuning_and_rule)
{
    static const int64_t xs[4] = { 1, 4, 5, 5 }, ws[4] = { 4, 1, 3, 3 };
    cg_context *ctx = tt_ctx();
    cg_tensor *x = random_tensor(4, xs, 0), *w = random_tensor(4, ws, 0);
    cg_conv_options o;
    cg_tuning_entry e;
    int bwd;

    memset(&o, 0, sizeof o);
    o.groups = 4;
    use_auto();
    /* the rule itself: no entries, not even this device's shipped ones
     * (nvidia-h200.json's pick direct where the rule takes im2col) */
    ck_assert_int_eq(cg_context_clear_tuning(ctx), CG_OK);
    for (bwd = 0; bwd < 2; bwd++) {
        ck_assert_int_eq(algo_of(ctx, bwd, 64, 64, 64), 1);
        ck_assert_int_eq(algo_of(ctx, bwd, 8, 16, 8), 1);
        ck_assert_int_eq(algo_of(ctx, bwd, 3, 16, 1), 0);
        ck_assert_int_eq(algo_of(ctx, bwd, 64, 64, 1), 0);
        ck_assert_int_eq(algo_of(ctx, bwd, 1, 8, 1), 0);
    }
    e = conv_entry("fwd.depthwise", 0);
    ck_assert_msg(cg_context_set_tuning(ctx, &e) == CG_OK, "%s", TT_ERR);
    e = conv_entry("bwd.small", 1);
    ck_assert_msg(cg_context_set_tuning(ctx, &e) == CG_OK, "%s", TT_ERR);
    ck_assert_int_eq(algo_of(ctx, 0, 64, 64, 64), 0);
    ck_assert_int_eq(algo_of(ctx, 1, 64, 64, 64), 1);
    ck_assert_int_eq(algo_of(ctx, 0, 3, 16, 1), 0);
    ck_assert_int_eq(algo_of(ctx, 1, 3, 16, 1), 1);
    ck_assert_int_eq(algo_of(ctx, 1, 8, 16, 2), 1);
    ck_assert_int_eq(algo_of(ctx, 1, 64, 64, 1), 0);
    use_algo(1);
    ck_assert_int_eq(algo_of(ctx, 0, 64, 64, 64), 1);
    ck_assert_int_eq(algo_of(ctx, 0, 64, 64, 1), 1);
    use_algo(0);
    ck_assert_int_eq(algo_of(ctx, 1, 3, 16, 1), 0);
    ck_assert_int_eq(setenv("CLGRAD_CONV_ALGO", "auto", 1), 0);
    ck_assert_int_eq(algo_of(ctx, 1, 3, 16, 1), 1);
    ck_assert_int_eq(setenv("CLGRAD_CONV_ALGO", "fast", 1), 0);
    expect_fail(x, w, NULL, &o, 0, CG_EINVAL, "CLGRAD_CONV_ALGO=fast");
    use_auto();

    e = conv_entry("fwd.huge", 1);
    ck_assert_int_eq(cg_context_set_tuning(ctx, &e), CG_EINVAL);
    ck_assert_msg(strstr(cg_last_error(), "fwd.huge"), "%s", TT_ERR);
    e = conv_entry("bwd.large", 2);
    ck_assert_int_eq(cg_context_set_tuning(ctx, &e), CG_EINVAL);
    ck_assert_msg(strstr(cg_last_error(), "algo = 2"), "%s", TT_ERR);
    strcpy(e.names[0], "WG");
    e.values[0] = 1;
    ck_assert_int_eq(cg_context_set_tuning(ctx, &e), CG_EINVAL);
    ck_assert_int_eq(cg_context_clear_tuning(ctx), CG_OK);
    ck_assert_int_eq(algo_of(ctx, 0, 64, 64, 64), 1);
    ck_assert_int_eq(cg_context_apply_tuning(ctx), CG_OK);
    cg_tensor_free(x);
    cg_tensor_free(w);
}
END_TEST

/* Class shape's entry: im2col, and "shift" shift. */
static cg_tuning_entry
shift_entry(const char *shape, long shift)
{
    cg_tuning_entry e = conv_entry(shape, 0);

    e.nparams = 2;
    strcpy(e.names[1], "shift");
    e.values[1] = shift;
    return e;
}

/* An entry "shift" 0 puts im2col on columns where its rule reads stride-1
 * windows in place, for the entry's class and direction only (conv2d's
 * forward, its backward, conv_transpose2d's forward); "shift" 1 is the
 * rule; CLGRAD_CONV_ALGO goes by the rule whatever the entries say; the
 * results do not change; values other than 0 and 1 are refused. */
START_TEST(shift_entry_makes_columns)
{
    static const int64_t xs[4] = { 2, 16, 7, 9 }, ws[4] = { 17, 16, 3, 3 };
    static const int64_t ys[4] = { 2, 17, 7, 9 };
    cg_context_options co = { NULL, 1, 1 };
    cg_context *ctx = cg_context_new_with(&co);
    cg_tensor *x, *w, *g, *y, *t;
    cg_conv_options o;
    cg_conv_transpose_options ot;
    cg_tuning_entry e;
    float *ref[3] = { NULL, NULL, NULL }, *got[3];
    size_t n[3] = { 2 * 17 * 63, 2 * 16 * 63, 17 * 16 * 9 }, j;
    char what[48];
    int way, k;

    ck_assert_msg(ctx != NULL, "%s", TT_ERR);
    memset(&o, 0, sizeof o);
    o.padding[0] = o.padding[1] = 1;
    memset(&ot, 0, sizeof ot);
    ot.padding[0] = ot.padding[1] = 1;
    x = cg_rand_normal(ctx, 4, xs, 0.0f, 1.0f);
    w = cg_rand_normal(ctx, 4, ws, 0.0f, 1.0f);
    g = cg_rand_normal(ctx, 4, ys, 0.0f, 1.0f);
    ck_assert_msg(x && w && g, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_set_requires_grad(x, 1), CG_OK);
    ck_assert_int_eq(cg_tensor_set_requires_grad(w, 1), CG_OK);
    use_auto();
    /* way 0: no entries (the rule); 1: fwd.large shift 0; 2: and
     * bwd.large shift 0; 3: fwd.large shift 1, bwd.large shift 0; 4:
     * CLGRAD_CONV_ALGO=im2col over way 3's entries */
    for (way = 0; way < 5; way++) {
        int fwd_in_place = way == 0 || way >= 3, bwd_in_place = way < 2 ||
                                                                 way == 4;

        if (way == 1 || way == 3) {
            e = shift_entry("fwd.large", way == 3);
            ck_assert_msg(cg_context_set_tuning(ctx, &e) == CG_OK, "%s",
                          TT_ERR);
        } else if (way == 2) {
            e = shift_entry("bwd.large", 0);
            ck_assert_msg(cg_context_set_tuning(ctx, &e) == CG_OK, "%s",
                          TT_ERR);
        } else if (way == 4) {
            use_algo(0);
        }
        ck_assert_int_eq(cg_context_profile_reset(ctx), CG_OK);
        y = cg_conv2d(x, w, NULL, &o);
        ck_assert_msg(y != NULL, "%s", TT_ERR);
        ck_assert_int_eq(tt_launches(ctx, "gemm_shift"), fwd_in_place);
        ck_assert_int_eq(cg_context_profile_reset(ctx), CG_OK);
        ck_assert_int_eq(cg_backward(y, g, 1), CG_OK);
        /* dx's product and dW's */
        ck_assert_int_eq(tt_launches(ctx, "gemm_shift"), bwd_in_place);
        ck_assert_int_eq(tt_launches(ctx, "gemm_shift_dw"), bwd_in_place);
        got[0] = host_copy(y);
        got[1] = host_copy(cg_tensor_grad(x));
        got[2] = host_copy(cg_tensor_grad(w));
        snprintf(what, sizeof what, "way %d", way);
        same_as_first(ref, got, n, 1e-4f, what);
        ck_assert_int_eq(cg_tensor_zero_grad(x), CG_OK);
        ck_assert_int_eq(cg_tensor_zero_grad(w), CG_OK);
        cg_tensor_free(y);
    }
    use_auto();
    /* conv_transpose2d's forward is the convolution's dx: tfwd.large */
    for (way = 0; way < 2; way++) {
        if (way) {
            e = shift_entry("tfwd.large", 0);
            ck_assert_msg(cg_context_set_tuning(ctx, &e) == CG_OK, "%s",
                          TT_ERR);
        }
        ck_assert_int_eq(cg_context_profile_reset(ctx), CG_OK);
        t = cg_conv_transpose2d(g, w, NULL, &ot);
        ck_assert_msg(t != NULL, "%s", TT_ERR);
        ck_assert_int_eq(tt_launches(ctx, "gemm_shift"), !way);
        got[0] = host_copy(t);
        for (j = 0; j < n[1]; j++)
            ck_assert_msg(fabsf(got[0][j] - ref[1][j]) <=
                          1e-4f * (1.0f + fabsf(ref[1][j])),
                          "conv_transpose2d way %d [%zu]: %g, dx %g", way,
                          j, got[0][j], ref[1][j]);
        free(got[0]);
        cg_tensor_free(t);
    }
    e = shift_entry("bwd.large", 2);
    ck_assert_int_eq(cg_context_set_tuning(ctx, &e), CG_EINVAL);
    ck_assert_msg(strstr(cg_last_error(), "shift = 2"), "%s", TT_ERR);
    for (k = 0; k < 3; k++)
        free(ref[k]);
    cg_tensor_free(x);
    cg_tensor_free(w);
    cg_tensor_free(g);
    cg_context_free(ctx);
}
END_TEST

/* ------------------------------------------------------------------------
 * conv1d by FFT (CK_RUN_CASE=fftconv): against the C reference and
 * finite differences, forced with CLGRAD_CONV_ALGO=fft; against the
 * direct algorithm, forward and every gradient, within 1e-5 sqrt(log2 n)
 * of the largest magnitude; the choice (variable, entry "fwd1d.long",
 * built-in crossover; fft on a 2-D convolution is auto); 16 bits.
 * ------------------------------------------------------------------------ */

/* Groups 1 with 3 and 1 input channels, 2 (two channels each) and
 * depthwise (one and two outputs per channel, one image and several);
 * stride 2 and 3, dilation 2, padding 1, 2, 4 and "same"; a bias at an
 * odd offset. */
START_TEST(conv1d_fft_matches_reference_and_finite_differences)
{
    static const struct { const char *x, *w, *b; cparam p; } cases[] = {
        { "2,3,9", "5,3,3", "5", { 0, 0, 1, 0, 0, 0, 0, 0, 1, 1 } },
        { "2,7,7", "7,1,3", "7", { 2, 0, 1, 0, 2, 0, 7, 0, 1, 1 } },
        { "3,1,8", "2,1,1", "2", { 2, 0, 0, 0, 0, 0, 0, 0, 1, 1 } },
        { "1,4,11", "4,2,5", "4", { 0, 0, 0, 0, 2, 0, 2, 1, 0, 1 } },
        { "2,3,13", "6,1,6", "O6", { 3, 0, 4, 0, 0, 0, 3, 0, 1, 1 } },
        { "1,5,17", "5,1,4", "5", { 0, 0, 2, 0, 0, 0, 5, 0, 1, 1 } },
    };
    oc_op op = { 0 };
    size_t c, n = tt_host_checker() ? 2 : sizeof cases / sizeof cases[0];

    ck_assert_int_eq(setenv("CLGRAD_CONV_ALGO", "fft", 1), 0);
    op.run = run_conv;
    op.ref = ref_conv;
    for (c = 0; c < n; c++) {
        op.name = cases[c].p.bias ? "conv1d(b)/fft" : "conv1d/fft";
        op.ninputs = cases[c].p.bias ? 3 : 2;
        oc_check(&op, &cases[c].p, cases[c].x, cases[c].w, cases[c].b);
    }
    use_auto();
}
END_TEST

/* y, and dx, dw, db of sum(y * g), as host arrays. */
static void
fft_grads_of(cg_tensor *y, cg_tensor *g, cg_tensor *x, cg_tensor *w,
             cg_tensor *b, float **out)
{
    float *all[4];

    ck_assert_msg(y != NULL, "%s", TT_ERR);
    out[0] = host_copy(y);
    grads_of(cg_mul(y, g), x, w, b, all);
    free(all[0]);
    memcpy(out + 1, all + 1, 3 * sizeof *out);
    cg_tensor_free(y);
}

START_TEST(conv1d_fft_equals_direct)
{
    static const struct {
        int64_t x[3], w[3];
        int stride, pad, dil, groups, same;
    } cases[] = {
        { { 2, 5, 97 }, { 5, 1, 31 }, 1, 15, 1, 5, 0 },
        { { 3, 4, 50 }, { 6, 2, 9 }, 2, 3, 2, 2, 0 },
        { { 2, 3, 64 }, { 2, 3, 40 }, 1, 0, 1, 1, 1 },
        { { 1, 3, 45 }, { 6, 1, 12 }, 3, 7, 3, 3, 0 },
    };
    size_t c, n = tt_host_checker() ? 1 : sizeof cases / sizeof cases[0];
    int t;

    for (c = 0; c < n; c++) {
        int64_t bs[1] = { cases[c].w[0] };
        cg_tensor *x = random_tensor(3, cases[c].x, 1);
        cg_tensor *w = random_tensor(3, cases[c].w, 1);
        cg_tensor *b = random_tensor(1, bs, 1);
        /* the transform's length is below 2 (L + padding + kernel) */
        double tol = 1e-5 * sqrt(log2(2.0 * (double)(cases[c].x[2] +
                                 2 * cases[c].pad + cases[c].dil *
                                 cases[c].w[2])));
        int64_t ys[3];
        cg_tensor *g = NULL;
        size_t numel[4];
        float *out[2][4];
        cg_conv_options o;
        int a;

        memset(&o, 0, sizeof o);
        o.stride[0] = cases[c].stride;
        o.padding[0] = cases[c].pad;
        o.dilation[0] = cases[c].dil;
        o.groups = cases[c].groups;
        o.padding_same = cases[c].same;
        for (a = 0; a < 2; a++) {
            cg_tensor *y;

            ck_assert_int_eq(setenv("CLGRAD_CONV_ALGO", a ? "fft" : "direct",
                                    1), 0);
            y = cg_conv1d(x, w, b, &o);
            ck_assert_msg(y != NULL, "%s", TT_ERR);
            if (!a) {
                ck_assert_int_eq(cg_tensor_shape(y, ys), CG_OK);
                g = random_tensor(3, ys, 0);
                numel[0] = (size_t)cg_tensor_numel(y);
            }
            fft_grads_of(y, g, x, w, b, out[a]);
        }
        use_auto();
        cg_tensor_free(g);
        numel[1] = (size_t)cg_tensor_numel(x);
        numel[2] = (size_t)cg_tensor_numel(w);
        numel[3] = (size_t)bs[0];
        for (t = 0; t < 4; t++) {
            double big = 0, err = 0;
            size_t j;

            for (j = 0; j < numel[t]; j++) {
                double d = fabs((double)out[0][t][j] - out[1][t][j]);

                big = fabs(out[0][t][j]) > big ? fabs(out[0][t][j]) : big;
                err = d > err ? d : err;
            }
            ck_assert_msg(err <= tol * big, "case %zu tensor %d: fft "
                          "differs from direct by %g (largest %g, bound "
                          "%g)", c, t, err, big, tol * big);
            free(out[0][t]);
            free(out[1][t]);
        }
        cg_tensor_free(x);
        cg_tensor_free(w);
        cg_tensor_free(b);
    }
}
END_TEST

/* conv1d(x, w) for cg_jvp, with the options in user. */
static int
jvp_conv1d(void *user, int n_inputs, cg_tensor *const *inputs,
           int n_outputs, cg_tensor **outputs)
{
    (void)n_inputs;
    (void)n_outputs;
    outputs[0] = cg_conv1d(inputs[0], inputs[1], NULL, user);
    return outputs[0] ? CG_OK : cg__last_status();
}

/* The FFT algorithm's forward mode (its ops' tangents) and double
 * backward (its ops' recorded backward) equal the direct algorithm's. */
START_TEST(conv1d_fft_jvp_and_double_backward_equal_direct)
{
    static const int64_t xs[3] = { 2, 4, 19 }, ws[3] = { 6, 2, 5 };
    cg_tensor *x = random_tensor(3, xs, 1), *w = random_tensor(3, ws, 1);
    cg_tensor *tx = random_tensor(3, xs, 0), *tw = random_tensor(3, ws, 0);
    cg_tensor *u = random_tensor(3, ws, 0), *g = NULL;
    cg_tensor *in[2] = { x, w }, *tan[2] = { tx, tw };
    float *out[2][3];
    size_t numel[3];
    cg_conv_options o;
    int a, t;

    memset(&o, 0, sizeof o);
    o.padding[0] = 2;
    o.dilation[0] = 2;
    o.groups = 2;
    for (a = 0; a < 2; a++) {
        cg_tensor *y = NULL, *ty = NULL, *gr[2], *gw, *s, *h[1];
        int64_t ys[3];

        ck_assert_int_eq(setenv("CLGRAD_CONV_ALGO", a ? "fft" : "direct", 1),
                         0);
        ck_assert_msg(cg_jvp(tt_ctx(), jvp_conv1d, &o, 2, in, tan, 1, &y,
                             &ty) == CG_OK, "%s", TT_ERR);
        if (!g) {
            ck_assert_int_eq(cg_tensor_shape(y, ys), CG_OK);
            g = random_tensor(3, ys, 0);
        }
        out[a][0] = host_copy(ty);
        numel[0] = (size_t)cg_tensor_numel(ty);
        cg_tensor_free(y);
        cg_tensor_free(ty);
        /* d/dx <dL/dw, u>, L = sum(conv1d(x, w) g) */
        y = cg_conv1d(x, w, NULL, &o);
        ck_assert_msg(y != NULL, "%s", TT_ERR);
        ck_assert_msg(cg_grad(y, g, 2, in, gr, CG_GRAD_CREATE_GRAPH) ==
                      CG_OK, "%s", TT_ERR);
        out[a][1] = host_copy(gr[1]);
        numel[1] = (size_t)cg_tensor_numel(w);
        gw = cg_mul(gr[1], u);
        s = gw ? cg_sum(gw, 0, NULL, 0) : NULL;
        ck_assert_msg(s && cg_grad(s, NULL, 1, in, h, 0) == CG_OK, "%s",
                      TT_ERR);
        out[a][2] = host_copy(h[0]);
        numel[2] = (size_t)cg_tensor_numel(x);
        cg_tensor_free(h[0]);
        cg_tensor_free(s);
        cg_tensor_free(gw);
        cg_tensor_free(gr[0]);
        cg_tensor_free(gr[1]);
        cg_tensor_free(y);
    }
    use_auto();
    for (t = 0; t < 3; t++) {
        double big = 0, err = 0;
        size_t j;

        for (j = 0; j < numel[t]; j++) {
            big = fmax(big, fabs(out[0][t][j]));
            err = fmax(err, fabs((double)out[0][t][j] - out[1][t][j]));
        }
        ck_assert_msg(err <= 1e-5 * sqrt(6.0) * big, "%s: fft differs from "
                      "direct by %g (largest %g)", t == 0 ? "tangent" :
                      t == 1 ? "dw" : "double backward", err, big);
        free(out[0][t]);
        free(out[1][t]);
    }
    cg_tensor_free(x);
    cg_tensor_free(w);
    cg_tensor_free(tx);
    cg_tensor_free(tw);
    cg_tensor_free(u);
    cg_tensor_free(g);
}
END_TEST

static cg_tuning_entry
fft_entry(long algo, long min_kernel)
{
    cg_tuning_entry e = conv_entry("fwd1d.long", algo);

    e.nparams = 2;
    strcpy(e.names[1], "min_kernel");
    e.values[1] = min_kernel;
    return e;
}

/* The built-in crossover, an entry "fwd1d.long" over it, the variable
 * over both; fft is auto for conv2d; 16-bit arguments run the float32
 * algorithm between casts. */
START_TEST(conv1d_fft_choice_follows_env_tuning_and_rule)
{
    static const int64_t xs[3] = { 2, 3, 21 }, ws[3] = { 3, 1, 7 };
    static const int64_t x2[4] = { 1, 3, 6, 7 }, w2[4] = { 3, 1, 3, 3 };
    cg_context *ctx = tt_ctx();
    cg_tensor *x = random_tensor(3, xs, 0), *w = random_tensor(3, ws, 0);
    cg_tensor *xh, *wh, *y, *yh, *yf;
    cg_conv_options o;
    cg_tuning_entry e;
    float *a, *b;
    size_t j, n;
    int bwd;

    memset(&o, 0, sizeof o);
    o.groups = 3;
    use_auto();
    /* the rule itself: no entries, not even this device's shipped ones
     * (nvidia-h200.json's pick direct where the rule takes im2col) */
    ck_assert_int_eq(cg_context_clear_tuning(ctx), CG_OK);
    for (bwd = 0; bwd < 2; bwd++) {
        ck_assert_str_eq(cg_conv1d_algorithm(ctx, bwd, 64, 64, 64, 4096),
                         "fft");
        ck_assert_str_eq(cg_conv1d_algorithm(ctx, bwd, 64, 64, 64, 3),
                         "direct");
        ck_assert_str_eq(cg_conv1d_algorithm(ctx, bwd, 8, 8, 1, 3),
                         "im2col");
    }
    ck_assert_ptr_null(cg_conv1d_algorithm(ctx, 0, 8, 8, 1, 0));
    ck_assert_int_eq(cg__last_status(), CG_EINVAL);
    e = fft_entry(0, 1);
    ck_assert_msg(cg_context_set_tuning(ctx, &e) == CG_OK, "%s", TT_ERR);
    ck_assert_str_eq(cg_conv1d_algorithm(ctx, 0, 64, 64, 64, 4096),
                     "direct");
    e = fft_entry(2, 7);
    ck_assert_msg(cg_context_set_tuning(ctx, &e) == CG_OK, "%s", TT_ERR);
    ck_assert_str_eq(cg_conv1d_algorithm(ctx, 1, 64, 64, 64, 7), "fft");
    ck_assert_str_eq(cg_conv1d_algorithm(ctx, 1, 64, 64, 64, 6), "direct");
    e = fft_entry(3, 7);
    ck_assert_int_eq(cg_context_set_tuning(ctx, &e), CG_EINVAL);
    e = fft_entry(2, 0);
    ck_assert_int_eq(cg_context_set_tuning(ctx, &e), CG_EINVAL);
    ck_assert_msg(strstr(cg_last_error(), "min_kernel"), "%s", TT_ERR);
    ck_assert_int_eq(setenv("CLGRAD_CONV_ALGO", "direct", 1), 0);
    ck_assert_str_eq(cg_conv1d_algorithm(ctx, 0, 64, 64, 64, 4096),
                     "direct");
    ck_assert_int_eq(setenv("CLGRAD_CONV_ALGO", "fft", 1), 0);
    ck_assert_str_eq(cg_conv1d_algorithm(ctx, 0, 8, 8, 1, 1), "fft");
    ck_assert_str_eq(cg_conv2d_algorithm(ctx, 0, 64, 64, 64), "direct");
    ck_assert_int_eq(cg_context_clear_tuning(ctx), CG_OK);
    ck_assert_int_eq(cg_context_apply_tuning(ctx), CG_OK);

    /* conv2d under fft: the auto choice, the same bits */
    {
        cg_tensor *x4 = random_tensor(4, x2, 0), *w4 = random_tensor(4, w2, 0);
        cg_tensor *y4 = cg_conv2d(x4, w4, NULL, &o), *z4;

        ck_assert_msg(y4 != NULL, "%s", TT_ERR);
        use_auto();
        z4 = cg_conv2d(x4, w4, NULL, &o);
        a = host_copy(y4);
        b = host_copy(z4);
        ck_assert(memcmp(a, b, (size_t)cg_tensor_numel(y4) * 4) == 0);
        free(a);
        free(b);
        cg_tensor_free(x4);
        cg_tensor_free(w4);
        cg_tensor_free(y4);
        cg_tensor_free(z4);
    }

    /* float16: the float32 algorithm on the cast-up values, rounded once */
    ck_assert_int_eq(setenv("CLGRAD_CONV_ALGO", "fft", 1), 0);
    xh = cg_to_dtype(x, CG_F16);
    wh = cg_to_dtype(w, CG_F16);
    ck_assert_msg(xh && wh, "%s", TT_ERR);
    yh = cg_conv1d(xh, wh, NULL, &o);
    ck_assert_msg(yh != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_dtype(yh), CG_F16);
    {
        cg_tensor *xf = cg_to_dtype(xh, CG_F32), *wf = cg_to_dtype(wh, CG_F32);

        y = cg_conv1d(xf, wf, NULL, &o);
        yf = cg_to_dtype(yh, CG_F32);
        ck_assert_msg(y && yf, "%s", TT_ERR);
        a = host_copy(y);
        b = host_copy(yf);
        n = (size_t)cg_tensor_numel(y);
        for (j = 0; j < n; j++)
            ck_assert_msg(fabs(a[j] - b[j]) <= 1e-3 * (fabs(a[j]) + 1e-3),
                          "element %zu: %g, float32 %g", j, b[j], a[j]);
        free(a);
        free(b);
        cg_tensor_free(xf);
        cg_tensor_free(wf);
        cg_tensor_free(y);
        cg_tensor_free(yf);
    }
    use_auto();
    cg_tensor_free(yh);
    cg_tensor_free(xh);
    cg_tensor_free(wh);
    cg_tensor_free(x);
    cg_tensor_free(w);
}
END_TEST

/* ------------------------------------------------------------------------
 * conv_transpose2d's two algorithms (CK_RUN_CASE=conv_transpose_algos):
 * each forced with CLGRAD_CONV_ALGO against the C reference, finite
 * differences and PyTorch's fixture; the two against each other on
 * larger shapes; the choice through the transposed shape classes.
 * ------------------------------------------------------------------------ */

/* 1, 3 and 7 channels in and out; 1x1, 3x3, 5x2 and 4x4 kernels; stride
 * 2 (and (2, 1)), dilation 2, groups 1, 2 and C (depthwise, and with two
 * outputs per group); padding 0 and 1; output_padding 1 at stride 2 and
 * at dilation 2; rows longer than the direct kernels' 8-wide tiles; a
 * transposed view as input and a bias at an odd offset. */
START_TEST(conv_transpose2d_each_algorithm_matches_reference)
{
    static const struct { const char *x, *w, *b; tparam p; } cases[] = {
        { "1,1,5,4", "1,1,1,1", "1", { 0, 0, 0, 0, 0, 0, 0, 0, 0, 1 } },
        { "2,3,4,5", "3,7,3,3", "7", { 2, 2, 1, 1, 1, 1, 0, 0, 0, 1 } },
        { "2,7,3,4", "7,3,5,2", "3", { 2, 2, 0, 0, 0, 1, 0, 0, 0, 1 } },
        { "1,3,4,4", "3,1,3,3", "3", { 1, 1, 1, 1, 1, 1, 2, 2, 3, 1 } },
        { "2,4,3,5", "4,3,5,2", "6", { 2, 1, 1, 0, 1, 0, 1, 2, 2, 1 } },
        { "1,7,3,3", "7,1,3,3", "7", { 2, 2, 1, 1, 1, 1, 2, 2, 7, 1 } },
        { "1,7,2,3", "7,2,1,1", "14", { 2, 2, 0, 0, 1, 1, 0, 0, 7, 0 } },
        { "T2,3,5,4", "3,2,3,3", "O2", { 2, 2, 1, 1, 1, 1, 0, 0, 0, 1 } },
        { "1,2,3,11", "2,3,4,4", "3", { 2, 2, 1, 1, 1, 1, 0, 0, 0, 1 } },
        { "1,3,2,9", "3,1,3,3", "1", { 1, 1, 0, 0, 0, 0, 1, 1, 0, 0 } },
        /* stride 1, dilation 2, output_padding 1 within the padding (the
         * convolution's forward and dW at stride 1 read in place, when
         * forced) and beyond it (they cannot) */
        { "2,3,4,5", "3,2,3,3", "2", { 1, 1, 1, 1, 1, 1, 2, 2, 0, 1 } },
        { "1,2,3,4", "2,3,3,2", "3", { 1, 1, 0, 0, 1, 1, 2, 2, 0, 1 } },
    };
    static const char *const names[3][2] = {
        { "conv_transpose2d/im2col", "conv_transpose2d(b)/im2col" },
        { "conv_transpose2d/direct", "conv_transpose2d(b)/direct" },
        { "conv_transpose2d/im2col-shift",
          "conv_transpose2d(b)/im2col-shift" }
    };
    oc_op op = { 0 };
    size_t c;

    /* 2: im2col with the in-place reads forced wherever they can go */
    use_algo(_i == 1);
    cg__conv_set_shift(_i == 2 ? 1 : -1);
    op.run = run_convt;
    op.ref = ref_convt;
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        op.name = names[_i][cases[c].p.bias];
        op.ninputs = cases[c].p.bias ? 3 : 2;
        oc_check(&op, &cases[c].p, cases[c].x, cases[c].w, cases[c].b);
    }
    cg__conv_set_shift(-1);
    use_auto();
}
END_TEST

START_TEST(conv_transpose2d_each_algorithm_matches_pytorch)
{
    use_algo(_i);
    check_convt_fixture();
    use_auto();
}
END_TEST

/* As algorithms_agree_and_direct_is_deterministic, for conv_transpose2d:
 * the direct algorithm against im2col + GEMM, and the direct one run by
 * whole rows and by pieces of 8 gives the same bits.  A DCGAN
 * generator's 4x4 stride-2 upsampling, depthwise, grouped with dilation,
 * a 5x2 kernel at stride (2, 1); rows of several 8-wide tiles and
 * partial ones.  The same
 * bound, 1e-5 of each tensor's largest value: the longest sums are dW's,
 * 2 * 10 * 17 = 340 products (the 5x2 case's x) in different orders. */
START_TEST(conv_transpose2d_algorithms_agree_direct_repeats)
{
    static const struct {
        int64_t x[4], w[4];
        int sh, sw, pad, opad, dil, groups;
    } cases[] = {
        { { 2, 16, 9, 10 }, { 16, 8, 4, 4 }, 2, 2, 1, 0, 1, 1 },
        { { 2, 12, 13, 11 }, { 12, 1, 3, 3 }, 2, 2, 1, 1, 1, 12 },
        { { 2, 6, 11, 9 }, { 6, 5, 3, 3 }, 1, 1, 2, 1, 2, 2 },
        { { 2, 3, 10, 17 }, { 3, 7, 5, 2 }, 2, 1, 0, 0, 1, 1 },
    };
    size_t c;
    int t;

    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t bs[1] = { cases[c].w[1] * cases[c].groups };
        cg_tensor *x = random_tensor(4, cases[c].x, 1);
        cg_tensor *w = random_tensor(4, cases[c].w, 1);
        cg_tensor *b = random_tensor(1, bs, 1);
        size_t numel[4];
        float *out[3][4];
        cg_conv_transpose_options o;
        int a;

        memset(&o, 0, sizeof o);
        o.stride[0] = cases[c].sh;
        o.stride[1] = cases[c].sw;
        o.padding[0] = o.padding[1] = cases[c].pad;
        o.output_padding[0] = o.output_padding[1] = cases[c].opad;
        o.dilation[0] = o.dilation[1] = cases[c].dil;
        o.groups = cases[c].groups;
        for (a = 0; a < 3; a++) {
            cg_tensor *y;

            use_algo(a ? 1 : 0);
            cg__conv_set_direct_items(a == 1 ? 1 : SIZE_MAX);
            y = cg_conv_transpose2d(x, w, b, &o);
            ck_assert_msg(y != NULL, "%s", TT_ERR);
            numel[0] = (size_t)cg_tensor_numel(y);
            grads_of(y, x, w, b, out[a]);
        }
        cg__conv_set_direct_items(0);
        use_auto();
        numel[1] = (size_t)cg_tensor_numel(x);
        numel[2] = (size_t)cg_tensor_numel(w);
        numel[3] = (size_t)bs[0];
        for (t = 0; t < 4; t++) {
            double big = 0, err = 0;
            size_t j;

            ck_assert_msg(memcmp(out[1][t], out[2][t],
                                 numel[t] * sizeof(float)) == 0,
                          "case %zu tensor %d: direct by whole rows and by "
                          "pieces of 8 differ", c, t);
            for (j = 0; j < numel[t]; j++) {
                double d = fabs((double)out[0][t][j] - out[1][t][j]);

                big = fabs(out[0][t][j]) > big ? fabs(out[0][t][j]) : big;
                err = d > err ? d : err;
            }
            ck_assert_msg(err <= 1e-5 * big, "case %zu tensor %d: direct "
                          "differs from im2col by %g (largest %g)", c, t,
                          err, big);
            for (a = 0; a < 3; a++)
                free(out[a][t]);
        }
        cg_tensor_free(x);
        cg_tensor_free(w);
        cg_tensor_free(b);
    }
}
END_TEST

/* The transposed classes (tfwd.*, tbwd.*) have the built-in rule of the
 * others (direct for depthwise) and entries of their own: an entry of a
 * convolution's class does not change the transposed one's, nor the
 * reverse; the kind is the transposed convolution's (C its output
 * channels); CLGRAD_CONV_ALGO overrides all, and cg_conv_transpose2d
 * fails on a bad value with nothing run. */
START_TEST(conv_transpose2d_algorithm_choice_follows_env_and_tuning)
{
    static const int64_t xs[4] = { 1, 4, 5, 5 }, ws[4] = { 4, 1, 3, 3 };
    cg_context *ctx = tt_ctx();
    cg_tensor *x = random_tensor(4, xs, 0), *w = random_tensor(4, ws, 0);
    cg_conv_transpose_options o;
    cg_tuning_entry e;
    const char *name;
    int dir;

    memset(&o, 0, sizeof o);
    use_auto();
    /* the rule itself: no entries, not even this device's shipped ones
     * (nvidia-h200.json's pick direct where the rule takes im2col) */
    ck_assert_int_eq(cg_context_clear_tuning(ctx), CG_OK);
    for (dir = 2; dir < 4; dir++) {
        ck_assert_int_eq(algo_of(ctx, dir, 64, 64, 64), 1);
        ck_assert_int_eq(algo_of(ctx, dir, 3, 64, 1), 0);
        ck_assert_int_eq(algo_of(ctx, dir, 64, 32, 1), 0);
    }
    e = conv_entry("tfwd.large", 1);
    ck_assert_msg(cg_context_set_tuning(ctx, &e) == CG_OK, "%s", TT_ERR);
    e = conv_entry("tbwd.depthwise", 0);
    ck_assert_msg(cg_context_set_tuning(ctx, &e) == CG_OK, "%s", TT_ERR);
    e = conv_entry("fwd.small", 1);
    ck_assert_msg(cg_context_set_tuning(ctx, &e) == CG_OK, "%s", TT_ERR);
    ck_assert_int_eq(algo_of(ctx, 2, 64, 32, 1), 1);
    ck_assert_int_eq(algo_of(ctx, 0, 64, 32, 1), 0);
    ck_assert_int_eq(algo_of(ctx, 3, 64, 32, 1), 0);
    ck_assert_int_eq(algo_of(ctx, 3, 64, 64, 64), 0);
    ck_assert_int_eq(algo_of(ctx, 1, 64, 64, 64), 1);
    ck_assert_int_eq(algo_of(ctx, 0, 3, 64, 1), 1);
    ck_assert_int_eq(algo_of(ctx, 2, 3, 64, 1), 0);
    /* the public query names the transposed op's own channels: a
     * conv_transpose2d from 32 to 64 transposes a 64 -> 32 convolution */
    name = cg_conv_transpose2d_algorithm(ctx, 0, 32, 64, 1);
    ck_assert_msg(name && strcmp(name, "direct") == 0, "%s",
                  name ? name : TT_ERR);
    name = cg_conv_transpose2d_algorithm(ctx, 0, 64, 3, 1);
    ck_assert_msg(name && strcmp(name, "im2col") == 0, "%s",
                  name ? name : TT_ERR);
    name = cg_conv_transpose2d_algorithm(ctx, 1, 8, 8, 8);
    ck_assert_msg(name && strcmp(name, "im2col") == 0, "%s",
                  name ? name : TT_ERR);
    use_algo(1);
    ck_assert_int_eq(algo_of(ctx, 3, 64, 64, 64), 1);
    use_algo(0);
    ck_assert_int_eq(algo_of(ctx, 2, 64, 32, 1), 0);
    ck_assert_int_eq(setenv("CLGRAD_CONV_ALGO", "fast", 1), 0);
    ck_assert_ptr_null(cg_conv_transpose2d(x, w, NULL, &o));
    ck_assert_int_eq(cg__last_status(), CG_EINVAL);
    ck_assert_msg(strstr(cg_last_error(), "CLGRAD_CONV_ALGO=fast"), "%s",
                  TT_ERR);
    ck_assert_ptr_null(cg_conv_transpose2d_algorithm(ctx, 0, 4, 4, 1));
    use_auto();
    e = conv_entry("tfwd.huge", 1);
    ck_assert_int_eq(cg_context_set_tuning(ctx, &e), CG_EINVAL);
    ck_assert_msg(strstr(cg_last_error(), "tfwd.huge"), "%s", TT_ERR);
    ck_assert_int_eq(cg_context_clear_tuning(ctx), CG_OK);
    ck_assert_int_eq(algo_of(ctx, 2, 64, 32, 1), 0);
    ck_assert_int_eq(cg_context_apply_tuning(ctx), CG_OK);
    cg_tensor_free(x);
    cg_tensor_free(w);
}
END_TEST

START_TEST(print_error_table)
{
    oc_report();
}
END_TEST

/* Each test starts from the library's defaults, whatever a test before
 * it left set when it stopped at a failed assertion (the tests share one
 * process): a failure does not make the next tests fail too. */
static void
defaults(void)
{
    cg__conv_set_shift(-1);
    cg__conv_set_col_limit(0);
    cg__conv_set_direct_items(0);
    unsetenv("CLGRAD_CONV_ALGO");
}

int
main(void)
{
    Suite *s = suite_create("conv");
    TCase *tc = tcase_create("conv");

    tt_require_device();
    tcase_set_timeout(tc, 600);
    tcase_add_checked_fixture(tc, defaults, NULL);
    tcase_add_loop_test(tc, conv2d_matches_reference_and_finite_differences,
                        0, 4);
    tcase_add_loop_test(tc, conv1d_matches_reference_and_finite_differences,
                        0, 3);
    tcase_add_test(tc, packed_forward_chunked_equals_one_chunk);
    tcase_add_test(tc, forward_columns_follow_the_gemm_choice);
    tcase_add_test(tc, stride_one_forward_follows_the_rule);
    tcase_add_test(tc, stride_one_products_at_every_micro_tile);
    tcase_add_test(tc, stride_one_backward_shares_planes_and_adds_dx);
    tcase_add_loop_test(tc, chunked_batch_equals_one_chunk, 0, 2);
    tcase_add_loop_test(tc, conv_matches_pytorch, 0, 2);
    tcase_add_test(tc, algorithms_agree_and_direct_is_deterministic);
    tcase_add_test(tc, algorithm_choice_follows_env_tuning_and_rule);
    tcase_add_test(tc, shift_entry_makes_columns);
    tcase_add_loop_test(tc, bad_shapes_and_options_fail_cleanly, 0, 2);
    tcase_add_test(tc, conv2d_layer_is_pytorchs);
    suite_add_tcase(s, tc);
    tc = tcase_create("conv_transpose");
    tcase_set_timeout(tc, 600);
    tcase_add_checked_fixture(tc, defaults, NULL);
    tcase_add_test(tc,
                   conv_transpose2d_matches_reference_and_finite_differences);
    tcase_add_test(tc, conv_transpose2d_chunked_batch_equals_one_chunk);
    tcase_add_test(tc, conv_transpose2d_matches_pytorch);
    tcase_add_test(tc, conv_transpose2d_bad_shapes_fail_cleanly);
    tcase_add_test(tc, print_error_table);
    suite_add_tcase(s, tc);
    tc = tcase_create("conv_transpose_algos");
    tcase_set_timeout(tc, 600);
    tcase_add_checked_fixture(tc, defaults, NULL);
    tcase_add_loop_test(tc, conv_transpose2d_each_algorithm_matches_reference,
                        0, 3);
    tcase_add_loop_test(tc, conv_transpose2d_each_algorithm_matches_pytorch,
                        0, 2);
    tcase_add_test(tc,
                   conv_transpose2d_algorithms_agree_direct_repeats);
    tcase_add_test(tc,
                   conv_transpose2d_algorithm_choice_follows_env_and_tuning);
    tcase_add_test(tc, print_error_table);
    suite_add_tcase(s, tc);
    /* Not under Oclgrind: clFFT's own calls trip its API checks
     * (clGetDeviceInfo: CL_INVALID_VALUE), as test_fft, which is not run
     * there either; the ops the algorithm is made of are checked there by
     * their own tests. */
    if (!tt_checker() || tt_host_checker()) {
        tc = tcase_create("fftconv");
        tcase_set_timeout(tc, 600);
    tcase_add_checked_fixture(tc, defaults, NULL);
        tcase_add_test(tc,
                       conv1d_fft_matches_reference_and_finite_differences);
        tcase_add_test(tc, conv1d_fft_equals_direct);
        tcase_add_test(tc, conv1d_fft_jvp_and_double_backward_equal_direct);
        tcase_add_test(tc, conv1d_fft_choice_follows_env_tuning_and_rule);
        tcase_add_test(tc, print_error_table);
        suite_add_tcase(s, tc);
    }
    return tt_run(s);
}
