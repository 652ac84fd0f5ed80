/* SPDX-License-Identifier: MIT */
/*
 * lib/tune/tuner.h - what clgrad-tune (and the tuning tests) use beyond
 * the public API: database files, kernel source hashes, and putting one
 * entry in force.  Not part of the API (include/clgrad.h, "Tuning", says
 * why); the names keep their cg_ prefix from when they were public.
 */
#ifndef CG_TUNE_TUNER_H
#define CG_TUNE_TUNER_H

#include "clgrad.h"

/* The device a database file is for. */
typedef struct cg_tuning_device {
    char name[256];
    char vendor[256];
    char platform_name[256];
    char platform_vendor[256];
    char driver_version[256];
    cg_device_type type;
} cg_tuning_device;

typedef struct cg_tuning_db cg_tuning_db;

/* The user's database file for a device: cg_tuning_dir()/<platform>-<device
 * name>.json, the names reduced to [A-Za-z0-9._-]. */
int cg_tuning_path(const cg_device_info *dev, char *out, size_t size);

/* The hash of kernels/<file>.cl as this library builds it (32 hex digits
 * and a zero), to tie a tuning entry to the source it was measured with. */
int cg_kernel_source_hash(const char *file, char out[33]);

/* An empty database for `dev`.  The caller owns it (cg_tuning_db_free). */
cg_tuning_db *cg_tuning_db_new(const cg_device_info *dev);

/* Reads a database file; NULL with a message naming the file and what is
 * wrong with it if it cannot be read or is not a valid database. */
cg_tuning_db *cg_tuning_db_load(const char *path);

/* Adds an entry, replacing one of the same kernel and shape. */
int cg_tuning_db_put(cg_tuning_db *db, const cg_tuning_entry *e);

int cg_tuning_db_count(const cg_tuning_db *db);
int cg_tuning_db_entry(const cg_tuning_db *db, int i, cg_tuning_entry *out);
int cg_tuning_db_device(const cg_tuning_db *db, cg_tuning_device *out);

/* Writes the database atomically (a temporary file, then rename),
 * creating the directory if needed. */
int cg_tuning_db_save(const cg_tuning_db *db, const char *path);

void cg_tuning_db_free(cg_tuning_db *db);

/* Puts one entry in force, replacing one of the same kernel and shape:
 * CLBlast parameters at once, clgrad's own for layers made afterwards.
 * A CLBlast parameter set CLBlast rejects is an error and changes
 * nothing.  For clgrad-tune, which times candidates this way. */
int cg_context_set_tuning(cg_context *ctx, const cg_tuning_entry *e);

/* Takes clgrad's own entries out of force (built-in defaults for layers
 * made afterwards).  CLBlast parameters already applied stay, as CLBlast
 * cannot reset them. */
int cg_context_clear_tuning(cg_context *ctx);

#endif
