/* SPDX-License-Identifier: MIT */
/*
 * lib/cl/measure.c - the device layer's measurements: transfer and copy
 * bandwidth, launch latency and throughput.  CLBlast's SGEMM throughput is
 * measured above, through the ops (lib/ops/measure.c), which also holds
 * cg_context_measure.
 *
 * Each figure is the best of a few repetitions after a warm-up, so that a
 * first-touch page fault or a kernel build is never what gets measured.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "cl/internal.h"

/* Written out again, as text, in the methods below. */
#define BW_MIB 64
#define BW_BYTES ((size_t)BW_MIB << 20)
#define BW_REPS 4
#define LAUNCH_REPS 200
#define QUEUED_LAUNCHES 1000
#define FMA_ITEMS_PER_CU 2048   /* work-items per compute unit */
#define FMA_MIN_MS 100          /* iterations double until a run is this long */
#define FMA_REPS 5

#define STR_(x) #x
#define STR(x) STR_(x)

static const char *const methods[] = {
    [CG_FIGURE_H2D] = "one blocking clEnqueueWriteBuffer of " STR(BW_MIB)
        " MiB from malloc'd host memory, timed on the host; " STR(BW_MIB)
        " MiB counted; best of " STR(BW_REPS) " after a warm-up",
    [CG_FIGURE_D2H] = "one blocking clEnqueueReadBuffer of " STR(BW_MIB)
        " MiB into malloc'd host memory, timed on the host; " STR(BW_MIB)
        " MiB counted; best of " STR(BW_REPS) " after a warm-up",
    [CG_FIGURE_COPY] = "kernel copy4, one float4 per work-item, "
        STR(BW_MIB) " MiB buffer to buffer, launch to clFinish; bytes read "
        "+ written counted (2 x " STR(BW_MIB) " MiB); best of " STR(BW_REPS)
        " after a warm-up",
    [CG_FIGURE_LAUNCH_LATENCY] = "an empty kernel of one work-item, "
        "enqueue to clFinish on the host; best of " STR(LAUNCH_REPS)
        " after a warm-up",
    [CG_FIGURE_LAUNCH_QUEUED] = STR(QUEUED_LAUNCHES) " empty one-work-item "
        "kernels enqueued back to back, then one clFinish; total / "
        STR(QUEUED_LAUNCHES) ", one run",
    [CG_FIGURE_FP32_FMA] = "kernels fma_peak (mad) and fma_peak_fused "
        "(fma), " STR(FMA_ITEMS_PER_CU) " work-items per compute unit in "
        "groups of 64, each 64 independent chains of float multiply-adds "
        "(8 float8), 2 FLOP each; iterations doubled until a run takes "
        STR(FMA_MIN_MS) " ms, launch to clFinish; best of " STR(FMA_REPS)
        " after those runs, the faster kernel",
};

const char *
cg__measure_method(cg_figure figure)
{
    if ((unsigned)figure >= sizeof methods / sizeof methods[0] ||
        !methods[figure])
        return "";
    return methods[figure];
}

int
cg_context_work_group_multiple(cg_context *ctx, size_t *multiple)
{
    cl_kernel k;
    int status;

    cg__error_clear();
    if (!ctx || !multiple)
        return cg__error(CG_EINVAL, "%s is NULL", ctx ? "multiple" : "ctx");
    *multiple = 0;
    status = cg__kernel(ctx, CG__K_COPY4, &k);
    if (status)
        return status;
    CG__CHECK_CL(clGetKernelWorkGroupInfo(k, ctx->device,
                     CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE,
                     sizeof *multiple, multiple, NULL),
                 "clGetKernelWorkGroupInfo");
fail:
    return status;
}

static int
measure_transfer(cg_context *ctx, cg_measurements *out)
{
    cg_buffer *buf;
    void *host;
    double t, best_w = 1e30, best_r = 1e30;
    int i, status = CG_OK;

    host = cg__malloc(BW_BYTES);
    if (!host)
        return CG_EHOSTMEM;
    memset(host, 1, BW_BYTES);
    buf = cg_buffer_new(ctx, BW_BYTES);
    if (!buf) {
        free(host);
        return cg__last_status();
    }
    for (i = 0; i <= BW_REPS && status == CG_OK; i++) {
        t = cg__now();
        status = cg_buffer_write(buf, 0, host, BW_BYTES);
        t = cg__now() - t;
        if (i > 0 && t < best_w)
            best_w = t;
        t = cg__now();
        if (status == CG_OK)
            status = cg_buffer_read(buf, 0, host, BW_BYTES);
        t = cg__now() - t;
        if (i > 0 && t < best_r)
            best_r = t;
    }
    if (status == CG_OK) {
        out->h2d_gbps = (double)BW_BYTES / best_w * 1e-9;
        out->d2h_gbps = (double)BW_BYTES / best_r * 1e-9;
    }
    cg_buffer_free(buf);
    free(host);
    return status;
}

/* Seconds from enqueueing a 1-D launch of k to its end (clFinish). */
static int
timed_launch(cg_context *ctx, cl_kernel k, size_t global, size_t local,
             double *seconds)
{
    double t = cg__now();
    int status = cg__launch(ctx, k, 1, &global, &local, NULL);

    if (status)
        return status;
    CG__CHECK_CL(clFinish(ctx->queue), "clFinish");
    *seconds = cg__now() - t;
fail:
    return status;
}

static int
measure_copy(cg_context *ctx, cg_measurements *out)
{
    cg_buffer *a = NULL, *b = NULL;
    cl_kernel k;
    cl_mem ma, mb;
    cl_uint n = (cl_uint)(BW_BYTES / 16);
    size_t local = 64, global = ((size_t)n + 63) / 64 * 64;
    double t, best = 1e30;
    int i, status;

    status = cg__kernel(ctx, CG__K_COPY4, &k);
    if (status)
        return status;
    a = cg_buffer_new(ctx, BW_BYTES);
    b = a ? cg_buffer_new(ctx, BW_BYTES) : NULL;
    if (!b) {
        status = cg__last_status();
        goto fail;
    }
    ma = cg__buffer_mem(a);
    mb = cg__buffer_mem(b);
    CG__CHECK_CL(clEnqueueFillBuffer(ctx->queue, ma, &(float){ 1.0f },
                                     sizeof(float), 0, BW_BYTES, 0, NULL,
                                     NULL),
                 "clEnqueueFillBuffer");
    status = cg__args(k, CG__ARG(ma), CG__ARG(mb), CG__ARG(n));
    if (status)
        goto fail;
    for (i = 0; i <= BW_REPS; i++) {
        status = timed_launch(ctx, k, global, local, &t);
        if (status)
            goto fail;
        if (i > 0 && t < best)
            best = t;
    }
    out->copy_gbps = 2.0 * (double)BW_BYTES / best * 1e-9;
fail:
    cg_buffer_free(a);
    cg_buffer_free(b);
    return status;
}

static int
measure_launch(cg_context *ctx, cg_measurements *out)
{
    cl_kernel k;
    size_t one = 1;
    double t, best = 1e30;
    int i, status;

    status = cg__kernel(ctx, CG__K_EMPTY, &k);
    if (status)
        return status;
    for (i = 0; i <= LAUNCH_REPS; i++) {
        status = timed_launch(ctx, k, one, one, &t);
        if (status)
            goto fail;
        if (i > 0 && t < best)
            best = t;
    }
    out->launch_latency_us = best * 1e6;
    t = cg__now();
    for (i = 0; i < QUEUED_LAUNCHES; i++) {
        status = cg__launch(ctx, k, 1, &one, &one, NULL);
        if (status)
            goto fail;
    }
    CG__CHECK_CL(clFinish(ctx->queue), "clFinish");
    out->launch_queued_us = (cg__now() - t) * 1e6 / QUEUED_LAUNCHES;
fail:
    return status;
}

/* One timed fma_peak launch of `iters` iterations into m. */
static int
fma_run(cg_context *ctx, cl_kernel k, cl_mem m, size_t global, cl_uint iters,
        double *seconds)
{
    const cl_float c = 0.999f, d = 0.001f;
    int status;

    status = cg__args(k, CG__ARG(m), CG__ARG(iters), CG__ARG(c), CG__ARG(d));
    return status ? status : timed_launch(ctx, k, global, 64, seconds);
}

/* The faster of fma_peak (mad) and fma_peak_fused (fma): which one a
 * device runs as one fused instruction differs. */
static int
measure_fma(cg_context *ctx, cg_measurements *out)
{
    static const cg__kid kid[2] = { CG__K_FMA_PEAK, CG__K_FMA_PEAK_FUSED };
    size_t global = (size_t)(ctx->info.compute_units ?
                             ctx->info.compute_units : 1) * FMA_ITEMS_PER_CU;
    cg_buffer *buf;
    cl_kernel k;
    cl_mem m;
    double t = 0, best_gflops = 0;
    int v, i, status = CG_OK;

    buf = cg_buffer_new(ctx, global * sizeof(float));
    if (!buf)
        return cg__last_status();
    m = cg__buffer_mem(buf);
    for (v = 0; v < 2 && status == CG_OK; v++) {
        cl_uint iters = 64;
        double best = 1e30;

        if ((status = cg__kernel(ctx, kid[v], &k)))
            break;
        /* Doubling the iterations until a run is long enough is the
         * warm-up too (cg__kernel has built the kernel). */
        while ((status = fma_run(ctx, k, m, global, iters, &t)) == CG_OK &&
               t < FMA_MIN_MS * 1e-3 && iters < (1u << 24))
            iters *= 2;
        for (i = 0; i < FMA_REPS && status == CG_OK; i++) {
            status = fma_run(ctx, k, m, global, iters, &t);
            if (t < best)
                best = t;
        }
        if (status == CG_OK &&
            128.0 * (double)global * iters / best * 1e-9 > best_gflops)
            best_gflops = 128.0 * (double)global * iters / best * 1e-9;
    }
    if (status == CG_OK)
        out->fp32_fma_gflops = best_gflops;
    cg_buffer_free(buf);
    return status;
}

int
cg__measure_device(cg_context *ctx, unsigned which, cg_measurements *out)
{
    int status = CG_OK;

    if (which & CG_MEASURE_BANDWIDTH) {
        status = measure_transfer(ctx, out);
        if (status == CG_OK)
            status = measure_copy(ctx, out);
    }
    if (status == CG_OK && (which & CG_MEASURE_LAUNCH))
        status = measure_launch(ctx, out);
    if (status == CG_OK && (which & CG_MEASURE_FMA))
        status = measure_fma(ctx, out);
    return status;
}
