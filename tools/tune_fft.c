/* SPDX-License-Identifier: MIT */
/*
 * tools/tune_fft.c - clgrad-tune's stage "fft": for each shape class of a
 * Fourier transform (lib/tune/fft_class.c: "real.large", rfft and irfft
 * above 2048; "complex.large", fft and ifft from 1024, which the 2-D ops
 * of such a width run), which path - clFFT's plan (path 0), Bluestein's
 * algorithm on a padded complex transform (1), for the real class the
 * complex transform of the same length (2), or clgrad's own radix passes
 * (3, kernels/fft.cl) - gives the right result
 * fastest, written as the entry kernel "fft", shape the class, which
 * lib/ops/fft.c looks up per transform.
 *
 * Users report clFFT 2.12 computing wrong results on NVIDIA at these
 * sizes, so each candidate's forward transform is checked against a
 * double-precision DFT on the host, and its inverse against the input
 * (the inverse of the reference spectrum), within 1e-5 * sqrt(log2 n) of
 * the largest value, before its time counts: a path that does not verify
 * is never written, and when clFFT's does not, the fastest that does is,
 * with no default time.  The representative transform of a class: a batch
 * of 8 rows of 4096 (real) or 1024 (complex, the rows of a 1024-wide
 * image), forward then inverse.  --fft-classes picks classes.
 * CLGRAD_TUNE_FFT_WRONG=1 in the environment counts clFFT's results as
 * wrong, so that the tests can see a fallback chosen and written.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tune.h"
#include "core/internal.h"
#include "tune/internal.h"

#define MAX_REPS 5
#define MAX_INNER 64
#define SAMPLE_S 0.02
#define ROWS 8
#define PI 3.14159265358979323846

static const char *const path_names[4] = { "clfft", "bluestein", "complex",
                                           "radix" };

/* One class's transforms: x (real rows of n, or complex rows), X its
 * spectrum in float (the reference's), and the references. */
typedef struct fwork {
    int real;
    int64_t n, nbins;       /* bins: n/2 + 1 (real) or n */
    cg_tensor *x, *X;
    double *spec;           /* the reference spectrum, ROWS x nbins x 2 */
    float *hx;              /* x on the host */
    size_t nx, nX;          /* floats */
    float *out;
    double scale_x, scale_X;
} fwork;

static void
fwork_free(fwork *w)
{
    cg_tensor_free(w->x);
    cg_tensor_free(w->X);
    free(w->spec);
    free(w->hx);
    free(w->out);
    memset(w, 0, sizeof *w);
}

static int
fwork_init(cg_context *ctx, fwork *w, int cls)
{
    int64_t xs[3], Xs[3] = { ROWS, 0, 2 };
    uint64_t seed = 2121;
    double *tc = NULL, *ts = NULL;
    float *hX = NULL;
    int64_t r, j, k;
    size_t i;
    int status = CG_OK;

    memset(w, 0, sizeof *w);
    w->real = cls == CG__FFT_REAL_LARGE;
    w->n = w->real ? 4096 : 1024;
    w->nbins = w->real ? w->n / 2 + 1 : w->n;
    xs[0] = ROWS, xs[1] = w->n, xs[2] = 2;
    Xs[1] = w->nbins;
    w->nx = (size_t)(ROWS * w->n * (w->real ? 1 : 2));
    w->nX = (size_t)(ROWS * w->nbins * 2);
    w->hx = malloc(w->nx * sizeof *w->hx);
    w->spec = calloc(w->nX, sizeof *w->spec);
    w->out = malloc((w->nx > w->nX ? w->nx : w->nX) * sizeof *w->out);
    hX = malloc(w->nX * sizeof *hX);
    tc = malloc((size_t)w->n * sizeof *tc);
    ts = malloc((size_t)w->n * sizeof *ts);
    if (!w->hx || !w->spec || !w->out || !hX || !tc || !ts) {
        status = cg__error(CG_EHOSTMEM, "fft: out of host memory");
        goto out;
    }
    for (i = 0; i < w->nx; i++) {
        w->hx[i] = (float)(cg_splitmix64_uniform(&seed) * 2 - 1);
        w->scale_x = fmax(w->scale_x, fabs(w->hx[i]));
    }
    for (j = 0; j < w->n; j++) {
        tc[j] = cos(2 * PI * (double)j / (double)w->n);
        ts[j] = -sin(2 * PI * (double)j / (double)w->n);
    }
    for (r = 0; r < ROWS; r++)
        for (k = 0; k < w->nbins; k++) {
            double sr = 0, si = 0;

            for (j = 0; j < w->n; j++) {
                int64_t m = j * k % w->n;
                double re = w->real ? w->hx[r * w->n + j]
                                    : w->hx[2 * (r * w->n + j)];
                double im = w->real ? 0 : w->hx[2 * (r * w->n + j) + 1];

                sr += re * tc[m] - im * ts[m];
                si += re * ts[m] + im * tc[m];
            }
            w->spec[2 * (r * w->nbins + k)] = sr;
            w->spec[2 * (r * w->nbins + k) + 1] = si;
        }
    for (i = 0; i < w->nX; i++) {
        hX[i] = (float)w->spec[i];
        w->scale_X = fmax(w->scale_X, fabs(w->spec[i]));
    }
    w->x = cg_tensor_from_host(ctx, CG_F32, w->real ? 2 : 3, xs, w->hx);
    w->X = w->x ? cg_tensor_from_host(ctx, CG_F32, 3, Xs, hX) : NULL;
    if (!w->x || !w->X)
        status = cg__last_status();
out:
    free(hX);
    free(tc);
    free(ts);
    return status;
}

/* The forward of x and the inverse of X; with err, the larger relative
 * error of the two against the references. */
static int
fwork_run(fwork *w, double *err)
{
    cg_tensor *y, *z;
    int status;
    size_t i;

    y = w->real ? cg_rfft(w->x, CG_FFT_DEFAULT_N, -1, CG_FFT_BACKWARD)
                : cg_fft(w->x, CG_FFT_DEFAULT_N, -1, CG_FFT_BACKWARD);
    z = !y ? NULL : w->real ? cg_irfft(w->X, w->n, -1, CG_FFT_BACKWARD)
                            : cg_ifft(w->X, CG_FFT_DEFAULT_N, -1,
                                      CG_FFT_BACKWARD);
    status = y && z ? CG_OK : cg__last_status();
    if (status == CG_OK && err) {
        *err = 0;
        status = cg_tensor_to_host(y, w->out, w->nX * sizeof(float));
        for (i = 0; status == CG_OK && i < w->nX; i++)
            *err = fmax(*err, fabs(w->out[i] - w->spec[i]) / w->scale_X);
        if (status == CG_OK)
            status = cg_tensor_to_host(z, w->out, w->nx * sizeof(float));
        for (i = 0; status == CG_OK && i < w->nx; i++)
            *err = fmax(*err, fabs(w->out[i] - w->hx[i]) / w->scale_x);
        if (isnan(*err))
            *err = INFINITY;
    }
    cg_tensor_free(y);
    cg_tensor_free(z);
    return status;
}

/* One timed run, for tu_time. */
static int
timed_run(cg_context *ctx, void *w)
{
    (void)ctx;
    return fwork_run(w, NULL);
}

/* Puts p in force, runs once and checks (*err), then times up to
 * MAX_REPS samples of *inner runs: *us the median per run. */
static int
measure(tu_run *r, fwork *w, const tu_params *p, int *inner, double *us,
        double *err, char *why, size_t whylen)
{
    int status;

    status = cg_context_set_tuning(r->ctx, p);
    if (status == CG_OK)
        status = fwork_run(w, err);
    if (status != CG_OK) {
        snprintf(why, whylen, "%s", cg_last_error());
        return status;
    }
    return tu_time(r, timed_run, w, SAMPLE_S, MAX_INNER, MAX_REPS, inner,
                   us, why, whylen);
}

/* Tunes class cls; nonzero if it could not be tuned at all. */
static int
tune_class(tu_run *r, int cls)
{
    const char *name = cg__fft_class_name(cls);
    char hash[33], note[128], why[512];
    tu_params best, cand;
    fwork w;
    json_object *k;
    double def_us = 0, best_us = 0, err = 0, tol;
    int p, np, tried = 0, inner = 0;
    const char *wrong_env = getenv("CLGRAD_TUNE_FFT_WRONG");
    int wrong = wrong_env && strcmp(wrong_env, "1") == 0;

    int real = cls == CG__FFT_REAL_LARGE;

    snprintf(note, sizeof note, "%s and %s of %d x %d: median of up to %d",
             real ? "rfft" : "fft", real ? "irfft" : "ifft", ROWS,
             real ? 4096 : 1024, MAX_REPS);
    k = tu_report_kernel(r, "fft", name, note);
    if (cg_kernel_source_hash("fft", hash) != CG_OK ||
        fwork_init(r->ctx, &w, cls) != CG_OK) {
        snprintf(why, sizeof why, "%s", cg_last_error());
        tu_say(r, "fft %s: %s", name, why);
        tu_report_result(k, 0, NULL, 0, why);
        fwork_free(&w);
        return -1;
    }
    tol = 1e-5 * sqrt(log2((double)w.n));
    np = 4;
    tu_progress(r, "fft", name, 0, np, 0, 0);
    for (p = 0; p < np; p++) {
        double us = 0;
        int st;

        if (p == 2 && !w.real)
            continue;       /* the complex path of a complex kind is clFFT */
        tu_params_init(&cand, "fft", name);
        snprintf(cand.source_hash, sizeof cand.source_hash, "%s", hash);
        tu_params_add(&cand, "path", p);
        if (p > 0 && !tu_fits(r, (best_us > 0 ? best_us : def_us) * 1e-6 *
                                 inner * (MAX_REPS + 2) * 4)) {
            tu_report_candidate(k, &cand, 0, r->interrupted
                                ? "not tried: interrupted"
                                : "not tried: out of time", NULL);
            continue;
        }
        tu_progress(r, "fft", name, p + 1, np, best_us, def_us);
        st = measure(r, &w, &cand, &inner, &us, &err, why, sizeof why);
        if (st == CG_OK && p == 0 && wrong)
            err = INFINITY;
        if (st == CG_OK && err > tol) {
            snprintf(why, sizeof why, "does not verify: relative error "
                     "%.3g against the double DFT (at most %.3g)", err, tol);
            st = -1;
        }
        if (st != CG_OK) {
            tu_report_candidate(k, &cand, 0, why, NULL);
            tu_say(r, "fft %s: %s: %s", name, path_names[p], why);
            continue;
        }
        tu_report_candidate(k, &cand, us, NULL, NULL);
        if (p == 0)
            def_us = us;
        if (!tried++ || us < best_us) {
            best = cand;
            best_us = us;
        }
    }
    fwork_free(&w);
    cg_context_clear_tuning(r->ctx);
    if (!tried) {
        tu_report_result(k, 0, NULL, 0, "no path verified");
        return -1;
    }
    best.time_us = best_us;
    best.default_time_us = def_us;
    snprintf(best.note, sizeof best.note, "%s", note);
    tu_keep(r, &best);
    tu_report_result(k, def_us, &best, best_us, def_us <= 0
                     ? "clFFT does not verify: a fallback"
                     : best_us < def_us ? "tuned"
                     : "the defaults are the fastest");
    tu_say(r, "fft %s: %s, %.0f us (clFFT %s)", name,
           path_names[tu_params_get(&best, "path", 0)], best_us,
           def_us > 0 ? "verified" : "failed");
    return 0;
}

int
tu_stage_fft(tu_run *r)
{
    double end = r->stage_end;
    int c, left = 0, failed = 0;

    for (c = 0; c < CG__FFT_NCLASSES; c++)
        if (!r->cfg->fft_classes || (r->cfg->fft_classes >> c & 1))
            left++;
    for (c = 0; c < CG__FFT_NCLASSES && !tu_stopped(r); c++) {
        if (r->cfg->fft_classes && !(r->cfg->fft_classes >> c & 1))
            continue;
        r->stage_end = tu_now() + (end - tu_now()) / left--;
        if (tune_class(r, c))
            failed = 1;
    }
    r->stage_end = end;
    cg_context_clear_tuning(r->ctx);
    return failed;
}
