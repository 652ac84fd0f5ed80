/* SPDX-License-Identifier: MIT */
/*
 * lib/optim/optim.c - SGD, Adam, AdamW and RMSprop: construction and
 * option checks, the per-parameter update launches, learning rate and the
 * state a checkpoint saves.  Kernels: kernels/optim.cl.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/internal.h"

static const char *const kind_names[CG__STATE_KINDS] = {
    "momentum_buffer", "exp_avg", "exp_avg_sq", "max_exp_avg_sq",
    "square_avg", "grad_avg", "master"
};

/* ------------------------------------------------------------------------
 * Options
 * ------------------------------------------------------------------------ */

/* A zero field means the default; -0.0 (CG_OPTIM_ZERO) means zero. */
static double
dflt(double v, double d)
{
    return v == 0.0 && !signbit(v) ? d : v;
}

/* Checks that v is finite, >= lo and, unless hi is NaN, < hi. */
static int
check_range(const char *opt, const char *field, double v, double lo,
            double hi)
{
    if (isnan(hi) && !(isfinite(v) && v >= lo))
        return cg__error(CG_EINVAL, "%s: %s = %g (must be finite and >= %g)",
                         opt, field, v, lo);
    if (!isnan(hi) && !(v >= lo && v < hi))
        return cg__error(CG_EINVAL, "%s: %s = %g (must be in [%g, %g))",
                         opt, field, v, lo, hi);
    return CG_OK;
}

/* Checks params: non-NULL, float32, float16 or bfloat16, one context,
 * contiguous, leaves that require grad, no two overlapping. */
static int
check_params(const char *opt, cg_context *ctx, cg_tensor *const *params,
             int n)
{
    int i, j;

    if (!ctx)
        return cg__error(CG_EINVAL, "%s: ctx is NULL", opt);
    if (!params || n < 1)
        return cg__error(CG_EINVAL, "%s: an empty parameter list (params "
                         "%s, nparams %d)", opt, params ? "set" : "NULL", n);
    for (i = 0; i < n; i++) {
        const cg_tensor *p = params[i];
        char what[64];
        int status;

        snprintf(what, sizeof what, "%s: params[%d]", opt, i);
        if ((status = cg__check_tensor(p, what, CG__FLOAT_DTYPE)))
            return status;
        if (p->ctx != ctx)
            return cg__error(CG_ECONTEXT, "%s belongs to another context",
                             what);
        if (p->grad_fn)
            return cg__error(CG_EINVAL, "%s is not a leaf (made by '%s'); "
                             "optimize the tensors the computation starts "
                             "from", what, p->grad_fn->op);
        if (!p->requires_grad)
            return cg__error(CG_EINVAL, "%s does not require grad", what);
        if (!cg_tensor_is_contiguous(p))
            return cg__error(CG_EINVAL, "%s is not contiguous", what);
        for (j = 0; j < i; j++) {
            const cg_tensor *q = params[j];

            if (q->storage == p->storage &&
                q->offset < p->offset + cg_tensor_numel(p) &&
                p->offset < q->offset + cg_tensor_numel(q))
                return cg__error(CG_EINVAL, "%s overlaps params[%d] (a "
                                 "parameter given twice?)", what, j);
        }
    }
    return CG_OK;
}

/* ------------------------------------------------------------------------
 * Construction and release
 * ------------------------------------------------------------------------ */

static void
optim_destroy(cg_optimizer *opt)
{
    int i, k;

    for (i = 0; opt->params && i < opt->n; i++) {
        cg__optim_param *pp = &opt->params[i];

        cg_tensor_free(pp->p);
        for (k = 0; k < CG__MAX_KINDS; k++) {
            cg_tensor_free(pp->state[k]);
            free(pp->names[k]);
        }
    }
    cg_tensor_free(opt->dstep);
    free(opt->params);
    free(opt);
}

/* Allocates the parameter table and zeroed state of each kind in
 * opt->kinds; SGD's buffer becomes visible only at its first step.  A
 * 16-bit parameter gets a master, its value in float32 (the last kind). */
static cg_optimizer *
optim_finish(cg_optimizer *opt, cg_tensor *const *params, int n)
{
    int i, k;

    for (i = 0; i < n; i++)
        if (params[i]->dtype != CG_F32) {
            opt->kinds[opt->nkinds++] = CG__MASTER;
            break;
        }
    opt->refs = 1;
    opt->n = n;
    opt->params = cg__calloc((size_t)n, sizeof *opt->params);
    if (!opt->params)
        goto fail;
    for (i = 0; i < n; i++) {
        cg__optim_param *pp = &opt->params[i];

        pp->p = cg_tensor_ref(params[i]);
        for (k = 0; k < opt->nkinds; k++) {
            const char *kn = kind_names[opt->kinds[k]];
            size_t len = strlen(kn) + 16;

            if (opt->kinds[k] == CG__MASTER) {
                if (pp->p->dtype == CG_F32)
                    continue;
                pp->state[k] = cg__cast(pp->p, CG_F32);
            } else {
                pp->state[k] = cg_zeros(opt->ctx, pp->p->ndim, pp->p->shape);
            }
            pp->names[k] = cg__malloc(len);
            if (!pp->state[k] || !pp->names[k])
                goto fail;
            snprintf(pp->names[k], len, "%s.%d", kn, i);
            pp->present[k] = opt->kinds[k] != CG__MOMENTUM_BUFFER ||
                             opt->kind != CG__SGD;
        }
    }
    return opt;
fail:
    optim_destroy(opt);
    return NULL;
}

static cg_optimizer *
optim_alloc(cg_context *ctx, cg__optim_kind kind)
{
    cg_optimizer *opt = cg__calloc(1, sizeof *opt);

    if (opt) {
        opt->ctx = ctx;
        opt->kind = kind;
    }
    return opt;
}

static void
add_kind(cg_optimizer *opt, cg__state_kind k)
{
    opt->kinds[opt->nkinds++] = k;
}

cg_optimizer *
cg_optim_sgd_new(cg_context *ctx, cg_tensor *const *params, int nparams,
                 const cg_sgd_options *opts)
{
    static const cg_sgd_options none;
    const cg_sgd_options *o = opts ? opts : &none;
    double lr = dflt(o->lr, 1e-3);
    cg_optimizer *opt;

    cg__error_clear();
    if (check_params("SGD", ctx, params, nparams) ||
        check_range("SGD", "lr", lr, 0, NAN) ||
        check_range("SGD", "momentum", o->momentum, 0, NAN) ||
        check_range("SGD", "dampening", o->dampening, 0, NAN) ||
        check_range("SGD", "weight_decay", o->weight_decay, 0, NAN))
        return NULL;
    if (o->nesterov && (o->momentum <= 0 || o->dampening != 0)) {
        cg__error(CG_EINVAL, "SGD: Nesterov momentum needs momentum > 0 "
                  "and dampening 0 (momentum %g, dampening %g)",
                  o->momentum, o->dampening);
        return NULL;
    }
    if (!(opt = optim_alloc(ctx, CG__SGD)))
        return NULL;
    opt->lr = lr;
    opt->momentum = o->momentum;
    opt->dampening = o->dampening;
    opt->weight_decay = o->weight_decay;
    opt->nesterov = o->nesterov != 0;
    opt->maximize = o->maximize != 0;
    if (o->momentum != 0)
        add_kind(opt, CG__MOMENTUM_BUFFER);
    return optim_finish(opt, params, nparams);
}

static cg_optimizer *
adam_new(const char *name, cg__optim_kind kind, cg_context *ctx,
         cg_tensor *const *params, int nparams, const cg_adam_options *opts)
{
    static const cg_adam_options none;
    const cg_adam_options *o = opts ? opts : &none;
    double lr = dflt(o->lr, 1e-3), beta1 = dflt(o->beta1, 0.9);
    double beta2 = dflt(o->beta2, 0.999), eps = dflt(o->eps, 1e-8);
    double wd = dflt(o->weight_decay, kind == CG__ADAMW ? 1e-2 : 0);
    cg_optimizer *opt;

    cg__error_clear();
    if (check_params(name, ctx, params, nparams) ||
        check_range(name, "lr", lr, 0, NAN) ||
        check_range(name, "beta1", beta1, 0, 1) ||
        check_range(name, "beta2", beta2, 0, 1) ||
        check_range(name, "eps", eps, 0, NAN) ||
        check_range(name, "weight_decay", wd, 0, NAN))
        return NULL;
    if (!(opt = optim_alloc(ctx, kind)))
        return NULL;
    opt->lr = lr;
    opt->beta1 = beta1;
    opt->beta2 = beta2;
    opt->eps = eps;
    opt->weight_decay = wd;
    opt->amsgrad = o->amsgrad != 0;
    opt->maximize = o->maximize != 0;
    add_kind(opt, CG__EXP_AVG);
    add_kind(opt, CG__EXP_AVG_SQ);
    if (opt->amsgrad)
        add_kind(opt, CG__MAX_EXP_AVG_SQ);
    return optim_finish(opt, params, nparams);
}

cg_optimizer *
cg_optim_adam_new(cg_context *ctx, cg_tensor *const *params, int nparams,
                  const cg_adam_options *opts)
{
    return adam_new("Adam", CG__ADAM, ctx, params, nparams, opts);
}

cg_optimizer *
cg_optim_adamw_new(cg_context *ctx, cg_tensor *const *params, int nparams,
                   const cg_adam_options *opts)
{
    return adam_new("AdamW", CG__ADAMW, ctx, params, nparams, opts);
}

cg_optimizer *
cg_optim_rmsprop_new(cg_context *ctx, cg_tensor *const *params, int nparams,
                     const cg_rmsprop_options *opts)
{
    static const cg_rmsprop_options none;
    const cg_rmsprop_options *o = opts ? opts : &none;
    double lr = dflt(o->lr, 1e-2), alpha = dflt(o->alpha, 0.99);
    double eps = dflt(o->eps, 1e-8);
    cg_optimizer *opt;

    cg__error_clear();
    if (check_params("RMSprop", ctx, params, nparams) ||
        check_range("RMSprop", "lr", lr, 0, NAN) ||
        check_range("RMSprop", "alpha", alpha, 0, NAN) ||
        check_range("RMSprop", "eps", eps, 0, NAN) ||
        check_range("RMSprop", "weight_decay", o->weight_decay, 0, NAN) ||
        check_range("RMSprop", "momentum", o->momentum, 0, NAN))
        return NULL;
    if (!(opt = optim_alloc(ctx, CG__RMSPROP)))
        return NULL;
    opt->lr = lr;
    opt->alpha = alpha;
    opt->eps = eps;
    opt->weight_decay = o->weight_decay;
    opt->momentum = o->momentum;
    opt->centered = o->centered != 0;
    opt->maximize = o->maximize != 0;
    add_kind(opt, CG__SQUARE_AVG);
    if (opt->momentum > 0)
        add_kind(opt, CG__MOMENTUM_BUFFER);
    if (opt->centered)
        add_kind(opt, CG__GRAD_AVG);
    return optim_finish(opt, params, nparams);
}

cg_optimizer *
cg__optim_ref(cg_optimizer *opt)
{
    opt->refs++;
    return opt;
}

void
cg_optim_free(cg_optimizer *opt)
{
    if (opt && --opt->refs == 0)
        optim_destroy(opt);
}

/* ------------------------------------------------------------------------
 * Steps
 * ------------------------------------------------------------------------ */

/* Elements per work-item of the update kernels (kernels/optim.cl): a
 * multiple of their vector width; a few cache lines of each operand. */
#define OPT_CHUNK 64

/* The state tensor of kind k of parameter i, or NULL if unused. */
static cg_tensor *
state_of(const cg_optimizer *opt, int i, cg__state_kind kind)
{
    int k;

    for (k = 0; k < opt->nkinds; k++)
        if (opt->kinds[k] == kind)
            return opt->params[i].state[k];
    return NULL;
}

/* Loss scaling's kernel arguments (kernels/optim.cl): amp, amp_mode and
 * dstep; amp_mode 0 and dummies without a scaler. */
typedef struct amp_args {
    cl_mem amp;
    cl_int mode;
    cl_mem dstep;
} amp_args;

/* The master (a dummy, mp, for a float32 parameter). */
static cl_mem
master_mem(const cg_optimizer *opt, int i, cl_mem mp)
{
    cg_tensor *m = state_of(opt, i, CG__MASTER);

    return m ? cg__tensor_mem(m) : mp;
}

static int
launch_sgd(cg_optimizer *opt, int i, cl_mem mp, cl_int po, cl_mem mg,
           cl_int go, cl_uint n, const amp_args *a)
{
    cg__optim_param *pp = &opt->params[i];
    cg_tensor *b = state_of(opt, i, CG__MOMENTUM_BUFFER);
    cl_mem mmaster = master_mem(opt, i, mp);
    cl_mem amp = a->mode ? a->amp : mp, dstep = a->mode ? a->dstep : mp;
    cl_int amp_mode = a->mode;
    cl_uint si = (cl_uint)i;
    cl_float init_at = pp->init_at;
    cl_kernel k;
    cl_mem mb = b ? cg__tensor_mem(b) : mg;
    cl_float mom = (cl_float)opt->momentum;
    cl_float omd = (cl_float)(1 - opt->dampening);
    cl_float wd = (cl_float)opt->weight_decay, neg_lr = (cl_float)-opt->lr;
    cl_int nesterov = opt->nesterov, maximize = opt->maximize;
    cl_int init = b && !pp->present[0];
    cl_uint ch = OPT_CHUNK;
    int status;

    if ((status = cg__kernel_dt(opt->ctx, CG__K_SGD_STEP, pp->p->dtype, &k)))
        return status;
    status = cg__args(k, CG__ARG(mp), CG__ARG(po), CG__ARG(mg), CG__ARG(go),
                      CG__ARG(mb), CG__ARG(n), CG__ARG(mom), CG__ARG(omd),
                      CG__ARG(wd), CG__ARG(neg_lr), CG__ARG(nesterov),
                      CG__ARG(maximize), CG__ARG(init), CG__ARG(ch),
                      CG__ARG(mmaster), CG__ARG(amp), CG__ARG(amp_mode),
                      CG__ARG(dstep), CG__ARG(si), CG__ARG(init_at));
    if (status == CG_OK)
        status = cg__launch_chunks(opt->ctx, k, n, 1, ch, CG__WG);
    if (status == CG_OK && b) {
        int kb;

        for (kb = 0; opt->kinds[kb] != CG__MOMENTUM_BUFFER; kb++)
            ;
        pp->present[kb] = 1;
    }
    return status;
}

static int
launch_adam(cg_optimizer *opt, int i, cl_mem mp, cl_int po, cl_mem mg,
            cl_int go, cl_uint n, const amp_args *a)
{
    cg__optim_param *pp = &opt->params[i];
    double step = (double)(pp->step + 1);
    double bc1 = 1 - pow(opt->beta1, step), bc2 = 1 - pow(opt->beta2, step);
    int adamw = opt->kind == CG__ADAMW;
    cl_mem mm = cg__tensor_mem(pp->state[0]);
    cl_mem mv = cg__tensor_mem(pp->state[1]);
    cl_mem mx = opt->amsgrad ? cg__tensor_mem(pp->state[2]) : mv;
    cl_float pscale = adamw ? (cl_float)(1 - opt->lr * opt->weight_decay)
                            : 1.0f;
    cl_float wd = adamw ? 0.0f : (cl_float)opt->weight_decay;
    cl_float b1 = (cl_float)opt->beta1, omb1 = (cl_float)(1 - opt->beta1);
    cl_float b2 = (cl_float)opt->beta2, omb2 = (cl_float)(1 - opt->beta2);
    cl_float bc2s = (cl_float)sqrt(bc2), eps = (cl_float)opt->eps;
    cl_float neg_step = (cl_float)-(opt->lr / bc1);
    cl_int amsgrad = opt->amsgrad, maximize = opt->maximize;
    cl_uint ch = OPT_CHUNK;
    cl_mem mmaster = master_mem(opt, i, mp);
    cl_mem amp = a->mode ? a->amp : mp, dstep = a->mode ? a->dstep : mp;
    cl_int amp_mode = a->mode;
    cl_uint si = (cl_uint)i;
    cl_float lr = (cl_float)opt->lr;
    cl_kernel k;
    int status;

    if ((status = cg__kernel_dt(opt->ctx, CG__K_ADAM_STEP, pp->p->dtype,
                                &k)))
        return status;
    status = cg__args(k, CG__ARG(mp), CG__ARG(po), CG__ARG(mg), CG__ARG(go),
                      CG__ARG(mm), CG__ARG(mv), CG__ARG(mx), CG__ARG(n),
                      CG__ARG(pscale), CG__ARG(wd), CG__ARG(b1), CG__ARG(omb1),
                      CG__ARG(b2), CG__ARG(omb2), CG__ARG(bc2s), CG__ARG(eps),
                      CG__ARG(neg_step), CG__ARG(amsgrad), CG__ARG(maximize),
                      CG__ARG(ch), CG__ARG(mmaster), CG__ARG(amp),
                      CG__ARG(amp_mode), CG__ARG(dstep), CG__ARG(si),
                      CG__ARG(lr));
    if (status == CG_OK)
        status = cg__launch_chunks(opt->ctx, k, n, 1, ch, CG__WG);
    return status;
}

static int
launch_rmsprop(cg_optimizer *opt, int i, cl_mem mp, cl_int po, cl_mem mg,
               cl_int go, cl_uint n, const amp_args *a)
{
    cg_tensor *sq = state_of(opt, i, CG__SQUARE_AVG);
    cg_tensor *ga = state_of(opt, i, CG__GRAD_AVG);
    cg_tensor *b = state_of(opt, i, CG__MOMENTUM_BUFFER);
    cl_mem msq = cg__tensor_mem(sq);
    cl_mem mga = ga ? cg__tensor_mem(ga) : msq;
    cl_mem mb = b ? cg__tensor_mem(b) : msq;
    cl_float alpha = (cl_float)opt->alpha, oma = (cl_float)(1 - opt->alpha);
    cl_float eps = (cl_float)opt->eps, wd = (cl_float)opt->weight_decay;
    cl_float mom = (cl_float)opt->momentum, neg_lr = (cl_float)-opt->lr;
    cl_int centered = opt->centered, maximize = opt->maximize;
    cl_uint ch = OPT_CHUNK;
    cl_mem mmaster = master_mem(opt, i, mp);
    cl_mem amp = a->mode ? a->amp : mp;
    cl_int amp_mode = a->mode;
    cl_kernel k;
    int status;

    if ((status = cg__kernel_dt(opt->ctx, CG__K_RMSPROP_STEP,
                                opt->params[i].p->dtype, &k)))
        return status;
    status = cg__args(k, CG__ARG(mp), CG__ARG(po), CG__ARG(mg), CG__ARG(go),
                      CG__ARG(msq), CG__ARG(mga), CG__ARG(mb), CG__ARG(n),
                      CG__ARG(alpha), CG__ARG(oma), CG__ARG(eps), CG__ARG(wd),
                      CG__ARG(mom), CG__ARG(neg_lr), CG__ARG(centered),
                      CG__ARG(maximize), CG__ARG(ch), CG__ARG(mmaster),
                      CG__ARG(amp), CG__ARG(amp_mode));
    if (status == CG_OK)
        status = cg__launch_chunks(opt->ctx, k, n, 1, ch, CG__WG);
    return status;
}

/* Checks every present gradient before anything is enqueued. */
int
cg__optim_check_grads(const cg_optimizer *opt)
{
    char s1[96], s2[96];
    int i;

    for (i = 0; i < opt->n; i++) {
        const cg_tensor *p = opt->params[i].p, *g = p->grad;

        if (!g)
            continue;
        if (g->dtype != p->dtype)
            return cg__error(CG_EDTYPE, "optimizer step: the gradient of "
                             "parameter %d is %s, not %s as the parameter",
                             i, cg__dtype_name(g->dtype),
                             cg__dtype_name(p->dtype));
        if (g->ndim != p->ndim ||
            memcmp(g->shape, p->shape, sizeof(int64_t) * (size_t)p->ndim) ||
            !cg_tensor_is_contiguous(g))
            return cg__error(CG_ESHAPE, "optimizer step: the gradient of "
                             "parameter %d has shape %s%s, the parameter %s",
                             i, cg__shape_str(g->ndim, g->shape, s1,
                                              sizeof s1),
                             cg_tensor_is_contiguous(g) ? ""
                                                        : " (not contiguous)",
                             cg__shape_str(p->ndim, p->shape, s2, sizeof s2));
    }
    return CG_OK;
}

/* Launches parameter i's update. */
static int
launch_one(cg_optimizer *opt, int i, const amp_args *a)
{
    cg_tensor *p = opt->params[i].p, *g = p->grad;
    cl_mem mp = cg__tensor_mem(p), mg = cg__tensor_mem(g);
    cl_int po = (cl_int)p->offset, go = (cl_int)g->offset;
    cl_uint n = (cl_uint)cg_tensor_numel(p);

    switch (opt->kind) {
    case CG__SGD:
        return launch_sgd(opt, i, mp, po, mg, go, n, a);
    case CG__ADAM:
    case CG__ADAMW:
        return launch_adam(opt, i, mp, po, mg, go, n, a);
    default:
        return launch_rmsprop(opt, i, mp, po, mg, go, n, a);
    }
}

int
cg_optim_step(cg_optimizer *opt)
{
    static const amp_args none = { NULL, 0, NULL };
    int i, status;

    cg__error_clear();
    if (!opt)
        return cg__error(CG_EINVAL, "optimizer step: opt is NULL");
    if ((status = cg__optim_check_grads(opt)) ||
        (status = cg__optim_sync_steps(opt)))
        return status;
    for (i = 0; i < opt->n; i++) {
        if (!opt->params[i].p->grad)
            continue;
        if ((status = launch_one(opt, i, &none)))
            return status;
        opt->params[i].step++;
    }
    return CG_OK;
}

/* Moves the step counts to the device: opt->dstep, and SGD's init_at. */
static int
steps_to_device(cg_optimizer *opt)
{
    int64_t shape[1];
    float *v;
    int i;

    if (opt->dstep)
        return CG_OK;
    if (!(v = cg__malloc((size_t)opt->n * sizeof *v)))
        return CG_EHOSTMEM;
    shape[0] = opt->n;
    for (i = 0; i < opt->n; i++) {
        cg__optim_param *pp = &opt->params[i];
        cg_tensor *b = state_of(opt, i, CG__MOMENTUM_BUFFER);
        int kb;

        v[i] = (float)pp->step;
        pp->init_at = -1.0f;
        for (kb = 0; b && opt->kind == CG__SGD && opt->kinds[kb] !=
             CG__MOMENTUM_BUFFER; kb++)
            ;
        if (b && opt->kind == CG__SGD && !pp->present[kb])
            pp->init_at = v[i];
    }
    opt->dstep = cg_tensor_from_host(opt->ctx, CG_F32, 1, shape, v);
    free(v);
    return opt->dstep ? CG_OK : cg__last_status();
}

int
cg__optim_sync_steps(cg_optimizer *opt)
{
    float *v;
    int i, status;

    if (!opt->dstep)
        return CG_OK;
    if (!(v = cg__malloc((size_t)opt->n * sizeof *v)))
        return CG_EHOSTMEM;
    status = cg_tensor_to_host(opt->dstep, v, (size_t)opt->n * sizeof *v);
    for (i = 0; status == CG_OK && i < opt->n; i++) {
        cg__optim_param *pp = &opt->params[i];
        int kb;

        if (pp->init_at >= 0 && v[i] == pp->init_at) {
            /* SGD's buffer: every step since was skipped. */
            for (kb = 0; opt->kinds[kb] != CG__MOMENTUM_BUFFER; kb++)
                ;
            pp->present[kb] = 0;
        }
        pp->step = (int64_t)v[i];
        pp->init_at = -1.0f;
    }
    free(v);
    if (status == CG_OK) {
        cg_tensor_free(opt->dstep);
        opt->dstep = NULL;
    }
    return status;
}

int
cg__optim_step_amp(cg_optimizer *opt, cl_mem amp, int mode)
{
    amp_args a;
    cl_kernel k;
    int i, first, status;

    if ((status = steps_to_device(opt)) ||
        (status = cg__kernel(opt->ctx, CG__K_AMP_ADVANCE, &k)))
        return status;
    a.amp = amp;
    a.mode = mode;
    a.dstep = cg__tensor_mem(opt->dstep);
    for (i = 0; i < opt->n; i++)
        if (opt->params[i].p->grad &&
            (status = launch_one(opt, i, &a)))
            return status;
    /* Then the counts of the parameters stepped, a run at a time. */
    for (first = 0; first < opt->n; first = i) {
        cl_uint f, count;

        if (!opt->params[first].p->grad) {
            i = first + 1;
            continue;
        }
        for (i = first; i < opt->n && opt->params[i].p->grad; i++)
            ;
        f = (cl_uint)first;
        count = (cl_uint)(i - first);
        if ((status = cg__args(k, CG__ARG(a.dstep), CG__ARG(f),
                               CG__ARG(count), CG__ARG(amp))) ||
            (status = cg__launch1d(opt->ctx, k, count, CG__WG)))
            return status;
    }
    return CG_OK;
}

int
cg_optim_zero_grad(cg_optimizer *opt)
{
    int i;

    cg__error_clear();
    if (!opt)
        return cg__error(CG_EINVAL, "zero_grad: opt is NULL");
    for (i = 0; i < opt->n; i++)
        cg_tensor_zero_grad(opt->params[i].p);
    return CG_OK;
}

/* ------------------------------------------------------------------------
 * Learning rate, steps and state
 * ------------------------------------------------------------------------ */

int
cg_optim_set_lr(cg_optimizer *opt, double lr)
{
    cg__error_clear();
    if (!opt)
        return cg__error(CG_EINVAL, "set_lr: opt is NULL");
    if (!isfinite(lr) || lr < 0)
        return cg__error(CG_EINVAL, "set_lr: lr = %g (must be finite and "
                         ">= 0)", lr);
    opt->lr = lr;
    return CG_OK;
}

double
cg_optim_get_lr(const cg_optimizer *opt)
{
    return opt ? opt->lr : -1;
}

int
cg_optim_param_count(const cg_optimizer *opt)
{
    return opt ? opt->n : -1;
}

int
cg_optim_state_count(const cg_optimizer *opt)
{
    int i, k, count = 0;

    if (!opt)
        return -1;
    for (i = 0; i < opt->n; i++)
        for (k = 0; k < opt->nkinds; k++)
            count += opt->params[i].present[k];
    return count;
}

int
cg_optim_state_get(const cg_optimizer *opt, int index, const char **name,
                   cg_tensor **tensor)
{
    int i, k, seen = 0;

    cg__error_clear();
    if (!opt)
        return cg__error(CG_EINVAL, "state_get: opt is NULL");
    for (i = 0; i < opt->n; i++)
        for (k = 0; k < opt->nkinds; k++) {
            if (!opt->params[i].present[k] || seen++ != index)
                continue;
            if (name)
                *name = opt->params[i].names[k];
            if (tensor)
                *tensor = opt->params[i].state[k];
            return CG_OK;
        }
    return cg__error(CG_EINVAL, "state_get: index %d is out of range (%d "
                     "state tensors)", index, seen);
}

/* Parses "KIND.INDEX" into the slot k and parameter i. */
static int
parse_state_name(const cg_optimizer *opt, const char *name, int *i, int *k)
{
    const char *dot = name ? strrchr(name, '.') : NULL;
    char *end;
    long idx;

    if (!dot || dot[1] < '0' || dot[1] > '9')
        return cg__error(CG_EINVAL, "state_set: name \"%s\" is not "
                         "KIND.INDEX", name ? name : "(null)");
    idx = strtol(dot + 1, &end, 10);
    if (*end || idx >= opt->n)
        return cg__error(CG_EINVAL, "state_set: \"%s\": no parameter %s "
                         "(%d parameters)", name, dot + 1, opt->n);
    for (*k = 0; *k < opt->nkinds; (*k)++) {
        const char *kn = kind_names[opt->kinds[*k]];

        if (strlen(kn) == (size_t)(dot - name) &&
            memcmp(kn, name, (size_t)(dot - name)) == 0) {
            *i = (int)idx;
            return CG_OK;
        }
    }
    return cg__error(CG_EINVAL, "state_set: \"%s\": this optimizer has no "
                     "state of that kind", name);
}

int
cg_optim_state_set(cg_optimizer *opt, const char *name, cg_tensor *value)
{
    char s1[96], s2[96];
    cg_tensor *dst;
    int i = 0, k = 0, status;

    cg__error_clear();
    if (!opt)
        return cg__error(CG_EINVAL, "state_set: opt is NULL");
    if ((status = parse_state_name(opt, name, &i, &k)) ||
        (status = cg__check_tensor(value, "state_set: value", 0)))
        return status;
    /* Leaves the scaler's device step counts: SGD's buffer is then made
     * by the host's rule (present), not at a device count. */
    if ((status = cg__optim_sync_steps(opt)))
        return status;
    if (value->ctx != opt->ctx)
        return cg__error(CG_ECONTEXT, "state_set: value belongs to another "
                         "context");
    dst = opt->params[i].state[k];
    if (!dst)
        return cg__error(CG_EINVAL, "state_set: \"%s\": parameter %d is "
                         "float32 and has no master", name, i);
    if (value->ndim != dst->ndim ||
        memcmp(value->shape, dst->shape, sizeof(int64_t) * (size_t)dst->ndim))
        return cg__error(CG_ESHAPE, "state_set: \"%s\" has shape %s, value "
                         "%s", name,
                         cg__shape_str(dst->ndim, dst->shape, s1, sizeof s1),
                         cg__shape_str(value->ndim, value->shape, s2,
                                       sizeof s2));
    if ((status = cg__copy_into(dst, value)))
        return status;
    opt->params[i].present[k] = 1;
    return CG_OK;
}

static int
check_index(const cg_optimizer *opt, int index, const char *fn)
{
    if (!opt)
        return cg__error(CG_EINVAL, "%s: opt is NULL", fn);
    if (index < 0 || index >= opt->n)
        return cg__error(CG_EINVAL, "%s: parameter %d out of range (%d "
                         "parameters)", fn, index, opt->n);
    return CG_OK;
}

int
cg_optim_get_step(const cg_optimizer *opt, int index, int64_t *step)
{
    int status;

    cg__error_clear();
    if ((status = check_index(opt, index, "get_step")))
        return status;
    if (!step)
        return cg__error(CG_EINVAL, "get_step: step is NULL");
    if ((status = cg__optim_sync_steps((cg_optimizer *)opt)))
        return status;
    *step = opt->params[index].step;
    return CG_OK;
}

int
cg_optim_set_step(cg_optimizer *opt, int index, int64_t step)
{
    int status;

    cg__error_clear();
    if ((status = check_index(opt, index, "set_step")))
        return status;
    if (step < 0)
        return cg__error(CG_EINVAL, "set_step: step %lld < 0",
                         (long long)step);
    if ((status = cg__optim_sync_steps(opt)))
        return status;
    opt->params[index].step = step;
    return CG_OK;
}
