/* SPDX-License-Identifier: MIT */
/*
 * lib/optim/amp.c - dynamic loss scaling with torch.cuda.amp.GradScaler's
 * rules, all of it on the device: the scale, the growth tracker, found_inf
 * and the count of skipped steps live in one float32 device buffer, the
 * optimizer kernels read found_inf and the inverse scale from it and do
 * nothing on a skipped step, and the update runs as a one-work-item kernel,
 * so a training step never waits for the device.  Kernels: kernels/optim.cl
 * (amp_check, amp_advance, amp_update).
 */
#include "config.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "optim/internal.h"

/* The device state's slots (kernels/optim.cl). */
enum { AMP_FOUND_INF, AMP_INV_SCALE, AMP_SCALE, AMP_TRACKER, AMP_SKIPPED,
       AMP_SLOTS };

/* Elements per work-item of amp_check. */
#define AMP_CHUNK 64

struct cg_grad_scaler {
    cg_context *ctx;
    cg_tensor *state;           /* float32 [AMP_SLOTS] */
    cg_tensor *scale;           /* 0-D view of state[AMP_SCALE] */
    float growth, backoff;
    int interval;
    int nunscaled, capunscaled;
    const cg_optimizer **unscaled;  /* unscaled since the last update */
};

static double
dflt(double v, double d)
{
    return v == 0.0 && !signbit(v) ? d : v;
}

cg_grad_scaler *
cg_grad_scaler_new(cg_context *ctx, const cg_grad_scaler_options *opts)
{
    static const cg_grad_scaler_options none;
    const cg_grad_scaler_options *o = opts ? opts : &none;
    double init = dflt(o->init_scale, 65536.0);
    double growth = dflt(o->growth_factor, 2.0);
    double backoff = dflt(o->backoff_factor, 0.5);
    int interval = o->growth_interval ? o->growth_interval : 2000;
    float host[AMP_SLOTS];
    int64_t shape[1] = { AMP_SLOTS };
    cg_grad_scaler *s;

    cg__error_clear();
    if (!ctx) {
        cg__error(CG_EINVAL, "grad_scaler: ctx is NULL");
        return NULL;
    }
    if (!(init > 0 && init <= FLT_MAX)) {
        cg__error(CG_EINVAL, "grad_scaler: init_scale = %g (must be > 0 and "
                  "a finite float32)", init);
        return NULL;
    }
    if (!(growth > 1 && growth <= FLT_MAX)) {
        cg__error(CG_EINVAL, "grad_scaler: growth_factor = %g (must be > 1 "
                  "and finite)", growth);
        return NULL;
    }
    if (!(backoff > 0 && backoff < 1)) {
        cg__error(CG_EINVAL, "grad_scaler: backoff_factor = %g (must be in "
                  "(0, 1))", backoff);
        return NULL;
    }
    if (interval < 1 || interval > (1 << 24)) {
        cg__error(CG_EINVAL, "grad_scaler: growth_interval = %d (must be in "
                  "[1, 2^24])", interval);
        return NULL;
    }
    if (!(s = cg__calloc(1, sizeof *s)))
        return NULL;
    s->ctx = ctx;
    s->growth = (float)growth;
    s->backoff = (float)backoff;
    s->interval = interval;
    host[AMP_FOUND_INF] = 0.0f;
    host[AMP_SCALE] = (float)init;
    /* PyTorch: scale.double().reciprocal().float() */
    host[AMP_INV_SCALE] = (float)(1.0 / (double)host[AMP_SCALE]);
    host[AMP_TRACKER] = 0.0f;
    host[AMP_SKIPPED] = 0.0f;
    s->state = cg_tensor_from_host(ctx, CG_F32, 1, shape, host);
    s->scale = s->state ? cg__tensor_view(s->state, 0, NULL, NULL,
                                          s->state->offset + AMP_SCALE)
                        : NULL;
    if (!s->scale) {
        cg_grad_scaler_free(s);
        return NULL;
    }
    return s;
}

void
cg_grad_scaler_free(cg_grad_scaler *s)
{
    if (!s)
        return;
    cg_tensor_free(s->scale);
    cg_tensor_free(s->state);
    free(s->unscaled);
    free(s);
}

cg_tensor *
cg_grad_scaler_scale(cg_grad_scaler *s, cg_tensor *loss)
{
    cg_tensor *l32, *y;

    cg__error_clear();
    if (!s) {
        cg__error(CG_EINVAL, "grad_scaler_scale: scaler is NULL");
        return NULL;
    }
    if (cg__check_tensor(loss, "grad_scaler_scale: loss", CG__FLOAT_DTYPE))
        return NULL;
    if (loss->ctx != s->ctx) {
        cg__error(CG_ECONTEXT, "grad_scaler_scale: loss belongs to another "
                  "context");
        return NULL;
    }
    /* A 16-bit loss is scaled in float32 (its gradient is cast back). */
    if (!(l32 = cg_to_dtype(loss, CG_F32)))
        return NULL;
    y = cg_mul(l32, s->scale);
    cg_tensor_free(l32);
    return y;
}

static int
check_pair(const cg_grad_scaler *s, const cg_optimizer *opt,
           const char *fn)
{
    if (!s || !opt)
        return cg__error(CG_EINVAL, "%s: %s is NULL", fn,
                         s ? "optimizer" : "scaler");
    if (opt->ctx != s->ctx)
        return cg__error(CG_ECONTEXT, "%s: the optimizer belongs to another "
                         "context than the scaler", fn);
    return cg__optim_check_grads(opt);
}

static int
is_unscaled(const cg_grad_scaler *s, const cg_optimizer *opt)
{
    int i;

    for (i = 0; i < s->nunscaled; i++)
        if (s->unscaled[i] == opt)
            return 1;
    return 0;
}

/* Enqueues amp_check over every gradient of opt (unscale: also in place). */
static int
check_grads(cg_grad_scaler *s, cg_optimizer *opt, cl_int unscale)
{
    cl_mem amp = cg__tensor_mem(s->state);
    cl_uint ch = AMP_CHUNK;
    int i, status;

    for (i = 0; i < opt->n; i++) {
        cg_tensor *g = opt->params[i].p->grad;
        cl_mem mg;
        cl_int go;
        cl_uint n;
        cl_kernel k;

        if (!g)
            continue;
        mg = cg__tensor_mem(g);
        go = (cl_int)g->offset;
        n = (cl_uint)cg_tensor_numel(g);
        if ((status = cg__kernel_dt(s->ctx, CG__K_AMP_CHECK, g->dtype, &k)) ||
            (status = cg__args(k, CG__ARG(mg), CG__ARG(go), CG__ARG(n),
                               CG__ARG(amp), CG__ARG(unscale),
                               CG__ARG(ch))) ||
            (status = cg__launch_chunks(s->ctx, k, n, 1, ch, CG__WG)))
            return status;
    }
    return CG_OK;
}

int
cg_grad_scaler_unscale(cg_grad_scaler *s, cg_optimizer *opt)
{
    int status;

    cg__error_clear();
    if ((status = check_pair(s, opt, "grad_scaler_unscale")))
        return status;
    if (is_unscaled(s, opt))
        return cg__error(CG_ESTATE, "grad_scaler_unscale: already called "
                         "for this optimizer since the last update");
    if (s->nunscaled == s->capunscaled) {
        int cap = s->capunscaled ? 2 * s->capunscaled : 4;
        const cg_optimizer **v = cg__realloc(s->unscaled,
                                             (size_t)cap * sizeof *v);

        if (!v)
            return CG_EHOSTMEM;
        s->unscaled = v;
        s->capunscaled = cap;
    }
    if ((status = check_grads(s, opt, 1)))
        return status;
    s->unscaled[s->nunscaled++] = opt;
    return CG_OK;
}

int
cg_grad_scaler_step(cg_grad_scaler *s, cg_optimizer *opt)
{
    int status, unscaled;

    cg__error_clear();
    if ((status = check_pair(s, opt, "grad_scaler_step")))
        return status;
    unscaled = is_unscaled(s, opt);
    if (!unscaled && (status = check_grads(s, opt, 0)))
        return status;
    return cg__optim_step_amp(opt, cg__tensor_mem(s->state),
                              unscaled ? 2 : 1);
}

int
cg_grad_scaler_update(cg_grad_scaler *s)
{
    cl_mem amp;
    cl_float growth, backoff, interval;
    cl_kernel k;
    int status;

    cg__error_clear();
    if (!s)
        return cg__error(CG_EINVAL, "grad_scaler_update: scaler is NULL");
    amp = cg__tensor_mem(s->state);
    growth = s->growth;
    backoff = s->backoff;
    interval = (cl_float)s->interval;
    if ((status = cg__kernel(s->ctx, CG__K_AMP_UPDATE, &k)) ||
        (status = cg__args(k, CG__ARG(amp), CG__ARG(growth),
                           CG__ARG(backoff), CG__ARG(interval))) ||
        (status = cg__launch1d(s->ctx, k, 1, 1)))
        return status;
    s->nunscaled = 0;
    return CG_OK;
}

/* Reads the device state (waits for the queue). */
static int
read_state(const cg_grad_scaler *s, float *host, const char *fn)
{
    if (!s)
        return cg__error(CG_EINVAL, "%s: scaler is NULL", fn);
    return cg_tensor_to_host(s->state, host, AMP_SLOTS * sizeof *host);
}

int
cg_grad_scaler_get_scale(const cg_grad_scaler *s, float *scale)
{
    float host[AMP_SLOTS];
    int status;

    cg__error_clear();
    if (!scale)
        return cg__error(CG_EINVAL, "grad_scaler_get_scale: scale is NULL");
    if ((status = read_state(s, host, "grad_scaler_get_scale")))
        return status;
    *scale = host[AMP_SCALE];
    return CG_OK;
}

int
cg_grad_scaler_skipped_steps(const cg_grad_scaler *s, int64_t *count)
{
    float host[AMP_SLOTS];
    int status;

    cg__error_clear();
    if (!count)
        return cg__error(CG_EINVAL, "grad_scaler_skipped_steps: count is "
                         "NULL");
    if ((status = read_state(s, host, "grad_scaler_skipped_steps")))
        return status;
    *count = (int64_t)host[AMP_SKIPPED];
    return CG_OK;
}

int
cg_grad_scaler_growth_tracker(const cg_grad_scaler *s, int *tracker)
{
    float host[AMP_SLOTS];
    int status;

    cg__error_clear();
    if (!tracker)
        return cg__error(CG_EINVAL, "grad_scaler_growth_tracker: tracker "
                         "is NULL");
    if ((status = read_state(s, host, "grad_scaler_growth_tracker")))
        return status;
    *tracker = (int)host[AMP_TRACKER];
    return CG_OK;
}

int
cg_grad_scaler_set_state(cg_grad_scaler *s, float scale, int tracker)
{
    float host[AMP_SLOTS];
    int status;

    cg__error_clear();
    if (!s)
        return cg__error(CG_EINVAL, "grad_scaler_set_state: scaler is "
                         "NULL");
    if (!(scale > 0 && scale <= FLT_MAX))
        return cg__error(CG_EINVAL, "grad_scaler_set_state: scale = %g "
                         "(must be > 0 and finite)", (double)scale);
    if (tracker < 0 || tracker >= s->interval)
        return cg__error(CG_EINVAL, "grad_scaler_set_state: tracker = %d "
                         "(must be in [0, %d))", tracker, s->interval);
    if ((status = read_state(s, host, "grad_scaler_set_state")))
        return status;
    host[AMP_SCALE] = scale;
    host[AMP_INV_SCALE] = (float)(1.0 / (double)scale);
    host[AMP_TRACKER] = (float)tracker;
    return cg_tensor_write(s->state, host, sizeof host);
}
