/* SPDX-License-Identifier: MIT */
/*
 * kernels/fft.cl - Bluestein's algorithm around clFFT's transforms
 * (lib/ops/fft.c), for the lengths n clFFT cannot do (a prime factor
 * above 13): the DFT of length n as a circular convolution, of length
 * M >= 2n - 1 that clFFT does, with the chirp w[k] = e^(s i pi k^2 / n)
 * (s = -1 forward, +1 inverse), which the host computes in double:
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

float2
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
