/* SPDX-License-Identifier: MIT */
/*
 * lib/tensor/tensor.c - tensor headers, storage, writes from the host,
 * shape queries.  Reads to the host are in lib/ops/create.c, as a strided
 * tensor needs the copy kernel first.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/internal.h"

size_t
cg__dtype_size(cg_dtype dtype)
{
    switch (dtype) {
    case CG_F16:
    case CG_BF16:
        return 2;
    case CG_I64:
        return 8;
    default:
        return 4;
    }
}

const char *
cg__dtype_name(cg_dtype dtype)
{
    switch (dtype) {
    case CG_F32:
        return "float32";
    case CG_I32:
        return "int32";
    case CG_I64:
        return "int64";
    case CG_F16:
        return "float16";
    case CG_BF16:
        return "bfloat16";
    }
    return "an unknown dtype";
}

int64_t
cg__numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    int i;

    /* Saturates: a product past INT64_MAX (a custom op's shape rule can
     * return any sizes) must not wrap around to a small count that would
     * pass the callers' "> INT32_MAX" checks. */
    for (i = 0; i < ndim; i++)
        if (cg__mul_i64(n, shape[i], &n))
            return INT64_MAX;
    return n;
}

void
cg__contiguous_strides(int ndim, const int64_t *shape, int64_t *strides)
{
    int64_t s = 1;
    int i;

    for (i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= shape[i];
    }
}

const char *
cg__shape_str(int ndim, const int64_t *shape, char *buf, size_t size)
{
    size_t n = 0;
    int i;

    n += (size_t)snprintf(buf, size, "[");
    for (i = 0; i < ndim && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%lld", i ? ", " : "",
                              (long long)shape[i]);
    if (n < size)
        snprintf(buf + n, size - n, "]");
    return buf;
}

int
cg__dim(int dim, int ndim)
{
    if (dim < 0)
        dim += ndim;
    return dim >= 0 && dim < ndim ? dim : -1;
}

int
cg__check_tensor(const cg_tensor *t, const char *name, int any_dtype)
{
    if (!t)
        return cg__error(CG_EINVAL, "%s is NULL", name);
    if (any_dtype == CG__ANY_DTYPE)
        return CG_OK;
    if (any_dtype == CG__FLOAT_DTYPE) {
        if (CG__IS_FLOAT(t->dtype))
            return CG_OK;
        return cg__error(CG_EDTYPE, "%s must be float32, float16 or "
                         "bfloat16, not %s", name, cg__dtype_name(t->dtype));
    }
    if (t->dtype != CG_F32 && (!any_dtype || t->dtype != CG_I32))
        return cg__error(CG_EDTYPE, "%s must be float32%s, not %s", name,
                         any_dtype ? " or int32" : "",
                         cg__dtype_name(t->dtype));
    return CG_OK;
}

int
cg__check_same_dtype(const cg_tensor *a, const char *aname,
                     const cg_tensor *b, const char *bname)
{
    if (a->dtype == b->dtype)
        return CG_OK;
    return cg__error(CG_EDTYPE, "%s is %s but %s is %s: they must have one "
                     "dtype", bname, cg__dtype_name(b->dtype), aname,
                     cg__dtype_name(a->dtype));
}

static int
check_shape(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    int i;

    if (ndim < 0 || ndim > CG_MAX_DIMS)
        return cg__error(CG_ESHAPE, "%d dimensions (at most %d)", ndim,
                         CG_MAX_DIMS);
    if (ndim > 0 && !shape)
        return cg__error(CG_EINVAL, "shape is NULL");
    for (i = 0; i < ndim; i++)
        if (shape[i] < 1)
            return cg__error(CG_ESHAPE, "dimension %d has size %lld (must be "
                             ">= 1)", i, (long long)shape[i]);
    /* The product is checked at every step: {9, 6148914691236517206}
     * would wrap around to 6. */
    for (i = 0; i < ndim; i++)
        if (cg__mul_i64(n, shape[i], &n) || n > INT32_MAX) {
            char s[CG_MAX_DIMS * 22 + 4];

            return cg__error(CG_ESHAPE, "shape %s has more than 2^31-1 "
                             "elements", cg__shape_str(ndim, shape, s,
                                                       sizeof s));
        }
    return CG_OK;
}

cg_tensor *
cg__tensor_empty(cg_context *ctx, cg_dtype dtype, int ndim,
                 const int64_t *shape)
{
    cg_tensor *t;
    size_t bytes;

    if (check_shape(ndim, shape))
        return NULL;
    /* Fits size_t on a 64-bit host; checked for 32-bit ones.  The
     * device's largest allocation is checked by cg_buffer_new. */
    if (cg__checked_mul_size((size_t)cg__numel(ndim, shape),
                             cg__dtype_size(dtype), &bytes,
                             "tensor size in bytes"))
        return NULL;
    t = cg__calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->storage = cg__calloc(1, sizeof *t->storage);
    if (!t->storage) {
        free(t);
        return NULL;
    }
    t->storage->buf = cg__buffer_new(ctx, bytes);
    if (!t->storage->buf) {
        free(t->storage);
        free(t);
        return NULL;
    }
    t->storage->refs = 1;
    t->refs = 1;
    t->ctx = ctx;
    t->dtype = dtype;
    t->ndim = ndim;
    if (ndim > 0)
        memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    cg__contiguous_strides(ndim, t->shape, t->strides);
    return t;
}

cg_tensor *
cg__tensor_view(const cg_tensor *src, int ndim, const int64_t *shape,
                const int64_t *strides, int64_t offset)
{
    cg_tensor *t = cg__calloc(1, sizeof *t);

    if (!t)
        return NULL;
    t->refs = 1;
    t->ctx = src->ctx;
    t->storage = src->storage;
    t->storage->refs++;
    t->dtype = src->dtype;
    t->ndim = ndim;
    if (ndim > 0) {
        memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
        memcpy(t->strides, strides, (size_t)ndim * sizeof *strides);
    }
    t->offset = offset;
    return t;
}

cg_tensor *
cg_tensor_new(cg_context *ctx, cg_dtype dtype, int ndim, const int64_t *shape)
{
    cg__error_clear();
    if (!ctx) {
        cg__error(CG_EINVAL, "ctx is NULL");
        return NULL;
    }
    if (dtype != CG_F32 && dtype != CG_I32 && dtype != CG_F16 &&
        dtype != CG_BF16) {
        cg__error(CG_EDTYPE, "dtype %d is not a tensor dtype (float32, "
                  "int32, float16, bfloat16)", (int)dtype);
        return NULL;
    }
    return cg__tensor_empty(ctx, dtype, ndim, shape);
}

cg_tensor *
cg_tensor_from_host(cg_context *ctx, cg_dtype dtype, int ndim,
                    const int64_t *shape, const void *data)
{
    cg_tensor *t;

    cg__error_clear();
    if (!data) {
        cg__error(CG_EINVAL, "data is NULL");
        return NULL;
    }
    t = cg_tensor_new(ctx, dtype, ndim, shape);
    if (t && cg_buffer_write(t->storage->buf, 0, data,
                             (size_t)cg__numel(ndim, shape) *
                             cg__dtype_size(dtype)) != CG_OK) {
        cg_tensor_free(t);
        return NULL;
    }
    return t;
}

cg_tensor *
cg_tensor_ref(cg_tensor *t)
{
    if (t)
        t->refs++;
    return t;
}

void
cg_tensor_free(cg_tensor *t)
{
    if (!t || --t->refs > 0)
        return;
    if (t->fw_drop)
        t->fw_drop(t);
    if (--t->storage->refs == 0) {
        cg_buffer_free(t->storage->buf);
        free(t->storage);
    }
    if (t->grad_fn)
        t->grad_fn_unref(t->grad_fn);
    cg_tensor_free(t->grad);
    free(t);
}

cg_context *
cg_tensor_context(const cg_tensor *t)
{
    return t ? t->ctx : NULL;
}

cg_dtype
cg_tensor_dtype(const cg_tensor *t)
{
    return t ? t->dtype : CG_F32;
}

int
cg_tensor_ndim(const cg_tensor *t)
{
    return t ? t->ndim : -1;
}

int64_t
cg_tensor_dim(const cg_tensor *t, int dim)
{
    int d;

    if (!t || (d = cg__dim(dim, t->ndim)) < 0)
        return -1;
    return t->shape[d];
}

int
cg_tensor_shape(const cg_tensor *t, int64_t *shape)
{
    cg__error_clear();
    if (!t || !shape)
        return cg__error(CG_EINVAL, "%s is NULL", t ? "shape" : "t");
    if (t->ndim > 0)
        memcpy(shape, t->shape, (size_t)t->ndim * sizeof *shape);
    return CG_OK;
}

int64_t
cg_tensor_numel(const cg_tensor *t)
{
    return t ? cg__numel(t->ndim, t->shape) : 0;
}

int
cg_tensor_is_contiguous(const cg_tensor *t)
{
    int64_t s = 1;
    int i;

    if (!t)
        return 0;
    for (i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->strides[i] != s)
            return 0;
        s *= t->shape[i];
    }
    return 1;
}

int
cg_tensor_write(cg_tensor *t, const void *src, size_t bytes)
{
    size_t need;

    cg__error_clear();
    if (!t || !src)
        return cg__error(CG_EINVAL, "%s is NULL", t ? "src" : "t");
    if (!cg_tensor_is_contiguous(t))
        return cg__error(CG_EINVAL, "cg_tensor_write needs a contiguous "
                         "tensor");
    need = (size_t)cg_tensor_numel(t) * cg__dtype_size(t->dtype);
    if (bytes != need)
        return cg__error(CG_EINVAL, "the tensor holds %zu bytes, not %zu",
                         need, bytes);
    return cg_buffer_write(t->storage->buf,
                           (size_t)t->offset * cg__dtype_size(t->dtype), src,
                           bytes);
}
