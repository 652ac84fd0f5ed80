/* SPDX-License-Identifier: MIT */
/*
 * tests/bench_rnn_layer.c - times a whole LSTM layer call, forward and
 * forward + backward, through the fused step kernel and through the GEMM
 * path (CLBlast GEMM + cell kernel per step), to place the hidden size at
 * which the GEMM path wins (CG__RNN_GEMM_MIN_H in lib/nn/rnn.c).  Not run
 * by make check (build with `make tests/bench_rnn_layer`).
 *
 * usage: bench_rnn_layer [T] [B] [H...]
 */
#include <stdio.h>
#include <stdlib.h>

#include "nn/internal.h"

static double
run(cg_context *ctx, cg_module *m, cg_tensor *x, int backward, int reps)
{
    double t0 = 0;
    int i;

    for (i = -2; i < reps; i++) {
        cg_tensor *y = NULL, *s = NULL;
        float v;

        if (i == 0)
            t0 = cg__now();
        if (cg_rnn_forward(m, x, NULL, NULL, NULL, &y, NULL, NULL) ||
            !(s = cg_sum(y, 0, NULL, 0)) ||
            (backward && cg_backward(s, NULL, 0)) || cg_tensor_item(s, &v)) {
            fprintf(stderr, "bench_rnn_layer: %s\n", cg_last_error());
            exit(1);
        }
        cg_tensor_free(s);
        cg_tensor_free(y);
    }
    (void)ctx;
    return (cg__now() - t0) / reps * 1e3;
}

int
main(int argc, char **argv)
{
    int T = argc > 1 ? atoi(argv[1]) : 32, B = argc > 2 ? atoi(argv[2]) : 32;
    int hs[8] = { 128, 256, 512, 1024 }, nh = 4, i, p;
    cg_context *ctx = cg_context_new(NULL);
    cg_device_info info;

    if (argc > 3)
        for (nh = 0; nh + 3 < argc && nh < 8; nh++)
            hs[nh] = atoi(argv[nh + 3]);
    if (!ctx) {
        fprintf(stderr, "bench_rnn_layer: %s\n", cg_last_error());
        return 1;
    }
    cg_context_device_info(ctx, &info);
    printf("device: %s\nLSTM, T=%d B=%d, I=H; ms per call (per step)\n",
           info.name, T, B);
    printf("%6s %22s %22s %22s %22s\n", "H", "fused fwd", "gemm fwd",
           "fused fwd+bwd", "gemm fwd+bwd");
    for (i = 0; i < nh; i++) {
        cg_rnn_options o = { CG_LSTM, hs[i], hs[i], 1, 0, 0, 0.0f };
        int64_t xs[3] = { T, B, hs[i] };
        cg_module *m = cg_rnn_new(ctx, &o);
        cg_tensor *x = cg_rand_uniform(ctx, 3, xs, -1, 1);
        double r[4];
        int reps = hs[i] >= 1024 ? 2 : 5;

        if (!m || !x) {
            fprintf(stderr, "bench_rnn_layer: %s\n", cg_last_error());
            return 1;
        }
        for (p = 0; p < 2; p++) {
            cg__rnn_set_path(m, p ? CG__RNN_PATH_GEMM : CG__RNN_PATH_FUSED);
            r[p] = run(ctx, m, x, 0, reps);
            r[2 + p] = run(ctx, m, x, 1, reps);
        }
        printf("%6d", hs[i]);
        for (p = 0; p < 4; p++)
            printf(" %10.2f (%7.3f)", r[p], r[p] / T);
        printf("\n");
        cg_tensor_free(x);
        cg_module_free(m);
    }
    cg_context_free(ctx);
    return 0;
}
