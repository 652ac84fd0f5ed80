/* SPDX-License-Identifier: MIT */
/*
 * lib/ops/dropout.c - inverted dropout with a keep-mask from the context's
 * Philox generator.  Kernels: kernels/random.cl (the mask, float32 for
 * every dtype, so a seed drops the same elements whatever the dtype),
 * kernels/dropout.cl (applying it, in the storage variant of x's dtype).
 */
#include "config.h"

#include "ops/internal.h"

static int
dropout_backward(cg__node *node, cg_tensor *g, cg_tensor **gin)
{
    cg_tensor *mask = node->saved[0], *gx;
    cl_mem mg = cg__tensor_mem(g), mm = cg__tensor_mem(mask), mgx;
    cl_uint n = (cl_uint)cg_tensor_numel(g);
    cl_kernel k;

    gx = cg__tensor_empty(g->ctx, g->dtype, g->ndim, g->shape);
    if (!gx)
        return cg__last_status();
    mgx = cg__tensor_mem(gx);
    if (cg__kernel_dt(g->ctx, CG__K_DROPOUT_B, g->dtype, &k) ||
        cg__args(k, CG__ARG(mg), CG__ARG(mm), CG__ARG(mgx), CG__ARG(n)) ||
        cg__launch1d(g->ctx, k, n, CG__WG)) {
        cg_tensor_free(gx);
        return cg__last_status();
    }
    gin[0] = gx;
    return CG_OK;
}

/* y = x * mask, recorded with the mask saved for backward. */
static cg_tensor *
apply_mask(cg_tensor *x, cg_tensor *mask)
{
    cg_tensor *y;
    cg__layout l;
    cg__node *node;
    cl_kernel k;
    cl_mem mx = cg__tensor_mem(x), mm = cg__tensor_mem(mask), my;
    cl_uint n;
    int status;

    y = cg__tensor_empty(x->ctx, x->dtype, x->ndim, x->shape);
    if (!y)
        return NULL;
    cg__layout_make(&l, x->ndim, x->shape, 1, (const cg_tensor **)&x);
    n = (cl_uint)l.numel;
    my = cg__tensor_mem(y);
    status = cg__kernel_dt(x->ctx, CG__K_DROPOUT_F, x->dtype, &k);
    if (status == CG_OK)
        status = cg__args(k, CG__ARG(mx), CG__ARG(l.offset[0]),
                          CG__ARG(l.shape), CG__ARG(l.strides[0]),
                          CG__ARG(l.nd), CG__ARG(mm), CG__ARG(my), CG__ARG(n));
    if (status == CG_OK)
        status = cg__launch1d(x->ctx, k, n, CG__WG);
    if (status == CG_OK) {
        node = cg__record(y, "dropout", dropout_backward, 1, &x, &status);
        if (node)
            status = cg__node_save(node, 0, mask);
    }
    if (status) {
        cg_tensor_free(y);
        return NULL;
    }
    return y;
}

cg_tensor *
cg_dropout(cg_tensor *x, float p, int training)
{
    cg_tensor *mask, *y;
    uint64_t offset;

    cg__error_clear();
    if (cg__check_tensor(x, "input", CG__FLOAT_DTYPE))
        return NULL;
    if (!(p >= 0.0f && p <= 1.0f)) {
        cg__error(CG_EINVAL, "dropout: p = %g is outside [0, 1]", p);
        return NULL;
    }
    if (!training || p == 0.0f)
        return cg_tensor_ref(x);
    offset = x->ctx->rng->offset;
    /* p = 1 keeps nothing: scale 0 rather than 1 / 0. */
    mask = cg__random(x->ctx, CG__K_DROPOUT_MASK, x->ndim, x->shape, p,
                      p < 1.0f ? 1.0f / (1.0f - p) : 0.0f);
    if (!mask)
        return NULL;
    y = apply_mask(x, mask);
    cg_tensor_free(mask);
    if (!y)
        x->ctx->rng->offset = offset;   /* failure changes nothing */
    return y;
}
