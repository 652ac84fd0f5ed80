/* SPDX-License-Identifier: MIT */
/*
 * kernels/layer_norm.cl - layer normalisation over the last N elements of
 * each row (PyTorch semantics: biased variance), with an optional affine
 * weight w and bias b of N elements each.
 *
 *   layer_norm_f:  mean[r] = sum_j x[r, j] / N,
 *                  rstd[r] = 1 / sqrt(sum_j (x - mean)^2 / N + eps),
 *                  y[r, j] = (x - mean) * rstd * w[j] + b[j]
 *   layer_norm_b:  with xh = (x - mean) * rstd and gh = g * w:
 *                  gx = rstd * (gh - mean_j(gh) - xh * mean_j(gh * xh))
 *   layer_norm_wb: gw[j] = sum_r g[r, j] * xh[r, j],  gb[j] = sum_r g[r, j]
 *
 * `flags` bit 0: w is present (gw wanted), bit 1: b is present (gb
 * wanted); absent buffers are placeholders that are never touched.
 * x, g, y and gx are contiguous [rows, N].
 *
 * Index space: layer_norm_f and layer_norm_b run one work-group of LWG
 * work-items per row (global size rows * LWG): each work-item sums the
 * elements lid, lid + LWG, ... in order and a fixed-shape tree in local
 * memory combines the partial sums, so results are bit-identical from run
 * to run.  layer_norm_wb runs one work-item per column j (N, padded), which
 * adds its column's rows in increasing r - again a fixed order, no atomics.
 *
 * Storage variants (common.cl's cg_t): x, w, b, y, g, gx, gw and gb are
 * float32, float16 or bfloat16 in memory (one dtype); mean and rstd, and
 * all arithmetic, are float32.
 *
 * Tunable: LWG, the work-group size of the row kernels (a power of two;
 * the host launches with the value in force).  The @tunable line is its
 * one default (build-aux/cltable.sh puts it in the kernel table; the
 * library always passes -DLWG) and the candidates clgrad-tune tries.
 *
 * @tunable LWG 64: 16 32 64 128 256
 *
 * Each kernel is a program of its own (common.cl's CG_WANT):
 * @split
 */

/* Two passes over the row (mean, then squared deviations): as accurate as
 * float32 allows, unlike E[x^2] - E[x]^2. */
#if CG_WANT(layer_norm_f)
__kernel __attribute__((reqd_work_group_size(LWG, 1, 1))) void
layer_norm_f(__global const cg_t *x, __global const cg_t *w,
             __global const cg_t *b, int flags, uint N, float eps,
             __global cg_t *y, __global float *mean, __global float *rstd)
{
    __local float buf[LWG];
    uint r = get_group_id(0), lid = get_local_id(0), j;
    size_t base = (size_t)r * N;
    float acc = 0.0f, mu, rs;

    for (j = lid; j < N; j += LWG)
        acc += CG_LD(x, base + j);
    mu = cg_wg_sum(buf, acc, LWG) / (float)N;
    acc = 0.0f;
    for (j = lid; j < N; j += LWG) {
        float d = CG_LD(x, base + j) - mu;

        acc += d * d;
    }
    rs = 1.0f / sqrt(cg_wg_sum(buf, acc, LWG) / (float)N + eps);
    for (j = lid; j < N; j += LWG) {
        float v = (CG_LD(x, base + j) - mu) * rs;

        if (flags & 1)
            v *= CG_LD(w, j);
        if (flags & 2)
            v += CG_LD(b, j);
        CG_ST(y, base + j, v);
    }
    if (lid == 0) {
        mean[r] = mu;
        rstd[r] = rs;
    }
}
#endif

#if CG_WANT(layer_norm_b)
__kernel __attribute__((reqd_work_group_size(LWG, 1, 1))) void
layer_norm_b(__global const cg_t *x, __global const cg_t *w, int flags,
             uint N, __global const float *mean, __global const float *rstd,
             __global const cg_t *g, __global cg_t *gx)
{
    __local float buf[LWG];
    uint r = get_group_id(0), lid = get_local_id(0), j;
    size_t base = (size_t)r * N;
    float mu = mean[r], rs = rstd[r], s1 = 0.0f, s2 = 0.0f, m1, m2;

    for (j = lid; j < N; j += LWG) {
        float gh = (flags & 1) ? CG_LD(g, base + j) * CG_LD(w, j)
                               : CG_LD(g, base + j);

        s1 += gh;
        s2 += gh * (CG_LD(x, base + j) - mu) * rs;
    }
    m1 = cg_wg_sum(buf, s1, LWG) / (float)N;
    m2 = cg_wg_sum(buf, s2, LWG) / (float)N;
    for (j = lid; j < N; j += LWG) {
        float gh = (flags & 1) ? CG_LD(g, base + j) * CG_LD(w, j)
                               : CG_LD(g, base + j);
        float xh = (CG_LD(x, base + j) - mu) * rs;

        CG_ST(gx, base + j, rs * (gh - m1 - xh * m2));
    }
}
#endif

#if CG_WANT(layer_norm_wb)
__kernel void
layer_norm_wb(__global const cg_t *x, __global const cg_t *g,
              __global const float *mean, __global const float *rstd,
              uint rows, uint N, int flags, __global cg_t *gw,
              __global cg_t *gb)
{
    uint j = get_global_id(0), r;
    float sw = 0.0f, sb = 0.0f;

    if (j >= N)
        return;
    for (r = 0; r < rows; r++) {
        size_t o = (size_t)r * N + j;

        sw += CG_LD(g, o) * (CG_LD(x, o) - mean[r]) * rstd[r];
        sb += CG_LD(g, o);
    }
    if (flags & 1)
        CG_ST(gw, j, sw);
    if (flags & 2)
        CG_ST(gb, j, sb);
}
#endif
