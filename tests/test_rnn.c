/* SPDX-License-Identifier: MIT */
/*
 * tests/test_rnn.c - the recurrent layers (cg_rnn_*) and the linear and
 * embedding layers:
 *   - parity with PyTorch 1.13 on the committed fixtures (outputs, final
 *     states and every gradient);
 *   - forward against a plain C reference in double, and gradients
 *     against central differences of a scalar loss through that
 *     reference, for every cell type, H = 3, 5 and T = 1, 4, one and two
 *     layers, both directions, variable lengths, and odd sizes (H = 33,
 *     B = 7);
 *   - both ways of running a step: the fused kernel and the CLBlast GEMM
 *     path (GEMM + cell kernel), each against PyTorch and the reference;
 *   - launches per step for a T = 64 LSTM, forward and backward;
 *   - truncated BPTT with a detached state; dropout between layers;
 *   - bad input is rejected with nothing changed.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "nn/internal.h"
#include "ops/internal.h"
#include "rnn_ref.h"
#include "testutil.h"
#include "tune/tuner.h"

/* Parity with PyTorch: |clgrad - torch| <= FX_TOL * max(1, |torch|).  Both
 * compute in float32 but sum in different orders (torch: MKL/OpenBLAS GEMM
 * blocks, clgrad: CLBlast tiles and the step kernels' register tiles), and
 * the fixtures' sums have at most ~40 terms per gate per step over 4
 * steps and 2 layers: a few float32 roundings (6e-8 each) per term, so
 * ~1e-6 expected; 1e-5 (the bound) leaves a margin for the
 * libm-vs-OpenCL exp/tanh differences (up to 4 ulp).  Measured maximum is
 * printed. */
#define FX_TOL 1e-5
/* Device (float32) against the double reference, forward and gradients
 * from central differences (step 1e-6 in double: truncation ~1e-12,
 * cancellation ~1e-10, far below float32's error): |a - b| <= TOL *
 * max(1, |b|).  Float32 accumulation over G*H <= 132 terms per step,
 * propagated over <= 4 steps and 2 layers, stays near 1e-6. */
#define TOL 2e-5
#define FD_EPS 1e-6

/* The step path the layers under test use (CG__RNN_PATH_*). */
static int g_path = CG__RNN_PATH_FUSED;
/* On the GEMM path, whether W_hh is packed once per pass (the tests that
 * loop over the cells pack it for every other one, a cell packed in one
 * test unpacked in the next). */
static int g_packed;
static const char *const path_name[] = { "auto", "fused", "gemm",
                                         "gemm-packed" };
#define PATH_NAME (path_name[g_path + (g_path == CG__RNN_PATH_GEMM && \
                                       g_packed)])

static const char *const mode_name[] = { "RNN_TANH", "RNN_RELU", "LSTM",
                                         "GRU" };

static int
gates(cg_rnn_mode mode)
{
    return mode == CG_LSTM ? 4 : mode == CG_GRU ? 3 : 1;
}

/* ------------------------------------------------------------------------
 * A problem: configuration and host data in double
 * ------------------------------------------------------------------------ */

typedef struct rcase {
    cg_rnn_mode mode;
    int I, H, L, D, bf, T, B, varlen, G, np;
    int len[64];
    double *x;              /* user layout: [T, B, I] or [B, T, I] */
    double *h0, *c0;        /* [L*D, B, H]; c0 LSTM only */
    double *p[64];          /* parameters in the module's order */
    int64_t prows[64], pcols[64];   /* pcols 0: 1-D */
    double *gy;             /* upstream gradient of y, y's layout */
    double *ghn, *gcn;      /* of h_n, c_n */
} rcase;

typedef struct rres {
    double *y, *hn, *cn;
    double *gx, *gh0, *gc0, *gp[64];
} rres;

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;

static double
urand(double lo, double hi)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (hi - lo) * (double)(rng_state >> 11) / 9007199254740992.0;
}

static double *
darr(size_t n, double lo, double hi)
{
    double *a = malloc((n ? n : 1) * sizeof *a);
    size_t i;

    ck_assert_ptr_nonnull(a);
    for (i = 0; i < n; i++)
        a[i] = urand(lo, hi);
    return a;
}

static size_t
xsize(const rcase *c)
{
    return (size_t)c->T * c->B * c->I;
}

static size_t
ysize(const rcase *c)
{
    return (size_t)c->T * c->B * c->D * c->H;
}

static size_t
ssize(const rcase *c)
{
    return (size_t)c->L * c->D * c->B * c->H;
}

static size_t
psize(const rcase *c, int i)
{
    return (size_t)c->prows[i] * (size_t)(c->pcols[i] ? c->pcols[i] : 1);
}

/* Parameter shapes in PyTorch's order: per layer, per direction, W_ih,
 * W_hh, b_ih, b_hh. */
static void
case_shapes(rcase *c)
{
    int l, d, j, i = 0;

    c->G = gates(c->mode);
    for (l = 0; l < c->L; l++)
        for (d = 0; d < c->D; d++)
            for (j = 0; j < 4; j++, i++) {
                c->prows[i] = (int64_t)c->G * c->H;
                c->pcols[i] = j == 0 ? (l ? c->D * c->H : c->I)
                                     : j == 1 ? c->H : 0;
            }
    c->np = i;
}

static void
case_random(rcase *c, cg_rnn_mode mode, int I, int H, int L, int D, int bf,
            int T, int B, const int *len)
{
    double bound;
    int i;

    memset(c, 0, sizeof *c);
    c->mode = mode;
    c->I = I, c->H = H, c->L = L, c->D = D, c->bf = bf, c->T = T;
    c->B = B;
    c->varlen = len != NULL;
    for (i = 0; i < B; i++)
        c->len[i] = len ? len[i] : T;
    case_shapes(c);
    /* Weights a little wider than PyTorch's init so that every gate's
     * derivative is exercised away from zero. */
    bound = 1.5 / sqrt((double)H);
    c->x = darr(xsize(c), -1, 1);
    c->h0 = darr(ssize(c), -1, 1);
    c->c0 = mode == CG_LSTM ? darr(ssize(c), -1, 1) : NULL;
    for (i = 0; i < c->np; i++)
        c->p[i] = darr(psize(c, i), -bound, bound);
    c->gy = darr(ysize(c), -1, 1);
    c->ghn = darr(ssize(c), -1, 1);
    c->gcn = mode == CG_LSTM ? darr(ssize(c), -1, 1) : NULL;
}

static void
case_free(rcase *c)
{
    int i;

    free(c->x);
    free(c->h0);
    free(c->c0);
    for (i = 0; i < c->np; i++)
        free(c->p[i]);
    free(c->gy);
    free(c->ghn);
    free(c->gcn);
}

static void
res_free(rres *r)
{
    int i;

    free(r->y);
    free(r->hn);
    free(r->cn);
    free(r->gx);
    free(r->gh0);
    free(r->gc0);
    for (i = 0; i < 64; i++)
        free(r->gp[i]);
    memset(r, 0, sizeof *r);
}

/* Index of [t, b, j] in a sequence of width w in the case's layout. */
static size_t
sidx(const rcase *c, int t, int b, int j, int w)
{
    return c->bf ? ((size_t)b * c->T + t) * w + j
                 : ((size_t)t * c->B + b) * w + j;
}

/* ------------------------------------------------------------------------
 * Reference in double
 * ------------------------------------------------------------------------ */

/* One cell step for one row: h, cc updated in place.  wih [G*H, in] x,
 * whh [G*H, H]. */
static void
ref_cell(const rcase *c, const double *wih, const double *whh,
         const double *bih, const double *bhh, const double *x, int in,
         double *h, double *cc)
{
    int H = c->H, g, k;
    double ig[4 * 128], hg[4 * 128];

    ck_assert(c->G * H <= 4 * 128);
    for (g = 0; g < c->G * H; g++) {
        ig[g] = bih[g];
        hg[g] = bhh[g];
        for (k = 0; k < in; k++)
            ig[g] += wih[(size_t)g * in + k] * x[k];
        for (k = 0; k < H; k++)
            hg[g] += whh[(size_t)g * H + k] * h[k];
    }
    rr_cell(cg__rnn_cell_of(c->mode), H, ig, hg, h, cc, h, NULL);
}

/* Runs the stack; fills y (case layout), hn, cn when not NULL and returns
 * the loss sum(y gy) + sum(hn ghn) + sum(cn gcn). */
static double
ref_run(const rcase *c, double *y, double *hn, double *cn)
{
    int T = c->T, B = c->B, H = c->H, D = c->D, l, d, t, b, j, s;
    size_t DH = (size_t)D * H;
    double *in = malloc((size_t)T * B * ((size_t)c->I > DH ? (size_t)c->I : DH) *
                        sizeof *in);
    double *out = calloc((size_t)T * B * DH, sizeof *out);
    double h[128], cc[128], loss = 0;
    int width = c->I;

    ck_assert(in && out && H <= 128);
    for (t = 0; t < T; t++)
        for (b = 0; b < B; b++)
            for (j = 0; j < c->I; j++)
                in[((size_t)t * B + b) * c->I + j] = c->x[sidx(c, t, b, j,
                                                               c->I)];
    for (l = 0; l < c->L; l++) {
        memset(out, 0, (size_t)T * B * DH * sizeof *out);
        for (d = 0; d < D; d++) {
            const double *const *p = (const double *const *)c->p +
                                     (l * D + d) * 4;
            size_t sl = (size_t)(l * D + d) * B * H;

            for (b = 0; b < B; b++) {
                memcpy(h, c->h0 + sl + (size_t)b * H, (size_t)H * sizeof *h);
                if (c->c0)
                    memcpy(cc, c->c0 + sl + (size_t)b * H,
                           (size_t)H * sizeof *cc);
                for (s = 0; s < T; s++) {
                    t = d ? T - 1 - s : s;
                    if (t >= c->len[b])
                        continue;
                    ref_cell(c, p[0], p[1], p[2], p[3],
                             in + ((size_t)t * B + b) * width, width, h, cc);
                    for (j = 0; j < H; j++)
                        out[((size_t)t * B + b) * DH + (size_t)d * H + j] =
                            h[j];
                }
                for (j = 0; j < H; j++) {
                    loss += h[j] * c->ghn[sl + (size_t)b * H + j];
                    if (hn)
                        hn[sl + (size_t)b * H + j] = h[j];
                    if (c->c0) {
                        loss += cc[j] * c->gcn[sl + (size_t)b * H + j];
                        if (cn)
                            cn[sl + (size_t)b * H + j] = cc[j];
                    }
                }
            }
        }
        memcpy(in, out, (size_t)T * B * DH * sizeof *in);
        width = (int)DH;
    }
    for (t = 0; t < T; t++)
        for (b = 0; b < B; b++)
            for (j = 0; j < (int)DH; j++) {
                size_t i = sidx(c, t, b, j, (int)DH);
                double v = out[((size_t)t * B + b) * DH + j];

                loss += v * c->gy[i];
                if (y)
                    y[i] = v;
            }
    free(in);
    free(out);
    return loss;
}

/* ------------------------------------------------------------------------
 * The device side
 * ------------------------------------------------------------------------ */

static cg_tensor *
up(const double *src, int ndim, const int64_t *shape, int grad)
{
    int64_t n = 1;
    float *f;
    int d;
    cg_tensor *t;

    for (d = 0; d < ndim; d++)
        n *= shape[d];
    f = malloc((size_t)n * sizeof *f);
    ck_assert_ptr_nonnull(f);
    for (d = 0; d < n; d++)
        f[d] = (float)src[d];
    t = cg_tensor_from_host(tt_ctx(), CG_F32, ndim, shape, f);
    ck_assert_msg(t != NULL, "%s", TT_ERR);
    free(f);
    if (grad)
        ck_assert_int_eq(cg_tensor_set_requires_grad(t, 1), CG_OK);
    return t;
}

static double *
down(const cg_tensor *t, size_t n)
{
    float *f = malloc((n ? n : 1) * sizeof *f);
    double *r = malloc((n ? n : 1) * sizeof *r);
    size_t i;

    ck_assert(f && r);
    ck_assert_msg(t != NULL, "no tensor");
    ck_assert_int_eq(cg_tensor_numel(t), (int64_t)n);
    ck_assert_msg(cg_tensor_to_host(t, f, n * sizeof *f) == CG_OK, "%s",
                  TT_ERR);
    for (i = 0; i < n; i++)
        r[i] = f[i];
    free(f);
    return r;
}

static double *
down_grad(const cg_tensor *t, size_t n)
{
    cg_tensor *g = cg_tensor_grad(t);

    ck_assert_msg(g != NULL, "no gradient");
    return down(g, n);
}

/* sum(a * g) as a recorded scalar. */
static cg_tensor *
dot(cg_tensor *a, const double *g)
{
    int64_t shape[CG_MAX_DIMS];
    int nd = cg_tensor_ndim(a);
    cg_tensor *gt, *prod, *s;

    cg_tensor_shape(a, shape);
    gt = up(g, nd, shape, 0);
    prod = cg_mul(a, gt);
    ck_assert_msg(prod != NULL, "%s", TT_ERR);
    s = cg_sum(prod, 0, NULL, 0);
    ck_assert_msg(s != NULL, "%s", TT_ERR);
    cg_tensor_free(gt);
    cg_tensor_free(prod);
    return s;
}

static cg_tensor *
add_free(cg_tensor *a, cg_tensor *b)
{
    cg_tensor *s = cg_add(a, b);

    ck_assert_msg(s != NULL, "%s", TT_ERR);
    cg_tensor_free(a);
    cg_tensor_free(b);
    return s;
}

static cg_module *
make_module(const rcase *c, float dropout)
{
    cg_rnn_options o;
    cg_module *m;
    int i;

    memset(&o, 0, sizeof o);
    o.mode = c->mode;
    o.input_size = c->I;
    o.hidden_size = c->H;
    o.num_layers = c->L;
    o.bidirectional = c->D == 2;
    o.batch_first = c->bf;
    o.dropout = dropout;
    m = cg_rnn_new(tt_ctx(), &o);
    ck_assert_msg(m != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg__rnn_set_path(m, g_path), CG_OK);
    ck_assert_int_eq(cg__rnn_set_packed(m, g_packed), CG_OK);
    ck_assert_int_eq(cg_module_num_params(m), c->np);
    for (i = 0; i < c->np; i++) {
        cg_tensor *p = cg_module_param(m, i, NULL);
        int64_t shape[2];
        size_t n = psize(c, i), k;
        float *f = malloc(n * sizeof *f);

        ck_assert_int_eq(cg_tensor_ndim(p), c->pcols[i] ? 2 : 1);
        cg_tensor_shape(p, shape);
        ck_assert_int_eq(shape[0], c->prows[i]);
        if (c->pcols[i])
            ck_assert_int_eq(shape[1], c->pcols[i]);
        for (k = 0; k < n; k++)
            f[k] = (float)c->p[i][k];
        ck_assert_int_eq(cg_tensor_write(p, f, n * sizeof *f), CG_OK);
        free(f);
    }
    return m;
}

/* Forward and backward of the loss on the device. */
static void
dev_run(const rcase *c, rres *r)
{
    int64_t xs[3], ss[3] = { (int64_t)c->L * c->D, c->B, c->H };
    cg_module *m = make_module(c, 0.0f);
    cg_tensor *x, *h0, *c0 = NULL, *y = NULL, *hn = NULL, *cn = NULL;
    cg_tensor *loss;
    int i, lstm = c->mode == CG_LSTM;

    xs[0] = c->bf ? c->B : c->T;
    xs[1] = c->bf ? c->T : c->B;
    xs[2] = c->I;
    x = up(c->x, 3, xs, 1);
    h0 = up(c->h0, 3, ss, 1);
    if (lstm)
        c0 = up(c->c0, 3, ss, 1);
    ck_assert_msg(cg_rnn_forward(m, x, h0, c0, c->varlen ? c->len : NULL, &y,
                                 &hn, lstm ? &cn : NULL) == CG_OK, "%s",
                  TT_ERR);
    r->y = down(y, ysize(c));
    r->hn = down(hn, ssize(c));
    if (lstm)
        r->cn = down(cn, ssize(c));
    loss = add_free(dot(y, c->gy), dot(hn, c->ghn));
    if (lstm)
        loss = add_free(loss, dot(cn, c->gcn));
    ck_assert_msg(cg_backward(loss, NULL, 0) == CG_OK, "%s", TT_ERR);
    r->gx = down_grad(x, xsize(c));
    r->gh0 = down_grad(h0, ssize(c));
    if (lstm)
        r->gc0 = down_grad(c0, ssize(c));
    for (i = 0; i < c->np; i++)
        r->gp[i] = down_grad(cg_module_param(m, i, NULL), psize(c, i));
    cg_tensor_free(loss);
    cg_tensor_free(y);
    cg_tensor_free(hn);
    cg_tensor_free(cn);
    cg_tensor_free(x);
    cg_tensor_free(h0);
    cg_tensor_free(c0);
    cg_module_free(m);
}

/* max |a - b| / max(1, |b|) over n, asserting it is <= tol. */
static double
expect_close(const char *what, const char *ctx, const double *a,
             const double *b, size_t n, double tol)
{
    double worst = 0;
    size_t i, wi = 0;

    for (i = 0; i < n; i++) {
        double e = fabs(a[i] - b[i]) / fmax(1.0, fabs(b[i]));

        ck_assert_msg(isfinite(a[i]), "%s %s[%zu] = %g", ctx, what, i, a[i]);
        if (e > worst)
            worst = e, wi = i;
    }
    ck_assert_msg(worst <= tol, "%s: %s[%zu] = %.9g, want %.9g (rel %.3g > "
                  "%.3g)", ctx, what, wi, a[wi], b[wi], worst, tol);
    return worst;
}

/* ------------------------------------------------------------------------
 * Parity with PyTorch
 * ------------------------------------------------------------------------ */

static const char *const fixtures[] = {
    "rnn_lstm.txt", "rnn_lstm_bidir_varlen.txt", "rnn_gru.txt",
    "rnn_tanh_bidir.txt", "rnn_lstm_batch_first.txt",
};

static double *
fx_copy(const fx_file *f, const char *name, size_t n)
{
    const fx_tensor *t = fx_get(f, name);
    double *d;
    size_t i;

    ck_assert_msg(t != NULL, "fixture has no %s", name);
    ck_assert_int_eq(t->numel, (int64_t)n);
    d = malloc(n * sizeof *d);
    for (i = 0; i < n; i++)
        d[i] = t->data[i];
    return d;
}

static const char *
pname(const rcase *c, int i, char *buf, size_t size)
{
    static const char *const kind[] = { "weight_ih", "weight_hh", "bias_ih",
                                        "bias_hh" };
    int l = i / 4 / c->D, d = i / 4 % c->D;

    snprintf(buf, size, "%s_l%d%s", kind[i % 4], l, d ? "_reverse" : "");
    return buf;
}

#define NFIXTURES ((int)(sizeof fixtures / sizeof *fixtures))

START_TEST(matches_pytorch_fixtures)
{
    const char *file = fixtures[_i % NFIXTURES], *mode;
    char err[512], name[80], gname[96];
    fx_file *f = fx_load_fixture(file, err, sizeof err);
    rcase c;
    rres r;
    double *want, worst = 0;
    int i, n;

    ck_assert_msg(f != NULL, "%s", err);
    g_path = _i < NFIXTURES ? CG__RNN_PATH_FUSED : CG__RNN_PATH_GEMM;
    g_packed = _i % 2;
    memset(&c, 0, sizeof c);
    memset(&r, 0, sizeof r);
    mode = fx_config_str(f, "mode");
    for (i = 0; i < 4; i++)
        if (strcmp(mode, mode_name[i]) == 0)
            c.mode = (cg_rnn_mode)i;
    c.I = fx_config_int(f, "input_size", 0);
    c.H = fx_config_int(f, "hidden_size", 0);
    c.L = fx_config_int(f, "num_layers", 0);
    c.D = fx_config_int(f, "bidirectional", 0) + 1;
    c.bf = fx_config_int(f, "batch_first", 0);
    c.T = fx_config_int(f, "T", 0);
    c.B = fx_config_int(f, "B", 0);
    n = fx_config_ints(f, "lengths", c.len, 64);
    ck_assert_int_eq(n, c.B);
    for (i = 0; i < c.B; i++)
        c.varlen |= c.len[i] != c.T;
    case_shapes(&c);
    c.x = fx_copy(f, "input", xsize(&c));
    c.h0 = fx_copy(f, "h0", ssize(&c));
    c.gy = fx_copy(f, "grad_output", ysize(&c));
    c.ghn = fx_copy(f, "grad_h_n", ssize(&c));
    if (c.mode == CG_LSTM) {
        c.c0 = fx_copy(f, "c0", ssize(&c));
        c.gcn = fx_copy(f, "grad_c_n", ssize(&c));
    }
    for (i = 0; i < c.np; i++)
        c.p[i] = fx_copy(f, pname(&c, i, name, sizeof name), psize(&c, i));
    dev_run(&c, &r);

#define CMP(what, got, n)                                                 \
    do {                                                                  \
        double e_;                                                        \
        want = fx_copy(f, what, n);                                       \
        e_ = expect_close(what, file, got, want, n, FX_TOL);              \
        worst = fmax(worst, e_);                                          \
        free(want);                                                       \
    } while (0)
    CMP("output", r.y, ysize(&c));
    CMP("h_n", r.hn, ssize(&c));
    CMP("grad_input", r.gx, xsize(&c));
    CMP("grad_h0", r.gh0, ssize(&c));
    if (c.mode == CG_LSTM) {
        CMP("c_n", r.cn, ssize(&c));
        CMP("grad_c0", r.gc0, ssize(&c));
    }
    for (i = 0; i < c.np; i++) {
        snprintf(gname, sizeof gname, "grad_%s",
                 pname(&c, i, name, sizeof name));
        CMP(gname, r.gp[i], psize(&c, i));
    }
#undef CMP
    printf("pytorch parity %-5s %-28s max rel error %.2e\n",
           PATH_NAME, file, worst);
    res_free(&r);
    case_free(&c);
    fx_free(f);
}
END_TEST

/* ------------------------------------------------------------------------
 * Reference and finite differences
 * ------------------------------------------------------------------------ */

/* Central differences of the loss for every `stride`-th element of a. */
static void
fd_check(rcase *c, const char *what, const char *ctx, double *a, size_t n,
         const double *dev, size_t stride, double *worst)
{
    size_t i;

    if (tt_checker())
        stride = stride * 5 + 2;
    for (i = 0; i < n; i += stride) {
        double v = a[i], lp, lm, fd, e;

        a[i] = v + FD_EPS;
        lp = ref_run(c, NULL, NULL, NULL);
        a[i] = v - FD_EPS;
        lm = ref_run(c, NULL, NULL, NULL);
        a[i] = v;
        fd = (lp - lm) / (2 * FD_EPS);
        e = fabs(dev[i] - fd) / fmax(1.0, fabs(fd));
        ck_assert_msg(e <= TOL, "%s: d%s[%zu] = %.9g, finite differences "
                      "%.9g (rel %.3g)", ctx, what, i, dev[i], fd, e);
        if (e > *worst)
            *worst = e;
    }
}

static void
gradcheck(cg_rnn_mode mode, int I, int H, int L, int D, int bf, int T, int B,
          const int *len, size_t stride)
{
    rcase c;
    rres r;
    char ctx[160], name[80];
    double *y, *hn, *cn, wf = 0, wg = 0;
    int i;

    case_random(&c, mode, I, H, L, D, bf, T, B, len);
    memset(&r, 0, sizeof r);
    snprintf(ctx, sizeof ctx, "%s %s I%d H%d L%d D%d bf%d T%d B%d%s",
             PATH_NAME, mode_name[mode], I, H, L, D, bf, T, B,
             len ? " varlen" : "");
    dev_run(&c, &r);
    y = malloc(ysize(&c) * sizeof *y);
    hn = malloc(ssize(&c) * sizeof *hn);
    cn = malloc(ssize(&c) * sizeof *cn);
    ref_run(&c, y, hn, cn);
    wf = fmax(wf, expect_close("output", ctx, r.y, y, ysize(&c), TOL));
    wf = fmax(wf, expect_close("h_n", ctx, r.hn, hn, ssize(&c), TOL));
    if (mode == CG_LSTM)
        wf = fmax(wf, expect_close("c_n", ctx, r.cn, cn, ssize(&c), TOL));
    fd_check(&c, "x", ctx, c.x, xsize(&c), r.gx, stride, &wg);
    fd_check(&c, "h0", ctx, c.h0, ssize(&c), r.gh0, stride, &wg);
    if (mode == CG_LSTM)
        fd_check(&c, "c0", ctx, c.c0, ssize(&c), r.gc0, stride, &wg);
    for (i = 0; i < c.np; i++)
        fd_check(&c, pname(&c, i, name, sizeof name), ctx, c.p[i],
                 psize(&c, i), r.gp[i], stride, &wg);
    printf("gradcheck %-46s fwd %.2e grad %.2e\n", ctx, wf, wg);
    free(y);
    free(hn);
    free(cn);
    res_free(&r);
    case_free(&c);
}

START_TEST(gradcheck_small_every_cell)
{
    static const int hs[] = { 3, 5 }, ts[] = { 1, 4 };
    cg_rnn_mode mode = (cg_rnn_mode)(_i % 4);
    int h, t;

    g_path = _i < 4 ? CG__RNN_PATH_FUSED : CG__RNN_PATH_GEMM;
    g_packed = _i % 2;

    for (h = 0; h < 2; h++)
        for (t = 0; t < 2; t++)
            gradcheck(mode, 4, hs[h], 1, 1, 0, ts[t], 2, NULL, 1);
}
END_TEST

START_TEST(gradcheck_two_layers_bidirectional_varlen)
{
    static const int len[3] = { 2, 4, 1 };
    cg_rnn_mode mode = (cg_rnn_mode)(_i % 4);

    g_path = _i < 4 ? CG__RNN_PATH_FUSED : CG__RNN_PATH_GEMM;
    g_packed = (_i + 1) % 2;

    gradcheck(mode, 3, 5, 2, 2, 0, 4, 3, len, 1);
    gradcheck(mode, 3, 3, 2, 2, 1, 4, 3, NULL, 1);
}
END_TEST

START_TEST(gradcheck_odd_sizes_h33_b7)
{
    static const int len[7] = { 3, 1, 2, 3, 3, 2, 1 };
    cg_rnn_mode mode = (cg_rnn_mode)(_i % 4);

    g_path = _i < 4 ? CG__RNN_PATH_FUSED : CG__RNN_PATH_GEMM;
    g_packed = _i % 2;

    /* Every 7th element: sizes are in the thousands. */
    gradcheck(mode, 6, 33, 1, 2, 0, 3, 7, len, 7);
}
END_TEST

/* The fused kernel against the GEMM path (_i / 2: W_hh packed or not) at
 * a size where the register tiles are full (H = 128 is a multiple of
 * every VW) and the batch (13) is not a multiple of the rows per
 * work-item. */
START_TEST(fused_path_matches_gemm_path)
{
    static const int len[13] = { 3, 1, 2, 3, 3, 2, 1, 3, 3, 2, 2, 1, 3 };
    cg_rnn_mode mode = _i % 2 ? CG_GRU : CG_LSTM;
    rcase c;
    rres f, g;
    char name[80];
    double w = 0;
    int i;

    /* Under a memory checker a smaller layer covers the same code. */
    if (tt_checker())
        case_random(&c, mode, 6, 24, 1, 2, 0, 3, 5, len);
    else
        case_random(&c, mode, 20, 128, 1, 2, 0, 3, 13, len);
    memset(&f, 0, sizeof f);
    memset(&g, 0, sizeof g);
    g_path = CG__RNN_PATH_FUSED;
    dev_run(&c, &f);
    g_path = CG__RNN_PATH_GEMM;
    g_packed = _i / 2;
    dev_run(&c, &g);
    w = fmax(w, expect_close("output", "fused vs gemm", f.y, g.y, ysize(&c),
                             TOL));
    w = fmax(w, expect_close("h_n", "fused vs gemm", f.hn, g.hn, ssize(&c),
                             TOL));
    w = fmax(w, expect_close("dx", "fused vs gemm", f.gx, g.gx, xsize(&c),
                             TOL));
    w = fmax(w, expect_close("dh0", "fused vs gemm", f.gh0, g.gh0,
                             ssize(&c), TOL));
    for (i = 0; i < c.np; i++)
        w = fmax(w, expect_close(pname(&c, i, name, sizeof name),
                                 "fused vs gemm", f.gp[i], g.gp[i],
                                 psize(&c, i), TOL));
    printf("fused vs %s %s H%d B%d: max rel difference %.2e\n", PATH_NAME,
           mode_name[mode], c.H, c.B, w);
    res_free(&f);
    res_free(&g);
    case_free(&c);
}
END_TEST

/* ------------------------------------------------------------------------
 * Launches, truncated BPTT, dropout
 * ------------------------------------------------------------------------ */

static uint64_t
launches(void)
{
    cg_memory_stats s;

    ck_assert_int_eq(cg_context_stats(tt_ctx(), &s), CG_OK);
    return s.kernels_enqueued;
}

static void
count_launches(int D, int path, int packed, uint64_t *fwd, uint64_t *bwd)
{
    enum { T = 64, B = 4, I = 8, H = 16 };
    cg_rnn_options o = { CG_LSTM, I, H, 1, 0, 0, 0.0f };
    int64_t xs[3] = { T, B, I };
    cg_module *m;
    cg_tensor *x, *y, *s;
    uint64_t k0;

    o.bidirectional = D == 2;
    m = cg_rnn_new(tt_ctx(), &o);
    ck_assert_msg(m != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg__rnn_set_path(m, path), CG_OK);
    ck_assert_int_eq(cg__rnn_set_packed(m, packed), CG_OK);
    x = cg_rand_uniform(tt_ctx(), 3, xs, -1, 1);
    ck_assert_ptr_nonnull(x);
    k0 = launches();
    ck_assert_int_eq(cg_rnn_forward(m, x, NULL, NULL, NULL, &y, NULL, NULL),
                     CG_OK);
    *fwd = launches() - k0;
    s = cg_sum(y, 0, NULL, 0);
    ck_assert_ptr_nonnull(s);
    k0 = launches();
    ck_assert_int_eq(cg_backward(s, NULL, 0), CG_OK);
    *bwd = launches() - k0;
    cg_tensor_free(s);
    cg_tensor_free(y);
    cg_tensor_free(x);
    cg_module_free(m);
}

START_TEST(launches_per_step_t64)
{
    uint64_t f1, b1, f2, b2;
    int packed;

    count_launches(1, CG__RNN_PATH_FUSED, 0, &f1, &b1);
    count_launches(2, CG__RNN_PATH_FUSED, 0, &f2, &b2);
    printf("LSTM T=64 launches, fused: forward %llu, backward %llu (one "
           "direction); %llu, %llu (two)\n", (unsigned long long)f1,
           (unsigned long long)b1, (unsigned long long)f2,
           (unsigned long long)b2);
    /* One launch per step and direction, plus a fixed number per call
     * (bias, GEMM, packing, state copies, weight-gradient GEMMs, bias
     * sums) that does not grow with T. */
    ck_assert_uint_le(f1, 64 + 8);
    ck_assert_uint_le(b1, 65 + 16);
    ck_assert_uint_le(f2, 2 * 64 + 12);
    ck_assert_uint_le(b2, 2 * 65 + 28);
    ck_assert_uint_ge(f1, 64);
    ck_assert_uint_ge(b1, 65);
    /* The GEMM path: two per step (GEMM + cell), on a W_hh packed once
     * per pass too (gemm_packed_ra reads h in place, float32 into the
     * float32 projection); three where h is packed first (gemm_pack_a,
     * gemm_packed, cell). */
    for (packed = 0; packed < 3; packed++) {
        int per = packed == 2 ? 3 : 2;

        cg__gemm_set_packed_a(packed == 2 ? CG__PACKED_A_PACK
                                          : CG__PACKED_A_AUTO);
        count_launches(1, CG__RNN_PATH_GEMM, packed > 0, &f1, &b1);
        count_launches(2, CG__RNN_PATH_GEMM, packed > 0, &f2, &b2);
        printf("LSTM T=64 launches, gemm%s: forward %llu, backward %llu "
               "(one direction); %llu, %llu (two)\n",
               packed == 2 ? "-packed, h packed" : packed ? "-packed" : "",
               (unsigned long long)f1, (unsigned long long)b1,
               (unsigned long long)f2, (unsigned long long)b2);
        ck_assert_uint_le(f1, per * 64 + 8);
        ck_assert_uint_le(b1, per * 64 + 16);
        ck_assert_uint_le(f2, 2 * per * 64 + 12);
        ck_assert_uint_le(b2, 2 * per * 64 + 28);
        ck_assert_uint_ge(f1, per * 64);
    }
    cg__gemm_set_packed_a(CG__PACKED_A_AUTO);
}
END_TEST

/* An "rnn.path" entry's "packed" reaches the layers made after it (in a
 * context of their own, the shared one's entries untouched); a value
 * other than 0 or 1 is refused and leaves the entry in force as it was. */
START_TEST(path_entry_sets_packing)
{
    cg_context *ctx = cg_context_new(NULL);
    cg_rnn_options o = { CG_LSTM, 8, 16, 1, 0, 0, 0.0f };
    cg_tuning_entry e;
    cg_module *m;
    int v;

    ck_assert_msg(ctx != NULL, "%s", TT_ERR);
    memset(&e, 0, sizeof e);
    strcpy(e.kernel, "rnn.path");
    strcpy(e.shape, "any");
    e.nparams = 2;
    strcpy(e.names[0], "gemm_min_h");
    strcpy(e.names[1], "packed");
    e.values[0] = 1;
    ck_assert_int_eq(cg_kernel_source_hash("rnn", e.source_hash), CG_OK);
    for (v = 1; v >= 0; v--) {
        e.values[1] = v;
        ck_assert_msg(cg_context_set_tuning(ctx, &e) == CG_OK, "%s", TT_ERR);
        m = cg_rnn_new(ctx, &o);
        ck_assert_msg(m != NULL, "%s", TT_ERR);
        ck_assert_int_eq(m->gemm_min_h, 1);
        ck_assert_int_eq(m->packed_whh, v);
        cg_module_free(m);
    }
    e.values[1] = 2;
    ck_assert_int_eq(cg_context_set_tuning(ctx, &e), CG_EINVAL);
    ck_assert_msg(strstr(cg_last_error(), "packed = 2") != NULL, "%s",
                  TT_ERR);
    m = cg_rnn_new(ctx, &o);
    ck_assert_msg(m != NULL, "%s", TT_ERR);
    ck_assert_int_eq(m->packed_whh, 0);
    cg_module_free(m);
    cg_context_free(ctx);
}
END_TEST

/* Two calls of T/2 with the state carried (detached) equal one call of T
 * forward; the second call's gradient stops at the carried state. */
START_TEST(truncated_bptt_carries_detached_state)
{
    enum { T = 6, B = 3, I = 4, H = 5 };
    cg_rnn_options o = { CG_LSTM, I, H, 2, 0, 0, 0.0f };
    int64_t xs[3] = { T, B, I };
    cg_module *m = cg_rnn_new(tt_ctx(), &o);
    cg_tensor *x, *x1, *x2, *y, *hn, *cn, *y1, *h1, *c1, *y2, *h2, *c2;
    cg_tensor *dh, *dc, *s;
    float full[T * B * H], a[T * B * H / 2], b2[T * B * H / 2];
    float hf[2 * B * H], hc[2 * B * H];
    cg_memory_stats st0, st1;
    int i;

    ck_assert_ptr_nonnull(m);
    x = cg_rand_uniform(tt_ctx(), 3, xs, -1, 1);
    x1 = cg_narrow(x, 0, 0, T / 2);
    x2 = cg_narrow(x, 0, T / 2, T / 2);
    ck_assert(x && x1 && x2);
    ck_assert_int_eq(cg_rnn_forward(m, x, NULL, NULL, NULL, &y, &hn, &cn),
                     CG_OK);
    ck_assert_int_eq(cg_rnn_forward(m, x1, NULL, NULL, NULL, &y1, &h1, &c1),
                     CG_OK);
    ck_assert_int_eq(cg_context_stats(tt_ctx(), &st0), CG_OK);
    dh = cg_detach(h1);
    dc = cg_detach(c1);
    ck_assert_int_eq(cg_context_stats(tt_ctx(), &st1), CG_OK);
    ck_assert_uint_eq(st1.allocations, st0.allocations);    /* no copy */
    ck_assert(!cg_tensor_requires_grad(dh));
    ck_assert_int_eq(cg_rnn_forward(m, x2, dh, dc, NULL, &y2, &h2, &c2),
                     CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(y, full, sizeof full), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(y1, a, sizeof a), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(y2, b2, sizeof b2), CG_OK);
    for (i = 0; i < T * B * H / 2; i++) {
        ck_assert_float_eq_tol(a[i], full[i], 1e-6);
        ck_assert_float_eq_tol(b2[i], full[T * B * H / 2 + i], 1e-6);
    }
    ck_assert_int_eq(cg_tensor_to_host(hn, hf, sizeof hf), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(h2, hc, sizeof hc), CG_OK);
    for (i = 0; i < 2 * B * H; i++)
        ck_assert_float_eq_tol(hc[i], hf[i], 1e-6);
    /* Backward through the second chunk only: nothing reaches h1. */
    s = cg_sum(y2, 0, NULL, 0);
    ck_assert_int_eq(cg_backward(s, NULL, 0), CG_OK);
    ck_assert_ptr_null(cg_tensor_grad(dh));
    ck_assert_ptr_nonnull(cg_tensor_grad(cg_module_param(m, 0, NULL)));
    {
        cg_tensor *all[] = { x, x1, x2, y, hn, cn, y1, h1, c1, y2, h2, c2,
                             dh, dc, s };

        for (i = 0; i < (int)(sizeof all / sizeof *all); i++)
            cg_tensor_free(all[i]);
    }
    cg_module_free(m);
}
END_TEST

START_TEST(dropout_between_layers_in_training_only)
{
    enum { T = 5, B = 4, I = 6, H = 8 };
    cg_rnn_options o = { CG_GRU, I, H, 2, 0, 0, 0.5f };
    int64_t xs[3] = { T, B, I };
    cg_module *m = cg_rnn_new(tt_ctx(), &o);
    cg_tensor *x, *y0, *y1, *y2;
    float a[T * B * H], b[T * B * H], e[T * B * H];
    int i, differ = 0;

    ck_assert_ptr_nonnull(m);
    x = cg_rand_uniform(tt_ctx(), 3, xs, -1, 1);
    ck_assert_int_eq(cg_module_set_training(m, 0), CG_OK);
    ck_assert_int_eq(cg_rnn_forward(m, x, NULL, NULL, NULL, &y0, NULL, NULL),
                     CG_OK);
    ck_assert_int_eq(cg_rnn_forward(m, x, NULL, NULL, NULL, &y1, NULL, NULL),
                     CG_OK);
    ck_assert_int_eq(cg_module_set_training(m, 1), CG_OK);
    ck_assert_int_eq(cg_rnn_forward(m, x, NULL, NULL, NULL, &y2, NULL, NULL),
                     CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(y0, a, sizeof a), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(y1, e, sizeof e), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(y2, b, sizeof b), CG_OK);
    for (i = 0; i < T * B * H; i++) {
        ck_assert(a[i] == e[i]);            /* evaluation: deterministic */
        differ += a[i] != b[i];
    }
    ck_assert_int_gt(differ, T * B * H / 4);
    cg_tensor_free(x);
    cg_tensor_free(y0);
    cg_tensor_free(y1);
    cg_tensor_free(y2);
    cg_module_free(m);
}
END_TEST

/* The initialisation is PyTorch's U(-1/sqrt(H), 1/sqrt(H)). */
START_TEST(parameters_are_named_and_initialised_as_pytorch)
{
    cg_rnn_options o = { CG_LSTM, 10, 20, 2, 1, 0, 0.0f };
    cg_module *m = cg_rnn_new(tt_ctx(), &o);
    const char *name;
    cg_tensor *p;
    float w[80 * 40];
    double bound = 1 / sqrt(20.0), mx = 0;
    int i, j;

    ck_assert_ptr_nonnull(m);
    ck_assert_str_eq(cg_module_kind(m), "rnn");
    ck_assert_int_eq(cg_module_num_params(m), 16);
    p = cg_module_param(m, 5, &name);
    ck_assert_str_eq(name, "weight_hh_l0_reverse");
    ck_assert_ptr_eq(cg_module_find_param(m, "bias_ih_l1_reverse"),
                     cg_module_param(m, 14, NULL));
    ck_assert_ptr_null(cg_module_find_param(m, "weight_ih_l2"));
    ck_assert_ptr_null(cg_module_param(m, 16, NULL));
    p = cg_module_find_param(m, "weight_ih_l1");
    ck_assert_int_eq(cg_tensor_numel(p), 80 * 40);
    ck_assert(cg_tensor_requires_grad(p) && cg_tensor_is_leaf(p));
    for (i = 0; i < 16; i++) {
        int64_t n;

        p = cg_module_param(m, i, NULL);
        n = cg_tensor_numel(p);
        ck_assert_int_eq(cg_tensor_to_host(p, w, (size_t)n * sizeof *w),
                         CG_OK);
        for (j = 0; j < n; j++) {
            ck_assert(fabs(w[j]) <= bound);
            mx = fmax(mx, fabs(w[j]));
        }
    }
    ck_assert(mx > 0.95 * bound);
    cg_module_free(m);
}
END_TEST

/* ------------------------------------------------------------------------
 * Bad input
 * ------------------------------------------------------------------------ */

START_TEST(bad_input_is_rejected_and_changes_nothing)
{
    enum { T = 3, B = 2, I = 4, H = 5 };
    cg_rnn_options o = { CG_LSTM, I, H, 1, 0, 0, 0.0f };
    cg_rnn_options og = { CG_GRU, I, H, 1, 0, 0, 0.0f };
    int64_t xs[3] = { T, B, I }, xw[3] = { T, B, I + 1 };
    int64_t hs[3] = { 1, B, H }, hw[3] = { 1, B + 1, H }, x2[2] = { T, I };
    cg_module *m = cg_rnn_new(tt_ctx(), &o), *g = cg_rnn_new(tt_ctx(), &og);
    cg_tensor *x = cg_rand_uniform(tt_ctx(), 3, xs, -1, 1);
    cg_tensor *xbad = cg_rand_uniform(tt_ctx(), 3, xw, -1, 1);
    cg_tensor *xflat = cg_rand_uniform(tt_ctx(), 2, x2, -1, 1);
    cg_tensor *h = cg_zeros(tt_ctx(), 3, hs), *hbad = cg_zeros(tt_ctx(), 3, hw);
    cg_tensor *xi = cg_tensor_new(tt_ctx(), CG_I32, 3, xs);
    cg_tensor *y = NULL, *hn = NULL, *cn = NULL;
    cg_memory_stats s0, s1;
    const int len_long[B] = { 4, 1 }, len_zero[B] = { 0, 3 };
    cg_rnn_options bad = o;

    ck_assert(m && g && x && xbad && xflat && h && hbad && xi);
    ck_assert_int_eq(cg_context_stats(tt_ctx(), &s0), CG_OK);
#define REJECT(code, call, text)                                          \
    do {                                                                  \
        ck_assert_int_eq(call, code);                                     \
        ck_assert_msg(strstr(cg_last_error(), text) != NULL,              \
                      "message '%s' lacks '%s'", cg_last_error(), text);  \
        ck_assert_ptr_null(y);                                            \
    } while (0)
    REJECT(CG_ESHAPE, cg_rnn_forward(m, xbad, NULL, NULL, NULL, &y, &hn, &cn),
           "input_size 4");
    REJECT(CG_ESHAPE, cg_rnn_forward(m, xflat, NULL, NULL, NULL, &y, NULL,
                                     NULL), "x has shape [3, 4]");
    REJECT(CG_EDTYPE, cg_rnn_forward(m, xi, NULL, NULL, NULL, &y, NULL,
                                     NULL), "x");
    REJECT(CG_EINVAL, cg_rnn_forward(m, x, NULL, NULL, len_long, &y, NULL,
                                     NULL), "lengths[0] = 4");
    REJECT(CG_EINVAL, cg_rnn_forward(m, x, NULL, NULL, len_zero, &y, NULL,
                                     NULL), "lengths[0] = 0");
    REJECT(CG_ESHAPE, cg_rnn_forward(m, x, hbad, NULL, NULL, &y, NULL, NULL),
           "h0 has shape [1, 3, 5]");
    REJECT(CG_ESHAPE, cg_rnn_forward(m, x, h, hbad, NULL, &y, NULL, NULL),
           "c0 has shape");
    REJECT(CG_EINVAL, cg_rnn_forward(g, x, h, h, NULL, &y, NULL, NULL),
           "LSTM only");
    REJECT(CG_EINVAL, cg_rnn_forward(g, x, h, NULL, NULL, &y, NULL, &cn),
           "LSTM only");
    REJECT(CG_EINVAL, cg_rnn_forward(m, x, NULL, NULL, NULL, NULL, NULL,
                                     NULL), "output");
    REJECT(CG_EINVAL, cg_rnn_forward(NULL, x, NULL, NULL, NULL, &y, NULL,
                                     NULL), "NULL");
    ck_assert_ptr_null(hn);
    ck_assert_ptr_null(cn);
    ck_assert_ptr_null(cg_linear_forward(m, x));
    ck_assert(strstr(cg_last_error(), "linear") != NULL);
    ck_assert_int_eq(cg_context_stats(tt_ctx(), &s1), CG_OK);
    ck_assert_uint_eq(s1.kernels_enqueued, s0.kernels_enqueued);
    ck_assert_uint_eq(s1.bytes_in_use, s0.bytes_in_use);
    bad.hidden_size = 0;
    ck_assert_ptr_null(cg_rnn_new(tt_ctx(), &bad));
    bad = o;
    bad.dropout = 1.0f;
    ck_assert_ptr_null(cg_rnn_new(tt_ctx(), &bad));
    bad = o;
    bad.mode = (cg_rnn_mode)7;
    ck_assert_ptr_null(cg_rnn_new(tt_ctx(), &bad));
    ck_assert_ptr_null(cg_rnn_new(NULL, &o));
    /* Issue 16: num_layers * 2 * 4 overflowed an int and passed. */
    bad = o;
    bad.num_layers = INT_MAX / 8 + 1;
    bad.bidirectional = 1;
    ck_assert_ptr_null(cg_rnn_new(tt_ctx(), &bad));
    ck_assert_msg(strstr(cg_last_error(), "more than clgrad supports") !=
                  NULL, "%s", cg_last_error());
#undef REJECT
    {
        cg_tensor *all[] = { x, xbad, xflat, h, hbad, xi };
        int i;

        for (i = 0; i < 6; i++)
            cg_tensor_free(all[i]);
    }
    cg_module_free(m);
    cg_module_free(g);
}
END_TEST

/* ------------------------------------------------------------------------
 * Linear and embedding layers
 * ------------------------------------------------------------------------ */

START_TEST(linear_layer_matches_reference)
{
    enum { N = 7, IN = 33, OUT = 5 };
    int64_t xs[2] = { N, IN };
    cg_module *m = cg_linear_new(tt_ctx(), IN, OUT, 1);
    cg_tensor *x, *y, *s, *w, *b;
    float hx[N * IN], hw[OUT * IN], hb[OUT], hy[N * OUT], gw[OUT * IN];
    float gb[OUT], gx[N * IN];
    double bound = 1 / sqrt((double)IN);
    int i, j, k;

    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(cg_module_num_params(m), 2);
    w = cg_module_find_param(m, "weight");
    b = cg_module_find_param(m, "bias");
    ck_assert(w && b);
    x = cg_rand_uniform(tt_ctx(), 2, xs, -1, 1);
    cg_tensor_set_requires_grad(x, 1);
    y = cg_linear_forward(m, x);
    ck_assert_msg(y != NULL, "%s", TT_ERR);
    s = cg_sum(y, 0, NULL, 0);
    ck_assert_int_eq(cg_backward(s, NULL, 0), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(x, hx, sizeof hx), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(w, hw, sizeof hw), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(b, hb, sizeof hb), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(y, hy, sizeof hy), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(cg_tensor_grad(w), gw, sizeof gw),
                     CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(cg_tensor_grad(b), gb, sizeof gb),
                     CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(cg_tensor_grad(x), gx, sizeof gx),
                     CG_OK);
    for (j = 0; j < OUT; j++) {
        double colsum = 0;

        ck_assert(fabs(hb[j]) <= bound);
        ck_assert_float_eq_tol(gb[j], N, 1e-5);
        for (k = 0; k < IN; k++)
            ck_assert(fabs(hw[j * IN + k]) <= bound);
        for (i = 0; i < N; i++) {
            double r = hb[j];

            for (k = 0; k < IN; k++)
                r += (double)hx[i * IN + k] * hw[j * IN + k];
            ck_assert_msg(fabs(hy[i * OUT + j] - r) <= TOL * fmax(1, fabs(r)),
                          "y[%d,%d] = %g, want %g", i, j, hy[i * OUT + j], r);
        }
        for (k = 0; k < IN; k++) {
            colsum = 0;
            for (i = 0; i < N; i++)
                colsum += hx[i * IN + k];
            ck_assert(fabs(gw[j * IN + k] - colsum) <= TOL * fmax(1,
                                                          fabs(colsum)));
        }
    }
    for (i = 0; i < N; i++)
        for (k = 0; k < IN; k++) {
            double r = 0;

            for (j = 0; j < OUT; j++)
                r += hw[j * IN + k];
            ck_assert(fabs(gx[i * IN + k] - r) <= TOL * fmax(1, fabs(r)));
        }
    cg_tensor_free(s);
    cg_tensor_free(y);
    /* A 1-D input gives a 1-D output; a wrong width is rejected. */
    {
        int64_t one = IN, bad = IN + 1;
        cg_tensor *v = cg_rand_uniform(tt_ctx(), 1, &one, -1, 1);
        cg_tensor *vb = cg_rand_uniform(tt_ctx(), 1, &bad, -1, 1);
        cg_tensor *r = cg_linear_forward(m, v);

        ck_assert_msg(r != NULL, "%s", TT_ERR);
        ck_assert_int_eq(cg_tensor_ndim(r), 1);
        ck_assert_int_eq(cg_tensor_numel(r), OUT);
        ck_assert_ptr_null(cg_linear_forward(m, vb));
        ck_assert(strstr(cg_last_error(), "[34]") != NULL);
        cg_tensor_free(r);
        cg_tensor_free(v);
        cg_tensor_free(vb);
    }
    cg_tensor_free(x);
    cg_module_free(m);
    ck_assert_ptr_null(cg_linear_new(tt_ctx(), 0, 3, 1));
}
END_TEST

START_TEST(embedding_layer_looks_up_rows)
{
    int64_t is[2] = { 2, 3 };
    int idx[6] = { 0, 4, 4, 9, 1, 0 };
    cg_module *m = cg_embedding_new(tt_ctx(), 10, 6);
    cg_tensor *ind = cg_tensor_from_host(tt_ctx(), CG_I32, 2, is, idx), *y;
    float w[60], hy[36];
    int i, j;

    ck_assert(m && ind);
    y = cg_embedding_forward(m, ind);
    ck_assert_msg(y != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_ndim(y), 3);
    ck_assert_int_eq(cg_tensor_to_host(cg_module_param(m, 0, NULL), w,
                                       sizeof w), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(y, hy, sizeof hy), CG_OK);
    for (i = 0; i < 6; i++)
        for (j = 0; j < 6; j++)
            ck_assert(hy[i * 6 + j] == w[idx[i] * 6 + j]);
    cg_tensor_free(y);
    cg_tensor_free(ind);
    cg_module_free(m);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("rnn");
    TCase *tc = tcase_create("rnn");
    int paths = tt_checker() ? 4 : 8;

    tcase_set_timeout(tc, 600);
    /* Each loop runs the fused path, then the GEMM path (under a memory
     * checker the gradchecks run the fused path only; the fixtures and
     * fused_path_matches_gemm_path still run both). */
    tcase_add_loop_test(tc, matches_pytorch_fixtures, 0, 2 * NFIXTURES);
    tcase_add_loop_test(tc, gradcheck_small_every_cell, 0, paths);
    tcase_add_loop_test(tc, gradcheck_two_layers_bidirectional_varlen, 0,
                        paths);
    tcase_add_loop_test(tc, gradcheck_odd_sizes_h33_b7, 0, paths);
    tcase_add_loop_test(tc, fused_path_matches_gemm_path, 0, 4);
    tcase_add_test(tc, path_entry_sets_packing);
    /* Counting, not memory safety: its code paths are the gradchecks'. */
    if (!tt_checker())
        tcase_add_test(tc, launches_per_step_t64);
    tcase_add_test(tc, truncated_bptt_carries_detached_state);
    tcase_add_test(tc, dropout_between_layers_in_training_only);
    tcase_add_test(tc, parameters_are_named_and_initialised_as_pytorch);
    tcase_add_test(tc, bad_input_is_rejected_and_changes_nothing);
    tcase_add_test(tc, linear_layer_matches_reference);
    tcase_add_test(tc, embedding_layer_looks_up_rows);
    suite_add_tcase(s, tc);
    return tt_run(s);
}
