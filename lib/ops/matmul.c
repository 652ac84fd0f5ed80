/* SPDX-License-Identifier: MIT */
/*
 * lib/ops/matmul.c - matrix products: one GEMM (lib/ops/gemm.c, clgrad's
 * kernel or CLBlast's) for 2-D operands (and for a batch folded into the
 * rows), one strided-batched GEMM otherwise.
 *
 * Operands are float32, or both float16 or both bfloat16 (summed in
 * float32 by gemm.c, the result rounded once to the output's dtype: the
 * operands' own, or float32 from cg_matmul_out).  Gradients have the
 * inputs' dtypes; a gradient summed over a broadcast batch is summed in
 * float32 and rounded once.
 *
 * Both GEMMs read strided memory themselves: a leading dimension per
 * matrix, a transpose flag, and one stride between the matrices of a
 * batch.  An
 * operand is copied only when its layout cannot be said that way (a
 * matrix with no unit stride, batch dimensions that do not merge into one
 * stride, or a batch broadcast along some dimensions only).
 */
#include "config.h"

#include <string.h>

#include "ops/internal.h"

/* One operand as the GEMM sees it. */
typedef struct gemm_arg {
    cg_tensor *t;        /* what the GEMM reads: a reference to the input,
                          * or a contiguous copy */
    size_t offset, ld, stride;
    int trans;
} gemm_arg;

/* Whether the matrix (r x c, strides sr, sc) is row-major with a leading
 * dimension (*ld); size-1 dimensions may have any stride. */
static int
row_major(int64_t r, int64_t c, int64_t sr, int64_t sc, size_t *ld)
{
    if ((c != 1 && sc != 1) || (r != 1 && sr < c))
        return 0;
    *ld = (size_t)(r == 1 ? c : sr);
    return 1;
}

/* The stride between consecutive matrices of x over the batch shape
 * (nb, bshape), x aligned to the right and broadcast; 0 if x is the same
 * matrix for the whole batch.  Returns 0 when no single stride works. */
static int
batch_stride(const cg_tensor *x, int nb, const int64_t *bshape,
             size_t *stride)
{
    int64_t last = -1, size = 1;
    int d, xb = x->ndim - 2;

    *stride = 0;
    for (d = nb - 1; d >= 0; d--) {
        int xd = d - (nb - xb);
        int64_t s = (xd < 0 || x->shape[xd] == 1) ? 0 : x->strides[xd];

        if (bshape[d] == 1)
            continue;
        if (last < 0)
            *stride = (size_t)s;
        else if (s != last * size)
            return 0;
        last = s;
        size = bshape[d];
    }
    return 1;
}

/* x broadcast over the batch (nb, bshape), as a contiguous copy. */
static cg_tensor *
copy_expanded(cg_tensor *x, int nb, const int64_t *bshape)
{
    int64_t shape[CG_MAX_DIMS], strides[CG_MAX_DIMS];
    int d, xb = x->ndim - 2;
    cg_tensor *v, *c;

    for (d = 0; d < nb + 2; d++) {
        int xd = d - (nb - xb);

        shape[d] = d < nb ? bshape[d] : x->shape[xd];
        strides[d] = (xd < 0 || (d < nb && x->shape[xd] == 1)) ? 0
                   : x->strides[xd];
    }
    v = cg__tensor_view(x, nb + 2, shape, strides, x->offset);
    if (!v)
        return NULL;
    c = cg__copy_contiguous(v);
    cg_tensor_free(v);
    return c;
}

/* Describes x (its op(x) transposed when `trans`) to the GEMM over the
 * batch (nb, bshape), copying it if it must. */
static int
gemm_prepare(cg_tensor *x, int trans, int nb, const int64_t *bshape,
             gemm_arg *g)
{
    int64_t r = x->shape[x->ndim - 2], c = x->shape[x->ndim - 1];
    int64_t sr = x->strides[x->ndim - 2], sc = x->strides[x->ndim - 1];
    cg_tensor *t = cg_tensor_ref(x), *u;

    if (row_major(r, c, sr, sc, &g->ld)) {
        g->trans = trans;
    } else if (row_major(c, r, sc, sr, &g->ld)) {
        /* The transpose of a row-major matrix: the flag flips. */
        g->trans = !trans;
    } else {
        u = cg__copy_contiguous(t);
        cg_tensor_free(t);
        if (!(t = u))
            return cg__last_status();
        g->ld = (size_t)c;
        g->trans = trans;
    }
    if (!batch_stride(t, nb, bshape, &g->stride)) {
        u = copy_expanded(t, nb, bshape);
        cg_tensor_free(t);
        if (!(t = u))
            return cg__last_status();
        g->stride = (size_t)(r * c);
    }
    g->t = t;
    g->offset = (size_t)t->offset;
    return CG_OK;
}

/* c (contiguous [batch, m, n], of its own dtype) = op(a) op(b) for
 * `batch` matrices. */
static int
gemm_run(cg_tensor *c, size_t batch, size_t m, size_t n, size_t k,
         const gemm_arg *a, const gemm_arg *b)
{
    cg__mat am = { cg__tensor_mem(a->t), a->offset, a->ld };
    cg__mat bm = { cg__tensor_mem(b->t), b->offset, b->ld };
    cg__mat cm = { cg__tensor_mem(c), (size_t)c->offset, n };

    /* A batch of row-major, untransposed, packed a against one b is a
     * single taller GEMM: the common x @ W of a layer. */
    if (batch > 1 && b->stride == 0 && !a->trans && a->ld == k &&
        a->stride == m * k) {
        m *= batch;
        batch = 1;
    }
    return cg__gemm_dt(c->ctx, a->t->dtype, c->dtype, a->trans, b->trans, m,
                       n, k, 1.0f, am, a->stride, bm, b->stride, 0.0f, cm,
                       m * n, batch, NULL, NULL);
}

/* Checks the operands and the output dtype, and computes the output
 * shape (batch dims, then M, N) and K. */
static int
matmul_check(cg_tensor *a, cg_tensor *b, int ta, int tb, cg_dtype out,
             int *ndim, int64_t *shape, int64_t *k)
{
    cg_tensor *ops[2] = { a, b };
    char s1[128], s2[128];
    int nba, nbb, nb, d, status;
    int64_t ka, kb;

    if ((status = cg__check_tensor(a, "a", CG__FLOAT_DTYPE)) ||
        (status = cg__check_tensor(b, "b", CG__FLOAT_DTYPE)) ||
        (status = cg__check_same_dtype(a, "a", b, "b")) ||
        (status = cg__same_context(2, (const cg_tensor *const *)ops)))
        return status;
    if (out != a->dtype && !(out == CG_F32 && a->dtype != CG_F32))
        return cg__error(CG_EDTYPE, "matmul of %s operands into %s: the "
                         "output is the operands' dtype or float32",
                         cg__dtype_name(a->dtype), cg__dtype_name(out));
    cg__shape_str(a->ndim, a->shape, s1, sizeof s1);
    cg__shape_str(b->ndim, b->shape, s2, sizeof s2);
    if (a->ndim < 2 || b->ndim < 2)
        return cg__error(CG_ESHAPE, "matmul needs operands of at least 2 "
                         "dimensions, not a %s and b %s", s1, s2);
    ka = a->shape[a->ndim - (ta ? 2 : 1)];
    kb = b->shape[b->ndim - (tb ? 1 : 2)];
    if (ka != kb)
        return cg__error(CG_ESHAPE, "matmul: inner dimensions differ: a %s%s "
                         "has K = %lld, b %s%s has K = %lld", s1,
                         ta ? " (transposed)" : "", (long long)ka, s2,
                         tb ? " (transposed)" : "", (long long)kb);
    nba = a->ndim - 2;
    nbb = b->ndim - 2;
    nb = nba > nbb ? nba : nbb;
    for (d = 0; d < nb; d++) {
        int da = d - (nb - nba), db = d - (nb - nbb);
        int64_t x = da >= 0 ? a->shape[da] : 1, y = db >= 0 ? b->shape[db] : 1;

        if (x != y && x != 1 && y != 1)
            return cg__error(CG_ESHAPE, "matmul: batch dimensions of a %s and "
                             "b %s do not broadcast", s1, s2);
        shape[d] = x == 1 ? y : x;
    }
    shape[nb] = a->shape[a->ndim - (ta ? 1 : 2)];
    shape[nb + 1] = b->shape[b->ndim - (tb ? 2 : 1)];
    *ndim = nb + 2;
    *k = ka;
    return CG_OK;
}

/* c = op(a) op(b) into a new tensor of dtype out; no recording. */
static cg_tensor *
matmul_raw(cg_tensor *a, cg_tensor *b, int ta, int tb, cg_dtype out,
           int ndim, const int64_t *shape, int64_t k)
{
    gemm_arg ga = { 0 }, gb = { 0 };
    cg_tensor *c;
    int nb = ndim - 2, status;

    c = cg__tensor_empty(a->ctx, out, ndim, shape);
    if (!c)
        return NULL;
    status = gemm_prepare(a, ta, nb, shape, &ga);
    if (status == CG_OK)
        status = gemm_prepare(b, tb, nb, shape, &gb);
    if (status == CG_OK)
        status = gemm_run(c, (size_t)cg__numel(nb, shape), (size_t)shape[nb],
                          (size_t)shape[nb + 1], (size_t)k, &ga, &gb);
    cg_tensor_free(ga.t);
    cg_tensor_free(gb.t);
    if (status) {
        cg_tensor_free(c);
        return NULL;
    }
    return c;
}

/* A 2-D view [rows, last dim] of contiguous x. */
static cg_tensor *
flat2d(cg_tensor *x)
{
    int64_t shape[2], strides[2];

    shape[1] = x->shape[x->ndim - 1];
    shape[0] = cg_tensor_numel(x) / shape[1];
    strides[0] = shape[1];
    strides[1] = 1;
    return cg__tensor_view(x, 2, shape, strides, x->offset);
}

/* The gradient of input k of node, a 2-D product op(p) op(q) (p, q 2-D,
 * any layout, of input k's dtype) filling input k's shape: added by the
 * GEMM itself (beta 1) into what has collected for input k
 * (cg__grad_into), which spares the engine a second pass over it, else
 * written into a new tensor (beta 0).  The same GEMM either way, so the
 * sum rounds as the engine's would. */
static int
grad_product(cg__node *node, int k, cg_tensor *p, int tp, cg_tensor *q,
             int tq, cg_tensor **gin)
{
    const cg_tensor *in = node->inputs[k];
    cg_tensor *acc = cg__grad_into(node, k), *c;
    gemm_arg gp = { 0 }, gq = { 0 };
    size_t m = (size_t)p->shape[tp ? 1 : 0], n = (size_t)q->shape[tq ? 0 : 1];
    size_t kk = (size_t)p->shape[tp ? 0 : 1];
    int status;

    if (acc && acc->dtype != in->dtype)
        acc = NULL;
    c = acc ? cg_tensor_ref(acc)
            : cg__tensor_empty(p->ctx, in->dtype, in->ndim, in->shape);
    if (!c)
        return cg__last_status();
    status = gemm_prepare(p, tp, 0, NULL, &gp);
    if (status == CG_OK)
        status = gemm_prepare(q, tq, 0, NULL, &gq);
    if (status == CG_OK) {
        cg__mat pm = { cg__tensor_mem(gp.t), gp.offset, gp.ld };
        cg__mat qm = { cg__tensor_mem(gq.t), gq.offset, gq.ld };
        cg__mat cm = { cg__tensor_mem(c), (size_t)c->offset, n };

        status = cg__gemm_dt(c->ctx, p->dtype, c->dtype, gp.trans, gq.trans,
                             m, n, kk, 1.0f, pm, 0, qm, 0,
                             acc ? 1.0f : 0.0f, cm, 0, 1, NULL, NULL);
    }
    cg_tensor_free(gp.t);
    cg_tensor_free(gq.t);
    if (status) {
        cg_tensor_free(c);
        return status;
    }
    gin[k] = c;
    return CG_OK;
}

/* x as 2-D for a GEMM: itself (a new reference) if it is, else a view
 * [rows, last dim] of it or of a contiguous copy. */
static cg_tensor *
as2d(cg_tensor *x)
{
    cg_tensor *d, *v;

    if (x->ndim == 2)
        return cg_tensor_ref(x);
    if (cg_tensor_is_contiguous(x))
        return flat2d(x);
    if (!(d = cg__copy_contiguous(x)))
        return NULL;
    v = flat2d(d);
    cg_tensor_free(d);
    return v;
}

/* dB for a 2-D b against a batched, packed, untransposed a: the batch
 * folds into the rows, dB = A_flat^T dC_flat, with no per-batch partial
 * products to sum.  *done stays 0 when that does not apply. */
static int
grad_b_folded(cg__node *node, cg_tensor *a, cg_tensor *b, cg_tensor *g,
              int ta, int tb, cg_tensor **gin, int *done)
{
    cg_tensor *af = NULL, *gf = NULL;
    int status;

    *done = 0;
    if (ta || b->ndim != 2 || a->ndim <= 2 || !cg_tensor_is_contiguous(a))
        return CG_OK;
    if (!(af = flat2d(a)) || !(gf = flat2d(g)))
        status = cg__last_status();
    else
        status = tb ? grad_product(node, 1, gf, 1, af, 0, gin)
                    : grad_product(node, 1, af, 1, gf, 0, gin);
    cg_tensor_free(af);
    cg_tensor_free(gf);
    *done = 1;
    return status;
}

/* g summed down to (ndim, shape) in dtype dt: in float32, rounded once
 * to dt.  The reductions read 16-bit storage and sum in float32, so a g
 * of dtype dt goes to them as it is, rather than through a float32 copy
 * (a launch per bias gradient of a 16-bit linear layer). */
static cg_tensor *
sum_to_dt(cg_tensor *g, int ndim, const int64_t *shape, cg_dtype dt)
{
    cg_tensor *g32, *s, *r;

    if (g->dtype == dt)
        return cg__sum_to_shape(g, ndim, shape);
    g32 = g->dtype == CG_F32 ? cg_tensor_ref(g) : cg__cast(g, CG_F32);
    s = g32 ? cg__sum_to_shape(g32, ndim, shape) : NULL;
    r = s ? cg__cast(s, dt) : NULL;
    cg_tensor_free(g32);
    cg_tensor_free(s);
    return r;
}

static cg_tensor *matmul_dt(cg_tensor *a, cg_tensor *b, int ta, int tb,
                            cg_dtype out);

/* The gradient of x, op(p) op(q) over the full batch summed down to x's
 * shape: in float32 for a 16-bit x, rounded once at the end. */
static cg_tensor *
product_to(cg_tensor *p, int tp, cg_tensor *q, int tq, const cg_tensor *x)
{
    cg_tensor *full, *r;

    if (!(full = matmul_dt(p, q, tp, tq, CG_F32)))
        return NULL;
    r = sum_to_dt(full, x->ndim, x->shape, x->dtype);
    cg_tensor_free(full);
    return r;
}

/* C = op(A) op(B): dop(A) = dC op(B)^T and dop(B) = op(A)^T dC, written
 * with transpose flags so that nothing is transposed in memory.  A
 * gradient that is one GEMM of its input's shape (2-D operands, or B's
 * over a batch folded into the rows) goes through grad_product; those
 * summed over a broadcast batch are reduced first. */
static int
matmul_backward(cg__node *node, cg_tensor *g, cg_tensor **gin)
{
    cg_tensor *a = node->saved[0], *b = node->saved[1];
    int ta = (int)node->i[0], tb = (int)node->i[1], flat, status = CG_OK;

    /* a float32 output of 16-bit operands: its gradient in their dtype */
    if (g->dtype != a->dtype)
        g = cg__cast(g, a->dtype);
    else
        g = cg_tensor_ref(g);
    if (!g)
        return cg__last_status();
    flat = a->ndim == 2 && b->ndim == 2;
    if (node->needs[0]) {
        if (flat)
            status = ta ? grad_product(node, 0, b, tb, g, 1, gin)
                        : grad_product(node, 0, g, 0, b, !tb, gin);
        else {
            gin[0] = ta ? product_to(b, tb, g, 1, a)
                        : product_to(g, 0, b, !tb, a);
            status = gin[0] ? CG_OK : cg__last_status();
        }
    }
    if (status == CG_OK && node->needs[1]) {
        int done = flat;

        if (flat)
            status = tb ? grad_product(node, 1, g, 1, a, ta, gin)
                        : grad_product(node, 1, a, !ta, g, 0, gin);
        else
            status = grad_b_folded(node, a, b, g, ta, tb, gin, &done);
        if (status == CG_OK && !done) {
            gin[1] = tb ? product_to(g, 1, a, ta, b)
                        : product_to(a, !ta, g, 0, b);
            status = gin[1] ? CG_OK : cg__last_status();
        }
    }
    cg_tensor_free(g);
    return status;
}

/* c = op(a) op(b) of dtype out, recorded. */
static cg_tensor *
matmul_dt(cg_tensor *a, cg_tensor *b, int trans_a, int trans_b, cg_dtype out)
{
    cg_tensor *in[2] = { a, b }, *c;
    int64_t shape[CG_MAX_DIMS], k = 0;
    cg__node *node;
    int ndim = 0, status;

    if (matmul_check(a, b, trans_a, trans_b, out, &ndim, shape, &k))
        return NULL;
    c = matmul_raw(a, b, trans_a, trans_b, out, ndim, shape, k);
    if (!c)
        return NULL;
    node = cg__record(c, "matmul", matmul_backward, 2, in, &status);
    if (node) {
        node->i[0] = trans_a;
        node->i[1] = trans_b;
        status = cg__node_save(node, 0, a);
        if (status == CG_OK)
            status = cg__node_save(node, 1, b);
    }
    if (status) {
        cg_tensor_free(c);
        return NULL;
    }
    return c;
}

cg_tensor *
cg_matmul_t(cg_tensor *a, cg_tensor *b, int trans_a, int trans_b)
{
    cg_tensor *ac[2];

    CG__AUTOCAST_RETURN(CG__AC_LOW, ac,
                        cg_matmul_t(ac[0], ac[1], trans_a, trans_b), a, b);
    cg__error_clear();
    return matmul_dt(a, b, trans_a != 0, trans_b != 0,
                     a ? a->dtype : CG_F32);
}

cg_tensor *
cg_matmul(cg_tensor *a, cg_tensor *b)
{
    return cg_matmul_t(a, b, 0, 0);
}

cg_tensor *
cg_matmul_out(cg_tensor *a, cg_tensor *b, cg_dtype out_dtype)
{
    cg_tensor *ac[2];

    CG__AUTOCAST_RETURN(CG__AC_LOW, ac, cg_matmul_out(ac[0], ac[1], out_dtype),
                        a, b);
    cg__error_clear();
    return matmul_dt(a, b, 0, 0, out_dtype);
}

/* ------------------------------------------------------------------------
 * The linear layer's product
 * ------------------------------------------------------------------------ */

/* y = x W^T + b: dx = dy W and dW = dy^T x, each one GEMM into the
 * gradient's buffer (grad_product), and db the column sums of dy (in
 * float32 for 16-bit tensors). */
static int
linear_backward(cg__node *node, cg_tensor *g, cg_tensor **gin)
{
    cg_tensor *x = node->saved[0], *w = node->saved[1], *g2;
    int64_t out = w->shape[0];
    int status = CG_OK;

    if (!(g2 = flat2d(g)))
        return cg__last_status();
    if (node->needs[0])
        status = grad_product(node, 0, g2, 0, w, 0, gin);
    if (status == CG_OK && node->needs[1])
        status = grad_product(node, 1, g2, 1, x, 0, gin);
    cg_tensor_free(g2);
    if (status == CG_OK && node->ninputs > 2 && node->needs[2] &&
        !(gin[2] = sum_to_dt(g, 1, &out, g->dtype)))
        status = cg__last_status();
    return status;
}

/* y += b over y's rows, where the GEMM could not add it: one pass. */
static int
add_bias(cg_tensor *y, cg_tensor *b)
{
    int64_t strides[CG_MAX_DIMS] = { 0 };
    cg_tensor *v;
    int status;

    strides[y->ndim - 1] = b->strides[0];
    if (!(v = cg__tensor_view(b, y->ndim, y->shape, strides, b->offset)))
        return cg__last_status();
    status = cg__axpy_inplace(y, v, 1.0f);
    cg_tensor_free(v);
    return status;
}

/* y = act(op(x2) W^T (+ b)) into y, the bias and the activation in the
 * GEMM's epilogue when the product runs clgrad's kernels; else the bias
 * added here and *act_done 0: the caller applies the activation. */
static int
linear_run(cg_tensor *x2, cg_tensor *w, cg_tensor *b, cg__act act,
           cg_tensor *y, int *act_done)
{
    gemm_arg gx = { 0 }, gw = { 0 };
    cg_tensor *bd = NULL;
    size_t out = (size_t)w->shape[0];
    int status, added = 1;

    status = gemm_prepare(x2, 0, 0, NULL, &gx);
    if (status == CG_OK)
        status = gemm_prepare(w, 1, 0, NULL, &gw);
    /* the epilogue reads the bias with unit stride */
    if (status == CG_OK && b && !(bd = b->strides[0] == 1 || out == 1
                                        ? cg_tensor_ref(b)
                                        : cg__copy_contiguous(b)))
        status = cg__last_status();
    if (status == CG_OK) {
        cg__mat xm = { cg__tensor_mem(gx.t), gx.offset, gx.ld };
        cg__mat wm = { cg__tensor_mem(gw.t), gw.offset, gw.ld };
        cg__mat ym = { cg__tensor_mem(y), (size_t)y->offset, out };
        cg__mat bm = { bd ? cg__tensor_mem(bd) : NULL,
                       bd ? (size_t)bd->offset : 0, out };

        status = cg__gemm_act(y->ctx, x2->dtype, y->dtype, gx.trans,
                              gw.trans, (size_t)x2->shape[0], out,
                              (size_t)x2->shape[1], 1.0f, xm, 0, wm, 0, 0.0f,
                              ym, 0, 1, bd ? &bm : NULL, act, &added);
    }
    *act_done = added;
    if (status == CG_OK && !added && bd)
        status = add_bias(y, bd);
    cg_tensor_free(gx.t);
    cg_tensor_free(gw.t);
    cg_tensor_free(bd);
    return status;
}

/* The activations linear_act fuses: the elementwise op (its backward
 * kernel reads only y, and relu's x > 0 is y > 0) and the node's name. */
static const struct {
    cg__ew_op op;
    const char *node;
} fused_act[] = {
    [CG__ACT_NONE] = { CG__EW_RELU, "linear" },
    [CG__ACT_RELU] = { CG__EW_RELU, "linear_relu" },
    [CG__ACT_TANH] = { CG__EW_TANH, "linear_tanh" },
    [CG__ACT_SIGMOID] = { CG__EW_SIGMOID, "linear_sigmoid" },
};

/* y = act(x W^T + b): the gradient of the pre-activation from y and g by
 * the activation's backward kernel, then linear_backward's products. */
static int
linear_act_backward(cg__node *node, cg_tensor *g, cg_tensor **gin)
{
    cg_tensor *y = node->saved[2], *gz = NULL;
    int status;

    status = cg__unary_grad(fused_act[node->i[0]].op, y, y, g, 0.0f, 0.0f,
                            &gz);
    if (status == CG_OK)
        status = linear_backward(node, gz, gin);
    cg_tensor_free(gz);
    return status;
}

/* The unfused path: the elementwise activation op after the product (for
 * 16-bit tanh and sigmoid, whose separate op rounds the product first). */
static cg_tensor *
act_op(cg__act act, cg_tensor *z)
{
    cg_tensor *y;

    if (!z)
        return NULL;
    y = act == CG__ACT_RELU ? cg_relu(z)
      : act == CG__ACT_TANH ? cg_tanh(z) : cg_sigmoid(z);
    cg_tensor_free(z);
    return y;
}

cg_tensor *
cg__linear(cg_tensor *x, cg_tensor *w, cg_tensor *b)
{
    return cg__linear_act(x, w, b, CG__ACT_NONE);
}

cg_tensor *
cg__linear_act(cg_tensor *x, cg_tensor *w, cg_tensor *b, cg__act act)
{
    cg_tensor *in[3] = { x, w, b }, *x2, *y, *ac[3];
    int64_t shape[CG_MAX_DIMS];
    cg__node *node;
    char s1[128], s2[128];
    int status, act_done = 1;
    cg__act act_later = CG__ACT_NONE;

    CG__AUTOCAST_RETURN(CG__AC_LOW, ac,
                        cg__linear_act(ac[0], ac[1], ac[2], act), x, w, b);
    if (x->ndim < 1 || w->ndim != 2 || x->shape[x->ndim - 1] != w->shape[1] ||
        (b && (b->ndim != 1 || b->shape[0] != w->shape[0]))) {
        cg__error(CG_ESHAPE, "linear: input %s against weight %s%s",
                  cg__shape_str(x->ndim, x->shape, s1, sizeof s1),
                  cg__shape_str(w->ndim, w->shape, s2, sizeof s2),
                  b ? " and its bias" : "");
        return NULL;
    }
    if (cg__check_tensor(x, "x", CG__FLOAT_DTYPE) ||
        cg__check_same_dtype(x, "x", w, "weight") ||
        (b && cg__check_same_dtype(x, "x", b, "bias")))
        return NULL;
    /* relu commutes with rounding; tanh and sigmoid of a 16-bit product
     * round it first as the separate ops (and PyTorch) do */
    if (act != CG__ACT_NONE && act != CG__ACT_RELU && x->dtype != CG_F32)
        return act_op(act, cg__linear_act(x, w, b, CG__ACT_NONE));
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 1] = w->shape[0];
    if (!(x2 = as2d(x)))
        return NULL;
    y = cg__tensor_empty(x->ctx, x->dtype, x->ndim, shape);
    status = y ? linear_run(x2, w, b, act, y, &act_done)
               : cg__last_status();
    if (status == CG_OK && !act_done) {
        /* CLBlast ran the product: a "linear" node, then the activation
         * as its own op */
        act_later = act;
        act = CG__ACT_NONE;
    }
    if (status == CG_OK &&
        (node = cg__record(y, fused_act[act].node,
                           act ? linear_act_backward : linear_backward,
                           b ? 3 : 2, in, &status))) {
        node->i[0] = act;
        status = cg__node_save(node, 0, x2);
        if (status == CG_OK)
            status = cg__node_save(node, 1, w);
        if (status == CG_OK && act)
            status = cg__node_save(node, 2, y);
    }
    cg_tensor_free(x2);
    if (status) {
        cg_tensor_free(y);
        return NULL;
    }
    return act_later ? act_op(act_later, y) : y;
}
