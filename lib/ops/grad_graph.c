/* SPDX-License-Identifier: MIT */
/*
 * lib/ops/grad_graph.c - the composite backward of each op that supports
 * double backward: the gradients its kernel-level backward computes,
 * written with the library's own recorded ops, so that a backward with
 * create_graph (cg_backward_ex, cg_grad) leaves gradients that can be
 * differentiated again, any number of times.  They run in grad mode, only
 * for create_graph; the kernel-level backward stays the fast path.
 *
 * A composite reads the node's inputs (references to the tensors the
 * forward pass took, with their graphs), never its detached saved
 * tensors, except for a constant the gradient does not depend on
 * smoothly (a dropout mask).  Piecewise-linear ops (abs, relu,
 * leaky_relu, clamp, max, maximum, minimum) multiply g by their
 * derivative computed without recording: it is constant where it exists,
 * so their second derivative is zero, as PyTorch's.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "ops/conv_internal.h"
#include "ops/internal.h"

/* The temporaries of one composite: each op's result is kept here, and
 * the first failure stops the rest (OP evaluates nothing once failed, so
 * cg_last_error keeps the first message). */
#define TAPE_MAX 48

typedef struct {
    cg_tensor *t[TAPE_MAX];
    int n, status;
} tape;

static cg_tensor *
keep(tape *tp, cg_tensor *t)
{
    if (!t) {
        tp->status = cg__last_status();
        return NULL;
    }
    if (tp->n == TAPE_MAX) {        /* a composite longer than the tape */
        cg_tensor_free(t);
        tp->status = cg__error(CG_EHOSTMEM, "double backward: more than %d "
                               "temporaries", TAPE_MAX);
        return NULL;
    }
    tp->t[tp->n++] = t;
    return t;
}

#define OP(tp, e) ((tp)->status ? NULL : keep((tp), (e)))

/* Constants of a composite (a piecewise-linear op's derivative, eps):
 * computed without recording and, in a dual level, without tangents
 * (forward over reverse must not differentiate them either). */
static void
const_enter(void)
{
    cg_no_grad_enter();
    cg__fw_suspend(1);
}

static void
const_leave(void)
{
    cg__fw_suspend(0);
    cg_no_grad_leave();
}

/* gin[k] = r, a new reference, when nothing failed. */
static void
give(tape *tp, cg_tensor **gin, int k, cg_tensor *r)
{
    if (tp->status == CG_OK && r)
        gin[k] = cg_tensor_ref(r);
}

static int
done(tape *tp)
{
    int k;

    for (k = 0; k < tp->n; k++)
        cg_tensor_free(tp->t[k]);
    return tp->status;
}

static int
same_shape(const cg_tensor *a, const cg_tensor *b)
{
    return a->ndim == b->ndim &&
           memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof(int64_t)) == 0;
}

/* g summed down to x's shape over the dimensions along which x was
 * broadcast, recorded. */
static cg_tensor *
sum_to(cg_tensor *g, const cg_tensor *x)
{
    int axes[CG_MAX_DIMS], n = 0, lead = g->ndim - x->ndim, d;
    cg_tensor *s, *r;

    if (same_shape(g, x))
        return cg_tensor_ref(g);
    for (d = 0; d < g->ndim; d++)
        if (d < lead || (x->shape[d - lead] == 1 && g->shape[d] != 1))
            axes[n++] = d;
    if (n == 0)
        return cg_reshape(g, x->ndim, x->shape);
    s = cg_sum(g, n, axes, 1);
    r = s ? cg_reshape(s, x->ndim, x->shape) : NULL;
    cg_tensor_free(s);
    return r;
}

/* A 0-d tensor of `value` in t's dtype. */
static cg_tensor *
scalar_like(const cg_tensor *t, float value)
{
    return cg_full_dtype(t->ctx, t->dtype, 0, NULL, value);
}

/* The node's own kernel-level backward for a gradient of ones, without
 * recording: the derivative of a piecewise-linear op, a constant. */
static cg_tensor *
derivative(cg__node *n, int k)
{
    cg_tensor *gin[CG__NODE_INPUTS] = { NULL }, *ones, *r = NULL;
    int j, status;

    ones = cg_full_dtype(n->inputs[0]->ctx, n->inputs[0]->dtype, n->out_ndim,
                         n->out_shape, 1.0f);
    if (!ones)
        return NULL;
    const_enter();
    status = n->backward(n, ones, gin);
    const_leave();
    if (status == CG_OK)
        r = gin[k] ? gin[k] : NULL;
    for (j = 0; j < n->ninputs; j++)
        if (gin[j] != r)
            cg_tensor_free(gin[j]);
    cg_tensor_free(ones);
    if (status == CG_OK && !r)
        cg__error(CG_ESTATE, "double backward of '%s': no derivative for "
                  "input %d", n->op, k);
    return r;
}

/* ------------------------------------------------------------------------
 * Elementwise
 * ------------------------------------------------------------------------ */

static int
add_graph(cg__node *n, cg_tensor *g, cg_tensor **gin)
{
    tape tp = { { NULL }, 0, CG_OK };
    int neg = strcmp(n->op, "sub") == 0;

    if (n->needs[0])
        give(&tp, gin, 0, OP(&tp, sum_to(g, n->inputs[0])));
    if (n->needs[1]) {
        cg_tensor *gb = neg ? OP(&tp, cg_neg(g)) : g;

        give(&tp, gin, 1, OP(&tp, sum_to(gb, n->inputs[1])));
    }
    return done(&tp);
}

static int
mul_graph(cg__node *n, cg_tensor *g, cg_tensor **gin)
{
    tape tp = { { NULL }, 0, CG_OK };
    cg_tensor *a = n->inputs[0], *b = n->inputs[1];

    if (n->needs[0])
        give(&tp, gin, 0, OP(&tp, sum_to(OP(&tp, cg_mul(g, b)), a)));
    if (n->needs[1])
        give(&tp, gin, 1, OP(&tp, sum_to(OP(&tp, cg_mul(g, a)), b)));
    return done(&tp);
}

/* ga = g / b, gb = -(g / b) (a / b). */
static int
div_graph(cg__node *n, cg_tensor *g, cg_tensor **gin)
{
    tape tp = { { NULL }, 0, CG_OK };
    cg_tensor *a = n->inputs[0], *b = n->inputs[1];
    cg_tensor *q = OP(&tp, cg_div(g, b)), *t;

    if (n->needs[0])
        give(&tp, gin, 0, OP(&tp, sum_to(q, a)));
    if (n->needs[1]) {
        t = OP(&tp, cg_mul(q, OP(&tp, cg_div(a, b))));
        give(&tp, gin, 1, OP(&tp, sum_to(OP(&tp, cg_neg(t)), b)));
    }
    return done(&tp);
}

/* maximum / minimum: ga = g ma, gb = g (1 - ma) with the constant mask
 * ma = 1/2 + s/2 sign(a - b) (s = 1 for maximum, -1 for minimum): 1 where
 * a wins, 1/2 at ties, as the kernels split them.  sign(d) is d scaled
 * by 2^200 in two steps (the smallest subnormal becomes > 1) and clamped. */
static int
extreme_graph(cg__node *n, cg_tensor *g, cg_tensor **gin)
{
    tape tp = { { NULL }, 0, CG_OK };
    cg_tensor *a = n->inputs[0], *b = n->inputs[1], *s, *m;
    float half = strcmp(n->op, "maximum") == 0 ? 0.5f : -0.5f;

    const_enter();
    s = OP(&tp, cg_sub(a, b));
    s = OP(&tp, cg_mul_scalar(s, 1e30f));
    s = OP(&tp, cg_clamp(OP(&tp, cg_mul_scalar(s, 1e30f)), -1.0f, 1.0f));
    const_leave();
    if (n->needs[0]) {
        const_enter();
        m = OP(&tp, cg_add_scalar(OP(&tp, cg_mul_scalar(s, half)), 0.5f));
        const_leave();
        give(&tp, gin, 0, OP(&tp, sum_to(OP(&tp, cg_mul(g, m)), a)));
    }
    if (n->needs[1]) {
        const_enter();
        m = OP(&tp, cg_add_scalar(OP(&tp, cg_mul_scalar(s, -half)), 0.5f));
        const_leave();
        give(&tp, gin, 1, OP(&tp, sum_to(OP(&tp, cg_mul(g, m)), b)));
    }
    return done(&tp);
}

static int
where_graph(cg__node *n, cg_tensor *g, cg_tensor **gin)
{
    tape tp = { { NULL }, 0, CG_OK };
    cg_tensor *c = n->inputs[0], *z = OP(&tp, scalar_like(g, 0.0f));

    if (n->needs[1])
        give(&tp, gin, 1, OP(&tp, sum_to(OP(&tp, cg_where(c, g, z)),
                                         n->inputs[1])));
    if (n->needs[2])
        give(&tp, gin, 2, OP(&tp, sum_to(OP(&tp, cg_where(c, z, g)),
                                         n->inputs[2])));
    return done(&tp);
}

/* add_scalar, mul_scalar, neg: y = p0 x + p1. */
static int
affine_graph(cg__node *n, cg_tensor *g, cg_tensor **gin)
{
    tape tp = { { NULL }, 0, CG_OK };

    give(&tp, gin, 0, OP(&tp, cg_mul_scalar(g, (float)n->f[0])));
    return done(&tp);
}

/* The smooth unary ops, from x and g. */
static int
unary_graph(cg__node *n, cg_tensor *g, cg_tensor **gin)
{
    tape tp = { { NULL }, 0, CG_OK };
    cg_tensor *x = n->inputs[0], *d = NULL, *y;
    float p = (float)n->f[0];

    switch ((cg__ew_op)n->i[0]) {
    case CG__EW_POW_SCALAR:          /* p x^(p-1), 0 for p = 0 */
        if (p == 0.0f)
            d = OP(&tp, cg_full_dtype(x->ctx, x->dtype, x->ndim, x->shape,
                                      0.0f));
        else
            d = OP(&tp, cg_mul_scalar(OP(&tp, cg_pow_scalar(x, p - 1.0f)),
                                      p));
        break;
    case CG__EW_EXP:
        d = OP(&tp, cg_exp(x));
        break;
    case CG__EW_LOG:
        give(&tp, gin, 0, OP(&tp, cg_div(g, x)));
        return done(&tp);
    case CG__EW_SQRT:                /* g / (2 sqrt x) */
        give(&tp, gin, 0, OP(&tp, cg_div(OP(&tp, cg_mul_scalar(g, 0.5f)),
                                         OP(&tp, cg_sqrt(x)))));
        return done(&tp);
    case CG__EW_TANH:                /* 1 - tanh^2 */
        y = OP(&tp, cg_tanh(x));
        d = OP(&tp, cg_add_scalar(OP(&tp, cg_mul_scalar(OP(&tp, cg_mul(y, y)),
                                                       -1.0f)), 1.0f));
        break;
    case CG__EW_SIGMOID:             /* s (1 - s) */
        y = OP(&tp, cg_sigmoid(x));
        d = OP(&tp, cg_mul(y, OP(&tp, cg_add_scalar(
                                  OP(&tp, cg_mul_scalar(y, -1.0f)), 1.0f))));
        break;
    default:                         /* abs, relu, leaky_relu, clamp */
        d = OP(&tp, derivative(n, 0));
        break;
    }
    give(&tp, gin, 0, OP(&tp, cg_mul(g, d)));
    return done(&tp);
}

/* gelu'(x) = Phi(x) + x phi(x) has no closed form in the ops (no erf),
 * so it is a node of its own, "gelu_grad", made from x: its value is the
 * gelu node's kernel-level derivative, and its backward (fast path and
 * composite alike) g phi(x) (2 - x^2), phi(x) = exp(-x^2 / 2) / sqrt(2
 * pi), is written with recorded ops. */
static int
gelu_grad_backward(cg__node *n, cg_tensor *g, cg_tensor **gin)
{
    tape tp = { { NULL }, 0, CG_OK };
    cg_tensor *x = n->inputs[0], *x2 = OP(&tp, cg_mul(x, x)), *phi, *q;

    phi = OP(&tp, cg_mul_scalar(OP(&tp, cg_exp(OP(&tp, cg_mul_scalar(
              x2, -0.5f)))), 0.39894228040143268f));
    q = OP(&tp, cg_add_scalar(OP(&tp, cg_mul_scalar(x2, -1.0f)), 2.0f));
    give(&tp, gin, 0, OP(&tp, cg_mul(g, OP(&tp, cg_mul(phi, q)))));
    return done(&tp);
}

/* A new tensor y computed from the node's inputs without recording,
 * recorded now as op `name` of `input` with backward bwd (y freed on
 * failure). */
static cg_tensor *
record_as(cg_tensor *y, const char *name, cg__backward_fn bwd,
          cg_tensor *input, cg__node **node)
{
    int status;

    *node = NULL;
    if (!y)
        return NULL;
    *node = cg__record(y, name, bwd, 1, &input, &status);
    if (status) {
        cg_tensor_free(y);
        return NULL;
    }
    return y;
}

static int
gelu_graph(cg__node *n, cg_tensor *g, cg_tensor **gin)
{
    tape tp = { { NULL }, 0, CG_OK };
    cg__node *node;
    cg_tensor *d = OP(&tp, record_as(derivative(n, 0), "gelu_grad",
                                     gelu_grad_backward, n->inputs[0],
                                     &node));

    give(&tp, gin, 0, OP(&tp, cg_mul(g, d)));
    return done(&tp);
}

static int
cast_graph(cg__node *n, cg_tensor *g, cg_tensor **gin)
{
    tape tp = { { NULL }, 0, CG_OK };

    give(&tp, gin, 0, OP(&tp, cg_to_dtype(g, n->inputs[0]->dtype)));
    return done(&tp);
}

/* g times the saved mask (a constant of the forward pass). */
static int
dropout_graph(cg__node *n, cg_tensor *g, cg_tensor **gin)
{
    tape tp = { { NULL }, 0, CG_OK };
    cg_tensor *m = n->saved[0];

    if (m->dtype != g->dtype)
        m = OP(&tp, cg_to_dtype(m, g->dtype));
    give(&tp, gin, 0, OP(&tp, cg_mul(g, m)));
    return done(&tp);
}

/* ------------------------------------------------------------------------
 * Reductions
 * ------------------------------------------------------------------------ */

/* g with the reduced axes (node->i[0], a mask) back as size 1 and
 * expanded to x's shape, recorded. */
static cg_tensor *
expand_back(tape *tp, cg__node *n, cg_tensor *g)
{
    cg_tensor *x = n->inputs[0];
    int64_t shape[CG_MAX_DIMS];
    int d;

    for (d = 0; d < x->ndim; d++)
        shape[d] = ((unsigned)n->i[0] & (1u << d)) ? 1 : x->shape[d];
    g = OP(tp, cg_reshape(g, x->ndim, shape));
    return OP(tp, cg_expand(g, x->ndim, x->shape));
}

/* sum and mean: g expanded, times f[0] (1 / count for mean). */
static int
sum_graph(cg__node *n, cg_tensor *g, cg_tensor **gin)
{
    tape tp = { { NULL }, 0, CG_OK };

    if (n->f[0] != 1.0)
        g = OP(&tp, cg_mul_scalar(g, (float)n->f[0]));
    give(&tp, gin, 0, expand_back(&tp, n, g));
    return done(&tp);
}

/* var: g expanded times (x - mean x) 2 / (N - correction) (f[0]). */
static int
var_graph(cg__node *n, cg_tensor *g, cg_tensor **gin)
{
    tape tp = { { NULL }, 0, CG_OK };
    cg_tensor *x = n->inputs[0], *mean, *ge;
    int axes[CG_MAX_DIMS], na = 0, d;

    for (d = 0; d < x->ndim; d++)
        if ((unsigned)n->i[0] & (1u << d))
            axes[na++] = d;
    mean = OP(&tp, cg_mean(x, na, axes, 1));
    ge = expand_back(&tp, n, OP(&tp, cg_mul_scalar(g, (float)n->f[0])));
    give(&tp, gin, 0, OP(&tp, cg_mul(ge, OP(&tp, cg_sub(x, mean)))));
    return done(&tp);
}

/* max: g expanded, times the constant one-hot mask of the maxima. */
static int
max_graph(cg__node *n, cg_tensor *g, cg_tensor **gin)
{
    tape tp = { { NULL }, 0, CG_OK };
    cg_tensor *m = OP(&tp, derivative(n, 0));

    give(&tp, gin, 0, OP(&tp, cg_mul(expand_back(&tp, n, g), m)));
    return done(&tp);
}

/* ------------------------------------------------------------------------
 * Views and joins
 * ------------------------------------------------------------------------ */

/* reshape, squeeze, unsqueeze, contiguous. */
static int
reshape_graph(cg__node *n, cg_tensor *g, cg_tensor **gin)
{
    tape tp = { { NULL }, 0, CG_OK };
    cg_tensor *x = n->inputs[0];

    give(&tp, gin, 0, OP(&tp, cg_reshape(g, x->ndim, x->shape)));
    return done(&tp);
}

/* node->i holds the permutation: y's dimension d is x's i[d]. */
static int
permute_graph(cg__node *n, cg_tensor *g, cg_tensor **gin)
{
    tape tp = { { NULL }, 0, CG_OK };
    int inv[CG_MAX_DIMS] = { 0 }, d;

    for (d = 0; d < g->ndim; d++)
        inv[n->i[d]] = d;
    give(&tp, gin, 0, OP(&tp, cg_permute(g, inv)));
    return done(&tp);
}

static int
expand_graph(cg__node *n, cg_tensor *g, cg_tensor **gin)
{
    tape tp = { { NULL }, 0, CG_OK };

    give(&tp, gin, 0, OP(&tp, sum_to(g, n->inputs[0])));
    return done(&tp);
}

/* narrow (dimension i[0] from i[1]): g between zeros, joined. */
static int
narrow_graph(cg__node *n, cg_tensor *g, cg_tensor **gin)
{
    tape tp = { { NULL }, 0, CG_OK };
    cg_tensor *x = n->inputs[0], *parts[3];
    int d = (int)n->i[0], np = 0;
    int64_t before = n->i[1], after = x->shape[d] - before - g->shape[d];
    int64_t shape[CG_MAX_DIMS];

    memcpy(shape, g->shape, sizeof shape);
    if (before > 0) {
        shape[d] = before;
        parts[np++] = OP(&tp, cg_full_dtype(g->ctx, g->dtype, g->ndim, shape,
                                            0.0f));
    }
    parts[np++] = g;
    if (after > 0) {
        shape[d] = after;
        parts[np++] = OP(&tp, cg_full_dtype(g->ctx, g->dtype, g->ndim, shape,
                                            0.0f));
    }
    give(&tp, gin, 0, np == 1 ? g : OP(&tp, cg_concat(parts, np, d)));
    return done(&tp);
}

/* concat along i[0]: each input's slice of g. */
static int
concat_graph(cg__node *n, cg_tensor *g, cg_tensor **gin)
{
    int d = (int)n->i[0], k;
    int64_t start = 0;

    for (k = 0; k < n->ninputs; k++) {
        int64_t len = n->inputs[k]->shape[d];

        if (n->needs[k] && !(gin[k] = cg_narrow(g, d, start, len)))
            return cg__last_status();
        start += len;
    }
    return CG_OK;
}

/* embedding and index_select gather slices of x along one dimension (the
 * node's i[]: outer, V, inner, n; saved[0] the dense indices); their
 * gradient is a scatter-add of g, linear in g alone.  It is a node of its
 * own, "gather_grad" of g, computed by the gather's kernel-level backward;
 * its backward (fast path and composite alike) gathers again:
 * index_select of gg [outer, V, inner] along 1, reshaped to g's shape. */
static int
gather_grad_backward(cg__node *n, cg_tensor *gg, cg_tensor **gin)
{
    tape tp = { { NULL }, 0, CG_OK };
    cg_tensor *g = n->inputs[0], *idx;
    int64_t s3[3] = { n->i[0], n->i[1], n->i[2] }, flat = n->i[3];

    idx = OP(&tp, cg_reshape(n->saved[0], 1, &flat));
    gg = OP(&tp, cg_reshape(gg, 3, s3));
    give(&tp, gin, 0, OP(&tp, cg_reshape(OP(&tp, cg_index_select(gg, 1,
                                                                  idx)),
                                         g->ndim, g->shape)));
    return done(&tp);
}

static int
gather_graph(cg__node *n, cg_tensor *g, cg_tensor **gin)
{
    cg_tensor *tmp[CG__NODE_INPUTS] = { NULL }, *gd, *gx;
    cg__node *node;
    int status, k;

    if (!(gd = cg__dense(g)))
        return cg__last_status();
    const_enter();
    status = n->backward(n, gd, tmp);
    const_leave();
    cg_tensor_free(gd);
    gx = status == CG_OK ? tmp[0] : NULL;
    for (k = 1; k < n->ninputs; k++)
        cg_tensor_free(tmp[k]);
    if (status)
        return status;
    if (!(gx = record_as(gx, "gather_grad", gather_grad_backward, g,
                         &node)))
        return cg__last_status();
    if (node) {
        memcpy(node->i, n->i, 4 * sizeof n->i[0]);
        if ((status = cg__node_save(node, 0, n->saved[0]))) {
            cg_tensor_free(gx);
            return status;
        }
    }
    gin[0] = gx;
    return CG_OK;
}

/* ------------------------------------------------------------------------
 * Products and softmax
 * ------------------------------------------------------------------------ */

/* C = op(A) op(B) (flags i[0], i[1]): dop(A) = dC op(B)^T, dop(B) =
 * op(A)^T dC, then summed over a broadcast batch. */
static int
matmul_graph(cg__node *n, cg_tensor *g, cg_tensor **gin)
{
    tape tp = { { NULL }, 0, CG_OK };
    cg_tensor *a = n->inputs[0], *b = n->inputs[1], *p;
    int ta = (int)n->i[0], tb = (int)n->i[1];

    if (g->dtype != a->dtype)       /* a float32 result of 16-bit operands */
        g = OP(&tp, cg_to_dtype(g, a->dtype));
    if (n->needs[0]) {
        p = ta ? OP(&tp, cg_matmul_t(b, g, tb, 1))
               : OP(&tp, cg_matmul_t(g, b, 0, !tb));
        give(&tp, gin, 0, OP(&tp, sum_to(p, a)));
    }
    if (n->needs[1]) {
        p = tb ? OP(&tp, cg_matmul_t(g, a, 1, ta))
               : OP(&tp, cg_matmul_t(a, g, !ta, 0));
        give(&tp, gin, 1, OP(&tp, sum_to(p, b)));
    }
    return done(&tp);
}

/* The linear layer's y = x W^T + b over x [..., in] as rows [N, in]. */
static int
linear_graph(cg__node *n, cg_tensor *g, cg_tensor **gin)
{
    tape tp = { { NULL }, 0, CG_OK };
    cg_tensor *x = n->inputs[0], *w = n->inputs[1], *g2, *x2;
    int64_t rows[2] = { -1, w->shape[0] }, xrows[2] = { -1, w->shape[1] };
    int axis0 = 0;

    g2 = OP(&tp, cg_reshape(g, 2, rows));
    if (n->needs[0])
        give(&tp, gin, 0, OP(&tp, cg_reshape(OP(&tp, cg_matmul(g2, w)),
                                             x->ndim, x->shape)));
    if (n->needs[1]) {
        x2 = OP(&tp, cg_reshape(x, 2, xrows));
        give(&tp, gin, 1, OP(&tp, cg_matmul_t(g2, x2, 1, 0)));
    }
    if (n->ninputs > 2 && n->needs[2])
        give(&tp, gin, 2, OP(&tp, cg_sum(g2, 1, &axis0, 0)));
    return done(&tp);
}

/* y = act(x W^T + b) (linear_relu, linear_tanh, linear_sigmoid; i[0] the
 * cg__act): the gradient of the product gz = g act'(z), then linear's.
 * relu' is the constant mask from the saved y; tanh and sigmoid recompute
 * z with a recorded "linear" so that act'(z) depends on x, W and b. */
static int
linear_act_graph(cg__node *n, cg_tensor *g, cg_tensor **gin)
{
    tape tp = { { NULL }, 0, CG_OK };
    cg_tensor *y = n->saved[2], *d, *ones, *m = NULL;
    int status;

    if (n->i[0] == CG__ACT_RELU) {
        ones = OP(&tp, cg_full_dtype(y->ctx, y->dtype, y->ndim, y->shape,
                                     1.0f));
        if (tp.status == CG_OK) {
            const_enter();
            status = cg__unary_grad(CG__EW_RELU, y, y, ones, 0.0f, 0.0f, &m);
            const_leave();
            if (status)
                tp.status = status;
            else
                keep(&tp, m);
        }
        d = m;
    } else {
        y = OP(&tp, cg__linear(n->inputs[0], n->inputs[1],
                               n->ninputs > 2 ? n->inputs[2] : NULL));
        if (n->i[0] == CG__ACT_TANH) {
            y = OP(&tp, cg_tanh(y));
            d = OP(&tp, cg_add_scalar(OP(&tp, cg_mul_scalar(
                                          OP(&tp, cg_mul(y, y)), -1.0f)),
                                      1.0f));
        } else {
            y = OP(&tp, cg_sigmoid(y));
            d = OP(&tp, cg_mul(y, OP(&tp, cg_add_scalar(
                                      OP(&tp, cg_mul_scalar(y, -1.0f)),
                                      1.0f))));
        }
    }
    g = OP(&tp, cg_mul(g, d));
    if (tp.status == CG_OK)
        tp.status = linear_graph(n, g, gin);
    return done(&tp);
}

/* softmax: y (g - sum(g y)); log_softmax: g - softmax(x) sum(g), along
 * i[0] (i[1]: log). */
static int
softmax_graph(cg__node *n, cg_tensor *g, cg_tensor **gin)
{
    tape tp = { { NULL }, 0, CG_OK };
    int d = (int)n->i[0];
    cg_tensor *y = OP(&tp, cg_softmax(n->inputs[0], d)), *s;

    if (n->i[1]) {
        s = OP(&tp, cg_sum(g, 1, &d, 1));
        give(&tp, gin, 0, OP(&tp, cg_sub(g, OP(&tp, cg_mul(y, s)))));
    } else {
        s = OP(&tp, cg_sum(OP(&tp, cg_mul(g, y)), 1, &d, 1));
        give(&tp, gin, 0, OP(&tp, cg_mul(y, OP(&tp, cg_sub(g, s)))));
    }
    return done(&tp);
}

/* layer_norm over rows [i[0], i[1]] of x (inputs x, weight, bias; either
 * of the last two may be NULL), from xhat = (x - mu) rstd recomputed with
 * recorded ops: gb = sum g, gw = sum g xhat over the rows, and gx = rstd
 * (gh - mean gh - xhat mean(gh xhat)) with gh = g w.  eps is not in the
 * node: rstd = (var + c)^-1/2 with the constant c = rstd_saved^-2 - var
 * (eps up to rounding), which gives the forward pass's rstd and the
 * derivative of var(x). */
static int
layer_norm_graph(cg__node *n, cg_tensor *g, cg_tensor **gin)
{
    tape tp = { { NULL }, 0, CG_OK };
    cg_tensor *x = n->inputs[0], *w = n->inputs[1], *b = n->inputs[2];
    int64_t s2[2] = { n->i[0], n->i[1] }, col[2] = { n->i[0], 1 };
    int64_t row[2] = { 1, n->i[1] };
    cg_tensor *x2, *xc, *var, *c, *rstd, *xh, *g2, *gh, *t;
    int one = 1, zero = 0;

    x2 = OP(&tp, cg_reshape(x, 2, s2));
    xc = OP(&tp, cg_sub(x2, OP(&tp, cg_mean(x2, 1, &one, 1))));
    var = OP(&tp, cg_mean(OP(&tp, cg_mul(xc, xc)), 1, &one, 1));
    const_enter();
    c = OP(&tp, cg_pow_scalar(OP(&tp, cg_reshape(n->saved[3], 2, col)),
                              -2.0f));
    c = OP(&tp, cg_to_dtype(OP(&tp, cg_sub(c, var)), x->dtype));
    const_leave();
    rstd = OP(&tp, cg_pow_scalar(OP(&tp, cg_add(var, c)), -0.5f));
    xh = OP(&tp, cg_mul(xc, rstd));
    g2 = OP(&tp, cg_reshape(g, 2, s2));
    if (b && n->needs[2])
        give(&tp, gin, 2, OP(&tp, cg_reshape(OP(&tp, cg_sum(g2, 1, &zero,
                                                            0)),
                                             b->ndim, b->shape)));
    if (w && n->needs[1])
        give(&tp, gin, 1, OP(&tp, cg_reshape(OP(&tp, cg_sum(
                                 OP(&tp, cg_mul(g2, xh)), 1, &zero, 0)),
                                             w->ndim, w->shape)));
    if (n->needs[0]) {
        gh = w ? OP(&tp, cg_mul(g2, OP(&tp, cg_reshape(w, 2, row)))) : g2;
        t = OP(&tp, cg_mul(xh, OP(&tp, cg_mean(OP(&tp, cg_mul(gh, xh)), 1,
                                               &one, 1))));
        t = OP(&tp, cg_sub(OP(&tp, cg_sub(gh, OP(&tp, cg_mean(gh, 1, &one,
                                                              1)))), t));
        give(&tp, gin, 0, OP(&tp, cg_reshape(OP(&tp, cg_mul(t, rstd)),
                                             x->ndim, x->shape)));
    }
    return done(&tp);
}

/* batch_norm of x viewed as [N, C, L] (i[0..2]; flags i[3], 8:
 * training), inputs x, weight, bias (either of the last two may be NULL):
 * as layer_norm_graph over the axes 0 and 2 of each channel.  In
 * training the batch statistics are recomputed with recorded ops (eps
 * recovered as layer_norm_graph's c from the saved invstd); in
 * evaluation the running statistics (saved[2], saved[3]) are constants:
 * gx = g w invstd. */
static int
batch_norm_graph(cg__node *n, cg_tensor *g, cg_tensor **gin)
{
    tape tp = { { NULL }, 0, CG_OK };
    cg_tensor *x = n->inputs[0], *w = n->inputs[1], *b = n->inputs[2];
    int64_t s3[3] = { n->i[0], n->i[1], n->i[2] }, ch[3] = { 1, n->i[1], 1 };
    int axes[2] = { 0, 2 }, train = (n->i[3] & 8) != 0;
    cg_tensor *x3, *xc, *mu, *var, *c, *rstd, *xh, *g3, *gh, *t;

    x3 = OP(&tp, cg_reshape(x, 3, s3));
    if (train) {
        xc = OP(&tp, cg_sub(x3, OP(&tp, cg_mean(x3, 2, axes, 1))));
        var = OP(&tp, cg_mean(OP(&tp, cg_mul(xc, xc)), 2, axes, 1));
        const_enter();
        c = OP(&tp, cg_pow_scalar(OP(&tp, cg_reshape(n->saved[3], 3, ch)),
                                  -2.0f));
        c = OP(&tp, cg_to_dtype(OP(&tp, cg_sub(c, var)), x->dtype));
        const_leave();
        rstd = OP(&tp, cg_pow_scalar(OP(&tp, cg_add(var, c)), -0.5f));
    } else {
        const_enter();
        mu = OP(&tp, cg_to_dtype(OP(&tp, cg_reshape(n->saved[2], 3, ch)),
                                 x->dtype));
        rstd = OP(&tp, cg_to_dtype(OP(&tp, cg_reshape(n->saved[3], 3, ch)),
                                   x->dtype));
        const_leave();
        xc = OP(&tp, cg_sub(x3, mu));
    }
    xh = OP(&tp, cg_mul(xc, rstd));
    g3 = OP(&tp, cg_reshape(g, 3, s3));
    if (b && n->needs[2])
        give(&tp, gin, 2, OP(&tp, cg_reshape(OP(&tp, cg_sum(g3, 2, axes,
                                                            0)),
                                             b->ndim, b->shape)));
    if (w && n->needs[1])
        give(&tp, gin, 1, OP(&tp, cg_reshape(OP(&tp, cg_sum(
                                 OP(&tp, cg_mul(g3, xh)), 2, axes, 0)),
                                             w->ndim, w->shape)));
    if (n->needs[0]) {
        gh = w ? OP(&tp, cg_mul(g3, OP(&tp, cg_reshape(w, 3, ch)))) : g3;
        t = gh;
        if (train) {
            t = OP(&tp, cg_mul(xh, OP(&tp, cg_mean(OP(&tp, cg_mul(gh, xh)),
                                                   2, axes, 1))));
            t = OP(&tp, cg_sub(OP(&tp, cg_sub(gh, OP(&tp, cg_mean(gh, 2,
                                                                  axes,
                                                                  1)))),
                               t));
        }
        give(&tp, gin, 0, OP(&tp, cg_reshape(OP(&tp, cg_mul(t, rstd)),
                                             x->ndim, x->shape)));
    }
    return done(&tp);
}

/* ------------------------------------------------------------------------
 * Losses
 * ------------------------------------------------------------------------ */

/* The class losses' constants from the targets (read to the host): T, x's
 * shape, each counted row's target distribution (1 - eps) onehot + eps / C,
 * zero on ignored rows; and M, 1 on counted rows (shape [N, 1], or 0-d
 * for a 1-D x). */
static int
class_constants(cg__node *n, double eps, cg_tensor **T, cg_tensor **M)
{
    cg_tensor *x = n->inputs[0], *t = n->inputs[1];
    int64_t rows = x->ndim == 2 ? x->shape[0] : 1, C = x->shape[x->ndim - 1];
    int64_t mshape[2] = { rows, 1 }, i, c;
    int32_t *h = malloc((size_t)rows * sizeof *h);
    float *tv = calloc((size_t)(rows * C), sizeof *tv);
    float *mv = malloc((size_t)rows * sizeof *mv);
    int status = h && tv && mv ? CG_OK : cg__error(CG_EHOSTMEM, "double "
                                                   "backward of '%s': host "
                                                   "memory", n->op);

    if (status == CG_OK)
        status = cg_tensor_to_host(t, h, (size_t)rows * sizeof *h);
    for (i = 0; i < rows && status == CG_OK; i++) {
        mv[i] = h[i] != (int32_t)n->i[0];
        for (c = 0; c < C && mv[i] != 0.0f; c++)
            tv[i * C + c] = (float)((c == h[i] ? 1.0 - eps : 0.0) +
                                    eps / (double)C);
    }
    *T = *M = NULL;
    if (status == CG_OK &&
        (!(*T = cg_tensor_from_host_f32(x->ctx, x->dtype, x->ndim, x->shape,
                                        tv)) ||
         !(*M = cg_tensor_from_host_f32(x->ctx, x->dtype, x->ndim == 2 ? 2
                                        : 0, mshape, mv)))) {
        status = cg__last_status();
        cg_tensor_free(*T);
        *T = NULL;
    }
    free(h);
    free(tv);
    free(mv);
    return status;
}

/* g times the loss's scale (f[0]), as a column [N, 1] for unreduced
 * losses of [N, C] inputs (i[1]). */
static cg_tensor *
class_scale(tape *tp, cg__node *n, cg_tensor *g)
{
    int64_t col[2] = { -1, 1 };

    if (n->i[1] && n->inputs[0]->ndim == 2)
        g = OP(tp, cg_reshape(g, 2, col));
    return OP(tp, cg_mul_scalar(g, (float)n->f[0]));
}

/* cross_entropy: (softmax(x) M - T) g scale; nll_loss: -T g scale. */
static int
class_graph(cg__node *n, cg_tensor *g, cg_tensor **gin)
{
    tape tp = { { NULL }, 0, CG_OK };
    int ce = strcmp(n->op, "cross_entropy") == 0, last = -1;
    cg_tensor *T = NULL, *M = NULL, *d;

    tp.status = class_constants(n, ce ? n->f[1] : 0.0, &T, &M);
    keep(&tp, T);
    keep(&tp, M);
    if (ce)
        d = OP(&tp, cg_sub(OP(&tp, cg_mul(OP(&tp, cg_softmax(n->inputs[0],
                                                              last)), M)),
                           T));
    else
        d = OP(&tp, cg_neg(T));
    give(&tp, gin, 0, OP(&tp, cg_mul(d, class_scale(&tp, n, g))));
    return done(&tp);
}

/* mse_loss (i[0] 0): ga = 2 (a - b) g s, gb = -ga; bce_with_logits (1):
 * ga = (sigmoid(a) - b) g s, gb = -a g s. */
static int
pointwise_graph(cg__node *n, cg_tensor *g, cg_tensor **gin)
{
    tape tp = { { NULL }, 0, CG_OK };
    cg_tensor *a = n->inputs[0], *b = n->inputs[1], *gs, *ga;

    gs = OP(&tp, cg_mul_scalar(g, (float)n->f[0]));
    if (n->i[0] == 0) {
        ga = OP(&tp, cg_mul(OP(&tp, cg_mul_scalar(OP(&tp, cg_sub(a, b)),
                                                  2.0f)), gs));
        if (n->needs[0])
            give(&tp, gin, 0, ga);
        if (n->needs[1])
            give(&tp, gin, 1, OP(&tp, cg_neg(ga)));
    } else {
        if (n->needs[0])
            give(&tp, gin, 0, OP(&tp, cg_mul(OP(&tp, cg_sub(
                                     OP(&tp, cg_sigmoid(a)), b)), gs)));
        if (n->needs[1])
            give(&tp, gin, 1, OP(&tp, cg_mul(OP(&tp, cg_neg(a)), gs)));
    }
    return done(&tp);
}

/* ------------------------------------------------------------------------
 * The table: op name (as recorded) -> composite backward.
 * ------------------------------------------------------------------------ */

static const struct {
    const char *op;
    cg__backward_fn fn;
} graph_table[] = {
    { "add", add_graph }, { "sub", add_graph }, { "mul", mul_graph },
    { "div", div_graph }, { "maximum", extreme_graph },
    { "minimum", extreme_graph }, { "where", where_graph },
    { "add_scalar", affine_graph }, { "mul_scalar", affine_graph },
    { "neg", affine_graph }, { "pow_scalar", unary_graph },
    { "exp", unary_graph }, { "log", unary_graph }, { "sqrt", unary_graph },
    { "abs", unary_graph }, { "clamp", unary_graph },
    { "tanh", unary_graph }, { "sigmoid", unary_graph },
    { "relu", unary_graph }, { "leaky_relu", unary_graph },
    { "gelu", gelu_graph }, { "gelu_grad", gelu_grad_backward },
    { "to_dtype", cast_graph }, { "dropout", dropout_graph },
    { "sum", sum_graph }, { "mean", sum_graph }, { "var", var_graph },
    { "max", max_graph },
    { "reshape", reshape_graph }, { "squeeze", reshape_graph },
    { "unsqueeze", reshape_graph }, { "contiguous", reshape_graph },
    { "permute", permute_graph }, { "expand", expand_graph },
    { "narrow", narrow_graph }, { "concat", concat_graph },
    { "embedding", gather_graph }, { "index_select", gather_graph },
    { "gather_grad", gather_grad_backward },
    { "matmul", matmul_graph }, { "linear", linear_graph },
    { "linear_relu", linear_act_graph }, { "linear_tanh", linear_act_graph },
    { "linear_sigmoid", linear_act_graph },
    { "softmax", softmax_graph }, { "log_softmax", softmax_graph },
    { "layer_norm", layer_norm_graph }, { "batch_norm", batch_norm_graph },
    { "max_pool2d", cg__pool_graph }, { "avg_pool2d", cg__pool_graph },
    { "adaptive_avg_pool2d", cg__pool_graph },
    { "max_pool2d_grad", cg__pool_grad_backward },
    { "avg_pool2d_grad", cg__pool_grad_backward },
    { "adaptive_avg_pool2d_grad", cg__pool_grad_backward },
    { "conv2d", cg__conv_graph }, { "conv1d", cg__conv_graph },
    { "conv_transpose2d", cg__conv_graph },
    { "conv_wgrad", cg__conv_wgrad_backward },
    { "cross_entropy", class_graph }, { "nll_loss", class_graph },
    { "mse_loss", pointwise_graph }, { "bce_with_logits", pointwise_graph },
    { "fft", cg__spectral_graph }, { "ifft", cg__spectral_graph },
    { "rfft", cg__spectral_graph }, { "irfft", cg__spectral_graph },
    { "fft_adjoint", cg__spectral_adjoint_graph },
    { "ifft_adjoint", cg__spectral_adjoint_graph },
    { "rfft_adjoint", cg__spectral_adjoint_graph },
    { "irfft_adjoint", cg__spectral_adjoint_graph },
};

cg__backward_fn
cg__backward_graph_of(const cg__node *n)
{
    size_t k;

    /* A custom op or a layer (keep set) may carry any name: a layer that
     * has a composite names it itself. */
    if (n->keep)
        return n->backward_graph;
    for (k = 0; k < sizeof graph_table / sizeof graph_table[0]; k++)
        if (strcmp(n->op, graph_table[k].op) == 0)
            return graph_table[k].fn;
    return NULL;
}
