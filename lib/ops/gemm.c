/* SPDX-License-Identifier: MIT */
/*
 * lib/ops/gemm.c - the one SGEMM entry of the library: every matrix
 * product (matmul, linear layers, the recurrent layers' projections and
 * weight gradients, the measurements) comes here and runs either
 * clgrad's own kernels (kernels/gemm.cl) or CLBlast's, chosen per call
 * by backend_for.
 *
 * Both take row-major operands in place: an offset, a leading dimension
 * and a transpose flag per matrix, a stride between the matrices of a
 * batch (0: one matrix for all).  CLBlast is asked for the column-major
 * transposed problem (C^T = op(B)^T op(A)^T, the same memory), which
 * spares its row-major path a transposed copy of C.
 *
 * The choice: CLGRAD_GEMM=clblast|clgrad|auto in the environment (read at
 * a context's first product; anything else fails that product with a
 * message), or cg__gemm_force, fixes it; otherwise (auto) backend_for's
 * rule, from measurements on PoCL (see there), unless clgrad's kernels
 * cannot index the operands with ints, where CLBlast runs.
 */
#include "config.h"

#include <clblast_c.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "ops/internal.h"

/* Turns a CLBlast status into a clgrad error.  CLBlast reuses OpenCL's
 * codes (above -1000) for OpenCL failures; its own codes below mean that
 * clgrad passed something CLBlast rejects, or the device lacks something. */
static int
clblast_fail(CLBlastStatusCode rc, const char *what)
{
    const char *why;

    if (rc > -1000)
        return cg__cl_fail((cl_int)rc, what);
    switch (rc) {
    case CLBlastNotImplemented: why = "not implemented"; break;
    case CLBlastInvalidDimension: why = "invalid dimension"; break;
    case CLBlastInvalidLeadDimA: case CLBlastInvalidLeadDimB:
    case CLBlastInvalidLeadDimC: why = "invalid leading dimension"; break;
    case CLBlastInsufficientMemoryA: case CLBlastInsufficientMemoryB:
    case CLBlastInsufficientMemoryC: why = "buffer too small"; break;
    case CLBlastInvalidLocalMemUsage: why = "not enough local memory"; break;
    case CLBlastDatabaseError: why = "no tuning entry for this device"; break;
    default: why = "CLBlast error"; break;
    }
    return cg__error(rc >= CLBlastInvalidDimension &&
                     rc <= CLBlastInsufficientMemoryY ? CG_EINVAL
                     : CG_EUNSUPPORTED, "%s failed: %s (CLBlast status %d)",
                     what, why, (int)rc);
}

void
cg__gemm_force(cg_context *ctx, cg__gemm_backend b)
{
    ctx->gemm_backend = (int)b;
}

/* The backend CLGRAD_GEMM names, once per context. */
static int
backend_mode(cg_context *ctx)
{
    const char *e;

    if (ctx->gemm_backend)
        return CG_OK;
    e = getenv("CLGRAD_GEMM");
    if (!e || !*e || strcmp(e, "auto") == 0)
        ctx->gemm_backend = CG__GEMM_AUTO;
    else if (strcmp(e, "clblast") == 0)
        ctx->gemm_backend = CG__GEMM_CLBLAST;
    else if (strcmp(e, "clgrad") == 0)
        ctx->gemm_backend = CG__GEMM_CLGRAD;
    else
        return cg__error(CG_EINVAL, "CLGRAD_GEMM=%s: expected auto, "
                         "clblast or clgrad", e);
    return CG_OK;
}

/* Whether every element clgrad's kernel reads or writes of one operand
 * (rows x cols stored, leading dimension ld) has an int index. */
static int
fits_int(cg__mat x, size_t stride, size_t batch, size_t rows, size_t cols)
{
    double last;

    if (rows == 0 || cols == 0)
        return 1;
    last = (double)x.off + (double)stride * (double)(batch - 1) +
           (double)x.ld * (double)(rows - 1) + (double)cols;

    return last < (double)INT_MAX && x.ld < (size_t)INT_MAX &&
           stride < (size_t)INT_MAX;
}

/* Which backend runs this product when the choice is automatic.  From
 * tests/bench_gemm on a 2-core PoCL 3.1 CPU (AVX2), under the load of
 * other jobs (GFLOP/s clgrad / CLBlast, same run): clgrad's kernels win
 * at every shape of the recurrent and linear layers of the tools' jobs
 * (char-LSTM 1600x512x64 NT 64/52 packed, 1600x77x128 NT 43/5,
 * 1600x128x77 NN 106/34, 77x128x1600 TN 90/24, 512x128x1600 TN 49/42;
 * MLP 128x784x512 NN 82/31, 512x784x128 TN 136/44, 128x10x512 NT 17/1;
 * 32x2048x512 NN 56/9), and at 1024^3 NN and NT (51/30, 90/49) and
 * 2048x3200x512 NN (151/76).
 * Without blocking over K they fall behind on long K: op(A) transposed
 * with K >= 1024 over a large C (1024^3 TN 32/49, 3200x512x2048 TN 29/78)
 * and NN or NT at K >= 2048 (2048^3 NN 50/64, 2048x512x3200 NT 51/57);
 * CLBlast runs those.  TT reads
 * op(B) lane by lane (128x512x256 17/24, 512^3 17/41): CLBlast from
 * 2^21 multiply-adds up.  So a first run of the tools' small jobs never
 * builds CLBlast's programs. */
static cg__gemm_backend
backend_for(int ta, int tb, size_t m, size_t n, size_t k)
{
    double mn = (double)m * (double)n;

    if (ta && tb && mn * (double)k >= 2097152.0)
        return CG__GEMM_CLBLAST;
    if (ta && k >= 1024 && mn >= 262144.0)
        return CG__GEMM_CLBLAST;
    if (!ta && k >= 2048 && mn >= 1048576.0)
        return CG__GEMM_CLBLAST;
    return CG__GEMM_CLGRAD;
}

static int
clblast_run(cg_context *ctx, int ta, int tb, size_t m, size_t n, size_t k,
            float alpha, cg__mat a, size_t sa, cg__mat b, size_t sb,
            float beta, cg__mat c, size_t sc, size_t batch)
{
    CLBlastTranspose opa = ta ? CLBlastTransposeYes : CLBlastTransposeNo;
    CLBlastTranspose opb = tb ? CLBlastTransposeYes : CLBlastTransposeNo;
    CLBlastStatusCode rc;
    cl_event ev = NULL;

    /* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T:
     * the same memory, asked for in CLBlast's own layout.  CLBlast's
     * row-major path copies C through a transposed temporary (in and
     * out); this way it does not, which made the LSTM's input projection
     * 1.6-2.4x faster on PoCL. */
    if (cg__fault(CG__FAULT_LAUNCH))
        return clblast_fail(CLBlastOpenCLOutOfResources,
                            batch == 1 ? "CLBlastSgemm"
                            : "CLBlastSgemmStridedBatched");
    if (batch == 1)
        rc = CLBlastSgemm(CLBlastLayoutColMajor, opb, opa, n, m, k, alpha,
                          b.mem, b.off, b.ld, a.mem, a.off, a.ld, beta,
                          c.mem, c.off, c.ld, &ctx->queue,
                          ctx->profiling ? &ev : NULL);
    else
        rc = CLBlastSgemmStridedBatched(CLBlastLayoutColMajor, opb, opa, n,
                                        m, k, alpha, b.mem, b.off, b.ld, sb,
                                        a.mem, a.off, a.ld, sa, beta, c.mem,
                                        c.off, c.ld, sc, batch, &ctx->queue,
                                        ctx->profiling ? &ev : NULL);
    if (rc != CLBlastSuccess)
        return clblast_fail(rc, batch == 1 ? "CLBlastSgemm"
                            : "CLBlastSgemmStridedBatched");
    ctx->stats.kernels_enqueued++;
    return ev ? cg__profile_event(ctx, ev, batch == 1 ? "clblast.sgemm"
                                  : "clblast.sgemm_batched") : CG_OK;
}

/* Whether an NT product runs as NN on a packed B^T (gemm_tpose): short K
 * over many rows, one B for the whole batch.  At 1600x512x64 (the
 * char-LSTM's input projection) gemm_nt gave 25 GFLOP/s, CLBlast 52, the
 * packed copy and gemm 64. */
static int
pack_nt(int ta, int tb, size_t m, size_t n, size_t k, size_t sb,
        size_t batch)
{
    return !ta && tb && k > 0 && k <= 128 && m >= 256 && m >= n / 4 &&
           (batch == 1 || sb == 0);
}

static int clgrad_run(cg_context *ctx, int ta, int tb, size_t m, size_t n,
                      size_t k, float alpha, cg__mat a, size_t sa, cg__mat b,
                      size_t sb, float beta, cg__mat c, size_t sc,
                      size_t batch);

/* The NT product through a packed copy of B^T (a pool buffer, freed once
 * the product is enqueued: the queue is in order). */
static int
clgrad_run_packed(cg_context *ctx, size_t m, size_t n, size_t k, float alpha,
                  cg__mat a, size_t sa, cg__mat b, float beta, cg__mat c,
                  size_t sc, size_t batch)
{
    cl_int so = (cl_int)b.off, lds = (cl_int)b.ld;
    cl_int rows = (cl_int)n, cols = (cl_int)k;
    cg_buffer *t = cg_buffer_new(ctx, n * k * sizeof(float));
    cl_mem tm;
    cl_kernel kn;
    int status;

    if (!t)
        return cg__last_status();
    tm = cg__buffer_mem(t);
    status = cg__kernel(ctx, CG__K_GEMM_TPOSE, &kn);
    if (status == CG_OK)
        status = cg__args(kn, CG__ARG(b.mem), CG__ARG(so), CG__ARG(lds),
                          CG__ARG(rows), CG__ARG(cols), CG__ARG(tm));
    if (status == CG_OK)
        status = cg__launch1d(ctx, kn, n * k,
                              (size_t)cg__param(ctx, CG__P_GEMM_WG));
    if (status == CG_OK) {
        cg__mat bt = { tm, 0, n };

        status = clgrad_run(ctx, 0, 0, m, n, k, alpha, a, sa, bt, 0, beta,
                            c, sc, batch);
    }
    cg_buffer_free(t);
    return status;
}

static int
clgrad_run(cg_context *ctx, int ta, int tb, size_t m, size_t n, size_t k,
           float alpha, cg__mat a, size_t sa, cg__mat b, size_t sb,
           float beta, cg__mat c, size_t sc, size_t batch)
{
    cl_int M = (cl_int)m, N = (cl_int)n, K = (cl_int)k;
    cl_int ao = (cl_int)a.off, bo = (cl_int)b.off, co = (cl_int)c.off;
    cl_int lda = (cl_int)a.ld, ldb = (cl_int)b.ld, ldc = (cl_int)c.ld;
    cl_int sab = (cl_int)sa, sbb = (cl_int)sb, scb = (cl_int)sc;
    size_t wg = (size_t)cg__param(ctx, CG__P_GEMM_WG), tm, tn, tiles;
    size_t global[2], local[2] = { wg, 1 };
    cl_kernel kn;
    int status;

    if (pack_nt(ta, tb, m, n, k, sb, batch))
        return clgrad_run_packed(ctx, m, n, k, alpha, a, sa, b, beta, c, sc,
                                 batch);
    if (!ta && tb) {
        tm = (size_t)cg__param(ctx, CG__P_GEMM_DTM);
        tn = (size_t)cg__param(ctx, CG__P_GEMM_DTN);
        if ((status = cg__kernel(ctx, CG__K_GEMM_NT, &kn)) ||
            (status = cg__args(kn, CG__ARG(M), CG__ARG(N), CG__ARG(K),
                               CG__ARG(alpha), CG__ARG(a.mem), CG__ARG(ao),
                               CG__ARG(lda), CG__ARG(sab), CG__ARG(b.mem),
                               CG__ARG(bo), CG__ARG(ldb), CG__ARG(sbb),
                               CG__ARG(beta), CG__ARG(c.mem), CG__ARG(co),
                               CG__ARG(ldc), CG__ARG(scb))))
            return status;
    } else {
        cl_int sam = ta ? 1 : lda, sak = ta ? lda : 1;
        cl_int sbk = tb ? 1 : ldb, sbn = tb ? ldb : 1;

        tm = (size_t)cg__param(ctx, CG__P_GEMM_TM);
        tn = (size_t)(cg__param(ctx, CG__P_GEMM_TN) *
                      cg__param(ctx, CG__P_GEMM_VW));
        if ((status = cg__kernel(ctx, CG__K_GEMM, &kn)) ||
            (status = cg__args(kn, CG__ARG(M), CG__ARG(N), CG__ARG(K),
                               CG__ARG(alpha), CG__ARG(a.mem), CG__ARG(ao),
                               CG__ARG(sam), CG__ARG(sak), CG__ARG(sab),
                               CG__ARG(b.mem), CG__ARG(bo), CG__ARG(sbk),
                               CG__ARG(sbn), CG__ARG(sbb), CG__ARG(beta),
                               CG__ARG(c.mem), CG__ARG(co), CG__ARG(ldc),
                               CG__ARG(scb))))
            return status;
    }
    tiles = ((m + tm - 1) / tm) * ((n + tn - 1) / tn);
    global[0] = (tiles + wg - 1) / wg * wg;
    global[1] = batch;
    return cg__launch(ctx, kn, 2, global, local, NULL);
}

int
cg__sgemm_batched(cg_context *ctx, int ta, int tb, size_t m, size_t n,
                  size_t k, float alpha, cg__mat a, size_t sa, cg__mat b,
                  size_t sb, float beta, cg__mat c, size_t sc, size_t batch)
{
    cg__gemm_backend use;
    int status;

    if ((status = backend_mode(ctx)))
        return status;
    if (m == 0 || n == 0 || batch == 0)
        return CG_OK;
    use = ctx->gemm_backend == CG__GEMM_AUTO
        ? backend_for(ta, tb, m, n, k)
        : (cg__gemm_backend)ctx->gemm_backend;
    if (k == 0)     /* C = beta C, which CLBlast refuses */
        use = CG__GEMM_CLGRAD;
    if (use == CG__GEMM_CLGRAD &&
        (k >= (size_t)INT_MAX ||
         !fits_int(a, sa, batch, ta ? k : m, ta ? m : k) ||
         !fits_int(b, sb, batch, tb ? n : k, tb ? k : n) ||
         !fits_int(c, sc, batch, m, n)))
        use = CG__GEMM_CLBLAST;
    if (use == CG__GEMM_CLGRAD)
        return clgrad_run(ctx, ta != 0, tb != 0, m, n, k, alpha, a, sa, b,
                          sb, beta, c, sc, batch);
    return clblast_run(ctx, ta, tb, m, n, k, alpha, a, sa, b, sb, beta, c,
                       sc, batch);
}

int
cg__sgemm(cg_context *ctx, int ta, int tb, size_t m, size_t n, size_t k,
          float alpha, cg__mat a, cg__mat b, float beta, cg__mat c)
{
    return cg__sgemm_batched(ctx, ta, tb, m, n, k, alpha, a, 0, b, 0, beta,
                             c, 0, 1);
}
