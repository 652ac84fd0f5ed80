/* SPDX-License-Identifier: MIT */
/*
 * tests/test_argmax.c - argmax and argmin along an axis, and max / min
 * with their indices (torch.max(x, dim)): indices equal a plain C scan
 * exactly (first index on ties, first NaN wins) at odd sizes, every axis,
 * keepdim or not, contiguous or not; the values pass the op harness's
 * forward and gradient checks; values, indices and gradients equal
 * PyTorch's (tests/fixtures/reduce_arg.txt, NaN included); bad arguments
 * give errors and NULL.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "opcheck.h"

/* The reference: first index of the max (min) along `dim` of the row-major
 * host array x of `shape`, NaN beating every number. */
static void
ref_arg(const float *x, int ndim, const int64_t *shape, int dim, int min,
        int32_t *out)
{
    int64_t outer = 1, inner = 1, n = shape[dim], o, i, k;
    int d;

    for (d = 0; d < dim; d++)
        outer *= shape[d];
    for (d = dim + 1; d < ndim; d++)
        inner *= shape[d];
    for (o = 0; o < outer; o++)
        for (i = 0; i < inner; i++) {
            int64_t best = 0;

            for (k = 1; k < n; k++) {
                float v = x[(o * n + k) * inner + i];
                float b = x[(o * n + best) * inner + i];

                if (isnan(b))
                    break;
                if (isnan(v) || (min ? v < b : v > b))
                    best = k;
            }
            out[o * inner + i] = (int32_t)best;
        }
}

/* Values from a small set, so that ties are common; a few NaN if asked. */
static float *
fill(int64_t n, int nans)
{
    float *v = malloc((size_t)n * sizeof *v);
    int64_t i;

    for (i = 0; i < n; i++)
        v[i] = (float)((int)oc_uniform(0, 9) - 4) * 0.5f;
    for (i = 0; nans && i < n; i += 1 + (int64_t)oc_uniform(0, 2 * n))
        v[i] = NAN;
    return v;
}

static void
check_shape(int ndim, const int64_t *shape, int nans)
{
    int64_t n = 1, got_shape[CG_MAX_DIMS];
    int d, min, keep;
    float *x;
    cg_tensor *t;

    for (d = 0; d < ndim; d++)
        n *= shape[d];
    x = fill(n, nans);
    t = cg_tensor_from_host(tt_ctx(), CG_F32, ndim, shape, x);
    ck_assert_msg(t != NULL, "%s", TT_ERR);
    for (d = -1; d < ndim; d++)
        for (min = 0; min < 2; min++)
            for (keep = 0; keep < 2; keep++) {
                int dim = d < 0 ? -1 : d, dd = d < 0 ? ndim - 1 : d;
                int32_t *want = malloc((size_t)n * 4), *got;
                cg_tensor *i = min ? cg_argmin(t, dim, keep)
                                   : cg_argmax(t, dim, keep);
                int64_t m;

                ck_assert_msg(i != NULL, "%s", TT_ERR);
                ck_assert_int_eq(cg_tensor_dtype(i), CG_I32);
                ck_assert_int_eq(cg_tensor_requires_grad(i), 0);
                ck_assert_int_eq(cg_tensor_ndim(i), keep ? ndim : ndim - 1);
                cg_tensor_shape(i, got_shape);
                if (keep)
                    ck_assert_int_eq(got_shape[dd], 1);
                m = cg_tensor_numel(i);
                ck_assert_int_eq(m, n / shape[dd]);
                got = malloc((size_t)m * 4);
                ref_arg(x, ndim, shape, dd, min, want);
                ck_assert_int_eq(cg_tensor_to_host(i, got, (size_t)m * 4),
                                 CG_OK);
                ck_assert_msg(memcmp(want, got, (size_t)m * 4) == 0,
                              "%s dim %d keepdim %d: indices differ",
                              min ? "argmin" : "argmax", dim, keep);
                cg_tensor_free(i);
                free(want);
                free(got);
            }
    cg_tensor_free(t);
    free(x);
}

START_TEST(indices_match_a_plain_scan)
{
    static const int64_t s1[1] = { 257 }, s2[2] = { 7, 33 },
                         s3[3] = { 3, 1, 17 }, s4[4] = { 2, 3, 5, 7 },
                         s5[1] = { 1 };

    check_shape(1, s1, 0);
    check_shape(2, s2, 0);
    check_shape(3, s3, 0);
    check_shape(4, s4, 0);
    check_shape(1, s5, 0);
    check_shape(2, s2, 1);
    check_shape(3, s3, 1);
}
END_TEST

/* Views: a transposed and a narrowed tensor give the indices of their
 * contiguous copies. */
START_TEST(views_give_their_copies_indices)
{
    const int64_t shape[2] = { 9, 13 };
    float *x = fill(9 * 13, 0);
    cg_tensor *t = cg_tensor_from_host(tt_ctx(), CG_F32, 2, shape, x);
    cg_tensor *views[2], *c, *a, *b;
    int32_t ga[16], gb[16];
    int v, d;

    views[0] = cg_transpose(t, 0, 1);
    views[1] = cg_narrow(t, 1, 3, 7);
    for (v = 0; v < 2; v++) {
        c = cg_contiguous(views[v]);
        for (d = 0; d < 2; d++) {
            int64_t m;

            a = cg_argmin(views[v], d, 1);
            b = cg_argmin(c, d, 1);
            ck_assert_msg(a && b, "%s", TT_ERR);
            m = cg_tensor_numel(a);
            cg_tensor_to_host(a, ga, (size_t)m * 4);
            cg_tensor_to_host(b, gb, (size_t)m * 4);
            ck_assert(memcmp(ga, gb, (size_t)m * 4) == 0);
            cg_tensor_free(a);
            cg_tensor_free(b);
        }
        cg_tensor_free(c);
        cg_tensor_free(views[v]);
    }
    cg_tensor_free(t);
    free(x);
}
END_TEST

/* ------------------------------------------------------------ values */

static int
param_dim(const void *param)
{
    return ((const int *)param)[0];
}

static cg_tensor *
run_values(cg_tensor **in, const void *param)
{
    const int *p = param;
    cg_tensor *v = NULL, *i = NULL;
    int rc = p[1] ? cg_min_dim(in[0], p[0], p[2], &v, &i)
                  : cg_max_dim(in[0], p[0], p[2], &v, &i);

    ck_assert_msg(rc == CG_OK, "%s", TT_ERR);
    cg_tensor_free(i);
    return v;
}

static void
ref_values(const oc_tensor *in, oc_tensor *out, const void *param)
{
    const int *p = param;
    int dim = param_dim(param), d, n = 0;
    int64_t outer = 1, inner = 1, len, o, i, k;

    dim = dim < 0 ? dim + in->ndim : dim;
    for (d = 0; d < in->ndim; d++) {
        if (d < dim)
            outer *= in->shape[d];
        if (d > dim)
            inner *= in->shape[d];
        if (d != dim)
            out->shape[n++] = in->shape[d];
        else if (p[2])
            out->shape[n++] = 1;
    }
    out->ndim = n;
    oc_alloc(out);
    len = in->shape[dim];
    for (o = 0; o < outer; o++)
        for (i = 0; i < inner; i++) {
            double b = in->data[o * len * inner + i];

            for (k = 1; k < len; k++) {
                double v = in->data[(o * len + k) * inner + i];

                b = p[1] ? (v < b ? v : b) : (v > b ? v : b);
            }
            out->data[o * inner + i] = b;
        }
}

START_TEST(values_pass_forward_and_gradient_checks)
{
    oc_op op = { 0 };
    int params[6][3] = { { 1, 0, 0 }, { 0, 1, 1 }, { -1, 0, 1 },
                         { 1, 1, 0 }, { 2, 0, 0 }, { 0, 0, 0 } };

    op.name = "max_dim/min_dim";
    op.ninputs = 1;
    op.run = run_values;
    op.ref = ref_values;
    oc_check(&op, params[0], "7,33");
    oc_check(&op, params[1], "T7,33");
    oc_check(&op, params[2], "O3,1,17");
    oc_check(&op, params[3], "5,257");
    oc_check(&op, params[4], "2,3,5");
    oc_check(&op, params[5], "1");
}
END_TEST

static cg_tensor *
fx_tensor_of(const fx_file *f, const char *name)
{
    const fx_tensor *t = fx_get(f, name);
    cg_tensor *d;

    ck_assert_msg(t != NULL, "fixture tensor %s is missing", name);
    d = cg_tensor_from_host(tt_ctx(), CG_F32, t->ndim, t->shape, t->data);
    ck_assert_msg(d != NULL, "%s", TT_ERR);
    return d;
}

/* Exact equality, NaN equal to NaN. */
static void
expect_equal(const fx_file *f, const char *name, cg_tensor *got)
{
    const fx_tensor *want = fx_get(f, name);
    float v[256];
    int32_t iv[256];
    int64_t i;

    ck_assert_msg(want != NULL, "fixture tensor %s is missing", name);
    ck_assert_int_eq(cg_tensor_numel(got), want->numel);
    ck_assert(want->numel <= 256);
    if (cg_tensor_dtype(got) == CG_I32) {
        cg_tensor_to_host(got, iv, (size_t)want->numel * 4);
        for (i = 0; i < want->numel; i++)
            v[i] = (float)iv[i];
    } else {
        cg_tensor_to_host(got, v, (size_t)want->numel * 4);
    }
    for (i = 0; i < want->numel; i++)
        ck_assert_msg(v[i] == want->data[i] ||
                      (isnan(v[i]) && isnan(want->data[i])),
                      "%s[%lld]: %g, PyTorch %g", name, (long long)i,
                      (double)v[i], (double)want->data[i]);
}

START_TEST(matches_pytorch)
{
    static const char *const inputs[2] = { "input", "input_finite" };
    char err[256], name[64];
    fx_file *f = fx_load_fixture("reduce_arg.txt", err, sizeof err);
    int d, k, min;

    ck_assert_msg(f != NULL, "%s", err);
    for (k = 0; k < 2; k++) {
        cg_tensor *x = fx_tensor_of(f, inputs[k]);

        cg_tensor_set_requires_grad(x, k == 1);
        for (d = 0; d < 3; d++)
            for (min = 0; min < 2; min++) {
                cg_tensor *v, *i, *a, *g, *s, *p;

                ck_assert_int_eq(min ? cg_min_dim(x, d, 0, &v, &i)
                                     : cg_max_dim(x, d, 0, &v, &i), CG_OK);
                a = min ? cg_argmin(x, d, 0) : cg_argmax(x, d, 0);
                snprintf(name, sizeof name, "%s.%s.%d", inputs[k],
                         min ? "min" : "max", d);
                expect_equal(f, name, v);
                snprintf(name, sizeof name, "%s.%s.%d", inputs[k],
                         min ? "argmin" : "argmax", d);
                expect_equal(f, name, i);
                expect_equal(f, name, a);
                if (k == 1) {
                    snprintf(name, sizeof name, "grad_output.%d", d);
                    g = fx_tensor_of(f, name);
                    p = cg_mul(v, g);
                    s = cg_sum(p, 0, NULL, 0);
                    ck_assert_int_eq(cg_backward(s, NULL, 0), CG_OK);
                    snprintf(name, sizeof name, "input_finite.grad_%s.%d",
                             min ? "min" : "max", d);
                    expect_equal(f, name, cg_tensor_grad(x));
                    cg_tensor_zero_grad(x);
                    cg_tensor_free(g);
                    cg_tensor_free(p);
                    cg_tensor_free(s);
                }
                cg_tensor_free(v);
                cg_tensor_free(i);
                cg_tensor_free(a);
            }
        cg_tensor_free(x);
    }
    fx_free(f);
}
END_TEST

START_TEST(bad_arguments_give_errors)
{
    const int64_t shape[2] = { 3, 4 };
    cg_tensor *t = cg_zeros(tt_ctx(), 2, shape), *v = NULL, *i = NULL;
    int32_t ids[12] = { 0 };
    cg_tensor *it = cg_tensor_from_host(tt_ctx(), CG_I32, 2, shape, ids);

    ck_assert_ptr_null(cg_argmax(t, 2, 0));
    ck_assert_int_eq(cg_last_error()[0] != 0, 1);
    ck_assert(strstr(cg_last_error(), "dim 2") != NULL);
    ck_assert_ptr_null(cg_argmin(t, -3, 0));
    ck_assert_ptr_null(cg_argmax(NULL, 0, 0));
    ck_assert_ptr_null(cg_argmax(it, 0, 0));
    ck_assert(strstr(cg_last_error(), "CG_EDTYPE") != NULL);
    ck_assert_int_eq(cg_max_dim(t, 0, 0, NULL, &i), CG_EINVAL);
    ck_assert_int_ne(cg_min_dim(t, 5, 0, &v, &i), CG_OK);
    ck_assert_ptr_null(v);
    ck_assert_ptr_null(i);
    cg_tensor_free(t);
    cg_tensor_free(it);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("argmax");
    TCase *tc = tcase_create("argmax");
    int rc;

    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, indices_match_a_plain_scan);
    tcase_add_test(tc, views_give_their_copies_indices);
    tcase_add_test(tc, values_pass_forward_and_gradient_checks);
    tcase_add_test(tc, matches_pytorch);
    tcase_add_test(tc, bad_arguments_give_errors);
    suite_add_tcase(s, tc);
    rc = tt_run(s);
    oc_report();
    return rc;
}
