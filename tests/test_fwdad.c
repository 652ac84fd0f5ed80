/* SPDX-License-Identifier: MIT */
/*
 * tests/test_fwdad.c - forward-mode AD: for every op with a JVP rule, the
 * tangent against central finite differences of a plain C reference in
 * double on the host (for linear ops, against the op applied to the
 * tangent), and the dot-product test <u, J v> (forward mode) = <J^T u, v>
 * (reverse mode, cg_backward) for random u and v, at odd and broadcasting
 * shapes; cg_jvp of a small MLP with cross entropy against finite
 * differences and against PyTorch's torch.autograd.functional.jvp
 * (tests/fixtures/fwdad.txt, from gen_fwdad.py: outputs and tangents
 * within 1e-5 of each tensor's largest value); bad tangents, ops without
 * a rule (custom ops too), nested levels, and tangents dropped when the
 * level closes; dropout (the primal's mask), casts and split; the
 * gathers, max, layer_norm, batch_norm (training and evaluation), the
 * convolutions and the pools at odd shapes (fewer under valgrind).
 *
 * Tolerances.  Finite differences: h = 1e-6 on the double reference
 * (truncation about h^2 = 1e-12, rounding about 1e-16 / h = 1e-10), so
 * the error is the device's float32 tangent's: normalised error max |t -
 * fd| / max(1, max |fd|) <= 1e-4, several times what float32 rounding of
 * sums over a few dozen terms and the transcendental functions' few-ulp
 * errors explain.  Dot products: |<u, Jv> - <J^T u, v>| <= 1e-5 (sum
 * |u_i (Jv)_i| + sum |g_k v_k|), both sides float32 sums read back and
 * added in double.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/internal.h"
#include "fixture.h"
#include "ops/internal.h"
#include "opcheck.h"
#include "testutil.h"

#define FD_H 1e-6
#define FD_TOL 1e-4
#define DOT_TOL 1e-5
#define MAXIN 3

typedef struct fcase {
    const char *name;
    int nin;
    const char *shapes[MAXIN];
    double lo[MAXIN], hi[MAXIN];      /* 0, 0: [-2, 2] */
    int ints[MAXIN];                  /* int32 input in [0, ints) */
    cg_tensor *(*run)(cg_tensor **in, const struct fcase *c);
    /* NULL: the op is linear, J v is the op on v. */
    void (*ref)(const oc_tensor *in, oc_tensor *out, const struct fcase *c);
    double p[4];
} fcase;

static void
parse_shape(const char *s, oc_tensor *t)
{
    t->ndim = 0;
    while (*s) {
        char *end;

        t->shape[t->ndim++] = strtoll(s, &end, 10);
        s = *end == ',' ? end + 1 : end;
    }
    oc_alloc(t);
}

static cg_tensor *
dev(const oc_tensor *t, int is_int)
{
    cg_tensor *d;
    int64_t i;

    if (is_int) {
        int32_t *v = malloc((size_t)t->numel * sizeof *v + 1);

        for (i = 0; i < t->numel; i++)
            v[i] = (int32_t)t->data[i];
        d = cg_tensor_from_host(tt_ctx(), CG_I32, t->ndim, t->shape, v);
        free(v);
    } else {
        float *v = malloc((size_t)t->numel * sizeof *v + 1);

        for (i = 0; i < t->numel; i++)
            v[i] = (float)t->data[i];
        d = cg_tensor_from_host(tt_ctx(), CG_F32, t->ndim, t->shape, v);
        free(v);
    }
    ck_assert_msg(d != NULL, "%s", TT_ERR);
    return d;
}

static double *
host(const cg_tensor *t)
{
    int64_t n = cg_tensor_numel(t), i;
    float *v = malloc((size_t)n * sizeof *v + 1);
    double *r = malloc((size_t)n * sizeof *r + 1);

    ck_assert_int_eq(cg_tensor_to_host_f32(t, v, (size_t)n), CG_OK);
    for (i = 0; i < n; i++)
        r[i] = v[i];
    free(v);
    return r;
}

/* Random values rounded to float32 (what the device sees), away from 0. */
static void
fill(oc_tensor *t, double lo, double hi, int ints)
{
    int64_t i;

    for (i = 0; i < t->numel; i++) {
        if (ints) {
            t->data[i] = floor(oc_uniform(0, ints));
            continue;
        }
        do
            t->data[i] = (float)oc_uniform(lo, hi);
        while (fabs(t->data[i]) < 0.05);
    }
}

static void
check_case(const fcase *c)
{
    oc_tensor x[MAXIN], v[MAXIN], xp[MAXIN], yp = { 0 }, ym = { 0 };
    cg_tensor *X[MAXIN], *V[MAXIN], *D[MAXIN], *L[MAXIN], *y, *t, *y2, *u;
    double *th, *uh, err = 0, scale = 1, lhs = 0, rhs = 0, mag = 0;
    int64_t n, i;
    int k, s;

    for (k = 0; k < c->nin; k++) {
        double lo = c->lo[k], hi = c->hi[k];

        if (lo == 0 && hi == 0) {
            lo = -2;
            hi = 2;
        }
        parse_shape(c->shapes[k], &x[k]);
        parse_shape(c->shapes[k], &v[k]);
        parse_shape(c->shapes[k], &xp[k]);
        fill(&x[k], lo, hi, c->ints[k]);
        fill(&v[k], -1, 1, 0);
        X[k] = dev(&x[k], c->ints[k] != 0);
        V[k] = c->ints[k] ? NULL : dev(&v[k], 0);
    }
    /* Forward mode. */
    ck_assert_int_eq(cg_fwad_enter(tt_ctx()), CG_OK);
    for (k = 0; k < c->nin; k++) {
        D[k] = c->ints[k] ? cg_tensor_ref(X[k]) : cg_make_dual(X[k], V[k]);
        ck_assert_msg(D[k] != NULL, "%s: %s", c->name, TT_ERR);
    }
    y = c->run(D, c);
    ck_assert_msg(y != NULL, "%s: %s", c->name, TT_ERR);
    t = cg_tangent(y);
    ck_assert_msg(t != NULL, "%s: no tangent: %s", c->name, TT_ERR);
    ck_assert_int_eq(cg_tensor_ndim(t), cg_tensor_ndim(y));
    n = cg_tensor_numel(y);
    ck_assert_int_eq(cg_tensor_numel(t), n);
    for (k = 0; k < c->nin; k++)
        cg_tensor_free(D[k]);
    cg_tensor_free(y);
    ck_assert_int_eq(cg_fwad_exit(tt_ctx()), CG_OK);
    ck_assert_ptr_null(cg_tangent(t));
    th = host(t);
    /* Against finite differences, or the op on the tangent. */
    if (c->ref) {
        for (s = 0; s < 2; s++) {
            for (k = 0; k < c->nin; k++)
                for (i = 0; i < x[k].numel; i++)
                    xp[k].data[i] = x[k].data[i] + (c->ints[k] ? 0 :
                                    (s ? -FD_H : FD_H) * v[k].data[i]);
            c->ref(xp, s ? &ym : &yp, c);
        }
        ck_assert_int_eq(yp.numel, n);
        for (i = 0; i < n; i++) {
            double fd = (yp.data[i] - ym.data[i]) / (2 * FD_H);

            scale = fmax(scale, fabs(fd));
            err = fmax(err, fabs(th[i] - fd));
        }
        free(yp.data);
        free(ym.data);
    } else {
        cg_tensor *Vin[MAXIN], *ref;
        double *rh;

        for (k = 0; k < c->nin; k++)
            Vin[k] = c->ints[k] ? X[k] : V[k];
        ref = c->run(Vin, c);
        ck_assert_ptr_nonnull(ref);
        rh = host(ref);
        for (i = 0; i < n; i++) {
            scale = fmax(scale, fabs(rh[i]));
            err = fmax(err, fabs(th[i] - rh[i]));
        }
        free(rh);
        cg_tensor_free(ref);
    }
    ck_assert_msg(err / scale <= FD_TOL, "%s: tangent error %g (scale %g)",
                  c->name, err, scale);
    /* The dot-product test against reverse mode. */
    for (k = 0; k < c->nin; k++) {
        L[k] = dev(&x[k], c->ints[k] != 0);
        if (!c->ints[k])
            ck_assert_int_eq(cg_tensor_set_requires_grad(L[k], 1), CG_OK);
    }
    y2 = c->run(L, c);
    ck_assert_ptr_nonnull(y2);
    {
        oc_tensor uo;

        uo.ndim = cg_tensor_ndim(y2);
        cg_tensor_shape(y2, uo.shape);
        oc_alloc(&uo);
        fill(&uo, -1, 1, 0);
        u = dev(&uo, 0);
        uh = uo.data;
    }
    ck_assert_msg(cg_backward(y2, u, 0) == CG_OK, "%s: %s", c->name, TT_ERR);
    for (i = 0; i < n; i++) {
        lhs += uh[i] * th[i];
        mag += fabs(uh[i] * th[i]);
    }
    for (k = 0; k < c->nin; k++) {
        double *g;

        if (c->ints[k])
            continue;
        ck_assert_ptr_nonnull(cg_tensor_grad(L[k]));
        g = host(cg_tensor_grad(L[k]));
        for (i = 0; i < v[k].numel; i++) {
            rhs += g[i] * v[k].data[i];
            mag += fabs(g[i] * v[k].data[i]);
        }
        free(g);
    }
    ck_assert_msg(fabs(lhs - rhs) <= DOT_TOL * fmax(mag, 1e-3),
                  "%s: <u, Jv> = %.9g, <J^T u, v> = %.9g", c->name, lhs, rhs);
    cg_tensor_free(y2);
    cg_tensor_free(u);
    cg_tensor_free(t);
    free(uh);
    free(th);
    for (k = 0; k < c->nin; k++) {
        cg_tensor_free(X[k]);
        cg_tensor_free(V[k]);
        cg_tensor_free(L[k]);
        free(x[k].data);
        free(v[k].data);
        free(xp[k].data);
    }
}

/* ------------------------------------------------------------------------
 * Elementwise
 * ------------------------------------------------------------------------ */

static double
gelu_d(double x)
{
    return 0.5 * x * (1 + erf(x / sqrt(2)));
}

static double
unary_f(const char *op, double x, const double *p)
{
    if (!strcmp(op, "neg")) return -x;
    if (!strcmp(op, "exp")) return exp(x);
    if (!strcmp(op, "log")) return log(x);
    if (!strcmp(op, "sqrt")) return sqrt(x);
    if (!strcmp(op, "abs")) return fabs(x);
    if (!strcmp(op, "tanh")) return tanh(x);
    if (!strcmp(op, "sigmoid")) return 1 / (1 + exp(-x));
    if (!strcmp(op, "relu")) return x > 0 ? x : 0;
    if (!strcmp(op, "leaky_relu")) return x > 0 ? x : p[0] * x;
    if (!strcmp(op, "gelu")) return gelu_d(x);
    if (!strcmp(op, "add_scalar")) return x + p[0];
    if (!strcmp(op, "mul_scalar")) return x * p[0];
    if (!strcmp(op, "pow_scalar")) return pow(x, p[0]);
    if (!strcmp(op, "clamp")) return fmin(fmax(x, p[0]), p[1]);
    ck_abort_msg("unknown unary %s", op);
    return 0;
}

static cg_tensor *
run_unary(cg_tensor **in, const fcase *c)
{
    const char *op = c->name;
    float p0 = (float)c->p[0], p1 = (float)c->p[1];

    if (!strcmp(op, "neg")) return cg_neg(in[0]);
    if (!strcmp(op, "exp")) return cg_exp(in[0]);
    if (!strcmp(op, "log")) return cg_log(in[0]);
    if (!strcmp(op, "sqrt")) return cg_sqrt(in[0]);
    if (!strcmp(op, "abs")) return cg_abs(in[0]);
    if (!strcmp(op, "tanh")) return cg_tanh(in[0]);
    if (!strcmp(op, "sigmoid")) return cg_sigmoid(in[0]);
    if (!strcmp(op, "relu")) return cg_relu(in[0]);
    if (!strcmp(op, "leaky_relu")) return cg_leaky_relu(in[0], p0);
    if (!strcmp(op, "gelu")) return cg_gelu(in[0]);
    if (!strcmp(op, "add_scalar")) return cg_add_scalar(in[0], p0);
    if (!strcmp(op, "mul_scalar")) return cg_mul_scalar(in[0], p0);
    if (!strcmp(op, "pow_scalar")) return cg_pow_scalar(in[0], p0);
    if (!strcmp(op, "clamp")) return cg_clamp(in[0], p0, p1);
    return NULL;
}

static void
ref_unary(const oc_tensor *in, oc_tensor *out, const fcase *c)
{
    int64_t i;

    out->ndim = in[0].ndim;
    memcpy(out->shape, in[0].shape, sizeof out->shape);
    oc_alloc(out);
    for (i = 0; i < out->numel; i++)
        out->data[i] = unary_f(c->name, in[0].data[i], c->p);
}

#define UNARY(op, shape, lo, hi, p0, p1) \
    { op, 1, { shape }, { lo }, { hi }, { 0 }, run_unary, ref_unary, \
      { p0, p1 } }

static const fcase unary_cases[] = {
    UNARY("neg", "3,5", 0, 0, 0, 0),
    UNARY("exp", "13", 0, 0, 0, 0),
    UNARY("log", "3,5", 0.2, 3, 0, 0),
    UNARY("sqrt", "7,1", 0.2, 3, 0, 0),
    UNARY("abs", "13", 0, 0, 0, 0),
    UNARY("tanh", "3,5", 0, 0, 0, 0),
    UNARY("sigmoid", "", 0, 0, 0, 0),
    UNARY("relu", "3,5", 0, 0, 0, 0),
    UNARY("leaky_relu", "13", 0, 0, 0.1, 0),
    UNARY("gelu", "3,5", 0, 0, 0, 0),
    UNARY("add_scalar", "7,1", 0, 0, 1.5, 0),
    UNARY("mul_scalar", "13", 0, 0, -0.75, 0),
    UNARY("pow_scalar", "3,5", 0.2, 2, 2.5, 0),
    UNARY("clamp", "3,5", 0, 0, -1, 1),
};

static double
binary_f(const char *op, double a, double b)
{
    if (!strcmp(op, "add")) return a + b;
    if (!strcmp(op, "sub")) return a - b;
    if (!strcmp(op, "mul")) return a * b;
    if (!strcmp(op, "div")) return a / b;
    if (!strcmp(op, "pow")) return pow(a, b);
    if (!strcmp(op, "maximum")) return fmax(a, b);
    if (!strcmp(op, "minimum")) return fmin(a, b);
    ck_abort_msg("unknown binary %s", op);
    return 0;
}

static cg_tensor *
run_binary(cg_tensor **in, const fcase *c)
{
    const char *op = c->name;

    if (!strcmp(op, "add")) return cg_add(in[0], in[1]);
    if (!strcmp(op, "sub")) return cg_sub(in[0], in[1]);
    if (!strcmp(op, "mul")) return cg_mul(in[0], in[1]);
    if (!strcmp(op, "div")) return cg_div(in[0], in[1]);
    if (!strcmp(op, "pow")) return cg_pow(in[0], in[1]);
    if (!strcmp(op, "maximum")) return cg_maximum(in[0], in[1]);
    if (!strcmp(op, "minimum")) return cg_minimum(in[0], in[1]);
    return NULL;
}

static void
ref_binary(const oc_tensor *in, oc_tensor *out, const fcase *c)
{
    int64_t i;

    oc_bcast_shape(&in[0], &in[1], out);
    oc_alloc(out);
    for (i = 0; i < out->numel; i++)
        out->data[i] = binary_f(c->name,
            in[0].data[oc_bcast_index(&in[0], out->ndim, out->shape, i)],
            in[1].data[oc_bcast_index(&in[1], out->ndim, out->shape, i)]);
}

#define BINARY(op, sa, sb, lo0, hi0, lo1, hi1) \
    { op, 2, { sa, sb }, { lo0, lo1 }, { hi0, hi1 }, { 0 }, run_binary, \
      ref_binary, { 0 } }

static const fcase binary_cases[] = {
    BINARY("add", "3,5", "3,5", 0, 0, 0, 0),
    BINARY("add", "7,1", "1,5", 0, 0, 0, 0),
    BINARY("sub", "13", "", 0, 0, 0, 0),
    BINARY("sub", "7,1", "1,5", 0, 0, 0, 0),
    BINARY("mul", "3,5", "3,5", 0, 0, 0, 0),
    BINARY("mul", "7,1", "1,5", 0, 0, 0, 0),
    BINARY("mul", "", "13", 0, 0, 0, 0),
    BINARY("div", "7,1", "1,5", 0, 0, 0.5, 2),
    BINARY("div", "3,5", "3,5", 0, 0, -2, -0.5),
    BINARY("pow", "3,5", "3,5", 0.3, 2, 0, 0),
    BINARY("pow", "7,1", "1,5", 0.3, 2, 0, 0),
    BINARY("maximum", "7,1", "1,5", 0, 0, 0, 0),
    BINARY("minimum", "3,5", "3,5", 0, 0, 0, 0),
};

static cg_tensor *
run_where(cg_tensor **in, const fcase *c)
{
    (void)c;
    return cg_where(in[0], in[1], in[2]);
}

static void
ref_where(const oc_tensor *in, oc_tensor *out, const fcase *c)
{
    oc_tensor ab;
    int64_t i;

    (void)c;
    oc_bcast_shape(&in[1], &in[2], &ab);
    oc_bcast_shape(&in[0], &ab, out);
    oc_alloc(out);
    for (i = 0; i < out->numel; i++)
        out->data[i] =
            in[0].data[oc_bcast_index(&in[0], out->ndim, out->shape, i)]
            ? in[1].data[oc_bcast_index(&in[1], out->ndim, out->shape, i)]
            : in[2].data[oc_bcast_index(&in[2], out->ndim, out->shape, i)];
}

/* ------------------------------------------------------------------------
 * Reductions, products, softmax, losses
 * ------------------------------------------------------------------------ */

static cg_tensor *
run_reduce(cg_tensor **in, const fcase *c)
{
    int axes[2] = { (int)c->p[1], (int)c->p[2] }, na = (int)c->p[0];
    int keep = (int)c->p[3];

    if (!strcmp(c->name, "sum"))
        return cg_sum(in[0], na, axes, keep);
    if (!strcmp(c->name, "mean"))
        return cg_mean(in[0], na, axes, keep);
    return cg_var(in[0], na, axes, keep, 1);
}

/* var over the last axis of a 2-D tensor, correction 1. */
static void
ref_var(const oc_tensor *in, oc_tensor *out, const fcase *c)
{
    int64_t R = in[0].shape[0], C = in[0].shape[1], r, j;

    (void)c;
    out->ndim = 1;
    out->shape[0] = R;
    oc_alloc(out);
    for (r = 0; r < R; r++) {
        double m = 0, s = 0;

        for (j = 0; j < C; j++)
            m += in[0].data[r * C + j] / (double)C;
        for (j = 0; j < C; j++)
            s += (in[0].data[r * C + j] - m) * (in[0].data[r * C + j] - m);
        out->data[r] = s / (double)(C - 1);
    }
}

/* a [B.., M, K] (B: 0 or 1 dims) @ b [K, N], or with p[0]: a^T b^T with
 * a [K, M], b [N, K]. */
static cg_tensor *
run_matmul(cg_tensor **in, const fcase *c)
{
    return c->p[0] ? cg_matmul_t(in[0], in[1], 1, 1)
                   : cg_matmul(in[0], in[1]);
}

static void
ref_matmul(const oc_tensor *in, oc_tensor *out, const fcase *c)
{
    const oc_tensor *a = &in[0], *b = &in[1];
    int tr = c->p[0] != 0, nb = a->ndim - 2;
    int64_t M = tr ? a->shape[nb + 1] : a->shape[nb];
    int64_t K = tr ? a->shape[nb] : a->shape[nb + 1];
    int64_t N = tr ? b->shape[0] : b->shape[1];
    int64_t B = nb ? a->shape[0] : 1, q, i, j, k;

    out->ndim = a->ndim;
    if (nb)
        out->shape[0] = B;
    out->shape[nb] = M;
    out->shape[nb + 1] = N;
    oc_alloc(out);
    for (q = 0; q < B; q++)
        for (i = 0; i < M; i++)
            for (j = 0; j < N; j++) {
                double s = 0;

                for (k = 0; k < K; k++)
                    s += (tr ? a->data[k * M + i]
                             : a->data[q * M * K + i * K + k]) *
                         (tr ? b->data[j * K + k] : b->data[k * N + j]);
                out->data[q * M * N + i * N + j] = s;
            }
}

static cg_tensor *
run_linear(cg_tensor **in, const fcase *c)
{
    return cg__linear(in[0], in[1], c->nin > 2 ? in[2] : NULL);
}

static void
ref_linear(const oc_tensor *in, oc_tensor *out, const fcase *c)
{
    const oc_tensor *x = &in[0], *w = &in[1];
    int64_t O = w->shape[0], I = w->shape[1], R = x->numel / I, r, o, k;

    out->ndim = x->ndim;
    memcpy(out->shape, x->shape, sizeof out->shape);
    out->shape[x->ndim - 1] = O;
    oc_alloc(out);
    for (r = 0; r < R; r++)
        for (o = 0; o < O; o++) {
            double s = c->nin > 2 ? in[2].data[o] : 0;

            for (k = 0; k < I; k++)
                s += x->data[r * I + k] * w->data[o * I + k];
            out->data[r * O + o] = s;
        }
}

static cg_tensor *
run_softmax(cg_tensor **in, const fcase *c)
{
    return c->p[1] ? cg_log_softmax(in[0], (int)c->p[0])
                   : cg_softmax(in[0], (int)c->p[0]);
}

/* Along dimension p[0] (0 or 1) of a 2-D tensor. */
static void
ref_softmax(const oc_tensor *in, oc_tensor *out, const fcase *c)
{
    int d = (int)c->p[0];
    int64_t R = in[0].shape[0], C = in[0].shape[1];
    int64_t rows = d ? R : C, len = d ? C : R, rs = d ? C : 1, es = d ? 1 : C;
    int64_t r, j;

    out->ndim = 2;
    memcpy(out->shape, in[0].shape, sizeof out->shape);
    oc_alloc(out);
    for (r = 0; r < rows; r++) {
        double m = -INFINITY, s = 0;

        for (j = 0; j < len; j++)
            m = fmax(m, in[0].data[r * rs + j * es]);
        for (j = 0; j < len; j++)
            s += exp(in[0].data[r * rs + j * es] - m);
        for (j = 0; j < len; j++) {
            double lp = in[0].data[r * rs + j * es] - m - log(s);

            out->data[r * rs + j * es] = c->p[1] ? lp : exp(lp);
        }
    }
}

/* p[0]: reduction; p[1]: label smoothing; name "nll_loss" for NLL. */
static cg_tensor *
run_class_loss(cg_tensor **in, const fcase *c)
{
    if (!strcmp(c->name, "nll_loss"))
        return cg_nll_loss(in[0], in[1], (cg_reduction)c->p[0],
                           CG_IGNORE_INDEX);
    return cg_cross_entropy(in[0], in[1], (cg_reduction)c->p[0],
                            CG_IGNORE_INDEX, (float)c->p[1]);
}

static void
ref_class_loss(const oc_tensor *in, oc_tensor *out, const fcase *c)
{
    int64_t N = in[0].shape[0], C = in[0].shape[1], i, j;
    int nll = !strcmp(c->name, "nll_loss");
    double eps = c->p[1], total = 0;

    out->ndim = (cg_reduction)c->p[0] == CG_REDUCTION_NONE ? 1 : 0;
    out->shape[0] = N;
    oc_alloc(out);
    for (i = 0; i < N; i++) {
        const double *x = in[0].data + i * C;
        int64_t t = (int64_t)in[1].data[i];
        double m = -INFINITY, s = 0, l, all = 0;

        if (nll) {
            l = -x[t];
        } else {
            for (j = 0; j < C; j++)
                m = fmax(m, x[j]);
            for (j = 0; j < C; j++)
                s += exp(x[j] - m);
            for (j = 0; j < C; j++)
                all -= x[j] - m - log(s);
            l = (1 - eps) * -(x[t] - m - log(s)) + eps / (double)C * all;
        }
        if (out->ndim)
            out->data[i] = l;
        total += l;
    }
    if (!out->ndim)
        out->data[0] = (cg_reduction)c->p[0] == CG_REDUCTION_MEAN
                       ? total / (double)N : total;
}

static cg_tensor *
run_point_loss(cg_tensor **in, const fcase *c)
{
    if (!strcmp(c->name, "mse_loss"))
        return cg_mse_loss(in[0], in[1], (cg_reduction)c->p[0]);
    return cg_bce_with_logits(in[0], in[1], (cg_reduction)c->p[0]);
}

static void
ref_point_loss(const oc_tensor *in, oc_tensor *out, const fcase *c)
{
    int64_t i, n = in[0].numel;
    double total = 0;
    int mse = !strcmp(c->name, "mse_loss");

    out->ndim = (cg_reduction)c->p[0] == CG_REDUCTION_NONE ? in[0].ndim : 0;
    memcpy(out->shape, in[0].shape, sizeof out->shape);
    oc_alloc(out);
    for (i = 0; i < n; i++) {
        double a = in[0].data[i], b = in[1].data[i];
        double l = mse ? (a - b) * (a - b)
                       : fmax(a, 0) - a * b + log1p(exp(-fabs(a)));

        if (out->ndim)
            out->data[i] = l;
        total += l;
    }
    if (!out->ndim)
        out->data[0] = (cg_reduction)c->p[0] == CG_REDUCTION_MEAN
                       ? total / (double)n : total;
}

/* complex_abs (p[0] 0) and complex_angle (1) of [..., 2] tensors. */
static cg_tensor *
run_polar(cg_tensor **in, const fcase *c)
{
    return c->p[0] ? cg_complex_angle(in[0]) : cg_complex_abs(in[0]);
}

static void
ref_polar(const oc_tensor *in, oc_tensor *out, const fcase *c)
{
    int64_t e;

    out->ndim = in[0].ndim - 1;
    memcpy(out->shape, in[0].shape, sizeof out->shape);
    oc_alloc(out);
    for (e = 0; e < out->numel; e++) {
        double re = in[0].data[2 * e], im = in[0].data[2 * e + 1];

        out->data[e] = c->p[0] ? atan2(im, re) : hypot(re, im);
    }
}

static const fcase misc_cases[] = {
    { "where", 3, { "3,5", "3,5", "1,5" }, { 0 }, { 0 }, { 2, 0, 0 },
      run_where, ref_where, { 0 } },
    { "complex_abs", 1, { "3,5,2" }, { 0 }, { 0 }, { 0 }, run_polar,
      ref_polar, { 0 } },
    { "complex_angle", 1, { "7,2" }, { 0 }, { 0 }, { 0 }, run_polar,
      ref_polar, { 1 } },
    { "where", 3, { "7,1", "", "1,5" }, { 0 }, { 0 }, { 2, 0, 0 },
      run_where, ref_where, { 0 } },
    { "sum", 1, { "3,5" }, { 0 }, { 0 }, { 0 }, run_reduce, NULL,
      { 1, 1, 0, 0 } },
    { "sum", 1, { "7,1,5" }, { 0 }, { 0 }, { 0 }, run_reduce, NULL,
      { 0, 0, 0, 0 } },
    { "mean", 1, { "3,5" }, { 0 }, { 0 }, { 0 }, run_reduce, NULL,
      { 1, 0, 0, 1 } },
    { "mean", 1, { "13" }, { 0 }, { 0 }, { 0 }, run_reduce, NULL,
      { 0, 0, 0, 0 } },
    { "var", 1, { "3,5" }, { 0 }, { 0 }, { 0 }, run_reduce, ref_var,
      { 1, 1, 0, 0 } },
    { "matmul", 2, { "3,5", "5,4" }, { 0 }, { 0 }, { 0 }, run_matmul,
      ref_matmul, { 0 } },
    { "matmul", 2, { "2,3,5", "5,7" }, { 0 }, { 0 }, { 0 }, run_matmul,
      ref_matmul, { 0 } },
    { "matmul_t", 2, { "5,3", "4,5" }, { 0 }, { 0 }, { 0 }, run_matmul,
      ref_matmul, { 1 } },
    { "linear", 3, { "7,5", "3,5", "3" }, { 0 }, { 0 }, { 0 }, run_linear,
      ref_linear, { 0 } },
    { "linear", 2, { "5", "3,5" }, { 0 }, { 0 }, { 0 }, run_linear,
      ref_linear, { 0 } },
    { "linear", 3, { "2,3,5", "4,5", "4" }, { 0 }, { 0 }, { 0 }, run_linear,
      ref_linear, { 0 } },
    { "softmax", 1, { "3,5" }, { 0 }, { 0 }, { 0 }, run_softmax,
      ref_softmax, { 1, 0 } },
    { "softmax", 1, { "7,3" }, { 0 }, { 0 }, { 0 }, run_softmax,
      ref_softmax, { 0, 0 } },
    { "log_softmax", 1, { "3,5" }, { 0 }, { 0 }, { 0 }, run_softmax,
      ref_softmax, { 1, 1 } },
    { "log_softmax", 1, { "7,3" }, { 0 }, { 0 }, { 0 }, run_softmax,
      ref_softmax, { 0, 1 } },
    { "cross_entropy", 2, { "7,5", "7" }, { 0 }, { 0 }, { 0, 5 },
      run_class_loss, ref_class_loss, { CG_REDUCTION_MEAN, 0 } },
    { "cross_entropy", 2, { "7,5", "7" }, { 0 }, { 0 }, { 0, 5 },
      run_class_loss, ref_class_loss, { CG_REDUCTION_NONE, 0 } },
    { "cross_entropy", 2, { "3,5", "3" }, { 0 }, { 0 }, { 0, 5 },
      run_class_loss, ref_class_loss, { CG_REDUCTION_SUM, 0.1 } },
    { "nll_loss", 2, { "7,5", "7" }, { 0 }, { 0 }, { 0, 5 },
      run_class_loss, ref_class_loss, { CG_REDUCTION_MEAN, 0 } },
    { "mse_loss", 2, { "3,5", "3,5" }, { 0 }, { 0 }, { 0 },
      run_point_loss, ref_point_loss, { CG_REDUCTION_MEAN } },
    { "mse_loss", 2, { "13", "13" }, { 0 }, { 0 }, { 0 },
      run_point_loss, ref_point_loss, { CG_REDUCTION_NONE } },
    { "bce_with_logits", 2, { "3,5", "3,5" }, { 0, 0.1 }, { 0, 0.9 }, { 0 },
      run_point_loss, ref_point_loss, { CG_REDUCTION_SUM } },
};

/* ------------------------------------------------------------------------
 * Views and joins (linear: checked against the op on the tangent)
 * ------------------------------------------------------------------------ */

static cg_tensor *
run_view(cg_tensor **in, const fcase *c)
{
    const char *op = c->name;
    cg_tensor *a, *r;

    if (!strcmp(op, "reshape"))
        return cg_reshape(in[0], 2, (const int64_t[]){ 5, 3 });
    if (!strcmp(op, "flatten"))
        return cg_flatten(in[0], 0, -1);
    if (!strcmp(op, "transpose"))
        return cg_transpose(in[0], 0, 1);
    if (!strcmp(op, "permute"))
        return cg_permute(in[0], (const int[]){ 2, 0, 1 });
    if (!strcmp(op, "narrow"))
        return cg_narrow(in[0], 1, 1, 3);
    if (!strcmp(op, "expand"))
        return cg_expand(in[0], 2, (const int64_t[]){ 7, 5 });
    if (!strcmp(op, "squeeze"))
        return cg_squeeze(in[0], 1);
    if (!strcmp(op, "unsqueeze"))
        return cg_unsqueeze(in[0], 0);
    if (!strcmp(op, "concat"))
        return cg_concat(in, 2, 0);
    if (!strcmp(op, "stack"))
        return cg_stack(in, 2, 1);
    if (!strcmp(op, "embedding"))
        return cg_embedding(in[0], in[1]);
    /* A transposed (non-contiguous) view made contiguous, then reduced
     * to a contiguous reshape: contiguous's own rule. */
    a = cg_transpose(in[0], 0, 1);
    r = a ? cg_contiguous(a) : NULL;
    cg_tensor_free(a);
    return r;
}

static const fcase view_cases[] = {
    { "reshape", 1, { "3,5" }, { 0 }, { 0 }, { 0 }, run_view, NULL, { 0 } },
    { "flatten", 1, { "3,5" }, { 0 }, { 0 }, { 0 }, run_view, NULL, { 0 } },
    { "transpose", 1, { "3,5" }, { 0 }, { 0 }, { 0 }, run_view, NULL,
      { 0 } },
    { "permute", 1, { "2,3,4" }, { 0 }, { 0 }, { 0 }, run_view, NULL,
      { 0 } },
    { "narrow", 1, { "3,5" }, { 0 }, { 0 }, { 0 }, run_view, NULL, { 0 } },
    { "expand", 1, { "7,1" }, { 0 }, { 0 }, { 0 }, run_view, NULL, { 0 } },
    { "squeeze", 1, { "7,1" }, { 0 }, { 0 }, { 0 }, run_view, NULL, { 0 } },
    { "unsqueeze", 1, { "13" }, { 0 }, { 0 }, { 0 }, run_view, NULL,
      { 0 } },
    { "contiguous", 1, { "3,5" }, { 0 }, { 0 }, { 0 }, run_view, NULL,
      { 0 } },
    { "concat", 2, { "3,5", "4,5" }, { 0 }, { 0 }, { 0 }, run_view, NULL,
      { 0 } },
    { "stack", 2, { "3,5", "3,5" }, { 0 }, { 0 }, { 0 }, run_view, NULL,
      { 0 } },
    { "embedding", 2, { "6,4", "5" }, { 0 }, { 0 }, { 0, 6 }, run_view,
      NULL, { 0 } },
};

/* ------------------------------------------------------------------------
 * Gathers, max, norms, convolutions, pools
 * ------------------------------------------------------------------------ */

/* p[0]: the dimension; indices in[1]. */
static cg_tensor *
run_index_select(cg_tensor **in, const fcase *c)
{
    return cg_index_select(in[0], (int)c->p[0], in[1]);
}

/* "max": cg_max over axis p[0]; "max_dim" / "min_dim": their values
 * along p[0]. */
static cg_tensor *
run_max(cg_tensor **in, const fcase *c)
{
    int ax = (int)c->p[0];
    cg_tensor *v = NULL, *i = NULL;

    if (!strcmp(c->name, "max"))
        return cg_max(in[0], 1, &ax, 0);
    if ((!strcmp(c->name, "max_dim") ? cg_max_dim(in[0], ax, 0, &v, &i)
                                     : cg_min_dim(in[0], ax, 0, &v, &i)))
        return NULL;
    cg_tensor_free(i);
    return v;
}

/* Over axis p[0] of a 2-D tensor. */
static void
ref_max(const oc_tensor *in, oc_tensor *out, const fcase *c)
{
    int ax = (int)c->p[0], mn = !strcmp(c->name, "min_dim");
    int64_t R = in[0].shape[0], C = in[0].shape[1], r, j;
    int64_t rows = ax ? R : C, len = ax ? C : R;

    out->ndim = 1;
    out->shape[0] = rows;
    oc_alloc(out);
    for (r = 0; r < rows; r++) {
        double m = mn ? INFINITY : -INFINITY;

        for (j = 0; j < len; j++) {
            double v = in[0].data[ax ? r * C + j : j * C + r];

            m = mn ? fmin(m, v) : fmax(m, v);
        }
        out->data[r] = m;
    }
}

/* Over the last p[0] dimensions; in[1], in[2]: weight and bias (nin 3). */
static cg_tensor *
run_layer_norm(cg_tensor **in, const fcase *c)
{
    int nn = (int)c->p[0];
    int64_t shape[CG_MAX_DIMS];

    cg_tensor_shape(in[0], shape);
    return cg_layer_norm(in[0], nn, shape + cg_tensor_ndim(in[0]) - nn,
                         c->nin > 1 ? in[1] : NULL, c->nin > 2 ? in[2]
                                                               : NULL,
                         1e-5f);
}

static void
ref_layer_norm(const oc_tensor *in, oc_tensor *out, const fcase *c)
{
    int64_t N = 1, rows, r, j;
    int d;

    for (d = in[0].ndim - (int)c->p[0]; d < in[0].ndim; d++)
        N *= in[0].shape[d];
    rows = in[0].numel / N;
    out->ndim = in[0].ndim;
    memcpy(out->shape, in[0].shape, sizeof out->shape);
    oc_alloc(out);
    for (r = 0; r < rows; r++) {
        const double *x = in[0].data + r * N;
        double m = 0, v = 0;

        for (j = 0; j < N; j++)
            m += x[j] / (double)N;
        for (j = 0; j < N; j++)
            v += (x[j] - m) * (x[j] - m) / (double)N;
        for (j = 0; j < N; j++)
            out->data[r * N + j] = (x[j] - m) / sqrt(v + 1e-5) *
                                   (c->nin > 1 ? in[1].data[j] : 1) +
                                   (c->nin > 2 ? in[2].data[j] : 0);
    }
}

/* The running statistics of the evaluation cases, channel ch. */
static double
bn_rm(int64_t ch)
{
    return 0.25 * (double)ch - 0.3;
}

static double
bn_rv(int64_t ch)
{
    return 0.5 + 0.375 * (double)ch;
}

/* p[0]: training; in[1], in[2]: weight and bias. */
static cg_tensor *
run_batch_norm(cg_tensor **in, const fcase *c)
{
    int64_t C = 0;
    float rm[16], rv[16];
    cg_tensor *m = NULL, *v = NULL, *y;
    int64_t ch;

    C = cg_tensor_numel(in[1]);
    for (ch = 0; ch < C; ch++) {
        rm[ch] = (float)bn_rm(ch);
        rv[ch] = (float)bn_rv(ch);
    }
    if (!c->p[0]) {
        m = cg_tensor_from_host(tt_ctx(), CG_F32, 1, &C, rm);
        v = cg_tensor_from_host(tt_ctx(), CG_F32, 1, &C, rv);
    }
    y = cg_batch_norm(in[0], m, v, in[1], in[2], c->p[0] != 0, 0.1f, 1e-5f);
    cg_tensor_free(m);
    cg_tensor_free(v);
    return y;
}

static void
ref_batch_norm(const oc_tensor *in, oc_tensor *out, const fcase *c)
{
    int64_t N = in[0].shape[0], C = in[0].shape[1], L = in[0].numel / N / C;
    int64_t ch, i, l;

    out->ndim = in[0].ndim;
    memcpy(out->shape, in[0].shape, sizeof out->shape);
    oc_alloc(out);
    for (ch = 0; ch < C; ch++) {
        double m = 0, v = 0, cnt = (double)(N * L);

        for (i = 0; i < N; i++)
            for (l = 0; l < L; l++)
                m += in[0].data[(i * C + ch) * L + l] / cnt;
        for (i = 0; i < N; i++)
            for (l = 0; l < L; l++) {
                double d = in[0].data[(i * C + ch) * L + l] - m;

                v += d * d / cnt;
            }
        if (!c->p[0]) {
            m = bn_rm(ch);
            v = (double)(float)bn_rv(ch);
        }
        for (i = 0; i < N; i++)
            for (l = 0; l < L; l++) {
                int64_t e = (i * C + ch) * L + l;

                out->data[e] = (in[0].data[e] - m) / sqrt(v + 1e-5) *
                               in[1].data[ch] + in[2].data[ch];
            }
    }
}

/* p[0], p[1]: stride, padding (both dimensions); p[2]: groups (0: 1);
 * p[3]: dilation (0: 1).  "conv1d" takes 3-D tensors. */
static cg_tensor *
run_conv(cg_tensor **in, const fcase *c)
{
    int s = (int)c->p[0], pd = (int)c->p[1], g = c->p[2] ? (int)c->p[2] : 1;
    int dl = c->p[3] ? (int)c->p[3] : 1;
    cg_tensor *b = c->nin > 2 ? in[2] : NULL;

    if (!strcmp(c->name, "conv_transpose2d")) {
        cg_conv_transpose_options o = { { s, s }, { pd, pd }, { 0, 0 }, g,
                                        { dl, dl } };

        return cg_conv_transpose2d(in[0], in[1], b, &o);
    } else {
        cg_conv_options o = { { s, s }, { pd, pd }, { dl, dl }, g, 0 };

        return !strcmp(c->name, "conv1d") ? cg_conv1d(in[0], in[1], b, &o)
                                          : cg_conv2d(in[0], in[1], b, &o);
    }
}

/* Convolution or transposed convolution of 4-D (or, for conv1d, 3-D: H
 * = 1) tensors. */
static void
ref_conv(const oc_tensor *in, oc_tensor *out, const fcase *c)
{
    const oc_tensor *x = &in[0], *w = &in[1];
    int tr = !strcmp(c->name, "conv_transpose2d"), d1 = x->ndim == 3;
    int64_t s = (int64_t)c->p[0], pd = (int64_t)c->p[1];
    int64_t G = c->p[2] ? (int64_t)c->p[2] : 1;
    int64_t dl = c->p[3] ? (int64_t)c->p[3] : 1;
    int64_t N = x->shape[0], C = x->shape[1], H = d1 ? 1 : x->shape[2];
    int64_t W = x->shape[x->ndim - 1], R = d1 ? 1 : w->shape[2];
    int64_t S = w->shape[w->ndim - 1], K = tr ? w->shape[1] * G : w->shape[0];
    int64_t ph = d1 ? 0 : pd, sh = d1 ? 1 : s;
    int64_t OH, OW, n, k, oh, ow, ci, r, q, h, ww, Cg = C / G, Kg = K / G;

    if (tr) {
        OH = (H - 1) * sh - 2 * ph + dl * (R - 1) + 1;
        OW = (W - 1) * s - 2 * pd + dl * (S - 1) + 1;
    } else {
        OH = (H + 2 * ph - dl * (R - 1) - 1) / sh + 1;
        OW = (W + 2 * pd - dl * (S - 1) - 1) / s + 1;
    }
    out->ndim = x->ndim;
    out->shape[0] = N;
    out->shape[1] = K;
    if (!d1)
        out->shape[2] = OH;
    out->shape[out->ndim - 1] = OW;
    oc_alloc(out);
    for (n = 0; n < N; n++)
        for (k = 0; k < K; k++)
            for (oh = 0; oh < OH; oh++)
                for (ow = 0; ow < OW; ow++)
                    out->data[((n * K + k) * OH + oh) * OW + ow] =
                        c->nin > 2 ? in[2].data[k] : 0;
    for (n = 0; n < N; n++)
        for (ci = 0; ci < C; ci++)
            for (h = 0; h < H; h++)
                for (ww = 0; ww < W; ww++)
                    for (r = 0; r < R; r++)
                        for (q = 0; q < S; q++) {
                            int64_t gi = ci / Cg, kk;

                            if (!tr)
                                continue;
                            oh = h * sh - ph + r * dl;
                            ow = ww * s - pd + q * dl;
                            if (oh < 0 || oh >= OH || ow < 0 || ow >= OW)
                                continue;
                            for (kk = 0; kk < Kg; kk++)
                                out->data[((n * K + gi * Kg + kk) * OH + oh) *
                                          OW + ow] +=
                                    x->data[((n * C + ci) * H + h) * W + ww] *
                                    w->data[((ci * Kg + kk) * R + r) * S + q];
                        }
    if (tr)
        return;
    for (n = 0; n < N; n++)
        for (k = 0; k < K; k++)
            for (oh = 0; oh < OH; oh++)
                for (ow = 0; ow < OW; ow++) {
                    int64_t gi = k / Kg, cc;
                    double acc = 0;

                    for (cc = 0; cc < Cg; cc++)
                        for (r = 0; r < R; r++)
                            for (q = 0; q < S; q++) {
                                h = oh * sh - ph + r * dl;
                                ww = ow * s - pd + q * dl;
                                if (h < 0 || h >= H || ww < 0 || ww >= W)
                                    continue;
                                acc += x->data[((n * C + gi * Cg + cc) * H +
                                                h) * W + ww] *
                                       w->data[((k * Cg + cc) * R + r) * S +
                                               q];
                            }
                    out->data[((n * K + k) * OH + oh) * OW + ow] += acc;
                }
}

/* p[0]: kernel, p[1]: stride, p[2]: padding (square).  adaptive: output
 * p[0] x p[1]. */
static cg_tensor *
run_pool(cg_tensor **in, const fcase *c)
{
    int k[2] = { (int)c->p[0], (int)c->p[0] };
    int s[2] = { (int)c->p[1], (int)c->p[1] };
    int pd[2] = { (int)c->p[2], (int)c->p[2] };

    if (!strcmp(c->name, "max_pool2d"))
        return cg_max_pool2d(in[0], k, s, pd, NULL, 0);
    if (!strcmp(c->name, "avg_pool2d"))
        return cg_avg_pool2d(in[0], k, s, pd, 0, 0, 0);
    return cg_adaptive_avg_pool2d(in[0], (int64_t)c->p[0],
                                  (int64_t)c->p[1]);
}

static void
ref_max_pool(const oc_tensor *in, oc_tensor *out, const fcase *c)
{
    int64_t k = (int64_t)c->p[0], s = (int64_t)c->p[1];
    int64_t pd = (int64_t)c->p[2], nd = in[0].ndim;
    int64_t H = in[0].shape[nd - 2], W = in[0].shape[nd - 1];
    int64_t P = in[0].numel / H / W, OH = (H + 2 * pd - k) / s + 1;
    int64_t OW = (W + 2 * pd - k) / s + 1, p, oh, ow, i, j;

    out->ndim = (int)nd;
    memcpy(out->shape, in[0].shape, sizeof out->shape);
    out->shape[nd - 2] = OH;
    out->shape[nd - 1] = OW;
    oc_alloc(out);
    for (p = 0; p < P; p++)
        for (oh = 0; oh < OH; oh++)
            for (ow = 0; ow < OW; ow++) {
                double m = -INFINITY;

                for (i = 0; i < k; i++)
                    for (j = 0; j < k; j++) {
                        int64_t h = oh * s - pd + i, w = ow * s - pd + j;

                        if (h >= 0 && h < H && w >= 0 && w < W)
                            m = fmax(m, in[0].data[(p * H + h) * W + w]);
                    }
                out->data[(p * OH + oh) * OW + ow] = m;
            }
}

#define NN(name, nin, shapes, ints, run, ref, ...) \
    { name, nin, shapes, { 0 }, { 0 }, ints, run, ref, { __VA_ARGS__ } }
#define SH(...) { __VA_ARGS__ }

/* The cases skipped under the checkers (valgrind, ASan, Oclgrind) are
 * flagged in nn_light[] with 0. */
static const fcase nn_cases[] = {
    NN("index_select", 2, SH("5,4", "6"), SH(0, 4), run_index_select, NULL,
       1),
    NN("index_select", 2, SH("5,3,2", "7"), SH(0, 5), run_index_select,
       NULL, 0),
    NN("max", 1, SH("3,5"), SH(0), run_max, ref_max, 1),
    NN("max_dim", 1, SH("4,3"), SH(0), run_max, ref_max, 0),
    NN("min_dim", 1, SH("3,5"), SH(0), run_max, ref_max, 1),
    NN("layer_norm", 3, SH("3,5", "5", "5"), SH(0), run_layer_norm,
       ref_layer_norm, 1),
    NN("layer_norm", 1, SH("2,3,4"), SH(0), run_layer_norm, ref_layer_norm,
       2),
    NN("batch_norm", 3, SH("4,3,5", "3", "3"), SH(0), run_batch_norm,
       ref_batch_norm, 1),
    NN("batch_norm", 3, SH("5,3", "3", "3"), SH(0), run_batch_norm,
       ref_batch_norm, 0),
    NN("batch_norm", 3, SH("2,3,2,3", "3", "3"), SH(0), run_batch_norm,
       ref_batch_norm, 1),
    NN("conv2d", 3, SH("2,3,6,5", "4,3,3,2", "4"), SH(0), run_conv,
       ref_conv, 2, 1, 0, 0),
    NN("conv2d", 2, SH("1,4,5,5", "4,2,3,3"), SH(0), run_conv, ref_conv, 1,
       1, 2, 2),
    NN("conv1d", 3, SH("2,3,7", "4,3,3", "4"), SH(0), run_conv, ref_conv, 2,
       1, 0, 0),
    NN("conv_transpose2d", 3, SH("2,3,4,3", "3,2,3,3", "2"), SH(0),
       run_conv, ref_conv, 2, 1, 0, 0),
    NN("max_pool2d", 1, SH("2,3,7,6"), SH(0), run_pool, ref_max_pool, 3, 2,
       1),
    NN("max_pool2d", 1, SH("1,2,6,6"), SH(0), run_pool, ref_max_pool, 2, 2,
       0),
    NN("avg_pool2d", 1, SH("2,3,7,6"), SH(0), run_pool, NULL, 3, 2, 1),
    NN("adaptive_avg_pool2d", 1, SH("2,3,7,5"), SH(0), run_pool, NULL, 3,
       2),
};

static const int nn_light[] = {
    1, 0, 1, 0, 1, 1, 0, 1, 0, 0, 1, 0, 1, 1, 1, 0, 1, 0,
};

START_TEST(unary_tangents_match_fd_and_reverse_mode)
{
    check_case(&unary_cases[_i]);
}
END_TEST

START_TEST(binary_tangents_broadcast_match_fd_and_reverse)
{
    check_case(&binary_cases[_i]);
}
END_TEST

START_TEST(reduction_product_softmax_loss_tangents_match)
{
    check_case(&misc_cases[_i]);
}
END_TEST

START_TEST(view_and_join_tangents_match)
{
    check_case(&view_cases[_i]);
}
END_TEST

START_TEST(gather_max_norm_conv_pool_tangents_match)
{
    if (tt_checker() && !nn_light[_i])
        return;
    check_case(&nn_cases[_i]);
}
END_TEST

/* dropout: the tangent takes the primal's mask; to_dtype: the tangent is
 * cast like the primal; split: each piece's tangent is its slice. */
START_TEST(dropout_cast_and_split_tangents)
{
    oc_tensor xo = { 2, { 7, 13 }, 0, NULL }, vo = { 2, { 7, 13 }, 0, NULL };
    cg_tensor *x, *v, *d, *y, *t, *h, *th, *vh, *parts[3];
    double *xh, *vhost, *yh, *tt;
    int64_t i;
    int kept = 0, k;

    oc_alloc(&xo);
    oc_alloc(&vo);
    fill(&xo, -2, 2, 0);
    fill(&vo, -1, 1, 0);
    x = dev(&xo, 0);
    v = dev(&vo, 0);
    ck_assert_int_eq(cg_fwad_enter(tt_ctx()), CG_OK);
    d = cg_make_dual(x, v);
    y = cg_dropout(d, 0.4f, 1);
    ck_assert_msg(y != NULL, "%s", TT_ERR);
    t = cg_tangent(y);
    ck_assert_ptr_nonnull(t);
    xh = host(x);
    vhost = host(v);
    yh = host(y);
    tt = host(t);
    for (i = 0; i < 7 * 13; i++) {
        double m = yh[i] / xh[i];       /* 0 or 1 / 0.6 */

        kept += m != 0;
        ck_assert_msg(fabs(tt[i] - m * vhost[i]) <= 1e-6 * fabs(m),
                      "dropout tangent %d: %g, mask %g, v %g", (int)i,
                      tt[i], m, vhost[i]);
    }
    ck_assert(kept > 0 && kept < 7 * 13);
    free(yh);
    free(tt);
    cg_tensor_free(t);
    cg_tensor_free(y);
    /* to_dtype: float16 both ways. */
    h = cg_to_dtype(d, CG_F16);
    ck_assert_msg(h != NULL, "%s", TT_ERR);
    th = cg_tangent(h);
    ck_assert_ptr_nonnull(th);
    ck_assert_int_eq(cg_tensor_dtype(th), CG_F16);
    vh = cg_to_dtype(v, CG_F16);
    tt = host(th);
    yh = host(vh);
    for (i = 0; i < 7 * 13; i++)
        ck_assert(tt[i] == yh[i]);
    free(tt);
    free(yh);
    cg_tensor_free(th);
    cg_tensor_free(vh);
    y = cg_to_dtype(h, CG_F32);
    t = cg_tangent(y);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(cg_tensor_dtype(t), CG_F32);
    cg_tensor_free(t);
    cg_tensor_free(y);
    cg_tensor_free(h);
    /* split into 3 + 4 + 6 columns. */
    ck_assert_int_eq(cg_split(d, 1, 3, (const int64_t[]){ 3, 4, 6 }, parts),
                     CG_OK);
    for (k = 0; k < 3; k++) {
        int64_t start = k == 0 ? 0 : k == 1 ? 3 : 7, r, c;
        int64_t w = cg_tensor_dim(parts[k], 1);

        t = cg_tangent(parts[k]);
        ck_assert_ptr_nonnull(t);
        tt = host(t);
        for (r = 0; r < 7; r++)
            for (c = 0; c < w; c++)
                ck_assert(tt[r * w + c] == vhost[r * 13 + start + c]);
        free(tt);
        cg_tensor_free(t);
        cg_tensor_free(parts[k]);
    }
    cg_tensor_free(d);
    ck_assert_int_eq(cg_fwad_exit(tt_ctx()), CG_OK);
    free(xh);
    free(vhost);
    free(xo.data);
    free(vo.data);
    cg_tensor_free(x);
    cg_tensor_free(v);
}
END_TEST

/* ------------------------------------------------------------------------
 * cg_jvp of an MLP with cross entropy
 * ------------------------------------------------------------------------ */

typedef struct {
    cg_tensor *target;
    cg_reduction reduction;
    float smoothing;
} mlp_user;

/* inputs: x [N, I], w1 [H, I], b1 [H], w2 [C, H], b2 [C]. */
static int
mlp_ce(void *user, int nin, cg_tensor *const *in, int nout, cg_tensor **out)
{
    mlp_user *u = user;
    cg_tensor *h = NULL, *a = NULL, *z = NULL;

    ck_assert_int_eq(nin, 5);
    ck_assert_int_eq(nout, 2);
    h = cg__linear(in[0], in[1], in[2]);
    a = h ? cg_tanh(h) : NULL;
    z = a ? cg__linear(a, in[3], in[4]) : NULL;
    out[0] = z ? cg_cross_entropy(z, u->target, u->reduction,
                                  CG_IGNORE_INDEX, u->smoothing) : NULL;
    out[1] = z;
    cg_tensor_free(h);
    cg_tensor_free(a);
    if (!out[0]) {
        cg_tensor_free(z);
        return cg__last_status();
    }
    return CG_OK;
}

enum { MN = 7, MI = 5, MH = 6, MC = 3 };

static void
ref_mlp(const oc_tensor *in, const int32_t *t, double *loss, double *z)
{
    int64_t n, j, k;
    double total = 0;

    for (n = 0; n < MN; n++) {
        double a[MH], m = -INFINITY, s = 0;

        for (j = 0; j < MH; j++) {
            double h = in[2].data[j];

            for (k = 0; k < MI; k++)
                h += in[0].data[n * MI + k] * in[1].data[j * MI + k];
            a[j] = tanh(h);
        }
        for (j = 0; j < MC; j++) {
            double v = in[4].data[j];

            for (k = 0; k < MH; k++)
                v += a[k] * in[3].data[j * MH + k];
            z[n * MC + j] = v;
            m = fmax(m, v);
        }
        for (j = 0; j < MC; j++)
            s += exp(z[n * MC + j] - m);
        total += -(z[n * MC + t[n]] - m - log(s));
    }
    *loss = total / MN;
}

START_TEST(jvp_of_mlp_cross_entropy_matches_fd)
{
    static const char *shapes[5] = { "7,5", "6,5", "6", "3,6", "3" };
    oc_tensor x[5], v[5], xp[5];
    cg_tensor *X[5], *V[5], *outs[2] = { NULL }, *tans[2] = { NULL };
    int32_t tg[MN];
    mlp_user u = { NULL, CG_REDUCTION_MEAN, 0 };
    double lp, lm, zp[MN * MC], zm[MN * MC], *th, *zh, err = 0;
    int k, i;

    for (i = 0; i < MN; i++)
        tg[i] = (int32_t)floor(oc_uniform(0, MC));
    u.target = cg_tensor_from_host(tt_ctx(), CG_I32, 1,
                                   (const int64_t[]){ MN }, tg);
    for (k = 0; k < 5; k++) {
        parse_shape(shapes[k], &x[k]);
        parse_shape(shapes[k], &v[k]);
        parse_shape(shapes[k], &xp[k]);
        fill(&x[k], -1, 1, 0);
        fill(&v[k], -1, 1, 0);
        X[k] = dev(&x[k], 0);
        V[k] = dev(&v[k], 0);
    }
    ck_assert_msg(cg_jvp(tt_ctx(), mlp_ce, &u, 5, X, V, 2, outs, tans) ==
                  CG_OK, "%s", TT_ERR);
    ck_assert_int_eq(cg_fwad_level(tt_ctx()), 0);
    ck_assert_ptr_null(cg_tangent(outs[0]));
    for (k = 0; k < 5; k++)
        for (i = 0; i < x[k].numel; i++)
            xp[k].data[i] = x[k].data[i] + FD_H * v[k].data[i];
    ref_mlp(xp, tg, &lp, zp);
    for (k = 0; k < 5; k++)
        for (i = 0; i < x[k].numel; i++)
            xp[k].data[i] = x[k].data[i] - FD_H * v[k].data[i];
    ref_mlp(xp, tg, &lm, zm);
    th = host(tans[0]);
    zh = host(tans[1]);
    ck_assert_msg(fabs(th[0] - (lp - lm) / (2 * FD_H)) <= FD_TOL *
                  fmax(1, fabs(th[0])), "loss tangent %g, fd %g", th[0],
                  (lp - lm) / (2 * FD_H));
    for (i = 0; i < MN * MC; i++)
        err = fmax(err, fabs(zh[i] - (zp[i] - zm[i]) / (2 * FD_H)));
    ck_assert_msg(err <= FD_TOL, "logits' tangent error %g", err);
    free(th);
    free(zh);
    /* A bad tangent: nothing stored, the level closed. */
    {
        cg_tensor *bad[5] = { V[0], V[2], V[2], V[3], V[4] };
        cg_tensor *o2[2] = { NULL }, *t2[2] = { NULL };

        ck_assert_int_eq(cg_jvp(tt_ctx(), mlp_ce, &u, 5, X, bad, 2, o2, t2),
                         CG_ESHAPE);
        ck_assert_ptr_null(o2[0]);
        ck_assert_ptr_null(t2[0]);
        ck_assert_int_eq(cg_fwad_level(tt_ctx()), 0);
    }
    for (k = 0; k < 2; k++) {
        cg_tensor_free(outs[k]);
        cg_tensor_free(tans[k]);
    }
    for (k = 0; k < 5; k++) {
        cg_tensor_free(X[k]);
        cg_tensor_free(V[k]);
        free(x[k].data);
        free(v[k].data);
        free(xp[k].data);
    }
    cg_tensor_free(u.target);
}
END_TEST

/* The largest |a - b| over the largest |b| (1 if b is all zeros). */
static double
rel_err(const cg_tensor *a, const fx_tensor *b)
{
    double *h, err = 0, big = 0;
    int64_t i;

    ck_assert_int_eq(cg_tensor_numel(a), b->numel);
    h = host(a);
    for (i = 0; i < b->numel; i++) {
        err = fmax(err, fabs(h[i] - b->data[i]));
        big = fmax(big, fabs(b->data[i]));
    }
    free(h);
    return err / (big > 0 ? big : 1);
}

static cg_tensor *
fx_dev(const fx_file *f, const char *name, int i)
{
    char key[64];
    const fx_tensor *t;
    cg_tensor *d;

    snprintf(key, sizeof key, "%s.%d", name, i);
    t = fx_get(f, key);
    ck_assert_msg(t != NULL, "fwdad.txt: no %s", key);
    d = cg_tensor_from_host(tt_ctx(), CG_F32, t->ndim, t->shape, t->data);
    ck_assert_ptr_nonnull(d);
    return d;
}

/* torch.autograd.functional.jvp of the same MLP (gen_fwdad.py): outputs
 * and tangents within 1e-5 of each tensor's largest value. */
START_TEST(jvp_of_mlp_matches_pytorch)
{
    static const char *names[5] = { "input", "w1", "b1", "w2", "b2" };
    static const char *refs[4] = { "loss", "logits", "jvp_loss",
                                   "jvp_logits" };
    char err[256], key[64];
    fx_file *f = fx_load_fixture("fwdad.txt", err, sizeof err);
    int i, k, cases, red;
    double eps;

    ck_assert_msg(f != NULL, "%s", err);
    cases = fx_config_int(f, "cases", 0);
    ck_assert_int_gt(cases, 0);
    for (i = 0; i < cases; i++) {
        cg_tensor *X[5], *V[5], *outs[2] = { NULL }, *tans[2] = { NULL };
        cg_tensor *got[4];
        const fx_tensor *tg;
        int32_t *ti;
        mlp_user u;
        const char *conf;

        snprintf(key, sizeof key, "case.%d", i);
        conf = fx_config_str(f, key);
        ck_assert_ptr_nonnull(conf);
        ck_assert_int_eq(sscanf(conf, "%d %lf", &red, &eps), 2);
        u.reduction = (cg_reduction)red;
        u.smoothing = (float)eps;
        snprintf(key, sizeof key, "target.%d", i);
        tg = fx_get(f, key);
        ck_assert_ptr_nonnull(tg);
        ti = malloc((size_t)tg->numel * sizeof *ti);
        for (k = 0; k < tg->numel; k++)
            ti[k] = (int32_t)tg->data[k];
        u.target = cg_tensor_from_host(tt_ctx(), CG_I32, 1, tg->shape, ti);
        free(ti);
        for (k = 0; k < 5; k++) {
            char tname[64];

            snprintf(tname, sizeof tname, "tangent_%s", names[k]);
            X[k] = fx_dev(f, names[k], i);
            V[k] = fx_dev(f, tname, i);
        }
        ck_assert_msg(cg_jvp(tt_ctx(), mlp_ce, &u, 5, X, V, 2, outs, tans)
                      == CG_OK, "%s", TT_ERR);
        got[0] = outs[0];
        got[1] = outs[1];
        got[2] = tans[0];
        got[3] = tans[1];
        for (k = 0; k < 4; k++) {
            const fx_tensor *r;
            double e;

            snprintf(key, sizeof key, "%s.%d", refs[k], i);
            r = fx_get(f, key);
            ck_assert_msg(r != NULL, "fwdad.txt: no %s", key);
            e = rel_err(got[k], r);
            ck_assert_msg(e <= 1e-5, "case %d: %s off by %g of its largest "
                          "value", i, refs[k], e);
        }
        for (k = 0; k < 2; k++) {
            cg_tensor_free(outs[k]);
            cg_tensor_free(tans[k]);
        }
        for (k = 0; k < 5; k++) {
            cg_tensor_free(X[k]);
            cg_tensor_free(V[k]);
        }
        cg_tensor_free(u.target);
    }
    fx_free(f);
}
END_TEST

/* ------------------------------------------------------------------------
 * Levels, errors
 * ------------------------------------------------------------------------ */

static cg_tensor *
filled(int ndim, const int64_t *shape, float v)
{
    cg_tensor *t = cg_full(tt_ctx(), ndim, shape, v);

    ck_assert_ptr_nonnull(t);
    return t;
}

START_TEST(bad_tangents_change_nothing)
{
    static const int64_t s35[2] = { 3, 5 }, s53[2] = { 5, 3 };
    cg_tensor *x = filled(2, s35, 1), *t = filled(2, s35, 1);
    cg_tensor *w = filled(2, s53, 1), *h, *i, *d;
    cg_context *other;
    int32_t iv[15] = { 0 };

    /* No level. */
    ck_assert_ptr_null(cg_make_dual(x, t));
    ck_assert_int_eq(cg__last_status(), CG_ESTATE);
    ck_assert_int_eq(cg_fwad_exit(tt_ctx()), CG_ESTATE);
    ck_assert_int_eq(cg_fwad_enter(tt_ctx()), CG_OK);
    ck_assert_int_eq(cg_fwad_enter(tt_ctx()), CG_ESTATE);
    ck_assert_int_eq(cg_fwad_level(tt_ctx()), 1);
    ck_assert_ptr_null(cg_make_dual(x, w));
    ck_assert_int_eq(cg__last_status(), CG_ESHAPE);
    h = cg_to_dtype(t, CG_F16);
    ck_assert_ptr_nonnull(h);
    ck_assert_ptr_null(cg_make_dual(x, h));
    ck_assert_int_eq(cg__last_status(), CG_EDTYPE);
    i = cg_tensor_from_host(tt_ctx(), CG_I32, 2, s35, iv);
    ck_assert_ptr_null(cg_make_dual(x, i));
    ck_assert_int_eq(cg__last_status(), CG_EDTYPE);
    ck_assert_ptr_null(cg_make_dual(i, i));
    ck_assert_int_eq(cg__last_status(), CG_EDTYPE);
    other = cg_context_new(NULL);
    ck_assert_ptr_nonnull(other);
    {
        float ones[15];
        cg_tensor *o;
        int k;

        for (k = 0; k < 15; k++)
            ones[k] = 1;
        o = cg_tensor_from_host(other, CG_F32, 2, s35, ones);
        ck_assert_ptr_nonnull(o);
        ck_assert_ptr_null(cg_make_dual(x, o));
        ck_assert_int_eq(cg__last_status(), CG_ECONTEXT);
        cg_tensor_free(o);
    }
    cg_context_free(other);
    /* Nothing changed: x has no tangent, the level is still open. */
    ck_assert_ptr_null(cg_tangent(x));
    ck_assert_str_eq(cg_last_error(), "");
    ck_assert_ptr_null(x->fw_drop);
    ck_assert_ptr_null(tt_ctx()->fwad_list);
    ck_assert_int_eq(cg_fwad_level(tt_ctx()), 1);
    /* An op on no dual records nothing for forward mode. */
    d = cg_exp(x);
    ck_assert_ptr_nonnull(d);
    ck_assert_ptr_null(d->fw_node);
    ck_assert_ptr_null(tt_ctx()->fwad_list);
    cg_tensor_free(d);
    ck_assert_int_eq(cg_fwad_exit(tt_ctx()), CG_OK);
    ck_assert_int_eq(cg_fwad_level(tt_ctx()), 0);
    cg_tensor_free(h);
    cg_tensor_free(i);
    cg_tensor_free(x);
    cg_tensor_free(t);
    cg_tensor_free(w);
}
END_TEST

/* Kernel launches on the shared context so far. */
static uint64_t
launches(void)
{
    cg_memory_stats st;

    ck_assert_int_eq(cg_context_stats(tt_ctx(), &st), CG_OK);
    return st.kernels_enqueued;
}

/* A new [rows, cols] float32 tensor holding v[i] = base + step * i. */
static cg_tensor *
ramp(int64_t rows, int64_t cols, float base, float step)
{
    int64_t s[2] = { rows, cols };
    float v[64];
    cg_tensor *t;
    int i;

    ck_assert_int_le(rows * cols, 64);
    for (i = 0; i < rows * cols; i++)
        v[i] = base + step * (float)i;
    t = cg_tensor_from_host(tt_ctx(), CG_F32, 2, s, v);
    ck_assert_ptr_nonnull(t);
    return t;
}

/* Reads t (n elements, any layout) into v. */
static void
read_back(cg_tensor *t, float *v, int n)
{
    cg_tensor *c = cg_contiguous(t);

    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(cg_tensor_to_host_f32(c, v, (size_t)n), CG_OK);
    cg_tensor_free(c);
}

/* Reads t's tangent (n elements) into v. */
static void
read_tangent(cg_tensor *t, float *v, int n)
{
    cg_tensor *tan = cg_tangent(t);

    ck_assert_msg(tan != NULL, "%s", TT_ERR);
    read_back(tan, v, n);
    cg_tensor_free(tan);
}

/* Elementwise ops give their output's tangent from the primal's own
 * launch (kernels/elementwise.cl's NAME_j, NAME_jv): one launch, no
 * pending rule; row and strided layouts, broadcasting, one or both
 * tangents of a binary op.  A tangent laid out otherwise than its primal
 * takes the JVP rule; the values agree either way. */
START_TEST(elementwise_tangents_come_from_the_primal_launch)
{
    cg_tensor *x = ramp(3, 5, -0.7f, 0.1f), *tx = ramp(3, 5, 0.3f, -0.05f);
    cg_tensor *b = ramp(1, 5, 0.5f, 0.25f), *tb = ramp(1, 5, -1, 0.5f);
    cg_tensor *x53 = ramp(5, 3, -0.7f, 0.1f), *t53 = ramp(5, 3, 0.3f, -0.05f);
    cg_tensor *dx, *db, *y, *xt, *dxt, *dx53;
    float hx[15], htx[15], hb[5], htb[5], hy[15], hty[15];
    uint64_t before;
    int i, j;

    read_back(x, hx, 15);
    read_back(tx, htx, 15);
    read_back(b, hb, 5);
    read_back(tb, htb, 5);
    ck_assert_int_eq(cg_fwad_enter(tt_ctx()), CG_OK);
    dx = cg_make_dual(x, tx);
    db = cg_make_dual(b, tb);
    ck_assert_ptr_nonnull(dx);
    ck_assert_ptr_nonnull(db);

    /* Unary, row kernel: exp' = exp. */
    before = launches();
    y = cg_exp(dx);
    ck_assert_ptr_nonnull(y);
    ck_assert_uint_eq(launches() - before, 1);
    ck_assert_ptr_null(y->fw_node);
    ck_assert_ptr_nonnull(y->fw_tangent);
    read_tangent(y, hty, 15);
    for (i = 0; i < 15; i++)
        ck_assert_float_eq_tol(hty[i], expf(hx[i]) * htx[i], 1e-6f);
    cg_tensor_free(y);

    /* Binary, both tangents, b broadcast over rows: (x b)' = tx b + x tb. */
    before = launches();
    y = cg_mul(dx, db);
    ck_assert_ptr_nonnull(y);
    ck_assert_uint_eq(launches() - before, 1);
    ck_assert_ptr_null(y->fw_node);
    read_tangent(y, hty, 15);
    for (i = 0; i < 15; i++)
        ck_assert_float_eq_tol(hty[i], htx[i] * hb[i % 5] + hx[i] * htb[i % 5],
                               1e-6f);
    cg_tensor_free(y);

    /* Binary, only b's tangent: (x / b)' = -x tb / b^2. */
    before = launches();
    y = cg_div(x, db);
    ck_assert_ptr_nonnull(y);
    ck_assert_uint_eq(launches() - before, 1);
    read_tangent(y, hty, 15);
    for (i = 0; i < 15; i++)
        ck_assert_float_eq_tol(hty[i], -hx[i] * htb[i % 5] /
                               (hb[i % 5] * hb[i % 5]), 1e-5f);
    cg_tensor_free(y);

    /* Strided (not row) layout: a transposed dual, whose tangent is the
     * transposed tangent, through tanh. */
    dx53 = cg_make_dual(x53, t53);
    ck_assert_ptr_nonnull(dx53);
    xt = cg_transpose(dx53, 0, 1);
    ck_assert_ptr_nonnull(xt);
    read_tangent(xt, hty, 15);
    before = launches();
    y = cg_tanh(xt);
    ck_assert_ptr_nonnull(y);
    ck_assert_uint_eq(launches() - before, 1);
    ck_assert_ptr_null(y->fw_node);
    read_tangent(y, hty, 15);
    read_back(y, hy, 15);
    for (i = 0; i < 3; i++)
        for (j = 0; j < 5; j++) {
            float xv = -0.7f + 0.1f * (float)(j * 3 + i);
            float tv = 0.3f - 0.05f * (float)(j * 3 + i);

            ck_assert_float_eq_tol(hy[i * 5 + j], tanhf(xv), 1e-6f);
            ck_assert_float_eq_tol(hty[i * 5 + j],
                                   (1 - tanhf(xv) * tanhf(xv)) * tv, 1e-6f);
        }
    cg_tensor_free(y);
    cg_tensor_free(xt);

    /* A tangent laid out otherwise than its primal (a contiguous tangent
     * on a transposed primal): the rule, pending until asked for. */
    xt = cg_transpose(x53, 0, 1);
    ck_assert_ptr_nonnull(xt);
    dxt = cg_make_dual(xt, tx);
    ck_assert_ptr_nonnull(dxt);
    y = cg_sigmoid(dxt);
    ck_assert_ptr_nonnull(y);
    ck_assert_ptr_nonnull(y->fw_node);
    read_back(y, hy, 15);
    read_tangent(y, hty, 15);
    for (i = 0; i < 15; i++)
        ck_assert_float_eq_tol(hty[i], hy[i] * (1 - hy[i]) * htx[i], 1e-6f);
    cg_tensor_free(y);
    cg_tensor_free(dxt);
    cg_tensor_free(xt);

    ck_assert_int_eq(cg_fwad_exit(tt_ctx()), CG_OK);
    cg_tensor_free(dx53);
    cg_tensor_free(dx);
    cg_tensor_free(db);
    cg_tensor_free(x);
    cg_tensor_free(tx);
    cg_tensor_free(b);
    cg_tensor_free(tb);
    cg_tensor_free(x53);
    cg_tensor_free(t53);
}
END_TEST

/* A custom op (a copy) under a built-in op's name. */
static const char copy_src[] =
    "__kernel void f(__global const float *x0, __global float *y, uint n,\n"
    "                __global const int *shapes, __global const float *p)\n"
    "{\n"
    "    uint i = get_global_id(0);\n"
    "    if (i < n)\n"
    "        y[i] = x0[i];\n"
    "}\n"
    "__kernel void b0(__global const float *x0, __global const float *y,\n"
    "                 __global const float *gy, __global float *gx, uint n,\n"
    "                 __global const int *shapes, __global const float *p)\n"
    "{\n"
    "    uint i = get_global_id(0);\n"
    "    if (i < n)\n"
    "        gx[i] = gy[i];\n"
    "}\n";

static const char *const copy_bwd[] = { "b0" };

START_TEST(ops_without_a_rule_fail_naming_the_op)
{
    static const int64_t s[4] = { 1, 2, 5, 5 };
    cg_tensor *x = filled(4, s, 0.5f), *t = filled(4, s, 1), *d, *y;
    int ax = 3;

    ck_assert_int_eq(cg_fwad_enter(tt_ctx()), CG_OK);
    d = cg_make_dual(x, t);
    ck_assert_ptr_nonnull(d);
    {
        cg_custom_op_def def = { 0 };
        cg_custom_op *op;

        def.name = "exp";
        def.source = copy_src;
        def.forward_kernel = "f";
        def.backward_kernels = copy_bwd;
        def.ninputs = 1;
        op = cg_custom_op_new(tt_ctx(), &def);
        ck_assert_msg(op != NULL, "%s", TT_ERR);
        ck_assert_ptr_null(cg_custom_op_apply(op, 1, &d));
        ck_assert_int_eq(cg__last_status(), CG_EUNSUPPORTED);
        ck_assert_msg(strstr(cg_last_error(), "custom op 'exp'") != NULL,
                      "%s", TT_ERR);
        cg_custom_op_free(op);
    }
    /* The same op on a tensor without tangent works. */
    y = cg_max(x, 1, &ax, 0);
    ck_assert_msg(y != NULL, "%s", TT_ERR);
    cg_tensor_free(y);
    /* The failure left the dual as it was. */
    y = cg_tangent(d);
    ck_assert_ptr_eq(y, t);
    cg_tensor_free(y);
    cg_tensor_free(d);
    ck_assert_int_eq(cg_fwad_exit(tt_ctx()), CG_OK);
    cg_tensor_free(x);
    cg_tensor_free(t);
}
END_TEST

START_TEST(tangents_drop_at_exit_and_survive_backward)
{
    static const float xs[4] = { 0.5f, -1, 2, 0.25f }, vs[4] = { 1, 2, -1,
                                                                 3 };
    int64_t n = 4;
    cg_tensor *x = cg_tensor_from_host(tt_ctx(), CG_F32, 1, &n, xs);
    cg_tensor *v = cg_tensor_from_host(tt_ctx(), CG_F32, 1, &n, vs);
    cg_tensor *d, *e, *s, *t;
    float tv, g[4];
    double want = 0;
    int k;

    ck_assert_int_eq(cg_tensor_set_requires_grad(x, 1), CG_OK);
    ck_assert_int_eq(cg_fwad_enter(tt_ctx()), CG_OK);
    d = cg_make_dual(x, v);
    e = cg_exp(d);
    s = cg_sum(e, 0, NULL, 0);
    ck_assert_ptr_nonnull(s);
    ck_assert(cg_tensor_requires_grad(s));
    /* The backward frees the graph; the pending tangent was taken first. */
    ck_assert_int_eq(cg_backward(s, NULL, 0), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(cg_tensor_grad(x), g, sizeof g),
                     CG_OK);
    for (k = 0; k < 4; k++) {
        ck_assert_float_eq_tol(g[k], expf(xs[k]), 1e-5f * expf(xs[k]));
        want += exp(xs[k]) * vs[k];
    }
    t = cg_tangent(s);
    ck_assert_msg(t != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_item(t, &tv), CG_OK);
    ck_assert_float_eq_tol(tv, want, 1e-5 * fabs(want));
    ck_assert(!cg_tensor_requires_grad(t));
    ck_assert_ptr_nonnull(tt_ctx()->fwad_list);
    ck_assert_int_eq(cg_fwad_exit(tt_ctx()), CG_OK);
    ck_assert_ptr_null(tt_ctx()->fwad_list);
    ck_assert_ptr_null(cg_tangent(s));
    ck_assert_ptr_null(cg_tangent(e));
    ck_assert_ptr_null(cg_tangent(d));
    ck_assert_str_eq(cg_last_error(), "");
    /* The tangent taken before stays the caller's. */
    ck_assert_int_eq(cg_tensor_item(t, &tv), CG_OK);
    ck_assert_float_eq_tol(tv, want, 1e-5 * fabs(want));
    cg_tensor_free(t);
    cg_tensor_free(s);
    cg_tensor_free(e);
    cg_tensor_free(d);
    cg_tensor_free(x);
    cg_tensor_free(v);
}
END_TEST

/* A container's forward under cg_jvp: a linear layer and the activation
 * after it, which a container otherwise fuses into one node without a
 * forward rule, run as the two ops inside a dual level, so the tangent
 * is the layers' one by one, bit for bit. */
static int
seq_fn(void *user, int n_in, cg_tensor *const *in, int n_out,
       cg_tensor **out)
{
    cg_module *seq = user;

    (void)n_in;
    (void)n_out;
    out[0] = cg_module_forward(seq, in[0]);
    return out[0] ? CG_OK : CG_EINVAL;
}

static int
layers_fn(void *user, int n_in, cg_tensor *const *in, int n_out,
          cg_tensor **out)
{
    cg_module *seq = user;
    cg_tensor *h = cg_tensor_ref(in[0]);
    int i;

    (void)n_in;
    (void)n_out;
    for (i = 0; h && i < cg_module_num_children(seq); i++) {
        cg_tensor *y = cg_module_forward(cg_module_child(seq, i, NULL), h);

        cg_tensor_free(h);
        h = y;
    }
    out[0] = h;
    return h ? CG_OK : CG_EINVAL;
}

START_TEST(jvp_through_a_container_with_linear_and_activation)
{
    int64_t xs[2] = { 4, 5 };
    cg_module *seq = cg_sequential_new(tt_ctx());
    cg_tensor *x = cg_rand_uniform(tt_ctx(), 2, xs, -1, 1);
    cg_tensor *v = cg_rand_uniform(tt_ctx(), 2, xs, -1, 1);
    cg_tensor *t[2] = { NULL, NULL }, *y[2] = { NULL, NULL };
    float a[4 * 3], b[4 * 3], ya[4 * 3], yb[4 * 3];

    ck_assert(seq && x && v);
    ck_assert_int_eq(cg_module_add(seq, NULL, cg_linear_new(tt_ctx(), 5, 7,
                                                            1)), CG_OK);
    ck_assert_int_eq(cg_module_add(seq, NULL,
                                   cg_activation_new(tt_ctx(), "relu")),
                     CG_OK);
    ck_assert_int_eq(cg_module_add(seq, NULL, cg_linear_new(tt_ctx(), 7, 3,
                                                            1)), CG_OK);
    ck_assert_int_eq(cg_module_add(seq, NULL,
                                   cg_activation_new(tt_ctx(), "tanh")),
                     CG_OK);
    ck_assert_msg(cg_jvp(tt_ctx(), seq_fn, seq, 1, &x, &v, 1, &y[0], &t[0])
                  == CG_OK, "%s", TT_ERR);
    ck_assert_msg(cg_jvp(tt_ctx(), layers_fn, seq, 1, &x, &v, 1, &y[1],
                         &t[1]) == CG_OK, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_to_host(t[0], a, sizeof a), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(t[1], b, sizeof b), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(y[0], ya, sizeof ya), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(y[1], yb, sizeof yb), CG_OK);
    ck_assert(memcmp(a, b, sizeof a) == 0);
    ck_assert(memcmp(ya, yb, sizeof ya) == 0);
    cg_tensor_free(t[0]);
    cg_tensor_free(t[1]);
    cg_tensor_free(y[0]);
    cg_tensor_free(y[1]);
    cg_tensor_free(x);
    cg_tensor_free(v);
    cg_module_free(seq);
}
END_TEST

static Suite *
fwdad_suite(void)
{
    Suite *s = suite_create("fwdad");
    TCase *tc = tcase_create("fwdad");

    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, unary_tangents_match_fd_and_reverse_mode, 0,
                        (int)(sizeof unary_cases / sizeof unary_cases[0]));
    tcase_add_loop_test(tc,
                        binary_tangents_broadcast_match_fd_and_reverse,
                        0,
                        (int)(sizeof binary_cases / sizeof binary_cases[0]));
    tcase_add_loop_test(tc, reduction_product_softmax_loss_tangents_match, 0,
                        (int)(sizeof misc_cases / sizeof misc_cases[0]));
    tcase_add_loop_test(tc, view_and_join_tangents_match, 0,
                        (int)(sizeof view_cases / sizeof view_cases[0]));
    tcase_add_loop_test(tc, gather_max_norm_conv_pool_tangents_match, 0,
                        (int)(sizeof nn_cases / sizeof nn_cases[0]));
    tcase_add_test(tc, dropout_cast_and_split_tangents);
    tcase_add_test(tc, jvp_of_mlp_cross_entropy_matches_fd);
    tcase_add_test(tc, jvp_of_mlp_matches_pytorch);
    tcase_add_test(tc, bad_tangents_change_nothing);
    tcase_add_test(tc, elementwise_tangents_come_from_the_primal_launch);
    tcase_add_test(tc, ops_without_a_rule_fail_naming_the_op);
    tcase_add_test(tc, tangents_drop_at_exit_and_survive_backward);
    tcase_add_test(tc, jvp_through_a_container_with_linear_and_activation);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    tt_require_device();
    return tt_run(fwdad_suite());
}
