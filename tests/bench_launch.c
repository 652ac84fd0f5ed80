/* SPDX-License-Identifier: MIT */
/*
 * tests/bench_launch.c - the host time of one kernel launch: finding the
 * kernel, setting its arguments and enqueueing it, for a tiny kernel
 * (elementwise affine over 16 floats), many launches back to back with no
 * wait between them.  The queue is drained every BATCH launches outside
 * the timed part, so that a long queue does not weigh on the enqueue.
 * Also times the public op (cg_mul_scalar) end to end, output tensor and
 * all, and the host part of an MLP training step (784-512-512-10, batch
 * 128, Adam: the time until the step's calls return, before waiting for
 * the device) against the whole step.  Not run by make check (build
 * with `make tests/bench_launch`).
 *
 * usage: bench_launch [LAUNCHES]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops/internal.h"

#define BATCH 500

/* CPU seconds of the calling thread: the host's own work, which the other
 * processes of a shared machine do not stretch as they stretch wall
 * time. */
static double
cpu_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Host seconds for n launches of affine_f over x into y; without
 * enqueue, only finding the kernel and setting its arguments. */
static double
time_launches(cg_context *ctx, cg_tensor *x, cg_tensor *y, int n,
              int enqueue, double *cpu)
{
    cl_mem mx = cg__tensor_mem(x), my = cg__tensor_mem(y);
    cl_int xo = 0, nd = 1;
    cl_int8 shape = { { 16 } }, sx = { { 1 } };
    cl_uint len = 16;
    cl_float p0 = 2.0f, p1 = 0.0f;
    double t = 0, t0, c0;
    int i;

    *cpu = 0;
    c0 = cpu_now();
    for (i = 0; i < n; i++) {
        cl_kernel k;

        t0 = cg__now();
        if (cg__kernel(ctx, CG__K_AFFINE_F, &k) ||
            cg__args(k, CG__ARG(mx), CG__ARG(xo), CG__ARG(shape),
                     CG__ARG(sx), CG__ARG(nd), CG__ARG(my), CG__ARG(len),
                     CG__ARG(p0), CG__ARG(p1)) ||
            (enqueue && cg__launch1d(ctx, k, len, CG__WG)))
            return -1;
        t += cg__now() - t0;
        if ((i + 1) % BATCH == 0 || i + 1 == n) {
            /* The thread's CPU time in whole batches, without the wait. */
            *cpu += cpu_now() - c0;
            cg_context_finish(ctx);
            c0 = cpu_now();
        }
    }
    return t;
}

/* Host seconds for n lookups of the kernel an op launches (affine_fv,
 * from the op's id). */
static double
time_lookups(cg_context *ctx, int n)
{
    double t0 = cg__now();
    int i;

    for (i = 0; i < n; i++) {
        cl_kernel k;

        if (cg__kernel(ctx, CG__K_AFFINE_FV, &k))
            return -1;
    }
    return cg__now() - t0;
}

/* Host seconds for n cg_mul_scalar calls (the output freed each time). */
static double
time_ops(cg_context *ctx, cg_tensor *x, int n)
{
    double t = 0, t0;
    int i;

    for (i = 0; i < n; i++) {
        cg_tensor *y;

        t0 = cg__now();
        y = cg_mul_scalar(x, 2.0f);
        cg_tensor_free(y);
        t += cg__now() - t0;
        if (!y)
            return -1;
        if ((i + 1) % BATCH == 0)
            cg_context_finish(ctx);
    }
    cg_context_finish(ctx);
    return t;
}

/* The MLP of clgrad-bench's mlp suite: three linear layers, relu between. */
typedef struct {
    cg_module *lin[3];
    cg_tensor *params[6], *x, *t;
    cg_optimizer *opt;
} mlp;

static int
mlp_build(cg_context *ctx, mlp *m)
{
    static const int w[4] = { 784, 512, 512, 10 };
    int64_t sx[2] = { 128, 784 }, st[1] = { 128 };
    int32_t t[128];
    int i;

    for (i = 0; i < 128; i++)
        t[i] = i % 10;
    for (i = 0; i < 3; i++) {
        if (!(m->lin[i] = cg_linear_new(ctx, w[i], w[i + 1], 1)))
            return -1;
        m->params[2 * i] = cg_module_param(m->lin[i], 0, NULL);
        m->params[2 * i + 1] = cg_module_param(m->lin[i], 1, NULL);
    }
    m->x = cg_rand_normal(ctx, 2, sx, 0.0f, 1.0f);
    m->t = cg_tensor_from_host(ctx, CG_I32, 1, st, t);
    m->opt = cg_optim_adam_new(ctx, m->params, 6, NULL);
    return m->x && m->t && m->opt ? 0 : -1;
}

static void
mlp_free(mlp *m)
{
    int i;

    cg_optim_free(m->opt);
    for (i = 0; i < 3; i++)
        cg_module_free(m->lin[i]);
    cg_tensor_free(m->x);
    cg_tensor_free(m->t);
}

static int
mlp_step(mlp *m)
{
    cg_tensor *h = cg_tensor_ref(m->x), *y, *loss;
    int i, rc;

    for (i = 0; h && i < 3; i++) {
        y = cg_linear_forward(m->lin[i], h);
        cg_tensor_free(h);
        h = y;
        if (h && i < 2) {
            y = cg_relu(h);
            cg_tensor_free(h);
            h = y;
        }
    }
    loss = h ? cg_cross_entropy(h, m->t, CG_REDUCTION_MEAN,
                                CG_IGNORE_INDEX, 0.0f) : NULL;
    cg_tensor_free(h);
    if (!loss)
        return -1;
    rc = cg_backward(loss, NULL, 0);
    cg_tensor_free(loss);
    return rc || cg_optim_step(m->opt) || cg_optim_zero_grad(m->opt);
}

/* Mean host (wall and CPU) and whole times of n MLP steps, in seconds. */
static int
time_mlp(cg_context *ctx, int n, double *host, double *cpu, double *whole)
{
    mlp m;
    double t0, t1, c0;
    int i, rc;

    memset(&m, 0, sizeof m);
    rc = mlp_build(ctx, &m) || mlp_step(&m) || cg_context_finish(ctx);
    *host = *cpu = *whole = 0;
    for (i = 0; i < n && !rc; i++) {
        t0 = cg__now();
        c0 = cpu_now();
        rc = mlp_step(&m);
        t1 = cg__now();
        *cpu += cpu_now() - c0;
        rc = rc || cg_context_finish(ctx);
        *host += t1 - t0;
        *whole += cg__now() - t0;
    }
    mlp_free(&m);
    *host /= n;
    *cpu /= n;
    *whole /= n;
    return rc;
}

int
main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 20000;
    int64_t shape[1] = { 16 };
    cg_context *ctx = cg_context_new(NULL);
    cg_tensor *x, *y;
    double tk, tl, ta, to, mh, mc, mw, cl, ca;

    if (!ctx || n < 1) {
        fprintf(stderr, "bench_launch: %s\n", ctx ? "usage: bench_launch "
                "[LAUNCHES]" : cg_last_error());
        return ctx ? 2 : 1;
    }
    x = cg_tensor_new(ctx, CG_F32, 1, shape);
    y = cg_tensor_new(ctx, CG_F32, 1, shape);
    /* The first launches build the program and warm the pool. */
    if (!x || !y || time_launches(ctx, x, y, BATCH, 1, &cl) < 0 ||
        time_ops(ctx, x, BATCH) < 0 ||
        (tk = time_lookups(ctx, 50 * n)) < 0 ||
        (ta = time_launches(ctx, x, y, n, 0, &ca)) < 0 ||
        (tl = time_launches(ctx, x, y, n, 1, &cl)) < 0 ||
        (to = time_ops(ctx, x, n)) < 0 || time_mlp(ctx, 50, &mh, &mc, &mw)) {
        fprintf(stderr, "bench_launch: %s\n", cg_last_error());
        return 1;
    }
    printf("kernel lookup: %.4f us per launch\n", 1e6 * tk / (50 * n));
    printf("kernel lookup + arguments: %.3f us per launch (CPU %.3f)\n",
           1e6 * ta / n, 1e6 * ca / n);
    printf("kernel lookup + arguments + enqueue: %.2f us per launch "
           "(CPU %.2f; %d launches)\n", 1e6 * tl / n, 1e6 * cl / n, n);
    printf("cg_mul_scalar (op, output tensor, launch): %.2f us per call\n",
           1e6 * to / n);
    printf("MLP step: host %.3f ms (CPU %.3f) of %.3f ms (mean of 50 "
           "steps)\n", 1e3 * mh, 1e3 * mc, 1e3 * mw);
    cg_tensor_free(x);
    cg_tensor_free(y);
    cg_context_free(ctx);
    return 0;
}
