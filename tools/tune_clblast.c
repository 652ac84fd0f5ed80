/* SPDX-License-Identifier: MIT */
/*
 * tools/tune_clblast.c - clgrad-tune's stages for CLBlast's kernels.
 *
 * CLBlast keeps one parameter set per kernel and device for the whole
 * process and cannot go back to its defaults once overridden, so each
 * stage times the defaults first (and keeps their result as the
 * reference), then applies candidates one after another with
 * cg_context_set_tuning and times SGEMM with each, the first call (which
 * compiles) not counted.  At the end of a stage the best set is applied
 * again; when no candidate beat the defaults, the process keeps running
 * with a candidate (noted in later stages' notes).
 *
 * CLBlast's own random search runs in a child process (tune_child.c); its
 * answer is timed and verified here like any other candidate.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tune.h"
#include "cl/internal.h"
#include "tune/internal.h"
#include "nn/internal.h"
#include "ops/internal.h"

#define REPS 5

/* ------------------------------------------------------------------------
 * Timing one SGEMM shape
 * ------------------------------------------------------------------------ */

typedef struct bench {
    size_t m, n, k;
    cg_buffer *a, *b, *c;
    float *ref;             /* the defaults' result */
    float *out;
} bench;

static void
bench_free(bench *b)
{
    cg_buffer_free(b->a);
    cg_buffer_free(b->b);
    cg_buffer_free(b->c);
    free(b->ref);
    free(b->out);
    memset(b, 0, sizeof *b);
}

/* A and B from a fixed seed, uniform in [-1, 1]. */
static int
bench_init(tu_run *r, bench *b, size_t m, size_t n, size_t k)
{
    size_t na = m * k, nb = k * n, i;
    float *h = malloc((na > nb ? na : nb) * sizeof *h);
    unsigned s = 12345;
    int status = CG_OK;

    memset(b, 0, sizeof *b);
    b->m = m;
    b->n = n;
    b->k = k;
    b->ref = malloc(m * n * sizeof(float));
    b->out = malloc(m * n * sizeof(float));
    b->a = cg_buffer_new(r->ctx, na * sizeof(float));
    b->b = cg_buffer_new(r->ctx, nb * sizeof(float));
    b->c = cg_buffer_new(r->ctx, m * n * sizeof(float));
    if (!h || !b->ref || !b->out)
        status = CG_EHOSTMEM;
    else if (!b->a || !b->b || !b->c)
        status = CG_ENOMEM;
    for (i = 0; status == CG_OK && i < (na > nb ? na : nb); i++) {
        s = s * 1103515245u + 12345u;
        h[i] = (float)((s >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    if (status == CG_OK)
        status = cg_buffer_write(b->a, 0, h, na * sizeof(float));
    if (status == CG_OK)
        status = cg_buffer_write(b->b, 0, h, nb * sizeof(float));
    free(h);
    if (status != CG_OK)
        bench_free(b);
    return status;
}

static int
sgemm(tu_run *r, bench *b, char *why, size_t whylen)
{
    cg__mat am = { cg__buffer_mem(b->a), 0, b->k };
    cg__mat bm = { cg__buffer_mem(b->b), 0, b->n };
    cg__mat cm = { cg__buffer_mem(b->c), 0, b->n };
    cl_int crc;

    /* The library's own entry, so that what is timed is what matmul and
     * the recurrent layers run. */
    if (cg__sgemm(r->ctx, 0, 0, b->m, b->n, b->k, 1.0f, am, bm, 0.0f,
                  cm) != CG_OK) {
        snprintf(why, whylen, "%s", cg_last_error());
        return -1;
    }
    crc = clFinish(r->ctx->queue);
    if (crc != CL_SUCCESS) {
        snprintf(why, whylen, "clFinish failed with OpenCL status %d",
                 (int)crc);
        return -1;
    }
    return 0;
}

/* One untimed call (it compiles), its result into `into`, then up to
 * REPS timed calls: *us is their median. */
static int
bench_run(tu_run *r, bench *b, float *into, double *us, char *why,
          size_t whylen)
{
    double times[REPS];
    int i, n = 0;

    if (sgemm(r, b, why, whylen) ||
        cg_buffer_read(b->c, 0, into, b->m * b->n * sizeof(float)))
        return -1;
    for (i = 0; i < REPS; i++) {
        double t;

        if (i > 0 && (tu_stopped(r) || tu_left(r) < times[0]))
            break;
        t = tu_now();
        if (sgemm(r, b, why, whylen))
            return -1;
        times[n++] = tu_now() - t;
    }
    *us = tu_median(times, n) * 1e6;
    return 0;
}

/* Largest difference relative to the largest reference value. */
static double
bench_error(const bench *b)
{
    double scale = 1e-30, err = 0;
    size_t i;

    for (i = 0; i < b->m * b->n; i++) {
        double d = fabs((double)b->out[i] - b->ref[i]);

        scale = fmax(scale, fabs((double)b->ref[i]));
        err = isnan(d) ? INFINITY : fmax(err, d);
    }
    return err / scale;
}

/* Float sums of K terms in another order: allow more for larger K. */
static double
tolerance(size_t k)
{
    return 1e-4 * fmax(1.0, (double)k / 256.0);
}

/* ------------------------------------------------------------------------
 * One kernel's candidates
 * ------------------------------------------------------------------------ */

typedef struct stage {
    const char *kernel;         /* "clblast.Xgemm" */
    bench *b;
    json_object *k;
    double def_us, best_us, est;
    tu_params best, last_ok;
    int have_best, have_ok, applied, applied_is_best;
} stage;

/* Times the defaults; keeps their result as the reference. */
static int
stage_begin(tu_run *r, stage *st, const char *kernel, bench *b,
            const char *note)
{
    char why[512];
    double t0 = tu_now();

    memset(st, 0, sizeof *st);
    st->kernel = kernel;
    st->b = b;
    st->k = tu_report_kernel(r, kernel, "any", note);
    tu_progress(r, kernel, "any", 0, 0, 0, 0);
    if (bench_run(r, b, b->ref, &st->def_us, why, sizeof why)) {
        tu_say(r, "%s: the defaults failed: %s", kernel, why);
        tu_report_result(st->k, 0, NULL, 0, why);
        return -1;
    }
    st->best_us = st->def_us;
    st->est = tu_now() - t0;
    return 0;
}

/* Applies, times and verifies one candidate. */
static void
stage_try(tu_run *r, stage *st, const tu_params *p, const char *source)
{
    char why[512];
    double us = 0, err, t0 = tu_now();

    if (cg_context_set_tuning(r->ctx, p) != CG_OK) {
        snprintf(why, sizeof why, "%s", cg_last_error());
        tu_report_candidate(st->k, p, 0, why, source);
        return;
    }
    st->applied = 1;
    st->applied_is_best = 0;
    if (bench_run(r, st->b, st->b->out, &us, why, sizeof why)) {
        tu_report_candidate(st->k, p, 0, why, source);
    } else if ((err = bench_error(st->b)) > tolerance(st->b->k)) {
        snprintf(why, sizeof why, "does not verify: relative error %.3g "
                 "against the defaults", err);
        tu_report_candidate(st->k, p, 0, why, source);
    } else {
        tu_report_candidate(st->k, p, us, NULL, source);
        st->last_ok = *p;
        st->have_ok = 1;
        if (us < st->best_us) {
            st->best = *p;
            st->best_us = us;
            st->have_best = 1;
            st->applied_is_best = 1;
        }
    }
    st->est = fmax(st->est, tu_now() - t0);
}

static void
mark_dirty(tu_run *r, const char *what)
{
    size_t len = strlen(r->clblast_dirty);

    snprintf(r->clblast_dirty + len, sizeof r->clblast_dirty - len, "%s%s",
             len ? ", " : "", what);
}

/* Puts the best set back in force and keeps it for the database. */
static void
stage_end(tu_run *r, stage *st, const char *note)
{
    char buf[512];

    if (st->have_best) {
        if (!st->applied_is_best)
            cg_context_set_tuning(r->ctx, &st->best);
        st->best.time_us = st->best_us;
        st->best.default_time_us = st->def_us;
        snprintf(st->best.note, sizeof st->best.note, "%s", note);
        tu_keep(r, &st->best);
        tu_report_result(st->k, st->def_us, &st->best, st->best_us, "tuned");
        tu_say(r, "%s: %s, %.1f us (defaults %.1f us)", st->kernel,
               tu_params_str(&st->best, buf, sizeof buf), st->best_us,
               st->def_us);
        return;
    }
    tu_report_result(st->k, st->def_us, NULL, 0, st->applied
                     ? "the defaults are the fastest" : "no candidate tried");
    if (st->applied) {
        /* CLBlast cannot go back to its defaults: run on with a working
         * set at least. */
        if (st->have_ok)
            cg_context_set_tuning(r->ctx, &st->last_ok);
        mark_dirty(r, st->kernel + strlen("clblast."));
    }
}

/* The search in the child for what is left of the stage (less the time to
 * time its answer), then its answer as a candidate. */
static void
search(tu_run *r, stage *st, const char *name, size_t m, size_t n,
       size_t k)
{
    double end = r->stage_end - st->est;
    tu_params p;
    char why[512];

    if (end - tu_now() < 5 || tu_stopped(r)) {
        tu_params_init(&p, st->kernel, "any");
        tu_report_candidate(st->k, &p, 0, "CLBlast's search: not enough "
                            "time left", "clblast-search");
        return;
    }
    tu_progress(r, st->kernel, "any", 1, 0, st->best_us, st->def_us);
    if (tu_child_search(r, st->kernel, name, m, n, k, end, &p, why,
                        sizeof why)) {
        tu_params_init(&p, st->kernel, "any");
        tu_report_candidate(st->k, &p, 0, why, "clblast-search");
        return;
    }
    if (!tu_stopped(r))
        stage_try(r, st, &p, "clblast-search");
}

/* ------------------------------------------------------------------------
 * Xgemm
 * ------------------------------------------------------------------------ */

static const char *const xgemm_names[16] = {
    "GEMMK", "KREG", "KWG", "KWI", "MDIMA", "MDIMC", "MWG", "NDIMB",
    "NDIMC", "NWG", "SA", "SB", "STRM", "STRN", "VWM", "VWN"
};

/* Curated sets, in xgemm_names' order; cpu: small work-groups, wide
 * vectors, no local memory; the rest GPU-like. */
static const struct {
    int cpu;
    long v[16];
} xgemm_sets[] = {
    /*  G KR KWG KWI MDA MDC MWG NDB NDC NWG SA SB SM SN VWM VWN */
    { 1, { 0, 1, 32, 2, 8, 8, 64, 8, 8, 64, 0, 0, 0, 0, 4, 4 } },
    { 1, { 0, 1, 32, 2, 8, 8, 128, 8, 8, 128, 0, 0, 0, 0, 8, 8 } },
    { 1, { 0, 1, 16, 2, 4, 4, 64, 4, 4, 64, 0, 0, 0, 0, 8, 8 } },
    { 1, { 0, 1, 16, 2, 4, 4, 32, 4, 4, 32, 0, 0, 0, 0, 4, 4 } },
    { 1, { 0, 1, 32, 2, 8, 8, 64, 8, 8, 64, 0, 0, 0, 0, 8, 8 } },
    { 1, { 0, 1, 32, 2, 16, 16, 128, 8, 8, 64, 0, 0, 0, 0, 8, 8 } },
    { 1, { 0, 1, 32, 2, 8, 8, 64, 8, 8, 64, 1, 1, 0, 0, 4, 4 } },
    { 1, { 1, 4, 1, 1, 8, 8, 64, 8, 8, 64, 0, 0, 0, 0, 4, 4 } },
    { 0, { 0, 1, 16, 2, 16, 16, 64, 16, 16, 64, 1, 1, 0, 0, 2, 2 } },
    { 0, { 0, 1, 16, 2, 16, 16, 128, 16, 16, 128, 1, 1, 0, 0, 4, 4 } },
    { 0, { 0, 1, 32, 2, 16, 16, 64, 16, 16, 128, 1, 1, 0, 0, 2, 4 } },
    { 0, { 0, 1, 32, 2, 8, 8, 32, 8, 8, 32, 1, 1, 0, 0, 1, 1 } },
};

/* Why CLBlast cannot run this parameter set on the device (the
 * library's check, lib/tune/clblast.c, that also guards the database
 * reader), or NULL. */
static const char *
clblast_invalid(const tu_run *r, const tu_params *p, char *buf, size_t n)
{
    if (cg__clblast_check(&r->dev, p) == CG_OK)
        return NULL;
    snprintf(buf, n, "%s", cg_last_error());
    return buf;
}

static size_t
gemm_size(const tu_run *r)
{
    if (r->cfg->gemm_size)
        return (size_t)r->cfg->gemm_size;
    return r->cfg->budget >= 120 ? 1024 : r->cfg->budget >= 40 ? 512 : 256;
}

/* The curated sets of one table, the device's kind first, while the
 * stage has more than `keep` seconds left. */
static void
try_curated(tu_run *r, stage *st, const char *const *names, int nnames,
            const long (*sets)[16], const int *cpu, int nsets,
            const char *(*invalid)(const tu_run *, const tu_params *,
                                   char *, size_t), double keep)
{
    int pass, i, tried = 0, max = r->cfg->max_candidates;
    int want_cpu = r->dev.type == CG_DEVICE_CPU;
    char buf[256];

    /* An earlier run's set first. */
    for (i = 0; i < r->nprevious; i++) {
        const tu_params *e = &r->previous[i];

        if (strcmp(e->kernel, st->kernel) != 0)
            continue;
        if (invalid(r, e, buf, sizeof buf)) {
            tu_report_candidate(st->k, e, 0, buf, "earlier run");
            break;
        }
        if (tu_fits(r, st->est + keep)) {
            tu_progress(r, st->kernel, "any", 0, nsets, st->best_us,
                        st->def_us);
            stage_try(r, st, e, "earlier run");
        }
        break;
    }
    for (pass = 0; pass < 2; pass++)
        for (i = 0; i < nsets; i++) {
            tu_params p;
            const char *why;
            int j;

            if ((cpu[i] == want_cpu) != (pass == 0))
                continue;
            tu_params_init(&p, st->kernel, "any");
            for (j = 0; j < nnames; j++)
                tu_params_add(&p, names[j], sets[i][j]);
            if ((why = invalid(r, &p, buf, sizeof buf))) {
                tu_report_candidate(st->k, &p, 0, why, "curated");
                continue;
            }
            if ((max && tried >= max) || !tu_fits(r, st->est + keep))
                return;
            tu_progress(r, st->kernel, "any", tried + 1, nsets, st->best_us,
                        st->def_us);
            stage_try(r, st, &p, "curated");
            tried++;
        }
}

int
tu_stage_xgemm(tu_run *r)
{
    static long sets[sizeof xgemm_sets / sizeof xgemm_sets[0]][16];
    static int cpu[sizeof xgemm_sets / sizeof xgemm_sets[0]];
    int nsets = (int)(sizeof xgemm_sets / sizeof xgemm_sets[0]), i;
    size_t N = gemm_size(r);
    char note[128];
    bench b;
    stage st;

    for (i = 0; i < nsets; i++) {
        memcpy(sets[i], xgemm_sets[i].v, sizeof sets[i]);
        cpu[i] = xgemm_sets[i].cpu;
    }
    snprintf(note, sizeof note, "SGEMM %zux%zux%zu, median of %d", N, N, N,
             REPS);
    if (bench_init(r, &b, N, N, N) != CG_OK) {
        tu_say(r, "clblast.Xgemm: %s", cg_last_error());
        return -1;
    }
    if (stage_begin(r, &st, "clblast.Xgemm", &b, note)) {
        bench_free(&b);
        return -1;
    }
    /* Half the stage for the curated sets, the rest for the search. */
    try_curated(r, &st, xgemm_names, 16, (const long (*)[16])sets, cpu,
                nsets, clblast_invalid, 0.5 * tu_left(r));
    search(r, &st, "Xgemm", 256, 256, 256);
    stage_end(r, &st, note);
    bench_free(&b);
    return 0;
}

/* ------------------------------------------------------------------------
 * XgemmDirect, and when CLBlast uses it
 * ------------------------------------------------------------------------ */

static const char *const direct_names[10] = {
    "KWID", "MDIMAD", "MDIMCD", "NDIMBD", "NDIMCD", "PADA", "PADB", "VWMD",
    "VWND", "WGD"
};

static const struct {
    int cpu;
    long v[10];
} direct_sets[] = {
    /* KWID MDAD MDCD NDBD NDCD PADA PADB VWMD VWND WGD */
    { 1, { 2, 8, 8, 8, 8, 1, 1, 4, 4, 32 } },
    { 1, { 2, 4, 4, 4, 4, 1, 1, 4, 4, 16 } },
    { 1, { 2, 4, 4, 4, 4, 1, 1, 8, 8, 32 } },
    { 1, { 2, 8, 8, 8, 8, 1, 1, 8, 8, 64 } },
    { 1, { 2, 8, 8, 8, 8, 1, 1, 1, 1, 8 } },
    { 0, { 2, 16, 16, 16, 16, 1, 1, 2, 2, 32 } },
    { 0, { 2, 8, 8, 8, 8, 1, 1, 2, 2, 16 } },
    { 0, { 8, 16, 16, 16, 16, 1, 1, 4, 4, 64 } },
};

/* The recurrent product of a model shape's step: B x G*H x H. */
static void
step_shape(const tu_shape *s, size_t *m, size_t *n, size_t *k)
{
    int G = cg__rnn_gates(cg__rnn_cell_of(s->mode));

    *m = (size_t)s->B;
    *n = (size_t)(G * s->H);
    *k = (size_t)s->H;
}

int
tu_stage_xgemm_direct(tu_run *r)
{
    static long sets[sizeof direct_sets / sizeof direct_sets[0]][16];
    static int cpu[sizeof direct_sets / sizeof direct_sets[0]];
    int nsets = (int)(sizeof direct_sets / sizeof direct_sets[0]), i;
    char note[128];
    size_t m, n, k;
    bench b;
    stage st;

    for (i = 0; i < nsets; i++) {
        memcpy(sets[i], direct_sets[i].v, sizeof direct_sets[i].v);
        cpu[i] = direct_sets[i].cpu;
    }
    step_shape(&r->cfg->shapes[0], &m, &n, &k);
    snprintf(note, sizeof note, "SGEMM %zux%zux%zu (recurrent step), "
             "median of %d%s%.40s", m, n, k, REPS,
             r->clblast_dirty[0] ? "; CLBlast: " : "", r->clblast_dirty);
    if (bench_init(r, &b, m, n, k) != CG_OK) {
        tu_say(r, "clblast.XgemmDirect: %s", cg_last_error());
        return -1;
    }
    if (stage_begin(r, &st, "clblast.XgemmDirect", &b, note)) {
        bench_free(&b);
        return -1;
    }
    try_curated(r, &st, direct_names, 10, (const long (*)[16])sets, cpu,
                nsets, clblast_invalid, 0.5 * tu_left(r));
    search(r, &st, "XgemmDirect", 256, 256, 256);
    stage_end(r, &st, note);
    bench_free(&b);
    return 0;
}

#define MAX_ROUTINE_SHAPES (TU_MAX_SHAPES + 3)

/* XGEMM_MIN_INDIRECT_SIZE: CLBlast runs XgemmDirect when m n k is below
 * its cube.  Times every step shape and three cubes with each kernel and
 * takes the smallest size from which Xgemm wins at every larger one. */
int
tu_stage_gemm_routine(tu_run *r)
{
    size_t sh[MAX_ROUTINE_SHAPES][3], cubes[3] = { 128, 256, 512 };
    double us[MAX_ROUTINE_SHAPES][3], side[MAX_ROUTINE_SHAPES];
    bench bs[MAX_ROUTINE_SHAPES];
    int ns = 0, i, j, mode, complete = 1;
    long thr;
    double sum = 0, def_sum = 0;
    char note[128], why[512];
    json_object *k;
    tu_params e, c;

    for (i = 0; i < r->cfg->nshapes && ns < MAX_ROUTINE_SHAPES - 3; i++) {
        step_shape(&r->cfg->shapes[i], &sh[ns][0], &sh[ns][1], &sh[ns][2]);
        for (j = 0; j < ns; j++)
            if (!memcmp(sh[j], sh[ns], sizeof sh[ns]))
                break;
        ns += j == ns;
    }
    for (i = 0; i < 3; i++, ns++)
        sh[ns][0] = sh[ns][1] = sh[ns][2] = cubes[i];
    snprintf(note, sizeof note, "SGEMM at %d sizes (steps, 128-512 cubes), "
             "sum of medians%s%.40s", ns, r->clblast_dirty[0] ? "; CLBlast: "
             : "", r->clblast_dirty);
    k = tu_report_kernel(r, "clblast.GemmRoutine", "any", note);
    memset(bs, 0, sizeof bs);
    for (i = 0; i < ns; i++)
        if (bench_init(r, &bs[i], sh[i][0], sh[i][1], sh[i][2]) != CG_OK) {
            tu_report_result(k, 0, NULL, 0, cg_last_error());
            while (i-- > 0)
                bench_free(&bs[i]);
            return -1;
        }
    /* Mode 0: the defaults (first, before any override); 1: XgemmDirect
     * everywhere; 2: Xgemm everywhere. */
    for (mode = 0; mode < 3 && complete; mode++) {
        tu_params_init(&c, "clblast.GemmRoutine", "any");
        tu_params_add(&c, "XGEMM_MIN_INDIRECT_SIZE", mode == 1 ? 16384 : 1);
        if (mode && cg_context_set_tuning(r->ctx, &c) != CG_OK) {
            snprintf(why, sizeof why, "%s", cg_last_error());
            tu_report_candidate(k, &c, 0, why, NULL);
            complete = 0;
            break;
        }
        for (i = 0; i < ns && complete; i++) {
            tu_progress(r, "clblast.GemmRoutine", "any", mode * ns + i + 1,
                        3 * ns, 0, 0);
            if (tu_stopped(r)) {
                complete = 0;
            } else if (bench_run(r, &bs[i], mode ? bs[i].out : bs[i].ref,
                                 &us[i][mode], why, sizeof why)) {
                if (mode)
                    tu_report_candidate(k, &c, 0, why, NULL);
                complete = 0;
            } else if (mode && bench_error(&bs[i]) > tolerance(bs[i].k)) {
                tu_report_candidate(k, &c, 0, "does not verify against "
                                    "the defaults", NULL);
                complete = 0;
            }
        }
        if (mode && complete) {
            double t = 0;

            for (i = 0; i < ns; i++)
                t += us[i][mode];
            tu_report_candidate(k, &c, t, NULL, NULL);
        }
    }
    for (i = 0; i < ns; i++)
        bench_free(&bs[i]);
    if (!complete) {
        tu_report_result(k, 0, NULL, 0, "incomplete");
        if (mode > 1) {
            /* CLBlast cannot go back to its own choice. */
            mark_dirty(r, "GemmRoutine");
        }
        return 0;
    }
    for (i = 0; i < ns; i++)
        side[i] = cbrt((double)sh[i][0] * sh[i][1] * sh[i][2]);
    /* Sizes in increasing order of volume, with their times. */
    for (i = 1; i < ns; i++)
        for (j = i; j > 0 && side[j] < side[j - 1]; j--) {
            double ts = side[j], tu[3];
            size_t tsh[3];

            side[j] = side[j - 1];
            side[j - 1] = ts;
            memcpy(tu, us[j], sizeof tu);
            memcpy(us[j], us[j - 1], sizeof tu);
            memcpy(us[j - 1], tu, sizeof tu);
            memcpy(tsh, sh[j], sizeof tsh);
            memcpy(sh[j], sh[j - 1], sizeof tsh);
            memcpy(sh[j - 1], tsh, sizeof tsh);
        }
    thr = (long)ceil(side[ns - 1]) * 2;
    for (i = ns - 1; i >= 0 && us[i][2] <= us[i][1]; i--)
        thr = (long)floor(side[i]);
    for (i = 0; i < ns; i++) {
        sum += us[i][side[i] < (double)thr ? 1 : 2];
        def_sum += us[i][0];
    }
    tu_params_init(&e, "clblast.GemmRoutine", "any");
    tu_params_add(&e, "XGEMM_MIN_INDIRECT_SIZE", thr);
    cg_context_set_tuning(r->ctx, &e);
    if (sum >= def_sum) {
        tu_report_result(k, def_sum, NULL, 0, "the defaults are the fastest");
        mark_dirty(r, "GemmRoutine");
        return 0;
    }
    e.time_us = sum;
    e.default_time_us = def_sum;
    snprintf(e.note, sizeof e.note, "%s", note);
    tu_keep(r, &e);
    tu_report_result(k, def_sum, &e, sum, "tuned");
    tu_say(r, "clblast.GemmRoutine: XGEMM_MIN_INDIRECT_SIZE=%ld", thr);
    return 0;
}

/* ------------------------------------------------------------------------
 * Copy, Pad, Transpose, Padtranspose
 * ------------------------------------------------------------------------ */

int
tu_stage_copy(tu_run *r)
{
    static const char *const names[4] = { "Copy", "Pad", "Transpose",
                                          "Padtranspose" };
    size_t N = gemm_size(r) > 64 ? gemm_size(r) - 24 : 40;
    char note[128], kernel[48];
    double start_us = 0, t0;
    bench b;
    int i;

    snprintf(note, sizeof note, "SGEMM %dx%dx%d (padded), median of %d%s"
             "%.40s", (int)N, (int)N, (int)N, REPS, r->clblast_dirty[0] ? "; CLBlast: " : "",
             r->clblast_dirty);
    if (bench_init(r, &b, N, N, N) != CG_OK) {
        tu_say(r, "clblast.copy-kernels: %s", cg_last_error());
        return -1;
    }
    for (i = 0; i < 4 && !tu_stopped(r); i++) {
        stage st;
        double share = tu_left(r) / (4 - i);

        snprintf(kernel, sizeof kernel, "clblast.%s", names[i]);
        if (share < 10) {
            tu_params p;
            json_object *k = tu_report_kernel(r, kernel, "any", note);

            tu_params_init(&p, kernel, "any");
            tu_report_candidate(k, &p, 0, "CLBlast's search: not enough "
                                "time left", "clblast-search");
            tu_report_result(k, 0, NULL, 0, "no candidate tried");
            continue;
        }
        t0 = tu_now();
        /* The reference (and the time to beat) is the state before this
         * kernel's search: the earlier kernels' winners are in force. */
        if (stage_begin(r, &st, kernel, &b, note))
            break;
        if (start_us == 0)
            start_us = st.def_us;
        st.def_us = start_us;
        {
            double save = r->stage_end;

            r->stage_end = t0 + share;
            search(r, &st, names[i], 1024, 1024, 1);
            r->stage_end = save;
        }
        stage_end(r, &st, note);
    }
    bench_free(&b);
    return 0;
}
