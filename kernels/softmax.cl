/* SPDX-License-Identifier: MIT */
/*
 * kernels/softmax.cl - softmax and log-softmax along one dimension, and
 * their gradients.
 *
 * Index space: one work-group of SWG work-items per row (the global size
 * is rows * SWG).  A row is the n elements along the softmax dimension,
 * element stride xs in x; the other dimensions (kshape, knd of them) locate
 * the row, with strides kx in x and ky in the contiguous output (element
 * stride ys there).  Each
 * work-item combines the elements lid, lid + SWG, ... in order and a
 * fixed-shape tree in local memory combines the work-items, so results are
 * bit-identical from run to run.  The row's maximum is subtracted before
 * exp, so no finite input overflows.
 *
 * Storage variants (common.cl's cg_t): x, y, g and gx are float32,
 * float16 or bfloat16 in memory; max, exp, the sums and the result are
 * float32 in registers, each output element rounded once.
 *
 * Tunable: SWG, the work-group size (a power of two).  The @tunable line
 * is its one default (build-aux/cltable.sh puts it in the kernel table;
 * the library always passes -DSWG) and the candidates clgrad-tune tries.
 *
 * @tunable SWG 64: 16 32 64 128 256
 *
 * Each kernel is a program of its own (common.cl's CG_WANT):
 * @split
 */

/* y = softmax(x) along the row, or log_softmax(x) when logmode is set. */
#if CG_WANT(softmax_f)
__kernel __attribute__((reqd_work_group_size(SWG, 1, 1))) void
softmax_f(__global const cg_t *x, int xo, int8 kshape, int8 kx, int8 ky,
          int knd, uint n, int xs, int ys, __global cg_t *y,
          int logmode)
{
    __local float buf[SWG];
    uint o = get_group_id(0), lid = get_local_id(0), j;
    int2 base = cg_off2(o, kshape, kx, ky, knd);
    __global const cg_t *xr = x + xo + base.x;
    __global cg_t *yr = y + base.y;
    float m = -INFINITY, s = 0.0f, ls;

    for (j = lid; j < n; j += SWG)
        m = fmax(m, CG_LD(xr, j * xs));
    m = cg_wg_max(buf, m, SWG);    /* a NaN still makes the row NaN */
    for (j = lid; j < n; j += SWG)
        s += exp(CG_LD(xr, j * xs) - m);
    s = cg_wg_sum(buf, s, SWG);
    ls = log(s);
    for (j = lid; j < n; j += SWG)
        CG_ST(yr, j * ys, logmode ? CG_LD(xr, j * xs) - m - ls
                                  : exp(CG_LD(xr, j * xs) - m) / s);
}
#endif

/* The gradient from y (the forward's output), g and gx, all contiguous
 * of one shape; rows as above with element stride ys.  softmax:
 * gx = y (g - sum(g y)); log_softmax: gx = g - exp(y) sum(g). */
#if CG_WANT(softmax_b)
__kernel __attribute__((reqd_work_group_size(SWG, 1, 1))) void
softmax_b(__global const cg_t *y, __global const cg_t *g,
          __global cg_t *gx, int8 kshape, int8 ky, int knd, uint n, int ys,
          int logmode)
{
    __local float buf[SWG];
    uint o = get_group_id(0), lid = get_local_id(0), j;
    int base = cg_off(o, kshape, ky, knd);
    float s = 0.0f;

    y += base;
    g += base;
    gx += base;
    for (j = lid; j < n; j += SWG)
        s += logmode ? CG_LD(g, j * ys) : CG_LD(g, j * ys) * CG_LD(y, j * ys);
    s = cg_wg_sum(buf, s, SWG);
    for (j = lid; j < n; j += SWG)
        CG_ST(gx, j * ys,
              logmode ? CG_LD(g, j * ys) - exp(CG_LD(y, j * ys)) * s
                      : CG_LD(y, j * ys) * (CG_LD(g, j * ys) - s));
}
#endif
