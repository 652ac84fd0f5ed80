/*
 * lib/cl/internal.h - OpenCL platforms, devices, contexts, programs, the
 * program binary cache and the buffer pool.  The layers above reach OpenCL
 * only through what is declared here.
 */
#ifndef CG_CL_INTERNAL_H
#define CG_CL_INTERNAL_H

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include "core/internal.h"

/* Turns an OpenCL status into a clgrad error and jumps to `fail`.  `what`
 * names the call for the message. */
#define CHECK_CL(call, what)                                                 \
    do {                                                                     \
        cl_int cg_rc_ = (call);                                              \
        if (cg_rc_ != CL_SUCCESS) {                                          \
            status = cg__cl_fail(cg_rc_, what);                              \
            goto fail;                                                       \
        }                                                                    \
    } while (0)

/* Records an OpenCL failure as the last error; returns the OpenCL code, or
 * CG_ENOMEM for the allocation failures. */
int cg__cl_fail(cl_int rc, const char *what);

/* A kernel object kept by its program, reused for every launch (a context
 * is used by one thread at a time, so setting arguments is safe). */
typedef struct cg__kernel_entry {
    struct cg__kernel_entry *next;
    char *name;
    cl_kernel kernel;
} cg__kernel_entry;

/* A compiled program: one per (source name, build options) per context. */
typedef struct cg__program {
    struct cg__program *next;
    cg__kernel_entry *kernels;
    char *name;             /* kernel file name without .cl */
    char *options;          /* full build options */
    cl_program program;
    int from_cache;         /* 1 if loaded from the binary cache */
} cg__program;

/* Size classes of the pool: 4 per power of two from 256 bytes up. */
#define CG__POOL_CLASSES 256

typedef struct cg__block {
    struct cg__block *next;
    cl_mem mem;
    size_t size;            /* the size class, in bytes */
} cg__block;

struct cg_buffer {
    cg_context *ctx;
    cg__block *block;
    size_t size;            /* requested */
    struct cg_buffer *prev, *next;  /* the context's live buffers */
};

/* Per-kernel device times (lib/cl/profile.c), with options.profiling. */
typedef struct cg__profile {
    struct {
        cl_event event;
        char name[64];
    } *pending;             /* launched, not yet read */
    int npending;
    cg_profile_entry *entries;  /* sums per kernel name */
    int nentries;
} cg__profile;

struct cg_context {
    cg_device_info info;
    cl_platform_id platform;
    cl_device_id device;
    cl_context context;
    cl_command_queue queue;
    int profiling;
    /* CLGRAD_POOL_EXACT=1: blocks of exactly the requested size, released
     * when freed, so that memory checkers (Oclgrind) see every overrun
     * and every buffer's history starts fresh. */
    int exact_blocks;
    cg__program *programs;
    cg__block *free_blocks[CG__POOL_CLASSES];
    cg_buffer *live;        /* buffers not yet freed */
    cg_memory_stats stats;
    char *build_defines;    /* -D options every program gets (tuning) */
    cg_tuning_entry *tuning;    /* the tuning entries in force (lib/tune) */
    int ntuning;
    cg__profile prof;       /* with profiling (lib/cl/profile.c) */
    uint64_t rng_seed;      /* the Philox generator: key and counter */
    uint64_t rng_offset;
};

/* Finds device `index` (flat numbering) and its platform. */
int cg__device_lookup(int index, cl_platform_id *platform,
                      cl_device_id *device);

/* Returns the program compiled from kernels/<name>.cl with `options`
 * appended to the defaults, building (or loading from the binary cache) it
 * the first time.  The program is owned by the context. */
int cg__program_get(cg_context *ctx, const char *name, const char *options,
                    cg__program **out);

/* Same, with the source given by the caller instead of kernels/<name>.cl;
 * `name` only labels it in messages and the cache. */
int cg__program_get_source(cg_context *ctx, const char *name,
                           const char *source, const char *options,
                           cg__program **out);

/* Creates kernel `kernel` from program `name` (see cg__program_get).  The
 * caller owns the returned cl_kernel and releases it with clReleaseKernel. */
int cg__kernel_create(cg_context *ctx, const char *name, const char *options,
                      const char *kernel, cl_kernel *out);

/* The context's cached kernel `kernel` of program `name`, built with the
 * -D options of the tuning entry in force for that file (entry kernel
 * "reduce" for kernels/reduce.cl, say), else none (borrowed: the context
 * owns it). */
int cg__kernel(cg_context *ctx, const char *name, const char *kernel,
               cl_kernel *out);

/* Parameter `param` of the tuning entry in force for kernel file `file`,
 * else dflt: the work-group size a host launch must match. */
long cg__tuned(const cg_context *ctx, const char *file, const char *param,
               long dflt);

/* Sets kernel arguments 0..n-1 from (size, pointer) pairs; use CG_ARG(x)
 * for each: cg__args(k, 2, CG_ARG(mem), CG_ARG(n)). */
#define CG_ARG(x) sizeof(x), (const void *)&(x)
int cg__args(cl_kernel k, int n, ...);

/* Enqueues a 1-D launch of n work-items (n > 0), padded up to a multiple
 * of the work-group size `local`; kernels guard with `if (i >= n)`. */
int cg__launch1d(cg_context *ctx, cl_kernel k, size_t n, size_t local);

/* Enqueues a 2-D launch for kernels that give each work-item a chunk of
 * ch consecutive elements of a row: ceil(len / ch) work-items per row,
 * padded up to the work-group size (the smallest power of two up to
 * `local` that covers a row, so short rows waste few work-items), by rows
 * rows.  Kernels guard with `if (chunk * ch >= len)`.  Nothing to do when
 * len or rows is 0. */
int cg__launch_chunks(cg_context *ctx, cl_kernel k, size_t len, size_t rows,
                      size_t ch, size_t local);

/* Enqueues a 1- to 3-dimensional launch and counts it.  A NULL local size
 * lets the implementation choose. */
int cg__launch(cg_context *ctx, cl_kernel kernel, cl_uint dims,
               const size_t *global, const size_t *local, cl_event *event);

/* The source of an embedded kernel file, or NULL. */
const char *cg__kernel_source_embedded(const char *name);

/* The kernel source to build: from $CLGRAD_KERNEL_DIR/<name>.cl if that is
 * set, else embedded.  The caller frees *out. */
int cg__kernel_source(const char *name, char **out);

/* The binary cache directory (without trailing slash) into `out`; returns 0
 * if the cache is off (CLGRAD_CACHE=0). */
int cg__cache_dir(char *out, size_t size);

/* The cl_mem behind a buffer. */
static inline cl_mem
cg__buffer_mem(const cg_buffer *buf)
{
    return buf->block->mem;
}

/* Releases every program of a context. */
void cg__programs_free(cg_context *ctx);

/* Releases every block of the pool, live or cached (context teardown). */
void cg__pool_destroy(cg_context *ctx);

/* With profiling: records a launch's event (taking it over) under the
 * kernel's function name, or under `name`.  Without: never called. */
int cg__profile_kernel(cg_context *ctx, cl_kernel kernel, cl_event event);
int cg__profile_event(cg_context *ctx, cl_event event, const char *name);
void cg__profile_free(cg_context *ctx);

/* Seconds on a monotonic clock. */
double cg__now(void);

/* The figures of cg_context_measure that need only this layer, those of
 * CG_MEASURE_BANDWIDTH and CG_MEASURE_LAUNCH in `which`, into *out; other
 * fields are left as they are.  lib/ops/measure.c adds the SGEMM. */
int cg__measure_device(cg_context *ctx, unsigned which,
                       cg_measurements *out);

#endif
