/* SPDX-License-Identifier: MIT */
/*
 * lib/ops/loss.c - cross entropy, negative log-likelihood, mean squared
 * error and binary cross entropy with logits, with PyTorch's semantics.
 * Kernels: kernels/loss.cl.  The mean and sum reductions are the
 * deterministic reduce_sum of the per-row (or per-element) losses.
 *
 * Class targets are validated on the host: cross_entropy and nll_loss
 * read the int32 targets back (N * 4 bytes, one synchronisation per call)
 * so that an out-of-range class fails the call with CG_EINVAL, as it does
 * in PyTorch, instead of silently giving a wrong loss.  The same read
 * gives the number of non-ignored targets that a mean divides by.  The
 * kernels guard targets again, so that a target changed after the call
 * can never make them read outside the logits.
 *
 * float16 and bfloat16 logits or inputs use the same kernels built for
 * their storage (cg__kernel_dt): the per-row losses and their sum are
 * float32, the result is rounded once to the input's dtype, as are the
 * gradients.  A pointwise loss's target has the input's dtype; class
 * targets are int32.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>

#include "ops/internal.h"

/* kernels/loss.cl's work-group size of ce_f: its default, or the tuning
 * entry "loss" in force. */
#define LWG(ctx) ((size_t)cg__param(ctx, CG__P_LOSS_LWG))

/* The sum (times scale) of every element of rows (float32), or rows itself
 * for reduction none, in dtype (rounded once); takes over the caller's
 * reference to rows. */
static cg_tensor *
reduce_rows(cg_tensor *rows, cg_reduction reduction, float scale,
            cg_dtype dtype)
{
    cg_tensor *s;

    if (reduction == CG_REDUCTION_NONE)
        s = cg_tensor_ref(rows);
    else
        s = cg__sum_mask(rows, (1u << rows->ndim) - 1, 0, scale);
    cg_tensor_free(rows);
    if (s && dtype != CG_F32) {
        rows = s;
        s = cg__cast(rows, dtype);
        cg_tensor_free(rows);
    }
    return s;
}

static int
check_reduction(const char *op, cg_reduction reduction)
{
    if (reduction != CG_REDUCTION_NONE && reduction != CG_REDUCTION_MEAN &&
        reduction != CG_REDUCTION_SUM)
        return cg__error(CG_EINVAL, "%s: unknown reduction %d", op,
                         (int)reduction);
    return CG_OK;
}

/* ------------------------------------------------------------------------
 * Class losses: x [N, C] (or [C]) and int32 targets [N] (or []).
 * ------------------------------------------------------------------------ */

/* The geometry the kernels read (see kernels/loss.cl). */
static cl_int8
cls_geometry(const cg_tensor *x, const cg_tensor *t, int ignore_index)
{
    cl_int8 p = { { 0 } };

    p.s[0] = (cl_int)x->offset;
    p.s[1] = x->ndim == 2 ? (cl_int)x->strides[0] : 0;
    p.s[2] = (cl_int)x->strides[x->ndim - 1];
    p.s[3] = (cl_int)x->shape[x->ndim - 1];
    p.s[4] = (cl_int)t->offset;
    p.s[5] = t->ndim == 1 ? (cl_int)t->strides[0] : 0;
    p.s[6] = ignore_index;
    return p;
}

/* Every target is a class in [0, C) or ignore_index; *count is the number
 * of the former. */
static int
check_targets(const char *op, cg_tensor *t, int64_t nclass, int ignore_index,
              int64_t *count)
{
    int64_t n = cg_tensor_numel(t), i;
    int32_t *h = cg__malloc((size_t)n * sizeof *h);
    int status;

    if (!h)
        return CG_EHOSTMEM;
    status = cg_tensor_to_host(t, h, (size_t)n * sizeof *h);
    *count = 0;
    for (i = 0; i < n && status == CG_OK; i++) {
        if (h[i] == ignore_index)
            continue;
        if (h[i] < 0 || h[i] >= nclass)
            status = cg__error(CG_EINVAL, "%s: target[%lld] = %d is not a "
                               "class in [0, %lld) nor ignore_index (%d)", op,
                               (long long)i, (int)h[i], (long long)nclass,
                               ignore_index);
        (*count)++;
    }
    free(h);
    return status;
}

/* Checks logits, targets and reduction; *count as in check_targets. */
static int
check_class_args(const char *op, cg_tensor *x, cg_tensor *t,
                 cg_reduction reduction, int ignore_index, int64_t *count)
{
    cg_tensor *ops[2] = { x, t };
    char s1[128], s2[128];
    int status;

    if ((status = cg__check_tensor(x, "input", CG__FLOAT_DTYPE)) ||
        (status = cg__check_tensor(t, "target", 1)) ||
        (status = cg__same_context(2, (const cg_tensor *const *)ops)) ||
        (status = check_reduction(op, reduction)))
        return status;
    if (t->dtype != CG_I32)
        return cg__error(CG_EDTYPE, "%s: target must be int32 class "
                         "indices, not %s", op, cg__dtype_name(t->dtype));
    cg__shape_str(x->ndim, x->shape, s1, sizeof s1);
    cg__shape_str(t->ndim, t->shape, s2, sizeof s2);
    if (!((x->ndim == 2 && t->ndim == 1 && t->shape[0] == x->shape[0]) ||
          (x->ndim == 1 && t->ndim == 0)))
        return cg__error(CG_ESHAPE, "%s: input %s and target %s do not "
                         "match: expected input [N, C] with target [N], or "
                         "input [C] with a 0-d target", op, s1, s2);
    return check_targets(op, t, x->shape[x->ndim - 1], ignore_index, count);
}

/* Records a class loss; its saved tensors are input, target and extra. */
static int
record_class(cg_tensor *out, const char *op, cg__backward_fn bwd,
             cg_tensor *x, cg_tensor *t, cg_tensor *extra, double scale,
             double eps, int ignore_index, cg_reduction reduction)
{
    cg_tensor *in[2] = { x, t };
    cg__node *node;
    int status;

    node = cg__record(out, op, bwd, 2, in, &status);
    if (!node)
        return status;
    node->f[0] = scale;
    node->f[1] = eps;
    node->i[0] = ignore_index;
    node->i[1] = reduction == CG_REDUCTION_NONE;   /* g's stride */
    status = cg__node_save(node, 0, x);
    if (status == CG_OK)
        status = cg__node_save(node, 1, t);
    if (status == CG_OK && extra)
        status = cg__node_save(node, 2, extra);
    return status;
}

/* 1 / count for a mean (NaN when every target is ignored, as in
 * PyTorch), else 1. */
static float
class_scale(cg_reduction reduction, int64_t count)
{
    if (reduction != CG_REDUCTION_MEAN)
        return 1.0f;
    return count ? 1.0f / (float)count : NAN;
}

static int
ce_backward(cg__node *node, cg_tensor *g, cg_tensor **gin)
{
    cg_tensor *x = node->saved[0], *t = node->saved[1], *lse = node->saved[2];
    cl_int8 p = cls_geometry(x, t, (int)node->i[0]);
    cl_mem mx = cg__tensor_mem(x), mt = cg__tensor_mem(t);
    cl_mem ml = cg__tensor_mem(lse), mg = cg__tensor_mem(g), mgx;
    cl_float eps = (cl_float)node->f[1], scale = (cl_float)node->f[0];
    cl_int gs = (cl_int)node->i[1];
    cl_uint n = (cl_uint)cg_tensor_numel(x);
    cg_tensor *gx;
    cl_kernel k;
    int status;

    gx = cg__tensor_empty(x->ctx, x->dtype, x->ndim, x->shape);
    if (!gx)
        return cg__last_status();
    mgx = cg__tensor_mem(gx);
    status = cg__kernel_dt(x->ctx, CG__K_CE_B, x->dtype, &k);
    if (status == CG_OK)
        status = cg__args(k, CG__ARG(mx), CG__ARG(mt), CG__ARG(p),
                          CG__ARG(eps), CG__ARG(ml), CG__ARG(mg), CG__ARG(gs),
                          CG__ARG(scale), CG__ARG(mgx), CG__ARG(n));
    if (status == CG_OK)
        status = cg__launch1d(x->ctx, k, n, CG__WG);
    if (status) {
        cg_tensor_free(gx);
        return status;
    }
    gin[0] = gx;
    return CG_OK;
}

cg_tensor *
cg_cross_entropy(cg_tensor *input, cg_tensor *target, cg_reduction reduction,
                 int ignore_index, float label_smoothing)
{
    cg_tensor *ac[2];
    cg_tensor *rows, *lse, *out;
    cl_mem mx, mt, mr, ml;
    cl_int8 p;
    cl_float eps = label_smoothing;
    cl_kernel k;
    int64_t count;
    size_t global, local;
    float scale;
    int status;

    CG__AUTOCAST_RETURN(CG__AC_F32, ac,
                        cg_cross_entropy(ac[0], ac[1], reduction,
                                         ignore_index, label_smoothing),
                        input, target);

    cg__error_clear();
    if (!(label_smoothing >= 0.0f && label_smoothing <= 1.0f)) {
        cg__error(CG_EINVAL, "cross_entropy: label_smoothing %g is not in "
                  "[0, 1]", label_smoothing);
        return NULL;
    }
    if (check_class_args("cross_entropy", input, target, reduction,
                         ignore_index, &count))
        return NULL;
    rows = cg__tensor_empty(input->ctx, CG_F32, target->ndim, target->shape);
    lse = rows ? cg__tensor_empty(input->ctx, CG_F32, target->ndim,
                                  target->shape) : NULL;
    if (!lse) {
        cg_tensor_free(rows);
        return NULL;
    }
    p = cls_geometry(input, target, ignore_index);
    mx = cg__tensor_mem(input);
    mt = cg__tensor_mem(target);
    mr = cg__tensor_mem(rows);
    ml = cg__tensor_mem(lse);
    status = cg__kernel_dt(input->ctx, CG__K_CE_F, input->dtype, &k);
    if (status == CG_OK)
        status = cg__args(k, CG__ARG(mx), CG__ARG(mt), CG__ARG(p),
                          CG__ARG(eps), CG__ARG(mr), CG__ARG(ml));
    local = LWG(input->ctx);
    global = (size_t)cg_tensor_numel(target) * local;
    if (status == CG_OK)
        status = cg__launch(input->ctx, k, 1, &global, &local, NULL);
    if (status) {
        cg_tensor_free(rows);
        cg_tensor_free(lse);
        return NULL;
    }
    scale = class_scale(reduction, count);
    out = reduce_rows(rows, reduction, scale, input->dtype);
    if (out && record_class(out, "cross_entropy", ce_backward, input, target,
                            lse, scale, eps, ignore_index, reduction)) {
        cg_tensor_free(out);
        out = NULL;
    }
    cg_tensor_free(lse);
    return out;
}

static int
nll_backward(cg__node *node, cg_tensor *g, cg_tensor **gin)
{
    cg_tensor *x = node->saved[0], *t = node->saved[1], *gx;
    cl_int8 p = cls_geometry(x, t, (int)node->i[0]);
    cl_mem mt = cg__tensor_mem(t), mg = cg__tensor_mem(g), mgx;
    cl_float scale = (cl_float)node->f[0];
    cl_int gs = (cl_int)node->i[1];
    cl_uint n = (cl_uint)cg_tensor_numel(x);
    cl_kernel k;
    int status;

    gx = cg__tensor_empty(x->ctx, x->dtype, x->ndim, x->shape);
    if (!gx)
        return cg__last_status();
    mgx = cg__tensor_mem(gx);
    status = cg__kernel_dt(x->ctx, CG__K_NLL_B, x->dtype, &k);
    if (status == CG_OK)
        status = cg__args(k, CG__ARG(mt), CG__ARG(p), CG__ARG(mg),
                          CG__ARG(gs), CG__ARG(scale), CG__ARG(mgx),
                          CG__ARG(n));
    if (status == CG_OK)
        status = cg__launch1d(x->ctx, k, n, CG__WG);
    if (status) {
        cg_tensor_free(gx);
        return status;
    }
    gin[0] = gx;
    return CG_OK;
}

cg_tensor *
cg_nll_loss(cg_tensor *input, cg_tensor *target, cg_reduction reduction,
            int ignore_index)
{
    cg_tensor *ac[2];
    cg_tensor *rows, *out;
    cl_mem mx, mt, mr;
    cl_int8 p;
    cl_kernel k;
    cl_uint n;
    int64_t count;
    float scale;
    int status;

    CG__AUTOCAST_RETURN(CG__AC_F32, ac,
                        cg_nll_loss(ac[0], ac[1], reduction, ignore_index),
                        input, target);

    cg__error_clear();
    if (check_class_args("nll_loss", input, target, reduction, ignore_index,
                         &count))
        return NULL;
    rows = cg__tensor_empty(input->ctx, CG_F32, target->ndim, target->shape);
    if (!rows)
        return NULL;
    p = cls_geometry(input, target, ignore_index);
    mx = cg__tensor_mem(input);
    mt = cg__tensor_mem(target);
    mr = cg__tensor_mem(rows);
    n = (cl_uint)cg_tensor_numel(target);
    status = cg__kernel_dt(input->ctx, CG__K_NLL_F, input->dtype, &k);
    if (status == CG_OK)
        status = cg__args(k, CG__ARG(mx), CG__ARG(mt), CG__ARG(p),
                          CG__ARG(mr), CG__ARG(n));
    if (status == CG_OK)
        status = cg__launch1d(input->ctx, k, n, CG__WG);
    if (status) {
        cg_tensor_free(rows);
        return NULL;
    }
    scale = class_scale(reduction, count);
    out = reduce_rows(rows, reduction, scale, input->dtype);
    if (out && record_class(out, "nll_loss", nll_backward, input, target,
                            NULL, scale, 0.0, ignore_index, reduction)) {
        cg_tensor_free(out);
        out = NULL;
    }
    return out;
}

/* ------------------------------------------------------------------------
 * Pointwise losses: kind 0 mse, kind 1 bce with logits.
 * ------------------------------------------------------------------------ */

static int
pointwise_backward(cg__node *node, cg_tensor *g, cg_tensor **gin)
{
    cg_tensor *a = node->saved[0], *b = node->saved[1], *full[2] = { 0 };
    const cg_tensor *ops[2] = { a, b };
    cl_int kind = (cl_int)node->i[0], gs = (cl_int)node->i[1];
    cl_int want = (node->needs[0] ? 1 : 0) | (node->needs[1] ? 2 : 0);
    cl_float scale = (cl_float)node->f[0];
    cl_mem ma = cg__tensor_mem(a), mb = cg__tensor_mem(b);
    cl_mem mg = cg__tensor_mem(g), mga, mgb;
    cg__layout l;
    cl_kernel k;
    cl_uint n;
    int status = CG_OK, j;

    for (j = 0; j < 2 && status == CG_OK; j++)
        if (node->needs[j] &&
            !(full[j] = cg__tensor_empty(a->ctx, a->dtype, a->ndim,
                                         a->shape)))
            status = cg__last_status();
    cg__layout_make(&l, a->ndim, a->shape, 2, ops);
    n = (cl_uint)l.numel;
    if (status == CG_OK) {
        /* An unwanted output gets the other one's buffer; never written. */
        mga = cg__tensor_mem(full[0] ? full[0] : full[1]);
        mgb = cg__tensor_mem(full[1] ? full[1] : full[0]);
        status = cg__kernel_dt(a->ctx, CG__K_POINTWISE_B, a->dtype, &k);
        if (status == CG_OK)
            status = cg__args(k, CG__ARG(ma), CG__ARG(l.offset[0]),
                              CG__ARG(mb), CG__ARG(l.offset[1]),
                              CG__ARG(l.shape), CG__ARG(l.strides[0]),
                              CG__ARG(l.strides[1]), CG__ARG(l.nd),
                              CG__ARG(kind), CG__ARG(mg), CG__ARG(gs),
                              CG__ARG(scale), CG__ARG(mga), CG__ARG(mgb),
                              CG__ARG(want), CG__ARG(n));
    }
    if (status == CG_OK)
        status = cg__launch1d(a->ctx, k, n, CG__WG);
    if (status) {
        cg_tensor_free(full[0]);
        cg_tensor_free(full[1]);
        return status;
    }
    gin[0] = full[0];
    gin[1] = full[1];
    return CG_OK;
}

static int
pointwise_check(const char *op, cg_tensor *a, cg_tensor *b,
                cg_reduction reduction)
{
    cg_tensor *ops[2] = { a, b };
    char s1[128], s2[128];
    int status, d;

    if ((status = cg__check_tensor(a, "input", CG__FLOAT_DTYPE)) ||
        (status = cg__check_tensor(b, "target", CG__FLOAT_DTYPE)) ||
        (status = cg__check_same_dtype(a, "input", b, "target")) ||
        (status = cg__same_context(2, (const cg_tensor *const *)ops)) ||
        (status = check_reduction(op, reduction)))
        return status;
    for (d = 0; d < a->ndim && a->ndim == b->ndim; d++)
        if (a->shape[d] != b->shape[d])
            break;
    if (a->ndim != b->ndim || d < a->ndim)
        return cg__error(CG_ESHAPE, "%s: input %s and target %s must have "
                         "the same shape", op,
                         cg__shape_str(a->ndim, a->shape, s1, sizeof s1),
                         cg__shape_str(b->ndim, b->shape, s2, sizeof s2));
    return CG_OK;
}

static cg_tensor *
pointwise_loss(const char *op, cl_int kind, cg_tensor *a, cg_tensor *b,
               cg_reduction reduction)
{
    const cg_tensor *ops[2] = { a, b };
    cg_tensor *in[2] = { a, b }, *y, *out;
    cg__layout l;
    cg__node *node;
    cl_kernel k;
    cl_mem ma, mb, my;
    cl_uint n;
    float scale;
    int status;

    cg__error_clear();
    if (pointwise_check(op, a, b, reduction))
        return NULL;
    y = cg__tensor_empty(a->ctx, CG_F32, a->ndim, a->shape);
    if (!y)
        return NULL;
    cg__layout_make(&l, a->ndim, a->shape, 2, ops);
    n = (cl_uint)l.numel;
    ma = cg__tensor_mem(a);
    mb = cg__tensor_mem(b);
    my = cg__tensor_mem(y);
    status = cg__kernel_dt(a->ctx, CG__K_POINTWISE_F, a->dtype, &k);
    if (status == CG_OK)
        status = cg__args(k, CG__ARG(ma), CG__ARG(l.offset[0]), CG__ARG(mb),
                          CG__ARG(l.offset[1]), CG__ARG(l.shape),
                          CG__ARG(l.strides[0]), CG__ARG(l.strides[1]),
                          CG__ARG(l.nd), CG__ARG(kind), CG__ARG(my),
                          CG__ARG(n));
    if (status == CG_OK)
        status = cg__launch1d(a->ctx, k, n, CG__WG);
    if (status) {
        cg_tensor_free(y);
        return NULL;
    }
    scale = reduction == CG_REDUCTION_MEAN ? 1.0f / (float)n : 1.0f;
    out = reduce_rows(y, reduction, scale, a->dtype);
    if (!out)
        return NULL;
    node = cg__record(out, op, pointwise_backward, 2, in, &status);
    if (node) {
        node->f[0] = scale;
        node->i[0] = kind;
        node->i[1] = reduction == CG_REDUCTION_NONE;
        status = cg__node_save(node, 0, a);
        if (status == CG_OK)
            status = cg__node_save(node, 1, b);
    }
    if (status) {
        cg_tensor_free(out);
        return NULL;
    }
    return out;
}

cg_tensor *
cg_mse_loss(cg_tensor *input, cg_tensor *target, cg_reduction reduction)
{
    cg_tensor *ac[2];

    CG__AUTOCAST_RETURN(CG__AC_F32, ac, cg_mse_loss(ac[0], ac[1], reduction),
                        input, target);
    return pointwise_loss("mse_loss", 0, input, target, reduction);
}

cg_tensor *
cg_bce_with_logits(cg_tensor *input, cg_tensor *target,
                   cg_reduction reduction)
{
    cg_tensor *ac[2];

    CG__AUTOCAST_RETURN(CG__AC_F32, ac,
                        cg_bce_with_logits(ac[0], ac[1], reduction),
                        input, target);
    return pointwise_loss("bce_with_logits", 1, input, target, reduction);
}
