/* SPDX-License-Identifier: MIT */
/*
 * tools/tune_conv.c - clgrad-tune's stage "conv": for each shape class of
 * a 2-D convolution (lib/tune/conv_class.c: fwd, bwd, and tfwd and tbwd
 * of a transposed convolution, times depthwise, small, large), which
 * algorithm - im2col + GEMM (algo 0) or the direct kernels of
 * kernels/conv.cl (algo 1) - runs a representative convolution of the
 * class fastest, written as the entry kernel "conv", shape the class
 * ("fwd.depthwise"), which lib/ops/conv.c and conv_transpose.c look up
 * per call; and, for im2col, whether it makes columns always ("shift" 0)
 * rather than reading stride-1 windows in place where its built-in rule
 * says so (tried where the class's convolution would).
 *
 * A class's convolution runs through cg_conv2d (cg_conv_transpose2d for
 * the transposed classes: the adjoint of the same convolution, from K to
 * C channels) as a layer calls it: the forward classes time y = conv(x,
 * w); the backward ones time a whole step, y = conv(x, w), sum(y * g)
 * and its backward, with the forward's algorithm left to its own class,
 * so that only the backward's differs between candidates.  First without
 * an entry (the built-in rule: the baseline), then with algo 0, algo 0
 * and shift 0, and algo 1.  Every candidate's y (or dx and dW) is
 * compared with a double-precision convolution on the host before its
 * time counts; the faster verified candidate is written, also when it
 * is the rule's choice, so that the database says what was measured.
 * Last, conv1d's class "fwd1d.long" (tune_conv_fft.c): the kernel length
 * from which conv1d runs by FFT.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tune.h"
#include "core/internal.h"
#include "ops/conv_internal.h"

#define MAX_REPS 5
#define MAX_INNER 64
#define SAMPLE_S 0.02       /* a timed sample runs the convolution this long */
#define WARM_S 0.2

/* The representative convolution of each kind: N, C, H, W, K, groups, a
 * 3x3 kernel with padding 1 and stride 1. */
static const struct {
    const char *kind;
    int N, C, H, W, K, G;
    const char *what;
} reps[] = {
    { "depthwise", 8, 64, 28, 28, 64, 64, "a MobileNet block's 3x3" },
    { "small", 8, 3, 32, 32, 16, 1, "a first layer on RGB" },
    { "large", 8, 32, 14, 14, 32, 1, "a middle layer" },
};
#define NREPS (int)(sizeof reps / sizeof reps[0])
#define RS 3

static const char *const dir_names[4] = { "fwd", "bwd", "tfwd", "tbwd" };

/* One class's convolution: tensors, host copies, references.  xs and ys
 * are the convolution's input and output shapes (a transposed one's
 * output and input); nin and nout the op's input and output sizes. */
typedef struct cwork {
    int i, bwd, tr;
    int64_t xs[4], ws[4], ys[4];
    size_t nx, nw, ny, nin, nout;
    cg_tensor *x, *w, *g;
    float *out;             /* y, or dx then dW, read back */
    double *ref;            /* the same in double */
    double scale[2];        /* max |ref| of each part */
    cg_conv_options o;
    cg_conv_transpose_options ot;
} cwork;

static void
cwork_free(cwork *c)
{
    cg_tensor_free(c->x);
    cg_tensor_free(c->w);
    cg_tensor_free(c->g);
    free(c->out);
    free(c->ref);
    memset(c, 0, sizeof *c);
}

static cg_tensor *
upload(cg_context *ctx, const int64_t *shape, const float *v, int grad)
{
    cg_tensor *t = cg_tensor_from_host(ctx, CG_F32, 4, shape, v);

    if (t && grad && cg_tensor_set_requires_grad(t, 1) != CG_OK) {
        cg_tensor_free(t);
        return NULL;
    }
    return t;
}

/* The double references: y = op(x, w), or dx and dW of sum(y * g), op
 * the convolution or its transpose; a is the convolution's input-shaped
 * array (x, or a transposed one's g), b its output-shaped one (g, or a
 * transposed one's x). */
static void
reference(cwork *c, const float *a, const float *hw, const float *b)
{
    int N = reps[c->i].N, C = reps[c->i].C, H = reps[c->i].H;
    int W = reps[c->i].W, K = reps[c->i].K, G = reps[c->i].G;
    int Cg = C / G, Kg = K / G, n, k, oh, ow, cg, r, s, h, wi;
    double *y = c->ref, *dw = c->ref + c->nin;

    for (n = 0; n < N; n++)
        for (k = 0; k < K; k++)
            for (oh = 0; oh < H; oh++)
                for (ow = 0; ow < W; ow++) {
                    size_t yi = (((size_t)n * K + k) * H + oh) * W + ow;

                    for (cg = 0; cg < Cg; cg++)
                        for (r = 0; r < RS; r++)
                            for (s = 0; s < RS; s++) {
                                size_t xi, wj;

                                h = oh - 1 + r;
                                wi = ow - 1 + s;
                                if (h < 0 || h >= H || wi < 0 || wi >= W)
                                    continue;
                                xi = (((size_t)n * C + k / Kg * Cg + cg) * H
                                      + h) * W + wi;
                                wj = (((size_t)k * Cg + cg) * RS + r) * RS
                                     + s;
                                /* the convolution (y, or a transposed
                                 * one's dx), or its adjoint (dx, or a
                                 * transposed one's y) */
                                if (c->tr == c->bwd)
                                    y[yi] += (double)a[xi] * hw[wj];
                                else
                                    y[xi] += (double)b[yi] * hw[wj];
                                if (c->bwd)
                                    dw[wj] += (double)b[yi] * a[xi];
                            }
                }
}

/* Makes the tensors of class (i, dir) and the references. */
static int
cwork_init(cg_context *ctx, cwork *c, int i, int dir)
{
    float *hx = NULL, *hw = NULL, *hg = NULL;
    uint64_t seed = 4242;
    size_t j, nref;
    int status = CG_OK;

    memset(c, 0, sizeof *c);
    c->i = i;
    c->bwd = dir % 2;
    c->tr = dir >= 2;
    c->xs[0] = c->ys[0] = reps[i].N;
    c->xs[1] = reps[i].C;
    c->ys[1] = c->ws[0] = reps[i].K;
    c->xs[2] = c->ys[2] = reps[i].H;
    c->xs[3] = c->ys[3] = reps[i].W;
    c->ws[1] = reps[i].C / reps[i].G;
    c->ws[2] = c->ws[3] = RS;
    c->nx = (size_t)(c->xs[0] * c->xs[1] * c->xs[2] * c->xs[3]);
    c->nw = (size_t)(c->ws[0] * c->ws[1] * c->ws[2] * c->ws[3]);
    c->ny = (size_t)(c->ys[0] * c->ys[1] * c->ys[2] * c->ys[3]);
    c->nin = c->tr ? c->ny : c->nx;
    c->nout = c->tr ? c->nx : c->ny;
    c->o.padding[0] = c->o.padding[1] = 1;
    c->o.groups = reps[i].G;
    c->ot.padding[0] = c->ot.padding[1] = 1;
    c->ot.groups = reps[i].G;
    nref = c->bwd ? c->nin + c->nw : c->nout;
    hx = malloc(c->nin * sizeof *hx);
    hw = malloc(c->nw * sizeof *hw);
    hg = malloc(c->nout * sizeof *hg);
    c->out = malloc(nref * sizeof *c->out);
    c->ref = calloc(nref, sizeof *c->ref);
    if (!hx || !hw || !hg || !c->out || !c->ref) {
        status = cg__error(CG_EHOSTMEM, "conv: out of host memory");
        goto out;
    }
    for (j = 0; j < c->nin; j++)
        hx[j] = (float)(cg_splitmix64_uniform(&seed) * 2 - 1);
    for (j = 0; j < c->nw; j++)
        hw[j] = (float)(cg_splitmix64_uniform(&seed) * 2 - 1);
    for (j = 0; j < c->nout; j++)
        hg[j] = (float)(cg_splitmix64_uniform(&seed) * 2 - 1);
    if (c->tr)
        reference(c, hg, hw, hx);
    else
        reference(c, hx, hw, hg);
    for (j = 0; j < nref; j++) {
        int part = c->bwd && j >= c->nin;

        c->scale[part] = fmax(c->scale[part], fabs(c->ref[j]));
    }
    c->x = upload(ctx, c->tr ? c->ys : c->xs, hx, c->bwd);
    c->w = c->x ? upload(ctx, c->ws, hw, c->bwd) : NULL;
    c->g = c->w && c->bwd ? upload(ctx, c->tr ? c->xs : c->ys, hg, 0)
                          : NULL;
    if (!c->x || !c->w || (c->bwd && !c->g))
        status = cg__last_status();
out:
    free(hx);
    free(hw);
    free(hg);
    return status;
}

/* One forward, or one forward and backward; with `check`, the results
 * into c->out. */
static int
cwork_run(cwork *c, int check)
{
    cg_tensor *y = c->tr ? cg_conv_transpose2d(c->x, c->w, NULL, &c->ot)
                         : cg_conv2d(c->x, c->w, NULL, &c->o);
    cg_tensor *yg = NULL, *s = NULL;
    int status = y ? CG_OK : cg__last_status();

    if (status == CG_OK && !c->bwd && check)
        status = cg_tensor_to_host(y, c->out, c->nout * sizeof(float));
    if (status == CG_OK && c->bwd) {
        yg = cg_mul(y, c->g);
        s = yg ? cg_sum(yg, 0, NULL, 0) : NULL;
        cg_tensor_zero_grad(c->x);
        cg_tensor_zero_grad(c->w);
        status = s ? cg_backward(s, NULL, 0) : cg__last_status();
        if (status == CG_OK && check)
            status = cg_tensor_to_host(cg_tensor_grad(c->x), c->out,
                                       c->nin * sizeof(float));
        if (status == CG_OK && check)
            status = cg_tensor_to_host(cg_tensor_grad(c->w),
                                       c->out + c->nin,
                                       c->nw * sizeof(float));
    }
    cg_tensor_free(s);
    cg_tensor_free(yg);
    cg_tensor_free(y);
    return status;
}

/* The largest |out - ref| over max |ref|, of y or of dx and dW apart. */
static double
cwork_error(const cwork *c)
{
    size_t j, n = c->bwd ? c->nin + c->nw : c->nout;
    double err = 0;

    for (j = 0; j < n; j++) {
        int part = c->bwd && j >= c->nin;
        double d = fabs((double)c->out[j] - c->ref[j]);

        if (isnan(d))
            return INFINITY;
        err = fmax(err, c->scale[part] > 0 ? d / c->scale[part] : d);
    }
    return err;
}

/* One timed run, for tu_time. */
static int
timed_run(cg_context *ctx, void *c)
{
    (void)ctx;
    return cwork_run(c, 0);
}

/* Puts p in force (NULL: no entry), runs once and checks (*err), then
 * times up to MAX_REPS samples of *inner runs: *us the median per run. */
static int
measure(tu_run *r, cwork *c, const tu_params *p, int *inner, double *us,
        double *err, char *why, size_t whylen)
{
    int status;

    status = p ? cg_context_set_tuning(r->ctx, p)
               : cg_context_clear_tuning(r->ctx);
    if (status == CG_OK)
        status = cwork_run(c, 1);
    if (status == CG_OK)
        *err = cwork_error(c);
    if (status != CG_OK) {
        snprintf(why, whylen, "%s", cg_last_error());
        return status;
    }
    return tu_time(r, timed_run, c, SAMPLE_S, MAX_INNER, MAX_REPS, inner,
                   us, why, whylen);
}

/* The candidates: im2col by the built-in rule for stride-1 windows read
 * in place, im2col with columns always ("shift" 0), the direct kernels. */
static const struct {
    int algo, shift;        /* shift -1: no "shift" in the entry */
} cands[] = { { 0, -1 }, { 0, 0 }, { 1, -1 } };
#define NCANDS (int)(sizeof cands / sizeof cands[0])

/* Whether direction dir of class i reads stride-1 windows in place where
 * im2col runs it: else "shift" 0 is the same run as im2col and is not
 * tried.  The convolutions that direction runs by im2col: fwd the
 * forward (C to K channels); bwd dW's (C to K) and dx's (K to C); tfwd,
 * the transposed one's forward, dx's (K to C); tbwd dx's, a forward (C
 * to K), and dW's. */
static int
rep_shifts(cg_context *ctx, int i, int dir)
{
    cg__conv_geom g;
    int yes = 0, t;

    memset(&g, 0, sizeof g);
    g.N = reps[i].N;
    g.H = g.OH = reps[i].H;
    g.W = g.OW = reps[i].W;
    g.R = g.S = RS;
    g.sh = g.sw = g.dh = g.dw = g.ph = g.pw = 1;
    g.G = reps[i].G;
    for (t = dir == 2; t < (dir == 1 || dir == 2 ? 2 : 1) && !yes; t++) {
        g.C = t ? reps[i].K : reps[i].C;
        g.K = t ? reps[i].C : reps[i].K;
        if (cg__conv_shifts(ctx, &g, &yes) != CG_OK)
            return 0;
    }
    return yes;
}

/* Tunes class (i, dir); nonzero if it could not be tuned at all. */
static int
tune_class(tu_run *r, int i, int dir)
{
    char cls[32], hash[33], note[160], why[512];
    tu_params best, cand;
    cwork c;
    json_object *k;
    double def_us = 0, best_us = 0, err = 0, tol, t0, flop;
    int a, tried = 0, inner = 0, bwd = dir % 2, shifts;
    /* the sums of a forward: over Cg R S, or a transposed one's Kg R S */
    int per = (dir >= 2 ? reps[i].K : reps[i].C) / reps[i].G;

    snprintf(cls, sizeof cls, "%s.%s", dir_names[dir], reps[i].kind);
    flop = 2.0 * reps[i].N * reps[i].K * reps[i].H * reps[i].W *
           (reps[i].C / reps[i].G) * RS * RS * (bwd ? 3 : 1);
    /* float32 sums of up to N H W products (dW) */
    tol = 2e-6 * sqrt(bwd ? (double)reps[i].N * reps[i].H * reps[i].W
                          : (double)per * RS * RS);
    if (dir >= 2)
        snprintf(note, sizeof note, "conv_transpose2d N%d %d->%d %dx%d "
                 "3x3 groups %d (%s, transposed)%s: median of up to %d",
                 reps[i].N, reps[i].K, reps[i].C, reps[i].H, reps[i].W,
                 reps[i].G, reps[i].what,
                 bwd ? ", forward and backward" : "", MAX_REPS);
    else
        snprintf(note, sizeof note, "conv2d N%d C%d %dx%d K%d 3x3 groups %d "
                 "(%s)%s: median of up to %d", reps[i].N, reps[i].C,
                 reps[i].H, reps[i].W, reps[i].K, reps[i].G, reps[i].what,
                 bwd ? ", forward and backward" : "", MAX_REPS);
    k = tu_report_kernel(r, "conv", cls, note);
    memset(&c, 0, sizeof c);
    if (cg_kernel_source_hash("conv", hash) != CG_OK ||
        cwork_init(r->ctx, &c, i, dir) != CG_OK) {
        snprintf(why, sizeof why, "%s", cg_last_error());
        tu_say(r, "conv %s: %s", cls, why);
        tu_report_result(k, 0, NULL, 0, why);
        cwork_free(&c);
        return -1;
    }
    tu_progress(r, "conv", cls, 0, 0, 0, 0);
    cg_context_clear_tuning(r->ctx);
    for (t0 = tu_now(); tu_now() - t0 < WARM_S && !tu_stopped(r);)
        if (cwork_run(&c, 0) != CG_OK || cg_context_finish(r->ctx) != CG_OK)
            break;
    if (measure(r, &c, NULL, &inner, &def_us, &err, why, sizeof why) !=
        CG_OK || err > tol) {
        if (err > tol)
            snprintf(why, sizeof why, "the defaults do not verify: "
                     "relative error %.3g against the double reference",
                     err);
        tu_say(r, "conv %s: %s", cls, why);
        tu_report_result(k, 0, NULL, 0, why);
        cwork_free(&c);
        return -1;
    }
    shifts = rep_shifts(r->ctx, i, dir);
    for (a = 0; a < NCANDS; a++) {
        double us = 0, est = def_us * 1e-6 * inner * (MAX_REPS + 2);
        int st;

        if (cands[a].shift == 0 && !shifts)
            continue;
        tu_params_init(&cand, "conv", cls);
        snprintf(cand.source_hash, sizeof cand.source_hash, "%s", hash);
        tu_params_add(&cand, "algo", cands[a].algo);
        if (cands[a].shift >= 0)
            tu_params_add(&cand, "shift", cands[a].shift);
        if (!tu_fits(r, est)) {
            tu_report_candidate(k, &cand, 0, r->interrupted
                                ? "not tried: interrupted"
                                : "not tried: out of time", NULL);
            continue;
        }
        tu_progress(r, "conv", cls, a + 1, NCANDS, best_us, def_us);
        st = measure(r, &c, &cand, &inner, &us, &err, why, sizeof why);
        if (st == CG_OK && err > tol) {
            snprintf(why, sizeof why, "does not verify: relative error "
                     "%.3g against the double reference (at most %.3g)",
                     err, tol);
            st = -1;
        }
        if (st != CG_OK) {
            tu_report_candidate(k, &cand, 0, why, NULL);
            tu_say(r, "conv %s: algo=%d shift=%d: %s", cls,
                   cands[a].algo, cands[a].shift, why);
            continue;
        }
        tu_report_candidate(k, &cand, us, NULL, NULL);
        if (!tried++ || us < best_us) {
            best = cand;
            best_us = us;
        }
    }
    cwork_free(&c);
    cg_context_clear_tuning(r->ctx);
    if (tried && best_us >= def_us) {
        /* The built-in rule chose at least as well as any candidate
         * timed (or the faster one was not reached in time): no entry,
         * which could only pin a slower algorithm (on an H200, im2col
         * for depthwise 3x3 at 120 us against the rule's 10.5). */
        tu_report_result(k, def_us, NULL, 0, "the defaults are the "
                         "fastest (no entry)");
        tu_say(r, "conv %s: the defaults, %.2f GFLOP/s", cls,
               flop / def_us * 1e-3);
        return 0;
    }
    if (!tu_conclude(r, k, tried, &best, best_us, def_us, note))
        return 0;
    tu_say(r, "conv %s: %s, %.2f GFLOP/s (defaults %.2f)", cls,
           tu_params_get(&best, "algo", 0) ? "direct"
           : tu_params_get(&best, "shift", 1) ? "im2col"
                                              : "im2col, columns always",
           flop / best_us * 1e-3, flop / def_us * 1e-3);
    return 0;
}

int
tu_stage_conv(tu_run *r)
{
    double end = r->stage_end;
    int i, left = 4 * NREPS + 1, failed = 0;

    /* Each class gets an equal share of what is left; conv1d's
     * "fwd1d.long" (tune_conv_fft.c) comes last. */
    for (i = 0; i < 4 * NREPS && !tu_stopped(r); i++) {
        r->stage_end = tu_now() + (end - tu_now()) / left--;
        if (tune_class(r, i % NREPS, i / NREPS))
            failed = 1;
    }
    r->stage_end = end;
    if (!tu_stopped(r) && tu_conv_fft_class(r))
        failed = 1;
    cg_context_clear_tuning(r->ctx);
    return failed;
}
