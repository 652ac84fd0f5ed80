/* SPDX-License-Identifier: MIT */
/*
 * tests/test_pool.c - the caching allocator: reuse, statistics, release,
 * out-of-memory handling (device and host), and host transfers.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "testutil.h"

START_TEST(freed_blocks_are_reused_and_counted)
{
    cg_context *ctx = tt_ctx();
    cg_memory_stats s0, s;
    cg_buffer *a, *b, *c;

    ck_assert_int_eq(cg_context_release_cache(ctx), CG_OK);
    ck_assert_int_eq(cg_context_stats(ctx, &s0), CG_OK);
    ck_assert_uint_eq(s0.bytes_cached, 0);

    a = cg_buffer_new(ctx, 1000);
    ck_assert_ptr_nonnull(a);
    ck_assert_uint_eq(cg_buffer_size(a), 1000);
    cg_context_stats(ctx, &s);
    ck_assert_uint_eq(s.allocations, s0.allocations + 1);
    ck_assert_uint_eq(s.device_allocations, s0.device_allocations + 1);
    /* 1000 bytes fall in the 1024-byte class. */
    ck_assert_uint_eq(s.bytes_in_use, s0.bytes_in_use + 1024);
    ck_assert_uint_ge(s.peak_bytes, s.bytes_in_use);

    cg_buffer_free(a);
    cg_context_stats(ctx, &s);
    ck_assert_uint_eq(s.bytes_in_use, s0.bytes_in_use);
    ck_assert_uint_eq(s.bytes_cached, 1024);

    /* Same class: served from the pool, no new device allocation. */
    b = cg_buffer_new(ctx, 900);
    cg_context_stats(ctx, &s);
    ck_assert_uint_eq(s.reuses, s0.reuses + 1);
    ck_assert_uint_eq(s.device_allocations, s0.device_allocations + 1);
    ck_assert_uint_eq(s.bytes_cached, 0);

    /* Another class: a new device allocation. */
    c = cg_buffer_new(ctx, 5000);
    cg_context_stats(ctx, &s);
    ck_assert_uint_eq(s.device_allocations, s0.device_allocations + 2);
    ck_assert_uint_eq(s.bytes_in_use, s0.bytes_in_use + 1024 + 5120);
    ck_assert_uint_ge(s.peak_bytes, s0.bytes_in_use + 1024 + 5120);

    cg_buffer_free(b);
    cg_buffer_free(c);
    cg_context_stats(ctx, &s);
    ck_assert_uint_eq(s.bytes_cached, 1024 + 5120);
    ck_assert_int_eq(cg_context_release_cache(ctx), CG_OK);
    cg_context_stats(ctx, &s);
    ck_assert_uint_eq(s.bytes_cached, 0);
    ck_assert_uint_eq(s.bytes_in_use, s0.bytes_in_use);
    cg_buffer_free(NULL);
}
END_TEST

START_TEST(size_classes_waste_at_most_a_quarter)
{
    cg_context *ctx = tt_ctx();
    cg_memory_stats s0, s;
    size_t sizes[] = { 1, 255, 256, 257, 511, 513, 4097, 65537, 1000003 };
    size_t i;

    for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        cg_buffer *b;
        uint64_t block;

        cg_context_stats(ctx, &s0);
        b = cg_buffer_new(ctx, sizes[i]);
        ck_assert_ptr_nonnull(b);
        cg_context_stats(ctx, &s);
        block = s.bytes_in_use - s0.bytes_in_use;
        ck_assert_uint_ge(block, sizes[i]);
        ck_assert_msg(block <= 256 || block * 4 <= sizes[i] * 5,
                      "%zu bytes got a block of %llu", sizes[i],
                      (unsigned long long)block);
        cg_buffer_free(b);
    }
}
END_TEST

/* Host memory running out is CG_EHOSTMEM, not the device's CG_ENOMEM,
 * whichever of a buffer's host allocations fails: the handle's, or the
 * block's, asked for only when the cache has none to give. */
START_TEST(host_allocation_failure_is_ehostmem)
{
    cg_context *ctx = tt_ctx();
    cg_memory_stats s0, s;
    cg_buffer *b;
    long n;

    for (n = 0; n < 2; n++) {
        cg_context_release_cache(ctx);
        cg_context_stats(ctx, &s0);
        cg__alloc_fail_after(n);
        b = cg_buffer_new(ctx, 12345);
        ck_assert_int_eq(cg__alloc_fail_after(-1), -1);
        ck_assert_ptr_null(b);
        ck_assert_int_eq(cg__last_status(), CG_EHOSTMEM);
        ck_assert_msg(strstr(cg_last_error(), "host memory"), "%s", TT_ERR);
        cg_context_stats(ctx, &s);
        ck_assert_uint_eq(s.bytes_in_use, s0.bytes_in_use);
        ck_assert_uint_eq(s.allocations, s0.allocations);
    }
    b = cg_buffer_new(ctx, 12345);
    ck_assert_msg(b != NULL, "%s", TT_ERR);
    cg_buffer_free(b);
}
END_TEST

START_TEST(impossible_allocation_is_enomem_and_context_survives)
{
    cg_context *ctx = tt_ctx();
    cg_device_info info;
    cg_memory_stats s0, s;
    cg_buffer *keep, *big;
    float in[64], out[64];
    int i;

    cg_context_device_info(ctx, &info);
    keep = cg_buffer_new(ctx, sizeof in);
    for (i = 0; i < 64; i++)
        in[i] = (float)i * 0.5f + 1.0f;
    ck_assert_int_eq(cg_buffer_write(keep, 0, in, sizeof in), CG_OK);
    /* Leave something in the cache: the failure must release it. */
    cg_buffer_free(cg_buffer_new(ctx, 4096));
    cg_context_stats(ctx, &s0);
    ck_assert_uint_gt(s0.bytes_cached, 0);

    big = cg_buffer_new(ctx, (size_t)info.global_mem_size * 4);
    ck_assert_ptr_null(big);
    ck_assert_ptr_nonnull(strstr(cg_last_error(), "CG_ENOMEM"));
    /* The message gives the requested and the available sizes. */
    {
        char want[64];

        snprintf(want, sizeof want, "%llu",
                 (unsigned long long)info.global_mem_size * 4);
        ck_assert_ptr_nonnull(strstr(cg_last_error(), want));
        snprintf(want, sizeof want, "%llu",
                 (unsigned long long)info.global_mem_size);
        ck_assert_ptr_nonnull(strstr(cg_last_error(), want));
    }
    cg_context_stats(ctx, &s);
    ck_assert_uint_eq(s.bytes_cached, 0);
    ck_assert_uint_eq(s.bytes_in_use, s0.bytes_in_use);
    ck_assert_uint_eq(s.allocations, s0.allocations);

    /* Larger than the largest single allocation, too. */
    ck_assert_ptr_null(cg_buffer_new(ctx, (size_t)info.max_alloc_size + 1));
    ck_assert_ptr_nonnull(strstr(cg_last_error(), "largest allocation"));

    /* The context still works: the old buffer reads back, new ones come. */
    ck_assert_int_eq(cg_buffer_read(keep, 0, out, sizeof out), CG_OK);
    ck_assert_int_eq(memcmp(in, out, sizeof in), 0);
    big = cg_buffer_new(ctx, 1 << 20);
    ck_assert_ptr_nonnull(big);
    cg_buffer_free(big);
    cg_buffer_free(keep);
}
END_TEST

START_TEST(transfers_check_their_ranges)
{
    cg_context *ctx = tt_ctx();
    cg_buffer *b = cg_buffer_new(ctx, 100);
    char data[100], back[100];
    int i;

    for (i = 0; i < 100; i++)
        data[i] = (char)(i * 7 + 3);
    ck_assert_int_eq(cg_buffer_write(b, 0, data, 100), CG_OK);
    ck_assert_int_eq(cg_buffer_write(b, 50, data, 51), CG_EINVAL);
    ck_assert_ptr_nonnull(strstr(cg_last_error(), "outside"));
    ck_assert_int_eq(cg_buffer_read(b, 101, back, 0), CG_EINVAL);
    ck_assert_int_eq(cg_buffer_write(NULL, 0, data, 1), CG_EINVAL);
    ck_assert_int_eq(cg_buffer_read(b, 0, NULL, 1), CG_EINVAL);
    ck_assert_ptr_null(cg_buffer_new(ctx, 0));
    ck_assert_ptr_null(cg_buffer_new(NULL, 8));
    /* A failed write left the contents alone. */
    ck_assert_int_eq(cg_buffer_read(b, 0, back, 100), CG_OK);
    ck_assert_int_eq(memcmp(data, back, 100), 0);
    ck_assert_int_eq(cg_buffer_read(b, 10, back, 5), CG_OK);
    ck_assert_int_eq(memcmp(data + 10, back, 5), 0);
    cg_buffer_free(b);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("pool");
    TCase *tc = tcase_create("pool");

    tt_require_device();
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, freed_blocks_are_reused_and_counted);
    tcase_add_test(tc, size_classes_waste_at_most_a_quarter);
    tcase_add_test(tc, impossible_allocation_is_enomem_and_context_survives);
    tcase_add_test(tc, host_allocation_failure_is_ehostmem);
    tcase_add_test(tc, transfers_check_their_ranges);
    suite_add_tcase(s, tc);
    return tt_run(s);
}
