/* SPDX-License-Identifier: MIT */
/*
 * lib/cl/context.c - a context's device layer: one device, one in-order
 * queue, its programs and its memory pool.  The public constructor
 * (lib/context.c) builds this, then puts tuning in force.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cl/internal.h"

double
cg__now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

cg_context *
cg__context_create(const cg_context_options *opts)
{
    cg_context *ctx = NULL;
    cl_command_queue_properties props = 0;
    cl_int rc;
    int index, status, exact, set;

    if (cg__env_flag("CLGRAD_POOL_EXACT", &exact, &set))
        return NULL;
    status = cg_device_select(opts ? opts->device : NULL, &index);
    if (status)
        return NULL;
    ctx = cg__calloc(1, sizeof *ctx);
    if (!ctx)
        return NULL;
    status = cg_device_get_info(index, &ctx->info);
    if (status)
        goto fail;
    status = cg__device_lookup(index, &ctx->platform, &ctx->device);
    if (status)
        goto fail;
    ctx->context = clCreateContext(NULL, 1, &ctx->device, NULL, NULL, &rc);
    CG__CHECK_CL(rc, "clCreateContext");
    ctx->profiling = opts && opts->profiling;
    ctx->exact_blocks = exact;
    if (ctx->profiling)
        props |= CL_QUEUE_PROFILING_ENABLE;
    ctx->queue = clCreateCommandQueue(ctx->context, ctx->device, props, &rc);
    CG__CHECK_CL(rc, "clCreateCommandQueue");
    cg__params_reset(ctx);
    return ctx;
fail:
    (void)status;
    if (ctx->context)
        clReleaseContext(ctx->context);
    free(ctx);
    return NULL;
}

void
cg__context_destroy(cg_context *ctx)
{
    clFinish(ctx->queue);
    cg__profile_free(ctx);
    cg__pool_destroy(ctx);
    cg__programs_free(ctx);
    clReleaseCommandQueue(ctx->queue);
    clReleaseContext(ctx->context);
    free(ctx);
}

int
cg_context_device_info(const cg_context *ctx, cg_device_info *info)
{
    cg__error_clear();
    if (!ctx || !info)
        return cg__error(CG_EINVAL, "%s is NULL", ctx ? "info" : "ctx");
    *info = ctx->info;
    return CG_OK;
}

int
cg_context_finish(cg_context *ctx)
{
    int status = CG_OK;

    cg__error_clear();
    if (!ctx)
        return cg__error(CG_EINVAL, "ctx is NULL");
    CG__CHECK_CL(clFinish(ctx->queue), "clFinish");
fail:
    return status;
}

int
cg_context_stats(const cg_context *ctx, cg_memory_stats *stats)
{
    cg__error_clear();
    if (!ctx || !stats)
        return cg__error(CG_EINVAL, "%s is NULL", ctx ? "stats" : "ctx");
    *stats = ctx->stats;
    return CG_OK;
}

int
cg__launch(cg_context *ctx, cl_kernel kernel, cl_uint dims,
           const size_t *global, const size_t *local, cl_event *event)
{
    int status = CG_OK;

    cl_event ev = NULL;

    CG__CHECK_CL(cg__fault(CG__FAULT_LAUNCH) ? CL_OUT_OF_RESOURCES
                 : clEnqueueNDRangeKernel(ctx->queue, kernel, dims, NULL,
                                          global, local, 0, NULL,
                                          ctx->profiling ? &ev : event),
                 "clEnqueueNDRangeKernel");
    ctx->stats.kernels_enqueued++;
    if (ctx->profiling) {
        if (event) {
            clRetainEvent(ev);
            *event = ev;
        }
        status = cg__profile_kernel(ctx, kernel, ev);
    }
fail:
    return status;
}
