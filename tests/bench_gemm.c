/* SPDX-License-Identifier: MIT */
/*
 * tests/bench_gemm.c - GFLOP/s of one SGEMM shape through clgrad's GEMM
 * entry (cg__sgemm_batched) with each backend forced, beside OpenBLAS's
 * cblas_sgemm on the same data, and the largest difference from
 * OpenBLAS, and GFLOP/s per CPU second of the process (steadier than
 * wall time on a machine shared with other work).  Tunables of
 * kernels/gemm.cl and kernels/gemm_pack.cl may be set for the run (-p,
 * the context's values; how the defaults and the rules in lib/ops/gemm.c
 * were chosen), and parameters of the shape's class entry (-e, over the
 * entry in force: "-e pack=1" runs an NT product on a packed B^T); -n
 * leaves the tuning databases out (the built-in values and rules).  Not
 * run by make check (build with `make tests/bench_gemm`).
 *
 * usage: bench_gemm [-n] [-r REPS] [-p NAME=VALUE]... [-e NAME=VALUE]...
 *                   M N K [TA TB]
 */
#include "config.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "ops/internal.h"
#include "tune/internal.h"
#include "tune/tuner.h"

/* The process's CPU seconds (user and system, every thread). */
static double
cpu_now(void)
{
    struct rusage u;

    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 +
           (double)u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
}

/* The best wall time of reps products, and in *cpu their mean CPU time
 * (on a machine shared with other work, the CPU time moves less than the
 * wall time: it counts the cycles the product took, not those given to
 * others; cache contention still shows). */
static double
run(cg_context *ctx, int ta, int tb, size_t m, size_t n, size_t k,
    cg__mat a, cg__mat b, cg__mat c, int reps, double *cpu)
{
    double best = 1e30, t0, c0 = 0;
    int i;

    for (i = 0; i <= reps; i++) {
        if (i == 1)
            c0 = cpu_now();
        t0 = cg__now();
        if (cg__sgemm(ctx, ta, tb, m, n, k, 1.0f, a, b, 0.0f, c) ||
            cg_context_finish(ctx))
            return -1;
        if (i > 0 && cg__now() - t0 < best)   /* the first one warms up */
            best = cg__now() - t0;
    }
    *cpu = (cpu_now() - c0) / (reps > 0 ? reps : 1);
    return best;
}

/* Puts the class entry for this product in force: the one in force (if
 * any) with the parameters of -e set. */
static int
class_entry(cg_context *ctx, int ta, int tb, size_t m, size_t n, size_t k,
            char **set, int nset)
{
    cg_tuning_entry e, got;
    char cls[32];
    int i, j, count;

    cg__gemm_class_name(cg__gemm_class(ta, tb, m, n, k), cls, sizeof cls);
    memset(&e, 0, sizeof e);
    strcpy(e.kernel, "gemm");
    snprintf(e.shape, sizeof e.shape, "%s", cls);
    if (cg_kernel_source_hash("gemm", e.source_hash) ||
        cg_context_tuning_count(ctx, &count))
        return -1;
    for (i = 0; i < count; i++)
        if (cg_context_tuning_entry(ctx, i, &got) == CG_OK &&
            strcmp(got.kernel, "gemm") == 0 && strcmp(got.shape, cls) == 0)
            e = got;
    for (i = 0; i < nset; i++) {
        char *eq = strchr(set[i], '=');

        if (!eq)
            return -1;
        for (j = 0; j < e.nparams; j++)
            if (strncmp(e.names[j], set[i], (size_t)(eq - set[i])) == 0 &&
                e.names[j][eq - set[i]] == '\0')
                break;
        if (j == e.nparams) {
            if (j == CG_TUNING_MAX_PARAMS)
                return -1;
            snprintf(e.names[j], sizeof e.names[j], "%.*s",
                     (int)(eq - set[i]), set[i]);
            e.nparams++;
        }
        e.values[j] = atol(eq + 1);
    }
    fprintf(stderr, "bench_gemm: %s", cls);
    for (j = 0; j < e.nparams; j++)
        fprintf(stderr, " %s=%ld", e.names[j], e.values[j]);
    fprintf(stderr, "\n");
    return cg_context_set_tuning(ctx, &e);
}

int
main(int argc, char **argv)
{
    int reps = 5, ta = 0, tb = 0, i, be;
    size_t m, n, k, j, na, nb, nc;
    float *ha, *hb, *hc, *ref;
    cg_context *ctx;
    cg_buffer *ba, *bb, *bc;
    double t0, tblas = 1e30;

    char *set[16];
    int nset = 0;
    cg_context_options o = { NULL, 0, 0 };

    if (argc > 1 && strcmp(argv[1], "-n") == 0) {
        o.no_tuning = 1;
        argv++;
        argc--;
    }
    ctx = cg_context_new_with(&o);
    if (!ctx) {
        fprintf(stderr, "bench_gemm: %s\n", cg_last_error());
        return 1;
    }
    for (i = 1; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "-r") == 0 && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else if (strcmp(argv[i], "-e") == 0 && i + 1 < argc && nset < 16) {
            set[nset++] = argv[++i];
        } else if (strcmp(argv[i], "-p") == 0 && i + 1 < argc) {
            char *eq = strchr(argv[++i], '=');
            int p, found = 0;

            for (p = 0; eq && p < CG__P_COUNT; p++)
                if ((cg__param_table[p].file == CG__KF_GEMM ||
                     cg__param_table[p].file == CG__KF_GEMM_PACK) &&
                    strncmp(cg__param_table[p].name, argv[i],
                            (size_t)(eq - argv[i])) == 0 &&
                    strlen(cg__param_table[p].name) ==
                    (size_t)(eq - argv[i])) {
                    cg__param_set(ctx, (cg__pid)p, atol(eq + 1));
                    found = 1;
                }
            if (!found) {
                fprintf(stderr, "bench_gemm: no gemm tunable %s\n", argv[i]);
                return 2;
            }
        } else {
            break;
        }
    }
    if (argc - i != 3 && argc - i != 5) {
        fprintf(stderr, "usage: bench_gemm [-n] [-r REPS] [-p NAME=VALUE]... "
                "[-e NAME=VALUE]... M N K [TA TB]\n");
        return 2;
    }
    m = strtoul(argv[i], NULL, 10);
    n = strtoul(argv[i + 1], NULL, 10);
    k = strtoul(argv[i + 2], NULL, 10);
    if (argc - i == 5) {
        ta = atoi(argv[i + 3]);
        tb = atoi(argv[i + 4]);
    }
    if (nset && class_entry(ctx, ta, tb, m, n, k, set, nset)) {
        fprintf(stderr, "bench_gemm: -e: %s\n", cg_last_error());
        return 2;
    }
    na = m * k;
    nb = k * n;
    nc = m * n;
    ha = malloc(na * sizeof *ha);
    hb = malloc(nb * sizeof *hb);
    hc = malloc(nc * sizeof *hc);
    ref = malloc(nc * sizeof *ref);
    srand(1);
    for (j = 0; j < na; j++)
        ha[j] = (float)rand() / RAND_MAX - 0.5f;
    for (j = 0; j < nb; j++)
        hb[j] = (float)rand() / RAND_MAX - 0.5f;
    for (i = 0; i <= reps; i++) {
        t0 = cg__now();
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                    tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k,
                    1.0f, ha, ta ? (int)m : (int)k, hb, tb ? (int)k : (int)n,
                    0.0f, ref, (int)n);
        if (i > 0 && cg__now() - t0 < tblas)
            tblas = cg__now() - t0;
    }
    printf("%zux%zux%zu %s%s openblas %.1f GFLOP/s", m, n, k, ta ? "T" : "N",
           tb ? "T" : "N", 2e-9 * (double)m * n * k / tblas);
    ba = cg_buffer_new(ctx, na * sizeof(float));
    bb = cg_buffer_new(ctx, nb * sizeof(float));
    bc = cg_buffer_new(ctx, nc * sizeof(float));
    if (!ba || !bb || !bc || cg_buffer_write(ba, 0, ha, na * 4) ||
        cg_buffer_write(bb, 0, hb, nb * 4)) {
        fprintf(stderr, "\nbench_gemm: %s\n", cg_last_error());
        return 1;
    }
    for (be = CG__GEMM_CLBLAST; be <= CG__GEMM_PACKED; be++) {
        cg__mat am = { cg__buffer_mem(ba), 0, ta ? m : k };
        cg__mat bm = { cg__buffer_mem(bb), 0, tb ? k : n };
        cg__mat cm = { cg__buffer_mem(bc), 0, n };
        double t, cpu, err = 0, scale = 0;

        /* BENCH_ONLY="34": only backends 3 and 4 (cg__gemm_backend) */
        if (getenv("BENCH_ONLY") && !strchr(getenv("BENCH_ONLY"), '0' + be))
            continue;
        cg__gemm_force(ctx, (cg__gemm_backend)be);
        t = run(ctx, ta, tb, m, n, k, am, bm, cm, reps, &cpu);
        if (t < 0 || cg_buffer_read(bc, 0, hc, nc * 4)) {
            fprintf(stderr, "\nbench_gemm: %s\n", cg_last_error());
            return 1;
        }
        for (j = 0; j < nc; j++) {
            err = fmax(err, fabs((double)hc[j] - ref[j]));
            scale = fmax(scale, fabs((double)ref[j]));
        }
        printf("  %s %.1f GFLOP/s (%.1f per CPU second, err %.1e)",
               be == CG__GEMM_CLBLAST ? "clblast"
               : be == CG__GEMM_PACKED ? "packed" : "clgrad",
               2e-9 * (double)m * n * k / t, 2e-9 * (double)m * n * k / cpu,
               err / scale);
    }
    printf("\n");
    cg_buffer_free(ba);
    cg_buffer_free(bb);
    cg_buffer_free(bc);
    free(ha);
    free(hb);
    free(hc);
    free(ref);
    cg_context_free(ctx);
    return 0;
}
