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
 *                  visits the few outputs whose window covers it);
 *                  max_pool2d_bs the same when windows do not overlap (a
 *                  scatter from the outputs into a zeroed gx).
 *   avg_pool2d_f:  y = sum over the window clipped to the input / div,
 *                  div = divisor_override, or the window's size counting
 *                  padding (up to H + pad) or not (count_include_pad).
 *   avg_pool2d_b:  gx[p, h, w] = sum of g[p, oh, ow] / div(oh, ow) over
 *                  the outputs whose window covers (h, w).
 *   adaptive_avg_pool2d_f/_b: windows start = floor(i * H / OH), end =
 *                  ceil((i + 1) * H / OH); div is the window's size.
 *
 * Each work-item computes one output (forward; max_pool2d_f a row of
 * them) or one input element (backward) and adds its terms in a fixed
 * order: no atomics, results are identical from run to run.  Index space:
 * (element of the plane, plane), the first dimension padded to the
 * work-group size (the host checks that a plane's elements fit an int),
 * so no work-item divides 64-bit indices; max_pool2d_f: one dimension,
 * output row p OH + oh (one 64-bit division per row).  Geometry: k
 * (kernel), s (stride), pd (padding), dl (dilation), as int2 (.x:
 * height, .y: width).
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

/* The taps i in [*lo, *hi) of a window starting at a (a + i * d inside
 * [0, n)), so that the loops over them need no test. */
static void
taps(int a, int k, int d, int n, int *lo, int *hi)
{
    if (d == 1) {
        *lo = max(-a, 0);
        *hi = min(k, n - a);
        return;
    }
    *lo = a < 0 ? (-a + d - 1) / d : 0;
    *hi = a + (k - 1) * d < n ? k : (n - 1 - a) / d + 1;
}

/* Elements p0, p0 + st, ... p0 + 7 st of row v (n long), 0 outside it;
 * inside the row at stride 1 or 2, one or two vector loads (as
 * kernels/conv.cl's row8). */
static inline float8
pool_row8(__global const cg_t *v, int p0, int st, int n)
{
    float e[8];
    int l, p;

    if (st == 1 && p0 >= 0 && p0 + 8 <= n)
        return CG_VLOAD(8, 0, v + p0);
    if (st == 2 && p0 >= 0 && p0 + 16 <= n) {
        float8 a = CG_VLOAD(8, 0, v + p0);
        float8 b = CG_VLOAD(8, 0, v + p0 + 8);

        return (float8)(a.even, b.even);
    }
    for (l = 0; l < 8; l++) {
        p = p0 + l * st;
        e[l] = p >= 0 && p < n ? CG_LD(v, p) : 0.0f;
    }
    return vload8(0, e);
}

/* One work-item per output row (plane p, oh), 8 outputs of it at a time
 * in vector lanes: per tap, the lanes whose value is greater than their
 * maximum so far or a NaN take it and its index (vector selects).  One
 * item per output, keeping (maximum, index) in scalars, took 4.6 ms on
 * 32 x 32 planes of 32 x 32 (2x2, stride 2; 2-core AVX2 PoCL), the
 * scatter of its backward 0.3 ms: its compare-and-select chain became
 * branches, which random data mispredicts. */
__kernel void
max_pool2d_f(__global const cg_t *x, uint planes, int H, int W, int OH,
             int OW, int2 k, int2 s, int2 pd, int2 dl, __global cg_t *y,
             __global int *idx)
{
    size_t r = get_global_id(0), p = r / (size_t)OH, o = r * (size_t)OW;
    int oh = (int)(r % (size_t)OH), h0 = oh * s.x - pd.x;
    int ow0, i, j, i0, i1, j0, j1, l, n;
    __global const cg_t *xp = x + p * H * W;
    const int8 lane = (int8)(0, 1, 2, 3, 4, 5, 6, 7);

    if (p >= planes)
        return;
    taps(h0, k.x, dl.x, H, &i0, &i1);
    for (ow0 = 0; ow0 < OW; ow0 += 8) {
        int8 w0 = (ow0 + lane) * s.y - pd.y, out = ow0 + lane < OW;
        float8 m = (float8)(-INFINITY);
        int8 best;
        int b[8];
        float e[8];

        /* Each lane's first element inside its window, where an all -inf
         * window puts its maximum (padding is never one). */
        for (l = 0; l < 8; l++) {
            int w = ow0 * s.y - pd.y + l * s.y;

            taps(w, k.y, dl.y, W, &j0, &j1);
            b[l] = (h0 + i0 * dl.x) * W + w + j0 * dl.y;
        }
        best = vload8(0, b);
        for (i = i0; i < i1; i++) {
            int h = h0 + i * dl.x;

            for (j = 0; j < k.y; j++) {
                int8 w = w0 + j * dl.y;
                int8 ok = out & (w >= 0) & (w < W);
                float8 v = pool_row8(xp + h * W, w.s0, s.y, W);
                /* v != v is isnan(v) */
                int8 c = ok & ((v > m) | (v != v));

                m = select(m, v, c);
                best = select(best, h * W + w, c);
            }
        }
        n = min(8, OW - ow0);
        vstore8(m, 0, e);
        vstore8(best, 0, b);
        for (l = 0; l < n; l++) {
            CG_ST(y, o + (size_t)(ow0 + l), e[l]);
            idx[o + (size_t)(ow0 + l)] = b[l];
        }
    }
}

__kernel void
max_pool2d_b(__global const int *idx, __global const cg_t *g, uint planes,
             int H, int W, int OH, int OW, int2 k, int2 s, int2 pd, int2 dl,
             __global cg_t *gx)
{
    int r = (int)get_global_id(0), h = r / W, w = r % W, i, j;
    size_t p = get_global_id(1), e = p * (size_t)H * W + (size_t)r;
    size_t base = p * OH * OW;
    float acc = 0.0f;

    if (r >= H * W || p >= planes)
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
                acc += CG_LD(g, o);
        }
    }
    CG_ST(gx, e, acc);
}

/* max_pool2d_b for windows that do not overlap (stride >= dilation *
 * (kernel - 1) + 1 in both dimensions): each input element is the maximum
 * of at most one output, so the outputs scatter their gradients into gx,
 * which the host has zeroed.  Index space: (output element of the
 * plane, plane). */
__kernel void
max_pool2d_bs(__global const int *idx, __global const cg_t *g, uint planes,
              int H, int W, int OH, int OW, __global cg_t *gx)
{
    int r = (int)get_global_id(0);
    size_t p = get_global_id(1), o = p * (size_t)OH * OW + (size_t)r;

    if (r >= OH * OW || p >= planes)
        return;
    CG_ST(gx, p * (size_t)H * W + (size_t)idx[o], CG_LD(g, o));
}

/* Forward mode: the tangent of max pooling, t at each window's argmax
 * (idx from max_pool2d_f).  Index space as max_pool2d_bs's. */
__kernel void
max_pool2d_jf(__global const int *idx, __global const cg_t *t, uint planes,
              int H, int W, int OH, int OW, __global cg_t *ty)
{
    int r = (int)get_global_id(0);
    size_t p = get_global_id(1), o = p * (size_t)OH * OW + (size_t)r;

    if (r >= OH * OW || p >= planes)
        return;
    CG_ST(ty, o, CG_LD(t, p * (size_t)H * W + (size_t)idx[o]));
}

__kernel void
avg_pool2d_f(__global const cg_t *x, uint planes, int H, int W, int OH,
             int OW, int2 k, int2 s, int2 pd, int include_pad, int divisor,
             __global cg_t *y)
{
    int r = (int)get_global_id(0), oh = r / OW, ow = r % OW;
    size_t p = get_global_id(1), o = p * (size_t)OH * OW + (size_t)r;
    int h0, h1, w0, w1, h, w;
    __global const cg_t *xp = x + p * H * W;
    float acc = 0.0f;

    if (r >= OH * OW || p >= planes)
        return;
    avg_win(oh, H, k.x, s.x, pd.x, &h0, &h1);
    avg_win(ow, W, k.y, s.y, pd.y, &w0, &w1);
    for (h = h0; h < h1; h++)
        for (w = w0; w < w1; w++)
            acc += CG_LD(xp, h * W + w);
    CG_ST(y, o, acc / (float)avg_div(oh, ow, H, W, k, s, pd, include_pad,
                                     divisor));
}

__kernel void
avg_pool2d_b(__global const cg_t *g, uint planes, int H, int W, int OH,
             int OW, int2 k, int2 s, int2 pd, int include_pad, int divisor,
             __global cg_t *gx)
{
    int r = (int)get_global_id(0), h = r / W, w = r % W, oh, ow;
    size_t p = get_global_id(1), e = p * (size_t)H * W + (size_t)r;
    /* Outputs whose unclipped window [o * s - pd, o * s - pd + k) covers
     * h: o in [ceil((h + pd - k + 1) / s), floor((h + pd) / s)]. */
    int oh0 = max(0, (h + pd.x - k.x + s.x) / s.x);
    int oh1 = min(OH - 1, (h + pd.x) / s.x);
    int ow0 = max(0, (w + pd.y - k.y + s.y) / s.y);
    int ow1 = min(OW - 1, (w + pd.y) / s.y);
    __global const cg_t *gp = g + p * OH * OW;
    float acc = 0.0f;

    if (r >= H * W || p >= planes)
        return;
    for (oh = oh0; oh <= oh1; oh++)
        for (ow = ow0; ow <= ow1; ow++) {
            int a0, a1, b0, b1;

            /* Clipped to the input and to H + pd: check the window. */
            avg_win(oh, H, k.x, s.x, pd.x, &a0, &a1);
            avg_win(ow, W, k.y, s.y, pd.y, &b0, &b1);
            if (h < a0 || h >= a1 || w < b0 || w >= b1)
                continue;
            acc += CG_LD(gp, oh * OW + ow) /
                   (float)avg_div(oh, ow, H, W, k, s, pd, include_pad,
                                  divisor);
        }
    CG_ST(gx, e, acc);
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
adaptive_avg_pool2d_f(__global const cg_t *x, uint planes, int H, int W,
                      int OH, int OW, __global cg_t *y)
{
    int r = (int)get_global_id(0), oh = r / OW, ow = r % OW;
    size_t p = get_global_id(1), o = p * (size_t)OH * OW + (size_t)r;
    int h0 = ada_lo(oh, H, OH), h1 = ada_hi(oh, H, OH);
    int w0 = ada_lo(ow, W, OW), w1 = ada_hi(ow, W, OW), h, w;
    __global const cg_t *xp = x + p * H * W;
    float acc = 0.0f;

    if (r >= OH * OW || p >= planes)
        return;
    for (h = h0; h < h1; h++)
        for (w = w0; w < w1; w++)
            acc += CG_LD(xp, h * W + w);
    CG_ST(y, o, acc / (float)((h1 - h0) * (w1 - w0)));
}

__kernel void
adaptive_avg_pool2d_b(__global const cg_t *g, uint planes, int H, int W,
                      int OH, int OW, __global cg_t *gx)
{
    int r = (int)get_global_id(0), h = r / W, w = r % W, oh, ow;
    size_t p = get_global_id(1), e = p * (size_t)H * W + (size_t)r;
    /* Outputs covering h lie in [floor(h * OH / H), ceil((h + 1) * OH /
     * H)); each is checked. */
    int oh0 = ada_lo(h, OH, H), oh1 = min(OH, ada_hi(h, OH, H));
    int ow0 = ada_lo(w, OW, W), ow1 = min(OW, ada_hi(w, OW, W));
    __global const cg_t *gp = g + p * OH * OW;
    float acc = 0.0f;

    if (r >= H * W || p >= planes)
        return;
    for (oh = oh0; oh < oh1; oh++) {
        int a0 = ada_lo(oh, H, OH), a1 = ada_hi(oh, H, OH);

        if (h < a0 || h >= a1)
            continue;
        for (ow = ow0; ow < ow1; ow++) {
            int b0 = ada_lo(ow, W, OW), b1 = ada_hi(ow, W, OW);

            if (w < b0 || w >= b1)
                continue;
            acc += CG_LD(gp, oh * OW + ow) / (float)((a1 - a0) * (b1 - b0));
        }
    }
    CG_ST(gx, e, acc);
}
