/* SPDX-License-Identifier: MIT */
/*
 * lib/ops/layer_norm.c - layer normalisation over the trailing dimensions
 * with an optional affine weight and bias.  Kernels: kernels/layer_norm.cl
 * (one work-group per row; deterministic tree sums).  float16 and
 * bfloat16 use the same kernels built for their storage (cg__kernel_dt):
 * x, weight, bias, y and the gradients in one dtype, the saved mean and
 * rstd and all arithmetic float32.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "ops/internal.h"

/* kernels/layer_norm.cl's work-group size: its default, or the tuning
 * entry "layer_norm" in force. */
#define LWG(ctx) ((size_t)cg__param(ctx, CG__P_LAYER_NORM_LWG))

enum { LN_WEIGHT = 1, LN_BIAS = 2 };

/* Checks the arguments; *rows and *N give x's [rows, N] view. */
static int
ln_check(cg_tensor *x, int nnorm, const int64_t *nshape, cg_tensor *w,
         cg_tensor *b, float eps, int64_t *rows, int64_t *N)
{
    cg_tensor *all[3] = { x, w, b };
    char s1[128], s2[128];
    int d, k, status;

    if ((status = cg__check_tensor(x, "input", CG__FLOAT_DTYPE)) ||
        (w && (status = cg__check_tensor(w, "weight", CG__FLOAT_DTYPE))) ||
        (b && (status = cg__check_tensor(b, "bias", CG__FLOAT_DTYPE))) ||
        (w && (status = cg__check_same_dtype(x, "input", w, "weight"))) ||
        (b && (status = cg__check_same_dtype(x, "input", b, "bias"))) ||
        (status = cg__same_context(3, (const cg_tensor *const *)all)))
        return status;
    if (!(eps >= 0.0f) || isinf(eps))
        return cg__error(CG_EINVAL, "layer_norm: eps %g must be finite and "
                         ">= 0", eps);
    if (nnorm < 1 || nnorm > x->ndim || !nshape)
        return cg__error(CG_ESHAPE, "layer_norm: %d normalized dimensions "
                         "for input %s", nnorm,
                         cg__shape_str(x->ndim, x->shape, s1, sizeof s1));
    for (d = 0; d < nnorm; d++)
        if (nshape[d] != x->shape[x->ndim - nnorm + d])
            return cg__error(CG_ESHAPE, "layer_norm: normalized shape %s is "
                             "not the end of input %s",
                             cg__shape_str(nnorm, nshape, s1, sizeof s1),
                             cg__shape_str(x->ndim, x->shape, s2, sizeof s2));
    for (k = 1; k < 3; k++) {
        const cg_tensor *t = all[k];

        if (t && (t->ndim != nnorm ||
                  memcmp(t->shape, nshape, (size_t)nnorm * sizeof *nshape)))
            return cg__error(CG_ESHAPE, "layer_norm: %s %s must have the "
                             "normalized shape %s", k == 1 ? "weight" : "bias",
                             cg__shape_str(t->ndim, t->shape, s1, sizeof s1),
                             cg__shape_str(nnorm, nshape, s2, sizeof s2));
    }
    *N = cg__numel(nnorm, nshape);
    *rows = cg_tensor_numel(x) / *N;
    return CG_OK;
}

static int
ln_backward_x(cg__node *node, cg_tensor *g, cg_tensor **gx)
{
    cg_tensor *x = node->saved[0], *w = node->saved[1];
    cl_mem mx = cg__tensor_mem(x), mw = w ? cg__tensor_mem(w) : mx;
    cl_mem mm = cg__tensor_mem(node->saved[2]);
    cl_mem mr = cg__tensor_mem(node->saved[3]), mg = cg__tensor_mem(g), mgx;
    cl_int flags = w ? LN_WEIGHT : 0;
    cl_uint N = (cl_uint)node->i[1];
    size_t local = LWG(g->ctx), global = (size_t)node->i[0] * local;
    cl_kernel k;
    int status;

    *gx = cg__tensor_empty(g->ctx, x->dtype, x->ndim, x->shape);
    if (!*gx)
        return cg__last_status();
    mgx = cg__tensor_mem(*gx);
    status = cg__kernel_dt(g->ctx, CG__K_LAYER_NORM_B, x->dtype, &k);
    if (status == CG_OK)
        status = cg__args(k, CG__ARG(mx), CG__ARG(mw), CG__ARG(flags),
                          CG__ARG(N), CG__ARG(mm), CG__ARG(mr), CG__ARG(mg),
                          CG__ARG(mgx));
    if (status == CG_OK)
        status = cg__launch(g->ctx, k, 1, &global, &local, NULL);
    return status;
}

/* gw and gb: column sums over the rows, one work-item per column. */
static int
ln_backward_wb(cg__node *node, cg_tensor *g, cg_tensor **gw, cg_tensor **gb)
{
    cg_tensor *x = node->saved[0], *w = node->inputs[1], *b = node->inputs[2];
    cl_mem mx = cg__tensor_mem(x), mg = cg__tensor_mem(g), mgw, mgb;
    cl_mem mm = cg__tensor_mem(node->saved[2]);
    cl_mem mr = cg__tensor_mem(node->saved[3]);
    cl_uint rows = (cl_uint)node->i[0], N = (cl_uint)node->i[1];
    cl_int flags = (node->needs[1] ? LN_WEIGHT : 0) |
                   (node->needs[2] ? LN_BIAS : 0);
    cl_kernel k;
    int status;

    if ((flags & LN_WEIGHT) &&
        !(*gw = cg__tensor_empty(g->ctx, x->dtype, w->ndim, w->shape)))
        return cg__last_status();
    if ((flags & LN_BIAS) &&
        !(*gb = cg__tensor_empty(g->ctx, x->dtype, b->ndim, b->shape)))
        return cg__last_status();
    mgw = cg__tensor_mem(*gw ? *gw : *gb);
    mgb = cg__tensor_mem(*gb ? *gb : *gw);
    status = cg__kernel_dt(g->ctx, CG__K_LAYER_NORM_WB, x->dtype, &k);
    if (status == CG_OK)
        status = cg__args(k, CG__ARG(mx), CG__ARG(mg), CG__ARG(mm),
                          CG__ARG(mr), CG__ARG(rows), CG__ARG(N),
                          CG__ARG(flags),
                          CG__ARG(mgw), CG__ARG(mgb));
    if (status == CG_OK)
        status = cg__launch1d(g->ctx, k, N, CG__WG);
    return status;
}

/* gin[k] is freed by the engine also on failure. */
static int
ln_backward(cg__node *node, cg_tensor *g, cg_tensor **gin)
{
    int status = CG_OK;

    if (node->needs[0])
        status = ln_backward_x(node, g, &gin[0]);
    if (status == CG_OK && (node->needs[1] || node->needs[2]))
        status = ln_backward_wb(node, g, &gin[1], &gin[2]);
    return status;
}

/* Enqueues the forward; y, mean and rstd are new tensors. */
static int
ln_forward(cg_tensor *x, cg_tensor *w, cg_tensor *b, int64_t rows,
           cl_uint N, float eps, cg_tensor **out)
{
    cl_mem mx = cg__tensor_mem(x), mw = w ? cg__tensor_mem(w) : mx;
    cl_mem mb = b ? cg__tensor_mem(b) : mx, my, mm, mr;
    cl_int flags = (w ? LN_WEIGHT : 0) | (b ? LN_BIAS : 0);
    size_t local = LWG(x->ctx), global = (size_t)rows * local;
    cl_kernel k;
    int status;

    out[0] = cg__tensor_empty(x->ctx, x->dtype, x->ndim, x->shape);
    out[1] = out[0] ? cg__tensor_empty(x->ctx, CG_F32, 1, &rows) : NULL;
    out[2] = out[1] ? cg__tensor_empty(x->ctx, CG_F32, 1, &rows) : NULL;
    if (!out[2])
        return cg__last_status();
    my = cg__tensor_mem(out[0]);
    mm = cg__tensor_mem(out[1]);
    mr = cg__tensor_mem(out[2]);
    status = cg__kernel_dt(x->ctx, CG__K_LAYER_NORM_F, x->dtype, &k);
    if (status == CG_OK)
        status = cg__args(k, CG__ARG(mx), CG__ARG(mw), CG__ARG(mb),
                          CG__ARG(flags), CG__ARG(N), CG__ARG(eps),
                          CG__ARG(my),
                          CG__ARG(mm), CG__ARG(mr));
    if (status == CG_OK)
        status = cg__launch(x->ctx, k, 1, &global, &local, NULL);
    return status;
}

cg_tensor *
cg_layer_norm(cg_tensor *x, int nnorm, const int64_t *normalized_shape,
              cg_tensor *weight, cg_tensor *bias, float eps)
{
    cg_tensor *ac[3];
    cg_tensor *in[3] = { x, weight, bias }, *d[3] = { NULL, NULL, NULL };
    cg_tensor *out[3] = { NULL, NULL, NULL };
    int64_t rows = 0, N = 1;
    cg__node *node;
    int status = CG_OK, k;

    CG__AUTOCAST_RETURN(CG__AC_F32, ac,
                        cg_layer_norm(ac[0], nnorm, normalized_shape, ac[1],
                                      ac[2], eps),
                        x, weight, bias);

    cg__error_clear();
    if (ln_check(x, nnorm, normalized_shape, weight, bias, eps, &rows, &N))
        return NULL;
    for (k = 0; k < 3 && status == CG_OK; k++)
        if (in[k] && !(d[k] = cg__dense(in[k])))
            status = cg__last_status();
    if (status == CG_OK)
        status = ln_forward(d[0], d[1], d[2], rows, (cl_uint)N, eps, out);
    if (status == CG_OK) {
        node = cg__record(out[0], "layer_norm", ln_backward, 3, in, &status);
        if (node) {
            node->i[0] = rows;
            node->i[1] = N;
            status = cg__node_save(node, 0, d[0]);
            if (status == CG_OK && d[1])
                status = cg__node_save(node, 1, d[1]);
            for (k = 1; k < 3 && status == CG_OK; k++)
                status = cg__node_save(node, k + 1, out[k]);
        }
    }
    for (k = 0; k < 3; k++) {
        cg_tensor_free(d[k]);
        if (k > 0 || status)
            cg_tensor_free(out[k]);
    }
    return status ? NULL : out[0];
}
