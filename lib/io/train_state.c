/* SPDX-License-Identifier: MIT */
/*
 * lib/io/train_state.c - what a checkpoint holds besides the model to
 * resume a training run: the optimizer's state and the training position.
 * The names are the ones clgrad-train has always written ("optim.exp_avg.3"
 * tensors, "optim.step.3" and "train.step" metadata), so that its older
 * checkpoints load.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/internal.h"
#include "optim/internal.h"

#define DEFAULT_PREFIX "optim."

/* prefix + name (+ "." + index if index >= 0) into buf, or CG_EINVAL if
 * it does not fit. */
static int
join(char *buf, size_t size, const char *prefix, const char *name, int index)
{
    int n = index >= 0 ? snprintf(buf, size, "%s%s.%d", prefix, name, index)
                       : snprintf(buf, size, "%s%s", prefix, name);

    if (n < 0 || (size_t)n >= size)
        return cg__error(CG_EINVAL, "optimizer prefix '%.64s...' is too "
                         "long", prefix);
    return CG_OK;
}

static int
check_prefix(const char **prefix)
{
    if (!*prefix)
        *prefix = DEFAULT_PREFIX;
    if (!**prefix)
        return cg__error(CG_EINVAL, "optimizer prefix is empty (NULL means "
                         "\"" DEFAULT_PREFIX "\")");
    if (strlen(*prefix) > CG__CKPT_NAME_MAX - 64)
        return cg__error(CG_EINVAL, "optimizer prefix is longer than %d "
                         "bytes", CG__CKPT_NAME_MAX - 64);
    return CG_OK;
}

int
cg_checkpoint_add_optimizer(cg_checkpoint *ck, const char *prefix,
                            const cg_optimizer *opt)
{
    char key[CG__CKPT_NAME_MAX + 1];
    cg_checkpoint *tmp;
    int i, n, rc;

    cg__error_clear();
    if (!ck || !opt)
        return cg__error(CG_EINVAL, "%s is NULL", ck ? "optimizer" :
                         "checkpoint");
    if ((rc = check_prefix(&prefix)) != CG_OK ||
        (rc = cg__optim_sync_steps((cg_optimizer *)opt)) != CG_OK)
        return rc;
    /* Gather into a scratch checkpoint, then add the whole: a failure adds
     * nothing to ck. */
    if (!(tmp = cg_checkpoint_new()))
        return cg__last_status();
    n = cg_optim_state_count(opt);
    for (i = 0; rc == CG_OK && i < n; i++) {
        const char *name;
        cg_tensor *t;

        if ((rc = cg_optim_state_get(opt, i, &name, &t)) == CG_OK &&
            (rc = join(key, sizeof key, prefix, name, -1)) == CG_OK)
            rc = cg_checkpoint_add_tensor(tmp, key, t);
    }
    for (i = 0; rc == CG_OK && i < opt->n; i++)
        if ((rc = join(key, sizeof key, prefix, "step", i)) == CG_OK)
            rc = cg_checkpoint_set_meta_int(tmp, key, opt->params[i].step);
    if (rc == CG_OK)
        rc = cg__ckpt_merge(ck, tmp);
    cg_checkpoint_free(tmp);
    return rc;
}

/* The entry for parameter i's state slot k, checked against the
 * parameter's shape; *e is NULL if the checkpoint has none. */
static int
find_state(const cg_checkpoint *ck, const char *prefix,
           const cg_optimizer *opt, int i, int k, const cg__ckpt_tensor **e)
{
    const cg_tensor *p = opt->params[i].p;
    char key[CG__CKPT_NAME_MAX + 1], a[160], b[160];
    int rc, at, same, d;

    *e = NULL;
    if (!opt->params[i].state[k])      /* a float32 parameter's master */
        return CG_OK;
    if ((rc = join(key, sizeof key, prefix, opt->params[i].names[k], -1)))
        return rc;
    if ((at = cg__ckpt_find(ck, key)) < 0)
        return CG_OK;
    *e = &ck->tensors[at];
    same = (*e)->dtype == CG_F32 && (*e)->ndim == p->ndim;
    for (d = 0; same && d < p->ndim; d++)
        same = (*e)->shape[d] == p->shape[d];
    if (!same)
        return cg__error(CG_EFORMAT, "checkpoint tensor '%s' is %s %s, "
                         "parameter %d is F32 %s", key,
                         cg__ckpt_dtype_name((*e)->dtype),
                         cg__shape_str((*e)->ndim, (*e)->shape, a, sizeof a),
                         i, cg__shape_str(p->ndim, p->shape, b, sizeof b));
    return CG_OK;
}

static const char *
kind_label(const cg_optimizer *opt)
{
    switch (opt->kind) {
    case CG__SGD:
        return "SGD";
    case CG__ADAM:
        return "Adam";
    case CG__ADAMW:
        return "AdamW";
    default:
        return "RMSprop";
    }
}

/* Every check of a restore: no tensor under the prefix this optimizer
 * does not know, the step counts (into steps), each state tensor's shape,
 * and no state missing for a parameter that has stepped. */
static int
check_restore(const cg_checkpoint *ck, const char *prefix,
              const cg_optimizer *opt, int64_t *steps)
{
    char key[CG__CKPT_NAME_MAX + 1];
    size_t plen = strlen(prefix);
    int i, j, k, rc;

    for (i = 0; i < ck->ntensors; i++) {
        const char *name = ck->tensors[i].name;
        int match = 0;

        if (strncmp(name, prefix, plen) != 0)
            continue;
        for (j = 0; !match && j < opt->n; j++)
            for (k = 0; !match && k < opt->nkinds; k++)
                match = opt->params[j].names[k] &&
                        strcmp(name + plen, opt->params[j].names[k]) == 0;
        if (!match)
            return cg__error(CG_EFORMAT, "checkpoint tensor '%s' is no state "
                             "of this optimizer (%s, %d parameters)", name,
                             kind_label(opt), opt->n);
    }
    for (i = 0; i < opt->n; i++) {
        if ((rc = join(key, sizeof key, prefix, "step", i)) ||
            (rc = cg_checkpoint_get_meta_int(ck, key, &steps[i])))
            return rc;
        if (steps[i] < 0)
            return cg__error(CG_EFORMAT, "metadata '%s' = %" PRId64 " is "
                             "negative", key, steps[i]);
        for (k = 0; k < opt->nkinds; k++) {
            const cg__ckpt_tensor *e;

            if ((rc = find_state(ck, prefix, opt, i, k, &e)))
                return rc;
            if (!e && steps[i] > 0 && opt->params[i].state[k])
                return cg__error(CG_EFORMAT, "the checkpoint has no tensor "
                                 "'%s%s' (parameter %d has taken %" PRId64
                                 " steps)", prefix, opt->params[i].names[k],
                                 i, steps[i]);
        }
    }
    return CG_OK;
}

int
cg_checkpoint_restore_optimizer(const cg_checkpoint *ck, const char *prefix,
                                cg_optimizer *opt)
{
    int64_t *steps;
    int i, k, rc;

    cg__error_clear();
    if (!ck || !opt)
        return cg__error(CG_EINVAL, "%s is NULL", ck ? "optimizer" :
                         "checkpoint");
    if ((rc = check_prefix(&prefix)) != CG_OK ||
        (rc = cg__optim_sync_steps(opt)) != CG_OK)
        return rc;
    if (!(steps = cg__malloc((size_t)opt->n * sizeof *steps)))
        return cg__last_status();
    if ((rc = check_restore(ck, prefix, opt, steps)) != CG_OK)
        goto done;
    /* Only a device failure can stop what follows part-way. */
    for (i = 0; i < opt->n; i++) {
        for (k = 0; k < opt->nkinds; k++) {
            const cg__ckpt_tensor *e;

            find_state(ck, prefix, opt, i, k, &e);
            if (!e)
                continue;
            if ((rc = cg_tensor_write(opt->params[i].state[k], e->data,
                                      e->bytes)) != CG_OK)
                goto done;
            opt->params[i].present[k] = 1;
        }
        opt->params[i].step = steps[i];
    }
done:
    free(steps);
    return rc;
}

/* ------------------------------------------------------------ position */

static const char *const position_keys[5] = {
    "train.total", "train.step", "train.epoch", "train.index",
    "train.schedule"
};

static void
position_fields(const cg_train_position *pos, const int64_t **f)
{
    f[0] = &pos->total;
    f[1] = &pos->step;
    f[2] = &pos->epoch;
    f[3] = &pos->index;
    f[4] = &pos->schedule;
}

int
cg_checkpoint_add_position(cg_checkpoint *ck, const cg_train_position *pos)
{
    const int64_t *f[5];
    cg_checkpoint *tmp;
    int i, rc;

    cg__error_clear();
    if (!ck || !pos)
        return cg__error(CG_EINVAL, "%s is NULL", ck ? "position" :
                         "checkpoint");
    position_fields(pos, f);
    for (i = 0; i < 5; i++)
        if (*f[i] < 0)
            return cg__error(CG_EINVAL, "position: %s = %" PRId64 " is "
                             "negative", position_keys[i] + 6, *f[i]);
    if (!(tmp = cg_checkpoint_new()))
        return cg__last_status();
    for (i = 0, rc = CG_OK; rc == CG_OK && i < 5; i++)
        rc = cg_checkpoint_set_meta_int(tmp, position_keys[i], *f[i]);
    if (rc == CG_OK)
        rc = cg__ckpt_merge(ck, tmp);
    cg_checkpoint_free(tmp);
    return rc;
}

int
cg_checkpoint_get_position(const cg_checkpoint *ck, cg_train_position *pos)
{
    int64_t v[5] = { 0, 0, 0, 0, 0 };
    int i, rc;

    cg__error_clear();
    if (!ck || !pos)
        return cg__error(CG_EINVAL, "%s is NULL", ck ? "position" :
                         "checkpoint");
    for (i = 0; i < 5; i++) {
        int optional = i == 0 || i == 4;

        if (optional && !cg_checkpoint_get_meta(ck, position_keys[i]))
            continue;
        if ((rc = cg_checkpoint_get_meta_int(ck, position_keys[i], &v[i])))
            return rc;
        if (v[i] < 0)
            return cg__error(CG_EFORMAT, "metadata '%s' = %" PRId64 " is "
                             "negative", position_keys[i], v[i]);
    }
    cg__error_clear();
    pos->total = v[0];
    pos->step = v[1];
    pos->epoch = v[2];
    pos->index = v[3];
    pos->schedule = v[4];
    return CG_OK;
}
