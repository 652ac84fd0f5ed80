/* SPDX-License-Identifier: MIT */
/*
 * tests/test_half_rnn.c - the recurrent layers (RNN tanh, LSTM, GRU) in
 * float16 and bfloat16: a layer put in half precision with
 * cg_module_to_dtype, run on 16-bit x, h0 and c0, against the float32
 * layer run on the same 16-bit-rounded weights and inputs (cast up
 * exactly): the output sequence, h_n and c_n, and the gradients of x, h0,
 * c0 and every parameter, of the loss sum(y wy) + sum(h_n wh) + sum(c_n
 * wc) with random weights of the dtype (so that both runs start backward
 * from the same output gradients).  One and two layers, one and two
 * directions, odd sizes (input 7, hidden 13, T 5, B 3), a hidden size on
 * the tuned, vectorised kernels (LSTM 128: VW 16, RB 8 in the shipped
 * tuning; GRU 64: the default VW 4 with no partial vector) and the GEMM
 * path (a GEMM per step for h W_hh^T, the HPROJ cell kernels); some with
 * batch_first and variable lengths (rows past their length), two with the
 * backward's weight-gradient and dx products split over the T*B rows
 * (CLGRAD_RNN_PART16, as they are at the char-LSTM's sizes).  Then
 * autocast: a float32 layer under cg_autocast_begin(ctx, CG_BF16) gives
 * bfloat16 outputs, and its float32 parameters get float32 gradients equal
 * to those of the layer cast explicitly; and the dtype rules outside
 * autocast.
 *
 * Tolerance.  The 16-bit layer computes every gate in float32 from
 * float32 sums (the input projection and h W_hh^T are float32 sums of
 * exact products of 16-bit values); what differs from the float32 layer
 * is that each stored value - h_t (the state the next step reads, the
 * output), the saved gates, and in backward each step's gate gradients -
 * is rounded once to the dtype, a relative error of at most u (2^-11 for
 * float16, 2^-8 for bfloat16; the c state and the dh / dc carries stay
 * float32).  Each step adds such roundings and carries the earlier ones
 * through a map whose gain is about 1 here (weights U(-1/sqrt(H),
 * 1/sqrt(H)), gate derivatives <= 1), so after T steps an output is off
 * by about (T + 1) u max|ref|; a second layer reads the first's rounded
 * output, and a gradient travels back through both: we allow
 *     |got - ref| <= L (T + 1) u max|ref|        (L layers)
 * per tensor (max over its elements): 6 roundings for one layer and T =
 * 5, 12 for two, where 2.1 was the worst measured (PoCL), while a value
 * computed in half (a sum rounded per term, over G H ~ 50 terms) would
 * be far beyond it.  The float32 sums themselves add ~K 2^-24, far below
 * u.  The worst observed |got - ref| / (u max|ref|) is printed per
 * dtype.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/internal.h"
#include "tensor/internal.h"
#include "testutil.h"

static const cg_dtype dts[2] = { CG_F16, CG_BF16 };

static double
unit(cg_dtype dt)
{
    return dt == CG_F16 ? ldexp(1.0, -11) : ldexp(1.0, -8);
}

/* The worst |got - ref| / (u max|ref|) seen per dtype (index into dts). */
static double g_worst[2];

typedef struct cfg {
    cg_rnn_mode mode;
    int I, H, T, B, L, bidir;
    int path;               /* CG__RNN_PATH_* */
    int batch_first;
    int varlen;             /* lengths T, 1, T - 1, 2, ... */
    int part16;             /* $CLGRAD_RNN_PART16: the backward's 16-bit
                             * products over T*B rows in parts of this many
                             * elements of the gate gradients (0: the
                             * default, one part at these sizes) */
    int packed;             /* the GEMM path on a packed W_hh */
} cfg;

static const char *const mode_name[] = { "RNN_TANH", "RNN_RELU", "LSTM",
                                         "GRU" };

/* t's elements as float32 (a 16-bit t cast up exactly); the caller
 * frees. */
static float *
host(const cg_tensor *t)
{
    size_t n = (size_t)cg_tensor_numel(t);
    float *v = malloc(n * sizeof *v);

    ck_assert_ptr_nonnull(v);
    ck_assert_msg(cg_tensor_to_host_f32(t, v, n) == CG_OK, "%s", TT_ERR);
    return v;
}

/* Random values in [-a, a) rounded to dt: *t16 of dtype dt and *ref the
 * same values in float32, both leaves requiring grad if grad is set. */
static void
pair(cg_dtype dt, int ndim, const int64_t *shape, float a, int grad,
     cg_tensor **t16, cg_tensor **ref)
{
    size_t n = 1, i;
    float *v;
    int d;

    for (d = 0; d < ndim; d++)
        n *= (size_t)shape[d];
    v = malloc(n * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (i = 0; i < n; i++)
        v[i] = a * (2.0f * (float)rand() / ((float)RAND_MAX + 1.0f) - 1.0f);
    *t16 = cg_tensor_from_host_f32(tt_ctx(), dt, ndim, shape, v);
    ck_assert_msg(*t16 != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_to_host_f32(*t16, v, n), CG_OK);
    *ref = cg_tensor_from_host_f32(tt_ctx(), CG_F32, ndim, shape, v);
    ck_assert_msg(*ref != NULL, "%s", TT_ERR);
    free(v);
    if (grad) {
        ck_assert_int_eq(cg_tensor_set_requires_grad(*t16, 1), CG_OK);
        ck_assert_int_eq(cg_tensor_set_requires_grad(*ref, 1), CG_OK);
    }
}

/* got (dtype dt) against ref (float32) within `bound` roundings of
 * max|ref|. */
static void
expect_close(const char *what, const char *name, cg_dtype dt,
             const cg_tensor *got, const cg_tensor *ref, double bound)
{
    size_t n = (size_t)cg_tensor_numel(ref), i, at = 0;
    float *a, *b;
    double mx = 0.0, e = 0.0, r;

    ck_assert_msg(got != NULL && ref != NULL, "%s %s: missing", what, name);
    ck_assert_int_eq(cg_tensor_dtype(got), dt);
    ck_assert_int_eq((int)cg_tensor_numel(got), (int)n);
    a = host(got);
    b = host(ref);
    for (i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);

        ck_assert_msg(isfinite(a[i]), "%s %s: element %zu is %g", what,
                      name, i, a[i]);
        if (fabs(b[i]) > mx)
            mx = fabs(b[i]);
        if (d > e) {
            e = d;
            at = i;
        }
    }
    r = mx > 0.0 ? e / (unit(dt) * mx) : (e > 0.0 ? INFINITY : 0.0);
    if (r > g_worst[dt == CG_BF16])
        g_worst[dt == CG_BF16] = r;
    ck_assert_msg(r <= bound, "%s %s (%s): element %zu is %.7g, reference "
                  "%.7g: |error| %.3g is %.2f roundings of max|ref| %.4g, "
                  "bound %.1f", what, name, cg__dtype_name(dt), at,
                  (double)a[at], (double)b[at], e, r, mx, bound);
    free(a);
    free(b);
}

/* sum(t * w) as a tensor of t's dtype. */
static cg_tensor *
weighted(cg_tensor *t, cg_tensor *w)
{
    cg_tensor *p = cg_mul(t, w), *s = p ? cg_sum(p, 0, NULL, 0) : NULL;

    ck_assert_msg(s != NULL, "%s", TT_ERR);
    cg_tensor_free(p);
    return s;
}

/* acc + t, both freed; acc may be NULL. */
static cg_tensor *
add_to(cg_tensor *acc, cg_tensor *t)
{
    cg_tensor *r;

    if (!acc)
        return t;
    r = cg_add(acc, t);
    ck_assert_msg(r != NULL, "%s", TT_ERR);
    cg_tensor_free(acc);
    cg_tensor_free(t);
    return r;
}

static void
run_case(const cfg *c, cg_dtype dt)
{
    cg_context *ctx = tt_ctx();
    cg_rnn_options o;
    cg_module *m, *mr;
    int D = c->bidir ? 2 : 1, lstm = c->mode == CG_LSTM, i, np;
    int64_t xs[3] = { c->T, c->B, c->I }, ss[3] = { c->L * D, c->B, c->H };
    int64_t ys[3] = { c->T, c->B, D * c->H };
    int lengths[16];
    cg_tensor *x, *xr, *h0, *h0r, *c0 = NULL, *c0r = NULL;
    cg_tensor *wy, *wyr, *wh, *whr, *wc = NULL, *wcr = NULL;
    cg_tensor *y, *yr, *hn, *hnr, *cn = NULL, *cnr = NULL;
    cg_tensor *loss = NULL, *lossr = NULL;
    char what[96];
    double bound = (double)c->L * (c->T + 1);

    snprintf(what, sizeof what, "%s I%d H%d T%d B%d L%d D%d %s%s%s",
             mode_name[c->mode], c->I, c->H, c->T, c->B, c->L, D,
             c->path != CG__RNN_PATH_GEMM ? "fused/auto"
             : c->packed ? "gemm-packed" : "gemm",
             c->batch_first ? " batch_first" : "",
             c->varlen ? " lengths" : "");
    if (c->batch_first) {
        xs[0] = ys[0] = c->B;
        xs[1] = ys[1] = c->T;
    }
    ck_assert_int_le(c->B, 16);
    for (i = 0; i < c->B; i++)
        lengths[i] = i % 2 ? (i / 2 < c->T ? i / 2 + 1 : c->T)
                           : (c->T - i / 2 > 0 ? c->T - i / 2 : 1);
    memset(&o, 0, sizeof o);
    o.mode = c->mode;
    o.input_size = c->I;
    o.hidden_size = c->H;
    o.num_layers = c->L;
    o.bidirectional = c->bidir;
    o.batch_first = c->batch_first;
    ck_assert_int_eq(cg_manual_seed(ctx, 19), CG_OK);
    m = cg_rnn_new(ctx, &o);
    mr = cg_rnn_new(ctx, &o);
    ck_assert_msg(m != NULL && mr != NULL, "%s", TT_ERR);
    if (c->path != CG__RNN_PATH_AUTO) {
        ck_assert_int_eq(cg__rnn_set_path(m, c->path), CG_OK);
        ck_assert_int_eq(cg__rnn_set_path(mr, c->path), CG_OK);
        /* the float32 reference on cg__sgemm's products, so that it
         * checks the packed W_hh's */
        ck_assert_int_eq(cg__rnn_set_packed(m, c->packed), CG_OK);
        ck_assert_int_eq(cg__rnn_set_packed(mr, 0), CG_OK);
    }
    /* The reference layer gets m's parameters rounded to dt, as
     * cg_module_to_dtype rounds them. */
    np = cg_module_num_params(m);
    for (i = 0; i < np; i++) {
        cg_tensor *p = cg_module_param(m, i, NULL);
        cg_tensor *pr = cg_module_param(mr, i, NULL);
        size_t n = (size_t)cg_tensor_numel(p);
        float *v = host(p);
        int64_t shape[CG_MAX_DIMS];
        cg_tensor *r;

        ck_assert_int_eq(cg_tensor_shape(p, shape), CG_OK);
        r = cg_tensor_from_host_f32(ctx, dt, cg_tensor_ndim(p), shape, v);
        ck_assert_msg(r != NULL, "%s", TT_ERR);
        ck_assert_int_eq(cg_tensor_to_host_f32(r, v, n), CG_OK);
        ck_assert_int_eq(cg_tensor_write(pr, v, n * sizeof *v), CG_OK);
        cg_tensor_free(r);
        free(v);
    }
    ck_assert_msg(cg_module_to_dtype(m, dt) == CG_OK, "%s", TT_ERR);

    pair(dt, 3, xs, 1.0f, 1, &x, &xr);
    pair(dt, 3, ss, 0.5f, 1, &h0, &h0r);
    if (lstm)
        pair(dt, 3, ss, 0.5f, 1, &c0, &c0r);
    pair(dt, 3, ys, 1.0f, 0, &wy, &wyr);
    pair(dt, 3, ss, 1.0f, 0, &wh, &whr);
    if (lstm)
        pair(dt, 3, ss, 1.0f, 0, &wc, &wcr);

    if (c->part16) {
        char v[16];

        snprintf(v, sizeof v, "%d", c->part16);
        ck_assert_int_eq(setenv("CLGRAD_RNN_PART16", v, 1), 0);
    }
    ck_assert_msg(cg_rnn_forward(m, x, h0, c0, c->varlen ? lengths : NULL,
                                 &y, &hn, lstm ? &cn : NULL) == CG_OK,
                  "%s (%s): %s", what, cg__dtype_name(dt), TT_ERR);
    ck_assert_msg(cg_rnn_forward(mr, xr, h0r, c0r,
                                 c->varlen ? lengths : NULL, &yr, &hnr,
                                 lstm ? &cnr : NULL) == CG_OK, "%s", TT_ERR);
    expect_close(what, "output", dt, y, yr, bound);
    expect_close(what, "h_n", dt, hn, hnr, bound);
    if (lstm)
        expect_close(what, "c_n", dt, cn, cnr, bound);

    loss = add_to(weighted(y, wy), weighted(hn, wh));
    lossr = add_to(weighted(yr, wyr), weighted(hnr, whr));
    if (lstm) {
        loss = add_to(loss, weighted(cn, wc));
        lossr = add_to(lossr, weighted(cnr, wcr));
    }
    ck_assert_msg(cg_backward(loss, NULL, 0) == CG_OK, "%s", TT_ERR);
    ck_assert_msg(cg_backward(lossr, NULL, 0) == CG_OK, "%s", TT_ERR);
    if (c->part16)
        ck_assert_int_eq(unsetenv("CLGRAD_RNN_PART16"), 0);
    expect_close(what, "grad x", dt, cg_tensor_grad(x), cg_tensor_grad(xr),
                 bound);
    expect_close(what, "grad h0", dt, cg_tensor_grad(h0),
                 cg_tensor_grad(h0r), bound);
    if (lstm)
        expect_close(what, "grad c0", dt, cg_tensor_grad(c0),
                     cg_tensor_grad(c0r), bound);
    for (i = 0; i < np; i++) {
        const char *name;
        cg_tensor *p = cg_module_param(m, i, &name);
        cg_tensor *pr = cg_module_param(mr, i, NULL);
        char g[64];

        snprintf(g, sizeof g, "grad %s", name);
        expect_close(what, g, dt, cg_tensor_grad(p), cg_tensor_grad(pr),
                     bound);
    }

    cg_tensor_free(loss);
    cg_tensor_free(lossr);
    cg_tensor_free(y);
    cg_tensor_free(yr);
    cg_tensor_free(hn);
    cg_tensor_free(hnr);
    cg_tensor_free(cn);
    cg_tensor_free(cnr);
    cg_tensor_free(x);
    cg_tensor_free(xr);
    cg_tensor_free(h0);
    cg_tensor_free(h0r);
    cg_tensor_free(c0);
    cg_tensor_free(c0r);
    cg_tensor_free(wy);
    cg_tensor_free(wyr);
    cg_tensor_free(wh);
    cg_tensor_free(whr);
    cg_tensor_free(wc);
    cg_tensor_free(wcr);
    cg_module_free(m);
    cg_module_free(mr);
}

static const cfg odd_cases[] = {
    { CG_LSTM, 7, 13, 5, 3, 1, 0, CG__RNN_PATH_FUSED, 0, 0, 0, 0 },
    { CG_LSTM, 7, 13, 5, 3, 2, 1, CG__RNN_PATH_FUSED, 0, 0, 0, 0 },
    { CG_LSTM, 7, 13, 5, 3, 2, 1, CG__RNN_PATH_FUSED, 1, 1, 250, 0 },
    { CG_GRU, 7, 13, 5, 3, 2, 0, CG__RNN_PATH_FUSED, 0, 0, 0, 0 },
    { CG_GRU, 7, 13, 5, 3, 1, 1, CG__RNN_PATH_FUSED, 0, 1, 0, 0 },
    { CG_RNN_TANH, 7, 13, 5, 3, 2, 1, CG__RNN_PATH_FUSED, 0, 0, 0, 0 },
    { CG_RNN_TANH, 7, 13, 5, 3, 1, 0, CG__RNN_PATH_FUSED, 1, 1, 0, 0 },
};

static const cfg gemm_cases[] = {
    { CG_LSTM, 7, 13, 5, 3, 1, 1, CG__RNN_PATH_GEMM, 0, 0, 0, 0 },
    { CG_GRU, 7, 13, 5, 3, 2, 0, CG__RNN_PATH_GEMM, 0, 0, 100, 0 },
    { CG_RNN_TANH, 7, 13, 5, 3, 1, 0, CG__RNN_PATH_GEMM, 0, 1, 0, 0 },
    { CG_LSTM, 7, 13, 5, 3, 2, 1, CG__RNN_PATH_GEMM, 0, 1, 0, 1 },
    { CG_GRU, 7, 13, 5, 3, 1, 0, CG__RNN_PATH_GEMM, 1, 0, 100, 1 },
};

static const cfg vec_cases[] = {
    { CG_LSTM, 7, 128, 5, 3, 1, 0, CG__RNN_PATH_AUTO, 0, 0, 0, 0 },
    { CG_GRU, 16, 64, 5, 4, 1, 1, CG__RNN_PATH_AUTO, 0, 1, 0, 0 },
};

/* _i: case i / n in dtype dts[i % n], n = TT_NDTYPES (float16 only under
 * a host memory checker). */
START_TEST(odd_sizes_match_float32)
{
    run_case(&odd_cases[_i / TT_NDTYPES], dts[_i % TT_NDTYPES]);
}
END_TEST

START_TEST(gemm_path_matches_float32)
{
    run_case(&gemm_cases[_i / TT_NDTYPES], dts[_i % TT_NDTYPES]);
}
END_TEST

START_TEST(vector_path_matches_float32)
{
    run_case(&vec_cases[_i / TT_NDTYPES], dts[_i % TT_NDTYPES]);
}
END_TEST

/* A float32 LSTM under a bfloat16 autocast region: outputs in bfloat16,
 * float32 gradients for the float32 parameters and x, equal to those of
 * the layer cast explicitly (cg_module_to_dtype) run on x rounded to
 * bfloat16, whose bfloat16 gradients cast up exactly: both runs do the
 * same 16-bit computation (the autocast casts round as cg_module_to_dtype
 * does, and a gradient reaching a cast goes back to float32 exactly), and
 * the loss weights are bfloat16 values, so that sum(y wy) in float32
 * (autocast's float32 list) hands y the same gradient.  Checked within
 * one rounding of max|ref| per tensor (the results are in fact equal). */
START_TEST(autocast_runs_bfloat16_with_float32_gradients)
{
    cg_context *ctx = tt_ctx();
    cg_rnn_options o = { CG_LSTM, 7, 13, 2, 0, 0, 0.0f };
    int64_t xs[3] = { 5, 3, 7 }, ss[3] = { 2, 3, 13 }, ys[3] = { 5, 3, 13 };
    cg_module *m, *mb;
    cg_tensor *x16, *x, *h16, *h0, *c16, *c0, *w16, *w, *y, *hn, *cn, *l;
    cg_tensor *xb, *hb, *cb, *yb, *hnb, *cnb, *lb;
    int i, np;

    ck_assert_int_eq(cg_manual_seed(ctx, 7), CG_OK);
    m = cg_rnn_new(ctx, &o);
    mb = cg_rnn_new(ctx, &o);
    ck_assert_msg(m != NULL && mb != NULL, "%s", TT_ERR);
    np = cg_module_num_params(m);
    for (i = 0; i < np; i++) {
        cg_tensor *p = cg_module_param(m, i, NULL);
        float *v = host(p);

        ck_assert_int_eq(cg_tensor_write(cg_module_param(mb, i, NULL), v,
                                         (size_t)cg_tensor_numel(p) * 4),
                         CG_OK);
        free(v);
    }
    ck_assert_int_eq(cg_module_to_dtype(mb, CG_BF16), CG_OK);
    /* x, h0, c0 in float32 (leaves), and their values in bfloat16 for the
     * explicit run (the same values: pair rounds them). */
    pair(CG_BF16, 3, xs, 1.0f, 1, &x16, &x);
    pair(CG_BF16, 3, ss, 0.5f, 1, &h16, &h0);
    pair(CG_BF16, 3, ss, 0.5f, 1, &c16, &c0);
    pair(CG_BF16, 3, ys, 1.0f, 0, &w16, &w);

    ck_assert_int_eq(cg_autocast_begin(ctx, CG_BF16), CG_OK);
    ck_assert_msg(cg_rnn_forward(m, x, h0, c0, NULL, &y, &hn, &cn) == CG_OK,
                  "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_dtype(y), CG_BF16);
    ck_assert_int_eq(cg_tensor_dtype(hn), CG_BF16);
    ck_assert_int_eq(cg_tensor_dtype(cn), CG_BF16);
    l = weighted(y, w);
    ck_assert_int_eq(cg_autocast_end(ctx), CG_OK);
    ck_assert_msg(cg_backward(l, NULL, 0) == CG_OK, "%s", TT_ERR);

    ck_assert_msg(cg_rnn_forward(mb, x16, h16, c16, NULL, &yb, &hnb,
                                 &cnb) == CG_OK, "%s", TT_ERR);
    lb = weighted(yb, w16);
    ck_assert_msg(cg_backward(lb, NULL, 0) == CG_OK, "%s", TT_ERR);

    /* Compared as bfloat16 values: the explicit run's results cast up. */
    xb = cg_to_dtype(yb, CG_F32);
    expect_close("autocast", "output", CG_BF16, y, xb, 1.0);
    cg_tensor_free(xb);
    hb = cg_to_dtype(hnb, CG_F32);
    expect_close("autocast", "h_n", CG_BF16, hn, hb, 1.0);
    cg_tensor_free(hb);
    cb = cg_to_dtype(cnb, CG_F32);
    expect_close("autocast", "c_n", CG_BF16, cn, cb, 1.0);
    cg_tensor_free(cb);
    for (i = 0; i < np; i++) {
        const char *name;
        cg_tensor *g = cg_tensor_grad(cg_module_param(m, i, &name));
        cg_tensor *gb = cg_tensor_grad(cg_module_param(mb, i, NULL));
        cg_tensor *g16, *gbf;

        ck_assert_msg(g != NULL && gb != NULL, "no gradient for %s", name);
        ck_assert_int_eq(cg_tensor_dtype(g), CG_F32);
        /* g in bfloat16 against gb cast up */
        g16 = cg_to_dtype(g, CG_BF16);
        gbf = cg_to_dtype(gb, CG_F32);
        ck_assert_msg(g16 != NULL && gbf != NULL, "%s", TT_ERR);
        expect_close("autocast grad", name, CG_BF16, g16, gbf, 1.0);
        cg_tensor_free(g16);
        cg_tensor_free(gbf);
    }
    {
        struct { cg_tensor *f, *b; const char *name; } in[3] = {
            { x, x16, "x" }, { h0, h16, "h0" }, { c0, c16, "c0" } };

        for (i = 0; i < 3; i++) {
            cg_tensor *g = cg_tensor_grad(in[i].f);
            cg_tensor *g16, *gbf;

            ck_assert_msg(g != NULL, "no gradient for %s", in[i].name);
            ck_assert_int_eq(cg_tensor_dtype(g), CG_F32);
            g16 = cg_to_dtype(g, CG_BF16);
            gbf = cg_to_dtype(cg_tensor_grad(in[i].b), CG_F32);
            ck_assert_msg(g16 != NULL && gbf != NULL, "%s", TT_ERR);
            expect_close("autocast grad", in[i].name, CG_BF16, g16, gbf,
                         1.0);
            cg_tensor_free(g16);
            cg_tensor_free(gbf);
        }
    }
    cg_tensor_free(l);
    cg_tensor_free(lb);
    cg_tensor_free(y);
    cg_tensor_free(hn);
    cg_tensor_free(cn);
    cg_tensor_free(yb);
    cg_tensor_free(hnb);
    cg_tensor_free(cnb);
    cg_tensor_free(x16);
    cg_tensor_free(x);
    cg_tensor_free(h16);
    cg_tensor_free(h0);
    cg_tensor_free(c16);
    cg_tensor_free(c0);
    cg_tensor_free(w16);
    cg_tensor_free(w);
    cg_module_free(m);
    cg_module_free(mb);
}
END_TEST

/* Outside autocast x, h0, c0 and the parameters must share one dtype;
 * a refusal names both and makes nothing. */
START_TEST(mixed_dtypes_are_refused)
{
    cg_context *ctx = tt_ctx();
    cg_rnn_options o = { CG_LSTM, 7, 13, 1, 0, 0, 0.0f };
    int64_t xs[3] = { 5, 3, 7 }, ss[3] = { 1, 3, 13 };
    cg_module *m = cg_rnn_new(ctx, &o);
    cg_tensor *x16, *x, *h16, *h, *i32, *y = NULL, *hn = NULL;
    int v[105] = { 0 };

    ck_assert_msg(m != NULL, "%s", TT_ERR);
    pair(CG_F16, 3, xs, 1.0f, 0, &x16, &x);
    pair(CG_BF16, 3, ss, 1.0f, 0, &h16, &h);
    i32 = cg_tensor_from_host(ctx, CG_I32, 3, xs, v);
    ck_assert_ptr_nonnull(i32);
    /* float32 layer, float16 x */
    ck_assert_int_eq(cg_rnn_forward(m, x16, NULL, NULL, NULL, &y, &hn,
                                    NULL), CG_EDTYPE);
    ck_assert_msg(strstr(TT_ERR, "float16") && strstr(TT_ERR, "float32") &&
                  strstr(TT_ERR, "weight_ih_l0"), "%s", TT_ERR);
    ck_assert_ptr_null(y);
    ck_assert_ptr_null(hn);
    /* int32 x */
    ck_assert_int_eq(cg_rnn_forward(m, i32, NULL, NULL, NULL, &y, &hn,
                                    NULL), CG_EDTYPE);
    ck_assert_ptr_null(y);
    /* float16 layer, float32 h0 */
    ck_assert_int_eq(cg_module_to_dtype(m, CG_F16), CG_OK);
    ck_assert_int_eq(cg_rnn_forward(m, x16, h, NULL, NULL, &y, &hn, NULL),
                     CG_EDTYPE);
    ck_assert_msg(strstr(TT_ERR, "h0") && strstr(TT_ERR, "float32"), "%s",
                  TT_ERR);
    /* float16 layer, bfloat16 h0 */
    ck_assert_int_eq(cg_rnn_forward(m, x16, h16, NULL, NULL, &y, &hn, NULL),
                     CG_EDTYPE);
    ck_assert_msg(strstr(TT_ERR, "bfloat16"), "%s", TT_ERR);
    ck_assert_ptr_null(y);
    ck_assert_ptr_null(hn);
    /* and in one dtype it runs */
    ck_assert_msg(cg_rnn_forward(m, x16, NULL, NULL, NULL, &y, &hn, NULL) ==
                  CG_OK, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_dtype(y), CG_F16);
    ck_assert_int_eq(cg_tensor_dtype(hn), CG_F16);
    cg_tensor_free(y);
    cg_tensor_free(hn);
    cg_tensor_free(x16);
    cg_tensor_free(x);
    cg_tensor_free(h16);
    cg_tensor_free(h);
    cg_tensor_free(i32);
    cg_module_free(m);
}
END_TEST

START_TEST(report)
{
    printf("worst |error| / (u max|ref|) over outputs and gradients: "
           "float16 %.2f, bfloat16 %.2f\n", g_worst[0], g_worst[1]);
}
END_TEST

static Suite *
half_rnn_suite(void)
{
    Suite *s = suite_create("half_rnn");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, odd_sizes_match_float32, 0, TT_NDTYPES *
                        (int)(sizeof odd_cases / sizeof odd_cases[0]));
    tcase_add_loop_test(tc, gemm_path_matches_float32, 0, TT_NDTYPES *
                        (int)(sizeof gemm_cases / sizeof gemm_cases[0]));
    tcase_add_loop_test(tc, vector_path_matches_float32, 0, TT_NDTYPES *
                        (int)(sizeof vec_cases / sizeof vec_cases[0]));
    tcase_add_test(tc, autocast_runs_bfloat16_with_float32_gradients);
    tcase_add_test(tc, mixed_dtypes_are_refused);
    tcase_add_test(tc, report);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tt_run(half_rnn_suite());
}
