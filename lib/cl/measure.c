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

#define BW_BYTES ((size_t)64 << 20)
#define BW_REPS 4
#define LAUNCH_REPS 200
#define QUEUED_LAUNCHES 1000

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
                                 sizeof(float), 0, BW_BYTES, 0, NULL, NULL),
             "clEnqueueFillBuffer");
    status = cg__args(k, CG__ARG(ma), CG__ARG(mb), CG__ARG(n));
    if (status)
        goto fail;
    for (i = 0; i <= BW_REPS; i++) {
        t = cg__now();
        status = cg__launch(ctx, k, 1, &global, &local, NULL);
        if (status)
            goto fail;
        CG__CHECK_CL(clFinish(ctx->queue), "clFinish");
        t = cg__now() - t;
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
        t = cg__now();
        status = cg__launch(ctx, k, 1, &one, &one, NULL);
        if (status)
            goto fail;
        CG__CHECK_CL(clFinish(ctx->queue), "clFinish");
        t = cg__now() - t;
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
    return status;
}
