/* SPDX-License-Identifier: MIT */
/*
 * lib/ops/fft.c - clFFT underneath the spectral ops (lib/ops/spectral.c):
 * one batched 1-D transform of contiguous rows, through a per-context
 * cache of plans baked on first use.
 *
 * clFFT keeps process-wide state (clfftSetup, clfftTeardown), so the
 * contexts that use it share one setup, counted under a mutex: the first
 * context to run a transform sets clFFT up, the last one freed tears it
 * down.  clFFT reads CLFFT_CACHE_PATH once, in clfftSetup, and caches the
 * kernels it compiles there (baking a plan takes seconds on PoCL without
 * it, a tenth of that with it); unless the user set it, clgrad points it
 * at "clfft" under its own cache directory (cg__cache_dir) before the
 * first setup.
 */
#include "config.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/internal.h"
#include "tune/internal.h"

#include <clFFT.h>

/* One baked plan.  The key is everything a plan fixes: the kind (which
 * gives the layouts and the direction), the length, the batch, the scale,
 * the precision and the placeness (single precision and out of place:
 * the ops need no other yet, but they are part of the key so that adding
 * them cannot return a plan of the other kind). */
typedef struct fft_plan {
    struct fft_plan *next;
    cg__fft_kind kind;
    size_t n, batch;
    float scale;
    clfftPrecision precision;
    clfftResultLocation placeness;
    clfftPlanHandle handle;
    size_t tmp_bytes;           /* clfftGetTmpBufSize after baking */
} fft_plan;

/* The chirps of one (n, m, direction) (see complex_rows): w and the
 * transform f of the convolution's sequence (NULL on the complex path,
 * m = n), made on first use and kept with the plans, outside the pool. */
typedef struct fft_chirp {
    struct fft_chirp *next;
    size_t n, m;
    int inverse;
    cl_mem w, f;
} fft_chirp;

/* At most this many plans a context (cg__fft_set_plan_limit changes it):
 * the batch is part of a plan's key, so a run whose batches vary (a last,
 * shorter batch; inference at any batch) would otherwise bake and keep
 * plans without end.  Each holds clFFT's compiled kernels. */
#define FFT_MAX_PLANS 256

/* The plan of clgrad's own transform (path "radix", kernels/fft.cl) of
 * complex length n: its passes' radices (8 first, then 4, 2, 3, 5, 7)
 * and the twiddles of every pass, tw (NULL for n = 1); for a real
 * transform of length 2n, rw[k] = e^(-2 pi i k / 2n), k <= n.  Made on
 * first use and kept with the plans, outside the pool. */
#define FFT_MAX_PASSES 32
#define FFT_CH 16               /* kernels/fft.cl's butterflies an item */

typedef struct fft_radix {
    struct fft_radix *next;
    size_t n;
    int real;
    int npass;
    int radix[FFT_MAX_PASSES];
    cl_mem tw, rw;
} fft_radix;

struct cg__fft {
    fft_plan *plans;            /* most recently used first */
    fft_chirp *chirps;
    fft_radix *radix;
    double bake_seconds;        /* summed over this context's bakes */
    int nbaked;
    int max_plans;
};

static pthread_mutex_t setup_lock = PTHREAD_MUTEX_INITIALIZER;
static int setup_refs;          /* contexts holding a clFFT setup */

/* clFFT's own status names (its codes above the OpenCL range). */
static const char *
clfft_name(clfftStatus st)
{
    switch ((int)st) {
    case CLFFT_BUGCHECK: return "CLFFT_BUGCHECK";
    case CLFFT_NOTIMPLEMENTED: return "CLFFT_NOTIMPLEMENTED";
    case CLFFT_TRANSPOSED_NOTIMPLEMENTED:
        return "CLFFT_TRANSPOSED_NOTIMPLEMENTED";
    case CLFFT_FILE_NOT_FOUND: return "CLFFT_FILE_NOT_FOUND";
    case CLFFT_FILE_CREATE_FAILURE: return "CLFFT_FILE_CREATE_FAILURE";
    case CLFFT_VERSION_MISMATCH: return "CLFFT_VERSION_MISMATCH";
    case CLFFT_INVALID_PLAN: return "CLFFT_INVALID_PLAN";
    case CLFFT_DEVICE_NO_DOUBLE: return "CLFFT_DEVICE_NO_DOUBLE";
    case CLFFT_DEVICE_MISMATCH: return "CLFFT_DEVICE_MISMATCH";
    default: return NULL;
    }
}

/* Records a failed clFFT call as the last error: clFFT's codes in the
 * OpenCL range are OpenCL's own (CLFFT_INVALID_VALUE is CL_INVALID_VALUE)
 * and keep their number; its own codes become clgrad's nearest. */
static int
clfft_fail(clfftStatus st, const char *call, const char *what)
{
    const char *name = clfft_name(st);
    int status;

    if (!name) {
        /* An OpenCL code: clFFT's name is CLFFT_ + OpenCL's after CL_. */
        name = cg_status_name((int)st);
        status = cg__cl_fail((cl_int)st, call);
        return cg__error(status, "%s (%s) failed: CLFFT_%s", call, what,
                         strncmp(name, "CL_", 3) == 0 ? name + 3 : name);
    }
    switch ((int)st) {
    case CLFFT_NOTIMPLEMENTED:
    case CLFFT_TRANSPOSED_NOTIMPLEMENTED:
    case CLFFT_DEVICE_NO_DOUBLE:
        status = CG_EUNSUPPORTED;
        break;
    case CLFFT_FILE_NOT_FOUND:
    case CLFFT_FILE_CREATE_FAILURE:
        status = CG_EIO;
        break;
    default:
        status = CG_ESTATE;
    }
    return cg__error(status, "%s (%s) failed: %s", call, what, name);
}

/* Points clFFT's kernel cache under clgrad's cache directory (unless the
 * user chose one, or turned clgrad's cache off).  Before clfftSetup,
 * under setup_lock. */
static void
set_cache_path(void)
{
    char dir[4096];
    size_t len;

    if (getenv("CLFFT_CACHE_PATH") || !cg__cache_dir(dir, sizeof dir))
        return;
    len = strlen(dir);
    if (len + sizeof "/clfft" > sizeof dir)
        return;
    memcpy(dir + len, "/clfft", sizeof "/clfft");
    /* Without the directory clFFT just compiles every time. */
    cg__error_quiet_enter();
    if (cg__mkdir_p(dir) == CG_OK)
        setenv("CLFFT_CACHE_PATH", dir, 0);
    cg__error_quiet_leave();
}

/* Gives ctx its plan cache, and takes a clFFT setup for it. */
static int
fft_attach(cg_context *ctx)
{
    clfftSetupData setup;
    clfftStatus st = CLFFT_SUCCESS;
    struct cg__fft *f;

    f = cg__calloc(1, sizeof *f);
    if (!f)
        return cg__last_status();
    pthread_mutex_lock(&setup_lock);
    if (setup_refs == 0) {
        set_cache_path();
        memset(&setup, 0, sizeof setup);
        setup.major = clfftVersionMajor;
        setup.minor = clfftVersionMinor;
        setup.patch = clfftVersionPatch;
        st = clfftSetup(&setup);
    }
    if (st == CLFFT_SUCCESS)
        setup_refs++;
    pthread_mutex_unlock(&setup_lock);
    if (st != CLFFT_SUCCESS) {
        free(f);
        return clfft_fail(st, "clfftSetup", "the first transform");
    }
    f->max_plans = FFT_MAX_PLANS;
    ctx->fft = f;
    return CG_OK;
}

void
cg__fft_free(cg_context *ctx)
{
    fft_plan *p, *next;

    if (!ctx || !ctx->fft)
        return;
    clFinish(ctx->queue);
    for (p = ctx->fft->plans; p; p = next) {
        next = p->next;
        clfftDestroyPlan(&p->handle);
        free(p);
    }
    while (ctx->fft->chirps) {
        fft_chirp *c = ctx->fft->chirps;

        ctx->fft->chirps = c->next;
        clReleaseMemObject(c->w);
        if (c->f)
            clReleaseMemObject(c->f);
        free(c);
    }
    while (ctx->fft->radix) {
        fft_radix *r = ctx->fft->radix;

        ctx->fft->radix = r->next;
        if (r->tw)
            clReleaseMemObject(r->tw);
        if (r->rw)
            clReleaseMemObject(r->rw);
        free(r);
    }
    free(ctx->fft);
    ctx->fft = NULL;
    pthread_mutex_lock(&setup_lock);
    if (--setup_refs == 0)
        clfftTeardown();
    pthread_mutex_unlock(&setup_lock);
}

/* Whether n >= 1 has no prime factor above p (p one of these primes). */
static int
smooth(size_t n, size_t p)
{
    static const size_t primes[] = { 2, 3, 5, 7, 11, 13 };
    size_t i;

    if (n == 0)
        return 0;
    for (i = 0; i < sizeof primes / sizeof primes[0] && primes[i] <= p; i++)
        while (n % primes[i] == 0)
            n /= primes[i];
    return n == 1;
}

int
cg__fft_length_ok(size_t n)
{
    return smooth(n, 13);
}

/* Sets up a new plan for p's key: the layouts, strides and distances of
 * p's kind (clFFT's real transforms want theirs set explicitly; the
 * distances are in elements of each side: reals, or complex pairs), the
 * scale of its direction, and bakes it. */
static int
plan_make(cg_context *ctx, fft_plan *p, char *what)
{
    size_t len[1] = { p->n }, one[1] = { 1 }, half = p->n / 2 + 1;
    size_t idist = p->n, odist = p->n;
    clfftLayout il = CLFFT_COMPLEX_INTERLEAVED, ol = il;
    clfftDirection dir = CLFFT_FORWARD;
    clfftStatus st;
    const char *call;
    double t0;

    if (p->kind == CG__FFT_C2C_INV || p->kind == CG__FFT_C2R)
        dir = CLFFT_BACKWARD;
    if (p->kind == CG__FFT_R2C) {
        il = CLFFT_REAL;
        ol = CLFFT_HERMITIAN_INTERLEAVED;
        odist = half;
    } else if (p->kind == CG__FFT_C2R) {
        il = CLFFT_HERMITIAN_INTERLEAVED;
        ol = CLFFT_REAL;
        idist = half;
    }
#define TRY(c) do { call = #c; if ((st = (c)) != CLFFT_SUCCESS) goto fail; } \
    while (0)
    TRY(clfftCreateDefaultPlan(&p->handle, ctx->context, CLFFT_1D, len));
    TRY(clfftSetPlanPrecision(p->handle, p->precision));
    TRY(clfftSetLayout(p->handle, il, ol));
    TRY(clfftSetResultLocation(p->handle, p->placeness));
    TRY(clfftSetPlanBatchSize(p->handle, p->batch));
    TRY(clfftSetPlanInStride(p->handle, CLFFT_1D, one));
    TRY(clfftSetPlanOutStride(p->handle, CLFFT_1D, one));
    TRY(clfftSetPlanDistance(p->handle, idist, odist));
    /* Both directions' scales, so that neither is clFFT's default. */
    TRY(clfftSetPlanScale(p->handle, CLFFT_FORWARD, 1.0f));
    TRY(clfftSetPlanScale(p->handle, CLFFT_BACKWARD, 1.0f));
    TRY(clfftSetPlanScale(p->handle, dir, p->scale));
    t0 = cg__now();
    TRY(clfftBakePlan(p->handle, 1, &ctx->queue, NULL, NULL));
    ctx->fft->bake_seconds += cg__now() - t0;
    ctx->fft->nbaked++;
    TRY(clfftGetTmpBufSize(p->handle, &p->tmp_bytes));
#undef TRY
    return CG_OK;
fail:
    if (p->handle)
        clfftDestroyPlan(&p->handle);
    return clfft_fail(st, call, what);
}

static const char *const kind_names[] = { "fft", "ifft", "rfft", "irfft" };

/* Destroys the least recently used plans beyond f->max_plans.  A plan is
 * only used within the call that got it (clfft_rows), and OpenCL keeps
 * what a destroyed plan's queued transforms use until they finish. */
static void
plans_trim(struct cg__fft *f)
{
    fft_plan **link, *p;
    int i;

    for (link = &f->plans, i = 0; *link && i < f->max_plans; i++)
        link = &(*link)->next;
    while ((p = *link) != NULL) {
        *link = p->next;
        clfftDestroyPlan(&p->handle);
        free(p);
    }
}

/* ctx's plan for the key, made and baked if it has none. */
static int
plan_get(cg_context *ctx, cg__fft_kind kind, size_t n, size_t batch,
         float scale, fft_plan **out)
{
    fft_plan *p, **link;
    char what[96];
    int status;

    if (!ctx->fft && (status = fft_attach(ctx)) != CG_OK)
        return status;
    for (link = &ctx->fft->plans; (p = *link) != NULL; link = &p->next)
        if (p->kind == kind && p->n == n && p->batch == batch &&
            p->scale == scale && p->precision == CLFFT_SINGLE &&
            p->placeness == CLFFT_OUTOFPLACE) {
            /* to the front: the list runs from most to least recent */
            *link = p->next;
            p->next = ctx->fft->plans;
            ctx->fft->plans = p;
            *out = p;
            return CG_OK;
        }
    p = cg__calloc(1, sizeof *p);
    if (!p)
        return cg__last_status();
    p->kind = kind;
    p->n = n;
    p->batch = batch;
    p->scale = scale;
    p->precision = CLFFT_SINGLE;
    p->placeness = CLFFT_OUTOFPLACE;
    snprintf(what, sizeof what, "%s of length %zu, batch %zu",
             kind_names[kind], n, batch);
    status = plan_make(ctx, p, what);
    if (status) {
        free(p);
        return status;
    }
    p->next = ctx->fft->plans;
    ctx->fft->plans = p;
    plans_trim(ctx->fft);
    *out = p;
    return CG_OK;
}

/* One transform by clFFT: n must be a length it does. */
static int
clfft_rows(cg_context *ctx, cg__fft_kind kind, size_t n, size_t batch,
           float scale, cl_mem in, cl_mem out)
{
    cg_buffer *tmp = NULL;
    cl_mem tmem = NULL;
    fft_plan *p = NULL;
    clfftStatus st;
    clfftDirection dir;
    char what[96];
    int status;

    status = plan_get(ctx, kind, n, batch, scale, &p);
    if (status)
        return status;
    if (p->tmp_bytes) {
        tmp = cg__buffer_new(ctx, p->tmp_bytes);
        if (!tmp)
            return cg__last_status();
        tmem = cg__buffer_mem(tmp);
    }
    dir = kind == CG__FFT_C2C_INV || kind == CG__FFT_C2R ? CLFFT_BACKWARD
                                                          : CLFFT_FORWARD;
    st = clfftEnqueueTransform(p->handle, dir, 1, &ctx->queue, 0, NULL,
                               NULL, &in, &out, tmem);
    /* The pool hands the temporary out again only to work queued after
     * this transform on the same in-order queue. */
    cg_buffer_free(tmp);
    if (st != CLFFT_SUCCESS) {
        snprintf(what, sizeof what, "%s of length %zu, batch %zu",
                 kind_names[kind], n, batch);
        return clfft_fail(st, "clfftEnqueueTransform", what);
    }
    ctx->stats.kernels_enqueued++;
    return CG_OK;
}

/* A buffer of `bytes` outside the pool, holding host's bytes. */
static cl_mem
const_buffer(cg_context *ctx, const float *host, size_t bytes)
{
    cl_int err;
    cl_mem m = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE |
                              CL_MEM_COPY_HOST_PTR, bytes, (void *)host,
                              &err);

    if (err != CL_SUCCESS) {
        cg__cl_fail(err, "clCreateBuffer");
        return NULL;
    }
    return m;
}

/* Whether clgrad's own passes do complex length n (n >= 1 with no prime
 * factor above 7). */
static int
radix_length_ok(size_t n)
{
    return smooth(n, 7);
}

/* ctx's own plan of complex length n (radix_length_ok), with the real
 * twiddles of length 2n when real; made on first use: the radices, and
 * each pass's twiddles computed in double and rounded once to float. */
static int
radix_get(cg_context *ctx, size_t n, int real, fft_radix **out)
{
    static const int order[] = { 8, 4, 2, 3, 5, 7 };
    const double pi = 3.14159265358979323846;
    fft_radix *r;
    float *host = NULL;
    size_t left = n, ns = 1, k, q, at = 0;
    int i, status = CG_OK;

    if (!ctx->fft && (status = fft_attach(ctx)) != CG_OK)
        return status;
    for (r = ctx->fft->radix; r; r = r->next)
        if (r->n == n && r->real == real) {
            *out = r;
            return CG_OK;
        }
    r = cg__calloc(1, sizeof *r);
    if (!r)
        return cg__last_status();
    r->n = n, r->real = real;
    for (i = 0; i < 6 && left > 1;)
        if (left % (size_t)order[i] == 0 && r->npass < FFT_MAX_PASSES) {
            r->radix[r->npass++] = order[i];
            left /= (size_t)order[i];
        } else {
            i++;
        }
    /* The twiddles of all passes: sum (R - 1) ns = n - 1 pairs. */
    host = n > 1 || real ? cg__malloc(2 * (n + 1) * sizeof *host) : NULL;
    if ((n > 1 || real) && !host) {
        free(r);
        return cg__last_status();
    }
    for (i = 0; i < r->npass; i++) {
        size_t R = (size_t)r->radix[i];

        for (q = 1; q < R; q++)
            for (k = 0; k < ns; k++, at++) {
                double a = -2 * pi * (double)(k * q % (ns * R)) /
                           (double)(ns * R);

                host[2 * at] = (float)cos(a);
                host[2 * at + 1] = (float)sin(a);
            }
        ns *= R;
    }
    if (n > 1) {
        r->tw = const_buffer(ctx, host, 2 * (n - 1) * sizeof *host);
        status = r->tw ? CG_OK : cg__last_status();
    }
    if (status == CG_OK && real) {
        for (k = 0; k <= n; k++) {
            double a = -pi * (double)k / (double)n;

            host[2 * k] = (float)cos(a);
            host[2 * k + 1] = (float)sin(a);
        }
        r->rw = const_buffer(ctx, host, 2 * (n + 1) * sizeof *host);
        status = r->rw ? CG_OK : cg__last_status();
    }
    free(host);
    if (status) {
        if (r->tw)
            clReleaseMemObject(r->tw);
        free(r);
        return status;
    }
    r->next = ctx->fft->radix;
    ctx->fft->radix = r;
    *out = r;
    return CG_OK;
}

/* A work-group size for kernel k over global: in each dimension in turn
 * the largest divisor of its size that keeps the group within FFT_WG
 * items and what the device allows k (the kernels need no padding, and
 * PoCL runs a group as one task: 256 items of 16 butterflies measured
 * faster here than 64 or the implementation's choice). */
#define FFT_WG 256

static void
fit_local(const cg_context *ctx, cl_kernel k, const size_t *global, int dims,
          size_t *local)
{
    size_t used = 1, d, cap = FFT_WG, kmax = 0;
    int i;

    if (clGetKernelWorkGroupInfo(k, ctx->device, CL_KERNEL_WORK_GROUP_SIZE,
                                 sizeof kmax, &kmax, NULL) == CL_SUCCESS &&
        kmax > 0 && kmax < cap)
        cap = kmax;
    for (i = 0; i < dims; i++) {
        for (d = cap / used; d > 1 && global[i] % d; d--)
            ;
        local[i] = d ? d : 1;
        used *= local[i];
    }
}

/* The passes of plan r over `batch` contiguous [r->n][inner] complex
 * matrices (inner = 1: rows), transforming their columns, from src into
 * dst (which must not be src), through scratch (of their size, neither
 * src nor dst; unused with one pass), each column multiplied by scale;
 * inverse conjugates around them. */
static int
radix_passes(cg_context *ctx, const fft_radix *r, int inverse, size_t batch,
             size_t inner, float scale, cl_mem src, cl_mem dst,
             cl_mem scratch)
{
    static const cg__kid kids[9] = {
        [2] = CG__K_FFT_RADIX2, [3] = CG__K_FFT_RADIX3,
        [4] = CG__K_FFT_RADIX4, [5] = CG__K_FFT_RADIX5,
        [7] = CG__K_FFT_RADIX7, [8] = CG__K_FFT_RADIX8
    };
    cl_uint un = (cl_uint)r->n, ns = 1, uinner = (cl_uint)inner;
    size_t off = 0;
    cl_mem from = src;
    int i, status = CG_OK;

    for (i = 0; i < r->npass && status == CG_OK; i++) {
        int R = r->radix[i], last = i == r->npass - 1;
        cl_mem to = (r->npass - 1 - i) % 2 ? scratch : dst;
        cl_int flags = inverse ? (i == 0) | 2 * last : 0;
        float s = last ? scale : 1.0f;
        size_t t = r->n / (size_t)R, global[3], local[3];
        cl_uint uoff = (cl_uint)off;
        cl_kernel k;

        if (inner > 1) {
            global[0] = (inner + FFT_CH - 1) / FFT_CH;
            global[1] = t;
        } else {
            global[0] = ((ns == 1 ? t : ns) + FFT_CH - 1) / FFT_CH;
            global[1] = ns == 1 ? 1 : t / ns;
        }
        global[2] = batch;
        status = cg__kernel(ctx, kids[R], &k);
        if (status == CG_OK)
            status = cg__set_args(k, (const cg__arg[]){
                                      CG__ARG(from), CG__ARG(to),
                                      CG__ARG(r->tw), CG__ARG(uoff),
                                      CG__ARG(un), CG__ARG(ns),
                                      CG__ARG(uinner), CG__ARG(flags),
                                      CG__ARG(s) }, 9);
        if (status == CG_OK) {
            fit_local(ctx, k, global, 3, local);
            status = cg__launch(ctx, k, 3, global, local, NULL);
        }
        off += (size_t)(R - 1) * ns;
        ns *= (cl_uint)R;
        from = to;
    }
    return status;
}

/* Complex transforms of length n by clgrad's passes (radix_length_ok(n),
 * n >= 2) along the columns of `batch` [n][inner] matrices (inner = 1:
 * rows), each multiplied by scale, with a scratch from the pool. */
static int
radix_c2c(cg_context *ctx, int inverse, size_t n, size_t batch, size_t inner,
          float scale, cl_mem in, cl_mem out)
{
    cg_buffer *s = NULL;
    fft_radix *r;
    int status;

    if (n > UINT32_MAX || inner > UINT32_MAX)
        return cg__error(CG_EUNSUPPORTED, "fft: length %zu (columns %zu) "
                         "is too long for the path radix here", n, inner);
    status = radix_get(ctx, n, 0, &r);
    if (status == CG_OK && r->npass > 1) {
        s = cg__buffer_new(ctx, 2 * n * batch * inner * sizeof(float));
        status = s ? CG_OK : cg__last_status();
    }
    if (status == CG_OK)
        status = radix_passes(ctx, r, inverse, batch, inner, scale, in, out,
                              s ? cg__buffer_mem(s) : NULL);
    cg_buffer_free(s);
    return status;
}

/* One complex transform of length n (no scale) by clFFT, or with own by
 * clgrad's passes. */
static int
c2c_rows(cg_context *ctx, int own, int inverse, size_t n, size_t batch,
         cl_mem in, cl_mem out)
{
    if (own)
        return radix_c2c(ctx, inverse, n, batch, 1, 1.0f, in, out);
    return clfft_rows(ctx, inverse ? CG__FFT_C2C_INV : CG__FFT_C2C_FWD, n,
                      batch, 1.0f, in, out);
}

/* The chirp w[k] = e^(sign i pi k^2 / n), k < n, computed in double with
 * k^2 taken modulo 2n (exact for any n below 2^31), as float pairs; and
 * for the convolution the sequence b of length m: conj(w[k]) at k and at
 * m - k, zero between. */
static void
chirps(size_t n, size_t m, double sign, float *w, float *b)
{
    const double pi = 3.14159265358979323846;
    size_t k;

    memset(b, 0, 2 * m * sizeof *b);
    for (k = 0; k < n; k++) {
        uint64_t q = (uint64_t)k * k % (2 * (uint64_t)n);
        double a = sign * pi * (double)q / (double)n;

        w[2 * k] = (float)cos(a);
        w[2 * k + 1] = (float)sin(a);
        b[2 * k] = w[2 * k];
        b[2 * k + 1] = -w[2 * k + 1];
        if (k > 0) {
            b[2 * (m - k)] = b[2 * k];
            b[2 * (m - k) + 1] = b[2 * k + 1];
        }
    }
}

/* Sets the arguments of Bluestein kernel id and launches it over
 * `count` work-items. */
static int
launch(cg_context *ctx, cg__kid id, size_t count, const cg__arg *args,
       int nargs)
{
    cl_kernel k;
    int status = cg__kernel(ctx, id, &k);

    if (status == CG_OK)
        status = cg__set_args(k, args, nargs);
    if (status == CG_OK)
        status = cg__launch1d(ctx, k, count, CG__WG);
    return status;
}

/* ctx's chirps of (n, m, direction), made on first use: the chirp and
 * the transform of Bluestein's sequence (kernels/fft.cl), or for m = n a
 * chirp of ones. */
static int
chirp_get(cg_context *ctx, size_t n, size_t m, int inverse, int own,
          fft_chirp **out)
{
    fft_chirp *c;
    cl_mem b = NULL;
    float *host;
    size_t k;
    int status;

    if (!ctx->fft && (status = fft_attach(ctx)) != CG_OK)
        return status;
    for (c = ctx->fft->chirps; c; c = c->next)
        if (c->n == n && c->m == m && c->inverse == inverse) {
            *out = c;
            return CG_OK;
        }
    c = cg__calloc(1, sizeof *c);
    host = c ? cg__malloc((2 * n + 2 * m) * sizeof *host) : NULL;
    if (!host) {
        free(c);
        return cg__last_status();
    }
    if (m != n) {
        chirps(n, m, inverse ? 1 : -1, host, host + 2 * n);
    } else {
        for (k = 0; k < n; k++) {
            host[2 * k] = 1.0f;
            host[2 * k + 1] = 0.0f;
        }
    }
    c->n = n, c->m = m, c->inverse = inverse;
    c->w = const_buffer(ctx, host, 2 * n * sizeof(float));
    status = c->w ? CG_OK : cg__last_status();
    if (status == CG_OK && m != n) {
        /* f = the transform of b; OpenCL keeps b until the transform that
         * reads it is done. */
        b = const_buffer(ctx, host + 2 * n, 2 * m * sizeof(float));
        c->f = b ? const_buffer(ctx, host + 2 * n, 2 * m * sizeof(float))
                 : NULL;
        status = c->f ? CG_OK : cg__last_status();
        if (status == CG_OK)
            status = c2c_rows(ctx, own, 0, m, 1, b, c->f);
        if (b)
            clReleaseMemObject(b);
    }
    free(host);     /* CL_MEM_COPY_HOST_PTR copied it at creation */
    if (status) {
        if (c->w)
            clReleaseMemObject(c->w);
        if (c->f)
            clReleaseMemObject(c->f);
        free(c);
        return status;
    }
    c->next = ctx->fft->chirps;
    ctx->fft->chirps = c;
    *out = c;
    return CG_OK;
}

/* The rows through complex transforms of length m: Bluestein's
 * algorithm (kernels/fft.cl) when m > n, m at least 2n - 1 and a length
 * clFFT does - the chirped rows and the chirp's transform multiplied,
 * transformed back and chirped again, with scale / m folded into the last
 * step; or when m = n (the complex path) the same kernels with a chirp of
 * ones around one complex transform of length n, which gives a real
 * kind's result without clFFT's real plans.  Rows as cg__fft_rows takes
 * and gives them, for every kind (R2C keeps the first n/2 + 1 bins, C2R
 * the real part).  The chirps are ctx's (chirp_get), the rows'
 * temporaries from the pool. */
static int
complex_rows(cg_context *ctx, int own, cg__fft_kind kind, size_t n,
             size_t m, size_t batch, float scale, cl_mem in, cl_mem out)
{
    size_t nout = kind == CG__FFT_R2C ? n / 2 + 1 : n;
    int blue = m != n;
    int inverse = !(kind == CG__FFT_C2C_FWD || kind == CG__FFT_R2C);
    cl_int mode_in = kind == CG__FFT_C2C_FWD || kind == CG__FFT_C2C_INV ? 0
                     : kind == CG__FFT_R2C ? 1 : 2;
    cl_int mode_out = kind == CG__FFT_C2R;
    cl_uint un = (cl_uint)n, um = (cl_uint)m, urows = (cl_uint)batch;
    cl_uint unout = (cl_uint)nout;
    float post = blue ? (float)((double)scale / (double)m) : scale;
    cg_buffer *ba = NULL, *bA = NULL;
    fft_chirp *c = NULL;
    cl_mem a, A;
    int status;

    if (m > UINT32_MAX / 2 || batch * m > UINT32_MAX)
        return cg__error(CG_EUNSUPPORTED, "%s: length %zu (batch %zu) is "
                         "too long for %s here", kind_names[kind], n, batch,
                         blue ? "Bluestein's algorithm"
                              : "the complex path");
    status = chirp_get(ctx, n, m, inverse, own, &c);
    if (status == CG_OK) {
        ba = cg__buffer_new(ctx, 2 * m * batch * sizeof(float));
        bA = ba ? cg__buffer_new(ctx, 2 * m * batch * sizeof(float)) : NULL;
        status = bA ? CG_OK : cg__last_status();
    }
    if (status)
        goto out;
    a = cg__buffer_mem(ba), A = cg__buffer_mem(bA);
    status = launch(ctx, CG__K_FFT_CHIRP_PRE, m * batch,
                    (const cg__arg[]){ CG__ARG(in), CG__ARG(a),
                                       CG__ARG(c->w), CG__ARG(un),
                                       CG__ARG(um), CG__ARG(urows),
                                       CG__ARG(mode_in) }, 7);
    if (status == CG_OK && !blue) {
        /* The complex transform of the direction, then the real part or
         * the first bins. */
        status = c2c_rows(ctx, own, inverse, n, batch, a, A);
    } else if (status == CG_OK) {
        status = c2c_rows(ctx, own, 0, m, batch, a, A);
        if (status == CG_OK)
            status = launch(ctx, CG__K_FFT_CMUL, m * batch,
                            (const cg__arg[]){ CG__ARG(A), CG__ARG(c->f),
                                               CG__ARG(um), CG__ARG(urows) },
                            4);
        if (status == CG_OK)
            status = c2c_rows(ctx, own, 1, m, batch, A, a);
        /* The result is in a again. */
        if (status == CG_OK)
            A = a;
    }
    if (status == CG_OK)
        status = launch(ctx, CG__K_FFT_CHIRP_POST, nout * batch,
                        (const cg__arg[]){ CG__ARG(A), CG__ARG(out),
                                           CG__ARG(c->w), CG__ARG(um),
                                           CG__ARG(unout), CG__ARG(urows),
                                           CG__ARG(mode_out),
                                           CG__ARG(post) }, 8);
out:
    cg_buffer_free(ba);
    cg_buffer_free(bA);
    return status;
}

/* The least length clFFT does (with own, clgrad's passes) from 2n - 1 up
 * (n >= 2). */
static size_t
padded_length(size_t n, int own)
{
    size_t m = 2 * n - 1;

    while (own ? !radix_length_ok(m) : !cg__fft_length_ok(m))
        m++;
    return m;
}

/* The path "radix": clgrad's own passes.  A complex length they do runs
 * them; a real kind of even length n = 2h whose h they do runs them on
 * the rows read as h complex values, with a pass of fft_r2c_post after
 * them or fft_c2r_pre before (kernels/fft.cl); any other length goes
 * through complex_rows on them (Bluestein's algorithm when they do not do
 * n either). */
static int
radix_rows(cg_context *ctx, cg__fft_kind kind, size_t n, size_t batch,
           float scale, cl_mem in, cl_mem out)
{
    int real = kind == CG__FFT_R2C || kind == CG__FFT_C2R;
    size_t h = n / 2;
    cg_buffer *bz = NULL, *bs = NULL;
    cl_mem z, s, pin, pout;
    fft_radix *r;
    cl_uint uh = (cl_uint)h;
    size_t global[2], local[2];
    cl_kernel k;
    int status;

    if (!real && radix_length_ok(n))
        return radix_c2c(ctx, kind == CG__FFT_C2C_INV, n, batch, 1, scale, in,
                         out);
    if (!real || n % 2 || !radix_length_ok(h))
        return complex_rows(ctx, 1, kind, n, radix_length_ok(n) ? n
                            : padded_length(n, 1), batch, scale, in, out);
    if (h > UINT32_MAX / 2)
        return cg__error(CG_EUNSUPPORTED, "%s: length %zu is too long for "
                         "the path radix here", kind_names[kind], n);
    status = radix_get(ctx, h, 1, &r);
    if (status)
        return status;
    /* R2C: in -> z through out; z -> out.  C2R: in -> z (or out when
     * there are no passes); z -> out through s. */
    if (r->npass > 0) {
        bz = cg__buffer_new(ctx, 2 * h * batch * sizeof(float));
        status = bz ? CG_OK : cg__last_status();
    }
    if (status == CG_OK && kind == CG__FFT_C2R && r->npass > 1) {
        bs = cg__buffer_new(ctx, 2 * h * batch * sizeof(float));
        status = bs ? CG_OK : cg__last_status();
    }
    if (status)
        goto out;
    z = bz ? cg__buffer_mem(bz) : kind == CG__FFT_C2R ? out : in;
    s = bs ? cg__buffer_mem(bs) : NULL;
    if (kind == CG__FFT_R2C && r->npass > 0)
        status = radix_passes(ctx, r, 0, batch, 1, 1.0f, in, z, out);
    pin = kind == CG__FFT_R2C ? z : in;
    pout = kind == CG__FFT_R2C ? out : z;
    if (status == CG_OK) {
        global[0] = (h + FFT_CH - 1) / FFT_CH;
        global[1] = batch;
        status = cg__kernel(ctx, kind == CG__FFT_R2C ? CG__K_FFT_R2C_POST
                                                     : CG__K_FFT_C2R_PRE, &k);
    }
    if (status == CG_OK)
        status = cg__set_args(k, (const cg__arg[]){
                                  CG__ARG(pin), CG__ARG(pout),
                                  CG__ARG(r->rw), CG__ARG(uh),
                                  CG__ARG(scale) }, 5);
    if (status == CG_OK) {
        fit_local(ctx, k, global, 2, local);
        status = cg__launch(ctx, k, 2, global, local, NULL);
    }
    if (status == CG_OK && kind == CG__FFT_C2R && r->npass > 0)
        status = radix_passes(ctx, r, 1, batch, 1, 1.0f, z, out, s);
out:
    cg_buffer_free(bz);
    cg_buffer_free(bs);
    return status;
}

static const char *const path_names[4] = { "clfft", "bluestein", "complex",
                                           "radix" };

int
cg__fft_choose(cg_context *ctx, cg__fft_kind kind, size_t n,
               cg__fft_path *out)
{
    const cg_tuning_entry *e;
    int v = 4, set, status, cls, real = kind >= CG__FFT_R2C;
    long p;

    status = cg__env_choice("CLGRAD_FFT_PATH", (const char *const[]){
                                "clfft", "bluestein", "complex", "radix",
                                "auto" }, 5, &v, &set);
    if (status)
        return status;
    cls = cg__fft_class(kind, n);
    e = cls >= 0 ? cg__tuning_find(ctx, "fft", cg__fft_class_name(cls))
                 : NULL;
    if (!set || v == 4)
        v = e && cg__tuning_param(e, "path", &p) && p >= 0 && p < 4
            ? (int)p : 0;
    /* The path radix does every length; on the others, a length clFFT
     * cannot do goes through Bluestein's algorithm whatever is chosen,
     * and the complex path of a complex kind is its clFFT transform;
     * length 1 never reaches here (spectral.c). */
    if (v != CG__FFT_RADIX || n < 2) {
        if (!cg__fft_length_ok(n))
            v = CG__FFT_BLUESTEIN;
        else if (v == CG__FFT_COMPLEX && !real)
            v = CG__FFT_CLFFT;
        else if (n < 2)
            v = CG__FFT_CLFFT;
    }
    *out = (cg__fft_path)v;
    return CG_OK;
}

const char *
cg_fft_path(cg_context *ctx, int real, int64_t n)
{
    cg__fft_path p;

    cg__error_clear();
    if (!ctx) {
        cg__error(CG_EINVAL, "context is NULL");
        return NULL;
    }
    if (n < 1 || n > ((int64_t)1 << 29)) {
        cg__error(CG_EINVAL, "fft: length %lld is not in 1 .. 2^29",
                  (long long)n);
        return NULL;
    }
    if (cg__fft_choose(ctx, real ? CG__FFT_R2C : CG__FFT_C2C_FWD,
                       (size_t)n, &p))
        return NULL;
    return path_names[p];
}

int
cg__fft_rows(cg_context *ctx, cg__fft_kind kind, size_t n, size_t batch,
             float scale, cl_mem in, cl_mem out)
{
    cg__fft_path p;
    int status = cg__fft_choose(ctx, kind, n, &p);

    if (status)
        return status;
    if (p == CG__FFT_RADIX)
        return radix_rows(ctx, kind, n, batch, scale, in, out);
    if (p == CG__FFT_BLUESTEIN)
        return complex_rows(ctx, 0, kind, n, padded_length(n, 0), batch,
                            scale, in, out);
    if (p == CG__FFT_COMPLEX)
        return complex_rows(ctx, 0, kind, n, n, batch, scale, in, out);
    return clfft_rows(ctx, kind, n, batch, scale, in, out);
}

int
cg__fft_columns_ok(cg_context *ctx, cg__fft_kind kind, size_t n)
{
    cg__fft_path p;

    return (kind == CG__FFT_C2C_FWD || kind == CG__FFT_C2C_INV) && n >= 2 &&
           radix_length_ok(n) && cg__fft_choose(ctx, kind, n, &p) == CG_OK &&
           p == CG__FFT_RADIX;
}

int
cg__fft_columns(cg_context *ctx, cg__fft_kind kind, size_t n, size_t outer,
                size_t inner, float scale, cl_mem in, cl_mem out)
{
    if (!cg__fft_columns_ok(ctx, kind, n))
        return cg__error(CG_EINVAL, "%s: no column transform of length %zu "
                         "on this path", kind_names[kind], n);
    return radix_c2c(ctx, kind == CG__FFT_C2C_INV, n, outer, inner, scale,
                     in, out);
}

int
cg__fft_set_plan_limit(cg_context *ctx, int max_plans)
{
    int status;

    if (max_plans < 0)
        return cg__error(CG_EINVAL, "cg__fft_set_plan_limit: max_plans %d "
                         "is negative", max_plans);
    if (!ctx->fft && (status = fft_attach(ctx)) != CG_OK)
        return status;
    ctx->fft->max_plans = max_plans ? max_plans : FFT_MAX_PLANS;
    plans_trim(ctx->fft);
    return CG_OK;
}

int
cg__fft_plan_stats(const cg_context *ctx, int *nplans, double *bake_seconds)
{
    const fft_plan *p;

    *nplans = 0;
    *bake_seconds = 0;
    if (!ctx->fft)
        return CG_OK;
    for (p = ctx->fft->plans; p; p = p->next)
        ++*nplans;
    *bake_seconds = ctx->fft->bake_seconds;
    return CG_OK;
}
