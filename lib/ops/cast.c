/* SPDX-License-Identifier: MIT */
/*
 * lib/ops/cast.c - cg_to_dtype: float32 to and from the 16-bit storage
 * dtypes (kernels/cast.cl).  The backward casts the gradient back, so a
 * float32 input gets a float32 gradient and a 16-bit one a 16-bit one.
 */
#include "config.h"

#include "ops/internal.h"

/* The kernel from dtype `from` to dtype `to` (vec: its form for a
 * contiguous input, 8 elements a work-item), or -1 for a pair with none
 * (the same dtype included). */
static int
cast_kernel(cg_dtype from, cg_dtype to, int vec)
{
    if (from == CG_F32 && to == CG_F16)
        return vec ? CG__K_CAST_F32_F16V : CG__K_CAST_F32_F16;
    if (from == CG_F16 && to == CG_F32)
        return vec ? CG__K_CAST_F16_F32V : CG__K_CAST_F16_F32;
    if (from == CG_F32 && to == CG_BF16)
        return vec ? CG__K_CAST_F32_BF16V : CG__K_CAST_F32_BF16;
    if (from == CG_BF16 && to == CG_F32)
        return vec ? CG__K_CAST_BF16_F32V : CG__K_CAST_BF16_F32;
    return -1;
}

cg_tensor *
cg__cast(cg_tensor *x, cg_dtype dtype)
{
    cg__layout l;
    cg_tensor *y;
    cl_kernel k;
    cl_mem mx, my;
    cl_uint n;
    int kid = cast_kernel(x->dtype, dtype, 0), status;

    if (kid < 0) {
        cg__error(CG_EDTYPE, "no conversion from %s to %s",
                  cg__dtype_name(x->dtype), cg__dtype_name(dtype));
        return NULL;
    }
    y = cg__tensor_empty(x->ctx, dtype, x->ndim, x->shape);
    if (!y)
        return NULL;
    cg__layout_make(&l, x->ndim, x->shape, 1, (const cg_tensor **)&x);
    n = (cl_uint)l.numel;
    mx = cg__tensor_mem(x);
    my = cg__tensor_mem(y);
    if (l.nd == 1 && l.strides[0].s[0] == 1) {
        /* contiguous: 8 elements a work-item */
        kid = cast_kernel(x->dtype, dtype, 1);
        status = cg__kernel(x->ctx, (cg__kid)kid, &k);
        if (status == CG_OK)
            status = cg__args(k, CG__ARG(mx), CG__ARG(l.offset[0]),
                              CG__ARG(my), CG__ARG(n));
        if (status == CG_OK && n)
            status = cg__launch1d(x->ctx, k, (n + 7) / 8, CG__WG);
    } else {
        status = cg__kernel(x->ctx, (cg__kid)kid, &k);
        if (status == CG_OK)
            status = cg__args(k, CG__ARG(mx), CG__ARG(l.offset[0]),
                              CG__ARG(l.shape), CG__ARG(l.strides[0]),
                              CG__ARG(l.nd), CG__ARG(my), CG__ARG(n));
        if (status == CG_OK)
            status = cg__launch1d(x->ctx, k, n, CG__WG);
    }
    if (status) {
        cg_tensor_free(y);
        return NULL;
    }
    return y;
}

static int
cast_backward(cg__node *node, cg_tensor *g, cg_tensor **gin)
{
    gin[0] = cg__cast(g, node->inputs[0]->dtype);
    return gin[0] ? CG_OK : cg__last_status();
}

cg_tensor *
cg_to_dtype(cg_tensor *x, cg_dtype dtype)
{
    cg_tensor *y;
    cg__node *node;
    int status;

    cg__error_clear();
    if (cg__check_tensor(x, "input", CG__ANY_DTYPE))
        return NULL;
    if (x->dtype == dtype)
        return cg_tensor_ref(x);
    if (cast_kernel(x->dtype, dtype, 0) < 0) {
        cg__error(CG_EDTYPE, "to_dtype: no conversion from %s to %s (only "
                  "between float32 and float16 or bfloat16)",
                  cg__dtype_name(x->dtype), cg__dtype_name(dtype));
        return NULL;
    }
    y = cg__cast(x, dtype);
    if (!y)
        return NULL;
    node = cg__record(y, "to_dtype", cast_backward, 1, &x, &status);
    (void)node;
    if (status) {
        cg_tensor_free(y);
        return NULL;
    }
    return y;
}
