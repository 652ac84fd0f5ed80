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
 *              the next: truncated BPTT.  The end of the text (--holdout)
 *              is held out for validation.
 * Evaluation (train_eval.c) touches neither the generator nor the
 * training state, so when a run evaluates does not change what it
 * learns: a resumed run stays bit-identical to one that never stopped.
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
    cfg->layers = cfg->embed = cfg->seq_len = cfg->batch = -1;
    cfg->warmup = cfg->step_size = cfg->seed = -1;
    cfg->dropout = cfg->holdout = cfg->lr = cfg->momentum = -1;
    cfg->weight_decay = cfg->clip = cfg->gamma = cfg->min_lr = -1;
    cfg->save_every = 500;
    cfg->sample = 200;
    cfg->sample_every = 500;
    cfg->log_every = 50;
    cfg->eval_every = 100;
    cfg->temperature = 0.8;
    cfg->prime = "\n";
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

/* Fills in the defaults of what neither the command line nor a
 * checkpoint set; some depend on the model. */
const char *
tr_model_name(tr_model_kind kind)
{
    return kind == TR_MLP ? "mlp" : kind == TR_CNN ? "cnn"
           : kind == TR_CHAR_LSTM ? "char-lstm" : NULL;
}

tr_model_kind
tr_model_parse(const char *name)
{
    return strcmp(name, "mlp") == 0 ? TR_MLP
           : strcmp(name, "cnn") == 0 ? TR_CNN
           : strcmp(name, "char-lstm") == 0 ? TR_CHAR_LSTM : TR_NONE;
}

static void
resolve(tr_config *c)
{
    /* mlp: the models of CSV data, the MLP and the CNN. */
    int mlp = c->model == TR_MLP || c->model == TR_CNN, opt;

    if (!c->optimizer[0])
        snprintf(c->optimizer, sizeof c->optimizer, "adam");
    if (!c->schedule[0])
        snprintf(c->schedule, sizeof c->schedule, "constant");
    opt = tr_optimizer_kind(c->optimizer);
    if (!c->hidden_set) {
        c->hidden[0] = c->model == TR_CNN ? 32 : 256;
        c->hidden[1] = c->model == TR_CNN ? 64 : 256;
        c->nhidden = mlp ? 2 : 1;
    }
#define DEF(f, v) if (c->f < 0) c->f = v
    DEF(layers, 2);
    DEF(embed, 64);
    DEF(seq_len, 100);
    DEF(batch, mlp ? 64 : 32);
    DEF(warmup, 0);
    DEF(step_size, 0);          /* 0: a third of the run */
    DEF(seed, 1);
    DEF(dropout, 0);
    DEF(holdout, mlp ? 0.2 : 0.05);
    DEF(lr, opt == 2 ? 0.1 : opt == 3 ? 1e-3 : mlp ? 1e-3 : 2e-3);
    DEF(momentum, opt == 2 ? 0.9 : 0);
    DEF(weight_decay, 0);
    DEF(clip, mlp ? 0 : 5);
    DEF(gamma, 0);              /* 0: the schedule's default */
    DEF(min_lr, 0);
#undef DEF
    if (!c->epochs && !c->steps) {
        if (mlp)
            c->epochs = TR_MLP_EPOCHS;
        else
            c->steps = TR_LSTM_STEPS;
    }
    if (!c->epochs)
        c->epochs = INT64_MAX / 2;
}

/* ------------------------------------------------------------------------
 * Messages
 * ------------------------------------------------------------------------ */

void
tr_fail(const char *fmt, ...)
{
    char msg[4096];
    size_t n;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* A detail that came out empty ("...: " and cg_last_error() "") is
     * said, not left as a dangling colon. */
    n = strlen(msg);
    while (n > 0 && msg[n - 1] == ' ')
        msg[--n] = '\0';
    if (n > 0 && msg[n - 1] == ':')
        snprintf(msg + n - 1, sizeof msg - n + 1, " (no detail given)");
    fprintf(stderr, "clgrad-train: %s\n", msg);
}

double
tr_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
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

/* How a message names a model or data option: "--batch" when the
 * command line gave it, "the checkpoint's config.batch" when a resumed
 * run took it from there, "the default batch" otherwise.  The returned
 * string is one of a few static buffers. */
static const char *
opt_name(const run *r, const char *opt)
{
    static char buf[4][160];
    static int next;
    char *b = buf[next++ % 4], key[32];
    int64_t given = -1;
    size_t i;

    if (strcmp(opt, "batch") == 0)
        given = r->given_batch;
    else if (strcmp(opt, "seq-len") == 0)
        given = r->given_seq_len;
    if (given >= 0 || !r->cfg.resume) {
        snprintf(b, sizeof buf[0], given >= 0 ? "--%s" : "the default "
                 "--%s", opt);
        return b;
    }
    snprintf(key, sizeof key, "%s", opt);
    for (i = 0; key[i]; i++)
        if (key[i] == '-')
            key[i] = '_';
    snprintf(b, sizeof buf[0], "%s's config.%s", r->cfg.resume, key);
    return b;
}

/* ------------------------------------------------------------------------
 * One optimizer step
 * ------------------------------------------------------------------------ */

int
tr_autocast_begin(run *r)
{
    if (r->cfg.precision == CG_F32 ||
        cg_autocast_begin(r->ctx, (cg_dtype)r->cfg.precision) == CG_OK)
        return 0;
    tr_fail("%s", cg_last_error());
    return -1;
}

void
tr_autocast_end(run *r)
{
    if (r->cfg.precision != CG_F32)
        cg_autocast_end(r->ctx);
}

/* The scaler's skipped steps, read back every --log-every steps and at the
 * end (a wait): a line when more were skipped since the last look. */
static int
report_skipped(run *r, int last)
{
    int64_t n;
    float scale;

    if (!r->scaler || (!last && r->step % r->cfg.log_every))
        return 0;
    if (cg_grad_scaler_skipped_steps(r->scaler, &n) ||
        cg_grad_scaler_get_scale(r->scaler, &scale)) {
        tr_fail("step %lld: %s", (long long)r->step, cg_last_error());
        return -1;
    }
    if (n > r->skipped && !r->cfg.quiet) {
        tr_progress_break(&r->prog);
        printf("step %lld: fp16 gradients overflowed: %lld step%s skipped "
               "so far, the loss scale is now %g\n", (long long)r->step,
               (long long)n, n == 1 ? "" : "s", (double)scale);
        fflush(stdout);
    }
    r->skipped = n;
    return 0;
}

/* Backward from loss (scaled, in fp16), clipping, the update and the
 * schedule; reads the loss into *value.  Returns 0, or -1 after a message
 * (a non-finite loss names the step and the first parameter with a
 * non-finite gradient).  In fp16 a step whose gradients overflow is
 * skipped on the device by the loss scaler, which then backs off. */
static int
update(run *r, cg_tensor *loss, float *value)
{
    cg_tensor *scaled = r->scaler ? cg_grad_scaler_scale(r->scaler, loss)
                                  : cg_tensor_ref(loss);
    const char *bad;
    int rc;

    rc = !scaled || cg_backward(scaled, NULL, 0);
    cg_tensor_free(scaled);
    if (rc || cg_tensor_item(loss, value)) {
        tr_fail("step %lld: %s", (long long)r->step + 1, cg_last_error());
        return -1;
    }
    if (!isfinite(*value)) {
        bad = first_bad_grad(r->model);
        tr_progress_break(&r->prog);
        tr_fail("step %lld: the loss is %f; stopping%s%s",
                (long long)r->step + 1, (double)*value,
                bad ? ". First parameter with a non-finite gradient: "
                    : " (every gradient is finite)", bad ? bad : "");
        return -1;
    }
    /* fp16: clipping needs the gradients unscaled first */
    rc = r->cfg.clip > 0 &&
         ((r->scaler && cg_grad_scaler_unscale(r->scaler, r->opt)) ||
          cg_clip_grad_norm(r->params, r->nparams, r->cfg.clip, 2.0, NULL));
    if (!rc)
        rc = r->scaler ? cg_grad_scaler_step(r->scaler, r->opt) ||
                         cg_grad_scaler_update(r->scaler)
                       : cg_optim_step(r->opt);
    if (rc || cg_optim_zero_grad(r->opt) ||
        (r->sched && cg_lr_schedule_step(r->sched))) {
        tr_fail("step %lld: %s", (long long)r->step + 1, cg_last_error());
        return -1;
    }
    r->step++;
    return report_skipped(r, 0);
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
    return tr_save(r, r->cfg.checkpoint, NAN);
}

/* Under mpirun with --save-best: rank 0 alone evaluates, but a checkpoint
 * is collective (it gathers the character LSTM's state from every rank),
 * so every rank comes to each evaluation and rank 0 tells the others
 * whether it gave the best loss so far, and then every rank takes its
 * part in saving it (rank 0 writes, atomically as always). */
static int
best_shared(const run *r)
{
    return r->best_path && r->dp && tr_mpi_world() > 1;
}

/* Rank 0's verdict (1 the best so far, 0 not, -1 its evaluation failed)
 * and loss to every rank (a collective call): returns rank 0's verdict,
 * or -2 after a message. */
static int
share_verdict(run *r, int verdict, double loss, double *loss0)
{
    float local[2] = { (float)verdict, (float)loss }, *all;
    int v;

    if (!(all = malloc((size_t)r->world * sizeof local))) {
        tr_fail("out of host memory");
        return -2;
    }
    if (cg_dp_gather(r->dp, local, 2, all) != CG_OK) {
        tr_fail("--save-best: sharing rank 0's evaluation: %s",
                cg_last_error());
        free(all);
        return -2;
    }
    v = (int)all[0];
    if (loss0)
        *loss0 = all[1];
    free(all);
    return v;
}

/* Rank 0's evaluation failed (its message is out): the other ranks are
 * told, with --save-best under mpirun.  -1. */
static int
eval_failed(run *r)
{
    if (best_shared(r))
        share_verdict(r, -1, NAN, NULL);
    return -1;
}

/* A rank other than 0 at one of rank 0's evaluations: with --save-best
 * under mpirun, its part in saving the best checkpoint.  0 or -1. */
static int
peer_evaluated(run *r)
{
    double loss = NAN;
    int v;

    r->eval_step = r->step;
    if (!best_shared(r))
        return 0;
    if ((v = share_verdict(r, 0, NAN, &loss)) < 0) {
        if (v == -1)
            tr_fail("step %lld: rank 0's evaluation failed; stopping",
                    (long long)r->step);
        return -1;
    }
    return v ? tr_save(r, r->best_path, loss) : 0;
}

/* A validation loss at this step: the best so far (with --save-best, its
 * checkpoint) and the plot.  Returns 0 or -1. */
static int
evaluated(run *r, double loss)
{
    int best = loss < r->best_loss || isnan(r->best_loss);

    r->val_loss = loss;
    r->eval_step = r->step;
    tr_plot_add(&r->prog, r->step, r->prog.loss, loss);
    if (best) {
        r->best_loss = loss;
        r->best_step = r->step;
    }
    if (best_shared(r) && share_verdict(r, best, loss, NULL) < 0)
        return -1;
    return best && r->best_path ? tr_save(r, r->best_path, loss) : 0;
}

/* The end of one training step shared by both models: the update from
 * `loss` (taken: freed here; NULL reports the last error), the progress
 * line with the throughput of `items` per step in `unit`s (averaged over
 * `window` seconds), and a checkpoint when one is due.  Returns 0 or -1. */
static int step_done(run *r, float v, int64_t items, const char *unit,
                     double window);

static int
finish_step(run *r, cg_tensor *loss, int64_t items, const char *unit,
            double window)
{
    float v;
    int status;

    if (!loss) {
        tr_fail("step %lld: %s", (long long)r->step + 1, cg_last_error());
        return -1;
    }
    status = update(r, loss, &v);
    cg_tensor_free(loss);
    if (status)
        return -1;
    return step_done(r, v, items, unit, window);
}

/* A data-parallel step (train_dp.c) on the batch x, y of n rows or time
 * steps, then the same end as finish_step's; x and y are freed.  0 or
 * -1. */
static int
finish_dp_step(run *r, cg_tensor *x, cg_tensor *y, int64_t n,
               int64_t items, const char *unit, double window)
{
    float v;
    int status = tr_dp_step(r, x, y, n, &v);

    cg_tensor_free(x);
    cg_tensor_free(y);
    if (status)
        return -1;
    if (!isfinite(v)) {
        tr_progress_break(&r->prog);
        tr_fail("step %lld: the loss is %f; stopping",
                (long long)r->step + 1, (double)v);
        return -1;
    }
    r->step++;
    if (report_skipped(r, 0))
        return -1;
    return step_done(r, v, items, unit, window);
}

/* The progress line and the checkpoint after a step's update, whose
 * loss was v. */
static int
step_done(run *r, float v, int64_t items, const char *unit, double window)
{
    progress *p = &r->prog;
    double t;

    r->index++;
    r->epoch_loss += v;
    r->epoch_steps++;
    p->rate_items += items;
    p->items += items;
    t = tr_now();
    tr_progress_step(p, r->step, v, cg_optim_get_lr(r->opt),
                     p->rate_items / (t - p->rate_t0 + 1e-9), unit);
    if (r->step % 10 == 0 || r->step == p->end)
        tr_plot_add(p, r->step, v, NAN);
    if (t - p->rate_t0 > window) {
        p->rate_t0 = t;
        p->rate_items = 0;
    }
    return maybe_save(r, 0);
}

/* ------------------------------------------------------------------------
 * MLP
 * ------------------------------------------------------------------------ */

/* The end of an epoch: its mean training loss, the held-out loss and
 * accuracy.  Returns 0 or -1. */
static int
mlp_epoch_end(run *r)
{
    double mean = r->epoch_steps ? r->epoch_loss / (double)r->epoch_steps
                                 : NAN, loss, acc;

    if (tr_mlp_eval(r, &loss, &acc))
        return eval_failed(r);
    if (!r->cfg.quiet) {
        tr_progress_break(&r->prog);
        printf("epoch %lld: loss %.4f (the epoch's mean), held-out loss "
               "%.4f, accuracy %.2f%% (%lld rows)\n",
               (long long)r->epoch + 1, mean, loss, 100 * acc,
               (long long)cg_dataset_rows(r->test));
        fflush(stdout);
    }
    tr_progress_log(&r->prog, r->step, mean, acc, cg_optim_get_lr(r->opt),
                    NAN, loss);
    r->epoch_loss = 0;
    r->epoch_steps = 0;
    return evaluated(r, loss);
}

static int
run_mlp(run *r, volatile sig_atomic_t *stop)
{
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
            if (r->rank == 0 ? mlp_epoch_end(r) : peer_evaluated(r))
                return 1;
            r->epoch++;
            r->index = 0;
            continue;
        }
        if (r->dp) {
            if (finish_dp_step(r, x, y, n, n, "rows", 1))
                return 1;
            continue;
        }
        if (tr_autocast_begin(r))
            return 1;
        logits = tr_forward(r, x);
        loss = logits ? cg_cross_entropy(logits, y, CG_REDUCTION_MEAN,
                                         CG_IGNORE_INDEX, 0.0f) : NULL;
        tr_autocast_end(r);
        cg_tensor_free(logits);
        cg_tensor_free(x);
        cg_tensor_free(y);
        if (finish_step(r, loss, n, "rows", 1))
            return 1;
    }
    tr_progress_break(&r->prog);
    return 0;
}

/* ------------------------------------------------------------------------
 * Character LSTM
 * ------------------------------------------------------------------------ */

static int
show_sample(run *r)
{
    if (r->cfg.sample <= 0)
        return 0;
    tr_progress_break(&r->prog);
    printf("--- sample after step %lld (temperature %.2f) ---\n",
           (long long)r->step, r->cfg.temperature);
    return tr_sample(r, r->cfg.sample, (uint64_t)r->cfg.seed * 1000003u +
                                       (uint64_t)r->step);
}

/* The validation loss on the held-out text, printed and logged. */
static int
lstm_validate(run *r)
{
    double loss;

    if (!r->valid)
        return 0;
    if (tr_lstm_eval(r, &loss))
        return eval_failed(r);
    if (!r->cfg.quiet) {
        tr_progress_break(&r->prog);
        printf("step %lld: validation loss %.4f (%.3f bits per "
               "character)\n", (long long)r->step, loss, loss / log(2.0));
        fflush(stdout);
    }
    tr_progress_log(&r->prog, r->step, r->prog.loss, NAN,
                    cg_optim_get_lr(r->opt), NAN, loss);
    return evaluated(r, loss);
}

/* One step on ids `in` and targets `tg` [n, B] (both freed), n1 = n B
 * tokens: forward, the loss, finish_step.  0 or -1. */
static int
lstm_step(run *r, cg_tensor *in, cg_tensor *tg, int64_t n1)
{
    cg_tensor *flat = cg_reshape(tg, 1, &n1), *logits, *loss;

    if (tr_autocast_begin(r)) {
        cg_tensor_free(flat);
        cg_tensor_free(in);
        cg_tensor_free(tg);
        return -1;
    }
    logits = tr_lstm_forward(r->model, in, &r->h, &r->c, 1);
    loss = logits && flat ? cg_cross_entropy(logits, flat, CG_REDUCTION_MEAN,
                                             CG_IGNORE_INDEX, 0.0f)
                          : NULL;
    tr_autocast_end(r);
    cg_tensor_free(logits);
    cg_tensor_free(flat);
    cg_tensor_free(in);
    cg_tensor_free(tg);
    return finish_step(r, loss, n1, "tok", 2);
}

static int
run_char_lstm(run *r, volatile sig_atomic_t *stop)
{
    int T = (int)r->cfg.seq_len, B = (int)r->cfg.batch;
    int64_t nb = cg_text_num_batches(r->text, T, B);

    if (nb <= 0) {
        tr_fail("%s: %lld bytes for training are too few for one batch of "
                "%s %d and %s %d (%d sequences of %d + 1 bytes)%s%s",
                r->cfg.data, (long long)cg_text_length(r->text),
                opt_name(r, "seq-len"), T, opt_name(r, "batch"), B, B, T,
                cg_last_error()[0] ? ": " : "", cg_last_error());
        return 1;
    }
    while (r->step < r->total && !at_stop(r) && !*stop) {
        cg_tensor *in = NULL, *tg = NULL;
        int64_t n1;
        int n;

        if (r->index >= nb) {   /* a new pass: the state starts at zero */
            r->epoch++;
            r->index = 0;
            cg_tensor_free(r->h);
            cg_tensor_free(r->c);
            r->h = r->c = NULL;
            tr_dp_reset_state(r);
            if (r->epoch >= r->cfg.epochs)
                break;
        }
        n = cg_text_batch(r->text, r->ctx, T, B, r->index, &in, &tg);
        if (n <= 0) {
            tr_fail("batch %lld: %s", (long long)r->index, cg_last_error());
            return 1;
        }
        n1 = (int64_t)n * B;
        if (r->dp ? finish_dp_step(r, in, tg, n, n1, "tok", 2)
                  : lstm_step(r, in, tg, n1))
            return 1;
        if (r->step % r->cfg.eval_every == 0 && r->step < r->prog.end &&
            (r->rank == 0 ? lstm_validate(r)
                          : r->valid ? peer_evaluated(r) : 0))
            return 1;
        if (r->rank != 0)       /* rank 0 evaluates and samples */
            continue;
        if (r->step % r->cfg.sample_every == 0 && r->step < r->total &&
            show_sample(r))
            return 1;
    }
    tr_progress_break(&r->prog);
    return 0;
}

/* ------------------------------------------------------------------------
 * The run
 * ------------------------------------------------------------------------ */

static void
run_free(run *r)
{
    tr_dp_free(r);
    cg_lr_schedule_free(r->sched);
    cg_grad_scaler_free(r->scaler);
    cg_optim_free(r->opt);
    cg_module_free(r->model);
    free(r->mean);
    free(r->inv_std);
    cg_tensor_free(r->h);
    cg_tensor_free(r->c);
    cg_dataset_free(r->train);
    cg_dataset_free(r->test);
    cg_text_free(r->text);
    cg_text_free(r->valid);
    if (r->prog.log)
        fclose(r->prog.log);
    free(r->prog.pts);
    free(r->best_path);
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

/* Sampling's --prime against the vocabulary, before any training: the
 * default "\n" gives way to the vocabulary's first character when the
 * text has no newline; a given prime must be in the vocabulary. */
static int
check_prime(run *r)
{
    const char *p;

    if (r->cfg.sample <= 0)
        return 0;
    if (!r->cfg.prime_set && r->id_of['\n'] < 0) {
        r->cfg.prime = "";
        return 0;
    }
    for (p = r->cfg.prime; *p; p++)
        if (r->id_of[(unsigned char)*p] < 0) {
            if (*p >= 0x20 && *p < 0x7f)
                tr_fail("--prime: the character '%c' is not in the "
                        "vocabulary of %s", *p, r->cfg.data ? r->cfg.data
                        : r->cfg.resume);
            else
                tr_fail("--prime: the byte 0x%02x is not in the "
                        "vocabulary of %s", (unsigned char)*p,
                        r->cfg.data ? r->cfg.data : r->cfg.resume);
            return -1;
        }
    return 0;
}

/* Every weight tensor within the library's 2^31-1 elements, checked
 * before the model is built so that the message names the layer and the
 * option behind it (-1 after a message). */
static int
check_sizes(const run *r)
{
    const tr_config *c = &r->cfg;
    int64_t lim = INT32_MAX, w, n;
    int i;

    if (c->model == TR_CNN) {
        int64_t side = 1;

        while (side * side < r->features)
            side++;
        if (side * side != r->features || side >> c->nhidden == 0 ||
            side % ((int64_t)1 << c->nhidden)) {
            tr_fail("--model cnn reads each row of %lld features as a "
                    "square image whose side halves at each of the %d "
                    "blocks (--hidden): %lld is no such square",
                    (long long)r->features, c->nhidden,
                    (long long)r->features);
            return -1;
        }
        for (i = 0, w = 1; i < c->nhidden; i++)
            w = c->hidden[i];
        n = w * (side >> c->nhidden) * (side >> c->nhidden);
        if (n * r->classes > lim) {
            tr_fail("layer fc (%lld inputs, %lld classes) would hold more "
                    "than 2^31-1 weights", (long long)n,
                    (long long)r->classes);
            return -1;
        }
        return 0;
    }
    if (c->model == TR_MLP) {
        for (i = 0, w = r->features; i <= c->nhidden; i++) {
            n = i < c->nhidden ? c->hidden[i] : r->classes;
            if (w * n > lim) {
                tr_fail("layer fc%d (%lld inputs, %lld outputs%s) would "
                        "hold %lld weights, more than 2^31-1 elements in "
                        "one tensor: give smaller --hidden widths", i,
                        (long long)w, (long long)n, i < c->nhidden ? ""
                        : ": the classes", (long long)(w * n));
                return -1;
            }
            w = n;
        }
        return 0;
    }
    n = c->hidden[0];
    if (4 * n * n > lim || 4 * n * c->embed > lim) {
        tr_fail("layer lstm (--hidden %lld, --embed %lld) would hold %lld "
                "weights in one tensor, more than 2^31-1 elements",
                (long long)n, (long long)c->embed,
                (long long)(4 * n * (n > c->embed ? n : c->embed)));
        return -1;
    }
    return 0;
}

/* The data, then the model it implies. */
static int
build(run *r, const cg_checkpoint *ck)
{
    if (r->cfg.model == TR_MLP || r->cfg.model == TR_CNN) {
        cg_dataset *all = cg_csv_load(r->cfg.data, NULL);

        if (all && r->cfg.eval_only) {
            r->test = all;      /* every row; no training set */
            all = NULL;
            r->features = cg_dataset_features(r->test);
            r->classes = cg_dataset_classes(r->test);
        } else if (!all || cg_dataset_split(all, r->cfg.holdout,
                                     (uint64_t)r->cfg.seed, &r->train,
                                     &r->test)) {
            tr_fail("%s", cg_last_error());
            cg_dataset_free(all);
            return -1;
        } else {
            r->features = cg_dataset_features(all);
            r->classes = cg_dataset_classes(all);
            cg_dataset_free(all);
        }
        if (tr_normalisation(r, ck) || check_sizes(r))
            return -1;
        r->model = r->cfg.model == TR_CNN
                   ? tr_cnn_new(r->ctx, &r->cfg, r->features, r->classes)
                   : tr_mlp_new(r->ctx, &r->cfg, r->features, r->classes);
        r->total = r->cfg.steps || !r->train ? r->cfg.steps
                   : r->cfg.epochs * cg_dataset_num_batches(r->train,
                                                            (int)r->cfg.batch);
    } else {
        const char *vocab = ck ? cg_checkpoint_get_meta(ck, "data.vocab")
                               : NULL;
        cg_text *all = NULL;

        /* Sampling needs the checkpoint's vocabulary only. */
        if (r->cfg.data && !r->cfg.sample_only &&
            (!(all = cg_text_load(r->cfg.data, vocab)) ||
             (r->cfg.holdout > 0 &&
              cg_text_split(all, r->cfg.holdout, &r->text, &r->valid)))) {
            tr_fail("%s", cg_last_error());
            cg_text_free(all);
            return -1;
        }
        if (all && !r->text)
            r->text = all;
        else
            cg_text_free(all);
        if (r->valid && cg_text_num_batches(r->valid, (int)r->cfg.seq_len,
                                            (int)r->cfg.batch) <= 0) {
            tr_fail("%s: the held-out %lld bytes (--holdout %g) are too "
                    "few for %s %lld; give a larger --holdout, or 0",
                    r->cfg.data, (long long)cg_text_length(r->valid),
                    r->cfg.holdout, opt_name(r, "batch"),
                    (long long)r->cfg.batch);
            return -1;
        }
        if (tr_parse_vocab(r, r->text ? cg_text_vocab(r->text) : vocab)) {
            tr_fail("%s: no valid vocabulary (data.vocab)", r->cfg.resume);
            return -1;
        }
        if (check_prime(r) || check_sizes(r))
            return -1;
        r->model = tr_lstm_new(r->ctx, &r->cfg, r->nvocab);
        r->total = r->cfg.steps || !r->text ? r->cfg.steps
                   : r->cfg.epochs * cg_text_num_batches(r->text,
                                                         (int)r->cfg.seq_len,
                                                         (int)r->cfg.batch);
    }
    if (!r->model) {
        tr_fail("%s", cg_last_error());
        return -1;
    }
    return 0;
}

/* --save-best's file: the checkpoint's name with .best before its
 * extension; resuming, the best loss so far is the one it holds. */
static int
best_path(run *r)
{
    const char *ck = r->cfg.checkpoint, *slash = strrchr(ck, '/');
    const char *dot = strrchr(ck, '.');
    size_t n = strlen(ck) + 8;
    cg_checkpoint *old;
    double v;

    if (!dot || (slash && dot < slash))
        dot = ck + strlen(ck);
    if (!(r->best_path = malloc(n))) {
        tr_fail("out of memory");
        return -1;
    }
    snprintf(r->best_path, n, "%.*s.best%s", (int)(dot - ck), ck, dot);
    if (r->cfg.resume && access(r->best_path, F_OK) == 0) {
        if (!(old = cg_checkpoint_load(r->best_path)))
            return tr_ck_fail("loading", r->best_path);
        if (cg_checkpoint_get_meta_double(old, "train.val_loss", &v) ==
            CG_OK)
            r->best_loss = v;
        cg_checkpoint_free(old);
    }
    return 0;
}

static void
headline(run *r)
{
    cg_device_info info;
    int64_t n = 0;
    int i;

    cg_context_device_info(r->ctx, &info);
    for (i = 0; i < r->nparams; i++)
        n += cg_tensor_numel(r->params[i]);
    printf("clgrad-train: %s on %s, %lld parameters, %lld steps",
           tr_model_name(r->cfg.model), info.name,
           (long long)n, (long long)r->total);
    if (r->step)
        printf(" (resumed at step %lld)", (long long)r->step);
    if (r->prog.end < r->total)
        printf(", stopping at step %lld", (long long)r->prog.end);
    if (r->cfg.precision != CG_F32)
        printf(", mixed precision %s", r->cfg.precision == CG_BF16
                                       ? "bf16" : "fp16 (loss scaling)");
    printf("\n");
    fflush(stdout);
}

/* The MLP's held-out loss and accuracy after the last step. */
static int
mlp_final(run *r)
{
    double loss, acc;

    if (tr_mlp_eval(r, &loss, &acc))
        return eval_failed(r);
    if (!r->cfg.quiet)
        printf("final held-out loss %.4f, accuracy %.2f%%\n", loss,
               100 * acc);
    tr_progress_log(&r->prog, r->step, r->prog.loss, acc,
                    cg_optim_get_lr(r->opt), NAN, loss);
    return evaluated(r, loss);
}

/* The end: the checkpoint, the last evaluation, a sample, the summary. */
static int
finish(run *r, volatile sig_atomic_t *stop)
{
    double el = tr_now() - r->prog.start, comp;
    char t[32];
    int lstm = r->cfg.model == TR_CHAR_LSTM;

    if (*stop)
        tr_progress_break(&r->prog);
    if (maybe_save(r, 1) || report_skipped(r, 1))
        return 1;
    if (*stop)
        fprintf(stderr, "clgrad-train: interrupted after step %lld; %s%s\n",
                (long long)r->step, r->cfg.checkpoint ? "saved "
                : "nothing saved (no --checkpoint)",
                r->cfg.checkpoint ? r->cfg.checkpoint : "");
    if (*stop)
        return 0;
    if (r->rank != 0)           /* rank 0 evaluates and samples */
        return r->eval_step != r->step && (!lstm || r->valid) &&
               peer_evaluated(r) ? 1 : 0;
    if (r->eval_step != r->step &&
        (lstm ? lstm_validate(r) : mlp_final(r)))
        return 1;
    if (lstm && !at_stop(r) && show_sample(r))
        return 1;
    if (r->cfg.quiet)
        return 0;
    comp = tr_compile_seconds() - r->prog.compile0;
    if (!(comp >= 0 && comp < el))
        comp = 0;
    tr_fmt_time(el, t, sizeof t);
    printf("summary: steps %lld to %lld in %s", (long long)r->first_step,
           (long long)r->step, t);
    /* Kernel compiles (a first run on the device, or a later phase's
     * first kernel) are said apart and left out of the throughput. */
    if (comp > 0) {
        if (comp < 60)
            snprintf(t, sizeof t, "%.1fs", comp);
        else
            tr_fmt_time(comp, t, sizeof t);
        printf(" (%s of it compiling kernels)", t);
    }
    printf(", %.0f %s/s", (double)r->prog.items / (el - comp + 1e-9),
           lstm ? "tok" : "rows");
    if (!isnan(r->val_loss))
        printf("; validation loss final %.4f, best %.4f (step %lld)",
               r->val_loss, r->best_loss, (long long)r->best_step);
    if (r->scaler)
        printf("; fp16 loss scaling skipped %lld step%s",
               (long long)r->skipped, r->skipped == 1 ? "" : "s");
    if (r->cfg.checkpoint)
        printf("; checkpoint %s%s%s", r->cfg.checkpoint,
               r->best_path ? ", best " : "",
               r->best_path ? r->best_path : "");
    printf("\n");
    tr_dp_report(r);
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
    r.given_batch = given->batch;
    r.given_seq_len = given->seq_len;
    r.val_loss = r.best_loss = NAN;
    r.eval_step = -1;
    if (r.cfg.resume) {
        ck = cg_checkpoint_load(r.cfg.resume);
        if (!ck) {
            tr_ck_fail("loading", r.cfg.resume);
            return 1;
        }
        if ((r.weights_only = tr_resume_config(ck, &r.cfg,
                                               r.cfg.resume)) < 0)
            goto out;
        cg_checkpoint_get_meta_int(ck, "train.total", &total_saved);
        if (!given->steps && !given->epochs)
            r.cfg.steps = total_saved;
        else if (total_saved && !r.cfg.quiet && !r.cfg.sample_only &&
                 given->steps && given->steps != total_saved)
            printf("clgrad-train: resuming with %lld steps in all (%s had "
                   "%lld)\n", (long long)given->steps, r.cfg.resume,
                   (long long)total_saved);
    }
    if (r.cfg.model == TR_NONE) {
        tr_fail("say --model mlp, --model cnn or --model char-lstm (or "
                "--resume)");
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
    if (r.cfg.eval_only && (r.cfg.model == TR_CHAR_LSTM || !ck ||
                            r.cfg.sample_only)) {
        tr_fail("--eval-only needs --resume with an mlp or cnn checkpoint");
        goto out;
    }
    if (r.weights_only && !r.cfg.sample_only) {
        tr_fail("%s holds weights only (no clgrad.model, optimizer or "
                "position): use it with --sample-only", r.cfg.resume);
        goto out;
    }
    resolve(&r.cfg);
    /* Under mpirun only rank 0 prints, logs and writes files. */
    if (tr_mpi_world() > 1 && getenv("OMPI_COMM_WORLD_RANK") &&
        atoi(getenv("OMPI_COMM_WORLD_RANK")) != 0) {
        r.cfg.quiet = 1;
        r.cfg.log = r.cfg.plot = NULL;
        r.cfg.profile = 0;
    }
    /* The files written at the end, checked before any work. */
    if (!r.cfg.sample_only && !r.cfg.eval_only &&
        ((r.cfg.checkpoint &&
          tr_check_output("--checkpoint", r.cfg.checkpoint)) ||
         (r.cfg.plot && tr_check_output("--plot", r.cfg.plot))))
        goto out;
    {
        cg_context_options o = { NULL, r.cfg.profile, 0 };
        char first[32];

        if (tr_dp_first_device(&r.cfg, first, &o.device))
            goto out;
        r.ctx = cg_context_new_with(&o);
    }
    if (!r.ctx) {
        tr_fail("%s", cg_last_error());
        goto out;
    }
    cg_manual_seed(r.ctx, (uint64_t)r.cfg.seed);
    if (build(&r, ck))
        goto out;
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
    if (r.cfg.precision == CG_F16) {
        cg_grad_scaler_options so = { r.cfg.loss_scale, 0, 0, 0 };

        if (!(r.scaler = cg_grad_scaler_new(r.ctx, &so))) {
            tr_fail("%s", cg_last_error());
            goto out;
        }
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
    if (!r.cfg.sample_only && !r.cfg.eval_only && tr_dp_setup(&r))
        goto out;

    if (r.cfg.sample_only) {
        status = tr_sample(&r, r.cfg.sample, (uint64_t)r.cfg.seed) ? 1 : 0;
        goto out;
    }
    if (r.cfg.eval_only) {
        double loss, acc;

        status = 1;
        if (tr_mlp_eval(&r, &loss, &acc) == 0) {
            printf("evaluation of %s on %s: loss %.6f, accuracy %.2f%% "
                   "(%lld rows)\n", r.cfg.resume, r.cfg.data, loss,
                   100 * acc, (long long)cg_dataset_rows(r.test));
            status = 0;
        }
        goto out;
    }
    if (r.cfg.save_best && best_path(&r))
        goto out;
    if (r.cfg.plot && !tr_have_gnuplot())
        fprintf(stderr, "clgrad-train: warning: --plot needs gnuplot, which "
                "is not installed (on Debian: apt-get install "
                "gnuplot-nox)\n");
    if (tr_progress_start(&r.prog, &r.cfg, r.step, r.total, r.elapsed))
        goto out;
    if (!r.cfg.quiet)
        headline(&r);
    status = r.cfg.model != TR_CHAR_LSTM ? run_mlp(&r, stop)
                                         : run_char_lstm(&r, stop);
    if (status == 0)
        status = finish(&r, stop);
    if (status == 0 && r.cfg.profile && print_profile(&r))
        status = 1;
    if (r.cfg.plot && tr_plot(&r.prog))
        status = status ? status : 1;
out:
    cg_checkpoint_free(ck);
    run_free(&r);
    return status;
}
