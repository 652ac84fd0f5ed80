/* SPDX-License-Identifier: MIT */
/*
 * tests/test_half_cnn.c - the CNN ops (pooling; convolutions) on float16
 * and bfloat16 tensors.  Their 16-bit kernels are the float32 kernels'
 * source with 16-bit loads and stores: every value is read exactly,
 * every sum is the same float32 arithmetic in the same order, and the
 * result is rounded once.  So the 16-bit op must equal, bit for bit, the
 * float32 op on the cast-up inputs, its result rounded to 16 bits; and
 * its gradients likewise (the tolerance is zero, which the identical
 * arithmetic justifies).  Float32 behaviour is tested in test_pooling
 * and test_conv.
 */
#include <math.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "ops/internal.h"
#include "testutil.h"

static cg_tensor *
values(int ndim, const int64_t *shape, double a, double b, double scale)
{
    float v[8192];
    int64_t n = cg__numel(ndim, shape), i;
    cg_tensor *t;

    ck_assert(n <= 8192);
    for (i = 0; i < n; i++)
        v[i] = (float)(sin(a * (double)i + b) * scale);
    if (n > 5)
        v[5] = v[3];                 /* a tie for the max pools */
    t = cg_tensor_from_host(tt_ctx(), CG_F32, ndim, shape, v);
    ck_assert_msg(t != NULL, "%s", TT_ERR);
    return t;
}

static cg_tensor *
cast(cg_tensor *x, cg_dtype dt)
{
    cg_tensor *y = cg_to_dtype(x, dt);

    ck_assert_msg(y != NULL, "%s", TT_ERR);
    return y;
}

/* The bits of t, cast to float32 first when 16-bit (exact). */
static float *
floats(cg_tensor *t)
{
    int64_t n = cg_tensor_numel(t);
    float *v = cg__malloc((size_t)n * sizeof *v);
    cg_tensor *f = cg_tensor_dtype(t) == CG_F32 ? cg_tensor_ref(t)
                                                : cast(t, CG_F32);

    ck_assert(v != NULL);
    ck_assert_msg(cg_tensor_to_host(f, v, (size_t)n * 4) == CG_OK, "%s",
                  TT_ERR);
    cg_tensor_free(f);
    return v;
}

static void
same_bits(cg_tensor *got, cg_tensor *want, const char *what, int which)
{
    int64_t n = cg_tensor_numel(got), i;
    float *a, *b;

    ck_assert_int_eq(n, cg_tensor_numel(want));
    a = floats(got);
    b = floats(want);
    for (i = 0; i < n; i++)
        ck_assert_msg(memcmp(&a[i], &b[i], 4) == 0, "%s case %d element "
                      "%ld: %.9g, want %.9g", what, which, (long)i, a[i],
                      b[i]);
    free(a);
    free(b);
}

/* The op under test on its inputs in[0 .. nin - 1] (NULL entries stay
 * NULL: an absent bias). */
typedef cg_tensor *(*opn_fn)(const void *arg, cg_tensor *const *in);

/* y = op(dt(in)) against dt(op(float(dt(in)))), and the gradients of the
 * float32 leaves in[] through loss = sum(float(y) * v) against the
 * float32 op's gradients of float(dt(in)) for the gradient float(dt(v)),
 * rounded to dt: bit for bit.  Takes in[] (freed here). */
static void
check_rounded(opn_fn op, const void *arg, int nin, cg_tensor **in,
              cg_dtype dt, const char *what, int which)
{
    cg_tensor *h[3] = { 0 }, *f[3] = { 0 }, *y, *r, *rr, *v, *vr, *p, *l;
    cg_tensor *yf, *g;
    int64_t ys[CG_MAX_DIMS];
    char name[64];
    int k;

    ck_assert(nin <= 3);
    for (k = 0; k < nin; k++) {
        if (!in[k])
            continue;
        ck_assert_int_eq(cg_tensor_set_requires_grad(in[k], 1), CG_OK);
        h[k] = cast(in[k], dt);
        cg_no_grad_enter();
        f[k] = cast(h[k], CG_F32);
        cg_no_grad_leave();
        ck_assert_int_eq(cg_tensor_set_requires_grad(f[k], 1), CG_OK);
    }
    y = op(arg, h);
    ck_assert_msg(y != NULL, "%s case %d: %s", what, which, TT_ERR);
    ck_assert_int_eq(cg_tensor_dtype(y), dt);
    r = op(arg, f);
    ck_assert_msg(r != NULL, "%s case %d: %s", what, which, TT_ERR);
    cg_no_grad_enter();
    rr = cast(r, dt);
    cg_no_grad_leave();
    same_bits(y, rr, what, which);
    cg_tensor_shape(y, ys);
    v = values(cg_tensor_ndim(y), ys, 0.377, 1.1, 1.7);
    yf = cast(y, CG_F32);
    p = cg_mul(yf, v);
    l = cg_sum(p, 0, NULL, 0);
    ck_assert_msg(l && cg_backward(l, NULL, 0) == CG_OK, "%s", TT_ERR);
    cg_tensor_free(p);
    cg_tensor_free(l);
    cg_no_grad_enter();
    vr = cast(v, dt);
    cg_tensor_free(v);
    v = cast(vr, CG_F32);
    cg_no_grad_leave();
    p = cg_mul(r, v);
    l = cg_sum(p, 0, NULL, 0);
    ck_assert_msg(l && cg_backward(l, NULL, 0) == CG_OK, "%s", TT_ERR);
    for (k = 0; k < nin; k++) {
        if (!in[k])
            continue;
        cg_no_grad_enter();
        g = cast(cg_tensor_grad(f[k]), dt);
        cg_no_grad_leave();
        ck_assert_ptr_nonnull(cg_tensor_grad(in[k]));
        snprintf(name, sizeof name, "%s: gradient of input %d", what, k);
        same_bits(cg_tensor_grad(in[k]), g, name, which);
        cg_tensor_free(g);
        cg_tensor_free(in[k]);
        cg_tensor_free(h[k]);
        cg_tensor_free(f[k]);
    }
    cg_tensor_free(y); cg_tensor_free(r); cg_tensor_free(rr);
    cg_tensor_free(v); cg_tensor_free(vr); cg_tensor_free(p);
    cg_tensor_free(l); cg_tensor_free(yf);
}

static cg_tensor *
pool_op(const void *arg, cg_tensor *const *in)
{
    static const int k3[2] = { 3, 2 }, s2[2] = { 2, 1 }, p1[2] = { 1, 0 };
    static const int d2[2] = { 2, 1 }, k2[2] = { 2, 2 };

    cg_tensor *x = in[0];

    switch (*(const int *)arg) {
    case 0:     /* overlapping windows, padding, dilation: gather backward */
        return cg_max_pool2d(x, k3, s2, p1, d2, 1);
    case 1:     /* disjoint windows: the scatter backward */
        return cg_max_pool2d(x, k2, NULL, NULL, NULL, 0);
    case 2:
        return cg_avg_pool2d(x, k3, s2, p1, 1, 0, 0);
    case 3:
        return cg_avg_pool2d(x, k3, s2, p1, 0, 1, 5);
    default:
        return cg_adaptive_avg_pool2d(x, 4, 3);
    }
}

START_TEST(pooling_in_16_bits_equals_float32_rounded)
{
    int64_t s[4] = { 2, 3, 9, 11 };
    int which;

    for (which = 0; which < 5; which++) {
        cg_tensor *x = values(4, s, 0.731, 0.3, 3.0);

        check_rounded(pool_op, &which, 1, &x, _i ? CG_BF16 : CG_F16,
                      "pool", which);
    }
}
END_TEST

typedef struct conv_case {
    int64_t x[4], w[4];
    cg_conv_options o;
    int bias, transposed, one_d;
    const char *algo;       /* CLGRAD_CONV_ALGO for both sides */
} conv_case;

static cg_tensor *
conv_op(const void *arg, cg_tensor *const *in)
{
    const conv_case *c = arg;
    cg_tensor *x = in[0], *w = in[1], *b = in[2];
    cg_conv_transpose_options t;

    if (c->one_d)
        return cg_conv1d(x, w, b, &c->o);
    if (!c->transposed)
        return cg_conv2d(x, w, b, &c->o);
    memset(&t, 0, sizeof t);
    t.stride[0] = c->o.stride[0];
    t.stride[1] = c->o.stride[1];
    t.padding[0] = c->o.padding[0];
    t.padding[1] = c->o.padding[1];
    t.output_padding[0] = t.output_padding[1] = 1;
    t.dilation[0] = c->o.dilation[0];
    t.dilation[1] = c->o.dilation[1];
    t.groups = c->o.groups;
    return cg_conv_transpose2d(x, w, b, &t);
}

/* conv(dt(x), dt(w), dt(b)) and its gradients against the float32
 * convolution of the cast-up values with the same algorithm, bit for bit
 * (the direct kernel adds the bias before its one rounding; the other
 * paths are the float32 op between casts). */
static void
check_conv(const conv_case *c, cg_dtype dt, int which)
{
    int nd = c->one_d ? 3 : 4;
    int64_t bs = c->transposed ? c->w[1] * c->o.groups : c->w[0];
    cg_tensor *in[3];

    ck_assert_int_eq(setenv("CLGRAD_CONV_ALGO", c->algo, 1), 0);
    in[0] = values(nd, c->x, 0.731, 0.3, 3.0);
    in[1] = values(nd, c->w, 0.277, 1.3, 0.8);
    in[2] = c->bias ? values(1, &bs, 0.9, 0.1, 2.0) : NULL;
    check_rounded(conv_op, c, 3, in, dt, "conv", which);
    ck_assert_int_eq(unsetenv("CLGRAD_CONV_ALGO"), 0);
}

START_TEST(convolutions_in_16_bits_equal_float32_rounded)
{
    static const conv_case cases[] = {
        /* plain, 3x3 pad 1, rows not a multiple of 8 */
        { { 2, 3, 7, 11 }, { 5, 3, 3, 3 }, { { 1, 1 }, { 1, 1 }, { 1, 1 },
          1, 0 }, 0, 0, 0, "direct" },
        /* bias, stride 2, dilation, 4 output channels per block */
        { { 2, 4, 9, 13 }, { 8, 4, 3, 2 }, { { 2, 2 }, { 1, 0 }, { 2, 1 },
          1, 0 }, 1, 0, 0, "direct" },
        /* grouped, 17-wide rows (a vector and a tail) */
        { { 1, 6, 5, 17 }, { 4, 3, 1, 3 }, { { 1, 1 }, { 0, 1 }, { 1, 1 },
          2, 0 }, 1, 0, 0, "direct" },
        /* depthwise */
        { { 2, 5, 6, 9 }, { 5, 1, 3, 3 }, { { 1, 1 }, { 1, 1 }, { 1, 1 },
          5, 0 }, 1, 0, 0, "direct" },
        /* im2col asked for: the float32 op between casts */
        { { 2, 3, 7, 11 }, { 5, 3, 3, 3 }, { { 1, 2 }, { 1, 1 }, { 1, 1 },
          1, 0 }, 1, 0, 0, "im2col" },
        /* conv_transpose2d: the direct kernels in 16 bits */
        { { 2, 4, 5, 6 }, { 4, 3, 3, 3 }, { { 2, 2 }, { 1, 1 }, { 1, 1 },
          1, 0 }, 1, 1, 0, "direct" },
        /* depthwise, dilation 2 at stride 1 */
        { { 2, 5, 6, 9 }, { 5, 1, 3, 3 }, { { 1, 1 }, { 1, 1 }, { 2, 2 },
          5, 0 }, 1, 1, 0, "direct" },
        /* grouped, im2col asked for: the float32 op between casts */
        { { 2, 4, 5, 6 }, { 4, 3, 3, 3 }, { { 2, 2 }, { 1, 1 }, { 1, 1 },
          2, 0 }, 1, 1, 0, "im2col" },
        /* conv1d */
        { { 3, 4, 19, 0 }, { 6, 4, 5, 0 }, { { 2, 0 }, { 2, 0 }, { 1, 0 },
          1, 0 }, 1, 0, 1, "direct" },
        /* the default choice, float32's: im2col between casts, and direct
         * in 16 bits for depthwise */
        { { 2, 3, 7, 11 }, { 5, 3, 3, 3 }, { { 1, 1 }, { 1, 1 }, { 1, 1 },
          1, 0 }, 1, 0, 0, "auto" },
        { { 2, 5, 6, 9 }, { 5, 1, 3, 3 }, { { 1, 1 }, { 1, 1 }, { 1, 1 },
          5, 0 }, 1, 0, 0, "auto" },
    };
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_conv(&cases[i], _i ? CG_BF16 : CG_F16, (int)i);
}
END_TEST

static Suite *
half_cnn_suite(void)
{
    Suite *s = suite_create("half_cnn");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 0);
    tcase_add_loop_test(tc, pooling_in_16_bits_equals_float32_rounded, 0,
                        TT_NDTYPES);
    tcase_add_loop_test(tc, convolutions_in_16_bits_equal_float32_rounded, 0,
                        TT_NDTYPES);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tt_run(half_cnn_suite());
}
