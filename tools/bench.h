/* SPDX-License-Identifier: MIT */
/*
 * tools/bench.h - clgrad-bench's pieces shared between the driver
 * (clgrad-bench.c: options, references, output) and the suites
 * (bench_suites.c).
 */
#ifndef CLGRAD_BENCH_H
#define CLGRAD_BENCH_H

#include <json-c/json.h>

#include "clgrad.h"

#define BENCH_MAX_REPEAT 100

typedef struct bench {
    /* options */
    const char *device;
    int quick, json, profile, repeat, warmup, threads;
    /* --torch-device: where the PyTorch reference runs (NULL: the CPU) */
    const char *torch_device;
    /* --precision: the training suites' precisions (CG_F32, CG_BF16,
     * CG_F16: autocast, fp16 with a loss scaler), in order */
    int precision[3], nprecision;
    const char *csv_dir;
    /* the device and its limits, measured at start; the FMA peak again
     * before each suite and at the end: fma_gflops is the highest so far
     * (what peak_fraction divides by), fma_runs how many */
    cg_device_info info;
    double copy_gbps, fma_gflops;
    int fma_runs;
    /* the PyTorch reference: python, script, and why it cannot run ("" if
     * it can) */
    char python[1024], script[1024], torch_missing[2048];
    int torch_checked;
    char torch_version[64];
} bench;

/* Median, min and max of repeated timings, in seconds. */
typedef struct bstat {
    double med, min, max;
} bstat;

/* A step to time: enqueues its work; the timer waits for it. */
typedef int (*bench_fn)(void *arg);

/* Diagnostics: "clgrad-bench: ..." on stderr; progress on a terminal. */
void bench_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void bench_progress(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

double bench_now(void);

/* Runs fn `warmup` times, then `repeat` times each timed to completion
 * (cg_context_finish when ctx is not NULL); *st gets the statistics.
 * Returns 0, or -1 after a message. */
int bench_time(const bench *b, cg_context *ctx, bench_fn fn, void *arg,
               bstat *st);
/* The same with `inner` calls of fn per timed repeat and one wait after
 * them, as a training step issues its work: *st per call. */
int bench_time_n(const bench *b, cg_context *ctx, bench_fn fn, void *arg,
                 int inner, bstat *st);
/* n steps timed in rounds (A/B): `warmup` rounds of one call each, then
 * `repeat` rounds, each timing `inner` calls of fn(arg[p]) for every p
 * in turn (waiting on ctx[p], when not NULL), the first of the turn
 * rotating from round to round, so that a slow spell of a shared machine
 * falls on all of them alike.  times[p][r]: p's time per call in round
 * r; st[p] its statistics.  Returns 0, or -1 after a message. */
int bench_time_rounds(const bench *b, int n, cg_context *const *ctx,
                      bench_fn fn, void *const *arg, int inner,
                      double (*times)[BENCH_MAX_REPEAT], bstat *st);
void bench_stat(const double *times, int n, bstat *st);
/* *st: median, min and max over the rounds of times[ref][r] /
 * times[p][r] (bench_time_rounds' times): p's speed-up over ref, each
 * round's two steps timed side by side. */
void bench_round_ratio(const bench *b, double (*times)[BENCH_MAX_REPEAT],
                       int ref, int p, bstat *st);
/* Adds speedup_vs_fp32 (vs->med), speedup_vs_fp32_min and _max to row. */
void bench_add_vs_fp32(json_object *row, const bstat *vs);
/* gflop GFLOP in `seconds` as a fraction of b's FMA peak (0: none
 * measured): every suite's peak_fraction. */
double bench_peak_fraction(const bench *b, double gflop, double seconds);

/* {"median": ms, "min": ms, "max": ms} from seconds. */
json_object *bench_ms_json(const bstat *st);
/* A result row: its case name, clgrad's and the reference's times and
 * their ratio under `ratio_key` (reference time / clgrad time: above 1,
 * clgrad is faster).  More fields may be added to the returned object. */
json_object *bench_row(const char *name, const bstat *clg, const bstat *ref,
                       const char *ratio_key);
/* A suite's object: its reference, what its ratio means, no rows yet. */
json_object *bench_suite_new(const char *reference, const char *meaning);
/* A suite's object when it cannot run: why, as "skipped". */
json_object *bench_suite_skipped(const char *why);
/* Appends a row (taken) to the suite's rows. */
void bench_suite_add(json_object *s, json_object *row);
void bench_add_double(json_object *o, const char *key, double v);
void bench_add_int(json_object *o, const char *key, int64_t v);

/* Runs the PyTorch side on `n` cases (bench_torch.py's MODEL:SPEC form);
 * fills st[i] per case.  Returns 0, or 1 with b->torch_missing set when
 * PyTorch cannot run here (the suite is then skipped), or -1 on failure. */
int bench_torch(bench *b, int n, char *const *specs, bstat *st);

/* A context on the benchmarked device, tuned unless no_tuning. */
cg_context *bench_context(const bench *b, int no_tuning);

/* The suites: each returns its JSON object ({"skipped": why} when it could
 * not run), or NULL after a message on failure.  The GEMM suite times
 * `untuned` (made with no_tuning, before any tuned context: CLBlast's
 * parameters are process-wide), then makes a tuned context of its own;
 * bandwidth and scaling use ctx (tuned); mlp and lstm make one context per
 * model so that peak memory is the model's own. */
json_object *suite_gemm(bench *b);
json_object *suite_bandwidth(bench *b, cg_context *ctx);
json_object *suite_mlp(bench *b);
json_object *suite_lstm(bench *b);
json_object *suite_scaling(bench *b, cg_context *ctx);
/* "CPU", or the --torch-device the PyTorch reference runs on. */
const char *bench_torch_where(const bench *b);

/* bench_conv.c: a CNN training step and conv2d layers vs PyTorch CPU. */
json_object *suite_conv(bench *b);
/* bench_fft.c: batched rfft, irfft and fft2 vs PyTorch CPU. */
json_object *suite_fft(bench *b);

/* The fp32 FMA peak of ctx's device, GFLOP/s. */
int bench_fma_peak(cg_context *ctx, double *gflops);

#endif
