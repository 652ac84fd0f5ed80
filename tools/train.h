/* SPDX-License-Identifier: MIT */
/*
 * tools/train.h - clgrad-train's engine: configuration, models, the
 * training loops, sampling and checkpoints.
 */
#ifndef CG_TRAIN_H
#define CG_TRAIN_H

#include <signal.h>
#include <stdint.h>

#include "clgrad.h"

#define TR_MAX_HIDDEN 8
#define TR_MAX_PARAMS 128

typedef enum tr_model_kind {
    TR_NONE, TR_MLP, TR_CHAR_LSTM, TR_CNN
} tr_model_kind;

/* "mlp", "char-lstm", "cnn" (NULL for TR_NONE), and the reverse
 * (TR_NONE for another name). */
const char *tr_model_name(tr_model_kind kind);
tr_model_kind tr_model_parse(const char *name);

/* The options a checkpoint records are -1 (an empty string for the
 * names, hidden_set 0) until the command line or a resumed checkpoint
 * sets them; tr_run fills in the rest from the model's defaults. */
typedef struct tr_config {
    tr_model_kind model;
    int hidden[TR_MAX_HIDDEN], nhidden, hidden_set;
    int64_t layers, embed, seq_len, batch, warmup, step_size, seed;
    int64_t epochs, steps;      /* 0: not given */
    int64_t save_every, sample, sample_every, log_every, stop_at;
    int64_t eval_every, top_k;
    double dropout, holdout, lr, momentum, weight_decay, clip, gamma, min_lr;
    double temperature;
    double loss_scale;          /* --loss-scale: fp16's initial scale; 0:
                                 * the scaler's default, 65536 */
    int precision;              /* --precision: CG_F32 (default), CG_BF16
                                 * or CG_F16 (autocast; fp16 with a loss
                                 * scaler) */
    char optimizer[16], schedule[16];
    const char *data, *device, *checkpoint, *resume, *prime, *log, *plot;
    const char *devices;        /* --devices: data parallelism, or NULL */
    double bucket_mb;           /* --bucket-mb (0: tuning, else 25) */
    double first_bucket_mb;     /* --first-bucket-mb (0: tuning, else 1) */
    int sample_only, quiet, profile, save_best;
    int eval_only;              /* --eval-only */
    int prime_set;              /* --prime given (else "\n", or the
                                 * vocabulary's first character) */
} tr_config;

/* A run given neither --steps nor --epochs: the character LSTM takes
 * TR_LSTM_STEPS steps, the MLP TR_MLP_EPOCHS passes. */
#define TR_LSTM_STEPS 2000
#define TR_MLP_EPOCHS 20

void tr_config_defaults(tr_config *cfg);

/* 0 adam, 1 adamw, 2 sgd, 3 rmsprop, -1 unknown. */
int tr_optimizer_kind(const char *name);

/* Runs what cfg asks for; returns the process exit status.  *stop set
 * (Ctrl-C) ends training after the current step, with a checkpoint. */
int tr_run(const tr_config *cfg, volatile sig_atomic_t *stop);

#endif
