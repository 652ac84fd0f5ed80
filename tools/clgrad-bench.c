/* SPDX-License-Identifier: MIT */
/*
 * clgrad-bench - clgrad against reference implementations, measured in one
 * run on one machine: matmul's SGEMM against OpenBLAS, memory-bound kernels
 * against the device's copy bandwidth, and training steps against PyTorch
 * on the CPU.  Every result is a ratio (see usage()).
 */
#include "config.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef HAVE_OPENBLAS
#include <cblas.h>

/* OpenBLAS's own entry points (declared by its cblas.h on Debian, but not
 * by every cblas.h). */
extern void openblas_set_num_threads(int num_threads);
extern int openblas_get_num_threads(void);
extern char *openblas_get_corename(void);
extern char *openblas_get_config(void);
#endif

#include "bench.h"
#include "log.h"
#include "progress.h"

static const char *prog = "clgrad-bench";

static const char *const suite_names[] = {
    "gemm", "bandwidth", "mlp", "lstm", "scaling", "conv", "fft"
};
#define NSUITES 7

static void
usage(FILE *f)
{
    fprintf(f,
"Usage: %s [OPTION]...\n"
"Measure clgrad against references in the same run on the same machine.\n"
"Every result is a ratio, the median of repeated runs with its min and max:\n"
"a speed-up (reference time / clgrad time: above 1, clgrad is faster), or\n"
"for the bandwidth suite the fraction of the device's copy bandwidth.\n"
"\n"
"Suites:\n"
"  gemm       SGEMM at the layers' shapes, the library's choice and each\n"
"             backend (clgrad's kernels, CLBlast) vs OpenBLAS cblas_sgemm\n"
"  bandwidth  elementwise, reduction and Adam kernels vs device copy\n"
"  mlp        784-512-512-10 training step, batch 128, vs PyTorch CPU\n"
"  lstm       LSTM training steps (1x256, char-LSTM 2x512) vs PyTorch CPU\n"
"  scaling    LSTM step time over T and B, vs PyTorch CPU\n"
"  conv       a CNN training step (N32 3x32x32, conv 32,64,64) and conv2d\n"
"             layers, forward and each backward direction, and a long\n"
"             depthwise conv1d by FFT and direct, vs PyTorch CPU\n"
"  fft        batched rfft and irfft (256 x 4096, 64 x 65536) and the\n"
"             complex fft2 of 1024 x 1024, vs PyTorch CPU (torch.fft)\n"
"\n"
"  -s, --suite NAME     run only this suite (repeatable)\n"
"  -q, --quick          tiny sizes and 2 repeats: proves it works (CI)\n"
"  -r, --repeat N       timed repeats per case (default 5; the mlp suite,\n"
"                       whose step takes milliseconds, times 4 x N)\n"
"  -t, --threads N      OpenBLAS and PyTorch threads (default: the\n"
"                       device's compute units)\n"
"  -d, --device SEL     the OpenCL device (see clgrad-info --list)\n"
"  -j, --json           write the results as JSON\n"
"  -c, --csv DIR        write DIR/scaling.csv, and DIR/scaling.svg when\n"
"                       gnuplot is installed\n"
"  -P, --precision LIST the mlp, lstm and conv suites' precisions, of\n"
"                       fp32, bf16, fp16 (comma-separated; default fp32):\n"
"                       bf16 and fp16 run each step's forward pass and\n"
"                       loss under autocast (fp16 with the loss scaler),\n"
"                       and the conv layers on 16-bit tensors, in a row\n"
"                       of their own with its time relative to fp32's\n"
"  -p, --profile        also time the phases of each training step\n"
"                       (forward, backward, optimizer, with a wait\n"
"                       between phases) and give the kernels with the\n"
"                       most device time per step (OpenCL events;\n"
"                       profiling adds host time to every launch, so\n"
"                       compare timings without it)\n"
"  -T, --torch-device DEV  run the PyTorch reference on PyTorch's device\n"
"                       DEV (e.g. cuda: cuBLAS and cuDNN, TF32 off, each\n"
"                       step synchronised) instead of the CPU; the gemm\n"
"                       suite then also compares with torch.mm there\n"
"  -h, --help           show this help and exit\n"
"  -V, --version        show the version and exit\n"
"\n"
"PyTorch runs as a subprocess: $CLGRAD_BENCH_PYTHON (default\n"
"/usr/bin/python3, Debian's python3-torch) with OMP_NUM_THREADS=N and\n"
"OMP_WAIT_POLICY=passive; without torch the PyTorch suites are skipped,\n"
"and the gemm suite when clgrad-bench was built without OpenBLAS.\n"
"Its script: $CLGRAD_BENCH_SCRIPT, else bench_torch.py from the source\n"
"tree or %s.\n", prog, CG_BENCH_DATADIR "/bench_torch.py");
}

/* ------------------------------------------------------------------------
 * Messages, timing, statistics, rows
 * ------------------------------------------------------------------------ */

void
bench_fail(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "%s: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void
bench_progress(const char *fmt, ...)
{
    va_list ap;

    if (!isatty(2))
        return;
    fprintf(stderr, "\r\033[K%s: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fflush(stderr);
}

double
bench_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

void
bench_round_ratio(const bench *b, double (*times)[BENCH_MAX_REPEAT],
                  int ref, int p, bstat *st)
{
    double ratio[BENCH_MAX_REPEAT];
    int r;

    for (r = 0; r < b->repeat; r++)
        ratio[r] = times[ref][r] / times[p][r];
    bench_stat(ratio, b->repeat, st);
}

void
bench_add_vs_fp32(json_object *row, const bstat *vs)
{
    bench_add_double(row, "speedup_vs_fp32", vs->med);
    bench_add_double(row, "speedup_vs_fp32_min", vs->min);
    bench_add_double(row, "speedup_vs_fp32_max", vs->max);
}

double
bench_peak_fraction(const bench *b, double gflop, double seconds)
{
    return b->fma_gflops > 0 && seconds > 0
           ? gflop / seconds / b->fma_gflops : 0;
}

void
bench_stat(const double *times, int n, bstat *st)
{
    double s[BENCH_MAX_REPEAT];

    memcpy(s, times, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    st->min = s[0];
    st->max = s[n - 1];
    st->med = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

int
bench_time_rounds(const bench *b, int n, cg_context *const *ctx,
                  bench_fn fn, void *const *arg, int inner,
                  double (*times)[BENCH_MAX_REPEAT], bstat *st)
{
    double t;
    int i, j, k, p, calls;

    for (i = 0; i < b->warmup + b->repeat; i++) {
        calls = i < b->warmup ? 1 : inner;
        for (k = 0; k < n; k++) {
            p = (i + k) % n;        /* who goes first rotates */
            t = bench_now();
            for (j = 0; j < calls && fn(arg[p]) == 0; j++)
                continue;
            if (j < calls || (ctx[p] && cg_context_finish(ctx[p]))) {
                bench_fail("%s", cg_last_error());
                return -1;
            }
            if (i >= b->warmup)
                times[p][i - b->warmup] = (bench_now() - t) / inner;
        }
    }
    for (p = 0; p < n; p++)
        bench_stat(times[p], b->repeat, &st[p]);
    return 0;
}

int
bench_time_n(const bench *b, cg_context *ctx, bench_fn fn, void *arg,
             int inner, bstat *st)
{
    double times[1][BENCH_MAX_REPEAT];

    return bench_time_rounds(b, 1, &ctx, fn, &arg, inner, times, st);
}

int
bench_time(const bench *b, cg_context *ctx, bench_fn fn, void *arg,
           bstat *st)
{
    return bench_time_n(b, ctx, fn, arg, 1, st);
}

void
bench_add_double(json_object *o, const char *key, double v)
{
    json_object_object_add(o, key, json_object_new_double(v));
}

void
bench_add_int(json_object *o, const char *key, int64_t v)
{
    json_object_object_add(o, key, json_object_new_int64(v));
}

static json_object *
stat_json(double med, double min, double max)
{
    json_object *o = json_object_new_object();

    bench_add_double(o, "median", med);
    bench_add_double(o, "min", min);
    bench_add_double(o, "max", max);
    return o;
}

json_object *
bench_ms_json(const bstat *st)
{
    return stat_json(st->med * 1e3, st->min * 1e3, st->max * 1e3);
}

json_object *
bench_row(const char *name, const bstat *clg, const bstat *ref,
          const char *ratio_key)
{
    json_object *o = json_object_new_object();

    json_object_object_add(o, "case", json_object_new_string(name));
    json_object_object_add(o, "clgrad_ms", bench_ms_json(clg));
    json_object_object_add(o, "reference_ms", bench_ms_json(ref));
    /* The median ratio is the ratio of the medians; the range pairs the
     * extremes (the worst clgrad run with the best reference run). */
    json_object_object_add(o, ratio_key, stat_json(ref->med / clg->med,
                                                   ref->min / clg->max,
                                                   ref->max / clg->min));
    return o;
}

json_object *
bench_suite_new(const char *reference, const char *meaning)
{
    json_object *o = json_object_new_object();

    json_object_object_add(o, "reference", json_object_new_string(reference));
    json_object_object_add(o, "ratio_meaning",
                           json_object_new_string(meaning));
    json_object_object_add(o, "rows", json_object_new_array());
    return o;
}

json_object *
bench_suite_skipped(const char *why)
{
    json_object *o = json_object_new_object();

    json_object_object_add(o, "skipped", json_object_new_string(why));
    return o;
}

void
bench_suite_add(json_object *s, json_object *row)
{
    json_object *rows;

    json_object_object_get_ex(s, "rows", &rows);
    json_object_array_add(rows, row);
}

/* ------------------------------------------------------------------------
 * The PyTorch reference
 * ------------------------------------------------------------------------ */

static void
find_torch(bench *b)
{
    const char *py = getenv("CLGRAD_BENCH_PYTHON");
    const char *script = getenv("CLGRAD_BENCH_SCRIPT");
    char cmd[2200];

    b->torch_checked = 1;
    snprintf(b->python, sizeof b->python, "%s",
             py && *py ? py : "/usr/bin/python3");
    if (script && *script)
        snprintf(b->script, sizeof b->script, "%s", script);
    else if (access(CG_BENCH_SRCDIR "/tools/bench_torch.py", R_OK) == 0)
        snprintf(b->script, sizeof b->script, "%s",
                 CG_BENCH_SRCDIR "/tools/bench_torch.py");
    else
        snprintf(b->script, sizeof b->script, "%s",
                 CG_BENCH_DATADIR "/bench_torch.py");
    if (strchr(b->python, '\'') || strchr(b->script, '\'')) {
        snprintf(b->torch_missing, sizeof b->torch_missing,
                 "a quote in the python or script path");
        return;
    }
    if (access(b->python, X_OK) != 0) {
        snprintf(b->torch_missing, sizeof b->torch_missing,
                 "%s is not an executable (set CLGRAD_BENCH_PYTHON, or "
                 "apt-get install python3-torch)", b->python);
        return;
    }
    if (access(b->script, R_OK) != 0) {
        snprintf(b->torch_missing, sizeof b->torch_missing,
                 "the PyTorch script %s cannot be read (set "
                 "CLGRAD_BENCH_SCRIPT)", b->script);
        return;
    }
    snprintf(cmd, sizeof cmd, "'%s' -c 'import torch; "
             "print(torch.__version__)' 2>/dev/null", b->python);
    {
        FILE *p = popen(cmd, "r");
        char line[64] = "";

        if (p && fgets(line, sizeof line, p))
            line[strcspn(line, "\n")] = 0;
        if (!p || pclose(p) != 0 || !line[0]) {
            snprintf(b->torch_missing, sizeof b->torch_missing,
                     "%s cannot import torch (apt-get install "
                     "python3-torch)", b->python);
            return;
        }
        snprintf(b->torch_version, sizeof b->torch_version, "%s", line);
    }
}

const char *
bench_torch_where(const bench *b)
{
    return b->torch_device ? b->torch_device : "CPU";
}

/* Reads all of f into a new string. */
static char *
slurp(FILE *f)
{
    size_t n = 0, cap = 4096;
    char *s = malloc(cap), *t;

    while (s) {
        n += fread(s + n, 1, cap - n - 1, f);
        if (n < cap - 1)
            break;
        cap *= 2;
        t = realloc(s, cap);
        if (!t)
            free(s);
        s = t;
    }
    if (s)
        s[n] = 0;
    return s;
}

int
bench_torch(bench *b, int n, char *const *specs, bstat *st)
{
    char cmd[8192];
    size_t len;
    json_object *root = NULL, *res;
    FILE *p;
    char *out;
    int i, rc = -1;

    if (!b->torch_checked)
        find_torch(b);
    if (b->torch_missing[0])
        return 1;
    len = (size_t)snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=%d "
                           "OMP_WAIT_POLICY=passive '%s' '%s' --threads %d "
                           "--warmup %d --repeat %d", b->threads, b->python,
                           b->script, b->threads, b->warmup, b->repeat);
    if (b->torch_device)
        len += (size_t)snprintf(cmd + len, sizeof cmd - len, " --device %s",
                                b->torch_device);
    for (i = 0; i < n && len < sizeof cmd; i++)
        len += (size_t)snprintf(cmd + len, sizeof cmd - len, " %s",
                                specs[i]);
    if (len >= sizeof cmd) {
        bench_fail("PyTorch command too long");
        return -1;
    }
    fflush(NULL);
    p = popen(cmd, "r");
    if (!p) {
        bench_fail("cannot run %s", b->python);
        return -1;
    }
    out = slurp(p);
    if (pclose(p) != 0 || !out) {
        bench_fail("the PyTorch reference failed: %s", cmd);
        goto done;
    }
    root = json_tokener_parse(out);
    if (!root || !json_object_object_get_ex(root, "results", &res) ||
        (int)json_object_array_length(res) != n) {
        bench_fail("the PyTorch reference printed no results: %s", cmd);
        goto done;
    }
    for (i = 0; i < n; i++) {
        json_object *r = json_object_array_get_idx(res, (size_t)i), *ts;
        double times[BENCH_MAX_REPEAT];
        int k;

        if (!json_object_object_get_ex(r, "times_s", &ts) ||
            (int)json_object_array_length(ts) != b->repeat)
            goto done;
        for (k = 0; k < b->repeat; k++)
            times[k] = json_object_get_double(
                json_object_array_get_idx(ts, (size_t)k));
        bench_stat(times, b->repeat, &st[i]);
    }
    rc = 0;
done:
    json_object_put(root);
    free(out);
    return rc;
}

/* ------------------------------------------------------------------------
 * Output
 * ------------------------------------------------------------------------ */

/* The field of a row whose name contains "ratio". */
static const char *
ratio_key(json_object *row)
{
    json_object_object_foreach(row, key, val) {
        (void)val;
        if (strstr(key, "ratio"))
            return key;
    }
    return NULL;
}

static double
get_median(json_object *row, const char *key)
{
    json_object *v, *m;

    if (!key || !json_object_object_get_ex(row, key, &v) ||
        !json_object_object_get_ex(v, "median", &m))
        return 0;
    return json_object_get_double(m);
}

/* The row's other fields, on lines of their own under it. */
static void
print_extra(json_object *row)
{
    int col = 0;

    json_object_object_foreach(row, key, val) {
        if (strcmp(key, "case") == 0 || strcmp(key, "clgrad_ms") == 0 ||
            strcmp(key, "reference_ms") == 0 || strstr(key, "ratio"))
            continue;
        if (col > 90) {
            putchar('\n');
            col = 0;
        }
        if (col == 0)
            col = printf("  %38s", "");
        if (json_object_is_type(val, json_type_double))
            col += printf(" %s %.4g", key, json_object_get_double(val));
        else if (json_object_is_type(val, json_type_object)) {
            const char *sep = ":";

            col += printf(" %s", key);
            json_object_object_foreach(val, k2, v2) {
                col += printf("%s %s %.4g", sep, k2,
                              json_object_get_double(v2));
                sep = ",";
            }
        }
        else
            col += printf(" %s %s", key, json_object_get_string(val));
    }
    if (col)
        putchar('\n');
}

static void
print_suite(const char *name, json_object *s)
{
    json_object *v, *rows;
    size_t i;

    printf("\n%s", name);
    if (json_object_object_get_ex(s, "skipped", &v) ||
        json_object_object_get_ex(s, "failed", &v)) {
        printf(": %s: %s\n", json_object_object_get_ex(s, "failed", NULL)
               ? "failed" : "skipped", json_object_get_string(v));
        return;
    }
    if (json_object_object_get_ex(s, "reference", &v))
        printf(": vs %s", json_object_get_string(v));
    putchar('\n');
    if (json_object_object_get_ex(s, "ratio_meaning", &v))
        printf("  ratio: %s\n", json_object_get_string(v));
    printf("  %-38s %11s %11s %9s %19s\n", "case", "clgrad ms", "ref ms",
           "ratio", "ratio min-max");
    json_object_object_get_ex(s, "rows", &rows);
    for (i = 0; rows && i < json_object_array_length(rows); i++) {
        json_object *r = json_object_array_get_idx(rows, i), *c, *rv, *lo,
                    *hi;
        const char *rk = ratio_key(r);
        char range[40] = "";

        json_object_object_get_ex(r, "case", &c);
        if (rk && json_object_object_get_ex(r, rk, &rv) &&
            json_object_object_get_ex(rv, "min", &lo) &&
            json_object_object_get_ex(rv, "max", &hi))
            snprintf(range, sizeof range, "%.3f-%.3f",
                     json_object_get_double(lo), json_object_get_double(hi));
        printf("  %-38s %11.3f %11.3f %9.3f %19s", json_object_get_string(c),
               get_median(r, "clgrad_ms"), get_median(r, "reference_ms"),
               get_median(r, rk), range);
        putchar('\n');
        print_extra(r);
    }
    if (json_object_object_get_ex(s, "note", &v))
        printf("  note: %s\n", json_object_get_string(v));
}

static void
print_header(const bench *b, json_object *root)
{
    json_object *o, *v;

    printf("clgrad-bench %s%s: %s (%s), %u compute units\n", cg_version(),
           b->quick ? " (quick: tiny sizes, not a measurement)" : "",
           b->info.name, b->info.platform_name, b->info.compute_units);
    printf("  %-36s%.1f GFLOP/s\n", "Measured fp32 FMA peak",
           b->fma_gflops);
    printf("  %-36s%.2f GB/s\n", "Measured copy bandwidth (r + w)",
           b->copy_gbps);
    if (json_object_object_get_ex(root, "openblas", &o)) {
        json_object_object_get_ex(o, "core", &v);
        printf("  %-36s%s", "OpenBLAS core", json_object_get_string(v));
        json_object_object_get_ex(o, "threads", &v);
        printf(", %d threads\n", json_object_get_int(v));
    }
    printf("  %-36s%d warm-up, %d timed\n", "Runs per case", b->warmup,
           b->repeat);
}

/* ------------------------------------------------------------------------
 * Main
 * ------------------------------------------------------------------------ */

cg_context *
bench_context(const bench *b, int no_tuning)
{
    cg_context_options o;
    cg_context *ctx;

    memset(&o, 0, sizeof o);
    o.device = b->device;
    o.no_tuning = no_tuning;
    o.profiling = b->profile;
    ctx = cg_context_new_with(&o);
    if (!ctx)
        bench_fail("%s", cg_last_error());
    return ctx;
}

static int
parse_int(const char *opt, const char *s, int lo, int hi, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);

    if (!*s || *end || v < lo || v > hi) {
        bench_fail("%s %s: want a whole number from %d to %d", opt, s, lo,
                   hi);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int
suite_index(const char *name)
{
    int i;

    for (i = 0; i < NSUITES; i++)
        if (strcmp(name, suite_names[i]) == 0)
            return i;
    return -1;
}

/* Records OpenBLAS's configuration, when clgrad-bench has it. */
static void
add_openblas(const bench *b, json_object *root)
{
#ifdef HAVE_OPENBLAS
    json_object *ob = json_object_new_object();

    openblas_set_num_threads(b->threads);
    json_object_object_add(ob, "core",
                           json_object_new_string(openblas_get_corename()));
    bench_add_int(ob, "threads", openblas_get_num_threads());
    json_object_object_add(ob, "config",
                           json_object_new_string(openblas_get_config()));
    json_object_object_add(root, "openblas", ob);
#endif
}

/* Measures the device's limits (with the untuned context) and records
 * OpenBLAS's configuration. */
static int
measure_limits(bench *b, cg_context *ctx, json_object *root)
{
    cg_measurements m;
    json_object *d = json_object_new_object();

    if (cg_context_measure(ctx, CG_MEASURE_BANDWIDTH, &m) ||
        bench_fma_peak(ctx, &b->fma_gflops)) {
        bench_fail("measuring the device: %s", cg_last_error());
        json_object_put(d);
        return -1;
    }
    b->copy_gbps = m.copy_gbps;
    b->fma_runs = 1;
    json_object_object_add(d, "name", json_object_new_string(b->info.name));
    json_object_object_add(d, "platform",
                           json_object_new_string(b->info.platform_name));
    json_object_object_add(d, "driver_version",
                           json_object_new_string(b->info.driver_version));
    bench_add_int(d, "compute_units", b->info.compute_units);
    bench_add_double(d, "fp32_fma_peak_gflops", b->fma_gflops);
    bench_add_double(d, "copy_gbps", b->copy_gbps);
    json_object_object_add(root, "device", d);
    add_openblas(b, root);
    return 0;
}

/* The FMA peak measured again on ctx: a slow spell of a shared machine
 * during one measurement would make every peak_fraction after it too
 * high, so each suite divides by the highest so far, recorded in its
 * JSON.  Returns the new measurement (0 where it failed: the message is
 * printed, the run goes on with the peak it had). */
static double
remeasure_peak(bench *b, cg_context *ctx)
{
    double g = 0;

    if (bench_fma_peak(ctx, &g)) {
        bench_fail("measuring the FMA peak again: %s", cg_last_error());
        return 0;
    }
    b->fma_runs++;
    if (g > b->fma_gflops)
        b->fma_gflops = g;
    return g;
}

static json_object *
run_suite(bench *b, int i, cg_context **ctx)
{
    if (!*ctx && !(*ctx = bench_context(b, 0)))
        return NULL;
    switch (i) {
    case 1: return suite_bandwidth(b, *ctx);
    case 2: return suite_mlp(b);
    case 3: return suite_lstm(b);
    case 5: return suite_conv(b);
    case 6: return suite_fft(b);
    default: return suite_scaling(b, *ctx);
    }
}

/* The FMA peak once more after the suites: recorded, and where it is
 * above the peak a suite divided by (a slow spell during the measurements
 * before it) by more than 5 %, said, since that suite's peak_fraction is
 * too high by the ratio. */
static void
end_peak(bench *b, cg_context *ctx, json_object *root, json_object *suites)
{
    json_object *d, *v;
    double g = remeasure_peak(b, ctx);

    if (g <= 0 || !json_object_object_get_ex(root, "device", &d))
        return;
    bench_add_double(d, "fp32_fma_peak_end_gflops", g);
    bench_add_double(d, "fp32_fma_peak_max_gflops", b->fma_gflops);
    bench_add_int(d, "fp32_fma_peak_measurements", b->fma_runs);
    if (b->json)
        return;
    printf("\n  %-36s%.1f GFLOP/s (highest of %d: %.1f)\n",
           "FMA peak measured again at the end", g, b->fma_runs,
           b->fma_gflops);
    json_object_object_foreach(suites, name, s) {
        if (!json_object_object_get_ex(s, "fp32_fma_peak_gflops", &v) ||
            json_object_get_double(v) * 1.05 >= g)
            continue;
        printf("  %s: peak_fraction over %.1f GFLOP/s is %.2fx too high "
               "against the end's peak\n", name, json_object_get_double(v),
               g / json_object_get_double(v));
    }
}

/* --precision's list into b (each once). */
static int
parse_precisions(const char *arg, bench *b)
{
    static const char *const names[3] = { "fp32", "bf16", "fp16" };
    static const int dt[3] = { CG_F32, CG_BF16, CG_F16 };
    const char *p = arg;
    size_t n;
    int i, k;

    b->nprecision = 0;
    while (*p) {
        n = strcspn(p, ",");
        for (i = 0; i < 3; i++)
            if (strlen(names[i]) == n && strncmp(p, names[i], n) == 0)
                break;
        for (k = 0; i < 3 && k < b->nprecision; k++)
            if (b->precision[k] == dt[i])
                break;
        if (i == 3 || k < b->nprecision) {
            bench_fail("--precision %s: want a list of fp32, bf16 and fp16, "
                       "each once", arg);
            return -1;
        }
        b->precision[b->nprecision++] = dt[i];
        p += n;
        if (*p == ',')
            p++;
    }
    if (!b->nprecision) {
        bench_fail("--precision: an empty list");
        return -1;
    }
    return 0;
}

int
main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "suite", required_argument, NULL, 's' },
        { "quick", no_argument, NULL, 'q' },
        { "repeat", required_argument, NULL, 'r' },
        { "threads", required_argument, NULL, 't' },
        { "device", required_argument, NULL, 'd' },
        { "json", no_argument, NULL, 'j' },
        { "csv", required_argument, NULL, 'c' },
        { "profile", no_argument, NULL, 'p' },
        { "precision", required_argument, NULL, 'P' },
        { "torch-device", required_argument, NULL, 'T' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 }
    };
    bench b;
    int want[NSUITES] = { 0 }, any = 0, c, i, idx, failed = 0, nrun;
    json_object *root, *suites;
    cg_context *ctx = NULL, *untuned;
    double first_peak;      /* the header's FMA peak */

    memset(&b, 0, sizeof b);
    b.warmup = 1;
    while ((c = getopt_long(argc, argv, "s:qr:t:d:jc:pP:T:hV", longopts,
                            NULL)) != -1) {
        switch (c) {
        case 's':
            if ((i = suite_index(optarg)) < 0) {
                bench_fail("no suite '%s' (want gemm, bandwidth, mlp, "
                           "lstm, scaling, conv or fft)", optarg);
                return 2;
            }
            want[i] = any = 1;
            break;
        case 'q': b.quick = 1; break;
        case 'r':
            if (parse_int("--repeat", optarg, 1, BENCH_MAX_REPEAT,
                          &b.repeat))
                return 2;
            break;
        case 't':
            if (parse_int("--threads", optarg, 1, 1024, &b.threads))
                return 2;
            break;
        case 'd': b.device = optarg; break;
        case 'j': b.json = 1; break;
        case 'c': b.csv_dir = optarg; break;
        case 'p': b.profile = 1; break;
        case 'P':
            if (parse_precisions(optarg, &b))
                return 2;
            break;
        case 'T':
            /* it goes into a shell command: a name like cuda or cuda:1 */
            if (!*optarg || strspn(optarg, "abcdefghijklmnopqrstuvwxyz"
                                   "0123456789:") != strlen(optarg)) {
                bench_fail("--torch-device '%s': want a PyTorch device "
                           "name such as cpu, cuda or cuda:1", optarg);
                return 2;
            }
            b.torch_device = optarg;
            break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("%s (clgrad) %s\n", prog, cg_version()); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        bench_fail("unexpected argument '%s'", argv[optind]);
        usage(stderr);
        return 2;
    }
    cg_set_log(tool_log, (void *)prog);
    cg_set_compile_progress(tool_progress, (void *)prog);
    for (i = 0; i < NSUITES; i++)
        want[i] = want[i] || !any;
    if (!b.repeat)
        b.repeat = b.quick ? 2 : 5;
    if (!b.nprecision)
        b.precision[b.nprecision++] = CG_F32;
    if (cg_device_select(b.device, &idx) ||
        cg_device_get_info(idx, &b.info)) {
        bench_fail("%s", cg_last_error());
        return 1;
    }
    if (!b.threads)
        b.threads = b.info.compute_units ? (int)b.info.compute_units : 1;

    root = json_object_new_object();
    json_object_object_add(root, "clgrad_version",
                           json_object_new_string(cg_version()));
    bench_add_int(root, "threads", b.threads);
    bench_add_int(root, "warmup", b.warmup);
    bench_add_int(root, "repeat", b.repeat);
    json_object_object_add(root, "quick", json_object_new_boolean(b.quick));
    /* The untuned context comes first: tuned CLBlast parameters, once set
     * by a tuned context, hold for the whole process. */
    untuned = bench_context(&b, 1);
    if (!untuned || measure_limits(&b, untuned, root)) {
        cg_context_free(untuned);
        json_object_put(root);
        return 1;
    }
    first_peak = b.fma_gflops;
    if (!b.json)
        print_header(&b, root);
    suites = json_object_new_object();
    json_object_object_add(root, "suites", suites);
    for (i = 0, nrun = 0; i < NSUITES; i++) {
        json_object *s = NULL;
        double used;

        if (!want[i])
            continue;
        if (nrun++ > 0)
            remeasure_peak(&b, untuned);
        used = b.fma_gflops;
        s = i == 0 ? suite_gemm(&b) : run_suite(&b, i, &ctx);
        bench_progress("%s done\n", suite_names[i]);
        if (!s) {
            failed = 1;
            s = json_object_new_object();
            json_object_object_add(s, "failed",
                                   json_object_new_string(cg_last_error()));
        }
        bench_add_double(s, "fp32_fma_peak_gflops", used);
        json_object_object_add(suites, suite_names[i], s);
        if (!b.json) {
            print_suite(suite_names[i], s);
            if (used != first_peak)
                printf("  peak_fraction over %.1f GFLOP/s, the highest "
                       "of %d FMA peak measurements so far\n", used,
                       b.fma_runs);
            fflush(stdout);
        }
    }
    end_peak(&b, untuned, root, suites);
    cg_context_free(untuned);
    if (b.torch_version[0]) {
        json_object *t = json_object_new_object();

        json_object_object_add(t, "python", json_object_new_string(b.python));
        json_object_object_add(t, "version",
                               json_object_new_string(b.torch_version));
        bench_add_int(t, "threads", b.threads);
        json_object_object_add(t, "device", json_object_new_string(
            b.torch_device ? b.torch_device : "cpu"));
        json_object_object_add(root, "torch", t);
        if (!b.json)
            printf("\nPyTorch %s (%s) on %s, %d threads, "
                   "OMP_WAIT_POLICY=passive\n", b.torch_version, b.python,
                   bench_torch_where(&b), b.threads);
    }
    if (b.json)
        puts(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY |
                                            JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(root);
    cg_context_free(ctx);
    return failed;
}
