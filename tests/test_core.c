/* SPDX-License-Identifier: MIT */
/*
 * tests/test_core.c - status codes, their strings, and the thread-local
 * last-error message; the checked size arithmetic; reading files.  Needs
 * no device.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The inline helpers of core/internal.h compile here as the portable
 * fallback; the library's cg__checked_* use the compiler's builtins when
 * configure found them.  The test holds both to the exact answer. */
#undef HAVE_BUILTIN_OVERFLOW
#include "core/internal.h"
#include "testutil.h"

static const int all_status[] = {
#define X_(name, value, text) name,
    CG_STATUS_LIST(X_)
#undef X_
};

START_TEST(every_status_has_a_distinct_name_and_text)
{
    size_t i, j, n = sizeof all_status / sizeof all_status[0];

    for (i = 0; i < n; i++) {
        const char *name = cg_status_name(all_status[i]);
        const char *text = cg_strerror(all_status[i]);

        ck_assert_ptr_nonnull(name);
        ck_assert_ptr_nonnull(text);
        ck_assert_msg(strncmp(name, "CG_", 3) == 0, "%s", name);
        ck_assert_str_ne(text, "unknown error");
        ck_assert(all_status[i] == 0 || all_status[i] <= -2000);
        for (j = 0; j < i; j++)
            ck_assert_str_ne(name, cg_status_name(all_status[j]));
    }
}
END_TEST

START_TEST(opencl_codes_pass_through_with_their_names)
{
    int code;

    ck_assert_str_eq(cg_status_name(-5), "CL_OUT_OF_RESOURCES");
    ck_assert_str_eq(cg_status_name(-30), "CL_INVALID_VALUE");
    ck_assert_str_eq(cg_status_name(-11), "CL_BUILD_PROGRAM_FAILURE");
    ck_assert_ptr_nonnull(strstr(cg_strerror(-4), "CL_MEM_OBJECT_ALLOCATION"));
    /* Every OpenCL 1.2 code from -1 to -19 and -30 to -68 has a name. */
    for (code = -1; code >= -68; code--) {
        if (code < -19 && code > -30)
            continue;
        ck_assert_msg(strncmp(cg_status_name(code), "CL_", 3) == 0,
                      "code %d has no CL_ name", code);
    }
    ck_assert_str_eq(cg_strerror(-424242), "unknown error");
}
END_TEST

START_TEST(error_message_carries_status_name_and_detail)
{
    int rc = cg__error(CG_ESHAPE, "shapes [%d, %d] and [%d]", 2, 3, 4);

    ck_assert_int_eq(rc, CG_ESHAPE);
    ck_assert_str_eq(cg_last_error(), "CG_ESHAPE: shapes [2, 3] and [4]");
    cg__error_append("; more");
    ck_assert_str_eq(cg_last_error(),
                     "CG_ESHAPE: shapes [2, 3] and [4]; more");
    cg__error_clear();
    ck_assert_str_eq(cg_last_error(), "");
}
END_TEST

static void *
thread_error(void *arg)
{
    (void)arg;
    cg__error(CG_EIO, "from the other thread");
    return (void *)(strstr(cg_last_error(), "other thread") != NULL
                    ? (void *)1 : NULL);
}

START_TEST(last_error_is_per_thread)
{
    pthread_t t;
    void *ok = NULL;

    cg__error(CG_EINVAL, "main thread");
    ck_assert_int_eq(pthread_create(&t, NULL, thread_error, NULL), 0);
    ck_assert_int_eq(pthread_join(t, &ok), 0);
    ck_assert_ptr_nonnull(ok);
    ck_assert_str_eq(cg_last_error(), "CG_EINVAL: main thread");
}
END_TEST

START_TEST(hash_is_stable_and_sensitive)
{
    cg__hash a, b;
    char ha[33], hb[33];

    cg__hash_init(&a);
    cg__hash_str(&a, "ab");
    cg__hash_str(&a, "c");
    cg__hash_init(&b);
    cg__hash_str(&b, "a");
    cg__hash_str(&b, "bc");
    cg__hash_hex(&a, ha);
    cg__hash_hex(&b, hb);
    ck_assert_str_ne(ha, hb);
    /* FNV-1a 128 of the empty input is its offset basis. */
    cg__hash_init(&a);
    cg__hash_hex(&a, ha);
    ck_assert_str_eq(ha, "6c62272e07bb014262b821756295c58d");
    /* Published FNV-1a 128 of "a". */
    cg__hash_update(&a, "a", 1);
    cg__hash_hex(&a, ha);
    ck_assert_str_eq(ha, "d228cb696f1a8caf78912b704e4a8964");
}
END_TEST

/* The reference sequence of SplitMix64 from seed 0 (Vigna's splitmix64.c),
 * and the uniform double made from its top 53 bits. */
START_TEST(splitmix64_matches_the_reference_sequence)
{
    uint64_t s = 0, t = 0;

    ck_assert_uint_eq(cg_splitmix64_next(&s), 0xe220a8397b1dcdafULL);
    ck_assert_uint_eq(cg_splitmix64_next(&s), 0x6e789e6aa1b965f4ULL);
    ck_assert_uint_eq(cg_splitmix64_next(&s), 0x06c45d188009454fULL);
    ck_assert(cg_splitmix64_uniform(&t) ==
              (double)(0xe220a8397b1dcdafULL >> 11) / 9007199254740992.0);
    ck_assert_uint_eq(s, 3 * 0x9e3779b97f4a7c15ULL);
    ck_assert_uint_eq(cg_splitmix64_next(NULL), 0);
}
END_TEST

/* Exact products and sums, computed in 128 bits where the compiler has
 * them and otherwise from the sign and magnitude: whether a op b fits. */
static int
fits_mul_i64(int64_t a, int64_t b)
{
#if defined(__SIZEOF_INT128__)
    __int128 r = (__int128)a * b;

    return r >= INT64_MIN && r <= INT64_MAX;
#else
    long double r = (long double)a * (long double)b;

    return r >= -9223372036854775808.0L && r < 9223372036854775808.0L;
#endif
}

START_TEST(checked_arithmetic_finds_every_overflow)
{
    static const int64_t v[] = {
        0, 1, -1, 2, -2, 3, 9, 6148914691236517206LL, 3037000499LL,
        3037000500LL, -3037000500LL, 4294967296LL, INT32_MAX,
        INT64_MAX, INT64_MAX - 1, INT64_MIN, INT64_MIN + 1,
        INT64_MAX / 2, INT64_MAX / 2 + 1, -(INT64_MAX / 2) - 1,
    };
    static const size_t z[] = {
        0, 1, 2, 4, SIZE_MAX, SIZE_MAX - 1, SIZE_MAX / 2, SIZE_MAX / 2 + 1,
        SIZE_MAX / 4 + 1, (size_t)1 << (sizeof(size_t) * 4),
    };
    size_t n = sizeof v / sizeof v[0], nz = sizeof z / sizeof z[0], i, j;
    int64_t prod;

    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++) {
            int64_t a = v[i], b = v[j], r = 0, q = 0;
            int mul_ok = fits_mul_i64(a, b);
            int add_ok = b > 0 ? a <= INT64_MAX - b : a >= INT64_MIN - b;

            ck_assert_int_eq(cg__mul_i64(a, b, &r), !mul_ok);
            ck_assert_int_eq(cg__checked_mul_i64(a, b, &q, "m"),
                             mul_ok ? CG_OK : CG_ESHAPE);
            if (mul_ok)
                ck_assert(r == (int64_t)((uint64_t)a * (uint64_t)b) &&
                          q == r);
            ck_assert_int_eq(cg__add_i64(a, b, &r), !add_ok);
            ck_assert_int_eq(cg__checked_add_i64(a, b, &q, "s"),
                             add_ok ? CG_OK : CG_ESHAPE);
            if (add_ok)
                ck_assert(r == (int64_t)((uint64_t)a + (uint64_t)b) &&
                          q == r);
        }
    for (i = 0; i < nz; i++)
        for (j = 0; j < nz; j++) {
            size_t a = z[i], b = z[j], r = 0, q = 0;
            int mul_ok = a == 0 || b <= SIZE_MAX / a;
            int add_ok = b <= SIZE_MAX - a;

            ck_assert_int_eq(cg__mul_size(a, b, &r), !mul_ok);
            ck_assert_int_eq(cg__checked_mul_size(a, b, &q, "m"),
                             mul_ok ? CG_OK : CG_ESHAPE);
            if (mul_ok)
                ck_assert(r == a * b && q == r);
            ck_assert_int_eq(cg__add_size(a, b, &r), !add_ok);
            ck_assert_int_eq(cg__checked_add_size(a, b, &q, "s"),
                             add_ok ? CG_OK : CG_ESHAPE);
            if (add_ok)
                ck_assert(r == a + b && q == r);
        }
    /* The message names what was computed and both operands. */
    ck_assert_int_eq(cg__checked_mul_i64(9, 6148914691236517206LL, &prod,
                                         "shape of x"), CG_ESHAPE);
    ck_assert_str_eq(cg_last_error(), "CG_ESHAPE: shape of x: 9 * "
                     "6148914691236517206 overflows a 64-bit integer");
}
END_TEST

/* Issue 16, defect 7: a directory opened for reading "ends" at LONG_MAX,
 * and cg__read_file asked malloc for 9223372036854775808 bytes.  A
 * directory is named as one; a pipe (no size) is read to its end. */
START_TEST(read_file_names_a_directory_and_reads_a_pipe)
{
    const char *tmp = tt_tmpdir();
    char fifo[600], *text;
    size_t len = 99, i;
    static char big[200000];
    pid_t child;
    int st;

    ck_assert_ptr_null(cg__read_file(tmp, &len));
    ck_assert_int_eq(cg__last_status(), CG_EIO);
    ck_assert_msg(strstr(cg_last_error(), "is a directory, not a file") &&
                  strstr(cg_last_error(), tmp), "%s", cg_last_error());
    ck_assert_uint_eq(len, 99);
    ck_assert_ptr_null(cg__read_file("/nonexistent/file", NULL));
    ck_assert_int_eq(cg__last_status(), CG_EIO);
    /* A pipe of more than the first read's 64 KiB. */
    for (i = 0; i < sizeof big; i++)
        big[i] = (char)('a' + i % 26);
    snprintf(fifo, sizeof fifo, "%s/core_fifo", tmp);
    unlink(fifo);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        int w = open(fifo, O_WRONLY);
        size_t done = 0;

        while (w >= 0 && done < sizeof big) {
            ssize_t r = write(w, big + done, sizeof big - done);

            if (r <= 0)
                break;
            done += (size_t)r;
        }
        _exit(0);
    }
    text = cg__read_file(fifo, &len);
    ck_assert_msg(text != NULL, "%s", cg_last_error());
    ck_assert_uint_eq(len, sizeof big);
    ck_assert(memcmp(text, big, sizeof big) == 0 && text[len] == '\0');
    free(text);
    ck_assert_int_eq(waitpid(child, &st, 0), child);
    unlink(fifo);
}
END_TEST

START_TEST(version_is_dotted)
{
    ck_assert_ptr_nonnull(strchr(cg_version(), '.'));
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("core");
    TCase *tc = tcase_create("errors");

    tcase_add_test(tc, every_status_has_a_distinct_name_and_text);
    tcase_add_test(tc, opencl_codes_pass_through_with_their_names);
    tcase_add_test(tc, error_message_carries_status_name_and_detail);
    tcase_add_test(tc, last_error_is_per_thread);
    tcase_add_test(tc, hash_is_stable_and_sensitive);
    tcase_add_test(tc, splitmix64_matches_the_reference_sequence);
    tcase_add_test(tc, version_is_dotted);
    tcase_add_test(tc, checked_arithmetic_finds_every_overflow);
    tcase_add_test(tc, read_file_names_a_directory_and_reads_a_pipe);
    suite_add_tcase(s, tc);
    return tt_run(s);
}
