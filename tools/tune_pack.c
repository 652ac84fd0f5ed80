/* SPDX-License-Identifier: MIT */
/*
 * tools/tune_pack.c - clgrad-tune's stage "pack": the tunables of
 * kernels/gemm_pack.cl (the micro-tile, PMR rows by PTN vectors of PVW
 * floats; PMB micro-tiles per work-item, PKC steps of K per block, the
 * work-group PWG), one entry "gemm_pack" of shape "any", whose values
 * become the context's for every kernel of the file.  The candidates are
 * the @tunable lines of the file's banner, read from the kernel table:
 * first every pair of PMR and PTN (the micro-tile, which decides how many
 * accumulators a work-item holds in registers) with the rest at their
 * defaults, then the other parameters one at a time, each one's values
 * tried with the best so far kept (coordinate descent).
 *
 * The operation timed is the sum of what runs on those kernels, sized by
 * the first --model-shape (B, H, I, T):
 *   conv  a convolution at stride 1, forward and backward: N = B / 4
 *         images of C = H / 4 channels, 28 x 28, to K = C channels by
 *         3 x 3 with padding 1 (gemm_shift for the output and the input
 *         gradient, gemm_shift_dw for the weight gradient); for the
 *         default lstm:B=32,H=256 that is clgrad-bench's N8 C64 28 K64
 *   gemm  the weight gradient of the layer's input projection on the
 *         packed backend, 4H x I over B * T rows (TN: gemm_pack_a,
 *         gemm_pack_b, gemm_packed)
 * Inputs come from the same seed for the defaults and every candidate;
 * a candidate's outputs and gradients must match the defaults' (the
 * blocking of K changes the order of the sums, so not bit for bit).  The
 * search's winner is then timed against the defaults in alternating
 * rounds (confirm), and written only if it wins there too; its entry's
 * times are those rounds' medians.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tune.h"
#include "cl/internal.h"
#include "ops/internal.h"

#define FILE_NAME "gemm_pack"
#define MAX_TUNABLES 8
#define MAX_REPS 15
#define MAX_INNER 32
#define SAMPLE_S 0.002      /* a timed sample runs the operation this long */
#define TOLERANCE 1e-5
#define SIDE 28             /* the convolution's image height and width */
#define ROUNDS 5            /* the confirmation's rounds */

/* The operation's inputs, made from the same seed each time. */
typedef struct pwork {
    cg_tensor *x, *w, *dy;      /* the convolution */
    cg_tensor *a, *b;           /* the product: a^T b */
} pwork;

static void
work_free(pwork *w)
{
    cg_tensor_free(w->x);
    cg_tensor_free(w->w);
    cg_tensor_free(w->dy);
    cg_tensor_free(w->a);
    cg_tensor_free(w->b);
    memset(w, 0, sizeof *w);
}

/* The sizes, from the first model shape (at least 1 each). */
static void
sizes(const tu_shape *s, int64_t *n, int64_t *c, int64_t *rows,
      int64_t *m, int64_t *cols)
{
    *n = s->B / 4 > 0 ? s->B / 4 : 1;
    *c = s->H / 4 > 0 ? s->H / 4 : 1;
    *rows = (int64_t)s->B * s->T;
    *m = 4 * (int64_t)s->H;
    *cols = s->I;
}

static int
work_init(cg_context *ctx, pwork *w, const tu_shape *s)
{
    int64_t n, c, rows, m, cols;
    int status;

    sizes(s, &n, &c, &rows, &m, &cols);
    memset(w, 0, sizeof *w);
    if ((status = cg_manual_seed(ctx, 20261129)) != CG_OK)
        return status;
    {
        int64_t xs[4] = { n, c, SIDE, SIDE }, ws[4] = { c, c, 3, 3 };
        int64_t as[2] = { rows, m }, bs[2] = { rows, cols };

        w->x = cg_rand_uniform(ctx, 4, xs, -1, 1);
        w->w = cg_rand_uniform(ctx, 4, ws, -1, 1);
        w->dy = cg_rand_uniform(ctx, 4, xs, -1, 1);
        w->a = cg_rand_uniform(ctx, 2, as, -1, 1);
        w->b = cg_rand_uniform(ctx, 2, bs, -1, 1);
    }
    if (!w->x || !w->w || !w->dy || !w->a || !w->b ||
        cg_tensor_set_requires_grad(w->x, 1) != CG_OK ||
        cg_tensor_set_requires_grad(w->w, 1) != CG_OK)
        return -1;
    return CG_OK;
}

/* Runs the operation once (enqueued; the caller waits); with out, keeps
 * its outputs and gradients there. */
static int
work_run(cg_context *ctx, pwork *w, tu_out *out)
{
    cg_conv_options o;
    cg_tensor *y, *p;
    int status, was = ctx->gemm_backend;

    memset(&o, 0, sizeof o);
    o.padding[0] = o.padding[1] = 1;
    if ((status = cg_tensor_zero_grad(w->x)) != CG_OK ||
        (status = cg_tensor_zero_grad(w->w)) != CG_OK)
        return status;
    if (!(y = cg_conv2d(w->x, w->w, NULL, &o)))
        return -1;
    status = cg_backward(y, w->dy, 0);
    if (status == CG_OK && out)
        status = tu_out_add(out, y);
    if (status == CG_OK && out)
        status = tu_out_add(out, cg_tensor_grad(w->x));
    if (status == CG_OK && out)
        status = tu_out_add(out, cg_tensor_grad(w->w));
    cg_tensor_free(y);
    if (status != CG_OK)
        return status;
    /* on the packed backend whatever the rules or CLGRAD_GEMM say */
    cg__gemm_force(ctx, CG__GEMM_PACKED);
    p = cg_matmul_t(w->a, w->b, 1, 0);
    cg__gemm_force(ctx, (cg__gemm_backend)was);
    if (!p)
        return -1;
    if (out)
        status = tu_out_add(out, p);
    cg_tensor_free(p);
    return status;
}

/* One timed run, for tu_time. */
static int
timed_run(cg_context *ctx, void *w)
{
    return work_run(ctx, w, NULL);
}

/* Puts p in force (NULL: the defaults), makes the inputs, runs the
 * operation twice (compiling; its outputs into *out), then times up to
 * MAX_REPS samples (*inner as tune_kernels.c's measure): *us is the
 * median per run.  On failure, why says what. */
static int
measure(tu_run *r, const tu_shape *s, const tu_params *p, int *inner,
        double *us, tu_out *out, char *why, size_t whylen)
{
    pwork w;
    int status;

    memset(&w, 0, sizeof w);
    status = p ? cg_context_set_tuning(r->ctx, p)
               : cg_context_clear_tuning(r->ctx);
    if (status == CG_OK)
        status = work_init(r->ctx, &w, s);
    if (status == CG_OK)
        status = work_run(r->ctx, &w, out);
    /* and once more before timing: the first run also compiled */
    if (status == CG_OK)
        status = work_run(r->ctx, &w, NULL);
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

/* Whether tunable name is one of the micro-tile's pair, PMR and PTN,
 * tried as a grid: the accumulators a tile keeps in registers are their
 * product, so that neither's best value holds for every value of the
 * other. */
static int
in_tile(const char *name)
{
    return strcmp(name, "PMR") == 0 || strcmp(name, "PTN") == 0;
}

/* The grid of the tile's pair a x b but the defaults, as pairs of
 * values in pairs[][2], in the order they are tried: an earlier run's
 * pair first, then the rest nearest the defaults first. */
static int
order_pairs(const tu_run *r, const tu_tunable *a, const tu_tunable *b,
            int pairs[][2])
{
    long pa = tu_previous_value(r, FILE_NAME, a);
    long pb = tu_previous_value(r, FILE_NAME, b);
    int n = 0, first, i, j, l;

    if (pa != a->def || pb != b->def) {
        pairs[n][0] = (int)pa;
        pairs[n++][1] = (int)pb;
    }
    first = n;
    for (i = 0; i < a->n; i++)
        for (j = 0; j < b->n; j++) {
            int va = a->vals[i], vb = b->vals[j];
            double d = tu_value_distance(va, a->def) +
                       tu_value_distance(vb, b->def);

            if (va <= 0 || vb <= 0 || (va == a->def && vb == b->def) ||
                (first && va == pa && vb == pb))
                continue;
            for (l = n; l > first &&
                 tu_value_distance(pairs[l - 1][0], a->def) +
                 tu_value_distance(pairs[l - 1][1], b->def) > d; l--) {
                pairs[l][0] = pairs[l - 1][0];
                pairs[l][1] = pairs[l - 1][1];
            }
            pairs[l][0] = va;
            pairs[l][1] = vb;
            n++;
        }
    return n;
}

/* The PVW at which the grid runs: the widest of its values no wider than
 * the device's native float vector where that is narrower than PVW's
 * default (PoCL on an AVX2 CPU: 8 floats, 16 vector registers), else 0,
 * the default.  There a float16 is two registers, so that a grid at the
 * default tries only tiles of twice the registers PMR x PTN says (on the
 * 2-core Xeon with PoCL's AVX2 kernel library every PTN above 1 lost to
 * the defaults so; at PVW 8 too, over the stage's whole operation). */
static int
grid_width(const tu_run *r, const tu_tunable *t, int nt)
{
    unsigned native = r->dev.native_width_float;
    int i, j, best = 0;

    for (i = 0; i < nt; i++)
        if (strcmp(t[i].name, "PVW") == 0) {
            if (native == 0 || (unsigned)t[i].def <= native)
                return 0;
            for (j = 0; j < t[i].n; j++)
                if ((unsigned)t[i].vals[j] <= native &&
                    t[i].vals[j] > best)
                    best = t[i].vals[j];
        }
    return best;
}

/* The state of a stage run, for trial. */
typedef struct search {
    tu_run *r;
    const tu_shape *s;
    json_object *k;
    const tu_out *ref;
    tu_params best;
    double best_us, def_us, est;
    int inner, tried, done, total, limit;
} search;

/* Measures cand (what describes its change, for messages) unless the
 * candidate limit or the time is up; the faster of it and the best so
 * far stays in se->best.  Returns 0, or 1 once the limit is reached. */
static int
trial(search *se, const tu_params *cand, const char *what)
{
    char why[512], buf[256];
    tu_out o = { 0 };
    double us = 0, t0;
    int st, verdict;

    if (se->r->cfg->max_candidates && se->limit-- <= 0)
        return 1;
    if (!tu_fits(se->r, se->est)) {
        tu_report_candidate(se->k, cand, 0, se->r->interrupted
                            ? "not tried: interrupted"
                            : "not tried: out of time", NULL);
        return 0;
    }
    tu_progress(se->r, FILE_NAME, "any", ++se->done, se->total, se->best_us,
                se->def_us);
    t0 = tu_now();
    st = measure(se->r, se->s, cand, &se->inner, &us, &o, why, sizeof why);
    verdict = tu_judge(se->k, cand, st, why, us, st == CG_OK
                       ? tu_out_error(&o, se->ref) : 0, TOLERANCE,
                       &se->best, &se->best_us, buf, sizeof buf);
    if (verdict == 1)
        se->tried++;
    else if (verdict == 0)
        tu_say(se->r, "%s: %s failed: %s", FILE_NAME, what, why);
    else
        tu_say(se->r, "%s: %s %s", FILE_NAME, what, buf);
    se->est = fmax(se->est, tu_now() - t0);
    tu_out_free(&o);
    return 0;
}

/* The winner of the search against the defaults, timed again in ROUNDS
 * rounds of one each, one after the other (a candidate's single median
 * is at the mercy of the machine's load at its moment: on the 2-core
 * PoCL machine two runs of the stage timed the defaults at 26 and 36 ms).
 * *def_us becomes the defaults' median over the rounds and *best_us
 * that times the median per-round ratio (the medians of the two times
 * apart may disagree with the ratio's), and `best` stands only if that
 * ratio is below 1;
 * else it becomes the defaults (in `dflt`), as it does when a round fails
 * (then nonzero is returned and why says what). */
static int
confirm(tu_run *r, const tu_shape *s, tu_params *best, const tu_params *dflt,
        int inner, double *best_us, double *def_us, char *why,
        size_t whylen)
{
    double b, d[ROUNDS], q[ROUNDS];
    int i, n = 0, status = CG_OK;

    for (i = 0; i < ROUNDS && status == CG_OK && !tu_stopped(r); i++) {
        status = measure(r, s, NULL, &inner, &d[n], NULL, why, whylen);
        if (status == CG_OK)
            status = measure(r, s, best, &inner, &b, NULL, why, whylen);
        if (status == CG_OK) {
            q[n] = b / d[n];
            n++;
        }
    }
    if (status != CG_OK) {
        *best = *dflt;
        *best_us = *def_us;
        return status;
    }
    if (n == 0)
        return CG_OK;       /* stopped: the search's times stand */
    *def_us = tu_median(d, n);
    *best_us = *def_us * tu_median(q, n);
    if (*best_us >= *def_us) {
        *best = *dflt;
        *best_us = *def_us;
    }
    return CG_OK;
}

int
tu_stage_pack(tu_run *r)
{
    const tu_shape *s = &r->cfg->shapes[0];
    char hash[33], note[192], why[512], buf[256], what[64];
    tu_tunable t[MAX_TUNABLES];
    tu_out ref = { 0 };
    tu_params cand, dflt;
    search se;
    int vals[TU_MAX_VALUES], pairs[TU_MAX_VALUES * TU_MAX_VALUES][2];
    int nt, n, i, j, ia = -1, ib = -1, stop = 0, vw;
    int64_t cn, cc, rows, m, cols;
    double t0;

    memset(&se, 0, sizeof se);
    se.r = r;
    se.s = s;
    se.ref = &ref;
    se.limit = r->cfg->max_candidates;
    sizes(s, &cn, &cc, &rows, &m, &cols);
    snprintf(note, sizeof note, "conv2d N%lld C%lld %dx%d K%lld 3x3 pad 1 "
             "fwd+bwd + packed SGEMM %lldx%lldx%lld TN; per call, median "
             "of up to %d", (long long)cn, (long long)cc, SIDE, SIDE,
             (long long)cc, (long long)m, (long long)cols, (long long)rows,
             MAX_REPS);
    se.k = tu_report_kernel(r, FILE_NAME, "any", note);
    if (cg_kernel_source_hash(FILE_NAME, hash) != CG_OK) {
        snprintf(why, sizeof why, "%s", cg_last_error());
        tu_say(r, "%s: %s", FILE_NAME, why);
        tu_report_result(se.k, 0, NULL, 0, why);
        return -1;
    }
    nt = tu_file_tunables(FILE_NAME, t, MAX_TUNABLES);
    for (i = 0; i < nt; i++) {
        if (strcmp(t[i].name, "PMR") == 0)
            ia = i;
        if (strcmp(t[i].name, "PTN") == 0)
            ib = i;
    }
    if (ia < 0 || ib < 0) {
        snprintf(why, sizeof why, "kernels/%s.cl declares no @tunable PMR "
                 "and PTN", FILE_NAME);
        tu_say(r, "%s: %s", FILE_NAME, why);
        tu_report_result(se.k, 0, NULL, 0, why);
        return -1;
    }
    tu_params_init(&se.best, FILE_NAME, "any");
    for (i = 0; i < nt; i++) {
        tu_params_add(&se.best, t[i].name, t[i].def);
        se.total += in_tile(t[i].name) ? 0 : t[i].n - 1;
    }
    se.total += t[ia].n * t[ib].n - 1;
    snprintf(se.best.source_hash, sizeof se.best.source_hash, "%s", hash);
    dflt = se.best;
    tu_progress(r, FILE_NAME, "any", 0, 0, 0, 0);
    t0 = tu_now();
    if (measure(r, s, NULL, &se.inner, &se.def_us, &ref, why, sizeof why) !=
        CG_OK) {
        tu_say(r, "%s: the defaults failed: %s", FILE_NAME, why);
        tu_report_result(se.k, 0, NULL, 0, why);
        tu_out_free(&ref);
        cg_context_clear_tuning(r->ctx);
        return -1;
    }
    se.est = tu_now() - t0;
    se.best_us = se.def_us;
    /* The tile's grid, the other parameters at their defaults but PVW
     * at the device's own width. */
    vw = grid_width(r, t, nt);
    n = order_pairs(r, &t[ia], &t[ib], pairs);
    for (i = 0; i < n && !stop; i++) {
        cand = dflt;
        tu_params_add(&cand, "PMR", pairs[i][0]);
        tu_params_add(&cand, "PTN", pairs[i][1]);
        if (vw) {
            tu_params_add(&cand, "PVW", vw);
            snprintf(what, sizeof what, "PMR=%d PTN=%d PVW=%d",
                     pairs[i][0], pairs[i][1], vw);
        } else {
            snprintf(what, sizeof what, "PMR=%d PTN=%d", pairs[i][0],
                     pairs[i][1]);
        }
        stop = trial(&se, &cand, what);
    }
    /* Then the others, one at a time from the best so far. */
    for (j = 0; j < nt && !stop; j++) {
        if (in_tile(t[j].name))
            continue;
        n = tu_order_values(r, FILE_NAME, &t[j],
                            (int)tu_params_get(&se.best, t[j].name,
                                               t[j].def), vals);
        for (i = 0; i < n && !stop; i++) {
            cand = se.best;
            tu_params_add(&cand, t[j].name, vals[i]);
            if (strcmp(t[j].name, "PWG") == 0 &&
                (size_t)vals[i] > r->dev.max_work_group_size) {
                snprintf(buf, sizeof buf, "PWG %d is above the device's "
                         "maximum work-group size %zu", vals[i],
                         r->dev.max_work_group_size);
                tu_report_candidate(se.k, &cand, 0, buf, NULL);
                continue;
            }
            snprintf(what, sizeof what, "%.15s=%d", t[j].name, vals[i]);
            stop = trial(&se, &cand, what);
        }
    }
    tu_out_free(&ref);
    if (se.best_us < se.def_us &&
        confirm(r, s, &se.best, &dflt, se.inner, &se.best_us, &se.def_us,
                why, sizeof why) != CG_OK)
        tu_say(r, "%s: the confirmation failed: %s", FILE_NAME, why);
    cg_context_clear_tuning(r->ctx);
    if (!tu_conclude(r, se.k, se.tried, &se.best, se.best_us, se.def_us,
                     note))
        return 0;
    tu_say(r, "%s: %s, %.1f us per call (defaults %.1f us)", FILE_NAME,
           tu_params_str(&se.best, buf, sizeof buf), se.best_us, se.def_us);
    return 0;
}
