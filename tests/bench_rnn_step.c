/* SPDX-License-Identifier: MIT */
/*
 * tests/bench_rnn_step.c - times one fused LSTM step (forward, and the
 * backward launch) at B = 32, H = 256 for a set of VW/RB/WG variants:
 * many steps are queued back to back, as the layer queues them, and the
 * wall time to clFinish is divided by their number.  The variants take
 * turns over ROUNDS rounds and each reports its fastest, so that a slow
 * spell of a shared machine does not land on one variant.  Not run by
 * make check (build with `make tests/bench_rnn_step`).
 *
 * usage: bench_rnn_step [STEPS] [B] [H] [ROUNDS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/internal.h"

int
main(int argc, char **argv)
{
    static const cg__rnn_tune tunes[] = {
        { 1, 1, 64, 0 }, { 1, 4, 64, 0 }, { 4, 1, 64, 0 }, { 4, 2, 64, 0 },
        { 4, 4, 16, 0 }, { 4, 4, 64, 0 }, { 8, 1, 32, 0 }, { 8, 2, 16, 0 },
        { 8, 4, 8, 0 }, { 8, 4, 32, 0 }, { 16, 1, 16, 0 }, { 16, 2, 8, 0 },
        { 16, 4, 8, 0 }, { 16, 8, 8, 0 }, { 8, 8, 16, 0 }, { 16, 2, 32, 0 },
        { 8, 8, 64, 0 }, { 16, 4, 16, 0 }, { 16, 4, 32, 0 },
        { 16, 8, 16, 0 },
    };
    enum { NT = sizeof tunes / sizeof *tunes };
    double fbest[NT], bbest[NT];
    int steps = argc > 1 ? atoi(argv[1]) : 200;
    int B = argc > 2 ? atoi(argv[2]) : 32, H = argc > 3 ? atoi(argv[3]) : 256;
    int rounds = argc > 4 ? atoi(argv[4]) : 3, r;
    cg_context *ctx = cg_context_new(NULL);
    cg_device_info info;
    size_t i;

    if (!ctx || steps < 1 || B < 1 || H < 1 || rounds < 1) {
        fprintf(stderr, "bench_rnn_step: %s\n",
                ctx ? "usage: bench_rnn_step [STEPS] [B] [H] [ROUNDS]"
                    : cg_last_error());
        return ctx ? 2 : 1;
    }
    cg_context_device_info(ctx, &info);
    printf("LSTM step, B=%d H=%d, %d steps, fastest of %d rounds, %s\n",
           B, H, steps, rounds, info.name);
    for (i = 0; i < NT; i++)
        fbest[i] = bbest[i] = -1;
    for (r = 0; r < rounds; r++)
        for (i = 0; i < NT; i++) {
            double f = 0, b = 0;

            if (cg__rnn_time_steps(ctx, CG__RNN_LSTM, &tunes[i], B, H, steps,
                                   &f, &b)) {
                fprintf(stderr, "bench_rnn_step: %s\n", cg_last_error());
                continue;
            }
            if (fbest[i] < 0 || f < fbest[i])
                fbest[i] = f;
            if (bbest[i] < 0 || b < bbest[i])
                bbest[i] = b;
        }
    printf("%4s %3s %4s %10s %10s %8s\n", "VW", "RB", "WG", "fwd ms",
           "bwd ms", "items");
    for (i = 0; i < NT; i++)
        printf("%4d %3d %4d %10.3f %10.3f %8d\n", tunes[i].vw, tunes[i].rb,
               tunes[i].wg, fbest[i], bbest[i],
               ((H + tunes[i].vw - 1) / tunes[i].vw) *
               ((B + tunes[i].rb - 1) / tunes[i].rb));
    cg_context_free(ctx);
    return 0;
}
