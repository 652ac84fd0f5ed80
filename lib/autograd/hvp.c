/* SPDX-License-Identifier: MIT */
/*
 * lib/autograd/hvp.c - Hessian-vector products of scalar functions by
 * reverse over reverse: the gradient of <grad f, v>.
 */
#include "config.h"

#include <string.h>

#include "autograd/internal.h"
#include "ops/internal.h"

static int
check_hvp(cg_scalar_fn f, int n, cg_tensor *const *inputs,
          cg_tensor *const *v, cg_tensor **hv)
{
    char s1[128], s2[128];
    int j;

    if (!f || !inputs || !v || !hv || n < 1 || n > CG_GRAD_MAX_INPUTS)
        return cg__error(CG_EINVAL, "cg_hvp: f, inputs, v and hv must be "
                         "given, with 1 to %d inputs (not %d)",
                         CG_GRAD_MAX_INPUTS, n);
    for (j = 0; j < n; j++) {
        if (!inputs[j] || !v[j])
            return cg__error(CG_EINVAL, "cg_hvp: %s[%d] is NULL",
                             inputs[j] ? "v" : "inputs", j);
        if (!inputs[j]->requires_grad)
            return cg__error(CG_ESTATE, "cg_hvp: inputs[%d] does not "
                             "require grad", j);
        if (v[j]->ctx != inputs[j]->ctx)
            return cg__error(CG_ECONTEXT, "cg_hvp: v[%d] and inputs[%d] "
                             "belong to different contexts", j, j);
        if (v[j]->dtype != inputs[j]->dtype ||
            v[j]->ndim != inputs[j]->ndim ||
            memcmp(v[j]->shape, inputs[j]->shape,
                   (size_t)v[j]->ndim * sizeof(int64_t)) != 0)
            return cg__error(CG_ESHAPE, "cg_hvp: v[%d] is %s %s, inputs[%d] "
                             "%s %s", j, cg__dtype_name(v[j]->dtype),
                             cg__shape_str(v[j]->ndim, v[j]->shape, s1,
                                           sizeof s1), j,
                             cg__dtype_name(inputs[j]->dtype),
                             cg__shape_str(inputs[j]->ndim, inputs[j]->shape,
                                           s2, sizeof s2));
    }
    return CG_OK;
}

/* sum_j <g[j], v[j]>, recorded. */
static cg_tensor *
dot(int n, cg_tensor *const *g, cg_tensor *const *v)
{
    cg_tensor *acc = NULL, *p, *s, *t;
    int j;

    for (j = 0; j < n; j++) {
        p = cg_mul(g[j], v[j]);
        s = p ? cg_sum(p, 0, NULL, 0) : NULL;
        cg_tensor_free(p);
        if (!s) {
            cg_tensor_free(acc);
            return NULL;
        }
        t = acc ? cg_add(acc, s) : cg_tensor_ref(s);
        cg_tensor_free(acc);
        cg_tensor_free(s);
        if (!(acc = t))
            return NULL;
    }
    return acc;
}

/* Zeros of the inputs' shapes into out[]: the Hessian of a function whose
 * gradient does not depend on them. */
static int
zeros_like(int n, cg_tensor *const *inputs, cg_tensor **out)
{
    int j;

    for (j = 0; j < n; j++) {
        out[j] = cg_full_dtype(inputs[j]->ctx, inputs[j]->dtype,
                               inputs[j]->ndim, inputs[j]->shape, 0.0f);
        if (!out[j])
            return cg__last_status();
    }
    return CG_OK;
}

int
cg_hvp(cg_scalar_fn f, void *user, int n, cg_tensor *const *inputs,
       cg_tensor *const *v, cg_tensor **hv, cg_tensor **value)
{
    cg_tensor *g[CG_GRAD_MAX_INPUTS] = { NULL }, *h[CG_GRAD_MAX_INPUTS] = {
        NULL };
    cg_tensor *y = NULL, *d = NULL;
    char s[128];
    int status, j;

    cg__error_clear();
    if ((status = check_hvp(f, n, inputs, v, hv)))
        return status;
    if (!(y = f(n, inputs, user))) {
        status = cg__last_status();
        if (status == CG_OK)
            status = cg__error(CG_EINVAL, "cg_hvp: f returned NULL");
        goto out;
    }
    if (cg_tensor_numel(y) != 1) {
        status = cg__error(CG_ESHAPE, "cg_hvp: f returned shape %s, not one "
                           "element", cg__shape_str(y->ndim, y->shape, s,
                                                    sizeof s));
        goto out;
    }
    if (!y->requires_grad) {
        status = zeros_like(n, inputs, h);
        goto out;
    }
    status = cg_grad(y, NULL, n, inputs, g, CG_GRAD_CREATE_GRAPH);
    if (status == CG_OK && !(d = dot(n, g, v)))
        status = cg__last_status();
    if (status == CG_OK)
        status = d->requires_grad ? cg_grad(d, NULL, n, inputs, h, 0)
                                  : zeros_like(n, inputs, h);
out:
    if (status == CG_OK && value && !(*value = cg_detach(y)))
        status = cg__last_status();
    for (j = 0; j < n; j++) {
        cg_tensor_free(g[j]);
        if (status)
            cg_tensor_free(h[j]);
        else
            hv[j] = h[j];
    }
    cg_tensor_free(d);
    cg_tensor_free(y);
    return status;
}
