/* SPDX-License-Identifier: MIT */
/*
 * lib/ops/conv_fft.c - conv1d's third algorithm: cross-correlation by FFT,
 * composed of differentiable ops (rfft, complex conj and product or a
 * batched real matmul, irfft, views), so its gradients, double backward
 * and forward mode are theirs; and its choice (cg__conv1d_fft_choose).
 *
 * For x [N, C, L], weight [K, Cg, S] (Cg = C / G), dilation d (Sd =
 * d (S - 1) + 1), left padding pl and total padding P:
 *
 *   xp   x with pl zeros in front (one concat; the right padding is the
 *        transform's own zero padding)
 *   wd   the weight with d - 1 zeros after each tap (one concat), d > 1
 *   n    the least length >= max(L + P, OL stride) whose prime factors
 *        are 2, 3, 5 and 7 (clFFT's fastest, never Bluestein's)
 *   Y    rfft(xp, n) times conj(rfft(wd, n)), summed over each group's
 *        input channels: for one channel per group (depthwise) a
 *        broadcast complex product; else one real matmul batched over
 *        (group, frequency), the complex product written as [xr xi] @
 *        [[conj w], [i conj w]] on (re, im) pairs, so nothing else runs
 *        per channel
 *   y    irfft(Y, n) cropped to its first OL stride points, subsampled by
 *        the stride, plus the bias
 *
 * The circular correlation c[m] = sum_j xp[(m + j) mod n] wd[j] equals
 * the linear one for m <= n - Sd, and the outputs need m <= L + P - Sd:
 * hence n >= L + P.  Every step runs on the device in order; nothing
 * waits on the host.
 */
#include "config.h"

#include <string.h>

#include "ops/conv_internal.h"
#include "tune/internal.h"

/* The least n >= t whose prime factors are 2, 3, 5 and 7. */
static int64_t
fft_length(int64_t t)
{
    static const int64_t p[4] = { 2, 3, 5, 7 };
    int64_t n, m;
    int k;

    for (n = t > 1 ? t : 1;; n++) {
        for (m = n, k = 0; k < 4; k++)
            while (m % p[k] == 0)
                m /= p[k];
        if (m == 1)
            return n;
    }
}

int
cg__conv1d_fft_min_kernel(cg_context *ctx, int64_t *min_kernel)
{
    const cg_tuning_entry *e = cg__tuning_find(ctx, "conv", "fwd1d.long");
    long a = 2, m = CG__CONV_FFT_MIN_KERNEL;

    if (e) {
        cg__tuning_param(e, "algo", &a);
        cg__tuning_param(e, "min_kernel", &m);
    }
    *min_kernel = a == 2 ? (int64_t)m : 0;
    return CG_OK;
}

int
cg__conv1d_fft_choose(cg_context *ctx, const cg__conv_geom *g, int *fft)
{
    int64_t sd = g->dw * (g->S - 1) + 1, m;
    int v = 2, set, status;

    *fft = 0;
    if ((status = cg__env_choice("CLGRAD_CONV_ALGO", cg__conv_algo_names,
                                 4, &v, &set)))
        return status;
    if (set && v != 2) {
        *fft = v == 3;
        return CG_OK;
    }
    cg__conv1d_fft_min_kernel(ctx, &m);
    *fft = m > 0 && sd >= m;
    return CG_OK;
}

/* The temporaries of one call, freed together. */
typedef struct {
    cg_tensor *t[40];
    int n;
} temps;

/* Keeps t (NULL passes through) for the end. */
static cg_tensor *
keep(temps *tp, cg_tensor *t)
{
    if (t && tp->n < (int)(sizeof tp->t / sizeof tp->t[0]))
        tp->t[tp->n++] = t;
    return t;
}

/* t with `before` zeros in front along its last dimension (before > 0),
 * or `after` zeros behind a new last dimension of size 1 (after > 0),
 * flattened onto the one before: the weight's dilation. */
static cg_tensor *
zeros_around(temps *tp, cg_tensor *t, int64_t before, int64_t after)
{
    int64_t s[5];
    cg_tensor *pair[2], *z, *u;
    int nd = t->ndim, k;

    for (k = 0; k < nd; k++)
        s[k] = t->shape[k];
    if (before) {
        s[nd - 1] = before;
        z = keep(tp, cg_full_dtype(t->ctx, CG_F32, nd, s, 0.0f));
        pair[0] = z;
        pair[1] = t;
        return z ? keep(tp, cg_concat(pair, 2, nd - 1)) : NULL;
    }
    s[nd] = after;
    u = keep(tp, cg_unsqueeze(t, nd));
    z = u ? keep(tp, cg_full_dtype(t->ctx, CG_F32, nd + 1, s, 0.0f)) : NULL;
    pair[0] = u;
    pair[1] = z;
    u = z ? keep(tp, cg_concat(pair, 2, nd)) : NULL;
    s[nd - 1] *= after + 1;
    return u ? keep(tp, cg_reshape(u, nd, s)) : NULL;
}

/* The spectra's products summed over each group's input channels: X [N,
 * C, F, 2], W [K, Cg, F, 2] (not conjugated) -> [N, K, F, 2]. */
static cg_tensor *
contract(temps *tp, const cg__conv_geom *g, cg_tensor *X, cg_tensor *W)
{
    int64_t N = g->N, G = g->G, Cg = g->C / g->G, Kg = g->K / g->G;
    int64_t F = X->shape[2], s[6];
    static const int px[5] = { 1, 3, 0, 2, 4 };
    static const int pw[6] = { 0, 4, 2, 3, 1, 5 };
    static const int py[5] = { 2, 0, 3, 1, 4 };
    cg_tensor *wc = keep(tp, cg_complex_conj(W)), *t, *u, *pair[2];

    if (!wc)
        return NULL;
    if (Cg == 1 && Kg == 1) {
        /* [N, K, F, 2] * [K, F, 2]; for one image, shapes alike: no sum
         * over a broadcast dimension in the backward */
        s[0] = 1; s[1] = g->K; s[2] = F; s[3] = 2;
        u = keep(tp, cg_reshape(wc, N == 1 ? 4 : 3, N == 1 ? s : s + 1));
        return u ? keep(tp, cg_complex_mul(X, u)) : NULL;
    }
    if (Cg == 1) {
        /* [N, G, 1, F, 2] * [G, Kg, F, 2] */
        s[0] = N; s[1] = G; s[2] = 1; s[3] = F; s[4] = 2;
        t = keep(tp, cg_reshape(X, 5, s));
        s[0] = G; s[1] = Kg; s[2] = F; s[3] = 2;
        u = t ? keep(tp, cg_reshape(wc, 4, s)) : NULL;
        t = u ? keep(tp, cg_complex_mul(t, u)) : NULL;
        s[0] = N; s[1] = g->K; s[2] = F; s[3] = 2;
        return t ? keep(tp, cg_reshape(t, 4, s)) : NULL;
    }
    /* x' [G, F, N, Cg 2] @ w' [G, F, Cg 2, Kg 2], w'[c, 0, k] = conj w,
     * w'[c, 1, k] = i conj w = (w_im, w_re) */
    s[0] = N; s[1] = G; s[2] = Cg; s[3] = F; s[4] = 2;
    t = keep(tp, cg_reshape(X, 5, s));
    t = t ? keep(tp, cg_permute(t, px)) : NULL;
    s[0] = G; s[1] = F; s[2] = N; s[3] = 2 * Cg;
    t = t ? keep(tp, cg_reshape(t, 4, s)) : NULL;
    pair[0] = keep(tp, cg_narrow(W, 3, 1, 1));
    pair[1] = pair[0] ? keep(tp, cg_narrow(W, 3, 0, 1)) : NULL;
    u = pair[1] ? keep(tp, cg_concat(pair, 2, 3)) : NULL;
    pair[0] = wc;
    pair[1] = u;
    u = u ? keep(tp, cg_stack(pair, 2, 2)) : NULL;      /* [K, Cg, 2, F, 2] */
    s[0] = G; s[1] = Kg; s[2] = Cg; s[3] = 2; s[4] = F; s[5] = 2;
    u = u ? keep(tp, cg_reshape(u, 6, s)) : NULL;
    u = u ? keep(tp, cg_permute(u, pw)) : NULL;         /* G F Cg 2 Kg 2 */
    s[0] = G; s[1] = F; s[2] = 2 * Cg; s[3] = 2 * Kg;
    u = u ? keep(tp, cg_reshape(u, 4, s)) : NULL;
    t = t && u ? keep(tp, cg_matmul(t, u)) : NULL;      /* G F N Kg 2 */
    s[0] = G; s[1] = F; s[2] = N; s[3] = Kg; s[4] = 2;
    t = t ? keep(tp, cg_reshape(t, 5, s)) : NULL;
    t = t ? keep(tp, cg_permute(t, py)) : NULL;         /* N G Kg F 2 */
    s[0] = N; s[1] = g->K; s[2] = F; s[3] = 2;
    return t ? keep(tp, cg_reshape(t, 4, s)) : NULL;
}

/* y [N, K, n] cropped, subsampled by the stride, plus the bias. */
static cg_tensor *
finish(temps *tp, const cg__conv_geom *g, cg_tensor *yc, cg_tensor *b)
{
    int64_t OL = g->OW, st = g->sw, s[4];
    cg_tensor *y = keep(tp, cg_narrow(yc, 2, 0, OL * st)), *bk;

    if (y && st > 1) {
        s[0] = g->N; s[1] = g->K; s[2] = OL; s[3] = st;
        y = keep(tp, cg_reshape(y, 4, s));
        y = y ? keep(tp, cg_narrow(y, 3, 0, 1)) : NULL;
        y = y ? keep(tp, cg_reshape(y, 3, s)) : NULL;
    }
    if (!y)
        return NULL;
    if (!b)
        return cg_contiguous(y);
    s[0] = g->K; s[1] = 1;
    bk = keep(tp, cg_reshape(b, 2, s));
    return bk ? cg_add(y, bk) : NULL;
}

static cg_tensor *
fft_f32(const cg__conv_geom *g, cg_tensor *x, cg_tensor *w, cg_tensor *b)
{
    int64_t sd = g->dw * (g->S - 1) + 1, total, pl, n;
    temps tp;
    cg_tensor *xp, *wd, *X, *W, *Y, *yc, *y = NULL;
    int k;

    tp.n = 0;
    /* stride 1 (padding "same" among them): what the output size says */
    total = g->sw == 1 ? g->OW - 1 + sd - g->W : 2 * g->pw;
    pl = g->pw;
    n = g->W + total;
    if (g->OW * g->sw > n)
        n = g->OW * g->sw;
    n = fft_length(n);
    xp = pl ? zeros_around(&tp, x, pl, 0) : x;
    wd = g->dw > 1 ? zeros_around(&tp, w, 0, g->dw - 1) : w;
    X = xp && wd ? keep(&tp, cg_rfft(xp, n, -1, CG_FFT_BACKWARD)) : NULL;
    W = X ? keep(&tp, cg_rfft(wd, n, -1, CG_FFT_BACKWARD)) : NULL;
    Y = W ? contract(&tp, g, X, W) : NULL;
    yc = Y ? keep(&tp, cg_irfft(Y, n, -1, CG_FFT_BACKWARD)) : NULL;
    if (yc)
        y = finish(&tp, g, yc, b);
    for (k = 0; k < tp.n; k++)
        cg_tensor_free(tp.t[k]);
    return y;
}

cg_tensor *
cg__conv1d_fft(const cg__conv_geom *g, cg_tensor *x, cg_tensor *w,
               cg_tensor *b)
{
    cg_tensor *xf, *wf, *bf = NULL, *yf, *y;

    if (x->dtype == CG_F32)
        return fft_f32(g, x, w, b);
    /* 16 bits: the float32 algorithm between recorded casts */
    xf = cg_to_dtype(x, CG_F32);
    wf = xf ? cg_to_dtype(w, CG_F32) : NULL;
    bf = wf && b ? cg_to_dtype(b, CG_F32) : NULL;
    yf = wf && (bf || !b) ? fft_f32(g, xf, wf, bf) : NULL;
    y = yf ? cg_to_dtype(yf, x->dtype) : NULL;
    cg_tensor_free(xf);
    cg_tensor_free(wf);
    cg_tensor_free(bf);
    cg_tensor_free(yf);
    return y;
}
