/*
 * lib/cl/measure.c - device measurements: transfer and copy bandwidth,
 * launch latency and throughput, CLBlast SGEMM throughput.
 *
 * Each figure is the best of a few repetitions after a warm-up, so that a
 * first-touch page fault or a kernel build is never what gets measured.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <clblast_c.h>

#include "cl/internal.h"

#define BW_BYTES ((size_t)64 << 20)
#define BW_REPS 4
#define LAUNCH_REPS 200
#define QUEUED_LAUNCHES 1000
#define GEMM_N 1024
#define GEMM_REPS 3

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
        return CG_ENOMEM;
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
        status = CG_ENOMEM;
        goto fail;
    }
    ma = cg__buffer_mem(a);
    mb = cg__buffer_mem(b);
    CHECK_CL(clEnqueueFillBuffer(ctx->queue, ma, &(float){ 1.0f },
                                 sizeof(float), 0, BW_BYTES, 0, NULL, NULL),
             "clEnqueueFillBuffer");
    status = cg__args(k, CG_ARG(ma), CG_ARG(mb), CG_ARG(n));
    if (status)
        goto fail;
    for (i = 0; i <= BW_REPS; i++) {
        t = cg__now();
        status = cg__launch(ctx, k, 1, &global, &local, NULL);
        if (status)
            goto fail;
        CHECK_CL(clFinish(ctx->queue), "clFinish");
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
        CHECK_CL(clFinish(ctx->queue), "clFinish");
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
    CHECK_CL(clFinish(ctx->queue), "clFinish");
    out->launch_queued_us = (cg__now() - t) * 1e6 / QUEUED_LAUNCHES;
fail:
    return status;
}

static int
measure_sgemm(cg_context *ctx, cg_measurements *out)
{
    const size_t n = GEMM_N, bytes = n * n * sizeof(float);
    cg_buffer *a, *b = NULL, *c = NULL;
    double t, best = 1e30;
    CLBlastStatusCode rc;
    int i, status = CG_OK;

    a = cg_buffer_new(ctx, bytes);
    b = a ? cg_buffer_new(ctx, bytes) : NULL;
    c = b ? cg_buffer_new(ctx, bytes) : NULL;
    if (!c) {
        status = CG_ENOMEM;
        goto fail;
    }
    CHECK_CL(clEnqueueFillBuffer(ctx->queue, cg__buffer_mem(a),
                                 &(float){ 0.5f }, sizeof(float), 0, bytes,
                                 0, NULL, NULL), "clEnqueueFillBuffer");
    CHECK_CL(clEnqueueFillBuffer(ctx->queue, cg__buffer_mem(b),
                                 &(float){ 0.25f }, sizeof(float), 0, bytes,
                                 0, NULL, NULL), "clEnqueueFillBuffer");
    for (i = 0; i <= GEMM_REPS; i++) {
        t = cg__now();
        /* Column-major, as cg__sgemm calls CLBlast: C = A B row-major
         * is C^T = B^T A^T. */
        rc = CLBlastSgemm(CLBlastLayoutColMajor, CLBlastTransposeNo,
                          CLBlastTransposeNo, n, n, n, 1.0f,
                          cg__buffer_mem(b), 0, n, cg__buffer_mem(a), 0, n,
                          0.0f, cg__buffer_mem(c), 0, n, &ctx->queue, NULL);
        if (rc != CLBlastSuccess) {
            status = cg__error(CG_EUNSUPPORTED, "CLBlastSgemm failed with "
                               "CLBlast status %d", (int)rc);
            goto fail;
        }
        ctx->stats.kernels_enqueued++;
        CHECK_CL(clFinish(ctx->queue), "clFinish");
        t = cg__now() - t;
        if (i > 0 && t < best)
            best = t;
    }
    out->sgemm_gflops = 2.0 * (double)n * n * n / best * 1e-9;
fail:
    cg_buffer_free(a);
    cg_buffer_free(b);
    cg_buffer_free(c);
    return status;
}

int
cg_context_measure(cg_context *ctx, unsigned which, cg_measurements *out)
{
    cg_measurements m;
    int status = CG_OK;

    cg__error_clear();
    if (!ctx || !out)
        return cg__error(CG_EINVAL, "%s is NULL", ctx ? "out" : "ctx");
    memset(&m, 0, sizeof m);
    if (which & CG_MEASURE_BANDWIDTH) {
        status = measure_transfer(ctx, &m);
        if (status == CG_OK)
            status = measure_copy(ctx, &m);
    }
    if (status == CG_OK && (which & CG_MEASURE_LAUNCH))
        status = measure_launch(ctx, &m);
    if (status == CG_OK && (which & CG_MEASURE_SGEMM))
        status = measure_sgemm(ctx, &m);
    if (status == CG_OK)
        *out = m;
    return status;
}
