/* SPDX-License-Identifier: MIT */
/*
 * tools/train.c - clgrad-train's engine.
 *
 * Models:
 *   mlp        x [B, F] -> (linear, relu) per hidden width -> linear -> C
 *              class logits; cross-entropy.
 *   char-lstm  ids [T, B] -> embedding [V, E] -> LSTM (layers, hidden) ->
 *              linear -> V logits per step; cross-entropy over all T*B
 *              positions; B streams read consecutive slices of the text,
 *              and the LSTM state is carried (detached) from one batch to
 *              the next: truncated BPTT.
 * Every step is queued without waiting except for reading the loss (one
 * synchronisation per step, for the progress line and the NaN check).
 */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "train_run.h"

/* ------------------------------------------------------------------------
 * Configuration
 * ------------------------------------------------------------------------ */

void
tr_config_defaults(tr_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->layers = 2;
    cfg->embed = 64;
    cfg->seq_len = 100;
    cfg->seed = 1;
    cfg->save_every = 500;
    cfg->sample = 200;
    cfg->sample_every = 500;
    cfg->log_every = 50;
    cfg->holdout = 0.2;
    cfg->momentum = -1;
    cfg->clip = -1;
    cfg->temperature = 0.8;
    cfg->prime = "\n";
    snprintf(cfg->optimizer, sizeof cfg->optimizer, "adam");
    snprintf(cfg->schedule, sizeof cfg->schedule, "constant");
}

int
tr_optimizer_kind(const char *name)
{
    static const char *const names[] = { "adam", "adamw", "sgd", "rmsprop" };
    int i;

    for (i = 0; i < 4; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    return -1;
}

/* Fills in the defaults that depend on the model. */
static void
resolve(tr_config *c)
{
    int opt = tr_optimizer_kind(c->optimizer);

    if (!c->hidden_set) {
        c->hidden[0] = 256;
        c->hidden[1] = 256;
        c->nhidden = c->model == TR_MLP ? 2 : 1;
    }
    if (!c->batch)
        c->batch = c->model == TR_MLP ? 64 : 32;
    if (!c->epochs)
        c->epochs = c->model == TR_MLP ? 20 : 1000000;
    if (c->lr == 0)
        c->lr = opt == 2 ? 0.1 : opt == 3 ? 1e-3
                : c->model == TR_MLP ? 1e-3 : 2e-3;
    if (c->momentum < 0)
        c->momentum = opt == 2 ? 0.9 : 0;
    if (c->clip < 0)
        c->clip = c->model == TR_CHAR_LSTM ? 5 : 0;
}

/* ------------------------------------------------------------------------
 * Messages
 * ------------------------------------------------------------------------ */

void
tr_fail(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "clgrad-train: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
}

double
tr_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------------
 * Progress and log
 * ------------------------------------------------------------------------ */

static void
fmt_time(double s, char *buf, size_t n)
{
    if (!isfinite(s) || s < 0)
        snprintf(buf, n, "?");
    else if (s < 60)
        snprintf(buf, n, "%.0fs", s);
    else if (s < 3600)
        snprintf(buf, n, "%dm%02ds", (int)s / 60, (int)s % 60);
    else
        snprintf(buf, n, "%dh%02dm", (int)s / 3600, (int)s % 3600 / 60);
}

/* One step done: loss, accuracy (NAN if none), lr, items per second. */
static void
progress_step(progress *p, int64_t step, double loss, double acc, double lr,
              double rate, const char *unit, int force)
{
    double el = tr_now() - p->t0;
    char eta[32], elapsed[32];

    if (p->log) {
        char a[32] = "";

        if (!isnan(acc))
            snprintf(a, sizeof a, "%.4f", acc);
        fprintf(p->log, "%lld,%.6f,%s,%.6g,%.1f,%.3f\n", (long long)step,
                loss, a, lr, rate, el);
    }
    if (p->cfg->quiet)
        return;
    fmt_time(el, elapsed, sizeof elapsed);
    fmt_time(p->total > step ? el / (double)step * (double)(p->total - step)
                             : NAN, eta, sizeof eta);
    if (p->tty) {
        int w = 24, filled = p->total ? (int)(w * step / p->total) : 0, i;
        char bar[32];

        if (!force && tr_now() - p->last_print < 0.2)
            return;
        p->last_print = tr_now();
        for (i = 0; i < w; i++)
            bar[i] = i < filled ? '#' : '.';
        bar[w] = 0;
        fprintf(stderr, "\r[%s] step %lld%s%lld loss %.4f  %.0f %s/s  "
                "%s  ETA %s   ", bar, (long long)step,
                p->total ? "/" : "", (long long)p->total, loss, rate, unit,
                elapsed, eta);
        fflush(stderr);
    } else if (force || step % p->cfg->log_every == 0) {
        printf("step %lld loss %.4f lr %.3g %.0f %s/s elapsed %s\n",
               (long long)step, loss, lr, rate, unit, elapsed);
        fflush(stdout);
    }
}

/* Ends a progress line before other output. */
static void
progress_break(progress *p)
{
    if (p->tty && !p->cfg->quiet)
        fprintf(stderr, "\n");
}

/* ------------------------------------------------------------------------
 * Checks
 * ------------------------------------------------------------------------ */

/* The first parameter whose gradient has a non-finite element, or NULL. */
static const char *
first_bad_grad(const cg_module *m)
{
    int i;

    for (i = 0; i < cg_module_num_params(m); i++) {
        const char *name;
        cg_tensor *g = cg_tensor_grad(cg_module_param(m, i, &name));
        int64_t n, j;
        float *v;

        if (!g)
            continue;
        n = cg_tensor_numel(g);
        v = malloc((size_t)n * sizeof *v);
        if (!v || cg_tensor_to_host(g, v, (size_t)n * sizeof *v)) {
            free(v);
            continue;
        }
        for (j = 0; j < n && isfinite(v[j]); j++)
            ;
        free(v);
        if (j < n)
            return name;
    }
    return NULL;
}

/* ------------------------------------------------------------------------
 * One optimizer step
 * ------------------------------------------------------------------------ */

/* Backward from loss, clipping, the update and the schedule; reads the
 * loss into *value.  Returns 0, or -1 after a message (a non-finite loss
 * names the step and the first parameter with a non-finite gradient). */
static int
update(run *r, cg_tensor *loss, float *value)
{
    const char *bad;

    if (cg_backward(loss, NULL, 0) || cg_tensor_item(loss, value)) {
        tr_fail("step %lld: %s", (long long)r->step + 1, cg_last_error());
        return -1;
    }
    if (!isfinite(*value)) {
        bad = first_bad_grad(r->model);
        progress_break(&r->prog);
        tr_fail("step %lld: the loss is %f; stopping%s%s",
                (long long)r->step + 1, (double)*value,
                bad ? ". First parameter with a non-finite gradient: "
                    : " (every gradient is finite)", bad ? bad : "");
        return -1;
    }
    if ((r->cfg.clip > 0 &&
         cg_clip_grad_norm(r->params, r->nparams, r->cfg.clip,
                           2.0, NULL)) ||
        cg_optim_step(r->opt) || cg_optim_zero_grad(r->opt) ||
        (r->sched && cg_lr_schedule_step(r->sched))) {
        tr_fail("step %lld: %s", (long long)r->step + 1, cg_last_error());
        return -1;
    }
    r->step++;
    return 0;
}

/* Whether --stop-at's step is reached. */
static int
at_stop(const run *r)
{
    return r->cfg.stop_at > 0 && r->step >= r->cfg.stop_at;
}

/* Saves when asked to at this step; returns -1 on failure. */
static int
maybe_save(run *r, int force)
{
    if (!r->cfg.checkpoint)
        return 0;
    if (!force && r->step % r->cfg.save_every != 0)
        return 0;
    return tr_save(r, r->cfg.checkpoint);
}

/* The end of one training step shared by both models: the update from
 * `loss` (taken: freed here; NULL reports the last error), the progress
 * line with the throughput of `items` per step in `unit`s (averaged over
 * `window` seconds), and a checkpoint when one is due.  Returns 0 or -1. */
static int
finish_step(run *r, cg_tensor *loss, int64_t items, const char *unit,
            double window, float *loss_v)
{
    progress *p = &r->prog;
    double t;
    int status;

    if (!loss) {
        tr_fail("step %lld: %s", (long long)r->step + 1, cg_last_error());
        return -1;
    }
    status = update(r, loss, loss_v);
    cg_tensor_free(loss);
    if (status)
        return -1;
    r->index++;
    p->rate_items += items;
    t = tr_now();
    progress_step(p, r->step, *loss_v, NAN, cg_optim_get_lr(r->opt),
                  p->rate_items / (t - p->rate_t0 + 1e-9), unit, 0);
    if (t - p->rate_t0 > window) {
        p->rate_t0 = t;
        p->rate_items = 0;
    }
    return maybe_save(r, 0);
}

/* ------------------------------------------------------------------------
 * MLP
 * ------------------------------------------------------------------------ */

/* Held-out accuracy in [0, 1], or -1 on error: the predicted class is
 * the logits' argmax (the first on ties). */
static double
mlp_accuracy(run *r)
{
    int64_t nb = cg_dataset_num_batches(r->test, (int)r->cfg.batch), b;
    int64_t right = 0, seen = 0;
    int32_t *pred = malloc((size_t)r->cfg.batch * sizeof *pred);
    int32_t *lab = malloc((size_t)r->cfg.batch * sizeof *lab);
    int ok = pred && lab;

    cg_module_set_training(r->model, 0);
    cg_no_grad_enter();
    for (b = 0; ok && b < nb; b++) {
        cg_tensor *x, *y, *out, *am;
        int n = cg_dataset_batch(r->test, r->ctx, (int)r->cfg.batch, 0, 0, 0,
                                 b, &x, &y), i;

        if (n <= 0) {
            ok = n == 0;
            break;
        }
        out = cg_module_forward(r->model, x);
        am = out ? cg_argmax(out, 1, 0) : NULL;
        ok = am && cg_tensor_to_host(am, pred, (size_t)n * sizeof *pred) ==
                   CG_OK &&
             cg_tensor_to_host(y, lab, (size_t)n * sizeof *lab) == CG_OK;
        for (i = 0; ok && i < n; i++)
            right += pred[i] == lab[i];
        seen += n;
        cg_tensor_free(am);
        cg_tensor_free(out);
        cg_tensor_free(x);
        cg_tensor_free(y);
    }
    cg_no_grad_leave();
    cg_module_set_training(r->model, 1);
    free(pred);
    free(lab);
    if (!ok) {
        tr_fail("evaluating: %s", cg_last_error());
        return -1;
    }
    return seen ? (double)right / (double)seen : 0;
}

static int
run_mlp(run *r, volatile sig_atomic_t *stop)
{
    float loss_v = NAN;

    while (r->epoch < r->cfg.epochs && !*stop) {
        cg_tensor *x = NULL, *y = NULL, *logits, *loss;
        int n = cg_dataset_batch(r->train, r->ctx, (int)r->cfg.batch, 1,
                                 (uint64_t)r->cfg.seed, r->epoch, r->index,
                                 &x, &y);

        if (n < 0) {
            tr_fail("%s", cg_last_error());
            return 1;
        }
        if (n > 0 && (r->step >= r->total || at_stop(r))) {
            cg_tensor_free(x);
            cg_tensor_free(y);
            break;
        }
        if (n == 0) {           /* end of an epoch */
            double acc = mlp_accuracy(r);

            if (acc < 0)
                return 1;
            if (!r->cfg.quiet) {
                progress_break(&r->prog);
                printf("epoch %lld: loss %.4f, held-out accuracy %.2f%% "
                       "(%lld rows)\n", (long long)r->epoch + 1,
                       (double)loss_v, 100 * acc,
                       (long long)cg_dataset_rows(r->test));
                fflush(stdout);
            }
            if (r->prog.log)
                fprintf(r->prog.log, "%lld,%.6f,%.4f,%.6g,,%.3f\n",
                        (long long)r->step, (double)loss_v, acc,
                        cg_optim_get_lr(r->opt), tr_now() - r->prog.t0);
            r->epoch++;
            r->index = 0;
            continue;
        }
        logits = cg_module_forward(r->model, x);
        loss = logits ? cg_cross_entropy(logits, y, CG_REDUCTION_MEAN,
                                         CG_IGNORE_INDEX, 0.0f) : NULL;
        cg_tensor_free(logits);
        cg_tensor_free(x);
        cg_tensor_free(y);
        if (finish_step(r, loss, n, "rows", 1, &loss_v))
            return 1;
    }
    progress_break(&r->prog);
    return 0;
}

/* ------------------------------------------------------------------------
 * Character LSTM
 * ------------------------------------------------------------------------ */

/* Prints n characters sampled after `prime` at temperature temp. */
static int
sample(run *r, int64_t n, uint64_t seed)
{
    int V = r->nvocab, status = CG_OK;
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
        cg_tensor *scaled = cg_mul_scalar(logits,
                                          (float)(1 / r->cfg.temperature));
        cg_tensor *pr = scaled ? cg_softmax(scaled, -1) : NULL, *in;
        double u, acc = 0;
        int k;

        cg_tensor_free(scaled);
        if (!pr || cg_tensor_to_host(pr, p, (size_t)V * sizeof *p)) {
            cg_tensor_free(pr);
            status = -1;
            break;
        }
        cg_tensor_free(pr);
        u = cg_splitmix64_uniform(&rng);
        for (k = 0; k < V - 1; k++) {
            acc += p[k];
            if (u < acc)
                break;
        }
        cur = k;
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

static int
show_sample(run *r)
{
    if (r->cfg.sample <= 0)
        return 0;
    progress_break(&r->prog);
    printf("--- sample after step %lld (temperature %.2f) ---\n",
           (long long)r->step, r->cfg.temperature);
    return sample(r, r->cfg.sample, (uint64_t)r->cfg.seed * 1000003u +
                                    (uint64_t)r->step);
}

static int
run_char_lstm(run *r, volatile sig_atomic_t *stop)
{
    int T = (int)r->cfg.seq_len, B = (int)r->cfg.batch;
    int64_t nb = cg_text_num_batches(r->text, T, B);
    float loss_v;

    if (nb <= 0) {
        tr_fail("%s: too short for --batch %d: %s", r->cfg.data, B,
                cg_last_error());
        return 1;
    }
    while (r->step < r->total && !at_stop(r) && !*stop) {
        cg_tensor *in = NULL, *tg = NULL, *flat, *logits, *loss;
        int64_t n1;
        int n;

        if (r->index >= nb) {   /* a new pass: the state starts at zero */
            r->epoch++;
            r->index = 0;
            cg_tensor_free(r->h);
            cg_tensor_free(r->c);
            r->h = r->c = NULL;
            if (r->epoch >= r->cfg.epochs)
                break;
        }
        n = cg_text_batch(r->text, r->ctx, T, B, r->index, &in, &tg);
        if (n <= 0) {
            tr_fail("batch %lld: %s", (long long)r->index, cg_last_error());
            return 1;
        }
        n1 = (int64_t)n * B;
        flat = cg_reshape(tg, 1, &n1);
        logits = tr_lstm_forward(r->model, in, &r->h, &r->c, 1);
        loss = logits && flat ? cg_cross_entropy(logits, flat,
                                                 CG_REDUCTION_MEAN,
                                                 CG_IGNORE_INDEX, 0.0f)
                              : NULL;
        cg_tensor_free(logits);
        cg_tensor_free(flat);
        cg_tensor_free(in);
        cg_tensor_free(tg);
        if (finish_step(r, loss, n1, "tok", 2, &loss_v))
            return 1;
        if (r->step % r->cfg.sample_every == 0 && r->step < r->total &&
            show_sample(r))
            return 1;
    }
    progress_break(&r->prog);
    return 0;
}

/* ------------------------------------------------------------------------
 * The run
 * ------------------------------------------------------------------------ */

static void
run_free(run *r)
{
    cg_lr_schedule_free(r->sched);
    cg_optim_free(r->opt);
    cg_module_free(r->model);
    free(r->mean);
    free(r->inv_std);
    cg_tensor_free(r->h);
    cg_tensor_free(r->c);
    cg_dataset_free(r->train);
    cg_dataset_free(r->test);
    cg_text_free(r->text);
    if (r->prog.log)
        fclose(r->prog.log);
    cg_context_free(r->ctx);
}

/* --profile: the kernels that took the most device time. */
static int
print_profile(run *r)
{
    cg_profile_entry e[24];
    double total = 0, steps = r->step - r->first_step > 0
                              ? (double)(r->step - r->first_step) : 1;
    int i, n;

    if (cg_context_profile(r->ctx, e, 24, &n)) {
        tr_fail("profile: %s", cg_last_error());
        return 1;
    }
    /* e holds the largest; the total needs all of them. */
    {
        cg_profile_entry *all = malloc((size_t)(n > 0 ? n : 1) * sizeof *all);

        if (!all || cg_context_profile(r->ctx, all, n, &n)) {
            free(all);
            tr_fail("profile: out of memory");
            return 1;
        }
        for (i = 0; i < n; i++)
            total += all[i].total_us;
        free(all);
    }
    printf("device time by kernel (%d kernels, %.1f ms per step over %.0f "
           "steps, sampling included):\n", n, total / steps / 1e3, steps);
    printf("  %-28s %10s %9s %12s %6s\n", "kernel", "launches", "per step",
           "ms per step", "share");
    for (i = 0; i < n && i < 24; i++)
        printf("  %-28s %10llu %9.1f %12.3f %5.1f%%\n", e[i].name,
               (unsigned long long)e[i].launches,
               (double)e[i].launches / steps, e[i].total_us / steps / 1e3,
               total > 0 ? 100 * e[i].total_us / total : 0.0);
    return 0;
}

int
tr_run(const tr_config *given, volatile sig_atomic_t *stop)
{
    run r;
    cg_checkpoint *ck = NULL;
    int status = 1, sched_status;
    int64_t total_saved = 0;

    memset(&r, 0, sizeof r);
    r.cfg = *given;
    if (r.cfg.resume) {
        ck = cg_checkpoint_load(r.cfg.resume);
        if (!ck) {
            tr_ck_fail("loading", r.cfg.resume);
            return 1;
        }
        if (tr_read_config(ck, &r.cfg, r.cfg.resume))
            goto out;
        cg_checkpoint_get_meta_int(ck, "train.total", &total_saved);
        if (given->model != TR_NONE && given->model != r.cfg.model) {
            tr_fail("%s holds a %s model, not the --model given",
                    r.cfg.resume, r.cfg.model == TR_MLP ? "mlp" : "char-lstm");
            goto out;
        }
    }
    if (r.cfg.model == TR_NONE) {
        tr_fail("say --model mlp or --model char-lstm (or --resume)");
        goto out;
    }
    if (!r.cfg.data && !(r.cfg.sample_only && ck)) {
        tr_fail("--data FILE is needed");
        goto out;
    }
    if (r.cfg.sample_only && (r.cfg.model != TR_CHAR_LSTM || !ck)) {
        tr_fail("--sample-only needs --resume with a char-lstm checkpoint");
        goto out;
    }
    resolve(&r.cfg);
    {
        cg_context_options o = { r.cfg.device, r.cfg.profile, 0 };

        r.ctx = cg_context_new_with(&o);
    }
    if (!r.ctx) {
        tr_fail("%s", cg_last_error());
        goto out;
    }
    cg_manual_seed(r.ctx, (uint64_t)r.cfg.seed);

    /* Data, then the model it implies. */
    if (r.cfg.model == TR_MLP) {
        cg_dataset *all = cg_csv_load(r.cfg.data, NULL);

        if (!all || cg_dataset_split(all, r.cfg.holdout,
                                     (uint64_t)r.cfg.seed, &r.train,
                                     &r.test)) {
            tr_fail("%s", cg_last_error());
            cg_dataset_free(all);
            goto out;
        }
        r.features = cg_dataset_features(all);
        r.classes = cg_dataset_classes(all);
        cg_dataset_free(all);
        if (tr_normalisation(&r, ck))
            goto out;
        if (!(r.model = tr_mlp_new(r.ctx, &r.cfg, r.features, r.classes))) {
            tr_fail("%s", cg_last_error());
            goto out;
        }
        r.total = r.cfg.epochs * cg_dataset_num_batches(r.train,
                                                        (int)r.cfg.batch);
    } else {
        const char *vocab = ck ? cg_checkpoint_get_meta(ck, "data.vocab")
                               : NULL;

        /* Sampling needs the checkpoint's vocabulary only. */
        if (r.cfg.data && !(r.text = cg_text_load(r.cfg.data, vocab))) {
            tr_fail("%s", cg_last_error());
            goto out;
        }
        if (tr_parse_vocab(&r, r.text ? cg_text_vocab(r.text) : vocab)) {
            tr_fail("%s: no valid vocabulary (data.vocab)", r.cfg.resume);
            goto out;
        }
        if (!(r.model = tr_lstm_new(r.ctx, &r.cfg, r.nvocab))) {
            tr_fail("%s", cg_last_error());
            goto out;
        }
        if (r.text)
            r.total = r.cfg.epochs * cg_text_num_batches(r.text,
                                                         (int)r.cfg.seq_len,
                                                         (int)r.cfg.batch);
    }
    if (given->steps)
        r.total = given->steps;
    else if (total_saved)
        r.total = total_saved;
    r.nparams = cg_module_params(r.model, r.params, TR_MAX_PARAMS);
    if (r.nparams > TR_MAX_PARAMS) {
        tr_fail("the model has %d parameter tensors, more than %d", r.nparams,
                TR_MAX_PARAMS);
        goto out;
    }
    r.opt = tr_make_optimizer(r.ctx, &r.cfg, r.params, r.nparams);
    if (!r.opt) {
        tr_fail("%s", cg_last_error());
        goto out;
    }
    r.sched = tr_make_schedule(&r.cfg, r.opt, r.total, &sched_status);
    if (sched_status) {
        tr_fail("%s", cg_last_error());
        goto out;
    }
    if (ck && tr_restore(&r, ck, r.cfg.resume))
        goto out;
    cg_checkpoint_free(ck);
    ck = NULL;
    r.first_step = r.step;

    if (r.cfg.sample_only) {
        status = sample(&r, r.cfg.sample, (uint64_t)r.cfg.seed) ? 1 : 0;
        goto out;
    }
    r.prog.cfg = &r.cfg;
    r.prog.tty = isatty(2);
    r.prog.total = r.total;
    r.prog.t0 = r.prog.rate_t0 = tr_now();
    if (r.cfg.log) {
        r.prog.log = fopen(r.cfg.log, r.cfg.resume ? "a" : "w");
        if (!r.prog.log) {
            tr_fail("%s: cannot write the log", r.cfg.log);
            goto out;
        }
        if (!r.cfg.resume)
            fprintf(r.prog.log, "step,loss,accuracy,lr,items_per_s,"
                    "elapsed_s\n");
    }
    if (!r.cfg.quiet) {
        cg_device_info info;
        int64_t n = 0;
        int i;

        cg_context_device_info(r.ctx, &info);
        for (i = 0; i < r.nparams; i++)
            n += cg_tensor_numel(r.params[i]);
        printf("clgrad-train: %s on %s, %lld parameters, %lld steps%s\n",
               r.cfg.model == TR_MLP ? "mlp" : "char-lstm", info.name,
               (long long)n, (long long)r.total,
               r.step ? " (resumed)" : "");
        fflush(stdout);
    }
    status = r.cfg.model == TR_MLP ? run_mlp(&r, stop)
                                   : run_char_lstm(&r, stop);
    if (*stop && !r.cfg.quiet)
        fprintf(stderr, "clgrad-train: interrupted after step %lld%s\n",
                (long long)r.step, r.cfg.checkpoint ? ", saving" : "");
    if (status == 0 && maybe_save(&r, 1))
        status = 1;
    if (status == 0 && r.cfg.model == TR_CHAR_LSTM && !*stop &&
        !at_stop(&r) && show_sample(&r))
        status = 1;
    if (status == 0 && r.cfg.model == TR_MLP && !*stop && !at_stop(&r) &&
        !r.cfg.quiet) {
        double acc = mlp_accuracy(&r);

        if (acc < 0)
            status = 1;
        else
            printf("final held-out accuracy: %.2f%%\n", 100 * acc);
    }
    if (status == 0 && r.cfg.profile && print_profile(&r))
        status = 1;
out:
    cg_checkpoint_free(ck);
    run_free(&r);
    return status;
}
