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

typedef struct progress {
    const tr_config *cfg;
    FILE *log;
    int tty;
    double t0, last_print;
    int64_t total;              /* steps planned, or 0 if unknown */
    double rate_t0;             /* throughput: items since rate_t0 */
    int64_t rate_items;
} progress;

typedef struct run {
    tr_config cfg;
    cg_context *ctx;
    cg_module *model;           /* a sequential container */
    int nparams;
    cg_tensor *params[TR_MAX_PARAMS];   /* borrowed from the model */
    cg_optimizer *opt;
    cg_lr_schedule *sched;
    int64_t step;               /* optimizer steps done */
    int64_t first_step;         /* step when this process started */
    int64_t epoch, index;       /* next batch: epoch and batch index */
    int64_t total;              /* steps planned */
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
    progress prog;
} run;

/* train.c: an error message on stderr ("clgrad-train: ..."), and
 * monotonic seconds. */
void tr_fail(const char *fmt, ...);
double tr_now(void);

/* train_model.c.  The models are sequential containers: the MLP fc0,
 * relu0, ..., fcN; the character LSTM embed, lstm, head.  NULL after an
 * error (cg_last_error). */
cg_module *tr_mlp_new(cg_context *ctx, const tr_config *c, int in, int out);
cg_module *tr_lstm_new(cg_context *ctx, const tr_config *c, int vocab);
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
int tr_save(run *r, const char *path);
/* The model's shape and the training configuration of a checkpoint, into
 * cfg, before anything is built. */
int tr_read_config(const cg_checkpoint *ck, tr_config *cfg,
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
