/* SPDX-License-Identifier: MIT */
/*
 * tests/fixture.c - the fixture parser.  Lines can be long (a tensor is one
 * line), so the whole file is read at once and split in place.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"

static char *
read_all(const char *path)
{
    FILE *fp = fopen(path, "rb");
    char *buf = NULL;
    long n;

    if (!fp)
        return NULL;
    if (fseek(fp, 0, SEEK_END) == 0 && (n = ftell(fp)) >= 0 &&
        fseek(fp, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1))) {
        if (fread(buf, 1, (size_t)n, fp) != (size_t)n) {
            free(buf);
            buf = NULL;
        } else {
            buf[n] = '\0';
        }
    }
    fclose(fp);
    return buf;
}

static void
fail(char *err, size_t errsize, const char *path, int line, const char *fmt,
     ...)
{
    char msg[200];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(err, errsize, "%s:%d: %s", path, line, msg);
}

static int
add_config(fx_file *f, char *rest)
{
    char *sp = strchr(rest, ' ');
    fx_config *c;

    if (!sp)
        return -1;
    *sp = '\0';
    c = realloc(f->config, (size_t)(f->nconfig + 1) * sizeof *c);
    if (!c)
        return -1;
    f->config = c;
    c[f->nconfig].key = strdup(rest);
    c[f->nconfig].value = strdup(sp + 1);
    f->nconfig++;
    return c[f->nconfig - 1].key && c[f->nconfig - 1].value ? 0 : -1;
}

/* "NAME NDIM D0 ... : V0 ..." -> a new tensor; 0 or -1 (message in why). */
static int
add_tensor(fx_file *f, char *line, const char **why)
{
    fx_tensor t, *ts;
    char *p, *end;
    int64_t i;
    int d;

    memset(&t, 0, sizeof t);
    p = strchr(line, ' ');
    if (!p)
        return *why = "no shape", -1;
    *p++ = '\0';
    t.ndim = (int)strtol(p, &end, 10);
    if (end == p || t.ndim < 0 || t.ndim > FX_MAX_DIMS)
        return *why = "bad number of dimensions", -1;
    t.numel = 1;
    for (d = 0; d < t.ndim; d++) {
        p = end;
        t.shape[d] = strtoll(p, &end, 10);
        if (end == p || t.shape[d] < 0)
            return *why = "bad dimension", -1;
        t.numel *= t.shape[d];
    }
    while (*end == ' ')
        end++;
    if (*end != ':')
        return *why = "missing ':' after the shape", -1;
    t.data = malloc((size_t)(t.numel ? t.numel : 1) * sizeof *t.data);
    if (!t.data)
        return *why = "out of memory", -1;
    p = end + 1;
    for (i = 0; i < t.numel; i++) {
        errno = 0;
        t.data[i] = strtof(p, &end);
        if (end == p || errno == EINVAL) {
            free(t.data);
            return *why = "fewer values than the shape says", -1;
        }
        p = end;
    }
    while (*p == ' ')
        p++;
    if (*p != '\0') {
        free(t.data);
        return *why = "more values than the shape says", -1;
    }
    ts = realloc(f->tensors, (size_t)(f->ntensors + 1) * sizeof *ts);
    if (ts)
        f->tensors = ts;
    if (!ts || !(t.name = strdup(line))) {
        free(t.data);
        return *why = "out of memory", -1;
    }
    ts[f->ntensors++] = t;
    return 0;
}

fx_file *
fx_load(const char *path, char *err, size_t errsize)
{
    char *buf = read_all(path), *line, *next;
    const char *why = NULL;
    fx_file *f;
    int lineno = 0;

    if (!buf) {
        fail(err, errsize, path, 0, "cannot read: %s", strerror(errno));
        return NULL;
    }
    f = calloc(1, sizeof *f);
    for (line = buf; f && line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        lineno++;
        if (*line == '#' || *line == '\0')
            continue;
        if (strncmp(line, "config ", 7) == 0) {
            if (add_config(f, line + 7))
                why = "bad config line";
        } else {
            add_tensor(f, line, &why);
        }
        if (why) {
            fail(err, errsize, path, lineno, "%s", why);
            fx_free(f);
            f = NULL;
        }
    }
    if (!f && !why)
        fail(err, errsize, path, lineno, "out of memory");
    free(buf);
    return f;
}

fx_file *
fx_load_fixture(const char *name, char *err, size_t errsize)
{
    const char *dir = getenv("TEST_SRCDIR");
    char path[4096];

    snprintf(path, sizeof path, "%s/tests/fixtures/%s",
             dir && *dir ? dir : ".", name);
    return fx_load(path, err, errsize);
}

void
fx_free(fx_file *f)
{
    int i;

    if (!f)
        return;
    for (i = 0; i < f->nconfig; i++) {
        free(f->config[i].key);
        free(f->config[i].value);
    }
    for (i = 0; i < f->ntensors; i++) {
        free(f->tensors[i].name);
        free(f->tensors[i].data);
    }
    free(f->config);
    free(f->tensors);
    free(f);
}

const fx_tensor *
fx_get(const fx_file *f, const char *name)
{
    int i;

    for (i = 0; i < f->ntensors; i++)
        if (strcmp(f->tensors[i].name, name) == 0)
            return &f->tensors[i];
    return NULL;
}

const char *
fx_config_str(const fx_file *f, const char *key)
{
    int i;

    for (i = 0; i < f->nconfig; i++)
        if (strcmp(f->config[i].key, key) == 0)
            return f->config[i].value;
    return NULL;
}

int
fx_config_ints(const fx_file *f, const char *key, int *out, int max)
{
    const char *p = fx_config_str(f, key);
    char *end;
    int n = 0;
    long v;

    if (!p)
        return -1;
    for (;;) {
        while (*p == ' ')
            p++;
        if (!*p)
            return n;
        v = strtol(p, &end, 10);
        if (end == p || (*end && *end != ' '))
            return -1;
        if (n < max)
            out[n] = (int)v;
        n++;
        p = end;
    }
}

int
fx_config_int(const fx_file *f, const char *key, int dflt)
{
    int v;

    return fx_config_ints(f, key, &v, 1) == 1 ? v : dflt;
}
