/* SPDX-License-Identifier: MIT */
/*
 * kernels/conv.cl - 2-D convolution (NCHW): the column transforms of
 * im2col + GEMM, batched over the images of a chunk, for any stride,
 * padding and dilation; the direct kernels of the second algorithm; and
 * the bias add.
 *
 *   conv_im2col: col[n * cn + (c * R * S + r * S + s) * ld + oh * OW + ow]
 *                  = x[n0 + n, c, oh * sh - ph + r * dh, ow * sw - pw + s * dw]
 *                (0 outside the input: the padding)
 *   conv_col2im: dx[n0 + n, c, h, w] = sum over (r, s, oh, ow) with
 *                  oh * sh - ph + r * dh = h and ow * sw - pw + s * dw = w
 *                of col[...] as above: each work-item owns rows of dx and
 *                adds each element's terms in increasing (r, s), so the
 *                result is deterministic and needs no atomics
 *   conv_im2col_packed: the same columns, each image's as
 *                gemm_packed's packed operand B (below)
 *   conv_bias:   y[n, k, p] += b[k] over a contiguous [N, K, P] y
 *
 * cn (the stride between images) and ld (between rows of one image's
 * matrix) let the host choose [n][C R S][P] (cn = C R S P, ld = P) or
 * [C R S][n][P] (cn = P, ld = nimg P) layouts (conv_im2col_packed: cn
 * between images' packed operands, ld the panel width).  x and dx are
 * contiguous [N, C, H, W]; the host checks that every index fits an int.
 *
 * Index space: one work-item per IM2COL_ROWS output rows of the columns
 * for im2col (nimg C R S ceil(OH / IM2COL_ROWS) of them, each row OW
 * elements), per (image, channel, r, IM2COL_GROUPS groups of 8 columns)
 * for conv_im2col_packed (nimg C R ceil(ceil(OH OW / ld) ld / 8 /
 * IM2COL_GROUPS)), one per COL2IM_ROWS rows of dx for col2im (nimg C
 * ceil(H / COL2IM_ROWS), each row W elements), padded to the host's
 * work-group size; for the bias, (chunk of ch elements of a plane, row
 * n K + k), the chunks padded to the work-group size.  No tunable
 * parameters.
 *
 * The direct algorithm (lib/ops/conv.c runs it by default for depthwise
 * convolutions, where the columns cost more than the products they feed,
 * and where a tuning entry or CLGRAD_CONV_ALGO says; lib/ops/
 * conv_transpose.c runs the same three kernels for conv_transpose2d,
 * whose forward is conv_direct_dx, its dx conv_direct_fwd and its dW
 * conv_direct_dw with x and dy exchanged): no column buffer,
 * any stride, padding, dilation and groups, each output a sum in a fixed
 * order (no atomics, so deterministic).  A work-item computes a row,
 * CONV_VW consecutive outputs at a time in a float8 register tile: PoCL
 * does not vectorise across work-items a kernel with loops of run-time
 * length, so the vector is written out (and a whole row per work-item
 * pays the index arithmetic once a row).  A tap whose CONV_VW inputs lie
 * inside the row at stride 1 or 2 is one vector load; one at the border
 * or at another stride gathers its lanes (0 in the padding, so a padded
 * tap adds w * 0, as im2col's zeros do).  Index space: as described per
 * kernel, padded to the host's work-group size; conv_direct_fwd's and
 * conv_direct_dx's rows are cut into pieces of pl outputs (the last
 * shorter; pl a multiple of CONV_VW, the host's choice), a work-item per
 * piece: the whole row where rows alone give the device enough items (a
 * CPU), less where they do not (N1 C64 conv1d: 64 rows).
 *
 *   conv_direct_fwd: y[n, k, oh, ow] = sum over (c, r, s), in that order,
 *                    of w[k, c, r, s] x[n, g Cg + c, oh sh - ph + r dh,
 *                    ow sw - pw + s dw], g = k / Kg, plus bias[k] when
 *                    has_bias (after the sum, as conv_bias adds it, in
 *                    one rounding to 16 bits).  One work-item per
 *                    (n, oh) and CONV_KT output channels of a group (1
 *                    where groups have fewer, as depthwise ones): each
 *                    input tap loaded once for all of them.  Where
 *                    those blocks are of 1 and the kernel is 3 x 3 at
 *                    stride and dilation 1 (S1_3X3), an item takes
 *                    DW3_ROWS rows, each input row loaded once for them.
 *   conv_direct_dx:  dx[n, c, h, w] = sum over (k of c's group, r, s), in
 *                    that order, of w[k, c - g Cg, r, s] dy[n, k, oh, ow]
 *                    where oh sh - ph + r dh = h, ow sw - pw + s dw = w,
 *                    plus bias[c] when has_bias (conv_transpose2d's
 *                    forward, whose output this is; added as
 *                    conv_direct_fwd adds its bias).  Any H and W, not
 *                    only those OH and OW come from (conv_transpose2d's
 *                    output_padding): the taps outside dy add nothing.
 *                    One work-item per (n, c, h); for 3 x 3 kernels at
 *                    stride and dilation 1, per DW3_ROWS rows of h.
 *   conv_direct_dw:  dw[k, c, r, s] = sum over (n, oh, ow) of dy[n, k,
 *                    oh, ow] x[n, g Cg + c, ...] as above, in CONV_VW
 *                    lanes: the ow of each (n, oh) row whose input lies
 *                    inside it, in blocks of CONV_VW from the first (lane
 *                    l takes the block's l-th), the last partial block's
 *                    one by one into lane 0; the lanes summed pairwise at
 *                    the end.  One work-item per element of dw.
 *
 * conv_bias and the direct kernels come in storage variants (common.cl's
 * cg_t: float16 and bfloat16 tensors, float32 arithmetic, each result
 * rounded once); im2col and col2im are float32 only.
 */

/* The geometry: C, H, W, R, S, OH, OW, sh, sw, ph, pw, dh, dw, then
 * cn, ld, n0 and nimg. */
#define CONV_ARGS int C, int H, int W, int R, int S, int OH, int OW,         \
                  int sh, int sw, int ph, int pw, int dh, int dw, int cn,    \
                  int ld, int n0, int nimg

/* Outputs per work-item of conv_direct_fwd: CONV_VW consecutive outputs
 * of a row (a float8) for each of CONV_KT output channels of a group when
 * the groups have that many, else for one. */
#define CONV_VW 8
#define CONV_KT 4

/* The geometry of the direct kernels: N, C, H, W, K, R, S, OH, OW, sh, sw,
 * ph, pw, dh, dw and the groups G. */
#define DIRECT_ARGS int N, int C, int H, int W, int K, int R, int S, int OH, \
                    int OW, int sh, int sw, int ph, int pw, int dh, int dw,   \
                    int G

/* Elements p0, p0 + st, ... p0 + 7 st of row v (n long), 0 outside it;
 * inside the row at stride 1 or 2, one vector load. */
static inline float8
row8(__global const cg_t *v, int p0, int st, int n)
{
    float e[CONV_VW];
    int l, p;

    if (st == 1 && p0 >= 0 && p0 + CONV_VW <= n)
        return CG_VLOAD(8, 0, v + p0);
    /* Two float8 loads, not a vload16: on a CPU without AVX-512 (PoCL
     * under valgrind, say) a float16 return value changes the ABI, and
     * the compiler warns. */
    if (st == 2 && p0 >= 0 && p0 + 2 * CONV_VW <= n) {
        float8 a = CG_VLOAD(8, 0, v + p0);
        float8 b = CG_VLOAD(8, 0, v + p0 + CONV_VW);

        return (float8)(a.even, b.even);
    }
    for (l = 0; l < CONV_VW; l++) {
        p = p0 + l * st;
        e[l] = p >= 0 && p < n ? CG_LD(v, p) : 0.0f;
    }
    return vload8(0, e);
}

/* The three stride-1 windows of a 3-tap row at p0 (row v, n long, 0
 * outside it): *x0 = elements p0 .. p0 + 7, *x1 from p0 + 1, *x2 from
 * p0 + 2, from one row8 and the two elements after it: a tap at a time,
 * each window cost a row8 of its own, a gather of 8 where it crossed the
 * row's border (every row of N8 C64 28x28, 3x3 depthwise, crosses it
 * in two of its four blocks). */
static inline void
win3(__global const cg_t *v, int p0, int n, float8 *x0, float8 *x1,
     float8 *x2)
{
    float8 a = row8(v, p0, 1, n);
    int q = p0 + CONV_VW;
    float2 c = q >= 0 && q + 2 <= n
             ? CG_VLOAD(2, 0, v + q)
             : (float2)(q >= 0 && q < n ? CG_LD(v, q) : 0.0f,
                        q + 1 >= 0 && q + 1 < n ? CG_LD(v, q + 1) : 0.0f);

    *x0 = a;
    *x1 = (float8)(a.s123, a.s4567, c.s0);
    *x2 = (float8)(a.s23, a.s4567, c);
}

/* Zeros the n floats at p, CONV_VW at a time. */
static inline void
zero_f32(__global float *p, int n)
{
    int i;

    for (i = 0; i + CONV_VW <= n; i += CONV_VW)
        vstore8((float8)0.0f, 0, p + i);
    for (; i < n; i++)
        p[i] = 0.0f;
}

/* Output rows of the columns per work-item of conv_im2col. */
#define IM2COL_ROWS 8

/* One work-item per (image, row, block of IM2COL_ROWS oh): it fills
 * those output rows of OW columns each (contiguous), so the index
 * arithmetic is paid once per block, and CONV_VW columns at a time by
 * row8 (one vector load and store where the taps lie inside the input
 * row at stride 1 or 2).  One item per row, element by element, wrote
 * the columns at a fifth of the copy bandwidth: the divisions of the
 * index and PoCL's unvectorised loop.  x is of the storage type (the
 * host runs the float32 variant). */
__kernel void
conv_im2col(__global const cg_t *x, __global float *col, CONV_ARGS)
{
    int i = (int)get_global_id(0), RS = R * S;
    int nb = (OH + IM2COL_ROWS - 1) / IM2COL_ROWS;
    int oh, oh1, row, n, c, r, s, h, w, ow, a;
    __global float *dst;
    __global const cg_t *src;

    if (i >= nimg * C * RS * nb)
        return;
    oh = i % nb * IM2COL_ROWS;
    oh1 = min(oh + IM2COL_ROWS, OH);
    row = (i / nb) % (C * RS);
    n = i / nb / (C * RS);
    c = row / RS;
    r = (row % RS) / S;
    s = row % S;
    a = s * dw - pw;
    src = x + ((n0 + n) * C + c) * H * W;
    for (; oh < oh1; oh++) {
        h = oh * sh - ph + r * dh;
        dst = col + n * cn + row * ld + oh * OW;
        if (h < 0 || h >= H) {
            zero_f32(dst, OW);
            continue;
        }
        for (ow = 0, w = a; ow + CONV_VW <= OW;
             ow += CONV_VW, w += CONV_VW * sw)
            vstore8(row8(src + h * W, w, sw, W), 0, dst + ow);
        for (; ow < OW; ow++, w += sw)
            dst[ow] = w >= 0 && w < W ? CG_LD(src, h * W + w) : 0.0f;
    }
}

/* conv_im2col's columns straight into the packed operand B of
 * kernels/gemm_pack.cl's gemm_packed (the layout its gemm_pack_b makes of
 * a K x N operand, here K = C R S rows and N = OH OW columns per image):
 * micro-panels of ld (its NR, a multiple of CONV_VW) columns, each C R S
 * x ld floats, element (row, q) of image n at pb[n cn + (q / ld) ld C R S
 * + row ld + q % ld], columns past OH OW zeros.  The forward's product
 * then reads the image's columns without the column buffer and the pack
 * of it (one write and two reads of the columns fewer).
 *
 * One work-item per (image, channel, kernel row r, IM2COL_GROUPS groups
 * of CONV_VW consecutive columns, the last micro-panel's included), the
 * channel and r fastest, so that the items of a work-group write the
 * consecutive rows of the same panels (items walking a row's panels, ld
 * C R S floats apart, wrote at half the speed).  A group is a float8
 * store per tap s of the row: one row8 of the input row where the group
 * lies in one output row (one win3 for the three taps of a 3-wide kernel
 * at stride and dilation 1), else the lanes of each output row it spans
 * (im2col_group); 0 in the padding and past OH OW.  cn: floats between
 * images' packed operands; ld: the micro-panel width. */
/* Groups of CONV_VW columns per work-item of conv_im2col_packed: 8 took
 * a fifth longer than 16 (N8 C64 28x28 3x3). */
#define IM2COL_GROUPS 16

/* The group of CONV_VW columns from output (oh, ow) of the columns' row
 * of tap (r, s) of channel plane src: lane l0 + j of the span in output
 * row oh that starts at lane l0 and column ow reads w = (ow + j) sw - pw
 * + s dw of input row h = oh sh - ph + r dh. */
static inline float8
im2col_group(__global const cg_t *src, int oh, int ow, int r, int s,
             CONV_ARGS)
{
    int8 lane = (int8)(0, 1, 2, 3, 4, 5, 6, 7);
    float8 v = (float8)0.0f;
    int l0, len, h;

    for (l0 = 0; l0 < CONV_VW && oh < OH; l0 += len, oh++, ow = 0) {
        len = min(CONV_VW - l0, OW - ow);
        h = oh * sh - ph + r * dh;
        if (h >= 0 && h < H)
            v = select(v, row8(src + h * W, (ow - l0) * sw + s * dw - pw, sw,
                               W),
                       lane >= l0 && lane < l0 + len);
    }
    return v;
}

__kernel void
conv_im2col_packed(__global const cg_t *x, __global float *pb, CONV_ARGS)
{
    int i = (int)get_global_id(0), RS = R * S, P = OH * OW, CR = C * R;
    int ng = (P + ld - 1) / ld * ld / CONV_VW, CRS = C * RS;
    int nb = (ng + IM2COL_GROUPS - 1) / IM2COL_GROUPS;
    int gi, g1, cr, n, c, r, s, oh, ow, o, h;
    __global const cg_t *src;
    __global float *dst;

    if (i >= nimg * CR * nb)
        return;
    cr = i % CR;
    gi = (i / CR) % nb * IM2COL_GROUPS;
    g1 = min(gi + IM2COL_GROUPS, ng);
    n = i / CR / nb;
    c = cr / R;
    r = cr % R;
    src = x + ((n0 + n) * C + c) * H * W;
    /* column q = gi CONV_VW at (oh, ow), in its panel at offset o; dst at
     * the panel's row of tap (r, 0) */
    oh = gi * CONV_VW / OW;
    ow = gi * CONV_VW - oh * OW;
    o = gi * CONV_VW % ld;
    dst = pb + n * cn + gi * CONV_VW / ld * ld * CRS +
          (c * RS + r * S) * ld + o;
    for (; gi < g1; gi++) {
        h = oh * sh - ph + r * dh;
        if (ow + CONV_VW <= OW && oh < OH) {    /* one output row */
            if (h < 0 || h >= H)
                for (s = 0; s < S; s++)
                    vstore8((float8)0.0f, 0, dst + s * ld);
            else if (S == 3 && sw == 1 && dw == 1) {
                float8 x0, x1, x2;

                win3(src + h * W, ow - pw, W, &x0, &x1, &x2);
                vstore8(x0, 0, dst);
                vstore8(x1, 0, dst + ld);
                vstore8(x2, 0, dst + 2 * ld);
            } else
                for (s = 0; s < S; s++)
                    vstore8(row8(src + h * W, ow * sw + s * dw - pw, sw, W),
                            0, dst + s * ld);
        } else
            for (s = 0; s < S; s++)
                vstore8(im2col_group(src, oh, ow, r, s, C, H, W, R, S, OH,
                                     OW, sh, sw, ph, pw, dh, dw, cn, ld, n0,
                                     nimg),
                        0, dst + s * ld);
        /* the next CONV_VW columns */
        for (ow += CONV_VW; ow >= OW; ow -= OW)
            oh++;
        o += CONV_VW;
        dst += CONV_VW;
        if (o == ld) {
            o = 0;
            dst += ld * (CRS - 1);
        }
    }
}

/* x / st for x >= 0 and st >= 1, with no division at the strides that
 * networks use: the quotient is found per (row, r, s) in col2im. */
static inline int
div_st(int x, int st)
{
    return st == 1 ? x : st == 2 ? x >> 1 : x / st;
}

/* Rows of dx per work-item of conv_col2im. */
#define COL2IM_ROWS 8

/* One work-item per (image, channel, block of COL2IM_ROWS rows h) of dx.
 * For each (r, s) in increasing order - the order in which a
 * per-element gather would add the terms - it walks the output rows oh
 * whose taps land in the block, and adds each row's terms to dx[.., h,
 * w] along the row: a stretch of the columns' row (r, s) read in order.
 * One item per row of dx, which read R S short stretches of rows far
 * apart, ran at a fifth of the bandwidth.  At stride 1 or 2, CONV_VW
 * elements of dx at a time (at 2, the even lanes take the terms, the odd
 * ones are written back unchanged).  No division per element. */
__kernel void
conv_col2im(__global const float *col, __global float *dx, CONV_ARGS)
{
    int i = (int)get_global_id(0), RS = R * S;
    int nb = (H + COL2IM_ROWS - 1) / COL2IM_ROWS;
    int h0, h1, c, n, r, s, t, oh, oh0, oh1, ow, ow0, ow1, w, a;
    __global const float *src;
    __global float *plane, *dst;

    if (i >= nimg * C * nb)
        return;
    h0 = i % nb * COL2IM_ROWS;
    h1 = min(h0 + COL2IM_ROWS, H);
    c = (i / nb) % C;
    n = i / nb / C;
    src = col + n * cn + c * RS * ld;
    plane = dx + ((n0 + n) * C + c) * H * W;
    zero_f32(plane + h0 * W, (h1 - h0) * W);
    for (r = 0; r < R; r++) {
        /* oh sh - ph + r dh in [h0, h1) */
        t = h0 + ph - r * dh;
        oh0 = t <= 0 ? 0 : div_st(t + sh - 1, sh);
        t = h1 + ph - r * dh;
        oh1 = t <= 0 ? 0 : min(OH, div_st(t + sh - 1, sh));
        for (s = 0; s < S; s++) {
            /* w = ow sw + a inside [0, W) */
            a = s * dw - pw;
            ow0 = a < 0 ? div_st(-a + sw - 1, sw) : 0;
            ow1 = min(OW, a < W ? div_st(W - 1 - a, sw) + 1 : 0);
            for (oh = oh0; oh < oh1; oh++) {
                __global const float *p = src + (r * S + s) * ld + oh * OW;

                dst = plane + (oh * sh - ph + r * dh) * W;
                ow = ow0;
                w = ow0 * sw + a;
                if (sw == 1)
                    for (; ow + CONV_VW <= ow1; ow += CONV_VW, w += CONV_VW)
                        vstore8(vload8(0, dst + w) + vload8(0, p + ow), 0,
                                dst + w);
                else if (sw == 2)
                    for (; ow + CONV_VW / 2 <= ow1 && w + CONV_VW <= W;
                         ow += CONV_VW / 2, w += CONV_VW) {
                        float8 d = vload8(0, dst + w);

                        d.even += vload4(0, p + ow);
                        vstore8(d, 0, dst + w);
                    }
                for (; ow < ow1; ow++, w += sw)
                    dst[w] += p[ow];
            }
        }
    }
}

__kernel void
conv_bias(__global cg_t *y, __global const cg_t *b, int K, int P, int ch)
{
    int c = (int)get_global_id(0) * ch, r = (int)get_global_id(1), e, i;
    __global cg_t *py;
    float v;

    if (c >= P)
        return;
    v = CG_LD(b, r % K);
    py = y + (size_t)r * P + c;
    e = min(ch, P - c);
    for (i = 0; i < e; i++)
        CG_ST(py, i, CG_LD(py, i) + v);
}

/* Stores the first n (up to 8) lanes of a at v. */
static inline void
store8(__global cg_t *v, float8 a, int n)
{
    float e[CONV_VW];
    int l;

    if (n >= CONV_VW) {
        CG_VSTORE(8, a, 0, v);
        return;
    }
    vstore8(a, 0, e);
    for (l = 0; l < n; l++)
        CG_ST(v, l, e[l]);
}

/* The CONV_VW outputs of row oh at ow0 of output channels k0 .. k0 + nk -
 * 1 (nk <= kt) of image n, k0's group starting at input channel c0: each
 * input tap loaded once for all kt channels.  kt is a constant where this
 * is called, so acc[] stays in registers. */
static inline void
direct_fwd_tile(__global const cg_t *x, __global const cg_t *wt,
                __global cg_t *y, __global const cg_t *bias, int has_bias,
                int C, int H, int W, int K, int R, int S,
                int OH, int OW, int sh, int sw, int ph, int pw, int dh,
                int dw, int Cg, int n, int c0, int k0, int nk, int oh,
                int ow0, const int kt)
{
    float8 acc[CONV_KT], xv;
    int c, r, s, h, j;

    for (j = 0; j < kt; j++)
        acc[j] = (float8)(0.0f);
    for (c = 0; c < Cg; c++)
        for (r = 0; r < R; r++) {
            h = oh * sh - ph + r * dh;
            if (h < 0 || h >= H)
                continue;
            for (s = 0; s < S; s++) {
                xv = row8(x + ((n * C + c0 + c) * H + h) * W,
                          ow0 * sw - pw + s * dw, sw, W);
                for (j = 0; j < kt; j++)
                    if (j < nk)
                        acc[j] += CG_LD(wt, ((k0 + j) * Cg + c) * R * S +
                                            r * S + s) * xv;
            }
        }
    for (j = 0; j < kt && j < nk; j++)
        store8(y + ((n * K + k0 + j) * OH + oh) * OW + ow0,
               has_bias ? acc[j] + CG_LD(bias, k0 + j) : acc[j], OW - ow0);
}

/* Output rows per work-item of the direct kernels' 3 x 3 path at stride
 * and dilation 1 (rows3x3): conv_direct_fwd's where the groups have
 * fewer than CONV_KT output channels, conv_direct_dx's at any groups.
 * Each input row is loaded once (win3) for the up to three output rows
 * it feeds, not once per output row: per block of 8 outputs, 6 row
 * windows for 4 rows instead of 12 (and 36 row8 calls). */
#define DW3_ROWS 4

/* Whether the kernel is 3 x 3 at stride and dilation 1: conv_direct_dx
 * then takes that path, conv_direct_fwd where its blocks of output
 * channels are of 1 (lib/ops/conv.c's rows3_path mirrors both). */
#define S1_3X3(R, S, sh, sw, dh, dw)                                      \
    ((R) == 3 && (S) == 3 && (sh) == 1 && (sw) == 1 && (dh) == 1 &&       \
     (dw) == 1)

/* Rows o0 .. o0 + DW3_ROWS - 1 (those below rows), columns qb .. qe - 1
 * (qb a multiple of CONV_VW, qe <= n), of an output plane `out` (rows x
 * n) from `it` pairs of a source plane (src + i ss, sr x
 * sn) and a 3 x 3 kernel (wt + i ws), the sums over i, then (r, s), in
 * that order, plus b when has_bias:
 *   flip 0 (conv_direct_fwd): out[o][q] takes w[r][s] src[o + dr + r]
 *          [q + ds + s];
 *   flip 1 (conv_direct_dx): out[o][q] takes w[r][s] src[o + dr + 2 - r]
 *          [q + ds + 2 - s].
 * Source row o0 + dr + t (t 0 .. 5) feeds output rows j = t - r (flip 0)
 * or t - 2 + r (flip 1) through the kernel's row r: it is loaded once
 * (win3) for them, and the rows run in increasing t (flip 0) or
 * decreasing t (flip 1), so that each output's terms add in increasing
 * (r, s) as in the kernels' general paths (the same bits). */
#define R3_TAP(j, r, a, b, c)                                             \
    acc##j += w##r##0 * a;                                                \
    acc##j += w##r##1 * b;                                                \
    acc##j += w##r##2 * c;
#define F_TAP(j, r) R3_TAP(j, r, x0, x1, x2)
#define B_TAP(j, r) R3_TAP(j, r, x2, x1, x0)
#define R3_ROW(t, TAPS)                                                   \
    h = o0 + dr + (t);                                                    \
    if (h >= 0 && h < sr) {                                               \
        win3(si + h * sn, q0 + ds, sn, &x0, &x1, &x2);                    \
        TAPS                                                              \
    }
#define R3_ST(j)                                                          \
    if (o0 + (j) < rows)                                                  \
        store8(out + (o0 + (j)) * n + q0, has_bias ? acc##j + b : acc##j, \
               n - q0);

static inline void
rows3x3(__global const cg_t *src, int ss, int sr, int sn,
        __global const cg_t *wt, int ws, int it, __global cg_t *out,
        int rows, int n, int o0, int qb, int qe, int dr, int ds, int flip,
        float b, int has_bias)
{
    __global const cg_t *si, *wk;
    float8 acc0, acc1, acc2, acc3, x0, x1, x2;
    float w00, w01, w02, w10, w11, w12, w20, w21, w22;
    int q0, i, h;

    for (q0 = qb; q0 < qe; q0 += CONV_VW) {
        acc0 = acc1 = acc2 = acc3 = (float8)(0.0f);
        for (i = 0; i < it; i++) {
            si = src + i * ss;
            wk = wt + i * ws;
            w00 = CG_LD(wk, 0), w01 = CG_LD(wk, 1), w02 = CG_LD(wk, 2);
            w10 = CG_LD(wk, 3), w11 = CG_LD(wk, 4), w12 = CG_LD(wk, 5);
            w20 = CG_LD(wk, 6), w21 = CG_LD(wk, 7), w22 = CG_LD(wk, 8);
            if (!flip) {
                R3_ROW(0, F_TAP(0, 0))
                R3_ROW(1, F_TAP(1, 0) F_TAP(0, 1))
                R3_ROW(2, F_TAP(2, 0) F_TAP(1, 1) F_TAP(0, 2))
                R3_ROW(3, F_TAP(3, 0) F_TAP(2, 1) F_TAP(1, 2))
                R3_ROW(4, F_TAP(3, 1) F_TAP(2, 2))
                R3_ROW(5, F_TAP(3, 2))
            } else {
                R3_ROW(5, B_TAP(3, 0))
                R3_ROW(4, B_TAP(2, 0) B_TAP(3, 1))
                R3_ROW(3, B_TAP(1, 0) B_TAP(2, 1) B_TAP(3, 2))
                R3_ROW(2, B_TAP(0, 0) B_TAP(1, 1) B_TAP(2, 2))
                R3_ROW(1, B_TAP(0, 1) B_TAP(1, 2))
                R3_ROW(0, B_TAP(0, 2))
            }
        }
        R3_ST(0)
        R3_ST(1)
        R3_ST(2)
        R3_ST(3)
    }
}

__kernel void
conv_direct_fwd(__global const cg_t *x, __global const cg_t *wt,
                __global cg_t *y, DIRECT_ARGS, __global const cg_t *bias,
                int has_bias, int pl)
{
    int i = (int)get_global_id(0), np = (OW + pl - 1) / pl;
    int Cg = C / G, Kg = K / G, kt = Kg >= CONV_KT ? CONV_KT : 1;
    int nb = (Kg + kt - 1) / kt, ow0, oh, b, g, n, k, c, r, s, h;
    int dw3 = kt == 1 && S1_3X3(R, S, sh, sw, dh, dw);
    int rows = dw3 ? DW3_ROWS : 1, nr = (OH + rows - 1) / rows;
    int qb = i % np * pl, qe = min(OW, qb + pl);
    __global const cg_t *xc, *wk;

    if (i >= N * G * nb * nr * np)
        return;
    i /= np;
    oh = i % nr * rows;
    b = i / nr % nb;
    g = i / nr / nb % G;
    n = i / nr / nb / G;
    if (dw3) {
        k = g * Kg + b;
        rows3x3(x + (n * C + g * Cg) * H * W, H * W, H, W,
                wt + k * Cg * 9, 9, Cg, y + (n * K + k) * OH * OW, OH, OW,
                oh, qb, qe, -ph, -pw, 0, has_bias ? CG_LD(bias, k) : 0.0f,
                has_bias);
        return;
    }
    if (kt == CONV_KT) {
        for (ow0 = qb; ow0 < qe; ow0 += CONV_VW)
            direct_fwd_tile(x, wt, y, bias, has_bias, C, H, W, K, R, S, OH,
                            OW, sh, sw, ph, pw, dh, dw, Cg, n, g * Cg,
                            g * Kg + b * kt,
                            min(kt, Kg - b * kt), oh, ow0, CONV_KT);
        return;
    }
    k = g * Kg + b;
    for (ow0 = qb; ow0 < qe; ow0 += CONV_VW) {
        float8 acc = (float8)(0.0f);

        for (c = 0; c < Cg; c++) {
            xc = x + (n * C + g * Cg + c) * H * W;
            wk = wt + (k * Cg + c) * R * S;
            for (r = 0; r < R; r++) {
                h = oh * sh - ph + r * dh;
                if (h < 0 || h >= H)
                    continue;
                for (s = 0; s < S; s++)
                    acc += CG_LD(wk, r * S + s) *
                           row8(xc + h * W, ow0 * sw - pw + s * dw, sw, W);
            }
        }
        store8(y + ((n * K + k) * OH + oh) * OW + ow0,
               has_bias ? acc + CG_LD(bias, k) : acc, OW - ow0);
    }
}

/* Lanes of dy row v (n long) that reach inputs w0 .. w0 + 7 of a row
 * through tap offset d = pw - s dw at stride st: input w takes output
 * (w + d) / st when that divides; 0 else.  At stride 2 inside the row,
 * every other lane, from one vload4. */
static inline float8
taps8(__global const cg_t *v, int w0, int d, int st, int n)
{
    float e[CONV_VW];
    int l, p;

    if (st == 1)
        return row8(v, w0 + d, 1, n);
    p = w0 + d;
    if (st == 2 && p >= 0 && (p + 1) / 2 + CONV_VW / 2 <= n) {
        float4 a = CG_VLOAD(4, 0, v + (p + 1) / 2);
        float8 t = (float8)(0.0f);

        if (p % 2)
            t.odd = a;
        else
            t.even = a;
        return t;
    }
    for (l = 0; l < CONV_VW; l++) {
        p = w0 + l + d;
        e[l] = p >= 0 && p % st == 0 && p / st < n ? CG_LD(v, p / st)
                                                    : 0.0f;
    }
    return vload8(0, e);
}

__kernel void
conv_direct_dx(__global const cg_t *dy, __global const cg_t *wt,
               __global cg_t *dx, DIRECT_ARGS, __global const cg_t *bias,
               int has_bias, int pl)
{
    int i = (int)get_global_id(0), np = (W + pl - 1) / pl;
    int Cg = C / G, Kg = K / G, w0, h, c, n, j, k, r, s, th;
    int dw3 = S1_3X3(R, S, sh, sw, dh, dw);
    int rows = dw3 ? DW3_ROWS : 1, nr = (H + rows - 1) / rows;
    int qb = i % np * pl, qe = min(W, qb + pl);
    __global const cg_t *dyr, *wk;

    if (i >= N * C * nr * np)
        return;
    i /= np;
    h = i % nr * rows;
    c = i / nr % C;
    n = i / nr / C;
    if (dw3) {
        k = c / Cg * Kg;
        rows3x3(dy + (n * K + k) * OH * OW, OH * OW, OH, OW,
                wt + (k * Cg + c % Cg) * 9, Cg * 9, Kg,
                dx + (n * C + c) * H * W, H, W, h, qb, qe, ph - 2, pw - 2,
                1, has_bias ? CG_LD(bias, c) : 0.0f, has_bias);
        return;
    }
    for (w0 = qb; w0 < qe; w0 += CONV_VW) {
        float8 acc = (float8)(0.0f);

        for (j = 0; j < Kg; j++) {
            k = c / Cg * Kg + j;
            wk = wt + (k * Cg + c % Cg) * R * S;
            for (r = 0; r < R; r++) {
                th = h + ph - r * dh;
                if (th < 0 || th % sh || th / sh >= OH)
                    continue;
                dyr = dy + ((n * K + k) * OH + th / sh) * OW;
                for (s = 0; s < S; s++)
                    acc += CG_LD(wk, r * S + s) *
                           taps8(dyr, w0, pw - s * dw, sw, OW);
            }
        }
        store8(dx + ((n * C + c) * H + h) * W + w0,
               has_bias ? acc + CG_LD(bias, c) : acc, W - w0);
    }
}

__kernel void
conv_direct_dw(__global const cg_t *dy, __global const cg_t *x,
               __global cg_t *dw_, DIRECT_ARGS)
{
    int i = (int)get_global_id(0), Cg = C / G, Kg = K / G;
    int s, r, cg, k, c, off, lo, hi, n, oh, ow, h;
    float8 acc = (float8)(0.0f);
    float e[CONV_VW];
    __global const cg_t *dyr, *xr;

    if (i >= K * Cg * R * S)
        return;
    s = i % S;
    r = i / S % R;
    cg = i / S / R % Cg;
    k = i / S / R / Cg;
    c = k / Kg * Cg + cg;
    /* the ow whose input column ow sw + off lies in [0, W) */
    off = s * dw - pw;
    lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
    hi = W - 1 - off < 0 ? 0 : (W - 1 - off) / sw + 1;
    hi = hi < OW ? hi : OW;
    for (n = 0; n < N; n++)
        for (oh = 0; oh < OH; oh++) {
            h = oh * sh - ph + r * dh;
            if (h < 0 || h >= H || lo >= hi)
                continue;
            dyr = dy + ((n * K + k) * OH + oh) * OW;
            xr = x + ((n * C + c) * H + h) * W;
            for (ow = lo; ow + CONV_VW <= hi; ow += CONV_VW)
                acc += CG_VLOAD(8, 0, dyr + ow) *
                       row8(xr, ow * sw + off, sw, W);
            for (; ow < hi; ow++)
                acc.s0 += CG_LD(dyr, ow) * CG_LD(xr, ow * sw + off);
        }
    vstore8(acc, 0, e);
    CG_ST(dw_, i, ((e[0] + e[1]) + (e[2] + e[3])) +
                  ((e[4] + e[5]) + (e[6] + e[7])));
}
