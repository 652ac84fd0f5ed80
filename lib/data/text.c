/* SPDX-License-Identifier: MIT */
/*
 * lib/data/text.c - a text file as a sequence of byte ids for character
 * models, with its vocabulary, and batches for truncated backpropagation
 * through time: B parallel streams, each a contiguous slice of the text,
 * cut into windows of T steps, so that batch i + 1 continues each stream
 * where batch i stopped and the recurrent state can be carried over.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "core/internal.h"

struct cg_text {
    int64_t length;
    int32_t *ids;
    int vocab_size;
    unsigned char vocab[256];   /* id -> byte */
    int16_t index[256];         /* byte -> id, or -1 */
    char vocab_str[256 * 4 + 3];
};

static void
set_vocab(cg_text *t, const unsigned char *bytes, int n)
{
    size_t at = 0;
    int i;

    memset(t->index, 0xff, sizeof t->index);
    t->vocab_size = n;
    at += (size_t)snprintf(t->vocab_str, sizeof t->vocab_str, "[");
    for (i = 0; i < n; i++) {
        t->vocab[i] = bytes[i];
        t->index[bytes[i]] = (int16_t)i;
        at += (size_t)snprintf(t->vocab_str + at, sizeof t->vocab_str - at,
                               "%s%d", i ? "," : "", bytes[i]);
    }
    snprintf(t->vocab_str + at, sizeof t->vocab_str - at, "]");
}

/* Reads "[b0,b1,...]" (distinct integers 0..255, at least one). */
static int
parse_vocab(const char *s, unsigned char *bytes, int *n)
{
    json_object *arr = json_tokener_parse(s);
    char seen[256] = { 0 };
    size_t i, len;
    int rc = CG_OK;

    if (!arr || !json_object_is_type(arr, json_type_array) ||
        (len = json_object_array_length(arr)) < 1 || len > 256) {
        rc = cg__error(CG_EFORMAT, "vocabulary '%.64s' is not a JSON array "
                       "of 1 to 256 byte values", s);
        goto done;
    }
    for (i = 0; i < len; i++) {
        json_object *v = json_object_array_get_idx(arr, i);
        int64_t b = json_object_get_int64(v);

        if (!json_object_is_type(v, json_type_int) || b < 0 || b > 255 ||
            seen[b]) {
            rc = cg__error(CG_EFORMAT, "vocabulary entry %zu is not a new "
                           "byte value 0..255", i);
            goto done;
        }
        seen[b] = 1;
        bytes[i] = (unsigned char)b;
    }
    *n = (int)len;
done:
    json_object_put(arr);
    return rc;
}

static cg_text *
text_alloc(int64_t length)
{
    cg_text *t = cg__calloc(1, sizeof *t);

    if (t && !(t->ids = cg__malloc((size_t)length * sizeof *t->ids))) {
        free(t);
        t = NULL;
    }
    return t;
}

/* Encodes buf into t->ids; names the line of the first unknown byte. */
static int
encode_file(cg_text *t, const char *path, const unsigned char *buf,
            size_t len)
{
    long line = 1;
    size_t i;

    for (i = 0; i < len; i++) {
        int id = t->index[buf[i]];

        if (id < 0)
            return cg__error(CG_EFORMAT, "%s:%ld: byte 0x%02x ('%c') is not "
                             "in the vocabulary", path, line, buf[i],
                             buf[i] >= 0x20 && buf[i] < 0x7f ? buf[i] : '?');
        t->ids[i] = id;
        line += buf[i] == '\n';
    }
    return CG_OK;
}

cg_text *
cg_text_load(const char *path, const char *vocab)
{
    unsigned char bytes[256];
    char *buf;
    size_t len, i;
    cg_text *t = NULL;
    int n = 0, b;

    cg__error_clear();
    if (!path) {
        cg__error(CG_EINVAL, "path is NULL");
        return NULL;
    }
    if (vocab && parse_vocab(vocab, bytes, &n) != CG_OK)
        return NULL;
    if (!(buf = cg__read_file(path, &len)))
        return NULL;
    if (len == 0) {
        cg__error(CG_EFORMAT, "%s: the text is empty", path);
        goto done;
    }
    if (!vocab) {
        char present[256] = { 0 };

        for (i = 0; i < len; i++)
            present[(unsigned char)buf[i]] = 1;
        for (b = 0; b < 256; b++)
            if (present[b])
                bytes[n++] = (unsigned char)b;
    }
    if (!(t = text_alloc((int64_t)len)))
        goto done;
    t->length = (int64_t)len;
    set_vocab(t, bytes, n);
    if (encode_file(t, path, (const unsigned char *)buf, len) != CG_OK) {
        cg_text_free(t);
        t = NULL;
    }
done:
    free(buf);
    return t;
}

void
cg_text_free(cg_text *t)
{
    if (!t)
        return;
    free(t->ids);
    free(t);
}

int64_t
cg_text_length(const cg_text *t)
{
    return t ? t->length : -1;
}

int
cg_text_vocab_size(const cg_text *t)
{
    return t ? t->vocab_size : -1;
}

const int32_t *
cg_text_ids(const cg_text *t)
{
    return t ? t->ids : NULL;
}

const char *
cg_text_vocab(const cg_text *t)
{
    return t ? t->vocab_str : NULL;
}

int
cg_text_encode(const cg_text *t, const char *s, size_t n, int32_t *ids)
{
    size_t i;

    cg__error_clear();
    if (!t || (n > 0 && (!s || !ids)))
        return cg__error(CG_EINVAL, "NULL text, string or ids");
    for (i = 0; i < n; i++)
        if (t->index[(unsigned char)s[i]] < 0)
            return cg__error(CG_EINVAL, "byte %zu (0x%02x) is not in the "
                             "vocabulary", i, (unsigned char)s[i]);
    for (i = 0; i < n; i++)
        ids[i] = t->index[(unsigned char)s[i]];
    return CG_OK;
}

int
cg_text_decode(const cg_text *t, const int32_t *ids, size_t n, char *out)
{
    size_t i;

    cg__error_clear();
    if (!t || !out || (n > 0 && !ids))
        return cg__error(CG_EINVAL, "NULL text, ids or output");
    for (i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= t->vocab_size)
            return cg__error(CG_EINVAL, "id %d at %zu is outside the "
                             "vocabulary of %d", (int)ids[i], i,
                             t->vocab_size);
    for (i = 0; i < n; i++)
        out[i] = (char)t->vocab[ids[i]];
    out[n] = '\0';
    return CG_OK;
}

int
cg_text_split(const cg_text *t, double holdout, cg_text **train,
              cg_text **valid)
{
    int64_t nv;
    cg_text *a, *b;

    cg__error_clear();
    if (!t || !train || !valid)
        return cg__error(CG_EINVAL, "NULL text or output");
    /* llround of a NaN or an infinity has no value: range first. */
    nv = holdout > 0 && holdout < 1
         ? (int64_t)llround(holdout * (double)t->length) : 0;
    if (!(holdout > 0 && holdout < 1) || nv < 2 || t->length - nv < 2)
        return cg__error(CG_EINVAL, "a held-out fraction of %g of %lld "
                         "bytes leaves a part shorter than 2", holdout,
                         (long long)t->length);
    a = text_alloc(t->length - nv);
    b = a ? text_alloc(nv) : NULL;
    if (!b) {
        cg_text_free(a);
        return CG_EHOSTMEM;
    }
    a->length = t->length - nv;
    b->length = nv;
    memcpy(a->ids, t->ids, (size_t)a->length * sizeof *a->ids);
    memcpy(b->ids, t->ids + a->length, (size_t)nv * sizeof *b->ids);
    set_vocab(a, t->vocab, t->vocab_size);
    set_vocab(b, t->vocab, t->vocab_size);
    *train = a;
    *valid = b;
    return CG_OK;
}

/* Steps per stream: inputs use ids [0, length - 1), targets [1, length). */
static int64_t
stream_len(const cg_text *t, int batch)
{
    return (t->length - 1) / batch;
}

int64_t
cg_text_num_batches(const cg_text *t, int steps, int batch)
{
    if (!t || steps < 1 || batch < 1)
        return -1;
    return (stream_len(t, batch) + steps - 1) / steps;
}

int
cg_text_batch(const cg_text *t, cg_context *ctx, int steps, int batch,
              int64_t index, cg_tensor **inputs, cg_tensor **targets)
{
    int64_t s, first, n, shape[2], k, b;
    int32_t *in = NULL, *tg = NULL;
    int rc = CG_EHOSTMEM;

    cg__error_clear();
    if (!t || !ctx || !inputs || !targets || steps < 1 || batch < 1 ||
        index < 0)
        return cg__error(CG_EINVAL, "NULL argument, or steps %d, batch %d "
                         "or index %lld out of range", steps, batch,
                         (long long)index);
    *inputs = *targets = NULL;
    s = stream_len(t, batch);
    if (s < 1)
        return cg__error(CG_EINVAL, "a text of %lld bytes is too short for "
                         "%d streams", (long long)t->length, batch);
    /* Range first: index * steps overflows for an index near
     * INT64_MAX. */
    if (index >= cg_text_num_batches(t, steps, batch))
        return 0;
    first = index * steps;
    n = s - first < steps ? s - first : steps;
    in = cg__malloc((size_t)(n * batch) * sizeof *in);
    tg = cg__malloc((size_t)(n * batch) * sizeof *tg);
    if (!in || !tg)
        goto done;
    for (k = 0; k < n; k++)
        for (b = 0; b < batch; b++) {
            int64_t pos = b * s + first + k;

            in[k * batch + b] = t->ids[pos];
            tg[k * batch + b] = t->ids[pos + 1];
        }
    shape[0] = n;
    shape[1] = batch;
    *inputs = cg_tensor_from_host(ctx, CG_I32, 2, shape, in);
    *targets = *inputs ? cg_tensor_from_host(ctx, CG_I32, 2, shape, tg)
                       : NULL;
    if (!*targets) {
        rc = cg__last_status();
        cg_tensor_free(*inputs);
        *inputs = NULL;
        goto done;
    }
    rc = (int)n;
done:
    free(in);
    free(tg);
    return rc;
}
