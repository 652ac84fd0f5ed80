/* SPDX-License-Identifier: MIT */
/*
 * tests/dp_worker.c - one process of tests/test_dp_mpi.sh: trains the
 * data-parallel tests' MLP (tests/dp_model.h) and writes rank 0's final
 * parameters to a file, or compares two such files.
 *
 *   dp_worker mpi|local:N sgd|adam STEPS BATCH OUT [OPTION...]
 *       mpi: one replica per MPI process (run under mpirun), on device
 *       local rank modulo the device count (CLGRAD_DEVICE overrides);
 *       local:N: N replicas in this process, on devices 0..N-1 (device 0
 *       for all when there is only one).  BATCH is the global batch.
 *       Options: --hid-rank R (rank R builds a wider model), --extra-rank
 *       R (rank R's model has a layer more: two parameters), --bucket-mb
 *       X (buckets of X MiB, the first too), --die-at S
 *       (rank 1 kills itself with SIGKILL at step S), --fail-at S (rank
 *       1's loss fails at step S).
 *   dp_worker compare A B TOL
 *       exits 0 when every parameter of A is within TOL times the
 *       parameter's largest |value| of B's, printing the differences.
 *   dp_worker ckcompare A B TOL
 *       exits 0 when every float32 tensor of checkpoint A (clgrad-train's:
 *       parameters, optimizer state) differs from B's by at most TOL
 *       relative: the norm of the difference over the norm of B's
 *       (with DP_WORKER_VERBOSE set, each tensor's figures).
 */
#include "config.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dp_model.h"

static int
usage(void)
{
    fprintf(stderr, "usage: dp_worker mpi|local:N sgd|adam STEPS BATCH OUT "
            "[--hid-rank R] [--die-at S] [--fail-at S]\n"
            "       dp_worker compare A B TOL\n"
            "       dp_worker ckcompare A B TOL\n");
    return 2;
}

static int
save(const char *path, cg_module *m)
{
    float *v[DPM_NPARAM];
    int64_t n[DPM_NPARAM];
    FILE *f;
    int i, ok;

    if (dpm_params_host(m, v, n) != CG_OK)
        return -1;
    ok = (f = fopen(path, "wb")) != NULL;
    for (i = 0; i < DPM_NPARAM; i++) {
        ok = ok && fwrite(&n[i], sizeof n[i], 1, f) == 1 &&
             fwrite(v[i], sizeof(float), (size_t)n[i], f) == (size_t)n[i];
        free(v[i]);
    }
    if (f && fclose(f) != 0)
        ok = 0;
    return ok ? 0 : -1;
}

static float *
load(const char *path, int64_t n[DPM_NPARAM])
{
    FILE *f = fopen(path, "rb");
    float *all = NULL;
    size_t at = 0;
    int i;

    if (!f)
        return NULL;
    for (i = 0; i < DPM_NPARAM; i++) {
        float *grown;

        if (fread(&n[i], sizeof n[i], 1, f) != 1 || n[i] < 1 ||
            n[i] > 1 << 20 ||
            !(grown = realloc(all, (at + (size_t)n[i]) * sizeof *all))) {
            free(all);
            fclose(f);
            return NULL;
        }
        all = grown;
        if (fread(all + at, sizeof *all, (size_t)n[i], f) != (size_t)n[i]) {
            free(all);
            fclose(f);
            return NULL;
        }
        at += (size_t)n[i];
    }
    fclose(f);
    return all;
}

static int
compare(const char *a_path, const char *b_path, double tol)
{
    int64_t na[DPM_NPARAM], nb[DPM_NPARAM], j;
    float *a = load(a_path, na), *b = load(b_path, nb);
    size_t at = 0;
    int i, bad = !a || !b;

    for (i = 0; !bad && i < DPM_NPARAM; i++) {
        double scale = 0, err = 0, n2 = 0, d2 = 0;

        if (na[i] != nb[i]) {
            bad = 1;
            break;
        }
        for (j = 0; j < na[i]; j++) {
            double d = (double)a[at + j] - b[at + j];

            scale = fmax(scale, fabs(b[at + j]));
            err = fmax(err, fabs(d));
            n2 += (double)b[at + j] * b[at + j];
            d2 += d * d;
        }
        printf("param %d: max |diff| %.3g of scale %.3g (%.3g); norm-"
               "relative %.3g\n", i, err, scale, scale > 0 ? err / scale : 0,
               n2 > 0 ? sqrt(d2 / n2) : 0);
        if (err > tol * scale)
            bad = 1;
        at += (size_t)na[i];
    }
    if (!a || !b)
        fprintf(stderr, "dp_worker: cannot read %s\n", !a ? a_path : b_path);
    free(a);
    free(b);
    return bad;
}

static int
ck_compare(const char *a_path, const char *b_path, double tol)
{
    cg_checkpoint *a = cg_checkpoint_load(a_path);
    cg_checkpoint *b = cg_checkpoint_load(b_path);
    int i, bad = !a || !b, n = a && b ? cg_checkpoint_num_tensors(a) : 0;
    int verbose = getenv("DP_WORKER_VERBOSE") != NULL;
    double worst = 0;

    if (!bad && n != cg_checkpoint_num_tensors(b))
        bad = 1;
    for (i = 0; !bad && i < n; i++) {
        const char *name = cg_checkpoint_tensor_name(a, i);
        size_t na = 0, nb = 0, j;
        cg_dtype dt;
        const float *x, *y;
        double scale = 0, err = 0, big = 0, maxd = 0;

        if (cg_checkpoint_tensor_info(a, name, &dt, NULL, NULL) ||
            dt != CG_F32)
            continue;
        x = cg_checkpoint_tensor_data(a, name, &na);
        y = cg_checkpoint_tensor_data(b, name, &nb);
        if (!x || !y || na != nb) {
            fprintf(stderr, "ckcompare: %s differs in size or is missing\n",
                    name);
            bad = 1;
            break;
        }
        for (j = 0; j < na / sizeof(float); j++) {
            double d = (double)x[j] - y[j];

            scale += (double)y[j] * y[j];
            err += d * d;
            big = fmax(big, fabs(y[j]));
            maxd = fmax(maxd, fabs(d));
        }
        scale = sqrt(scale);
        err = sqrt(err);
        if (verbose)
            printf("%s: max |diff| / max |value| %.3g; norm-relative %.3g\n",
                   name, big > 0 ? maxd / big : 0,
                   scale > 0 ? err / scale : 0);
        if (scale > 0 && err / scale > worst)
            worst = err / scale;
        if (err > tol * scale) {
            printf("%s: |diff| %.3g of |value| %.3g\n", name, err, scale);
            bad = 1;
        }
    }
    if (!a || !b)
        fprintf(stderr, "dp_worker: %s\n", cg_last_error());
    else
        printf("%d tensors, largest relative difference (norm of the "
               "difference / norm of the tensor) %.3g\n", n, worst);
    cg_checkpoint_free(a);
    cg_checkpoint_free(b);
    return bad;
}

int
main(int argc, char **argv)
{
    cg_context *ctx[CG_DP_MAX] = { NULL };
    cg_module *m[CG_DP_MAX] = { NULL };
    cg_optimizer *opt[CG_DP_MAX] = { NULL };
    cg_dp *dp = NULL;
    dpm_arg a = { 0, 0, -1 };
    int n = 1, mpi, adam, steps, batch, hid_rank = -1, die_at = -1;
    int fail_at = -1, extra_rank = -1;
    cg_dp_options o = { 0 };
    cg_dp_stats st;
    int i, rank, status = 1, count = 0;

    if (argc == 5 && strcmp(argv[1], "compare") == 0)
        return compare(argv[2], argv[3], atof(argv[4]));
    if (argc == 5 && strcmp(argv[1], "ckcompare") == 0)
        return ck_compare(argv[2], argv[3], atof(argv[4]));
    if (argc < 6)
        return usage();
    mpi = strcmp(argv[1], "mpi") == 0;
    if (!mpi && (strncmp(argv[1], "local:", 6) != 0 ||
                 (n = atoi(argv[1] + 6)) < 1 || n > CG_DP_MAX))
        return usage();
    adam = strcmp(argv[2], "adam") == 0;
    steps = atoi(argv[3]);
    batch = atoi(argv[4]);
    for (i = 6; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--hid-rank") == 0)
            hid_rank = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--die-at") == 0)
            die_at = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--fail-at") == 0)
            fail_at = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--extra-rank") == 0)
            extra_rank = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--bucket-mb") == 0)
            o.bucket_mb = o.first_bucket_mb = atof(argv[i + 1]);
        else
            return usage();
    }
    if (steps < 1 || steps > DPM_MAX_STEPS || batch < 1)
        return usage();
    cg_device_count(&count);
    for (i = 0; i < n; i++) {
        const char *local = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
        int dev = mpi ? (local ? atoi(local) : 0) : i;
        char sel[16];

        snprintf(sel, sizeof sel, "%d", count > 0 ? dev % count : 0);
        ctx[i] = cg_context_new(mpi && getenv("CLGRAD_DEVICE") ? NULL : sel);
        if (!ctx[i])
            goto out;
    }
    rank = -1;
    if (mpi) {
        const char *r = getenv("OMPI_COMM_WORLD_RANK");

        rank = r ? atoi(r) : 0;
    }
    for (i = 0; i < n; i++) {
        int who = mpi ? rank : i;

        if (!(m[i] = dpm_mlp(ctx[i], DPM_HID + (who == hid_rank))))
            goto out;
        if (who == extra_rank) {        /* two parameters more */
            cg_tensor *p[DPM_NPARAM + 2];
            cg_sgd_options so = { 0 };

            so.lr = 0.1;
            if (cg_module_add(m[i], "extra", cg_linear_new(ctx[i], DPM_OUT,
                                                           DPM_OUT, 1)) ||
                cg_module_params(m[i], p, DPM_NPARAM + 2) != DPM_NPARAM + 2 ||
                !(opt[i] = cg_optim_sgd_new(ctx[i], p, DPM_NPARAM + 2, &so)))
                goto out;
        } else if (!(opt[i] = dpm_optimizer(m[i], adam))) {
            goto out;
        }
    }
    dp = mpi ? cg_dp_new_mpi(m[0], opt[0], &o) : cg_dp_new(n, m, opt, &o);
    if (!dp)
        goto out;
    if (batch % cg_dp_world_size(dp) != 0 || batch > DPM_MAX_BATCH) {
        fprintf(stderr, "dp_worker: batch %d on %d replicas\n", batch,
                cg_dp_world_size(dp));
        goto out;
    }
    a.rows = batch / cg_dp_world_size(dp);
    for (a.step = 0; a.step < steps; a.step++) {
        if (a.step == die_at && cg_dp_rank(dp) == 1)
            raise(SIGKILL);
        a.fail_rank = a.step == fail_at ? 1 : -1;
        if (cg_dp_step(dp, dpm_loss, NULL, &a, NULL) != CG_OK)
            goto out;
    }
    /* The last step's overlap, by queue order. */
    if (cg_dp_get_stats(dp, &st) != CG_OK)
        goto out;
    printf("rank %d: %d buckets; the first read after %d of backward's %d "
           "launches\n", cg_dp_rank(dp), st.buckets, st.first_bucket_after,
           st.backward_launches);
    fflush(stdout);
    if (cg_dp_rank(dp) == 0 && save(argv[5], m[0]) != 0) {
        fprintf(stderr, "dp_worker: cannot write %s\n", argv[5]);
        status = 1;
        goto done;
    }
    status = 0;
    goto done;
out:
    fprintf(stderr, "dp_worker: %s\n", cg_last_error());
done:
    cg_dp_free(dp);
    for (i = 0; i < n; i++) {
        cg_optim_free(opt[i]);
        cg_module_free(m[i]);
        cg_context_free(ctx[i]);
    }
    return status;
}
