/* SPDX-License-Identifier: MIT */
/*
 * kernels/loss.cl - losses and their gradients: cross entropy (with label
 * smoothing), negative log-likelihood, mean squared error and binary cross
 * entropy with logits.  Each forward kernel writes one loss per row or per
 * element; the host sums those with the deterministic reduce_sum for the
 * mean and sum reductions.
 *
 * Class losses read logits x [N, C] and int32 targets t [N] through one
 * int8 of geometry, p = (x offset, x row stride, x class stride, C,
 * t offset, t stride, ignore_index, unused), all in elements.  A target
 * outside [0, C) is treated like ignore_index: the host validates targets
 * before launching, and this guard only makes sure that a bad one can never
 * index outside x.
 *
 * Gradient kernels take the upstream gradient g with stride gs (0 when the
 * loss was reduced to one number, 1 for reduction none) and a scale
 * (1/count for a mean).
 *
 * Index spaces: ce_f one work-group of LWG work-items per row (global
 * N * LWG, fixed-order tree: deterministic); every other kernel one
 * work-item per output element, padded to whole work-groups.
 *
 * Storage variants (common.cl's cg_t): the logits or inputs, targets of
 * the pointwise losses, upstream gradients and input gradients are
 * float32, float16 or bfloat16 in memory; the per-row losses and lse stay
 * float32 (the host sums them in float32 and rounds the result once).
 *
 * Tunable: LWG, the work-group size of ce_f (a power of two).  The
 * @tunable line is its one default (build-aux/cltable.sh puts it in the
 * kernel table; the library always passes -DLWG) and the candidates
 * clgrad-tune tries.
 *
 * @tunable LWG 64: 16 32 64 128 256
 *
 * Each kernel is a program of its own (common.cl's CG_WANT):
 * @split
 */

/* The target of row i, or -1 if it is ignored (or out of range). */
static inline int
cls_target(__global const int *t, int8 p, uint i)
{
    int c = t[p.s4 + (int)i * p.s5];

    return (c == p.s6 || c < 0 || c >= p.s3) ? -1 : c;
}

/* loss[i] = (1 - eps) (lse - x[i, t]) + eps / C * sum_c (lse - x[i, c]),
 * 0 for an ignored row; lse[i] = log sum_c exp x[i, c] for the gradient. */
#if CG_WANT(ce_f)
__kernel __attribute__((reqd_work_group_size(LWG, 1, 1))) void
ce_f(__global const cg_t *x, __global const int *t, int8 p, float eps,
     __global float *loss, __global float *lse)
{
    __local float buf[LWG];
    uint i = get_group_id(0), lid = get_local_id(0), c, nc = (uint)p.s3;
    __global const cg_t *xr = x + p.s0 + (int)i * p.s1;
    float m = -INFINITY, se = 0.0f, sd = 0.0f, ls;
    int tc;

    for (c = lid; c < nc; c += LWG)
        m = fmax(m, CG_LD(xr, (int)c * p.s2));
    m = cg_wg_max(buf, m, LWG);
    for (c = lid; c < nc; c += LWG) {
        float v = CG_LD(xr, (int)c * p.s2);

        se += exp(v - m);
        sd += m - v;        /* >= 0: no cancellation in the smoothing sum */
    }
    se = cg_wg_sum(buf, se, LWG);
    sd = cg_wg_sum(buf, sd, LWG);
    if (lid != 0)
        return;
    ls = log(se);
    tc = cls_target(t, p, i);
    lse[i] = m + ls;
    loss[i] = tc < 0 ? 0.0f
            : (1.0f - eps) * (m + ls - CG_LD(xr, tc * p.s2))
              + eps / (float)nc * ((float)nc * ls + sd);
}
#endif

/* gx[i, c] = g_i (softmax(x)[i, c] - (1 - eps) [c == t_i] - eps / C); gx
 * is contiguous [N, C]. */
#if CG_WANT(ce_b)
__kernel void
ce_b(__global const cg_t *x, __global const int *t, int8 p, float eps,
     __global const float *lse, __global const cg_t *g, int gs,
     float scale, __global cg_t *gx, uint n)
{
    uint j = get_global_id(0), nc = (uint)p.s3, i, c;
    float gi, q;
    int tc;

    if (j >= n)
        return;
    i = j / nc;
    c = j % nc;
    tc = cls_target(t, p, i);
    gi = CG_LD(g, (int)i * gs) * scale;
    q = exp(CG_LD(x, p.s0 + (int)i * p.s1 + (int)c * p.s2) - lse[i]);
    CG_ST(gx, j, tc < 0 ? 0.0f
          : gi * (q - ((int)c == tc ? 1.0f - eps : 0.0f) - eps / (float)nc));
}
#endif

/* loss[i] = -x[i, t_i], 0 for an ignored row. */
#if CG_WANT(nll_f)
__kernel void
nll_f(__global const cg_t *x, __global const int *t, int8 p,
      __global float *loss, uint n)
{
    uint i = get_global_id(0);
    int tc;

    if (i >= n)
        return;
    tc = cls_target(t, p, i);
    loss[i] = tc < 0 ? 0.0f : -CG_LD(x, p.s0 + (int)i * p.s1 + tc * p.s2);
}
#endif

/* gx[i, c] = -g_i where c == t_i, else 0; gx contiguous [N, C]. */
#if CG_WANT(nll_b)
__kernel void
nll_b(__global const int *t, int8 p, __global const cg_t *g, int gs,
      float scale, __global cg_t *gx, uint n)
{
    uint j = get_global_id(0), nc = (uint)p.s3, i;

    if (j >= n)
        return;
    i = j / nc;
    CG_ST(gx, j, (int)(j % nc) == cls_target(t, p, i)
                 ? -CG_LD(g, (int)i * gs) * scale : 0.0f);
}
#endif

/* Pointwise losses of a and b (same shape, strided as in common.cl) into
 * contiguous y.  kind 0: mse, (a - b)^2.  kind 1: binary cross entropy of
 * logits a against targets b, max(a, 0) - a b + log(1 + exp(-|a|)), which
 * never overflows. */
#if CG_WANT(pointwise_f)
__kernel void
pointwise_f(__global const cg_t *a, int ao, __global const cg_t *b, int bo,
            int8 shape, int8 sa, int8 sb, int nd, int kind,
            __global float *y, uint n)
{
    uint i = get_global_id(0);
    int2 o;
    float x, v;

    if (i >= n)
        return;
    o = cg_off2(i, shape, sa, sb, nd);
    x = CG_LD(a, ao + o.x);
    v = CG_LD(b, bo + o.y);
    y[i] = kind == 0 ? (x - v) * (x - v)
         : fmax(x, 0.0f) - x * v + log1p(exp(-fabs(x)));
}
#endif

/* Their gradients into contiguous ga / gb (want: bit 0 a, bit 1 b).
 * mse: ga = 2 (a - b) g, gb = -ga.  bce: ga = (sigmoid(a) - b) g,
 * gb = -a g. */
#if CG_WANT(pointwise_b)
__kernel void
pointwise_b(__global const cg_t *a, int ao, __global const cg_t *b, int bo,
            int8 shape, int8 sa, int8 sb, int nd, int kind,
            __global const cg_t *g, int gs, float scale,
            __global cg_t *ga, __global cg_t *gb, int want, uint n)
{
    uint i = get_global_id(0);
    int2 o;
    float x, v, gi, da, db;

    if (i >= n)
        return;
    o = cg_off2(i, shape, sa, sb, nd);
    x = CG_LD(a, ao + o.x);
    v = CG_LD(b, bo + o.y);
    gi = CG_LD(g, (int)i * gs) * scale;
    if (kind == 0) {
        da = 2.0f * (x - v) * gi;
        db = -da;
    } else {
        float e = exp(-fabs(x));
        float sig = x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);

        da = (sig - v) * gi;
        db = -x * gi;
    }
    if (want & 1)
        CG_ST(ga, i, da);
    if (want & 2)
        CG_ST(gb, i, db);
}
#endif
