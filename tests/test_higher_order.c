/* SPDX-License-Identifier: MIT */
/*
 * tests/test_higher_order.c - gradients of gradients (create_graph): a
 * gradgradcheck for every op with a double backward, Hessian-vector
 * products (cg_hvp) of a small MLP with cross entropy, a WGAN-style
 * gradient penalty's parameter gradient, gradients taken three times,
 * cg_grad leaving every leaf's grad alone, cg_vjp against the host and
 * against cg_jvp (the dot-product test), cg_hvp_fwd (forward over
 * reverse) against cg_hvp and PyTorch's hvp fixture, and CG_EUNSUPPORTED
 * naming an op without a double backward.
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
#include "gradgrad_cases.h"
#include "ops/internal.h"
#include "testutil.h"

#define GG_TOL 1e-3
#define GG_H 1e-3

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

/* One case's host data: inputs x, directions w, upstream u (nout). */
typedef struct {
    const gg_case *c;
    oc_tensor x[4], w[4], u;
} gg_data;

static void
gg_setup(gg_data *d, const gg_case *c, cg_tensor **dx, cg_tensor **dw,
         cg_tensor **du)
{
    int64_t i;
    int j;

    d->c = c;
    for (j = 0; j < c->n; j++) {
        parse_shape(c->shapes[j], &d->x[j]);
        parse_shape(c->shapes[j], &d->w[j]);
        for (i = 0; i < d->x[j].numel; i++) {
            double v;

            do
                v = oc_uniform(c->lo[j], c->hi[j]);
            while (fabs(v) < c->away);
            d->x[j].data[i] = (float)v;
            d->w[j].data[i] = (float)oc_uniform(-1, 1);
        }
        dx[j] = upload(&d->x[j], 1);
        dw[j] = upload(&d->w[j], 0);
    }
    memset(&d->u, 0, sizeof d->u);
    c->ref(d->x, &d->u);            /* the output's shape */
    for (i = 0; i < d->u.numel; i++)
        d->u.data[i] = (float)oc_uniform(-1, 1);
    *du = upload(&d->u, 1);
}

/* Central difference of L in x[j][i] (second 0), or of S = d/dt L(x + t
 * w) at 0 (second 1, nested). */
static double
gg_ref(gg_data *d, int j, int64_t i, int second)
{
    double keep = d->x[j].data[i], r[2];
    int s;

    for (s = 0; s < 2; s++) {
        d->x[j].data[i] = keep + (s ? -GG_H : GG_H);
        r[s] = second ? (ref_loss(d->c, d->x, d->w, GG_H, d->u.data, NULL) -
                         ref_loss(d->c, d->x, d->w, -GG_H, d->u.data, NULL)) /
                        (2 * GG_H)
                      : ref_loss(d->c, d->x, d->w, 0, d->u.data, NULL);
    }
    d->x[j].data[i] = keep;
    return (r[0] - r[1]) / (2 * GG_H);
}

/* Checks device tensor t against ref[0..n-1] (freed). */
static void
gg_compare(const char *what, const gg_case *c, int j, const cg_tensor *t,
           double *ref, int64_t n, double *worst)
{
    double *dev = download(t, n), err = norm_err(dev, ref, n);

    *worst = fmax(*worst, err);
    ck_assert_msg(err <= GG_TOL, "%s: %s of input %d: error %g", c->name,
                  what, j, err);
    free(dev);
    free(ref);
}

/* S = sum_j <g_j, W_j>, recorded. */
static cg_tensor *
gg_dot(int n, cg_tensor **g, cg_tensor **w)
{
    cg_tensor *S = NULL;
    int j;

    for (j = 0; j < n; j++) {
        cg_tensor *s = cg_sum(T(cg_mul(g[j], w[j])), 0, NULL, 0);
        cg_tensor *t = s && S ? cg_add(S, s) : s ? cg_tensor_ref(s) : NULL;

        ck_assert_msg(t != NULL, "%s", TT_ERR);
        cg_tensor_free(s);
        cg_tensor_free(S);
        S = t;
    }
    return S;
}

static void
gradgradcheck(const gg_case *c)
{
    gg_data d;
    cg_tensor *dx[5], *dw[4], *y, *L, *S, *g[4], *gg[5];
    double *ref, *fp, *fm;
    int64_t i, nout;
    int j;

    gg_setup(&d, c, dx, dw, &dx[c->n]);
    nout = d.u.numel;
    y = c->run(dx);
    ck_assert_msg(y != NULL, "%s: %s", c->name, TT_ERR);
    ck_assert_int_eq(cg_tensor_numel(y), nout);
    L = cg_sum(T(cg_mul(y, dx[c->n])), 0, NULL, 0);
    ck_assert_msg(L != NULL, "%s: %s", c->name, TT_ERR);
    ck_assert_msg(cg_grad(L, NULL, c->n, dx, g, CG_GRAD_CREATE_GRAPH) ==
                  CG_OK, "%s: %s", c->name, TT_ERR);
    /* the first gradient, then the double backward: dS/dx and dS/dU */
    S = gg_dot(c->n, g, dw);
    ck_assert_msg(cg_tensor_requires_grad(S), "%s: the gradient has no "
                  "graph", c->name);
    ck_assert_msg(cg_grad(S, NULL, c->n + 1, dx, gg, 0) == CG_OK,
                  "%s: %s", c->name, TT_ERR);
    for (j = 0; j < c->n; j++) {
        int second;

        for (second = 0; second < 2; second++) {
            ref = malloc((size_t)d.x[j].numel * sizeof *ref);
            for (i = 0; i < d.x[j].numel; i++)
                ref[i] = gg_ref(&d, j, i, second);
            gg_compare(second ? "second derivative" : "gradient", c, j,
                       second ? gg[j] : g[j], ref, d.x[j].numel,
                       second ? &worst_second : &worst_first);
        }
    }
    /* dS/dU_k = (F_k(x + hW) - F_k(x - hW)) / 2h */
    ref = malloc((size_t)nout * sizeof *ref);
    fp = malloc((size_t)nout * sizeof *fp);
    fm = malloc((size_t)nout * sizeof *fm);
    ref_loss(c, d.x, d.w, GG_H, d.u.data, fp);
    ref_loss(c, d.x, d.w, -GG_H, d.u.data, fm);
    for (i = 0; i < nout; i++)
        ref[i] = (fp[i] - fm[i]) / (2 * GG_H);
    gg_compare("gradient of the upstream", c, c->n, gg[c->n], ref, nout,
               &worst_second);
    free(fp);
    free(fm);
    for (j = 0; j <= c->n; j++) {
        cg_tensor_free(gg[j]);
        cg_tensor_free(dx[j]);
    }
    for (j = 0; j < c->n; j++) {
        cg_tensor_free(g[j]);
        cg_tensor_free(dw[j]);
        free(d.x[j].data);
        free(d.w[j].data);
    }
    cg_tensor_free(S);
    cg_tensor_free(L);
    cg_tensor_free(y);
    free(d.u.data);
    drop_temps();
}

START_TEST(gradgradcheck_every_supported_op)
{
    gg_make_targets();
    gradgradcheck(&gg_cases[_i]);
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
 * cg_vjp: f(x, w) = (tanh(x w), sum(x * x)), x [VR, VK], w [VK, VC]; on
 * the host J^T (u1, u2) is gx = s w^T + 2 u2 x, gw = x^T s with s = u1
 * (1 - tanh(x w)^2).
 * ------------------------------------------------------------------------ */

#define VR 3
#define VK 5
#define VC 4

static int
vjp_fn(void *user, int n_in, cg_tensor *const *in, int n_out,
       cg_tensor **out)
{
    cg_tensor *m, *sq;

    (void)user;
    ck_assert_int_eq(n_in, 2);
    ck_assert_int_eq(n_out, 2);
    m = cg_matmul(in[0], in[1]);
    out[0] = m ? cg_tanh(m) : NULL;
    sq = cg_mul(in[0], in[0]);
    out[1] = sq ? cg_sum(sq, 0, NULL, 0) : NULL;
    cg_tensor_free(m);
    cg_tensor_free(sq);
    ck_assert(out[0] && out[1]);
    return CG_OK;
}

static cg_tensor *
random_tensor(int ndim, int64_t s0, int64_t s1, double **host)
{
    oc_tensor t = { 0 };
    cg_tensor *d;
    int64_t i;

    t.ndim = ndim;
    t.shape[0] = s0;
    t.shape[1] = s1;
    oc_alloc(&t);
    for (i = 0; i < t.numel; i++)
        t.data[i] = (float)oc_uniform(-1, 1);
    d = upload(&t, 0);
    *host = t.data;
    return d;
}

START_TEST(vjp_matches_the_host_and_jvp)
{
    double *x, *w, *u1, *u2, *vx, *vw, *gx, *gw, rx[VR * VK], rw[VK * VC];
    double lhs = 0, rhs = 0, mag = 0, *t0, *t1;
    cg_tensor *X = random_tensor(2, VR, VK, &x);
    cg_tensor *W = random_tensor(2, VK, VC, &w);
    cg_tensor *U1 = random_tensor(2, VR, VC, &u1);
    cg_tensor *U2 = random_tensor(0, 0, 0, &u2);
    cg_tensor *VX = random_tensor(2, VR, VK, &vx);
    cg_tensor *VW = random_tensor(2, VK, VC, &vw);
    cg_tensor *in[2] = { X, W }, *cot[2] = { U1, U2 }, *g[2] = { NULL };
    cg_tensor *outs[2] = { NULL }, *tan[2] = { NULL }, *tv[2] = { VX, VW };
    cg_tensor *bad[2];
    int64_t r, k, c, s3[2] = { VR, VC + 1 };
    float y2;
    double ref_y2 = 0;

    /* w a leaf that requires grad: its grad stays as it is */
    ck_assert_int_eq(cg_tensor_set_requires_grad(W, 1), CG_OK);
    ck_assert_msg(cg_vjp(tt_ctx(), vjp_fn, NULL, 2, in, 2, cot, outs, g) ==
                  CG_OK, "%s", TT_ERR);
    ck_assert_ptr_null(cg_tensor_grad(W));
    ck_assert(!cg_tensor_requires_grad(outs[0]));
    for (r = 0; r < VR * VK; r++)
        ref_y2 += x[r] * x[r];
    ck_assert_int_eq(cg_tensor_item(outs[1], &y2), CG_OK);
    ck_assert_double_eq_tol(y2, ref_y2, 1e-5 * fmax(1, ref_y2));
    memset(rx, 0, sizeof rx);
    memset(rw, 0, sizeof rw);
    for (r = 0; r < VR; r++)
        for (c = 0; c < VC; c++) {
            double a = 0, th, sv;

            for (k = 0; k < VK; k++)
                a += x[r * VK + k] * w[k * VC + c];
            th = tanh(a);
            sv = u1[r * VC + c] * (1 - th * th);
            for (k = 0; k < VK; k++) {
                rx[r * VK + k] += sv * w[k * VC + c];
                rw[k * VC + c] += x[r * VK + k] * sv;
            }
        }
    for (r = 0; r < VR * VK; r++)
        rx[r] += 2 * u2[0] * x[r];
    gx = download(g[0], VR * VK);
    gw = download(g[1], VK * VC);
    ck_assert_msg(norm_err(gx, rx, VR * VK) <= 1e-5, "gx error %g",
                  norm_err(gx, rx, VR * VK));
    ck_assert_msg(norm_err(gw, rw, VK * VC) <= 1e-5, "gw error %g",
                  norm_err(gw, rw, VK * VC));
    /* <u, J v> by forward mode = <J^T u, v> */
    ck_assert_msg(cg_jvp(tt_ctx(), vjp_fn, NULL, 2, in, tv, 2, NULL, tan) ==
                  CG_OK, "%s", TT_ERR);
    t0 = download(tan[0], VR * VC);
    t1 = download(tan[1], 1);
    for (r = 0; r < VR * VC; r++) {
        lhs += u1[r] * t0[r];
        mag += fabs(u1[r] * t0[r]);
    }
    lhs += u2[0] * t1[0];
    mag += fabs(u2[0] * t1[0]);
    for (r = 0; r < VR * VK; r++) {
        rhs += gx[r] * vx[r];
        mag += fabs(gx[r] * vx[r]);
    }
    for (r = 0; r < VK * VC; r++) {
        rhs += gw[r] * vw[r];
        mag += fabs(gw[r] * vw[r]);
    }
    ck_assert_msg(fabs(lhs - rhs) <= 1e-5 * mag, "<u, Jv> %.9g, <J^T u, v> "
                  "%.9g", lhs, rhs);
    /* A cotangent of the wrong shape: CG_ESHAPE, nothing stored. */
    bad[0] = cg_full(tt_ctx(), 2, s3, 1.0f);
    bad[1] = U2;
    cg_tensor_free(g[0]);
    cg_tensor_free(g[1]);
    cg_tensor_free(outs[0]);
    cg_tensor_free(outs[1]);
    g[0] = g[1] = outs[0] = outs[1] = NULL;
    ck_assert_int_eq(cg_vjp(tt_ctx(), vjp_fn, NULL, 2, in, 2, bad, outs, g),
                     CG_ESHAPE);
    ck_assert(!g[0] && !g[1] && !outs[0] && !outs[1]);
    ck_assert_ptr_nonnull(strstr(cg_last_error(), "cotangent 0"));
    ck_assert_int_eq(cg_vjp(tt_ctx(), vjp_fn, NULL, 0, in, 2, cot, NULL, g),
                     CG_EINVAL);
    cg_tensor_free(bad[0]);
    cg_tensor_free(tan[0]);
    cg_tensor_free(tan[1]);
    free(t0);
    free(t1);
    free(gx);
    free(gw);
    free(x);
    free(w);
    free(u1);
    free(u2);
    free(vx);
    free(vw);
    cg_tensor_free(X);
    cg_tensor_free(W);
    cg_tensor_free(U1);
    cg_tensor_free(U2);
    cg_tensor_free(VX);
    cg_tensor_free(VW);
}
END_TEST

/* Forward over reverse (cg_hvp_fwd) against reverse over reverse
 * (cg_hvp): the same H v to float32 rounding, 1e-5 of the largest
 * value; also a function of gelu, index_select (its gradient the
 * recorded "gather_grad"), layer_norm and mse_loss. */
static double
compare_hvps(cg_scalar_fn f, void *user, int n, cg_tensor *const *p,
             cg_tensor *const *v)
{
    cg_tensor *h1[4], *h2[4], *val1 = NULL, *val2 = NULL;
    double worst = 0;
    float a, b;
    int j;

    ck_assert_msg(cg_hvp(f, user, n, p, v, h1, &val1) == CG_OK, "%s",
                  TT_ERR);
    ck_assert_msg(cg_hvp_fwd(f, user, n, p, v, h2, &val2) == CG_OK, "%s",
                  TT_ERR);
    ck_assert_int_eq(cg_fwad_level(tt_ctx()), 0);
    ck_assert_int_eq(cg_tensor_item(val1, &a), CG_OK);
    ck_assert_int_eq(cg_tensor_item(val2, &b), CG_OK);
    ck_assert_float_eq(a, b);
    for (j = 0; j < n; j++) {
        int64_t m = cg_tensor_numel(p[j]);
        double *r = download(h1[j], m), *d = download(h2[j], m), e, big = 0;
        int64_t i;

        ck_assert_ptr_null(cg_tangent(h2[j]));
        for (i = 0; i < m; i++)
            big = fmax(big, fabs(r[i]));
        e = 0;
        for (i = 0; i < m; i++)
            e = fmax(e, fabs(d[i] - r[i]));
        e /= fmax(big, 1e-6);
        ck_assert_msg(e <= 1e-5, "parameter %d: forward over reverse is %g "
                      "of the largest value off", j, e);
        worst = fmax(worst, e);
        ck_assert_ptr_null(cg_tensor_grad(p[j]));
        free(r);
        free(d);
        cg_tensor_free(h1[j]);
        cg_tensor_free(h2[j]);
    }
    cg_tensor_free(val1);
    cg_tensor_free(val2);
    return worst;
}

typedef struct {
    cg_tensor *idx, *target;
} gelu_data;

/* mse(layer_norm(gelu(index_select(x, 0, idx) w^T)) * g, target) */
static cg_tensor *
gelu_loss(int n, cg_tensor *const *p, void *user)
{
    gelu_data *d = user;
    cg_tensor *s, *z, *a, *l, *m, *r;
    int64_t ns = 4;

    ck_assert_int_eq(n, 3);
    s = cg_index_select(p[0], 0, d->idx);
    z = s ? cg__linear(s, p[1], NULL) : NULL;
    a = z ? cg_gelu(z) : NULL;
    l = a ? cg_layer_norm(a, 1, &ns, NULL, NULL, 1e-5f) : NULL;
    m = l ? cg_mul(l, p[2]) : NULL;
    r = m ? cg_mse_loss(m, d->target, CG_REDUCTION_MEAN) : NULL;
    cg_tensor_free(s);
    cg_tensor_free(z);
    cg_tensor_free(a);
    cg_tensor_free(l);
    cg_tensor_free(m);
    return r;
}

/* sum(avg_pool(max_pool(tanh(batch_norm(x))))^2), training statistics */
static cg_tensor *
pool_loss(int n, cg_tensor *const *p, void *user)
{
    static const int k2[2] = { 2, 2 }, s1[2] = { 1, 1 }, pd[2] = { 1, 1 };
    cg_tensor *b, *t, *m, *a, *q, *r;

    (void)user;
    ck_assert_int_eq(n, 3);
    b = cg_batch_norm(p[0], NULL, NULL, p[1], p[2], 1, 0.1f, 1e-5f);
    t = b ? cg_tanh(b) : NULL;
    m = t ? cg_max_pool2d(t, k2, s1, NULL, NULL, 0) : NULL;
    a = m ? cg_avg_pool2d(m, k2, k2, pd, 0, 1, 0) : NULL;
    q = a ? cg_mul(a, a) : NULL;
    r = q ? cg_sum(q, 0, NULL, 0) : NULL;
    cg_tensor_free(b);
    cg_tensor_free(t);
    cg_tensor_free(m);
    cg_tensor_free(a);
    cg_tensor_free(q);
    return r;
}

/* sum(conv_transpose2d(tanh(conv2d(x, w, b)), w2)^2), stride 2 */
static cg_tensor *
conv_loss(int n, cg_tensor *const *p, void *user)
{
    cg_conv_options o = { { 2, 2 }, { 1, 1 }, { 1, 1 }, 1, 0 };
    cg_conv_transpose_options ot = { { 2, 2 }, { 0, 0 }, { 1, 1 }, 1,
                                     { 1, 1 } };
    cg_tensor *c, *t, *d, *q, *r;

    (void)user;
    ck_assert_int_eq(n, 4);
    c = cg_conv2d(p[0], p[1], p[2], &o);
    t = c ? cg_tanh(c) : NULL;
    d = t ? cg_conv_transpose2d(t, p[3], NULL, &ot) : NULL;
    q = d ? cg_mul(d, d) : NULL;
    r = q ? cg_sum(q, 0, NULL, 0) : NULL;
    cg_tensor_free(c);
    cg_tensor_free(t);
    cg_tensor_free(d);
    cg_tensor_free(q);
    return r;
}

START_TEST(forward_over_reverse_hvp_matches_reverse_over_reverse)
{
    double *p[4], *v[4], *hp[3], *hv_[3], *th, e1, e2;
    cg_tensor *dp[4], *dv[4], *gp[3], *gv[3];
    static const int32_t idx[5] = { 2, 0, 2, 1, 3 };
    mlp_data d;
    gelu_data gd;
    int64_t n = MN, ni = 5;
    int j;

    d.x = mlp_input();
    d.target = cg_tensor_from_host(tt_ctx(), CG_I32, 1, &n, mlp_targets);
    ck_assert_ptr_nonnull(d.target);
    mlp_params(p, v, dp, dv);
    e1 = compare_hvps(mlp_loss, &d, 4, dp, dv);
    /* an open level, a repeated input: errors, nothing stored */
    {
        cg_tensor *h[4] = { NULL }, *same[4] = { dp[0], dp[1], dp[0],
                                                 dp[3] };
        cg_tensor *sv[4] = { dv[0], dv[1], dv[0], dv[3] };

        ck_assert_int_eq(cg_fwad_enter(tt_ctx()), CG_OK);
        ck_assert_int_eq(cg_hvp_fwd(mlp_loss, &d, 4, dp, dv, h, NULL),
                         CG_ESTATE);
        ck_assert_int_eq(cg_fwad_exit(tt_ctx()), CG_OK);
        ck_assert_int_eq(cg_hvp_fwd(mlp_loss, &d, 4, same, sv, h, NULL),
                         CG_EINVAL);
        for (j = 0; j < 4; j++)
            ck_assert_ptr_null(h[j]);
        ck_assert_ptr_null(cg_tangent(dp[0]));
    }
    /* gelu, index_select, layer_norm, mse */
    gp[0] = random_tensor(2, 4, 3, &hp[0]);
    gp[1] = random_tensor(2, 4, 3, &hp[1]);
    gp[2] = random_tensor(1, 4, 0, &hp[2]);
    for (j = 0; j < 3; j++) {
        ck_assert_int_eq(cg_tensor_set_requires_grad(gp[j], 1), CG_OK);
        gv[j] = random_tensor(j < 2 ? 2 : 1, 4, j < 2 ? 3 : 0, &hv_[j]);
    }
    gd.idx = cg_tensor_from_host(tt_ctx(), CG_I32, 1, &ni, idx);
    ck_assert_ptr_nonnull(gd.idx);
    gd.target = random_tensor(2, 5, 4, &th);
    free(th);
    e2 = compare_hvps(gelu_loss, &gd, 3, gp, gv);
    worst_second = fmax(worst_second, fmax(e1, e2));
    /* batch_norm, max and average pooling */
    {
        cg_tensor *cp[3], *cv[3];
        oc_tensor xo = { 4, { 2, 3, 5, 4 }, 0, NULL };
        double *hx;

        oc_alloc(&xo);
        for (j = 0; j < (int)xo.numel; j++)
            xo.data[j] = (float)oc_uniform(-2, 2);
        cp[0] = upload(&xo, 1);
        for (j = 0; j < (int)xo.numel; j++)
            xo.data[j] = (float)oc_uniform(-1, 1);
        cv[0] = upload(&xo, 0);
        free(xo.data);
        for (j = 1; j < 3; j++) {
            cp[j] = random_tensor(1, 3, 0, &hx);
            free(hx);
            ck_assert_int_eq(cg_tensor_set_requires_grad(cp[j], 1), CG_OK);
            cv[j] = random_tensor(1, 3, 0, &hx);
            free(hx);
        }
        worst_second = fmax(worst_second, compare_hvps(pool_loss, NULL, 3,
                                                       cp, cv));
        for (j = 0; j < 3; j++) {
            cg_tensor_free(cp[j]);
            cg_tensor_free(cv[j]);
        }
    }
    /* conv2d and conv_transpose2d */
    {
        static const int64_t cs[4][4] = { { 1, 2, 5, 4 }, { 3, 2, 3, 3 },
                                          { 3 }, { 3, 2, 2, 3 } };
        static const int cn[4] = { 4, 4, 1, 4 };
        cg_tensor *cp[4], *cv[4];
        int q;

        for (j = 0; j < 4; j++) {
            oc_tensor t = { 0 };

            t.ndim = cn[j];
            memcpy(t.shape, cs[j], sizeof cs[j]);
            oc_alloc(&t);
            for (q = 0; q < (int)t.numel; q++)
                t.data[q] = (float)oc_uniform(-1, 1);
            cp[j] = upload(&t, 1);
            for (q = 0; q < (int)t.numel; q++)
                t.data[q] = (float)oc_uniform(-1, 1);
            cv[j] = upload(&t, 0);
            free(t.data);
        }
        worst_second = fmax(worst_second, compare_hvps(conv_loss, NULL, 4,
                                                       cp, cv));
        for (j = 0; j < 4; j++) {
            cg_tensor_free(cp[j]);
            cg_tensor_free(cv[j]);
        }
    }
    for (j = 0; j < 4; j++) {
        free(p[j]);
        free(v[j]);
        cg_tensor_free(dp[j]);
        cg_tensor_free(dv[j]);
    }
    for (j = 0; j < 3; j++) {
        free(hp[j]);
        free(hv_[j]);
        cg_tensor_free(gp[j]);
        cg_tensor_free(gv[j]);
    }
    cg_tensor_free(gd.idx);
    cg_tensor_free(gd.target);
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

/* gelu differentiated three times: Phi(x) + x phi(x), phi(x) (2 - x^2),
 * phi(x) (x^3 - 4x) (its derivative goes through the "gelu_grad" node). */
START_TEST(gelu_differentiates_three_times)
{
    static const float xs[4] = { 0.5f, -1.25f, 2.0f, 0.0f };
    int64_t n = 4;
    cg_tensor *x = cg_tensor_from_host(tt_ctx(), CG_F32, 1, &n, xs), *y, *g;
    float got[4];
    int order, i;

    ck_assert_int_eq(cg_tensor_set_requires_grad(x, 1), CG_OK);
    y = cg_sum(T(cg_gelu(x)), 0, NULL, 0);
    for (order = 1; order <= 3; order++) {
        ck_assert_msg(cg_grad(y, NULL, 1, &x, &g, CG_GRAD_CREATE_GRAPH) ==
                      CG_OK, "order %d: %s", order, TT_ERR);
        ck_assert_int_eq(cg_tensor_to_host(g, got, sizeof got), CG_OK);
        for (i = 0; i < 4; i++) {
            double v = xs[i], phi = exp(-0.5 * v * v) / sqrt(2 * M_PI);
            double want = order == 1 ? 0.5 * (1 + erf(v / sqrt(2.0))) +
                                       v * phi
                        : order == 2 ? phi * (2 - v * v)
                        : phi * (v * v * v - 4 * v);

            ck_assert_msg(fabs(got[i] - want) <= 1e-5, "order %d, x %g: %g, "
                          "not %g", order, v, got[i], want);
        }
        cg_tensor_free(y);
        y = order < 3 ? cg_sum(g, 0, NULL, 0) : NULL;
        cg_tensor_free(g);
    }
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

/* pow with a tensor exponent has no double backward: CG_EUNSUPPORTED
 * naming it, before any gradient is computed; nothing set; the plain
 * backward still works. */
START_TEST(unsupported_op_fails_naming_it)
{
    static const float xs[3] = { 0.5f, -1.0f, 1.5f };
    int64_t n = 3;
    cg_tensor *x = cg_tensor_from_host(tt_ctx(), CG_F32, 1, &n, xs);
    cg_tensor *g = (cg_tensor *)&n, *y;

    ck_assert_int_eq(cg_tensor_set_requires_grad(x, 1), CG_OK);
    y = cg_sum(T(cg_pow(T(cg_exp(x)), x)), 0, NULL, 0);
    ck_assert_int_eq(cg_grad(y, NULL, 1, &x, &g, CG_GRAD_CREATE_GRAPH),
                     CG_EUNSUPPORTED);
    ck_assert_ptr_eq(g, (cg_tensor *)&n);
    ck_assert_msg(strstr(TT_ERR, "'pow'") != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_backward_ex(y, NULL, CG_GRAD_CREATE_GRAPH),
                     CG_EUNSUPPORTED);
    ck_assert_ptr_null(cg_tensor_grad(x));
    /* bad arguments */
    ck_assert_int_eq(cg_grad(y, NULL, 0, &x, &g, 0), CG_EINVAL);
    ck_assert_int_eq(cg_grad(y, NULL, 1, &x, &g, 8), CG_EINVAL);
    ck_assert_ptr_eq(g, (cg_tensor *)&n);
    /* a pow that does not lead to the inputs asked about is not run */
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

/* The fused linear + activation nodes (containers' linear layers) are
 * what the linear_* gradgradcheck cases run where clgrad's GEMM runs (it
 * is forced here; the cases run the default choice, which says so on
 * stderr if it runs them unfused). */
START_TEST(linear_act_cases_run_the_fused_nodes)
{
    static const char *names[3] = { "linear_relu", "linear_tanh",
                                    "linear_sigmoid" };
    static const int64_t sx[2] = { 3, 5 }, sw[2] = { 4, 5 }, sb = 4;
    cg_tensor *x = cg_ones(tt_ctx(), 2, sx), *w = cg_ones(tt_ctx(), 2, sw);
    cg_tensor *b = cg_ones(tt_ctx(), 1, &sb), *y;
    char *dot;
    int a;

    cg_tensor_set_requires_grad(w, 1);
    for (a = 1; a <= 3; a++) {
        y = cg__linear_act(x, w, b, (cg__act)a);
        ck_assert_msg(y != NULL, "%s", TT_ERR);
        dot = cg_graph_dot(y);
        ck_assert_ptr_nonnull(dot);
        if (!strstr(dot, names[a - 1]))
            fprintf(stderr, "higher order: %s ran unfused by default\n",
                    names[a - 1]);
        free(dot);
        cg_tensor_free(y);
        cg__gemm_force(tt_ctx(), CG__GEMM_CLGRAD);
        y = cg__linear_act(x, w, b, (cg__act)a);
        cg__gemm_force(tt_ctx(), CG__GEMM_AUTO);
        ck_assert_msg(y != NULL, "%s", TT_ERR);
        dot = cg_graph_dot(y);
        ck_assert_ptr_nonnull(dot);
        ck_assert_msg(strstr(dot, names[a - 1]) != NULL, "%s", dot);
        free(dot);
        cg_tensor_free(y);
    }
    cg_tensor_free(x);
    cg_tensor_free(w);
    cg_tensor_free(b);
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
    }
    cg_tensor_free(value);
    /* forward over reverse, against the same fixture */
    ck_assert_msg(cg_hvp_fwd(mlp_loss, &d, 4, p, v, hv, &value) == CG_OK,
                  "%s", TT_ERR);
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
    gg_free_targets();
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
                        gg_ncases);
    tcase_add_test(tc, hvp_of_mlp_cross_entropy_matches_finite_differences);
    tcase_add_test(tc, gradient_penalty_gradient_matches_finite_differences);
    tcase_add_test(tc, vjp_matches_the_host_and_jvp);
    tcase_add_test(tc, forward_over_reverse_hvp_matches_reverse_over_reverse);
    tcase_add_test(tc, gradients_differentiate_any_number_of_times);
    tcase_add_test(tc, gelu_differentiates_three_times);
    tcase_add_test(tc, backward_ex_create_graph_leaves_differentiable_grads);
    tcase_add_test(tc, unsupported_op_fails_naming_it);
    tcase_add_test(tc, linear_act_cases_run_the_fused_nodes);
    tcase_add_test(tc, grad_gives_zeros_for_unused_inputs);
    tcase_add_test(tc, grad_leaves_an_existing_leaf_grad_alone);
    tcase_add_test(tc, pytorch_fixture_hvp_and_gradient_penalty);
    tcase_add_test(tc, report_worst_errors);
    suite_add_tcase(s, tc);
    return tt_run(s);
}
