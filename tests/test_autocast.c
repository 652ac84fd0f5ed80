/* SPDX-License-Identifier: MIT */
/*
 * tests/test_autocast.c - cg_autocast_begin / cg_autocast_end: the
 * regions (nesting, CG_F32 regions, errors that change nothing), the
 * float32 list casting 16-bit arguments up (results equal to the float32
 * op on the cast-up input, bit for bit, and gradients reaching float32
 * leaves), and that nothing changes outside a region.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/internal.h"
#include "ops/internal.h"
#include "testutil.h"


static cg_tensor *
fill(int ndim, const int64_t *shape, double a, double b)
{
    float v[4096];
    int64_t n = 1;
    int d, i;
    cg_tensor *t;

    for (d = 0; d < ndim; d++)
        n *= shape[d];
    ck_assert(n <= 4096);
    for (i = 0; i < n; i++)
        v[i] = (float)(sin(a * i + b) * 2.5 + 0.01 * i);
    t = cg_tensor_from_host(tt_ctx(), CG_F32, ndim, shape, v);
    ck_assert_msg(t != NULL, "%s", TT_ERR);
    return t;
}

static void
read_all(const cg_tensor *t, void *dst, size_t bytes)
{
    ck_assert_msg(cg_tensor_to_host(t, dst, bytes) == CG_OK, "%s", TT_ERR);
}

START_TEST(regions_nest_and_errors_change_nothing)
{
    cg_context *ctx = tt_ctx();
    int i;

    ck_assert_int_eq(cg_autocast_dtype(ctx), CG_F32);
    ck_assert_int_eq(cg_autocast_dtype(NULL), CG_F32);
    ck_assert_int_eq(cg_autocast_end(ctx), CG_EINVAL);
    ck_assert_ptr_nonnull(strstr(TT_ERR, "no autocast region"));
    ck_assert_int_eq(cg_autocast_begin(ctx, CG_I32), CG_EDTYPE);
    ck_assert_ptr_nonnull(strstr(TT_ERR, "int32"));
    ck_assert_int_eq(cg_autocast_begin(NULL, CG_BF16), CG_EINVAL);
    ck_assert_int_eq(cg_autocast_dtype(ctx), CG_F32);
    ck_assert_int_eq(cg_autocast_begin(ctx, CG_BF16), CG_OK);
    ck_assert_int_eq(cg_autocast_dtype(ctx), CG_BF16);
    ck_assert_int_eq(cg_autocast_begin(ctx, CG_F32), CG_OK);
    ck_assert_int_eq(cg_autocast_dtype(ctx), CG_F32);
    ck_assert_int_eq(cg_autocast_begin(ctx, CG_F16), CG_OK);
    ck_assert_int_eq(cg_autocast_dtype(ctx), CG_F16);
    for (i = 3; i < 16; i++)
        ck_assert_int_eq(cg_autocast_begin(ctx, CG_BF16), CG_OK);
    ck_assert_int_eq(cg_autocast_begin(ctx, CG_F16), CG_EINVAL);
    ck_assert_int_eq(cg_autocast_dtype(ctx), CG_BF16);
    for (i = 3; i < 16; i++)
        ck_assert_int_eq(cg_autocast_end(ctx), CG_OK);
    ck_assert_int_eq(cg_autocast_dtype(ctx), CG_F16);
    ck_assert_int_eq(cg_autocast_end(ctx), CG_OK);
    ck_assert_int_eq(cg_autocast_dtype(ctx), CG_F32);
    ck_assert_int_eq(cg_autocast_end(ctx), CG_OK);
    ck_assert_int_eq(cg_autocast_dtype(ctx), CG_BF16);
    ck_assert_int_eq(cg_autocast_end(ctx), CG_OK);
    ck_assert_int_eq(cg_autocast_dtype(ctx), CG_F32);
    ck_assert_int_eq(cg_autocast_end(ctx), CG_EINVAL);
}
END_TEST

/* Under autocast, the float32 list casts a 16-bit argument up: the
 * result is float32 and equals the op on the cast-up input, bit for bit
 * (the same float32 kernels on the same values).  Float32 arguments are
 * left alone. */
START_TEST(float32_list_casts_16_bit_arguments_up)
{
    cg_context *ctx = tt_ctx();
    cg_dtype dt = _i ? CG_BF16 : CG_F16;
    int64_t s[2] = { 7, 13 }, n7 = 7;
    int32_t tgt[7] = { 0, 12, 3, 5, 5, 1, 9 };
    float got[91], want[91];
    int axis = 1, k;
    cg_tensor *x = fill(2, s, 0.37, 0.2), *w = fill(1, s + 1, 0.9, 1.0);
    cg_tensor *h = cg_to_dtype(x, dt), *hf = cg_to_dtype(h, CG_F32);
    cg_tensor *t = cg_tensor_from_host(ctx, CG_I32, 1, &n7, tgt);
    cg_tensor *y[8], *r[8];

    ck_assert(h && hf && t);
    ck_assert_int_eq(cg_autocast_begin(ctx, dt), CG_OK);
    y[0] = cg_softmax(h, 1);
    y[1] = cg_log_softmax(h, 0);
    y[2] = cg_sum(h, 1, &axis, 0);
    y[3] = cg_mean(h, 0, NULL, 0);
    y[4] = cg_var(h, 1, &axis, 1, 1);
    y[5] = cg_cross_entropy(h, t, CG_REDUCTION_MEAN, -100, 0.1f);
    y[6] = cg_mse_loss(h, x, CG_REDUCTION_SUM);
    y[7] = cg_layer_norm(h, 1, s + 1, w, NULL, 1e-5f);
    ck_assert_int_eq(cg_autocast_end(ctx), CG_OK);
    r[0] = cg_softmax(hf, 1);
    r[1] = cg_log_softmax(hf, 0);
    r[2] = cg_sum(hf, 1, &axis, 0);
    r[3] = cg_mean(hf, 0, NULL, 0);
    r[4] = cg_var(hf, 1, &axis, 1, 1);
    r[5] = cg_cross_entropy(hf, t, CG_REDUCTION_MEAN, -100, 0.1f);
    r[6] = cg_mse_loss(hf, x, CG_REDUCTION_SUM);
    r[7] = cg_layer_norm(hf, 1, s + 1, w, NULL, 1e-5f);
    for (k = 0; k < 8; k++) {
        int64_t n;

        ck_assert_msg(y[k] != NULL, "op %d: %s", k, TT_ERR);
        ck_assert_msg(r[k] != NULL, "op %d: %s", k, TT_ERR);
        ck_assert_int_eq(cg_tensor_dtype(y[k]), CG_F32);
        n = cg_tensor_numel(y[k]);
        ck_assert_int_eq(n, cg_tensor_numel(r[k]));
        read_all(y[k], got, (size_t)n * 4);
        read_all(r[k], want, (size_t)n * 4);
        ck_assert_msg(memcmp(got, want, (size_t)n * 4) == 0, "op %d", k);
        cg_tensor_free(y[k]);
        cg_tensor_free(r[k]);
    }
    /* A float32 argument is not cast: the very same tensor goes in. */
    ck_assert_int_eq(cg_autocast_begin(ctx, dt), CG_OK);
    y[0] = cg_softmax(x, 1);
    ck_assert_int_eq(cg_autocast_end(ctx), CG_OK);
    r[0] = cg_softmax(x, 1);
    read_all(y[0], got, sizeof got);
    read_all(r[0], want, sizeof want);
    ck_assert(memcmp(got, want, sizeof got) == 0);
    cg_tensor_free(y[0]); cg_tensor_free(r[0]);
    cg_tensor_free(x); cg_tensor_free(w); cg_tensor_free(h);
    cg_tensor_free(hf); cg_tensor_free(t);
}
END_TEST

/* The casts autocast makes are recorded: the gradient of a float32 leaf
 * through 16 bits and an autocast log_softmax equals the one without
 * autocast through an explicit cast up. */
START_TEST(gradients_flow_through_autocast_casts)
{
    cg_context *ctx = tt_ctx();
    cg_dtype dt = _i ? CG_BF16 : CG_F16;
    int64_t s[2] = { 5, 9 };
    float g1[45], g2[45];
    cg_tensor *x = fill(2, s, 0.61, 0.4), *w = fill(2, s, 0.17, 2.0);
    cg_tensor *h, *y, *p, *l, *hf;
    int pass;

    ck_assert_int_eq(cg_tensor_set_requires_grad(x, 1), CG_OK);
    for (pass = 0; pass < 2; pass++) {
        h = cg_to_dtype(x, dt);
        if (pass == 0) {
            ck_assert_int_eq(cg_autocast_begin(ctx, dt), CG_OK);
            y = cg_log_softmax(h, 1);
            ck_assert_int_eq(cg_autocast_end(ctx), CG_OK);
            hf = NULL;
        } else {
            hf = cg_to_dtype(h, CG_F32);
            y = cg_log_softmax(hf, 1);
        }
        ck_assert_msg(y != NULL, "%s", TT_ERR);
        p = cg_mul(y, w);
        l = cg_sum(p, 0, NULL, 0);
        ck_assert_msg(cg_backward(l, NULL, 0) == CG_OK, "%s", TT_ERR);
        read_all(cg_tensor_grad(x), pass ? g2 : g1, sizeof g1);
        ck_assert_int_eq(cg_tensor_zero_grad(x), CG_OK);
        cg_tensor_free(h); cg_tensor_free(y); cg_tensor_free(p);
        cg_tensor_free(l); cg_tensor_free(hf);
    }
    ck_assert(memcmp(g1, g2, sizeof g1) == 0);
    cg_tensor_free(x);
    cg_tensor_free(w);
}
END_TEST

/* Outside a region (and in a CG_F32 region) a 16-bit argument reaches
 * the op as it is: the op's own dtype rules apply. */
START_TEST(nothing_is_cast_outside_a_region)
{
    cg_context *ctx = tt_ctx();
    int64_t s[2] = { 3, 4 };
    cg_tensor *x = fill(2, s, 0.5, 0.0), *h = cg_to_dtype(x, CG_BF16);
    cg_tensor *y;

    ck_assert_ptr_nonnull(h);
    y = cg_softmax(h, 1);
    ck_assert(!y || cg_tensor_dtype(y) == CG_BF16);
    cg_tensor_free(y);
    ck_assert_int_eq(cg_autocast_begin(ctx, CG_BF16), CG_OK);
    ck_assert_int_eq(cg_autocast_begin(ctx, CG_F32), CG_OK);
    y = cg_softmax(h, 1);
    ck_assert(!y || cg_tensor_dtype(y) == CG_BF16);
    cg_tensor_free(y);
    ck_assert_int_eq(cg_autocast_end(ctx), CG_OK);
    ck_assert_int_eq(cg_autocast_end(ctx), CG_OK);
    cg_tensor_free(x);
    cg_tensor_free(h);
}
END_TEST

static uint64_t
launched(void)
{
    cg_memory_stats st;

    ck_assert_int_eq(cg_context_stats(tt_ctx(), &st), CG_OK);
    return st.kernels_enqueued;
}

/* One step of a two-convolution net under autocast (or, ref, with the
 * same casts written out): loss = sum(conv(x1, w, b)) + sum(conv(x2, w,
 * b)) * 0.5, backward after the region; the gradients of w and b into
 * gw, gb.  k[0], k[1]: kernels each convolution call enqueued.  (The
 * sums cast the 16-bit outputs up: they are on autocast's float32
 * list.) */
static void
conv_step(int ref, cg_dtype dt, cg_tensor *x1, cg_tensor *x2, cg_tensor *w,
          cg_tensor *b, float *gw, size_t nw, float *gb, size_t nb,
          uint64_t *k)
{
    cg_context *ctx = tt_ctx();
    cg_conv_options o = { { 1, 1 }, { 1, 1 }, { 1, 1 }, 1, 0 };
    cg_tensor *y1, *y2, *l1, *l2, *h, *l, *c[5] = { 0 };
    uint64_t k0;

    if (!ref)
        ck_assert_int_eq(cg_autocast_begin(ctx, dt), CG_OK);
    k0 = launched();
    if (ref) {
        c[0] = cg_to_dtype(x1, dt);
        c[1] = cg_to_dtype(w, dt);
        c[2] = cg_to_dtype(b, dt);
        y1 = cg_conv2d(c[0], c[1], c[2], &o);
    } else {
        y1 = cg_conv2d(x1, w, b, &o);
    }
    k[0] = launched() - k0;
    k0 = launched();
    if (ref) {
        c[3] = cg_to_dtype(x2, dt);
        y2 = cg_conv2d(c[3], c[1], c[2], &o);
    } else {
        y2 = cg_conv2d(x2, w, b, &o);
    }
    k[1] = launched() - k0;
    ck_assert_msg(y1 && y2, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_dtype(y1), dt);
    if (ref) {
        c[4] = cg_to_dtype(y1, CG_F32);
        l1 = cg_sum(c[4], 0, NULL, 0);
        cg_tensor_free(c[4]);
        c[4] = cg_to_dtype(y2, CG_F32);
        h = cg_sum(c[4], 0, NULL, 0);
    } else {
        l1 = cg_sum(y1, 0, NULL, 0);
        h = cg_sum(y2, 0, NULL, 0);
    }
    l2 = cg_mul_scalar(h, 0.5f);
    l = cg_add(l1, l2);
    ck_assert_msg(l != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_dtype(l), CG_F32);
    if (!ref)
        ck_assert_int_eq(cg_autocast_end(ctx), CG_OK);
    ck_assert_msg(cg_backward(l, NULL, 0) == CG_OK, "%s", TT_ERR);
    read_all(cg_tensor_grad(w), gw, nw * 4);
    read_all(cg_tensor_grad(b), gb, nb * 4);
    ck_assert_int_eq(cg_tensor_zero_grad(w), CG_OK);
    ck_assert_int_eq(cg_tensor_zero_grad(b), CG_OK);
    cg_tensor_free(y1); cg_tensor_free(y2); cg_tensor_free(l1);
    cg_tensor_free(l2); cg_tensor_free(h); cg_tensor_free(l);
    for (k0 = 0; k0 < 5; k0++)
        cg_tensor_free(c[k0]);
}

/* A product runs in the region's dtype; a parameter used twice is cast
 * once (the second call enqueues two casts fewer: the weight's and the
 * bias's), and its float32 gradient is what explicit casts give. */
START_TEST(products_run_low_and_parameters_are_cast_once)
{
    cg_dtype dt = _i ? CG_BF16 : CG_F16;
    int64_t sx[4] = { 2, 3, 7, 9 }, sw[4] = { 4, 3, 3, 3 }, sb = 4;
    float gw[108], gb[4], rw[108], rb[4];
    uint64_t k[2], kr[2];
    cg_tensor *x1 = fill(4, sx, 0.31, 0.2), *x2 = fill(4, sx, 0.53, 1.0);
    cg_tensor *w = fill(4, sw, 0.77, 0.5), *b = fill(1, &sb, 1.3, 0.1);

    ck_assert_int_eq(cg_tensor_set_requires_grad(w, 1), CG_OK);
    ck_assert_int_eq(cg_tensor_set_requires_grad(b, 1), CG_OK);
    conv_step(0, dt, x1, x2, w, b, gw, 108, gb, 4, k);
    conv_step(1, dt, x1, x2, w, b, rw, 108, rb, 4, kr);
    ck_assert(memcmp(gw, rw, sizeof gw) == 0);
    ck_assert(memcmp(gb, rb, sizeof gb) == 0);
    ck_assert_msg(k[0] == k[1] + 2, "first call %llu kernels, second %llu",
                  (unsigned long long)k[0], (unsigned long long)k[1]);
    ck_assert(kr[0] == k[0] && kr[1] == k[1]);
    /* A new region casts again; so does one whose casts a backward pass
     * has released (the same gradients both times). */
    conv_step(0, dt, x1, x2, w, b, rw, 108, rb, 4, kr);
    ck_assert(kr[0] == k[0] && kr[1] == k[1]);
    ck_assert(memcmp(gw, rw, sizeof gw) == 0);
    cg_tensor_free(x1); cg_tensor_free(x2); cg_tensor_free(w);
    cg_tensor_free(b);
}
END_TEST

/* Casts kept by a region do not outlive it once a backward pass has run
 * inside it: the next forward in the same region casts again and its
 * gradients are right. */
START_TEST(kept_casts_released_by_backward_are_made_again)
{
    cg_context *ctx = tt_ctx();
    cg_conv_options o = { { 1, 1 }, { 0, 0 }, { 1, 1 }, 1, 0 };
    int64_t sx[4] = { 1, 2, 5, 6 }, sw[4] = { 3, 2, 2, 2 };
    cg_tensor *x = fill(4, sx, 0.41, 0.7), *w = fill(4, sw, 0.29, 0.3);
    cg_tensor *y, *l;
    float g1[24], g2[24];
    int pass;

    ck_assert_int_eq(cg_tensor_set_requires_grad(w, 1), CG_OK);
    ck_assert_int_eq(cg_autocast_begin(ctx, CG_BF16), CG_OK);
    for (pass = 0; pass < 2; pass++) {
        y = cg_conv2d(x, w, NULL, &o);
        l = cg_sum(y, 0, NULL, 0);
        ck_assert_msg(l && cg_backward(l, NULL, 0) == CG_OK, "%s", TT_ERR);
        read_all(cg_tensor_grad(w), pass ? g2 : g1, sizeof g1);
        ck_assert_int_eq(cg_tensor_zero_grad(w), CG_OK);
        cg_tensor_free(y);
        cg_tensor_free(l);
    }
    ck_assert_int_eq(cg_autocast_end(ctx), CG_OK);
    ck_assert(memcmp(g1, g2, sizeof g1) == 0);
    ck_assert(g1[0] != 0.0f);
    cg_tensor_free(x);
    cg_tensor_free(w);
}
END_TEST

static Suite *
autocast_suite(void)
{
    Suite *s = suite_create("autocast");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 0);
    tcase_add_test(tc, regions_nest_and_errors_change_nothing);
    tcase_add_loop_test(tc, float32_list_casts_16_bit_arguments_up, 0, 2);
    tcase_add_loop_test(tc, gradients_flow_through_autocast_casts, 0, 2);
    tcase_add_test(tc, nothing_is_cast_outside_a_region);
    tcase_add_loop_test(tc, products_run_low_and_parameters_are_cast_once, 0,
                        2);
    tcase_add_test(tc, kept_casts_released_by_backward_are_made_again);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tt_run(autocast_suite());
}
