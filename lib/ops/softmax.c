/* SPDX-License-Identifier: MIT */
/*
 * lib/ops/softmax.c - softmax and log_softmax along one dimension.
 * Kernels: kernels/softmax.cl (one work-group per row, max subtracted,
 * fixed tree order: deterministic).  float16 and bfloat16 inputs use the
 * same kernels built for their storage (cg__kernel_dt): float32
 * arithmetic, the output and the gradient in x's dtype.
 */
#include "config.h"

#include "ops/internal.h"

/* kernels/softmax.cl's work-group size: its default, or the tuning
 * entry "softmax" in force. */
#define SWG(ctx) ((size_t)cg__param(ctx, CG__P_SOFTMAX_SWG))

/* The rows of x along `dim`: the layout of the other dimensions with x's
 * strides (operand 0) and the contiguous strides (operand 1), the row
 * length and the element strides along dim in x and in contiguous data. */
typedef struct rows {
    cg__layout l;
    cl_uint n;
    cl_int xs, ys;
} rows;

static void
rows_of(const cg_tensor *x, int dim, rows *r)
{
    int64_t st[2][CG_MAX_DIMS], shape[CG_MAX_DIMS], cs[CG_MAX_DIMS];
    int d, nk = 0;

    cg__contiguous_strides(x->ndim, x->shape, cs);
    for (d = 0; d < x->ndim; d++) {
        if (d == dim)
            continue;
        shape[nk] = x->shape[d];
        st[0][nk] = x->strides[d];
        st[1][nk++] = cs[d];
    }
    cg__layout_from(&r->l, nk, shape, 2, st, NULL);
    r->n = (cl_uint)x->shape[dim];
    r->xs = (cl_int)x->strides[dim];
    r->ys = (cl_int)cs[dim];
}

static int
softmax_backward(cg__node *node, cg_tensor *g, cg_tensor **gin)
{
    cg_tensor *y = node->saved[0], *gx;
    cl_int logmode = (cl_int)node->i[1];
    cl_mem my = cg__tensor_mem(y), mg = cg__tensor_mem(g), mgx;
    size_t global, local = SWG(y->ctx);
    cl_kernel k;
    rows r;
    int status;

    rows_of(y, (int)node->i[0], &r);
    gx = cg__tensor_empty(y->ctx, y->dtype, y->ndim, y->shape);
    if (!gx)
        return cg__last_status();
    mgx = cg__tensor_mem(gx);
    /* y (the saved output), g and gx are all contiguous from offset 0. */
    status = cg__kernel_dt(y->ctx, CG__K_SOFTMAX_B, y->dtype, &k);
    if (status == CG_OK)
        status = cg__args(k, CG__ARG(my), CG__ARG(mg), CG__ARG(mgx),
                          CG__ARG(r.l.shape), CG__ARG(r.l.strides[1]),
                          CG__ARG(r.l.nd), CG__ARG(r.n), CG__ARG(r.ys),
                          CG__ARG(logmode));
    global = (size_t)r.l.numel * local;
    if (status == CG_OK)
        status = cg__launch(y->ctx, k, 1, &global, &local, NULL);
    if (status) {
        cg_tensor_free(gx);
        return status;
    }
    gin[0] = gx;
    return CG_OK;
}

static cg_tensor *
softmax_op(const char *op, cg_tensor *x, int dim, cl_int logmode)
{
    cg_tensor *y;
    cg__node *node;
    cl_kernel k;
    cl_mem mx, my;
    cl_int xo;
    size_t global, local;
    rows r;
    int d, status;

    cg__error_clear();
    if (cg__check_tensor(x, "input", CG__FLOAT_DTYPE))
        return NULL;
    d = cg__dim(dim, x->ndim);
    if (d < 0) {
        cg__error(CG_EINVAL, "%s: dimension %d is out of range for a %d-D "
                  "tensor", op, dim, x->ndim);
        return NULL;
    }
    y = cg__tensor_empty(x->ctx, x->dtype, x->ndim, x->shape);
    if (!y)
        return NULL;
    local = SWG(x->ctx);
    rows_of(x, d, &r);
    mx = cg__tensor_mem(x);
    my = cg__tensor_mem(y);
    xo = (cl_int)x->offset;
    status = cg__kernel_dt(x->ctx, CG__K_SOFTMAX_F, x->dtype, &k);
    if (status == CG_OK)
        status = cg__args(k, CG__ARG(mx), CG__ARG(xo), CG__ARG(r.l.shape),
                          CG__ARG(r.l.strides[0]), CG__ARG(r.l.strides[1]),
                          CG__ARG(r.l.nd), CG__ARG(r.n), CG__ARG(r.xs),
                          CG__ARG(r.ys), CG__ARG(my), CG__ARG(logmode));
    global = (size_t)r.l.numel * local;
    if (status == CG_OK)
        status = cg__launch(x->ctx, k, 1, &global, &local, NULL);
    if (status == CG_OK) {
        node = cg__record(y, op, softmax_backward, 1, &x, &status);
        if (node) {
            node->i[0] = d;
            node->i[1] = logmode;
            status = cg__node_save(node, 0, y);
        }
    }
    if (status) {
        cg_tensor_free(y);
        return NULL;
    }
    return y;
}

cg_tensor *
cg_softmax(cg_tensor *x, int dim)
{
    cg_tensor *ac[1];

    CG__AUTOCAST_RETURN(CG__AC_F32, ac, cg_softmax(ac[0], dim), x);
    return softmax_op("softmax", x, dim, 0);
}

cg_tensor *
cg_log_softmax(cg_tensor *x, int dim)
{
    cg_tensor *ac[1];

    CG__AUTOCAST_RETURN(CG__AC_F32, ac, cg_log_softmax(ac[0], dim), x);
    return softmax_op("log_softmax", x, dim, 1);
}
