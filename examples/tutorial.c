/* SPDX-License-Identifier: MIT */
/*
 * examples/tutorial.c - the dynamic-graph example from the PyTorch
 * tutorial: y = mean((x + 2)^2 + 3) for x = [1, 2, 3], its value, the
 * gradient dy/dx and the graph as Graphviz DOT.
 *
 *     cc tutorial.c -o tutorial $(pkg-config --cflags --libs clgrad)
 *     ./tutorial [DOTFILE]      (then: dot -Tpng DOTFILE -o graph.png)
 *
 * The device is $CLGRAD_DEVICE, else the first GPU, else the first device.
 */
#include <stdio.h>
#include <stdlib.h>

#include <clgrad.h>

static int
fail(const char *what)
{
    fprintf(stderr, "tutorial: %s: %s\n", what, cg_last_error());
    return 1;
}

int
main(int argc, char **argv)
{
    static const float xs[3] = { 1, 2, 3 };
    int64_t n = 3;
    cg_context *ctx;
    cg_tensor *x = NULL, *a = NULL, *b = NULL, *c = NULL, *y = NULL;
    float v, g[3];
    char *dot = NULL;
    int status = 1;

    ctx = cg_context_new(NULL);
    if (!ctx)
        return fail("no OpenCL device");
    x = cg_tensor_from_host(ctx, CG_F32, 1, &n, xs);
    if (!x || cg_tensor_set_requires_grad(x, 1) != CG_OK) {
        fail("x");
        goto out;
    }
    /* Each op returns a new tensor the caller owns; a NULL input makes the
     * next op fail too, so checking the last result is enough. */
    a = cg_add_scalar(x, 2);
    b = cg_pow_scalar(a, 2);
    c = cg_add_scalar(b, 3);
    y = cg_mean(c, 0, NULL, 0);
    if (!y || cg_tensor_item(y, &v) != CG_OK) {
        fail("forward");
        goto out;
    }
    printf("y = %.4f\n", v);                         /* 19.6667 */
    /* The graph before backward: a backward without retain_graph frees
     * what links its nodes. */
    dot = cg_graph_dot(y);
    if (!dot) {
        fail("cg_graph_dot");
        goto out;
    }
    if (cg_backward(y, NULL, 0) != CG_OK ||
        cg_tensor_to_host(cg_tensor_grad(x), g, sizeof g) != CG_OK) {
        fail("backward");
        goto out;
    }
    printf("x.grad = [%.4f, %.4f, %.4f]\n", g[0], g[1], g[2]);
    if (argc > 1) {
        FILE *f = fopen(argv[1], "w");

        if (!f || fputs(dot, f) == EOF || fclose(f) != 0) {
            perror(argv[1]);
            goto out;
        }
        printf("graph written to %s\n", argv[1]);
    }
    status = 0;
out:
    free(dot);
    cg_tensor_free(y);
    cg_tensor_free(c);
    cg_tensor_free(b);
    cg_tensor_free(a);
    cg_tensor_free(x);
    cg_context_free(ctx);
    return status;
}
