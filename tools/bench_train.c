/* SPDX-License-Identifier: MIT */
/*
 * tools/bench_train.c - clgrad-bench's training-step suites against
 * PyTorch on the CPU: mlp, lstm and scaling.  A step is forward, loss,
 * backward, Adam (lr 1e-3) and zero_grad, queued without waiting; the timer
 * waits once at its end.  tools/bench_torch.py builds the same models.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef HAVE_OPENBLAS
#include <cblas.h>
#endif

#include "bench.h"

#define SPEEDUP "speedup_ratio"
#define SPEEDUP_MEANING "speed-up = PyTorch step time / clgrad step time " \
    "(above 1: clgrad is faster)"
#define PROFILE_NOTE "profile_phases_ms: medians of forward (with the " \
    "loss), backward and optimizer, timed with cg_context_finish between " \
    "them in extra steps; kernels_ms_per_step: the device time of the 8 " \
    "kernels that took most in those steps (OpenCL events)"
#define LSTM_NOTE "tokens: T * B per step; launches_per_step: kernel " \
    "launches of one whole step; forward_launches_per_time_step: those " \
    "of cg_rnn_forward alone / T; peak_device_bytes: the pool's peak " \
    "(block sizes) in a context that holds only this model; " \
    "gflop_per_step: the step's matrix products (forward, weight and " \
    "input gradients), clgrad_gflops: that over the median step time, " \
    "peak_fraction: that over the measured fp32 FMA peak; " BLAS_NOTE
#define BLAS_NOTE "openblas_products_ms: OpenBLAS's median time for " \
    "the same products (fp32 on the host, issued one by one in the " \
    "step's order), " \
    "openblas_peak_fraction: gflop_per_step over it and the peak, the " \
    "fraction the products alone reach on this machine's CPU BLAS"
#define MAX_PARAMS 32

typedef enum { M_MLP, M_LSTM, M_CHAR } model_kind;

/* A model and its training data: the MLP in (x [b, in], int32 labels
 * [b]), LSTM (x [t, b, in], MSE against target [t, b, h]), char-LSTM (ids
 * [t, b], embedding, LSTM, linear head, cross-entropy against [t * b]). */
typedef struct model {
    model_kind kind;
    int t, b, in, h, h2, out, layers, vocab, embed;
    cg_context *ctx;
    cg_module *net;             /* a sequential container */
    int nparams;
    cg_tensor *params[MAX_PARAMS];
    cg_tensor *x, *target;
    cg_optimizer *opt;
    cg_dtype precision;         /* CG_F32, or autocast's CG_BF16 / CG_F16 */
    cg_grad_scaler *scaler;     /* CG_F16's */
    uint64_t rnn_launches;      /* by the last forward's cg_rnn_forward */
} model;

static uint64_t seed = 7;


static cg_tensor *
host_tensor(cg_context *ctx, int ids, int ndim, const int64_t *shape,
            int classes)
{
    int64_t n = 1, i;
    cg_tensor *t;
    void *v;

    for (i = 0; i < ndim; i++)
        n *= shape[i];
    v = malloc((size_t)n * 4);
    for (i = 0; v && i < n; i++) {
        if (ids)
            ((int32_t *)v)[i] = (int32_t)(cg_splitmix64_next(&seed) %
                                          (uint64_t)classes);
        else
            ((float *)v)[i] = (float)(cg_splitmix64_uniform(&seed) * 2 - 1);
    }
    t = v ? cg_tensor_from_host(ctx, ids ? CG_I32 : CG_F32, ndim, shape, v)
          : NULL;
    free(v);
    return t;
}

/* Appends a new layer (NULL: its constructor failed) to m->net, which
 * owns it from then on. */
static int
add_module(model *m, cg_module *mod)
{
    if (cg_module_add(m->net, NULL, mod) == CG_OK)
        return 0;
    cg_module_free(mod);
    return -1;
}

static cg_module *
lstm_module(cg_context *ctx, int in, int h, int layers)
{
    cg_rnn_options o;

    memset(&o, 0, sizeof o);
    o.mode = CG_LSTM;
    o.input_size = in;
    o.hidden_size = h;
    o.num_layers = layers;
    return cg_rnn_new(ctx, &o);
}

static void
model_free(model *m)
{
    cg_grad_scaler_free(m->scaler);
    m->scaler = NULL;
    cg_optim_free(m->opt);
    cg_module_free(m->net);
    cg_tensor_free(m->x);
    cg_tensor_free(m->target);
    m->opt = NULL;
    m->net = NULL;
    m->nparams = 0;
    m->x = m->target = NULL;
}

/* Builds m's layers, data and optimizer on m->ctx (m's sizes set). */
static int
model_build(model *m)
{
    cg_context *ctx = m->ctx;
    int64_t s[3];
    int rc;

    if (!(m->net = cg_sequential_new(ctx))) {
        bench_fail("building the model: %s", cg_last_error());
        return -1;
    }
    switch (m->kind) {
    case M_MLP:
        rc = add_module(m, cg_linear_new(ctx, m->in, m->h, 1)) ||
             add_module(m, cg_activation_new(ctx, "relu")) ||
             add_module(m, cg_linear_new(ctx, m->h, m->h2, 1)) ||
             add_module(m, cg_activation_new(ctx, "relu")) ||
             add_module(m, cg_linear_new(ctx, m->h2, m->out, 1));
        s[0] = m->b;
        s[1] = m->in;
        m->x = rc ? NULL : host_tensor(ctx, 0, 2, s, 0);
        m->target = m->x ? host_tensor(ctx, 1, 1, s, m->out) : NULL;
        break;
    case M_LSTM:
        rc = add_module(m, lstm_module(ctx, m->in, m->h, m->layers));
        s[0] = m->t;
        s[1] = m->b;
        s[2] = m->in;
        m->x = rc ? NULL : host_tensor(ctx, 0, 3, s, 0);
        s[2] = m->h;
        m->target = m->x ? host_tensor(ctx, 0, 3, s, 0) : NULL;
        break;
    default:
        rc = add_module(m, cg_embedding_new(ctx, m->vocab, m->embed)) ||
             add_module(m, lstm_module(ctx, m->embed, m->h, m->layers)) ||
             add_module(m, cg_linear_new(ctx, m->h, m->vocab, 1));
        s[0] = m->t;
        s[1] = m->b;
        m->x = rc ? NULL : host_tensor(ctx, 1, 2, s, m->vocab);
        s[0] = (int64_t)m->t * m->b;
        m->target = m->x ? host_tensor(ctx, 1, 1, s, m->vocab) : NULL;
        break;
    }
    m->nparams = cg_module_params(m->net, m->params, MAX_PARAMS);
    m->opt = m->target && m->nparams <= MAX_PARAMS
             ? cg_optim_adam_new(ctx, m->params, m->nparams, NULL) : NULL;
    if (m->opt && m->precision == CG_F16 &&
        !(m->scaler = cg_grad_scaler_new(ctx, NULL)))
        cg_optim_free(m->opt), m->opt = NULL;
    if (!m->opt) {
        bench_fail("building the model: %s", cg_last_error());
        model_free(m);
        return -1;
    }
    return 0;
}

static uint64_t
launches(cg_context *ctx)
{
    cg_memory_stats st;

    return cg_context_stats(ctx, &st) == CG_OK ? st.kernels_enqueued : 0;
}

/* y, h_n, c_n of an LSTM module over x; the states are dropped. */
static cg_tensor *
run_lstm(model *m, cg_module *lstm, cg_tensor *x)
{
    cg_tensor *y = NULL, *hn = NULL, *cn = NULL;
    uint64_t k0 = launches(m->ctx);
    int status = cg_rnn_forward(lstm, x, NULL, NULL, NULL, &y, &hn, &cn);

    m->rnn_launches = launches(m->ctx) - k0;
    cg_tensor_free(hn);
    cg_tensor_free(cn);
    return status ? NULL : y;
}

static cg_tensor *model_loss_in(model *m);

/* Forward and loss, under autocast in 16-bit precisions. */
static cg_tensor *
model_loss(model *m)
{
    cg_tensor *loss;

    if (m->precision == CG_F32)
        return model_loss_in(m);
    if (cg_autocast_begin(m->ctx, m->precision))
        return NULL;
    loss = model_loss_in(m);
    cg_autocast_end(m->ctx);
    return loss;
}

/* Backward from loss (scaled in fp16). */
static int
model_backward(model *m, cg_tensor *loss)
{
    cg_tensor *l = m->scaler ? cg_grad_scaler_scale(m->scaler, loss)
                             : cg_tensor_ref(loss);
    int rc = l ? cg_backward(l, NULL, 0) : -1;

    cg_tensor_free(l);
    return rc;
}

/* The optimizer's step (through the scaler in fp16) and zero_grad. */
static int
model_update(model *m)
{
    if (m->scaler)
        return cg_grad_scaler_step(m->scaler, m->opt) ||
               cg_grad_scaler_update(m->scaler) ||
               cg_optim_zero_grad(m->opt);
    return cg_optim_step(m->opt) || cg_optim_zero_grad(m->opt);
}

static cg_tensor *
model_loss_in(model *m)
{
    cg_tensor *h, *y, *loss;
    int64_t s[2];

    switch (m->kind) {
    case M_MLP:
        h = cg_module_forward(m->net, m->x);
        break;
    case M_LSTM:
        y = run_lstm(m, cg_module_child(m->net, 0, NULL), m->x);
        loss = y ? cg_mse_loss(y, m->target, CG_REDUCTION_MEAN) : NULL;
        cg_tensor_free(y);
        return loss;
    default:
        h = cg_module_forward(cg_module_child(m->net, 0, NULL), m->x);
        y = h ? run_lstm(m, cg_module_child(m->net, 1, NULL), h) : NULL;
        cg_tensor_free(h);
        s[0] = (int64_t)m->t * m->b;
        s[1] = m->h;
        h = y ? cg_reshape(y, 2, s) : NULL;
        cg_tensor_free(y);
        y = h ? cg_module_forward(cg_module_child(m->net, 2, NULL), h)
              : NULL;
        cg_tensor_free(h);
        h = y;
        break;
    }
    loss = h ? cg_cross_entropy(h, m->target, CG_REDUCTION_MEAN,
                                CG_IGNORE_INDEX, 0.0f) : NULL;
    cg_tensor_free(h);
    return loss;
}

static int
model_step(void *arg)
{
    model *m = arg;
    cg_tensor *loss = model_loss(m);
    int rc;

    if (!loss)
        return -1;
    rc = model_backward(m, loss);
    cg_tensor_free(loss);
    return rc ? rc : model_update(m);
}

/* Extra steps timed phase by phase; adds profile_phases_ms to row. */
static int
model_phases(const bench *b, model *m, json_object *row)
{
    static const char *const names[3] = { "forward", "backward",
                                          "optimizer" };
    double times[3][BENCH_MAX_REPEAT], t[4];
    json_object *o;
    bstat st;
    int r, k, rc = 0;

    cg_profile_entry pe[8];
    int np = 0;

    rc = cg_context_finish(m->ctx) || cg_context_profile_reset(m->ctx);
    for (r = 0; r < b->repeat && rc == 0; r++) {
        cg_tensor *loss;

        t[0] = bench_now();
        loss = model_loss(m);
        rc = loss ? cg_context_finish(m->ctx) : -1;
        t[1] = bench_now();
        if (rc == 0)
            rc = model_backward(m, loss) || cg_context_finish(m->ctx);
        cg_tensor_free(loss);
        t[2] = bench_now();
        if (rc == 0)
            rc = model_update(m) || cg_context_finish(m->ctx);
        t[3] = bench_now();
        for (k = 0; k < 3; k++)
            times[k][r] = t[k + 1] - t[k];
    }
    if (rc) {
        bench_fail("profile: %s", cg_last_error());
        return -1;
    }
    o = json_object_new_object();
    for (k = 0; k < 3; k++) {
        bench_stat(times[k], b->repeat, &st);
        bench_add_double(o, names[k], st.med * 1e3);
    }
    json_object_object_add(row, "profile_phases_ms", o);
    /* The kernels with the most device time in those steps. */
    if (cg_context_profile(m->ctx, pe, 8, &np)) {
        bench_fail("profile: %s", cg_last_error());
        return -1;
    }
    o = json_object_new_object();
    for (k = 0; k < np && k < 8; k++)
        bench_add_double(o, pe[k].name, pe[k].total_us / 1e3 / b->repeat);
    json_object_object_add(row, "kernels_ms_per_step", o);
    return 0;
}

/* The rows of one step's products: the MLP's batch, a recurrent model's
 * T * B (its tokens). */
static size_t
step_rows(const model *m)
{
    return (size_t)m->b * (size_t)(m->kind == M_MLP ? 1 : m->t);
}

/* The floating-point operations of one training step of m, counting the
 * matrix products (2 per multiply-add) and not the elementwise work: a
 * layer's forward product F, then in backward its weight gradient (F
 * again) and its input gradient (F again) unless its input needs none
 * (the data: the MLP's first layer, the plain LSTM's first layer's
 * input projection; the char-LSTM's first layer reads the embedding,
 * whose weight learns).  The char-LSTM 2x512 (embedding 64, V65, B32,
 * T100) counts 63.5 GFLOP. */
static double
model_gflop(const model *m)
{
    double rows = (double)step_rows(m), f = 0;
    int l;

    if (m->kind == M_MLP) {
        double f1 = 2 * rows * m->in * m->h;

        return (3 * f1 - f1 + 3 * 2 * rows * ((double)m->h * m->h2 +
                                              (double)m->h2 * m->out)) * 1e-9;
    }
    for (l = 0; l < m->layers; l++) {
        double in = l ? m->h : (m->kind == M_CHAR ? m->embed : m->in);
        double proj = 2 * rows * 4.0 * m->h * in;
        double rec = 2 * rows * 4.0 * m->h * m->h;

        f += 3 * (proj + rec);
        if (l == 0 && m->kind == M_LSTM)
            f -= proj;          /* no gradient for the data */
    }
    if (m->kind == M_CHAR)
        f += 3 * 2 * rows * (double)m->h * m->vocab;
    return f * 1e-9;
}

#ifdef HAVE_OPENBLAS
/* model_gflop's products run by OpenBLAS on host buffers, in the order
 * and at the sizes a step issues them (per time step for the recurrent
 * ones, which depend on each other): the time the step's products alone
 * take on this machine's CPU BLAS, a same-run reference for the step's
 * peak_fraction.  a, b and c hold the largest operand of any of them. */
typedef struct blas_step_run {
    const model *m;
    float *a, *b, *c;
} blas_step_run;

static void
blas_mm(const blas_step_run *r, int ta, int tb, int m, int n, int k)
{
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, r->a,
                ta ? m : k, r->b, tb ? k : n, 0.0f, r->c, n);
}

/* A layer of `rows` rows from `in` to `out` features: forward x W^T, then
 * the weight gradient dY^T x and, where `dx`, the input gradient dY W. */
static void
blas_linear(const blas_step_run *r, int rows, int in, int out, int dx)
{
    blas_mm(r, 0, 1, rows, out, in);
    blas_mm(r, 1, 0, out, in, rows);
    if (dx)
        blas_mm(r, 0, 0, rows, in, out);
}

static int
blas_step(void *arg)
{
    const blas_step_run *r = arg;
    const model *m = r->m;
    int rows = (int)step_rows(m), g = 4 * m->h, l, t;

    if (m->kind == M_MLP) {
        blas_linear(r, rows, m->in, m->h, 0);
        blas_linear(r, rows, m->h, m->h2, 1);
        blas_linear(r, rows, m->h2, m->out, 1);
        return 0;
    }
    for (l = 0; l < m->layers; l++) {
        int in = l ? m->h : (m->kind == M_CHAR ? m->embed : m->in);

        /* the input projection with its two gradients, the recurrent
         * weight's gradient over the whole sequence, and per time step
         * h W_hh^T forward and dG W_hh backward */
        blas_linear(r, rows, in, g, l > 0 || m->kind == M_CHAR);
        blas_mm(r, 1, 0, g, m->h, rows);
        for (t = 0; t < m->t; t++) {
            blas_mm(r, 0, 1, m->b, g, m->h);
            blas_mm(r, 0, 0, m->b, m->h, g);
        }
    }
    if (m->kind == M_CHAR)
        blas_linear(r, rows, m->h, m->vocab, 1);
    return 0;
}

/* Adds openblas_products_ms and openblas_peak_fraction to row. */
static int
blas_row(const bench *b, const model *m, json_object *row)
{
    size_t rows = step_rows(m), n, i;
    int dims[6] = { m->in, m->h * 4, m->h2, m->out, m->vocab, m->embed };
    blas_step_run r;
    bstat st;
    int d = 0, rc = -1;

    for (i = 0; i < 6; i++)
        d = dims[i] > d ? dims[i] : d;
    /* a weight is d x d at most, activations rows x d */
    n = (rows > (size_t)d ? rows : (size_t)d) * (size_t)d;
    r.m = m;
    r.a = malloc(n * sizeof *r.a);
    r.b = malloc(n * sizeof *r.b);
    r.c = malloc(n * sizeof *r.c);
    if (r.a && r.b && r.c) {
        /* written, so that no page is the kernel's shared zero page */
        for (i = 0; i < n; i++) {
            r.a[i] = (float)(i % 7) * 0.25f - 0.75f;
            r.b[i] = (float)(i % 5) * 0.25f - 0.5f;
        }
        rc = bench_time(b, NULL, blas_step, &r, &st);
        if (rc == 0) {
            bench_add_double(row, "openblas_products_ms", st.med * 1e3);
            bench_add_double(row, "openblas_peak_fraction",
                             bench_peak_fraction(b, model_gflop(m),
                                                 st.med));
        }
    } else {
        bench_fail("openblas products: %zu floats of host memory", 3 * n);
    }
    free(r.a);
    free(r.b);
    free(r.c);
    return rc;
}
#endif

/* Adds m's row (m built and timed: st; ref is PyTorch's time); with
 * `detail`, launches and memory too; vs_fp32, when not NULL, the
 * statistics of fp32's time over m's, round by round. */
static int
model_report(bench *b, model *m, const char *name, const bstat *st,
             const bstat *ref, int detail, json_object *s,
             const bstat *vs_fp32)
{
    cg_context *ctx = m->ctx;
    json_object *row;
    cg_memory_stats ms;
    uint64_t k0;
    double tokens = (double)step_rows(m);
    int rc = 0;

    row = bench_row(name, st, ref, SPEEDUP);
    json_object_object_add(row, "precision", json_object_new_string(
        m->precision == CG_F32 ? "fp32" : m->precision == CG_BF16 ? "bf16"
                                                                  : "fp16"));
    if (vs_fp32)
        bench_add_vs_fp32(row, vs_fp32);
    bench_add_double(row, "gflop_per_step", model_gflop(m));
    bench_add_double(row, "clgrad_gflops", model_gflop(m) / st->med);
    bench_add_double(row, "peak_fraction",
                     bench_peak_fraction(b, model_gflop(m), st->med));
    if (m->kind != M_MLP) {
        bench_add_double(row, "clgrad_tokens_per_s", tokens / st->med);
        bench_add_double(row, "torch_tokens_per_s", tokens / ref->med);
    }
    if (detail) {
        k0 = launches(ctx);
        rc = model_step(m) || cg_context_finish(ctx);
        bench_add_int(row, "launches_per_step", (int64_t)(launches(ctx) -
                                                          k0));
        if (m->kind != M_MLP)
            bench_add_double(row, "forward_launches_per_time_step",
                             (double)m->rnn_launches / m->t);
        if (cg_context_stats(ctx, &ms) == CG_OK)
            bench_add_int(row, "peak_device_bytes", (int64_t)ms.peak_bytes);
    }
#ifdef HAVE_OPENBLAS
    if (rc == 0 && detail && m->precision == CG_F32)
        rc = blas_row(b, m, row);
#endif
    if (rc == 0 && b->profile)
        rc = model_phases(b, m, row);
    bench_suite_add(s, row);
    if (rc)
        bench_fail("%s: %s", name, cg_last_error());
    return rc;
}

/* Times m (built here on ctx, freed after) and adds its row; ref is
 * PyTorch's time.  With `detail`, launches and memory too. */
static int
model_row(bench *b, cg_context *ctx, model *m, const char *name,
          const bstat *ref, int detail, json_object *s)
{
    bstat st;
    int rc;

    bench_progress("%s", name);
    m->ctx = ctx;
    if (model_build(m))
        return -1;
    rc = bench_time(b, ctx, model_step, m, &st);
    if (rc)
        bench_fail("%s: %s", name, cg_last_error());
    else
        rc = model_report(b, m, name, &st, ref, detail, s, NULL);
    model_free(m);
    return rc;
}

static json_object *
train_suite(bench *b, const char *what, int nspecs, char **specs,
            bstat *ref, int *status)
{
    json_object *s;
    char ref_name[160];

    *status = bench_torch(b, nspecs, specs, ref);
    if (*status == 1)
        return bench_suite_skipped(b->torch_missing);
    if (*status)
        return NULL;
    snprintf(ref_name, sizeof ref_name, "PyTorch %s %s, %d threads: %s",
             b->torch_version, bench_torch_where(b), b->threads, what);
    s = bench_suite_new(ref_name, SPEEDUP_MEANING);
    json_object_object_add(s, "note", json_object_new_string(
        b->profile ? BLAS_NOTE "; " PROFILE_NOTE : BLAS_NOTE));
    return s;
}

/* m's rows, one per --precision, each model on a context of its own (so
 * that its peak memory is the model's), all built first and timed in
 * rounds (bench_time_rounds), so that a 16-bit row's speedup_vs_fp32 is
 * the median of fp32's time over its own in the same rounds (with the
 * rounds' min and max), not of two medians a slow spell apart: name,
 * then the precision unless it is the only one and fp32. */
static int
model_rows(bench *b, model *m, const char *name, const bstat *ref,
           json_object *s)
{
    static const char *const pname[5] = { "fp32", "", "", "fp16", "bf16" };
    int n = b->nprecision, i, built = 0, f32 = -1, rc = 0, vs32;
    double times[3][BENCH_MAX_REPEAT];
    cg_context *ctx[3];
    model ms[3];
    void *arg[3];
    bstat st[3], vs;
    char full[160];

    bench_progress("%s", name);
    for (i = 0; i < n && rc == 0; i++) {
        ms[i] = *m;
        ms[i].precision = (cg_dtype)b->precision[i];
        f32 = ms[i].precision == CG_F32 ? i : f32;
        arg[i] = &ms[i];
        ms[i].ctx = ctx[i] = bench_context(b, 0);
        if (!ctx[i] || model_build(&ms[i])) {
            cg_context_free(ctx[i]);
            rc = -1;
        } else {
            built++;
        }
    }
    if (rc == 0 && bench_time_rounds(b, n, ctx, model_step, arg, 1, times,
                                     st)) {
        bench_fail("%s: %s", name, cg_last_error());
        rc = -1;
    }
    for (i = 0; i < n && rc == 0; i++) {
        if (n == 1 && ms[i].precision == CG_F32)
            snprintf(full, sizeof full, "%s", name);
        else
            snprintf(full, sizeof full, "%s %s", name,
                     pname[ms[i].precision]);
        vs32 = f32 >= 0 && i != f32;
        if (vs32)
            bench_round_ratio(b, times, f32, i, &vs);
        rc = model_report(b, &ms[i], full, &st[i], ref, 1, s,
                          vs32 ? &vs : NULL);
    }
    for (i = 0; i < built; i++) {
        model_free(&ms[i]);
        cg_context_free(ctx[i]);
    }
    return rc;
}

json_object *
suite_mlp(bench *b)
{
    model m;
    char spec[64], *specs[1] = { spec }, what[80];
    bstat ref;
    json_object *s;
    int status, saved;

    memset(&m, 0, sizeof m);
    m.kind = M_MLP;
    m.b = b->quick ? 16 : 128;
    m.in = b->quick ? 64 : 784;
    m.h = m.h2 = b->quick ? 32 : 512;
    m.out = 10;
    snprintf(spec, sizeof spec, "mlp:%d:%d:%d:%d:%d", m.b, m.in, m.h, m.h2,
             m.out);
    /* A step of a few milliseconds: 4 x --repeat of them on both sides,
     * else one slow spell of a shared machine moves the median (on the
     * 2-core machine 5 steps gave medians of 0.66 to 1.23 in three runs). */
    saved = b->repeat;
    if (!b->quick)
        b->repeat = saved * 4 < BENCH_MAX_REPEAT ? saved * 4
                                                 : BENCH_MAX_REPEAT;
    snprintf(what, sizeof what, "linear/relu MLP, cross-entropy, Adam; "
             "%d timed steps", b->repeat);
    bench_progress("mlp: PyTorch");
    s = train_suite(b, what, 1, specs, &ref, &status);
    if (!s || status) {
        b->repeat = saved;
        return s;
    }
    snprintf(spec, sizeof spec, "%d-%d-%d-%d batch %d", m.in, m.h, m.h2,
             m.out, m.b);
    status = model_rows(b, &m, spec, &ref, s);
    b->repeat = saved;
    if (status) {
        json_object_put(s);
        return NULL;
    }
    return s;
}

json_object *
suite_lstm(bench *b)
{
    model ms[2];
    char specs_buf[2][64], *specs[2] = { specs_buf[0], specs_buf[1] };
    char name[96];
    bstat ref[2];
    json_object *s;
    int status, i;

    memset(ms, 0, sizeof ms);
    ms[0].kind = M_LSTM;
    ms[0].layers = 1;
    ms[0].in = b->quick ? 16 : 64;
    ms[0].h = b->quick ? 32 : 256;
    ms[0].b = b->quick ? 4 : 32;
    ms[0].t = b->quick ? 8 : 64;
    ms[1].kind = M_CHAR;
    ms[1].layers = 2;
    ms[1].vocab = 65;
    ms[1].embed = b->quick ? 16 : 64;
    ms[1].h = b->quick ? 32 : 512;
    ms[1].b = b->quick ? 4 : 32;
    ms[1].t = b->quick ? 10 : 100;
    snprintf(specs_buf[0], 64, "lstm:%d:%d:%d:%d:%d", ms[0].t, ms[0].b,
             ms[0].in, ms[0].h, ms[0].layers);
    snprintf(specs_buf[1], 64, "charlstm:%d:%d:%d:%d:%d:%d", ms[1].t,
             ms[1].b, ms[1].vocab, ms[1].embed, ms[1].h, ms[1].layers);
    bench_progress("lstm: PyTorch");
    s = train_suite(b, "nn.LSTM (MSE), char-LSTM (embedding, LSTM, linear, "
                    "cross-entropy), Adam", 2, specs, ref, &status);
    if (!s || status)
        return s;
    for (i = 0; i < 2; i++) {
        if (i == 0)
            snprintf(name, sizeof name, "lstm %dx%d in %d B%d T%d",
                     ms[0].layers, ms[0].h, ms[0].in, ms[0].b, ms[0].t);
        else
            snprintf(name, sizeof name, "char-lstm %dx%d V%d B%d T%d",
                     ms[1].layers, ms[1].h, ms[1].vocab, ms[1].b, ms[1].t);
        status = model_rows(b, &ms[i], name, &ref[i], s);
        if (status) {
            json_object_put(s);
            return NULL;
        }
    }
    json_object_object_add(s, "embedding_dim",
                           json_object_new_int(ms[1].embed));
    json_object_object_add(s, "note", json_object_new_string(
        b->profile ? LSTM_NOTE "; " PROFILE_NOTE : LSTM_NOTE));
    return s;
}

/* DIR/scaling.csv from the suite's rows, and DIR/scaling.svg through
 * gnuplot when it is installed. */
static int
write_csv(const bench *b, json_object *s, const int *ts, const int *bs,
          int nt, int nb)
{
    char path[4096], cmd[8400];
    json_object *rows, *r, *v, *f;
    static const char *const cols[3] = { "clgrad_ms", "reference_ms",
                                         SPEEDUP };
    static const char *const stats[3] = { "median", "min", "max" };
    FILE *out;
    int i, c, k;

    if (mkdir(b->csv_dir, 0777) && errno != EEXIST) {
        bench_fail("cannot make %s", b->csv_dir);
        return -1;
    }
    snprintf(path, sizeof path, "%s/scaling.csv", b->csv_dir);
    out = fopen(path, "w");
    if (!out) {
        bench_fail("cannot write %s", path);
        return -1;
    }
    fprintf(out, "T,B,clgrad_ms,clgrad_ms_min,clgrad_ms_max,torch_ms,"
            "torch_ms_min,torch_ms_max,speedup_ratio,speedup_ratio_min,"
            "speedup_ratio_max\n");
    json_object_object_get_ex(s, "rows", &rows);
    for (i = 0; i < nt * nb; i++) {
        r = json_object_array_get_idx(rows, (size_t)i);
        fprintf(out, "%d,%d", ts[i / nb], bs[i % nb]);
        for (c = 0; c < 3; c++) {
            json_object_object_get_ex(r, cols[c], &v);
            for (k = 0; k < 3; k++) {
                json_object_object_get_ex(v, stats[k], &f);
                fprintf(out, ",%.6g", json_object_get_double(f));
            }
        }
        fputc('\n', out);
    }
    if (fclose(out)) {
        bench_fail("cannot write %s", path);
        return -1;
    }
    if (system("command -v gnuplot >/dev/null 2>&1") != 0 ||
        strchr(b->csv_dir, '\''))
        return 0;
    snprintf(path, sizeof path, "%s/scaling.gp", b->csv_dir);
    out = fopen(path, "w");
    if (!out)
        return 0;
    fprintf(out, "set terminal svg size 800,500\n"
            "set output '%s/scaling.svg'\n"
            "set datafile separator ','\n"
            "set key top left\n"
            "set logscale xy 2\n"
            "set xlabel 'sequence length T'\n"
            "set ylabel 'training step, ms (median)'\n"
            "set title 'LSTM in %d, hidden %d: clgrad (solid) vs PyTorch "
            "CPU (dashed)'\n"
            "plot ", b->csv_dir, b->quick ? 16 : 64, b->quick ? 32 : 256);
    for (k = 0; k < nb; k++)
        fprintf(out, "%s'%s/scaling.csv' skip 1 every %d::%d using 1:3 "
                "with linespoints lc %d title 'clgrad B=%d', "
                "'%s/scaling.csv' skip 1 every %d::%d using 1:6 with "
                "linespoints dt 2 lc %d title 'PyTorch B=%d'", k ? ", " : "",
                b->csv_dir, nb, k, k + 1, bs[k], b->csv_dir, nb, k, k + 1,
                bs[k]);
    fputc('\n', out);
    fclose(out);
    snprintf(cmd, sizeof cmd, "gnuplot '%s' 2>&1", path);
    if (system(cmd) != 0)
        bench_fail("gnuplot %s failed; the CSV is written", path);
    return 0;
}

json_object *
suite_scaling(bench *b, cg_context *ctx)
{
    static const int full_t[] = { 16, 32, 64, 128, 256 };
    static const int full_b[] = { 8, 32, 128 };
    static const int quick_t[] = { 4, 8 }, quick_b[] = { 2, 4 };
    const int *ts = b->quick ? quick_t : full_t;
    const int *bs = b->quick ? quick_b : full_b;
    int nt = b->quick ? 2 : 5, nb = b->quick ? 2 : 3, n = nt * nb, i, status;
    int in = b->quick ? 16 : 64, h = b->quick ? 32 : 256;
    char buf[15][64], *specs[15], name[64], what[128];
    bstat ref[15];
    json_object *s;

    for (i = 0; i < n; i++) {
        specs[i] = buf[i];
        snprintf(buf[i], sizeof buf[i], "lstm:%d:%d:%d:%d:1", ts[i / nb],
                 bs[i % nb], in, h);
    }
    snprintf(what, sizeof what, "1-layer LSTM, input %d, hidden %d, MSE, "
             "Adam", in, h);
    bench_progress("scaling: PyTorch");
    s = train_suite(b, what, n, specs, ref, &status);
    if (!s || status)
        return s;
    for (i = 0; i < n; i++) {
        model m;

        memset(&m, 0, sizeof m);
        m.kind = M_LSTM;
        m.layers = 1;
        m.in = in;
        m.h = h;
        m.t = ts[i / nb];
        m.b = bs[i % nb];
        snprintf(name, sizeof name, "T=%d B=%d", m.t, m.b);
        if (model_row(b, ctx, &m, name, &ref[i], 0, s)) {
            json_object_put(s);
            return NULL;
        }
    }
    if (b->csv_dir && write_csv(b, s, ts, bs, nt, nb)) {
        json_object_put(s);
        return NULL;
    }
    return s;
}
