/* SPDX-License-Identifier: MIT */
/*
 * tests/fixture.h - loads the PyTorch reference fixtures written by
 * tests/fixtures/gen_rnn.py (the format is described there): config
 * lines and named float32 tensors.
 */
#ifndef CG_FIXTURE_H
#define CG_FIXTURE_H

#include <stdint.h>

#define FX_MAX_DIMS 8

typedef struct fx_tensor {
    char *name;
    int ndim;
    int64_t shape[FX_MAX_DIMS];
    int64_t numel;
    float *data;
} fx_tensor;

typedef struct fx_config {
    char *key;
    char *value;            /* the rest of the line, words separated by ' ' */
} fx_config;

typedef struct fx_file {
    fx_config *config;
    int nconfig;
    fx_tensor *tensors;
    int ntensors;
} fx_file;

/* Parses `path`.  Returns NULL on any I/O or format error and writes the
 * reason (file and line) into err.  Free the result with fx_free. */
fx_file *fx_load(const char *path, char *err, size_t errsize);

/* Loads tests/fixtures/<name> from $TEST_SRCDIR (default "."). */
fx_file *fx_load_fixture(const char *name, char *err, size_t errsize);

void fx_free(fx_file *f);

/* The tensor called `name`, or NULL. */
const fx_tensor *fx_get(const fx_file *f, const char *name);

/* The value of config `key`, or NULL. */
const char *fx_config_str(const fx_file *f, const char *key);

/* Config `key` as integers: fills up to max values, returns how many the
 * line holds (-1 if the key is missing or a word is not an integer). */
int fx_config_ints(const fx_file *f, const char *key, int *out, int max);

/* Config `key` as one integer, or `dflt` if missing or malformed. */
int fx_config_int(const fx_file *f, const char *key, int dflt);

#endif
