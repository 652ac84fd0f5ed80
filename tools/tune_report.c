/* SPDX-License-Identifier: MIT */
/*
 * tools/tune_report.c - clgrad-tune's bookkeeping: candidates' parameter
 * sets, the JSON report of everything tried, and the entries kept for the
 * database.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tune.h"

void
tu_params_init(tu_params *p, const char *kernel, const char *shape)
{
    memset(p, 0, sizeof *p);
    snprintf(p->kernel, sizeof p->kernel, "%s", kernel);
    snprintf(p->shape, sizeof p->shape, "%s", shape);
}

void
tu_params_add(tu_params *p, const char *name, long value)
{
    int i;

    for (i = 0; i < p->nparams; i++)
        if (strcmp(p->names[i], name) == 0)
            break;
    if (i == CG_TUNING_MAX_PARAMS)
        return;
    snprintf(p->names[i], sizeof p->names[i], "%s", name);
    p->values[i] = value;
    if (i == p->nparams)
        p->nparams++;
}

long
tu_params_get(const tu_params *p, const char *name, long dflt)
{
    int i;

    for (i = 0; i < p->nparams; i++)
        if (strcmp(p->names[i], name) == 0)
            return p->values[i];
    return dflt;
}

const char *
tu_params_str(const tu_params *p, char *buf, size_t n)
{
    size_t len = 0;
    int i;

    buf[0] = '\0';
    for (i = 0; i < p->nparams && len + 1 < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%s=%ld",
                                i ? " " : "", p->names[i], p->values[i]);
    return buf;
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

double
tu_median(double *v, int n)
{
    if (n <= 0)
        return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int
tu_timed(int status, double *times, int n, double scale, double *us,
         char *why, size_t whylen)
{
    if (status != CG_OK) {
        snprintf(why, whylen, "%s", cg_last_error());
        return status;
    }
    if (n == 0) {
        snprintf(why, whylen, "interrupted");
        return -1;
    }
    *us = tu_median(times, n) * scale;
    return CG_OK;
}

int
tu_time(tu_run *r, int (*run)(cg_context *ctx, void *arg), void *arg,
        double sample_s, int max_inner, int reps, int *inner, double *us,
        char *why, size_t whylen)
{
    double times[TU_MAX_REPS], t;
    int status = CG_OK, i, j, done = 0;

    if (reps > TU_MAX_REPS)
        reps = TU_MAX_REPS;
    if (*inner <= 0) {
        t = tu_now();
        status = run(r->ctx, arg);
        if (status == CG_OK)
            status = cg_context_finish(r->ctx);
        t = tu_now() - t;
        *inner = t <= 0 ? max_inner : (int)ceil(sample_s / t);
        *inner = *inner < 1 ? 1 : *inner > max_inner ? max_inner : *inner;
    }
    for (i = 0; i < reps && status == CG_OK; i++) {
        if (i > 0 && (tu_stopped(r) || tu_left(r) < times[0] * *inner))
            break;
        t = tu_now();
        for (j = 0; j < *inner && status == CG_OK; j++)
            status = run(r->ctx, arg);
        if (status == CG_OK)
            status = cg_context_finish(r->ctx);
        times[done++] = (tu_now() - t) / *inner;
    }
    return tu_timed(status, times, done, 1e6, us, why, whylen);
}

json_object *
tu_params_json(const tu_params *p)
{
    json_object *o = json_object_new_object();
    int i;

    for (i = 0; i < p->nparams; i++)
        json_object_object_add(o, p->names[i],
                               json_object_new_int64(p->values[i]));
    return o;
}

json_object *
tu_report_kernel(tu_run *r, const char *kernel, const char *shape,
                 const char *note)
{
    json_object *k = json_object_new_object();

    json_object_object_add(k, "kernel", json_object_new_string(kernel));
    json_object_object_add(k, "shape", json_object_new_string(shape));
    json_object_object_add(k, "note", json_object_new_string(note));
    json_object_object_add(k, "candidates", json_object_new_array());
    json_object_array_add(r->report, k);
    return k;
}

void
tu_report_candidate(json_object *k, const tu_params *p, double time_us,
                    const char *skipped, const char *source)
{
    json_object *c = json_object_new_object(), *arr = NULL;

    json_object_object_add(c, "parameters", tu_params_json(p));
    if (source)
        json_object_object_add(c, "source", json_object_new_string(source));
    if (skipped) {
        json_object_object_add(c, "skipped",
                               json_object_new_string(skipped));
    } else {
        json_object_object_add(c, "time_us",
                               json_object_new_double(time_us));
    }
    json_object_object_get_ex(k, "candidates", &arr);
    json_object_array_add(arr, c);
}

int
tu_judge(json_object *k, const tu_params *cand, int status, const char *why,
         double us, double err, double tol, tu_params *best, double *best_us,
         char *msg, size_t msglen)
{
    if (status != CG_OK) {
        tu_report_candidate(k, cand, 0, why, NULL);
        return 0;
    }
    if (err > tol) {
        snprintf(msg, msglen, "does not verify: relative error %.3g against "
                 "the defaults", err);
        tu_report_candidate(k, cand, 0, msg, NULL);
        return -1;
    }
    tu_report_candidate(k, cand, us, NULL, NULL);
    if (us < *best_us) {
        *best = *cand;
        *best_us = us;
    }
    return 1;
}

int
tu_conclude(tu_run *r, json_object *k, int tried, tu_params *best,
            double best_us, double def_us, const char *note)
{
    if (!tried) {
        tu_report_result(k, def_us, NULL, 0, "no candidate measured");
        return 0;
    }
    best->time_us = best_us;
    best->default_time_us = def_us;
    snprintf(best->note, sizeof best->note, "%s", note);
    tu_keep(r, best);
    tu_report_result(k, def_us, best, best_us, best_us < def_us
                     ? "tuned" : "the defaults are the fastest");
    return 1;
}

void
tu_report_result(json_object *k, double default_us, const tu_params *best,
                 double best_us, const char *outcome)
{
    if (default_us > 0)
        json_object_object_add(k, "default_time_us",
                               json_object_new_double(default_us));
    if (best) {
        json_object_object_add(k, "best", tu_params_json(best));
        json_object_object_add(k, "best_time_us",
                               json_object_new_double(best_us));
    }
    json_object_object_add(k, "outcome", json_object_new_string(outcome));
}

void
tu_keep(tu_run *r, const cg_tuning_entry *e)
{
    int i;

    for (i = 0; i < r->nresults; i++)
        if (strcmp(r->results[i].kernel, e->kernel) == 0 &&
            strcmp(r->results[i].shape, e->shape) == 0)
            break;
    if (i == TU_MAX_RESULTS)
        return;
    r->results[i] = *e;
    if (i == r->nresults)
        r->nresults++;
}
