/*
 * kernels/elementwise.cl - elementwise forward and backward kernels.
 *
 * Index space: one work-item per element of the (contiguous) output,
 * n of them, padded to the work-group size; operands are read through the
 * strided layout of common.cl, so views and broadcasts need no copies.
 *
 * Unary op NAME:   NAME_f:  y[i] = F(x)                (p0, p1: parameters)
 *                  NAME_b:  gx[i] = G(x, y, g)         (gx over x's shape)
 * Binary op NAME:  NAME_f:  y[i] = F(a, b)             (broadcasting)
 *                  NAME_b:  ga[i], gb[i] over the output's shape (the host
 *                           sums over broadcast dimensions); `want` bit 0
 *                           asks for ga, bit 1 for gb.
 * No tunable parameters here: the work-group size is the host's.
 */

#define UNARY(NAME, FWD, BWD)                                                \
__kernel void NAME##_f(__global const float *x, int xo, int8 shape,         \
                       int8 sx, int nd, __global float *yv, uint n,         \
                       float p0, float p1)                                  \
{                                                                            \
    uint i = get_global_id(0);                                               \
    float x_;                                                                \
                                                                             \
    if (i >= n)                                                              \
        return;                                                              \
    x_ = x[xo + cg_off(i, shape, sx, nd)];                                   \
    yv[i] = (FWD);                                                           \
}                                                                            \
__kernel void NAME##_b(__global const float *x, int xo, int8 shape,         \
                       int8 sx, int nd, __global const float *yv,           \
                       __global const float *g, __global float *gx, uint n, \
                       float p0, float p1)                                  \
{                                                                            \
    uint i = get_global_id(0);                                               \
    float x_, y_, g_;                                                        \
                                                                             \
    if (i >= n)                                                              \
        return;                                                              \
    x_ = x[xo + cg_off(i, shape, sx, nd)];                                   \
    y_ = yv[i];                                                              \
    g_ = g[i];                                                               \
    gx[i] = (BWD);                                                           \
}

#define CG_1_SQRT2PI 0.39894228040143268f  /* 1 / sqrt(2 pi) */

/* y = p0 * x + p1: scalar add and multiply, negation, copies. */
UNARY(affine, p0 * x_ + p1, g_ * p0)
UNARY(pow_scalar, pow(x_, p0), p0 == 0.0f ? 0.0f : g_ * p0 * pow(x_, p0 - 1.0f))
UNARY(exp, exp(x_), g_ * y_)
UNARY(log, log(x_), g_ / x_)
UNARY(sqrt, sqrt(x_), g_ * 0.5f / y_)
UNARY(abs, fabs(x_), x_ > 0.0f ? g_ : (x_ < 0.0f ? -g_ : 0.0f))
UNARY(clamp, fmin(fmax(x_, p0), p1), (x_ >= p0 && x_ <= p1) ? g_ : 0.0f)
UNARY(tanh, tanh(x_), g_ * (1.0f - y_ * y_))
UNARY(sigmoid, 1.0f / (1.0f + exp(-x_)), g_ * y_ * (1.0f - y_))
UNARY(relu, x_ > 0.0f ? x_ : 0.0f, x_ > 0.0f ? g_ : 0.0f)
UNARY(leaky_relu, x_ > 0.0f ? x_ : p0 * x_, x_ > 0.0f ? g_ : p0 * g_)
UNARY(gelu, 0.5f * x_ * (1.0f + erf(x_ * M_SQRT1_2_F)),
      g_ * (0.5f * (1.0f + erf(x_ * M_SQRT1_2_F)) +
            x_ * CG_1_SQRT2PI * exp(-0.5f * x_ * x_)))

#define BINARY(NAME, FWD, GA, GB)                                            \
__kernel void NAME##_f(__global const float *a, int ao,                     \
                       __global const float *b, int bo, int8 shape,         \
                       int8 sa, int8 sb, int nd, __global float *yv,        \
                       uint n)                                               \
{                                                                            \
    uint i = get_global_id(0);                                               \
    int2 o;                                                                  \
    float a_, b_;                                                            \
                                                                             \
    if (i >= n)                                                              \
        return;                                                              \
    o = cg_off2(i, shape, sa, sb, nd);                                       \
    a_ = a[ao + o.x];                                                        \
    b_ = b[bo + o.y];                                                        \
    yv[i] = (FWD);                                                           \
}                                                                            \
__kernel void NAME##_b(__global const float *a, int ao,                     \
                       __global const float *b, int bo, int8 shape,         \
                       int8 sa, int8 sb, int nd, __global const float *yv,  \
                       __global const float *g, __global float *ga,         \
                       __global float *gb, uint n, int want)                \
{                                                                            \
    uint i = get_global_id(0);                                               \
    int2 o;                                                                  \
    float a_, b_, y_, g_;                                                    \
                                                                             \
    if (i >= n)                                                              \
        return;                                                              \
    o = cg_off2(i, shape, sa, sb, nd);                                       \
    a_ = a[ao + o.x];                                                        \
    b_ = b[bo + o.y];                                                        \
    y_ = yv[i];                                                              \
    g_ = g[i];                                                               \
    if (want & 1)                                                            \
        ga[i] = (GA);                                                        \
    if (want & 2)                                                            \
        gb[i] = (GB);                                                        \
}

BINARY(add, a_ + b_, g_, g_)
BINARY(sub, a_ - b_, g_, -g_)
BINARY(mul, a_ * b_, g_ * b_, g_ * a_)
BINARY(div, a_ / b_, g_ / b_, -g_ * a_ / (b_ * b_))
/* As PyTorch: no gradient to the exponent where the base is 0 and the
 * exponent non-negative (0^b is flat there). */
BINARY(pow, pow(a_, b_),
       b_ == 0.0f ? 0.0f : g_ * b_ * pow(a_, b_ - 1.0f),
       (a_ == 0.0f && b_ >= 0.0f) ? 0.0f : g_ * y_ * log(a_))
/* Ties split the gradient evenly, as PyTorch does. */
BINARY(maximum, fmax(a_, b_),
       a_ > b_ ? g_ : (a_ == b_ ? 0.5f * g_ : 0.0f),
       b_ > a_ ? g_ : (a_ == b_ ? 0.5f * g_ : 0.0f))
BINARY(minimum, fmin(a_, b_),
       a_ < b_ ? g_ : (a_ == b_ ? 0.5f * g_ : 0.0f),
       b_ < a_ ? g_ : (a_ == b_ ? 0.5f * g_ : 0.0f))

/* where: y = cond ? a : b, for a float32 (_f) or int32 (_i) condition. */
#define WHERE(SUFFIX, CTYPE)                                                 \
__kernel void where##SUFFIX(__global const CTYPE *c, int co,                \
                            __global const float *a, int ao,                \
                            __global const float *b, int bo, int8 shape,    \
                            int8 sc, int8 sa, int8 sb, int nd,              \
                            __global float *yv, uint n)                     \
{                                                                            \
    uint i = get_global_id(0);                                               \
    int3 o;                                                                  \
                                                                             \
    if (i >= n)                                                              \
        return;                                                              \
    o = cg_off3(i, shape, sc, sa, sb, nd);                                   \
    yv[i] = c[co + o.x] != 0 ? a[ao + o.y] : b[bo + o.z];                    \
}                                                                            \
__kernel void where##SUFFIX##_b(__global const CTYPE *c, int co,            \
                                int8 shape, int8 sc, int nd,                \
                                __global const float *g,                    \
                                __global float *ga, __global float *gb,     \
                                uint n, int want)                           \
{                                                                            \
    uint i = get_global_id(0);                                               \
    int t;                                                                   \
                                                                             \
    if (i >= n)                                                              \
        return;                                                              \
    t = c[co + cg_off(i, shape, sc, nd)] != 0;                               \
    if (want & 1)                                                            \
        ga[i] = t ? g[i] : 0.0f;                                             \
    if (want & 2)                                                            \
        gb[i] = t ? 0.0f : g[i];                                             \
}

WHERE(_f, float)
WHERE(_i, int)

/* dst[dst layout] = src[src layout]: 32-bit words, so float32 and int32
 * alike.  Both operands strided over the same iteration space. */
__kernel void
copy32(__global const uint *src, int so, __global uint *dst, int dso,
       int8 shape, int8 ss, int8 sd, int nd, uint n)
{
    uint i = get_global_id(0);
    int2 o;

    if (i >= n)
        return;
    o = cg_off2(i, shape, ss, sd, nd);
    dst[dso + o.y] = src[so + o.x];
}

/* acc[i] += alpha * g[g layout]; acc contiguous. */
__kernel void
axpy(__global float *acc, __global const float *g, int go, int8 shape,
     int8 sg, int nd, uint n, float alpha)
{
    uint i = get_global_id(0);

    if (i >= n)
        return;
    acc[i] += alpha * g[go + cg_off(i, shape, sg, nd)];
}

/* y[i] = start + i * step. */
__kernel void
arange(__global float *y, uint n, float start, float step)
{
    uint i = get_global_id(0);

    if (i >= n)
        return;
    y[i] = start + (float)i * step;
}
