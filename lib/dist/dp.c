/* SPDX-License-Identifier: MIT */
/*
 * lib/dist/dp.c - data parallelism: replicas of a model, one per device,
 * whose gradients are averaged in buckets while backward goes on.
 *
 * A step runs one host thread per local replica and one communication
 * thread.  A replica's thread runs its loss function and backward; the
 * context's leaf-gradient hook (cg__set_grad_ready) tells it when a
 * parameter's gradient is complete, and when all of a bucket's are it
 * queues their reads into the replica's staging memory (on its in-order
 * queue, so they run right after the kernels that made them, while the
 * kernels of the earlier layers run after) and hands the bucket to the
 * communication thread.  That thread takes the buckets in a fixed order;
 * for each it waits for every local replica's reads, sums them (replica
 * 0 first, then 1, ...; across processes with MPI), scales by 1 / world
 * size and queues the writes of the averages back into every replica's
 * gradients.  The replica threads wait until every bucket is written back
 * and then step their optimizers, whose launches their queues run after
 * the writes.
 *
 * The OpenCL calls of the communication thread are reads, writes and
 * waits on the queues, which OpenCL allows from any thread; everything
 * else of a context is used by its replica's thread alone.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dist/internal.h"
#include "tune/internal.h"

double
cg__dp_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ------------------------------------------------------------------------
 * Set-up
 * ------------------------------------------------------------------------ */

static void
dp_release(cg_dp *dp)
{
    int r, b;

    if (!dp)
        return;
    for (r = 0; r < dp->nlocal; r++) {
        cg__replica *rep = &dp->rep[r];

        if (rep->ctx)
            cg__set_grad_ready(rep->ctx, NULL, NULL);
        if (rep->read)
            for (b = 0; b < dp->nbuckets; b++)
                if (rep->read[b])
                    clReleaseEvent(rep->read[b]);
        free(rep->read);
        free(rep->left);
        free(rep->host);
        free(rep->params);
    }
    if (dp->mpi)
        cg__mpi_close(dp);
    pthread_mutex_destroy(&dp->lock);
    pthread_cond_destroy(&dp->cond);
    free(dp->order);
    free(dp->bucket_of);
    free(dp->offset);
    free(dp->numel);
    free(dp->buckets);
    free(dp->sum);
    free(dp->ready);
    free(dp->bucket_t0);
    free(dp->bucket_t1);
    free(dp);
}

/* Checks one replica and takes its parameters. */
static int
take_replica(cg_dp *dp, int r, cg_module *m, cg_optimizer *opt)
{
    cg__replica *rep = &dp->rep[r];
    int n, i;

    if (!m || !opt)
        return cg__error(CG_EINVAL, "cg_dp: replica %d has a NULL %s", r,
                         m ? "optimizer" : "module");
    n = cg_module_params(m, NULL, 0);
    if (n < 1)
        return cg__error(CG_EINVAL, "cg_dp: replica %d's module has no "
                         "parameters", r);
    if (!(rep->params = calloc((size_t)n, sizeof *rep->params)))
        return cg__error(CG_EHOSTMEM, "cg_dp: out of host memory");
    cg_module_params(m, rep->params, n);
    if (cg_optim_param_count(opt) != n)
        return cg__error(CG_EINVAL, "cg_dp: replica %d's optimizer has %d "
                         "parameters, its module %d", r,
                         cg_optim_param_count(opt), n);
    rep->dp = dp;
    rep->index = r;
    rep->module = m;
    rep->opt = opt;
    rep->ctx = cg_tensor_context(rep->params[0]);
    for (i = 0; i < n; i++) {
        cg_tensor *p = rep->params[i];
        char a[64];

        if (p->dtype != CG_F32)
            return cg__error(CG_EDTYPE, "cg_dp: parameter %d (%s) of "
                             "replica %d is %s; data parallelism takes "
                             "float32 parameters (for 16-bit products, "
                             "keep them float32 and run forward under "
                             "cg_autocast_begin)", i,
                             cg__shape_str(p->ndim, p->shape, a, sizeof a),
                             r, cg__dtype_name(p->dtype));
        if (p->ctx != rep->ctx)
            return cg__error(CG_ECONTEXT, "cg_dp: replica %d's parameters "
                             "are on more than one context", r);
    }
    for (i = 0; i < r; i++)
        if (dp->rep[i].ctx == rep->ctx)
            return cg__error(CG_ECONTEXT, "cg_dp: replicas %d and %d share "
                             "a context; each needs its own", i, r);
    if (r == 0) {
        dp->nparams = n;
        return CG_OK;
    }
    if (n != dp->nparams)
        return cg__error(CG_ESHAPE, "cg_dp: replica %d has %d parameters, "
                         "replica 0 has %d", r, n, dp->nparams);
    for (i = 0; i < n; i++) {
        const cg_tensor *p = rep->params[i], *q = dp->rep[0].params[i];
        char a[64], b[64];

        if (p->ndim != q->ndim ||
            memcmp(p->shape, q->shape, sizeof(int64_t) * (size_t)p->ndim))
            return cg__error(CG_ESHAPE, "cg_dp: parameter %d is %s on "
                             "replica %d but %s on replica 0", i,
                             cg__shape_str(p->ndim, p->shape, a, sizeof a),
                             r, cg__shape_str(q->ndim, q->shape, b,
                                              sizeof b));
    }
    return CG_OK;
}

/* The bucket sizes: each of options' that is not zero, else the tuning
 * entry "dp" in force on replica 0's context (bucket_kb,
 * first_bucket_kb), else PyTorch's defaults, 25 and 1 MiB; where they
 * came from goes into dp->bucket_origin.  Across processes rank 0's sizes
 * hold on every rank (their buckets must match). */
static int world_ok(cg_dp *dp, int status);

static int
bucket_sizes(cg_dp *dp, const cg_dp_options *o)
{
    const cg_tuning_entry *e = cg__tuning_find(dp->rep[0].ctx, "dp", "any");
    double size[2] = { 25.0, 1.0 }, given[2] = { 0, 0 };
    static const char *const names[2] = { "bucket_kb", "first_bucket_kb" };
    const char *from[2] = { "default", "default" };
    char origin[256];
    int i, status;

    if (o) {
        given[0] = o->bucket_mb;
        given[1] = o->first_bucket_mb;
    }
    for (i = 0, status = CG_OK; i < 2; i++) {
        long kb;

        if (!(given[i] >= 0) || given[i] > 1048576.0) {
            status = cg__error(CG_EINVAL, "cg_dp: options.%s = %g (MiB: 0 "
                               "for the tuning database's or the default, "
                               "else up to 1048576)", i ? "first_bucket_mb"
                               : "bucket_mb", given[i]);
            break;
        }
        if (given[i] > 0) {
            size[i] = given[i];
            from[i] = "cg_dp_options";
        } else if (e && cg__tuning_param(e, names[i], &kb)) {
            size[i] = (double)kb / 1024.0;
            from[i] = "tuning";
        }
    }
    if (strcmp(from[0], from[1]) == 0)
        snprintf(origin, sizeof origin, "%s", from[0]);
    else
        snprintf(origin, sizeof origin, "%s; first bucket %s", from[0],
                 from[1]);
    if (e && (strcmp(from[0], "tuning") == 0 ||
              strcmp(from[1], "tuning") == 0))
        snprintf(origin + strlen(origin), sizeof origin - strlen(origin),
                 " (%.200s)", e->origin);
    snprintf(dp->bucket_origin, sizeof dp->bucket_origin, "%s", origin);
    if (dp->mpi)
        status = world_ok(dp, status);
    if (status != CG_OK)
        return status;
    if (dp->mpi) {
        if ((status = cg__mpi_bcast(dp, size, sizeof size)) != CG_OK ||
            (status = cg__mpi_bcast(dp, dp->bucket_origin,
                                    sizeof dp->bucket_origin)) != CG_OK)
            return status;
        if (dp->rank != 0) {
            snprintf(origin, sizeof origin, "%s", dp->bucket_origin);
            snprintf(dp->bucket_origin, sizeof dp->bucket_origin,
                     "rank 0's: %.230s", origin);
        }
    }
    dp->bucket_mb = size[0];
    dp->first_bucket_mb = size[1];
    return CG_OK;
}

/* Buckets in reverse parameter order: the first up to first_bucket_mb,
 * the rest up to bucket_mb each; a parameter larger than its bucket's
 * size gets a bucket of its own. */
static int
make_buckets(cg_dp *dp)
{
    double mb = dp->bucket_mb;
    size_t limit = (size_t)(dp->first_bucket_mb * 1048576.0);
    int n = dp->nparams, i, b = 0;
    size_t off = 0, in_bucket = 0;

    dp->order = calloc((size_t)n, sizeof *dp->order);
    dp->bucket_of = calloc((size_t)n, sizeof *dp->bucket_of);
    dp->offset = calloc((size_t)n, sizeof *dp->offset);
    dp->numel = calloc((size_t)n, sizeof *dp->numel);
    dp->buckets = calloc((size_t)n, sizeof *dp->buckets);
    if (!dp->order || !dp->bucket_of || !dp->offset || !dp->numel ||
        !dp->buckets)
        return cg__error(CG_EHOSTMEM, "cg_dp: out of host memory");
    for (i = 0; i < n; i++) {
        int p = n - 1 - i;
        size_t bytes;

        dp->order[i] = p;
        dp->numel[p] = cg_tensor_numel(dp->rep[0].params[p]);
        bytes = (size_t)dp->numel[p] * sizeof(float);
        if (in_bucket > 0 && in_bucket + bytes > limit) {
            b++;
            limit = (size_t)(mb * 1048576.0);
            in_bucket = 0;
        }
        if (in_bucket == 0) {
            dp->buckets[b].first = i;
            dp->buckets[b].offset = off;
        }
        dp->buckets[b].count++;
        dp->buckets[b].floats += (size_t)dp->numel[p];
        dp->bucket_of[p] = b;
        dp->offset[p] = off;
        off += (size_t)dp->numel[p];
        in_bucket += bytes;
    }
    dp->nbuckets = b + 1;
    dp->total = off;
    return CG_OK;
}

static int
alloc_staging(cg_dp *dp)
{
    int r, nb = dp->nbuckets;

    dp->ready = calloc((size_t)nb, sizeof *dp->ready);
    dp->bucket_t0 = calloc((size_t)nb, sizeof *dp->bucket_t0);
    dp->bucket_t1 = calloc((size_t)nb, sizeof *dp->bucket_t1);
    if (!dp->ready || !dp->bucket_t0 || !dp->bucket_t1)
        return cg__error(CG_EHOSTMEM, "cg_dp: out of host memory");
    if (dp->nlocal > 1 &&
        !(dp->sum = malloc(dp->total * sizeof *dp->sum)))
        return cg__error(CG_EHOSTMEM, "cg_dp: out of host memory "
                         "(%zu gradient floats)", dp->total);
    for (r = 0; r < dp->nlocal; r++) {
        cg__replica *rep = &dp->rep[r];

        rep->host = malloc(dp->total * sizeof *rep->host);
        rep->left = calloc((size_t)nb, sizeof *rep->left);
        rep->read = calloc((size_t)nb, sizeof *rep->read);
        if (!rep->host || !rep->left || !rep->read)
            return cg__error(CG_EHOSTMEM, "cg_dp: out of host memory "
                             "(%zu gradient floats)", dp->total);
    }
    return CG_OK;
}

/* Across processes: this rank's status if it failed, else a failure if
 * another rank failed. */
static int
world_ok(cg_dp *dp, int status)
{
    int all, st = cg__mpi_agree(dp, status, &all);

    if (st != CG_OK)
        return st;
    if (status == CG_OK && all != CG_OK)
        return cg__error(all, "cg_dp_new_mpi: another rank failed (%s)",
                         cg_status_name(all));
    return status;
}

/* Across processes: every rank's parameters have rank 0's count and
 * shapes, or every rank fails with CG_ESHAPE. */
static int
check_world(cg_dp *dp)
{
    int n = dp->nparams, i, status, all;

    if ((status = cg__mpi_bcast(dp, &n, sizeof n)) != CG_OK)
        return status;
    if (n != dp->nparams)
        status = cg__error(CG_ESHAPE, "cg_dp_new_mpi: rank %d's model has "
                           "%d parameters, rank 0's %d", dp->rank,
                           dp->nparams, n);
    for (i = 0; i < n; i++) {
        const cg_tensor *p = i < dp->nparams ? dp->rep[0].params[i] : NULL;
        int64_t mine[1 + CG_MAX_DIMS] = { 0 }, root[1 + CG_MAX_DIMS];
        int st;

        if (p) {
            mine[0] = p->ndim;
            memcpy(mine + 1, p->shape, sizeof(int64_t) * (size_t)p->ndim);
        }
        memcpy(root, mine, sizeof root);
        if ((st = cg__mpi_bcast(dp, root, sizeof root)) != CG_OK)
            return st;
        if (status == CG_OK && memcmp(root, mine, sizeof root)) {
            char a[64], b[64];

            status = cg__error(CG_ESHAPE, "cg_dp_new_mpi: parameter %d is "
                               "%s on rank %d but %s on rank 0", i,
                               cg__shape_str(p->ndim, p->shape, a, sizeof a),
                               dp->rank, cg__shape_str((int)root[0], root + 1,
                                                       b, sizeof b));
        }
    }
    if ((i = cg__mpi_agree(dp, status, &all)) != CG_OK)
        return i;
    if (status == CG_OK && all != CG_OK)
        status = cg__error(all, "cg_dp_new_mpi: another rank's model "
                           "differs from rank 0's (%s): every rank stops",
                           cg_status_name(all));
    return status;
}

static cg_dp *
dp_create(int n, cg_module *const *replicas, cg_optimizer *const *opts,
          const cg_dp_options *options, int mpi)
{
    cg_dp *dp;
    int r, status = CG_OK;

    if (!(dp = calloc(1, sizeof *dp))) {
        cg__error(CG_EHOSTMEM, "cg_dp: out of host memory");
        return NULL;
    }
    pthread_mutex_init(&dp->lock, NULL);
    pthread_cond_init(&dp->cond, NULL);
    dp->nlocal = n;
    dp->world = n;
    if (mpi)
        status = cg__mpi_open(dp);
    for (r = 0; r < n && status == CG_OK; r++)
        status = take_replica(dp, r, replicas[r], opts[r]);
    /* Across processes, from here on every rank takes every collective
     * step or none: they agree on the status before each. */
    if (dp->mpi && (status = world_ok(dp, status)) == CG_OK)
        status = check_world(dp);
    if (status == CG_OK)
        status = bucket_sizes(dp, options);
    if (dp->mpi)
        status = world_ok(dp, status);
    if (status == CG_OK)
        status = make_buckets(dp);
    if (status == CG_OK)
        status = alloc_staging(dp);
    if (dp->mpi)
        status = world_ok(dp, status);
    if (status == CG_OK)
        status = cg_dp_broadcast(dp);
    if (status != CG_OK) {
        dp_release(dp);
        return NULL;
    }
    return dp;
}

cg_dp *
cg_dp_new(int n, cg_module *const *replicas, cg_optimizer *const *opts,
          const cg_dp_options *options)
{
    cg__error_clear();
    if (n < 1 || n > CG_DP_MAX) {
        cg__error(CG_EINVAL, "cg_dp_new: n = %d replicas (1 to %d)", n,
                  CG_DP_MAX);
        return NULL;
    }
    if (!replicas || !opts) {
        cg__error(CG_EINVAL, "cg_dp_new: replicas or opts is NULL");
        return NULL;
    }
    return dp_create(n, replicas, opts, options, 0);
}

cg_dp *
cg_dp_new_mpi(cg_module *module, cg_optimizer *opt,
              const cg_dp_options *options)
{
    cg__error_clear();
#ifndef HAVE_MPI
    (void)module;
    (void)opt;
    (void)options;
    cg__error(CG_EUNSUPPORTED, "cg_dp_new_mpi: this clgrad was built "
              "without MPI (apt-get install libopenmpi-dev, then "
              "configure --with-mpi)");
    return NULL;
#else
    return dp_create(1, &module, &opt, options, 1);
#endif
}

void
cg_dp_free(cg_dp *dp)
{
    int r;

    if (!dp)
        return;
    for (r = 0; r < dp->nlocal; r++)
        cg_context_finish(dp->rep[r].ctx);
    dp_release(dp);
}

int
cg_dp_world_size(const cg_dp *dp)
{
    return dp ? dp->world : -1;
}

int
cg_dp_rank(const cg_dp *dp)
{
    return dp ? dp->rank : -1;
}

int
cg_dp_local_count(const cg_dp *dp)
{
    return dp ? dp->nlocal : -1;
}

/* ------------------------------------------------------------------------
 * Broadcast: rank 0's parameters, optimizer state and step counts
 * ------------------------------------------------------------------------ */

/* Copies tensor `t` of replica 0 into the float buffer and, across
 * processes, sends it from rank 0. */
static int
bcast_tensor(cg_dp *dp, const cg_tensor *t, float *buf, size_t n)
{
    int status = CG_OK;

    if (dp->rank == 0)
        status = cg_tensor_to_host_f32(t, buf, n);
    if (dp->mpi) {
        int st = status;

        if ((status = cg__mpi_agree(dp, st, NULL)) == CG_OK)
            status = cg__mpi_bcast(dp, buf, n * sizeof *buf);
        else if (st != CG_OK)
            status = st;
    }
    return status;
}

/* The optimizer state of replica 0, by name, onto every other replica
 * (and rank). */
static int
bcast_state(cg_dp *dp, float *buf, size_t cap)
{
    cg__replica *rep0 = &dp->rep[0];
    int count = dp->rank == 0 ? cg_optim_state_count(rep0->opt) : 0;
    int i, r, status = CG_OK;

    if (dp->mpi &&
        (status = cg__mpi_bcast(dp, &count, sizeof count)) != CG_OK)
        return status;
    for (i = 0; i < count && status == CG_OK; i++) {
        char name[128] = { 0 };
        int64_t shape[CG_MAX_DIMS] = { 0 };
        int ndim = 0;
        size_t n;
        cg_tensor *st = NULL;

        if (dp->rank == 0) {
            const char *nm;

            if ((status = cg_optim_state_get(rep0->opt, i, &nm, &st)))
                break;
            snprintf(name, sizeof name, "%s", nm);
            ndim = st->ndim;
            memcpy(shape, st->shape, sizeof shape);
        }
        if (dp->mpi &&
            ((status = cg__mpi_bcast(dp, name, sizeof name)) != CG_OK ||
             (status = cg__mpi_bcast(dp, &ndim, sizeof ndim)) != CG_OK ||
             (status = cg__mpi_bcast(dp, shape, sizeof shape)) != CG_OK))
            break;
        n = (size_t)cg__numel(ndim, shape);
        if (n > cap)
            return cg__error(CG_ESHAPE, "cg_dp: optimizer state '%s' has "
                             "%zu elements, more than any parameter", name,
                             n);
        if ((status = bcast_tensor(dp, st, buf, n)) != CG_OK)
            break;
        for (r = dp->rank == 0 ? 1 : 0; r < dp->nlocal && !status; r++) {
            cg__replica *rep = &dp->rep[r];
            cg_tensor *v = cg_tensor_from_host(rep->ctx, CG_F32, ndim,
                                               shape, buf);

            status = v ? cg_optim_state_set(rep->opt, name, v)
                       : cg__last_status();
            cg_tensor_free(v);
        }
    }
    return status;
}

int
cg_dp_broadcast(cg_dp *dp)
{
    size_t cap = 0;
    float *buf;
    int i, r, status = CG_OK;

    if (!dp)
        return cg__error(CG_EINVAL, "cg_dp_broadcast: dp is NULL");
    for (i = 0; i < dp->nparams; i++) {
        size_t n = (size_t)cg_tensor_numel(dp->rep[0].params[i]);

        cap = n > cap ? n : cap;
    }
    if (!(buf = malloc(cap * sizeof *buf)))
        return cg__error(CG_EHOSTMEM, "cg_dp_broadcast: out of host "
                         "memory");
    for (i = 0; i < dp->nparams && status == CG_OK; i++) {
        size_t n = (size_t)cg_tensor_numel(dp->rep[0].params[i]);
        int64_t step = 0;

        status = bcast_tensor(dp, dp->rep[0].params[i], buf, n);
        for (r = dp->rank == 0 ? 1 : 0; r < dp->nlocal && !status; r++)
            status = cg_tensor_write(dp->rep[r].params[i], buf,
                                     n * sizeof *buf);
        if (status == CG_OK && dp->rank == 0)
            status = cg_optim_get_step(dp->rep[0].opt, i, &step);
        if (status == CG_OK && dp->mpi)
            status = cg__mpi_bcast(dp, &step, sizeof step);
        for (r = dp->rank == 0 ? 1 : 0; r < dp->nlocal && !status; r++)
            status = cg_optim_set_step(dp->rep[r].opt, i, step);
    }
    if (status == CG_OK)
        status = bcast_state(dp, buf, cap);
    free(buf);
    return status;
}

/* ------------------------------------------------------------------------
 * A step
 * ------------------------------------------------------------------------ */

/* Queues the reads of bucket b's gradients into the replica's staging
 * memory and hands the bucket over. */
static void
bucket_ready(cg__replica *rep, int b)
{
    cg_dp *dp = rep->dp;
    const cg__bucket *bk = &dp->buckets[b];
    cl_event ev = NULL;
    int j, err = CL_SUCCESS;

    if (rep->status == CG_OK) {
        for (j = 0; j < bk->count && err == CL_SUCCESS; j++) {
            int p = dp->order[bk->first + j];
            const cg_tensor *g = rep->params[p]->grad;
            size_t bytes = (size_t)dp->numel[p] * sizeof(float);

            if (ev)
                clReleaseEvent(ev);
            ev = NULL;
            err = clEnqueueReadBuffer(rep->ctx->queue, cg__tensor_mem(g),
                                      CL_FALSE,
                                      (size_t)g->offset * sizeof(float),
                                      bytes, rep->host + dp->offset[p],
                                      0, NULL, &ev);
        }
        if (err != CL_SUCCESS) {
            rep->status = cg__error(CG_EIO, "cg_dp_step: reading bucket "
                                    "%d's gradients on replica %d: %s", b,
                                    rep->index, cg__cl_error_name(err));
            snprintf(rep->error, sizeof rep->error, "%s", cg_last_error());
        }
        clFlush(rep->ctx->queue);
        if (b == 0 && rep->index == 0)
            rep->first_after = rep->ctx->stats.kernels_enqueued -
                               rep->launches0;
    }
    pthread_mutex_lock(&dp->lock);
    if (rep->read[b])
        clReleaseEvent(rep->read[b]);
    rep->read[b] = err == CL_SUCCESS ? ev : NULL;
    if (err != CL_SUCCESS && ev)
        clReleaseEvent(ev);
    if (rep->status != CG_OK)
        dp->failed = 1;
    dp->ready[b]++;
    pthread_cond_broadcast(&dp->cond);
    pthread_mutex_unlock(&dp->lock);
}

/* The leaf-gradient hook: parameter leaf's gradient is complete. */
static void
grad_ready(void *user, cg_tensor *leaf)
{
    cg__replica *rep = user;
    cg_dp *dp = rep->dp;
    int p, b;

    for (p = 0; p < dp->nparams; p++)
        if (rep->params[p] == leaf)
            break;
    if (p == dp->nparams)
        return;                         /* not a parameter of the model */
    b = dp->bucket_of[p];
    if (rep->left[b] <= 0)
        return;
    if (!cg_tensor_is_contiguous(leaf->grad) || leaf->grad->dtype != CG_F32)
        return;                         /* left to finish_buckets */
    if (--rep->left[b] == 0)
        bucket_ready(rep, b);
}

/* After backward: a parameter without a gradient gets zeros, and every
 * bucket not handed over yet is (all of them after a failure). */
static void
finish_buckets(cg__replica *rep)
{
    cg_dp *dp = rep->dp;
    int b, j;

    for (b = 0; b < dp->nbuckets; b++) {
        const cg__bucket *bk = &dp->buckets[b];

        if (rep->left[b] <= 0)
            continue;
        for (j = 0; j < bk->count && rep->status == CG_OK; j++) {
            cg_tensor *p = rep->params[dp->order[bk->first + j]];
            cg_tensor *g = p->grad;

            if (g && cg_tensor_is_contiguous(g) && g->dtype == CG_F32)
                continue;
            g = g ? cg_contiguous(g) : cg_zeros(rep->ctx, p->ndim, p->shape);
            if (!g) {
                rep->status = cg__last_status();
                snprintf(rep->error, sizeof rep->error, "%s",
                         cg_last_error());
                break;
            }
            cg_tensor_free(p->grad);
            p->grad = g;
        }
        rep->left[b] = 0;
        bucket_ready(rep, b);
    }
}

static void
fail(cg__replica *rep, int status)
{
    rep->status = status;
    snprintf(rep->error, sizeof rep->error, "%s", cg_last_error());
}

/* A message of cg_last_error's without its leading status name, to be
 * raised again on another thread. */
static const char *
unprefixed(int status, const char *msg)
{
    const char *name = cg_status_name(status);
    size_t n = strlen(name);

    return strncmp(msg, name, n) == 0 && msg[n] == ':' && msg[n + 1] == ' '
           ? msg + n + 2 : msg;
}

/* Replica 0's thread, once every local replica is done with backward
 * and every bucket is back: the step's verdict (the first failure of a
 * replica or of the communication, else across processes the lowest
 * status), which the other replica threads wait for. */
static void
agree(cg_dp *dp)
{
    int r, status = CG_OK, all;

    pthread_mutex_lock(&dp->lock);
    while (dp->finished < dp->nlocal)
        pthread_cond_wait(&dp->cond, &dp->lock);
    pthread_mutex_unlock(&dp->lock);
    for (r = 0; r < dp->nlocal && status == CG_OK; r++)
        if (dp->rep[r].status != CG_OK)
            status = cg__error(dp->rep[r].status, "cg_dp_step: replica "
                               "%d: %s", dp->rank + r, dp->rep[r].error);
    if (status == CG_OK && dp->comm_status != CG_OK)
        status = cg__error(dp->comm_status, "%s",
                           unprefixed(dp->comm_status, dp->comm_error));
    if (dp->mpi) {
        int st = cg__mpi_agree(dp, status, &all);

        if (st != CG_OK)
            status = st;
        else if (status == CG_OK && all != CG_OK)
            status = cg__error(all, "cg_dp_step: another rank failed "
                               "(status %d, %s): no update", all,
                               cg_status_name(all));
    }
    pthread_mutex_lock(&dp->lock);
    dp->verdict = status;
    snprintf(dp->verdict_error, sizeof dp->verdict_error, "%s",
             status != CG_OK ? cg_last_error() : "");
    dp->agreed = 1;
    pthread_cond_broadcast(&dp->cond);
    pthread_mutex_unlock(&dp->lock);
}

typedef struct {
    cg__replica *rep;
    cg_dp_loss_fn fn;
    cg_dp_update_fn update;
    void *user;
    int want_loss;
} step_arg;

/* A replica's thread: loss, backward, then (once every bucket is back)
 * the optimizer's step. */
static void *
replica_main(void *arg)
{
    step_arg *a = arg;
    cg__replica *rep = a->rep;
    cg_dp *dp = rep->dp;
    cg_tensor *loss = NULL;
    int status, b;

    cg__error_clear();
    for (b = 0; b < dp->nbuckets; b++)
        rep->left[b] = dp->buckets[b].count;
    status = cg_optim_zero_grad(rep->opt);
    if (status == CG_OK) {
        status = a->fn(a->user, dp->rank + rep->index, rep->module, &loss);
        if (status == CG_OK && (!loss || cg_tensor_numel(loss) != 1 ||
                                loss->ctx != rep->ctx))
            status = cg__error(CG_EINVAL, "cg_dp_step: replica %d's loss "
                               "function gave %s", dp->rank + rep->index,
                               !loss ? "no loss"
                               : loss->ctx != rep->ctx
                               ? "a loss on another context"
                               : "a loss of more than one element");
    }
    if (status != CG_OK) {
        fail(rep, status);
    } else {
        rep->launches0 = rep->ctx->stats.kernels_enqueued;
        rep->first_after = 0;
        cg__set_grad_ready(rep->ctx, grad_ready, rep);
        status = cg_backward(loss, NULL, 0);
        cg__set_grad_ready(rep->ctx, NULL, NULL);
        if (status != CG_OK)
            fail(rep, status);
        if (rep->index == 0)
            dp->backward_launches = (int)(rep->ctx->stats.kernels_enqueued -
                                          rep->launches0);
    }
    rep->backward_end = cg__dp_now();
    finish_buckets(rep);
    if (rep->status == CG_OK && loss && a->want_loss)
        rep->status = cg_tensor_item(loss, &rep->loss);
    cg_tensor_free(loss);
    /* Every bucket back; then, when every replica of every process
     * succeeded, the update (queued after the writes). */
    /* Across processes every bucket's collective runs even after a
     * failure, and the verdict's collective must come after them all. */
    pthread_mutex_lock(&dp->lock);
    while (dp->done < dp->nbuckets && (!dp->failed || dp->mpi))
        pthread_cond_wait(&dp->cond, &dp->lock);
    dp->finished++;
    pthread_cond_broadcast(&dp->cond);
    pthread_mutex_unlock(&dp->lock);
    if (rep->index == 0)
        agree(dp);
    pthread_mutex_lock(&dp->lock);
    while (!dp->agreed)
        pthread_cond_wait(&dp->cond, &dp->lock);
    pthread_mutex_unlock(&dp->lock);
    if (dp->verdict == CG_OK) {
        status = a->update ? a->update(a->user, dp->rank + rep->index,
                                       rep->module, rep->opt)
                           : cg_optim_step(rep->opt);
        if (status != CG_OK)
            fail(rep, status);
    }
    return NULL;
}

/* Queues the writes of bucket b's averaged gradients, src, into every
 * local replica's gradients. */
static int
write_back(cg_dp *dp, int b, const float *src)
{
    const cg__bucket *bk = &dp->buckets[b];
    int r, j, err;

    for (r = 0; r < dp->nlocal; r++) {
        cg__replica *rep = &dp->rep[r];

        for (j = 0; j < bk->count; j++) {
            int p = dp->order[bk->first + j];
            const cg_tensor *g = rep->params[p]->grad;

            err = clEnqueueWriteBuffer(rep->ctx->queue, cg__tensor_mem(g),
                                       CL_FALSE,
                                       (size_t)g->offset * sizeof(float),
                                       (size_t)dp->numel[p] * sizeof(float),
                                       src + dp->offset[p], 0, NULL, NULL);
            if (err != CL_SUCCESS)
                return cg__error(CG_EIO, "cg_dp_step: writing bucket %d's "
                                 "gradients on replica %d: %s", b, r,
                                 cg__cl_error_name(err));
        }
        clFlush(rep->ctx->queue);
    }
    return CG_OK;
}

/* Reduces bucket b: every local replica's reads have been queued. */
static int
reduce_bucket(cg_dp *dp, int b)
{
    const cg__bucket *bk = &dp->buckets[b];
    float scale = 1.0f / (float)dp->world;
    float *out;
    size_t j;
    int r, err, status, failed;

    for (r = 0; r < dp->nlocal; r++) {
        cl_event ev = dp->rep[r].read[b];

        if (ev && (err = clWaitForEvents(1, &ev)) != CL_SUCCESS)
            return cg__error(CG_EIO, "cg_dp_step: reading bucket %d on "
                             "replica %d failed: %s", b, r,
                             cg__cl_error_name(err));
    }
    dp->bucket_t0[b] = cg__dp_now();
    if (dp->nlocal == 1) {
        out = dp->rep[0].host + bk->offset;
    } else {
        out = dp->sum + bk->offset;
        memcpy(out, dp->rep[0].host + bk->offset, bk->floats * sizeof *out);
        for (r = 1; r < dp->nlocal; r++) {
            const float *h = dp->rep[r].host + bk->offset;

            for (j = 0; j < bk->floats; j++)
                out[j] += h[j];
        }
    }
    if (dp->mpi &&
        (status = cg__mpi_allreduce(dp, out, bk->floats)) != CG_OK)
        return status;
    /* After a failure (across processes, where the collectives still
     * run) the gradients may be missing: nothing goes back. */
    pthread_mutex_lock(&dp->lock);
    failed = dp->failed;
    pthread_mutex_unlock(&dp->lock);
    if (failed)
        return CG_OK;
    if (dp->world > 1)
        for (j = 0; j < bk->floats; j++)
            out[j] *= scale;
    status = write_back(dp, b, out - bk->offset);
    dp->bucket_t1[b] = cg__dp_now();
    return status;
}

/* The communication thread: the buckets in order, each once every local
 * replica has handed it over. */
static void *
comm_main(void *arg)
{
    cg_dp *dp = arg;
    int b, status = CG_OK;

    cg__error_clear();
    for (b = 0; b < dp->nbuckets; b++) {
        int failed;

        pthread_mutex_lock(&dp->lock);
        while (dp->ready[b] < dp->nlocal)
            pthread_cond_wait(&dp->cond, &dp->lock);
        failed = dp->failed;
        pthread_mutex_unlock(&dp->lock);
        /* Across processes every bucket is reduced even after a local
         * failure, so that the collectives still match; the failure is
         * agreed on at the end of the step. */
        if (status == CG_OK && (!failed || dp->mpi))
            status = reduce_bucket(dp, b);
        pthread_mutex_lock(&dp->lock);
        if (status != CG_OK && dp->comm_status == CG_OK) {
            dp->comm_status = status;
            snprintf(dp->comm_error, sizeof dp->comm_error, "%s",
                     cg_last_error());
            dp->failed = 1;
        }
        dp->done = b + 1;
        pthread_cond_broadcast(&dp->cond);
        pthread_mutex_unlock(&dp->lock);
    }
    return NULL;
}

static void
step_stats(cg_dp *dp)
{
    double bw_end = 0;
    int r, b;

    for (r = 0; r < dp->nlocal; r++)
        if (dp->rep[r].backward_end > bw_end)
            bw_end = dp->rep[r].backward_end;
    dp->reduce_s = dp->exposed_s = 0;
    for (b = 0; b < dp->nbuckets; b++) {
        double t0 = dp->bucket_t0[b], t1 = dp->bucket_t1[b];

        dp->reduce_s += t1 - t0;
        if (t1 > bw_end)
            dp->exposed_s += t1 - (t0 > bw_end ? t0 : bw_end);
    }
    dp->first_after = (int)dp->rep[0].first_after;
}

int
cg_dp_step(cg_dp *dp, cg_dp_loss_fn loss, cg_dp_update_fn update,
           void *user, float *losses)
{
    pthread_t th[CG_DP_MAX], comm;
    step_arg args[CG_DP_MAX];
    int r, b, status = CG_OK, started = 0;

    cg__error_clear();
    if (!dp || !loss)
        return cg__error(CG_EINVAL, "cg_dp_step: %s is NULL",
                         dp ? "loss" : "dp");
    dp->done = dp->finished = dp->agreed = 0;
    dp->failed = 0;
    dp->comm_status = dp->verdict = CG_OK;
    for (b = 0; b < dp->nbuckets; b++) {
        dp->ready[b] = 0;
        dp->bucket_t0[b] = dp->bucket_t1[b] = 0;
    }
    for (r = 0; r < dp->nlocal; r++) {
        dp->rep[r].status = CG_OK;
        dp->rep[r].error[0] = '\0';
        dp->rep[r].loss = 0;
        args[r].rep = &dp->rep[r];
        args[r].fn = loss;
        args[r].update = update;
        args[r].user = user;
        args[r].want_loss = losses != NULL;
    }
    if (pthread_create(&comm, NULL, comm_main, dp) != 0)
        return cg__error(CG_EHOSTMEM, "cg_dp_step: cannot start the "
                         "communication thread");
    /* Replica 0 runs in the calling thread. */
    for (r = 1; r < dp->nlocal; r++, started++)
        if (pthread_create(&th[r], NULL, replica_main, &args[r]) != 0)
            break;
    /* Replicas that could not start give up their buckets and count as
     * finished. */
    for (r = started + 1; r < dp->nlocal; r++) {
        dp->rep[r].status = cg__error(CG_EHOSTMEM, "cg_dp_step: cannot "
                                      "start a replica thread");
        snprintf(dp->rep[r].error, sizeof dp->rep[r].error, "%s",
                 cg_last_error());
        finish_buckets(&dp->rep[r]);
        pthread_mutex_lock(&dp->lock);
        dp->finished++;
        pthread_mutex_unlock(&dp->lock);
    }
    replica_main(&args[0]);
    for (r = 1; r <= started; r++)
        pthread_join(th[r], NULL);
    pthread_join(comm, NULL);
    step_stats(dp);
    if (dp->verdict != CG_OK)
        return cg__error(dp->verdict, "%s",
                         unprefixed(dp->verdict, dp->verdict_error));
    /* An update that failed (the replicas may now differ). */
    for (r = 0; r < dp->nlocal && status == CG_OK; r++)
        if (dp->rep[r].status != CG_OK)
            status = cg__error(dp->rep[r].status, "cg_dp_step: updating "
                               "replica %d: %s", dp->rank + r,
                               dp->rep[r].error);
    if (status == CG_OK && losses)
        for (r = 0; r < dp->nlocal; r++)
            losses[r] = dp->rep[r].loss;
    return status;
}

int
cg_dp_mean(cg_dp *dp, const float *local, double *mean)
{
    double sum = 0;
    int r, status;

    if (!dp || !local || !mean)
        return cg__error(CG_EINVAL, "cg_dp_mean: %s is NULL",
                         !dp ? "dp" : !local ? "local" : "mean");
    for (r = 0; r < dp->nlocal; r++)
        sum += local[r];
    if (dp->mpi && (status = cg__mpi_sum_double(dp, &sum)) != CG_OK)
        return status;
    *mean = sum / dp->world;
    return CG_OK;
}

int
cg_dp_gather(cg_dp *dp, const float *local, size_t n, float *all)
{
    if (!dp || !local || !all)
        return cg__error(CG_EINVAL, "cg_dp_gather: %s is NULL",
                         !dp ? "dp" : !local ? "local" : "all");
    if (!dp->mpi) {
        memcpy(all, local, (size_t)dp->nlocal * n * sizeof *all);
        return CG_OK;
    }
    return cg__mpi_allgather(dp, local, n, all);
}

int
cg_dp_get_stats(const cg_dp *dp, cg_dp_stats *stats)
{
    if (!dp || !stats)
        return cg__error(CG_EINVAL, "cg_dp_get_stats: %s is NULL",
                         dp ? "stats" : "dp");
    memset(stats, 0, sizeof *stats);
    stats->world_size = dp->world;
    stats->buckets = dp->nbuckets;
    stats->params = dp->nparams;
    stats->bytes = (double)dp->total * sizeof(float);
    stats->reduce_s = dp->reduce_s;
    stats->exposed_s = dp->exposed_s;
    stats->backward_launches = dp->backward_launches;
    stats->first_bucket_after = dp->first_after;
    stats->bucket_mb = dp->bucket_mb;
    stats->first_bucket_mb = dp->first_bucket_mb;
    snprintf(stats->bucket_origin, sizeof stats->bucket_origin, "%s",
             dp->bucket_origin);
    return CG_OK;
}
