/* SPDX-License-Identifier: MIT */
/*
 * lib/io/safetensors.c - checkpoints on disk in the safetensors format:
 *
 *   8 bytes    N, the header's length, unsigned little-endian
 *   N bytes    JSON: {"__metadata__": {"k": "v", ...},
 *                     "name": {"dtype": "F32", "shape": [2, 3],
 *                              "data_offsets": [begin, end]}, ...}
 *              padded with spaces so that the data starts 8-aligned
 *   the rest   the tensors' bytes, little-endian, row-major; offsets are
 *              relative to the start of this part, and the tensors' ranges
 *              tile it exactly
 *
 * Writing goes through cg__write_parts_atomic; reading checks every field
 * before anything is kept, so a bad file yields CG_EFORMAT and no object.
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "io/internal.h"
#include "tensor/internal.h"

/* The reference implementation's limit on the header (100 MB). */
#define HEADER_MAX 100000000ULL

static int
host_is_le(void)
{
    const uint32_t one = 1;

    return *(const unsigned char *)&one == 1;
}

/* ------------------------------------------------------------ writing */

static int
add_json(json_object *obj, const char *key, json_object *val)
{
    if (!val || json_object_object_add(obj, key, val) != 0) {
        json_object_put(val);
        return cg__error(CG_EHOSTMEM, "out of host memory for the header");
    }
    return CG_OK;
}

static json_object *
header_metadata(const cg_checkpoint *ck)
{
    json_object *meta = json_object_new_object();
    int i, has_format = 0;

    if (!meta)
        return NULL;
    for (i = 0; i < ck->nmeta; i++)
        has_format |= strcmp(ck->meta[i].key, "format") == 0;
    if (!has_format &&
        add_json(meta, "format", json_object_new_string("pt")) != CG_OK)
        goto fail;
    for (i = 0; i < ck->nmeta; i++)
        if (add_json(meta, ck->meta[i].key,
                     json_object_new_string(ck->meta[i].value)) != CG_OK)
            goto fail;
    return meta;
fail:
    json_object_put(meta);
    return NULL;
}

static json_object *
header_entry(const cg__ckpt_tensor *e, uint64_t begin)
{
    json_object *o = json_object_new_object(), *shape, *offs;
    int d;

    if (!o)
        return NULL;
    shape = json_object_new_array();
    offs = json_object_new_array();
    if (add_json(o, "dtype",
                 json_object_new_string(cg__ckpt_dtype_name(e->dtype))) ||
        add_json(o, "shape", shape) || add_json(o, "data_offsets", offs))
        goto fail;
    for (d = 0; d < e->ndim; d++)
        if (json_object_array_add(shape, json_object_new_int64(e->shape[d])))
            goto fail;
    if (json_object_array_add(offs, json_object_new_int64((int64_t)begin)) ||
        json_object_array_add(offs, json_object_new_int64(
                                        (int64_t)(begin + e->bytes))))
        goto fail;
    return o;
fail:
    json_object_put(o);
    return NULL;
}

/* The header's JSON text, padded with spaces to make 8 + its length a
 * multiple of 8; the caller frees it. */
static char *
header_text(const cg_checkpoint *ck, size_t *len)
{
    json_object *root = json_object_new_object();
    const char *text;
    uint64_t offset = 0;
    char *out = NULL;
    size_t n, padded;
    int i;

    if (!root || add_json(root, "__metadata__", header_metadata(ck)))
        goto done;
    for (i = 0; i < ck->ntensors; i++) {
        const cg__ckpt_tensor *e = &ck->tensors[i];

        if (add_json(root, e->name, header_entry(e, offset)))
            goto done;
        offset += e->bytes;
    }
    text = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN |
                                          JSON_C_TO_STRING_NOSLASHESCAPE);
    if (!text) {
        cg__error(CG_EHOSTMEM, "out of host memory for the header");
        goto done;
    }
    n = strlen(text);
    padded = (n + 7) / 8 * 8;
    if ((out = cg__malloc(padded)) != NULL) {
        memcpy(out, text, n);
        memset(out + n, ' ', padded - n);
        *len = padded;
    }
done:
    json_object_put(root);
    return out;
}

int
cg_checkpoint_save(const cg_checkpoint *ck, const char *path)
{
    const void **parts = NULL;
    size_t *lens = NULL;
    void **swapped = NULL;
    unsigned char lenbuf[8];
    char *header = NULL;
    size_t hlen = 0;
    int i, np = 2 + (ck ? ck->ntensors : 0), rc = CG_EHOSTMEM;

    cg__error_clear();
    if (!ck || !path || !*path)
        return cg__error(CG_EINVAL, "%s is NULL or empty", ck ? "path" :
                         "checkpoint");
    parts = cg__calloc((size_t)np, sizeof *parts);
    lens = cg__calloc((size_t)np, sizeof *lens);
    swapped = cg__calloc((size_t)np, sizeof *swapped);
    if (!parts || !lens || !swapped || !(header = header_text(ck, &hlen)))
        goto done;
    for (i = 0; i < 8; i++)
        lenbuf[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    parts[0] = lenbuf;
    lens[0] = 8;
    parts[1] = header;
    lens[1] = hlen;
    for (i = 0; i < ck->ntensors; i++) {
        const cg__ckpt_tensor *e = &ck->tensors[i];

        parts[2 + i] = e->data;
        lens[2 + i] = e->bytes;
        if (!host_is_le() && e->bytes > 0) {
            if (!(swapped[i] = cg__malloc(e->bytes)))
                goto done;
            cg__le_copy(swapped[i], e->data, e->bytes,
                        cg__ckpt_dtype_size(e->dtype));
            parts[2 + i] = swapped[i];
        }
    }
    rc = cg__write_parts_atomic(path, 0666, np, parts, lens);
done:
    for (i = 0; swapped && i < np; i++)
        free(swapped[i]);
    free(swapped);
    free(parts);
    free(lens);
    free(header);
    return rc;
}

/* ------------------------------------------------------------ reading */

/* One header entry as parsed, before its data is copied. */
typedef struct entry {
    const char *name;         /* points into the parsed JSON */
    int dtype, ndim;
    int64_t shape[CG_MAX_DIMS];
    uint64_t begin, end;
} entry;

/* A non-negative JSON integer, or -1. */
static int64_t
json_uint(json_object *o)
{
    int64_t v;

    if (!json_object_is_type(o, json_type_int))
        return -1;
    v = json_object_get_int64(o);
    return v < 0 || v == INT64_MAX ? -1 : v;
}

static int
parse_entry(const char *path, const char *name, json_object *val,
            uint64_t data_len, entry *e)
{
    json_object *dtype, *shape, *offs;
    uint64_t need;        /* bytes of the shape */
    size_t i, n;

    e->name = name;
    if (!json_object_is_type(val, json_type_object))
        return cg__error(CG_EFORMAT, "%s: tensor '%s': the entry is not a "
                         "JSON object", path, name);
    if (!json_object_object_get_ex(val, "dtype", &dtype) ||
        !json_object_object_get_ex(val, "shape", &shape) ||
        !json_object_object_get_ex(val, "data_offsets", &offs))
        return cg__error(CG_EFORMAT, "%s: tensor '%s': the entry needs "
                         "\"dtype\", \"shape\" and \"data_offsets\"", path,
                         name);
    if (json_object_object_length(val) != 3)
        return cg__error(CG_EFORMAT, "%s: tensor '%s': the entry has fields "
                         "other than dtype, shape and data_offsets", path,
                         name);
    if (!json_object_is_type(dtype, json_type_string))
        return cg__error(CG_EFORMAT, "%s: tensor '%s': dtype is not a "
                         "string", path, name);
    e->dtype = cg__ckpt_dtype_parse(json_object_get_string(dtype));
    if (e->dtype < 0)
        return cg__error(CG_EFORMAT, "%s: tensor '%s': dtype %.32s is not "
                         "supported (only F32, I32, I64, F16 and BF16)", path, name,
                         json_object_get_string(dtype));
    need = (uint64_t)cg__ckpt_dtype_size((cg_dtype)e->dtype);
    if (!json_object_is_type(shape, json_type_array) ||
        (n = json_object_array_length(shape)) > CG_MAX_DIMS)
        return cg__error(CG_EFORMAT, "%s: tensor '%s': shape is not an "
                         "array of at most %d sizes", path, name,
                         CG_MAX_DIMS);
    e->ndim = (int)n;
    for (i = 0; i < n; i++) {
        int64_t d = json_uint(json_object_array_get_idx(shape, i));

        if (d < 0)
            return cg__error(CG_EFORMAT, "%s: tensor '%s': shape[%zu] is "
                             "not a non-negative integer", path, name, i);
        e->shape[i] = d;
        /* Saturate at UINT64_MAX, which no byte range can match. */
        need = d > 0 && need > UINT64_MAX / (uint64_t)d ? UINT64_MAX
               : need * (uint64_t)d;
    }
    if (!json_object_is_type(offs, json_type_array) ||
        json_object_array_length(offs) != 2 ||
        json_uint(json_object_array_get_idx(offs, 0)) < 0 ||
        json_uint(json_object_array_get_idx(offs, 1)) < 0)
        return cg__error(CG_EFORMAT, "%s: tensor '%s': data_offsets is not "
                         "two non-negative integers", path, name);
    e->begin = (uint64_t)json_uint(json_object_array_get_idx(offs, 0));
    e->end = (uint64_t)json_uint(json_object_array_get_idx(offs, 1));
    if (e->end < e->begin)
        return cg__error(CG_EFORMAT, "%s: tensor '%s': data_offsets [%"
                         PRIu64 ", %" PRIu64 ") end before they begin",
                         path, name, e->begin, e->end);
    if (e->end > data_len)
        return cg__error(CG_EFORMAT, "%s: truncated: tensor '%s' needs data "
                         "up to byte %" PRIu64 " but the file holds %" PRIu64
                         " bytes of data", path, name, e->end, data_len);
    if (e->end - e->begin != need) {
        char s[160];

        cg__shape_str(e->ndim, e->shape, s, sizeof s);
        return cg__error(CG_EFORMAT, "%s: tensor '%s': shape %s of %s needs "
                         "%" PRIu64 " bytes but data_offsets [%" PRIu64 ", %"
                         PRIu64 ") hold %" PRIu64, path, name, s,
                         cg__ckpt_dtype_name((cg_dtype)e->dtype), need,
                         e->begin, e->end, e->end - e->begin);
    }
    return CG_OK;
}

static int
cmp_begin(const void *a, const void *b)
{
    const entry *x = *(const entry *const *)a, *y = *(const entry *const *)b;

    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* The ranges must tile [0, data_len) with no overlap and no gap. */
static int
check_tiling(const char *path, entry *entries, int n, uint64_t data_len)
{
    entry **order = cg__calloc((size_t)n, sizeof *order);
    uint64_t at = 0;
    const char *prev = NULL;
    int i, rc = CG_OK;

    if (!order)
        return CG_EHOSTMEM;
    for (i = 0; i < n; i++)
        order[i] = &entries[i];
    qsort(order, (size_t)n, sizeof *order, cmp_begin);
    for (i = 0; i < n && rc == CG_OK; i++) {
        if (order[i]->begin < at)
            rc = cg__error(CG_EFORMAT, "%s: the data of tensors '%s' and "
                           "'%s' overlap", path, prev, order[i]->name);
        else if (order[i]->begin > at)
            rc = cg__error(CG_EFORMAT, "%s: bytes %" PRIu64 " to %" PRIu64
                           " of the data belong to no tensor", path, at,
                           order[i]->begin);
        at = order[i]->end;
        prev = order[i]->name;
    }
    if (rc == CG_OK && at != data_len)
        rc = cg__error(CG_EFORMAT, "%s: bytes %" PRIu64 " to %" PRIu64
                       " of the data belong to no tensor", path, at,
                       data_len);
    free(order);
    return rc;
}

static int
parse_metadata(const char *path, json_object *val, cg_checkpoint *ck)
{
    if (json_object_is_type(val, json_type_null))
        return CG_OK;
    if (!json_object_is_type(val, json_type_object))
        return cg__error(CG_EFORMAT, "%s: __metadata__ is not a JSON "
                         "object", path);
    json_object_object_foreach(val, key, v) {
        int rc;

        if (!json_object_is_type(v, json_type_string))
            return cg__error(CG_EFORMAT, "%s: metadata '%s' is not a "
                             "string", path, key);
        if ((rc = cg__ckpt_put_meta(ck, key, json_object_get_string(v))))
            return rc;
    }
    return CG_OK;
}

/* Parses header [text, text + len) strictly: one JSON object, then only
 * whitespace.  NULL with CG_EFORMAT otherwise. */
static json_object *
parse_header(const char *path, const char *text, size_t len)
{
    json_tokener *tok = json_tokener_new();
    json_object *root;
    enum json_tokener_error err;
    size_t end;

    if (!tok) {
        cg__error(CG_EHOSTMEM, "out of host memory");
        return NULL;
    }
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT |
                           JSON_TOKENER_ALLOW_TRAILING_CHARS |
                           JSON_TOKENER_VALIDATE_UTF8);
    root = json_tokener_parse_ex(tok, text, (int)len);
    err = json_tokener_get_error(tok);
    end = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    if (!root || err != json_tokener_success) {
        cg__error(CG_EFORMAT, "%s: malformed JSON header at byte %zu: %s",
                  path, end, err == json_tokener_continue ?
                  "unexpected end" : json_tokener_error_desc(err));
        json_object_put(root);
        return NULL;
    }
    for (; end < len; end++)
        if (!strchr(" \t\r\n", text[end]) || text[end] == '\0') {
            cg__error(CG_EFORMAT, "%s: malformed JSON header: text after "
                      "the object at byte %zu", path, end);
            json_object_put(root);
            return NULL;
        }
    if (!json_object_is_type(root, json_type_object)) {
        cg__error(CG_EFORMAT, "%s: the JSON header is not an object", path);
        json_object_put(root);
        return NULL;
    }
    return root;
}

/* Copies every entry's data into ck, in header order. */
static int
keep_tensors(cg_checkpoint *ck, const entry *entries, int n,
             const unsigned char *data)
{
    int i, rc;

    for (i = 0; i < n; i++) {
        const entry *e = &entries[i];
        size_t bytes = (size_t)(e->end - e->begin);
        void *buf = cg__malloc(bytes);
        char *name = buf ? cg__strdup(e->name) : NULL;

        if (!name) {
            free(buf);
            return CG_EHOSTMEM;
        }
        cg__le_copy(buf, data + e->begin, bytes,
                    cg__ckpt_dtype_size((cg_dtype)e->dtype));
        rc = cg__ckpt_put(ck, name, (cg_dtype)e->dtype, e->ndim, e->shape,
                          buf, bytes);
        if (rc != CG_OK)
            return rc;
    }
    return CG_OK;
}

static int
parse_file(const char *path, const unsigned char *buf, size_t len,
           cg_checkpoint *ck)
{
    json_object *root = NULL;
    entry *entries = NULL;
    uint64_t hlen = 0, data_len;
    int i, n = 0, rc;

    if (len < 8)
        return cg__error(CG_EFORMAT, "%s: %zu bytes, too short for the "
                         "8-byte header length", path, len);
    for (i = 7; i >= 0; i--)
        hlen = hlen << 8 | buf[i];
    if (hlen > len - 8)
        return cg__error(CG_EFORMAT, "%s: the header length %" PRIu64
                         " runs past the end of the file (%zu bytes)", path,
                         hlen, len);
    if (hlen > HEADER_MAX)
        return cg__error(CG_EFORMAT, "%s: the header length %" PRIu64
                         " is over the limit of %llu", path, hlen,
                         HEADER_MAX);
    data_len = len - 8 - hlen;
    if (!(root = parse_header(path, (const char *)buf + 8, (size_t)hlen)))
        return cg__last_status();
    entries = cg__calloc((size_t)json_object_object_length(root),
                         sizeof *entries);
    rc = entries ? CG_OK : CG_EHOSTMEM;
    json_object_object_foreach(root, key, val) {
        if (rc != CG_OK)
            break;
        if (strcmp(key, "__metadata__") == 0)
            rc = parse_metadata(path, val, ck);
        else if (*key == '\0')
            rc = cg__error(CG_EFORMAT, "%s: a tensor has an empty name",
                           path);
        else
            rc = parse_entry(path, key, val, data_len, &entries[n++]);
    }
    if (rc == CG_OK)
        rc = check_tiling(path, entries, n, data_len);
    if (rc == CG_OK)
        rc = keep_tensors(ck, entries, n, buf + 8 + hlen);
    free(entries);
    json_object_put(root);
    return rc;
}

cg_checkpoint *
cg_checkpoint_load(const char *path)
{
    cg_checkpoint *ck;
    char *buf;
    size_t len;

    cg__error_clear();
    if (!path) {
        cg__error(CG_EINVAL, "path is NULL");
        return NULL;
    }
    if (!(buf = cg__read_file(path, &len)))
        return NULL;
    ck = cg_checkpoint_new();
    if (ck && parse_file(path, (const unsigned char *)buf, len, ck)) {
        cg_checkpoint_free(ck);
        ck = NULL;
    }
    free(buf);
    return ck;
}
