/* SPDX-License-Identifier: MIT */
/*
 * lib/ops/conv.c - 2-D and 1-D convolution (NCHW / NCL, PyTorch's
 * cross-correlation) with stride, padding ("same" included), dilation,
 * groups and an optional bias, forward and backward; and the steps of
 * both algorithms, which 2-D transposed convolution (conv_transpose.c)
 * shares through conv_internal.h.
 *
 * Two algorithms, chosen per call and direction by cg__conv_choose:
 *
 * im2col + SGEMM (kernels/conv.cl for the column transforms,
 * lib/ops/gemm.c's batched entry for the products), over chunks of images
 * whose column buffer stays below a limit (an eighth of the device's
 * global memory, or what cg__conv_set_col_limit says), so memory is
 * bounded whatever the batch.
 *
 *   forward:  the chunk's columns [C R S][n P] (rows padded where n P
 *             floats are a multiple of 1 KiB: col_ld); per image, Y_g
 *             (Kg x P) = W_g (Kg x Cg R S) col_g, batched over the
 *             groups (and over the images of a chunk when groups = 1, W
 *             repeated with stride 0); then the bias.  When the whole
 *             batch is one chunk of at most 1/32 of the device memory
 *             and the weight needs a gradient, the columns stay in the
 *             graph node.  Otherwise, with groups 1, where the GEMM's
 *             choice for the product is not CLBlast, the columns are
 *             written as the packed kernels' operand B and multiplied
 *             there (forward_packed).  Before all that, at stride 1 with
 *             groups 1, where shifts says so (the packed kernels' product,
 *             128 taps or more), no columns at all: the product reads
 *             them in place from a zero-padded copy of x (forward_shift,
 *             gemm_shift, which adds the bias too).
 *   backward: the chunk's dY is laid out [K][n P] (one copy), its columns
 *             [C R S][n P] (the forward's, when kept); then dcol_g = W_g^T
 *             dY_g (col2im adds it up into dx) and dW_g += dY_g col_g^T -
 *             one GEMM per chunk over all its images, batched over the
 *             groups.  Where shifts says so, dW^T instead = the taps'
 *             rows of x's padded planes times dY's, read in place, one
 *             product over the batch (dw_shift, gemm_shift_dw; x's
 *             planes the forward's, kept), and dx the same product as
 *             the forward's on dY's padded planes by the weights turned
 *             half a turn (dx_shift), adding into a gradient already
 *             collected; dx and dW share dY's planes where their grids
 *             agree.  db sums dY over OH, OW, then over N.
 *
 * direct (kernels/conv.cl's conv_direct_*): one kernel each for y, dx and
 * dW, no column buffer, each sum in a fixed order.  It wins where the
 * GEMM would be thin - depthwise (one input channel per group) and few
 * channels per group - and is correct for every shape.
 *
 * The choice: CLGRAD_CONV_ALGO=im2col|direct|auto in the environment
 * (read at each call; anything else fails the call with a message) forces
 * one; otherwise the tuning entry of the shape class (kernel "conv",
 * shape "fwd.depthwise" ... "bwd.large", lib/tune/conv_class.c; "algo" 0
 * im2col, 1 direct), else the built-in rule: direct for depthwise, im2col
 * for the rest (measured on PoCL, see the ChangeLog).  A weight of
 * INT_MAX elements or more, which the direct kernels cannot index, runs
 * im2col whatever is chosen.
 *
 * conv_transpose2d (lib/ops/conv_transpose.c) runs the same steps of
 * either algorithm on the geometry of the convolution it transposes
 * (lib/ops/conv_internal.h).
 */
#include "config.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "ops/conv_internal.h"
#include "tune/internal.h"

const char *const cg__conv_algo_names[4] = {
    "im2col", "direct", "auto", "fft"
};

/* 0: an eighth of the device memory. */
static size_t col_limit_bytes;

void
cg__conv_set_col_limit(size_t bytes)
{
    col_limit_bytes = bytes;
}

/* Images per chunk: as many as keep the column buffer under the limit. */
static int64_t
chunk_images(cg_context *ctx, const cg__conv_geom *g)
{
    size_t limit = col_limit_bytes ? col_limit_bytes
                 : (size_t)(ctx->info.global_mem_size / 8);
    int64_t per = g->C * g->R * g->S * g->OH * g->OW * 4, n;

    /* The kernels index a chunk's columns with ints. */
    if (limit / 4 >= (size_t)INT_MAX)
        limit = ((size_t)INT_MAX - 1) * 4;
    n = per > 0 ? (int64_t)(limit / (size_t)per) : g->N;
    if (n < 1)
        n = 1;
    return n > g->N ? g->N : n;
}

/* The algorithm for one direction of a convolution (see the top), for
 * every dtype: 16-bit tensors follow float32's choice (the caller runs
 * im2col on float32 copies; in 16 bits the direct kernels ran 3 to 40
 * times slower than that on the CNN's layers, where float32 picks
 * im2col).  A transposed convolution's class is that of the convolution
 * it transposes (g's C and G). */
int
cg__conv_choose(cg_context *ctx, int dir, cg__conv_geom *g,
                cg__conv_algorithm *out)
{
    const cg_tuning_entry *e;
    char name[32];
    long a;
    int cls, v = 2, set, status;

    /* fft is conv1d's (cg__conv1d_fft_choose): the others go on as auto */
    if ((status = cg__env_choice("CLGRAD_CONV_ALGO", cg__conv_algo_names, 4,
                                 &v, &set)))
        return status;
    cls = cg__conv_class(dir, g->C, g->G);
    e = cg__tuning_find(ctx, "conv",
                        cg__conv_class_name(cls, name, sizeof name));
    if (set && v < 2)
        *out = v ? CG__CONV_DIRECT : CG__CONV_IM2COL;
    else if (e && cg__tuning_param(e, "algo", &a))
        *out = a ? CG__CONV_DIRECT : CG__CONV_IM2COL;
    else
        *out = cls % 3 == 0 ? CG__CONV_DIRECT : CG__CONV_IM2COL;
    g->no_shift = !(set && v < 2) && e && cg__tuning_param(e, "shift", &a) &&
                  a == 0;
    /* conv_direct_dw indexes the weight with ints; the rest fits (the
     * checks of x, y and the columns) */
    if ((double)g->K * (double)(g->C / g->G) * (double)(g->R * g->S) >=
        (double)INT_MAX)
        *out = CG__CONV_IM2COL;
    return CG_OK;
}

int
cg__conv_algo(cg_context *ctx, int dir, int64_t C, int64_t K, int64_t G,
              int *algo)
{
    cg__conv_geom g;
    cg__conv_algorithm a;
    int status;

    if (G < 1 || C < 1 || K < 1 || C % G || K % G)
        return cg__error(CG_EINVAL, "conv: channels %lld, %lld and groups "
                         "%lld", (long long)C, (long long)K, (long long)G);
    memset(&g, 0, sizeof g);
    g.C = C;
    g.K = K;
    g.G = G;
    if ((status = cg__conv_choose(ctx, dir, &g, &a)))
        return status;
    *algo = (int)a;
    return CG_OK;
}

const char *
cg_conv2d_algorithm(cg_context *ctx, int backward, int64_t in_channels,
                    int64_t out_channels, int groups)
{
    int a;

    cg__error_clear();
    if (!ctx) {
        cg__error(CG_EINVAL, "context is NULL");
        return NULL;
    }
    if (cg__conv_algo(ctx, backward ? CG__CONV_BWD : CG__CONV_FWD,
                      in_channels, out_channels, groups ? groups : 1, &a))
        return NULL;
    return a == CG__CONV_DIRECT ? "direct" : "im2col";
}

const char *
cg_conv1d_algorithm(cg_context *ctx, int backward, int64_t in_channels,
                    int64_t out_channels, int groups, int64_t kernel_length)
{
    cg__conv_geom g;
    int fft;

    cg__error_clear();
    if (!ctx) {
        cg__error(CG_EINVAL, "context is NULL");
        return NULL;
    }
    if (kernel_length < 1) {
        cg__error(CG_EINVAL, "conv1d: kernel length %lld < 1",
                  (long long)kernel_length);
        return NULL;
    }
    memset(&g, 0, sizeof g);
    g.S = kernel_length;
    g.dw = 1;
    if (!cg_conv2d_algorithm(ctx, backward, in_channels, out_channels,
                             groups) ||
        cg__conv1d_fft_choose(ctx, &g, &fft))
        return NULL;
    return fft ? "fft" : cg_conv2d_algorithm(ctx, backward, in_channels,
                                             out_channels, groups);
}

/* Product of the n values, or CG_ESHAPE when it overflows or reaches
 * INT_MAX (the kernels index with ints). */
static int
fits(const char *what, int n, const int64_t *v)
{
    int64_t p = 1;
    int k;

    for (k = 0; k < n; k++)
        if (cg__checked_mul_i64(p, v[k], &p, what))
            return cg__last_status();
    if (p >= INT_MAX)
        return cg__error(CG_ESHAPE, "%s: %lld elements exceed the kernels' "
                         "int indexing", what, (long long)p);
    return CG_OK;
}

/* One spatial dimension: padding, output size; CG_ESHAPE with the
 * formula's values when the kernel does not fit. */
static int
conv_dim(const char *op, const char *name, int64_t in, int64_t k, int st,
         int pad, int dil, int same, int64_t *ppad, int64_t *out)
{
    int64_t eff = (int64_t)dil * (k - 1) + 1, total;

    total = same ? eff - 1 : 2 * (int64_t)pad;
    *ppad = same ? total / 2 : pad;
    if (eff > in + total)
        return cg__error(CG_ESHAPE, "%s: dilated kernel %s %lld (dilation "
                         "%d * (%lld - 1) + 1) is larger than the padded "
                         "input %lld (%lld + padding %lld)", op, name,
                         (long long)eff, dil, (long long)k,
                         (long long)(in + total), (long long)in,
                         (long long)total);
    *out = (in + total - eff) / st + 1;
    if (*out < 1)
        return cg__error(CG_ESHAPE, "%s: output %s (%lld + %lld - %lld) / %d "
                         "+ 1 = %lld < 1", op, name, (long long)in,
                         (long long)total, (long long)eff, st,
                         (long long)*out);
    return CG_OK;
}

static int
one_d(const char *op)
{
    return strcmp(op, "conv1d") == 0;
}

/* t's shape as the caller wrote it: conv1d's [N, C, 1, L] views without
 * their inserted 1. */
static const char *
user_shape(const char *op, const cg_tensor *t, char *buf, size_t size)
{
    int64_t s[3];

    if (!one_d(op) || t->ndim != 4)
        return cg__shape_str(t->ndim, t->shape, buf, size);
    s[0] = t->shape[0];
    s[1] = t->shape[1];
    s[2] = t->shape[3];
    return cg__shape_str(3, s, buf, size);
}

/* The checks every convolution starts with: the tensors, one context,
 * x and w 4-D (conv1d's views of 3-D ones). */
int
cg__conv_tensors(const char *op, cg_tensor *x, cg_tensor *w, cg_tensor *b)
{
    cg_tensor *all[3] = { x, w, b };
    char s1[128], s2[128];
    int status;

    if ((status = cg__check_tensor(x, "input", CG__FLOAT_DTYPE)) ||
        (status = cg__check_tensor(w, "weight", CG__FLOAT_DTYPE)) ||
        (b && (status = cg__check_tensor(b, "bias", CG__FLOAT_DTYPE))) ||
        (status = cg__same_context(b ? 3 : 2,
                                   (const cg_tensor *const *)all)) ||
        (status = cg__check_same_dtype(x, "input", w, "weight")) ||
        (b && (status = cg__check_same_dtype(x, "input", b, "bias"))))
        return status;
    if (x->ndim != 4 || w->ndim != 4)
        return cg__error(CG_ESHAPE, "%s: input %s and weight %s must have %d "
                         "dimensions", op, user_shape(op, x, s1, sizeof s1),
                         user_shape(op, w, s2, sizeof s2), one_d(op) ? 3 : 4);
    return CG_OK;
}

/* b, when given, must be [K], the output channels. */
int
cg__conv_bias_check(const char *op, const cg_tensor *b, const cg_tensor *w,
                    const cg__conv_geom *g, int64_t K)
{
    char s1[128], s2[128];

    if (!b || (b->ndim == 1 && b->shape[0] == K))
        return CG_OK;
    return cg__error(CG_ESHAPE, "%s: bias %s must be [%lld], the output "
                     "channels (weight %s, groups %lld)", op,
                     cg__shape_str(b->ndim, b->shape, s1, sizeof s1),
                     (long long)K, user_shape(op, w, s2, sizeof s2),
                     (long long)g->G);
}

/* x [N, C, H, W], y [N, K, OH, OW] and one image's columns must fit the
 * kernels' ints. */
int
cg__conv_geom_fits(const char *op, const cg__conv_geom *g)
{
    int64_t xs[4] = { g->N, g->C, g->H, g->W };
    int64_t ys[4] = { g->N, g->K, g->OH, g->OW };
    int64_t cs[5] = { g->C, g->R, g->S, g->OH, g->OW };
    int status;

    if ((status = fits(op, 4, xs)) || (status = fits(op, 4, ys)))
        return status;
    return fits(op, 5, cs);
}

static int
conv_check(const char *op, cg_tensor *x, cg_tensor *w, cg_tensor *b,
           const cg_conv_options *o, cg__conv_geom *g)
{
    cg_conv_options d = { { 0, 0 }, { 0, 0 }, { 0, 0 }, 0, 0 };
    char s1[128], s2[128];
    int status, k;

    if ((status = cg__conv_tensors(op, x, w, b)))
        return status;
    if (!o)
        o = &d;
    for (k = 0; k < 2; k++)
        if (o->stride[k] < 0 || o->dilation[k] < 0 || o->padding[k] < 0 ||
            o->groups < 0)
            return cg__error(CG_EINVAL, "%s: stride %d, padding %d, dilation "
                             "%d and groups %d must not be negative", op,
                             o->stride[k], o->padding[k], o->dilation[k],
                             o->groups);
    user_shape(op, x, s1, sizeof s1);
    user_shape(op, w, s2, sizeof s2);
    g->N = x->shape[0]; g->C = x->shape[1];
    g->H = x->shape[2]; g->W = x->shape[3];
    g->no_shift = 0;
    g->K = w->shape[0]; g->R = w->shape[2]; g->S = w->shape[3];
    g->sh = cg__conv_opt_or(o->stride[0], 1);
    g->sw = cg__conv_opt_or(o->stride[1], 1);
    g->dh = cg__conv_opt_or(o->dilation[0], 1);
    g->dw = cg__conv_opt_or(o->dilation[1], 1);
    g->G = cg__conv_opt_or(o->groups, 1);
    if (o->padding_same && (g->sh != 1 || g->sw != 1))
        return cg__error(CG_EINVAL, "%s: padding \"same\" needs stride 1, "
                         "not %lld, %lld", op, (long long)g->sh,
                         (long long)g->sw);
    if (g->C % g->G || g->K % g->G)
        return cg__error(CG_ESHAPE, "%s: groups %lld must divide the input "
                         "channels of %s (%lld) and the output channels of "
                         "weight %s (%lld)", op, (long long)g->G, s1,
                         (long long)g->C, s2, (long long)g->K);
    if (w->shape[1] * g->G != g->C)
        return cg__error(CG_ESHAPE, "%s: weight %s has %lld input channels "
                         "per group, input %s has %lld / groups %lld = %lld",
                         op, s2, (long long)w->shape[1], s1, (long long)g->C,
                         (long long)g->G, (long long)(g->C / g->G));
    if ((status = cg__conv_bias_check(op, b, w, g, g->K)) ||
        (status = conv_dim(op, "height", g->H, g->R, (int)g->sh,
                           o->padding[0], (int)g->dh, o->padding_same,
                           &g->ph, &g->OH)) ||
        (status = conv_dim(op, one_d(op) ? "length" : "width", g->W, g->S,
                           (int)g->sw, o->padding[1], (int)g->dw,
                           o->padding_same, &g->pw, &g->OW)))
        return status;
    return cg__conv_geom_fits(op, g);
}

/* Output rows of the columns per work-item of conv_im2col, rows of dx
 * per work-item of conv_col2im (kernels/conv.cl's IM2COL_ROWS and
 * COL2IM_ROWS). */
#define IM2COL_ROWS 8
#define COL2IM_ROWS 8
/* Groups of 8 columns per work-item of conv_im2col_packed (its
 * IM2COL_GROUPS). */
#define IM2COL_GROUPS 16

/* Enqueues im2col (kid CG__K_CONV_IM2COL), conv_im2col_packed or col2im
 * of images n0 .. n0 + nimg - 1 with layout (cn, ld). */
static int
columns(cg_context *ctx, cg__kid kid, const cg__conv_geom *g, cl_mem img,
        cl_mem col, int64_t n0, int64_t nimg, int64_t cn, int64_t ld)
{
    cl_int v[17] = {
        (cl_int)g->C, (cl_int)g->H, (cl_int)g->W, (cl_int)g->R,
        (cl_int)g->S, (cl_int)g->OH, (cl_int)g->OW, (cl_int)g->sh,
        (cl_int)g->sw, (cl_int)g->ph, (cl_int)g->pw, (cl_int)g->dh,
        (cl_int)g->dw, (cl_int)cn, (cl_int)ld, (cl_int)n0, (cl_int)nimg
    };
    cg__arg_list l = { .n = 0 };
    size_t n;
    cl_kernel k;
    int status, j;

    if (kid == CG__K_CONV_IM2COL) {
        CG__PUSH(&l, img);
        CG__PUSH(&l, col);
        n = (size_t)(nimg * g->C * g->R * g->S *
                     ((g->OH + IM2COL_ROWS - 1) / IM2COL_ROWS));
    } else if (kid == CG__K_CONV_IM2COL_PACKED) {
        /* ld: the panel width; an item per IM2COL_GROUPS groups of 8
         * columns of whole panels */
        size_t ng = (size_t)((g->OH * g->OW + ld - 1) / ld * ld / 8);

        CG__PUSH(&l, img);
        CG__PUSH(&l, col);
        n = (size_t)(nimg * g->C * g->R) *
            ((ng + IM2COL_GROUPS - 1) / IM2COL_GROUPS);
    } else {
        CG__PUSH(&l, col);
        CG__PUSH(&l, img);
        n = (size_t)(nimg * g->C * ((g->H + COL2IM_ROWS - 1) /
                                    COL2IM_ROWS));
    }
    for (j = 0; j < 17; j++)
        CG__PUSH(&l, v[j]);
    status = cg__kernel(ctx, kid, &k);
    if (status == CG_OK)
        status = cg__set_args(k, l.a, l.n);
    if (status == CG_OK)
        status = cg__launch1d(ctx, k, n, CG__WG);
    return status;
}

/* y [N, K, OH, OW] += b [K] along dimension 1; b may be any view. */
int
cg__conv_add_bias(cg_tensor *y, cg_tensor *b)
{
    cl_int K = (cl_int)y->shape[1], P = (cl_int)(y->shape[2] * y->shape[3]);
    cl_int ch = 64;     /* elements of a plane per work-item */
    cg_tensor *db = cg__dense(b);
    cl_mem my = cg__tensor_mem(y), mb;
    cl_kernel k;
    int status = db ? cg__kernel_dt(y->ctx, CG__K_CONV_BIAS, y->dtype, &k)
                    : cg__last_status();

    mb = db ? cg__tensor_mem(db) : NULL;
    if (status == CG_OK)
        status = cg__args(k, CG__ARG(my), CG__ARG(mb), CG__ARG(K),
                          CG__ARG(P), CG__ARG(ch));
    if (status == CG_OK)
        status = cg__launch_chunks(y->ctx, k, (size_t)P,
                                   (size_t)(y->shape[0] * K), (size_t)ch,
                                   CG__WG);
    cg_tensor_free(db);
    return status;
}

/* Work-items per compute unit the direct kernels' row pieces aim at
 * (direct_items when set: cg__conv_set_direct_items). */
#define DIRECT_ITEMS_PER_CU 1024
static size_t direct_items;

void
cg__conv_set_direct_items(size_t per_cu)
{
    direct_items = per_cu;
}

/* The piece of a row of len outputs (a multiple of kernels/conv.cl's
 * CONV_VW, 8) that a work-item of conv_direct_fwd or conv_direct_dx
 * takes when n work-items would take a row each: the whole row where n
 * reaches DIRECT_ITEMS_PER_CU per compute unit, else pieces enough for
 * that many items, down to 8 outputs.  On an NVIDIA H200 (132 compute
 * units) a depthwise conv1d of N1 C64 L4096 with a kernel of 4096 took
 * 699 ms a row each (64 work-items); PoCL's 2 compute units keep whole
 * rows from 2048 items up.  Each output is the same sum whatever the
 * pieces. */
static int64_t
piece_length(const cg_context *ctx, size_t n, int64_t len)
{
    size_t cu = ctx->info.compute_units ? ctx->info.compute_units : 1;
    size_t per = direct_items ? direct_items : DIRECT_ITEMS_PER_CU;
    size_t target = per > SIZE_MAX / cu ? SIZE_MAX : per * cu;
    int64_t blocks = (len + 7) / 8, parts;

    if (n == 0 || n >= target || blocks <= 1)
        return blocks * 8;
    parts = (int64_t)(target / n + (target % n != 0));
    if (parts > blocks)
        parts = blocks;
    return (blocks + parts - 1) / parts * 8;
}

int
cg__conv_direct(cg_context *ctx, cg__kid kid, cg_dtype dt,
                const cg__conv_geom *g, cl_mem a, cl_mem b, cl_mem out,
                const cg_tensor *bias, size_t n)
{
    cl_int v[16] = {
        (cl_int)g->N, (cl_int)g->C, (cl_int)g->H, (cl_int)g->W,
        (cl_int)g->K, (cl_int)g->R, (cl_int)g->S, (cl_int)g->OH,
        (cl_int)g->OW, (cl_int)g->sh, (cl_int)g->sw, (cl_int)g->ph,
        (cl_int)g->pw, (cl_int)g->dh, (cl_int)g->dw, (cl_int)g->G
    };
    cg__arg_list l = { .n = 0 };
    cl_mem mb = bias ? cg__tensor_mem(bias) : out;
    cl_int has_bias = bias != NULL, pl;
    int64_t len = kid == CG__K_CONV_DIRECT_FWD ? g->OW : g->W;
    cl_kernel k;
    int status, j;

    CG__PUSH(&l, a);
    CG__PUSH(&l, b);
    CG__PUSH(&l, out);
    for (j = 0; j < 16; j++)
        CG__PUSH(&l, v[j]);
    if (kid != CG__K_CONV_DIRECT_DW) {
        pl = (cl_int)piece_length(ctx, n, len);
        n *= (size_t)((len + pl - 1) / pl);
        CG__PUSH(&l, mb);
        CG__PUSH(&l, has_bias);
        CG__PUSH(&l, pl);
    }
    status = cg__kernel_dt(ctx, kid, dt, &k);
    if (status == CG_OK)
        status = cg__set_args(k, l.a, l.n);
    if (status == CG_OK && n)
        status = cg__launch1d(ctx, k, n, CG__WG);
    return status;
}

/* Whether the direct kernels' 3 x 3 path applies (kernels/conv.cl's
 * S1_3X3: a 3 x 3 kernel at stride and dilation 1), where a work-item
 * takes DW3_ROWS (4) output rows: conv_direct_dx's always then,
 * conv_direct_fwd's where its blocks of output channels are of 1. */
static int
rows3_path(const cg__conv_geom *g)
{
    return g->R == 3 && g->S == 3 && g->sh == 1 && g->sw == 1 &&
           g->dh == 1 && g->dw == 1;
}

/* conv_direct_fwd's blocks of output channels per group are of CONV_KT
 * (4) channels when a group has that many, else of 1; its items take an
 * output row each, or 4 rows on the 3 x 3 path (blocks of 1 only). */
size_t
cg__conv_direct_fwd_items(const cg__conv_geom *g)
{
    int64_t Kg = g->K / g->G, blocks = Kg >= 4 ? (Kg + 3) / 4 : Kg;

    return (size_t)(g->N * g->G * blocks *
                    (Kg < 4 && rows3_path(g) ? (g->OH + 3) / 4 : g->OH));
}

/* conv_direct_dx's items: a row of dx each (N C H of them), or 4 rows
 * on the 3 x 3 path (any groups). */
size_t
cg__conv_direct_dx_items(const cg__conv_geom *g)
{
    return (size_t)(g->N * g->C * (rows3_path(g) ? (g->H + 3) / 4 : g->H));
}

/* The row length of the column buffers (forward and backward) of `rows`
 * rows of q columns: q, or q + 16 where q floats are a multiple of 1 KiB
 * (and the whole still fits an int).  At a row length of 64 KiB (16
 * images of 32 x 32 outputs) the products that read or write the columns
 * walk rows in the same cache sets (N16 C3 64x64 K32 7x7 stride 2 on the
 * 2-core AVX2 machine, three alternating runs: the input gradient's
 * product 4.1-5.2 ms unpadded, 3.7-4.3 ms padded). */
static size_t
col_ld(size_t rows, size_t q)
{
    size_t l = q % 256 ? q : q + 16;

    return (double)rows * (double)l < (double)INT_MAX ? l : q;
}

/* Floats in a column buffer of n images of g. */
static int64_t
col_numel(const cg__conv_geom *g, int64_t n)
{
    size_t crs = (size_t)(g->C * g->R * g->S);

    return (int64_t)(crs * col_ld(crs, (size_t)(n * g->OH * g->OW)));
}

/* The column buffer of a forward pass over the whole batch is kept for
 * the weight gradient (saving backward's im2col) when it is at most this
 * fraction of the device memory. */
#define KEEP_COLS_FRACTION 32

/* y = conv(x, w) for groups 1 by conv_im2col_packed and gemm_packed, chunk
 * by chunk: each image's columns written as the product's packed operand
 * B, no column buffer and no pack of it.  On the 2-core AVX2 PoCL 3.1
 * machine, ms per forward (20 in a row, wall clock), three runs each,
 * im2col + gemm.cl's product (the GEMM class's choice there) / this: N8
 * C64 28x28 K64 3x3 6.9-7.4 / 4.9-5.9 (device ms: conv_im2col 1.6-1.7,
 * conv_im2col_packed 1.5-2.2, the product 5.2-5.5 in gemm.cl, 3.3-3.7
 * packed; packing the column buffer instead, gemm_pack_b took 1.6-2.2),
 * the CNN's N32 3x32x32 K32 1.0-1.5 / 0.8-0.9, 32x16x16 K64 4.2-5.5 /
 * 2.6-3.5, 64x8x8 K64 2.7-3.2 / 1.6-2.0, N16 C3 64x64 K32 7x7 stride 2
 * 2.4-3.6 / 2.3-2.9.  Where the weight gradient needs the columns, they
 * are made, kept and multiplied in place as before: without them the
 * backward's own im2col cost about what this forward gains (ms per
 * weight gradient without / with them, the least of three runs, in the
 * four 3 x 3 layers above: 6.3 / 4.6, 2.1 / 1.8, 4.5 / 3.3, 3.3 / 1.6; a
 * net gain only in the 16 x 16 one). */
static int
forward_packed(const cg__conv_geom *g, cg_tensor *x, cg_tensor *w,
               cg_tensor *y)
{
    cg_context *ctx = x->ctx;
    size_t P = (size_t)(g->OH * g->OW), K = (size_t)g->K;
    size_t CRS = (size_t)(g->C * g->R * g->S), nr = cg__gemm_packed_nr(ctx);
    size_t spb = (P + nr - 1) / nr * nr * CRS;
    int64_t nc = chunk_images(ctx, g), n0, n;
    cg_buffer *pb;
    cl_mem mx = cg__tensor_mem(x), mw = cg__tensor_mem(w);
    cl_mem my = cg__tensor_mem(y);
    int status = CG_OK;

    if (nc > 1 && (double)spb * (double)nc >= (double)INT_MAX)
        nc = (int64_t)(((size_t)INT_MAX - 1) / spb);
    if (nc < 1 || (double)spb >= (double)INT_MAX)
        return cg__error(CG_EUNSUPPORTED, "conv: an image's packed columns "
                         "(%zu floats) that an int does not index", spb);
    if (!(pb = cg__buffer_new(ctx, (size_t)nc * spb * sizeof(float))))
        return cg__last_status();
    for (n0 = 0; status == CG_OK && n0 < g->N; n0 += nc) {
        cg__mat a = { mw, 0, CRS }, c = { my, (size_t)n0 * K * P, P };

        n = g->N - n0 < nc ? g->N - n0 : nc;
        status = columns(ctx, CG__K_CONV_IM2COL_PACKED, g, mx,
                         cg__buffer_mem(pb), n0, n, (int64_t)spb,
                         (int64_t)nr);
        if (status == CG_OK)
            status = cg__gemm_packed_bs(ctx, K, P, CRS, a,
                                        cg__buffer_mem(pb), spb, c, K * P,
                                        (size_t)n);
    }
    cg_buffer_free(pb);
    return status;
}

/* cg__conv_set_shift's mode: -1 the rule, 0 never, 1 wherever it can. */
static int shift_mode = -1;

void
cg__conv_set_shift(int mode)
{
    shift_mode = mode < 0 ? -1 : mode != 0;
}

/* The rule's least taps per output (C R S) for forward_shift, no 1 x 1
 * kernels, and at most SHIFT_MAX_GRID padded pixels per output pixel
 * (the products compute them all: 2.25 for 4 x 4 outputs padded by 1,
 * where clgrad-train's CNN on data/digits.csv took 6% longer a run; 1.56
 * for 8 x 8, level below).  On the 2-core AVX2 PoCL 3.1 machine, ms per
 * forward
 * (device time, 20 in a row, two or three runs), the packed columns /
 * this: N8 C64 28x28 K64 3x3 6.3-9.5 / 4.8-5.8, N32 32x16x16 K64
 * 4.2-5.0 / 4.1-4.9, N32 64x8x8 K64 2.5-3.1 / 2.3-3.0, N32 16x16x16 K16
 * 1.1-1.4 / 1.1-1.3, N8 32x28x28 K32 5x5 7.0-7.5 / 3.3-3.8; slower at
 * N32 8x32x32 K16 (72 taps) 1.3-3.4 / 1.8-2.1, N32 3x32x32 K32 (27)
 * 1.6-2.2 / 2.7-3.7 and N8 C64 28x28 1 x 1 1.3-1.7 / 1.7-2.1. */
#define SHIFT_MIN_TAPS 128
#define SHIFT_MAX_GRID 1.6

/* The grid of the stride-1 kernels' padded planes for g: Hp = OH + dh (R
 * - 1) rows of Wp = OW + dw (S - 1), the windows of g's output. */
static int64_t
grid_rows(const cg__conv_geom *g)
{
    return g->OH + g->dh * (g->R - 1);
}

static int64_t
grid_cols(const cg__conv_geom *g)
{
    return g->OW + g->dw * (g->S - 1);
}

/* Whether y = conv(x, w) of g goes by forward_shift, and dW by dw_shift
 * (*yes): groups 1, stride 1, the padded grids of x, y and dy (and the
 * slack past them) indexed by ints, the product on clgrad's kernels (the
 * packed backend's, as forward_packed's), and cg__conv_set_shift, else
 * the class's tuning entry (g->no_shift: "shift" 0, never) and the
 * rule. */
static int
shifts(cg_context *ctx, const cg__conv_geom *g, int *yes)
{
    double hp = (double)grid_rows(g), wp = (double)grid_cols(g);
    int64_t taps = g->C * g->R * g->S;
    cg__gemm_backend use;
    int status;

    *yes = 0;
    if (shift_mode == 0 || (shift_mode < 0 && g->no_shift) ||
        g->G != 1 || g->sh != 1 || g->sw != 1 ||
        (shift_mode < 0 && (taps < SHIFT_MIN_TAPS || g->R * g->S == 1 ||
                            hp * wp > SHIFT_MAX_GRID *
                                      (double)(g->OH * g->OW))) ||
        (double)(g->H + g->ph) > hp || (double)(g->W + g->pw) > wp ||
        (double)(g->C > g->K ? g->C : g->K) * (double)g->N * hp * wp +
        hp * wp + 4096.0 >= (double)INT_MAX)
        return CG_OK;
    status = cg__gemm_backend_of(ctx, 0, 0, (size_t)g->K,
                                 (size_t)(g->OH * g->OW), (size_t)taps, 0,
                                 (size_t)g->N, &use);
    *yes = status == CG_OK && use != CG__GEMM_CLBLAST;
    return status;
}

int
cg__conv_shifts(cg_context *ctx, const cg__conv_geom *g, int *yes)
{
    return shifts(ctx, g, yes);
}

/* A tensor of len floats, zeros, and t's values (a view [N, C', H', W'])
 * laid out in it from element lead + (top, left) of planes hp x wp:
 * [N][C'][hp][wp] (each image's planes together), or with by_channel
 * [C'][N][hp][wp] (the channel's planes of all the batch together). */
static cg_tensor *
planes_of(const cg_tensor *t, int64_t hp, int64_t wp, int64_t top,
          int64_t left, int by_channel, int64_t lead, int64_t len)
{
    int64_t plane = hp * wp;
    int64_t strides[4] = { t->shape[1] * plane, plane, wp, 1 };
    cg_tensor *p = cg__tensor_empty(t->ctx, CG_F32, 1, &len), *v = NULL;
    int status = p ? cg__fill(p, 0.0f) : cg__last_status();

    if (by_channel) {
        strides[0] = plane;
        strides[1] = t->shape[0] * plane;
    }
    if (status == CG_OK &&
        !(v = cg__tensor_view(p, 4, t->shape, strides,
                              lead + top * wp + left)))
        status = cg__last_status();
    if (status == CG_OK)
        status = cg__copy_into(v, t);
    cg_tensor_free(v);
    if (status != CG_OK) {
        cg_tensor_free(p);
        return NULL;
    }
    return p;
}

/* The padded planes that the stride-1 kernels read for g's input, from
 * element lead on: [C][N][Hp][Wp] with Hp = OH + dh (R - 1), Wp = OW +
 * dw (S - 1), and slack past them for the rows that the products read
 * and do not store (a plane and a panel width of floats). */
static int64_t
planes_len(cg_context *ctx, const cg__conv_geom *g, int64_t lead)
{
    int64_t plane = grid_rows(g) * grid_cols(g);

    return lead + g->C * g->N * plane + plane +
           (int64_t)cg__gemm_packed_nr(ctx);
}

/* x, g's input, in planes_of's layout (with by_channel, channel-major)
 * of planes_len(g, lead) floats: its own padding at the top and left,
 * the rest of the grid at the bottom and right ("same" padding may be
 * uneven). */
static cg_tensor *
input_planes(const cg__conv_geom *g, const cg_tensor *x, int by_channel,
             int64_t lead)
{
    return planes_of(x, grid_rows(g), grid_cols(g), g->ph, g->pw,
                     by_channel, lead, planes_len(x->ctx, g, lead));
}

/* Where the input gradient's convolution (dx_shifts) finds dy in its
 * padded planes: at its padding d (R - 1) - p, an offset into a plane.
 * Where that convolution's grid is g's (stride 1, groups 1 and padding
 * 2 p = d (R - 1): dx the size of y), the same planes serve dW's product
 * (dw_shift) as its dy, x's planes laid out this many floats further on;
 * elsewhere -1. */
static int64_t
dy_lead(const cg__conv_geom *g)
{
    if (g->G != 1 || g->sh != 1 || g->sw != 1 ||
        2 * g->ph != g->dh * (g->R - 1) || 2 * g->pw != g->dw * (g->S - 1))
        return -1;
    return g->ph * grid_cols(g) + g->pw;
}

/* Where x's planes that the forward keeps for dW start in their buffer:
 * dy_lead's offset where dy's planes can be shared, else 0 (the forward
 * and the backward both take it from here). */
static int64_t
kept_lead(const cg__conv_geom *g)
{
    int64_t lead = dy_lead(g);

    return lead > 0 ? lead : 0;
}

/* y = conv(x, w) of g at stride 1 (shifts), plus beta y (0: y not
 * read), plus b (NULL: none), by gemm_shift on x's zero-padded planes xp
 * (input_planes, image-major or with by_channel channel-major) from
 * element xo: output (oh, ow) is pixel q = oh Wp + ow, and tap (c, r, s)
 * of its column reads image n's planes at c Hp Wp (channel-major: c N Hp
 * Wp) + r dh Wp + s dw + q, a 1-D shift (the columns between output rows
 * computed and not stored).  w dense, packed as B = w^T. */
static int
shift_product(const cg__conv_geom *g, cg_tensor *xp, int64_t xo,
              int by_channel, cg_tensor *w, cg_tensor *b, float beta,
              cg_tensor *y)
{
    cg_context *ctx = y->ctx;
    int64_t hp = grid_rows(g), wp = grid_cols(g);
    size_t P = (size_t)(g->OH * g->OW), CRS = (size_t)(g->C * g->R * g->S);
    cg__mat bm = { cg__tensor_mem(w), (size_t)w->offset, CRS };
    cg__mat c = { cg__tensor_mem(y), (size_t)y->offset, P };
    size_t plane = (size_t)(hp * wp), img = (size_t)g->C * plane;
    cg__shift_src src = { cg__tensor_mem(xp), (size_t)xo,
                          by_channel ? plane : img,
                          by_channel ? (size_t)g->N * plane : plane,
                          (size_t)(g->dh * wp), (size_t)g->dw };
    cg_tensor *db = b ? cg__dense(b) : NULL;
    cg__packed_b pb = { NULL, 0, 0, 0 };
    int status = b && !db ? cg__last_status() : CG_OK;

    if (status == CG_OK)
        status = cg__gemm_pack_b(ctx, CG_F32, 1, (size_t)g->K, CRS, bm,
                                 &pb);
    if (status == CG_OK)
        status = cg__gemm_shift(ctx, (size_t)((g->OH - 1) * wp + g->OW),
                                (size_t)g->C, (size_t)g->R, (size_t)g->S,
                                &pb, &src, c, (size_t)g->K * P, (size_t)wp,
                                (size_t)g->OW, (size_t)g->N, beta,
                                db ? cg__tensor_mem(db) : NULL,
                                db ? (size_t)db->offset : 0);
    cg__packed_b_free(&pb);
    cg_tensor_free(db);
    return status;
}

/* y = conv(x, w) + b (NULL: none) at stride 1 (shifts): x copied once
 * into zero-padded planes (input_planes) that shift_product reads in
 * place.  No column buffer.  With keep, the planes (laid out for
 * dw_shift: channel-major from kept_lead's offset) go to
 * *keep for the weight gradient where they are at most 1 /
 * KEEP_COLS_FRACTION of the device's memory. */
static int
forward_shift(const cg__conv_geom *g, cg_tensor *x, cg_tensor *w,
              cg_tensor *b, cg_tensor *y, cg_tensor **keep)
{
    cg_context *ctx = x->ctx;
    int64_t lead = kept_lead(g);
    cg_tensor *xp;
    int status;

    if (!keep || (uint64_t)planes_len(ctx, g, lead) * 4 >
                 ctx->info.global_mem_size / KEEP_COLS_FRACTION)
        lead = 0, keep = NULL;
    if (!(xp = input_planes(g, x, keep != NULL, lead)))
        return cg__last_status();
    status = shift_product(g, xp, lead, keep != NULL, w, b, 0.0f, y);
    if (status == CG_OK && keep) {
        *keep = xp;
        return CG_OK;
    }
    cg_tensor_free(xp);
    return status;
}

/* dW of g at stride 1 (shifts) by gemm_shift_dw: x's and dy's planes on
 * forward_shift's grid of Hp x Wp, channel-major (dy's values at (oh,
 * ow), zeros elsewhere), so that column q = n Hp Wp + oh Wp + ow of tap
 * (c, r, s) is x's element c N Hp Wp + r dh Wp + s dw + q, and dW^T (taps
 * x K) = those rows times dy's, one product over the whole batch; then
 * dW from dW^T.  No column buffer.  xp: x's planes from element xlead
 * (the forward's), or NULL to make them here; dyp: dy's planes with dy
 * at dylead into each (the input gradient's, dy_lead), or NULL to make
 * them here at 0.  A dy value at q + dylead meets x's planes at xlead +
 * q - dylead + the tap's offset. */
static int
dw_shift(const cg__conv_geom *g, cg_tensor *x, cg_tensor *xp, int64_t xlead,
         cg_tensor *dy, cg_tensor *dyp, int64_t dylead, cg_tensor *dw)
{
    cg_context *ctx = dy->ctx;
    int64_t hp = grid_rows(g), wp = grid_cols(g);
    int64_t Q = g->N * hp * wp, CRS = g->C * g->R * g->S;
    int64_t tshape[2] = { g->K, CRS }, tst[2] = { 1, g->K };
    int64_t dst[2] = { CRS, 1 }, tlen = g->K * CRS;
    cg_tensor *ox = NULL, *ody = NULL, *wt = NULL, *tv = NULL, *dv = NULL;
    cg__packed_b pb = { NULL, 0, 0, 0 };
    int status = CG_OK;

    if (!dyp) {
        dylead = 0;
        dyp = ody = planes_of(dy, hp, wp, 0, 0, 1, 0, g->K * Q);
    }
    if (dyp && !xp) {
        xlead = dylead;
        xp = ox = input_planes(g, x, 1, xlead);
    }
    if (!dyp || !xp || !(wt = cg__tensor_empty(ctx, CG_F32, 1, &tlen)))
        status = cg__last_status();
    if (status == CG_OK) {
        cg__mat b = { cg__tensor_mem(dyp), 0, (size_t)Q };

        status = cg__gemm_pack_b(ctx, CG_F32, 1, (size_t)g->K, (size_t)Q, b,
                                 &pb);
    }
    if (status == CG_OK) {
        cg__mat c = { cg__tensor_mem(wt), 0, (size_t)g->K };
        cg__shift_src src = { cg__tensor_mem(xp), (size_t)(xlead - dylead),
                              0, (size_t)Q, (size_t)(g->dh * wp),
                              (size_t)g->dw };

        status = cg__gemm_shift_dw(ctx, (size_t)CRS, &pb, &src,
                                   (size_t)(g->R * g->S), (size_t)g->S, c);
    }
    cg__packed_b_free(&pb);
    if (status == CG_OK &&
        (!(tv = cg__tensor_view(wt, 2, tshape, tst, 0)) ||
         !(dv = cg__tensor_view(dw, 2, tshape, dst, dw->offset))))
        status = cg__last_status();
    if (status == CG_OK)
        status = cg__copy_into(dv, tv);
    cg_tensor_free(tv);
    cg_tensor_free(dv);
    cg_tensor_free(wt);
    cg_tensor_free(ody);
    cg_tensor_free(ox);
    return status;
}

/* cg__conv_forward_im2col's columns: the packed product's, or a column
 * buffer (kept where keep allows), without bias. */
static int
forward_columns(const cg__conv_geom *g, cg_tensor *x, cg_tensor *w,
                cg_tensor *y, cg_tensor **keep)
{
    cg_context *ctx = x->ctx;
    int64_t nc = chunk_images(ctx, g), n0, n, i;
    size_t P = (size_t)(g->OH * g->OW), Kg = (size_t)(g->K / g->G);
    size_t CgRS = (size_t)(g->C / g->G * g->R * g->S), CRS = CgRS * g->G;
    int64_t csize = col_numel(g, nc);
    int keeps = keep && nc >= g->N &&
                (uint64_t)csize * 4 <= ctx->info.global_mem_size /
                                       KEEP_COLS_FRACTION;
    cg_tensor *col;
    cl_mem mc, mx = cg__tensor_mem(x), mw = cg__tensor_mem(w);
    cl_mem my = cg__tensor_mem(y);
    cg__gemm_backend use;
    int status;

    /* Packed columns where clgrad's kernels would run the product; where
     * CLBlast would, it multiplies the columns (on an NVIDIA H200, N8 C64
     * 28x28 K64 3x3: 0.83 ms forward packed, 0.13 on CLBlast).
     * conv_im2col_packed's groups of 8 columns fill whole panels. */
    if (g->G == 1 && !keeps && cg__gemm_packed_nr(ctx) % 8 == 0) {
        if ((status = cg__gemm_backend_of(ctx, 0, 0, (size_t)g->K, P, CRS,
                                          0, (size_t)nc, &use)))
            return status;
        if (use != CG__GEMM_CLBLAST)
            return forward_packed(g, x, w, y);
    }
    col = cg__tensor_empty(ctx, CG_F32, 1, &csize);
    status = col ? CG_OK : cg__last_status();

    /* Columns laid out [C R S][n][P], as the backward's: image i's matrix
     * is the column block i P.. of rows L = col_ld(n P) long. */
    mc = col ? cg__tensor_mem(col) : NULL;
    for (n0 = 0; status == CG_OK && n0 < g->N; n0 += nc) {
        size_t L;

        n = g->N - n0 < nc ? g->N - n0 : nc;
        L = col_ld(CRS, (size_t)n * P);
        status = columns(ctx, CG__K_CONV_IM2COL, g, mx, mc, n0, n,
                         (int64_t)P, (int64_t)L);
        if (status == CG_OK && g->G == 1) {
            cg__mat a = { mw, 0, CRS }, b = { mc, 0, L };
            cg__mat c = { my, (size_t)n0 * Kg * P, P };

            status = cg__sgemm_batched(ctx, 0, 0, Kg, P, CRS, 1.0f, a, 0, b,
                                       P, 0.0f, c, Kg * P, (size_t)n);
            continue;
        }
        for (i = 0; status == CG_OK && i < n; i++) {
            cg__mat a = { mw, 0, CgRS }, b = { mc, (size_t)i * P, L };
            cg__mat c = { my, (size_t)(n0 + i) * (size_t)g->K * P, P };

            status = cg__sgemm_batched(ctx, 0, 0, Kg, P, CgRS, 1.0f, a,
                                       Kg * CgRS, b, CgRS * L, 0.0f, c,
                                       Kg * P, (size_t)g->G);
        }
    }
    if (status == CG_OK && keeps) {
        *keep = col;
        return CG_OK;
    }
    cg_tensor_free(col);
    return status;
}

int
cg__conv_forward_im2col(const cg__conv_geom *g, cg_tensor *x, cg_tensor *w,
                        cg_tensor *b, cg_tensor *y, cg_tensor **keep)
{
    int status, yes;

    /* At stride 1 the product reads the padded planes in place where
     * shifts says so, and adds the bias itself. */
    if ((status = shifts(x->ctx, g, &yes)))
        return status;
    if (yes)
        return forward_shift(g, x, w, b, y, keep);
    status = forward_columns(g, x, w, y, keep);
    return status == CG_OK && b ? cg__conv_add_bias(y, b) : status;
}

/* The chunk's upstream gradient as a contiguous [K, n, P]. */
static cg_tensor *
dy_chunk(cg_tensor *dy, const cg__conv_geom *g, int64_t n0, int64_t n)
{
    int64_t P = g->OH * g->OW;
    int64_t shape[3] = { g->K, n, P }, strides[3] = { P, g->K * P, 1 };
    cg_tensor *v = cg__tensor_view(dy, 3, shape, strides,
                                   dy->offset + n0 * g->K * P), *c;

    if (!v)
        return NULL;
    c = cg__copy_contiguous(v);
    cg_tensor_free(v);
    return c;
}

/* One chunk of the backward: dx's images n0.. and dW's share (x may be
 * NULL without dw).  col is the workspace; cols, when not NULL, the
 * forward's columns of the whole batch (one chunk), which dW reads
 * instead of making them again. */
static int
backward_chunk(const cg__conv_geom *g, cg_tensor *x, cg_tensor *w,
               cg_tensor *dy, cg_tensor *col, cg_tensor *cols, cg_tensor *dx,
               cg_tensor *dw, int64_t n0, int64_t n)
{
    cg_context *ctx = w->ctx;
    size_t P = (size_t)(g->OH * g->OW), Q = P * (size_t)n;
    size_t Kg = (size_t)(g->K / g->G), G = (size_t)g->G;
    size_t CgRS = (size_t)(g->C / g->G * g->R * g->S);
    size_t L = col_ld(CgRS * G, Q), sl = CgRS * L;
    cg_tensor *dyt = dy_chunk(dy, g, n0, n);
    cl_mem mc = col ? cg__tensor_mem(col) : NULL, mw = cg__tensor_mem(w);
    int status = dyt ? CG_OK : cg__last_status();
    cg__mat d = { dyt ? cg__tensor_mem(dyt) : NULL, 0, Q };
    cg__mat cm = { mc, 0, L };

    if (status == CG_OK && dx) {
        cg__mat a = { mw, 0, CgRS };

        status = cg__sgemm_batched(ctx, 1, 0, CgRS, Q, Kg, 1.0f, a,
                                   Kg * CgRS, d, Kg * Q, 0.0f, cm, sl, G);
        if (status == CG_OK)
            status = columns(ctx, CG__K_CONV_COL2IM, g, cg__tensor_mem(dx),
                             mc, n0, n, (int64_t)P, (int64_t)L);
    }
    if (status == CG_OK && dw) {
        cg__mat c = { cg__tensor_mem(dw), 0, CgRS };

        if (cols)       /* the forward's, laid out alike */
            cm.mem = cg__tensor_mem(cols);
        else
            status = columns(ctx, CG__K_CONV_IM2COL, g, cg__tensor_mem(x),
                             mc, n0, n, (int64_t)P, (int64_t)L);
        if (status == CG_OK)
            status = cg__sgemm_batched(ctx, 0, 1, Kg, CgRS, Q, 1.0f, d,
                                       Kg * Q, cm, sl,
                                       n0 ? 1.0f : 0.0f, c, Kg * CgRS, G);
    }
    cg_tensor_free(dyt);
    return status;
}

/* dx and dW (either may be NULL) by the direct kernels; dy dense. */
static int
backward_direct(const cg__conv_geom *g, cg_tensor *x, cg_tensor *w,
                cg_tensor *dy, cg_tensor *dx, cg_tensor *dw)
{
    cg_context *ctx = dy->ctx;
    cl_mem mdy = cg__tensor_mem(dy);
    int status = CG_OK;

    if (dx)
        status = cg__conv_direct(ctx, CG__K_CONV_DIRECT_DX, dy->dtype, g,
                                 mdy, cg__tensor_mem(w), cg__tensor_mem(dx),
                                 NULL, cg__conv_direct_dx_items(g));
    if (status == CG_OK && dw)
        status = cg__conv_direct(ctx, CG__K_CONV_DIRECT_DW, dy->dtype, g,
                                 mdy, cg__tensor_mem(x), cg__tensor_mem(dw),
                                 NULL, (size_t)(g->K * (g->C / g->G) * g->R *
                                                g->S));
    return status;
}

/* dx of g at stride 1 as a forward convolution by shift_product: dy [N,
 * K, OH, OW] convolved with w' [C, K, R, S], w'[c, k, r, s] = w[k, c, R -
 * 1 - r, S - 1 - s] (w transposed and turned half a turn), padded by d (R
 * - 1) - p, is dx [N, C, H, W]: its tap r at row h reads dy's row h - d
 * (R - 1) + p + d r, the row h + p - d (R - 1 - r) that g's tap R - 1 - r
 * wrote.  *yes 1 where that applies (groups 1, stride 1, padding at most
 * d (R - 1), dx's size a forward's, and shifts says so for that
 * convolution), with *t it. */
static int
dx_shifts(cg_context *ctx, const cg__conv_geom *g, cg__conv_geom *t,
          int *yes)
{
    *yes = 0;
    if (g->G != 1 || g->sh != 1 || g->sw != 1 ||
        g->ph > g->dh * (g->R - 1) || g->pw > g->dw * (g->S - 1) ||
        g->H != grid_rows(g) - 2 * g->ph || g->W != grid_cols(g) - 2 * g->pw)
        return CG_OK;
    *t = *g;
    t->C = g->K;
    t->H = g->OH;
    t->W = g->OW;
    t->K = g->C;
    t->OH = g->H;
    t->OW = g->W;
    t->ph = g->dh * (g->R - 1) - g->ph;
    t->pw = g->dw * (g->S - 1) - g->pw;
    return shifts(ctx, t, yes);
}

/* dx (+ dx where beta is 1) from dy's planes dyp (planes_of on t's grid,
 * by channel, dy at t's padding) by the convolution t of dx_shifts. */
static int
dx_shift(const cg__conv_geom *t, cg_tensor *w, cg_tensor *dyp, float beta,
         cg_tensor *dx)
{
    int64_t shape[4] = { t->K, t->C, t->R, t->S };
    int64_t strides[4] = { w->strides[1], w->strides[0], -w->strides[2],
                           -w->strides[3] };
    cg_tensor *v = cg__tensor_view(w, 4, shape, strides,
                                   w->offset + (t->R - 1) * w->strides[2] +
                                   (t->S - 1) * w->strides[3]);
    cg_tensor *wt = v ? cg__copy_contiguous(v) : NULL;
    int status = wt ? shift_product(t, dyp, 0, 1, wt, NULL, beta, dx)
                    : cg__last_status();

    cg_tensor_free(v);
    cg_tensor_free(wt);
    return status;
}

/* dx and dw (either may be NULL) of y = conv(x, w) from dy, chunk by
 * chunk; x (may be NULL without dw), w and dy dense.  saved: what the
 * forward kept (its columns of the whole batch, or its padded planes),
 * or NULL; dx_add: dx holds a gradient to add to (only where
 * dx_shifts says yes). */
int
cg__conv_backward_im2col(const cg__conv_geom *g, cg_tensor *x, cg_tensor *w,
                         cg_tensor *dy, cg_tensor *dx, cg_tensor *dw,
                         cg_tensor *saved, int dx_add)
{
    cg_context *ctx = w->ctx;
    int64_t lead = dy_lead(g), xlead = kept_lead(g), nc, n0;
    cg_tensor *col = NULL, *cols = NULL, *xp = NULL, *dyp = NULL;
    cg__conv_geom t;
    int status = CG_OK, yes = 0, dyes = 0, share;

    /* dx and dW at stride 1 without columns where the forward went so
     * (shifts), on one set of dy's planes where their grids agree */
    if ((status = shifts(ctx, g, &yes)) != CG_OK)
        return status;
    if (dx && (status = dx_shifts(ctx, g, &t, &dyes)) != CG_OK)
        return status;
    if (dx_add && !dyes)
        return cg__error(CG_EINVAL, "conv: an input gradient to add to "
                         "where the backward cannot");
    /* The forward's: its planes where it went by shift, else columns */
    if (saved && yes &&
        cg_tensor_numel(saved) == planes_len(ctx, g, xlead))
        xp = saved;
    else if (saved && !yes && cg_tensor_numel(saved) == col_numel(g, g->N))
        cols = saved;
    yes = yes && dw;
    if (dyes) {
        dyp = input_planes(&t, dy, 1, 0);       /* dy is t's input */
        status = dyp ? dx_shift(&t, w, dyp, dx_add ? 1.0f : 0.0f, dx)
                     : cg__last_status();
        dx = NULL;
    }
    share = lead >= 0 && dyp;
    if (status == CG_OK && yes)
        status = dw_shift(g, x, xp, xlead, dy, share ? dyp : NULL,
                          share ? lead : 0, dw);
    cg_tensor_free(dyp);
    if (yes)
        dw = NULL;
    if (status != CG_OK || (!dx && !dw))
        return status;
    nc = cols ? g->N : chunk_images(ctx, g);
    if (dx || !cols) {
        int64_t csize = col_numel(g, nc);

        if (!(col = cg__tensor_empty(ctx, CG_F32, 1, &csize)))
            status = cg__last_status();
    }
    for (n0 = 0; status == CG_OK && n0 < g->N; n0 += nc)
        status = backward_chunk(g, x, w, dy, col, cols, dx, dw, n0,
                                g->N - n0 < nc ? g->N - n0 : nc);
    cg_tensor_free(col);
    return status;
}

/* The node's gradient buffers of x and w, where needed; and its dense dy
 * and geometry. */
int
cg__conv_grads_begin(cg__node *node, cg_tensor *dy, cg_tensor **gin,
                     cg_tensor **gd, cg__conv_geom *g)
{
    int k;

    memcpy(g, node->i, sizeof *g);
    if (!(*gd = cg__dense(dy)))
        return cg__last_status();
    for (k = 0; k < 2; k++)
        if (node->needs[k] &&
            !(gin[k] = cg__tensor_empty(dy->ctx, node->saved[k]->dtype, 4,
                                        node->saved[k]->shape)))
            return cg__last_status();
    return CG_OK;
}

/* db: dy summed over N, OH, OW (either op's bias). */
int
cg__conv_grads_end(cg__node *node, cg_tensor *gd, cg_tensor **gin, int status)
{
    /* Over each plane's contiguous elements first (row sums), then over
     * the batch (column sums): both streaming reductions, where one over
     * N, OH and OW at once indexes every element through its shape. */
    if (status == CG_OK && node->needs[2]) {
        /* 16 bits: summed in float32, rounded once. */
        cg_tensor *gf = gd->dtype == CG_F32 ? cg_tensor_ref(gd)
                        : cg_to_dtype(gd, CG_F32);
        cg_tensor *nk = gf ? cg__sum_mask(gf, 0xcu, 0, 1.0f) : NULL;
        cg_tensor *db = nk ? cg__sum_mask(nk, 0x1u, 0, 1.0f) : NULL;

        if (db && gd->dtype != CG_F32)
            gin[2] = cg_to_dtype(db, gd->dtype);
        else
            gin[2] = db ? cg_tensor_ref(db) : NULL;
        if (!gin[2])
            status = cg__last_status();
        cg_tensor_free(gf);
        cg_tensor_free(nk);
        cg_tensor_free(db);
    }
    cg_tensor_free(gd);
    return status;
}

/* The gradient of x collected so far (cg__grad_into), to which the
 * backward adds dx itself (gemm_shift with beta 1) instead of the
 * engine's pass over it, in gin[0] in place of the new buffer; *add
 * whether it is. */
static int
dx_into(cg__node *node, const cg__conv_geom *g, cg_tensor **gin, int *add)
{
    cg_tensor *acc = gin[0] ? cg__grad_into(node, 0) : NULL;
    cg__conv_geom t;
    int status = CG_OK;

    *add = 0;
    if (acc && acc->dtype == CG_F32 &&
        (status = dx_shifts(acc->ctx, g, &t, add)) == CG_OK && *add) {
        cg_tensor_free(gin[0]);
        gin[0] = cg_tensor_ref(acc);
    }
    return status;
}

static int
conv_backward(cg__node *node, cg_tensor *dy, cg_tensor **gin)
{
    cg_tensor *gd = NULL;
    cg__conv_geom g;
    cg__conv_algorithm algo;
    int status = cg__conv_grads_begin(node, dy, gin, &gd, &g), add = 0;

    /* A 16-bit node comes from the direct forward only (conv_apply). */
    if (status == CG_OK && dy->dtype != CG_F32)
        algo = CG__CONV_DIRECT;
    else if (status == CG_OK)
        status = cg__conv_choose(dy->ctx, CG__CONV_BWD, &g, &algo);
    if (status == CG_OK && algo == CG__CONV_IM2COL)
        status = dx_into(node, &g, gin, &add);
    if (status == CG_OK && (gin[0] || gin[1]))
        status = algo == CG__CONV_DIRECT
                 ? backward_direct(&g, node->saved[0], node->saved[1], gd,
                                   gin[0], gin[1])
                 : cg__conv_backward_im2col(&g, node->saved[0],
                                            node->saved[1], gd, gin[0],
                                            gin[1], node->saved[2], add);
    return cg__conv_grads_end(node, gd, gin, status);
}

/* y from x and w, and the bias b (NULL: none) added: by the direct
 * kernel itself, or after im2col + GEMM. */
static int
conv_run(cg__conv_algorithm algo, const cg__conv_geom *g, cg_tensor *x,
         cg_tensor *w, cg_tensor *b, cg_tensor *y, cg_tensor **keep)
{
    cg_tensor *db;
    int status;

    switch (algo) {
    case CG__CONV_IM2COL:
        return cg__conv_forward_im2col(g, x, w, b, y, keep);
    case CG__CONV_DIRECT:
        db = b ? cg__dense(b) : NULL;
        if (b && !db)
            return cg__last_status();
        status = cg__conv_direct(x->ctx, CG__K_CONV_DIRECT_FWD, x->dtype,
                                 g, cg__tensor_mem(x), cg__tensor_mem(w),
                                 cg__tensor_mem(y), db,
                                 cg__conv_direct_fwd_items(g));
        cg_tensor_free(db);
        return status;
    }
    return cg__error(CG_EINVAL, "conv: unknown algorithm %d", (int)algo);
}

cg_tensor *
cg__conv_via_f32(cg__conv_apply_fn apply, const char *op,
                 const cg__conv_geom *g, cg_tensor *x, cg_tensor *w,
                 cg_tensor *b)
{
    cg_tensor *xf = cg_to_dtype(x, CG_F32);
    cg_tensor *wf = xf ? cg_to_dtype(w, CG_F32) : NULL;
    cg_tensor *bf = wf && b ? cg_to_dtype(b, CG_F32) : NULL;
    cg_tensor *yf = wf && (bf || !b) ? apply(op, g, xf, wf, bf) : NULL;
    cg_tensor *y = yf ? cg_to_dtype(yf, x->dtype) : NULL;

    cg_tensor_free(xf);
    cg_tensor_free(wf);
    cg_tensor_free(bf);
    cg_tensor_free(yf);
    return y;
}

/* the geometry travels in the node's integers */
typedef char cg__conv_geom_fits_node[sizeof(cg__conv_geom) <=
                                     sizeof(((cg__node *)0)->i) ? 1 : -1];

int
cg__conv_record(cg_tensor *y, const char *op, cg__backward_fn fn,
                const cg__conv_geom *g, cg_tensor **in, cg_tensor *x,
                cg_tensor *w, cg_tensor *kept)
{
    int status = CG_OK;
    cg__node *node = cg__record(y, op, fn, 3, in, &status);

    if (!node)
        return status;
    memcpy(node->i, g, sizeof *g);
    status = cg__node_save(node, 0, x);
    if (status == CG_OK)
        status = cg__node_save(node, 1, w);
    /* What the forward kept for the weight gradient */
    if (status == CG_OK && kept && node->needs[1])
        status = cg__node_save(node, 2, kept);
    return status;
}

/* The op once its arguments are checked: y from dense x and w, the bias,
 * the graph node (g, x and w saved).  A 16-bit convolution that the
 * direct kernels do not run (im2col chosen) is the float32 op between
 * casts. */
static cg_tensor *
conv_apply(const char *op, const cg__conv_geom *geom, cg_tensor *x,
           cg_tensor *w, cg_tensor *b)
{
    cg_tensor *in[3] = { x, w, b }, *dx = NULL, *dw = NULL, *y = NULL;
    cg_tensor *kept = NULL;
    int64_t shape[4] = { geom->N, geom->K, geom->OH, geom->OW };
    cg__conv_geom g_ = *geom, *g = &g_;    /* with the choice's no_shift */
    cg__conv_algorithm algo;
    int status;

    if (cg__conv_choose(x->ctx, CG__CONV_FWD, g, &algo))
        return NULL;
    if (x->dtype != CG_F32 && algo != CG__CONV_DIRECT)
        return cg__conv_via_f32(conv_apply, op, g, x, w, b);
    dx = cg__dense(x);
    dw = dx ? cg__dense(w) : NULL;
    y = dw ? cg__tensor_empty(x->ctx, x->dtype, 4, shape) : NULL;
    status = y ? conv_run(algo, g, dx, dw, b, y,
                          cg_tensor_requires_grad(w) ? &kept : NULL)
               : cg__last_status();
    if (status == CG_OK)
        status = cg__conv_record(y, op, conv_backward, g, in, dx, dw, kept);
    cg_tensor_free(kept);
    cg_tensor_free(dx);
    cg_tensor_free(dw);
    if (status) {
        cg_tensor_free(y);
        return NULL;
    }
    return y;
}

static cg_tensor *
conv2d_op(const char *op, cg_tensor *x, cg_tensor *w, cg_tensor *b,
          const cg_conv_options *opts)
{
    cg__conv_geom g;

    if (conv_check(op, x, w, b, opts, &g))
        return NULL;
    return conv_apply(op, &g, x, w, b);
}

cg_tensor *
cg_conv2d(cg_tensor *x, cg_tensor *weight, cg_tensor *bias,
          const cg_conv_options *opts)
{
    cg_tensor *ac[3];

    CG__AUTOCAST_RETURN(CG__AC_LOW, ac, cg_conv2d(ac[0], ac[1], ac[2], opts),
                        x, weight, bias);
    cg__error_clear();
    return conv2d_op("conv2d", x, weight, bias, opts);
}

/* conv1d is conv2d with H = 1: [N, C, L] viewed as [N, C, 1, L]. */
cg_tensor *
cg_conv1d(cg_tensor *x, cg_tensor *weight, cg_tensor *bias,
          const cg_conv_options *opts)
{
    cg_conv_options o = { { 1, 1 }, { 0, 0 }, { 1, 1 }, 1, 0 };
    cg_tensor *x4 = NULL, *w4 = NULL, *y4 = NULL, *y = NULL, *ac[3];
    cg__conv_geom g;
    int64_t s[3];
    char s1[128], s2[128];
    int fft = 0;

    CG__AUTOCAST_RETURN(CG__AC_LOW, ac, cg_conv1d(ac[0], ac[1], ac[2], opts),
                        x, weight, bias);
    cg__error_clear();
    if (cg__check_tensor(x, "input", CG__FLOAT_DTYPE) ||
        cg__check_tensor(weight, "weight", CG__FLOAT_DTYPE))
        return NULL;
    if (x->ndim != 3 || weight->ndim != 3) {
        cg__error(CG_ESHAPE, "conv1d: input %s and weight %s must have 3 "
                  "dimensions",
                  cg__shape_str(x->ndim, x->shape, s1, sizeof s1),
                  cg__shape_str(weight->ndim, weight->shape, s2, sizeof s2));
        return NULL;
    }
    if (opts) {
        o.stride[1] = opts->stride[0];
        o.padding[1] = opts->padding[0];
        o.dilation[1] = opts->dilation[0];
        o.groups = opts->groups;
        o.padding_same = opts->padding_same;
    }
    x4 = cg_unsqueeze(x, 2);
    w4 = x4 ? cg_unsqueeze(weight, 2) : NULL;
    if (w4 && conv_check("conv1d", x4, w4, bias, &o, &g) == CG_OK &&
        cg__conv1d_fft_choose(x->ctx, &g, &fft) == CG_OK)
        y4 = fft ? NULL : conv_apply("conv1d", &g, x4, w4, bias);
    if (fft)
        y = cg__conv1d_fft(&g, x, weight, bias);
    if (y4) {
        s[0] = y4->shape[0]; s[1] = y4->shape[1]; s[2] = y4->shape[3];
        y = cg_reshape(y4, 3, s);
    }
    cg_tensor_free(x4);
    cg_tensor_free(w4);
    cg_tensor_free(y4);
    return y;
}

cg_tensor *
cg__conv_geom_apply(const char *op, const cg__conv_geom *g, cg_tensor *x,
                    cg_tensor *w)
{
    return conv_apply(op, g, x, w, NULL);
}

/* ------------------------------------------------------------------------
 * Double backward.  A convolution's (or transposed convolution's) input
 * gradient is the other kind of convolution of dy with the same weight
 * and geometry, recorded as such; its weight gradient is a node
 * "conv_wgrad" of (a, b) - a of the convolution's input shape [N, C, H,
 * W], b of its output's [N, K, OH, OW] - bilinear, whose backward is the
 * two convolutions with the weight gradient's gradient as weight.
 * ------------------------------------------------------------------------ */

cg_tensor *
cg__conv_wgrad(const cg__conv_geom *g, cg_tensor *a, cg_tensor *b)
{
    cg_tensor *gin[CG__NODE_INPUTS] = { NULL };
    int64_t ws[4] = { g->K, g->C / g->G, g->R, g->S };
    cg__node tmp;
    int status, k;

    memset(&tmp, 0, sizeof tmp);
    memcpy(tmp.i, g, sizeof *g);
    tmp.op = "conv_wgrad";
    tmp.ninputs = 3;
    tmp.needs[1] = 1;
    tmp.saved[0] = cg__dense(a);
    tmp.saved[1] = tmp.saved[0] ? cg_full_dtype(a->ctx, a->dtype, 4, ws,
                                                0.0f) : NULL;
    status = tmp.saved[1] ? conv_backward(&tmp, b, gin) : cg__last_status();
    for (k = 0; k < 2; k++)
        cg_tensor_free(tmp.saved[k]);
    cg_tensor_free(gin[0]);
    cg_tensor_free(gin[2]);
    if (status) {
        cg_tensor_free(gin[1]);
        return NULL;
    }
    return gin[1];
}

int
cg__conv_wgrad_backward(cg__node *n, cg_tensor *gg, cg_tensor **gin)
{
    cg__conv_geom g;

    memcpy(&g, n->i, sizeof g);
    if (n->needs[0] &&
        !(gin[0] = cg__convt_geom_apply("conv_transpose2d", &g,
                                        n->inputs[1], gg)))
        return cg__last_status();
    if (n->needs[1] &&
        !(gin[1] = conv_apply("conv2d", &g, n->inputs[0], gg, NULL)))
        return cg__last_status();
    return CG_OK;
}

/* The weight gradient of geometry g from a and b, recorded. */
static cg_tensor *
wgrad_recorded(const cg__conv_geom *g, cg_tensor *a, cg_tensor *b)
{
    cg_tensor *in[2] = { a, b }, *y = cg__conv_wgrad(g, a, b);
    cg__node *node;
    int status;

    if (!y)
        return NULL;
    node = cg__record(y, "conv_wgrad", cg__conv_wgrad_backward, 2, in,
                      &status);
    if (node)
        memcpy(node->i, g, sizeof *g);
    if (status) {
        cg_tensor_free(y);
        return NULL;
    }
    return y;
}

/* dy summed over N, OH, OW, recorded. */
static cg_tensor *
bias_grad_recorded(cg_tensor *dy)
{
    static const int axes[3] = { 0, 2, 3 };

    return cg_sum(dy, 3, axes, 0);
}

/* The composite backward of conv2d and conv1d nodes (transposed: of
 * conv_transpose2d nodes). */
int
cg__conv_graph(cg__node *n, cg_tensor *dy, cg_tensor **gin)
{
    int tr = strcmp(n->op, "conv_transpose2d") == 0;
    cg_tensor *x = n->inputs[0], *w = n->inputs[1];
    cg__conv_geom g;

    memcpy(&g, n->i, sizeof g);
    if (n->needs[0] &&
        !(gin[0] = tr ? conv_apply("conv2d", &g, dy, w, NULL)
                      : cg__convt_geom_apply("conv_transpose2d", &g, dy, w)))
        return cg__last_status();
    if (n->needs[1] &&
        !(gin[1] = tr ? wgrad_recorded(&g, dy, x)
                      : wgrad_recorded(&g, x, dy)))
        return cg__last_status();
    if (n->ninputs > 2 && n->needs[2] && !(gin[2] = bias_grad_recorded(dy)))
        return cg__last_status();
    return CG_OK;
}
