/* SPDX-License-Identifier: MIT */
/*
 * clgrad-tune - measures kernel parameters for one device within a time
 * budget and writes the fastest into the device's tuning database (see
 * Tuning in clgrad.h): CLBlast's GEMM kernels, clgrad's fused recurrent
 * step kernels and the work-group sizes of its reduction kernel files.  Every candidate is timed after a warm-up call (the first
 * call compiles, which is not counted) and checked against the result with
 * the built-in defaults; the defaults are measured first, as CLBlast's
 * parameters, once overridden, hold for the rest of the process.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "outpath.h"
#include "progress.h"
#include "tune.h"
#include "cl/internal.h"
#include "tune/internal.h"

static const char *prog = "clgrad-tune";
static volatile sig_atomic_t stop_flag;
static volatile sig_atomic_t sigint_seen;

static void
usage(FILE *f)
{
    fprintf(f,
"Usage: %s [OPTION]...\n"
"Measure kernel parameters for one OpenCL device within a time budget and\n"
"write the fastest into its tuning database, which every clgrad context on\n"
"that device then uses.\n"
"\n"
"Kernels (--only takes a comma-separated list of these names):\n"
"  rnn                   clgrad's fused LSTM/GRU/RNN step kernels: VW, RB and\n"
"                        WG (declared by the @tunable lines of kernels/rnn.cl)\n"
"                        per cell type and hidden size, timed on the step\n"
"                        kernels' forward and backward launches at each\n"
"                        --model-shape (checked on a whole layer)\n"
"  clblast.Xgemm         CLBlast's GEMM kernel: a curated list of CPU- and\n"
"                        GPU-like parameter sets, then CLBlast's own random\n"
"                        search in a child process, on SGEMM N x N x N\n"
"  clblast.XgemmDirect   CLBlast's direct GEMM kernel, on the LSTM step's\n"
"                        recurrent product B x 4H x H\n"
"  clblast.GemmRoutine   the size from which CLBlast uses Xgemm rather than\n"
"                        XgemmDirect (XGEMM_MIN_INDIRECT_SIZE)\n"
"  gemm                  clgrad's GEMM per product class (NN, NT, TN, TT\n"
"                        times skinny, small, large, longk): the @tunable\n"
"                        values of kernels/gemm.cl, whether CLBlast runs\n"
"                        the class instead, whether kernels/gemm_pack.cl\n"
"                        runs it on packed operands and, for NT, whether it\n"
"                        runs on a packed copy of B^T, each candidate's product\n"
"                        checked against a double-precision one on the host;\n"
"                        the fastest is timed again against the fastest of\n"
"                        another backend in five alternating rounds; those\n"
"                        three choices are written only where they differ\n"
"                        from the library's built-in rules\n"
"  pack                  the @tunable values of kernels/gemm_pack.cl: the\n"
"                        packed GEMM's micro-tile, PMR rows by PTN vectors,\n"
"                        as a grid (of vectors no wider than the device's\n"
"                        own), then PVW, PMB, PKC and PWG one at a\n"
"                        time, timed on a stride-1 3x3 convolution forward\n"
"                        and backward (B/4 images of H/4 channels, 28x28)\n"
"                        and a packed product (4H x I over B*T rows) of the\n"
"                        first --model-shape, checked against the defaults'\n"
"                        results; the winner is kept only if it beats the\n"
"                        defaults again in five alternating rounds\n"
"  conv                  clgrad's convolution algorithm per shape class (fwd\n"
"                        and bwd, and tfwd and tbwd of conv_transpose2d,\n"
"                        times depthwise, small, large): im2col + GEMM or\n"
"                        the direct kernels, and whether im2col makes\n"
"                        columns always where its rule would read stride-1\n"
"                        windows in place, each checked against a\n"
"                        double-precision convolution on the host; and\n"
"                        conv1d's fwd1d.long: the kernel length from which\n"
"                        conv1d runs by FFT (a depthwise 64 x 4096 conv1d,\n"
"                        FFT against direct at 16 to 2048 taps)\n"
"  fft                   the path of clgrad's Fourier transforms per class\n"
"                        (real.large: rfft, irfft above 2048; complex.large:\n"
"                        fft, ifft from 1024): clFFT, Bluestein's algorithm\n"
"                        or the complex transform, each checked against a\n"
"                        double-precision DFT on the host\n"
"  dp                    data parallelism's gradient bucket sizes (cg_dp):\n"
"                        a few sizes timed on a data-parallel training step\n"
"                        of an MLP on two in-process replicas, each with its\n"
"                        own context on this device\n"
"  rnn.path              the hidden size from which a recurrent layer uses a\n"
"                        GEMM per step instead of the fused kernel, and\n"
"                        whether those GEMMs run on the recurrent weights\n"
"                        packed once per pass\n"
"  kernels               the work-group size of clgrad's reduction kernel\n"
"                        files reduce, softmax, layer_norm, loss and optim\n"
"                        (their @tunable lines), each timed on an operation\n"
"                        of the first --model-shape's size (B*T rows)\n"
"  clblast.copy-kernels  CLBlast's Copy, Pad, Transpose and Padtranspose\n"
"                        (its own search in the child; only with time left)\n"
"Default: all of them, in this order.\n"
"\n"
"Options:\n"
"  -d, --device SEL         the device (P:D, an index, gpu/cpu/accelerator,\n"
"                           or part of its name; default CLGRAD_DEVICE, else\n"
"                           the first GPU, else the first device)\n"
"  -b, --budget SECONDS     stop and write the best found after this long\n"
"                           (default 300); shared among the kernels\n"
"  -f, --fraction F         the fraction of its search space CLBlast's random\n"
"                           search covers in its main round, 0 < F <= 1\n"
"                           (default 0.002); rounds of F/16 and F/4 come\n"
"                           first, and 4F, 16F, ... follow while time is left\n"
"  -m, --model-shape SPEC   a recurrent layer to tune for, CELL:B=..,H=..,\n"
"                           I=..,T=.. with CELL lstm, gru, rnn or rnn-relu;\n"
"                           B defaults to 32, I to H, T to 32.  Repeatable.\n"
"                           Default: lstm:B=32,H=256 and lstm:B=32,H=128\n"
"      --path-sizes H,...   hidden sizes for rnn.path (default those of the\n"
"                           --model-shape options, else 256,512,1024)\n"
"  -k, --only KERNELS       tune only these (see above)\n"
"      --max-candidates N   try at most N candidates per kernel and shape\n"
"                           besides the defaults\n"
"      --gemm-size N        SGEMM size for clblast.Xgemm (default 1024,\n"
"                           smaller when the budget is under 2 minutes)\n"
"      --gemm-classes LIST  the product classes the stage gemm tunes, such\n"
"                           as NT.skinny,TN.longk (default: all 16)\n"
"      --fft-classes LIST   the transform classes the stage fft tunes:\n"
"                           real.large, complex.large (default: both)\n"
"  -o, --output PATH        the database file (default: the device's file in\n"
"                           the tuning directory; entries for other kernels\n"
"                           already there are kept).  An existing file must\n"
"                           be this device's tuning database: any other file\n"
"                           is left alone, checked before tuning starts\n"
"  -n, --dry-run            measure and report, write nothing\n"
"  -j, --json               print a machine-readable report on stdout: every\n"
"                           candidate tried or skipped (with the reason), the\n"
"                           best and the default times\n"
"  -q, --quiet              no progress and no summary\n"
"  -h, --help               show this help and exit\n"
"  -V, --version            show the version and exit\n"
"\n"
"Times are per SGEMM call, per time step of forward plus backward, or per\n"
"operation (kernels), the median of several runs after a warm-up.  Ctrl-C\n"
"stops the current candidate and writes what was found so far; a second\n"
"Ctrl-C quits at once without writing.  Exit status: 0 done (also when\n"
"interrupted), 1 failure, 2 usage.\n"
"\n"
"Environment: CLGRAD_TUNING_DIR (where the databases live), CLGRAD_DEVICE,\n"
"CLGRAD_CACHE_DIR, CLGRAD_KERNEL_DIR; CLGRAD_TUNE_CHILD_STDERR=1 shows the\n"
"search child's messages.\n", prog);
}

/* ------------------------------------------------------------------------
 * Run state
 * ------------------------------------------------------------------------ */

double
tu_now(void)
{
    return cg__now();
}

double
tu_left(const tu_run *r)
{
    double end = r->stage_end < r->deadline ? r->stage_end : r->deadline;

    return end - tu_now();
}

int
tu_stopped(tu_run *r)
{
    if (!*r->stop && tu_now() >= r->deadline)
        *r->stop = 1;
    if (sigint_seen)
        r->interrupted = 1;
    return *r->stop != 0;
}

int
tu_fits(tu_run *r, double est)
{
    return !tu_stopped(r) && est <= tu_left(r);
}

static void
fmt_time(double s, char *buf, size_t n)
{
    if (s < 0)
        s = 0;
    if (s < 60)
        snprintf(buf, n, "%.0fs", s);
    else
        snprintf(buf, n, "%dm%02ds", (int)s / 60, (int)s % 60);
}

void
tu_progress(tu_run *r, const char *kernel, const char *shape, int i, int n,
            double best_us, double default_us)
{
    char left[32], what[64], best[80] = "";

    if (r->cfg->quiet)
        return;
    fmt_time(r->deadline - tu_now(), left, sizeof left);
    if (n > 0)
        snprintf(what, sizeof what, "candidate %d/%d", i, n);
    else
        snprintf(what, sizeof what, "%s", i ? "CLBlast's search"
                                            : "timing the defaults");
    if (best_us > 0 && default_us > 0)
        snprintf(best, sizeof best, ", best %.1f us (defaults %.1f, "
                 "%.2fx)", best_us, default_us, default_us / best_us);
    if (r->tty) {
        /* The bar is the budget spent. */
        int w = 20, filled = (int)(w * (tu_now() - r->t0) / r->cfg->budget);
        char bar[24];
        int j;

        for (j = 0; j < w; j++)
            bar[j] = j < filled ? '#' : '.';
        bar[w] = '\0';
        fprintf(stderr, "\r\033[K[%s] %s %s: %s%s, %s left", bar, kernel,
                shape, what, best, left);
        r->last_print = 1;
    } else {
        fprintf(stderr, "%s: %s %s: %s%s, %s left\n", prog, kernel, shape,
                what, best, left);
    }
    fflush(stderr);
}

void
tu_say(tu_run *r, const char *fmt, ...)
{
    va_list ap;

    if (r->cfg->quiet)
        return;
    if (r->tty && r->last_print) {
        fputs("\r\033[K", stderr);
        r->last_print = 0;
    }
    fprintf(stderr, "%s: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* ------------------------------------------------------------------------
 * Options
 * ------------------------------------------------------------------------ */

static const struct {
    const char *name;
    unsigned bit;
} stage_names[] = {
    { "rnn", TU_RNN },
    { "clblast.Xgemm", TU_XGEMM },
    { "clblast.XgemmDirect", TU_XGEMM_DIRECT },
    { "clblast.GemmRoutine", TU_GEMM_ROUTINE },
    { "gemm", TU_GEMM },
    { "pack", TU_PACK },
    { "conv", TU_CONV },
    { "fft", TU_FFT },
    { "dp", TU_DP },
    { "rnn.path", TU_RNN_PATH },
    { "kernels", TU_KERNELS },
    { "clblast.copy-kernels", TU_COPY },
};
#define NSTAGES (int)(sizeof stage_names / sizeof stage_names[0])

static int
parse_only(const char *s, unsigned *only)
{
    char buf[512], *tok, *save = NULL;
    int i;

    snprintf(buf, sizeof buf, "%s", s);
    *only = 0;
    for (tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        for (i = 0; i < NSTAGES; i++)
            if (strcmp(tok, stage_names[i].name) == 0)
                break;
        if (i == NSTAGES) {
            fprintf(stderr, "%s: --only: unknown kernel '%s'\n", prog, tok);
            return -1;
        }
        *only |= stage_names[i].bit;
    }
    if (!*only) {
        fprintf(stderr, "%s: --only: no kernel named\n", prog);
        return -1;
    }
    return 0;
}

static int
parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* "lstm:B=32,H=256,I=256,T=32" */
static int
parse_shape(const char *s, tu_shape *sh)
{
    static const struct {
        const char *name;
        cg_rnn_mode mode;
    } cells[] = { { "lstm", CG_LSTM }, { "gru", CG_GRU },
                  { "rnn", CG_RNN_TANH }, { "rnn-relu", CG_RNN_RELU } };
    char buf[256], *tok, *save = NULL, *colon;
    size_t i;
    int have_i = 0;

    snprintf(buf, sizeof buf, "%s", s);
    colon = strchr(buf, ':');
    if (colon)
        *colon = '\0';
    for (i = 0; i < sizeof cells / sizeof cells[0]; i++)
        if (strcasecmp(buf, cells[i].name) == 0)
            break;
    if (i == sizeof cells / sizeof cells[0])
        return -1;
    sh->mode = cells[i].mode;
    sh->B = 32;
    sh->H = 256;
    sh->T = 32;
    for (tok = colon ? strtok_r(colon + 1, ",", &save) : NULL; tok;
         tok = strtok_r(NULL, ",", &save)) {
        long v;
        char key = tok[0];

        if (tok[1] != '=' || parse_int(tok + 2, 1, 1 << 16, &v))
            return -1;
        switch (key) {
        case 'B': case 'b': sh->B = (int)v; break;
        case 'H': case 'h': sh->H = (int)v; break;
        case 'I': case 'i': sh->I = (int)v; have_i = 1; break;
        case 'T': case 't': sh->T = (int)v; break;
        default: return -1;
        }
    }
    if (!have_i)
        sh->I = sh->H;
    return 0;
}

static int
parse_sizes(const char *s, int *out, int max, int *n)
{
    char buf[256], *tok, *save = NULL;

    snprintf(buf, sizeof buf, "%s", s);
    *n = 0;
    for (tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        long v;

        if (*n == max || parse_int(tok, 1, 1 << 16, &v))
            return -1;
        out[(*n)++] = (int)v;
    }
    return *n ? 0 : -1;
}

/* A comma-separated list of GEMM product classes (fft: of transform
 * classes) into a bit set. */
static int
parse_list(const char *arg, int fft, unsigned *out)
{
    char buf[512], *tok, *save = NULL;

    if (strlen(arg) >= sizeof buf)
        return -1;
    snprintf(buf, sizeof buf, "%s", arg);
    *out = 0;
    for (tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        int c = fft ? cg__fft_class_parse(tok) : cg__gemm_class_parse(tok);

        if (c < 0)
            return -1;
        *out |= 1u << c;
    }
    return *out ? 0 : -1;
}

enum { OPT_PATH = 256, OPT_MAXCAND, OPT_GEMM, OPT_CHILD, OPT_CLASSES,
       OPT_FFT_CLASSES };

/* Returns 0 to run, 1 to exit 0 (help, version), -1 for a usage error. */
static int
parse_args(int argc, char **argv, tu_config *c)
{
    static const struct option longopts[] = {
        { "device", required_argument, NULL, 'd' },
        { "budget", required_argument, NULL, 'b' },
        { "fraction", required_argument, NULL, 'f' },
        { "model-shape", required_argument, NULL, 'm' },
        { "path-sizes", required_argument, NULL, OPT_PATH },
        { "only", required_argument, NULL, 'k' },
        { "max-candidates", required_argument, NULL, OPT_MAXCAND },
        { "gemm-size", required_argument, NULL, OPT_GEMM },
        { "gemm-classes", required_argument, NULL, OPT_CLASSES },
        { "fft-classes", required_argument, NULL, OPT_FFT_CLASSES },
        { "output", required_argument, NULL, 'o' },
        { "dry-run", no_argument, NULL, 'n' },
        { "json", no_argument, NULL, 'j' },
        { "quiet", no_argument, NULL, 'q' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 }
    };
    int opt, path_set = 0, i;
    long v;
    char *end;

    memset(c, 0, sizeof *c);
    c->budget = 300;
    c->fraction = 0.002;
    c->only = TU_ALL;
    c->self = argv[0];
    while ((opt = getopt_long(argc, argv, "d:b:f:m:k:o:njqhV", longopts,
                              NULL)) != -1) {
        switch (opt) {
        case 'd': c->device = optarg; break;
        case 'b':
            c->budget = strtod(optarg, &end);
            if (end == optarg || *end || !(c->budget > 0)) {
                fprintf(stderr, "%s: --budget: '%s' is not a positive "
                        "number of seconds\n", prog, optarg);
                return -1;
            }
            break;
        case 'f':
            c->fraction = strtod(optarg, &end);
            if (end == optarg || *end || !(c->fraction > 0) ||
                c->fraction > 1) {
                fprintf(stderr, "%s: --fraction: '%s' is not in (0, 1]\n",
                        prog, optarg);
                return -1;
            }
            break;
        case 'm':
            if (c->nshapes == TU_MAX_SHAPES ||
                parse_shape(optarg, &c->shapes[c->nshapes])) {
                fprintf(stderr, "%s: --model-shape: bad shape '%s' (e.g. "
                        "lstm:B=32,H=256,I=256,T=32)\n", prog, optarg);
                return -1;
            }
            c->nshapes++;
            break;
        case OPT_PATH:
            if (parse_sizes(optarg, c->path_h, TU_MAX_PATH, &c->npath)) {
                fprintf(stderr, "%s: --path-sizes: bad list '%s'\n", prog,
                        optarg);
                return -1;
            }
            path_set = 1;
            break;
        case 'k':
            if (parse_only(optarg, &c->only))
                return -1;
            break;
        case OPT_MAXCAND:
        case OPT_GEMM:
            if (parse_int(optarg, opt == OPT_GEMM ? 16 : 0, 1 << 14, &v)) {
                fprintf(stderr, "%s: --%s: bad number '%s'\n", prog,
                        opt == OPT_GEMM ? "gemm-size" : "max-candidates",
                        optarg);
                return -1;
            }
            if (opt == OPT_GEMM)
                c->gemm_size = (int)v;
            else
                c->max_candidates = (int)v;
            break;
        case OPT_CLASSES:
            if (parse_list(optarg, 0, &c->gemm_classes)) {
                fprintf(stderr, "%s: --gemm-classes: bad list '%s' (names "
                        "such as NT.skinny: NN, NT, TN or TT, then .skinny, "
                        ".small, .large or .longk)\n", prog, optarg);
                return -1;
            }
            break;
        case OPT_FFT_CLASSES:
            if (parse_list(optarg, 1, &c->fft_classes)) {
                fprintf(stderr, "%s: --fft-classes: bad list '%s' (names "
                        "real.large, complex.large)\n", prog, optarg);
                return -1;
            }
            break;
        case 'o':
            if (!*optarg) {
                fprintf(stderr, "%s: --output '': want a file name\n", prog);
                return -1;
            }
            c->output = optarg;
            break;
        case 'n': c->dry_run = 1; break;
        case 'j': c->json = 1; break;
        case 'q': c->quiet = 1; break;
        case 'h': usage(stdout); return 1;
        case 'V': printf("%s (clgrad) %s\n", prog, cg_version()); return 1;
        default: usage(stderr); return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", prog, argv[optind]);
        usage(stderr);
        return -1;
    }
    if (!c->nshapes) {
        parse_shape("lstm:B=32,H=256,T=32", &c->shapes[0]);
        parse_shape("lstm:B=32,H=128,T=32", &c->shapes[1]);
        c->nshapes = 2;
        if (!path_set) {
            c->path_h[0] = 256;
            c->path_h[1] = 512;
            c->path_h[2] = 1024;
            c->npath = 3;
        }
    } else if (!path_set) {
        for (i = 0; i < c->nshapes && c->npath < TU_MAX_PATH; i++) {
            int j;

            for (j = 0; j < c->npath; j++)
                if (c->path_h[j] == c->shapes[i].H)
                    break;
            if (j == c->npath)
                c->path_h[c->npath++] = c->shapes[i].H;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------
 * The database
 * ------------------------------------------------------------------------ */

/* Whether the database in `path` (NULL: none, or an empty file) may
 * take this device's entries: a file that is not a tuning database, or
 * another device's, is never replaced (a database holds one device).
 * Returns 0 and *old (NULL or the file's entries, the caller frees), or
 * -1 after a message. */
static int
open_db(tu_run *r, const char *path, cg_tuning_db **old)
{
    cg_tuning_device od;
    struct stat st;

    *old = NULL;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT)
            return 0;
        fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        fprintf(stderr, "%s: %s is a directory; --output wants a file "
                "name\n", prog, path);
        return -1;
    }
    if (S_ISREG(st.st_mode) && st.st_size == 0)
        return 0;
    if (!S_ISREG(st.st_mode) || !(*old = cg_tuning_db_load(path))) {
        fprintf(stderr, "%s: %s exists and is not a clgrad tuning database "
                "(%s); not replacing it: remove it or give another "
                "--output\n", prog, path, S_ISREG(st.st_mode)
                ? cg_last_error() : "not a regular file");
        return -1;
    }
    if (cg_tuning_db_device(*old, &od) == CG_OK &&
        (strcmp(od.name, r->dev.name) != 0 ||
         strcmp(od.platform_name, r->dev.platform_name) != 0)) {
        fprintf(stderr, "%s: %s is the tuning database of another device, "
                "%s (%s); a database holds one device, so its %d entries "
                "would be lost: give another --output\n", prog, path,
                od.name, od.platform_name, cg_tuning_db_count(*old));
        cg_tuning_db_free(*old);
        *old = NULL;
        return -1;
    }
    return 0;
}

/* Where the results will go, checked before any time is spent: an
 * existing file must be this device's database (open_db), the file and
 * its directory writable.  The default path's directory is created when
 * written; a directory given with --output must exist.  0 or -1 after a
 * message. */
static int
check_output(tu_run *r, const char *path, int given)
{
    char dir[4096];
    cg_tuning_db *old;
    int err;

    if (open_db(r, path, &old))
        return -1;
    cg_tuning_db_free(old);
    switch (out_check(path, dir, sizeof dir, &err)) {
    case OUT_OK:
        return 0;
    case OUT_EMPTY:
        fprintf(stderr, "%s: --output '': want a file name\n", prog);
        break;
    case OUT_IS_DIR:
        fprintf(stderr, "%s: %s is a directory; want a file name\n", prog,
                path);
        break;
    case OUT_NO_WRITE:
        fprintf(stderr, "%s: cannot write %s: %s\n", prog, path,
                strerror(err));
        break;
    case OUT_NO_DIR:
        if (!given && err == ENOENT)
            return 0;       /* the tuning directory, made when written */
        fprintf(stderr, "%s: --output %s: the directory %s %s\n", prog,
                path, dir, err == ENOTDIR ? "is not a directory"
                : "does not exist");
        break;
    case OUT_DIR_NO_WRITE:
        fprintf(stderr, "%s: cannot create files in %s: %s\n", prog, dir,
                strerror(err));
        break;
    }
    return -1;
}

/* Writes the results into `path`, keeping the other entries of a file
 * there for the same device (merged: a result replaces the entry of the
 * same kernel and shape, every other entry stays). */
static int
write_db(tu_run *r, const char *path)
{
    cg_tuning_db *db = cg_tuning_db_new(&r->dev), *old = NULL;
    cg_tuning_entry e;
    int i, n, status = CG_OK;

    if (!db)
        return -1;
    /* Again: the file may have changed while tuning ran. */
    if (open_db(r, path, &old)) {
        cg_tuning_db_free(db);
        return -1;
    }
    n = old ? cg_tuning_db_count(old) : 0;
    if (old) {
        cg_tuning_device od;

        if (cg_tuning_db_device(old, &od) == CG_OK &&
            strcmp(od.driver_version, r->dev.driver_version) != 0)
            tu_say(r, "note: %s was measured with driver %s; its %d "
                   "entries are kept, those tuned again replaced", path,
                   od.driver_version, n);
    }
    for (i = 0; i < n && status == CG_OK; i++)
        if ((status = cg_tuning_db_entry(old, i, &e)) == CG_OK)
            status = cg_tuning_db_put(db, &e);
    for (i = 0; i < r->nresults && status == CG_OK; i++)
        status = cg_tuning_db_put(db, &r->results[i]);
    if (status == CG_OK)
        status = cg_tuning_db_save(db, path);
    if (status != CG_OK)
        fprintf(stderr, "%s: writing %s: %s\n", prog, path, cg_last_error());
    cg_tuning_db_free(old);
    cg_tuning_db_free(db);
    return status == CG_OK ? 0 : -1;
}

/* The entries of an earlier run's file for this device and driver. */
static void
load_previous(tu_run *r, const char *path)
{
    cg_tuning_db *db;
    cg_tuning_device od;
    int i, n;

    if (access(path, F_OK) != 0 || !(db = cg_tuning_db_load(path)))
        return;
    if (cg_tuning_db_device(db, &od) == CG_OK &&
        strcmp(od.name, r->dev.name) == 0 &&
        strcmp(od.platform_name, r->dev.platform_name) == 0 &&
        strcmp(od.driver_version, r->dev.driver_version) == 0) {
        n = cg_tuning_db_count(db);
        for (i = 0; i < n && r->nprevious < TU_MAX_RESULTS; i++)
            if (cg_tuning_db_entry(db, i, &r->previous[r->nprevious]) ==
                CG_OK)
                r->nprevious++;
    }
    cg_tuning_db_free(db);
}

static json_object *
entry_json(const cg_tuning_entry *e)
{
    json_object *o = json_object_new_object();

    json_object_object_add(o, "kernel", json_object_new_string(e->kernel));
    json_object_object_add(o, "shape", json_object_new_string(e->shape));
    json_object_object_add(o, "parameters", tu_params_json(e));
    json_object_object_add(o, "time_us", json_object_new_double(e->time_us));
    json_object_object_add(o, "default_time_us",
                           json_object_new_double(e->default_time_us));
    if (e->source_hash[0])
        json_object_object_add(o, "source_hash",
                               json_object_new_string(e->source_hash));
    json_object_object_add(o, "note", json_object_new_string(e->note));
    return o;
}

static void
print_summary(const tu_run *r, const char *path, int written)
{
    char buf[512];
    int i;

    printf("Device: %s (%s, driver %s)\n", r->dev.name, r->dev.platform_name,
           r->dev.driver_version);
    if (!r->nresults)
        printf("No entries found faster than the defaults.\n");
    else
        printf("  %-22s %-8s %12s %12s %8s  %s\n", "kernel", "shape",
               "default us", "tuned us", "speedup", "parameters");
    for (i = 0; i < r->nresults; i++) {
        const cg_tuning_entry *e = &r->results[i];

        printf("  %-22s %-8s %12.1f %12.1f %7.2fx  %s\n", e->kernel,
               e->shape, e->default_time_us, e->time_us,
               e->time_us > 0 ? e->default_time_us / e->time_us : 0.0,
               tu_params_str(e, buf, sizeof buf));
    }
    if (r->interrupted)
        printf("Interrupted: the results are those found until then.\n");
    if (written)
        printf("Written to %s\n", path);
    else if (r->nresults)
        printf("Not written (--dry-run).\n");
}

/* ------------------------------------------------------------------------
 * Main
 * ------------------------------------------------------------------------ */

static void
on_sigint(int sig)
{
    (void)sig;
    stop_flag = 1;
    sigint_seen = 1;
    signal(SIGINT, SIG_DFL);
}

static const struct {
    unsigned bit;
    double weight;
    int (*run)(tu_run *r);
} stages[] = {
    { TU_RNN, 35, tu_stage_rnn },
    { TU_XGEMM, 25, tu_stage_xgemm },
    { TU_XGEMM_DIRECT, 10, tu_stage_xgemm_direct },
    { TU_GEMM_ROUTINE, 5, tu_stage_gemm_routine },
    { TU_GEMM, 30, tu_stage_gemm },
    { TU_PACK, 10, tu_stage_pack },
    { TU_CONV, 5, tu_stage_conv },
    { TU_FFT, 3, tu_stage_fft },
    { TU_DP, 3, tu_stage_dp },
    { TU_RNN_PATH, 20, tu_stage_rnn_path },
    { TU_KERNELS, 5, tu_stage_kernels },
    { TU_COPY, 5, tu_stage_copy },
};

/* Runs the selected stages, each with its weight's share of the time
 * left when it starts (time one leaves unused goes to the later ones). */
static int
run_stages(tu_run *r)
{
    int i, j, failed = 0, n = (int)(sizeof stages / sizeof stages[0]);

    for (i = 0; i < n; i++) {
        double rest = 0;

        if (!(r->cfg->only & stages[i].bit))
            continue;
        if (tu_stopped(r))
            break;
        for (j = i; j < n; j++)
            if (r->cfg->only & stages[j].bit)
                rest += stages[j].weight;
        r->stage_end = tu_now() + (r->deadline - tu_now()) *
                       stages[i].weight / rest;
        if (stages[i].run(r) != 0)
            failed = 1;
    }
    return failed;
}

/* The search child: --clblast-child DEVICE KERNEL M N K FRACTION. */
static int
child_main(int argc, char **argv)
{
    long m, n, k;
    double f;

    if (argc != 8 || parse_int(argv[4], 1, 1 << 16, &m) ||
        parse_int(argv[5], 1, 1 << 16, &n) ||
        parse_int(argv[6], 1, 1 << 16, &k) || !((f = atof(argv[7])) > 0)) {
        fprintf(stderr, "%s: --clblast-child DEVICE KERNEL M N K "
                "FRACTION\n", prog);
        return 2;
    }
    return tu_clblast_child(argv[2], argv[3], (size_t)m, (size_t)n,
                            (size_t)k, f);
}

int
main(int argc, char **argv)
{
    tu_config cfg;
    tu_run r;
    cg_context_options opts;
    char path[4096];
    json_object *root;
    int rc, failed, written = 0;

    cg_set_log(tool_log, (void *)prog);
    cg_set_compile_progress(tool_progress, (void *)prog);
    if (argc > 1 && strcmp(argv[1], "--clblast-child") == 0)
        return child_main(argc, argv);
    rc = parse_args(argc, argv, &cfg);
    if (rc)
        return rc > 0 ? 0 : 2;
    memset(&r, 0, sizeof r);
    r.cfg = &cfg;
    r.stop = &stop_flag;
    r.tty = isatty(2);
    r.t0 = tu_now();
    r.deadline = r.t0 + cfg.budget;
    signal(SIGINT, on_sigint);
    /* Built-in parameters only: "default" must mean the defaults, not an
     * earlier run's entries. */
    memset(&opts, 0, sizeof opts);
    opts.device = cfg.device;
    opts.no_tuning = 1;
    r.ctx = cg_context_new_with(&opts);
    if (!r.ctx || cg_context_device_info(r.ctx, &r.dev) != CG_OK) {
        fprintf(stderr, "%s: %s\n", prog, cg_last_error());
        cg_context_free(r.ctx);
        return 1;
    }
    if (cfg.output)
        snprintf(path, sizeof path, "%s", cfg.output);
    else if (cg_tuning_path(&r.dev, path, sizeof path) != CG_OK) {
        fprintf(stderr, "%s: %s\n", prog, cg_last_error());
        cg_context_free(r.ctx);
        return 1;
    }
    if (!cfg.dry_run && check_output(&r, path, cfg.output != NULL)) {
        cg_context_free(r.ctx);
        return 1;
    }
    load_previous(&r, path);
    tu_say(&r, "tuning %s (%s) for up to %.0f s; results go to %s",
           r.dev.name, r.dev.platform_name, cfg.budget,
           cfg.dry_run ? "nowhere (--dry-run)" : path);
    r.report = json_object_new_array();
    failed = run_stages(&r);
    tu_stopped(&r);
    if (r.tty && r.last_print && !cfg.quiet)
        fputs("\r\033[K", stderr);
    if (!cfg.dry_run && r.nresults) {
        if (write_db(&r, path) != 0)
            failed = 1;
        else
            written = 1;
    }
    if (cfg.json) {
        json_object *entries = json_object_new_array(), *dev;
        int i;

        root = json_object_new_object();
        json_object_object_add(root, "clgrad_version",
                               json_object_new_string(cg_version()));
        dev = json_object_new_object();
        json_object_object_add(dev, "name",
                               json_object_new_string(r.dev.name));
        json_object_object_add(dev, "platform",
                               json_object_new_string(r.dev.platform_name));
        json_object_object_add(dev, "driver_version",
                               json_object_new_string(r.dev.driver_version));
        json_object_object_add(root, "device", dev);
        json_object_object_add(root, "budget_s",
                               json_object_new_double(cfg.budget));
        json_object_object_add(root, "elapsed_s",
                               json_object_new_double(tu_now() - r.t0));
        json_object_object_add(root, "interrupted",
                               json_object_new_boolean(r.interrupted));
        json_object_object_add(root, "output", json_object_new_string(path));
        json_object_object_add(root, "written",
                               json_object_new_boolean(written));
        json_object_object_add(root, "kernels", r.report);
        for (i = 0; i < r.nresults; i++)
            json_object_array_add(entries, entry_json(&r.results[i]));
        json_object_object_add(root, "entries", entries);
        puts(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY |
                                            JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(root);
    } else {
        if (!cfg.quiet)
            print_summary(&r, path, written);
        json_object_put(r.report);
    }
    cg_context_free(r.ctx);
    return failed;
}
