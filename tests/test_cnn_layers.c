/* SPDX-License-Identifier: MIT */
/*
 * tests/test_cnn_layers.c - the layers around convolutions: BatchNorm1d/2d
 * (PyTorch's initial values; training mode updates the running statistics
 * and the count exactly as cg_batch_norm does, eval mode uses them; state
 * in checkpoints, the count as I64), MaxPool2d, AvgPool2d and
 * AdaptiveAvgPool2d layers (the ops' results), ConvTranspose2d (PyTorch's
 * names, shapes and initial bounds; the op's result), flatten (a view, its gradient, its errors), and I64
 * checkpoint entries (saved, loaded, kept on the host, refused as device
 * tensors; a negative or malformed count restores nothing), and a small
 * CNN's training-mode forward, loss, running statistics and every
 * gradient against PyTorch 1.13 (tests/fixtures/cnn.txt, written by
 * gen_cnn.py), each within 1e-5 of the tensor's largest value.  The ops
 * themselves are proven in test_batch_norm, test_pooling and test_conv.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"    /* cg__last_status */
#include "fixture.h"
#include "testutil.h"

static cg_tensor *
ramp(int ndim, const int64_t *shape, double a, double b)
{
    int64_t n = 1, i;
    float *v;
    cg_tensor *t;
    int d;

    for (d = 0; d < ndim; d++)
        n *= shape[d];
    v = malloc((size_t)n * sizeof *v);
    for (i = 0; i < n; i++)
        v[i] = (float)(sin(a * (double)i + b) * 2.0 + 0.3);
    t = cg_tensor_from_host(tt_ctx(), CG_F32, ndim, shape, v);
    free(v);
    ck_assert_msg(t != NULL, "%s", TT_ERR);
    return t;
}

static float *
host(const cg_tensor *t)
{
    size_t n = (size_t)cg_tensor_numel(t);
    float *v = malloc(n * sizeof *v);

    ck_assert_int_eq(cg_tensor_to_host(t, v, n * sizeof *v), CG_OK);
    return v;
}

static void
assert_same(const cg_tensor *a, const cg_tensor *b)
{
    float *x = host(a), *y = host(b);

    ck_assert_int_eq(cg_tensor_numel(a), cg_tensor_numel(b));
    ck_assert_msg(memcmp(x, y, (size_t)cg_tensor_numel(a) * 4) == 0,
                  "tensors differ");
    free(x);
    free(y);
}

START_TEST(batch_norm_layer_keeps_pytorchs_state)
{
    cg_context *ctx = tt_ctx();
    int64_t xs[4] = { 3, 5, 4, 3 }, c = 5, count = -1;
    cg_module *m = cg_batch_norm2d_new(ctx, 5, 1e-5f, 0.1f, 1, 1);
    cg_tensor *rm, *rv, *m2, *v2, *x, *y, *y2, *w, *b;
    const char *name;
    float *h;
    int i, k;

    ck_assert_msg(m != NULL, "%s", TT_ERR);
    ck_assert_str_eq(cg_module_kind(m), "batch_norm2d");
    ck_assert_int_eq(cg_module_num_params(m), 2);
    w = cg_module_param(m, 0, &name);
    ck_assert_str_eq(name, "weight");
    b = cg_module_param(m, 1, &name);
    ck_assert_str_eq(name, "bias");
    ck_assert_int_eq(cg_batch_norm_stats(m, &rm, &rv, &count), CG_OK);
    ck_assert_int_eq(count, 0);
    h = host(w);
    for (i = 0; i < 5; i++)
        ck_assert(h[i] == 1.0f);
    free(h);
    h = host(rv);
    for (i = 0; i < 5; i++)
        ck_assert(h[i] == 1.0f);
    free(h);
    h = host(rm);
    for (i = 0; i < 5; i++)
        ck_assert(h[i] == 0.0f);
    free(h);

    /* Training: the op's result and running statistics, bit for bit, and
     * the count goes up once per forward. */
    m2 = cg_zeros(ctx, 1, &c);
    v2 = cg_ones(ctx, 1, &c);
    for (k = 0; k < 3; k++) {
        x = ramp(4, xs, 0.31, k);
        y = cg_batch_norm_forward(m, x);
        ck_assert_msg(y != NULL, "%s", TT_ERR);
        y2 = cg_batch_norm(x, m2, v2, w, b, 1, 0.1f, 1e-5f);
        ck_assert_msg(y2 != NULL, "%s", TT_ERR);
        assert_same(y, y2);
        cg_tensor_free(x);
        cg_tensor_free(y);
        cg_tensor_free(y2);
    }
    assert_same(rm, m2);
    assert_same(rv, v2);
    ck_assert_int_eq(cg_batch_norm_stats(m, NULL, NULL, &count), CG_OK);
    ck_assert_int_eq(count, 3);

    /* Eval: the running statistics, unchanged; the count stays. */
    ck_assert_int_eq(cg_module_set_training(m, 0), CG_OK);
    x = ramp(4, xs, 0.17, 0.5);
    y = cg_module_forward(m, x);
    ck_assert_msg(y != NULL, "%s", TT_ERR);
    y2 = cg_batch_norm(x, m2, v2, w, b, 0, 0.1f, 1e-5f);
    assert_same(y, y2);
    assert_same(rm, m2);
    ck_assert_int_eq(cg_batch_norm_stats(m, NULL, NULL, &count), CG_OK);
    ck_assert_int_eq(count, 3);
    cg_tensor_free(y);
    cg_tensor_free(y2);

    /* A wrong rank, and the 1-D layer on [N, C] and [N, C, L]. */
    {
        int64_t s2[2] = { 4, 5 }, s3[3] = { 2, 5, 3 };
        cg_module *m1 = cg_batch_norm1d_new(ctx, 5, 1e-3f, 0.5f, 0, 1);
        cg_tensor *x2 = ramp(2, s2, 0.4, 0), *x3 = ramp(3, s3, 0.4, 1);

        ck_assert_ptr_null(cg_batch_norm_forward(m, x2));
        ck_assert_int_eq(cg__last_status(), CG_ESHAPE);
        ck_assert_ptr_nonnull(strstr(TT_ERR, "4-D"));
        ck_assert_msg(m1 != NULL, "%s", TT_ERR);
        ck_assert_int_eq(cg_module_num_params(m1), 0);
        y = cg_batch_norm_forward(m1, x2);
        ck_assert_msg(y != NULL, "%s", TT_ERR);
        cg_tensor_free(y);
        y = cg_batch_norm_forward(m1, x3);
        ck_assert_msg(y != NULL, "%s", TT_ERR);
        cg_tensor_free(y);
        ck_assert_ptr_null(cg_batch_norm_forward(m1, x));
        ck_assert_int_eq(cg__last_status(), CG_ESHAPE);
        ck_assert_int_eq(cg_batch_norm_stats(m1, NULL, NULL, &count),
                         CG_OK);
        ck_assert_int_eq(count, 2);
        cg_tensor_free(x2);
        cg_tensor_free(x3);
        cg_module_free(m1);
    }
    /* Without running statistics: the batch's, in eval mode too. */
    {
        cg_module *n = cg_batch_norm2d_new(ctx, 5, 1e-5f, 0.1f, 1, 0);

        ck_assert_msg(n != NULL, "%s", TT_ERR);
        ck_assert_int_eq(cg_module_set_training(n, 0), CG_OK);
        y = cg_batch_norm_forward(n, x);
        y2 = cg_batch_norm(x, NULL, NULL, NULL, NULL, 1, 0.1f, 1e-5f);
        ck_assert(y && y2);
        assert_same(y, y2);
        ck_assert_int_eq(cg_batch_norm_stats(n, NULL, NULL, NULL),
                         CG_EINVAL);
        cg_tensor_free(y);
        cg_tensor_free(y2);
        cg_module_free(n);
    }
    ck_assert_ptr_null(cg_batch_norm2d_new(ctx, 0, 1e-5f, 0.1f, 1, 1));
    ck_assert_int_eq(cg__last_status(), CG_EINVAL);
    ck_assert_ptr_null(cg_batch_norm2d_new(ctx, 3, -1.0f, 0.1f, 1, 1));
    ck_assert_ptr_null(cg_batch_norm2d_new(ctx, 3, 1e-5f, 1.5f, 1, 1));
    ck_assert_ptr_null(cg_batch_norm2d_new(ctx, 3, 1e-5f, NAN, 1, 1));
    ck_assert_ptr_null(cg_batch_norm2d_new(NULL, 3, 1e-5f, 0.1f, 1, 1));
    ck_assert_int_eq(cg_batch_norm_stats(NULL, NULL, NULL, NULL),
                     CG_EINVAL);
    cg_tensor_free(x);
    cg_tensor_free(m2);
    cg_tensor_free(v2);
    cg_module_free(m);
}
END_TEST

START_TEST(batch_norm_state_travels_in_checkpoints)
{
    cg_context *ctx = tt_ctx();
    int64_t xs[4] = { 4, 3, 2, 5 }, count, one = 1, neg = -2;
    cg_module *seq = cg_sequential_new(ctx), *a, *b;
    cg_checkpoint *ck = cg_checkpoint_new(), *back;
    cg_tensor *x, *y, *rm_a, *rm_b, *rv_a, *rv_b;
    cg_dtype dt;
    int nd, k;
    char path[512];
    const int64_t *cnt;
    size_t bytes;
    float *before;

    ck_assert_int_eq(cg_module_add(seq, "bn", cg_batch_norm2d_new(ctx, 3,
                                   1e-5f, 0.1f, 1, 1)), CG_OK);
    a = cg_module_child(seq, 0, NULL);
    for (k = 0; k < 2; k++) {
        x = ramp(4, xs, 0.23, k);
        y = cg_module_forward(seq, x);
        ck_assert_msg(y != NULL, "%s", TT_ERR);
        cg_tensor_free(x);
        cg_tensor_free(y);
    }
    ck_assert_int_eq(cg_checkpoint_add_module(ck, "m.", seq), CG_OK);
    ck_assert_int_eq(cg_checkpoint_num_tensors(ck), 5);
    ck_assert_int_eq(cg_checkpoint_tensor_info(ck, "m.bn.num_batches_tracked",
                                               &dt, &nd, NULL), CG_OK);
    ck_assert_int_eq(dt, CG_I64);
    ck_assert_int_eq(nd, 0);
    ck_assert_int_eq(cg_checkpoint_tensor_info(ck, "m.bn.running_var", &dt,
                                               &nd, NULL), CG_OK);
    ck_assert_int_eq(dt, CG_F32);
    snprintf(path, sizeof path, "%s/bn.safetensors", tt_tmpdir());
    ck_assert_msg(cg_checkpoint_save(ck, path) == CG_OK, "%s", TT_ERR);
    back = cg_checkpoint_load(path);
    ck_assert_msg(back != NULL, "%s", TT_ERR);
    cnt = cg_checkpoint_tensor_data(back, "m.bn.num_batches_tracked", &bytes);
    ck_assert(cnt && bytes == 8 && *cnt == 2);
    /* I64 stays on the host. */
    ck_assert_ptr_null(cg_checkpoint_tensor(back, ctx,
                                            "m.bn.num_batches_tracked"));
    ck_assert_int_eq(cg__last_status(), CG_EDTYPE);

    b = cg_batch_norm2d_new(ctx, 3, 1e-5f, 0.1f, 1, 1);
    ck_assert_msg(b != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_batch_norm_stats(a, &rm_a, &rv_a, NULL), CG_OK);
    ck_assert_int_eq(cg_batch_norm_stats(b, &rm_b, &rv_b, NULL), CG_OK);
    /* A negative count, an I32 [2] count, a missing buffer: nothing. */
    before = host(rm_b);
    ck_assert_int_eq(cg_checkpoint_add_host(back, "m.bn.num_batches_tracked",
                                            CG_I64, 1, &one, &neg), CG_OK);
    ck_assert_int_eq(cg_checkpoint_restore_module(back, "m.bn.", b),
                     CG_EFORMAT);
    ck_assert_ptr_nonnull(strstr(TT_ERR, "negative"));
    {
        int32_t two[2] = { 1, 1 };
        int64_t s2 = 2;

        ck_assert_int_eq(cg_checkpoint_add_host(back,
                                                "m.bn.num_batches_tracked",
                                                CG_I32, 1, &s2, two), CG_OK);
        ck_assert_int_eq(cg_checkpoint_restore_module(back, "m.bn.", b),
                         CG_EFORMAT);
    }
    ck_assert_int_eq(cg_checkpoint_restore_module(ck, "m.nobn.", b),
                     CG_EFORMAT);
    {
        float *now = host(rm_b);

        ck_assert(memcmp(now, before, 12) == 0);
        free(now);
    }
    ck_assert_int_eq(cg_batch_norm_stats(b, NULL, NULL, &count), CG_OK);
    ck_assert_int_eq(count, 0);
    /* An I32 count of shape [] (as another writer may save it) restores. */
    {
        int32_t seven = 7;

        ck_assert_int_eq(cg_checkpoint_add_host(back,
                                                "m.bn.num_batches_tracked",
                                                CG_I32, 0, NULL, &seven),
                         CG_OK);
        ck_assert_int_eq(cg_checkpoint_restore_module(back, "m.bn.", b),
                         CG_OK);
        ck_assert_int_eq(cg_batch_norm_stats(b, NULL, NULL, &count), CG_OK);
        ck_assert_int_eq(count, 7);
    }
    ck_assert_int_eq(cg_checkpoint_restore_module(ck, "m.bn.", b), CG_OK);
    ck_assert_int_eq(cg_batch_norm_stats(b, NULL, NULL, &count), CG_OK);
    ck_assert_int_eq(count, 2);
    assert_same(rm_a, rm_b);
    assert_same(rv_a, rv_b);
    free(before);
    cg_checkpoint_free(back);
    cg_checkpoint_free(ck);
    cg_module_free(b);
    cg_module_free(seq);
}
END_TEST

START_TEST(pool_layers_are_the_ops)
{
    cg_context *ctx = tt_ctx();
    const int k[2] = { 3, 2 }, st[2] = { 2, 1 }, pad[2] = { 1, 0 };
    const int one[2] = { 1, 1 };
    int64_t xs[4] = { 2, 3, 7, 5 };
    cg_tensor *x = ramp(4, xs, 0.7, 0), *y, *y2;
    cg_module *mp = cg_max_pool2d_new(ctx, k, st, pad);
    cg_module *ap = cg_avg_pool2d_new(ctx, k, NULL, NULL);

    ck_assert_msg(mp && ap, "%s", TT_ERR);
    ck_assert_str_eq(cg_module_kind(mp), "max_pool2d");
    ck_assert_int_eq(cg_module_num_params(mp), 0);
    y = cg_module_forward(mp, x);
    y2 = cg_max_pool2d(x, k, st, pad, one, 0);
    ck_assert_msg(y && y2, "%s", TT_ERR);
    assert_same(y, y2);
    cg_tensor_free(y);
    cg_tensor_free(y2);
    y = cg_module_forward(ap, x);
    y2 = cg_avg_pool2d(x, k, k, NULL, 0, 1, 0);
    ck_assert_msg(y && y2, "%s", TT_ERR);
    assert_same(y, y2);
    cg_tensor_free(y);
    cg_tensor_free(y2);
    {
        const int bad[2] = { 3, 0 }, badpad[2] = { 2, 0 };

        ck_assert_ptr_null(cg_max_pool2d_new(ctx, bad, NULL, NULL));
        ck_assert_int_eq(cg__last_status(), CG_EINVAL);
        ck_assert_ptr_null(cg_max_pool2d_new(ctx, k, bad, NULL));
        ck_assert_ptr_null(cg_avg_pool2d_new(ctx, k, NULL, badpad));
        ck_assert_ptr_nonnull(strstr(TT_ERR, "padding 2x0"));
        ck_assert_ptr_null(cg_avg_pool2d_new(ctx, NULL, NULL, NULL));
    }
    cg_tensor_free(x);
    cg_module_free(mp);
    cg_module_free(ap);
}
END_TEST

START_TEST(conv_transpose2d_and_adaptive_pool_layers)
{
    static const int kernel[2] = { 3, 2 };
    cg_context *ctx = tt_ctx();
    cg_conv_transpose_options o;
    int64_t xs[4] = { 2, 4, 5, 3 }, ws[4];
    cg_tensor *x = ramp(4, xs, 0.41, 0), *y, *y2;
    cg_module *m, *ap;
    const char *name;
    double bound = 1.0 / sqrt(6.0 / 2 * 3 * 2);
    float *w, lo = 1, hi = -1;
    int64_t i, n;

    memset(&o, 0, sizeof o);
    o.stride[0] = o.stride[1] = 2;
    o.padding[0] = 1;
    o.output_padding[1] = 1;
    o.groups = 2;
    m = cg_conv_transpose2d_new(ctx, 4, 6, kernel, 1, &o);
    ck_assert_msg(m != NULL, "%s", TT_ERR);
    ck_assert_str_eq(cg_module_kind(m), "conv_transpose2d");
    ck_assert_int_eq(cg_module_num_params(m), 2);
    ck_assert_ptr_nonnull(cg_module_param(m, 0, &name));
    ck_assert_str_eq(name, "weight");
    cg_tensor_shape(cg_module_param(m, 0, NULL), ws);
    ck_assert(ws[0] == 4 && ws[1] == 3 && ws[2] == 3 && ws[3] == 2);
    ck_assert_ptr_nonnull(cg_module_param(m, 1, &name));
    ck_assert_str_eq(name, "bias");
    ck_assert_int_eq(cg_tensor_numel(cg_module_param(m, 1, NULL)), 6);
    /* PyTorch: fan_in = out / groups * kh * kw = 3 * 3 * 2 */
    w = host(cg_module_param(m, 0, NULL));
    n = cg_tensor_numel(cg_module_param(m, 0, NULL));
    for (i = 0; i < n; i++) {
        ck_assert(fabs(w[i]) <= bound);
        lo = w[i] < lo ? w[i] : lo;
        hi = w[i] > hi ? w[i] : hi;
    }
    ck_assert_msg(hi - lo > bound, "%lld weights span only %g",
                  (long long)n, hi - lo);
    free(w);
    y = cg_module_forward(m, x);
    y2 = cg_conv_transpose2d(x, cg_module_param(m, 0, NULL),
                             cg_module_param(m, 1, NULL), &o);
    ck_assert_msg(y && y2, "%s", TT_ERR);
    assert_same(y, y2);
    cg_tensor_free(y);
    cg_tensor_free(y2);
    ck_assert_ptr_null(cg_conv_transpose2d_new(ctx, 4, 5, kernel, 1, &o));
    ck_assert_int_eq(cg__last_status(), CG_EINVAL);
    o.output_padding[0] = -1;
    ck_assert_ptr_null(cg_conv_transpose2d_new(ctx, 4, 6, kernel, 1, &o));
    ck_assert_ptr_null(cg_conv_transpose2d_new(ctx, 4, 6, NULL, 1, NULL));
    cg_module_free(m);

    ap = cg_adaptive_avg_pool2d_new(ctx, 2, 3);
    ck_assert_msg(ap != NULL, "%s", TT_ERR);
    y = cg_module_forward(ap, x);
    y2 = cg_adaptive_avg_pool2d(x, 2, 3);
    ck_assert_msg(y && y2, "%s", TT_ERR);
    assert_same(y, y2);
    cg_tensor_free(y);
    cg_tensor_free(y2);
    cg_module_free(ap);
    ck_assert_ptr_null(cg_adaptive_avg_pool2d_new(ctx, 0, 3));
    ck_assert_int_eq(cg__last_status(), CG_EINVAL);
    cg_tensor_free(x);
}
END_TEST

START_TEST(conv_algorithm_query_follows_the_environment)
{
    cg_context *ctx = tt_ctx();
    const char *a;

    unsetenv("CLGRAD_CONV_ALGO");
    a = cg_conv2d_algorithm(ctx, 0, 64, 64, 64);
    ck_assert_msg(a && (!strcmp(a, "direct") || !strcmp(a, "im2col")),
                  "%s", a ? a : TT_ERR);
    setenv("CLGRAD_CONV_ALGO", "im2col", 1);
    ck_assert_str_eq(cg_conv2d_algorithm(ctx, 1, 64, 64, 64), "im2col");
    setenv("CLGRAD_CONV_ALGO", "direct", 1);
    ck_assert_str_eq(cg_conv2d_algorithm(ctx, 0, 3, 32, 0), "direct");
    setenv("CLGRAD_CONV_ALGO", "fastest", 1);
    ck_assert_ptr_null(cg_conv2d_algorithm(ctx, 0, 3, 32, 1));
    ck_assert_int_eq(cg__last_status(), CG_EINVAL);
    ck_assert_ptr_nonnull(strstr(TT_ERR, "CLGRAD_CONV_ALGO"));
    unsetenv("CLGRAD_CONV_ALGO");
    ck_assert_ptr_null(cg_conv2d_algorithm(ctx, 0, 3, 32, 2));
    ck_assert_int_eq(cg__last_status(), CG_EINVAL);
    ck_assert_ptr_null(cg_conv2d_algorithm(NULL, 0, 3, 32, 1));
}
END_TEST

/* Device tensor t against fixture tensor `name`: max |t - want| within
 * 1e-5 of max |want|. */
static void
expect_fx(const fx_file *f, const cg_tensor *t, const char *name)
{
    const fx_tensor *want = fx_get(f, name);
    double err = 0, big = 0;
    float *got;
    int64_t i;

    ck_assert_msg(want != NULL, "cnn.txt: no %s", name);
    ck_assert_msg(t != NULL, "%s: no tensor (%s)", name, TT_ERR);
    ck_assert_int_eq(cg_tensor_numel(t), want->numel);
    got = host(t);
    for (i = 0; i < want->numel; i++) {
        double d = fabs((double)got[i] - want->data[i]);

        err = d > err ? d : err;
        big = fabs(want->data[i]) > big ? fabs(want->data[i]) : big;
    }
    free(got);
    printf("cnn fixture %-22s max error %.3g of %.3g\n", name, err, big);
    ck_assert_msg(err <= 1e-5 * big, "%s: error %g, largest %g", name, err,
                  big);
}

START_TEST(cnn_step_matches_pytorch)
{
    cg_context *ctx = tt_ctx();
    const int k3[2] = { 3, 3 }, k2[2] = { 2, 2 };
    cg_conv_options o1, o2;
    cg_module *net = cg_sequential_new(ctx);
    fx_file *f;
    const fx_tensor *xt, *tt;
    cg_tensor *x, *target, *logits, *loss;
    char err[256], name[96];
    int32_t labels[3];
    int i, n;

    f = fx_load_fixture("cnn.txt", err, sizeof err);
    ck_assert_msg(f != NULL, "%s", err);
    memset(&o1, 0, sizeof o1);
    o1.padding[0] = o1.padding[1] = 1;
    o2 = o1;
    o2.groups = 2;
    ck_assert_msg(net &&
                  !cg_module_add(net, NULL, cg_conv2d_new(ctx, 3, 4, k3, 0,
                                                          &o1)) &&
                  !cg_module_add(net, NULL, cg_batch_norm2d_new(ctx, 4, 1e-5f,
                                                                0.1f, 1, 1)) &&
                  !cg_module_add(net, NULL, cg_activation_new(ctx, "relu")) &&
                  !cg_module_add(net, NULL, cg_max_pool2d_new(ctx, k2, NULL,
                                                              NULL)) &&
                  !cg_module_add(net, NULL, cg_conv2d_new(ctx, 4, 6, k3, 0,
                                                          &o2)) &&
                  !cg_module_add(net, NULL, cg_batch_norm2d_new(ctx, 6, 1e-5f,
                                                                0.1f, 1, 1)) &&
                  !cg_module_add(net, NULL, cg_activation_new(ctx, "relu")) &&
                  !cg_module_add(net, NULL, cg_avg_pool2d_new(ctx, k2, NULL,
                                                              NULL)) &&
                  !cg_module_add(net, NULL, cg_flatten_new(ctx, 1, -1)) &&
                  !cg_module_add(net, NULL, cg_linear_new(ctx, 24, 5, 1)),
                  "%s", TT_ERR);
    /* PyTorch's parameters and running statistics, by state-dict name. */
    n = cg_module_num_params(net);
    for (i = 0; i < n; i++) {
        const char *pn;
        cg_tensor *p = cg_module_param(net, i, &pn);
        const fx_tensor *v;

        snprintf(name, sizeof name, "param.%s", pn);
        ck_assert_msg((v = fx_get(f, name)) != NULL, "no %s", name);
        ck_assert_int_eq(cg_tensor_write(p, v->data, (size_t)v->numel * 4),
                         CG_OK);
    }
    for (i = 1; i <= 5; i += 4) {
        cg_tensor *rm, *rv;
        const fx_tensor *m, *v;

        ck_assert_int_eq(cg_batch_norm_stats(cg_module_child(net, i, NULL),
                                             &rm, &rv, NULL), CG_OK);
        snprintf(name, sizeof name, "param.%d.running_mean", i);
        m = fx_get(f, name);
        snprintf(name, sizeof name, "param.%d.running_var", i);
        v = fx_get(f, name);
        ck_assert(m && v);
        ck_assert_int_eq(cg_tensor_write(rm, m->data, (size_t)m->numel * 4),
                         CG_OK);
        ck_assert_int_eq(cg_tensor_write(rv, v->data, (size_t)v->numel * 4),
                         CG_OK);
    }
    xt = fx_get(f, "input");
    tt = fx_get(f, "target");
    ck_assert(xt && tt && tt->numel == 3);
    for (i = 0; i < 3; i++)
        labels[i] = (int32_t)tt->data[i];
    x = cg_tensor_from_host(ctx, CG_F32, xt->ndim, xt->shape, xt->data);
    target = cg_tensor_from_host(ctx, CG_I32, 1, tt->shape, labels);
    ck_assert(x && target);
    cg_tensor_set_requires_grad(x, 1);
    logits = cg_module_forward(net, x);
    loss = logits ? cg_cross_entropy(logits, target, CG_REDUCTION_MEAN,
                                     CG_IGNORE_INDEX, 0.0f) : NULL;
    ck_assert_msg(loss && cg_backward(loss, NULL, 0) == CG_OK, "%s", TT_ERR);
    expect_fx(f, logits, "logits");
    expect_fx(f, loss, "loss");
    expect_fx(f, cg_tensor_grad(x), "grad_input");
    for (i = 0; i < n; i++) {
        const char *pn;
        cg_tensor *p = cg_module_param(net, i, &pn);

        snprintf(name, sizeof name, "grad.%s", pn);
        expect_fx(f, cg_tensor_grad(p), name);
    }
    for (i = 1; i <= 5; i += 4) {
        cg_tensor *rm, *rv;

        cg_batch_norm_stats(cg_module_child(net, i, NULL), &rm, &rv, NULL);
        snprintf(name, sizeof name, "after.%d.running_mean", i);
        expect_fx(f, rm, name);
        snprintf(name, sizeof name, "after.%d.running_var", i);
        expect_fx(f, rv, name);
    }
    cg_tensor_free(logits);
    cg_tensor_free(loss);
    cg_tensor_free(x);
    cg_tensor_free(target);
    cg_module_free(net);
    fx_free(f);
}
END_TEST

START_TEST(flatten_is_a_view_with_a_gradient)
{
    cg_context *ctx = tt_ctx();
    int64_t xs[4] = { 2, 3, 4, 5 }, s[CG_MAX_DIMS];
    cg_tensor *x = ramp(4, xs, 0.3, 0), *y, *z, *l;
    cg_module *fl = cg_flatten_new(ctx, 1, -1);
    float *g;
    int i;

    cg_tensor_set_requires_grad(x, 1);
    y = cg_module_forward(fl, x);
    ck_assert_msg(y != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_ndim(y), 2);
    cg_tensor_shape(y, s);
    ck_assert(s[0] == 2 && s[1] == 60);
    cg_tensor_free(y);
    y = cg_flatten(x, 1, 2);
    ck_assert_msg(y != NULL, "%s", TT_ERR);
    cg_tensor_shape(y, s);
    ck_assert(cg_tensor_ndim(y) == 3 && s[0] == 2 && s[1] == 12 && s[2] == 5);
    /* d/dx sum(flatten(x) * 3) = 3 */
    z = cg_mul_scalar(y, 3.0f);
    l = cg_sum(z, 0, NULL, 0);
    ck_assert_msg(l && cg_backward(l, NULL, 0) == CG_OK, "%s", TT_ERR);
    g = host(cg_tensor_grad(x));
    for (i = 0; i < 120; i++)
        ck_assert(g[i] == 3.0f);
    free(g);
    cg_tensor_free(y);
    cg_tensor_free(z);
    cg_tensor_free(l);
    y = cg_flatten(x, 0, -1);
    ck_assert(y && cg_tensor_ndim(y) == 1 && cg_tensor_numel(y) == 120);
    cg_tensor_free(y);
    ck_assert_ptr_null(cg_flatten(x, 2, 1));
    ck_assert_int_eq(cg__last_status(), CG_EINVAL);
    ck_assert_ptr_null(cg_flatten(x, 0, 4));
    ck_assert_ptr_null(cg_flatten(x, -5, 1));
    ck_assert_ptr_null(cg_flatten(NULL, 0, 1));
    cg_tensor_free(x);
    cg_module_free(fl);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("cnn_layers");
    TCase *tc = tcase_create("cnn_layers");

    tt_require_device();
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, batch_norm_layer_keeps_pytorchs_state);
    tcase_add_test(tc, batch_norm_state_travels_in_checkpoints);
    tcase_add_test(tc, pool_layers_are_the_ops);
    tcase_add_test(tc, conv_transpose2d_and_adaptive_pool_layers);
    tcase_add_test(tc, conv_algorithm_query_follows_the_environment);
    tcase_add_test(tc, flatten_is_a_view_with_a_gradient);
    tcase_add_test(tc, cnn_step_matches_pytorch);
    suite_add_tcase(s, tc);
    return tt_run(s);
}
