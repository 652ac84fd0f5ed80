/* SPDX-License-Identifier: MIT */
/*
 * kernels/measure.cl - kernels for the device measurements of
 * cg_context_measure and clgrad-info.
 *
 * copy4:  dst[i] = src[i] for i < n, over float4; index space: n rounded up
 *         to a multiple of the work-group size, one float4 per work-item.
 * empty:  does nothing; times the cost of a launch.
 * No tunable parameters.
 */
__kernel void
copy4(__global const float4 *src, __global float4 *dst, uint n)
{
    uint i = get_global_id(0);

    if (i >= n)
        return;
    dst[i] = src[i];
}

__kernel void
empty(void)
{
}
