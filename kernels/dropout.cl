/* SPDX-License-Identifier: MIT */
/*
 * kernels/dropout.cl - applying a dropout keep-mask (drawn beforehand by
 * random.cl's dropout_mask: 1 / (1 - p) where kept, 0 where dropped).
 *
 *   dropout_f:  y[i] = x[x layout] * mask[i]
 *   dropout_b:  gx[i] = g[i] * mask[i]
 *
 * Index space: one work-item per element (n, padded to the host's
 * work-group size); x is read through the strided layout of common.cl,
 * everything else is contiguous.  No tunable parameters.
 *
 * Storage variants (common.cl's CG_T): x, y, g and gx are cg_t (float32,
 * float16 or bfloat16), the product is float32, rounded once; the mask is
 * float32 in every variant, so one draw drops the same elements whatever
 * the dtype.
 */

__kernel void
dropout_f(__global const cg_t *x, int xo, int8 shape, int8 sx, int nd,
          __global const float *mask, __global cg_t *y, uint n)
{
    uint i = get_global_id(0);

    if (i >= n)
        return;
    CG_ST(y, i, CG_LD(x, xo + cg_off(i, shape, sx, nd)) * mask[i]);
}

__kernel void
dropout_b(__global const cg_t *g, __global const float *mask,
          __global cg_t *gx, uint n)
{
    uint i = get_global_id(0);

    if (i >= n)
        return;
    CG_ST(gx, i, CG_LD(g, i) * mask[i]);
}
