/* SPDX-License-Identifier: MIT */
/*
 * tests/bench_cold.c - the wall time of README's first example (the calls
 * of examples/tutorial.c, the graph exported before backward frees it),
 * from the start of the process to the gradient on the host, and of each
 * call on the way.  Run it with empty caches to see a first user's wait:
 *     export CLGRAD_CACHE_DIR=$(mktemp -d) POCL_CACHE_DIR=$(mktemp -d)
 * Not run by make check (build with `make tests/bench_cold`).
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "clgrad.h"

static double
now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double t_start, t_last;

static void
mark(const char *what)
{
    double t = now();

    printf("%-28s %7.3f s  (at %7.3f s)\n", what, t - t_last, t - t_start);
    t_last = t;
}

int
main(void)
{
    cg_context *ctx;
    cg_tensor *x, *a, *b, *c, *y;
    int64_t n = 3;
    float v, g[3];
    char *dot;

    t_start = t_last = now();
    ctx = cg_context_new(NULL);
    if (!ctx) {
        fprintf(stderr, "bench_cold: %s\n", cg_last_error());
        return 1;
    }
    mark("cg_context_new");
    x = cg_tensor_from_host(ctx, CG_F32, 1, &n, (float[]){ 1, 2, 3 });
    cg_tensor_set_requires_grad(x, 1);
    mark("cg_tensor_from_host");
    a = cg_add_scalar(x, 2);
    mark("cg_add_scalar");
    b = cg_pow_scalar(a, 2);
    mark("cg_pow_scalar");
    c = cg_add_scalar(b, 3);
    mark("cg_add_scalar");
    y = cg_mean(c, 0, NULL, 0);
    mark("cg_mean");
    dot = y ? cg_graph_dot(y) : NULL;     /* before backward frees the graph */
    mark("cg_graph_dot");
    if (!dot || cg_tensor_item(y, &v) || cg_backward(y, NULL, 0) ||
        cg_tensor_to_host(cg_tensor_grad(x), g, sizeof g)) {
        fprintf(stderr, "bench_cold: %s\n", cg_last_error());
        return 1;
    }
    mark("item, backward, to_host");
    printf("y = %.4f, x.grad = [%.4f, %.4f, %.4f]\n", v, g[0], g[1], g[2]);
    printf("total %.3f s\n", now() - t_start);
    free(dot);
    cg_tensor_free(y);
    cg_tensor_free(c);
    cg_tensor_free(b);
    cg_tensor_free(a);
    cg_tensor_free(x);
    cg_context_free(ctx);
    return 0;
}
