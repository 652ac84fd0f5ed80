/* SPDX-License-Identifier: MIT */
/*
 * tests/test_half_ops.c - the elementwise ops, where and dropout on
 * float16 and bfloat16 tensors (one kernel source, three storage
 * variants), mixed-dtype promotion, and the float32 host transfers of
 * 16-bit tensors.
 *
 * The reference for an op on a 16-bit tensor is the float32 op on the
 * 16-bit input made float32 (exact), its result rounded to the 16-bit
 * dtype.  Both compute the same float32 expression and round once, so
 * forward results agree to 1 ulp of the 16-bit dtype (2u |want| with u
 * the unit roundoff, 2^-11 for float16's 11-bit significand, 2^-8 for
 * bfloat16's 8 bits; in practice they are equal).
 *
 * Gradients: x32 (a float32 leaf) -> cg_to_dtype -> view -> op -> float32
 * -> sum(y * w), against the float32 op on x32 rounded with the weights w
 * rounded (the gradient reaching the 16-bit op is w rounded, exactly).
 * The 16-bit backward rounds its result once (u), uses the saved 16-bit
 * output y where the derivative is written in y (exp, sqrt, tanh,
 * sigmoid, pow: y off by u relative, which 1 - y^2 and y (1 - y) turn
 * into up to 2u of |g|), and sums rounded terms over broadcast dimensions
 * (terms of one sign here: w > 0 and the inputs chosen so, at most u
 * relative).  Tolerance: 4u (|want| + max |want|) per element, the max
 * taken over the tensor.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "testutil.h"

#define MAXN 4096

static cg_dtype
dtype_of(int i)
{
    return i ? CG_BF16 : CG_F16;
}

/* The unit roundoff of dt. */
static double
unit(cg_dtype dt)
{
    return dt == CG_F16 ? ldexp(1, -11) : ldexp(1, -8);
}

/* Deterministic values in [lo, hi). */
static void
fill(float *v, int n, float lo, float hi, int seed)
{
    int i;

    for (i = 0; i < n; i++) {
        double f = sin(12.9898 * (i + 1) + 78.233 * seed) * 43758.5453;

        v[i] = lo + (hi - lo) * (float)(f - floor(f));
    }
}

static cg_tensor *
up(cg_dtype dt, int ndim, const int64_t *shape, const float *v)
{
    cg_tensor *t = cg_tensor_from_host_f32(tt_ctx(), dt, ndim, shape, v);

    ck_assert_msg(t != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_dtype(t), dt);
    return t;
}

/* t's values as float32 (returns numel). */
static int
down(const cg_tensor *t, float *v)
{
    size_t n = (size_t)cg_tensor_numel(t);

    ck_assert(n <= MAXN);
    ck_assert_msg(cg_tensor_to_host_f32(t, v, n) == CG_OK, "%s", TT_ERR);
    return (int)n;
}

static cg_tensor *
to(cg_tensor *x, cg_dtype dt)
{
    cg_tensor *y = cg_to_dtype(x, dt);

    ck_assert_msg(y != NULL, "%s", TT_ERR);
    return y;
}

/* want's n values rounded to dt (through the device cast). */
static void
round_to(cg_dtype dt, float *v, int n)
{
    int64_t s = n;
    cg_tensor *t = up(dt, 1, &s, v);

    down(t, v);
    cg_tensor_free(t);
}

/* Forward: got within 2u |want| (plus float16's smallest subnormal). */
static void
check_fwd(const char *what, cg_dtype dt, const float *got,
          const float *want, int n)
{
    double tiny = dt == CG_F16 ? ldexp(1, -24) : 0.0;
    int i;

    for (i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);

        if (isnan(want[i]) && isnan(got[i]))
            continue;
        ck_assert_msg(got[i] == want[i] ||
                      d <= 2 * unit(dt) * fabs(want[i]) + tiny,
                      "%s %s element %d: %.9g, want %.9g", what,
                      dt == CG_F16 ? "float16" : "bfloat16", i, got[i],
                      want[i]);
    }
}

/* Gradients: within 4u (|want| + max |want|). */
static void
check_grad(const char *what, cg_dtype dt, const float *got,
           const float *want, int n)
{
    double m = 0;
    int i;

    for (i = 0; i < n; i++)
        m = fmax(m, fabs(want[i]));
    for (i = 0; i < n; i++)
        ck_assert_msg(fabs((double)got[i] - want[i]) <=
                      4 * unit(dt) * (fabs(want[i]) + m),
                      "%s %s gradient element %d: %.9g, want %.9g (max "
                      "%.9g)", what, dt == CG_F16 ? "float16" : "bfloat16",
                      i, got[i], want[i], m);
}

/* ------------------------------------------------------------------------
 * Layouts: a base tensor and a view of it, so that each op runs its row
 * kernels (vectors and a tail, broadcast rows, rows at an odd offset) and
 * its strided element kernels.
 * ------------------------------------------------------------------------ */
enum { L_FLAT, L_TRANSPOSED, L_BCAST_INNER, L_NARROW, L_COUNT };

static const char *const layout_names[L_COUNT] = {
    "33x65 contiguous", "transpose of 13x7", "7x1 expanded to 7x13",
    "7x13 narrowed to columns 1..11"
};

static void
base_shape(int l, int *ndim, int64_t *shape)
{
    static const int64_t s[L_COUNT][2] = {
        { 33, 65 }, { 13, 7 }, { 7, 1 }, { 7, 13 }
    };

    *ndim = 2;
    shape[0] = s[l][0];
    shape[1] = s[l][1];
}

/* A new reference: the view of layout l of base. */
static cg_tensor *
view(int l, cg_tensor *base)
{
    int64_t e[2] = { 7, 13 };
    cg_tensor *v = NULL;

    switch (l) {
    case L_FLAT:
        v = cg_tensor_ref(base);
        break;
    case L_TRANSPOSED:
        v = cg_transpose(base, 0, 1);
        break;
    case L_BCAST_INNER:
        v = cg_expand(base, 2, e);
        break;
    case L_NARROW:
        v = cg_narrow(base, 1, 1, 11);
        break;
    }
    ck_assert_msg(v != NULL, "%s", TT_ERR);
    return v;
}

/* sum(y (made float32) * w), w float32 of y's shape. */
static cg_tensor *
weighted_sum(cg_tensor *y, const float *w)
{
    int64_t s[CG_MAX_DIMS];
    int nd = cg_tensor_ndim(y);
    cg_tensor *y32 = to(y, CG_F32), *wt, *p, *l;

    cg_tensor_shape(y, s);
    wt = up(CG_F32, nd, s, w);
    p = cg_mul(y32, wt);
    ck_assert_msg(p != NULL, "%s", TT_ERR);
    l = cg_sum(p, 0, NULL, 0);
    ck_assert_msg(l != NULL, "%s", TT_ERR);
    cg_tensor_free(y32);
    cg_tensor_free(wt);
    cg_tensor_free(p);
    return l;
}

static void
backward(cg_tensor *l)
{
    ck_assert_msg(cg_backward(l, NULL, 0) == CG_OK, "%s", TT_ERR);
    cg_tensor_free(l);
}

/* ------------------------------------------------------------------------
 * Unary ops
 * ------------------------------------------------------------------------ */
typedef struct {
    const char *name;
    int op;
    float p, lo, hi;        /* parameter; input range */
} unary_case;

static const unary_case unary_cases[] = {
    { "add_scalar", 0, 0.37f, -3, 3 },
    { "mul_scalar", 1, -1.7f, -3, 3 },
    { "neg", 2, 0, -3, 3 },
    { "pow_scalar", 3, 2.5f, 0.1f, 3 },
    { "exp", 4, 0, -3, 3 },
    { "log", 5, 0, 0.05f, 4 },
    { "sqrt", 6, 0, 0.05f, 4 },
    { "abs", 7, 0, -3, 3 },
    { "clamp", 8, 0, -3, 3 },
    { "tanh", 9, 0, -3, 3 },
    { "sigmoid", 10, 0, -4, 4 },
    { "relu", 11, 0, -3, 3 },
    { "leaky_relu", 12, 0.1f, -3, 3 },
    { "gelu", 13, 0, -3, 3 },
};
#define NUNARY (int)(sizeof unary_cases / sizeof unary_cases[0])

static cg_tensor *
run_unary(const unary_case *c, cg_tensor *x)
{
    cg_tensor *y = NULL;

    switch (c->op) {
    case 0: y = cg_add_scalar(x, c->p); break;
    case 1: y = cg_mul_scalar(x, c->p); break;
    case 2: y = cg_neg(x); break;
    case 3: y = cg_pow_scalar(x, c->p); break;
    case 4: y = cg_exp(x); break;
    case 5: y = cg_log(x); break;
    case 6: y = cg_sqrt(x); break;
    case 7: y = cg_abs(x); break;
    case 8: y = cg_clamp(x, -0.5f, 0.8f); break;
    case 9: y = cg_tanh(x); break;
    case 10: y = cg_sigmoid(x); break;
    case 11: y = cg_relu(x); break;
    case 12: y = cg_leaky_relu(x, c->p); break;
    case 13: y = cg_gelu(x); break;
    }
    ck_assert_msg(y != NULL, "%s: %s", c->name, TT_ERR);
    return y;
}

/* Unary op c on dt over layout l: forward and gradient. */
static void
unary_one(const unary_case *c, cg_dtype dt, int l)
{
    static float xv[MAXN], w[MAXN], got[MAXN], want[MAXN];
    int64_t s[2];
    int nd, n, i;
    cg_tensor *x32, *h, *v, *y, *xr, *vr, *yr, *yr16;
    char what[96];

    snprintf(what, sizeof what, "%s over %s", c->name, layout_names[l]);
    base_shape(l, &nd, s);
    n = (int)(s[0] * s[1]);
    fill(xv, n, c->lo, c->hi, c->op);
    /* Zeros (abs, relu, clamp's edges) and a clamp bound exactly. */
    xv[0] = 0.0f;
    if (c->op == 8)
        xv[n - 1] = 0.8f;
    if (c->lo > 0)
        xv[0] = c->lo;
    fill(w, MAXN, 0.5f, 1.5f, 100 + c->op);

    /* Forward against the float32 op on the rounded input. */
    h = up(dt, nd, s, xv);
    v = view(l, h);
    y = run_unary(c, v);
    ck_assert_int_eq(cg_tensor_dtype(y), dt);
    n = down(y, got);
    xr = to(h, CG_F32);
    vr = view(l, xr);
    yr = run_unary(c, vr);
    ck_assert_int_eq(cg_tensor_dtype(yr), CG_F32);
    yr16 = to(yr, dt);
    down(yr16, want);
    check_fwd(what, dt, got, want, n);
    cg_tensor_free(v); cg_tensor_free(y); cg_tensor_free(vr);
    cg_tensor_free(yr); cg_tensor_free(yr16); cg_tensor_free(h);

    /* Gradient through cg_to_dtype from a float32 leaf. */
    base_shape(l, &nd, s);
    x32 = up(CG_F32, nd, s, xv);
    ck_assert_int_eq(cg_tensor_set_requires_grad(x32, 1), CG_OK);
    h = to(x32, dt);
    v = view(l, h);
    y = run_unary(c, v);
    backward(weighted_sum(y, w));
    n = down(cg_tensor_grad(x32), got);
    cg_tensor_free(v); cg_tensor_free(y); cg_tensor_free(h);
    ck_assert_int_eq(cg_tensor_requires_grad(xr), 0);
    ck_assert_int_eq(cg_tensor_set_requires_grad(xr, 1), CG_OK);
    vr = view(l, xr);
    yr = run_unary(c, vr);
    for (i = 0; i < (int)cg_tensor_numel(yr); i++)
        want[i] = w[i];
    round_to(dt, want, (int)cg_tensor_numel(yr));
    backward(weighted_sum(yr, want));
    down(cg_tensor_grad(xr), want);
    check_grad(what, dt, got, want, n);
    cg_tensor_free(vr); cg_tensor_free(yr); cg_tensor_free(xr);
    cg_tensor_free(x32);
}

/* Under a host memory checker, one op per host path (the ops differ only
 * in their kernels, built from one source, which Oclgrind checks): the
 * affine form (add_scalar), one reading its saved output (tanh), relu. */
static int
host_path_case(int c)
{
    return c == 0 || c == 9 || c == 11;
}

START_TEST(unary_ops_match_float32_on_rounded_inputs)
{
    int c, l;

    for (c = 0; c < NUNARY; c++)
        for (l = 0; l < L_COUNT; l++)
            if (!tt_host_checker() || host_path_case(c))
                unary_one(&unary_cases[c], dtype_of(_i), l);
}
END_TEST

/* ------------------------------------------------------------------------
 * Binary ops and where
 * ------------------------------------------------------------------------ */
static const char *const binary_names[] = {
    "add", "sub", "mul", "div", "pow", "maximum", "minimum"
};
#define NBINARY 7

static cg_tensor *
run_binary(int op, cg_tensor *a, cg_tensor *b)
{
    cg_tensor *y = NULL;

    switch (op) {
    case 0: y = cg_add(a, b); break;
    case 1: y = cg_sub(a, b); break;
    case 2: y = cg_mul(a, b); break;
    case 3: y = cg_div(a, b); break;
    case 4: y = cg_pow(a, b); break;
    case 5: y = cg_maximum(a, b); break;
    case 6: y = cg_minimum(a, b); break;
    }
    ck_assert_msg(y != NULL, "%s: %s", binary_names[op], TT_ERR);
    return y;
}

/* Operand layouts of a binary op (a's view, b's shape): both 33x65 (1-D
 * rows); a 7x13 with b a row [13] (rows, b's outer stride 0) or a column
 * [7, 1] (b's inner stride 0); a the transpose of 13x7 with b 7x13
 * (strided element kernels). */
enum { B_SAME, B_ROW, B_COL, B_STRIDED, B_COUNT };

static void
binary_shapes(int l, int64_t *as, int *bnd, int64_t *bs)
{
    static const int64_t a[B_COUNT][2] = {
        { 33, 65 }, { 7, 13 }, { 7, 13 }, { 13, 7 }
    };
    static const int64_t b[B_COUNT][2] = {
        { 33, 65 }, { 13, 0 }, { 7, 1 }, { 7, 13 }
    };

    as[0] = a[l][0];
    as[1] = a[l][1];
    *bnd = l == B_ROW ? 1 : 2;
    bs[0] = b[l][0];
    bs[1] = b[l][1];
}

static cg_tensor *
aview(int l, cg_tensor *a)
{
    cg_tensor *v = l == B_STRIDED ? cg_transpose(a, 0, 1)
                                  : cg_tensor_ref(a);

    ck_assert_ptr_nonnull(v);
    return v;
}

/* y = op(a, b) (where: where(cond, a, b), op = NBINARY) in dt, layout l:
 * results and both gradients against float32. */
static void
binary_one(int op, cg_dtype dt, int l)
{
    static float av[MAXN], bv[MAXN], w[MAXN], wr[MAXN];
    static float got[3][MAXN], want[3][MAXN];
    static int32_t cv[MAXN];
    static float cf[MAXN];
    int64_t as[2], bs[2], cs[2] = { 7, 13 };
    int bnd, na, nb, n, i, pass;
    cg_tensor *a32, *b32, *cond, *ah, *bh, *va, *y, *lt;
    char what[96];

    snprintf(what, sizeof what, "%s over layout %d",
             op < NBINARY ? binary_names[op] : "where", l);
    binary_shapes(l, as, &bnd, bs);
    na = (int)(as[0] * as[1]);
    nb = (int)(bs[0] * (bnd == 2 ? bs[1] : 1));
    /* Positive inputs: pow's base, and gradient terms of one sign in the
     * sums over broadcast dimensions. */
    fill(av, na, 1.05f, 2.5f, 7 * op + l);
    fill(bv, nb, 1.05f, 2.5f, 7 * op + l + 50);
    if (l == B_SAME)
        for (i = 0; i < na; i += 5)
            bv[i] = av[i];              /* maximum / minimum ties */
    fill(w, MAXN, 0.5f, 1.5f, 3);
    for (i = 0; i < MAXN; i++) {
        cv[i] = (i * 7) % 3 != 0;
        cf[i] = (float)cv[i] * 0.5f;
        wr[i] = w[i];
    }
    round_to(dt, wr, MAXN);
    if (l == B_STRIDED)
        cs[0] = 7, cs[1] = 13;
    else
        cs[0] = as[0], cs[1] = as[1];
    /* where: an int32 condition in two layouts, a float32 one in two. */
    cond = l < B_COL ? cg_tensor_from_host(tt_ctx(), CG_I32, 2, cs, cv)
                     : cg_tensor_from_host(tt_ctx(), CG_F32, 2, cs, cf);
    ck_assert_ptr_nonnull(cond);
    /* pass 0: the 16-bit op from float32 leaves; pass 1: the float32 op
     * on the rounded inputs. */
    for (pass = 0; pass < 2; pass++) {
        cg_tensor *ga, *gb;

        if (pass == 0) {
            a32 = up(CG_F32, 2, as, av);
            b32 = up(CG_F32, bnd, bs, bv);
        } else {
            ah = up(dt, 2, as, av);
            bh = up(dt, bnd, bs, bv);
            a32 = to(ah, CG_F32);
            b32 = to(bh, CG_F32);
            cg_tensor_free(ah);
            cg_tensor_free(bh);
        }
        ck_assert_int_eq(cg_tensor_set_requires_grad(a32, 1), CG_OK);
        ck_assert_int_eq(cg_tensor_set_requires_grad(b32, 1), CG_OK);
        ah = pass ? cg_tensor_ref(a32) : to(a32, dt);
        bh = pass ? cg_tensor_ref(b32) : to(b32, dt);
        va = aview(l, ah);
        y = op < NBINARY ? run_binary(op, va, bh) : cg_where(cond, va, bh);
        ck_assert_msg(y != NULL, "%s: %s", what, TT_ERR);
        ck_assert_int_eq(cg_tensor_dtype(y), pass ? CG_F32 : dt);
        if (pass) {
            cg_tensor *r = to(y, dt);

            n = down(r, want[0]);
            cg_tensor_free(r);
        } else {
            n = down(y, got[0]);
        }
        lt = weighted_sum(y, pass ? wr : w);
        backward(lt);
        ga = cg_tensor_grad(a32);
        gb = cg_tensor_grad(b32);
        ck_assert_ptr_nonnull(ga);
        ck_assert_ptr_nonnull(gb);
        down(ga, pass ? want[1] : got[1]);
        down(gb, pass ? want[2] : got[2]);
        cg_tensor_free(va); cg_tensor_free(y); cg_tensor_free(ah);
        cg_tensor_free(bh); cg_tensor_free(a32); cg_tensor_free(b32);
    }
    check_fwd(what, dt, got[0], want[0], n);
    check_grad(what, dt, got[1], want[1], na);
    check_grad(what, dt, got[2], want[2], nb);
    cg_tensor_free(cond);
}

START_TEST(binary_ops_and_where_match_float32_on_rounded_inputs)
{
    int op, l;

    /* under a host memory checker: add, div and where (one binary host
     * path; see host_path_case) */
    for (op = 0; op <= NBINARY; op++)
        for (l = 0; l < B_COUNT; l++)
            if (!tt_host_checker() || op == 0 || op == 3 || op == NBINARY)
                binary_one(op, dtype_of(_i), l);
}
END_TEST

/* ------------------------------------------------------------------------
 * Promotion
 * ------------------------------------------------------------------------ */

/* float32(want_dt(float32(t))): t through the promoted dtype (float16 to
 * bfloat16 and back goes through float32, as PyTorch converts). */
static cg_tensor *
via(cg_tensor *t, cg_dtype want_dt)
{
    cg_tensor *f = to(t, CG_F32), *w = to(f, want_dt), *r = to(w, CG_F32);

    cg_tensor_free(f);
    cg_tensor_free(w);
    return r;
}

/* a (dtype da, shape [n] or 0-D) * b (db): the result's dtype, its values
 * against float32 on the rounded inputs (cast to the promoted dtype), and
 * each leaf's gradient: w rounded to the operand's dtype (and through the
 * promoted dtype), summed for a 0-D operand. */
static void
promote_case(cg_dtype da, int a0d, cg_dtype db, int b0d, cg_dtype want_dt)
{
    static float av[33], bv[33], w[33], got[33], ref[33], tmp[33];
    int64_t n = 33;
    cg_tensor *a32, *b32, *ah, *bh, *y, *ar, *br, *yr, *t;
    double sa = 0;
    int i, nn;

    /* Positive: the 0-D operand's gradient sums 33 terms of one sign. */
    fill(av, 33, 0.5f, 2, 1);
    fill(bv, 33, 0.5f, 2, 2);
    fill(w, 33, 0.5f, 1.5f, 3);
    a32 = up(CG_F32, a0d ? 0 : 1, &n, av);
    b32 = up(CG_F32, b0d ? 0 : 1, &n, bv);
    ck_assert_int_eq(cg_tensor_set_requires_grad(a32, 1), CG_OK);
    ck_assert_int_eq(cg_tensor_set_requires_grad(b32, 1), CG_OK);
    ah = to(a32, da);
    bh = to(b32, db);
    y = cg_mul(ah, bh);
    ck_assert_msg(y != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_dtype(y), want_dt);
    nn = down(y, got);
    /* The reference: the inputs through their own dtype, then the
     * promoted one, multiplied in float32 and rounded. */
    cg_no_grad_enter();
    ar = via(ah, want_dt);
    br = via(bh, want_dt);
    yr = cg_mul(ar, br);
    t = to(yr, want_dt);
    down(t, ref);
    cg_no_grad_leave();
    ck_assert_int_eq(nn, a0d && b0d ? 1 : 33);
    for (i = 0; i < nn; i++)
        ck_assert_msg(got[i] == ref[i], "%d: %g, want %g", i, got[i],
                      ref[i]);
    cg_tensor_free(t); cg_tensor_free(yr); cg_tensor_free(ar);
    cg_tensor_free(br);
    /* Gradient of a (when a is not 0-D and b is): sum(y * w) gives
     * w * b, with w and the product rounded as the dtypes say; checked
     * within the gradient tolerance of the narrowest dtype. */
    backward(weighted_sum(y, w));
    down(cg_tensor_grad(a32), got);
    if (!a0d) {
        for (i = 0; i < 33; i++)
            ref[i] = w[i];
        down(bh, tmp);
        for (i = 0; i < 33; i++)
            ref[i] *= b0d ? tmp[0] : tmp[i];
        check_grad("promoted mul", da == CG_F32 ? want_dt : da, got, ref,
                   33);
    } else {
        down(bh, tmp);
        for (i = 0; i < nn; i++)
            sa += (double)w[i] * tmp[b0d ? 0 : i];
        ref[0] = (float)sa;
        check_grad("promoted mul (0-D a)", da, got, ref, 1);
    }
    ck_assert_int_eq(cg_tensor_dtype(cg_tensor_grad(a32)), CG_F32);
    cg_tensor_free(y); cg_tensor_free(ah); cg_tensor_free(bh);
    cg_tensor_free(a32); cg_tensor_free(b32);
}

START_TEST(mixed_dtypes_promote_as_pytorch)
{
    promote_case(CG_F16, 0, CG_BF16, 0, CG_F32);
    promote_case(CG_BF16, 0, CG_F16, 0, CG_F32);
    promote_case(CG_F16, 0, CG_F32, 0, CG_F32);
    promote_case(CG_F32, 0, CG_BF16, 0, CG_F32);
    /* A 0-D operand takes the other's dtype. */
    promote_case(CG_F16, 0, CG_F32, 1, CG_F16);
    promote_case(CG_F32, 1, CG_BF16, 0, CG_BF16);
    promote_case(CG_BF16, 0, CG_F16, 1, CG_BF16);
    promote_case(CG_F16, 1, CG_F32, 0, CG_F32);
    /* Both 0-D: as tensors with dimensions. */
    promote_case(CG_F16, 1, CG_BF16, 1, CG_F32);
}
END_TEST

/* mul(h, h) and h + exp(h): h's two 16-bit gradients are added by the
 * engine's accumulation (in float32, rounded once). */
START_TEST(a_16_bit_operand_used_twice_accumulates_its_gradients)
{
    cg_dtype dt = dtype_of(_i);
    int64_t s[2] = { 7, 13 };
    float xv[91], w[91], got[91], want[91], hx[91];
    cg_tensor *x32, *h, *y, *e;
    int i, k;

    fill(xv, 91, -2, 2, 21);
    fill(w, 91, 0.5f, 1.5f, 22);
    round_to(dt, w, 91);
    for (k = 0; k < 2; k++) {
        x32 = up(CG_F32, 2, s, xv);
        ck_assert_int_eq(cg_tensor_set_requires_grad(x32, 1), CG_OK);
        h = to(x32, dt);
        e = k ? cg_exp(h) : NULL;
        y = k ? cg_add(h, e) : cg_mul(h, h);
        ck_assert_msg(y != NULL, "%s", TT_ERR);
        backward(weighted_sum(y, w));
        down(cg_tensor_grad(x32), got);
        down(h, hx);
        for (i = 0; i < 91; i++)
            want[i] = k ? w[i] * (1.0f + expf(hx[i])) : 2.0f * w[i] * hx[i];
        check_grad(k ? "h + exp(h)" : "h * h", dt, got, want, 91);
        cg_tensor_free(x32); cg_tensor_free(h); cg_tensor_free(y);
        cg_tensor_free(e);
    }
}
END_TEST

START_TEST(where_promotes_and_refuses_a_16_bit_condition)
{
    int64_t n = 5;
    float a[5] = { 1, 2, 3, 4, 5 }, b[5] = { -1, -2, -3, -4, -5 }, got[5];
    float c[5] = { 1, 0, 1, 0, 0 };
    cg_tensor *ah = up(CG_F16, 1, &n, a), *bh = up(CG_F32, 1, &n, b);
    cg_tensor *cf = up(CG_F32, 1, &n, c), *ch = up(CG_BF16, 1, &n, c), *y;
    int i;

    y = cg_where(cf, ah, bh);
    ck_assert_msg(y != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_dtype(y), CG_F32);
    down(y, got);
    for (i = 0; i < 5; i++)
        ck_assert(got[i] == (c[i] != 0 ? a[i] : b[i]));
    cg_tensor_free(y);
    ck_assert_ptr_null(cg_where(ch, ah, bh));
    ck_assert_int_eq(cg__last_status(), CG_EDTYPE);
    ck_assert_ptr_nonnull(strstr(TT_ERR, "bfloat16"));
    cg_tensor_free(ah); cg_tensor_free(bh); cg_tensor_free(cf);
    cg_tensor_free(ch);
}
END_TEST

/* ------------------------------------------------------------------------
 * Dropout
 * ------------------------------------------------------------------------ */
START_TEST(dropout_drops_the_same_elements_in_every_dtype)
{
    cg_dtype dt = dtype_of(_i);
    static float xv[33 * 65], w[33 * 65], got[33 * 65], want[33 * 65];
    static float g16[33 * 65], g32[33 * 65];
    int64_t s[2] = { 33, 65 };
    int l, i, n = 33 * 65, dropped;
    cg_context *ctx = tt_ctx();

    fill(xv, n, 0.1f, 3, 9);
    fill(w, n, 0.5f, 1.5f, 10);
    for (i = 0; i < n; i += 2)
        xv[i] = -xv[i];
    round_to(dt, xv, n);            /* the same input for both dtypes */
    round_to(dt, w, n);
    /* l 0: contiguous; 1: a transposed view (strided kernel read). */
    for (l = 0; l < 2; l++) {
        cg_tensor *x32, *h, *v, *y, *v32, *y32;

        x32 = up(CG_F32, 2, s, xv);
        ck_assert_int_eq(cg_tensor_set_requires_grad(x32, 1), CG_OK);
        h = to(x32, dt);
        v = l ? cg_transpose(h, 0, 1) : cg_tensor_ref(h);
        ck_assert_int_eq(cg_manual_seed(ctx, 1234 + l), CG_OK);
        y = cg_dropout(v, 0.3f, 1);
        ck_assert_msg(y != NULL, "%s", TT_ERR);
        ck_assert_int_eq(cg_tensor_dtype(y), dt);
        down(y, got);
        backward(weighted_sum(y, w));
        down(cg_tensor_grad(x32), g16);
        ck_assert_int_eq(cg_tensor_zero_grad(x32), CG_OK);
        v32 = l ? cg_transpose(x32, 0, 1) : cg_tensor_ref(x32);
        ck_assert_int_eq(cg_manual_seed(ctx, 1234 + l), CG_OK);
        y32 = cg_dropout(v32, 0.3f, 1);
        ck_assert_msg(y32 != NULL, "%s", TT_ERR);
        down(y32, want);
        backward(weighted_sum(y32, w));
        down(cg_tensor_grad(x32), g32);
        for (i = dropped = 0; i < n; i++) {
            ck_assert_msg((got[i] == 0) == (want[i] == 0), "element %d: "
                          "%g, float32 %g", i, got[i], want[i]);
            dropped += got[i] == 0;
        }
        ck_assert(dropped > n / 5 && dropped < n * 2 / 5);
        round_to(dt, want, n);
        check_fwd("dropout", dt, got, want, n);
        round_to(dt, g32, n);
        check_fwd("dropout gradient", dt, g16, g32, n);
        cg_tensor_free(x32); cg_tensor_free(h); cg_tensor_free(v);
        cg_tensor_free(y); cg_tensor_free(v32); cg_tensor_free(y32);
    }
}
END_TEST

/* ------------------------------------------------------------------------
 * Host transfers and fills
 * ------------------------------------------------------------------------ */
START_TEST(float32_host_transfers_round_as_the_cast)
{
    cg_dtype dt = dtype_of(_i);
    static const float tricky[] = {
        0.0f, -0.0f, 1.0f / 3.0f, -2.5f, 65504.0f, 65520.0f, 1e-8f,
        6.0e-8f, 3.0e-38f, 1e38f, 3.4e38f, 1.00048828125f, 1.00390625f,
        -1.0009765625f, 0.1f, 1e5f
    };
    float v[35], back[35], ref[35];
    uint16_t bits[35], rbits[35];
    int32_t ints[35] = { 0 };
    int64_t s[2] = { 5, 7 }, n35 = 35, st[2];
    cg_tensor *t, *f, *r, *tr, *r2;
    int i;

    for (i = 0; i < 35; i++)
        v[i] = i < 16 ? tricky[i] : (float)(i - 20) * 0.3337f;
    v[16] = INFINITY;
    v[17] = -INFINITY;
    v[18] = NAN;
    t = up(dt, 2, s, v);
    f = cg_tensor_from_host(tt_ctx(), CG_F32, 2, s, v);
    r = to(f, dt);
    ck_assert_int_eq(cg_tensor_to_host(t, bits, sizeof bits), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(r, rbits, sizeof rbits), CG_OK);
    ck_assert(memcmp(bits, rbits, sizeof bits) == 0);
    /* Back to float32: exact, as cg_to_dtype; a transposed view too. */
    ck_assert_int_eq(cg_tensor_to_host_f32(t, back, 35), CG_OK);
    r2 = to(t, CG_F32);
    ck_assert_int_eq(cg_tensor_to_host(r2, ref, sizeof ref), CG_OK);
    ck_assert(memcmp(back, ref, sizeof ref) == 0);
    tr = cg_transpose(t, 0, 1);
    ck_assert_int_eq(cg_tensor_to_host_f32(tr, back, 35), CG_OK);
    for (i = 0; i < 35; i++)
        ck_assert(memcmp(&back[i], &ref[(i % 5) * 7 + i / 5], 4) == 0);
    /* float32 itself passes through. */
    ck_assert_int_eq(cg_tensor_to_host_f32(f, back, 35), CG_OK);
    ck_assert(memcmp(back, v, sizeof back) == 0);
    /* Errors change nothing. */
    back[0] = 42.0f;
    ck_assert_int_eq(cg_tensor_to_host_f32(t, back, 34), CG_EINVAL);
    ck_assert_int_eq(cg_tensor_to_host_f32(NULL, back, 35), CG_EINVAL);
    ck_assert_int_eq(cg_tensor_to_host_f32(t, NULL, 35), CG_EINVAL);
    ck_assert(back[0] == 42.0f);
    cg_tensor_free(r2);
    r2 = cg_tensor_from_host(tt_ctx(), CG_I32, 1, &n35, ints);
    ck_assert_int_eq(cg_tensor_to_host_f32(r2, back, 35), CG_EDTYPE);
    ck_assert_ptr_null(cg_tensor_from_host_f32(tt_ctx(), CG_I32, 1, &n35, v));
    ck_assert_int_eq(cg__last_status(), CG_EDTYPE);
    ck_assert_ptr_null(cg_tensor_from_host_f32(tt_ctx(), dt, 1, &n35, NULL));
    ck_assert_int_eq(cg__last_status(), CG_EINVAL);
    ck_assert_int_eq(cg_tensor_shape(t, st), CG_OK);
    ck_assert(st[0] == 5 && st[1] == 7);
    cg_tensor_free(t); cg_tensor_free(f); cg_tensor_free(r);
    cg_tensor_free(tr); cg_tensor_free(r2);
}
END_TEST

START_TEST(full_dtype_fills_rounded_values)
{
    cg_dtype dt = dtype_of(_i);
    int64_t s[3] = { 3, 1, 5 };
    float v[15], got[15];
    uint16_t a[15], b[15];
    cg_tensor *t, *r;
    int i;

    for (i = 0; i < 15; i++)
        v[i] = 1.0f / 3.0f;
    t = cg_full_dtype(tt_ctx(), dt, 3, s, 1.0f / 3.0f);
    ck_assert_msg(t != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_dtype(t), dt);
    r = up(dt, 3, s, v);
    ck_assert_int_eq(cg_tensor_to_host(t, a, sizeof a), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(r, b, sizeof b), CG_OK);
    ck_assert(memcmp(a, b, sizeof a) == 0);
    cg_tensor_free(t);
    t = cg_full_dtype(tt_ctx(), dt, 3, s, 0.0f);
    down(t, got);
    for (i = 0; i < 15; i++)
        ck_assert(got[i] == 0.0f && !signbit(got[i]));
    cg_tensor_free(t);
    cg_tensor_free(r);
    ck_assert_ptr_null(cg_full_dtype(tt_ctx(), CG_I32, 3, s, 1.0f));
    ck_assert_int_eq(cg__last_status(), CG_EDTYPE);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("half_ops");
    TCase *tc = tcase_create("half_ops");

    tcase_set_timeout(tc, 1200);
    tcase_add_loop_test(tc, float32_host_transfers_round_as_the_cast, 0, TT_NDTYPES);
    tcase_add_loop_test(tc, full_dtype_fills_rounded_values, 0, TT_NDTYPES);
    tcase_add_loop_test(tc, unary_ops_match_float32_on_rounded_inputs, 0, TT_NDTYPES);
    tcase_add_loop_test(tc,
                        binary_ops_and_where_match_float32_on_rounded_inputs,
                        0, TT_NDTYPES);
    tcase_add_test(tc, mixed_dtypes_promote_as_pytorch);
    tcase_add_test(tc, where_promotes_and_refuses_a_16_bit_condition);
    tcase_add_loop_test(tc,
                        a_16_bit_operand_used_twice_accumulates_its_gradients,
                        0, TT_NDTYPES);
    tcase_add_loop_test(tc, dropout_drops_the_same_elements_in_every_dtype,
                        0, TT_NDTYPES);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tt_run(suite());
}
