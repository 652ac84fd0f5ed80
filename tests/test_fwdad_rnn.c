/* SPDX-License-Identifier: MIT */
/*
 * tests/test_fwdad_rnn.c - forward-mode AD through the recurrent layers
 * (RNN tanh and relu, LSTM, GRU; lib/nn/rnn.c's tangent recurrence on
 * kernels/rnn.cl's lstm_jvp, gru_jvp, rnn_jvp): at odd sizes, with two
 * layers and both directions, with and without initial states, on the
 * fused and the GEMM path, with variable lengths, batch first, the
 * tangents of the
 * output, h_n and c_n along random tangents of x, h0, c0 and every
 * parameter against
 *   - central finite differences of a plain C reference in double
 *     (tests/rnn_ref.c's cell): normalised error max |t - fd| / max(1,
 *     max |fd|) <= 1e-4 (h = 1e-6: truncation about 1e-12, rounding about
 *     1e-10; what is left is the device's float32, a few dozen terms per
 *     sum through two layers);
 *   - the dot-product test <u, J v> (forward mode) = <J^T u, v> (reverse
 *     mode, cg_backward): within 1e-5 of sum |u_i (Jv)_i| + sum |g_k v_k|;
 * the 16-bit variants against float32; and cg_jvp of a 2-layer LSTM
 * language-model loss (embedding, LSTM, linear, cross entropy) against
 * PyTorch's torch.autograd.functional.jvp (tests/fixtures/fwdad_lstm.txt,
 * from gen_fwdad_lstm.py: the loss, the logits and their tangents within
 * 1e-5 of each tensor's largest value).
 *
 * Double backward (create_graph through the layers' composite fallback):
 * the composite's gradient against the kernels', <v, H w> against mixed
 * central differences of the double reference, cg_hvp of the language
 * model against torch.autograd.functional.hvp, and variable lengths
 * failing with CG_EUNSUPPORTED.
 *
 * Module parameters get their tangents the way a test can: the module's
 * parameter is swapped for a dual of it (cg_make_dual) for the call.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "nn/internal.h"
#include "tensor/internal.h"
#include "opcheck.h"
#include "ops/internal.h"
#include "rnn_ref.h"
#include "testutil.h"

#define FD_H 1e-6
#define FD_TOL 1e-4
#define DOT_TOL 1e-5

typedef struct rcase {
    cg_rnn_mode mode;
    int L, D, T, B, I, H;
    int states;         /* pass h0 (and c0) */
    int gemm;           /* the GEMM path */
    int lens;           /* variable lengths */
    int bf;             /* batch_first (the reference stays [T, B, .]) */
} rcase;

static const rcase cases[] = {
    { CG_LSTM, 2, 2, 3, 3, 5, 7, 1, 0, 0, 0 },
    { CG_GRU, 2, 2, 3, 3, 5, 7, 1, 0, 0, 0 },
    { CG_RNN_TANH, 2, 2, 4, 3, 5, 7, 1, 0, 0, 0 },
    { CG_LSTM, 1, 1, 4, 3, 5, 9, 0, 1, 1, 1 },
    { CG_GRU, 1, 2, 4, 3, 3, 5, 0, 1, 1, 0 },
    { CG_RNN_RELU, 1, 2, 4, 5, 3, 5, 1, 0, 1, 0 },
    { CG_RNN_RELU, 2, 1, 3, 3, 4, 5, 1, 0, 0, 0 },
};

/* Under a host memory checker: one case per host path (fused: the first;
 * GEMM path and lengths: the fourth). */
static int
skipped(int i)
{
    return tt_host_checker() && i != 0 && i != 3;
}

static const int lengths[5] = { 2, 4, 1, 3, 3 };

/* The inputs of a case: 0 x, 1 h0, 2 c0, 3.. the parameters in
 * m->params order; numel and host values (rounded to float32). */
typedef struct rin {
    int n;
    int64_t numel[3 + CG__MODULE_MAX_PARAMS];
    double *v[3 + CG__MODULE_MAX_PARAMS];
} rin;

static double *
rand_vec(int64_t n, double lo, double hi)
{
    double *v = malloc((size_t)n * sizeof *v + 8);
    int64_t i;

    for (i = 0; i < n; i++)
        v[i] = (float)oc_uniform(lo, hi);
    return v;
}

static cg_tensor *
dev(const double *v, int ndim, const int64_t *shape)
{
    int64_t n = 1, i;
    float *f;
    cg_tensor *t;
    int d;

    for (d = 0; d < ndim; d++)
        n *= shape[d];
    f = malloc((size_t)n * sizeof *f + 4);
    for (i = 0; i < n; i++)
        f[i] = (float)v[i];
    t = cg_tensor_from_host(tt_ctx(), CG_F32, ndim, shape, f);
    free(f);
    ck_assert_msg(t != NULL, "%s", TT_ERR);
    return t;
}

static double *
host(const cg_tensor *t)
{
    int64_t n = cg_tensor_numel(t), i;
    float *f = malloc((size_t)n * sizeof *f + 4);
    double *r = malloc((size_t)n * sizeof *r + 8);

    ck_assert_int_eq(cg_tensor_to_host_f32(t, f, (size_t)n), CG_OK);
    for (i = 0; i < n; i++)
        r[i] = f[i];
    free(f);
    return r;
}

/* The stack in double: y [T, B, D*H], hn and cn [L*D, B, H] from the
 * inputs in[] (rin's order; in[1], in[2] NULL: zeros). */
static void
ref_stack(const rcase *c, double *const *in, const int *len, double *y,
          double *hn, double *cn)
{
    cg__rnn_cell cell = cg__rnn_cell_of(c->mode);
    int G = cg__rnn_gates(cell), H = c->H, B = c->B, T = c->T, D = c->D;
    int GH = G * H, In = c->I, l, d, s, b, u, j;
    double *seq = malloc((size_t)T * B * In * sizeof *seq);
    double *h = malloc((size_t)B * H * sizeof *h);
    double *cc = malloc((size_t)B * H * sizeof *cc);
    double *ig = malloc((size_t)GH * sizeof *ig);
    double *hg = malloc((size_t)GH * sizeof *hg);

    memcpy(seq, in[0], (size_t)T * B * In * sizeof *seq);
    for (l = 0; l < c->L; l++) {
        double *out = calloc((size_t)T * B * D * H, sizeof *out);

        for (d = 0; d < D; d++) {
            int ld = l * D + d;
            const double *wih = in[3 + ld * 4], *whh = in[4 + ld * 4];
            const double *bih = in[5 + ld * 4], *bhh = in[6 + ld * 4];

            for (j = 0; j < B * H; j++) {
                h[j] = in[1] ? in[1][ld * B * H + j] : 0;
                cc[j] = in[2] ? in[2][ld * B * H + j] : 0;
            }
            for (s = 0; s < T; s++) {
                int t = d ? T - 1 - s : s;

                for (b = 0; b < B; b++) {
                    if (len && t >= len[b])
                        continue;
                    for (j = 0; j < GH; j++) {
                        ig[j] = bih[j];
                        hg[j] = bhh[j];
                        for (u = 0; u < In; u++)
                            ig[j] += wih[j * In + u] *
                                     seq[((size_t)t * B + b) * In + u];
                        for (u = 0; u < H; u++)
                            hg[j] += whh[j * H + u] * h[b * H + u];
                    }
                    rr_cell(cell, H, ig, hg, h + b * H, cc + b * H,
                            h + b * H, NULL);
                    for (u = 0; u < H; u++)
                        out[((size_t)t * B + b) * D * H + d * H + u] =
                            h[b * H + u];
                }
            }
            for (j = 0; j < B * H; j++) {
                hn[ld * B * H + j] = h[j];
                if (cn)
                    cn[ld * B * H + j] = cc[j];
            }
        }
        free(seq);
        seq = out;
        In = D * H;
    }
    memcpy(y, seq, (size_t)T * B * D * H * sizeof *y);
    free(seq);
    free(h);
    free(cc);
    free(ig);
    free(hg);
}

static cg_module *
make_layer(const rcase *c)
{
    cg_rnn_options o;
    cg_module *m;

    memset(&o, 0, sizeof o);
    o.mode = c->mode;
    o.input_size = c->I;
    o.hidden_size = c->H;
    o.num_layers = c->L;
    o.bidirectional = c->D == 2;
    o.batch_first = c->bf;
    m = cg_rnn_new(tt_ctx(), &o);
    ck_assert_msg(m != NULL, "%s", TT_ERR);
    if (c->gemm)
        ck_assert_int_eq(cg__rnn_set_path(m, CG__RNN_PATH_GEMM), CG_OK);
    return m;
}

static void
shape_of(const rcase *c, int k, const cg_module *m, int *ndim,
         int64_t *shape)
{
    if (k == 0) {
        *ndim = 3;
        shape[0] = c->T;
        shape[1] = c->B;
        shape[2] = c->I;
    } else if (k < 3) {
        *ndim = 3;
        shape[0] = (int64_t)c->L * c->D;
        shape[1] = c->B;
        shape[2] = c->H;
    } else {
        const cg_tensor *p = m->params[k - 3];

        *ndim = p->ndim;
        memcpy(shape, p->shape, (size_t)p->ndim * sizeof *shape);
    }
}

/* v [n0, n1, n2] with its first two dimensions swapped: a new array. */
static double *
swap01(const double *v, int64_t n0, int64_t n1, int64_t n2)
{
    double *r = malloc((size_t)(n0 * n1 * n2) * sizeof *r + 8);
    int64_t i, j;

    for (i = 0; i < n0; i++)
        for (j = 0; j < n1; j++)
            memcpy(r + (j * n0 + i) * n2, v + (i * n1 + j) * n2,
                   (size_t)n2 * sizeof *r);
    return r;
}

/* A sequence ([T, B, n] on the host) on the device in the case's layout
 * ([B, T, n] for batch_first). */
static cg_tensor *
dev_seq(const rcase *c, const double *v, int64_t n)
{
    int64_t shape[3] = { c->T, c->B, n };
    double *sw;
    cg_tensor *t;

    if (!c->bf)
        return dev(v, 3, shape);
    shape[0] = c->B;
    shape[1] = c->T;
    sw = swap01(v, c->T, c->B, n);
    t = dev(sw, 3, shape);
    free(sw);
    return t;
}

/* A sequence's values read back in [T, B, n] order. */
static double *
host_seq(const rcase *c, const cg_tensor *t)
{
    double *h = host(t), *r;

    if (!c->bf)
        return h;
    r = swap01(h, c->B, c->T, t->shape[2]);
    free(h);
    return r;
}

static double
dot(const double *a, const double *b, int64_t n, double *mag)
{
    double s = 0;
    int64_t i;

    for (i = 0; i < n; i++) {
        s += a[i] * b[i];
        *mag += fabs(a[i] * b[i]);
    }
    return s;
}

START_TEST(rnn_tangents_match_fd_and_reverse_mode)
{
    const rcase *c = &cases[_i];
    int lstm = c->mode == CG_LSTM, has[3 + CG__MODULE_MAX_PARAMS] = { 0 };
    cg_module *m;
    rin x, v, xp;
    cg_tensor *X[3 + CG__MODULE_MAX_PARAMS] = { NULL };
    cg_tensor *V[3 + CG__MODULE_MAX_PARAMS] = { NULL };
    cg_tensor *dual[3 + CG__MODULE_MAX_PARAMS] = { NULL };
    cg_tensor *orig[CG__MODULE_MAX_PARAMS];
    cg_tensor *y = NULL, *hn = NULL, *cn = NULL, *ty, *thn, *tcn = NULL;
    const int *len = c->lens ? lengths : NULL;
    int64_t ny = (int64_t)c->T * c->B * c->D * c->H;
    int64_t ns = (int64_t)c->L * c->D * c->B * c->H, shape[3];
    double *yp, *ym, *hp, *hm, *cp = NULL, *cm = NULL, *t[3], err = 0;
    double big = 1, lhs, rhs, mag = 0;
    double *u[3];
    int k, ndim, i;

    if (skipped(_i))
        return;
    m = make_layer(c);
    x.n = v.n = xp.n = 3 + m->nparams;
    for (k = 0; k < x.n; k++) {
        shape_of(c, k, m, &ndim, shape);
        has[k] = k == 0 || k >= 3 || (c->states && (k == 1 || lstm));
        x.numel[k] = 1;
        for (i = 0; i < ndim; i++)
            x.numel[k] *= shape[i];
        x.v[k] = v.v[k] = xp.v[k] = NULL;
        if (!has[k])
            continue;
        x.v[k] = k >= 3 ? host(m->params[k - 3])
                        : rand_vec(x.numel[k], -1, 1);
        v.v[k] = rand_vec(x.numel[k], -1, 1);
        xp.v[k] = malloc((size_t)x.numel[k] * sizeof(double));
        X[k] = k >= 3 ? cg_tensor_ref(m->params[k - 3])
             : k == 0 ? dev_seq(c, x.v[k], c->I) : dev(x.v[k], ndim, shape);
        V[k] = k == 0 ? dev_seq(c, v.v[k], c->I) : dev(v.v[k], ndim, shape);
    }

    /* Forward mode. */
    ck_assert_int_eq(cg_fwad_enter(tt_ctx()), CG_OK);
    for (k = 0; k < x.n; k++)
        if (has[k]) {
            dual[k] = cg_make_dual(X[k], V[k]);
            ck_assert_msg(dual[k] != NULL, "%s", TT_ERR);
        }
    for (k = 3; k < x.n; k++) {
        orig[k - 3] = m->params[k - 3];
        m->params[k - 3] = dual[k];
    }
    ck_assert_msg(cg_rnn_forward(m, dual[0], dual[1], dual[2], len, &y, &hn,
                                 lstm ? &cn : NULL) == CG_OK, "%s", TT_ERR);
    for (k = 3; k < x.n; k++)
        m->params[k - 3] = orig[k - 3];
    ty = cg_tangent(y);
    thn = cg_tangent(hn);
    ck_assert_msg(ty && thn, "%s", TT_ERR);
    if (lstm)
        ck_assert_msg((tcn = cg_tangent(cn)) != NULL, "%s", TT_ERR);
    t[0] = host_seq(c, ty);
    t[1] = host(thn);
    t[2] = lstm ? host(tcn) : NULL;
    cg_tensor_free(ty);
    cg_tensor_free(thn);
    cg_tensor_free(tcn);
    cg_tensor_free(y);
    cg_tensor_free(hn);
    cg_tensor_free(cn);
    for (k = 0; k < x.n; k++)
        cg_tensor_free(dual[k]);
    ck_assert_int_eq(cg_fwad_exit(tt_ctx()), CG_OK);

    /* Finite differences. */
    yp = malloc((size_t)ny * sizeof *yp);
    ym = malloc((size_t)ny * sizeof *ym);
    hp = malloc((size_t)ns * sizeof *hp);
    hm = malloc((size_t)ns * sizeof *hm);
    if (lstm) {
        cp = malloc((size_t)ns * sizeof *cp);
        cm = malloc((size_t)ns * sizeof *cm);
    }
    for (i = -1; i <= 1; i += 2) {
        for (k = 0; k < x.n; k++) {
            int64_t e;

            for (e = 0; has[k] && e < x.numel[k]; e++)
                xp.v[k][e] = x.v[k][e] + i * FD_H * v.v[k][e];
        }
        ref_stack(c, xp.v, len, i < 0 ? ym : yp, i < 0 ? hm : hp,
                  i < 0 ? cm : cp);
    }
    for (k = 0; k < 3; k++) {
        int64_t n = k ? ns : ny, e;
        double *p = k == 0 ? yp : k == 1 ? hp : cp;
        double *q = k == 0 ? ym : k == 1 ? hm : cm;

        if (!t[k])
            continue;
        for (e = 0; e < n; e++)
            big = fmax(big, fabs((p[e] - q[e]) / (2 * FD_H)));
        for (e = 0; e < n; e++)
            err = fmax(err, fabs(t[k][e] - (p[e] - q[e]) / (2 * FD_H)));
    }
    ck_assert_msg(err / big <= FD_TOL, "case %d: tangent error %g of %g",
                  _i, err, big);

    /* The dot-product test against reverse mode. */
    {
        cg_tensor *U[3] = { NULL }, *lo = NULL, *out[3] = { NULL };
        int64_t ss[3] = { (int64_t)c->L * c->D, c->B, c->H };

        for (k = 0; k < 3; k++) {
            u[k] = NULL;
            if (!t[k])
                continue;
            u[k] = rand_vec(k ? ns : ny, -1, 1);
            U[k] = k ? dev(u[k], 3, ss)
                     : dev_seq(c, u[k], (int64_t)c->D * c->H);
        }
        for (k = 0; k < 3; k++)
            if (X[k])
                ck_assert_int_eq(cg_tensor_set_requires_grad(X[k], 1),
                                 CG_OK);
        ck_assert_msg(cg_rnn_forward(m, X[0], X[1], X[2], len, &out[0],
                                     &out[1], lstm ? &out[2] : NULL) ==
                      CG_OK, "%s", TT_ERR);
        for (k = 0; k < 3; k++) {
            cg_tensor *p, *s, *a;

            if (!U[k])
                continue;
            p = cg_mul(out[k], U[k]);
            s = p ? cg_sum(p, 0, NULL, 0) : NULL;
            ck_assert_msg(s != NULL, "%s", TT_ERR);
            a = lo ? cg_add(lo, s) : cg_tensor_ref(s);
            cg_tensor_free(lo);
            lo = a;
            cg_tensor_free(p);
            cg_tensor_free(s);
            cg_tensor_free(out[k]);
        }
        ck_assert_msg(cg_backward(lo, NULL, 0) == CG_OK, "%s", TT_ERR);
        lhs = 0;
        for (k = 0; k < 3; k++)
            if (t[k])
                lhs += dot(u[k], t[k], k ? ns : ny, &mag);
        rhs = 0;
        for (k = 0; k < x.n; k++) {
            cg_tensor *g;
            double *gh;

            if (!has[k])
                continue;
            g = cg_tensor_grad(X[k]);
            ck_assert_msg(g != NULL, "case %d: input %d has no grad", _i,
                          k);
            gh = k == 0 ? host_seq(c, g) : host(g);
            rhs += dot(gh, v.v[k], x.numel[k], &mag);
            free(gh);
        }
        ck_assert_msg(fabs(lhs - rhs) <= DOT_TOL * mag, "case %d: <u, Jv> "
                      "%.9g, <J^T u, v> %.9g", _i, lhs, rhs);
        cg_tensor_free(lo);
        for (k = 0; k < 3; k++) {
            cg_tensor_free(U[k]);
            free(u[k]);
        }
    }
    for (k = 0; k < x.n; k++) {
        cg_tensor_free(X[k]);
        cg_tensor_free(V[k]);
        free(x.v[k]);
        free(v.v[k]);
        free(xp.v[k]);
    }
    for (k = 0; k < 3; k++)
        free(t[k]);
    free(yp);
    free(ym);
    free(hp);
    free(hm);
    free(cp);
    free(cm);
    cg_module_free(m);
}
END_TEST

/* The tangents (host copies, float32 values) of y, h_n and c_n of m at
 * X[] along V[] (rin's order; NULL: no such input), the parameters' duals
 * swapped in for the call. */
static void
jvp_host(const rcase *c, cg_module *m, cg_tensor **X, cg_tensor **V,
         double **t)
{
    cg_tensor *dual[3 + CG__MODULE_MAX_PARAMS] = { NULL };
    cg_tensor *orig[CG__MODULE_MAX_PARAMS], *o[3] = { NULL }, *tg;
    int lstm = c->mode == CG_LSTM, k, n = 3 + m->nparams;

    ck_assert_int_eq(cg_fwad_enter(tt_ctx()), CG_OK);
    for (k = 0; k < n; k++)
        if (X[k]) {
            dual[k] = cg_make_dual(X[k], V[k]);
            ck_assert_msg(dual[k] != NULL, "%s", TT_ERR);
        }
    for (k = 3; k < n; k++) {
        orig[k - 3] = m->params[k - 3];
        m->params[k - 3] = dual[k];
    }
    ck_assert_msg(cg_rnn_forward(m, dual[0], dual[1], dual[2], NULL, &o[0],
                                 &o[1], lstm ? &o[2] : NULL) == CG_OK, "%s",
                  TT_ERR);
    for (k = 3; k < n; k++)
        m->params[k - 3] = orig[k - 3];
    for (k = 0; k < 3; k++) {
        t[k] = NULL;
        if (!o[k])
            continue;
        ck_assert_msg((tg = cg_tangent(o[k])) != NULL, "%s", TT_ERR);
        ck_assert_int_eq(tg->dtype, o[k]->dtype);
        t[k] = host(tg);
        cg_tensor_free(tg);
        cg_tensor_free(o[k]);
    }
    for (k = 0; k < n; k++)
        cg_tensor_free(dual[k]);
    ck_assert_int_eq(cg_fwad_exit(tt_ctx()), CG_OK);
}

/* t rounded to dtype dt and back (a new float32 tensor). */
static cg_tensor *
rounded(cg_tensor *t, cg_dtype dt)
{
    cg_tensor *h = cg_to_dtype(t, dt), *r = h ? cg_to_dtype(h, CG_F32) : NULL;

    ck_assert_msg(r != NULL, "%s", TT_ERR);
    cg_tensor_free(h);
    return r;
}

/* The storage variants (float16, bfloat16) of the tangent steps: a layer
 * cast to 16 bits, on 16-bit x, h0, c0 and tangents, against the float32
 * layer on the same (rounded) values: within 16 units of the dtype's
 * rounding of each output's largest tangent (test_half_rnn's outputs land
 * within about 2). */
START_TEST(rnn_tangents_in_16_bits)
{
    static const cg_dtype dts[2] = { CG_F16, CG_BF16 };
    const rcase *c = &cases[_i ? 1 : 0];
    int di;

    for (di = 0; di < TT_NDTYPES; di++) {
        cg_dtype dt = dts[di];
        double u = dt == CG_F16 ? ldexp(1.0, -11) : ldexp(1.0, -8);
        cg_module *m = make_layer(c);
        cg_tensor *X[3 + CG__MODULE_MAX_PARAMS] = { NULL };
        cg_tensor *V[3 + CG__MODULE_MAX_PARAMS] = { NULL };
        cg_tensor *X16[3 + CG__MODULE_MAX_PARAMS] = { NULL };
        cg_tensor *V16[3 + CG__MODULE_MAX_PARAMS] = { NULL };
        double *ref[3], *got[3];
        int64_t shape[3], numel;
        int k, ndim, n = 3 + m->nparams, lstm = c->mode == CG_LSTM, j;

        for (k = 0; k < n; k++) {
            cg_tensor *a;

            if (k > 0 && k < 3 && !(k == 1 || lstm))
                continue;
            shape_of(c, k, m, &ndim, shape);
            if (k >= 3) {
                /* The parameter itself rounded in place. */
                a = rounded(m->params[k - 3], dt);
                ck_assert_int_eq(cg__copy_into(m->params[k - 3], a),
                                 CG_OK);
                cg_tensor_free(a);
            } else {
                a = cg_rand_uniform(tt_ctx(), ndim, shape, -1, 1);
                X[k] = rounded(a, dt);
                cg_tensor_free(a);
            }
            a = cg_rand_uniform(tt_ctx(), ndim, shape, -1, 1);
            V[k] = rounded(a, dt);
            cg_tensor_free(a);
        }
        for (k = 3; k < n; k++)
            X[k] = cg_tensor_ref(m->params[k - 3]);
        jvp_host(c, m, X, V, ref);
        ck_assert_msg(cg_module_to_dtype(m, dt) == CG_OK, "%s", TT_ERR);
        for (k = 0; k < n; k++) {
            if (!V[k])
                continue;
            X16[k] = k >= 3 ? cg_tensor_ref(m->params[k - 3])
                            : cg_to_dtype(X[k], dt);
            V16[k] = cg_to_dtype(V[k], dt);
            ck_assert(X16[k] && V16[k]);
        }
        jvp_host(c, m, X16, V16, got);
        for (k = 0; k < 3; k++) {
            double big = 0, err = 0;

            if (!ref[k])
                continue;
            numel = k ? (int64_t)c->L * c->D * c->B * c->H
                      : (int64_t)c->T * c->B * c->D * c->H;
            for (j = 0; j < numel; j++) {
                big = fmax(big, fabs(ref[k][j]));
                err = fmax(err, fabs(got[k][j] - ref[k][j]));
            }
            ck_assert_msg(err <= 16 * u * big, "%s, output %d: tangent "
                          "error %g, largest %g", dt == CG_F16 ? "float16"
                          : "bfloat16", k, err, big);
            free(ref[k]);
            free(got[k]);
        }
        for (k = 0; k < n; k++) {
            cg_tensor_free(X[k]);
            cg_tensor_free(V[k]);
            cg_tensor_free(X16[k]);
            cg_tensor_free(V16[k]);
        }
        cg_module_free(m);
    }
}
END_TEST

/* Kernel launches of one forward call of m on x (waited for). */
static uint64_t
launches(cg_module *m, cg_tensor *x, cg_tensor **y)
{
    cg_memory_stats a, b;

    ck_assert_int_eq(cg_context_finish(tt_ctx()), CG_OK);
    ck_assert_int_eq(cg_context_stats(tt_ctx(), &a), CG_OK);
    ck_assert_msg(cg_rnn_forward(m, x, NULL, NULL, NULL, y, NULL, NULL) ==
                  CG_OK, "%s", TT_ERR);
    ck_assert_int_eq(cg_context_finish(tt_ctx()), CG_OK);
    ck_assert_int_eq(cg_context_stats(tt_ctx(), &b), CG_OK);
    return b.kernels_enqueued - a.kernels_enqueued;
}

/* A layer none of whose inputs has a tangent launches what it launches
 * without a dual level (and gets no tangent); with one, it launches more. */
START_TEST(layer_without_tangents_launches_the_same)
{
    const rcase *c = &cases[0];
    cg_module *m = make_layer(c);
    int64_t xs[3] = { c->T, c->B, c->I };
    cg_tensor *x = cg_rand_uniform(tt_ctx(), 3, xs, -1, 1);
    cg_tensor *v = cg_rand_uniform(tt_ctx(), 3, xs, -1, 1), *d, *y = NULL;
    uint64_t plain, level, dual;

    ck_assert(x && v);
    plain = launches(m, x, &y);
    cg_tensor_free(y);
    ck_assert_int_eq(cg_fwad_enter(tt_ctx()), CG_OK);
    level = launches(m, x, &y);
    ck_assert_ptr_null(cg_tangent(y));
    cg_tensor_free(y);
    d = cg_make_dual(x, v);
    ck_assert_ptr_nonnull(d);
    dual = launches(m, d, &y);
    cg_tensor_free(y);
    cg_tensor_free(d);
    ck_assert_int_eq(cg_fwad_exit(tt_ctx()), CG_OK);
    ck_assert_msg(level == plain, "%llu launches under a level without "
                  "tangents, %llu without a level", (unsigned long long)level,
                  (unsigned long long)plain);
    ck_assert_msg(dual > plain, "%llu launches with a tangent",
                  (unsigned long long)dual);
    cg_tensor_free(x);
    cg_tensor_free(v);
    cg_module_free(m);
}
END_TEST

/* ------------------------------------------------------------------------
 * Double backward (create_graph): the layer's composite backward
 * ------------------------------------------------------------------------ */

#define GG_H 1e-4
#define GG_TOL 1e-4

/* L = <u_y, y> + <u_h, h_n> + <u_c, c_n> of the double reference at
 * x + a v + b w (rin's order). */
static double
ref_l(const rcase *c, const rin *x, const rin *v, const rin *w, double a,
      double b, double *const *u, rin *xp)
{
    int64_t ny = (int64_t)c->T * c->B * c->D * c->H;
    int64_t ns = (int64_t)c->L * c->D * c->B * c->H, e;
    double *y = malloc((size_t)ny * sizeof *y), *hn, *cn, l = 0;
    int k;

    hn = malloc((size_t)ns * sizeof *hn);
    cn = malloc((size_t)ns * sizeof *cn);
    for (k = 0; k < x->n; k++)
        for (e = 0; x->v[k] && e < x->numel[k]; e++)
            xp->v[k][e] = x->v[k][e] + a * v->v[k][e] + b * w->v[k][e];
    ref_stack(c, xp->v, NULL, y, hn, c->mode == CG_LSTM ? cn : NULL);
    for (e = 0; e < ny; e++)
        l += u[0][e] * y[e];
    for (e = 0; e < ns; e++) {
        l += u[1][e] * hn[e];
        if (u[2])
            l += u[2][e] * cn[e];
    }
    free(y);
    free(hn);
    free(cn);
    return l;
}

/* The first gradient of L with create_graph (the composite) against the
 * kernel-level one, elementwise; then the gradient of S = <grad L, w>,
 * H w, in the dot-product form <v, H w> against the mixed central
 * difference of the double reference's L along v and w (h = 1e-4:
 * truncation about 1e-8, rounding about 1e-8 of L's size), within 1e-4 of
 * max(1, sum |v_k (Hw)_k|). */
START_TEST(rnn_double_backward_matches_fd)
{
    static const int which[4] = { 0, 1, 2, 6 };
    const rcase *c = &cases[which[_i]];
    int lstm = c->mode == CG_LSTM, n, k, has[3 + CG__MODULE_MAX_PARAMS];
    cg_module *m;
    rin x, v, w, xp;
    cg_tensor *X[3 + CG__MODULE_MAX_PARAMS] = { NULL }, *in[20];
    cg_tensor *W[3 + CG__MODULE_MAX_PARAMS] = { NULL }, *U[3] = { NULL };
    cg_tensor *g1[20] = { NULL }, *g0[20] = { NULL }, *gg[20] = { NULL };
    cg_tensor *out[3] = { NULL }, *L = NULL, *S = NULL;
    int64_t ny = (int64_t)c->T * c->B * c->D * c->H;
    int64_t ns = (int64_t)c->L * c->D * c->B * c->H, shape[3];
    int64_t ys[3] = { c->T, c->B, (int64_t)c->D * c->H };
    int64_t ss[3] = { (int64_t)c->L * c->D, c->B, c->H };
    double *u[3] = { NULL }, lhs = 0, mag = 0, fd, err0 = 0, big0 = 0;
    int ndim, ni = 0, map[20], i;

    m = make_layer(c);
    x.n = v.n = w.n = xp.n = 3 + m->nparams;
    for (k = 0; k < x.n; k++) {
        shape_of(c, k, m, &ndim, shape);
        has[k] = k == 0 || k >= 3 || (c->states && (k == 1 || lstm));
        x.numel[k] = 1;
        for (i = 0; i < ndim; i++)
            x.numel[k] *= shape[i];
        v.numel[k] = w.numel[k] = xp.numel[k] = x.numel[k];
        x.v[k] = v.v[k] = w.v[k] = xp.v[k] = NULL;
        if (!has[k])
            continue;
        x.v[k] = k >= 3 ? host(m->params[k - 3])
                        : rand_vec(x.numel[k], -1, 1);
        v.v[k] = rand_vec(x.numel[k], -1, 1);
        w.v[k] = rand_vec(x.numel[k], -1, 1);
        xp.v[k] = malloc((size_t)x.numel[k] * sizeof(double));
        X[k] = k >= 3 ? cg_tensor_ref(m->params[k - 3])
                      : dev(x.v[k], ndim, shape);
        W[k] = dev(w.v[k], ndim, shape);
        if (k < 3)
            ck_assert_int_eq(cg_tensor_set_requires_grad(X[k], 1), CG_OK);
        map[ni] = k;
        in[ni++] = X[k];
    }
    for (k = 0; k < 3; k++)
        if (k < 2 || lstm) {
            u[k] = rand_vec(k ? ns : ny, -1, 1);
            U[k] = dev(u[k], 3, k ? ss : ys);
        }
    ck_assert_msg(cg_rnn_forward(m, X[0], X[1], X[2], NULL, &out[0],
                                 &out[1], lstm ? &out[2] : NULL) == CG_OK,
                  "%s", TT_ERR);
    for (k = 0; k < 3; k++) {
        cg_tensor *p, *sm, *a;

        if (!U[k])
            continue;
        p = cg_mul(out[k], U[k]);
        sm = p ? cg_sum(p, 0, NULL, 0) : NULL;
        ck_assert_msg(sm != NULL, "%s", TT_ERR);
        a = L ? cg_add(L, sm) : cg_tensor_ref(sm);
        cg_tensor_free(L);
        L = a;
        cg_tensor_free(p);
        cg_tensor_free(sm);
    }
    /* The kernel-level gradient, then the composite's. */
    ck_assert_msg(cg_grad(L, NULL, ni, in, g0, CG_GRAD_RETAIN_GRAPH) ==
                  CG_OK, "%s", TT_ERR);
    ck_assert_msg(cg_grad(L, NULL, ni, in, g1, CG_GRAD_CREATE_GRAPH) ==
                  CG_OK, "%s", TT_ERR);
    for (n = 0; n < ni; n++) {
        double *a = host(g0[n]), *b = host(g1[n]);

        for (i = 0; i < x.numel[map[n]]; i++) {
            err0 = fmax(err0, fabs(a[i] - b[i]));
            big0 = fmax(big0, fabs(a[i]));
        }
        free(a);
        free(b);
    }
    ck_assert_msg(err0 <= 1e-5 * fmax(1, big0), "case %d: composite "
                  "gradient off by %g (largest %g)", which[_i], err0, big0);
    /* S = <grad L, w>; its gradient is H w. */
    for (n = 0; n < ni && S == NULL; n++)
        ck_assert_msg(cg_tensor_requires_grad(g1[n]), "case %d: gradient "
                      "%d has no graph", which[_i], n);
    for (n = 0; n < ni; n++) {
        cg_tensor *p = cg_mul(g1[n], W[map[n]]);
        cg_tensor *sm = p ? cg_sum(p, 0, NULL, 0) : NULL, *a;

        ck_assert_msg(sm != NULL, "%s", TT_ERR);
        a = S ? cg_add(S, sm) : cg_tensor_ref(sm);
        cg_tensor_free(S);
        S = a;
        cg_tensor_free(p);
        cg_tensor_free(sm);
    }
    ck_assert_msg(cg_grad(S, NULL, ni, in, gg, 0) == CG_OK, "%s", TT_ERR);
    for (n = 0; n < ni; n++) {
        double *h = host(gg[n]);

        lhs += dot(h, v.v[map[n]], x.numel[map[n]], &mag);
        free(h);
    }
    fd = (ref_l(c, &x, &v, &w, GG_H, GG_H, u, &xp) -
          ref_l(c, &x, &v, &w, GG_H, -GG_H, u, &xp) -
          ref_l(c, &x, &v, &w, -GG_H, GG_H, u, &xp) +
          ref_l(c, &x, &v, &w, -GG_H, -GG_H, u, &xp)) / (4 * GG_H * GG_H);
    ck_assert_msg(fabs(lhs - fd) <= GG_TOL * fmax(1, mag), "case %d: <v, Hw> "
                  "%.9g, finite differences %.9g", which[_i], lhs, fd);
    for (n = 0; n < ni; n++) {
        cg_tensor_free(g0[n]);
        cg_tensor_free(g1[n]);
        cg_tensor_free(gg[n]);
    }
    for (k = 0; k < 3; k++) {
        cg_tensor_free(out[k]);
        cg_tensor_free(U[k]);
        free(u[k]);
    }
    cg_tensor_free(L);
    cg_tensor_free(S);
    for (k = 0; k < x.n; k++) {
        cg_tensor_free(X[k]);
        cg_tensor_free(W[k]);
        free(x.v[k]);
        free(v.v[k]);
        free(w.v[k]);
        free(xp.v[k]);
    }
    cg_module_free(m);
}
END_TEST

/* Variable lengths have no composite yet: create_graph fails naming the
 * layer's node, before any gradient is computed. */
START_TEST(rnn_double_backward_with_lengths_is_unsupported)
{
    const rcase *c = &cases[5];
    cg_module *m = make_layer(c);
    int64_t xs[3] = { c->T, c->B, c->I };
    cg_tensor *x = cg_rand_uniform(tt_ctx(), 3, xs, -1, 1), *y = NULL, *s;
    cg_tensor *g = NULL;

    ck_assert_ptr_nonnull(x);
    ck_assert_int_eq(cg_tensor_set_requires_grad(x, 1), CG_OK);
    ck_assert_msg(cg_rnn_forward(m, x, NULL, NULL, lengths, &y, NULL, NULL)
                  == CG_OK, "%s", TT_ERR);
    s = cg_sum(y, 0, NULL, 0);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(cg_grad(s, NULL, 1, &x, &g, CG_GRAD_CREATE_GRAPH),
                     CG_EUNSUPPORTED);
    ck_assert_ptr_null(g);
    ck_assert_msg(strstr(TT_ERR, "'rnn_layer'") != NULL, "%s", TT_ERR);
    cg_tensor_free(s);
    cg_tensor_free(y);
    cg_tensor_free(x);
    cg_module_free(m);
}
END_TEST

/* ------------------------------------------------------------------------
 * A 2-layer LSTM language model against PyTorch
 * ------------------------------------------------------------------------ */

enum { LM_NP = 11 };    /* the embedding, the LSTM's 8, W, b */

typedef struct lm_user {
    cg_module *lstm;
    cg_tensor *tokens, *targets;
    int T, B, H;
} lm_user;

/* inputs: the 11 parameters (fwdad_lstm.txt's p.K); outputs: the loss and
 * the logits [T*B, V]. */
static int
lm_fn(void *user, int n_inputs, cg_tensor *const *in, int n_outputs,
      cg_tensor **out)
{
    lm_user *u = user;
    cg_tensor *orig[8], *e, *y = NULL, *y2, *z0, *z;
    int64_t s2[2] = { (int64_t)u->T * u->B, u->H };
    int k, status;

    (void)n_inputs;
    (void)n_outputs;
    e = cg_embedding(in[0], u->tokens);
    if (!e)
        return cg__last_status();
    for (k = 0; k < 8; k++) {
        orig[k] = u->lstm->params[k];
        u->lstm->params[k] = in[1 + k];
    }
    status = cg_rnn_forward(u->lstm, e, NULL, NULL, NULL, &y, NULL, NULL);
    for (k = 0; k < 8; k++)
        u->lstm->params[k] = orig[k];
    cg_tensor_free(e);
    if (status)
        return status;
    y2 = cg_reshape(y, 2, s2);
    z0 = y2 ? cg_matmul_t(y2, in[9], 0, 1) : NULL;
    z = z0 ? cg_add(z0, in[10]) : NULL;
    cg_tensor_free(y);
    cg_tensor_free(y2);
    cg_tensor_free(z0);
    if (!z)
        return cg__last_status();
    out[0] = cg_cross_entropy(z, u->targets, CG_REDUCTION_MEAN, -100, 0.0f);
    out[1] = z;
    return out[0] ? CG_OK : cg__last_status();
}

static cg_tensor *
fx_ints(const fx_file *f, const char *name)
{
    const fx_tensor *t = fx_get(f, name);
    int32_t *v;
    cg_tensor *d;
    int64_t i;

    ck_assert_msg(t != NULL, "fwdad_lstm.txt: no %s", name);
    v = malloc((size_t)t->numel * sizeof *v);
    for (i = 0; i < t->numel; i++)
        v[i] = (int32_t)t->data[i];
    d = cg_tensor_from_host(tt_ctx(), CG_I32, t->ndim, t->shape, v);
    free(v);
    ck_assert_msg(d != NULL, "%s", TT_ERR);
    return d;
}

static cg_tensor *
fx_f32(const fx_file *f, const char *name)
{
    const fx_tensor *t = fx_get(f, name);
    cg_tensor *d;

    ck_assert_msg(t != NULL, "fwdad_lstm.txt: no %s", name);
    d = cg_tensor_from_host(tt_ctx(), CG_F32, t->ndim, t->shape, t->data);
    ck_assert_msg(d != NULL, "%s", TT_ERR);
    return d;
}

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

/* torch.autograd.functional.jvp of the model (gen_fwdad_lstm.py): the
 * loss, the logits and their tangents within 1e-5 of each tensor's
 * largest value. */
START_TEST(jvp_of_lstm_language_model_matches_pytorch)
{
    static const char *refs[4] = { "loss", "logits", "jvp_loss",
                                   "jvp_logits" };
    char err[256], key[32];
    fx_file *f = fx_load_fixture("fwdad_lstm.txt", err, sizeof err);
    cg_tensor *P[LM_NP], *V[LM_NP], *outs[2] = { NULL }, *tans[2] = { NULL };
    cg_tensor *got[4];
    int sizes[5], k;
    lm_user u;
    rcase c;

    ck_assert_msg(f != NULL, "%s", err);
    ck_assert_int_eq(fx_config_ints(f, "sizes", sizes, 5), 5);
    memset(&c, 0, sizeof c);
    c.mode = CG_LSTM;
    c.L = 2;
    c.D = 1;
    c.I = sizes[1];
    c.H = sizes[2];
    u.lstm = make_layer(&c);
    u.T = sizes[3];
    u.B = sizes[4];
    u.H = sizes[2];
    u.tokens = fx_ints(f, "tokens");
    u.targets = fx_ints(f, "targets");
    for (k = 0; k < LM_NP; k++) {
        snprintf(key, sizeof key, "p.%d", k);
        P[k] = fx_f32(f, key);
        snprintf(key, sizeof key, "t.%d", k);
        V[k] = fx_f32(f, key);
    }
    ck_assert_msg(cg_jvp(tt_ctx(), lm_fn, &u, LM_NP, P, V, 2, outs, tans) ==
                  CG_OK, "%s", TT_ERR);
    got[0] = outs[0];
    got[1] = outs[1];
    got[2] = tans[0];
    got[3] = tans[1];
    for (k = 0; k < 4; k++) {
        const fx_tensor *r = fx_get(f, refs[k]);
        double e;

        ck_assert_msg(r != NULL, "fwdad_lstm.txt: no %s", refs[k]);
        e = rel_err(got[k], r);
        ck_assert_msg(e <= 1e-5, "%s off by %g of its largest value",
                      refs[k], e);
    }
    for (k = 0; k < 2; k++) {
        cg_tensor_free(outs[k]);
        cg_tensor_free(tans[k]);
    }
    for (k = 0; k < LM_NP; k++) {
        cg_tensor_free(P[k]);
        cg_tensor_free(V[k]);
    }
    cg_tensor_free(u.tokens);
    cg_tensor_free(u.targets);
    cg_module_free(u.lstm);
    fx_free(f);
}
END_TEST

static cg_tensor *
lm_loss(int n, cg_tensor *const *in, void *user)
{
    cg_tensor *out[2] = { NULL, NULL };

    if (lm_fn(user, n, in, 2, out))
        return NULL;
    cg_tensor_free(out[1]);
    return out[0];
}

/* torch.autograd.functional.hvp of the model's loss (gen_fwdad_lstm.py)
 * with cg_hvp (reverse over reverse, through the LSTM's composite
 * backward): each part within 1e-5 of its largest value. */
START_TEST(hvp_of_lstm_language_model_matches_pytorch)
{
    char err[256], key[32];
    fx_file *f = fx_load_fixture("fwdad_lstm.txt", err, sizeof err);
    cg_tensor *P[LM_NP], *V[LM_NP], *hv[LM_NP] = { NULL }, *value = NULL;
    int sizes[5], k;
    lm_user u;
    rcase c;

    ck_assert_msg(f != NULL, "%s", err);
    ck_assert_int_eq(fx_config_ints(f, "sizes", sizes, 5), 5);
    memset(&c, 0, sizeof c);
    c.mode = CG_LSTM;
    c.L = 2;
    c.D = 1;
    c.I = sizes[1];
    c.H = sizes[2];
    u.lstm = make_layer(&c);
    u.T = sizes[3];
    u.B = sizes[4];
    u.H = sizes[2];
    u.tokens = fx_ints(f, "tokens");
    u.targets = fx_ints(f, "targets");
    for (k = 0; k < LM_NP; k++) {
        snprintf(key, sizeof key, "p.%d", k);
        P[k] = fx_f32(f, key);
        ck_assert_int_eq(cg_tensor_set_requires_grad(P[k], 1), CG_OK);
        snprintf(key, sizeof key, "t.%d", k);
        V[k] = fx_f32(f, key);
    }
    ck_assert_msg(cg_hvp(lm_loss, &u, LM_NP, P, V, hv, &value) == CG_OK,
                  "%s", TT_ERR);
    ck_assert(rel_err(value, fx_get(f, "loss")) <= 1e-5);
    for (k = 0; k < LM_NP; k++) {
        const fx_tensor *r;
        double e;

        snprintf(key, sizeof key, "hvp.%d", k);
        r = fx_get(f, key);
        ck_assert_msg(r != NULL, "fwdad_lstm.txt: no %s", key);
        e = rel_err(hv[k], r);
        ck_assert_msg(e <= 1e-5, "%s off by %g of its largest value", key,
                      e);
        cg_tensor_free(hv[k]);
        cg_tensor_free(P[k]);
        cg_tensor_free(V[k]);
    }
    cg_tensor_free(value);
    cg_tensor_free(u.tokens);
    cg_tensor_free(u.targets);
    cg_module_free(u.lstm);
    fx_free(f);
}
END_TEST

static Suite *
fwdad_rnn_suite(void)
{
    Suite *s = suite_create("fwdad_rnn");
    TCase *tc = tcase_create("fwdad_rnn");

    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, rnn_tangents_match_fd_and_reverse_mode, 0,
                        (int)(sizeof cases / sizeof cases[0]));
    /* LSTM and GRU (a host checker: LSTM only). */
    tcase_add_loop_test(tc, rnn_tangents_in_16_bits, 0,
                        tt_host_checker() ? 1 : 2);
    tcase_add_test(tc, layer_without_tangents_launches_the_same);
    tcase_add_test(tc, jvp_of_lstm_language_model_matches_pytorch);
    tcase_add_test(tc, hvp_of_lstm_language_model_matches_pytorch);
    /* LSTM, GRU, RNN tanh and relu (a host checker: LSTM only). */
    tcase_add_loop_test(tc, rnn_double_backward_matches_fd, 0,
                        tt_host_checker() ? 1 : 4);
    tcase_add_test(tc, rnn_double_backward_with_lengths_is_unsupported);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tt_run(fwdad_rnn_suite());
}
