/* SPDX-License-Identifier: MIT */
/*
 * kernels/pool.cl - 2-D pooling over the last two dimensions of a
 * contiguous [planes, H, W] input (planes = N * C), PyTorch semantics.
 *
 *   max_pool2d_f:  y[p, oh, ow] = max over the window of x (padding is
 *                  never a maximum), idx[p, oh, ow] = h * W + w of the
 *                  maximum: the first in scan order (rows, then columns),
 *                  as PyTorch's CPU kernel; a NaN replaces the maximum.
 *   max_pool2d_b:  gx[p, h, w] = sum of g[p, oh, ow] over the outputs
 *                  whose idx is h * W + w (a gather: each input element
 *                  visits the few outputs whose window covers it).
 *   avg_pool2d_f:  y = sum over the window clipped to the input / div,
 *                  div = divisor_override, or the window's size counting
 *                  padding (up to H + pad) or not (count_include_pad).
 *   avg_pool2d_b:  gx[p, h, w] = sum of g[p, oh, ow] / div(oh, ow) over
 *                  the outputs whose window covers (h, w).
 *   adaptive_avg_pool2d_f/_b: windows start = floor(i * H / OH), end =
 *                  ceil((i + 1) * H / OH); div is the window's size.
 *
 * Each work-item computes one output (forward) or one input element
 * (backward) and adds its terms in a fixed order: no atomics, results are
 * identical from run to run.  Geometry: k (kernel), s (stride), pd
 * (padding), dl (dilation), as int2 (.x: height, .y: width).
 */

/* The window of output o along one dimension of size n: [*lo, *hi)
 * clipped to the input; returns its size counting padding. */
static int
avg_win(int o, int n, int k, int s, int pd, int *lo, int *hi)
{
    int a = o * s - pd, b = min(a + k, n + pd), size = b - a;

    *lo = max(a, 0);
    *hi = min(b, n);
    return size;
}

static int
avg_div(int oh, int ow, int H, int W, int2 k, int2 s, int2 pd,
        int include_pad, int divisor)
{
    int h0, h1, w0, w1;
    int sh = avg_win(oh, H, k.x, s.x, pd.x, &h0, &h1);
    int sw = avg_win(ow, W, k.y, s.y, pd.y, &w0, &w1);

    if (divisor > 0)
        return divisor;
    return include_pad ? sh * sw : (h1 - h0) * (w1 - w0);
}

__kernel void
max_pool2d_f(__global const float *x, uint planes, int H, int W, int OH,
             int OW, int2 k, int2 s, int2 pd, int2 dl, __global float *y,
             __global int *idx)
{
    size_t o = get_global_id(0), p = o / ((size_t)OH * OW);
    int r = (int)(o % ((size_t)OH * OW)), oh = r / OW, ow = r % OW;
    int h0 = oh * s.x - pd.x, w0 = ow * s.y - pd.y, i, j, best;
    __global const float *xp = x + p * H * W;
    float m = -INFINITY;

    if (p >= planes)
        return;
    while (h0 < 0)
        h0 += dl.x;
    while (w0 < 0)
        w0 += dl.y;
    best = h0 * W + w0;
    for (i = 0; i < k.x; i++) {
        int h = oh * s.x - pd.x + i * dl.x;

        if (h < 0 || h >= H)
            continue;
        for (j = 0; j < k.y; j++) {
            int w = ow * s.y - pd.y + j * dl.y;
            float v;

            if (w < 0 || w >= W)
                continue;
            v = xp[h * W + w];
            if (v > m || isnan(v)) {
                m = v;
                best = h * W + w;
            }
        }
    }
    y[o] = m;
    idx[o] = best;
}

__kernel void
max_pool2d_b(__global const int *idx, __global const float *g, uint planes,
             int H, int W, int OH, int OW, int2 k, int2 s, int2 pd, int2 dl,
             __global float *gx)
{
    size_t e = get_global_id(0), p = e / ((size_t)H * W);
    int r = (int)(e % ((size_t)H * W)), h = r / W, w = r % W, i, j;
    size_t base = p * OH * OW;
    float acc = 0.0f;

    if (p >= planes)
        return;
    for (i = 0; i < k.x; i++) {
        int th = h + pd.x - i * dl.x, oh;

        if (th < 0 || th % s.x || (oh = th / s.x) >= OH)
            continue;
        for (j = 0; j < k.y; j++) {
            int tw = w + pd.y - j * dl.y, ow;
            size_t o;

            if (tw < 0 || tw % s.y || (ow = tw / s.y) >= OW)
                continue;
            o = base + (size_t)oh * OW + ow;
            if (idx[o] == r)
                acc += g[o];
        }
    }
    gx[e] = acc;
}

__kernel void
avg_pool2d_f(__global const float *x, uint planes, int H, int W, int OH,
             int OW, int2 k, int2 s, int2 pd, int include_pad, int divisor,
             __global float *y)
{
    size_t o = get_global_id(0), p = o / ((size_t)OH * OW);
    int r = (int)(o % ((size_t)OH * OW)), oh = r / OW, ow = r % OW;
    int h0, h1, w0, w1, h, w;
    __global const float *xp = x + p * H * W;
    float acc = 0.0f;

    if (p >= planes)
        return;
    avg_win(oh, H, k.x, s.x, pd.x, &h0, &h1);
    avg_win(ow, W, k.y, s.y, pd.y, &w0, &w1);
    for (h = h0; h < h1; h++)
        for (w = w0; w < w1; w++)
            acc += xp[h * W + w];
    y[o] = acc / (float)avg_div(oh, ow, H, W, k, s, pd, include_pad,
                                divisor);
}

__kernel void
avg_pool2d_b(__global const float *g, uint planes, int H, int W, int OH,
             int OW, int2 k, int2 s, int2 pd, int include_pad, int divisor,
             __global float *gx)
{
    size_t e = get_global_id(0), p = e / ((size_t)H * W);
    int r = (int)(e % ((size_t)H * W)), h = r / W, w = r % W, oh, ow;
    /* Outputs whose unclipped window [o * s - pd, o * s - pd + k) covers
     * h: o in [ceil((h + pd - k + 1) / s), floor((h + pd) / s)]. */
    int oh0 = max(0, (h + pd.x - k.x + s.x) / s.x);
    int oh1 = min(OH - 1, (h + pd.x) / s.x);
    int ow0 = max(0, (w + pd.y - k.y + s.y) / s.y);
    int ow1 = min(OW - 1, (w + pd.y) / s.y);
    __global const float *gp = g + p * OH * OW;
    float acc = 0.0f;

    if (p >= planes)
        return;
    for (oh = oh0; oh <= oh1; oh++)
        for (ow = ow0; ow <= ow1; ow++) {
            int a0, a1, b0, b1;

            /* Clipped to the input and to H + pd: check the window. */
            avg_win(oh, H, k.x, s.x, pd.x, &a0, &a1);
            avg_win(ow, W, k.y, s.y, pd.y, &b0, &b1);
            if (h < a0 || h >= a1 || w < b0 || w >= b1)
                continue;
            acc += gp[oh * OW + ow] /
                   (float)avg_div(oh, ow, H, W, k, s, pd, include_pad,
                                  divisor);
        }
    gx[e] = acc;
}

/* PyTorch's adaptive windows: [floor(i * n / on), ceil((i + 1) * n / on)). */
static int
ada_lo(int i, int n, int on)
{
    return (int)(((long)i * n) / on);
}

static int
ada_hi(int i, int n, int on)
{
    return (int)((((long)i + 1) * n + on - 1) / on);
}

__kernel void
adaptive_avg_pool2d_f(__global const float *x, uint planes, int H, int W,
                      int OH, int OW, __global float *y)
{
    size_t o = get_global_id(0), p = o / ((size_t)OH * OW);
    int r = (int)(o % ((size_t)OH * OW)), oh = r / OW, ow = r % OW;
    int h0 = ada_lo(oh, H, OH), h1 = ada_hi(oh, H, OH);
    int w0 = ada_lo(ow, W, OW), w1 = ada_hi(ow, W, OW), h, w;
    __global const float *xp = x + p * H * W;
    float acc = 0.0f;

    if (p >= planes)
        return;
    for (h = h0; h < h1; h++)
        for (w = w0; w < w1; w++)
            acc += xp[h * W + w];
    y[o] = acc / (float)((h1 - h0) * (w1 - w0));
}

__kernel void
adaptive_avg_pool2d_b(__global const float *g, uint planes, int H, int W,
                      int OH, int OW, __global float *gx)
{
    size_t e = get_global_id(0), p = e / ((size_t)H * W);
    int r = (int)(e % ((size_t)H * W)), h = r / W, w = r % W, oh, ow;
    /* Outputs covering h lie in [floor(h * OH / H), ceil((h + 1) * OH /
     * H)); each is checked. */
    int oh0 = ada_lo(h, OH, H), oh1 = min(OH, ada_hi(h, OH, H));
    int ow0 = ada_lo(w, OW, W), ow1 = min(OW, ada_hi(w, OW, W));
    __global const float *gp = g + p * OH * OW;
    float acc = 0.0f;

    if (p >= planes)
        return;
    for (oh = oh0; oh < oh1; oh++) {
        int a0 = ada_lo(oh, H, OH), a1 = ada_hi(oh, H, OH);

        if (h < a0 || h >= a1)
            continue;
        for (ow = ow0; ow < ow1; ow++) {
            int b0 = ada_lo(ow, W, OW), b1 = ada_hi(ow, W, OW);

            if (w < b0 || w >= b1)
                continue;
            acc += gp[oh * OW + ow] / (float)((a1 - a0) * (b1 - b0));
        }
    }
    gx[e] = acc;
}
