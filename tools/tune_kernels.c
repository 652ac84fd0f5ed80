/* SPDX-License-Identifier: MIT */
/*
 * tools/tune_kernels.c - clgrad-tune's stage "kernels": the work-group size
 * of the reduction kernel files, one entry per file (kernel "reduce",
 * "softmax", "layer_norm", "loss", "optim", shape "any"), whose candidates
 * are the @tunable line of each file's banner, read from the kernel table
 * the library is built with (build-aux/cltable.sh).  Each file is timed on a
 * representative operation of the size a training run of the first
 * --model-shape uses (B*T rows, H, 4H, I, a 65-character vocabulary):
 *   reduce      row sums, cg_sum over the last axis of [B*T, 4H]
 *   softmax     cg_softmax forward+backward over the last axis of
 *               [B*T, 65] and of [B*T, 4H] (the sum of both)
 *   layer_norm  cg_layer_norm forward+backward over the last dim of [B*T, H]
 *   loss        cg_cross_entropy (mean) forward+backward of [B*T, 65]
 *   optim       cg_clip_grad_norm over an LSTM layer's gradients (4H x I,
 *               4H x H, 4H, 4H)
 * Inputs come from the same seed for the defaults and every candidate, and
 * a candidate's outputs (and input gradients) must match the defaults'.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tune.h"
#include "cl/internal.h"

#define MAX_REPS 7
#define MAX_INNER 32
#define SAMPLE_S 0.002      /* a timed sample runs the operation this long */
#define VOCAB 65            /* a character vocabulary */
#define TOLERANCE 1e-5

enum { K_REDUCE, K_SOFTMAX, K_LAYER_NORM, K_LOSS, K_OPTIM, K_N };

static const char *const file_names[K_N] = {
    "reduce", "softmax", "layer_norm", "loss", "optim"
};

/* The sizes timed. */
typedef struct ksize {
    int64_t rows, H, I;
} ksize;

/* One file's operation: its inputs, made from the same seed each time. */
typedef struct kwork {
    int which;
    ksize sz;
    cg_tensor *x[2], *dy[2], *target;
    cg_tensor *params[4];
} kwork;

static void
work_free(kwork *w)
{
    int i;

    for (i = 0; i < 2; i++) {
        cg_tensor_free(w->x[i]);
        cg_tensor_free(w->dy[i]);
    }
    cg_tensor_free(w->target);
    for (i = 0; i < 4; i++)
        cg_tensor_free(w->params[i]);
    memset(w, 0, sizeof *w);
}

/* Gives each of the n leaves the gradient 2 p (backward of sum(p * p)). */
static int
make_grads(cg_tensor **p, int n)
{
    int i, status = CG_OK;

    for (i = 0; i < n && status == CG_OK; i++) {
        cg_tensor *sq = cg_mul(p[i], p[i]), *s = sq ? cg_sum(sq, 0, NULL, 0)
                                                   : NULL;

        status = s ? cg_backward(s, NULL, 0) : -1;
        cg_tensor_free(s);
        cg_tensor_free(sq);
    }
    return status;
}

/* Makes the inputs of w->which's operation. */
static int
work_init(cg_context *ctx, kwork *w, int which, const ksize *sz)
{
    int64_t r = sz->rows, h4 = 4 * sz->H;
    int64_t shapes[2][2] = { { r, h4 }, { r, 0 } };
    int i, nx = 1, status;

    memset(w, 0, sizeof *w);
    w->which = which;
    w->sz = *sz;
    if ((status = cg_manual_seed(ctx, 20261123)) != CG_OK)
        return status;
    switch (which) {
    case K_SOFTMAX:
        shapes[0][1] = VOCAB;
        shapes[1][1] = h4;
        nx = 2;
        break;
    case K_LAYER_NORM:
        shapes[0][1] = sz->H;
        break;
    case K_LOSS:
        shapes[0][1] = VOCAB;
        break;
    case K_OPTIM: {
        int64_t ps[4][2] = { { h4, sz->I }, { h4, sz->H }, { h4 }, { h4 } };

        for (i = 0; i < 4; i++) {
            w->params[i] = cg_rand_uniform(ctx, i < 2 ? 2 : 1, ps[i], -1, 1);
            if (!w->params[i] ||
                cg_tensor_set_requires_grad(w->params[i], 1) != CG_OK)
                return -1;
        }
        return make_grads(w->params, 4);
    }
    default:
        break;
    }
    for (i = 0; i < nx; i++) {
        w->x[i] = cg_rand_uniform(ctx, 2, shapes[i], -2, 2);
        if (!w->x[i])
            return -1;
        if (which == K_REDUCE || which == K_LOSS)
            continue;
        if (!(w->dy[i] = cg_rand_uniform(ctx, 2, shapes[i], -1, 1)) ||
            cg_tensor_set_requires_grad(w->x[i], 1) != CG_OK)
            return -1;
    }
    if (which == K_LOSS) {
        int32_t *t = malloc((size_t)r * sizeof *t);
        int64_t i64;

        if (!t)
            return CG_EHOSTMEM;
        for (i64 = 0; i64 < r; i64++)
            t[i64] = (int32_t)((i64 * 31 + 7) % VOCAB);
        w->target = cg_tensor_from_host(ctx, CG_I32, 1, &r, t);
        free(t);
        if (!w->target || cg_tensor_set_requires_grad(w->x[0], 1) != CG_OK)
            return -1;
    }
    return CG_OK;
}

/* Runs the operation once (enqueued; the caller waits); with out, keeps
 * its outputs and input gradients there. */
static int
work_run(cg_context *ctx, kwork *w, tu_out *out)
{
    int i, status = CG_OK, axis = 1;
    cg_tensor *y = NULL;

    switch (w->which) {
    case K_REDUCE:
        if (!(y = cg_sum(w->x[0], 1, &axis, 0)))
            return -1;
        if (out)
            status = tu_out_add(out, y);
        break;
    case K_OPTIM: {
        float norm = 0;
        int64_t one = 1;
        cg_tensor *n;

        status = cg_clip_grad_norm(w->params, 4, 1e30, 2.0, &norm);
        if (status != CG_OK || !out)
            break;
        if (!(n = cg_tensor_from_host(ctx, CG_F32, 1, &one, &norm)))
            return -1;
        status = tu_out_add(out, n);
        cg_tensor_free(n);
        for (i = 0; i < 4 && status == CG_OK; i++)
            status = tu_out_add(out, cg_tensor_grad(w->params[i]));
        break;
    }
    default:    /* forward and backward */
        for (i = 0; i < 2 && w->x[i] && status == CG_OK; i++) {
            int64_t h = w->sz.H;

            if ((status = cg_tensor_zero_grad(w->x[i])) != CG_OK)
                break;
            y = w->which == K_SOFTMAX ? cg_softmax(w->x[i], -1)
              : w->which == K_LAYER_NORM
                ? cg_layer_norm(w->x[i], 1, &h, NULL, NULL, 1e-5f)
                : cg_cross_entropy(w->x[i], w->target, CG_REDUCTION_MEAN,
                                   CG_IGNORE_INDEX, 0.0f);
            if (!y)
                return -1;
            status = cg_backward(y, w->dy[i], 0);
            if (status == CG_OK && out)
                status = tu_out_add(out, y);
            if (status == CG_OK && out)
                status = tu_out_add(out, cg_tensor_grad(w->x[i]));
            cg_tensor_free(y);
            y = NULL;
        }
    }
    cg_tensor_free(y);
    return status;
}

/* One timed run, for tu_time. */
static int
timed_run(cg_context *ctx, void *w)
{
    return work_run(ctx, w, NULL);
}

/* Puts p in force (NULL: the defaults), makes the inputs, runs the
 * operation once (compiling; its outputs into *out), then times up to
 * MAX_REPS samples of *inner runs each (*inner 0: chosen here from one
 * timed run, so that a sample lasts about SAMPLE_S): *us is the median
 * per run.  On failure, why says what. */
static int
measure(tu_run *r, int which, const ksize *sz, const tu_params *p,
        int *inner, double *us, tu_out *out, char *why, size_t whylen)
{
    kwork w;
    int status;

    memset(&w, 0, sizeof w);
    status = p ? cg_context_set_tuning(r->ctx, p)
               : cg_context_clear_tuning(r->ctx);
    if (status == CG_OK)
        status = work_init(r->ctx, &w, which, sz);
    if (status == CG_OK)
        status = work_run(r->ctx, &w, out);
    if (status == CG_OK)
        status = cg_context_finish(r->ctx);
    if (status == CG_OK)
        status = tu_time(r, timed_run, &w, SAMPLE_S, MAX_INNER, MAX_REPS,
                         inner, us, why, whylen);
    else
        snprintf(why, whylen, "%s", cg_last_error());
    work_free(&w);
    return status;
}

static void
describe(int which, const ksize *sz, char *buf, size_t n)
{
    long long r = (long long)sz->rows, h = (long long)sz->H;

    switch (which) {
    case K_REDUCE:
        snprintf(buf, n, "cg_sum, last axis of [%lld,%lld]", r, 4 * h);
        break;
    case K_SOFTMAX:
        snprintf(buf, n, "cg_softmax fwd+bwd, last axis of [%lld,%d] + "
                 "[%lld,%lld]", r, VOCAB, r, 4 * h);
        break;
    case K_LAYER_NORM:
        snprintf(buf, n, "cg_layer_norm fwd+bwd, [%lld,%lld]", r, h);
        break;
    case K_LOSS:
        snprintf(buf, n, "cg_cross_entropy fwd+bwd, [%lld,%d]", r, VOCAB);
        break;
    default:
        snprintf(buf, n, "cg_clip_grad_norm, LSTM layer H%lld I%lld", h,
                 (long long)sz->I);
    }
}

/* Tunes one file; returns nonzero if it could not be tuned at all. */
static int
tune_file(tu_run *r, int which, const ksize *sz)
{
    const char *file = file_names[which];
    char hash[33], what[96], note[128], why[512], buf[256];
    tu_tunable t;
    tu_out ref = { 0 };
    tu_params best, cand;
    int vals[TU_MAX_VALUES], n, i, tried = 0, inner = 0, limit;
    double def_us = 0, best_us, est, t0;
    json_object *k;

    describe(which, sz, what, sizeof what);
    snprintf(note, sizeof note, "%s; per call, median of up to %d", what,
             MAX_REPS);
    k = tu_report_kernel(r, file, "any", note);
    if (cg_kernel_source_hash(file, hash) != CG_OK) {
        snprintf(why, sizeof why, "%s", cg_last_error());
        tu_say(r, "%s: %s", file, why);
        tu_report_result(k, 0, NULL, 0, why);
        return -1;
    }
    n = tu_file_tunables(file, &t, 1);
    if (n != 1) {
        snprintf(why, sizeof why, "kernels/%s.cl declares no @tunable "
                 "parameter", file);
        tu_say(r, "%s: %s", file, why);
        tu_report_result(k, 0, NULL, 0, why);
        return -1;
    }
    tu_params_init(&best, file, "any");
    tu_params_add(&best, t.name, t.def);
    snprintf(best.source_hash, sizeof best.source_hash, "%s", hash);
    tu_progress(r, file, "any", 0, 0, 0, 0);
    t0 = tu_now();
    if (measure(r, which, sz, NULL, &inner, &def_us, &ref, why,
                sizeof why) != CG_OK) {
        tu_say(r, "%s: the defaults failed: %s", file, why);
        tu_report_result(k, 0, NULL, 0, why);
        tu_out_free(&ref);
        return -1;
    }
    est = tu_now() - t0;
    best_us = def_us;
    /* an earlier run's value, then the rest nearest the default */
    n = tu_order_values(r, file, &t, t.def, vals);
    limit = r->cfg->max_candidates ? r->cfg->max_candidates : n;
    for (i = 0; i < n; i++) {
        tu_out o = { 0 };
        double us = 0;
        int st, verdict;

        cand = best;
        tu_params_add(&cand, t.name, vals[i]);
        if ((size_t)vals[i] > r->dev.max_work_group_size) {
            snprintf(buf, sizeof buf, "%s %d is above the device's maximum "
                     "work-group size %zu", t.name, vals[i],
                     r->dev.max_work_group_size);
            tu_report_candidate(k, &cand, 0, buf, NULL);
            continue;
        }
        if (limit-- <= 0)
            break;
        if (!tu_fits(r, est)) {
            tu_report_candidate(k, &cand, 0, r->interrupted
                                ? "not tried: interrupted"
                                : "not tried: out of time", NULL);
            continue;
        }
        tu_progress(r, file, "any", i + 1, n, best_us, def_us);
        t0 = tu_now();
        st = measure(r, which, sz, &cand, &inner, &us, &o, why, sizeof why);
        verdict = tu_judge(k, &cand, st, why, us, st == CG_OK
                           ? tu_out_error(&o, &ref) : 0, TOLERANCE, &best,
                           &best_us, buf, sizeof buf);
        if (verdict == 1)
            tried++;
        else if (verdict == 0)
            tu_say(r, "%s: %s=%d failed: %s", file, t.name, vals[i], why);
        else
            tu_say(r, "%s: %s=%d %s", file, t.name, vals[i], buf);
        est = fmax(est, tu_now() - t0);
        tu_out_free(&o);
    }
    tu_out_free(&ref);
    cg_context_clear_tuning(r->ctx);
    if (!tu_conclude(r, k, tried, &best, best_us, def_us, note))
        return 0;
    tu_say(r, "%s: %s, %.1f us per call (defaults %.1f us)", file,
           tu_params_str(&best, buf, sizeof buf), best_us, def_us);
    return 0;
}

int
tu_stage_kernels(tu_run *r)
{
    const tu_shape *s = &r->cfg->shapes[0];
    ksize sz;
    double end = r->stage_end;
    int i, failed = 0;

    sz.rows = (int64_t)s->B * s->T;
    sz.H = s->H;
    sz.I = s->I;
    /* Each file gets an equal share of what is left. */
    for (i = 0; i < K_N && !tu_stopped(r); i++) {
        r->stage_end = tu_now() + (end - tu_now()) / (K_N - i);
        if (tune_file(r, i, &sz))
            failed = 1;
    }
    r->stage_end = end;
    cg_context_clear_tuning(r->ctx);
    return failed;
}
