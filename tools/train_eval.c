/* SPDX-License-Identifier: MIT */
/*
 * tools/train_eval.c - clgrad-train's evaluation and sampling: the MLP's
 * held-out loss and accuracy, the character LSTM's validation loss on the
 * held-out end of its text, and text sampled from the LSTM.  All run in
 * evaluation mode (dropout off) without recording a graph, and touch
 * neither the generator nor the training state, so evaluating changes
 * nothing in a run.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_run.h"

int
tr_mlp_eval(run *r, double *loss, double *acc)
{
    int64_t nb = cg_dataset_num_batches(r->test, (int)r->cfg.batch), b;
    int64_t right = 0, seen = 0;
    int32_t *pred = malloc((size_t)r->cfg.batch * sizeof *pred);
    int32_t *lab = malloc((size_t)r->cfg.batch * sizeof *lab);
    double sum = 0;
    int ok = pred && lab;

    if (tr_autocast_begin(r)) {
        free(pred);
        free(lab);
        return -1;
    }
    cg_module_set_training(r->model, 0);
    cg_no_grad_enter();
    for (b = 0; ok && b < nb; b++) {
        cg_tensor *x, *y, *out, *am, *l;
        float lv = 0;
        int n = cg_dataset_batch(r->test, r->ctx, (int)r->cfg.batch, 0, 0, 0,
                                 b, &x, &y), i;

        if (n <= 0) {
            ok = n == 0;
            break;
        }
        out = tr_forward(r, x);
        am = out ? cg_argmax(out, 1, 0) : NULL;
        l = out ? cg_cross_entropy(out, y, CG_REDUCTION_SUM,
                                   CG_IGNORE_INDEX, 0.0f) : NULL;
        ok = am && l && cg_tensor_item(l, &lv) == CG_OK &&
             cg_tensor_to_host(am, pred, (size_t)n * sizeof *pred) ==
             CG_OK &&
             cg_tensor_to_host(y, lab, (size_t)n * sizeof *lab) == CG_OK;
        for (i = 0; ok && i < n; i++)
            right += pred[i] == lab[i];
        sum += lv;
        seen += n;
        cg_tensor_free(l);
        cg_tensor_free(am);
        cg_tensor_free(out);
        cg_tensor_free(x);
        cg_tensor_free(y);
    }
    cg_no_grad_leave();
    cg_module_set_training(r->model, 1);
    tr_autocast_end(r);
    free(pred);
    free(lab);
    if (!ok) {
        tr_fail("evaluating: %s", cg_last_error());
        return -1;
    }
    *acc = seen ? (double)right / (double)seen : 0;
    *loss = seen ? sum / (double)seen : NAN;
    return 0;
}

int
tr_lstm_eval(run *r, double *loss)
{
    int T = (int)r->cfg.seq_len, B = (int)r->cfg.batch;
    int64_t nb = cg_text_num_batches(r->valid, T, B), b, seen = 0;
    cg_tensor *h = NULL, *c = NULL;
    double sum = 0;
    int ok = nb > 0;

    if (nb > TR_EVAL_BATCHES)
        nb = TR_EVAL_BATCHES;
    if (tr_autocast_begin(r))
        return -1;
    cg_module_set_training(r->model, 0);
    cg_no_grad_enter();
    for (b = 0; ok && b < nb; b++) {
        cg_tensor *in = NULL, *tg = NULL, *flat = NULL, *logits, *l = NULL;
        int n = cg_text_batch(r->valid, r->ctx, T, B, b, &in, &tg);
        int64_t n1 = (int64_t)n * B;
        float lv = 0;

        if (n <= 0) {
            ok = 0;
            break;
        }
        flat = cg_reshape(tg, 1, &n1);
        logits = tr_lstm_forward(r->model, in, &h, &c, 1);
        l = logits && flat ? cg_cross_entropy(logits, flat,
                                              CG_REDUCTION_SUM,
                                              CG_IGNORE_INDEX, 0.0f) : NULL;
        ok = l && cg_tensor_item(l, &lv) == CG_OK;
        sum += lv;
        seen += n1;
        cg_tensor_free(l);
        cg_tensor_free(logits);
        cg_tensor_free(flat);
        cg_tensor_free(in);
        cg_tensor_free(tg);
    }
    cg_no_grad_leave();
    cg_module_set_training(r->model, 1);
    tr_autocast_end(r);
    cg_tensor_free(h);
    cg_tensor_free(c);
    if (!ok) {
        tr_fail("validation: %s", cg_last_error());
        return -1;
    }
    *loss = sum / (double)seen;
    return 0;
}

/* The next character from the probabilities p[V] (softmax at the
 * temperature, or at 1 for greedy): the first likeliest when greedy,
 * else drawn with u in [0, 1) among the top_k likeliest (all if 0). */
static int
pick(float *p, int V, int greedy, int top_k, double u)
{
    unsigned char keep[256];
    double total = 0, acc = 0;
    int k, i, best = 0;

    if (greedy)
        top_k = 1;
    if (top_k <= 0 || top_k >= V) {    /* all: the cumulative sum */
        for (k = 0; k < V - 1; k++) {
            acc += p[k];
            if (u < acc)
                break;
        }
        return k;
    }
    memset(keep, 0, sizeof keep);
    for (k = 0; k < top_k; k++) {       /* the k likeliest, first on ties */
        best = -1;
        for (i = 0; i < V; i++)
            if (!keep[i] && (best < 0 || p[i] > p[best]))
                best = i;
        keep[best] = 1;
        total += p[best];
    }
    if (top_k == 1)
        return best;
    for (i = 0; i < V; i++) {
        if (!keep[i])
            continue;
        best = i;
        acc += p[i] / total;
        if (u < acc)
            break;
    }
    return best;
}

int
tr_sample(run *r, int64_t n, uint64_t seed)
{
    int V = r->nvocab, status = CG_OK, greedy = r->cfg.temperature == 0;
    size_t plen = strlen(r->cfg.prime);
    int32_t *ids = malloc((plen ? plen : 1) * sizeof *ids);
    float *p = malloc((size_t)V * sizeof *p);
    cg_tensor *h = NULL, *c = NULL, *logits = NULL;
    uint64_t rng = seed;
    int64_t i, one[2] = { 1, 1 };
    int32_t cur;

    if (!ids || !p)
        status = -1;
    for (i = 0; status == CG_OK && i < (int64_t)plen; i++) {
        ids[i] = r->id_of[(unsigned char)r->cfg.prime[i]];
        if (ids[i] < 0) {
            tr_fail("--prime: the character '%c' is not in the vocabulary",
                    r->cfg.prime[i]);
            status = -2;
        }
    }
    if (status == CG_OK && !plen)
        ids[0] = 0;
    cg_module_set_training(r->model, 0);
    cg_no_grad_enter();
    if (status == CG_OK) {
        int64_t shape = (int64_t)(plen ? plen : 1);
        int64_t s2[2] = { shape, 1 };
        cg_tensor *in = cg_tensor_from_host(r->ctx, CG_I32, 2, s2, ids);
        cg_tensor *all = in ? tr_lstm_forward(r->model, in, &h, &c, 0) : NULL;

        /* The prime's last position's logits. */
        logits = all ? cg_narrow(all, 0, shape - 1, 1) : NULL;
        cg_tensor_free(in);
        cg_tensor_free(all);
        if (!logits)
            status = -1;
        fputs(r->cfg.prime, stdout);
    }
    for (i = 0; status == CG_OK && i < n; i++) {
        cg_tensor *scaled = cg_mul_scalar(logits, greedy ? 1.0f :
                                          (float)(1 / r->cfg.temperature));
        cg_tensor *pr = scaled ? cg_softmax(scaled, -1) : NULL, *in;

        cg_tensor_free(scaled);
        if (!pr || cg_tensor_to_host(pr, p, (size_t)V * sizeof *p)) {
            cg_tensor_free(pr);
            status = -1;
            break;
        }
        cg_tensor_free(pr);
        cur = pick(p, V, greedy, (int)r->cfg.top_k,
                   cg_splitmix64_uniform(&rng));
        putchar(r->vocab[cur]);
        in = cg_tensor_from_host(r->ctx, CG_I32, 2, one, &cur);
        cg_tensor_free(logits);
        logits = in ? tr_lstm_forward(r->model, in, &h, &c, 0) : NULL;
        cg_tensor_free(in);
        if (!logits)
            status = -1;
    }
    cg_no_grad_leave();
    cg_module_set_training(r->model, 1);
    putchar('\n');
    fflush(stdout);
    cg_tensor_free(logits);
    cg_tensor_free(h);
    cg_tensor_free(c);
    free(ids);
    free(p);
    if (status == -1)
        tr_fail("sampling: %s", cg_last_error());
    return status ? -1 : 0;
}
