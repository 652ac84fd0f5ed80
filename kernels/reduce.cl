/*
 * kernels/reduce.cl - deterministic reductions: sum (and mean), max with
 * argmax, variance.
 *
 * Index space: one work-group of RWG work-items per output element o (the
 * global size is n_out * RWG).  The input is strided: the kept dimensions
 * (kshape/kst, knd of them) locate row o, the reduced dimensions
 * (rshape/rst, rnd) its nred elements.  Each work-item accumulates the
 * elements lid, lid + RWG, ... in order, then a fixed-shape tree in local
 * memory combines them: the same order on every run, no atomics, so
 * results are bit-identical from run to run.
 *
 * Tunable: RWG, the work-group size (a power of two, default 64).
 *
 * @tunable RWG 64: 16 32 64 128 256
 */
#ifndef RWG
#define RWG 64
#endif

__kernel __attribute__((reqd_work_group_size(RWG, 1, 1))) void
reduce_sum(__global const float *x, int xo, int8 kshape, int8 kst, int knd,
           int8 rshape, int8 rst, int rnd, uint nred, __global float *y,
           float scale)
{
    __local float buf[RWG];
    uint o = get_group_id(0), lid = get_local_id(0), j, s;
    int base = xo + cg_off(o, kshape, kst, knd);
    float acc = 0.0f;

    for (j = lid; j < nred; j += RWG)
        acc += x[base + cg_off(j, rshape, rst, rnd)];
    buf[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (s = RWG / 2; s > 0; s >>= 1) {
        if (lid < s)
            buf[lid] += buf[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0)
        y[o] = buf[0] * scale;
}

/* Column sums of a row-major [R, C] matrix with row stride ld (the sum
 * over leading dimensions of a contiguous tensor: bias gradients).  One
 * work-item per column c and chunk of rows: part[chunk * C + c] = scale *
 * sum of rows chunk * rows .. (chunk + 1) * rows - 1, in order, so the
 * result is the same on every run.  Neighbouring work-items read
 * neighbouring columns (coalesced), unlike reduce_sum's one work-group per
 * column.  A second launch with R = nchunk adds the chunks up. */
__kernel void
reduce_cols(__global const float *x, int xo, int ld, int R, int C, int rows,
            __global float *part, float scale)
{
    int c = get_global_id(0), chunk = get_global_id(1), r, end;
    __global const float *p;
    float acc = 0.0f;

    if (c >= C)
        return;
    r = chunk * rows;
    end = min(R, r + rows);
    p = x + xo + (long)r * ld + c;
    for (; r < end; r++, p += ld)
        acc += *p;
    part[(long)chunk * C + c] = acc * scale;
}

/* Is (v, i) a better maximum than (bv, bi)?  NaN wins (it propagates, as
 * in PyTorch), then the larger value, then the smaller index. */
inline int
cg_better(float v, int i, float bv, int bi)
{
    if (isnan(v) != isnan(bv))
        return isnan(v);
    return v > bv || (v == bv && i < bi) || (isnan(v) && i < bi);
}

/* y[o] = max of row o; am[o] = the row-major index into x's full shape of
 * the first maximal element (kcs, rcs: x's contiguous strides). */
__kernel __attribute__((reqd_work_group_size(RWG, 1, 1))) void
reduce_max(__global const float *x, int xo, int8 kshape, int8 kst,
           int8 kcs, int knd, int8 rshape, int8 rst, int8 rcs, int rnd,
           uint nred, __global float *y, __global int *am)
{
    __local float bv[RWG];
    __local int bi[RWG];
    uint o = get_group_id(0), lid = get_local_id(0), j, s;
    int2 base = cg_off2(o, kshape, kst, kcs, knd);
    float best = -INFINITY;
    int besti = 0x7fffffff;

    for (j = lid; j < nred; j += RWG) {
        int2 r = cg_off2(j, rshape, rst, rcs, rnd);
        float v = x[xo + base.x + r.x];

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
        y[o] = bv[0];
        am[o] = bi[0];
    }
}

/* gx[am[o]] = g[o]: the gradient of max (gx zeroed beforehand). */
__kernel void
max_backward(__global const float *g, __global const int *am,
             __global float *gx, uint nout)
{
    uint o = get_global_id(0);

    if (o >= nout)
        return;
    gx[am[o]] = g[o];
}

/* y[o] = sum over row o of (x - mean)^2 / (nred - correction), the mean
 * computed first in the same work-group (two passes over the row). */
__kernel __attribute__((reqd_work_group_size(RWG, 1, 1))) void
reduce_var(__global const float *x, int xo, int8 kshape, int8 kst, int knd,
           int8 rshape, int8 rst, int rnd, uint nred, __global float *y,
           float correction)
{
    __local float buf[RWG];
    uint o = get_group_id(0), lid = get_local_id(0), j, s;
    int base = xo + cg_off(o, kshape, kst, knd);
    float acc = 0.0f, mean;

    for (j = lid; j < nred; j += RWG)
        acc += x[base + cg_off(j, rshape, rst, rnd)];
    buf[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (s = RWG / 2; s > 0; s >>= 1) {
        if (lid < s)
            buf[lid] += buf[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    mean = buf[0] / (float)nred;
    barrier(CLK_LOCAL_MEM_FENCE);
    acc = 0.0f;
    for (j = lid; j < nred; j += RWG) {
        float d = x[base + cg_off(j, rshape, rst, rnd)] - mean;

        acc += d * d;
    }
    buf[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (s = RWG / 2; s > 0; s >>= 1) {
        if (lid < s)
            buf[lid] += buf[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0)
        y[o] = buf[0] / ((float)nred - correction);
}
