/* SPDX-License-Identifier: MIT */
/*
 * kernels/random.cl - counter-based random numbers (Philox4x32-10,
 * Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011).
 *
 * Work-item i computes the 128-bit block for counter (offset + i) under
 * the 64-bit key `seed` and writes elements 4i .. 4i+3 (those below n).
 * Element j of a draw therefore depends only on (seed, offset, j), never
 * on the launch shape.  Index space: ceil(n / 4) work-items, padded.
 * No tunable parameters.
 *
 * Each kernel is a program of its own (common.cl's CG_WANT):
 * @split
 */

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

static inline uint4
philox4x32_10(uint4 c, uint2 k)
{
    int r;

    for (r = 0; r < 10; r++) {
        uint lo0 = PHILOX_M0 * c.x, hi0 = mul_hi(PHILOX_M0, c.x);
        uint lo1 = PHILOX_M1 * c.z, hi1 = mul_hi(PHILOX_M1, c.z);

        c = (uint4)(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
        k += (uint2)(PHILOX_W0, PHILOX_W1);
    }
    return c;
}

static inline uint4
cg_random_block(uint i, ulong seed, ulong offset)
{
    ulong ctr = offset + i;

    return philox4x32_10((uint4)((uint)ctr, (uint)(ctr >> 32), 0u, 0u),
                         (uint2)((uint)seed, (uint)(seed >> 32)));
}

/* 24 random bits to a float in [0, 1). */
static inline float4
cg_u01(uint4 r)
{
    return convert_float4(r >> 8) * (1.0f / 16777216.0f);
}

#if CG_WANT(uniform)
__kernel void
uniform(__global float *y, uint n, ulong seed, ulong offset, float low,
        float high)
{
    uint i = get_global_id(0), j;
    float4 u;
    float v[4];

    if (4 * i >= n)
        return;
    u = low + (high - low) * cg_u01(cg_random_block(i, seed, offset));
    vstore4(u, 0, v);
    for (j = 0; j < 4 && 4 * i + j < n; j++)
        y[4 * i + j] = v[j];
}
#endif

/* Box-Muller on the pairs (u0, u1) and (u2, u3); u0, u2 in (0, 1]. */
#if CG_WANT(normal)
__kernel void
normal(__global float *y, uint n, ulong seed, ulong offset, float mean,
       float std)
{
    uint i = get_global_id(0), j;
    float4 u;
    float r0, r1, v[4];

    if (4 * i >= n)
        return;
    u = cg_u01(cg_random_block(i, seed, offset));
    r0 = sqrt(-2.0f * log(1.0f - u.x));
    r1 = sqrt(-2.0f * log(1.0f - u.z));
    v[0] = mean + std * r0 * cospi(2.0f * u.y);
    v[1] = mean + std * r0 * sinpi(2.0f * u.y);
    v[2] = mean + std * r1 * cospi(2.0f * u.w);
    v[3] = mean + std * r1 * sinpi(2.0f * u.w);
    for (j = 0; j < 4 && 4 * i + j < n; j++)
        y[4 * i + j] = v[j];
}
#endif

/* Bernoulli keep-mask for dropout: y[j] = (u >= p) ? scale : 0. */
#if CG_WANT(dropout_mask)
__kernel void
dropout_mask(__global float *y, uint n, ulong seed, ulong offset, float p,
             float scale)
{
    uint i = get_global_id(0), j;
    float v[4];

    if (4 * i >= n)
        return;
    vstore4(cg_u01(cg_random_block(i, seed, offset)), 0, v);
    for (j = 0; j < 4 && 4 * i + j < n; j++)
        y[4 * i + j] = v[j] >= p ? scale : 0.0f;
}
#endif
