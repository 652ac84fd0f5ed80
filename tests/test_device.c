/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
/*
 * tests/test_device.c - device enumeration, every selector form, context
 * life cycle, host memory running out while a context is made.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/internal.h"
#include "testutil.h"

START_TEST(devices_are_enumerated_with_sane_properties)
{
    cg_device_info info;
    int n = 0, i;

    ck_assert_int_eq(cg_device_count(&n), CG_OK);
    ck_assert_int_gt(n, 0);
    for (i = 0; i < n; i++) {
        ck_assert_int_eq(cg_device_get_info(i, &info), CG_OK);
        ck_assert_int_eq(info.index, i);
        ck_assert_int_ge(info.platform_index, 0);
        ck_assert(strlen(info.name) > 0);
        ck_assert(strlen(info.platform_name) > 0);
        ck_assert(strncmp(info.opencl_version, "OpenCL ", 7) == 0);
        ck_assert_uint_gt(info.compute_units, 0);
        ck_assert_uint_gt(info.max_work_group_size, 0);
        ck_assert_uint_ge(info.max_work_item_dims, 1);
        ck_assert_uint_gt(info.global_mem_size, 0);
        ck_assert_uint_gt(info.max_alloc_size, 0);
        ck_assert_uint_le(info.max_alloc_size, info.global_mem_size);
        ck_assert_uint_gt(info.local_mem_size, 0);
    }
    ck_assert_int_eq(cg_device_get_info(n, &info), CG_ENODEVICE);
    ck_assert_int_eq(cg_device_get_info(-1, &info), CG_ENODEVICE);
    ck_assert_int_eq(cg_device_get_info(0, NULL), CG_EINVAL);
    ck_assert_int_eq(cg_device_count(NULL), CG_EINVAL);
}
END_TEST

START_TEST(selectors_pick_the_right_device)
{
    cg_device_info info;
    char sel[300], upper[300];
    int idx = -1, i;

    ck_assert_int_eq(cg_device_get_info(0, &info), CG_OK);

    snprintf(sel, sizeof sel, "%d:%d", info.platform_index,
             info.device_index);
    ck_assert_int_eq(cg_device_select(sel, &idx), CG_OK);
    ck_assert_int_eq(idx, 0);

    idx = -1;
    ck_assert_int_eq(cg_device_select("0", &idx), CG_OK);
    ck_assert_int_eq(idx, 0);

    /* A type name picks the first device of that type. */
    idx = -1;
    ck_assert_int_eq(cg_device_select(
        info.type == CG_DEVICE_GPU ? "GPU" : info.type == CG_DEVICE_CPU
        ? "cpu" : "accelerator", &idx), CG_OK);
    ck_assert_int_eq(idx, 0);

    /* A case-insensitive substring of the device name. */
    snprintf(sel, sizeof sel, "%.6s", info.name + strlen(info.name) / 3);
    for (i = 0; sel[i]; i++)
        upper[i] = (char)(sel[i] >= 'a' && sel[i] <= 'z' ? sel[i] - 32
                                                          : sel[i]);
    upper[i] = '\0';
    idx = -1;
    ck_assert_int_eq(cg_device_select(upper, &idx), CG_OK);
    ck_assert_int_ge(idx, 0);
    ck_assert_int_eq(cg_device_get_info(idx, &info), CG_OK);
    ck_assert_ptr_nonnull(strcasestr(info.name, sel) ? info.name
                          : strcasestr(info.platform_name, sel));

    /* A substring of the platform name. */
    ck_assert_int_eq(cg_device_get_info(0, &info), CG_OK);
    snprintf(sel, sizeof sel, "%.5s", info.platform_name);
    ck_assert_int_eq(cg_device_select(sel, &idx), CG_OK);
}
END_TEST

START_TEST(default_and_environment_selection)
{
    cg_device_info info;
    int idx = -1, n, i, gpu = -1;

    ck_assert_int_eq(cg_device_count(&n), CG_OK);
    for (i = n - 1; i >= 0; i--)
        if (cg_device_get_info(i, &info) == CG_OK &&
            info.type == CG_DEVICE_GPU)
            gpu = i;
    unsetenv("CLGRAD_DEVICE");
    ck_assert_int_eq(cg_device_select(NULL, &idx), CG_OK);
    ck_assert_int_eq(idx, gpu >= 0 ? gpu : 0);
    ck_assert_int_eq(cg_device_select("", &idx), CG_OK);
    ck_assert_int_eq(idx, gpu >= 0 ? gpu : 0);

    /* CLGRAD_DEVICE is used when no selector is given. */
    setenv("CLGRAD_DEVICE", "0:0", 1);
    ck_assert_int_eq(cg_device_select(NULL, &idx), CG_OK);
    ck_assert_int_eq(idx, 0);
    setenv("CLGRAD_DEVICE", "no-such-device-xyz", 1);
    ck_assert_int_eq(cg_device_select(NULL, &idx), CG_ENODEVICE);
    ck_assert_ptr_nonnull(strstr(cg_last_error(), "CLGRAD_DEVICE"));
    ck_assert_ptr_null(cg_context_new(NULL));
    unsetenv("CLGRAD_DEVICE");
}
END_TEST

START_TEST(bad_selectors_fail_and_list_devices)
{
    static const char *bad[] = { "no-such-device-xyz", "99:0", "0:99",
                                 "9999", "accelerator-x" };
    cg_device_info info;
    size_t i;
    int idx = 1234;

    ck_assert_int_eq(cg_device_get_info(0, &info), CG_OK);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(cg_device_select(bad[i], &idx), CG_ENODEVICE);
        ck_assert_int_eq(idx, 1234);
        /* The message names the selector and lists the devices. */
        ck_assert_ptr_nonnull(strstr(cg_last_error(), bad[i]));
        ck_assert_ptr_nonnull(strstr(cg_last_error(), info.name));
    }
    ck_assert_int_eq(cg_device_select("0", NULL), CG_EINVAL);
    ck_assert_ptr_null(cg_context_new("no-such-device-xyz"));
    ck_assert_ptr_nonnull(strstr(cg_last_error(), "no-such-device-xyz"));
}
END_TEST

static long
resident_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, rss = 0;

    if (!f)
        return 0;
    if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
        rss = 0;
    fclose(f);
    return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

#if defined(__SANITIZE_ADDRESS__)
#define ASAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN_BUILD 1
#endif
#endif
#ifndef ASAN_BUILD
#define ASAN_BUILD 0
#endif

START_TEST(contexts_are_created_and_freed_in_a_loop)
{
    cg_context_options opts = { "0", 1, 0 };
    cg_device_info a, b;
    long warm = 0;
    int i;

    for (i = 0; i < 40; i++) {
        cg_context *ctx = cg_context_new_with(i % 2 ? &opts : NULL);
        cg_buffer *buf;

        ck_assert_msg(ctx != NULL, "%s", cg_last_error());
        buf = cg_buffer_new(ctx, 1000);
        ck_assert_ptr_nonnull(buf);
        ck_assert_int_eq(cg_context_finish(ctx), CG_OK);
        if (i % 3 == 0)
            cg_buffer_free(buf);   /* else cg_context_free releases it */
        cg_context_free(ctx);
        if (i == 9)
            warm = resident_kib();
    }
    /* Thirty more contexts must not keep their memory: a leak of a
     * context's OpenCL objects costs far more than 64 KiB each.  Not
     * under AddressSanitizer, whose quarantine keeps freed memory (256 MB
     * of it) by design; its LeakSanitizer checks the leaks directly. */
    if (!ASAN_BUILD)
        ck_assert_msg(resident_kib() - warm < 30 * 64,
                      "resident memory grew from %ld to %ld KiB", warm,
                      resident_kib());
    cg_context_free(NULL);

    ck_assert_int_eq(cg_context_device_info(tt_ctx(), &a), CG_OK);
    ck_assert_int_eq(cg_device_get_info(a.index, &b), CG_OK);
    ck_assert_str_eq(a.name, b.name);
    ck_assert_int_eq(cg_context_device_info(NULL, &a), CG_EINVAL);
    ck_assert_int_eq(cg_context_finish(NULL), CG_EINVAL);
}
END_TEST

/* Each host allocation of cg_context_new fails in turn (the device layer,
 * the random number generator, the tuning lookup): the constructor either
 * gives NULL with a message, or, where only the optional tuning lookup
 * failed, a context that works.  Nothing leaks (valgrind), and once no
 * failure fires the context is the ordinary one. */
START_TEST(host_allocation_failures_while_making_a_context)
{
    int64_t n = 5;
    long k;
    int fired = 1;

    for (k = 0; fired && k < 10000; k++) {
        cg_context *ctx;
        cg_tensor *t, *s;
        float v;

        cg__alloc_fail_after(k);
        ctx = cg_context_new(NULL);
        fired = cg__alloc_fail_after(-1) < 0;
        if (!ctx) {
            ck_assert_msg(fired, "no context without a failure: %s",
                          cg_last_error());
            ck_assert_msg(strstr(cg_last_error(), "memory") != NULL,
                          "allocation %ld: %s", k, cg_last_error());
            continue;
        }
        /* The generator is there and seeded: a draw works. */
        ck_assert_int_eq(cg_manual_seed(ctx, 7), CG_OK);
        t = cg_rand_uniform(ctx, 1, &n, 0.0f, 1.0f);
        ck_assert_msg(t != NULL, "%s", cg_last_error());
        s = cg_sum(t, 0, NULL, 0);
        ck_assert_int_eq(cg_tensor_item(s, &v), CG_OK);
        ck_assert(v > 0.0f && v < 5.0f);
        cg_tensor_free(s);
        cg_tensor_free(t);
        cg_context_free(ctx);
    }
    ck_assert_msg(!fired, "still failing after %ld allocations", k);
}
END_TEST

/* A profiling context times every launch by kernel name; CLBlast's GEMM
 * (when it runs) under its own name. */
START_TEST(profiles_count_every_launch)
{
    cg_context_options opts = { NULL, 1, 0 };
    int64_t s2[2] = { 33, 17 };
    cg_profile_entry e[32];
    cg_memory_stats st0, st1;
    cg_context *ctx = cg_context_new_with(&opts);
    cg_tensor *a, *b, *c, *d, *t;
    uint64_t launches = 0;
    int i, n = 0, sgemm = 0;

    ck_assert_msg(ctx != NULL, "%s", cg_last_error());
    ck_assert_int_eq(cg_context_profile(tt_ctx(), e, 32, &n), CG_EINVAL);
    ck_assert_msg(strstr(cg_last_error(), "profiling"), "%s",
                  cg_last_error());
    a = cg_ones(ctx, 2, s2);
    ck_assert_int_eq(cg_context_profile_reset(ctx), CG_OK);
    cg_context_stats(ctx, &st0);
    b = cg_add(a, a);
    c = cg_mul(b, a);
    t = cg_transpose(c, 0, 1);
    d = cg_matmul(c, t);
    ck_assert_msg(b && c && t && d, "%s", cg_last_error());
    cg_context_stats(ctx, &st1);
    ck_assert_int_eq(cg_context_profile(ctx, e, 32, &n), CG_OK);
    ck_assert_int_ge(n, 2);
    for (i = 0; i < n && i < 32; i++) {
        launches += e[i].launches;
        ck_assert(e[i].total_us >= 0 && e[i].max_us <= e[i].total_us);
        if (i > 0)
            ck_assert(e[i].total_us <= e[i - 1].total_us);
        /* The one GEMM, CLBlast's or clgrad's (c t^T: gemm_nt). */
        if (strcmp(e[i].name, "clblast.sgemm") == 0 ||
            strcmp(e[i].name, "gemm_nt") == 0)
            sgemm += (int)e[i].launches;
    }
    ck_assert_int_eq(sgemm, 1);
    ck_assert_uint_eq(launches, st1.kernels_enqueued - st0.kernels_enqueued);
    ck_assert_int_eq(cg_context_profile_reset(ctx), CG_OK);
    ck_assert_int_eq(cg_context_profile(ctx, e, 32, &n), CG_OK);
    ck_assert_int_eq(n, 0);
    cg_tensor_free(a);
    cg_tensor_free(b);
    cg_tensor_free(c);
    cg_tensor_free(d);
    cg_tensor_free(t);
    cg_context_free(ctx);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("device");
    TCase *tc = tcase_create("device");

    tt_require_device();
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, devices_are_enumerated_with_sane_properties);
    tcase_add_test(tc, selectors_pick_the_right_device);
    tcase_add_test(tc, default_and_environment_selection);
    tcase_add_test(tc, bad_selectors_fail_and_list_devices);
    tcase_add_test(tc, contexts_are_created_and_freed_in_a_loop);
    tcase_add_test(tc, host_allocation_failures_while_making_a_context);
    tcase_add_test(tc, profiles_count_every_launch);
    suite_add_tcase(s, tc);
    return tt_run(s);
}
