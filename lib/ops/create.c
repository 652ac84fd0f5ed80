/* SPDX-License-Identifier: MIT */
/*
 * lib/ops/create.c - filling, copying and random tensors, reading tensors
 * back to the host; the copy and accumulate primitives the autograd engine
 * uses.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/internal.h"

/* The float16 bits of v rounded to nearest even, as kernels/cast.cl's
 * cast_f32_f16 (a NaN is 0x7E00 with v's sign). */
static uint16_t
f16_bits(float v)
{
    uint32_t b, a, sign, r, rem, half, shift, m;

    memcpy(&b, &v, sizeof b);
    sign = (b >> 16) & 0x8000u;
    a = b & 0x7FFFFFFFu;
    if (a > 0x7F800000u)
        return (uint16_t)(sign | 0x7E00u);
    if (a >= 0x477FF000u)               /* 65520 and up round to inf */
        return (uint16_t)(sign | 0x7C00u);
    if (a <= 0x33000000u)               /* 2^-25 and below round to 0 */
        return (uint16_t)sign;
    if (a < 0x38800000u) {              /* below 2^-14: a subnormal */
        m = (a & 0x7FFFFFu) | 0x800000u;
        shift = 126 - (a >> 23);
        r = m >> shift;
        rem = m & ((1u << shift) - 1);
        half = 1u << (shift - 1);
    } else {
        r = (a - (112u << 23)) >> 13;
        rem = a & 0x1FFFu;
        half = 0x1000u;
    }
    if (rem > half || (rem == half && (r & 1)))
        r++;
    return (uint16_t)(sign | r);
}

/* The bfloat16 bits of v, as cast_f32_bf16 (a NaN is 0x7FC0). */
static uint16_t
bf16_bits(float v)
{
    uint32_t b;

    memcpy(&b, &v, sizeof b);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u)
        return 0x7FC0;
    return (uint16_t)((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}

int
cg__fill(cg_tensor *t, float value)
{
    int status = CG_OK;
    size_t n = (size_t)cg_tensor_numel(t), es = cg__dtype_size(t->dtype);
    uint16_t h = t->dtype == CG_F16 ? f16_bits(value) : bf16_bits(value);
    const void *pattern = es == 2 ? (const void *)&h : (const void *)&value;

    CG__CHECK_CL(cg__fault(CG__FAULT_LAUNCH) ? CL_OUT_OF_RESOURCES
                 : clEnqueueFillBuffer(t->ctx->queue, cg__tensor_mem(t),
                                       pattern, es, (size_t)t->offset * es,
                                       n * es, 0, NULL, NULL),
                 "clEnqueueFillBuffer");
fail:
    return status;
}

/* The row copy (copyBITSv): elements of a row per work-item, a multiple
 * of its vector width, and as many rows of shorter rows as make about
 * that many elements. */
#define COPY_CHUNK 64

int
cg__copy_into(cg_tensor *dst, const cg_tensor *src)
{
    const cg_tensor *ops[2] = { src, dst };
    cg__layout l;
    cl_kernel k;
    cl_mem ms = cg__tensor_mem(src), md = cg__tensor_mem(dst);
    cl_uint n, len, nrows, rows, ch = COPY_CHUNK;
    int wide = cg__dtype_size(dst->dtype) == 4, status;

    cg__layout_make(&l, dst->ndim, dst->shape, 2, ops);
    n = (cl_uint)l.numel;
    if (n == 0)
        return CG_OK;
    if (l.nd == 0) {            /* one element: a row of one */
        l.nd = 1;
        l.shape.s[0] = 1;
        l.strides[0].s[0] = l.strides[1].s[0] = 1;
    }
    len = (cl_uint)l.shape.s[l.nd - 1];
    nrows = n / len;
    rows = len < ch ? ch / len : 1;
    status = cg__kernel(dst->ctx, wide ? CG__K_COPY32V : CG__K_COPY16V, &k);
    if (status == CG_OK)
        status = cg__args(k, CG__ARG(ms), CG__ARG(l.offset[0]), CG__ARG(md),
                          CG__ARG(l.offset[1]), CG__ARG(l.shape),
                          CG__ARG(l.strides[0]), CG__ARG(l.strides[1]),
                          CG__ARG(l.nd), CG__ARG(len), CG__ARG(ch),
                          CG__ARG(rows), CG__ARG(nrows));
    if (status == CG_OK)
        status = cg__launch_chunks(dst->ctx, k, len, (nrows + rows - 1) / rows,
                                   ch, CG__WG);
    return status;
}

cg_tensor *
cg__copy_contiguous(cg_tensor *t)
{
    cg_tensor *c = cg__tensor_empty(t->ctx, t->dtype, t->ndim, t->shape);

    if (c && cg__copy_into(c, t) != CG_OK) {
        cg_tensor_free(c);
        return NULL;
    }
    return c;
}

cg_tensor *
cg__dense(cg_tensor *t)
{
    if (cg_tensor_is_contiguous(t) && t->offset == 0)
        return cg_tensor_ref(t);
    return cg__copy_contiguous(t);
}

/* Reading a tensor back lives here, not in lib/tensor: a strided tensor is
 * first made contiguous on the device, by the copy kernel above. */
int
cg_tensor_to_host(const cg_tensor *t, void *dst, size_t bytes)
{
    cg_tensor *c;
    size_t need;
    int status;

    cg__error_clear();
    if (!t || !dst)
        return cg__error(CG_EINVAL, "%s is NULL", t ? "dst" : "t");
    need = (size_t)cg_tensor_numel(t) * cg__dtype_size(t->dtype);
    if (bytes != need)
        return cg__error(CG_EINVAL, "the tensor holds %zu bytes, not %zu",
                         need, bytes);
    if (cg_tensor_is_contiguous(t))
        return cg_buffer_read(t->storage->buf,
                              (size_t)t->offset * cg__dtype_size(t->dtype),
                              dst, bytes);
    c = cg__copy_contiguous((cg_tensor *)t);
    if (!c)
        return cg__last_status();
    status = cg_buffer_read(c->storage->buf, 0, dst, bytes);
    cg_tensor_free(c);
    return status;
}

/* A floating dtype (the message names `what` and the dtype otherwise). */
static int
check_float_dtype(cg_dtype dtype, const char *what)
{
    if (CG__IS_FLOAT(dtype))
        return CG_OK;
    return cg__error(CG_EDTYPE, "%s: dtype %s (needs float32, float16 or "
                     "bfloat16)", what, cg__dtype_name(dtype));
}

cg_tensor *
cg_tensor_from_host_f32(cg_context *ctx, cg_dtype dtype, int ndim,
                        const int64_t *shape, const float *data)
{
    cg_tensor *f, *t;

    cg__error_clear();
    if (check_float_dtype(dtype, "tensor_from_host_f32"))
        return NULL;
    f = cg_tensor_from_host(ctx, CG_F32, ndim, shape, data);
    if (!f || dtype == CG_F32)
        return f;
    t = cg__cast(f, dtype);
    cg_tensor_free(f);
    return t;
}

int
cg_tensor_to_host_f32(const cg_tensor *t, float *dst, size_t n)
{
    cg_tensor *f;
    int status;

    cg__error_clear();
    if (!t || !dst)
        return cg__error(CG_EINVAL, "%s is NULL", t ? "dst" : "t");
    if (check_float_dtype(t->dtype, "tensor_to_host_f32"))
        return CG_EDTYPE;
    if (n != (size_t)cg_tensor_numel(t))
        return cg__error(CG_EINVAL, "the tensor holds %lld elements, not %zu",
                         (long long)cg_tensor_numel(t), n);
    if (t->dtype == CG_F32)
        return cg_tensor_to_host(t, dst, n * sizeof *dst);
    f = cg__cast((cg_tensor *)t, CG_F32);
    if (!f)
        return cg__last_status();
    status = cg_tensor_to_host(f, dst, n * sizeof *dst);
    cg_tensor_free(f);
    return status;
}

int
cg_tensor_item(const cg_tensor *t, float *value)
{
    cg__error_clear();
    if (!t || !value)
        return cg__error(CG_EINVAL, "%s is NULL", t ? "value" : "t");
    if (t->dtype != CG_F32)
        return cg__error(CG_EDTYPE, "item of a %s tensor (needs float32)",
                         cg__dtype_name(t->dtype));
    if (cg_tensor_numel(t) != 1) {
        char s[128];

        return cg__error(CG_ESHAPE, "item of a tensor of shape %s (needs "
                         "one element)", cg__shape_str(t->ndim, t->shape, s,
                                                       sizeof s));
    }
    return cg_tensor_to_host(t, value, sizeof *value);
}

/* acc += alpha * g for 16-bit acc and g: in float32, rounded once. */
static int
axpy16(cg_tensor *acc, const cg_tensor *g, float alpha)
{
    cg_tensor *a32 = cg__cast(acc, CG_F32);
    cg_tensor *g32 = a32 ? cg__cast((cg_tensor *)g, CG_F32) : NULL;
    cg_tensor *r = NULL;
    int status = g32 ? cg__axpy_inplace(a32, g32, alpha)
                     : cg__last_status();

    if (status == CG_OK && !(r = cg__cast(a32, acc->dtype)))
        status = cg__last_status();
    if (status == CG_OK)
        status = cg__copy_into(acc, r);
    cg_tensor_free(r);
    cg_tensor_free(g32);
    cg_tensor_free(a32);
    return status;
}

int
cg__axpy_inplace(cg_tensor *acc, const cg_tensor *g, float alpha)
{
    cg__layout l;
    cl_kernel k;
    cl_mem ma = cg__tensor_mem(acc), mg = cg__tensor_mem(g);
    cl_uint n;
    int status;

    if (acc->dtype != CG_F32)
        return axpy16(acc, g, alpha);
    cg__layout_make(&l, acc->ndim, acc->shape, 1, &g);
    n = (cl_uint)l.numel;
    status = cg__kernel(acc->ctx, CG__K_AXPY, &k);
    if (status == CG_OK)
        status = cg__args(k, CG__ARG(ma), CG__ARG(mg), CG__ARG(l.offset[0]),
                          CG__ARG(l.shape), CG__ARG(l.strides[0]),
                          CG__ARG(l.nd), CG__ARG(n), CG__ARG(alpha));
    if (status == CG_OK)
        status = cg__launch1d(acc->ctx, k, n, CG__WG);
    return status;
}

cg_tensor *
cg_full_dtype(cg_context *ctx, cg_dtype dtype, int ndim,
              const int64_t *shape, float value)
{
    cg_tensor *t;

    cg__error_clear();
    if (check_float_dtype(dtype, "full_dtype"))
        return NULL;
    t = cg_tensor_new(ctx, dtype, ndim, shape);
    if (t && cg__fill(t, value) != CG_OK) {
        cg_tensor_free(t);
        return NULL;
    }
    return t;
}

cg_tensor *
cg_full(cg_context *ctx, int ndim, const int64_t *shape, float value)
{
    return cg_full_dtype(ctx, CG_F32, ndim, shape, value);
}

cg_tensor *
cg_zeros(cg_context *ctx, int ndim, const int64_t *shape)
{
    return cg_full(ctx, ndim, shape, 0.0f);
}

cg_tensor *
cg_ones(cg_context *ctx, int ndim, const int64_t *shape)
{
    return cg_full(ctx, ndim, shape, 1.0f);
}

cg_tensor *
cg_arange(cg_context *ctx, double start, double stop, double step)
{
    cg_tensor *t;
    cl_kernel k;
    cl_mem m;
    cl_uint n;
    cl_float fstart = (cl_float)start, fstep = (cl_float)step;
    double count;
    int64_t len;

    cg__error_clear();
    if (!ctx) {
        cg__error(CG_EINVAL, "ctx is NULL");
        return NULL;
    }
    if (step == 0 || !isfinite(start) || !isfinite(stop) || !isfinite(step)) {
        cg__error(CG_EINVAL, "arange(%g, %g, %g): step must be nonzero and "
                  "all finite", start, stop, step);
        return NULL;
    }
    /* In double first: the count can be infinite (arange(-1e308, 1e308,
     * 1)) or beyond int64, where the conversion has no value. */
    count = ceil((stop - start) / step);
    if (!(count >= 1)) {
        cg__error(CG_ESHAPE, "arange(%g, %g, %g) is empty", start, stop,
                  step);
        return NULL;
    }
    if (count > INT32_MAX) {
        cg__error(CG_ESHAPE, "arange(%g, %g, %g) has %g elements, more "
                  "than 2^31-1", start, stop, step, count);
        return NULL;
    }
    len = (int64_t)count;
    t = cg__tensor_empty(ctx, CG_F32, 1, &len);
    if (!t)
        return NULL;
    m = cg__tensor_mem(t);
    n = (cl_uint)len;
    if (cg__kernel(ctx, CG__K_ARANGE, &k) ||
        cg__args(k, CG__ARG(m), CG__ARG(n), CG__ARG(fstart), CG__ARG(fstep)) ||
        cg__launch1d(ctx, k, n, CG__WG)) {
        cg_tensor_free(t);
        return NULL;
    }
    return t;
}

/* ------------------------------------------------------------------------
 * Random numbers
 * ------------------------------------------------------------------------ */

int
cg__rng_attach(cg_context *ctx)
{
    ctx->rng = cg__calloc(1, sizeof *ctx->rng);
    return ctx->rng ? CG_OK : CG_EHOSTMEM;
}

void
cg__rng_detach(cg_context *ctx)
{
    free(ctx->rng);
    ctx->rng = NULL;
}

int
cg_manual_seed(cg_context *ctx, uint64_t seed)
{
    return cg_generator_set_state(ctx, seed, 0);
}

int
cg_generator_state(const cg_context *ctx, uint64_t *seed, uint64_t *offset)
{
    cg__error_clear();
    if (!ctx || !seed || !offset)
        return cg__error(CG_EINVAL, "NULL argument");
    *seed = ctx->rng->seed;
    *offset = ctx->rng->offset;
    return CG_OK;
}

int
cg_generator_set_state(cg_context *ctx, uint64_t seed, uint64_t offset)
{
    cg__error_clear();
    if (!ctx)
        return cg__error(CG_EINVAL, "ctx is NULL");
    ctx->rng->seed = seed;
    ctx->rng->offset = offset;
    return CG_OK;
}

/* Draws numel values with kernel kid of random.cl into a new tensor;
 * a, b are the kernel's two float parameters. */
cg_tensor *
cg__random(cg_context *ctx, cg__kid kid, int ndim,
           const int64_t *shape, float a, float b)
{
    cg_tensor *t;
    cl_kernel k;
    cl_mem m;
    cl_uint n;
    cl_ulong seed, offset;

    t = cg__tensor_empty(ctx, CG_F32, ndim, shape);
    if (!t)
        return NULL;
    m = cg__tensor_mem(t);
    n = (cl_uint)cg_tensor_numel(t);
    seed = ctx->rng->seed;
    offset = ctx->rng->offset;
    if (cg__kernel(ctx, kid, &k) ||
        cg__args(k, CG__ARG(m), CG__ARG(n), CG__ARG(seed), CG__ARG(offset),
                 CG__ARG(a), CG__ARG(b)) ||
        cg__launch1d(ctx, k, (n + 3) / 4, CG__WG)) {
        cg_tensor_free(t);
        return NULL;
    }
    ctx->rng->offset += (n + 3) / 4;
    return t;
}

cg_tensor *
cg_rand_uniform(cg_context *ctx, int ndim, const int64_t *shape, float low,
                float high)
{
    cg__error_clear();
    if (!ctx) {
        cg__error(CG_EINVAL, "ctx is NULL");
        return NULL;
    }
    if (!(low <= high)) {
        cg__error(CG_EINVAL, "rand_uniform: low %g > high %g", low, high);
        return NULL;
    }
    return cg__random(ctx, CG__K_UNIFORM, ndim, shape, low, high);
}

cg_tensor *
cg_rand_normal(cg_context *ctx, int ndim, const int64_t *shape, float mean,
               float std)
{
    cg__error_clear();
    if (!ctx) {
        cg__error(CG_EINVAL, "ctx is NULL");
        return NULL;
    }
    if (!(std >= 0)) {
        cg__error(CG_EINVAL, "rand_normal: std %g < 0", std);
        return NULL;
    }
    return cg__random(ctx, CG__K_NORMAL, ndim, shape, mean, std);
}
