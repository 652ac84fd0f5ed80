/* SPDX-License-Identifier: MIT */
/*
 * tests/fuzz/fuzz_tuning.c - the tuning database reader.  The input is a
 * database file's text: parsed from memory (cg__tuning_db_parse, what
 * both the file reader and the shipped databases go through), written
 * back and read again when it parses, and then put in the fuzz process's
 * tuning directory and applied to the shared context, which must skip a
 * bad file with a warning and leave only well-formed entries in force.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"
#include "tune/internal.h"

static void
check_entry(const cg_tuning_entry *e)
{
    int i;

    FUZZ_ASSERT(memchr(e->kernel, 0, sizeof e->kernel) && *e->kernel,
                "an entry without a kernel name");
    FUZZ_ASSERT(memchr(e->shape, 0, sizeof e->shape) &&
                memchr(e->note, 0, sizeof e->note) &&
                memchr(e->source_hash, 0, sizeof e->source_hash),
                "an unterminated string in entry %s", e->kernel);
    FUZZ_ASSERT(e->nparams >= 0 && e->nparams <= CG_TUNING_MAX_PARAMS,
                "%s: %d parameters", e->kernel, e->nparams);
    for (i = 0; i < e->nparams; i++)
        FUZZ_ASSERT(memchr(e->names[i], 0, sizeof e->names[i]) &&
                    *e->names[i], "%s: parameter %d has no name", e->kernel,
                    i);
}

static void
check_db(const cg_tuning_db *db)
{
    cg_tuning_entry e;
    cg_tuning_db *again;
    cg_tuning_device dev;
    const char *path;
    int i, n = cg_tuning_db_count(db);

    FUZZ_ASSERT(n >= 0, "%d entries", n);
    FUZZ_ASSERT(cg_tuning_db_device(db, &dev) == CG_OK, "no device block");
    for (i = 0; i < n; i++) {
        FUZZ_ASSERT(cg_tuning_db_entry(db, i, &e) == CG_OK, "entry %d", i);
        check_entry(&e);
    }
    FUZZ_ASSERT(cg_tuning_db_entry(db, n, &e) != CG_OK, "an entry past the "
                "end");
    path = fuzz_write("saved.json", "", 0);
    FUZZ_ASSERT(cg_tuning_db_save(db, path) == CG_OK, "a database that "
                "parsed cannot be saved");
    again = cg_tuning_db_load(path);
    FUZZ_ASSERT(again != NULL, "a saved database does not load again");
    FUZZ_ASSERT(cg_tuning_db_count(again) == n, "%d entries saved, %d read",
                n, cg_tuning_db_count(again));
    cg_tuning_db_free(again);
}

static void
check_apply(const uint8_t *data, size_t size)
{
    cg_context *ctx = fuzz_context();
    cg_tuning_entry e;
    char dir[4096];
    int i, n = -1;

    if (!ctx)
        return;
    snprintf(dir, sizeof dir, "%s/tuning", fuzz_dir());
    mkdir(dir, 0700);
    fuzz_write("tuning/fuzz.json", data, size);
    FUZZ_ASSERT(cg_context_apply_tuning(ctx) == CG_OK, "applying a bad "
                "file must warn and go on");
    FUZZ_ASSERT(cg_context_tuning_count(ctx, &n) == CG_OK && n >= 0,
                "%d entries in force", n);
    for (i = 0; i < n; i++) {
        FUZZ_ASSERT(cg_context_tuning_entry(ctx, i, &e) == CG_OK,
                    "entry %d in force", i);
        check_entry(&e);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    cg_tuning_db *db;

    FUZZ_ASSERT(text != NULL, "out of host memory");
    memcpy(text, data, size);
    text[size] = 0;
    db = cg__tuning_db_parse(text, "fuzz input");
    free(text);
    if (db) {
        check_db(db);
        cg_tuning_db_free(db);
    } else {
        fuzz_expect_error("cg__tuning_db_parse");
    }
    check_apply(data, size);
    return 0;
}
