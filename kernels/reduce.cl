/* SPDX-License-Identifier: MIT */
/*
 * kernels/reduce.cl - deterministic reductions: sum (and mean), max with
 * argmax, variance.
 *
 * reduce_sum, reduce_max, reduce_var, any layout: one work-group of RWG
 * work-items per output element o (the global size is n_out * RWG).  The
 * input is strided: the kept dimensions (kshape/kst, knd of them) locate
 * row o, the reduced dimensions (rshape/rst, rnd) its nred elements.  Each
 * work-item accumulates the elements lid, lid + RWG, ... in order, then a
 * fixed-shape tree in local memory combines them: the same order on every
 * run, no atomics, so results are bit-identical from run to run.
 *
 * reduce_rows, sums of contiguous rows (a full sum is one row): ng
 * work-groups of RWG per row (global size ng * RWG by the number of rows),
 * each work-item a contiguous run of elements, VW at a time; the partial
 * sums then take a second launch over rows of ng.  reduce_cols, column
 * sums of a row-major matrix: COLS columns per work-item as vectors, a
 * chunk of rows each, and a second launch over the chunks
 * (reduce_cols_fin's for a 16-bit result).  Both read
 * memory as a CPU streams it (one work-item's loads are consecutive) and
 * use explicit vectors, which PoCL needs to reach memory bandwidth; vloadn
 * needs only element alignment, so any element offset and row length
 * take this path.  Their summation orders depend only on the sizes (and
 * RWG): deterministic too.
 *
 * Storage variants (common.cl's cg_t): x, y and the gradients are
 * float32, float16 or bfloat16 in memory; every sum is float32 in
 * registers and y is rounded once.  The partial sums of reduce_rows and
 * reduce_cols are float32 in every variant (part): the host runs their
 * second pass with the float32 variant and rounds the result once, or,
 * for reduce_cols, with reduce_cols_fin of the result's variant.
 *
 * Tunable: RWG, the work-group size (a power of two).  The @tunable line
 * is its one default (build-aux/cltable.sh puts it in the kernel table;
 * the library always passes -DRWG) and the candidates clgrad-tune tries.
 *
 * @tunable RWG 64: 16 32 64 128 256
 *
 * Each kernel is a program of its own (common.cl's CG_WANT):
 * @split
 */

#if CG_WANT(reduce_sum)
__kernel __attribute__((reqd_work_group_size(RWG, 1, 1))) void
reduce_sum(__global const cg_t *x, int xo, int8 kshape, int8 kst, int knd,
           int8 rshape, int8 rst, int rnd, uint nred, __global cg_t *y,
           float scale)
{
    __local float buf[RWG];
    uint o = get_group_id(0), lid = get_local_id(0), j;
    int base = xo + cg_off(o, kshape, kst, knd);
    float acc = 0.0f;

    for (j = lid; j < nred; j += RWG)
        acc += CG_LD(x, base + cg_off(j, rshape, rst, rnd));
    acc = cg_wg_sum(buf, acc, RWG);
    if (lid == 0)
        CG_ST(y, o, acc * scale);
}
#endif

#define VW 8
#define VF float8
#define VLOAD(i, p) CG_VLOAD(8, i, p)    /* x: the variant's storage */
#define VSTORE vstore8                    /* part: float32 */

/* Columns per work-item of reduce_cols (lib/ops/reduce.c's COL_BLOCK):
 * four vectors, so that a CPU work-item reads whole cache lines of a row. */
#define COLS (4 * VW)

/* The sum of v's lanes, in a fixed order. */
static inline float
cg_hsum(VF v)
{
    float4 h = v.lo + v.hi;

    return (h.s0 + h.s2) + (h.s1 + h.s3);
}

/* part[o * ng + w] = scale * the sum of elements w * chunk ..
 * min(len, (w + 1) * chunk) - 1 of row o of x (rows of len elements from
 * element xo, contiguous): work-group (w, o), each work-item a run of
 * chunk / RWG elements (chunk a multiple of RWG * VW), the runs then
 * combined by reduce_sum's tree. */
#if CG_WANT(reduce_rows)
__kernel __attribute__((reqd_work_group_size(RWG, 1, 1))) void
reduce_rows(__global const cg_t *x, int xo, uint len, uint chunk,
            __global float *part, float scale)
{
    __local float buf[RWG];
    uint w = get_group_id(0), ng = get_num_groups(0), o = get_global_id(1);
    uint lid = get_local_id(0), run = chunk / RWG;
    uint j = w * chunk + lid * run, e = min(len, j + run);
    __global const cg_t *p = x + xo + (size_t)o * len;
    VF v = 0.0f;
    float acc = 0.0f;

    for (; j + VW <= e; j += VW)
        v += VLOAD(0, p + j);
    for (; j < e; j++)
        acc += CG_LD(p, j);
    acc = cg_wg_sum(buf, cg_hsum(v) + acc, RWG);
    if (lid == 0)
        part[(size_t)o * ng + w] = acc * scale;
}
#endif

/* Column sums of a row-major [R, C] matrix with row stride ld (the sum
 * over leading dimensions of a contiguous tensor: bias gradients).
 * Work-item (b, chunk) handles columns b * COLS .. b * COLS + COLS - 1
 * and rows chunk * rows .. (chunk + 1) * rows - 1: part[chunk * C + c] =
 * scale * the sum of those rows of column c, in row order, so the result
 * is the same on every run.  A work-item's loads along a row are
 * consecutive vectors; the last, partial block of columns goes one column
 * at a time.  A second launch with R = nchunk adds the chunks up. */
#if CG_WANT(reduce_cols)
__kernel void
reduce_cols(__global const cg_t *x, int xo, int ld, int R, int C, int rows,
            __global float *part, float scale)
{
    int c = get_global_id(0) * COLS, chunk = get_global_id(1), r, end, k;
    __global const cg_t *p;
    __global float *q;

    if (c >= C)
        return;
    r = chunk * rows;
    end = min(R, r + rows);
    p = x + xo + (long)r * ld + c;
    q = part + (long)chunk * C + c;
    if (c + COLS <= C) {
        VF a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;

        for (; r < end; r++, p += ld) {
            a0 += VLOAD(0, p);
            a1 += VLOAD(1, p);
            a2 += VLOAD(2, p);
            a3 += VLOAD(3, p);
        }
        VSTORE(a0 * scale, 0, q);
        VSTORE(a1 * scale, 1, q);
        VSTORE(a2 * scale, 2, q);
        VSTORE(a3 * scale, 3, q);
        return;
    }
    for (k = 0; c + k < C; k++) {
        __global const cg_t *pk = p + k;
        float acc = 0.0f;
        int i;

        for (i = r; i < end; i++, pk += ld)
            acc += CG_LD(pk, 0);
        q[k] = acc * scale;
    }
}
#endif

/* The second launch of a column sum into a 16-bit y (the variant's
 * storage): y[c] = scale * the sum of the chunk sums part[0 .. nchunk -
 * 1][c] (float32), in chunk order as reduce_cols's float32 second launch
 * adds them, rounded once: the same bits as that launch and a cast after
 * it, one launch fewer.  A work-item a column. */
#if CG_WANT(reduce_cols_fin)
__kernel void
reduce_cols_fin(__global const float *part, int nchunk, int C,
                __global cg_t *y, float scale)
{
    int c = get_global_id(0), i;
    float acc = 0.0f;

    if (c >= C)
        return;
    for (i = 0; i < nchunk; i++)
        acc += part[(long)i * C + c];
    CG_ST(y, c, acc * scale);
}
#endif

/* Is (v, i) a better maximum than (bv, bi)?  NaN wins (it propagates, as
 * in PyTorch), then the larger value, then the smaller index. */
static inline int
cg_better(float v, int i, float bv, int bi)
{
    if (isnan(v) != isnan(bv))
        return isnan(v);
    return v > bv || (v == bv && i < bi) || (isnan(v) && i < bi);
}

/* y[o] = max of row o; am[o] = the row-major index into x's full shape of
 * the first maximal element (kcs, rcs: x's contiguous strides). */
#if CG_WANT(reduce_max)
__kernel __attribute__((reqd_work_group_size(RWG, 1, 1))) void
reduce_max(__global const cg_t *x, int xo, int8 kshape, int8 kst,
           int8 kcs, int knd, int8 rshape, int8 rst, int8 rcs, int rnd,
           uint nred, __global cg_t *y, __global int *am)
{
    __local float bv[RWG];
    __local int bi[RWG];
    uint o = get_group_id(0), lid = get_local_id(0), j, s;
    int2 base = cg_off2(o, kshape, kst, kcs, knd);
    float best = -INFINITY;
    int besti = 0x7fffffff;

    for (j = lid; j < nred; j += RWG) {
        int2 r = cg_off2(j, rshape, rst, rcs, rnd);
        float v = CG_LD(x, xo + base.x + r.x);

        if (cg_better(v, base.y + r.y, best, besti)) {
            best = v;
            besti = base.y + r.y;
        }
    }
    bv[lid] = best;
    bi[lid] = besti;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (s = RWG / 2; s > 0; s >>= 1) {
        if (lid < s && cg_better(bv[lid + s], bi[lid + s], bv[lid], bi[lid])) {
            bv[lid] = bv[lid + s];
            bi[lid] = bi[lid + s];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) {
        CG_ST(y, o, bv[0]);    /* an element of x: exact */
        am[o] = bi[0];
    }
}
#endif

/* gx[am[o]] = g[o]: the gradient of max (gx zeroed beforehand). */
#if CG_WANT(max_backward)
__kernel void
max_backward(__global const cg_t *g, __global const int *am,
             __global cg_t *gx, uint nout)
{
    uint o = get_global_id(0);

    if (o >= nout)
        return;
    CG_ST(gx, am[o], CG_LD(g, o));
}
#endif

/* y[o] = sum over row o of (x - mean)^2 / (nred - correction), the mean
 * computed first in the same work-group (two passes over the row). */
#if CG_WANT(reduce_var)
__kernel __attribute__((reqd_work_group_size(RWG, 1, 1))) void
reduce_var(__global const cg_t *x, int xo, int8 kshape, int8 kst, int knd,
           int8 rshape, int8 rst, int rnd, uint nred, __global cg_t *y,
           float correction)
{
    __local float buf[RWG];
    uint o = get_group_id(0), lid = get_local_id(0), j;
    int base = xo + cg_off(o, kshape, kst, knd);
    float acc = 0.0f, mean;

    for (j = lid; j < nred; j += RWG)
        acc += CG_LD(x, base + cg_off(j, rshape, rst, rnd));
    mean = cg_wg_sum(buf, acc, RWG) / (float)nred;
    barrier(CLK_LOCAL_MEM_FENCE);
    acc = 0.0f;
    for (j = lid; j < nred; j += RWG) {
        float d = CG_LD(x, base + cg_off(j, rshape, rst, rnd)) - mean;

        acc += d * d;
    }
    acc = cg_wg_sum(buf, acc, RWG);
    if (lid == 0)
        CG_ST(y, o, acc / ((float)nred - correction));
}
#endif
