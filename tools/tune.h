/* SPDX-License-Identifier: MIT */
/*
 * tools/tune.h - clgrad-tune's engine: the configuration, the run state
 * (budget, interruption, progress, report, results) and the stages:
 * clgrad's own recurrent kernels (tune_rnn.c), the work-group sizes of its
 * reduction kernel files (tune_kernels.c), its GEMM per product class
 * (tune_gemm.c), its packed GEMM kernels' tunables (tune_pack.c), its
 * convolution algorithm per shape class (tune_conv.c),
 * its Fourier transforms' path per class (tune_fft.c), data parallelism's
 * bucket sizes (tune_dp.c) and CLBlast's kernels
 * (tune_clblast.c, with the C++ tuner behind tools/clblast_tune.cpp).
 */
#ifndef CG_TUNE_H
#define CG_TUNE_H

#include <signal.h>
#include <stddef.h>

#include <json-c/json.h>

#include "clgrad.h"
#include "tune/tuner.h"

#define TU_MAX_SHAPES 16
#define TU_MAX_PATH 8
#define TU_MAX_RESULTS 64

/* Stages, in the order they run; --only takes their names. */
enum {
    TU_RNN = 1,             /* "rnn": VW, RB, WG per cell and shape */
    TU_XGEMM = 2,           /* "clblast.Xgemm" */
    TU_XGEMM_DIRECT = 4,    /* "clblast.XgemmDirect" */
    TU_GEMM_ROUTINE = 8,    /* "clblast.GemmRoutine" */
    TU_RNN_PATH = 16,       /* "rnn.path" */
    TU_COPY = 32,           /* "clblast.copy-kernels": with the time left */
    TU_KERNELS = 64,        /* "kernels": reduction kernel files' WG */
    TU_GEMM = 128,          /* "gemm": gemm.cl's tunables per class */
    TU_CONV = 256,          /* "conv": the algorithm per class */
    TU_FFT = 512,           /* "fft": the transform path per class */
    TU_DP = 1024,           /* "dp": data parallelism's bucket sizes */
    TU_PACK = 2048,         /* "pack": gemm_pack.cl's tunables */
    TU_ALL = 4095
};

/* A recurrent layer to tune for: cell mode, batch, hidden, input, steps. */
typedef struct tu_shape {
    cg_rnn_mode mode;
    int B, H, I, T;
} tu_shape;

typedef struct tu_config {
    const char *device;
    double budget;              /* seconds for everything */
    double fraction;            /* CLBlast's random-search fraction */
    tu_shape shapes[TU_MAX_SHAPES];
    int nshapes;
    int path_h[TU_MAX_PATH];    /* rnn.path hidden sizes */
    int npath;
    unsigned only;              /* TU_* bits */
    const char *output;         /* NULL: cg_tuning_path */
    int dry_run, json, quiet;
    int max_candidates;         /* per kernel and shape; 0: no limit */
    int gemm_size;              /* SGEMM tuning size; 0: by budget */
    unsigned gemm_classes;      /* bit c: tune GEMM class c; 0: all */
    unsigned fft_classes;       /* bit c: tune FFT class c; 0: all */
    const char *self;           /* this program, for the search child */
} tu_config;

/* Parameters of one candidate, as a tuning entry without times. */
typedef cg_tuning_entry tu_params;

typedef struct tu_run {
    const tu_config *cfg;
    cg_context *ctx;
    cg_device_info dev;
    volatile sig_atomic_t *stop;    /* Ctrl-C or the budget's end */
    double t0, deadline;            /* cg__now() seconds */
    double stage_end;               /* the current stage's share */
    int tty, interrupted;
    double last_print;
    json_object *report;            /* array of per-kernel objects */
    cg_tuning_entry results[TU_MAX_RESULTS];
    int nresults;
    /* The entries of the output file from an earlier run (same device
     * and driver): tried first, so that a new run starts from them. */
    cg_tuning_entry previous[TU_MAX_RESULTS];
    int nprevious;
    /* CLBlast parameters this process has applied that differ from what
     * the run will write (a candidate lost to the defaults, which CLBlast
     * cannot restore): names of kernels, for the notes. */
    char clblast_dirty[128];
} tu_run;

/* ---- run state (clgrad-tune.c) ---- */

double tu_now(void);
/* Seconds left in the current stage (never past the deadline). */
double tu_left(const tu_run *r);
/* Whether the run must stop now (interrupted, or the budget is spent). */
int tu_stopped(tu_run *r);
/* Whether a step estimated to take `est` seconds fits in the stage. */
int tu_fits(tu_run *r, double est);

/* Progress on stderr: a bar on a terminal, plain lines otherwise. */
void tu_progress(tu_run *r, const char *kernel, const char *shape, int i,
                 int n, double best_us, double default_us);
/* A message on stderr (ends a progress line first); not when --quiet. */
void tu_say(tu_run *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- parameters, report, results (tune_report.c) ---- */

/* The parameters as a JSON object; the caller owns it. */
json_object *tu_params_json(const tu_params *p);

/* The report: one object per kernel and shape. */
json_object *tu_report_kernel(tu_run *r, const char *kernel,
                              const char *shape, const char *note);
/* A candidate: timed (skipped NULL) or skipped, and why; source (may be
 * NULL) says where it came from ("curated", "clblast-search"). */
void tu_report_candidate(json_object *k, const tu_params *p,
                         double time_us, const char *skipped,
                         const char *source);
/* Judges a measured candidate of the rnn and kernels stages and reports
 * it: `status` is how measuring went (why: the message if it failed),
 * err its output's relative error against the defaults' (read only when
 * status is CG_OK), tol the most allowed.  A timed candidate faster than
 * *best_us becomes *best.  Returns 1 if the candidate was timed, 0 if
 * measuring failed, -1 if it did not verify (msg then says by how much). */
int tu_judge(json_object *k, const tu_params *cand, int status,
             const char *why, double us, double err, double tol,
             tu_params *best, double *best_us, char *msg, size_t msglen);
/* Ends a kernel of the rnn and kernels stages: with no candidate timed
 * (tried 0) reports so and returns 0; else keeps *best with its time,
 * the defaults' and `note`, reports it, and returns 1. */
int tu_conclude(tu_run *r, json_object *k, int tried, tu_params *best,
                double best_us, double def_us, const char *note);
void tu_report_result(json_object *k, double default_us,
                      const tu_params *best, double best_us,
                      const char *outcome);

/* Keeps an entry for the database (replacing one of the same kernel and
 * shape). */
void tu_keep(tu_run *r, const cg_tuning_entry *e);

/* Entry helpers. */
void tu_params_init(tu_params *p, const char *kernel, const char *shape);
void tu_params_add(tu_params *p, const char *name, long value);
long tu_params_get(const tu_params *p, const char *name, long dflt);
/* "VW=16 RB=4 WG=8" into buf. */
const char *tu_params_str(const tu_params *p, char *buf, size_t n);

/* Median of n doubles (reorders them). */
double tu_median(double *v, int n);

/* The end of a timing loop that took n samples (seconds) in times: when
 * status is not CG_OK, cg_last_error() into why and status back; when
 * n is 0, "interrupted" and -1; else *us = the median times scale, and
 * CG_OK. */
int tu_timed(int status, double *times, int n, double scale, double *us,
             char *why, size_t whylen);

/* Times run(ctx, arg), queued work that one cg_context_finish completes:
 * when *inner <= 0 it first sets *inner so that a sample of *inner runs
 * lasts about sample_s (1 to max_inner runs, from one timed run); then
 * up to reps samples (at most TU_MAX_REPS), the second and later only
 * while the run is not stopped and has time for one more; *us the median
 * per run in microseconds.  A failure puts cg_last_error() in why; no
 * sample at all gives "interrupted" and -1. */
#define TU_MAX_REPS 16
int tu_time(tu_run *r, int (*run)(cg_context *ctx, void *arg), void *arg,
            double sample_s, int max_inner, int reps, int *inner, double *us,
            char *why, size_t whylen);

/* ---- candidates and outputs of clgrad's own kernels (tune_rnn.c) ---- */

#define TU_MAX_VALUES 16
#define TU_MAX_SEGS 24

/* A parameter declared by a kernel file's banner line
 * " * @tunable NAME DEFAULT: V V V ...", as the kernel table has it. */
typedef struct tu_tunable {
    char name[16];
    int def;
    int vals[TU_MAX_VALUES];
    int n;
} tu_tunable;

/* The tunables of kernel file `file` (kernels/<file>.cl) from the kernel
 * table into t (up to max); returns how many. */
int tu_file_tunables(const char *file, tu_tunable *t, int max);
/* An earlier run's value of t for kernel `file` (r->previous), else t's
 * default. */
long tu_previous_value(const tu_run *r, const char *file,
                       const tu_tunable *t);
/* How far value v is from def, as |log2 v - log2 def|. */
double tu_value_distance(int v, int def);
/* t's values other than `cur` into vals in the order a stage tries them:
 * an earlier run's value for kernel `file` (r->previous) first, then the
 * default, then the rest nearest the default first (by the ratio);
 * returns how many. */
int tu_order_values(const tu_run *r, const char *file, const tu_tunable *t,
                    int cur, int *vals);

/* Host copies of a run's outputs, as segments of one array, so that each
 * tensor is compared against its own scale. */
typedef struct tu_out {
    float *data;
    size_t n;
    size_t off[TU_MAX_SEGS + 1];
    int nseg;
} tu_out;

void tu_out_free(tu_out *o);
/* Appends t's elements as a segment. */
int tu_out_add(tu_out *o, const cg_tensor *t);
/* The largest error of any segment relative to that segment's largest
 * reference value (INFINITY for a NaN or a different layout). */
double tu_out_error(const tu_out *a, const tu_out *ref);

/* ---- stages ---- */

/* clgrad's own kernels: every shape, then (TU_RNN_PATH) the path. */
int tu_stage_rnn(tu_run *r);
int tu_stage_rnn_path(tu_run *r);

/* The work-group sizes of the reduction kernel files (reduce, softmax,
 * layer_norm, loss, optim), timed on operations of the first model
 * shape's size (tune_kernels.c). */
int tu_stage_kernels(tu_run *r);

/* clgrad's GEMM: gemm.cl's tunables and the backend per product class
 * (tune_gemm.c). */
int tu_stage_gemm(tu_run *r);

/* The tunables of kernels/gemm_pack.cl (the packed GEMM and the
 * convolutions' shifted products), timed on a convolution and a packed
 * product sized by the first model shape (tune_pack.c). */
int tu_stage_pack(tu_run *r);

/* clgrad's convolution: im2col + GEMM or the direct kernels per shape
 * class (tune_conv.c). */
int tu_stage_conv(tu_run *r);
/* The stage's conv1d class "fwd1d.long" (tune_conv_fft.c): the kernel
 * length from which FFT wins; nonzero if it could not be tuned. */
int tu_conv_fft_class(tu_run *r);

/* Data parallelism's gradient bucket sizes, timed on a data-parallel step
 * of two in-process replicas on the device (tune_dp.c). */
int tu_stage_dp(tu_run *r);

/* clgrad's Fourier transforms: clFFT, Bluestein's algorithm or the
 * complex path per class, each checked against a double DFT
 * (tune_fft.c). */
int tu_stage_fft(tu_run *r);

/* CLBlast: Xgemm, XgemmDirect, GemmRoutine, the copy kernels. */
int tu_stage_xgemm(tu_run *r);
int tu_stage_xgemm_direct(tu_run *r);
int tu_stage_gemm_routine(tu_run *r);
int tu_stage_copy(tu_run *r);

/* ---- the search child (tune_child.c) ---- */

/* Runs CLBlast's search for its kernel `name` (for the entry `kernel`) in
 * a child until `end` (tu_now() seconds); its best parameters into *p.
 * On failure (nothing found in time, no child) why says what. */
int tu_child_search(tu_run *r, const char *kernel, const char *name,
                    size_t m, size_t n, size_t k, double end, tu_params *p,
                    char *why, size_t whylen);

/* The hidden search child (--clblast-child): runs CLBlast's own tuner
 * for `kernel` (rounds of growing fractions, see tune_child.c) and prints
 * each round's best parameters as a JSON line on stdout.  Returns the
 * exit status. */
int tu_clblast_child(const char *device, const char *kernel, size_t m,
                     size_t n, size_t k, double fraction);

/* ---- tools/clblast_tune.cpp ---- */

/* Runs clblast::Tune<kernel><float> on `queue`; fills names/values (up to
 * max) and *count.  Returns CLBlast's status (0: success); on an
 * exception, -1 with the message in why. */
int tu_clblast_tune(void *queue, const char *kernel, size_t m, size_t n,
                    size_t k, double fraction, char names[][40],
                    long *values, int max, int *count, char *why,
                    size_t whylen);

#endif
