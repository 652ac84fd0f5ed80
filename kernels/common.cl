/* SPDX-License-Identifier: MIT */
/*
 * kernels/common.cl - helpers prepended to every clgrad kernel file (the
 * loader inserts it, followed by a #line directive for the file itself).
 *
 * Strided indexing: a tensor operand is described by the coalesced shape of
 * the iteration space (int8, outermost dimension first, nd of them used)
 * and the operand's strides in elements over that space (0 where it is
 * broadcast).  cg_off* turn a linear index of the iteration space into
 * element offsets, with nd - 1 divisions (none for contiguous data, which
 * the host coalesces to nd = 1).
 *
 * Work-group reductions (reduce, softmax, layer_norm, loss, optim): one
 * fixed-shape tree over a work-group of wg work-items (a power of two,
 * the size the kernel requires), the same order on every run, so results
 * are deterministic.
 *
 * One kernel per program: a file whose banner says @split is built one
 * kernel at a time (PoCL compiles every kernel of a program when the
 * library asks for its binary, and again per work-group size at its
 * first launch, so a program of 80 kernels cost a first user 40 s for
 * one op).  The host passes -DCG_ONE -DCG_K_<name>=1 for kernel <name>;
 * the file guards each kernel with #if CG_WANT(name) ... #endif (or, in a
 * macro, qualifies it with CG_KERNEL_IF(CG_WANT(name)) instead of
 * __kernel).  Without CG_ONE, every kernel is built: a whole file still
 * compiles as one program.
 */

#ifdef CG_ONE
/* The loader defines CG_K_<name> for every kernel of a split file: 1 for
 * the one it builds, 0 for the others (lib/cl/program.c).  No variadic
 * macros here or anywhere in the kernels: OpenCL C 1.2 has none, and
 * NVIDIA's compiler rejects them. */
#define CG_WANT(name) CG_K_##name
#else
#define CG_WANT(name) 1
#endif
/* The qualifier of a kernel that a macro defines, c its CG_WANT:
 * __kernel, or static inline when the program does not build it (a
 * static function that nothing calls is never compiled to code).
 * Helpers are static inline for the same reason: clang compiles a plain
 * inline definition in OpenCL C as an external function, so a program
 * built for one kernel held every other kernel and helper of its file
 * as code (an elementwise kernel's program compiled in 2.2 s, not 1.1,
 * on PoCL 3.1). */
#define CG_KERNEL_IF(c) CG_KERNEL_IF_(c)
#define CG_KERNEL_IF_(c) CG_KERNEL_IF_##c
#define CG_KERNEL_IF_1 __kernel
#define CG_KERNEL_IF_0 static inline

/* Storage variants: the host builds a file once per storage dtype of its
 * tensor operands, with -DCG_T=0 (or nothing) for float32, 1 for float16,
 * 2 for bfloat16 (lib/cl's cg__kvariant).  Arithmetic is float32 in every
 * variant; only loads and stores change:
 *     cg_t                 the element type of a tensor operand in memory
 *                          (float, half, ushort): __global cg_t *x
 *     CG_LD(p, i)          element i as a float
 *     CG_ST(p, i, v)       float v stored to element i, rounded to nearest
 *                          even (bfloat16: every NaN the quiet 0x7FC0)
 *     CG_VLOAD(N, i, p)    elements N*i .. N*i+N-1 as a floatN (N 2, 4, 8
 *                          or 16; as vloadN, p need only be element
 *                          aligned)
 *     CG_VSTORE(N, v, i, p) the reverse
 * A kernel written with these is one source for all three; float32 state
 * that is never a tensor of the variant's dtype (optimizer moments,
 * float32 masters, statistics) stays __global float *. */
#ifndef CG_T
#define CG_T 0
#endif

/* float32 -> bfloat16 bits, round to nearest even, NaN 0x7FC0; N empty
 * for a scalar. */
#define CG_BF16_BITS(N, v)                                                   \
    convert_ushort##N(select((as_uint##N(v) + 0x7FFFu +                      \
                              ((as_uint##N(v) >> 16) & 1u)) >> 16,           \
                             (uint##N)0x7FC0u,                               \
                             CG_BF16_NAN_(N, v)))
#define CG_BF16_NAN_(N, v) ((as_uint##N(v) & 0x7FFFFFFFu) > 0x7F800000u)

/* float16 <-> float32 by integer operations, for scalars (N empty) and
 * uintN / floatN vectors (N 2, 4, 8):
 *     cg_f16_float##N(h)  the low 16 bits of each lane of h as float16,
 *                         to float32: the exponent rebiased, inf and NaN
 *                         kept, a subnormal's significand scaled by 2^-24
 *                         through one exact float subtraction
 *     cg_f16_bits##N(v)   v rounded to float16 bits, to nearest even:
 *                         normal results by adding the rounding bias to
 *                         the bits; subnormal ones by adding 0.5f, which
 *                         leaves the rounded significand in the low bits
 *                         (a float addition rounds to nearest even);
 *                         65520 and up to inf; every NaN the quiet 0x7E00
 *                         with its sign
 * They give what vload_half and vstore_half_rte give, bit for bit (every
 * float16 and every float32 bit pattern compared on PoCL), NaNs aside: a
 * NaN loads with its payload.  vload_half and vstore_half_rte were the
 * float16 variants' loads and stores before; PoCL makes a call per element
 * of them, and these integer operations vectorise across work-items as
 * bfloat16's shifts do: a scalar bias-add and relu over float16 ran
 * 2.5-3x faster in a standalone kernel on the 2-core PoCL machine.
 * CG_F16_FNS_(N) defines the pair for one N.  The float16 variants
 * instantiate it below (N empty, 2, 4, 8, and define CG_F16_FNS), cast.cl
 * for itself where they have not; a float32 program never does,
 * so its text (and the tuning data's source hash of it) is the same with
 * or without them.  CG_F16_LD, CG_F16_ST, CG_F16_VLOAD and CG_F16_VSTORE
 * are CG_LD, CG_ST, CG_VLOAD and CG_VSTORE of a float16 operand (gemm.cl's
 * float16 C uses them too). */
#define CG_F16_FNS_(N)                                                       \
static inline float##N                                                       \
cg_f16_float##N(uint##N h)                                                   \
{                                                                            \
    uint##N o = (h & 0x7FFFu) << 13, e = o & 0x0F800000u;                    \
                                                                             \
    o += 0x38000000u;                                                        \
    o = select(o, o + 0x38000000u, e == 0x0F800000u);                        \
    o = select(o, as_uint##N(as_float##N(o + 0x00800000u) - 0x1p-14f),       \
               e == 0u);                                                     \
    return as_float##N(o | (h & 0x8000u) << 16);                             \
}                                                                            \
static inline uint##N                                                        \
cg_f16_bits##N(float##N v)                                                   \
{                                                                            \
    uint##N f = as_uint##N(v), s = f & 0x80000000u, a = f ^ s;               \
    uint##N o = select((a + 0xC8000FFFu + ((a >> 13) & 1u)) >> 13,           \
                       as_uint##N(as_float##N(a) + 0.5f) - 0x3F000000u,      \
                       a < 0x38800000u);                                     \
                                                                             \
    o = select(o, select((uint##N)0x7C00u, (uint##N)0x7E00u,                 \
                         a > 0x7F800000u), a >= 0x47800000u);                \
    return o | s >> 16;                                                      \
}
/* N = 16 as two 8-halves, by macro: on a CPU without AVX-512 (PoCL under
 * valgrind, say) a float16 argument or return value changes the ABI, and
 * the compiler warns at every call. */
#define cg_f16_float16(h)                                                    \
    ((float16)(cg_f16_float8((h).lo), cg_f16_float8((h).hi)))
#define cg_f16_bits16(v) ((uint16)(cg_f16_bits8((v).lo), cg_f16_bits8((v).hi)))
#define CG_F16_LD(p, i) cg_f16_float(((__global const ushort *)(p))[i])
#define CG_F16_ST(p, i, v)                                                   \
    (((__global ushort *)(p))[i] = (ushort)cg_f16_bits((float)(v)))
/* Vectors: the integer form (CG_F16_VLOAD0), or, in a file that defines
 * CG_F16_HWV 1 after this one, vload_halfN / vstore_halfN_rte
 * (CG_F16_VLOAD1).  The integer form vectorises across work-items;
 * kernels that already work on explicit vectors in register tiles
 * (rnn.cl's recurrent weights, gemm.cl's tiles) ran slower with it on
 * PoCL (the fused LSTM kernels, untuned, 1.3-1.7x) than with the
 * conversion instructions, so those files choose the builtins.  PoCL's
 * builtins access global memory as one N-vector aligned to its size (a
 * vmovdqa that faults on the odd element offsets a narrowed row starts
 * at), where OpenCL asks only element alignment: the words move with the
 * ushortN vloadN / vstoreN and the conversion runs on a private copy. */
#define CG_F16_VLOAD0(N, i, p)                                               \
    cg_f16_float##N(convert_uint##N(vload##N(i, (__global const ushort *)(p))))
#define CG_F16_VSTORE0(N, v, i, p)                                           \
    vstore##N(convert_ushort##N(cg_f16_bits##N(v)), i, (__global ushort *)(p))
#define CG_F16_VLOAD1(N, i, p) cg_vload_half##N(i, p)
#define CG_F16_VSTORE1(N, v, i, p) cg_vstore_half##N(v, i, p)
#define CG_F16_HWV 0
#define CG_F16_VLOAD(N, i, p) CG_F16_PICK_(CG_F16_VLOAD, CG_F16_HWV)(N, i, p)
#define CG_F16_VSTORE(N, v, i, p)                                            \
    CG_F16_PICK_(CG_F16_VSTORE, CG_F16_HWV)(N, v, i, p)
#define CG_F16_PICK_(f, h) CG_F16_PICK__(f, h)
#define CG_F16_PICK__(f, h) f##h
#define CG_VHALF_(N)                                                         \
static inline float##N                                                       \
cg_vload_half##N(size_t i, __global const half *p)                           \
{                                                                            \
    ushort##N u = vload##N(i, (__global const ushort *)p);                   \
                                                                             \
    return vload_half##N(0, (const half *)&u);                               \
}                                                                            \
static inline void                                                           \
cg_vstore_half##N(float##N v, size_t i, __global half *p)                    \
{                                                                            \
    ushort##N u;                                                             \
                                                                             \
    vstore_half##N##_rte(v, 0, (half *)&u);                                  \
    vstore##N(u, i, (__global ushort *)p);                                   \
}
#define cg_vload_half16(i, p)                                                \
    ((float16)(cg_vload_half8(2 * (i), p), cg_vload_half8(2 * (i) + 1, p)))
#define cg_vstore_half16(v, i, p)                                            \
    (cg_vstore_half8((v).lo, 2 * (i), p),                                    \
     cg_vstore_half8((v).hi, 2 * (i) + 1, p))
#if CG_T == 1 || CG_TO == 1
#define CG_F16_FNS 1
CG_F16_FNS_()
CG_F16_FNS_(2)
CG_F16_FNS_(4)
CG_F16_FNS_(8)
CG_VHALF_(2)
CG_VHALF_(4)
CG_VHALF_(8)
#endif

#if CG_T == 0
typedef float cg_t;
#define CG_LD(p, i) ((p)[i])
#define CG_ST(p, i, v) ((p)[i] = (v))
#define CG_VLOAD(N, i, p) vload##N(i, p)
#define CG_VSTORE(N, v, i, p) vstore##N(v, i, p)
#elif CG_T == 1
typedef half cg_t;
#define CG_LD(p, i) CG_F16_LD(p, i)
#define CG_ST(p, i, v) CG_F16_ST(p, i, v)
#define CG_VLOAD(N, i, p) CG_F16_VLOAD(N, i, p)
#define CG_VSTORE(N, v, i, p) CG_F16_VSTORE(N, v, i, p)
#elif CG_T == 2
typedef ushort cg_t;
#define CG_LD(p, i) as_float((uint)(p)[i] << 16)
#define CG_ST(p, i, v) ((p)[i] = CG_BF16_BITS(, (float)(v)))
#define CG_VLOAD(N, i, p) as_float##N(convert_uint##N(vload##N(i, p)) << 16)
#define CG_VSTORE(N, v, i, p) vstore##N(CG_BF16_BITS(N, v), i, p)
#else
#error "CG_T must be 0 (float32), 1 (float16) or 2 (bfloat16)"
#endif

/* Activations, for scalars and float vectors alike: the elementwise ops'
 * forward (elementwise_ops.def) and the GEMM epilogues (gemm.cl,
 * gemm_pack.cl) share this text, so a fused activation rounds as the
 * separate op.  CG_ACT(v, act) applies activation number act (CG_ACT_*,
 * lib/ops/internal.h's cg__act; 0 none) to the lvalue v in place. */
#define CG_RELU(x) ((x) > 0.0f ? (x) : 0.0f)
#define CG_TANH(x) tanh(x)
#define CG_SIGMOID(x) (1.0f / (1.0f + exp(-(x))))
#define CG_ACT_RELU 1
#define CG_ACT_TANH 2
#define CG_ACT_SIGMOID 3
#define CG_ACT(v, act)                                                       \
    do {                                                                     \
        if ((act) == CG_ACT_RELU)                                            \
            (v) = CG_RELU(v);                                                \
        else if ((act) == CG_ACT_TANH)                                       \
            (v) = CG_TANH(v);                                                \
        else if ((act) == CG_ACT_SIGMOID)                                    \
            (v) = CG_SIGMOID(v);                                             \
    } while (0)
/* CG_ACT on a floatN lvalue v, N 4, 8 or 16 (CG_ACT_V##N): a float16
 * as its two halves, since tanh and exp of a float16 are built-in calls
 * whose 16-wide argument changes the ABI (and warns) on a CPU without
 * AVX-512. */
#define CG_ACT_V4(v, act) CG_ACT(v, act)
#define CG_ACT_V8(v, act) CG_ACT(v, act)
#define CG_ACT_V16(v, act)                                                   \
    do {                                                                     \
        CG_ACT((v).lo, act);                                                 \
        CG_ACT((v).hi, act);                                                 \
    } while (0)

/* Combines buf[0 .. wg - 1] into buf[0] with COMBINE(a, b), each work-item
 * having stored its own buf[lid]; every work-item of the group must reach
 * it.  The tree behind cg_wg_sum and cg_wg_max, for other combinations. */
#define CG_WG_TREE(buf, lid, wg, COMBINE)                                    \
    do {                                                                     \
        uint cg_s_;                                                          \
                                                                             \
        barrier(CLK_LOCAL_MEM_FENCE);                                        \
        for (cg_s_ = (wg) / 2; cg_s_ > 0; cg_s_ >>= 1) {                     \
            if ((lid) < cg_s_)                                               \
                (buf)[lid] = COMBINE((buf)[lid], (buf)[(lid) + cg_s_]);      \
            barrier(CLK_LOCAL_MEM_FENCE);                                    \
        }                                                                    \
    } while (0)

#define CG_ADD_(a, b) ((a) + (b))

/* The sum of v over the work-group (wg work-items, buf wg floats of local
 * memory); every work-item must call it and gets the sum.  buf may be
 * reused as soon as it returns. */
static inline float
cg_wg_sum(__local float *buf, float v, uint wg)
{
    uint lid = get_local_id(0);

    barrier(CLK_LOCAL_MEM_FENCE);   /* buf may hold the last result */
    buf[lid] = v;
    CG_WG_TREE(buf, lid, wg, CG_ADD_);
    return buf[0];
}

/* The same for the maximum, with fmax: a NaN is ignored (callers that
 * must propagate it combine with CG_WG_TREE). */
static inline float
cg_wg_max(__local float *buf, float v, uint wg)
{
    uint lid = get_local_id(0);

    barrier(CLK_LOCAL_MEM_FENCE);
    buf[lid] = v;
    CG_WG_TREE(buf, lid, wg, fmax);
    return buf[0];
}

static inline int
cg_off(uint i, int8 shape8, int8 st8, int nd)
{
    int sh[8], st[8];
    int r = (int)i, o = 0, d;

    vstore8(shape8, 0, sh);
    vstore8(st8, 0, st);
    for (d = nd - 1; d > 0; d--) {
        int c = r % sh[d];

        r /= sh[d];
        o += c * st[d];
    }
    return o + r * st[0];
}

static inline int2
cg_off2(uint i, int8 shape8, int8 sa8, int8 sb8, int nd)
{
    int sh[8], sa[8], sb[8];
    int r = (int)i, d;
    int2 o = (int2)(0, 0);

    vstore8(shape8, 0, sh);
    vstore8(sa8, 0, sa);
    vstore8(sb8, 0, sb);
    for (d = nd - 1; d > 0; d--) {
        int c = r % sh[d];

        r /= sh[d];
        o += (int2)(c * sa[d], c * sb[d]);
    }
    return o + (int2)(r * sa[0], r * sb[0]);
}

static inline int3
cg_off3(uint i, int8 shape8, int8 sa8, int8 sb8, int8 sc8, int nd)
{
    int sh[8], sa[8], sb[8], sc[8];
    int r = (int)i, d;
    int3 o = (int3)(0, 0, 0);

    vstore8(shape8, 0, sh);
    vstore8(sa8, 0, sa);
    vstore8(sb8, 0, sb);
    vstore8(sc8, 0, sc);
    for (d = nd - 1; d > 0; d--) {
        int c = r % sh[d];

        r /= sh[d];
        o += (int3)(c * sa[d], c * sb[d], c * sc[d]);
    }
    return o + (int3)(r * sa[0], r * sb[0], r * sc[0]);
}
