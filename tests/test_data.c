/* SPDX-License-Identifier: MIT */
/*
 * tests/test_data.c - the data loaders: data/digits.csv and data/kjv.txt
 * load with the sizes data/README states; CSV header detection, label
 * column and delimiter; every kind of bad CSV or text named with its file
 * and line; deterministic held-out splits; shuffled batches that cover each
 * row once per epoch; feature standardisation against a plain C
 * computation; and text batches whose streams continue from one batch to
 * the next.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "testutil.h"

static const char *
src_path(char *buf, size_t size, const char *rel)
{
    const char *top = getenv("TEST_SRCDIR");

    snprintf(buf, size, "%s/%s", top && *top ? top : ".", rel);
    return buf;
}

static const char *
write_tmp(const char *name, const char *text)
{
    static char path[512];
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", tt_tmpdir(), name);
    f = fopen(path, "wb");
    ck_assert(f != NULL);
    ck_assert_uint_eq(fwrite(text, 1, strlen(text), f), strlen(text));
    ck_assert_int_eq(fclose(f), 0);
    return path;
}

START_TEST(digits_csv_is_the_sklearn_digits_set)
{
    static const float row0[16] = { 0, 0, 5, 13, 9, 1, 0, 0,
                                    0, 0, 13, 15, 10, 15, 5, 0 };
    int count[10] = { 0 };
    char path[512];
    cg_dataset *ds = cg_csv_load(src_path(path, sizeof path,
                                          "data/digits.csv"), NULL);
    const float *x;
    const int32_t *y;
    int64_t i;

    ck_assert_msg(ds != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_dataset_rows(ds), 1797);
    ck_assert_int_eq(cg_dataset_features(ds), 64);
    ck_assert_int_eq(cg_dataset_classes(ds), 10);
    x = cg_dataset_feature_data(ds);
    y = cg_dataset_label_data(ds);
    ck_assert(memcmp(x, row0, sizeof row0) == 0);
    ck_assert_int_eq(y[0], 0);
    ck_assert_int_eq(y[1796], 8);
    for (i = 0; i < 1797 * 64; i++)
        ck_assert(x[i] >= 0 && x[i] <= 16);
    for (i = 0; i < 1797; i++)
        count[y[i]]++;
    for (i = 0; i < 10; i++)            /* 174 to 183 images per digit */
        ck_assert(count[i] >= 174 && count[i] <= 183);
    cg_dataset_free(ds);
}
END_TEST

START_TEST(csv_header_label_column_and_delimiter)
{
    cg_csv_options o = { 0, CG_CSV_HEADER_DETECT, ';' };
    const char *p = write_tmp("semi.csv", "label;a;b\r\n\r\n"
                              "2; 1.5 ;-3e2\r\n  \n0;4;5\r\n");
    cg_dataset *ds = cg_csv_load(p, &o);
    const float *x;

    ck_assert_msg(ds != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_dataset_rows(ds), 2);
    ck_assert_int_eq(cg_dataset_features(ds), 2);
    ck_assert_int_eq(cg_dataset_classes(ds), 3);
    x = cg_dataset_feature_data(ds);
    ck_assert(x[0] == 1.5f && x[1] == -300 && x[2] == 4 && x[3] == 5);
    ck_assert_int_eq(cg_dataset_label_data(ds)[0], 2);
    cg_dataset_free(ds);
    /* Without a header, an all-number first row is data; -2 is the
     * second column from the end. */
    o.label_column = -2;
    o.header = CG_CSV_HEADER_DETECT;
    o.delimiter = 0;
    p = write_tmp("plain.csv", "1,7,2\n3,8,4");
    ds = cg_csv_load(p, &o);
    ck_assert_msg(ds != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_dataset_rows(ds), 2);
    ck_assert_int_eq(cg_dataset_label_data(ds)[1], 8);
    ck_assert(cg_dataset_feature_data(ds)[3] == 4);
    cg_dataset_free(ds);
    o.header = CG_CSV_HEADER_PRESENT;          /* the first row skipped */
    ds = cg_csv_load(p, &o);
    ck_assert(ds && cg_dataset_rows(ds) == 1);
    cg_dataset_free(ds);
}
END_TEST

typedef struct bad_csv {
    const char *text;
    const char *expect;
} bad_csv;

static const bad_csv bad_csvs[] = {
    { "a,b,c\n1,2,3\n4,5\n", ":3: 2 fields, expected 3" },
    { "1,2,3\n4,5,6,7\n", ":2: 4 fields, expected 3" },
    { "1,2,3\n\n4,x,6\n", ":3: field 2 ('x') is not a finite number" },
    { "1,2,3\n4,,6\n", ":2: field 2" },
    { "1,2,3\n4,nan,6\n", ":2: field 2 ('nan')" },
    { "1,2,3\n4,5,1e999\n", ":2: field 3" },
    { "1,2,-1\n", ":1: label -1" },
    { "1,2,2.5\n", ":1: label 2.5" },
    /* Issue 16, defect 6: the class count (largest label + 1) overflowed
     * an int and the error came at step 1 with a misleading message. */
    { "1,2,0\n3,4,2147483647\n", ":2: label 2147483647 (field 3) is not a "
      "class index (an integer from 0 to 2147483646)" },
    { "1,2,0\n3,4,1e10\n", ":2: label 1e10" },
    { "1,2,-0.5\n", ":1: label -0.5" },
    { "1,2,3\n1,2,4294967296\n", ":2: label 4294967296" },
    { "x,y\n", "no data rows" },
    { "", "no data rows" },
    { "\n\n", "no data rows" },
    { "5\n6\n", ":1: 1 field" },
};

START_TEST(each_bad_csv_names_file_and_line)
{
    const char *p = write_tmp("bad.csv", bad_csvs[_i].text);
    cg_dataset *ds = cg_csv_load(p, NULL);

    ck_assert_msg(ds == NULL, "loaded: %s", bad_csvs[_i].text);
    ck_assert_int_eq(cg__last_status(), CG_EFORMAT);
    ck_assert_msg(strstr(TT_ERR, p) && strstr(TT_ERR, bad_csvs[_i].expect),
                  "'%s' lacks '%s'", TT_ERR, bad_csvs[_i].expect);
}
END_TEST

START_TEST(csv_bad_arguments)
{
    cg_csv_options o = { 5, CG_CSV_HEADER_NONE, ',' };
    const char *p = write_tmp("three.csv", "1,2,3\n");

    ck_assert_ptr_null(cg_csv_load(p, &o));
    ck_assert_int_eq(cg__last_status(), CG_EINVAL);
    ck_assert_ptr_nonnull(strstr(TT_ERR, "label column 5"));
    ck_assert_ptr_null(cg_csv_load("/nonexistent/x.csv", NULL));
    ck_assert_int_eq(cg__last_status(), CG_EIO);
    ck_assert_ptr_nonnull(strstr(TT_ERR, "/nonexistent/x.csv"));
    ck_assert_ptr_null(cg_csv_load(NULL, NULL));
    /* Issue 16, defect 7: a directory asked malloc for LONG_MAX + 1. */
    ck_assert_ptr_null(cg_csv_load(tt_tmpdir(), NULL));
    ck_assert_int_eq(cg__last_status(), CG_EIO);
    ck_assert_msg(strstr(TT_ERR, "is a directory") &&
                  strstr(TT_ERR, tt_tmpdir()), "%s", TT_ERR);
}
END_TEST

/* The largest label allowed loads, and the class count is right. */
START_TEST(csv_largest_label_counts_its_classes)
{
    const char *p = write_tmp("big_label.csv", "1,2,0\n3,4,2147483646\n");
    cg_dataset *ds = cg_csv_load(p, NULL);

    ck_assert_msg(ds != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_dataset_label_data(ds)[1], 2147483646);
    ck_assert_int_eq(cg_dataset_classes(ds), 2147483647);
    cg_dataset_free(ds);
}
END_TEST

/* A table whose only feature is the row number, label row % 3. */
static cg_dataset *
numbered(int rows)
{
    char *text = malloc((size_t)rows * 16 + 1), *p = text;
    cg_dataset *ds;
    int i;

    for (i = 0; i < rows; i++)
        p += sprintf(p, "%d,%d\n", i, i % 3);
    ds = cg_csv_load(write_tmp("numbered.csv", text), NULL);
    free(text);
    ck_assert_msg(ds != NULL, "%s", TT_ERR);
    return ds;
}

/* Statistics from the training split, applied to both: against double
 * sums here (the mean and 1/std to 1e-6 relative: the library sums in
 * double too, but in another order), and the standardised values exactly
 * as (x - mean) * inv_std in float.  The constant column gets inv_std 1. */
START_TEST(standardize_uses_the_training_split_statistics)
{
    char text[4096], *p = text;
    cg_dataset *ds, *tr, *te;
    float mean[3], inv[3], bad[3] = { 0, NAN, 0 }, before[3];
    const float *x;
    int64_t i, rows;
    int j;

    for (i = 0; i < 37; i++)
        p += sprintf(p, "%g,%g,%d,%d\n", (double)(i * i % 17) / 3.0,
                     (double)i * 0.25 - 4, 5, (int)(i % 2));
    ds = cg_csv_load(write_tmp("std.csv", text), NULL);
    ck_assert_msg(ds != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_dataset_split(ds, 0.3, 9, &tr, &te), CG_OK);
    ck_assert_int_eq(cg_dataset_feature_stats(tr, mean, inv), CG_OK);
    rows = cg_dataset_rows(tr);
    x = cg_dataset_feature_data(tr);
    for (j = 0; j < 3; j++) {
        double s = 0, ss = 0;

        for (i = 0; i < rows; i++)
            s += x[i * 3 + j];
        s /= (double)rows;
        for (i = 0; i < rows; i++)
            ss += (x[i * 3 + j] - s) * (x[i * 3 + j] - s);
        ss = sqrt(ss / (double)rows);
        ck_assert_double_eq_tol(mean[j], s, 1e-6 * fabs(s) + 1e-7);
        if (j < 2)
            ck_assert_double_eq_tol(inv[j], 1 / ss, 1e-6 / ss);
    }
    ck_assert(mean[2] == 5.0f && inv[2] == 1.0f);
    memcpy(before, cg_dataset_feature_data(te), sizeof before);
    ck_assert_int_eq(cg_dataset_standardize(te, mean, bad), CG_EINVAL);
    ck_assert(memcmp(before, cg_dataset_feature_data(te),
                     sizeof before) == 0);
    ck_assert_int_eq(cg_dataset_standardize(tr, mean, inv), CG_OK);
    ck_assert_int_eq(cg_dataset_standardize(te, mean, inv), CG_OK);
    x = cg_dataset_feature_data(te);
    for (j = 0; j < 3; j++) {
        float d = before[j] - mean[j];

        ck_assert(x[j] == d * inv[j]);
    }
    x = cg_dataset_feature_data(tr);
    for (i = 0; i < rows; i++)
        ck_assert(x[i * 3 + 2] == 0.0f);
    ck_assert_int_eq(cg_dataset_feature_stats(tr, NULL, inv), CG_EINVAL);
    ck_assert_int_eq(cg_dataset_standardize(NULL, mean, inv), CG_EINVAL);
    cg_dataset_free(ds);
    cg_dataset_free(tr);
    cg_dataset_free(te);
}
END_TEST

START_TEST(split_is_deterministic_and_partitions_the_rows)
{
    cg_dataset *ds = numbered(101), *tr, *te, *tr2, *te2, *tr3, *te3;
    char seen[101] = { 0 };
    int64_t i;

    ck_assert_int_eq(cg_dataset_split(ds, 0.2, 7, &tr, &te), CG_OK);
    ck_assert_int_eq(cg_dataset_rows(te), 20);
    ck_assert_int_eq(cg_dataset_rows(tr), 81);
    ck_assert_int_eq(cg_dataset_classes(te), 3);
    for (i = 0; i < 81; i++)
        seen[(int)cg_dataset_feature_data(tr)[i]]++;
    for (i = 0; i < 20; i++)
        seen[(int)cg_dataset_feature_data(te)[i]]++;
    for (i = 0; i < 101; i++)
        ck_assert_int_eq(seen[i], 1);
    for (i = 1; i < 20; i++)                     /* file order kept */
        ck_assert(cg_dataset_feature_data(te)[i] >
                  cg_dataset_feature_data(te)[i - 1]);
    for (i = 0; i < 20; i++)
        ck_assert_int_eq(cg_dataset_label_data(te)[i],
                         (int)cg_dataset_feature_data(te)[i] % 3);
    ck_assert_int_eq(cg_dataset_split(ds, 0.2, 7, &tr2, &te2), CG_OK);
    ck_assert(memcmp(cg_dataset_feature_data(te),
                     cg_dataset_feature_data(te2), 20 * sizeof(float)) == 0);
    ck_assert_int_eq(cg_dataset_split(ds, 0.2, 8, &tr3, &te3), CG_OK);
    ck_assert(memcmp(cg_dataset_feature_data(te),
                     cg_dataset_feature_data(te3), 20 * sizeof(float)) != 0);
    cg_dataset_free(tr3);
    cg_dataset_free(te3);
    ck_assert_int_eq(cg_dataset_split(ds, 0.0, 7, &tr3, &te3), CG_EINVAL);
    ck_assert_int_eq(cg_dataset_split(ds, 1.0, 7, &tr3, &te3), CG_EINVAL);
    ck_assert_int_eq(cg_dataset_split(ds, 0.001, 7, &tr3, &te3), CG_EINVAL);
    cg_dataset_free(ds);
    cg_dataset_free(tr);
    cg_dataset_free(te);
    cg_dataset_free(tr2);
    cg_dataset_free(te2);
}
END_TEST

/* The row numbers of one epoch's batches, in order. */
static void
epoch_order(cg_dataset *ds, int bs, int shuffled, uint64_t seed,
            int64_t epoch, int *order)
{
    cg_context *ctx = tt_ctx();
    int64_t b, nb = cg_dataset_num_batches(ds, bs);
    int at = 0, n, i;

    for (b = 0; b < nb; b++) {
        cg_tensor *x, *y;
        float fx[64];
        int32_t iy[64];

        n = cg_dataset_batch(ds, ctx, bs, shuffled, seed, epoch, b, &x, &y);
        ck_assert_msg(n > 0, "%s", TT_ERR);
        ck_assert_int_eq(n, b < nb - 1 ? bs : 37 - (nb - 1) * bs);
        ck_assert_int_eq(cg_tensor_ndim(x), 2);
        ck_assert_int_eq(cg_tensor_dim(x, 0), n);
        ck_assert_int_eq(cg_tensor_dim(x, 1), 1);
        ck_assert_int_eq(cg_tensor_dtype(y), CG_I32);
        ck_assert_int_eq(cg_tensor_to_host(x, fx, (size_t)n * 4), CG_OK);
        ck_assert_int_eq(cg_tensor_to_host(y, iy, (size_t)n * 4), CG_OK);
        for (i = 0; i < n; i++) {
            order[at++] = (int)fx[i];
            ck_assert_int_eq(iy[i], (int)fx[i] % 3);
        }
        cg_tensor_free(x);
        cg_tensor_free(y);
    }
    ck_assert_int_eq(at, 37);
}

START_TEST(batches_cover_every_row_once_per_epoch)
{
    cg_context *ctx = tt_ctx();
    cg_dataset *ds = numbered(37);
    int a[37], b[37], c[37], d[37], seen[37] = { 0 }, i;
    cg_tensor *x = (cg_tensor *)1, *y = (cg_tensor *)1;

    ck_assert_int_eq(cg_dataset_num_batches(ds, 8), 5);
    epoch_order(ds, 8, 0, 0, 0, a);
    for (i = 0; i < 37; i++)
        ck_assert_int_eq(a[i], i);
    epoch_order(ds, 8, 1, 42, 0, a);
    epoch_order(ds, 8, 1, 42, 1, b);
    epoch_order(ds, 8, 1, 42, 0, c);
    epoch_order(ds, 5, 1, 42, 0, d);  /* the order is the batch size's too */
    for (i = 0; i < 37; i++)
        seen[a[i]]++;
    for (i = 0; i < 37; i++)
        ck_assert_int_eq(seen[i], 1);
    ck_assert(memcmp(a, b, sizeof a) != 0);
    ck_assert(memcmp(a, c, sizeof a) == 0);
    ck_assert(memcmp(a, d, sizeof a) == 0);
    ck_assert_int_eq(cg_dataset_batch(ds, ctx, 8, 1, 42, 0, 5, &x, &y), 0);
    ck_assert(x == NULL && y == NULL);
    /* Past the end by far: index * batch would overflow (issue 16). */
    ck_assert_int_eq(cg_dataset_batch(ds, ctx, 8, 1, 42, 0, INT64_MAX, &x,
                                      &y), 0);
    ck_assert(x == NULL && y == NULL);
    ck_assert_int_eq(cg_dataset_batch(ds, ctx, 0, 1, 42, 0, 0, &x, &y),
                     CG_EINVAL);
    cg_dataset_free(ds);
}
END_TEST

START_TEST(kjv_text_loads_with_its_vocabulary)
{
    char path[512], out[64];
    cg_text *t = cg_text_load(src_path(path, sizeof path, "data/kjv.txt"),
                              NULL), *u;
    const char *vocab;
    int32_t ids[32];
    int n;

    ck_assert_msg(t != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_text_length(t), 1013917);
    n = cg_text_vocab_size(t);
    ck_assert_int_eq(n, 62);
    vocab = cg_text_vocab(t);
    ck_assert_ptr_nonnull(strstr(vocab, "[10,32,33,"));
    ck_assert_int_eq(cg_text_encode(t, "In the beginning", 16, ids), CG_OK);
    ck_assert_int_eq(ids[2], 1);                    /* ' ' after '\n' */
    ck_assert_int_eq(cg_text_decode(t, ids, 16, out), CG_OK);
    ck_assert_str_eq(out, "In the beginning");
    ck_assert(memcmp(cg_text_ids(t), ids, 16 * sizeof *ids) == 0);
    ck_assert_int_eq(cg_text_encode(t, "\t", 1, ids), CG_EINVAL);
    ids[0] = n;
    ck_assert_int_eq(cg_text_decode(t, ids, 1, out), CG_EINVAL);
    /* Loading again through the saved vocabulary gives the same ids. */
    u = cg_text_load(path, vocab);
    ck_assert_msg(u != NULL, "%s", TT_ERR);
    ck_assert(memcmp(cg_text_ids(t), cg_text_ids(u),
                     (size_t)cg_text_length(t) * sizeof(int32_t)) == 0);
    cg_text_free(u);
    cg_text_free(t);
}
END_TEST

START_TEST(bad_text_is_named)
{
    const char *p = write_tmp("empty.txt", "");

    ck_assert_ptr_null(cg_text_load(p, NULL));
    ck_assert_int_eq(cg__last_status(), CG_EFORMAT);
    ck_assert_ptr_nonnull(strstr(TT_ERR, "empty"));
    ck_assert_ptr_null(cg_text_load("/nonexistent/t.txt", NULL));
    ck_assert_int_eq(cg__last_status(), CG_EIO);
    ck_assert_ptr_null(cg_text_load(tt_tmpdir(), NULL));
    ck_assert_int_eq(cg__last_status(), CG_EIO);
    ck_assert_msg(strstr(TT_ERR, "is a directory") != NULL, "%s", TT_ERR);
    p = write_tmp("abc.txt", "ab\nba\ncab\n");
    ck_assert_ptr_null(cg_text_load(p, "[10,97,98]"));
    ck_assert_int_eq(cg__last_status(), CG_EFORMAT);
    ck_assert_msg(strstr(TT_ERR, "abc.txt:3: byte 0x63 ('c')") != NULL, "%s",
                  TT_ERR);
    ck_assert_ptr_null(cg_text_load(p, "[10,97,97]"));
    ck_assert_int_eq(cg__last_status(), CG_EFORMAT);
    ck_assert_ptr_null(cg_text_load(p, "[300]"));
    ck_assert_ptr_null(cg_text_load(p, "{\"a\":1}"));
    ck_assert_ptr_null(cg_text_load(p, "[]"));
    ck_assert_ptr_null(cg_text_load(p, "not json"));
    ck_assert_int_eq(cg__last_status(), CG_EFORMAT);
}
END_TEST

static void
to_host_ids(cg_tensor *t, int32_t *buf, int64_t n)
{
    ck_assert_int_eq(cg_tensor_dtype(t), CG_I32);
    ck_assert_int_eq(cg_tensor_to_host(t, buf, (size_t)n * 4), CG_OK);
}

START_TEST(text_batches_continue_each_stream)
{
    cg_context *ctx = tt_ctx();
    const char *p = write_tmp("abc.txt", "abcdefghijklmnopqrstuvwxyz");
    cg_text *t = cg_text_load(p, NULL), *tr, *va;
    cg_tensor *in, *tg;
    int32_t a[12], b[12], prev_tg[12];
    int64_t i, k, s;

    ck_assert_msg(t != NULL, "%s", TT_ERR);
    /* 25 positions in 3 streams of S = 8, windows of 4: two batches. */
    ck_assert_int_eq(cg_text_num_batches(t, 4, 3), 2);
    for (i = 0; i < 2; i++) {
        ck_assert_int_eq(cg_text_batch(t, ctx, 4, 3, i, &in, &tg), 4);
        ck_assert_int_eq(cg_tensor_dim(in, 0), 4);
        ck_assert_int_eq(cg_tensor_dim(in, 1), 3);
        to_host_ids(in, a, 12);
        to_host_ids(tg, b, 12);
        for (k = 0; k < 4; k++)
            for (s = 0; s < 3; s++) {
                ck_assert_int_eq(a[k * 3 + s], s * 8 + i * 4 + k);
                ck_assert_int_eq(b[k * 3 + s], a[k * 3 + s] + 1);
            }
        if (i > 0)                      /* stream s picks up where it was */
            for (s = 0; s < 3; s++)
                ck_assert_int_eq(a[s], prev_tg[3 * 3 + s]);
        memcpy(prev_tg, b, sizeof b);
        cg_tensor_free(in);
        cg_tensor_free(tg);
    }
    ck_assert_int_eq(cg_text_batch(t, ctx, 4, 3, 2, &in, &tg), 0);
    ck_assert(in == NULL && tg == NULL);
    /* Past the end by far: index * steps would overflow. */
    ck_assert_int_eq(cg_text_batch(t, ctx, 4, 3, INT64_MAX, &in, &tg), 0);
    ck_assert(in == NULL && tg == NULL);
    /* Windows of 3: the last batch has 2 steps. */
    ck_assert_int_eq(cg_text_num_batches(t, 3, 3), 3);
    ck_assert_int_eq(cg_text_batch(t, ctx, 3, 3, 2, &in, &tg), 2);
    to_host_ids(in, a, 6);
    ck_assert_int_eq(a[5], 2 * 8 + 7);
    cg_tensor_free(in);
    cg_tensor_free(tg);
    ck_assert_int_eq(cg_text_batch(t, ctx, 3, 26, 0, &in, &tg), CG_EINVAL);
    ck_assert_int_eq(cg_text_split(t, 0.25, &tr, &va), CG_OK);
    ck_assert_int_eq(cg_text_length(tr), 19);
    ck_assert_int_eq(cg_text_length(va), 7);
    ck_assert_int_eq(cg_text_ids(va)[0], 19);
    ck_assert_str_eq(cg_text_vocab(va), cg_text_vocab(t));
    ck_assert_int_eq(cg_text_split(t, 0.99, &tr, &va), CG_EINVAL);
    cg_text_free(tr);
    cg_text_free(va);
    cg_text_free(t);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("data");
    TCase *tc = tcase_create("data");

    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, digits_csv_is_the_sklearn_digits_set);
    tcase_add_test(tc, csv_header_label_column_and_delimiter);
    tcase_add_test(tc, csv_largest_label_counts_its_classes);
    tcase_add_loop_test(tc, each_bad_csv_names_file_and_line, 0,
                        (int)(sizeof bad_csvs / sizeof bad_csvs[0]));
    tcase_add_test(tc, csv_bad_arguments);
    tcase_add_test(tc, split_is_deterministic_and_partitions_the_rows);
    tcase_add_test(tc, standardize_uses_the_training_split_statistics);
    tcase_add_test(tc, batches_cover_every_row_once_per_epoch);
    tcase_add_test(tc, kjv_text_loads_with_its_vocabulary);
    tcase_add_test(tc, bad_text_is_named);
    tcase_add_test(tc, text_batches_continue_each_stream);
    suite_add_tcase(s, tc);
    return tt_run(s);
}
