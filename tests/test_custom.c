/* SPDX-License-Identifier: MIT */
/*
 * tests/test_custom.c - custom ops (cg_custom_op_*): user kernels checked
 * with the op harness (forward against a C reference, backward against
 * finite differences), the binary cache, and every way a definition or an
 * application can be wrong.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opcheck.h"
#include "cl/internal.h"

/* --------------------------------------------- y = p0*x0*x0*x1 + sin(x0) */

static const char elementwise_src[] =
    "__kernel void f(__global const float *x0, __global const float *x1,\n"
    "                __global float *y, uint n,\n"
    "                __global const int *shapes,\n"
    "                __global const float *p)\n"
    "{\n"
    "    uint i = get_global_id(0);\n"
    "    if (i >= n)\n"
    "        return;\n"
    "    y[i] = p[0] * x0[i] * x0[i] * x1[i] + sin(x0[i]);\n"
    "}\n"
    "__kernel void b0(__global const float *x0, __global const float *x1,\n"
    "                 __global const float *y, __global const float *gy,\n"
    "                 __global float *gx, uint n,\n"
    "                 __global const int *shapes,\n"
    "                 __global const float *p)\n"
    "{\n"
    "    uint i = get_global_id(0);\n"
    "    if (i >= n)\n"
    "        return;\n"
    "    gx[i] = gy[i] * (2.0f * p[0] * x0[i] * x1[i] + cos(x0[i]));\n"
    "}\n"
    "__kernel void b1(__global const float *x0, __global const float *x1,\n"
    "                 __global const float *y, __global const float *gy,\n"
    "                 __global float *gx, uint n,\n"
    "                 __global const int *shapes,\n"
    "                 __global const float *p)\n"
    "{\n"
    "    uint i = get_global_id(0);\n"
    "    if (i >= n)\n"
    "        return;\n"
    "    gx[i] = gy[i] * p[0] * x0[i] * x0[i];\n"
    "}\n";

static const char *const elementwise_bwd[] = { "b0", "b1" };
static const float elementwise_p0 = 1.5f;

static cg_custom_op_def
elementwise_def(void)
{
    cg_custom_op_def d;

    memset(&d, 0, sizeof d);
    d.name = "poly_sin";
    d.source = elementwise_src;
    d.forward_kernel = "f";
    d.backward_kernels = elementwise_bwd;
    d.ninputs = 2;
    d.params = &elementwise_p0;
    d.nparams = 1;
    return d;
}

static cg_custom_op *
new_op(cg_context *ctx, const cg_custom_op_def *d)
{
    cg_custom_op *op = cg_custom_op_new(ctx, d);

    ck_assert_msg(op != NULL, "%s", TT_ERR);
    return op;
}

static cg_tensor *
run_custom(cg_tensor **in, const void *param)
{
    cg_custom_op *op = (cg_custom_op *)param;

    return cg_custom_op_apply(op, 2, in);
}

static void
ref_elementwise(const oc_tensor *in, oc_tensor *out, const void *param)
{
    int64_t i;

    (void)param;
    out->ndim = in[0].ndim;
    memcpy(out->shape, in[0].shape, sizeof out->shape);
    oc_alloc(out);
    for (i = 0; i < out->numel; i++) {
        double a = in[0].data[i], b = in[1].data[i];

        out->data[i] = (double)elementwise_p0 * a * a * b + sin(a);
    }
}

START_TEST(custom_elementwise_op_matches_reference_and_gradients)
{
    cg_custom_op_def d = elementwise_def();
    cg_custom_op *op = new_op(tt_ctx(), &d);
    static const char *pairs[][2] = {
        { "1", "1" }, { "7", "7" }, { "33", "33" }, { "257", "257" },
        { "7,33", "7,33" }, { "T7,33", "7,33" }, { "5,7", "T5,7" },
        { "", "" }
    };
    oc_op o = { 0 };
    size_t s;

    o.name = "custom poly_sin";
    o.ninputs = 2;
    o.run = run_custom;
    o.ref = ref_elementwise;
    for (s = 0; s < sizeof pairs / sizeof pairs[0]; s++)
        oc_check(&o, op, pairs[s][0], pairs[s][1]);
    cg_custom_op_free(op);
}
END_TEST

/* ------------------------------------------------- row sums [N,M] -> [N] */

static const char rowsum_src[] =
    "__kernel void rowsum(__global const float *x, __global float *y,\n"
    "                     uint n, __global const int *shapes,\n"
    "                     __global const float *p)\n"
    "{\n"
    "    uint i = get_global_id(0);\n"
    "    int m = CG_DIM(shapes, 0, 1), j;\n"
    "    float s = 0.0f;\n"
    "    if (i >= n)\n"
    "        return;\n"
    "    for (j = 0; j < m; j++)\n"
    "        s += x[i * m + j];\n"
    "    y[i] = s;\n"
    "}\n"
    "__kernel void rowsum_b(__global const float *x,\n"
    "                       __global const float *y,\n"
    "                       __global const float *gy, __global float *gx,\n"
    "                       uint n, __global const int *shapes,\n"
    "                       __global const float *p)\n"
    "{\n"
    "    uint i = get_global_id(0);\n"
    "    if (i >= n)\n"
    "        return;\n"
    "    gx[i] = gy[i / CG_DIM(shapes, 0, 1)];\n"
    "}\n";

static const char *const rowsum_bwd[] = { "rowsum_b" };

/* [N, M] -> [N]; `user` points at an int that, when set, makes the rule
 * misbehave in the way it says. */
enum { RULE_OK, RULE_BAD_NDIM, RULE_ZERO_SIZE, RULE_WRAPS };

static int
rowsum_rule(int ninputs, const int *ndims, const int64_t *const *shapes,
            int *out_ndim, int64_t *out_shape, void *user)
{
    int mode = user ? *(const int *)user : RULE_OK;

    if (ninputs != 1 || ndims[0] != 2)
        return 1;
    *out_ndim = mode == RULE_BAD_NDIM ? CG_MAX_DIMS + 1 : 1;
    out_shape[0] = mode == RULE_ZERO_SIZE ? 0 : shapes[0][0];
    if (mode == RULE_WRAPS) {   /* 3 x that = 2^64 + 2 elements */
        *out_ndim = 2;
        out_shape[0] = 3;
        out_shape[1] = 6148914691236517206LL;
    }
    return 0;
}

static cg_custom_op_def
rowsum_def(int *mode)
{
    cg_custom_op_def d;

    memset(&d, 0, sizeof d);
    d.name = "rowsum";
    d.source = rowsum_src;
    d.forward_kernel = "rowsum";
    d.backward_kernels = rowsum_bwd;
    d.ninputs = 1;
    d.shape_rule = rowsum_rule;
    d.user = mode;
    return d;
}

static cg_tensor *
run_rowsum(cg_tensor **in, const void *param)
{
    return cg_custom_op_apply((cg_custom_op *)param, 1, in);
}

static void
ref_rowsum(const oc_tensor *in, oc_tensor *out, const void *param)
{
    int64_t i, j, m = in[0].shape[1];

    (void)param;
    out->ndim = 1;
    out->shape[0] = in[0].shape[0];
    oc_alloc(out);
    for (i = 0; i < out->numel; i++)
        for (j = 0; j < m; j++)
            out->data[i] += in[0].data[i * m + j];
}

START_TEST(custom_op_with_a_shape_rule_reduces_rows)
{
    cg_custom_op_def d = rowsum_def(NULL);
    cg_custom_op *op = new_op(tt_ctx(), &d);
    static const char *shapes[] = { "1,1", "7,1", "7,33", "33,257", "T7,33",
                                    "257,7" };
    oc_op o = { 0 };
    size_t s;

    o.name = "custom rowsum";
    o.ninputs = 1;
    o.run = run_rowsum;
    o.ref = ref_rowsum;
    for (s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        oc_check(&o, op, shapes[s]);
    cg_custom_op_free(op);
}
END_TEST

/* ------------------------------------------------------------- the cache */

static const cg__program *
custom_program(const cg_context *ctx, const char *name)
{
    const cg__program *p;
    char prefix[128];

    snprintf(prefix, sizeof prefix, "custom:%s:", name);
    for (p = ctx->programs; p; p = p->next)
        if (strncmp(p->name, prefix, strlen(prefix)) == 0)
            return p;
    return NULL;
}

START_TEST(custom_program_is_loaded_from_the_disk_cache)
{
    const char *old = getenv("CLGRAD_CACHE_DIR");
    char *saved = old ? strdup(old) : NULL, dir[512];
    cg_custom_op_def d = elementwise_def();
    int round;

    snprintf(dir, sizeof dir, "%s/custom-cache", tt_tmpdir());
    ck_assert_int_eq(setenv("CLGRAD_CACHE_DIR", dir, 1), 0);
    for (round = 0; round < 2; round++) {
        cg_context *ctx = cg_context_new(NULL);
        const cg__program *p;
        cg_custom_op *op;

        ck_assert_msg(ctx != NULL, "%s", TT_ERR);
        op = new_op(ctx, &d);
        p = custom_program(ctx, d.name);
        ck_assert_ptr_nonnull(p);
        /* A fresh directory: built the first time, loaded the second. */
        ck_assert_int_eq(p->from_cache, round);
        cg_custom_op_free(op);
        cg_context_free(ctx);
    }
    if (saved)
        setenv("CLGRAD_CACHE_DIR", saved, 1);
    else
        unsetenv("CLGRAD_CACHE_DIR");
    free(saved);
}
END_TEST

START_TEST(one_program_serves_every_op_with_the_same_source)
{
    cg_custom_op_def d = elementwise_def();
    cg_custom_op *a = new_op(tt_ctx(), &d), *b = new_op(tt_ctx(), &d);
    const cg__program *p;
    int n = 0;

    for (p = tt_ctx()->programs; p; p = p->next)
        n += strncmp(p->name, "custom:poly_sin:", 16) == 0;
    ck_assert_int_eq(n, 1);
    cg_custom_op_free(a);
    cg_custom_op_free(b);
}
END_TEST

/* --------------------------------------------------- definition errors */

START_TEST(a_syntax_error_gives_ebuild_with_the_compiler_message)
{
    cg_custom_op_def d = elementwise_def();

    d.name = "broken";
    d.source = "__kernel void f(__global float *y)\n{\n    y[0] = 1.0f\n}\n";
    ck_assert_ptr_null(cg_custom_op_new(tt_ctx(), &d));
    ck_assert_msg(strstr(TT_ERR, "kernel build failed") ||
                  strstr(TT_ERR, "build log"), "%s", TT_ERR);
    /* The compiler's diagnostic; where the compiler honours #line file
     * names (PoCL's does, Oclgrind's does not) in the user's own file and
     * line. */
    ck_assert_msg(strstr(TT_ERR, "error"), "%s", TT_ERR);
    ck_assert_msg(!strstr(TT_ERR, "(empty)"), "%s", TT_ERR);
    if (strstr(TT_ERR, "broken.cl"))
        ck_assert_msg(strstr(TT_ERR, "broken.cl:3:"), "%s", TT_ERR);
    d.source = "__kernel void f(__global float *y) { y[0] = ; }\n";
    ck_assert_ptr_null(cg_custom_op_new(tt_ctx(), &d));
}
END_TEST

/* What the library logged, for the test below (a callback must not call
 * into Check). */
static char custom_logged[8192];

static void
collect_log(cg_log_level level, const char *message, void *user)
{
    size_t n = strlen(custom_logged);

    (void)user;
    snprintf(custom_logged + n, sizeof custom_logged - n, "%d %s\n",
             (int)level, message);
}

/* A custom op whose source compiles with a warning: the build log goes to
 * the log callback as a warning naming the op (not only to the runtime's
 * stderr), and the op works.  The source is new each run (a comment with
 * the process id), so that it is compiled, not loaded from the cache. */
START_TEST(a_build_warning_goes_to_the_log_callback)
{
    cg_custom_op_def d = elementwise_def();
    char src[4096];
    cg_custom_op *op;

    snprintf(src, sizeof src, "/* %ld */\n%s\n__kernel void w(__global "
             "float *y)\n{\n    y[0] == 1.0f;\n}\n", (long)getpid(),
             elementwise_src);
    d.name = "warns";
    d.source = src;
    custom_logged[0] = '\0';
    cg_set_log(collect_log, NULL);
    op = cg_custom_op_new(tt_ctx(), &d);
    cg_set_log(NULL, NULL);
    ck_assert_msg(op != NULL, "%s", TT_ERR);
    ck_assert_msg(strstr(custom_logged, "compiler messages") &&
                  strstr(custom_logged, "warning"), "logged: '%s'",
                  custom_logged);
    ck_assert_msg(custom_logged[0] == '0' + CG_LOG_WARNING, "level: '%s'",
                  custom_logged);
    cg_custom_op_free(op);
}
END_TEST

static void
expect_einval(const cg_custom_op_def *d, const char *needle)
{
    ck_assert_ptr_null(cg_custom_op_new(tt_ctx(), d));
    ck_assert_msg(strstr(TT_ERR, needle), "'%s' not in: %s", needle, TT_ERR);
}

START_TEST(bad_definitions_are_rejected_with_a_clear_error)
{
    const char *const one_null[] = { "b0", NULL };
    const char *const wrong_name[] = { "b0", "b_missing" };
    const char *const swapped[] = { "b0", "f" };
    cg_custom_op_def d = elementwise_def();

    ck_assert_ptr_null(cg_custom_op_new(NULL, &d));
    ck_assert_ptr_null(cg_custom_op_new(tt_ctx(), NULL));
    d.source = NULL;
    expect_einval(&d, "source is NULL");
    d = elementwise_def();
    d.forward_kernel = NULL;
    expect_einval(&d, "no forward kernel");
    d = elementwise_def();
    d.backward_kernels = NULL;
    expect_einval(&d, "backward_kernels is NULL");
    d.backward_kernels = one_null;
    expect_einval(&d, "input 1");
    d = elementwise_def();
    d.name = "has space";
    expect_einval(&d, "[A-Za-z0-9_.-]");
    d = elementwise_def();
    d.ninputs = 0;
    expect_einval(&d, "ninputs");
    d = elementwise_def();
    d.params = NULL;
    expect_einval(&d, "nparams");
    d = elementwise_def();
    d.forward_kernel = "nope";
    expect_einval(&d, "forward kernel 'nope' is not in its source");
    d = elementwise_def();
    d.backward_kernels = wrong_name;
    expect_einval(&d, "kernel 'b_missing' is not in its source");
    /* A forward kernel where a backward one belongs: wrong arity. */
    d.backward_kernels = swapped;
    expect_einval(&d, "kernel 'f' takes 6 arguments");
    ck_assert_int_eq(cg__last_status(), CG_EINVAL);
}
END_TEST

/* -------------------------------------------------- application errors */

static void
expect_unchanged_failure(cg_custom_op *op, int n, cg_tensor *const *in,
                         int status, const char *needle)
{
    cg_memory_stats before, after;
    int k;

    ck_assert_int_eq(cg_context_stats(tt_ctx(), &before), CG_OK);
    ck_assert_ptr_null(cg_custom_op_apply(op, n, in));
    ck_assert_int_eq(cg__last_status(), status);
    ck_assert_msg(strstr(TT_ERR, needle), "'%s' not in: %s", needle, TT_ERR);
    ck_assert_int_eq(cg_context_stats(tt_ctx(), &after), CG_OK);
    ck_assert_uint_eq(after.kernels_enqueued, before.kernels_enqueued);
    ck_assert_uint_eq(after.allocations, before.allocations);
    ck_assert_uint_eq(after.bytes_in_use, before.bytes_in_use);
    for (k = 0; in && k < n; k++)
        if (in[k]) {
            ck_assert(cg_tensor_is_leaf(in[k]));
            ck_assert_ptr_null(cg_tensor_grad(in[k]));
        }
}

START_TEST(wrong_inputs_fail_and_change_nothing)
{
    int mode = RULE_OK;
    cg_custom_op_def d = elementwise_def(), r = rowsum_def(&mode);
    cg_custom_op *op = new_op(tt_ctx(), &d), *rs = new_op(tt_ctx(), &r);
    int64_t s7[1] = { 7 }, s8[1] = { 8 }, s73[2] = { 7, 3 };
    cg_tensor *a = cg_zeros(tt_ctx(), 1, s7), *b = cg_zeros(tt_ctx(), 1, s8);
    cg_tensor *m = cg_zeros(tt_ctx(), 2, s73);
    cg_tensor *ints = cg_tensor_new(tt_ctx(), CG_I32, 1, s7);
    cg_tensor *in[3] = { NULL, NULL, NULL };

    ck_assert_int_eq(cg_tensor_set_requires_grad(a, 1), CG_OK);
    in[0] = a;
    in[1] = a;
    expect_unchanged_failure(op, 1, in, CG_EINVAL, "takes 2 inputs, not 1");
    expect_unchanged_failure(op, 3, in, CG_EINVAL, "takes 2 inputs, not 3");
    expect_unchanged_failure(NULL, 2, in, CG_EINVAL, "op is NULL");
    expect_unchanged_failure(op, 2, NULL, CG_EINVAL, "inputs is NULL");
    in[1] = NULL;
    expect_unchanged_failure(op, 2, in, CG_EINVAL, "input 1");
    in[1] = ints;
    expect_unchanged_failure(op, 2, in, CG_EDTYPE, "input 1");
    in[1] = b;
    expect_unchanged_failure(op, 2, in, CG_ESHAPE, "[7], [8]");
    /* The rule rejects a 1-D input ... */
    expect_unchanged_failure(rs, 1, in, CG_ESHAPE, "rejects input shapes");
    /* ... and its own bad answers are caught. */
    in[0] = m;
    mode = RULE_BAD_NDIM;
    expect_unchanged_failure(rs, 1, in, CG_ESHAPE, "output dimensions");
    mode = RULE_ZERO_SIZE;
    expect_unchanged_failure(rs, 1, in, CG_ESHAPE, "size 0");
    /* Issue 16: an element count that wraps around to 2 is refused. */
    mode = RULE_WRAPS;
    expect_unchanged_failure(rs, 1, in, CG_EUNSUPPORTED,
                             "2^31 elements or more");
    cg_tensor_free(a);
    cg_tensor_free(b);
    cg_tensor_free(m);
    cg_tensor_free(ints);
    cg_custom_op_free(op);
    cg_custom_op_free(rs);
}
END_TEST

START_TEST(the_graph_keeps_a_freed_op_alive_for_backward)
{
    cg_custom_op_def r = rowsum_def(NULL);
    cg_custom_op *op = new_op(tt_ctx(), &r);
    int64_t shape[2] = { 3, 4 };
    cg_tensor *x = cg_ones(tt_ctx(), 2, shape), *y, *s;
    float g[12];
    int i;

    ck_assert_int_eq(cg_tensor_set_requires_grad(x, 1), CG_OK);
    y = cg_custom_op_apply(op, 1, &x);
    ck_assert_msg(y != NULL, "%s", TT_ERR);
    cg_custom_op_free(op);
    s = cg_sum(y, 0, NULL, 0);
    ck_assert_int_eq(cg_backward(s, NULL, 0), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(cg_tensor_grad(x), g, sizeof g),
                     CG_OK);
    for (i = 0; i < 12; i++)
        ck_assert_float_eq(g[i], 1.0f);
    cg_tensor_free(s);
    cg_tensor_free(y);
    cg_tensor_free(x);
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
    Suite *s = suite_create("custom");
    TCase *tc = tcase_create("custom");

    tt_require_device();
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, custom_elementwise_op_matches_reference_and_gradients);
    tcase_add_test(tc, custom_op_with_a_shape_rule_reduces_rows);
    tcase_add_test(tc, custom_program_is_loaded_from_the_disk_cache);
    tcase_add_test(tc, one_program_serves_every_op_with_the_same_source);
    /* A build that fails and kernel names not in their program, on
     * purpose: not under Oclgrind (tt_api_checker). */
    if (!tt_api_checker())
        tcase_add_test(tc,
                       a_syntax_error_gives_ebuild_with_the_compiler_message);
    tcase_add_test(tc, a_build_warning_goes_to_the_log_callback);
    if (!tt_api_checker())
        tcase_add_test(tc, bad_definitions_are_rejected_with_a_clear_error);
    tcase_add_test(tc, wrong_inputs_fail_and_change_nothing);
    tcase_add_test(tc, the_graph_keeps_a_freed_op_alive_for_backward);
    tcase_add_test(tc, print_error_table);
    suite_add_tcase(s, tc);
    return tt_run(s);
}
