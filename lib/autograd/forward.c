/* SPDX-License-Identifier: MIT */
/*
 * lib/autograd/forward.c - forward-mode AD: the dual level of a context,
 * dual tensors, the JVP rules, and cg_jvp.
 *
 * Every op records through cg__record; while a level is open it hands
 * over to cg__fw_record here, which sees the op's inputs and output in one
 * place for every op.  An op whose inputs carry a tangent gets a node even
 * when nothing requires grad (then a node outside the reverse graph); the
 * op fills it with what its backward needs, which is what its JVP rule
 * needs too, and the rule turns it into the output's tangent when the
 * tangent is first needed: by the next op that uses the output (so one op
 * later), cg_tangent, cg_backward or the end of cg_jvp.  An op without a
 * rule fails at once with CG_EUNSUPPORTED.
 *
 * Rules (lib/autograd/jvp.c) compute tangents with the public ops in
 * no-grad mode, with the level suspended so that those ops record
 * nothing.
 */
#include "config.h"

#include <string.h>

#include "autograd/internal.h"
#include "ops/internal.h"

static _Thread_local int suspended;

/* Also while a plain backward runs: kernel-level backward functions
 * propagate no tangents (the gradients they make get none).  A
 * create_graph backward's composites are ordinary recorded ops and do:
 * the tangent of a gradient is then the JVP of the gradient
 * (forward-over-reverse, so H v for a scalar function's gradient). */
int
cg__fw_suspended(void)
{
    return suspended != 0 || (cg__in_backward() && !cg__in_graph_backward());
}

/* ------------------------------------------------------------------------
 * Tangents on tensors
 * ------------------------------------------------------------------------ */

static void
fw_drop(cg_tensor *t)
{
    cg_context *ctx = t->ctx;
    cg_tensor *tan = t->fw_tangent;
    cg__node *n = t->fw_node;

    if (t->fw_prev)
        t->fw_prev->fw_next = t->fw_next;
    else if (ctx->fwad_list == t)
        ctx->fwad_list = t->fw_next;
    if (t->fw_next)
        t->fw_next->fw_prev = t->fw_prev;
    t->fw_prev = t->fw_next = NULL;
    t->fw_tangent = NULL;
    t->fw_node = NULL;
    t->fw_drop = NULL;
    /* Last: freeing them may drop other tensors of the list. */
    cg_tensor_free(tan);
    cg__node_unref(n);
}

static void
fw_link(cg_tensor *t)
{
    cg_context *ctx = t->ctx;

    if (t->fw_drop)
        return;
    t->fw_drop = fw_drop;
    t->fw_prev = NULL;
    t->fw_next = ctx->fwad_list;
    if (ctx->fwad_list)
        ctx->fwad_list->fw_prev = t;
    ctx->fwad_list = t;
}

void
cg__fw_suspend(int on)
{
    suspended += on ? 1 : -1;
}

static int
has_tangent(const cg_tensor *t)
{
    return t && (t->fw_tangent || t->fw_node);
}

/* ------------------------------------------------------------------------
 * Recording and computing tangents
 * ------------------------------------------------------------------------ */

/* Computes t's pending tangent (its node's rule on the node's inputs'
 * tangents, computed first). */
static int
materialize(cg_tensor *t)
{
    cg_tensor *tin[CG__NODE_INPUTS] = { NULL }, *out = NULL;
    cg__node *n = t->fw_node;
    int k, status = CG_OK;

    if (!n)
        return CG_OK;
    for (k = 0; k < n->ninputs && status == CG_OK; k++) {
        cg_tensor *in = n->inputs[k];

        if (!in)
            continue;
        status = materialize(in);
        tin[k] = in->fw_tangent;
    }
    if (status == CG_OK && n->released)
        status = cg__error(CG_ESTATE, "forward-mode AD: the node of '%s' "
                           "was freed before its tangent was computed",
                           n->op);
    if (status == CG_OK) {
        suspended++;
        cg_no_grad_enter();
        status = cg__jvp_rule(n->op)(n, t, tin, &out);
        cg_no_grad_leave();
        suspended--;
    }
    if (status)
        return status;
    t->fw_node = NULL;
    t->fw_tangent = out;
    cg__node_unref(n);
    return CG_OK;
}

int
cg__fw_flush(cg_context *ctx)
{
    cg_tensor *t;
    int status;

    for (t = ctx->fwad_list; t; t = t->fw_next)
        if ((status = materialize(t)))
            return status;
    return CG_OK;
}

/* A node for out that only forward mode uses (no input requires grad, or
 * grad mode is off): the op fills it as for backward. */
static cg__node *
forward_node(cg_tensor *out, const char *op, cg__backward_fn bwd,
             int ninputs, cg_tensor *const *inputs)
{
    cg__node *n = cg__calloc(1, sizeof *n);
    int k;

    if (!n)
        return NULL;
    n->refs = 1;
    n->op = op;
    n->backward = bwd;
    n->ninputs = ninputs;
    for (k = 0; k < ninputs; k++)
        n->inputs[k] = inputs[k] ? cg_tensor_ref(inputs[k]) : NULL;
    n->out_ndim = out->ndim;
    memcpy(n->out_shape, out->shape, sizeof n->out_shape);
    return n;
}

cg__node *
cg__fw_record(cg_tensor *out, const char *op, cg__backward_fn bwd,
              int ninputs, cg_tensor *const *inputs, int *status)
{
    cg__node *n;
    int k, any = -1;

    for (k = 0; k < ninputs; k++)
        if (has_tangent(inputs[k]) && any < 0)
            any = k;
    if (any >= 0 && (!cg__jvp_rule(op) || cg__custom_backward_is(bwd))) {
        *status = cg__error(CG_EUNSUPPORTED, "forward-mode AD: %s'%s' has "
                            "no JVP rule yet, and its input %d has a "
                            "tangent", cg__custom_backward_is(bwd)
                            ? "the custom op " : "", op, any);
        return NULL;
    }
    for (k = 0; k < ninputs && any >= 0; k++)
        if (inputs[k] && (*status = materialize(inputs[k])))
            return NULL;
    suspended++;
    n = cg__record(out, op, bwd, ninputs, inputs, status);
    suspended--;
    if (any < 0 || *status)
        return n;
    if (n) {
        n->refs++;
    } else if (!(n = forward_node(out, op, bwd, ninputs, inputs))) {
        *status = cg__error(CG_EHOSTMEM, "forward-mode AD: out of host "
                            "memory recording '%s'", op);
        return NULL;
    }
    out->fw_node = n;
    fw_link(out);
    return n;
}

/* ------------------------------------------------------------------------
 * Ops that give their outputs' tangents themselves
 * ------------------------------------------------------------------------ */

int
cg__fw_wanted(int ninputs, cg_tensor *const *inputs)
{
    int k;

    if (cg__fw_suspended())
        return 0;
    for (k = 0; k < ninputs; k++)
        if (has_tangent(inputs[k]) && inputs[k]->ctx->fwad_level)
            return 1;
    return 0;
}

cg_tensor *
cg__fw_input_tangent(cg_tensor *t, int *status)
{
    *status = t ? materialize(t) : CG_OK;
    return t && *status == CG_OK ? t->fw_tangent : NULL;
}

cg__node *
cg__fw_record_own(cg_tensor *out, const char *op, cg__backward_fn bwd,
                  int ninputs, cg_tensor *const *inputs, int *status)
{
    cg__node *n;

    suspended++;
    n = cg__record(out, op, bwd, ninputs, inputs, status);
    suspended--;
    return n;
}

void
cg__fw_attach(cg_tensor *t, cg_tensor *tangent)
{
    cg_tensor_free(t->fw_tangent);
    t->fw_tangent = tangent;
    fw_link(t);
}

/* ------------------------------------------------------------------------
 * The public functions
 * ------------------------------------------------------------------------ */

/* Drops every tangent of ctx's level and closes it; cg_last_error is
 * left alone. */
static void
close_level(cg_context *ctx)
{
    while (ctx->fwad_list)
        fw_drop(ctx->fwad_list);
    ctx->fwad_level = 0;
}

void
cg__fw_close(cg_context *ctx)
{
    close_level(ctx);
}

int
cg_fwad_enter(cg_context *ctx)
{
    cg__error_clear();
    if (!ctx)
        return cg__error(CG_EINVAL, "ctx is NULL");
    if (ctx->fwad_level)
        return cg__error(CG_ESTATE, "forward-mode AD: a dual level is "
                         "already open on this context (one at a time)");
    ctx->fwad_level = 1;
    return CG_OK;
}

int
cg_fwad_exit(cg_context *ctx)
{
    cg__error_clear();
    if (!ctx)
        return cg__error(CG_EINVAL, "ctx is NULL");
    if (!ctx->fwad_level)
        return cg__error(CG_ESTATE, "forward-mode AD: no dual level is "
                         "open on this context");
    close_level(ctx);
    return CG_OK;
}

int
cg_fwad_level(const cg_context *ctx)
{
    return ctx ? ctx->fwad_level : 0;
}

static int
alias_backward(cg__node *n, cg_tensor *g, cg_tensor **gin)
{
    (void)n;
    gin[0] = cg_tensor_ref(g);
    return CG_OK;
}

cg_tensor *
cg_make_dual(cg_tensor *primal, cg_tensor *tangent)
{
    cg_tensor *d;
    char s1[128], s2[128];
    int status;

    cg__error_clear();
    if (cg__check_tensor(primal, "primal", CG__FLOAT_DTYPE) ||
        cg__check_tensor(tangent, "tangent", CG__ANY_DTYPE))
        return NULL;
    if (tangent->ctx != primal->ctx) {
        cg__error(CG_ECONTEXT, "make_dual: the tangent belongs to another "
                  "context than the primal");
        return NULL;
    }
    if (tangent->dtype != primal->dtype) {
        cg__error(CG_EDTYPE, "make_dual: the tangent is %s, the primal %s",
                  cg__dtype_name(tangent->dtype),
                  cg__dtype_name(primal->dtype));
        return NULL;
    }
    if (tangent->ndim != primal->ndim ||
        memcmp(tangent->shape, primal->shape,
               (size_t)primal->ndim * sizeof *primal->shape) != 0) {
        cg__error(CG_ESHAPE, "make_dual: the tangent has shape %s, the "
                  "primal %s",
                  cg__shape_str(tangent->ndim, tangent->shape, s1, sizeof s1),
                  cg__shape_str(primal->ndim, primal->shape, s2, sizeof s2));
        return NULL;
    }
    if (!primal->ctx->fwad_level) {
        cg__error(CG_ESTATE, "make_dual: no dual level is open on the "
                  "context (cg_fwad_enter)");
        return NULL;
    }
    d = cg__tensor_view(primal, primal->ndim, primal->shape, primal->strides,
                        primal->offset);
    if (!d)
        return NULL;
    suspended++;
    cg__record(d, "make_dual", alias_backward, 1, &primal, &status);
    suspended--;
    if (status) {
        cg_tensor_free(d);
        return NULL;
    }
    d->fw_tangent = cg_tensor_ref(tangent);
    fw_link(d);
    return d;
}

cg_tensor *
cg_tangent(cg_tensor *t)
{
    cg__error_clear();
    if (!t || !has_tangent(t))
        return NULL;
    if (materialize(t))
        return NULL;
    return t->fw_tangent ? cg_tensor_ref(t->fw_tangent) : NULL;
}

/* The tangents of fn's outputs, zeros for those that have none. */
static int
collect(cg_context *ctx, int n, cg_tensor **outs, cg_tensor **tans)
{
    int j, status = CG_OK;

    for (j = 0; j < n && status == CG_OK; j++) {
        cg_tensor *y = outs[j];

        if (!CG__IS_FLOAT(y->dtype))
            continue;
        if (y->ctx != ctx) {
            status = cg__error(CG_ECONTEXT, "jvp: output %d belongs to "
                               "another context", j);
            break;
        }
        tans[j] = has_tangent(y) ? cg_tangent(y)
                                 : cg_full_dtype(ctx, y->dtype, y->ndim,
                                                 y->shape, 0.0f);
        if (!tans[j])
            status = cg__last_status();
    }
    return status;
}

int
cg_jvp(cg_context *ctx, cg_jvp_fn fn, void *user, int n_inputs,
       cg_tensor *const *inputs, cg_tensor *const *tangents, int n_outputs,
       cg_tensor **outputs, cg_tensor **out_tangents)
{
    cg_tensor *duals[CG_JVP_MAX] = { NULL }, *outs[CG_JVP_MAX] = { NULL };
    cg_tensor *tans[CG_JVP_MAX] = { NULL };
    int k, status;

    cg__error_clear();
    if (!ctx || !fn || !out_tangents || n_inputs < 1 ||
        n_inputs > CG_JVP_MAX || n_outputs < 1 || n_outputs > CG_JVP_MAX ||
        !inputs || !tangents)
        return cg__error(CG_EINVAL, "jvp: a NULL argument, or %d inputs and "
                         "%d outputs (1..%d each)", n_inputs, n_outputs,
                         CG_JVP_MAX);
    for (k = 0; k < n_inputs; k++)
        if (!inputs[k] || !tangents[k])
            return cg__error(CG_EINVAL, "jvp: input or tangent %d is NULL",
                             k);
        else if (inputs[k]->ctx != ctx)
            return cg__error(CG_ECONTEXT, "jvp: input %d belongs to another "
                             "context", k);
    if ((status = cg_fwad_enter(ctx)))
        return status;
    for (k = 0; k < n_inputs && status == CG_OK; k++)
        if (!(duals[k] = cg_make_dual(inputs[k], tangents[k])))
            status = cg__last_status();
    if (status == CG_OK)
        status = fn(user, n_inputs, duals, n_outputs, outs);
    for (k = 0; k < n_outputs && status == CG_OK; k++)
        if (!outs[k])
            status = cg__error(CG_EINVAL, "jvp: the function returned "
                               "CG_OK without output %d", k);
    if (status == CG_OK)
        status = collect(ctx, n_outputs, outs, tans);
    for (k = 0; k < n_inputs; k++)
        cg_tensor_free(duals[k]);
    close_level(ctx);
    for (k = 0; k < n_outputs; k++) {
        if (status == CG_OK) {
            out_tangents[k] = tans[k];
            if (outputs)
                outputs[k] = outs[k];
            else
                cg_tensor_free(outs[k]);
        } else {
            cg_tensor_free(outs[k]);
            cg_tensor_free(tans[k]);
        }
    }
    return status;
}
