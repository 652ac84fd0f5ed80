/* SPDX-License-Identifier: MIT */
/*
 * tests/test_half.c - 16-bit storage (CG_F16, CG_BF16): the casts of
 * cg_to_dtype bit for bit, over all 65,536 patterns of each format against
 * a C reference (whose rules tests/fixtures/gen_half.py checks against
 * PyTorch) and over PyTorch's float32 -> 16-bit results for tricky values
 * (tests/fixtures/half.txt); raw host transfers; every view and its copy
 * to contiguous memory (the copy16v kernel's rows, long and short); the
 * cast's gradient and 16-bit gradients flowing through views; checkpoints;
 * and that every op outside the elementwise ops and dropout (which
 * test_half_ops covers) refuses a 16-bit tensor with CG_EDTYPE, changing
 * nothing.
 *
 * No finite-difference gradcheck for the cast: its derivative is 1 almost
 * everywhere and the function a staircase, so central differences see
 * the rounding steps, not the slope.  The gradient is instead checked
 * exactly: the output's gradient cast back to the input's dtype.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "ops/internal.h"
#include "testutil.h"

#define NPAT 65536

/* float16 bits -> float32 bits, PyTorch's c10::Half: exact, a NaN made
 * quiet with its sign and payload kept. */
static uint32_t
ref_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu;
    uint32_t m = h & 0x3FFu, bits;
    float v;

    if (e == 0x1F)
        return sign | 0x7F800000u | (m << 13) | (m ? 0x400000u : 0);
    v = e == 0 ? ldexpf((float)m, -24) : ldexpf((float)(m + 1024), (int)e - 25);
    memcpy(&bits, &v, 4);
    return sign | bits;
}

static int
f16_is_nan(uint16_t h)
{
    return (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu);
}

/* What float16 -> float32 -> float16 gives: the pattern itself, or for a
 * NaN the quiet NaN 0x7E00 with its sign (c10::Half's float -> half). */
static uint16_t
ref_f16_round_trip(uint16_t h)
{
    if (f16_is_nan(h))
        return (uint16_t)((h & 0x8000u) | 0x7E00u);
    return h;
}

/* The same for bfloat16: a NaN becomes 0x7FC0 (c10::BFloat16). */
static uint16_t
ref_bf16_round_trip(uint16_t b)
{
    if ((b & 0x7F80u) == 0x7F80u && (b & 0x7Fu))
        return 0x7FC0;
    return b;
}

static cg_tensor *
from_bits(cg_dtype dt, int ndim, const int64_t *shape, const void *bits)
{
    cg_tensor *t = cg_tensor_from_host(tt_ctx(), dt, ndim, shape, bits);

    ck_assert_msg(t != NULL, "%s", TT_ERR);
    return t;
}

static void
read_bits(const cg_tensor *t, void *dst, size_t bytes)
{
    ck_assert_msg(cg_tensor_to_host(t, dst, bytes) == CG_OK, "%s", TT_ERR);
}

static cg_tensor *
cast(cg_tensor *x, cg_dtype dt)
{
    cg_tensor *y = cg_to_dtype(x, dt);

    ck_assert_msg(y != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_dtype(y), dt);
    return y;
}

/* The same through the element kernels (a transposed, strided input;
 * the contiguous casts above take the 8-lane kernels): every pattern as
 * a [256, 256] tensor read transposed, to float32 and back. */
static void
exhaustive_strided(cg_dtype dt)
{
    static uint16_t pat[NPAT], trip[NPAT];
    static uint32_t f[NPAT];
    int64_t s[2] = { 256, 256 };
    cg_tensor *h, *t, *x, *xt, *h2;
    int i, j;

    for (i = 0; i < NPAT; i++)
        pat[i] = (uint16_t)i;
    h = from_bits(dt, 2, s, pat);
    t = cg_transpose(h, 0, 1);
    ck_assert_ptr_nonnull(t);
    x = cast(t, CG_F32);            /* x[i][j] = pattern j * 256 + i */
    read_bits(x, f, sizeof f);
    xt = cg_transpose(x, 0, 1);
    ck_assert_ptr_nonnull(xt);
    h2 = cast(xt, dt);              /* back in pattern order */
    read_bits(h2, trip, sizeof trip);
    for (i = 0; i < 256; i++)
        for (j = 0; j < 256; j++) {
            uint16_t p = (uint16_t)(j * 256 + i);
            uint32_t want = dt == CG_F16 ? ref_f16_to_f32(p)
                                         : (uint32_t)p << 16;

            ck_assert_msg(f[i * 256 + j] == want, "strided 0x%04x -> "
                          "0x%08x, want 0x%08x", p, f[i * 256 + j], want);
        }
    for (i = 0; i < NPAT; i++) {
        uint16_t rt = dt == CG_F16 ? ref_f16_round_trip((uint16_t)i)
                                   : ref_bf16_round_trip((uint16_t)i);

        ck_assert_msg(trip[i] == rt, "strided 0x%04x -> 0x%04x, want "
                      "0x%04x", i, trip[i], rt);
    }
    cg_tensor_free(h); cg_tensor_free(t); cg_tensor_free(x);
    cg_tensor_free(xt); cg_tensor_free(h2);
}

/* Every 16-bit pattern of format dt: raw read-back, the float32 values,
 * and the round trip back to 16 bits. */
static void
exhaustive(cg_dtype dt)
{
    static uint16_t pat[NPAT], back[NPAT], trip[NPAT];
    static uint32_t f[NPAT];
    int64_t n = NPAT;
    cg_tensor *h, *x, *h2;
    int i;

    for (i = 0; i < NPAT; i++)
        pat[i] = (uint16_t)i;
    h = from_bits(dt, 1, &n, pat);
    read_bits(h, back, sizeof back);
    ck_assert(memcmp(back, pat, sizeof pat) == 0);
    x = cast(h, CG_F32);
    read_bits(x, f, sizeof f);
    h2 = cast(x, dt);
    read_bits(h2, trip, sizeof trip);
    for (i = 0; i < NPAT; i++) {
        uint32_t want = dt == CG_F16 ? ref_f16_to_f32((uint16_t)i)
                                     : (uint32_t)i << 16;
        uint16_t rt = dt == CG_F16 ? ref_f16_round_trip((uint16_t)i)
                                   : ref_bf16_round_trip((uint16_t)i);

        ck_assert_msg(f[i] == want, "0x%04x -> float32 0x%08x, want "
                      "0x%08x", i, f[i], want);
        ck_assert_msg(trip[i] == rt, "0x%04x -> 0x%08x -> 0x%04x, want "
                      "0x%04x", i, f[i], trip[i], rt);
    }
    cg_tensor_free(h);
    cg_tensor_free(x);
    cg_tensor_free(h2);
    exhaustive_strided(dt);
}

START_TEST(every_float16_pattern_converts_as_pytorch)
{
    exhaustive(CG_F16);
}
END_TEST

START_TEST(every_bfloat16_pattern_converts_as_pytorch)
{
    exhaustive(CG_BF16);
}
END_TEST

/* The element kernels' own float16 loads and stores (common.cl's CG_LD
 * and CG_ST, integer conversions rather than vload_half and
 * vstore_half_rte): every pattern, read through a transposed view so that
 * the strided element kernel runs, times multipliers whose products need
 * rounding to nearest even (ties among the subnormals at 0.5 and 0.25),
 * flush to zero (2^-10), overflow (3) or nothing (1, -1).  Each product of
 * two float16 values is exact in float32, so the host's rounding of it
 * (cg_tensor_from_host_f32, as cast_f32_f16) is the answer bit for bit;
 * any NaN may stand for a NaN.  Under a host memory checker every third
 * multiplier (1, 0.25, 3): each runs the same host path, and all eight
 * took a minute under memcheck. */
START_TEST(every_float16_pattern_through_the_element_kernels)
{
    static const float mult[] = { 1.0f, -1.0f, 0.5f, 0.25f, 0.75f,
                                  1.5f, 3.0f, 0x1p-10f };
    static uint16_t pat[NPAT], got[NPAT], want[NPAT];
    static float m[NPAT], prod[NPAT];
    int64_t s[2] = { 256, 256 };
    cg_tensor *h, *t, *b, *y, *r;
    size_t k;
    int i, j;

    for (i = 0; i < NPAT; i++)
        pat[i] = (uint16_t)i;
    h = from_bits(CG_F16, 2, s, pat);
    t = cg_transpose(h, 0, 1);      /* t[i][j] = pattern j * 256 + i */
    ck_assert_ptr_nonnull(t);
    for (k = 0; k < sizeof mult / sizeof mult[0];
         k += tt_host_checker() ? 3 : 1) {
        for (i = 0; i < NPAT; i++)
            m[i] = mult[k];
        b = cg_tensor_from_host_f32(tt_ctx(), CG_F16, 2, s, m);
        ck_assert_msg(b != NULL, "%s", TT_ERR);
        y = cg_mul(t, b);
        ck_assert_msg(y != NULL, "%s", TT_ERR);
        read_bits(y, got, sizeof got);
        for (i = 0; i < 256; i++)
            for (j = 0; j < 256; j++) {
                uint32_t f = ref_f16_to_f32((uint16_t)(j * 256 + i));
                float v;

                memcpy(&v, &f, 4);
                prod[i * 256 + j] = v * mult[k];
            }
        r = cg_tensor_from_host_f32(tt_ctx(), CG_F16, 2, s, prod);
        ck_assert_msg(r != NULL, "%s", TT_ERR);
        read_bits(r, want, sizeof want);
        for (i = 0; i < NPAT; i++)
            ck_assert_msg(got[i] == want[i] ||
                          (f16_is_nan(got[i]) && f16_is_nan(want[i])),
                          "0x%04x x %g -> 0x%04x, want 0x%04x",
                          (i % 256) * 256 + i / 256, (double)mult[k],
                          got[i], want[i]);
        cg_tensor_free(b); cg_tensor_free(y); cg_tensor_free(r);
    }
    cg_tensor_free(t);
    cg_tensor_free(h);
}
END_TEST

/* tests/fixtures/half.txt: float32 bits, torch's float16 and bfloat16. */
static int
load_fixture(uint32_t **x, uint16_t **h, uint16_t **b)
{
    const char *top = getenv("TEST_SRCDIR");
    char path[1024], line[128];
    unsigned a, c, d;
    FILE *fp;
    int n = 0, cap = 4096;

    snprintf(path, sizeof path, "%s/tests/fixtures/half.txt",
             top && *top ? top : ".");
    fp = fopen(path, "r");
    ck_assert_msg(fp != NULL, "cannot open %s", path);
    *x = malloc(cap * sizeof **x);
    *h = malloc(cap * sizeof **h);
    *b = malloc(cap * sizeof **b);
    ck_assert(*x && *h && *b);
    while (fgets(line, sizeof line, fp)) {
        if (line[0] == '#')
            continue;
        ck_assert_msg(sscanf(line, "%x %x %x", &a, &c, &d) == 3,
                      "%s: bad line %s", path, line);
        ck_assert_int_lt(n, cap);
        (*x)[n] = a;
        (*h)[n] = (uint16_t)c;
        (*b)[n] = (uint16_t)d;
        n++;
    }
    fclose(fp);
    ck_assert_int_gt(n, 2000);
    return n;
}

/* Through a strided view too: the fixture as the transpose of an [m, 2]
 * tensor holding it column-major, so the cast reads strided data. */
START_TEST(float32_values_round_as_pytorch_fixture)
{
    uint32_t *x, *xt;
    uint16_t *h, *b, *got;
    int n = load_fixture(&x, &h, &b), i, k, dts[2] = { CG_F16, CG_BF16 };
    int64_t len = n, s2[2];
    cg_tensor *tx, *t2, *tv, *y;

    got = malloc((size_t)n * 2 * sizeof *got);
    xt = malloc((size_t)n * 2 * sizeof *xt);
    ck_assert(got && xt);
    tx = from_bits(CG_F32, 1, &len, x);
    for (i = 0; i < n; i++) {
        xt[2 * i] = x[i];
        xt[2 * i + 1] = x[n - 1 - i];
    }
    s2[0] = n;
    s2[1] = 2;
    t2 = from_bits(CG_F32, 2, s2, xt);
    tv = cg_transpose(t2, 0, 1);            /* [2, n], strided */
    ck_assert_ptr_nonnull(tv);
    for (k = 0; k < 2; k++) {
        const uint16_t *want = dts[k] == CG_F16 ? h : b;

        y = cast(tx, dts[k]);
        read_bits(y, got, (size_t)n * 2);
        for (i = 0; i < n; i++)
            ck_assert_msg(got[i] == want[i], "%s of 0x%08x: 0x%04x, "
                          "PyTorch 0x%04x", dts[k] == CG_F16 ? "float16"
                          : "bfloat16", x[i], got[i], want[i]);
        cg_tensor_free(y);
        y = cast(tv, dts[k]);
        read_bits(y, got, (size_t)n * 4);
        for (i = 0; i < n; i++) {
            ck_assert_uint_eq(got[i], want[i]);
            ck_assert_uint_eq(got[n + i], want[n - 1 - i]);
        }
        cg_tensor_free(y);
    }
    cg_tensor_free(tx);
    cg_tensor_free(t2);
    cg_tensor_free(tv);
    free(x);
    free(h);
    free(b);
    free(xt);
    free(got);
}
END_TEST

/* cg__fill's host rounding (the seed of a 16-bit backward, zero
 * gradients) agrees with PyTorch too: each value filled into its own
 * element of a 16-bit tensor. */
START_TEST(fills_round_as_pytorch_fixture)
{
    uint32_t *x;
    uint16_t *h, *b, *got;
    int n = load_fixture(&x, &h, &b), i, k;
    int64_t len = n;

    got = malloc((size_t)n * sizeof *got);
    ck_assert_ptr_nonnull(got);
    for (k = 0; k < 2; k++) {
        cg_dtype dt = k ? CG_BF16 : CG_F16;
        const uint16_t *want = k ? b : h;
        cg_tensor *t = cg_tensor_new(tt_ctx(), dt, 1, &len);

        ck_assert_ptr_nonnull(t);
        for (i = 0; i < n; i++) {
            cg_tensor *e = cg_narrow(t, 0, i, 1);
            float v;

            memcpy(&v, &x[i], 4);
            ck_assert_ptr_nonnull(e);
            ck_assert_int_eq(cg__fill(e, v), CG_OK);
            cg_tensor_free(e);
        }
        read_bits(t, got, (size_t)n * 2);
        for (i = 0; i < n; i++)
            ck_assert_msg(got[i] == want[i], "fill %s with 0x%08x: 0x%04x, "
                          "PyTorch 0x%04x", k ? "bfloat16" : "float16", x[i],
                          got[i], want[i]);
        cg_tensor_free(t);
    }
    free(x);
    free(h);
    free(b);
    free(got);
}
END_TEST

/* An F16 [A, B, C] tensor holding element index i as its bits. */
#define A 3
#define B 5
#define C 21
static uint16_t base[A * B * C];

static cg_tensor *
indexed(cg_dtype dt)
{
    int64_t s[3] = { A, B, C };
    int i;

    for (i = 0; i < A * B * C; i++)
        base[i] = (uint16_t)(0x1000 + i);
    return from_bits(dt, 3, s, base);
}

/* Reads view v and checks element (i, j, k) of its 3-D index space
 * against base at offset f(i, j, k). */
static void
check_view(cg_tensor *v, const int64_t *shape, const int64_t *st, int64_t off)
{
    int64_t n = shape[0] * shape[1] * shape[2], i, j, k, q = 0;
    uint16_t *got = malloc((size_t)n * 2);
    cg_tensor *c;

    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(cg_tensor_numel(v), n);
    read_bits(v, got, (size_t)n * 2);
    for (i = 0; i < shape[0]; i++)
        for (j = 0; j < shape[1]; j++)
            for (k = 0; k < shape[2]; k++, q++)
                ck_assert_msg(got[q] == base[off + i * st[0] + j * st[1] +
                                             k * st[2]],
                              "element (%lld, %lld, %lld)", (long long)i,
                              (long long)j, (long long)k);
    /* cg_contiguous gives the same, and keeps the dtype. */
    c = cg_contiguous(v);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(cg_tensor_dtype(c), cg_tensor_dtype(v));
    ck_assert(cg_tensor_is_contiguous(c));
    {
        uint16_t *again = malloc((size_t)n * 2);

        read_bits(c, again, (size_t)n * 2);
        ck_assert(memcmp(again, got, (size_t)n * 2) == 0);
        free(again);
    }
    cg_tensor_free(c);
    free(got);
}

START_TEST(views_of_16_bit_tensors_read_the_right_elements)
{
    cg_dtype dt = _i ? CG_BF16 : CG_F16;
    cg_tensor *t = indexed(dt), *v, *w;
    int perm[3] = { 2, 0, 1 };
    int64_t sh[3], st[3], r2[2] = { A * B, C }, e4[4] = { 2, A, 3, C };
    uint16_t got[A * B * C];

    /* transpose (strided: the element copy) */
    v = cg_transpose(t, 0, 2);
    sh[0] = C; sh[1] = B; sh[2] = A;
    st[0] = 1; st[1] = C; st[2] = B * C;
    check_view(v, sh, st, 0);
    cg_tensor_free(v);
    /* permute */
    v = cg_permute(t, perm);
    sh[0] = C; sh[1] = A; sh[2] = B;
    st[0] = 1; st[1] = B * C; st[2] = C;
    check_view(v, sh, st, 0);
    cg_tensor_free(v);
    /* narrow of the last dimension at an odd offset: rows of contiguous
     * elements (the row copy), starting at odd 16-bit positions */
    v = cg_narrow(t, 2, 3, 17);
    sh[0] = A; sh[1] = B; sh[2] = 17;
    st[0] = B * C; st[1] = C; st[2] = 1;
    check_view(v, sh, st, 3);
    cg_tensor_free(v);
    /* narrow of the middle one: a contiguous-row view at an offset */
    v = cg_narrow(t, 1, 1, 3);
    sh[0] = A; sh[1] = 3; sh[2] = C;
    st[0] = B * C; st[1] = C; st[2] = 1;
    check_view(v, sh, st, C);
    /* unsqueeze + expand of that view: stride 0 */
    w = cg_unsqueeze(v, 0);
    ck_assert_ptr_nonnull(w);
    cg_tensor_free(v);
    v = cg_expand(w, 4, e4);
    ck_assert_ptr_nonnull(v);
    cg_tensor_free(w);
    w = cg_narrow(v, 0, 1, 1);
    cg_tensor_free(v);
    v = cg_squeeze(w, 0);
    cg_tensor_free(w);
    sh[0] = A; sh[1] = 3; sh[2] = C;
    check_view(v, sh, st, C);
    cg_tensor_free(v);
    /* reshape and flatten of contiguous data are views; of a transpose a
     * copy */
    v = cg_reshape(t, 2, r2);
    w = cg_flatten(t, 0, 1);
    ck_assert(v && w);
    ck_assert_int_eq(cg_tensor_dim(w, 0), A * B);
    read_bits(v, got, sizeof got);
    ck_assert(memcmp(got, base, sizeof got) == 0);
    read_bits(w, got, sizeof got);
    ck_assert(memcmp(got, base, sizeof got) == 0);
    cg_tensor_free(v);
    cg_tensor_free(w);
    w = cg_transpose(t, 0, 1);
    v = cg_flatten(w, 0, 1);
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(cg_tensor_dtype(v), dt);
    sh[0] = B; sh[1] = A; sh[2] = C;
    st[0] = C; st[1] = B * C; st[2] = 1;
    {
        cg_tensor *v3;
        int64_t s3[3] = { B, A, C };

        v3 = cg_reshape(v, 3, s3);
        check_view(v3, sh, st, 0);
        cg_tensor_free(v3);
    }
    cg_tensor_free(v);
    cg_tensor_free(w);
    cg_tensor_free(t);
}
END_TEST

/* concat and stack copy elements, so 16-bit tensors join like others;
 * split is narrows. */
START_TEST(concat_stack_and_split_join_16_bit_tensors)
{
    cg_tensor *t = indexed(CG_BF16), *parts[3], *c, *c2, *st, *tr;
    int64_t sizes[3] = { 4, 10, 7 }, s3[3] = { A, B, C };
    uint16_t got[2 * A * B * C];
    int i, k = 0;

    ck_assert_int_eq(cg_split(t, 2, 3, sizes, parts), CG_OK);
    c = cg_concat(parts, 3, 2);
    ck_assert_msg(c != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_dtype(c), CG_BF16);
    read_bits(c, got, A * B * C * 2);
    ck_assert(memcmp(got, base, A * B * C * 2) == 0);
    for (i = 0; i < 3; i++)
        cg_tensor_free(parts[i]);
    cg_tensor_free(c);
    tr = cg_transpose(t, 0, 1);
    parts[0] = t;
    c2 = cg_contiguous(tr);
    parts[1] = cg_reshape(c2, 3, s3);      /* [A, B, C] holding t^T's data */
    cg_tensor_free(c2);
    st = cg_stack(parts, 2, 0);
    ck_assert_msg(st != NULL, "%s", TT_ERR);
    read_bits(st, got, sizeof got);
    ck_assert(memcmp(got, base, A * B * C * 2) == 0);
    for (i = 0; i < B; i++)
        for (k = 0; k < A; k++)
            ck_assert(memcmp(got + A * B * C + (i * A + k) * C,
                             base + (k * B + i) * C, C * 2) == 0);
    cg_tensor_free(parts[1]);
    cg_tensor_free(tr);
    cg_tensor_free(st);
    cg_tensor_free(t);
}
END_TEST

START_TEST(host_transfers_count_16_bit_elements)
{
    int64_t s = 7;
    uint16_t in[7] = { 1, 2, 3, 0x7C00, 0xFC00, 0x7E01, 0x8000 }, out[8];
    cg_tensor *t = cg_tensor_new(tt_ctx(), CG_F16, 1, &s), *v;
    int64_t bad = -1;

    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(cg_tensor_write(t, in, 14), CG_OK);
    ck_assert_int_eq(cg_tensor_write(t, in, 28), CG_EINVAL);
    read_bits(t, out, 14);
    ck_assert(memcmp(in, out, 14) == 0);
    ck_assert_int_eq(cg_tensor_to_host(t, out, 16), CG_EINVAL);
    /* A narrowed view at an odd element reads from the right byte. */
    v = cg_narrow(t, 0, 3, 3);
    read_bits(v, out, 6);
    ck_assert(out[0] == 0x7C00 && out[1] == 0xFC00 && out[2] == 0x7E01);
    ck_assert_int_eq(cg_tensor_write(v, in, 6), CG_OK);
    read_bits(t, out, 14);
    ck_assert(out[2] == 3 && out[3] == 1 && out[5] == 3 && out[6] == 0x8000);
    cg_tensor_free(v);
    cg_tensor_free(t);
    ck_assert_ptr_null(cg_tensor_new(tt_ctx(), (cg_dtype)9, 1, &s));
    ck_assert_int_eq(cg__last_status(), CG_EDTYPE);
    ck_assert_ptr_null(cg_tensor_new(tt_ctx(), CG_I64, 1, &s));
    ck_assert_int_eq(cg__last_status(), CG_EDTYPE);
    ck_assert_ptr_null(cg_tensor_new(tt_ctx(), CG_BF16, 1, &bad));
    ck_assert_int_eq(cg__last_status(), CG_ESHAPE);
}
END_TEST

/* Each op given a 16-bit tensor: NULL (or a status), CG_EDTYPE naming
 * the dtype, the operand unchanged. */
static void
expect_edtype(cg_tensor *r, const char *op, const char *dtname)
{
    ck_assert_msg(r == NULL, "%s accepted a %s tensor", op, dtname);
    ck_assert_msg(cg__last_status() == CG_EDTYPE, "%s: status %d (%s)", op,
                  cg__last_status(), TT_ERR);
    ck_assert_msg(strstr(TT_ERR, dtname) != NULL, "%s: message '%s' does "
                  "not name %s", op, TT_ERR, dtname);
}

/* The rest of the op families, h 16-bit [3, 3], f float32 [3, 3]. */
static void
more_refusals(cg_tensor *h, cg_tensor *f, const char *name)
{
    cg_context *ctx = tt_ctx();
    int64_t s4[4] = { 1, 1, 3, 3 }, n3 = 3, one = 1;
    int32_t idx[3] = { 0, 2, 1 };
    cg_tensor *h4 = cg_reshape(h, 4, s4), *f4 = cg_reshape(f, 4, s4);
    cg_tensor *ix = cg_tensor_from_host(ctx, CG_I32, 1, &n3, idx);
    cg_tensor *t1 = cg_tensor_from_host(ctx, CG_I32, 1, &n3, idx);
    cg_tensor *ones = cg_ones(ctx, 1, &n3), *zeros = cg_zeros(ctx, 1, &n3);
    cg_tensor *both[2];

    ck_assert(h4 && f4 && ix && t1 && ones && zeros);
    /* where takes 16-bit operands (test_half_ops), not a condition. */
    expect_edtype(cg_where(h, f, f), "where", name);
    /* Reductions, softmax, losses and norms take 16-bit tensors
     * (tests/test_half_reduce.c), but not mixed with float32. */
    expect_edtype(cg_matmul_t(f, h, 0, 1), "matmul_t", name);
    expect_edtype(cg_embedding(f, h), "embedding", name);
    expect_edtype(cg_layer_norm(h, 1, &n3, ones, NULL, 1e-5f), "layer_norm",
                  name);
    expect_edtype(cg_cross_entropy(h, h, CG_REDUCTION_MEAN, -100, 0.0f),
                  "cross_entropy", name);
    expect_edtype(cg_mse_loss(h, f, CG_REDUCTION_MEAN), "mse_loss", name);
    expect_edtype(cg_bce_with_logits(f, h, CG_REDUCTION_SUM),
                  "bce_with_logits", name);
    both[0] = h;
    both[1] = f;
    expect_edtype(cg_concat(both, 2, 0), "concat", name);
    expect_edtype(cg_batch_norm(h4, NULL, NULL, NULL, zeros, 1, 0.1f, 1e-5f),
                  "batch_norm", name);
    (void)one;
    cg_tensor_free(h4); cg_tensor_free(f4); cg_tensor_free(ix);
    cg_tensor_free(t1); cg_tensor_free(ones); cg_tensor_free(zeros);
}

START_TEST(other_ops_refuse_16_bit_tensors)
{
    cg_dtype dt = _i ? CG_BF16 : CG_F16;
    const char *name = _i ? "bfloat16" : "float16";
    int64_t s[2] = { 3, 3 };
    uint16_t bits[9] = { 0x3C00, 0x4000, 0x4200, 0x3C00, 0x4000, 0x4200,
                         0x3C00, 0x4000, 0x4200 }, got[9];
    float ones[9] = { 1, 1, 1, 1, 1, 1, 1, 1, 1 }, v;
    cg_tensor *h = from_bits(dt, 2, s, bits);
    cg_tensor *f = from_bits(CG_F32, 2, s, ones);

    expect_edtype(cg_matmul(h, f), "matmul", name);
    expect_edtype(cg_matmul(f, h), "matmul", name);
    more_refusals(h, f, name);
    ck_assert_int_eq(cg_tensor_item(h, &v), CG_EDTYPE);
    /* A 16-bit leaf may require grad (16-bit parameters, issue 19). */
    ck_assert_int_eq(cg_tensor_set_requires_grad(h, 1), CG_OK);
    ck_assert_int_eq(cg_tensor_set_requires_grad(h, 0), CG_OK);
    /* Casts only between float32 and 16 bits. */
    expect_edtype(cg_to_dtype(h, _i ? CG_F16 : CG_BF16), "to_dtype", name);
    ck_assert_ptr_null(cg_to_dtype(h, CG_I32));
    ck_assert_int_eq(cg__last_status(), CG_EDTYPE);
    read_bits(h, got, sizeof got);
    ck_assert(memcmp(got, bits, sizeof bits) == 0);
    cg_tensor_free(h);
    cg_tensor_free(f);
}
END_TEST

START_TEST(same_dtype_is_a_new_reference)
{
    int64_t s = 2;
    float v[2] = { 1.5f, -2.0f };
    cg_tensor *x = from_bits(CG_F32, 1, &s, v), *y = cg_to_dtype(x, CG_F32);

    ck_assert_ptr_eq(x, y);
    cg_tensor_free(y);
    cg_tensor_free(x);
    ck_assert_ptr_null(cg_to_dtype(NULL, CG_F16));
    ck_assert_int_eq(cg__last_status(), CG_EINVAL);
}
END_TEST

/* float(dt(t)), freeing the 16-bit middle. */
static cg_tensor *
round_trip(cg_tensor *t, cg_dtype dt)
{
    cg_tensor *h = cast(t, dt), *r = cast(h, CG_F32);

    cg_tensor_free(h);
    return r;
}

/* float32 x [7, 5] -> 16-bit h -> float32 twice, through views of h:
 * sum(w1 * y1) + sum(w2 * y2) with y1 = float(h), y2 = float(h^T)^T (a
 * transpose of h, so its 16-bit gradient arrives through a view and the
 * two 16-bit gradients of h are added).  The gradient of x is
 * float(dt(float(dt(w1)) + float(dt(w2)))), PyTorch's rounding, computed
 * here with the casts the exhaustive tests checked. */
START_TEST(the_cast_passes_gradients_back_in_the_input_dtype)
{
    cg_dtype dt = _i ? CG_BF16 : CG_F16;
    int64_t s[2] = { 7, 5 };
    float hx[35], hw1[35], hw2[35], got[35], want[35];
    cg_tensor *x, *w1, *w2, *h, *ht, *y1, *y2, *y2t, *l1, *l2, *l, *p, *q;
    cg_tensor *a, *b, *ab;
    int i;

    for (i = 0; i < 35; i++) {
        hx[i] = (float)sin(0.3 * i) * 3.0f;
        hw1[i] = (float)cos(0.7 * i) * 1.37f + 0.001f * (float)i;
        hw2[i] = (float)sin(1.1 * i + 0.5) * 0.93f;
    }
    x = from_bits(CG_F32, 2, s, hx);
    w1 = from_bits(CG_F32, 2, s, hw1);
    w2 = from_bits(CG_F32, 2, s, hw2);
    ck_assert_int_eq(cg_tensor_set_requires_grad(x, 1), CG_OK);
    h = cast(x, dt);
    ck_assert(cg_tensor_requires_grad(h));
    ht = cg_transpose(h, 0, 1);
    y1 = cast(h, CG_F32);
    y2t = cast(ht, CG_F32);
    y2 = cg_transpose(y2t, 0, 1);
    p = cg_mul(y1, w1);
    q = cg_mul(y2, w2);
    l1 = cg_sum(p, 0, NULL, 0);
    cg_tensor_free(p);
    l2 = cg_sum(q, 0, NULL, 0);
    l = cg_add(l1, l2);
    ck_assert_msg(l != NULL, "%s", TT_ERR);
    ck_assert_msg(cg_backward(l, NULL, 0) == CG_OK, "%s", TT_ERR);
    ck_assert_ptr_nonnull(cg_tensor_grad(x));
    ck_assert_int_eq(cg_tensor_dtype(cg_tensor_grad(x)), CG_F32);
    read_bits(cg_tensor_grad(x), got, sizeof got);
    /* The reference, without recording. */
    cg_no_grad_enter();
    a = round_trip(w1, dt);
    b = round_trip(w2, dt);
    p = cg_add(a, b);
    ab = round_trip(p, dt);
    cg_tensor_free(p);
    cg_no_grad_leave();
    read_bits(ab, want, sizeof want);
    cg_tensor_free(a);
    cg_tensor_free(b);
    cg_tensor_free(ab);
    for (i = 0; i < 35; i++)
        ck_assert_msg(memcmp(&got[i], &want[i], 4) == 0, "element %d: %g, "
                      "want %g", i, got[i], want[i]);
    cg_tensor_free(x); cg_tensor_free(w1); cg_tensor_free(w2);
    cg_tensor_free(h); cg_tensor_free(ht); cg_tensor_free(y1);
    cg_tensor_free(y2); cg_tensor_free(y2t); cg_tensor_free(q);
    cg_tensor_free(l1); cg_tensor_free(l2); cg_tensor_free(l);
}
END_TEST

/* Backward from a 16-bit root seeds a 16-bit one; narrow and expand of a
 * 16-bit tensor pass 16-bit gradients; grad_output must match the root's
 * dtype. */
START_TEST(backward_through_16_bit_views_and_roots)
{
    cg_dtype dt = _i ? CG_BF16 : CG_F16;
    int64_t s = 9, one = 1, e2[2] = { 3, 9 };
    float hx[9], got[9];
    uint16_t gbits[27];
    cg_tensor *x, *h, *n, *r, *e, *go, *f;
    int i;

    for (i = 0; i < 9; i++)
        hx[i] = 0.25f * (float)i - 1.0f;
    x = from_bits(CG_F32, 1, &s, hx);
    ck_assert_int_eq(cg_tensor_set_requires_grad(x, 1), CG_OK);
    h = cast(x, dt);
    n = cg_narrow(h, 0, 4, 1);                  /* one element: a root */
    ck_assert_msg(cg_backward(n, NULL, 1) == CG_OK, "%s", TT_ERR);
    read_bits(cg_tensor_grad(x), got, sizeof got);
    for (i = 0; i < 9; i++)
        ck_assert(got[i] == (i == 4 ? 1.0f : 0.0f));
    ck_assert_int_eq(cg_tensor_zero_grad(x), CG_OK);
    /* expand [9] -> [3, 9], grad_output all ones in 16 bits: each element
     * of x gets 3 (exact in both formats). */
    e = cg_expand(h, 2, e2);
    ck_assert_ptr_nonnull(e);
    for (i = 0; i < 27; i++)
        gbits[i] = dt == CG_F16 ? 0x3C00 : 0x3F80;
    go = from_bits(dt, 2, e2, gbits);
    f = cg_full(tt_ctx(), 2, e2, 1.0f);
    ck_assert_int_eq(cg_backward(e, f, 1), CG_EDTYPE);
    ck_assert_msg(cg_backward(e, go, 1) == CG_OK, "%s", TT_ERR);
    read_bits(cg_tensor_grad(x), got, sizeof got);
    for (i = 0; i < 9; i++)
        ck_assert_msg(got[i] == 3.0f, "element %d: %g", i, got[i]);
    r = cg_reshape(h, 1, &one);
    ck_assert_ptr_null(r);                       /* 9 elements, not 1 */
    cg_tensor_free(x); cg_tensor_free(h); cg_tensor_free(n);
    cg_tensor_free(e); cg_tensor_free(go); cg_tensor_free(f);
}
END_TEST

/* Embedding and index_select copy 16-bit rows bit for bit (a NaN with a
 * payload included), and their gradient, summed over repeated indices in
 * float32 in increasing position, is rounded once to the weight's dtype:
 * x float32 [7, 5] -> h = dt(x) -> y = embedding(h, idx [4, 3]) ->
 * loss = sum(float(y) * w), so y's gradient is dt(w), h's is
 * dt(sum of float(dt(w_j)) over j with idx[j] = v), and x's that cast up. */
START_TEST(embedding_and_index_select_of_16_bit_tensors)
{
    cg_context *ctx = tt_ctx();
    cg_dtype dt = _i ? CG_BF16 : CG_F16;
    int32_t idx[12] = { 2, 0, 6, 2, 2, 5, 0, 1, 6, 3, 2, 4 };
    int32_t sel[4] = { 6, 0, 6, 3 };
    int64_t s[2] = { 7, 5 }, si[2] = { 4, 3 }, sw[3] = { 4, 3, 5 }, n4 = 4;
    uint16_t hb[35], yb[60], sb[20];
    float hx[35], hw[60], wr[60], sum[35], got[35], want[35];
    cg_tensor *x, *h, *hn, *ix, *is, *y, *yf, *w, *p, *l, *r, *sm, *st;
    int i, j, d;

    for (i = 0; i < 35; i++)
        hx[i] = (float)sin(0.37 * i) * 5.0f + 0.01f * (float)i;
    for (i = 0; i < 60; i++)
        hw[i] = (float)cos(0.23 * i + 0.1) * 1.7f;
    x = from_bits(CG_F32, 2, s, hx);
    ck_assert_int_eq(cg_tensor_set_requires_grad(x, 1), CG_OK);
    h = cast(x, dt);
    ix = cg_tensor_from_host(ctx, CG_I32, 2, si, idx);
    is = cg_tensor_from_host(ctx, CG_I32, 1, &n4, sel);
    ck_assert(ix && is);
    /* Forward: rows of the bits, a NaN with payload kept. */
    read_bits(h, hb, sizeof hb);
    hb[0 * 5 + 3] = dt == CG_F16 ? 0x7E15 : 0x7FA3;
    hn = from_bits(dt, 2, s, hb);
    y = cg_embedding(hn, ix);
    ck_assert_msg(y != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_dtype(y), dt);
    read_bits(y, yb, sizeof yb);
    for (j = 0; j < 12; j++)
        for (d = 0; d < 5; d++)
            ck_assert_msg(yb[j * 5 + d] == hb[idx[j] * 5 + d], "embedding "
                          "[%d, %d]: 0x%04x, want 0x%04x", j, d,
                          yb[j * 5 + d], hb[idx[j] * 5 + d]);
    cg_tensor_free(y);
    st = cg_transpose(hn, 0, 1);                 /* [5, 7], strided */
    sm = cg_index_select(st, 1, is);
    ck_assert_msg(sm != NULL, "%s", TT_ERR);
    read_bits(sm, sb, sizeof sb);
    for (d = 0; d < 5; d++)
        for (j = 0; j < 4; j++)
            ck_assert(sb[d * 4 + j] == hb[sel[j] * 5 + d]);
    /* Backward. */
    y = cg_embedding(h, ix);
    yf = cast(y, CG_F32);
    w = from_bits(CG_F32, 3, sw, hw);
    p = cg_mul(yf, w);
    ck_assert_msg(p != NULL, "%s", TT_ERR);
    l = cg_sum(p, 0, NULL, 0);
    ck_assert_msg(cg_backward(l, NULL, 0) == CG_OK, "%s", TT_ERR);
    read_bits(cg_tensor_grad(x), got, sizeof got);
    r = round_trip(w, dt);
    read_bits(r, wr, sizeof wr);
    memset(sum, 0, sizeof sum);
    for (j = 0; j < 12; j++)
        for (d = 0; d < 5; d++)
            sum[idx[j] * 5 + d] += wr[j * 5 + d];
    cg_tensor_free(r);
    r = from_bits(CG_F32, 2, s, sum);
    st = (cg_tensor_free(st), round_trip(r, dt));
    read_bits(st, want, sizeof want);
    for (i = 0; i < 35; i++)
        ck_assert_msg(memcmp(&got[i], &want[i], 4) == 0, "gradient %d: %g, "
                      "want %g", i, got[i], want[i]);
    cg_tensor_free(x); cg_tensor_free(h); cg_tensor_free(hn);
    cg_tensor_free(ix); cg_tensor_free(is); cg_tensor_free(y);
    cg_tensor_free(yf); cg_tensor_free(w); cg_tensor_free(p);
    cg_tensor_free(l); cg_tensor_free(r); cg_tensor_free(sm);
    cg_tensor_free(st);
}
END_TEST

START_TEST(checkpoints_keep_16_bit_tensors)
{
    cg_context *ctx = tt_ctx();
    cg_checkpoint *ck = cg_checkpoint_new(), *in;
    cg_tensor *t = indexed(CG_F16), *b = indexed(CG_BF16), *v, *r;
    int64_t s[3];
    uint16_t got[A * B * C];
    const uint16_t *data;
    cg_dtype dt;
    size_t bytes;
    const char *hname = "h";
    char path[512];
    int nd;

    v = cg_transpose(b, 0, 2);
    s[0] = 4;
    ck_assert_int_eq(cg_checkpoint_add_tensor(ck, "h", t), CG_OK);
    ck_assert_int_eq(cg_checkpoint_add_tensor(ck, "bt", v), CG_OK);
    ck_assert_int_eq(cg_checkpoint_add_host(ck, "raw", CG_BF16, 1, s, NULL),
                     CG_EINVAL);
    snprintf(path, sizeof path, "%s/half.safetensors", tt_tmpdir());
    ck_assert_msg(cg_checkpoint_save(ck, path) == CG_OK, "%s", TT_ERR);
    in = cg_checkpoint_load(path);
    ck_assert_msg(in != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_checkpoint_tensor_info(in, "h", &dt, &nd, s), CG_OK);
    ck_assert(dt == CG_F16 && nd == 3 && s[0] == A && s[2] == C);
    data = cg_checkpoint_tensor_data(in, "h", &bytes);
    ck_assert(data && bytes == sizeof got);
    ck_assert(memcmp(data, base, bytes) == 0);
    r = cg_checkpoint_tensor(in, ctx, "bt");
    ck_assert_msg(r != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_dtype(r), CG_BF16);
    ck_assert_int_eq(cg_tensor_dim(r, 0), C);
    {
        int64_t sh[3] = { C, B, A }, st[3] = { 1, C, B * C };

        check_view(r, sh, st, 0);
    }
    /* A restore into a tensor of another dtype names both. */
    ck_assert_int_eq(cg_checkpoint_restore(in, 1, &hname, &b), CG_EFORMAT);
    ck_assert_ptr_nonnull(strstr(TT_ERR, "F16"));
    ck_assert_ptr_nonnull(strstr(TT_ERR, "BF16"));
    ck_assert_int_eq(cg_checkpoint_restore(in, 1, &hname, &t), CG_OK);
    read_bits(t, got, sizeof got);
    ck_assert(memcmp(got, base, sizeof got) == 0);
    cg_tensor_free(r);
    cg_tensor_free(v);
    cg_tensor_free(t);
    cg_tensor_free(b);
    cg_checkpoint_free(in);
    cg_checkpoint_free(ck);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("half");
    TCase *tc = tcase_create("half");

    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, every_float16_pattern_converts_as_pytorch);
    tcase_add_test(tc, every_bfloat16_pattern_converts_as_pytorch);
    tcase_add_test(tc, every_float16_pattern_through_the_element_kernels);
    tcase_add_test(tc, float32_values_round_as_pytorch_fixture);
    tcase_add_test(tc, fills_round_as_pytorch_fixture);
    tcase_add_loop_test(tc, views_of_16_bit_tensors_read_the_right_elements,
                        0, 2);
    tcase_add_test(tc, host_transfers_count_16_bit_elements);
    tcase_add_test(tc, concat_stack_and_split_join_16_bit_tensors);
    tcase_add_loop_test(tc, other_ops_refuse_16_bit_tensors, 0, 2);
    tcase_add_test(tc, same_dtype_is_a_new_reference);
    tcase_add_loop_test(tc, the_cast_passes_gradients_back_in_the_input_dtype,
                        0, 2);
    tcase_add_loop_test(tc, backward_through_16_bit_views_and_roots, 0, 2);
    tcase_add_loop_test(tc, embedding_and_index_select_of_16_bit_tensors,
                        0, 2);
    tcase_add_test(tc, checkpoints_keep_16_bit_tensors);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tt_run(suite());
}
