/* SPDX-License-Identifier: MIT */
/*
 * tests/test_half_reduce.c - reductions, softmax, losses and normalisation
 * over float16 and bfloat16 storage (issue 19): each op on 16-bit inputs
 * against the same op in float32 on the 16-bit-rounded inputs, its output
 * rounded to the dtype; gradients through cg_to_dtype from float32 leaves
 * against the float32 op's gradients, rounded likewise.
 *
 * Tolerances.  The 16-bit kernels are the float32 kernels' source with
 * other loads and stores: the same float32 arithmetic in the same order
 * on the same (rounded) inputs, so an output differs from the float32
 * result rounded to the dtype only where the float32 path rounds twice
 * (to float32, then to 16 bits; at most one 16-bit ulp apart) or where a
 * 16-bit kernel reads a 16-bit intermediate the float32 path keeps in
 * float32 (softmax's saved output in its backward, a loss's 16-bit
 * upstream gradient).  The measure is normalised: max |got - want| /
 * max |want| over the tensor, in units of the dtype's epsilon (2^-10 for
 * float16, 2^-7 for bfloat16: one ulp relative at 1).
 *   forward: 1 eps (one rounding of the output; a sum of n float32 terms
 *            adds n 2^-24 relative, < 0.01 eps for every size here).
 *   backward: 1 eps where the backward reads only the rounded inputs and
 *            float32 statistics (the same values as the float32 op), 4 eps
 *            for softmax and log_softmax, whose backward reads the saved
 *            16-bit output (each y within 0.5 eps; gx = y (g - sum g y)
 *            carries that error through a product and a sum of terms of
 *            either sign).
 * Indices (argmax, argmin, max_dim) must be equal: the same comparisons on
 * the same values.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "testutil.h"

#define MAXIN 3

static double
dt_eps(cg_dtype dt)
{
    return dt == CG_F16 ? ldexp(1.0, -10) : ldexp(1.0, -7);
}

static const char *
dt_name(cg_dtype dt)
{
    return dt == CG_F16 ? "float16" : "bfloat16";
}

/* Deterministic inputs in [lo, hi). */
static void
fill(float *v, int64_t n, unsigned seed, float lo, float hi)
{
    uint32_t s = 2463534242u + seed * 2654435761u;
    int64_t i;

    for (i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        v[i] = lo + (hi - lo) * (float)(s >> 8) / 16777216.0f;
    }
}

static float *
host_f32(cg_tensor *t)
{
    int64_t n = cg_tensor_numel(t);
    float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    cg_tensor *c;

    ck_assert(v != NULL);
    cg_no_grad_enter();
    c = cg_to_dtype(t, CG_F32);
    cg_no_grad_leave();
    ck_assert_msg(c != NULL, "%s", TT_ERR);
    ck_assert_msg(cg_tensor_to_host(c, v, (size_t)n * sizeof *v) == CG_OK,
                  "%s", TT_ERR);
    cg_tensor_free(c);
    return v;
}

/* float32 t rounded to dt and back, on the host. */
static float *
host_rounded(cg_tensor *t, cg_dtype dt)
{
    cg_tensor *h;
    float *v;

    cg_no_grad_enter();
    h = cg_to_dtype(t, dt);
    cg_no_grad_leave();
    ck_assert_msg(h != NULL, "%s", TT_ERR);
    v = host_f32(h);
    cg_tensor_free(h);
    return v;
}

/* max |got - want| / max |want| in units of eps. */
static double
nerr(const float *got, const float *want, int64_t n, double eps)
{
    double m = 0.0, e = 0.0;
    int64_t i;

    for (i = 0; i < n; i++) {
        if (fabs(want[i]) > m)
            m = fabs(want[i]);
        if (isnan(got[i]) != isnan(want[i]))
            return INFINITY;
        if (!isnan(got[i]) && fabs((double)got[i] - want[i]) > e)
            e = fabs((double)got[i] - want[i]);
    }
    return m > 0.0 ? e / m / eps : e / eps;
}

/* CLGRAD_TEST_VERBOSE set: each measured error on stderr (for the
 * tolerance table of issue 19). */
static void
report(const char *what, const char *name, cg_dtype dt, int k, double e)
{
    if (getenv("CLGRAD_TEST_VERBOSE"))
        fprintf(stderr, "%-32s %-8s %s %d: %.3f eps\n", name,
                dt_name(dt), what, k, e);
}

typedef cg_tensor *(*op_fn)(cg_tensor *const *in, const void *arg);

/* One case: nin inputs of the given shapes, values in [lo, hi); the
 * gradient checked for the inputs in grad (bit k: input k). */
typedef struct opcase {
    const char *name;
    op_fn fn;
    const void *arg;
    int nin;
    int ndim[MAXIN];
    int64_t shape[MAXIN][4];
    float lo[MAXIN], hi[MAXIN];
    unsigned grad;
    double btol;            /* backward tolerance in eps */
} opcase;

static cg_tensor *
leaf(cg_dtype dt, int ndim, const int64_t *shape, const float *v, int grad)
{
    cg_tensor *t = cg_tensor_from_host(tt_ctx(), dt, ndim, shape, v);

    ck_assert_msg(t != NULL, "%s", TT_ERR);
    if (grad)
        ck_assert_int_eq(cg_tensor_set_requires_grad(t, 1), CG_OK);
    return t;
}

/* sum(float(y) * w) for the upstream gradient w (exact in 16 bits). */
static cg_tensor *
weighted(cg_tensor *y, cg_tensor *w)
{
    cg_tensor *y32 = cg_to_dtype(y, CG_F32), *p, *l;

    ck_assert_msg(y32 != NULL, "%s", TT_ERR);
    p = cg_mul(y32, w);
    ck_assert_msg(p != NULL, "%s", TT_ERR);
    l = cg_sum(p, 0, NULL, 0);
    ck_assert_msg(l != NULL, "%s", TT_ERR);
    cg_tensor_free(y32);
    cg_tensor_free(p);
    return l;
}

static void
run_case(const opcase *c, cg_dtype dt)
{
    cg_tensor *x32[MAXIN] = { 0 }, *h[MAXIN] = { 0 }, *r[MAXIN] = { 0 };
    cg_tensor *y, *yr, *w = NULL, *l, *lr;
    float *got, *want, *v;
    int64_t n, ny;
    double e, eps = dt_eps(dt);
    int k, d;

    /* under a host memory checker one dtype (TT_NDTYPES) */
    if (tt_host_checker() && dt != CG_F16)
        return;
    for (k = 0; k < c->nin; k++) {
        n = 1;
        for (d = 0; d < c->ndim[k]; d++)
            n *= c->shape[k][d];
        v = malloc((size_t)n * sizeof *v);
        ck_assert(v != NULL);
        fill(v, n, 17u * (unsigned)k + 3u, c->lo[k], c->hi[k]);
        x32[k] = leaf(CG_F32, c->ndim[k], c->shape[k], v,
                      (c->grad >> k) & 1);
        free(v);
        h[k] = cg_to_dtype(x32[k], dt);
        ck_assert_msg(h[k] != NULL, "%s", TT_ERR);
        v = host_f32(h[k]);
        r[k] = leaf(CG_F32, c->ndim[k], c->shape[k], v, (c->grad >> k) & 1);
        free(v);
    }
    y = c->fn(h, c->arg);
    ck_assert_msg(y != NULL, "%s %s: %s", c->name, dt_name(dt), TT_ERR);
    ck_assert_msg(cg_tensor_dtype(y) == dt, "%s %s: output dtype %d",
                  c->name, dt_name(dt), (int)cg_tensor_dtype(y));
    yr = c->fn(r, c->arg);
    ck_assert_msg(yr != NULL, "%s float32: %s", c->name, TT_ERR);
    ny = cg_tensor_numel(y);
    ck_assert_int_eq(ny, cg_tensor_numel(yr));
    got = host_f32(y);
    want = host_rounded(yr, dt);
    e = nerr(got, want, ny, eps);
    report("forward", c->name, dt, 0, e);
    ck_assert_msg(e <= 1.0, "%s %s forward: error %.3g eps", c->name,
                  dt_name(dt), e);
    free(got);
    free(want);
    if (c->grad) {
        int64_t ws = ny;

        v = malloc((size_t)(ny ? ny : 1) * sizeof *v);
        ck_assert(v != NULL);
        fill(v, ny, 99u, -1.0f, 1.0f);
        w = leaf(CG_F32, 1, &ws, v, 0);
        free(v);
        {
            float *wr = host_rounded(w, dt);
            int64_t ys[CG_MAX_DIMS];

            cg_tensor_free(w);

            cg_tensor_shape(y, ys);
            w = leaf(CG_F32, cg_tensor_ndim(y), ys, wr, 0);
            free(wr);
        }
        l = weighted(y, w);
        lr = weighted(yr, w);
        ck_assert_msg(cg_backward(l, NULL, 0) == CG_OK, "%s %s backward: %s",
                      c->name, dt_name(dt), TT_ERR);
        ck_assert_msg(cg_backward(lr, NULL, 0) == CG_OK, "%s", TT_ERR);
        for (k = 0; k < c->nin; k++) {
            if (!((c->grad >> k) & 1))
                continue;
            ck_assert_msg(cg_tensor_grad(x32[k]) != NULL, "%s %s: input %d "
                          "got no gradient", c->name, dt_name(dt), k);
            n = cg_tensor_numel(x32[k]);
            got = host_f32(cg_tensor_grad(x32[k]));
            want = host_rounded(cg_tensor_grad(r[k]), dt);
            e = nerr(got, want, n, eps);
            report("backward", c->name, dt, k, e);
            ck_assert_msg(e <= c->btol, "%s %s backward of input %d: error "
                          "%.3g eps (tolerance %g)", c->name, dt_name(dt), k,
                          e, c->btol);
            free(got);
            free(want);
        }
        cg_tensor_free(l);
        cg_tensor_free(lr);
        cg_tensor_free(w);
    }
    cg_tensor_free(y);
    cg_tensor_free(yr);
    for (k = 0; k < c->nin; k++) {
        cg_tensor_free(x32[k]);
        cg_tensor_free(h[k]);
        cg_tensor_free(r[k]);
    }
}

/* ------------------------------------------------------------------------
 * Reductions
 * ------------------------------------------------------------------------ */

/* Axes for sum, mean, max, var: naxes (0: all), then the axes. */
typedef struct axes {
    int n;
    int ax[4];
    int keepdim;
    int correction;
} axes;

static cg_tensor *
op_sum(cg_tensor *const *in, const void *arg)
{
    const axes *a = arg;

    return cg_sum(in[0], a->n, a->ax, a->keepdim);
}

static cg_tensor *
op_mean(cg_tensor *const *in, const void *arg)
{
    const axes *a = arg;

    return cg_mean(in[0], a->n, a->ax, a->keepdim);
}

static cg_tensor *
op_max(cg_tensor *const *in, const void *arg)
{
    const axes *a = arg;

    return cg_max(in[0], a->n, a->ax, a->keepdim);
}

static cg_tensor *
op_var(cg_tensor *const *in, const void *arg)
{
    const axes *a = arg;

    return cg_var(in[0], a->n, a->ax, a->keepdim, a->correction);
}

/* sum over axes of a transpose: the strided, general kernel. */
static cg_tensor *
op_sum_t(cg_tensor *const *in, const void *arg)
{
    const axes *a = arg;
    cg_tensor *t = cg_transpose(in[0], 0, 1), *y;

    ck_assert_msg(t != NULL, "%s", TT_ERR);
    y = cg_sum(t, a->n, a->ax, a->keepdim);
    cg_tensor_free(t);
    return y;
}

/* sum over axes of rows 1 .. n - 2: contiguous from an odd offset. */
static cg_tensor *
op_sum_n(cg_tensor *const *in, const void *arg)
{
    const axes *a = arg;
    cg_tensor *t = cg_narrow(in[0], 0, 1, cg_tensor_dim(in[0], 0) - 2), *y;

    ck_assert_msg(t != NULL, "%s", TT_ERR);
    y = cg_sum(t, a->n, a->ax, a->keepdim);
    cg_tensor_free(t);
    return y;
}

static cg_tensor *
op_min_values(cg_tensor *const *in, const void *arg)
{
    const axes *a = arg;
    cg_tensor *v = NULL, *i = NULL;

    if (cg_min_dim(in[0], a->ax[0], a->keepdim, &v, &i) != CG_OK)
        return NULL;
    cg_tensor_free(i);
    return v;
}

static cg_tensor *
op_max_values(cg_tensor *const *in, const void *arg)
{
    const axes *a = arg;
    cg_tensor *v = NULL, *i = NULL;

    if (cg_max_dim(in[0], a->ax[0], a->keepdim, &v, &i) != CG_OK)
        return NULL;
    cg_tensor_free(i);
    return v;
}

static const axes ax_all = { 0, { 0 }, 0, 0 }, ax_in = { 1, { 1 }, 0, 0 };
static const axes ax_out = { 1, { 0 }, 0, 0 }, ax_mid = { 1, { 1 }, 1, 0 };
static const axes ax_02 = { 2, { 0, 2 }, 0, 0 }, ax_last = { 1, { -1 }, 0, 1 };
static const axes ax_all1 = { 0, { 0 }, 0, 1 }, ax_in0 = { 1, { 1 }, 1, 0 };

/* Shapes: 7x13 (odd, inner and outer sums: reduce_rows, reduce_cols), 5x257
 * (rows longer than a work-group), 33x65x3 (middle and multiple axes: the
 * strided kernel), 3x20000 (a full sum of 60000: reduce_rows in two
 * passes), 40x100 (whole vectors of reduce_cols), 6x64 (whole vectors
 * of reduce_rows), narrowed rows (an odd element offset). */
static const opcase reduce_cases[] = {
    { "sum all 7x13", op_sum, &ax_all,
      1, { 2 }, { { 7, 13 } }, { -2 }, { 2 }, 1, 1 },
    { "sum inner 7x13", op_sum, &ax_in,
      1, { 2 }, { { 7, 13 } }, { -2 }, { 2 }, 1, 1 },
    { "sum outer 7x13", op_sum, &ax_out,
      1, { 2 }, { { 7, 13 } }, { -2 }, { 2 }, 1, 1 },
    { "sum inner 5x257", op_sum, &ax_in,
      1, { 2 }, { { 5, 257 } }, { -2 }, { 2 }, 1, 1 },
    { "sum outer 40x100", op_sum, &ax_out,
      1, { 2 }, { { 40, 100 } }, { -2 }, { 2 }, 1, 1 },
    { "sum all 3x20000", op_sum, &ax_all,
      1, { 2 }, { { 3, 20000 } }, { 0 }, { 1 }, 1, 1 },
    { "sum middle 5x7x9", op_sum, &ax_mid,
      1, { 3 }, { { 5, 7, 9 } }, { -2 }, { 2 }, 1, 1 },
    { "sum axes 0,2 33x65x3", op_sum, &ax_02,
      1, { 3 }, { { 33, 65, 3 } }, { -2 }, { 2 }, 1, 1 },
    { "sum inner 6x64", op_sum, &ax_in,
      1, { 2 }, { { 6, 64 } }, { -2 }, { 2 }, 1, 1 },
    { "sum inner rows 1..5 of 7x13", op_sum_n, &ax_in,
      1, { 2 }, { { 7, 13 } }, { -2 }, { 2 }, 1, 1 },
    { "sum outer rows 1..5 of 7x45", op_sum_n, &ax_out,
      1, { 2 }, { { 7, 45 } }, { -2 }, { 2 }, 1, 1 },
    { "sum transposed 7x13", op_sum_t, &ax_in,
      1, { 2 }, { { 7, 13 } }, { -2 }, { 2 }, 1, 1 },
    { "mean inner 5x257", op_mean, &ax_in0,
      1, { 2 }, { { 5, 257 } }, { -2 }, { 2 }, 1, 1 },
    { "mean outer 7x13", op_mean, &ax_out,
      1, { 2 }, { { 7, 13 } }, { -2 }, { 2 }, 1, 1 },
    { "mean axes 0,2 33x65x3", op_mean, &ax_02,
      1, { 3 }, { { 33, 65, 3 } }, { -2 }, { 2 }, 1, 1 },
    { "max inner 7x13", op_max, &ax_in,
      1, { 2 }, { { 7, 13 } }, { -2 }, { 2 }, 1, 1 },
    { "max all 5x257", op_max, &ax_all,
      1, { 2 }, { { 5, 257 } }, { -2 }, { 2 }, 1, 1 },
    { "max axes 0,2 33x65x3", op_max, &ax_02,
      1, { 3 }, { { 33, 65, 3 } }, { -2 }, { 2 }, 1, 1 },
    { "max_dim values 7x13", op_max_values, &ax_out,
      1, { 2 }, { { 7, 13 } }, { -2 }, { 2 }, 1, 1 },
    { "min_dim values 5x257", op_min_values, &ax_in,
      1, { 2 }, { { 5, 257 } }, { -2 }, { 2 }, 1, 1 },
    { "var last 7x13", op_var, &ax_last,
      1, { 2 }, { { 7, 13 } }, { 1 }, { 3 }, 1, 1 },
    { "var all 5x257", op_var, &ax_all1,
      1, { 2 }, { { 5, 257 } }, { -2 }, { 2 }, 1, 1 },
    { "var outer biased 7x13", op_var, &ax_out,
      1, { 2 }, { { 7, 13 } }, { -2 }, { 2 }, 1, 1 },
    { "var axes 0,2 33x65x3", op_var, &ax_02,
      1, { 3 }, { { 33, 65, 3 } }, { -2 }, { 2 }, 1, 1 },
};

#define NREDUCE ((int)(sizeof reduce_cases / sizeof reduce_cases[0]))

START_TEST(reductions_match_float32_on_rounded_inputs)
{
    run_case(&reduce_cases[_i / 2], _i % 2 ? CG_BF16 : CG_F16);
}
END_TEST

/* argmax and argmin (int32 indices), and max_dim / min_dim's indices:
 * equal to the float32 ones on the rounded input, along either axis. */
START_TEST(arg_indices_match_float32)
{
    cg_dtype dt = _i ? CG_BF16 : CG_F16;
    int64_t s[2] = { 33, 65 }, n = 33 * 65;
    float v[33 * 65], *r;
    int32_t got[65], want[65];
    cg_tensor *x, *h, *x2, *a, *b, *vals, *inds;
    int dim, min;

    fill(v, n, 5u, -3.0f, 3.0f);
    x = leaf(CG_F32, 2, s, v, 0);
    h = cg_to_dtype(x, dt);
    r = host_f32(h);
    x2 = leaf(CG_F32, 2, s, r, 0);
    free(r);
    for (dim = 0; dim < 2; dim++)
        for (min = 0; min < 2; min++) {
            int64_t m = s[1 - dim];

            a = min ? cg_argmin(h, dim, 0) : cg_argmax(h, dim, 0);
            b = min ? cg_argmin(x2, dim, 0) : cg_argmax(x2, dim, 0);
            ck_assert_msg(a && b, "%s", TT_ERR);
            ck_assert_int_eq(cg_tensor_dtype(a), CG_I32);
            ck_assert_int_eq(cg_tensor_to_host(a, got, (size_t)m * 4), CG_OK);
            ck_assert_int_eq(cg_tensor_to_host(b, want, (size_t)m * 4), CG_OK);
            ck_assert(memcmp(got, want, (size_t)m * 4) == 0);
            cg_tensor_free(a);
            cg_tensor_free(b);
            ck_assert_int_eq((min ? cg_min_dim : cg_max_dim)(h, dim, 1, &vals,
                                                             &inds), CG_OK);
            ck_assert_int_eq(cg_tensor_dtype(vals), dt);
            ck_assert_int_eq(cg_tensor_to_host(inds, got, (size_t)m * 4),
                             CG_OK);
            ck_assert(memcmp(got, want, (size_t)m * 4) == 0);
            cg_tensor_free(vals);
            cg_tensor_free(inds);
        }
    cg_tensor_free(x);
    cg_tensor_free(x2);
    cg_tensor_free(h);
}
END_TEST

/* ------------------------------------------------------------------------
 * Softmax
 * ------------------------------------------------------------------------ */

static cg_tensor *
op_softmax(cg_tensor *const *in, const void *arg)
{
    return cg_softmax(in[0], *(const int *)arg);
}

static cg_tensor *
op_log_softmax(cg_tensor *const *in, const void *arg)
{
    return cg_log_softmax(in[0], *(const int *)arg);
}

static const int dim0 = 0, dim1 = 1, dimm1 = -1;

static const opcase softmax_cases[] = {
    { "softmax dim 1 7x13", op_softmax, &dim1,
      1, { 2 }, { { 7, 13 } }, { -4 }, { 4 }, 1, 4 },
    { "softmax dim 0 7x13", op_softmax, &dim0,
      1, { 2 }, { { 7, 13 } }, { -4 }, { 4 }, 1, 4 },
    { "softmax dim 1 5x257", op_softmax, &dim1,
      1, { 2 }, { { 5, 257 } }, { -4 }, { 4 }, 1, 4 },
    { "softmax dim -1 3x5x64", op_softmax, &dimm1,
      1, { 3 }, { { 3, 5, 64 } }, { -4 }, { 4 }, 1, 4 },
    { "log_softmax dim 1 7x13", op_log_softmax, &dim1,
      1, { 2 }, { { 7, 13 } }, { -4 }, { 4 }, 1, 4 },
    { "log_softmax dim 0 5x257", op_log_softmax, &dim0,
      1, { 2 }, { { 5, 257 } }, { -4 }, { 4 }, 1, 4 },
    { "log_softmax dim 1 5x257", op_log_softmax, &dim1,
      1, { 2 }, { { 5, 257 } }, { -4 }, { 4 }, 1, 4 },
};

#define NSOFTMAX ((int)(sizeof softmax_cases / sizeof softmax_cases[0]))

START_TEST(softmax_matches_float32_on_rounded_inputs)
{
    run_case(&softmax_cases[_i / 2], _i % 2 ? CG_BF16 : CG_F16);
}
END_TEST

/* ------------------------------------------------------------------------
 * Losses
 * ------------------------------------------------------------------------ */

typedef struct lossarg {
    cg_reduction reduction;
    float smoothing;
    int ignore;             /* a row whose target is ignore_index (-100) */
} lossarg;

/* int32 targets for x [N, C] (or [C]: a 0-d target): deterministic
 * classes, row `ignore` set to -100 when ignore >= 0. */
static cg_tensor *
targets(cg_tensor *x, int ignore)
{
    int64_t n = cg_tensor_ndim(x) == 2 ? cg_tensor_dim(x, 0) : 1;
    int64_t c = cg_tensor_dim(x, cg_tensor_ndim(x) - 1), i;
    int32_t *t = malloc((size_t)n * sizeof *t);
    cg_tensor *r;

    ck_assert(t != NULL);
    for (i = 0; i < n; i++)
        t[i] = (int32_t)((i * 7 + 3) % c);
    if (ignore >= 0 && ignore < n)
        t[ignore] = -100;
    r = cg_tensor_from_host(tt_ctx(), CG_I32, cg_tensor_ndim(x) - 1, &n, t);
    ck_assert_msg(r != NULL, "%s", TT_ERR);
    free(t);
    return r;
}

static cg_tensor *
op_ce(cg_tensor *const *in, const void *arg)
{
    const lossarg *a = arg;
    cg_tensor *t = targets(in[0], a->ignore), *y;

    y = cg_cross_entropy(in[0], t, a->reduction, -100, a->smoothing);
    cg_tensor_free(t);
    return y;
}

static cg_tensor *
op_nll(cg_tensor *const *in, const void *arg)
{
    const lossarg *a = arg;
    cg_tensor *t = targets(in[0], a->ignore), *y;

    y = cg_nll_loss(in[0], t, a->reduction, -100);
    cg_tensor_free(t);
    return y;
}

static cg_tensor *
op_mse(cg_tensor *const *in, const void *arg)
{
    return cg_mse_loss(in[0], in[1], ((const lossarg *)arg)->reduction);
}

static cg_tensor *
op_bce(cg_tensor *const *in, const void *arg)
{
    return cg_bce_with_logits(in[0], in[1],
                              ((const lossarg *)arg)->reduction);
}

static const lossarg l_mean = { CG_REDUCTION_MEAN, 0.0f, 2 };
static const lossarg l_sum = { CG_REDUCTION_SUM, 0.1f, -1 };
static const lossarg l_none = { CG_REDUCTION_NONE, 0.0f, 4 };
static const lossarg l_mean_all = { CG_REDUCTION_MEAN, 0.2f, -1 };

static const opcase loss_cases[] = {
    { "cross_entropy mean 7x13", op_ce, &l_mean,
      1, { 2 }, { { 7, 13 } }, { -3 }, { 3 }, 1, 1 },
    { "cross_entropy sum eps 5x257", op_ce, &l_sum,
      1, { 2 }, { { 5, 257 } }, { -3 }, { 3 }, 1, 1 },
    { "cross_entropy none 33x65", op_ce, &l_none,
      1, { 2 }, { { 33, 65 } }, { -3 }, { 3 }, 1, 1 },
    { "cross_entropy [13] eps", op_ce, &l_mean_all,
      1, { 1 }, { { 13 } }, { -3 }, { 3 }, 1, 1 },
    { "nll_loss mean 7x13", op_nll, &l_mean,
      1, { 2 }, { { 7, 13 } }, { -3 }, { 0 }, 1, 1 },
    { "nll_loss none 33x65", op_nll, &l_none,
      1, { 2 }, { { 33, 65 } }, { -3 }, { 0 }, 1, 1 },
    { "mse_loss mean 7x13", op_mse, &l_mean,
      2, { 2, 2 }, { { 7, 13 }, { 7, 13 } }, { -2, -2 }, { 2, 2 }, 3, 1 },
    { "mse_loss sum 5x257", op_mse, &l_sum,
      2, { 2, 2 }, { { 5, 257 }, { 5, 257 } }, { -2, -2 }, { 2, 2 }, 3, 1 },
    { "mse_loss none 33x65", op_mse, &l_none,
      2, { 2, 2 }, { { 33, 65 }, { 33, 65 } }, { -2, -2 }, { 2, 2 }, 1, 1 },
    { "bce_with_logits mean 7x13", op_bce, &l_mean,
      2, { 2, 2 }, { { 7, 13 }, { 7, 13 } }, { -4, 0 }, { 4, 1 }, 3, 1 },
    { "bce_with_logits none 5x257", op_bce, &l_none,
      2, { 2, 2 }, { { 5, 257 }, { 5, 257 } }, { -4, 0 }, { 4, 1 }, 3, 1 },
};

#define NLOSS ((int)(sizeof loss_cases / sizeof loss_cases[0]))

START_TEST(losses_match_float32_on_rounded_inputs)
{
    run_case(&loss_cases[_i / 2], _i % 2 ? CG_BF16 : CG_F16);
}
END_TEST

/* ------------------------------------------------------------------------
 * Layer norm and batch norm
 * ------------------------------------------------------------------------ */

/* Normalised trailing dimensions; inputs 1, 2 (when nin says) weight and
 * bias. */
static cg_tensor *
op_ln(cg_tensor *const *in, const void *arg)
{
    int nnorm = *(const int *)arg, d, nd = cg_tensor_ndim(in[0]);
    int64_t s[CG_MAX_DIMS];

    for (d = 0; d < nnorm; d++)
        s[d] = cg_tensor_dim(in[0], nd - nnorm + d);
    return cg_layer_norm(in[0], nnorm, s, nnorm == 1 ? in[1] : NULL,
                         nnorm == 1 ? in[2] : NULL, 1e-5f);
}

static cg_tensor *
op_ln_w(cg_tensor *const *in, const void *arg)
{
    int64_t s = cg_tensor_dim(in[0], 1);

    (void)arg;
    return cg_layer_norm(in[0], 1, &s, in[1], NULL, 1e-5f);
}

/* training: batch statistics, no running ones; eval: running statistics
 * made here (float32, the same every call). */
static cg_tensor *
op_bn(cg_tensor *const *in, const void *arg)
{
    int training = *(const int *)arg;
    int64_t c = cg_tensor_dim(in[0], 1);
    float *v = malloc((size_t)c * sizeof *v);
    cg_tensor *rm = NULL, *rv = NULL, *y;

    ck_assert(v != NULL);
    if (!training) {
        fill(v, c, 41u, -0.5f, 0.5f);
        rm = leaf(CG_F32, 1, &c, v, 0);
        fill(v, c, 43u, 0.5f, 2.0f);
        rv = leaf(CG_F32, 1, &c, v, 0);
    }
    y = cg_batch_norm(in[0], rm, rv, in[1], in[2], training, 0.1f, 1e-5f);
    free(v);
    cg_tensor_free(rm);
    cg_tensor_free(rv);
    return y;
}

static const int one_dim = 1, two_dims = 2, train = 1, eval = 0;

static const opcase norm_cases[] = {
    { "layer_norm affine 7x13", op_ln, &one_dim,
      3, { 2, 1, 1 }, { { 7, 13 }, { 13 }, { 13 } },
      { -2, 0.5f, -1 }, { 2, 1.5f, 1 }, 7, 1 },
    { "layer_norm weight 5x257", op_ln_w, NULL,
      2, { 2, 1 }, { { 5, 257 }, { 257 } }, { -2, 0.5f }, { 2, 1.5f }, 3, 1 },
    { "layer_norm 2 dims 3x5x64", op_ln, &two_dims,
      1, { 3 }, { { 3, 5, 64 } }, { -2 }, { 2 }, 1, 1 },
    { "batch_norm train 7x13", op_bn, &train,
      3, { 2, 1, 1 }, { { 7, 13 }, { 13 }, { 13 } },
      { -2, 0.5f, -1 }, { 2, 1.5f, 1 }, 7, 1 },
    { "batch_norm train 4x3x5x7", op_bn, &train,
      3, { 4, 1, 1 }, { { 4, 3, 5, 7 }, { 3 }, { 3 } },
      { -2, 0.5f, -1 }, { 2, 1.5f, 1 }, 7, 1 },
    { "batch_norm eval 5x3x33", op_bn, &eval,
      3, { 3, 1, 1 }, { { 5, 3, 33 }, { 3 }, { 3 } },
      { -2, 0.5f, -1 }, { 2, 1.5f, 1 }, 7, 1 },
};

#define NNORM ((int)(sizeof norm_cases / sizeof norm_cases[0]))

START_TEST(norms_match_float32_on_rounded_inputs)
{
    run_case(&norm_cases[_i / 2], _i % 2 ? CG_BF16 : CG_F16);
}
END_TEST

/* Batch norm's running statistics stay float32 with a 16-bit input: the
 * same update, bit for bit, as the float32 op on the rounded input; a
 * 16-bit weight with a float32 input (or the reverse), or 16-bit running
 * statistics, is CG_EDTYPE and changes nothing. */
START_TEST(batch_norm_running_stats_stay_float32)
{
    cg_dtype dt = _i ? CG_BF16 : CG_F16;
    int64_t s[3] = { 6, 5, 9 }, c = 5, n = 6 * 5 * 9;
    float v[6 * 5 * 9], *r, ma[5], mb[5], va[5], vb[5], ones[5];
    cg_tensor *x, *h, *x2, *rm[2], *rv[2], *y, *w, *wh, *rh;
    int k;

    fill(v, n, 7u, -2.0f, 3.0f);
    x = leaf(CG_F32, 3, s, v, 0);
    h = cg_to_dtype(x, dt);
    r = host_f32(h);
    x2 = leaf(CG_F32, 3, s, r, 0);
    free(r);
    for (k = 0; k < 5; k++)
        ones[k] = 1.0f;
    for (k = 0; k < 2; k++) {
        rm[k] = cg_zeros(tt_ctx(), 1, &c);
        rv[k] = leaf(CG_F32, 1, &c, ones, 0);
    }
    for (k = 0; k < 3; k++) {
        y = cg_batch_norm(h, rm[0], rv[0], NULL, NULL, 1, 0.1f, 1e-5f);
        ck_assert_msg(y != NULL, "%s", TT_ERR);
        ck_assert_int_eq(cg_tensor_dtype(y), dt);
        cg_tensor_free(y);
        y = cg_batch_norm(x2, rm[1], rv[1], NULL, NULL, 1, 0.1f, 1e-5f);
        ck_assert_msg(y != NULL, "%s", TT_ERR);
        cg_tensor_free(y);
    }
    ck_assert_int_eq(cg_tensor_dtype(rm[0]), CG_F32);
    ck_assert_int_eq(cg_tensor_to_host(rm[0], ma, sizeof ma), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(rm[1], mb, sizeof mb), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(rv[0], va, sizeof va), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(rv[1], vb, sizeof vb), CG_OK);
    ck_assert(memcmp(ma, mb, sizeof ma) == 0);
    ck_assert(memcmp(va, vb, sizeof va) == 0);
    ck_assert(ma[0] != 0.0f && va[0] != 1.0f);
    /* Mixed dtypes. */
    w = leaf(CG_F32, 1, &c, ones, 0);
    wh = cg_to_dtype(w, dt);
    rh = cg_to_dtype(rm[0], dt);
    ck_assert_ptr_null(cg_batch_norm(h, rm[0], rv[0], w, NULL, 1, 0.1f,
                                     1e-5f));
    ck_assert_int_eq(cg__last_status(), CG_EDTYPE);
    ck_assert_ptr_null(cg_batch_norm(x, NULL, NULL, NULL, wh, 1, 0.1f,
                                     1e-5f));
    ck_assert_int_eq(cg__last_status(), CG_EDTYPE);
    ck_assert_ptr_null(cg_batch_norm(h, rh, rv[0], NULL, NULL, 1, 0.1f,
                                     1e-5f));
    ck_assert_int_eq(cg__last_status(), CG_EDTYPE);
    ck_assert_ptr_null(cg_layer_norm(h, 1, &s[2], NULL, w, 1e-5f));
    ck_assert_int_eq(cg__last_status(), CG_EDTYPE);
    ck_assert_int_eq(cg_tensor_to_host(rm[0], mb, sizeof mb), CG_OK);
    ck_assert(memcmp(ma, mb, sizeof ma) == 0);
    for (k = 0; k < 2; k++) {
        cg_tensor_free(rm[k]);
        cg_tensor_free(rv[k]);
    }
    cg_tensor_free(x); cg_tensor_free(h); cg_tensor_free(x2);
    cg_tensor_free(w); cg_tensor_free(wh); cg_tensor_free(rh);
}
END_TEST

/* A column sum of 16-bit x (a bias gradient) is the float32 column sum
 * of x's values rounded once, bit for bit, and its second pass rounds
 * (reduce_cols_fin): as many launches as the float32 sum, not a cast
 * more.  R 130: three chunks of rows; R 5: one; C 37 and 70: vector
 * blocks and a partial one; a mean's scale too. */
START_TEST(column_sums_round_once_in_their_last_pass)
{
    cg_dtype dt = _i ? CG_BF16 : CG_F16;
    static const int64_t rc[3][2] = { { 130, 37 }, { 5, 70 }, { 64, 33 } };
    int axis = 0, c, mean;

    for (c = 0; c < 3; c++)
        for (mean = 0; mean < 2; mean++) {
            int64_t n = rc[c][0] * rc[c][1], i;
            float *v = malloc((size_t)n * sizeof *v);
            uint16_t got[70], want[70];
            cg_tensor *x, *h, *x32, *s16, *s32, *w;
            cg_memory_stats a, b, d;

            ck_assert(v != NULL);
            fill(v, n, 11u + (unsigned)c, -2.0f, 2.0f);
            x = leaf(CG_F32, 2, rc[c], v, 0);
            h = cg_to_dtype(x, dt);
            x32 = h ? cg_to_dtype(h, CG_F32) : NULL;   /* exact */
            ck_assert_msg(x32 != NULL, "%s", TT_ERR);
            ck_assert_int_eq(cg_context_stats(tt_ctx(), &a), CG_OK);
            s16 = mean ? cg_mean(h, 1, &axis, 0) : cg_sum(h, 1, &axis, 0);
            ck_assert_int_eq(cg_context_stats(tt_ctx(), &b), CG_OK);
            s32 = mean ? cg_mean(x32, 1, &axis, 0)
                       : cg_sum(x32, 1, &axis, 0);
            ck_assert_int_eq(cg_context_stats(tt_ctx(), &d), CG_OK);
            w = s32 ? cg_to_dtype(s32, dt) : NULL;
            ck_assert_msg(s16 != NULL && w != NULL, "%s", TT_ERR);
            ck_assert_int_eq(cg_tensor_dtype(s16), dt);
            ck_assert_int_eq(cg_tensor_to_host(s16, got,
                                               (size_t)rc[c][1] * 2), CG_OK);
            ck_assert_int_eq(cg_tensor_to_host(w, want,
                                               (size_t)rc[c][1] * 2), CG_OK);
            for (i = 0; i < rc[c][1]; i++)
                ck_assert_msg(got[i] == want[i], "%s %s over %lldx%lld, "
                              "column %lld: 0x%04x, the float32 sum "
                              "rounded 0x%04x", dt_name(dt),
                              mean ? "mean" : "sum", (long long)rc[c][0],
                              (long long)rc[c][1], (long long)i, got[i],
                              want[i]);
            ck_assert_msg(b.kernels_enqueued - a.kernels_enqueued ==
                          d.kernels_enqueued - b.kernels_enqueued ||
                          rc[c][0] <= 64, "%s column sum over %lld rows: "
                          "%llu launches, float32 %llu", dt_name(dt),
                          (long long)rc[c][0],
                          (unsigned long long)(b.kernels_enqueued -
                                               a.kernels_enqueued),
                          (unsigned long long)(d.kernels_enqueued -
                                               b.kernels_enqueued));
            cg_tensor_free(x);
            cg_tensor_free(h);
            cg_tensor_free(x32);
            cg_tensor_free(s16);
            cg_tensor_free(s32);
            cg_tensor_free(w);
            free(v);
        }
}
END_TEST

/* A loss of a 16-bit input with a float32 target (or the reverse) is
 * CG_EDTYPE naming both dtypes. */
START_TEST(pointwise_losses_need_one_dtype)
{
    cg_dtype dt = _i ? CG_BF16 : CG_F16;
    int64_t s[2] = { 3, 4 };
    float v[12];
    cg_tensor *x, *h;

    fill(v, 12, 3u, -1.0f, 1.0f);
    x = leaf(CG_F32, 2, s, v, 0);
    h = cg_to_dtype(x, dt);
    ck_assert_ptr_null(cg_mse_loss(h, x, CG_REDUCTION_MEAN));
    ck_assert_int_eq(cg__last_status(), CG_EDTYPE);
    ck_assert_ptr_nonnull(strstr(TT_ERR, dt_name(dt)));
    ck_assert_ptr_nonnull(strstr(TT_ERR, "float32"));
    ck_assert_ptr_null(cg_bce_with_logits(x, h, CG_REDUCTION_SUM));
    ck_assert_int_eq(cg__last_status(), CG_EDTYPE);
    cg_tensor_free(x);
    cg_tensor_free(h);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("half_reduce");
    TCase *tc = tcase_create("half_reduce");

    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, reductions_match_float32_on_rounded_inputs, 0,
                        2 * NREDUCE);
    tcase_add_loop_test(tc, arg_indices_match_float32, 0, TT_NDTYPES);
    tcase_add_loop_test(tc, softmax_matches_float32_on_rounded_inputs, 0,
                        2 * NSOFTMAX);
    tcase_add_loop_test(tc, losses_match_float32_on_rounded_inputs, 0,
                        2 * NLOSS);
    tcase_add_loop_test(tc, norms_match_float32_on_rounded_inputs, 0,
                        2 * NNORM);
    tcase_add_loop_test(tc, batch_norm_running_stats_stay_float32, 0, TT_NDTYPES);
    tcase_add_loop_test(tc, pointwise_losses_need_one_dtype, 0, TT_NDTYPES);
    tcase_add_loop_test(tc, column_sums_round_once_in_their_last_pass, 0,
                        TT_NDTYPES);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tt_run(suite());
}
