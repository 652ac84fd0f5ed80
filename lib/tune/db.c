/* SPDX-License-Identifier: MIT */
/*
 * lib/tune/db.c - tuning database files: one JSON object per device,
 *
 *   {"format": "clgrad-tuning", "version": 1,
 *    "device": {"name": ..., "vendor": ..., "platform_name": ...,
 *               "platform_vendor": ..., "driver_version": ...,
 *               "type": "CPU"},
 *    "entries": [{"kernel": "rnn.lstm", "shape": "H256",
 *                 "params": {"VW": 16, "RB": 4, "WG": 8},
 *                 "time_us": 390.1, "default_time_us": 1430.2,
 *                 "source_hash": "...", "note": "..."}, ...]}
 *
 * Reading checks every field before anything is kept: a bad file gives
 * NULL and a message naming the file and the field.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "tune/internal.h"

int
cg_tuning_dir(char *out, size_t size)
{
    const char *v;

    cg__error_clear();
    if (!out || size == 0)
        return cg__error(CG_EINVAL, "out is NULL or empty");
    if ((v = getenv("CLGRAD_TUNING_DIR")) && *v)
        snprintf(out, size, "%s", v);
    else if ((v = getenv("XDG_DATA_HOME")) && *v)
        snprintf(out, size, "%s/clgrad/tuning", v);
    else if ((v = getenv("HOME")) && *v)
        snprintf(out, size, "%s/.local/share/clgrad/tuning", v);
    else
        return cg__error(CG_EINVAL, "no tuning directory: set "
                         "CLGRAD_TUNING_DIR, XDG_DATA_HOME or HOME");
    return CG_OK;
}

/* Appends s to out (at *n), keeping [A-Za-z0-9._-] and turning runs of
 * anything else into one '_'. */
static void
put_clean(char *out, size_t size, size_t *n, const char *s)
{
    int gap = 0;

    for (; *s && *n + 1 < size; s++) {
        int ok = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                 (*s >= '0' && *s <= '9') || *s == '.' || *s == '-';

        if (!ok) {
            gap = 1;
            continue;
        }
        if (gap && *n > 0 && *n + 2 < size)
            out[(*n)++] = '_';
        gap = 0;
        out[(*n)++] = *s;
    }
    out[*n] = '\0';
}

int
cg_tuning_path(const cg_device_info *dev, char *out, size_t size)
{
    char dir[3072], file[512];
    size_t n = 0;
    int status;

    if (!dev || !out)
        return cg__error(CG_EINVAL, "%s is NULL", dev ? "out" : "dev");
    status = cg_tuning_dir(dir, sizeof dir);
    if (status)
        return status;
    put_clean(file, sizeof file, &n, dev->platform_name);
    if (n + 1 < sizeof file)
        file[n++] = '-';
    put_clean(file, sizeof file, &n, dev->name);
    if ((size_t)snprintf(out, size, "%s/%s.json", dir, file) >= size)
        return cg__error(CG_EINVAL, "tuning path longer than %zu bytes",
                         size);
    return CG_OK;
}

void
cg__tuning_device_of(const cg_device_info *dev, cg_tuning_device *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", dev->name);
    snprintf(out->vendor, sizeof out->vendor, "%s", dev->vendor);
    snprintf(out->platform_name, sizeof out->platform_name, "%s",
             dev->platform_name);
    snprintf(out->platform_vendor, sizeof out->platform_vendor, "%s",
             dev->platform_vendor);
    snprintf(out->driver_version, sizeof out->driver_version, "%s",
             dev->driver_version);
    out->type = dev->type;
}

cg_tuning_match
cg__tuning_match(const cg_tuning_device *db, const cg_device_info *dev)
{
    if (strcmp(db->platform_name, dev->platform_name) == 0 &&
        strcmp(db->name, dev->name) == 0)
        return strcmp(db->driver_version, dev->driver_version) == 0
               ? CG_TUNING_EXACT : CG_TUNING_DEVICE;
    if (strcmp(db->platform_vendor, dev->platform_vendor) == 0 &&
        db->type == dev->type)
        return CG_TUNING_VENDOR;
    return CG_TUNING_NONE;
}

cg_tuning_db *
cg_tuning_db_new(const cg_device_info *dev)
{
    cg_tuning_db *db;

    cg__error_clear();
    if (!dev) {
        cg__error(CG_EINVAL, "dev is NULL");
        return NULL;
    }
    db = cg__calloc(1, sizeof *db);
    if (db)
        cg__tuning_device_of(dev, &db->device);
    return db;
}

void
cg_tuning_db_free(cg_tuning_db *db)
{
    if (!db)
        return;
    free(db->entries);
    free(db);
}

static int
entry_check(const cg_tuning_entry *e)
{
    int i, j;

    if (!e->kernel[0] || !e->shape[0])
        return cg__error(CG_EINVAL, "tuning entry without %s",
                         e->kernel[0] ? "shape" : "kernel");
    if (e->nparams < 1 || e->nparams > CG_TUNING_MAX_PARAMS)
        return cg__error(CG_EINVAL, "tuning entry %s %s: %d parameters "
                         "(1 to %d)", e->kernel, e->shape, e->nparams,
                         CG_TUNING_MAX_PARAMS);
    for (i = 0; i < e->nparams; i++) {
        if (!e->names[i][0])
            return cg__error(CG_EINVAL, "tuning entry %s %s: parameter %d "
                             "has no name", e->kernel, e->shape, i);
        if (e->values[i] < 0)
            return cg__error(CG_EINVAL, "tuning entry %s %s: %s = %ld is "
                             "negative", e->kernel, e->shape, e->names[i],
                             e->values[i]);
        for (j = 0; j < i; j++)
            if (strcmp(e->names[i], e->names[j]) == 0)
                return cg__error(CG_EINVAL, "tuning entry %s %s: %s given "
                                 "twice", e->kernel, e->shape, e->names[i]);
    }
    return CG_OK;
}

int
cg_tuning_db_put(cg_tuning_db *db, const cg_tuning_entry *e)
{
    int i, status;

    cg__error_clear();
    if (!db || !e)
        return cg__error(CG_EINVAL, "%s is NULL", db ? "entry" : "db");
    status = entry_check(e);
    if (status)
        return status;
    for (i = 0; i < db->count; i++)
        if (strcmp(db->entries[i].kernel, e->kernel) == 0 &&
            strcmp(db->entries[i].shape, e->shape) == 0)
            break;
    if (i == db->count) {
        if (db->count == db->cap) {
            int cap = db->cap ? 2 * db->cap : 8;
            cg_tuning_entry *n = realloc(db->entries, cap * sizeof *n);

            if (!n)
                return cg__error(CG_EHOSTMEM, "out of host memory");
            db->entries = n;
            db->cap = cap;
        }
        db->count++;
    }
    db->entries[i] = *e;
    db->entries[i].match = CG_TUNING_NONE;
    db->entries[i].origin[0] = '\0';
    return CG_OK;
}

int
cg_tuning_db_count(const cg_tuning_db *db)
{
    return db ? db->count : 0;
}

int
cg_tuning_db_entry(const cg_tuning_db *db, int i, cg_tuning_entry *out)
{
    cg__error_clear();
    if (!db || !out)
        return cg__error(CG_EINVAL, "%s is NULL", db ? "out" : "db");
    if (i < 0 || i >= db->count)
        return cg__error(CG_EINVAL, "entry %d of %d", i, db->count);
    *out = db->entries[i];
    return CG_OK;
}

int
cg_tuning_db_device(const cg_tuning_db *db, cg_tuning_device *out)
{
    cg__error_clear();
    if (!db || !out)
        return cg__error(CG_EINVAL, "%s is NULL", db ? "out" : "db");
    *out = db->device;
    return CG_OK;
}

/* ------------------------------------------------------------ reading */

static const char *const type_names[] = { "CPU", "GPU", "accelerator",
                                          "other" };
static const cg_device_type type_values[] = {
    CG_DEVICE_CPU, CG_DEVICE_GPU, CG_DEVICE_ACCELERATOR, CG_DEVICE_OTHER
};

/* A string field into out[size]; required or optional. */
static int
get_str(json_object *o, const char *key, char *out, size_t size,
        int required, const char *what)
{
    json_object *v;
    const char *s;

    if (!json_object_object_get_ex(o, key, &v)) {
        if (required)
            return cg__error(CG_EFORMAT, "%s: no \"%s\"", what, key);
        out[0] = '\0';
        return CG_OK;
    }
    if (!json_object_is_type(v, json_type_string))
        return cg__error(CG_EFORMAT, "%s: \"%s\" is not a string", what,
                         key);
    s = json_object_get_string(v);
    if (strlen(s) >= size)
        return cg__error(CG_EFORMAT, "%s: \"%s\" is longer than %zu bytes",
                         what, key, size - 1);
    snprintf(out, size, "%s", s);
    return CG_OK;
}

static int
get_num(json_object *o, const char *key, double *out, const char *what)
{
    json_object *v;

    *out = 0;
    if (!json_object_object_get_ex(o, key, &v))
        return CG_OK;
    if (!json_object_is_type(v, json_type_double) &&
        !json_object_is_type(v, json_type_int))
        return cg__error(CG_EFORMAT, "%s: \"%s\" is not a number", what,
                         key);
    *out = json_object_get_double(v);
    if (!(*out >= 0))
        return cg__error(CG_EFORMAT, "%s: \"%s\" is negative", what, key);
    return CG_OK;
}

static int
parse_device(json_object *o, cg_tuning_device *d, const char *what)
{
    char w[300], type[32];
    int status, i;

    snprintf(w, sizeof w, "%s: device", what);
    if (!json_object_is_type(o, json_type_object))
        return cg__error(CG_EFORMAT, "%s is not an object", w);
    if ((status = get_str(o, "name", d->name, sizeof d->name, 1, w)) ||
        (status = get_str(o, "vendor", d->vendor, sizeof d->vendor, 0, w)) ||
        (status = get_str(o, "platform_name", d->platform_name,
                          sizeof d->platform_name, 1, w)) ||
        (status = get_str(o, "platform_vendor", d->platform_vendor,
                          sizeof d->platform_vendor, 1, w)) ||
        (status = get_str(o, "driver_version", d->driver_version,
                          sizeof d->driver_version, 1, w)) ||
        (status = get_str(o, "type", type, sizeof type, 1, w)))
        return status;
    for (i = 0; i < 4; i++)
        if (strcmp(type, type_names[i]) == 0) {
            d->type = type_values[i];
            return CG_OK;
        }
    return cg__error(CG_EFORMAT, "%s: unknown type \"%s\"", w, type);
}

static int
parse_entry(json_object *o, cg_tuning_entry *e, const char *what, int idx)
{
    char w[300];
    json_object *params;
    int status;

    memset(e, 0, sizeof *e);
    snprintf(w, sizeof w, "%s: entry %d", what, idx);
    if (!json_object_is_type(o, json_type_object))
        return cg__error(CG_EFORMAT, "%s is not an object", w);
    if ((status = get_str(o, "kernel", e->kernel, sizeof e->kernel, 1, w)) ||
        (status = get_str(o, "shape", e->shape, sizeof e->shape, 1, w)) ||
        (status = get_str(o, "source_hash", e->source_hash,
                          sizeof e->source_hash, 0, w)) ||
        (status = get_str(o, "note", e->note, sizeof e->note, 0, w)) ||
        (status = get_num(o, "time_us", &e->time_us, w)) ||
        (status = get_num(o, "default_time_us", &e->default_time_us, w)))
        return status;
    if (!json_object_object_get_ex(o, "params", &params) ||
        !json_object_is_type(params, json_type_object))
        return cg__error(CG_EFORMAT, "%s (%s): no \"params\" object", w,
                         e->kernel);
    {
        json_object_object_foreach(params, key, val) {
            int64_t v;

            if (e->nparams == CG_TUNING_MAX_PARAMS)
                return cg__error(CG_EFORMAT, "%s (%s): more than %d "
                                 "parameters", w, e->kernel,
                                 CG_TUNING_MAX_PARAMS);
            if (strlen(key) >= sizeof e->names[0])
                return cg__error(CG_EFORMAT, "%s (%s): parameter name too "
                                 "long", w, e->kernel);
            if (!json_object_is_type(val, json_type_int))
                return cg__error(CG_EFORMAT, "%s (%s): parameter %s is not "
                                 "an integer", w, e->kernel, key);
            errno = 0;
            v = json_object_get_int64(val);
            if (v < 0 || v > 1L << 30 || errno)
                return cg__error(CG_EFORMAT, "%s (%s): parameter %s = %lld "
                                 "out of range", w, e->kernel, key,
                                 (long long)v);
            snprintf(e->names[e->nparams], sizeof e->names[0], "%s", key);
            e->values[e->nparams++] = (long)v;
        }
    }
    if (entry_check(e)) {
        char msg[512];

        snprintf(msg, sizeof msg, "%s", cg_last_error());
        return cg__error(CG_EFORMAT, "%s: %s", what, msg);
    }
    return CG_OK;
}

cg_tuning_db *
cg__tuning_db_parse(const char *text, const char *what)
{
    json_tokener *tok;
    json_object *root = NULL, *v, *entries;
    cg_tuning_db *db = NULL;
    char fmt[64];
    size_t i, n;
    int status;

    /* json-c takes the length as an int. */
    if (strlen(text) >= INT_MAX) {
        cg__error(CG_EFORMAT, "%s: %zu bytes, too large for a tuning "
                  "database", what, strlen(text));
        return NULL;
    }
    tok = json_tokener_new();
    if (!tok) {
        cg__error(CG_EHOSTMEM, "out of host memory");
        return NULL;
    }
    root = json_tokener_parse_ex(tok, text, (int)strlen(text) + 1);
    if (!root || json_tokener_get_error(tok) != json_tokener_success) {
        cg__error(CG_EFORMAT, "%s: not valid JSON (%s)", what,
                  json_tokener_error_desc(json_tokener_get_error(tok)));
        goto fail;
    }
    if (!json_object_is_type(root, json_type_object)) {
        cg__error(CG_EFORMAT, "%s: not a JSON object", what);
        goto fail;
    }
    if (get_str(root, "format", fmt, sizeof fmt, 1, what))
        goto fail;
    if (strcmp(fmt, CG__TUNING_FORMAT) != 0) {
        cg__error(CG_EFORMAT, "%s: format \"%s\", not \"%s\"", what, fmt,
                  CG__TUNING_FORMAT);
        goto fail;
    }
    if (!json_object_object_get_ex(root, "version", &v) ||
        !json_object_is_type(v, json_type_int) ||
        json_object_get_int64(v) != CG__TUNING_VERSION) {
        cg__error(CG_EFORMAT, "%s: format version %s, this clgrad reads "
                  "version %d", what, v ? json_object_get_string(v)
                  : "missing", CG__TUNING_VERSION);
        goto fail;
    }
    db = cg__calloc(1, sizeof *db);
    if (!db)
        goto fail;
    if (!json_object_object_get_ex(root, "device", &v)) {
        cg__error(CG_EFORMAT, "%s: no \"device\"", what);
        goto fail;
    }
    if (parse_device(v, &db->device, what))
        goto fail;
    if (!json_object_object_get_ex(root, "entries", &entries) ||
        !json_object_is_type(entries, json_type_array)) {
        cg__error(CG_EFORMAT, "%s: no \"entries\" array", what);
        goto fail;
    }
    n = json_object_array_length(entries);
    for (i = 0; i < n; i++) {
        cg_tuning_entry e;

        if (parse_entry(json_object_array_get_idx(entries, i), &e, what,
                        (int)i))
            goto fail;
        status = cg_tuning_db_put(db, &e);
        if (status) {
            cg__error(status, "%s: entry %d: out of host memory", what,
                      (int)i);
            goto fail;
        }
    }
    json_object_put(root);
    json_tokener_free(tok);
    return db;
fail:
    cg_tuning_db_free(db);
    json_object_put(root);
    json_tokener_free(tok);
    return NULL;
}

cg_tuning_db *
cg_tuning_db_load(const char *path)
{
    cg_tuning_db *db;
    char *text;

    cg__error_clear();
    if (!path) {
        cg__error(CG_EINVAL, "path is NULL");
        return NULL;
    }
    text = cg__read_file(path, NULL);
    if (!text)
        return NULL;
    db = cg__tuning_db_parse(text, path);
    free(text);
    return db;
}

/* ------------------------------------------------------------ writing */

static int
add(json_object *o, const char *key, json_object *v)
{
    if (!v || json_object_object_add(o, key, v) != 0) {
        json_object_put(v);
        return CG_EHOSTMEM;
    }
    return CG_OK;
}

static json_object *
device_json(const cg_tuning_device *d)
{
    json_object *o = json_object_new_object();
    const char *type = "other";
    int i;

    for (i = 0; i < 4; i++)
        if (d->type == type_values[i])
            type = type_names[i];
    if (!o || add(o, "name", json_object_new_string(d->name)) ||
        add(o, "vendor", json_object_new_string(d->vendor)) ||
        add(o, "platform_name", json_object_new_string(d->platform_name)) ||
        add(o, "platform_vendor",
            json_object_new_string(d->platform_vendor)) ||
        add(o, "driver_version", json_object_new_string(d->driver_version)) ||
        add(o, "type", json_object_new_string(type))) {
        json_object_put(o);
        return NULL;
    }
    return o;
}

static json_object *
entry_json(const cg_tuning_entry *e)
{
    json_object *o = json_object_new_object(), *p = json_object_new_object();
    int i;

    if (!o || !p)
        goto fail;
    for (i = 0; i < e->nparams; i++)
        if (add(p, e->names[i], json_object_new_int64(e->values[i])))
            goto fail;
    if (add(o, "kernel", json_object_new_string(e->kernel)) ||
        add(o, "shape", json_object_new_string(e->shape)))
        goto fail;
    if (add(o, "params", p)) {
        p = NULL;
        goto fail;
    }
    p = NULL;
    if (add(o, "time_us", json_object_new_double(e->time_us)) ||
        add(o, "default_time_us",
            json_object_new_double(e->default_time_us)) ||
        (e->source_hash[0] &&
         add(o, "source_hash", json_object_new_string(e->source_hash))) ||
        (e->note[0] && add(o, "note", json_object_new_string(e->note))))
        goto fail;
    return o;
fail:
    json_object_put(p);
    json_object_put(o);
    return NULL;
}

int
cg_tuning_db_save(const cg_tuning_db *db, const char *path)
{
    json_object *root, *arr;
    const char *text;
    char dir[4096], *slash;
    int i, status = CG_EHOSTMEM;

    cg__error_clear();
    if (!db || !path)
        return cg__error(CG_EINVAL, "%s is NULL", db ? "path" : "db");
    root = json_object_new_object();
    arr = json_object_new_array();
    if (!root || !arr) {
        json_object_put(arr);
        goto out;
    }
    if (add(root, "format", json_object_new_string(CG__TUNING_FORMAT)) ||
        add(root, "version", json_object_new_int(CG__TUNING_VERSION)) ||
        add(root, "device", device_json(&db->device))) {
        json_object_put(arr);
        goto out;
    }
    if (add(root, "entries", arr))
        goto out;
    for (i = 0; i < db->count; i++) {
        json_object *e = entry_json(&db->entries[i]);

        if (!e || json_object_array_add(arr, e) != 0) {
            json_object_put(e);
            goto out;
        }
    }
    text = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY |
                                          JSON_C_TO_STRING_SPACED |
                                          JSON_C_TO_STRING_NOSLASHESCAPE);
    if (!text)
        goto out;
    snprintf(dir, sizeof dir, "%s", path);
    slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        status = cg__mkdir_p(dir);
        if (status)
            goto done;
    }
    {
        size_t len = strlen(text);
        char *buf = cg__malloc(len + 2);

        if (!buf)
            goto out;
        memcpy(buf, text, len);
        buf[len] = '\n';
        status = cg__write_file_atomic(path, buf, len + 1);
        free(buf);
    }
    goto done;
out:
    status = cg__error(CG_EHOSTMEM, "out of host memory writing %s", path);
done:
    json_object_put(root);
    return status;
}
