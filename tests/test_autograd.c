/* SPDX-License-Identifier: MIT */
/*
 * tests/test_autograd.c - the define-by-run graph: the PyTorch tutorial
 * example, gradient accumulation (matrix products adding into an existing
 * gradient with the GEMM), retain_graph, saved tensors freed as the
 * backward passes their nodes, views passing gradients on without a
 * copy, host allocation failure
 * in backward, no-grad mode, detach, the DOT export, bad input, memory
 * that does not grow over iterations, and tensor creation and random
 * numbers.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/internal.h"
#include "testutil.h"

static cg_tensor *
vec(const float *v, int64_t n)
{
    cg_tensor *t = cg_tensor_from_host(tt_ctx(), CG_F32, 1, &n, v);

    ck_assert_msg(t != NULL, "%s", cg_last_error());
    return t;
}

static void
read_vec(const cg_tensor *t, float *out, int64_t n)
{
    ck_assert_int_eq(cg_tensor_numel(t), n);
    ck_assert_msg(cg_tensor_to_host(t, out, (size_t)n * sizeof *out) ==
                  CG_OK, "%s", cg_last_error());
}

/* y = mean((x + 2)^2 + 3) for x = [1, 2, 3]; the caller frees. */
static cg_tensor *
tutorial(cg_tensor *x, cg_tensor **keep)
{
    cg_tensor *a = cg_add_scalar(x, 2), *b = cg_pow_scalar(a, 2);
    cg_tensor *c = cg_add_scalar(b, 3), *y = cg_mean(c, 0, NULL, 0);

    ck_assert_ptr_nonnull(y);
    if (keep)
        *keep = cg_tensor_ref(c);
    cg_tensor_free(a);
    cg_tensor_free(b);
    cg_tensor_free(c);
    return y;
}

START_TEST(pytorch_tutorial_example)
{
    static const float xs[3] = { 1, 2, 3 };
    cg_tensor *x = vec(xs, 3), *y;
    float v, g[3];

    ck_assert_int_eq(cg_tensor_set_requires_grad(x, 1), CG_OK);
    y = tutorial(x, NULL);
    ck_assert_int_eq(cg_tensor_ndim(y), 0);
    ck_assert_int_eq(cg_tensor_item(y, &v), CG_OK);
    ck_assert_float_eq_tol(v, 19.6667f, 1e-4f);
    ck_assert(!cg_tensor_is_leaf(y));
    ck_assert(cg_tensor_requires_grad(y));
    ck_assert_ptr_null(cg_tensor_grad(x));
    ck_assert_int_eq(cg_backward(y, NULL, 0), CG_OK);
    read_vec(cg_tensor_grad(x), g, 3);
    ck_assert_float_eq_tol(g[0], 2.0f, 1e-6f);
    ck_assert_float_eq_tol(g[1], 8.0f / 3, 1e-6f);
    ck_assert_float_eq_tol(g[2], 10.0f / 3, 1e-6f);
    cg_tensor_free(y);
    cg_tensor_free(x);
}
END_TEST

START_TEST(gradients_accumulate_until_zeroed)
{
    static const float xs[3] = { 1, 2, 3 };
    cg_tensor *x = vec(xs, 3), *y;
    float g[3];
    int i;

    cg_tensor_set_requires_grad(x, 1);
    for (i = 0; i < 2; i++) {
        y = tutorial(x, NULL);
        ck_assert_int_eq(cg_backward(y, NULL, 0), CG_OK);
        cg_tensor_free(y);
    }
    read_vec(cg_tensor_grad(x), g, 3);
    ck_assert_float_eq_tol(g[0], 4.0f, 1e-6f);
    ck_assert_float_eq_tol(g[2], 20.0f / 3, 1e-5f);
    ck_assert_int_eq(cg_tensor_zero_grad(x), CG_OK);
    ck_assert_ptr_null(cg_tensor_grad(x));
    y = tutorial(x, NULL);
    ck_assert_int_eq(cg_backward(y, NULL, 0), CG_OK);
    read_vec(cg_tensor_grad(x), g, 3);
    ck_assert_float_eq_tol(g[0], 2.0f, 1e-6f);
    cg_tensor_free(y);
    cg_tensor_free(x);
}
END_TEST

START_TEST(retain_graph_allows_a_second_backward)
{
    static const float xs[3] = { 1, 2, 3 };
    cg_tensor *x = vec(xs, 3), *y;
    float g[3];

    cg_tensor_set_requires_grad(x, 1);
    y = tutorial(x, NULL);
    ck_assert_int_eq(cg_backward(y, NULL, 1), CG_OK);
    ck_assert_int_eq(cg_backward(y, NULL, 0), CG_OK);
    read_vec(cg_tensor_grad(x), g, 3);
    ck_assert_float_eq_tol(g[1], 16.0f / 3, 1e-5f);
    /* The graph is freed now: a third backward is an error that says so,
     * and leaves the gradient alone. */
    ck_assert_int_eq(cg_backward(y, NULL, 0), CG_ESTATE);
    ck_assert_ptr_nonnull(strstr(cg_last_error(), "retain_graph"));
    read_vec(cg_tensor_grad(x), g, 3);
    ck_assert_float_eq_tol(g[1], 16.0f / 3, 1e-5f);
    cg_tensor_free(y);
    cg_tensor_free(x);
}
END_TEST

/* When the leaf's gradient is complete (the hook data parallelism uses),
 * the bytes the pool has handed out. */
static void
note_in_use(void *user, cg_tensor *leaf)
{
    cg_memory_stats st;

    (void)leaf;
    if (cg_context_stats(tt_ctx(), &st) == CG_OK)
        *(uint64_t *)user = st.bytes_in_use;
}

/* In w -> v = exp(w) -> t = exp(v) -> sum, backward runs sum, then t's
 * node, then v's; by the time w's gradient is complete, t's node has
 * freed what it saved (t, 4 MB) unless the graph is retained. */
static uint64_t
in_use_when_w_is_done(int retain)
{
    enum { N = 1 << 20 };
    int64_t n = N;
    cg_tensor *w = cg_full(tt_ctx(), 1, &n, 0.5f), *v, *t, *l;
    uint64_t at = 0;

    ck_assert_ptr_nonnull(w);
    cg_tensor_set_requires_grad(w, 1);
    v = cg_exp(w);
    t = v ? cg_exp(v) : NULL;
    l = t ? cg_sum(t, 0, NULL, 0) : NULL;
    ck_assert_msg(l != NULL, "%s", cg_last_error());
    cg_tensor_free(v);
    cg_tensor_free(t);
    cg__set_grad_ready(tt_ctx(), note_in_use, &at);
    ck_assert_int_eq(cg_backward(l, NULL, retain), CG_OK);
    cg__set_grad_ready(tt_ctx(), NULL, NULL);
    ck_assert(at > 0);
    cg_tensor_free(l);
    cg_tensor_free(w);
    return at;
}

START_TEST(backward_frees_what_a_node_saved_once_it_has_run)
{
    uint64_t kept = in_use_when_w_is_done(1);
    uint64_t freed = in_use_when_w_is_done(0);

    ck_assert_msg(kept >= freed + ((uint64_t)4 << 20), "bytes in use "
                  "when w's gradient was complete: %llu with the graph "
                  "retained, %llu without", (unsigned long long)kept,
                  (unsigned long long)freed);
}
END_TEST

/* Kernel launches of the backward of sum(op(exp(x)) * c), op a reshape
 * to [6, 4] or nothing. */
static uint64_t
backward_launches(int reshape)
{
    static const int64_t s24 = 24, s64[2] = { 6, 4 };
    float v[24];
    cg_tensor *x, *e, *r, *c, *p, *l;
    cg_memory_stats a, b;
    int i;

    for (i = 0; i < 24; i++)
        v[i] = 0.05f * (float)i;
    x = vec(v, 24);
    cg_tensor_set_requires_grad(x, 1);
    e = cg_exp(x);
    r = e && reshape ? cg_reshape(e, 2, s64) : cg_tensor_ref(e);
    c = reshape ? cg_tensor_from_host(tt_ctx(), CG_F32, 2, s64, v)
                : cg_tensor_from_host(tt_ctx(), CG_F32, 1, &s24, v);
    p = r && c ? cg_mul(r, c) : NULL;
    l = p ? cg_sum(p, 0, NULL, 0) : NULL;
    ck_assert_msg(l != NULL, "%s", cg_last_error());
    ck_assert_int_eq(cg_context_stats(tt_ctx(), &a), CG_OK);
    ck_assert_int_eq(cg_backward(l, NULL, 0), CG_OK);
    ck_assert_int_eq(cg_context_stats(tt_ctx(), &b), CG_OK);
    cg_tensor_free(l);
    cg_tensor_free(p);
    cg_tensor_free(c);
    cg_tensor_free(r);
    cg_tensor_free(e);
    cg_tensor_free(x);
    return b.kernels_enqueued - a.kernels_enqueued;
}

/* A reshape's gradient is a view of the gradient that reached it; once
 * that is used up the view owns its memory alone and is passed on as it
 * is: the reshape adds no launch to the backward. */
START_TEST(a_view_passes_its_gradient_on_without_a_copy)
{
    uint64_t plain = backward_launches(0), viewed = backward_launches(1);

    ck_assert_msg(viewed == plain, "backward launches: %llu with a "
                  "reshape, %llu without", (unsigned long long)viewed,
                  (unsigned long long)plain);
}
END_TEST

/* cg_backward reads a contiguous grad_output in place: no copy launch
 * where the root's backward makes a new gradient (mul), and g is never
 * changed nor shared with a leaf's grad, where the gradient reaches the
 * leaf as g itself (add, the root a leaf) or as a view of it (reshape):
 * two backwards leave x.grad = 2 g' and g as it was (a grad sharing g's
 * memory would have the second added into g).  A non-contiguous g (a
 * transposed view) is copied and gives the same gradients. */
START_TEST(grad_output_is_read_in_place_and_never_changed)
{
    static const float xs[6] = { 0.5f, -1, 2, 3, -0.25f, 1.5f };
    static const float gs[6] = { 1, -2, 0.5f, 4, -3, 0.25f };
    static const int64_t s23[2] = { 2, 3 }, s32[2] = { 3, 2 };
    cg_tensor *x = vec(xs, 6), *c = vec(xs, 6), *g, *gt, *y = NULL, *v;
    cg_memory_stats a, b;
    float got[6], gv[6];
    int root, i, k;

    cg_tensor_set_requires_grad(x, 1);
    g = vec(gs, 6);
    for (root = 0; root < 5; root++) {
        cg_tensor *go = g;

        gt = NULL;
        switch (root) {
        case 0: y = cg_mul(x, c); break;
        case 1: y = cg_add(x, c); break;
        case 2: y = cg_tensor_ref(x); break;
        case 3: y = cg_reshape(x, 2, s23); break;
        default:    /* g's transpose, read as [2, 3] */
            y = cg_reshape(x, 2, s23);
            v = cg_tensor_from_host(tt_ctx(), CG_F32, 2, s32, gs);
            gt = v ? cg_transpose(v, 0, 1) : NULL;
            cg_tensor_free(v);
            ck_assert_ptr_nonnull(gt);
            ck_assert(!cg_tensor_is_contiguous(gt));
            go = gt;
        }
        if (root == 3) {
            cg_tensor_free(g);
            g = cg_tensor_from_host(tt_ctx(), CG_F32, 2, s23, gs);
            go = g;
        }
        ck_assert_msg(y && go, "%s", cg_last_error());
        ck_assert_int_eq(cg_tensor_zero_grad(x), CG_OK);
        for (k = 0; k < 2; k++) {
            ck_assert_int_eq(cg_context_stats(tt_ctx(), &a), CG_OK);
            ck_assert_int_eq(cg_backward(y, go, 1), CG_OK);
            ck_assert_int_eq(cg_context_stats(tt_ctx(), &b), CG_OK);
            if (root == 0 && k == 0)    /* g c, taken as x's grad */
                ck_assert_uint_eq(b.kernels_enqueued - a.kernels_enqueued,
                                  1);
        }
        read_vec(cg_tensor_grad(x), got, 6);
        ck_assert_int_eq(cg_tensor_to_host(g, gv, sizeof gv), CG_OK);
        for (i = 0; i < 6; i++) {
            /* the transposed view's element i is gs[(i % 3) * 2 + i / 3] */
            float gi = root == 4 ? gs[i % 3 * 2 + i / 3] : gs[i];

            ck_assert_msg(gv[i] == gs[i], "root %d: g[%d] = %g, was %g",
                          root, i, (double)gv[i], (double)gs[i]);
            ck_assert_msg(got[i] == 2.0f * gi * (root ? 1.0f : xs[i]),
                          "root %d: x.grad[%d] = %g, want %g", root, i,
                          (double)got[i],
                          (double)(2.0f * gi * (root ? 1.0f : xs[i])));
        }
        cg_tensor_free(gt);
        cg_tensor_free(y);
    }
    cg_tensor_free(g);
    cg_tensor_free(c);
    cg_tensor_free(x);
}
END_TEST

START_TEST(shared_subexpressions_sum_their_gradients)
{
    static const float xs[4] = { 0.5f, -1, 2, 3 };
    cg_tensor *x = vec(xs, 4), *a, *b, *s, *y;
    float g[4];
    int i;

    /* y = sum(x*x + x): dy/dx = 2x + 1, x used three times. */
    cg_tensor_set_requires_grad(x, 1);
    a = cg_mul(x, x);
    b = cg_add(a, x);
    s = cg_sum(b, 0, NULL, 0);
    y = cg_mul_scalar(s, 1.0f);
    ck_assert_int_eq(cg_backward(y, NULL, 0), CG_OK);
    read_vec(cg_tensor_grad(x), g, 4);
    for (i = 0; i < 4; i++)
        ck_assert_float_eq_tol(g[i], 2 * xs[i] + 1, 1e-6f);
    cg_tensor_free(a);
    cg_tensor_free(b);
    cg_tensor_free(s);
    cg_tensor_free(y);
    cg_tensor_free(x);
}
END_TEST

/* Runs y's backward with the host allocation number `n` failing and
 * returns its status; after a failure the graph must be as before: no
 * node left marked (backward skips marked nodes: wrong gradients) and no
 * reference taken.  *fired is whether the failure happened. */
static int
backward_failing_at(cg_tensor *y, cg__node *const *nodes, int nnodes,
                    long n, int *fired)
{
    int refs[8], status, k;

    for (k = 0; k < nnodes; k++)
        refs[k] = nodes[k]->refs;
    cg__alloc_fail_after(n);
    status = cg_backward(y, NULL, 1);
    *fired = cg__alloc_fail_after(-1) < 0;
    if (status != CG_OK) {
        ck_assert_int_eq(status, CG_EHOSTMEM);
        ck_assert_ptr_nonnull(strstr(cg_last_error(), "host memory"));
    }
    for (k = 0; k < nnodes; k++) {
        ck_assert_int_eq(nodes[k]->mark, 0);
        ck_assert_int_eq(nodes[k]->refs, refs[k]);
    }
    return status;
}

/* ------------------------------------------------------------------------
 * Matrix products add their gradients into an existing one
 * ------------------------------------------------------------------------ */

enum { MM = 7, MK = 33, MN = 5 };

static cg_tensor *
mat_rand(int64_t r, int64_t c, int transposed)
{
    int64_t s[2] = { transposed ? c : r, transposed ? r : c };
    cg_tensor *t = cg_rand_uniform(tt_ctx(), 2, s, -1, 1), *v;

    ck_assert_ptr_nonnull(t);
    if (!transposed)
        return t;
    /* a transposed view: the GEMM reads it with the flag flipped */
    v = cg_transpose(t, 0, 1);
    ck_assert_ptr_nonnull(v);
    cg_tensor_free(t);
    return v;
}

/* L = sum(op(a) op(b) * w) with a fixed weight w, so that every element
 * of the gradients differs. */
static cg_tensor *
mm_loss(cg_tensor *a, cg_tensor *b, int ta, int tb, cg_tensor *w)
{
    cg_tensor *y = cg_matmul_t(a, b, ta, tb), *p, *l;

    ck_assert_msg(y != NULL, "%s", cg_last_error());
    p = cg_mul(y, w);
    l = cg_sum(p, 0, NULL, 0);
    ck_assert_ptr_nonnull(l);
    cg_tensor_free(y);
    cg_tensor_free(p);
    return l;
}

static uint64_t
launches(void)
{
    cg_memory_stats st;

    ck_assert_int_eq(cg_context_stats(tt_ctx(), &st), CG_OK);
    return st.kernels_enqueued;
}

/* Two backwards through a product, for each transpose flag (and operands
 * stored transposed): the second gives exactly twice the first (the GEMM
 * adds the same product into the gradient, beta 1: a + a is exact), in
 * the same gradient tensors, and launches no more kernels than the first
 * (no separate add pass). */
START_TEST(matmul_gradients_accumulate_over_backwards)
{
    int64_t ws[2] = { MM, MN };
    cg_tensor *w = cg_rand_uniform(tt_ctx(), 2, ws, -1, 1);
    int t;

    for (t = 0; t < 8; t++) {
        int ta = t & 1, tb = (t >> 1) & 1, stored = t >> 2;
        /* op(a) is MM x MK, op(b) MK x MN */
        cg_tensor *a = ta ? mat_rand(MK, MM, stored) : mat_rand(MM, MK, stored);
        cg_tensor *b = tb ? mat_rand(MN, MK, stored) : mat_rand(MK, MN, stored);
        cg_tensor *l, *ga, *gb;
        float a1[MM * MK], b1[MK * MN], a2[MM * MK], b2[MK * MN];
        uint64_t n0, n1, n2;
        int i;

        cg_tensor_set_requires_grad(a, 1);
        cg_tensor_set_requires_grad(b, 1);
        l = mm_loss(a, b, ta, tb, w);
        n0 = launches();
        ck_assert_int_eq(cg_backward(l, NULL, 0), CG_OK);
        n1 = launches();
        cg_tensor_free(l);
        ga = cg_tensor_grad(a);
        gb = cg_tensor_grad(b);
        read_vec(ga, a1, MM * MK);
        read_vec(gb, b1, MK * MN);
        l = mm_loss(a, b, ta, tb, w);
        n1 = n1 - n0;
        n0 = launches();
        ck_assert_int_eq(cg_backward(l, NULL, 0), CG_OK);
        n2 = launches() - n0;
        cg_tensor_free(l);
        ck_assert_ptr_eq(cg_tensor_grad(a), ga);
        ck_assert_ptr_eq(cg_tensor_grad(b), gb);
        ck_assert_msg(n2 <= n1, "flags %d: the second backward launched "
                      "%llu kernels, the first %llu", t,
                      (unsigned long long)n2, (unsigned long long)n1);
        read_vec(ga, a2, MM * MK);
        read_vec(gb, b2, MK * MN);
        for (i = 0; i < MM * MK; i++)
            ck_assert_msg(a2[i] == 2 * a1[i], "flags %d: da[%d] %g, once %g",
                          t, i, (double)a2[i], (double)a1[i]);
        for (i = 0; i < MK * MN; i++)
            ck_assert_msg(b2[i] == 2 * b1[i], "flags %d: db[%d] %g, once %g",
                          t, i, (double)b2[i], (double)b1[i]);
        cg_tensor_free(a);
        cg_tensor_free(b);
    }
    cg_tensor_free(w);
}
END_TEST

/* dL/db[k, n] of L = sum((a b) * w) for a [MM, MK], b [MK, MN]. */
static double
ref_db(const float *a, const float *w, int k, int n)
{
    double s = 0;
    int m;

    for (m = 0; m < MM; m++)
        s += (double)a[m * MK + k] * w[m * MN + n];
    return s;
}

/* A gradient that is already there (from another op, or from a product
 * earlier in the same backward) gets the product's added: b used by two
 * products and by an elementwise op, against a reference in double.  The
 * same with a reference to the gradient held by the caller (the GEMM must
 * not write into memory something else can see: the engine adds as
 * before, and the holder sees the sum) and with one tensor as both
 * operands of a product. */
START_TEST(matmul_gradient_adds_into_existing_grad)
{
    int64_t as[2] = { MM, MK }, bs[2] = { MK, MN }, ws[2] = { MM, MN };
    int64_t ss[2] = { MK, MK };
    cg_tensor *a = cg_rand_uniform(tt_ctx(), 2, as, -1, 1);
    cg_tensor *c = cg_rand_uniform(tt_ctx(), 2, as, -1, 1);
    cg_tensor *w = cg_rand_uniform(tt_ctx(), 2, ws, -1, 1);
    float ha[MM * MK], hc[MM * MK], hw[MM * MN], hb[MK * MN], g[MK * MN];
    int hold, i, k, n;

    read_vec(a, ha, MM * MK);
    read_vec(c, hc, MM * MK);
    read_vec(w, hw, MM * MN);
    for (hold = 0; hold < 2; hold++) {
        cg_tensor *b = cg_rand_uniform(tt_ctx(), 2, bs, -1, 1);
        cg_tensor *sq, *l1, *l2, *l3, *held = NULL;

        read_vec(b, hb, MK * MN);
        cg_tensor_set_requires_grad(b, 1);
        /* grad b = 2 b, from an elementwise op */
        sq = cg_mul(b, b);
        l1 = cg_sum(sq, 0, NULL, 0);
        ck_assert_int_eq(cg_backward(l1, NULL, 0), CG_OK);
        if (hold)
            held = cg_tensor_ref(cg_tensor_grad(b));
        /* + a^T w + c^T w, two products in one backward */
        l2 = mm_loss(a, b, 0, 0, w);
        l3 = mm_loss(c, b, 0, 0, w);
        cg_tensor_free(sq);
        sq = cg_add(l2, l3);
        ck_assert_int_eq(cg_backward(sq, NULL, 0), CG_OK);
        read_vec(cg_tensor_grad(b), g, MK * MN);
        for (k = 0; k < MK; k++)
            for (n = 0; n < MN; n++) {
                double want = 2.0 * hb[k * MN + n] + ref_db(ha, hw, k, n) +
                              ref_db(hc, hw, k, n);

                ck_assert_msg(fabs(g[k * MN + n] - want) <= 1e-5 * (1 +
                              fabs(want)), "hold %d: db[%d, %d] = %g, want "
                              "%g", hold, k, n, (double)g[k * MN + n], want);
            }
        if (held) {
            float h[MK * MN];

            read_vec(held, h, MK * MN);
            ck_assert(memcmp(h, g, sizeof h) == 0);
        }
        cg_tensor_free(held);
        cg_tensor_free(sq);
        cg_tensor_free(l1);
        cg_tensor_free(l2);
        cg_tensor_free(l3);
        cg_tensor_free(b);
    }
    /* x x for a square x, twice: both operands' gradients add into the
     * one tensor, the second time into an existing one. */
    {
        cg_tensor *x = cg_rand_uniform(tt_ctx(), 2, ss, -1, 1), *y, *l;
        float hx[MK * MK], g1[MK * MK], g2[MK * MK];
        int r;

        read_vec(x, hx, MK * MK);
        cg_tensor_set_requires_grad(x, 1);
        for (r = 0; r < 2; r++) {
            y = cg_matmul(x, x);
            l = cg_sum(y, 0, NULL, 0);
            ck_assert_int_eq(cg_backward(l, NULL, 0), CG_OK);
            cg_tensor_free(y);
            cg_tensor_free(l);
            read_vec(cg_tensor_grad(x), r ? g2 : g1, MK * MK);
        }
        /* d sum(x x) / dx[i, j] = sum_n x[j, n] + sum_m x[m, i] */
        for (i = 0; i < MK; i++)
            for (k = 0; k < MK; k++) {
                double want = 0;

                for (n = 0; n < MK; n++)
                    want += (double)hx[k * MK + n] + hx[n * MK + i];
                ck_assert(fabs(g1[i * MK + k] - want) <= 1e-5 * (1 +
                          fabs(want)));
                ck_assert(fabs(g2[i * MK + k] - 2 * want) <= 2e-5 * (1 +
                          fabs(want)));
            }
        cg_tensor_free(x);
    }
    cg_tensor_free(a);
    cg_tensor_free(c);
    cg_tensor_free(w);
}
END_TEST

/* A bidirectional LSTM's weight gradients (one GEMM each over the
 * sequence) add into existing ones the same way: two backwards give
 * exactly twice one, in the same tensors, and the second launches only
 * one more kernel per bias (a column sum, which the engine adds). */
START_TEST(rnn_weight_gradients_accumulate_over_backwards)
{
    static const char *const names[] = {
        "weight_ih_l0", "weight_hh_l0", "weight_ih_l0_reverse",
        "weight_hh_l0_reverse", "bias_ih_l0", "bias_hh_l0_reverse"
    };
    enum { T = 5, B = 3, I = 7, H = 9, NP = 6 };
    cg_rnn_options o = { CG_LSTM, I, H, 1, 1, 0, 0.0f };
    cg_module *m = cg_rnn_new(tt_ctx(), &o);
    int64_t xs[3] = { T, B, I };
    cg_tensor *x = cg_rand_uniform(tt_ctx(), 3, xs, -1, 1);
    cg_tensor *grads[NP];
    float *once[NP];
    uint64_t k[2];
    int r, p, n[NP];

    ck_assert(m && x);
    for (r = 0; r < 2; r++) {
        cg_tensor *y = NULL, *l;

        ck_assert_int_eq(cg_rnn_forward(m, x, NULL, NULL, NULL, &y, NULL,
                                        NULL), CG_OK);
        l = cg_sum(y, 0, NULL, 0);
        k[r] = launches();
        ck_assert_int_eq(cg_backward(l, NULL, 0), CG_OK);
        k[r] = launches() - k[r];
        cg_tensor_free(y);
        cg_tensor_free(l);
        for (p = 0; p < NP; p++) {
            cg_tensor *w = cg_module_find_param(m, names[p]);
            float *now;
            int i;

            ck_assert_ptr_nonnull(w);
            if (r == 0) {
                grads[p] = cg_tensor_grad(w);
                n[p] = (int)cg_tensor_numel(w);
                once[p] = malloc((size_t)n[p] * sizeof(float));
                read_vec(grads[p], once[p], n[p]);
                continue;
            }
            ck_assert_ptr_eq(cg_tensor_grad(w), grads[p]);
            now = malloc((size_t)n[p] * sizeof(float));
            read_vec(grads[p], now, n[p]);
            for (i = 0; i < n[p]; i++)
                ck_assert_msg(now[i] == 2 * once[p][i], "%s[%d] %g, once "
                              "%g", names[p], i, (double)now[i],
                              (double)once[p][i]);
            free(now);
            free(once[p]);
        }
    }
    /* four biases: bias_ih, bias_hh per direction */
    ck_assert_msg(k[1] <= k[0] + 4, "second backward: %llu launches, first "
                  "%llu", (unsigned long long)k[1], (unsigned long long)k[0]);
    cg_tensor_free(x);
    cg_module_free(m);
}
END_TEST

/* Fails each host allocation of a backward in turn, the topological
 * sort's first among them; after each failure a backward computes the
 * right gradients.  The leaf's gradient is zeroed before it, as a failed
 * backward may have added to it. */
START_TEST(backward_recovers_from_host_allocation_failure)
{
    static const float xs[4] = { 0.5f, -1, 2, 3 };
    cg_tensor *x = vec(xs, 4), *a, *b, *y;
    cg__node *nodes[3];
    int fired = 1, failures = 0, i;
    long n;
    float g[4];

    cg_tensor_set_requires_grad(x, 1);
    a = cg_mul(x, x);
    b = cg_add(a, x);
    y = cg_sum(b, 0, NULL, 0);
    ck_assert_ptr_nonnull(y);
    nodes[0] = y->grad_fn;
    nodes[1] = b->grad_fn;
    nodes[2] = a->grad_fn;
    for (n = 0; fired; n++) {
        ck_assert_msg(n < 10000, "backward allocates without end");
        if (backward_failing_at(y, nodes, 3, n, &fired) != CG_OK)
            failures++;
        cg_tensor_zero_grad(x);
        ck_assert_msg(cg_backward(y, NULL, 1) == CG_OK, "%s", TT_ERR);
        read_vec(cg_tensor_grad(x), g, 4);
        for (i = 0; i < 4; i++)
            ck_assert_float_eq_tol(g[i], 2 * xs[i] + 1, 1e-6f);
        cg_tensor_zero_grad(x);
    }
    ck_assert_int_gt(failures, 0);
    cg_tensor_free(a);
    cg_tensor_free(b);
    cg_tensor_free(y);
    cg_tensor_free(x);
}
END_TEST

START_TEST(no_grad_mode_and_detach_record_nothing)
{
    static const float xs[3] = { 1, 2, 3 };
    cg_tensor *x = vec(xs, 3), *y, *d, *z;
    float g[3];

    cg_tensor_set_requires_grad(x, 1);
    ck_assert(cg_is_grad_enabled());
    cg_no_grad_enter();
    cg_no_grad_enter();
    ck_assert(!cg_is_grad_enabled());
    y = cg_mul_scalar(x, 2);
    ck_assert(!cg_tensor_requires_grad(y));
    ck_assert(cg_tensor_is_leaf(y));
    cg_no_grad_leave();
    ck_assert(!cg_is_grad_enabled());
    cg_no_grad_leave();
    ck_assert(cg_is_grad_enabled());
    cg_tensor_free(y);

    /* detach cuts the graph: only the attached path gets a gradient. */
    d = cg_detach(x);
    ck_assert(!cg_tensor_requires_grad(d));
    y = cg_mul(x, d);                 /* d/dx = d = x */
    z = cg_sum(y, 0, NULL, 0);
    ck_assert_int_eq(cg_backward(z, NULL, 0), CG_OK);
    read_vec(cg_tensor_grad(x), g, 3);
    ck_assert_float_eq(g[0], 1.0f);
    ck_assert_float_eq(g[2], 3.0f);
    ck_assert_ptr_null(cg_tensor_grad(d));
    cg_tensor_free(d);
    cg_tensor_free(y);
    cg_tensor_free(z);
    cg_tensor_free(x);
}
END_TEST

START_TEST(graph_exports_as_dot)
{
    static const float xs[3] = { 1, 2, 3 };
    cg_tensor *x = vec(xs, 3), *c = vec(xs, 3), *y, *z;
    char *dot;

    cg_tensor_set_requires_grad(x, 1);
    y = tutorial(x, NULL);
    z = cg_mul(y, c);
    dot = cg_graph_dot(z);
    ck_assert_ptr_nonnull(dot);
    ck_assert(strncmp(dot, "digraph", 7) == 0);
    ck_assert_ptr_nonnull(strstr(dot, "add_scalar\\n[3]"));
    ck_assert_ptr_nonnull(strstr(dot, "pow_scalar\\n[3]"));
    ck_assert_ptr_nonnull(strstr(dot, "mean\\n[]"));
    ck_assert_ptr_nonnull(strstr(dot, "mul\\n[3]"));
    ck_assert_ptr_nonnull(strstr(dot, "leaf (requires grad)\\n[3]"));
    ck_assert_ptr_nonnull(strstr(dot, "constant\\n[3]"));
    ck_assert_ptr_nonnull(strstr(dot, " -> "));
    ck_assert(dot[strlen(dot) - 2] == '}');
    free(dot);
    ck_assert_ptr_null(cg_graph_dot(NULL));
    cg_tensor_free(z);
    cg_tensor_free(y);
    cg_tensor_free(c);
    cg_tensor_free(x);
}
END_TEST

/* After a backward that freed the graph, the DOT says so instead of
 * passing off the lone root node as the graph; retain_graph keeps it. */
START_TEST(dot_after_backward_keeps_or_says_freed)
{
    static const float xs[3] = { 1, 2, 3 };
    cg_tensor *x = vec(xs, 3), *y;
    char *dot;

    cg_tensor_set_requires_grad(x, 1);
    y = tutorial(x, NULL);
    ck_assert_int_eq(cg_backward(y, NULL, 1), CG_OK);
    dot = cg_graph_dot(y);
    ck_assert_ptr_nonnull(dot);
    ck_assert_ptr_nonnull(strstr(dot, "pow_scalar\\n[3]"));
    ck_assert_ptr_nonnull(strstr(dot, "leaf (requires grad)\\n[3]"));
    ck_assert_ptr_null(strstr(dot, "graph freed by backward"));
    free(dot);
    ck_assert_int_eq(cg_backward(y, NULL, 0), CG_OK);
    dot = cg_graph_dot(y);
    ck_assert_ptr_nonnull(dot);
    ck_assert_ptr_nonnull(strstr(dot, "mean\\n[]"));
    ck_assert_ptr_nonnull(strstr(dot, "graph freed by backward"));
    ck_assert_ptr_nonnull(strstr(dot, "before cg_backward"));
    ck_assert_ptr_null(strstr(dot, "pow_scalar"));
    free(dot);
    cg_tensor_free(y);
    cg_tensor_free(x);
}
END_TEST

START_TEST(bad_input_is_reported_and_changes_nothing)
{
    static const float a6[6] = { 1, 2, 3, 4, 5, 6 }, b4[4] = { 1, 2, 3, 4 };
    int64_t s23[2] = { 2, 3 }, s22[2] = { 2, 2 };
    cg_tensor *a = cg_tensor_from_host(tt_ctx(), CG_F32, 2, s23, a6);
    cg_tensor *b = cg_tensor_from_host(tt_ctx(), CG_F32, 2, s22, b4);
    cg_tensor *i = cg_tensor_new(tt_ctx(), CG_I32, 2, s23), *y;
    cg_context *other;
    cg_tensor *o;
    cg_memory_stats before, after;
    float back[6];

    cg_tensor_set_requires_grad(a, 1);
    cg_context_stats(tt_ctx(), &before);
    ck_assert_ptr_null(cg_add(a, b));
    ck_assert_ptr_nonnull(strstr(cg_last_error(), "CG_ESHAPE"));
    ck_assert_ptr_nonnull(strstr(cg_last_error(), "[2, 3]"));
    ck_assert_ptr_nonnull(strstr(cg_last_error(), "[2, 2]"));
    ck_assert_ptr_null(cg_mul(a, NULL));
    ck_assert_ptr_nonnull(strstr(cg_last_error(), "CG_EINVAL"));
    ck_assert_ptr_null(cg_exp(i));
    ck_assert_ptr_nonnull(strstr(cg_last_error(), "CG_EDTYPE"));
    ck_assert_ptr_null(cg_sum(a, 1, (int[]){ 2 }, 0));
    ck_assert_ptr_null(cg_reshape(a, 2, (int64_t[]){ 4, 2 }));
    ck_assert_ptr_nonnull(strstr(cg_last_error(), "[4, 2]"));
    ck_assert_ptr_null(cg_narrow(a, 1, 2, 2));
    ck_assert_ptr_null(cg_expand(a, 2, (int64_t[]){ 4, 3 }));
    ck_assert_int_eq(cg_tensor_set_requires_grad(i, 1), CG_EDTYPE);
    /* Nothing allocated, nothing recorded, values intact. */
    cg_context_stats(tt_ctx(), &after);
    ck_assert_uint_eq(after.bytes_in_use, before.bytes_in_use);
    ck_assert(cg_tensor_is_leaf(a));
    ck_assert_int_eq(cg_tensor_to_host(a, back, sizeof back), CG_OK);
    ck_assert_int_eq(memcmp(back, a6, sizeof back), 0);

    /* Backward on a non-scalar needs grad_output. */
    y = cg_mul_scalar(a, 2);
    ck_assert_int_eq(cg_backward(y, NULL, 0), CG_ESHAPE);
    ck_assert_ptr_nonnull(strstr(cg_last_error(), "[2, 3]"));
    ck_assert_int_eq(cg_backward(y, b, 0), CG_ESHAPE);
    ck_assert_ptr_null(cg_tensor_grad(a));
    ck_assert_int_eq(cg_backward(b, NULL, 0), CG_ESTATE);
    ck_assert_int_eq(cg_backward(NULL, NULL, 0), CG_EINVAL);
    ck_assert_int_eq(cg_tensor_set_requires_grad(y, 0), CG_ESTATE);

    /* Tensors of two contexts do not mix. */
    other = cg_context_new(NULL);
    ck_assert_ptr_nonnull(other);
    o = cg_zeros(other, 2, s23);
    ck_assert_ptr_null(cg_add(a, o));
    ck_assert_ptr_nonnull(strstr(cg_last_error(), "CG_ECONTEXT"));
    cg_tensor_free(o);
    cg_context_free(other);

    cg_tensor_free(y);
    cg_tensor_free(i);
    cg_tensor_free(a);
    cg_tensor_free(b);
}
END_TEST

/* One step of a 2-layer perceptron written with broadcasting ops:
 * h = relu(sum(x[:, :, None] * w1, 1) + b1), loss = mean((h . w2 - t)^2). */
static void
mlp_step(cg_tensor *x, cg_tensor *w1, cg_tensor *b1, cg_tensor *w2,
         cg_tensor *t)
{
    int ax1[1] = { 1 }, ax2[1] = { 1 };
    int64_t s3[3] = { 16, 8, 1 };
    cg_tensor *x3 = cg_reshape(x, 3, s3);
    cg_tensor *p = cg_mul(x3, w1);           /* [16, 8, 32] */
    cg_tensor *z = cg_sum(p, 1, ax1, 0);     /* [16, 32] */
    cg_tensor *zb = cg_add(z, b1);
    cg_tensor *h = cg_relu(zb);
    cg_tensor *o = cg_mul(h, w2);
    cg_tensor *out = cg_sum(o, 1, ax2, 0);   /* [16] */
    cg_tensor *d = cg_sub(out, t);
    cg_tensor *d2 = cg_mul(d, d);
    cg_tensor *loss = cg_mean(d2, 0, NULL, 0);

    ck_assert_msg(loss != NULL, "%s", cg_last_error());
    ck_assert_int_eq(cg_backward(loss, NULL, 0), CG_OK);
    cg_tensor_free(x3);
    cg_tensor_free(p);
    cg_tensor_free(z);
    cg_tensor_free(zb);
    cg_tensor_free(h);
    cg_tensor_free(o);
    cg_tensor_free(out);
    cg_tensor_free(d);
    cg_tensor_free(d2);
    cg_tensor_free(loss);
}

START_TEST(memory_does_not_grow_over_iterations)
{
    int64_t sx[2] = { 16, 8 }, sw1[2] = { 8, 32 }, sb[1] = { 32 },
            st[1] = { 16 };
    cg_context *ctx = tt_ctx();
    cg_tensor *x = cg_rand_normal(ctx, 2, sx, 0, 1);
    cg_tensor *w1 = cg_rand_normal(ctx, 2, sw1, 0, 0.3f);
    cg_tensor *b1 = cg_zeros(ctx, 1, sb);
    cg_tensor *w2 = cg_rand_normal(ctx, 1, sb, 0, 0.3f);
    cg_tensor *t = cg_rand_normal(ctx, 1, st, 0, 1);
    cg_memory_stats first, now;
    int it;

    cg_tensor_set_requires_grad(w1, 1);
    cg_tensor_set_requires_grad(b1, 1);
    cg_tensor_set_requires_grad(w2, 1);
    for (it = 0; it < 200; it++) {
        mlp_step(x, w1, b1, w2, t);
        if (it == 0)
            cg_context_stats(ctx, &first);
    }
    cg_context_stats(ctx, &now);
    /* The gradients exist after the first step; from then on every
     * intermediate is released at the end of its step. */
    ck_assert_uint_eq(now.bytes_in_use, first.bytes_in_use);
    ck_assert_uint_le(now.peak_bytes, first.peak_bytes + 4096);
    cg_tensor_free(x);
    cg_tensor_free(w1);
    cg_tensor_free(b1);
    cg_tensor_free(w2);
    cg_tensor_free(t);
}
END_TEST

START_TEST(creation_and_transfers)
{
    int64_t s[2] = { 3, 5 }, n = 7;
    int32_t iv[7] = { -3, 0, 7, 100000, -1, 2, 9 }, ib[7];
    float f[15];
    cg_tensor *t;
    int i;

    t = cg_full(tt_ctx(), 2, s, 2.5f);
    read_vec(t, f, 15);
    for (i = 0; i < 15; i++)
        ck_assert_float_eq(f[i], 2.5f);
    ck_assert_int_eq(cg_tensor_dim(t, -1), 5);
    ck_assert_int_eq(cg_tensor_dim(t, 2), -1);
    cg_tensor_free(t);
    t = cg_ones(tt_ctx(), 0, NULL);
    ck_assert_int_eq(cg_tensor_numel(t), 1);
    cg_tensor_free(t);
    t = cg_arange(tt_ctx(), 1, 4, 0.5);
    read_vec(t, f, 6);
    for (i = 0; i < 6; i++)
        ck_assert_float_eq(f[i], 1.0f + 0.5f * (float)i);
    cg_tensor_free(t);
    ck_assert_ptr_null(cg_arange(tt_ctx(), 0, 1, 0));
    /* Issue 16: counts beyond int64 (an infinite one included) were
     * converted from double with no defined value. */
    ck_assert_ptr_null(cg_arange(tt_ctx(), -1e308, 1e308, 1));
    ck_assert_int_eq(cg__last_status(), CG_ESHAPE);
    ck_assert_msg(strstr(cg_last_error(), "more than 2^31-1") != NULL, "%s",
                  cg_last_error());
    ck_assert_ptr_null(cg_arange(tt_ctx(), 0, 1e30, 1e-30));
    ck_assert_ptr_null(cg_arange(tt_ctx(), 0, 3e9, 1));
    ck_assert_ptr_null(cg_arange(tt_ctx(), 1, 0, 1));
    ck_assert_int_eq(cg__last_status(), CG_ESHAPE);
    ck_assert_ptr_nonnull(strstr(cg_last_error(), "is empty"));
    t = cg_tensor_from_host(tt_ctx(), CG_I32, 1, &n, iv);
    ck_assert_int_eq(cg_tensor_dtype(t), CG_I32);
    ck_assert_int_eq(cg_tensor_to_host(t, ib, sizeof ib), CG_OK);
    ck_assert_int_eq(memcmp(iv, ib, sizeof iv), 0);
    ck_assert_int_eq(cg_tensor_to_host(t, ib, 4), CG_EINVAL);
    cg_tensor_free(t);
    ck_assert_ptr_null(cg_tensor_new(tt_ctx(), CG_F32, 2, (int64_t[]){ 3, 0 }));
    ck_assert_ptr_null(cg_tensor_new(tt_ctx(), CG_F32, 9, s));
}
END_TEST

static void
draw(uint64_t seed, int normal, int64_t n, float *out)
{
    cg_tensor *t;

    ck_assert_int_eq(cg_manual_seed(tt_ctx(), seed), CG_OK);
    t = normal ? cg_rand_normal(tt_ctx(), 1, &n, 0, 1)
               : cg_rand_uniform(tt_ctx(), 1, &n, 0, 1);
    read_vec(t, out, n);
    cg_tensor_free(t);
}

START_TEST(random_numbers_are_counter_based)
{
    enum { N = 100000 };
    float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    double sum = 0, sq = 0;
    uint64_t seed, off;
    int i, normal;

    for (normal = 0; normal < 2; normal++) {
        draw(1234, normal, N, a);
        sum = sq = 0;
        for (i = 0; i < N; i++) {
            if (!normal)
                ck_assert(a[i] >= 0.0f && a[i] < 1.0f);
            sum += a[i];
            sq += (double)a[i] * a[i];
        }
        sum /= N;
        sq = sq / N - sum * sum;
        /* Mean and variance within 5 standard errors. */
        ck_assert_double_eq_tol(sum, normal ? 0.0 : 0.5,
                                5 * sqrt((normal ? 1.0 : 1.0 / 12) / N));
        ck_assert_double_eq_tol(sq, normal ? 1.0 : 1.0 / 12,
                                normal ? 0.05 : 0.005);
        /* Same seed: the same numbers, whatever the count drawn. */
        draw(1234, normal, 7, b);
        ck_assert_int_eq(memcmp(a, b, 7 * sizeof *a), 0);
        draw(1235, normal, 7, b);
        ck_assert_int_ne(memcmp(a, b, 7 * sizeof *a), 0);
    }
    /* Each draw advances the generator's offset. */
    ck_assert_int_eq(cg_generator_state(tt_ctx(), &seed, &off), CG_OK);
    ck_assert_uint_eq(seed, 1235);
    ck_assert_uint_eq(off, 2);
    ck_assert_int_eq(cg_generator_set_state(tt_ctx(), 1234, 0), CG_OK);
    {
        int64_t n = 5;
        cg_tensor *t = cg_rand_normal(tt_ctx(), 1, &n, 0, 1);

        read_vec(t, b, 5);
        ck_assert_int_eq(memcmp(a, b, 5 * sizeof *a), 0);
        cg_tensor_free(t);
    }
    free(a);
    free(b);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("autograd");
    TCase *tc = tcase_create("autograd");

    tt_require_device();
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, pytorch_tutorial_example);
    tcase_add_test(tc, gradients_accumulate_until_zeroed);
    tcase_add_test(tc, retain_graph_allows_a_second_backward);
    tcase_add_test(tc, backward_frees_what_a_node_saved_once_it_has_run);
    tcase_add_test(tc, a_view_passes_its_gradient_on_without_a_copy);
    tcase_add_test(tc, grad_output_is_read_in_place_and_never_changed);
    tcase_add_test(tc, shared_subexpressions_sum_their_gradients);
    tcase_add_test(tc, matmul_gradients_accumulate_over_backwards);
    tcase_add_test(tc, matmul_gradient_adds_into_existing_grad);
    tcase_add_test(tc, rnn_weight_gradients_accumulate_over_backwards);
    tcase_add_test(tc, backward_recovers_from_host_allocation_failure);
    tcase_add_test(tc, no_grad_mode_and_detach_record_nothing);
    tcase_add_test(tc, graph_exports_as_dot);
    tcase_add_test(tc, dot_after_backward_keeps_or_says_freed);
    tcase_add_test(tc, bad_input_is_reported_and_changes_nothing);
    tcase_add_test(tc, memory_does_not_grow_over_iterations);
    tcase_add_test(tc, creation_and_transfers);
    tcase_add_test(tc, random_numbers_are_counter_based);
    suite_add_tcase(s, tc);
    return tt_run(s);
}
