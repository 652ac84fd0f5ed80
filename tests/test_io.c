/* SPDX-License-Identifier: MIT */
/*
 * tests/test_io.c - checkpoints: safetensors round trips of tensors,
 * layers, metadata and the generator; the file's layout byte by byte;
 * all-or-nothing restores; atomic saves; and one hand-made bad file per
 * fault the loader must catch, each failing with CG_EFORMAT and a message
 * that names it.  (tests/test_io_python.c checks the files against
 * PyTorch.)
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/internal.h"
#include "testutil.h"

static void
path_in_tmp(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", tt_tmpdir(), name);
}

static void
write_bytes(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");

    ck_assert(f != NULL);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

static unsigned char *
read_bytes(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf;
    long n;

    ck_assert(f != NULL);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc((size_t)n + 1);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* The number of directory entries whose name contains ".tmp.". */
static int
count_tmp_files(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    ck_assert(d != NULL);
    while ((e = readdir(d)) != NULL)
        n += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

START_TEST(tensors_and_metadata_round_trip)
{
    cg_context *ctx = tt_ctx();
    float a[6] = { 1.5f, -2.25f, 3e-8f, 1e30f, -0.0f, 7.0f }, back[6];
    int32_t ids[5] = { 0, -1, 2147483647, -2147483647 - 1, 42 };
    int64_t sa[2] = { 2, 3 }, si = 5, s0 = 0, shape[CG_MAX_DIMS], iv;
    float scalar = 0.125f;
    cg_checkpoint *ck = cg_checkpoint_new(), *in;
    cg_tensor *t = cg_tensor_from_host(ctx, CG_F32, 2, sa, a), *u;
    const int32_t *ids_back;
    const char *name = "lstm.weight_ih_l0";
    char path[512];
    cg_dtype dt;
    size_t bytes;
    double dv;
    int nd;

    ck_assert(ck && t);
    ck_assert_int_eq(cg_checkpoint_add_tensor(ck, name, t), CG_OK);
    ck_assert_int_eq(cg_checkpoint_add_host(ck, "ids", CG_I32, 1, &si, ids),
                     CG_OK);
    ck_assert_int_eq(cg_checkpoint_add_host(ck, "scalar", CG_F32, 0, NULL,
                                            &scalar), CG_OK);
    ck_assert_int_eq(cg_checkpoint_add_host(ck, "empty", CG_F32, 1, &s0,
                                            NULL), CG_OK);
    /* Names JSON must escape, and a replaced entry keeps its place. */
    ck_assert_int_eq(cg_checkpoint_add_host(ck, "we\"ird/n\\ame \xc3\xa9",
                                            CG_I32, 1, &si, ids), CG_OK);
    ck_assert_int_eq(cg_checkpoint_add_host(ck, "ids", CG_I32, 1, &si, ids),
                     CG_OK);
    ck_assert_int_eq(cg_checkpoint_set_meta(ck, "config",
                                            "{\"hidden\": 256, \"lr\": 2e-3}"),
                     CG_OK);
    ck_assert_int_eq(cg_checkpoint_set_meta_int(ck, "step", -1234567890123LL),
                     CG_OK);
    ck_assert_int_eq(cg_checkpoint_set_meta_double(ck, "lr", 0.1), CG_OK);
    path_in_tmp(path, sizeof path, "round.safetensors");
    ck_assert_msg(cg_checkpoint_save(ck, path) == CG_OK, "%s", TT_ERR);

    in = cg_checkpoint_load(path);
    ck_assert_msg(in != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_checkpoint_num_tensors(in), 5);
    ck_assert_str_eq(cg_checkpoint_tensor_name(in, 0), name);
    ck_assert_str_eq(cg_checkpoint_tensor_name(in, 1), "ids");
    ck_assert_str_eq(cg_checkpoint_tensor_name(in, 4),
                     "we\"ird/n\\ame \xc3\xa9");
    ck_assert_ptr_null(cg_checkpoint_tensor_name(in, 5));
    ck_assert_int_eq(cg_checkpoint_tensor_info(in, name, &dt, &nd, shape),
                     CG_OK);
    ck_assert(dt == CG_F32 && nd == 2 && shape[0] == 2 && shape[1] == 3);
    u = cg_checkpoint_tensor(in, ctx, name);
    ck_assert_msg(u != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_to_host(u, back, sizeof back), CG_OK);
    ck_assert(memcmp(a, back, sizeof a) == 0);       /* bit-exact, -0 too */
    ids_back = cg_checkpoint_tensor_data(in, "ids", &bytes);
    ck_assert(ids_back && bytes == sizeof ids);
    ck_assert(memcmp(ids, ids_back, sizeof ids) == 0);
    ck_assert(*(const float *)cg_checkpoint_tensor_data(in, "scalar",
                                                         &bytes) == 0.125f);
    ck_assert_int_eq(cg_checkpoint_tensor_info(in, "scalar", NULL, &nd,
                                               NULL), CG_OK);
    ck_assert_int_eq(nd, 0);
    ck_assert_int_eq(cg_checkpoint_tensor_info(in, "empty", NULL, &nd,
                                               shape), CG_OK);
    ck_assert(nd == 1 && shape[0] == 0);
    ck_assert_ptr_null(cg_checkpoint_tensor(in, ctx, "empty"));
    ck_assert_int_eq(cg_checkpoint_tensor_info(in, "nope", NULL, NULL, NULL),
                     CG_EFORMAT);
    ck_assert_ptr_nonnull(strstr(TT_ERR, "nope"));

    ck_assert_str_eq(cg_checkpoint_get_meta(in, "format"), "pt");
    ck_assert_str_eq(cg_checkpoint_get_meta(in, "config"),
                     "{\"hidden\": 256, \"lr\": 2e-3}");
    ck_assert_int_eq(cg_checkpoint_get_meta_int(in, "step", &iv), CG_OK);
    ck_assert(iv == -1234567890123LL);
    ck_assert_int_eq(cg_checkpoint_get_meta_double(in, "lr", &dv), CG_OK);
    ck_assert(dv == 0.1);
    ck_assert_int_eq(cg_checkpoint_get_meta_int(in, "lr", &iv), CG_EFORMAT);
    ck_assert_int_eq(cg_checkpoint_get_meta_double(in, "config", &dv),
                     CG_EFORMAT);
    ck_assert_ptr_null(cg_checkpoint_get_meta(in, "missing"));
    ck_assert_int_eq(cg_checkpoint_num_meta(in), 4);
    ck_assert_str_eq(cg_checkpoint_meta_key(in, 0), "format");

    cg_tensor_free(t);
    cg_tensor_free(u);
    cg_checkpoint_free(ck);
    cg_checkpoint_free(in);
}
END_TEST

/* The bytes on disk, as the safetensors format lays them out. */
START_TEST(file_layout_is_safetensors)
{
    float v[2] = { 1.0f, -2.0f };
    int32_t k = 7;
    int64_t two = 2, one = 1;
    cg_checkpoint *ck = cg_checkpoint_new();
    unsigned char *buf, expect_data[12] = { 0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0,
                                            7, 0, 0, 0 };
    const char *header =
        "{\"__metadata__\":{\"format\":\"pt\"},"
        "\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"k\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[8,12]}}";
    uint64_t hlen = 0;
    char path[512];
    size_t len, i;

    ck_assert_int_eq(cg_checkpoint_add_host(ck, "w", CG_F32, 1, &two, v),
                     CG_OK);
    ck_assert_int_eq(cg_checkpoint_add_host(ck, "k", CG_I32, 1, &one, &k),
                     CG_OK);
    path_in_tmp(path, sizeof path, "layout.safetensors");
    ck_assert_int_eq(cg_checkpoint_save(ck, path), CG_OK);
    buf = read_bytes(path, &len);
    for (i = 0; i < 8; i++)
        hlen |= (uint64_t)buf[i] << (8 * i);
    ck_assert_uint_eq((8 + hlen) % 8, 0);           /* data 8-aligned */
    ck_assert_uint_eq(len, 8 + hlen + 12);
    ck_assert(memcmp(buf + 8, header, strlen(header)) == 0);
    for (i = 8 + strlen(header); i < 8 + hlen; i++)
        ck_assert_int_eq(buf[i], ' ');
    ck_assert(memcmp(buf + 8 + hlen, expect_data, 12) == 0);
    free(buf);
    cg_checkpoint_free(ck);
}
END_TEST

START_TEST(layer_parameters_round_trip_with_pytorch_names)
{
    cg_context *ctx = tt_ctx();
    cg_rnn_options o = { CG_LSTM, 3, 4, 2, 1, 0, 0 };
    cg_module *a = cg_rnn_new(ctx, &o), *b = cg_rnn_new(ctx, &o);
    cg_checkpoint *ck = cg_checkpoint_new(), *in;
    char path[512];
    int i, n;

    ck_assert(a && b && ck);
    ck_assert_int_eq(cg_checkpoint_add_module(ck, "lstm.", a), CG_OK);
    n = cg_module_num_params(a);
    ck_assert_int_eq(cg_checkpoint_num_tensors(ck), n);
    ck_assert_str_eq(cg_checkpoint_tensor_name(ck, 0), "lstm.weight_ih_l0");
    ck_assert_ptr_nonnull(cg_checkpoint_tensor_data(
        ck, "lstm.bias_hh_l1_reverse", NULL));
    path_in_tmp(path, sizeof path, "lstm.safetensors");
    ck_assert_int_eq(cg_checkpoint_save(ck, path), CG_OK);
    in = cg_checkpoint_load(path);
    ck_assert_msg(in != NULL, "%s", TT_ERR);
    ck_assert_msg(cg_checkpoint_restore_module(in, "lstm.", b) == CG_OK,
                  "%s", TT_ERR);
    for (i = 0; i < n; i++) {
        cg_tensor *pa = cg_module_param(a, i, NULL);
        cg_tensor *pb = cg_module_param(b, i, NULL);
        size_t bytes = (size_t)cg_tensor_numel(pa) * sizeof(float);
        float *x = malloc(bytes), *y = malloc(bytes);

        ck_assert_int_eq(cg_tensor_to_host(pa, x, bytes), CG_OK);
        ck_assert_int_eq(cg_tensor_to_host(pb, y, bytes), CG_OK);
        ck_assert(memcmp(x, y, bytes) == 0);
        free(x);
        free(y);
    }
    /* Without the prefix, no name matches: nothing is restored. */
    ck_assert_int_eq(cg_checkpoint_restore_module(in, NULL, b), CG_EFORMAT);
    ck_assert_ptr_nonnull(strstr(TT_ERR, "weight_ih_l0"));
    cg_checkpoint_free(ck);
    cg_checkpoint_free(in);
    cg_module_free(a);
    cg_module_free(b);
}
END_TEST

START_TEST(restore_checks_everything_before_writing)
{
    cg_context *ctx = tt_ctx();
    float one[4] = { 1, 1, 1, 1 }, nine[4] = { 9, 9, 9, 9 }, back[4];
    int64_t s4 = 4, s22[2] = { 2, 2 }, s3 = 3;
    cg_checkpoint *ck = cg_checkpoint_new();
    cg_tensor *a = cg_tensor_from_host(ctx, CG_F32, 1, &s4, nine);
    cg_tensor *b = cg_tensor_from_host(ctx, CG_F32, 2, s22, nine);
    cg_tensor *c = cg_tensor_from_host(ctx, CG_F32, 1, &s3, nine);
    cg_tensor *bt = cg_transpose(b, 0, 1);
    cg_tensor *ta[2], *tb[2];
    const char *names[2] = { "a", "b" };
    int i;

    ck_assert(ck && a && b && c && bt);
    ck_assert_int_eq(cg_checkpoint_add_host(ck, "a", CG_F32, 1, &s4, one),
                     CG_OK);
    ck_assert_int_eq(cg_checkpoint_add_host(ck, "b", CG_I32, 1, &s4, one),
                     CG_OK);
    ta[0] = a;
    ta[1] = c;                 /* "b" is I32 [4]: wrong dtype for c */
    ck_assert_int_eq(cg_checkpoint_restore(ck, 2, names, ta), CG_EFORMAT);
    ck_assert_ptr_nonnull(strstr(TT_ERR, "I32"));
    ck_assert_int_eq(cg_checkpoint_add_host(ck, "b", CG_F32, 1, &s4, one),
                     CG_OK);
    ck_assert_int_eq(cg_checkpoint_restore(ck, 2, names, ta), CG_EFORMAT);
    ck_assert_ptr_nonnull(strstr(TT_ERR, "[4]"));
    ck_assert_ptr_nonnull(strstr(TT_ERR, "[3]"));
    ta[1] = b;                 /* [2, 2] is not [4] either */
    ck_assert_int_eq(cg_checkpoint_restore(ck, 2, names, ta), CG_EFORMAT);
    names[1] = "missing";
    ck_assert_int_eq(cg_checkpoint_restore(ck, 2, names, ta), CG_EFORMAT);
    ck_assert_ptr_nonnull(strstr(TT_ERR, "missing"));
    ck_assert_int_eq(cg_checkpoint_add_host(ck, "b", CG_F32, 2, s22, one),
                     CG_OK);
    names[1] = "b";
    tb[0] = a;
    tb[1] = bt;                /* right shape, but a non-contiguous view */
    ck_assert_int_eq(cg_checkpoint_restore(ck, 2, names, tb), CG_EINVAL);
    /* None of the failures wrote a: */
    ck_assert_int_eq(cg_tensor_to_host(a, back, sizeof back), CG_OK);
    for (i = 0; i < 4; i++)
        ck_assert(back[i] == 9);
    ck_assert_int_eq(cg_checkpoint_restore(ck, 2, names, ta), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(a, back, sizeof back), CG_OK);
    for (i = 0; i < 4; i++)
        ck_assert(back[i] == 1);
    ck_assert_int_eq(cg_tensor_to_host(b, back, sizeof back), CG_OK);
    ck_assert(back[3] == 1);
    cg_tensor_free(a);
    cg_tensor_free(b);
    cg_tensor_free(bt);
    cg_tensor_free(c);
    cg_checkpoint_free(ck);
}
END_TEST

START_TEST(generator_state_resumes_the_same_numbers)
{
    cg_context *ctx = tt_ctx();
    int64_t n = 16;
    float x[16], y[16];
    cg_checkpoint *ck = cg_checkpoint_new(), *in;
    cg_tensor *r;
    char path[512];

    ck_assert_int_eq(cg_manual_seed(ctx, 0xfeedbeefcafeULL), CG_OK);
    r = cg_rand_uniform(ctx, 1, &n, 0, 1);
    cg_tensor_free(r);
    ck_assert_int_eq(cg_checkpoint_add_generator(ck, ctx), CG_OK);
    path_in_tmp(path, sizeof path, "rng.safetensors");
    ck_assert_int_eq(cg_checkpoint_save(ck, path), CG_OK);
    r = cg_rand_uniform(ctx, 1, &n, 0, 1);
    ck_assert_int_eq(cg_tensor_to_host(r, x, sizeof x), CG_OK);
    cg_tensor_free(r);
    ck_assert_int_eq(cg_manual_seed(ctx, 1), CG_OK);
    in = cg_checkpoint_load(path);
    ck_assert_ptr_nonnull(in);
    ck_assert_int_eq(cg_checkpoint_restore_generator(in, ctx), CG_OK);
    r = cg_rand_uniform(ctx, 1, &n, 0, 1);
    ck_assert_int_eq(cg_tensor_to_host(r, y, sizeof y), CG_OK);
    ck_assert(memcmp(x, y, sizeof x) == 0);
    cg_tensor_free(r);
    /* A malformed state is refused. */
    ck_assert_int_eq(cg_checkpoint_set_meta(in, "clgrad.generator.offset",
                                            "-3"), CG_OK);
    ck_assert_int_eq(cg_checkpoint_restore_generator(in, ctx), CG_EFORMAT);
    cg_checkpoint_free(ck);
    cg_checkpoint_free(in);
}
END_TEST

START_TEST(bad_names_are_refused)
{
    cg_checkpoint *ck = cg_checkpoint_new();
    int64_t one = 1;
    float v = 1;
    char longname[1100];

    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    ck_assert_int_eq(cg_checkpoint_add_host(ck, "__metadata__", CG_F32, 1,
                                            &one, &v), CG_EINVAL);
    ck_assert_int_eq(cg_checkpoint_add_host(ck, "", CG_F32, 1, &one, &v),
                     CG_EINVAL);
    ck_assert_int_eq(cg_checkpoint_add_host(ck, longname, CG_F32, 1, &one,
                                            &v), CG_EINVAL);
    ck_assert_int_eq(cg_checkpoint_add_host(ck, "bad\xff", CG_F32, 1, &one,
                                            &v), CG_EINVAL);
    ck_assert_int_eq(cg_checkpoint_set_meta(ck, "k", "\xc0\x80"), CG_EINVAL);
    ck_assert_int_eq(cg_checkpoint_add_host(ck, "x", (cg_dtype)7, 1, &one,
                                            &v), CG_EDTYPE);
    ck_assert_int_eq(cg_checkpoint_num_tensors(ck), 0);
    ck_assert_int_eq(cg_checkpoint_num_meta(ck), 0);
    cg_checkpoint_free(ck);
}
END_TEST

START_TEST(saves_are_atomic)
{
    const char *dir = tt_tmpdir();
    cg_checkpoint *ck = cg_checkpoint_new(), *in;
    int64_t one = 1;
    float v = 1, w = 2;
    char path[512], sub[512], bad[512];
    struct stat st;

    path_in_tmp(path, sizeof path, "atomic.safetensors");
    ck_assert_int_eq(cg_checkpoint_add_host(ck, "v", CG_F32, 1, &one, &v),
                     CG_OK);
    ck_assert_int_eq(cg_checkpoint_save(ck, path), CG_OK);
    ck_assert_int_eq(cg_checkpoint_add_host(ck, "v", CG_F32, 1, &one, &w),
                     CG_OK);
    ck_assert_int_eq(cg_checkpoint_save(ck, path), CG_OK);   /* replaces */
    in = cg_checkpoint_load(path);
    ck_assert(in && *(const float *)cg_checkpoint_tensor_data(in, "v", NULL)
                    == 2);
    cg_checkpoint_free(in);
    ck_assert_int_eq(count_tmp_files(dir), 0);
    /* The rename fails onto a directory: the directory is untouched and
     * the temporary file is gone. */
    path_in_tmp(sub, sizeof sub, "a-directory");
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    ck_assert_int_eq(cg_checkpoint_save(ck, sub), CG_EIO);
    ck_assert_ptr_nonnull(strstr(TT_ERR, "a-directory"));
    ck_assert(stat(sub, &st) == 0 && S_ISDIR(st.st_mode));
    ck_assert_int_eq(count_tmp_files(dir), 0);
    path_in_tmp(bad, sizeof bad, "no/such/dir/x.safetensors");
    ck_assert_int_eq(cg_checkpoint_save(ck, bad), CG_EIO);
    ck_assert_ptr_null(cg_checkpoint_load(bad));
    ck_assert_int_eq(cg__last_status(), CG_EIO);
    cg_checkpoint_free(ck);
}
END_TEST

/* ------------------------------------------------------------ bad files */

typedef struct bad_file {
    const char *what;
    const char *header;   /* NULL: raw bytes below */
    size_t data;          /* bytes of data after the header */
    const char *expect;   /* in the message */
} bad_file;

#define E(dt, shape, b, e) \
    "{\"dtype\":\"" dt "\",\"shape\":" shape ",\"data_offsets\":[" #b "," \
    #e "]}"

static const bad_file bad_files[] = {
    { "malformed JSON", "{\"a\": ", 0, "malformed JSON" },
    { "a trailing comma", "{\"a\":" E("F32", "[1]", 0, 4) ",}", 4,
      "malformed JSON" },
    { "text after the object", "{} x", 0, "text after" },
    { "not an object", "[1, 2]", 0, "not an object" },
    { "invalid UTF-8", "{\"\xff\":1}", 0, "malformed JSON" },
    { "an entry that is a number", "{\"a\": 5}", 0, "not a JSON object" },
    { "a missing field", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4,
      "needs \"dtype\"" },
    { "an extra field", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],"
      "\"data_offsets\":[0,4],\"x\":1}}", 4, "other than" },
    { "dtype not a string", "{\"a\":{\"dtype\":3,\"shape\":[1],"
      "\"data_offsets\":[0,4]}}", 4, "not a string" },
    { "an unsupported dtype", "{\"a\":" E("F64", "[1]", 0, 8) "}", 8,
      "F64" },
    { "a negative size", "{\"a\":" E("F32", "[-1]", 0, 4) "}", 4,
      "shape[0]" },
    { "a fractional size", "{\"a\":" E("F32", "[1.5]", 0, 4) "}", 4,
      "shape[0]" },
    { "shape not an array", "{\"a\":" E("F32", "4", 0, 4) "}", 4,
      "not an array" },
    { "too many dimensions", "{\"a\":" E("F32", "[1,1,1,1,1,1,1,1,1]", 0, 4)
      "}", 4, "at most 8" },
    { "one offset", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],"
      "\"data_offsets\":[4]}}", 4, "two non-negative" },
    { "a negative offset", "{\"a\":" E("F32", "[1]", -4, 0) "}", 4,
      "two non-negative" },
    { "offsets in reverse", "{\"a\":" E("F32", "[1]", 4, 0) "}", 4,
      "end before" },
    { "an offset beyond the data", "{\"a\":" E("F32", "[2]", 0, 8) "}", 4,
      "truncated" },
    { "a huge offset", "{\"a\":" E("F32", "[1]", 0, 18446744073709551615)
      "}", 4, "two non-negative" },
    { "shape and range disagree", "{\"a\":" E("F32", "[3]", 0, 8) "}", 8,
      "needs 12 bytes" },
    { "a shape that overflows", "{\"a\":" E("F32",
      "[4294967296,4294967296,4294967296]", 0, 4) "}", 4,
      "needs 18446744073709551615 bytes" },
    { "overlapping tensors", "{\"a\":" E("F32", "[2]", 0, 8) ",\"b\":"
      E("F32", "[2]", 4, 12) "}", 12, "overlap" },
    { "a gap between tensors", "{\"a\":" E("F32", "[1]", 0, 4) ",\"b\":"
      E("F32", "[1]", 8, 12) "}", 12, "belong to no tensor" },
    { "data after the last tensor", "{\"a\":" E("F32", "[1]", 0, 4) "}", 8,
      "belong to no tensor" },
    { "data but no tensors", "{}", 4, "belong to no tensor" },
    { "metadata not an object", "{\"__metadata__\":[1]}", 0,
      "__metadata__" },
    { "a metadata value not a string", "{\"__metadata__\":{\"step\":3}}", 0,
      "not a string" },
    { "an empty tensor name", "{\"\":" E("F32", "[1]", 0, 4) "}", 4,
      "empty name" },
};

static void
write_crafted(const char *path, const char *header, size_t data)
{
    size_t hl = strlen(header), i;
    unsigned char *buf = calloc(1, 8 + hl + data);

    for (i = 0; i < 8; i++)
        buf[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(buf + 8, header, hl);
    write_bytes(path, buf, 8 + hl + data);
    free(buf);
}

static void
expect_bad(const char *path, const char *what, const char *expect)
{
    cg_checkpoint *ck = cg_checkpoint_load(path);

    ck_assert_msg(ck == NULL, "%s: loaded", what);
    ck_assert_msg(cg__last_status() == CG_EFORMAT, "%s: %s", what, TT_ERR);
    ck_assert_msg(strstr(TT_ERR, expect) != NULL && strstr(TT_ERR, path),
                  "%s: message '%s' lacks '%s' or the path", what, TT_ERR,
                  expect);
}

START_TEST(each_bad_file_fails_with_eformat)
{
    const bad_file *b = &bad_files[_i];
    char path[512];

    path_in_tmp(path, sizeof path, "bad.safetensors");
    write_crafted(path, b->header, b->data);
    expect_bad(path, b->what, b->expect);
}
END_TEST

START_TEST(short_and_truncated_files_fail)
{
    unsigned char raw[16] = { 0 }, *buf;
    cg_checkpoint *ck = cg_checkpoint_new();
    int64_t n = 100;
    float v[100] = { 0 };
    char path[512];
    size_t len;

    path_in_tmp(path, sizeof path, "short.safetensors");
    write_bytes(path, raw, 5);
    expect_bad(path, "5 bytes", "too short");
    raw[0] = 9;                                /* header of 9 in 16 bytes */
    write_bytes(path, raw, 16);
    expect_bad(path, "header past the end", "runs past the end");
    memset(raw, 0xff, 8);                      /* 2^64 - 1 */
    write_bytes(path, raw, 16);
    expect_bad(path, "a huge header length", "runs past the end");
    write_bytes(path, raw, 0);
    expect_bad(path, "an empty file", "too short");
    /* A good file cut short, by one byte of data and into its header. */
    ck_assert_int_eq(cg_checkpoint_add_host(ck, "w", CG_F32, 1, &n, v),
                     CG_OK);
    ck_assert_int_eq(cg_checkpoint_save(ck, path), CG_OK);
    buf = read_bytes(path, &len);
    write_bytes(path, buf, len - 1);
    expect_bad(path, "one byte short", "truncated");
    write_bytes(path, buf, 20);
    expect_bad(path, "cut in the header", "runs past the end");
    free(buf);
    cg_checkpoint_free(ck);
    /* Issue 16, defect 7: a directory asked malloc for LONG_MAX + 1. */
    ck_assert_ptr_null(cg_checkpoint_load(tt_tmpdir()));
    ck_assert_int_eq(cg__last_status(), CG_EIO);
    ck_assert_msg(strstr(cg_last_error(), "is a directory, not a file") &&
                  strstr(cg_last_error(), tt_tmpdir()), "%s",
                  cg_last_error());
}
END_TEST

START_TEST(a_bad_file_leaves_the_model_unchanged)
{
    cg_context *ctx = tt_ctx();
    cg_module *fc = cg_linear_new(ctx, 3, 2, 1);
    cg_checkpoint *ck = cg_checkpoint_new(), *in;
    int64_t s[2] = { 2, 3 };
    float w[6] = { 1, 2, 3, 4, 5, 6 }, before[6], after[6];
    char path[512];

    ck_assert(fc && ck);
    ck_assert_int_eq(cg_tensor_to_host(cg_module_param(fc, 0, NULL), before,
                                       sizeof before), CG_OK);
    /* A checkpoint with the weight but not the bias: refused whole. */
    ck_assert_int_eq(cg_checkpoint_add_host(ck, "fc.weight", CG_F32, 2, s,
                                            w), CG_OK);
    path_in_tmp(path, sizeof path, "partial.safetensors");
    ck_assert_int_eq(cg_checkpoint_save(ck, path), CG_OK);
    in = cg_checkpoint_load(path);
    ck_assert_ptr_nonnull(in);
    ck_assert_int_eq(cg_checkpoint_restore_module(in, "fc.", fc),
                     CG_EFORMAT);
    ck_assert_ptr_nonnull(strstr(TT_ERR, "fc.bias"));
    ck_assert_int_eq(cg_tensor_to_host(cg_module_param(fc, 0, NULL), after,
                                       sizeof after), CG_OK);
    ck_assert(memcmp(before, after, sizeof before) == 0);
    cg_checkpoint_free(in);
    cg_checkpoint_free(ck);
    cg_module_free(fc);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("io");
    TCase *tc = tcase_create("checkpoints");

    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, tensors_and_metadata_round_trip);
    tcase_add_test(tc, file_layout_is_safetensors);
    tcase_add_test(tc, layer_parameters_round_trip_with_pytorch_names);
    tcase_add_test(tc, restore_checks_everything_before_writing);
    tcase_add_test(tc, generator_state_resumes_the_same_numbers);
    tcase_add_test(tc, bad_names_are_refused);
    tcase_add_test(tc, saves_are_atomic);
    tcase_add_loop_test(tc, each_bad_file_fails_with_eformat, 0,
                        (int)(sizeof bad_files / sizeof bad_files[0]));
    tcase_add_test(tc, short_and_truncated_files_fail);
    tcase_add_test(tc, a_bad_file_leaves_the_model_unchanged);
    suite_add_tcase(s, tc);
    return tt_run(s);
}
