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
 */

__kernel void
dropout_f(__global const float *x, int xo, int8 shape, int8 sx, int nd,
          __global const float *mask, __global float *y, uint n)
{
    uint i = get_global_id(0);

    if (i >= n)
        return;
    y[i] = x[xo + cg_off(i, shape, sx, nd)] * mask[i];
}

__kernel void
dropout_b(__global const float *g, __global const float *mask,
          __global float *gx, uint n)
{
    uint i = get_global_id(0);

    if (i >= n)
        return;
    gx[i] = g[i] * mask[i];
}
