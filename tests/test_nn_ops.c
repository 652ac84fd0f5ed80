/* SPDX-License-Identifier: MIT */
/*
 * tests/test_nn_ops.c - matmul, softmax, log_softmax and the losses:
 * forward against a C reference in double, backward against finite
 * differences (tests/opcheck.h), on sizes 1, 7, 33 and 257, transposed
 * and broadcast operands, each reduction; and bad arguments, which must
 * fail with the right status and change nothing.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"    /* cg__last_status: how a NULL came about */
#include "ops/internal.h"     /* cg__gemm_force: each GEMM backend */
#include "opcheck.h"

/* ----------------------------------------------------------------- matmul */

/* How the test passes operand a: as given, with its two batch dimensions
 * swapped (batch strides that no single stride describes), or a [1, K]
 * expanded to [m, K] (a matrix with a zero stride): both must be copied
 * before the GEMM can read them. */
enum { M_PLAIN, M_PERMUTE, M_EXPAND };

typedef struct { int ta, tb, mode; int64_t m; } mparam;

/* A strided view of a host tensor. */
typedef struct {
    int nd;
    int64_t shape[CG_MAX_DIMS], strides[CG_MAX_DIMS];
    const double *data;
} mview;

static void
view_of(const oc_tensor *t, int mode, int64_t m, mview *v)
{
    int64_t s = 1, tmp;
    int d;

    v->nd = t->ndim;
    v->data = t->data;
    for (d = t->ndim - 1; d >= 0; d--) {
        v->shape[d] = t->shape[d];
        v->strides[d] = s;
        s *= t->shape[d];
    }
    if (mode == M_PERMUTE) {
        tmp = v->shape[0]; v->shape[0] = v->shape[1]; v->shape[1] = tmp;
        tmp = v->strides[0]; v->strides[0] = v->strides[1];
        v->strides[1] = tmp;
    } else if (mode == M_EXPAND) {
        v->shape[0] = m;
        v->strides[0] = 0;
    }
}

/* Element (r, c) of op(v) in batch bi of the batch shape (nb, bshape). */
static double
view_at(const mview *v, int trans, int nb, const int64_t *bshape, int64_t bi,
        int64_t r, int64_t c)
{
    int64_t off = 0, t;
    int d;

    if (trans) {
        t = r; r = c; c = t;
    }
    for (d = nb - 1; d >= 0; d--) {
        int vd = d - (nb - (v->nd - 2));
        int64_t coord = bi % bshape[d];

        bi /= bshape[d];
        if (vd >= 0 && v->shape[vd] != 1)
            off += coord * v->strides[vd];
    }
    return v->data[off + r * v->strides[v->nd - 2] +
                   c * v->strides[v->nd - 1]];
}

static cg_tensor *
run_matmul(cg_tensor **in, const void *param)
{
    const mparam *p = param;
    int64_t shape[2];
    int perm[CG_MAX_DIMS] = { 1, 0, 2, 3 };
    cg_tensor *a, *c;

    if (p->mode == M_PLAIN)
        return cg_matmul_t(in[0], in[1], p->ta, p->tb);
    shape[0] = p->m;
    shape[1] = -1;
    a = p->mode == M_PERMUTE ? cg_permute(in[0], perm)
                             : cg_expand(in[0], 2, shape);
    ck_assert_msg(a != NULL, "%s", TT_ERR);
    c = cg_matmul_t(a, in[1], p->ta, p->tb);
    cg_tensor_free(a);
    return c;
}

static void
ref_matmul(const oc_tensor *in, oc_tensor *out, const void *param)
{
    const mparam *p = param;
    mview a, b;
    int nb, d;
    int64_t m, n, k, bi, i, j, l, nbatch = 1;

    view_of(&in[0], p->mode, p->m, &a);
    view_of(&in[1], M_PLAIN, 0, &b);
    nb = (a.nd > b.nd ? a.nd : b.nd) - 2;
    for (d = 0; d < nb; d++) {
        int da = d - (nb - (a.nd - 2)), db = d - (nb - (b.nd - 2));
        int64_t x = da >= 0 ? a.shape[da] : 1, y = db >= 0 ? b.shape[db] : 1;

        out->shape[d] = x == 1 ? y : x;
        nbatch *= out->shape[d];
    }
    m = a.shape[a.nd - (p->ta ? 1 : 2)];
    k = a.shape[a.nd - (p->ta ? 2 : 1)];
    n = b.shape[b.nd - (p->tb ? 2 : 1)];
    out->ndim = nb + 2;
    out->shape[nb] = m;
    out->shape[nb + 1] = n;
    oc_alloc(out);
    for (bi = 0; bi < nbatch; bi++)
        for (i = 0; i < m; i++)
            for (j = 0; j < n; j++) {
                double s = 0;

                for (l = 0; l < k; l++)
                    s += view_at(&a, p->ta, nb, out->shape, bi, i, l) *
                         view_at(&b, p->tb, nb, out->shape, bi, l, j);
                out->data[(bi * m + i) * n + j] = s;
            }
}

/* With each GEMM backend forced (the loop's _i), CLBlast's and clgrad's,
 * forward and backward. */
START_TEST(matmul_matches_reference_and_finite_differences)
{
    static const struct { const char *a, *b; mparam p; } cases[] = {
        { "1,1", "1,1", { 0, 0, M_PLAIN, 0 } },
        { "7,33", "33,5", { 0, 0, M_PLAIN, 0 } },
        { "33,257", "257,7", { 0, 0, M_PLAIN, 0 } },
        { "1,7", "7,1", { 0, 0, M_PLAIN, 0 } },
        { "3,7,33", "3,33,5", { 0, 0, M_PLAIN, 0 } },
        { "2,3,7,33", "2,3,33,5", { 0, 0, M_PLAIN, 0 } },
        /* transposed views: the GEMM's flag, no copy */
        { "T7,33", "33,5", { 0, 0, M_PLAIN, 0 } },
        { "7,33", "T33,5", { 0, 0, M_PLAIN, 0 } },
        { "T3,7,33", "T3,33,5", { 0, 0, M_PLAIN, 0 } },
        /* transpose flags, also on transposed views */
        { "33,7", "33,5", { 1, 0, M_PLAIN, 0 } },
        { "7,33", "5,33", { 0, 1, M_PLAIN, 0 } },
        { "3,33,7", "3,5,33", { 1, 1, M_PLAIN, 0 } },
        { "T33,7", "T5,33", { 1, 1, M_PLAIN, 0 } },
        /* broadcast batch */
        { "3,7,33", "33,5", { 0, 0, M_PLAIN, 0 } },
        { "T3,7,33", "33,5", { 0, 0, M_PLAIN, 0 } },
        { "3,33,7", "5,33", { 1, 1, M_PLAIN, 0 } },
        { "7,33", "3,33,5", { 0, 0, M_PLAIN, 0 } },
        { "2,1,7,33", "3,33,5", { 0, 0, M_PLAIN, 0 } },
        /* layouts that must be copied */
        { "3,2,7,33", "2,3,33,5", { 0, 0, M_PERMUTE, 0 } },
        { "1,33", "33,5", { 0, 0, M_EXPAND, 7 } },
    };
    oc_op op = { 0 };
    size_t c;

    op.name = "matmul";
    op.ninputs = 2;
    op.run = run_matmul;
    op.ref = ref_matmul;
    cg__gemm_force(tt_ctx(), (cg__gemm_backend)_i);
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++)
        oc_check(&op, &cases[c].p, cases[c].a, cases[c].b);
    cg__gemm_force(tt_ctx(), CG__GEMM_AUTO);
}
END_TEST

/* A transposed view goes to the GEMM as it is: the only allocation is the
 * result. */
START_TEST(matmul_reads_transposed_views_without_copying)
{
    int64_t sa[2] = { 33, 7 }, sb[2] = { 5, 33 };
    cg_tensor *a = cg_rand_normal(tt_ctx(), 2, sa, 0, 1);
    cg_tensor *b = cg_rand_normal(tt_ctx(), 2, sb, 0, 1);
    cg_tensor *at = cg_transpose(a, 0, 1), *bt = cg_transpose(b, 0, 1), *c;
    cg_memory_stats before, after;

    ck_assert_ptr_nonnull(bt);
    ck_assert_int_eq(cg_context_stats(tt_ctx(), &before), CG_OK);
    c = cg_matmul(at, bt);
    ck_assert_msg(c != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_context_stats(tt_ctx(), &after), CG_OK);
    ck_assert_int_eq(after.allocations - before.allocations, 1);
    ck_assert_int_eq(after.kernels_enqueued - before.kernels_enqueued, 1);
    cg_tensor_free(c);
    cg_tensor_free(at);
    cg_tensor_free(bt);
    cg_tensor_free(a);
    cg_tensor_free(b);
}
END_TEST

/* ---------------------------------------------------------------- softmax */

typedef struct { int log, dim; } sparam;

static cg_tensor *
run_softmax(cg_tensor **in, const void *param)
{
    const sparam *p = param;

    return p->log ? cg_log_softmax(in[0], p->dim) : cg_softmax(in[0], p->dim);
}

static void
ref_softmax(const oc_tensor *in, oc_tensor *out, const void *param)
{
    const sparam *p = param;
    const oc_tensor *x = &in[0];
    int d = (p->dim + x->ndim) % x->ndim, e;
    int64_t n = x->shape[d], inner = 1, outer, o, r, j;

    *out = *x;
    oc_alloc(out);
    for (e = d + 1; e < x->ndim; e++)
        inner *= x->shape[e];
    outer = x->numel / (n * inner);
    for (o = 0; o < outer; o++)
        for (r = 0; r < inner; r++) {
            const double *xr = x->data + o * n * inner + r;
            double *yr = out->data + o * n * inner + r, m = -INFINITY, s = 0;

            for (j = 0; j < n; j++)
                m = fmax(m, xr[j * inner]);
            for (j = 0; j < n; j++)
                s += exp(xr[j * inner] - m);
            for (j = 0; j < n; j++)
                yr[j * inner] = p->log ? xr[j * inner] - m - log(s)
                                       : exp(xr[j * inner] - m) / s;
        }
}

START_TEST(softmax_along_any_dimension)
{
    static const struct { const char *shape; int dim; } cases[] = {
        { "1", 0 }, { "7", 0 }, { "257", -1 }, { "7,33", 0 }, { "7,33", 1 },
        { "7,33", -1 }, { "T7,33", 1 }, { "T7,33", 0 }, { "3,5,7", 1 },
        { "33,257", 1 }, { "257,7", 0 }, { "1,7", 0 }
    };
    oc_op op = { 0 };
    size_t c;
    int log;

    op.ninputs = 1;
    op.run = run_softmax;
    op.ref = ref_softmax;
    op.lo[0] = -4;
    op.hi[0] = 4;
    for (log = 0; log < 2; log++) {
        op.name = log ? "log_softmax" : "softmax";
        for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            sparam p = { log, cases[c].dim };

            oc_check(&op, &p, cases[c].shape);
        }
    }
}
END_TEST

/* Large logits: the maximum is subtracted, so nothing overflows; and two
 * runs over long rows give the same bits. */
START_TEST(softmax_is_stable_and_deterministic)
{
    float x[3] = { 1000.0f, 1001.0f, -1000.0f }, y[3];
    int64_t shape[1] = { 3 }, big[2] = { 33, 4099 };
    size_t bytes = 33 * 4099 * sizeof(float);
    float *first = malloc(bytes), *again = malloc(bytes);
    cg_tensor *t = cg_tensor_from_host(tt_ctx(), CG_F32, 1, shape, x), *s;
    cg_tensor *r = cg_rand_normal(tt_ctx(), 2, big, 0, 3);
    int run;

    s = cg_softmax(t, 0);
    ck_assert_int_eq(cg_tensor_to_host(s, y, sizeof y), CG_OK);
    ck_assert(fabs(y[0] - 0.26894142) < 1e-6);
    ck_assert(fabs(y[1] - 0.73105858) < 1e-6);
    ck_assert(y[2] == 0.0f);
    cg_tensor_free(s);
    for (run = 0; run < 2; run++) {
        s = cg_log_softmax(r, 1);
        ck_assert_int_eq(cg_tensor_to_host(s, run ? again : first, bytes),
                         CG_OK);
        cg_tensor_free(s);
    }
    ck_assert_int_eq(memcmp(first, again, bytes), 0);
    free(first);
    free(again);
    cg_tensor_free(t);
    cg_tensor_free(r);
}
END_TEST

/* ------------------------------------------------------------ class losses */

typedef struct {
    int nll;
    cg_reduction red;
    int ignore;
    float smooth;
} cparam;

static cg_tensor *
run_class(cg_tensor **in, const void *param)
{
    const cparam *p = param;

    return p->nll ? cg_nll_loss(in[0], in[1], p->red, p->ignore)
                  : cg_cross_entropy(in[0], in[1], p->red, p->ignore,
                                     p->smooth);
}

/* One row's loss (cross entropy or nll), and whether it counts. */
static double
class_row(const cparam *p, const double *x, int64_t c, int t, int *counts)
{
    double m = -INFINITY, s = 0, lse, smooth = 0;
    int64_t j;

    *counts = t != p->ignore;
    if (!*counts)
        return 0;
    if (p->nll)
        return -x[t];
    for (j = 0; j < c; j++)
        m = fmax(m, x[j]);
    for (j = 0; j < c; j++)
        s += exp(x[j] - m);
    lse = m + log(s);
    for (j = 0; j < c; j++)
        smooth += lse - x[j];
    return (1 - p->smooth) * (lse - x[t]) + p->smooth / (double)c * smooth;
}

static void
ref_class(const oc_tensor *in, oc_tensor *out, const void *param)
{
    const cparam *p = param;
    int64_t c = in[0].shape[in[0].ndim - 1], n = in[1].numel, i, count = 0;
    double *rows = malloc((size_t)n * sizeof *rows), sum = 0;
    int counts;

    for (i = 0; i < n; i++) {
        rows[i] = class_row(p, in[0].data + i * c, c, (int)in[1].data[i],
                            &counts);
        count += counts;
        sum += rows[i];
    }
    if (p->red == CG_REDUCTION_NONE) {
        out->ndim = in[1].ndim;
        memcpy(out->shape, in[1].shape, sizeof out->shape);
        oc_alloc(out);
        memcpy(out->data, rows, (size_t)n * sizeof *rows);
    } else {
        out->ndim = 0;
        oc_alloc(out);
        out->data[0] = p->red == CG_REDUCTION_SUM ? sum : sum / (double)count;
    }
    free(rows);
}

static void
check_class(const char *name, int nll)
{
    static const struct { const char *x, *t; int c; } shapes[] = {
        { "1,1", "1", 1 }, { "7,5", "7", 5 }, { "33,7", "33", 7 },
        { "7,257", "7", 257 }, { "T7,33", "7", 33 }, { "33", "", 33 }
    };
    static const cg_reduction reds[] = { CG_REDUCTION_MEAN, CG_REDUCTION_SUM,
                                         CG_REDUCTION_NONE };
    oc_op op = { 0 };
    size_t s, r;
    int ig;

    op.name = name;
    op.ninputs = 2;
    op.run = run_class;
    op.ref = ref_class;
    op.dtype[1] = CG_I32;
    op.lo[0] = -3;
    op.hi[0] = 3;
    for (s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (r = 0; r < 3; r++)
            for (ig = 0; ig < 2; ig++) {
                /* ig: targets in [-1, C) with ignore_index -1, so some
                 * rows are ignored (never all: sizes 1 and 0-d skip).
                 * Cross entropy runs with label smoothing 0.1 on every
                 * other shape and on every case with ignored rows. */
                cparam p = { nll, reds[r], ig ? -1 : CG_IGNORE_INDEX,
                             nll || s % 2 ? 0.0f : 0.1f };

                if (ig && shapes[s].t[0] != '7' && shapes[s].t[0] != '3')
                    continue;
                op.lo[1] = ig ? -1 : 0;
                op.hi[1] = shapes[s].c;
                oc_check(&op, &p, shapes[s].x, shapes[s].t);
                if (!nll && ig) {
                    p.smooth = 0.1f;
                    oc_check(&op, &p, shapes[s].x, shapes[s].t);
                }
            }
}

START_TEST(cross_entropy_and_nll_match_pytorch_semantics)
{
    check_class("cross_entropy", 0);
    check_class("nll_loss", 1);
}
END_TEST

/* Cross entropy with every target ignored: the mean is 0/0 = NaN, as in
 * PyTorch; the sum is 0. */
START_TEST(cross_entropy_of_only_ignored_targets)
{
    int64_t sx[2] = { 3, 4 }, st[1] = { 3 };
    int32_t t[3] = { -100, -100, -100 };
    cg_tensor *x = cg_rand_normal(tt_ctx(), 2, sx, 0, 1);
    cg_tensor *tt = cg_tensor_from_host(tt_ctx(), CG_I32, 1, st, t), *l;
    float v;

    l = cg_cross_entropy(x, tt, CG_REDUCTION_MEAN, CG_IGNORE_INDEX, 0.0f);
    ck_assert_msg(l != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_item(l, &v), CG_OK);
    ck_assert(isnan(v));
    cg_tensor_free(l);
    l = cg_cross_entropy(x, tt, CG_REDUCTION_SUM, CG_IGNORE_INDEX, 0.0f);
    ck_assert_int_eq(cg_tensor_item(l, &v), CG_OK);
    ck_assert(v == 0.0f);
    cg_tensor_free(l);
    cg_tensor_free(x);
    cg_tensor_free(tt);
}
END_TEST

/* A target made invalid after the call (it is validated at the call) must
 * not make the backward kernel read outside the logits: its row gets no
 * gradient. */
START_TEST(cross_entropy_kernels_guard_targets)
{
    int64_t sx[2] = { 2, 3 }, st[1] = { 2 };
    int32_t t[2] = { 1, 2 }, bad[2] = { 1, 1000000 };
    float g[6];
    cg_tensor *x = cg_rand_normal(tt_ctx(), 2, sx, 0, 1);
    cg_tensor *tt = cg_tensor_from_host(tt_ctx(), CG_I32, 1, st, t), *l;
    int j;

    ck_assert_int_eq(cg_tensor_set_requires_grad(x, 1), CG_OK);
    l = cg_cross_entropy(x, tt, CG_REDUCTION_SUM, CG_IGNORE_INDEX, 0.0f);
    ck_assert_msg(l != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_write(tt, bad, sizeof bad), CG_OK);
    ck_assert_int_eq(cg_backward(l, NULL, 0), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(cg_tensor_grad(x), g, sizeof g),
                     CG_OK);
    for (j = 3; j < 6; j++)
        ck_assert(g[j] == 0.0f);
    ck_assert(g[1] < 0.0f);
    cg_tensor_free(l);
    cg_tensor_free(x);
    cg_tensor_free(tt);
}
END_TEST

/* -------------------------------------------------------- pointwise losses */

typedef struct { int bce; cg_reduction red; } pparam;

static cg_tensor *
run_pointwise(cg_tensor **in, const void *param)
{
    const pparam *p = param;

    return p->bce ? cg_bce_with_logits(in[0], in[1], p->red)
                  : cg_mse_loss(in[0], in[1], p->red);
}

static void
ref_pointwise(const oc_tensor *in, oc_tensor *out, const void *param)
{
    const pparam *p = param;
    double sum = 0;
    int64_t i;

    *out = in[0];
    if (p->red != CG_REDUCTION_NONE)
        out->ndim = 0;
    oc_alloc(out);
    for (i = 0; i < in[0].numel; i++) {
        double x = in[0].data[i], t = in[1].data[i];
        double l = p->bce ? fmax(x, 0) - x * t + log1p(exp(-fabs(x)))
                          : (x - t) * (x - t);

        if (p->red == CG_REDUCTION_NONE)
            out->data[i] = l;
        sum += l;
    }
    if (p->red != CG_REDUCTION_NONE)
        out->data[0] = p->red == CG_REDUCTION_SUM ? sum
                     : sum / (double)in[0].numel;
}

START_TEST(mse_and_bce_with_logits_match)
{
    static const char *shapes[][2] = {
        { "1", "1" }, { "7", "7" }, { "257", "257" }, { "7,33", "7,33" },
        { "T7,33", "7,33" }, { "3,5,7", "3,5,7" }, { "", "" }
    };
    static const cg_reduction reds[] = { CG_REDUCTION_MEAN, CG_REDUCTION_SUM,
                                         CG_REDUCTION_NONE };
    oc_op op = { 0 };
    size_t s, r;
    int bce;

    op.ninputs = 2;
    op.run = run_pointwise;
    op.ref = ref_pointwise;
    for (bce = 0; bce < 2; bce++) {
        op.name = bce ? "bce_with_logits" : "mse_loss";
        op.lo[0] = bce ? -6 : -2;
        op.hi[0] = bce ? 6 : 2;
        op.lo[1] = bce ? 0 : -2;
        op.hi[1] = bce ? 1 : 2;
        for (s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (r = 0; r < 3; r++) {
                pparam p = { bce, reds[r] };

                oc_check(&op, &p, shapes[s][0], shapes[s][1]);
            }
    }
}
END_TEST

/* ------------------------------------------------------------- bad input */

/* What a failed call must leave unchanged. */
typedef struct {
    cg_memory_stats stats;
    float a[64], b[64];
} snapshot;

static void
snap(snapshot *s, cg_tensor *a, cg_tensor *b)
{
    memset(s, 0, sizeof *s);
    ck_assert_int_eq(cg_context_stats(tt_ctx(), &s->stats), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(a, s->a, (size_t)cg_tensor_numel(a) *
                                       4), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(b, s->b, (size_t)cg_tensor_numel(b) *
                                       4), CG_OK);
}

/* r must be NULL with `status`, the message must contain `want` (if not
 * NULL), and nothing may have changed since `before`. */
static void
expect_failure(cg_tensor *r, int status, const char *want, cg_tensor *a,
               cg_tensor *b, const snapshot *before)
{
    snapshot after;

    ck_assert_msg(r == NULL, "a bad call succeeded");
    ck_assert_msg(cg__last_status() == status, "status %s, not %s: %s",
                  cg_status_name(cg__last_status()),
                  cg_status_name(status), TT_ERR);
    if (want)
        ck_assert_msg(strstr(TT_ERR, want), "'%s' lacks '%s'", TT_ERR, want);
    snap(&after, a, b);
    ck_assert_int_eq(after.stats.bytes_in_use, before->stats.bytes_in_use);
    ck_assert_int_eq(after.stats.kernels_enqueued,
                     before->stats.kernels_enqueued);
    ck_assert_int_eq(memcmp(after.a, before->a, sizeof after.a), 0);
    ck_assert_int_eq(memcmp(after.b, before->b, sizeof after.b), 0);
    ck_assert_ptr_null(cg_tensor_grad(a));
}

static cg_tensor *
new_f32(int ndim, int64_t d0, int64_t d1)
{
    int64_t shape[2] = { d0, d1 };
    cg_tensor *t = cg_rand_normal(tt_ctx(), ndim, shape, 0, 1);

    ck_assert_msg(t != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_set_requires_grad(t, 1), CG_OK);
    return t;
}

static cg_tensor *
new_i32(int64_t n, int32_t value)
{
    int32_t v[64];
    int64_t i;

    for (i = 0; i < n; i++)
        v[i] = value;
    return cg_tensor_from_host(tt_ctx(), CG_I32, 1, &n, v);
}

START_TEST(matmul_rejects_bad_shapes_and_changes_nothing)
{
    cg_tensor *a = new_f32(2, 7, 3), *b = new_f32(2, 5, 7), *v = new_f32(1, 7, 1);
    int64_t s3[3] = { 2, 7, 3 };
    cg_tensor *a3 = cg_rand_normal(tt_ctx(), 3, s3, 0, 1), *b3;
    int64_t t3[3] = { 3, 3, 5 };
    snapshot before;

    b3 = cg_rand_normal(tt_ctx(), 3, t3, 0, 1);
    snap(&before, a, b);
    expect_failure(cg_matmul(a, b), CG_ESHAPE,
                   "a [7, 3] has K = 3, b [5, 7] has K = 5", a, b, &before);
    expect_failure(cg_matmul_t(a, b, 1, 0), CG_ESHAPE, "transposed", a, b,
                   &before);
    expect_failure(cg_matmul(a, v), CG_ESHAPE, "at least 2", a, b, &before);
    expect_failure(cg_matmul(a3, b3), CG_ESHAPE, "do not broadcast", a, b,
                   &before);
    expect_failure(cg_matmul(NULL, b), CG_EINVAL, "NULL", a, b, &before);
    cg_tensor_free(a);
    cg_tensor_free(b);
    cg_tensor_free(v);
    cg_tensor_free(a3);
    cg_tensor_free(b3);
}
END_TEST

START_TEST(losses_reject_bad_input_and_change_nothing)
{
    cg_tensor *x = new_f32(2, 7, 5), *f = new_f32(1, 7, 1);
    cg_tensor *t = new_i32(7, 2), *t6 = new_i32(6, 2), *hi = new_i32(7, 5);
    cg_tensor *neg = new_i32(7, -3), *xi = new_i32(7, 1), *m = new_f32(2, 7, 4);
    snapshot before;

    snap(&before, x, f);
    /* int32 logits; float32 targets */
    expect_failure(cg_cross_entropy(xi, t, CG_REDUCTION_MEAN,
                                    CG_IGNORE_INDEX, 0), CG_EDTYPE, "input",
                   x, f, &before);
    expect_failure(cg_cross_entropy(x, f, CG_REDUCTION_MEAN,
                                    CG_IGNORE_INDEX, 0), CG_EDTYPE, "int32",
                   x, f, &before);
    /* target shape */
    expect_failure(cg_cross_entropy(x, t6, CG_REDUCTION_MEAN,
                                    CG_IGNORE_INDEX, 0), CG_ESHAPE,
                   "[7, 5] and target [6]", x, f, &before);
    expect_failure(cg_nll_loss(x, t6, CG_REDUCTION_SUM, CG_IGNORE_INDEX),
                   CG_ESHAPE, "[6]", x, f, &before);
    /* classes out of range, above and below */
    expect_failure(cg_cross_entropy(x, hi, CG_REDUCTION_MEAN,
                                    CG_IGNORE_INDEX, 0), CG_EINVAL,
                   "target[0] = 5", x, f, &before);
    expect_failure(cg_nll_loss(x, neg, CG_REDUCTION_NONE, CG_IGNORE_INDEX),
                   CG_EINVAL, "= -3", x, f, &before);
    /* parameters */
    expect_failure(cg_cross_entropy(x, t, CG_REDUCTION_MEAN,
                                    CG_IGNORE_INDEX, 1.5f), CG_EINVAL,
                   "label_smoothing", x, f, &before);
    expect_failure(cg_cross_entropy(x, t, (cg_reduction)7, CG_IGNORE_INDEX,
                                    0), CG_EINVAL, "reduction", x, f, &before);
    expect_failure(cg_softmax(x, 2), CG_EINVAL, "dimension 2", x, f,
                   &before);
    /* pointwise shapes */
    expect_failure(cg_mse_loss(x, m, CG_REDUCTION_MEAN), CG_ESHAPE,
                   "[7, 5] and target [7, 4]", x, f, &before);
    expect_failure(cg_bce_with_logits(x, xi, CG_REDUCTION_MEAN), CG_EDTYPE,
                   "target", x, f, &before);
    cg_tensor_free(x);
    cg_tensor_free(f);
    cg_tensor_free(t);
    cg_tensor_free(t6);
    cg_tensor_free(hi);
    cg_tensor_free(neg);
    cg_tensor_free(xi);
    cg_tensor_free(m);
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
    Suite *s = suite_create("nn_ops");
    TCase *tc = tcase_create("nn_ops");

    tt_require_device();
    tcase_set_timeout(tc, 1800);
    tcase_add_loop_test(tc, matmul_matches_reference_and_finite_differences,
                        CG__GEMM_CLBLAST, CG__GEMM_CLGRAD + 1);
    tcase_add_test(tc, matmul_reads_transposed_views_without_copying);
    tcase_add_test(tc, softmax_along_any_dimension);
    tcase_add_test(tc, softmax_is_stable_and_deterministic);
    tcase_add_test(tc, cross_entropy_and_nll_match_pytorch_semantics);
    tcase_add_test(tc, cross_entropy_of_only_ignored_targets);
    tcase_add_test(tc, cross_entropy_kernels_guard_targets);
    tcase_add_test(tc, mse_and_bce_with_logits_match);
    tcase_add_test(tc, matmul_rejects_bad_shapes_and_changes_nothing);
    tcase_add_test(tc, losses_reject_bad_input_and_change_nothing);
    tcase_add_test(tc, print_error_table);
    suite_add_tcase(s, tc);
    return tt_run(s);
}
