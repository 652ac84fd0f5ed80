/* SPDX-License-Identifier: MIT */
/*
 * lib/ops/conv_transpose.c - 2-D transposed convolution (PyTorch's
 * conv_transpose2d), forward and backward.
 *
 * conv_transpose2d is the adjoint of the convolution whose geometry it
 * keeps (lib/ops/conv_internal.h: its input is that convolution's output
 * [N, K, OH, OW], its output that convolution's input [N, C, H, W], H
 * and W grown by output_padding): its forward is the convolution's dx
 * step, its dx the convolution's forward and its dW the convolution's dW
 * step with x and dy exchanged.  So it runs lib/ops/conv.c's steps of
 * either algorithm, no kernels of its own:
 *
 *   im2col + GEMM: forward GEMM + col2im (a gather), then the bias;
 *                  dx im2col + GEMM; dW im2col of dy + GEMM
 *   direct:        forward conv_direct_dx (the bias added before its
 *                  one rounding); dx conv_direct_fwd; dW conv_direct_dw
 *
 * The choice, per call and direction (cg__conv_choose with
 * CG__CONV_TFWD / CG__CONV_TBWD): CLGRAD_CONV_ALGO, else the tuning entry
 * "conv" of the class "tfwd.<kind>" or "tbwd.<kind>" - the kind that of
 * the convolution it transposes (lib/tune/conv_class.c) - else the
 * built-in rule (direct for depthwise).  16-bit tensors make the same
 * choice for the forward: direct runs the kernels in their dtype, and
 * the backward of that node too; im2col runs the float32 op between
 * recorded casts.  Both algorithms deterministic.
 */
#include "config.h"

#include <string.h>

#include "ops/conv_internal.h"

/* One spatial dimension: the output size (in - 1) st - 2 pad + dil (k -
 * 1) + opad + 1; CG_ESHAPE with the formula's values when it is below 1,
 * or when opad is not smaller than st or dil. */
static int
convt_dim(const char *name, int64_t in, int64_t k, int st, int pad, int dil,
          int opad, int64_t *out)
{
    const char *op = "conv_transpose2d";
    int64_t a, b;

    if (opad >= st && opad >= dil)
        return cg__error(CG_ESHAPE, "%s: output_padding %d (%s) must be "
                         "smaller than the stride %d or the dilation %d", op,
                         opad, name, st, dil);
    if (cg__checked_mul_i64(in - 1, st, &a, op) ||
        cg__checked_mul_i64(k - 1, dil, &b, op) ||
        cg__checked_add_i64(a, b, &a, op) ||
        cg__checked_add_i64(a, (int64_t)opad + 1 - 2 * (int64_t)pad, out, op))
        return cg__last_status();
    if (*out < 1)
        return cg__error(CG_ESHAPE, "%s: output %s (%lld - 1) * %d - 2 * %d "
                         "+ %d * (%lld - 1) + %d + 1 = %lld < 1", op, name,
                         (long long)in, st, pad, dil, (long long)k, opad,
                         (long long)*out);
    return CG_OK;
}

/* The geometry of the convolution that conv_transpose2d transposes: x is
 * its output [N, K, OH, OW], the result its input [N, C, H, W]. */
static int
convt_check(cg_tensor *x, cg_tensor *w, cg_tensor *b,
            const cg_conv_transpose_options *o, cg__conv_geom *g)
{
    const char *op = "conv_transpose2d";
    cg_conv_transpose_options d = { { 0, 0 }, { 0, 0 }, { 0, 0 }, 0,
                                    { 0, 0 } };
    char s1[128], s2[128];
    int status, k;

    if ((status = cg__conv_tensors(op, x, w, b)))
        return status;
    if (!o)
        o = &d;
    for (k = 0; k < 2; k++)
        if (o->stride[k] < 0 || o->padding[k] < 0 ||
            o->output_padding[k] < 0 || o->dilation[k] < 0 || o->groups < 0)
            return cg__error(CG_EINVAL, "%s: stride %d, padding %d, "
                             "output_padding %d, dilation %d and groups %d "
                             "must not be negative", op, o->stride[k],
                             o->padding[k], o->output_padding[k],
                             o->dilation[k], o->groups);
    cg__shape_str(4, x->shape, s1, sizeof s1);
    cg__shape_str(4, w->shape, s2, sizeof s2);
    g->N = x->shape[0]; g->K = x->shape[1];
    g->OH = x->shape[2]; g->OW = x->shape[3];
    g->no_shift = 0;
    g->R = w->shape[2]; g->S = w->shape[3];
    g->sh = cg__conv_opt_or(o->stride[0], 1);
    g->sw = cg__conv_opt_or(o->stride[1], 1);
    g->ph = o->padding[0]; g->pw = o->padding[1];
    g->dh = cg__conv_opt_or(o->dilation[0], 1);
    g->dw = cg__conv_opt_or(o->dilation[1], 1);
    g->G = cg__conv_opt_or(o->groups, 1);
    if (w->shape[0] != g->K)
        return cg__error(CG_ESHAPE, "%s: weight %s must have input %s's %lld "
                         "channels as its dimension 0", op, s2, s1,
                         (long long)g->K);
    if (g->K % g->G)
        return cg__error(CG_ESHAPE, "%s: groups %lld must divide the input "
                         "channels of %s (%lld)", op, (long long)g->G, s1,
                         (long long)g->K);
    if (cg__checked_mul_i64(w->shape[1], g->G, &g->C, op) ||
        (status = cg__conv_bias_check(op, b, w, g, g->C)) ||
        (status = convt_dim("height", g->OH, g->R, (int)g->sh, (int)g->ph,
                            (int)g->dh, o->output_padding[0], &g->H)) ||
        (status = convt_dim("width", g->OW, g->S, (int)g->sw, (int)g->pw,
                            (int)g->dw, o->output_padding[1], &g->W)))
        return cg__last_status();
    return cg__conv_geom_fits(op, g);
}

/* y [N, C, H, W] from dense x [N, K, OH, OW] and w, plus the bias b (NULL:
 * none): the convolution's dx step. */
static int
convt_run(cg__conv_algorithm algo, const cg__conv_geom *g, cg_tensor *x,
          cg_tensor *w, cg_tensor *b, cg_tensor *y)
{
    cg_tensor *db;
    int status;

    if (algo == CG__CONV_IM2COL) {
        status = cg__conv_backward_im2col(g, NULL, w, x, y, NULL, NULL,
                                          0);
        return status == CG_OK && b ? cg__conv_add_bias(y, b) : status;
    }
    db = b ? cg__dense(b) : NULL;
    if (b && !db)
        return cg__last_status();
    status = cg__conv_direct(x->ctx, CG__K_CONV_DIRECT_DX, x->dtype, g,
                             cg__tensor_mem(x), cg__tensor_mem(w),
                             cg__tensor_mem(y), db,
                             cg__conv_direct_dx_items(g));
    cg_tensor_free(db);
    return status;
}

/* dx (the convolution of dy) and dw (the convolution's dW with x as its
 * dY and dy as its input), either NULL; x, w and dy dense. */
static int
convt_grads(cg__conv_algorithm algo, const cg__conv_geom *g, cg_tensor *x,
            cg_tensor *w, cg_tensor *dy, cg_tensor *dx, cg_tensor *dw)
{
    cg_context *ctx = dy->ctx;
    int status = CG_OK;

    if (algo == CG__CONV_IM2COL) {
        if (dx)
            status = cg__conv_forward_im2col(g, dy, w, NULL, dx, NULL);
        if (status == CG_OK && dw)
            status = cg__conv_backward_im2col(g, dy, w, x, NULL, dw, NULL,
                                              0);
        return status;
    }
    if (dx)
        status = cg__conv_direct(ctx, CG__K_CONV_DIRECT_FWD, dy->dtype, g,
                                 cg__tensor_mem(dy), cg__tensor_mem(w),
                                 cg__tensor_mem(dx), NULL,
                                 cg__conv_direct_fwd_items(g));
    if (status == CG_OK && dw)
        status = cg__conv_direct(ctx, CG__K_CONV_DIRECT_DW, dy->dtype, g,
                                 cg__tensor_mem(x), cg__tensor_mem(dy),
                                 cg__tensor_mem(dw), NULL,
                                 (size_t)(g->K * (g->C / g->G) * g->R *
                                          g->S));
    return status;
}

static int
convt_backward(cg__node *node, cg_tensor *dy, cg_tensor **gin)
{
    cg_tensor *gd = NULL;
    cg__conv_geom g;
    cg__conv_algorithm algo;
    int status = cg__conv_grads_begin(node, dy, gin, &gd, &g);

    /* A 16-bit node comes from the direct forward only (convt_apply). */
    if (status == CG_OK && dy->dtype != CG_F32)
        algo = CG__CONV_DIRECT;
    else if (status == CG_OK)
        status = cg__conv_choose(dy->ctx, CG__CONV_TBWD, &g, &algo);
    if (status == CG_OK && (gin[0] || gin[1]))
        status = convt_grads(algo, &g, node->saved[0], node->saved[1], gd,
                             gin[0], gin[1]);
    return cg__conv_grads_end(node, gd, gin, status);
}

/* The op once its arguments are checked: y from dense x and w, the bias,
 * the graph node (g, x and w saved). */
static cg_tensor *
convt_apply(const char *op, const cg__conv_geom *geom, cg_tensor *x,
            cg_tensor *w, cg_tensor *b)
{
    cg_tensor *in[3] = { x, w, b }, *dx = NULL, *dw = NULL, *y = NULL;
    int64_t shape[4] = { geom->N, geom->C, geom->H, geom->W };
    cg__conv_geom g_ = *geom, *g = &g_;    /* with the choice's no_shift */
    cg__conv_algorithm algo;
    int status;

    /* 16 bits: the float32 choice (not cg_conv2d's "direct for 16
     * bits"): conv_direct_dx, this forward, is far slower than im2col +
     * GEMM where the channels are many (35x at 64 -> 32 channels) */
    if (cg__conv_choose(x->ctx, CG__CONV_TFWD, g, &algo))
        return NULL;
    if (x->dtype != CG_F32 && algo != CG__CONV_DIRECT)
        return cg__conv_via_f32(convt_apply, op, g, x, w, b);
    dx = cg__dense(x);
    dw = dx ? cg__dense(w) : NULL;
    y = dw ? cg__tensor_empty(x->ctx, x->dtype, 4, shape) : NULL;
    status = y ? convt_run(algo, g, dx, dw, b, y) : cg__last_status();
    if (status == CG_OK)
        status = cg__conv_record(y, op, convt_backward, g, in, dx, dw, NULL);
    cg_tensor_free(dx);
    cg_tensor_free(dw);
    if (status) {
        cg_tensor_free(y);
        return NULL;
    }
    return y;
}

cg_tensor *
cg_conv_transpose2d(cg_tensor *x, cg_tensor *weight, cg_tensor *bias,
                    const cg_conv_transpose_options *opts)
{
    cg__conv_geom g;
    cg_tensor *ac[3];

    CG__AUTOCAST_RETURN(CG__AC_LOW, ac,
                        cg_conv_transpose2d(ac[0], ac[1], ac[2], opts),
                        x, weight, bias);
    cg__error_clear();
    if (convt_check(x, weight, bias, opts, &g))
        return NULL;
    return convt_apply("conv_transpose2d", &g, x, weight, bias);
}

const char *
cg_conv_transpose2d_algorithm(cg_context *ctx, int backward,
                              int64_t in_channels, int64_t out_channels,
                              int groups)
{
    int a;

    cg__error_clear();
    if (!ctx) {
        cg__error(CG_EINVAL, "context is NULL");
        return NULL;
    }
    /* The convolution it transposes: from out_channels to in_channels. */
    if (cg__conv_algo(ctx, backward ? CG__CONV_TBWD : CG__CONV_TFWD,
                      out_channels, in_channels, groups ? groups : 1, &a))
        return NULL;
    return a == CG__CONV_DIRECT ? "direct" : "im2col";
}

cg_tensor *
cg__convt_geom_apply(const char *op, const cg__conv_geom *g, cg_tensor *x,
                     cg_tensor *w)
{
    return convt_apply(op, g, x, w, NULL);
}
