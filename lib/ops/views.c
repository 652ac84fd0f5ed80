/* SPDX-License-Identifier: MIT */
/*
 * lib/ops/views.c - reshape, transpose, permute, narrow, expand, squeeze,
 * unsqueeze and contiguous.  Views share storage and launch nothing; their
 * backward functions map the gradient back to the input's shape.
 */
#include "config.h"

#include <string.h>

#include "ops/internal.h"

/* A contiguous view of g with shape (ndim, shape). */
static cg_tensor *
view_as(cg_tensor *g, int ndim, const int64_t *shape)
{
    int64_t strides[CG_MAX_DIMS];
    cg_tensor *c, *v;

    c = cg_tensor_is_contiguous(g) ? cg_tensor_ref(g) : cg__copy_contiguous(g);
    if (!c)
        return NULL;
    cg__contiguous_strides(ndim, shape, strides);
    v = cg__tensor_view(c, ndim, shape, strides, c->offset);
    cg_tensor_free(c);
    return v;
}

/* Backward of reshape, squeeze, unsqueeze and contiguous. */
static int
reshape_backward(cg__node *node, cg_tensor *g, cg_tensor **gin)
{
    cg_tensor *x = node->inputs[0];

    gin[0] = view_as(g, x->ndim, x->shape);
    return gin[0] ? CG_OK : cg__last_status();
}

/* Records `op` for view y of x; frees y and returns NULL on failure. */
static cg_tensor *
record_view(cg_tensor *y, cg_tensor *x, const char *op, cg__backward_fn bwd,
            const int64_t *params, int nparams)
{
    cg__node *node;
    int status;

    if (!y)
        return NULL;
    node = cg__record(y, op, bwd, 1, &x, &status);
    if (node && nparams > 0)
        memcpy(node->i, params, (size_t)nparams * sizeof *params);
    if (status) {
        cg_tensor_free(y);
        return NULL;
    }
    return y;
}

cg_tensor *
cg_reshape(cg_tensor *x, int ndim, const int64_t *shape)
{
    int64_t s[CG_MAX_DIMS], known = 1, n;
    int d, infer = -1;
    char s1[CG_MAX_DIMS * 22 + 4], s2[CG_MAX_DIMS * 22 + 4];

    cg__error_clear();
    if (cg__check_tensor(x, "input", CG__ANY_DTYPE))
        return NULL;
    if (ndim < 0 || ndim > CG_MAX_DIMS || (ndim > 0 && !shape)) {
        cg__error(CG_EINVAL, "reshape to %d dimensions", ndim);
        return NULL;
    }
    for (d = 0; d < ndim; d++) {
        s[d] = shape[d];
        if (s[d] == -1 && infer < 0) {
            infer = d;
            continue;
        }
        /* Checked: {2, 9223372036854775805, -1} wraps around to a
         * product that divides the element count. */
        if (s[d] < 1 || cg__mul_i64(known, s[d], &known))
            goto bad;
    }
    n = cg_tensor_numel(x);
    if (infer >= 0) {
        if (n % known != 0)
            goto bad;
        s[infer] = n / known;
        known *= s[infer];
    }
    if (known != n)
        goto bad;
    return record_view(view_as(x, ndim, s), x, "reshape", reshape_backward,
                       NULL, 0);
bad:
    cg__error(CG_ESHAPE, "cannot reshape %s (%lld elements) to %s",
              cg__shape_str(x->ndim, x->shape, s1, sizeof s1),
              (long long)cg_tensor_numel(x),
              cg__shape_str(ndim, shape, s2, sizeof s2));
    return NULL;
}

cg_tensor *
cg_flatten(cg_tensor *x, int start_dim, int end_dim)
{
    int64_t s[CG_MAX_DIMS];
    int d, nd;

    cg__error_clear();
    if (cg__check_tensor(x, "input", CG__ANY_DTYPE))
        return NULL;
    nd = x->ndim > 0 ? x->ndim : 1;
    if (start_dim < 0)
        start_dim += nd;
    if (end_dim < 0)
        end_dim += nd;
    if (start_dim < 0 || start_dim >= nd || end_dim < start_dim ||
        end_dim >= nd) {
        cg__error(CG_EINVAL, "flatten: dimensions %d to %d of a tensor of "
                  "%d dimensions", start_dim, end_dim, x->ndim);
        return NULL;
    }
    if (x->ndim == 0)
        return cg_reshape(x, 1, (const int64_t[1]){ 1 });
    for (d = 0; d < start_dim; d++)
        s[d] = x->shape[d];
    s[start_dim] = 1;
    for (d = start_dim; d <= end_dim; d++)
        s[start_dim] *= x->shape[d];  /* numel fits: checked at creation */
    for (d = end_dim + 1; d < x->ndim; d++)
        s[d - (end_dim - start_dim)] = x->shape[d];
    return cg_reshape(x, x->ndim - (end_dim - start_dim), s);
}

static int
permute_backward(cg__node *node, cg_tensor *g, cg_tensor **gin)
{
    int64_t shape[CG_MAX_DIMS], strides[CG_MAX_DIMS];
    int d, nd = g->ndim;

    /* node->i holds the forward permutation: y dim d is x dim perm[d]. */
    for (d = 0; d < nd; d++) {
        shape[node->i[d]] = g->shape[d];
        strides[node->i[d]] = g->strides[d];
    }
    gin[0] = cg__tensor_view(g, nd, shape, strides, g->offset);
    return gin[0] ? CG_OK : cg__last_status();
}

cg_tensor *
cg_permute(cg_tensor *x, const int *perm)
{
    int64_t shape[CG_MAX_DIMS], strides[CG_MAX_DIMS], p[CG_MAX_DIMS];
    unsigned seen = 0;
    int d;

    cg__error_clear();
    if (cg__check_tensor(x, "input", CG__ANY_DTYPE))
        return NULL;
    if (!perm && x->ndim > 0) {
        cg__error(CG_EINVAL, "perm is NULL");
        return NULL;
    }
    for (d = 0; d < x->ndim; d++) {
        int s = cg__dim(perm[d], x->ndim);

        if (s < 0 || (seen & (1u << s))) {
            cg__error(CG_EINVAL, "perm is not a permutation of 0..%d",
                      x->ndim - 1);
            return NULL;
        }
        seen |= 1u << s;
        p[d] = s;
        shape[d] = x->shape[s];
        strides[d] = x->strides[s];
    }
    return record_view(cg__tensor_view(x, x->ndim, shape, strides, x->offset),
                       x, "permute", permute_backward, p, x->ndim);
}

cg_tensor *
cg_transpose(cg_tensor *x, int dim0, int dim1)
{
    int perm[CG_MAX_DIMS], d, a, b;

    cg__error_clear();
    if (cg__check_tensor(x, "input", CG__ANY_DTYPE))
        return NULL;
    a = cg__dim(dim0, x->ndim);
    b = cg__dim(dim1, x->ndim);
    if (a < 0 || b < 0) {
        cg__error(CG_EINVAL, "transpose(%d, %d) of a %d-D tensor", dim0, dim1,
                  x->ndim);
        return NULL;
    }
    for (d = 0; d < x->ndim; d++)
        perm[d] = d;
    perm[a] = b;
    perm[b] = a;
    return cg_permute(x, perm);
}

static int
narrow_backward(cg__node *node, cg_tensor *g, cg_tensor **gin)
{
    cg_tensor *x = node->inputs[0], *gx, *part;
    int dim = (int)node->i[0];
    int64_t shape[CG_MAX_DIMS];
    int status;

    gx = cg__tensor_empty(g->ctx, g->dtype, x->ndim, x->shape);
    if (!gx)
        return cg__last_status();
    memcpy(shape, gx->shape, sizeof shape);
    shape[dim] = g->shape[dim];
    part = cg__tensor_view(gx, gx->ndim, shape, gx->strides,
                           node->i[1] * gx->strides[dim]);
    status = part ? cg__fill(gx, 0.0f) : cg__last_status();
    if (status == CG_OK)
        status = cg__copy_into(part, g);
    cg_tensor_free(part);
    if (status) {
        cg_tensor_free(gx);
        return status;
    }
    gin[0] = gx;
    return CG_OK;
}

cg_tensor *
cg_narrow(cg_tensor *x, int dim, int64_t start, int64_t length)
{
    int64_t shape[CG_MAX_DIMS], p[2];
    int d;
    char s[128];

    cg__error_clear();
    if (cg__check_tensor(x, "input", CG__ANY_DTYPE))
        return NULL;
    d = cg__dim(dim, x->ndim);
    if (d < 0) {
        cg__error(CG_EINVAL, "narrow: dimension %d of a %d-D tensor", dim,
                  x->ndim);
        return NULL;
    }
    /* start + length is not computed: it overflows for a start near
     * INT64_MAX, and the view would then read outside the storage. */
    if (start < 0 || length < 1 || start > x->shape[d] ||
        length > x->shape[d] - start) {
        cg__error(CG_ESHAPE, "cg_narrow: start %lld + length %lld %s "
                  "dimension %d of size %lld of a %s", (long long)start,
                  (long long)length, start < 0 || length < 1 ? "is not "
                  "a range of" : "exceeds", d, (long long)x->shape[d],
                  cg__shape_str(x->ndim, x->shape, s, sizeof s));
        return NULL;
    }
    memcpy(shape, x->shape, sizeof shape);
    shape[d] = length;
    p[0] = d;
    p[1] = start;
    return record_view(cg__tensor_view(x, x->ndim, shape, x->strides,
                                       x->offset + start * x->strides[d]),
                       x, "narrow", narrow_backward, p, 2);
}

/* A 16-bit gradient is summed in float32 and rounded once, as PyTorch's
 * sum of a half tensor. */
static int
expand_backward(cg__node *node, cg_tensor *g, cg_tensor **gin)
{
    cg_tensor *x = node->inputs[0], *g32, *s;

    if (g->dtype == CG_F32) {
        gin[0] = cg__sum_to_shape(g, x->ndim, x->shape);
        return gin[0] ? CG_OK : cg__last_status();
    }
    g32 = cg__cast(g, CG_F32);
    s = g32 ? cg__sum_to_shape(g32, x->ndim, x->shape) : NULL;
    gin[0] = s ? cg__cast(s, g->dtype) : NULL;
    cg_tensor_free(s);
    cg_tensor_free(g32);
    return gin[0] ? CG_OK : cg__last_status();
}

cg_tensor *
cg_expand(cg_tensor *x, int ndim, const int64_t *shape)
{
    int64_t s[CG_MAX_DIMS], strides[CG_MAX_DIMS], n = 1;
    int d, lead;
    char s1[128], s2[CG_MAX_DIMS * 22 + 4];

    cg__error_clear();
    if (cg__check_tensor(x, "input", CG__ANY_DTYPE))
        return NULL;
    if (ndim < x->ndim || ndim > CG_MAX_DIMS || !shape)
        goto bad;
    lead = ndim - x->ndim;
    for (d = 0; d < ndim; d++) {
        int64_t have = d < lead ? 1 : x->shape[d - lead];

        s[d] = shape[d] == -1 && d >= lead ? have : shape[d];
        if (s[d] < 1 || (have != 1 && have != s[d]))
            goto bad;
        strides[d] = (d < lead || have != s[d]) ? 0 : x->strides[d - lead];
    }
    /* The view reads no more memory, but every op on it launches one
     * work-item per element, counted in 32 bits as for any tensor. */
    for (d = 0; d < ndim; d++)
        if (cg__mul_i64(n, s[d], &n) || n > INT32_MAX) {
            cg__error(CG_ESHAPE, "cannot expand %s to %s: more than 2^31-1 "
                      "elements", cg__shape_str(x->ndim, x->shape, s1,
                                                sizeof s1),
                      cg__shape_str(ndim, shape, s2, sizeof s2));
            return NULL;
        }
    return record_view(cg__tensor_view(x, ndim, s, strides, x->offset), x,
                       "expand", expand_backward, NULL, 0);
bad:
    cg__error(CG_ESHAPE, "cannot expand %s to %s",
              cg__shape_str(x->ndim, x->shape, s1, sizeof s1),
              shape ? cg__shape_str(ndim, shape, s2, sizeof s2) : "NULL");
    return NULL;
}

cg_tensor *
cg_squeeze(cg_tensor *x, int dim)
{
    int64_t shape[CG_MAX_DIMS], strides[CG_MAX_DIMS];
    int d, k, n = 0;

    cg__error_clear();
    if (cg__check_tensor(x, "input", CG__ANY_DTYPE))
        return NULL;
    d = cg__dim(dim, x->ndim);
    if (d < 0 || x->shape[d] != 1) {
        cg__error(d < 0 ? CG_EINVAL : CG_ESHAPE, "squeeze: dimension %d is "
                  "%s", dim, d < 0 ? "out of range" : "not of size 1");
        return NULL;
    }
    for (k = 0; k < x->ndim; k++)
        if (k != d) {
            shape[n] = x->shape[k];
            strides[n++] = x->strides[k];
        }
    return record_view(cg__tensor_view(x, n, shape, strides, x->offset), x,
                       "squeeze", reshape_backward, NULL, 0);
}

cg_tensor *
cg_unsqueeze(cg_tensor *x, int dim)
{
    int64_t shape[CG_MAX_DIMS], strides[CG_MAX_DIMS];
    int d, k, n = 0;

    cg__error_clear();
    if (cg__check_tensor(x, "input", CG__ANY_DTYPE))
        return NULL;
    d = cg__dim(dim, x->ndim + 1);
    if (d < 0 || x->ndim == CG_MAX_DIMS) {
        cg__error(CG_EINVAL, "unsqueeze: dimension %d of a %d-D tensor", dim,
                  x->ndim);
        return NULL;
    }
    for (k = 0; k <= x->ndim; k++) {
        if (k == d) {
            shape[n] = 1;
            strides[n++] = k < x->ndim ? x->strides[k] * x->shape[k] : 1;
        }
        if (k < x->ndim) {
            shape[n] = x->shape[k];
            strides[n++] = x->strides[k];
        }
    }
    return record_view(cg__tensor_view(x, n, shape, strides, x->offset), x,
                       "unsqueeze", reshape_backward, NULL, 0);
}

cg_tensor *
cg_contiguous(cg_tensor *x)
{
    cg__error_clear();
    if (cg__check_tensor(x, "input", CG__ANY_DTYPE))
        return NULL;
    if (cg_tensor_is_contiguous(x))
        return cg_tensor_ref(x);
    return record_view(cg__copy_contiguous(x), x, "contiguous",
                       reshape_backward, NULL, 0);
}
