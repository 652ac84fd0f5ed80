/* SPDX-License-Identifier: MIT */
/*
 * tests/test_tune_tool.c - clgrad-tune end to end, on a tiny LSTM with a
 * candidate or two (each new kernel variant costs PoCL seconds to compile):
 * the database file it writes loads, its entries are sane and a new context
 * puts them in force; a second run merges into the file; the stage "kernels"
 * writes an entry per reduction kernel file, the stage "conv" one per
 * convolution class, the stage "fft" a verified entry for a class, the
 * stage "dp" the bucket sizes of data parallelism; --dry-run writes
 * nothing; an --output that is not this device's database (a notes file,
 * another device's), a directory, '' or in
 * a missing directory is refused before tuning, and left alone; a budget too
 * small for anything still gives a valid report; options and exit
 * statuses.  Nothing depends on time: the runs are bounded by
 * --max-candidates under a budget (BUDGET) they never reach even on a loaded
 * machine, and which candidate wins depends on the machine.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "testutil.h"
#include "ops/internal.h"      /* cg__gemm_entry_trim */
#include "tune/tuner.h"

#define LSTM_SHAPE "lstm:B=4,H=16,I=8,T=4"
/* An hour: never what ends a run here. */
#define BUDGET "--budget 3600 "

/* Runs clgrad-tune with `args` (CLGRAD_TUNING_DIR set to `dir` if not
 * NULL); returns its stdout (caller frees), *status its exit status. */
static char *
run_tune(const char *dir, const char *args, int *status)
{
    char env[1100];

    if (dir)
        snprintf(env, sizeof env, "CLGRAD_TUNING_DIR='%s'", dir);
    return tt_run_tool(dir ? env : NULL, "clgrad-tune", args, status);
}

static json_object *
get(json_object *o, const char *key)
{
    json_object *v = NULL;

    ck_assert_msg(json_object_object_get_ex(o, key, &v), "no key '%s'", key);
    return v;
}

/* The index of parameter name in e, or -1. */
static int
param_index(const cg_tuning_entry *e, const char *name)
{
    int i;

    for (i = 0; i < e->nparams; i++)
        if (strcmp(e->names[i], name) == 0)
            return i;
    return -1;
}

static long
param(const cg_tuning_entry *e, const char *name)
{
    int i = param_index(e, name);

    if (i < 0)
        ck_abort_msg("%s %s has no parameter %s", e->kernel, e->shape,
                     name);
    return i < 0 ? 0 : e->values[i];
}

/* Parameter name of e, or -1 where e has none. */
static long
param_or_none(const cg_tuning_entry *e, const char *name)
{
    int i = param_index(e, name);

    return i < 0 ? -1 : e->values[i];
}

/* The "shift" of candidate i of a report's candidates, -1 for none. */
static long
cand_shift(json_object *cands, size_t i)
{
    json_object *p = get(json_object_array_get_idx(cands, i), "parameters"),
                *v;

    return json_object_object_get_ex(p, "shift", &v)
           ? (long)json_object_get_int(v) : -1;
}

/* Entry `kernel` `shape` of db, which must be there. */
static void
find_entry(const cg_tuning_db *db, const char *kernel, const char *shape,
           cg_tuning_entry *out)
{
    int i, n = cg_tuning_db_count(db);

    for (i = 0; i < n; i++) {
        ck_assert_int_eq(cg_tuning_db_entry(db, i, out), CG_OK);
        if (strcmp(out->kernel, kernel) == 0 &&
            strcmp(out->shape, shape) == 0)
            return;
    }
    ck_abort_msg("no entry %s %s in the database", kernel, shape);
}

/* A step-kernel entry as clgrad-tune must write it. */
static void
check_rnn_entry(const cg_tuning_entry *e)
{
    char hash[33];
    long vw = param(e, "VW"), rb = param(e, "RB"), wg = param(e, "WG");

    ck_assert_int_eq(e->nparams, 3);
    ck_assert(vw == 1 || vw == 2 || vw == 4 || vw == 8 || vw == 16);
    ck_assert(rb >= 1 && rb <= 8);
    ck_assert(wg >= 1 && wg <= 256);
    ck_assert(e->time_us > 0 && e->default_time_us > 0);
    ck_assert(e->time_us <= e->default_time_us);
    ck_assert_int_eq(cg_kernel_source_hash("rnn", hash), CG_OK);
    ck_assert_str_eq(e->source_hash, hash);
    ck_assert_msg(strstr(e->note, "forward+backward") != NULL, "note: %s",
                  e->note);
}

/* The tool runs natively; under valgrind this program sees the CPU
 * PoCL names under valgrind (a CPU without AVX-512), so the file matches
 * by platform vendor and type only. */
static void
assert_match(cg_tuning_match m)
{
    if (tt_checker())
        ck_assert_int_ge(m, CG_TUNING_VENDOR);
    else
        ck_assert_int_eq(m, CG_TUNING_EXACT);
}

/* Whether in_force, the entry in force for a kernel and shape the run
 * wrote into `path`, is that entry.  Natively it must be.  Under valgrind
 * the file matches by vendor only, and a shipped database for the CPU
 * valgrind shows (data/tuning/pocl-cpu-haswell.json) matches better where
 * it has an entry for the same kernel and shape, so that entry rightly
 * wins: then 0.  Which kernels and shapes the run writes depends on what
 * its timings found, so both must be accepted. */
static int
in_force_is_ours(const cg_tuning_entry *in_force, const char *path)
{
    if (strcmp(in_force->origin, path) == 0) {
        assert_match(in_force->match);
        return 1;
    }
    ck_assert_msg(tt_checker() && in_force->match >= CG_TUNING_DEVICE,
                  "%s %s: in force from %s (match %d), not %s",
                  in_force->kernel, in_force->shape, in_force->origin,
                  (int)in_force->match, path);
    return 0;
}

/* Parameter `name` in force equals the entry's, but that an entry matched
 * by vendor only has its vector widths narrowed to the device's own
 * (lib/tune/apply.c's narrow): a power of two no wider. */
static void
assert_param(const cg_tuning_entry *in_force, const cg_tuning_entry *e,
             const char *name)
{
    long got = param(in_force, name), want = param(e, name);

    if (in_force->match < CG_TUNING_DEVICE && strstr(name, "VW"))
        ck_assert_msg(got >= 1 && got <= want && (got & (got - 1)) == 0,
                      "%s: %s %ld in force, %ld written", e->kernel, name,
                      got, want);
    else
        ck_assert_msg(got == want, "%s: %s %ld in force, %ld written",
                      e->kernel, name, got, want);
}

START_TEST(a_tiny_run_writes_a_database_that_contexts_use)
{
    char dir[512], args[1024], *out;
    const char *path;
    char pathbuf[4096];
    json_object *root, *kernels, *k0;
    cg_tuning_db *db;
    cg_tuning_entry e, in_force;
    cg_context *ctx;
    int status;

    snprintf(dir, sizeof dir, "%s/tuning", tt_tmpdir());
    snprintf(args, sizeof args, BUDGET "--only rnn --model-shape "
             LSTM_SHAPE " --max-candidates 2 --json --quiet");
    out = run_tune(dir, args, &status);
    ck_assert_int_eq(status, 0);
    root = json_tokener_parse(out);
    ck_assert_msg(root != NULL, "not JSON: %.200s", out);
    ck_assert(json_object_get_boolean(get(root, "written")));
    /* A copy: root is freed before the second run reads the file. */
    snprintf(pathbuf, sizeof pathbuf, "%s",
             json_object_get_string(get(root, "output")));
    path = pathbuf;
    ck_assert_msg(strncmp(path, dir, strlen(dir)) == 0, "output %s", path);
    kernels = get(root, "kernels");
    ck_assert_int_ge(json_object_array_length(kernels), 1);
    k0 = json_object_array_get_idx(kernels, 0);
    ck_assert_str_eq(json_object_get_string(get(k0, "kernel")), "rnn.lstm");
    ck_assert_str_eq(json_object_get_string(get(k0, "shape")), "H16");
    ck_assert_int_ge(json_object_array_length(get(k0, "candidates")), 1);
    ck_assert_double_gt(json_object_get_double(get(k0, "default_time_us")),
                        0);
    get(k0, "best");

    /* The file loads and holds the entry. */
    db = cg_tuning_db_load(path);
    ck_assert_msg(db != NULL, "%s", TT_ERR);
    find_entry(db, "rnn.lstm", "H16", &e);
    check_rnn_entry(&e);
    cg_tuning_db_free(db);

    /* A context made with that tuning directory has it in force. */
    ck_assert_int_eq(setenv("CLGRAD_TUNING_DIR", dir, 1), 0);
    ctx = cg_context_new(NULL);
    ck_assert_msg(ctx != NULL, "%s", TT_ERR);
    ck_assert_msg(tt_in_force(ctx, "rnn.lstm", "H16", &in_force),
                  "rnn.lstm H16 is not in force");
    if (in_force_is_ours(&in_force, path)) {
        assert_param(&in_force, &e, "VW");
        assert_param(&in_force, &e, "RB");
        assert_param(&in_force, &e, "WG");
    }
    cg_context_free(ctx);
    json_object_put(root);
    free(out);

    /* A second run for another cell adds to the file. */
    out = run_tune(dir, BUDGET "--only rnn --model-shape "
                   "gru:B=3,H=8,I=4,T=3 --max-candidates 1 --quiet",
                   &status);
    ck_assert_int_eq(status, 0);
    db = cg_tuning_db_load(path);
    ck_assert_msg(db != NULL, "%s", TT_ERR);
    find_entry(db, "rnn.lstm", "H16", &e);
    check_rnn_entry(&e);
    find_entry(db, "rnn.gru", "H8", &e);
    check_rnn_entry(&e);
    cg_tuning_db_free(db);
    free(out);
}
END_TEST

/* The stage "kernels": an entry per reduction kernel file, loaded and in
 * force (an exact match) in a new context. */
START_TEST(the_kernels_stage_writes_an_entry_per_file)
{
    static const struct { const char *file, *param; } files[] = {
        { "reduce", "RWG" }, { "softmax", "SWG" }, { "layer_norm", "LWG" },
        { "loss", "LWG" }, { "optim", "RWG" }
    };
    char dir[512], hash[33], *out;
    const char *path;
    json_object *root, *kernels;
    cg_tuning_db *db;
    cg_tuning_entry e[5], in_force;
    cg_context *ctx;
    int status, f;

    snprintf(dir, sizeof dir, "%s/kernels", tt_tmpdir());
    out = run_tune(dir, BUDGET "--only kernels --model-shape "
                   "lstm:B=2,H=16,I=8,T=4 --max-candidates 1 --json "
                   "--quiet", &status);
    ck_assert_int_eq(status, 0);
    root = json_tokener_parse(out);
    ck_assert_msg(root != NULL, "not JSON: %.200s", out);
    ck_assert(json_object_get_boolean(get(root, "written")));
    path = json_object_get_string(get(root, "output"));
    kernels = get(root, "kernels");
    ck_assert_int_eq(json_object_array_length(kernels), 5);
    db = cg_tuning_db_load(path);
    ck_assert_msg(db != NULL, "%s", TT_ERR);
    for (f = 0; f < 5; f++) {
        json_object *k = json_object_array_get_idx(kernels, (size_t)f);
        long v;

        ck_assert_str_eq(json_object_get_string(get(k, "kernel")),
                         files[f].file);
        ck_assert_int_eq(json_object_array_length(get(k, "candidates")), 1);
        find_entry(db, files[f].file, "any", &e[f]);
        ck_assert_int_eq(e[f].nparams, 1);
        v = param(&e[f], files[f].param);
        ck_assert_msg(v >= 1 && v <= 256 && (v & (v - 1)) == 0,
                      "%s %s=%ld", files[f].file, files[f].param, v);
        ck_assert(e[f].time_us > 0 && e[f].default_time_us > 0);
        ck_assert(e[f].time_us <= e[f].default_time_us);
        ck_assert_int_eq(cg_kernel_source_hash(files[f].file, hash), CG_OK);
        ck_assert_str_eq(e[f].source_hash, hash);
        ck_assert_msg(strstr(e[f].note, "[8,") || strstr(e[f].note, "H16"),
                      "note: %s", e[f].note);
    }
    cg_tuning_db_free(db);

    ck_assert_int_eq(setenv("CLGRAD_TUNING_DIR", dir, 1), 0);
    ctx = cg_context_new(NULL);
    ck_assert_msg(ctx != NULL, "%s", TT_ERR);
    for (f = 0; f < 5; f++) {
        ck_assert_msg(tt_in_force(ctx, files[f].file, "any", &in_force),
                      "%s is not in force", files[f].file);
        if (in_force_is_ours(&in_force, path))
            assert_param(&in_force, &e[f], files[f].param);
    }
    cg_context_free(ctx);
    json_object_put(root);
    free(out);
}
END_TEST

/* The stage "pack": one entry "gemm_pack" "any" with every tunable of
 * kernels/gemm_pack.cl, no slower than the defaults, with the file's hash
 * and the operation's sizes from the model shape in its note, and in
 * force in a new context. */
START_TEST(the_pack_stage_writes_the_packed_kernels_entry)
{
    static const char *const names[6] = {
        "PVW", "PMR", "PTN", "PMB", "PKC", "PWG"
    };
    char dir[512], hash[33], *out;
    const char *path;
    json_object *root, *kernels, *k, *cands;
    cg_tuning_db *db;
    cg_tuning_entry e, in_force;
    cg_context *ctx;
    int status, p;

    snprintf(dir, sizeof dir, "%s/pack", tt_tmpdir());
    out = run_tune(dir, BUDGET "--only pack --model-shape " LSTM_SHAPE
                   " --max-candidates 1 --json --quiet", &status);
    ck_assert_int_eq(status, 0);
    root = json_tokener_parse(out);
    ck_assert_msg(root != NULL, "not JSON: %.200s", out);
    ck_assert(json_object_get_boolean(get(root, "written")));
    path = json_object_get_string(get(root, "output"));
    kernels = get(root, "kernels");
    ck_assert_int_eq(json_object_array_length(kernels), 1);
    k = json_object_array_get_idx(kernels, 0);
    ck_assert_str_eq(json_object_get_string(get(k, "kernel")), "gemm_pack");
    ck_assert_str_eq(json_object_get_string(get(k, "shape")), "any");
    /* the first candidate: the micro-tile's rows, nearest the default */
    cands = get(k, "candidates");
    ck_assert_int_eq(json_object_array_length(cands), 1);
    for (p = 0; p < 6; p++) {
        json_object *v;

        ck_assert_msg(json_object_object_get_ex(
                          get(json_object_array_get_idx(cands, 0),
                              "parameters"), names[p], &v),
                      "the candidate has no %s", names[p]);
    }
    db = cg_tuning_db_load(path);
    ck_assert_msg(db != NULL, "%s", TT_ERR);
    find_entry(db, "gemm_pack", "any", &e);
    ck_assert_int_eq(e.nparams, 6);
    for (p = 0; p < 6; p++)
        ck_assert_int_gt(param(&e, names[p]), 0);
    ck_assert(param(&e, "PMR") == 6 || param(&e, "PMR") == 8);
    ck_assert(e.time_us > 0 && e.default_time_us > 0);
    ck_assert(e.time_us <= e.default_time_us);
    ck_assert_int_eq(cg_kernel_source_hash("gemm_pack", hash), CG_OK);
    ck_assert_str_eq(e.source_hash, hash);
    /* B=4, H=16, I=8, T=4: 1 image of 4 channels; 64 x 8 over 16 rows */
    ck_assert_msg(strstr(e.note, "N1 C4 28x28 K4") &&
                  strstr(e.note, "64x8x16 TN"), "note: %s", e.note);
    cg_tuning_db_free(db);

    ck_assert_int_eq(setenv("CLGRAD_TUNING_DIR", dir, 1), 0);
    ctx = cg_context_new(NULL);
    ck_assert_msg(ctx != NULL, "%s", TT_ERR);
    ck_assert_msg(tt_in_force(ctx, "gemm_pack", "any", &in_force),
                  "gemm_pack any is not in force");
    if (in_force_is_ours(&in_force, path))
        for (p = 0; p < 6; p++)
            assert_param(&in_force, &e, names[p]);
    cg_context_free(ctx);
    json_object_put(root);
    free(out);
}
END_TEST

/* The pack stage's grid runs at the device's own vector width where that
 * is narrower than PVW's default (16): as another CPU reports 4 floats
 * (CLGRAD_NATIVE_FLOAT_WIDTH), the grid's first candidate has PVW 4. */
START_TEST(the_pack_grid_runs_at_the_devices_vector_width)
{
    char env[1200], *out;
    json_object *root, *k, *cand;
    int status;

    snprintf(env, sizeof env, "CLGRAD_TUNING_DIR='%s/packw' "
             "CLGRAD_NATIVE_FLOAT_WIDTH=4", tt_tmpdir());
    out = tt_run_tool(env, "clgrad-tune", BUDGET "--only pack "
                      "--model-shape " LSTM_SHAPE " --max-candidates 1 "
                      "--dry-run --json --quiet", &status);
    ck_assert_int_eq(status, 0);
    root = json_tokener_parse(out);
    ck_assert_msg(root != NULL, "not JSON: %.200s", out);
    k = json_object_array_get_idx(get(root, "kernels"), 0);
    ck_assert_int_eq(json_object_array_length(get(k, "candidates")), 1);
    cand = get(json_object_array_get_idx(get(k, "candidates"), 0),
               "parameters");
    /* a pair of the grid: not the defaults' 6 x 1 */
    ck_assert_int_eq(json_object_get_int(get(cand, "PVW")), 4);
    ck_assert(json_object_get_int(get(cand, "PMR")) != 6 ||
              json_object_get_int(get(cand, "PTN")) != 1);
    json_object_put(root);
    free(out);
}
END_TEST

/* The backend a gemm candidate's parameters (JSON) name: 2 CLBlast, 1
 * the packed kernels, 0 gemm.cl's. */
static int
json_backend(json_object *p)
{
    json_object *v;

    if (json_object_object_get_ex(p, "clblast", &v) &&
        json_object_get_int(v))
        return 2;
    return json_object_object_get_ex(p, "packed", &v) &&
           json_object_get_int(v);
}

/* A gemm class's "settle" in the report, where it ran: the search's
 * winner against another backend's fastest, in rounds of one each, the
 * one kept by the median of the per-round ratios (winner / other), and
 * that one the class's entry (e, NULL: none written). */
static void
settled_by_the_median(json_object *k, const cg_tuning_entry *e)
{
    json_object *s, *q, *kept;
    double v[8], med;
    int i, j, n, other;

    if (!json_object_object_get_ex(k, "settle", &s)) {
        /* then no candidate beat the defaults, or none of another
         * backend came within twice the fastest's time */
        json_object *cands = get(k, "candidates"), *t;
        double def = json_object_get_double(get(k, "default_time_us"));
        double best = def, us = 0;
        int b = -1;

        n = (int)json_object_array_length(cands);
        for (i = 0; i < n; i++) {
            json_object *c = json_object_array_get_idx(cands, (size_t)i);

            if (json_object_object_get_ex(c, "time_us", &t) &&
                (us = json_object_get_double(t)) > 0 && us < best) {
                best = us;
                b = json_backend(get(c, "parameters"));
            }
        }
        for (i = 0; b >= 0 && i < n; i++) {
            json_object *c = json_object_array_get_idx(cands, (size_t)i);

            ck_assert_msg(!json_object_object_get_ex(c, "time_us", &t) ||
                          (us = json_object_get_double(t)) <= 0 ||
                          json_backend(get(c, "parameters")) == b ||
                          us >= 2 * best,
                          "no settle, but a candidate of backend %d at "
                          "%g us against the fastest's %g",
                          json_backend(get(c, "parameters")), us, best);
        }
        return;
    }
    ck_assert_int_ne(json_backend(get(s, "winner")),
                     json_backend(get(s, "other")));
    q = get(s, "ratios");
    n = (int)json_object_array_length(q);
    ck_assert(n >= 1 && n <= 8);
    for (i = 0; i < n; i++) {       /* sorted, for the median */
        double x = json_object_get_double(json_object_array_get_idx(
                                              q, (size_t)i));

        ck_assert(x > 0);
        for (j = i; j > 0 && v[j - 1] > x; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
    med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    other = strcmp(json_object_get_string(get(s, "kept")), "other") == 0;
    ck_assert_msg(other == (med > 1), "median ratio %g, kept %s", med,
                  other ? "the other" : "the winner");
    kept = get(s, other ? "other" : "winner");
    if (e) {
        /* the entry's backend, where it names one (keys the built-in
         * rules agree with are trimmed), is the kept one's */
        int b = param_index(e, "clblast") >= 0 &&
                e->values[param_index(e, "clblast")] ? 2
              : param_index(e, "packed") >= 0 &&
                e->values[param_index(e, "packed")] ? 1 : -1;

        if (b >= 0)
            ck_assert_int_eq(b, json_backend(kept));
    }
}

/* The stage "gemm", for the classes --gemm-classes names: each class's
 * result in the report, CLBlast and the packed backend tried before
 * clgrad's tiles (so that a class short of time has tried them), an
 * entry for a class whose best beat the defaults (gemm.cl's values and
 * the backend keys that contradict the built-in rules at the class's
 * product, with the file's hash) and none otherwise, the settling
 * rounds where another backend came within 2x of the fastest, and the
 * entries in force in a new context. */
START_TEST(the_gemm_stage_writes_class_entries)
{
    static const char *const classes[2] = { "NT.skinny", "NN.small" };
    static const int dims[2][3] = { { 32, 2048, 512 },  /* tune_gemm.c's */
                                    { 128, 128, 128 } };
    char dir[512], hash[33], *out;
    const char *path;
    json_object *root, *kernels, *cands;
    cg_tuning_db *db;
    cg_tuning_entry e, in_force, trimmed;
    cg_context *ctx;
    int status, c, i, n, written = 0, wrote[2] = { 0, 0 };

    snprintf(dir, sizeof dir, "%s/gemm", tt_tmpdir());
    out = run_tune(dir, BUDGET "--only gemm --gemm-classes "
                   "NT.skinny,NN.small --max-candidates 3 --json --quiet",
                   &status);
    ck_assert_int_eq(status, 0);
    root = json_tokener_parse(out);
    ck_assert_msg(root != NULL, "not JSON: %.200s", out);
    path = json_object_get_string(get(root, "output"));
    kernels = get(root, "kernels");
    ck_assert_int_eq(json_object_array_length(kernels), 2);
    ck_assert_int_eq(cg_kernel_source_hash("gemm", hash), CG_OK);
    db = json_object_get_boolean(get(root, "written"))
       ? cg_tuning_db_load(path) : NULL;
    for (c = 0; c < 2; c++) {
        json_object *k = json_object_array_get_idx(kernels, (size_t)c);
        const char *outcome = json_object_get_string(get(k, "outcome"));
        int found = 0;

        ck_assert_str_eq(json_object_get_string(get(k, "kernel")), "gemm");
        ck_assert_str_eq(json_object_get_string(get(k, "shape")),
                         classes[c]);
        cands = get(k, "candidates");
        ck_assert_int_eq(json_object_array_length(cands), 3);
        /* CLBlast, the packed backend, then the first tile */
        for (i = 0; i < 3; i++) {
            json_object *p = get(json_object_array_get_idx(cands,
                                                           (size_t)i),
                                 "parameters");

            ck_assert_int_eq(json_object_get_int(get(p, "clblast")),
                             i == 0);
            if (i > 0)
                ck_assert_int_eq(json_object_get_int(get(p, "packed")),
                                 i == 1);
        }
        for (i = 0; db && i < cg_tuning_db_count(db); i++) {
            ck_assert_int_eq(cg_tuning_db_entry(db, i, &e), CG_OK);
            if (strcmp(e.shape, classes[c]) == 0) {
                found = 1;
                break;
            }
        }
        settled_by_the_median(k, found ? &e : NULL);
        if (strcmp(outcome, "tuned") != 0) {
            ck_assert_msg(!found, "%s: %s, but an entry", classes[c],
                          outcome);
            continue;
        }
        ck_assert_msg(found, "%s tuned, but no entry", classes[c]);
        written++;
        wrote[c] = 1;
        ck_assert_str_eq(e.kernel, "gemm");
        ck_assert_str_eq(e.source_hash, hash);
        /* the backend keys only where the measurement contradicts the
         * built-in rules at the class's product, so that trimming again
         * drops nothing; and never an empty entry */
        trimmed = e;
        cg__gemm_entry_trim(&trimmed, 0, c == 0, (size_t)dims[c][0],
                            (size_t)dims[c][1], (size_t)dims[c][2]);
        ck_assert_int_eq(trimmed.nparams, e.nparams);
        ck_assert_int_gt(e.nparams, 0);
        for (i = 0; i < e.nparams; i++)
            if (strcmp(e.names[i], "clblast") == 0 ||
                strcmp(e.names[i], "packed") == 0 ||
                strcmp(e.names[i], "pack") == 0)
                ck_assert(e.values[i] == 0 || e.values[i] == 1);
        ck_assert(e.time_us > 0 && e.time_us < e.default_time_us);
        ck_assert_msg(strstr(e.note, "SGEMM") != NULL, "note: %s", e.note);
    }
    if (db) {
        ck_assert_int_eq(cg_tuning_db_count(db), written);
        cg_tuning_db_free(db);
    }
    ck_assert_int_eq(setenv("CLGRAD_TUNING_DIR", dir, 1), 0);
    ctx = cg_context_new(NULL);
    ck_assert_msg(ctx != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_context_tuning_count(ctx, &n), CG_OK);
    for (i = 0; i < n; i++) {
        ck_assert_int_eq(cg_context_tuning_entry(ctx, i, &in_force), CG_OK);
        if (strcmp(in_force.kernel, "gemm") != 0)
            continue;
        for (c = 0; c < 2; c++) {
            if (strcmp(in_force.shape, classes[c]) != 0)
                continue;
            if (wrote[c]) {
                in_force_is_ours(&in_force, path);
                written--;
            } else {
                ck_assert_msg(strcmp(in_force.origin, path) != 0,
                              "%s in force from the run, which wrote none",
                              classes[c]);
            }
        }
    }
    ck_assert_int_eq(written, 0);
    cg_context_free(ctx);
    unsetenv("CLGRAD_TUNING_DIR");
    json_object_put(root);
    free(out);
}
END_TEST

/* The stage "conv": both algorithms timed for each of the twelve shape
 * classes (conv2d and conv_transpose2d), and im2col making columns
 * always where the class's convolutions would not, and the fastest
 * written as the class's entry (algo 0 or 1, "shift" 0 with algo 0 or
 * none, conv.cl's hash) when it beat the built-in rule, else no entry
 * (every candidate timed at or above the defaults); then conv1d's
 * "fwd1d.long", FFT against the rest at two kernel lengths or more (algo
 * 2 with min_kernel, or 0); all of which a new context puts in force. */
START_TEST(the_conv_stage_writes_an_entry_per_class)
{
    static const char *const classes[13] = {
        "fwd.depthwise", "fwd.small", "fwd.large",
        "bwd.depthwise", "bwd.small", "bwd.large",
        "tfwd.depthwise", "tfwd.small", "tfwd.large",
        "tbwd.depthwise", "tbwd.small", "tbwd.large", "fwd1d.long"
    };
    char dir[512], hash[33], *out;
    const char *path;
    json_object *root, *kernels;
    cg_tuning_db *db;
    cg_tuning_entry e, in_force;
    cg_context *ctx;
    int status, c, i, n, found = 0, written = 0;

    snprintf(dir, sizeof dir, "%s/conv", tt_tmpdir());
    out = run_tune(dir, BUDGET "--only conv --json --quiet", &status);
    ck_assert_int_eq(status, 0);
    root = json_tokener_parse(out);
    ck_assert_msg(root != NULL, "not JSON: %.200s", out);
    ck_assert(json_object_get_boolean(get(root, "written")));
    path = json_object_get_string(get(root, "output"));
    kernels = get(root, "kernels");
    ck_assert_int_eq(json_object_array_length(kernels), 13);
    ck_assert_int_eq(cg_kernel_source_hash("conv", hash), CG_OK);
    db = cg_tuning_db_load(path);
    ck_assert_msg(db != NULL, "%s", TT_ERR);
    for (c = 0; c < 13; c++) {
        json_object *k = json_object_array_get_idx(kernels, (size_t)c);

        ck_assert_str_eq(json_object_get_string(get(k, "kernel")), "conv");
        ck_assert_str_eq(json_object_get_string(get(k, "shape")),
                         classes[c]);
        for (i = 0; i < cg_tuning_db_count(db); i++) {
            ck_assert_int_eq(cg_tuning_db_entry(db, i, &e), CG_OK);
            if (strcmp(e.shape, classes[c]) == 0)
                break;
        }
        if (c < 12) {
            json_object *cands = get(k, "candidates");
            double def = json_object_get_double(get(k, "default_time_us"));

            /* im2col, im2col making columns always where the class's
             * convolutions would read stride-1 windows in place ("shift"
             * 0), the direct kernels */
            n = (int)json_object_array_length(cands);
            ck_assert_msg(n == 2 || (n == 3 && cand_shift(cands, 1) == 0),
                          "%s: %d candidates", classes[c], n);
            if (i == cg_tuning_db_count(db)) {
                /* no entry: the rule chose at least as well */
                ck_assert_str_eq(json_object_get_string(get(k, "outcome")),
                                 "the defaults are the fastest (no entry)");
                for (n--; n >= 0; n--) {
                    json_object *t = NULL;

                    if (json_object_object_get_ex(
                            json_object_array_get_idx(cands, (size_t)n),
                            "time_us", &t))
                        ck_assert(json_object_get_double(t) >= def);
                }
                continue;
            }
            written++;
            ck_assert_str_eq(e.kernel, "conv");
            ck_assert_str_eq(e.source_hash, hash);
            ck_assert(e.time_us < e.default_time_us);
            ck_assert(param(&e, "algo") == 0 || param(&e, "algo") == 1);
            ck_assert(param_or_none(&e, "shift") == -1 ||
                      (param_or_none(&e, "shift") == 0 &&
                       param(&e, "algo") == 0));
        } else {
            ck_assert_int_lt(i, cg_tuning_db_count(db));
            written++;
            ck_assert_str_eq(e.source_hash, hash);
            /* FFT and the rest at each length tried: one length when
             * FFT wins clearly at the first (on a GPU, 16 taps) */
            n = (int)json_object_array_length(get(k, "candidates"));
            ck_assert_int_ge(n, 2);
            ck_assert_int_eq(n % 2, 0);
            ck_assert(param(&e, "algo") == 0 || (param(&e, "algo") == 2 &&
                                                 param(&e, "min_kernel") >=
                                                 16));
        }
        ck_assert(e.time_us > 0 && e.default_time_us > 0);
    }
    ck_assert_int_eq(setenv("CLGRAD_TUNING_DIR", dir, 1), 0);
    ctx = cg_context_new(NULL);
    ck_assert_msg(ctx != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_context_tuning_count(ctx, &n), CG_OK);
    for (i = 0; i < n; i++) {
        ck_assert_int_eq(cg_context_tuning_entry(ctx, i, &in_force), CG_OK);
        if (strcmp(in_force.kernel, "conv") != 0)
            continue;
        /* a class this run left to the rule may have a built-in entry */
        for (c = 0; c < 13; c++)
            if (strcmp(in_force.shape, classes[c]) == 0 &&
                strcmp(in_force.origin, path) == 0) {
                in_force_is_ours(&in_force, path);
                found++;
            }
    }
    ck_assert_int_eq(cg_tuning_db_count(db), written);
    cg_tuning_db_free(db);
    ck_assert_int_eq(found, written);
    cg_context_free(ctx);
    unsetenv("CLGRAD_TUNING_DIR");
    json_object_put(root);
    free(out);
}
END_TEST

/* The stage "fft", one class (--fft-classes complex.large): clFFT,
 * Bluestein's algorithm and the radix passes each checked and timed, the
 * fastest written as the class's entry (path 0, 1 or 3, fft.cl's hash);
 * and where clFFT does not verify, a fallback. */
START_TEST(the_fft_stage_writes_a_verified_entry)
{
    char dir[512], env[700], hash[33], *out;
    json_object *root, *kernels, *k, *c0;
    cg_tuning_db *db;
    cg_tuning_entry e;
    int status;

    snprintf(dir, sizeof dir, "%s/fft", tt_tmpdir());
    out = run_tune(dir, BUDGET "--only fft --fft-classes complex.large "
                   "--json --quiet", &status);
    ck_assert_int_eq(status, 0);
    root = json_tokener_parse(out);
    ck_assert_msg(root != NULL, "not JSON: %.200s", out);
    ck_assert(json_object_get_boolean(get(root, "written")));
    kernels = get(root, "kernels");
    ck_assert_int_eq(json_object_array_length(kernels), 1);
    k = json_object_array_get_idx(kernels, 0);
    ck_assert_str_eq(json_object_get_string(get(k, "kernel")), "fft");
    ck_assert_str_eq(json_object_get_string(get(k, "shape")),
                     "complex.large");
    ck_assert_int_eq(json_object_array_length(get(k, "candidates")), 3);
    ck_assert_int_eq(cg_kernel_source_hash("fft", hash), CG_OK);
    db = cg_tuning_db_load(json_object_get_string(get(root, "output")));
    ck_assert_msg(db != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tuning_db_count(db), 1);
    find_entry(db, "fft", "complex.large", &e);
    ck_assert_str_eq(e.source_hash, hash);
    ck_assert(param(&e, "path") == 0 || param(&e, "path") == 1 ||
              param(&e, "path") == 3);
    /* clFFT verifies on PoCL */
    ck_assert(e.time_us > 0 && e.default_time_us > 0);
    cg_tuning_db_free(db);
    json_object_put(root);
    free(out);

    /* clFFT wrong (CLGRAD_TUNE_FFT_WRONG=1): Bluestein's path or the
     * radix passes written, without a default time, and clFFT's candidate
     * reported as not verifying; the plans are the first run's. */
    snprintf(env, sizeof env, "CLGRAD_TUNE_FFT_WRONG=1 "
             "CLGRAD_TUNING_DIR='%s'", dir);
    out = tt_run_tool(env, "clgrad-tune", BUDGET "--only fft --fft-classes "
                      "complex.large --json --quiet", &status);
    ck_assert_int_eq(status, 0);
    root = json_tokener_parse(out);
    ck_assert_msg(root != NULL, "not JSON: %.200s", out);
    k = json_object_array_get_idx(get(root, "kernels"), 0);
    ck_assert_msg(strstr(json_object_get_string(get(k, "outcome")),
                         "does not verify") != NULL, "%s",
                  json_object_get_string(get(k, "outcome")));
    c0 = json_object_array_get_idx(get(k, "candidates"), 0);
    ck_assert_msg(strstr(json_object_get_string(get(c0, "skipped")),
                         "does not verify") != NULL, "%s",
                  json_object_get_string(c0));
    db = cg_tuning_db_load(json_object_get_string(get(root, "output")));
    ck_assert_msg(db != NULL, "%s", TT_ERR);
    find_entry(db, "fft", "complex.large", &e);
    ck_assert(param(&e, "path") == 1 || param(&e, "path") == 3);
    ck_assert(e.time_us > 0 && e.default_time_us == 0);
    cg_tuning_db_free(db);
    json_object_put(root);
    free(out);
}
END_TEST

/* The stage "dp", lean: the defaults and one other pair of bucket sizes
 * timed on a data-parallel step (two replicas on this device), the faster
 * written as the entry "dp" "any" (no source hash: no kernel file), which
 * a new context puts in force and cg_dp_new then uses. */
START_TEST(the_dp_stage_writes_bucket_sizes)
{
    char dir[512], *out;
    const char *path;
    json_object *root, *kernels, *k;
    cg_tuning_db *db;
    cg_tuning_entry e;
    cg_context *ctx;
    cg_module *m;
    cg_optimizer *opt;
    cg_tensor *p[2];
    cg_sgd_options so = { 0 };
    cg_dp *dp;
    cg_dp_stats st;
    int status;

    snprintf(dir, sizeof dir, "%s/dp", tt_tmpdir());
    out = run_tune(dir, BUDGET "--only dp --max-candidates 1 --json --quiet",
                   &status);
    ck_assert_int_eq(status, 0);
    root = json_tokener_parse(out);
    ck_assert_msg(root != NULL, "not JSON: %.200s", out);
    ck_assert(json_object_get_boolean(get(root, "written")));
    path = json_object_get_string(get(root, "output"));
    kernels = get(root, "kernels");
    ck_assert_int_eq(json_object_array_length(kernels), 1);
    k = json_object_array_get_idx(kernels, 0);
    ck_assert_str_eq(json_object_get_string(get(k, "kernel")), "dp");
    ck_assert_int_eq(json_object_array_length(get(k, "candidates")), 2);
    db = cg_tuning_db_load(path);
    ck_assert_msg(db != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tuning_db_count(db), 1);
    find_entry(db, "dp", "any", &e);
    ck_assert_str_eq(e.source_hash, "");
    ck_assert(param(&e, "bucket_kb") >= 1 && param(&e, "first_bucket_kb") >= 1);
    ck_assert(e.time_us > 0 && e.default_time_us > 0);
    cg_tuning_db_free(db);
    ck_assert_int_eq(setenv("CLGRAD_TUNING_DIR", dir, 1), 0);
    ctx = cg_context_new(NULL);
    unsetenv("CLGRAD_TUNING_DIR");
    ck_assert_msg(ctx != NULL, "%s", TT_ERR);
    m = cg_linear_new(ctx, 3, 2, 1);
    ck_assert_msg(m != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_module_params(m, p, 2), 2);
    so.lr = 0.1;
    opt = cg_optim_sgd_new(ctx, p, 2, &so);
    ck_assert_msg(opt != NULL, "%s", TT_ERR);
    dp = cg_dp_new(1, &m, &opt, NULL);
    ck_assert_msg(dp != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_dp_get_stats(dp, &st), CG_OK);
    ck_assert(st.bucket_mb == param(&e, "bucket_kb") / 1024.0);
    ck_assert(st.first_bucket_mb == param(&e, "first_bucket_kb") / 1024.0);
    ck_assert_msg(strstr(st.bucket_origin, path) != NULL, "%s",
                  st.bucket_origin);
    cg_dp_free(dp);
    cg_optim_free(opt);
    cg_module_free(m);
    cg_context_free(ctx);
    json_object_put(root);
    free(out);
}
END_TEST

START_TEST(dry_run_writes_nothing)
{
    char dir[512], file[600];
    char *out;
    int status;
    struct stat st;

    snprintf(dir, sizeof dir, "%s/dry", tt_tmpdir());
    snprintf(file, sizeof file, "%s/db.json", dir);
    {
        char args[1024];

        snprintf(args, sizeof args, BUDGET "--only rnn --model-shape "
                 LSTM_SHAPE " --max-candidates 1 --dry-run --quiet "
                 "--output '%s'", file);
        out = run_tune(dir, args, &status);
    }
    ck_assert_int_eq(status, 0);
    ck_assert_int_ne(stat(file, &st), 0);
    ck_assert_int_ne(stat(dir, &st), 0);
    free(out);
}
END_TEST

/* A budget spent before anything is measured, or during it, ends the run
 * with a valid report and exit status 0; whatever it wrote loads and is
 * sane, and nothing when it wrote nothing.  Which of the two happens
 * depends on the machine's speed, so both are accepted. */
START_TEST(a_tiny_budget_still_gives_a_valid_result)
{
    char dir[512], file[600], args[1024], *out;
    json_object *root, *kernels;
    cg_tuning_entry e;
    cg_tuning_db *db;
    struct stat st;
    int status;

    snprintf(dir, sizeof dir, "%s/tiny", tt_tmpdir());
    snprintf(file, sizeof file, "%s/db.json", dir);
    /* (--output's directory must exist) */
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    snprintf(args, sizeof args, "--budget 0.001 --only rnn --model-shape "
             LSTM_SHAPE " --max-candidates 1 --json --quiet --output '%s'",
             file);
    out = run_tune(dir, args, &status);
    ck_assert_int_eq(status, 0);
    root = json_tokener_parse(out);
    ck_assert_msg(root != NULL, "not JSON: %.200s", out);
    ck_assert_double_eq(json_object_get_double(get(root, "budget_s")),
                        0.001);
    kernels = get(root, "kernels");
    ck_assert(json_object_is_type(kernels, json_type_array));
    if (json_object_get_boolean(get(root, "written"))) {
        db = cg_tuning_db_load(file);
        ck_assert_msg(db != NULL, "%s", TT_ERR);
        find_entry(db, "rnn.lstm", "H16", &e);
        check_rnn_entry(&e);
        cg_tuning_db_free(db);
    } else {
        ck_assert_int_ne(stat(file, &st), 0);
    }
    json_object_put(root);
    free(out);
}
END_TEST

/* Writes `text` into `path`. */
static void
put_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* Whether `path` holds exactly `text`. */
static int
holds(const char *path, const char *text)
{
    char got[4096];
    FILE *f = fopen(path, "r");
    size_t n;

    if (!f)
        return 0;
    n = fread(got, 1, sizeof got - 1, f);
    fclose(f);
    got[n] = '\0';
    return strcmp(got, text) == 0;
}

/* An --output that cannot take the results is refused before anything is
 * tuned (nothing on stdout: no report, no summary) and left as it was: a
 * file that is not a tuning database (with --quiet too), another device's
 * database, a directory, '', a directory that does not exist (not
 * created). */
START_TEST(a_bad_output_is_refused_before_tuning)
{
    static const char notes[] = "my notes\n";
    static const char other[] =
        "{\"format\": \"clgrad-tuning\", \"version\": 1, \"device\": "
        "{\"name\": \"Some GPU\", \"vendor\": \"V\", \"platform_name\": "
        "\"P\", \"platform_vendor\": \"V\", \"driver_version\": \"1\", "
        "\"type\": \"GPU\"}, \"entries\": [{\"kernel\": \"rnn.lstm\", "
        "\"shape\": \"H16\", \"params\": {\"VW\": 1, \"RB\": 1, \"WG\": "
        "8}, \"time_us\": 1, \"default_time_us\": 2}]}\n";
    const char *flags[] = { "", "--quiet ", "--json " };
    char dir[512], file[600], args[1400], *out;
    struct stat st;
    int status;
    size_t i;

    snprintf(dir, sizeof dir, "%s/badout", tt_tmpdir());
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    for (i = 0; i < 3; i++) {
        snprintf(file, sizeof file, "%s/notes.txt", dir);
        put_file(file, notes);
        snprintf(args, sizeof args, BUDGET "--only rnn --model-shape "
                 LSTM_SHAPE " --max-candidates 1 %s--output '%s'", flags[i],
                 file);
        out = run_tune(dir, args, &status);
        ck_assert_msg(status == 1, "notes: exit status %d", status);
        ck_assert_str_eq(out, "");
        ck_assert_msg(holds(file, notes), "the notes file was changed");
        free(out);
    }
    snprintf(file, sizeof file, "%s/other.json", dir);
    put_file(file, other);
    snprintf(args, sizeof args, BUDGET "--only rnn --model-shape " LSTM_SHAPE
             " --max-candidates 1 --output '%s'", file);
    out = run_tune(dir, args, &status);
    ck_assert_msg(status == 1, "other device: exit status %d", status);
    ck_assert_str_eq(out, "");
    ck_assert_msg(holds(file, other), "another device's database changed");
    free(out);
    snprintf(args, sizeof args, BUDGET "--only rnn --model-shape " LSTM_SHAPE
             " --max-candidates 1 --output '%s'", dir);
    out = run_tune(dir, args, &status);
    ck_assert_msg(status == 1, "a directory: exit status %d", status);
    ck_assert_str_eq(out, "");
    free(out);
    out = run_tune(dir, BUDGET "--only rnn --output ''", &status);
    ck_assert_msg(status == 2, "'': exit status %d", status);
    free(out);
    snprintf(file, sizeof file, "%s/no/such/dir/db.json", dir);
    snprintf(args, sizeof args, BUDGET "--only rnn --model-shape " LSTM_SHAPE
             " --max-candidates 1 --output '%s'", file);
    out = run_tune(dir, args, &status);
    ck_assert_msg(status == 1, "missing directory: exit status %d", status);
    ck_assert_str_eq(out, "");
    snprintf(file, sizeof file, "%s/no", dir);
    ck_assert_msg(stat(file, &st) != 0, "%s was created", file);
    free(out);
}
END_TEST

START_TEST(help_version_and_usage_errors)
{
    static const char *const bad[] = {
        "--no-such-option", "--budget -3", "--budget 0", "--budget x",
        "--budget 5s", "--fraction 2",
        "--only rnn,bogus", "--model-shape lstm:B=x", "--model-shape cnn",
        "--max-candidates -1", "extra-argument",
        "--gemm-classes NN.huge", "--gemm-classes ''",
    };
    char *out;
    int status;
    size_t i;

    out = run_tune(NULL, "--help", &status);
    ck_assert_int_eq(status, 0);
    ck_assert(strstr(out, "Usage: clgrad-tune") != NULL);
    ck_assert(strstr(out, "--budget") != NULL);
    ck_assert(strstr(out, "\n  kernels ") != NULL);
    free(out);
    out = run_tune(NULL, "--version", &status);
    ck_assert_int_eq(status, 0);
    ck_assert(strstr(out, cg_version()) != NULL);
    free(out);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        out = run_tune(NULL, bad[i], &status);
        ck_assert_msg(status == 2, "%s: exit status %d", bad[i], status);
        free(out);
    }
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("tune_tool");
    TCase *tc = tcase_create("tune_tool");

    tt_require_device();
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, help_version_and_usage_errors);
    tcase_add_test(tc, a_tiny_run_writes_a_database_that_contexts_use);
    tcase_add_test(tc, the_kernels_stage_writes_an_entry_per_file);
    tcase_add_test(tc, the_gemm_stage_writes_class_entries);
    tcase_add_test(tc, the_pack_stage_writes_the_packed_kernels_entry);
    tcase_add_test(tc, the_pack_grid_runs_at_the_devices_vector_width);
    tcase_add_test(tc, the_conv_stage_writes_an_entry_per_class);
    tcase_add_test(tc, the_fft_stage_writes_a_verified_entry);
    tcase_add_test(tc, the_dp_stage_writes_bucket_sizes);
    tcase_add_test(tc, dry_run_writes_nothing);
    tcase_add_test(tc, a_bad_output_is_refused_before_tuning);
    tcase_add_test(tc, a_tiny_budget_still_gives_a_valid_result);
    suite_add_tcase(s, tc);
    return tt_run(s);
}
