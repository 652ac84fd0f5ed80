/* SPDX-License-Identifier: MIT */
/*
 * tools/tune_gemm.c - clgrad-tune's stage "gemm": for each shape class of
 * a matrix product (lib/tune/gemm_class.c: NN, NT, TN, TT times skinny,
 * small, large, longk), the values of kernels/gemm.cl's tunables and the
 * backend (clgrad's kernels or CLBlast's) that run a representative
 * product of the class fastest, written as the entry kernel "gemm",
 * shape the class ("NT.skinny"), which the library's GEMM entry looks up
 * per product.
 *
 * A class's product is timed through that entry (lib/ops/gemm.c,
 * cg__sgemm) as the layers call it: first without an entry (the context's
 * parameters and the built-in choice of backend: the baseline), then
 * with candidates.  CLBlast and the packed backend ("packed" 1:
 * kernels/gemm_pack.cl over packed operands), one candidate each, come
 * first, so that a class whose share of the time runs out during the
 * tile sweep has still tried them (on an H200, every NT class ran out
 * of time among its 32 tiles before CLBlast, which was 2-6 times faster
 * there).  Then the tiles at the default work-group size (gemm's TM x TN
 * with VW for NN, TN and TT; for NT both ways, each with the tunables its
 * path reads: "pack" 0, in place, with gemm_nt's DTM x DTN and DVW, and
 * "pack" 1, gemm on a packed B^T, with gemm's), then the work-group sizes
 * with the best tile (each with "packed" 0: gemm.cl's kernels).  Every
 * candidate's C is compared with a double-precision product computed on
 * the host before its time counts; one that differs by more than the
 * rounding of K float multiply-adds allows is reported and dropped.
 * The fastest is timed again against the fastest candidate of another
 * backend in alternating rounds (settle), and the faster kept.
 * The best candidate's backend keys ("clblast", "packed", "pack") are
 * written only where they contradict the library's built-in rules at the
 * class's product (cg__gemm_entry_trim): elsewhere the rules, which look
 * at each product's sizes, choose for the class's other products.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tune.h"
#include "ops/internal.h"
#include "tune/internal.h"

#define MAX_REPS 5
#define MAX_INNER 64
#define SAMPLE_S 0.004      /* a timed sample runs the product this long */
#define MAX_CANDS 32
#define WARM_S 0.3          /* the product run this long before timing */
#define SETTLE_ROUNDS 5     /* settle's rounds */

/* The representative product of each class, from the layers the tools
 * train (B 32 rows of a recurrent step, 4H = 2048 at H 512, T * B = 3200
 * rows of a sequence, the MLP's 128-row batches), K capped so that the
 * host's double reference stays around a second. */
static const struct {
    const char *cls;
    int m, n, k;
    const char *what;
} reps[] = {
    { "NT.skinny", 32, 2048, 512, "a recurrent step, h W_hh^T" },
    { "NN.skinny", 32, 512, 2048, "its input gradient, dG W_hh" },
    { "TN.skinny", 65, 512, 3200, "a 65-class head's weight gradient" },
    { "NN.longk", 1024, 512, 2048, "an LSTM input gradient, dG W_ih" },
    { "TN.longk", 2048, 256, 2048, "an LSTM weight gradient, dG^T x" },
    { "NT.longk", 512, 512, 2048, "x W^T over a long K" },
    { "NT.large", 128, 512, 784, "the MLP's first layer, x W^T" },
    { "NN.large", 128, 784, 512, "its input gradient, dY W" },
    { "TN.large", 512, 784, 128, "its weight gradient, dY^T x" },
    { "NT.small", 200, 128, 64, "a projection of short K" },
    { "NN.small", 128, 128, 128, "a small product" },
    { "TN.small", 128, 128, 256, "a small weight gradient" },
    { "TT.skinny", 32, 256, 256, "both transposed" },
    { "TT.small", 128, 128, 128, "both transposed" },
    { "TT.large", 256, 256, 512, "both transposed" },
    { "TT.longk", 256, 256, 1024, "both transposed" },
};
#define NREPS (int)(sizeof reps / sizeof reps[0])

/* Tiles tried, the default's neighbours first. */
static const int gemm_tiles[][2] = {        /* TM, TN */
    { 8, 2 }, { 4, 4 }, { 4, 2 }, { 8, 1 }, { 6, 3 }, { 2, 4 }, { 8, 3 },
    { 6, 1 },
};
static const int nt_tiles[][2] = {          /* DTM, DTN */
    { 4, 2 }, { 2, 2 }, { 4, 4 }, { 3, 4 }, { 4, 3 }, { 1, 4 }, { 2, 3 },
    { 3, 3 },
};
static const int wgs[] = { 4, 16, 32, 64 };

/* One class's product: device operands, host copies, the reference. */
typedef struct gwork {
    int ta, tb, m, n, k;
    cg_buffer *a, *b, *c;
    float *out;             /* C read back */
    double *ref;            /* the double-precision product */
    double scale;           /* max |ref| */
} gwork;

static void
gwork_free(gwork *w)
{
    cg_buffer_free(w->a);
    cg_buffer_free(w->b);
    cg_buffer_free(w->c);
    free(w->out);
    free(w->ref);
    memset(w, 0, sizeof *w);
}

/* Uniform [-1, 1) from a fixed seed, the same for every run. */
static float
frand(uint64_t *s)
{
    return (float)(cg_splitmix64_uniform(s) * 2 - 1);
}

/* Makes the operands (A stored k x m when transposed, B n x k) and the
 * reference C = op(A) op(B) in double. */
static int
gwork_init(cg_context *ctx, gwork *w, int i)
{
    const char *cls = reps[i].cls;
    size_t m, n, k, na, nb, r, l, j;
    float *ha, *hb;
    double *oa, *ob;
    uint64_t seed = 12345;
    int status = CG_OK;

    memset(w, 0, sizeof *w);
    w->ta = cls[0] == 'T';
    w->tb = cls[1] == 'T';
    w->m = reps[i].m;
    w->n = reps[i].n;
    w->k = reps[i].k;
    m = (size_t)w->m;
    n = (size_t)w->n;
    k = (size_t)w->k;
    na = m * k;
    nb = k * n;
    ha = malloc(na * sizeof *ha);
    hb = malloc(nb * sizeof *hb);
    oa = malloc(na * sizeof *oa);       /* op(A), m x k */
    ob = malloc(nb * sizeof *ob);       /* op(B), k x n */
    w->out = malloc(m * n * sizeof *w->out);
    w->ref = calloc(m * n, sizeof *w->ref);
    if (!ha || !hb || !oa || !ob || !w->out || !w->ref) {
        status = cg__error(CG_EHOSTMEM, "gemm %s: out of host memory for "
                           "the %dx%dx%d product", cls, reps[i].m, reps[i].n,
                           reps[i].k);
        goto out;
    }
    for (j = 0; j < na; j++)
        ha[j] = frand(&seed);
    for (j = 0; j < nb; j++)
        hb[j] = frand(&seed);
    for (r = 0; r < m; r++)
        for (l = 0; l < k; l++)
            oa[r * k + l] = w->ta ? ha[l * m + r] : ha[r * k + l];
    for (l = 0; l < k; l++)
        for (j = 0; j < n; j++)
            ob[l * n + j] = w->tb ? hb[j * k + l] : hb[l * n + j];
    for (r = 0; r < m; r++)
        for (l = 0; l < k; l++) {
            double x = oa[r * k + l];
            double *c = w->ref + r * n;
            const double *b = ob + l * n;

            for (j = 0; j < n; j++)
                c[j] += x * b[j];
        }
    for (j = 0; j < m * n; j++)
        w->scale = fmax(w->scale, fabs(w->ref[j]));
    w->a = cg_buffer_new(ctx, na * sizeof(float));
    w->b = cg_buffer_new(ctx, nb * sizeof(float));
    w->c = cg_buffer_new(ctx, m * n * sizeof(float));
    if (!w->a || !w->b || !w->c)
        status = cg__last_status();
    if (status == CG_OK)
        status = cg_buffer_write(w->a, 0, ha, na * sizeof(float));
    if (status == CG_OK)
        status = cg_buffer_write(w->b, 0, hb, nb * sizeof(float));
out:
    free(ha);
    free(hb);
    free(oa);
    free(ob);
    return status;
}

static int
gwork_run(cg_context *ctx, const gwork *w)
{
    cg__mat a = { cg__buffer_mem(w->a), 0,
                  (size_t)(w->ta ? w->m : w->k) };
    cg__mat b = { cg__buffer_mem(w->b), 0,
                  (size_t)(w->tb ? w->k : w->n) };
    cg__mat c = { cg__buffer_mem(w->c), 0, (size_t)w->n };

    return cg__sgemm(ctx, w->ta, w->tb, (size_t)w->m, (size_t)w->n,
                     (size_t)w->k, 1.0f, a, b, 0.0f, c);
}

/* The largest |C - reference| over max |reference|. */
static double
gwork_error(const gwork *w)
{
    size_t i, n = (size_t)w->m * (size_t)w->n;
    double err = 0;

    for (i = 0; i < n; i++) {
        double d = fabs((double)w->out[i] - w->ref[i]);

        if (isnan(d))
            return INFINITY;
        err = fmax(err, d);
    }
    return w->scale > 0 ? err / w->scale : err;
}

/* One timed run, for tu_time. */
static int
timed_run(cg_context *ctx, void *w)
{
    return gwork_run(ctx, w);
}

/* Puts p in force (NULL: no entry for the class), runs the product once
 * (building kernels) and checks it against the reference (*err), then
 * times up to MAX_REPS samples of *inner runs (*inner 0: chosen from one
 * timed run): *us the median per run.  On failure, why says what. */
static int
measure(tu_run *r, const gwork *w, const tu_params *p, int *inner,
        double *us, double *err, char *why, size_t whylen)
{
    size_t bytes = (size_t)w->m * (size_t)w->n * sizeof(float);
    int status;

    status = p ? cg_context_set_tuning(r->ctx, p)
               : cg_context_clear_tuning(r->ctx);
    if (status == CG_OK)
        status = gwork_run(r->ctx, w);
    if (status == CG_OK)
        status = cg_buffer_read(w->c, 0, w->out, bytes);
    if (status == CG_OK)
        *err = gwork_error(w);
    if (status != CG_OK) {
        snprintf(why, whylen, "%s", cg_last_error());
        return status;
    }
    return tu_time(r, timed_run, (void *)w, SAMPLE_S, MAX_INNER, MAX_REPS,
                   inner, us, why, whylen);
}

/* The device's native float vector width, at least 1. */
static int
native_vw(const tu_run *r)
{
    int v = (int)r->dev.native_width_float;

    return v >= 16 ? 16 : v >= 8 ? 8 : v >= 4 ? 4 : v >= 2 ? 2 : 1;
}

/* A candidate of clgrad's kernels for class cls: gemm_nt's tile (DVW,
 * DTM, DTN) when pack is 0, else gemm's (VW, TM, TN), which an NT class
 * runs on a packed B^T when pack is 1 (-1: not an NT class). */
static void
add_tile(tu_params *c, const char *cls, const char *hash, int pack, int vw,
         const int tile[2])
{
    tu_params_init(c, "gemm", cls);
    snprintf(c->source_hash, sizeof c->source_hash, "%s", hash);
    tu_params_add(c, pack == 0 ? "DVW" : "VW", vw);
    tu_params_add(c, pack == 0 ? "DTM" : "TM", tile[0]);
    tu_params_add(c, pack == 0 ? "DTN" : "TN", tile[1]);
    tu_params_add(c, "clblast", 0);
    tu_params_add(c, "packed", 0);
    if (pack >= 0)
        tu_params_add(c, "pack", pack);
}

/* The rounds, in the order they run: CLBlast, the packed backend
 * (kernels/gemm_pack.cl with the context's values of its tunables), the
 * tiles, then the work-group sizes around the best tile. */
enum { R_CLBLAST, R_PACKED, R_TILES, R_WG, NROUNDS };

/* The candidates of round `round` for class i into c (tile: the best
 * tile, for R_WG); returns how many. */
static int
candidates(const tu_run *r, int i, int round, const tu_params *tile,
           const char *hash, tu_params *c)
{
    const char *cls = reps[i].cls;
    int nt = cls[0] == 'N' && cls[1] == 'T', n = 0, t, v, vw = native_vw(r);
    int vws[2] = { vw, vw > 4 ? 4 : 0 };

    if (round == R_PACKED) {
        tu_params_init(&c[0], "gemm", cls);
        tu_params_add(&c[0], "clblast", 0);
        tu_params_add(&c[0], "packed", 1);
        snprintf(c[0].source_hash, sizeof c[0].source_hash, "%s", hash);
        return 1;
    }
    if (round == R_CLBLAST) {
        tu_params_init(&c[0], "gemm", cls);
        tu_params_add(&c[0], "clblast", 1);
        snprintf(c[0].source_hash, sizeof c[0].source_hash, "%s", hash);
        return 1;
    }
    if (round == R_WG) {
        for (t = 0; t < (int)(sizeof wgs / sizeof wgs[0]); t++) {
            if ((size_t)wgs[t] > r->dev.max_work_group_size)
                continue;
            c[n] = *tile;
            tu_params_add(&c[n++], "WG", wgs[t]);
        }
        return n;
    }
    for (v = 0; v < 2; v++) {
        if (!vws[v])
            continue;
        for (t = 0; t < 8; t++) {
            /* NT: in place (gemm_nt's tile), then packed (gemm's) */
            if (nt)
                add_tile(&c[n++], cls, hash, 0, vws[v], nt_tiles[t]);
            add_tile(&c[n++], cls, hash, nt ? 1 : -1, vws[v],
                     gemm_tiles[t]);
        }
    }
    return n;
}

/* The backend a candidate names: 2 CLBlast, 1 the packed kernels, 0
 * gemm.cl's. */
static int
backend_of(const tu_params *p)
{
    int i, b = 0;

    for (i = 0; i < p->nparams; i++)
        if (p->values[i] && strcmp(p->names[i], "clblast") == 0)
            return 2;
        else if (p->values[i] && strcmp(p->names[i], "packed") == 0)
            b = 1;
    return b;
}

/* The search's winner (*best, *best_us) against the fastest candidate of
 * another backend (alt), timed again in SETTLE_ROUNDS rounds of one
 * each, one after the other.  The winner is one of some 40 medians taken
 * at the load of their moments, the packed and CLBlast candidates one
 * each, so a tile's lucky sample beat them: on the 2-core AVX-512 PoCL
 * machine the search kept gemm_nt's tile for NT.large at 1124 us, while
 * the MLP's step (128x512x784 and 128x512x512 NT, 128x512x512 NN) ran
 * 1.2x faster with those products on the packed kernels than with the
 * search's entries (medians of 8 alternating rounds).  alt replaces
 * the winner where the median per-round ratio of their times (winner /
 * alt) is above 1, its time then the winner's over that ratio.  The
 * rounds go into the class's report k as "settle". */
static int
settle(tu_run *r, const gwork *w, json_object *k, tu_params *best,
       double *best_us, const tu_params *alt, int *inner)
{
    double a, b, q[SETTLE_ROUNDS], ratio, err;
    char why[512];
    json_object *o, *arr;
    int i, n = 0, status = CG_OK;

    for (i = 0; i < SETTLE_ROUNDS && status == CG_OK && !tu_stopped(r);
         i++) {
        status = measure(r, w, best, inner, &b, &err, why, sizeof why);
        if (status == CG_OK)
            status = measure(r, w, alt, inner, &a, &err, why, sizeof why);
        if (status == CG_OK && a > 0)
            q[n++] = b / a;
    }
    if (status != CG_OK) {
        tu_say(r, "gemm %s: settling failed: %s", best->shape, why);
        return status;
    }
    if (n == 0)
        return CG_OK;       /* stopped: the search's winner stands */
    o = json_object_new_object();
    json_object_object_add(o, "winner", tu_params_json(best));
    json_object_object_add(o, "other", tu_params_json(alt));
    arr = json_object_new_array();
    for (i = 0; i < n; i++)
        json_object_array_add(arr, json_object_new_double(q[i]));
    json_object_object_add(o, "ratios", arr);
    ratio = tu_median(q, n);
    json_object_object_add(o, "kept", json_object_new_string(
                               ratio > 1 ? "other" : "winner"));
    json_object_object_add(k, "settle", o);
    if (ratio > 1) {
        *best = *alt;
        *best_us /= ratio;
    }
    return CG_OK;
}

/* Tunes class i; nonzero if it could not be tuned at all. */
static int
tune_class(tu_run *r, int i)
{
    const char *cls = reps[i].cls;
    char hash[33], note[160], why[512], buf[256];
    tu_params best, tile, cand[MAX_CANDS], alt[3];
    gwork w;
    json_object *k;
    double def_us = 0, best_us, err = 0, est, t0;
    double tol = 2e-6 * sqrt((double)reps[i].k);
    double tile_us = INFINITY;
    double alt_us[3] = { INFINITY, INFINITY, INFINITY };
    int round, n, c, bk, tried = 0, inner = 0, limit;

    snprintf(note, sizeof note, "SGEMM %dx%dx%d %.2s (%s): per product, "
             "median of up to %d", reps[i].m, reps[i].n, reps[i].k, cls,
             reps[i].what, MAX_REPS);
    k = tu_report_kernel(r, "gemm", cls, note);
    if (cg_kernel_source_hash("gemm", hash) != CG_OK ||
        gwork_init(r->ctx, &w, i) != CG_OK) {
        snprintf(why, sizeof why, "%s", cg_last_error());
        tu_say(r, "gemm %s: %s", cls, why);
        tu_report_result(k, 0, NULL, 0, why);
        return -1;
    }
    tu_progress(r, "gemm", cls, 0, 0, 0, 0);
    /* WARM_S of the product before anything is timed: the first
     * timings of a quiet process ran at half speed (the runtime's
     * threads waking, the clock rising), which made the defaults look
     * twice as slow as they are. */
    cg_context_clear_tuning(r->ctx);
    for (t0 = tu_now(); tu_now() - t0 < WARM_S && !tu_stopped(r);)
        if (gwork_run(r->ctx, &w) != CG_OK ||
            cg_context_finish(r->ctx) != CG_OK)
            break;
    t0 = tu_now();
    if (measure(r, &w, NULL, &inner, &def_us, &err, why, sizeof why) !=
        CG_OK || err > tol) {
        if (err > tol)
            snprintf(why, sizeof why, "the defaults do not verify: "
                     "relative error %.3g against the double reference",
                     err);
        tu_say(r, "gemm %s: %s", cls, why);
        tu_report_result(k, 0, NULL, 0, why);
        gwork_free(&w);
        return -1;
    }
    est = tu_now() - t0;
    best_us = def_us;
    tu_params_init(&best, "gemm", cls);
    snprintf(best.source_hash, sizeof best.source_hash, "%s", hash);
    tile = best;
    limit = r->cfg->max_candidates ? r->cfg->max_candidates : MAX_CANDS * 3;
    for (round = 0; round < NROUNDS; round++) {
        /* WG around the best tile, when one verified */
        if (round == R_WG && tile_us == INFINITY)
            continue;
        n = candidates(r, i, round, &tile, hash, cand);
        for (c = 0; c < n; c++) {
            double us = 0;
            int st;

            if (limit-- <= 0)
                break;
            if (!tu_fits(r, est)) {
                tu_report_candidate(k, &cand[c], 0, r->interrupted
                                    ? "not tried: interrupted"
                                    : "not tried: out of time", NULL);
                continue;
            }
            tu_progress(r, "gemm", cls, c + 1, n, best_us, def_us);
            t0 = tu_now();
            st = measure(r, &w, &cand[c], &inner, &us, &err, why,
                         sizeof why);
            est = fmax(est, tu_now() - t0);
            if (st != CG_OK) {
                tu_report_candidate(k, &cand[c], 0, why, NULL);
                tu_say(r, "gemm %s: %s failed: %s", cls,
                       tu_params_str(&cand[c], buf, sizeof buf), why);
                continue;
            }
            if (err > tol) {
                snprintf(why, sizeof why, "does not verify: relative error "
                         "%.3g against the double reference (at most %.3g)",
                         err, tol);
                tu_report_candidate(k, &cand[c], 0, why, NULL);
                tu_say(r, "gemm %s: %s %s", cls,
                       tu_params_str(&cand[c], buf, sizeof buf), why);
                continue;
            }
            tu_report_candidate(k, &cand[c], us, NULL, NULL);
            tried++;
            bk = backend_of(&cand[c]);
            if (us < alt_us[bk]) {
                alt[bk] = cand[c];
                alt_us[bk] = us;
            }
            if (round == R_TILES && us < tile_us) {
                tile = cand[c];
                tile_us = us;
            }
            if (us < best_us) {
                best = cand[c];
                best_us = us;
            }
        }
    }
    /* The winner against the next backend's fastest, where one
     * verified within twice the winner's time and time is left for the
     * rounds. */
    if (best.nparams > 0) {
        int o = -1;

        for (c = 0; c < 3; c++)
            if (c != backend_of(&best) && alt_us[c] < INFINITY &&
                (o < 0 || alt_us[c] < alt_us[o]))
                o = c;
        if (o >= 0 && alt_us[o] < 2 * best_us &&
            tu_fits(r, 2 * SETTLE_ROUNDS * est))
            settle(r, &w, k, &best, &best_us, &alt[o], &inner);
    }
    /* The backend keys that agree with the built-in rules at this
     * product are left to those rules, which then go on choosing for the
     * class's other sizes (a 128-row MLP product measured in place must
     * not keep the 3200-row projections of its class off the packed
     * backend). */
    cg__gemm_entry_trim(&best, w.ta, w.tb, (size_t)w.m, (size_t)w.n,
                        (size_t)w.k);
    gwork_free(&w);
    cg_context_clear_tuning(r->ctx);
    if (tried && best.nparams == 0) {
        /* Nothing beat the built-in parameters and choice, or what did
         * is what they choose here: no entry, so that the class keeps
         * them. */
        tu_report_result(k, def_us, NULL, 0, best_us < def_us
                         ? "the best is what the built-in rules choose "
                           "(no entry)"
                         : "the defaults are the fastest (no entry)");
        tu_say(r, "gemm %s: the defaults, %.1f GFLOP/s", cls,
               2.0 * reps[i].m * reps[i].n * reps[i].k / def_us * 1e-3);
        return 0;
    }
    if (!tu_conclude(r, k, tried, &best, best_us, def_us, note))
        return 0;
    tu_say(r, "gemm %s: %s, %.1f GFLOP/s (defaults %.1f)", cls,
           tu_params_str(&best, buf, sizeof buf),
           2.0 * reps[i].m * reps[i].n * reps[i].k / best_us * 1e-3,
           2.0 * reps[i].m * reps[i].n * reps[i].k / def_us * 1e-3);
    return 0;
}

int
tu_stage_gemm(tu_run *r)
{
    double end = r->stage_end;
    unsigned want = r->cfg->gemm_classes;
    int i, left = 0, failed = 0;

    for (i = 0; i < NREPS; i++)
        left += !want || (want >> cg__gemm_class_parse(reps[i].cls) & 1u);
    /* Each class gets an equal share of what is left. */
    for (i = 0; i < NREPS && !tu_stopped(r); i++) {
        if (want && !(want >> cg__gemm_class_parse(reps[i].cls) & 1u))
            continue;
        r->stage_end = tu_now() + (end - tu_now()) / left--;
        if (tune_class(r, i))
            failed = 1;
    }
    r->stage_end = end;
    cg_context_clear_tuning(r->ctx);
    return failed;
}
