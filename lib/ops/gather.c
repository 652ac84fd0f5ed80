/* SPDX-License-Identifier: MIT */
/*
 * lib/ops/gather.c - embedding and index_select: gathers of rows along one
 * dimension, with a deterministic backward (sort the indices, then sum
 * each run of equal indices in a fixed order; no atomics).
 * Kernels: kernels/gather.cl.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "ops/internal.h"

/* x seen as [outer, V, inner], gathered with n indices. */
typedef struct geom {
    cl_uint outer, V, inner, n;
} geom;

static int
check_indices(const cg_tensor *idx, const char *op)
{
    if (!idx)
        return cg__error(CG_EINVAL, "%s: indices is NULL", op);
    if (idx->dtype != CG_I32)
        return cg__error(CG_EDTYPE, "%s: indices must be int32, not %s", op,
                         cg__dtype_name(idx->dtype));
    return CG_OK;
}

/* Out-of-range indices are an error, found by reading the indices to the
 * host: this waits for the work that produces them, which is cheaper than
 * a wrong model that trains on silently zeroed rows. */
static int
validate_range(const cg_tensor *idx, int64_t V, const char *op)
{
    int64_t n = cg_tensor_numel(idx), j;
    int32_t *h = cg__malloc((size_t)n * sizeof *h);
    int status;

    if (!h)
        return CG_EHOSTMEM;
    status = cg_tensor_to_host(idx, h, (size_t)n * sizeof *h);
    for (j = 0; j < n && status == CG_OK; j++)
        if (h[j] < 0 || h[j] >= V)
            status = cg__error(CG_EINVAL, "%s: index %d at position %lld is "
                               "outside [0, %lld)", op, (int)h[j],
                               (long long)j, (long long)V);
    free(h);
    return status;
}

/* The pairs (idx[j], j) sorted ascending, and the segment bounds of every
 * v in [0, V]: what the backward's segmented sum reads. */
static int
sort_segments(cg_context *ctx, cg_tensor *idx, cl_uint V, cg_tensor **pairs,
              cg_tensor **bounds)
{
    cl_uint n = (cl_uint)cg_tensor_numel(idx), m = 1, j, k, half, nb = V + 1;
    int64_t len;
    cl_mem mi = cg__tensor_mem(idx), mp, mb;
    cl_kernel kn;
    int status;

    while (m < n)
        m <<= 1;
    len = 2 * (int64_t)m;
    *pairs = cg__tensor_empty(ctx, CG_I32, 1, &len);
    len = nb;
    *bounds = *pairs ? cg__tensor_empty(ctx, CG_I32, 1, &len) : NULL;
    if (!*bounds)
        return cg__last_status();
    mp = cg__tensor_mem(*pairs);
    mb = cg__tensor_mem(*bounds);
    half = m / 2;
    status = cg__kernel(ctx, CG__K_SORT_INIT, &kn);
    if (status == CG_OK)
        status = cg__args(kn, CG__ARG(mi), CG__ARG(mp), CG__ARG(n),
                          CG__ARG(m));
    if (status == CG_OK)
        status = cg__launch1d(ctx, kn, m, CG__WG);
    if (status == CG_OK)
        status = cg__kernel(ctx, CG__K_BITONIC_STEP, &kn);
    for (k = 2; k <= m && status == CG_OK; k <<= 1)
        for (j = k / 2; j > 0 && status == CG_OK; j >>= 1) {
            status = cg__args(kn, CG__ARG(mp), CG__ARG(m), CG__ARG(j),
                              CG__ARG(k));
            if (status == CG_OK)
                status = cg__launch1d(ctx, kn, half, CG__WG);
        }
    if (status == CG_OK)
        status = cg__kernel(ctx, CG__K_SEG_BOUNDS, &kn);
    if (status == CG_OK)
        status = cg__args(kn, CG__ARG(mp), CG__ARG(m), CG__ARG(mb),
                          CG__ARG(V));
    if (status == CG_OK)
        status = cg__launch1d(ctx, kn, nb, CG__WG);
    return status;
}

static int
gather_backward(cg__node *node, cg_tensor *g, cg_tensor **gin)
{
    cg_tensor *x = node->inputs[0], *idx = node->saved[0], *gx;
    cg_tensor *pairs = NULL, *bounds = NULL;
    geom ge = { (cl_uint)node->i[0], (cl_uint)node->i[1],
                (cl_uint)node->i[2], (cl_uint)node->i[3] };
    cl_uint total = ge.outer * ge.V * ge.inner;
    cl_mem mg = cg__tensor_mem(g), mp, mb, mgx;
    cl_kernel k;
    int status;

    gx = cg__tensor_empty(g->ctx, x->dtype, x->ndim, x->shape);
    if (!gx)
        return cg__last_status();
    status = sort_segments(g->ctx, idx, ge.V, &pairs, &bounds);
    if (status == CG_OK) {
        mp = cg__tensor_mem(pairs);
        mb = cg__tensor_mem(bounds);
        mgx = cg__tensor_mem(gx);
        status = cg__kernel_dt(g->ctx, CG__K_SEG_SUM, x->dtype, &k);
    }
    if (status == CG_OK)
        status = cg__args(k, CG__ARG(mg), CG__ARG(mp), CG__ARG(mb),
                          CG__ARG(mgx), CG__ARG(ge.n), CG__ARG(ge.V),
                          CG__ARG(ge.inner), CG__ARG(total));
    if (status == CG_OK)
        status = cg__launch1d(g->ctx, k, total, CG__WG);
    cg_tensor_free(pairs);
    cg_tensor_free(bounds);
    if (status) {
        cg_tensor_free(gx);
        return status;
    }
    gin[0] = gx;
    return CG_OK;
}

/* Enqueues the gather of dense x by dense indices into a new tensor of
 * shape (ndim, shape), which holds [outer, n, inner] elements. */
static cg_tensor *
gather_forward(cg_tensor *x, cg_tensor *idx, const geom *ge, int ndim,
               const int64_t *shape)
{
    cg_tensor *y = cg__tensor_empty(x->ctx, x->dtype, ndim, shape);
    cl_uint total = ge->outer * ge->n * ge->inner;
    cl_mem mx = cg__tensor_mem(x), mi = cg__tensor_mem(idx), my;
    cl_kernel k;

    if (!y)
        return NULL;
    my = cg__tensor_mem(y);
    if (cg__kernel_dt(x->ctx, CG__K_GATHER, x->dtype, &k) ||
        cg__args(k, CG__ARG(mx), CG__ARG(mi), CG__ARG(my), CG__ARG(ge->n),
                 CG__ARG(ge->V), CG__ARG(ge->inner), CG__ARG(total)) ||
        cg__launch1d(x->ctx, k, total, CG__WG)) {
        cg_tensor_free(y);
        return NULL;
    }
    return y;
}

/* Gathers along dimension d of x (checked) by idx (checked) into a tensor
 * of shape (ndim, shape), recorded as `op`. */
static cg_tensor *
gather_op(const char *op, cg_tensor *x, int d, cg_tensor *idx, int ndim,
          const int64_t *shape)
{
    cg_tensor *in[2] = { x, idx }, *xd = NULL, *id = NULL, *y = NULL;
    cg__node *node;
    geom ge;
    int status;

    ge.outer = (cl_uint)cg__numel(d, x->shape);
    ge.V = (cl_uint)x->shape[d];
    ge.inner = (cl_uint)cg__numel(x->ndim - d - 1, x->shape + d + 1);
    ge.n = (cl_uint)cg_tensor_numel(idx);
    if (cg__same_context(2, (const cg_tensor *const *)in) ||
        validate_range(idx, x->shape[d], op))
        return NULL;
    xd = cg__dense(x);
    id = xd ? cg__dense(idx) : NULL;
    if (id)
        y = gather_forward(xd, id, &ge, ndim, shape);
    status = y ? CG_OK : cg__last_status();
    if (y && x->dtype != CG_I32) {
        node = cg__record(y, op, gather_backward, 2, in, &status);
        if (node) {
            node->i[0] = ge.outer;
            node->i[1] = ge.V;
            node->i[2] = ge.inner;
            node->i[3] = ge.n;
            status = cg__node_save(node, 0, id);
        }
    }
    cg_tensor_free(xd);
    cg_tensor_free(id);
    if (status) {
        cg_tensor_free(y);
        return NULL;
    }
    return y;
}

cg_tensor *
cg_embedding(cg_tensor *weight, cg_tensor *indices)
{
    int64_t shape[CG_MAX_DIMS];
    char s[128];

    cg__error_clear();
    if (cg__check_tensor(weight, "weight", CG__FLOAT_DTYPE) ||
        check_indices(indices, "embedding"))
        return NULL;
    if (weight->ndim != 2 || indices->ndim + 1 > CG_MAX_DIMS) {
        cg__error(CG_ESHAPE, "embedding: weight %s must be [V, D] and the "
                  "indices have at most %d dimensions (they have %d)",
                  cg__shape_str(weight->ndim, weight->shape, s, sizeof s),
                  CG_MAX_DIMS - 1, indices->ndim);
        return NULL;
    }
    memcpy(shape, indices->shape, (size_t)indices->ndim * sizeof *shape);
    shape[indices->ndim] = weight->shape[1];
    return gather_op("embedding", weight, 0, indices, indices->ndim + 1,
                     shape);
}

cg_tensor *
cg_index_select(cg_tensor *x, int dim, cg_tensor *indices)
{
    int64_t shape[CG_MAX_DIMS];
    int d;
    char s[128];

    cg__error_clear();
    if (cg__check_tensor(x, "input", CG__ANY_DTYPE) ||
        check_indices(indices, "index_select"))
        return NULL;
    d = cg__dim(dim, x->ndim);
    if (d < 0) {
        cg__error(CG_EINVAL, "index_select: dimension %d of a %d-D tensor "
                  "%s", dim, x->ndim,
                  cg__shape_str(x->ndim, x->shape, s, sizeof s));
        return NULL;
    }
    if (indices->ndim != 1) {
        cg__error(CG_ESHAPE, "index_select: indices must be 1-D, not %s",
                  cg__shape_str(indices->ndim, indices->shape, s, sizeof s));
        return NULL;
    }
    memcpy(shape, x->shape, sizeof shape);
    shape[d] = indices->shape[0];
    return gather_op("index_select", x, d, indices, x->ndim, shape);
}

/* Forward mode: the tangent of a "gather_grad" node n (the scatter-add of
 * a gather's gradient, lib/ops/grad_graph.c; i[0..3] and saved[0] as the
 * gather's) for its input's tangent t: the same scatter-add of t, into a
 * new tensor of y's shape. */
int
cg__gather_grad_jvp(cg__node *n, cg_tensor *y, cg_tensor *t,
                    cg_tensor **out)
{
    cg_tensor *gin[CG__NODE_INPUTS] = { NULL }, *td = cg__dense(t);
    cg__node tmp;
    int status;

    if (!td)
        return cg__last_status();
    memcpy(&tmp, n, sizeof tmp);
    memset(tmp.inputs, 0, sizeof tmp.inputs);
    tmp.inputs[0] = y;                  /* the shape and dtype of x */
    status = gather_backward(&tmp, td, gin);
    cg_tensor_free(td);
    if (status == CG_OK)
        *out = gin[0];
    return status;
}
