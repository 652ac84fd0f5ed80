/* SPDX-License-Identifier: MIT */
/*
 * tests/fuzz/fuzz_csv.c - the CSV loader.  The input's first byte picks
 * the options (header mode, label column, delimiter); the rest is the
 * file.  A table that loads must be consistent (rows >= 1, features >= 1,
 * every label in 0 .. classes - 1, every feature finite) and survive what
 * clgrad-train does with it: a split, the feature statistics and
 * standardisation, and the first and last batches on the device.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>

#include "fuzz.h"

static void
check_batches(cg_dataset *ds)
{
    cg_context *ctx = fuzz_context();
    int64_t nb = cg_dataset_num_batches(ds, 3), idx[2];
    cg_tensor *x, *y;
    int i, n;

    FUZZ_ASSERT(nb == (cg_dataset_rows(ds) + 2) / 3, "%lld batches of 3 for "
                "%lld rows", (long long)nb, (long long)cg_dataset_rows(ds));
    if (!ctx)
        return;
    idx[0] = 0;
    idx[1] = nb - 1;
    for (i = 0; i < 2; i++) {
        n = cg_dataset_batch(ds, ctx, 3, i, 7, 1, idx[i], &x, &y);
        FUZZ_ASSERT(n >= 1 && n <= 3, "batch %lld gave %d",
                    (long long)idx[i], n);
        FUZZ_ASSERT(cg_tensor_dim(x, 0) == n && cg_tensor_dim(y, 0) == n &&
                    cg_tensor_dim(x, 1) == cg_dataset_features(ds),
                    "batch shapes");
        cg_tensor_free(x);
        cg_tensor_free(y);
    }
    n = cg_dataset_batch(ds, ctx, 3, 0, 7, 1, nb, &x, &y);
    FUZZ_ASSERT(n == 0 && !x && !y, "a batch past the end gave %d", n);
}

static void
check_dataset(cg_dataset *ds)
{
    int64_t rows = cg_dataset_rows(ds), i;
    int f = cg_dataset_features(ds), c = cg_dataset_classes(ds);
    const float *x = cg_dataset_feature_data(ds);
    const int32_t *y = cg_dataset_label_data(ds);
    cg_dataset *train = NULL, *test = NULL;
    float *mean, *inv_std;

    FUZZ_ASSERT(rows >= 1 && f >= 1 && c >= 1, "rows %lld, features %d, "
                "classes %d", (long long)rows, f, c);
    for (i = 0; i < rows; i++)
        FUZZ_ASSERT(y[i] >= 0 && y[i] < c, "row %lld: label %d of %d "
                    "classes", (long long)i, y[i], c);
    for (i = 0; i < rows * f; i++)
        FUZZ_ASSERT(isfinite(x[i]), "feature %lld is not finite",
                    (long long)i);
    if (cg_dataset_split(ds, 0.25, 1, &train, &test) == CG_OK) {
        FUZZ_ASSERT(cg_dataset_rows(train) + cg_dataset_rows(test) == rows,
                    "the split loses rows");
        cg_dataset_free(train);
        cg_dataset_free(test);
    } else {
        fuzz_expect_error("cg_dataset_split");
    }
    mean = malloc(sizeof *mean * (size_t)f);
    inv_std = malloc(sizeof *inv_std * (size_t)f);
    FUZZ_ASSERT(mean && inv_std, "out of host memory");
    if (cg_dataset_feature_stats(ds, mean, inv_std) != CG_OK)
        fuzz_expect_error("cg_dataset_feature_stats");
    else if (cg_dataset_standardize(ds, mean, inv_std) != CG_OK)
        fuzz_expect_error("cg_dataset_standardize");
    free(mean);
    free(inv_std);
    check_batches(ds);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char delims[4] = { 0, ',', ';', '\t' };
    cg_csv_options o;
    cg_dataset *ds;
    unsigned opt;

    if (size < 1)
        return 0;
    opt = data[0];
    o.header = (int)(opt & 3) - 1;        /* -1 .. 2: one invalid */
    o.label_column = (int)(opt >> 2 & 7) - 4;
    o.delimiter = delims[opt >> 5 & 3];
    if (opt & 0x80)
        o.label_column = opt & 0x40 ? 1 << 30 : -(1 << 30);
    ds = cg_csv_load(fuzz_write("data.csv", data + 1, size - 1), &o);
    if (!ds) {
        fuzz_expect_error("cg_csv_load");
        return 0;
    }
    check_dataset(ds);
    cg_dataset_free(ds);
    return 0;
}
