/* SPDX-License-Identifier: MIT */
/*
 * kernels/elementwise.cl - elementwise forward and backward kernels.
 *
 * Index space of the strided kernels (NAME_f, NAME_b, where*, copyBITS,
 * axpy, arange): one work-item per element of the (contiguous) output, n
 * of them, padded to the work-group size; operands are read through the
 * strided layout of common.cl, so views and broadcasts need no copies.
 *
 * Index space of the row kernels (NAME_fv, NAME_bv, copyBITSv): the output seen as
 * rows of len elements (the innermost dimension of the coalesced layout),
 * where every operand's innermost stride is 1 or 0 (broadcast).  Work-item
 * (c, r) handles elements c * ch .. c * ch + ch - 1 of row r (global size
 * ceil(len / ch) padded to the work-group size, by the number of rows):
 * VW at a time as vectors, the rest of a short chunk one at a time.  The
 * operands' row starts come from the outer dimensions (nd - 1 of them)
 * once per work-item, not once per element.  Explicit vectors and a
 * contiguous chunk per work-item are what lets a CPU device stream at
 * memory bandwidth (one float per work-item and per-element index
 * arithmetic ran at a fifth of it on PoCL); vloadn needs only element
 * alignment, so tensors at any element offset take this path.  The same
 * expression text serves both widths: the macros below are written for
 * float and float vectors alike, so both paths give the same roundings.
 *
 * Unary op NAME:   NAME_f:  y[i] = F(x)                (p0, p1: parameters)
 *                  NAME_b:  gx[i] = G(x, y, g)         (gx over x's shape)
 *                  NAME_j:  y[i] = F(x) and, forward mode, its tangent
 *                           ty[i] = G(x, y, tx): G is linear in g and the
 *                           Jacobian diagonal, so the backward expression
 *                           of the tangent is the JVP
 * Binary op NAME:  NAME_f:  y[i] = F(a, b)             (broadcasting)
 *                  NAME_b:  ga[i], gb[i] over the output's shape (the host
 *                           sums over broadcast dimensions); `want` bit 0
 *                           asks for ga, bit 1 for gb.
 *                  NAME_j:  y[i] = F(a, b) and ty[i] = GA(.., ta) +
 *                           GB(.., tb), `want` bit 0 for a term in ta,
 *                           bit 1 for tb (a missing tangent is zero)
 * The NAME_j kernels read each tangent through its primal's layout (the
 * host passes only tangents laid out as their primals) and have row forms
 * NAME_jv; y and ty are contiguous over the output's shape.
 * No tunable parameters here: the work-group size and ch (a multiple of
 * 16) are the host's.
 *
 * Storage variants (common.cl's CG_T): the op kernels and where read and
 * write their tensor operands (x, a, b, y, g and the gradients) as cg_t,
 * float32, float16 or bfloat16, and compute in float32, so a 16-bit op
 * rounds its result once.  where's condition stays float32 or int32;
 * copyBITS, axpy and arange are float32 (or raw words) only.
 *
 * The ops are listed in elementwise_ops.def (inlined where it is included
 * when the library embeds this file or reads it from CLGRAD_KERNEL_DIR).
 * For build-aux/cltable.sh, the kernels each entry makes and those the
 * where macro makes:
 * @family CG_UNARY _f _b _fv _bv _j _jv
 * @family CG_BINARY _f _b _fv _bv _j _jv
 * @kernels where_f where_f_b where_i where_i_b
 * @kernels copy32v copy16v
 * Each kernel is a program of its own (common.cl's CG_WANT):
 * @split
 */

#define VW 8
#define VF float8
#define VLOAD(i, p) CG_VLOAD(8, i, p)
#define VSTORE(v, i, p) CG_VSTORE(8, v, i, p)

/* VW elements of an operand with innermost stride s (1, or 0: the same
 * element VW times). */
static inline __attribute__((always_inline)) VF
cg_vld(__global const cg_t *p, int s)
{
    return s ? VLOAD(0, p) : (VF)(CG_LD(p, 0));
}

#define CG_UNARY(ID, NAME, FWD, BWD)                                         \
CG_KERNEL_IF(CG_WANT(NAME##_f))                                              \
void NAME##_f(__global const cg_t *x, int xo, int8 shape,                    \
              int8 sx, int nd, __global cg_t *yv, uint n,                    \
              float p0, float p1)                                           \
{                                                                            \
    uint i = get_global_id(0);                                               \
    float x_;                                                                \
                                                                             \
    if (i >= n)                                                              \
        return;                                                              \
    x_ = CG_LD(x, xo + cg_off(i, shape, sx, nd));                            \
    CG_ST(yv, i, (FWD));                                                     \
}                                                                            \
CG_KERNEL_IF(CG_WANT(NAME##_b))                                              \
void NAME##_b(__global const cg_t *x, int xo, int8 shape,                    \
              int8 sx, int nd, __global const cg_t *yv,                      \
              __global const cg_t *g, __global cg_t *gx, uint n,             \
              float p0, float p1)                                           \
{                                                                            \
    uint i = get_global_id(0);                                               \
    float x_, y_, g_;                                                        \
                                                                             \
    if (i >= n)                                                              \
        return;                                                              \
    x_ = CG_LD(x, xo + cg_off(i, shape, sx, nd));                            \
    y_ = CG_LD(yv, i);                                                       \
    g_ = CG_LD(g, i);                                                        \
    CG_ST(gx, i, (BWD));                                                     \
}                                                                            \
CG_KERNEL_IF(CG_WANT(NAME##_fv))                                             \
void NAME##_fv(__global const cg_t *x, int xo, int8 shape,                   \
               int8 sx, int nd, int ix, __global cg_t *yv,                   \
               uint len, uint ch, float p0_, float p1_)                     \
{                                                                            \
    uint c = get_global_id(0) * ch, r = get_global_id(1), e, k;             \
    __global const cg_t *px;                                                 \
    __global cg_t *py;                                                       \
                                                                             \
    if (c >= len)                                                            \
        return;                                                              \
    px = x + xo + cg_off(r, shape, sx, nd - 1) + (int)c * ix;                \
    py = yv + (size_t)r * len + c;                                           \
    e = min(ch, len - c);                                                    \
    for (k = 0; k + VW <= e; k += VW) {                                      \
        VF p0 = p0_, p1 = p1_, x_ = cg_vld(px + (int)k * ix, ix);            \
                                                                             \
        VSTORE((FWD), 0, py + k);                                            \
    }                                                                        \
    for (; k < e; k++) {                                                     \
        float p0 = p0_, p1 = p1_, x_ = CG_LD(px, (int)k * ix);               \
                                                                             \
        CG_ST(py, k, (FWD));                                                 \
    }                                                                        \
}                                                                            \
CG_KERNEL_IF(CG_WANT(NAME##_bv))                                             \
void NAME##_bv(__global const cg_t *x, int xo, int8 shape,                   \
               int8 sx, int nd, int ix, __global const cg_t *yv,             \
               __global const cg_t *g, __global cg_t *gx,                    \
               uint len, uint ch, float p0_, float p1_)                     \
{                                                                            \
    uint c = get_global_id(0) * ch, r = get_global_id(1), e, k;             \
    size_t o = (size_t)r * len + c;                                          \
    __global const cg_t *px;                                                 \
                                                                             \
    if (c >= len)                                                            \
        return;                                                              \
    px = x + xo + cg_off(r, shape, sx, nd - 1) + (int)c * ix;                \
    e = min(ch, len - c);                                                    \
    for (k = 0; k + VW <= e; k += VW) {                                      \
        VF p0 = p0_, p1 = p1_, x_ = cg_vld(px + (int)k * ix, ix);            \
        VF y_ = VLOAD(0, yv + o + k), g_ = VLOAD(0, g + o + k);              \
                                                                             \
        VSTORE((BWD), 0, gx + o + k);                                        \
    }                                                                        \
    for (; k < e; k++) {                                                     \
        float p0 = p0_, p1 = p1_, x_ = CG_LD(px, (int)k * ix);               \
        float y_ = CG_LD(yv, o + k), g_ = CG_LD(g, o + k);                   \
                                                                             \
        CG_ST(gx, o + k, (BWD));                                             \
    }                                                                        \
}                                                                            \
CG_KERNEL_IF(CG_WANT(NAME##_j))                                              \
void NAME##_j(__global const cg_t *x, int xo,                                \
              __global const cg_t *tx, int txo, int8 shape,                  \
              int8 sx, int nd, __global cg_t *yv,                            \
              __global cg_t *ty, uint n, float p0, float p1)                \
{                                                                            \
    uint i = get_global_id(0);                                               \
    int o;                                                                   \
    float x_, y_, g_;                                                        \
                                                                             \
    if (i >= n)                                                              \
        return;                                                              \
    o = cg_off(i, shape, sx, nd);                                            \
    x_ = CG_LD(x, xo + o);                                                   \
    g_ = CG_LD(tx, txo + o);                                                 \
    y_ = (FWD);                                                              \
    CG_ST(yv, i, y_);                                                        \
    CG_ST(ty, i, (BWD));                                                     \
}                                                                            \
CG_KERNEL_IF(CG_WANT(NAME##_jv))                                             \
void NAME##_jv(__global const cg_t *x, int xo,                               \
               __global const cg_t *tx, int txo, int8 shape,                 \
               int8 sx, int nd, int ix, __global cg_t *yv,                   \
               __global cg_t *ty, uint len, uint ch, float p0_,              \
               float p1_)                                                   \
{                                                                            \
    uint c = get_global_id(0) * ch, r = get_global_id(1), e, k;             \
    size_t o = (size_t)r * len + c;                                          \
    __global const cg_t *px, *pt;                                            \
    int off;                                                                 \
                                                                             \
    if (c >= len)                                                            \
        return;                                                              \
    off = cg_off(r, shape, sx, nd - 1) + (int)c * ix;                        \
    px = x + xo + off;                                                       \
    pt = tx + txo + off;                                                     \
    e = min(ch, len - c);                                                    \
    for (k = 0; k + VW <= e; k += VW) {                                      \
        VF p0 = p0_, p1 = p1_, x_ = cg_vld(px + (int)k * ix, ix);            \
        VF g_ = cg_vld(pt + (int)k * ix, ix), y_ = (FWD);                    \
                                                                             \
        VSTORE(y_, 0, yv + o + k);                                           \
        VSTORE((BWD), 0, ty + o + k);                                        \
    }                                                                        \
    for (; k < e; k++) {                                                     \
        float p0 = p0_, p1 = p1_, x_ = CG_LD(px, (int)k * ix);               \
        float g_ = CG_LD(pt, (int)k * ix), y_ = (FWD);                       \
                                                                             \
        CG_ST(yv, o + k, y_);                                                \
        CG_ST(ty, o + k, (BWD));                                             \
    }                                                                        \
}

#define CG_1_SQRT2PI 0.39894228040143268f  /* 1 / sqrt(2 pi) */

#define CG_BINARY(ID, NAME, FWD, GA, GB)                                     \
CG_KERNEL_IF(CG_WANT(NAME##_f))                                              \
void NAME##_f(__global const cg_t *a, int ao,                                \
              __global const cg_t *b, int bo, int8 shape,                    \
              int8 sa, int8 sb, int nd, __global cg_t *yv,                   \
              uint n)                                                        \
{                                                                            \
    uint i = get_global_id(0);                                               \
    int2 o;                                                                  \
    float a_, b_;                                                            \
                                                                             \
    if (i >= n)                                                              \
        return;                                                              \
    o = cg_off2(i, shape, sa, sb, nd);                                       \
    a_ = CG_LD(a, ao + o.x);                                                 \
    b_ = CG_LD(b, bo + o.y);                                                 \
    CG_ST(yv, i, (FWD));                                                     \
}                                                                            \
CG_KERNEL_IF(CG_WANT(NAME##_b))                                              \
void NAME##_b(__global const cg_t *a, int ao,                                \
              __global const cg_t *b, int bo, int8 shape,                    \
              int8 sa, int8 sb, int nd, __global const cg_t *yv,             \
              __global const cg_t *g, __global cg_t *ga,                     \
              __global cg_t *gb, uint n, int want)                           \
{                                                                            \
    uint i = get_global_id(0);                                               \
    int2 o;                                                                  \
    float a_, b_, y_, g_;                                                    \
                                                                             \
    if (i >= n)                                                              \
        return;                                                              \
    o = cg_off2(i, shape, sa, sb, nd);                                       \
    a_ = CG_LD(a, ao + o.x);                                                 \
    b_ = CG_LD(b, bo + o.y);                                                 \
    y_ = CG_LD(yv, i);                                                       \
    g_ = CG_LD(g, i);                                                        \
    if (want & 1)                                                            \
        CG_ST(ga, i, (GA));                                                  \
    if (want & 2)                                                            \
        CG_ST(gb, i, (GB));                                                  \
}                                                                            \
CG_KERNEL_IF(CG_WANT(NAME##_fv))                                             \
void NAME##_fv(__global const cg_t *a, int ao,                               \
               __global const cg_t *b, int bo, int8 shape,                   \
               int8 sa, int8 sb, int nd, int ia, int ib,                    \
               __global cg_t *yv, uint len, uint ch)                         \
{                                                                            \
    uint c = get_global_id(0) * ch, r = get_global_id(1), e, k;             \
    __global const cg_t *pa, *pb;                                            \
    __global cg_t *py;                                                       \
    int2 o;                                                                  \
                                                                             \
    if (c >= len)                                                            \
        return;                                                              \
    o = cg_off2(r, shape, sa, sb, nd - 1);                                   \
    pa = a + ao + o.x + (int)c * ia;                                         \
    pb = b + bo + o.y + (int)c * ib;                                         \
    py = yv + (size_t)r * len + c;                                           \
    e = min(ch, len - c);                                                    \
    for (k = 0; k + VW <= e; k += VW) {                                      \
        VF a_ = cg_vld(pa + (int)k * ia, ia);                                \
        VF b_ = cg_vld(pb + (int)k * ib, ib);                                \
                                                                             \
        VSTORE((FWD), 0, py + k);                                            \
    }                                                                        \
    for (; k < e; k++) {                                                     \
        float a_ = CG_LD(pa, (int)k * ia), b_ = CG_LD(pb, (int)k * ib);      \
                                                                             \
        CG_ST(py, k, (FWD));                                                 \
    }                                                                        \
}                                                                            \
CG_KERNEL_IF(CG_WANT(NAME##_bv))                                             \
void NAME##_bv(__global const cg_t *a, int ao,                               \
               __global const cg_t *b, int bo, int8 shape,                   \
               int8 sa, int8 sb, int nd, int ia, int ib,                    \
               __global const cg_t *yv, __global const cg_t *g,              \
               __global cg_t *ga, __global cg_t *gb, uint len,               \
               uint ch, int want)                                           \
{                                                                            \
    uint c = get_global_id(0) * ch, r = get_global_id(1), e, k;             \
    size_t q = (size_t)r * len + c;                                          \
    __global const cg_t *pa, *pb;                                            \
    int2 o;                                                                  \
                                                                             \
    if (c >= len)                                                            \
        return;                                                              \
    o = cg_off2(r, shape, sa, sb, nd - 1);                                   \
    pa = a + ao + o.x + (int)c * ia;                                         \
    pb = b + bo + o.y + (int)c * ib;                                         \
    e = min(ch, len - c);                                                    \
    for (k = 0; k + VW <= e; k += VW) {                                      \
        VF a_ = cg_vld(pa + (int)k * ia, ia);                                \
        VF b_ = cg_vld(pb + (int)k * ib, ib);                                \
        VF y_ = VLOAD(0, yv + q + k), g_ = VLOAD(0, g + q + k);              \
                                                                             \
        if (want & 1)                                                        \
            VSTORE((GA), 0, ga + q + k);                                     \
        if (want & 2)                                                        \
            VSTORE((GB), 0, gb + q + k);                                     \
    }                                                                        \
    for (; k < e; k++) {                                                     \
        float a_ = CG_LD(pa, (int)k * ia), b_ = CG_LD(pb, (int)k * ib);      \
        float y_ = CG_LD(yv, q + k), g_ = CG_LD(g, q + k);                   \
                                                                             \
        if (want & 1)                                                        \
            CG_ST(ga, q + k, (GA));                                          \
        if (want & 2)                                                        \
            CG_ST(gb, q + k, (GB));                                          \
    }                                                                        \
}                                                                            \
CG_KERNEL_IF(CG_WANT(NAME##_j))                                              \
void NAME##_j(__global const cg_t *a, int ao,                                \
              __global const cg_t *b, int bo,                                \
              __global const cg_t *ta, int tao,                              \
              __global const cg_t *tb, int tbo, int8 shape,                  \
              int8 sa, int8 sb, int nd, __global cg_t *yv,                   \
              __global cg_t *ty, uint n, int want)                           \
{                                                                            \
    uint i = get_global_id(0);                                               \
    int2 o;                                                                  \
    float a_, b_, y_, t_ = 0.0f;                                             \
                                                                             \
    if (i >= n)                                                              \
        return;                                                              \
    o = cg_off2(i, shape, sa, sb, nd);                                       \
    a_ = CG_LD(a, ao + o.x);                                                 \
    b_ = CG_LD(b, bo + o.y);                                                 \
    y_ = (FWD);                                                              \
    CG_ST(yv, i, y_);                                                        \
    if (want & 1) {                                                          \
        float g_ = CG_LD(ta, tao + o.x);                                     \
                                                                             \
        t_ = (GA);                                                           \
    }                                                                        \
    if (want & 2) {                                                          \
        float g_ = CG_LD(tb, tbo + o.y);                                     \
                                                                             \
        t_ = (want & 1) ? t_ + (GB) : (GB);                                  \
    }                                                                        \
    CG_ST(ty, i, t_);                                                        \
}                                                                            \
CG_KERNEL_IF(CG_WANT(NAME##_jv))                                             \
void NAME##_jv(__global const cg_t *a, int ao,                               \
               __global const cg_t *b, int bo,                               \
               __global const cg_t *ta, int tao,                             \
               __global const cg_t *tb, int tbo, int8 shape,                 \
               int8 sa, int8 sb, int nd, int ia, int ib,                    \
               __global cg_t *yv, __global cg_t *ty, uint len,               \
               uint ch, int want)                                           \
{                                                                            \
    uint c = get_global_id(0) * ch, r = get_global_id(1), e, k;             \
    size_t q = (size_t)r * len + c;                                          \
    __global const cg_t *pa, *pb, *pta, *ptb;                                \
    int2 o;                                                                  \
                                                                             \
    if (c >= len)                                                            \
        return;                                                              \
    o = cg_off2(r, shape, sa, sb, nd - 1);                                   \
    o.x += (int)c * ia;                                                      \
    o.y += (int)c * ib;                                                      \
    pa = a + ao + o.x;                                                       \
    pb = b + bo + o.y;                                                       \
    pta = ta + tao + o.x;                                                    \
    ptb = tb + tbo + o.y;                                                    \
    e = min(ch, len - c);                                                    \
    for (k = 0; k + VW <= e; k += VW) {                                      \
        VF a_ = cg_vld(pa + (int)k * ia, ia);                                \
        VF b_ = cg_vld(pb + (int)k * ib, ib);                                \
        VF y_ = (FWD), t_ = (VF)(0.0f);                                      \
                                                                             \
        VSTORE(y_, 0, yv + q + k);                                           \
        if (want & 1) {                                                      \
            VF g_ = cg_vld(pta + (int)k * ia, ia);                           \
                                                                             \
            t_ = (GA);                                                       \
        }                                                                    \
        if (want & 2) {                                                      \
            VF g_ = cg_vld(ptb + (int)k * ib, ib);                           \
                                                                             \
            t_ = (want & 1) ? t_ + (GB) : (GB);                              \
        }                                                                    \
        VSTORE(t_, 0, ty + q + k);                                           \
    }                                                                        \
    for (; k < e; k++) {                                                     \
        float a_ = CG_LD(pa, (int)k * ia), b_ = CG_LD(pb, (int)k * ib);      \
        float y_ = (FWD), t_ = 0.0f;                                         \
                                                                             \
        CG_ST(yv, q + k, y_);                                                \
        if (want & 1) {                                                      \
            float g_ = CG_LD(pta, (int)k * ia);                              \
                                                                             \
            t_ = (GA);                                                       \
        }                                                                    \
        if (want & 2) {                                                      \
            float g_ = CG_LD(ptb, (int)k * ib);                              \
                                                                             \
            t_ = (want & 1) ? t_ + (GB) : (GB);                              \
        }                                                                    \
        CG_ST(ty, q + k, t_);                                                \
    }                                                                        \
}

/* The ops themselves (each macro above pastes NAME itself: passed on to
 * another macro, a name such as exp would be expanded first). */
#include "elementwise_ops.def"

/* where: y = cond ? a : b, for a float32 (_f) or int32 (_i) condition. */
#define WHERE(SUFFIX, CTYPE)                                                 \
CG_KERNEL_IF(CG_WANT(where##SUFFIX))                                         \
void where##SUFFIX(__global const CTYPE *c, int co,                         \
                   __global const cg_t *a, int ao,                           \
                   __global const cg_t *b, int bo, int8 shape,               \
                   int8 sc, int8 sa, int8 sb, int nd,                       \
                   __global cg_t *yv, uint n)                                \
{                                                                            \
    uint i = get_global_id(0);                                               \
    int3 o;                                                                  \
                                                                             \
    if (i >= n)                                                              \
        return;                                                              \
    o = cg_off3(i, shape, sc, sa, sb, nd);                                   \
    CG_ST(yv, i, c[co + o.x] != 0 ? CG_LD(a, ao + o.y)                       \
                                  : CG_LD(b, bo + o.z));                     \
}                                                                            \
CG_KERNEL_IF(CG_WANT(where##SUFFIX##_b))                                     \
void where##SUFFIX##_b(__global const CTYPE *c, int co,                     \
                       int8 shape, int8 sc, int nd,                         \
                       __global const cg_t *g,                               \
                       __global cg_t *ga, __global cg_t *gb,                 \
                       uint n, int want)                                    \
{                                                                            \
    uint i = get_global_id(0);                                               \
    int t;                                                                   \
                                                                             \
    if (i >= n)                                                              \
        return;                                                              \
    t = c[co + cg_off(i, shape, sc, nd)] != 0;                               \
    if (want & 1)                                                            \
        CG_ST(ga, i, t ? CG_LD(g, i) : 0.0f);                                \
    if (want & 2)                                                            \
        CG_ST(gb, i, t ? 0.0f : CG_LD(g, i));                                \
}

WHERE(_f, float)
WHERE(_i, int)

/* dst[dst layout] = src[src layout], for elements of BITS bits (T: uint
 * for float32 and int32, ushort for float16 and bfloat16), both operands
 * strided over the same iteration space, taken as nrows rows of len
 * elements (the innermost dimension).  Work-item (c, r) copies elements
 * c * ch .. c * ch + ch - 1 of rows r * rows .. r * rows + rows - 1, VW
 * at a time where both innermost strides are 1.  Its first row's place
 * costs a division per dimension; each next row's, an add and a compare
 * per dimension that its index carries into (a row of 16 floats took
 * about as long to find as to copy by division). */
#define COPY(BITS, T)                                                        \
CG_KERNEL_IF(CG_WANT(copy##BITS##v))                                         \
void copy##BITS##v(__global const T *src, int so, __global T *dst,          \
                   int dso, int8 shape, int8 ss, int8 sd, int nd,           \
                   uint len, uint ch, uint rows, uint nrows)                \
{                                                                            \
    uint c = get_global_id(0) * ch, r0 = get_global_id(1) * rows, e, k, r;  \
    int sh[8], sa[8], sb[8], ix[8], d, q, is, id;                            \
    int2 o;                                                                  \
                                                                             \
    if (c >= len || r0 >= nrows)                                             \
        return;                                                              \
    vstore8(shape, 0, sh);                                                   \
    vstore8(ss, 0, sa);                                                      \
    vstore8(sd, 0, sb);                                                      \
    is = sa[nd - 1];                                                         \
    id = sb[nd - 1];                                                         \
    o = (int2)(so + (int)c * is, dso + (int)c * id);                         \
    for (d = nd - 2, q = (int)r0; d >= 0; d--) {                             \
        ix[d] = q % sh[d];                                                   \
        q /= sh[d];                                                          \
        o += (int2)(ix[d] * sa[d], ix[d] * sb[d]);                           \
    }                                                                        \
    e = min(ch, len - c);                                                    \
    for (r = 0; r < rows && r0 + r < nrows; r++) {                           \
        __global const T *ps = src + o.x;                                    \
        __global T *pd = dst + o.y;                                          \
                                                                             \
        if (is == 1 && id == 1) {                                            \
            for (k = 0; k + VW <= e; k += VW)                                \
                vstore8(vload8(0, ps + k), 0, pd + k);                       \
            for (; k < e; k++)                                               \
                pd[k] = ps[k];                                               \
        } else {                                                             \
            for (k = 0; k < e; k++)                                          \
                pd[(int)k * id] = ps[(int)k * is];                           \
        }                                                                    \
        for (d = nd - 2; d >= 0; d--) {                                      \
            o += (int2)(sa[d], sb[d]);                                       \
            if (++ix[d] < sh[d])                                             \
                break;                                                       \
            o -= (int2)(sh[d] * sa[d], sh[d] * sb[d]);                       \
            ix[d] = 0;                                                       \
        }                                                                    \
    }                                                                        \
}

COPY(32, uint)
COPY(16, ushort)

/* acc[i] += alpha * g[g layout]; acc contiguous. */
#if CG_WANT(axpy)
__kernel void
axpy(__global float *acc, __global const float *g, int go, int8 shape,
     int8 sg, int nd, uint n, float alpha)
{
    uint i = get_global_id(0);

    if (i >= n)
        return;
    acc[i] += alpha * g[go + cg_off(i, shape, sg, nd)];
}
#endif

/* y[i] = start + i * step. */
#if CG_WANT(arange)
__kernel void
arange(__global float *y, uint n, float start, float step)
{
    uint i = get_global_id(0);

    if (i >= n)
        return;
    y[i] = start + (float)i * step;
}
#endif
