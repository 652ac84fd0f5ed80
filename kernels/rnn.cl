/* SPDX-License-Identifier: MIT */
/*
 * kernels/rnn.cl - fused recurrent steps for RNN (tanh, relu), LSTM and GRU:
 * one launch per time step forward, one per step backward (plus one after
 * the last step), and the helpers that lay out W_hh for them.
 *
 * Forward, step t (lstm_fwd, gru_fwd, rnn_fwd):
 *     a = xproj_t + b_ih + b_hh + h_{t-1} W_hh^T    (G gate blocks of H units)
 * then the cell update.  xproj_t holds W_ih x_t (one GEMM over all steps);
 * the biases are added here rather than written into every row of xproj
 * first, which cost a pass over T*B*G*H floats.  For GRU the n block takes
 * b_in only and b_hn is added inside r * (W_hn h + b_hn), as PyTorch does.
 * A NULL bias reads as zero.  Gate order: LSTM
 * i, f, g, o; GRU r, z, n.  Each step writes h_t to its state slot and to
 * the output sequence, and saves what backward needs: LSTM the activated
 * gates i, f, g, o and c_t; GRU r, z, n and W_hn h + b_hn (4H per row); RNN
 * only h_t (the state slot itself).
 *
 * Backward, step t (lstm_bwd, gru_bwd, rnn_bwd), one launch that
 *   (1) finishes dh_t = dgates_{t+1} W_hh + (direct part from step t+1)
 *       + dy_t for the work-item's own units, and then
 *   (2) runs the cell backward for those units: it stores dgates_t (the
 *       gradients of the pre-activations, for the weight GEMMs and for
 *       step t-1), carries dc, and leaves the direct part of dh_{t-1}
 *       (GRU: z * dh; otherwise 0) in dh.
 * Splitting the recursion at (1) rather than after (2) is what makes one
 * launch per step possible: (1) reads dgates of the previous launch only,
 * (2) touches only the work-item's own elements, so no item waits on
 * another within a launch.  A last launch with (1) only gives dh_0.  GRU
 * stores two gate gradients: dgi (r, z, n_pre; for W_ih and b_ih) and dgh
 * (r, z, r * n_pre; for W_hh, b_hh and dh).
 *
 * Variable lengths: with `len` (int32 [B]) non-NULL, a row b with
 * t >= len[b] keeps its h and c, writes zeros to the output sequence and
 * to the saved gates, and backward passes dh and dc through unchanged with
 * zero gate gradients (and ignores dy_t, as the output there is a
 * constant zero).
 *
 * Index space: one work-item per (block of VW consecutive hidden units,
 * block of RB batch rows); item i takes unit block i % nvec (nvec =
 * ceil(H / VW)) and row block i / nvec.  It keeps G x RB accumulators of
 * floatVW in registers (backward: RB), reads VW weights per vector load
 * and broadcasts one h (or dgates) value to them.  So that a vector load
 * never leaves its row, W_hh is stored padded: forward transposed as
 * [H, G, Hp] (rnn_pack_t), backward as [G*H, Hp] (rnn_pack), Hp =
 * nvec * VW, padding zero.  Rows past B re-read row B - 1 and discard the
 * result; units past H are neither loaded from nor stored to the unpadded
 * arrays.  The host pads the global size to a multiple of WG.
 *
 * Tunable: VW (vector width), RB (rows per item), WG (work-group size).
 * These lines, "@tunable NAME DEFAULT: VALUES", are their one default
 * (build-aux/cltable.sh puts them in the kernel table; lib/nn/rnn_step.c
 * always passes all three as -D) and the candidates clgrad-tune tries
 * (RB is at most 8 and WG at most 256 there):
 * @tunable VW 4: 1 2 4 8 16
 * @tunable RB 2: 1 2 4 8
 * @tunable WG 64: 8 16 32 64 128 256
 *
 * Storage variants (common.cl's CG_T, which lib/nn/rnn_step.c passes for
 * float16 and bfloat16 layers): the weights and biases, the h states, the
 * output sequence, the saved gates, dy and the gate gradients dg / dgi
 * are cg_t, read as floats (the packed W_hh VW at a time, CG_VLOAD) and
 * each stored rounded once; xproj, the GEMM path's product, the c states
 * and the dh / dc carries stay float32, and all arithmetic is float32.
 *
 * HPROJ=1 builds the forward kernels for the GEMM path: the recurrent
 * product comes from a CLBlast GEMM per step (in wt, [B, G*H]) and the
 * kernel only adds it and updates the cell.  Backward then runs with mode
 * bit 1 clear after a GEMM has added dgates_{t+1} W_hh into dh.
 *
 * Each kernel is a program of its own (common.cl's CG_WANT):
 * @split
 */

/* float16 vectors through vload_halfN / vstore_halfN_rte: this file's
 * register tiles ran faster so on PoCL (common.cl's CG_F16_HWV). */
#undef CG_F16_HWV
#define CG_F16_HWV 1

#ifndef HPROJ
#define HPROJ 0
#endif

#define CG_CAT_(a, b) a##b
#define CG_CAT(a, b) CG_CAT_(a, b)
#if VW == 1
typedef float floatv;
#define LDV(p) (*(p))
#define STV(v, p) (*(p) = (v))
#else
typedef CG_CAT(float, VW) floatv;
#define LDV(p) CG_CAT(vload, VW)(0, p)
#define STV(v, p) CG_CAT(vstore, VW)(v, 0, p)
#endif

/* Zero, as a vector: OpenCL C widens scalars in arithmetic, not in calls. */
#define ZV ((floatv)(0.0f))

/* Helpers are forced inline: a tile's accumulators must become registers,
 * which they do not while the tile is a call taking them by pointer. */
#define INLINE static inline __attribute__((always_inline))

#define KERNEL __kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void

/* VW values from p of which the first n (<= VW) exist; the rest read 0. */
INLINE floatv
ldn(const __global float *p, int n)
{
    float t[VW];
    int j;

    if (n >= VW)
        return LDV(p);
    for (j = 0; j < VW; j++)
        t[j] = j < n ? p[j] : 0.0f;
    return LDV(t);
}

/* Stores the first n lanes of v at p. */
INLINE void
stn(floatv v, __global float *p, int n)
{
    float t[VW];
    int j;

    if (n >= VW) {
        STV(v, p);
        return;
    }
    STV(v, t);
    for (j = 0; j < n; j++)
        p[j] = t[j];
}

/* The same over tensor storage (cg_t: common.cl's storage variants, -DCG_T):
 * ldt reads VW elements as floats (the first n; the rest read 0), stt
 * rounds the first n lanes once to the storage dtype.  For float32 they are
 * ldn and stn themselves. */
#if CG_T == 0
#define LDVT LDV
#define ldt ldn
#define stt stn
#else
#if VW == 1
#define LDVT(p) CG_LD(p, 0)
#define STVT(v, p) CG_ST(p, 0, v)
#else
/* One more expansion, so that VW is its number when pasted. */
#define CG_VLOAD_(N, i, p) CG_VLOAD(N, i, p)
#define CG_VSTORE_(N, v, i, p) CG_VSTORE(N, v, i, p)
#define LDVT(p) CG_VLOAD_(VW, 0, p)
#define STVT(v, p) CG_VSTORE_(VW, v, 0, p)
#endif

INLINE floatv
ldt(const __global cg_t *p, int n)
{
    float t[VW];
    int j;

    if (n >= VW)
        return LDVT(p);
    for (j = 0; j < VW; j++)
        t[j] = j < n ? CG_LD(p, j) : 0.0f;
    return LDV(t);
}

INLINE void
stt(floatv v, __global cg_t *p, int n)
{
    float t[VW];
    int j;

    if (n >= VW) {
        STVT(v, p);
        return;
    }
    STV(v, t);
    for (j = 0; j < n; j++)
        CG_ST(p, j, t[j]);
}
#endif

/* The recurrent weights as the forward kernels read them: the packed W_hh
 * in storage, or (HPROJ) the float32 product a GEMM formed. */
#if HPROJ
typedef float wt_t;
#else
typedef cg_t wt_t;
#endif

INLINE floatv
sigm(floatv x)
{
    return 1.0f / (1.0f + exp(-x));
}

/* The n units at j of b_ih (and of b_hh unless hh is 0): the bias of one
 * gate block; NULL vectors read as zero. */
INLINE floatv
bias(const __global cg_t *bi, int bio, const __global cg_t *bh, int bho,
     int j, int n, int hh)
{
    floatv v = bi != 0 ? ldt(bi + bio + j, n) : ZV;

    return hh && bh != 0 ? v + ldt(bh + bho + j, n) : v;
}

#if HPROJ
/* The GEMM variant (-DHPROJ=1): a GEMM has already formed the recurrent
 * product h_{t-1} W_hh^T as a dense [B, G*H] array, passed as wt; the tile
 * is loaded from it. */
INLINE void
tile_fwd(floatv *acc, const int G, const __global wt_t *wt, int hpad,
         const __global cg_t *h, int H, int u0, int b0, int B)
{
    int g, r, n = min(VW, H - u0);

    for (g = 0; g < G; g++)
        for (r = 0; r < RB; r++)
            acc[g * RB + r] = ldn(wt + (min(b0 + r, B - 1) * G + g) * H + u0,
                                  n);
}
#else
/* Forward tile: acc[g * RB + r] = sum_k h[b0 + r, k] W_hh[g*H + u0.., k]
 * from the transposed, padded wt ([H, G, hpad]). */
INLINE void
tile_fwd(floatv *acc, const int G, const __global wt_t *wt, int hpad,
         const __global cg_t *h, int H, int u0, int b0, int B)
{
    floatv w[4];
    int k, g, r;

#pragma unroll
    for (r = 0; r < G * RB; r++)
        acc[r] = ZV;
    for (k = 0; k < H; k++) {
        /* No #pragma unroll on the loads: LLVM unrolls a loop of G <= 4
         * by itself, and with one it could not honour (PoCL 3.1's) it
         * warned "loop not unrolled" on stderr at every first build. */
        for (g = 0; g < G; g++)
            w[g] = LDVT(wt + (k * G + g) * hpad + u0);
#pragma unroll
        for (r = 0; r < RB; r++) {
            floatv hv = (floatv)(CG_LD(h, min(b0 + r, B - 1) * H + k));

#pragma unroll
            for (g = 0; g < G; g++)
                acc[g * RB + r] += w[g] * hv;
        }
    }
}
#endif

/* Backward tile: acc[r] = sum_j dg[b0 + r, j] W_hh[j, u0..] over the
 * gh = G*H rows of the padded wp ([G*H, hpad]). */
INLINE void
tile_bwd(floatv *acc, const __global cg_t *wp, int hpad,
         const __global cg_t *dg, int gh, int u0, int b0, int B)
{
    int j, r;

#pragma unroll
    for (r = 0; r < RB; r++)
        acc[r] = ZV;
    for (j = 0; j < gh; j++) {
        floatv w = LDVT(wp + j * hpad + u0);

#pragma unroll
        for (r = 0; r < RB; r++)
            acc[r] += w * (floatv)(CG_LD(dg, min(b0 + r, B - 1) * gh + j));
    }
}

/* Is row b past its sequence at step t? */
#define DONE(len, t, b) ((len) != 0 && (t) >= (len)[b])

/* The work-item's unit block u0 (n valid units) and first row b0, or
 * return if it has none.  hpad: H rounded up to VW. */
#define ITEM(B, H)                                                        \
    int nvec = ((H) + VW - 1) / VW, hpad = nvec * VW;                     \
    int i = get_global_id(0);                                             \
    if (i >= nvec * (((B) + RB - 1) / RB))                                \
        return;                                                           \
    int u0 = (i % nvec) * VW, b0 = (i / nvec) * RB, n = min(VW, (H) - u0)

/* ------------------------------------------------------------- forward */

#if CG_WANT(lstm_fwd)
KERNEL
lstm_fwd(const __global float *xp, int xo, int ldx, const __global wt_t *wt,
         const __global cg_t *bi, int bio, const __global cg_t *bh, int bho,
         const __global cg_t *hp, int hpo, __global cg_t *hn, int hno,
         const __global float *cp, int cpo, __global float *cn, int cno,
         __global cg_t *y, int yo, int ldy, __global cg_t *sv, int svo,
         const __global int *len, int t, int B, int H)
{
    floatv acc[4 * RB];
    int r;
    ITEM(B, H);

    floatv bs[4];

    tile_fwd(acc, 4, wt, hpad, hp + hpo, H, u0, b0, B);
    for (r = 0; r < 4; r++)
        bs[r] = bias(bi, bio, bh, bho, r * H + u0, n, 1);
    for (r = 0; r < RB && b0 + r < B; r++) {
        int b = b0 + r, o = b * H + u0;
        const __global float *x = xp + xo + b * ldx + u0;
        __global cg_t *s = sv + svo + b * 4 * H + u0;
        floatv ig, fg, gg, og, c;

        if (DONE(len, t, b)) {
            stt(ldt(hp + hpo + o, n), hn + hno + o, n);
            stn(ldn(cp + cpo + o, n), cn + cno + o, n);
            stt(ZV, y + yo + b * ldy + u0, n);
            stt(ZV, s, n);
            stt(ZV, s + H, n);
            stt(ZV, s + 2 * H, n);
            stt(ZV, s + 3 * H, n);
            continue;
        }
        ig = sigm(acc[0 * RB + r] + ldn(x, n) + bs[0]);
        fg = sigm(acc[1 * RB + r] + ldn(x + H, n) + bs[1]);
        gg = tanh(acc[2 * RB + r] + ldn(x + 2 * H, n) + bs[2]);
        og = sigm(acc[3 * RB + r] + ldn(x + 3 * H, n) + bs[3]);
        c = fg * ldn(cp + cpo + o, n) + ig * gg;
        stn(c, cn + cno + o, n);
        stt(og * tanh(c), hn + hno + o, n);
        stt(og * tanh(c), y + yo + b * ldy + u0, n);
        stt(ig, s, n);
        stt(fg, s + H, n);
        stt(gg, s + 2 * H, n);
        stt(og, s + 3 * H, n);
    }
}
#endif

#if CG_WANT(gru_fwd)
KERNEL
gru_fwd(const __global float *xp, int xo, int ldx, const __global wt_t *wt,
        const __global cg_t *bi, int bio, const __global cg_t *bh, int bho,
        const __global cg_t *hp, int hpo, __global cg_t *hn, int hno,
        __global cg_t *y, int yo, int ldy, __global cg_t *sv, int svo,
        const __global int *len, int t, int B, int H)
{
    floatv acc[3 * RB];
    int r;
    ITEM(B, H);

    floatv bs[4];

    tile_fwd(acc, 3, wt, hpad, hp + hpo, H, u0, b0, B);
    bs[0] = bias(bi, bio, bh, bho, u0, n, 1);
    bs[1] = bias(bi, bio, bh, bho, H + u0, n, 1);
    bs[2] = bias(bi, bio, bh, bho, 2 * H + u0, n, 0);
    bs[3] = bias(bh, bho, bh, bho, 2 * H + u0, n, 0);     /* b_hn */
    for (r = 0; r < RB && b0 + r < B; r++) {
        int b = b0 + r, o = b * H + u0;
        const __global float *x = xp + xo + b * ldx + u0;
        __global cg_t *s = sv + svo + b * 4 * H + u0;
        floatv rg, zg, ng, hh, h0 = ldt(hp + hpo + o, n), h;

        if (DONE(len, t, b)) {
            stt(h0, hn + hno + o, n);
            stt(ZV, y + yo + b * ldy + u0, n);
            stt(ZV, s, n);
            stt(ZV, s + H, n);
            stt(ZV, s + 2 * H, n);
            stt(ZV, s + 3 * H, n);
            continue;
        }
        rg = sigm(acc[0 * RB + r] + ldn(x, n) + bs[0]);
        zg = sigm(acc[1 * RB + r] + ldn(x + H, n) + bs[1]);
        hh = acc[2 * RB + r] + bs[3];
        ng = tanh(ldn(x + 2 * H, n) + bs[2] + rg * hh);
        h = (1.0f - zg) * ng + zg * h0;
        stt(h, hn + hno + o, n);
        stt(h, y + yo + b * ldy + u0, n);
        stt(rg, s, n);
        stt(zg, s + H, n);
        stt(ng, s + 2 * H, n);
        stt(hh, s + 3 * H, n);
    }
}
#endif

/* relu != 0: h = max(a, 0), else tanh(a). */
#if CG_WANT(rnn_fwd)
KERNEL
rnn_fwd(const __global float *xp, int xo, int ldx, const __global wt_t *wt,
        const __global cg_t *bi, int bio, const __global cg_t *bh, int bho,
        const __global cg_t *hp, int hpo, __global cg_t *hn, int hno,
        __global cg_t *y, int yo, int ldy, int relu,
        const __global int *len, int t, int B, int H)
{
    floatv acc[RB];
    int r;
    ITEM(B, H);

    floatv bs = bias(bi, bio, bh, bho, u0, n, 1);

    tile_fwd(acc, 1, wt, hpad, hp + hpo, H, u0, b0, B);
    for (r = 0; r < RB && b0 + r < B; r++) {
        int b = b0 + r, o = b * H + u0;
        floatv a, h;

        if (DONE(len, t, b)) {
            stt(ldt(hp + hpo + o, n), hn + hno + o, n);
            stt(ZV, y + yo + b * ldy + u0, n);
            continue;
        }
        a = acc[r] + ldn(xp + xo + b * ldx + u0, n) + bs;
        h = relu ? fmax(a, 0.0f) : tanh(a);
        stt(h, hn + hno + o, n);
        stt(h, y + yo + b * ldy + u0, n);
    }
}
#endif

/* ------------------------------------------------------- forward mode */

/* The tangent steps (lstm_jvp, gru_jvp, rnn_jvp): forward-mode AD through
 * a layer, one launch per time step after the primal's, from one source
 * with the forward kernels (the same tile, tunables and variants).  The
 * tangent of the recurrence is a recurrence: with a dot for a tangent,
 *     a'_t = P_t + b_ih' + b_hh' + h'_{t-1} W_hh^T
 * where P_t (float32, [B, G*H] of a [T*B, ...] array with row stride ldp)
 * holds x'_t W_ih^T + x_t W_ih'^T (+ h_{t-1} W_hh'^T, but for GRU, whose n
 * block needs it apart: ph, NULL for none), formed by GEMMs over all
 * steps; the kernel adds the bias tangents (NULL: zero) and the recurrent
 * product h'_{t-1} W_hh^T (the forward's tile on the packed wt, or with
 * HPROJ the GEMM's product), then differentiates the cell at the primal's
 * saved activations (sv: LSTM i, f, g, o; GRU r, z, n, W_hn h + b_hn):
 *   LSTM  c' = f' c_{t-1} + f c'_{t-1} + i' g + i g',
 *         h' = o' tanh(c_t) + o (1 - tanh^2 c_t) c'
 *   GRU   n' = (1 - n^2) (P_n + b_in' + r' hh + r hh'),
 *         hh' = h'_{t-1} W_hn^T + ph_n + b_hn',
 *         h' = (1 - z) n' + z' (h_{t-1} - n) + z h'_{t-1}
 *   RNN   h' = (1 - h_t^2) a' (tanh), [h_t > 0] a' (relu)
 * with i' = i (1 - i) a'_i and so on.  h' and the output's tangent are
 * cg_t, c' float32, as the primal's h and c.  A row past its length keeps
 * h' and c' and writes zeros to the output's tangent, as the primal. */

#if CG_WANT(lstm_jvp)
KERNEL
lstm_jvp(const __global float *xp, int xo, int ldx, const __global wt_t *wt,
         const __global cg_t *bi, int bio, const __global cg_t *bh, int bho,
         const __global cg_t *hp, int hpo, __global cg_t *hn, int hno,
         const __global float *cp, int cpo, __global float *cn, int cno,
         __global cg_t *y, int yo, int ldy, const __global cg_t *sv, int svo,
         const __global float *c0, int c0o, const __global float *c1,
         int c1o, const __global int *len, int t, int B, int H)
{
    floatv acc[4 * RB];
    int r;
    ITEM(B, H);

    floatv bs[4];

    tile_fwd(acc, 4, wt, hpad, hp + hpo, H, u0, b0, B);
    for (r = 0; r < 4; r++)
        bs[r] = bias(bi, bio, bh, bho, r * H + u0, n, 1);
    for (r = 0; r < RB && b0 + r < B; r++) {
        int b = b0 + r, o = b * H + u0;
        const __global float *x = xp + xo + b * ldx + u0;
        const __global cg_t *s = sv + svo + b * 4 * H + u0;
        floatv ig, fg, gg, og, di, df, dg, dob, c, tc;

        if (DONE(len, t, b)) {
            stt(ldt(hp + hpo + o, n), hn + hno + o, n);
            stn(ldn(cp + cpo + o, n), cn + cno + o, n);
            stt(ZV, y + yo + b * ldy + u0, n);
            continue;
        }
        ig = ldt(s, n);
        fg = ldt(s + H, n);
        gg = ldt(s + 2 * H, n);
        og = ldt(s + 3 * H, n);
        di = ig * (1.0f - ig) * (acc[0 * RB + r] + ldn(x, n) + bs[0]);
        df = fg * (1.0f - fg) * (acc[1 * RB + r] + ldn(x + H, n) + bs[1]);
        dg = (1.0f - gg * gg) * (acc[2 * RB + r] + ldn(x + 2 * H, n) +
                                 bs[2]);
        dob = og * (1.0f - og) * (acc[3 * RB + r] + ldn(x + 3 * H, n) +
                                  bs[3]);
        c = df * ldn(c0 + c0o + o, n) + fg * ldn(cp + cpo + o, n) +
            di * gg + ig * dg;
        tc = tanh(ldn(c1 + c1o + o, n));
        stn(c, cn + cno + o, n);
        c = dob * tc + og * (1.0f - tc * tc) * c;
        stt(c, hn + hno + o, n);
        stt(c, y + yo + b * ldy + u0, n);
    }
}
#endif

/* h0: the primal's h_{t-1}; ph: h_{t-1} W_hh'^T ([B, 3H] at pho, row
 * stride 3H), or NULL. */
#if CG_WANT(gru_jvp)
KERNEL
gru_jvp(const __global float *xp, int xo, int ldx, const __global wt_t *wt,
        const __global cg_t *bi, int bio, const __global cg_t *bh, int bho,
        const __global cg_t *hp, int hpo, __global cg_t *hn, int hno,
        __global cg_t *y, int yo, int ldy, const __global cg_t *sv, int svo,
        const __global cg_t *h0, int h0o, const __global float *ph, int pho,
        const __global int *len, int t, int B, int H)
{
    floatv acc[3 * RB];
    int r;
    ITEM(B, H);

    floatv bs[4];

    tile_fwd(acc, 3, wt, hpad, hp + hpo, H, u0, b0, B);
    bs[0] = bias(bi, bio, bh, bho, u0, n, 1);
    bs[1] = bias(bi, bio, bh, bho, H + u0, n, 1);
    bs[2] = bias(bi, bio, bh, bho, 2 * H + u0, n, 0);
    bs[3] = bias(bh, bho, bh, bho, 2 * H + u0, n, 0);     /* b_hn' */
    for (r = 0; r < RB && b0 + r < B; r++) {
        int b = b0 + r, o = b * H + u0;
        const __global float *x = xp + xo + b * ldx + u0;
        const __global float *q = ph + pho + b * 3 * H + u0;
        const __global cg_t *s = sv + svo + b * 4 * H + u0;
        floatv rg, zg, ng, dr, dz, dn, hh, dp = ldt(hp + hpo + o, n);

        if (DONE(len, t, b)) {
            stt(dp, hn + hno + o, n);
            stt(ZV, y + yo + b * ldy + u0, n);
            continue;
        }
        rg = ldt(s, n);
        zg = ldt(s + H, n);
        ng = ldt(s + 2 * H, n);
        dr = acc[0 * RB + r] + ldn(x, n) + bs[0];
        dz = acc[1 * RB + r] + ldn(x + H, n) + bs[1];
        hh = acc[2 * RB + r] + bs[3];
        if (ph != 0) {
            dr += ldn(q, n);
            dz += ldn(q + H, n);
            hh += ldn(q + 2 * H, n);
        }
        dr *= rg * (1.0f - rg);
        dz *= zg * (1.0f - zg);
        dn = (1.0f - ng * ng) * (ldn(x + 2 * H, n) + bs[2] +
                                 dr * ldt(s + 3 * H, n) + rg * hh);
        dn = (1.0f - zg) * dn + dz * (ldt(h0 + h0o + o, n) - ng) + zg * dp;
        stt(dn, hn + hno + o, n);
        stt(dn, y + yo + b * ldy + u0, n);
    }
}
#endif

/* ht: the primal's h_t. */
#if CG_WANT(rnn_jvp)
KERNEL
rnn_jvp(const __global float *xp, int xo, int ldx, const __global wt_t *wt,
        const __global cg_t *bi, int bio, const __global cg_t *bh, int bho,
        const __global cg_t *hp, int hpo, __global cg_t *hn, int hno,
        __global cg_t *y, int yo, int ldy, int relu,
        const __global cg_t *ht, int hto,
        const __global int *len, int t, int B, int H)
{
    floatv acc[RB];
    int r;
    ITEM(B, H);

    floatv bs = bias(bi, bio, bh, bho, u0, n, 1);

    tile_fwd(acc, 1, wt, hpad, hp + hpo, H, u0, b0, B);
    for (r = 0; r < RB && b0 + r < B; r++) {
        int b = b0 + r, o = b * H + u0;
        floatv a, h;

        if (DONE(len, t, b)) {
            stt(ldt(hp + hpo + o, n), hn + hno + o, n);
            stt(ZV, y + yo + b * ldy + u0, n);
            continue;
        }
        a = acc[r] + ldn(xp + xo + b * ldx + u0, n) + bs;
        h = ldt(ht + hto + o, n);
        a = relu ? select(ZV, a, h > 0.0f) : (1.0f - h * h) * a;
        stt(a, hn + hno + o, n);
        stt(a, y + yo + b * ldy + u0, n);
    }
}
#endif

/* ------------------------------------------------------------ backward */

/* Common head of the backward kernels: acc[r] = dgates_{t+1} W_hh for the
 * item's units (zero at the first step, mode bit 1 clear), plus the direct
 * part in dh; mode bit 2 clear means "(1) only": store dh and return. */
#define BWD_HEAD(GH)                                                      \
    floatv acc[RB];                                                       \
    int r;                                                                \
    ITEM(B, H);                                                           \
    if (mode & 1)                                                         \
        tile_bwd(acc, wp, hpad, dgn + dgno, (GH), u0, b0, B);             \
    else                                                                  \
        for (r = 0; r < RB; r++)                                          \
            acc[r] = ZV;                                                \
    for (r = 0; r < RB && b0 + r < B; r++)                                \
        acc[r] += ldn(dh + b0 * H + r * H + u0, n);                       \
    if (!(mode & 2)) {                                                    \
        for (r = 0; r < RB && b0 + r < B; r++)                            \
            stn(acc[r], dh + (b0 + r) * H + u0, n);                       \
        return;                                                           \
    }

/* Adds dy_t to an active row's dh. */
#define BWD_DY(d, b)                                                      \
    if (dy != 0)                                                          \
        d += ldt(dy + dyo + (b) * ldy + u0, n)

#if CG_WANT(lstm_bwd)
KERNEL
lstm_bwd(const __global cg_t *wp, const __global cg_t *dgn, int dgno,
         int mode, const __global cg_t *dy, int dyo, int ldy,
         __global float *dh, __global float *dc,
         const __global cg_t *sv, int svo, const __global float *cp,
         int cpo, const __global float *ct, int cto,
         __global cg_t *dg, int dgo,
         const __global int *len, int t, int B, int H)
{
    BWD_HEAD(4 * H)
    for (r = 0; r < RB && b0 + r < B; r++) {
        int b = b0 + r, o = b * H + u0;
        const __global cg_t *s = sv + svo + b * 4 * H + u0;
        __global cg_t *g = dg + dgo + b * 4 * H + u0;
        floatv d = acc[r], ig, fg, gg, og, tc, dcv;

        if (DONE(len, t, b)) {
            stn(d, dh + o, n);
            stt(ZV, g, n);
            stt(ZV, g + H, n);
            stt(ZV, g + 2 * H, n);
            stt(ZV, g + 3 * H, n);
            continue;
        }
        BWD_DY(d, b);
        ig = ldt(s, n);
        fg = ldt(s + H, n);
        gg = ldt(s + 2 * H, n);
        og = ldt(s + 3 * H, n);
        tc = tanh(ldn(ct + cto + o, n));
        dcv = ldn(dc + o, n) + d * og * (1.0f - tc * tc);
        stt(dcv * gg * ig * (1.0f - ig), g, n);
        stt(dcv * ldn(cp + cpo + o, n) * fg * (1.0f - fg), g + H, n);
        stt(dcv * ig * (1.0f - gg * gg), g + 2 * H, n);
        stt(d * tc * og * (1.0f - og), g + 3 * H, n);
        stn(dcv * fg, dc + o, n);
        stn(ZV, dh + o, n);
    }
}
#endif

#if CG_WANT(gru_bwd)
KERNEL
gru_bwd(const __global cg_t *wp, const __global cg_t *dgn, int dgno,
        int mode, const __global cg_t *dy, int dyo, int ldy,
        __global float *dh, const __global cg_t *sv, int svo,
        const __global cg_t *hp, int hpo,
        __global cg_t *dg, int dgo, __global cg_t *dgi, int dgio,
        const __global int *len, int t, int B, int H)
{
    BWD_HEAD(3 * H)
    for (r = 0; r < RB && b0 + r < B; r++) {
        int b = b0 + r, o = b * H + u0;
        const __global cg_t *s = sv + svo + b * 4 * H + u0;
        __global cg_t *g = dg + dgo + b * 3 * H + u0;
        __global cg_t *gi = dgi + dgio + b * 3 * H + u0;
        floatv d = acc[r], rg, zg, ng, dnp, dr, dz;

        if (DONE(len, t, b)) {
            stn(d, dh + o, n);
            stt(ZV, g, n);
            stt(ZV, g + H, n);
            stt(ZV, g + 2 * H, n);
            stt(ZV, gi, n);
            stt(ZV, gi + H, n);
            stt(ZV, gi + 2 * H, n);
            continue;
        }
        BWD_DY(d, b);
        rg = ldt(s, n);
        zg = ldt(s + H, n);
        ng = ldt(s + 2 * H, n);
        dnp = d * (1.0f - zg) * (1.0f - ng * ng);
        dr = dnp * ldt(s + 3 * H, n) * rg * (1.0f - rg);
        dz = d * (ldt(hp + hpo + o, n) - ng) * zg * (1.0f - zg);
        stt(dr, g, n);
        stt(dz, g + H, n);
        stt(dnp * rg, g + 2 * H, n);
        stt(dr, gi, n);
        stt(dz, gi + H, n);
        stt(dnp, gi + 2 * H, n);
        stn(d * zg, dh + o, n);
    }
}
#endif

/* ht: the saved h_t (the state slot written by rnn_fwd). */
#if CG_WANT(rnn_bwd)
KERNEL
rnn_bwd(const __global cg_t *wp, const __global cg_t *dgn, int dgno,
        int mode, const __global cg_t *dy, int dyo, int ldy,
        __global float *dh, const __global cg_t *ht, int hto, int relu,
        __global cg_t *dg, int dgo,
        const __global int *len, int t, int B, int H)
{
    BWD_HEAD(H)
    for (r = 0; r < RB && b0 + r < B; r++) {
        int b = b0 + r, o = b * H + u0;
        floatv d = acc[r], h;

        if (DONE(len, t, b)) {
            stn(d, dh + o, n);
            stt(ZV, dg + dgo + o, n);
            continue;
        }
        BWD_DY(d, b);
        h = ldt(ht + hto + o, n);
        stt(relu ? select(ZV, d, h > 0.0f) : d * (1.0f - h * h),
            dg + dgo + o, n);
        stn(ZV, dh + o, n);
    }
}
#endif

/* ------------------------------------------------------------- layout */

/* wt[k, g, u] = W_hh[g*H + u, k] (zero for u >= H): [H, G, hpad] from
 * W_hh ([G*H, H] at w + wo).  One item per element of wt. */
#if CG_WANT(rnn_pack_t)
KERNEL
rnn_pack_t(const __global cg_t *w, int wo, int G, int H, __global cg_t *wt)
{
    int hpad = (H + VW - 1) / VW * VW;
    int i = get_global_id(0), k, g, u;

    if (i >= H * G * hpad)
        return;
    k = i / (G * hpad);
    g = i / hpad % G;
    u = i % hpad;
    CG_ST(wt, i, u < H ? CG_LD(w, wo + (g * H + u) * H + k) : 0.0f);
}
#endif

/* wp[j, u] = W_hh[j, u] (zero for u >= H): [G*H, hpad]. */
#if CG_WANT(rnn_pack)
KERNEL
rnn_pack(const __global cg_t *w, int wo, int G, int H, __global cg_t *wp)
{
    int hpad = (H + VW - 1) / VW * VW;
    int i = get_global_id(0), u = i % hpad;

    if (i >= G * H * hpad)
        return;
    CG_ST(wp, i, u < H ? CG_LD(w, wo + i / hpad * H + u) : 0.0f);
}
#endif
