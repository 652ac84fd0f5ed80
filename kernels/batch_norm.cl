/* SPDX-License-Identifier: MIT */
/*
 * kernels/batch_norm.cl - batch normalisation per channel of a contiguous
 * [N, C, L] input (L = H * W, or 1), PyTorch semantics; M = N * L values
 * per channel.
 *
 *   batch_norm_stats:  training: mean[c] and invstd[c] = 1 / sqrt(var +
 *                      eps) from the batch (two passes: the mean, then
 *                      the squared deviations; biased variance), and when
 *                      flags bit 2 is set uvar[c], the unbiased variance
 *                      var * M / (M - 1).  eval: mean = rm, invstd = 1 /
 *                      sqrt(rv + eps).
 *   batch_norm_running: the running statistics in place: rm = (1 -
 *                      momentum) rm + momentum mean, rv likewise with
 *                      uvar.
 *   batch_norm_f:      y = (x - mean[c]) invstd[c] w[c] + b[c]
 *   batch_norm_sums:   sg[c] = sum g, sgx[c] = sum g xh with xh = (x -
 *                      mean) invstd: the gradients of b and w.
 *   batch_norm_gx:     training: gx = w invstd (g - sg / M - xh sgx / M);
 *                      eval: gx = g w invstd.
 *
 * flags bit 0: w present, bit 1: b present (absent buffers are
 * placeholders never read), bit 2: update the running statistics, bit 3:
 * training.  The per-channel kernels run one work-group of BN_WG
 * work-items per channel (global size C * BN_WG): each work-item adds the
 * elements lid, lid + BN_WG, ... in order and common.cl's fixed tree
 * combines them, so results are identical from run to run (no atomics).
 * The elementwise kernels run one work-item per element.
 *
 * Storage variants (common.cl's cg_t): x, w, b, y, g and gx are float32,
 * float16 or bfloat16 in memory (one dtype); the batch and running
 * statistics (mean, invstd, uvar, rm, rv), the sums sg and sgx and all
 * arithmetic are float32.
 */

#define BN_WG 64

__kernel __attribute__((reqd_work_group_size(BN_WG, 1, 1))) void
batch_norm_stats(__global const cg_t *x, uint N, uint C, uint L, int flags,
                 float eps, __global const float *rm,
                 __global const float *rv, __global float *mean,
                 __global float *invstd, __global float *uvar)
{
    __local float buf[BN_WG];
    uint c = get_group_id(0), lid = get_local_id(0);
    size_t M = (size_t)N * L, j;
    float acc = 0.0f, mu, var;

    if (!(flags & 8)) {
        if (lid == 0) {
            mean[c] = rm[c];
            invstd[c] = 1.0f / sqrt(rv[c] + eps);
        }
        return;
    }
    for (j = lid; j < M; j += BN_WG)
        acc += CG_LD(x, ((j / L) * C + c) * L + j % L);
    mu = cg_wg_sum(buf, acc, BN_WG) / (float)M;
    acc = 0.0f;
    for (j = lid; j < M; j += BN_WG) {
        float d = CG_LD(x, ((j / L) * C + c) * L + j % L) - mu;

        acc += d * d;
    }
    var = cg_wg_sum(buf, acc, BN_WG) / (float)M;
    if (lid == 0) {
        mean[c] = mu;
        invstd[c] = 1.0f / sqrt(var + eps);
        if (flags & 4)
            uvar[c] = var * (float)M / (float)(M - 1);
    }
}

/* The running statistics' update, one work-item per channel.  A kernel of
 * its own: done by work-item 0 at the end of batch_norm_stats, PoCL 3.1
 * applied the read-modify-write 64 times (once per work-item of the
 * group, by the numbers: momentum 0.1 acted as 1 - 0.9^64). */
__kernel void
batch_norm_running(__global const float *mean, __global const float *uvar,
                   uint C, float momentum, __global float *rm,
                   __global float *rv)
{
    uint c = get_global_id(0);

    if (c >= C)
        return;
    rm[c] = (1.0f - momentum) * rm[c] + momentum * mean[c];
    rv[c] = (1.0f - momentum) * rv[c] + momentum * uvar[c];
}

__kernel void
batch_norm_f(__global const cg_t *x, __global const cg_t *w,
             __global const cg_t *b, uint C, uint L, int flags,
             __global const float *mean, __global const float *invstd,
             ulong n, __global cg_t *y)
{
    size_t i = get_global_id(0);
    uint c;
    float v;

    if (i >= n)
        return;
    c = (uint)((i / L) % C);
    v = (CG_LD(x, i) - mean[c]) * invstd[c];
    if (flags & 1)
        v *= CG_LD(w, c);
    if (flags & 2)
        v += CG_LD(b, c);
    CG_ST(y, i, v);
}

__kernel __attribute__((reqd_work_group_size(BN_WG, 1, 1))) void
batch_norm_sums(__global const cg_t *x, __global const cg_t *g, uint N,
                uint C, uint L, __global const float *mean,
                __global const float *invstd, __global float *sg,
                __global float *sgx)
{
    __local float buf[BN_WG];
    uint c = get_group_id(0), lid = get_local_id(0);
    size_t M = (size_t)N * L, j;
    float mu = mean[c], is = invstd[c], a = 0.0f, bsum = 0.0f, s1, s2;

    for (j = lid; j < M; j += BN_WG) {
        size_t o = ((j / L) * C + c) * L + j % L;

        a += CG_LD(g, o);
        bsum += CG_LD(g, o) * (CG_LD(x, o) - mu) * is;
    }
    s1 = cg_wg_sum(buf, a, BN_WG);
    s2 = cg_wg_sum(buf, bsum, BN_WG);
    if (lid == 0) {
        sg[c] = s1;
        sgx[c] = s2;
    }
}

__kernel void
batch_norm_gx(__global const cg_t *x, __global const cg_t *w,
              __global const cg_t *g, uint C, uint L, int flags, ulong M,
              __global const float *mean, __global const float *invstd,
              __global const float *sg, __global const float *sgx, ulong n,
              __global cg_t *gx)
{
    size_t i = get_global_id(0);
    uint c;
    float s, v;

    if (i >= n)
        return;
    c = (uint)((i / L) % C);
    s = invstd[c] * ((flags & 1) ? CG_LD(w, c) : 1.0f);
    if (flags & 8) {
        float xh = (CG_LD(x, i) - mean[c]) * invstd[c];

        v = s * (CG_LD(g, i) - sg[c] / (float)M - xh * sgx[c] / (float)M);
    } else {
        v = s * CG_LD(g, i);
    }
    CG_ST(gx, i, v);
}
