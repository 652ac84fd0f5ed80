/* SPDX-License-Identifier: MIT */
/*
 * tools/train_dp.c - clgrad-train's data parallelism: replicas on the
 * devices --devices lists (one process), or one per rank under mpirun,
 * through the library's cg_dp.
 *
 * The main thread draws each global batch as one device would (on
 * replica 0's context, read to the host: the data sets keep their epoch's
 * order and are not shared between threads) and cg_dp_step gives every
 * replica its share: the MLP's and CNN's rows [n r / W, n (r + 1) / W),
 * the character LSTM's streams [B r / W, B (r + 1) / W), whose recurrent
 * state each replica carries.  A replica's loss is weighted so that the
 * averaged gradient is the whole batch's mean.  Replica 0 is the run's
 * own model (r->ctx, r->model, r->opt, r->scaler, r->h and r->c): it
 * evaluates, samples and saves; the schedule steps in the main thread
 * and its rate is copied to the other replicas.  Under mpirun only rank
 * 0 prints, logs and writes files.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_run.h"

/* Replica `rank` of this process. */
static tr_replica *
replica_of(run *r, int rank)
{
    return &r->rep[rank - cg_dp_rank(r->dp)];
}

static void
replica_free(tr_replica *p)
{
    cg_tensor_free(p->hh);
    cg_tensor_free(p->cc);
    cg_tensor_free(p->loss);
    cg_grad_scaler_free(p->scaler);
    cg_optim_free(p->opt);
    cg_module_free(p->model);
    cg_context_free(p->ctx);
    memset(p, 0, sizeof *p);
}

void
tr_dp_free(run *r)
{
    int i;

    cg_dp_free(r->dp);
    r->dp = NULL;
    cg_tensor_free(r->rep[0].loss);
    for (i = 1; i < r->nrep; i++)
        replica_free(&r->rep[i]);
    free(r->bx);
    free(r->by);
    r->bx = NULL;
    r->by = NULL;
}

/* The selectors of --devices, split at commas into sel[] (at most
 * TR_MAX_DEVICES); returns how many, or -1 after a message. */
static int
split_devices(const char *list, char sel[][32])
{
    const char *p = list;
    int n = 0;

    while (*p) {
        size_t len = strcspn(p, ",");

        if (len == 0 || len >= 32 || n == TR_MAX_DEVICES) {
            tr_fail("--devices %s: give up to %d device selectors "
                    "separated by commas (see clgrad-info --list)", list,
                    TR_MAX_DEVICES);
            return -1;
        }
        memcpy(sel[n], p, len);
        sel[n++][len] = '\0';
        p += len;
        if (*p == ',')
            p++;
    }
    if (n == 0)
        tr_fail("--devices is empty");
    return n ? n : -1;
}

/* Under mpirun (Open MPI's environment): the world size, else 1. */
int
tr_mpi_world(void)
{
    const char *s = getenv("OMPI_COMM_WORLD_SIZE");

    return s && atoi(s) > 0 ? atoi(s) : 1;
}

/* The device replica 0 runs on, into *sel (NULL: the default): --devices'
 * first, or under mpirun the local rank's (modulo the devices), unless
 * --device or CLGRAD_DEVICE says.  0, or -1 after a message. */
int
tr_dp_first_device(const tr_config *cfg, char buf[32], const char **sel)
{
    char list[TR_MAX_DEVICES][32];
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    int count = 0;

    *sel = cfg->device;
    if (cfg->devices) {
        if (split_devices(cfg->devices, list) < 0)
            return -1;
        snprintf(buf, 32, "%s", list[0]);
        *sel = buf;
    } else if (tr_mpi_world() > 1 && local && !cfg->device &&
               !getenv("CLGRAD_DEVICE") && cg_device_count(&count) == CG_OK &&
               count > 0) {
        snprintf(buf, 32, "%d", atoi(local) % count);
        *sel = buf;
    }
    return 0;
}

static int split_state(run *r);

/* Builds a model like replica 0's on ctx. */
static cg_module *
model_like(run *r, cg_context *ctx)
{
    switch (r->cfg.model) {
    case TR_CNN:
        return tr_cnn_new(ctx, &r->cfg, r->features, r->classes);
    case TR_MLP:
        return tr_mlp_new(ctx, &r->cfg, r->features, r->classes);
    default:
        return tr_lstm_new(ctx, &r->cfg, r->nvocab);
    }
}

int
tr_dp_setup(run *r)
{
    char sel[TR_MAX_DEVICES][32];
    cg_module *models[TR_MAX_DEVICES];
    cg_optimizer *opts[TR_MAX_DEVICES];
    cg_dp_options dopt;
    int i, n = 1, world = tr_mpi_world();

    if (!r->cfg.devices && world == 1)
        return 0;
    if (r->cfg.devices && world > 1) {
        tr_fail("--devices and mpirun together: under mpirun each rank "
                "drives one device");
        return -1;
    }
    if (r->cfg.devices && (n = split_devices(r->cfg.devices, sel)) < 0)
        return -1;
    if (world > 1)
        n = 1;
    r->nrep = n;
    r->rep[0].ctx = r->ctx;
    r->rep[0].model = r->model;
    r->rep[0].opt = r->opt;
    r->rep[0].scaler = r->scaler;
    r->rep[0].h = &r->h;
    r->rep[0].c = &r->c;
    models[0] = r->model;
    opts[0] = r->opt;
    for (i = 1; i < n; i++) {
        tr_replica *p = &r->rep[i];
        cg_context_options o = { sel[i], r->cfg.profile, 0 };

        p->h = &p->hh;
        p->c = &p->cc;
        if (!(p->ctx = cg_context_new_with(&o)) ||
            cg_manual_seed(p->ctx, (uint64_t)r->cfg.seed) != CG_OK ||
            !(p->model = model_like(r, p->ctx)) ||
            (p->nparams = cg_module_params(p->model, p->params,
                                           TR_MAX_PARAMS)) !=
            r->nparams ||
            !(p->opt = tr_make_optimizer(p->ctx, &r->cfg, p->params,
                                         p->nparams))) {
            tr_fail("--devices: replica %d on device %s: %s", i, sel[i],
                    cg_last_error());
            return -1;
        }
        if (r->scaler) {
            cg_grad_scaler_options so = { r->cfg.loss_scale, 0, 0, 0 };

            if (!(p->scaler = cg_grad_scaler_new(p->ctx, &so))) {
                tr_fail("%s", cg_last_error());
                return -1;
            }
        }
        /* The schedule's rate, set by replica 0's schedule each step. */
        cg_optim_set_lr(p->opt, cg_optim_get_lr(r->opt));
        models[i] = p->model;
        opts[i] = p->opt;
    }
    dopt.bucket_mb = r->cfg.bucket_mb;
    dopt.first_bucket_mb = r->cfg.first_bucket_mb;
    r->dp = world > 1 ? cg_dp_new_mpi(r->model, r->opt, &dopt)
                      : cg_dp_new(n, models, opts, &dopt);
    if (!r->dp) {
        tr_fail("data parallelism: %s", cg_last_error());
        return -1;
    }
    r->world = cg_dp_world_size(r->dp);
    r->rank = cg_dp_rank(r->dp);
    if (r->cfg.batch % r->world != 0) {
        tr_fail("%s %lld does not split evenly over %d replicas: give a "
                "multiple of %d", r->given_batch >= 0 ? "--batch"
                : "the batch", (long long)r->cfg.batch, r->world, r->world);
        return -1;
    }
    return split_state(r);
}

/* ------------------------------------------------------------------------
 * The losses, from each replica's thread
 * ------------------------------------------------------------------------ */

/* The loss replica p returns for backward: with fp16's scaler the scaled
 * loss; the loss itself is kept in p->loss for the log. */
static int
hand_over(tr_replica *p, cg_tensor *loss, cg_tensor **out)
{
    if (!loss)
        return CG_EINVAL;
    cg_tensor_free(p->loss);
    p->loss = loss;
    *out = p->scaler ? cg_grad_scaler_scale(p->scaler, loss)
                     : cg_tensor_ref(loss);
    return *out ? CG_OK : CG_EINVAL;
}

/* The MLP's and CNN's: rows [n rank / W, n (rank + 1) / W) of the batch,
 * the summed cross-entropy times W / n (the averaged gradient is then the
 * whole batch's mean). */
static int
rows_loss(void *user, int rank, cg_module *m, cg_tensor **out)
{
    run *r = user;
    tr_replica *p = replica_of(r, rank);
    int64_t n = r->bn, lo = n * rank / r->world, hi = n * (rank + 1) /
                r->world;
    int64_t xs[2] = { hi - lo, r->features }, ys[1] = { hi - lo };
    cg_tensor *x, *y, *logits = NULL, *sum = NULL, *loss = NULL;

    x = cg_tensor_from_host(p->ctx, CG_F32, 2, xs, r->bx + lo * r->features);
    y = cg_tensor_from_host(p->ctx, CG_I32, 1, ys, r->by + lo);
    if (x && y && (r->cfg.precision == CG_F32 ||
                   cg_autocast_begin(p->ctx, (cg_dtype)r->cfg.precision) ==
                   CG_OK)) {
        logits = tr_forward_model(&r->cfg, m, x);
        sum = logits ? cg_cross_entropy(logits, y, CG_REDUCTION_SUM,
                                        CG_IGNORE_INDEX, 0.0f) : NULL;
        if (r->cfg.precision != CG_F32)
            cg_autocast_end(p->ctx);
        loss = sum ? cg_mul_scalar(sum, (float)r->world / (float)n) : NULL;
    }
    cg_tensor_free(x);
    cg_tensor_free(y);
    cg_tensor_free(logits);
    cg_tensor_free(sum);
    return hand_over(p, loss, out);
}

/* The character LSTM's: streams [B rank / W, B (rank + 1) / W) of the
 * batch, their state carried in the replica. */
static int
streams_loss(void *user, int rank, cg_module *m, cg_tensor **out)
{
    run *r = user;
    tr_replica *p = replica_of(r, rank);
    int64_t B = r->cfg.batch, bs = B / r->world, b0 = bs * rank, t, b;
    int64_t shape[2] = { r->bn, bs }, flat_n = r->bn * bs;
    int *ids = malloc((size_t)(2 * flat_n) * sizeof *ids), *tgs = ids + flat_n;
    cg_tensor *in = NULL, *tg = NULL, *logits = NULL, *loss = NULL;

    if (!ids)
        return CG_EHOSTMEM;
    for (t = 0; t < r->bn; t++)
        for (b = 0; b < bs; b++) {
            ids[t * bs + b] = r->by[t * B + b0 + b];
            tgs[t * bs + b] = r->by[(r->bn + t) * B + b0 + b];
        }
    in = cg_tensor_from_host(p->ctx, CG_I32, 2, shape, ids);
    tg = cg_tensor_from_host(p->ctx, CG_I32, 1, &flat_n, tgs);
    free(ids);
    if (in && tg && (r->cfg.precision == CG_F32 ||
                     cg_autocast_begin(p->ctx, (cg_dtype)r->cfg.precision) ==
                     CG_OK)) {
        logits = tr_lstm_forward(m, in, p->h, p->c, 1);
        loss = logits ? cg_cross_entropy(logits, tg, CG_REDUCTION_MEAN,
                                         CG_IGNORE_INDEX, 0.0f) : NULL;
        if (r->cfg.precision != CG_F32)
            cg_autocast_end(p->ctx);
    }
    cg_tensor_free(in);
    cg_tensor_free(tg);
    cg_tensor_free(logits);
    return hand_over(p, loss, out);
}

/* After the averaging: clipping, then the scaler's or the optimizer's
 * step. */
static int
replica_update(void *user, int rank, cg_module *m, cg_optimizer *opt)
{
    run *r = user;
    tr_replica *p = replica_of(r, rank);
    cg_tensor *params[TR_MAX_PARAMS];
    int n = cg_module_params(m, params, TR_MAX_PARAMS), st = CG_OK;

    if (r->cfg.clip > 0 &&
        ((p->scaler && (st = cg_grad_scaler_unscale(p->scaler, opt))) ||
         (st = cg_clip_grad_norm(params, n, r->cfg.clip, 2.0, NULL))))
        return st;
    if (p->scaler) {
        if ((st = cg_grad_scaler_step(p->scaler, opt)) == CG_OK)
            st = cg_grad_scaler_update(p->scaler);
        return st;
    }
    return cg_optim_step(opt);
}

/* ------------------------------------------------------------------------
 * A step
 * ------------------------------------------------------------------------ */

/* Reads the batch's tensors (made on replica 0's context) to the host:
 * x [n, features] float32 (NULL for the LSTM) and the int32 ids, whose
 * count is given. */
static int
batch_to_host(run *r, cg_tensor *x, cg_tensor *ids, int64_t nids,
              cg_tensor *ids2)
{
    int64_t nx = x ? cg_tensor_numel(x) : 0;
    float *bx = realloc(r->bx, (size_t)(nx ? nx : 1) * sizeof *bx);
    int *by;

    if (bx)
        r->bx = bx;
    by = realloc(r->by, (size_t)(ids2 ? 2 * nids : nids) * sizeof *by);
    if (by)
        r->by = by;
    if (!bx || !by) {
        tr_fail("out of host memory for a batch");
        return -1;
    }
    if ((x && cg_tensor_to_host(x, r->bx, (size_t)nx * sizeof *r->bx)) ||
        cg_tensor_to_host(ids, r->by, (size_t)nids * sizeof *r->by) ||
        (ids2 && cg_tensor_to_host(ids2, r->by + nids,
                                   (size_t)nids * sizeof *r->by))) {
        tr_fail("%s", cg_last_error());
        return -1;
    }
    return 0;
}

/* One data-parallel step on the batch (MLP/CNN: x and y; LSTM: ids and
 * targets [n, B]): every replica's share, the averaging, the updates and
 * the schedule.  *value: the whole batch's loss.  0, or -1 after a
 * message. */
int
tr_dp_step(run *r, cg_tensor *x, cg_tensor *y, int64_t n, float *value)
{
    int lstm = r->cfg.model == TR_CHAR_LSTM, i, st;
    float local[TR_MAX_DEVICES];
    double mean;

    r->bn = n;
    if (batch_to_host(r, lstm ? NULL : x, lstm ? x : y,
                      lstm ? n * r->cfg.batch : n, lstm ? y : NULL))
        return -1;
    if (!lstm && n < r->world) {
        tr_fail("step %lld: the batch's %lld rows cannot be shared by %d "
                "replicas", (long long)r->step + 1, (long long)n, r->world);
        return -1;
    }
    st = cg_dp_step(r->dp, lstm ? streams_loss : rows_loss, replica_update,
                    r, NULL);
    for (i = 0; st == CG_OK && i < r->nrep; i++)
        st = cg_tensor_item(r->rep[i].loss, &local[i]);
    /* The losses are weighted so that their world mean is the whole
     * batch's. */
    if (st == CG_OK)
        st = cg_dp_mean(r->dp, local, &mean);
    if (st != CG_OK) {
        tr_fail("step %lld: %s", (long long)r->step + 1, cg_last_error());
        return -1;
    }
    *value = (float)mean;
    {
        cg_dp_stats ds;

        if (cg_dp_get_stats(r->dp, &ds) == CG_OK) {
            r->dp_steps++;
            r->dp_reduce_s += ds.reduce_s;
            r->dp_exposed_s += ds.exposed_s;
        }
    }
    /* The schedule steps replica 0's optimizer; the others follow. */
    if (r->sched && cg_lr_schedule_step(r->sched)) {
        tr_fail("step %lld: %s", (long long)r->step + 1, cg_last_error());
        return -1;
    }
    for (i = 1; i < r->nrep; i++)
        cg_optim_set_lr(r->rep[i].opt, cg_optim_get_lr(r->opt));
    return 0;
}

/* A new pass over the text: every replica's state starts at zero. */
void
tr_dp_reset_state(run *r)
{
    int i;

    for (i = 1; i < r->nrep; i++) {
        cg_tensor_free(r->rep[i].hh);
        cg_tensor_free(r->rep[i].cc);
        r->rep[i].hh = r->rep[i].cc = NULL;
    }
}

/* ------------------------------------------------------------------------
 * The character LSTM's carried state in checkpoints: the whole batch's,
 * [layers, B, H], as one device's run saves it
 * ------------------------------------------------------------------------ */

/* One state (h or c) of every replica of the world, each [L, B / W, H],
 * gathered into the whole [L, B, H] on replica 0's context (*out, new;
 * NULL when replica 0 has none yet).  Collective: every rank calls it. */
static int
gather_state(run *r, int which, cg_tensor **out)
{
    int64_t shape[3], L, bs, H, B = r->cfg.batch, l, w, b;
    size_t per;
    float *local = NULL, *all = NULL, *full = NULL;
    int i, st = CG_OK, have = *r->rep[0].h != NULL;

    *out = NULL;
    if (!have)              /* no step yet: the same on every replica */
        return 0;
    cg_tensor_shape(which ? *r->rep[0].c : *r->rep[0].h, shape);
    L = shape[0];
    bs = shape[1];
    H = shape[2];
    per = (size_t)(L * bs * H);
    local = malloc(per * (size_t)r->nrep * sizeof *local);
    all = malloc(per * (size_t)r->world * sizeof *all);
    full = malloc(per * (size_t)r->world * sizeof *full);
    if (!local || !all || !full)
        st = CG_EHOSTMEM;
    for (i = 0; st == CG_OK && i < r->nrep; i++)
        st = cg_tensor_to_host(which ? *r->rep[i].c : *r->rep[i].h,
                               local + per * (size_t)i, per * sizeof *local);
    if (st == CG_OK)
        st = cg_dp_gather(r->dp, local, per, all);
    if (st == CG_OK) {
        for (w = 0; w < r->world; w++)
            for (l = 0; l < L; l++)
                for (b = 0; b < bs; b++)
                    memcpy(full + ((size_t)l * B + (size_t)(w * bs + b)) * H,
                           all + (size_t)w * per + ((size_t)l * bs + b) * H,
                           (size_t)H * sizeof *full);
        shape[1] = B;
        if (!(*out = cg_tensor_from_host(r->ctx, CG_F32, 3, shape, full)))
            st = CG_EINVAL;
    }
    free(local);
    free(all);
    free(full);
    if (st != CG_OK) {
        tr_fail("gathering the LSTM state: %s", st == CG_EHOSTMEM
                ? "out of host memory" : cg_last_error());
        return -1;
    }
    return 0;
}

int
tr_dp_state(run *r, cg_tensor **h, cg_tensor **c)
{
    *h = *c = NULL;
    if (gather_state(r, 0, h) || gather_state(r, 1, c)) {
        cg_tensor_free(*h);
        *h = NULL;
        return -1;
    }
    return 0;
}

/* A resumed run's whole-batch state (r->h, r->c [L, B, H] on replica 0's
 * context) shared out: each replica keeps its streams'. */
static int
split_state(run *r)
{
    cg_tensor **st[2] = { &r->h, &r->c };
    int k, i;

    if (!r->h || !r->c)
        return 0;
    for (k = 0; k < 2; k++) {
        cg_tensor *whole = *st[k];
        int64_t shape[3], bs;
        float *host, *part;
        size_t n;

        cg_tensor_shape(whole, shape);
        if (shape[1] != r->cfg.batch) {
            tr_fail("the resumed LSTM state holds %lld streams, not --batch "
                    "%lld", (long long)shape[1], (long long)r->cfg.batch);
            return -1;
        }
        bs = shape[1] / r->world;
        n = (size_t)(shape[0] * shape[1] * shape[2]);
        host = malloc(n * sizeof *host);
        part = malloc(n * sizeof *part);
        if (!host || !part ||
            cg_tensor_to_host(whole, host, n * sizeof *host)) {
            free(host);
            free(part);
            tr_fail("sharing out the LSTM state: %s", cg_last_error());
            return -1;
        }
        for (i = r->nrep - 1; i >= 0; i--) {
            int64_t b0 = (r->rank + i) * bs, l, ps[3] = { shape[0], bs,
                                                          shape[2] };
            cg_tensor *t, **dst = k ? r->rep[i].c : r->rep[i].h;

            for (l = 0; l < shape[0]; l++)
                memcpy(part + (size_t)(l * bs * shape[2]),
                       host + (size_t)((l * shape[1] + b0) * shape[2]),
                       (size_t)(bs * shape[2]) * sizeof *part);
            t = cg_tensor_from_host(r->rep[i].ctx, CG_F32, 3, ps, part);
            if (!t) {
                free(host);
                free(part);
                tr_fail("sharing out the LSTM state: %s", cg_last_error());
                return -1;
            }
            cg_tensor_free(*dst);       /* replica 0's: the whole one */
            *dst = t;
        }
        free(host);
        free(part);
    }
    return 0;
}

/* The summary's line: what the replicas communicated. */
void
tr_dp_report(const run *r)
{
    cg_dp_stats ds;

    if (!r->dp || r->cfg.quiet || cg_dp_get_stats(r->dp, &ds) != CG_OK ||
        r->dp_steps == 0)
        return;
    printf("data parallel: %d replicas, %d gradient bucket%s of %.2f MB in "
           "all per step; reducing took %.2f ms per step, %.0f%% of it "
           "hidden under backward\n", ds.world_size, ds.buckets,
           ds.buckets == 1 ? "" : "s", ds.bytes / 1e6,
           1e3 * r->dp_reduce_s / (double)r->dp_steps,
           r->dp_reduce_s > 0 ? 100 * (1 - r->dp_exposed_s / r->dp_reduce_s)
                              : 0.0);
    printf("data parallel: buckets of up to %g MiB, the first %g MiB (%s)\n",
           ds.bucket_mb, ds.first_bucket_mb, ds.bucket_origin);
}
