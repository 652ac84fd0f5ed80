/* SPDX-License-Identifier: MIT */
/*
 * lib/autograd/jvp.c - forward mode's JVP rules, by op name (see
 * lib/autograd/forward.c for how they are applied).
 *
 * Rules compute tangents with the public ops; their caller runs them in
 * no-grad mode with forward mode suspended.  Ops whose Jacobian is
 * diagonal (elementwise) or symmetric (softmax) reuse their backward
 * function: J t = J^T t.
 */
#include "config.h"

#include <string.h>

#include "autograd/internal.h"
#include "ops/conv_internal.h"
#include "ops/internal.h"

/* A new contiguous tensor of y's shape holding t broadcast to it. */
static cg_tensor *
dense_as(cg_tensor *t, const cg_tensor *y)
{
    cg_tensor *e, *c;

    if (t->ndim == y->ndim && cg_tensor_is_contiguous(t) &&
        memcmp(t->shape, y->shape, (size_t)y->ndim * sizeof *y->shape) == 0)
        return cg_tensor_ref(t);
    e = cg_expand(t, y->ndim, y->shape);
    c = e ? cg_contiguous(e) : NULL;
    cg_tensor_free(e);
    return c;
}

/* *sum += term (broadcast), taking over term; NULL term: a failure. */
static int
add_term(cg_tensor **sum, cg_tensor *term)
{
    cg_tensor *s;

    if (!term)
        return cg__last_status();
    if (!*sum) {
        *sum = term;
        return CG_OK;
    }
    s = cg_add(*sum, term);
    cg_tensor_free(term);
    cg_tensor_free(*sum);
    *sum = s;
    return s ? CG_OK : cg__last_status();
}

/* A copy of n for calling its backward as a linear map: no inputs, so that
 * the backward cannot add into anyone's gradient (cg__grad_into). */
static void
borrow(cg__node *tmp, const cg__node *n)
{
    memcpy(tmp, n, sizeof *tmp);
    memset(tmp->inputs, 0, sizeof tmp->inputs);
    memset(tmp->needs, 0, sizeof tmp->needs);
    tmp->grad_acc = NULL;
    memset(tmp->extra_acc, 0, sizeof tmp->extra_acc);
}

/* n's backward applied to g (y's shape) for input k alone: J_k^T g. */
static cg_tensor *
apply_backward(cg__node *tmp, int k, cg_tensor *g)
{
    cg_tensor *gin[CG__NODE_INPUTS] = { NULL };
    int j, status;

    memset(tmp->needs, 0, sizeof tmp->needs);
    tmp->needs[k] = 1;
    status = tmp->backward(tmp, g, gin);
    for (j = 0; j < CG__NODE_INPUTS; j++)
        if (j != k || status)
            cg_tensor_free(gin[j]);
    if (status == CG_OK && !gin[k])
        status = cg__error(CG_ESTATE, "forward-mode AD: the backward of "
                           "'%s' gave no gradient", tmp->op);
    if (status)
        return NULL;
    return gin[k];
}

/* Elementwise ops of one input (and dropout, whose mask is elementwise)
 * and softmax: J is diagonal or symmetric, so J t is the backward of t. */
static int
jvp_self_adjoint(cg__node *n, cg_tensor *y, cg_tensor *const *t,
                 cg_tensor **out)
{
    cg__node tmp;
    cg_tensor *g = dense_as(t[0], y);

    if (!g)
        return cg__last_status();
    borrow(&tmp, n);
    *out = apply_backward(&tmp, 0, g);
    cg_tensor_free(g);
    return *out ? CG_OK : cg__last_status();
}

/* t viewed with shape (ndim, shape), broadcasting; no graph. */
static cg_tensor *
broadcast_view(const cg_tensor *t, int ndim, const int64_t *shape)
{
    int64_t strides[CG_MAX_DIMS];
    int d;

    for (d = 0; d < ndim; d++) {
        int td = d - (ndim - t->ndim);

        strides[d] = td < 0 || (t->shape[td] == 1 && shape[d] != 1)
                     ? 0 : t->strides[td];
    }
    return cg__tensor_view(t, ndim, shape, strides, t->offset);
}

/* Binary elementwise ops: the backward's per-element partials on a and b
 * broadcast to y's shape, so that it sums over nothing. */
static int
jvp_binary(cg__node *n, cg_tensor *y, cg_tensor *const *t, cg_tensor **out)
{
    cg_tensor *full[2], *sum = NULL;
    cg__node tmp;
    int k, status = CG_OK;

    borrow(&tmp, n);
    for (k = 0; k < 2; k++)
        full[k] = broadcast_view(n->saved[k], y->ndim, y->shape);
    if (!full[0] || !full[1])
        status = CG_EHOSTMEM;
    tmp.saved[0] = full[0];
    tmp.saved[1] = full[1];
    for (k = 0; k < 2 && status == CG_OK; k++) {
        cg_tensor *g;

        if (!t[k])
            continue;
        g = dense_as(t[k], y);
        status = add_term(&sum, g ? apply_backward(&tmp, k, g) : NULL);
        cg_tensor_free(g);
    }
    cg_tensor_free(full[0]);
    cg_tensor_free(full[1]);
    if (status) {
        cg_tensor_free(sum);
        return status;
    }
    *out = sum;
    return CG_OK;
}

/* A 0-d zero of y's dtype. */
static cg_tensor *
zero_of(const cg_tensor *y)
{
    return cg_full_dtype(y->ctx, y->dtype, 0, NULL, 0.0f);
}

static int
jvp_where(cg__node *n, cg_tensor *y, cg_tensor *const *t, cg_tensor **out)
{
    cg_tensor *a = t[1] ? cg_tensor_ref(t[1]) : zero_of(y);
    cg_tensor *b = t[2] ? cg_tensor_ref(t[2]) : zero_of(y);
    cg_tensor *w = a && b ? cg_where(n->inputs[0], a, b) : NULL;

    cg_tensor_free(a);
    cg_tensor_free(b);
    *out = w ? dense_as(w, y) : NULL;
    cg_tensor_free(w);
    return *out ? CG_OK : cg__last_status();
}

static int
jvp_to_dtype(cg__node *n, cg_tensor *y, cg_tensor *const *t, cg_tensor **out)
{
    (void)n;
    *out = cg_to_dtype(t[0], y->dtype);
    return *out ? CG_OK : cg__last_status();
}

/* reshape, squeeze, unsqueeze, contiguous (and flatten, a reshape). */
static int
jvp_reshape(cg__node *n, cg_tensor *y, cg_tensor *const *t, cg_tensor **out)
{
    (void)n;
    *out = cg_reshape(t[0], y->ndim, y->shape);
    return *out ? CG_OK : cg__last_status();
}

static int
jvp_expand(cg__node *n, cg_tensor *y, cg_tensor *const *t, cg_tensor **out)
{
    (void)n;
    *out = cg_expand(t[0], y->ndim, y->shape);
    return *out ? CG_OK : cg__last_status();
}

/* permute and transpose: n->i holds the permutation. */
static int
jvp_permute(cg__node *n, cg_tensor *y, cg_tensor *const *t, cg_tensor **out)
{
    int perm[CG_MAX_DIMS], d;

    for (d = 0; d < y->ndim; d++)
        perm[d] = (int)n->i[d];
    *out = cg_permute(t[0], perm);
    return *out ? CG_OK : cg__last_status();
}

/* n->i: the dimension and the start. */
static int
jvp_narrow(cg__node *n, cg_tensor *y, cg_tensor *const *t, cg_tensor **out)
{
    int d = (int)n->i[0];

    *out = cg_narrow(t[0], d, n->i[1], y->shape[d]);
    return *out ? CG_OK : cg__last_status();
}

/* The axes of reduction mask n->i[0] over input x. */
static int
mask_axes(const cg__node *n, int *axes)
{
    int d, na = 0;

    for (d = 0; d < n->inputs[0]->ndim; d++)
        if (n->i[0] & ((int64_t)1 << d))
            axes[na++] = d;
    return na;
}

/* sum and mean: linear, the op itself on the tangent. */
static int
jvp_sum(cg__node *n, cg_tensor *y, cg_tensor *const *t, cg_tensor **out)
{
    int axes[CG_MAX_DIMS], na = mask_axes(n, axes);

    (void)y;
    *out = strcmp(n->op, "mean") == 0
           ? cg_mean(t[0], na, axes, (int)n->i[1])
           : cg_sum(t[0], na, axes, (int)n->i[1]);
    return *out ? CG_OK : cg__last_status();
}

/* var: 2 / (N - correction) sum((x - mean) t), the factor in n->f[0]. */
static int
jvp_var(cg__node *n, cg_tensor *y, cg_tensor *const *t, cg_tensor **out)
{
    int axes[CG_MAX_DIMS], na = mask_axes(n, axes);
    cg_tensor *x = n->inputs[0], *m, *d = NULL, *p = NULL, *s = NULL;

    (void)y;
    m = cg_mean(x, na, axes, 1);
    if (m)
        d = cg_sub(x, m);
    if (d)
        p = cg_mul(d, t[0]);
    if (p)
        s = cg_sum(p, na, axes, (int)n->i[1]);
    *out = s ? cg_mul_scalar(s, (float)n->f[0]) : NULL;
    cg_tensor_free(m);
    cg_tensor_free(d);
    cg_tensor_free(p);
    cg_tensor_free(s);
    return *out ? CG_OK : cg__last_status();
}

/* softmax: J symmetric (the backward); log_softmax: t - sum(p t) with
 * p = exp(y) along the dimension (n->i[0]). */
static int
jvp_softmax(cg__node *n, cg_tensor *y, cg_tensor *const *t, cg_tensor **out)
{
    cg_tensor *p, *pt = NULL, *s = NULL;
    int d = (int)n->i[0];

    if (!n->i[1])
        return jvp_self_adjoint(n, y, t, out);
    p = cg_exp(y);
    if (p)
        pt = cg_mul(p, t[0]);
    if (pt)
        s = cg_sum(pt, 1, &d, 1);
    *out = s ? cg_sub(t[0], s) : NULL;
    cg_tensor_free(p);
    cg_tensor_free(pt);
    cg_tensor_free(s);
    return *out ? CG_OK : cg__last_status();
}

/* x, cast to y's dtype (a matrix product to float32 from 16 bits). */
static cg_tensor *
as_dtype_of(cg_tensor *x, const cg_tensor *y)
{
    cg_tensor *c;

    if (!x || x->dtype == y->dtype)
        return x;
    c = cg_to_dtype(x, y->dtype);
    cg_tensor_free(x);
    return c;
}

/* ta op(b) + op(a) tb, the transposes in n->i. */
static int
jvp_matmul(cg__node *n, cg_tensor *y, cg_tensor *const *t, cg_tensor **out)
{
    cg_tensor *a = n->inputs[0], *b = n->inputs[1], *sum = NULL;
    int ta = (int)n->i[0], tb = (int)n->i[1], status = CG_OK;

    if (t[0])
        status = add_term(&sum, as_dtype_of(cg_matmul_t(t[0], b, ta, tb),
                                            y));
    if (t[1] && status == CG_OK)
        status = add_term(&sum, as_dtype_of(cg_matmul_t(a, t[1], ta, tb),
                                            y));
    if (status) {
        cg_tensor_free(sum);
        return status;
    }
    *out = dense_as(sum, y);
    cg_tensor_free(sum);
    return *out ? CG_OK : cg__last_status();
}

/* tx W^T + x tW^T + tb. */
static int
jvp_linear(cg__node *n, cg_tensor *y, cg_tensor *const *t, cg_tensor **out)
{
    cg_tensor *x = n->inputs[0], *w = n->inputs[1], *sum = NULL;
    int status = CG_OK;

    if (t[0])
        status = add_term(&sum, cg__linear(t[0], w, NULL));
    if (t[1] && status == CG_OK)
        status = add_term(&sum, cg__linear(x, t[1], NULL));
    if (n->ninputs > 2 && t[2] && status == CG_OK)
        status = add_term(&sum, cg_tensor_ref(t[2]));
    if (status) {
        cg_tensor_free(sum);
        return status;
    }
    *out = dense_as(sum, y);
    cg_tensor_free(sum);
    return *out ? CG_OK : cg__last_status();
}

/* Sums prod over its last dimension (a loss without reduction: one value
 * per row) or entirely (a reduced loss); takes over prod. */
static cg_tensor *
loss_sum(cg__node *n, cg_tensor *prod, int per_row)
{
    cg_tensor *s;
    int last = prod->ndim - 1;

    if (!n->i[1])
        s = cg_sum(prod, 0, NULL, 0);
    else if (per_row)
        s = cg_sum(prod, 1, &last, 0);
    else
        s = cg_tensor_ref(prod);
    cg_tensor_free(prod);
    return s;
}

/* The losses: each loss's gradient with respect to its own row or element
 * (the backward of ones) times the tangent, summed like the loss. */
static int
jvp_loss(cg__node *n, cg_tensor *y, cg_tensor *const *t, cg_tensor **out)
{
    int per_row = strcmp(n->op, "cross_entropy") == 0 ||
                  strcmp(n->op, "nll_loss") == 0;
    cg_tensor *ones = cg_full_dtype(y->ctx, y->dtype, y->ndim, y->shape, 1),
              *sum = NULL;
    cg__node tmp;
    int k, status = ones ? CG_OK : cg__last_status();

    borrow(&tmp, n);
    for (k = 0; k < 2 && status == CG_OK; k++) {
        cg_tensor *gk;

        if (!t[k])
            continue;
        gk = apply_backward(&tmp, k, ones);
        status = add_term(&sum, gk ? cg_mul(gk, t[k]) : NULL);
        cg_tensor_free(gk);
    }
    cg_tensor_free(ones);
    if (status) {
        cg_tensor_free(sum);
        return status;
    }
    *out = loss_sum(n, sum, per_row);
    return *out ? CG_OK : cg__last_status();
}

/* The inputs' tangents joined as the inputs were (zeros for those
 * without). */
static int
jvp_concat(cg__node *n, cg_tensor *y, cg_tensor *const *t, cg_tensor **out)
{
    cg_tensor *parts[CG__NODE_INPUTS] = { NULL };
    int k, status = CG_OK;

    for (k = 0; k < n->ninputs && status == CG_OK; k++) {
        cg_tensor *x = n->inputs[k];

        parts[k] = t[k] ? cg_tensor_ref(t[k])
                        : cg_full_dtype(y->ctx, y->dtype, x->ndim, x->shape,
                                        0.0f);
        if (!parts[k])
            status = cg__last_status();
    }
    *out = status == CG_OK ? cg_concat(parts, n->ninputs, (int)n->i[0])
                           : NULL;
    for (k = 0; k < n->ninputs; k++)
        cg_tensor_free(parts[k]);
    return *out ? CG_OK : cg__last_status();
}

/* Rows of the weight's tangent picked by the same indices. */
static int
jvp_embedding(cg__node *n, cg_tensor *y, cg_tensor *const *t,
              cg_tensor **out)
{
    (void)y;
    *out = cg_embedding(t[0], n->inputs[1]);
    return *out ? CG_OK : cg__last_status();
}

/* ------------------------------------------------------------------------
 * Rules of the gathers, max, the norms, the convolutions and the pools
 * ------------------------------------------------------------------------ */

/* The temporaries of one rule, freed together; the first failure stops
 * the rest (J evaluates nothing once failed). */
#define JT_MAX 32

typedef struct {
    cg_tensor *t[JT_MAX];
    int n, status;
} jtape;

static cg_tensor *
jt_keep(jtape *tp, cg_tensor *t)
{
    if (!t) {
        tp->status = cg__last_status();
        if (tp->status == CG_OK)
            tp->status = CG_EHOSTMEM;
        return NULL;
    }
    if (tp->n == JT_MAX) {
        cg_tensor_free(t);
        tp->status = cg__error(CG_EHOSTMEM, "forward-mode AD: more than %d "
                               "temporaries in a rule", JT_MAX);
        return NULL;
    }
    tp->t[tp->n++] = t;
    return t;
}

#define J(tp, e) ((tp)->status ? NULL : jt_keep((tp), (e)))

/* *out = a new reference to r, then frees the temporaries. */
static int
jt_done(jtape *tp, cg_tensor *r, cg_tensor **out)
{
    int k;

    if (tp->status == CG_OK)
        *out = cg_tensor_ref(r);
    for (k = 0; k < tp->n; k++)
        cg_tensor_free(tp->t[k]);
    return tp->status;
}

/* a + b where either may be NULL (a zero term). */
static cg_tensor *
jt_add(jtape *tp, cg_tensor *a, cg_tensor *b)
{
    if (tp->status)
        return NULL;
    if (!a || !b)
        return a ? a : b;
    return J(tp, cg_add(a, b));
}

static cg_tensor *
jt_reshape(jtape *tp, cg_tensor *t, int ndim, const int64_t *shape)
{
    return t ? J(tp, cg_reshape(t, ndim, shape)) : NULL;
}

/* index_select (and any gather of node layout outer, V, inner, n in
 * i[0..3] with indices inputs[1]): the same gather of the tangent. */
static int
jvp_gather(cg__node *n, cg_tensor *y, cg_tensor *const *t, cg_tensor **out)
{
    jtape tp = { { NULL }, 0, CG_OK };
    int64_t s3[3] = { n->i[0], n->i[1], n->i[2] };
    cg_tensor *t3 = jt_reshape(&tp, t[0], 3, s3);
    cg_tensor *idx = n->inputs[1], *i1 = NULL, *g;

    if (idx && idx->ndim != 1)
        i1 = J(&tp, cg_reshape(idx, 1, &n->i[3]));
    g = J(&tp, cg_index_select(t3, 1, i1 ? i1 : idx));
    return jt_done(&tp, jt_reshape(&tp, g, y->ndim, y->shape), out);
}

/* max over axes (cg_max; the values of cg_max_dim and cg_min_dim): each
 * input element belongs to one output, so J v sums w v over the reduced
 * axes with w = J^T 1 (one at each output's argmax). */
static int
jvp_max(cg__node *n, cg_tensor *y, cg_tensor *const *t, cg_tensor **out)
{
    jtape tp = { { NULL }, 0, CG_OK };
    int axes[CG_MAX_DIMS], na = mask_axes(n, axes);
    cg_tensor *ones = J(&tp, cg_full_dtype(y->ctx, y->dtype, y->ndim,
                                            y->shape, 1.0f));
    cg_tensor *w = NULL, *p;
    cg__node tmp;

    borrow(&tmp, n);
    tmp.inputs[0] = n->inputs[0];       /* max_backward reads its shape */
    if (ones)
        w = J(&tp, apply_backward(&tmp, 0, ones));
    p = J(&tp, cg_mul(w, t[0]));
    return jt_done(&tp, J(&tp, cg_sum(p, na, axes, (int)n->i[1])), out);
}

/* The tangent of an affine normalisation y = xhat w + b, xhat = (x -
 * mean) rstd, with x viewed as xs (nd dimensions), mean and rstd as
 * sshape, w and b as pshape, all broadcasting to xs; the statistics
 * reduce axes[0..na-1].  With batch statistics (stats_vary) they have
 * tangents of their own: txhat = rstd (tx - mean(tx) - xhat mean(xhat
 * tx)); else txhat = rstd tx.  Then ty = txhat w + xhat tw + tb. */
static int
norm_tangent(cg__node *n, cg_tensor *y, cg_tensor *const *t, int nd,
             const int64_t *xs, const int64_t *sshape, const int64_t *pshape,
             int na, const int *axes, int stats_vary, cg_tensor *mean,
             cg_tensor *rstd, cg_tensor **out)
{
    jtape tp = { { NULL }, 0, CG_OK };
    cg_tensor *x = n->inputs[0], *w = n->inputs[1], *x3, *m, *r, *xhat;
    cg_tensor *ty = NULL;

    x3 = J(&tp, cg_reshape(x, nd, xs));
    m = J(&tp, as_dtype_of(cg_reshape(mean, nd, sshape), y));
    r = J(&tp, as_dtype_of(cg_reshape(rstd, nd, sshape), y));
    xhat = J(&tp, cg_mul(J(&tp, cg_sub(x3, m)), r));
    if (t[0]) {
        cg_tensor *t3 = J(&tp, cg_reshape(t[0], nd, xs)), *d = t3;

        if (stats_vary) {
            cg_tensor *a = J(&tp, cg_mean(t3, na, axes, 1));
            cg_tensor *c = J(&tp, cg_mean(J(&tp, cg_mul(xhat, t3)), na, axes,
                                          1));

            d = J(&tp, cg_sub(J(&tp, cg_sub(t3, a)), J(&tp, cg_mul(xhat,
                                                                    c))));
        }
        d = J(&tp, cg_mul(d, r));
        if (w)
            d = J(&tp, cg_mul(d, jt_reshape(&tp, w, nd, pshape)));
        ty = jt_add(&tp, ty, d);
    }
    if (n->ninputs > 1 && t[1])
        ty = jt_add(&tp, ty, J(&tp, cg_mul(xhat, jt_reshape(&tp, t[1], nd,
                                                             pshape))));
    if (n->ninputs > 2 && t[2])
        ty = jt_add(&tp, ty, J(&tp, cg_expand(jt_reshape(&tp, t[2], nd,
                                                         pshape), nd, xs)));
    ty = jt_reshape(&tp, ty, y->ndim, y->shape);
    return jt_done(&tp, J(&tp, dense_as(ty, y)), out);
}

/* layer_norm: x as [rows, N] (i[0], i[1]); saved[2], [3]: the mean and
 * rstd of each row. */
static int
jvp_layer_norm(cg__node *n, cg_tensor *y, cg_tensor *const *t,
               cg_tensor **out)
{
    int64_t xs[2] = { n->i[0], n->i[1] }, ss[2] = { n->i[0], 1 };
    int64_t ps[2] = { 1, n->i[1] };
    int ax = 1;

    return norm_tangent(n, y, t, 2, xs, ss, ps, 1, &ax, 1, n->saved[2],
                        n->saved[3], out);
}

/* batch_norm: x as [N, C, L] (i[0..2]), flags i[3] (8: training, batch
 * statistics); saved[2], [3]: the mean and invstd of each channel used
 * (the running ones in evaluation). */
static int
jvp_batch_norm(cg__node *n, cg_tensor *y, cg_tensor *const *t,
               cg_tensor **out)
{
    int64_t xs[3] = { n->i[0], n->i[1], n->i[2] };
    int64_t ss[3] = { 1, n->i[1], 1 };
    int axes[2] = { 0, 2 };

    return norm_tangent(n, y, t, 3, xs, ss, ss, 2, axes,
                        (n->i[3] & 8) != 0, n->saved[2], n->saved[3], out);
}

/* The convolutions: conv(tx, w) + conv(x, tw) + tb, the geometry in i[]
 * (conv1d's node is the 2-D convolution of its [N, C, 1, L] view). */
static int
jvp_conv(cg__node *n, cg_tensor *y, cg_tensor *const *t, cg_tensor **out)
{
    jtape tp = { { NULL }, 0, CG_OK };
    cg__conv_geom g;
    int transposed = strcmp(n->op, "conv_transpose2d") == 0;
    cg_tensor *ty = NULL;

    memcpy(&g, n->i, sizeof g);
    if (t[0])
        ty = jt_add(&tp, ty, J(&tp, transposed
                       ? cg__convt_geom_apply(n->op, &g, t[0], n->inputs[1])
                       : cg__conv_geom_apply(n->op, &g, t[0],
                                             n->inputs[1])));
    if (t[1])
        ty = jt_add(&tp, ty, J(&tp, transposed
                       ? cg__convt_geom_apply(n->op, &g, n->inputs[0], t[1])
                       : cg__conv_geom_apply(n->op, &g, n->inputs[0],
                                             t[1])));
    if (n->ninputs > 2 && t[2]) {
        int64_t bs[4] = { 1, y->shape[1], 1, 1 };

        ty = jt_add(&tp, ty, jt_reshape(&tp, t[2], 4, bs));
    }
    return jt_done(&tp, J(&tp, dense_as(ty, y)), out);
}

/* max_pool2d, avg_pool2d, adaptive_avg_pool2d: lib/ops/pool.c. */
static int
jvp_pool(cg__node *n, cg_tensor *y, cg_tensor *const *t, cg_tensor **out)
{
    (void)y;
    return cg__pool_jvp(n, t[0], out);
}

/* ------------------------------------------------------------------------
 * Rules of the nodes a create_graph backward records (forward over
 * reverse)
 * ------------------------------------------------------------------------ */

/* gather_grad, the scatter-add of a gather's gradient: linear. */
static int
jvp_gather_grad(cg__node *n, cg_tensor *y, cg_tensor *const *t,
                cg_tensor **out)
{
    return cg__gather_grad_jvp(n, y, t[0], out);
}

/* conv_wgrad, a convolution's weight gradient, bilinear in (a, b):
 * wgrad(ta, b) + wgrad(a, tb). */
static int
jvp_conv_wgrad(cg__node *n, cg_tensor *y, cg_tensor *const *t,
               cg_tensor **out)
{
    jtape tp = { { NULL }, 0, CG_OK };
    cg__conv_geom g;
    cg_tensor *ty = NULL;

    memcpy(&g, n->i, sizeof g);
    if (t[0])
        ty = jt_add(&tp, ty, J(&tp, cg__conv_wgrad(&g, t[0], n->inputs[1])));
    if (t[1])
        ty = jt_add(&tp, ty, J(&tp, cg__conv_wgrad(&g, n->inputs[0], t[1])));
    return jt_done(&tp, J(&tp, dense_as(ty, y)), out);
}

/* <pool>_grad, a pool's gradient: linear in g (lib/ops/pool.c). */
static int
jvp_pool_grad(cg__node *n, cg_tensor *y, cg_tensor *const *t,
              cg_tensor **out)
{
    return cg__pool_grad_jvp(n, y, t[0], out);
}

/* gelu_grad, gelu'(x): elementwise, so J t is its backward of t (which
 * reads x from the node's input). */
static int
jvp_gelu_grad(cg__node *n, cg_tensor *y, cg_tensor *const *t,
              cg_tensor **out)
{
    cg__node tmp;
    cg_tensor *g = dense_as(t[0], y);

    if (!g)
        return cg__last_status();
    borrow(&tmp, n);
    tmp.inputs[0] = n->inputs[0];
    *out = apply_backward(&tmp, 0, g);
    cg_tensor_free(g);
    return *out ? CG_OK : cg__last_status();
}

/* complex_abs, complex_angle: each output element depends on one complex
 * number, so J t sums, over (real, imaginary), the backward of ones (the
 * partials, 0 at z = 0 as the backward's) times the tangent. */
static int
jvp_polar(cg__node *n, cg_tensor *y, cg_tensor *const *t, cg_tensor **out)
{
    cg_tensor *ones = cg_full_dtype(y->ctx, y->dtype, y->ndim, y->shape, 1);
    cg_tensor *d = NULL, *prod = NULL;
    cg__node tmp;
    int last = t[0]->ndim - 1;

    borrow(&tmp, n);
    if (ones)
        d = apply_backward(&tmp, 0, ones);
    if (d)
        prod = cg_mul(d, t[0]);
    *out = prod ? cg_sum(prod, 1, &last, 0) : NULL;
    cg_tensor_free(prod);
    cg_tensor_free(d);
    cg_tensor_free(ones);
    return *out ? CG_OK : cg__last_status();
}

static const struct {
    const char *op;
    cg__jvp_fn jvp;
} rules[] = {
    { "add_scalar", jvp_self_adjoint }, { "mul_scalar", jvp_self_adjoint },
    { "neg", jvp_self_adjoint },        { "pow_scalar", jvp_self_adjoint },
    { "exp", jvp_self_adjoint },        { "log", jvp_self_adjoint },
    { "sqrt", jvp_self_adjoint },       { "abs", jvp_self_adjoint },
    { "clamp", jvp_self_adjoint },      { "tanh", jvp_self_adjoint },
    { "sigmoid", jvp_self_adjoint },    { "relu", jvp_self_adjoint },
    { "leaky_relu", jvp_self_adjoint }, { "gelu", jvp_self_adjoint },
    { "dropout", jvp_self_adjoint },
    { "add", jvp_binary },              { "sub", jvp_binary },
    { "mul", jvp_binary },              { "div", jvp_binary },
    { "pow", jvp_binary },              { "maximum", jvp_binary },
    { "minimum", jvp_binary },
    { "where", jvp_where },             { "to_dtype", jvp_to_dtype },
    { "reshape", jvp_reshape },         { "squeeze", jvp_reshape },
    { "unsqueeze", jvp_reshape },       { "contiguous", jvp_reshape },
    { "expand", jvp_expand },           { "permute", jvp_permute },
    { "narrow", jvp_narrow },
    { "sum", jvp_sum },                 { "mean", jvp_sum },
    { "var", jvp_var },
    { "softmax", jvp_softmax },         { "log_softmax", jvp_softmax },
    { "matmul", jvp_matmul },           { "linear", jvp_linear },
    { "cross_entropy", jvp_loss },      { "nll_loss", jvp_loss },
    { "mse_loss", jvp_loss },           { "bce_with_logits", jvp_loss },
    { "concat", jvp_concat },           { "embedding", jvp_embedding },
    { "index_select", jvp_gather },     { "max", jvp_max },
    { "layer_norm", jvp_layer_norm },   { "batch_norm", jvp_batch_norm },
    { "conv2d", jvp_conv },             { "conv1d", jvp_conv },
    { "conv_transpose2d", jvp_conv },   { "max_pool2d", jvp_pool },
    { "avg_pool2d", jvp_pool },         { "adaptive_avg_pool2d", jvp_pool },
    { "gather_grad", jvp_gather_grad }, { "gelu_grad", jvp_gelu_grad },
    { "max_pool2d_grad", jvp_pool_grad }, { "avg_pool2d_grad", jvp_pool_grad },
    { "adaptive_avg_pool2d_grad", jvp_pool_grad },
    { "conv_wgrad", jvp_conv_wgrad },
    { "fft", cg__spectral_jvp },        { "ifft", cg__spectral_jvp },
    { "rfft", cg__spectral_jvp },       { "irfft", cg__spectral_jvp },
    { "fft_adjoint", cg__spectral_jvp },
    { "ifft_adjoint", cg__spectral_jvp },
    { "rfft_adjoint", cg__spectral_jvp },
    { "irfft_adjoint", cg__spectral_jvp },
    { "complex_abs", jvp_polar },       { "complex_angle", jvp_polar },
};

cg__jvp_fn
cg__jvp_rule(const char *op)
{
    size_t k;

    for (k = 0; k < sizeof rules / sizeof rules[0]; k++)
        if (strcmp(rules[k].op, op) == 0)
            return rules[k].jvp;
    return NULL;
}

