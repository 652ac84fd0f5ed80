/* SPDX-License-Identifier: MIT */
/*
 * lib/dist/internal.h - data parallelism (lib/dist/dp.c) and the
 * transports that reduce its gradient buckets: in host memory between the
 * replicas of one process (dp.c), and across processes with MPI (mpi.c,
 * built when configure found MPI).
 */
#ifndef CG_DIST_INTERNAL_H
#define CG_DIST_INTERNAL_H

#include <pthread.h>

#include "autograd/internal.h"

/* A replica: one module, its optimizer and context, driven by one host
 * thread during cg_dp_step.  Owned by its cg_dp. */
typedef struct cg__replica {
    struct cg_dp *dp;
    int index;                  /* among the process's replicas */
    cg_module *module;          /* borrowed from the caller */
    cg_optimizer *opt;          /* borrowed from the caller */
    cg_context *ctx;
    cg_tensor **params;         /* borrowed (the module's), nparams */
    float *host;                /* staging: every gradient, by bucket
                                 * (dp->total floats; owned) */
    int *left;                  /* per bucket: parameters not yet ready */
    cl_event *read;             /* per bucket: its last read (owned) */
    /* This step. */
    int status;
    char error[256];
    float loss;
    uint64_t launches0;         /* kernels enqueued when backward began */
    uint64_t first_after;       /* ... when the first bucket was read */
    double backward_end;        /* host time backward returned */
} cg__replica;

/* A bucket: parameters order[first .. first + count - 1] (reverse
 * parameter order), their gradients at floats [offset, offset + floats)
 * of each replica's staging memory. */
typedef struct cg__bucket {
    int first, count;
    size_t offset, floats;
} cg__bucket;

struct cg_dp {
    int nlocal;                 /* replicas in this process */
    int world;                  /* in all processes */
    int rank;                   /* of this process's first replica */
    cg__replica rep[CG_DP_MAX];
    int nparams;
    int *order;                 /* parameter indices, reverse order */
    int *bucket_of;             /* per parameter: its bucket */
    size_t *offset;             /* per parameter: its staging offset */
    int64_t *numel;             /* per parameter */
    int nbuckets;
    cg__bucket *buckets;
    /* The bucket sizes in MiB, and where they came from (cg_dp_stats). */
    double bucket_mb, first_bucket_mb;
    char bucket_origin[256];
    size_t total;               /* floats of all gradients */
    float *sum;                 /* in-process: the averaged gradients */
    /* The step's hand-over between the replica threads and the
     * communication thread, under lock. */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int *ready;                 /* per bucket: replicas that queued its
                                 * reads (or gave up) */
    int done;                   /* buckets reduced and written back */
    int failed;                 /* a replica failed: reduce nothing more */
    int comm_status;
    char comm_error[256];
    int finished;               /* replicas past backward and buckets */
    int agreed;                 /* the verdict is in */
    int verdict;                /* CG_OK: every replica may update */
    char verdict_error[512];
    /* The transport: NULL in-process; else reduces a bucket's floats of
     * rep[0].host across processes (sum), and agrees on a status. */
    struct cg__mpi *mpi;
    /* Statistics of the last step. */
    double reduce_s, exposed_s;
    double *bucket_t0, *bucket_t1;
    int backward_launches, first_after;
};

/* Host time in seconds (CLOCK_MONOTONIC). */
double cg__dp_now(void);

/* MPI (lib/dist/mpi.c; without MPI these fail with CG_EUNSUPPORTED). */
int cg__mpi_open(struct cg_dp *dp);
void cg__mpi_close(struct cg_dp *dp);
/* Sums n floats across the processes, in place, in a fixed order. */
int cg__mpi_allreduce(struct cg_dp *dp, float *data, size_t n);
/* Sums one double across the processes, in place. */
int cg__mpi_sum_double(struct cg_dp *dp, double *value);
/* Every process's n floats into all, in rank order. */
int cg__mpi_allgather(struct cg_dp *dp, const float *local, size_t n,
                      float *all);
/* Broadcasts n bytes from rank 0. */
int cg__mpi_bcast(struct cg_dp *dp, void *data, size_t n);
/* The lowest of every process's status (CG_OK = 0 is the highest). */
int cg__mpi_agree(struct cg_dp *dp, int status, int *all);

#endif
