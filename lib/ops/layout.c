/* SPDX-License-Identifier: MIT */
/*
 * lib/ops/layout.c - strided layouts for kernels, broadcasting, context
 * checks.
 */
#include "config.h"

#include <string.h>

#include "ops/internal.h"

void
cg__layout_from(cg__layout *l, int ndim, const int64_t *shape, int nops,
                int64_t (*strides)[CG_MAX_DIMS], const int64_t *offsets)
{
    int64_t sh[CG_MAX_DIMS], st[CG__LAYOUT_OPS][CG_MAX_DIMS];
    int d, k, nd = 0;

    memset(l, 0, sizeof *l);
    l->numel = cg__numel(ndim, shape);
    /* Drop size-1 dimensions. */
    for (d = 0; d < ndim; d++) {
        if (shape[d] == 1)
            continue;
        sh[nd] = shape[d];
        for (k = 0; k < nops; k++)
            st[k][nd] = strides[k][d];
        nd++;
    }
    /* Merge dimension d into the previous one where every operand is
     * linear across both. */
    if (nd > 1) {
        int out = 0;

        for (d = 1; d < nd; d++) {
            int ok = 1;

            for (k = 0; k < nops; k++)
                if (st[k][out] != st[k][d] * sh[d])
                    ok = 0;
            if (ok) {
                sh[out] *= sh[d];
            } else {
                out++;
                sh[out] = sh[d];
            }
            for (k = 0; k < nops; k++)
                st[k][out] = st[k][d];
        }
        nd = out + 1;
    }
    if (nd == 0) {
        nd = 1;
        sh[0] = 1;
        for (k = 0; k < nops; k++)
            st[k][0] = 0;
    }
    l->nd = nd;
    for (d = 0; d < 8; d++) {
        l->shape.s[d] = d < nd ? (cl_int)sh[d] : 1;
        for (k = 0; k < nops; k++)
            l->strides[k].s[d] = d < nd ? (cl_int)st[k][d] : 0;
    }
    for (k = 0; k < nops; k++)
        l->offset[k] = offsets ? (cl_int)offsets[k] : 0;
}

void
cg__layout_make(cg__layout *l, int ndim, const int64_t *shape, int nops,
                const cg_tensor *const *ops)
{
    int64_t st[CG__LAYOUT_OPS][CG_MAX_DIMS], off[CG__LAYOUT_OPS];
    int d, k;

    /* Align each operand to the right; stride 0 where it is broadcast. */
    for (k = 0; k < nops; k++) {
        const cg_tensor *t = ops[k];

        for (d = 0; d < ndim; d++) {
            int td = d - (ndim - t->ndim);

            st[k][d] = (td < 0 || t->shape[td] == 1) ? 0 : t->strides[td];
        }
        off[k] = t->offset;
    }
    cg__layout_from(l, ndim, shape, nops, st, off);
}

int
cg__broadcast_shape(const cg_tensor *a, const cg_tensor *b, int *ndim,
                    int64_t *shape)
{
    int n = a->ndim > b->ndim ? a->ndim : b->ndim, d;
    char s1[128], s2[128];

    for (d = 0; d < n; d++) {
        int da = d - (n - a->ndim), db = d - (n - b->ndim);
        int64_t x = da >= 0 ? a->shape[da] : 1;
        int64_t y = db >= 0 ? b->shape[db] : 1;

        if (x != y && x != 1 && y != 1)
            return cg__error(CG_ESHAPE, "shapes %s and %s cannot be "
                             "broadcast together (dimension %d: %lld vs "
                             "%lld)", cg__shape_str(a->ndim, a->shape, s1,
                                                    sizeof s1),
                             cg__shape_str(b->ndim, b->shape, s2, sizeof s2),
                             d, (long long)x, (long long)y);
        shape[d] = x == 1 ? y : x;
    }
    *ndim = n;
    return CG_OK;
}

int
cg__same_context(int n, const cg_tensor *const *ts)
{
    int k;

    for (k = 1; k < n; k++)
        if (ts[k] && ts[0] && ts[k]->ctx != ts[0]->ctx)
            return cg__error(CG_ECONTEXT, "operands %d and %d belong to "
                             "different contexts", 0, k);
    return CG_OK;
}
