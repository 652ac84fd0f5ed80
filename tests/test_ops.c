/* SPDX-License-Identifier: MIT */
/*
 * tests/test_ops.c - every elementwise op, reduction and view: forward
 * against a C reference in double, backward against finite differences
 * (tests/opcheck.h), on odd sizes (1, 7, 33, 257), broadcasts and
 * non-contiguous inputs.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "opcheck.h"
#include "ops/internal.h"

/* ------------------------------------------------------------------ unary */

enum { U_ADDS, U_MULS, U_NEG, U_POWS, U_EXP, U_LOG, U_SQRT, U_ABS, U_CLAMP,
       U_TANH, U_SIGMOID, U_RELU, U_LEAKY, U_GELU };

typedef struct { int kind; float p0, p1; } uparam;

static cg_tensor *
run_unary(cg_tensor **in, const void *param)
{
    const uparam *p = param;

    switch (p->kind) {
    case U_ADDS: return cg_add_scalar(in[0], p->p0);
    case U_MULS: return cg_mul_scalar(in[0], p->p0);
    case U_NEG: return cg_neg(in[0]);
    case U_POWS: return cg_pow_scalar(in[0], p->p0);
    case U_EXP: return cg_exp(in[0]);
    case U_LOG: return cg_log(in[0]);
    case U_SQRT: return cg_sqrt(in[0]);
    case U_ABS: return cg_abs(in[0]);
    case U_CLAMP: return cg_clamp(in[0], p->p0, p->p1);
    case U_TANH: return cg_tanh(in[0]);
    case U_SIGMOID: return cg_sigmoid(in[0]);
    case U_RELU: return cg_relu(in[0]);
    case U_LEAKY: return cg_leaky_relu(in[0], p->p0);
    default: return cg_gelu(in[0]);
    }
}

static double
unary_value(const uparam *p, double x)
{
    switch (p->kind) {
    case U_ADDS: return x + p->p0;
    case U_MULS: return x * p->p0;
    case U_NEG: return -x;
    case U_POWS: return pow(x, p->p0);
    case U_EXP: return exp(x);
    case U_LOG: return log(x);
    case U_SQRT: return sqrt(x);
    case U_ABS: return fabs(x);
    case U_CLAMP: return fmin(fmax(x, p->p0), p->p1);
    case U_TANH: return tanh(x);
    case U_SIGMOID: return 1 / (1 + exp(-x));
    case U_RELU: return x > 0 ? x : 0;
    case U_LEAKY: return x > 0 ? x : p->p0 * x;
    default: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    }
}

static void
ref_unary(const oc_tensor *in, oc_tensor *out, const void *param)
{
    int64_t i;

    out->ndim = in[0].ndim;
    memcpy(out->shape, in[0].shape, sizeof out->shape);
    oc_alloc(out);
    for (i = 0; i < out->numel; i++)
        out->data[i] = unary_value(param, in[0].data[i]);
}

static void
check_unary(const char *name, int kind, float p0, float p1, double lo,
            double hi)
{
    /* 257 and rows of 75 and 130: whole chunks of the row kernels, a
     * chunk with vectors and single elements, a chunk of single elements;
     * O: at an element offset that no vector width divides. */
    static const char *shapes[] = { "1", "7", "33", "257", "7,33", "3,5,7",
                                    "T7,33", "", "O257", "5,75", "O3,130" };
    oc_op op = { 0 };
    uparam p = { kind, p0, p1 };
    size_t s;

    op.name = name;
    op.ninputs = 1;
    op.run = run_unary;
    op.ref = ref_unary;
    op.lo[0] = lo;
    op.hi[0] = hi;
    for (s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        oc_check(&op, &p, shapes[s]);
}

START_TEST(unary_ops_match_reference_and_finite_differences)
{
    check_unary("add_scalar", U_ADDS, 2.5f, 0, -2, 2);
    check_unary("mul_scalar", U_MULS, -1.5f, 0, -2, 2);
    check_unary("neg", U_NEG, 0, 0, -2, 2);
    check_unary("pow_scalar", U_POWS, 3.0f, 0, -2, 2);
    check_unary("pow_scalar", U_POWS, 0.5f, 0, 0.2, 3);
    check_unary("pow_scalar", U_POWS, -1.5f, 0, 0.5, 3);
    check_unary("exp", U_EXP, 0, 0, -3, 3);
    check_unary("log", U_LOG, 0, 0, 0.1, 5);
    check_unary("sqrt", U_SQRT, 0, 0, 0.1, 5);
    check_unary("abs", U_ABS, 0, 0, -2, 2);
    check_unary("clamp", U_CLAMP, -0.5f, 0.7f, -2, 2);
    check_unary("tanh", U_TANH, 0, 0, -3, 3);
    check_unary("sigmoid", U_SIGMOID, 0, 0, -5, 5);
    check_unary("relu", U_RELU, 0, 0, -2, 2);
    check_unary("leaky_relu", U_LEAKY, 0.1f, 0, -2, 2);
    check_unary("gelu", U_GELU, 0, 0, -3, 3);
}
END_TEST

/* ----------------------------------------------------------------- binary */

enum { B_ADD, B_SUB, B_MUL, B_DIV, B_POW, B_MAX, B_MIN };

static cg_tensor *
run_binary(cg_tensor **in, const void *param)
{
    switch (*(const int *)param) {
    case B_ADD: return cg_add(in[0], in[1]);
    case B_SUB: return cg_sub(in[0], in[1]);
    case B_MUL: return cg_mul(in[0], in[1]);
    case B_DIV: return cg_div(in[0], in[1]);
    case B_POW: return cg_pow(in[0], in[1]);
    case B_MAX: return cg_maximum(in[0], in[1]);
    default: return cg_minimum(in[0], in[1]);
    }
}

static double
binary_value(int kind, double a, double b)
{
    switch (kind) {
    case B_ADD: return a + b;
    case B_SUB: return a - b;
    case B_MUL: return a * b;
    case B_DIV: return a / b;
    case B_POW: return pow(a, b);
    case B_MAX: return a > b ? a : b;
    default: return a < b ? a : b;
    }
}

static void
ref_binary(const oc_tensor *in, oc_tensor *out, const void *param)
{
    int64_t i;

    oc_bcast_shape(&in[0], &in[1], out);
    oc_alloc(out);
    for (i = 0; i < out->numel; i++)
        out->data[i] = binary_value(*(const int *)param,
            in[0].data[oc_bcast_index(&in[0], out->ndim, out->shape, i)],
            in[1].data[oc_bcast_index(&in[1], out->ndim, out->shape, i)]);
}

static void
check_binary(const char *name, int kind, double alo, double ahi, double blo,
             double bhi)
{
    static const char *pairs[][2] = {
        { "1", "1" }, { "7", "7" }, { "257", "257" }, { "7,33", "7,33" },
        { "7,33", "33" }, { "33", "7,33" }, { "7,1", "1,33" },
        { "3,1,5", "4,5" }, { "1", "257" }, { "T7,33", "7,33" },
        { "5,7", "T5,7" }, { "", "3,4" }, { "O257", "257" },
        { "O3,130", "O130" }, { "5,75", "O" }, { "O5,1", "75" }
    };
    oc_op op = { 0 };
    size_t s;

    op.name = name;
    op.ninputs = 2;
    op.run = run_binary;
    op.ref = ref_binary;
    op.lo[0] = alo;
    op.hi[0] = ahi;
    op.lo[1] = blo;
    op.hi[1] = bhi;
    for (s = 0; s < sizeof pairs / sizeof pairs[0]; s++)
        oc_check(&op, &kind, pairs[s][0], pairs[s][1]);
}

START_TEST(binary_ops_broadcast_and_match)
{
    check_binary("add", B_ADD, -2, 2, -2, 2);
    check_binary("sub", B_SUB, -2, 2, -2, 2);
    check_binary("mul", B_MUL, -2, 2, -2, 2);
    check_binary("div", B_DIV, -2, 2, 0.5, 3);
    check_binary("pow", B_POW, 0.3, 3, -2, 2);
    check_binary("maximum", B_MAX, -2, 2, -2, 2);
    check_binary("minimum", B_MIN, -2, 2, -2, 2);
}
END_TEST

static cg_tensor *
run_where(cg_tensor **in, const void *param)
{
    (void)param;
    return cg_where(in[0], in[1], in[2]);
}

static void
ref_where(const oc_tensor *in, oc_tensor *out, const void *param)
{
    oc_tensor ab;
    int64_t i;

    (void)param;
    oc_bcast_shape(&in[1], &in[2], &ab);
    oc_bcast_shape(&in[0], &ab, out);
    oc_alloc(out);
    for (i = 0; i < out->numel; i++) {
        double c = in[0].data[oc_bcast_index(&in[0], out->ndim, out->shape,
                                             i)];

        out->data[i] = c != 0
            ? in[1].data[oc_bcast_index(&in[1], out->ndim, out->shape, i)]
            : in[2].data[oc_bcast_index(&in[2], out->ndim, out->shape, i)];
    }
}

START_TEST(where_selects_and_routes_gradients)
{
    oc_op op = { 0 };
    int t;

    op.name = "where";
    op.ninputs = 3;
    op.run = run_where;
    op.ref = ref_where;
    op.lo[0] = 0;
    op.hi[0] = 2;        /* int32 conditions 0 or 1 */
    op.no_grad[0] = 1;
    for (t = 0; t < 2; t++) {
        op.dtype[0] = t ? CG_F32 : CG_I32;
        if (t) {
            /* float conditions: about half exactly zero */
            op.lo[0] = -1;
            op.hi[0] = 1;
        }
        oc_check(&op, NULL, "7,33", "7,33", "7,33");
        oc_check(&op, NULL, "33", "7,33", "1");
        oc_check(&op, NULL, "7,1", "1,33", "7,33");
        oc_check(&op, NULL, "257", "257", "257");
    }
}
END_TEST

/* ------------------------------------------------------------- reductions */

enum { R_SUM, R_MEAN, R_MAX, R_VAR };

typedef struct { int kind, naxes, axes[4], keepdim, correction; } rparam;

static cg_tensor *
run_reduce(cg_tensor **in, const void *param)
{
    const rparam *p = param;

    switch (p->kind) {
    case R_SUM: return cg_sum(in[0], p->naxes, p->axes, p->keepdim);
    case R_MEAN: return cg_mean(in[0], p->naxes, p->axes, p->keepdim);
    case R_MAX: return cg_max(in[0], p->naxes, p->axes, p->keepdim);
    default: return cg_var(in[0], p->naxes, p->axes, p->keepdim,
                           p->correction);
    }
}

static void
ref_reduce(const oc_tensor *in, oc_tensor *out, const void *param)
{
    const rparam *p = param;
    const oc_tensor *x = &in[0];
    int red[CG_MAX_DIMS] = { 0 }, d, k;
    int64_t kshape[CG_MAX_DIMS], i, o, n = 1;
    double *acc, *acc2, *best;

    for (k = 0; k < (p->naxes ? p->naxes : x->ndim); k++)
        red[p->naxes ? (p->axes[k] + x->ndim) % x->ndim : k] = 1;
    out->ndim = 0;
    for (d = 0; d < x->ndim; d++) {
        kshape[d] = red[d] ? 1 : x->shape[d];
        if (red[d])
            n *= x->shape[d];
        if (!red[d] || p->keepdim)
            out->shape[out->ndim++] = kshape[d];
    }
    oc_alloc(out);
    acc = calloc((size_t)out->numel, sizeof *acc);
    acc2 = calloc((size_t)out->numel, sizeof *acc2);
    best = malloc((size_t)out->numel * sizeof *best);
    for (o = 0; o < out->numel; o++)
        best[o] = -INFINITY;
    for (i = 0; i < x->numel; i++) {
        /* The output index: x's index with reduced coordinates dropped. */
        int64_t r = i, mul = 1;

        o = 0;
        for (d = x->ndim - 1; d >= 0; d--) {
            int64_t c = r % x->shape[d];

            r /= x->shape[d];
            if (!red[d]) {
                o += c * mul;
                mul *= x->shape[d];
            }
        }
        acc[o] += x->data[i];
        if (x->data[i] > best[o])
            best[o] = x->data[i];
    }
    for (i = 0; i < x->numel && p->kind == R_VAR; i++) {
        int64_t r = i, mul = 1;

        o = 0;
        for (d = x->ndim - 1; d >= 0; d--) {
            int64_t c = r % x->shape[d];

            r /= x->shape[d];
            if (!red[d]) {
                o += c * mul;
                mul *= x->shape[d];
            }
        }
        acc2[o] += (x->data[i] - acc[o] / n) * (x->data[i] - acc[o] / n);
    }
    for (o = 0; o < out->numel; o++)
        out->data[o] = p->kind == R_SUM ? acc[o]
                     : p->kind == R_MEAN ? acc[o] / n
                     : p->kind == R_MAX ? best[o]
                     : acc2[o] / (n - p->correction);
    free(acc);
    free(acc2);
    free(best);
}

static void
check_reduce(const char *name, int kind)
{
    static const struct { const char *shape; int naxes, axes[3]; } cases[] = {
        { "257", 0, { 0 } }, { "1", 0, { 0 } }, { "7,33", 1, { 1 } },
        { "7,33", 1, { 0 } }, { "7,33", 1, { -1 } }, { "3,5,7", 2, { 0, 2 } },
        { "3,5,7", 1, { 1 } }, { "T7,33", 1, { 1 } }, { "T5,9", 1, { 0 } },
        { "2,3,4,5", 3, { 3, 0, 1 } }, { "33,257", 1, { 1 } },
        { "257,7", 1, { 0 } }, { "O257", 0, { 0 } }, { "O3,130", 1, { 1 } },
        { "70,41", 1, { 0 } }, { "O70,41", 1, { 0 } }
    };
    oc_op op = { 0 };
    size_t c;
    int keep;

    op.name = name;
    op.ninputs = 1;
    op.run = run_reduce;
    op.ref = ref_reduce;
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (keep = 0; keep < 2; keep++) {
            rparam p = { kind, cases[c].naxes, { 0 }, keep, 1 };

            memcpy(p.axes, cases[c].axes, sizeof cases[c].axes);
            if (kind == R_VAR && strcmp(cases[c].shape, "1") == 0)
                p.correction = 0;
            oc_check(&op, &p, cases[c].shape);
        }
}

START_TEST(reductions_over_any_axes)
{
    check_reduce("sum", R_SUM);
    check_reduce("mean", R_MEAN);
    check_reduce("max", R_MAX);
    check_reduce("var", R_VAR);
}
END_TEST

START_TEST(reductions_are_bit_identical_between_runs)
{
    int64_t shape[2] = { 33, 4099 };
    cg_tensor *x = cg_rand_normal(tt_ctx(), 2, shape, 0.0f, 3.0f);
    int axes[1] = { 1 }, run, kind;
    float first[33], again[33];

    ck_assert_ptr_nonnull(x);
    for (kind = 0; kind < 3; kind++)
        for (run = 0; run < 3; run++) {
            cg_tensor *s = kind == 0 ? cg_sum(x, 0, NULL, 0)
                         : kind == 1 ? cg_sum(x, 1, axes, 0)
                         : cg_var(x, 1, axes, 0, 1);
            size_t n = (size_t)cg_tensor_numel(s) * sizeof(float);

            ck_assert_int_eq(cg_tensor_to_host(s, run ? again : first, n),
                             CG_OK);
            if (run)
                ck_assert_int_eq(memcmp(first, again, n), 0);
            cg_tensor_free(s);
        }
    cg_tensor_free(x);
}
END_TEST

/* Sums too large for the finite differences of oc_check: the full sum and
 * row sums that take reduce_rows's two passes, column sums of many chunks
 * of rows with a partial block of columns, at element offsets that no
 * vector width divides; forward only, against sums in double.  The error
 * is normalised by the sum of |x| (float32 sums of n terms in any order
 * stay within a few n * 6e-8 of it; these orders, vectors and trees, stay
 * far below 1e-5). */
static void
check_large_sum(int64_t R, int64_t C, int which, int offset, int mean)
{
    int64_t n = R * C, i, r, c, nout = which == 0 ? 1 : which == 1 ? R : C;
    int64_t full = n + offset, shape[2] = { R, C };
    float *host = malloc((size_t)full * sizeof *host);
    float *got = malloc((size_t)nout * sizeof *got);
    double *ref = calloc((size_t)nout, sizeof *ref);
    double *mag = calloc((size_t)nout, sizeof *mag);
    int axes[1] = { which == 1 ? 1 : 0 };
    cg_tensor *base, *flat, *x, *y;

    for (i = 0; i < full; i++)
        host[i] = (float)oc_uniform(-2, 2);
    for (r = 0; r < R; r++)
        for (c = 0; c < C; c++) {
            double v = host[offset + r * C + c];
            int64_t o = which == 0 ? 0 : which == 1 ? r : c;

            ref[o] += v;
            mag[o] += fabs(v);
        }
    base = cg_tensor_from_host(tt_ctx(), CG_F32, 1, &full, host);
    ck_assert_msg(base != NULL, "%s", cg_last_error());
    flat = cg_narrow(base, 0, offset, n);
    ck_assert_ptr_nonnull(flat);
    x = cg_reshape(flat, 2, shape);
    ck_assert_ptr_nonnull(x);
    y = mean ? cg_mean(x, which ? 1 : 0, axes, 0)
             : cg_sum(x, which ? 1 : 0, axes, 0);
    ck_assert_msg(y != NULL, "%s", cg_last_error());
    ck_assert_int_eq(cg_tensor_numel(y), nout);
    ck_assert_int_eq(cg_tensor_to_host(y, got, (size_t)nout * sizeof *got),
                     CG_OK);
    for (i = 0; i < nout; i++) {
        double div = mean ? (double)(n / nout) : 1.0;
        double err = fabs(got[i] - ref[i] / div) / (mag[i] / div + 1e-30);

        ck_assert_msg(err < 1e-5, "%s [%lld,%lld] over %s, offset %d: "
                      "output %lld is %.9g, not %.9g (error %.3g)",
                      mean ? "mean" : "sum", (long long)R, (long long)C,
                      which == 0 ? "all" : which == 1 ? "rows" : "columns",
                      offset, (long long)i, got[i], ref[i] / div, err);
    }
    cg_tensor_free(y);
    cg_tensor_free(x);
    cg_tensor_free(flat);
    cg_tensor_free(base);
    free(host);
    free(got);
    free(ref);
    free(mag);
}

START_TEST(large_sums_match_reference)
{
    check_large_sum(1, 32775, 0, 0, 0);
    check_large_sum(1, 32775, 0, 3, 1);
    check_large_sum(1000, 1003, 0, 1, 0);
    check_large_sum(3, 40001, 1, 5, 0);
    check_large_sum(3, 40001, 1, 0, 1);
    check_large_sum(2049, 77, 2, 3, 0);
    check_large_sum(3001, 1, 0, 0, 0);
    check_large_sum(1001, 64, 2, 0, 1);
}
END_TEST

/* ------------------------------------------------------------------ views */

enum { V_RESHAPE, V_TRANSPOSE, V_PERMUTE, V_NARROW, V_EXPAND, V_SQUEEZE,
       V_UNSQUEEZE, V_CONTIGUOUS };

typedef struct { int kind; int64_t a[4]; int nd; int64_t shape[4]; } vparam;

static cg_tensor *
run_view(cg_tensor **in, const void *param)
{
    const vparam *p = param;
    int perm[4] = { (int)p->a[0], (int)p->a[1], (int)p->a[2], (int)p->a[3] };
    cg_tensor *v, *y;

    switch (p->kind) {
    case V_RESHAPE: v = cg_reshape(in[0], p->nd, p->shape); break;
    case V_TRANSPOSE: v = cg_transpose(in[0], (int)p->a[0], (int)p->a[1]);
                      break;
    case V_PERMUTE: v = cg_permute(in[0], perm); break;
    case V_NARROW: v = cg_narrow(in[0], (int)p->a[0], p->a[1], p->a[2]);
                   break;
    case V_EXPAND: v = cg_expand(in[0], p->nd, p->shape); break;
    case V_SQUEEZE: v = cg_squeeze(in[0], (int)p->a[0]); break;
    case V_UNSQUEEZE: v = cg_unsqueeze(in[0], (int)p->a[0]); break;
    default: v = cg_contiguous(in[0]); break;
    }
    if (!v)
        return NULL;
    /* Multiply by a constant so that the gradient is not trivially the
     * upstream one and the view is read by a kernel. */
    y = cg_mul_scalar(v, 1.5f);
    cg_tensor_free(v);
    return y;
}

/* Host version of the views: compute the output by index mapping. */
static void
ref_view(const oc_tensor *in, oc_tensor *out, const void *param)
{
    const vparam *p = param;
    const oc_tensor *x = &in[0];
    int64_t xs[CG_MAX_DIMS], i, s = 1;
    int d, perm[CG_MAX_DIMS], nd = x->ndim;

    for (d = nd - 1; d >= 0; d--) {
        xs[d] = s;
        s *= x->shape[d];
    }
    for (d = 0; d < nd; d++)
        perm[d] = d;
    switch (p->kind) {
    case V_RESHAPE: case V_EXPAND:
        out->ndim = p->nd;
        memcpy(out->shape, p->shape, sizeof p->shape);
        for (d = 0, s = 1; d < p->nd; d++)
            s *= p->shape[d] > 0 ? p->shape[d] : 1;
        for (d = 0; d < p->nd; d++)
            if (out->shape[d] == -1)
                out->shape[d] = x->numel / s;   /* the inferred size */
        break;
    case V_TRANSPOSE:
        perm[p->a[0]] = (int)p->a[1];
        perm[p->a[1]] = (int)p->a[0];
        /* fall through */
    case V_PERMUTE:
        if (p->kind == V_PERMUTE)
            for (d = 0; d < nd; d++)
                perm[d] = (int)p->a[d];
        out->ndim = nd;
        for (d = 0; d < nd; d++)
            out->shape[d] = x->shape[perm[d]];
        break;
    case V_NARROW:
        out->ndim = nd;
        memcpy(out->shape, x->shape, sizeof x->shape);
        out->shape[p->a[0]] = p->a[2];
        break;
    case V_SQUEEZE:
        out->ndim = 0;
        for (d = 0; d < nd; d++)
            if (d != p->a[0])
                out->shape[out->ndim++] = x->shape[d];
        break;
    case V_UNSQUEEZE:
        out->ndim = 0;
        for (d = 0; d <= nd; d++) {
            if (d == p->a[0])
                out->shape[out->ndim++] = 1;
            if (d < nd)
                out->shape[out->ndim++] = x->shape[d];
        }
        break;
    default:
        out->ndim = nd;
        memcpy(out->shape, x->shape, sizeof x->shape);
    }
    oc_alloc(out);
    for (i = 0; i < out->numel; i++) {
        int64_t src = i;

        if (p->kind == V_TRANSPOSE || p->kind == V_PERMUTE ||
            p->kind == V_NARROW) {
            int64_t r = i;

            src = 0;
            for (d = nd - 1; d >= 0; d--) {
                int64_t c = r % out->shape[d];

                r /= out->shape[d];
                if (p->kind == V_NARROW)
                    src += (c + (d == p->a[0] ? p->a[1] : 0)) * xs[d];
                else
                    src += c * xs[perm[d]];
            }
        } else if (p->kind == V_EXPAND) {
            src = oc_bcast_index(x, out->ndim, out->shape, i);
        }
        out->data[i] = 1.5 * x->data[src];
    }
}

START_TEST(views_and_their_gradients)
{
    oc_op op = { 0 };
    vparam p;

    op.name = "views";
    op.ninputs = 1;
    op.run = run_view;
    op.ref = ref_view;

    memset(&p, 0, sizeof p);
    p.kind = V_RESHAPE; p.nd = 3; p.shape[0] = 3; p.shape[1] = -1;
    p.shape[2] = 7;
    op.name = "reshape";
    /* -1 is inferred: the reference needs the real shape. */
    {
        vparam q = p;

        q.shape[1] = 11;
        oc_check(&op, &q, "33,7");
        oc_check(&op, &p, "33,7");
        oc_check(&op, &q, "T33,7");   /* a copy, not a view */
    }
    op.name = "transpose";
    p.kind = V_TRANSPOSE; p.a[0] = 0; p.a[1] = 2;
    oc_check(&op, &p, "3,5,7");
    op.name = "permute";
    p.kind = V_PERMUTE; p.a[0] = 2; p.a[1] = 0; p.a[2] = 1;
    oc_check(&op, &p, "3,5,7");
    oc_check(&op, &p, "T3,5,7");
    op.name = "narrow";
    p.kind = V_NARROW; p.a[0] = 1; p.a[1] = 3; p.a[2] = 20;
    oc_check(&op, &p, "7,33");
    oc_check(&op, &p, "T7,33");
    p.a[0] = 0; p.a[1] = 256; p.a[2] = 1;
    oc_check(&op, &p, "257");
    op.name = "expand";
    p.kind = V_EXPAND; p.nd = 3; p.shape[0] = 4; p.shape[1] = 7;
    p.shape[2] = 33;
    oc_check(&op, &p, "7,1");
    oc_check(&op, &p, "33");
    oc_check(&op, &p, "1,7,33");
    op.name = "squeeze";
    p.kind = V_SQUEEZE; p.a[0] = 1;
    oc_check(&op, &p, "7,1,33");
    op.name = "unsqueeze";
    p.kind = V_UNSQUEEZE; p.a[0] = 2;
    oc_check(&op, &p, "7,33");
    p.a[0] = 0;
    oc_check(&op, &p, "T7,33");
    op.name = "contiguous";
    p.kind = V_CONTIGUOUS;
    oc_check(&op, &p, "T7,33");
    oc_check(&op, &p, "7,33");
}
END_TEST

/* Asserts that the last call failed with `status` and a message that
 * contains `part`. */
static void
expect_error(const void *result, int status, const char *part)
{
    const char *e = cg_last_error();

    ck_assert_ptr_null(result);
    ck_assert_msg(strstr(e, cg_status_name(status)) == e,
                  "wanted %s, got: %s", cg_status_name(status), e);
    ck_assert_msg(strstr(e, part) != NULL, "'%s' not in: %s", part, e);
}

/* The tensor a[2, 3] = 0..5 is as it was. */
static void
expect_intact(cg_tensor *a)
{
    float h[6];
    int i;

    ck_assert_int_eq(cg_tensor_ndim(a), 2);
    ck_assert_int_eq(cg_tensor_dim(a, 0), 2);
    ck_assert_int_eq(cg_tensor_dim(a, 1), 3);
    ck_assert_int_eq(cg_tensor_to_host(a, h, sizeof h), CG_OK);
    for (i = 0; i < 6; i++)
        ck_assert_float_eq(h[i], (float)i);
}

/* ------------------------------------------------------------------ copies */

/* One strided copy: a view of base (values: their own index mod 200,
 * exact in bfloat16 too) of shape and strides (elements) from off,
 * copied contiguous; with dst_strides not NULL, a contiguous source of
 * the view's values copied into such a view of zeros instead. */
typedef struct {
    int nd;
    int64_t shape[5], strides[5], off;
} copy_case;

static void
check_copy(cg_dtype dt, const copy_case *c, int into)
{
    int64_t blen = 4096, n = 1, i, idx[5], o;
    float *host = malloc((size_t)blen * sizeof *host), *got;
    cg_tensor *base, *v, *out, *f;
    int d;

    ck_assert_ptr_nonnull(host);
    for (i = 0; i < blen; i++)
        host[i] = (float)(i % 200);
    for (d = 0; d < c->nd; d++)
        n *= c->shape[d];
    got = malloc((size_t)(into ? blen : n) * sizeof *got);
    ck_assert_ptr_nonnull(got);
    base = cg_tensor_from_host_f32(tt_ctx(), dt, 1, &blen, host);
    ck_assert_msg(base != NULL, "%s", TT_ERR);
    if (into) {                 /* contiguous source -> strided target */
        cg_tensor *src = cg_tensor_from_host_f32(tt_ctx(), dt, c->nd,
                                                 c->shape, host);

        ck_assert_msg(src && cg__fill(base, 0.0f) == CG_OK, "%s", TT_ERR);
        v = cg__tensor_view(base, c->nd, c->shape, c->strides, c->off);
        ck_assert_msg(v && cg__copy_into(v, src) == CG_OK, "%s", TT_ERR);
        cg_tensor_free(src);
        out = cg_tensor_ref(base);
    } else {
        v = cg__tensor_view(base, c->nd, c->shape, c->strides, c->off);
        ck_assert_msg(v != NULL, "%s", TT_ERR);
        out = cg__copy_contiguous(v);
        ck_assert_msg(out != NULL, "%s", TT_ERR);
    }
    f = cg_to_dtype(out, CG_F32);
    ck_assert_msg(f && cg_tensor_to_host_f32(f, got, (size_t)(into ? blen
                                                                   : n)) ==
                       CG_OK, "%s", TT_ERR);
    memset(idx, 0, sizeof idx);
    for (i = 0; i < n; i++) {
        float want;

        for (d = 0, o = c->off; d < c->nd; d++)
            o += idx[d] * c->strides[d];
        want = into ? host[i] : host[o];
        ck_assert_msg((into ? got[o] : got[i]) == want,
                      "dtype %d, %d dims, %s, element %lld: %g, not %g",
                      (int)dt, c->nd, into ? "into" : "from",
                      (long long)i, into ? got[o] : got[i], want);
        if (into)
            got[o] = 0.0f;      /* seen: the rest must still be zeros */
        for (d = c->nd - 1; d >= 0 && ++idx[d] == c->shape[d]; d--)
            idx[d] = 0;
    }
    for (i = 0; into && i < blen; i++)
        ck_assert_msg(got[i] == 0.0f, "element %lld outside the view "
                      "written: %g", (long long)i, got[i]);
    cg_tensor_free(f);
    cg_tensor_free(out);
    cg_tensor_free(v);
    cg_tensor_free(base);
    free(got);
    free(host);
}

/* cg__copy_into through views of every layout its row kernel meets:
 * rows shorter than a work-item's chunk (many rows each, their index
 * carried across two and three dimensions) and longer, innermost strides
 * of 1, 15, -1 and 0, 1 to 5 dimensions; out of such views and into
 * them; 32-bit and 16-bit words: the host's index arithmetic. */
START_TEST(strided_copies_match_host)
{
    static const copy_case cases[] = {
        { 3, { 3, 5, 7 }, { 1, 3, 15 }, 0 },             /* permuted */
        { 3, { 4, 3, 3 }, { 9, -3, -1 }, 8 },            /* flipped */
        { 4, { 2, 3, 5, 16 }, { 300, 100, 20, 1 }, 2 },  /* padded rows */
        { 2, { 3, 200 }, { 211, 1 }, 5 },                /* long rows */
        { 1, { 70 }, { 2 }, 1 },
        { 2, { 4, 6 }, { 0, 1 }, 3 },                    /* expanded */
        { 5, { 2, 1, 3, 2, 5 }, { 1, 7, 60, 2, 12 }, 0 },
        { 3, { 5, 7, 3 }, { 21, 3, 1 }, 0 },             /* contiguous */
        { 1, { 1 }, { 1 }, 4095 },
    };
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        check_copy(CG_F32, &cases[i], 0);
        check_copy(CG_BF16, &cases[i], 0);
        /* into: views that do not overlap themselves */
        if (cases[i].strides[0] != 0)
            check_copy(i % 2 ? CG_BF16 : CG_F32, &cases[i], 1);
    }
}
END_TEST

/* Issue 16, defects 1 and 2: shapes whose products or ranges overflow
 * int64 wrapped around to small, plausible values, were accepted, and
 * crashed later (reduce_rows read past its buffer; a narrow view read
 * before the storage or ran memcpy off the end).  Each is refused with
 * CG_ESHAPE naming the values, and the input is untouched. */
START_TEST(shape_arithmetic_cannot_overflow)
{
    static const float data[6] = { 0, 1, 2, 3, 4, 5 };
    const int64_t wrap[2] = { 9, 6148914691236517206LL };  /* 2^64 + 6 */
    const int64_t wrap3[2] = { 3, 6148914691236517206LL }; /* 2^64 + 2 */
    const int64_t huge[2] = { INT64_MAX, INT64_MAX };
    const int64_t infer[3] = { 2, 9223372036854775805LL, -1 };
    const int64_t two_three[2] = { 2, 3 }, one[1] = { 1 };
    const int64_t big[2] = { 2, 1LL << 31 };
    const int64_t wide[2] = { 2, INT64_MAX };
    const int64_t split_sizes[3] = { INT64_MAX, INT64_MAX, 5 };
    cg_context *ctx = tt_ctx();
    cg_tensor *a, *v, *parts[4];
    float h[2];

    expect_error(cg_tensor_new(ctx, CG_F32, 2, wrap), CG_ESHAPE,
                 "[9, 6148914691236517206]");
    expect_error(cg_zeros(ctx, 2, wrap3), CG_ESHAPE,
                 "[3, 6148914691236517206] has more than 2^31-1 elements");
    expect_error(cg_zeros(ctx, 2, huge), CG_ESHAPE, "2^31-1");
    expect_error(cg_tensor_from_host(ctx, CG_F32, 2, wrap, data), CG_ESHAPE,
                 "6148914691236517206");

    a = cg_tensor_from_host(ctx, CG_F32, 2, two_three, data);
    ck_assert_ptr_nonnull(a);
    expect_error(cg_reshape(a, 2, wrap), CG_ESHAPE,
                 "cannot reshape [2, 3] (6 elements) to "
                 "[9, 6148914691236517206]");
    expect_error(cg_reshape(a, 3, infer), CG_ESHAPE,
                 "[2, 9223372036854775805, -1]");
    expect_error(cg_reshape(a, 2, huge), CG_ESHAPE, "cannot reshape");

    expect_error(cg_narrow(a, 1, INT64_MAX - 807, 808), CG_ESHAPE,
                 "cg_narrow: start 9223372036854775000 + length 808 exceeds "
                 "dimension 1 of size 3 of a [2, 3]");
    expect_error(cg_narrow(a, 1, INT64_MAX, 2), CG_ESHAPE,
                 "start 9223372036854775807 + length 2 exceeds");
    expect_error(cg_narrow(a, 1, 1, INT64_MAX), CG_ESHAPE,
                 "length 9223372036854775807 exceeds");
    expect_error(cg_narrow(a, 1, 3, 1), CG_ESHAPE, "start 3 + length 1");
    expect_error(cg_narrow(a, 1, -1, 2), CG_ESHAPE, "start -1 + length 2");
    expect_error(cg_narrow(a, -1, 0, 0), CG_ESHAPE, "length 0");
    expect_error(cg_narrow(a, 0, INT64_MIN, 3), CG_ESHAPE,
                 "start -9223372036854775808");

    v = cg_reshape(a, 1, one);
    expect_error(v, CG_ESHAPE, "cannot reshape");
    v = cg_narrow(a, 1, 1, 1);
    expect_error(cg_expand(v, 2, wide), CG_ESHAPE,
                 "cannot expand [2, 1] to [2, 9223372036854775807]: more "
                 "than 2^31-1 elements");
    {
        const int64_t lead[3] = { 3, 2, 6148914691236517206LL };

        expect_error(cg_expand(v, 3, lead), CG_ESHAPE,
                     "[3, 2, 6148914691236517206]: more than 2^31-1");
    }
    expect_error(cg_expand(v, 2, big), CG_ESHAPE,
                 "[2, 2147483648]: more than 2^31-1");
    ck_assert_int_eq(cg_split(a, 1, 3, split_sizes, parts), CG_ESHAPE);
    ck_assert_ptr_nonnull(strstr(cg_last_error(), "exceed dimension 1"));
    ck_assert_int_eq(cg_split_chunks(a, 1, INT64_MAX, 4, parts), 1);
    ck_assert_int_eq(cg_tensor_dim(parts[0], 1), 3);
    cg_tensor_free(parts[0]);

    /* What is in range still works. */
    ck_assert_int_eq(cg_tensor_to_host(v, h, sizeof h), CG_OK);
    ck_assert_float_eq(h[0], 1.0f);
    ck_assert_float_eq(h[1], 4.0f);
    cg_tensor_free(v);
    v = cg_narrow(a, 1, 2, 1);
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(cg_tensor_to_host(v, h, sizeof h), CG_OK);
    ck_assert_float_eq(h[0], 2.0f);
    ck_assert_float_eq(h[1], 5.0f);
    cg_tensor_free(v);
    expect_intact(a);
    cg_tensor_free(a);

    /* A buffer over the device's largest allocation, SIZE_MAX included
     * (the pool's size classes would have wrapped around). */
    expect_error(cg_buffer_new(ctx, SIZE_MAX), CG_ENOMEM,
                 "larger than the device's largest allocation");
    expect_error(cg_buffer_new(ctx, SIZE_MAX - 300), CG_ENOMEM,
                 "largest allocation");
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
    Suite *s = suite_create("ops");
    TCase *tc = tcase_create("ops");

    tt_require_device();
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, unary_ops_match_reference_and_finite_differences);
    tcase_add_test(tc, binary_ops_broadcast_and_match);
    tcase_add_test(tc, where_selects_and_routes_gradients);
    tcase_add_test(tc, reductions_over_any_axes);
    tcase_add_test(tc, reductions_are_bit_identical_between_runs);
    tcase_add_test(tc, large_sums_match_reference);
    tcase_add_test(tc, views_and_their_gradients);
    tcase_add_test(tc, shape_arithmetic_cannot_overflow);
    tcase_add_test(tc, strided_copies_match_host);
    tcase_add_test(tc, print_error_table);
    suite_add_tcase(s, tc);
    return tt_run(s);
}
