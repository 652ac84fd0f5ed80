/* SPDX-License-Identifier: MIT */
/*
 * lib/cl/program.c - building kernel programs, once per context, with an
 * on-disk cache of program binaries.
 *
 * A cache file is named by a 128-bit hash of everything that can change
 * the binary: the source, the build options (tuning -D values included),
 * the platform name and version, the device name, the driver version and
 * clgrad's version.  Its layout:
 *     "CLGRADB2"  8 bytes magic
 *     key        16 bytes, the hash again (guards against renamed files)
 *     length      8 bytes, little-endian, of the binary
 *     seal       16 bytes, hash of the cache directory's secret, the key,
 *                the length, the binary and the secret again
 *     binary     length bytes
 * The secret is 32 random bytes in the cache directory's "cache.key"
 * (mode 0600), made by the first store.  A checksum anyone can recompute
 * is not enough: the driver's deserializer trusts the binary (PoCL asserts
 * and aborts the process on a truncated one), so only a binary that
 * clgrad itself wrote and sealed, intact, is handed to
 * clCreateProgramWithBinary.  The seal is no defence against someone who
 * can read the user's files (they can write them too); it keeps out
 * binaries truncated, corrupted, copied from another cache, or made by a
 * tool.  Anything wrong with a cache file (missing, short, bad magic, bad
 * seal, no secret, rejected by the driver) means the program is built from
 * source and the file rewritten; it is never an error, and nothing is
 * printed.  Format 1 files (CLGRADB1, an unkeyed checksum) are misses.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cl/internal.h"

#define CACHE_MAGIC "CLGRADB2"
#define CACHE_HEADER 48
#define CACHE_SECRET "cache.key"
#define SECRET_BYTES 32
#define BASE_OPTIONS "-cl-std=CL1.2"

typedef struct {
    const char *name;
    const char *source;
} embedded_kernel;

/* Generated from the kernels/ sources by build-aux/cl2c.sh. */
extern const embedded_kernel cg__kernels_embedded[];
extern const size_t cg__kernels_embedded_count;

const char *
cg__kernel_source_embedded(const char *name)
{
    size_t i;

    for (i = 0; i < cg__kernels_embedded_count; i++)
        if (strcmp(cg__kernels_embedded[i].name, name) == 0)
            return cg__kernels_embedded[i].source;
    return NULL;
}

/* src with each line #include "LIST.def" replaced by dir/LIST.def, as
 * build-aux/cl2c.sh does for the embedded sources (a program built from a
 * string has no files to include).  Takes src over: *out replaces it,
 * and it is freed on error. */
static int
inline_lists(const char *dir, char *src, char **out)
{
    static const char tag[] = "#include \"";
    char *at = strstr(src, "\n" "#include \""), *name, *end, *list, *res;
    char path[4096];
    size_t n;

    at = strncmp(src, tag, sizeof tag - 1) == 0 ? src : at ? at + 1 : NULL;
    if (!at) {
        *out = src;
        return CG_OK;
    }
    name = at + sizeof tag - 1;
    end = strchr(name, '"');
    snprintf(path, sizeof path, "%s/%.*s", dir, end ? (int)(end - name) : 0,
             name);
    list = end ? cg__read_file(path, NULL) : NULL;
    if (!end)
        cg__error(CG_EINVAL, "an #include without its closing quote");
    n = list ? strlen(src) + strlen(list) + 1 : 0;
    res = list ? cg__malloc(n) : NULL;
    if (res)
        snprintf(res, n, "%.*s%s%s", (int)(at - src), src, list,
                 strchr(end, '\n') ? strchr(end, '\n') : "");
    free(list);
    free(src);
    if (!res)
        return end && list ? CG_EHOSTMEM : CG_EIO;
    return inline_lists(dir, res, out);
}

/* One kernel file's text, from CLGRAD_KERNEL_DIR or embedded. */
static int
kernel_file(const char *name, char **out)
{
    const char *dir = getenv("CLGRAD_KERNEL_DIR");
    const char *src;
    char path[4096], *text;

    if (dir && *dir) {
        snprintf(path, sizeof path, "%s/%s.cl", dir, name);
        text = cg__read_file(path, NULL);
        if (!text || inline_lists(dir, text, out)) {
            cg__error_append(" (CLGRAD_KERNEL_DIR is set)");
            return CG_EIO;
        }
        return CG_OK;
    }
    src = cg__kernel_source_embedded(name);
    if (!src)
        return cg__error(CG_EINVAL, "no kernel file '%s.cl' in this build",
                         name);
    *out = cg__strdup(src);
    return *out ? CG_OK : CG_EHOSTMEM;
}

/* For a file built one kernel per program (@split): CG_K_<kernel> 0 for
 * each of its kernels that the build options do not set (to 1), so that
 * common.cl's CG_WANT is 0 or 1 without the variadic-macro idiom OpenCL
 * C 1.2 lacks; "" for other files.  NULL when out of memory. */
static char *
split_defaults(const char *name)
{
    static const char fmt[] = "#ifndef CG_K_%s\n#define CG_K_%s 0\n#endif\n";
    size_t n = 1, len = 0;
    int f, k;
    char *s;

    for (f = 0; f < CG__KF_COUNT; f++)
        if (strcmp(cg__kfile_names[f], name) == 0)
            break;
    if (f == CG__KF_COUNT || !cg__kfile_split[f])
        return cg__strdup("");
    for (k = 0; k < CG__K_COUNT; k++)
        if ((int)cg__kernel_table[k].file == f)
            n += sizeof fmt + 2 * strlen(cg__kernel_table[k].name);
    s = cg__malloc(n);
    if (!s)
        return NULL;
    s[0] = '\0';
    for (k = 0; k < CG__K_COUNT; k++)
        if ((int)cg__kernel_table[k].file == f)
            len += (size_t)snprintf(s + len, n - len, fmt,
                                    cg__kernel_table[k].name,
                                    cg__kernel_table[k].name);
    return s;
}

int
cg__kernel_source(const char *name, char **out)
{
    char *common = NULL, *body = NULL, *defaults;
    size_t n;
    int status;

    status = kernel_file(name, &body);
    if (status)
        return status;
    /* Every file but common.cl starts with the shared helpers.  Running
     * out of memory for them is an error: the source without them would
     * hash (and build) as another program. */
    if (strcmp(name, "common") != 0 &&
        (status = kernel_file("common", &common)) == CG_EHOSTMEM) {
        free(body);
        return status;
    }
    if (strcmp(name, "common") == 0 || status) {
        cg__error_clear();
        *out = body;
        return CG_OK;
    }
    defaults = split_defaults(name);
    n = strlen(common) + strlen(body) + strlen(name) + 32 +
        (defaults ? strlen(defaults) : 0);
    *out = defaults ? cg__malloc(n) : NULL;
    if (*out)
        snprintf(*out, n, "%s\n%s#line 1 \"%s.cl\"\n%s", common, defaults,
                 name, body);
    free(defaults);
    free(common);
    free(body);
    return *out ? CG_OK : CG_EHOSTMEM;
}

int
cg__cache_dir(char *out, size_t size)
{
    const char *v = getenv("CLGRAD_CACHE");
    const char *dir;

    if (v && strcmp(v, "0") == 0)
        return 0;
    if ((dir = getenv("CLGRAD_CACHE_DIR")) && *dir)
        snprintf(out, size, "%s", dir);
    else if ((dir = getenv("XDG_CACHE_HOME")) && *dir)
        snprintf(out, size, "%s/clgrad", dir);
    else if ((dir = getenv("HOME")) && *dir)
        snprintf(out, size, "%s/.cache/clgrad", dir);
    else
        return 0;
    return 1;
}

static void
put_u64(unsigned char *p, uint64_t v)
{
    int i;

    for (i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t
get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    int i;

    for (i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static void
put_hash(unsigned char *p, const cg__hash *h)
{
    put_u64(p, h->hi);
    put_u64(p + 8, h->lo);
}

static cg__hash
cache_key(const cg_context *ctx, const char *source, const char *options)
{
    cg__hash h;

    cg__hash_init(&h);
    cg__hash_str(&h, source);
    cg__hash_str(&h, options);
    cg__hash_str(&h, ctx->info.platform_name);
    cg__hash_str(&h, ctx->info.platform_version);
    cg__hash_str(&h, ctx->info.name);
    cg__hash_str(&h, ctx->info.driver_version);
    cg__hash_str(&h, PACKAGE_VERSION);
    return h;
}

static void
cache_path(const cg__hash *key, const char *dir, char *out, size_t size)
{
    char hex[33];

    cg__hash_hex(key, hex);
    snprintf(out, size, "%s/%s.bin", dir, hex);
}

/* The cache directory's secret: 1 if dir/cache.key holds SECRET_BYTES
 * bytes, else 0.  Call between cg__error_quiet_enter and leave. */
static int
secret_read(const char *dir, unsigned char *secret)
{
    char path[4200];
    unsigned char *data;
    size_t len;
    int ok;

    snprintf(path, sizeof path, "%s/%s", dir, CACHE_SECRET);
    data = (unsigned char *)cg__read_file(path, &len);
    if (!data)
        return 0;
    ok = len == SECRET_BYTES;
    if (ok)
        memcpy(secret, data, SECRET_BYTES);
    free(data);
    return ok;
}

/* A new secret from /dev/urandom, written to dir/cache.key; 1 on success.
 * Two processes that make one at once each seal with their own; the last
 * rename wins and the other's files are misses, rebuilt once. */
static int
secret_create(const char *dir, unsigned char *secret)
{
    char path[4200];
    size_t n = 0;
    int fd = open("/dev/urandom", O_RDONLY);

    if (fd < 0)
        return 0;
    while (n < SECRET_BYTES) {
        ssize_t r = read(fd, secret + n, SECRET_BYTES - n);

        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    if (n != SECRET_BYTES)
        return 0;
    snprintf(path, sizeof path, "%s/%s", dir, CACHE_SECRET);
    {
        const void *part = secret;
        size_t len = SECRET_BYTES;

        return cg__write_parts_atomic(path, 0600, 1, &part, &len) == CG_OK;
    }
}

/* The seal of a cache file: see the top of this file. */
static void
seal(unsigned char out[16], const unsigned char *secret, const cg__hash *key,
     const unsigned char *bin, size_t binlen)
{
    unsigned char k[16], l[8];
    cg__hash h;

    put_hash(k, key);
    put_u64(l, binlen);
    cg__hash_init(&h);
    cg__hash_update(&h, secret, SECRET_BYTES);
    cg__hash_update(&h, k, sizeof k);
    cg__hash_update(&h, l, sizeof l);
    cg__hash_update(&h, bin, binlen);
    cg__hash_update(&h, secret, SECRET_BYTES);
    put_hash(out, &h);
}

/* Tries to make a program from a cache file; NULL if anything is off. */
static cl_program
cache_load(cg_context *ctx, const char *dir, const char *path,
           const cg__hash *key, const char *options)
{
    unsigned char want[16], secret[SECRET_BYTES], *data;
    const unsigned char *bin;
    size_t len, binlen;
    cl_program prog;
    cl_int rc, bin_rc;
    uint64_t len64;
    int have_secret;

    /* A missing file is the ordinary miss: keep the caller's error text. */
    cg__error_quiet_enter();
    data = (unsigned char *)cg__read_file(path, &len);
    have_secret = data && secret_read(dir, secret);
    cg__error_quiet_leave();
    if (!data)
        return NULL;
    prog = NULL;
    put_hash(want, key);
    if (!have_secret || len < CACHE_HEADER ||
        memcmp(data, CACHE_MAGIC, 8) != 0 || memcmp(data + 8, want, 16) != 0)
        goto out;
    /* The recorded length, checked against the payload actually there
     * before anything is sized by it. */
    len64 = get_u64(data + 24);
    if (len64 == 0 || len64 != (uint64_t)(len - CACHE_HEADER))
        goto out;
    binlen = (size_t)len64;
    bin = data + CACHE_HEADER;
    seal(want, secret, key, bin, binlen);
    if (memcmp(data + 32, want, 16) != 0)
        goto out;
    prog = clCreateProgramWithBinary(ctx->context, 1, &ctx->device, &binlen,
                                     &bin, &bin_rc, &rc);
    if (rc != CL_SUCCESS || bin_rc != CL_SUCCESS) {
        if (prog)
            clReleaseProgram(prog);
        prog = NULL;
        goto out;
    }
    if (clBuildProgram(prog, 1, &ctx->device, options, NULL, NULL) !=
        CL_SUCCESS) {
        clReleaseProgram(prog);
        prog = NULL;
    }
out:
    memset(secret, 0, sizeof secret);
    free(data);
    return prog;
}

/* Writes the program's binary to the cache; failures are ignored (the
 * cache is an optimisation). */
static void
cache_store(cg_context *ctx, cl_program prog, const char *dir,
            const char *path, const cg__hash *key)
{
    size_t binlen = 0, total;
    unsigned char *file = NULL, *bin, secret[SECRET_BYTES];

    cg__error_quiet_enter();
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof binlen,
                         &binlen, NULL) != CL_SUCCESS || binlen == 0 ||
        cg__add_size(binlen, CACHE_HEADER, &total))
        goto out;
    file = malloc(total);
    if (!file)
        goto out;
    bin = file + CACHE_HEADER;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bin, &bin,
                         NULL) != CL_SUCCESS)
        goto out;
    if (cg__mkdir_p(dir) != CG_OK ||
        (!secret_read(dir, secret) && !secret_create(dir, secret)))
        goto out;
    memcpy(file, CACHE_MAGIC, 8);
    put_hash(file + 8, key);
    put_u64(file + 24, binlen);
    seal(file + 32, secret, key, bin, binlen);
    cg__write_file_atomic(path, file, total);
out:
    memset(secret, 0, sizeof secret);
    free(file);
    cg__error_quiet_leave();
    (void)ctx;
}

static int
build_failure(cg_context *ctx, cl_program prog, cl_int rc, const char *name,
              const char *options)
{
    size_t loglen = 0;
    char *log = NULL;

    clGetProgramBuildInfo(prog, ctx->device, CL_PROGRAM_BUILD_LOG, 0, NULL,
                          &loglen);
    if (loglen > 0 && (log = malloc(loglen + 1)) != NULL) {
        if (clGetProgramBuildInfo(prog, ctx->device, CL_PROGRAM_BUILD_LOG,
                                  loglen, log, NULL) != CL_SUCCESS)
            loglen = 0;
        log[loglen] = '\0';
    }
    cg__error(CG_EBUILD, "building kernel '%s' with options \"%s\" on %s "
              "failed: %s (%d); build log:\n%s", name, options,
              ctx->info.name, cg__cl_error_name(rc) ? cg__cl_error_name(rc)
              : "unknown OpenCL error", rc, log && *log ? log : "(empty)");
    free(log);
    return CG_EBUILD;
}

/* A build that succeeded with something in its log (a custom op's
 * warnings): the log goes to the application's log callback as warnings,
 * instead of nowhere: a first message naming the kernel, the options, the
 * device and the number of lines, then up to LOG_LINES lines of the log,
 * one message each (a message is one line).  The runtime's own one-line
 * summary ("1 warning generated.", clang's, which PoCL lets through to
 * stderr) is beyond the library's reach; README, "What reaches stderr",
 * says so. */
#define LOG_LINES 4

static void
log_build_messages(cg_context *ctx, cl_program prog, const char *name,
                   const char *options)
{
    size_t loglen = 0;
    char *log, *p, *nl;
    int lines = 0, shown = 0;

    if (clGetProgramBuildInfo(prog, ctx->device, CL_PROGRAM_BUILD_LOG, 0,
                              NULL, &loglen) != CL_SUCCESS || loglen < 2 ||
        !(log = malloc(loglen + 1)))
        return;
    if (clGetProgramBuildInfo(prog, ctx->device, CL_PROGRAM_BUILD_LOG,
                              loglen, log, NULL) != CL_SUCCESS)
        loglen = 0;
    log[loglen] = '\0';
    for (p = log; *p; p = nl ? nl + 1 : p + strlen(p)) {
        nl = strchr(p, '\n');
        if (nl)
            *nl = '\0';
        if (strspn(p, " \t\r") < strlen(p))
            lines++;
        if (nl)
            *nl = '\n';
    }
    if (lines)
        cg__log(CG_LOG_WARNING, "kernel '%s' (options \"%s\") on %s built "
                "with %d line%s of compiler messages%s", name, options,
                ctx->info.name, lines, lines == 1 ? "" : "s",
                lines > LOG_LINES ? ", the first follow" : ":");
    for (p = log; *p && lines && shown < LOG_LINES;
         p = nl ? nl + 1 : p + strlen(p)) {
        nl = strchr(p, '\n');
        if (nl)
            *nl = '\0';
        if (strspn(p, " \t\r") < strlen(p)) {
            cg__log(CG_LOG_WARNING, "  %s", p);
            shown++;
        }
    }
    free(log);
}

/* Tells the progress callback (cg_set_compile_progress) about a build. */
static void
progress(const cg_context *ctx, const char *name, const char *kernel,
         const char *dir, int done, int from_cache, int failed, double t0)
{
    cg_compile_event e;

    e.device = ctx->info.name;
    e.file = name;
    e.kernel = kernel;
    e.cache_dir = dir;
    e.done = done;
    e.from_cache = from_cache;
    e.failed = failed;
    e.seconds = done ? cg__now() - t0 : 0.0;
    cg__compile_progress(&e);
}

/* From the cache, else from source (and then into the cache).  kernel:
 * the program's one kernel (a split file), or NULL; for the progress
 * callback only. */
static int
build(cg_context *ctx, const char *name, const char *kernel,
      const char *source, const char *options, cl_program *out,
      int *from_cache)
{
    char dir[4096], path[4400];
    int use_cache = cg__cache_dir(dir, sizeof dir), status = CG_OK;
    cg__hash key = cache_key(ctx, source, options);
    double t0 = cg__now();
    cl_program prog;
    cl_int rc;

    *from_cache = 0;
    if (cg__fault(CG__FAULT_BUILD))
        return cg__error(CG_EBUILD, "building kernel '%s' with options "
                         "\"%s\" on %s failed: CL_OUT_OF_HOST_MEMORY (an "
                         "injected fault)", name, options, ctx->info.name);
    if (use_cache) {
        cache_path(&key, dir, path, sizeof path);
        prog = cache_load(ctx, dir, path, &key, options);
        if (prog) {
            *from_cache = 1;
            *out = prog;
            progress(ctx, name, kernel, dir, 1, 1, 0, t0);
            return CG_OK;
        }
    }
    progress(ctx, name, kernel, use_cache ? dir : NULL, 0, 0, 0, t0);
    prog = clCreateProgramWithSource(ctx->context, 1, &source, NULL, &rc);
    if (rc != CL_SUCCESS) {
        status = cg__cl_fail(rc, "clCreateProgramWithSource");
        goto out;
    }
    rc = clBuildProgram(prog, 1, &ctx->device, options, NULL, NULL);
    if (rc != CL_SUCCESS) {
        status = build_failure(ctx, prog, rc, name, options);
        clReleaseProgram(prog);
        goto out;
    }
    log_build_messages(ctx, prog, name, options);
    if (use_cache)
        cache_store(ctx, prog, dir, path, &key);
    *out = prog;
out:
    progress(ctx, name, kernel, use_cache ? dir : NULL, 1, 0, status != CG_OK,
             t0);
    return status;
}

static char *
full_options(const char *options)
{
    size_t n;
    char *s;

    if (!options)
        options = "";
    n = strlen(BASE_OPTIONS) + strlen(options) + 2;
    s = cg__malloc(n);
    if (s)
        snprintf(s, n, "%s%s%s", BASE_OPTIONS, *options ? " " : "", options);
    return s;
}

/* cg__program_get_source, for the program of one kernel (or NULL). */
static int
program_get_source(cg_context *ctx, const char *name, const char *kernel,
                   const char *source, const char *options, cg__program **out)
{
    cg__program *p;
    char *opts;
    int status;

    opts = full_options(options);
    if (!opts)
        return CG_EHOSTMEM;
    for (p = ctx->programs; p; p = p->next)
        if (strcmp(p->name, name) == 0 && strcmp(p->options, opts) == 0) {
            free(opts);
            *out = p;
            return CG_OK;
        }
    p = cg__calloc(1, sizeof *p);
    if (!p || !(p->name = cg__strdup(name))) {
        status = CG_EHOSTMEM;
        goto fail;
    }
    p->options = opts;
    opts = NULL;
    status = build(ctx, name, kernel, source, p->options, &p->program,
                   &p->from_cache);
    if (status)
        goto fail;
    p->next = ctx->programs;
    ctx->programs = p;
    *out = p;
    return CG_OK;
fail:
    if (p) {
        free(p->name);
        free(p->options);
        free(p);
    }
    free(opts);
    return status;
}

int
cg__program_get_source(cg_context *ctx, const char *name, const char *source,
                       const char *options, cg__program **out)
{
    return program_get_source(ctx, name, NULL, source, options, out);
}

/* cg__program_get, for the program of one kernel (or NULL). */
static int
program_get(cg_context *ctx, const char *name, const char *kernel,
            const char *options, cg__program **out)
{
    char *source, *opts;
    cg__program *p;
    int status;

    /* Look for the program before reading its source again. */
    opts = full_options(options);
    if (!opts)
        return CG_EHOSTMEM;
    for (p = ctx->programs; p; p = p->next)
        if (strcmp(p->name, name) == 0 && strcmp(p->options, opts) == 0)
            break;
    free(opts);
    if (p) {
        *out = p;
        return CG_OK;
    }
    status = cg__kernel_source(name, &source);
    if (status)
        return status;
    status = program_get_source(ctx, name, kernel, source, options, out);
    free(source);
    return status;
}

int
cg__program_get(cg_context *ctx, const char *name, const char *options,
                cg__program **out)
{
    return program_get(ctx, name, NULL, options, out);
}

/* kernel id of program p, or an error naming both. */
static int
create(cg__program *p, cg__kid id, cl_kernel *out)
{
    cl_int rc;

    *out = clCreateKernel(p->program, cg__kernel_table[id].name, &rc);
    if (rc != CL_SUCCESS)
        return cg__error(rc, "clCreateKernel('%s' in %s.cl) failed: %s (%d)",
                         cg__kernel_table[id].name, p->name,
                         cg__cl_error_name(rc) ? cg__cl_error_name(rc)
                         : "unknown", rc);
    return CG_OK;
}

/* The options of kernel id's program: `options`, and for a file built
 * one kernel per program (@split) the kernel's selection (common.cl's
 * CG_WANT).  PoCL compiles every kernel of a program when the binary
 * cache asks for its binary, so a program holds only what is launched. */
static char *
kernel_options(cg__kid id, const char *options)
{
    const char *name = cg__kernel_table[id].name;
    size_t n;
    char *s;

    if (!options)
        options = "";
    if (!cg__kfile_split[cg__kernel_table[id].file])
        return cg__strdup(options);
    n = strlen(options) + strlen(name) + 32;
    s = cg__malloc(n);
    if (s)
        snprintf(s, n, "%s%s-DCG_ONE -DCG_K_%s=1", options,
                 *options ? " " : "", name);
    return s;
}

/* Kernel id from the program of its file (or, split, its own) built with
 * `options`. */
int
cg__kernel_create(cg_context *ctx, cg__kid id, const char *options,
                  cl_kernel *out)
{
    cg__program *p;
    char *opts = kernel_options(id, options);
    int status;

    if (!opts)
        return CG_EHOSTMEM;
    status = program_get(ctx, cg__kfile_names[cg__kernel_table[id].file],
                         cg__kfile_split[cg__kernel_table[id].file]
                         ? cg__kernel_table[id].name : NULL, opts, &p);
    free(opts);
    return status ? status : create(p, id, out);
}

/* The -D options of file f's tunables, their values in force. */
static char *
file_options(const cg_context *ctx, cg__kfile f)
{
    char buf[512];
    size_t n = 0;
    int i;

    buf[0] = '\0';
    for (i = 0; i < CG__P_COUNT; i++)
        if (cg__param_table[i].file == f && n < sizeof buf)
            n += (size_t)snprintf(buf + n, sizeof buf - n, "%s-D%s=%ld",
                                  n ? " " : "", cg__param_table[i].name,
                                  ctx->param[i]);
    return cg__strdup(buf);
}

int
cg__kernel_get_v(cg_context *ctx, cg__kid id, cg__kvariant v,
                 cl_kernel *out)
{
    cg__kfile f = cg__kernel_table[id].file;
    char *opts;
    size_t n;
    int status;

    if (!ctx->options[f] && !(ctx->options[f] = file_options(ctx, f)))
        return CG_EHOSTMEM;
    if (v == CG__KV_F32) {
        status = cg__kernel_create(ctx, id, ctx->options[f],
                                   &ctx->k[v][id]);
    } else {
        n = strlen(ctx->options[f]) + 16;
        if (!(opts = cg__malloc(n)))
            return CG_EHOSTMEM;
        snprintf(opts, n, "%s%s-DCG_T=%d", ctx->options[f],
                 *ctx->options[f] ? " " : "", (int)v);
        status = cg__kernel_create(ctx, id, opts, &ctx->k[v][id]);
        free(opts);
    }
    if (status == CG_OK)
        *out = ctx->k[v][id];
    return status;
}

int
cg__kernel_get(cg_context *ctx, cg__kid id, cl_kernel *out)
{
    return cg__kernel_get_v(ctx, id, CG__KV_F32, out);
}

/* Forgets file f's options and kernels: its parameters changed. */
static void
file_drop(cg_context *ctx, cg__kfile f)
{
    int i, v;

    for (v = 0; v < CG__KV_COUNT; v++)
        for (i = 0; i < CG__K_COUNT; i++)
            if (cg__kernel_table[i].file == f && ctx->k[v][i]) {
                clReleaseKernel(ctx->k[v][i]);
                ctx->k[v][i] = NULL;
            }
    free(ctx->options[f]);
    ctx->options[f] = NULL;
}

void
cg__param_set(cg_context *ctx, cg__pid p, long value)
{
    if (ctx->param[p] == value)
        return;
    ctx->param[p] = value;
    ctx->tuning_gen++;
    file_drop(ctx, cg__param_table[p].file);
}

void
cg__params_reset(cg_context *ctx)
{
    int i;

    for (i = 0; i < CG__P_COUNT; i++)
        cg__param_set(ctx, (cg__pid)i, cg__param_table[i].dflt);
}

int
cg__set_args(cl_kernel k, const cg__arg *args, int n)
{
    char name[64] = "?", what[128];
    cl_int rc = CL_SUCCESS;
    int i;

    if (n > CG__MAX_ARGS)
        return cg__error(CG_EINVAL, "%d kernel arguments (at most %d)", n,
                         CG__MAX_ARGS);
    for (i = 0; i < n && rc == CL_SUCCESS; i++)
        rc = clSetKernelArg(k, (cl_uint)i, args[i].size, args[i].value);
    if (rc == CL_SUCCESS)
        return CG_OK;
    clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, sizeof name, name, NULL);
    snprintf(what, sizeof what, "clSetKernelArg(%d) of kernel %s", i - 1,
             name);
    return cg__cl_fail(rc, what);
}

int
cg__launch1d(cg_context *ctx, cl_kernel k, size_t n, size_t local)
{
    size_t global = (n + local - 1) / local * local;

    return cg__launch(ctx, k, 1, &global, &local, NULL);
}

int
cg__launch_chunks(cg_context *ctx, cl_kernel k, size_t len, size_t rows,
                  size_t ch, size_t local)
{
    size_t n = (len + ch - 1) / ch, wg[2] = { 1, 1 }, global[2];

    if (n == 0 || rows == 0)
        return CG_OK;
    while (wg[0] < local && wg[0] < n)
        wg[0] <<= 1;
    global[0] = (n + wg[0] - 1) / wg[0] * wg[0];
    global[1] = rows;
    return cg__launch(ctx, k, 2, global, wg, NULL);
}

void
cg__programs_free(cg_context *ctx)
{
    cg__program *p = ctx->programs, *next;
    int f;

    for (f = 0; f < CG__KF_COUNT; f++)
        file_drop(ctx, (cg__kfile)f);

    for (; p; p = next) {
        next = p->next;
        clReleaseProgram(p->program);
        free(p->name);
        free(p->options);
        free(p);
    }
    ctx->programs = NULL;
}
