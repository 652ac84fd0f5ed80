/* SPDX-License-Identifier: MIT */
/*
 * kernels/cast.cl - conversions between float32 and the 16-bit storage
 * dtypes, float16 (IEEE binary16) and bfloat16, bit for bit as PyTorch's
 * c10::Half and c10::BFloat16 convert:
 *     float32 -> float16:  round to nearest even, every NaN the quiet
 *                          NaN 0x7E00 with its sign (common.cl's
 *                          cg_f16_bits, which the kernels' float16 stores
 *                          use too)
 *     float16 -> float32:  exact; a NaN keeps its sign and payload and is
 *                          made quiet (common.cl's cg_f16_float)
 *     float32 -> bfloat16: the top 16 bits rounded to nearest even, every
 *                          NaN 0x7FC0 (no sign): common.cl's CG_BF16_BITS,
 *                          which the kernels' bfloat16 stores use too
 *     bfloat16 -> float32: the 16 bits shifted up (integers only: no
 *                          flushing of subnormals)
 * Only storage is 16-bit: no cl_khr_fp16 arithmetic is used.
 *
 * Index space: one work-item per element of the contiguous output, n of
 * them, padded to the work-group size; the input is read through its
 * strided layout (common.cl's cg_off).  No tunable parameters.
 *
 * One macro makes every kernel, cast_SRC_DST:
 * @kernels cast_f32_f16 cast_f16_f32 cast_f32_bf16 cast_bf16_f32
 * and another their forms for a contiguous input, cast_SRC_DSTv: work-item
 * i converts elements 8 i .. 8 i + 7 (those below n) with 8-lane integer
 * and vector operations, the same rules bit for bit:
 * @kernels cast_f32_f16v cast_f16_f32v cast_f32_bf16v cast_bf16_f32v
 * Each kernel is a program of its own (common.cl's CG_WANT):
 * @split
 */

/* common.cl's integer conversions, made here unless a float16 variant of
 * the file made them already.  cg_f16_bits already gives every NaN as
 * 0x7E00 with its sign; a NaN loaded is made quiet here. */
#ifndef CG_F16_FNS
CG_F16_FNS_()
CG_F16_FNS_(8)
#endif

static inline float
cg_ld_f16(uint h)
{
    uint f = as_uint(cg_f16_float(h));

    return as_float((h & 0x7C00u) == 0x7C00u && (h & 0x03FFu)
                    ? f | 0x00400000u : f);
}

/* Element i of the output from element j of the input. */
#define CG_CV_f32_f16(x, j, y, i) CG_F16_ST(y, i, (x)[j])
#define CG_CV_f16_f32(x, j, y, i)                                            \
    ((y)[i] = cg_ld_f16(((__global const ushort *)(x))[j]))
#define CG_CV_f32_bf16(x, j, y, i) ((y)[i] = CG_BF16_BITS(, as_float((x)[j])))
#define CG_CV_bf16_f32(x, j, y, i) ((y)[i] = (uint)(x)[j] << 16)

#define CAST(SRC, DST, ST, DT)                                               \
CG_KERNEL_IF(CG_WANT(cast_##SRC##_##DST))                                    \
void cast_##SRC##_##DST(__global const ST *x, int xo, int8 shape,           \
                        int8 sx, int nd, __global DT *y, uint n)            \
{                                                                            \
    uint i = get_global_id(0);                                               \
                                                                             \
    if (i >= n)                                                              \
        return;                                                              \
    CG_CV_##SRC##_##DST(x, (uint)(xo + cg_off(i, shape, sx, nd)), y, i);     \
}

CAST(f32, f16, float, half)
CAST(f16, f32, half, float)
CAST(f32, bf16, uint, ushort)
CAST(bf16, f32, ushort, uint)

/* The 8-lane forms: element bits in, element bits out. */
static inline ushort8
cg_cv8_f32_f16(uint8 b)
{
    return convert_ushort8(cg_f16_bits8(as_float8(b)));
}

static inline uint8
cg_cv8_f16_f32(ushort8 h)
{
    uint8 u = convert_uint8(h);
    uint8 f = as_uint8(cg_f16_float8(u));

    return select(f, f | 0x00400000u,
                  (u & 0x7C00u) == 0x7C00u && (u & 0x03FFu) != 0u);
}

static inline ushort8
cg_cv8_f32_bf16(uint8 b)
{
    return CG_BF16_BITS(8, as_float8(b));
}

static inline uint8
cg_cv8_bf16_f32(ushort8 h)
{
    return convert_uint8(h) << 16;
}

#define CASTV(SRC, DST, ST, DT, ST8)                                         \
CG_KERNEL_IF(CG_WANT(cast_##SRC##_##DST##v))                                 \
void cast_##SRC##_##DST##v(__global const ST *x, int xo,                   \
                           __global DT *y, uint n)                           \
{                                                                            \
    uint i = get_global_id(0), j;                                            \
    __global const ST *xs = x + xo;                                          \
                                                                             \
    if ((size_t)i * 8 + 8 <= n) {                                            \
        vstore8(cg_cv8_##SRC##_##DST(vload8(i, xs)), i, y);                  \
        return;                                                              \
    }                                                                        \
    for (j = i * 8; j < n; j++) {                                            \
        ST8 v = (ST8)(xs[j]);                                                \
                                                                             \
        y[j] = cg_cv8_##SRC##_##DST(v).s0;                                   \
    }                                                                        \
}

CASTV(f32, f16, uint, ushort, uint8)
CASTV(f16, f32, ushort, uint, ushort8)
CASTV(f32, bf16, uint, ushort, uint8)
CASTV(bf16, f32, ushort, uint, ushort8)
