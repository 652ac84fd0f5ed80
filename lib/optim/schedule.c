/* SPDX-License-Identifier: MIT */
/*
 * lib/optim/schedule.c - learning-rate schedules: step, exponential, and
 * cosine annealing with a linear warm-up.  Each lr is a closed form of the
 * position, so setting the position (resuming) gives exactly the lr a run
 * that stepped there would have.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>

#include "optim/internal.h"

typedef enum { SCHED_STEP, SCHED_EXPONENTIAL, SCHED_COSINE } sched_kind;

struct cg_lr_schedule {
    cg_optimizer *opt;          /* a reference */
    sched_kind kind;
    double base_lr;
    int64_t t;
    int64_t step_size;          /* step */
    double gamma;               /* step, exponential */
    int64_t warmup, total;      /* cosine */
    double start_factor, eta_min;
};

static double
lr_at(const cg_lr_schedule *s, int64_t t)
{
    const double pi = 3.14159265358979323846;

    switch (s->kind) {
    case SCHED_STEP:
        return s->base_lr * pow(s->gamma, (double)(t / s->step_size));
    case SCHED_EXPONENTIAL:
        return s->base_lr * pow(s->gamma, (double)t);
    default:
        if (t < s->warmup)
            return s->base_lr * (s->start_factor + (1 - s->start_factor) *
                                 (double)t / (double)s->warmup);
        return s->eta_min + (s->base_lr - s->eta_min) *
               (1 + cos(pi * (double)(t - s->warmup) /
                        (double)(s->total - s->warmup))) / 2;
    }
}

/* Sets the optimizer's lr for position t; a value the optimizer refuses
 * (gamma^t overflowing to infinity) leaves everything as it was. */
static int
apply(cg_lr_schedule *s, int64_t t)
{
    int status = cg_optim_set_lr(s->opt, lr_at(s, t));

    if (status == CG_OK)
        s->t = t;
    return status;
}

static cg_lr_schedule *
sched_new(cg_optimizer *opt, const cg_lr_schedule *proto)
{
    cg_lr_schedule *s;

    if (!(s = cg__malloc(sizeof *s)))
        return NULL;
    *s = *proto;
    s->opt = opt;
    s->base_lr = opt->lr;
    if (apply(s, 0)) {
        free(s);
        return NULL;
    }
    cg__optim_ref(opt);
    return s;
}

static int
check_gamma(const char *fn, cg_optimizer *opt, double gamma)
{
    if (!opt)
        return cg__error(CG_EINVAL, "%s: opt is NULL", fn);
    if (!isfinite(gamma) || gamma <= 0)
        return cg__error(CG_EINVAL, "%s: gamma = %g (must be finite and "
                         "> 0)", fn, gamma);
    return CG_OK;
}

cg_lr_schedule *
cg_lr_schedule_step_new(cg_optimizer *opt, int64_t step_size, double gamma)
{
    cg_lr_schedule proto = { 0 };

    cg__error_clear();
    if (check_gamma("step schedule", opt, gamma))
        return NULL;
    if (step_size < 1) {
        cg__error(CG_EINVAL, "step schedule: step_size = %lld (must be "
                  ">= 1)", (long long)step_size);
        return NULL;
    }
    proto.kind = SCHED_STEP;
    proto.step_size = step_size;
    proto.gamma = gamma;
    return sched_new(opt, &proto);
}

cg_lr_schedule *
cg_lr_schedule_exponential_new(cg_optimizer *opt, double gamma)
{
    cg_lr_schedule proto = { 0 };

    cg__error_clear();
    if (check_gamma("exponential schedule", opt, gamma))
        return NULL;
    proto.kind = SCHED_EXPONENTIAL;
    proto.gamma = gamma;
    return sched_new(opt, &proto);
}

cg_lr_schedule *
cg_lr_schedule_cosine_new(cg_optimizer *opt, int64_t warmup_steps,
                          double warmup_start_factor, int64_t total_steps,
                          double eta_min)
{
    cg_lr_schedule proto = { 0 };

    cg__error_clear();
    if (!opt) {
        cg__error(CG_EINVAL, "cosine schedule: opt is NULL");
        return NULL;
    }
    if (warmup_steps < 0 || total_steps <= warmup_steps) {
        cg__error(CG_EINVAL, "cosine schedule: warmup_steps = %lld, "
                  "total_steps = %lld (need 0 <= warmup_steps < "
                  "total_steps)", (long long)warmup_steps,
                  (long long)total_steps);
        return NULL;
    }
    if (!(warmup_start_factor >= 0 && warmup_start_factor <= 1) ||
        !(isfinite(eta_min) && eta_min >= 0)) {
        cg__error(CG_EINVAL, "cosine schedule: warmup_start_factor = %g "
                  "(must be in [0, 1]), eta_min = %g (must be finite and "
                  ">= 0)", warmup_start_factor, eta_min);
        return NULL;
    }
    proto.kind = SCHED_COSINE;
    proto.warmup = warmup_steps;
    proto.start_factor = warmup_start_factor;
    proto.total = total_steps;
    proto.eta_min = eta_min;
    return sched_new(opt, &proto);
}

int
cg_lr_schedule_step(cg_lr_schedule *sched)
{
    cg__error_clear();
    if (!sched)
        return cg__error(CG_EINVAL, "schedule step: sched is NULL");
    if (sched->t == INT64_MAX)
        return cg__error(CG_EINVAL, "schedule step: the position is at its "
                         "maximum");
    return apply(sched, sched->t + 1);
}

int64_t
cg_lr_schedule_get_position(const cg_lr_schedule *sched)
{
    return sched ? sched->t : -1;
}

int
cg_lr_schedule_set_position(cg_lr_schedule *sched, int64_t position)
{
    cg__error_clear();
    if (!sched)
        return cg__error(CG_EINVAL, "set_position: sched is NULL");
    if (position < 0)
        return cg__error(CG_EINVAL, "set_position: position %lld < 0",
                         (long long)position);
    return apply(sched, position);
}

double
cg_lr_schedule_base_lr(const cg_lr_schedule *sched)
{
    return sched ? sched->base_lr : -1;
}

void
cg_lr_schedule_free(cg_lr_schedule *sched)
{
    if (!sched)
        return;
    cg_optim_free(sched->opt);
    free(sched);
}
