/* SPDX-License-Identifier: MIT */
/*
 * kernels/conv.cl - the column transforms of 2-D convolution (NCHW) by
 * im2col + GEMM, batched over the images of a chunk, for any stride,
 * padding and dilation; and the bias add.
 *
 *   conv_im2col: col[n * cn + (c * R * S + r * S + s) * ld + oh * OW + ow]
 *                  = x[n0 + n, c, oh * sh - ph + r * dh, ow * sw - pw + s * dw]
 *                (0 outside the input: the padding)
 *   conv_col2im: dx[n0 + n, c, h, w] = sum over (r, s, oh, ow) with
 *                  oh * sh - ph + r * dh = h and ow * sw - pw + s * dw = w
 *                of col[...] as above - a gather: each work-item owns one
 *                element of dx and adds its contributions in increasing
 *                (r, s), so the result is deterministic and needs no atomics
 *   conv_bias:   y[n, k, p] += b[k] over a contiguous [N, K, P] y
 *
 * cn (the stride between images) and ld (between rows of one image's
 * matrix) let the host choose [n][C R S][P] (cn = C R S P, ld = P) or
 * [C R S][n][P] (cn = P, ld = nimg P) layouts.  x and dx are contiguous
 * [N, C, H, W]; the host checks that every index fits an int.
 *
 * Index space: one work-item per output row of the columns for im2col
 * (nimg C R S OH of them, each writing OW elements), one per row of dx
 * for col2im (nimg C H, each writing W elements), padded to the host's
 * work-group size; for the bias, (chunk of ch elements of a plane, row
 * n K + k), the chunks padded to the work-group size.  No tunable parameters.
 */

/* The geometry: C, H, W, R, S, OH, OW, sh, sw, ph, pw, dh, dw, then
 * cn, ld, n0 and nimg. */
#define CONV_ARGS int C, int H, int W, int R, int S, int OH, int OW,         \
                  int sh, int sw, int ph, int pw, int dh, int dw, int cn,    \
                  int ld, int n0, int nimg

/* One work-item per (image, row, oh): it fills the row's OW columns
 * (contiguous), so the index arithmetic is paid once per output row. */
__kernel void
conv_im2col(__global const float *x, __global float *col, CONV_ARGS)
{
    int i = (int)get_global_id(0), RS = R * S;
    int oh, row, n, c, r, s, h, w, ow;
    __global float *dst;
    __global const float *src;

    if (i >= nimg * C * RS * OH)
        return;
    oh = i % OH;
    row = (i / OH) % (C * RS);
    n = i / OH / (C * RS);
    c = row / RS;
    r = (row % RS) / S;
    s = row % S;
    h = oh * sh - ph + r * dh;
    dst = col + n * cn + row * ld + oh * OW;
    if (h < 0 || h >= H) {
        for (ow = 0; ow < OW; ow++)
            dst[ow] = 0.0f;
        return;
    }
    src = x + (((n0 + n) * C + c) * H + h) * W;
    for (ow = 0, w = s * dw - pw; ow < OW; ow++, w += sw)
        dst[ow] = w >= 0 && w < W ? src[w] : 0.0f;
}

/* One work-item per (image, channel, h) row of dx: the rows r of the
 * kernel that reach h are found once, then each w of the row gathers. */
__kernel void
conv_col2im(__global const float *col, __global float *dx, CONV_ARGS)
{
    int i = (int)get_global_id(0), RS = R * S;
    int h, c, n, r, s, th, tw, oh, ow, w;
    __global const float *src;
    __global float *dst;

    if (i >= nimg * C * H)
        return;
    h = i % H;
    c = (i / H) % C;
    n = i / (H * C);
    src = col + n * cn + c * RS * ld;
    dst = dx + (((n0 + n) * C + c) * H + h) * W;
    for (w = 0; w < W; w++) {
        float acc = 0.0f;

        for (r = 0; r < R; r++) {
            th = h + ph - r * dh;
            if (th < 0 || th % sh)
                continue;
            oh = th / sh;
            if (oh >= OH)
                continue;
            for (s = 0; s < S; s++) {
                tw = w + pw - s * dw;
                if (tw < 0 || tw % sw)
                    continue;
                ow = tw / sw;
                if (ow >= OW)
                    continue;
                acc += src[(r * S + s) * ld + oh * OW + ow];
            }
        }
        dst[w] = acc;
    }
}

__kernel void
conv_bias(__global float *y, __global const float *b, int K, int P, int ch)
{
    int c = (int)get_global_id(0) * ch, r = (int)get_global_id(1), e, i;
    __global float *py;
    float v;

    if (c >= P)
        return;
    v = b[r % K];
    py = y + (size_t)r * P + c;
    e = min(ch, P - c);
    for (i = 0; i < e; i++)
        py[i] += v;
}
