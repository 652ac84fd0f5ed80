/* SPDX-License-Identifier: MIT */
/*
 * kernels/gemm_pack.cl - clgrad's cache-blocked SGEMM for large and
 * long-K products: C = alpha op(A) op(B) + beta C (+ bias) over operands
 * packed first into micro-panels, the loop structure of GotoBLAS and
 * BLIS, in three launches (lib/ops/gemm.c's packed backend):
 *
 *   gemm_pack_a  op(A) (M x K, a[m * sam + k * sak], any strides: NN and
 *            TN read in place) into ceil(M / PMR) micro-panels of PMR
 *            rows, each K x PMR floats with row r of step k at k * PMR +
 *            r; rows past M are zeros.  A work-item moves 16 steps of K
 *            of one micro-panel (pack_panel: float4 copies or 4 x 4
 *            transposes where the operand is contiguous along one side).
 *   gemm_pack_b  op(B) (K x N, b[k * sbk + n * sbn]: NN and NT) into
 *            ceil(N / NR) micro-panels of NR = PTN * PVW columns, each K x
 *            NR floats; columns past N are zeros.  Likewise 16 steps of K
 *            per work-item.
 *   gemm_packed  the product over the packed panels.  A work-item owns
 *            PMB micro-tiles (PMR x NR each) stacked down one column of
 *            micro-tiles of C, and walks K in blocks of PKC steps: per
 *            block, each of its micro-tiles runs PMR x PTN floatPVW
 *            accumulators over the block (per step: PTN vector loads of
 *            the B micro-panel, PMR broadcasts from the A micro-panel)
 *            and adds the result into C.  The B micro-panel's block (PKC
 *            x NR floats, 16 KiB by default) stays in L1 while the PMB
 *            A micro-panels stream past it from L2, and the items of a
 *            work-group (consecutive columns of micro-tiles, the same
 *            rows) share those A micro-panels.  Packed, every operand is
 *            read contiguously: no stride of a row of B per step of K
 *            (each a page apart at N 1024 and up, which is where the
 *            in-place kernels of gemm.cl fell behind), no edges inside
 *            the loop.
 *   gemm_packed_ra  the same product with op(A) read in place (element
 *            (m, k) at a[m * sam + k * sak], any strides; A and C of one
 *            storage type) over a packed B, for the products on a B
 *            packed once (a recurrent step's h W_hh^T, the convolution's
 *            weights): a micro-tile's PMR rows are PMR strided streams
 *            (the padding rows past M read row M - 1, never stored), no
 *            pack launch, pass or buffer for A.  One body, packed_body,
 *            makes both kernels.
 *   gemm_shift  a convolution at stride 1 as such a product whose op(A)
 *            rows are output pixels read from zero-padded images, the
 *            taps' columns at shifts of one another (lib/ops/conv.c's
 *            forward_shift; described at the kernel).
 *   gemm_shift_dw  its weight gradient: gemm_packed_ra whose op(A) rows
 *            are the taps' rows of the padded images (row_at).
 *
 * The first block of K stores alpha acc + beta C (C not read when beta is
 * 0) + bias; later blocks add alpha acc to C; the last applies the
 * activation act (as gemm.cl's) to the finished sums.  Only C's elements
 * in range are stored, its right edge lane by lane.  A 16-bit C (the
 * float16 and bfloat16 variants, CG_T 1 and 2) is rounded once: those
 * variants walk all of K as one block (KB), the B micro-panel's K x NR
 * floats read from L2 rather than L1 past PKC (lib/ops/gemm.c gives
 * them 16-bit operands of K up to PKC, and longer ones a float32 C it
 * narrows after).
 *
 * Packed panels are float32 whatever the storage type cg_t of A, B, C and
 * the bias (kernels/common.cl): the pack kernels convert once.
 *
 * Index space: gemm_pack_a / _b: dimension 0 item i, micro-panel i / nkb,
 * steps (i % nkb) * 16 .. + 15 (nkb = ceil(K / 16)), so that consecutive
 * items read along K; where the operand's rows (columns of B) are the
 * contiguous side (TN's A, NN's B), micro-panel i % np and steps from
 * (i / np) * 16 (np micro-panels), so that they read along a row.
 * Dimension 1 the batch entry (packed matrices follow each other).
 * gemm_packed: dimension 0 item i, column of micro-tiles i % njr (njr =
 * ceil(N / NR)), rows from micro-panel (i / njr) * PMB; dimension 1 the
 * batch entry, the packed operands at pa + z * spa, pb + z * spb (0: one
 * for all).
 * All padded by the host to a multiple of PWG.
 *
 * Tunables (the kernel table's defaults; a context's parameters replace
 * them, clgrad-tune's gemm stage does not tune them yet, it chooses per
 * class between this backend and gemm.cl's).  The defaults, a 6 x 16
 * micro-tile (six float16 vector accumulators), from tests/bench_gemm on the 2-core
 * AVX-512 PoCL 3.1 machine under load, GFLOP/s per CPU second at 2048^3:
 * 91-93 (PVW 8 PTN 2: 75; PMR 8: 84-96; PMR 4 PTN 2: 84; PKC 128: 50-88,
 * 512: 88-90; PMB 4: 84, 16: 92-95), beside 91-96 on the char-LSTM's
 * products and OpenBLAS's 98 (196 GFLOP/s on both cores, quiet):
 * @tunable PVW 16: 4 8 16
 * @tunable PMR 6: 2 4 6 8
 * @tunable PTN 1: 1 2 3 4
 * @tunable PMB 8: 1 2 4 8 16
 * @tunable PKC 256: 128 256 512 1024
 * @tunable PWG 8: 4 8 16 32
 *
 * As in gemm.cl, a micro-tile's accumulators are named variables written
 * out by repetition macros: PoCL 3.1 keeps private arrays in memory.
 * @split
 */

#define CG_CAT_(a, b) a##b
#define CG_CAT(a, b) CG_CAT_(a, b)
#define INLINE static inline __attribute__((always_inline))
/* A kernel's vector types compile at their full width: clang gives an x86
 * CPU with AVX-512 (PoCL) a preferred vector width of 256 bits, and its
 * back end splits a wider vector in two unless the function asks for
 * more (min_vector_width; a built-in with a float16 argument asks for it,
 * which these kernels never call), so a micro-tile's floatPVWs ran as
 * pairs of 8-lane halves at most half the FMA rate (PoCL 3.1 on the
 * 2-core AVX-512 Xeon, disassembled: ymm, now zmm; 3x3 convolution N8
 * C64 28x28 K64, gemm_shift 3.7-4.6 ms -> 2.7-3.4 in 6 paired runs).
 * Nothing for a device without such vectors or a compiler without the
 * attribute. */
#if defined(__has_attribute)
#if __has_attribute(min_vector_width)
#define WIDE __attribute__((min_vector_width(512)))
#endif
#endif
#ifndef WIDE
#define WIDE
#endif
#define PWG_SIZE __attribute__((reqd_work_group_size(PWG, 1, 1)))
#define KERNEL __kernel PWG_SIZE WIDE void

/* Steps of K a pack work-item moves. */
#define PK 16

/* The packed micro-panel widths. */
#define NR (PTN * PVW)

/* ------------------------------------------------------------- packing */

/* Four rows of an operand at x, sr apart, 4 contiguous steps of K each,
 * into a panel transposed: step u's four values at q + u * ld. */
INLINE void
pack_t4(const __global cg_t *x, int sr, __global float *q, int ld)
{
    float4 r0 = CG_VLOAD(4, 0, x), r1 = CG_VLOAD(4, 0, x + sr);
    float4 r2 = CG_VLOAD(4, 0, x + 2 * sr), r3 = CG_VLOAD(4, 0, x + 3 * sr);

    vstore4((float4)(r0.s0, r1.s0, r2.s0, r3.s0), 0, q);
    vstore4((float4)(r0.s1, r1.s1, r2.s1, r3.s1), 0, q + ld);
    vstore4((float4)(r0.s2, r1.s2, r2.s2, r3.s2), 0, q + 2 * ld);
    vstore4((float4)(r0.s3, r1.s3, r2.s3, r3.s3), 0, q + 3 * ld);
}

/* One item's part of a panel w floats wide: PK steps of K from k0 of the
 * operand's rows x0 .. x0 + w - 1 (x[row * sr + k * sk]) into q[k * w +
 * row], rows past `rows` zeros.  A whole block (all w rows, PK steps) of
 * an operand contiguous along the rows (sr 1) moves a step at a time as
 * float4s, one contiguous along K (sk 1) as 4 x 4 transposes; the edges
 * element by element.  Element by element throughout, the items' loads
 * and stores were scalar and the packs took a third of the MLP's 128-row
 * products (tests/bench_gemm on the 2-core AVX2 PoCL 3.1 machine,
 * profiled, 128x784x512 NN: gemm_pack_b 0.36-0.41 ms -> 0.10-0.22,
 * gemm_pack_a 0.09-0.10 -> 0.03-0.06, beside gemm_packed's 0.9-1.3). */
INLINE void
pack_panel(const __global cg_t *x, int x0, int rows, int k0, int K, int sr,
           int sk, __global float *q, int w)
{
    int k, j;

    if (x0 + w <= rows && k0 + PK <= K && (sr == 1 || sk == 1)) {
        x += x0 * sr + k0 * sk;
        q += k0 * w;
        if (sr == 1) {
            for (k = 0; k < PK; k++) {
                for (j = 0; j + 4 <= w; j += 4)
                    vstore4(CG_VLOAD(4, 0, x + k * sk + j), 0, q + k * w + j);
                for (; j < w; j++)
                    q[k * w + j] = CG_LD(x, k * sk + j);
            }
            return;
        }
        for (j = 0; j + 4 <= w; j += 4)
            for (k = 0; k < PK; k += 4)
                pack_t4(x + j * sr + k, sr, q + k * w + j, w);
        for (; j < w; j++)
            for (k = 0; k < PK; k += 4) {
                float4 v = CG_VLOAD(4, 0, x + j * sr + k);

                q[k * w + j] = v.s0;
                q[(k + 1) * w + j] = v.s1;
                q[(k + 2) * w + j] = v.s2;
                q[(k + 3) * w + j] = v.s3;
            }
        return;
    }
    for (k = k0; k < min(k0 + PK, K); k++)
        for (j = 0; j < w; j++)
            q[k * w + j] = x0 + j < rows ? CG_LD(x, (x0 + j) * sr + k * sk)
                                         : 0.0f;
}

#if CG_WANT(gemm_pack_a)
KERNEL
gemm_pack_a(int M, int K, const __global cg_t *a, int ao, int sam, int sak,
            int sab, __global float *pa)
{
    int nkb = (K + PK - 1) / PK, np = (M + PMR - 1) / PMR;
    int i = get_global_id(0), z = get_global_id(1);
    int p = sam == 1 ? i % np : i / nkb;
    int k0 = (sam == 1 ? i / np : i % nkb) * PK;

    if (p >= np || k0 >= K)
        return;
    pack_panel(a + ao + z * sab, p * PMR, M, k0, K, sam, sak,
               pa + ((size_t)z * np + p) * K * PMR, PMR);
}
#endif

#if CG_WANT(gemm_pack_b)
KERNEL
gemm_pack_b(int N, int K, const __global cg_t *b, int bo, int sbn, int sbk,
            int sbb, __global float *pb)
{
    int nkb = (K + PK - 1) / PK, np = (N + NR - 1) / NR;
    int i = get_global_id(0), z = get_global_id(1);
    int q = sbn == 1 ? i % np : i / nkb;
    int k0 = (sbn == 1 ? i / np : i % nkb) * PK;

    if (q >= np || k0 >= K)
        return;
    pack_panel(b + bo + z * sbb, q * NR, N, k0, K, sbn, sbk,
               pb + ((size_t)z * np + q) * K * NR, NR);
}
#endif

/* -------------------------------------------------------- gemm_packed */

#if CG_WANT(gemm_packed) || CG_WANT(gemm_packed_ra) || \
    CG_WANT(gemm_shift) || CG_WANT(gemm_shift_dw)
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

#if PMR == 1
#define ROWS R0
#elif PMR == 2
#define ROWS R1
#elif PMR == 3
#define ROWS R2
#elif PMR == 4
#define ROWS R3
#elif PMR == 5
#define ROWS R4
#elif PMR == 6
#define ROWS R5
#elif PMR == 7
#define ROWS R6
#elif PMR == 8
#define ROWS R7
#else
#error "PMR must be 1 to 8"
#endif
#if PTN == 1
#define COLS C0
#elif PTN == 2
#define COLS C1
#elif PTN == 3
#define COLS C2
#elif PTN == 4
#define COLS C3
#else
#error "PTN must be 1 to 4"
#endif

typedef CG_CAT(float, PVW) floatv;
/* A floatPVW moves as PVW / 4 float4 pieces, not one vloadPVW or
 * vstorePVW call: on a CPU without AVX-512 (PoCL under valgrind, say) a
 * float16 argument or return value of a built-in changes the ABI and the
 * compiler warns; inlined, the pieces are the same vector moves. */
#if PVW == 4
#define PIECES(F, a, b) F(0, a, b)
#elif PVW == 8
#define PIECES(F, a, b) F(0, a, b), F(1, a, b)
#elif PVW == 16
#define PIECES(F, a, b) F(0, a, b), F(1, a, b), F(2, a, b), F(3, a, b)
#else
#error "PVW must be 4, 8 or 16"
#endif
#define PIECE_0(v) (v).s0123
#define PIECE_1(v) (v).s4567
#define PIECE_2(v) (v).s89ab
#define PIECE_3(v) (v).scdef
#define LDC4(q, p, _) CG_VLOAD(4, q, p)
#define ST4(q, v, p) vstore4(PIECE_##q(v), q, p)
#define STC4(q, v, p) CG_VSTORE(4, PIECE_##q(v), q, p)
/* The packed B micro-panel's vectors are whole floatPVWs: its buffer
 * starts aligned to CL_DEVICE_MEM_BASE_ADDR_ALIGN (at least a long16)
 * and every offset into it is a multiple of PVW floats. */
#define LDV(p) (*(const __global floatv *)(p))
#define LDC(p) ((floatv)(PIECES(LDC4, p, _)))
#define STV(v, p) (PIECES(ST4, v, p))
#define STC(v, p) (PIECES(STC4, v, p))

/* C's n (<= PVW) values at p = act(alpha *acc + beta p (p not read when
 * beta is 0) + the bias's n values at q (NULL: none)), act common.cl's
 * CG_ACT number (0: none). */
INLINE void
store_c(const floatv *acc, __global cg_t *p, int n, float alpha, float beta,
        const __global cg_t *q, int act)
{
    floatv v = alpha * *acc;
    float t[PVW];
    int l;

    if (n >= PVW) {
        if (beta != 0.0f)
            v += beta * LDC(p);
        if (q)
            v += LDC(q);
        CG_CAT(CG_ACT_V, PVW)(v, act);
        STC(v, p);
        return;
    }
    STV(v, t);
    for (l = 0; l < n; l++) {
        float s = beta != 0.0f ? t[l] + beta * CG_LD(p, l) : t[l];

        if (q)
            s += CG_LD(q, l);
        CG_ACT(s, act);
        CG_ST(p, l, s);
    }
}

#define P_ACC(r, j) floatv acc##r##_##j = (floatv)(0.0f);
#define P_ROW(r, _) COLS(P_ACC, r)
#define P_LD(_, j) floatv bv##j = LDV(bk + j * PVW);
#define P_FMA1(r, j) acc##r##_##j += av * bv##j;
#define P_FMA(r, _)                                                       \
    {                                                                     \
        floatv av = (floatv)(raw ? CG_LD(ar##r, 0) : ak[r]);              \
        COLS(P_FMA1, r)                                                   \
    }
/* Row r of a micro-tile of op(A) read in place: its step pc, the last row
 * standing in for the padding rows past M (read, never stored). */
#define P_AROW(r, _)                                                      \
    const __global cg_t *ar##r =                                          \
        a + row_at(min(m0 + r, M - 1), sam, taps, ts, trs, tss) + pc * sak;
#define P_ASTEP(r, _) ar##r += sak;
#define P_ST(r, j)                                                        \
    if (m0 + r < M && n0 + j * PVW < N)                                   \
        store_c(&acc##r##_##j, c + (m0 + r) * ldc + n0 + j * PVW,          \
                min(PVW, N - n0 - j * PVW), alpha, bk0,                   \
                bias ? bias + n0 + j * PVW : 0, actk);
#define P_STROW(r, _) COLS(P_ST, r)

/* The steps of K per block: all of them for a 16-bit C, rounded once. */
#if CG_T == 0
#define KB PKC
#else
#define KB K
#endif

/* Where row m of an op(A) read in place starts: m sam, or where taps is
 * not 0, tap m of a convolution's taps of ts columns (gemm_shift_dw):
 * channel m / taps at sam, its row and column of taps at trs and tss. */
INLINE int
row_at(int m, int sam, int taps, int ts, int trs, int tss)
{
    int c, t;

    if (!taps)
        return m * sam;
    c = m / taps;
    t = m - c * taps;
    return c * sam + t / ts * trs + t % ts * tss;
}

/* The body of gemm_packed (raw 0: op(A) packed at pa, spa floats per batch
 * entry), of gemm_packed_ra (raw 1: op(A) read in place, element (m, k)
 * of batch entry z at a[m * sam + k * sak + z * sa]) and of
 * gemm_shift_dw (raw 1 and taps not 0: row m at row_at's).  raw is a
 * constant where each kernel inlines this, so that each compiles only its
 * own loads. */
INLINE void
packed_body(int M, int N, int K, float alpha, const __global float *pa,
            int spa, const __global cg_t *a, int sam, int sak, int sa,
            int taps, int ts, int trs, int tss,
            const __global float *pb, int spb, float beta,
            __global cg_t *c, int co, int ldc, int scb,
            const __global cg_t *bias, int biaso, int act, const int raw)
{
    int njr = (N + NR - 1) / NR, npa = (M + PMR - 1) / PMR;
    int i = get_global_id(0), z = get_global_id(1);
    int jr = i % njr, p0 = (i / njr) * PMB, n0 = jr * NR;
    int pc, t, k;

    if (p0 >= npa)
        return;
    if (raw)
        a += z * sa;
    else
        pa += (size_t)z * spa + (size_t)p0 * K * PMR;
    pb += (size_t)z * spb + (size_t)jr * K * NR;
    c += co + z * scb;
    if (bias)
        bias += biaso;
    for (pc = 0; pc < K; pc += KB) {
        int kc = min(KB, K - pc);
        float bk0 = pc ? 1.0f : beta;
        int actk = pc + kc < K ? 0 : act;   /* on the finished sums */

        for (t = 0; t < PMB && p0 + t < npa; t++) {
            const __global float *ak = pa + ((size_t)t * K + pc) * PMR;
            const __global float *bk = pb + (size_t)pc * NR;
            int m0 = (p0 + t) * PMR;

            ROWS(P_AROW, _)
            ROWS(P_ROW, _)
            for (k = 0; k < kc; k++) {
                COLS(P_LD, _)
                ROWS(P_FMA, _)
                if (raw) {
                    ROWS(P_ASTEP, _)
                } else {
                    ak += PMR;
                }
                bk += NR;
            }
            ROWS(P_STROW, _)
        }
        bias = 0;
    }
}

#endif

#if CG_WANT(gemm_packed)
KERNEL
gemm_packed(int M, int N, int K, float alpha,
            const __global float *pa, int spa,
            const __global float *pb, int spb,
            float beta, __global cg_t *c, int co, int ldc, int scb,
            const __global cg_t *bias, int biaso, int act)
{
    packed_body(M, N, K, alpha, pa, spa, (const __global cg_t *)pa, 0, 0,
                0, 0, 0, 0, 0, pb, spb, beta, c, co, ldc, scb, bias, biaso,
                act, 0);
}
#endif

#if CG_WANT(gemm_packed_ra)
KERNEL
gemm_packed_ra(int M, int N, int K, float alpha,
               const __global cg_t *a, int ao, int sam, int sak, int sa,
               const __global float *pb, int spb,
               float beta, __global cg_t *c, int co, int ldc, int scb,
               const __global cg_t *bias, int biaso, int act)
{
    packed_body(M, N, K, alpha, (const __global float *)pb, 0, a + ao, sam,
                sak, sa, 0, 0, 0, 0, pb, spb, beta, c, co, ldc, scb, bias,
                biaso, act, 1);
}
#endif

#if CG_WANT(gemm_shift_dw)
/* A convolution's weight gradient at stride 1, transposed: C (taps x N,
 * row-major, ldc) = the taps' rows of zero-padded images (tap m = (c, r,
 * s) of R x ts taps per channel: row at x + xo + c cs + r rs + s ss, K
 * contiguous floats) times B (K x N, the output gradient laid out as the
 * taps' columns, packed by gemm_pack_b).  The images' planes of all the
 * batch follow one another per channel, so that one column index walks
 * the batch (lib/ops/conv.c's dw_shift): no column buffer. */
KERNEL
gemm_shift_dw(int M, int N, int K, const __global cg_t *x, int xo, int cs,
              int taps, int ts, int rs, int ss, const __global float *pb,
              __global cg_t *c, int ldc)
{
    packed_body(M, N, K, 1.0f, (const __global float *)pb, 0, x + xo, cs,
                1, 0, taps, ts, rs, ss, pb, 0, 0.0f, c, 0, ldc, 0, 0, 0, 0,
                1);
}
#endif

/* ---------------------------------------------------------- gemm_shift */

#if CG_WANT(gemm_shift)
/* A tap's step: pixel m0 + r's value (at xs + r) times the B row. */
#define S_FMA(r, _)                                                       \
    {                                                                     \
        floatv av = (floatv)(CG_LD(xs, r));                               \
        COLS(P_FMA1, r)                                                   \
    }
/* Row r of a micro-tile, pixel q = m0 + r of the product (output rows rw
 * apart): stored where its column ow < the output width owid, channel
 * n0 + j PVW + l (< N) at y + channel sy + oh owid + ow. */
#define S_ST1(r, j)                                                       \
    {                                                                     \
        float t[PVW];                                                     \
        int l, ch = n0 + j * PVW;                                         \
                                                                          \
        STV(acc##r##_##j, t);                                             \
        for (l = 0; l < PVW && ch + l < N; l++) {                         \
            float v = t[l];                                               \
                                                                          \
            if (beta != 0.0f)                                             \
                v += beta * CG_LD(yq, (ch + l) * sy);                     \
            if (bias)                                                     \
                v += CG_LD(bias, ch + l);                                 \
            CG_ACT(v, act);                                               \
            CG_ST(yq, (ch + l) * sy, v);                                  \
        }                                                                 \
    }
#define S_ST(r, _)                                                        \
    {                                                                     \
        int q = m0 + r, oh = q / rw, ow = q - oh * rw;                    \
        __global cg_t *yq = y + oh * owid + ow;                           \
                                                                          \
        if (q < M && ow < owid) {                                         \
            COLS(S_ST1, r)                                                \
        }                                                                 \
    }

/* A convolution at stride 1 as a product whose op(A) is read in place
 * from padded images: y's channel n of pixel q = sum over taps (c, r, s)
 * of x[c cs + r rs + s ss + q] times B's (c, r, s, n), B the weights (N
 * channels x C R S) packed by gemm_pack_b as op(B) = w^T (NR channels a
 * micro-panel), plus beta times y's value (not read where beta is 0),
 * plus bias[bo + n] (NULL: none), then the activation act.  Pixel q = oh
 * rw + ow of the product is output (oh, ow), stored (channel n at y + n
 * sy + oh owid + ow) where ow < owid: the columns between output rows
 * are computed and dropped.  Batch entry z: x + xo + z sx, y + yo + z
 * sc.  No column buffer: each micro-tile's PMR rows are PMR consecutive
 * pixels, read where the image lies (in cache: a padded image of 64
 * planes of 30 x 30 is 230 KiB).  The host leaves PMR floats of slack
 * after the last image (the rows past M, read and not stored).  Index
 * space as gemm_packed's over an M x N product. */
KERNEL
gemm_shift(int M, int N, int C, int R, int S, const __global float *pb,
           const __global cg_t *x, int xo, int sx, int cs, int rs, int ss,
           __global cg_t *y, int yo, int sy, int sc, int rw, int owid,
           float beta, const __global cg_t *bias, int bo, int act)
{
    int njr = (N + NR - 1) / NR, npa = (M + PMR - 1) / PMR;
    int i = get_global_id(0), z = get_global_id(1);
    int jr = i % njr, p0 = (i / njr) * PMB, n0 = jr * NR;
    int t, c, r, s;

    if (p0 >= npa)
        return;
    x += xo + z * sx;
    y += yo + z * sc;
    if (bias)
        bias += bo;
    pb += (size_t)jr * C * R * S * NR;
    for (t = 0; t < PMB && p0 + t < npa; t++) {
        int m0 = (p0 + t) * PMR;
        const __global float *bk = pb;

        ROWS(P_ROW, _)
        for (c = 0; c < C; c++)
            for (r = 0; r < R; r++) {
                const __global cg_t *xs = x + c * cs + r * rs + m0;

                for (s = 0; s < S; s++, xs += ss, bk += NR) {
                    COLS(P_LD, _)
                    ROWS(S_FMA, _)
                }
            }
        ROWS(S_ST, _)
    }
}
#endif
