/* SPDX-License-Identifier: MIT */
/*
 * kernels/fft.cl - clgrad's own Fourier transforms and the kernels around
 * clFFT's (lib/ops/fft.c): Bluestein's algorithm, the radix passes of
 * the path "radix" (further down) and the complex helpers (at the end).
 *
 * Bluestein's algorithm, for the lengths n clFFT (or the radix passes)
 * cannot do, a prime factor above 13 (7): the DFT of length n as a
 * circular convolution, of a length M >= 2n - 1 that they do, with the
 * chirp w[k] = e^(s i pi k^2 / n) (s = -1 forward, +1 inverse), which the
 * host computes in double:
 *
 *   X[k] = w[k] * sum_j (x[j] w[j]) conj(w[k - j])
 *
 *   fft_chirp_pre:   a[r, k] = x[r, k] * w[k] for k < n, 0 for n <= k < M;
 *                    mode 0: x is rows of n complex values, 1: rows of n
 *                    reals, 2: rows of the n/2 + 1 bins of a Hermitian
 *                    spectrum (bin k >= n/2 + 1 is conj(bin n - k); the
 *                    imaginary parts of bin 0 and bin n/2 are ignored)
 *   fft_cmul:        a[r, k] *= f[k] (complex), every row r
 *   fft_chirp_post:  y[r, k] = scale * w[k] * c[r, k] for k < nout;
 *                    mode 0: complex y, 1: its real part only
 *
 * Complex values are float2 (real, imaginary).  Index space: one
 * work-item per complex element written (rows * M, or rows * nout),
 * padded to the host's work-group size.  float32 only; no tunable
 * parameters.  The complex helpers' kernels follow at the end.
 */

static inline float2
cmul(float2 a, float2 b)
{
    return (float2)(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

__kernel void
fft_chirp_pre(__global const float *x, __global float2 *a,
              __global const float2 *w, uint n, uint m, uint rows, int mode)
{
    size_t i = get_global_id(0), r = i / m, k = i % m, nh = n / 2 + 1;
    float2 v = (float2)(0.0f, 0.0f);

    if (i >= (size_t)rows * m)
        return;
    if (k < n) {
        if (mode == 0) {
            v = vload2(r * n + k, x);
        } else if (mode == 1) {
            v.x = x[r * n + k];
        } else if (k < nh) {
            v = vload2(r * nh + k, x);
            if (k == 0 || 2 * k == n)
                v.y = 0.0f;
        } else {
            v = vload2(r * nh + (n - k), x);
            v.y = -v.y;
        }
        v = cmul(v, w[k]);
    }
    a[i] = v;
}

__kernel void
fft_cmul(__global float2 *a, __global const float2 *f, uint m, uint rows)
{
    size_t i = get_global_id(0);

    if (i >= (size_t)rows * m)
        return;
    a[i] = cmul(a[i], f[i % m]);
}

__kernel void
fft_chirp_post(__global const float2 *c, __global float *y,
               __global const float2 *w, uint m, uint nout, uint rows,
               int mode, float scale)
{
    size_t i = get_global_id(0), r = i / nout, k = i % nout;
    float2 v;

    if (i >= (size_t)rows * nout)
        return;
    v = scale * cmul(c[r * m + k], w[k]);
    if (mode == 0)
        vstore2(v, i, y);
    else
        y[i] = v.x;
}

/* clgrad's own transforms (lib/ops/fft.c's path "radix"): a complex
 * transform of length n whose prime factors are 2, 3, 5 and 7, as
 * Stockham passes (autosorting, out of place), one launch each:
 *
 * @kernels fft_radix2 fft_radix3 fft_radix4 fft_radix5 fft_radix7
 * @kernels fft_radix8
 *
 *   fft_radixR:  the pass of radix R after passes whose radices multiply
 *                to ns: for butterfly j < t = n/R of a row, with
 *                k = j mod ns and g = j div ns,
 *                  v[q] = x[j + q t] * tw[(q - 1) ns + k]   (q >= 1)
 *                  y[g ns R + k + q ns] = scale * DFT_R(v)[q]
 *                where the pass's twiddles, from tw + off, are
 *                tw[(q - 1) ns + k] = e^(-2 pi i k q / (ns R)), computed
 *                by the host in double.  Each work-item does FFT_CH
 *                consecutive butterflies, k = a .. a + FFT_CH - 1 of one
 *                group g (for the first pass, ns = 1: g = a ..), a loop
 *                the compiler vectorises.  Index space:
 *                (ceil(ns / FFT_CH), t / ns, rows), for the first pass
 *                (ceil(t / FFT_CH), 1, rows); the host's work-groups
 *                divide it, nothing padded.  x, y interleaved floats.
 *                With inner > 1 the transforms run down the columns of
 *                contiguous [n][inner] matrices instead (a middle axis,
 *                moved nowhere): x[j + q t] is x[(j + q t) inner + c],
 *                and a work-item does butterfly j for FFT_CH consecutive
 *                columns c; index space (ceil(inner / FFT_CH), t,
 *                matrices).
 *                flags: 1 conjugates the input, 2 the output; the first
 *                and last passes of an inverse transform set them
 *                (IDFT(x) = conj(DFT(conj(x)))).
 *   fft_r2c_post: the spectrum of rows of n = 2h reals from the complex
 *                transform Z of length h of the same rows read as h
 *                complex values: for k <= h, with Z[h] = Z[0],
 *                  X[k] = scale * ((Z[k] + conj(Z[h - k])) / 2
 *                         - i e^(-2 pi i k / n) (Z[k] - conj(Z[h - k])) / 2)
 *                (bins 0 and h: Re Z[0] +- Im Z[0]).
 *   fft_c2r_pre: the other way: from the h + 1 bins of a Hermitian
 *                spectrum (the imaginary parts of bins 0 and h ignored),
 *                for k < h
 *                  Z[k] = scale * (X[k] + conj(X[h - k])
 *                         + i e^(2 pi i k / n) (X[k] - conj(X[h - k])))
 *                whose inverse complex transform of length h is the n
 *                reals read as h complex values.
 *   Both: FFT_CH consecutive k a work-item, work-items
 *   (ceil(h / FFT_CH), rows), the first of a row doing bins 0 and h too;
 *   rw[k] = e^(-2 pi i k / n), k <= h, from the host.
 *
 * float32 only; no tunable parameters (FFT_CH, 16, is mirrored in
 * lib/ops/fft.c): the pass plan (radix 8 first, then 4, 2, 3, 5, 7) is
 * the host's.
 */

/* The radix kernels work on scalars (ar, ai: the real and imaginary parts
 * of the R points) so that the compiler can vectorise the loop over a
 * work-item's butterflies; every array index is a constant once the
 * loops are unrolled.  The forward DFTs of R points, in place:
 * y[q] = sum_p v[p] e^(-2 pi i pq / R); DFT4S on the points o, o + s,
 * o + 2s, o + 3s; the odd radices from the pairs v[p] +- v[R - p]. */
#define DFT4S(ar, ai, o, s) do {                                              \
        float t0r_ = ar[o] + ar[o + 2 * s], t0i_ = ai[o] + ai[o + 2 * s];     \
        float t1r_ = ar[o] - ar[o + 2 * s], t1i_ = ai[o] - ai[o + 2 * s];     \
        float t2r_ = ar[o + s] + ar[o + 3 * s];                               \
        float t2i_ = ai[o + s] + ai[o + 3 * s];                               \
        float dr_ = ar[o + s] - ar[o + 3 * s];                                \
        float di_ = ai[o + s] - ai[o + 3 * s];                                \
        ar[o] = t0r_ + t2r_;                                                  \
        ai[o] = t0i_ + t2i_;                                                  \
        ar[o + 2 * s] = t0r_ - t2r_;                                          \
        ai[o + 2 * s] = t0i_ - t2i_;                                          \
        ar[o + s] = t1r_ + di_;                                               \
        ai[o + s] = t1i_ - dr_;                                               \
        ar[o + 3 * s] = t1r_ - di_;                                           \
        ai[o + 3 * s] = t1i_ + dr_;                                           \
    } while (0)

#define DFT_2(ar, ai) do {                                                    \
        float r_ = ar[0], i_ = ai[0];                                         \
        ar[0] = r_ + ar[1];                                                   \
        ai[0] = i_ + ai[1];                                                   \
        ar[1] = r_ - ar[1];                                                   \
        ai[1] = i_ - ai[1];                                                   \
    } while (0)

#define DFT_4(ar, ai) DFT4S(ar, ai, 0, 1)

#define FFT_R2 0.707106781186547524f

/* The DFT4s of the even and the odd points, then a radix-2 step with
 * the twiddles e^(-2 pi i p / 8) on the odd ones. */
#define DFT_8(ar, ai) do {                                                    \
        float er_[4], ei_[4], ur_[4], ui_[4];                                 \
        int p_;                                                               \
                                                                              \
        DFT4S(ar, ai, 0, 2);                                                  \
        DFT4S(ar, ai, 1, 2);                                                  \
        _Pragma("unroll")                                                     \
        for (p_ = 0; p_ < 4; p_++) {                                          \
            er_[p_] = ar[2 * p_];                                             \
            ei_[p_] = ai[2 * p_];                                             \
        }                                                                     \
        ur_[0] = ar[1];                                                       \
        ui_[0] = ai[1];                                                       \
        ur_[1] = FFT_R2 * (ar[3] + ai[3]);                                    \
        ui_[1] = FFT_R2 * (ai[3] - ar[3]);                                    \
        ur_[2] = ai[5];                                                       \
        ui_[2] = -ar[5];                                                      \
        ur_[3] = FFT_R2 * (ai[7] - ar[7]);                                    \
        ui_[3] = -FFT_R2 * (ar[7] + ai[7]);                                   \
        _Pragma("unroll")                                                     \
        for (p_ = 0; p_ < 4; p_++) {                                          \
            ar[p_] = er_[p_] + ur_[p_];                                       \
            ai[p_] = ei_[p_] + ui_[p_];                                       \
            ar[p_ + 4] = er_[p_] - ur_[p_];                                   \
            ai[p_ + 4] = ei_[p_] - ui_[p_];                                   \
        }                                                                     \
    } while (0)

__constant float fft_cos3[3] = { 1.0f, -0.5f, -0.5f };
__constant float fft_sin3[3] = { 0.0f, 0.866025404f, -0.866025404f };
__constant float fft_cos5[5] = { 1.0f, 0.309016994f, -0.809016994f,
                                 -0.809016994f, 0.309016994f };
__constant float fft_sin5[5] = { 0.0f, 0.951056516f, 0.587785252f,
                                 -0.587785252f, -0.951056516f };
__constant float fft_cos7[7] = { 1.0f, 0.623489802f, -0.222520934f,
                                 -0.900968868f, -0.900968868f,
                                 -0.222520934f, 0.623489802f };
__constant float fft_sin7[7] = { 0.0f, 0.781831482f, 0.974927912f,
                                 0.433883739f, -0.433883739f,
                                 -0.974927912f, -0.781831482f };

#define DFT_ODD(ar, ai, R) do {                                               \
        float sr_[R / 2], si_[R / 2], dr_[R / 2], di_[R / 2];                 \
        float y0r_ = ar[0], y0i_ = ai[0];                                     \
        int p_, q_;                                                           \
                                                                              \
        _Pragma("unroll")                                                     \
        for (p_ = 1; p_ <= R / 2; p_++) {                                     \
            sr_[p_ - 1] = ar[p_] + ar[R - p_];                                \
            si_[p_ - 1] = ai[p_] + ai[R - p_];                                \
            dr_[p_ - 1] = ar[p_] - ar[R - p_];                                \
            di_[p_ - 1] = ai[p_] - ai[R - p_];                                \
            y0r_ += sr_[p_ - 1];                                              \
            y0i_ += si_[p_ - 1];                                              \
        }                                                                     \
        _Pragma("unroll")                                                     \
        for (q_ = 1; q_ <= R / 2; q_++) {                                     \
            float rer_ = ar[0], rei_ = ai[0], imr_ = 0.0f, imi_ = 0.0f;       \
                                                                              \
            _Pragma("unroll")                                                 \
            for (p_ = 1; p_ <= R / 2; p_++) {                                 \
                rer_ += fft_cos##R[p_ * q_ % R] * sr_[p_ - 1];                \
                rei_ += fft_cos##R[p_ * q_ % R] * si_[p_ - 1];                \
                imr_ += fft_sin##R[p_ * q_ % R] * dr_[p_ - 1];                \
                imi_ += fft_sin##R[p_ * q_ % R] * di_[p_ - 1];                \
            }                                                                 \
            /* y[q] = re - i im, y[R - q] = re + i im */                      \
            ar[q_] = rer_ + imi_;                                             \
            ai[q_] = rei_ - imr_;                                             \
            ar[R - q_] = rer_ - imi_;                                         \
            ai[R - q_] = rei_ + imr_;                                         \
        }                                                                     \
        ar[0] = y0r_;                                                         \
        ai[0] = y0i_;                                                         \
    } while (0)

#define DFT_3(ar, ai) DFT_ODD(ar, ai, 3)
#define DFT_5(ar, ai) DFT_ODD(ar, ai, 5)
#define DFT_7(ar, ai) DFT_ODD(ar, ai, 7)

/* Butterflies per work-item: consecutive ones, so that the loop over
 * them reads and writes consecutive values (the first pass: consecutive
 * g, reads only). */
#define FFT_CH 16

/* One butterfly, over interleaved floats: point q from X[2 q XS],
 * twiddled by TW[2 (q - 1) TS] (q >= 1), its DFT times scale into
 * Y[2 q YS]; cin, cout = -1 conjugate. */
#define FFT_BUTTERFLY(R, X, XS, Y, YS, TW, TS)                                \
    do {                                                                      \
        float ar[R], ai[R];                                                   \
        int q;                                                                \
                                                                              \
        _Pragma("unroll")                                                     \
        for (q = 0; q < R; q++) {                                             \
            ar[q] = X[2 * (size_t)q * (XS)];                                  \
            ai[q] = cin * X[2 * (size_t)q * (XS) + 1];                        \
        }                                                                     \
        _Pragma("unroll")                                                     \
        for (q = 1; q < R; q++) {                                             \
            float wr = TW[2 * (q - 1) * (TS)];                                \
            float wi = TW[2 * (q - 1) * (TS) + 1];                            \
            float r = ar[q];                                                  \
                                                                              \
            ar[q] = r * wr - ai[q] * wi;                                      \
            ai[q] = r * wi + ai[q] * wr;                                      \
        }                                                                     \
        DFT_##R(ar, ai);                                                      \
        _Pragma("unroll")                                                     \
        for (q = 0; q < R; q++) {                                             \
            Y[2 * (size_t)q * (YS)] = scale * ar[q];                          \
            Y[2 * (size_t)q * (YS) + 1] = cout * scale * ai[q];               \
        }                                                                     \
    } while (0)

#define FFT_RADIX(R)                                                          \
__kernel void                                                                 \
fft_radix##R(__global const float *restrict x, __global float *restrict y,    \
             __global const float *restrict tw, uint off, uint n, uint ns,    \
             uint inner, int flags, float scale)                              \
{                                                                             \
    uint a = get_global_id(0) * FFT_CH, b = get_global_id(1);                 \
    uint t = n / R, u, cnt;                                                   \
    size_t row = (size_t)get_global_id(2) * n;                                \
    float cin = flags & 1 ? -1.0f : 1.0f, cout = flags & 2 ? -1.0f : 1.0f;    \
                                                                              \
    tw += 2 * (size_t)off;                                                    \
    if (inner > 1) {                                                          \
        /* butterfly j = b of matrix get_global_id(2), columns a + u */       \
        uint k = b % ns, g = b / ns;                                          \
        size_t m = row * inner;                                               \
        __global const float *xc = x + 2 * (m + (size_t)b * inner + a);       \
        __global float *yc = y + 2 * (m + ((size_t)g * ns * R + k) * inner    \
                                      + a);                                   \
                                                                              \
        if (a >= inner)                                                       \
            return;                                                           \
        cnt = min((uint)FFT_CH, inner - a);                                   \
        _Pragma("clang loop vectorize(assume_safety)")                        \
        for (u = 0; u < cnt; u++)                                             \
            FFT_BUTTERFLY(R, (xc + 2 * u), (size_t)t * inner, (yc + 2 * u),   \
                          (size_t)ns * inner, (tw + 2 * k), ns);              \
    } else if (ns == 1) {                                                     \
        /* butterflies g = a + u, k = 0: y[g R + q] */                        \
        __global const float *xg = x + 2 * (row + a);                         \
        __global float *yg = y + 2 * (row + (size_t)a * R);                   \
                                                                              \
        if (a >= t)                                                           \
            return;                                                           \
        cnt = min((uint)FFT_CH, t - a);                                       \
        _Pragma("clang loop vectorize(assume_safety)")                        \
        for (u = 0; u < cnt; u++)                                             \
            FFT_BUTTERFLY(R, (xg + 2 * u), t, (yg + 2 * u * R), 1, tw, 1);    \
    } else {                                                                  \
        /* butterflies k = a + u of group g = b */                            \
        __global const float *xk = x + 2 * (row + (size_t)b * ns + a);        \
        __global float *yk = y + 2 * (row + (size_t)b * ns * R + a);          \
                                                                              \
        if (a >= ns)                                                          \
            return;                                                           \
        cnt = min((uint)FFT_CH, ns - a);                                      \
        _Pragma("clang loop vectorize(assume_safety)")                        \
        for (u = 0; u < cnt; u++)                                             \
            FFT_BUTTERFLY(R, (xk + 2 * u), t, (yk + 2 * u), ns,               \
                          (tw + 2 * (a + u)), ns);                            \
    }                                                                         \
}

FFT_RADIX(2)
FFT_RADIX(3)
FFT_RADIX(4)
FFT_RADIX(5)
FFT_RADIX(7)
FFT_RADIX(8)

__kernel void
fft_r2c_post(__global const float *restrict z, __global float *restrict out,
             __global const float *restrict rw, uint h, float scale)
{
    uint a = get_global_id(0) * FFT_CH, k, end;
    size_t r = get_global_id(1);
    __global const float *zr = z + 2 * r * h;
    __global float *o = out + 2 * r * (h + 1);

    if (a >= h)
        return;
    end = min(a + FFT_CH, h);
    if (a == 0) {
        /* bins 0 and h, both from Z[0]: Re Z[0] +- Im Z[0] */
        o[0] = scale * (zr[0] + zr[1]);
        o[1] = 0.0f;
        o[2 * h] = scale * (zr[0] - zr[1]);
        o[2 * h + 1] = 0.0f;
        a = 1;
    }
    _Pragma("clang loop vectorize(assume_safety)")
    for (k = a; k < end; k++) {
        float ar = zr[2 * k], ai = zr[2 * k + 1];
        float br = zr[2 * (h - k)], bi = -zr[2 * (h - k) + 1];
        float er = 0.5f * (ar + br), ei = 0.5f * (ai + bi);
        float or = 0.5f * (ai - bi), oi = -0.5f * (ar - br);
        float wr = rw[2 * k], wi = rw[2 * k + 1];

        o[2 * k] = scale * (er + wr * or - wi * oi);
        o[2 * k + 1] = scale * (ei + wr * oi + wi * or);
    }
}

__kernel void
fft_c2r_pre(__global const float *restrict in, __global float *restrict z,
            __global const float *restrict rw, uint h, float scale)
{
    uint a = get_global_id(0) * FFT_CH, k, end;
    size_t r = get_global_id(1);
    __global const float *x = in + 2 * r * (h + 1);
    __global float *zr = z + 2 * r * h;

    if (a >= h)
        return;
    end = min(a + FFT_CH, h);
    if (a == 0) {
        /* k = 0: X[0] and X[h] taken as real */
        zr[0] = scale * (x[0] + x[2 * h]);
        zr[1] = scale * (x[0] - x[2 * h]);
        a = 1;
    }
    _Pragma("clang loop vectorize(assume_safety)")
    for (k = a; k < end; k++) {
        float ar = x[2 * k], ai = x[2 * k + 1];
        float br = x[2 * (h - k)], bi = -x[2 * (h - k) + 1];
        float dr = ar - br, di = ai - bi;
        float wr = rw[2 * k], wi = -rw[2 * k + 1];
        float or = wr * dr - wi * di, oi = wr * di + wi * dr;

        zr[2 * k] = scale * (ar + br - oi);
        zr[2 * k + 1] = scale * (ai + bi + or);
    }
}

/* Complex helpers (lib/ops/complex.c), over n contiguous complex values
 * z = (x[2i], x[2i + 1]); one work-item per value:
 *
 *   complex_abs_f:    y[i] = |z| (hypot: no overflow for large parts)
 *   complex_abs_b:    gx[i] = g[i] z / |z|, 0 where z = 0 (PyTorch's sgn)
 *   complex_angle_f:  y[i] = atan2(im, re)
 *   complex_angle_b:  gx[i] = g[i] (-im, re) / |z|^2, 0 where z = 0
 */
__kernel void
complex_abs_f(__global const float2 *x, __global float *y, uint n)
{
    size_t i = get_global_id(0);

    if (i >= n)
        return;
    y[i] = hypot(x[i].x, x[i].y);
}

__kernel void
complex_abs_b(__global const float2 *x, __global const float *g,
              __global float2 *gx, uint n)
{
    size_t i = get_global_id(0);
    float r;

    if (i >= n)
        return;
    r = hypot(x[i].x, x[i].y);
    gx[i] = r > 0.0f ? g[i] / r * x[i] : (float2)(0.0f, 0.0f);
}

__kernel void
complex_angle_f(__global const float2 *x, __global float *y, uint n)
{
    size_t i = get_global_id(0);

    if (i >= n)
        return;
    y[i] = atan2(x[i].y, x[i].x);
}

__kernel void
complex_angle_b(__global const float2 *x, __global const float *g,
                __global float2 *gx, uint n)
{
    size_t i = get_global_id(0);
    float r;

    if (i >= n)
        return;
    r = hypot(x[i].x, x[i].y);
    gx[i] = r > 0.0f ? g[i] / r / r * (float2)(-x[i].y, x[i].x)
                     : (float2)(0.0f, 0.0f);
}
