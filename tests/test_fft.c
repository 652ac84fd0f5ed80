/* SPDX-License-Identifier: MIT */
/*
 * tests/test_fft.c - fft, ifft, rfft and irfft (clFFT underneath):
 * forward against a plain C DFT in double at lengths 1, 2, 7, 8, 12, 17,
 * 100, 169, 1000, 1009, 1024, 2310 and 4096 (17 and 1009 through
 * Bluestein's algorithm), batches 1 and 33 (1 above 2048), along the last
 * and a middle axis, for each norm, within 1e-5 * sqrt(log2 n) of the
 * largest output magnitude; the fallback paths (CLGRAD_FFT_PATH, a tuning
 * file) for real transforms above 2048 and 2-D widths from 1024; the
 * path radix (clgrad's own kernels) at every radix and through
 * Bluestein's algorithm;
 * n cropping and zero-padding; round trips and Parseval's identity;
 * gradcheck of every op (tests/opcheck.h) at small odd and even lengths;
 * PyTorch 1.13's results and gradients (tests/fixtures/fft.txt); plans
 * kept per context; and bad input failing with a clear error, launching
 * nothing.
 *
 * Every new (kind, length, batch, norm) bakes a clFFT plan, which compiles
 * kernels (seconds each natively without clFFT's cache), so under a
 * memory checker the test runs fewer lengths.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/internal.h"     /* cg__fft_plan_stats */
#include "tune/tuner.h"       /* cg_context_set_tuning, cg_tuning_db_* */
#include "fixture.h"
#include "opcheck.h"

#define PI 3.14159265358979323846

enum { FFT, IFFT, RFFT, IRFFT, FFT2, IFFT2, RFFT2, IRFFT2 };

typedef struct fparam {
    int kind;
    int64_t n;          /* CG_FFT_DEFAULT_N or a length */
    int dim;            /* of the logical (complex) dimensions */
    cg_fft_norm norm;
    const int64_t *s;   /* the 2-D kinds' lengths (NULL: defaults) */
} fparam;

static cg_tensor *
run_op(cg_tensor *x, const fparam *p)
{
    switch (p->kind) {
    case FFT: return cg_fft(x, p->n, p->dim, p->norm);
    case IFFT: return cg_ifft(x, p->n, p->dim, p->norm);
    case RFFT: return cg_rfft(x, p->n, p->dim, p->norm);
    case IRFFT: return cg_irfft(x, p->n, p->dim, p->norm);
    case FFT2: return cg_fft2(x, p->s, p->norm);
    case IFFT2: return cg_ifft2(x, p->s, p->norm);
    case RFFT2: return cg_rfft2(x, p->s, p->norm);
    default: return cg_irfft2(x, p->s, p->norm);
    }
}

static cg_tensor *
run_fft(cg_tensor **in, const void *param)
{
    return run_op(in[0], param);
}

/* The reference: x of shape xs (ndim dims, the pair last when complex)
 * into out (shape os), in double, term by term. */
static void
ref_dft(const double *x, int ndim, const int64_t *xs, const fparam *p,
        double *out, int *ondim, int64_t *os)
{
    int cin = p->kind != RFFT, cout = p->kind != IRFFT;
    int nd = ndim - cin, ax = p->dim < 0 ? p->dim + nd : p->dim, d;
    int64_t L = xs[ax], n, half, inlen, outlen, outer = 1, inner = 1;
    int64_t o, i, j, k;
    double s, sign = p->kind == FFT || p->kind == RFFT ? -1 : 1;
    double *re, *im, *tc, *ts;

    n = p->n != CG_FFT_DEFAULT_N ? p->n : p->kind == IRFFT ? 2 * (L - 1) : L;
    half = n / 2 + 1;
    inlen = p->kind == IRFFT ? half : n;
    outlen = p->kind == RFFT ? half : n;
    s = p->norm == CG_FFT_ORTHO ? 1 / sqrt((double)n)
        : (p->norm == CG_FFT_BACKWARD) == (sign > 0) ? 1.0 / n : 1.0;
    for (d = 0; d < ax; d++)
        outer *= xs[d];
    for (d = ax + 1; d < nd; d++)
        inner *= xs[d];
    *ondim = nd + cout;
    for (d = 0; d < nd; d++)
        os[d] = d == ax ? outlen : xs[d];
    if (cout)
        os[nd] = 2;
    if (!out)
        return;
    re = calloc((size_t)inlen, sizeof *re);
    im = calloc((size_t)inlen, sizeof *im);
    /* The twiddles e^(2 pi i m / n), m < n, once: the sums index them
     * by jk mod n. */
    tc = malloc((size_t)n * sizeof *tc);
    ts = malloc((size_t)n * sizeof *ts);
    ck_assert(re && im && tc && ts);
    for (j = 0; j < n; j++) {
        tc[j] = cos(2 * PI * (double)j / (double)n);
        ts[j] = sin(2 * PI * (double)j / (double)n);
    }
    for (o = 0; o < outer; o++)
        for (i = 0; i < inner; i++) {
            for (j = 0; j < inlen; j++) {
                int64_t e = ((o * L + j) * inner + i) * (cin ? 2 : 1);

                re[j] = j < L ? x[e] : 0;
                im[j] = j < L && cin ? x[e + 1] : 0;
            }
            for (k = 0; k < outlen; k++) {
                double sr = 0, si = 0;
                int64_t e = ((o * outlen + k) * inner + i) * (cout ? 2 : 1);

                if (p->kind == IRFFT) {
                    /* Bins 1 .. n - half stand for two, conjugates. */
                    for (j = 0; j < half; j++) {
                        int64_t m = (j * k) % n;
                        double w = j == 0 || j > n - half ? 1 : 2;

                        sr += w * (re[j] * tc[m] -
                                   (j == 0 || 2 * j == n ? 0 : im[j]) * ts[m]);
                    }
                    out[e] = s * sr;
                    continue;
                }
                for (j = 0; j < inlen; j++) {
                    int64_t m = (j * k) % n;
                    double c = tc[m], sn = sign * ts[m];

                    sr += re[j] * c - im[j] * sn;
                    si += re[j] * sn + im[j] * c;
                }
                out[e] = s * sr;
                out[e + 1] = s * si;
            }
        }
    free(re);
    free(im);
    free(tc);
    free(ts);
}

static int64_t numel_of(int ndim, const int64_t *shape);

/* A 2-D kind as its two 1-D transforms, in double: x (ndim, xs) into
 * *out (allocated here), its shape in (ondim, os). */
static void
ref_2d(const double *x, int ndim, const int64_t *xs, const fparam *p,
       double **out, int *ondim, int64_t *os)
{
    static const int first[] = { FFT, IFFT, RFFT, IFFT };
    static const int second[] = { FFT, IFFT, FFT, IRFFT };
    int k = p->kind - FFT2, c2r = p->kind == IRFFT2, tnd;
    fparam a = { first[k], CG_FFT_DEFAULT_N, c2r ? -2 : -1, p->norm, NULL };
    fparam b = { second[k], CG_FFT_DEFAULT_N, c2r ? -1 : -2, p->norm, NULL };
    int64_t ts[CG_MAX_DIMS];
    double *t;

    if (p->s) {
        a.n = p->s[c2r ? 0 : 1];
        b.n = p->s[c2r ? 1 : 0];
    }
    ref_dft(x, ndim, xs, &a, NULL, &tnd, ts);
    t = malloc((size_t)numel_of(tnd, ts) * sizeof *t);
    ck_assert_ptr_nonnull(t);
    ref_dft(x, ndim, xs, &a, t, &tnd, ts);
    ref_dft(t, tnd, ts, &b, NULL, ondim, os);
    *out = malloc((size_t)numel_of(*ondim, os) * sizeof **out);
    ck_assert_ptr_nonnull(*out);
    ref_dft(t, tnd, ts, &b, *out, ondim, os);
    free(t);
}

static void
ref_op(const oc_tensor *in, oc_tensor *out, const void *param)
{
    const fparam *p = param;
    int64_t s[CG_MAX_DIMS];
    double *d;
    int nd;

    if (p->kind >= FFT2) {
        ref_2d(in[0].data, in[0].ndim, in[0].shape, p, &d, &out->ndim,
               out->shape);
        oc_alloc(out);
        memcpy(out->data, d, (size_t)out->numel * sizeof *d);
        free(d);
        return;
    }
    ref_dft(in[0].data, in[0].ndim, in[0].shape, param, NULL, &out->ndim,
            out->shape);
    oc_alloc(out);
    ref_dft(in[0].data, in[0].ndim, in[0].shape, param, out->data, &nd, s);
}

/* Random float32 values in [-1, 1] as a device tensor and in double. */
static cg_tensor *
rand_tensor(int ndim, const int64_t *shape, double **host)
{
    int64_t n = 1, i;
    float *f;
    cg_tensor *t;
    int d;

    for (d = 0; d < ndim; d++)
        n *= shape[d];
    f = malloc((size_t)n * sizeof *f);
    *host = malloc((size_t)n * sizeof **host);
    ck_assert(f && *host);
    for (i = 0; i < n; i++) {
        f[i] = (float)oc_uniform(-1, 1);
        (*host)[i] = f[i];
    }
    t = cg_tensor_from_host(tt_ctx(), CG_F32, ndim, shape, f);
    ck_assert_msg(t != NULL, "%s", TT_ERR);
    free(f);
    return t;
}

static int64_t
numel_of(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    int d;

    for (d = 0; d < ndim; d++)
        n *= shape[d];
    return n;
}

/* Runs p on a random input of shape xs and returns max |y - ref| /
 * max |ref|. */
static double
forward_error(const fparam *p, int ndim, const int64_t *xs)
{
    double *x, *ref, err = 0, big = 0;
    int64_t os[CG_MAX_DIMS], m, i;
    int ond;
    float *y;
    cg_tensor *tx = rand_tensor(ndim, xs, &x), *ty;

    if (p->kind >= FFT2) {
        ref_2d(x, ndim, xs, p, &ref, &ond, os);
    } else {
        ref_dft(x, ndim, xs, p, NULL, &ond, os);
        ref = malloc((size_t)numel_of(ond, os) * sizeof *ref);
        ck_assert_ptr_nonnull(ref);
        ref_dft(x, ndim, xs, p, ref, &ond, os);
    }
    m = numel_of(ond, os);
    y = malloc((size_t)m * sizeof *y);
    ck_assert_ptr_nonnull(y);
    ty = run_op(tx, p);
    ck_assert_msg(ty != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_numel(ty), m);
    ck_assert_int_eq(cg_tensor_to_host(ty, y, (size_t)m * sizeof *y), CG_OK);
    for (i = 0; i < m; i++) {
        if (fabs(ref[i]) > big)
            big = fabs(ref[i]);
        if (fabs(y[i] - ref[i]) > err)
            err = fabs(y[i] - ref[i]);
    }
    cg_tensor_free(ty);
    cg_tensor_free(tx);
    free(x);
    free(ref);
    free(y);
    return big > 0 ? err / big : err;
}

static const char *const kind_name[] = { "fft", "ifft", "rfft", "irfft",
                                          "fft2", "ifft2", "rfft2",
                                          "irfft2" };
static const char *const norm_name[] = { "backward", "ortho", "forward" };

/* The input shape for the transform of kind with length n along the last
 * axis (mid 0) or a middle one (mid 1), over batch 1 or 33. */
static int
shape_for(int kind, int64_t n, int mid, int batch, int64_t *xs)
{
    int64_t len = kind == IRFFT ? n / 2 + 1 : n;
    int nd = 0;

    if (mid) {
        xs[nd++] = batch == 1 ? 1 : 3;
        xs[nd++] = len;
        xs[nd++] = batch == 1 ? 1 : 11;
    } else {
        if (batch > 1)
            xs[nd++] = batch;
        xs[nd++] = len;
    }
    if (kind != RFFT)
        xs[nd++] = 2;
    return nd;
}

/* Every kind at every length, batch and axis with the default norm, and
 * every norm at batch 33 along the middle axis. */
START_TEST(transforms_match_dft)
{
    static const int64_t all[] = { 1, 2, 7, 8, 12, 17, 100, 169, 1000,
                                   1009, 1024, 2310, 4096 };
    static const int64_t few[] = { 1, 12, 17 };
    /* Lengths whose other norms are checked on fft and irfft only (each
     * norm's plan is seconds to bake on a cold cache; the scale is one
     * plan parameter, checked on every kind at the other lengths). */
    static const int64_t two_kinds[] = { 169, 2310, 4096 };
    const int64_t *lens = tt_host_checker() ? few : all;
    int nlens = tt_host_checker() ? 3 : 13, li, kind, mid, b, norm;
    int64_t xs[CG_MAX_DIMS];
    double worst = 0, wl;

    for (li = 0; li < nlens; li++) {
        for (wl = 0, kind = FFT; kind <= IRFFT; kind++)
            for (mid = 0; mid < 2; mid++)
                for (b = 0; b < 2; b++)
                    for (norm = 0; norm < 3; norm++) {
                        int64_t n = lens[li];
                        fparam p = { kind, n, mid ? 1 : -1, norm, NULL };
                        int nd = shape_for(kind, n, mid, b ? 33 : 1, xs);
                        double e, tol;

                        /* Under a host checker, one batch: the host
                         * path is the same.  Above 2048 (the reference
                         * costs n^2 a row) batch 1 only. */
                        int big = n > 2048, few_kinds = 0, t;

                        for (t = 0; t < 3; t++)
                            few_kinds |= n == two_kinds[t];
                        if ((norm && !(mid && b != big)) ||
                            (tt_host_checker() && !b) || (big && b) ||
                            (few_kinds && norm &&
                             (kind == IFFT || kind == RFFT)))
                            continue;
                        tol = 1e-5 * sqrt(n > 2 ? log2((double)n) : 1);
                        e = forward_error(&p, nd, xs);
                        worst = fmax(worst, e);
                        wl = fmax(wl, e);
                        ck_assert_msg(e <= tol, "%s n=%lld %s axis batch %d "
                                      "norm %s: error %g > %g",
                                      kind_name[kind], (long long)n,
                                      mid ? "middle" : "last", b ? 33 : 1,
                                      norm_name[norm], e, tol);
                    }
        printf("  n = %4lld: worst %.3g (%.3f of the tolerance)\n",
               (long long)lens[li], wl, wl / (1e-5 * sqrt(lens[li] > 2 ?
                   log2((double)lens[li]) : 1)));
    }
    printf("transforms_match_dft: worst relative error %.3g\n", worst);
}
END_TEST

/* Gradients against finite differences of the reference, with cropping,
 * zero-padding, a middle axis, a transposed (non-contiguous) input,
 * length 1, and each norm. */
START_TEST(gradients_match_finite_differences)
{
    static const int64_t s38[2] = { 3, 8 }, s63[2] = { 6, 3 };
    static const int64_t s49[2] = { 4, 9 }, s57[2] = { 5, 7 };
    static const struct {
        const char *x;
        fparam p;
    } cases[] = {
        { "7,2", { FFT, CG_FFT_DEFAULT_N, -1, CG_FFT_BACKWARD, NULL } },
        { "5,6,2", { FFT, 7, 0, CG_FFT_ORTHO, NULL } },
        { "T3,5,2", { FFT, 4, -1, CG_FFT_FORWARD, NULL } },
        { "1,2", { FFT, CG_FFT_DEFAULT_N, 0, CG_FFT_BACKWARD, NULL } },
        { "6,2", { IFFT, 4, -1, CG_FFT_FORWARD, NULL } },
        { "3,5,2", { IFFT, CG_FFT_DEFAULT_N, 1, CG_FFT_BACKWARD, NULL } },
        { "8", { RFFT, CG_FFT_DEFAULT_N, -1, CG_FFT_BACKWARD, NULL } },
        { "5,3", { RFFT, 6, 0, CG_FFT_ORTHO, NULL } },
        { "3,7", { RFFT, 9, 1, CG_FFT_FORWARD, NULL } },
        { "4", { RFFT, 1, 0, CG_FFT_BACKWARD, NULL } },
        { "5,2", { IRFFT, CG_FFT_DEFAULT_N, -1, CG_FFT_BACKWARD, NULL } },
        { "4,3,2", { IRFFT, 7, 0, CG_FFT_BACKWARD, NULL } },
        { "3,6,2", { IRFFT, 5, 1, CG_FFT_ORTHO, NULL } },
        { "2,3,2", { IRFFT, 6, -1, CG_FFT_FORWARD, NULL } },
        { "3,2", { IRFFT, 1, 0, CG_FFT_BACKWARD, NULL } },
        { "17,2", { FFT, CG_FFT_DEFAULT_N, -1, CG_FFT_ORTHO, NULL } },
        { "2,19", { RFFT, CG_FFT_DEFAULT_N, 1, CG_FFT_BACKWARD, NULL } },
        { "3,10,2", { IRFFT, 19, 1, CG_FFT_BACKWARD, NULL } },
        { "O4,5,2", { IRFFT, CG_FFT_DEFAULT_N, -1, CG_FFT_ORTHO, NULL } },
        { "3,5,2", { FFT2, 0, 0, CG_FFT_BACKWARD, NULL } },
        { "2,4,6,2", { FFT2, 0, 0, CG_FFT_ORTHO, s38 } },
        { "5,4,2", { IFFT2, 0, 0, CG_FFT_FORWARD, s63 } },
        { "4,6", { RFFT2, 0, 0, CG_FFT_BACKWARD, NULL } },
        { "2,5,7", { RFFT2, 0, 0, CG_FFT_ORTHO, s49 } },
        { "4,5,2", { IRFFT2, 0, 0, CG_FFT_BACKWARD, NULL } },
        { "3,4,2", { IRFFT2, 0, 0, CG_FFT_BACKWARD, s57 } },
    };
    /* Under a host checker, the cases with host paths of their own:
     * padding and a middle axis, a transposed input, an offset one,
     * length 1, Bluestein, each kind's backward, each 2-D kind. */
    const unsigned long lean = 1ul << 1 | 1ul << 2 | 1ul << 3 | 1ul << 4 |
                               1ul << 7 | 1ul << 11 | 1ul << 17 | 1ul << 18 |
                               1ul << 20 | 1ul << 21 | 1ul << 23 | 1ul << 25;
    oc_op op = { 0 };
    size_t c;

    op.ninputs = 1;
    op.run = run_fft;
    op.ref = ref_op;
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        if (tt_host_checker() && !(lean >> c & 1))
            continue;
        op.name = kind_name[cases[c].p.kind];
        oc_check(&op, &cases[c].p, cases[c].x);
    }
}
END_TEST

/* max |a - b| / max |b| over n values read back from two tensors. */
static double
tensor_rel_err(cg_tensor *a, cg_tensor *b)
{
    int64_t n = cg_tensor_numel(b), i;
    float *fa = malloc((size_t)n * sizeof *fa), *fb = malloc((size_t)n * 4);
    double err = 0, big = 0;

    ck_assert(fa && fb);
    ck_assert_int_eq(cg_tensor_numel(a), n);
    ck_assert_int_eq(cg_tensor_to_host(a, fa, (size_t)n * 4), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(b, fb, (size_t)n * 4), CG_OK);
    for (i = 0; i < n; i++) {
        big = fmax(big, fabs(fb[i]));
        err = fmax(err, fabs(fa[i] - fb[i]));
    }
    free(fa);
    free(fb);
    return err / big;
}

static double
sum_squares(cg_tensor *t)
{
    int64_t n = cg_tensor_numel(t), i;
    float *f = malloc((size_t)n * sizeof *f);
    double s = 0;

    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(cg_tensor_to_host(t, f, (size_t)n * 4), CG_OK);
    for (i = 0; i < n; i++)
        s += (double)f[i] * f[i];
    free(f);
    return s;
}

/* ifft(fft(x)) and irfft(rfft(x), n) give x back (odd and even n, each
 * norm pairing with itself), and the ortho transforms keep the energy
 * (Parseval), the backward one multiplies it by n. */
START_TEST(round_trips_and_parseval)
{
    static const int64_t lens[] = { 12, 7 };
    int li, norm;
    double *h;

    for (li = 0; li < 2; li++)
        for (norm = 0; norm < 3; norm++) {
            int64_t n = lens[li], cs[3] = { 33, n, 2 }, rs[2] = { 33, n };
            cg_tensor *x = rand_tensor(3, cs, &h), *r, *y, *z;
            double tol = 1e-5 * sqrt(log2((double)n)), e;

            free(h);
            if ((norm != CG_FFT_BACKWARD || tt_host_checker()) && li) {
                cg_tensor_free(x);
                continue;
            }
            y = cg_fft(x, CG_FFT_DEFAULT_N, -1, norm);
            z = y ? cg_ifft(y, CG_FFT_DEFAULT_N, -1, norm) : NULL;
            ck_assert_msg(z != NULL, "%s", TT_ERR);
            e = tensor_rel_err(z, x);
            ck_assert_msg(e <= tol, "ifft(fft(x)) n=%lld: %g", (long long)n,
                          e);
            e = fabs(sum_squares(y) / (norm == CG_FFT_ORTHO ? 1
                                       : norm == CG_FFT_FORWARD ? 1.0 / n
                                                                : (double)n) -
                     sum_squares(x)) / sum_squares(x);
            ck_assert_msg(e <= tol, "Parseval n=%lld norm %s: %g",
                          (long long)n, norm_name[norm], e);
            cg_tensor_free(y);
            cg_tensor_free(z);
            cg_tensor_free(x);
            r = rand_tensor(2, rs, &h);
            free(h);
            y = cg_rfft(r, CG_FFT_DEFAULT_N, -1, norm);
            z = y ? cg_irfft(y, n, -1, norm) : NULL;
            ck_assert_msg(z != NULL, "%s", TT_ERR);
            e = tensor_rel_err(z, r);
            ck_assert_msg(e <= tol, "irfft(rfft(x)) n=%lld: %g",
                          (long long)n, e);
            cg_tensor_free(y);
            cg_tensor_free(z);
            cg_tensor_free(r);
        }
}
END_TEST

/* irfft ignores the imaginary parts of bins 0 and n/2 by zeroing them in
 * a copy: its input keeps them. */
START_TEST(irfft_leaves_its_input_alone)
{
    int64_t cs[3] = { 3, 7, 2 };
    double *h;
    cg_tensor *x = rand_tensor(3, cs, &h), *copy, *y;

    free(h);
    copy = cg_add_scalar(x, 0.0f);
    y = copy ? cg_irfft(x, 12, -1, CG_FFT_BACKWARD) : NULL;
    ck_assert_msg(y != NULL, "%s", TT_ERR);
    ck_assert(tensor_rel_err(x, copy) == 0);
    cg_tensor_free(y);
    cg_tensor_free(copy);
    cg_tensor_free(x);
}
END_TEST

/* A context bakes one plan per (kind, length, batch, norm) and reuses it;
 * prints the bake times it saw (information, not a check). */
START_TEST(plans_are_baked_once)
{
    int64_t s[2] = { 5, 12 };
    cg_tensor *x = cg_ones(tt_ctx(), 2, s), *y;
    int before, after, k;
    double t0, t1;

    ck_assert_ptr_nonnull(x);
    y = cg_rfft(x, CG_FFT_DEFAULT_N, -1, CG_FFT_BACKWARD);
    ck_assert_msg(y != NULL, "%s", TT_ERR);
    cg_tensor_free(y);
    ck_assert_int_eq(cg__fft_plan_stats(tt_ctx(), &before, &t0), CG_OK);
    for (k = 0; k < 3; k++) {
        y = cg_rfft(x, CG_FFT_DEFAULT_N, -1, CG_FFT_BACKWARD);
        ck_assert_msg(y != NULL, "%s", TT_ERR);
        cg_tensor_free(y);
    }
    ck_assert_int_eq(cg__fft_plan_stats(tt_ctx(), &after, &t1), CG_OK);
    ck_assert_int_eq(after, before);
    ck_assert(t1 == t0);
    printf("plans_are_baked_once: %d plans baked in %.2f s\n", after, t1);
    cg_tensor_free(x);
}
END_TEST

/* A context keeps at most its limit of plans and drops the least
 * recently used one first: with room for two, batches 1, 2, 1, 3 leave
 * batch 3's and batch 1's plans (so batch 1 bakes nothing more), and
 * batch 2 is baked again; every result stays right. */
static void
fft_rows_at(int64_t batch, double *bake_seconds)
{
    fparam p = { FFT, CG_FFT_DEFAULT_N, -1, CG_FFT_BACKWARD, NULL };
    int64_t xs[3] = { batch, 8, 2 };
    int nplans;

    ck_assert(forward_error(&p, 3, xs) < 1e-5);
    ck_assert_int_eq(cg__fft_plan_stats(tt_ctx(), &nplans, bake_seconds),
                     CG_OK);
    ck_assert_int_le(nplans, 2);
}

START_TEST(plans_beyond_the_limit_go_least_recent_first)
{
    double t0, t1;
    int nplans;

    /* clFFT's own plans: one a transform, whatever the tuning says */
    setenv("CLGRAD_FFT_PATH", "clfft", 1);
    ck_assert_int_eq(cg__fft_set_plan_limit(tt_ctx(), -1), CG_EINVAL);
    ck_assert_int_eq(cg__fft_set_plan_limit(tt_ctx(), 2), CG_OK);
    ck_assert_int_eq(cg__fft_plan_stats(tt_ctx(), &nplans, &t0), CG_OK);
    ck_assert_int_le(nplans, 2);
    fft_rows_at(1, &t0);
    fft_rows_at(2, &t0);
    fft_rows_at(1, &t0);
    fft_rows_at(3, &t0);
    fft_rows_at(1, &t1);
    ck_assert(t1 == t0);
    fft_rows_at(2, &t1);
    ck_assert(t1 > t0);
    ck_assert_int_eq(cg__fft_set_plan_limit(tt_ctx(), 0), CG_OK);
    unsetenv("CLGRAD_FFT_PATH");
}
END_TEST

static const fx_tensor *
fx_need(const fx_file *f, const char *what, int i)
{
    char name[64];
    const fx_tensor *t;

    snprintf(name, sizeof name, "%s.%d", what, i);
    t = fx_get(f, name);
    ck_assert_msg(t != NULL, "fft.txt: no %s", name);
    return t;
}

static cg_tensor *
from_fx(const fx_tensor *t)
{
    cg_tensor *d = cg_tensor_from_host(tt_ctx(), CG_F32, t->ndim, t->shape,
                                       t->data);

    ck_assert_msg(d != NULL, "%s", TT_ERR);
    return d;
}

static double
longest_axis(const cg_tensor *a, const cg_tensor *b)
{
    int64_t s[CG_MAX_DIMS];
    double m = 0;
    int d;

    ck_assert_int_eq(cg_tensor_shape(a, s), CG_OK);
    for (d = 0; d < cg_tensor_ndim(a); d++)
        m = fmax(m, (double)s[d]);
    ck_assert_int_eq(cg_tensor_shape(b, s), CG_OK);
    for (d = 0; d < cg_tensor_ndim(b); d++)
        m = fmax(m, (double)s[d]);
    return m;
}

/* PyTorch 1.13's outputs and input gradients (tests/fixtures/gen_fft.py),
 * each within 1e-5 * sqrt(log2 n) of its largest value. */
START_TEST(transforms_match_pytorch_fixture)
{
    char err[256], key[32];
    fx_file *f = fx_load_fixture("fft.txt", err, sizeof err);
    int n, i, c[4], sv[2];
    int64_t s2[2];

    ck_assert_msg(f != NULL, "%s", err);
    n = fx_config_int(f, "cases", 0);
    ck_assert_int_gt(n, 0);
    for (i = 0; i < n; i++) {
        cg_tensor *x, *y, *go, *gi, *out, *prod, *l;
        fparam p;
        double e, tol;

        /* Under a host checker, a third of the cases, none of the long
         * lengths (new plans to bake). */
        if (tt_host_checker() && (i % 3 || fx_need(f, "input", i)->numel >
                                  2000))
            continue;
        x = from_fx(fx_need(f, "input", i));
        y = from_fx(fx_need(f, "output", i));
        go = from_fx(fx_need(f, "grad_output", i));
        gi = from_fx(fx_need(f, "grad_input", i));
        snprintf(key, sizeof key, "case.%d", i);
        ck_assert_int_eq(fx_config_ints(f, key, c, 4), 4);
        p.kind = c[0];
        p.n = c[1];
        p.dim = c[2];
        p.norm = (cg_fft_norm)c[3];
        p.s = NULL;
        if (p.kind >= FFT2) {
            snprintf(key, sizeof key, "s.%d", i);
            ck_assert_int_eq(fx_config_ints(f, key, sv, 2), 2);
            s2[0] = sv[0], s2[1] = sv[1];
            p.s = sv[0] < 0 ? NULL : s2;
        }
        ck_assert_int_eq(cg_tensor_set_requires_grad(x, 1), CG_OK);
        out = run_op(x, &p);
        ck_assert_msg(out != NULL, "case %d: %s", i, TT_ERR);
        /* The transform's length is at most the longest axis of the
         * input or output (at least 64: the small cases' bound). */
        tol = 1e-5 * sqrt(log2(fmax(64.0, longest_axis(x, out))));
        e = tensor_rel_err(out, y);
        ck_assert_msg(e <= tol, "case %d (%s): output error %g", i,
                      kind_name[p.kind], e);
        prod = cg_mul(out, go);
        l = prod ? cg_sum(prod, 0, NULL, 0) : NULL;
        ck_assert_ptr_nonnull(l);
        ck_assert_int_eq(cg_backward(l, NULL, 0), CG_OK);
        e = tensor_rel_err(cg_tensor_grad(x), gi);
        ck_assert_msg(e <= tol, "case %d (%s): gradient error %g", i,
                      kind_name[p.kind], e);
        cg_tensor_free(l);
        cg_tensor_free(prod);
        cg_tensor_free(out);
        cg_tensor_free(x);
        cg_tensor_free(y);
        cg_tensor_free(go);
        cg_tensor_free(gi);
    }
    fx_free(f);
}
END_TEST

#define EXPECT_FAIL(call, name, needle)                                      \
    do {                                                                     \
        cg_memory_stats b_, a_;                                              \
        ck_assert_int_eq(cg_context_stats(tt_ctx(), &b_), CG_OK);            \
        ck_assert_ptr_null(call);                                            \
        ck_assert_msg(strncmp(cg_last_error(), name ":",                     \
                              strlen(name) + 1) == 0,                        \
                      "expected %s, got \"%s\"", name, cg_last_error());     \
        ck_assert_msg(strstr(cg_last_error(), needle) != NULL,               \
                      "\"%s\" does not name %s", cg_last_error(), needle);   \
        ck_assert_int_eq(cg_context_stats(tt_ctx(), &a_), CG_OK);            \
        ck_assert_uint_eq(a_.kernels_enqueued, b_.kernels_enqueued);         \
        ck_assert_uint_eq(a_.bytes_in_use, b_.bytes_in_use);                 \
    } while (0)

START_TEST(bad_input_fails_and_launches_nothing)
{
    int64_t rs[2] = { 4, 5 }, cs[3] = { 4, 5, 2 }, one[2] = { 1, 2 };
    cg_tensor *r = cg_ones(tt_ctx(), 2, rs), *c = cg_ones(tt_ctx(), 3, cs);
    cg_tensor *c1 = cg_ones(tt_ctx(), 2, one);
    int64_t one2[3] = { 3, 1, 2 }, z4[2] = { 4, 0 };
    cg_tensor *c1b = cg_ones(tt_ctx(), 3, one2);
    cg_tensor *r1 = cg_ones(tt_ctx(), 1, cs + 1);
    cg_tensor *i = cg_tensor_new(tt_ctx(), CG_I32, 3, cs);

    ck_assert(r && c && c1 && c1b && r1 && i);
    EXPECT_FAIL(cg_fft(r, CG_FFT_DEFAULT_N, -1, 0), "CG_ESHAPE", "[4, 5]");
    EXPECT_FAIL(cg_irfft(r, CG_FFT_DEFAULT_N, 0, 0), "CG_ESHAPE", "last");
    EXPECT_FAIL(cg_fft(c, CG_FFT_DEFAULT_N, 2, 0), "CG_EINVAL", "dim 2");
    EXPECT_FAIL(cg_ifft(c, CG_FFT_DEFAULT_N, -3, 0), "CG_EINVAL", "dim -3");
    EXPECT_FAIL(cg_rfft(r, CG_FFT_DEFAULT_N, 2, 0), "CG_EINVAL", "2-D");
    EXPECT_FAIL(cg_fft(c, 0, -1, 0), "CG_EINVAL", "n = 0");
    EXPECT_FAIL(cg_rfft(r, -2, -1, 0), "CG_EINVAL", "n = -2");
    EXPECT_FAIL(cg_irfft(c1, CG_FFT_DEFAULT_N, -1, 0), "CG_EINVAL", "n = 0");
    EXPECT_FAIL(cg_fft(c, (int64_t)1 << 30, -1, 0), "CG_EUNSUPPORTED",
                "n = 1073741824");
    EXPECT_FAIL(cg_fft(c, 4, -1, 3), "CG_EINVAL", "norm 3");
    EXPECT_FAIL(cg_fft(i, 4, -1, 0), "CG_EDTYPE", "int32");
    EXPECT_FAIL(cg_fft(NULL, 4, -1, 0), "CG_EINVAL", "input");
    EXPECT_FAIL(cg_fft2(c1, NULL, 0), "CG_ESHAPE", "fft2");
    EXPECT_FAIL(cg_rfft2(r1, NULL, 0), "CG_ESHAPE", "[5]");
    EXPECT_FAIL(cg_ifft2(c, z4, 0), "CG_EINVAL", "n = 0");
    EXPECT_FAIL(cg_ifft2(c, z4, 0), "CG_EINVAL", "(in ifft2)");
    EXPECT_FAIL(cg_irfft2(c1b, NULL, 0), "CG_EINVAL", "n = 0");
    EXPECT_FAIL(cg_fft2(c, NULL, 5), "CG_EINVAL", "norm 5");
    EXPECT_FAIL(cg_complex_abs(r), "CG_ESHAPE", "[4, 5]");
    EXPECT_FAIL(cg_complex_angle(i), "CG_EDTYPE", "int32");
    EXPECT_FAIL(cg_complex_conj(r), "CG_ESHAPE", "not complex");
    EXPECT_FAIL(cg_complex_mul(c, c1b), "CG_ESHAPE", "[3, 1, 2]");
    cg_tensor_free(r);
    cg_tensor_free(c);
    cg_tensor_free(c1);
    cg_tensor_free(c1b);
    cg_tensor_free(r1);
    cg_tensor_free(i);
}
END_TEST

/* Transforms are linear, y = A x: the create_graph gradient A^T g
 * differentiated with respect to g along v gives A v (double backward),
 * and forward mode's tangent of A x is A t; for every kind, with n
 * cropping or padding along a middle axis. */
START_TEST(double_backward_and_forward_mode_apply_the_transform)
{
    static const struct {
        int nd;
        int64_t shape[3];
        fparam p;
    } cases[] = {
        { 3, { 3, 7, 2 }, { FFT, 9, 1, CG_FFT_ORTHO, NULL } },
        { 3, { 3, 7, 2 }, { IFFT, 5, 0, CG_FFT_BACKWARD, NULL } },
        { 2, { 3, 7 }, { RFFT, 10, 1, CG_FFT_FORWARD, NULL } },
        { 3, { 3, 6, 2 }, { IRFFT, 9, 1, CG_FFT_BACKWARD, NULL } },
        { 3, { 2, 17, 2 }, { FFT, CG_FFT_DEFAULT_N, 1, CG_FFT_BACKWARD,
                             NULL } },
    };
    size_t c;

    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const fparam *p = &cases[c].p;
        cg_tensor *x, *v, *y, *g, *gx = NULL, *prod, *l, *av, *d, *yd, *tg;
        int64_t ys[CG_MAX_DIMS];
        double *h, e;
        int ynd;

        if (tt_host_checker() && c > 0)
            break;
        x = rand_tensor(cases[c].nd, cases[c].shape, &h);
        free(h);
        v = rand_tensor(cases[c].nd, cases[c].shape, &h);
        free(h);
        ck_assert_int_eq(cg_tensor_set_requires_grad(x, 1), CG_OK);
        y = run_op(x, p);
        ck_assert_msg(y != NULL, "%s", TT_ERR);
        ynd = cg_tensor_ndim(y);
        cg_tensor_shape(y, ys);
        g = rand_tensor(ynd, ys, &h);
        free(h);
        ck_assert_int_eq(cg_tensor_set_requires_grad(g, 1), CG_OK);
        ck_assert_int_eq(cg_grad(y, g, 1, &x, &gx, CG_GRAD_CREATE_GRAPH),
                         CG_OK);
        prod = cg_mul(gx, v);
        l = prod ? cg_sum(prod, 0, NULL, 0) : NULL;
        ck_assert_msg(l != NULL, "%s", TT_ERR);
        ck_assert_int_eq(cg_backward(l, NULL, 0), CG_OK);
        cg_no_grad_enter();
        av = run_op(v, p);
        cg_no_grad_leave();
        ck_assert_msg(av != NULL, "%s", TT_ERR);
        e = tensor_rel_err(cg_tensor_grad(g), av);
        ck_assert_msg(e <= 1e-5, "case %zu (%s): double backward error %g",
                      c, kind_name[p->kind], e);
        ck_assert_int_eq(cg_fwad_enter(tt_ctx()), CG_OK);
        d = cg_make_dual(x, v);
        yd = d ? run_op(d, p) : NULL;
        tg = yd ? cg_tangent(yd) : NULL;
        ck_assert_msg(tg != NULL, "%s", TT_ERR);
        e = tensor_rel_err(tg, av);
        ck_assert_msg(e <= 1e-5, "case %zu (%s): forward-mode error %g", c,
                      kind_name[p->kind], e);
        cg_tensor_free(tg);
        cg_tensor_free(yd);
        cg_tensor_free(d);
        ck_assert_int_eq(cg_fwad_exit(tt_ctx()), CG_OK);
        cg_tensor_free(av);
        cg_tensor_free(l);
        cg_tensor_free(prod);
        cg_tensor_free(gx);
        cg_tensor_free(g);
        cg_tensor_free(y);
        cg_tensor_free(v);
        cg_tensor_free(x);
    }
}
END_TEST

/* The complex helpers: 0 mul, 1 conj, 2 abs, 3 angle. */
static cg_tensor *
run_complex(cg_tensor **in, const void *param)
{
    switch (*(const int *)param) {
    case 0: return cg_complex_mul(in[0], in[1]);
    case 1: return cg_complex_conj(in[0]);
    case 2: return cg_complex_abs(in[0]);
    default: return cg_complex_angle(in[0]);
    }
}

static void
ref_complex(const oc_tensor *in, oc_tensor *out, const void *param)
{
    int op = *(const int *)param;
    int64_t e, m;

    if (op == 0)
        oc_bcast_shape(&in[0], &in[1], out);
    else {
        out->ndim = in[0].ndim - (op >= 2);
        memcpy(out->shape, in[0].shape, sizeof out->shape);
    }
    oc_alloc(out);
    m = op == 0 ? out->numel / 2 : in[0].numel / 2;
    for (e = 0; e < m; e++) {
        double ar, ai, br, bi;

        if (op == 0) {
            ar = in[0].data[oc_bcast_index(&in[0], out->ndim, out->shape,
                                           2 * e)];
            ai = in[0].data[oc_bcast_index(&in[0], out->ndim, out->shape,
                                           2 * e + 1)];
            br = in[1].data[oc_bcast_index(&in[1], out->ndim, out->shape,
                                           2 * e)];
            bi = in[1].data[oc_bcast_index(&in[1], out->ndim, out->shape,
                                           2 * e + 1)];
            out->data[2 * e] = ar * br - ai * bi;
            out->data[2 * e + 1] = ar * bi + ai * br;
            continue;
        }
        ar = in[0].data[2 * e];
        ai = in[0].data[2 * e + 1];
        if (op == 1) {
            out->data[2 * e] = ar;
            out->data[2 * e + 1] = -ai;
        } else {
            out->data[e] = op == 2 ? hypot(ar, ai) : atan2(ai, ar);
        }
    }
}

START_TEST(complex_helpers_match_reference)
{
    static const int ops[4] = { 0, 1, 2, 3 };
    static const char *const names[4] = { "complex_mul", "complex_conj",
                                          "complex_abs", "complex_angle" };
    oc_op op = { 0 };
    int k;

    op.run = run_complex;
    op.ref = ref_complex;
    for (k = 0; k < 4; k++) {
        op.name = names[k];
        op.ninputs = k == 0 ? 2 : 1;
        if (k == 0) {
            oc_check(&op, &ops[k], "3,5,2", "3,5,2");
            oc_check(&op, &ops[k], "3,4,2", "4,2");
            oc_check(&op, &ops[k], "T5,3,2", "1,3,2");
        } else {
            oc_check(&op, &ops[k], "7,2");
            oc_check(&op, &ops[k], "T3,5,2");
            oc_check(&op, &ops[k], "O4,2");
        }
    }
}
END_TEST

/* abs and angle have PyTorch's gradient 0 at z = 0, not NaN. */
START_TEST(complex_abs_and_angle_gradients_at_zero)
{
    int64_t s[2] = { 3, 2 };
    float g[6];
    int k, i;

    for (k = 0; k < 2; k++) {
        cg_tensor *x = cg_zeros(tt_ctx(), 2, s), *y, *l;

        ck_assert_ptr_nonnull(x);
        ck_assert_int_eq(cg_tensor_set_requires_grad(x, 1), CG_OK);
        y = k ? cg_complex_angle(x) : cg_complex_abs(x);
        l = y ? cg_sum(y, 0, NULL, 0) : NULL;
        ck_assert_msg(l != NULL, "%s", TT_ERR);
        ck_assert_int_eq(cg_backward(l, NULL, 0), CG_OK);
        ck_assert_int_eq(cg_tensor_to_host(cg_tensor_grad(x), g, sizeof g),
                         CG_OK);
        for (i = 0; i < 6; i++)
            ck_assert_msg(g[i] == 0.0f, "%s: gradient %g at 0",
                          k ? "angle" : "abs", g[i]);
        cg_tensor_free(l);
        cg_tensor_free(y);
        cg_tensor_free(x);
    }
}
END_TEST

static cg_tuning_entry
fft_entry(const char *shape, long path)
{
    cg_tuning_entry e;

    memset(&e, 0, sizeof e);
    strcpy(e.kernel, "fft");
    snprintf(e.shape, sizeof e.shape, "%s", shape);
    ck_assert_int_eq(cg_kernel_source_hash("fft", e.source_hash), CG_OK);
    e.nparams = 1;
    strcpy(e.names[0], "path");
    e.values[0] = path;
    return e;
}

/* rfft and irfft of 4096 (class real.large) and fft2 and ifft2 of width
 * 1024 (complex.large; one row, so that the paths' plans are few, most
 * of them transforms_match_dft's) within 1e-5 * sqrt(log2 n) on the path
 * in force;
 * under a host checker, of 12 and 3 x 16 (the same code, and no new clFFT
 * plan of thousands to bake). */
static void
check_large(const char *what)
{
    static const int64_t xr[1] = { 4096 }, xh[2] = { 2049, 2 };
    static const int64_t x2[3] = { 1, 1024, 2 };
    static const int64_t sr[1] = { 12 }, sh[2] = { 7, 2 };
    static const int64_t s2[3] = { 3, 16, 2 };
    int small = tt_host_checker();
    fparam pr = { RFFT, CG_FFT_DEFAULT_N, -1, CG_FFT_BACKWARD, NULL };
    fparam pi = { IRFFT, CG_FFT_DEFAULT_N, -1, CG_FFT_BACKWARD, NULL };
    fparam p2 = { FFT2, 0, 0, CG_FFT_BACKWARD, NULL };
    fparam q2 = { IFFT2, 0, 0, CG_FFT_BACKWARD, NULL };
    double e, tol = 1e-5 * sqrt(12.0), tol2 = 1e-5 * sqrt(11.0);

    e = forward_error(&pr, 1, small ? sr : xr);
    ck_assert_msg(e <= tol, "%s: rfft: error %g > %g", what, e, tol);
    e = forward_error(&pi, 2, small ? sh : xh);
    ck_assert_msg(e <= tol, "%s: irfft: error %g > %g", what, e, tol);
    e = forward_error(&p2, 3, small ? s2 : x2);
    ck_assert_msg(e <= tol2, "%s: fft2: error %g > %g", what, e,
                  tol2);
    e = forward_error(&q2, 3, small ? s2 : x2);
    ck_assert_msg(e <= tol2, "%s: ifft2: error %g > %g", what, e,
                  tol2);
}

/* The paths a device where clFFT fails can be given: forced by
 * CLGRAD_FFT_PATH, or by tuning entries "fft" of the classes real.large
 * and complex.large (from a database file, as a new context reads it, and
 * put in force), each giving results within the tolerance; the entries
 * apply to their classes only, the variable over them, a bad value of it
 * failing the call, and bad entries refused. */
START_TEST(fallback_paths_follow_env_and_tuning)
{
    static const char *const paths[3] = { "bluestein", "complex", "radix" };
    static const int64_t xs[1] = { 8 }, x2s[3] = { 5, 3, 2 };
    cg_context *ctx = tt_ctx(), *c2;
    cg_tuning_entry er = fft_entry("real.large", 2);
    cg_tuning_entry ec = fft_entry("complex.large", 1);
    cg_device_info info;
    cg_tuning_db *db;
    char dir[512], path[1024];
    double *host;
    cg_tensor *x;
    int i;

    /* From the built-in defaults: a shipped tuning file may choose. */
    ck_assert_int_eq(cg_context_clear_tuning(ctx), CG_OK);
    ck_assert_int_eq(unsetenv("CLGRAD_FFT_PATH"), 0);
    ck_assert_str_eq(cg_fft_path(ctx, 1, 4096), "clfft");
    ck_assert_str_eq(cg_fft_path(ctx, 1, 17), "bluestein");
    for (i = 0; i < 3; i++) {
        ck_assert_int_eq(setenv("CLGRAD_FFT_PATH", paths[i], 1), 0);
        ck_assert_str_eq(cg_fft_path(ctx, 1, 4096), paths[i]);
        ck_assert_str_eq(cg_fft_path(ctx, 0, 1024),
                         i == 1 ? "clfft" : paths[i]);
        /* radix does every length; the others leave 17 to Bluestein */
        ck_assert_str_eq(cg_fft_path(ctx, 0, 17),
                         i == 2 ? "radix" : "bluestein");
        check_large(paths[i]);
    }
    ck_assert_int_eq(setenv("CLGRAD_FFT_PATH", "fast", 1), 0);
    ck_assert_ptr_null(cg_fft_path(ctx, 1, 4096));
    x = rand_tensor(1, xs, &host);
    EXPECT_FAIL(cg_rfft(x, CG_FFT_DEFAULT_N, -1, CG_FFT_BACKWARD),
                "CG_EINVAL", "CLGRAD_FFT_PATH");
    cg_tensor_free(x);
    free(host);
    x = rand_tensor(3, x2s, &host);
    EXPECT_FAIL(cg_irfft(x, CG_FFT_DEFAULT_N, 0, CG_FFT_BACKWARD),
                "CG_EINVAL", "CLGRAD_FFT_PATH");
    EXPECT_FAIL(cg_irfft2(x, NULL, CG_FFT_ORTHO), "CG_EINVAL",
                "CLGRAD_FFT_PATH");
    cg_tensor_free(x);
    free(host);
    ck_assert_int_eq(setenv("CLGRAD_FFT_PATH", "auto", 1), 0);

    /* A database file, read by a new context. */
    snprintf(dir, sizeof dir, "%s/fft-tuning", tt_tmpdir());
    ck_assert_int_eq(setenv("CLGRAD_TUNING_DIR", dir, 1), 0);
    ck_assert_int_eq(cg_context_device_info(ctx, &info), CG_OK);
    ck_assert_int_eq(cg_tuning_path(&info, path, sizeof path), CG_OK);
    db = cg_tuning_db_new(&info);
    ck_assert_ptr_nonnull(db);
    ck_assert_int_eq(cg_tuning_db_put(db, &er), CG_OK);
    ck_assert_int_eq(cg_tuning_db_put(db, &ec), CG_OK);
    ck_assert_msg(cg_tuning_db_save(db, path) == CG_OK, "%s", TT_ERR);
    cg_tuning_db_free(db);
    c2 = cg_context_new(NULL);
    ck_assert_msg(c2 != NULL, "%s", TT_ERR);
    ck_assert_str_eq(cg_fft_path(c2, 1, 4096), "complex");
    ck_assert_str_eq(cg_fft_path(c2, 1, 2048), "clfft");
    ck_assert_str_eq(cg_fft_path(c2, 0, 1024), "bluestein");
    ck_assert_str_eq(cg_fft_path(c2, 0, 1000), "clfft");
    cg_context_free(c2);
    ck_assert_int_eq(unsetenv("CLGRAD_TUNING_DIR"), 0);

    /* The same entries in force on the test's context. */
    ck_assert_msg(cg_context_set_tuning(ctx, &er) == CG_OK, "%s", TT_ERR);
    ck_assert_msg(cg_context_set_tuning(ctx, &ec) == CG_OK, "%s", TT_ERR);
    ck_assert_str_eq(cg_fft_path(ctx, 1, 4096), "complex");
    ck_assert_str_eq(cg_fft_path(ctx, 0, 2048), "bluestein");
    check_large("tuning");
    ck_assert_int_eq(setenv("CLGRAD_FFT_PATH", "clfft", 1), 0);
    ck_assert_str_eq(cg_fft_path(ctx, 1, 4096), "clfft");
    ck_assert_int_eq(unsetenv("CLGRAD_FFT_PATH"), 0);
    ck_assert_int_eq(cg_context_clear_tuning(ctx), CG_OK);
    ck_assert_str_eq(cg_fft_path(ctx, 0, 2048), "clfft");

    er = fft_entry("real.huge", 1);
    ck_assert_int_eq(cg_context_set_tuning(ctx, &er), CG_EINVAL);
    ck_assert_msg(strstr(cg_last_error(), "real.huge"), "%s", TT_ERR);
    er = fft_entry("real.large", 3);
    ck_assert_msg(cg_context_set_tuning(ctx, &er) == CG_OK, "%s", TT_ERR);
    ck_assert_str_eq(cg_fft_path(ctx, 1, 4096), "radix");
    ck_assert_str_eq(cg_fft_path(ctx, 1, 17), "bluestein");
    ck_assert_int_eq(cg_context_clear_tuning(ctx), CG_OK);
    er = fft_entry("real.large", 4);
    ck_assert_int_eq(cg_context_set_tuning(ctx, &er), CG_EINVAL);
    ck_assert_msg(strstr(cg_last_error(), "path"), "%s", TT_ERR);
    ck_assert_ptr_null(cg_fft_path(ctx, 1, 0));
    ck_assert_ptr_null(cg_fft_path(NULL, 1, 8));
}
END_TEST

/* The path radix (clgrad's own Stockham passes, kernels/fft.cl) against
 * the DFT: each radix (2, 3, 4, 5, 7, 8) and mixes of them, the real
 * kinds' half-length passes (even n) and the complex path (odd n), and
 * Bluestein's algorithm on the passes (17, 1009: a prime factor above 7;
 * 2310 = 2 3 5 7 11), at batches 1 and 33 along the last and a middle
 * axis (above 2048: 1 and 3, last axis), each norm on some; the middle
 * axis of a complex kind at batch 33 runs down the columns (inner 11).
 * Under a checker, four lengths that still run every kernel. */
START_TEST(radix_path_matches_dft)
{
    static const int64_t all[] = { 2, 3, 5, 7, 8, 12, 14, 17, 30, 64, 100,
                                   343, 1000, 1009, 2048, 2310, 4096 };
    /* under a checker: radix 7; 4 3 (real: 2 3); Bluestein on 35 = 5 7;
     * 8 5 (real: 4 5) */
    static const int64_t few[] = { 7, 12, 17, 40 };
    const int64_t *lens = tt_checker() ? few : all;
    int nlens = tt_checker() ? 4 : 17, li, kind, mid, b;
    int64_t xs[CG_MAX_DIMS];
    double worst = 0;

    ck_assert_int_eq(setenv("CLGRAD_FFT_PATH", "radix", 1), 0);
    for (li = 0; li < nlens; li++)
        for (kind = FFT; kind <= IRFFT; kind++)
            for (mid = 0; mid < 2; mid++)
                for (b = 0; b < 2; b++) {
                    int64_t n = lens[li];
                    int norm = (int)((li + kind + mid + b) % 3), nd;
                    fparam p = { kind, n, mid ? 1 : -1, norm, NULL };
                    double e, tol = 1e-5 * sqrt(n > 2 ? log2((double)n)
                                                      : 1);

                    /* above 2048 (the reference costs n^2 a row) a
                     * batch of 3 along the last axis only */
                    if ((tt_host_checker() && !b) || (n > 2048 && b && mid))
                        continue;
                    nd = shape_for(kind, n, mid, b ? (n > 2048 ? 3 : 33)
                                                   : 1, xs);
                    ck_assert_str_eq(cg_fft_path(tt_ctx(), kind >= RFFT,
                                                 n), "radix");
                    e = forward_error(&p, nd, xs);
                    worst = fmax(worst, e);
                    ck_assert_msg(e <= tol, "radix: %s n=%lld %s axis "
                                  "batch %s norm %s: error %g > %g",
                                  kind_name[kind], (long long)n,
                                  mid ? "middle" : "last", b ? "> 1" : "1",
                                  norm_name[norm], e, tol);
                }
    ck_assert_int_eq(unsetenv("CLGRAD_FFT_PATH"), 0);
    printf("radix_path_matches_dft: worst relative error %.3g\n", worst);
}
END_TEST

START_TEST(print_error_table)
{
    oc_report();
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("fft");
    TCase *tc = tcase_create("fft");

    tt_require_device();
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, transforms_match_dft);
    tcase_add_test(tc, gradients_match_finite_differences);
    tcase_add_test(tc, round_trips_and_parseval);
    tcase_add_test(tc, irfft_leaves_its_input_alone);
    tcase_add_test(tc, transforms_match_pytorch_fixture);
    tcase_add_test(tc, plans_are_baked_once);
    tcase_add_test(tc, plans_beyond_the_limit_go_least_recent_first);
    tcase_add_test(tc, bad_input_fails_and_launches_nothing);
    tcase_add_test(tc, double_backward_and_forward_mode_apply_the_transform);
    tcase_add_test(tc, complex_helpers_match_reference);
    tcase_add_test(tc, complex_abs_and_angle_gradients_at_zero);
    tcase_add_test(tc, fallback_paths_follow_env_and_tuning);
    tcase_add_test(tc, print_error_table);
    suite_add_tcase(s, tc);
    /* A case of its own, which make check-oclgrind runs (clFFT's
     * generated kernels are too slow to simulate). */
    tc = tcase_create("radix");
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, radix_path_matches_dft);
    suite_add_tcase(s, tc);
    return tt_run(s);
}
