/* SPDX-License-Identifier: MIT */
/*
 * lib/autograd/higher.c - gradients returned rather than accumulated
 * (cg_grad), and Hessian-vector products of scalar functions by reverse
 * over reverse: the gradient of <grad f, v>.
 */
#include "config.h"

#include <string.h>

#include "autograd/internal.h"
#include "ops/internal.h"

static int
check_grad_inputs(cg_tensor *output, int ninputs, cg_tensor *const *inputs,
                  cg_tensor **grads)
{
    int j;

    if (ninputs < 1 || ninputs > CG_GRAD_MAX_INPUTS || !inputs || !grads)
        return cg__error(CG_EINVAL, "cg_grad: %d inputs (1 to %d, with "
                         "non-NULL inputs and grads)", ninputs,
                         CG_GRAD_MAX_INPUTS);
    for (j = 0; j < ninputs; j++) {
        if (!inputs[j])
            return cg__error(CG_EINVAL, "cg_grad: inputs[%d] is NULL", j);
        if (output && inputs[j]->ctx != output->ctx)
            return cg__error(CG_ECONTEXT, "cg_grad: inputs[%d] and the "
                             "output belong to different contexts", j);
        if (!inputs[j]->requires_grad)
            return cg__error(CG_ESTATE, "cg_grad: inputs[%d] does not "
                             "require grad", j);
    }
    return CG_OK;
}

/* The gradients cg_grad hands out: a reference to the first gradient of
 * a repeated input, zeros for an input the output does not depend on. */
static int
finish_grads(int ninputs, cg_tensor *const *inputs, cg_tensor **grads)
{
    int i, j;

    for (j = 0; j < ninputs; j++) {
        cg_tensor *t = inputs[j];

        for (i = 0; i < j && !grads[j]; i++)
            if (inputs[i] == t && grads[i])
                grads[j] = cg_tensor_ref(grads[i]);
        if (!grads[j] &&
            !(grads[j] = cg_full_dtype(t->ctx, t->dtype, t->ndim, t->shape,
                                       0.0f)))
            return cg__last_status();
    }
    return CG_OK;
}

int
cg_grad(cg_tensor *output, cg_tensor *grad_output, int ninputs,
        cg_tensor *const *inputs, cg_tensor **grads, int flags)
{
    cg_tensor *got[CG_GRAD_MAX_INPUTS] = { NULL };
    int status, j;

    cg__error_clear();
    if ((status = check_grad_inputs(output, ninputs, inputs, grads)))
        return status;
    if (flags & ~(CG_GRAD_RETAIN_GRAPH | CG_GRAD_CREATE_GRAPH))
        return cg__error(CG_EINVAL, "cg_grad: unknown flags 0x%x",
                         (unsigned)flags);
    status = cg__backward_walk(output, grad_output,
                               (flags & CG_GRAD_RETAIN_GRAPH) != 0,
                               (flags & CG_GRAD_CREATE_GRAPH) != 0, ninputs,
                               inputs, got);
    if (status == CG_OK)
        status = finish_grads(ninputs, inputs, got);
    for (j = 0; j < ninputs; j++) {
        if (status)
            cg_tensor_free(got[j]);
        else
            grads[j] = got[j];
    }
    return status;
}

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

/* Calls f for cg_hvp or cg_hvp_fwd (`who`): *y gets its one-element
 * result (NULL on failure). */
static int
call_scalar(const char *who, cg_scalar_fn f, void *user, int n,
            cg_tensor *const *inputs, cg_tensor **y)
{
    char s[128];
    int status;

    if (!(*y = f(n, inputs, user))) {
        status = cg__last_status();
        return status != CG_OK ? status
               : cg__error(CG_EINVAL, "%s: f returned NULL", who);
    }
    if (cg_tensor_numel(*y) != 1)
        return cg__error(CG_ESHAPE, "%s: f returned shape %s, not one "
                         "element", who, cg__shape_str((*y)->ndim,
                                                      (*y)->shape, s,
                                                      sizeof s));
    return CG_OK;
}

int
cg_hvp(cg_scalar_fn f, void *user, int n, cg_tensor *const *inputs,
       cg_tensor *const *v, cg_tensor **hv, cg_tensor **value)
{
    cg_tensor *g[CG_GRAD_MAX_INPUTS] = { NULL }, *h[CG_GRAD_MAX_INPUTS] = {
        NULL };
    cg_tensor *y = NULL, *d = NULL;
    int status, j;

    cg__error_clear();
    if ((status = check_hvp(f, n, inputs, v, hv)))
        return status;
    if ((status = call_scalar("cg_hvp", f, user, n, inputs, &y)))
        goto out;
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

/* ------------------------------------------------------------------------
 * cg_vjp: the vector-Jacobian product of a C function
 * ------------------------------------------------------------------------ */

static int
check_vjp(cg_context *ctx, cg_jvp_fn fn, int n_inputs,
          cg_tensor *const *inputs, int n_outputs,
          cg_tensor *const *cotangents, cg_tensor **in_grads)
{
    int k;

    if (!ctx || !fn || !inputs || !cotangents || !in_grads ||
        n_inputs < 1 || n_inputs > CG_JVP_MAX || n_outputs < 1 ||
        n_outputs > CG_JVP_MAX)
        return cg__error(CG_EINVAL, "vjp: a NULL argument, or %d inputs and "
                         "%d outputs (1..%d each)", n_inputs, n_outputs,
                         CG_JVP_MAX);
    for (k = 0; k < n_inputs; k++) {
        if (!inputs[k])
            return cg__error(CG_EINVAL, "vjp: input %d is NULL", k);
        if (inputs[k]->ctx != ctx)
            return cg__error(CG_ECONTEXT, "vjp: input %d belongs to another "
                             "context", k);
        if (!CG__IS_FLOAT(inputs[k]->dtype))
            return cg__error(CG_EDTYPE, "vjp: input %d is %s, not a floating "
                             "dtype", k, cg__dtype_name(inputs[k]->dtype));
    }
    for (k = 0; k < n_outputs; k++)
        if (cotangents[k] && cotangents[k]->ctx != ctx)
            return cg__error(CG_ECONTEXT, "vjp: cotangent %d belongs to "
                             "another context", k);
    if (!cg_is_grad_enabled())
        return cg__error(CG_ESTATE, "vjp: called in no-grad mode");
    return CG_OK;
}

/* The cotangent of output j matches it (or is NULL, for int32 outputs:
 * no term). */
static int
check_cotangent(int j, const cg_tensor *y, const cg_tensor *v)
{
    char s1[128], s2[128];

    if (!v && !CG__IS_FLOAT(y->dtype))
        return CG_OK;
    if (!v)
        return cg__error(CG_EINVAL, "vjp: cotangent %d is NULL for a %s "
                         "output", j, cg__dtype_name(y->dtype));
    if (v->dtype != y->dtype || v->ndim != y->ndim ||
        memcmp(v->shape, y->shape, (size_t)y->ndim * sizeof *y->shape) != 0)
        return cg__error(CG_ESHAPE, "vjp: cotangent %d is %s %s, output %d "
                         "%s %s", j, cg__dtype_name(v->dtype),
                         cg__shape_str(v->ndim, v->shape, s1, sizeof s1), j,
                         cg__dtype_name(y->dtype),
                         cg__shape_str(y->ndim, y->shape, s2, sizeof s2));
    return CG_OK;
}

int
cg_vjp(cg_context *ctx, cg_jvp_fn fn, void *user, int n_inputs,
       cg_tensor *const *inputs, int n_outputs,
       cg_tensor *const *cotangents, cg_tensor **outputs,
       cg_tensor **in_grads)
{
    cg_tensor *leaves[CG_JVP_MAX] = { NULL }, *outs[CG_JVP_MAX] = { NULL };
    cg_tensor *got[CG_JVP_MAX] = { NULL }, *terms[CG_JVP_MAX] = { NULL };
    cg_tensor *dets[CG_JVP_MAX] = { NULL }, *root = NULL;
    int k, j, nt = 0, status;

    cg__error_clear();
    if ((status = check_vjp(ctx, fn, n_inputs, inputs, n_outputs,
                            cotangents, in_grads)))
        return status;
    for (k = 0; k < n_inputs && status == CG_OK; k++)
        if (!(leaves[k] = cg_detach(inputs[k])) ||
            (status = cg_tensor_set_requires_grad(leaves[k], 1)))
            status = status ? status : cg__last_status();
    if (status == CG_OK)
        status = fn(user, n_inputs, leaves, n_outputs, outs);
    for (j = 0; j < n_outputs && status == CG_OK; j++)
        if (!outs[j])
            status = cg__error(CG_EINVAL, "vjp: the function returned CG_OK "
                               "without output %d", j);
        else if (outs[j]->ctx != ctx)
            status = cg__error(CG_ECONTEXT, "vjp: output %d belongs to "
                               "another context", j);
        else
            status = check_cotangent(j, outs[j], cotangents[j]);
    /* <y_j, v_j> summed over the outputs that depend on the inputs */
    for (j = 0; j < n_outputs && status == CG_OK; j++) {
        cg_tensor *p;

        if (!cotangents[j] || !outs[j]->requires_grad)
            continue;
        p = cg_mul(outs[j], cotangents[j]);
        terms[nt] = p ? cg_sum(p, 0, NULL, 0) : NULL;
        cg_tensor_free(p);
        if (!terms[nt++])
            status = cg__last_status();
    }
    for (j = 0; j < nt && status == CG_OK; j++) {
        cg_tensor *s = root ? cg_add(root, terms[j])
                            : cg_tensor_ref(terms[j]);

        cg_tensor_free(root);
        if (!(root = s))
            status = cg__last_status();
    }
    if (status == CG_OK)
        status = root ? cg_grad(root, NULL, n_inputs, leaves, got, 0)
                      : zeros_like(n_inputs, leaves, got);
    for (j = 0; j < n_outputs && outputs && status == CG_OK; j++)
        if (!(dets[j] = cg_detach(outs[j])))
            status = cg__last_status();
    for (j = 0; j < n_outputs; j++) {
        cg_tensor_free(outs[j]);
        if (status == CG_OK && outputs)
            outputs[j] = dets[j];
        else
            cg_tensor_free(dets[j]);
    }
    for (j = 0; j < nt; j++)
        cg_tensor_free(terms[j]);
    cg_tensor_free(root);
    for (k = 0; k < n_inputs; k++) {
        cg_tensor_free(leaves[k]);
        if (status == CG_OK)
            in_grads[k] = got[k];
        else
            cg_tensor_free(got[k]);
    }
    return status;
}

/* ------------------------------------------------------------------------
 * Hessian-vector products by forward over reverse
 * ------------------------------------------------------------------------ */

int
cg_hvp_fwd(cg_scalar_fn f, void *user, int n, cg_tensor *const *inputs,
           cg_tensor *const *v, cg_tensor **hv, cg_tensor **value)
{
    cg_tensor *g[CG_GRAD_MAX_INPUTS] = { NULL }, *h[CG_GRAD_MAX_INPUTS] = {
        NULL };
    cg_tensor *y = NULL;
    cg_context *ctx;
    int status, i, j;

    cg__error_clear();
    if ((status = check_hvp(f, n, inputs, v, hv)))
        return status;
    ctx = inputs[0]->ctx;
    for (j = 0; j < n; j++) {
        if (inputs[j]->ctx != ctx)
            return cg__error(CG_ECONTEXT, "cg_hvp_fwd: inputs[%d] and "
                             "inputs[0] belong to different contexts", j);
        for (i = 0; i < j; i++)
            if (inputs[i] == inputs[j])
                return cg__error(CG_EINVAL, "cg_hvp_fwd: inputs[%d] and "
                                 "inputs[%d] are the same tensor", i, j);
    }
    if (!cg_is_grad_enabled())
        return cg__error(CG_ESTATE, "cg_hvp_fwd: called in no-grad mode");
    if (ctx->fwad_level)
        return cg__error(CG_ESTATE, "cg_hvp_fwd: a dual level is already "
                         "open on the context");
    ctx->fwad_level = 1;
    for (j = 0; j < n; j++)
        cg__fw_attach(inputs[j], cg_tensor_ref(v[j]));
    if ((status = call_scalar("cg_hvp_fwd", f, user, n, inputs, &y)))
        goto out;
    if (!y->requires_grad) {
        status = zeros_like(n, inputs, h);
        goto out;
    }
    /* The gradient by a create_graph backward, whose composites carry
     * the tangents: the tangent of grad f along v is H v. */
    status = cg_grad(y, NULL, n, inputs, g, CG_GRAD_CREATE_GRAPH);
    for (j = 0; j < n && status == CG_OK; j++) {
        h[j] = cg_tangent(g[j]);
        if (!h[j] && (status = cg__last_status()) == CG_OK &&
            !(h[j] = cg_full_dtype(ctx, inputs[j]->dtype, inputs[j]->ndim,
                                   inputs[j]->shape, 0.0f)))
            status = cg__last_status();
    }
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
    cg_tensor_free(y);
    cg__fw_close(ctx);
    return status;
}
