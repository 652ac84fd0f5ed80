/* SPDX-License-Identifier: MIT */
/*
 * lib/optim/internal.h - optimizers and learning-rate schedules: what
 * lib/optim/optim.c (optimizers, state), clip.c and schedule.c share.
 */
#ifndef CG_OPTIM_INTERNAL_H
#define CG_OPTIM_INTERNAL_H

#include "ops/internal.h"

typedef enum cg__optim_kind {
    CG__SGD,
    CG__ADAM,
    CG__ADAMW,
    CG__RMSPROP
} cg__optim_kind;

/* Kinds of per-parameter state, named as PyTorch names them. */
typedef enum cg__state_kind {
    CG__MOMENTUM_BUFFER,
    CG__EXP_AVG,
    CG__EXP_AVG_SQ,
    CG__MAX_EXP_AVG_SQ,
    CG__SQUARE_AVG,
    CG__GRAD_AVG,
    CG__MASTER,             /* float32 master of a 16-bit parameter */
    CG__STATE_KINDS
} cg__state_kind;

#define CG__MAX_KINDS 4     /* state kinds one optimizer uses, at most */

typedef struct cg__optim_param {
    cg_tensor *p;                           /* a reference */
    cg_tensor *state[CG__MAX_KINDS];        /* owned, contiguous; NULL:
                                             * none (a float32 parameter's
                                             * master) */
    int present[CG__MAX_KINDS];             /* visible (SGD's buffer: made) */
    char *names[CG__MAX_KINDS];             /* "exp_avg.3" */
    int64_t step;           /* with dstep: the count when it was made */
    float init_at;          /* with dstep, SGD momentum: dstep's value at
                             * which the buffer is made (-1: made) */
} cg__optim_param;

struct cg_optimizer {
    int refs;                   /* the caller's and each schedule's */
    cg_context *ctx;
    cg__optim_kind kind;
    int nkinds;
    cg__state_kind kinds[CG__MAX_KINDS];    /* PyTorch's state order */
    int n;
    cg__optim_param *params;
    double lr;
    double momentum, dampening, weight_decay;   /* SGD, RMSprop */
    double beta1, beta2, eps, alpha;            /* Adam(W); RMSprop */
    int nesterov, amsgrad, centered, maximize;
    cg_tensor *dstep;           /* float32 [n]: the step counts on the
                                 * device while a grad scaler steps this
                                 * optimizer (lib/optim/amp.c), else NULL */
};

/* Takes a reference to the optimizer (a schedule holds one). */
cg_optimizer *cg__optim_ref(cg_optimizer *opt);

/* Checks every present gradient: contiguous, the parameter's dtype and
 * shape. */
int cg__optim_check_grads(const cg_optimizer *opt);

/* One update of every parameter with a gradient under a grad scaler whose
 * state is `amp` (kernels/optim.cl): mode 1 unscales in the kernel, 2
 * takes gradients already unscaled; nothing changes when found_inf is
 * set.  Moves the step counts to the device (opt->dstep) first. */
int cg__optim_step_amp(cg_optimizer *opt, cl_mem amp, int mode);

/* Reads the device step counts back into the parameters' (one wait) and
 * drops opt->dstep; nothing when there is none. */
int cg__optim_sync_steps(cg_optimizer *opt);

#endif
