/* SPDX-License-Identifier: MIT */
/*
 * tools/tune_rnn.c - clgrad-tune's stages for clgrad's own kernels: the
 * fused recurrent step kernels' VW, RB and WG (their candidates are the
 * @tunable lines of kernels/rnn.cl's banner), and the hidden size from
 * which a layer takes the GEMM path.  A step-kernel candidate runs a
 * whole layer once, forward and backward over T steps, with weights, input
 * and output gradient drawn from the same seed as the defaults' run, and
 * must give the defaults' output and gradients; it is then timed on the
 * step kernels' launches alone (a layer's pass is mostly GEMMs, whose time
 * and noise buried the differences).  The rnn.path stage times whole
 * layers on either path.  The candidates come from the kernel table
 * (build-aux/cltable.sh); its reader and the output helpers
 * (tu_file_tunables, tu_out_*) serve tune_kernels.c too.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tune.h"
#include "nn/internal.h"

#define MAX_TUNABLES 4
#define MAX_GRID 1024
#define MAX_REPS 5
/* measure()'s path for the GEMM path on a packed W_hh (beside
 * CG__RNN_PATH_*) */
#define PATH_GEMM_PACKED 100

typedef tu_tunable tunable;
typedef tu_out rnn_out;

int
tu_file_tunables(const char *file, tunable *t, int max)
{
    int n = 0, p, j;

    for (p = 0; p < CG__P_COUNT && n < max; p++) {
        const cg__param_info *pi = &cg__param_table[p];

        if (strcmp(cg__kfile_names[pi->file], file) != 0)
            continue;
        snprintf(t[n].name, sizeof t[n].name, "%s", pi->name);
        t[n].def = (int)pi->dflt;
        for (j = 0; j < pi->ncand && j < TU_MAX_VALUES; j++)
            t[n].vals[j] = (int)pi->cand[j];
        t[n++].n = j;
    }
    return n;
}

double
tu_value_distance(int v, int def)
{
    return fabs(log2((double)v) - log2((double)def));
}

long
tu_previous_value(const tu_run *r, const char *file, const tunable *t)
{
    long prev = t->def;
    int i;

    for (i = 0; i < r->nprevious; i++)
        if (strcmp(r->previous[i].kernel, file) == 0)
            prev = tu_params_get(&r->previous[i], t->name, t->def);
    return prev;
}

int
tu_order_values(const tu_run *r, const char *file, const tunable *t,
                int cur, int *vals)
{
    long prev = tu_previous_value(r, file, t);
    int n = 0, first, i, j;

    if (prev != cur)
        for (i = 0; i < t->n; i++)
            if (t->vals[i] == prev) {
                vals[n++] = (int)prev;
                break;
            }
    if (t->def != cur && t->def != prev)
        vals[n++] = t->def;
    first = n;
    for (i = 0; i < t->n; i++) {
        int v = t->vals[i], dup = v == cur || v <= 0;

        for (j = 0; j < n && !dup; j++)
            dup = vals[j] == v;
        if (dup)
            continue;
        /* Insertion sort, stable: after every value as near. */
        for (j = n; j > first && tu_value_distance(vals[j - 1], t->def) >
             tu_value_distance(v, t->def); j--)
            vals[j] = vals[j - 1];
        vals[j] = v;
        n++;
    }
    return n;
}

static const char *
kernel_name(cg_rnn_mode mode)
{
    return mode == CG_LSTM ? "rnn.lstm" : mode == CG_GRU ? "rnn.gru"
                                                          : "rnn.rnn";
}

static const char *
cell_name(cg_rnn_mode mode)
{
    return mode == CG_LSTM ? "LSTM" : mode == CG_GRU ? "GRU"
         : mode == CG_RNN_RELU ? "RNN-relu" : "RNN";
}

void
tu_out_free(rnn_out *o)
{
    free(o->data);
    memset(o, 0, sizeof *o);
}

int
tu_out_add(rnn_out *o, const cg_tensor *t)
{
    size_t n = (size_t)cg_tensor_numel(t);
    float *d;

    if (o->nseg == TU_MAX_SEGS)
        return CG_OK;
    d = realloc(o->data, (o->n + n) * sizeof *d);
    if (!d)
        return CG_EHOSTMEM;
    o->data = d;
    o->off[o->nseg] = o->n;
    if (cg_tensor_to_host(t, d + o->n, n * sizeof *d) != CG_OK)
        return -1;
    o->n += n;
    o->off[++o->nseg] = o->n;
    return CG_OK;
}

double
tu_out_error(const rnn_out *a, const rnn_out *ref)
{
    double worst = 0;
    int s;

    if (a->n != ref->n || a->nseg != ref->nseg)
        return INFINITY;
    for (s = 0; s < ref->nseg; s++) {
        double scale = 1e-30, err = 0;
        size_t i;

        for (i = ref->off[s]; i < ref->off[s + 1]; i++) {
            double d = fabs((double)a->data[i] - ref->data[i]);

            scale = fmax(scale, fabs((double)ref->data[i]));
            err = isnan(d) ? INFINITY : fmax(err, d);
        }
        worst = fmax(worst, err / scale);
    }
    return worst;
}

/* One forward and backward pass; waits for the device. */
static int
pass(cg_context *ctx, cg_module *m, cg_tensor *x, cg_tensor *dy,
     cg_tensor **y)
{
    int status = cg_rnn_forward(m, x, NULL, NULL, NULL, y, NULL, NULL);

    if (status == CG_OK)
        status = cg_backward(*y, dy, 0);
    if (status == CG_OK)
        status = cg_context_finish(ctx);
    return status;
}

/* Times s's step kernels alone with p's VW, RB, WG (NULL: defaults):
 * *sec, forward plus backward per time step. */
static int
time_steps(tu_run *r, const tu_shape *s, const tu_params *p, double *sec)
{
    cg__rnn_cell cell = cg__rnn_cell_of(s->mode);
    cg__rnn_tune t = { 0, 0, 0, 0 };
    double f = 0, b = 0;
    int status;

    if (p) {
        t.vw = (int)tu_params_get(p, "VW", 0);
        t.rb = (int)tu_params_get(p, "RB", 0);
        t.wg = (int)tu_params_get(p, "WG", 0);
    }
    status = cg__rnn_time_steps(r->ctx, cell, &t, s->B, s->H, s->T, &f, &b);
    *sec = (f + b) * 1e-3;
    return status;
}

/* Builds a layer of shape s with p put in force (if not NULL) and path
 * (a CG__RNN_PATH_*), runs it once (compiling), keeps
 * the output and gradients in *out (if not NULL), then times up to `reps`
 * passes: *us is the median per time step.  With steps_only, a pass is
 * T forward and T backward launches of the step kernels alone (see
 * cg__rnn_time_steps): a layer's pass is mostly its GEMMs (all the more
 * with CLBlast untuned, as in this process until its stages run), whose
 * time and noise buried the differences between step variants.  On
 * failure, why says what. */
static int
measure(tu_run *r, const tu_shape *s, const tu_params *p, int path,
        int steps_only, int reps, double *us, rnn_out *out, char *why,
        size_t whylen)
{
    cg_rnn_options o = { s->mode, s->I, s->H, 1, 0, 0, 0.0f };
    int64_t xs[3] = { s->T, s->B, s->I }, ys[3] = { s->T, s->B, s->H };
    cg_module *m = NULL;
    cg_tensor *x = NULL, *dy = NULL, *y = NULL;
    double times[MAX_REPS];
    int status, i, done = 0;

    status = p ? cg_context_set_tuning(r->ctx, p) : CG_OK;
    if (status == CG_OK)
        status = cg_manual_seed(r->ctx, 20261123);
    if (status == CG_OK && !(m = cg_rnn_new(r->ctx, &o)))
        status = -1;
    if (status == CG_OK && path != CG__RNN_PATH_AUTO)
        status = cg__rnn_set_path(m, path == PATH_GEMM_PACKED
                                         ? CG__RNN_PATH_GEMM : path);
    if (status == CG_OK && path == CG__RNN_PATH_GEMM)
        status = cg__rnn_set_packed(m, 0);
    if (status == CG_OK && path == PATH_GEMM_PACKED)
        status = cg__rnn_set_packed(m, 1);
    if (status == CG_OK &&
        (!(x = cg_rand_uniform(r->ctx, 3, xs, -1, 1)) ||
         !(dy = cg_rand_uniform(r->ctx, 3, ys, -1, 1))))
        status = -1;
    if (status == CG_OK)
        status = cg_tensor_set_requires_grad(x, 1);
    if (status == CG_OK)
        status = pass(r->ctx, m, x, dy, &y);
    if (status == CG_OK && out) {
        int j, np = cg_module_num_params(m);

        status = tu_out_add(out, y);
        for (j = 0; j < np && status == CG_OK; j++)
            status = tu_out_add(out, cg_tensor_grad(cg_module_param(m, j,
                                                                 NULL)));
        if (status == CG_OK)
            status = tu_out_add(out, cg_tensor_grad(x));
    }
    for (i = 0; i < reps && status == CG_OK; i++) {
        double t;

        if (i > 0 && (tu_stopped(r) || tu_left(r) < times[0]))
            break;
        if (steps_only) {
            status = time_steps(r, s, p, &t);
            times[done++] = t * s->T;
            continue;
        }
        cg_tensor_free(y);
        y = NULL;
        t = tu_now();
        status = pass(r->ctx, m, x, dy, &y);
        times[done++] = tu_now() - t;
    }
    status = tu_timed(status, times, done, 1e6 / s->T, us, why, whylen);
    cg_tensor_free(y);
    cg_tensor_free(dy);
    cg_tensor_free(x);
    cg_module_free(m);
    return status;
}

/* ------------------------------------------------------------------------
 * The step kernels' VW, RB, WG
 * ------------------------------------------------------------------------ */

typedef struct grid {
    int vals[MAX_GRID][MAX_TUNABLES];
    int n;
} grid;

/* Earlier measurements of the fused LSTM step on a 2-core CPU (PoCL):
 * these came out 3.7-5x faster than the defaults at B 32, H 256. */
static const int cpu_first[][3] = { { 16, 4, 8 }, { 16, 8, 8 } };

static int
grid_has(const grid *g, const int *v, int nt)
{
    int i;

    for (i = 0; i < g->n; i++)
        if (memcmp(g->vals[i], v, sizeof(int) * (size_t)nt) == 0)
            return 1;
    return 0;
}

static double
distance(const int *a, const int *b, int nt)
{
    double d = 0;
    int i;

    for (i = 0; i < nt; i++)
        d += fabs(log2((double)a[i]) - log2((double)b[i]));
    return d;
}

static const int *sort_origin;
static int sort_nt;

static int
cmp_distance(const void *a, const void *b)
{
    double x = distance(a, sort_origin, sort_nt),
           y = distance(b, sort_origin, sort_nt);

    return x < y ? -1 : x > y;
}

/* The candidates in the order they are tried: an earlier run's, the
 * curated ones (on a CPU), then the rest of the grid, nearest to the
 * first tried first. */
static void
make_grid(const tunable *t, int nt, const tu_run *r, const char *kernel,
          grid *g)
{
    int idx[MAX_TUNABLES] = { 0 }, v[MAX_TUNABLES], def[MAX_TUNABLES];
    int i, j, first;

    g->n = 0;
    for (j = 0; j < nt; j++)
        def[j] = t[j].def;
    /* An earlier run's choices for this cell, nearest hidden size first
     * (the caller's order of r->previous is the file's). */
    for (i = 0; i < r->nprevious && g->n < MAX_GRID; i++) {
        const tu_params *e = &r->previous[i];

        if (strcmp(e->kernel, kernel) != 0)
            continue;
        for (j = 0; j < nt; j++)
            v[j] = (int)tu_params_get(e, t[j].name, t[j].def);
        if (memcmp(v, def, sizeof(int) * (size_t)nt) != 0 &&
            !grid_has(g, v, nt))
            memcpy(g->vals[g->n++], v, sizeof(int) * (size_t)nt);
    }
    if (r->dev.type == CG_DEVICE_CPU && nt == 3 &&
        strcmp(t[0].name, "VW") == 0 && strcmp(t[1].name, "RB") == 0 &&
        strcmp(t[2].name, "WG") == 0)
        for (i = 0; i < (int)(sizeof cpu_first / sizeof cpu_first[0]); i++)
            if (!grid_has(g, cpu_first[i], nt))
                memcpy(g->vals[g->n++], cpu_first[i], sizeof cpu_first[i]);
    first = g->n;
    for (;;) {
        for (j = 0; j < nt; j++)
            v[j] = t[j].vals[idx[j]];
        if (memcmp(v, def, sizeof(int) * (size_t)nt) != 0 &&
            !grid_has(g, v, nt) && g->n < MAX_GRID)
            memcpy(g->vals[g->n++], v, sizeof(int) * (size_t)nt);
        for (j = nt - 1; j >= 0 && ++idx[j] == t[j].n; j--)
            idx[j] = 0;
        if (j < 0)
            break;
    }
    sort_origin = first ? g->vals[0] : def;
    sort_nt = nt;
    qsort(g->vals[first], (size_t)(g->n - first), sizeof g->vals[0],
          cmp_distance);
}

/* Why candidate v cannot run for shape s, or NULL. */
static const char *
unfit(const tunable *t, int nt, const int *v, const tu_shape *s,
      const tu_run *r, char *buf, size_t n)
{
    int j;

    for (j = 0; j < nt; j++) {
        if (strcmp(t[j].name, "WG") == 0 &&
            (size_t)v[j] > r->dev.max_work_group_size) {
            snprintf(buf, n, "WG %d is above the device's maximum "
                     "work-group size %zu", v[j],
                     r->dev.max_work_group_size);
            return buf;
        }
        if (strcmp(t[j].name, "RB") == 0 && v[j] > s->B) {
            snprintf(buf, n, "RB %d is above the batch size %d", v[j], s->B);
            return buf;
        }
        if (strcmp(t[j].name, "VW") == 0 && v[j] > s->H) {
            snprintf(buf, n, "VW %d is above the hidden size %d", v[j],
                     s->H);
            return buf;
        }
    }
    return NULL;
}

static void
params_of(tu_params *p, const char *kernel, const char *shape,
          const tunable *t, int nt, const int *v, const char *hash)
{
    int j;

    tu_params_init(p, kernel, shape);
    for (j = 0; j < nt; j++)
        tu_params_add(p, t[j].name, v[j]);
    snprintf(p->source_hash, sizeof p->source_hash, "%s", hash);
}

/* Tunes one shape; returns nonzero if the defaults could not run. */
static int
tune_shape(tu_run *r, const tu_shape *s, const tunable *t, int nt,
           const char *hash)
{
    static grid g;
    const char *kernel = kernel_name(s->mode);
    char shape[48], note[128], why[512], buf[256];
    int def[MAX_TUNABLES], j, i, tried = 0, n;
    rnn_out ref = { 0 };
    tu_params best, cand;
    double def_us = 0, best_us, est, t0;
    json_object *k;

    snprintf(shape, sizeof shape, "H%d", s->H);
    snprintf(note, sizeof note, "%s B%d H%d: step kernels, forward+"
             "backward per step over %d steps, median of up to %d",
             cell_name(s->mode), s->B, s->H, s->T, MAX_REPS);
    k = tu_report_kernel(r, kernel, shape, note);
    for (j = 0; j < nt; j++)
        def[j] = t[j].def;
    params_of(&best, kernel, shape, t, nt, def, hash);
    tu_progress(r, kernel, shape, 0, 0, 0, 0);
    t0 = tu_now();
    if (cg_context_clear_tuning(r->ctx) != CG_OK ||
        measure(r, s, NULL, CG__RNN_PATH_FUSED, 1, MAX_REPS, &def_us,
                &ref, why, sizeof why) != CG_OK) {
        tu_say(r, "%s %s: the defaults failed: %s", kernel, shape, why);
        tu_report_result(k, 0, NULL, 0, why);
        tu_out_free(&ref);
        return -1;
    }
    est = tu_now() - t0;
    best_us = def_us;
    make_grid(t, nt, r, kernel, &g);
    n = g.n;
    if (r->cfg->max_candidates && n > r->cfg->max_candidates)
        n = r->cfg->max_candidates;
    for (i = 0, j = 0; i < g.n && j < n; i++) {
        rnn_out o = { 0 };
        double us = 0;
        const char *skip;
        int st;

        params_of(&cand, kernel, shape, t, nt, g.vals[i], hash);
        if ((skip = unfit(t, nt, g.vals[i], s, r, buf, sizeof buf))) {
            tu_report_candidate(k, &cand, 0, skip, NULL);
            continue;
        }
        if (!tu_fits(r, est))
            break;
        tu_progress(r, kernel, shape, ++j, n, best_us, def_us);
        t0 = tu_now();
        st = measure(r, s, &cand, CG__RNN_PATH_FUSED, 1, MAX_REPS, &us, &o,
                     why, sizeof why);
        if (tu_judge(k, &cand, st, why, us, st == CG_OK
                     ? tu_out_error(&o, &ref) : 0, 1e-5, &best, &best_us,
                     buf, sizeof buf) == 1)
            tried++;
        est = fmax(est, tu_now() - t0);
        tu_out_free(&o);
    }
    tu_out_free(&ref);
    if (!tu_conclude(r, k, tried, &best, best_us, def_us, note))
        return 0;
    tu_say(r, "%s %s: %s, %.1f us per step (defaults %.1f us)", kernel,
           shape, tu_params_str(&best, buf, sizeof buf), best_us, def_us);
    return 0;
}

int
tu_stage_rnn(tu_run *r)
{
    tunable t[MAX_TUNABLES];
    char hash[33];
    int nt, i, failed = 0;
    double end;

    if (cg_kernel_source_hash("rnn", hash) != CG_OK) {
        tu_say(r, "rnn: %s", cg_last_error());
        return -1;
    }
    nt = tu_file_tunables("rnn", t, MAX_TUNABLES);
    if (nt == 0) {
        tu_say(r, "rnn: kernels/rnn.cl declares no @tunable parameters");
        return -1;
    }
    /* Each shape gets an equal share of what is left. */
    end = r->stage_end;
    for (i = 0; i < r->cfg->nshapes && !tu_stopped(r); i++) {
        r->stage_end = tu_now() + (end - tu_now()) / (r->cfg->nshapes - i);
        if (tune_shape(r, &r->cfg->shapes[i], t, nt, hash))
            failed = 1;
    }
    r->stage_end = end;
    cg_context_clear_tuning(r->ctx);
    return failed;
}

/* ------------------------------------------------------------------------
 * The path: fused kernel or a GEMM per step
 * ------------------------------------------------------------------------ */

static int
cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* Puts the step-kernel entries in force: an earlier run's (still valid
 * for this kernel file), then those found so far in this run, which
 * replace them.  Without the earlier ones a run of rnn.path alone timed
 * the fused path with default parameters against the GEMM path. */
static void
apply_rnn_results(tu_run *r)
{
    int i;

    cg_context_clear_tuning(r->ctx);
    for (i = 0; i < r->nprevious; i++)
        if (strncmp(r->previous[i].kernel, "rnn.", 4) == 0 &&
            strcmp(r->previous[i].kernel, "rnn.path") != 0)
            cg_context_set_tuning(r->ctx, &r->previous[i]);
    for (i = 0; i < r->nresults; i++)
        if (strncmp(r->results[i].kernel, "rnn.", 4) == 0 &&
            strcmp(r->results[i].kernel, "rnn.path") != 0)
            cg_context_set_tuning(r->ctx, &r->results[i]);
}

int
tu_stage_rnn_path(tu_run *r)
{
    const tu_shape *first = &r->cfg->shapes[0];
    int hs[TU_MAX_PATH], nh = r->cfg->npath, i, p, min_h = 0, def_h;
    int packed;
    double us[TU_MAX_PATH][3], sum = 0, def_sum = 0, last = 0, t0;
    double gsum[2] = { 0, 0 };
    char note[128], why[512] = "", buf[64], hash[33];
    const char *env = getenv("CLGRAD_RNN_GEMM_MIN_H");
    tu_params e;
    json_object *k;

    memcpy(hs, r->cfg->path_h, sizeof(int) * (size_t)nh);
    qsort(hs, (size_t)nh, sizeof hs[0], cmp_int);
    snprintf(note, sizeof note, "%s B%d I=H T%d: forward+backward per "
             "step, mean over H", cell_name(first->mode), first->B,
             first->T < 16 ? first->T : 16);
    if (r->clblast_dirty[0]) {
        size_t len = strlen(note);

        snprintf(note + len, sizeof note - len, " (CLBlast: %.*s)",
                 (int)(sizeof note - len - 13), r->clblast_dirty);
    }
    k = tu_report_kernel(r, "rnn.path", "any", note);
    apply_rnn_results(r);
    for (i = 0; i < nh; i++) {
        tu_shape s = { first->mode, first->B, hs[i], hs[i],
                       first->T < 16 ? first->T : 16 };
        rnn_out ref = { 0 }, o = { 0 };
        double err;

        /* p 0 the fused kernels, 1 the GEMM path through cg__sgemm, 2
         * the GEMM path on a packed W_hh; each GEMM path checked against
         * the fused one. */
        for (p = 0, err = 0; p < 3; p++) {
            static const int paths[3] = { CG__RNN_PATH_FUSED,
                                          CG__RNN_PATH_GEMM,
                                          PATH_GEMM_PACKED };
            tu_params c;

            tu_params_init(&c, "rnn.path", "any");
            tu_params_add(&c, "H", hs[i]);
            tu_params_add(&c, "gemm", p > 0);
            if (p)
                tu_params_add(&c, "packed", p == 2);
            /* The next size costs about 4 times the last (H^2). */
            if (!tu_fits(r, last * (p ? 1.5 : 4)))
                break;
            tu_progress(r, "rnn.path", "any", 3 * i + p + 1, 3 * nh, 0, 0);
            t0 = tu_now();
            if (measure(r, &s, NULL, paths[p], 0, 3, &us[i][p],
                        p ? &o : &ref, why, sizeof why) != CG_OK) {
                tu_report_candidate(k, &c, 0, why, NULL);
                break;
            }
            tu_report_candidate(k, &c, us[i][p], NULL, NULL);
            last = tu_now() - t0;
            if (p) {
                double oe = tu_out_error(&o, &ref);

                err = oe > err ? oe : err;
                tu_out_free(&o);
            }
        }
        tu_out_free(&o);
        tu_out_free(&ref);
        if (p < 3) {
            int late = tu_stopped(r) || tu_left(r) < last * 4;

            tu_report_result(k, 0, NULL, 0, late ? "incomplete: out of time"
                                                 : why);
            if (late)
                tu_say(r, "rnn.path: out of time at H %d", hs[i]);
            cg_context_clear_tuning(r->ctx);
            return late ? 0 : -1;
        }
        if (err > 1e-4) {
            snprintf(why, sizeof why, "the GEMM path does not verify at H "
                     "%d: relative error %.3g", hs[i], err);
            tu_report_result(k, 0, NULL, 0, why);
            tu_say(r, "rnn.path: %s", why);
            cg_context_clear_tuning(r->ctx);
            return -1;
        }
    }
    cg_context_clear_tuning(r->ctx);
    /* Packed or not: the GEMM path's faster over every size measured;
     * then the smallest H from which that GEMM path wins at every larger
     * size measured. */
    for (i = 0; i < nh; i++) {
        gsum[0] += us[i][1];
        gsum[1] += us[i][2];
    }
    packed = gsum[1] < gsum[0];
    for (i = nh - 1; i >= 0 && us[i][1 + packed] < us[i][0]; i--)
        min_h = hs[i];
    def_h = env && *env ? atoi(env) : CG__RNN_GEMM_MIN_H;
    for (i = 0; i < nh; i++) {
        sum += us[i][min_h > 0 && hs[i] >= min_h ? 1 + packed : 0];
        def_sum += us[i][def_h > 0 && hs[i] >= def_h ? 1 + CG__RNN_PACKED_WHH
                                                     : 0];
    }
    tu_params_init(&e, "rnn.path", "any");
    tu_params_add(&e, "gemm_min_h", min_h);
    tu_params_add(&e, "packed", packed);
    e.time_us = sum / nh;
    e.default_time_us = def_sum / nh;
    if (cg_kernel_source_hash("rnn", hash) == CG_OK)
        snprintf(e.source_hash, sizeof e.source_hash, "%s", hash);
    snprintf(e.note, sizeof e.note, "%s", note);
    tu_keep(r, &e);
    tu_report_result(k, e.default_time_us, &e, e.time_us, "tuned");
    tu_say(r, "rnn.path: %s", tu_params_str(&e, buf, sizeof buf));
    return 0;
}
