/* SPDX-License-Identifier: MIT */
/*
 * clgrad-info - a clinfo-style report of the OpenCL devices clgrad can use,
 * with measured bandwidth, launch cost and SGEMM throughput.
 */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "clgrad.h"
#include "log.h"
#include "progress.h"

static const char *prog = "clgrad-info";

static void
usage(FILE *f)
{
    fprintf(f,
"Usage: %s [OPTION]...\n"
"Report every OpenCL platform and device, as clgrad sees them, and measure\n"
"each device's bandwidth, kernel launch cost, FP32 FMA peak and SGEMM\n"
"throughput (with CLBlast's built-in parameters, then with the tuning\n"
"database), saying how each figure is measured, and show the tuning\n"
"entries in force for each device (see clgrad-tune).\n"
"\n"
"  -l, --list           list devices, one line each, and exit\n"
"  -d, --device SEL     report only the device SEL selects (P:D, an index,\n"
"                       gpu/cpu/accelerator, or part of its name)\n"
"  -j, --json           write the report as JSON\n"
"  -n, --no-measure     skip the measured section\n"
"  -h, --help           show this help and exit\n"
"  -V, --version        show the version and exit\n"
"\n"
"Environment: CLGRAD_DEVICE (default selector), CLGRAD_CACHE_DIR,\n"
"CLGRAD_CACHE=0, CLGRAD_KERNEL_DIR, CLGRAD_TUNING_DIR.\n", prog);
}

static void
row(const char *key, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
row(const char *key, const char *fmt, ...)
{
    va_list ap;

    printf("  %-36s", key);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}

static void
print_size(const char *key, uint64_t bytes)
{
    if (bytes >= (1ULL << 30))
        row(key, "%llu (%.1f GiB)", (unsigned long long)bytes,
            (double)bytes / (1ULL << 30));
    else if (bytes >= (1ULL << 20))
        row(key, "%llu (%.1f MiB)", (unsigned long long)bytes,
            (double)bytes / (1ULL << 20));
    else
        row(key, "%llu (%.1f KiB)", (unsigned long long)bytes,
            (double)bytes / 1024);
}

static const char *const fp_bit_name[] = {
    "denormals", "inf/NaN", "round to nearest", "round to zero",
    "round to +-inf", "FMA", "soft float", "correctly rounded divide/sqrt"
};
static const char *const fp_bit_key[] = {
    "denormals", "inf_nan", "round_to_nearest", "round_to_zero",
    "round_to_inf", "fma", "soft_float", "correctly_rounded_divide_sqrt"
};
#define FP_BITS (int)(sizeof fp_bit_name / sizeof fp_bit_name[0])

static void
print_fp(const char *key, unsigned config)
{
    char buf[512] = "";
    size_t n = 0;
    int i;

    if (config & CG_FP_NOT_EXPOSED) {
        row(key, "not exposed");
        return;
    }
    if (config == 0) {
        row(key, "not supported");
        return;
    }
    for (i = 0; i < FP_BITS; i++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s %s",
                              i ? ", " : "", fp_bit_name[i],
                              config & (1u << i) ? "yes" : "no");
    row(key, "%s", buf);
}

static const char *
local_mem_name(cg_local_mem_type t)
{
    return t == CG_LOCAL_MEM_DEDICATED ? "local"
         : t == CG_LOCAL_MEM_GLOBAL ? "global" : "none";
}

static const char *
cache_name(cg_cache_type t)
{
    return t == CG_CACHE_READ_WRITE ? "read-write"
         : t == CG_CACHE_READ_ONLY ? "read-only" : "none";
}

/* "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", or "" when not exposed. */
static void
uuid_text(const cg_device_info *d, char out[40])
{
    size_t n = 0;
    int i;

    out[0] = '\0';
    if (!d->has_uuid)
        return;
    for (i = 0; i < 16; i++)
        n += (size_t)snprintf(out + n, 40 - n, "%s%02x",
                              i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "",
                              d->uuid[i]);
}

/* "dddd:bb:dd.f", or "" when not exposed. */
static void
pci_text(const cg_device_info *d, char out[32])
{
    out[0] = '\0';
    if (d->has_pci)
        snprintf(out, 32, "%04x:%02x:%02x.%x", d->pci_domain & 0xffff,
                 d->pci_bus & 0xff, d->pci_device & 0xff,
                 d->pci_function & 0xf);
}

/* Calls f on each extension name of d (the list is space-separated,
 * with runs of spaces on some drivers). */
static void
each_extension(const cg_device_info *d, void (*f)(const char *, void *),
               void *arg)
{
    char name[256];
    const char *s = d->extensions, *e;

    while (*s) {
        while (*s == ' ')
            s++;
        for (e = s; *e && *e != ' '; e++)
            ;
        if (e > s && (size_t)(e - s) < sizeof name) {
            memcpy(name, s, (size_t)(e - s));
            name[e - s] = '\0';
            f(name, arg);
        }
        s = e;
    }
}

static void
print_extension(const char *name, void *first)
{
    if (*(int *)first)
        row("Extensions", "%s", name);
    else
        row("", "%s", name);
    *(int *)first = 0;
}

/* The device's description; wg_multiple is 0 when no context could be
 * made. */
static void
print_device(const cg_device_info *d, size_t wg_multiple)
{
    char text[40];
    int first = 1;

    printf("Device %d (%d:%d)\n", d->index, d->platform_index,
           d->device_index);
    row("Name", "%s", d->name);
    row("Vendor", "%s", d->vendor);
    row("Platform", "%s", d->platform_name);
    row("Platform vendor", "%s", d->platform_vendor);
    row("Platform version", "%s", d->platform_version);
    row("Driver version", "%s", d->driver_version);
    row("Device version", "%s", d->opencl_version);
    row("OpenCL C version", "%s", d->opencl_c_version);
    row("Type", "%s", cg_device_type_name(d->type));
    row("Compute units", "%u", d->compute_units);
    row("Max clock frequency", "%u MHz", d->clock_mhz);
    row("Max work-group size", "%zu", d->max_work_group_size);
    row("Max work-item dimensions", "%u", d->max_work_item_dims);
    row("Max work-item sizes", "%zu x %zu x %zu", d->max_work_item_sizes[0],
        d->max_work_item_sizes[1], d->max_work_item_sizes[2]);
    print_size("Global memory", d->global_mem_size);
    print_size("Global memory cache", d->global_mem_cache_size);
    print_size("Local memory", d->local_mem_size);
    print_size("Constant buffer", d->constant_mem_size);
    print_size("Max allocation", d->max_alloc_size);
    row("Preferred vector widths", "char %u, short %u, int %u, long %u, "
        "half %u, float %u, double %u", d->vector_width_char,
        d->vector_width_short, d->vector_width_int, d->vector_width_long,
        d->vector_width_half, d->vector_width_float, d->vector_width_double);
    row("Native vector widths", "char %u, short %u, int %u, long %u, "
        "half %u, float %u, double %u", d->native_width_char,
        d->native_width_short, d->native_width_int, d->native_width_long,
        d->native_width_half, d->native_width_float, d->native_width_double);
    if (wg_multiple)
        row("Preferred work-group size multiple", "%zu", wg_multiple);
    else
        row("Preferred work-group size multiple", "not exposed");
    row("Half precision (cl_khr_fp16)", "%s", d->fp16 ? "yes" : "no");
    row("Double precision", "%s", d->fp64 ? "yes" : "no");
    print_fp("Single-precision FP config", d->fp32_config);
    print_fp("Half-precision FP config", d->fp16_config);
    print_fp("Double-precision FP config", d->fp64_config);
    row("Local memory type", "%s", local_mem_name(d->local_mem_type));
    row("Global memory cache type", "%s",
        cache_name(d->global_mem_cache_type));
    row("Global memory cache line", "%u bytes",
        d->global_mem_cacheline_size);
    row("Profiling timer resolution", "%llu ns",
        (unsigned long long)d->timer_resolution_ns);
    row("Queue properties", "out-of-order %s, profiling %s",
        d->queue_out_of_order ? "yes" : "no",
        d->queue_profiling ? "yes" : "no");
    if (d->max_sub_groups)
        row("Sub-groups", "yes, at most %u per work-group",
            d->max_sub_groups);
    else
        row("Sub-groups", "%s", d->sub_groups ? "yes (count not exposed)"
                                              : "not supported");
    uuid_text(d, text);
    row("Device UUID", "%s", *text ? text : "not exposed");
    pci_text(d, text);
    row("PCI bus", "%s", *text ? text : "not exposed");
    row("Image support", "%s", d->image_support ? "yes" : "no");
    row("Unified host memory", "%s", d->unified_memory ? "yes" : "no");
    each_extension(d, print_extension, &first);
    if (first)
        row("Extensions", "none");
}

/* A measured figure, then how it was measured. */
static void
print_figure(const char *key, const char *value, cg_figure f)
{
    row(key, "%s", value);
    printf("      measured as: %s\n", cg_measure_method(f));
}

static void
print_measure(const cg_measurements *m, double untuned)
{
    char v[64];

    printf("  Measured\n");
#define FIG(key, f, ...) (snprintf(v, sizeof v, __VA_ARGS__), \
                          print_figure("  " key, v, f))
    FIG("Host to device", CG_FIGURE_H2D, "%.2f GB/s", m->h2d_gbps);
    FIG("Device to host", CG_FIGURE_D2H, "%.2f GB/s", m->d2h_gbps);
    FIG("Device copy (read + write)", CG_FIGURE_COPY, "%.2f GB/s",
        m->copy_gbps);
    FIG("Launch latency (enqueue + wait)", CG_FIGURE_LAUNCH_LATENCY,
        "%.1f us", m->launch_latency_us);
    FIG("Launch, queued (per kernel)", CG_FIGURE_LAUNCH_QUEUED, "%.2f us",
        m->launch_queued_us);
    FIG("FP32 FMA peak", CG_FIGURE_FP32_FMA, "%.1f GFLOP/s",
        m->fp32_fma_gflops);
    row("  SGEMM 1024^3 (matmul's), tuned", "%.1f GFLOP/s", m->sgemm_gflops);
    FIG("SGEMM 1024^3 (matmul's), untuned", CG_FIGURE_SGEMM, "%.1f GFLOP/s",
        untuned);
#undef FIG
    printf("      (tuned: the same, with the tuning database's CLBlast "
           "parameters)\n");
}

static json_object *
fp_json(unsigned config)
{
    json_object *o = json_object_new_object();
    int i, exposed = !(config & CG_FP_NOT_EXPOSED);

    json_object_object_add(o, "exposed", json_object_new_boolean(exposed));
    json_object_object_add(o, "supported",
                           json_object_new_boolean(exposed && config != 0));
    if (exposed && config != 0)
        for (i = 0; i < FP_BITS; i++)
            json_object_object_add(o, fp_bit_key[i], json_object_new_boolean(
                (config & (1u << i)) != 0));
    return o;
}

static void
add_extension(const char *name, void *arr)
{
    json_object_array_add(arr, json_object_new_string(name));
}

/* A string, or null when empty (not exposed). */
static json_object *
string_or_null(const char *s)
{
    return *s ? json_object_new_string(s) : NULL;
}

static json_object *
device_json(const cg_device_info *d, size_t wg_multiple)
{
    json_object *o = json_object_new_object(), *sizes, *vw, *q, *sg, *ext;
    char text[40];
    int i;

#define JS(k, v) json_object_object_add(o, k, json_object_new_string(v))
#define JI(k, v) json_object_object_add(o, k, json_object_new_int64((int64_t)(v)))
#define JB(k, v) json_object_object_add(o, k, json_object_new_boolean(v))
    JI("index", d->index);
    JI("platform_index", d->platform_index);
    JI("device_index", d->device_index);
    JS("name", d->name);
    JS("vendor", d->vendor);
    JS("platform", d->platform_name);
    JS("platform_vendor", d->platform_vendor);
    JS("platform_version", d->platform_version);
    JS("driver_version", d->driver_version);
    JS("opencl_version", d->opencl_version);
    JS("opencl_c_version", d->opencl_c_version);
    JS("type", cg_device_type_name(d->type));
    JI("compute_units", d->compute_units);
    JI("clock_mhz", d->clock_mhz);
    JI("max_work_group_size", d->max_work_group_size);
    JI("max_work_item_dimensions", d->max_work_item_dims);
    sizes = json_object_new_array();
    for (i = 0; i < 3; i++)
        json_object_array_add(sizes, json_object_new_int64(
            (int64_t)d->max_work_item_sizes[i]));
    json_object_object_add(o, "max_work_item_sizes", sizes);
    JI("global_mem_bytes", d->global_mem_size);
    JI("global_mem_cache_bytes", d->global_mem_cache_size);
    JI("local_mem_bytes", d->local_mem_size);
    JI("constant_mem_bytes", d->constant_mem_size);
    JI("max_alloc_bytes", d->max_alloc_size);
    vw = json_object_new_object();
#define VW(k, v) json_object_object_add(vw, k, json_object_new_int(v))
    VW("char", (int)d->vector_width_char);
    VW("short", (int)d->vector_width_short);
    VW("int", (int)d->vector_width_int);
    VW("long", (int)d->vector_width_long);
    VW("half", (int)d->vector_width_half);
    VW("float", (int)d->vector_width_float);
    VW("double", (int)d->vector_width_double);
#undef VW
    json_object_object_add(o, "preferred_vector_widths", vw);
    vw = json_object_new_object();
#define VW(k, v) json_object_object_add(vw, k, json_object_new_int(v))
    VW("char", (int)d->native_width_char);
    VW("short", (int)d->native_width_short);
    VW("int", (int)d->native_width_int);
    VW("long", (int)d->native_width_long);
    VW("half", (int)d->native_width_half);
    VW("float", (int)d->native_width_float);
    VW("double", (int)d->native_width_double);
#undef VW
    json_object_object_add(o, "native_vector_widths", vw);
    json_object_object_add(o, "preferred_work_group_size_multiple",
                           wg_multiple ? json_object_new_int64(
                               (int64_t)wg_multiple) : NULL);
    JB("fp16", d->fp16);
    JB("fp64", d->fp64);
    json_object_object_add(o, "fp32_config", fp_json(d->fp32_config));
    json_object_object_add(o, "fp16_config", fp_json(d->fp16_config));
    json_object_object_add(o, "fp64_config", fp_json(d->fp64_config));
    JS("local_mem_type", local_mem_name(d->local_mem_type));
    JS("global_mem_cache_type", cache_name(d->global_mem_cache_type));
    JI("global_mem_cacheline_bytes", d->global_mem_cacheline_size);
    JI("profiling_timer_resolution_ns", d->timer_resolution_ns);
    q = json_object_new_object();
    json_object_object_add(q, "out_of_order", json_object_new_boolean(
        d->queue_out_of_order));
    json_object_object_add(q, "profiling", json_object_new_boolean(
        d->queue_profiling));
    json_object_object_add(o, "queue_properties", q);
    sg = json_object_new_object();
    json_object_object_add(sg, "supported",
                           json_object_new_boolean(d->sub_groups));
    json_object_object_add(sg, "max_num_sub_groups", d->max_sub_groups ?
                           json_object_new_int64(d->max_sub_groups) : NULL);
    json_object_object_add(o, "sub_groups", sg);
    uuid_text(d, text);
    json_object_object_add(o, "uuid", string_or_null(text));
    pci_text(d, text);
    json_object_object_add(o, "pci_bus", string_or_null(text));
    JB("image_support", d->image_support);
    JB("unified_memory", d->unified_memory);
    ext = json_object_new_array();
    each_extension(d, add_extension, ext);
    json_object_object_add(o, "extensions", ext);
#undef JS
#undef JI
#undef JB
    return o;
}

/* How each figure of measure_json is measured, by its key. */
static json_object *
methods_json(void)
{
    static const struct { const char *key; cg_figure f; } k[] = {
        { "h2d_gbps", CG_FIGURE_H2D }, { "d2h_gbps", CG_FIGURE_D2H },
        { "copy_gbps", CG_FIGURE_COPY },
        { "launch_latency_us", CG_FIGURE_LAUNCH_LATENCY },
        { "launch_queued_us", CG_FIGURE_LAUNCH_QUEUED },
        { "sgemm_1024_gflops", CG_FIGURE_SGEMM },
        { "sgemm_1024_untuned_gflops", CG_FIGURE_SGEMM },
        { "fp32_fma_gflops", CG_FIGURE_FP32_FMA }
    };
    json_object *o = json_object_new_object();
    size_t i;

    for (i = 0; i < sizeof k / sizeof k[0]; i++)
        json_object_object_add(o, k[i].key, json_object_new_string(
            cg_measure_method(k[i].f)));
    return o;
}

static json_object *
measure_json(const cg_measurements *m, double untuned)
{
    json_object *o = json_object_new_object();

#define JD(k, v) json_object_object_add(o, k, json_object_new_double(v))
    JD("h2d_gbps", m->h2d_gbps);
    JD("d2h_gbps", m->d2h_gbps);
    JD("copy_gbps", m->copy_gbps);
    JD("launch_latency_us", m->launch_latency_us);
    JD("launch_queued_us", m->launch_queued_us);
    JD("sgemm_1024_gflops", m->sgemm_gflops);
    JD("sgemm_1024_untuned_gflops", untuned);
    JD("fp32_fma_gflops", m->fp32_fma_gflops);
#undef JD
    json_object_object_add(o, "methods", methods_json());
    return o;
}

static const char *const match_name[] = { "none", "vendor", "device",
                                          "exact" };

/* The library's log: what cg_context_apply_tuning skips is collected
 * here for the tuning report; anything else goes to stderr. */
static char tuning_warning[1024];
static int collecting;

static void
on_log(cg_log_level level, const char *message, void *user)
{
    size_t n = strlen(tuning_warning);

    if (!collecting) {
        tool_log(level, message, user);
        return;
    }
    snprintf(tuning_warning + n, sizeof tuning_warning - n, "%s%s%s",
             n ? "; " : "", level == CG_LOG_NOTE ? "note: " : "warning: ",
             message);
}

/* The tuning entries in force on ctx, as text or JSON. */
static void
print_tuning(cg_context *ctx, const char *warning)
{
    cg_tuning_entry e;
    int i, j, n = 0;

    cg_context_tuning_count(ctx, &n);
    printf("  Tuning in force (%d %s)\n", n, n == 1 ? "entry" : "entries");
    for (i = 0; i < n; i++) {
        if (cg_context_tuning_entry(ctx, i, &e) != CG_OK)
            continue;
        printf("    %-20s %-6s %-6s", e.kernel, e.shape, match_name[e.match]);
        for (j = 0; j < e.nparams; j++)
            printf(" %s=%ld", e.names[j], e.values[j]);
        if (e.time_us > 0 && e.default_time_us > 0)
            printf("  (%.2fx the default)", e.default_time_us / e.time_us);
        printf("\n      from %s\n", e.origin);
    }
    if (n == 0)
        printf("    none: built-in defaults (clgrad-tune makes a database)\n");
    if (warning && *warning)
        printf("    %s\n", warning);
}

static json_object *
tuning_json(cg_context *ctx, const char *warning)
{
    json_object *o = json_object_new_object(), *arr = json_object_new_array();
    cg_tuning_entry e;
    int i, j, n = 0;

    cg_context_tuning_count(ctx, &n);
    for (i = 0; i < n; i++) {
        json_object *eo = json_object_new_object(),
                    *p = json_object_new_object();

        if (cg_context_tuning_entry(ctx, i, &e) != CG_OK)
            continue;
        json_object_object_add(eo, "kernel", json_object_new_string(e.kernel));
        json_object_object_add(eo, "shape", json_object_new_string(e.shape));
        for (j = 0; j < e.nparams; j++)
            json_object_object_add(p, e.names[j],
                                   json_object_new_int64(e.values[j]));
        json_object_object_add(eo, "params", p);
        json_object_object_add(eo, "match",
                               json_object_new_string(match_name[e.match]));
        json_object_object_add(eo, "origin", json_object_new_string(e.origin));
        json_object_object_add(eo, "time_us", json_object_new_double(e.time_us));
        json_object_object_add(eo, "default_time_us",
                               json_object_new_double(e.default_time_us));
        json_object_array_add(arr, eo);
    }
    json_object_object_add(o, "entries", arr);
    if (warning && *warning)
        json_object_object_add(o, "warning", json_object_new_string(warning));
    return o;
}

/* A context on device `index` with no tuning in force yet, or NULL
 * after saying why. */
static cg_context *
open_context(int index)
{
    cg_context_options opts = { NULL, 0, 1 };
    char sel[16];
    cg_context *ctx;

    snprintf(sel, sizeof sel, "%d", index);
    opts.device = sel;
    ctx = cg_context_new_with(&opts);
    if (!ctx)
        fprintf(stderr, "%s: device %d: %s\n", prog, index, cg_last_error());
    return ctx;
}

/* Measures ctx's device `index` (SGEMM first with built-in parameters,
 * then with the tuning database in force: CLBlast's parameters, once set,
 * hold for the whole process) and reports the tuning in force; on failure
 * reports and returns nonzero. */
static int
measure(cg_context *ctx, int index, int do_measure, cg_measurements *m,
        double *untuned, int json, json_object **tuning)
{
    cg_measurements tuned;
    int status = CG_OK;

    if (do_measure)
        status = cg_context_measure(ctx, CG_MEASURE_ALL, m);
    if (status == CG_OK) {
        *untuned = m->sgemm_gflops;
        tuning_warning[0] = '\0';
        collecting = 1;
        cg_context_apply_tuning(ctx);
        collecting = 0;
        if (json)
            *tuning = tuning_json(ctx, tuning_warning);
        else
            print_tuning(ctx, tuning_warning);
    }
    if (status == CG_OK && do_measure) {
        status = cg_context_measure(ctx, CG_MEASURE_SGEMM, &tuned);
        m->sgemm_gflops = tuned.sgemm_gflops;
    }
    if (status)
        fprintf(stderr, "%s: measuring device %d: %s\n", prog, index,
                cg_last_error());
    return status != CG_OK;
}

int
main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "list", no_argument, NULL, 'l' },
        { "device", required_argument, NULL, 'd' },
        { "json", no_argument, NULL, 'j' },
        { "no-measure", no_argument, NULL, 'n' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 }
    };
    const char *selector = NULL;
    int list = 0, json = 0, do_measure = 1, c, n, i, first, last, failed = 0;
    json_object *root = NULL, *devs = NULL;
    cg_device_info info;

    while ((c = getopt_long(argc, argv, "ld:jnhV", longopts, NULL)) != -1) {
        switch (c) {
        case 'l': list = 1; break;
        case 'd': selector = optarg; break;
        case 'j': json = 1; break;
        case 'n': do_measure = 0; break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("%s (clgrad) %s\n", prog, cg_version()); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", prog, argv[optind]);
        usage(stderr);
        return 2;
    }
    cg_set_log(on_log, (void *)prog);
    cg_set_compile_progress(tool_progress, (void *)prog);
    if (cg_device_count(&n) != CG_OK || n == 0) {
        fprintf(stderr, "%s: %s\n", prog, n == 0 && cg_last_error()[0] == 0
                ? "the OpenCL platforms offer no device" : cg_last_error());
        fprintf(stderr, "%s: to run OpenCL on the CPU, install an ICD such "
                "as PoCL: apt-get install pocl-opencl-icd\n", prog);
        return 1;
    }
    first = 0;
    last = n - 1;
    if (selector) {
        if (cg_device_select(selector, &first) != CG_OK) {
            fprintf(stderr, "%s: %s\n", prog, cg_last_error());
            return 1;
        }
        last = first;
    }
    if (json) {
        root = json_object_new_object();
        json_object_object_add(root, "clgrad_version",
                               json_object_new_string(cg_version()));
        devs = json_object_new_array();
        json_object_object_add(root, "devices", devs);
    }
    for (i = first; i <= last; i++) {
        cg_measurements m;
        json_object *dj, *tuning = NULL;
        cg_context *ctx = NULL;
        size_t wg_multiple = 0;
        double untuned = 0;
        int measured = 0;

        memset(&m, 0, sizeof m);
        if (cg_device_get_info(i, &info) != CG_OK) {
            fprintf(stderr, "%s: device %d: %s\n", prog, i, cg_last_error());
            failed = 1;
            continue;
        }
        if (list && !json) {
            printf("%d  %d:%d  %-12s %s (%s)\n", i, info.platform_index,
                   info.device_index, cg_device_type_name(info.type),
                   info.name, info.platform_name);
            continue;
        }
        if (!list) {
            ctx = open_context(i);
            failed |= ctx == NULL;
            if (ctx && cg_context_work_group_multiple(ctx, &wg_multiple))
                wg_multiple = 0;   /* reported as not exposed */
        }
        if (!json) {
            if (i > first)
                putchar('\n');
            print_device(&info, wg_multiple);
            fflush(stdout);
        }
        if (ctx) {
            if (measure(ctx, i, do_measure, &m, &untuned, json, &tuning))
                failed = 1;
            else
                measured = do_measure;
            cg_context_free(ctx);
            if (measured && !json)
                print_measure(&m, untuned);
        }
        if (json) {
            dj = device_json(&info, wg_multiple);
            if (tuning)
                json_object_object_add(dj, "tuning", tuning);
            tuning = NULL;
            if (measured)
                json_object_object_add(dj, "measured",
                                       measure_json(&m, untuned));
            json_object_array_add(devs, dj);
        }
    }
    if (json) {
        puts(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY |
                                            JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(root);
    }
    return failed;
}
