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
#include <stdint.h>
#include <string.h>

#include "core/internal.h"
#include "ops/internal.h"
#include "testutil.h"

typedef cg_tensor *(*op1_fn)(cg_tensor *x, int which);

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

/* y = op(dt(x)) against dt(op(float(dt(x)))), and the gradients of x
 * through loss = sum(float(y) * w) against the float32 op's gradients of
 * float(dt(x)) for the gradient float(dt(w)), rounded to dt. */
static void
check_op(op1_fn op, int which, cg_dtype dt, int ndim, const int64_t *shape,
         const char *what)
{
    cg_tensor *x = values(ndim, shape, 0.731, 0.3, 3.0), *h, *hf, *y, *yf;
    cg_tensor *r, *rr, *w, *wr, *p, *l, *gx, *gr;

    ck_assert_int_eq(cg_tensor_set_requires_grad(x, 1), CG_OK);
    h = cast(x, dt);
    y = op(h, which);
    ck_assert_msg(y != NULL, "%s case %d: %s", what, which, TT_ERR);
    ck_assert_int_eq(cg_tensor_dtype(y), dt);
    /* The reference: float32 on the same values. */
    cg_no_grad_enter();
    hf = cast(h, CG_F32);
    cg_no_grad_leave();
    ck_assert_int_eq(cg_tensor_set_requires_grad(hf, 1), CG_OK);
    r = op(hf, which);
    ck_assert_msg(r != NULL, "%s case %d: %s", what, which, TT_ERR);
    cg_no_grad_enter();
    rr = cast(r, dt);
    cg_no_grad_leave();
    same_bits(y, rr, what, which);
    /* Gradients. */
    {
        int64_t sy[CG_MAX_DIMS];
        int nd = cg_tensor_ndim(y);

        cg_tensor_shape(y, sy);
        w = values(nd, sy, 0.377, 1.1, 1.7);
    }
    yf = cast(y, CG_F32);
    p = cg_mul(yf, w);
    l = cg_sum(p, 0, NULL, 0);
    ck_assert_msg(l && cg_backward(l, NULL, 0) == CG_OK, "%s", TT_ERR);
    cg_tensor_free(p);
    cg_tensor_free(l);
    cg_no_grad_enter();
    wr = cast(w, dt);
    cg_tensor_free(w);
    w = cast(wr, CG_F32);
    cg_no_grad_leave();
    p = cg_mul(r, w);
    l = cg_sum(p, 0, NULL, 0);
    ck_assert_msg(l && cg_backward(l, NULL, 0) == CG_OK, "%s", TT_ERR);
    cg_no_grad_enter();
    gr = cast(cg_tensor_grad(hf), dt);
    cg_no_grad_leave();
    gx = cg_tensor_grad(x);
    ck_assert_ptr_nonnull(gx);
    same_bits(gx, gr, what, which);
    cg_tensor_free(x); cg_tensor_free(h); cg_tensor_free(hf);
    cg_tensor_free(y); cg_tensor_free(yf); cg_tensor_free(r);
    cg_tensor_free(rr); cg_tensor_free(w); cg_tensor_free(wr);
    cg_tensor_free(p); cg_tensor_free(l); cg_tensor_free(gr);
}

static cg_tensor *
pool_op(cg_tensor *x, int which)
{
    static const int k3[2] = { 3, 2 }, s2[2] = { 2, 1 }, p1[2] = { 1, 0 };
    static const int d2[2] = { 2, 1 }, k2[2] = { 2, 2 };

    switch (which) {
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

    for (which = 0; which < 5; which++)
        check_op(pool_op, which, _i ? CG_BF16 : CG_F16, 4, s, "pool");
}
END_TEST

static Suite *
half_cnn_suite(void)
{
    Suite *s = suite_create("half_cnn");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 0);
    tcase_add_loop_test(tc, pooling_in_16_bits_equals_float32_rounded, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tt_run(half_cnn_suite());
}
