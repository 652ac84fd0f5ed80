/* SPDX-License-Identifier: MIT */
/*
 * lib/io/checkpoint.c - the checkpoint object: host copies of named tensors
 * and string metadata, queried by name, and restored into device tensors
 * all-or-nothing.  The file format is in safetensors.c.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/internal.h"
#include "nn/internal.h"
#include "tensor/internal.h"

#define META_SEED "clgrad.generator.seed"
#define META_OFFSET "clgrad.generator.offset"

const char *
cg__ckpt_dtype_name(cg_dtype dtype)
{
    switch (dtype) {
    case CG_I64:
        return "I64";
    case CG_I32:
        return "I32";
    case CG_F16:
        return "F16";
    case CG_BF16:
        return "BF16";
    default:
        return "F32";
    }
}

int
cg__ckpt_dtype_parse(const char *s)
{
    if (strcmp(s, "F32") == 0)
        return CG_F32;
    if (strcmp(s, "I32") == 0)
        return CG_I32;
    if (strcmp(s, "I64") == 0)
        return CG_I64;
    if (strcmp(s, "F16") == 0)
        return CG_F16;
    if (strcmp(s, "BF16") == 0)
        return CG_BF16;
    return -1;
}

int
cg__ckpt_dtype_size(cg_dtype dtype)
{
    return dtype == CG_I64 ? 8 : dtype == CG_F16 || dtype == CG_BF16 ? 2 : 4;
}

void
cg__le_copy(void *dst, const void *src, size_t bytes, int size)
{
    const uint32_t one = 1;

    if (*(const unsigned char *)&one == 1) {
        memcpy(dst, src, bytes);
    } else {
        const unsigned char *s = src;
        unsigned char *d = dst;
        size_t i;
        int k;

        for (i = 0; i + (size_t)size <= bytes; i += (size_t)size)
            for (k = 0; k < size; k++)
                d[i + (size_t)k] = s[i + (size_t)(size - 1 - k)];
    }
}

int
cg__utf8_valid(const char *str, size_t len)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;

    while (i < len) {
        unsigned c = s[i], need, min, cp, k;

        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf)
            need = 1, min = 0x80, cp = c & 0x1f;
        else if (c >= 0xe0 && c <= 0xef)
            need = 2, min = 0x800, cp = c & 0x0f;
        else if (c >= 0xf0 && c <= 0xf4)
            need = 3, min = 0x10000, cp = c & 0x07;
        else
            return 0;
        if (len - i <= need)
            return 0;
        for (k = 1; k <= need; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return 0;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += need + 1;
    }
    return 1;
}

static int
check_name(const char *what, const char *name)
{
    size_t n;

    if (!name)
        return cg__error(CG_EINVAL, "%s is NULL", what);
    n = strlen(name);
    if (n == 0 || n > CG__CKPT_NAME_MAX)
        return cg__error(CG_EINVAL, "%s '%.64s' must be 1 to %d bytes long",
                         what, name, CG__CKPT_NAME_MAX);
    if (!cg__utf8_valid(name, n))
        return cg__error(CG_EINVAL, "%s '%.64s' is not valid UTF-8", what,
                         name);
    if (strcmp(name, "__metadata__") == 0)
        return cg__error(CG_EINVAL, "%s '__metadata__' is reserved by the "
                         "safetensors format", what);
    return CG_OK;
}

cg_checkpoint *
cg_checkpoint_new(void)
{
    cg__error_clear();
    return cg__calloc(1, sizeof(cg_checkpoint));
}

void
cg_checkpoint_free(cg_checkpoint *ck)
{
    int i;

    if (!ck)
        return;
    for (i = 0; i < ck->ntensors; i++) {
        free(ck->tensors[i].name);
        free(ck->tensors[i].data);
    }
    for (i = 0; i < ck->nmeta; i++) {
        free(ck->meta[i].key);
        free(ck->meta[i].value);
    }
    free(ck->tensors);
    free(ck->meta);
    free(ck);
}

int
cg__ckpt_find(const cg_checkpoint *ck, const char *name)
{
    int i;

    for (i = 0; i < ck->ntensors; i++)
        if (strcmp(ck->tensors[i].name, name) == 0)
            return i;
    return -1;
}

static int
find_meta(const cg_checkpoint *ck, const char *key)
{
    int i;

    for (i = 0; i < ck->nmeta; i++)
        if (strcmp(ck->meta[i].key, key) == 0)
            return i;
    return -1;
}

int
cg__ckpt_put(cg_checkpoint *ck, char *name, cg_dtype dtype, int ndim,
             const int64_t *shape, void *data, size_t bytes)
{
    int i = cg__ckpt_find(ck, name);
    cg__ckpt_tensor *e;

    if (i < 0 && ck->ntensors == ck->tensors_cap) {
        int cap = ck->tensors_cap ? 2 * ck->tensors_cap : 16;
        void *p = realloc(ck->tensors, (size_t)cap * sizeof *ck->tensors);

        if (!p) {
            free(name);
            free(data);
            return cg__error(CG_EHOSTMEM, "out of host memory");
        }
        ck->tensors = p;
        ck->tensors_cap = cap;
    }
    if (i < 0) {
        i = ck->ntensors++;
    } else {
        free(ck->tensors[i].name);
        free(ck->tensors[i].data);
    }
    e = &ck->tensors[i];
    e->name = name;
    e->dtype = dtype;
    e->ndim = ndim;
    if (ndim > 0)
        memcpy(e->shape, shape, (size_t)ndim * sizeof *shape);
    e->data = data;
    e->bytes = bytes;
    return CG_OK;
}

int
cg__ckpt_put_meta(cg_checkpoint *ck, const char *key, const char *value)
{
    int i = find_meta(ck, key);
    char *k = NULL, *v = cg__strdup(value);

    if (!v)
        return CG_EHOSTMEM;
    if (i >= 0) {
        free(ck->meta[i].value);
        ck->meta[i].value = v;
        return CG_OK;
    }
    if (ck->nmeta == ck->meta_cap) {
        int cap = ck->meta_cap ? 2 * ck->meta_cap : 8;
        void *p = realloc(ck->meta, (size_t)cap * sizeof *ck->meta);

        if (!p)
            goto nomem;
        ck->meta = p;
        ck->meta_cap = cap;
    }
    k = cg__strdup(key);
    if (!k)
        goto nomem;
    ck->meta[ck->nmeta].key = k;
    ck->meta[ck->nmeta].value = v;
    ck->nmeta++;
    return CG_OK;
nomem:
    free(v);
    return cg__error(CG_EHOSTMEM, "out of host memory");
}

/* numel * size, or -1 if a dimension is negative or the size overflows. */
static int64_t
shape_bytes(int ndim, const int64_t *shape, int size)
{
    int64_t n = size;
    int d;

    for (d = 0; d < ndim; d++) {
        if (shape[d] < 0 || (shape[d] > 0 && n > INT64_MAX / shape[d]))
            return -1;
        n *= shape[d];
    }
    return n;
}

int
cg_checkpoint_add_host(cg_checkpoint *ck, const char *name, cg_dtype dtype,
                       int ndim, const int64_t *shape, const void *data)
{
    int64_t bytes;
    char *copy;
    void *buf;
    int rc;

    cg__error_clear();
    if (!ck)
        return cg__error(CG_EINVAL, "checkpoint is NULL");
    if ((rc = check_name("tensor name", name)) != CG_OK)
        return rc;
    if (dtype != CG_F32 && dtype != CG_I32 && dtype != CG_I64 &&
        dtype != CG_F16 && dtype != CG_BF16)
        return cg__error(CG_EDTYPE, "tensor '%s': unknown dtype %d", name,
                         (int)dtype);
    if (ndim < 0 || ndim > CG_MAX_DIMS || (ndim > 0 && !shape))
        return cg__error(CG_EINVAL, "tensor '%s': bad ndim %d or NULL "
                         "shape", name, ndim);
    bytes = shape_bytes(ndim, shape, cg__ckpt_dtype_size(dtype));
    if (bytes < 0 || (uint64_t)bytes > SIZE_MAX)
        return cg__error(CG_ESHAPE, "tensor '%s': negative or too large "
                         "shape", name);
    if (bytes > 0 && !data)
        return cg__error(CG_EINVAL, "tensor '%s': data is NULL", name);
    buf = cg__malloc((size_t)bytes);
    copy = buf ? cg__strdup(name) : NULL;
    if (!copy) {
        free(buf);
        return CG_EHOSTMEM;
    }
    if (bytes > 0)
        memcpy(buf, data, (size_t)bytes);
    return cg__ckpt_put(ck, copy, dtype, ndim, shape, buf, (size_t)bytes);
}

int
cg_checkpoint_add_tensor(cg_checkpoint *ck, const char *name,
                         const cg_tensor *t)
{
    int64_t shape[CG_MAX_DIMS];
    size_t bytes;
    char *copy;
    void *buf;
    int ndim, rc;

    cg__error_clear();
    if (!ck || !t)
        return cg__error(CG_EINVAL, "%s is NULL", ck ? "tensor" :
                         "checkpoint");
    if ((rc = check_name("tensor name", name)) != CG_OK)
        return rc;
    ndim = cg_tensor_ndim(t);
    cg_tensor_shape(t, shape);
    bytes = (size_t)cg_tensor_numel(t) *
            (size_t)cg__ckpt_dtype_size(cg_tensor_dtype(t));
    buf = cg__malloc(bytes);
    if (!buf)
        return CG_EHOSTMEM;
    if ((rc = cg_tensor_to_host(t, buf, bytes)) != CG_OK) {
        free(buf);
        return rc;
    }
    copy = cg__strdup(name);
    if (!copy) {
        free(buf);
        return CG_EHOSTMEM;
    }
    return cg__ckpt_put(ck, copy, cg_tensor_dtype(t), ndim, shape, buf,
                        bytes);
}

/* prefix + name in a new string, checked as a tensor name. */
static char *
prefixed(const char *prefix, const char *name)
{
    size_t a = prefix ? strlen(prefix) : 0, b = strlen(name);
    char *s = cg__malloc(a + b + 1);

    if (!s)
        return NULL;
    memcpy(s, prefix ? prefix : "", a);
    memcpy(s + a, name, b + 1);
    if (check_name("tensor name", s) != CG_OK) {
        free(s);
        return NULL;
    }
    return s;
}

int
cg__ckpt_merge(cg_checkpoint *ck, cg_checkpoint *tmp)
{
    int i, rc = CG_OK;

    if (ck->tensors_cap < ck->ntensors + tmp->ntensors) {
        int cap = ck->ntensors + tmp->ntensors;
        void *p = realloc(ck->tensors, (size_t)cap * sizeof *ck->tensors);

        if (!p)
            return cg__error(CG_EHOSTMEM, "out of host memory");
        ck->tensors = p;
        ck->tensors_cap = cap;
    }
    if (ck->meta_cap < ck->nmeta + tmp->nmeta) {
        int cap = ck->nmeta + tmp->nmeta;
        void *p = realloc(ck->meta, (size_t)cap * sizeof *ck->meta);

        if (!p)
            return cg__error(CG_EHOSTMEM, "out of host memory");
        ck->meta = p;
        ck->meta_cap = cap;
    }
    /* With the room reserved, moving the entries over cannot fail. */
    for (i = 0; i < tmp->ntensors && rc == CG_OK; i++) {
        cg__ckpt_tensor *e = &tmp->tensors[i];

        rc = cg__ckpt_put(ck, e->name, e->dtype, e->ndim, e->shape, e->data,
                          e->bytes);
        e->name = NULL;
        e->data = NULL;
    }
    for (i = 0; i < tmp->nmeta && rc == CG_OK; i++)
        rc = cg__ckpt_put_meta(ck, tmp->meta[i].key, tmp->meta[i].value);
    return rc;
}

/* A buffer into the checkpoint `user`: a tensor, or a count as I64 of
 * shape []. */
static int
add_buffer(void *user, const char *name, cg_tensor *t, int64_t *count)
{
    if (t)
        return cg_checkpoint_add_tensor(user, name, t);
    return cg_checkpoint_add_host(user, name, CG_I64, 0, NULL, count);
}

int
cg_checkpoint_add_module(cg_checkpoint *ck, const char *prefix,
                         const cg_module *m)
{
    cg_checkpoint *tmp;
    int i, n, rc = CG_OK;

    cg__error_clear();
    if (!ck || !m)
        return cg__error(CG_EINVAL, "%s is NULL", ck ? "layer" :
                         "checkpoint");
    /* Gather into a scratch checkpoint first, so that a failure adds
     * nothing to ck. */
    if (!(tmp = cg_checkpoint_new()))
        return CG_EHOSTMEM;
    n = cg_module_num_params(m);
    for (i = 0; i < n && rc == CG_OK; i++) {
        const char *pname;
        cg_tensor *p = cg_module_param(m, i, &pname);
        char *full = prefixed(prefix, pname);

        rc = full ? cg_checkpoint_add_tensor(tmp, full, p)
                  : cg__last_status();
        free(full);
    }
    if (rc == CG_OK)
        rc = cg__module_visit_buffers(m, prefix, add_buffer, tmp);
    if (rc == CG_OK)
        rc = cg__ckpt_merge(ck, tmp);
    cg_checkpoint_free(tmp);
    return rc;
}

int
cg_checkpoint_set_meta(cg_checkpoint *ck, const char *key, const char *value)
{
    int rc;

    cg__error_clear();
    if (!ck || !value)
        return cg__error(CG_EINVAL, "%s is NULL", ck ? "value" :
                         "checkpoint");
    if ((rc = check_name("metadata key", key)) != CG_OK)
        return rc;
    if (!cg__utf8_valid(value, strlen(value)))
        return cg__error(CG_EINVAL, "metadata '%s': the value is not valid "
                         "UTF-8", key);
    return cg__ckpt_put_meta(ck, key, value);
}

int
cg_checkpoint_set_meta_int(cg_checkpoint *ck, const char *key, int64_t value)
{
    char buf[32];

    snprintf(buf, sizeof buf, "%" PRId64, value);
    return cg_checkpoint_set_meta(ck, key, buf);
}

int
cg_checkpoint_set_meta_double(cg_checkpoint *ck, const char *key,
                              double value)
{
    char buf[40];

    snprintf(buf, sizeof buf, "%.17g", value);
    return cg_checkpoint_set_meta(ck, key, buf);
}

int
cg_checkpoint_add_generator(cg_checkpoint *ck, const cg_context *ctx)
{
    uint64_t seed, offset;
    char s[24], o[24];
    int rc;

    cg__error_clear();
    if (!ck || !ctx)
        return cg__error(CG_EINVAL, "%s is NULL", ck ? "context" :
                         "checkpoint");
    if ((rc = cg_generator_state(ctx, &seed, &offset)) != CG_OK)
        return rc;
    snprintf(s, sizeof s, "%" PRIu64, seed);
    snprintf(o, sizeof o, "%" PRIu64, offset);
    if ((rc = cg__ckpt_put_meta(ck, META_SEED, s)) != CG_OK)
        return rc;
    return cg__ckpt_put_meta(ck, META_OFFSET, o);
}

/* ------------------------------------------------------------ queries */

int
cg_checkpoint_num_tensors(const cg_checkpoint *ck)
{
    return ck ? ck->ntensors : -1;
}

const char *
cg_checkpoint_tensor_name(const cg_checkpoint *ck, int i)
{
    return ck && i >= 0 && i < ck->ntensors ? ck->tensors[i].name : NULL;
}

static const cg__ckpt_tensor *
lookup(const cg_checkpoint *ck, const char *name)
{
    int i;

    if (!ck || !name) {
        cg__error(CG_EINVAL, "%s is NULL", ck ? "name" : "checkpoint");
        return NULL;
    }
    i = cg__ckpt_find(ck, name);
    if (i < 0) {
        cg__error(CG_EFORMAT, "the checkpoint has no tensor '%s'", name);
        return NULL;
    }
    return &ck->tensors[i];
}

int
cg_checkpoint_tensor_info(const cg_checkpoint *ck, const char *name,
                          cg_dtype *dtype, int *ndim, int64_t *shape)
{
    const cg__ckpt_tensor *e;

    cg__error_clear();
    if (!(e = lookup(ck, name)))
        return cg__last_status();
    if (dtype)
        *dtype = e->dtype;
    if (ndim)
        *ndim = e->ndim;
    if (shape && e->ndim > 0)
        memcpy(shape, e->shape, (size_t)e->ndim * sizeof *shape);
    return CG_OK;
}

const void *
cg_checkpoint_tensor_data(const cg_checkpoint *ck, const char *name,
                          size_t *bytes)
{
    const cg__ckpt_tensor *e;

    cg__error_clear();
    if (!(e = lookup(ck, name)))
        return NULL;
    if (bytes)
        *bytes = e->bytes;
    return e->data;
}

cg_tensor *
cg_checkpoint_tensor(const cg_checkpoint *ck, cg_context *ctx,
                     const char *name)
{
    const cg__ckpt_tensor *e;

    cg__error_clear();
    if (!(e = lookup(ck, name)))
        return NULL;
    if (e->bytes == 0) {
        cg__error(CG_ESHAPE, "tensor '%s' has no elements", name);
        return NULL;
    }
    if (e->dtype == CG_I64) {
        cg__error(CG_EDTYPE, "tensor '%s' is I64, which stays on the host "
                  "(cg_checkpoint_tensor_data)", name);
        return NULL;
    }
    return cg_tensor_from_host(ctx, e->dtype, e->ndim, e->shape, e->data);
}

int
cg_checkpoint_num_meta(const cg_checkpoint *ck)
{
    return ck ? ck->nmeta : -1;
}

const char *
cg_checkpoint_meta_key(const cg_checkpoint *ck, int i)
{
    return ck && i >= 0 && i < ck->nmeta ? ck->meta[i].key : NULL;
}

const char *
cg_checkpoint_get_meta(const cg_checkpoint *ck, const char *key)
{
    int i;

    cg__error_clear();
    if (!ck || !key) {
        cg__error(CG_EINVAL, "%s is NULL", ck ? "key" : "checkpoint");
        return NULL;
    }
    i = find_meta(ck, key);
    if (i < 0) {
        cg__error(CG_EFORMAT, "the checkpoint has no metadata '%s'", key);
        return NULL;
    }
    return ck->meta[i].value;
}

int
cg_checkpoint_get_meta_int(const cg_checkpoint *ck, const char *key,
                           int64_t *value)
{
    const char *s = cg_checkpoint_get_meta(ck, key);
    char *end;
    long long v;

    if (!s)
        return cg__last_status();
    errno = 0;
    v = strtoll(s, &end, 10);
    if (end == s || *end || errno == ERANGE || s[0] == ' ')
        return cg__error(CG_EFORMAT, "metadata '%s' = '%.64s' is not an "
                         "integer", key, s);
    if (value)
        *value = v;
    return CG_OK;
}

int
cg_checkpoint_get_meta_double(const cg_checkpoint *ck, const char *key,
                              double *value)
{
    const char *s = cg_checkpoint_get_meta(ck, key);
    char *end;
    double v;

    if (!s)
        return cg__last_status();
    errno = 0;
    v = strtod(s, &end);
    if (end == s || *end || errno == ERANGE || s[0] == ' ')
        return cg__error(CG_EFORMAT, "metadata '%s' = '%.64s' is not a "
                         "number", key, s);
    if (value)
        *value = v;
    return CG_OK;
}

/* ------------------------------------------------------------ restoring */

/* Whether checkpoint entry e fits tensor t; sets the error if not. */
static int
check_fit(const cg__ckpt_tensor *e, const cg_tensor *t)
{
    int64_t shape[CG_MAX_DIMS];
    char a[160], b[160];
    int ndim, d, same;

    if (!t)
        return cg__error(CG_EINVAL, "the tensor for '%s' is NULL", e->name);
    if (cg_tensor_dtype(t) != e->dtype)
        return cg__error(CG_EFORMAT, "checkpoint tensor '%s' is %s, the "
                         "model's is %s", e->name,
                         cg__ckpt_dtype_name(e->dtype),
                         cg__ckpt_dtype_name(cg_tensor_dtype(t)));
    ndim = cg_tensor_ndim(t);
    cg_tensor_shape(t, shape);
    same = ndim == e->ndim;
    for (d = 0; same && d < ndim; d++)
        same = shape[d] == e->shape[d];
    if (!same) {
        return cg__error(CG_EFORMAT, "checkpoint tensor '%s' has shape %s, "
                         "the model's has %s", e->name,
                         cg__shape_str(e->ndim, e->shape, a, sizeof a),
                         cg__shape_str(ndim, shape, b, sizeof b));
    }
    if (!cg_tensor_is_contiguous(t))
        return cg__error(CG_EINVAL, "the tensor for '%s' is not contiguous",
                         e->name);
    return CG_OK;
}

int
cg_checkpoint_restore(const cg_checkpoint *ck, int n,
                      const char *const *names, cg_tensor *const *tensors)
{
    int i, rc;

    cg__error_clear();
    if (!ck || n < 0 || (n > 0 && (!names || !tensors)))
        return cg__error(CG_EINVAL, "NULL checkpoint, names or tensors, or "
                         "n = %d < 0", n);
    for (i = 0; i < n; i++) {
        const cg__ckpt_tensor *e = lookup(ck, names[i]);

        if (!e)
            return cg__last_status();
        if ((rc = check_fit(e, tensors[i])) != CG_OK)
            return rc;
    }
    for (i = 0; i < n; i++) {
        const cg__ckpt_tensor *e = &ck->tensors[cg__ckpt_find(ck, names[i])];

        if ((rc = cg_tensor_write(tensors[i], e->data, e->bytes)) != CG_OK)
            return rc;
    }
    return CG_OK;
}

/* Restoring buffers: the tensors are gathered for cg_checkpoint_restore,
 * the counts checked and kept, and written only once every check passed.
 */
typedef struct restore_state {
    const cg_checkpoint *ck;
    int n, cap;
    char **names;               /* owned */
    cg_tensor **tensors;        /* borrowed */
    int ncounts;
    int64_t *counts[64];        /* borrowed: the layers' counts */
    int64_t values[64];
} restore_state;

/* The value of a count entry: I64 or I32, shape [] or [1], >= 0. */
static int
count_value(const cg__ckpt_tensor *e, int64_t *v)
{
    if ((e->dtype != CG_I64 && e->dtype != CG_I32) || e->ndim > 1 ||
        (e->ndim == 1 && e->shape[0] != 1))
        return cg__error(CG_EFORMAT, "checkpoint tensor '%s' is not one "
                         "I64 or I32 count", e->name);
    if (e->dtype == CG_I64) {
        memcpy(v, e->data, 8);
    } else {
        int32_t i;

        memcpy(&i, e->data, 4);
        *v = i;
    }
    if (*v < 0)
        return cg__error(CG_EFORMAT, "checkpoint tensor '%s' is a negative "
                         "count, %lld", e->name, (long long)*v);
    return CG_OK;
}

static int
gather_buffer(void *user, const char *name, cg_tensor *t, int64_t *count)
{
    restore_state *r = user;
    const cg__ckpt_tensor *e;
    char *copy;

    if (!(e = lookup(r->ck, name)))
        return cg__last_status();
    if (!t) {
        if (r->ncounts == 64)
            return cg__error(CG_EINVAL, "more than 64 batch norm layers");
        r->counts[r->ncounts] = count;
        return count_value(e, &r->values[r->ncounts++]);
    }
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 16;
        void *a = realloc(r->names, (size_t)cap * sizeof *r->names);

        if (a)
            r->names = a;
        a = a ? realloc(r->tensors, (size_t)cap * sizeof *r->tensors) : NULL;
        if (!a)
            return cg__error(CG_EHOSTMEM, "out of host memory");
        r->tensors = a;
        r->cap = cap;
    }
    if (!(copy = cg__strdup(name)))
        return cg__last_status();
    r->names[r->n] = copy;
    r->tensors[r->n++] = t;
    return CG_OK;
}

/* The n parameters names[] -> tensors[], then m's buffers, all checked
 * before any is written. */
static int
restore_with_buffers(const cg_checkpoint *ck, const char *prefix,
                     cg_module *m, int n, const char *const *names,
                     cg_tensor *const *tensors)
{
    restore_state r;
    int i, rc;

    memset(&r, 0, sizeof r);
    r.ck = ck;
    rc = cg__module_visit_buffers(m, prefix, gather_buffer, &r);
    if (rc == CG_OK) {
        /* The parameters first, then the buffers, in one checked call. */
        const char **all_names = cg__calloc((size_t)(n + r.n) + 1,
                                            sizeof *all_names);
        cg_tensor **all = cg__calloc((size_t)(n + r.n) + 1, sizeof *all);

        if (all_names && all) {
            for (i = 0; i < n; i++) {
                all_names[i] = names[i];
                all[i] = tensors[i];
            }
            for (i = 0; i < r.n; i++) {
                all_names[n + i] = r.names[i];
                all[n + i] = r.tensors[i];
            }
            rc = cg_checkpoint_restore(ck, n + r.n, all_names, all);
        } else {
            rc = CG_EHOSTMEM;
        }
        free(all_names);
        free(all);
    }
    for (i = 0; rc == CG_OK && i < r.ncounts; i++)
        *r.counts[i] = r.values[i];
    for (i = 0; i < r.n; i++)
        free(r.names[i]);
    free(r.names);
    free(r.tensors);
    return rc;
}

int
cg_checkpoint_restore_module(const cg_checkpoint *ck, const char *prefix,
                             cg_module *m)
{
    char **names = NULL;
    cg_tensor **tensors = NULL;
    int i, n, rc = CG_OK;

    cg__error_clear();
    if (!ck || !m)
        return cg__error(CG_EINVAL, "%s is NULL", ck ? "layer" :
                         "checkpoint");
    n = cg_module_num_params(m);
    names = cg__calloc((size_t)n, sizeof *names);
    tensors = cg__calloc((size_t)n, sizeof *tensors);
    if (!names || !tensors) {
        rc = CG_EHOSTMEM;
        goto done;
    }
    for (i = 0; i < n; i++) {
        const char *pname;

        tensors[i] = cg_module_param(m, i, &pname);
        if (!(names[i] = prefixed(prefix, pname))) {
            rc = cg__last_status();
            goto done;
        }
    }
    rc = restore_with_buffers(ck, prefix, m, n, (const char *const *)names,
                              tensors);
done:
    for (i = 0; names && i < n; i++)
        free(names[i]);
    free(names);
    free(tensors);
    return rc;
}

static int
meta_u64(const cg_checkpoint *ck, const char *key, uint64_t *v)
{
    const char *s = cg_checkpoint_get_meta(ck, key);
    char *end;

    if (!s)
        return cg__last_status();
    errno = 0;
    *v = strtoull(s, &end, 10);
    if (end == s || *end || errno == ERANGE || s[0] < '0' || s[0] > '9')
        return cg__error(CG_EFORMAT, "metadata '%s' = '%.64s' is not an "
                         "unsigned 64-bit integer", key, s);
    return CG_OK;
}

int
cg_checkpoint_restore_generator(const cg_checkpoint *ck, cg_context *ctx)
{
    uint64_t seed, offset;
    int rc;

    cg__error_clear();
    if (!ck || !ctx)
        return cg__error(CG_EINVAL, "%s is NULL", ck ? "context" :
                         "checkpoint");
    if ((rc = meta_u64(ck, META_SEED, &seed)) != CG_OK ||
        (rc = meta_u64(ck, META_OFFSET, &offset)) != CG_OK)
        return rc;
    return cg_generator_set_state(ctx, seed, offset);
}
