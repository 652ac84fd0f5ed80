/* SPDX-License-Identifier: MIT */
/*
 * tools/train_run.h - what the files of clgrad-train's engine share: a
 * training run's state, and the functions train.c (the loops and the
 * run), train_model.c (models, optimizer, schedule) and train_ckpt.c
 * (checkpoints, standardisation, vocabulary) call across files.
 */
#ifndef CG_TRAIN_RUN_H
#define CG_TRAIN_RUN_H

#include <stdio.h>

#include "train.h"

typedef struct tr_point {
    int64_t step;
    double loss, val;           /* val NAN where none */
} tr_point;

typedef struct progress {
    const tr_config *cfg;
    FILE *log;
    int tty, shown;             /* shown: columns of the bar on screen */
    double t0;                  /* elapsed time's origin (across resumes) */
    double start, last_print;   /* this process's start, the last draw */
    double compile0;            /* tr_compile_seconds() at start */
    int64_t total, end;         /* steps planned; this run's last step */
    int64_t first_step, step, drawn_step;
    double loss, lr, rate;      /* the last step's */
    const char *unit;
    double rate_t0;             /* throughput: items since rate_t0 */
    int64_t rate_items, items;  /* items: this process's */
    tr_point *pts;              /* --plot's points */
    size_t npts, cap;
} progress;

/* A data-parallel replica (train_dp.c): replica 0 is the run's own
 * context, model, optimizer and scaler (borrowed here); the others own
 * theirs.  h and c point at the carried LSTM state (the run's r->h, r->c
 * for replica 0, hh and cc for the others). */
#define TR_MAX_DEVICES 16
typedef struct tr_replica {
    cg_context *ctx;
    cg_module *model;
    cg_optimizer *opt;
    cg_grad_scaler *scaler;
    int nparams;
    cg_tensor *params[TR_MAX_PARAMS];
    cg_tensor **h, **c;
    cg_tensor *hh, *cc;
    cg_tensor *loss;            /* the last step's (unscaled), owned */
} tr_replica;

typedef struct run {
    tr_config cfg;
    cg_context *ctx;
    cg_module *model;           /* a sequential container */
    int nparams;
    cg_tensor *params[TR_MAX_PARAMS];   /* borrowed from the model */
    cg_optimizer *opt;
    cg_grad_scaler *scaler;     /* --precision fp16 */
    int64_t skipped;            /* steps the scaler skipped, as last read */
    cg_lr_schedule *sched;
    int64_t step;               /* optimizer steps done */
    int64_t first_step;         /* step when this process started */
    int64_t epoch, index;       /* next batch: epoch and batch index */
    int64_t total;              /* steps planned */
    int64_t given_batch, given_seq_len; /* the command line's, or -1 */
    int weights_only;           /* resumed from weights only */
    /* mlp */
    cg_dataset *train, *test;
    float *mean, *inv_std;      /* feature standardisation [F] */
    int features, classes;
    /* char-lstm */
    cg_text *text;
    int nvocab;                 /* the vocabulary: id -> byte, byte -> id */
    unsigned char vocab[256];
    int id_of[256];
    cg_tensor *h, *c;           /* carried (detached) LSTM state */
    cg_text *valid;             /* the held-out end of the text */
    /* evaluation */
    double val_loss, best_loss; /* NAN until evaluated */
    int64_t best_step, eval_step;
    double elapsed;             /* seconds of the runs before this one */
    char *best_path;            /* --save-best's file */
    double epoch_loss;          /* mlp: the epoch's loss sum, and steps */
    int64_t epoch_steps;
    progress prog;
    /* Data parallelism (train_dp.c; dp NULL without): the replicas of
     * this process, the world, and the step's batch on the host (the
     * MLP's features bx, its classes or the LSTM's ids and targets by;
     * bn rows or time steps). */
    cg_dp *dp;
    int nrep, world, rank;
    tr_replica rep[TR_MAX_DEVICES];
    float *bx;
    int *by;
    int64_t bn;
    int64_t dp_steps;           /* data-parallel steps, and their */
    double dp_reduce_s, dp_exposed_s;   /* reduction times summed */
} run;

/* train_dp.c.  Under mpirun (Open MPI's environment) the world size,
 * else 1.  The first device of --devices or the rank's; then, with
 * --devices or under mpirun, the other replicas and the cg_dp (0, or -1
 * after a message); a step on a batch made on replica 0's context (MLP,
 * CNN: x [n, F], y [n]; LSTM: ids and targets [n, B]) with *value the
 * whole batch's loss; the LSTM's state reset at a new pass; and the
 * replicas' release. */
int tr_mpi_world(void);
int tr_dp_first_device(const tr_config *cfg, char buf[32], const char **sel);
int tr_dp_setup(run *r);
int tr_dp_step(run *r, cg_tensor *x, cg_tensor *y, int64_t n, float *value);
void tr_dp_reset_state(run *r);
/* The whole batch's LSTM state (new tensors on replica 0's context, NULL
 * before the first step), gathered from every replica for a checkpoint:
 * collective, every rank calls it.  0, or -1 after a message. */
int tr_dp_state(run *r, cg_tensor **h, cg_tensor **c);
/* The summary's line on what the replicas communicated. */
void tr_dp_report(const run *r);
void tr_dp_free(run *r);

/* train.c: --precision bf16 / fp16 opens an autocast region around each
 * forward pass and its loss (training and evaluation); a no-op in fp32.
 * 0, or -1 after a message. */
int tr_autocast_begin(run *r);
void tr_autocast_end(run *r);
/* train.c: an error message on stderr ("clgrad-train: ..."), and
 * monotonic seconds. */
void tr_fail(const char *fmt, ...);
double tr_now(void);
/* clgrad-train.c: the wall seconds this process has spent compiling
 * kernels so far (tools/progress.h measures them). */
double tr_compile_seconds(void);

/* train_progress.c.  Durations as "42s", "3m07s", "2h05m". */
void tr_fmt_time(double s, char *buf, size_t n);
/* Starts the progress display and opens --log (a header when the file is
 * new); elapsed: the seconds of the runs before.  0, or -1 after a
 * message. */
int tr_progress_start(progress *p, const tr_config *cfg, int64_t step,
                      int64_t total, double elapsed);
/* One step done: a log row, and the bar or a plain line. */
void tr_progress_step(progress *p, int64_t step, double loss, double lr,
                      double rate, const char *unit);
/* A log row (acc, rate, val NAN where none). */
void tr_progress_log(progress *p, int64_t step, double loss, double acc,
                     double lr, double rate, double val);
/* Ends the bar's line (redrawn at the last step) before other output. */
void tr_progress_break(progress *p);
/* --plot: a point (val NAN where none), and the plot at the end (0, or
 * -1 after a message, which says how to install gnuplot if absent). */
void tr_plot_add(progress *p, int64_t step, double loss, double val);
int tr_have_gnuplot(void);
int tr_plot(progress *p);

/* train_eval.c.  The MLP's held-out loss and accuracy; the character
 * LSTM's validation loss over at most TR_EVAL_BATCHES batches of the
 * held-out text (no grad, dropout off).  0, or -1 after a message. */
#define TR_EVAL_BATCHES 8
int tr_mlp_eval(run *r, double *loss, double *acc);
int tr_lstm_eval(run *r, double *loss);
/* Prints n characters sampled after cfg.prime: temperature 0 is greedy,
 * top_k > 0 keeps the k likeliest characters.  0, or -1. */
int tr_sample(run *r, int64_t n, uint64_t seed);

/* train_model.c.  The models are sequential containers: the MLP fc0,
 * relu0, ..., fcN; the character LSTM embed, lstm, head.  NULL after an
 * error (cg_last_error). */
cg_module *tr_mlp_new(cg_context *ctx, const tr_config *c, int in, int out);
cg_module *tr_lstm_new(cg_context *ctx, const tr_config *c, int vocab);
/* The CNN: per --hidden width k, conv{k} (3x3, padding 1), bn{k}, relu{k},
 * pool{k} (max 2x2); then flatten and fc to `out` classes.  `in` is a
 * square number of features (checked by the caller). */
cg_module *tr_cnn_new(cg_context *ctx, const tr_config *c, int in, int out);
/* The model's logits for a batch of CSV rows x [B, features]: the MLP's
 * directly, the CNN's on x viewed as [B, 1, side, side]. */
cg_tensor *tr_forward(run *r, cg_tensor *x);
/* The same with model m of kind cfg->model. */
cg_tensor *tr_forward_model(const tr_config *cfg, cg_module *m,
                            cg_tensor *x);
/* Logits [T*B, V] for ids [T, B]; the final states replace *h and *c
 * (detached when `detach`). */
cg_tensor *tr_lstm_forward(cg_module *m, cg_tensor *ids, cg_tensor **h,
                           cg_tensor **c, int detach);
cg_optimizer *tr_make_optimizer(cg_context *ctx, const tr_config *c,
                                cg_tensor **params, int nparams);
/* NULL for "constant"; *status -1 on error. */
cg_lr_schedule *tr_make_schedule(const tr_config *c, cg_optimizer *opt,
                                 int64_t total, int *status);

/* train_ckpt.c.  Each returns 0, or -1 after a message. */
int tr_ck_fail(const char *what, const char *path);
/* Whether `path` can be written as `opt`'s file (not '', not a directory,
 * its directory exists and takes new files): checked before training, so
 * that a bad --checkpoint fails before the first step, not after the
 * last. */
int tr_check_output(const char *opt, const char *path);
/* val_loss: recorded as train.val_loss (--save-best's file), or NAN. */
int tr_save(run *r, const char *path, double val_loss);
/* Resuming from ck: the options the command line left unset take the
 * checkpoint's values; a model or data option given with another value
 * is an error naming both, a training option (lr, schedule, ...) takes
 * effect with a note on stdout.  With cfg->sample_only only the model's
 * shape must match.  Returns 0, 1 for a weights-only checkpoint (the
 * character LSTM's shape inferred from its tensors), or -1. */
int tr_resume_config(const cg_checkpoint *ck, tr_config *cfg,
                     const char *path);
/* Parameters, optimizer state, the generator and the position from ck
 * into the freshly built run. */
int tr_restore(run *r, const cg_checkpoint *ck, const char *path);
/* Standardises both splits' features with the training split's
 * statistics, or a resumed run's checkpoint's (ck not NULL). */
int tr_normalisation(run *r, const cg_checkpoint *ck);
/* Reads a vocabulary as cg_text_vocab writes it ("[10,32,...]": the
 * byte of each id) into r. */
int tr_parse_vocab(run *r, const char *s);

#endif
