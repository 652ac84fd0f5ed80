/* SPDX-License-Identifier: MIT */
/*
 * lib/cl/context.c - a context's device layer: one device, one in-order
 * queue, its programs and its memory pool.  The public constructor
 * (lib/context.c) builds this, then puts tuning in force.
 *
 * The clgrad contexts of a process that use the same device share one
 * OpenCL context, each with its own queue, programs and pool.  CLBlast
 * caches the programs it builds per OpenCL context for the life of the
 * process, and each program keeps its context alive: with an OpenCL
 * context per clgrad context, every context that had run CLBlast stayed
 * alive after cg_context_free while another was alive, and on NVIDIA's
 * OpenCL, where each holds device memory, a test that made a few hundred
 * failed clCreateContext with CL_OUT_OF_HOST_MEMORY.  Shared, they stay
 * one per device, and CLBlast builds its programs once for all of them.
 */
#include "config.h"

#include <pthread.h>
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

/* The OpenCL context of each device in use: its clgrad contexts, each
 * of which holds a reference to it. */
#define MAX_SHARED 64
static struct shared_ctx {
    cl_device_id device;
    cl_context context;
    int users;
} shared[MAX_SHARED];
static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;

/* A reference to device's shared OpenCL context, made if there is none
 * (or when the table is full, one of its own). */
static cl_context
context_get(cl_device_id device, cl_int *rc)
{
    cl_context c = NULL;
    int i, free_slot = -1;

    pthread_mutex_lock(&shared_lock);
    for (i = 0; i < MAX_SHARED; i++) {
        if (shared[i].users > 0 && shared[i].device == device) {
            *rc = clRetainContext(shared[i].context);
            if (*rc == CL_SUCCESS) {
                shared[i].users++;
                c = shared[i].context;
            }
            pthread_mutex_unlock(&shared_lock);
            return c;
        }
        if (shared[i].users == 0 && free_slot < 0)
            free_slot = i;
    }
    c = clCreateContext(NULL, 1, &device, NULL, NULL, rc);
    if (c && free_slot >= 0) {
        shared[free_slot].device = device;
        shared[free_slot].context = c;
        shared[free_slot].users = 1;
    }
    pthread_mutex_unlock(&shared_lock);
    return c;
}

/* Gives back a reference that context_get gave. */
static void
context_put(cl_context c)
{
    int i;

    pthread_mutex_lock(&shared_lock);
    for (i = 0; i < MAX_SHARED; i++)
        if (shared[i].users > 0 && shared[i].context == c) {
            shared[i].users--;
            break;
        }
    pthread_mutex_unlock(&shared_lock);
    clReleaseContext(c);
}

cg_context *
cg__context_create(const cg_context_options *opts)
{
    cg_context *ctx = NULL;
    cl_command_queue_properties props = 0;
    cl_int rc;
    long width = 0;
    int index, status, exact, set, wset;

    if (cg__env_flag("CLGRAD_POOL_EXACT", &exact, &set) ||
        cg__env_long("CLGRAD_NATIVE_FLOAT_WIDTH", 1, 64, &width, &wset))
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
    /* The width the tuning's vector widths are narrowed to (lib/tune/
     * apply.c's narrow), as another CPU reports it: make check-valgrind's
     * native pass builds what the tests under valgrind will build
     * (build-aux/valgrind-prepass.sh). */
    if (wset)
        ctx->info.native_width_float = (cl_uint)width;
    status = cg__device_lookup(index, &ctx->platform, &ctx->device);
    if (status)
        goto fail;
    ctx->context = context_get(ctx->device, &rc);
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
        context_put(ctx->context);
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
    context_put(ctx->context);
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
