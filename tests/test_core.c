/* SPDX-License-Identifier: MIT */
/*
 * tests/test_core.c - status codes, their strings, and the thread-local
 * last-error message.  Needs no device.
 */
#include <pthread.h>
#include <string.h>

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
    suite_add_tcase(s, tc);
    return tt_run(s);
}
