/* SPDX-License-Identifier: MIT */
/*
 * lib/ops/reduce.c - sum, mean, max and var over any set of axes; argmax
 * and argmin along one.
 * Kernels: kernels/reduce.cl (one work-group per output element, fixed
 * tree order: deterministic; sums of contiguous rows and columns, the
 * full sum among them, have their own vectorised kernels, also with
 * orders fixed by the sizes).
 *
 * float16 and bfloat16 inputs use the same kernels built for their storage
 * (cg__kernel_dt): sums in float32, the output in x's dtype, rounded once,
 * as PyTorch's sum of a half tensor.  argmax's indices stay int32.
 */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "ops/internal.h"

/* kernels/reduce.cl's work-group size: its default, or the tuning
 * entry "reduce" in force. */
#define RWG(ctx) ((size_t)cg__param(ctx, CG__P_REDUCE_RWG))

/* RED_ARG is reduce_max with indices counted along the reduced axes
 * only (argmax) instead of into x's full shape (max's backward). */
enum { RED_SUM, RED_MAX, RED_VAR, RED_ARG };

/* Parses the axes into a bit mask (naxes 0: all). */
static int
axes_mask(const cg_tensor *x, int naxes, const int *axes, unsigned *mask)
{
    int k, d;

    if (naxes == 0) {
        *mask = x->ndim ? (1u << x->ndim) - 1 : 0;
        return CG_OK;
    }
    if (naxes < 0 || naxes > x->ndim || !axes)
        return cg__error(CG_EINVAL, "bad axes list (%d axes for a %d-D "
                         "tensor)", naxes, x->ndim);
    *mask = 0;
    for (k = 0; k < naxes; k++) {
        d = cg__dim(axes[k], x->ndim);
        if (d < 0)
            return cg__error(CG_EINVAL, "axis %d is out of range for a %d-D "
                             "tensor", axes[k], x->ndim);
        if (*mask & (1u << d))
            return cg__error(CG_EINVAL, "axis %d is listed twice", axes[k]);
        *mask |= 1u << d;
    }
    return CG_OK;
}

static void
out_shape(const cg_tensor *x, unsigned mask, int keepdim, int *ndim,
          int64_t *shape)
{
    int d, n = 0;

    for (d = 0; d < x->ndim; d++) {
        if (!(mask & (1u << d)))
            shape[n++] = x->shape[d];
        else if (keepdim)
            shape[n++] = 1;
    }
    *ndim = n;
}

/* Layouts of the kept (k) and reduced (r) dimensions of x: operand 0 is
 * x's strides, operand 1 x's contiguous strides (for max's indices), or
 * with `local` 0 for the kept dimensions and the contiguous strides of the
 * reduced ones alone (argmax's indices along the reduced axes). */
static void
split_layout(const cg_tensor *x, unsigned mask, int local, cg__layout *k,
             cg__layout *r, int64_t *nred)
{
    int64_t ks[2][CG_MAX_DIMS], rs[2][CG_MAX_DIMS], kshape[CG_MAX_DIMS],
            rshape[CG_MAX_DIMS], cs[CG_MAX_DIMS], c = 1;
    int d, nk = 0, nr = 0;

    cg__contiguous_strides(x->ndim, x->shape, cs);
    for (d = x->ndim - 1; local && d >= 0; d--) {
        cs[d] = (mask & (1u << d)) ? c : 0;
        c *= (mask & (1u << d)) ? x->shape[d] : 1;
    }
    for (d = 0; d < x->ndim; d++) {
        if (mask & (1u << d)) {
            rshape[nr] = x->shape[d];
            rs[0][nr] = x->strides[d];
            rs[1][nr++] = cs[d];
        } else {
            kshape[nk] = x->shape[d];
            ks[0][nk] = x->strides[d];
            ks[1][nk++] = cs[d];
        }
    }
    cg__layout_from(k, nk, kshape, 2, ks, NULL);
    cg__layout_from(r, nr, rshape, 2, rs, NULL);
    *nred = cg__numel(nr, rshape);
}

/* Rows per work-item of reduce_cols: short enough that a [2048, 1024]
 * bias gradient has 32 chunks of rows and float sums stay accurate, long
 * enough that the second pass is small.  COL_BLOCK: the columns of a
 * work-item, kernels/reduce.cl's COLS; COL_WG: at most so many work-items
 * of a chunk of rows per work-group. */
#define COL_ROWS 64
#define COL_BLOCK 32
#define COL_WG 16

/* reduce_rows's vector width (kernels/reduce.cl's VW); a row shorter than
 * ROW_SPLIT elements takes one work-group, a longer one a work-group per
 * ROW_SPLIT elements or so (at most ROW_PARTS), so that a full sum keeps
 * every compute unit busy, and the second pass is one short row. */
#define ROW_VW 8
#define ROW_SPLIT 16384
#define ROW_PARTS 256

/* Whether sum over `mask` of x is a column sum: x contiguous, the reduced
 * dimensions a nonempty prefix, something kept.  Then R x C. */
static int
is_col_sum(const cg_tensor *x, unsigned mask, int64_t *R, int64_t *C)
{
    int d, k = 0;

    while (k < x->ndim && (mask & (1u << k)))
        k++;
    if (k == 0 || k == x->ndim || (mask >> k) != 0 ||
        !cg_tensor_is_contiguous(x))
        return 0;
    *R = 1;
    *C = 1;
    for (d = 0; d < x->ndim; d++)
        *(d < k ? R : C) *= x->shape[d];
    return *R > 1 && *C > 0 && *R * *C <= INT32_MAX;
}

/* Whether sum over `mask` of x is a row sum: x contiguous, the reduced
 * dimensions a nonempty suffix (all of them: a full sum, one row).  Then
 * R rows of C. */
static int
is_row_sum(const cg_tensor *x, unsigned mask, int64_t *R, int64_t *C)
{
    int d, k = x->ndim;

    while (k > 0 && (mask & (1u << (k - 1))))
        k--;
    if (k == x->ndim || (mask & ((1u << k) - 1)) != 0 ||
        !cg_tensor_is_contiguous(x))
        return 0;
    *R = 1;
    *C = 1;
    for (d = 0; d < x->ndim; d++)
        *(d < k ? R : C) *= x->shape[d];
    return *R > 0 && *C > 0 && *R * *C <= INT32_MAX;
}

/* y (new, x's dtype, so contiguous at offset 0, C elements) = scale *
 * column sums of x's [R, C] view: one pass of chunks of COL_ROWS rows
 * (x's storage variant), and a second over the float32 chunks, by the
 * float32 variant into a float32 y, by reduce_cols_fin rounding once into
 * a 16-bit y (which so always takes two). */
static int
col_sum(cg_tensor *x, int64_t R64, int64_t C64, float scale, cg_tensor *y)
{
    cl_int xo = (cl_int)x->offset, R = (cl_int)R64, C = (cl_int)C64;
    cl_int rows = COL_ROWS, nchunk = (R + COL_ROWS - 1) / COL_ROWS, zero = 0;
    int64_t pshape[2] = { nchunk, C };
    cg_tensor *part = NULL;
    cl_mem mx = cg__tensor_mem(x), my = cg__tensor_mem(y), mp;
    float one = 1.0f, first;
    int wide = y->dtype != CG_F32;
    cl_kernel k, k2;
    int status;

    status = cg__kernel_dt(x->ctx, CG__K_REDUCE_COLS, x->dtype, &k);
    if (status == CG_OK)
        status = wide ? cg__kernel_dt(x->ctx, CG__K_REDUCE_COLS_FIN,
                                      y->dtype, &k2)
                      : cg__kernel(x->ctx, CG__K_REDUCE_COLS, &k2);
    if (status)
        return status;
    if (nchunk > 1 || wide) {
        part = cg__tensor_empty(x->ctx, CG_F32, 2, pshape);
        if (!part)
            return cg__last_status();
    }
    mp = part ? cg__tensor_mem(part) : my;
    first = part ? one : scale;
    status = cg__args(k, CG__ARG(mx), CG__ARG(xo), CG__ARG(C), CG__ARG(R),
                      CG__ARG(C), CG__ARG(rows), CG__ARG(mp),
                      CG__ARG(first));
    if (status == CG_OK)
        status = cg__launch_chunks(x->ctx, k, (size_t)C, (size_t)nchunk,
                                   COL_BLOCK, COL_WG);
    if (status == CG_OK && wide) {
        status = cg__args(k2, CG__ARG(mp), CG__ARG(nchunk), CG__ARG(C),
                          CG__ARG(my), CG__ARG(scale));
        if (status == CG_OK)
            status = cg__launch_chunks(x->ctx, k2, (size_t)C, 1, 1, 64);
    } else if (status == CG_OK && part) {
        status = cg__args(k2, CG__ARG(mp), CG__ARG(zero), CG__ARG(C),
                          CG__ARG(nchunk), CG__ARG(C), CG__ARG(nchunk),
                          CG__ARG(my), CG__ARG(scale));
        if (status == CG_OK)
            status = cg__launch_chunks(x->ctx, k2, (size_t)C, 1, COL_BLOCK,
                                       COL_WG);
    }
    cg_tensor_free(part);
    return status;
}

/* One launch of reduce_rows: part[o * ng + w] = scale * the sum of the
 * w-th of ng pieces of row o of src (R rows of len from element off). */
static int
rows_pass(cg_context *ctx, cl_kernel k, cl_mem src, cl_int off, cl_uint len,
          cl_uint ng, size_t R, cl_mem part, float scale)
{
    size_t wg = RWG(ctx), global[2], local[2] = { wg, 1 };
    size_t piece = wg * ROW_VW;
    cl_uint chunk = (cl_uint)(((len + ng - 1) / ng + piece - 1) / piece *
                              piece);
    int status;

    global[0] = ng * wg;
    global[1] = R;
    status = cg__args(k, CG__ARG(src), CG__ARG(off), CG__ARG(len),
                      CG__ARG(chunk), CG__ARG(part), CG__ARG(scale));
    if (status == CG_OK)
        status = cg__launch(ctx, k, 2, global, local, NULL);
    return status;
}

/* y (new float32, R elements) = scale * the sums of x's R contiguous rows
 * of C: one pass if a row is short, else ng partial sums per row and a
 * second pass (float32) over them. */
static int
row_sum(cg_tensor *x, int64_t R, int64_t C, float scale, cg_tensor *y)
{
    cl_uint ng = C < 2 * ROW_SPLIT ? 1 : (cl_uint)(C / ROW_SPLIT);
    cl_mem mx = cg__tensor_mem(x), my = cg__tensor_mem(y);
    cg_tensor *part = NULL;
    cl_kernel k, k32;
    int status;

    if (ng > ROW_PARTS)
        ng = ROW_PARTS;
    status = cg__kernel_dt(x->ctx, CG__K_REDUCE_ROWS, x->dtype, &k);
    if (status == CG_OK)
        status = cg__kernel(x->ctx, CG__K_REDUCE_ROWS, &k32);
    if (status)
        return status;
    if (ng == 1)
        return rows_pass(x->ctx, k, mx, (cl_int)x->offset, (cl_uint)C, 1,
                         (size_t)R, my, scale);
    {
        int64_t pshape[2] = { R, ng };

        part = cg__tensor_empty(x->ctx, CG_F32, 2, pshape);
    }
    if (!part)
        return cg__last_status();
    status = rows_pass(x->ctx, k, mx, (cl_int)x->offset, (cl_uint)C, ng,
                       (size_t)R, cg__tensor_mem(part), 1.0f);
    if (status == CG_OK)
        status = rows_pass(x->ctx, k32, cg__tensor_mem(part), 0, ng, 1,
                           (size_t)R, my, scale);
    cg_tensor_free(part);
    return status;
}

/* *y (new, x's dtype) = the column sums (col, col_sum's result) or row
 * sums of x (row_sum's float32 result, rounded once for 16-bit x). */
static int
vec_sum(cg_tensor *x, int col, int64_t R, int64_t C, float scale, int ndim,
        const int64_t *shape, cg_tensor **y)
{
    cg_tensor *s = cg__tensor_empty(x->ctx, col ? x->dtype : CG_F32, ndim,
                                    shape);
    int status;

    if (!s)
        return cg__last_status();
    status = col ? col_sum(x, R, C, scale, s) : row_sum(x, R, C, scale, s);
    if (status == CG_OK && s->dtype != x->dtype) {
        *y = cg__cast(s, x->dtype);
        status = *y ? CG_OK : cg__last_status();
        cg_tensor_free(s);
    } else if (status == CG_OK) {
        *y = s;
    } else {
        cg_tensor_free(s);
    }
    return status;
}

/* Runs one reduction; y (and am for max) are new tensors. */
static int
reduce(int kind, cg_tensor *x, unsigned mask, int keepdim, float param,
       cg_tensor **y, cg_tensor **am)
{
    int64_t shape[CG_MAX_DIMS], nred;
    cg__layout kl, rl;
    cl_kernel k;
    cl_mem mx = cg__tensor_mem(x), my, mam;
    cl_int xo = (cl_int)x->offset;
    cl_uint n;
    int ndim, status;
    size_t global, local = RWG(x->ctx);

    out_shape(x, mask, keepdim, &ndim, shape);
    split_layout(x, mask, kind == RED_ARG, &kl, &rl, &nred);
    n = (cl_uint)nred;
    if (kind == RED_SUM) {
        int64_t R, C;
        int col = is_col_sum(x, mask, &R, &C);

        if (col || is_row_sum(x, mask, &R, &C))
            return vec_sum(x, col, R, C, param, ndim, shape, y);
    }
    *y = cg__tensor_empty(x->ctx, x->dtype, ndim, shape);
    if (!*y)
        return cg__last_status();
    my = cg__tensor_mem(*y);
    if (kind == RED_MAX || kind == RED_ARG) {
        *am = cg__tensor_empty(x->ctx, CG_I32, ndim, shape);
        if (!*am) {
            status = cg__last_status();
            goto fail;
        }
        mam = cg__tensor_mem(*am);
        status = cg__kernel_dt(x->ctx, CG__K_REDUCE_MAX, x->dtype, &k);
        if (status == CG_OK)
            status = cg__args(k, CG__ARG(mx), CG__ARG(xo),
                              CG__ARG(kl.shape), CG__ARG(kl.strides[0]),
                              CG__ARG(kl.strides[1]), CG__ARG(kl.nd),
                              CG__ARG(rl.shape), CG__ARG(rl.strides[0]),
                              CG__ARG(rl.strides[1]), CG__ARG(rl.nd),
                              CG__ARG(n), CG__ARG(my), CG__ARG(mam));
    } else {
        status = cg__kernel_dt(x->ctx, kind == RED_SUM ? CG__K_REDUCE_SUM
                               : CG__K_REDUCE_VAR, x->dtype, &k);
        if (status == CG_OK)
            status = cg__args(k, CG__ARG(mx), CG__ARG(xo),
                              CG__ARG(kl.shape), CG__ARG(kl.strides[0]),
                              CG__ARG(kl.nd), CG__ARG(rl.shape),
                              CG__ARG(rl.strides[0]), CG__ARG(rl.nd),
                              CG__ARG(n), CG__ARG(my), CG__ARG(param));
    }
    global = (size_t)kl.numel * local;
    if (status == CG_OK)
        status = cg__launch(x->ctx, k, 1, &global, &local, NULL);
    if (status == CG_OK)
        return CG_OK;
fail:
    cg_tensor_free(*y);
    *y = NULL;
    if (am && *am) {
        cg_tensor_free(*am);
        *am = NULL;
    }
    return status;
}

cg_tensor *
cg__sum_mask(cg_tensor *x, unsigned mask, int keepdim, float scale)
{
    cg_tensor *y = NULL;

    reduce(RED_SUM, x, mask, keepdim, scale, &y, NULL);
    return y;
}

cg_tensor *
cg__sum_to_shape(cg_tensor *g, int ndim, const int64_t *shape)
{
    int lead = g->ndim - ndim, d;
    unsigned mask = 0;
    cg_tensor *s, *r;

    for (d = 0; d < g->ndim; d++)
        if (d < lead || (shape[d - lead] == 1 && g->shape[d] != 1))
            mask |= 1u << d;
    if (!mask && lead == 0)
        return cg_tensor_ref(g);
    s = cg__sum_mask(g, mask, 1, 1.0f);
    if (!s)
        return NULL;
    /* Drop the leading dimensions: a view of the contiguous sum. */
    {
        int64_t strides[CG_MAX_DIMS];

        cg__contiguous_strides(ndim, shape, strides);
        r = cg__tensor_view(s, ndim, shape, strides, 0);
    }
    cg_tensor_free(s);
    return r;
}

/* The gradient of a reduction's output, g, as x's keepdim shape. */
static cg_tensor *
keepdim_view(cg_tensor *g, const cg_tensor *x, unsigned mask)
{
    int64_t shape[CG_MAX_DIMS], strides[CG_MAX_DIMS];
    int ndim;

    out_shape(x, mask, 1, &ndim, shape);
    cg__contiguous_strides(ndim, shape, strides);
    return cg__tensor_view(g, ndim, shape, strides, g->offset);
}

/* gin[0] = bwd of g and x cast up to float32 (exact), cast down to x's
 * dtype once: the float32 arithmetic and the one rounding that a 16-bit
 * kernel would do (var's backward is built from several ops, each of
 * which would round in 16 bits). */
static int
via_f32(cg__node *node, cg_tensor *g,
        int (*bwd)(cg__node *, cg_tensor *, cg_tensor *, cg_tensor **),
        cg_tensor **gin)
{
    cg_tensor *x = node->inputs[0], *x32, *g32 = NULL, *r = NULL;
    int status;

    x32 = cg__cast(x, CG_F32);
    if (x32)
        g32 = g->dtype == CG_F32 ? cg_tensor_ref(g) : cg__cast(g, CG_F32);
    status = g32 ? bwd(node, x32, g32, &r) : cg__last_status();
    if (status == CG_OK && !(gin[0] = cg__cast(r, x->dtype)))
        status = cg__last_status();
    cg_tensor_free(x32);
    cg_tensor_free(g32);
    cg_tensor_free(r);
    return status;
}

/* Backward of sum and mean: gx = scale * g broadcast over x's shape, one
 * affine kernel in x's dtype (for 16 bits: float32 arithmetic, one
 * rounding). */
static int
sum_backward(cg__node *node, cg_tensor *g, cg_tensor **gin)
{
    cg_tensor *x = node->inputs[0], *gk, *ge;
    unsigned mask = (unsigned)node->i[0];
    int64_t strides[CG_MAX_DIMS];
    int d;

    gk = keepdim_view(g, x, mask);
    if (!gk)
        return cg__last_status();
    for (d = 0; d < x->ndim; d++)
        strides[d] = (mask & (1u << d)) ? 0 : gk->strides[d];
    ge = cg__tensor_view(gk, x->ndim, x->shape, strides, gk->offset);
    cg_tensor_free(gk);
    if (!ge)
        return cg__last_status();
    gin[0] = cg__unary(CG__EW_AFFINE, ge, (float)node->f[0], 0.0f);
    cg_tensor_free(ge);
    return gin[0] ? CG_OK : cg__last_status();
}

static int
max_backward(cg__node *node, cg_tensor *g, cg_tensor **gin)
{
    cg_tensor *x = node->inputs[0], *am = node->saved[0], *gx;
    cl_mem mg = cg__tensor_mem(g), mam = cg__tensor_mem(am), mgx;
    cl_uint n = (cl_uint)cg_tensor_numel(g);
    cl_kernel k;
    int status;

    gx = cg__tensor_empty(x->ctx, x->dtype, x->ndim, x->shape);
    if (!gx)
        return cg__last_status();
    mgx = cg__tensor_mem(gx);
    status = cg__fill(gx, 0.0f);
    if (status == CG_OK)
        status = cg__kernel_dt(x->ctx, CG__K_MAX_BACKWARD, x->dtype, &k);
    if (status == CG_OK)
        status = cg__args(k, CG__ARG(mg), CG__ARG(mam), CG__ARG(mgx),
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

/* gx = g * 2 (x - mean) / (N - correction), from the public ops (backward
 * runs in no-grad mode). */
static int
var_backward_f32(cg__node *node, cg_tensor *x, cg_tensor *g, cg_tensor **gx)
{
    cg_tensor *mean, *d = NULL, *gk = NULL, *t = NULL;
    unsigned mask = (unsigned)node->i[0];

    mean = cg__sum_mask(x, mask, 1, (float)node->f[1]);
    if (mean)
        d = cg_sub(x, mean);
    if (d)
        gk = keepdim_view(g, x, mask);
    if (gk)
        t = cg_mul(d, gk);
    if (t)
        *gx = cg_mul_scalar(t, (float)node->f[0]);
    cg_tensor_free(mean);
    cg_tensor_free(d);
    cg_tensor_free(gk);
    cg_tensor_free(t);
    return *gx ? CG_OK : cg__last_status();
}

static int
var_backward(cg__node *node, cg_tensor *g, cg_tensor **gin)
{
    if (node->inputs[0]->dtype != CG_F32)
        return via_f32(node, g, var_backward_f32, gin);
    return var_backward_f32(node, node->inputs[0], g, &gin[0]);
}

static cg_tensor *
reduction(const char *op, int kind, cg_tensor *x, int naxes, const int *axes,
          int keepdim, int correction)
{
    cg_tensor *y = NULL, *am = NULL;
    cg__node *node;
    unsigned mask = 0;
    int64_t nred = 1;
    float param = 1.0f;
    int status, d;

    cg__error_clear();
    if (cg__check_tensor(x, "input", CG__FLOAT_DTYPE) ||
        axes_mask(x, naxes, axes, &mask))
        return NULL;
    for (d = 0; d < x->ndim; d++)
        if (mask & (1u << d))
            nred *= x->shape[d];
    if (strcmp(op, "mean") == 0)
        param = 1.0f / (float)nred;
    if (kind == RED_VAR) {
        if (correction < 0 || nred - correction <= 0) {
            cg__error(CG_EINVAL, "var over %lld elements with correction %d",
                      (long long)nred, correction);
            return NULL;
        }
        param = (float)correction;
    }
    status = reduce(kind, x, mask, keepdim, param, &y,
                    kind == RED_MAX ? &am : NULL);
    if (status)
        return NULL;
    node = cg__record(y, op, kind == RED_SUM ? sum_backward
                      : kind == RED_MAX ? max_backward : var_backward, 1, &x,
                      &status);
    if (node) {
        node->i[0] = mask;
        node->i[1] = keepdim;
        node->f[0] = kind == RED_VAR ? 2.0 / (double)(nred - correction)
                                     : param;
        node->f[1] = 1.0 / (double)nred;
        if (kind == RED_MAX)
            status = cg__node_save(node, 0, am);
    }
    cg_tensor_free(am);
    if (status) {
        cg_tensor_free(y);
        return NULL;
    }
    return y;
}

cg_tensor *
cg_sum(cg_tensor *a, int naxes, const int *axes, int keepdim)
{
    cg_tensor *ac[1];

    CG__AUTOCAST_RETURN(CG__AC_F32, ac, cg_sum(ac[0], naxes, axes, keepdim),
                        a);
    return reduction("sum", RED_SUM, a, naxes, axes, keepdim, 0);
}

cg_tensor *
cg_mean(cg_tensor *a, int naxes, const int *axes, int keepdim)
{
    cg_tensor *ac[1];

    CG__AUTOCAST_RETURN(CG__AC_F32, ac, cg_mean(ac[0], naxes, axes, keepdim),
                        a);
    return reduction("mean", RED_SUM, a, naxes, axes, keepdim, 0);
}

cg_tensor *
cg_max(cg_tensor *a, int naxes, const int *axes, int keepdim)
{
    return reduction("max", RED_MAX, a, naxes, axes, keepdim, 0);
}

cg_tensor *
cg_var(cg_tensor *a, int naxes, const int *axes, int keepdim, int correction)
{
    cg_tensor *ac[1];

    CG__AUTOCAST_RETURN(CG__AC_F32, ac,
                        cg_var(ac[0], naxes, axes, keepdim, correction), a);
    return reduction("var", RED_VAR, a, naxes, axes, keepdim, correction);
}

/* ------------------------------------------------------------------------
 * argmax, argmin
 * ------------------------------------------------------------------------ */

/* The indices along `dim` of the first maximum (NaN first) of x, or of
 * -x for argmin: negation is exact and keeps NaN, so the first minimum of
 * x is the first maximum of -x (of 16-bit x cast up to float32, also
 * exact). */
static cg_tensor *
arg_reduce(const char *op, cg_tensor *x, int dim, int keepdim, int min)
{
    cg_tensor *src, *up, *y = NULL, *am = NULL;
    unsigned mask;
    int d, status;

    cg__error_clear();
    if (cg__check_tensor(x, "input", CG__FLOAT_DTYPE))
        return NULL;
    d = cg__dim(dim, x->ndim);
    if (x->ndim == 0 || d < 0) {
        cg__error(CG_EINVAL, "%s: dim %d is out of range for a %d-D tensor",
                  op, dim, x->ndim);
        return NULL;
    }
    mask = 1u << d;
    cg_no_grad_enter();
    src = up = min ? cg_to_dtype(x, CG_F32) : cg_tensor_ref(x);
    if (min)
        src = up ? cg_neg(up) : NULL;
    status = src ? reduce(RED_ARG, src, mask, keepdim, 0.0f, &y, &am)
                 : cg__last_status();
    cg_no_grad_leave();
    if (min)
        cg_tensor_free(src);
    cg_tensor_free(up);
    cg_tensor_free(y);
    return status == CG_OK ? am : NULL;
}

cg_tensor *
cg_argmax(cg_tensor *x, int dim, int keepdim)
{
    return arg_reduce("argmax", x, dim, keepdim, 0);
}

cg_tensor *
cg_argmin(cg_tensor *x, int dim, int keepdim)
{
    return arg_reduce("argmin", x, dim, keepdim, 1);
}

/* Values from the differentiable ops (max, or -max(-x), the negations of
 * 16-bit x in float32 between differentiable casts: exact), indices from
 * arg_reduce: both pick the same element. */
static int
extreme_dim(const char *op, cg_tensor *x, int dim, int keepdim, int min,
            cg_tensor **values, cg_tensor **indices)
{
    cg_tensor *v = NULL, *i = NULL, *n = NULL, *m = NULL, *up = NULL;
    cg_tensor *vm = NULL;

    cg__error_clear();
    if (!values || !indices)
        return cg__error(CG_EINVAL, "%s: values or indices is NULL", op);
    i = arg_reduce(op, x, dim, keepdim, min);
    if (i && !min)
        v = cg_max(x, 1, &dim, keepdim);
    if (i && min && (up = cg_to_dtype(x, CG_F32)) && (n = cg_neg(up)) &&
        (m = cg_max(n, 1, &dim, keepdim)) && (vm = cg_neg(m)))
        v = cg_to_dtype(vm, x->dtype);
    cg_tensor_free(up);
    cg_tensor_free(n);
    cg_tensor_free(m);
    cg_tensor_free(vm);
    if (!v) {
        cg_tensor_free(i);
        return cg__last_status();
    }
    *values = v;
    *indices = i;
    return CG_OK;
}

int
cg_max_dim(cg_tensor *x, int dim, int keepdim, cg_tensor **values,
           cg_tensor **indices)
{
    return extreme_dim("max_dim", x, dim, keepdim, 0, values, indices);
}

int
cg_min_dim(cg_tensor *x, int dim, int keepdim, cg_tensor **values,
           cg_tensor **indices)
{
    return extreme_dim("min_dim", x, dim, keepdim, 1, values, indices);
}
