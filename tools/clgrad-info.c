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
"each device's bandwidth, kernel launch cost and SGEMM throughput (with\n"
"CLBlast's built-in parameters, then with the tuning database), and show\n"
"the tuning entries in force for each device (see clgrad-tune).\n"
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

static void
print_device(const cg_device_info *d)
{
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
    row("Half precision (cl_khr_fp16)", "%s", d->fp16 ? "yes" : "no");
    row("Double precision", "%s", d->fp64 ? "yes" : "no");
    row("Image support", "%s", d->image_support ? "yes" : "no");
    row("Unified host memory", "%s", d->unified_memory ? "yes" : "no");
    row("Extensions", "%s", d->extensions);
}

static void
print_measure(const cg_measurements *m, double untuned)
{
    printf("  Measured\n");
    row("  Host to device", "%.2f GB/s", m->h2d_gbps);
    row("  Device to host", "%.2f GB/s", m->d2h_gbps);
    row("  Device copy (read + write)", "%.2f GB/s", m->copy_gbps);
    row("  Launch latency (enqueue + wait)", "%.1f us", m->launch_latency_us);
    row("  Launch, queued (per kernel)", "%.2f us", m->launch_queued_us);
    row("  SGEMM 1024^3 (CLBlast), tuned", "%.1f GFLOP/s", m->sgemm_gflops);
    row("  SGEMM 1024^3 (CLBlast), untuned", "%.1f GFLOP/s", untuned);
}

static json_object *
device_json(const cg_device_info *d)
{
    json_object *o = json_object_new_object(), *sizes, *vw;
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
    JB("fp16", d->fp16);
    JB("fp64", d->fp64);
    JB("image_support", d->image_support);
    JB("unified_memory", d->unified_memory);
    JS("extensions", d->extensions);
#undef JS
#undef JI
#undef JB
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
#undef JD
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
    snprintf(tuning_warning + n, sizeof tuning_warning - n, "%s%s",
             n ? "; " : "warning: ", message);
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

/* Measures device `index` (SGEMM first with built-in parameters, then
 * with the tuning database in force: CLBlast's parameters, once set, hold
 * for the whole process) and reports the tuning in force; on failure
 * reports and returns nonzero. */
static int
measure(int index, int do_measure, cg_measurements *m, double *untuned,
        int json, json_object **tuning)
{
    cg_context_options opts = { NULL, 0, 1 };
    cg_measurements tuned;
    char sel[16];
    cg_context *ctx;
    int status = CG_OK;

    snprintf(sel, sizeof sel, "%d", index);
    opts.device = sel;
    ctx = cg_context_new_with(&opts);
    if (!ctx) {
        fprintf(stderr, "%s: device %d: %s\n", prog, index, cg_last_error());
        return 1;
    }
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
    cg_context_free(ctx);
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
        if (!json) {
            if (i > first)
                putchar('\n');
            print_device(&info);
            fflush(stdout);
        }
        if (!list) {
            if (measure(i, do_measure, &m, &untuned, json, &tuning) != 0)
                failed = 1;
            else
                measured = do_measure;
            if (measured && !json)
                print_measure(&m, untuned);
        }
        if (json) {
            dj = device_json(&info);
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
