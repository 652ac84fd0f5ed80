/* SPDX-License-Identifier: MIT */
/*
 * tests/test_rnn_step.c - the fused recurrent step kernels (kernels/rnn.cl
 * through lib/nn/rnn_step.c) for tanh and relu RNN, LSTM and GRU: T steps
 * forward and backward on random data against a plain C reference in
 * double, the gradients against central differences of a scalar loss
 * through that reference, variable lengths, odd sizes (H = 3, 5, 33;
 * B = 1, 7, 32; H = 256 once), and every tuning variant giving the same
 * numbers.  Strided operands (xproj rows, output slots, an offset W_hh)
 * are laid out as the layer will lay them out.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/internal.h"
#include "rnn_ref.h"
#include "testutil.h"

/* Forward and backward tolerance on |kernel - reference| / (1 + |ref|).
 * The kernels accumulate in float32: a step sums G*H <= 1024 products of
 * terms bounded by 1 (|h| <= 1 for tanh/sigmoid cells, weights are
 * U(-1/sqrt H, 1/sqrt H)), so the rounding error is ~sqrt(H) * 6e-8 per
 * step and contracts through the saturating gates; OpenCL allows exp and
 * tanh 3-5 ulp.  Measured maxima on PoCL are below 1e-6 (H = 256), while
 * a 1e-4 relative change in one gate derivative shows as >= 2.4e-5; 2e-5
 * leaves room for other devices and a few steps of propagation. */
#define TOL 2e-5
/* Finite differences: central, step 1e-6 in double, so truncation (~1e-12)
 * and cancellation (~1e-10) are far below the float32 error of the kernel
 * gradients they are compared with; same bound as above. */
#define FD_EPS 1e-6
#define FD_TOL 2e-5

/* Strides of the device layout, deliberately not dense: xproj rows carry
 * XPAD extra floats (the layer's [T*B, D*G*H] projection), the output slot
 * starts YOFF floats into rows of H + YPAD (a direction's half of [T, B,
 * 2H]), W_hh and the biases sit at an offset in a larger parameter
 * buffer. */
#define XPAD 3
#define YOFF 1
#define YPAD 2
#define WOFF 5
#define BOFF 2

typedef struct prob {
    cg__rnn_cell cell;
    int T, B, H, G, varlen;
    int len[64];
    /* inputs */
    double *xp, *w, *bih, *bhh, *h0, *c0, *dy, *dhn, *dcn;
    /* reference forward: states per step, saved gates, output */
    double *hs, *cs, *sv, *y;
    /* reference backward */
    double *dg, *dgi, *dh0, *dc0;
} prob;

typedef struct devout {
    float *hs, *cs, *sv, *y, *dg, *dgi, *dh0, *dc0;
} devout;

static uint64_t rng = 88172645463325252ULL;

static double
urand(double lo, double hi)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return lo + (hi - lo) * (double)(rng >> 11) / 9007199254740992.0;
}

static double *
darr(size_t n, double lo, double hi)
{
    double *a = malloc((n ? n : 1) * sizeof *a);
    size_t i;

    ck_assert_ptr_nonnull(a);
    for (i = 0; i < n; i++)
        a[i] = lo == hi ? lo : urand(lo, hi);
    return a;
}

/* A random problem; lengths NULL: every row runs T steps. */
static void
prob_init(prob *p, cg__rnn_cell cell, int T, int B, int H, const int *len)
{
    size_t tb = (size_t)T * B, gh;
    double r = 1 / sqrt((double)H);
    int b;

    memset(p, 0, sizeof *p);
    p->cell = cell;
    p->T = T;
    p->B = B;
    p->H = H;
    p->G = cg__rnn_gates(cell);
    gh = (size_t)p->G * H;
    p->varlen = len != NULL;
    for (b = 0; b < B; b++)
        p->len[b] = len ? len[b] : T;
    p->xp = darr(tb * gh, -1, 1);
    p->w = darr(gh * H, -r, r);
    p->bih = darr(gh, -r, r);
    p->bhh = darr(gh, -r, r);
    p->h0 = darr((size_t)B * H, -1, 1);
    p->c0 = darr((size_t)B * H, -1, 1);
    p->dy = darr(tb * H, -1, 1);
    p->dhn = darr((size_t)B * H, -1, 1);
    p->dcn = darr((size_t)B * H, -1, 1);
    p->hs = darr(tb * H, 0, 0);
    p->cs = darr(tb * H, 0, 0);
    p->sv = darr(tb * 4 * H, 0, 0);
    p->y = darr(tb * H, 0, 0);
    p->dg = darr(tb * gh, 0, 0);
    p->dgi = darr(tb * gh, 0, 0);
    p->dh0 = darr((size_t)B * H, 0, 0);
    p->dc0 = darr((size_t)B * H, 0, 0);
}

static void
prob_free(prob *p)
{
    double *a[] = { p->xp, p->w, p->bih, p->bhh, p->h0, p->c0, p->dy, p->dhn,
                    p->dcn, p->hs, p->cs, p->sv, p->y, p->dg, p->dgi,
                    p->dh0, p->dc0 };
    size_t i;

    for (i = 0; i < sizeof a / sizeof *a; i++)
        free(a[i]);
}

/* h_{t-1} (or c_{t-1}) of row b: the state of step t-1, or the initial. */
static const double *
prev_row(const prob *p, const double *seq, const double *init, int t, int b)
{
    return t ? seq + ((size_t)(t - 1) * p->B + b) * p->H
             : init + (size_t)b * p->H;
}

/* One row of one step of the reference forward.  The xproj rows hold
 * W_ih x alone: b_ih is added here, b_hh with W_hh h. */
static void
ref_cell(const prob *p, int t, int b)
{
    int H = p->H, GH = p->G * p->H, u, k, q;
    size_t row = (size_t)t * p->B + b;
    const double *hp = prev_row(p, p->hs, p->h0, t, b);
    const double *cp = prev_row(p, p->cs, p->c0, t, b);
    const double *xr = p->xp + row * GH;
    double *h = p->hs + row * H, *c = p->cs + row * H, *y = p->y + row * H;
    double *s = p->sv + row * 4 * H, ig[4 * 512], hg[4 * 512];

    ck_assert_int_le(H, 512);
    if (t >= p->len[b]) {
        for (u = 0; u < H; u++) {
            h[u] = hp[u];
            c[u] = cp[u];
            y[u] = s[u] = s[H + u] = s[2 * H + u] = s[3 * H + u] = 0;
        }
        return;
    }
    for (q = 0; q < GH; q++) {
        ig[q] = xr[q] + p->bih[q];
        hg[q] = p->bhh[q];
        for (k = 0; k < H; k++)
            hg[q] += p->w[(size_t)q * H + k] * hp[k];
    }
    if (p->cell == CG__RNN_LSTM)
        memcpy(c, cp, (size_t)H * sizeof *c);
    rr_cell(p->cell, H, ig, hg, hp, c, h, s);
    memcpy(y, h, (size_t)H * sizeof *y);
}

static void
ref_forward(prob *p)
{
    int t, b;

    for (t = 0; t < p->T; t++)
        for (b = 0; b < p->B; b++)
            ref_cell(p, t, b);
}

/* The scalar whose gradients backward computes. */
static double
ref_loss(prob *p)
{
    size_t n = (size_t)p->B * p->H, last = (size_t)(p->T - 1) * n, i;
    double l = 0;

    ref_forward(p);
    for (i = 0; i < (size_t)p->T * n; i++)
        l += p->y[i] * p->dy[i];
    for (i = 0; i < n; i++) {
        l += p->hs[last + i] * p->dhn[i];
        if (p->cell == CG__RNN_LSTM)
            l += p->cs[last + i] * p->dcn[i];
    }
    return l;
}

/* The cell backward of row b at step t: dgates and dc in place; returns
 * the direct part of dh_{t-1} per unit in direct[]. */
static void
ref_cell_backward(prob *p, int t, int b, const double *dh, double *dc,
                  double *direct)
{
    int H = p->H, G = p->G, u;
    size_t row = (size_t)t * p->B + b;
    const double *s = p->sv + row * 4 * H;
    double *g = p->dg + row * G * H, *gi = p->dgi + row * G * H;

    for (u = 0; u < H; u++) {
        double d = dh[u] + p->dy[row * H + u];

        direct[u] = 0;
        if (p->cell == CG__RNN_LSTM) {
            double i_ = s[u], f = s[H + u], gg = s[2 * H + u];
            double o = s[3 * H + u], tc = tanh(p->cs[row * H + u]);
            double dcv = dc[u] + d * o * (1 - tc * tc);

            g[u] = dcv * gg * i_ * (1 - i_);
            g[H + u] = dcv * prev_row(p, p->cs, p->c0, t, b)[u] * f * (1 - f);
            g[2 * H + u] = dcv * i_ * (1 - gg * gg);
            g[3 * H + u] = d * tc * o * (1 - o);
            dc[u] = dcv * f;
        } else if (p->cell == CG__RNN_GRU) {
            double r = s[u], z = s[H + u], n = s[2 * H + u];
            double hp = prev_row(p, p->hs, p->h0, t, b)[u];
            double dnp = d * (1 - z) * (1 - n * n);

            gi[u] = g[u] = dnp * s[3 * H + u] * r * (1 - r);
            gi[H + u] = g[H + u] = d * (hp - n) * z * (1 - z);
            gi[2 * H + u] = dnp;
            g[2 * H + u] = dnp * r;
            direct[u] = d * z;
        } else {
            double h = p->hs[row * H + u];

            g[u] = p->cell == CG__RNN_RELU ? (h > 0 ? d : 0) : d * (1 - h * h);
        }
    }
}

static void
ref_backward(prob *p)
{
    int B = p->B, H = p->H, GH = p->G * p->H, t, b, u, j;
    double *dh = p->dh0, *dc = p->dc0, direct[512];

    ck_assert_int_le(H, 512);
    memcpy(dh, p->dhn, (size_t)B * H * sizeof *dh);
    memcpy(dc, p->dcn, (size_t)B * H * sizeof *dc);
    for (t = p->T - 1; t >= 0; t--)
        for (b = 0; b < B; b++) {
            double *dhb = dh + (size_t)b * H;
            const double *g = p->dg + ((size_t)t * B + b) * GH;

            if (t >= p->len[b])
                continue;       /* dgates stay zero, dh and dc pass */
            ref_cell_backward(p, t, b, dhb, dc + (size_t)b * H, direct);
            for (u = 0; u < H; u++) {
                dhb[u] = direct[u];
                for (j = 0; j < GH; j++)
                    dhb[u] += g[j] * p->w[(size_t)j * H + u];
            }
        }
}

/* ------------------------------------------------------------ device */

static cg_buffer *
upload(cg_context *ctx, const double *src, size_t n, size_t off, size_t ld,
       size_t rows, size_t cols)
{
    size_t total = off + (rows ? (rows - 1) * ld + cols : 0) + 1, i;
    float *f = calloc(total, sizeof *f);
    cg_buffer *buf;

    ck_assert_ptr_nonnull(f);
    for (i = 0; src && i < n; i++)
        f[off + i / cols * ld + i % cols] = (float)src[i];
    buf = cg_buffer_new(ctx, total * sizeof *f);
    ck_assert_msg(buf != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_buffer_write(buf, 0, f, total * sizeof *f), CG_OK);
    free(f);
    return buf;
}

static cg_buffer *
dense(cg_context *ctx, const double *src, size_t n)
{
    return upload(ctx, src, n, 0, 1, n, 1);
}

/* n floats of buf (rows of cols with stride ld after off) into a new array. */
static float *
download(cg_buffer *buf, size_t off, size_t ld, size_t rows, size_t cols)
{
    size_t total = cg_buffer_size(buf) / sizeof(float), i;
    float *all = malloc(total * sizeof *all);
    float *out = malloc((rows * cols > 0 ? rows * cols : 1) * sizeof *out);

    ck_assert(all && out);
    ck_assert_int_eq(cg_buffer_read(buf, 0, all, total * sizeof *all), CG_OK);
    for (i = 0; i < rows * cols; i++)
        out[i] = all[off + i / cols * ld + i % cols];
    free(all);
    return out;
}

static cg__rnn_buf
at(cg_buffer *b, size_t off)
{
    cg__rnn_buf r = { b ? cg__buffer_mem(b) : NULL, (cl_int)off };

    return r;
}

/* Runs the problem on the device: T forward steps, then T + 1 backward
 * launches, checking the launch counts (one per step, one more). */
static void
dev_run(const prob *p, const cg__rnn_tune *tune, devout *d)
{
    cg_context *ctx = tt_ctx();
    int T = p->T, B = p->B, H = p->H, G = p->G, GH = G * H, ldx = GH + XPAD;
    int ldy = H + YPAD, t, hp;
    size_t bh = (size_t)B * H, tb = (size_t)T * B;
    cg_buffer *xp, *w, *wt, *wp, *bih, *bhh, *h0, *c0, *hs, *cs, *sv, *y, *len;
    cg_buffer *dy, *dh, *dc, *dg, *dgi;
    cg__rnn_step s;
    uint64_t k0;

    ck_assert_msg(cg__rnn_step_init(&s, ctx, p->cell, tune) == CG_OK, "%s",
                  TT_ERR);
    hp = cg__rnn_hpad(&s, H);
    xp = upload(ctx, p->xp, tb * GH, 0, ldx, tb, GH);
    w = upload(ctx, p->w, (size_t)GH * H, WOFF, H, GH, H);
    bih = upload(ctx, p->bih, GH, BOFF, GH, 1, GH);
    bhh = upload(ctx, p->bhh, GH, BOFF, GH, 1, GH);
    wt = dense(ctx, NULL, (size_t)H * G * hp);
    wp = dense(ctx, NULL, (size_t)GH * hp);
    h0 = dense(ctx, p->h0, bh);
    c0 = dense(ctx, p->c0, bh);
    hs = dense(ctx, NULL, tb * H);
    cs = dense(ctx, NULL, tb * H);
    sv = dense(ctx, NULL, tb * 4 * H);
    y = upload(ctx, NULL, 0, YOFF, ldy, tb, H);
    dy = upload(ctx, p->dy, tb * H, YOFF, ldy, tb, H);
    dh = dense(ctx, p->dhn, bh);
    dc = dense(ctx, p->dcn, bh);
    dg = dense(ctx, NULL, tb * GH);
    dgi = dense(ctx, NULL, tb * GH);
    len = cg_buffer_new(ctx, (size_t)B * sizeof(int));
    ck_assert_ptr_nonnull(len);
    ck_assert_int_eq(cg_buffer_write(len, 0, p->len, (size_t)B * sizeof(int)),
                     CG_OK);
    ck_assert_msg(cg__rnn_pack_whh(&s, at(w, WOFF), H, cg__buffer_mem(wt),
                                   cg__buffer_mem(wp)) == CG_OK, "%s", TT_ERR);

    k0 = ctx->stats.kernels_enqueued;
    for (t = 0; t < T; t++) {
        cg__rnn_fwd_args f;

        memset(&f, 0, sizeof f);
        f.B = B, f.H = H, f.t = t;
        f.lengths = p->varlen ? cg__buffer_mem(len) : NULL;
        f.whh_t = cg__buffer_mem(wt);
        f.xproj.mem = cg__buffer_mem(xp);
        f.xproj.off = (cl_int)((size_t)t * B * ldx);
        f.xproj.ld = ldx;
        f.b_ih = at(bih, BOFF);
        f.b_hh = at(bhh, BOFF);
        f.h_prev = t ? at(hs, (t - 1) * bh) : at(h0, 0);
        f.h_next = at(hs, t * bh);
        f.c_prev = t ? at(cs, (t - 1) * bh) : at(c0, 0);
        f.c_next = at(cs, t * bh);
        f.y.mem = cg__buffer_mem(y);
        f.y.off = (cl_int)(YOFF + (size_t)t * B * ldy);
        f.y.ld = ldy;
        f.saved = at(sv, t * bh * 4);
        ck_assert_msg(cg__rnn_forward_step(&s, &f) == CG_OK, "%s", TT_ERR);
    }
    ck_assert_uint_eq(ctx->stats.kernels_enqueued - k0, T);

    k0 = ctx->stats.kernels_enqueued;
    for (t = T - 1; t >= -1; t--) {
        cg__rnn_bwd_args b;

        memset(&b, 0, sizeof b);
        b.B = B, b.H = H, b.t = t;
        b.lengths = p->varlen ? cg__buffer_mem(len) : NULL;
        b.whh_p = cg__buffer_mem(wp);
        if (t < T - 1)
            b.dg_next = at(dg, (t + 1) * bh * G);
        b.dy.mem = cg__buffer_mem(dy);
        b.dy.off = (cl_int)(YOFF + (size_t)(t < 0 ? 0 : t) * B * ldy);
        b.dy.ld = ldy;
        b.dh = cg__buffer_mem(dh);
        b.dc = cg__buffer_mem(dc);
        if (t >= 0) {
            b.saved = at(sv, t * bh * 4);
            b.h_prev = t ? at(hs, (t - 1) * bh) : at(h0, 0);
            b.h_t = at(hs, t * bh);
            b.c_prev = t ? at(cs, (t - 1) * bh) : at(c0, 0);
            b.c_t = at(cs, t * bh);
            b.dg = at(dg, t * bh * G);
            b.dgi = at(dgi, t * bh * G);
        }
        ck_assert_msg(cg__rnn_backward_step(&s, &b) == CG_OK, "%s", TT_ERR);
    }
    ck_assert_uint_eq(ctx->stats.kernels_enqueued - k0, T + 1);

    d->hs = download(hs, 0, H, tb, H);
    d->cs = download(cs, 0, H, tb, H);
    d->sv = download(sv, 0, 4 * H, tb, 4 * H);
    d->y = download(y, YOFF, ldy, tb, H);
    d->dg = download(dg, 0, GH, tb, GH);
    d->dgi = download(dgi, 0, GH, tb, GH);
    d->dh0 = download(dh, 0, H, B, H);
    d->dc0 = download(dc, 0, H, B, H);
    {
        cg_buffer *all[] = { xp, w, wt, wp, bih, bhh, h0, c0, hs, cs, sv, y, len,
                             dy, dh, dc, dg, dgi };
        size_t i;

        for (i = 0; i < sizeof all / sizeof *all; i++)
            cg_buffer_free(all[i]);
    }
    cg__rnn_step_release(&s);
}

static void
devout_free(devout *d)
{
    free(d->hs);
    free(d->cs);
    free(d->sv);
    free(d->y);
    free(d->dg);
    free(d->dgi);
    free(d->dh0);
    free(d->dc0);
}

/* Asserts max |a - ref| / (1 + |ref|) <= tol over n values. */
static void
expect_close(const char *what, const prob *p, const float *a,
             const double *ref, size_t n, double tol)
{
    double worst = 0;
    size_t i, wi = 0;

    for (i = 0; i < n; i++) {
        double e = fabs(a[i] - ref[i]) / (1 + fabs(ref[i]));

        if (!(e <= worst)) {
            worst = e;
            wi = i;
        }
    }
    ck_assert_msg(worst <= tol, "cell %d T=%d B=%d H=%d: %s[%zu] = %.9g, "
                  "reference %.9g (error %.3g > %.3g)", (int)p->cell, p->T,
                  p->B, p->H, what, wi, n ? a[wi] : 0.0, n ? ref[wi] : 0.0,
                  worst, tol);
}

/* Kernel results against the reference forward and backward. */
static void
compare(prob *p, const devout *d)
{
    size_t tb = (size_t)p->T * p->B, bh = (size_t)p->B * p->H;
    size_t gh = (size_t)p->G * p->H;

    ref_forward(p);
    ref_backward(p);
    expect_close("h", p, d->hs, p->hs, tb * p->H, TOL);
    expect_close("y", p, d->y, p->y, tb * p->H, TOL);
    if (p->cell == CG__RNN_LSTM)
        expect_close("c", p, d->cs, p->cs, tb * p->H, TOL);
    if (p->cell == CG__RNN_LSTM || p->cell == CG__RNN_GRU)
        expect_close("saved", p, d->sv, p->sv, tb * 4 * p->H, TOL);
    expect_close("dgates", p, d->dg, p->dg, tb * gh, TOL);
    if (p->cell == CG__RNN_GRU)
        expect_close("dgates_ih", p, d->dgi, p->dgi, tb * gh, TOL);
    expect_close("dh0", p, d->dh0, p->dh0, bh, TOL);
    if (p->cell == CG__RNN_LSTM)
        expect_close("dc0", p, d->dc0, p->dc0, bh, TOL);
}

static void
check_case(cg__rnn_cell cell, int T, int B, int H, const int *len,
           const cg__rnn_tune *tune)
{
    prob p;
    devout d;

    prob_init(&p, cell, T, B, H, len);
    dev_run(&p, tune, &d);
    compare(&p, &d);
    devout_free(&d);
    prob_free(&p);
}

static const cg__rnn_cell cells[] = {
    CG__RNN_TANH, CG__RNN_RELU, CG__RNN_LSTM, CG__RNN_GRU
};
#define NCELLS 4

START_TEST(steps_match_reference_on_odd_sizes)
{
    static const int Hs[] = { 3, 5, 33, 0 }, Bs[] = { 1, 7, 32, 0 };
    int i, j;

    for (i = 0; i < 3; i++)
        for (j = 0; j < 3; j++)
            check_case(cells[_i], 3, Bs[j], Hs[i], NULL, NULL);
}
END_TEST

START_TEST(steps_match_reference_at_h256_b32)
{
    check_case(cells[_i], 2, 32, 256, NULL, NULL);
}
END_TEST

START_TEST(variable_lengths_hold_state_and_zero_output)
{
    static const int len7[] = { 3, 1, 2, 3, 3, 2, 1 };
    prob p;
    devout d;
    int t, b, u;

    check_case(cells[_i], 3, 7, 33, len7, NULL);
    prob_init(&p, cells[_i], 3, 7, 5, len7);
    dev_run(&p, NULL, &d);
    for (t = 0; t < 3; t++)
        for (b = 0; b < 7; b++)
            for (u = 0; t >= len7[b] && u < 5; u++) {
                size_t i = ((size_t)t * 7 + b) * 5 + u;

                ck_assert(d.y[i] == 0.0f);
                ck_assert(d.hs[i] == d.hs[i - 7 * 5]);
            }
    devout_free(&d);
    prob_free(&p);
}
END_TEST

/* Central difference of the reference loss in *v. */
static double
fd(prob *p, double *v)
{
    double save = *v, lp, lm;

    *v = save + FD_EPS;
    lp = ref_loss(p);
    *v = save - FD_EPS;
    lm = ref_loss(p);
    *v = save;
    return (lp - lm) / (2 * FD_EPS);
}

static void
fd_expect(const prob *p, const char *what, size_t i, double analytic,
          double numeric)
{
    ck_assert_msg(fabs(analytic - numeric) <= FD_TOL * (1 + fabs(numeric)),
                  "cell %d T=%d B=%d H=%d varlen %d: d loss / d %s[%zu]: "
                  "kernel %.9g, finite difference %.9g", (int)p->cell, p->T,
                  p->B, p->H, p->varlen, what, i, analytic, numeric);
}

/* Every input's gradient from the kernels' backward (W_hh and the biases
 * assembled as the layer will: sums over steps of dgates x h_{t-1} and of
 * dgates; GRU's b_ih from dgi, its b_hh from dg)
 * against finite differences through the reference forward; every
 * `step`-th element of each input (each difference costs two reference
 * runs). */
static void
gradcheck(cg__rnn_cell cell, int T, int B, int H, const int *len, int step)
{
    prob p;
    devout d;
    size_t tb, gh, bh, i;
    int t, b;

    prob_init(&p, cell, T, B, H, len);
    dev_run(&p, NULL, &d);
    tb = (size_t)T * B, gh = (size_t)p.G * H, bh = (size_t)B * H;
    for (i = 0; i < tb * gh; i += step)
        fd_expect(&p, "xproj", i, cell == CG__RNN_GRU ? d.dgi[i] : d.dg[i],
                  fd(&p, &p.xp[i]));
    for (i = 0; i < gh * H; i += step) {
        size_t j = i / H, k = i % H;
        double g = 0;

        for (t = 0; t < T; t++)
            for (b = 0; b < B; b++) {
                size_t row = (size_t)t * B + b;
                double hp = t ? d.hs[row * H - bh + k] : p.h0[b * H + k];

                g += d.dg[row * gh + j] * hp;
            }
        fd_expect(&p, "W_hh", i, g, fd(&p, &p.w[i]));
    }
    for (i = 0; i < gh; i += step) {
        const float *gi = cell == CG__RNN_GRU ? d.dgi : d.dg;
        double g = 0, g_i = 0;

        for (t = 0; t < (int)tb; t++) {
            g += d.dg[t * gh + i];
            g_i += gi[t * gh + i];
        }
        fd_expect(&p, "b_ih", i, g_i, fd(&p, &p.bih[i]));
        fd_expect(&p, "b_hh", i, g, fd(&p, &p.bhh[i]));
    }
    for (i = 0; i < bh; i += step) {
        fd_expect(&p, "h0", i, d.dh0[i], fd(&p, &p.h0[i]));
        if (cell == CG__RNN_LSTM)
            fd_expect(&p, "c0", i, d.dc0[i], fd(&p, &p.c0[i]));
    }
    devout_free(&d);
    prob_free(&p);
}

START_TEST(gradients_match_finite_differences)
{
    static const int len3[] = { 4, 2, 1, 0 };

    gradcheck(cells[_i], 1, 3, 3, NULL, 1);
    gradcheck(cells[_i], 4, 3, 3, NULL, 1);
    gradcheck(cells[_i], 1, 2, 5, NULL, 1);
    gradcheck(cells[_i], 4, 3, 5, NULL, 1);
    gradcheck(cells[_i], 4, 3, 3, len3, 1);
}
END_TEST

START_TEST(gradients_match_finite_differences_h33_b7)
{
    /* A prime stride samples every row, unit and gate. */
    gradcheck(cells[_i], 2, 7, 33, NULL, 29);
}
END_TEST

/* Every vector width, several rows per item and work-group sizes. */
START_TEST(every_tuning_variant_matches)
{
    static const cg__rnn_tune tunes[] = {
        { 1, 1, 64, 0 }, { 2, 3, 16, 0 }, { 8, 1, 32, 0 }, { 16, 4, 128, 0 },
        { 4, 8, 8, 0 },
    };
    static const int len7[] = { 3, 1, 2, 3, 3, 2, 1 };
    size_t i, n = sizeof tunes / sizeof *tunes;

    /* Under a memory checker two variants cover the code paths. */
    if (tt_checker())
        n = 2;
    for (i = 0; i < n; i++) {
        check_case(cells[_i], 3, 7, 33, NULL, &tunes[i]);
        check_case(cells[_i], 3, 7, 33, len7, &tunes[i]);
    }
}
END_TEST

START_TEST(bad_tuning_is_rejected)
{
    static const cg__rnn_tune bad[] = {
        { 3, 1, 64, 0 }, { 4, -1, 64, 0 }, { 4, 9, 64, 0 }, { 4, 1, 512, 0 },
    };
    cg__rnn_step s;
    size_t i;

    for (i = 0; i < sizeof bad / sizeof *bad; i++) {
        ck_assert_int_eq(cg__rnn_step_init(&s, tt_ctx(), CG__RNN_LSTM,
                                           &bad[i]), CG_EINVAL);
        ck_assert_ptr_null(s.fwd);
    }
    cg__rnn_step_release(&s);
}
END_TEST

/* The tuner's timing of the step kernels runs every cell at odd sizes,
 * leaves the context usable, and rejects what it cannot time. */
START_TEST(step_timing_runs_and_rejects_bad_sizes)
{
    static const cg__rnn_tune other = { 4, 2, 8, 0 }, bad = { 3, 1, 8, 0 };
    /* Under a memory checker, no extra build (each takes minutes). */
    const cg__rnn_tune *tune = tt_checker() ? NULL : &other;
    cg_context *ctx = tt_ctx();
    double f = -1, b = -1;

    ck_assert_msg(cg__rnn_time_steps(ctx, cells[_i], tune, 3, 5, 2, &f,
                                     &b) == CG_OK, "%s", TT_ERR);
    ck_assert(f > 0 && b > 0);
    ck_assert_msg(cg__rnn_time_steps(ctx, cells[_i], NULL, 1, 1, 1, &f,
                                     &b) == CG_OK, "%s", TT_ERR);
    ck_assert_int_eq(cg__rnn_time_steps(ctx, cells[_i], tune, 0, 5, 2, &f,
                                        &b), CG_EINVAL);
    ck_assert_int_eq(cg__rnn_time_steps(ctx, cells[_i], tune, 3, 5, 0, &f,
                                        &b), CG_EINVAL);
    ck_assert_int_eq(cg__rnn_time_steps(ctx, cells[_i], &bad, 3, 5, 2, &f,
                                        &b), CG_EINVAL);
    /* Sizes whose buffers overflow int (issue 16): H * G * hpad and
     * B * H * G, refused before anything is computed or allocated. */
    ck_assert_int_eq(cg__rnn_time_steps(ctx, cells[_i], tune, 1, INT_MAX,
                                        1, &f, &b), CG_ESHAPE);
    ck_assert_msg(strstr(TT_ERR, "more than 2^31-1 floats") != NULL, "%s",
                  TT_ERR);
    ck_assert_int_eq(cg__rnn_time_steps(ctx, cells[_i], tune, 1, 65536, 1,
                                        &f, &b), CG_ESHAPE);
    ck_assert_int_eq(cg__rnn_time_steps(ctx, cells[_i], tune, INT_MAX, 2, 1,
                                        &f, &b), CG_ESHAPE);
    ck_assert_int_eq(cg_context_finish(ctx), CG_OK);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("rnn_step");
    TCase *tc = tcase_create("rnn_step");

    tt_require_device();
    tcase_set_timeout(tc, 0);
    tcase_add_loop_test(tc, steps_match_reference_on_odd_sizes, 0, NCELLS);
    /* Numerics at a real size; too slow under a memory checker. */
    if (!tt_checker())
        tcase_add_loop_test(tc, steps_match_reference_at_h256_b32, 0,
                            NCELLS);
    tcase_add_loop_test(tc, variable_lengths_hold_state_and_zero_output, 0,
                        NCELLS);
    tcase_add_loop_test(tc, gradients_match_finite_differences, 0, NCELLS);
    tcase_add_loop_test(tc, gradients_match_finite_differences_h33_b7, 0,
                        NCELLS);
    tcase_add_loop_test(tc, every_tuning_variant_matches, 0, NCELLS);
    tcase_add_test(tc, bad_tuning_is_rejected);
    tcase_add_loop_test(tc, step_timing_runs_and_rejects_bad_sizes, 0,
                        NCELLS);
    suite_add_tcase(s, tc);
    return tt_run(s);
}
