/* SPDX-License-Identifier: MIT */
/*
 * tools/tune_dp.c - clgrad-tune's stage "dp": the gradient bucket sizes of
 * data parallelism (cg_dp, lib/dist/dp.c), written as the entry kernel
 * "dp", shape "any", parameters bucket_kb and first_bucket_kb (KiB), which
 * cg_dp_new and cg_dp_new_mpi take when cg_dp_options leaves a size 0.
 *
 * Each candidate times a whole data-parallel training step (cg_dp_step:
 * forward, backward with the buckets' reads and reductions overlapping
 * it, the write-back and an SGD update, then both queues finished) of a
 * representative model: an MLP 256-1024-1024-16 with tanh (1.3 M
 * parameters, 5.1 MiB of gradients in three layers, so that the sizes
 * tried give from one bucket to several per step), on a global batch of
 * 32.  The replicas are two in-process ones, each with its own context
 * on the tuned device, so the stage runs on a machine with one device;
 * what it measures is the gather, host sum and write-back of the
 * in-process transport and how much of it hides under backward, which is
 * what the bucket size trades (across machines the network would weigh
 * more: tune with the job's own step if that matters).  The defaults
 * (PyTorch's 25 MiB and 1 MiB) come first; the fastest, the defaults
 * included, is written, so that the database says what was measured.
 * The bucket sizes do not change the result (each gradient element is
 * summed over the replicas in a fixed order whatever its bucket), so a
 * candidate is checked only for a finite loss.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tune.h"

#define MAX_REPS 5
#define BATCH 32
#define IN 256
#define HID 1024
#define OUT 16
#define NPARAM 6

/* (first_bucket_kb, bucket_kb), the defaults first. */
static const long cands[][2] = {
    { 1024, 25600 },
    { 256, 1024 },
    { 1024, 4096 },
    { 256, 4096 },
    { 4096, 16384 },
    { 64, 512 },
};
#define NCANDS (int)(sizeof cands / sizeof cands[0])

typedef struct dwork {
    cg_context *ctx[2];     /* [0] the run's */
    cg_module *m[2];
    cg_optimizer *opt[2];
    float *x;               /* [BATCH, IN] */
    int *y;                 /* [BATCH] */
} dwork;

static void
dwork_free(dwork *w)
{
    int i;

    for (i = 0; i < 2; i++) {
        cg_optim_free(w->opt[i]);
        cg_module_free(w->m[i]);
    }
    cg_context_free(w->ctx[1]);
    free(w->x);
    free(w->y);
    memset(w, 0, sizeof *w);
}

static cg_module *
model(cg_context *ctx)
{
    cg_module *m = cg_sequential_new(ctx);
    int st = m ? CG_OK : CG_EINVAL;

    if (st == CG_OK)
        st = cg_module_add(m, "fc1", cg_linear_new(ctx, IN, HID, 1));
    if (st == CG_OK)
        st = cg_module_add(m, "act1", cg_activation_new(ctx, "tanh"));
    if (st == CG_OK)
        st = cg_module_add(m, "fc2", cg_linear_new(ctx, HID, HID, 1));
    if (st == CG_OK)
        st = cg_module_add(m, "act2", cg_activation_new(ctx, "tanh"));
    if (st == CG_OK)
        st = cg_module_add(m, "fc3", cg_linear_new(ctx, HID, OUT, 1));
    /* Replica 1's values: replica 0's (cg_dp_new copies them). */
    if (st != CG_OK) {
        cg_module_free(m);
        return NULL;
    }
    return m;
}

static int
dwork_init(tu_run *r, dwork *w)
{
    cg_context_options o;
    cg_tensor *p[NPARAM];
    cg_sgd_options so;
    int i, j;

    memset(w, 0, sizeof *w);
    memset(&o, 0, sizeof o);
    o.device = r->cfg->device;
    o.no_tuning = 1;
    w->ctx[0] = r->ctx;
    if (!(w->ctx[1] = cg_context_new_with(&o)))
        return CG_EINVAL;
    memset(&so, 0, sizeof so);
    so.lr = 0.01;
    for (i = 0; i < 2; i++) {
        if (!(w->m[i] = model(w->ctx[i])) ||
            cg_module_params(w->m[i], p, NPARAM) != NPARAM ||
            !(w->opt[i] = cg_optim_sgd_new(w->ctx[i], p, NPARAM, &so)))
            return CG_EINVAL;
    }
    w->x = malloc((size_t)BATCH * IN * sizeof *w->x);
    w->y = malloc((size_t)BATCH * sizeof *w->y);
    if (!w->x || !w->y)
        return CG_EHOSTMEM;
    for (i = 0; i < BATCH; i++) {
        for (j = 0; j < IN; j++)
            w->x[i * IN + j] = sinf(0.37f * (float)(i * IN + j));
        w->y[i] = (i * 7 + i / 5) % OUT;
    }
    return CG_OK;
}

/* A replica's loss: rows [16 rank, 16 rank + 16) of the batch. */
static int
loss_fn(void *user, int rank, cg_module *m, cg_tensor **loss)
{
    dwork *w = user;
    cg_context *ctx = w->ctx[rank];
    int64_t rows = BATCH / 2, xs[2] = { rows, IN }, ys[1] = { rows };
    cg_tensor *x, *y, *out;

    x = cg_tensor_from_host(ctx, CG_F32, 2, xs, w->x + rank * rows * IN);
    y = cg_tensor_from_host(ctx, CG_I32, 1, ys, w->y + rank * rows);
    out = x ? cg_module_forward(m, x) : NULL;
    *loss = out && y ? cg_cross_entropy(out, y, CG_REDUCTION_MEAN,
                                        CG_IGNORE_INDEX, 0.0f) : NULL;
    cg_tensor_free(x);
    cg_tensor_free(y);
    cg_tensor_free(out);
    return *loss ? CG_OK : CG_EINVAL;
}

/* Times candidate c (the median step of up to MAX_REPS after one
 * warm-up step) into *us. */
static int
measure(tu_run *r, dwork *w, int c, double *us, char *why, size_t whylen)
{
    cg_dp_options o;
    cg_dp *dp;
    double times[MAX_REPS], t;
    float losses[2];
    int i, done = 0, status = CG_OK;

    o.first_bucket_mb = (double)cands[c][0] / 1024.0;
    o.bucket_mb = (double)cands[c][1] / 1024.0;
    if (!(dp = cg_dp_new(2, w->m, w->opt, &o))) {
        snprintf(why, whylen, "%s", cg_last_error());
        return -1;
    }
    for (i = 0; i <= MAX_REPS && status == CG_OK; i++) {
        if (i > 0 && tu_stopped(r))
            break;
        t = tu_now();
        status = cg_dp_step(dp, loss_fn, NULL, w, losses);
        if (status == CG_OK)
            status = cg_context_finish(w->ctx[0]);
        if (status == CG_OK)
            status = cg_context_finish(w->ctx[1]);
        if (status == CG_OK && (!isfinite(losses[0]) ||
                                !isfinite(losses[1]))) {
            snprintf(why, whylen, "the loss is not finite");
            cg_dp_free(dp);
            return -1;
        }
        if (i > 0)
            times[done++] = tu_now() - t;
    }
    status = tu_timed(status, times, done, 1e6, us, why, whylen);
    cg_dp_free(dp);
    return status == CG_OK ? CG_OK : -1;
}

int
tu_stage_dp(tu_run *r)
{
    char note[128], why[512];
    tu_params best, cand;
    json_object *k;
    dwork w;
    double def_us = 0, best_us = 0;
    int c, tried = 0, n = NCANDS;

    snprintf(note, sizeof note, "cg_dp_step, 2 in-process replicas on this "
             "device, MLP %d-%d-%d-%d batch %d: median of up to %d", IN, HID,
             HID, OUT, BATCH, MAX_REPS);
    if (tu_stopped(r))
        return 0;
    k = tu_report_kernel(r, "dp", "any", note);
    if (dwork_init(r, &w) != CG_OK) {
        snprintf(why, sizeof why, "%s", cg_last_error());
        tu_say(r, "dp: %s", why);
        tu_report_result(k, 0, NULL, 0, why);
        dwork_free(&w);
        return -1;
    }
    if (r->cfg->max_candidates && r->cfg->max_candidates + 1 < n)
        n = r->cfg->max_candidates + 1;
    for (c = 0; c < n; c++) {
        double us = 0;

        tu_params_init(&cand, "dp", "any");
        tu_params_add(&cand, "bucket_kb", cands[c][1]);
        tu_params_add(&cand, "first_bucket_kb", cands[c][0]);
        /* A step's time, a guess from the defaults'. */
        if (c > 0 && !tu_fits(r, def_us * 1e-6 * (MAX_REPS + 1))) {
            tu_report_candidate(k, &cand, 0, r->interrupted
                                ? "not tried: interrupted"
                                : "not tried: out of time", NULL);
            continue;
        }
        tu_progress(r, "dp", "any", c, n - 1, best_us, def_us);
        if (measure(r, &w, c, &us, why, sizeof why) != CG_OK) {
            tu_report_candidate(k, &cand, 0, why, NULL);
            tu_say(r, "dp: bucket_kb=%ld first_bucket_kb=%ld: %s",
                   cands[c][1], cands[c][0], why);
            if (c == 0)
                break;          /* no baseline */
            continue;
        }
        tu_report_candidate(k, &cand, us, NULL, c ? NULL : "defaults");
        if (c == 0)
            def_us = us;
        if (!tried++ || us < best_us) {
            best = cand;
            best_us = us;
        }
    }
    dwork_free(&w);
    if (!tu_conclude(r, k, tried, &best, best_us, def_us, note))
        return tried ? 0 : -1;
    tu_say(r, "dp: buckets of %ld KiB, the first %ld KiB: %.1f ms per step "
           "(defaults %.1f)", tu_params_get(&best, "bucket_kb", 0),
           tu_params_get(&best, "first_bucket_kb", 0), best_us * 1e-3,
           def_us * 1e-3);
    return 0;
}
