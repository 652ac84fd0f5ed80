/* SPDX-License-Identifier: MIT */
/*
 * examples/char_lstm.c - a character-level language model: embedding,
 * one LSTM layer, linear, trained with cross-entropy and Adam by truncated
 * backpropagation through time (the state carries over between batches,
 * detached), then a short sample drawn from it.
 *
 *     cc char_lstm.c -o char_lstm $(pkg-config --cflags --libs clgrad)
 *     ./char_lstm $(pkg-config --variable=pkgdatadir clgrad)/kjv.txt 300
 *
 * Arguments: a text file, then the number of training steps (default 60).
 * It prints the loss every 10 steps, "first loss" and "last loss" (means
 * over the first and last 5 steps, in nats per character) and a sample.
 */
#include <stdio.h>
#include <stdlib.h>

#include <clgrad.h>

#define SEQ 32      /* time steps per batch */
#define BATCH 16    /* parallel streams */
#define EMBED 32
#define HIDDEN 128
#define SAMPLE 120
#define AVG 5

typedef struct {
    cg_module *embed, *lstm, *head;
    cg_tensor *h, *c;   /* the state carried between batches */
} model;

static int
fail(const char *what)
{
    fprintf(stderr, "char_lstm: %s: %s\n", what, cg_last_error());
    return 1;
}

/* Logits [T*B, V] for ids [T, B], continuing from m->h and m->c and
 * leaving there the final state, detached (truncated BPTT). */
static cg_tensor *
forward(model *m, cg_tensor *ids)
{
    cg_tensor *x, *y = NULL, *h = NULL, *c = NULL, *flat = NULL, *logits;
    int64_t shape[2] = { -1, HIDDEN };

    x = cg_embedding_forward(m->embed, ids);
    if (x && cg_rnn_forward(m->lstm, x, m->h, m->c, NULL, &y, &h, &c) ==
        CG_OK)
        flat = cg_reshape(y, 2, shape);
    logits = flat ? cg_linear_forward(m->head, flat) : NULL;
    if (logits) {
        cg_tensor_free(m->h);
        cg_tensor_free(m->c);
        m->h = cg_detach(h);
        m->c = cg_detach(c);
    }
    cg_tensor_free(flat);
    cg_tensor_free(c);
    cg_tensor_free(h);
    cg_tensor_free(y);
    cg_tensor_free(x);
    return logits;
}

static int
train_step(model *m, cg_optimizer *opt, const cg_text *text,
           cg_context *ctx, int64_t index, float *loss_value)
{
    cg_tensor *ids, *targets, *logits = NULL, *flat = NULL, *loss = NULL;
    int64_t all = -1;
    int status = cg_text_batch(text, ctx, SEQ, BATCH, index, &ids, &targets);

    if (status <= 0)
        return status ? status : CG_EINVAL;
    logits = forward(m, ids);
    flat = cg_reshape(targets, 1, &all);
    loss = logits && flat ? cg_cross_entropy(logits, flat, CG_REDUCTION_MEAN,
                                             CG_IGNORE_INDEX, 0) : NULL;
    status = loss ? cg_optim_zero_grad(opt) : -1;
    if (status == CG_OK)
        status = cg_backward(loss, NULL, 0);
    if (status == CG_OK)
        status = cg_optim_step(opt);
    if (status == CG_OK)
        status = cg_tensor_item(loss, loss_value);
    cg_tensor_free(loss);
    cg_tensor_free(flat);
    cg_tensor_free(logits);
    cg_tensor_free(targets);
    cg_tensor_free(ids);
    return status;
}

/* Feeds one id through the model (state in m->h, m->c) and writes the
 * next character's probabilities at temperature 0.8 to p[V]. */
static int
next_probs(model *m, cg_context *ctx, int32_t id, float *p, int V)
{
    int64_t one[2] = { 1, 1 };
    cg_tensor *ids = cg_tensor_from_host(ctx, CG_I32, 2, one, &id);
    cg_tensor *logits = ids ? forward(m, ids) : NULL;
    cg_tensor *t = logits ? cg_mul_scalar(logits, 1 / 0.8f) : NULL;
    cg_tensor *probs = t ? cg_softmax(t, 1) : NULL;
    int status = probs ? cg_tensor_to_host(probs, p, V * sizeof *p) : -1;

    cg_tensor_free(probs);
    cg_tensor_free(t);
    cg_tensor_free(logits);
    cg_tensor_free(ids);
    return status;
}

/* `prime`, then SAMPLE characters drawn one by one from the model with a
 * SplitMix64 generator (seeded, so the sample is the same every run). */
static int
sample(model *m, const cg_text *text, cg_context *ctx, const char *prime)
{
    int V = cg_text_vocab_size(text), status = CG_OK, i, k;
    int32_t id = 0;
    uint64_t rng = 7;
    float *p = malloc(V * sizeof *p);
    char out[2];

    if (!p)
        return CG_EHOSTMEM;
    cg_tensor_free(m->h);
    cg_tensor_free(m->c);
    m->h = m->c = NULL;
    cg_no_grad_enter();
    fputs(prime, stdout);
    for (i = 0; prime[i] && status == CG_OK; i++) {
        status = cg_text_encode(text, prime + i, 1, &id);
        if (status == CG_OK)
            status = next_probs(m, ctx, id, p, V);
    }
    for (i = 0; status == CG_OK && i < SAMPLE; i++) {
        double u = cg_splitmix64_uniform(&rng), acc = 0;

        for (k = 0; k < V - 1 && (acc += p[k]) <= u; k++)
            ;
        id = k;
        status = cg_text_decode(text, &id, 1, out);
        if (status == CG_OK) {
            fputc(out[0], stdout);
            status = next_probs(m, ctx, id, p, V);
        }
    }
    cg_no_grad_leave();
    fputc('\n', stdout);
    free(p);
    return status;
}

int
main(int argc, char **argv)
{
    cg_context *ctx = NULL;
    cg_text *text = NULL;
    model m = { NULL, NULL, NULL, NULL, NULL };
    cg_rnn_options lo = { CG_LSTM, EMBED, HIDDEN, 1, 0, 0, 0 };
    cg_adam_options adam = { 3e-3, 0.9, 0.999, 1e-8, 0, 0, 0 };
    cg_optimizer *opt = NULL;
    cg_tensor *params[8];
    int steps = argc > 2 ? atoi(argv[2]) : 60, np = 0, status = 1, i, V;
    int64_t nb;
    double first = 0, last = 0, window = 0;
    float l;

    if (argc < 2 || argc > 3 || steps < 2 * AVG) {
        fprintf(stderr, "usage: char_lstm TEXT [STEPS >= %d]\n", 2 * AVG);
        return 2;
    }
    text = cg_text_load(argv[1], NULL);
    if (!text)
        return fail(argv[1]);
    V = cg_text_vocab_size(text);
    nb = cg_text_num_batches(text, SEQ, BATCH);
    ctx = cg_context_new(NULL);
    if (!ctx) {
        fail("no OpenCL device");
        goto out;
    }
    m.embed = cg_embedding_new(ctx, V, EMBED);
    m.lstm = cg_rnn_new(ctx, &lo);
    m.head = cg_linear_new(ctx, HIDDEN, V, 1);
    if (!m.embed || !m.lstm || !m.head) {
        fail("model");
        goto out;
    }
    /* One optimizer over the three layers' parameters. */
    params[np++] = cg_module_find_param(m.embed, "weight");
    np += cg_module_params(m.lstm, params + np, 4);
    np += cg_module_params(m.head, params + np, 2);
    opt = np == 7 ? cg_optim_adam_new(ctx, params, np, &adam) : NULL;
    if (!opt) {
        fail("optimizer");
        goto out;
    }
    printf("%lld characters, vocabulary %d, %d steps of %d x %d\n",
           (long long)cg_text_length(text), V, steps, SEQ, BATCH);
    for (i = 0; i < steps; i++) {
        if (train_step(&m, opt, text, ctx, i % nb, &l) != CG_OK) {
            fail("training");
            goto out;
        }
        if (i < AVG)
            first += l / AVG;
        if (i >= steps - AVG)
            last += l / AVG;
        window += l;
        if ((i + 1) % 10 == 0) {
            printf("step %d  loss %.4f\n", i + 1, window / 10);
            window = 0;
        }
    }
    printf("first loss %.4f\nlast loss %.4f\n", first, last);
    if (sample(&m, text, ctx, "And God said") != CG_OK) {
        fail("sampling");
        goto out;
    }
    status = 0;
out:
    cg_optim_free(opt);
    cg_tensor_free(m.h);
    cg_tensor_free(m.c);
    cg_module_free(m.head);
    cg_module_free(m.lstm);
    cg_module_free(m.embed);
    cg_context_free(ctx);
    cg_text_free(text);
    return status;
}
