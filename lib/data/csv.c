/* SPDX-License-Identifier: MIT */
/*
 * lib/data/csv.c - a table of numeric features and an integer class label
 * read from a CSV file, a seeded held-out split, and shuffled mini-batches
 * as device tensors.  Shuffles are Fisher-Yates driven by SplitMix64, so an
 * order depends only on (seed, epoch) and a resumed run sees the same
 * batches.
 */
#include "config.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

struct cg_dataset {
    int64_t rows;
    int features;
    int classes;          /* largest label + 1 */
    float *x;             /* [rows, features] */
    int32_t *y;           /* [rows] */
    int64_t *perm;        /* the order of (perm_seed, perm_epoch) */
    uint64_t perm_seed;
    int64_t perm_epoch;
};

/* ------------------------------------------------------------ shuffling */

/* A uniform integer in [0, n), without modulo bias. */
static uint64_t
below(uint64_t *state, uint64_t n)
{
    uint64_t limit = UINT64_MAX - UINT64_MAX % n, r;

    do
        r = cg_splitmix64_next(state);
    while (r >= limit);
    return r % n;
}

/* perm = a random permutation of 0..n-1 for stream (seed, stream). */
static void
shuffle(int64_t *perm, int64_t n, uint64_t seed, uint64_t stream)
{
    uint64_t state = seed;
    int64_t i;

    state = cg_splitmix64_next(&state) ^
            (stream * 0xd1b54a32d192ed03ULL);
    for (i = 0; i < n; i++)
        perm[i] = i;
    for (i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)below(&state, (uint64_t)i + 1), t = perm[i];

        perm[i] = perm[j];
        perm[j] = t;
    }
}

/* ------------------------------------------------------------ parsing */

typedef struct csv_parse {
    const char *path;
    char delim;
    int label_col;        /* resolved, 0-based */
    int ncols;
    int64_t rows, cap;
    float *x;
    int32_t *y;
} csv_parse;

/* Splits line (modified in place) into at most max fields; returns the
 * count, which may exceed max (the extra fields are not stored). */
static int
split_fields(char *line, char delim, char **fields, int max)
{
    int n = 0;
    char *p = line;

    for (;;) {
        char *d = strchr(p, delim);

        if (n < max)
            fields[n] = p;
        n++;
        if (!d)
            return n;
        *d = '\0';
        p = d + 1;
    }
}

/* The field as a finite number; -1 if it is not one. */
static int
parse_number(char *field, double *v)
{
    char *end;
    size_t n;

    while (*field == ' ' || *field == '\t')
        field++;
    n = strlen(field);
    while (n > 0 && (field[n - 1] == ' ' || field[n - 1] == '\t'))
        field[--n] = '\0';
    if (n == 0)
        return -1;
    errno = 0;
    *v = strtod(field, &end);
    return *end || errno == ERANGE || !isfinite(*v) ? -1 : 0;
}

static int
all_numbers(char **fields, int n)
{
    double v;
    int i;

    for (i = 0; i < n; i++)
        if (parse_number(fields[i], &v) != 0)
            return 0;
    return 1;
}

static int
store_row(csv_parse *p, char **fields, int nf, long lineno)
{
    float *xr;
    int i, f = 0;

    if (nf != p->ncols)
        return cg__error(CG_EFORMAT, "%s:%ld: %d fields, expected %d (as "
                         "in the first row)", p->path, lineno, nf, p->ncols);
    xr = p->x + p->rows * (p->ncols - 1);
    for (i = 0; i < nf; i++) {
        double v;

        if (parse_number(fields[i], &v) != 0)
            return cg__error(CG_EFORMAT, "%s:%ld: field %d ('%.32s') is not "
                             "a finite number", p->path, lineno, i + 1,
                             fields[i]);
        if (i != p->label_col) {
            /* Finite as a double but not as a float: 1e39 would be +inf. */
            if (fabs(v) > FLT_MAX)
                return cg__error(CG_EFORMAT, "%s:%ld: field %d ('%.32s') is "
                                 "outside float32's range", p->path, lineno,
                                 i + 1, fields[i]);
            xr[f++] = (float)v;
        } else if (v < 0 || v > INT32_MAX - 1 || v != floor(v)) {
            /* At most INT32_MAX - 1: the class count, the largest label
             * + 1, is an int too. */
            return cg__error(CG_EFORMAT, "%s:%ld: label %.32s (field %d) is "
                             "not a class index (an integer from 0 to %d)",
                             p->path, lineno, fields[i], i + 1,
                             INT32_MAX - 1);
        } else {
            p->y[p->rows] = (int32_t)v;
        }
    }
    p->rows++;
    return CG_OK;
}

/* Sizes the table from the first row. */
static int
first_row(csv_parse *p, int nf, int label_column, long lineno)
{
    int64_t cells;
    size_t bytes;

    if (nf < 2)
        return cg__error(CG_EFORMAT, "%s:%ld: %d field; a row needs at "
                         "least one feature and a label", p->path, lineno,
                         nf);
    p->label_col = label_column < 0 ? nf + label_column : label_column;
    if (p->label_col < 0 || p->label_col >= nf)
        return cg__error(CG_EINVAL, "%s: label column %d is outside the %d "
                         "columns", p->path, label_column, nf);
    p->ncols = nf;
    if (cg__checked_mul_i64(p->cap, nf - 1, &cells, "CSV table: rows "
                            "* features") ||
        cg__checked_mul_size((size_t)cells, sizeof *p->x, &bytes,
                             "CSV table: bytes of features"))
        return CG_ESHAPE;
    p->x = cg__malloc(bytes);
    p->y = cg__malloc((size_t)p->cap * sizeof *p->y);
    return p->x && p->y ? CG_OK : CG_EHOSTMEM;
}

static int
parse_text(csv_parse *p, char *text, size_t len, int header,
           int label_column)
{
    char **fields = NULL;
    char *line = text;
    long lineno = 0;
    int maxf = 0, rc = CG_OK, seen = 0;
    size_t i;

    for (i = 0; i < len; i++)
        p->cap += text[i] == '\n';
    p->cap++;
    while (line && rc == CG_OK) {
        char *nl = strchr(line, '\n'), *next = nl ? nl + 1 : NULL;
        size_t n;
        int nf;

        lineno++;
        if (nl)
            *nl = '\0';
        n = strlen(line);
        if (n > 0 && line[n - 1] == '\r')
            line[--n] = '\0';
        if (strspn(line, " \t") == n) {          /* blank */
            line = next;
            continue;
        }
        if (!fields) {
            char *copy = cg__strdup(line);

            if (!copy)
                return CG_EHOSTMEM;
            maxf = split_fields(copy, p->delim, NULL, 0);
            free(copy);
            if (!(fields = cg__calloc((size_t)maxf, sizeof *fields)))
                return CG_EHOSTMEM;
        }
        nf = split_fields(line, p->delim, fields, maxf);
        if (!seen++) {
            rc = first_row(p, nf, label_column, lineno);
            if (rc == CG_OK && (header == CG_CSV_HEADER_PRESENT ||
                                (header == CG_CSV_HEADER_DETECT &&
                                 !all_numbers(fields, nf)))) {
                line = next;
                continue;
            }
        }
        if (rc == CG_OK)
            rc = store_row(p, fields, nf, lineno);
        line = next;
    }
    free(fields);
    if (rc == CG_OK && p->rows == 0)
        rc = cg__error(CG_EFORMAT, "%s: no data rows", p->path);
    return rc;
}

/* ------------------------------------------------------------ datasets */

static cg_dataset *
dataset_alloc(int64_t rows, int features)
{
    cg_dataset *ds = cg__calloc(1, sizeof *ds);

    if (!ds)
        return NULL;
    ds->rows = rows;
    ds->features = features;
    ds->x = cg__malloc((size_t)(rows * features) * sizeof *ds->x);
    ds->y = cg__malloc((size_t)rows * sizeof *ds->y);
    if (!ds->x || !ds->y) {
        cg_dataset_free(ds);
        return NULL;
    }
    return ds;
}

cg_dataset *
cg_csv_load(const char *path, const cg_csv_options *opts)
{
    cg_csv_options o = { -1, CG_CSV_HEADER_DETECT, ',' };
    csv_parse p;
    cg_dataset *ds = NULL;
    char *text;
    size_t len;
    int64_t i;

    cg__error_clear();
    if (opts)
        o = *opts;
    if (!o.delimiter)
        o.delimiter = ',';
    if (!path || o.header < CG_CSV_HEADER_DETECT ||
        o.header > CG_CSV_HEADER_PRESENT || o.delimiter == '\n' ||
        o.delimiter == '\r') {
        cg__error(CG_EINVAL, "NULL path or bad CSV options");
        return NULL;
    }
    if (!(text = cg__read_file(path, &len)))
        return NULL;
    memset(&p, 0, sizeof p);
    p.path = path;
    p.delim = o.delimiter;
    if (memchr(text, '\0', len)) {
        cg__error(CG_EFORMAT, "%s: a NUL byte: not a text file", path);
        goto done;
    }
    if (parse_text(&p, text, len, o.header, o.label_column) != CG_OK)
        goto done;
    if (!(ds = cg__calloc(1, sizeof *ds)))
        goto done;
    ds->rows = p.rows;
    ds->features = p.ncols - 1;
    ds->x = p.x;
    ds->y = p.y;
    p.x = NULL;
    p.y = NULL;
    for (i = 0; i < ds->rows; i++)
        if (ds->y[i] >= ds->classes)
            ds->classes = ds->y[i] + 1;
done:
    free(p.x);
    free(p.y);
    free(text);
    return ds;
}

void
cg_dataset_free(cg_dataset *ds)
{
    if (!ds)
        return;
    free(ds->x);
    free(ds->y);
    free(ds->perm);
    free(ds);
}

int64_t
cg_dataset_rows(const cg_dataset *ds)
{
    return ds ? ds->rows : -1;
}

int
cg_dataset_features(const cg_dataset *ds)
{
    return ds ? ds->features : -1;
}

/* ------------------------------------------------------------ scaling */

int
cg_dataset_feature_stats(const cg_dataset *ds, float *mean, float *inv_std)
{
    int64_t i, rows;
    int j, F;

    cg__error_clear();
    if (!ds || !mean || !inv_std)
        return cg__error(CG_EINVAL, "feature_stats: %s is NULL",
                         !ds ? "ds" : !mean ? "mean" : "inv_std");
    rows = ds->rows;
    F = ds->features;
    for (j = 0; j < F; j++) {
        double s = 0, ss = 0;

        for (i = 0; i < rows; i++)
            s += ds->x[i * F + j];
        s /= (double)rows;
        for (i = 0; i < rows; i++) {
            double d = ds->x[i * F + j] - s;

            ss += d * d;
        }
        ss = sqrt(ss / (double)rows);
        mean[j] = (float)s;
        inv_std[j] = (float)(ss > 1e-8 ? 1 / ss : 1);
    }
    return CG_OK;
}

int
cg_dataset_standardize(cg_dataset *ds, const float *mean,
                       const float *inv_std)
{
    int64_t i, n;
    int j;

    cg__error_clear();
    if (!ds || !mean || !inv_std)
        return cg__error(CG_EINVAL, "standardize: %s is NULL",
                         !ds ? "ds" : !mean ? "mean" : "inv_std");
    for (j = 0; j < ds->features; j++)
        if (!isfinite(mean[j]) || !isfinite(inv_std[j]))
            return cg__error(CG_EINVAL, "standardize: feature %d: mean %g, "
                             "inv_std %g must be finite", j, (double)mean[j],
                             (double)inv_std[j]);
    n = ds->rows * ds->features;
    for (i = 0; i < n; i++) {
        /* Rounded after each operation, as cg_sub then cg_mul would. */
        float d = ds->x[i] - mean[i % ds->features];

        ds->x[i] = d * inv_std[i % ds->features];
    }
    return CG_OK;
}

int
cg_dataset_classes(const cg_dataset *ds)
{
    return ds ? ds->classes : -1;
}

const float *
cg_dataset_feature_data(const cg_dataset *ds)
{
    return ds ? ds->x : NULL;
}

const int32_t *
cg_dataset_label_data(const cg_dataset *ds)
{
    return ds ? ds->y : NULL;
}

/* A new dataset of ds's rows where pick[row] == want, in ds's order. */
static cg_dataset *
subset(const cg_dataset *ds, const char *pick, char want, int64_t rows)
{
    cg_dataset *s = dataset_alloc(rows, ds->features);
    int64_t i, k = 0;

    if (!s)
        return NULL;
    s->classes = ds->classes;
    for (i = 0; i < ds->rows; i++) {
        if (pick[i] != want)
            continue;
        memcpy(s->x + k * ds->features, ds->x + i * ds->features,
               (size_t)ds->features * sizeof *s->x);
        s->y[k++] = ds->y[i];
    }
    return s;
}

int
cg_dataset_split(const cg_dataset *ds, double holdout, uint64_t seed,
                 cg_dataset **train, cg_dataset **test)
{
    int64_t *perm = NULL, ntest, i;
    char *pick = NULL;
    cg_dataset *a = NULL, *b = NULL;
    int rc = CG_EHOSTMEM;

    cg__error_clear();
    if (!ds || !train || !test)
        return cg__error(CG_EINVAL, "NULL dataset or output");
    ntest = holdout > 0 && holdout < 1      /* llround(NaN) has no value */
            ? (int64_t)llround(holdout * (double)ds->rows) : 0;
    if (!(holdout > 0 && holdout < 1) || ntest < 1 || ntest >= ds->rows)
        return cg__error(CG_EINVAL, "a held-out fraction of %g of %lld "
                         "rows leaves a part empty", holdout,
                         (long long)ds->rows);
    perm = cg__malloc((size_t)ds->rows * sizeof *perm);
    pick = cg__calloc((size_t)ds->rows, 1);
    if (!perm || !pick)
        goto done;
    shuffle(perm, ds->rows, seed, UINT64_MAX);
    for (i = 0; i < ntest; i++)
        pick[perm[i]] = 1;
    a = subset(ds, pick, 0, ds->rows - ntest);
    b = a ? subset(ds, pick, 1, ntest) : NULL;
    if (!b) {
        cg_dataset_free(a);
        goto done;
    }
    *train = a;
    *test = b;
    rc = CG_OK;
done:
    free(perm);
    free(pick);
    return rc;
}

int64_t
cg_dataset_num_batches(const cg_dataset *ds, int batch_size)
{
    if (!ds || batch_size < 1)
        return -1;
    return (ds->rows + batch_size - 1) / batch_size;
}

static int
ensure_perm(cg_dataset *ds, uint64_t seed, int64_t epoch)
{
    if (ds->perm && ds->perm_seed == seed && ds->perm_epoch == epoch)
        return CG_OK;
    if (!ds->perm &&
        !(ds->perm = cg__malloc((size_t)ds->rows * sizeof *ds->perm)))
        return CG_EHOSTMEM;
    shuffle(ds->perm, ds->rows, seed, (uint64_t)epoch);
    ds->perm_seed = seed;
    ds->perm_epoch = epoch;
    return CG_OK;
}

int
cg_dataset_batch(cg_dataset *ds, cg_context *ctx, int batch_size,
                 int shuffled, uint64_t seed, int64_t epoch, int64_t index,
                 cg_tensor **x, cg_tensor **y)
{
    int64_t first, rows, i, shape[2];
    float *hx = NULL;
    int32_t *hy = NULL;
    int rc = CG_EHOSTMEM;

    cg__error_clear();
    if (!ds || !ctx || !x || !y || batch_size < 1 || epoch < 0 || index < 0)
        return cg__error(CG_EINVAL, "NULL argument, batch size %d < 1, or "
                         "negative epoch or index", batch_size);
    *x = *y = NULL;
    /* Range first: index * batch_size overflows for an index near
     * INT64_MAX. */
    if (index >= cg_dataset_num_batches(ds, batch_size))
        return 0;
    first = index * batch_size;
    rows = ds->rows - first < batch_size ? ds->rows - first : batch_size;
    if (shuffled && ensure_perm(ds, seed, epoch) != CG_OK)
        return CG_EHOSTMEM;
    hx = cg__malloc((size_t)(rows * ds->features) * sizeof *hx);
    hy = cg__malloc((size_t)rows * sizeof *hy);
    if (!hx || !hy)
        goto done;
    for (i = 0; i < rows; i++) {
        int64_t r = shuffled ? ds->perm[first + i] : first + i;

        memcpy(hx + i * ds->features, ds->x + r * ds->features,
               (size_t)ds->features * sizeof *hx);
        hy[i] = ds->y[r];
    }
    shape[0] = rows;
    shape[1] = ds->features;
    *x = cg_tensor_from_host(ctx, CG_F32, 2, shape, hx);
    *y = *x ? cg_tensor_from_host(ctx, CG_I32, 1, shape, hy) : NULL;
    if (!*y) {
        rc = cg__last_status();
        cg_tensor_free(*x);
        *x = NULL;
        goto done;
    }
    rc = (int)rows;
done:
    free(hx);
    free(hy);
    return rc;
}
