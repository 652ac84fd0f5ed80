/* SPDX-License-Identifier: MIT */
/*
 * tests/test_info.c - clgrad-info: its JSON report parses back and agrees
 * with the library (device properties, extensions as an array, the
 * measured figures and how each is measured), the same rows in the human
 * report, skipped tuning files are reported, its options and exit
 * statuses.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <json-c/json.h>

#include "testutil.h"

/* Runs clgrad-info with `args`; returns its stdout (caller frees) and sets
 * *status to its exit status. */
static char *
run_info(const char *args, int *status)
{
    return tt_run_tool(NULL, "clgrad-info", args, status);
}

static json_object *
get(json_object *o, const char *key)
{
    json_object *v = NULL;

    ck_assert_msg(json_object_object_get_ex(o, key, &v), "no key '%s'", key);
    return v;
}

/* The device properties beyond the basics, in d as in info. */
static void
check_properties(json_object *d, const cg_device_info *info)
{
    static const char *const fp[] = { "fp32_config", "fp16_config",
                                       "fp64_config" };
    json_object *ext = get(d, "extensions"), *sg, *v;
    size_t i;

    /* An array of names, each one of the library's list. */
    ck_assert(json_object_is_type(ext, json_type_array));
    for (i = 0; i < json_object_array_length(ext); i++) {
        const char *name = json_object_get_string(
            json_object_array_get_idx(ext, i));

        ck_assert(*name && !strchr(name, ' '));
        ck_assert_ptr_nonnull(strstr(info->extensions, name));
    }
    /* Under a memory checker this process runs in valgrind, whose
     * emulated CPU PoCL may see with narrower vectors (no AVX-512) than
     * the clgrad-info it started, which runs natively. */
    if (tt_checker())
        ck_assert_int_gt(json_object_get_int(
            get(get(d, "native_vector_widths"), "float")), 0);
    else
        ck_assert_int_eq(json_object_get_int(
            get(get(d, "native_vector_widths"), "float")),
            (int)info->native_width_float);
    ck_assert_int_gt(json_object_get_int64(
        get(d, "preferred_work_group_size_multiple")), 0);
    for (i = 0; i < 3; i++)
        ck_assert(json_object_is_type(get(get(d, fp[i]), "supported"),
                                      json_type_boolean));
    /* Every OpenCL device has single precision with round to nearest. */
    ck_assert(json_object_get_boolean(get(get(d, "fp32_config"),
                                          "round_to_nearest")));
    ck_assert(json_object_get_boolean(get(get(d, "fp64_config"),
                                          "supported")) == (info->fp64_config
              != 0 && !(info->fp64_config & CG_FP_NOT_EXPOSED)));
    ck_assert_str_eq(json_object_get_string(get(d, "local_mem_type")),
                     info->local_mem_type == CG_LOCAL_MEM_DEDICATED ? "local"
                     : info->local_mem_type == CG_LOCAL_MEM_GLOBAL ? "global"
                     : "none");
    get(d, "global_mem_cache_type");
    ck_assert_int_eq(json_object_get_int64(
        get(d, "global_mem_cacheline_bytes")),
        info->global_mem_cacheline_size);
    ck_assert_int_eq(json_object_get_int64(
        get(d, "profiling_timer_resolution_ns")),
        (int64_t)info->timer_resolution_ns);
    /* clgrad's contexts time kernels when asked: every queue profiles. */
    ck_assert(json_object_get_boolean(get(get(d, "queue_properties"),
                                          "profiling")));
    sg = get(d, "sub_groups");
    ck_assert(json_object_get_boolean(get(sg, "supported")) ==
              (info->sub_groups != 0));
    get(sg, "max_num_sub_groups");
    /* null where the driver does not expose them. */
    v = get(d, "uuid");
    ck_assert(info->has_uuid ? json_object_get_string_len(v) == 36
                             : v == NULL);
    v = get(d, "pci_bus");
    ck_assert(info->has_pci ? json_object_get_string_len(v) == 12
                            : v == NULL);
}

START_TEST(json_report_parses_and_matches_the_library)
{
    int status, n, i;
    char *out = run_info("--json", &status);
    json_object *root, *devs;

    ck_assert_int_eq(status, 0);
    root = json_tokener_parse(out);
    ck_assert_msg(root != NULL, "not JSON: %.200s", out);
    ck_assert_str_eq(json_object_get_string(get(root, "clgrad_version")),
                     cg_version());
    devs = get(root, "devices");
    ck_assert_int_eq(cg_device_count(&n), CG_OK);
    ck_assert_int_eq((int)json_object_array_length(devs), n);
    for (i = 0; i < n; i++) {
        json_object *d = json_object_array_get_idx(devs, (size_t)i), *m;
        cg_device_info info;

        ck_assert_int_eq(cg_device_get_info(i, &info), CG_OK);
        /* Not the device name: PoCL names the CPU it runs on, and under
         * valgrind this process sees another CPU than its child. */
        ck_assert_str_eq(json_object_get_string(get(d, "platform")),
                         info.platform_name);
        ck_assert_str_eq(json_object_get_string(get(d, "type")),
                         cg_device_type_name(info.type));
        ck_assert_int_eq(json_object_get_int64(get(d, "compute_units")),
                         info.compute_units);
        ck_assert(json_object_get_int64(get(d, "global_mem_bytes")) ==
                  (int64_t)info.global_mem_size);
        ck_assert_int_eq(json_object_array_length(
            get(d, "max_work_item_sizes")), 3);
        m = get(d, "measured");
        ck_assert_double_gt(json_object_get_double(get(m, "h2d_gbps")), 0);
        ck_assert_double_gt(json_object_get_double(get(m, "d2h_gbps")), 0);
        ck_assert_double_gt(json_object_get_double(get(m, "copy_gbps")), 0);
        ck_assert_double_gt(json_object_get_double(
            get(m, "launch_latency_us")), 0);
        ck_assert_double_gt(json_object_get_double(
            get(m, "launch_queued_us")), 0);
        ck_assert_double_gt(json_object_get_double(
            get(m, "sgemm_1024_gflops")), 0);
        ck_assert_double_gt(json_object_get_double(
            get(m, "sgemm_1024_untuned_gflops")), 0);
        ck_assert_double_gt(json_object_get_double(
            get(m, "fp32_fma_gflops")), 0);
        /* Every figure says how it was measured. */
        json_object_object_foreach(m, key, val) {
            json_object *how;

            if (!json_object_is_type(val, json_type_double))
                continue;
            how = get(get(m, "methods"), key);
            ck_assert_msg(strstr(json_object_get_string(how), "best of") ||
                          strstr(json_object_get_string(how), "one run"),
                          "%s: %s", key, json_object_get_string(how));
        }
        check_properties(d, &info);
        /* The tuning entries in force, as the library reports them. */
        {
            json_object *es = get(get(d, "tuning"), "entries");
            cg_context *ctx;
            int k, count;

            ck_assert(json_object_is_type(es, json_type_array));
            ctx = cg_context_new(NULL);
            ck_assert_ptr_nonnull(ctx);
            ck_assert_int_eq(cg_context_tuning_count(ctx, &count), CG_OK);
            if (i == 0)
                ck_assert_int_eq((int)json_object_array_length(es), count);
            for (k = 0; k < (int)json_object_array_length(es); k++) {
                json_object *e = json_object_array_get_idx(es, (size_t)k);

                ck_assert(json_object_is_type(get(e, "params"),
                                              json_type_object));
                get(e, "kernel");
                get(e, "origin");
            }
            cg_context_free(ctx);
        }
    }
    json_object_put(root);
    free(out);
}
END_TEST

START_TEST(no_measure_and_device_selection)
{
    int status;
    char *out = run_info("--json --no-measure --device 0", &status);
    json_object *root = json_tokener_parse(out), *devs, *m = NULL;

    ck_assert_int_eq(status, 0);
    ck_assert_ptr_nonnull(root);
    devs = get(root, "devices");
    ck_assert_int_eq(json_object_array_length(devs), 1);
    ck_assert(!json_object_object_get_ex(json_object_array_get_idx(devs, 0),
                                         "measured", &m));
    json_object_put(root);
    free(out);
}
END_TEST

/* What the tuning lookup skips reaches the report (the library logs it
 * through cg_set_log; it is no longer left in cg_last_error). */
START_TEST(skipped_tuning_files_are_reported)
{
    char dir[512], path[600], env[700], *out;
    int status;
    FILE *f;

    snprintf(dir, sizeof dir, "%s/info-tuning", tt_tmpdir());
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    snprintf(path, sizeof path, "%s/corrupt.json", dir);
    ck_assert_ptr_nonnull(f = fopen(path, "w"));
    fputs("{\"format\": \"clgrad-tuning\", \"ver", f);
    fclose(f);
    snprintf(env, sizeof env, "CLGRAD_TUNING_DIR='%s'", dir);
    out = tt_run_tool(env, "clgrad-info", "--no-measure --device 0",
                      &status);
    ck_assert_int_eq(status, 0);
    ck_assert_msg(strstr(out, "warning: tuning: ") &&
                  strstr(out, "corrupt.json ignored"), "%s", out);
    free(out);
}
END_TEST

START_TEST(human_output_list_help_and_errors)
{
    cg_device_info info;
    int status;
    char *out;

    ck_assert_int_eq(cg_device_get_info(0, &info), CG_OK);
    out = run_info("--no-measure", &status);
    ck_assert_int_eq(status, 0);
    ck_assert_ptr_nonnull(strstr(out, "Compute units"));
    ck_assert_ptr_nonnull(strstr(out, info.platform_name));
    {
        static const char *const rows[] = {
            "Preferred work-group size multiple", "Native vector widths",
            "Single-precision FP config", "Half-precision FP config",
            "Double-precision FP config", "Local memory type",
            "Global memory cache type", "Global memory cache line",
            "Profiling timer resolution", "Queue properties", "Sub-groups",
            "Device UUID", "PCI bus", "Extensions"
        };
        size_t k;

        for (k = 0; k < sizeof rows / sizeof rows[0]; k++)
            ck_assert_msg(strstr(out, rows[k]), "no row '%s'", rows[k]);
        ck_assert_ptr_null(strstr(out, "Measured"));
    }
    free(out);

    /* The measured section: each figure, then how it was measured. */
    out = run_info("--device 0", &status);
    ck_assert_int_eq(status, 0);
    {
        const char *p = strstr(out, "FP32 FMA peak");
        int lines = 0;

        ck_assert_msg(p && strstr(p, "GFLOP/s"), "%s", out);
        ck_assert_ptr_nonnull(strstr(p, "measured as: kernels fma_peak "
                                     "(mad) and fma_peak_fused"));
        for (p = strstr(out, "Measured"); p && (p = strstr(p, "measured as: "));
             p++)
            lines++;
        ck_assert_int_ge(lines, 7);
    }
    free(out);

    out = run_info("--list", &status);
    ck_assert_int_eq(status, 0);
    ck_assert_ptr_nonnull(strstr(out, info.platform_name));
    ck_assert_ptr_null(strstr(out, "Compute units"));
    free(out);

    out = run_info("--help", &status);
    ck_assert_int_eq(status, 0);
    ck_assert_ptr_nonnull(strstr(out, "--no-measure"));
    free(out);

    out = run_info("--version", &status);
    ck_assert_int_eq(status, 0);
    ck_assert_ptr_nonnull(strstr(out, cg_version()));
    free(out);

    free(run_info("--bogus", &status));
    ck_assert_int_eq(status, 2);
    free(run_info("--device no-such-device-xyz --no-measure", &status));
    ck_assert_int_eq(status, 1);
}
END_TEST

START_TEST(no_platform_exits_1_with_advice)
{
    int status;
    char *out;
    char cmd[1024];
    FILE *p;
    size_t n;

    /* An empty vendor directory: the ICD loader finds no platform. */
    snprintf(cmd, sizeof cmd, "OCL_ICD_VENDORS='%s' '%s/tools/clgrad-info' "
             "2>&1", tt_tmpdir(), getenv("TEST_BUILDDIR"));
    p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    out = calloc(1, 8192);
    n = fread(out, 1, 8191, p);
    out[n] = '\0';
    status = pclose(p);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 1);
    ck_assert_msg(strstr(out, "pocl-opencl-icd") != NULL, "%s", out);
    free(out);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("info");
    TCase *tc = tcase_create("info");

    tt_require_device();
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, json_report_parses_and_matches_the_library);
    tcase_add_test(tc, no_measure_and_device_selection);
    tcase_add_test(tc, human_output_list_help_and_errors);
    tcase_add_test(tc, skipped_tuning_files_are_reported);
    tcase_add_test(tc, no_platform_exits_1_with_advice);
    suite_add_tcase(s, tc);
    return tt_run(s);
}
