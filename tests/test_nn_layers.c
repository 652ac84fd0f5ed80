/* SPDX-License-Identifier: MIT */
/*
 * tests/test_nn_layers.c - embedding, index_select, dropout, layer_norm,
 * the linear layer's product, concat, stack and split: forward against a
 * C reference in double and backward against finite differences
 * (tests/opcheck.h) on odd sizes (1, 7, 33, 257), repeated indices and
 * non-contiguous inputs; dropout's statistics, seeding and gradient;
 * bit-identical gradients from run to run; the linear layer's gradients
 * adding into existing ones, and PyTorch's F.linear results and
 * accumulated gradients (tests/fixtures/linear.txt); and bad arguments failing with the right
 * status, changing nothing.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "ops/internal.h"
#include "opcheck.h"

/* Asserts that the last error has status name `name` ("CG_ESHAPE"). */
#define ASSERT_STATUS(name)                                                  \
    ck_assert_msg(strncmp(cg_last_error(), name ":", strlen(name) + 1) == 0, \
                  "expected %s, got \"%s\"", name, cg_last_error())

static void
set_shape(oc_tensor *out, int ndim, const int64_t *shape)
{
    out->ndim = ndim;
    memcpy(out->shape, shape, (size_t)ndim * sizeof *shape);
    oc_alloc(out);
}

/* [outer, len, inner] around dimension d of t. */
static void
around(const oc_tensor *t, int d, int64_t *outer, int64_t *inner)
{
    int k;

    *outer = *inner = 1;
    for (k = 0; k < d; k++)
        *outer *= t->shape[k];
    for (k = d + 1; k < t->ndim; k++)
        *inner *= t->shape[k];
}

/* ------------------------------------------------- embedding, index_select */

static cg_tensor *
run_embedding(cg_tensor **in, const void *param)
{
    (void)param;
    return cg_embedding(in[0], in[1]);
}

static void
ref_embedding(const oc_tensor *in, oc_tensor *out, const void *param)
{
    int64_t shape[CG_MAX_DIMS], D = in[0].shape[1], j, c;

    (void)param;
    memcpy(shape, in[1].shape, sizeof shape);
    shape[in[1].ndim] = D;
    set_shape(out, in[1].ndim + 1, shape);
    for (j = 0; j < in[1].numel; j++)
        for (c = 0; c < D; c++)
            out->data[j * D + c] = in[0].data[(int64_t)in[1].data[j] * D + c];
}

START_TEST(embedding_gathers_rows_and_sums_repeats)
{
    static const struct { const char *w, *idx; int V; } cases[] = {
        { "257,7", "33", 257 }, { "257,7", "7,33", 257 },
        { "7,33", "257", 7 }, { "1,1", "7", 1 }, { "1,7", "1", 1 },
        { "33,7", "T7,33", 33 }, { "T257,7", "3,5", 257 },
        { "7,257", "2,3,1", 7 }, { "7,33", "", 7 }
    };
    oc_op op = { 0 };
    size_t c;

    op.name = "embedding";
    op.ninputs = 2;
    op.run = run_embedding;
    op.ref = ref_embedding;
    op.dtype[1] = CG_I32;
    op.no_grad[1] = 1;
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        op.lo[1] = 0;
        op.hi[1] = cases[c].V;
        oc_check(&op, NULL, cases[c].w, cases[c].idx);
    }
}
END_TEST

static cg_tensor *
run_index_select(cg_tensor **in, const void *param)
{
    return cg_index_select(in[0], *(const int *)param, in[1]);
}

static void
ref_index_select(const oc_tensor *in, oc_tensor *out, const void *param)
{
    const oc_tensor *x = &in[0];
    int d = (*(const int *)param + x->ndim) % x->ndim;
    int64_t shape[CG_MAX_DIMS], outer, inner, n = in[1].numel, V = x->shape[d];
    int64_t o, j, i;

    memcpy(shape, x->shape, sizeof shape);
    shape[d] = n;
    set_shape(out, x->ndim, shape);
    around(x, d, &outer, &inner);
    for (o = 0; o < outer; o++)
        for (j = 0; j < n; j++)
            for (i = 0; i < inner; i++)
                out->data[(o * n + j) * inner + i] =
                    x->data[(o * V + (int64_t)in[1].data[j]) * inner + i];
}

START_TEST(index_select_picks_slices_with_repeats)
{
    static const struct { const char *x, *idx; int dim, V; } cases[] = {
        { "7,33", "257", 0, 7 }, { "7,33", "7", 1, 33 },
        { "3,5,7", "9", 1, 5 }, { "T7,33", "33", -1, 33 },
        { "257", "1", 0, 257 }, { "1,7", "33", 0, 1 },
        { "2,257,3", "7", -2, 257 }
    };
    oc_op op = { 0 };
    size_t c;

    op.name = "index_select";
    op.ninputs = 2;
    op.run = run_index_select;
    op.ref = ref_index_select;
    op.dtype[1] = CG_I32;
    op.no_grad[1] = 1;
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        op.hi[1] = cases[c].V;
        oc_check(&op, &cases[c].dim, cases[c].x, cases[c].idx);
    }
}
END_TEST

START_TEST(index_select_of_int32_tensors)
{
    int64_t n = 3;
    int32_t x[3] = { 10, 20, 30 }, idx[3] = { 2, 0, 2 }, y[3];
    cg_tensor *xt = cg_tensor_from_host(tt_ctx(), CG_I32, 1, &n, x);
    cg_tensor *it = cg_tensor_from_host(tt_ctx(), CG_I32, 1, &n, idx);
    cg_tensor *yt = cg_index_select(xt, 0, it);

    ck_assert_msg(yt != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_dtype(yt), CG_I32);
    ck_assert_int_eq(cg_tensor_to_host(yt, y, sizeof y), CG_OK);
    ck_assert(y[0] == 30 && y[1] == 10 && y[2] == 30);
    cg_tensor_free(xt);
    cg_tensor_free(it);
    cg_tensor_free(yt);
}
END_TEST

/* Embedding backward for many repeats: twice, bit-identical, close to the
 * double reference, and exactly 0 for rows no index names. */
static float *
embedding_grad(cg_tensor *w, cg_tensor *idx, cg_tensor *g, size_t bytes)
{
    cg_tensor *y = cg_embedding(w, idx);
    float *out = malloc(bytes);

    ck_assert_msg(y != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_zero_grad(w), CG_OK);
    ck_assert_msg(cg_backward(y, g, 0) == CG_OK, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_to_host(cg_tensor_grad(w), out, bytes), CG_OK);
    cg_tensor_free(y);
    return out;
}

START_TEST(embedding_backward_is_deterministic)
{
    enum { V = 300, D = 33, N = 4099, USED = 257 };
    int64_t wshape[2] = { V, D }, ishape[1] = { N }, gshape[2] = { N, D };
    int32_t *idx = malloc(N * sizeof *idx);
    double *ref = calloc(V * D, sizeof *ref), err = 0;
    float *gh = malloc((size_t)N * D * sizeof *gh), *g1, *g2;
    cg_tensor *w, *it, *g;
    int64_t j, c;

    for (j = 0; j < N; j++)
        idx[j] = (int32_t)floor(oc_uniform(0, USED));
    for (j = 0; j < N * D; j++)
        gh[j] = (float)oc_uniform(-1, 1);
    for (j = 0; j < N; j++)
        for (c = 0; c < D; c++)
            ref[idx[j] * D + c] += gh[j * D + c];
    w = cg_rand_normal(tt_ctx(), 2, wshape, 0.0f, 1.0f);
    it = cg_tensor_from_host(tt_ctx(), CG_I32, 1, ishape, idx);
    g = cg_tensor_from_host(tt_ctx(), CG_F32, 2, gshape, gh);
    ck_assert(w && it && g);
    ck_assert_int_eq(cg_tensor_set_requires_grad(w, 1), CG_OK);
    g1 = embedding_grad(w, it, g, sizeof(float) * V * D);
    g2 = embedding_grad(w, it, g, sizeof(float) * V * D);
    ck_assert_int_eq(memcmp(g1, g2, sizeof(float) * V * D), 0);
    for (j = 0; j < V * D; j++) {
        if (j >= USED * D)
            ck_assert(g1[j] == 0.0f);
        err = fmax(err, fabs(g1[j] - ref[j]));
    }
    /* About 16 terms of magnitude < 1 per element: float32 rounding stays
     * far below 1e-5. */
    ck_assert_msg(err < 1e-5, "embedding grad error %g", err);
    free(idx);
    free(ref);
    free(gh);
    free(g1);
    free(g2);
    cg_tensor_free(w);
    cg_tensor_free(it);
    cg_tensor_free(g);
}
END_TEST

/* ------------------------------------------------------------- layer_norm */

typedef struct { int nnorm, has_w, has_b; } lnparam;

static cg_tensor *
run_layer_norm(cg_tensor **in, const void *param)
{
    const lnparam *p = param;
    int64_t shape[CG_MAX_DIMS];
    int nd = cg_tensor_ndim(in[0]);

    cg_tensor_shape(in[0], shape);
    return cg_layer_norm(in[0], p->nnorm, shape + nd - p->nnorm,
                         p->has_w ? in[1] : NULL,
                         p->has_b ? in[1 + p->has_w] : NULL, 1e-5f);
}

static void
ref_layer_norm(const oc_tensor *in, oc_tensor *out, const void *param)
{
    const lnparam *p = param;
    const oc_tensor *x = &in[0];
    int64_t N = 1, rows, r, j;
    int d;

    for (d = x->ndim - p->nnorm; d < x->ndim; d++)
        N *= x->shape[d];
    rows = x->numel / N;
    set_shape(out, x->ndim, x->shape);
    for (r = 0; r < rows; r++) {
        const double *xr = x->data + r * N;
        double mean = 0, var = 0;

        for (j = 0; j < N; j++)
            mean += xr[j];
        mean /= N;
        for (j = 0; j < N; j++)
            var += (xr[j] - mean) * (xr[j] - mean);
        var /= N;
        for (j = 0; j < N; j++) {
            double v = (xr[j] - mean) / sqrt(var + (double)1e-5f);

            if (p->has_w)
                v *= in[1].data[j];
            if (p->has_b)
                v += in[1 + p->has_w].data[j];
            out->data[r * N + j] = v;
        }
    }
}

START_TEST(layer_norm_matches_reference_with_and_without_affine)
{
    static const struct { const char *x, *w; int nnorm; } cases[] = {
        { "1,2", "2", 1 }, { "2,7", "7", 1 }, { "5,33", "33", 1 },
        { "3,257", "257", 1 }, { "2,3,7", "3,7", 2 }, { "T33,7", "7", 1 },
        { "4,1,7", "1,7", 2 }, { "7", "7", 1 }
    };
    static const int variants[][2] = { { 1, 1 }, { 0, 0 }, { 1, 0 },
                                       { 0, 1 } };
    static const char *names[] = { "layer_norm(w,b)", "layer_norm",
                                   "layer_norm(w)", "layer_norm(b)" };
    oc_op op = { 0 };
    size_t c, v;

    op.run = run_layer_norm;
    op.ref = ref_layer_norm;
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (v = 0; v < 4; v++) {
            lnparam p = { cases[c].nnorm, variants[v][0], variants[v][1] };

            op.name = names[v];
            op.ninputs = 1 + p.has_w + p.has_b;
            oc_check(&op, &p, cases[c].x, cases[c].w, cases[c].w);
        }
}
END_TEST

/* ----------------------------------------------------------------- linear */

static cg_tensor *
run_linear(cg_tensor **in, const void *param)
{
    const int *has_b = param;

    return cg__linear(in[0], in[1], *has_b ? in[2] : NULL);
}

/* y[..., o] = sum_i x[..., i] w[o, i] (+ b[o]) */
static void
ref_linear(const oc_tensor *in, oc_tensor *out, const void *param)
{
    const int *has_b = param;
    const oc_tensor *x = &in[0], *w = &in[1];
    int64_t shape[CG_MAX_DIMS], I = w->shape[1], O = w->shape[0], r, o, i;

    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 1] = O;
    set_shape(out, x->ndim, shape);
    for (r = 0; r < x->numel / I; r++)
        for (o = 0; o < O; o++) {
            double s = *has_b ? in[2].data[o] : 0;

            for (i = 0; i < I; i++)
                s += x->data[r * I + i] * w->data[o * I + i];
            out->data[r * O + o] = s;
        }
}

/* The linear layer's one-node product (x W^T + b, the bias in the GEMM's
 * epilogue) on 1-D to 3-D inputs, transposed views and odd offsets, with
 * and without a bias; each GEMM backend forced: CLBlast's has no
 * epilogue, and the bias is added by a separate pass. */
START_TEST(linear_matches_reference_and_gradcheck)
{
    static const char *cases[][3] = {
        { "7,33", "5,33", "5" }, { "1,1", "1,1", "1" }, { "33", "17,33", "17" },
        { "2,3,7", "13,7", "13" }, { "T33,7", "5,7", "5" },
        { "O7,5", "O3,5", "O3" }, { "9,5", "T3,5", "3" },
        { "257,3", "9,3", "9" },   /* NT through a packed W^T */
    };
    oc_op op = { 0 };
    size_t c;
    int has_b;

    if (_i == CG__GEMM_CLBLAST && tt_checker())
        return;
    cg__gemm_force(tt_ctx(), (cg__gemm_backend)_i);
    op.run = run_linear;
    op.ref = ref_linear;
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (has_b = 0; has_b < 2; has_b++) {
            op.name = has_b ? "linear(b)" : "linear";
            op.ninputs = 2 + has_b;
            oc_check(&op, &has_b, cases[c][0], cases[c][1], cases[c][2]);
        }
    cg__gemm_force(tt_ctx(), CG__GEMM_AUTO);
}
END_TEST

/* ------------------------------------------------------ linear + act */

static uint64_t
launches(void)
{
    cg_memory_stats st;

    ck_assert_int_eq(cg_context_stats(tt_ctx(), &st), CG_OK);
    return st.kernels_enqueued;
}

typedef struct actparam {
    int has_b;
    cg__act act;
} actparam;

static cg_tensor *
run_linear_act(cg_tensor **in, const void *param)
{
    const actparam *p = param;

    return cg__linear_act(in[0], in[1], p->has_b ? in[2] : NULL, p->act);
}

/* act(x W^T + b) in double */
static void
ref_linear_act(const oc_tensor *in, oc_tensor *out, const void *param)
{
    const actparam *p = param;
    int64_t i;

    ref_linear(in, out, &p->has_b);
    for (i = 0; i < out->numel; i++) {
        double z = out->data[i];

        out->data[i] = p->act == CG__ACT_RELU ? (z > 0 ? z : 0)
                     : p->act == CG__ACT_TANH ? tanh(z)
                     : 1 / (1 + exp(-z));
    }
}

/* The linear product with relu, tanh or sigmoid in its GEMM's epilogue
 * (one node "linear_relu" ...): forward against the double reference and
 * gradcheck, on the cases of the plain product, with each GEMM backend
 * forced (CLBlast's has no epilogue: the activation runs as its own op).
 * The sizes are small enough that no pre-activation sits within the
 * finite differences' step of relu's kink. */
START_TEST(linear_act_matches_reference_and_gradcheck)
{
    static const char *cases[][3] = {
        { "7,33", "5,33", "5" }, { "33", "17,33", "17" },
        { "2,3,7", "13,7", "13" }, { "T33,7", "5,7", "5" },
        { "O7,5", "O3,5", "O3" }, { "257,3", "9,3", "9" },
    };
    static const char *names[] = { "", "linear_relu", "linear_tanh",
                                   "linear_sigmoid" };
    oc_op op = { 0 };
    actparam p;
    size_t c;

    if (_i == CG__GEMM_CLBLAST && tt_checker())
        return;
    cg__gemm_force(tt_ctx(), (cg__gemm_backend)_i);
    op.run = run_linear_act;
    op.ref = ref_linear_act;
    for (p.act = CG__ACT_RELU; p.act <= CG__ACT_SIGMOID; p.act++)
        for (c = 0; c < sizeof cases / sizeof cases[0]; c++)
            for (p.has_b = 0; p.has_b < 2; p.has_b++) {
                op.name = names[p.act];
                op.ninputs = 2 + p.has_b;
                oc_check(&op, &p, cases[c][0], cases[c][1], cases[c][2]);
            }
    cg__gemm_force(tt_ctx(), CG__GEMM_AUTO);
}
END_TEST

/* Reads t (n floats, any float dtype) into out as float32. */
static void
read_f32(cg_tensor *t, float *out, size_t n)
{
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(cg_tensor_to_host_f32(t, out, n), CG_OK);
}

/* A container runs a linear layer followed by relu, tanh or sigmoid as one
 * fused op: its output and every gradient (the input's, each weight's and
 * bias's) are bit for bit those of the layers run one by one, with each
 * GEMM backend, in float32 and in bfloat16 (where only relu fuses), and
 * the fused forward launches fewer kernels. */
START_TEST(sequential_fuses_linear_and_activation)
{
    enum { N = 9, IN = 19, H = 23, OUT = 5, NP = 8 };
    static const char *acts[] = { "relu", "tanh", "sigmoid" };
    static const cg_dtype dts[] = { CG_F32, CG_BF16 };
    static const char *dtn[] = { "float32", "bfloat16" };
    int64_t xs[2] = { N, IN };
    int d, pass, i, k;

    for (d = 0; d < TT_NDTYPES; d++)
        for (k = CG__GEMM_CLBLAST; k <= CG__GEMM_PACKED; k++) {
            float out[2][N * OUT], gx[2][N * IN];
            float *gp[2][NP];
            uint64_t fwd[2];

            if (k == CG__GEMM_CLBLAST && (tt_checker() || d))
                continue;
            cg__gemm_force(tt_ctx(), (cg__gemm_backend)k);
            for (pass = 0; pass < 2; pass++) {
                cg_module *seq = cg_sequential_new(tt_ctx());
                cg_tensor *x, *x0, *y, *l, *params[NP];
                int np;

                /* the same weights both passes */
                cg_manual_seed(tt_ctx(), 42);
                ck_assert_ptr_nonnull(seq);
                ck_assert_int_eq(cg_module_add(seq, NULL,
                                 cg_linear_new(tt_ctx(), IN, H, 1)), CG_OK);
                ck_assert_int_eq(cg_module_add(seq, NULL,
                                 cg_activation_new(tt_ctx(), acts[0])),
                                 CG_OK);
                ck_assert_int_eq(cg_module_add(seq, NULL,
                                 cg_linear_new(tt_ctx(), H, H, 0)), CG_OK);
                ck_assert_int_eq(cg_module_add(seq, NULL,
                                 cg_activation_new(tt_ctx(), acts[1])),
                                 CG_OK);
                ck_assert_int_eq(cg_module_add(seq, NULL,
                                 cg_linear_new(tt_ctx(), H, H, 1)), CG_OK);
                ck_assert_int_eq(cg_module_add(seq, NULL,
                                 cg_activation_new(tt_ctx(), acts[2])),
                                 CG_OK);
                ck_assert_int_eq(cg_module_add(seq, NULL,
                                 cg_linear_new(tt_ctx(), H, OUT, 1)), CG_OK);
                if (dts[d] != CG_F32)
                    ck_assert_int_eq(cg_module_to_dtype(seq, dts[d]), CG_OK);
                x0 = cg_rand_uniform(tt_ctx(), 2, xs, -2, 2);
                x = cg_to_dtype(x0, dts[d]);
                ck_assert_ptr_nonnull(x);
                cg_tensor_set_requires_grad(x, 1);
                fwd[pass] = launches();
                if (pass == 0) {    /* fused */
                    y = cg_module_forward(seq, x);
                } else {            /* the layers one by one */
                    y = cg_tensor_ref(x);
                    for (i = 0; y && i < cg_module_num_children(seq); i++) {
                        cg_tensor *t = cg_module_forward(
                            cg_module_child(seq, i, NULL), y);

                        cg_tensor_free(y);
                        y = t;
                    }
                }
                fwd[pass] = launches() - fwd[pass];
                ck_assert_msg(y != NULL, "%s", cg_last_error());
                l = cg_sum(y, 0, NULL, 0);
                ck_assert_int_eq(cg_backward(l, NULL, 0), CG_OK);
                read_f32(y, out[pass], N * OUT);
                read_f32(cg_tensor_grad(x), gx[pass], N * IN);
                np = cg_module_params(seq, params, NP);
                ck_assert_int_eq(np, 7);
                for (i = 0; i < np; i++) {
                    size_t n = (size_t)cg_tensor_numel(params[i]);

                    gp[pass][i] = malloc(n * sizeof(float));
                    ck_assert_ptr_nonnull(gp[pass][i]);
                    read_f32(cg_tensor_grad(params[i]), gp[pass][i], n);
                    if (pass)
                        ck_assert_msg(memcmp(gp[0][i], gp[1][i],
                                             n * sizeof(float)) == 0,
                                      "%s backend %d: gradient of param %d "
                                      "differs", dtn[d], k,
                                      i);
                }
                cg_tensor_free(x0);
                cg_tensor_free(x);
                cg_tensor_free(y);
                cg_tensor_free(l);
                cg_module_free(seq);
            }
            for (i = 0; i < 7; i++) {
                free(gp[0][i]);
                free(gp[1][i]);
            }
            ck_assert_msg(memcmp(out[0], out[1], sizeof out[0]) == 0,
                          "%s backend %d: fused output differs",
                          dtn[d], k);
            ck_assert_msg(memcmp(gx[0], gx[1], sizeof gx[0]) == 0,
                          "%s backend %d: input gradient differs",
                          dtn[d], k);
            if (k != CG__GEMM_CLBLAST)
                ck_assert_msg(fwd[0] < fwd[1], "%s backend %d: fused forward"
                              " %llu launches, unfused %llu",
                              dtn[d], k,
                              (unsigned long long)fwd[0],
                              (unsigned long long)fwd[1]);
        }
    cg__gemm_force(tt_ctx(), CG__GEMM_AUTO);
}
END_TEST

/* forward and backward of sum(layer(x) * g), g fixed; the launches of the
 * backward. */
static uint64_t
linear_step(cg_module *m, cg_tensor *x, cg_tensor *g)
{
    cg_tensor *y = cg_linear_forward(m, x), *p, *l;
    uint64_t n;

    ck_assert_msg(y != NULL, "%s", cg_last_error());
    p = cg_mul(y, g);
    l = cg_sum(p, 0, NULL, 0);
    ck_assert_ptr_nonnull(l);
    n = launches();
    ck_assert_int_eq(cg_backward(l, NULL, 0), CG_OK);
    n = launches() - n;
    cg_tensor_free(y);
    cg_tensor_free(p);
    cg_tensor_free(l);
    return n;
}

static void
read_grad(cg_tensor *t, float *out, size_t n)
{
    ck_assert_int_eq(cg_tensor_to_host(cg_tensor_grad(t), out,
                                       n * sizeof *out), CG_OK);
}

/* Two backwards give exactly twice one backward's gradients, in the same
 * tensors: the weight's and the input's GEMMs add into the gradients
 * themselves (beta 1), so without a bias the second backward launches
 * no more kernels than the first; the bias gradient, a column sum, is
 * added by the engine.  A gradient already there from another op (2 W
 * from sum(W * W)) gets the layer's added. */
START_TEST(linear_gradients_accumulate_in_place)
{
    enum { N = 7, IN = 33, OUT = 17 };
    int64_t xs[2] = { N, IN }, gs[2] = { N, OUT };
    cg_tensor *x = cg_rand_uniform(tt_ctx(), 2, xs, -1, 1);
    cg_tensor *g = cg_rand_uniform(tt_ctx(), 2, gs, -1, 1);
    float w1[OUT * IN], w2[OUT * IN], x1[N * IN], x2[N * IN], b1[OUT];
    float b2[OUT], hw[OUT * IN], hx[N * IN], hg[N * OUT];
    int bias, i, o, r;

    ck_assert(x && g);
    cg_tensor_set_requires_grad(x, 1);
    ck_assert_int_eq(cg_tensor_to_host(x, hx, sizeof hx), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(g, hg, sizeof hg), CG_OK);
    for (bias = 0; bias < 2; bias++) {
        cg_module *m = cg_linear_new(tt_ctx(), IN, OUT, bias);
        cg_tensor *w = cg_module_find_param(m, "weight"), *gw, *gx, *sq, *l;
        uint64_t n1, n2;

        ck_assert_ptr_nonnull(w);
        cg_tensor_zero_grad(x);
        n1 = linear_step(m, x, g);
        gw = cg_tensor_grad(w);
        gx = cg_tensor_grad(x);
        read_grad(w, w1, OUT * IN);
        read_grad(x, x1, N * IN);
        if (bias)
            read_grad(cg_module_find_param(m, "bias"), b1, OUT);
        n2 = linear_step(m, x, g);
        ck_assert_ptr_eq(cg_tensor_grad(w), gw);
        ck_assert_ptr_eq(cg_tensor_grad(x), gx);
        if (!bias)
            ck_assert_msg(n2 <= n1, "second backward: %llu launches, first "
                          "%llu", (unsigned long long)n2,
                          (unsigned long long)n1);
        read_grad(w, w2, OUT * IN);
        read_grad(x, x2, N * IN);
        for (i = 0; i < OUT * IN; i++)
            ck_assert(w2[i] == 2 * w1[i]);
        for (i = 0; i < N * IN; i++)
            ck_assert(x2[i] == 2 * x1[i]);
        if (bias) {
            read_grad(cg_module_find_param(m, "bias"), b2, OUT);
            for (i = 0; i < OUT; i++)
                ck_assert(b2[i] == 2 * b1[i]);
        }
        /* into a gradient from another op: dW = 2 W + g^T x */
        ck_assert_int_eq(cg_module_zero_grad(m), CG_OK);
        ck_assert_int_eq(cg_tensor_to_host(w, hw, sizeof hw), CG_OK);
        sq = cg_mul(w, w);
        l = cg_sum(sq, 0, NULL, 0);
        ck_assert_int_eq(cg_backward(l, NULL, 0), CG_OK);
        cg_tensor_free(sq);
        cg_tensor_free(l);
        linear_step(m, x, g);
        read_grad(w, w2, OUT * IN);
        for (o = 0; o < OUT; o++)
            for (i = 0; i < IN; i++) {
                double want = 2.0 * hw[o * IN + i];

                for (r = 0; r < N; r++)
                    want += (double)hg[r * OUT + o] * hx[r * IN + i];
                ck_assert_msg(fabs(w2[o * IN + i] - want) <= 1e-5 *
                              (1 + fabs(want)), "dW[%d, %d] = %g, want %g",
                              o, i, (double)w2[o * IN + i], want);
            }
        cg_module_free(m);
    }
    cg_tensor_free(x);
    cg_tensor_free(g);
}
END_TEST

/* max |got - want| / max(1, max |want|) */
static double
fx_err(const float *got, const fx_tensor *want)
{
    double err = 0, big = 1;
    int64_t i;

    for (i = 0; i < want->numel; i++) {
        double d = fabs((double)got[i] - want->data[i]);

        err = d > err ? d : err;
        big = fabs(want->data[i]) > big ? fabs(want->data[i]) : big;
    }
    return err / big;
}

static const fx_tensor *
fx_need(const fx_file *f, const char *what, int i)
{
    char name[64];
    const fx_tensor *t;

    snprintf(name, sizeof name, "%s.%d", what, i);
    t = fx_get(f, name);
    ck_assert_msg(t != NULL, "linear.txt: no %s", name);
    return t;
}

static cg_tensor *
fx_tensor_new(const fx_tensor *t, int grad)
{
    cg_tensor *d = cg_tensor_from_host(tt_ctx(), CG_F32, t->ndim, t->shape,
                                       t->data);

    ck_assert_msg(d != NULL, "%s", cg_last_error());
    if (grad)
        ck_assert_int_eq(cg_tensor_set_requires_grad(d, 1), CG_OK);
    return d;
}

/* Checks t (its gradient with `grad`) against fixture tensor `what`.i. */
static void
fx_expect(const fx_file *f, cg_tensor *t, int grad, const char *what, int i)
{
    const fx_tensor *want = fx_need(f, what, i);
    cg_tensor *src = grad ? cg_tensor_grad(t) : t;
    float *buf = malloc((size_t)want->numel * sizeof *buf);
    double e;

    ck_assert(buf && src);
    ck_assert_int_eq(cg_tensor_numel(src), want->numel);
    ck_assert_int_eq(cg_tensor_to_host(src, buf,
                                       (size_t)want->numel * sizeof *buf),
                     CG_OK);
    e = fx_err(buf, want);
    ck_assert_msg(e <= 1e-5, "case %d: %s error %g", i, what, e);
    free(buf);
}

/* sum(linear(x, w, b) * g) backward. */
static void
linear_backward_with(cg_tensor *x, cg_tensor *w, cg_tensor *b,
                     cg_tensor *g, cg_tensor **y)
{
    cg_tensor *p, *l;

    *y = cg__linear(x, w, b);
    ck_assert_msg(*y != NULL, "%s", cg_last_error());
    p = cg_mul(*y, g);
    l = p ? cg_sum(p, 0, NULL, 0) : NULL;
    ck_assert_ptr_nonnull(l);
    ck_assert_int_eq(cg_backward(l, NULL, 0), CG_OK);
    cg_tensor_free(p);
    cg_tensor_free(l);
}

/* PyTorch 1.13's F.linear outputs and gradients, and the gradients after
 * a second backward with another input (tests/fixtures/gen_linear.py),
 * each tensor within 1e-5 of its largest value, on each GEMM backend. */
START_TEST(linear_matches_pytorch_fixture)
{
    char err[256], key[32];
    fx_file *f;
    int n, i, c[3];

    if (_i == CG__GEMM_CLBLAST && tt_checker())
        return;
    f = fx_load_fixture("linear.txt", err, sizeof err);
    ck_assert_msg(f != NULL, "%s", err);
    cg__gemm_force(tt_ctx(), (cg__gemm_backend)_i);
    n = fx_config_int(f, "cases", 0);
    ck_assert_int_gt(n, 0);
    for (i = 0; i < n; i++) {
        cg_tensor *x, *w, *b = NULL, *g, *x2, *y;

        snprintf(key, sizeof key, "case.%d", i);
        ck_assert_int_eq(fx_config_ints(f, key, c, 3), 3);
        x = fx_tensor_new(fx_need(f, "input", i), 1);
        w = fx_tensor_new(fx_need(f, "weight", i), 1);
        if (c[2])
            b = fx_tensor_new(fx_need(f, "bias", i), 1);
        g = fx_tensor_new(fx_need(f, "grad_output", i), 0);
        linear_backward_with(x, w, b, g, &y);
        fx_expect(f, y, 0, "output", i);
        fx_expect(f, x, 1, "grad_input", i);
        fx_expect(f, w, 1, "grad_weight", i);
        if (b)
            fx_expect(f, b, 1, "grad_bias", i);
        cg_tensor_free(y);
        cg_tensor_free(g);
        /* the second input into the same leaf, a second backward */
        x2 = fx_tensor_new(fx_need(f, "input2", i), 0);
        ck_assert_int_eq(cg__copy_into(x, x2), CG_OK);
        g = fx_tensor_new(fx_need(f, "grad_output2", i), 0);
        linear_backward_with(x, w, b, g, &y);
        fx_expect(f, x, 1, "acc_input", i);
        fx_expect(f, w, 1, "acc_weight", i);
        if (b)
            fx_expect(f, b, 1, "acc_bias", i);
        cg_tensor_free(y);
        cg_tensor_free(g);
        cg_tensor_free(x2);
        cg_tensor_free(x);
        cg_tensor_free(w);
        cg_tensor_free(b);
    }
    cg__gemm_force(tt_ctx(), CG__GEMM_AUTO);
    fx_free(f);
}
END_TEST

/* --------------------------------------------------- concat, stack, split */

typedef struct { int dim; } jparam;

static cg_tensor *
run_concat(cg_tensor **in, const void *param)
{
    return cg_concat(in, 3, ((const jparam *)param)->dim);
}

static void
ref_concat(const oc_tensor *in, oc_tensor *out, const void *param)
{
    int d = (((const jparam *)param)->dim + in[0].ndim) % in[0].ndim;
    int64_t shape[CG_MAX_DIMS], outer, inner, start = 0, o, j, len;
    int k;

    memcpy(shape, in[0].shape, sizeof shape);
    shape[d] = in[0].shape[d] + in[1].shape[d] + in[2].shape[d];
    set_shape(out, in[0].ndim, shape);
    around(out, d, &outer, &inner);
    for (k = 0; k < 3; k++) {
        len = in[k].shape[d] * inner;
        for (o = 0; o < outer; o++)
            for (j = 0; j < len; j++)
                out->data[o * shape[d] * inner + start + j] =
                    in[k].data[o * len + j];
        start += len;
    }
}

START_TEST(concat_joins_any_layout)
{
    static const struct { const char *a, *b, *c; int dim; } cases[] = {
        { "2,7", "3,7", "1,7", 0 }, { "7,1", "7,33", "T7,5", -1 },
        { "257", "1", "7", 0 }, { "2,3,4", "2,5,4", "2,1,4", 1 },
        { "T33,7", "1,7", "T2,7", 0 }, { "3,7", "3,257", "3,1", 1 }
    };
    oc_op op = { 0 };
    size_t c;

    op.name = "concat";
    op.ninputs = 3;
    op.run = run_concat;
    op.ref = ref_concat;
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        jparam p = { cases[c].dim };

        oc_check(&op, &p, cases[c].a, cases[c].b, cases[c].c);
    }
}
END_TEST

static cg_tensor *
run_stack(cg_tensor **in, const void *param)
{
    return cg_stack(in, 3, ((const jparam *)param)->dim);
}

static void
ref_stack(const oc_tensor *in, oc_tensor *out, const void *param)
{
    int nd = in[0].ndim + 1, d = (((const jparam *)param)->dim + nd) % nd;
    int64_t shape[CG_MAX_DIMS], outer = 1, inner = 1, o, k, i;
    int j;

    for (j = 0; j < nd; j++)
        shape[j] = j < d ? in[0].shape[j] : j == d ? 3 : in[0].shape[j - 1];
    set_shape(out, nd, shape);
    for (j = 0; j < d; j++)
        outer *= shape[j];
    inner = in[0].numel / outer;
    for (o = 0; o < outer; o++)
        for (k = 0; k < 3; k++)
            for (i = 0; i < inner; i++)
                out->data[(o * 3 + k) * inner + i] =
                    in[k].data[o * inner + i];
}

START_TEST(stack_adds_a_dimension)
{
    static const struct { const char *s, *t; int dim; } cases[] = {
        { "7,33", "T7,33", 0 }, { "7,33", "T7,33", -1 },
        { "7,33", "T7,33", 1 }, { "1", "1", 0 }, { "257", "257", -1 },
        { "", "", 0 }
    };
    oc_op op = { 0 };
    size_t c;

    op.name = "stack";
    op.ninputs = 3;
    op.run = run_stack;
    op.ref = ref_stack;
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        jparam p = { cases[c].dim };

        oc_check(&op, &p, cases[c].s, cases[c].t, cases[c].s);
    }
}
END_TEST

/* split into sizes {1, k - 3, 2} along dim, then concat the pieces scaled
 * by 1, 2, 3: exercises the views' forward and backward. */
static cg_tensor *
run_split(cg_tensor **in, const void *param)
{
    int dim = ((const jparam *)param)->dim, k;
    int64_t sizes[3] = { 1, cg_tensor_dim(in[0], dim) - 3, 2 };
    cg_tensor *pieces[3], *scaled[3], *y;

    if (cg_split(in[0], dim, 3, sizes, pieces) != CG_OK)
        return NULL;
    for (k = 0; k < 3; k++) {
        scaled[k] = cg_mul_scalar(pieces[k], (float)(k + 1));
        cg_tensor_free(pieces[k]);
    }
    y = cg_concat(scaled, 3, dim);
    for (k = 0; k < 3; k++)
        cg_tensor_free(scaled[k]);
    return y;
}

static void
ref_split(const oc_tensor *in, oc_tensor *out, const void *param)
{
    const oc_tensor *x = &in[0];
    int d = (((const jparam *)param)->dim + x->ndim) % x->ndim;
    int64_t outer, inner, len = x->shape[d], i;

    set_shape(out, x->ndim, x->shape);
    around(x, d, &outer, &inner);
    for (i = 0; i < x->numel; i++) {
        int64_t c = i / inner % len;

        out->data[i] = x->data[i] * (c < 1 ? 1 : c < len - 2 ? 2 : 3);
    }
}

START_TEST(split_gives_differentiable_views)
{
    static const struct { const char *x; int dim; } cases[] = {
        { "7,33", 0 }, { "7,33", -1 }, { "T7,33", 1 }, { "257", 0 },
        { "3,4,5", 1 }
    };
    oc_op op = { 0 };
    size_t c;

    op.name = "split";
    op.ninputs = 1;
    op.run = run_split;
    op.ref = ref_split;
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        jparam p = { cases[c].dim };

        oc_check(&op, &p, cases[c].x);
    }
}
END_TEST

START_TEST(split_chunks_and_long_concat)
{
    int64_t shape[2] = { 33, 2 }, got[2];
    cg_tensor *x = cg_rand_normal(tt_ctx(), 2, shape, 0, 1), *out[9], *y;
    float a[66], b[66];
    int n, k;

    ck_assert_ptr_nonnull(x);
    n = cg_split_chunks(x, 0, 4, 9, out);
    ck_assert_int_eq(n, 9);
    for (k = 0; k < n; k++) {
        ck_assert_int_eq(cg_tensor_shape(out[k], got), CG_OK);
        ck_assert_int_eq(got[0], k < 8 ? 4 : 1);
    }
    /* Nine inputs: more than a graph node holds, joined as a tree. */
    y = cg_concat(out, 9, 0);
    ck_assert_msg(y != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_to_host(x, a, sizeof a), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(y, b, sizeof b), CG_OK);
    ck_assert_int_eq(memcmp(a, b, sizeof a), 0);
    ck_assert_int_eq(cg_split_chunks(x, 0, 4, 8, out), CG_EINVAL);
    for (k = 0; k < n; k++)
        cg_tensor_free(out[k]);
    cg_tensor_free(y);
    cg_tensor_free(x);
}
END_TEST

/* ---------------------------------------------------------------- dropout */

static cg_tensor *
filled(int64_t n, float v)
{
    cg_tensor *t = cg_full(tt_ctx(), 1, &n, v);

    ck_assert_msg(t != NULL, "%s", TT_ERR);
    return t;
}

static float *
host(const cg_tensor *t)
{
    size_t bytes = (size_t)cg_tensor_numel(t) * sizeof(float);
    float *h = malloc(bytes);

    ck_assert_int_eq(cg_tensor_to_host(t, h, bytes), CG_OK);
    return h;
}

START_TEST(dropout_keeps_one_minus_p_scaled)
{
    enum { N = 100000 };
    static const float ps[] = { 0.1f, 0.3f, 0.5f, 0.9f };
    cg_tensor *x = filled(N, 1.0f);
    size_t k;
    int64_t i;

    for (k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        cg_tensor *y = cg_dropout(x, ps[k], 1);
        float *h, scale = 1.0f / (1.0f - ps[k]);
        int64_t kept = 0;
        double frac, sd;

        ck_assert_msg(y != NULL, "%s", TT_ERR);
        h = host(y);
        for (i = 0; i < N; i++) {
            ck_assert(h[i] == 0.0f || h[i] == scale);
            kept += h[i] != 0.0f;
        }
        /* Binomial: 6 standard deviations (at most 0.0095) - a false alarm
         * about once in 10^9 runs. */
        frac = (double)kept / N;
        sd = sqrt(ps[k] * (1 - ps[k]) / N);
        ck_assert_msg(fabs(frac - (1 - ps[k])) < 6 * sd, "p %g: kept %g",
                      ps[k], frac);
        free(h);
        cg_tensor_free(y);
    }
    cg_tensor_free(x);
}
END_TEST

START_TEST(dropout_same_seed_same_mask_and_eval_identity)
{
    cg_tensor *x = filled(1000, 2.0f), *y1, *y2, *y3, *e;
    float *h1, *h2, *h3;
    int64_t i;

    ck_assert_int_eq(cg_manual_seed(tt_ctx(), 1234), CG_OK);
    y1 = cg_dropout(x, 0.5f, 1);
    y3 = cg_dropout(x, 0.5f, 1);
    ck_assert_int_eq(cg_manual_seed(tt_ctx(), 1234), CG_OK);
    y2 = cg_dropout(x, 0.5f, 1);
    ck_assert(y1 && y2 && y3);
    h1 = host(y1);
    h2 = host(y2);
    h3 = host(y3);
    ck_assert_int_eq(memcmp(h1, h2, 1000 * sizeof *h1), 0);
    ck_assert_int_ne(memcmp(h1, h3, 1000 * sizeof *h1), 0);
    /* Eval mode and p = 0 are the identity: x itself. */
    e = cg_dropout(x, 0.5f, 0);
    ck_assert_ptr_eq(e, x);
    cg_tensor_free(e);
    e = cg_dropout(x, 0.0f, 1);
    ck_assert_ptr_eq(e, x);
    cg_tensor_free(e);
    /* p = 1 drops everything. */
    e = cg_dropout(x, 1.0f, 1);
    ck_assert_ptr_nonnull(e);
    free(h3);
    h3 = host(e);
    for (i = 0; i < 1000; i++)
        ck_assert(h3[i] == 0.0f);
    cg_tensor_free(e);
    free(h1);
    free(h2);
    free(h3);
    cg_tensor_free(y1);
    cg_tensor_free(y2);
    cg_tensor_free(y3);
    cg_tensor_free(x);
}
END_TEST

START_TEST(dropout_gradient_is_g_times_mask)
{
    int64_t shape[2] = { 33, 257 }, n = 33 * 257, i;
    cg_tensor *x0 = cg_rand_uniform(tt_ctx(), 2, shape, 0.5f, 2.0f);
    cg_tensor *x, *g, *y;
    float *gh = malloc((size_t)n * sizeof *gh), *xh, *yh, *gx;
    int64_t gshape[2] = { 257, 33 };

    ck_assert_ptr_nonnull(x0);
    ck_assert_int_eq(cg_tensor_set_requires_grad(x0, 1), CG_OK);
    x = cg_transpose(x0, 0, 1);     /* non-contiguous */
    for (i = 0; i < n; i++)
        gh[i] = (float)oc_uniform(-1, 1);
    g = cg_tensor_from_host(tt_ctx(), CG_F32, 2, gshape, gh);
    y = cg_dropout(x, 0.25f, 1);
    ck_assert_msg(y != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_backward(y, g, 0), CG_OK);
    {
        /* gx of x0 is the transpose of gx of x. */
        cg_tensor *gxt = cg_transpose(cg_tensor_grad(x0), 0, 1);
        cg_tensor *xc = cg_contiguous(x);

        gx = host(gxt);
        xh = host(xc);
        cg_tensor_free(gxt);
        cg_tensor_free(xc);
    }
    yh = host(y);
    for (i = 0; i < n; i++) {
        double want = (double)yh[i] / xh[i] * gh[i];

        ck_assert_msg(fabs(gx[i] - want) <= 1e-6 * (1 + fabs(want)),
                      "gx[%lld] = %g, y/x*g = %g", (long long)i, gx[i], want);
    }
    free(gh);
    free(xh);
    free(yh);
    free(gx);
    cg_tensor_free(g);
    cg_tensor_free(y);
    cg_tensor_free(x);
    cg_tensor_free(x0);
}
END_TEST

/* ------------------------------------------------------------ bad inputs */

/* Device memory in use, to show a failed call allocated nothing. */
static uint64_t
in_use(void)
{
    cg_memory_stats st;

    ck_assert_int_eq(cg_context_stats(tt_ctx(), &st), CG_OK);
    return st.bytes_in_use;
}

/* The message of the last EXPECT_FAIL (in_use clears the error). */
static char failed_msg[512];

#define EXPECT_FAIL(call, name)                                              \
    do {                                                                     \
        uint64_t before_ = in_use();                                         \
        ck_assert_ptr_null(call);                                            \
        ASSERT_STATUS(name);                                                 \
        snprintf(failed_msg, sizeof failed_msg, "%s", cg_last_error());      \
        ck_assert_uint_eq(in_use(), before_);                                \
    } while (0)

START_TEST(bad_arguments_fail_and_change_nothing)
{
    int64_t s23[2] = { 2, 3 }, s24[2] = { 2, 4 }, s3[1] = { 3 };
    int32_t bad_idx[3] = { 0, 1, 3 };
    cg_tensor *a = cg_ones(tt_ctx(), 2, s23), *b = cg_ones(tt_ctx(), 2, s24);
    cg_tensor *fi = cg_zeros(tt_ctx(), 1, s3), *pieces[3] = { NULL };
    cg_tensor *ii = cg_tensor_from_host(tt_ctx(), CG_I32, 1, s3, bad_idx);
    cg_tensor *ab[2] = { a, b }, *w = cg_ones(tt_ctx(), 1, s3);
    int64_t sizes[2] = { 1, 1 };
    uint64_t seed0, off0, seed1, off1;

    ck_assert(a && b && fi && ii && w);
    ck_assert_int_eq(cg_tensor_set_requires_grad(a, 1), CG_OK);
    EXPECT_FAIL(cg_embedding(a, fi), "CG_EDTYPE");
    EXPECT_FAIL(cg_embedding(a, ii), "CG_EINVAL");   /* index 3, V = 2 */
    ck_assert_ptr_nonnull(strstr(failed_msg, "position 2"));
    EXPECT_FAIL(cg_embedding(w, ii), "CG_ESHAPE");   /* 1-D weight */
    EXPECT_FAIL(cg_index_select(a, 2, ii), "CG_EINVAL");
    EXPECT_FAIL(cg_index_select(a, 0, fi), "CG_EDTYPE");
    EXPECT_FAIL(cg_concat(ab, 2, 0), "CG_ESHAPE");
    ck_assert_ptr_nonnull(strstr(failed_msg, "[2, 4]"));
    ck_assert_ptr_nonnull(strstr(failed_msg, "[2, 3]"));
    EXPECT_FAIL(cg_concat(ab, 2, 2), "CG_EINVAL");
    EXPECT_FAIL(cg_stack(ab, 2, 0), "CG_ESHAPE");
    EXPECT_FAIL(cg_layer_norm(a, 1, s24 + 1, NULL, NULL, 1e-5f), "CG_ESHAPE");
    EXPECT_FAIL(cg_layer_norm(a, 1, s3, NULL, b, 1e-5f), "CG_ESHAPE");
    EXPECT_FAIL(cg_layer_norm(a, 1, s3, NULL, NULL, -1.0f), "CG_EINVAL");
    ck_assert_int_eq(cg_generator_state(tt_ctx(), &seed0, &off0), CG_OK);
    EXPECT_FAIL(cg_dropout(a, -0.1f, 1), "CG_EINVAL");
    EXPECT_FAIL(cg_dropout(a, 1.5f, 1), "CG_EINVAL");
    EXPECT_FAIL(cg_dropout(a, NAN, 1), "CG_EINVAL");
    ck_assert_int_eq(cg_generator_state(tt_ctx(), &seed1, &off1), CG_OK);
    ck_assert(seed0 == seed1 && off0 == off1);
    ck_assert_int_eq(cg_split(a, 1, 2, sizes, pieces), CG_ESHAPE);
    ck_assert_ptr_null(pieces[0]);
    /* Nothing was recorded on the inputs. */
    ck_assert_ptr_null(cg_tensor_grad(a));
    ck_assert(cg_tensor_is_leaf(a));
    cg_tensor_free(a);
    cg_tensor_free(b);
    cg_tensor_free(fi);
    cg_tensor_free(ii);
    cg_tensor_free(w);
}
END_TEST

START_TEST(print_error_table)
{
    oc_report();
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("nn_layers");
    TCase *tc = tcase_create("nn_layers");

    tt_require_device();
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, embedding_gathers_rows_and_sums_repeats);
    tcase_add_test(tc, index_select_picks_slices_with_repeats);
    tcase_add_test(tc, index_select_of_int32_tensors);
    tcase_add_test(tc, embedding_backward_is_deterministic);
    tcase_add_test(tc, layer_norm_matches_reference_with_and_without_affine);
    tcase_add_loop_test(tc, linear_matches_reference_and_gradcheck,
                        CG__GEMM_CLBLAST, CG__GEMM_CLGRAD + 1);
    tcase_add_test(tc, linear_gradients_accumulate_in_place);
    tcase_add_loop_test(tc, linear_act_matches_reference_and_gradcheck,
                        CG__GEMM_CLBLAST, CG__GEMM_PACKED + 1);
    tcase_add_test(tc, sequential_fuses_linear_and_activation);
    tcase_add_loop_test(tc, linear_matches_pytorch_fixture, CG__GEMM_CLBLAST,
                        CG__GEMM_CLGRAD + 1);
    tcase_add_test(tc, concat_joins_any_layout);
    tcase_add_test(tc, stack_adds_a_dimension);
    tcase_add_test(tc, split_gives_differentiable_views);
    tcase_add_test(tc, split_chunks_and_long_concat);
    tcase_add_test(tc, dropout_keeps_one_minus_p_scaled);
    tcase_add_test(tc, dropout_same_seed_same_mask_and_eval_identity);
    tcase_add_test(tc, dropout_gradient_is_g_times_mask);
    tcase_add_test(tc, bad_arguments_fail_and_change_nothing);
    tcase_add_test(tc, print_error_table);
    suite_add_tcase(s, tc);
    return tt_run(s);
}
