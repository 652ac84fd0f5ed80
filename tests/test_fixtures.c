/* SPDX-License-Identifier: MIT */
/*
 * tests/test_fixtures.c - the PyTorch RNN fixtures (the .txt files of
 * tests/fixtures) load, and each holds every tensor the layer tests need
 * with shapes that agree with its config; the parser rejects malformed
 * files.  No OpenCL.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "testutil.h"

static const char *const files[] = {
    "rnn_lstm.txt", "rnn_lstm_bidir_varlen.txt", "rnn_gru.txt",
    "rnn_tanh_bidir.txt", "rnn_lstm_batch_first.txt",
};

/* Asserts that tensor `name` exists with the given shape (ndim dims). */
static const fx_tensor *
want(const fx_file *f, const char *file, const char *name, int ndim, ...)
{
    const fx_tensor *t = fx_get(f, name);
    va_list ap;
    int d;

    ck_assert_msg(t != NULL, "%s: no tensor %s", file, name);
    ck_assert_msg(t->ndim == ndim, "%s: %s has %d dims, want %d", file, name,
                  t->ndim, ndim);
    va_start(ap, ndim);
    for (d = 0; d < ndim; d++) {
        int64_t n = va_arg(ap, int64_t);

        ck_assert_msg(t->shape[d] == n, "%s: %s dim %d is %lld, want %lld",
                      file, name, d, (long long)t->shape[d], (long long)n);
    }
    va_end(ap);
    for (d = 0; d < t->numel; d++)
        ck_assert_msg(isfinite(t->data[d]), "%s: %s[%d] not finite", file,
                      name, d);
    return t;
}

/* A tensor and its gradient, both of the given 1-2-D shape. */
static void
want_param(const fx_file *f, const char *file, const char *name, int ndim,
           int64_t d0, int64_t d1)
{
    char g[80];

    snprintf(g, sizeof g, "grad_%s", name);
    if (ndim == 1) {
        want(f, file, name, 1, d0);
        want(f, file, g, 1, d0);
    } else {
        want(f, file, name, 2, d0, d1);
        want(f, file, g, 2, d0, d1);
    }
}

/* Element [t, b, j] of a sequence tensor in either layout. */
static float
seq_at(const fx_tensor *s, int bf, int t, int b, int j)
{
    int64_t i = bf ? ((int64_t)b * s->shape[1] + t) * s->shape[2] + j
                   : ((int64_t)t * s->shape[1] + b) * s->shape[2] + j;

    return s->data[i];
}

START_TEST(fixture_shapes_agree_with_config)
{
    const char *file = files[_i], *mode;
    char err[512], name[64];
    int64_t I, H, L, D, T, B, G, bf, l, dir, k;
    int lengths[64], n, expect, b, t, j;
    const fx_tensor *out, *gin;
    fx_file *f = fx_load_fixture(file, err, sizeof err);

    ck_assert_msg(f != NULL, "%s", err);
    mode = fx_config_str(f, "mode");
    ck_assert_ptr_nonnull(mode);
    G = strcmp(mode, "LSTM") == 0 ? 4 : strcmp(mode, "GRU") == 0 ? 3 :
        strcmp(mode, "RNN_TANH") == 0 || strcmp(mode, "RNN_RELU") == 0 ? 1
        : 0;
    ck_assert_msg(G > 0, "%s: unknown mode %s", file, mode);
    I = fx_config_int(f, "input_size", 0);
    H = fx_config_int(f, "hidden_size", 0);
    L = fx_config_int(f, "num_layers", 0);
    D = fx_config_int(f, "bidirectional", -1) + 1;
    bf = fx_config_int(f, "batch_first", -1);
    T = fx_config_int(f, "T", 0);
    B = fx_config_int(f, "B", 0);
    ck_assert(I > 0 && H > 0 && L > 0 && T > 0 && B > 0 && B <= 64);
    ck_assert(D == 1 || D == 2);
    ck_assert(bf == 0 || bf == 1);
    n = fx_config_ints(f, "lengths", lengths, 64);
    ck_assert_int_eq(n, B);
    for (b = 0; b < B; b++)
        ck_assert(lengths[b] >= 1 && lengths[b] <= T);

    if (bf)
        want(f, file, "input", 3, B, T, I);
    else
        want(f, file, "input", 3, T, B, I);
    gin = bf ? want(f, file, "grad_input", 3, B, T, I)
             : want(f, file, "grad_input", 3, T, B, I);
    out = bf ? want(f, file, "output", 3, B, T, D * H)
             : want(f, file, "output", 3, T, B, D * H);
    if (bf)
        want(f, file, "grad_output", 3, B, T, D * H);
    else
        want(f, file, "grad_output", 3, T, B, D * H);
    /* Sequences and states with their gradients; LSTM adds the cell. */
    expect = 8;
    want(f, file, "h0", 3, L * D, B, H);
    want(f, file, "h_n", 3, L * D, B, H);
    want(f, file, "grad_h0", 3, L * D, B, H);
    want(f, file, "grad_h_n", 3, L * D, B, H);
    if (G == 4) {
        want(f, file, "c0", 3, L * D, B, H);
        want(f, file, "c_n", 3, L * D, B, H);
        want(f, file, "grad_c0", 3, L * D, B, H);
        want(f, file, "grad_c_n", 3, L * D, B, H);
        expect += 4;
    } else {
        ck_assert_ptr_null(fx_get(f, "c0"));
    }
    for (l = 0; l < L; l++)
        for (dir = 0; dir < D; dir++) {
            const char *sfx = dir ? "_reverse" : "";

            snprintf(name, sizeof name, "weight_ih_l%lld%s", (long long)l,
                     sfx);
            want_param(f, file, name, 2, G * H, l ? D * H : I);
            snprintf(name, sizeof name, "weight_hh_l%lld%s", (long long)l,
                     sfx);
            want_param(f, file, name, 2, G * H, H);
            snprintf(name, sizeof name, "bias_ih_l%lld%s", (long long)l, sfx);
            want_param(f, file, name, 1, G * H, 0);
            snprintf(name, sizeof name, "bias_hh_l%lld%s", (long long)l, sfx);
            want_param(f, file, name, 1, G * H, 0);
            expect += 8;
        }
    ck_assert_int_eq(f->ntensors, expect);
    /* pack_padded_sequence semantics: nothing flows past a length. */
    for (b = 0; b < B; b++)
        for (t = lengths[b]; t < T; t++) {
            for (j = 0; j < D * H; j++)
                ck_assert(seq_at(out, (int)bf, t, b, j) == 0.0f);
            for (k = 0; k < I; k++)
                ck_assert(seq_at(gin, (int)bf, t, b, (int)k) == 0.0f);
        }
    fx_free(f);
}
END_TEST

/* Writes `text` to a temporary file and loads it. */
static fx_file *
load_text(const char *text, char *err, size_t errsize)
{
    char path[512];
    FILE *fp;

    snprintf(path, sizeof path, "%s/fx.txt", tt_tmpdir());
    fp = fopen(path, "w");
    ck_assert_ptr_nonnull(fp);
    fputs(text, fp);
    fclose(fp);
    return fx_load(path, err, errsize);
}

START_TEST(parser_reads_config_and_tensors)
{
    char err[512];
    int v[4];
    fx_file *f = load_text("# c\nconfig mode GRU\nconfig lengths 3 1\n"
                           "x 2 2 1 : 1.5 -2e-3\ns 0 : 7\n", err, sizeof err);

    ck_assert_msg(f != NULL, "%s", err);
    ck_assert_str_eq(fx_config_str(f, "mode"), "GRU");
    ck_assert_int_eq(fx_config_ints(f, "lengths", v, 4), 2);
    ck_assert_int_eq(v[0], 3);
    ck_assert_int_eq(v[1], 1);
    ck_assert_int_eq(fx_config_ints(f, "mode", v, 4), -1);
    ck_assert_int_eq(fx_config_int(f, "missing", 42), 42);
    ck_assert_int_eq(fx_get(f, "x")->numel, 2);
    ck_assert(fx_get(f, "x")->data[1] == -2e-3f);
    ck_assert_int_eq(fx_get(f, "s")->ndim, 0);
    ck_assert(fx_get(f, "s")->data[0] == 7.0f);
    ck_assert_ptr_null(fx_get(f, "y"));
    fx_free(f);
}
END_TEST

START_TEST(parser_rejects_malformed_files)
{
    static const char *const bad[] = {
        "x 2 2 2 : 1 2 3\n",        /* too few values */
        "x 1 2 : 1 2 3\n",          /* too many */
        "x 1 2 1 2\n",              /* no colon */
        "x 9 : 1\n",                /* too many dimensions */
        "config novalue\n",
    };
    char err[512];
    size_t i;

    for (i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = '\0';
        ck_assert_ptr_null(load_text(bad[i], err, sizeof err));
        ck_assert_msg(strstr(err, "fx.txt:1: ") != NULL, "%s", err);
    }
    ck_assert_ptr_null(fx_load("/nonexistent/fx.txt", err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "cannot read"));
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("fixtures");
    TCase *tc = tcase_create("fixtures");

    tcase_add_loop_test(tc, fixture_shapes_agree_with_config, 0,
                        (int)(sizeof files / sizeof *files));
    tcase_add_test(tc, parser_reads_config_and_tensors);
    tcase_add_test(tc, parser_rejects_malformed_files);
    suite_add_tcase(s, tc);
    return tt_run(s);
}
