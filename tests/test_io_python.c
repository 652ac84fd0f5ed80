/* SPDX-License-Identifier: MIT */
/*
 * tests/test_io_python.c - checkpoints move between clgrad and PyTorch
 * both ways: PyTorch loads clgrad's LSTM and linear weights with
 * load_state_dict and reproduces clgrad's output, and clgrad loads weights
 * PyTorch wrote and reproduces PyTorch's output (tests/io_interop.py does
 * the Python side); the same for a small CNN with batch norm, whose running
 * statistics and num_batches_tracked travel too.  Needs python3 with torch: /usr/bin/python3 (Debian's
 * python3-torch) or $CLGRAD_TEST_PYTHON.  Without it the program is
 * skipped (exit 77), except under CI, where that is a failure.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* Tolerance of outputs recomputed on the other side: both sides compute
 * in float32 with different summation orders over at most 4 + 3 terms. */
#define TOL 1e-5

static char python[512];
static char script[512];

static int
run_python(const char *mode, const char *path)
{
    char cmd[2048];

    snprintf(cmd, sizeof cmd, "'%s' '%s' %s '%s'", python, script, mode,
             path);
    return system(cmd);
}

static void
require_python(void)
{
    const char *p = getenv("CLGRAD_TEST_PYTHON");
    const char *top = getenv("TEST_SRCDIR");
    const char *ci = getenv("CI");
    char cmd[700];

    snprintf(python, sizeof python, "%s", p && *p ? p : "/usr/bin/python3");
    snprintf(script, sizeof script, "%s/tests/io_interop.py",
             top && *top ? top : ".");
    snprintf(cmd, sizeof cmd, "'%s' -c 'import torch' >/dev/null 2>&1",
             python);
    if (system(cmd) == 0)
        return;
    if (ci && *ci && strcmp(ci, "false") != 0) {
        fprintf(stderr, "FAIL: %s cannot import torch in CI (install "
                "python3-torch)\n", python);
        exit(1);
    }
    fprintf(stderr, "SKIP: %s cannot import torch\n", python);
    exit(77);
}

static void
model(cg_context *ctx, cg_module **lstm, cg_module **fc)
{
    cg_rnn_options o = { CG_LSTM, 3, 4, 1, 0, 0, 0 };

    *lstm = cg_rnn_new(ctx, &o);
    *fc = cg_linear_new(ctx, 4, 2, 1);
    ck_assert_msg(*lstm && *fc, "%s", TT_ERR);
}

static cg_tensor *
forward(cg_module *lstm, cg_module *fc, cg_tensor *x)
{
    cg_tensor *h, *y;

    ck_assert_msg(cg_rnn_forward(lstm, x, NULL, NULL, NULL, &h, NULL,
                                 NULL) == CG_OK, "%s", TT_ERR);
    y = cg_linear_forward(fc, h);
    ck_assert_msg(y != NULL, "%s", TT_ERR);
    cg_tensor_free(h);
    return y;
}

START_TEST(pytorch_loads_clgrad_weights_and_reproduces_the_output)
{
    cg_context *ctx = tt_ctx();
    cg_module *lstm, *fc;
    cg_checkpoint *ck = cg_checkpoint_new();
    int64_t xs[3] = { 5, 2, 3 }, three = 3;
    int32_t ids[3] = { 3, -1, 2147483647 };
    float hx[30];
    cg_tensor *x, *y;
    char path[512];
    int i;

    ck_assert_int_eq(cg_manual_seed(ctx, 2024), CG_OK);
    model(ctx, &lstm, &fc);
    for (i = 0; i < 30; i++)
        hx[i] = (float)sin(0.7 * i) * 1.5f;
    x = cg_tensor_from_host(ctx, CG_F32, 3, xs, hx);
    y = forward(lstm, fc, x);
    ck_assert_int_eq(cg_checkpoint_add_module(ck, "lstm.", lstm), CG_OK);
    ck_assert_int_eq(cg_checkpoint_add_module(ck, "fc.", fc), CG_OK);
    ck_assert_int_eq(cg_checkpoint_add_tensor(ck, "x", x), CG_OK);
    ck_assert_int_eq(cg_checkpoint_add_tensor(ck, "y", y), CG_OK);
    ck_assert_int_eq(cg_checkpoint_add_host(ck, "ids", CG_I32, 1, &three,
                                            ids), CG_OK);
    ck_assert_int_eq(cg_checkpoint_set_meta_int(ck, "step", 12), CG_OK);
    ck_assert_int_eq(cg_checkpoint_set_meta(ck, "config",
                                            "{\"hidden\": 4}"), CG_OK);
    snprintf(path, sizeof path, "%s/from-clgrad.safetensors", tt_tmpdir());
    ck_assert_msg(cg_checkpoint_save(ck, path) == CG_OK, "%s", TT_ERR);
    ck_assert_int_eq(run_python("check", path), 0);
    cg_tensor_free(x);
    cg_tensor_free(y);
    cg_checkpoint_free(ck);
    cg_module_free(lstm);
    cg_module_free(fc);
}
END_TEST

START_TEST(clgrad_loads_pytorch_weights_and_reproduces_the_output)
{
    cg_context *ctx = tt_ctx();
    cg_module *lstm, *fc;
    cg_checkpoint *ck;
    cg_tensor *x, *y;
    const float *ty;
    const int32_t *ids;
    float hy[20];
    double err = 0, scale = 0;
    char path[512];
    size_t bytes;
    int i;

    snprintf(path, sizeof path, "%s/from-torch.safetensors", tt_tmpdir());
    ck_assert_int_eq(run_python("write", path), 0);
    ck = cg_checkpoint_load(path);
    ck_assert_msg(ck != NULL, "%s", TT_ERR);
    ck_assert_str_eq(cg_checkpoint_get_meta(ck, "step"), "7");
    ck_assert_str_eq(cg_checkpoint_get_meta(ck, "format"), "pt");
    ck_assert_ptr_nonnull(cg_checkpoint_tensor_data(ck, "lstm.weight_ih_l0",
                                                    NULL));
    model(ctx, &lstm, &fc);
    ck_assert_msg(cg_checkpoint_restore_module(ck, "lstm.", lstm) == CG_OK,
                  "%s", TT_ERR);
    ck_assert_msg(cg_checkpoint_restore_module(ck, "fc.", fc) == CG_OK,
                  "%s", TT_ERR);
    x = cg_checkpoint_tensor(ck, ctx, "x");
    ck_assert_msg(x != NULL, "%s", TT_ERR);
    y = forward(lstm, fc, x);
    ck_assert_int_eq(cg_tensor_to_host(y, hy, sizeof hy), CG_OK);
    ty = cg_checkpoint_tensor_data(ck, "y", &bytes);
    ck_assert(ty && bytes == sizeof hy);
    for (i = 0; i < 20; i++) {
        err = fmax(err, fabs((double)hy[i] - ty[i]));
        scale = fmax(scale, fabs(ty[i]));
    }
    printf("max |y_clgrad - y_torch| = %.3g (max |y| %.3g)\n", err, scale);
    ck_assert_msg(err <= TOL * fmax(scale, 1), "error %g", err);
    ids = cg_checkpoint_tensor_data(ck, "ids", &bytes);
    ck_assert(ids && bytes == 16 && ids[2] == -3 && ids[3] == 2147483647);
    cg_tensor_free(x);
    cg_tensor_free(y);
    cg_checkpoint_free(ck);
    cg_module_free(lstm);
    cg_module_free(fc);
}
END_TEST

/* nn.Sequential(Conv2d(2, 3, 3, padding=1), BatchNorm2d(3), ReLU(),
 * MaxPool2d(2), Flatten(), Linear(18, 4)), as io_interop.py's cnn(). */
static cg_module *
cnn(cg_context *ctx)
{
    cg_conv_options o = { { 1, 1 }, { 1, 1 }, { 1, 1 }, 1, 0 };
    const int k3[2] = { 3, 3 }, k2[2] = { 2, 2 };
    cg_module *seq = cg_sequential_new(ctx);

    ck_assert_msg(seq && cg_module_add(seq, NULL, cg_conv2d_new(ctx, 2, 3, k3,
                                                                1, &o)) == 0 &&
                  cg_module_add(seq, NULL, cg_batch_norm2d_new(ctx, 3, 1e-5f,
                                                               0.1f, 1, 1))
                  == 0 &&
                  cg_module_add(seq, NULL, cg_activation_new(ctx, "relu"))
                  == 0 &&
                  cg_module_add(seq, NULL, cg_max_pool2d_new(ctx, k2, NULL,
                                                             NULL)) == 0 &&
                  cg_module_add(seq, NULL, cg_flatten_new(ctx, 1, -1)) == 0 &&
                  cg_module_add(seq, NULL, cg_linear_new(ctx, 18, 4, 1)) == 0,
                  "%s", TT_ERR);
    return seq;
}

START_TEST(pytorch_loads_a_clgrad_cnn_with_batch_norm_statistics)
{
    cg_context *ctx = tt_ctx();
    cg_checkpoint *ck = cg_checkpoint_new();
    int64_t xs[4] = { 5, 2, 4, 6 };
    float hx[240];
    cg_tensor *x, *y;
    cg_module *net;
    char path[512];
    int i, k;

    ck_assert_int_eq(cg_manual_seed(ctx, 7), CG_OK);
    net = cnn(ctx);
    for (k = 0; k < 3; k++) {
        for (i = 0; i < 240; i++)
            hx[i] = (float)sin(0.37 * i + k) * 2.0f + 0.5f;
        x = cg_tensor_from_host(ctx, CG_F32, 4, xs, hx);
        y = cg_module_forward(net, x);
        ck_assert_msg(y != NULL, "%s", TT_ERR);
        cg_tensor_free(x);
        cg_tensor_free(y);
    }
    ck_assert_int_eq(cg_module_set_training(net, 0), CG_OK);
    for (i = 0; i < 240; i++)
        hx[i] = (float)cos(0.53 * i);
    x = cg_tensor_from_host(ctx, CG_F32, 4, xs, hx);
    y = cg_module_forward(net, x);
    ck_assert_msg(y != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_checkpoint_add_module(ck, "cnn.", net), CG_OK);
    ck_assert_int_eq(cg_checkpoint_add_tensor(ck, "x", x), CG_OK);
    ck_assert_int_eq(cg_checkpoint_add_tensor(ck, "y", y), CG_OK);
    snprintf(path, sizeof path, "%s/cnn-from-clgrad.safetensors",
             tt_tmpdir());
    ck_assert_msg(cg_checkpoint_save(ck, path) == CG_OK, "%s", TT_ERR);
    ck_assert_int_eq(run_python("check-cnn", path), 0);
    cg_tensor_free(x);
    cg_tensor_free(y);
    cg_checkpoint_free(ck);
    cg_module_free(net);
}
END_TEST

START_TEST(clgrad_loads_a_pytorch_cnn_with_batch_norm_statistics)
{
    cg_context *ctx = tt_ctx();
    cg_checkpoint *ck;
    cg_tensor *x, *y, *rm;
    cg_module *net;
    const float *ty;
    float hy[20], m[3];
    double err = 0, scale = 0;
    int64_t nbt = -1;
    char path[512];
    size_t bytes;
    int i;

    snprintf(path, sizeof path, "%s/cnn-from-torch.safetensors",
             tt_tmpdir());
    ck_assert_int_eq(run_python("write-cnn", path), 0);
    ck = cg_checkpoint_load(path);
    ck_assert_msg(ck != NULL, "%s", TT_ERR);
    net = cnn(ctx);
    ck_assert_msg(cg_checkpoint_restore_module(ck, "cnn.", net) == CG_OK,
                  "%s", TT_ERR);
    ck_assert_int_eq(cg_batch_norm_stats(cg_module_child(net, 1, NULL), &rm,
                                         NULL, &nbt), CG_OK);
    ck_assert_int_eq(nbt, 3);
    ck_assert_int_eq(cg_tensor_to_host(rm, m, sizeof m), CG_OK);
    ck_assert_msg(m[0] != 0.0f, "running_mean was not restored");
    ck_assert_int_eq(cg_module_set_training(net, 0), CG_OK);
    x = cg_checkpoint_tensor(ck, ctx, "x");
    ck_assert_msg(x != NULL, "%s", TT_ERR);
    y = cg_module_forward(net, x);
    ck_assert_msg(y != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_to_host(y, hy, sizeof hy), CG_OK);
    ty = cg_checkpoint_tensor_data(ck, "y", &bytes);
    ck_assert(ty && bytes == sizeof hy);
    for (i = 0; i < 20; i++) {
        err = fmax(err, fabs((double)hy[i] - ty[i]));
        scale = fmax(scale, fabs(ty[i]));
    }
    printf("cnn: max |y_clgrad - y_torch| = %.3g (max |y| %.3g)\n", err,
           scale);
    ck_assert_msg(err <= TOL * fmax(scale, 1), "error %g", err);
    cg_tensor_free(x);
    cg_tensor_free(y);
    cg_checkpoint_free(ck);
    cg_module_free(net);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("io_python");
    TCase *tc = tcase_create("io_python");

    tt_require_device();
    require_python();
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, pytorch_loads_clgrad_weights_and_reproduces_the_output);
    tcase_add_test(tc, clgrad_loads_pytorch_weights_and_reproduces_the_output);
    tcase_add_test(tc, pytorch_loads_a_clgrad_cnn_with_batch_norm_statistics);
    tcase_add_test(tc, clgrad_loads_a_pytorch_cnn_with_batch_norm_statistics);
    suite_add_tcase(s, tc);
    return tt_run(s);
}
