/* SPDX-License-Identifier: MIT */
/*
 * tools/bench_conv.c - clgrad-bench's conv suite against PyTorch on the
 * CPU: a small CNN's training step (forward, cross-entropy, backward,
 * Adam, zero_grad) and single convolution layers at DeepBench-style
 * shapes, each direction timed on its own: forward (no graph), backward
 * to the input only and backward to the weight and bias only (the graph
 * of one forward kept, backward repeated with retain_graph).
 * tools/bench_torch.py times the same on PyTorch (in float32).  With
 * --precision, a row per precision: the CNN step's forward and loss under
 * autocast (fp16 with the loss scaler), each on a context of its own for
 * its peak memory, and the layers on 16-bit tensors.  Then a long
 * depthwise conv1d (64 channels, length 4096, padding "same", kernels of
 * 4096 down to 16 taps), forward and forward + backward, by FFT and by
 * the direct kernels (float32 only), against PyTorch's conv1d.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define SPEEDUP "speedup_ratio"
#define SPEEDUP_MEANING "speed-up = PyTorch time / clgrad time (above 1: " \
    "clgrad is faster)"
#define CONV_NOTE "gflop: the products of the direction (2 per " \
    "multiply-add); clgrad_gflops: that over clgrad's median time; " \
    "peak_fraction: that over the measured fp32 FMA peak (the target is " \
    "0.5 where the layer is compute-bound); algorithm: what the library " \
    "chose (cg_conv2d_algorithm: CLGRAD_CONV_ALGO, the tuning database, " \
    "the built-in rule); the CNN step counts its " \
    "convolutions and linear layer, forward and both gradients (no input " \
    "gradient for the data)"
#define MAX_PARAMS 16

static uint64_t seed = 11;

/* A tensor of uniform values in [-1, 1), or of class labels below
 * `classes` (int32) when classes > 0. */
static cg_tensor *random_tensor(cg_context *ctx, int ndim,
                                const int64_t *shape, int classes);

/* random_tensor's values in dtype (rounded from float32). */
static cg_tensor *
random_dt(cg_context *ctx, int ndim, const int64_t *shape, cg_dtype dt)
{
    cg_tensor *t = random_tensor(ctx, ndim, shape, 0), *u;

    if (!t || dt == CG_F32)
        return t;
    u = cg_to_dtype(t, dt);
    cg_tensor_free(t);
    return u;
}

/* A tensor of uniform values in [-1, 1), or of class labels below
 * `classes` (int32) when classes > 0. */
static cg_tensor *
random_tensor(cg_context *ctx, int ndim, const int64_t *shape, int classes)
{
    int64_t n = 1, i;
    cg_tensor *t;
    float *v;
    int d;

    for (d = 0; d < ndim; d++)
        n *= shape[d];
    if (!(v = malloc((size_t)n * sizeof *v)))
        return NULL;
    for (i = 0; i < n; i++) {
        double u = cg_splitmix64_uniform(&seed);

        if (classes > 0)
            ((int32_t *)v)[i] = (int32_t)(u * classes);
        else
            v[i] = (float)(2 * u - 1);
    }
    t = cg_tensor_from_host(ctx, classes > 0 ? CG_I32 : CG_F32, ndim, shape,
                            v);
    free(v);
    return t;
}

/* ------------------------------------------------------------------------
 * The CNN: per width k of {32, 64, 64}, conv 3x3 (padding 1), relu, max
 * pool 2x2; then flatten and linear to 10 classes.
 * ------------------------------------------------------------------------ */

typedef struct cnn {
    int n, c, hw, classes;
    const int *widths;
    int nwidths;
    cg_context *ctx;
    cg_module *net;
    cg_tensor *params[MAX_PARAMS], *x, *y;
    int nparams;
    cg_optimizer *opt;
    cg_dtype precision;         /* CG_F32, or autocast's CG_BF16 / CG_F16 */
    cg_grad_scaler *scaler;     /* CG_F16's */
} cnn;

static const char *const pname[5] = { "fp32", "", "", "fp16", "bf16" };

static const int cnn_widths[] = { 32, 64, 64 };

static int
add(cg_module *net, cg_module *layer)
{
    if (cg_module_add(net, NULL, layer) == CG_OK)
        return 0;
    cg_module_free(layer);
    return -1;
}

static void
cnn_free(cnn *m)
{
    cg_grad_scaler_free(m->scaler);
    m->scaler = NULL;
    cg_optim_free(m->opt);
    cg_module_free(m->net);
    cg_tensor_free(m->x);
    cg_tensor_free(m->y);
    m->opt = NULL;
    m->net = NULL;
    m->x = m->y = NULL;
}

static int
cnn_build(cnn *m)
{
    const int k3[2] = { 3, 3 }, k2[2] = { 2, 2 };
    cg_conv_options o;
    int64_t xs[4] = { m->n, m->c, m->hw, m->hw };
    int i, ch = m->c, side = m->hw, rc = 0;

    memset(&o, 0, sizeof o);
    o.padding[0] = o.padding[1] = 1;
    if (!(m->net = cg_sequential_new(m->ctx))) {
        bench_fail("building the CNN: %s", cg_last_error());
        return -1;
    }
    for (i = 0; i < m->nwidths && !rc; i++) {
        rc = add(m->net, cg_conv2d_new(m->ctx, ch, m->widths[i], k3, 1,
                                       &o)) ||
             add(m->net, cg_activation_new(m->ctx, "relu")) ||
             add(m->net, cg_max_pool2d_new(m->ctx, k2, NULL, NULL));
        ch = m->widths[i];
        side /= 2;
    }
    rc = rc || add(m->net, cg_flatten_new(m->ctx, 1, -1)) ||
         add(m->net, cg_linear_new(m->ctx, ch * side * side, m->classes,
                                   1));
    m->x = rc ? NULL : random_tensor(m->ctx, 4, xs, 0);
    m->y = m->x ? random_tensor(m->ctx, 1, xs, m->classes) : NULL;
    m->nparams = cg_module_params(m->net, m->params, MAX_PARAMS);
    m->opt = m->y && m->nparams <= MAX_PARAMS
             ? cg_optim_adam_new(m->ctx, m->params, m->nparams, NULL) : NULL;
    if (m->opt && m->precision == CG_F16 &&
        !(m->scaler = cg_grad_scaler_new(m->ctx, NULL)))
        cg_optim_free(m->opt), m->opt = NULL;
    if (!m->opt) {
        bench_fail("building the CNN: %s", cg_last_error());
        cnn_free(m);
        return -1;
    }
    return 0;
}

/* Forward and loss, under autocast in 16-bit precisions. */
static cg_tensor *
cnn_loss(cnn *m)
{
    cg_tensor *logits, *loss;
    int ac = m->precision != CG_F32;

    if (ac && cg_autocast_begin(m->ctx, m->precision))
        return NULL;
    logits = cg_module_forward(m->net, m->x);
    loss = logits ? cg_cross_entropy(logits, m->y, CG_REDUCTION_MEAN,
                                     CG_IGNORE_INDEX, 0.0f) : NULL;
    cg_tensor_free(logits);
    if (ac)
        cg_autocast_end(m->ctx);
    return loss;
}

static int
cnn_step(void *arg)
{
    cnn *m = arg;
    cg_tensor *loss = cnn_loss(m), *l;
    int rc;

    if (!loss)
        return -1;
    l = m->scaler ? cg_grad_scaler_scale(m->scaler, loss)
                  : cg_tensor_ref(loss);
    rc = l ? cg_backward(l, NULL, 0) : -1;
    cg_tensor_free(l);
    cg_tensor_free(loss);
    if (rc == CG_OK && m->scaler)
        rc = cg_grad_scaler_step(m->scaler, m->opt) ||
             cg_grad_scaler_update(m->scaler);
    else if (rc == CG_OK)
        rc = cg_optim_step(m->opt);
    if (rc == CG_OK)
        rc = cg_optim_zero_grad(m->opt);
    return rc;
}

/* Convolutions (3 x forward, 2 x for the first: no input gradient) and
 * the linear layer (3 x). */
static double
cnn_gflop(const cnn *m)
{
    double f = 0, side = m->hw;
    int i, ch = m->c;

    for (i = 0; i < m->nwidths; i++) {
        double fwd = 2.0 * m->n * m->widths[i] * side * side * ch * 9;

        f += (i ? 3 : 2) * fwd;
        ch = m->widths[i];
        side /= 2;
    }
    f += 3 * 2.0 * m->n * ch * side * side * m->classes;
    return f * 1e-9;
}

/* ------------------------------------------------------------------------
 * Single layers, one direction each
 * ------------------------------------------------------------------------ */

enum { DIR_FWD, DIR_DATA, DIR_WEIGHT };
static const char *const dir_names[] = { "fwd", "bwd-data", "bwd-weight" };

typedef struct layer {
    int n, c, hw, k, r, stride, pad, groups, dir;
    cg_dtype dtype;             /* of x, w, b and g */
    cg_tensor *x, *w, *b, *y, *g;
    cg_conv_options o;
} layer;

static int
out_size(const layer *l)
{
    return (l->hw + 2 * l->pad - l->r) / l->stride + 1;
}

static double
layer_gflop(const layer *l)
{
    double p = out_size(l);

    return 2.0 * l->n * l->k * p * p * (l->c / l->groups) * l->r * l->r *
           1e-9;
}

static void
layer_free(layer *l)
{
    cg_tensor_free(l->x);
    cg_tensor_free(l->w);
    cg_tensor_free(l->b);
    cg_tensor_free(l->y);
    cg_tensor_free(l->g);
    l->x = l->w = l->b = l->y = l->g = NULL;
}

static int
layer_build(layer *l, cg_context *ctx)
{
    int64_t xs[4] = { l->n, l->c, l->hw, l->hw };
    int64_t ws[4] = { l->k, l->c / l->groups, l->r, l->r }, bs = l->k;
    int64_t ys[4] = { l->n, l->k, out_size(l), out_size(l) };

    memset(&l->o, 0, sizeof l->o);
    l->o.stride[0] = l->o.stride[1] = l->stride;
    l->o.padding[0] = l->o.padding[1] = l->pad;
    l->o.groups = l->groups;
    l->x = random_dt(ctx, 4, xs, l->dtype);
    l->w = random_dt(ctx, 4, ws, l->dtype);
    l->b = random_dt(ctx, 1, &bs, l->dtype);
    l->g = random_dt(ctx, 4, ys, l->dtype);
    if (!l->x || !l->w || !l->b || !l->g)
        goto fail;
    if (l->dir == DIR_FWD)
        return 0;
    /* The graph of one forward, kept: backward repeats over it. */
    cg_tensor_set_requires_grad(l->dir == DIR_DATA ? l->x : l->w, 1);
    if (l->dir == DIR_WEIGHT)
        cg_tensor_set_requires_grad(l->b, 1);
    if (!(l->y = cg_conv2d(l->x, l->w, l->b, &l->o)))
        goto fail;
    return 0;
fail:
    bench_fail("building a conv layer: %s", cg_last_error());
    layer_free(l);
    return -1;
}

static int
layer_step(void *arg)
{
    layer *l = arg;

    if (l->dir == DIR_FWD) {
        cg_tensor *y = cg_conv2d(l->x, l->w, l->b, &l->o);

        cg_tensor_free(y);
        return y ? 0 : -1;
    }
    return cg_backward(l->y, l->g, 1);
}

/* The layers: DeepBench-style shapes small enough for two cores. */
static const layer layers[] = {
    { .n = 8, .c = 64, .hw = 28, .k = 64, .r = 3, .stride = 1, .pad = 1,
      .groups = 1 },
    { .n = 16, .c = 3, .hw = 64, .k = 32, .r = 7, .stride = 2, .pad = 3,
      .groups = 1 },
    { .n = 8, .c = 64, .hw = 28, .k = 64, .r = 3, .stride = 1, .pad = 1,
      .groups = 64 },
};
#define NLAYERS (int)(sizeof layers / sizeof layers[0])
/* The long depthwise conv1d's kernels (see below) */
static const int long_kernels[] = { 4096, 1024, 256, 64, 16 };
#define NLONG (int)(sizeof long_kernels / sizeof long_kernels[0])
#define NCASES (1 + 3 * NLAYERS + 2 * NLONG)

static void
add_gflops(const bench *b, json_object *row, double gflop, double sec)
{
    bench_add_double(row, "gflop", gflop);
    bench_add_double(row, "clgrad_gflops", gflop / sec);
    bench_add_double(row, "peak_fraction",
                     bench_peak_fraction(b, gflop, sec));
}

/* Whether a row of precision dt carries its name: unless fp32 is the
 * only one. */
static int
named(const bench *b, cg_dtype dt)
{
    return b->nprecision > 1 || dt != CG_F32;
}

/* The row of precision dt, case p of rounds timed by bench_time_rounds
 * (times) with fp32's case f32 (-1: none): its precision and, unless it
 * is fp32's, its speed-up over fp32 in those rounds (speedup_vs_fp32,
 * _min and _max). */
static void
add_precision(const bench *b, json_object *row, cg_dtype dt,
              double (*times)[BENCH_MAX_REPEAT], int f32, int p)
{
    bstat vs;

    json_object_object_add(row, "precision",
                           json_object_new_string(pname[dt]));
    if (f32 >= 0 && p != f32) {
        bench_round_ratio(b, times, f32, p, &vs);
        bench_add_vs_fp32(row, &vs);
    }
}

/* ------------------------------------------------------------------------
 * Long depthwise conv1d (an H3 / Hyena-style sequence mixer): N1, 64
 * channels, length 4096, padding "same", kernels of 4096 taps down to 16,
 * each forced to the FFT and to the direct algorithm (CLGRAD_CONV_ALGO,
 * restored after), forward (no graph) and forward + backward to x, w, b.
 * ------------------------------------------------------------------------ */

#define LONG_C 64
#define LONG_L 4096
/* --quick: length 256, kernels 256 and 16 */
#define QUICK_L 256

static int
nlong(const bench *b)
{
    return b->quick ? 2 : NLONG;
}

static int
long_len(const bench *b)
{
    return b->quick ? QUICK_L : LONG_L;
}

/* Case i's kernel (case i / 2, direction i % 2). */
static int
long_kernel(const bench *b, int i)
{
    return b->quick ? (i / 2 ? 16 : QUICK_L) : long_kernels[i / 2];
}

typedef struct long1d {
    int n, c, len, s, fwdbwd;
    cg_dtype dtype;             /* of x, w, b and g */
    cg_tensor *x, *w, *b, *g;
    cg_conv_options o;
} long1d;

static void
long1d_free(long1d *l)
{
    cg_tensor_free(l->x);
    cg_tensor_free(l->w);
    cg_tensor_free(l->b);
    cg_tensor_free(l->g);
    l->x = l->w = l->b = l->g = NULL;
}

static int
long1d_build(long1d *l, cg_context *ctx)
{
    int64_t xs[3] = { l->n, l->c, l->len }, ws[3] = { l->c, 1, l->s };
    int64_t bs = l->c;

    memset(&l->o, 0, sizeof l->o);
    l->o.groups = l->c;
    l->o.padding_same = 1;
    l->x = random_dt(ctx, 3, xs, l->dtype);
    l->w = random_dt(ctx, 3, ws, l->dtype);
    l->b = random_dt(ctx, 1, &bs, l->dtype);
    l->g = random_dt(ctx, 3, xs, l->dtype);
    if (l->x && l->w && l->b && l->g &&
        (!l->fwdbwd || (cg_tensor_set_requires_grad(l->x, 1) == CG_OK &&
                        cg_tensor_set_requires_grad(l->w, 1) == CG_OK &&
                        cg_tensor_set_requires_grad(l->b, 1) == CG_OK)))
        return 0;
    bench_fail("building a conv1d: %s", cg_last_error());
    long1d_free(l);
    return -1;
}

static int
long1d_step(void *arg)
{
    long1d *l = arg;
    cg_tensor *y = cg_conv1d(l->x, l->w, l->b, &l->o);
    int rc = y ? 0 : -1;

    if (y && l->fwdbwd) {
        cg_tensor_zero_grad(l->x);
        cg_tensor_zero_grad(l->w);
        cg_tensor_zero_grad(l->b);
        rc = cg_backward(y, l->g, 0);
    }
    cg_tensor_free(y);
    return rc;
}

/* The products of the direction (as the direct algorithm computes
 * them): N C L S each way, times 3 with the backward. */
static double
long1d_gflop(const long1d *l)
{
    return 2.0 * l->n * l->c * l->len * l->s * (l->fwdbwd ? 3 : 1) * 1e-9;
}

/* Times long1d case i (kernel i / 2, direction i % 2) in each precision
 * with `algo` forced, built first and timed in rounds as cnn_rows; the
 * rows go to s.  0, or -1 after a message. */
static int
long1d_rows(const bench *b, cg_context *ctx, int i, const char *algo,
            const bstat *ref, json_object *s)
{
    const char *old = getenv("CLGRAD_CONV_ALGO");
    int n = b->nprecision, p, built = 0, f32 = -1, rc = 0;
    double times[3][BENCH_MAX_REPEAT];
    char keep[32] = "", name[160];
    cg_context *cx[3];
    long1d ls[3];
    void *arg[3];
    bstat st[3];
    json_object *row;

    for (p = 0; p < n && rc == 0; p++) {
        memset(&ls[p], 0, sizeof ls[p]);
        ls[p].n = 1;
        ls[p].c = LONG_C;
        ls[p].len = long_len(b);
        ls[p].s = long_kernel(b, i);
        ls[p].fwdbwd = i % 2;
        ls[p].dtype = (cg_dtype)b->precision[p];
        f32 = ls[p].dtype == CG_F32 ? p : f32;
        arg[p] = &ls[p];
        cx[p] = ctx;
        if (long1d_build(&ls[p], ctx))
            rc = -1;
        else
            built++;
    }
    bench_progress("conv1d S%d %s %s", ls[0].s, i % 2 ? "fwd+bwd" : "fwd",
                   algo);
    if (old)
        snprintf(keep, sizeof keep, "%s", old);
    if (rc == 0) {
        setenv("CLGRAD_CONV_ALGO", algo, 1);
        rc = bench_time_rounds(b, n, cx, long1d_step, arg, 1, times, st);
        if (keep[0])
            setenv("CLGRAD_CONV_ALGO", keep, 1);
        else
            unsetenv("CLGRAD_CONV_ALGO");
        if (rc)
            bench_fail("conv1d: %s", cg_last_error());
    }
    for (p = 0; p < n && rc == 0; p++) {
        const long1d *l = &ls[p];

        snprintf(name, sizeof name,
                 "conv1d N%d C%d L%d S%d dw same %s %s%s%s", l->n, l->c,
                 l->len, l->s, l->fwdbwd ? "fwd+bwd" : "fwd", algo,
                 named(b, l->dtype) ? " " : "",
                 named(b, l->dtype) ? pname[l->dtype] : "");
        row = bench_row(name, &st[p], ref, SPEEDUP);
        add_precision(b, row, l->dtype, times, f32, p);
        add_gflops(b, row, long1d_gflop(l), st[p].med);
        json_object_object_add(row, "algorithm",
                               json_object_new_string(algo));
        bench_suite_add(s, row);
    }
    for (p = 0; p < built; p++)
        long1d_free(&ls[p]);
    return rc;
}

/* With --profile: the device time of the 8 kernels that took most, per
 * step, over `repeat` more steps. */
static int
profile_steps(const bench *b, cg_context *ctx, cnn *m, json_object *row)
{
    cg_profile_entry pe[8];
    json_object *o;
    int i, np = 0;

    if (cg_context_profile_reset(ctx))
        return -1;
    for (i = 0; i < b->repeat; i++)
        if (cnn_step(m))
            return -1;
    if (cg_context_profile(ctx, pe, 8, &np))
        return -1;
    o = json_object_new_object();
    for (i = 0; i < np && i < 8; i++)
        bench_add_double(o, pe[i].name, pe[i].total_us / 1e3 / b->repeat);
    json_object_object_add(row, "kernels_ms_per_step", o);
    return 0;
}

/* The CNN step in each precision, each on a context of its own (so that
 * peak_device_bytes is the model's own), all built first and timed in
 * rounds (bench_time_rounds), as the training suites' model_rows: a
 * 16-bit row's speedup_vs_fp32 is the median over rounds of fp32's time
 * over its own, with the rounds' min and max.  Rows go to s. */
static int
cnn_rows(const bench *b, const cnn *proto, const bstat *ref,
         json_object *s)
{
    int n = b->nprecision, p, built = 0, f32 = -1, rc = 0;
    double times[3][BENCH_MAX_REPEAT];
    cg_context *ctx[3];
    cnn ms[3];
    void *arg[3];
    bstat st[3];
    cg_memory_stats mem;
    json_object *row;
    char name[160];

    bench_progress("cnn");
    for (p = 0; p < n && rc == 0; p++) {
        ms[p] = *proto;
        ms[p].precision = (cg_dtype)b->precision[p];
        f32 = ms[p].precision == CG_F32 ? p : f32;
        arg[p] = &ms[p];
        ms[p].ctx = ctx[p] = bench_context(b, 0);
        if (!ctx[p] || cnn_build(&ms[p])) {
            cg_context_free(ctx[p]);
            rc = -1;
        } else {
            built++;
        }
    }
    if (rc == 0 && bench_time_rounds(b, n, ctx, cnn_step, arg, 1, times,
                                     st)) {
        bench_fail("cnn: %s", cg_last_error());
        rc = -1;
    }
    for (p = 0; p < n && rc == 0; p++) {
        snprintf(name, sizeof name, "cnn N%d %dx%dx%d conv 32,64,64%s%s",
                 ms[p].n, ms[p].c, ms[p].hw, ms[p].hw,
                 named(b, ms[p].precision) ? " " : "",
                 named(b, ms[p].precision) ? pname[ms[p].precision] : "");
        row = bench_row(name, &st[p], ref, SPEEDUP);
        add_precision(b, row, ms[p].precision, times, f32, p);
        add_gflops(b, row, cnn_gflop(&ms[p]), st[p].med);
        if (cg_context_stats(ctx[p], &mem) == CG_OK)
            bench_add_int(row, "peak_device_bytes",
                          (int64_t)mem.peak_bytes);
        if (b->profile && profile_steps(b, ctx[p], &ms[p], row)) {
            bench_fail("cnn profile: %s", cg_last_error());
            json_object_put(row);
            rc = -1;
            break;
        }
        bench_suite_add(s, row);
    }
    for (p = 0; p < built; p++) {
        cnn_free(&ms[p]);
        cg_context_free(ctx[p]);
    }
    return rc;
}

/* One layer direction in each precision on ctx, built first and timed in
 * rounds, as cnn_rows.  Rows go to s. */
static int
layer_rows(const bench *b, cg_context *ctx, const layer *proto,
           const bstat *ref, json_object *s)
{
    int n = b->nprecision, p, built = 0, f32 = -1, rc = 0;
    double times[3][BENCH_MAX_REPEAT];
    cg_context *cx[3];
    layer ls[3];
    void *arg[3];
    bstat st[3];
    json_object *row;
    const char *algo;
    char name[256];

    for (p = 0; p < n && rc == 0; p++) {
        ls[p] = *proto;
        ls[p].dtype = (cg_dtype)b->precision[p];
        f32 = ls[p].dtype == CG_F32 ? p : f32;
        arg[p] = &ls[p];
        cx[p] = ctx;
        if (layer_build(&ls[p], ctx))
            rc = -1;
        else
            built++;
    }
    if (rc == 0 && bench_time_rounds(b, n, cx, layer_step, arg, 1, times,
                                     st)) {
        bench_fail("conv layer: %s", cg_last_error());
        rc = -1;
    }
    for (p = 0; p < n && rc == 0; p++) {
        const layer *l = &ls[p];

        snprintf(name, sizeof name, "N%d C%d %d K%d %dx%d s%d%s %s%s%s",
                 l->n, l->c, l->hw, l->k, l->r, l->r, l->stride,
                 l->groups > 1 ? " dw" : "", dir_names[l->dir],
                 named(b, l->dtype) ? " " : "",
                 named(b, l->dtype) ? pname[l->dtype] : "");
        row = bench_row(name, &st[p], ref, SPEEDUP);
        add_precision(b, row, l->dtype, times, f32, p);
        add_gflops(b, row, layer_gflop(l), st[p].med);
        algo = cg_conv2d_algorithm(ctx, l->dir != DIR_FWD, l->c, l->k,
                                   l->groups);
        json_object_object_add(row, "algorithm", json_object_new_string(
                                   algo ? algo : "unknown"));
        bench_suite_add(s, row);
    }
    for (p = 0; p < built; p++)
        layer_free(&ls[p]);
    return rc;
}

json_object *
suite_conv(bench *b)
{
    char specs_buf[NCASES][96], *specs[NCASES], name[256];
    bstat ref[NCASES];
    cg_context *ctx = NULL;
    json_object *s;
    cnn m;
    int i, status, ncases;

    memset(&m, 0, sizeof m);
    m.n = b->quick ? 4 : 32;
    m.c = 3;
    m.hw = b->quick ? 8 : 32;
    m.classes = 10;
    m.widths = cnn_widths;
    m.nwidths = 3;
    snprintf(specs_buf[0], 96, "cnn:%d:%d:%d:%d", m.n, m.c, m.hw, m.classes);
    for (i = 0; i < 3 * NLAYERS; i++) {
        layer l = layers[i / 3];

        if (b->quick) {
            l.n = 2;
            l.hw = 9;
        }
        snprintf(specs_buf[1 + i], 96, "conv:%d:%d:%d:%d:%d:%d:%d:%d:%d",
                 l.n, l.c, l.hw, l.k, l.r, l.stride, l.pad, l.groups, i % 3);
    }
    for (i = 0; i < 2 * nlong(b); i++)
        snprintf(specs_buf[1 + 3 * NLAYERS + i], 96, "conv1d:1:%d:%d:%d:%d",
                 LONG_C, long_len(b), long_kernel(b, i), i % 2);
    ncases = 1 + 3 * NLAYERS + 2 * nlong(b);
    for (i = 0; i < ncases; i++)
        specs[i] = specs_buf[i];
    bench_progress("conv: PyTorch");
    status = bench_torch(b, ncases, specs, ref);
    if (status == 1)
        return bench_suite_skipped(b->torch_missing);
    if (status)
        return NULL;
    snprintf(name, sizeof name, "PyTorch %s %s, %d threads: a CNN "
             "training step (Adam), conv2d layers, each direction, and "
             "long depthwise conv1d",
             b->torch_version, bench_torch_where(b), b->threads);
    s = bench_suite_new(name, SPEEDUP_MEANING);
    json_object_object_add(s, "note", json_object_new_string(CONV_NOTE));
    if (!(ctx = bench_context(b, 0)))
        goto fail;

    if (cnn_rows(b, &m, &ref[0], s))
        goto fail;
    for (i = 0; i < 3 * NLAYERS; i++) {
        layer l = layers[i / 3];

        if (b->quick) {
            l.n = 2;
            l.hw = 9;
        }
        l.dir = i % 3;
        bench_progress("conv layer %d of %d", i + 1, 3 * NLAYERS);
        if (layer_rows(b, ctx, &l, &ref[1 + i], s))
            goto fail;
    }
    for (i = 0; i < 4 * nlong(b); i++)
        if (long1d_rows(b, ctx, i / 2, i % 2 ? "direct" : "fft",
                        &ref[1 + 3 * NLAYERS + i / 2], s))
            goto fail;
    cg_context_free(ctx);
    return s;
fail:
    cg_context_free(ctx);
    json_object_put(s);
    return NULL;
}
