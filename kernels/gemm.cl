/* SPDX-License-Identifier: MIT */
/*
 * kernels/gemm.cl - clgrad's own GEMM: C = alpha op(A) op(B) + beta C
 * (+ bias) for a batch of row-major matrices, each operand read in place
 * through its offset, strides and batch stride (0: the same matrix for
 * every batch entry).  op(A) is M x K, op(B) K x N, C M x N with leading
 * dimension ldc.  beta == 0 does not read C (so NaN there is ignored, as
 * in BLAS).  bias, when not NULL, is a vector of N floats (from element
 * biaso) added to every row of C in the epilogue, after alpha and beta:
 * the linear layer's x W^T + b in one launch.  act (common.cl's CG_ACT
 * number, 0 none: relu, tanh, sigmoid) is applied to C's values last, the
 * linear layer's activation fused.  Runtime arguments rather than
 * variants: they are tested only in the epilogue, and the kernel table
 * keeps one kernel per product.
 *
 * Two kernels, the host picking by the transposes (lib/ops/gemm.c):
 *
 *   gemm     op(A)[m, k] = a[m * sam + k * sak] for any strides (NN, TN,
 *            TT).  A work-item computes a TM x (TN * VW) tile of C with
 *            TM * TN floatVW accumulators: per k it loads TN vectors of
 *            op(B)'s row k and broadcasts TM values of op(A)'s column k.
 *            op(B)[k, n] = b[k * sbk + n * sbn]; with sbn == 1 (B not
 *            transposed) a row is read with vector loads, otherwise
 *            (TT) lane by lane.
 *   gemm_nt  C = op(A) B^T with A and B both row-major along K (NT, the
 *            linear layer's x W^T and the matmul gradients): a work-item
 *            computes DTM x DTN values of C as dot products, each a
 *            floatDVW accumulator over K in steps of DVW (both operands
 *            read with vector loads), summed across lanes at the end.
 *
 *   gemm_tpose  a transposed copy: op(B) into a packed [K, N] array, so
 *            that an NT product of short K (where gemm_nt's per-item
 *            overhead and lane sums weigh) runs as NN through gemm, and
 *            op(A) into [M, K], so that a TN product of long K does; a
 *            work-item moves an 8 x 8 block.  In a 16-bit variant with a
 *            float32 C it widens the 16-bit operand to float32 as it
 *            goes (a widened product's transposed copy, in one pass).
 *
 *   gemm_widen  a float32 copy of a batch of 16-bit matrices, packed,
 *            for the products that run faster converting each element
 *            once than in every tile that reads it (lib/ops/gemm.c's
 *            widen rule); a work-item converts 8 elements of a row.
 *
 * Storage: A and B are of common.cl's cg_t (-DCG_T: float32, float16 or
 * bfloat16, the two of the same dtype), C and the bias of cg_to below
 * (-DCG_TO, the same codes; by default CG_TO = CG_T), so that 16-bit
 * operands may give a float32 C (mixed precision's float32 output).
 * Products are summed in float32 in every variant and C is rounded once
 * to its storage (never through a 16-bit accumulator, as CLBlast's HGEMM
 * does).  The float32 variant is the float32 SGEMM it always was.
 *
 * Edges: rows past M (and, in gemm_nt, columns past N) re-read the last
 * valid row and the result is dropped; columns past N in gemm are read
 * lane by lane, clamped, only by the items that reach the edge, and never
 * stored.  K may be anything from 1 up (gemm_nt ends with the K % DVW
 * remainder in scalars).  Offsets, strides and extents are ints: the host
 * checks that every index fits.
 *
 * Index space: dimension 0 the tiles of one matrix, item i taking column
 * block i % ncb and row block i / ncb (ncb = column blocks), padded by the
 * host to a multiple of WG; dimension 1 the batch entry.
 *
 * Tunables (the kernel table's defaults, which a tuning entry replaces;
 * clgrad-tune tries the candidates):
 * @tunable VW 8: 4 8 16
 * @tunable TM 6: 1 2 4 6 8
 * @tunable TN 2: 1 2 3 4
 * @tunable DVW 8: 4 8 16
 * @tunable DTM 2: 1 2 3 4
 * @tunable DTN 4: 1 2 3 4
 * @tunable WG 8: 4 8 16 32 64
 *
 * A tile's accumulators are named variables (acc<r>_<j>), written out by
 * the repetition macros below rather than kept in arrays: PoCL 3.1 kept
 * private arrays in memory, per work-item, even under #pragma unroll,
 * which ran at a tenth of the speed.
 *
 * Each kernel is a program of its own (common.cl's CG_WANT), so a first
 * run compiles only the one it uses:
 * @split
 */

/* float16 vectors through vload_halfN / vstore_halfN_rte: this file's
 * register tiles ran faster so on PoCL (common.cl's CG_F16_HWV). */
#undef CG_F16_HWV
#define CG_F16_HWV 1

#define CG_CAT_(a, b) a##b
#define CG_CAT(a, b) CG_CAT_(a, b)

/* The output's storage (C, the bias): common.cl's cg_t, CG_LD, CG_ST,
 * CG_VLOAD, CG_VSTORE for dtype code CG_TO instead of CG_T. */
#ifndef CG_TO
#define CG_TO CG_T
#endif
#if CG_TO == 0
typedef float cg_to;
#define CG_LDO(p, i) ((p)[i])
#define CG_STO(p, i, v) ((p)[i] = (v))
#define CG_VLOADO(N, i, p) vload##N(i, p)
#define CG_VSTOREO(N, v, i, p) vstore##N(v, i, p)
#elif CG_TO == 1
typedef half cg_to;
#define CG_LDO(p, i) CG_F16_LD(p, i)
#define CG_STO(p, i, v) CG_F16_ST(p, i, v)
#define CG_VLOADO(N, i, p) CG_F16_VLOAD(N, i, p)
#define CG_VSTOREO(N, v, i, p) CG_F16_VSTORE(N, v, i, p)
#elif CG_TO == 2
typedef ushort cg_to;
#define CG_LDO(p, i) as_float((uint)(p)[i] << 16)
#define CG_STO(p, i, v) ((p)[i] = CG_BF16_BITS(, (float)(v)))
#define CG_VLOADO(N, i, p) as_float##N(convert_uint##N(vload##N(i, p)) << 16)
#define CG_VSTOREO(N, v, i, p) vstore##N(CG_BF16_BITS(N, v), i, p)
#else
#error "CG_TO must be 0 (float32), 1 (float16) or 2 (bfloat16)"
#endif
/* The same with the width a macro (VW, DVW): expanded before pasting. */
#define VLOAD(N, i, p) CG_VLOAD(N, i, p)
#define VLOADO(N, i, p) CG_VLOADO(N, i, p)
#define VSTOREO(N, v, i, p) CG_VSTOREO(N, v, i, p)

/* Helpers are forced inline so that a tile's accumulators stay in
 * registers. */
#define INLINE static inline __attribute__((always_inline))
#define KERNEL __kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void

/* Repetition: R<n>(F, x) is F(0, x) ... F(n, x), C<n>(F, x) is F(x, 0)
 * ... F(x, n); two families, so that one can run inside the other. */
#define R0(F, x) F(0, x)
#define R1(F, x) R0(F, x) F(1, x)
#define R2(F, x) R1(F, x) F(2, x)
#define R3(F, x) R2(F, x) F(3, x)
#define R4(F, x) R3(F, x) F(4, x)
#define R5(F, x) R4(F, x) F(5, x)
#define R6(F, x) R5(F, x) F(6, x)
#define R7(F, x) R6(F, x) F(7, x)
#define C0(F, x) F(x, 0)
#define C1(F, x) C0(F, x) F(x, 1)
#define C2(F, x) C1(F, x) F(x, 2)
#define C3(F, x) C2(F, x) F(x, 3)

/* ----------------------------------------------------------------- gemm */

#if CG_WANT(gemm)
/* VW values as a floatv: LDV of an operand (cg_t), LDVO and STVO of C
 * (cg_to), LDVF and STVF of a private float array. */
#if VW == 1
typedef float floatv;
#define LDV(p) CG_LD(p, 0)
#define LDVO(p) CG_LDO(p, 0)
#define STVO(v, p) CG_STO(p, 0, v)
#define LDVF(p) (*(p))
#define STVF(v, p) (*(p) = (v))
#else
typedef CG_CAT(float, VW) floatv;
#define LDV(p) VLOAD(VW, 0, p)
#define LDVO(p) VLOADO(VW, 0, p)
#define STVO(v, p) VSTOREO(VW, v, 0, p)
#define LDVF(p) CG_CAT(vload, VW)(0, p)
#define STVF(v, p) CG_CAT(vstore, VW)(v, 0, p)
#endif

#if TM == 1
#define ROWS R0
#elif TM == 2
#define ROWS R1
#elif TM == 3
#define ROWS R2
#elif TM == 4
#define ROWS R3
#elif TM == 5
#define ROWS R4
#elif TM == 6
#define ROWS R5
#elif TM == 7
#define ROWS R6
#elif TM == 8
#define ROWS R7
#else
#error "TM must be 1 to 8"
#endif
#if TN == 1
#define COLS C0
#elif TN == 2
#define COLS C1
#elif TN == 3
#define COLS C2
#elif TN == 4
#define COLS C3
#else
#error "TN must be 1 to 4"
#endif

/* VW values of op(B)'s row at p (lane l at p[l * sbn]), those at columns
 * n0 + l >= N clamped to column N - 1 (they are never stored). */
INLINE floatv
ldb_lanes(const __global cg_t *p, int sbn, int n0, int N)
{
    float t[VW];
    int l;

    for (l = 0; l < VW; l++)
        t[l] = CG_LD(p, (min(n0 + l, N - 1) - n0) * sbn);
    return LDVF(t);
}

/* C's n (<= VW) values at p = act(alpha *acc + beta p (p not read when
 * beta is 0) + the bias's n values at q (NULL: none)), act common.cl's
 * CG_ACT number (0: none).  The accumulator comes by address: a float16
 * passed by value changes the ABI on a CPU without AVX-512. */
INLINE void
store_c(const floatv *acc, __global cg_to *p, int n, float alpha,
        float beta, const __global cg_to *q, int act)
{
    floatv v = alpha * *acc;
    float t[VW];
    int l;

    if (n >= VW) {
        if (beta != 0.0f)
            v += beta * LDVO(p);
        if (q)
            v += LDVO(q);
        CG_CAT(CG_ACT_V, VW)(v, act);
        STVO(v, p);
        return;
    }
    STVF(v, t);
    for (l = 0; l < n; l++) {
        float s = beta != 0.0f ? t[l] + beta * CG_LDO(p, l) : t[l];

        if (q)
            s += CG_LDO(q, l);
        CG_ACT(s, act);
        CG_STO(p, l, s);
    }
}

/* The tile, one macro per step of it. */
#define G_ACC(r, j) floatv acc##r##_##j = (floatv)(0.0f);
#define G_ROW(r, _) COLS(G_ACC, r) int ar##r = min(m0 + r, M - 1) * sam;
#define G_BV(_, j) floatv bv##j;
#define G_LD(_, j) bv##j = LDV(bk + j * VW);
#define G_LDE(_, j) bv##j = ldb_lanes(bk + j * VW * sbn, sbn, n0 + j * VW, N);
#define G_FMA1(r, j) acc##r##_##j += av * bv##j;
#define G_FMA(r, _)                                                       \
    {                                                                     \
        floatv av = (floatv)(CG_LD(a, ar##r + k * sak));                  \
        COLS(G_FMA1, r)                                                   \
    }
#define G_ST(r, j)                                                        \
    if (m0 + r < M && n0 + j * VW < N)                                    \
        store_c(&acc##r##_##j, c + (m0 + r) * ldc + n0 + j * VW,          \
                min(VW, N - n0 - j * VW), alpha, beta,                    \
                bias ? bias + n0 + j * VW : 0, act);
#define G_STROW(r, _) COLS(G_ST, r)

KERNEL
gemm(int M, int N, int K, float alpha,
     const __global cg_t *a, int ao, int sam, int sak, int sab,
     const __global cg_t *b, int bo, int sbk, int sbn, int sbb,
     float beta, __global cg_to *c, int co, int ldc, int scb,
     const __global cg_to *bias, int biaso, int act)
{
    int ncb = (N + TN * VW - 1) / (TN * VW), nrb = (M + TM - 1) / TM;
    int i = get_global_id(0), z = get_global_id(1);
    int k;

    if (i >= ncb * nrb)
        return;
    int m0 = (i % nrb) * TM, n0 = (i / nrb) * (TN * VW);

    a += ao + z * sab;
    b += bo + z * sbb + n0 * sbn;
    c += co + z * scb;
    if (bias)
        bias += biaso;
    ROWS(G_ROW, _)
    COLS(G_BV, _)
    if (sbn == 1 && n0 + TN * VW <= N) {
        /* The common case: whole vectors of a row-major op(B). */
        for (k = 0; k < K; k++) {
            const __global cg_t *bk = b + k * sbk;

            COLS(G_LD, _)
            ROWS(G_FMA, _)
        }
    } else {
        /* Lane by lane: op(B) transposed, or the right edge. */
        for (k = 0; k < K; k++) {
            const __global cg_t *bk = b + k * sbk;

            COLS(G_LDE, _)
            ROWS(G_FMA, _)
        }
    }
    ROWS(G_STROW, _)
}

#undef LDV
#undef LDVO
#undef STVO
#undef LDVF
#undef STVF
#endif

/* -------------------------------------------------------------- gemm_nt */

#if CG_WANT(gemm_nt)
/* DVW values as a floatd: LDD of an operand (cg_t), STDF into a private
 * float array. */
#if DVW == 1
typedef float floatd;
#define LDD(p) CG_LD(p, 0)
#define STDF(v, p) (*(p) = (v))
#else
typedef CG_CAT(float, DVW) floatd;
#define LDD(p) VLOAD(DVW, 0, p)
#define STDF(v, p) CG_CAT(vstore, DVW)(v, 0, p)
#endif

#if DTM == 1
#define DROWS R0
#elif DTM == 2
#define DROWS R1
#elif DTM == 3
#define DROWS R2
#elif DTM == 4
#define DROWS R3
#else
#error "DTM must be 1 to 4"
#endif
#if DTN == 1
#define DCOLS C0
#elif DTN == 2
#define DCOLS C1
#elif DTN == 3
#define DCOLS C2
#elif DTN == 4
#define DCOLS C3
#else
#error "DTN must be 1 to 4"
#endif

/* The sum of v's lanes, in a fixed order. */
INLINE float
hsum(floatd v)
{
    float t[DVW], s = 0.0f;
    int l;

    STDF(v, t);
    for (l = 0; l < DVW; l++)
        s += t[l];
    return s;
}

#define D_ACC(r, j) floatd acc##r##_##j = (floatd)(0.0f);
#define D_ROW(r, _)                                                       \
    DCOLS(D_ACC, r) floatd av##r;                                         \
    int ar##r = min(m0 + r, M - 1) * lda;
#define D_COL(_, j) floatd bv##j; int bc##j = min(n0 + j, N - 1) * ldb;
#define D_LDA(r, _) av##r = LDD(a + ar##r + k);
#define D_LDB(_, j) bv##j = LDD(b + bc##j + k);
#define D_FMA1(r, j) acc##r##_##j += av##r * bv##j;
#define D_FMA(r, _) DCOLS(D_FMA1, r)
/* C's value at row m0 + r, column n0 + j: v, the sum s plus the bias or
 * not.  With and without a bias the stores are separate code, chosen once
 * per item: a test of the bias per value cost more (8% of a 128x512x784
 * product on PoCL) than the separate add it replaces.  With an activation
 * (the fused linear layer), a third copy tests both per value. */
#define D_ST_V(r, j, v)                                                   \
    if (m0 + r < M && n0 + j < N) {                                       \
        float s = hsum(acc##r##_##j);                                     \
        __global cg_to *p = c + (m0 + r) * ldc + n0 + j;                  \
                                                                          \
        for (k = kv; k < K; k++)                                          \
            s += CG_LD(a, ar##r + k) * CG_LD(b, bc##j + k);               \
        s *= alpha;                                                       \
        if (beta != 0.0f)                                                 \
            s += beta * CG_LDO(p, 0);                                     \
        CG_STO(p, 0, v);                                                  \
    }
#define D_ST(r, j) D_ST_V(r, j, s)
#define D_STB(r, j) D_ST_V(r, j, s + CG_LDO(bias, n0 + j))
#define D_STA(r, j)                                                       \
    D_ST_V(r, j, act_of(bias ? s + CG_LDO(bias, n0 + j) : s, act))
#define D_STROW(r, _) DCOLS(D_ST, r)
#define D_STROWB(r, _) DCOLS(D_STB, r)
#define D_STROWA(r, _) DCOLS(D_STA, r)

/* v with activation act (a scalar: no vector crosses the call) */
INLINE float
act_of(float v, int act)
{
    CG_ACT(v, act);
    return v;
}

KERNEL
gemm_nt(int M, int N, int K, float alpha,
        const __global cg_t *a, int ao, int lda, int sab,
        const __global cg_t *b, int bo, int ldb, int sbb,
        float beta, __global cg_to *c, int co, int ldc, int scb,
        const __global cg_to *bias, int biaso, int act)
{
    int ncb = (N + DTN - 1) / DTN, nrb = (M + DTM - 1) / DTM;
    int i = get_global_id(0), z = get_global_id(1);
    int k, kv = K - K % DVW;

    if (i >= ncb * nrb)
        return;
    int m0 = (i % nrb) * DTM, n0 = (i / nrb) * DTN;

    a += ao + z * sab;
    b += bo + z * sbb;
    c += co + z * scb;
    if (bias)
        bias += biaso;
    DROWS(D_ROW, _)
    DCOLS(D_COL, _)
    for (k = 0; k < kv; k += DVW) {
        DROWS(D_LDA, _)
        DCOLS(D_LDB, _)
        DROWS(D_FMA, _)
    }
    if (act) {
        DROWS(D_STROWA, _)
    } else if (bias) {
        DROWS(D_STROWB, _)
    } else {
        DROWS(D_STROW, _)
    }
}

#undef LDD
#undef STDF
#endif

/* ----------------------------------------------------------- gemm_tpose */

#if CG_WANT(gemm_tpose)
/* The elements move as they are stored, 16-bit ones as ushort bits; in a
 * 16-bit variant with a float32 C (CG_T 16-bit, CG_TO float32), widened
 * to float32 on the way instead: a 16-bit operand's float32 transposed
 * copy in one pass, where a float32 copy and its transpose took two
 * (lib/ops/gemm.c's widened products). */
#if CG_T == 0
typedef float tp_s;
typedef float tp_t;
typedef float8 tp_t8;
#define TP_LD8(p) vload8(0, p)
#define TP_LD(p, i) ((p)[i])
#elif CG_TO == 0
typedef cg_t tp_s;
typedef float tp_t;
typedef float8 tp_t8;
#define TP_LD8(p) CG_VLOAD(8, 0, p)
#define TP_LD(p, i) CG_LD(p, i)
#else
typedef ushort tp_s;
typedef ushort tp_t;
typedef ushort8 tp_t8;
#define TP_LD8(p) vload8(0, p)
#define TP_LD(p, i) ((p)[i])
#endif

/* dst[c * rows + r] = src[so + r * lds + c] for a rows x cols src.  A
 * work-item moves an 8 x 8 block: eight row pieces read and eight column
 * pieces written as vectors of 8, so that both sides go through the cache
 * a line at a time (one element per item, reading down a column, ran at
 * 3 GB/s).  Item i takes row block i % nrb (nrb = ceil(rows / 8)) of
 * column block i / nrb; blocks at an edge go element by element. */
#define TP_COL(j) (tp_t8)(x0.s##j, x1.s##j, x2.s##j, x3.s##j, x4.s##j, \
                           x5.s##j, x6.s##j, x7.s##j)
KERNEL
gemm_tpose(const __global tp_s *src, int so, int lds, int rows, int cols,
           __global tp_t *dst)
{
    int nrb = (rows + 7) / 8, i = get_global_id(0);
    int r0 = i % nrb * 8, c0 = i / nrb * 8, q, j;
    const __global tp_s *s = src + so + r0 * lds + c0;
    __global tp_t *d = dst + c0 * rows + r0;

    if (c0 >= cols)
        return;
    if (r0 + 8 <= rows && c0 + 8 <= cols) {
        tp_t8 x0 = TP_LD8(s), x1 = TP_LD8(s + lds),
               x2 = TP_LD8(s + 2 * lds), x3 = TP_LD8(s + 3 * lds),
               x4 = TP_LD8(s + 4 * lds), x5 = TP_LD8(s + 5 * lds),
               x6 = TP_LD8(s + 6 * lds), x7 = TP_LD8(s + 7 * lds);

        vstore8(TP_COL(0), 0, d);
        vstore8(TP_COL(1), 0, d + rows);
        vstore8(TP_COL(2), 0, d + 2 * rows);
        vstore8(TP_COL(3), 0, d + 3 * rows);
        vstore8(TP_COL(4), 0, d + 4 * rows);
        vstore8(TP_COL(5), 0, d + 5 * rows);
        vstore8(TP_COL(6), 0, d + 6 * rows);
        vstore8(TP_COL(7), 0, d + 7 * rows);
        return;
    }
    for (j = 0; j < 8 && c0 + j < cols; j++)
        for (q = 0; q < 8 && r0 + q < rows; q++)
            d[j * rows + q] = TP_LD(s, q * lds + j);
}
#undef TP_COL
#undef TP_LD8
#undef TP_LD
#endif

/* ----------------------------------------------------------- gemm_widen */

#if CG_WANT(gemm_widen)
/* dst[(z * rows + r) * cols + c] = src[so + z * sbs + r * lds + c] as a
 * float, for z the batch entry (dimension 1).  Item i takes columns
 * c0 .. c0 + 7 (c0 = i % ncb * 8, ncb = ceil(cols / 8)) of row i / ncb;
 * a piece at the right edge goes element by element. */
KERNEL
gemm_widen(const __global cg_t *src, int so, int lds, int sbs, int rows,
           int cols, __global float *dst)
{
    int ncb = (cols + 7) / 8, i = get_global_id(0), z = get_global_id(1);
    int r = i / ncb, c0 = i % ncb * 8, j;
    const __global cg_t *s;
    __global float *d;

    if (r >= rows)
        return;
    s = src + so + z * sbs + r * lds + c0;
    d = dst + ((size_t)z * rows + r) * cols + c0;
    if (c0 + 8 <= cols) {
        vstore8(CG_VLOAD(8, 0, s), 0, d);
        return;
    }
    for (j = 0; c0 + j < cols; j++)
        d[j] = CG_LD(s, j);
}
#endif
