/* SPDX-License-Identifier: MIT */
/*
 * tests/test_half_matmul.c - matrix products of 16-bit operands (CG_F16,
 * CG_BF16): cg_matmul (2-D, batched, broadcast), cg_matmul_t and
 * transposed views, cg_matmul_out's float32 output, and the linear
 * layer's product with its bias in the GEMM's epilogue (cg__linear), each
 * against a double-precision host product of the same 16-bit-rounded
 * inputs; and their gradients against the float32 op's on those inputs.
 *
 * Tolerance, per element c = sum_k a_k b_k (+ bias) with S = sum_k |a_k
 * b_k| (+ |bias|): the kernels sum in float32, whose error is bounded by
 * about K u32 S (u32 = 2^-24, one rounding per addition; K 2^-24 S is the
 * classical gamma_K bound to first order), and round the result once to
 * the output's dtype, |c| u with u = 2^-8 for bfloat16 (8 significant
 * bits) and 2^-11 for float16 (11); a float16 result may also be
 * subnormal, whose spacing is 2^-24 absolute.  So
 *     |c - ref| <= u |ref| + 2 K 2^-24 S + 2^-24
 * (the factor 2 and the absolute term leave room for the bound's higher-
 * order terms and tiny results; it stays far below one 16-bit ulp of the
 * typical |c| ~ sqrt(K) / 3, so a product summed in half, as CLBlast's
 * HGEMM does, or a lost element, fails it).  Gradients are compared with
 * the float32 op's gradient on the same rounded inputs and rounded
 * output gradient, which carries its own K 2^-24 S: the bound doubles its
 * accumulation term.
 *
 * Sizes: odd ones (7x13x33, 65x129x31) through every kernel path (gemm,
 * gemm_nt in place, packed B^T and packed A^T through gemm_tpose), and
 * 32x2048x512, the recurrent step's NT.skinny class, which runs with the
 * shipped tuning entry's own parameters; the products both with the
 * operands read in place and through float32 copies (gemm_widen).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "ops/internal.h"
#include "testutil.h"

static const cg_dtype dts[2] = { CG_F16, CG_BF16 };

/* The output rounding's relative error for dtype dt. */
static double
unit(cg_dtype dt)
{
    return dt == CG_F16 ? ldexp(1.0, -11)
           : dt == CG_BF16 ? ldexp(1.0, -8) : ldexp(1.0, -24);
}

/* For loop index i, how the products read their operands (bit 1: through
 * float32 copies, gemm_widen, else in place; -1: gemm.c's rule); returns
 * the dtype (bit 0, for i >= 0). */
static cg_dtype
read_mode(int i)
{
    /* under a host memory checker the loop runs 0, 1: float16 both ways */
    if (i >= 0 && tt_host_checker())
        i *= 2;
    ck_assert_int_eq(cg__gemm_widen_force(tt_ctx(), i < 0 ? -1 : i >> 1),
                     CG_OK);
    return dts[i & 1];
}

/* The same with gemm.c's rule. */
static cg_dtype
rule_mode(int i)
{
    read_mode(-1);
    return dts[i];
}

/* A float32 tensor of uniform values in [-1, 1). */
static cg_tensor *
rand32(int ndim, const int64_t *shape)
{
    cg_tensor *t = cg_rand_uniform(tt_ctx(), ndim, shape, -1.0f, 1.0f);

    ck_assert_msg(t != NULL, "%s", TT_ERR);
    return t;
}

/* t's elements as float32 (a 16-bit t cast up exactly); the caller frees. */
static float *
host(cg_tensor *t)
{
    cg_tensor *f = cg_tensor_dtype(t) == CG_F32 ? cg_tensor_ref(t)
                                                 : cg_to_dtype(t, CG_F32);
    size_t n = (size_t)cg_tensor_numel(t);
    float *v = malloc(n * sizeof *v);

    ck_assert_msg(f != NULL && v != NULL, "%s", TT_ERR);
    ck_assert_msg(cg_tensor_to_host(f, v, n * sizeof *v) == CG_OK, "%s",
                  TT_ERR);
    cg_tensor_free(f);
    return v;
}

/* A random float32 tensor rounded to dt (a new tensor of dtype dt). */
static cg_tensor *
rand16(cg_dtype dt, int ndim, const int64_t *shape)
{
    cg_tensor *f = rand32(ndim, shape), *h = cg_to_dtype(f, dt);

    ck_assert_msg(h != NULL, "%s", TT_ERR);
    cg_tensor_free(f);
    return h;
}

/* Checks c (batch x m x n, float32 values of a dtype-dt result) against
 * ref with the header's bound: sums s (sum |a b|), K k, accumulations
 * `acc` (1 for a product against exact sums, 2 against float32's). */
static void
expect_close(const char *what, cg_dtype dt, const float *c,
             const double *ref, const double *s, size_t n, size_t k,
             double acc)
{
    double u = unit(dt), worst = 0.0;
    size_t i, bad = n;

    for (i = 0; i < n; i++) {
        double tol = u * fabs(ref[i]) + 2.0 * acc * (double)k *
                     ldexp(1.0, -24) * s[i] + ldexp(1.0, -24);
        double e = fabs((double)c[i] - ref[i]);

        if (!(e <= tol) && bad == n)
            bad = i;
        if (e / tol > worst)
            worst = e / tol;
    }
    ck_assert_msg(bad == n, "%s (%s): element %zu is %.9g, reference %.9g "
                  "(sum |ab| %.3g, K %zu)", what, cg__dtype_name(dt), bad,
                  bad < n ? c[bad] : 0.0f, bad < n ? ref[bad] : 0.0,
                  bad < n ? s[bad] : 0.0, k);
}

/* ref, s = op(a) op(b) (+ bias) in double for `batch` products of row-
 * major matrices (a [batch?, M, K] or its transpose, batch stride sa, 0
 * for one matrix; the same for b). */
static void
ref_gemm(size_t batch, size_t m, size_t n, size_t k, const float *a,
         int ta, size_t sa, const float *b, int tb, size_t sb,
         const float *bias, double *ref, double *s)
{
    size_t z, i, j, q;

    for (z = 0; z < batch; z++)
        for (i = 0; i < m; i++)
            for (j = 0; j < n; j++) {
                const float *pa = a + z * sa, *pb = b + z * sb;
                double r = bias ? bias[j] : 0.0;
                double t = bias ? fabs(bias[j]) : 0.0;

                for (q = 0; q < k; q++) {
                    double x = ta ? pa[q * m + i] : pa[i * k + q];
                    double y = tb ? pb[j * k + q] : pb[q * n + j];

                    r += x * y;
                    t += fabs(x * y);
                }
                ref[(z * m + i) * n + j] = r;
                s[(z * m + i) * n + j] = t;
            }
}

/* cg_matmul_t of 16-bit a, b (shapes as given, row-major) against the
 * host product; out is the result's dtype (cg_matmul_out when float32). */
static void
check_product(cg_dtype dt, cg_dtype out, int nda, const int64_t *sha,
              int ndb, const int64_t *shb, int ta, int tb)
{
    cg_tensor *a = rand16(dt, nda, sha), *b = rand16(dt, ndb, shb), *c;
    size_t m = (size_t)sha[nda - (ta ? 1 : 2)];
    size_t k = (size_t)sha[nda - (ta ? 2 : 1)];
    size_t n = (size_t)shb[ndb - (tb ? 2 : 1)];
    size_t ba = (size_t)cg_tensor_numel(a) / (m * k);
    size_t bb = (size_t)cg_tensor_numel(b) / (k * n);
    size_t batch = ba > bb ? ba : bb;
    float *ha = host(a), *hb = host(b), *hc;
    double *ref = malloc(batch * m * n * sizeof *ref);
    double *s = malloc(batch * m * n * sizeof *s);
    char what[96];

    c = out == dt ? cg_matmul_t(a, b, ta, tb) : cg_matmul_out(a, b, out);
    ck_assert_msg(c != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_dtype(c), out);
    ck_assert_int_eq(cg_tensor_numel(c), (int64_t)(batch * m * n));
    hc = host(c);
    ref_gemm(batch, m, n, k, ha, ta, ba > 1 ? m * k : 0, hb, tb,
             bb > 1 ? k * n : 0, NULL, ref, s);
    snprintf(what, sizeof what, "%zux%zux%zu batch %zu%s%s -> %s", m, n, k,
             batch, ta ? " A^T" : "", tb ? " B^T" : "",
             cg__dtype_name(out));
    expect_close(what, out, hc, ref, s, batch * m * n, k, 1.0);
    free(ha);
    free(hb);
    free(hc);
    free(ref);
    free(s);
    cg_tensor_free(a);
    cg_tensor_free(b);
    cg_tensor_free(c);
}

START_TEST(products_2d_sum_in_float32)
{
    cg_dtype dt = read_mode(_i);
    static const int64_t sz[][3] = {
        { 7, 13, 33 }, { 65, 129, 31 }, { 1, 1, 1 }, { 3, 200, 5 }
    };
    size_t i;
    int t;

    for (i = 0; i < sizeof sz / sizeof sz[0]; i++)
        for (t = 0; t < 4; t++) {
            int ta = t & 1, tb = t >> 1;
            int64_t sa[2], sb[2];

            /* under a memory checker: every transpose at 7x13x33, the
             * packed NT at 65x129x31 */
            if (tt_checker() && i > 0 && !(i == 1 && t == 2))
                continue;

            sa[0] = ta ? sz[i][2] : sz[i][0];
            sa[1] = ta ? sz[i][0] : sz[i][2];
            sb[0] = tb ? sz[i][1] : sz[i][2];
            sb[1] = tb ? sz[i][2] : sz[i][1];
            check_product(dt, dt, 2, sa, 2, sb, ta, tb);
        }
}
END_TEST

START_TEST(products_long_k_and_tuned_class)
{
    cg_dtype dt = read_mode(_i);
    /* TN with K 600: A^T packed (gemm_tpose) then gemm */
    static const int64_t a1[2] = { 600, 20 }, b1[2] = { 600, 24 };
    /* NT.skinny, the recurrent step 32 x 2048 x 512 (tuned parameters) */
    static const int64_t a2[2] = { 32, 512 }, b2[2] = { 2048, 512 };

    check_product(dt, dt, 2, a1, 2, b1, 1, 0);
    if (!tt_checker())      /* its kernel paths run in the other tests */
        check_product(dt, dt, 2, a2, 2, b2, 0, 1);
}
END_TEST

START_TEST(batched_products)
{
    cg_dtype dt = read_mode(_i);
    static const int64_t a3[3] = { 3, 7, 33 }, b3[3] = { 3, 33, 13 };
    static const int64_t a4[4] = { 2, 3, 7, 33 }, b2[2] = { 33, 13 };
    static const int64_t b1[3] = { 1, 33, 13 }, bt[3] = { 3, 13, 33 };

    check_product(dt, dt, 3, a3, 3, b3, 0, 0);   /* distinct matrices */
    check_product(dt, dt, 4, a4, 2, b2, 0, 0);   /* folded into rows */
    check_product(dt, dt, 3, a3, 3, b1, 0, 0);   /* b broadcast */
    check_product(dt, dt, 3, a3, 3, bt, 0, 1);   /* batched NT */
}
END_TEST

START_TEST(float32_output)
{
    cg_dtype dt = read_mode(_i);
    static const int64_t a[2] = { 65, 31 }, b[2] = { 31, 129 };
    static const int64_t a3[3] = { 3, 7, 33 }, b3[3] = { 3, 33, 13 };

    check_product(dt, CG_F32, 2, a, 2, b, 0, 0);
    check_product(dt, CG_F32, 3, a3, 3, b3, 0, 0);
}
END_TEST

/* Launches of check_product's product of 2-D a, b into a C of dtype out
 * (its casts and reads included: the same for any product of the same
 * sizes). */
static uint64_t
product_launches(cg_dtype dt, cg_dtype out, const int64_t *sa,
                 const int64_t *sb, int ta, int tb)
{
    cg_memory_stats s0, s1;

    ck_assert_int_eq(cg_context_stats(tt_ctx(), &s0), CG_OK);
    check_product(dt, out, 2, sa, 2, sb, ta, tb);
    ck_assert_int_eq(cg_context_stats(tt_ctx(), &s1), CG_OK);
    return s1.kernels_enqueued - s0.kernels_enqueued;
}

/* Operands widened to float32 copies for a float32 C run on the float32
 * backend chosen for the product, each right: with each forced in turn,
 * check_product's launches are the same but for the backend's: one for
 * CLBlast's call or clgrad's gemm, and more for the packed backend (its
 * packing, then gemm_packed), which such products never ran on before.
 * Then a batch. */
static uint64_t
widened_launches(cg_dtype dt, cg__gemm_backend be)
{
    static const int64_t sa[2] = { 65, 31 }, sb[2] = { 31, 129 };
    uint64_t n;

    cg__gemm_force(tt_ctx(), be);
    n = product_launches(dt, CG_F32, sa, sb, 0, 0);
    cg__gemm_force(tt_ctx(), CG__GEMM_AUTO);
    return n;
}

START_TEST(widened_products_run_on_each_float32_backend)
{
    cg_dtype dt = dts[_i];
    static const int64_t a3[3] = { 3, 7, 33 }, b3[3] = { 3, 33, 13 };
    uint64_t blas, own, packed;

    ck_assert_int_eq(cg__gemm_widen_force(tt_ctx(), 1), CG_OK);
    blas = widened_launches(dt, CG__GEMM_CLBLAST);
    own = widened_launches(dt, CG__GEMM_CLGRAD);
    packed = widened_launches(dt, CG__GEMM_PACKED);
    ck_assert_msg(blas == own && own < packed, "launches of a widened "
                  "product: %llu with CLBlast, %llu with clgrad's kernels, "
                  "%llu packed", (unsigned long long)blas,
                  (unsigned long long)own, (unsigned long long)packed);
    cg__gemm_force(tt_ctx(), CG__GEMM_PACKED);
    check_product(dt, CG_F32, 3, a3, 3, b3, 0, 0);
    cg__gemm_force(tt_ctx(), CG__GEMM_AUTO);
    ck_assert_int_eq(cg__gemm_widen_force(tt_ctx(), -1), CG_OK);
}
END_TEST

/* 16-bit operands into a float32 C on the packed backend are packed from
 * their own storage (gemm_pack_a / _b convert as they copy): two launches
 * fewer than through float32 copies (the gemm_widen of each operand), and
 * right (widened_launches' product; a batch, and B shared by a batch). */
START_TEST(packed_products_pack_sixteen_bit_operands_themselves)
{
    cg_dtype dt = dts[_i];
    static const int64_t a3[3] = { 3, 7, 33 }, b3[3] = { 3, 33, 13 };
    static const int64_t b1[2] = { 33, 13 };
    uint64_t widened, own;

    ck_assert_int_eq(cg__gemm_widen_force(tt_ctx(), 1), CG_OK);
    widened = widened_launches(dt, CG__GEMM_PACKED);
    ck_assert_int_eq(cg__gemm_widen_force(tt_ctx(), -1), CG_OK);
    own = widened_launches(dt, CG__GEMM_PACKED);
    ck_assert_msg(own + 2 == widened, "launches of a packed product: %llu "
                  "from 16-bit operands, %llu through float32 copies",
                  (unsigned long long)own, (unsigned long long)widened);
    cg__gemm_force(tt_ctx(), CG__GEMM_PACKED);
    check_product(dt, CG_F32, 3, a3, 3, b3, 0, 0);
    check_product(dt, CG_F32, 3, a3, 2, b1, 0, 0);  /* b for the batch */
    cg__gemm_force(tt_ctx(), CG__GEMM_AUTO);
}
END_TEST

/* An operand that gemm.cl's kernels run transposed (B of an NT product
 * on B^T, A of a TN product of long K on A^T) gets its float32 copy
 * transposed in the same pass: the widened product takes as many
 * launches as an NN product of its sizes (a copy per operand, then
 * gemm), not one more for a transpose of the copy; and it is right. */
START_TEST(widened_operands_are_transposed_in_one_pass)
{
    cg_dtype dt = dts[_i];
    static const int64_t a1[2] = { 65, 31 }, b1[2] = { 31, 129 };
    static const int64_t b1t[2] = { 129, 31 };
    static const int64_t a2[2] = { 20, 600 }, a2t[2] = { 600, 20 };
    static const int64_t b2[2] = { 600, 24 };
    uint64_t nn1, nt, nn2, tn;

    ck_assert_int_eq(cg__gemm_widen_force(tt_ctx(), 1), CG_OK);
    cg__gemm_force(tt_ctx(), CG__GEMM_CLGRAD);
    nn1 = product_launches(dt, dt, a1, b1, 0, 0);
    nt = product_launches(dt, dt, a1, b1t, 0, 1);
    nn2 = product_launches(dt, dt, a2, b2, 0, 0);
    tn = product_launches(dt, dt, a2t, b2, 1, 0);
    cg__gemm_force(tt_ctx(), CG__GEMM_AUTO);
    ck_assert_int_eq(cg__gemm_widen_force(tt_ctx(), -1), CG_OK);
    ck_assert_msg(nt == nn1 && tn == nn2, "launches of widened products: "
                  "65x129x31 NT %llu against NN %llu, 20x24x600 TN %llu "
                  "against NN %llu", (unsigned long long)nt,
                  (unsigned long long)nn1, (unsigned long long)tn,
                  (unsigned long long)nn2);
}
END_TEST

/* A 16-bit C from CLBlast, which writes only a float32 C: the product
 * goes to a float32 scratch C and gemm_narrow rounds act(P + beta C +
 * bias) once into C, as gemm.cl's epilogue does.  The packed kernels
 * write it themselves where K fits one block (PKC 128 here: K 100), and
 * past it through the scratch C too (K 300); float32 operands into a
 * 16-bit C past one block are still rounded once (the 16-bit variants
 * walk all of K as one block).  A batch of two with B shared, alpha,
 * beta, a bias and ReLU, against the double-precision product; the
 * launches are the backend's (CLBlast: the two float32 copies, its call,
 * the narrow; packed: the two packs and the product, and the narrow). */
START_TEST(sixteen_bit_c_from_clblast_and_packed)
{
    static const struct { cg__gemm_backend be; size_t k, launches;
                          int f32; const char *what; } runs[4] = {
        { CG__GEMM_CLBLAST, 35, 4, 0, "CLBlast, narrowed" },
        { CG__GEMM_PACKED, 100, 3, 0, "packed, one block" },
        { CG__GEMM_PACKED, 300, 4, 0, "packed, narrowed" },
        { CG__GEMM_PACKED, 300, 3, 1, "packed, float32 operands" },
    };
    cg_dtype dt = dts[_i];
    const size_t m = 67, n = 131, batch = 2;
    const float alpha = 0.75f, beta = -0.5f;
    int64_t sc[3] = { 2, 67, 131 }, sd[1] = { 131 };
    cg_tensor *d = rand16(dt, 1, sd), *a, *b, *c;
    float *hd = host(d), *ha, *hb, *c0, *hc;
    double *ref = malloc(batch * m * n * sizeof *ref);
    double *s = malloc(batch * m * n * sizeof *s);
    cg_memory_stats s0, s1;
    size_t i, j, z, k;
    int e, added;

    cg__param_set(tt_ctx(), CG__P_GEMM_PACK_PKC, 128);
    for (e = 0; e < 4; e++) {
        int64_t sa[3] = { 2, 67, 0 }, sb[2] = { 0, 131 };
        cg__mat am, bm, cm, dm = { cg__tensor_mem(d), 0, 0 };

        k = runs[e].k;
        sa[2] = sb[0] = (int64_t)k;
        a = runs[e].f32 ? rand32(3, sa) : rand16(dt, 3, sa);
        b = runs[e].f32 ? rand32(2, sb) : rand16(dt, 2, sb);
        ha = host(a);
        hb = host(b);
        c = rand16(dt, 3, sc);
        c0 = host(c);
        am.mem = cg__tensor_mem(a);
        am.off = 0;
        am.ld = k;
        bm.mem = cg__tensor_mem(b);
        bm.off = 0;
        bm.ld = n;
        cm.mem = cg__tensor_mem(c);
        cm.off = 0;
        cm.ld = n;
        ref_gemm(batch, m, n, k, ha, 0, m * k, hb, 0, 0, NULL, ref, s);
        for (z = 0; z < batch; z++)
            for (i = 0; i < m; i++)
                for (j = 0; j < n; j++) {
                    size_t q = (z * m + i) * n + j;
                    double v = alpha * ref[q] + beta * (double)c0[q] + hd[j];

                    ref[q] = v > 0.0 ? v : 0.0;
                    s[q] = fabs(alpha) * s[q] + fabs(beta * c0[q]) +
                           fabs(hd[j]);
                }
        cg__gemm_force(tt_ctx(), runs[e].be);
        ck_assert_int_eq(cg_context_stats(tt_ctx(), &s0), CG_OK);
        ck_assert_msg(cg__gemm_act(tt_ctx(), runs[e].f32 ? CG_F32 : dt, dt,
                                   0, 0, m, n, k, alpha,
                                   am, m * k, bm, 0, beta, cm, m * n, batch,
                                   &dm, CG__ACT_RELU, &added) == CG_OK,
                      "%s", TT_ERR);
        ck_assert_int_eq(cg_context_stats(tt_ctx(), &s1), CG_OK);
        cg__gemm_force(tt_ctx(), CG__GEMM_AUTO);
        ck_assert_int_eq(added, 1);
        ck_assert_uint_eq(s1.kernels_enqueued - s0.kernels_enqueued,
                          runs[e].launches);
        hc = host(c);
        expect_close(runs[e].what, dt, hc, ref, s, batch * m * n, k + 2,
                     1.0);
        free(hc);
        free(c0);
        free(ha);
        free(hb);
        cg_tensor_free(a);
        cg_tensor_free(b);
        cg_tensor_free(c);
    }
    cg__params_reset(tt_ctx());
    free(hd);
    free(ref);
    free(s);
    cg_tensor_free(d);
}
END_TEST

START_TEST(transposed_views_are_read_in_place)
{
    cg_dtype dt = rule_mode(_i);
    static const int64_t sa[2] = { 33, 7 }, sb[2] = { 13, 33 };
    cg_tensor *a = rand16(dt, 2, sa), *b = rand16(dt, 2, sb);
    cg_tensor *at = cg_transpose(a, 0, 1), *bt = cg_transpose(b, 0, 1);
    cg_tensor *c, *d;
    float *hc, *hd;
    size_t i;

    ck_assert_msg(at && bt, "%s", TT_ERR);
    c = cg_matmul(at, bt);                /* views */
    d = cg_matmul_t(a, b, 1, 1);          /* flags */
    ck_assert_msg(c && d, "%s", TT_ERR);
    hc = host(c);
    hd = host(d);
    for (i = 0; i < 7 * 13; i++)
        ck_assert_msg(hc[i] == hd[i], "element %zu: %g vs %g", i, hc[i],
                      hd[i]);
    free(hc);
    free(hd);
    cg_tensor_free(a);
    cg_tensor_free(b);
    cg_tensor_free(at);
    cg_tensor_free(bt);
    cg_tensor_free(c);
    cg_tensor_free(d);
}
END_TEST

/* cg__linear(x, w, bias) of 16-bit tensors against x W^T + b. */
static void
check_linear(cg_dtype dt, int64_t rows, int64_t in, int64_t out)
{
    int64_t sx[3] = { 1, rows, in }, sw[2] = { out, in }, sb[1] = { out };
    cg_tensor *x = rand16(dt, 3, sx), *w = rand16(dt, 2, sw);
    cg_tensor *b = rand16(dt, 1, sb), *y;
    float *hx = host(x), *hw = host(w), *hb = host(b), *hy;
    double *ref = malloc((size_t)(rows * out) * sizeof *ref);
    double *s = malloc((size_t)(rows * out) * sizeof *s);

    y = cg__linear(x, w, b);
    ck_assert_msg(y != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_dtype(y), dt);
    ck_assert_int_eq(cg_tensor_dim(y, 2), out);
    hy = host(y);
    ref_gemm(1, (size_t)rows, (size_t)out, (size_t)in, hx, 0, 0, hw, 1, 0,
             hb, ref, s);
    expect_close("linear", dt, hy, ref, s, (size_t)(rows * out),
                 (size_t)in + 1, 1.0);
    free(hx);
    free(hw);
    free(hb);
    free(hy);
    free(ref);
    free(s);
    cg_tensor_free(x);
    cg_tensor_free(w);
    cg_tensor_free(b);
    cg_tensor_free(y);
}

START_TEST(linear_adds_its_bias_in_the_epilogue)
{
    cg_dtype dt = read_mode(_i);

    check_linear(dt, 7, 33, 13);       /* gemm_nt in place */
    check_linear(dt, 65, 31, 129);     /* packed W^T, then gemm */
    check_linear(dt, 128, 784, 64);    /* NT, a layer's size */
}
END_TEST

/* Launches of a backward through cg__linear(x, w, b) of dtype dt with
 * only b requiring grad (rows x out output, gradient g of ones); *db
 * gets b's gradient as float32 values (the caller frees). */
static uint64_t
bias_grad_launches(cg_dtype dt, int64_t rows, int64_t out, float **db)
{
    int64_t sx[2] = { rows, 5 }, sw[2] = { out, 5 }, sb[1] = { out };
    int64_t sy[2] = { rows, out };
    cg_tensor *x = rand16(dt, 2, sx), *w = rand16(dt, 2, sw);
    cg_tensor *b = rand16(dt, 1, sb), *g1 = cg_full(tt_ctx(), 2, sy, 1.0f);
    cg_tensor *g = dt == CG_F32 ? cg_tensor_ref(g1) : cg_to_dtype(g1, dt);
    cg_tensor *y;
    cg_memory_stats s0, s1;

    ck_assert_msg(g != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_set_requires_grad(b, 1), CG_OK);
    y = cg__linear(x, w, b);
    ck_assert_msg(y != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_context_stats(tt_ctx(), &s0), CG_OK);
    ck_assert_msg(cg_backward(y, g, 0) == CG_OK, "%s", TT_ERR);
    ck_assert_int_eq(cg_context_stats(tt_ctx(), &s1), CG_OK);
    ck_assert_int_eq(cg_tensor_dtype(cg_tensor_grad(b)), dt);
    *db = host(cg_tensor_grad(b));
    cg_tensor_free(x);
    cg_tensor_free(w);
    cg_tensor_free(b);
    cg_tensor_free(g1);
    cg_tensor_free(g);
    cg_tensor_free(y);
    return s1.kernels_enqueued - s0.kernels_enqueued;
}

/* A 16-bit linear layer's bias gradient, the column sums of the 16-bit
 * output gradient, is summed by the reduction's 16-bit variant in float32
 * and rounded once, not through a float32 copy of the gradient first:
 * rows = 300 sums in two passes (chunks of rows, then the chunks, which
 * rounds), as many launches as float32's; 7 rows in a pass and a
 * rounding one, one launch more.  Every sum is rows, exact in both
 * dtypes. */
START_TEST(linear_bias_gradient_sums_sixteen_bit_storage)
{
    static const int64_t rows[2] = { 7, 300 };
    cg_dtype dt = rule_mode(_i / 2);
    int64_t r = rows[_i % 2], out = 37, j;
    float *d16, *d32;
    uint64_t n16 = bias_grad_launches(dt, r, out, &d16);
    uint64_t n32 = bias_grad_launches(CG_F32, r, out, &d32);

    ck_assert_msg(n16 == n32 + (r > 64 ? 0 : 1), "%s bias gradient over "
                  "%lld rows: %llu launches, float32's %llu",
                  cg__dtype_name(dt),
                  (long long)r, (unsigned long long)n16,
                  (unsigned long long)n32);
    for (j = 0; j < out; j++) {
        ck_assert_msg(d16[j] == (float)r && d32[j] == (float)r,
                      "db[%lld] = %g (%s), %g (float32), not %lld",
                      (long long)j, d16[j], cg__dtype_name(dt), d32[j],
                      (long long)r);
    }
    free(d16);
    free(d32);
}
END_TEST

/* The float32 gradients of leaves a32, b32 (and c32) after a backward
 * through the op of 16-bit casts of them, against the float32 op on the
 * rounded values with the output gradient rounded as the casts do. */
typedef cg_tensor *(*op3)(cg_tensor *a, cg_tensor *b, cg_tensor *c,
                          cg_dtype out);

static cg_tensor *
op_matmul(cg_tensor *a, cg_tensor *b, cg_tensor *c, cg_dtype out)
{
    (void)c;
    return cg_tensor_dtype(a) == out ? cg_matmul(a, b)
                                     : cg_matmul_out(a, b, out);
}

static cg_tensor *
op_matmul_tn(cg_tensor *a, cg_tensor *b, cg_tensor *c, cg_dtype out)
{
    (void)c;
    (void)out;
    return cg_matmul_t(a, b, 1, 0);
}

static cg_tensor *
op_linear(cg_tensor *a, cg_tensor *b, cg_tensor *c, cg_dtype out)
{
    (void)out;
    return cg__linear(a, b, c);
}

/* One leaf: float32 values rounded to dt, requiring grad, and its cast
 * to dt (NULL shapes: none). */
static void
leaf(cg_dtype dt, int nd, const int64_t *sh, cg_tensor **f,
     cg_tensor **h, cg_tensor **r32)
{
    cg_tensor *t;

    *f = *h = *r32 = NULL;
    if (!sh)
        return;
    t = rand16(dt, nd, sh);
    *f = cg_to_dtype(t, CG_F32);         /* exactly representable in dt */
    *r32 = cg_to_dtype(t, CG_F32);
    cg_tensor_free(t);
    ck_assert_msg(*f && *r32, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_set_requires_grad(*f, 1), CG_OK);
    ck_assert_int_eq(cg_tensor_set_requires_grad(*r32, 1), CG_OK);
    *h = cg_to_dtype(*f, dt);
    ck_assert_msg(*h != NULL, "%s", TT_ERR);
}

/* The 16-bit graph's gradient g16 against the float32 op's g32, with the
 * header's bound: sa holds each element's sum of |products| (the same
 * float32 backward on the operands' and the output gradient's absolute
 * values), k the longest sum. */
static void
expect_grad(const char *what, cg_dtype dt, cg_tensor *g16, cg_tensor *g32,
            cg_tensor *sa, size_t k)
{
    size_t n = (size_t)cg_tensor_numel(g32), i;
    float *a = host(g16), *b = host(g32), *c = host(sa);
    double *ref = malloc(n * sizeof *ref), *s = malloc(n * sizeof *s);

    ck_assert_int_eq(cg_tensor_dtype(g16), CG_F32);
    for (i = 0; i < n; i++) {
        ref[i] = b[i];
        s[i] = c[i];
    }
    expect_close(what, dt, a, ref, s, n, k, 2.0);
    free(a);
    free(b);
    free(c);
    free(ref);
    free(s);
}

/* |t| as a new leaf requiring grad (NULL for NULL). */
static cg_tensor *
abs_leaf(cg_tensor *t)
{
    cg_tensor *r;

    if (!t)
        return NULL;
    cg_no_grad_enter();
    r = cg_abs(t);
    cg_no_grad_leave();
    ck_assert_msg(r != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_set_requires_grad(r, 1), CG_OK);
    return r;
}

static void
check_backward(const char *what, cg_dtype dt, cg_dtype out, op3 op,
               int nda, const int64_t *sha, int ndb, const int64_t *shb,
               const int64_t *shc, size_t k)
{
    cg_tensor *a, *b, *c, *ha, *hb, *hc, *ra, *rb, *rc, *y, *y32, *r;
    cg_tensor *go, *go16, *go32, *aa, *ab, *ac, *ag, *s;
    int64_t shy[CG_MAX_DIMS];
    size_t kmax;

    leaf(dt, nda, sha, &a, &ha, &ra);
    leaf(dt, ndb, shb, &b, &hb, &rb);
    leaf(dt, 1, shc, &c, &hc, &rc);
    y = op(ha, hb, hc, out);
    ck_assert_msg(y != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_dtype(y), out);
    y32 = cg_tensor_dtype(y) == CG_F32 ? cg_tensor_ref(y)
                                       : cg_to_dtype(y, CG_F32);
    ck_assert_msg(y32 != NULL, "%s", TT_ERR);
    cg_tensor_shape(y, shy);
    go = rand32(cg_tensor_ndim(y), shy);
    ck_assert_msg(cg_backward(y32, go, 0) == CG_OK, "%s", TT_ERR);
    /* the float32 op's gradients for the output gradient as the 16-bit
     * graph sees it: rounded to dt by the casts */
    go16 = cg_to_dtype(go, dt);
    go32 = cg_to_dtype(go16, CG_F32);
    r = op(ra, rb, rc, CG_F32);
    ck_assert_msg(go32 && r, "%s", TT_ERR);
    ck_assert_msg(cg_backward(r, go32, 0) == CG_OK, "%s", TT_ERR);
    /* the sums of |products| */
    aa = abs_leaf(ra);
    ab = abs_leaf(rb);
    ac = abs_leaf(rc);
    ag = abs_leaf(go32);
    s = op(aa, ab, ac, CG_F32);
    ck_assert_msg(s != NULL, "%s", TT_ERR);
    ck_assert_msg(cg_backward(s, ag, 0) == CG_OK, "%s", TT_ERR);
    /* the longest sum: K, or the output's rows (a weight's gradient) or
     * columns (the bias's) */
    kmax = k;
    if ((size_t)cg_tensor_numel(y) / (size_t)shy[cg_tensor_ndim(y) - 1] >
        kmax)
        kmax = (size_t)cg_tensor_numel(y) /
               (size_t)shy[cg_tensor_ndim(y) - 1];
    if ((size_t)shy[cg_tensor_ndim(y) - 1] > kmax)
        kmax = (size_t)shy[cg_tensor_ndim(y) - 1];
    expect_grad(what, dt, cg_tensor_grad(a), cg_tensor_grad(ra),
                cg_tensor_grad(aa), kmax);
    expect_grad(what, dt, cg_tensor_grad(b), cg_tensor_grad(rb),
                cg_tensor_grad(ab), kmax);
    if (c)
        expect_grad(what, dt, cg_tensor_grad(c), cg_tensor_grad(rc),
                    cg_tensor_grad(ac), kmax);
    cg_tensor_free(aa);
    cg_tensor_free(ab);
    cg_tensor_free(ac);
    cg_tensor_free(ag);
    cg_tensor_free(s);
    cg_tensor_free(a);
    cg_tensor_free(b);
    cg_tensor_free(c);
    cg_tensor_free(ha);
    cg_tensor_free(hb);
    cg_tensor_free(hc);
    cg_tensor_free(ra);
    cg_tensor_free(rb);
    cg_tensor_free(rc);
    cg_tensor_free(y);
    cg_tensor_free(y32);
    cg_tensor_free(r);
    cg_tensor_free(go);
    cg_tensor_free(go16);
    cg_tensor_free(go32);
}

START_TEST(gradients_match_float32)
{
    cg_dtype dt = rule_mode(_i);
    static const int64_t a2[2] = { 7, 33 }, b2[2] = { 33, 13 };
    static const int64_t a65[2] = { 65, 31 }, b65[2] = { 31, 129 };
    static const int64_t atn[2] = { 33, 7 };
    static const int64_t a3[3] = { 3, 7, 33 }, b1[3] = { 1, 33, 13 };
    static const int64_t x3[3] = { 2, 5, 33 }, w[2] = { 13, 33 };
    static const int64_t bias[1] = { 13 };

    check_backward("matmul 2-D", dt, dt, op_matmul, 2, a2, 2, b2, NULL, 33);
    check_backward("matmul 65x129x31", dt, dt, op_matmul, 2, a65, 2, b65,
                   NULL, 31);
    check_backward("matmul_t A^T", dt, dt, op_matmul_tn, 2, atn, 2, b2,
                   NULL, 33);
    check_backward("matmul batched, b folded", dt, dt, op_matmul, 3, a3, 2,
                   b2, NULL, 33);
    check_backward("matmul batched, b broadcast", dt, dt, op_matmul, 3, a3,
                   3, b1, NULL, 33);
    check_backward("matmul_out float32", dt, CG_F32, op_matmul, 2, a65, 2,
                   b65, NULL, 31);
    check_backward("linear", dt, dt, op_linear, 3, x3, 2, w, bias, 33);
}
END_TEST

/* y = cast(h h^T) + cast(h h^T) for h = cast(a): h's gradient gets four
 * products, the later ones added by the GEMM into what has collected for
 * h (beta 1, reading and writing a 16-bit C).  Each partial sum rounds
 * once more to the dtype, at most u times the sum S of the |products| of
 * the parts added so far: against the float32 op, u |ref| + 4 u S beside
 * the header's accumulation term. */
static cg_tensor *
twice_hht(cg_tensor *h)
{
    cg_tensor *p = cg_matmul_t(h, h, 0, 1), *q = cg_matmul_t(h, h, 0, 1);
    cg_tensor *p32, *q32, *y;

    ck_assert_msg(p && q, "%s", TT_ERR);
    p32 = cg_tensor_dtype(p) == CG_F32 ? cg_tensor_ref(p)
                                        : cg_to_dtype(p, CG_F32);
    q32 = cg_tensor_dtype(q) == CG_F32 ? cg_tensor_ref(q)
                                        : cg_to_dtype(q, CG_F32);
    y = cg_add(p32, q32);
    ck_assert_msg(y != NULL, "%s", TT_ERR);
    cg_tensor_free(p);
    cg_tensor_free(q);
    cg_tensor_free(p32);
    cg_tensor_free(q32);
    return y;
}

START_TEST(gradients_added_into_a_16_bit_one)
{
    cg_dtype dt = rule_mode(_i);
    static const int64_t sh[2] = { 7, 33 }, sy[2] = { 7, 7 };
    cg_tensor *a, *h, *r, *y, *z, *g0, *go, *g16, *aa, *ag, *s;
    float *x16, *x32, *xs;
    double u = unit(dt);
    size_t i;

    leaf(dt, 2, sh, &a, &h, &r);
    g0 = rand32(2, sy);
    g16 = cg_to_dtype(g0, dt);      /* as the casts round it */
    go = g16 ? cg_to_dtype(g16, CG_F32) : NULL;
    ck_assert_msg(go != NULL, "%s", TT_ERR);
    y = twice_hht(h);
    ck_assert_msg(cg_backward(y, go, 0) == CG_OK, "%s", TT_ERR);
    z = twice_hht(r);
    ck_assert_msg(cg_backward(z, go, 0) == CG_OK, "%s", TT_ERR);
    aa = abs_leaf(r);
    ag = abs_leaf(go);
    s = twice_hht(aa);
    ck_assert_msg(cg_backward(s, ag, 0) == CG_OK, "%s", TT_ERR);
    x16 = host(cg_tensor_grad(a));
    x32 = host(cg_tensor_grad(r));
    xs = host(cg_tensor_grad(aa));
    for (i = 0; i < 7 * 33; i++) {
        double tol = u * fabs(x32[i]) + 4.0 * u * xs[i] +
                     4.0 * 7 * ldexp(1.0, -24) * xs[i] + ldexp(1.0, -24);

        ck_assert_msg(fabs((double)x16[i] - x32[i]) <= tol, "%s: element "
                      "%zu is %.9g, float32 %.9g", cg__dtype_name(dt), i,
                      x16[i], x32[i]);
    }
    free(x16);
    free(x32);
    free(xs);
    cg_tensor_free(a);
    cg_tensor_free(h);
    cg_tensor_free(r);
    cg_tensor_free(y);
    cg_tensor_free(z);
    cg_tensor_free(g0);
    cg_tensor_free(go);
    cg_tensor_free(g16);
    cg_tensor_free(aa);
    cg_tensor_free(ag);
    cg_tensor_free(s);
}
END_TEST

START_TEST(wrong_dtypes_are_refused)
{
    static const int64_t s[2] = { 4, 4 };
    cg_tensor *h = rand16(CG_F16, 2, s), *g = rand16(CG_BF16, 2, s);
    cg_tensor *f = rand32(2, s);
    cg_module *lin;

    ck_assert_ptr_null(cg_matmul(h, g));
    ck_assert_int_eq(cg__last_status(), CG_EDTYPE);
    ck_assert_ptr_null(cg_matmul_out(h, h, CG_BF16));
    ck_assert_int_eq(cg__last_status(), CG_EDTYPE);
    ck_assert_ptr_null(cg_matmul_out(f, f, CG_F16));
    ck_assert_int_eq(cg__last_status(), CG_EDTYPE);
    ck_assert_ptr_null(cg__linear(h, f, NULL));
    ck_assert_int_eq(cg__last_status(), CG_EDTYPE);
    /* a 16-bit input to a layer of float32 parameters */
    lin = cg_linear_new(tt_ctx(), 4, 3, 1);
    ck_assert_msg(lin != NULL, "%s", TT_ERR);
    ck_assert_ptr_null(cg_linear_forward(lin, h));
    ck_assert_int_eq(cg__last_status(), CG_EDTYPE);
    cg_module_free(lin);
    cg_tensor_free(h);
    cg_tensor_free(g);
    cg_tensor_free(f);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("half_matmul");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, products_2d_sum_in_float32, 0, 2 * TT_NDTYPES);
    tcase_add_loop_test(tc, products_long_k_and_tuned_class, 0, 2 * TT_NDTYPES);
    tcase_add_loop_test(tc, batched_products, 0, 2 * TT_NDTYPES);
    tcase_add_loop_test(tc, float32_output, 0, 2 * TT_NDTYPES);
    tcase_add_loop_test(tc, widened_products_run_on_each_float32_backend, 0,
                        TT_NDTYPES);
    tcase_add_loop_test(tc, packed_products_pack_sixteen_bit_operands_themselves,
                        0, TT_NDTYPES);
    tcase_add_loop_test(tc, widened_operands_are_transposed_in_one_pass, 0,
                        TT_NDTYPES);
    tcase_add_loop_test(tc, sixteen_bit_c_from_clblast_and_packed, 0,
                        TT_NDTYPES);
    tcase_add_loop_test(tc, transposed_views_are_read_in_place, 0, TT_NDTYPES);
    tcase_add_loop_test(tc, linear_adds_its_bias_in_the_epilogue, 0, 2 * TT_NDTYPES);
    tcase_add_loop_test(tc, linear_bias_gradient_sums_sixteen_bit_storage,
                        0, 2 * TT_NDTYPES);
    tcase_add_loop_test(tc, gradients_match_float32, 0, TT_NDTYPES);
    tcase_add_loop_test(tc, gradients_added_into_a_16_bit_one, 0, TT_NDTYPES);
    tcase_add_test(tc, wrong_dtypes_are_refused);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tt_run(suite());
}
