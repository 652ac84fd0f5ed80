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
 * fma_peak_fused: the same with fma(x, c, d).  A compiler may keep mad a
 *         multiply and an add (PoCL 3.1 on an AVX2 CPU did: 100-135
 *         GFLOP/s, where fma gave 195-202 and OpenBLAS's SGEMM 188); on a
 *         device without fused multiply-add, fma is the slow one.  The
 *         measurement takes the faster.
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

/* The body of fma_peak and fma_peak_fused, with OP mad or fma. */
#define FMA_PEAK_BODY(OP)                                                   \
    float s = (float)get_global_id(0) * 1e-6f;                              \
    float8 x0 = (float8)(s), x1 = x0 + 1.0f, x2 = x0 + 2.0f,                \
           x3 = x0 + 3.0f, x4 = x0 + 4.0f, x5 = x0 + 5.0f, x6 = x0 + 6.0f,  \
           x7 = x0 + 7.0f;                                                  \
    uint i;                                                                 \
                                                                            \
    for (i = 0; i < iters; i++) {                                           \
        x0 = OP(x0, c, d);                                                  \
        x1 = OP(x1, c, d);                                                  \
        x2 = OP(x2, c, d);                                                  \
        x3 = OP(x3, c, d);                                                  \
        x4 = OP(x4, c, d);                                                  \
        x5 = OP(x5, c, d);                                                  \
        x6 = OP(x6, c, d);                                                  \
        x7 = OP(x7, c, d);                                                  \
    }                                                                       \
    x0 = (x0 + x1) + (x2 + x3) + (x4 + x5) + (x6 + x7);                     \
    out[get_global_id(0)] = x0.s0 + x0.s1 + x0.s2 + x0.s3 + x0.s4 + x0.s5 + \
                            x0.s6 + x0.s7;

__kernel void
fma_peak(__global float *out, uint iters, float c, float d)
{
    FMA_PEAK_BODY(mad)
}

__kernel void
fma_peak_fused(__global float *out, uint iters, float c, float d)
{
    FMA_PEAK_BODY(fma)
}
