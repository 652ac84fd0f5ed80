/* SPDX-License-Identifier: MIT */
/*
 * lib/optim/clip.c - gradient clipping by global norm and by value, as
 * torch.nn.utils.clip_grad_norm_ and clip_grad_value_.  The global norm
 * is reduced on the device in a fixed order and its scale applied there:
 * the host reads the norm only when asked to.  16-bit gradients are read
 * and written in their dtype, the norm accumulated in float32.  Kernels:
 * kernels/optim.cl.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>

#include "optim/internal.h"

/* kernels/optim.cl's reduction work-group size: its default, or the
 * tuning entry "optim" in force (the programs are built with it). */
#define NORM_RWG(ctx) ((int64_t)cg__param(ctx, CG__P_OPTIM_RWG))
/* At most this many partial results per gradient. */
#define NORM_MAX_GROUPS 64

/* Checks the tensors and collects the gradients that exist into grads
 * (n entries; *count of them).  An empty list is fine. */
static int
collect_grads(const char *fn, cg_tensor *const *params, int n,
              cg_tensor **grads, int *count)
{
    cg_context *ctx = NULL;
    int i;

    *count = 0;
    if (n < 0 || (n > 0 && !params))
        return cg__error(CG_EINVAL, "%s: bad parameter list (params %s, n "
                         "%d)", fn, params ? "set" : "NULL", n);
    for (i = 0; i < n; i++) {
        const cg_tensor *p = params[i], *g;

        if (!p)
            return cg__error(CG_EINVAL, "%s: params[%d] is NULL", fn, i);
        if (ctx && p->ctx != ctx)
            return cg__error(CG_ECONTEXT, "%s: params[%d] belongs to another "
                             "context than params[0]", fn, i);
        ctx = p->ctx;
        if (!(g = p->grad))
            continue;
        if (g->dtype != CG_F32 && g->dtype != CG_F16 &&
            g->dtype != CG_BF16)
            return cg__error(CG_EDTYPE, "%s: the gradient of params[%d] is "
                             "%s, not float32, float16 or bfloat16", fn, i,
                             cg__dtype_name(g->dtype));
        if (!cg_tensor_is_contiguous(g))
            return cg__error(CG_EINVAL, "%s: the gradient of params[%d] is "
                             "not contiguous", fn, i);
        grads[(*count)++] = p->grad;
    }
    return CG_OK;
}

static cl_uint
norm_groups(const cg_tensor *g)
{
    int64_t wg = NORM_RWG(g->ctx), n = cg_tensor_numel(g),
            ng = (n + wg - 1) / wg;

    return (cl_uint)(ng < NORM_MAX_GROUPS ? ng : NORM_MAX_GROUPS);
}

/* Enqueues the partial norms of every gradient, the total and the scale
 * (into out[0], out[1]) and the scaling of every gradient. */
static int
enqueue_clip(cg_context *ctx, cg_tensor **grads, int count, cl_mem part,
             cl_uint npart, cl_mem out, cl_int kind, cl_float p,
             cl_float max_norm)
{
    size_t global, local = (size_t)NORM_RWG(ctx);
    cl_kernel kp, kf, ks;
    cl_uint pofs = 0;
    int i, status;

    if ((status = cg__kernel(ctx, CG__K_GRAD_NORM_FINISH, &kf)))
        return status;
    for (i = 0; i < count; i++) {
        cl_mem mg = cg__tensor_mem(grads[i]);
        cl_int go = (cl_int)grads[i]->offset;
        cl_uint n = (cl_uint)cg_tensor_numel(grads[i]);
        cl_uint ng = norm_groups(grads[i]);

        global = (size_t)ng * local;
        if ((status = cg__kernel_dt(ctx, CG__K_GRAD_NORM_PARTIAL,
                                    grads[i]->dtype, &kp)) ||
            (status = cg__args(kp, CG__ARG(mg), CG__ARG(go), CG__ARG(n),
                               CG__ARG(part), CG__ARG(pofs), CG__ARG(kind),
                               CG__ARG(p))) ||
            (status = cg__launch(ctx, kp, 1, &global, &local, NULL)))
            return status;
        pofs += ng;
    }
    global = local;
    if ((status = cg__args(kf, CG__ARG(part), CG__ARG(npart), CG__ARG(out),
                           CG__ARG(kind), CG__ARG(p), CG__ARG(max_norm))) ||
        (status = cg__launch(ctx, kf, 1, &global, &local, NULL)))
        return status;
    for (i = 0; i < count; i++) {
        cl_mem mg = cg__tensor_mem(grads[i]);
        cl_int go = (cl_int)grads[i]->offset;
        cl_uint n = (cl_uint)cg_tensor_numel(grads[i]);

        if ((status = cg__kernel_dt(ctx, CG__K_GRAD_SCALE, grads[i]->dtype,
                                    &ks)) ||
            (status = cg__args(ks, CG__ARG(mg), CG__ARG(go), CG__ARG(n),
                               CG__ARG(out))) ||
            (status = cg__launch1d(ctx, ks, n, CG__WG)))
            return status;
    }
    return CG_OK;
}

int
cg_clip_grad_norm(cg_tensor *const *params, int n, double max_norm,
                  double norm_type, float *total_norm)
{
    cg_tensor **grads = NULL;
    cg_buffer *part = NULL, *out = NULL;
    cl_uint npart = 0;
    cl_int kind;
    int i, count = 0, status;

    cg__error_clear();
    if (isnan(max_norm) || max_norm < 0)
        return cg__error(CG_EINVAL, "clip_grad_norm: max_norm = %g (must be "
                         ">= 0)", max_norm);
    if (isnan(norm_type) || norm_type <= 0)
        return cg__error(CG_EINVAL, "clip_grad_norm: norm_type = %g (must be "
                         "> 0, or INFINITY)", norm_type);
    if (n > 0 && !(grads = cg__malloc((size_t)n * sizeof *grads)))
        return CG_EHOSTMEM;
    status = collect_grads("clip_grad_norm", params, n, grads, &count);
    if (status || count == 0) {
        if (status == CG_OK && total_norm)
            *total_norm = 0.0f;
        free(grads);
        return status;
    }
    kind = norm_type == 2 ? 0 : isinf(norm_type) ? 1 : 2;
    for (i = 0; i < count; i++)
        npart += norm_groups(grads[i]);
    part = cg_buffer_new(grads[0]->ctx, npart * sizeof(cl_float));
    out = part ? cg_buffer_new(grads[0]->ctx, 2 * sizeof(cl_float)) : NULL;
    if (!out)
        status = cg__last_status();
    if (status == CG_OK)
        status = enqueue_clip(grads[0]->ctx, grads, count,
                              cg__buffer_mem(part), npart,
                              cg__buffer_mem(out), kind, (cl_float)norm_type,
                              (cl_float)max_norm);
    if (status == CG_OK && total_norm)
        status = cg_buffer_read(out, 0, total_norm, sizeof *total_norm);
    /* The queue is in order: later users of these blocks wait for the
     * kernels above. */
    cg_buffer_free(part);
    cg_buffer_free(out);
    free(grads);
    return status;
}

int
cg_clip_grad_value(cg_tensor *const *params, int n, double clip)
{
    cg_tensor **grads = NULL;
    cl_float lo = (cl_float)-clip, hi = (cl_float)clip;
    cl_kernel k;
    int i, count = 0, status;

    cg__error_clear();
    if (isnan(clip) || clip < 0)
        return cg__error(CG_EINVAL, "clip_grad_value: clip = %g (must be "
                         ">= 0)", clip);
    if (n > 0 && !(grads = cg__malloc((size_t)n * sizeof *grads)))
        return CG_EHOSTMEM;
    status = collect_grads("clip_grad_value", params, n, grads, &count);
    for (i = 0; status == CG_OK && i < count; i++) {
        cl_mem mg = cg__tensor_mem(grads[i]);
        cl_int go = (cl_int)grads[i]->offset;
        cl_uint ne = (cl_uint)cg_tensor_numel(grads[i]);

        status = cg__kernel_dt(grads[0]->ctx, CG__K_CLAMP_INPLACE,
                               grads[i]->dtype, &k);
        if (status == CG_OK)
            status = cg__args(k, CG__ARG(mg), CG__ARG(go), CG__ARG(ne),
                          CG__ARG(lo), CG__ARG(hi));
        if (status == CG_OK)
            status = cg__launch1d(grads[0]->ctx, k, ne, CG__WG);
    }
    free(grads);
    return status;
}
