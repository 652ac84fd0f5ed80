/* SPDX-License-Identifier: MIT */
/*
 * tools/tune_conv_fft.c - clgrad-tune's stage "conv", class "fwd1d.long":
 * from which kernel length on conv1d runs by FFT.  A long depthwise conv1d
 * (N1, 64 channels, length 4096, padding "same", the H3 / Hyena sequence
 * mixer) is timed forward and backward, by FFT (the entry algo 2,
 * min_kernel 1) and without it (algo 0: the other classes' choice,
 * direct for depthwise), at kernels of 16, 32, 64 ... 2048 taps, until
 * FFT has been the faster at two lengths in a row (its time does not
 * grow with the kernel, the direct one's does).  The crossover, the least
 * length from which FFT stays the faster, is written as algo 2 and
 * min_kernel; algo 0 if FFT never won.  Every candidate's y, dx and dW
 * are compared, at sampled elements, with a double-precision convolution
 * on the host before its time counts.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tune.h"
#include "core/internal.h"

#define FC 64
#define FL 4096
#define MIN_TAPS 16
#define MAX_TAPS 2048
#define REPS 3
#define SAMPLE_S 0.02
#define STRIDE 61           /* every 61st element is checked */

/* One kernel length's convolution: tensors and host copies. */
typedef struct fwork {
    int s;
    float *hx, *hw, *hg, *out;
    cg_tensor *x, *w, *g;
    cg_conv_options o;
} fwork;

static void
fwork_free(fwork *f)
{
    cg_tensor_free(f->x);
    cg_tensor_free(f->w);
    cg_tensor_free(f->g);
    free(f->hx);
    free(f->hw);
    free(f->hg);
    free(f->out);
    memset(f, 0, sizeof *f);
}

static cg_tensor *
up(cg_context *ctx, int64_t c, int64_t b, int64_t len, const float *v,
   int grad)
{
    int64_t s[3];
    cg_tensor *t;

    s[0] = c;
    s[1] = b;
    s[2] = len;
    t = cg_tensor_from_host(ctx, CG_F32, 3, s, v);
    if (t && grad && cg_tensor_set_requires_grad(t, 1) != CG_OK) {
        cg_tensor_free(t);
        return NULL;
    }
    return t;
}

static int
fwork_init(cg_context *ctx, fwork *f, int s)
{
    uint64_t seed = 777;
    size_t j;

    memset(f, 0, sizeof *f);
    f->s = s;
    f->o.groups = FC;
    f->o.padding_same = 1;
    f->hx = malloc(FC * FL * sizeof *f->hx);
    f->hg = malloc(FC * FL * sizeof *f->hg);
    f->hw = malloc((size_t)FC * s * sizeof *f->hw);
    f->out = malloc((2 * FC * FL + (size_t)FC * s) * sizeof *f->out);
    if (!f->hx || !f->hg || !f->hw || !f->out)
        return cg__error(CG_EHOSTMEM, "conv fwd1d.long: out of host memory");
    for (j = 0; j < FC * FL; j++) {
        f->hx[j] = (float)(cg_splitmix64_uniform(&seed) * 2 - 1);
        f->hg[j] = (float)(cg_splitmix64_uniform(&seed) * 2 - 1);
    }
    for (j = 0; j < (size_t)FC * s; j++)
        f->hw[j] = (float)(cg_splitmix64_uniform(&seed) * 2 - 1);
    f->x = up(ctx, 1, FC, FL, f->hx, 1);
    f->w = f->x ? up(ctx, FC, 1, s, f->hw, 1) : NULL;     /* [C, 1, S] */
    f->g = f->w ? up(ctx, 1, FC, FL, f->hg, 0) : NULL;
    return f->g ? CG_OK : cg__last_status();
}

/* One forward and backward; with `check`, y, dx and dW into f->out. */
static int
fwork_run(fwork *f, int check)
{
    cg_tensor *y = cg_conv1d(f->x, f->w, NULL, &f->o);
    int status = y ? CG_OK : cg__last_status();

    if (status == CG_OK && check)
        status = cg_tensor_to_host(y, f->out, FC * FL * sizeof(float));
    cg_tensor_zero_grad(f->x);
    cg_tensor_zero_grad(f->w);
    if (status == CG_OK)
        status = cg_backward(y, f->g, 0);
    if (status == CG_OK && check)
        status = cg_tensor_to_host(cg_tensor_grad(f->x), f->out + FC * FL,
                                   FC * FL * sizeof(float));
    if (status == CG_OK && check)
        status = cg_tensor_to_host(cg_tensor_grad(f->w), f->out + 2 * FC * FL,
                                   (size_t)FC * f->s * sizeof(float));
    cg_tensor_free(y);
    return status;
}

/* The largest error of the sampled elements of y, dx and dW over the
 * largest magnitude of each, against double sums; y[c, o] = sum_j x[c,
 * o - pl + j] w[c, j] with pl = (S - 1) / 2. */
static double
fwork_error(const fwork *f)
{
    int64_t S = f->s, pl = (S - 1) / 2, c, i, j, e;
    double err = 0;
    int part;

    for (part = 0; part < 3; part++) {
        int64_t n = part < 2 ? (int64_t)FC * FL : (int64_t)FC * S;
        const float *o = f->out + (part ? FC * FL : 0) +
                         (part == 2 ? FC * FL : 0);
        double big = 0, worst = 0;

        for (e = 0; e < n; e++)
            big = fmax(big, fabs(o[e]));
        for (e = part; e < n; e += STRIDE) {
            double acc = 0;

            if (part == 2) {            /* dW[c, j] = sum_o g x */
                c = e / S;
                j = e % S;
                for (i = 0; i < FL; i++)
                    if (i - pl + j >= 0 && i - pl + j < FL)
                        acc += (double)f->hg[c * FL + i] *
                               f->hx[c * FL + i - pl + j];
            } else {
                c = e / FL;
                i = e % FL;
                for (j = 0; j < S; j++) {
                    /* y: x at i - pl + j; dx: g at i + pl - j */
                    int64_t k = part ? i + pl - j : i - pl + j;

                    if (k >= 0 && k < FL)
                        acc += (double)(part ? f->hg : f->hx)[c * FL + k] *
                               f->hw[c * S + j];
                }
            }
            worst = fmax(worst, fabs(acc - o[e]));
        }
        if (isnan(worst))
            return INFINITY;
        err = fmax(err, big > 0 ? worst / big : worst);
    }
    return err;
}

/* Puts p in force, checks once (*err), then the median of REPS samples
 * per run (*us). */
static int
fmeasure(tu_run *r, fwork *f, const tu_params *p, double *us, double *err)
{
    double t[REPS], t0;
    int status = cg_context_set_tuning(r->ctx, p), i, j, inner = 1;

    if (status == CG_OK)
        status = fwork_run(f, 1);
    if (status == CG_OK)
        *err = fwork_error(f);
    if (status == CG_OK) {
        t0 = tu_now();
        status = fwork_run(f, 0);
        if (status == CG_OK)
            status = cg_context_finish(r->ctx);
        t0 = tu_now() - t0;
        inner = t0 <= 0 ? 16 : (int)ceil(SAMPLE_S / t0);
        inner = inner < 1 ? 1 : inner > 16 ? 16 : inner;
    }
    for (i = 0; i < REPS && status == CG_OK; i++) {
        t0 = tu_now();
        for (j = 0; j < inner && status == CG_OK; j++)
            status = fwork_run(f, 0);
        if (status == CG_OK)
            status = cg_context_finish(r->ctx);
        t[i] = (tu_now() - t0) / inner;
    }
    if (status == CG_OK)
        *us = tu_median(t, REPS) * 1e6;
    return status;
}

static void
candidate(tu_params *p, const char *hash, long algo, long taps)
{
    tu_params_init(p, "conv", "fwd1d.long");
    snprintf(p->source_hash, sizeof p->source_hash, "%s", hash);
    tu_params_add(p, "algo", algo);
    if (algo == 2)
        tu_params_add(p, "min_kernel", taps);
}

int
tu_conv_fft_class(tu_run *r)
{
    /* float32 sums of up to 4096 products, and the transforms' error */
    const double tol = 2e-6 * sqrt((double)FL);
    char hash[33], note[200], why[512];
    tu_params cand[2], best, shown;
    const char *dflt;
    json_object *k;
    fwork f;
    double us[2] = { 0, 0 }, err = 0, last_us[2] = { 0, 0 };
    int s, a, wins = 0, cross = 0, tried = 0, taps = 0, failed = 0;

    snprintf(note, sizeof note, "conv1d N1 C%d L%d depthwise, padding same, "
             "forward and backward, FFT (algo 2) against the rest (algo "
             "0), kernels %d to %d taps: median of %d", FC, FL, MIN_TAPS,
             MAX_TAPS, REPS);
    k = tu_report_kernel(r, "conv", "fwd1d.long", note);
    if (cg_kernel_source_hash("conv", hash) != CG_OK) {
        tu_report_result(k, 0, NULL, 0, cg_last_error());
        return -1;
    }
    for (s = MIN_TAPS; s <= MAX_TAPS && wins < 2 && !tu_stopped(r); s *= 2) {
        if (tried && !tu_fits(r, (last_us[0] + last_us[1]) * 4e-6 *
                                 (REPS + 3)))
            break;
        if (fwork_init(r->ctx, &f, s) != CG_OK) {
            snprintf(why, sizeof why, "%s", cg_last_error());
            fwork_free(&f);
            failed = 1;
            break;
        }
        tu_progress(r, "conv", "fwd1d.long", s, MAX_TAPS, 0, 0);
        for (a = 0; a < 2 && !failed; a++) {
            candidate(&cand[a], hash, a ? 2 : 0, 1);
            shown = cand[a];
            tu_params_add(&shown, "taps", s);
            if (fmeasure(r, &f, &cand[a], &us[a], &err) != CG_OK) {
                snprintf(why, sizeof why, "%s", cg_last_error());
                failed = 1;
            } else if (err > tol) {
                snprintf(why, sizeof why, "taps %d, %s: relative error %.3g "
                         "against the double reference (at most %.3g)", s,
                         a ? "fft" : "direct", err, tol);
                failed = 1;
            }
            tu_report_candidate(k, &shown, failed ? 0 : us[a],
                                failed ? why : NULL, NULL);
        }
        fwork_free(&f);
        cg_context_clear_tuning(r->ctx);
        if (failed)
            break;
        tried++;
        taps = s;
        last_us[0] = us[0];
        last_us[1] = us[1];
        if (us[1] < us[0]) {
            if (!wins++)
                cross = s;
            /* a clear win is enough: the direct time only grows */
            if (us[1] * 1.5 < us[0])
                wins = 2;
        } else {
            wins = 0;
            cross = 0;
        }
    }
    cg_context_clear_tuning(r->ctx);
    if (failed) {
        tu_say(r, "conv fwd1d.long: %s", why);
        tu_report_result(k, 0, NULL, 0, why);
        return -1;
    }
    if (!tried) {
        tu_report_result(k, 0, NULL, 0, "no candidate measured");
        return 0;
    }
    dflt = cg_conv1d_algorithm(r->ctx, 1, FC, FC, FC, taps);
    candidate(&best, hash, cross ? 2 : 0, cross);
    snprintf(note + strlen(note), sizeof note - strlen(note), "; times at "
             "%d taps", taps);
    /* the times at the longest kernel measured; the defaults' is the
     * built-in crossover's choice there */
    tu_conclude(r, k, tried, &best, fmin(last_us[0], last_us[1]),
                last_us[dflt && strcmp(dflt, "fft") == 0], note);
    if (cross)
        tu_say(r, "conv fwd1d.long: FFT from %d taps on (at %d: %.0f us, "
               "direct %.0f us)", cross, taps, last_us[1], last_us[0]);
    else
        tu_say(r, "conv fwd1d.long: FFT never faster up to %d taps", taps);
    return 0;
}
