/* SPDX-License-Identifier: MIT */
/*
 * tests/dp_model.h - the model, data and loss the data-parallel tests
 * train (tests/test_dp.c in one process, tests/dp_worker.c under mpirun):
 * a small MLP whose initial parameters and data are functions of their
 * index only, so that every replica, process and run starts alike.
 */
#ifndef CG_DP_MODEL_H
#define CG_DP_MODEL_H

#include "clgrad.h"

#define DPM_IN 13
#define DPM_HID 17
#define DPM_OUT 5
#define DPM_NPARAM 4
#define DPM_MAX_STEPS 20
#define DPM_MAX_BATCH 48

/* What the loss function reads: the step (its batch of the data), the
 * rows of each replica's shard, and a rank whose loss fails (-1: none). */
typedef struct {
    int step;
    int rows;
    int fail_rank;
} dpm_arg;

/* linear(IN, hid), tanh, linear(hid, OUT) on ctx, parameters written from
 * fixed values; NULL on error (cg_last_error). */
cg_module *dpm_mlp(cg_context *ctx, int hid);
/* SGD (lr 0.1, momentum 0.9) or Adam (lr 1e-2) over m's parameters. */
cg_optimizer *dpm_optimizer(cg_module *m, int adam);
/* The cross-entropy of replica rank's shard of step arg->step's batch: a
 * cg_dp_loss_fn. */
int dpm_loss(void *arg, int rank, cg_module *m, cg_tensor **loss);
/* The DPM_NPARAM parameters read to host arrays (malloc'ed; *count[i]
 * elements); CG_OK or the error. */
int dpm_params_host(cg_module *m, float *out[DPM_NPARAM],
                    int64_t count[DPM_NPARAM]);

#endif
