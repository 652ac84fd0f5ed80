/* SPDX-License-Identifier: MIT */
/*
 * lib/ops/join.c - concat, stack and split.  concat copies each input into
 * its slice of the output with the copy kernels (any layout, any dtype:
 * 32-bit words or 16-bit ones); its backward hands each input a view of its slice of the
 * gradient.  stack is unsqueeze + concat; split is a list of narrows.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "ops/internal.h"

/* Checks the tensors of a concat along d: one context, one dtype, equal
 * shapes except along d.  *total is the output's size along d. */
static int
concat_check(cg_tensor *const *ts, int n, int dim, int *d, int64_t *total)
{
    const cg_tensor *t0;
    char s1[128], s2[128];
    int k, j;

    if (n < 1 || !ts)
        return cg__error(CG_EINVAL, "concat: %d tensors", n);
    for (k = 0; k < n; k++)
        if (!ts[k])
            return cg__error(CG_EINVAL, "concat: tensor %d is NULL", k);
    t0 = ts[0];
    *d = cg__dim(dim, t0->ndim);
    if (*d < 0)
        return cg__error(CG_EINVAL, "concat: dimension %d of %d-D tensors",
                         dim, t0->ndim);
    *total = 0;
    for (k = 0; k < n; k++) {
        const cg_tensor *t = ts[k];
        int bad = t->ndim != t0->ndim;

        if (t->ctx != t0->ctx)
            return cg__error(CG_ECONTEXT, "concat: tensors 0 and %d belong "
                             "to different contexts", k);
        if (t->dtype != t0->dtype)
            return cg__error(CG_EDTYPE, "concat: tensor %d is %s, tensor 0 "
                             "%s", k, cg__dtype_name(t->dtype),
                             cg__dtype_name(t0->dtype));
        for (j = 0; j < t0->ndim && !bad; j++)
            bad = j != *d && t->shape[j] != t0->shape[j];
        if (bad)
            return cg__error(CG_ESHAPE, "concat along dimension %d: tensor "
                             "%d is %s, tensor 0 is %s", *d, k,
                             cg__shape_str(t->ndim, t->shape, s1, sizeof s1),
                             cg__shape_str(t0->ndim, t0->shape, s2,
                                           sizeof s2));
        if (cg__checked_add_i64(*total, t->shape[*d], total,
                                "concat: size along the joined dimension"))
            return CG_ESHAPE;
    }
    return CG_OK;
}

/* The slice [start, start + len) of y along d, as a view. */
static cg_tensor *
slice(cg_tensor *y, int d, int64_t start, int64_t len)
{
    int64_t shape[CG_MAX_DIMS];

    memcpy(shape, y->shape, sizeof shape);
    shape[d] = len;
    return cg__tensor_view(y, y->ndim, shape, y->strides,
                           y->offset + start * y->strides[d]);
}

static int
concat_backward(cg__node *node, cg_tensor *g, cg_tensor **gin)
{
    int d = (int)node->i[0], k;
    int64_t start = 0;

    for (k = 0; k < node->ninputs; k++) {
        int64_t len = node->inputs[k]->shape[d];

        if (node->needs[k] && !(gin[k] = slice(g, d, start, len)))
            return cg__last_status();
        start += len;
    }
    return CG_OK;
}

/* At most CG__NODE_INPUTS checked tensors: one copy each, one node. */
static cg_tensor *
concat_direct(cg_tensor *const *ts, int n, int d, int64_t total)
{
    int64_t shape[CG_MAX_DIMS], start = 0;
    cg_tensor *y, *part;
    cg__node *node;
    int k, status = CG_OK;

    memcpy(shape, ts[0]->shape, sizeof shape);
    shape[d] = total;
    y = cg__tensor_empty(ts[0]->ctx, ts[0]->dtype, ts[0]->ndim, shape);
    if (!y)
        return NULL;
    for (k = 0; k < n && status == CG_OK; k++) {
        part = slice(y, d, start, ts[k]->shape[d]);
        status = part ? cg__copy_into(part, ts[k]) : cg__last_status();
        cg_tensor_free(part);
        start += ts[k]->shape[d];
    }
    if (status == CG_OK) {
        node = cg__record(y, "concat", concat_backward, n, ts, &status);
        if (node)
            node->i[0] = d;
    }
    if (status) {
        cg_tensor_free(y);
        return NULL;
    }
    return y;
}

/* A node holds at most CG__NODE_INPUTS inputs, so longer lists are joined
 * in groups first: a tree of concats with the same result. */
static cg_tensor *
concat_tree(cg_tensor *const *ts, int n, int d)
{
    int ng = (n + CG__NODE_INPUTS - 1) / CG__NODE_INPUTS, k, j;
    int64_t total = 0;
    cg_tensor **parts, *y = NULL;

    for (k = 0; k < n; k++)
        total += ts[k]->shape[d];
    if (n <= CG__NODE_INPUTS)
        return concat_direct(ts, n, d, total);
    parts = cg__calloc((size_t)ng, sizeof *parts);
    if (!parts)
        return NULL;
    for (k = 0; k < ng; k++) {
        j = n - k * CG__NODE_INPUTS;
        parts[k] = concat_tree(ts + k * CG__NODE_INPUTS,
                               j < CG__NODE_INPUTS ? j : CG__NODE_INPUTS, d);
        if (!parts[k])
            break;
    }
    if (k == ng)
        y = concat_tree(parts, ng, d);
    for (k = 0; k < ng; k++)
        cg_tensor_free(parts[k]);
    free(parts);
    return y;
}

cg_tensor *
cg_concat(cg_tensor *const *tensors, int n, int dim)
{
    int64_t total;
    int d;

    cg__error_clear();
    if (concat_check(tensors, n, dim, &d, &total))
        return NULL;
    return concat_tree(tensors, n, d);
}

cg_tensor *
cg_stack(cg_tensor *const *tensors, int n, int dim)
{
    cg_tensor **u, *y = NULL;
    char s1[128], s2[128];
    int k, d;

    cg__error_clear();
    if (n < 1 || !tensors || !tensors[0]) {
        cg__error(CG_EINVAL, "stack: %d tensors%s", n,
                  n >= 1 && tensors ? " (tensor 0 is NULL)" : "");
        return NULL;
    }
    for (k = 1; k < n; k++)
        if (tensors[k] && (tensors[k]->ndim != tensors[0]->ndim ||
                           memcmp(tensors[k]->shape, tensors[0]->shape,
                                  (size_t)tensors[0]->ndim * sizeof(int64_t)))) {
            cg__error(CG_ESHAPE, "stack: tensor %d is %s, tensor 0 is %s", k,
                      cg__shape_str(tensors[k]->ndim, tensors[k]->shape, s1,
                                    sizeof s1),
                      cg__shape_str(tensors[0]->ndim, tensors[0]->shape, s2,
                                    sizeof s2));
            return NULL;
        }
    d = cg__dim(dim, tensors[0]->ndim + 1);
    if (d < 0 || tensors[0]->ndim == CG_MAX_DIMS) {
        cg__error(CG_EINVAL, "stack: dimension %d for %d-D tensors", dim,
                  tensors[0]->ndim);
        return NULL;
    }
    u = cg__calloc((size_t)n, sizeof *u);
    if (!u)
        return NULL;
    for (k = 0; k < n; k++)
        if (!(u[k] = cg_unsqueeze(tensors[k], d)))
            break;
    if (k == n)
        y = cg_concat(u, n, d);
    for (k = 0; k < n; k++)
        cg_tensor_free(u[k]);
    free(u);
    return y;
}

/* outputs[k] = narrow(x, d, start_k, sizes[k]); all or nothing. */
static int
split_views(cg_tensor *x, int d, int n, const int64_t *sizes,
            cg_tensor **outputs)
{
    int64_t start = 0;
    int k, j;

    for (k = 0; k < n; k++) {
        outputs[k] = cg_narrow(x, d, start, sizes[k]);
        if (!outputs[k]) {
            for (j = 0; j < k; j++) {
                cg_tensor_free(outputs[j]);
                outputs[j] = NULL;
            }
            return cg__last_status();
        }
        start += sizes[k];
    }
    return CG_OK;
}

int
cg_split(cg_tensor *x, int dim, int n, const int64_t *sizes,
         cg_tensor **outputs)
{
    int64_t total = 0;
    char s[128];
    int k, d, status;

    cg__error_clear();
    if ((status = cg__check_tensor(x, "input", CG__ANY_DTYPE)))
        return status;
    if (n < 1 || !sizes || !outputs)
        return cg__error(CG_EINVAL, "split: %d pieces%s", n,
                         n >= 1 ? " with NULL sizes or outputs" : "");
    d = cg__dim(dim, x->ndim);
    if (d < 0)
        return cg__error(CG_EINVAL, "split: dimension %d of a %d-D tensor",
                         dim, x->ndim);
    for (k = 0; k < n; k++) {
        if (sizes[k] < 1)
            return cg__error(CG_ESHAPE, "split: piece %d has size %lld", k,
                             (long long)sizes[k]);
        /* Checked: {INT64_MAX, INT64_MAX, 5} would add up to 3. */
        if (cg__add_i64(total, sizes[k], &total) || total > x->shape[d])
            return cg__error(CG_ESHAPE, "split: pieces 0..%d (the last of "
                             "size %lld) exceed dimension %d of %s, of size "
                             "%lld", k, (long long)sizes[k], d,
                             cg__shape_str(x->ndim, x->shape, s, sizeof s),
                             (long long)x->shape[d]);
    }
    if (total != x->shape[d])
        return cg__error(CG_ESHAPE, "split: sizes add up to %lld, dimension "
                         "%d of %s is %lld", (long long)total, d,
                         cg__shape_str(x->ndim, x->shape, s, sizeof s),
                         (long long)x->shape[d]);
    return split_views(x, d, n, sizes, outputs);
}

int
cg_split_chunks(cg_tensor *x, int dim, int64_t chunk, int max_outputs,
                cg_tensor **outputs)
{
    int64_t *sizes, len, n, k;
    char s[128];
    int d, status;

    cg__error_clear();
    if ((status = cg__check_tensor(x, "input", CG__ANY_DTYPE)))
        return status;
    d = cg__dim(dim, x->ndim);
    if (d < 0 || chunk < 1 || !outputs)
        return cg__error(CG_EINVAL, "split_chunks: dimension %d of a %d-D "
                         "tensor, chunk %lld", dim, x->ndim, (long long)chunk);
    len = x->shape[d];
    n = len / chunk + (len % chunk != 0);   /* len + chunk - 1 overflows */
    if (n > max_outputs)
        return cg__error(CG_EINVAL, "split_chunks: %lld pieces of %lld from "
                         "dimension %d of %s, room for %d", (long long)n,
                         (long long)chunk, d,
                         cg__shape_str(x->ndim, x->shape, s, sizeof s),
                         max_outputs);
    sizes = cg__malloc((size_t)n * sizeof *sizes);
    if (!sizes)
        return CG_EHOSTMEM;
    for (k = 0; k < n; k++)
        sizes[k] = k < n - 1 ? chunk : len - (n - 1) * chunk;
    status = split_views(x, d, (int)n, sizes, outputs);
    free(sizes);
    return status ? status : (int)n;
}
