/* SPDX-License-Identifier: MIT */
/*
 * lib/ops/elementwise.c - unary and binary elementwise ops with NumPy
 * broadcasting, and where.  Kernels: kernels/elementwise.cl, in the
 * storage variant of the operands' dtype (float32, float16, bfloat16);
 * operands of different floating dtypes are first cast to PyTorch's
 * promoted dtype.
 */
#include "config.h"

#include <string.h>

#include "ops/internal.h"

/* Elements per work-item of the row kernels (NAME_fv, NAME_bv of
 * kernels/elementwise.cl): a multiple of their vector width, long enough
 * that a CPU work-item streams several cache lines, short enough that
 * rows of a few hundred elements still spread over work-items. */
#define EW_CHUNK 64

/* Each op's kernels: forward, backward, their row forms, and the forward
 * with its tangent (forward mode) and its row form. */
enum { EW_F, EW_B, EW_FV, EW_BV, EW_J, EW_JV };
static const cg__kid ew_kernels[CG__EW_COUNT][6] = {
#define CG_UNARY(ID, NAME, FWD, BWD)                                         \
    { CG__K_##ID##_F, CG__K_##ID##_B, CG__K_##ID##_FV, CG__K_##ID##_BV,      \
      CG__K_##ID##_J, CG__K_##ID##_JV },
#define CG_BINARY(ID, NAME, FWD, GA, GB) CG_UNARY(ID, NAME, FWD, GA)
#include "elementwise_ops.def"
#undef CG_UNARY
#undef CG_BINARY
};

/* Whether the row kernels can run over layout l: something to do, and
 * every operand's innermost stride 1 or 0 (set in inner[]). */
static int
rows_ok(const cg__layout *l, int nops, cl_int *inner)
{
    int k;

    if (l->numel == 0)
        return 0;
    for (k = 0; k < nops; k++) {
        cl_int s = l->strides[k].s[l->nd - 1];

        if (s != 0 && s != 1)
            return 0;
        inner[k] = s;
    }
    return 1;
}

/* A row kernel's row length (the innermost coalesced dimension). */
static cl_uint
row_len(const cg__layout *l)
{
    return (cl_uint)l->shape.s[l->nd - 1];
}

static int
launch_rows(cg_context *ctx, cl_kernel k, const cg__layout *l)
{
    size_t len = row_len(l);

    return cg__launch_chunks(ctx, k, len, (size_t)l->numel / len, EW_CHUNK,
                             CG__WG);
}

/* Whether operand k of layout l (a tangent) runs through the same
 * coalesced strides as operand p (its primal), so that a kernel can read
 * it at its primal's offsets. */
static int
same_strides(const cg__layout *l, int k, int p)
{
    int d;

    for (d = 0; d < l->nd; d++)
        if (l->strides[k].s[d] != l->strides[p].s[d])
            return 0;
    return 1;
}

/* Forward mode: the tangent of `in` for an op computing its output's
 * tangent in its own launch, in *t (borrowed; NULL: none).  Returns 0 when
 * the op should take the ordinary path instead (its JVP rule, run later
 * from the recorded node): no dual level, no tangent, or a tangent of
 * another dtype (a failure computing a pending tangent is left for that
 * path to report). */
static int
own_tangent(cg_tensor *in, cg_tensor **t)
{
    int status;

    *t = NULL;
    if (!cg__fw_wanted(1, &in))
        return 1;
    *t = cg__fw_input_tangent(in, &status);
    if (status) {
        cg__error_clear();
        *t = NULL;
        return 0;
    }
    return !*t || (*t)->dtype == in->dtype;
}

/* ------------------------------------------------------------------------
 * Unary: y = F(x; p0, p1).  Backward: gx = G(x, y, g; p0, p1).
 * ------------------------------------------------------------------------ */

/* y = F(x) into a new contiguous tensor and, when tx is not NULL (a
 * tangent of x's shape and dtype), its tangent into *pty in the same
 * launch.  Returns NULL with *pty NULL, or with *pty NULL and no error
 * when tx is laid out otherwise than x (the caller computes the tangent
 * another way). */
static cg_tensor *
unary_launch(cg__ew_op op, cg_tensor *x, cg_tensor *tx, float p0, float p1,
             cg_tensor **pty)
{
    const cg_tensor *ops[2] = { x, tx };
    cg__layout l;
    cg_tensor *y, *ty = NULL;
    cl_kernel k;
    cl_mem mx, my, mtx = NULL, mty = NULL;
    cl_uint n, len, ch = EW_CHUNK;
    cl_int inner[2];
    int vec, status, j;

    if (pty)
        *pty = NULL;
    cg__layout_make(&l, x->ndim, x->shape, tx ? 2 : 1, ops);
    if (tx && !same_strides(&l, 1, 0))
        return NULL;
    y = cg__tensor_empty(x->ctx, x->dtype, x->ndim, x->shape);
    if (!y)
        return NULL;
    if (tx && !(ty = cg__tensor_empty(x->ctx, x->dtype, x->ndim,
                                      x->shape))) {
        cg_tensor_free(y);
        return NULL;
    }
    n = (cl_uint)l.numel;
    vec = rows_ok(&l, tx ? 2 : 1, inner);
    len = row_len(&l);
    mx = cg__tensor_mem(x);
    my = cg__tensor_mem(y);
    if (tx) {
        mtx = cg__tensor_mem(tx);
        mty = cg__tensor_mem(ty);
    }
    j = tx ? (vec ? EW_JV : EW_J) : (vec ? EW_FV : EW_F);
    status = cg__kernel_dt(x->ctx, ew_kernels[op][j], x->dtype, &k);
    if (status == CG_OK && tx && vec)
        status = cg__args(k, CG__ARG(mx), CG__ARG(l.offset[0]), CG__ARG(mtx),
                          CG__ARG(l.offset[1]), CG__ARG(l.shape),
                          CG__ARG(l.strides[0]), CG__ARG(l.nd),
                          CG__ARG(inner[0]), CG__ARG(my), CG__ARG(mty),
                          CG__ARG(len), CG__ARG(ch), CG__ARG(p0),
                          CG__ARG(p1));
    else if (status == CG_OK && tx)
        status = cg__args(k, CG__ARG(mx), CG__ARG(l.offset[0]), CG__ARG(mtx),
                          CG__ARG(l.offset[1]), CG__ARG(l.shape),
                          CG__ARG(l.strides[0]), CG__ARG(l.nd), CG__ARG(my),
                          CG__ARG(mty), CG__ARG(n), CG__ARG(p0), CG__ARG(p1));
    else if (status == CG_OK && vec)
        status = cg__args(k, CG__ARG(mx), CG__ARG(l.offset[0]),
                          CG__ARG(l.shape), CG__ARG(l.strides[0]),
                          CG__ARG(l.nd), CG__ARG(inner[0]), CG__ARG(my),
                          CG__ARG(len), CG__ARG(ch), CG__ARG(p0),
                          CG__ARG(p1));
    else if (status == CG_OK)
        status = cg__args(k, CG__ARG(mx), CG__ARG(l.offset[0]),
                          CG__ARG(l.shape), CG__ARG(l.strides[0]),
                          CG__ARG(l.nd), CG__ARG(my), CG__ARG(n), CG__ARG(p0),
                          CG__ARG(p1));
    if (status == CG_OK)
        status = vec ? launch_rows(x->ctx, k, &l)
                     : cg__launch1d(x->ctx, k, n, CG__WG);
    if (status) {
        cg_tensor_free(y);
        cg_tensor_free(ty);
        return NULL;
    }
    if (pty)
        *pty = ty;
    return y;
}

cg_tensor *
cg__unary(cg__ew_op op, cg_tensor *x, float p0, float p1)
{
    return unary_launch(op, x, NULL, p0, p1, NULL);
}

int
cg__unary_grad(cg__ew_op op, cg_tensor *x, cg_tensor *y, cg_tensor *g,
               float p0, float p1, cg_tensor **out)
{
    cg_tensor *gx;
    cg__layout l;
    cl_kernel k;
    cl_mem mx, my, mg, mgx;
    cl_uint n, len, ch = EW_CHUNK;
    cl_int ix;
    int vec, status;

    *out = NULL;
    gx = cg__tensor_empty(x->ctx, x->dtype, x->ndim, x->shape);
    if (!gx)
        return cg__last_status();
    cg__layout_make(&l, x->ndim, x->shape, 1, (const cg_tensor **)&x);
    n = (cl_uint)l.numel;
    vec = rows_ok(&l, 1, &ix);
    len = row_len(&l);
    mx = cg__tensor_mem(x);
    my = cg__tensor_mem(y);
    mg = cg__tensor_mem(g);
    mgx = cg__tensor_mem(gx);
    status = cg__kernel_dt(x->ctx, ew_kernels[op][vec ? EW_BV : EW_B],
                           x->dtype, &k);
    if (status == CG_OK && vec) {
        status = cg__args(k, CG__ARG(mx), CG__ARG(l.offset[0]),
                          CG__ARG(l.shape), CG__ARG(l.strides[0]),
                          CG__ARG(l.nd), CG__ARG(ix), CG__ARG(my), CG__ARG(mg),
                          CG__ARG(mgx), CG__ARG(len), CG__ARG(ch), CG__ARG(p0),
                          CG__ARG(p1));
        if (status == CG_OK)
            status = launch_rows(x->ctx, k, &l);
    } else if (status == CG_OK) {
        status = cg__args(k, CG__ARG(mx), CG__ARG(l.offset[0]),
                          CG__ARG(l.shape), CG__ARG(l.strides[0]),
                          CG__ARG(l.nd), CG__ARG(my), CG__ARG(mg),
                          CG__ARG(mgx),
                          CG__ARG(n), CG__ARG(p0), CG__ARG(p1));
        if (status == CG_OK)
            status = cg__launch1d(x->ctx, k, n, CG__WG);
    }
    if (status) {
        cg_tensor_free(gx);
        return status;
    }
    *out = gx;
    return CG_OK;
}

static int
unary_backward(cg__node *node, cg_tensor *g, cg_tensor **gin)
{
    return cg__unary_grad((cg__ew_op)node->i[0], node->saved[0],
                          node->saved[1], g, (float)node->f[0],
                          (float)node->f[1], &gin[0]);
}

/* The recorded unary op `name` (shown in graphs) running op's kernels.
 * Under a dual level, an input tangent laid out as x gets its output's
 * tangent from the same launch (op_j); any other takes the JVP rule. */
static cg_tensor *
unary_op(const char *name, cg__ew_op op, cg_tensor *x, float p0, float p1)
{
    cg_tensor *y = NULL, *tx, *ty = NULL;
    cg__node *node;
    int status;

    cg__error_clear();
    if (cg__check_tensor(x, "input", CG__FLOAT_DTYPE))
        return NULL;
    if (own_tangent(x, &tx) && tx) {
        y = unary_launch(op, x, tx, p0, p1, &ty);
        if (!y && cg__last_status())
            return NULL;
    }
    if (!ty) {
        y = cg__unary(op, x, p0, p1);
        if (!y)
            return NULL;
        node = cg__record(y, name, unary_backward, 1, &x, &status);
    } else {
        node = cg__fw_record_own(y, name, unary_backward, 1, &x, &status);
    }
    if (node) {
        node->i[0] = op;
        node->f[0] = p0;
        node->f[1] = p1;
        status = cg__node_save(node, 0, x);
        if (status == CG_OK)
            status = cg__node_save(node, 1, y);
    }
    if (status) {
        cg_tensor_free(ty);
        cg_tensor_free(y);
        return NULL;
    }
    if (ty)
        cg__fw_attach(y, ty);
    return y;
}

cg_tensor *cg_add_scalar(cg_tensor *a, float s)
{ return unary_op("add_scalar", CG__EW_AFFINE, a, 1.0f, s); }
cg_tensor *cg_mul_scalar(cg_tensor *a, float s)
{ return unary_op("mul_scalar", CG__EW_AFFINE, a, s, 0.0f); }
cg_tensor *cg_neg(cg_tensor *a)
{ return unary_op("neg", CG__EW_AFFINE, a, -1.0f, 0.0f); }
cg_tensor *cg_pow_scalar(cg_tensor *a, float e)
{ return unary_op("pow_scalar", CG__EW_POW_SCALAR, a, e, 0.0f); }
cg_tensor *cg_exp(cg_tensor *a)
{ return unary_op("exp", CG__EW_EXP, a, 0, 0); }
cg_tensor *cg_log(cg_tensor *a)
{ return unary_op("log", CG__EW_LOG, a, 0, 0); }
cg_tensor *cg_sqrt(cg_tensor *a)
{ return unary_op("sqrt", CG__EW_SQRT, a, 0, 0); }
cg_tensor *cg_abs(cg_tensor *a)
{ return unary_op("abs", CG__EW_ABS, a, 0, 0); }
cg_tensor *cg_tanh(cg_tensor *a)
{ return unary_op("tanh", CG__EW_TANH, a, 0, 0); }
cg_tensor *cg_sigmoid(cg_tensor *a)
{ return unary_op("sigmoid", CG__EW_SIGMOID, a, 0, 0); }
cg_tensor *cg_relu(cg_tensor *a)
{ return unary_op("relu", CG__EW_RELU, a, 0, 0); }
cg_tensor *cg_leaky_relu(cg_tensor *a, float slope)
{ return unary_op("leaky_relu", CG__EW_LEAKY_RELU, a, slope, 0); }
cg_tensor *cg_gelu(cg_tensor *a)
{ return unary_op("gelu", CG__EW_GELU, a, 0, 0); }

cg_tensor *
cg_clamp(cg_tensor *a, float min, float max)
{
    if (!(min <= max)) {
        cg__error_clear();
        cg__error(CG_EINVAL, "clamp: min %g > max %g", min, max);
        return NULL;
    }
    return unary_op("clamp", CG__EW_CLAMP, a, min, max);
}

/* ------------------------------------------------------------------------
 * Binary, broadcasting.
 * ------------------------------------------------------------------------ */

/* Checks a and b and computes their broadcast shape. */
static int
binary_check(cg_tensor *a, cg_tensor *b, int *ndim, int64_t *shape)
{
    cg_tensor *ops[2] = { a, b };
    int status;

    if ((status = cg__check_tensor(a, "a", CG__FLOAT_DTYPE)) ||
        (status = cg__check_tensor(b, "b", CG__FLOAT_DTYPE)) ||
        (status = cg__same_context(2, (const cg_tensor *const *)ops)))
        return status;
    return cg__broadcast_shape(a, b, ndim, shape);
}

/* The dtype a binary op on a and b computes in, by PyTorch's type
 * promotion among floating tensors: a 0-D operand beside one with
 * dimensions takes the other's dtype; otherwise differing dtypes (float16
 * with bfloat16, either with float32) give float32. */
static cg_dtype
promoted(const cg_tensor *a, const cg_tensor *b)
{
    if (a->dtype == b->dtype)
        return a->dtype;
    if ((a->ndim == 0) != (b->ndim == 0))
        return a->ndim ? a->dtype : b->dtype;
    return CG_F32;
}

/* x cast to dt, recorded; float16 <-> bfloat16 (a 0-D operand's) goes
 * through float32, exactly as PyTorch converts. */
static cg_tensor *
cast_to(cg_tensor *x, cg_dtype dt)
{
    cg_tensor *f, *r;

    if (x->dtype == dt || x->dtype == CG_F32 || dt == CG_F32)
        return cg_to_dtype(x, dt);
    f = cg_to_dtype(x, CG_F32);
    r = f ? cg_to_dtype(f, dt) : NULL;
    cg_tensor_free(f);
    return r;
}

/* a and b cast to their promoted dtype (recorded, so that gradients
 * reach them in their own dtypes): new references in *pa, *pb. */
static int
promote(cg_tensor *a, cg_tensor *b, cg_tensor **pa, cg_tensor **pb)
{
    cg_dtype dt = promoted(a, b);

    *pa = cast_to(a, dt);
    *pb = *pa ? cast_to(b, dt) : NULL;
    if (*pb)
        return CG_OK;
    cg_tensor_free(*pa);
    *pa = NULL;
    return cg__last_status();
}

static int
binary_backward(cg__node *node, cg_tensor *g, cg_tensor **gin)
{
    cg_tensor *a = node->saved[0], *b = node->saved[1], *y = node->saved[2];
    cg_tensor *full[2] = { NULL, NULL };
    const cg_tensor *ops[2] = { a, b };
    cg__layout l;
    cl_kernel k;
    cl_mem ma, mb, my, mg, mga, mgb;
    cl_uint n, len, ch = EW_CHUNK;
    cl_int want = (node->needs[0] ? 1 : 0) | (node->needs[1] ? 2 : 0);
    cl_int inner[2];
    int status = CG_OK, j, vec;

    for (j = 0; j < 2; j++)
        if (node->needs[j] &&
            !(full[j] = cg__tensor_empty(g->ctx, g->dtype, g->ndim,
                                         g->shape))) {
            status = cg__last_status();
            goto out;
        }
    cg__layout_make(&l, g->ndim, g->shape, 2, ops);
    n = (cl_uint)l.numel;
    vec = rows_ok(&l, 2, inner);
    len = row_len(&l);
    ma = cg__tensor_mem(a);
    mb = cg__tensor_mem(b);
    my = cg__tensor_mem(y);
    mg = cg__tensor_mem(g);
    mga = cg__tensor_mem(full[0] ? full[0] : full[1]);
    mgb = cg__tensor_mem(full[1] ? full[1] : full[0]);
    status = cg__kernel_dt(g->ctx,
                           ew_kernels[node->i[0]][vec ? EW_BV : EW_B],
                           a->dtype, &k);
    if (status == CG_OK && vec) {
        status = cg__args(k, CG__ARG(ma), CG__ARG(l.offset[0]), CG__ARG(mb),
                          CG__ARG(l.offset[1]), CG__ARG(l.shape),
                          CG__ARG(l.strides[0]), CG__ARG(l.strides[1]),
                          CG__ARG(l.nd), CG__ARG(inner[0]), CG__ARG(inner[1]),
                          CG__ARG(my), CG__ARG(mg), CG__ARG(mga), CG__ARG(mgb),
                          CG__ARG(len), CG__ARG(ch), CG__ARG(want));
        if (status == CG_OK)
            status = launch_rows(g->ctx, k, &l);
    } else if (status == CG_OK) {
        status = cg__args(k, CG__ARG(ma), CG__ARG(l.offset[0]), CG__ARG(mb),
                          CG__ARG(l.offset[1]), CG__ARG(l.shape),
                          CG__ARG(l.strides[0]), CG__ARG(l.strides[1]),
                          CG__ARG(l.nd), CG__ARG(my), CG__ARG(mg),
                          CG__ARG(mga),
                          CG__ARG(mgb), CG__ARG(n), CG__ARG(want));
        if (status == CG_OK)
            status = cg__launch1d(g->ctx, k, n, CG__WG);
    }
    for (j = 0; j < 2 && status == CG_OK; j++) {
        const cg_tensor *in = ops[j];

        if (!full[j])
            continue;
        gin[j] = cg__sum_to_shape(full[j], in->ndim, in->shape);
        if (!gin[j])
            status = cg__last_status();
    }
out:
    cg_tensor_free(full[0]);
    cg_tensor_free(full[1]);
    return status;
}

/* y = F(a, b) over the broadcast shape into a new contiguous tensor and,
 * when ta or tb is not NULL (tangents of a's and b's shapes and dtype),
 * its tangent into *pty in the same launch; as unary_launch otherwise
 * (NULL with no error: a tangent laid out otherwise than its primal). */
static cg_tensor *
binary_launch(cg__ew_op op, cg_tensor *a, cg_tensor *b, cg_tensor *ta,
              cg_tensor *tb, int ndim, const int64_t *shape, cg_tensor **pty)
{
    const cg_tensor *ops[4] = { a, b, ta ? ta : a, tb ? tb : b };
    int dual = ta || tb, nops = dual ? 4 : 2, vec, status, j;
    cg__layout l;
    cg_tensor *y, *ty = NULL;
    cl_kernel k;
    cl_mem ma, mb, my, mta, mtb, mty = NULL;
    cl_uint n, len, ch = EW_CHUNK;
    cl_int inner[4], want = (ta ? 1 : 0) | (tb ? 2 : 0);

    if (pty)
        *pty = NULL;
    cg__layout_make(&l, ndim, shape, nops, ops);
    if (dual && (!same_strides(&l, 2, 0) || !same_strides(&l, 3, 1)))
        return NULL;
    y = cg__tensor_empty(a->ctx, a->dtype, ndim, shape);
    if (!y)
        return NULL;
    if (dual && !(ty = cg__tensor_empty(a->ctx, a->dtype, ndim, shape))) {
        cg_tensor_free(y);
        return NULL;
    }
    n = (cl_uint)l.numel;
    vec = rows_ok(&l, nops, inner);
    len = row_len(&l);
    ma = cg__tensor_mem(a);
    mb = cg__tensor_mem(b);
    my = cg__tensor_mem(y);
    mta = cg__tensor_mem(ops[2]);
    mtb = cg__tensor_mem(ops[3]);
    if (dual)
        mty = cg__tensor_mem(ty);
    j = dual ? (vec ? EW_JV : EW_J) : (vec ? EW_FV : EW_F);
    status = cg__kernel_dt(a->ctx, ew_kernels[op][j], a->dtype, &k);
    if (status == CG_OK && dual && vec)
        status = cg__args(k, CG__ARG(ma), CG__ARG(l.offset[0]), CG__ARG(mb),
                          CG__ARG(l.offset[1]), CG__ARG(mta),
                          CG__ARG(l.offset[2]), CG__ARG(mtb),
                          CG__ARG(l.offset[3]), CG__ARG(l.shape),
                          CG__ARG(l.strides[0]), CG__ARG(l.strides[1]),
                          CG__ARG(l.nd), CG__ARG(inner[0]), CG__ARG(inner[1]),
                          CG__ARG(my), CG__ARG(mty), CG__ARG(len),
                          CG__ARG(ch), CG__ARG(want));
    else if (status == CG_OK && dual)
        status = cg__args(k, CG__ARG(ma), CG__ARG(l.offset[0]), CG__ARG(mb),
                          CG__ARG(l.offset[1]), CG__ARG(mta),
                          CG__ARG(l.offset[2]), CG__ARG(mtb),
                          CG__ARG(l.offset[3]), CG__ARG(l.shape),
                          CG__ARG(l.strides[0]), CG__ARG(l.strides[1]),
                          CG__ARG(l.nd), CG__ARG(my), CG__ARG(mty),
                          CG__ARG(n), CG__ARG(want));
    else if (status == CG_OK && vec)
        status = cg__args(k, CG__ARG(ma), CG__ARG(l.offset[0]), CG__ARG(mb),
                          CG__ARG(l.offset[1]), CG__ARG(l.shape),
                          CG__ARG(l.strides[0]), CG__ARG(l.strides[1]),
                          CG__ARG(l.nd), CG__ARG(inner[0]), CG__ARG(inner[1]),
                          CG__ARG(my), CG__ARG(len), CG__ARG(ch));
    else if (status == CG_OK)
        status = cg__args(k, CG__ARG(ma), CG__ARG(l.offset[0]), CG__ARG(mb),
                          CG__ARG(l.offset[1]), CG__ARG(l.shape),
                          CG__ARG(l.strides[0]), CG__ARG(l.strides[1]),
                          CG__ARG(l.nd), CG__ARG(my), CG__ARG(n));
    if (status == CG_OK)
        status = vec ? launch_rows(a->ctx, k, &l)
                     : cg__launch1d(a->ctx, k, n, CG__WG);
    if (status) {
        cg_tensor_free(y);
        cg_tensor_free(ty);
        return NULL;
    }
    if (pty)
        *pty = ty;
    return y;
}

/* The binary op on a and b of one dtype, broadcast to shape, recorded.
 * Under a dual level, input tangents laid out as their primals give the
 * output's tangent from the same launch (op_j); others take the JVP
 * rule. */
static cg_tensor *
binary_same(const char *name, cg__ew_op op, cg_tensor *a, cg_tensor *b,
            int ndim, const int64_t *shape)
{
    cg_tensor *in[2] = { a, b }, *y = NULL, *ta, *tb, *ty = NULL;
    cg__node *node;
    int status;

    if (own_tangent(a, &ta) && own_tangent(b, &tb) && (ta || tb)) {
        y = binary_launch(op, a, b, ta, tb, ndim, shape, &ty);
        if (!y && cg__last_status())
            return NULL;
    }
    if (!ty) {
        y = binary_launch(op, a, b, NULL, NULL, ndim, shape, NULL);
        if (!y)
            return NULL;
        node = cg__record(y, name, binary_backward, 2, in, &status);
    } else {
        node = cg__fw_record_own(y, name, binary_backward, 2, in, &status);
    }
    if (node) {
        node->i[0] = op;
        status = cg__node_save(node, 0, a);
        if (status == CG_OK)
            status = cg__node_save(node, 1, b);
        if (status == CG_OK)
            status = cg__node_save(node, 2, y);
    }
    if (status) {
        cg_tensor_free(ty);
        cg_tensor_free(y);
        return NULL;
    }
    if (ty)
        cg__fw_attach(y, ty);
    return y;
}

static cg_tensor *
binary_op(const char *name, cg__ew_op op, cg_tensor *a, cg_tensor *b)
{
    int64_t shape[CG_MAX_DIMS];
    cg_tensor *pa, *pb, *y;
    int ndim;

    cg__error_clear();
    if (binary_check(a, b, &ndim, shape) || promote(a, b, &pa, &pb))
        return NULL;
    y = binary_same(name, op, pa, pb, ndim, shape);
    cg_tensor_free(pa);
    cg_tensor_free(pb);
    return y;
}

cg_tensor *cg_add(cg_tensor *a, cg_tensor *b)
{ return binary_op("add", CG__EW_ADD, a, b); }
cg_tensor *cg_sub(cg_tensor *a, cg_tensor *b)
{ return binary_op("sub", CG__EW_SUB, a, b); }
cg_tensor *cg_mul(cg_tensor *a, cg_tensor *b)
{ return binary_op("mul", CG__EW_MUL, a, b); }
cg_tensor *cg_div(cg_tensor *a, cg_tensor *b)
{ return binary_op("div", CG__EW_DIV, a, b); }
cg_tensor *cg_pow(cg_tensor *a, cg_tensor *b)
{ return binary_op("pow", CG__EW_POW, a, b); }
cg_tensor *cg_maximum(cg_tensor *a, cg_tensor *b)
{ return binary_op("maximum", CG__EW_MAXIMUM, a, b); }
cg_tensor *cg_minimum(cg_tensor *a, cg_tensor *b)
{ return binary_op("minimum", CG__EW_MINIMUM, a, b); }

/* ------------------------------------------------------------------------
 * where(cond, a, b)
 * ------------------------------------------------------------------------ */

static int
where_backward(cg__node *node, cg_tensor *g, cg_tensor **gin)
{
    cg_tensor *c = node->saved[0], *full[2] = { NULL, NULL };
    cg__layout l;
    cl_kernel k;
    cl_mem mc, mg, mga, mgb;
    cl_uint n;
    cl_int want = (node->needs[1] ? 1 : 0) | (node->needs[2] ? 2 : 0);
    int status = CG_OK, j;

    for (j = 0; j < 2; j++)
        if (node->needs[j + 1] &&
            !(full[j] = cg__tensor_empty(g->ctx, g->dtype, g->ndim,
                                         g->shape))) {
            status = cg__last_status();
            goto out;
        }
    cg__layout_make(&l, g->ndim, g->shape, 1, (const cg_tensor **)&c);
    n = (cl_uint)l.numel;
    mc = cg__tensor_mem(c);
    mg = cg__tensor_mem(g);
    mga = cg__tensor_mem(full[0] ? full[0] : full[1]);
    mgb = cg__tensor_mem(full[1] ? full[1] : full[0]);
    status = cg__kernel_dt(g->ctx, c->dtype == CG_F32 ? CG__K_WHERE_F_B
                           : CG__K_WHERE_I_B, g->dtype, &k);
    if (status == CG_OK)
        status = cg__args(k, CG__ARG(mc), CG__ARG(l.offset[0]),
                          CG__ARG(l.shape), CG__ARG(l.strides[0]),
                          CG__ARG(l.nd), CG__ARG(mg), CG__ARG(mga),
                          CG__ARG(mgb),
                          CG__ARG(n), CG__ARG(want));
    if (status == CG_OK)
        status = cg__launch1d(g->ctx, k, n, CG__WG);
    for (j = 0; j < 2 && status == CG_OK; j++) {
        cg_tensor *in = node->saved[j + 1];

        if (!full[j])
            continue;
        gin[j + 1] = cg__sum_to_shape(full[j], in->ndim, in->shape);
        if (!gin[j + 1])
            status = cg__last_status();
    }
out:
    cg_tensor_free(full[0]);
    cg_tensor_free(full[1]);
    return status;
}

/* where on a and b of one dtype, broadcast with cond to shape. */
static cg_tensor *
where_same(cg_tensor *cond, cg_tensor *a, cg_tensor *b, int ndim,
           const int64_t *shape)
{
    cg_tensor *in[3] = { cond, a, b }, *y;
    const cg_tensor *ops[3] = { cond, a, b };
    cg__layout l;
    cg__node *node;
    cl_kernel k;
    cl_mem mc, ma, mb, my;
    cl_uint n;
    int status;

    y = cg__tensor_empty(a->ctx, a->dtype, ndim, shape);
    if (!y)
        return NULL;
    cg__layout_make(&l, ndim, shape, 3, ops);
    n = (cl_uint)l.numel;
    mc = cg__tensor_mem(cond);
    ma = cg__tensor_mem(a);
    mb = cg__tensor_mem(b);
    my = cg__tensor_mem(y);
    status = cg__kernel_dt(a->ctx, cond->dtype == CG_F32 ? CG__K_WHERE_F
                           : CG__K_WHERE_I, a->dtype, &k);
    if (status == CG_OK)
        status = cg__args(k, CG__ARG(mc), CG__ARG(l.offset[0]), CG__ARG(ma),
                          CG__ARG(l.offset[1]), CG__ARG(mb),
                          CG__ARG(l.offset[2]), CG__ARG(l.shape),
                          CG__ARG(l.strides[0]), CG__ARG(l.strides[1]),
                          CG__ARG(l.strides[2]), CG__ARG(l.nd), CG__ARG(my),
                          CG__ARG(n));
    if (status == CG_OK)
        status = cg__launch1d(a->ctx, k, n, CG__WG);
    if (status == CG_OK) {
        /* cond never requires grad: it is an input of the node all the
         * same, so that the graph shows it. */
        node = cg__record(y, "where", where_backward, 3, in, &status);
        if (node) {
            node->needs[0] = 0;
            status = cg__node_save(node, 0, cond);
            if (status == CG_OK)
                status = cg__node_save(node, 1, a);
            if (status == CG_OK)
                status = cg__node_save(node, 2, b);
        }
    }
    if (status) {
        cg_tensor_free(y);
        return NULL;
    }
    return y;
}

cg_tensor *
cg_where(cg_tensor *cond, cg_tensor *a, cg_tensor *b)
{
    cg_tensor *in[3] = { cond, a, b }, *pa, *pb, *y, tmp;
    int64_t shape[CG_MAX_DIMS], shape2[CG_MAX_DIMS];
    int ndim, ndim2;

    cg__error_clear();
    if (cg__check_tensor(cond, "cond", 1) ||
        cg__same_context(3, (const cg_tensor *const *)in) ||
        binary_check(a, b, &ndim, shape))
        return NULL;
    memset(&tmp, 0, sizeof tmp);
    tmp.ndim = ndim;
    memcpy(tmp.shape, shape, sizeof shape);
    if (cg__broadcast_shape(cond, &tmp, &ndim2, shape2) ||
        promote(a, b, &pa, &pb))
        return NULL;
    y = where_same(cond, pa, pb, ndim2, shape2);
    cg_tensor_free(pa);
    cg_tensor_free(pb);
    return y;
}
