/* SPDX-License-Identifier: MIT */
/*
 * lib/dist/mpi.c - the MPI transport of data parallelism: one replica per
 * process of MPI_COMM_WORLD, buckets summed with MPI_Iallreduce.
 *
 * Open MPI has no progress thread of its own, so the communication thread
 * drives each non-blocking reduction with MPI_Test until it completes;
 * the library asks for MPI_THREAD_MULTIPLE, since the thread that calls
 * cg_dp_step and the communication thread both call MPI (never at once).
 * Without MPI (configure found none) each function fails with
 * CG_EUNSUPPORTED.
 */
#include "config.h"

#include "dist/internal.h"

#ifdef HAVE_MPI

#include <mpi.h>
#include <sched.h>

/* How many cg_dp are open over MPI, and whether this library called
 * MPI_Init_thread (then the last one closed finalises). */
static pthread_mutex_t mpi_lock = PTHREAD_MUTEX_INITIALIZER;
static int mpi_users;
static int mpi_ours;

struct cg__mpi {
    int size;
};

static int
mpi_error(int code, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;

    if (MPI_Error_string(code, msg, &len) != MPI_SUCCESS)
        len = 0;
    msg[len] = '\0';
    return cg__error(CG_EIO, "%s: MPI error %d: %s", what, code,
                     len ? msg : "(no description)");
}

int
cg__mpi_open(cg_dp *dp)
{
    int inited = 0, finalized = 0, level = 0, rank = 0, size = 1, rc;

    pthread_mutex_lock(&mpi_lock);
    MPI_Finalized(&finalized);
    if (finalized) {
        pthread_mutex_unlock(&mpi_lock);
        return cg__error(CG_ESTATE, "cg_dp_new_mpi: MPI was finalised "
                         "already (it cannot start twice in a process)");
    }
    MPI_Initialized(&inited);
    if (!inited) {
        rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &level);
        if (rc != MPI_SUCCESS) {
            pthread_mutex_unlock(&mpi_lock);
            return mpi_error(rc, "cg_dp_new_mpi: MPI_Init_thread");
        }
        mpi_ours = 1;
    } else {
        MPI_Query_thread(&level);
    }
    mpi_users++;
    pthread_mutex_unlock(&mpi_lock);
    /* Errors come back as codes, to be turned into clgrad errors. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (level < MPI_THREAD_SERIALIZED) {
        cg__mpi_close(dp);
        return cg__error(CG_EUNSUPPORTED, "cg_dp_new_mpi: MPI grants "
                         "thread level %d; data parallelism needs "
                         "MPI_THREAD_SERIALIZED or more", level);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (!(dp->mpi = calloc(1, sizeof *dp->mpi))) {
        cg__mpi_close(dp);
        return cg__error(CG_EHOSTMEM, "cg_dp_new_mpi: out of host memory");
    }
    dp->mpi->size = size;
    dp->rank = rank;
    dp->world = size;
    return CG_OK;
}

void
cg__mpi_close(cg_dp *dp)
{
    free(dp->mpi);
    dp->mpi = NULL;
    pthread_mutex_lock(&mpi_lock);
    if (mpi_users > 0 && --mpi_users == 0 && mpi_ours) {
        int finalized = 0;

        MPI_Finalized(&finalized);
        if (!finalized)
            MPI_Finalize();
        mpi_ours = 0;
    }
    pthread_mutex_unlock(&mpi_lock);
}

int
cg__mpi_allreduce(cg_dp *dp, float *data, size_t n)
{
    MPI_Request req;
    int rc, flag = 0;

    (void)dp;
    if (n > (size_t)2147483647)
        return cg__error(CG_EINVAL, "cg_dp: a bucket of %zu floats is too "
                         "large for one MPI call", n);
    rc = MPI_Iallreduce(MPI_IN_PLACE, data, (int)n, MPI_FLOAT, MPI_SUM,
                        MPI_COMM_WORLD, &req);
    if (rc != MPI_SUCCESS)
        return mpi_error(rc, "cg_dp_step: MPI_Iallreduce");
    /* No progress thread in Open MPI: this thread drives it. */
    while (!flag) {
        if ((rc = MPI_Test(&req, &flag, MPI_STATUS_IGNORE)) != MPI_SUCCESS)
            return mpi_error(rc, "cg_dp_step: MPI_Test");
        if (!flag)
            sched_yield();
    }
    return CG_OK;
}

int
cg__mpi_sum_double(cg_dp *dp, double *value)
{
    int rc;

    (void)dp;
    rc = MPI_Allreduce(MPI_IN_PLACE, value, 1, MPI_DOUBLE, MPI_SUM,
                       MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? CG_OK : mpi_error(rc, "cg_dp: MPI_Allreduce");
}

int
cg__mpi_allgather(cg_dp *dp, const float *local, size_t n, float *all)
{
    int rc;

    (void)dp;
    if (n > (size_t)2147483647)
        return cg__error(CG_EINVAL, "cg_dp_gather: %zu floats are too many "
                         "for one MPI call", n);
    rc = MPI_Allgather(local, (int)n, MPI_FLOAT, all, (int)n, MPI_FLOAT,
                       MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? CG_OK : mpi_error(rc, "cg_dp: MPI_Allgather");
}

int
cg__mpi_bcast(cg_dp *dp, void *data, size_t n)
{
    char *p = data;
    int rc;

    (void)dp;
    while (n > 0) {
        int chunk = n > (size_t)1 << 30 ? 1 << 30 : (int)n;

        if ((rc = MPI_Bcast(p, chunk, MPI_BYTE, 0, MPI_COMM_WORLD)) !=
            MPI_SUCCESS)
            return mpi_error(rc, "cg_dp: MPI_Bcast");
        p += chunk;
        n -= (size_t)chunk;
    }
    return CG_OK;
}

int
cg__mpi_agree(cg_dp *dp, int status, int *all)
{
    int lowest = status, rc;

    (void)dp;
    rc = MPI_Allreduce(&status, &lowest, 1, MPI_INT, MPI_MIN,
                       MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS)
        return mpi_error(rc, "cg_dp: MPI_Allreduce");
    if (all)
        *all = lowest;
    return lowest == CG_OK || all ? CG_OK : lowest;
}

#else /* !HAVE_MPI */

int
cg__mpi_open(cg_dp *dp)
{
    (void)dp;
    return cg__error(CG_EUNSUPPORTED, "data parallelism over MPI: this "
                     "clgrad was built without MPI");
}

void
cg__mpi_close(cg_dp *dp)
{
    (void)dp;
}

int
cg__mpi_allreduce(cg_dp *dp, float *data, size_t n)
{
    (void)dp;
    (void)data;
    (void)n;
    return cg__error(CG_EUNSUPPORTED, "MPI: built without MPI");
}

int
cg__mpi_sum_double(cg_dp *dp, double *value)
{
    (void)dp;
    (void)value;
    return cg__error(CG_EUNSUPPORTED, "MPI: built without MPI");
}

int
cg__mpi_allgather(cg_dp *dp, const float *local, size_t n, float *all)
{
    (void)dp;
    (void)local;
    (void)n;
    (void)all;
    return cg__error(CG_EUNSUPPORTED, "MPI: built without MPI");
}

int
cg__mpi_bcast(cg_dp *dp, void *data, size_t n)
{
    (void)dp;
    (void)data;
    (void)n;
    return cg__error(CG_EUNSUPPORTED, "MPI: built without MPI");
}

int
cg__mpi_agree(cg_dp *dp, int status, int *all)
{
    (void)dp;
    if (all)
        *all = status;
    return CG_OK;
}

#endif
