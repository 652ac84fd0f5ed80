/* SPDX-License-Identifier: MIT */
/*
 * tools/bench_suites.c - clgrad-bench's suites: GEMM, bandwidth, MLP,
 * LSTM, scaling.  Each builds the same work for clgrad and its reference,
 * times both with the same warm-up and repeats, and returns a JSON object
 * with one row per case.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef HAVE_OPENBLAS
#include <cblas.h>
#endif

#include "bench.h"

#define SPEEDUP "speedup_ratio"
#define SPEEDUP_MEANING "speed-up = reference time / clgrad time (above 1: " \
    "clgrad is faster)"

/* Host random numbers for inputs (cg_splitmix64_next). */
static uint64_t rng_state = 42;


static float *
rand_floats(size_t n)
{
    float *v = malloc(n * sizeof *v);
    size_t i;

    for (i = 0; v && i < n; i++)
        v[i] = (float)(cg_splitmix64_uniform(&rng_state) * 2 - 1);
    return v;
}

/* A device tensor of uniform [-1, 1) floats from the host generator (the
 * same stream whatever the device). */
static cg_tensor *
rand_tensor(cg_context *ctx, int ndim, const int64_t *shape)
{
    int64_t n = 1;
    cg_tensor *t;
    float *v;
    int i;

    for (i = 0; i < ndim; i++)
        n *= shape[i];
    v = rand_floats((size_t)n);
    t = v ? cg_tensor_from_host(ctx, CG_F32, ndim, shape, v) : NULL;
    free(v);
    return t;
}

/* ------------------------------------------------------------------------
 * fp32 FMA peak: custom ops whose work-items run independent chains of
 * multiply-adds (mad or fma, whichever the device fuses).  Which vector
 * width and how many chains keep a device's FMA units busy differs (a CPU
 * through PoCL wants wide vectors and enough chains to cover the FMA
 * latency, a GPU scalars and many work-items), so a few shapes are timed
 * and the best one counts: a peak, not a typical figure.  At least 2048
 * work-items per compute unit: 65536 in all kept an H200 (132 units) a
 * quarter full, and it measured 29-37 TFLOP/s where clgrad-info, with
 * 2048 per unit, measured 60.
 * ------------------------------------------------------------------------ */

#define FMA_ITEMS 65536
#define FMA_ITEMS_PER_CU 2048
#define FMA_PER_ITEM 16384      /* multiply-adds per work-item */

/* The source for `chains` chains of float`width` (width 1: float), each
 * step op(a, m, c) with op mad or fma. */
static void
fma_source(char *src, size_t size, const char *op, int width, int chains)
{
    char vt[16];
    size_t n;
    int c;

    snprintf(vt, sizeof vt, width > 1 ? "float%d" : "float", width);
    n = (size_t)snprintf(src, size,
        "__kernel void fma_peak(__global const float *x,\n"
        "    __global float *y, uint n_y, __global const int *shapes,\n"
        "    __global const float *params)\n"
        "{\n"
        "    uint i = get_global_id(0);\n"
        "    int k, iters = (int)params[0];\n"
        "    %s m = (%s)(params[1]), c = (%s)(params[2]), s;\n",
        vt, vt, vt);
    for (c = 0; c < chains; c++)
        n += (size_t)snprintf(src + n, size - n,
                              "    %s a%d = (%s)(x[i] + %d.0f);\n", vt, c,
                              vt, c);
    n += (size_t)snprintf(src + n, size - n,
        "    if (i >= n_y) return;\n"
        "    for (k = 0; k < iters; k++) {\n");
    for (c = 0; c < chains; c++)
        n += (size_t)snprintf(src + n, size - n,
                              "        a%d = %s(a%d, m, c);\n", c, op, c);
    n += (size_t)snprintf(src + n, size - n, "    }\n    s = a0");
    for (c = 1; c < chains; c++)
        n += (size_t)snprintf(src + n, size - n, " + a%d", c);
    /* every lane reaches y: a compiler may drop the work of dead lanes */
    n += (size_t)snprintf(src + n, size - n, ";\n    y[i] = %s;\n}\n",
                          width == 16 ? "dot(s.lo.lo + s.lo.hi + s.hi.lo + "
                                        "s.hi.hi, (float4)(1.0f))" :
                          width == 8 ? "dot(s.lo + s.hi, (float4)(1.0f))" :
                          width == 4 ? "dot(s, (float4)(1.0f))" : "s");
    snprintf(src + n, size - n,
        "__kernel void fma_peak_b(__global const float *x,\n"
        "    __global const float *y, __global const float *gy,\n"
        "    __global float *gx, uint n_x, __global const int *shapes,\n"
        "    __global const float *params)\n"
        "{\n"
        "    uint i = get_global_id(0);\n"
        "    if (i < n_x) gx[i] = 0.0f;\n"
        "}\n");
}

typedef struct fma_run {
    cg_custom_op *op;
    cg_tensor *x;
} fma_run;

static int
fma_step(void *arg)
{
    fma_run *r = arg;
    cg_tensor *y = cg_custom_op_apply(r->op, 1, &r->x);

    cg_tensor_free(y);
    return y ? 0 : -1;
}

/* The device's native float vector width (0 if unknown). */
static unsigned
b_native_width(cg_context *ctx)
{
    cg_device_info info;

    return cg_context_device_info(ctx, &info) == CG_OK
        ? info.native_width_float : 0;
}

int
bench_fma_peak(cg_context *ctx, double *gflops)
{
    static const char *const back[] = { "fma_peak_b" };
    /* width (1, 4, 8, 16), chains, fma (1) or mad (0): a compiler may
     * keep mad a multiply and an add (PoCL 3.1 on an AVX2 CPU: 100-135
     * GFLOP/s with mad, 195-202 with fma at float8 x 8-12), and a device
     * without fused multiply-add runs fma slowly. */
    static const int shapes[][3] = {
        { 1, 16, 0 }, { 8, 16, 0 }, { 16, 8, 0 }, { 1, 16, 1 },
        { 8, 8, 1 }, { 8, 12, 1 }, { 16, 8, 1 }
    };
    cg_device_info info;
    int64_t items = FMA_ITEMS;
    char src[4096], name[64];
    cg_custom_op_def def;
    bench quiet;
    fma_run r;
    bstat st;
    size_t v;
    int status = 0;

    *gflops = 0;
    if (cg_context_device_info(ctx, &info))
        return -1;
    if ((int64_t)info.compute_units * FMA_ITEMS_PER_CU > items)
        items = (int64_t)info.compute_units * FMA_ITEMS_PER_CU;
    memset(&quiet, 0, sizeof quiet);
    quiet.warmup = 1;
    quiet.repeat = 3;
    r.x = cg_full(ctx, 1, &items, 0.5f);
    if (!r.x)
        return -1;
    for (v = 0; v < sizeof shapes / sizeof shapes[0] && !status; v++) {
        int lanes = shapes[v][0] * shapes[v][1];

        /* Vectors wider than the device's own are split by the compiler
         * (and warned about by PoCL on a CPU): not a peak. */
        if (shapes[v][0] > 1 && b_native_width(ctx) > 0 &&
            (unsigned)shapes[v][0] > b_native_width(ctx))
            continue;
        float params[3] = { (float)(FMA_PER_ITEM / lanes), 0.999f, 0.001f };

        fma_source(src, sizeof src, shapes[v][2] ? "fma" : "mad",
                   shapes[v][0], shapes[v][1]);
        snprintf(name, sizeof name, "bench.fma_peak_%s_w%d_c%d",
                 shapes[v][2] ? "fma" : "mad", shapes[v][0], shapes[v][1]);
        memset(&def, 0, sizeof def);
        def.name = name;
        def.source = src;
        def.forward_kernel = "fma_peak";
        def.backward_kernels = back;
        def.ninputs = 1;
        def.params = params;
        def.nparams = 3;
        r.op = cg_custom_op_new(ctx, &def);
        status = r.op ? bench_time(&quiet, ctx, fma_step, &r, &st) : -1;
        if (status == 0 && (double)items * FMA_PER_ITEM * 2 / st.min *
            1e-9 > *gflops)
            *gflops = (double)items * FMA_PER_ITEM * 2 / st.min * 1e-9;
        cg_custom_op_free(r.op);
    }
    cg_tensor_free(r.x);
    return status;
}

/* ------------------------------------------------------------------------
 * gemm: clgrad's GEMM entry (cg_matmul_t, which reads transposed operands
 * in place) vs OpenBLAS cblas_sgemm, at the shapes the layers run: per
 * case the library's own choice ("auto"), then each backend forced
 * (CLGRAD_GEMM=clgrad: clgrad's kernels; CLGRAD_GEMM=packed: clgrad's
 * kernels over packed operands; CLGRAD_GEMM=clblast: CLBlast),
 * each on a tuned context of its own, so that GFLOP/s of the three stand
 * side by side with OpenBLAS's from the same run.  (The name clgrad-bench
 * gives a row is "<case> <variant>".)
 * ------------------------------------------------------------------------ */
#ifdef HAVE_OPENBLAS

typedef struct gemm_case {
    const char *label;
    int m, n, k;
    int ta, tb;         /* op(A) = A^T, op(B) = B^T */
} gemm_case;

typedef struct gemm_run {
    const gemm_case *gc;
    const float *a, *b;
    float *c;
    cg_tensor *ta, *tb, *tc;
} gemm_run;

/* op(A) is m x k: A stored [m, k], or [k, m] when transposed; so B. */
static int
gemm_blas_step(void *arg)
{
    gemm_run *g = arg;
    const gemm_case *c = g->gc;

    cblas_sgemm(CblasRowMajor, c->ta ? CblasTrans : CblasNoTrans,
                c->tb ? CblasTrans : CblasNoTrans, c->m, c->n, c->k, 1.0f,
                g->a, c->ta ? c->m : c->k, g->b, c->tb ? c->k : c->n, 0.0f,
                g->c, c->n);
    return 0;
}

static int
gemm_clgrad_step(void *arg)
{
    gemm_run *g = arg;

    cg_tensor_free(g->tc);
    g->tc = cg_matmul_t(g->ta, g->tb, g->gc->ta, g->gc->tb);
    return g->tc ? 0 : -1;
}

#define GEMM_WARM_S 0.2         /* products run this long before timing */

/* Times clgrad on ctx for case gc (ref: OpenBLAS's result and time;
 * torch_st: torch.mm's time on --torch-device, or NULL); adds a row. */
static int
gemm_row(bench *b, cg_context *ctx, const gemm_case *gc, int inner,
         const float *ha, const float *hb, const float *ref,
         const bstat *ref_st, const bstat *torch_st, const char *variant,
         json_object *s)
{
    int64_t sa[2] = { gc->ta ? gc->k : gc->m, gc->ta ? gc->m : gc->k };
    int64_t sb[2] = { gc->tb ? gc->n : gc->k, gc->tb ? gc->k : gc->n };
    size_t n = (size_t)gc->m * (size_t)gc->n, i;
    double err = 0, scale = 0, flop = 2.0 * gc->m * gc->n * gc->k, t0;
    char name[96];
    json_object *row;
    gemm_run g;
    bstat st;
    float *c = malloc(n * sizeof *c);
    int rc = -1;

    bench_progress("gemm %s %s", gc->label, variant);
    memset(&g, 0, sizeof g);
    g.gc = gc;
    g.ta = cg_tensor_from_host(ctx, CG_F32, 2, sa, ha);
    g.tb = cg_tensor_from_host(ctx, CG_F32, 2, sb, hb);
    if (!c || !g.ta || !g.tb)
        goto done;
    /* GEMM_WARM_S of products before the timing: after OpenBLAS's run
     * and the pause for its threads, the first case's "auto" row ran at
     * 0.62x OpenBLAS where the same kernels forced ("packed"), timed a
     * row later, ran at 1.05x (1024^3 NN) - the runtime's threads waking
     * and the clock rising, as clgrad-tune found for its first timings. */
    for (t0 = bench_now(); bench_now() - t0 < GEMM_WARM_S;)
        if (gemm_clgrad_step(&g) || cg_context_finish(ctx))
            goto done;
    if (bench_time_n(b, ctx, gemm_clgrad_step, &g, inner, &st) ||
        cg_tensor_to_host(g.tc, c, n * sizeof *c))
        goto done;
    for (i = 0; i < n; i++) {
        err = fmax(err, fabs((double)c[i] - ref[i]));
        scale = fmax(scale, fabs((double)ref[i]));
    }
    snprintf(name, sizeof name, "%s %s", gc->label, variant);
    row = bench_row(name, &st, ref_st, SPEEDUP);
    bench_add_double(row, "clgrad_gflops", flop / st.med * 1e-9);
    bench_add_double(row, "openblas_gflops", flop / ref_st->med * 1e-9);
    bench_add_double(row, "peak_fraction",
                     bench_peak_fraction(b, flop * 1e-9, st.med));
    bench_add_double(row, "max_rel_err", scale > 0 ? err / scale : err);
    bench_add_int(row, "products_per_sample", inner);
    if (torch_st) {
        bench_add_double(row, "torch_gflops", flop / torch_st->med * 1e-9);
        bench_add_double(row, "torch_speedup", torch_st->med / st.med);
    }
    bench_suite_add(s, row);
    rc = 0;
done:
    if (rc)
        bench_fail("gemm %s: %s", gc->label, cg_last_error());
    cg_tensor_free(g.ta);
    cg_tensor_free(g.tb);
    cg_tensor_free(g.tc);
    free(c);
    return rc;
}

#define GEMM_MAX_CASES 12
#define GEMM_SAMPLE_S 0.02      /* a timed sample runs this long or more */
#define GEMM_MAX_INNER 256

/* How many back-to-back products make a sample of GEMM_SAMPLE_S, from
 * OpenBLAS's time for one (after one untimed): 1 to GEMM_MAX_INNER. */
static int
gemm_inner(gemm_run *g)
{
    double t;
    int n;

    gemm_blas_step(g);
    t = bench_now();
    gemm_blas_step(g);
    t = bench_now() - t;
    n = t > 0 ? (int)ceil(GEMM_SAMPLE_S / t) : GEMM_MAX_INNER;
    return n < 1 ? 1 : n > GEMM_MAX_INNER ? GEMM_MAX_INNER : n;
}

json_object *
suite_gemm(bench *b)
{
    /* The layers' products: the char-LSTM 2x512 (B32 T100: 3200 rows,
     * 4H = 2048) input projection x W^T, its input gradient dG W and
     * weight gradient dG^T x; the recurrent step h W_hh^T; the MLP's
     * 128-row forward, input and weight gradients. */
    static const gemm_case full[] = {
        { "1024^3 NN", 1024, 1024, 1024, 0, 0 },
        { "2048^3 NN", 2048, 2048, 2048, 0, 0 },
        { "lstm x W^T 3200x2048x512 NT", 3200, 2048, 512, 0, 1 },
        { "lstm dG W 3200x512x2048 NN", 3200, 512, 2048, 0, 0 },
        { "lstm dG^T x 2048x512x3200 TN", 2048, 512, 3200, 1, 0 },
        { "lstm step h W^T 32x2048x512 NT", 32, 2048, 512, 0, 1 },
        { "mlp x W^T 128x512x784 NT", 128, 512, 784, 0, 1 },
        { "mlp dY W 128x784x512 NN", 128, 784, 512, 0, 0 },
        { "mlp dY^T x 512x784x128 TN", 512, 784, 128, 1, 0 },
    };
    static const gemm_case quick[] = {
        { "64^3 NN", 64, 64, 64, 0, 0 },
        { "lstm H32 B4 4x128x32 NT", 4, 128, 32, 0, 1 },
        { "33x17x40 TN", 33, 17, 40, 1, 0 },
    };
    /* The variants: the library's choice, then each backend forced. */
    static const char *const variant[4] = { "auto", "clgrad", "packed",
                                            "clblast" };
    const gemm_case *cases = b->quick ? quick : full;
    int ncases = b->quick ? 3 : (int)(sizeof full / sizeof full[0]), i, v;
    float *a[GEMM_MAX_CASES] = { 0 }, *bm[GEMM_MAX_CASES] = { 0 };
    float *ref[GEMM_MAX_CASES] = { 0 };
    bstat ref_st[GEMM_MAX_CASES], torch_st[GEMM_MAX_CASES];
    int inner[GEMM_MAX_CASES];
    char spec[GEMM_MAX_CASES][64], *specs[GEMM_MAX_CASES];
    int have_torch = 0;
    const char *saved = getenv("CLGRAD_GEMM");
    char *keep = saved ? strdup(saved) : NULL;
    json_object *s;
    char what[256];

    snprintf(what, sizeof what, "OpenBLAS cblas_sgemm (core %s, %d threads)",
             openblas_get_corename(), openblas_get_num_threads());
    s = bench_suite_new(what, SPEEDUP_MEANING);
    json_object_object_add(s, "note", json_object_new_string(
        "per product, from samples of products_per_sample back-to-back "
        "products and one wait, as a training step issues them (at least "
        "20 ms of OpenBLAS's time; the same count on each side); "
        "auto: the library's choice of backend (tuned context); clgrad, "
        "packed, clblast: that backend forced (CLGRAD_GEMM); peak_fraction: "
        "clgrad_gflops / the measured fp32 FMA peak; max_rel_err: max "
        "|clgrad - OpenBLAS| / max |OpenBLAS|; with --torch-device, "
        "torch_gflops and torch_speedup: torch.mm there, its time / "
        "clgrad's"));
    for (i = 0; i < ncases; i++) {
        gemm_run g;

        memset(&g, 0, sizeof g);
        g.gc = &cases[i];
        a[i] = rand_floats((size_t)cases[i].m * (size_t)cases[i].k);
        bm[i] = rand_floats((size_t)cases[i].k * (size_t)cases[i].n);
        ref[i] = malloc((size_t)cases[i].m * (size_t)cases[i].n *
                        sizeof(float));
        if (!a[i] || !bm[i] || !ref[i])
            goto fail;
        g.a = a[i];
        g.b = bm[i];
        g.c = ref[i];
        bench_progress("gemm %s OpenBLAS", cases[i].label);
        inner[i] = gemm_inner(&g);
        if (bench_time_n(b, NULL, gemm_blas_step, &g, inner[i], &ref_st[i]))
            goto fail;
    }
    /* On --torch-device, torch.mm there too (cuBLAS on cuda). */
    if (b->torch_device) {
        int rc;

        for (i = 0; i < ncases; i++) {
            snprintf(spec[i], sizeof spec[i], "gemm:%d:%d:%d:%d:%d:%d",
                     cases[i].m, cases[i].n, cases[i].k, cases[i].ta,
                     cases[i].tb, inner[i]);
            specs[i] = spec[i];
        }
        bench_progress("gemm torch.mm on %s", b->torch_device);
        if ((rc = bench_torch(b, ncases, specs, torch_st)) < 0)
            goto fail;
        have_torch = rc == 0;
        for (i = 0; have_torch && i < ncases; i++) {
            torch_st[i].med /= inner[i];
            torch_st[i].min /= inner[i];
            torch_st[i].max /= inner[i];
        }
        if (!have_torch)
            json_object_object_add(s, "torch_skipped",
                                   json_object_new_string(b->torch_missing));
    }
    /* OpenBLAS's idle threads spin for a while before they sleep: let
     * them settle before the OpenCL runtime's threads are timed. */
    usleep(300000);
    for (i = 0; i < ncases; i++)
        for (v = 0; v < 4; v++) {
            cg_context *ctx;
            int rc;

            /* Read at a context's first product: a context per variant. */
            if (v == 0 && keep)
                setenv("CLGRAD_GEMM", keep, 1);
            else if (v == 0)
                unsetenv("CLGRAD_GEMM");
            else
                setenv("CLGRAD_GEMM", variant[v], 1);
            ctx = bench_context(b, 0);
            rc = !ctx || gemm_row(b, ctx, &cases[i], inner[i], a[i], bm[i],
                                  ref[i], &ref_st[i],
                                  have_torch ? &torch_st[i] : NULL,
                                  variant[v], s);
            cg_context_free(ctx);
            if (rc)
                goto fail;
        }
    if (0) {
fail:
        json_object_put(s);
        s = NULL;
    }
    if (keep)
        setenv("CLGRAD_GEMM", keep, 1);
    else
        unsetenv("CLGRAD_GEMM");
    free(keep);
    for (i = 0; i < ncases; i++) {
        free(a[i]);
        free(bm[i]);
        free(ref[i]);
    }
    return s;
}
#else
json_object *
suite_gemm(bench *b)
{
    (void)b;
    return bench_suite_skipped(
        "clgrad-bench was built without OpenBLAS, the reference of this "
        "suite (apt-get install libopenblas-dev, then configure and make)");
}
#endif

/* ------------------------------------------------------------------------
 * bandwidth: memory-bound kernels vs the device's copy bandwidth
 * ------------------------------------------------------------------------ */

typedef struct bw_run {
    int kind;                   /* 0 add, 1 sum, 2 adam */
    cg_tensor *a, *b;
    cg_optimizer *opt;
} bw_run;

static int
bw_step(void *arg)
{
    bw_run *r = arg;
    cg_tensor *y;

    if (r->kind == 2)
        return cg_optim_step(r->opt);
    y = r->kind == 0 ? cg_add(r->a, r->b) : cg_sum(r->a, 0, NULL, 0);
    cg_tensor_free(y);
    return y ? 0 : -1;
}

json_object *
suite_bandwidth(bench *b, cg_context *ctx)
{
    static const char *const names[3] = {
        "elementwise add (r 2N, w N)", "reduction sum (r N)",
        "adam step (r 4N, w 3N)"
    };
    static const double traffic[3] = { 3, 1, 7 };  /* floats moved per N */
    int64_t n = b->quick ? (1 << 18) : (16 << 20);
    json_object *s;
    char what[128], name[96];
    int k, rc = 0;

    snprintf(what, sizeof what, "the device's copy bandwidth, %.2f GB/s "
             "(cg_context_measure)", b->copy_gbps);
    s = bench_suite_new(what, "fraction of copy bandwidth = achieved GB/s "
                        "/ copy GB/s (reference time: the bytes moved at "
                        "copy bandwidth)");
    for (k = 0; k < 3 && rc == 0; k++) {
        bw_run r;
        bstat st, ref;
        double bytes = traffic[k] * (double)n * sizeof(float);
        json_object *row;

        memset(&r, 0, sizeof r);
        r.kind = k;
        bench_progress("bandwidth %s", names[k]);
        r.a = rand_tensor(ctx, 1, &n);
        r.b = r.a ? rand_tensor(ctx, 1, &n) : NULL;
        rc = r.b ? 0 : -1;
        if (rc == 0 && k == 2) {
            /* a gradient of ones, kept: every step updates with it */
            cg_tensor *loss;

            rc = cg_tensor_set_requires_grad(r.a, 1);
            loss = rc ? NULL : cg_sum(r.a, 0, NULL, 0);
            rc = loss ? cg_backward(loss, NULL, 0) : -1;
            cg_tensor_free(loss);
            r.opt = rc ? NULL : cg_optim_adam_new(ctx, &r.a, 1, NULL);
            rc = r.opt ? 0 : -1;
        }
        if (rc == 0)
            rc = bench_time(b, ctx, bw_step, &r, &st);
        else
            bench_fail("bandwidth: %s", cg_last_error());
        if (rc == 0) {
            ref.med = ref.min = ref.max = bytes / (b->copy_gbps * 1e9);
            snprintf(name, sizeof name, "%s", names[k]);
            row = bench_row(name, &st, &ref, "copy_bandwidth_ratio");
            bench_add_double(row, "clgrad_gbps", bytes / st.med * 1e-9);
            bench_add_int(row, "elements", n);
            bench_suite_add(s, row);
        }
        cg_optim_free(r.opt);
        cg_tensor_free(r.a);
        cg_tensor_free(r.b);
    }
    if (rc) {
        json_object_put(s);
        return NULL;
    }
    return s;
}
