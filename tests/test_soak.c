/* SPDX-License-Identifier: MIT */
/*
 * tests/test_soak.c - 20,000 training steps of a small character LSTM
 * (embedding, LSTM, linear, cross entropy, gradient clipping, Adam,
 * truncated BPTT with the states carried across batches, as clgrad-train
 * trains), with the context's memory sampled every 1,000 steps: after the
 * first sample (warm-up) the live device bytes, the live buffers, the
 * bytes the pool holds and the blocks it asked the device for never grow.
 * A leak of one buffer a step, or a pool that keeps asking the device for
 * more, fails here long before it would fail a user's week-long run.
 *
 * The host heap (mallinfo2) may not grow by more than HEAP_SLACK over the
 * run either: the OpenCL runtime's own bookkeeping moves by a few KiB,
 * while a leak of 4 bytes a step comes to 76 KB.
 *
 * About 30 s on the 2-core CI machine, so make check runs it.  Under a
 * memory checker (make check-valgrind) it runs 20 samples of 10 steps
 * instead: the same loop, leak-checked.  SOAK_STEPS overrides the number
 * of steps (a multiple of the sampling interval, at least two of them).
 */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cl/internal.h"
#include "testutil.h"

#define VOCAB 17
#define EMBED 8
#define HIDDEN 24
#define T 12
#define B 4
#define HEAP_SLACK (64 * 1024)

typedef struct sample {
    uint64_t live_bytes, live_buffers, held_bytes, device_blocks;
    uint64_t heap;              /* host bytes malloc has handed out */
} sample;

static void
take(cg_context *ctx, sample *s)
{
    cg_memory_stats st;
    const cg_buffer *b;

    ck_assert_int_eq(cg_context_stats(ctx, &st), CG_OK);
    s->live_bytes = st.bytes_in_use;
    s->held_bytes = st.bytes_in_use + st.bytes_cached;
    s->device_blocks = st.device_allocations;
    s->heap = (uint64_t)mallinfo2().uordblks;
    s->live_buffers = 0;
    for (b = ctx->live; b; b = b->next)
        s->live_buffers++;
}

/* A text with structure to learn: a counter written in base VOCAB-1 with
 * a separator, so the model's loss falls well below log(VOCAB). */
static int
text_at(int64_t i)
{
    int64_t word = i / 4, digit = i % 4;

    if (digit == 3)
        return VOCAB - 1;
    for (; digit < 2; digit++)
        word /= VOCAB - 1;
    return (int)(word % (VOCAB - 1));
}

START_TEST(memory_does_not_grow_over_20000_steps)
{
    cg_context *ctx = tt_ctx();
    const char *env = getenv("SOAK_STEPS");
    long every = tt_checker() ? 10 : 1000;
    long steps = env ? atol(env) : 20 * every, step;
    cg_rnn_options o = { CG_LSTM, EMBED, HIDDEN, 1, 0, 1, 0.0f };
    cg_module *emb, *lstm, *head;
    cg_tensor *p[16], *h = NULL, *c = NULL;
    cg_optimizer *opt;
    sample first = { 0 }, s;
    float loss0 = 0, loss = 0;
    int np = 0, i;
    int64_t pos = 0;

    ck_assert_msg(steps >= 2 * every && steps % every == 0,
                  "SOAK_STEPS=%ld: a multiple of %ld, at least %ld", steps,
                  every, 2 * every);
    ck_assert_int_eq(cg_manual_seed(ctx, 5), CG_OK);
    emb = cg_embedding_new(ctx, VOCAB, EMBED);
    lstm = cg_rnn_new(ctx, &o);
    head = cg_linear_new(ctx, HIDDEN, VOCAB, 1);
    ck_assert_msg(emb && lstm && head, "%s", TT_ERR);
    np += cg_module_params(emb, p + np, 16 - np);
    np += cg_module_params(lstm, p + np, 16 - np);
    np += cg_module_params(head, p + np, 16 - np);
    opt = cg_optim_adam_new(ctx, p, np, NULL);
    ck_assert_msg(opt != NULL, "%s", TT_ERR);
    for (step = 1; step <= steps; step++) {
        static const int64_t xs[2] = { B, T }, flat[2] = { B * T, HIDDEN };
        int32_t x[B * T], y[B * T];
        cg_tensor *xt, *yt, *e, *out = NULL, *hn = NULL, *cn = NULL, *o2;
        cg_tensor *logits, *l, *yf;
        int64_t nflat = B * T;

        /* Row b reads the text from its own quarter, T characters a
         * step, so its state carries over from the last step. */
        for (i = 0; i < B * T; i++) {
            int64_t at = (i / T) * 100003 + pos + i % T;

            x[i] = text_at(at);
            y[i] = text_at(at + 1);
        }
        pos += T;
        xt = cg_tensor_from_host(ctx, CG_I32, 2, xs, x);
        yt = xt ? cg_tensor_from_host(ctx, CG_I32, 2, xs, y) : NULL;
        e = yt ? cg_embedding_forward(emb, xt) : NULL;
        ck_assert_msg(e != NULL, "step %ld: %s", step, TT_ERR);
        ck_assert_msg(cg_rnn_forward(lstm, e, h, c, NULL, &out, &hn, &cn)
                      == CG_OK, "step %ld: %s", step, TT_ERR);
        o2 = cg_reshape(out, 2, flat);
        logits = o2 ? cg_linear_forward(head, o2) : NULL;
        yf = logits ? cg_reshape(yt, 1, &nflat) : NULL;
        l = yf ? cg_cross_entropy(logits, yf, CG_REDUCTION_MEAN, -100, 0.0f)
               : NULL;
        ck_assert_msg(l != NULL, "step %ld: %s", step, TT_ERR);
        ck_assert_msg(cg_backward(l, NULL, 0) == CG_OK &&
                      cg_clip_grad_norm(p, np, 1.0, 2.0, NULL) == CG_OK &&
                      cg_optim_step(opt) == CG_OK &&
                      cg_optim_zero_grad(opt) == CG_OK,
                      "step %ld: %s", step, TT_ERR);
        cg_tensor_free(h);
        cg_tensor_free(c);
        h = cg_detach(hn);
        c = cg_detach(cn);
        ck_assert_msg(h && c, "%s", TT_ERR);
        if (step == 1 || step % every == 0)
            ck_assert_int_eq(cg_tensor_item(l, step == 1 ? &loss0 : &loss),
                             CG_OK);
        cg_tensor_free(l);
        cg_tensor_free(yf);
        cg_tensor_free(logits);
        cg_tensor_free(o2);
        cg_tensor_free(hn);
        cg_tensor_free(cn);
        cg_tensor_free(out);
        cg_tensor_free(e);
        cg_tensor_free(yt);
        cg_tensor_free(xt);
        if (step % every)
            continue;
        ck_assert_int_eq(cg_context_finish(ctx), CG_OK);
        take(ctx, &s);
        printf("step %6ld: loss %.4f, live %llu bytes in %llu buffers, "
               "pool holds %llu bytes, %llu device blocks made; host heap "
               "%llu bytes\n", step,
               (double)loss, (unsigned long long)s.live_bytes,
               (unsigned long long)s.live_buffers,
               (unsigned long long)s.held_bytes,
               (unsigned long long)s.device_blocks,
               (unsigned long long)s.heap);
        fflush(stdout);
        if (step == every) {
            first = s;
            continue;
        }
        ck_assert_msg(s.live_bytes <= first.live_bytes &&
                      s.live_buffers <= first.live_buffers &&
                      s.held_bytes <= first.held_bytes &&
                      s.device_blocks <= first.device_blocks &&
                      s.heap <= first.heap + HEAP_SLACK,
                      "step %ld: memory grew since step %ld", step, every);
    }
    /* It learned: the soak ran real training steps. */
    ck_assert_msg(tt_checker() || loss < 0.5f * loss0, "loss %f after %f",
                  (double)loss, (double)loss0);
    cg_tensor_free(h);
    cg_tensor_free(c);
    cg_optim_free(opt);
    cg_module_free(head);
    cg_module_free(lstm);
    cg_module_free(emb);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("soak");
    TCase *tc = tcase_create("soak");

    tt_require_device();
    tcase_set_timeout(tc, 0);
    tcase_add_test(tc, memory_does_not_grow_over_20000_steps);
    suite_add_tcase(s, tc);
    return tt_run(s);
}
