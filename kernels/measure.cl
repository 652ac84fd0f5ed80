/* SPDX-License-Identifier: MIT */
/*
 * kernels/measure.cl - kernels for the device measurements of
 * cg_context_measure and clgrad-info.
 *
 * copy4:  dst[i] = src[i] for i < n, over float4; index space: n rounded up
 *         to a multiple of the work-group size, one float4 per work-item.
 * empty:  does nothing; times the cost of a launch.
 * fma_peak: out[i] = a sum over 8 float8 accumulators, each iterated
 *         `iters` times as x = mad(x, c, d): 64 independent FMA chains per
 *         work-item, 128 FLOP per iteration, so that FMA latency is hidden
 *         and a SIMD unit stays full; index space: any multiple of the
 *         work-group size, one result per work-item (stored, so that the
 *         chains are not optimised out).  c < 1 keeps x finite and normal.
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

__kernel void
fma_peak(__global float *out, uint iters, float c, float d)
{
    float s = (float)get_global_id(0) * 1e-6f;
    float8 x0 = (float8)(s), x1 = x0 + 1.0f, x2 = x0 + 2.0f, x3 = x0 + 3.0f,
           x4 = x0 + 4.0f, x5 = x0 + 5.0f, x6 = x0 + 6.0f, x7 = x0 + 7.0f;
    uint i;

    for (i = 0; i < iters; i++) {
        x0 = mad(x0, c, d);
        x1 = mad(x1, c, d);
        x2 = mad(x2, c, d);
        x3 = mad(x3, c, d);
        x4 = mad(x4, c, d);
        x5 = mad(x5, c, d);
        x6 = mad(x6, c, d);
        x7 = mad(x7, c, d);
    }
    x0 = (x0 + x1) + (x2 + x3) + (x4 + x5) + (x6 + x7);
    out[get_global_id(0)] = x0.s0 + x0.s1 + x0.s2 + x0.s3 + x0.s4 + x0.s5 +
                            x0.s6 + x0.s7;
}
