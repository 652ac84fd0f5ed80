/* SPDX-License-Identifier: MIT */
/*
 * tests/gradgrad_cases.c - the op cases of tests/test_higher_order.c's
 * gradgradcheck: each op on device tensors and its plain C forward in
 * double.  Linear and piecewise-linear ops are multiplied by their input
 * (or squared, cubed) so that their second derivative is not zero.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gradgrad_cases.h"
#include "ops/internal.h"


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
UNARY(gelu, 0.5 * x * (1 + erf(x / sqrt(2.0))))

/* The gather cases' indices (repeats included). */
static const int32_t rows_idx[6] = { 3, 0, 6, 3, 1, 3 };
static const int32_t cols_idx[4] = { 4, 0, 4, 2 };
static cg_tensor *rows_dev, *cols_dev;

/* embedding of W [7, 5] by rows_idx as [2, 3], squared */
static void
ref_embedding(const oc_tensor *in, oc_tensor *out)
{
    int64_t i, d;

    out->ndim = 3;
    out->shape[0] = 2, out->shape[1] = 3, out->shape[2] = 5;
    oc_alloc(out);
    for (i = 0; i < 6; i++)
        for (d = 0; d < 5; d++) {
            double v = in[0].data[rows_idx[i] * 5 + d];

            out->data[i * 5 + d] = v * v;
        }
}

/* index_select of x [3, 5] along 1 by cols_idx, squared */
static void
ref_index_select(const oc_tensor *in, oc_tensor *out)
{
    int64_t r, j;

    out->ndim = 2;
    out->shape[0] = 3, out->shape[1] = 4;
    oc_alloc(out);
    for (r = 0; r < 3; r++)
        for (j = 0; j < 4; j++) {
            double v = in[0].data[r * 5 + cols_idx[j]];

            out->data[r * 4 + j] = v * v;
        }
}

/* Row reductions of [R, C] along C: kind 0 sum, 1 mean, 2 var, 3 max,
 * 4 min, all cubed so that the second derivative is not zero. */
static void
ref_rows(const oc_tensor *in, oc_tensor *out, int kind)
{
    int64_t R = in[0].shape[0], C = in[0].shape[1], r, c;

    out->ndim = 1;
    out->shape[0] = R;
    oc_alloc(out);
    for (r = 0; r < R; r++) {
        const double *x = in[0].data + r * C;
        double s = 0, m, v = 0, mx = x[0], mn = x[0];

        for (c = 0; c < C; c++) {
            s += x[c];
            mx = x[c] > mx ? x[c] : mx;
            mn = x[c] < mn ? x[c] : mn;
        }
        m = s / (double)C;
        for (c = 0; c < C; c++)
            v += (x[c] - m) * (x[c] - m);
        v /= (double)(C - 1);
        s = kind == 0 ? s : kind == 1 ? m : kind == 2 ? v : kind == 3 ? mx
                                                                  : mn;
        out->data[r] = s * s * s;
    }
}

static void ref_sum(const oc_tensor *in, oc_tensor *o) { ref_rows(in, o, 0); }
static void ref_mean(const oc_tensor *in, oc_tensor *o) { ref_rows(in, o, 1); }
static void ref_var(const oc_tensor *in, oc_tensor *o) { ref_rows(in, o, 2); }
static void ref_max(const oc_tensor *in, oc_tensor *o) { ref_rows(in, o, 3); }
static void ref_min(const oc_tensor *in, oc_tensor *o) { ref_rows(in, o, 4); }

/* layer norm of x [R, C] over C with eps 1e-5, weight, bias [C] */
static void
ref_layer_norm(const oc_tensor *in, oc_tensor *out)
{
    int64_t R = in[0].shape[0], C = in[0].shape[1], r, c;

    out->ndim = 2;
    memcpy(out->shape, in[0].shape, sizeof out->shape);
    oc_alloc(out);
    for (r = 0; r < R; r++) {
        const double *x = in[0].data + r * C;
        double m = 0, v = 0;

        for (c = 0; c < C; c++)
            m += x[c] / (double)C;
        for (c = 0; c < C; c++)
            v += (x[c] - m) * (x[c] - m) / (double)C;
        for (c = 0; c < C; c++)
            out->data[r * C + c] = (x[c] - m) / sqrt(v + 1e-5) *
                                   in[1].data[c] + in[2].data[c];
    }
}

/* layer norm of x [2, 3, 5] over its last two dimensions, no weight or
 * bias, cubed */
static void
ref_layer_norm2(const oc_tensor *in, oc_tensor *out)
{
    int64_t r, c;

    out->ndim = 3;
    memcpy(out->shape, in[0].shape, sizeof out->shape);
    oc_alloc(out);
    for (r = 0; r < 2; r++) {
        const double *x = in[0].data + r * 15;
        double m = 0, v = 0, y;

        for (c = 0; c < 15; c++)
            m += x[c] / 15.0;
        for (c = 0; c < 15; c++)
            v += (x[c] - m) * (x[c] - m) / 15.0;
        for (c = 0; c < 15; c++) {
            y = (x[c] - m) / sqrt(v + 1e-5);
            out->data[r * 15 + c] = y * y * y;
        }
    }
}

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

/* act(x W^T + b), squared for relu: the fused nodes linear_relu,
 * linear_tanh, linear_sigmoid */
static void
ref_linear_act(const oc_tensor *in, oc_tensor *out, int act)
{
    int64_t j, r, N;

    ref_mm(&in[0], 0, &in[1], 1, out);
    N = out->shape[1];
    for (r = 0; r < out->shape[0]; r++)
        for (j = 0; j < N; j++) {
            double z = out->data[r * N + j] + in[2].data[j];

            out->data[r * N + j] = act == 1 ? (z > 0 ? z * z : 0)
                                 : act == 2 ? tanh(z)
                                 : 1 / (1 + exp(-z));
        }
}

static void ref_linear_relu(const oc_tensor *in, oc_tensor *o)
{ ref_linear_act(in, o, 1); }
static void ref_linear_tanh(const oc_tensor *in, oc_tensor *o)
{ ref_linear_act(in, o, 2); }
static void ref_linear_sigmoid(const oc_tensor *in, oc_tensor *o)
{ ref_linear_act(in, o, 3); }

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

static cg_tensor *temps[64];
static int ntemps;

cg_tensor *
T(cg_tensor *t)
{
    ck_assert_msg(t != NULL, "%s", TT_ERR);
    ck_assert_int_lt(ntemps, 64);
    temps[ntemps++] = t;
    return t;
}

void
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
static cg_tensor *run_gelu(cg_tensor **x) { return cg_gelu(x[0]); }
static cg_tensor *run_embedding(cg_tensor **x)
{ return square(cg_embedding(x[0], rows_dev)); }
static cg_tensor *run_index_select(cg_tensor **x)
{ return square(cg_index_select(x[0], 1, cols_dev)); }
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
static cg_tensor *
run_min_dim(cg_tensor **x)
{
    cg_tensor *v = NULL, *i = NULL;

    ck_assert_msg(cg_min_dim(x[0], 1, 0, &v, &i) == CG_OK, "%s",
                  cg_last_error());
    cg_tensor_free(i);
    return cube(v);
}
static cg_tensor *
run_layer_norm(cg_tensor **x)
{
    int64_t c = 5;

    return cg_layer_norm(x[0], 1, &c, x[1], x[2], 1e-5f);
}
static cg_tensor *
run_layer_norm2(cg_tensor **x)
{
    static const int64_t ns[2] = { 3, 5 };

    return cube(cg_layer_norm(x[0], 2, ns, NULL, NULL, 1e-5f));
}
static cg_tensor *run_mean_all(cg_tensor **x)
{ return square(cg_mean(T(cg_mul(x[0], x[0])), 0, NULL, 0)); }

static cg_tensor *run_matmul(cg_tensor **x) { return cg_matmul(x[0], x[1]); }
static cg_tensor *run_matmul_tt(cg_tensor **x)
{ return cg_matmul_t(x[0], x[1], 1, 1); }
static cg_tensor *run_linear(cg_tensor **x)
{ return cg_tanh(T(cg__linear(x[0], x[1], x[2]))); }

static cg_tensor *run_linear_relu(cg_tensor **x)
{ return square(cg__linear_act(x[0], x[1], x[2], CG__ACT_RELU)); }
static cg_tensor *run_linear_tanh(cg_tensor **x)
{ return cg__linear_act(x[0], x[1], x[2], CG__ACT_TANH); }
static cg_tensor *run_linear_sigmoid(cg_tensor **x)
{ return cg__linear_act(x[0], x[1], x[2], CG__ACT_SIGMOID); }
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

/* batch_norm of x [N, C, L...] with weight and bias [C], eps 1e-5: batch
 * statistics (training, no running statistics) or the running ones
 * (evaluation: mean 0.25 c - 0.3, variance 0.5 + 0.375 c, in float32). */
static void
ref_bn(const oc_tensor *in, oc_tensor *out, int train)
{
    int64_t N = in[0].shape[0], C = in[0].shape[1], L = in[0].numel / N / C;
    int64_t c, i, l;

    out->ndim = in[0].ndim;
    memcpy(out->shape, in[0].shape, sizeof out->shape);
    oc_alloc(out);
    for (c = 0; c < C; c++) {
        double m = 0, v = 0, cnt = (double)(N * L);

        for (i = 0; i < N; i++)
            for (l = 0; l < L; l++)
                m += in[0].data[(i * C + c) * L + l] / cnt;
        for (i = 0; i < N; i++)
            for (l = 0; l < L; l++) {
                double d = in[0].data[(i * C + c) * L + l] - m;

                v += d * d / cnt;
            }
        if (!train) {
            m = (double)(float)(0.25 * (double)c - 0.3);
            v = (double)(float)(0.5 + 0.375 * (double)c);
        }
        for (i = 0; i < N; i++)
            for (l = 0; l < L; l++) {
                int64_t e = (i * C + c) * L + l;

                out->data[e] = (in[0].data[e] - m) / sqrt(v + 1e-5) *
                               in[1].data[c] + in[2].data[c];
            }
    }
}

static void
ref_bn_train(const oc_tensor *in, oc_tensor *out)
{
    ref_bn(in, out, 1);
}

static void
ref_bn_eval(const oc_tensor *in, oc_tensor *out)
{
    ref_bn(in, out, 0);
}

static cg_tensor *
run_bn(cg_tensor **x, int train)
{
    int64_t C = cg_tensor_numel(x[1]), c;
    float rm[8], rv[8];
    cg_tensor *m = NULL, *v = NULL;

    for (c = 0; c < C; c++) {
        rm[c] = (float)(0.25 * (double)c - 0.3);
        rv[c] = (float)(0.5 + 0.375 * (double)c);
    }
    if (!train) {
        m = T(cg_tensor_from_host(tt_ctx(), CG_F32, 1, &C, rm));
        v = T(cg_tensor_from_host(tt_ctx(), CG_F32, 1, &C, rv));
    }
    return cg_batch_norm(x[0], m, v, x[1], x[2], train, 0.1f, 1e-5f);
}

static cg_tensor *run_bn_train(cg_tensor **x) { return run_bn(x, 1); }
static cg_tensor *run_bn_eval(cg_tensor **x) { return run_bn(x, 0); }

/* The pools of x [N, C, H, W] (kind 0 max, 1 avg with count_include_pad,
 * 2 adaptive), square windows k, stride st, padding pd; squared. */
static void
ref_pool(const oc_tensor *in, oc_tensor *out, int kind, int64_t k,
         int64_t st, int64_t pd, int64_t OH, int64_t OW)
{
    int64_t H = in[0].shape[2], W = in[0].shape[3];
    int64_t P = in[0].shape[0] * in[0].shape[1], p, oh, ow, h, w;

    out->ndim = 4;
    memcpy(out->shape, in[0].shape, sizeof out->shape);
    if (kind != 2) {
        OH = (H + 2 * pd - k) / st + 1;
        OW = (W + 2 * pd - k) / st + 1;
    }
    out->shape[2] = OH;
    out->shape[3] = OW;
    oc_alloc(out);
    for (p = 0; p < P; p++)
        for (oh = 0; oh < OH; oh++)
            for (ow = 0; ow < OW; ow++) {
                int64_t h0 = oh * st - pd, w0 = ow * st - pd, h1, w1, cnt;
                double acc = kind ? 0 : -INFINITY, v;

                h1 = h0 + k;
                w1 = w0 + k;
                if (kind == 2) {
                    h0 = oh * H / OH;
                    h1 = ((oh + 1) * H + OH - 1) / OH;
                    w0 = ow * W / OW;
                    w1 = ((ow + 1) * W + OW - 1) / OW;
                }
                cnt = kind == 1 ? k * k : (h1 - h0) * (w1 - w0);
                for (h = h0; h < h1; h++)
                    for (w = w0; w < w1; w++) {
                        if (h < 0 || h >= H || w < 0 || w >= W)
                            continue;
                        v = in[0].data[(p * H + h) * W + w];
                        acc = kind ? acc + v : fmax(acc, v);
                    }
                v = kind ? acc / (double)cnt : acc;
                out->data[(p * OH + oh) * OW + ow] = v * v;
            }
}

static void
ref_max_pool(const oc_tensor *in, oc_tensor *out)
{
    ref_pool(in, out, 0, 2, 1, 0, 0, 0);
}

static void
ref_avg_pool(const oc_tensor *in, oc_tensor *out)
{
    ref_pool(in, out, 1, 3, 2, 1, 0, 0);
}

static void
ref_adaptive_pool(const oc_tensor *in, oc_tensor *out)
{
    ref_pool(in, out, 2, 0, 1, 0, 2, 2);
}

static cg_tensor *
run_max_pool(cg_tensor **x)
{
    static const int k[2] = { 2, 2 }, s[2] = { 1, 1 };

    return square(cg_max_pool2d(x[0], k, s, NULL, NULL, 0));
}

static cg_tensor *
run_avg_pool(cg_tensor **x)
{
    static const int k[2] = { 3, 3 }, s[2] = { 2, 2 }, pd[2] = { 1, 1 };

    return square(cg_avg_pool2d(x[0], k, s, pd, 0, 1, 0));
}

static cg_tensor *run_adaptive_pool(cg_tensor **x)
{ return square(cg_adaptive_avg_pool2d(x[0], 2, 2)); }

/* Convolution (tr 0) or transposed convolution (tr 1) of x [N, C, H, W]
 * (or [N, C, L] for conv1d) with w and the bias in[2] (n > 2): stride,
 * padding, groups, dilation the same in both dimensions. */
static void
ref_conv_g(const oc_tensor *in, int n, oc_tensor *out, int tr, int64_t s,
           int64_t pd, int64_t G, int64_t dl)
{
    const oc_tensor *x = &in[0], *w = &in[1];
    int d1 = x->ndim == 3;
    int64_t N = x->shape[0], C = x->shape[1], H = d1 ? 1 : x->shape[2];
    int64_t W = x->shape[x->ndim - 1], R = d1 ? 1 : w->shape[2];
    int64_t S = w->shape[w->ndim - 1], K = tr ? w->shape[1] * G : w->shape[0];
    int64_t ph = d1 ? 0 : pd, sh = d1 ? 1 : s, Cg = C / G, Kg = K / G;
    int64_t OH, OW, b, k, oh, ow, ci, r, q, h, ww;

    OH = tr ? (H - 1) * sh - 2 * ph + dl * (R - 1) + 1
            : (H + 2 * ph - dl * (R - 1) - 1) / sh + 1;
    OW = tr ? (W - 1) * s - 2 * pd + dl * (S - 1) + 1
            : (W + 2 * pd - dl * (S - 1) - 1) / s + 1;
    out->ndim = x->ndim;
    out->shape[0] = N;
    out->shape[1] = K;
    if (!d1)
        out->shape[2] = OH;
    out->shape[out->ndim - 1] = OW;
    oc_alloc(out);
    for (b = 0; b < N; b++)
        for (k = 0; k < K; k++)
            for (oh = 0; oh < OH * OW; oh++)
                out->data[(b * K + k) * OH * OW + oh] = n > 2 ? in[2].data[k]
                                                              : 0;
    for (b = 0; b < N; b++)
        for (ci = 0; ci < C; ci++)
            for (h = 0; h < H; h++)
                for (ww = 0; ww < W; ww++)
                    for (r = 0; r < R; r++)
                        for (q = 0; q < S; q++) {
                            int64_t gi = ci / Cg, kk;
                            double xv = x->data[((b * C + ci) * H + h) * W +
                                                ww];

                            if (tr) {
                                oh = h * sh - ph + r * dl;
                                ow = ww * s - pd + q * dl;
                                if (oh < 0 || oh >= OH || ow < 0 || ow >= OW)
                                    continue;
                                for (kk = 0; kk < Kg; kk++)
                                    out->data[((b * K + gi * Kg + kk) * OH +
                                               oh) * OW + ow] += xv *
                                        w->data[((ci * Kg + kk) * R + r) * S +
                                                q];
                                continue;
                            }
                            /* the outputs whose window takes (h, ww) */
                            if ((h + ph - r * dl) % sh ||
                                (ww + pd - q * dl) % s)
                                continue;
                            oh = (h + ph - r * dl) / sh;
                            ow = (ww + pd - q * dl) / s;
                            if (h + ph - r * dl < 0 || oh >= OH ||
                                ww + pd - q * dl < 0 || ow >= OW)
                                continue;
                            for (kk = 0; kk < Kg; kk++)
                                out->data[((b * K + gi * Kg + kk) * OH + oh) *
                                          OW + ow] += xv *
                                    w->data[(((gi * Kg + kk) * Cg + ci % Cg) *
                                             R + r) * S + q];
                        }
}

static void
ref_conv2d(const oc_tensor *in, oc_tensor *out)
{
    ref_conv_g(in, 3, out, 0, 2, 1, 1, 1);
}

static void
ref_conv2d_groups(const oc_tensor *in, oc_tensor *out)
{
    ref_conv_g(in, 2, out, 0, 1, 1, 2, 2);
}

static void
ref_conv1d(const oc_tensor *in, oc_tensor *out)
{
    ref_conv_g(in, 3, out, 0, 2, 1, 1, 1);
}

static void
ref_convt(const oc_tensor *in, oc_tensor *out)
{
    ref_conv_g(in, 3, out, 1, 2, 1, 1, 1);
}

static cg_tensor *
run_conv2d(cg_tensor **x)
{
    cg_conv_options o = { { 2, 2 }, { 1, 1 }, { 1, 1 }, 1, 0 };

    return cg_conv2d(x[0], x[1], x[2], &o);
}

static cg_tensor *
run_conv2d_groups(cg_tensor **x)
{
    cg_conv_options o = { { 1, 1 }, { 1, 1 }, { 2, 2 }, 2, 0 };

    return cg_conv2d(x[0], x[1], NULL, &o);
}

static cg_tensor *
run_conv1d(cg_tensor **x)
{
    cg_conv_options o = { { 2, 2 }, { 1, 1 }, { 1, 1 }, 1, 0 };

    return cg_conv1d(x[0], x[1], x[2], &o);
}

static cg_tensor *
run_convt(cg_tensor **x)
{
    cg_conv_transpose_options o = { { 2, 2 }, { 1, 1 }, { 0, 0 }, 1,
                                    { 1, 1 } };

    return cg_conv_transpose2d(x[0], x[1], x[2], &o);
}

#define R2 { -2, -2, -2, -2 }, { 2, 2, 2, 2 }
#define RPOS { 0.5, 0.5, 0.5, 0.5 }, { 2, 2, 2, 2 }

const gg_case gg_cases[] = {
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
    { "gelu", 1, { "3,5" }, R2, 0, run_gelu, ref_gelu },
    { "sum", 1, { "3,5" }, { -1 }, { 1 }, 0, run_sum, ref_sum },
    { "mean", 1, { "3,5" }, R2, 0, run_mean, ref_mean },
    { "mean_all", 1, { "3,5" }, R2, 0, run_mean_all, ref_mean_all },
    { "var", 1, { "3,5" }, R2, 0, run_var, ref_var },
    { "max", 1, { "3,5" }, R2, 0, run_max, ref_max },
    { "min_dim", 1, { "3,5" }, R2, 0, run_min_dim, ref_min },
    { "matmul", 2, { "3,5", "5,4" }, R2, 0, run_matmul, ref_matmul },
    { "matmul_batch", 2, { "2,3,5", "5,4" }, R2, 0, run_matmul, ref_matmul },
    { "matmul_tt", 2, { "5,3", "4,5" }, R2, 0, run_matmul_tt,
      ref_matmul_tt },
    { "linear", 3, { "3,5", "4,5", "4" }, { -1, -1, -1 }, { 1, 1, 1 }, 0,
      run_linear, ref_linear },
    { "layer_norm", 3, { "3,5", "5", "5" }, R2, 0, run_layer_norm,
      ref_layer_norm },
    { "layer_norm_2d", 1, { "2,3,5" }, R2, 0, run_layer_norm2,
      ref_layer_norm2 },
    { "linear_relu", 3, { "3,5", "4,5", "4" }, { -1, -1, -1 }, { 1, 1, 1 },
      0, run_linear_relu, ref_linear_relu },
    { "linear_tanh", 3, { "3,5", "4,5", "4" }, { -1, -1, -1 }, { 1, 1, 1 },
      0, run_linear_tanh, ref_linear_tanh },
    { "linear_sigmoid", 3, { "7,5", "4,5", "4" }, { -1, -1, -1 },
      { 1, 1, 1 }, 0, run_linear_sigmoid, ref_linear_sigmoid },
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
    { "embedding", 1, { "7,5" }, R2, 0, run_embedding, ref_embedding },
    { "index_select", 1, { "3,5" }, R2, 0, run_index_select,
      ref_index_select },
    { "batch_norm_train", 3, { "4,3,2", "3", "3" }, R2, 0, run_bn_train,
      ref_bn_train },
    { "batch_norm_eval", 3, { "5,3", "3", "3" }, R2, 0, run_bn_eval,
      ref_bn_eval },
    { "max_pool2d", 1, { "1,2,4,5" }, R2, 0, run_max_pool, ref_max_pool },
    { "avg_pool2d", 1, { "2,1,5,5" }, R2, 0, run_avg_pool, ref_avg_pool },
    { "adaptive_avg_pool2d", 1, { "1,2,5,3" }, R2, 0, run_adaptive_pool,
      ref_adaptive_pool },
    { "conv2d", 3, { "2,3,5,4", "2,3,3,2", "2" }, R2, 0, run_conv2d,
      ref_conv2d },
    { "conv2d_groups", 2, { "1,4,4,5", "2,2,2,3" }, R2, 0, run_conv2d_groups,
      ref_conv2d_groups },
    { "conv1d", 3, { "2,3,7", "2,3,3", "2" }, R2, 0, run_conv1d,
      ref_conv1d },
    { "conv_transpose2d", 3, { "1,3,3,4", "3,2,3,2", "2" }, R2, 0,
      run_convt, ref_convt },
};

const int gg_ncases = (int)(sizeof gg_cases / sizeof gg_cases[0]);

void
gg_make_targets(void)
{
    int64_t n = 3;

    if (target_dev)
        return;
    target_dev = cg_tensor_from_host(tt_ctx(), CG_I32, 1, &n, targets);
    target2_dev = cg_tensor_from_host(tt_ctx(), CG_I32, 1, &n, targets2);
    ck_assert(target_dev && target2_dev);
    rows_dev = cg_tensor_from_host(tt_ctx(), CG_I32, 2,
                                   (const int64_t[2]){ 2, 3 }, rows_idx);
    cols_dev = cg_tensor_from_host(tt_ctx(), CG_I32, 1,
                                   (const int64_t[1]){ 4 }, cols_idx);
    ck_assert(rows_dev && cols_dev);
}

void
gg_free_targets(void)
{
    cg_tensor_free(target_dev);
    cg_tensor_free(target2_dev);
    cg_tensor_free(rows_dev);
    cg_tensor_free(cols_dev);
    target_dev = target2_dev = rows_dev = cols_dev = NULL;
}
