/* SPDX-License-Identifier: MIT */
/*
 * tests/test_gemm.c - the SGEMM entry (lib/ops/gemm.c) with each backend
 * forced, clgrad's kernels (kernels/gemm.cl), clgrad's kernels over packed
 * operands (kernels/gemm_pack.cl, also with other tunables and at the
 * char-LSTM's shapes) and CLBlast's, against a
 * double-precision C reference: sizes that are multiples of no tile (1,
 * 5, 7, 13, 17, 33, 65, K = 1; K 515 for a packed A^T), the four
 * transposes, alpha and beta (beta 0 over a C full of NaN, which must
 * not be read; beta 1
 * accumulating), offsets and leading dimensions wider than the matrix,
 * strided batches with a broadcast operand (stride 0), a bias vector
 * added in the epilogue (cg__sgemm_bias).  Also clgrad's
 * kernels built with other tunables than the defaults (the candidates
 * clgrad-tune tries), the automatic choice on small products, and
 * CLGRAD_GEMM's validation.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops/internal.h"
#include "tune/internal.h"
#include "testutil.h"

typedef struct gcase {
    int m, n, k, ta, tb;
    float alpha, beta;
    int batch, bcast;   /* bcast: 1 a, 2 b repeated over the batch */
    int off, pad;       /* offset of every operand; ld = cols + pad */
    int bias;           /* a bias vector of N (at offset off) as well */
} gcase;

/* check_case checks every rstep-th row of C: 1 but for the large
 * products, whose host reference takes seconds. */
static int rstep = 1;

static float
frand(void)
{
    return (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
}

/* Element (r, c) of op(A) op(B) in double, for A and B at pa and pb
 * (leading dimensions lda, ldb; ta, tb: stored transposed) over K terms,
 * and in *mag the sum of the terms' magnitudes (the rounding scale). */
static double
ref_dot(const float *pa, size_t lda, int ta, const float *pb, size_t ldb,
        int tb, int r, int c, int k, double *mag)
{
    double s = 0;
    int l;

    *mag = 0;
    for (l = 0; l < k; l++) {
        double x = ta ? pa[(size_t)l * lda + (size_t)r]
                      : pa[(size_t)r * lda + (size_t)l];
        double y = tb ? pb[(size_t)c * ldb + (size_t)l]
                      : pb[(size_t)l * ldb + (size_t)c];

        s += x * y;
        *mag += fabs(x * y);
    }
    return s;
}

/* Runs case g on ctx and checks every element of C, padding included
 * (which must keep its value), against the reference.  Returns whether
 * the GEMM added the bias (cg__sgemm_bias's *added; 1 without one): the
 * reference includes it only then. */
static int
check_case(cg_context *ctx, const gcase *g, const char *label)
{
    int ra = g->ta ? g->k : g->m, ca = g->ta ? g->m : g->k;
    int rb = g->tb ? g->n : g->k, cb = g->tb ? g->k : g->n;
    size_t lda = (size_t)(ca + g->pad), ldb = (size_t)(cb + g->pad);
    size_t ldc = (size_t)(g->n + g->pad);
    size_t sa = g->bcast == 1 ? 0 : (size_t)ra * lda;
    size_t sb = g->bcast == 2 ? 0 : (size_t)rb * ldb;
    size_t sc = (size_t)g->m * ldc;
    size_t na = (size_t)g->off + sa * (size_t)(g->batch - 1) + (size_t)ra * lda;
    size_t nb = (size_t)g->off + sb * (size_t)(g->batch - 1) + (size_t)rb * ldb;
    size_t nc = (size_t)g->off + sc * (size_t)g->batch, i;
    /* One float more than needed: K = 0 makes A and B empty. */
    float *ha = malloc(++na * 4), *hb = malloc(++nb * 4), *hc = malloc(nc * 4);
    float *out = malloc(nc * 4);
    size_t nd = (size_t)g->off + (size_t)g->n;
    float *hd = malloc(nd * 4);
    cg_buffer *ba = cg_buffer_new(ctx, na * 4), *bb = cg_buffer_new(ctx, nb * 4);
    cg_buffer *bc = cg_buffer_new(ctx, nc * 4), *bd = cg_buffer_new(ctx, nd * 4);
    int z, r, c, added = 1;

    ck_assert(ha && hb && hc && out && hd && ba && bb && bc && bd);
    for (i = 0; i < nd; i++)
        hd[i] = frand();
    ck_assert_int_eq(cg_buffer_write(bd, 0, hd, nd * 4), CG_OK);
    for (i = 0; i < na; i++)
        ha[i] = frand();
    for (i = 0; i < nb; i++)
        hb[i] = frand();
    for (i = 0; i < nc; i++)
        hc[i] = g->beta == 0.0f ? NAN : frand();
    ck_assert_int_eq(cg_buffer_write(ba, 0, ha, na * 4), CG_OK);
    ck_assert_int_eq(cg_buffer_write(bb, 0, hb, nb * 4), CG_OK);
    ck_assert_int_eq(cg_buffer_write(bc, 0, hc, nc * 4), CG_OK);
    {
        cg__mat am = { cg__buffer_mem(ba), (size_t)g->off, lda };
        cg__mat bm = { cg__buffer_mem(bb), (size_t)g->off, ldb };
        cg__mat cm = { cg__buffer_mem(bc), (size_t)g->off, ldc };
        cg__mat dm = { cg__buffer_mem(bd), (size_t)g->off, 0 };

        ck_assert_msg(cg__sgemm_bias(ctx, g->ta, g->tb, (size_t)g->m,
                                     (size_t)g->n, (size_t)g->k, g->alpha,
                                     am, sa, bm, sb, g->beta, cm, sc,
                                     (size_t)g->batch, g->bias ? &dm : NULL,
                                     &added) == CG_OK,
                      "%s: %s", label, TT_ERR);
    }
    ck_assert_int_eq(cg_buffer_read(bc, 0, out, nc * 4), CG_OK);
    /* Everything outside the products keeps its value. */
    for (i = 0; i < nc; i++) {
        int inside = i >= (size_t)g->off &&
                     (i - (size_t)g->off) % ldc < (size_t)g->n;

        if (!inside)
            ck_assert_msg(memcmp(&out[i], &hc[i], 4) == 0,
                          "%s: C[%zu] outside the product changed", label,
                          i);
    }
    for (z = 0; z < g->batch; z++)
        for (r = 0; r < g->m; r += rstep)
            for (c = 0; c < g->n; c++) {
                const float *pa = ha + g->off + sa * (size_t)z;
                const float *pb = hb + g->off + sb * (size_t)z;
                size_t ci = (size_t)g->off + sc * (size_t)z +
                            (size_t)r * ldc + (size_t)c;
                double mag, want, tol;
                double s = ref_dot(pa, lda, g->ta, pb, ldb, g->tb, r, c,
                                   g->k, &mag);

                want = g->alpha * s;
                mag *= fabs(g->alpha);
                if (g->beta != 0.0f) {
                    want += (double)g->beta * hc[ci];
                    mag += fabs((double)g->beta * hc[ci]);
                }
                if (g->bias && added) {
                    want += hd[g->off + c];
                    mag += fabs(hd[g->off + c]);
                }
                tol = 1e-5 * mag + 1e-6;
                ck_assert_msg(fabs(out[ci] - want) <= tol,
                              "%s: C[%d][%d, %d] = %.9g, want %.9g", label,
                              z, r, c, (double)out[ci], want);
            }
    cg_buffer_free(ba);
    cg_buffer_free(bb);
    cg_buffer_free(bc);
    cg_buffer_free(bd);
    free(ha);
    free(hb);
    free(hc);
    free(hd);
    free(out);
    return added;
}

static const char *
backend_name(int be)
{
    return be == CG__GEMM_CLBLAST ? "clblast"
           : be == CG__GEMM_PACKED ? "packed" : "clgrad";
}

/* The sizes, each with every transpose, on the backend of the loop. */
START_TEST(gemm_matches_reference_at_odd_sizes)
{
    static const int sizes[][3] = {
        { 1, 1, 1 }, { 7, 13, 5 }, { 33, 65, 17 }, { 7, 13, 1 },
        { 1, 37, 9 }, { 37, 1, 9 }, { 17, 3, 40 }, { 13, 29, 64 },
        { 300, 121, 5 },    /* NT: through a packed B^T (pack_nt) */
        { 19, 37, 515 },    /* TN: through a packed A^T (long K), */
        { 16, 8, 512 },     /* at and off the 8 x 8 blocks' edges */
    };
    cg_context *ctx = tt_ctx();
    char label[128];
    size_t s;
    int t;

    /* Under a memory checker, CLBlast's programs take minutes each to
     * build, and its code is not clgrad's: checked natively only. */
    if (_i == CG__GEMM_CLBLAST && tt_checker())
        return;
    cg__gemm_force(ctx, (cg__gemm_backend)_i);
    srand(1);
    for (s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (t = 0; t < 4; t++) {
            gcase g = { sizes[s][0], sizes[s][1], sizes[s][2], t >> 1, t & 1,
                        1.0f, 0.0f, 1, 0, 0, 0, 0 };

            snprintf(label, sizeof label, "%s %dx%dx%d %c%c",
                     backend_name(_i), g.m, g.n, g.k, g.ta ? 'T' : 'N',
                     g.tb ? 'T' : 'N');
            check_case(ctx, &g, label);
        }
    cg__gemm_force(ctx, CG__GEMM_AUTO);
}
END_TEST

/* alpha and beta (beta 0 over NaN, beta 1 accumulating), offsets and
 * leading dimensions past the matrix, batches with either operand
 * broadcast. */
START_TEST(gemm_alpha_beta_offsets_and_batches)
{
    static const gcase cases[] = {
        { 7, 13, 5, 0, 0, 1.0f, 1.0f, 1, 0, 0, 0, 0 },
        { 33, 65, 17, 0, 1, -1.5f, 0.25f, 1, 0, 0, 0, 0 },
        { 33, 65, 17, 1, 0, 0.5f, 1.0f, 1, 0, 0, 0, 0 },
        { 9, 11, 6, 1, 1, 2.0f, -1.0f, 1, 0, 0, 0, 0 },
        { 7, 13, 5, 0, 0, 1.0f, 0.0f, 1, 0, 3, 5, 0 },
        { 7, 13, 5, 0, 1, 0.5f, 1.0f, 1, 0, 17, 2, 0 },
        { 7, 13, 5, 1, 0, 1.0f, 0.0f, 1, 0, 1, 9, 0 },
        { 7, 13, 5, 1, 1, -2.0f, 0.5f, 1, 0, 2, 1, 0 },
        { 7, 13, 5, 0, 0, 1.0f, 0.0f, 3, 0, 0, 0, 0 },
        { 7, 13, 5, 0, 1, 1.0f, 0.0f, 3, 1, 4, 3, 0 },
        { 7, 13, 5, 1, 0, 1.0f, 1.0f, 4, 2, 0, 1, 0 },
        { 5, 17, 33, 0, 0, 0.75f, 0.0f, 3, 2, 5, 0, 0 },
        { 5, 17, 33, 1, 1, 1.0f, 0.0f, 2, 1, 0, 2, 0 },
        { 1, 1, 1, 0, 1, 1.0f, 1.0f, 5, 1, 1, 0, 0 },
        { 13, 29, 0, 0, 0, 1.0f, 0.5f, 1, 0, 0, 0, 0 },
        { 260, 121, 7, 0, 1, 0.5f, 1.0f, 3, 2, 3, 2, 0 },
        { 260, 121, 7, 0, 1, 1.0f, 0.0f, 1, 0, 1, 4, 0 },
        /* TN of long K, A packed: one A for the batch, offset and pad */
        { 11, 21, 517, 1, 0, 0.5f, 1.0f, 3, 1, 3, 2, 0 },
        { 11, 21, 517, 1, 0, 1.0f, 0.0f, 1, 0, 1, 5, 0 },
        /* ... and a batch of distinct A's, not packed */
        { 11, 21, 517, 1, 0, 1.0f, 0.0f, 2, 2, 0, 1, 0 },
    };
    cg_context *ctx = tt_ctx();
    char label[160];
    size_t c;

    /* Under a memory checker, CLBlast's programs take minutes each to
     * build, and its code is not clgrad's: checked natively only. */
    if (_i == CG__GEMM_CLBLAST && tt_checker())
        return;
    cg__gemm_force(ctx, (cg__gemm_backend)_i);
    srand(2);
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const gcase *g = &cases[c];

        snprintf(label, sizeof label, "%s %dx%dx%d %c%c alpha %g beta %g "
                 "batch %d bcast %d off %d pad %d", backend_name(_i), g->m,
                 g->n, g->k, g->ta ? 'T' : 'N', g->tb ? 'T' : 'N',
                 (double)g->alpha, (double)g->beta, g->batch, g->bcast,
                 g->off, g->pad);
        check_case(ctx, g, label);
    }
    cg__gemm_force(ctx, CG__GEMM_AUTO);
}
END_TEST

/* The bias in the epilogue: added to every row of every matrix after
 * alpha and beta, at sizes that are multiples of no tile and vector
 * (columns past N read nothing of the bias), for each transpose, the
 * packed NT and TN paths, beta 1 accumulating, offsets and batches.
 * clgrad's kernels add it (*added 1); CLBlast's do not (*added 0, C
 * without it), and the caller adds it. */
START_TEST(gemm_bias_epilogue_matches_reference)
{
    static const gcase cases[] = {
        { 1, 1, 1, 0, 0, 1.0f, 0.0f, 1, 0, 0, 0, 1 },
        { 7, 13, 5, 0, 0, 1.0f, 0.0f, 1, 0, 0, 0, 1 },
        { 7, 13, 5, 0, 1, 1.0f, 0.0f, 1, 0, 3, 2, 1 },
        { 33, 65, 17, 1, 0, 0.5f, 1.0f, 1, 0, 1, 0, 1 },
        { 9, 11, 6, 1, 1, 2.0f, -1.0f, 1, 0, 0, 1, 1 },
        { 37, 1, 9, 0, 1, 1.0f, 1.0f, 1, 0, 5, 0, 1 },
        { 1, 37, 9, 0, 0, 1.0f, 0.0f, 1, 0, 0, 0, 1 },
        { 7, 13, 5, 0, 1, 1.0f, 0.0f, 3, 2, 4, 3, 1 },
        { 5, 17, 33, 0, 0, 0.75f, 1.0f, 3, 1, 5, 0, 1 },
        { 13, 29, 0, 0, 0, 1.0f, 0.5f, 1, 0, 0, 0, 1 },
        /* NT through a packed B^T, TN through a packed A^T */
        { 300, 121, 5, 0, 1, 1.0f, 0.0f, 1, 0, 1, 1, 1 },
        { 260, 121, 7, 0, 1, 0.5f, 1.0f, 3, 2, 3, 2, 1 },
        { 19, 37, 515, 1, 0, 1.0f, 1.0f, 1, 0, 2, 0, 1 },
    };
    cg_context *ctx = tt_ctx();
    char label[160];
    size_t c;

    if (_i == CG__GEMM_CLBLAST && tt_checker())
        return;
    cg__gemm_force(ctx, (cg__gemm_backend)_i);
    srand(5);
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const gcase *g = &cases[c];
        int added;

        snprintf(label, sizeof label, "bias %s %dx%dx%d %c%c alpha %g beta "
                 "%g batch %d bcast %d off %d pad %d", backend_name(_i),
                 g->m, g->n, g->k, g->ta ? 'T' : 'N', g->tb ? 'T' : 'N',
                 (double)g->alpha, (double)g->beta, g->batch, g->bcast,
                 g->off, g->pad);
        added = check_case(ctx, g, label);
        /* K = 0 always runs clgrad's kernel */
        ck_assert_msg(added == (_i != CG__GEMM_CLBLAST || g->k == 0),
                      "%s: added %d", label, added);
    }
    cg__gemm_force(ctx, CG__GEMM_AUTO);
}
END_TEST

/* clgrad's kernels with tunables other than the defaults: the tile
 * edges move, and every candidate clgrad-tune may record must be right. */
START_TEST(gemm_kernels_are_right_with_other_tunables)
{
    static const struct { const char *name; long v[7]; } sets[] = {
        /*            VW  TM  TN DVW DTM DTN  WG */
        { "small",  { 4,  1,  1,  4,  1,  1,  4 } },
        { "wide",   { 16, 2,  3,  16, 3,  2, 16 } },
        { "tall",   { 4,  8,  4,  4,  4,  4, 64 } },
        { "odd",    { 8,  5,  3,  8,  3,  3,  8 } },
    };
    static const cg__pid pid[7] = {
        CG__P_GEMM_VW, CG__P_GEMM_TM, CG__P_GEMM_TN, CG__P_GEMM_DVW,
        CG__P_GEMM_DTM, CG__P_GEMM_DTN, CG__P_GEMM_WG,
    };
    static const int sizes[][3] = { { 1, 1, 1 }, { 33, 65, 17 },
                                    { 7, 13, 1 } };
    cg_context *ctx = tt_ctx();
    char label[128];
    size_t s, z;
    int t, p;

    cg__gemm_force(ctx, CG__GEMM_CLGRAD);
    srand(3);
    for (z = 0; z < sizeof sets / sizeof sets[0]; z++) {
        for (p = 0; p < 7; p++)
            cg__param_set(ctx, pid[p], sets[z].v[p]);
        for (s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            for (t = 0; t < 4; t++) {
                gcase g = { sizes[s][0], sizes[s][1], sizes[s][2], t >> 1,
                            t & 1, 1.0f, t == 1 ? 1.0f : 0.0f, 2, 0, 1, 1,
                            (int)(s + (size_t)t) & 1 };

                snprintf(label, sizeof label, "tunables %s %dx%dx%d %c%c%s",
                         sets[z].name, g.m, g.n, g.k, g.ta ? 'T' : 'N',
                         g.tb ? 'T' : 'N', g.bias ? " bias" : "");
                ck_assert_int_eq(check_case(ctx, &g, label), 1);
            }
        if (tt_checker())
            break;
    }
    cg__params_reset(ctx);
    cg__gemm_force(ctx, CG__GEMM_AUTO);
}
END_TEST

/* The packed backend (kernels/gemm_pack.cl) with tunables other than
 * the defaults: micro-tiles of other shapes, K blocks that end inside K
 * (several blocks, so that the later ones add into C: with beta 0 over
 * NaN, beta 1 and a bias added once), one micro-tile or many per item,
 * batches of distinct and of broadcast operands. */
START_TEST(gemm_packed_is_right_with_other_tunables)
{
    static const struct { const char *name; long v[6]; } sets[] = {
        /*            PVW PMR PTN PMB  PKC PWG */
        { "small",  { 4,  2,  1,  1,  128,  4 } },
        { "wide",   { 16, 4,  3,  2,  128, 16 } },
        { "tall",   { 4,  8,  4,  16, 256, 32 } },
        { "odd",    { 8,  6,  3,  4,  512,  8 } },
    };
    static const cg__pid pid[6] = {
        CG__P_GEMM_PACK_PVW, CG__P_GEMM_PACK_PMR, CG__P_GEMM_PACK_PTN,
        CG__P_GEMM_PACK_PMB, CG__P_GEMM_PACK_PKC, CG__P_GEMM_PACK_PWG,
    };
    static const gcase cases[] = {
        { 1, 1, 1, 0, 0, 1.0f, 0.0f, 1, 0, 0, 0, 0 },
        { 33, 65, 17, 0, 1, 1.0f, 0.0f, 2, 0, 1, 1, 1 },
        { 37, 29, 300, 0, 0, 0.5f, 0.0f, 1, 0, 3, 2, 1 },
        { 37, 29, 300, 0, 1, 1.0f, 1.0f, 2, 2, 0, 1, 0 },
        { 37, 29, 300, 1, 0, -1.0f, 1.0f, 1, 0, 1, 0, 1 },
        { 50, 70, 257, 1, 0, 1.0f, 0.25f, 3, 1, 2, 3, 0 },
        { 100, 7, 129, 0, 0, 1.0f, 0.0f, 2, 0, 0, 0, 0 },
    };
    cg_context *ctx = tt_ctx();
    char label[160];
    size_t z, c;
    int p;

    cg__gemm_force(ctx, CG__GEMM_PACKED);
    srand(7);
    for (z = 0; z < sizeof sets / sizeof sets[0]; z++) {
        for (p = 0; p < 6; p++)
            cg__param_set(ctx, pid[p], sets[z].v[p]);
        for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            const gcase *g = &cases[c];

            snprintf(label, sizeof label, "packed %s %dx%dx%d %c%c alpha "
                     "%g beta %g batch %d bcast %d%s", sets[z].name, g->m,
                     g->n, g->k, g->ta ? 'T' : 'N', g->tb ? 'T' : 'N',
                     (double)g->alpha, (double)g->beta, g->batch, g->bcast,
                     g->bias ? " bias" : "");
            ck_assert_int_eq(check_case(ctx, g, label), 1);
        }
        if (tt_checker())
            break;
    }
    cg__params_reset(ctx);
    cg__gemm_force(ctx, CG__GEMM_AUTO);
}
END_TEST

/* A B packed once (cg__gemm_pack_b) and used by several products
 * (cg__gemm_packed_b): C = alpha op(A) B + beta C against the double
 * reference, for B stored K x N and N x K, op(A) in place or transposed,
 * offsets and padded leading dimensions, under two sets of the packed
 * kernels' tunables, A read in place (one launch, gemm_packed_ra) and A
 * packed first (two); C's padding keeps its value.  Then what is refused
 * and changes nothing: a B packed under another panel width, and a C
 * whose dtype is neither the operands' nor float32. */
START_TEST(gemm_packed_b_serves_many_products)
{
    static const struct { int m, n, k, ta, tb, off, pad; float alpha, beta; }
    cases[] = {
        { 1, 1, 1, 0, 0, 0, 0, 1.0f, 0.0f },
        { 7, 19, 13, 0, 1, 3, 2, 1.0f, 1.0f },
        { 33, 70, 129, 1, 0, 1, 5, -0.5f, 0.0f },
        { 32, 100, 300, 0, 1, 0, 1, 1.0f, 1.0f },
        { 13, 37, 257, 1, 1, 2, 0, 2.0f, 0.25f },
    };
    static const long sets[2][6] = {
        /* PVW PMR PTN PMB  PKC PWG */
        { 16, 6, 1, 8, 256, 8 },
        { 4, 2, 3, 1, 128, 4 },
    };
    static const cg__pid pid[6] = {
        CG__P_GEMM_PACK_PVW, CG__P_GEMM_PACK_PMR, CG__P_GEMM_PACK_PTN,
        CG__P_GEMM_PACK_PMB, CG__P_GEMM_PACK_PKC, CG__P_GEMM_PACK_PWG,
    };
    cg_context *ctx = tt_ctx();
    size_t c, q, z;
    int p, mode;

    srand(11);
    for (z = 0; z < 2; z++) {
        for (p = 0; p < 6; p++)
            cg__param_set(ctx, pid[p], sets[z][p]);
        /* each case with A read in place (mode 0), then packed */
        for (q = 0, c = 0; q < 2 * sizeof cases / sizeof cases[0];
             q++, c = q / 2) {
            int m = cases[c].m, n = cases[c].n, k = cases[c].k;
            int ta = cases[c].ta, tb = cases[c].tb, off = cases[c].off;
            size_t lda = (size_t)(ta ? m : k) + (size_t)cases[c].pad;
            size_t ldb = (size_t)(tb ? k : n) + (size_t)cases[c].pad;
            size_t ldc = (size_t)n + (size_t)cases[c].pad;
            size_t na = (size_t)off + lda * (size_t)(ta ? k : m);
            size_t nb = (size_t)off + ldb * (size_t)(tb ? n : k);
            size_t nc = (size_t)off + ldc * (size_t)m, i;
            float *ha = malloc(na * 4), *hb = malloc(nb * 4);
            float *hc = malloc(nc * 4), *out = malloc(nc * 4);
            cg_buffer *ba = cg_buffer_new(ctx, na * 4);
            cg_buffer *bb = cg_buffer_new(ctx, nb * 4);
            cg_buffer *bc = cg_buffer_new(ctx, nc * 4);
            cg__packed_b pb;
            cg_memory_stats st0, st1;
            int rep, r, col;

            mode = (int)(q % 2);
            cg__gemm_set_packed_a(mode ? CG__PACKED_A_PACK
                                       : CG__PACKED_A_AUTO);
            ck_assert(ha && hb && hc && out && ba && bb && bc);
            for (i = 0; i < na; i++)
                ha[i] = frand();
            for (i = 0; i < nb; i++)
                hb[i] = frand();
            ck_assert_int_eq(cg_buffer_write(ba, 0, ha, na * 4), CG_OK);
            ck_assert_int_eq(cg_buffer_write(bb, 0, hb, nb * 4), CG_OK);
            {
                cg__mat bm = { cg__buffer_mem(bb), (size_t)off, ldb };

                ck_assert_msg(cg__gemm_pack_b(ctx, CG_F32, tb, (size_t)n,
                                              (size_t)k, bm, &pb) == CG_OK,
                              "%s", TT_ERR);
            }
            /* Two products on the one packed B, the second into the
             * first's result (beta), as a recurrence uses it. */
            for (rep = 0; rep < 2; rep++) {
                cg__mat am = { cg__buffer_mem(ba), (size_t)off, lda };
                cg__mat cm = { cg__buffer_mem(bc), (size_t)off, ldc };
                float beta = rep ? cases[c].beta : 0.0f;

                if (rep == 0)
                    for (i = 0; i < nc; i++)
                        hc[i] = frand();
                ck_assert_int_eq(cg_buffer_write(bc, 0, hc, nc * 4), CG_OK);
                ck_assert_int_eq(cg_context_stats(ctx, &st0), CG_OK);
                ck_assert_msg(cg__gemm_packed_b(ctx, CG_F32, CG_F32, ta,
                                                (size_t)m, cases[c].alpha,
                                                am, &pb, beta, cm) == CG_OK,
                              "%s", TT_ERR);
                ck_assert_int_eq(cg_context_stats(ctx, &st1), CG_OK);
                ck_assert_uint_eq(st1.kernels_enqueued - st0.kernels_enqueued,
                                  mode ? 2 : 1);
                ck_assert_int_eq(cg_buffer_read(bc, 0, out, nc * 4), CG_OK);
                for (i = 0; i < nc; i++)
                    if (i < (size_t)off || (i - (size_t)off) % ldc >=
                                           (size_t)n)
                        ck_assert_msg(memcmp(&out[i], &hc[i], 4) == 0,
                                      "packed_b: C[%zu] outside the product "
                                      "changed", i);
                for (r = 0; r < m; r++)
                    for (col = 0; col < n; col++) {
                        size_t ci = (size_t)off + (size_t)r * ldc +
                                    (size_t)col;
                        double mag, want;
                        double sum = ref_dot(ha + off, lda, ta, hb + off,
                                             ldb, tb, r, col, k, &mag);

                        want = cases[c].alpha * sum + (double)beta * hc[ci];
                        mag = fabs(cases[c].alpha) * mag +
                              fabs((double)beta * hc[ci]);
                        ck_assert_msg(fabs(out[ci] - want) <=
                                      1e-5 * mag + 1e-6,
                                      "packed_b set %zu %dx%dx%d %c%c A %s "
                                      "rep %d: C[%d, %d] = %.9g, want %.9g",
                                      z, m, n, k, ta ? 'T' : 'N',
                                      tb ? 'T' : 'N',
                                      mode ? "packed" : "in place", rep, r,
                                      col, (double)out[ci], want);
                    }
                memcpy(hc, out, nc * 4);
            }
            /* Refused, C unchanged: another panel width, a float16 C of
             * bfloat16 operands. */
            cg__param_set(ctx, CG__P_GEMM_PACK_PTN, sets[z][2] == 1 ? 2 : 1);
            {
                cg__mat am = { cg__buffer_mem(ba), (size_t)off, lda };
                cg__mat cm = { cg__buffer_mem(bc), (size_t)off, ldc };

                ck_assert_int_eq(cg__gemm_packed_b(ctx, CG_F32, CG_F32, ta,
                                                   (size_t)m, 1.0f, am, &pb,
                                                   0.0f, cm), CG_EINVAL);
                ck_assert_ptr_nonnull(strstr(cg_last_error(), "packed"));
                cg__param_set(ctx, CG__P_GEMM_PACK_PTN, sets[z][2]);
                ck_assert_int_eq(cg__gemm_packed_b(ctx, CG_BF16, CG_F16, ta,
                                                   (size_t)m, 1.0f, am, &pb,
                                                   0.0f, cm), CG_EDTYPE);
            }
            ck_assert_int_eq(cg_buffer_read(bc, 0, out, nc * 4), CG_OK);
            ck_assert(memcmp(out, hc, nc * 4) == 0);
            cg__packed_b_free(&pb);
            ck_assert_ptr_null(pb.buf);
            {
                cg__mat am = { cg__buffer_mem(ba), (size_t)off, lda };
                cg__mat cm = { cg__buffer_mem(bc), (size_t)off, ldc };

                ck_assert_int_eq(cg__gemm_packed_b(ctx, CG_F32, CG_F32, ta,
                                                   (size_t)m, 1.0f, am, &pb,
                                                   0.0f, cm), CG_EINVAL);
            }
            cg_buffer_free(ba);
            cg_buffer_free(bb);
            cg_buffer_free(bc);
            free(ha);
            free(hb);
            free(hc);
            free(out);
        }
        if (tt_checker())
            break;
    }
    cg__gemm_set_packed_a(CG__PACKED_A_AUTO);
    cg__params_reset(ctx);
}
END_TEST

/* The packed backend at the products it is for: the char-LSTM 2x512's
 * weight gradient dG^T x (2048x512x3200 TN, beta 1 accumulating into
 * the gradient), the same shape NN and NT, its projection x W^T
 * (3200x2048x512 NT), and 1024^3 NN; every 61st row of C checked (the
 * host reference takes seconds per product). */
START_TEST(gemm_packed_is_right_at_the_layers_shapes)
{
    static const gcase cases[] = {
        { 2048, 512, 3200, 1, 0, 1.0f, 1.0f, 1, 0, 0, 0, 0 },
        { 2048, 512, 3200, 0, 0, 1.0f, 0.0f, 1, 0, 0, 0, 0 },
        { 2048, 512, 3200, 0, 1, 1.0f, 0.0f, 1, 0, 0, 0, 0 },
        { 3200, 2048, 512, 0, 1, 1.0f, 0.0f, 1, 0, 0, 0, 1 },
        { 1024, 1024, 1024, 0, 0, 1.0f, 0.0f, 1, 0, 0, 0, 0 },
    };
    cg_context *ctx = tt_ctx();
    char label[160];
    size_t c;

    if (tt_checker())   /* minutes under a memory checker */
        return;
    cg__gemm_force(ctx, CG__GEMM_PACKED);
    srand(8);
    rstep = 61;
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const gcase *g = &cases[c];

        snprintf(label, sizeof label, "packed %dx%dx%d %c%c beta %g%s",
                 g->m, g->n, g->k, g->ta ? 'T' : 'N', g->tb ? 'T' : 'N',
                 (double)g->beta, g->bias ? " bias" : "");
        check_case(ctx, g, label);
    }
    rstep = 1;
    cg__gemm_force(ctx, CG__GEMM_AUTO);
}
END_TEST

/* A clgrad context that ran CLBlast is released by cg_context_free:
 * contexts on one device share one OpenCL context, so CLBlast's program
 * cache (whose programs hold their OpenCL context) builds once for all of
 * them, and making and freeing contexts while another lives adds nothing
 * to it; the cache is cleared when the last context that used CLBlast
 * goes.  (On NVIDIA's OpenCL, contexts kept alive by that cache made
 * clCreateContext fail in a test that made a few hundred.) */
static cg_context *
clblast_product(cg_context *ctx)
{
    int64_t s[2] = { 33, 17 };
    cg_tensor *a, *c;

    if (!ctx)
        ctx = cg_context_new(NULL);
    ck_assert_msg(ctx != NULL, "%s", TT_ERR);
    cg__gemm_force(ctx, CG__GEMM_CLBLAST);
    a = cg_ones(ctx, 2, s);
    c = cg_matmul_t(a, a, 0, 1);
    ck_assert_msg(a && c, "%s", TT_ERR);
    ck_assert_int_eq(cg_context_finish(ctx), CG_OK);
    cg_tensor_free(a);
    cg_tensor_free(c);
    return ctx;
}

static cl_uint
refs_of(cl_context cl)
{
    cl_uint refs = 0;

    ck_assert_int_eq(clGetContextInfo(cl, CL_CONTEXT_REFERENCE_COUNT,
                                      sizeof refs, &refs, NULL), CL_SUCCESS);
    return refs;
}

/* The reference count of cl once it is at most want, or the count at
 * which it stayed.  PoCL drops a finished command's hold on its queue and
 * buffers (each of which holds cl) on its worker thread, just after
 * clFinish returns, so a count read at once may still include them: wait
 * for those to go, for as long as a leaked reference takes to show
 * (two minutes of 1 ms naps; a leak makes a failing test slow, never a
 * passing one flaky). */
static cl_uint
settled_refs(cl_context cl, cl_uint want)
{
    struct timespec nap = { 0, 1000000 };
    cl_uint refs;
    int i;

    for (i = 0; (refs = refs_of(cl)) > want && i < 120000; i++)
        nanosleep(&nap, NULL);
    return refs;
}

START_TEST(gemm_clblast_context_is_released)
{
    int n0 = cg__gemm_clblast_users(), round;
    cg_context *keep = cg_context_new(NULL), *t;
    cl_context cl;
    cl_uint r1 = 0;

    ck_assert_msg(keep != NULL, "%s", TT_ERR);
    cl = keep->context;
    ck_assert_int_eq(clRetainContext(cl), CL_SUCCESS);
    clblast_product(keep);
    ck_assert_int_eq(cg__gemm_clblast_users(), n0 + 1);
    /* The count after the first round may include references PoCL has
     * yet to drop, so it bounds the later rounds' (settled) counts: one
     * reference leaked per round exceeds it within two rounds. */
    for (round = 0; round < 4; round++) {
        t = clblast_product(NULL);
        ck_assert_ptr_eq(t->context, cl);
        ck_assert_int_eq(cg__gemm_clblast_users(), n0 + 2);
        cg_context_free(t);
        ck_assert_int_eq(cg__gemm_clblast_users(), n0 + 1);
        if (round == 0)
            r1 = refs_of(cl);
        ck_assert_uint_le(settled_refs(cl, r1), r1);
    }
    cg_context_free(keep);
    ck_assert_int_eq(cg__gemm_clblast_users(), n0);
    /* Run first, before the program's shared context exists: then no
     * other context holds cl, and with CLBlast's cache cleared only our
     * reference is left. */
    if (n0 == 0)
        ck_assert_uint_eq(settled_refs(cl, 1), 1);
    clReleaseContext(cl);
}
END_TEST

/* With the built-in choice, the small products of a first training run
 * (the char-LSTM's projections and gradients, here at a quarter of their
 * rows) run clgrad's kernels, so that such a run never builds CLBlast's
 * programs: a profiling context names every launch.  (A device's tuning
 * database may choose CLBlast for them: on an NVIDIA H200 it does.) */
START_TEST(gemm_auto_runs_clgrad_on_small_products)
{
    static const int shapes[][5] = {
        { 400, 512, 64, 0, 1 }, { 400, 62, 128, 0, 1 },
        { 400, 128, 62, 0, 0 }, { 62, 128, 400, 1, 0 },
        { 3, 5, 7, 1, 1 },
    };
    cg_context_options o = { NULL, 1, 1 };
    cg_context *ctx;
    cg_profile_entry e[16];
    size_t s;
    int i, n = 0, ours = 0;

    unsetenv("CLGRAD_GEMM");
    ctx = cg_context_new_with(&o);
    ck_assert_msg(ctx != NULL, "%s", TT_ERR);
    for (s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int *x = shapes[s];
        int64_t sa[2] = { x[3] ? x[2] : x[0], x[3] ? x[0] : x[2] };
        int64_t sb[2] = { x[4] ? x[1] : x[2], x[4] ? x[2] : x[1] };
        cg_tensor *a = cg_ones(ctx, 2, sa), *b = cg_ones(ctx, 2, sb), *c;

        c = cg_matmul_t(a, b, x[3], x[4]);
        ck_assert_msg(c != NULL, "%s", TT_ERR);
        cg_tensor_free(a);
        cg_tensor_free(b);
        cg_tensor_free(c);
    }
    ck_assert_int_eq(cg_context_profile(ctx, e, 16, &n), CG_OK);
    for (i = 0; i < n && i < 16; i++) {
        ck_assert_msg(strncmp(e[i].name, "clblast", 7) != 0,
                      "%s ran on a small product", e[i].name);
        if (strcmp(e[i].name, "gemm") == 0 ||
            strcmp(e[i].name, "gemm_nt") == 0)
            ours += (int)e[i].launches;
    }
    ck_assert_int_eq(ours, 5);
    cg_context_free(ctx);
}
END_TEST

/* The shape classes: names, and which class the layers' products fall
 * in. */
START_TEST(gemm_classes_are_named_and_found)
{
    static const struct { int ta, tb, m, n, k; const char *name; } c[] = {
        { 0, 1, 32, 2048, 512, "NT.skinny" },   /* a recurrent step */
        { 0, 0, 32, 512, 2048, "NN.skinny" },   /* its input gradient */
        { 0, 1, 128, 10, 512, "NT.skinny" },    /* an MLP head */
        { 1, 0, 97, 97, 64, "TN.small" },
        { 0, 1, 128, 512, 784, "NT.large" },    /* the MLP's first layer */
        { 1, 0, 2048, 512, 3200, "TN.longk" },  /* an LSTM weight gradient */
        { 0, 0, 3200, 512, 2048, "NN.longk" },
        { 1, 1, 512, 512, 512, "TT.large" },
    };
    char buf[32];
    size_t i;

    for (i = 0; i < sizeof c / sizeof c[0]; i++) {
        int cls = cg__gemm_class(c[i].ta, c[i].tb, (size_t)c[i].m,
                                 (size_t)c[i].n, (size_t)c[i].k);

        ck_assert_str_eq(cg__gemm_class_name(cls, buf, sizeof buf),
                         c[i].name);
        ck_assert_int_eq(cg__gemm_class_parse(c[i].name), cls);
    }
    for (i = 0; i < CG__GEMM_NCLASSES; i++)
        ck_assert_int_eq(cg__gemm_class_parse(
            cg__gemm_class_name((int)i, buf, sizeof buf)), (int)i);
    ck_assert_int_eq(cg__gemm_class_parse("NN.huge"), -1);
    ck_assert_int_eq(cg__gemm_class_parse("any"), -1);
}
END_TEST

/* A "gemm" entry for a class: its tunables and backend hold for that
 * class's products only, results stay right, and clearing the entries
 * restores the defaults; the profile shows the backend an entry names. */
START_TEST(gemm_class_entries_are_applied)
{
    cg_context_options o = { NULL, 1, 1 };
    cg_context *ctx = cg_context_new_with(&o);
    int nn_small = cg__gemm_class_parse("NN.small");
    int tn_small = cg__gemm_class_parse("TN.small");
    int nt_skinny = cg__gemm_class_parse("NT.skinny");
    cg_tuning_entry e;
    cg_profile_entry pe[16];
    long p[7], q[7];
    int backend, i, n = 0, blast = 0;

    ck_assert_msg(ctx != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg__gemm_class_params(ctx, nn_small, q, &backend),
                     CG_OK);
    ck_assert_int_eq(backend, -1);
    memset(&e, 0, sizeof e);
    strcpy(e.kernel, "gemm");
    strcpy(e.shape, "NN.small");
    ck_assert_int_eq(cg_kernel_source_hash("gemm", e.source_hash), CG_OK);
    strcpy(e.names[0], "TM");
    e.values[0] = 3;
    strcpy(e.names[1], "TN");
    e.values[1] = 1;
    strcpy(e.names[2], "WG");
    e.values[2] = 4;
    e.nparams = 3;
    ck_assert_msg(cg_context_set_tuning(ctx, &e) == CG_OK, "%s", TT_ERR);
    strcpy(e.shape, "NT.skinny");
    strcpy(e.names[0], "DTM");
    e.values[0] = 3;
    strcpy(e.names[1], "DTN");
    e.values[1] = 1;
    strcpy(e.names[2], "DVW");
    e.values[2] = 4;
    ck_assert_msg(cg_context_set_tuning(ctx, &e) == CG_OK, "%s", TT_ERR);
    strcpy(e.shape, "TN.small");
    strcpy(e.names[0], "clblast");
    e.values[0] = 1;
    e.nparams = 1;
    ck_assert_msg(cg_context_set_tuning(ctx, &e) == CG_OK, "%s", TT_ERR);
    ck_assert_int_eq(cg__gemm_class_params(ctx, nn_small, p, &backend),
                     CG_OK);
    ck_assert_int_eq(p[1], 3);
    ck_assert_int_eq(p[2], 1);
    ck_assert_int_eq(p[6], 4);
    ck_assert_int_eq(p[0], q[0]);
    ck_assert_int_eq(backend, -1);
    ck_assert_int_eq(cg__gemm_class_params(ctx, nt_skinny, p, &backend),
                     CG_OK);
    ck_assert_int_eq(p[3], 4);
    ck_assert_int_eq(p[4], 3);
    ck_assert_int_eq(p[5], 1);
    ck_assert_int_eq(cg__gemm_class_params(ctx, tn_small, p, &backend),
                     CG_OK);
    ck_assert_int_eq(backend, CG__GEMM_CLBLAST);
    for (i = 0; i < 7; i++)
        ck_assert_int_eq(p[i], q[i]);
    /* results with the entries: NN.small, NT.skinny (with an edge) */
    {
        gcase g1 = { 100, 130, 17, 0, 0, 1.0f, 0.0f, 1, 0, 0, 0, 0 };
        gcase g2 = { 7, 130, 67, 0, 1, 0.5f, 1.0f, 2, 2, 1, 3, 0 };
        gcase g3 = { 100, 97, 9, 1, 0, 1.0f, 0.0f, 1, 0, 0, 0, 0 };

        srand(3);
        check_case(ctx, &g1, "NN.small entry");
        check_case(ctx, &g2, "NT.skinny entry");
        if (!tt_checker())      /* CLBlast: natively only */
            check_case(ctx, &g3, "TN.small entry (CLBlast)");
    }
    if (!tt_checker()) {
        ck_assert_int_eq(cg_context_profile(ctx, pe, 16, &n), CG_OK);
        for (i = 0; i < n && i < 16; i++)
            if (strncmp(pe[i].name, "clblast", 7) == 0)
                blast += (int)pe[i].launches;
        ck_assert_int_eq(blast, 1);
    }
    ck_assert_int_eq(cg_context_clear_tuning(ctx), CG_OK);
    ck_assert_int_eq(cg__gemm_class_params(ctx, nn_small, p, &backend),
                     CG_OK);
    for (i = 0; i < 7; i++)
        ck_assert_int_eq(p[i], q[i]);
    ck_assert_int_eq(backend, -1);
    cg_context_free(ctx);
}
END_TEST

/* An NT class entry's "pack": 1 runs the class's products as NN on a
 * packed B^T (gemm_tpose, then gemm) when one B serves the batch and
 * gemm's 16-column tiles fit C (64 columns or more, at most an eighth to
 * spare), 0 in place (gemm_nt), whatever pack_nt's rule says; both are
 * right at odd sizes of every NT class, with alpha, beta, offsets,
 * padding, a bias and a broadcast B; a batch of distinct B's stays in
 * place. */
START_TEST(gemm_nt_pack_entries_are_right_both_ways)
{
    static const char *const nt[4] = { "NT.skinny", "NT.small", "NT.large",
                                       "NT.longk" };
    static const struct { gcase g; int packs; } cases[] = {
        { { 7, 130, 67, 0, 1, 1.0f, 0.0f, 3, 2, 1, 2, 0 }, 1 },   /* skinny */
        { { 5, 100, 1, 0, 1, 1.0f, 0.0f, 1, 0, 0, 1, 0 }, 1 },
        { { 1, 37, 9, 0, 1, 1.0f, 0.0f, 1, 0, 0, 0, 1 }, 0 },     /* narrow */
        { { 101, 99, 13, 0, 1, 0.5f, 1.0f, 1, 0, 2, 3, 1 }, 0 },  /* small, */
        { { 301, 101, 5, 0, 1, 1.0f, 0.0f, 1, 0, 0, 0, 1 }, 1 },  /* 13 and */
        { { 257, 131, 515, 0, 1, 1.0f, 0.0f, 1, 0, 1, 1, 0 }, 1 }, /* 11 to */
        { { 97, 169, 1025, 0, 1, 1.0f, 1.0f, 1, 0, 0, 2, 0 }, 1 }, /* spare */
    };
    static const gcase apart = { 33, 65, 17, 0, 1, 1.0f, 0.0f, 2, 0, 0, 1,
                                 0 };
    cg_context_options o = { NULL, 1, 1 };
    cg_context *ctx = cg_context_new_with(&o);
    cg_tuning_entry e;
    char label[128];
    int pack, c, i, n = (int)(sizeof cases / sizeof cases[0]), packs;

    ck_assert_msg(ctx != NULL, "%s", TT_ERR);
    cg__gemm_force(ctx, CG__GEMM_CLGRAD);
    if (tt_checker())       /* the large classes' host references */
        n -= 2;
    srand(5);
    for (pack = 0; pack < 2; pack++) {
        for (c = 0; c < 4; c++) {
            memset(&e, 0, sizeof e);
            strcpy(e.kernel, "gemm");
            strcpy(e.shape, nt[c]);
            ck_assert_int_eq(cg_kernel_source_hash("gemm", e.source_hash),
                             CG_OK);
            strcpy(e.names[0], "pack");
            e.values[0] = pack;
            strcpy(e.names[1], "TM");       /* the packed path's tile */
            e.values[1] = 3;
            strcpy(e.names[2], "DTN");      /* the in-place path's */
            e.values[2] = 3;
            strcpy(e.names[3], "VW");       /* 16 columns: TN * VW */
            e.values[3] = 8;
            strcpy(e.names[4], "TN");
            e.values[4] = 2;
            e.nparams = 5;
            ck_assert_msg(cg_context_set_tuning(ctx, &e) == CG_OK, "%s",
                          TT_ERR);
        }
        ck_assert_int_eq(cg_context_profile_reset(ctx), CG_OK);
        for (i = 0, packs = 0; i < n; i++) {
            snprintf(label, sizeof label, "pack %d: %dx%dx%d batch %d",
                     pack, cases[i].g.m, cases[i].g.n, cases[i].g.k,
                     cases[i].g.batch);
            check_case(ctx, &cases[i].g, label);
            packs += pack && cases[i].packs;
        }
        snprintf(label, sizeof label, "pack %d: a batch of distinct B's",
                 pack);
        check_case(ctx, &apart, label);
        ck_assert_int_eq(tt_launches(ctx, "gemm_tpose"), packs);
        ck_assert_int_eq(tt_launches(ctx, "gemm"), packs);
        ck_assert_int_eq(tt_launches(ctx, "gemm_nt"), n + 1 - packs);
    }
    cg_context_free(ctx);
}
END_TEST

/* Bad class entries are refused with a message, and nothing changes. */
/* With the automatic choice, packed_rule runs a large product on packed
 * operands (gemm_pack.cl: two packs and gemm_packed) and a small one in
 * place; a class entry's "packed" 0 or 1 overrides the rule for its
 * class, and clears with the entries. */
START_TEST(gemm_packed_entries_and_rule_choose_the_kernels)
{
    static const gcase large = { 300, 280, 220, 0, 0, 1.0f, 0.0f, 1, 0, 0,
                                 0, 1 };           /* NN.large */
    static const gcase small = { 40, 50, 30, 1, 0, 1.0f, 1.0f, 1, 0, 0, 0,
                                 0 };              /* TN.skinny */
    cg_context_options o = { NULL, 1, 1 };
    cg_context *ctx;
    cg_tuning_entry e;
    int i;

    unsetenv("CLGRAD_GEMM");
    ctx = cg_context_new_with(&o);
    ck_assert_msg(ctx != NULL, "%s", TT_ERR);
    srand(9);
    for (i = 0; i < 3; i++) {
        memset(&e, 0, sizeof e);
        strcpy(e.kernel, "gemm");
        ck_assert_int_eq(cg_kernel_source_hash("gemm", e.source_hash),
                         CG_OK);
        strcpy(e.names[0], "packed");
        e.nparams = 1;
        if (i == 1) {       /* each class the other way */
            strcpy(e.shape, "NN.large");
            e.values[0] = 0;
            ck_assert_msg(cg_context_set_tuning(ctx, &e) == CG_OK, "%s",
                          TT_ERR);
            strcpy(e.shape, "TN.skinny");
            e.values[0] = 1;
            ck_assert_msg(cg_context_set_tuning(ctx, &e) == CG_OK, "%s",
                          TT_ERR);
        } else if (i == 2) {
            ck_assert_int_eq(cg_context_clear_tuning(ctx), CG_OK);
        }
        ck_assert_int_eq(cg_context_profile_reset(ctx), CG_OK);
        check_case(ctx, &large, "packed rule: large");
        check_case(ctx, &small, "packed rule: small");
        ck_assert_int_eq(tt_launches(ctx, "gemm_packed"), 1);
        ck_assert_int_eq(tt_launches(ctx, "gemm_pack_a"), 1);
        ck_assert_int_eq(tt_launches(ctx, "gemm_pack_b"), 1);
        ck_assert_int_eq(tt_launches(ctx, "gemm"), 1);
    }
    cg_context_free(ctx);
}
END_TEST

/* An entry built from names and values (n of them). */
static void
entry(cg_tuning_entry *e, const char *shape, int n, const char *const *names,
      const long *values)
{
    int i;

    memset(e, 0, sizeof *e);
    strcpy(e->kernel, "gemm");
    strcpy(e->shape, shape);
    ck_assert_int_eq(cg_kernel_source_hash("gemm", e->source_hash), CG_OK);
    for (i = 0; i < n; i++) {
        strcpy(e->names[i], names[i]);
        e->values[i] = values[i];
    }
    e->nparams = n;
}

/* cg__gemm_entry_trim, what clgrad-tune's gemm stage does to a class's
 * best before it records it, drops each backend key ("clblast", "packed",
 * "pack") whose value is the built-in rule's at the measured product and
 * keeps the rest in order; trimmed, an NT.large entry measured in place
 * on a 128-row product leaves a larger product of its class to the
 * packed backend, which the untrimmed one keeps off it. */
START_TEST(gemm_entry_trim_leaves_other_sizes_to_the_rules)
{
    /* The entries' keys and values: 0 a tile of gemm_nt with every
     * backend key, 1 the packed backend, 2 CLBlast, 3 "pack" alone (1,
     * what pack_nt would say for case 7's product). */
    static const struct {
        int n;
        const char *names[6];
        long values[6];
    } sets[4] = {
        { 6, { "DVW", "DTM", "DTN", "clblast", "packed", "pack" },
          { 8, 4, 3, 0, 0, 0 } },
        { 2, { "clblast", "packed" }, { 0, 1 } },
        { 1, { "clblast" }, { 1 } },
        { 1, { "pack" }, { 1 } },
    };
    /* An entry of set `set` measured on ta tb m x n x k, and the keys
     * trimming keeps, in order (their values unchanged). */
    static const struct {
        const char *shape;
        int set, ta, tb, m, n, k;
        const char *kept[6];
    } cases[] = {
        /* the MLP's 128x512x784: in place and not packed agree with the
         * rules there, "pack" 0 does not (pack_nt: 8 M >= K) */
        { "NT.large", 0, 0, 1, 128, 512, 784,
          { "DVW", "DTM", "DTN", "pack" } },
        /* measured on the 3200-row projection, "packed" 0 contradicts */
        { "NT.large", 0, 0, 1, 3200, 2048, 512,
          { "DVW", "DTM", "DTN", "packed", "pack" } },
        /* the packed backend where packed_rule picks it: nothing left */
        { "NN.longk", 1, 0, 0, 1024, 512, 2048, { NULL } },
        /* clgrad's kernels where backend_for picks CLBlast (NN, N
         * 2048): "clblast" 0 stays, "packed" 1 is packed_rule's */
        { "NN.longk", 1, 0, 0, 2048, 2048, 2048, { "clblast" } },
        /* CLBlast: dropped where the rule picks it, kept where not */
        { "TT.large", 2, 1, 1, 256, 256, 512, { NULL } },
        { "NT.skinny", 2, 0, 1, 32, 2048, 512, { "clblast" } },
        /* "pack" outside NT is not a rule's: left alone */
        { "NN.large", 3, 0, 0, 128, 784, 512, { "pack" } },
    };
    static const gcase big = { 300, 280, 220, 0, 1, 1.0f, 0.0f, 1, 0, 0,
                               0, 0 };          /* NT.large, rule: packed */
    static const gcase rows = { 100, 300, 600, 0, 1, 1.0f, 0.0f, 1, 0, 0,
                                0, 0 };         /* NT.large, gemm.cl */
    cg_context_options o = { NULL, 1, 1 };
    cg_context *ctx;
    cg_tuning_entry e, kept;
    int trim, c, i, j;

    for (c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
        int set = cases[c].set;

        entry(&e, cases[c].shape, sets[set].n, sets[set].names,
              sets[set].values);
        cg__gemm_entry_trim(&e, cases[c].ta, cases[c].tb,
                            (size_t)cases[c].m, (size_t)cases[c].n,
                            (size_t)cases[c].k);
        for (i = 0; i < 6 && cases[c].kept[i]; i++) {
            ck_assert_msg(i < e.nparams, "case %d: %s dropped", c,
                          cases[c].kept[i]);
            ck_assert_str_eq(e.names[i], cases[c].kept[i]);
            for (j = 0; strcmp(sets[set].names[j], e.names[i]) != 0; j++)
                continue;
            ck_assert_int_eq(e.values[i], sets[set].values[j]);
        }
        ck_assert_msg(e.nparams == i, "case %d: %d keys kept, want %d", c,
                      e.nparams, i);
        if (c == 0)
            kept = e;
    }

    /* In force: the trimmed entry runs the larger product packed and the
     * 100-row one in place, the untrimmed one both in place. */
    unsetenv("CLGRAD_GEMM");
    ctx = cg_context_new_with(&o);
    ck_assert_msg(ctx != NULL, "%s", TT_ERR);
    if (tt_checker())       /* the host references, under Oclgrind */
        rstep = 7;
    srand(13);
    for (trim = 1; trim >= 0; trim--) {
        if (trim)
            e = kept;
        else
            entry(&e, "NT.large", sets[0].n, sets[0].names,
                  sets[0].values);
        ck_assert_int_eq(cg_context_clear_tuning(ctx), CG_OK);
        ck_assert_msg(cg_context_set_tuning(ctx, &e) == CG_OK, "%s",
                      TT_ERR);
        ck_assert_int_eq(cg_context_profile_reset(ctx), CG_OK);
        check_case(ctx, &big, trim ? "trimmed: 300x280x220 NT"
                                   : "untrimmed: 300x280x220 NT");
        check_case(ctx, &rows, trim ? "trimmed: 100x300x600 NT"
                                    : "untrimmed: 100x300x600 NT");
        ck_assert_int_eq(tt_launches(ctx, "gemm_packed"), trim);
        ck_assert_int_eq(tt_launches(ctx, "gemm_nt"), 2 - trim);
    }
    rstep = 1;
    cg_context_free(ctx);
}
END_TEST

START_TEST(gemm_bad_class_entries_are_refused)
{
    static const struct {
        const char *shape, *name;
        long value;
        const char *msg;
    } bad[] = {
        { "NN.huge", "TM", 4, "product class" },
        { "NN.skinny", "clblast", 2, "clblast = 2" },
        { "NT.large", "pack", 2, "pack = 2" },
        { "NN.large", "pack", 1, "pack is for the NT classes only" },
        { "TN.longk", "packed", 2, "packed = 2" },
        { "NN.skinny", "TM", 9, "TM = 9 (1 to 8)" },
        { "NT.large", "DTN", 5, "DTN = 5 (1 to 4)" },
        { "NT.large", "DVW", 3, "DVW = 3" },
        { "TN.longk", "XX", 1, "unknown parameter XX" },
        { "any", "clblast", 1, "unknown parameter clblast" },
    };
    cg_context_options o = { NULL, 0, 1 };
    cg_context *ctx = cg_context_new_with(&o);
    cg_tuning_entry e;
    size_t i;
    int count;

    ck_assert_msg(ctx != NULL, "%s", TT_ERR);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&e, 0, sizeof e);
        strcpy(e.kernel, "gemm");
        strcpy(e.shape, bad[i].shape);
        strcpy(e.names[0], bad[i].name);
        e.values[0] = bad[i].value;
        e.nparams = 1;
        ck_assert_int_eq(cg_kernel_source_hash("gemm", e.source_hash), CG_OK);
        ck_assert_int_eq(cg_context_set_tuning(ctx, &e), CG_EINVAL);
        ck_assert_msg(strstr(TT_ERR, bad[i].msg) != NULL, "%s: %s",
                      bad[i].msg, TT_ERR);
        ck_assert_int_eq(cg_context_tuning_count(ctx, &count), CG_OK);
        ck_assert_int_eq(count, 0);
    }
    cg_context_free(ctx);
}
END_TEST

/* CLGRAD_GEMM names a backend or fails the first product with a message
 * naming the variable and the values it takes. */
START_TEST(gemm_backend_variable_is_validated)
{
    cg_context *ctx;
    int64_t s[2] = { 3, 3 };
    cg_tensor *a, *c;

    setenv("CLGRAD_GEMM", "openblas", 1);
    ctx = cg_context_new(NULL);
    ck_assert_ptr_nonnull(ctx);
    a = cg_ones(ctx, 2, s);
    ck_assert_ptr_nonnull(a);
    c = cg_matmul(a, a);
    ck_assert_ptr_null(c);
    ck_assert_ptr_nonnull(strstr(TT_ERR, "CLGRAD_GEMM=openblas"));
    ck_assert_ptr_nonnull(strstr(TT_ERR, "clblast, clgrad or packed"));
    cg_tensor_free(a);
    cg_context_free(ctx);
    setenv("CLGRAD_GEMM", "clgrad", 1);
    ctx = cg_context_new(NULL);
    a = cg_ones(ctx, 2, s);
    c = cg_matmul(a, a);
    ck_assert_msg(c != NULL, "%s", TT_ERR);
    ck_assert_int_eq(ctx->gemm_backend, CG__GEMM_CLGRAD);
    cg_tensor_free(c);
    cg_tensor_free(a);
    cg_context_free(ctx);
    unsetenv("CLGRAD_GEMM");
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("gemm");
    TCase *tc = tcase_create("gemm");

    tt_require_device();
    unsetenv("CLGRAD_GEMM");
    tcase_set_timeout(tc, 1800);
    tcase_add_test(tc, gemm_clblast_context_is_released);
    tcase_add_loop_test(tc, gemm_matches_reference_at_odd_sizes,
                        CG__GEMM_CLBLAST, CG__GEMM_PACKED + 1);
    tcase_add_loop_test(tc, gemm_alpha_beta_offsets_and_batches,
                        CG__GEMM_CLBLAST, CG__GEMM_PACKED + 1);
    tcase_add_loop_test(tc, gemm_bias_epilogue_matches_reference,
                        CG__GEMM_CLBLAST, CG__GEMM_PACKED + 1);
    tcase_add_test(tc, gemm_kernels_are_right_with_other_tunables);
    tcase_add_test(tc, gemm_packed_is_right_with_other_tunables);
    tcase_add_test(tc, gemm_packed_is_right_at_the_layers_shapes);
    tcase_add_test(tc, gemm_packed_b_serves_many_products);
    tcase_add_test(tc, gemm_auto_runs_clgrad_on_small_products);
    tcase_add_test(tc, gemm_backend_variable_is_validated);
    tcase_add_test(tc, gemm_classes_are_named_and_found);
    tcase_add_test(tc, gemm_class_entries_are_applied);
    tcase_add_test(tc, gemm_nt_pack_entries_are_right_both_ways);
    tcase_add_test(tc, gemm_bad_class_entries_are_refused);
    tcase_add_test(tc, gemm_packed_entries_and_rule_choose_the_kernels);
    tcase_add_test(tc, gemm_entry_trim_leaves_other_sizes_to_the_rules);
    suite_add_tcase(s, tc);
    return tt_run(s);
}
