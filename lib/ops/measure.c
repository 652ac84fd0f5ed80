/* SPDX-License-Identifier: MIT */
/*
 * lib/ops/measure.c - cg_context_measure: the device layer's figures
 * (lib/cl/measure.c) and the SGEMM throughput, measured here through
 * cg__sgemm, the one GEMM entry of the library (clgrad's kernel or
 * CLBlast's, as lib/ops/gemm.c chooses), so that the figure is that of the
 * GEMMs the ops and layers run (the same layout, choice, launch counting
 * and profiling event), and lib/cl never calls CLBlast.
 *
 * Each figure is the best of a few repetitions after a warm-up, so that a
 * kernel build is never what gets measured.
 */
#include "config.h"

#include <string.h>

#include "ops/internal.h"

#define GEMM_N 1024
#define GEMM_REPS 3
#define STR_(x) #x
#define STR(x) STR_(x)

static int
measure_sgemm(cg_context *ctx, cg_measurements *out)
{
    const size_t n = GEMM_N, bytes = n * n * sizeof(float);
    cg_buffer *a, *b = NULL, *c = NULL;
    cg__mat am, bm, cm;
    double t, best = 1e30;
    int i, status = CG_OK;

    a = cg_buffer_new(ctx, bytes);
    b = a ? cg_buffer_new(ctx, bytes) : NULL;
    c = b ? cg_buffer_new(ctx, bytes) : NULL;
    if (!c) {
        status = cg__last_status();
        goto fail;
    }
    CG__CHECK_CL(clEnqueueFillBuffer(ctx->queue, cg__buffer_mem(a),
                                     &(float){ 0.5f }, sizeof(float), 0,
                                     bytes, 0, NULL, NULL),
                 "clEnqueueFillBuffer");
    CG__CHECK_CL(clEnqueueFillBuffer(ctx->queue, cg__buffer_mem(b),
                                     &(float){ 0.25f }, sizeof(float), 0,
                                     bytes, 0, NULL, NULL),
                 "clEnqueueFillBuffer");
    am = (cg__mat){ cg__buffer_mem(a), 0, n };
    bm = (cg__mat){ cg__buffer_mem(b), 0, n };
    cm = (cg__mat){ cg__buffer_mem(c), 0, n };
    for (i = 0; i <= GEMM_REPS; i++) {
        t = cg__now();
        status = cg__sgemm(ctx, 0, 0, n, n, n, 1.0f, am, bm, 0.0f, cm);
        if (status)
            goto fail;
        CG__CHECK_CL(clFinish(ctx->queue), "clFinish");
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
    int status;

    cg__error_clear();
    if (!ctx || !out)
        return cg__error(CG_EINVAL, "%s is NULL", ctx ? "out" : "ctx");
    memset(&m, 0, sizeof m);
    status = cg__measure_device(ctx, which, &m);
    if (status == CG_OK && (which & CG_MEASURE_SGEMM))
        status = measure_sgemm(ctx, &m);
    if (status == CG_OK)
        *out = m;
    return status;
}

const char *
cg_measure_method(cg_figure figure)
{
    if (figure == CG_FIGURE_SGEMM)
        return "SGEMM as clgrad's matmul calls it (clgrad's kernel or "
               "CLBlast's, as chosen for the shape), " STR(GEMM_N) " x "
               STR(GEMM_N) " x " STR(GEMM_N) ", no transposes, launch to "
               "clFinish; 2 n^3 FLOP counted; best of " STR(GEMM_REPS)
               " after a warm-up";
    return cg__measure_method(figure);
}
