/*
 * tests/bench_rnn_step.c - times one fused LSTM step (forward, and the
 * backward launch) at B = 32, H = 256 for a set of VW/RB/WG variants:
 * many steps are queued back to back, as the layer queues them, and the
 * wall time to clFinish is divided by their number.  Not run by make
 * check (build with `make tests/bench_rnn_step`).
 *
 * usage: bench_rnn_step [STEPS] [B] [H]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/internal.h"

static cg_buffer *
buf(cg_context *ctx, size_t floats)
{
    float *z = calloc(floats, sizeof *z);
    cg_buffer *b = cg_buffer_new(ctx, floats * sizeof *z);
    size_t i;

    for (i = 0; i < floats; i++)
        z[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    if (!b || !z || cg_buffer_write(b, 0, z, floats * sizeof *z)) {
        fprintf(stderr, "bench_rnn_step: %s\n", cg_last_error());
        exit(1);
    }
    free(z);
    return b;
}

#define MEM(b) cg__buffer_mem(b)

/* Milliseconds per forward and per backward step of variant `tune`. */
static int
bench(cg_context *ctx, const cg__rnn_tune *tune, int steps, int B, int H,
      double *fwd_ms, double *bwd_ms)
{
    size_t bh = (size_t)B * H, gh = 4 * (size_t)H;
    cg_buffer *xp, *w, *wt, *wp, *h, *c, *y, *sv, *dh, *dc, *dg;
    cg__rnn_step s;
    double t0 = 0;
    int i, status;

    if ((status = cg__rnn_step_init(&s, ctx, CG__RNN_LSTM, tune)))
        return status;
    xp = buf(ctx, bh * 4), w = buf(ctx, gh * H);
    wt = buf(ctx, gh * (H + 16)), wp = buf(ctx, gh * (H + 16));
    h = buf(ctx, 2 * bh), c = buf(ctx, 2 * bh), y = buf(ctx, bh);
    sv = buf(ctx, 4 * bh), dh = buf(ctx, bh), dc = buf(ctx, bh);
    dg = buf(ctx, 2 * 4 * bh);
    {
        cg__rnn_buf wb = { MEM(w), 0 };

        status = cg__rnn_pack_whh(&s, wb, H, MEM(wt), MEM(wp));
    }
    /* Warm-up (first launches compile and fault pages), then timed runs;
     * states ping-pong between two halves of h and c. */
    for (i = -10; i < steps && status == CG_OK; i++) {
        cg__rnn_fwd_args f;

        if (i == 0) {
            cg_context_finish(ctx);
            t0 = cg__now();
        }
        memset(&f, 0, sizeof f);
        f.B = B, f.H = H, f.t = 0;
        f.whh_t = MEM(wt);
        f.xproj.mem = MEM(xp), f.xproj.ld = (cl_int)gh;
        f.h_prev.mem = f.h_next.mem = MEM(h);
        f.c_prev.mem = f.c_next.mem = MEM(c);
        f.h_prev.off = f.c_prev.off = (cl_int)((i & 1) * bh);
        f.h_next.off = f.c_next.off = (cl_int)((~i & 1) * bh);
        f.y.mem = MEM(y), f.y.ld = H;
        f.saved.mem = MEM(sv);
        status = cg__rnn_forward_step(&s, &f);
    }
    if (status == CG_OK && (status = cg_context_finish(ctx)) == CG_OK)
        *fwd_ms = (cg__now() - t0) * 1e3 / steps;
    for (i = -10; i < steps && status == CG_OK; i++) {
        cg__rnn_bwd_args b;

        if (i == 0) {
            cg_context_finish(ctx);
            t0 = cg__now();
        }
        memset(&b, 0, sizeof b);
        b.B = B, b.H = H, b.t = 0;
        b.whh_p = MEM(wp);
        b.dg_next.mem = MEM(dg), b.dg_next.off = (cl_int)((i & 1) * 4 * bh);
        b.dh = MEM(dh), b.dc = MEM(dc);
        b.saved.mem = MEM(sv);
        b.c_prev.mem = b.c_t.mem = MEM(c);
        b.dg.mem = MEM(dg), b.dg.off = (cl_int)((~i & 1) * 4 * bh);
        status = cg__rnn_backward_step(&s, &b);
    }
    if (status == CG_OK && (status = cg_context_finish(ctx)) == CG_OK)
        *bwd_ms = (cg__now() - t0) * 1e3 / steps;
    {
        cg_buffer *all[] = { xp, w, wt, wp, h, c, y, sv, dh, dc, dg };

        for (i = 0; i < (int)(sizeof all / sizeof *all); i++)
            cg_buffer_free(all[i]);
    }
    cg__rnn_step_release(&s);
    return status;
}

int
main(int argc, char **argv)
{
    static const cg__rnn_tune tunes[] = {
        { 1, 1, 64, 0 }, { 1, 4, 64, 0 }, { 4, 1, 64, 0 }, { 4, 2, 64, 0 },
        { 4, 4, 16, 0 }, { 4, 4, 64, 0 }, { 8, 1, 32, 0 }, { 8, 2, 16, 0 },
        { 8, 4, 8, 0 }, { 8, 4, 32, 0 }, { 16, 1, 16, 0 }, { 16, 2, 8, 0 },
        { 16, 4, 8, 0 }, { 16, 8, 8, 0 }, { 8, 8, 16, 0 }, { 16, 2, 32, 0 },
    };
    int steps = argc > 1 ? atoi(argv[1]) : 200;
    int B = argc > 2 ? atoi(argv[2]) : 32, H = argc > 3 ? atoi(argv[3]) : 256;
    cg_context *ctx = cg_context_new(NULL);
    cg_device_info info;
    size_t i;

    if (!ctx || steps < 1 || B < 1 || H < 1) {
        fprintf(stderr, "bench_rnn_step: %s\n",
                ctx ? "usage: bench_rnn_step [STEPS] [B] [H]"
                    : cg_last_error());
        return ctx ? 2 : 1;
    }
    cg_context_device_info(ctx, &info);
    printf("LSTM step, B=%d H=%d, %d steps, %s\n", B, H, steps, info.name);
    printf("%4s %3s %4s %10s %10s %8s\n", "VW", "RB", "WG", "fwd ms",
           "bwd ms", "items");
    for (i = 0; i < sizeof tunes / sizeof *tunes; i++) {
        double f = 0, b = 0;
        int st = bench(ctx, &tunes[i], steps, B, H, &f, &b);

        if (st) {
            fprintf(stderr, "bench_rnn_step: %s\n", cg_last_error());
            continue;
        }
        printf("%4d %3d %4d %10.3f %10.3f %8d\n", tunes[i].vw, tunes[i].rb,
               tunes[i].wg, f, b, ((H + tunes[i].vw - 1) / tunes[i].vw) *
               ((B + tunes[i].rb - 1) / tunes[i].rb));
    }
    cg_context_free(ctx);
    return 0;
}
