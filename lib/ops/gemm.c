/* SPDX-License-Identifier: MIT */
/*
 * lib/ops/gemm.c - the one GEMM entry of the library: every matrix
 * product (matmul, linear layers, the recurrent layers' projections and
 * weight gradients, the measurements) comes here and runs either
 * clgrad's own kernels or CLBlast's, chosen per call by backend_for;
 * clgrad's kernels are those of kernels/gemm.cl, or for large products
 * those of kernels/gemm_pack.cl over operands packed first into
 * cache-sized micro-panels (the packed backend, chosen by packed_rule).
 *
 * Operands of 16-bit storage (cg__gemm_dt: A and B float16 or bfloat16,
 * C and the bias theirs or float32) are always summed in float32, never
 * by CLBlast's HGEMM, which sums in half (and PoCL and NVIDIA refuse it).
 * Where the float32 product would run on CLBlast, they run on its SGEMM
 * through float32 copies (gemm_widen); on the packed backend, packed from
 * their own storage; else on gemm.cl's kernels in the storage variant for
 * the pair (gemm.cl's CG_T and CG_TO), read in place or through float32
 * copies where widen_rule says that is faster.  CLBlast and the packed
 * kernels write a 16-bit C through a float32 scratch C and
 * kernels/gemm_narrow.cl, which adds the epilogue and rounds once.
 *
 * Both take row-major operands in place: an offset, a leading dimension
 * and a transpose flag per matrix, a stride between the matrices of a
 * batch (0: one matrix for all).  clgrad's kernels also add a bias vector
 * to C's rows in their epilogue (cg__sgemm_bias, the linear layer);
 * CLBlast's do not, and its caller adds it.  CLBlast is asked for the column-major
 * transposed problem (C^T = op(B)^T op(A)^T, the same memory), which
 * spares its row-major path a transposed copy of C.
 *
 * The choice: CLGRAD_GEMM=clblast|clgrad|packed|auto in the environment
 * (read at a context's first product; anything else fails that product
 * with a message), or cg__gemm_force, fixes it (clgrad: gemm.cl's kernels
 * only); otherwise (auto) the class's tuning entry or backend_for's rule,
 * from measurements on PoCL (see there), then, where clgrad's kernels
 * run, the entry's "packed" or packed_rule; CLBlast runs where clgrad's
 * kernels cannot index the operands with ints.
 */
#include "config.h"

#include <clblast_c.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/internal.h"
#include "tune/internal.h"

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

/* ------------------------------------------------------------ classes */

/* gemm.cl's tunables, in the kernel table's order. */
static const cg__pid gemm_pid[7] = {
    CG__P_GEMM_VW, CG__P_GEMM_TM, CG__P_GEMM_TN, CG__P_GEMM_DVW,
    CG__P_GEMM_DTM, CG__P_GEMM_DTN, CG__P_GEMM_WG
};
enum { P_VW, P_TM, P_TN, P_DVW, P_DTM, P_DTN, P_WG };
enum { K_GEMM, K_NT, K_TPOSE, K_WIDEN, NK };
static const cg__kid gemm_kid[NK] = {
    CG__K_GEMM, CG__K_GEMM_NT, CG__K_GEMM_TPOSE, CG__K_GEMM_WIDEN
};
/* The storage variants of gemm.cl's kernels, operands -> C: float32
 * (the SGEMM), the 16-bit ones to themselves (CG_T = CG_TO, which
 * cg__kernel_dt builds), 16-bit to float32, and float32 (widened 16-bit
 * operands) to 16-bit.  The value is common.cl's dtype code, CG_T and
 * CG_TO: (v_t[v], v_to[v]). */
enum { V_F32, V_F16, V_BF16, V_F16_F32, V_BF16_F32, V_F32_F16, V_F32_BF16,
       NVAR };
static const int v_t[NVAR] = { 0, 1, 2, 1, 2, 0, 0 };
static const int v_to[NVAR] = { 0, 1, 2, 0, 0, 1, 2 };

/* How products of one shape class run: the tuning entry of the class
 * ("gemm", "NT.skinny", ...) if one is in force, else the context's
 * parameters (built-in, or a whole-file "gemm" entry) and backend_for's
 * rule.  With parameters of its own a class has kernels of its own, built
 * with its -D options (the program cache shares a program among classes
 * of the same values). */
typedef struct gemm_cfg {
    int resolved;
    int backend;            /* -1: backend_for's rule; else CG__GEMM_* */
    int pack;               /* NT: -1 pack_nt's rule; 0 in place (gemm_nt,
                             * DVW DTM DTN); 1 on a packed B^T (gemm_tpose,
                             * then gemm: VW TM TN) */
    int packed;             /* where clgrad's kernels run: -1 packed_rule;
                             * 0 gemm.cl's; 1 gemm_pack.cl's (the packed
                             * backend) */
    int own;                /* k[] built with opts, not the context's */
    long p[7];
    char opts[160];         /* the -D options of p */
    cl_kernel k[NVAR][NK];  /* what cfg_kernel built (per storage variant) */
} gemm_cfg;

/* Owned by the context (ctx->gemm_classes), made on the first product,
 * released by cg__gemm_classes_free; out of date once the entries in
 * force change (ctx->tuning_gen). */
struct cg__gemm_classes {
    unsigned gen;
    int widen;              /* 16-bit operands: -1 widen_rule, 0 never
                             * widened, 1 always (cg__gemm_widen_force) */
    gemm_cfg c[CG__GEMM_NCLASSES];
    int clblast_user;       /* has run CLBlast: counted in clblast_users */
};

/* CLBlast keeps the programs it builds in a process-wide cache, and each
 * program holds its OpenCL context, which would so outlive the last
 * clgrad context using it (lib/cl/context.c shares one per device).  On
 * NVIDIA's OpenCL every context holds device and host memory.  CLBlast's
 * C API clears its cache only as a whole (CLBlastClearCache), so that is
 * done when the last live context that has run CLBlast is freed: live
 * contexts never lose their programs. */
static pthread_mutex_t clblast_lock = PTHREAD_MUTEX_INITIALIZER;
static int clblast_users;

int
cg__gemm_clblast_users(void)
{
    int n;

    pthread_mutex_lock(&clblast_lock);
    n = clblast_users;
    pthread_mutex_unlock(&clblast_lock);
    return n;
}

static void
classes_release(struct cg__gemm_classes *g)
{
    int c, i, v;

    for (c = 0; c < CG__GEMM_NCLASSES; c++) {
        for (v = 0; v < NVAR; v++)
            for (i = 0; i < NK; i++)
                if (g->c[c].k[v][i])
                    clReleaseKernel(g->c[c].k[v][i]);
        memset(&g->c[c], 0, sizeof g->c[c]);
    }
}

void
cg__gemm_classes_free(cg_context *ctx)
{
    if (!ctx || !ctx->gemm_classes)
        return;
    if (ctx->gemm_classes->clblast_user) {
        pthread_mutex_lock(&clblast_lock);
        if (--clblast_users == 0)
            CLBlastClearCache();
        pthread_mutex_unlock(&clblast_lock);
    }
    classes_release(ctx->gemm_classes);
    free(ctx->gemm_classes);
    ctx->gemm_classes = NULL;
}

/* The configuration of class cls in force on ctx. */
static int
class_cfg(cg_context *ctx, int cls, gemm_cfg **out)
{
    struct cg__gemm_classes *g = ctx->gemm_classes;
    const cg_tuning_entry *e;
    gemm_cfg *cfg;
    char name[32];
    size_t n = 0;
    long v;
    int i;

    if (!g) {
        if (!(g = cg__calloc(1, sizeof *g)))
            return CG_EHOSTMEM;
        g->gen = ctx->tuning_gen;
        g->widen = -1;
        ctx->gemm_classes = g;
    }
    if (g->gen != ctx->tuning_gen) {
        classes_release(g);
        g->gen = ctx->tuning_gen;
    }
    cfg = &g->c[cls];
    *out = cfg;
    if (cfg->resolved)
        return CG_OK;
    e = cg__tuning_find(ctx, "gemm",
                        cg__gemm_class_name(cls, name, sizeof name));
    cfg->backend = -1;
    for (i = 0; i < 7; i++) {
        cfg->p[i] = cg__param(ctx, gemm_pid[i]);
        if (e && cg__tuning_param(e, cg__param_table[gemm_pid[i]].name, &v)
            && v != cfg->p[i]) {
            cfg->p[i] = v;
            cfg->own = 1;
        }
    }
    if (e && cg__tuning_param(e, "clblast", &v))
        cfg->backend = v ? CG__GEMM_CLBLAST : CG__GEMM_CLGRAD;
    cfg->packed = -1;
    if (e && cg__tuning_param(e, "packed", &v))
        cfg->packed = v != 0;
    cfg->pack = -1;
    if (e && cg__tuning_param(e, "pack", &v))
        cfg->pack = v != 0;
    /* the same options as the context's own for these values */
    for (i = 0; i < 7; i++)
        n += (size_t)snprintf(cfg->opts + n, sizeof cfg->opts - n,
                              "%s-D%s=%ld", i ? " " : "",
                              cg__param_table[gemm_pid[i]].name, cfg->p[i]);
    cfg->resolved = 1;
    return CG_OK;
}

int
cg__gemm_class_params(cg_context *ctx, int cls, long p[7], int *backend)
{
    gemm_cfg *cfg;
    int status, i;

    if (cls < 0 || cls >= CG__GEMM_NCLASSES)
        return cg__error(CG_EINVAL, "GEMM class %d (0 to %d)", cls,
                         CG__GEMM_NCLASSES - 1);
    if ((status = class_cfg(ctx, cls, &cfg)))
        return status;
    for (i = 0; i < 7; i++)
        p[i] = cfg->p[i];
    *backend = cfg->backend;
    return CG_OK;
}

/* The storage variant for operands of dtype ab and C of dtype cd. */
static int
variant(cg_dtype ab, cg_dtype cd)
{
    int t = ab == CG_F16 ? 1 : ab == CG_BF16 ? 2 : 0;
    int to = cd == CG_F16 ? 1 : cd == CG_BF16 ? 2 : 0, v;

    for (v = 0; v < NVAR - 1; v++)
        if (v_t[v] == t && v_to[v] == to)
            break;
    return v;
}

/* The variant of v's operands to themselves (the copies' kernels). */
static int
operand_variant(int v)
{
    return v_t[v];      /* V_F32, V_F16, V_BF16 are 0, 1, 2 */
}

/* Kernel `which` of cfg in storage variant v: the context's own (where
 * the class has no parameters of its own and the variant is one of
 * cg__kernel_dt's), else built with cfg's options and the variant's. */
static int
cfg_kernel(cg_context *ctx, gemm_cfg *cfg, int v, int which, cl_kernel *out)
{
    static const cg_dtype vdt[3] = { CG_F32, CG_F16, CG_BF16 };
    char opts[sizeof cfg->opts + 32];
    int status;

    if (!cfg->own && v <= V_BF16)
        return cg__kernel_dt(ctx, gemm_kid[which], vdt[v], out);
    if (!cfg->k[v][which]) {
        if (v == V_F32)
            snprintf(opts, sizeof opts, "%s", cfg->opts);
        else
            snprintf(opts, sizeof opts, "%s -DCG_T=%d -DCG_TO=%d", cfg->opts,
                     v_t[v], v_to[v]);
        if ((status = cg__kernel_create(ctx, gemm_kid[which], opts,
                                        &cfg->k[v][which])))
            return status;
    }
    *out = cfg->k[v][which];
    return CG_OK;
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
    else if (strcmp(e, "packed") == 0)
        ctx->gemm_backend = CG__GEMM_PACKED;
    else
        return cg__error(CG_EINVAL, "CLGRAD_GEMM=%s: expected auto, "
                         "clblast, clgrad or packed", e);
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

/* Whether an NT product with no "pack" in its class's entry runs as NN on
 * a packed B^T (gemm_tpose, then gemm).  The copy costs a pass over B (N K
 * floats each way) beside M N K multiply-adds, so it pays from a few rows
 * per column of K up.  From tests/bench_gemm -n (the built-in tunables)
 * on the 2-core AVX-512 PoCL 3.1 machine, under load, GFLOP/s in place /
 * packed: the classes' products 200x128x64 (NT.small) 16/31, 128x512x784
 * (NT.large) 70/80, 512x512x2048 (NT.longk) 49/67; the projections over a
 * sequence 1600x512x64 19/74, 3200x2048x512 51/78, 3200x512x2048 19/60;
 * 1024^3 63/74, 512^3 54/81, 256x1024x256 50/78, 100^3 21/35,
 * 1000x96x256 64/101.  In place wins with few rows for the K: the
 * recurrent step 32x2048x512 (NT.skinny) 60/50, 64x1024x1024 72/58,
 * 128x2048x2048 49/34 (128x1024x1024 73/68 is where the rule loses, by
 * 7%).  (On the AVX2 machine the rule was K <= 128 and M >= 256:
 * 1600x512x64 gave in place 25, packed 64.) */
static int
pack_nt(size_t m, size_t k)
{
    return (double)m * 8.0 >= (double)k;
}

/* Whether a TN product runs as NN on a packed A^T: long K, one A for the
 * whole batch.  gemm reads op(A)'s column k from A's row k, which over a
 * long K leaves the cache behind; packed, A^T's rows stream (on the
 * 2-core AVX2 machine, GFLOP/s TN in place / NN: the weight gradients
 * 2048x512x3200 33 / 103 and 2048x64x3200 35 / 135, 1024^3 56 / 104,
 * 256x256x3200 77 / 120).  The copy costs one pass over A (4 K M bytes
 * each way), small beside 2 M N K FLOP from K 512 up. */
static int
pack_tn(int ta, int tb, size_t k, size_t sa, size_t batch)
{
    return ta && !tb && k >= 512 && (batch == 1 || sa == 0);
}

/* Whether clgrad's kernels run this product as NN on a packed transposed
 * copy: an NT product on B^T, as its class's entry says ("pack" 0 or 1,
 * tuned by clgrad-tune on the class's product) or else by pack_nt's rule,
 * when one B serves the whole batch and gemm's column tiles (TN * VW
 * wide) fit C: 64 columns or more, with at most an eighth to spare.  On
 * narrower C the copy did not pay (GFLOP/s in place / packed on the
 * AVX-512 machine, built-in tunables: 128x10x512 40/10, 256x24x256
 * 38/22), nor with a tile's columns mostly past C (with NT.skinny's tuned
 * 16-column tile: 128x65x512 56/44, 3200x65x512 53/51; 3200x80x512
 * 55/102, 256x64x256 48/76).  A TN product on A^T by pack_tn's rule. */
static int
packed(const gemm_cfg *cfg, int ta, int tb, size_t m, size_t n, size_t k,
       size_t sa, size_t sb, size_t batch)
{
    size_t w = (size_t)(cfg->p[P_TN] * cfg->p[P_VW]);

    if (!ta && tb)
        return k > 0 && (batch == 1 || sb == 0) && n >= 64 &&
               (n + w - 1) / w * w - n <= n / 8 &&
               (cfg->pack >= 0 ? cfg->pack : pack_nt(m, k));
    return pack_tn(ta, tb, k, sa, batch);
}

/* Which backend runs this product when the choice is automatic.  From
 * tests/bench_gemm on a 2-core PoCL 3.1 CPU (AVX2; OpenBLAS 170-187
 * GFLOP/s at these sizes, FMA peak 200), GFLOP/s clgrad / CLBlast in the
 * same run: clgrad's kernels win at every shape of the recurrent and
 * linear layers of the tools' jobs (char-LSTM 1600x512x64 NT 67/17,
 * 1600x128x77 NN 106/34, 77x128x1600 TN 82/24, 512x128x1600 TN 112/86;
 * MLP 128x784x512 NN 156/51, 512x784x128 TN 136/33, 128x512x784 NT
 * 113/51; the recurrent step 32x2048x512 NT 99/9), and at 1024^3 NN, NT
 * and TN (104/73, 103/81 TN).  Long K: TN runs on a packed A^T (pack_tn;
 * 2048x512x3200 96/77, 2048x64x3200 53/39), NT holds (2048^3 98/71,
 * 2048x512x3200 73/62, 3200x512x2048 62/67), NN holds while B's K x N
 * panel is narrow (3200x512x2048 103/70, 2048x512x3200 103/65) and falls
 * behind from N 1024 (2048^3 58/75, 3200x1024x2048 66/71, 1024x2048x2048
 * 67/76): CLBlast runs those, and TN products over a batch of distinct
 * A's, which are not packed (1024^3 TN in place 56/68).  TT reads op(B)
 * lane by lane (128x512x256 17/24, 512^3 17/41): CLBlast from 2^21
 * multiply-adds up.  So a first run of the tools' small jobs never
 * builds CLBlast's programs. */
static cg__gemm_backend
backend_for(int ta, int tb, size_t m, size_t n, size_t k, size_t sa,
            size_t batch)
{
    double mn = (double)m * (double)n;

    if (ta && tb)
        return mn * (double)k >= 2097152.0 ? CG__GEMM_CLBLAST
                                           : CG__GEMM_CLGRAD;
    if (ta && !pack_tn(ta, tb, k, sa, batch) && k >= 1024 && mn >= 262144.0)
        return CG__GEMM_CLBLAST;
    if (!ta && !tb && k >= 2048 && n >= 1024 && mn >= 1048576.0)
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
    if (!ctx->gemm_classes->clblast_user) {
        pthread_mutex_lock(&clblast_lock);
        clblast_users++;
        pthread_mutex_unlock(&clblast_lock);
        ctx->gemm_classes->clblast_user = 1;
    }
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

static int clgrad_run(cg_context *ctx, gemm_cfg *cfg, int v, int ta, int tb,
                      size_t m, size_t n, size_t k, float alpha, cg__mat a,
                      size_t sa, cg__mat b, size_t sb, float beta, cg__mat c,
                      size_t sc, size_t batch, const cg__mat *bias,
                      int act);

/* x (rows x cols stored, leading dimension x.ld) transposed into a pool
 * buffer *t, which the caller frees once the product that reads it is
 * enqueued (the queue is in order), by gemm_tpose in variant tv: x's
 * stored bits where tv's operands and C are of one dtype, else 16-bit x
 * widened to float32 (tv V_F16_F32 or V_BF16_F32). */
static int
pack_transposed(cg_context *ctx, gemm_cfg *cfg, int tv, cg__mat x,
                size_t rows, size_t cols, cg_buffer **t)
{
    cl_int so = (cl_int)x.off, lds = (cl_int)x.ld;
    cl_int r = (cl_int)rows, c = (cl_int)cols;
    cl_kernel kn;
    cl_mem tm;
    int status;

    if (!(*t = cg_buffer_new(ctx, rows * cols * (v_to[tv] ? 2 : 4))))
        return cg__last_status();
    tm = cg__buffer_mem(*t);
    status = cfg_kernel(ctx, cfg, tv, K_TPOSE, &kn);
    if (status == CG_OK)
        status = cg__args(kn, CG__ARG(x.mem), CG__ARG(so), CG__ARG(lds),
                          CG__ARG(r), CG__ARG(c), CG__ARG(tm));
    /* one item per 8 x 8 block */
    if (status == CG_OK)
        status = cg__launch1d(ctx, kn, ((rows + 7) / 8) * ((cols + 7) / 8),
                              (size_t)cfg->p[P_WG]);
    return status;
}

/* The NT product through a packed copy of B^T, or the TN product through
 * a packed copy of A^T, as NN. */
static int
clgrad_run_packed(cg_context *ctx, gemm_cfg *cfg, int v, int ta, size_t m,
                  size_t n, size_t k, float alpha, cg__mat a, size_t sa,
                  cg__mat b, size_t sb, float beta, cg__mat c, size_t sc,
                  size_t batch, const cg__mat *bias, int act)
{
    cg_buffer *t = NULL;
    int status;

    if (ta) {       /* A stored [K, M] */
        status = pack_transposed(ctx, cfg, operand_variant(v), a, k, m, &t);
        if (status == CG_OK) {
            cg__mat at = { cg__buffer_mem(t), 0, k };

            status = clgrad_run(ctx, cfg, v, 0, 0, m, n, k, alpha, at, 0, b,
                                sb, beta, c, sc, batch, bias, act);
        }
    } else {        /* B stored [N, K] */
        status = pack_transposed(ctx, cfg, operand_variant(v), b, n, k, &t);
        if (status == CG_OK) {
            cg__mat bt = { cg__buffer_mem(t), 0, n };

            status = clgrad_run(ctx, cfg, v, 0, 0, m, n, k, alpha, a, sa, bt,
                                0, beta, c, sc, batch, bias, act);
        }
    }
    cg_buffer_free(t);
    return status;
}

static int
clgrad_run(cg_context *ctx, gemm_cfg *cfg, int v, int ta, int tb, size_t m,
           size_t n, size_t k, float alpha, cg__mat a, size_t sa, cg__mat b,
           size_t sb, float beta, cg__mat c, size_t sc, size_t batch,
           const cg__mat *bias, int act)
{
    cl_int M = (cl_int)m, N = (cl_int)n, K = (cl_int)k;
    cl_int ao = (cl_int)a.off, bo = (cl_int)b.off, co = (cl_int)c.off;
    cl_int lda = (cl_int)a.ld, ldb = (cl_int)b.ld, ldc = (cl_int)c.ld;
    cl_int sab = (cl_int)sa, sbb = (cl_int)sb, scb = (cl_int)sc;
    cl_mem dm = bias ? bias->mem : NULL;
    cl_int dof = bias ? (cl_int)bias->off : 0;
    size_t wg = (size_t)cfg->p[P_WG], tm, tn, tiles;
    size_t global[2], local[2] = { wg, 1 };
    cl_kernel kn;
    int status;

    if (packed(cfg, ta, tb, m, n, k, sa, sb, batch))
        return clgrad_run_packed(ctx, cfg, v, ta, m, n, k, alpha, a, sa, b,
                                 sb, beta, c, sc, batch, bias, act);
    if (!ta && tb) {
        tm = (size_t)cfg->p[P_DTM];
        tn = (size_t)cfg->p[P_DTN];
        if ((status = cfg_kernel(ctx, cfg, v, K_NT, &kn)) ||
            (status = cg__args(kn, CG__ARG(M), CG__ARG(N), CG__ARG(K),
                               CG__ARG(alpha), CG__ARG(a.mem), CG__ARG(ao),
                               CG__ARG(lda), CG__ARG(sab), CG__ARG(b.mem),
                               CG__ARG(bo), CG__ARG(ldb), CG__ARG(sbb),
                               CG__ARG(beta), CG__ARG(c.mem), CG__ARG(co),
                               CG__ARG(ldc), CG__ARG(scb), CG__ARG(dm),
                               CG__ARG(dof), CG__ARG(act))))
            return status;
    } else {
        cl_int sam = ta ? 1 : lda, sak = ta ? lda : 1;
        cl_int sbk = tb ? 1 : ldb, sbn = tb ? ldb : 1;

        tm = (size_t)cfg->p[P_TM];
        tn = (size_t)(cfg->p[P_TN] * cfg->p[P_VW]);
        if ((status = cfg_kernel(ctx, cfg, v, K_GEMM, &kn)) ||
            (status = cg__args(kn, CG__ARG(M), CG__ARG(N), CG__ARG(K),
                               CG__ARG(alpha), CG__ARG(a.mem), CG__ARG(ao),
                               CG__ARG(sam), CG__ARG(sak), CG__ARG(sab),
                               CG__ARG(b.mem), CG__ARG(bo), CG__ARG(sbk),
                               CG__ARG(sbn), CG__ARG(sbb), CG__ARG(beta),
                               CG__ARG(c.mem), CG__ARG(co), CG__ARG(ldc),
                               CG__ARG(scb), CG__ARG(dm), CG__ARG(dof),
                               CG__ARG(act))))
            return status;
    }
    tiles = ((m + tm - 1) / tm) * ((n + tn - 1) / tn);
    global[0] = (tiles + wg - 1) / wg * wg;
    global[1] = batch;
    return cg__launch(ctx, kn, 2, global, local, NULL);
}

/* ------------------------------------------------------- packed backend */

/* The packed backend (kernels/gemm_pack.cl): op(A) packed into
 * micro-panels of PMR rows, op(B) into micro-panels of NR = PTN * PVW
 * columns, each zero-padded and K long, once per product (once for the
 * whole batch where the operand's batch stride is 0), then gemm_packed
 * over them, blocking K by PKC inside each work-item.  The copies cost a
 * pass over each operand beside 2 M N K FLOP, and pay where the operands'
 * K panels leave the cache (see packed_rule). */
#define PACK_PARAM(ctx, name) ((size_t)cg__param(ctx, CG__P_GEMM_PACK_##name))

size_t
cg__gemm_packed_nr(const cg_context *ctx)
{
    return PACK_PARAM(ctx, PTN) * PACK_PARAM(ctx, PVW);
}

/* Floats in the packed op(A) and op(B) (*na, *nb) of a product. */
static void
packed_sizes(const cg_context *ctx, size_t m, size_t n, size_t k, size_t sa,
             size_t sb, size_t batch, double *na, double *nb)
{
    size_t mr = PACK_PARAM(ctx, PMR);
    size_t nr = cg__gemm_packed_nr(ctx);

    *na = (double)((m + mr - 1) / mr * mr) * (double)k *
          (double)(sa ? batch : 1);
    *nb = (double)((n + nr - 1) / nr * nr) * (double)k *
          (double)(sb ? batch : 1);
}

/* Whether gemm_packed indexes both packed operands with ints. */
static int
packed_fits(const cg_context *ctx, size_t m, size_t n, size_t k, size_t sa,
            size_t sb, size_t batch)
{
    double na, nb;

    packed_sizes(ctx, m, n, k, sa, sb, batch, &na, &nb);
    return na < (double)INT_MAX && nb < (double)INT_MAX;
}

/* Whether clgrad's kernels run a product with no "packed" in its class's
 * entry on packed operands.  From tests/bench_gemm -n (built-in
 * tunables) on the 2-core AVX-512 PoCL 3.1 machine under the load of
 * other jobs, GFLOP/s per CPU second (the process's CPU time, which moves
 * far less than its wall time on a shared machine) gemm.cl / packed:
 * 2048^3 35 / 91, 1024^3 NN 73 / 100 (TN 72 / 100, NT 70 / 96), the
 * char-LSTM's 3200x512x2048 NN 58 / 97, 2048x512x3200 TN 56 / 96, and NT
 * 57 / 94, 3200x2048x512 NT 75 / 108, 1600x512x64 NT 71 / 93; 512^3 66 /
 * 79, 256x256x3200 TN 51 / 73, 512x784x128 TN 80 / 100.  With 128 rows
 * (the MLP's) neither wins (128x512x784 NT 71 / 72, 128x784x512 NN
 * 84 / 56): gemm.cl's kernels keep those, and the skinny and small
 * products, where the copies weigh.  (Those times are from before the
 * pack kernels moved whole blocks as vectors, which made them 2-4 times
 * faster on the AVX2 machine; there the 128-row products then ran faster
 * packed, and its tuning database says so per class.) */
static int
packed_rule(int ta, int tb, size_t m, size_t n, size_t k)
{
    return !(ta && tb) && m >= 256 && n >= 256 &&
           (double)m * (double)n * (double)k >= 16777216.0;
}

/* Drops from e, a "gemm" class entry measured on the product ta tb m x n
 * x k (batch 1), each backend key whose value is what the built-in rule
 * gives for that product: "clblast" (backend_for), "packed" (packed_rule)
 * and "pack" (pack_nt, NT only).  Those rules look at the sizes, which
 * vary within a class (NT.large holds the MLP's 128x512x784 and the
 * char-LSTM's 3200x2048x512 projection), so a key written where the
 * measurement agrees with the rule would fix the class's other sizes to
 * the representative's choice; left out, the rule keeps choosing for
 * them.  A key that contradicts the rule was measured to, and stays. */
void
cg__gemm_entry_trim(cg_tuning_entry *e, int ta, int tb, size_t m, size_t n,
                    size_t k)
{
    int i, j, rule;

    for (i = j = 0; i < e->nparams; i++) {
        if (strcmp(e->names[i], "clblast") == 0)
            rule = backend_for(ta, tb, m, n, k, 0, 1) == CG__GEMM_CLBLAST;
        else if (strcmp(e->names[i], "packed") == 0)
            rule = packed_rule(ta, tb, m, n, k);
        else if (strcmp(e->names[i], "pack") == 0 && !ta && tb)
            rule = pack_nt(m, k);
        else
            rule = -1;
        if (rule >= 0 && (e->values[i] != 0) == rule)
            continue;
        if (j != i) {
            memcpy(e->names[j], e->names[i], sizeof e->names[j]);
            e->values[j] = e->values[i];
        }
        j++;
    }
    e->nparams = j;
}

/* Packs one operand: kernel kid over x (rows x K stored with strides
 * sr, sk, batch stride sx, `copies` matrices) into a new pool buffer *t of
 * `floats` floats, which the caller frees once the product that reads it
 * is enqueued (the queue is in order). */
static int
pack_operand(cg_context *ctx, cg__kid kid, cg_dtype dt, cg__mat x,
             size_t rows, size_t panel, size_t k, size_t sr, size_t sk,
             size_t sx, size_t copies, double floats, cg_buffer **t)
{
    cl_int R = (cl_int)rows, K = (cl_int)k, xo = (cl_int)x.off;
    cl_int SR = (cl_int)sr, SK = (cl_int)sk, SX = (cl_int)sx;
    size_t wg = PACK_PARAM(ctx, PWG), items, global[2], local[2] = { wg, 1 };
    cl_kernel kn;
    cl_mem tm;
    int status;

    if (!(*t = cg__buffer_new(ctx, (size_t)floats * sizeof(float))))
        return cg__last_status();
    tm = cg__buffer_mem(*t);
    if ((status = cg__kernel_dt(ctx, kid, dt, &kn)) ||
        (status = cg__args(kn, CG__ARG(R), CG__ARG(K), CG__ARG(x.mem),
                           CG__ARG(xo), CG__ARG(SR), CG__ARG(SK),
                           CG__ARG(SX), CG__ARG(tm))))
        return status;
    /* an item per micro-panel and 16 steps of K (gemm_pack.cl's PK) */
    items = (rows + panel - 1) / panel * ((k + 15) / 16);
    global[0] = (items + wg - 1) / wg * wg;
    global[1] = copies;
    return cg__launch(ctx, kn, 2, global, local, NULL);
}

/* The packed kernels' index space over an m x n product (dimension 0:
 * an item per column of micro-tiles and PMB micro-panels of A, padded to
 * the work-group PWG) for `batch` entries (dimension 1). */
static void
packed_space(const cg_context *ctx, size_t m, size_t n, size_t batch,
             size_t *global, size_t *local)
{
    size_t mr = PACK_PARAM(ctx, PMR), mb = PACK_PARAM(ctx, PMB);
    size_t nr = cg__gemm_packed_nr(ctx), wg = PACK_PARAM(ctx, PWG);
    size_t items = (n + nr - 1) / nr * (((m + mr - 1) / mr + mb - 1) / mb);

    global[0] = (items + wg - 1) / wg * wg;
    global[1] = batch;
    local[0] = wg;
    local[1] = 1;
}

/* gemm_packed over packed panels pam (A, spa floats apart per batch
 * entry, 0: one for all) and pbm (B, likewise spb) into C of dtype cd;
 * or, where ra is not NULL, gemm_packed_ra reading op(A) in place:
 * element (m, k) of batch entry z at ra's m * sam + k * sak + z * spa,
 * stored as C is (one storage type per kernel variant; pam unused). */
static int
packed_launch(cg_context *ctx, cg_dtype cd, size_t m, size_t n, size_t k,
              float alpha, cl_mem pam, size_t spa, const cg__mat *ra,
              size_t sam, size_t sak, cl_mem pbm, size_t spb,
              float beta, cg__mat c, size_t sc, size_t batch,
              const cg__mat *bias, int act)
{
    size_t global[2], local[2];
    cl_int M = (cl_int)m, N = (cl_int)n, K = (cl_int)k;
    cl_int co = (cl_int)c.off, ldc = (cl_int)c.ld, scb = (cl_int)sc;
    cl_int SPA = (cl_int)spa, SPB = (cl_int)spb, ACT = act;
    cl_int dof = bias ? (cl_int)bias->off : 0;
    cl_mem dm = bias ? bias->mem : NULL;
    cl_kernel kn;
    int status;

    if (ra) {
        cl_int ao = (cl_int)ra->off, SAM = (cl_int)sam, SAK = (cl_int)sak;

        status = cg__kernel_dt(ctx, CG__K_GEMM_PACKED_RA, cd, &kn);
        if (status == CG_OK)
            status = cg__args(kn, CG__ARG(M), CG__ARG(N), CG__ARG(K),
                              CG__ARG(alpha), CG__ARG(ra->mem), CG__ARG(ao),
                              CG__ARG(SAM), CG__ARG(SAK), CG__ARG(SPA),
                              CG__ARG(pbm), CG__ARG(SPB), CG__ARG(beta),
                              CG__ARG(c.mem), CG__ARG(co), CG__ARG(ldc),
                              CG__ARG(scb), CG__ARG(dm), CG__ARG(dof),
                              CG__ARG(ACT));
    } else {
        status = cg__kernel_dt(ctx, CG__K_GEMM_PACKED, cd, &kn);
        if (status == CG_OK)
            status = cg__args(kn, CG__ARG(M), CG__ARG(N), CG__ARG(K),
                              CG__ARG(alpha), CG__ARG(pam), CG__ARG(SPA),
                              CG__ARG(pbm), CG__ARG(SPB), CG__ARG(beta),
                              CG__ARG(c.mem), CG__ARG(co), CG__ARG(ldc),
                              CG__ARG(scb), CG__ARG(dm), CG__ARG(dof),
                              CG__ARG(ACT));
    }
    if (status)
        return status;
    packed_space(ctx, m, n, batch, global, local);
    return cg__launch(ctx, kn, 2, global, local, NULL);
}

int
cg__gemm_shift(cg_context *ctx, size_t m, size_t c, size_t r, size_t s,
               const cg__packed_b *pb, const cg__shift_src *x, cg__mat y,
               size_t sc, size_t rw, size_t ow, size_t batch, float beta,
               cl_mem bias, size_t bo)
{
    size_t nr = cg__gemm_packed_nr(ctx), global[2], local[2];
    cl_int v[17] = {
        (cl_int)m, (cl_int)pb->n, (cl_int)c, (cl_int)r, (cl_int)s,
        (cl_int)x->off, (cl_int)x->sx, (cl_int)x->cs, (cl_int)x->rs,
        (cl_int)x->ss, (cl_int)y.off, (cl_int)y.ld, (cl_int)sc, (cl_int)rw,
        (cl_int)ow, (cl_int)bo, 0
    };
    cl_mem mp = cg__buffer_mem(pb->buf);
    cl_kernel kn;
    int status;

    if (pb->nr != nr || pb->k != c * r * s)
        return cg__error(CG_EINVAL, "gemm_shift: B packed %zu wide and "
                         "%zu long, the product needs %zu and %zu", pb->nr,
                         pb->k, nr, c * r * s);
    status = cg__kernel_dt(ctx, CG__K_GEMM_SHIFT, CG_F32, &kn);
    if (status == CG_OK)
        status = cg__args(kn, CG__ARG(v[0]), CG__ARG(v[1]), CG__ARG(v[2]),
                          CG__ARG(v[3]), CG__ARG(v[4]), CG__ARG(mp),
                          CG__ARG(x->mem), CG__ARG(v[5]), CG__ARG(v[6]),
                          CG__ARG(v[7]), CG__ARG(v[8]), CG__ARG(v[9]),
                          CG__ARG(y.mem), CG__ARG(v[10]), CG__ARG(v[11]),
                          CG__ARG(v[12]), CG__ARG(v[13]), CG__ARG(v[14]),
                          CG__ARG(beta), CG__ARG(bias), CG__ARG(v[15]),
                          CG__ARG(v[16]));
    if (status)
        return status;
    packed_space(ctx, m, pb->n, batch, global, local);
    return cg__launch(ctx, kn, 2, global, local, NULL);
}

int
cg__gemm_shift_dw(cg_context *ctx, size_t m, const cg__packed_b *pb,
                  const cg__shift_src *x, size_t taps, size_t ts, cg__mat c)
{
    size_t nr = cg__gemm_packed_nr(ctx), global[2], local[2];
    cl_int v[10] = {
        (cl_int)m, (cl_int)pb->n, (cl_int)pb->k, (cl_int)x->off,
        (cl_int)x->cs, (cl_int)taps, (cl_int)ts, (cl_int)x->rs,
        (cl_int)x->ss, (cl_int)c.ld
    };
    cl_mem mp = cg__buffer_mem(pb->buf);
    cl_kernel kn;
    int status;

    if (pb->nr != nr || c.off != 0)
        return cg__error(CG_EINVAL, "gemm_shift_dw: B packed %zu wide "
                         "(the product's panels are %zu), C at offset %zu",
                         pb->nr, nr, c.off);
    status = cg__kernel_dt(ctx, CG__K_GEMM_SHIFT_DW, CG_F32, &kn);
    if (status == CG_OK)
        status = cg__args(kn, CG__ARG(v[0]), CG__ARG(v[1]), CG__ARG(v[2]),
                          CG__ARG(x->mem), CG__ARG(v[3]), CG__ARG(v[4]),
                          CG__ARG(v[5]), CG__ARG(v[6]), CG__ARG(v[7]),
                          CG__ARG(v[8]), CG__ARG(mp), CG__ARG(c.mem),
                          CG__ARG(v[9]));
    if (status)
        return status;
    packed_space(ctx, m, pb->n, 1, global, local);
    return cg__launch(ctx, kn, 2, global, local, NULL);
}

/* How packed_with_b takes op(A): cg__gemm_set_packed_a. */
static cg__packed_a packed_a_mode;

void
cg__gemm_set_packed_a(cg__packed_a mode)
{
    packed_a_mode = mode;
}

static int
packed_run(cg_context *ctx, cg_dtype ab, cg_dtype cd, int ta, int tb,
           size_t m, size_t n, size_t k, float alpha, cg__mat a, size_t sa,
           cg__mat b, size_t sb, float beta, cg__mat c, size_t sc,
           size_t batch, const cg__mat *bias, int act)
{
    size_t mr = PACK_PARAM(ctx, PMR);
    size_t nr = cg__gemm_packed_nr(ctx);
    size_t lda = a.ld, ldb = b.ld;
    size_t spa = sa ? (m + mr - 1) / mr * mr * k : 0;
    size_t spb = sb ? (n + nr - 1) / nr * nr * k : 0;
    cg_buffer *pa = NULL, *pb = NULL;
    double na, nb;
    int status;

    packed_sizes(ctx, m, n, k, sa, sb, batch, &na, &nb);
    status = pack_operand(ctx, CG__K_GEMM_PACK_A, ab, a, m, mr, k,
                          ta ? 1 : lda, ta ? lda : 1, sa, sa ? batch : 1,
                          na, &pa);
    if (status == CG_OK)
        status = pack_operand(ctx, CG__K_GEMM_PACK_B, ab, b, n, nr, k,
                              tb ? ldb : 1, tb ? 1 : ldb, sb,
                              sb ? batch : 1, nb, &pb);
    if (status == CG_OK)
        status = packed_launch(ctx, cd, m, n, k, alpha, cg__buffer_mem(pa),
                               spa, NULL, 0, 0, cg__buffer_mem(pb), spb,
                               beta, c, sc, batch, bias, act);
    cg_buffer_free(pa);
    cg_buffer_free(pb);
    return status;
}

/* B packed once for many products (cg__gemm_pack_b): the panels in the
 * layout of the NR the context had then. */
int
cg__gemm_pack_b(cg_context *ctx, cg_dtype dt, int tb, size_t n, size_t k,
                cg__mat b, cg__packed_b *out)
{
    size_t nr = cg__gemm_packed_nr(ctx);
    double na, nb;
    int status;

    memset(out, 0, sizeof *out);
    packed_sizes(ctx, 1, n, k, 0, 0, 1, &na, &nb);
    if (n == 0 || k == 0 || k >= (size_t)INT_MAX || nb >= (double)INT_MAX ||
        !fits_int(b, 0, 1, tb ? n : k, tb ? k : n))
        return cg__error(CG_EUNSUPPORTED, "gemm pack_b: a %zux%zu %s "
                         "operand (K x N) that the packed kernels do not "
                         "index with an int", k, n, cg__dtype_name(dt));
    status = pack_operand(ctx, CG__K_GEMM_PACK_B, dt, b, n, nr, k,
                          tb ? b.ld : 1, tb ? 1 : b.ld, 0, 1, nb, &out->buf);
    if (status) {
        cg_buffer_free(out->buf);
        out->buf = NULL;
        return status;
    }
    out->n = n;
    out->k = k;
    out->nr = nr;
    return CG_OK;
}

void
cg__packed_b_free(cg__packed_b *pb)
{
    cg_buffer_free(pb->buf);
    memset(pb, 0, sizeof *pb);
}

/* C_z = alpha op(a) B_z + beta C_z, z < batch, B_z packed at pb + z spb
 * floats (n x k, panel width nr).  op(a) is read in place by
 * gemm_packed_ra where it is float32 into a float32 C (the recurrent
 * step's h W_hh^T and dG W_hh, the convolution's weights), else packed
 * once by gemm_pack_a for gemm_packed: it converts 16-bit storage once,
 * where in place each of the N / NR work-items of a row of micro-tiles
 * would convert each value it reads again.  In place, the product loads
 * each of a micro-tile's rows of A with a stride, where packed it reads
 * one stream; it saves the pack's launch, pass and buffer.  /tmp/sk/ra.c
 * (not committed) on the 2-core AVX2 PoCL 3.1 machine, 100 products
 * queued back to back on one packed B, best / mean us per product of 30
 * alternating rounds, packed / in place: 32x2048x512 NT 452 / 457, 563
 * / 561; 32x512x2048 NN 500 / 482, 668 / 637; 64x2048x512 NT 1141 /
 * 1099, 1322 / 1294; 256x1024x256 NT 1035 / 1052, 1186 / 1147.  A
 * gemm_packed_ra of 16-bit A into a float32 C (tried, not kept: best us
 * in place / packed, the same way) lost: 32x1024x256 bf16 262 / 164,
 * fp16 874 / 169; 32x512x2048 bf16 908 / 607, fp16 2733 / 510.  "what"
 * names the caller in errors. */
static int
packed_with_b(cg_context *ctx, const char *what, cg_dtype ab, cg_dtype cd,
              int ta, size_t m, size_t n, size_t k, float alpha, cg__mat a,
              cl_mem pb, size_t spb, size_t nr, float beta, cg__mat c,
              size_t sc, size_t batch)
{
    size_t mr = PACK_PARAM(ctx, PMR);
    size_t sam = ta ? 1 : a.ld, sak = ta ? a.ld : 1;
    cg_buffer *pa = NULL;
    double na, nb;
    int status;

    if (nr != cg__gemm_packed_nr(ctx))
        return cg__error(CG_EINVAL, "%s: B was packed %zu columns to a "
                         "panel, the context's kernels now take %zu", what,
                         nr, cg__gemm_packed_nr(ctx));
    if (cd != ab && cd != CG_F32)
        return cg__error(CG_EDTYPE, "%s: %s operands into a %s C", what,
                         cg__dtype_name(ab), cg__dtype_name(cd));
    if (m == 0 || batch == 0)
        return CG_OK;
    packed_sizes(ctx, m, n, k, 0, spb, batch, &na, &nb);
    if (na >= (double)INT_MAX || nb >= (double)INT_MAX ||
        !fits_int(a, 0, 1, ta ? k : m, ta ? m : k) ||
        !fits_int(c, sc, batch, m, n))
        return cg__error(CG_EUNSUPPORTED, "%s: a %zux%zux%zu product "
                         "(batch %zu) whose elements an int does not index",
                         what, m, n, k, batch);
    if (ab == CG_F32 && cd == CG_F32 &&
        packed_a_mode == CG__PACKED_A_AUTO)
        return packed_launch(ctx, cd, m, n, k, alpha, NULL, 0, &a, sam, sak,
                             pb, spb, beta, c, sc, batch, NULL, 0);
    status = pack_operand(ctx, CG__K_GEMM_PACK_A, ab, a, m, mr, k, sam, sak,
                          0, 1, na, &pa);
    if (status == CG_OK)
        status = packed_launch(ctx, cd, m, n, k, alpha, cg__buffer_mem(pa),
                               0, NULL, 0, 0, pb, spb, beta, c, sc, batch,
                               NULL, 0);
    cg_buffer_free(pa);
    return status;
}

int
cg__gemm_packed_b(cg_context *ctx, cg_dtype ab, cg_dtype cd, int ta,
                  size_t m, float alpha, cg__mat a, const cg__packed_b *pb,
                  float beta, cg__mat c)
{
    if (!pb->buf)
        return cg__error(CG_EINVAL, "gemm packed_b: B is not packed");
    return packed_with_b(ctx, "gemm packed_b", ab, cd, ta, m, pb->n, pb->k,
                         alpha, a, cg__buffer_mem(pb->buf), 0, pb->nr, beta,
                         c, 0, 1);
}

int
cg__gemm_packed_bs(cg_context *ctx, size_t m, size_t n, size_t k,
                   cg__mat a, cl_mem pb, size_t spb, cg__mat c, size_t sc,
                   size_t batch)
{
    return packed_with_b(ctx, "gemm packed_bs", CG_F32, CG_F32, 0, m, n, k,
                         1.0f, a, pb, spb, cg__gemm_packed_nr(ctx), 0.0f, c,
                         sc, batch);
}

/* Whether a product of 16-bit operands runs on float32 copies of them
 * (gemm_widen, then the float32 kernels writing C in its own storage)
 * rather than converting them in every tile that reads them: the
 * products through gemm above 2^18 multiply-adds.  gemm broadcasts A's
 * values one by one, and PoCL converts a scalar half slowly (bfloat16,
 * a shift, less so), where gemm_nt's vector loads are fast.  From
 * tests/bench_gemm16 on the 2-core AVX-512 PoCL 3.1 machine under load,
 * GFLOP/s in place / widened (float32 in the same run), float16: 512^3
 * NN 16/83 (86), 1024^3 NN 18/51 (76), 128x2048x512 NN 18/70 (93),
 * 128x2048x512 NT (packed B^T) 16/32 (53), 2048x512x128 TN 15/61 (57);
 * bfloat16: 70/84, 55/73, 51/69, 37/56, 51/59.  In place wins the
 * recurrent step's NT in gemm_nt, 32x2048x512 float16 55/39 (45),
 * bfloat16 49/44, and small products, 64^3 NN float16 8.9/5.4 (15),
 * bfloat16 13/4.9, where the copies' launches weigh. */
/* Whether a product is small enough (2^18 multiply-adds or fewer) that
 * float32 copies of its 16-bit operands cost more in launches than they
 * save. */
static int
few_mads(size_t m, size_t n, size_t k)
{
    return (double)m * (double)n * (double)k <= 262144.0;
}

static int
widen_rule(const gemm_cfg *cfg, cg_dtype ab, cg_dtype cd, int ta, int tb,
           size_t m, size_t n, size_t k, size_t sa, size_t sb, size_t batch)
{
    if (few_mads(m, n, k))
        return 0;
    /* bfloat16 with few rows (the recurrent step's h W_hh^T, B rows):
     * the copy of B costs as much as the product; float32 C, quiet
     * machine, in place / widened: 32x2048x512 NN 169/117, 64x2048x512
     * 178/148, 32x1024x256 90/42 (128x2048x512: 115/138).  float16's
     * scalar conversions stay slow in place (93/124 at 32x2048x512). */
    if (ab == CG_BF16 && m <= 64 && !ta)
        return 0;
    return ta || !tb || packed(cfg, ta, tb, m, n, k, sa, sb, batch);
}

/* count matrices of x (rows x cols stored, x.ld apart, the matrices s
 * apart) as a packed float32 copy in a pool buffer *t, which the caller
 * frees once the product that reads it is enqueued. */
static int
widen(cg_context *ctx, gemm_cfg *cfg, int v, cg__mat x, size_t s,
      size_t count, size_t rows, size_t cols, cg_buffer **t)
{
    cl_int so = (cl_int)x.off, lds = (cl_int)x.ld, sbs = (cl_int)s;
    cl_int r = (cl_int)rows, c = (cl_int)cols;
    size_t wg = (size_t)cfg->p[P_WG], items = rows * ((cols + 7) / 8);
    size_t global[2], local[2] = { wg, 1 };
    cl_kernel kn;
    cl_mem tm;
    int status;

    if (!(*t = cg_buffer_new(ctx, count * rows * cols * sizeof(float))))
        return cg__last_status();
    tm = cg__buffer_mem(*t);
    global[0] = (items + wg - 1) / wg * wg;
    global[1] = count;
    if ((status = cfg_kernel(ctx, cfg, operand_variant(v), K_WIDEN, &kn)) ||
        (status = cg__args(kn, CG__ARG(x.mem), CG__ARG(so), CG__ARG(lds),
                           CG__ARG(sbs), CG__ARG(r), CG__ARG(c),
                           CG__ARG(tm))))
        return status;
    return cg__launch(ctx, kn, 2, global, local, NULL);
}

/* The product of 16-bit operands (variant v) through float32 copies of
 * them, C (and the bias) in v's output storage: on backend `use` (the
 * packed kernels or CLBlast only for a float32 C), else gemm.cl's float32
 * kernels.  There, an NT product runs as NN on a copy of B^T, and a TN
 * one on a copy of A^T, where packed() says so (as clgrad_run_packed
 * runs float32 operands): that operand's float32 copy is made transposed
 * in the same pass (gemm_tpose's widening variant), not widened and then
 * transposed again. */
static int
widened_run(cg_context *ctx, gemm_cfg *cfg, cg__gemm_backend use, int v,
            int ta, int tb, size_t m, size_t n, size_t k, float alpha,
            cg__mat a, size_t sa, cg__mat b, size_t sb, float beta,
            cg__mat c, size_t sc, size_t batch, const cg__mat *bias,
            int act, int *added)
{
    static const int f32_to[3] = { V_F32, V_F32_F16, V_F32_BF16 };
    static const int to_f32[3] = { V_F32, V_F16_F32, V_BF16_F32 };
    size_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k;
    size_t bc = tb ? k : n;
    size_t wsa = sa ? ar * ac : 0, wsb = sb ? br * bc : 0;
    int tp = use == CG__GEMM_CLGRAD &&
             packed(cfg, ta, tb, m, n, k, sa, sb, batch);
    cg_buffer *wa = NULL, *wb = NULL;
    int status;

    if (tp && ta)       /* A^T: [M, K] */
        status = pack_transposed(ctx, cfg, to_f32[v_t[v]], a, k, m, &wa);
    else
        status = widen(ctx, cfg, v, a, sa, sa ? batch : 1, ar, ac, &wa);
    if (status == CG_OK && tp && tb)    /* B^T: [K, N] */
        status = pack_transposed(ctx, cfg, to_f32[v_t[v]], b, n, k, &wb);
    else if (status == CG_OK)
        status = widen(ctx, cfg, v, b, sb, sb ? batch : 1, br, bc, &wb);
    if (status == CG_OK && tp) {
        cg__mat am = { cg__buffer_mem(wa), 0, ta ? k : ac };
        cg__mat bm = { cg__buffer_mem(wb), 0, tb ? n : bc };

        /* packed() held: the transposed operand serves the whole batch */
        status = clgrad_run(ctx, cfg, f32_to[v_to[v]], 0, 0, m, n, k,
                            alpha, am, ta ? 0 : wsa, bm, tb ? 0 : wsb, beta,
                            c, sc, batch, bias, act);
    } else if (status == CG_OK) {
        cg__mat am = { cg__buffer_mem(wa), 0, ac };
        cg__mat bm = { cg__buffer_mem(wb), 0, bc };

        /* float32 copies into a float32 C run as float32 operands do */
        if (use == CG__GEMM_PACKED)
            status = packed_run(ctx, CG_F32, CG_F32, ta, tb, m, n, k, alpha,
                                am, wsa, bm, wsb, beta, c, sc, batch, bias,
                                act);
        else if (use == CG__GEMM_CLBLAST) {
            if (bias || act)    /* CLBlast has no epilogue: the caller's */
                *added = 0;
            status = clblast_run(ctx, ta, tb, m, n, k, alpha, am, wsa, bm,
                                 wsb, beta, c, sc, batch);
        } else
            status = clgrad_run(ctx, cfg, f32_to[v_to[v]], ta, tb, m, n, k,
                                alpha, am, wsa, bm, wsb, beta, c, sc, batch,
                                bias, act);
    }
    cg_buffer_free(wa);
    cg_buffer_free(wb);
    return status;
}

/* The product of 16-bit operands (dtype ab) into a C of dtype cd on backend
 * `use`, CLBlast or the packed kernels, which write only a float32 C (the
 * packed kernels would round a 16-bit C after every PKC steps of K): a
 * float32 product into a scratch C, then gemm_narrow's epilogue, C =
 * act(P + beta C + bias) rounded once, as gemm.cl's kernels do it
 * (kernels/gemm_narrow.cl, built for C's dtype).  The operands go through
 * float32 copies for CLBlast (wide), which sums 16-bit operands in half,
 * and as they are to the packed kernels, whose pack kernels convert
 * them.  The scratch C is batch x m x n floats, freed once the narrowing
 * is enqueued. */
static int
narrowed_run(cg_context *ctx, gemm_cfg *cfg, cg__gemm_backend use,
             cg_dtype ab, cg_dtype cd, int wide, int ta, int tb, size_t m,
             size_t n, size_t k, float alpha, cg__mat a, size_t sa,
             cg__mat b, size_t sb, float beta, cg__mat c, size_t sc,
             size_t batch, const cg__mat *bias, int act)
{
    cl_int r = (cl_int)m, cols = (cl_int)n, co = (cl_int)c.off;
    cl_int ldc = (cl_int)c.ld, scb = (cl_int)sc;
    cl_int dof = bias ? (cl_int)bias->off : 0;
    cl_mem dm = bias ? bias->mem : NULL, tm;
    size_t items = m * ((n + 7) / 8);
    size_t global[2], local[2] = { CG__WG, 1 };
    cg_buffer *t;
    cl_kernel kn;
    int status, added = 1;

    if (!(t = cg_buffer_new(ctx, batch * m * n * sizeof(float))))
        return cg__last_status();
    tm = cg__buffer_mem(t);
    {
        cg__mat p = { tm, 0, n };
        size_t sp = batch > 1 ? m * n : 0;

        status = wide
            ? widened_run(ctx, cfg, use, variant(ab, CG_F32), ta, tb, m, n,
                          k, alpha, a, sa, b, sb, 0.0f, p, sp, batch, NULL,
                          0, &added)
            : packed_run(ctx, ab, CG_F32, ta, tb, m, n, k, alpha, a, sa, b,
                         sb, 0.0f, p, sp, batch, NULL, 0);
    }
    if (status == CG_OK)
        status = cg__kernel_dt(ctx, CG__K_GEMM_NARROW, cd, &kn);
    if (status == CG_OK)
        status = cg__args(kn, CG__ARG(tm), CG__ARG(r), CG__ARG(cols),
                          CG__ARG(beta), CG__ARG(c.mem), CG__ARG(co),
                          CG__ARG(ldc), CG__ARG(scb), CG__ARG(dm),
                          CG__ARG(dof), CG__ARG(act));
    if (status == CG_OK) {
        global[0] = (items + CG__WG - 1) / CG__WG * CG__WG;
        global[1] = batch;
        status = cg__launch(ctx, kn, 2, global, local, NULL);
    }
    cg_buffer_free(t);
    return status;
}

/* Whether the packed kernels write a 16-bit C of 16-bit operands over k
 * steps themselves, rounded once, rather than a float32 scratch C that
 * gemm_narrow rounds: where K fits one block of PKC steps (the MLP's
 * weight gradients over a batch of 128), so that they run as blocked as
 * into a float32 C.  Longer products keep the scratch C: the 16-bit
 * variants walk all of K as one block, each micro-tile's B panel from L2
 * rather than L1: on the 2-core AVX2 PoCL 3.1 machine, given K up to 4
 * PKC that way, the float16 MLP step's gemm_packed took 3.3-3.7 ms,
 * against 2.5 ms plus gemm_narrow's 0.7 through the scratch C. */
static int
packed_rounds_once(const cg_context *ctx, size_t k)
{
    return k <= PACK_PARAM(ctx, PKC);
}

int
cg__gemm_widen_force(cg_context *ctx, int mode)
{
    gemm_cfg *cfg;
    int status;

    if ((status = class_cfg(ctx, 0, &cfg)))    /* makes the classes */
        return status;
    ctx->gemm_classes->widen = mode < 0 ? -1 : mode != 0;
    return CG_OK;
}

/* The backend of a float32 product before the checks of its operands:
 * the one CLGRAD_GEMM forces, else the class entry's "clblast" or
 * backend_for, clgrad's kernels moved to the packed ones by the entry's
 * "packed" or packed_rule. */
static cg__gemm_backend
choose(const cg_context *ctx, const gemm_cfg *cfg, int ta, int tb, size_t m,
       size_t n, size_t k, size_t sa, size_t batch)
{
    cg__gemm_backend use;

    if (ctx->gemm_backend != CG__GEMM_AUTO)
        return (cg__gemm_backend)ctx->gemm_backend;
    use = cfg->backend >= 0 ? (cg__gemm_backend)cfg->backend
                            : backend_for(ta, tb, m, n, k, sa, batch);
    if (use == CG__GEMM_CLGRAD &&
        (cfg->packed >= 0 ? cfg->packed : packed_rule(ta, tb, m, n, k)))
        use = CG__GEMM_PACKED;
    return use;
}

int
cg__gemm_backend_of(cg_context *ctx, int ta, int tb, size_t m, size_t n,
                    size_t k, size_t sa, size_t batch, cg__gemm_backend *out)
{
    gemm_cfg *cfg;
    int status;

    if ((status = backend_mode(ctx)) ||
        (status = class_cfg(ctx, cg__gemm_class(ta, tb, m, n, k), &cfg)))
        return status;
    *out = choose(ctx, cfg, ta != 0, tb != 0, m, n, k, sa, batch);
    return CG_OK;
}

int
cg__gemm_act(cg_context *ctx, cg_dtype ab, cg_dtype cd, int ta, int tb,
             size_t m, size_t n, size_t k, float alpha, cg__mat a,
             size_t sa, cg__mat b, size_t sb, float beta, cg__mat c,
             size_t sc, size_t batch, const cg__mat *bias, cg__act act,
             int *added)
{
    cg__gemm_backend use;
    gemm_cfg *cfg;
    int status, fits, wide, narrow = 0, force;

    if (added)
        *added = 1;
    if ((status = backend_mode(ctx)))
        return status;
    if (m == 0 || n == 0 || batch == 0)
        return CG_OK;
    if ((status = class_cfg(ctx, cg__gemm_class(ta, tb, m, n, k), &cfg)))
        return status;
    use = choose(ctx, cfg, ta, tb, m, n, k, sa, batch);
    force = ctx->gemm_classes->widen;
    wide = ab != CG_F32 && k > 0 &&
           (force >= 0 ? force
            : widen_rule(cfg, ab, cd, ta != 0, tb != 0, m, n, k, sa, sb,
                         batch));
    if (use == CG__GEMM_PACKED && ((ta && tb) ||
                                   !packed_fits(ctx, m, n, k, sa, sb, batch)))
        use = CG__GEMM_CLGRAD;
    /* C = beta C, which CLBlast refuses.  16-bit operands whose float32
     * choice is CLBlast run on it through float32 copies (CLBlast sums
     * 16-bit operands in half), unless they are few enough for gemm.cl in
     * place: on an H100 CLBlast was 5-18 times faster than gemm.cl's
     * kernels at the recurrent and MLP shapes, and the bfloat16
     * char-LSTM step spent 18.5 of its 43 ms in gemm.cl.  Those whose
     * float32 choice is the packed backend are packed from their own
     * storage (its pack kernels convert them as they copy them, so no
     * float32 copies: the char-LSTM's bfloat16 step had 5 MB of them at
     * its peak) into a float32 C, and into a 16-bit C where widen_rule
     * says copies pay.  CLBlast writes a 16-bit C through a float32
     * scratch C (narrowed_run), the packed kernels too past
     * packed_rounds_once's K.  Other 16-bit products
     * widened for a float32 C run on the float32 choice; the rest on
     * gemm.cl's kernels, in place or widened. */
    if (k == 0)
        use = CG__GEMM_CLGRAD;
    else if (ab != CG_F32 && use == CG__GEMM_CLBLAST && force != 0 &&
             (cd == CG_F32 || cd == ab) && !few_mads(m, n, k)) {
        wide = 1;
        narrow = cd != CG_F32;
    } else if (ab != CG_F32 && use == CG__GEMM_PACKED && force != 1 &&
               (cd == CG_F32 || (cd == ab && wide))) {
        wide = 0;
        narrow = cd != CG_F32 && !packed_rounds_once(ctx, k);
    } else if (ab != CG_F32 && !(wide && cd == CG_F32))
        use = CG__GEMM_CLGRAD;
    fits = k < (size_t)INT_MAX &&
           fits_int(a, sa, batch, ta ? k : m, ta ? m : k) &&
           fits_int(b, sb, batch, tb ? n : k, tb ? k : n) &&
           fits_int(c, sc, batch, m, n) &&
           (!bias || fits_int(*bias, 0, 1, 1, n));
    if (!fits && ab != CG_F32)
        return cg__error(CG_EUNSUPPORTED, "a %s GEMM of %zux%zux%zu (batch "
                         "%zu) whose elements an int does not index",
                         cg__dtype_name(ab), m, n, k, batch);
    if (use != CG__GEMM_CLBLAST && !fits)
        use = CG__GEMM_CLBLAST;
    if (narrow)
        return narrowed_run(ctx, cfg, use, ab, cd, wide, ta != 0, tb != 0,
                            m, n, k, alpha, a, sa, b, sb, beta, c, sc, batch,
                            bias, act);
    if (wide)
        return widened_run(ctx, cfg, use, variant(ab, cd), ta != 0,
                           tb != 0, m, n, k, alpha, a, sa, b, sb, beta, c,
                           sc, batch, bias, act, added);
    if (use == CG__GEMM_PACKED)
        return packed_run(ctx, ab, cd, ta != 0, tb != 0, m, n, k, alpha, a,
                          sa, b, sb, beta, c, sc, batch, bias, act);
    if (use == CG__GEMM_CLGRAD)
        return clgrad_run(ctx, cfg, variant(ab, cd), ta != 0, tb != 0, m, n,
                          k, alpha, a, sa, b, sb, beta, c, sc, batch, bias,
                          act);
    if (bias || act)    /* CLBlast has no epilogue: the caller's */
        *added = 0;
    return clblast_run(ctx, ta, tb, m, n, k, alpha, a, sa, b, sb, beta, c,
                       sc, batch);
}

int
cg__gemm_dt(cg_context *ctx, cg_dtype ab, cg_dtype cd, int ta, int tb,
            size_t m, size_t n, size_t k, float alpha, cg__mat a, size_t sa,
            cg__mat b, size_t sb, float beta, cg__mat c, size_t sc,
            size_t batch, const cg__mat *bias, int *added)
{
    return cg__gemm_act(ctx, ab, cd, ta, tb, m, n, k, alpha, a, sa, b, sb,
                        beta, c, sc, batch, bias, CG__ACT_NONE, added);
}

int
cg__sgemm_bias(cg_context *ctx, int ta, int tb, size_t m, size_t n,
               size_t k, float alpha, cg__mat a, size_t sa, cg__mat b,
               size_t sb, float beta, cg__mat c, size_t sc, size_t batch,
               const cg__mat *bias, int *added)
{
    return cg__gemm_dt(ctx, CG_F32, CG_F32, ta, tb, m, n, k, alpha, a, sa, b,
                       sb, beta, c, sc, batch, bias, added);
}

int
cg__sgemm_batched(cg_context *ctx, int ta, int tb, size_t m, size_t n,
                  size_t k, float alpha, cg__mat a, size_t sa, cg__mat b,
                  size_t sb, float beta, cg__mat c, size_t sc, size_t batch)
{
    return cg__sgemm_bias(ctx, ta, tb, m, n, k, alpha, a, sa, b, sb, beta, c,
                          sc, batch, NULL, NULL);
}

int
cg__sgemm(cg_context *ctx, int ta, int tb, size_t m, size_t n, size_t k,
          float alpha, cg__mat a, cg__mat b, float beta, cg__mat c)
{
    return cg__sgemm_batched(ctx, ta, tb, m, n, k, alpha, a, 0, b, 0, beta,
                             c, 0, 1);
}
