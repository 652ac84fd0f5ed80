/* SPDX-License-Identifier: MIT */
/*
 * tests/test_higher_order.c - gradients of gradients (create_graph): a
 * gradgradcheck for every op with a double backward, Hessian-vector
 * products (cg_hvp) of a small MLP with cross entropy, a WGAN-style
 * gradient penalty's parameter gradient, gradients taken three times,
 * cg_grad leaving every leaf's grad alone, and CG_EUNSUPPORTED naming an
 * op without a double backward.
 *
 * gradgradcheck, for an op y = F(x1..xn), a random upstream U (requiring
 * grad) and random directions W: L = sum(F(x) U), g = dL/dx by cg_grad
 * with create_graph, S = sum_j <g_j, W_j>, and dS/dx_j, dS/dU by a second
 * cg_grad (the double backward).  The reference uses only F's plain C
 * forward in double: S = d/dt L(x + t W) at 0, so dS/dx_i is a nested
 * central difference of L and dS/dU_k = (F_k(x + hW) - F_k(x - hW)) / 2h.
 * Errors are normalised, max |device - reference| / max(1, max |ref|);
 * tolerance 1e-3: the device is float32 through a chain of composites
 * (each a few roundings of 6e-8), the nested differences in double with
 * h = 1e-3 add about h^2 |F''''| <= 1e-5; a wrong formula misses by
 * orders of magnitude.  The first gradient g is checked on the way
 * (central differences of L) to the same tolerance.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "ops/internal.h"
#include "opcheck.h"
#include "testutil.h"

#define GG_TOL 1e-3
#define GG_H 1e-3

typedef struct gg_case {
    const char *name;
    int n;
    const char *shapes[4];
    double lo[4], hi[4];
    double away;            /* inputs at least this far from 0 (kinks) */
    cg_tensor *(*run)(cg_tensor **x);
    void (*ref)(const oc_tensor *in, oc_tensor *out);
} gg_case;

/* ------------------------------------------------------------------------
 * Host references (double)
 * ------------------------------------------------------------------------ */

#define UNARY(NAME, EXPR)                                                    \
    static void                                                              \
    ref_##NAME(const oc_tensor *in, oc_tensor *out)                          \
    {                                                                        \
        int64_t i;                                                           \
                                                                             \
        out->ndim = in[0].ndim;                                              \
        memcpy(out->shape, in[0].shape, sizeof out->shape);                  \
        oc_alloc(out);                                                       \
        for (i = 0; i < out->numel; i++) {                                   \
            double x = in[0].data[i];                                        \
            out->data[i] = (EXPR);                                           \
        }                                                                    \
    }

#define BINARY(NAME, EXPR)                                                   \
    static void                                                              \
    ref_##NAME(const oc_tensor *in, oc_tensor *out)                          \
    {                                                                        \
        int64_t i;                                                           \
                                                                             \
        oc_bcast_shape(&in[0], &in[1], out);                                 \
        oc_alloc(out);                                                       \
        for (i = 0; i < out->numel; i++) {                                   \
            double a = in[0].data[oc_bcast_index(&in[0], out->ndim,          \
                                                 out->shape, i)];            \
            double b = in[1].data[oc_bcast_index(&in[1], out->ndim,          \
                                                 out->shape, i)];            \
            out->data[i] = (EXPR);                                           \
        }                                                                    \
    }

BINARY(add, a + b)
BINARY(sub, a - b)
BINARY(mul, a * b)
BINARY(div, a / b)
BINARY(maximum, (a > b ? a : b) * a * b)
BINARY(minimum, (a < b ? a : b) * a * b)
BINARY(where, (a > 0 ? a : b) * a * b)
UNARY(affine, (2.5 * x - 0.75) * x)
UNARY(neg, -x * x * x)
UNARY(pow_scalar, pow(x, 2.5))
UNARY(exp, exp(x))
UNARY(log, log(x))
UNARY(sqrt, sqrt(x))
UNARY(tanh, tanh(x))
UNARY(sigmoid, 1.0 / (1.0 + exp(-x)))
UNARY(abs, fabs(x) * x)
UNARY(relu, (x > 0 ? x : 0) * x)
UNARY(leaky_relu, (x > 0 ? x : 0.1 * x) * x)
UNARY(clamp, (x < -1 ? -1 : x > 1 ? 1 : x) * x)

/* Row reductions of [R, C] along C: kind 0 sum, 1 mean, 2 var, 3 max,
 * all cubed so that the second derivative is not zero. */
static void
ref_rows(const oc_tensor *in, oc_tensor *out, int kind)
{
    int64_t R = in[0].shape[0], C = in[0].shape[1], r, c;

    out->ndim = 1;
    out->shape[0] = R;
    oc_alloc(out);
    for (r = 0; r < R; r++) {
        const double *x = in[0].data + r * C;
        double s = 0, m, v = 0, mx = x[0];

        for (c = 0; c < C; c++) {
            s += x[c];
            mx = x[c] > mx ? x[c] : mx;
        }
        m = s / (double)C;
        for (c = 0; c < C; c++)
            v += (x[c] - m) * (x[c] - m);
        v /= (double)(C - 1);
        s = kind == 0 ? s : kind == 1 ? m : kind == 2 ? v : mx;
        out->data[r] = s * s * s;
    }
}

static void ref_sum(const oc_tensor *in, oc_tensor *o) { ref_rows(in, o, 0); }
static void ref_mean(const oc_tensor *in, oc_tensor *o) { ref_rows(in, o, 1); }
static void ref_var(const oc_tensor *in, oc_tensor *o) { ref_rows(in, o, 2); }
static void ref_max(const oc_tensor *in, oc_tensor *o) { ref_rows(in, o, 3); }

/* mean of all x^2, squared */
static void
ref_mean_all(const oc_tensor *in, oc_tensor *out)
{
    double s = 0;
    int64_t i;

    out->ndim = 0;
    oc_alloc(out);
    for (i = 0; i < in[0].numel; i++)
        s += in[0].data[i] * in[0].data[i];
    s /= (double)in[0].numel;
    out->data[0] = s * s;
}

/* [B..., M, K] @ [K, N] (a's batch only), either op transposed. */
static void
ref_mm(const oc_tensor *a, int ta, const oc_tensor *b, int tb,
       oc_tensor *out)
{
    int na = a->ndim;
    int64_t M = ta ? a->shape[na - 1] : a->shape[na - 2];
    int64_t K = ta ? a->shape[na - 2] : a->shape[na - 1];
    int64_t N = tb ? b->shape[0] : b->shape[1];
    int64_t batch = a->numel / (M * K), z, i, j, k;

    out->ndim = na;
    memcpy(out->shape, a->shape, sizeof out->shape);
    out->shape[na - 2] = M;
    out->shape[na - 1] = N;
    oc_alloc(out);
    for (z = 0; z < batch; z++)
        for (i = 0; i < M; i++)
            for (j = 0; j < N; j++) {
                double s = 0;

                for (k = 0; k < K; k++)
                    s += a->data[z * M * K + (ta ? k * M + i : i * K + k)] *
                         b->data[tb ? j * K + k : k * N + j];
                out->data[(z * M + i) * N + j] = s;
            }
}

static void
ref_matmul(const oc_tensor *in, oc_tensor *out)
{
    ref_mm(&in[0], 0, &in[1], 0, out);
}

static void
ref_matmul_tt(const oc_tensor *in, oc_tensor *out)
{
    ref_mm(&in[0], 1, &in[1], 1, out);
}

/* tanh(x W^T + b) */
static void
ref_linear(const oc_tensor *in, oc_tensor *out)
{
    int64_t j, r, N;

    ref_mm(&in[0], 0, &in[1], 1, out);
    N = out->shape[1];
    for (r = 0; r < out->shape[0]; r++)
        for (j = 0; j < N; j++)
            out->data[r * N + j] = tanh(out->data[r * N + j] + in[2].data[j]);
}

/* softmax / log_softmax along dimension 1 of [R, C] (or 0 of [C]) */
static void
ref_softmax_rows(const oc_tensor *in, oc_tensor *out, int logmode)
{
    int64_t C = in[0].shape[in[0].ndim - 1], R = in[0].numel / C, r, c;

    out->ndim = in[0].ndim;
    memcpy(out->shape, in[0].shape, sizeof out->shape);
    oc_alloc(out);
    for (r = 0; r < R; r++) {
        const double *x = in[0].data + r * C;
        double mx = x[0], s = 0;

        for (c = 0; c < C; c++)
            mx = x[c] > mx ? x[c] : mx;
        for (c = 0; c < C; c++)
            s += exp(x[c] - mx);
        for (c = 0; c < C; c++)
            out->data[r * C + c] = logmode ? x[c] - mx - log(s)
                                           : exp(x[c] - mx) / s;
    }
}

static void
ref_softmax(const oc_tensor *in, oc_tensor *o)
{
    ref_softmax_rows(in, o, 0);
}

static void
ref_log_softmax(const oc_tensor *in, oc_tensor *o)
{
    ref_softmax_rows(in, o, 1);
}

/* The class targets of the loss cases: row 1 ignored. */
static const int32_t targets[3] = { 1, CG_IGNORE_INDEX, 4 };
static const int32_t targets2[3] = { 0, 3, 2 };
static cg_tensor *target_dev, *target2_dev;

/* cross entropy (mean, label smoothing 0.1, row 1 ignored) */
static void
ref_ce(const oc_tensor *in, oc_tensor *out)
{
    oc_tensor lp = { 0 };
    int64_t C = in[0].shape[1], r, c, count = 0;
    double s = 0, eps = 0.1;

    ref_softmax_rows(in, &lp, 1);
    for (r = 0; r < in[0].shape[0]; r++) {
        if (targets[r] == CG_IGNORE_INDEX)
            continue;
        count++;
        for (c = 0; c < C; c++)
            s -= ((c == targets[r] ? 1 - eps : 0) + eps / (double)C) *
                 lp.data[r * C + c];
    }
    free(lp.data);
    out->ndim = 0;
    oc_alloc(out);
    out->data[0] = s / (double)count;
}

/* cross entropy, unreduced, no smoothing */
static void
ref_ce_none(const oc_tensor *in, oc_tensor *out)
{
    oc_tensor lp = { 0 };
    int64_t C = in[0].shape[1], r;

    ref_softmax_rows(in, &lp, 1);
    out->ndim = 1;
    out->shape[0] = in[0].shape[0];
    oc_alloc(out);
    for (r = 0; r < in[0].shape[0]; r++)
        out->data[r] = -lp.data[r * C + targets2[r]];
    free(lp.data);
}

/* nll_loss(x^2) summed, row 1 ignored */
static void
ref_nll(const oc_tensor *in, oc_tensor *out)
{
    int64_t C = in[0].shape[1], r;
    double s = 0;

    out->ndim = 0;
    oc_alloc(out);
    for (r = 0; r < in[0].shape[0]; r++)
        if (targets[r] != CG_IGNORE_INDEX)
            s -= in[0].data[r * C + targets[r]] * in[0].data[r * C + targets[r]];
    out->data[0] = s;
}

static void
ref_mse(const oc_tensor *in, oc_tensor *out)
{
    double s = 0;
    int64_t i;

    out->ndim = 0;
    oc_alloc(out);
    for (i = 0; i < in[0].numel; i++)
        s += (in[0].data[i] - in[1].data[i]) * (in[0].data[i] - in[1].data[i]);
    out->data[0] = s / (double)in[0].numel;
}

/* bce_with_logits summed */
static void
ref_bce(const oc_tensor *in, oc_tensor *out)
{
    double s = 0;
    int64_t i;

    out->ndim = 0;
    oc_alloc(out);
    for (i = 0; i < in[0].numel; i++) {
        double x = in[0].data[i], t = in[1].data[i];

        s += (x > 0 ? x : 0) - x * t + log(1 + exp(-fabs(x)));
    }
    out->data[0] = s;
}

/* Views of [3, 5], squared: transpose; narrow(1, 1, 3); reshape to [5, 3];
 * concat(x, x) along 0; expand of [3, 1] to [3, 4]. */
static void
ref_view(const oc_tensor *in, oc_tensor *out, int kind)
{
    const double *x = in[0].data;
    int64_t i, j;

    out->ndim = 2;
    if (kind == 0) {
        out->shape[0] = 5, out->shape[1] = 3;
        oc_alloc(out);
        for (i = 0; i < 5; i++)
            for (j = 0; j < 3; j++)
                out->data[i * 3 + j] = x[j * 5 + i] * x[j * 5 + i];
    } else if (kind == 1) {
        out->shape[0] = 3, out->shape[1] = 3;
        oc_alloc(out);
        for (i = 0; i < 3; i++)
            for (j = 0; j < 3; j++)
                out->data[i * 3 + j] = x[i * 5 + j + 1] * x[i * 5 + j + 1];
    } else if (kind == 2) {
        out->shape[0] = 5, out->shape[1] = 3;
        oc_alloc(out);
        for (i = 0; i < 15; i++)
            out->data[i] = x[i] * x[i];
    } else if (kind == 3) {
        out->shape[0] = 6, out->shape[1] = 5;
        oc_alloc(out);
        for (i = 0; i < 30; i++)
            out->data[i] = x[i % 15] * x[i % 15];
    } else {
        out->shape[0] = 3, out->shape[1] = 4;
        oc_alloc(out);
        for (i = 0; i < 3; i++)
            for (j = 0; j < 4; j++)
                out->data[i * 4 + j] = x[i] * x[i];
    }
}

static void ref_transpose(const oc_tensor *in, oc_tensor *o)
{ ref_view(in, o, 0); }
static void ref_narrow(const oc_tensor *in, oc_tensor *o)
{ ref_view(in, o, 1); }
static void ref_reshape(const oc_tensor *in, oc_tensor *o)
{ ref_view(in, o, 2); }
static void ref_concat(const oc_tensor *in, oc_tensor *o)
{ ref_view(in, o, 3); }
static void ref_expand(const oc_tensor *in, oc_tensor *o)
{ ref_view(in, o, 4); }

/* ------------------------------------------------------------------------
 * Device ops
 * ------------------------------------------------------------------------ */

/* Temporaries of nested op calls, freed by drop_temps (the graph keeps
 * what it needs). */
static cg_tensor *temps[64];
static int ntemps;

static cg_tensor *
T(cg_tensor *t)
{
    ck_assert_msg(t != NULL, "%s", TT_ERR);
    ck_assert_int_lt(ntemps, 64);
    temps[ntemps++] = t;
    return t;
}

static void
drop_temps(void)
{
    while (ntemps > 0)
        cg_tensor_free(temps[--ntemps]);
}

/* f(y) * x for an op f of x alone: a nonzero second derivative for the
 * linear and piecewise-linear ones. */
static cg_tensor *
times(cg_tensor *y, cg_tensor *x)
{
    cg_tensor *r = y ? cg_mul(y, x) : NULL;

    cg_tensor_free(y);
    return r;
}

static cg_tensor *
cube(cg_tensor *y)
{
    cg_tensor *r = y ? cg_pow_scalar(y, 3.0f) : NULL;

    cg_tensor_free(y);
    return r;
}

static cg_tensor *
square(cg_tensor *y)
{
    cg_tensor *r = y ? cg_mul(y, y) : NULL;

    cg_tensor_free(y);
    return r;
}

static cg_tensor *run_add(cg_tensor **x) { return cg_add(x[0], x[1]); }
static cg_tensor *run_sub(cg_tensor **x) { return cg_sub(x[0], x[1]); }
static cg_tensor *run_mul(cg_tensor **x) { return cg_mul(x[0], x[1]); }
static cg_tensor *run_div(cg_tensor **x) { return cg_div(x[0], x[1]); }

static cg_tensor *
ab_times(cg_tensor *y, cg_tensor **x)
{
    cg_tensor *ab = cg_mul(x[0], x[1]), *r = y && ab ? cg_mul(y, ab) : NULL;

    cg_tensor_free(y);
    cg_tensor_free(ab);
    return r;
}

static cg_tensor *run_maximum(cg_tensor **x)
{ return ab_times(cg_maximum(x[0], x[1]), x); }
static cg_tensor *run_minimum(cg_tensor **x)
{ return ab_times(cg_minimum(x[0], x[1]), x); }

static cg_tensor *
run_where(cg_tensor **x)
{
    cg_tensor *c;

    /* cond = a > 0, made without a graph: relu(a) / a is 1 or 0 */
    cg_no_grad_enter();
    c = T(cg_div(T(cg_relu(x[0])), x[0]));
    cg_no_grad_leave();
    return ab_times(cg_where(c, x[0], x[1]), x);
}

static cg_tensor *run_affine(cg_tensor **x)
{ return times(cg_add_scalar(T(cg_mul_scalar(x[0], 2.5f)), -0.75f), x[0]); }
static cg_tensor *run_neg(cg_tensor **x)
{ return times(cg_neg(T(cg_mul(x[0], x[0]))), x[0]); }
static cg_tensor *run_pow_scalar(cg_tensor **x)
{ return cg_pow_scalar(x[0], 2.5f); }
static cg_tensor *run_exp(cg_tensor **x) { return cg_exp(x[0]); }
static cg_tensor *run_log(cg_tensor **x) { return cg_log(x[0]); }
static cg_tensor *run_sqrt(cg_tensor **x) { return cg_sqrt(x[0]); }
static cg_tensor *run_tanh(cg_tensor **x) { return cg_tanh(x[0]); }
static cg_tensor *run_sigmoid(cg_tensor **x) { return cg_sigmoid(x[0]); }
static cg_tensor *run_abs(cg_tensor **x)
{ return times(cg_abs(x[0]), x[0]); }
static cg_tensor *run_relu(cg_tensor **x)
{ return times(cg_relu(x[0]), x[0]); }
static cg_tensor *run_leaky_relu(cg_tensor **x)
{ return times(cg_leaky_relu(x[0], 0.1f), x[0]); }
static cg_tensor *run_clamp(cg_tensor **x)
{ return times(cg_clamp(x[0], -1.0f, 1.0f), x[0]); }

static const int axis1 = 1;
static cg_tensor *run_sum(cg_tensor **x)
{ return cube(cg_sum(x[0], 1, &axis1, 0)); }
static cg_tensor *run_mean(cg_tensor **x)
{ return cube(cg_mean(x[0], 1, &axis1, 0)); }
static cg_tensor *run_var(cg_tensor **x)
{ return cube(cg_var(x[0], 1, &axis1, 0, 1)); }
static cg_tensor *run_max(cg_tensor **x)
{ return cube(cg_max(x[0], 1, &axis1, 0)); }
static cg_tensor *run_mean_all(cg_tensor **x)
{ return square(cg_mean(T(cg_mul(x[0], x[0])), 0, NULL, 0)); }

static cg_tensor *run_matmul(cg_tensor **x) { return cg_matmul(x[0], x[1]); }
static cg_tensor *run_matmul_tt(cg_tensor **x)
{ return cg_matmul_t(x[0], x[1], 1, 1); }
static cg_tensor *run_linear(cg_tensor **x)
{ return cg_tanh(T(cg__linear(x[0], x[1], x[2]))); }

static cg_tensor *run_softmax(cg_tensor **x)
{ return cg_softmax(x[0], -1); }
static cg_tensor *run_log_softmax(cg_tensor **x)
{ return cg_log_softmax(x[0], -1); }
static cg_tensor *run_ce(cg_tensor **x)
{ return cg_cross_entropy(x[0], target_dev, CG_REDUCTION_MEAN,
                          CG_IGNORE_INDEX, 0.1f); }
static cg_tensor *run_ce_none(cg_tensor **x)
{ return cg_cross_entropy(x[0], target2_dev, CG_REDUCTION_NONE,
                          CG_IGNORE_INDEX, 0.0f); }
static cg_tensor *run_nll(cg_tensor **x)
{ return cg_nll_loss(T(cg_mul(x[0], x[0])), target_dev, CG_REDUCTION_SUM,
                     CG_IGNORE_INDEX); }
static cg_tensor *run_mse(cg_tensor **x)
{ return cg_mse_loss(x[0], x[1], CG_REDUCTION_MEAN); }
static cg_tensor *run_bce(cg_tensor **x)
{ return cg_bce_with_logits(x[0], x[1], CG_REDUCTION_SUM); }

static cg_tensor *run_transpose(cg_tensor **x)
{ return square(cg_transpose(x[0], 0, 1)); }
static cg_tensor *run_narrow(cg_tensor **x)
{ return square(cg_narrow(x[0], 1, 1, 3)); }
static cg_tensor *run_reshape(cg_tensor **x)
{ return square(cg_reshape(x[0], 2, (const int64_t[2]){ 5, 3 })); }
static cg_tensor *
run_concat(cg_tensor **x)
{
    cg_tensor *two[2] = { x[0], x[0] };

    return square(cg_concat(two, 2, 0));
}
static cg_tensor *run_expand(cg_tensor **x)
{ return square(cg_expand(x[0], 2, (const int64_t[2]){ 3, 4 })); }

#define R2 { -2, -2, -2, -2 }, { 2, 2, 2, 2 }
#define RPOS { 0.5, 0.5, 0.5, 0.5 }, { 2, 2, 2, 2 }

static const gg_case cases[] = {
    { "add", 2, { "7,1", "1,5" }, R2, 0, run_add, ref_add },
    { "sub", 2, { "7,1", "1,5" }, R2, 0, run_sub, ref_sub },
    { "mul", 2, { "7,1", "1,5" }, R2, 0, run_mul, ref_mul },
    { "mul_13", 2, { "13", "13" }, R2, 0, run_mul, ref_mul },
    { "div", 2, { "7,1", "1,5" }, RPOS, 0, run_div, ref_div },
    { "maximum", 2, { "3,5", "3,5" }, R2, 0.05, run_maximum, ref_maximum },
    { "minimum", 2, { "7,1", "1,5" }, R2, 0.05, run_minimum, ref_minimum },
    { "where", 2, { "3,5", "1,5" }, R2, 0.05, run_where, ref_where },
    { "affine", 1, { "3,5" }, R2, 0, run_affine, ref_affine },
    { "neg", 1, { "13" }, R2, 0, run_neg, ref_neg },
    { "pow_scalar", 1, { "3,5" }, RPOS, 0, run_pow_scalar, ref_pow_scalar },
    { "exp", 1, { "13" }, R2, 0, run_exp, ref_exp },
    { "log", 1, { "3,5" }, RPOS, 0, run_log, ref_log },
    { "sqrt", 1, { "13" }, RPOS, 0, run_sqrt, ref_sqrt },
    { "tanh", 1, { "3,5" }, R2, 0, run_tanh, ref_tanh },
    { "sigmoid", 1, { "13" }, R2, 0, run_sigmoid, ref_sigmoid },
    { "abs", 1, { "3,5" }, R2, 0.05, run_abs, ref_abs },
    { "relu", 1, { "13" }, R2, 0.05, run_relu, ref_relu },
    { "leaky_relu", 1, { "3,5" }, R2, 0.05, run_leaky_relu, ref_leaky_relu },
    { "clamp", 1, { "3,5" }, R2, 0.05, run_clamp, ref_clamp },
    { "sum", 1, { "3,5" }, { -1 }, { 1 }, 0, run_sum, ref_sum },
    { "mean", 1, { "3,5" }, R2, 0, run_mean, ref_mean },
    { "mean_all", 1, { "3,5" }, R2, 0, run_mean_all, ref_mean_all },
    { "var", 1, { "3,5" }, R2, 0, run_var, ref_var },
    { "max", 1, { "3,5" }, R2, 0, run_max, ref_max },
    { "matmul", 2, { "3,5", "5,4" }, R2, 0, run_matmul, ref_matmul },
    { "matmul_batch", 2, { "2,3,5", "5,4" }, R2, 0, run_matmul, ref_matmul },
    { "matmul_tt", 2, { "5,3", "4,5" }, R2, 0, run_matmul_tt,
      ref_matmul_tt },
    { "linear", 3, { "3,5", "4,5", "4" }, { -1, -1, -1 }, { 1, 1, 1 }, 0,
      run_linear, ref_linear },
    { "softmax", 1, { "3,5" }, R2, 0, run_softmax, ref_softmax },
    { "softmax_13", 1, { "13" }, R2, 0, run_softmax, ref_softmax },
    { "log_softmax", 1, { "3,5" }, R2, 0, run_log_softmax, ref_log_softmax },
    { "cross_entropy", 1, { "3,5" }, R2, 0, run_ce, ref_ce },
    { "cross_entropy_none", 1, { "3,5" }, R2, 0, run_ce_none, ref_ce_none },
    { "nll_loss", 1, { "3,5" }, R2, 0, run_nll, ref_nll },
    { "mse_loss", 2, { "3,5", "3,5" }, R2, 0, run_mse, ref_mse },
    { "bce_with_logits", 2, { "13", "13" }, { -2, 0 }, { 2, 1 }, 0, run_bce,
      ref_bce },
    { "transpose", 1, { "3,5" }, R2, 0, run_transpose, ref_transpose },
    { "narrow", 1, { "3,5" }, R2, 0, run_narrow, ref_narrow },
    { "reshape", 1, { "3,5" }, R2, 0, run_reshape, ref_reshape },
    { "concat", 1, { "3,5" }, R2, 0, run_concat, ref_concat },
    { "expand", 1, { "3,1" }, R2, 0, run_expand, ref_expand },
};

/* ------------------------------------------------------------------------
 * The harness
 * ------------------------------------------------------------------------ */

static void
parse_shape(const char *s, oc_tensor *t)
{
    char *end;

    t->ndim = 0;
    while (*s) {
        t->shape[t->ndim++] = strtoll(s, &end, 10);
        s = *end == ',' ? end + 1 : end;
    }
    oc_alloc(t);
}

static cg_tensor *
upload(const oc_tensor *t, int requires_grad)
{
    float *f = malloc((size_t)t->numel * sizeof *f);
    cg_tensor *d;
    int64_t i;

    ck_assert_ptr_nonnull(f);
    for (i = 0; i < t->numel; i++)
        f[i] = (float)t->data[i];
    d = cg_tensor_from_host(tt_ctx(), CG_F32, t->ndim, t->shape, f);
    free(f);
    ck_assert_msg(d != NULL, "%s", TT_ERR);
    if (requires_grad)
        ck_assert_int_eq(cg_tensor_set_requires_grad(d, 1), CG_OK);
    return d;
}

static double *
download(const cg_tensor *t, int64_t n)
{
    float *f = malloc((size_t)n * sizeof *f);
    double *d = malloc((size_t)n * sizeof *d);
    int64_t i;

    ck_assert(f && d);
    ck_assert_int_eq(cg_tensor_numel(t), n);
    ck_assert_msg(cg_tensor_to_host(t, f, (size_t)n * sizeof *f) == CG_OK,
                  "%s", TT_ERR);
    for (i = 0; i < n; i++)
        d[i] = f[i];
    free(f);
    return d;
}

/* L = sum(F(x) U) in double; x shifted by t W. */
static double
ref_loss(const gg_case *c, const oc_tensor *x, const oc_tensor *w, double t,
         const double *u, double *fout)
{
    oc_tensor in[4], out = { 0 };
    double s = 0;
    int64_t i;
    int j;

    for (j = 0; j < c->n; j++) {
        in[j] = x[j];
        in[j].data = malloc((size_t)x[j].numel * sizeof(double));
        for (i = 0; i < x[j].numel; i++)
            in[j].data[i] = x[j].data[i] + t * w[j].data[i];
    }
    c->ref(in, &out);
    for (i = 0; i < out.numel; i++) {
        s += out.data[i] * u[i];
        if (fout)
            fout[i] = out.data[i];
    }
    for (j = 0; j < c->n; j++)
        free(in[j].data);
    free(out.data);
    return s;
}

static double
norm_err(const double *dev, const double *ref, int64_t n)
{
    double e = 0, m = 1;
    int64_t i;

    for (i = 0; i < n; i++) {
        e = fmax(e, fabs(dev[i] - ref[i]));
        m = fmax(m, fabs(ref[i]));
    }
    return e / m;
}

static double worst_first, worst_second;

static void
gradgradcheck(const gg_case *c)
{
    oc_tensor x[4], w[4], out = { 0 };
    cg_tensor *dx[5], *dw[4], *y, *du, *yu, *L, *S = NULL, *g[4], *gg[5];
    double *u, *fp, *fm, *dev, *ref, err;
    int64_t i, k, nout;
    int j;

    for (j = 0; j < c->n; j++) {
        parse_shape(c->shapes[j], &x[j]);
        parse_shape(c->shapes[j], &w[j]);
        for (i = 0; i < x[j].numel; i++) {
            double v;

            do
                v = oc_uniform(c->lo[j], c->hi[j]);
            while (fabs(v) < c->away);
            x[j].data[i] = (float)v;
            w[j].data[i] = (float)oc_uniform(-1, 1);
        }
        dx[j] = upload(&x[j], 1);
        dw[j] = upload(&w[j], 0);
    }
    /* the output's shape from the reference */
    c->ref(x, &out);
    nout = out.numel;
    for (i = 0; i < nout; i++)
        out.data[i] = (float)oc_uniform(-1, 1);
    u = out.data;
    du = upload(&out, 1);

    y = c->run(dx);
    ck_assert_msg(y != NULL, "%s: %s", c->name, TT_ERR);
    ck_assert_int_eq(cg_tensor_numel(y), nout);
    yu = cg_mul(y, du);
    L = yu ? cg_sum(yu, 0, NULL, 0) : NULL;
    ck_assert_msg(L != NULL, "%s: %s", c->name, TT_ERR);
    ck_assert_msg(cg_grad(L, NULL, c->n, dx, g, CG_GRAD_CREATE_GRAPH) ==
                  CG_OK, "%s: %s", c->name, TT_ERR);
    /* the first gradient against central differences of L */
    for (j = 0; j < c->n; j++) {
        dev = download(g[j], x[j].numel);
        ref = malloc((size_t)x[j].numel * sizeof *ref);
        for (i = 0; i < x[j].numel; i++) {
            double keep = x[j].data[i], lp, lm;

            x[j].data[i] = keep + GG_H;
            lp = ref_loss(c, x, w, 0, u, NULL);
            x[j].data[i] = keep - GG_H;
            lm = ref_loss(c, x, w, 0, u, NULL);
            x[j].data[i] = keep;
            ref[i] = (lp - lm) / (2 * GG_H);
        }
        err = norm_err(dev, ref, x[j].numel);
        worst_first = fmax(worst_first, err);
        ck_assert_msg(err <= GG_TOL, "%s: gradient of input %d: error %g",
                      c->name, j, err);
        free(dev);
        free(ref);
    }
    /* S = sum_j <g_j, W_j>, and its gradient: the double backward */
    for (j = 0; j < c->n; j++) {
        cg_tensor *p = cg_mul(g[j], dw[j]);
        cg_tensor *s = p ? cg_sum(p, 0, NULL, 0) : NULL;
        cg_tensor *t = s && S ? cg_add(S, s) : s ? cg_tensor_ref(s) : NULL;

        ck_assert_msg(t != NULL, "%s: %s", c->name, TT_ERR);
        cg_tensor_free(p);
        cg_tensor_free(s);
        cg_tensor_free(S);
        S = t;
    }
    ck_assert_msg(cg_tensor_requires_grad(S), "%s: the gradient has no "
                  "graph", c->name);
    dx[c->n] = du;
    ck_assert_msg(cg_grad(S, NULL, c->n + 1, dx, gg, 0) == CG_OK,
                  "%s: %s", c->name, TT_ERR);
    for (j = 0; j < c->n; j++) {
        dev = download(gg[j], x[j].numel);
        ref = malloc((size_t)x[j].numel * sizeof *ref);
        for (i = 0; i < x[j].numel; i++) {
            double keep = x[j].data[i], sp, sm;

            x[j].data[i] = keep + GG_H;
            sp = ref_loss(c, x, w, GG_H, u, NULL) -
                 ref_loss(c, x, w, -GG_H, u, NULL);
            x[j].data[i] = keep - GG_H;
            sm = ref_loss(c, x, w, GG_H, u, NULL) -
                 ref_loss(c, x, w, -GG_H, u, NULL);
            x[j].data[i] = keep;
            ref[i] = (sp - sm) / (4 * GG_H * GG_H);
        }
        err = norm_err(dev, ref, x[j].numel);
        worst_second = fmax(worst_second, err);
        ck_assert_msg(err <= GG_TOL, "%s: second derivative of input %d: "
                      "error %g", c->name, j, err);
        free(dev);
        free(ref);
    }
    /* dS/dU_k = (F_k(x + hW) - F_k(x - hW)) / 2h */
    dev = download(gg[c->n], nout);
    ref = malloc((size_t)nout * sizeof *ref);
    fp = malloc((size_t)nout * sizeof *fp);
    fm = malloc((size_t)nout * sizeof *fm);
    ref_loss(c, x, w, GG_H, u, fp);
    ref_loss(c, x, w, -GG_H, u, fm);
    for (k = 0; k < nout; k++)
        ref[k] = (fp[k] - fm[k]) / (2 * GG_H);
    err = norm_err(dev, ref, nout);
    worst_second = fmax(worst_second, err);
    ck_assert_msg(err <= GG_TOL, "%s: gradient of the upstream: error %g",
                  c->name, err);
    free(dev);
    free(ref);
    free(fp);
    free(fm);
    for (j = 0; j <= c->n; j++)
        cg_tensor_free(gg[j]);
    for (j = 0; j < c->n; j++) {
        cg_tensor_free(g[j]);
        cg_tensor_free(dx[j]);
        cg_tensor_free(dw[j]);
        free(x[j].data);
        free(w[j].data);
    }
    cg_tensor_free(S);
    cg_tensor_free(L);
    cg_tensor_free(yu);
    cg_tensor_free(y);
    cg_tensor_free(du);
    free(out.data);
    drop_temps();
}

static void
make_targets(void)
{
    int64_t n = 3;

    if (target_dev)
        return;
    target_dev = cg_tensor_from_host(tt_ctx(), CG_I32, 1, &n, targets);
    target2_dev = cg_tensor_from_host(tt_ctx(), CG_I32, 1, &n, targets2);
    ck_assert(target_dev && target2_dev);
}

START_TEST(gradgradcheck_every_supported_op)
{
    make_targets();
    gradgradcheck(&cases[_i]);
}
END_TEST

/* ------------------------------------------------------------------------
 * A small MLP: logits = tanh(x W1^T + b1) W2^T + b2, parameters
 * W1 [H, D], b1 [H], W2 [C, H], b2 [C].
 * ------------------------------------------------------------------------ */

#define MN 5
#define MD 3
#define MH 4
#define MC 3

static const int64_t mlp_shapes[4][2] = {
    { MH, MD }, { MH, 0 }, { MC, MH }, { MC, 0 }
};
static const int mlp_ndim[4] = { 2, 1, 2, 1 };
static const int32_t mlp_targets[MN] = { 0, 2, 1, 1, 0 };
static double mlp_x[MN * MD];

static int64_t
mlp_numel(int j)
{
    return mlp_shapes[j][0] * (mlp_ndim[j] == 2 ? mlp_shapes[j][1] : 1);
}

/* The host MLP's hidden layer and logits for row x. */
static void
mlp_host_row(double *const *p, const double *x, double *t, double *z)
{
    int h, c, d;

    for (h = 0; h < MH; h++) {
        double s = p[1][h];

        for (d = 0; d < MD; d++)
            s += p[0][h * MD + d] * x[d];
        t[h] = tanh(s);
    }
    for (c = 0; c < MC; c++) {
        double s = p[3][c];

        for (h = 0; h < MH; h++)
            s += p[2][c * MH + h] * t[h];
        z[c] = s;
    }
}

/* mean cross entropy of the MLP over the batch, in double */
static double
mlp_host_loss(double *const *p)
{
    double t[MH], z[MC], loss = 0;
    int r, c;

    for (r = 0; r < MN; r++) {
        double mx, s = 0;

        mlp_host_row(p, mlp_x + r * MD, t, z);
        mx = z[0];
        for (c = 1; c < MC; c++)
            mx = fmax(mx, z[c]);
        for (c = 0; c < MC; c++)
            s += exp(z[c] - mx);
        loss += mx + log(s) - z[mlp_targets[r]];
    }
    return loss / MN;
}

typedef struct {
    cg_tensor *x, *target;
} mlp_data;

static cg_tensor *
mlp_logits(cg_tensor *const *p, cg_tensor *x)
{
    cg_tensor *a = cg__linear(x, p[0], p[1]), *t = a ? cg_tanh(a) : NULL;
    cg_tensor *z = t ? cg__linear(t, p[2], p[3]) : NULL;

    cg_tensor_free(a);
    cg_tensor_free(t);
    return z;
}

static cg_tensor *
mlp_loss(int n, cg_tensor *const *p, void *user)
{
    mlp_data *d = user;
    cg_tensor *z = mlp_logits(p, d->x), *l;

    ck_assert_int_eq(n, 4);
    l = z ? cg_cross_entropy(z, d->target, CG_REDUCTION_MEAN,
                             CG_IGNORE_INDEX, 0.0f) : NULL;
    cg_tensor_free(z);
    return l;
}

/* Random MLP parameters (host double, rounded to float) and a direction. */
static void
mlp_params(double **p, double **v, cg_tensor **dp, cg_tensor **dv)
{
    int j;
    int64_t i;

    for (j = 0; j < 4; j++) {
        oc_tensor t = { 0 };

        t.ndim = mlp_ndim[j];
        t.shape[0] = mlp_shapes[j][0];
        t.shape[1] = mlp_shapes[j][1];
        oc_alloc(&t);
        for (i = 0; i < t.numel; i++)
            t.data[i] = (float)oc_uniform(-1, 1);
        dp[j] = upload(&t, 1);
        p[j] = t.data;
        if (v) {
            t.data = NULL;
            oc_alloc(&t);
            for (i = 0; i < t.numel; i++)
                t.data[i] = (float)oc_uniform(-1, 1);
            dv[j] = upload(&t, 0);
            v[j] = t.data;
        }
    }
}

static cg_tensor *
mlp_input(void)
{
    oc_tensor t = { 0 };
    cg_tensor *x;
    int64_t i;

    t.ndim = 2;
    t.shape[0] = MN;
    t.shape[1] = MD;
    oc_alloc(&t);
    for (i = 0; i < MN * MD; i++)
        t.data[i] = mlp_x[i] = (float)oc_uniform(-1.5, 1.5);
    x = upload(&t, 0);
    free(t.data);
    return x;
}

/* H v of the host loss by nested central differences in double:
 * d/dp_i of d/dt L(p + t v). */
static double
host_hvp_elem(double (*loss)(double *const *), double **p, double **v,
              int j, int64_t i, double h)
{
    double keep = p[j][i], r[2];
    int s, k;
    int64_t e;

    for (s = 0; s < 2; s++) {
        double lp, lm;

        p[j][i] = keep + (s ? -h : h);
        for (k = 0; k < 4; k++)
            for (e = 0; e < mlp_numel(k); e++)
                p[k][e] += h * v[k][e];
        lp = loss(p);
        for (k = 0; k < 4; k++)
            for (e = 0; e < mlp_numel(k); e++)
                p[k][e] -= 2 * h * v[k][e];
        lm = loss(p);
        for (k = 0; k < 4; k++)
            for (e = 0; e < mlp_numel(k); e++)
                p[k][e] += h * v[k][e];
        p[j][i] = keep + (s ? -h : h);   /* no rounding drift */
        r[s] = lp - lm;
    }
    p[j][i] = keep;
    return (r[0] - r[1]) / (4 * h * h);
}

START_TEST(hvp_of_mlp_cross_entropy_matches_finite_differences)
{
    double *p[4], *v[4];
    cg_tensor *dp[4], *dv[4], *hv[4], *value = NULL;
    mlp_data d;
    int64_t n = MN, i;
    float lv;
    int j;

    d.x = mlp_input();
    d.target = cg_tensor_from_host(tt_ctx(), CG_I32, 1, &n, mlp_targets);
    ck_assert_ptr_nonnull(d.target);
    mlp_params(p, v, dp, dv);
    ck_assert_msg(cg_hvp(mlp_loss, &d, 4, dp, dv, hv, &value) == CG_OK,
                  "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_item(value, &lv), CG_OK);
    ck_assert_double_eq_tol(lv, mlp_host_loss(p), 1e-5);
    for (j = 0; j < 4; j++) {
        double *dev = download(hv[j], mlp_numel(j)), *ref, err;

        ref = malloc((size_t)mlp_numel(j) * sizeof *ref);
        for (i = 0; i < mlp_numel(j); i++)
            ref[i] = host_hvp_elem(mlp_host_loss, p, v, j, i, 1e-3);
        err = norm_err(dev, ref, mlp_numel(j));
        ck_assert_msg(err <= GG_TOL, "hvp of parameter %d: error %g", j,
                      err);
        worst_second = fmax(worst_second, err);
        ck_assert_ptr_null(cg_tensor_grad(dp[j]));
        free(dev);
        free(ref);
    }
    for (j = 0; j < 4; j++) {
        free(p[j]);
        free(v[j]);
        cg_tensor_free(hv[j]);
        cg_tensor_free(dp[j]);
        cg_tensor_free(dv[j]);
    }
    cg_tensor_free(value);
    cg_tensor_free(d.x);
    cg_tensor_free(d.target);
}
END_TEST

/* ------------------------------------------------------------------------
 * WGAN-GP: critic D(x) = w2 . tanh(W1 x + b1) + b2 (C = 1 output), the
 * penalty mean_r (|| dD/dx_r || - 1)^2, and its gradient in the
 * parameters.  dD/dx = W1^T (w2 * (1 - t^2)) on the host.
 * ------------------------------------------------------------------------ */

static double
gp_host(double *const *p)
{
    double t[MH], z[MC], pen = 0;
    int r, h, d;

    for (r = 0; r < MN; r++) {
        double nrm = 0;

        mlp_host_row(p, mlp_x + r * MD, t, z);
        for (d = 0; d < MD; d++) {
            double s = 0;

            for (h = 0; h < MH; h++)
                s += p[0][h * MD + d] * p[2][h] * (1 - t[h] * t[h]);
            nrm += s * s;
        }
        pen += (sqrt(nrm) - 1) * (sqrt(nrm) - 1);
    }
    return pen / MN;
}

START_TEST(gradient_penalty_gradient_matches_finite_differences)
{
    static const int64_t c1[2] = { 1, MH }, one = 1;
    double *p[4];
    cg_tensor *dp[4], *x, *z, *D, *gx, *sq, *nrm, *dev1, *pen, *pg[4];
    int64_t i;
    int j, axis = 1;

    x = mlp_input();
    ck_assert_int_eq(cg_tensor_set_requires_grad(x, 1), CG_OK);
    mlp_params(p, NULL, dp, NULL);
    /* the critic has one output: W2 [1, H], b2 [1] */
    cg_tensor_free(dp[2]);
    cg_tensor_free(dp[3]);
    {
        float w2[MH], b2 = 0.3f;

        for (i = 0; i < MH; i++)
            w2[i] = (float)(p[2][i] = (float)oc_uniform(-1, 1));
        p[3][0] = b2;
        dp[2] = cg_tensor_from_host(tt_ctx(), CG_F32, 2, c1, w2);
        dp[3] = cg_tensor_from_host(tt_ctx(), CG_F32, 1, &one, &b2);
        ck_assert(dp[2] && dp[3]);
        cg_tensor_set_requires_grad(dp[2], 1);
        cg_tensor_set_requires_grad(dp[3], 1);
    }
    z = mlp_logits(dp, x);
    D = z ? cg_sum(z, 0, NULL, 0) : NULL;
    ck_assert_msg(D != NULL, "%s", TT_ERR);
    ck_assert_msg(cg_grad(D, NULL, 1, &x, &gx, CG_GRAD_CREATE_GRAPH) ==
                  CG_OK, "%s", TT_ERR);
    sq = cg_mul(gx, gx);
    nrm = sq ? cg_sqrt(T(cg_sum(sq, 1, &axis, 0))) : NULL;
    dev1 = nrm ? cg_add_scalar(nrm, -1.0f) : NULL;
    pen = dev1 ? cg_mean(T(cg_mul(dev1, dev1)), 0, NULL, 0) : NULL;
    ck_assert_msg(pen != NULL, "%s", TT_ERR);
    {
        float pv;

        ck_assert_int_eq(cg_tensor_item(pen, &pv), CG_OK);
        ck_assert_double_eq_tol(pv, gp_host(p), 1e-5);
    }
    ck_assert_msg(cg_grad(pen, NULL, 4, dp, pg, 0) == CG_OK, "%s", TT_ERR);
    for (j = 0; j < 4; j++) {
        int64_t n = j < 2 ? mlp_numel(j) : j == 2 ? MH : 1;
        double *dev = download(pg[j], n), *ref = malloc((size_t)n * 8), err;

        for (i = 0; i < n; i++) {
            double keep = p[j][i], a, b;

            p[j][i] = keep + GG_H;
            a = gp_host(p);
            p[j][i] = keep - GG_H;
            b = gp_host(p);
            p[j][i] = keep;
            ref[i] = (a - b) / (2 * GG_H);
        }
        err = norm_err(dev, ref, n);
        worst_second = fmax(worst_second, err);
        ck_assert_msg(err <= GG_TOL, "penalty gradient of parameter %d: "
                      "error %g", j, err);
        ck_assert_ptr_null(cg_tensor_grad(dp[j]));
        free(dev);
        free(ref);
    }
    for (j = 0; j < 4; j++) {
        free(p[j]);
        cg_tensor_free(pg[j]);
        cg_tensor_free(dp[j]);
    }
    ck_assert_ptr_null(cg_tensor_grad(x));
    cg_tensor_free(pen);
    cg_tensor_free(dev1);
    cg_tensor_free(nrm);
    cg_tensor_free(sq);
    cg_tensor_free(gx);
    cg_tensor_free(D);
    cg_tensor_free(z);
    cg_tensor_free(x);
    drop_temps();
}
END_TEST

/* sum(x^4) differentiated four times: 4x^3, 12x^2, 24x, 24. */
START_TEST(gradients_differentiate_any_number_of_times)
{
    static const float xs[3] = { 0.5f, -1.25f, 2.0f };
    int64_t n = 3;
    cg_tensor *x = cg_tensor_from_host(tt_ctx(), CG_F32, 1, &n, xs), *y, *g;
    float got[3];
    int order, i;

    ck_assert_int_eq(cg_tensor_set_requires_grad(x, 1), CG_OK);
    y = cg_sum(T(cg_pow_scalar(x, 4.0f)), 0, NULL, 0);
    for (order = 1; order <= 4; order++) {
        ck_assert_msg(cg_grad(y, NULL, 1, &x, &g, CG_GRAD_CREATE_GRAPH) ==
                      CG_OK, "order %d: %s", order, TT_ERR);
        ck_assert_int_eq(cg_tensor_to_host(g, got, sizeof got), CG_OK);
        for (i = 0; i < 3; i++) {
            double v = xs[i], want = order == 1 ? 4 * v * v * v
                                   : order == 2 ? 12 * v * v
                                   : order == 3 ? 24 * v : 24;

            ck_assert_double_eq_tol(got[i], want, 1e-5 * fmax(1, fabs(want)));
        }
        cg_tensor_free(y);
        y = order < 4 ? cg_sum(g, 0, NULL, 0) : NULL;
        cg_tensor_free(g);
        if (order == 3)
            ck_assert(cg_tensor_requires_grad(y));
    }
    ck_assert_ptr_null(cg_tensor_grad(x));
    cg_tensor_free(x);
    drop_temps();
}
END_TEST

/* cg_backward_ex with create_graph: x's grad has a graph; differentiating
 * it gives the second derivative, and zero_grad breaks the cycle. */
START_TEST(backward_ex_create_graph_leaves_differentiable_grads)
{
    static const float xs[3] = { 0.5f, -1.0f, 1.5f };
    int64_t n = 3;
    cg_tensor *x = cg_tensor_from_host(tt_ctx(), CG_F32, 1, &n, xs), *y, *s;
    float got[3];
    int i;

    ck_assert_int_eq(cg_tensor_set_requires_grad(x, 1), CG_OK);
    y = cg_sum(T(cg_pow_scalar(x, 3.0f)), 0, NULL, 0);
    ck_assert_int_eq(cg_backward_ex(y, NULL, 4), CG_EINVAL);
    ck_assert_msg(cg_backward_ex(y, NULL, CG_GRAD_CREATE_GRAPH) == CG_OK,
                  "%s", TT_ERR);
    ck_assert(cg_tensor_requires_grad(cg_tensor_grad(x)));
    s = cg_sum(cg_tensor_grad(x), 0, NULL, 0);     /* sum 3x^2 */
    ck_assert_int_eq(cg_tensor_zero_grad(x), CG_OK);
    ck_assert_int_eq(cg_backward(s, NULL, 0), CG_OK);   /* 6x */
    ck_assert_int_eq(cg_tensor_to_host(cg_tensor_grad(x), got, sizeof got),
                     CG_OK);
    for (i = 0; i < 3; i++)
        ck_assert_double_eq_tol(got[i], 6 * xs[i], 1e-5);
    /* a plain backward adds into a grad with a graph out of place */
    ck_assert_int_eq(cg_tensor_zero_grad(x), CG_OK);
    ck_assert_int_eq(cg_backward_ex(y, NULL, CG_GRAD_CREATE_GRAPH), CG_OK);
    ck_assert_int_eq(cg_backward(y, NULL, 1), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(cg_tensor_grad(x), got, sizeof got),
                     CG_OK);
    for (i = 0; i < 3; i++)
        ck_assert_double_eq_tol(got[i], 6 * xs[i] * xs[i], 1e-5);
    ck_assert_int_eq(cg_tensor_zero_grad(x), CG_OK);
    cg_tensor_free(s);
    cg_tensor_free(y);
    cg_tensor_free(x);
    drop_temps();
}
END_TEST

/* gelu has no double backward: CG_EUNSUPPORTED naming it, before any
 * gradient is computed; nothing set; the plain backward still works. */
START_TEST(unsupported_op_fails_naming_it)
{
    static const float xs[3] = { 0.5f, -1.0f, 1.5f };
    int64_t n = 3;
    cg_tensor *x = cg_tensor_from_host(tt_ctx(), CG_F32, 1, &n, xs);
    cg_tensor *g = (cg_tensor *)&n, *y;

    ck_assert_int_eq(cg_tensor_set_requires_grad(x, 1), CG_OK);
    y = cg_sum(T(cg_gelu(T(cg_exp(x)))), 0, NULL, 0);
    ck_assert_int_eq(cg_grad(y, NULL, 1, &x, &g, CG_GRAD_CREATE_GRAPH),
                     CG_EUNSUPPORTED);
    ck_assert_ptr_eq(g, (cg_tensor *)&n);
    ck_assert_msg(strstr(TT_ERR, "'gelu'") != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_backward_ex(y, NULL, CG_GRAD_CREATE_GRAPH),
                     CG_EUNSUPPORTED);
    ck_assert_ptr_null(cg_tensor_grad(x));
    /* bad arguments */
    ck_assert_int_eq(cg_grad(y, NULL, 0, &x, &g, 0), CG_EINVAL);
    ck_assert_int_eq(cg_grad(y, NULL, 1, &x, &g, 8), CG_EINVAL);
    ck_assert_ptr_eq(g, (cg_tensor *)&n);
    /* a gelu that does not lead to the inputs asked about is not run */
    {
        cg_tensor *x2 = cg_tensor_from_host(tt_ctx(), CG_F32, 1, &n, xs);
        cg_tensor *y2, *g2;

        cg_tensor_set_requires_grad(x2, 1);
        y2 = cg_add(y, T(cg_sum(T(cg_mul(x2, x2)), 0, NULL, 0)));
        ck_assert_msg(cg_grad(y2, NULL, 1, &x2, &g2, CG_GRAD_CREATE_GRAPH |
                              CG_GRAD_RETAIN_GRAPH) == CG_OK, "%s", TT_ERR);
        ck_assert(cg_tensor_requires_grad(g2));
        cg_tensor_free(g2);
        cg_tensor_free(y2);
        cg_tensor_free(x2);
    }
    /* the graph is intact: first-order gradients still run */
    ck_assert_msg(cg_grad(y, NULL, 1, &x, &g, 0) == CG_OK, "%s", TT_ERR);
    ck_assert_ptr_null(cg_tensor_grad(x));
    cg_tensor_free(g);
    cg_tensor_free(y);
    cg_tensor_free(x);
    drop_temps();
}
END_TEST

/* An input the output does not depend on gets zeros; a leaf not asked
 * about keeps its grad. */
START_TEST(grad_gives_zeros_for_unused_inputs)
{
    static const float xs[3] = { 0.5f, -1.0f, 1.5f };
    int64_t n = 3;
    cg_tensor *x = cg_tensor_from_host(tt_ctx(), CG_F32, 1, &n, xs);
    cg_tensor *u = cg_tensor_from_host(tt_ctx(), CG_F32, 1, &n, xs);
    cg_tensor *in[2], *g[2], *y;
    float got[3];
    int i;

    cg_tensor_set_requires_grad(x, 1);
    cg_tensor_set_requires_grad(u, 1);
    y = cg_sum(T(cg_mul(x, x)), 0, NULL, 0);
    in[0] = u;
    in[1] = x;
    ck_assert_msg(cg_grad(y, NULL, 2, in, g, 0) == CG_OK, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_to_host(g[0], got, sizeof got), CG_OK);
    for (i = 0; i < 3; i++)
        ck_assert_float_eq(got[i], 0.0f);
    ck_assert_int_eq(cg_tensor_to_host(g[1], got, sizeof got), CG_OK);
    for (i = 0; i < 3; i++)
        ck_assert_float_eq_tol(got[i], 2 * xs[i], 1e-6f);
    ck_assert_ptr_null(cg_tensor_grad(x));
    cg_tensor_free(g[0]);
    cg_tensor_free(g[1]);
    cg_tensor_free(y);
    cg_tensor_free(x);
    cg_tensor_free(u);
    drop_temps();
}
END_TEST

/* cg_grad through a matrix product whose backward adds into an existing
 * gradient (cg__grad_into): the leaf's grad stays as it was, and the
 * returned gradient is the product's alone. */
START_TEST(grad_leaves_an_existing_leaf_grad_alone)
{
    static const float as[6] = { 1, 2, 3, 4, 5, 6 }, ws[6] = { 1, -1, 2,
                                                              0.5f, -2, 3 };
    static const int64_t sa[2] = { 2, 3 }, sw[2] = { 3, 2 };
    cg_tensor *a = cg_tensor_from_host(tt_ctx(), CG_F32, 2, sa, as);
    cg_tensor *w = cg_tensor_from_host(tt_ctx(), CG_F32, 2, sw, ws);
    cg_tensor *y, *g;
    float before[6], after[6], got[6];
    int i, k;

    cg_tensor_set_requires_grad(w, 1);
    y = cg_sum(T(cg_matmul(a, w)), 0, NULL, 0);
    ck_assert_int_eq(cg_backward(y, NULL, 1), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(cg_tensor_grad(w), before,
                                       sizeof before), CG_OK);
    ck_assert_msg(cg_grad(y, NULL, 1, &w, &g, 0) == CG_OK, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_to_host(cg_tensor_grad(w), after,
                                       sizeof after), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(g, got, sizeof got), CG_OK);
    /* dy/dw[k][j] = sum_i a[i][k] */
    for (i = 0; i < 6; i++) {
        k = i / 2;
        ck_assert_float_eq(after[i], before[i]);
        ck_assert_float_eq_tol(got[i], as[k] + as[3 + k], 1e-5f);
    }
    cg_tensor_free(g);
    cg_tensor_free(y);
    cg_tensor_free(a);
    cg_tensor_free(w);
    drop_temps();
}
END_TEST

/* ------------------------------------------------------------------------
 * PyTorch 1.13 (tests/fixtures/gen_higher_order.py): functional.hvp of an
 * MLP with cross entropy, and a gradient penalty's parameter gradient,
 * each tensor within 1e-5 of its largest value.
 * ------------------------------------------------------------------------ */

static double worst_fixture;

static cg_tensor *
fx_dev(const fx_file *f, const char *name, int grad)
{
    const fx_tensor *t = fx_get(f, name);
    cg_tensor *d;

    ck_assert_msg(t != NULL, "higher_order.txt: no %s", name);
    d = cg_tensor_from_host(tt_ctx(), CG_F32, t->ndim, t->shape, t->data);
    ck_assert_msg(d != NULL, "%s", TT_ERR);
    if (grad)
        ck_assert_int_eq(cg_tensor_set_requires_grad(d, 1), CG_OK);
    return d;
}

static void
fx_match(const fx_file *f, const char *name, const cg_tensor *got)
{
    const fx_tensor *t = fx_get(f, name);
    double *dev, e = 0, m = 0;
    int64_t i;

    ck_assert_msg(t != NULL, "higher_order.txt: no %s", name);
    dev = download(got, t->numel);
    for (i = 0; i < t->numel; i++) {
        e = fmax(e, fabs(dev[i] - t->data[i]));
        m = fmax(m, fabs(t->data[i]));
    }
    free(dev);
    e = m > 0 ? e / m : e;
    worst_fixture = fmax(worst_fixture, e);
    ck_assert_msg(e <= 1e-5, "%s: error %g of its largest value %g", name, e,
                  m);
}

START_TEST(pytorch_fixture_hvp_and_gradient_penalty)
{
    static const char *names[4] = { "w1", "b1", "w2", "b2" };
    char err[256], name[32];
    int sizes[4], tg[64], j, axis = 1;
    int64_t n;
    fx_file *f = fx_load_fixture("higher_order.txt", err, sizeof err);
    cg_tensor *p[4], *v[4], *hv[4], *value, *c[4], *x, *z, *D, *gx, *pen;
    cg_tensor *gp[4];
    mlp_data d;

    ck_assert_msg(f != NULL, "%s", err);
    ck_assert_int_eq(fx_config_ints(f, "sizes", sizes, 4), 4);
    n = sizes[0];
    ck_assert_int_eq(fx_config_ints(f, "targets", tg, 64), sizes[0]);
    d.x = fx_dev(f, "input", 0);
    {
        int32_t t32[64];

        for (j = 0; j < sizes[0]; j++)
            t32[j] = tg[j];
        d.target = cg_tensor_from_host(tt_ctx(), CG_I32, 1, &n, t32);
        ck_assert_ptr_nonnull(d.target);
    }
    for (j = 0; j < 4; j++) {
        p[j] = fx_dev(f, names[j], 1);
        snprintf(name, sizeof name, "v.%s", names[j]);
        v[j] = fx_dev(f, name, 0);
    }
    ck_assert_msg(cg_hvp(mlp_loss, &d, 4, p, v, hv, &value) == CG_OK, "%s",
                  TT_ERR);
    fx_match(f, "loss", value);
    for (j = 0; j < 4; j++) {
        snprintf(name, sizeof name, "hvp.%s", names[j]);
        fx_match(f, name, hv[j]);
        cg_tensor_free(hv[j]);
        cg_tensor_free(v[j]);
    }
    /* the penalty of the critic (w1, b1, critic.w2, critic.b2) */
    c[0] = p[0];
    c[1] = p[1];
    c[2] = fx_dev(f, "critic.w2", 1);
    c[3] = fx_dev(f, "critic.b2", 1);
    x = fx_dev(f, "input", 1);
    z = mlp_logits(c, x);
    D = z ? cg_sum(z, 0, NULL, 0) : NULL;
    ck_assert_msg(D != NULL, "%s", TT_ERR);
    ck_assert_msg(cg_grad(D, NULL, 1, &x, &gx, CG_GRAD_CREATE_GRAPH) ==
                  CG_OK, "%s", TT_ERR);
    pen = cg_mean(T(cg_pow_scalar(T(cg_add_scalar(T(cg_sqrt(
              T(cg_sum(T(cg_mul(gx, gx)), 1, &axis, 0)))), -1.0f)), 2.0f)),
                  0, NULL, 0);
    ck_assert_msg(pen != NULL, "%s", TT_ERR);
    fx_match(f, "penalty", pen);
    ck_assert_msg(cg_grad(pen, NULL, 4, c, gp, 0) == CG_OK, "%s", TT_ERR);
    for (j = 0; j < 4; j++) {
        snprintf(name, sizeof name, "gp.%s", names[j]);
        fx_match(f, name, gp[j]);
        cg_tensor_free(gp[j]);
        cg_tensor_free(p[j]);
    }
    cg_tensor_free(c[2]);
    cg_tensor_free(c[3]);
    cg_tensor_free(pen);
    cg_tensor_free(gx);
    cg_tensor_free(D);
    cg_tensor_free(z);
    cg_tensor_free(x);
    cg_tensor_free(value);
    cg_tensor_free(d.x);
    cg_tensor_free(d.target);
    fx_free(f);
    drop_temps();
}
END_TEST

START_TEST(report_worst_errors)
{
    fprintf(stderr, "higher order: worst first-gradient error %.3g, worst "
            "second-order error %.3g (tolerance %g); PyTorch fixture %.3g "
            "of the largest value (tolerance 1e-5)\n", worst_first,
            worst_second, GG_TOL, worst_fixture);
    cg_tensor_free(target_dev);
    cg_tensor_free(target2_dev);
    target_dev = target2_dev = NULL;
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("higher_order");
    TCase *tc = tcase_create("higher_order");

    tt_require_device();
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, gradgradcheck_every_supported_op, 0,
                        (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(tc, hvp_of_mlp_cross_entropy_matches_finite_differences);
    tcase_add_test(tc, gradient_penalty_gradient_matches_finite_differences);
    tcase_add_test(tc, gradients_differentiate_any_number_of_times);
    tcase_add_test(tc, backward_ex_create_graph_leaves_differentiable_grads);
    tcase_add_test(tc, unsupported_op_fails_naming_it);
    tcase_add_test(tc, grad_gives_zeros_for_unused_inputs);
    tcase_add_test(tc, grad_leaves_an_existing_leaf_grad_alone);
    tcase_add_test(tc, pytorch_fixture_hvp_and_gradient_penalty);
    tcase_add_test(tc, report_worst_errors);
    suite_add_tcase(s, tc);
    return tt_run(s);
}
