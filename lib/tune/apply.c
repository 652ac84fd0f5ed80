/* SPDX-License-Identifier: MIT */
/*
 * lib/tune/apply.c - putting tuning entries in force in a context: the
 * lookup over the user's database files and the shipped ones, CLBlast's
 * parameters through CLBlastOverrideParameters, and the queries the layers
 * make (cg__tuning_find_h).
 */
#include "config.h"

#include <clblast_c.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tune/internal.h"

#define CLBLAST_PREFIX "clblast."

/* clgrad's own kernels tuned per entry kind and shape: entry name, kernel
 * file, and the one host parameter, or NULL for the file's tunables (the
 * kernel table's).  Every other kernel file with tunables is tuned whole:
 * entry "reduce" for kernels/reduce.cl, whose parameters become the
 * context's values of the file's tunables (cg__param_set): -D options of
 * every kernel of the file, and the work-group size the host launches
 * with. */
typedef struct {
    const char *kernel;
    const char *file;
    const char *param;
} own_kernel;

static const own_kernel own_kernels[] = {
    { "rnn.lstm", "rnn", NULL },
    { "rnn.gru", "rnn", NULL },
    { "rnn.rnn", "rnn", NULL },
    { "rnn.path", "rnn", "gemm_min_h" },
    { "conv", "conv", "algo" },
    { "fft", "fft", "path" },
};
#define NOWN (sizeof own_kernels / sizeof own_kernels[0])

int
cg_kernel_source_hash(const char *file, char out[33])
{
    char *src;
    cg__hash h;
    int status;

    cg__error_clear();
    if (!file || !out)
        return cg__error(CG_EINVAL, "%s is NULL", file ? "out" : "file");
    status = cg__kernel_source(file, &src);
    if (status)
        return status;
    cg__hash_init(&h);
    cg__hash_str(&h, src);
    cg__hash_hex(&h, out);
    free(src);
    return CG_OK;
}

int
cg__tuning_param(const cg_tuning_entry *e, const char *name, long *value)
{
    int i;

    for (i = 0; i < e->nparams; i++)
        if (strcmp(e->names[i], name) == 0) {
            *value = e->values[i];
            return 1;
        }
    return 0;
}

/* Whether `kernel` names one of clgrad's own kernels (into *out). */
static int
own_of(const char *kernel, own_kernel *out)
{
    size_t i;
    int p;

    for (i = 0; i < NOWN; i++) {
        if (strcmp(own_kernels[i].kernel, kernel) == 0) {
            *out = own_kernels[i];
            return 1;
        }
        if (strcmp(own_kernels[i].file, kernel) == 0)
            return 0;       /* tuned per entry kind, not whole */
    }
    for (p = 0; p < CG__P_COUNT; p++)
        if (strcmp(cg__kfile_names[cg__param_table[p].file], kernel) == 0) {
            out->kernel = out->file = cg__kfile_names[cg__param_table[p].file];
            out->param = NULL;
            return 1;
        }
    return 0;
}

/* Whether `name` is a parameter of own kernel k. */
static int
own_param(const own_kernel *k, const char *name)
{
    int p;

    if (k->param)
        return strcmp(k->param, name) == 0;
    for (p = 0; p < CG__P_COUNT; p++)
        if (strcmp(cg__kfile_names[cg__param_table[p].file], k->file) == 0 &&
            strcmp(cg__param_table[p].name, name) == 0)
            return 1;
    return 0;
}

/* "H<n>" -> n, "any" -> 0, else -1. */
static long
shape_h(const char *shape)
{
    char *end;
    long h;

    if (strcmp(shape, "any") == 0)
        return 0;
    if (shape[0] != 'H')
        return -1;
    h = strtol(shape + 1, &end, 10);
    return *end || h < 1 ? -1 : h;
}

/* The source hashes of the kernel files, each computed once per lookup
 * (several entries name the same file). */
typedef struct {
    int n;
    struct {
        const char *file;
        char hash[33];
    } f[CG__KF_COUNT];
} file_hashes;

/* The hash of kernel file `file` into *hash; an error (out of host
 * memory) when it cannot be computed, never an unchecked entry. */
static int
file_hash(file_hashes *fh, const char *file, const char **hash)
{
    int i, status;

    for (i = 0; i < fh->n; i++)
        if (strcmp(fh->f[i].file, file) == 0) {
            *hash = fh->f[i].hash;
            return CG_OK;
        }
    if (fh->n == CG__KF_COUNT)
        return cg__error(CG_EINVAL, "more kernel files than kernels/ has");
    if ((status = cg_kernel_source_hash(file, fh->f[fh->n].hash)))
        return status;
    fh->f[fh->n].file = file;
    *hash = fh->f[fh->n++].hash;
    return CG_OK;
}

/* Whether value v of gemm.cl's tunable `name` is one its kernels are
 * written for (their #error lines): VW and DVW 1, 2, 4, 8 or 16, TM 1 to
 * 8, TN, DTM and DTN 1 to 4; WG is checked with the other files'. */
static int
gemm_value(const cg_tuning_entry *e, const char *name, long v)
{
    long hi = strcmp(name, "TM") == 0 ? 8 : 4;

    if (strcmp(name, "VW") == 0 || strcmp(name, "DVW") == 0) {
        if (v == 1 || v == 2 || v == 4 || v == 8 || v == 16)
            return CG_OK;
        return cg__error(CG_EINVAL, "%s %s: %s = %ld (1, 2, 4, 8 or 16)",
                         e->kernel, e->shape, name, v);
    }
    if (strcmp(name, "WG") == 0 || (v >= 1 && v <= hi))
        return CG_OK;
    return cg__error(CG_EINVAL, "%s %s: %s = %ld (1 to %ld)", e->kernel,
                     e->shape, name, v, hi);
}

/* Data parallelism's bucket sizes (lib/dist/dp.c): no kernel file, so no
 * source hash, like CLBlast's entries; shape "any", parameters bucket_kb
 * and first_bucket_kb (KiB, 1 to 1 GiB), either or both. */
static int
dp_usable(const cg_tuning_entry *e)
{
    int i;

    if (strcmp(e->shape, "any") != 0)
        return cg__error(CG_EINVAL, "dp has shape \"%s\": bucket sizes "
                         "hold for every model (\"any\")", e->shape);
    for (i = 0; i < e->nparams; i++) {
        if (strcmp(e->names[i], "bucket_kb") != 0 &&
            strcmp(e->names[i], "first_bucket_kb") != 0)
            return cg__error(CG_EINVAL, "dp: unknown parameter %s "
                             "(bucket_kb, first_bucket_kb)", e->names[i]);
        if (e->values[i] < 1 || e->values[i] > 1048576)
            return cg__error(CG_EINVAL, "dp: %s = %ld (KiB, 1 to 1048576)",
                             e->names[i], e->values[i]);
    }
    return CG_OK;
}

/* Whether entry e can be put in force on ctx's device; if not, a message
 * saying why.  With hashes, an entry for clgrad's own kernels must name
 * the current hash of its kernel file. */
static int
entry_usable(const cg_context *ctx, const cg_tuning_entry *e,
             file_hashes *hashes)
{
    own_kernel own, *k = &own;
    const char *hash = NULL;
    long v;
    int i, status, gemm_class, conv_class, conv1d_fft, fft_class, rnn_path;

    if (strncmp(e->kernel, CLBLAST_PREFIX, strlen(CLBLAST_PREFIX)) == 0) {
        if (strcmp(e->shape, "any") != 0)
            return cg__error(CG_EINVAL, "%s has shape \"%s\": CLBlast "
                             "parameters hold for every shape (\"any\")",
                             e->kernel, e->shape);
        return cg__clblast_check(&ctx->info, e);
    }
    if (strcmp(e->kernel, "dp") == 0)
        return dp_usable(e);
    if (!own_of(e->kernel, k))
        return cg__error(CG_EINVAL, "unknown kernel \"%s\"", e->kernel);
    gemm_class = strcmp(k->file, "gemm") == 0 && !k->param &&
                 cg__gemm_class_parse(e->shape) >= 0;
    conv_class = strcmp(k->kernel, "conv") == 0;
    conv1d_fft = conv_class && strcmp(e->shape, "fwd1d.long") == 0;
    if (conv_class && !conv1d_fft && cg__conv_class_parse(e->shape) < 0)
        return cg__error(CG_EINVAL, "conv: shape \"%s\" is not a "
                         "convolution class (fwd, bwd, tfwd or tbwd, then "
                         ".depthwise, .small or .large; or fwd1d.long)",
                         e->shape);
    rnn_path = strcmp(k->kernel, "rnn.path") == 0;
    fft_class = strcmp(k->kernel, "fft") == 0;
    if (fft_class && cg__fft_class_parse(e->shape) < 0)
        return cg__error(CG_EINVAL, "fft: shape \"%s\" is not a transform "
                         "class (real.large or complex.large)", e->shape);
    if (shape_h(e->shape) < 0 && !gemm_class && !conv_class && !fft_class)
        return cg__error(CG_EINVAL, "%s: shape \"%s\" is neither \"any\" "
                         "nor H<hidden size>%s", e->kernel, e->shape,
                         strcmp(k->file, "gemm") == 0 ? " nor a product class "
                         "(NN, NT, TN or TT, then .skinny, .small, .large or "
                         ".longk)" : "");
    if (hashes && (status = file_hash(hashes, k->file, &hash)))
        return status;
    if (hash && strcmp(e->source_hash, hash) != 0)
        return cg__error(CG_EINVAL, "%s %s is stale: tuned for kernels/%s.cl "
                         "with hash %s, this library's is %s", e->kernel,
                         e->shape, k->file, e->source_hash[0]
                         ? e->source_hash : "(none)", hash);
    for (i = 0; i < e->nparams; i++) {
        if (rnn_path && strcmp(e->names[i], "packed") == 0) {
            if (e->values[i] != 0 && e->values[i] != 1)
                return cg__error(CG_EINVAL, "rnn.path %s: packed = %ld (1: "
                                 "the GEMM path's step products on W_hh "
                                 "packed once per pass, 0: through the "
                                 "GEMM entry)", e->shape, e->values[i]);
            continue;
        }
        if (gemm_class && strcmp(e->names[i], "clblast") == 0) {
            if (e->values[i] != 0 && e->values[i] != 1)
                return cg__error(CG_EINVAL, "%s %s: clblast = %ld (1: "
                                 "CLBlast runs the class, 0: clgrad's "
                                 "kernels)", e->kernel, e->shape,
                                 e->values[i]);
            continue;
        }
        if (gemm_class && strcmp(e->names[i], "packed") == 0) {
            if (e->values[i] != 0 && e->values[i] != 1)
                return cg__error(CG_EINVAL, "%s %s: packed = %ld (1: "
                                 "clgrad's kernels run the class on "
                                 "packed operands, kernels/gemm_pack.cl; "
                                 "0: in place)", e->kernel, e->shape,
                                 e->values[i]);
            continue;
        }
        if (gemm_class && strcmp(e->names[i], "pack") == 0) {
            if (strncmp(e->shape, "NT.", 3) != 0)
                return cg__error(CG_EINVAL, "%s %s: pack is for the NT "
                                 "classes only (an NT product on a packed "
                                 "B^T)", e->kernel, e->shape);
            if (e->values[i] != 0 && e->values[i] != 1)
                return cg__error(CG_EINVAL, "%s %s: pack = %ld (1: the "
                                 "class runs as NN on a packed B^T, 0: in "
                                 "place)", e->kernel, e->shape,
                                 e->values[i]);
            continue;
        }
        if (conv1d_fft && strcmp(e->names[i], "min_kernel") == 0) {
            if (e->values[i] < 1)
                return cg__error(CG_EINVAL, "conv fwd1d.long: min_kernel = "
                                 "%ld (the least dilated kernel length "
                                 "that runs by FFT, >= 1)", e->values[i]);
            continue;
        }
        if (conv1d_fft && strcmp(e->names[i], "algo") == 0) {
            if (e->values[i] < 0 || e->values[i] > 2)
                return cg__error(CG_EINVAL, "conv fwd1d.long: algo = %ld "
                                 "(2: FFT from min_kernel taps on; 0 or 1: "
                                 "never)", e->values[i]);
            continue;
        }
        if (conv_class && !conv1d_fft &&
            strcmp(e->names[i], "shift") == 0) {
            if (e->values[i] != 0 && e->values[i] != 1)
                return cg__error(CG_EINVAL, "conv %s: shift = %ld (1: "
                                 "im2col reads stride-1 windows in place "
                                 "where its rule says so, 0: it makes "
                                 "columns always)", e->shape, e->values[i]);
            continue;
        }
        if (!own_param(k, e->names[i]))
            return cg__error(CG_EINVAL, "%s: unknown parameter %s",
                             e->kernel, e->names[i]);
        if (conv_class && e->values[i] != 0 && e->values[i] != 1)
            return cg__error(CG_EINVAL, "conv %s: algo = %ld (0: im2col + "
                             "GEMM, 1: the direct kernels)", e->shape,
                             e->values[i]);
        if (fft_class && (e->values[i] < 0 || e->values[i] > 3))
            return cg__error(CG_EINVAL, "fft %s: path = %ld (0: clFFT, 1: "
                             "Bluestein's algorithm, 2: the complex "
                             "transform, 3: clgrad's radix passes)",
                             e->shape, e->values[i]);
        if (strcmp(k->file, "gemm") == 0 &&
            (status = gemm_value(e, e->names[i], e->values[i])))
            return status;
    }
    if (cg__tuning_param(e, "VW", &v) && v != 1 && v != 2 && v != 4 &&
        v != 8 && v != 16)
        return cg__error(CG_EINVAL, "%s: VW = %ld (1, 2, 4, 8 or 16)",
                         e->kernel, v);
    if (cg__tuning_param(e, "RB", &v) && (v < 1 || v > 8))
        return cg__error(CG_EINVAL, "%s: RB = %ld (1 to 8)", e->kernel, v);
    if (cg__tuning_param(e, "WG", &v) &&
        (v < 1 || v > 256 || (size_t)v > ctx->info.max_work_group_size))
        return cg__error(CG_EINVAL, "%s: WG = %ld (1 to %zu on this device)",
                         e->kernel, v, ctx->info.max_work_group_size < 256
                         ? ctx->info.max_work_group_size : (size_t)256);
    /* The tree reductions' work-group sizes: a power of two. */
    for (i = 0; i < e->nparams; i++) {
        const char *n = e->names[i];

        if (strcmp(n, "RWG") != 0 && strcmp(n, "SWG") != 0 &&
            strcmp(n, "LWG") != 0)
            continue;
        v = e->values[i];
        if (v < 1 || v > 256 || (v & (v - 1)) ||
            (size_t)v > ctx->info.max_work_group_size)
            return cg__error(CG_EINVAL, "%s: %s = %ld (a power of two, 1 to "
                             "%zu on this device)", e->kernel, n, v,
                             ctx->info.max_work_group_size < 256
                             ? ctx->info.max_work_group_size : (size_t)256);
    }
    return CG_OK;
}

static int
clblast_apply(cg_context *ctx, const cg_tuning_entry *e)
{
    const char *names[CG_TUNING_MAX_PARAMS];
    size_t values[CG_TUNING_MAX_PARAMS];
    CLBlastStatusCode rc;
    int i;

    for (i = 0; i < e->nparams; i++) {
        names[i] = e->names[i];
        values[i] = (size_t)e->values[i];
    }
    rc = CLBlastOverrideParameters(ctx->device,
                                   e->kernel + strlen(CLBLAST_PREFIX),
                                   CLBlastPrecisionSingle,
                                   (size_t)e->nparams, names, values);
    if (rc != CLBlastSuccess)
        return cg__error(CG_EINVAL, "CLBlast rejected the parameters of %s "
                         "(CLBlastOverrideParameters status %d: a kernel "
                         "name CLBlast does not know, or not exactly its "
                         "set of parameters)", e->kernel, (int)rc);
    return CG_OK;
}

/* A whole-file entry's parameters ("reduce": RWG) become the context's
 * values of that file's tunables; the rnn.* entries are per shape, and
 * the layer looks them up itself. */
static void
set_file_params(cg_context *ctx, const cg_tuning_entry *e)
{
    int i, p;

    if (strcmp(e->shape, "any") != 0)
        return;         /* per shape (rnn.*, a gemm product class) */

    for (p = 0; p < CG__P_COUNT; p++)
        if (strcmp(cg__kfile_names[cg__param_table[p].file], e->kernel) == 0)
            for (i = 0; i < e->nparams; i++)
                if (strcmp(e->names[i], cg__param_table[p].name) == 0)
                    cg__param_set(ctx, (cg__pid)p, e->values[i]);
}

static int
ntuning(const cg_context *ctx)
{
    return ctx->tuning ? ctx->tuning->n : 0;
}

void
cg__tuning_free(cg_context *ctx)
{
    if (ctx->tuning)
        free(ctx->tuning->e);
    free(ctx->tuning);
    ctx->tuning = NULL;
}

/* Room for n entries in force, so that putting that many in force cannot
 * fail for want of memory. */
static int
reserve(cg_context *ctx, int n)
{
    struct cg__tuning *t = ctx->tuning;
    cg_tuning_entry *e;

    if (!t && !(t = ctx->tuning = cg__calloc(1, sizeof *t)))
        return CG_EHOSTMEM;
    if (n <= t->cap)
        return CG_OK;
    if (!(e = cg__realloc(t->e, (size_t)n * sizeof *e)))
        return CG_EHOSTMEM;
    t->e = e;
    t->cap = n;
    return CG_OK;
}

/* Puts e in force (already checked), replacing one of the same kernel
 * and shape. */
static int
put_in_force(cg_context *ctx, const cg_tuning_entry *e)
{
    struct cg__tuning *t;
    int i;

    if (strncmp(e->kernel, CLBLAST_PREFIX, strlen(CLBLAST_PREFIX)) == 0) {
        int status = clblast_apply(ctx, e);

        if (status)
            return status;
    }
    t = ctx->tuning;
    for (i = 0; i < ntuning(ctx); i++)
        if (strcmp(t->e[i].kernel, e->kernel) == 0 &&
            strcmp(t->e[i].shape, e->shape) == 0)
            break;
    if (i == ntuning(ctx)) {
        int status = reserve(ctx, i + 1);

        if (status)
            return status;
        t = ctx->tuning;
        t->n++;
    }
    t->e[i] = *e;
    set_file_params(ctx, e);
    ctx->tuning_gen++;
    return CG_OK;
}

int
cg_context_set_tuning(cg_context *ctx, const cg_tuning_entry *e)
{
    cg_tuning_entry copy;
    int status;

    cg__error_clear();
    if (!ctx || !e)
        return cg__error(CG_EINVAL, "%s is NULL", ctx ? "entry" : "ctx");
    copy = *e;
    if (copy.nparams < 1 || copy.nparams > CG_TUNING_MAX_PARAMS)
        return cg__error(CG_EINVAL, "%s: %d parameters (1 to %d)",
                         copy.kernel, copy.nparams, CG_TUNING_MAX_PARAMS);
    status = entry_usable(ctx, &copy, NULL);
    if (status)
        return status;
    if (!copy.origin[0])
        snprintf(copy.origin, sizeof copy.origin, "cg_context_set_tuning");
    return put_in_force(ctx, &copy);
}

int
cg_context_clear_tuning(cg_context *ctx)
{
    int i, n = 0;

    cg__error_clear();
    if (!ctx)
        return cg__error(CG_EINVAL, "ctx is NULL");
    for (i = 0; i < ntuning(ctx); i++)
        if (strncmp(ctx->tuning->e[i].kernel, CLBLAST_PREFIX,
                    strlen(CLBLAST_PREFIX)) == 0)
            ctx->tuning->e[n++] = ctx->tuning->e[i];
    if (ctx->tuning)
        ctx->tuning->n = n;
    cg__params_reset(ctx);
    ctx->tuning_gen++;
    return CG_OK;
}

int
cg_context_tuning_count(const cg_context *ctx, int *count)
{
    cg__error_clear();
    if (!ctx || !count)
        return cg__error(CG_EINVAL, "%s is NULL", ctx ? "count" : "ctx");
    *count = ntuning(ctx);
    return CG_OK;
}

int
cg_context_tuning_entry(const cg_context *ctx, int i, cg_tuning_entry *out)
{
    cg__error_clear();
    if (!ctx || !out)
        return cg__error(CG_EINVAL, "%s is NULL", ctx ? "out" : "ctx");
    if (i < 0 || i >= ntuning(ctx))
        return cg__error(CG_EINVAL, "tuning entry %d of %d", i,
                         ntuning(ctx));
    *out = ctx->tuning->e[i];
    return CG_OK;
}

const cg_tuning_entry *
cg__tuning_find(const cg_context *ctx, const char *kernel, const char *shape)
{
    int i;

    for (i = 0; i < ntuning(ctx); i++)
        if (strcmp(ctx->tuning->e[i].kernel, kernel) == 0 &&
            strcmp(ctx->tuning->e[i].shape, shape) == 0)
            return &ctx->tuning->e[i];
    return NULL;
}

const cg_tuning_entry *
cg__tuning_find_h(const cg_context *ctx, const char *kernel, long h)
{
    const cg_tuning_entry *best = NULL;
    double best_d = HUGE_VAL;
    int i;

    for (i = 0; i < ntuning(ctx); i++) {
        const cg_tuning_entry *e = &ctx->tuning->e[i];
        long eh;
        double d;

        if (strcmp(e->kernel, kernel) != 0)
            continue;
        eh = shape_h(e->shape);
        /* "any" only when no H<n> entry exists. */
        d = eh > 0 && h > 0 ? fabs(log((double)eh / (double)h)) : 1e300;
        if (!best || d < best_d) {
            best = e;
            best_d = d;
        }
    }
    return best;
}

/* ------------------------------------------------------------ lookup */

/* What a lookup skipped goes to the application's log, not to
 * cg_last_error: the lookup succeeds. */
static void
warn(const char *what)
{
    cg__log(CG_LOG_WARNING, "tuning: %s", what);
}

/* Whether a parameter is a vector width: by the convention of clgrad's
 * kernels (VW, DVW) and CLBlast's (VWM, VWN, VWMD, VWND, COPY_VW), a name
 * that begins or ends with "VW". */
static int
is_vector_width(const char *name)
{
    size_t n = strlen(name);

    return strncmp(name, "VW", 2) == 0 ||
           (n >= 2 && strcmp(name + n - 2, "VW") == 0);
}

/* An entry measured on another device of the same vendor and type (a
 * CG_TUNING_VENDOR match) may have vector widths wider than this device's
 * native float vectors, being tuned for wider registers: on PoCL a float16
 * kernel for an 8-wide CPU builds with an "AVX vector ... changes the ABI"
 * warning per call, which the compiler prints on stderr.  Such widths are
 * narrowed to the widest power of two the device has natively, the rest
 * of the set kept (the shipped LSTM entries, VW 16 from an AVX-512 CPU,
 * ran README's job as fast with VW 8 on an AVX2 one, and 30-40% faster
 * than the built-in defaults).  Narrowing a power-of-two width keeps
 * CLBlast's divisibility rules.  An entry for this very device is used as
 * measured.  Returns whether anything was narrowed. */
static int
narrow(const cg_context *ctx, cg_tuning_entry *e, cg_tuning_match m)
{
    unsigned native = ctx->info.native_width_float;
    long w = 1;
    int i, changed = 0;

    if (m >= CG_TUNING_DEVICE || native == 0)
        return 0;
    while (w * 2 <= (long)native)
        w *= 2;
    for (i = 0; i < e->nparams; i++)
        if (is_vector_width(e->names[i]) && e->values[i] > w) {
            e->values[i] = w;
            changed = 1;
        }
    return changed;
}

/* Candidates: every usable entry of every matching file. */
typedef struct {
    cg_tuning_entry e;
    int user;             /* from the user's directory */
} candidate;

typedef struct {
    candidate *c;
    int n, cap;
} candidates;

/* Adds db's usable entries to cs; an error only when the host ran out of
 * memory (an unusable entry is a warning). */
static int
consider(cg_context *ctx, cg_tuning_db *db, int user, const char *origin,
         file_hashes *fh, candidates *cs)
{
    cg_tuning_match m = cg__tuning_match(&db->device, &ctx->info);
    char msg[600];
    int i, status;

    if (m == CG_TUNING_NONE)
        return CG_OK;
    for (i = 0; i < db->count; i++) {
        cg_tuning_entry *e = &db->entries[i];

        if ((status = entry_usable(ctx, e, fh))) {
            if (status == CG_EHOSTMEM)
                return status;
            snprintf(msg, sizeof msg, "%.250s: %.48s skipped (%.280s)", origin,
                     e->kernel, cg_last_error());
            warn(msg);
            continue;
        }
        if (cs->n == cs->cap) {
            int cap = cs->cap ? 2 * cs->cap : 16;
            candidate *n = cg__realloc(cs->c, (size_t)cap * sizeof *n);

            if (!n)
                return CG_EHOSTMEM;
            cs->c = n;
            cs->cap = cap;
        }
        cs->c[cs->n].e = *e;
        cs->c[cs->n].e.match = m;
        if (narrow(ctx, &cs->c[cs->n].e, m))
            cg__log(CG_LOG_NOTE, "tuning: %.250s: %.48s %.48s: vector "
                    "widths narrowed to this device's %u floats (tuned on "
                    "%.120s)", origin, e->kernel, e->shape,
                    ctx->info.native_width_float, db->device.name);
        snprintf(cs->c[cs->n].e.origin, sizeof cs->c[cs->n].e.origin, "%s",
                 origin);
        cs->c[cs->n].user = user;
        cs->n++;
    }
    return CG_OK;
}

static int
is_json(const struct dirent *d)
{
    size_t n = strlen(d->d_name);

    return d->d_name[0] != '.' && n > 5 &&
           strcmp(d->d_name + n - 5, ".json") == 0;
}

/* Reads the user's databases into cs: a file that cannot be read or
 * parsed is a warning, the host running out of memory an error. */
static int
scan_user_dir(cg_context *ctx, file_hashes *fh, candidates *cs)
{
    struct dirent **names = NULL;
    char dir[3072], path[4096], msg[800];
    int i, n, status = CG_OK;

    if (cg_tuning_dir(dir, sizeof dir))
        return CG_OK;
    n = scandir(dir, &names, is_json, alphasort);
    for (i = 0; i < n; i++) {
        cg_tuning_db *db = NULL;

        snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
        if (status == CG_OK && !(db = cg_tuning_db_load(path))) {
            if (cg__last_status() == CG_EHOSTMEM)
                status = CG_EHOSTMEM;
            snprintf(msg, sizeof msg, "%.400s ignored (%.380s)", path,
                     cg_last_error());
            if (status == CG_OK)
                warn(msg);
        } else if (db) {
            status = consider(ctx, db, 1, path, fh, cs);
            cg_tuning_db_free(db);
        }
        free(names[i]);
    }
    free(names);
    return status;
}

/* Whether a beats b for the same kernel and shape. */
static int
better(const candidate *a, const candidate *b)
{
    if (a->e.match != b->e.match)
        return a->e.match > b->e.match;
    return a->user > b->user;
}

int
cg_context_apply_tuning(cg_context *ctx)
{
    candidates cs = { NULL, 0, 0 };
    file_hashes fh;
    char origin[96], msg[600];
    int i, j, status;

    cg__error_clear();
    if (!ctx)
        return cg__error(CG_EINVAL, "ctx is NULL");
    fh.n = 0;
    /* Everything that can run out of memory comes before the entries in
     * force are touched: a failure leaves them as they were. */
    status = scan_user_dir(ctx, &fh, &cs);
    for (i = 0; status == CG_OK && cg__tuning_embedded[i].name; i++) {
        cg_tuning_db *db;

        snprintf(origin, sizeof origin, "shipped:%s",
                 cg__tuning_embedded[i].name);
        db = cg__tuning_db_parse(cg__tuning_embedded[i].text, origin);
        if (!db && cg__last_status() == CG_EHOSTMEM) {
            status = CG_EHOSTMEM;
        } else if (!db) {
            snprintf(msg, sizeof msg, "%.90s ignored (%.400s)", origin,
                     cg_last_error());
            warn(msg);
        } else {
            status = consider(ctx, db, 0, origin, &fh, &cs);
            cg_tuning_db_free(db);
        }
    }
    if (status == CG_OK)
        status = reserve(ctx, ntuning(ctx) + cs.n);
    if (status) {
        free(cs.c);
        return status;
    }
    cg_context_clear_tuning(ctx);
    /* The best candidate of each kernel and shape; the first wins ties. */
    for (i = 0; i < cs.n; i++) {
        for (j = 0; j < cs.n; j++)
            if (j != i && strcmp(cs.c[j].e.kernel, cs.c[i].e.kernel) == 0 &&
                strcmp(cs.c[j].e.shape, cs.c[i].e.shape) == 0 &&
                (better(&cs.c[j], &cs.c[i]) ||
                 (j < i && !better(&cs.c[i], &cs.c[j]))))
                break;
        if (j < cs.n)
            continue;
        if (put_in_force(ctx, &cs.c[i].e)) {
            snprintf(msg, sizeof msg, "%.250s: %.48s skipped (%.280s)",
                     cs.c[i].e.origin, cs.c[i].e.kernel, cg_last_error());
            warn(msg);
        }
    }
    free(cs.c);
    cg__error_clear();
    return CG_OK;
}
