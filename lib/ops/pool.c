/* SPDX-License-Identifier: MIT */
/*
 * lib/ops/pool.c - 2-D max, average and adaptive average pooling over the
 * last two dimensions of [C, H, W] or [N, C, H, W] inputs, PyTorch
 * semantics (output sizes, ceil_mode, padding, dilation, count_include_pad,
 * divisor_override).  Kernels: kernels/pool.cl (one work-item per output
 * forward, one per input element backward, gathers in a fixed order).
 */
#include "config.h"

#include <limits.h>
#include <string.h>

#include "ops/internal.h"

enum { POOL_MAX, POOL_AVG, POOL_ADAPTIVE };

/* The geometry of one pooling call; node->i holds it for backward. */
typedef struct pool_geom {
    int kind;
    int64_t planes, H, W, OH, OW;
    int k[2], s[2], pd[2], dl[2];
    int ceil_mode, include_pad, divisor;
} pool_geom;

static void
geom_save(const pool_geom *g, int64_t *i)
{
    int d;

    i[0] = g->planes;
    i[1] = g->H;
    i[2] = g->W;
    i[3] = g->OH;
    i[4] = g->OW;
    for (d = 0; d < 2; d++) {
        i[5 + d] = g->k[d];
        i[7 + d] = g->s[d];
        i[9 + d] = g->pd[d];
        i[11 + d] = g->dl[d];
    }
    i[13] = g->include_pad;
    i[14] = g->divisor;
    i[15] = g->kind;
}

static void
geom_load(pool_geom *g, const int64_t *i)
{
    int d;

    memset(g, 0, sizeof *g);
    g->planes = i[0];
    g->H = i[1];
    g->W = i[2];
    g->OH = i[3];
    g->OW = i[4];
    for (d = 0; d < 2; d++) {
        g->k[d] = (int)i[5 + d];
        g->s[d] = (int)i[7 + d];
        g->pd[d] = (int)i[9 + d];
        g->dl[d] = (int)i[11 + d];
    }
    g->include_pad = (int)i[13];
    g->divisor = (int)i[14];
    g->kind = (int)i[15];
}

/* PyTorch's pooling_output_shape: floor or ceil of (n + 2 pd - dl (k - 1)
 * - 1) / s + 1, and with ceil_mode the last window must start inside the
 * input or its left padding. */
static int64_t
out_size(int64_t n, int k, int s, int pd, int dl, int ceil_mode)
{
    int64_t num = n + 2 * (int64_t)pd - (int64_t)dl * (k - 1) - 1 +
                  (ceil_mode ? s - 1 : 0);
    int64_t o = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;

    if (ceil_mode && o > 0 && (o - 1) * s >= n + pd)
        o--;
    return o;
}

static const char *
pool_name(int kind)
{
    return kind == POOL_MAX ? "max_pool2d" :
           kind == POOL_AVG ? "avg_pool2d" : "adaptive_avg_pool2d";
}

/* Checks x and the geometry (k, s, pd, dl already filled, s 0 = k) and
 * computes the sizes.  oshape gets the output shape. */
static int
pool_check(cg_tensor *x, pool_geom *g, int64_t *oshape)
{
    const char *name = pool_name(g->kind);
    int64_t hw[2];
    char s1[128];
    int d, status;

    if ((status = cg__check_tensor(x, "input", CG__FLOAT_DTYPE)))
        return status;
    cg__shape_str(x->ndim, x->shape, s1, sizeof s1);
    if (x->ndim != 3 && x->ndim != 4)
        return cg__error(CG_ESHAPE, "%s: input %s must be [C, H, W] or "
                         "[N, C, H, W]", name, s1);
    hw[0] = x->shape[x->ndim - 2];
    hw[1] = x->shape[x->ndim - 1];
    if (cg__checked_mul_i64(hw[0], hw[1], &g->H, "pooling: H * W"))
        return cg__last_status();
    if (g->H > INT_MAX)
        return cg__error(CG_ESHAPE, "%s: input %s has %lld elements per "
                         "plane, more than %d", name, s1,
                         (long long)g->H, INT_MAX);
    g->H = hw[0];
    g->W = hw[1];
    if (x->ndim == 4 && cg__checked_mul_i64(x->shape[0], x->shape[1],
                                            &g->planes, "pooling: N * C"))
        return cg__last_status();
    if (x->ndim == 3)
        g->planes = x->shape[0];
    if (g->planes > (int64_t)UINT_MAX)
        return cg__error(CG_ESHAPE, "%s: input %s has more than %u planes",
                         name, s1, UINT_MAX);
    if (g->kind == POOL_ADAPTIVE) {
        if (g->OH <= 0 || g->OW <= 0 || g->OH > INT_MAX || g->OW > INT_MAX)
            return cg__error(CG_ESHAPE, "%s: output size [%lld, %lld] must "
                             "be positive", name, (long long)g->OH,
                             (long long)g->OW);
        if (g->H <= 0 || g->W <= 0)
            return cg__error(CG_ESHAPE, "%s: input %s has an empty plane",
                             name, s1);
    } else {
        int64_t *o[2] = { &g->OH, &g->OW };

        for (d = 0; d < 2; d++) {
            if (g->s[d] == 0)
                g->s[d] = g->k[d];
            if (g->k[d] <= 0 || g->s[d] <= 0 || g->dl[d] <= 0 ||
                g->pd[d] < 0)
                return cg__error(CG_EINVAL, "%s: kernel [%d, %d], stride "
                                 "[%d, %d], dilation [%d, %d] must be "
                                 "positive and padding [%d, %d] >= 0",
                                 name, g->k[0], g->k[1], g->s[0], g->s[1],
                                 g->dl[0], g->dl[1], g->pd[0], g->pd[1]);
            if (g->pd[d] > g->k[d] / 2)
                return cg__error(CG_ESHAPE, "%s: padding %d in dimension "
                                 "%d is more than half the kernel %d", name,
                                 g->pd[d], x->ndim - 2 + d, g->k[d]);
            if ((int64_t)g->dl[d] * (g->k[d] - 1) > INT_MAX / 2 ||
                hw[d] > INT_MAX / 2)
                return cg__error(CG_ESHAPE, "%s: kernel %d with dilation "
                                 "%d is too large", name, g->k[d],
                                 g->dl[d]);
            *o[d] = out_size(hw[d], g->k[d], g->s[d], g->pd[d], g->dl[d],
                             g->ceil_mode);
            if (*o[d] <= 0)
                return cg__error(CG_ESHAPE, "%s: input %s: output size "
                                 "%lld in dimension %d = (%lld + 2 * %d - "
                                 "%d * (%d - 1) - 1) / %d + 1 (%s) is not "
                                 "positive", name, s1, (long long)*o[d],
                                 x->ndim - 2 + d, (long long)hw[d],
                                 g->pd[d], g->dl[d], g->k[d], g->s[d],
                                 g->ceil_mode ? "ceil" : "floor");
        }
    }
    if (g->OH * g->OW > INT_MAX)
        return cg__error(CG_ESHAPE, "%s: output plane %lld x %lld is too "
                         "large", name, (long long)g->OH, (long long)g->OW);
    memcpy(oshape, x->shape, (size_t)x->ndim * sizeof *oshape);
    oshape[x->ndim - 2] = g->OH;
    oshape[x->ndim - 1] = g->OW;
    return CG_OK;
}

/* The geometry's kernel arguments after the buffers. */
typedef struct pool_args {
    cl_uint planes;
    cl_int H, W, OH, OW;
    cl_int2 k, s, pd, dl;
    cl_int include_pad, divisor;
} pool_args;

static void
args_make(const pool_geom *g, pool_args *a)
{
    a->planes = (cl_uint)g->planes;
    a->H = (cl_int)g->H;
    a->W = (cl_int)g->W;
    a->OH = (cl_int)g->OH;
    a->OW = (cl_int)g->OW;
    a->k.s[0] = g->k[0];
    a->k.s[1] = g->k[1];
    a->s.s[0] = g->s[0];
    a->s.s[1] = g->s[1];
    a->pd.s[0] = g->pd[0];
    a->pd.s[1] = g->pd[1];
    a->dl.s[0] = g->dl[0];
    a->dl.s[1] = g->dl[1];
    a->include_pad = g->include_pad;
    a->divisor = g->divisor;
}

/* Whether no two max-pooling windows share an input element. */
static int
disjoint(const pool_geom *g)
{
    return g->s[0] >= g->dl[0] * (g->k[0] - 1) + 1 &&
           g->s[1] >= g->dl[1] * (g->k[1] - 1) + 1;
}

static int
pool_backward(cg__node *node, cg_tensor *g, cg_tensor **gin)
{
    cg_tensor *x = node->inputs[0];
    cl_mem mg = cg__tensor_mem(g), mgx, mi;
    pool_geom geo;
    pool_args a;
    cl_kernel k;
    int status;

    if (!node->needs[0])
        return CG_OK;
    geom_load(&geo, node->i);
    args_make(&geo, &a);
    if (!(gin[0] = cg__tensor_empty(g->ctx, x->dtype, x->ndim, x->shape)))
        return cg__last_status();
    mgx = cg__tensor_mem(gin[0]);
    switch (geo.kind) {
    case POOL_MAX:
        mi = cg__tensor_mem(node->saved[0]);
        if (disjoint(&geo)) {
            /* Each input is at most one window's maximum: scatter. */
            status = cg__fill(gin[0], 0.0f);
            if (status == CG_OK)
                status = cg__kernel_dt(g->ctx, CG__K_MAX_POOL2D_BS,
                                       x->dtype, &k);
            if (status == CG_OK)
                status = cg__args(k, CG__ARG(mi), CG__ARG(mg),
                                  CG__ARG(a.planes), CG__ARG(a.H),
                                  CG__ARG(a.W), CG__ARG(a.OH), CG__ARG(a.OW),
                                  CG__ARG(mgx));
            if (status == CG_OK && cg_tensor_numel(x) > 0)
                status = cg__launch_chunks(g->ctx, k,
                                           (size_t)(geo.OH * geo.OW),
                                           (size_t)geo.planes, 1, CG__WG);
            return status;
        }
        status = cg__kernel_dt(g->ctx, CG__K_MAX_POOL2D_B, x->dtype, &k);
        if (status == CG_OK)
            status = cg__args(k, CG__ARG(mi), CG__ARG(mg),
                              CG__ARG(a.planes), CG__ARG(a.H),
                              CG__ARG(a.W), CG__ARG(a.OH), CG__ARG(a.OW),
                              CG__ARG(a.k), CG__ARG(a.s), CG__ARG(a.pd),
                              CG__ARG(a.dl), CG__ARG(mgx));
        break;
    case POOL_AVG:
        status = cg__kernel_dt(g->ctx, CG__K_AVG_POOL2D_B, x->dtype, &k);
        if (status == CG_OK)
            status = cg__args(k, CG__ARG(mg), CG__ARG(a.planes),
                              CG__ARG(a.H), CG__ARG(a.W), CG__ARG(a.OH),
                              CG__ARG(a.OW), CG__ARG(a.k), CG__ARG(a.s),
                              CG__ARG(a.pd), CG__ARG(a.include_pad),
                              CG__ARG(a.divisor), CG__ARG(mgx));
        break;
    default:
        status = cg__kernel_dt(g->ctx, CG__K_ADAPTIVE_AVG_POOL2D_B,
                               x->dtype, &k);
        if (status == CG_OK)
            status = cg__args(k, CG__ARG(mg), CG__ARG(a.planes),
                              CG__ARG(a.H), CG__ARG(a.W), CG__ARG(a.OH),
                              CG__ARG(a.OW), CG__ARG(mgx));
        break;
    }
    if (status == CG_OK && cg_tensor_numel(x) > 0)
        status = cg__launch_chunks(g->ctx, k, (size_t)(geo.H * geo.W),
                                   (size_t)geo.planes, 1, CG__WG);
    return status;
}

/* The forward kernel of geo's kind from dense d into y (and idx, the
 * argmax of each max-pooling window). */
static int
pool_launch(const pool_geom *geo, cg_tensor *d, cg_tensor *y, cg_tensor *idx)
{
    cl_mem mx = cg__tensor_mem(d), my = cg__tensor_mem(y), mi;
    pool_args a;
    cl_kernel k;
    int status;

    args_make(geo, &a);
    switch (geo->kind) {
    case POOL_MAX:
        mi = cg__tensor_mem(idx);
        status = cg__kernel_dt(d->ctx, CG__K_MAX_POOL2D_F, d->dtype, &k);
        if (status == CG_OK)
            status = cg__args(k, CG__ARG(mx), CG__ARG(a.planes),
                              CG__ARG(a.H), CG__ARG(a.W), CG__ARG(a.OH),
                              CG__ARG(a.OW), CG__ARG(a.k), CG__ARG(a.s),
                              CG__ARG(a.pd), CG__ARG(a.dl), CG__ARG(my),
                              CG__ARG(mi));
        break;
    case POOL_AVG:
        status = cg__kernel_dt(d->ctx, CG__K_AVG_POOL2D_F, d->dtype, &k);
        if (status == CG_OK)
            status = cg__args(k, CG__ARG(mx), CG__ARG(a.planes),
                              CG__ARG(a.H), CG__ARG(a.W), CG__ARG(a.OH),
                              CG__ARG(a.OW), CG__ARG(a.k), CG__ARG(a.s),
                              CG__ARG(a.pd), CG__ARG(a.include_pad),
                              CG__ARG(a.divisor), CG__ARG(my));
        break;
    default:
        status = cg__kernel_dt(d->ctx, CG__K_ADAPTIVE_AVG_POOL2D_F,
                               d->dtype, &k);
        if (status == CG_OK)
            status = cg__args(k, CG__ARG(mx), CG__ARG(a.planes),
                              CG__ARG(a.H), CG__ARG(a.W), CG__ARG(a.OH),
                              CG__ARG(a.OW), CG__ARG(my));
        break;
    }
    if (status == CG_OK && cg_tensor_numel(y) > 0)
        status = geo->kind == POOL_MAX
                 ? cg__launch1d(d->ctx, k,
                                (size_t)geo->planes * (size_t)geo->OH,
                                CG__WG)
                 : cg__launch_chunks(d->ctx, k, (size_t)(geo->OH * geo->OW),
                                     (size_t)geo->planes, 1, CG__WG);
    return status;
}

/* Checks, runs the forward and records the node. */
static cg_tensor *
pool_run(cg_tensor *x, pool_geom *geo)
{
    int64_t oshape[CG_MAX_DIMS];
    cg_tensor *d = NULL, *y = NULL, *idx = NULL;
    cg__node *node;
    int status;

    cg__error_clear();
    if (pool_check(x, geo, oshape))
        return NULL;
    if (!(d = cg__dense(x)) ||
        !(y = cg__tensor_empty(x->ctx, x->dtype, x->ndim, oshape)) ||
        (geo->kind == POOL_MAX &&
         !(idx = cg__tensor_empty(x->ctx, CG_I32, x->ndim, oshape)))) {
        status = cg__last_status();
        goto done;
    }
    status = pool_launch(geo, d, y, idx);
    if (status == CG_OK) {
        node = cg__record(y, pool_name(geo->kind), pool_backward, 1, &x,
                          &status);
        if (node) {
            geom_save(geo, node->i);
            if (idx)
                status = cg__node_save(node, 0, idx);
        }
    }
done:
    cg_tensor_free(d);
    cg_tensor_free(idx);
    if (status) {
        cg_tensor_free(y);
        return NULL;
    }
    return y;
}

/* Copies a pair argument, or the default when it is NULL. */
static void
pair(int *dst, const int *src, int dflt)
{
    dst[0] = src ? src[0] : dflt;
    dst[1] = src ? src[1] : dflt;
}

cg_tensor *
cg_max_pool2d(cg_tensor *x, const int kernel[2], const int stride[2],
              const int padding[2], const int dilation[2], int ceil_mode)
{
    pool_geom g;

    memset(&g, 0, sizeof g);
    if (!kernel) {
        cg__error_clear();
        cg__error(CG_EINVAL, "max_pool2d: kernel is NULL");
        return NULL;
    }
    g.kind = POOL_MAX;
    pair(g.k, kernel, 0);
    pair(g.s, stride, 0);
    pair(g.pd, padding, 0);
    pair(g.dl, dilation, 1);
    g.ceil_mode = ceil_mode != 0;
    return pool_run(x, &g);
}

cg_tensor *
cg_avg_pool2d(cg_tensor *x, const int kernel[2], const int stride[2],
              const int padding[2], int ceil_mode, int count_include_pad,
              int divisor_override)
{
    pool_geom g;

    memset(&g, 0, sizeof g);
    if (!kernel || divisor_override < 0) {
        cg__error_clear();
        cg__error(CG_EINVAL, "avg_pool2d: %s", !kernel ? "kernel is NULL" :
                  "divisor_override must be positive (or 0: none)");
        return NULL;
    }
    g.kind = POOL_AVG;
    pair(g.k, kernel, 0);
    pair(g.s, stride, 0);
    pair(g.pd, padding, 0);
    pair(g.dl, NULL, 1);
    g.ceil_mode = ceil_mode != 0;
    g.include_pad = count_include_pad != 0;
    g.divisor = divisor_override;
    return pool_run(x, &g);
}

cg_tensor *
cg_adaptive_avg_pool2d(cg_tensor *x, int64_t out_h, int64_t out_w)
{
    pool_geom g;

    memset(&g, 0, sizeof g);
    g.kind = POOL_ADAPTIVE;
    g.OH = out_h;
    g.OW = out_w;
    return pool_run(x, &g);
}

/* The pool of n's geometry applied to t, with n's argmax for max pooling
 * (a gather at saved[0]): the average pools' forward, and max pooling's
 * derivative, a linear map.  Nothing is recorded. */
static int
pool_apply_node(cg__node *n, cg_tensor *t, cg_tensor **out)
{
    int64_t shape[CG_MAX_DIMS];
    cg_tensor *d, *y;
    pool_geom geo;
    cl_mem mi, mt, my;
    pool_args a;
    cl_kernel k;
    int status;

    geom_load(&geo, n->i);
    memcpy(shape, t->shape, (size_t)t->ndim * sizeof *shape);
    shape[t->ndim - 2] = geo.OH;
    shape[t->ndim - 1] = geo.OW;
    if (!(d = cg__dense(t)))
        return cg__last_status();
    if (!(y = cg__tensor_empty(t->ctx, t->dtype, t->ndim, shape))) {
        cg_tensor_free(d);
        return cg__last_status();
    }
    if (geo.kind != POOL_MAX) {
        status = pool_launch(&geo, d, y, NULL);
    } else {
        args_make(&geo, &a);
        mi = cg__tensor_mem(n->saved[0]);
        mt = cg__tensor_mem(d);
        my = cg__tensor_mem(y);
        status = cg__kernel_dt(t->ctx, CG__K_MAX_POOL2D_JF, t->dtype, &k);
        if (status == CG_OK)
            status = cg__args(k, CG__ARG(mi), CG__ARG(mt), CG__ARG(a.planes),
                              CG__ARG(a.H), CG__ARG(a.W), CG__ARG(a.OH),
                              CG__ARG(a.OW), CG__ARG(my));
        if (status == CG_OK && cg_tensor_numel(y) > 0)
            status = cg__launch_chunks(t->ctx, k, (size_t)(geo.OH * geo.OW),
                                       (size_t)geo.planes, 1, CG__WG);
    }
    cg_tensor_free(d);
    if (status) {
        cg_tensor_free(y);
        return status;
    }
    *out = y;
    return CG_OK;
}

/* Forward mode: the tangent of the pooling node n for the input's tangent
 * t.  The average pools are linear (the op on t); max pooling takes t at
 * the forward's argmax of each window (max_pool2d_jf). */
int
cg__pool_jvp(cg__node *n, cg_tensor *t, cg_tensor **out)
{
    return pool_apply_node(n, t, out);
}

/* ------------------------------------------------------------------------
 * Double backward.  A pool's gradient gx = P^T g is linear in g (P: the
 * average, or the gather at the forward's argmax); a create_graph
 * backward records it as a node "<pool>_grad" of g whose backward is P
 * again, recorded as a node of the pool's own name on the same geometry
 * and argmax, so that it differentiates any number of times (max
 * pooling's second derivative in x is zero, as PyTorch's).
 * ------------------------------------------------------------------------ */

static const char *
pool_grad_name(int kind)
{
    return kind == POOL_MAX ? "max_pool2d_grad" :
           kind == POOL_AVG ? "avg_pool2d_grad" : "adaptive_avg_pool2d_grad";
}

/* Records y as op `name` of input `in` with backward bwd, n's geometry
 * and argmax; frees y on failure. */
static int
record_like(cg_tensor *y, const char *name, cg__backward_fn bwd,
            cg_tensor *in, const cg__node *n)
{
    cg__node *node;
    int status;

    node = cg__record(y, name, bwd, 1, &in, &status);
    if (node) {
        memcpy(node->i, n->i, 16 * sizeof n->i[0]);
        if (n->saved[0])
            status = cg__node_save(node, 0, n->saved[0]);
    }
    if (status)
        cg_tensor_free(y);
    return status;
}

int
cg__pool_grad_backward(cg__node *n, cg_tensor *gg, cg_tensor **gin)
{
    cg_tensor *y = NULL;
    pool_geom geo;
    int status;

    if (!n->needs[0])
        return CG_OK;
    geom_load(&geo, n->i);
    status = pool_apply_node(n, gg, &y);
    if (status == CG_OK)
        status = record_like(y, pool_name(geo.kind), pool_backward, gg, n);
    if (status == CG_OK)
        gin[0] = y;
    return status;
}

int
cg__pool_graph(cg__node *n, cg_tensor *g, cg_tensor **gin)
{
    cg_tensor *tmp[CG__NODE_INPUTS] = { NULL }, *gd;
    pool_geom geo;
    int status;

    if (!n->needs[0])
        return CG_OK;
    geom_load(&geo, n->i);
    if (!(gd = cg__dense(g)))
        return cg__last_status();
    status = pool_backward(n, gd, tmp);
    cg_tensor_free(gd);
    if (status == CG_OK)
        status = record_like(tmp[0], pool_grad_name(geo.kind),
                             cg__pool_grad_backward, g, n);
    else
        cg_tensor_free(tmp[0]);
    if (status == CG_OK)
        gin[0] = tmp[0];
    return status;
}

/* Forward mode: a "<pool>_grad" node's tangent, P^T t (linear in g). */
int
cg__pool_grad_jvp(cg__node *n, cg_tensor *y, cg_tensor *t, cg_tensor **out)
{
    cg_tensor *gin[CG__NODE_INPUTS] = { NULL }, *td = cg__dense(t);
    cg__node tmp;
    int status;

    if (!td)
        return cg__last_status();
    memcpy(&tmp, n, sizeof tmp);
    memset(tmp.inputs, 0, sizeof tmp.inputs);
    memset(tmp.needs, 0, sizeof tmp.needs);
    tmp.inputs[0] = y;                  /* the input's shape and dtype */
    tmp.needs[0] = 1;
    status = pool_backward(&tmp, td, gin);
    cg_tensor_free(td);
    if (status == CG_OK)
        *out = gin[0];
    else
        cg_tensor_free(gin[0]);
    return status;
}
