/* SPDX-License-Identifier: MIT */
/*
 * tests/bench_gemm16.c - GFLOP/s of one GEMM shape in each storage
 * precision, in the same run: float32 (clgrad's kernels forced, then the
 * automatic choice), and for float16 and bfloat16 operands clgrad's own
 * 16-bit kernels reading them in place ("own") or through float32 copies
 * (gemm_widen, "widen"), C of the operands' dtype and float32 C, and the
 * automatic choice between the two, against casting A and B to float32
 * with cg__cast, the float32 GEMM (automatic choice) and C back.  Each
 * time is the best of REPS runs after one warm-up, including every
 * launch of the method.  Not run by make check (build with
 * `make tests/bench_gemm16`).
 *
 * usage: bench_gemm16 [-r REPS] M N K [TA TB]
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/internal.h"

typedef struct job {
    cg_context *ctx;
    int ta, tb;
    size_t m, n, k;
    cg_tensor *a, *b;       /* the operands, of one dtype */
    cg_dtype out;
    int cast;               /* 1: cast to float32, SGEMM, cast back */
} job;

static int
once(const job *j)
{
    cg__mat am = { cg__tensor_mem(j->a), 0, j->ta ? j->m : j->k };
    cg__mat bm = { cg__tensor_mem(j->b), 0, j->tb ? j->k : j->n };
    int64_t shc[2] = { (int64_t)j->m, (int64_t)j->n };
    cg_tensor *a = j->a, *b = j->b, *c, *c2;
    int status;

    if (j->cast) {
        a = cg__cast(j->a, CG_F32);
        b = cg__cast(j->b, CG_F32);
        if (!a || !b)
            return -1;
        am.mem = cg__tensor_mem(a);
        bm.mem = cg__tensor_mem(b);
    }
    c = cg__tensor_empty(j->ctx, j->cast ? CG_F32 : j->out, 2, shc);
    if (!c)
        return -1;
    {
        cg__mat cm = { cg__tensor_mem(c), 0, j->n };

        status = cg__gemm_dt(j->ctx, cg_tensor_dtype(a), cg_tensor_dtype(c),
                             j->ta, j->tb, j->m, j->n, j->k, 1.0f, am, 0, bm,
                             0, 0.0f, cm, 0, 1, NULL, NULL);
    }
    if (status == CG_OK && j->cast && j->out != CG_F32) {
        c2 = cg__cast(c, j->out);
        status = c2 ? CG_OK : -1;
        cg_tensor_free(c2);
    }
    cg_tensor_free(c);
    if (j->cast) {
        cg_tensor_free(a);
        cg_tensor_free(b);
    }
    return status;
}

static double
best_of(const job *j, int reps)
{
    double best = 1e30, t0;
    int i;

    for (i = 0; i <= reps; i++) {
        t0 = cg__now();
        if (once(j) || cg_context_finish(j->ctx))
            return -1;
        if (i > 0 && cg__now() - t0 < best)
            best = cg__now() - t0;
    }
    return best;
}

static void
report(const char *name, const job *j, int reps)
{
    double t = best_of(j, reps);

    if (t < 0) {
        printf(" %s failed (%s)", name, cg_last_error());
        return;
    }
    printf(" %s %.1f", name, 2e-9 * (double)j->m * j->n * j->k / t);
    fflush(stdout);
}

int
main(int argc, char **argv)
{
    static const cg_dtype dts[2] = { CG_F16, CG_BF16 };
    static const char *const names[2] = { "f16", "bf16" };
    static const char *const wn[2] = { "own", "widen" };
    int reps = 5, i = 1, d, w;
    job j;
    int64_t sa[2], sb[2];
    cg_tensor *a32, *b32;
    char name[32];

    memset(&j, 0, sizeof j);
    if (argc > 2 && strcmp(argv[1], "-r") == 0) {
        reps = atoi(argv[2]);
        i = 3;
    }
    if (argc - i != 3 && argc - i != 5) {
        fprintf(stderr, "usage: bench_gemm16 [-r REPS] M N K [TA TB]\n");
        return 2;
    }
    j.m = strtoul(argv[i], NULL, 10);
    j.n = strtoul(argv[i + 1], NULL, 10);
    j.k = strtoul(argv[i + 2], NULL, 10);
    if (argc - i == 5) {
        j.ta = atoi(argv[i + 3]);
        j.tb = atoi(argv[i + 4]);
    }
    if (!(j.ctx = cg_context_new(NULL))) {
        fprintf(stderr, "bench_gemm16: %s\n", cg_last_error());
        return 1;
    }
    sa[0] = (int64_t)(j.ta ? j.k : j.m);
    sa[1] = (int64_t)(j.ta ? j.m : j.k);
    sb[0] = (int64_t)(j.tb ? j.n : j.k);
    sb[1] = (int64_t)(j.tb ? j.k : j.n);
    a32 = cg_rand_uniform(j.ctx, 2, sa, -1.0f, 1.0f);
    b32 = cg_rand_uniform(j.ctx, 2, sb, -1.0f, 1.0f);
    if (!a32 || !b32) {
        fprintf(stderr, "bench_gemm16: %s\n", cg_last_error());
        return 1;
    }
    printf("%zux%zux%zu %s%s GFLOP/s:", j.m, j.n, j.k, j.ta ? "T" : "N",
           j.tb ? "T" : "N");
    j.a = a32;
    j.b = b32;
    j.out = CG_F32;
    cg__gemm_force(j.ctx, CG__GEMM_CLGRAD);
    report("f32(clgrad)", &j, reps);
    cg__gemm_force(j.ctx, CG__GEMM_AUTO);
    report("f32(auto)", &j, reps);
    for (d = 0; d < 2; d++) {
        j.a = cg__cast(a32, dts[d]);
        j.b = cg__cast(b32, dts[d]);
        if (!j.a || !j.b) {
            fprintf(stderr, "bench_gemm16: %s\n", cg_last_error());
            return 1;
        }
        for (w = 0; w < 2; w++) {
            cg__gemm_widen_force(j.ctx, w);
            j.out = dts[d];
            j.cast = 0;
            snprintf(name, sizeof name, "%s(%s)", names[d], wn[w]);
            report(name, &j, reps);
            j.out = CG_F32;
            snprintf(name, sizeof name, "%s->f32(%s)", names[d], wn[w]);
            report(name, &j, reps);
        }
        cg__gemm_widen_force(j.ctx, -1);
        j.out = dts[d];
        snprintf(name, sizeof name, "%s(auto)", names[d]);
        report(name, &j, reps);
        j.cast = 1;
        snprintf(name, sizeof name, "%s(cast+f32)", names[d]);
        report(name, &j, reps);
        cg_tensor_free(j.a);
        cg_tensor_free(j.b);
    }
    printf("\n");
    cg_tensor_free(a32);
    cg_tensor_free(b32);
    cg_context_free(j.ctx);
    return 0;
}
