/* SPDX-License-Identifier: MIT */
/*
 * kernels/gemm_narrow.cl - the epilogue of a product whose C is 16-bit
 * storage but whose backend writes only float32 (CLBlast's SGEMM, the
 * packed kernels of gemm_pack.cl): lib/ops/gemm.c's narrowed_run makes the
 * product, alpha applied, in a float32 scratch matrix P, and gemm_narrow
 * writes
 *     C = act(P + beta C + bias)
 * with C read only when beta is not 0, the bias (a row vector, NULL for
 * none) and act (common.cl's CG_ACT number, 0 for none) in the order of
 * gemm.cl's store_c, so that C is rounded once to its storage, as gemm.cl's
 * kernels round it.  C and the bias are of common.cl's cg_t (-DCG_T: 1
 * float16, 2 bfloat16); P is packed float32, matrix z at z * rows * cols.
 *
 * Index space: dimension 0 item i, columns c0 .. c0 + 7 (c0 = i % ncb * 8,
 * ncb = ceil(cols / 8)) of row i / ncb, padded by the host to a multiple
 * of the work-group size; a piece at the right edge goes element by
 * element.  Dimension 1 the batch entry, C's matrix z at co + z * scb.  No
 * tunable parameters.
 */

__kernel void
gemm_narrow(const __global float *src, int rows, int cols, float beta,
            __global cg_t *c, int co, int ldc, int scb,
            const __global cg_t *bias, int biaso, int act)
{
    int ncb = (cols + 7) / 8, i = get_global_id(0), z = get_global_id(1);
    int r = i / ncb, c0 = i % ncb * 8, j;
    const __global float *s;
    __global cg_t *d;

    if (r >= rows)
        return;
    s = src + ((size_t)z * rows + r) * cols + c0;
    d = c + co + z * scb + r * ldc + c0;
    if (c0 + 8 <= cols) {
        float8 v = vload8(0, s);

        if (beta != 0.0f)
            v += beta * CG_VLOAD(8, 0, d);
        if (bias)
            v += CG_VLOAD(8, 0, bias + biaso + c0);
        CG_ACT_V8(v, act);
        CG_VSTORE(8, v, 0, d);
        return;
    }
    for (j = 0; c0 + j < cols; j++) {
        float v = s[j];

        if (beta != 0.0f)
            v += beta * CG_LD(d, j);
        if (bias)
            v += CG_LD(bias, biaso + c0 + j);
        CG_ACT(v, act);
        CG_ST(d, j, v);
    }
}
