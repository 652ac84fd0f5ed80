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

typedef enum tr_model_kind { TR_NONE, TR_MLP, TR_CHAR_LSTM } tr_model_kind;

typedef struct tr_config {
    tr_model_kind model;
    int hidden[TR_MAX_HIDDEN], nhidden, hidden_set;
    int64_t layers, embed, seq_len, batch, warmup, epochs, steps, seed;
    int64_t save_every, sample, sample_every, log_every, stop_at;
    double dropout, holdout, lr, momentum, weight_decay, clip, temperature;
    char optimizer[16], schedule[16];
    const char *data, *device, *checkpoint, *resume, *prime, *log;
    int sample_only, quiet, profile;
} tr_config;

void tr_config_defaults(tr_config *cfg);

/* 0 adam, 1 adamw, 2 sgd, 3 rmsprop, -1 unknown. */
int tr_optimizer_kind(const char *name);

/* Runs what cfg asks for; returns the process exit status.  *stop set
 * (Ctrl-C) ends training after the current step, with a checkpoint. */
int tr_run(const tr_config *cfg, volatile sig_atomic_t *stop);

#endif
