/* SPDX-License-Identifier: MIT */
/*
 * tests/bench_rnn_jvp.c - the cost of forward-mode AD through an LSTM
 * layer: a JVP (a dual level, tangents on x and every parameter - or on x
 * alone - and the output's tangent) against the plain forward pass of the
 * same layer, at clgrad-bench's lstm suite's 1x256 case by default (T 64,
 * B 32, input 64, H 256, one layer), all in no-grad mode, each call waited
 * for, the three interleaved round by round (a loaded machine's load then
 * falls on all alike); medians.  Not run by make check (build with `make
 * tests/bench_rnn_jvp`).
 *
 * usage: bench_rnn_jvp [T] [B] [I] [H] [layers] [rounds] [fwd]
 * With "fwd" only the forward pass runs (so that the program builds and
 * runs against a library without forward mode through the layer, to
 * compare its forward pass before and after); launches per call come
 * from cg_context_stats.  $BENCH_PROFILE: a profiling context, and the
 * kernels' device times summed over all calls of the rounds.
 */
#include <stdio.h>
#include <stdlib.h>

#include "nn/internal.h"
#include "tensor/internal.h"

#define MAXR 200

static void
die(void)
{
    fprintf(stderr, "bench_rnn_jvp: %s\n", cg_last_error());
    exit(1);
}

/* One call, waited for: the forward pass (jvp 0) or the JVP (jvp 1:
 * tangents on x and every parameter, or with jvp 2 on x alone); returns
 * its ms and adds its launches to *launches. */
static double
call(cg_context *ctx, cg_module *m, cg_tensor *x, cg_tensor *const *v,
     int jvp, double *launches)
{
    cg_tensor *orig[CG__MODULE_MAX_PARAMS];
    cg_tensor *duals[CG__MODULE_MAX_PARAMS] = { NULL };
    cg_tensor *y = NULL, *ty = NULL, *dx = x;
    cg_memory_stats s0, s1;
    double t0;
    int k, np = jvp == 1 ? m->nparams : 0;

    if (cg_context_finish(ctx))
        die();
    cg_context_stats(ctx, &s0);
    t0 = cg__now();
    if (jvp) {
        if (cg_fwad_enter(ctx) || !(dx = cg_make_dual(x, v[0])))
            die();
        for (k = 0; k < np; k++) {
            if (!(duals[k] = cg_make_dual(m->params[k], v[1 + k])))
                die();
            orig[k] = m->params[k];
            m->params[k] = duals[k];
        }
    }
    if (cg_rnn_forward(m, dx, NULL, NULL, NULL, &y, NULL, NULL))
        die();
    if (jvp) {
        for (k = 0; k < np; k++)
            m->params[k] = orig[k];
        if (!(ty = cg_tangent(y)))
            die();
    }
    if (cg_context_finish(ctx))
        die();
    t0 = (cg__now() - t0) * 1e3;
    cg_tensor_free(ty);
    cg_tensor_free(y);
    if (jvp) {
        for (k = 0; k < np; k++)
            cg_tensor_free(duals[k]);
        cg_tensor_free(dx);
        if (cg_fwad_exit(ctx))
            die();
    }
    cg_context_stats(ctx, &s1);
    *launches += (double)(s1.kernels_enqueued - s0.kernels_enqueued);
    return t0;
}

static int
cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static double
median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The kernels' device times per call since the last reset. */
static void
profile(cg_context *ctx, int on, const char *what, int reps)
{
    cg_profile_entry e[32];
    int n = 0, i;

    if (!on)
        return;
    cg_context_profile(ctx, e, 32, &n);
    printf("%s, us per call:\n", what);
    for (i = 0; i < n && i < 32; i++)
        printf("  %-28s %8.0f us %6.1f launches\n", e[i].name,
               e[i].total_us / reps, (double)e[i].launches / reps);
    cg_context_profile_reset(ctx);
}

int
main(int argc, char **argv)
{
    int T = argc > 1 ? atoi(argv[1]) : 64, B = argc > 2 ? atoi(argv[2]) : 32;
    int I = argc > 3 ? atoi(argv[3]) : 64, H = argc > 4 ? atoi(argv[4]) : 256;
    int L = argc > 5 ? atoi(argv[5]) : 1;
    int reps = argc > 6 ? atoi(argv[6]) : 20, k;
    int fwd_only = argc > 7 && argv[7][0] == 'f';

    if (reps < 1 || reps > MAXR)
        reps = 20;
    cg_context_options co = { NULL, 0, 0 };
    cg_context *ctx;
    cg_tensor *x, *v[1 + CG__MODULE_MAX_PARAMS];
    cg_rnn_options o = { CG_LSTM, 0, 0, 0, 0, 0, 0.0f };
    cg_device_info info;
    cg_module *m;
    int64_t xs[3] = { T, B, I };
    double f[MAXR], j[MAXR], jx[MAXR], r[MAXR], rx[MAXR];
    double lf = 0, lj = 0, lx = 0;
    int i;

    /* $BENCH_PROFILE: a profiling context, and the kernels' device times
     * of forward and JVP printed. */
    co.profiling = getenv("BENCH_PROFILE") != NULL;
    if (!(ctx = cg_context_new_with(&co)))
        die();
    o.input_size = I;
    o.hidden_size = H;
    o.num_layers = L;
    if (!(m = cg_rnn_new(ctx, &o)) ||
        !(x = cg_rand_uniform(ctx, 3, xs, -1, 1)) ||
        !(v[0] = cg_rand_uniform(ctx, 3, xs, -1, 1)))
        die();
    for (k = 0; k < m->nparams; k++)
        if (!(v[1 + k] = cg_rand_uniform(ctx, m->params[k]->ndim,
                                         m->params[k]->shape, -1, 1)))
            die();
    cg_context_device_info(ctx, &info);
    cg_no_grad_enter();
    /* Warm: every kernel built once. */
    for (k = 0; k < (fwd_only ? 1 : 3); k++)
        call(ctx, m, x, v, k, &lf);
    if (co.profiling)
        cg_context_profile_reset(ctx);
    /* Interleaved, so that a loaded machine's changing load falls on
     * both alike; medians, and the median of the per-round ratios. */
    lf = lj = lx = 0;
    for (i = 0; i < reps; i++) {
        f[i] = call(ctx, m, x, v, 0, &lf);
        if (fwd_only)
            continue;
        j[i] = call(ctx, m, x, v, 1, &lj);
        jx[i] = call(ctx, m, x, v, 2, &lx);
        r[i] = j[i] / f[i];
        rx[i] = jx[i] / f[i];
    }
    profile(ctx, co.profiling, "forward, JVP (all), JVP (x)", reps);
    cg_no_grad_leave();
    printf("device: %s\nLSTM %dx%d in %d B%d T%d, %d rounds: forward "
           "%.3f ms (%.0f launches)", info.name, L, H, I, B, T, reps,
           median(f, reps), lf / reps);
    if (!fwd_only)
        printf(";\nJVP along x and every parameter %.3f ms (%.0f launches), "
               "ratio %.2f;\nJVP along x alone %.3f ms (%.0f launches), "
               "ratio %.2f", median(j, reps), lj / reps, median(r, reps),
               median(jx, reps), lx / reps, median(rx, reps));
    printf(" (medians)\n");
    cg_tensor_free(x);
    for (k = 0; k <= m->nparams; k++)
        cg_tensor_free(v[k]);
    cg_module_free(m);
    cg_context_free(ctx);
    return 0;
}
