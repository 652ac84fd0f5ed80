/* SPDX-License-Identifier: MIT */
/*
 * tests/test_tune.c - the tuning database: files round-trip, the lookup
 * order (exact device and driver, then device, then vendor and type, then
 * built-in defaults; a user file before a shipped one), bad and stale
 * files are skipped with a warning to the log callback (not in
 * cg_last_error), and what is in force is really used:
 * the recurrent kernels are built with its -D options (so the program-cache
 * key changes) and CLBlast runs with its parameters and stays correct.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "ops/internal.h"      /* cg__gemm_force */
#include "tune/internal.h"

static char rnn_hash[33];

/* What the library logged since `logged` was emptied, a line a message,
 * each after the user data and the level; a callback must not call into
 * Check (a failed assertion would leave the log's lock held). */
static char logged[16384];

/* Notes (CG_LOG_NOTE: an entry for another device adapted) go here, not
 * into logged: the shipped files log some on devices they were not
 * measured on, which the tests of warnings must not see. */
static char noted[16384];

static void
collect_log(cg_log_level level, const char *message, void *user)
{
    char *to = level == CG_LOG_NOTE ? noted : logged;
    size_t n = strlen(to);

    snprintf(to + n, sizeof logged - n, "%s %d %s\n",
             (const char *)user, (int)level, message);
}

/* A context made with collect_log set; *log gets what it logged. */
static cg_context *
new_ctx_logged(const char **log)
{
    cg_context *ctx;

    logged[0] = '\0';
    noted[0] = '\0';
    cg_set_log(collect_log, (void *)"test");
    ctx = cg_context_new(NULL);
    cg_set_log(NULL, NULL);
    ck_assert_msg(ctx != NULL, "%s", TT_ERR);
    *log = logged;
    return ctx;
}

/* A directory of its own for each use, set as CLGRAD_TUNING_DIR. */
static const char *
fresh_dir(const char *name)
{
    static char dir[512];
    char cmd[1100];

    snprintf(dir, sizeof dir, "%s/%s", tt_tmpdir(), name);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    ck_assert_int_eq(system(cmd), 0);
    setenv("CLGRAD_TUNING_DIR", dir, 1);
    return dir;
}

static cg_tuning_entry
rnn_entry(const char *kernel, const char *shape, int vw, int rb, int wg)
{
    cg_tuning_entry e;

    memset(&e, 0, sizeof e);
    snprintf(e.kernel, sizeof e.kernel, "%s", kernel);
    snprintf(e.shape, sizeof e.shape, "%s", shape);
    e.nparams = 3;
    strcpy(e.names[0], "VW");
    strcpy(e.names[1], "RB");
    strcpy(e.names[2], "WG");
    e.values[0] = vw;
    e.values[1] = rb;
    e.values[2] = wg;
    e.time_us = 100.5;
    e.default_time_us = 400.25;
    memcpy(e.source_hash, rnn_hash, sizeof rnn_hash);
    snprintf(e.note, sizeof e.note, "test entry");
    return e;
}

/* Writes a database for a device described by `dev` holding e. */
static void
write_db(const char *path, const cg_tuning_device *dev,
         const cg_tuning_entry *e, int n)
{
    cg_device_info info;
    cg_tuning_db *db;
    int i;

    memset(&info, 0, sizeof info);
    snprintf(info.name, sizeof info.name, "%s", dev->name);
    snprintf(info.vendor, sizeof info.vendor, "%s", dev->vendor);
    snprintf(info.platform_name, sizeof info.platform_name, "%s",
             dev->platform_name);
    snprintf(info.platform_vendor, sizeof info.platform_vendor, "%s",
             dev->platform_vendor);
    snprintf(info.driver_version, sizeof info.driver_version, "%s",
             dev->driver_version);
    info.type = dev->type;
    db = cg_tuning_db_new(&info);
    ck_assert_ptr_nonnull(db);
    for (i = 0; i < n; i++)
        ck_assert_int_eq(cg_tuning_db_put(db, &e[i]), CG_OK);
    ck_assert_msg(cg_tuning_db_save(db, path) == CG_OK, "%s", TT_ERR);
    cg_tuning_db_free(db);
}

static void
write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static cg_context *
new_ctx(void)
{
    cg_context *ctx = cg_context_new(NULL);

    ck_assert_msg(ctx != NULL, "%s", TT_ERR);
    return ctx;
}

START_TEST(database_round_trip)
{
    const char *dir = fresh_dir("roundtrip");
    cg_device_info info;
    cg_tuning_entry e[3], got;
    cg_tuning_device dev;
    cg_tuning_db *db;
    char path[600];
    int i, j;

    cg_context_device_info(tt_ctx(), &info);
    e[0] = rnn_entry("rnn.lstm", "H256", 16, 4, 8);
    e[1] = rnn_entry("rnn.gru", "H128", 8, 2, 32);
    memset(&e[2], 0, sizeof e[2]);
    strcpy(e[2].kernel, "clblast.GemmRoutine");
    strcpy(e[2].shape, "any");
    e[2].nparams = 1;
    strcpy(e[2].names[0], "XGEMM_MIN_INDIRECT_SIZE");
    e[2].values[0] = 384;
    e[2].time_us = 0.125;
    ck_assert_int_eq(cg_tuning_path(&info, path, sizeof path), CG_OK);
    ck_assert_msg(strncmp(path, dir, strlen(dir)) == 0 &&
                  strstr(path, ".json") && !strchr(path + strlen(dir) + 1,
                                                   ' '), "%s", path);
    db = cg_tuning_db_new(&info);
    for (i = 0; i < 3; i++)
        ck_assert_int_eq(cg_tuning_db_put(db, &e[i]), CG_OK);
    /* The same kernel and shape replaces. */
    e[0].values[2] = 16;
    ck_assert_int_eq(cg_tuning_db_put(db, &e[0]), CG_OK);
    ck_assert_int_eq(cg_tuning_db_count(db), 3);
    ck_assert_msg(cg_tuning_db_save(db, path) == CG_OK, "%s", TT_ERR);
    cg_tuning_db_free(db);

    db = cg_tuning_db_load(path);
    ck_assert_msg(db != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tuning_db_count(db), 3);
    ck_assert_int_eq(cg_tuning_db_device(db, &dev), CG_OK);
    ck_assert_str_eq(dev.name, info.name);
    ck_assert_str_eq(dev.driver_version, info.driver_version);
    ck_assert_str_eq(dev.platform_vendor, info.platform_vendor);
    ck_assert_int_eq(dev.type, info.type);
    for (i = 0; i < 3; i++) {
        ck_assert_int_eq(cg_tuning_db_entry(db, i, &got), CG_OK);
        ck_assert_str_eq(got.kernel, e[i].kernel);
        ck_assert_str_eq(got.shape, e[i].shape);
        ck_assert_str_eq(got.source_hash, e[i].source_hash);
        ck_assert_str_eq(got.note, e[i].note);
        ck_assert_int_eq(got.nparams, e[i].nparams);
        for (j = 0; j < got.nparams; j++) {
            ck_assert_str_eq(got.names[j], e[i].names[j]);
            ck_assert_int_eq(got.values[j], e[i].values[j]);
        }
        ck_assert_double_eq_tol(got.time_us, e[i].time_us, 1e-9);
        ck_assert_double_eq_tol(got.default_time_us, e[i].default_time_us,
                                1e-9);
    }
    ck_assert_int_eq(cg_tuning_db_entry(db, 3, &got), CG_EINVAL);
    cg_tuning_db_free(db);
    /* Bad entries are refused and change nothing. */
    db = cg_tuning_db_new(&info);
    e[0].nparams = 0;
    ck_assert_int_eq(cg_tuning_db_put(db, &e[0]), CG_EINVAL);
    e[0].nparams = 3;
    strcpy(e[0].names[1], "VW");
    ck_assert_int_eq(cg_tuning_db_put(db, &e[0]), CG_EINVAL);
    ck_assert_int_eq(cg_tuning_db_count(db), 0);
    cg_tuning_db_free(db);
    ck_assert_ptr_null(cg_tuning_db_load(NULL));
}
END_TEST

/* Three files for this device at three levels, each with its own VW for
 * rnn.lstm H7 (a shape no shipped entry has). */
/* The widest power of two of the device's native float vectors. */
static long
native_pow2(const cg_device_info *info)
{
    long w = 1;

    while (w * 2 <= (long)info->native_width_float)
        w *= 2;
    return info->native_width_float ? w : 16;
}

START_TEST(lookup_order)
{
    const char *dir = fresh_dir("order");
    cg_device_info info;
    cg_tuning_device exact, device, vendor, other;
    cg_tuning_entry e, got;
    cg_context *ctx;
    const char *log;
    char path[3][700];

    cg_context_device_info(tt_ctx(), &info);
    cg__tuning_device_of(&info, &exact);
    device = exact;
    snprintf(device.driver_version, sizeof device.driver_version,
             "some other driver");
    vendor = device;
    snprintf(vendor.name, sizeof vendor.name, "another device");
    other = vendor;
    snprintf(other.platform_vendor, sizeof other.platform_vendor,
             "another vendor");
    snprintf(path[0], sizeof path[0], "%s/a-exact.json", dir);
    snprintf(path[1], sizeof path[1], "%s/b-device.json", dir);
    snprintf(path[2], sizeof path[2], "%s/c-vendor.json", dir);
    /* The vendor file is alphabetically last, the exact one first: order
     * of reading must not matter. */
    e = rnn_entry("rnn.lstm", "H7", 1, 1, 1);
    write_db(path[0], &exact, &e, 1);
    e = rnn_entry("rnn.lstm", "H7", 2, 2, 2);
    write_db(path[1], &device, &e, 1);
    e = rnn_entry("rnn.lstm", "H7", 4, 4, 4);
    write_db(path[2], &vendor, &e, 1);
    {
        char p[700];

        snprintf(p, sizeof p, "%s/d-other.json", dir);
        e = rnn_entry("rnn.lstm", "H7", 8, 8, 8);
        write_db(p, &other, &e, 1);
    }

    ctx = new_ctx_logged(&log);
    ck_assert_str_eq(log, "");
    ck_assert_str_eq(cg_last_error(), "");
    ck_assert(tt_in_force(ctx, "rnn.lstm", "H7", &got));
    ck_assert_int_eq(got.values[0], 1);
    ck_assert_int_eq(got.match, CG_TUNING_EXACT);
    ck_assert_str_eq(got.origin, path[0]);
    cg_context_free(ctx);

    remove(path[0]);
    ctx = new_ctx();
    ck_assert(tt_in_force(ctx, "rnn.lstm", "H7", &got));
    ck_assert_int_eq(got.values[0], 2);
    ck_assert_int_eq(got.match, CG_TUNING_DEVICE);
    cg_context_free(ctx);

    remove(path[1]);
    ctx = new_ctx();
    ck_assert(tt_in_force(ctx, "rnn.lstm", "H7", &got));
    ck_assert_int_eq(got.values[0], native_pow2(&info) < 4
                                    ? native_pow2(&info) : 4);
    ck_assert_int_eq(got.match, CG_TUNING_VENDOR);
    /* no_tuning: nothing in force. */
    cg_context_free(ctx);
    {
        cg_context_options o = { NULL, 0, 1 };
        int n;

        ctx = cg_context_new_with(&o);
        ck_assert_ptr_nonnull(ctx);
        ck_assert_int_eq(cg_context_tuning_count(ctx, &n), CG_OK);
        ck_assert_int_eq(n, 0);
        cg_context_free(ctx);
    }

    remove(path[2]);
    ctx = new_ctx();
    /* Only the other vendor's file is left: defaults for H7. */
    ck_assert(!tt_in_force(ctx, "rnn.lstm", "H7", &got));
    cg_context_free(ctx);
}
END_TEST

/* An entry measured on another device of the same vendor gets its vector
 * widths narrowed to this device's native float width (with a note); one
 * measured on this device is used as it is. */
START_TEST(vendor_entries_are_narrowed_to_the_device)
{
    const char *dir = fresh_dir("narrow");
    cg_device_info info;
    cg_tuning_device dev, vendor;
    cg_tuning_entry e, got;
    cg_context *ctx;
    const char *log;
    char path[700];
    long w;

    cg_context_device_info(tt_ctx(), &info);
    w = native_pow2(&info);
    cg__tuning_device_of(&info, &dev);
    vendor = dev;
    snprintf(vendor.name, sizeof vendor.name, "a wider device");
    snprintf(path, sizeof path, "%s/vendor.json", dir);
    e = rnn_entry("rnn.lstm", "H7", 16, 2, 8);
    write_db(path, &vendor, &e, 1);
    ctx = new_ctx_logged(&log);
    ck_assert_str_eq(log, "");
    ck_assert(tt_in_force(ctx, "rnn.lstm", "H7", &got));
    ck_assert_int_eq(got.values[0], w < 16 ? w : 16);
    ck_assert_int_eq(got.values[1], 2);
    ck_assert_int_eq(got.values[2], 8);
    if (w < 16)
        ck_assert_msg(strstr(noted, "rnn.lstm H7: vector widths narrowed"),
                      "no note: %s", noted);
    cg_context_free(ctx);

    /* CLGRAD_NATIVE_FLOAT_WIDTH stands for the device's width (3: the
     * power of two below it, 2). */
    ck_assert_int_eq(setenv("CLGRAD_NATIVE_FLOAT_WIDTH", "3", 1), 0);
    ctx = new_ctx_logged(&log);
    ck_assert_int_eq(unsetenv("CLGRAD_NATIVE_FLOAT_WIDTH"), 0);
    ck_assert(tt_in_force(ctx, "rnn.lstm", "H7", &got));
    ck_assert_int_eq(got.values[0], 2);
    ck_assert_int_eq(got.values[2], 8);
    cg_context_device_info(ctx, &info);
    ck_assert_uint_eq(info.native_width_float, 3);
    cg_context_free(ctx);

    /* The same entry for this very device: as measured. */
    remove(path);
    snprintf(path, sizeof path, "%s/exact.json", dir);
    write_db(path, &dev, &e, 1);
    ctx = new_ctx_logged(&log);
    ck_assert(tt_in_force(ctx, "rnn.lstm", "H7", &got));
    ck_assert_int_eq(got.values[0], 16);
    ck_assert_msg(!strstr(noted, "H7"), "%s", noted);
    cg_context_free(ctx);
}
END_TEST

/* A user file beats a shipped one at the same level: the shipped entries
 * for this device are overridden by a user file for the same device.
 * Several shipped files may match (an H100 exactly, the H200's file by
 * vendor): the user file copies the device block of the best match, or a
 * closer shipped file would rightly win. */
START_TEST(user_file_beats_shipped)
{
    const char *dir = fresh_dir("user");
    cg_tuning_entry e, got;
    cg_tuning_device dev;
    cg_device_info info;
    cg_context *ctx;
    cg_tuning_db *db;
    char path[700];
    int i, n, m, best = CG_TUNING_NONE;

    cg_context_device_info(tt_ctx(), &info);
    for (i = 0; cg__tuning_embedded[i].name; i++) {
        db = cg__tuning_db_parse(cg__tuning_embedded[i].text, "shipped");
        ck_assert_msg(db != NULL, "%s", TT_ERR);
        m = cg__tuning_match(&db->device, &info);
        if (m <= best) {
            cg_tuning_db_free(db);
            continue;
        }
        /* The same device block, one rnn.lstm entry changed. */
        for (n = 0; n < db->count; n++) {
            if (strncmp(db->entries[n].kernel, "rnn.lstm", 8) == 0) {
                dev = db->device;
                e = rnn_entry(db->entries[n].kernel, db->entries[n].shape,
                              1, 1, 1);
                best = m;
                break;
            }
        }
        cg_tuning_db_free(db);
    }
    if (best == CG_TUNING_NONE)
        return;     /* no shipped entry for this device */
    snprintf(path, sizeof path, "%s/mine.json", dir);
    write_db(path, &dev, &e, 1);
    ctx = new_ctx();
    ck_assert(tt_in_force(ctx, "rnn.lstm", e.shape, &got));
    ck_assert_int_eq(got.values[0], 1);
    ck_assert_str_eq(got.origin, path);
    cg_context_free(ctx);
}
END_TEST

/* Every shipped entry for one of clgrad's kernel files names that file's
 * current source hash, on any device: a stale entry is skipped with a
 * warning, so a change to a kernel file (or to kernels/common.cl, part of
 * every file's hashed source) that leaves the shipped files behind would
 * silently drop their tuning.  The file is the kernel's name up to its
 * first dot (rnn.lstm: rnn.cl); CLBlast's and data parallelism's entries
 * name no file. */
START_TEST(shipped_entries_name_current_hashes)
{
    char hash[33] = "", file[64], hashed[64] = "";
    cg_tuning_db *db;
    int i, n, checked = 0;

    for (i = 0; cg__tuning_embedded[i].name; i++) {
        db = cg__tuning_db_parse(cg__tuning_embedded[i].text, "shipped");
        ck_assert_msg(db != NULL, "%s", TT_ERR);
        for (n = 0; n < db->count; n++) {
            const cg_tuning_entry *e = &db->entries[n];

            if (strncmp(e->kernel, "clblast.", 8) == 0 ||
                strcmp(e->kernel, "dp") == 0)
                continue;
            snprintf(file, sizeof file, "%.*s",
                     (int)strcspn(e->kernel, "."), e->kernel);
            if (strcmp(file, hashed) != 0) {    /* entries come in runs */
                ck_assert_msg(cg_kernel_source_hash(file, hash) == CG_OK,
                              "%s: %s: %s", cg__tuning_embedded[i].name,
                              e->kernel, TT_ERR);
                snprintf(hashed, sizeof hashed, "%s", file);
            }
            ck_assert_msg(strcmp(e->source_hash, hash) == 0,
                          "%s: %s %s names kernels/%s.cl's hash %s, the "
                          "file's is %s", cg__tuning_embedded[i].name,
                          e->kernel, e->shape, file, e->source_hash, hash);
            checked++;
        }
        cg_tuning_db_free(db);
    }
    ck_assert_int_gt(checked, 0);
}
END_TEST

/* A corrupted file, another format version, a stale entry and an entry
 * for an unknown kernel are skipped with a warning; the rest applies. */
START_TEST(bad_and_stale_files_are_skipped_with_a_warning)
{
    const char *dir = fresh_dir("bad");
    cg_device_info info;
    cg_tuning_device dev;
    cg_tuning_entry e[3], got;
    cg_context *ctx;
    const char *log;
    char path[700];

    cg_context_device_info(tt_ctx(), &info);
    cg__tuning_device_of(&info, &dev);
    snprintf(path, sizeof path, "%s/corrupt.json", dir);
    write_text(path, "{\"format\": \"clgrad-tuning\", \"version\": 1, \"dev");
    snprintf(path, sizeof path, "%s/future.json", dir);
    write_text(path, "{\"format\": \"clgrad-tuning\", \"version\": 99, "
               "\"device\": {}, \"entries\": []}");
    snprintf(path, sizeof path, "%s/badparam.json", dir);
    write_text(path, "{\"format\": \"clgrad-tuning\", \"version\": 1, "
               "\"device\": {\"name\": \"x\", \"platform_name\": \"p\", "
               "\"platform_vendor\": \"v\", \"driver_version\": \"1\", "
               "\"type\": \"GPU\"}, \"entries\": [{\"kernel\": \"rnn.lstm\","
               " \"shape\": \"H5\", \"params\": {\"VW\": \"four\"}}]}");
    e[0] = rnn_entry("rnn.lstm", "H9", 2, 1, 16);       /* good */
    e[1] = rnn_entry("rnn.gru", "H9", 2, 1, 16);        /* stale */
    strcpy(e[1].source_hash, "0123456789abcdef0123456789abcdef");
    e[2] = rnn_entry("rnn.lstm_v2", "H9", 2, 1, 16);    /* unknown */
    snprintf(path, sizeof path, "%s/mixed.json", dir);
    write_db(path, &dev, e, 3);
    /* Issue 16, defect 7: a directory named *.json was reported as an
     * allocation of 9223372036854775808 bytes. */
    snprintf(path, sizeof path, "%s/adir.json", dir);
    ck_assert_int_eq(mkdir(path, 0700), 0);

    ctx = new_ctx_logged(&log);
    /* A success leaves no error; each skip is one warning, passed the
     * user data. */
    ck_assert_str_eq(cg_last_error(), "");
    ck_assert_msg(strstr(log, "test 1 tuning: ") == log, "%s", log);
    ck_assert_msg(strstr(log, "corrupt.json ignored") &&
                  strstr(log, "not valid JSON"), "%s", log);
    ck_assert_msg(strstr(log, "future.json ignored") &&
                  strstr(log, "version 99"), "%s", log);
    ck_assert_msg(strstr(log, "badparam.json ignored") &&
                  strstr(log, "VW is not an integer"), "%s", log);
    ck_assert_msg(strstr(log, "rnn.gru skipped") && strstr(log, "stale"),
                  "%s", log);
    ck_assert_msg(strstr(log, "adir.json ignored") &&
                  strstr(log, "adir.json is a directory, not a file"), "%s",
                  log);
    ck_assert_msg(!strstr(log, "allocate"), "%s", log);
    ck_assert_msg(strstr(log, "unknown kernel \"rnn.lstm_v2\""), "%s", log);
    /* With no callback (the default) the same lookup is silent. */
    cg_context_free(ctx);
    logged[0] = '\0';
    ctx = new_ctx();
    ck_assert_str_eq(logged, "");
    ck_assert_str_eq(cg_last_error(), "");
    ck_assert(tt_in_force(ctx, "rnn.lstm", "H9", &got));
    ck_assert(!tt_in_force(ctx, "rnn.gru", "H9", &got));
    ck_assert(!tt_in_force(ctx, "rnn.lstm_v2", "H9", &got));
    /* The context works. */
    {
        int64_t s[1] = { 5 };
        cg_tensor *t = cg_ones(ctx, 1, s);
        float v[5];

        ck_assert_ptr_nonnull(t);
        ck_assert_int_eq(cg_tensor_to_host(t, v, sizeof v), CG_OK);
        ck_assert(v[4] == 1.0f);
        cg_tensor_free(t);
    }
    cg_context_free(ctx);
    ck_assert_ptr_null(cg_tuning_db_load("/nonexistent/x.json"));
}
END_TEST

/* The program list holds a program of kernel file `name` built with
 * these options. */
static int
has_program(cg_context *ctx, const char *name, const char *defs)
{
    cg__program *p;

    for (p = ctx->programs; p; p = p->next)
        if (strcmp(p->name, name) == 0 && strstr(p->options, defs))
            return 1;
    return 0;
}

/* LSTM output of a fresh layer (seed 7) on fixed input. */
static void
lstm_run(cg_context *ctx, int H, float *out, size_t n)
{
    cg_rnn_options o = { CG_LSTM, 5, 0, 1, 0, 0, 0 };
    int64_t xs[3] = { 3, 4, 5 };
    cg_tensor *x, *y = NULL;
    cg_module *m;

    o.hidden_size = H;
    ck_assert_int_eq(cg_manual_seed(ctx, 7), CG_OK);
    m = cg_rnn_new(ctx, &o);
    ck_assert_msg(m != NULL, "%s", TT_ERR);
    x = cg_rand_uniform(ctx, 3, xs, -1, 1);
    ck_assert_msg(cg_rnn_forward(m, x, NULL, NULL, NULL, &y, NULL, NULL)
                  == CG_OK, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_numel(y), (int64_t)n);
    ck_assert_int_eq(cg_tensor_to_host(y, out, n * sizeof *out), CG_OK);
    cg_tensor_free(x);
    cg_tensor_free(y);
    cg_module_free(m);
}

START_TEST(own_parameters_become_build_options)
{
    const char *dir = fresh_dir("apply");
    cg_device_info info;
    cg_tuning_device dev;
    cg_tuning_entry e[2];
    cg_context *ctx;
    char path[700];
    float a[3 * 4 * 11], b[3 * 4 * 11];
    int i;

    cg_context_device_info(tt_ctx(), &info);
    cg__tuning_device_of(&info, &dev);
    /* Two shapes: a layer takes the nearest hidden size. */
    e[0] = rnn_entry("rnn.lstm", "H10", 2, 3, 16);
    e[1] = rnn_entry("rnn.lstm", "H1000", 8, 1, 32);
    snprintf(path, sizeof path, "%s/t.json", dir);
    write_db(path, &dev, e, 2);
    lstm_run(tt_ctx(), 11, a, sizeof a / sizeof a[0]);

    ctx = new_ctx();
    lstm_run(ctx, 11, b, sizeof b / sizeof b[0]);
    ck_assert_msg(has_program(ctx, "rnn", "-DVW=2 -DRB=3 -DWG=16"),
                  "the H10 entry was not used");
    ck_assert(!has_program(ctx, "rnn", "-DVW=8"));
    for (i = 0; i < (int)(sizeof a / sizeof a[0]); i++)
        ck_assert_msg(fabsf(a[i] - b[i]) <= 1e-6f * (1 + fabsf(a[i])),
                      "output %d: %g with defaults, %g tuned", i, a[i],
                      b[i]);
    /* cg_context_set_tuning: layers made afterwards use it; bad values are
     * refused. */
    e[0] = rnn_entry("rnn.lstm", "H10", 4, 1, 8);
    ck_assert_int_eq(cg_context_set_tuning(ctx, &e[0]), CG_OK);
    lstm_run(ctx, 11, b, sizeof b / sizeof b[0]);
    ck_assert(has_program(ctx, "rnn", "-DVW=4 -DRB=1 -DWG=8"));
    e[0].values[0] = 3;
    ck_assert_int_eq(cg_context_set_tuning(ctx, &e[0]), CG_EINVAL);
    ck_assert_msg(strstr(cg_last_error(), "VW = 3"), "%s", TT_ERR);
    /* clear: defaults again. */
    ck_assert_int_eq(cg_context_clear_tuning(ctx), CG_OK);
    ck_assert(!tt_in_force(ctx, "rnn.lstm", "H10", &e[1]));
    cg_context_free(ctx);
}
END_TEST

/* C = A B on the host in double. */
static void
ref_gemm(const float *A, const float *B, double *C, int M, int N, int K)
{
    int i, j, k;

    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
            double s = 0;

            for (k = 0; k < K; k++)
                s += (double)A[i * K + k] * B[k * N + j];
            C[i * N + j] = s;
        }
}

/* cg_matmul of M x K by K x N against the reference: CG_OK and the max
 * error, or the failure status. */
static int
check_gemm(cg_context *ctx, int M, int N, int K, double *err)
{
    int64_t as[2] = { M, K }, bs[2] = { K, N };
    float *A = malloc(sizeof *A * M * K), *B = malloc(sizeof *B * K * N);
    float *C = malloc(sizeof *C * M * N);
    double *R = malloc(sizeof *R * M * N);
    cg_tensor *a, *b, *c;
    int i, status = CG_OK;

    for (i = 0; i < M * K; i++)
        A[i] = (float)((i * 37 % 101) - 50) / 50.0f;
    for (i = 0; i < K * N; i++)
        B[i] = (float)((i * 53 % 97) - 48) / 48.0f;
    a = cg_tensor_from_host(ctx, CG_F32, 2, as, A);
    b = cg_tensor_from_host(ctx, CG_F32, 2, bs, B);
    ck_assert(a && b);
    c = cg_matmul(a, b);
    if (!c || cg_tensor_to_host(c, C, sizeof *C * M * N) != CG_OK) {
        status = cg__last_status() ? cg__last_status() : CG_EINVAL;
    } else {
        ref_gemm(A, B, R, M, N, K);
        *err = 0;
        for (i = 0; i < M * N; i++) {
            double d = fabs(C[i] - R[i]) / (1 + fabs(R[i]));

            if (d > *err)
                *err = d;
        }
    }
    cg_tensor_free(a);
    cg_tensor_free(b);
    cg_tensor_free(c);
    free(A);
    free(B);
    free(C);
    free(R);
    return status;
}

static cg_tuning_entry
xgemm_entry(long mdimc, long ndimc, long mwg, long nwg, long kwg, long vw)
{
    static const char *const names[16] = {
        "GEMMK", "KREG", "KWG", "KWI", "MDIMA", "MDIMC", "MWG", "NDIMB",
        "NDIMC", "NWG", "SA", "SB", "STRM", "STRN", "VWM", "VWN"
    };
    long values[16] = { 0, 1, kwg, 2, mdimc, mdimc, mwg, ndimc, ndimc, nwg,
                        0, 0, 0, 0, vw, vw };
    cg_tuning_entry e;
    int i;

    memset(&e, 0, sizeof e);
    strcpy(e.kernel, "clblast.Xgemm");
    strcpy(e.shape, "any");
    e.nparams = 16;
    for (i = 0; i < 16; i++) {
        strcpy(e.names[i], names[i]);
        e.values[i] = values[i];
    }
    return e;
}

/* CLBlast parameters are applied (CLBlast's GEMM forced, as the automatic
 * choice may run clgrad's kernel): with the indirect path forced from 64^3
 * up (GemmRoutine), a valid Xgemm set works and is correct; a set that is
 * not exactly CLBlast's parameters, or needs more work-items per group
 * than the device has, is refused. */
START_TEST(clblast_parameters_are_applied)
{
    cg_context *ctx = tt_ctx();
    cg_device_info info;
    cg_tuning_entry e;
    double err = 1;
    int n = 160;

    cg_context_device_info(ctx, &info);
    cg__gemm_force(ctx, CG__GEMM_CLBLAST);
    ck_assert_int_eq(check_gemm(ctx, n, n, n, &err), CG_OK);
    ck_assert_msg(err < 1e-5, "untuned error %g", err);
    /* GEMMs from 64^3 up take the indirect path, which runs Xgemm. */
    memset(&e, 0, sizeof e);
    strcpy(e.kernel, "clblast.GemmRoutine");
    strcpy(e.shape, "any");
    e.nparams = 1;
    strcpy(e.names[0], "XGEMM_MIN_INDIRECT_SIZE");
    e.values[0] = 64;
    ck_assert_msg(cg_context_set_tuning(ctx, &e) == CG_OK, "%s", TT_ERR);

    e = xgemm_entry(8, 8, 32, 32, 16, 4);
    strcpy(e.names[3], "KWJ");
    ck_assert_int_eq(cg_context_set_tuning(ctx, &e), CG_EINVAL);
    ck_assert_msg(strstr(cg_last_error(), "KWI is missing"), "%s", TT_ERR);
    e.nparams = 15;
    strcpy(e.names[3], "KWI");
    ck_assert_int_eq(cg_context_set_tuning(ctx, &e), CG_EINVAL);
    /* A set that breaks CLBlast's rules or the device's limits is refused
     * before CLBlast compiles anything (64 x 128 = 8192 work-items). */
    e = xgemm_entry(64, 128, 64, 128, 128, 1);
    if (info.max_work_group_size < 8192) {
        ck_assert_int_eq(cg_context_set_tuning(ctx, &e), CG_EINVAL);
        ck_assert_msg(strstr(cg_last_error(), "exceeds the device's limits"),
                      "%s", TT_ERR);
    }
    /* Under a memory checker each new CLBlast GEMM program takes minutes
     * to compile; what follows is CLBlast's code, checked natively. */
    if (tt_checker()) {
        cg__gemm_force(ctx, CG__GEMM_AUTO);
        return;
    }

    e = xgemm_entry(8, 8, 32, 32, 16, 4);
    ck_assert_msg(cg_context_set_tuning(ctx, &e) == CG_OK, "%s", TT_ERR);
    ck_assert_msg(check_gemm(ctx, n, n, n, &err) == CG_OK, "%s", TT_ERR);
    ck_assert_msg(err < 1e-5, "tuned error %g", err);
    /* Odd sizes (padding kernels) too. */
    ck_assert_msg(check_gemm(ctx, 37, 531, 300, &err) == CG_OK, "%s",
                  TT_ERR);
    ck_assert_msg(err < 1e-5, "tuned error %g", err);
    cg__gemm_force(ctx, CG__GEMM_AUTO);
}
END_TEST

/* A user's database of this device holding the one entry e, in file
 * `name` of dir. */
static void
write_own_db(const char *dir, const char *name, const cg_tuning_entry *e)
{
    cg_device_info info;
    cg_tuning_device dev;
    char path[700];

    cg_context_device_info(tt_ctx(), &info);
    cg__tuning_device_of(&info, &dev);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    write_db(path, &dev, e, 1);
}

/* CLBlast parameter sets CLBlast's kernels cannot run (Xgemm MWG=3 NWG=5,
 * all zeros, an XgemmDirect work-group tile not dividing WGD, a Copy
 * vector width of 3, a Transpose tile beyond the device) are skipped when
 * the database is read, with a warning naming the file, the entry and the
 * rule; they are not in force, and a GEMM runs with the defaults. */
START_TEST(invalid_clblast_parameters_are_skipped_with_a_warning)
{
    const char *dir = fresh_dir("badclblast"), *log;
    cg_tuning_entry e, got;
    cg_context *ctx;
    double err = 1;
    int i;

    e = xgemm_entry(8, 8, 32, 32, 16, 4);
    e.values[6] = 3;                    /* MWG */
    e.values[9] = 5;                    /* NWG */
    write_own_db(dir, "a-mwg3.json", &e);
    for (i = 0; i < e.nparams; i++)
        e.values[i] = 0;
    write_own_db(dir, "b-zeros.json", &e);
    memset(&e, 0, sizeof e);
    strcpy(e.kernel, "clblast.XgemmDirect");
    strcpy(e.shape, "any");
    {
        static const char *const n[10] = { "KWID", "MDIMAD", "MDIMCD",
            "NDIMBD", "NDIMCD", "PADA", "PADB", "VWMD", "VWND", "WGD" };
        static const long v[10] = { 2, 8, 8, 8, 8, 1, 1, 4, 4, 24 };

        for (i = 0; i < 10; i++) {
            strcpy(e.names[i], n[i]);
            e.values[i] = v[i];
        }
        e.nparams = 10;
    }
    write_own_db(dir, "c-direct.json", &e);
    memset(&e, 0, sizeof e);
    strcpy(e.kernel, "clblast.Copy");
    strcpy(e.shape, "any");
    e.nparams = 4;
    strcpy(e.names[0], "COPY_DIMX");
    strcpy(e.names[1], "COPY_DIMY");
    strcpy(e.names[2], "COPY_VW");
    strcpy(e.names[3], "COPY_WPT");
    e.values[0] = 8;
    e.values[1] = 8;
    e.values[2] = 3;
    e.values[3] = 1;
    write_own_db(dir, "d-copy.json", &e);
    memset(&e, 0, sizeof e);
    strcpy(e.kernel, "clblast.Transpose");
    strcpy(e.shape, "any");
    e.nparams = 4;
    strcpy(e.names[0], "TRA_DIM");
    strcpy(e.names[1], "TRA_PAD");
    strcpy(e.names[2], "TRA_SHUFFLE");
    strcpy(e.names[3], "TRA_WPT");
    e.values[0] = 4096;
    e.values[3] = 1;
    write_own_db(dir, "e-transpose.json", &e);

    ctx = new_ctx_logged(&log);
    ck_assert_msg(strstr(log, "a-mwg3.json: clblast.Xgemm skipped") &&
                  strstr(log, "MWG (3) must be a multiple of MDIMC * VWM "
                         "(32)"), "%s", log);
    ck_assert_msg(strstr(log, "b-zeros.json: clblast.Xgemm skipped") &&
                  strstr(log, "= 0 (1 to 4096)"), "%s", log);
    ck_assert_msg(strstr(log, "c-direct.json: clblast.XgemmDirect skipped") &&
                  strstr(log, "WGD (24) must be a multiple of MDIMCD * "
                         "VWMD (32)"), "%s", log);
    ck_assert_msg(strstr(log, "d-copy.json: clblast.Copy skipped") &&
                  strstr(log, "COPY_VW = 3 is not a vector width"), "%s",
                  log);
    ck_assert_msg(strstr(log, "e-transpose.json: clblast.Transpose "
                         "skipped") && strstr(log, "exceeds the device's "
                         "limits"), "%s", log);
    ck_assert(!tt_in_force(ctx, "clblast.XgemmDirect", "any", &got) ||
              strstr(got.origin, "c-direct") == NULL);
    ck_assert(!tt_in_force(ctx, "clblast.Copy", "any", &got) ||
              strstr(got.origin, "d-copy") == NULL);
    if (tt_in_force(ctx, "clblast.Xgemm", "any", &got))
        ck_assert_msg(strstr(got.origin, dir) == NULL, "%s in force",
                      got.origin);
    /* The GEMM runs (with the shipped or built-in parameters). */
    if (!tt_checker()) {
        ck_assert_msg(check_gemm(ctx, 67, 45, 33, &err) == CG_OK, "%s",
                      TT_ERR);
        ck_assert_msg(err < 1e-5, "error %g", err);
    }
    cg_context_free(ctx);
    unsetenv("CLGRAD_TUNING_DIR");
}
END_TEST

/* A "pack" that is not 0 or 1, or on a class other than NT, makes the
 * entry skipped when the database is read, with a warning naming the
 * file, the entry and the rule; a good one in the same directory is in
 * force. */
START_TEST(bad_gemm_pack_entries_are_skipped_with_a_warning)
{
    static const struct {
        const char *file, *shape;
        long pack;
    } w[3] = {
        { "a-pack2.json", "NT.large", 2 },
        { "b-nnpack.json", "NN.large", 1 },
        { "c-good.json", "NT.small", 1 },
    };
    const char *dir = fresh_dir("badpack"), *log;
    cg_tuning_entry e, got;
    cg_context *ctx;
    int i;

    for (i = 0; i < 3; i++) {
        memset(&e, 0, sizeof e);
        strcpy(e.kernel, "gemm");
        strcpy(e.shape, w[i].shape);
        ck_assert_int_eq(cg_kernel_source_hash("gemm", e.source_hash),
                         CG_OK);
        e.nparams = 2;
        strcpy(e.names[0], "TM");
        e.values[0] = 4;
        strcpy(e.names[1], "pack");
        e.values[1] = w[i].pack;
        write_own_db(dir, w[i].file, &e);
    }
    ctx = new_ctx_logged(&log);
    ck_assert_msg(strstr(log, "a-pack2.json: gemm skipped") &&
                  strstr(log, "gemm NT.large: pack = 2 (1: "), "%s", log);
    ck_assert_msg(strstr(log, "b-nnpack.json: gemm skipped") &&
                  strstr(log, "gemm NN.large: pack is for the NT classes "
                         "only"), "%s", log);
    ck_assert_msg(!strstr(log, "c-good.json"), "%s", log);
    ck_assert(!tt_in_force(ctx, "gemm", "NT.large", &got) ||
              strstr(got.origin, dir) == NULL);
    ck_assert(!tt_in_force(ctx, "gemm", "NN.large", &got) ||
              strstr(got.origin, dir) == NULL);
    ck_assert(tt_in_force(ctx, "gemm", "NT.small", &got));
    ck_assert_msg(strstr(got.origin, "c-good.json") != NULL, "%s",
                  got.origin);
    cg_context_free(ctx);
    unsetenv("CLGRAD_TUNING_DIR");
}
END_TEST

/* cg_tuning_db_save (what clgrad-tune --output writes with) onto a
 * symbolic link replaces the file it names and leaves the link a link; an
 * existing file keeps its mode (0640 stays 0640); a directory is refused
 * and left alone. */
START_TEST(saving_writes_through_a_link_and_keeps_the_mode)
{
    char dir[512], target[700], link[700];
    cg_device_info info;
    cg_tuning_entry e = rnn_entry("rnn.lstm", "H9", 2, 1, 16);
    cg_tuning_db *db, *back;
    struct stat st;

    snprintf(dir, sizeof dir, "%s/linked", tt_tmpdir());
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    snprintf(target, sizeof target, "%s/real.json", dir);
    snprintf(link, sizeof link, "%s/link.json", dir);
    write_text(target, "old\n");
    ck_assert_int_eq(chmod(target, 0640), 0);
    ck_assert_int_eq(symlink("real.json", link), 0);
    cg_context_device_info(tt_ctx(), &info);
    db = cg_tuning_db_new(&info);
    ck_assert_ptr_nonnull(db);
    ck_assert_int_eq(cg_tuning_db_put(db, &e), CG_OK);
    ck_assert_msg(cg_tuning_db_save(db, link) == CG_OK, "%s", TT_ERR);
    ck_assert_int_eq(lstat(link, &st), 0);
    ck_assert_msg(S_ISLNK(st.st_mode), "the link became a regular file");
    ck_assert_int_eq(stat(target, &st), 0);
    ck_assert_int_eq(st.st_mode & 07777, 0640);
    back = cg_tuning_db_load(target);
    ck_assert_msg(back != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tuning_db_count(back), 1);
    cg_tuning_db_free(back);
    ck_assert_int_eq(cg_tuning_db_save(db, dir), CG_EIO);
    ck_assert_msg(strstr(cg_last_error(), "is a directory"), "%s", TT_ERR);
    ck_assert_int_eq(stat(dir, &st), 0);
    ck_assert(S_ISDIR(st.st_mode));
    cg_tuning_db_free(db);
}
END_TEST

/* Host copy of a tensor (n floats). */
static void
to_host(cg_tensor *t, float *out, size_t n)
{
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(cg_tensor_numel(t), (int64_t)n);
    ck_assert_int_eq(cg_tensor_to_host(t, out, n * sizeof *out), CG_OK);
}

static void
close_to(const float *got, const double *want, int n, const char *what)
{
    int i;

    for (i = 0; i < n; i++)
        ck_assert_msg(fabs(got[i] - want[i]) <= 2e-6 * (1 + fabs(want[i])),
                      "%s[%d]: %.9g, reference %.9g", what, i, got[i],
                      want[i]);
}

/* A tuning entry for kernels/gemm.cl (kernel "gemm", shape "any") puts
 * its tile in force: clgrad's GEMM kernels are rebuilt with it and stay
 * right (clgrad's GEMM forced, at a size no tile divides). */
START_TEST(gemm_file_entry_is_applied)
{
    static const char *const names[4] = { "TM", "TN", "DTN", "WG" };
    static const long values[4] = { 3, 1, 3, 4 };
    cg_context_options o = { NULL, 0, 1 };
    cg_context *ctx = cg_context_new_with(&o);
    cg_tuning_entry e;
    double err = 1;
    int i;

    ck_assert_msg(ctx != NULL, "%s", TT_ERR);
    cg__gemm_force(ctx, CG__GEMM_CLGRAD);
    memset(&e, 0, sizeof e);
    strcpy(e.kernel, "gemm");
    strcpy(e.shape, "any");
    e.nparams = 4;
    for (i = 0; i < 4; i++) {
        strcpy(e.names[i], names[i]);
        e.values[i] = values[i];
    }
    ck_assert_int_eq(cg_kernel_source_hash("gemm", e.source_hash), CG_OK);
    ck_assert_msg(cg_context_set_tuning(ctx, &e) == CG_OK, "%s", TT_ERR);
    ck_assert_int_eq(cg__param(ctx, CG__P_GEMM_TM), 3);
    ck_assert_int_eq(cg__param(ctx, CG__P_GEMM_TN), 1);
    ck_assert_int_eq(cg__param(ctx, CG__P_GEMM_DTN), 3);
    ck_assert_int_eq(cg__param(ctx, CG__P_GEMM_WG), 4);
    ck_assert_msg(check_gemm(ctx, 37, 67, 19, &err) == CG_OK, "%s", TT_ERR);
    ck_assert_msg(err < 1e-5, "error %g with the entry's tile", err);
    cg_context_free(ctx);
}
END_TEST

/* The work-group sizes of the reduction kernel files: a tuning entry for
 * the file builds all its kernels with the -D option and the host launches
 * with the same size; results match a double reference with each size. */
START_TEST(file_work_group_sizes_are_applied)
{
    static const struct { const char *file, *param; } files[] = {
        { "reduce", "RWG" }, { "softmax", "SWG" }, { "layer_norm", "LWG" },
        { "loss", "LWG" }, { "optim", "RWG" }
    };
    static const long sizes[] = { 16, 128 };
    enum { R = 7, C = 77 };
    cg_context_options o = { NULL, 0, 1 };
    cg_context *ctx = cg_context_new_with(&o);
    int64_t xs[2] = { R, C }, ts[1] = { R }, ns[1] = { C };
    float x[R * C], out[R * C];
    double ref[R * C];
    int32_t tg[R];
    int f, z, i, j;

    ck_assert_msg(ctx != NULL, "%s", TT_ERR);
    for (i = 0; i < R * C; i++)
        x[i] = (float)(((i * 7919) % 1000) / 250.0 - 2.0);
    for (i = 0; i < R; i++)
        tg[i] = (i * 11) % C;
    /* Under a memory checker one size (every program built costs tens of
     * seconds there). */
    for (z = 0; z < (tt_checker() ? 1 : 2); z++)
        for (f = 0; f < 5; f++) {
            cg_tuning_entry e;
            cg_tensor *t = cg_tensor_from_host(ctx, CG_F32, 2, xs, x), *y;
            char defs[32];

            memset(&e, 0, sizeof e);
            strcpy(e.kernel, files[f].file);
            strcpy(e.shape, "any");
            e.nparams = 1;
            strcpy(e.names[0], files[f].param);
            e.values[0] = sizes[z];
            ck_assert_int_eq(cg_kernel_source_hash(files[f].file,
                                                   e.source_hash), CG_OK);
            ck_assert_msg(cg_context_set_tuning(ctx, &e) == CG_OK, "%s",
                          TT_ERR);
            switch (f) {
            case 0: {                       /* row sums */
                int axis = 1;

                y = cg_sum(t, 1, &axis, 0);
                to_host(y, out, R);
                for (i = 0; i < R; i++) {
                    ref[i] = 0;
                    for (j = 0; j < C; j++)
                        ref[i] += x[i * C + j];
                }
                close_to(out, ref, R, "sum");
                break;
            }
            case 1:                         /* softmax over rows */
                y = cg_softmax(t, 1);
                to_host(y, out, R * C);
                for (i = 0; i < R; i++) {
                    double m = -1e30, s = 0;

                    for (j = 0; j < C; j++)
                        m = x[i * C + j] > m ? x[i * C + j] : m;
                    for (j = 0; j < C; j++)
                        s += exp(x[i * C + j] - m);
                    for (j = 0; j < C; j++)
                        ref[i * C + j] = exp(x[i * C + j] - m) / s;
                }
                close_to(out, ref, R * C, "softmax");
                break;
            case 2:                         /* layer norm over rows */
                y = cg_layer_norm(t, 1, ns, NULL, NULL, 1e-5f);
                to_host(y, out, R * C);
                for (i = 0; i < R; i++) {
                    double m = 0, v = 0;

                    for (j = 0; j < C; j++)
                        m += x[i * C + j];
                    m /= C;
                    for (j = 0; j < C; j++)
                        v += (x[i * C + j] - m) * (x[i * C + j] - m);
                    v /= C;
                    for (j = 0; j < C; j++)
                        ref[i * C + j] = (x[i * C + j] - m) / sqrt(v + 1e-5);
                }
                close_to(out, ref, R * C, "layer_norm");
                break;
            case 3: {                       /* cross-entropy, summed */
                cg_tensor *tt = cg_tensor_from_host(ctx, CG_I32, 1, ts, tg);
                double s = 0;

                y = cg_cross_entropy(t, tt, CG_REDUCTION_SUM,
                                     CG_IGNORE_INDEX, 0.0f);
                to_host(y, out, 1);
                for (i = 0; i < R; i++) {
                    double m = -1e30, z2 = 0;

                    for (j = 0; j < C; j++)
                        m = x[i * C + j] > m ? x[i * C + j] : m;
                    for (j = 0; j < C; j++)
                        z2 += exp(x[i * C + j] - m);
                    s += m + log(z2) - x[i * C + tg[i]];
                }
                ref[0] = s;
                close_to(out, ref, 1, "cross_entropy");
                cg_tensor_free(tt);
                break;
            }
            default: {                      /* gradient norm */
                cg_tensor *sq;
                float norm = 0;
                double s = 0;

                ck_assert_int_eq(cg_tensor_set_requires_grad(t, 1), CG_OK);
                sq = cg_mul(t, t);
                y = cg_sum(sq, 0, NULL, 0);
                ck_assert_int_eq(cg_backward(y, NULL, 0), CG_OK);
                ck_assert_msg(cg_clip_grad_norm(&t, 1, 1e30, 2.0, &norm)
                              == CG_OK, "%s", TT_ERR);
                for (i = 0; i < R * C; i++)
                    s += 4.0 * x[i] * x[i];
                ref[0] = sqrt(s);
                out[0] = norm;
                close_to(out, ref, 1, "grad norm");
                cg_tensor_free(sq);
                break;
            }
            }
            snprintf(defs, sizeof defs, "-D%s=%ld", files[f].param,
                     sizes[z]);
            ck_assert_msg(has_program(ctx, files[f].file, defs),
                          "no %s program built with %s", files[f].file,
                          defs);
            cg_tensor_free(y);
            cg_tensor_free(t);
        }
    /* Not a power of two: refused. */
    {
        cg_tuning_entry e;

        memset(&e, 0, sizeof e);
        strcpy(e.kernel, "softmax");
        strcpy(e.shape, "any");
        e.nparams = 1;
        strcpy(e.names[0], "SWG");
        e.values[0] = 48;
        ck_assert_int_eq(cg_context_set_tuning(ctx, &e), CG_EINVAL);
        ck_assert_msg(strstr(cg_last_error(), "power of two"), "%s", TT_ERR);
    }
    cg_context_free(ctx);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("tune");
    TCase *tc = tcase_create("tune");

    tt_require_device();
    if (cg_kernel_source_hash("rnn", rnn_hash) != CG_OK) {
        fprintf(stderr, "%s\n", cg_last_error());
        return 1;
    }
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, database_round_trip);
    tcase_add_test(tc, lookup_order);
    tcase_add_test(tc, vendor_entries_are_narrowed_to_the_device);
    tcase_add_test(tc, user_file_beats_shipped);
    tcase_add_test(tc, shipped_entries_name_current_hashes);
    tcase_add_test(tc, bad_and_stale_files_are_skipped_with_a_warning);
    tcase_add_test(tc, invalid_clblast_parameters_are_skipped_with_a_warning);
    tcase_add_test(tc, bad_gemm_pack_entries_are_skipped_with_a_warning);
    tcase_add_test(tc, saving_writes_through_a_link_and_keeps_the_mode);
    tcase_add_test(tc, own_parameters_become_build_options);
    tcase_add_test(tc, file_work_group_sizes_are_applied);
    tcase_add_test(tc, gemm_file_entry_is_applied);
    tcase_add_test(tc, clblast_parameters_are_applied);
    suite_add_tcase(s, tc);
    return tt_run(s);
}
