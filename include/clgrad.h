/* SPDX-License-Identifier: MIT */
/*
 * clgrad.h - the public interface of libclgrad, a deep-learning runtime on
 * OpenCL.  Read it top to bottom: status codes and errors, logging, devices,
 * contexts, device memory, measurements, tensors, autograd, ops and
 * custom ops.
 *
 * Conventions that hold for every function here:
 *  - A function returns a status (CG_OK, or a negative code) or a pointer
 *    (NULL on failure).  On failure cg_last_error() describes what went wrong
 *    and no state visible to the caller has changed.
 *  - The library never prints, never exits and never aborts.
 *  - A context and everything made from it is used by one thread at a time.
 *  - "The caller owns X" means the caller must release X with the matching
 *    _free function; everything else is borrowed and must not be freed.
 */
#ifndef CLGRAD_H
#define CLGRAD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------
 * Status codes
 *
 * OpenCL's own negative error codes (CL_OUT_OF_RESOURCES = -5, ...) pass
 * through unchanged; clgrad's codes are <= -2000, below the range OpenCL
 * extensions use (-1000 to about -1100: CL_PLATFORM_NOT_FOUND_KHR is -1001).
 * Every code has a name and a description in one list.
 * ------------------------------------------------------------------------ */
#define CG_STATUS_LIST(X)                                                  \
    X(CG_OK,           0,     "success")                                   \
    X(CG_EINVAL,       -2000, "invalid argument")                          \
    X(CG_ESHAPE,       -2001, "shape mismatch")                            \
    X(CG_EDTYPE,       -2002, "wrong data type")                           \
    X(CG_ENOMEM,       -2003, "out of device memory")                      \
    X(CG_EBUILD,       -2004, "kernel build failed")                       \
    X(CG_EIO,          -2005, "input/output error")                        \
    X(CG_EFORMAT,      -2006, "malformed file or data")                    \
    X(CG_EUNSUPPORTED, -2007, "not supported by this device or build")     \
    X(CG_ENODEVICE,    -2008, "no such OpenCL device")                     \
    X(CG_ENOPLATFORM,  -2009, "no OpenCL platform installed")              \
    X(CG_ECONTEXT,     -2010, "objects belong to different contexts")      \
    X(CG_ESTATE,       -2011, "operation not valid in the current state")  \
    X(CG_EHOSTMEM,     -2012, "out of host memory")

enum cg_status {
#define CG_STATUS_ENUM_(name, value, text) name = value,
    CG_STATUS_LIST(CG_STATUS_ENUM_)
#undef CG_STATUS_ENUM_
};

/* A short description of any status, clgrad's or OpenCL's ("CL_OUT_OF_
 * RESOURCES: out of resources").  Never NULL; unknown codes give a generic
 * text.  The string is static. */
const char *cg_strerror(int status);

/* The symbolic name of a status ("CG_ENOMEM", "CL_INVALID_VALUE"), static. */
const char *cg_status_name(int status);

/* The detail of the last failure on this thread: which argument, which
 * shapes, the OpenCL error name, a kernel's build log.  Valid until the next
 * clgrad call on this thread; never NULL (empty when nothing failed). */
const char *cg_last_error(void);

/* The library's version, "MAJOR.MINOR.PATCH". */
const char *cg_version(void);

/* ------------------------------------------------------------------------
 * Logging
 *
 * What the library has to say outside of a failure (a tuning file it
 * skipped, and why) goes to a log callback that the application sets,
 * never to a stream and never into cg_last_error() after a success.  With
 * no callback set, the default, such messages are dropped.
 * ------------------------------------------------------------------------ */
typedef enum cg_log_level {
    /* Something was skipped or fell back to a default; results are still
     * right.  Later levels may be added: treat unknown ones as notes. */
    CG_LOG_WARNING = 1,
    /* Worth knowing, changes nothing asked for: a tuning entry measured
     * on another device of the same vendor adapted to this one. */
    CG_LOG_NOTE = 2
} cg_log_level;

/* Receives one message: a single line without a trailing newline, valid
 * only during the call, and the `user` pointer given to cg_set_log.  It is
 * called on the thread that logs, in the middle of a clgrad call, so it
 * must not call clgrad itself. */
typedef void (*cg_log_fn)(cg_log_level level, const char *message,
                          void *user);

/* Sets the process-wide log callback and its user data; fn NULL turns
 * logging off.  Thread-safe: it may be called at any time from any thread
 * (but not from the callback).  Messages come from every thread that uses
 * clgrad, but clgrad calls the callback under a lock, one call at a time,
 * so the callback need not be thread-safe; once cg_set_log returns, the
 * previous callback is not called again.  Cannot fail. */
void cg_set_log(cg_log_fn fn, void *user);

/* Compilation progress.  The first use of a kernel on a device compiles
 * it (seconds on a CPU through PoCL), then the binary goes to the disk
 * cache (CLGRAD_CACHE_DIR, else $XDG_CACHE_HOME/clgrad, else
 * ~/.cache/clgrad; CLGRAD_CACHE=0: none) and later runs load it.  An
 * application that wants to tell its user why the first run waits sets a
 * progress callback; the library itself prints nothing.  One event per
 * program: a cache hit gives one event with done = 1 and from_cache = 1;
 * a compile gives one with done = 0 before it and one with done = 1
 * after it.  The strings are valid only during the call. */
typedef struct cg_compile_event {
    const char *device;      /* the device's name */
    const char *file;        /* the kernel file ("elementwise"), or a
                              * custom op's label */
    const char *kernel;      /* the one kernel of the program, or NULL
                              * when the program holds the whole file */
    const char *cache_dir;   /* where its binary is kept; NULL: no cache */
    int done;                /* 0: starting to compile; 1: ready */
    int from_cache;          /* with done: loaded from the cache */
    int failed;              /* with done: the build failed */
    double seconds;          /* with done: wall time of the build */
} cg_compile_event;

typedef void (*cg_compile_fn)(const cg_compile_event *event, void *user);

/* Sets the process-wide compilation progress callback and its user data;
 * fn NULL (the default) turns it off.  The same rules as cg_set_log:
 * thread-safe, calls never overlap, the callback must not call clgrad,
 * and after this returns the previous callback is not called again.
 * Cannot fail. */
void cg_set_compile_progress(cg_compile_fn fn, void *user);

/* ------------------------------------------------------------------------
 * Devices
 *
 * Devices are numbered 0..count-1 across all platforms in the order the ICD
 * loader reports them.  A selector string picks one:
 *   "P:D"          platform P, device D within it (both 0-based)
 *   "N"            device N of the flat numbering
 *   "gpu", "cpu", "accelerator"   the first device of that type
 *   anything else  the first device whose device or platform name contains
 *                  it, case-insensitively
 * NULL or "" means the CLGRAD_DEVICE environment variable, and if that is
 * unset, the first GPU, else the first device of any type.
 * ------------------------------------------------------------------------ */
typedef enum cg_device_type {
    CG_DEVICE_CPU = 1,
    CG_DEVICE_GPU = 2,
    CG_DEVICE_ACCELERATOR = 4,
    CG_DEVICE_OTHER = 8
} cg_device_type;

/* Floating-point capabilities (cg_device_info's fp32_config, fp64_config,
 * fp16_config): the bits of OpenCL's cl_device_fp_config, with the same
 * values.  0 means the device has no arithmetic of that type;
 * CG_FP_NOT_EXPOSED that the driver refused the query. */
#define CG_FP_DENORM              0x1u
#define CG_FP_INF_NAN             0x2u
#define CG_FP_ROUND_TO_NEAREST    0x4u
#define CG_FP_ROUND_TO_ZERO       0x8u
#define CG_FP_ROUND_TO_INF        0x10u
#define CG_FP_FMA                 0x20u
#define CG_FP_SOFT_FLOAT          0x40u
#define CG_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT 0x80u
#define CG_FP_NOT_EXPOSED         0x80000000u

typedef enum cg_local_mem_type {
    CG_LOCAL_MEM_NONE = 0,     /* no local memory */
    CG_LOCAL_MEM_DEDICATED = 1,/* on-chip (CL_LOCAL) */
    CG_LOCAL_MEM_GLOBAL = 2    /* carved from global memory (CL_GLOBAL) */
} cg_local_mem_type;

typedef enum cg_cache_type {
    CG_CACHE_NONE = 0,
    CG_CACHE_READ_ONLY = 1,
    CG_CACHE_READ_WRITE = 2
} cg_cache_type;

typedef struct cg_device_info {
    int index;               /* in the flat numbering */
    int platform_index;
    int device_index;        /* within its platform */
    char name[256];
    char vendor[256];
    char platform_name[256];
    char platform_vendor[256];
    char platform_version[256];
    char driver_version[256];
    char opencl_version[256];    /* CL_DEVICE_VERSION */
    char opencl_c_version[256];  /* CL_DEVICE_OPENCL_C_VERSION */
    cg_device_type type;
    unsigned compute_units;
    unsigned clock_mhz;
    size_t max_work_group_size;
    unsigned max_work_item_dims;
    size_t max_work_item_sizes[3];
    uint64_t global_mem_size;     /* bytes */
    uint64_t global_mem_cache_size;
    uint64_t local_mem_size;
    uint64_t constant_mem_size;
    uint64_t max_alloc_size;
    unsigned vector_width_char, vector_width_short, vector_width_int,
             vector_width_long, vector_width_float, vector_width_double,
             vector_width_half;   /* preferred widths */
    int fp16;                /* cl_khr_fp16 arithmetic */
    int fp64;                /* cl_khr_fp64 or a double fp config */
    int image_support;
    int unified_memory;      /* CL_DEVICE_HOST_UNIFIED_MEMORY */
    char extensions[8192];   /* space-separated, truncated if longer */
    /* Below extensions, so that the fields above keep their offsets. */
    unsigned native_width_char, native_width_short, native_width_int,
             native_width_long, native_width_float, native_width_double,
             native_width_half;   /* native ISA widths; 0: no such type */
    unsigned fp32_config, fp64_config, fp16_config;   /* CG_FP_* bits */
    cg_local_mem_type local_mem_type;
    cg_cache_type global_mem_cache_type;
    unsigned global_mem_cacheline_size;   /* bytes */
    uint64_t timer_resolution_ns;  /* of profiling event timestamps */
    int queue_out_of_order;  /* the host queue may run out of order */
    int queue_profiling;     /* the host queue can time events */
    int sub_groups;          /* cl_khr_subgroups, or OpenCL >= 2.1 with
                              * CL_DEVICE_MAX_NUM_SUB_GROUPS > 0 */
    unsigned max_sub_groups; /* per work-group; 0 when not exposed */
    int has_uuid;            /* cl_khr_device_uuid reported and answered */
    unsigned char uuid[16];
    int has_pci;             /* cl_khr_pci_bus_info (or
                              * cl_nv_device_attribute_query) answered */
    unsigned pci_domain, pci_bus, pci_device, pci_function;
} cg_device_info;

/* The number of OpenCL devices on all platforms.  With no platform at all
 * this returns CG_ENOPLATFORM and sets *count to 0. */
int cg_device_count(int *count);

/* Fills *info for device `index` of the flat numbering. */
int cg_device_get_info(int index, cg_device_info *info);

/* Resolves a selector (see above) to a flat index.  A selector that matches
 * nothing gives CG_ENODEVICE with a message that lists every device. */
int cg_device_select(const char *selector, int *index);

/* The name of a device type: "CPU", "GPU", "accelerator", "other". */
const char *cg_device_type_name(cg_device_type type);

/* ------------------------------------------------------------------------
 * Contexts
 *
 * A context owns one device, one in-order command queue, the programs
 * compiled for that device and a pool of device memory.  The contexts of a
 * process on the same device share one OpenCL context (each holds a
 * reference), so that CLBlast, which keeps the programs it builds per
 * OpenCL context for the life of the process, builds them once for all of
 * them; CLBlast's cache is emptied when the last context that used it is
 * freed.  Work is enqueued without waiting; only reads to the host and
 * cg_context_finish synchronise.
 * ------------------------------------------------------------------------ */
typedef struct cg_context cg_context;

typedef struct cg_context_options {
    const char *device;   /* a selector, or NULL for the default */
    int profiling;        /* nonzero: the queue records event timings */
    int no_tuning;        /* nonzero: built-in kernel parameters only, no
                           * tuning database (see Tuning) */
} cg_context_options;

/* Creates a context on the device picked by `selector` (NULL: default).
 * The caller owns the context; free it with cg_context_free. */
cg_context *cg_context_new(const char *selector);

/* Same, with options; opts may be NULL. */
cg_context *cg_context_new_with(const cg_context_options *opts);

/* Waits for all queued work, then releases the context, its programs and its
 * memory pool.  Buffers still allocated from it are released too and must
 * not be used afterwards.  NULL is ignored. */
void cg_context_free(cg_context *ctx);

/* Copies the context's device description into *info. */
int cg_context_device_info(const cg_context *ctx, cg_device_info *info);

/* CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE of a clgrad kernel (the
 * copy kernel of the measurements) on the context's device: work-group
 * sizes that are multiples of it fill the device's SIMD lanes.  A kernel
 * property, so it needs a context; the first call may build that kernel. */
int cg_context_work_group_multiple(cg_context *ctx, size_t *multiple);

/* Waits until every command enqueued on the context has completed. */
int cg_context_finish(cg_context *ctx);

/* ------------------------------------------------------------------------
 * Device memory
 *
 * Buffers come from a per-context caching allocator: a freed buffer's block
 * goes back to the pool and is reused by later allocations of the same size
 * class.  Because a context has one in-order queue, freeing a buffer that
 * queued kernels still use is safe: any later user is queued after them.
 * With CLGRAD_POOL_EXACT=1 in the environment when a context is made, its
 * buffers have exactly the requested size and go back to the device when
 * freed: slower, but a memory checker such as Oclgrind then sees an
 * access past the end of any buffer.
 * ------------------------------------------------------------------------ */
typedef struct cg_buffer cg_buffer;

/* Allocates `bytes` (> 0) of device memory.  If the device refuses, the
 * pool's cache (if it holds anything) is released and the allocation
 * retried once; if that fails
 * too the result is NULL with CG_ENOMEM and a message giving the requested
 * and the available sizes.  The context stays usable.  The caller owns the
 * buffer; free it with cg_buffer_free. */
cg_buffer *cg_buffer_new(cg_context *ctx, size_t bytes);

/* Returns the buffer's block to its context's pool.  NULL is ignored. */
void cg_buffer_free(cg_buffer *buf);

/* The size requested when the buffer was made. */
size_t cg_buffer_size(const cg_buffer *buf);

/* Copies host memory into the buffer at byte `offset`.  Returns when the
 * source may be reused. */
int cg_buffer_write(cg_buffer *buf, size_t offset, const void *src,
                    size_t bytes);

/* Copies from the buffer into host memory, waiting for queued work that
 * writes it. */
int cg_buffer_read(const cg_buffer *buf, size_t offset, void *dst,
                   size_t bytes);

typedef struct cg_memory_stats {
    uint64_t bytes_in_use;     /* handed out to live buffers (block sizes) */
    uint64_t peak_bytes;       /* highest bytes_in_use so far */
    uint64_t bytes_cached;     /* held in the pool for reuse */
    uint64_t allocations;      /* cg_buffer_new calls that succeeded */
    uint64_t device_allocations;   /* of those, ones that asked the device */
    uint64_t reuses;           /* of those, ones served from the pool */
    uint64_t kernels_enqueued; /* kernel launches on the context's queue */
} cg_memory_stats;

/* Per-kernel device times, for a context made with options.profiling:
 * every launch records an OpenCL event, and these sum them by kernel
 * function name (CLBlast's GEMMs as "clblast.sgemm" and
 * "clblast.sgemm_batched", timed by the event CLBlast returns, which
 * covers its last kernel only: an indirect GEMM's padding and transposes
 * before it are not counted).  Profiling costs host time per launch; the
 * times are device times (CL_PROFILING_COMMAND_START to END). */
typedef struct cg_profile_entry {
    char name[64];
    uint64_t launches;
    double total_us;
    double max_us;
} cg_profile_entry;

/* Waits for the queued work, then gives the kernels timed since the
 * context was made or last reset, largest total first: *count of them,
 * the first `max` into out.  CG_EINVAL without options.profiling. */
int cg_context_profile(cg_context *ctx, cg_profile_entry *out, int max,
                       int *count);

/* Forgets the times recorded so far. */
int cg_context_profile_reset(cg_context *ctx);

/* Reads the context's memory and launch statistics. */
int cg_context_stats(const cg_context *ctx, cg_memory_stats *stats);

/* Returns every cached (free) block to the device. */
int cg_context_release_cache(cg_context *ctx);

/* ------------------------------------------------------------------------
 * Measurements
 *
 * The same measurements clgrad-info prints, for benchmarks and the tuner.
 * Each takes well under a second on a CPU device once kernels are cached.
 * ------------------------------------------------------------------------ */
typedef struct cg_measurements {
    double h2d_gbps;           /* host to device, 64 MiB, GB/s (1e9 B/s) */
    double d2h_gbps;           /* device to host */
    double copy_gbps;          /* device copy kernel, bytes read + written */
    double launch_latency_us;  /* one empty kernel, enqueue + wait */
    double launch_queued_us;   /* per launch when 1000 are queued, one wait */
    double sgemm_gflops;       /* matmul's SGEMM, 1024 x 1024 x 1024 */
    double fp32_fma_gflops;    /* chains of float FMAs, 2 FLOP each */
} cg_measurements;

enum {
    CG_MEASURE_BANDWIDTH = 1,
    CG_MEASURE_LAUNCH = 2,
    CG_MEASURE_SGEMM = 4,
    CG_MEASURE_FMA = 8,
    CG_MEASURE_ALL = 15
};

/* Runs the measurements selected by `which` (CG_MEASURE_*) on the context's
 * device; fields not measured are set to 0. */
int cg_context_measure(cg_context *ctx, unsigned which, cg_measurements *out);

/* The figures of cg_measurements, to ask how each is measured. */
typedef enum cg_figure {
    CG_FIGURE_H2D, CG_FIGURE_D2H, CG_FIGURE_COPY, CG_FIGURE_LAUNCH_LATENCY,
    CG_FIGURE_LAUNCH_QUEUED, CG_FIGURE_SGEMM, CG_FIGURE_FP32_FMA,
    CG_FIGURE_COUNT
} cg_figure;

/* One sentence saying how cg_context_measure measures `figure`: what is
 * timed, the sizes, what is counted, the repetitions.  A static string;
 * "" for an unknown figure. */
const char *cg_measure_method(cg_figure figure);

/* ------------------------------------------------------------------------
 * Tensors
 *
 * A tensor is a view (shape, strides in elements, offset) of a reference-
 * counted storage in device memory.  Up to CG_MAX_DIMS dimensions; shapes
 * are int64_t.  Views (reshape of contiguous data, transpose, permute,
 * narrow, expand, squeeze, unsqueeze) share storage and copy nothing.
 *
 * Ownership: every function that returns a cg_tensor * returns a new
 * reference the caller owns and must release with cg_tensor_free, also
 * when it is a view.  Arguments are borrowed: an op never takes over the
 * caller's reference.  Storage lives while any tensor (or a graph node
 * saving it) refers to it.
 *
 * Ops enqueue work on the context's queue and return at once; only
 * cg_tensor_to_host (and cg_tensor_item) wait.  On error an op returns
 * NULL, sets cg_last_error() and changes no tensor.
 * ------------------------------------------------------------------------ */
#define CG_MAX_DIMS 8

typedef enum cg_dtype {
    CG_F32 = 0,    /* float32: all arithmetic */
    CG_I32 = 1,    /* int32: class indices, embedding indices, masks */
    CG_I64 = 2,    /* int64: only in checkpoints (PyTorch writes batch
                    * norm's num_batches_tracked so); no tensor has it */
    CG_F16 = 3,    /* IEEE binary16 (torch.float16), storage only */
    CG_BF16 = 4    /* bfloat16, the top half of a float32
                    * (torch.bfloat16), storage only */
} cg_dtype;

/* 16-bit storage (CG_F16, CG_BF16): such tensors can be created, written
 * and read back as raw 16-bit patterns (uint16_t, host byte order), viewed
 * (reshape, flatten, transpose, permute, narrow, expand, squeeze,
 * unsqueeze, contiguous), split, joined (concat, stack: copies), saved in
 * and loaded from checkpoints (safetensors "F16", "BF16"), and cast to and
 * from float32 with cg_to_dtype; read and written as float32 values
 * (cg_tensor_from_host_f32, cg_tensor_to_host_f32) and filled
 * (cg_full_dtype); multiplied (cg_matmul, cg_matmul_t, cg_matmul_out,
 * the linear layer: float32 sums).  The elementwise ops (cg_add ...
 * cg_minimum, cg_where, cg_add_scalar ... cg_gelu) and cg_dropout
 * compute on them in float32
 * and round the result (and each gradient) once to the input's dtype;
 * see "Ops" for mixed dtypes.  The reductions (cg_sum, cg_mean, cg_max,
 * cg_var, cg_argmax, cg_argmin, cg_max_dim, cg_min_dim), cg_softmax,
 * cg_log_softmax, the losses (cg_cross_entropy, cg_nll_loss, cg_mse_loss,
 * cg_bce_with_logits), cg_layer_norm and cg_batch_norm compute on them in
 * float32 (sums accumulate in float32) and return, and pass back
 * gradients, in the input's dtype, rounded once; operands that must share
 * the input's dtype and do not give CG_EDTYPE naming both.  Embedding,
 * index_select, the convolutions, the pools and the recurrent layers
 * (cg_rnn_forward) take them too (see each).
 * Every other op given one fails with CG_EDTYPE naming the dtype.  A
 * 16-bit leaf may require grad (a parameter in half precision,
 * cg_module_to_dtype), and one made by cg_to_dtype from a float32 tensor
 * carries the graph through those views and joins to a later cg_to_dtype
 * back to float32; gradients are in the tensor's dtype, each sum of two
 * added in float32 and rounded once, as PyTorch's.  The optimizers and
 * gradient clipping take 16-bit parameters and gradients (float32 master
 * weights, see Optimizers), as do the grad scaler's functions. */

typedef struct cg_tensor cg_tensor;

/* A new tensor; its contents are undefined (cg_zeros for zeros).  ndim may
 * be 0 (a scalar: one element).  Every dimension must be >= 1. */
cg_tensor *cg_tensor_new(cg_context *ctx, cg_dtype dtype, int ndim,
                         const int64_t *shape);

/* A new contiguous tensor holding a copy of `data` (numel elements of
 * dtype, row-major). */
cg_tensor *cg_tensor_from_host(cg_context *ctx, cg_dtype dtype, int ndim,
                               const int64_t *shape, const void *data);
/* The same from numel float32 values for a tensor of floating `dtype`
 * (CG_F32, CG_F16, CG_BF16): each value rounded to dtype bit for bit as
 * cg_to_dtype rounds (the values are uploaded as float32 and cast on the
 * device).  The caller owns the tensor (a leaf outside any graph).  NULL
 * on error: CG_EDTYPE for another dtype, else as cg_tensor_from_host. */
cg_tensor *cg_tensor_from_host_f32(cg_context *ctx, cg_dtype dtype,
                                   int ndim, const int64_t *shape,
                                   const float *data);

/* float32 tensors of zeros, ones, `value`. */
cg_tensor *cg_zeros(cg_context *ctx, int ndim, const int64_t *shape);
cg_tensor *cg_ones(cg_context *ctx, int ndim, const int64_t *shape);
cg_tensor *cg_full(cg_context *ctx, int ndim, const int64_t *shape,
                   float value);
/* A tensor of floating `dtype` (CG_F32, CG_F16, CG_BF16) filled with
 * value rounded to dtype as cg_to_dtype rounds: cg_full_dtype(ctx,
 * CG_F16, ndim, shape, 0) is a float16 cg_zeros.  The caller owns it;
 * NULL on error (CG_EDTYPE for another dtype, else as cg_tensor_new). */
cg_tensor *cg_full_dtype(cg_context *ctx, cg_dtype dtype, int ndim,
                         const int64_t *shape, float value);
/* 1-D float32 [start, start + step, ...) up to but excluding `stop`. */
cg_tensor *cg_arange(cg_context *ctx, double start, double stop,
                     double step);

/* Random numbers from the context's counter-based generator (Philox4x32-
 * 10): element i of the n-th number drawn depends only on the seed and the
 * generator's offset, never on the launch shape.  Each call advances the
 * offset. */
int cg_manual_seed(cg_context *ctx, uint64_t seed);
/* The generator's state, for checkpoints. */
int cg_generator_state(const cg_context *ctx, uint64_t *seed,
                       uint64_t *offset);
int cg_generator_set_state(cg_context *ctx, uint64_t seed, uint64_t offset);
cg_tensor *cg_rand_uniform(cg_context *ctx, int ndim, const int64_t *shape,
                           float low, float high);
cg_tensor *cg_rand_normal(cg_context *ctx, int ndim, const int64_t *shape,
                          float mean, float std);

/* Host random numbers, SplitMix64: the next 64-bit number of the stream
 * whose whole state is *state (any value is a valid seed; save it to
 * resume the stream), and a uniform double in [0, 1) made from its top 53
 * bits.  The dataset shuffles use this generator.  They cannot fail; a
 * NULL state gives 0 and is left alone. */
uint64_t cg_splitmix64_next(uint64_t *state);
double cg_splitmix64_uniform(uint64_t *state);

/* Adds a reference (returns t). */
cg_tensor *cg_tensor_ref(cg_tensor *t);
/* Drops a reference; the last one frees the tensor.  NULL is ignored. */
void cg_tensor_free(cg_tensor *t);

cg_context *cg_tensor_context(const cg_tensor *t);
cg_dtype cg_tensor_dtype(const cg_tensor *t);
int cg_tensor_ndim(const cg_tensor *t);
/* Size of dimension `dim` (negative counts from the end); -1 if invalid. */
int64_t cg_tensor_dim(const cg_tensor *t, int dim);
/* Copies the shape into shape[0..ndim-1]. */
int cg_tensor_shape(const cg_tensor *t, int64_t *shape);
int64_t cg_tensor_numel(const cg_tensor *t);
int cg_tensor_is_contiguous(const cg_tensor *t);

/* Copies the elements, in row-major order of the tensor's shape, to host
 * memory (bytes must be numel * element size).  Waits for queued work. */
int cg_tensor_to_host(const cg_tensor *t, void *dst, size_t bytes);
/* The same as float32 values for a tensor of any floating dtype (n must
 * be its numel): exact, 16-bit values converted as cg_to_dtype converts
 * them to float32 (any layout; waits for queued work).  CG_EDTYPE for an
 * int32 tensor, CG_EINVAL for a NULL argument or another n; dst is then
 * untouched. */
int cg_tensor_to_host_f32(const cg_tensor *t, float *dst, size_t n);
/* The value of a one-element float32 tensor. */
int cg_tensor_item(const cg_tensor *t, float *value);
/* Overwrites a contiguous tensor's elements from host memory. */
int cg_tensor_write(cg_tensor *t, const void *src, size_t bytes);

/* Views: they share storage with t. */
/* Reshape; a view when t is contiguous, else a copy.  One entry of shape
 * may be -1 (inferred). */
cg_tensor *cg_reshape(cg_tensor *t, int ndim, const int64_t *shape);
/* Dimensions start_dim .. end_dim (negative counts from the end) merged
 * into one, as torch.flatten: a view when t is contiguous (else a copy,
 * as cg_reshape).  A scalar becomes [1].  Dimensions out of range or
 * end_dim before start_dim give CG_EINVAL. */
cg_tensor *cg_flatten(cg_tensor *t, int start_dim, int end_dim);
cg_tensor *cg_transpose(cg_tensor *t, int dim0, int dim1);
cg_tensor *cg_permute(cg_tensor *t, const int *perm);
/* Elements start .. start+length-1 of dimension dim. */
cg_tensor *cg_narrow(cg_tensor *t, int dim, int64_t start, int64_t length);
/* Broadcast to `shape` (NumPy rules; size-1 dimensions stretch, new
 * leading dimensions are added); -1 keeps a dimension. */
cg_tensor *cg_expand(cg_tensor *t, int ndim, const int64_t *shape);
/* Removes dimension dim, which must have size 1. */
cg_tensor *cg_squeeze(cg_tensor *t, int dim);
cg_tensor *cg_unsqueeze(cg_tensor *t, int dim);
/* A contiguous tensor with t's elements (a new reference to t itself if
 * it is already contiguous). */
cg_tensor *cg_contiguous(cg_tensor *t);

/* x converted to `dtype`, a new contiguous tensor (x's own reference, as
 * cg_tensor_ref, when x already has that dtype).  Between float32 and
 * CG_F16 / CG_BF16 either way, bit for bit as PyTorch's .to(dtype): to
 * float16 rounds to nearest even (overflow gives inf, small values
 * subnormals or zero), to bfloat16 rounds the top 16 bits to nearest even
 * and makes every NaN the quiet NaN 0x7FC0 (with x's sign dropped, as
 * c10::BFloat16 does); to float32 is exact.  Differentiable: the gradient
 * reaching x is the output's gradient cast back to x's dtype.  Other pairs
 * (int32, F16 <-> BF16) give CG_EDTYPE naming both. */
cg_tensor *cg_to_dtype(cg_tensor *x, cg_dtype dtype);

/* Automatic mixed precision, as torch.autocast.  Between
 * cg_autocast_begin(ctx, CG_BF16 or CG_F16) and cg_autocast_end(ctx), ops
 * on ctx's tensors cast their floating arguments at entry:
 *   - the products run in the region's dtype: cg_matmul, cg_matmul_t,
 *     the linear layer, the convolutions and the recurrent layers (their
 *     outputs are 16-bit, accumulated in float32);
 *   - the float32 list runs in float32, its 16-bit arguments cast up:
 *     cg_softmax, cg_log_softmax, the losses (cg_cross_entropy,
 *     cg_nll_loss, cg_mse_loss, cg_bce_with_logits), cg_layer_norm,
 *     cg_batch_norm, cg_sum, cg_mean, cg_var;
 *   - every other op runs in its arguments' dtype (binary elementwise ops
 *     promote mixed dtypes to the wider one, as PyTorch).
 * The casts are recorded ops, so gradients reach float32 parameters in
 * float32.  A float32 leaf that requires grad (a parameter) is cast once
 * per dtype for the whole outermost region and the cast reused (PyTorch's
 * autocast cache), unless a backward pass has released it; open the
 * region around the forward pass and the loss, and call cg_backward after
 * cg_autocast_end.  Regions nest (at most 16); CG_F32 opens one with
 * autocast off (torch.autocast(enabled=False)).  The state belongs to the
 * context.  begin: CG_EDTYPE for another dtype, CG_EINVAL when 16 are
 * open; end: CG_EINVAL when none is (on success it leaves cg_last_error
 * alone, so a region can be closed after a failed op without losing its
 * message). */
int cg_autocast_begin(cg_context *ctx, cg_dtype dtype);
int cg_autocast_end(cg_context *ctx);
/* The innermost open region's dtype; CG_F32 when none is open. */
cg_dtype cg_autocast_dtype(const cg_context *ctx);

/* ------------------------------------------------------------------------
 * Autograd
 *
 * Define-by-run: an op on tensors of which one requires grad records a
 * node; cg_backward walks the nodes in reverse topological order and adds
 * gradients into the leaves' grad tensors (accumulating across calls until
 * cg_tensor_zero_grad).  Unless retain_graph is set, the saved tensors of
 * each node are released as soon as the backward has run that node (as
 * PyTorch frees them), so a deep graph's activations go as the walk passes
 * them; a backward that fails part-way has then released the nodes it ran,
 * and a second backward through them says so (CG_ESTATE).
 * ------------------------------------------------------------------------ */
/* Marks a leaf float32, float16 or bfloat16 tensor as requiring grad (or
 * not); another dtype gives CG_EDTYPE.  A 16-bit leaf's gradient is 16-bit
 * too. */
int cg_tensor_set_requires_grad(cg_tensor *t, int requires_grad);
int cg_tensor_requires_grad(const cg_tensor *t);
/* Whether t was made by the user (not by a recorded op). */
int cg_tensor_is_leaf(const cg_tensor *t);
/* The gradient accumulated in a leaf, or NULL if none yet.  Borrowed: it
 * stays owned by t (take cg_tensor_ref to keep it).  A later backward
 * adds into this tensor in place (a matrix product's gradient by the
 * product itself, beta 1, while no one else holds a reference to it). */
cg_tensor *cg_tensor_grad(const cg_tensor *t);
/* Drops the leaf's gradient (the next backward starts from zero). */
int cg_tensor_zero_grad(cg_tensor *t);
/* A tensor sharing t's storage, outside any graph, not requiring grad. */
cg_tensor *cg_detach(cg_tensor *t);

/* Backpropagates from `root`.  grad_output may be NULL only for a one-
 * element root (the gradient is then 1).  A contiguous grad_output is
 * read where it is (a strided one through a copy) and never written: the
 * caller keeps it, and no leaf's grad shares its memory.  retain_graph
 * nonzero keeps the saved tensors so backward can run again through the
 * same graph. */
int cg_backward(cg_tensor *root, cg_tensor *grad_output, int retain_graph);

/* Higher-order gradients.
 *
 * With CG_GRAD_CREATE_GRAPH a backward records its own graph: each node's
 * gradient is computed by a composite of the library's differentiable ops
 * (grad mode on), so the gradients it produces require grad (when any
 * tensor they depend on does) and can be differentiated again, any number
 * of times.  The ordinary kernel-level backward is untouched and stays the
 * path of cg_backward and of passes without the flag: they launch exactly
 * what they did.  The composite forms are slower (several launches per
 * node where the kernel-level backward takes one).  In no-grad mode
 * nothing is recorded, so the gradients come out without a graph.
 *
 * Ops with a double backward (create_graph) - float32 is tested; 16-bit
 * tensors take the same composites in their dtype:
 *   elementwise, with broadcasting: add, sub, mul, div, maximum, minimum,
 *     where, add_scalar, mul_scalar, neg, pow_scalar, exp, log, sqrt,
 *     tanh, sigmoid, gelu, abs, relu, leaky_relu, clamp, cg_to_dtype,
 *     dropout (the same mask); the piecewise-linear ones (abs, relu,
 *     leaky_relu, clamp, maximum, minimum, max) have a zero second
 *     derivative, as in PyTorch;
 *   reductions: sum, mean, var, max (cg_max, so the values of cg_max_dim
 *     and cg_min_dim);
 *   cg_matmul, cg_matmul_t, cg_matmul_out (batched and broadcast too) and
 *     the linear layer's op (cg_linear_forward), also fused with relu,
 *     tanh or sigmoid as containers run it (linear_relu, linear_tanh,
 *     linear_sigmoid);
 *   views and joins: reshape, flatten, squeeze, unsqueeze, contiguous,
 *     permute, transpose, expand, narrow (so cg_split), concat (so
 *     cg_stack);
 *   gathers: cg_embedding, cg_index_select (their gradient, a scatter-add,
 *     is recorded as a node "gather_grad" whose backward gathers again;
 *     gelu's derivative likewise as "gelu_grad");
 *   softmax, log_softmax, layer_norm (with or without weight and bias),
 *     batch_norm (training: the batch statistics differentiated too;
 *     evaluation: the running statistics constants);
 *   pools: max_pool2d, avg_pool2d, adaptive_avg_pool2d (their gradient,
 *     linear in g, is recorded as a node "<pool>_grad" whose backward is
 *     the pool again, with the forward's argmax for max pooling, whose
 *     second derivative in x is zero as in PyTorch);
 *   convolutions: conv1d, conv2d, conv_transpose2d (the input gradient is
 *     recorded as the other kind of convolution with the same weight,
 *     the weight gradient as a node "conv_wgrad" whose backward is the
 *     two convolutions again, the bias gradient as a sum);
 *   losses: cross_entropy (ignore_index and label smoothing included),
 *     nll_loss, mse_loss, bce_with_logits;
 *   the recurrent layers (cg_rnn_forward: RNN tanh and relu, LSTM, GRU;
 *     layers, directions, initial states): their fused step kernels have
 *     no backward of their own, so a create_graph backward through a
 *     layer's node ("rnn_layer") takes a fallback - the layer's forward
 *     recomputed from the node's inputs with recorded ops, then
 *     backpropagation through time with recorded ops (tens of launches
 *     per time step where the kernels take one; only for create_graph).
 *   Fourier transforms: cg_fft, cg_ifft, cg_rfft, cg_irfft and the 2-D
 *     ones made of them (their gradient, the adjoint transform, is
 *     recorded as "fft_adjoint" ...); the complex helpers cg_complex_mul
 *     and cg_complex_conj (made of the ops above).
 * Not yet (a create_graph backward reaching one fails with CG_EUNSUPPORTED
 * naming the op, before any gradient is computed, and changes nothing):
 * pow with a tensor exponent, custom ops, and a recurrent layer run
 * with variable lengths (its "rnn_layer" node has no composite form
 * yet).  The losses above run fused kernels too, but each has its
 * composite form; the optimizers' fused updates record no graph and take
 * no part in differentiation. */
#define CG_GRAD_RETAIN_GRAPH 1   /* keep the saved tensors (retain_graph) */
#define CG_GRAD_CREATE_GRAPH 2   /* record the backward; implies retain */
/* The most inputs cg_grad and cg_hvp take in one call. */
#define CG_GRAD_MAX_INPUTS 256

/* cg_backward with flags (CG_GRAD_*; another bit is CG_EINVAL).  With
 * CG_GRAD_CREATE_GRAPH the gradients added into the leaves' grad are part
 * of a graph (seeded by grad_output itself, so they are differentiable in
 * it too): a leaf's grad then holds that graph, and with it references to
 * the leaf itself (PyTorch's reference cycle between a parameter and its
 * gradient): call cg_tensor_zero_grad before freeing such a leaf, or its
 * memory is never released.  A later backward adds into a grad that has a
 * graph out of place (a new tensor), never into it.  cg_grad avoids the
 * cycle altogether and is the better call for gradient penalties. */
int cg_backward_ex(cg_tensor *root, cg_tensor *grad_output, int flags);

/* The gradients of `output` with respect to inputs[0..ninputs-1] (1 to
 * CG_GRAD_MAX_INPUTS tensors that require grad, leaves or not; else
 * CG_EINVAL / CG_ESTATE), as torch.autograd.grad(output, inputs,
 * grad_output, create_graph) with one output: returned in grads[j], new
 * tensors the caller owns (free each with cg_tensor_free), instead of
 * added into any leaf's grad - no leaf's grad changes.  grad_output as
 * cg_backward's (NULL for a one-element output).  An input the output does
 * not depend on gets zeros (torch's materialize_grads); an input listed
 * twice gets the same gradient twice (two references to one tensor).  Only
 * the part of the graph that leads to the inputs is run.  flags: CG_GRAD_*
 * as cg_backward_ex; with CG_GRAD_CREATE_GRAPH the gradients are recorded
 * and can be differentiated again (gradient penalties, Hessian-vector
 * products), and the graph is kept.  Without it or CG_GRAD_RETAIN_GRAPH
 * the graph's saved tensors are released as by cg_backward.  On error no
 * grads[j] is set and no leaf changes. */
int cg_grad(cg_tensor *output, cg_tensor *grad_output, int ninputs,
            cg_tensor *const *inputs, cg_tensor **grads, int flags);

/* A scalar function of n tensors for cg_hvp: returns a new one-element
 * tensor (the caller of f owns it) computed from inputs with recorded ops,
 * or NULL with cg_last_error set.  `user` is cg_hvp's. */
typedef cg_tensor *(*cg_scalar_fn)(int n, cg_tensor *const *inputs,
                                   void *user);

/* The Hessian-vector product H v of f at inputs (as
 * torch.autograd.functional.hvp), by reverse over reverse: the gradient of
 * <grad f, v> = sum_j <df/dinputs[j], v[j]>, computed with two cg_grad
 * passes (the first with create_graph), so every op f uses must have a
 * double backward (see above; else CG_EUNSUPPORTED naming it).  inputs:
 * n tensors (1 to CG_GRAD_MAX_INPUTS) that require grad, typically a
 * model's parameters (f may use them through the model rather than its
 * arguments); their grad is not touched.  v[j] has inputs[j]'s shape and
 * dtype (CG_ESHAPE otherwise).  hv[0..n-1] receive new tensors of the
 * inputs' shapes, owned by the caller; value, if not NULL, receives f's
 * value (a new tensor outside any graph, owned by the caller).  A
 * function that does not depend on an input, or only linearly, gives
 * zeros.  Call it with grad mode on (outside cg_no_grad_enter).  On error
 * (f failing passes its status on) nothing is set. */
int cg_hvp(cg_scalar_fn f, void *user, int n, cg_tensor *const *inputs,
           cg_tensor *const *v, cg_tensor **hv, cg_tensor **value);

/* cg_hvp by forward over reverse (JAX's jvp of grad): the same H v, with
 * the same arguments, ownership and errors, computed as the tangent of
 * grad f when inputs[j] carry the tangents v[j]: a dual level is opened
 * on the inputs' context (CG_ESTATE if one is already open), the inputs
 * themselves get the tangents for the call (so f may reach them through
 * a model), one cg_grad with create_graph runs - whose composite
 * backward is made of ops with JVP rules, so the gradients get tangents -
 * and the level is closed (every tangent dropped) before returning.  One
 * backward pass instead of cg_hvp's two, each op of it also computing a
 * tangent; every op f uses needs a double backward and every op of the
 * composites a JVP rule (both hold for the ops listed with a double
 * backward above; else CG_EUNSUPPORTED naming the op).  The inputs must
 * be distinct tensors (CG_EINVAL), of one context (CG_ECONTEXT), without
 * tangents. */
int cg_hvp_fwd(cg_scalar_fn f, void *user, int n, cg_tensor *const *inputs,
               cg_tensor *const *v, cg_tensor **hv, cg_tensor **value);

/* No-grad mode for this thread, nestable: ops record nothing while it is
 * entered. */
void cg_no_grad_enter(void);
void cg_no_grad_leave(void);
int cg_is_grad_enabled(void);

/* The graph behind t as Graphviz DOT text (op names, shapes, leaves that
 * require grad; arrows from each result to its inputs).  The caller frees
 * the string with free().  Call it before cg_backward: a backward without
 * retain_graph frees what links the nodes, and the DOT of such a graph
 * then shows the nodes it still reaches with a note "graph freed by
 * backward" instead of the structure (with retain_graph the whole graph
 * stays). */
char *cg_graph_dot(const cg_tensor *t);

/* ------------------------------------------------------------------------
 * Forward-mode AD (JVP), in the spirit of torch.autograd.forward_ad
 *
 * Open a dual level on a context, make dual tensors (a primal with a
 * tangent, the direction to differentiate along), run ops as usual, and
 * read the tangent of any result: the Jacobian-vector product J v.  While
 * a level is open, every op that sees an input with a tangent gives its
 * output a tangent too; an op none of whose inputs has one records
 * nothing for forward mode.  With no level open an op pays one test of a
 * context field and nothing else.  Tangents have their primal's shape
 * and dtype.
 *
 * Ops with a JVP rule (this release):
 *   elementwise: cg_add, cg_sub, cg_mul, cg_div, cg_pow, cg_maximum,
 *     cg_minimum (with broadcasting), cg_where, cg_add_scalar,
 *     cg_mul_scalar, cg_pow_scalar, cg_neg, cg_exp, cg_log, cg_sqrt,
 *     cg_abs, cg_clamp, cg_tanh, cg_sigmoid, cg_relu, cg_leaky_relu,
 *     cg_gelu, cg_dropout (the same mask), cg_to_dtype;
 *   reductions: cg_sum, cg_mean, cg_var, cg_max (so the values of
 *     cg_max_dim and cg_min_dim: the tangent at the extreme element);
 *   products: cg_matmul, cg_matmul_t, cg_matmul_out, the linear layer;
 *   cg_softmax, cg_log_softmax; the losses cg_cross_entropy,
 *     cg_nll_loss, cg_mse_loss, cg_bce_with_logits;
 *   views and joins: cg_reshape, cg_flatten, cg_squeeze, cg_unsqueeze,
 *     cg_contiguous, cg_expand, cg_transpose, cg_permute, cg_narrow,
 *     cg_split, cg_split_chunks, cg_concat, cg_stack; cg_embedding (the
 *     weight's tangent), cg_index_select;
 *   cg_layer_norm; cg_batch_norm (in training the batch statistics'
 *     tangents too; in evaluation the running statistics are constants);
 *   cg_conv1d, cg_conv2d, cg_conv_transpose2d (conv(tx, w) + conv(x, tw)
 *     + tb, each a convolution of the op's geometry);
 *   cg_max_pool2d (the tangent at each window's argmax, one launch),
 *     cg_avg_pool2d, cg_adaptive_avg_pool2d (the op on the tangent);
 *   the nodes of a create_graph backward's composites ("gather_grad",
 *     "gelu_grad", the pools' "<pool>_grad", "conv_wgrad"), so every op
 *     with a double backward supports forward over reverse (cg_hvp_fwd);
 *   the recurrent layers (cg_rnn_forward: RNN tanh and relu, LSTM, GRU;
 *     every configuration: layers, directions, initial states or none,
 *     lengths, the fused and the GEMM path, 16-bit): the tangents of the
 *     output, h_n and c_n along the tangents of x, h0, c0 and of the
 *     parameter tensors the layer runs on (which have one only when they
 *     are duals; this release has no public call that gives a module's
 *     parameter a tangent);
 *   Fourier transforms: cg_fft, cg_ifft, cg_rfft, cg_irfft, the 2-D ones
 *     and their adjoints ("fft_adjoint" ...), cg_complex_mul,
 *     cg_complex_conj, cg_complex_abs and cg_complex_angle (0 at z = 0,
 *     as their gradients).
 * Every other op (custom ops) fails
 * with CG_EUNSUPPORTED naming the op when an input has a tangent - a
 * tangent is never dropped silently - and works as before when none has.
 * cg_detach drops the tangent (its result has none); ops that return
 * their input itself (cg_contiguous of a contiguous tensor, cg_dropout
 * in eval mode, cg_to_dtype to the same dtype) return it with its
 * tangent.
 *
 * How tangents are computed, in this release: in no-grad mode - a
 * tangent never records into the reverse graph and never requires grad.
 * The elementwise ops of one or two inputs (cg_add ... cg_minimum,
 * cg_add_scalar ... cg_gelu, cg_clamp above) compute the output's
 * tangent in the primal's own launch, one kernel reading the inputs and
 * their tangents and writing both results (kernels/elementwise.cl's
 * NAME_j: the op's backward expression applied to the tangent, its
 * Jacobian being diagonal), when each input tangent is laid out as its
 * primal (same strides: a tangent from cg_make_dual of a tensor and a
 * tangent both contiguous, or from an op, is); a tangent laid out
 * otherwise takes the rule below, with the same values.  The other ops
 * use the public ops (composites, no launch of their own but max
 * pooling's gather).  The recurrent layers compute theirs in the layer's own
 * call, right after the primal's steps: the tangent of a recurrence is a
 * recurrence, run as GEMMs for the input projection's tangent and the
 * weight tangents' products over all steps, then one fused tangent step
 * launch per time step and direction (kernels/rnn.cl's lstm_jvp,
 * gru_jvp, rnn_jvp, reading the primal's saved gate activations): about
 * the cost of a second forward pass.  Dropout, softmax and the
 * elementwise ops' rule compute theirs with their backward kernels
 * (their Jacobian is diagonal or symmetric, so J v = J^T v), the losses
 * with their backward kernels applied to ones, times the tangent,
 * summed.  Apart from the ops computing it in their own launch, a
 * tangent is computed when first needed: by the next op that takes the
 * tensor, cg_tangent, cg_backward (which computes every pending tangent
 * of the level first, as its walk may free what they need) or the end of
 * cg_jvp.  Until then the op keeps references to its inputs, as a
 * recorded node does; an input written in place in between (cg_tensor_
 * write, an optimizer step) gives a tangent of the new values.  Reverse
 * mode still works inside a level: ops record their graph as usual; a
 * plain backward propagates no tangents (its kernel-level backward
 * functions record nothing), while a backward with CG_GRAD_CREATE_GRAPH
 * runs composites of ops with JVP rules, so the gradients it makes carry
 * tangents: the JVP of the gradient (forward over reverse, cg_hvp_fwd).
 * ------------------------------------------------------------------------ */

/* Opens a dual level on ctx.  One level at a time: a second
 * cg_fwad_enter before cg_fwad_exit gives CG_ESTATE (nested levels come
 * later).  The level belongs to the context and holds for every tensor of
 * it, on the thread that uses the context. */
int cg_fwad_enter(cg_context *ctx);

/* Closes ctx's level: every tangent of it is dropped (its memory
 * released; results made inside keep their values and lose their
 * tangents).  CG_ESTATE when no level is open. */
int cg_fwad_exit(cg_context *ctx);

/* 1 while a level is open on ctx, else 0 (also for NULL). */
int cg_fwad_level(const cg_context *ctx);

/* A dual tensor: a new tensor sharing primal's storage (a view, no copy)
 * whose tangent is `tangent`.  The caller owns the result (free it with
 * cg_tensor_free).  The dual keeps its own reference to tangent (no copy:
 * writing into tangent later changes the dual's tangent), dropped when
 * the level closes or the dual is freed; the caller keeps its own.  The
 * dual is part of primal's reverse graph (a node "make_dual" whose
 * gradient is the identity) when primal requires grad.  primal must be
 * float32, float16 or bfloat16 (CG_EDTYPE); tangent of another context
 * gives CG_ECONTEXT, of another dtype CG_EDTYPE, of another shape
 * CG_ESHAPE; no open level on primal's context gives CG_ESTATE.  On error
 * NULL and nothing changes. */
cg_tensor *cg_make_dual(cg_tensor *primal, cg_tensor *tangent);

/* The tangent of t at the open level: a new reference the caller owns
 * (free it with cg_tensor_free; it stays valid after the level closes).
 * NULL with an empty cg_last_error() when t has no tangent (no level, a
 * tensor that depends on no dual, int32 results); NULL with the reason in
 * cg_last_error() when computing a pending tangent failed. */
cg_tensor *cg_tangent(cg_tensor *t);

/* The most inputs and outputs of cg_jvp. */
#define CG_JVP_MAX 16

/* A function for cg_jvp: it reads n_inputs tensors (borrowed) and stores
 * n_outputs new tensors (owned by cg_jvp from then on) in outputs[],
 * returning CG_OK; or returns a negative status (with cg_last_error set)
 * after freeing whatever it made, storing nothing. */
typedef int (*cg_jvp_fn)(void *user, int n_inputs, cg_tensor *const *inputs,
                         int n_outputs, cg_tensor **outputs);

/* The Jacobian-vector product of fn at inputs along tangents, as
 * torch.autograd.functional.jvp: opens a dual level on ctx, makes duals
 * of inputs[k] with tangents[k] (shapes, dtypes, context as
 * cg_make_dual), runs fn(user, n_inputs, duals, n_outputs, outputs),
 * takes each output's tangent, and closes the level.  out_tangents[j]
 * receives the tangent of output j (zeros of its shape and dtype when it
 * depends on no input, NULL for an int32 output); outputs[j] receives
 * output j itself, its values fn's, without tangent (outputs may be NULL:
 * they are then freed).  The caller owns every tensor stored in outputs
 * and out_tangents.  inputs and tangents are borrowed.  n_inputs and
 * n_outputs are 1..CG_JVP_MAX (CG_EINVAL), an input of another context
 * gives CG_ECONTEXT, a level already open on ctx CG_ESTATE.  On any
 * error - fn's own status included, returned as it is - nothing is
 * stored, everything made is freed and the level is closed. */
int cg_jvp(cg_context *ctx, cg_jvp_fn fn, void *user, int n_inputs,
           cg_tensor *const *inputs, cg_tensor *const *tangents,
           int n_outputs, cg_tensor **outputs, cg_tensor **out_tangents);

/* The vector-Jacobian product of fn at inputs with cotangents, as
 * torch.autograd.functional.vjp: in_grads[k] = sum_j J_jk^T
 * cotangents[j], J_jk the Jacobian of output j with respect to input k,
 * by reverse mode.  fn is a cg_jvp_fn (see above); it is run once, in
 * grad mode, on new leaves that share the inputs' storage and require
 * grad (so the inputs' own graphs and grads are left alone; parameters
 * fn reaches through `user` are not differentiated and their grad does
 * not change).  cotangents[j] has output j's shape and dtype (CG_ESHAPE
 * otherwise, found after fn ran), NULL only for an int32 output (no
 * term; NULL for a float output is CG_EINVAL).  in_grads[k] receives a
 * new tensor of input k's shape and dtype (zeros where no output depends
 * on it); outputs[j], if outputs is not NULL, output j itself, detached
 * from any graph.  The caller owns every tensor stored; inputs and
 * cotangents are borrowed.  inputs must be float32, float16 or bfloat16
 * (CG_EDTYPE); n_inputs and n_outputs 1..CG_JVP_MAX (CG_EINVAL); tensors
 * of another context give CG_ECONTEXT; called in no-grad mode,
 * CG_ESTATE.  The gradients have no graph (no create_graph).  On any
 * error - fn's own status included, returned as it is - nothing is
 * stored and everything made is freed. */
int cg_vjp(cg_context *ctx, cg_jvp_fn fn, void *user, int n_inputs,
           cg_tensor *const *inputs, int n_outputs,
           cg_tensor *const *cotangents, cg_tensor **outputs,
           cg_tensor **in_grads);

/* ------------------------------------------------------------------------
 * Ops.  Each returns a new tensor (caller owns) or NULL on error.
 * Binary elementwise ops broadcast with NumPy's rules.
 *
 * The elementwise ops below (binary, where, unary) and cg_dropout take
 * float32, float16 and bfloat16 tensors; the result and the gradients
 * have the input's dtype, computed in float32 and rounded once (scalar
 * arguments such as cg_add_scalar's stay float32, not rounded to the
 * dtype first).  Operands of different floating dtypes (a, b; where's
 * cond is float32 or int32 and takes no part) are promoted as PyTorch
 * promotes them: a 0-D tensor beside one with dimensions takes the
 * other's dtype; otherwise float16 with bfloat16, or either with float32,
 * gives float32.  The narrower operand is cast with cg_to_dtype (recorded:
 * its gradient comes back in its own dtype) and the op runs in the
 * promoted dtype.
 * ------------------------------------------------------------------------ */
cg_tensor *cg_add(cg_tensor *a, cg_tensor *b);
cg_tensor *cg_sub(cg_tensor *a, cg_tensor *b);
cg_tensor *cg_mul(cg_tensor *a, cg_tensor *b);
cg_tensor *cg_div(cg_tensor *a, cg_tensor *b);
cg_tensor *cg_pow(cg_tensor *a, cg_tensor *b);
cg_tensor *cg_maximum(cg_tensor *a, cg_tensor *b);
cg_tensor *cg_minimum(cg_tensor *a, cg_tensor *b);
/* cond ? a : b elementwise; cond is float32 or int32, nonzero is true.
 * cond gets no gradient. */
cg_tensor *cg_where(cg_tensor *cond, cg_tensor *a, cg_tensor *b);

cg_tensor *cg_add_scalar(cg_tensor *a, float s);
cg_tensor *cg_mul_scalar(cg_tensor *a, float s);
cg_tensor *cg_pow_scalar(cg_tensor *a, float exponent);
cg_tensor *cg_neg(cg_tensor *a);
cg_tensor *cg_exp(cg_tensor *a);
cg_tensor *cg_log(cg_tensor *a);
cg_tensor *cg_sqrt(cg_tensor *a);
cg_tensor *cg_abs(cg_tensor *a);
cg_tensor *cg_clamp(cg_tensor *a, float min, float max);
cg_tensor *cg_tanh(cg_tensor *a);
cg_tensor *cg_sigmoid(cg_tensor *a);
cg_tensor *cg_relu(cg_tensor *a);
cg_tensor *cg_leaky_relu(cg_tensor *a, float negative_slope);
/* The exact GELU, x * Phi(x), as PyTorch's default. */
cg_tensor *cg_gelu(cg_tensor *a);

/* Reductions over the axes listed (naxes 0: all axes), keeping them as
 * size-1 dimensions when keepdim is set.  Deterministic: a fixed tree
 * order, no atomics, so results are bit-identical from run to run.  a may
 * be float32, float16 or bfloat16: the sums are float32 and the result has
 * a's dtype (rounded once, as torch.sum of a half tensor), as has the
 * gradient. */
cg_tensor *cg_sum(cg_tensor *a, int naxes, const int *axes, int keepdim);
cg_tensor *cg_mean(cg_tensor *a, int naxes, const int *axes, int keepdim);
/* Maximum; ties go to the first index.  The gradient flows to it. */
cg_tensor *cg_max(cg_tensor *a, int naxes, const int *axes, int keepdim);
/* Indices along axis `dim` (negative counts from the end) of the first
 * maximum / minimum of each slice of a float32, float16 or bfloat16
 * tensor, as torch.argmax /
 * argmin(x, dim, keepdim): a new int32 tensor of x's shape without dim
 * (with dim as 1 if keepdim), caller owns.  Ties pick the smallest index;
 * NaN counts as larger (argmax) and smaller (argmin) than every number,
 * so a slice holding NaN gives its first NaN, as PyTorch does.  Any
 * layout (views too).  Indices record no graph node: they have no
 * gradient.  A bad dim or a 0-D x gives CG_EINVAL, an int32 x CG_EDTYPE;
 * the result is then NULL.  argmin runs one extra launch (it negates). */
cg_tensor *cg_argmax(cg_tensor *x, int dim, int keepdim);
cg_tensor *cg_argmin(cg_tensor *x, int dim, int keepdim);
/* torch.max(x, dim, keepdim) / torch.min: the extreme values (x's dtype,
 * differentiable: the gradient goes to the element picked, as cg_max's)
 * and their indices as above, both new and owned by the caller.  On error
 * (as argmax's, CG_EINVAL for NULL outputs) neither is set. */
int cg_max_dim(cg_tensor *x, int dim, int keepdim, cg_tensor **values,
               cg_tensor **indices);
int cg_min_dim(cg_tensor *x, int dim, int keepdim, cg_tensor **values,
               cg_tensor **indices);
/* Variance with `correction` (1: unbiased, as PyTorch's default). */
cg_tensor *cg_var(cg_tensor *a, int naxes, const int *axes, int keepdim,
                  int correction);

/* Layers' building blocks.  Gradients are deterministic: no float atomics,
 * a fixed summation order, bit-identical from run to run. */

/* Rows of weight [V, D] picked by int32 `indices` of any shape (at most
 * CG_MAX_DIMS - 1 dimensions): the result is indices' shape + [D], and
 * weight gets the gradient (rows no index names get 0; repeated indices
 * add up, in increasing position).  Every index must lie in [0, V): the
 * indices are read to the host to check that, which waits for the work
 * that produces them; an index outside gives CG_EINVAL naming the index
 * and its position, and the kernels never touch memory outside weight
 * whatever the indices hold.  indices is CG_EDTYPE unless int32.  weight
 * may be float32, float16 or bfloat16: rows are copied bit for bit, and
 * the gradient (weight's dtype) is summed in float32 and rounded once. */
cg_tensor *cg_embedding(cg_tensor *weight, cg_tensor *indices);

/* The slices of x along dimension dim picked by 1-D int32 `indices`
 * (repeats allowed): x's shape with dimension dim replaced by the number of
 * indices.  Indices are checked as cg_embedding's are.  x may be float32,
 * float16 or bfloat16 (differentiable, gradients of repeats add up, in
 * float32 rounded once) or int32. */
cg_tensor *cg_index_select(cg_tensor *x, int dim, cg_tensor *indices);

/* Inverted dropout.  training nonzero and 0 < p: y = x * mask with mask =
 * (u >= p) / (1 - p) for u uniform in [0, 1) drawn from the context's
 * generator (which advances; see cg_rand_uniform), and gx = g * mask.
 * p = 1 gives x * 0.  training zero or p = 0: a new reference to x itself.
 * p outside [0, 1] (or NaN) gives CG_EINVAL. */
cg_tensor *cg_dropout(cg_tensor *x, float p, int training);

/* Layer normalisation over the last `nnorm` dimensions of x, which must be
 * `normalized_shape`, as PyTorch: (x - mean) / sqrt(var + eps) * weight +
 * bias with the biased variance over those dimensions.  weight and bias
 * have normalized_shape, and either may be NULL (no scaling / no shift).
 * x, weight and bias have one dtype, float32, float16 or bfloat16 (else
 * CG_EDTYPE), which the result and the gradients have too; the statistics
 * are float32.  eps must be finite and >= 0 (CG_EINVAL); shapes that do
 * not fit give CG_ESHAPE naming them. */
cg_tensor *cg_layer_norm(cg_tensor *x, int nnorm,
                         const int64_t *normalized_shape, cg_tensor *weight,
                         cg_tensor *bias, float eps);

/* Convolution options, as PyTorch's Conv2d arguments; a zeroed struct (or
 * a NULL pointer) gives the defaults.  Pairs are (height, width) for
 * cg_conv2d; cg_conv1d uses element [0] of each.  stride and dilation 0
 * mean 1, groups 0 means 1.  padding_same nonzero is PyTorch's
 * padding="same": stride must be 1, the output has the input's size and
 * the total padding dilation * (kernel - 1) is split with the extra
 * element at the end (bottom / right); padding[] is then ignored. */
typedef struct cg_conv_options {
    int stride[2];
    int padding[2];        /* zeros added on both sides, >= 0 */
    int dilation[2];
    int groups;
    int padding_same;
} cg_conv_options;

/* 2-D cross-correlation, as torch.nn.functional.conv2d: x is [N, C, H, W],
 * weight [K, C / groups, R, S], bias [K] or NULL; the result is a new
 * [N, K, OH, OW] tensor the caller owns, with OH = (H + 2 ph - dh (R - 1)
 * - 1) / sh + 1 (likewise OW).  groups must divide C and K (groups = C =
 * K: depthwise).  Gradients flow to x, weight and bias.  Computed, per
 * call and direction, either as im2col + GEMM over chunks of images whose
 * column buffers stay within a fraction of the device memory (results do
 * not depend on the chunking) or by direct kernels without a column
 * buffer (the default for depthwise convolutions, groups = C > 1); a
 * tuning entry "conv" of the shape class ("fwd.depthwise", "fwd.small",
 * "fwd.large", "bwd.*"; "algo" 0 im2col, 1 direct) changes the default,
 * and CLGRAD_CONV_ALGO=im2col|direct|auto in the environment, read at each
 * call, overrides both (fft: conv1d's, see there; auto here; another
 * value fails the call with CG_EINVAL; a
 * weight of 2^31 - 1 elements or more always runs im2col).  Both are
 * deterministic: the same inputs give the same bits.
 * x, weight and bias may be float16 or bfloat16 (all three one dtype; the
 * result and gradients too); the forward's choice is float32's: where it
 * is direct, the direct kernels read and write 16 bits with float32 sums,
 * forward and backward, the bias added before the result's one rounding;
 * where it is im2col, the float32 op runs between recorded casts (the
 * direct kernels in 16 bits ran 3 to 40 times slower than that at the
 * CNN's layers).  Either way the result equals the float32 op on the
 * cast-up values rounded once.
 * A wrong channel count, groups not dividing the channels, a dilated
 * kernel larger than the padded input or an output size below 1 give
 * CG_ESHAPE naming the shapes and the formula's values; a bad option
 * gives CG_EINVAL; nothing is enqueued on error. */
cg_tensor *cg_conv2d(cg_tensor *x, cg_tensor *weight, cg_tensor *bias,
                     const cg_conv_options *opts);

/* 1-D cross-correlation, as torch.nn.functional.conv1d: x [N, C, L],
 * weight [K, C / groups, S], bias [K] or NULL; result [N, K, OL].  The
 * options' element [0] applies; errors as cg_conv2d's.
 * Besides cg_conv2d's two algorithms, conv1d has a third, by FFT: the
 * input (with its left padding) and the weight (dilated with zeros) are
 * zero-padded to the least length n >= max(L + total padding, OL stride)
 * whose prime factors are 2, 3, 5 and 7, cg_rfft'd, the input's spectrum
 * multiplied by the conjugate of the weight's and summed over each
 * group's input channels (a complex product for depthwise, one real
 * matmul batched over groups and frequencies else), cg_irfft'd, cropped,
 * subsampled by the stride, and the bias added.  It is made of those
 * differentiable ops and recorded as them (not as a node "conv1d"), so
 * its backward, double backward and forward mode are theirs: the
 * backward of an FFT forward runs by FFT too.  Its error is that of the
 * transforms, about 1e-6 sqrt(log2 n) of the largest output magnitude,
 * not bitwise the direct result; it is deterministic.  float16 and
 * bfloat16 run it in float32 between recorded casts (the result rounded
 * once).  Its time grows as N (C + K) n log n plus the channel sums, not
 * with the kernel length, so it wins for long kernels: a conv1d whose
 * dilated kernel length d (S - 1) + 1 reaches a crossover runs by FFT,
 * forward and backward; shorter ones choose as cg_conv2d.  The crossover:
 * a tuning entry "conv" of class "fwd1d.long" ("algo" 2 and "min_kernel"
 * the crossover; "algo" 0 or 1: never FFT), else the built-in 256 taps
 * (measured on PoCL's CPU device, depthwise, 64 channels, length 4096,
 * where the FFT is the faster from about 256 taps on, forward and
 * forward + backward; clgrad-tune's stage "conv" measures it).
 * CLGRAD_CONV_ALGO=fft runs every conv1d by FFT (im2col or direct: none);
 * cg_conv2d, cg_conv_transpose2d and the modules on them take fft as
 * auto (their tuned or built-in choice), so one setting can serve a
 * model with both kinds of convolution. */
cg_tensor *cg_conv1d(cg_tensor *x, cg_tensor *weight, cg_tensor *bias,
                     const cg_conv_options *opts);

/* The algorithm cg_conv2d (and cg_conv1d) runs on ctx for a convolution
 * of in_channels to out_channels in `groups` groups (0 means 1), forward
 * (backward 0) or backward (1: dx and dW): "im2col" or "direct", by
 * CLGRAD_CONV_ALGO, then the tuning entry of its class, then the built-in
 * rule (see cg_conv2d); a static string.  NULL with CG_EINVAL for a NULL
 * ctx, channels or groups that do not fit, or a bad CLGRAD_CONV_ALGO. */
const char *cg_conv2d_algorithm(cg_context *ctx, int backward,
                                int64_t in_channels, int64_t out_channels,
                                int groups);

/* The algorithm cg_conv1d runs on ctx for a convolution of in_channels to
 * out_channels in `groups` groups whose dilated kernel length is
 * kernel_length (dilation (S - 1) + 1), forward (backward 0) or backward
 * (1): "fft" (both directions, see cg_conv1d), else cg_conv2d_algorithm's
 * answer; a static string.  NULL with CG_EINVAL as cg_conv2d_algorithm,
 * or for a kernel_length below 1. */
const char *cg_conv1d_algorithm(cg_context *ctx, int backward,
                                int64_t in_channels, int64_t out_channels,
                                int groups, int64_t kernel_length);

/* Transposed convolution options, as the arguments of PyTorch's
 * conv_transpose2d in its order; a zeroed struct (or a NULL pointer)
 * gives the defaults.  Pairs are (height, width); stride and dilation 0
 * mean 1, groups 0 means 1.  padding p drops p rows / columns of the
 * output on each side (the padding of the cg_conv2d it transposes);
 * output_padding adds rows / columns at the end (bottom / right) only, to
 * pick one of the input sizes that a strided cg_conv2d maps to one output
 * size. */
typedef struct cg_conv_transpose_options {
    int stride[2];
    int padding[2];         /* >= 0 */
    int output_padding[2];  /* >= 0, < stride or < dilation */
    int groups;
    int dilation[2];
} cg_conv_transpose_options;

/* 2-D transposed convolution, as torch.nn.functional.conv_transpose2d:
 * the gradient of cg_conv2d with respect to its input.  x is [N, C, H,
 * W], weight [C, K / groups, R, S] (cg_conv2d's layout for a convolution
 * from K to C channels), bias [K] or NULL; the result is a new [N, K, OH,
 * OW] tensor the caller owns (free it with cg_tensor_free), with OH = (H
 * - 1) sh - 2 ph + dh (R - 1) + oph + 1 (likewise OW).  groups must
 * divide C.  Gradients flow to x, weight and bias.  Computed, per call
 * and direction, by cg_conv2d's two algorithms run as the adjoint of the
 * convolution from K to C channels it transposes (its forward that
 * convolution's input gradient, its input gradient that convolution's
 * forward): GEMM + col2im (a gather: deterministic, no atomics) over
 * chunks of images as cg_conv2d, whose memory bound applies (the output
 * and x's gradient do not depend on the chunking, the weight's only to
 * float rounding), or the direct kernels, without a column buffer.  The
 * choice: CLGRAD_CONV_ALGO as for cg_conv2d, else a tuning entry "conv"
 * of the transposed shape classes "tfwd.depthwise", "tfwd.small",
 * "tfwd.large", "tbwd.*" ("algo" 0 im2col, 1 direct), else the built-in
 * rule, direct for depthwise (groups = K > 1) and im2col else; the kind
 * is that of the convolution transposed, so "small" means at most 4
 * output channels (K) per group.  Both are deterministic.  A weight
 * whose dimension 0 is not C, groups not dividing C, a bias that is not
 * [K], an output_padding not smaller than the stride or the dilation of
 * its dimension (PyTorch's rule) or an output size below 1 give
 * CG_ESHAPE naming the shapes and the formula's values; a negative
 * option gives CG_EINVAL; nothing is enqueued on error.  16-bit
 * arguments (one dtype): the forward's choice is float32's (as
 * cg_conv2d's); where it is direct, the
 * direct kernels run in 16 bits, forward and backward (the bias added
 * before the one rounding), else the float32 op runs between recorded
 * casts; either way the result equals the float32 op on the cast-up
 * values rounded once. */
cg_tensor *cg_conv_transpose2d(cg_tensor *x, cg_tensor *weight,
                               cg_tensor *bias,
                               const cg_conv_transpose_options *opts);

/* The algorithm cg_conv_transpose2d runs on ctx for a transposed
 * convolution of in_channels to out_channels in `groups` groups (0 means
 * 1), forward (backward 0) or backward (1: dx and dW): "im2col" or
 * "direct", as cg_conv2d_algorithm says for cg_conv2d; a static string.
 * NULL with CG_EINVAL for a NULL ctx, channels or groups that do not
 * fit, or a bad CLGRAD_CONV_ALGO. */
const char *cg_conv_transpose2d_algorithm(cg_context *ctx, int backward,
                                          int64_t in_channels,
                                          int64_t out_channels, int groups);

/* 2-D max pooling over the last two dimensions of x, [C, H, W] or [N, C,
 * H, W], as PyTorch's max_pool2d: kernel {kh, kw}; stride NULL means the
 * kernel; padding (NULL: 0) at most half the kernel, never a maximum;
 * dilation (NULL: 1); ceil_mode rounds the output size up (the last
 * window must start inside the input or its left padding).  Output size
 * per dimension: (n + 2 pad - dilation (k - 1) - 1) / stride + 1.  The
 * maximum's position (the first in scan order; a NaN wins) is saved, and
 * the gradient goes to it.  Bad geometry: CG_EINVAL (non-positive kernel,
 * stride, dilation; negative padding) or CG_ESHAPE (wrong ndim, padding
 * more than kernel / 2, output size < 1), naming the values.  The
 * pools take float32, float16 or bfloat16 x (result and gradient in x's
 * dtype, sums in float32 rounded once). */
cg_tensor *cg_max_pool2d(cg_tensor *x, const int kernel[2],
                         const int stride[2], const int padding[2],
                         const int dilation[2], int ceil_mode);

/* 2-D average pooling as PyTorch's avg_pool2d (kernel, stride, padding,
 * ceil_mode as cg_max_pool2d, dilation 1): the mean over each window
 * clipped to the input, divided by divisor_override when it is positive,
 * else by the window's size counting the padding (count_include_pad
 * nonzero, PyTorch's default) or not.  divisor_override < 0 is
 * CG_EINVAL; shape errors as cg_max_pool2d. */
cg_tensor *cg_avg_pool2d(cg_tensor *x, const int kernel[2],
                         const int stride[2], const int padding[2],
                         int ceil_mode, int count_include_pad,
                         int divisor_override);

/* Adaptive average pooling of x ([C, H, W] or [N, C, H, W]) to out_h x
 * out_w as PyTorch: output i averages input rows floor(i H / out_h) to
 * ceil((i + 1) H / out_h) - 1 (columns likewise).  Output sizes < 1 or an
 * empty input plane give CG_ESHAPE. */
cg_tensor *cg_adaptive_avg_pool2d(cg_tensor *x, int64_t out_h,
                                  int64_t out_w);

/* Batch normalisation of x, [N, C], [N, C, L] or [N, C, H, W], per
 * channel over N (and L or H, W), as PyTorch's batch_norm: y = (x - mean)
 * / sqrt(var + eps) * weight + bias.  training nonzero: mean and the
 * biased var come from the batch (more than one value per channel, else
 * CG_ESHAPE), and running_mean / running_var, when given, are updated in
 * place: new = (1 - momentum) old + momentum stat, with the unbiased
 * variance for running_var.  training zero: the running statistics are
 * used (both required, CG_EINVAL otherwise) and not changed.  weight,
 * bias (either may be NULL) and the running statistics are [C]; the
 * running statistics are the caller's, contiguous float32, and get no
 * gradient.  x, weight and bias have one dtype, float32, float16 or
 * bfloat16 (else CG_EDTYPE), which y and the gradients have too; the
 * batch statistics are float32, and the running statistics stay float32
 * for 16-bit x (PyTorch keeps them in the parameters' dtype, float32
 * under autocast).  Gradients reach x, weight and bias in both modes.  eps must
 * be finite and >= 0, momentum in [0, 1] (CG_EINVAL); wrong shapes give
 * CG_ESHAPE naming them, and nothing is changed. */
cg_tensor *cg_batch_norm(cg_tensor *x, cg_tensor *running_mean,
                         cg_tensor *running_var, cg_tensor *weight,
                         cg_tensor *bias, int training, float momentum,
                         float eps);

/* The n tensors (one dtype, equal shapes except along dim) joined along
 * dim into a new tensor; each input gets its slice of the gradient.
 * Mismatched shapes give CG_ESHAPE naming both shapes. */
cg_tensor *cg_concat(cg_tensor *const *tensors, int n, int dim);

/* The n tensors (equal shapes) stacked along a new dimension dim (0 ..
 * ndim; negative counts from the end). */
cg_tensor *cg_stack(cg_tensor *const *tensors, int n, int dim);

/* Splits x along dim into n views (cg_narrow: they share x's storage and
 * are differentiable) of sizes[0], ..., sizes[n - 1] elements, which must
 * add up to x's size there.  The caller owns outputs[0..n-1].  Returns a
 * status; on error no output is set. */
int cg_split(cg_tensor *x, int dim, int n, const int64_t *sizes,
             cg_tensor **outputs);

/* The same with pieces of `chunk` elements (the last may be smaller), as
 * PyTorch's split(int).  Returns the number of pieces (>= 1) or a negative
 * status; more than max_outputs pieces is CG_EINVAL. */
int cg_split_chunks(cg_tensor *x, int dim, int64_t chunk, int max_outputs,
                    cg_tensor **outputs);
/* ------------------------------------------------------------------------
 * Custom ops
 *
 * A custom op is a differentiable op written by the user in OpenCL C: one
 * forward kernel, one backward kernel per input and a shape rule.  Its
 * program is built once per context and kept in the on-disk binary cache
 * like clgrad's own kernels.  Inputs and output are float32.
 *
 * Kernel calling convention, for an op with n inputs x0..x{n-1} and output
 * y (every tensor contiguous, row-major; views are copied first):
 *
 *   forward:   __kernel void F(__global const float *x0, ...,
 *                              __global const float *x{n-1},
 *                              __global float *y, uint n_y,
 *                              __global const int *shapes,
 *                              __global const float *params)
 *     One work-item per element of y, n_y = numel(y); the global size is
 *     padded up to a multiple of 64, so begin with
 *     `uint i = get_global_id(0); if (i >= n_y) return;`.
 *
 *   backward of input j:
 *              __kernel void Bj(__global const float *x0, ...,
 *                               __global const float *x{n-1},
 *                               __global const float *y,
 *                               __global const float *gy,
 *                               __global float *gxj, uint n_xj,
 *                               __global const int *shapes,
 *                               __global const float *params)
 *     One work-item per element of xj (n_xj = numel(xj), padded and guarded
 *     the same way); it writes gxj[i] = dL/dxj[i] given gy = dL/dy (y's
 *     shape).  Each work-item owns its element, so no atomics are needed.
 *
 *   shapes: CG_CUSTOM_SHAPE_STRIDE ints per tensor, x0..x{n-1} then y:
 *     [ndim, size0, ..., size7].  The source is compiled after a prelude
 *     that defines CG_NINPUTS (n), CG_NDIM(shapes, t) and
 *     CG_DIM(shapes, t, d) for tensor t (n stands for y); build messages
 *     give line numbers of the user's source.
 *   params: the definition's nparams floats (one unused 0 if nparams is 0).
 *
 * Element counts must be below 2^31.
 * ------------------------------------------------------------------------ */
#define CG_CUSTOM_SHAPE_STRIDE (1 + CG_MAX_DIMS)

typedef struct cg_custom_op cg_custom_op;

/* Computes the output shape from the n input shapes (ndims[k], shapes[k]);
 * writes *out_ndim (0..CG_MAX_DIMS) and out_shape[0..*out_ndim-1] (each
 * >= 1).  Returns 0 if the shapes are acceptable, nonzero to reject them
 * (the op then fails with CG_ESHAPE).  `user` is the definition's. */
typedef int (*cg_shape_rule)(int ninputs, const int *ndims,
                             const int64_t *const *shapes, int *out_ndim,
                             int64_t *out_shape, void *user);

typedef struct cg_custom_op_def {
    const char *name;          /* [A-Za-z0-9_.-], 1..64 characters */
    const char *source;        /* OpenCL C source with all the kernels */
    const char *forward_kernel;
    const char *const *backward_kernels;   /* ninputs names, input order */
    int ninputs;               /* 1..8 */
    cg_shape_rule shape_rule;  /* NULL: elementwise - every input has the
                                  same shape, and so has the output */
    void *user;                /* passed to shape_rule; borrowed */
    const float *params;       /* nparams values, copied; may be NULL if
                                  nparams is 0 */
    int nparams;               /* 0..1024 */
} cg_custom_op_def;

/* Validates `def` and builds its program (or loads it from the binary
 * cache).  A NULL or malformed field gives CG_EINVAL; a source that does
 * not compile gives CG_EBUILD with the build log in cg_last_error(); a
 * kernel that is missing from the program or takes the wrong number of
 * arguments gives CG_EINVAL naming it.  The op copies everything it needs
 * from def (strings, params); def may be freed afterwards.  The caller
 * owns the op; free it with cg_custom_op_free. */
cg_custom_op *cg_custom_op_new(cg_context *ctx, const cg_custom_op_def *def);

/* Drops the caller's reference.  Graph nodes recorded by the op keep it
 * alive until they are released, so freeing an op before running backward
 * through its results is safe.  NULL is ignored. */
void cg_custom_op_free(cg_custom_op *op);

/* Applies the op to `ninputs` float32 tensors of its context (which must be
 * the op's ninputs).  Returns a new tensor the caller owns; it records a
 * graph node when an input requires grad.  A wrong count, a NULL, non-
 * float32 or foreign tensor gives CG_EINVAL / CG_EDTYPE / CG_ECONTEXT; a
 * rejected or invalid shape from the shape rule gives CG_ESHAPE.  Nothing
 * is enqueued or allocated on error. */
cg_tensor *cg_custom_op_apply(cg_custom_op *op, int ninputs,
                              cg_tensor *const *inputs);

/* ------------------------------------------------------------------------
 * Matrix products, softmax and losses
 * ------------------------------------------------------------------------ */

/* Matrix products (clgrad's GEMM kernels or CLBlast's SGEMM).  a is
 * [..., M, K] and b [..., K, N] (at least 2-D each); the leading (batch)
 * dimensions broadcast with NumPy's rules, so a batched a times a 2-D b
 * is x @ W, and the result is [batch..., M, N].  Non-contiguous operands
 * are read in place when their last two dimensions are a (possibly
 * transposed) row-major matrix, and copied otherwise.  Inner dimensions
 * that differ give CG_ESHAPE naming both shapes.  The gradient of a
 * broadcast operand is summed over the batch.
 *
 * a and b are float32, or both CG_F16 or both CG_BF16 (others, or two
 * dtypes, give CG_EDTYPE): 16-bit products are summed in float32 (never
 * in half, unlike CLBlast's HGEMM) and the result, of the operands'
 * dtype as PyTorch's, rounded once; the gradients have the operands'
 * dtypes. */
cg_tensor *cg_matmul(cg_tensor *a, cg_tensor *b);
/* The same with op(a) @ op(b), op transposing the last two dimensions of
 * an operand whose flag is nonzero (a is then [..., K, M], b [..., N, K]);
 * nothing is transposed in memory. */
cg_tensor *cg_matmul_t(cg_tensor *a, cg_tensor *b, int trans_a,
                       int trans_b);
/* cg_matmul with the result's dtype chosen: the operands' own, or CG_F32
 * for 16-bit operands (their float32 sums, unrounded: what autocast wants
 * where a float32 op follows).  Other dtypes give CG_EDTYPE.  Backward,
 * the float32 gradient is rounded to the operands' dtype first, and
 * their gradients are of their dtypes. */
cg_tensor *cg_matmul_out(cg_tensor *a, cg_tensor *b, cg_dtype out_dtype);

/* Softmax and log-softmax along dimension dim (negative counts from the
 * end), computed stably (the row's maximum is subtracted first) and
 * deterministically.  The result has x's shape and dtype (float32,
 * float16 or bfloat16; the arithmetic is float32). */
cg_tensor *cg_softmax(cg_tensor *x, int dim);
cg_tensor *cg_log_softmax(cg_tensor *x, int dim);

/* ------------------------------------------------------------------------
 * Fourier transforms along one axis, as torch.fft.fft, ifft, rfft and
 * irfft, computed in float32 by clFFT or by clgrad's own kernels.  A
 * complex tensor is a float32 tensor whose last dimension is 2 (real,
 * imaginary): the layout of torch.view_as_real, so a complex [B, N] is a
 * float32 [B, N, 2].
 *
 * dim counts the complex tensor's dimensions without that pair (negative
 * from the end: -1 is the last axis before the pair); the transform runs
 * along it, batched over the others.  n is the transform's length
 * (CG_FFT_DEFAULT_N: the input's length along dim, for irfft 2 * (m - 1)
 * for m input bins): the input is cropped to its first n points, or
 * zero-padded to n at the end, first (irfft: to n/2 + 1 bins).  norm is
 * torch.fft's: BACKWARD scales the inverse transforms by 1/n, ORTHO both
 * directions by 1/sqrt(n), FORWARD the forward ones by 1/n.
 *
 *   cg_fft    complex -> complex, e^(-2 pi i jk/n), the shape with n at dim
 *   cg_ifft   complex -> complex, e^(+2 pi i jk/n)
 *   cg_rfft   real -> complex: the n/2 + 1 non-redundant bins of the
 *             forward transform (a real [.., L, ..] gives [.., n/2+1, .., 2])
 *   cg_irfft  complex (n/2 + 1 bins of a Hermitian spectrum) -> n reals;
 *             the imaginary parts of bin 0 and (even n) bin n/2 are
 *             ignored, as by torch.fft.irfft
 *
 * The result is a new contiguous tensor (the caller owns it), never
 * sharing the input's storage.  Differentiable, with PyTorch's gradients
 * (fft's is the inverse-direction transform with the same scale, rfft's
 * the real part of the inverse transform of the zero-padded gradient,
 * irfft's rfft of the gradient with the bins that stand for two
 * doubled), any number of times (a create_graph backward records the
 * adjoint transform, as "fft_adjoint" ..., whose gradient is the
 * transform), and in forward mode (the tangent's transform).
 *
 * Lengths: any n from 1 to 2^29 (CG_EUNSUPPORTED above).  clFFT does
 * the lengths whose prime factors are 2, 3, 5, 7, 11 and 13; the others
 * go through Bluestein's algorithm, a convolution by three clFFT
 * transforms of the least such length from 2n - 1 up, about 3 to 6 times
 * the time, with an error a few times float32's.  Each
 * new (kind, n, batch, norm) bakes a clFFT plan on first use (seconds on
 * PoCL with a cold cache; clFFT's compiled kernels are kept under
 * clgrad's cache directory, CLFFT_CACHE_PATH when the user did not set
 * it), which the context keeps until it is freed (its 256 most recently
 * used plans; an older one is baked again when next needed).
 *
 * Paths: clFFT's plan of the transform; Bluestein's algorithm (also for
 * lengths clFFT does); for rfft and irfft, the complex transform of
 * the same length around a conversion (the "complex" path, about twice
 * clFFT's real plan's work); or "radix", clgrad's own kernels
 * (kernels/fft.cl, no clFFT plan): Stockham passes of radix 8, 4, 2, 3,
 * 5 and 7 for a length with no prime factor above 7 (rfft and irfft of
 * even n as the complex transform of n/2 and one pass more, a complex
 * transform along a middle axis in place of the axis moves), the
 * complex path for odd n, and Bluestein's algorithm on the passes for
 * the other lengths.  Users report clFFT 2.12 failing on NVIDIA for real
 * transforms above 2048 and 2-D widths from 1024, so the choice is per
 * device: CLGRAD_FFT_PATH=clfft|bluestein|complex|radix|auto in the
 * environment (read at each call, for every length; anything else fails
 * the call with CG_EINVAL before anything is launched), else the tuning
 * entry kernel "fft" of the transform's class, "real.large" (rfft, irfft
 * with n > 2048) or "complex.large" (fft, ifft with n >= 1024, which the
 * 2-D ops run along each axis), "path" 0 clFFT, 1 Bluestein, 2 complex,
 * 3 radix (clgrad-tune's stage "fft" writes them, choosing a path that
 * verifies against a double-precision DFT; the shipped PoCL entries are
 * radix), else clFFT.  On a path other than radix a length clFFT cannot
 * do is Bluestein whatever the choice, and "complex" for a complex
 * transform is clFFT.  cg_fft_path says what is chosen.
 *
 * NULL on error, nothing launched: CG_EDTYPE for a dtype other than
 * float32, CG_ESHAPE when a complex input's last dimension is not 2,
 * CG_EINVAL for dim out of range, n < 1 (or a default n below 1),
 * another norm or a bad CLGRAD_FFT_PATH, CG_EUNSUPPORTED for n above
 * 2^29; a clFFT failure names the clFFT call and its code. */
#define CG_FFT_DEFAULT_N (-1)

typedef enum cg_fft_norm {
    CG_FFT_BACKWARD = 0,    /* torch's default, norm="backward" */
    CG_FFT_ORTHO = 1,
    CG_FFT_FORWARD = 2
} cg_fft_norm;

cg_tensor *cg_fft(cg_tensor *x, int64_t n, int dim, cg_fft_norm norm);
cg_tensor *cg_ifft(cg_tensor *x, int64_t n, int dim, cg_fft_norm norm);
cg_tensor *cg_rfft(cg_tensor *x, int64_t n, int dim, cg_fft_norm norm);
cg_tensor *cg_irfft(cg_tensor *x, int64_t n, int dim, cg_fft_norm norm);

/* The path a transform of length n runs on ctx (real: rfft or irfft, else
 * fft or ifft): "clfft", "bluestein", "complex" or "radix", by
 * CLGRAD_FFT_PATH, the tuning entry of its class and the length, as
 * above; a static string.  NULL with CG_EINVAL for a NULL ctx, n
 * outside 1 .. 2^29 or a bad CLGRAD_FFT_PATH. */
const char *cg_fft_path(cg_context *ctx, int real, int64_t n);

/* The same over the last two axes (of the complex tensor's, without the
 * pair), as torch.fft.fft2, ifft2, rfft2 and irfft2 with their default
 * dim: s (NULL: both CG_FFT_DEFAULT_N) gives the lengths along axes -2 and
 * -1, and norm applies to the plane (ORTHO scales by 1/sqrt(n0 n1)).
 * rfft2 transforms the real last axis (n1/2 + 1 bins) and then axis -2;
 * irfft2 axis -2 (complex) and then the last one to n1 reals (default
 * 2 * (m - 1)).  Each runs as two of the 1-D ops above, recorded as two
 * nodes, so gradients are theirs; errors as above, from either length,
 * naming the 2-D op, before anything is launched. */
cg_tensor *cg_fft2(cg_tensor *x, const int64_t *s, cg_fft_norm norm);
cg_tensor *cg_ifft2(cg_tensor *x, const int64_t *s, cg_fft_norm norm);
cg_tensor *cg_rfft2(cg_tensor *x, const int64_t *s, cg_fft_norm norm);
cg_tensor *cg_irfft2(cg_tensor *x, const int64_t *s, cg_fft_norm norm);

/* Complex helpers, on complex tensors as above (float32, last dimension
 * 2), differentiable with PyTorch's gradients; each returns a new tensor
 * (the caller owns it), NULL on error (CG_EDTYPE for another dtype,
 * CG_ESHAPE when the last dimension is not 2 or the shapes do not
 * broadcast), nothing launched then.
 *
 *   cg_complex_mul    a * b, broadcasting as cg_mul (the pair excluded)
 *   cg_complex_conj   (re, -im)
 *   cg_complex_abs    |z| (hypot), a real tensor without the last
 *                     dimension; its gradient at z = 0 is 0, as torch.abs
 *   cg_complex_angle  atan2(im, re) in (-pi, pi], real as abs; its
 *                     gradient at z = 0 is 0, as torch.angle */
cg_tensor *cg_complex_mul(cg_tensor *a, cg_tensor *b);
cg_tensor *cg_complex_conj(cg_tensor *x);
cg_tensor *cg_complex_abs(cg_tensor *x);
cg_tensor *cg_complex_angle(cg_tensor *x);

/* ------------------------------------------------------------------------
 * Losses, with PyTorch's semantics.  Each returns a new 0-d tensor (the
 * caller owns it) for CG_REDUCTION_MEAN and CG_REDUCTION_SUM, and the
 * unreduced losses for CG_REDUCTION_NONE; NULL on error.  Reductions are
 * deterministic.  The input (logits) may be float32, float16 or bfloat16:
 * the losses and their sum are float32, the result (and the gradients)
 * has the input's dtype, rounded once.
 * ------------------------------------------------------------------------ */
typedef enum cg_reduction {
    CG_REDUCTION_NONE = 0,   /* one loss per row (class losses) or element */
    CG_REDUCTION_MEAN = 1,   /* their mean (PyTorch's default) */
    CG_REDUCTION_SUM = 2     /* their sum */
} cg_reduction;

/* PyTorch's default ignore_index. */
#define CG_IGNORE_INDEX (-100)

/* Cross entropy of logits input [N, C] (or [C]) against int32 class
 * indices target [N] (or 0-d).  Rows whose target equals ignore_index
 * contribute nothing, and the mean divides by the number of other rows
 * (NaN if there are none, as in PyTorch).  label_smoothing in [0, 1] mixes
 * the one-hot target with the uniform distribution: each row's loss is
 * (1 - s) (-log p[t]) + s / C * sum_c (-log p[c]).  target gets no
 * gradient.  The call reads target back to the host to validate it (one
 * synchronisation, N * 4 bytes): a target outside [0, C) that is not
 * ignore_index gives CG_EINVAL naming it.  A target not int32 gives
 * CG_EDTYPE, mismatched shapes CG_ESHAPE. */
cg_tensor *cg_cross_entropy(cg_tensor *input, cg_tensor *target,
                            cg_reduction reduction, int ignore_index,
                            float label_smoothing);
/* Negative log-likelihood of log-probabilities input [N, C] (or [C]):
 * -input[i, target[i]], with targets, ignore_index and the mean as in
 * cg_cross_entropy (and the same host read of target). */
cg_tensor *cg_nll_loss(cg_tensor *input, cg_tensor *target,
                       cg_reduction reduction, int ignore_index);
/* (input - target)^2 elementwise; both of one shape and one dtype (else
 * CG_EDTYPE), and both get gradients. */
cg_tensor *cg_mse_loss(cg_tensor *input, cg_tensor *target,
                       cg_reduction reduction);
/* Binary cross entropy of logits input against probabilities target (same
 * shape and dtype), max(x, 0) - x t + log(1 + exp(-|x|)): stable for any
 * x.  Both get gradients. */
cg_tensor *cg_bce_with_logits(cg_tensor *input, cg_tensor *target,
                              cg_reduction reduction);

/* ------------------------------------------------------------------------
 * Layers
 *
 * A layer (cg_module) owns its parameters: leaf float32 tensors that
 * require grad, made on the layer's context with PyTorch's default
 * initialisation drawn from the context's generator, and named and laid
 * out as PyTorch names and lays them out ("weight", "bias",
 * "weight_ih_l0_reverse", ...), so that weights move between the two
 * unchanged.  cg_module_param and cg_module_find_param return borrowed
 * pointers, valid until cg_module_free; take a reference (cg_tensor_ref)
 * to keep one longer.  Set weights by writing into a parameter
 * (cg_tensor_write), never by replacing it.  A new layer is in training
 * mode.  Forward functions return new tensors the caller owns and record
 * graph nodes like any op.
 * ------------------------------------------------------------------------ */

typedef struct cg_module cg_module;

/* The layer's kind: "linear", "embedding", "conv2d", "rnn", "sequential",
 * or an activation's name ("relu", ...). */
const char *cg_module_kind(const cg_module *m);
/* The number of parameter tensors (-1 if m is NULL); a container's are
 * all its children's, in order, named "child.param" (see Containers). */
int cg_module_num_params(const cg_module *m);
/* Parameter i (0 .. num_params - 1) and, if name is not NULL, its name
 * (valid as long as m).  NULL if i is out of range. */
cg_tensor *cg_module_param(const cg_module *m, int i, const char **name);
/* The parameter called name, or NULL (CG_EINVAL) if there is none. */
cg_tensor *cg_module_find_param(const cg_module *m, const char *name);
/* Training mode (nonzero, the default) or evaluation mode: dropout runs
 * only in training mode. */
int cg_module_set_training(cg_module *m, int training);
/* Drops every parameter's gradient (cg_tensor_zero_grad). */
int cg_module_zero_grad(cg_module *m);
/* Puts the layer (a container: every child) in dtype CG_F32, CG_F16 or
 * CG_BF16 (else CG_EDTYPE): each parameter of another dtype is cast
 * (rounded to nearest even, as PyTorch's module.half()/.bfloat16()) in
 * place: the same cg_tensor, its gradient dropped, so pointers to it
 * stay valid; views taken of it before keep the old storage.  Buffers
 * (batch norm's running statistics) stay float32.  Call it before making
 * an optimizer over the parameters (the optimizer keeps their float32
 * masters) and not while a graph recorded through them is alive.  All or
 * nothing: a failed cast changes no parameter. */
int cg_module_to_dtype(cg_module *m, cg_dtype dtype);
/* Frees the layer and drops its references to its parameters; graphs
 * recorded through it stay valid.  NULL is ignored. */
void cg_module_free(cg_module *m);

/* y = x W^T + b with weight [out, in] and bias [out] (none if bias is 0),
 * both U(-1/sqrt(in), 1/sqrt(in)) as PyTorch's nn.Linear.  x is [..., in]
 * (at least 1-D).  The forward is one matrix product with the bias added
 * in its epilogue (a second pass only where CLBlast runs the product),
 * recorded as one graph node "linear"; its backward adds the weight's and
 * x's gradients into existing ones with the product itself.  x may be
 * float16 or bfloat16 when the parameters are of its dtype (summed in
 * float32, as cg_matmul); x of another dtype than theirs gives
 * CG_EDTYPE. */
cg_module *cg_linear_new(cg_context *ctx, int in_features, int out_features,
                         int bias);
cg_tensor *cg_linear_forward(cg_module *m, cg_tensor *x);

/* A lookup table "weight" [num, dim] drawn from N(0, 1) as PyTorch's
 * nn.Embedding; forward is cg_embedding(weight, indices). */
cg_module *cg_embedding_new(cg_context *ctx, int num_embeddings, int dim);
cg_tensor *cg_embedding_forward(cg_module *m, cg_tensor *indices);

/* A 2-D convolution layer as PyTorch's nn.Conv2d: "weight" [out_channels,
 * in_channels / groups, kernel[0], kernel[1]] and "bias" [out_channels]
 * (none if bias is 0), both U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with
 * fan_in = in_channels / groups * kernel[0] * kernel[1] (PyTorch's
 * kaiming_uniform with a = sqrt(5)).  opts (NULL: the defaults) are
 * cg_conv2d's, copied into the layer; forward is cg_conv2d(x, weight,
 * bias, opts).  Sizes that are not positive, groups that do not divide
 * both channel counts, or negative options give CG_EINVAL. */
cg_module *cg_conv2d_new(cg_context *ctx, int in_channels, int out_channels,
                         const int kernel[2], int bias,
                         const cg_conv_options *opts);
cg_tensor *cg_conv2d_forward(cg_module *m, cg_tensor *x);

/* Batch normalisation layers, as PyTorch's BatchNorm1d (input [N, C] or
 * [N, C, L]) and BatchNorm2d ([N, C, H, W]) with num_features = C: with
 * affine nonzero, parameters "weight" (ones) and "bias" (zeros) [C];
 * with track_running_stats nonzero, buffers "running_mean" (zeros) and
 * "running_var" (ones) [C] and the count "num_batches_tracked" (0).
 * PyTorch's defaults are eps 1e-5, momentum 0.1, affine 1,
 * track_running_stats 1.  Forward is cg_batch_norm: in training mode
 * (cg_module_set_training) with the batch's statistics, updating the
 * running ones and adding 1 to the count; in eval mode with the running
 * statistics (the batch's when the layer keeps none).  The buffers and
 * the count are saved and restored with the parameters by
 * cg_checkpoint_add_module and cg_checkpoint_restore_module, under
 * PyTorch's state-dict names; the count is saved as I64, as PyTorch does.
 * num_features < 1, eps negative or not finite, or momentum outside
 * [0, 1] give CG_EINVAL. */
cg_module *cg_batch_norm1d_new(cg_context *ctx, int num_features, float eps,
                               float momentum, int affine,
                               int track_running_stats);
cg_module *cg_batch_norm2d_new(cg_context *ctx, int num_features, float eps,
                               float momentum, int affine,
                               int track_running_stats);
/* Forward of either; a wrong input rank gives CG_ESHAPE. */
cg_tensor *cg_batch_norm_forward(cg_module *m, cg_tensor *x);
/* Borrowed pointers to a batch norm layer's running statistics (valid
 * until cg_module_free; any output may be NULL) and its count of training
 * batches.  CG_EINVAL for another layer or one without running
 * statistics. */
int cg_batch_norm_stats(const cg_module *m, cg_tensor **running_mean,
                        cg_tensor **running_var,
                        int64_t *num_batches_tracked);

/* Pooling layers, as PyTorch's MaxPool2d and AvgPool2d (no parameters):
 * kernel {kh, kw}; stride NULL means the kernel; padding NULL means 0
 * (at most half the kernel); dilation 1, ceil_mode off and, for average
 * pooling, count_include_pad on, as PyTorch's defaults.  Forward is
 * cg_max_pool2d / cg_avg_pool2d through cg_module_forward.  A kernel or
 * stride below 1 or a padding outside 0 .. kernel / 2 give CG_EINVAL. */
cg_module *cg_max_pool2d_new(cg_context *ctx, const int kernel[2],
                             const int stride[2], const int padding[2]);
cg_module *cg_avg_pool2d_new(cg_context *ctx, const int kernel[2],
                             const int stride[2], const int padding[2]);

/* Adaptive average pooling to out_h x out_w, as nn.AdaptiveAvgPool2d
 * (forward cg_adaptive_avg_pool2d); sizes below 1 give CG_EINVAL. */
cg_module *cg_adaptive_avg_pool2d_new(cg_context *ctx, int out_h,
                                      int out_w);

/* A transposed convolution layer, as nn.ConvTranspose2d: parameters
 * "weight" [in_channels, out_channels / groups, kernel[0], kernel[1]] and
 * "bias" [out_channels] (none if bias is 0), both U(-1/sqrt(fan_in),
 * 1/sqrt(fan_in)) with fan_in = out_channels / groups * kernel[0] *
 * kernel[1], as PyTorch computes it from the weight's shape.  opts (NULL:
 * the defaults) are cg_conv_transpose2d's, copied; forward (through
 * cg_module_forward) is cg_conv_transpose2d(x, weight, bias, opts).
 * Sizes that are not positive, groups that do not divide both channel
 * counts or negative options give CG_EINVAL. */
cg_module *cg_conv_transpose2d_new(cg_context *ctx, int in_channels,
                                   int out_channels, const int kernel[2],
                                   int bias,
                                   const cg_conv_transpose_options *opts);

/* A layer that flattens dimensions start_dim .. end_dim, as nn.Flatten
 * (PyTorch's defaults: 1, -1); forward is cg_flatten through
 * cg_module_forward. */
cg_module *cg_flatten_new(cg_context *ctx, int start_dim, int end_dim);

/* Recurrent layers with PyTorch's semantics and parameter layout.  Cells,
 * with G gate blocks of H units each:
 *   CG_RNN_TANH, CG_RNN_RELU (G = 1):  h' = act(W_ih x + b_ih + W_hh h + b_hh)
 *   CG_LSTM (G = 4, gates i, f, g, o): c' = f c + i g, h' = o tanh(c')
 *   CG_GRU (G = 3, gates r, z, n):     n = tanh(W_in x + b_in +
 *                                          r (W_hn h + b_hn)),
 *                                      h' = (1 - z) n + z h
 * Parameters per layer k and direction (suffix "_reverse" for the second):
 * weight_ih_l{k} [G*H, in] (in = input_size for k = 0, else D*H),
 * weight_hh_l{k} [G*H, H], bias_ih_l{k} and bias_hh_l{k} [G*H], all
 * U(-1/sqrt(H), 1/sqrt(H)).
 *
 * How it runs: per layer, the input projection of every time step and
 * both directions is one GEMM (CLBlast); each time step is then one fused
 * kernel launch per direction that adds h W_hh^T, applies the gates and
 * updates the state; backward is one launch per step and direction (plus
 * one), and the weight gradients are one GEMM each over all steps.  No
 * host synchronisation inside a sequence.  The launches are counted in
 * cg_memory_stats.kernels_enqueued. */
typedef enum cg_rnn_mode {
    CG_RNN_TANH = 0,
    CG_RNN_RELU = 1,
    CG_LSTM = 2,
    CG_GRU = 3
} cg_rnn_mode;

typedef struct cg_rnn_options {
    cg_rnn_mode mode;
    int input_size;
    int hidden_size;
    int num_layers;         /* 0 means 1 */
    int bidirectional;      /* nonzero: D = 2 directions, else D = 1 */
    int batch_first;        /* x and output are [B, T, .], else [T, B, .] */
    float dropout;          /* on each layer's output but the last, in
                             * training mode; in [0, 1) */
} cg_rnn_options;

cg_module *cg_rnn_new(cg_context *ctx, const cg_rnn_options *options);

/* Runs the layer over x ([T, B, input_size], or [B, T, input_size] with
 * batch_first).  h0 (and c0, LSTM only) are the initial states [L*D, B, H]
 * (layer-major, directions inner, as PyTorch), or NULL for zeros; any
 * layout is accepted and they get gradients.  lengths, if not NULL, gives B
 * sequence lengths in 1..T, in any order: as with PyTorch's packed
 * sequences, steps at or past a sequence's length output zeros and leave
 * its state alone, the reverse direction starts at the sequence's own last
 * step, and the final state is the one at its own last step.  The host
 * array is copied; the call does not wait for the device.
 *
 * Results (caller owns each): *output [T, B, D*H] (or [B, T, D*H]), the
 * directions side by side; *h_n and *c_n [L*D, B, H].  h_n and c_n may be
 * NULL when not wanted; c_n must be NULL unless the mode is CG_LSTM.  For
 * truncated BPTT, pass cg_detach(h_n) (no copy) as the next call's h0.
 *
 * Dtypes: x, h0, c0 and the layer's parameters share one: float32, or
 * float16 or bfloat16 (a layer put in half precision with
 * cg_module_to_dtype), else CG_EDTYPE naming both.  In 16 bits the
 * outputs, the saved activations and the gradients are of that dtype,
 * each value rounded once: the products are summed in float32 and the
 * gates and the LSTM cell state computed and carried in float32 (c_n is
 * rounded once at the end).  Under autocast (cg_autocast_begin) the layer
 * runs in the region's dtype on x, h0, c0 and its parameters cast to it
 * (the parameters' casts kept for the region), so float32 parameters get
 * float32 gradients.
 * Errors (CG_EINVAL, CG_ESHAPE, CG_EDTYPE, CG_ECONTEXT) name the bad
 * argument and change nothing. */
int cg_rnn_forward(cg_module *m, cg_tensor *x, cg_tensor *h0, cg_tensor *c0,
                   const int *lengths, cg_tensor **output, cg_tensor **h_n,
                   cg_tensor **c_n);

/* Containers, as PyTorch's nn.Sequential: a module holding child modules
 * in order, each under a name.  Its parameters (cg_module_num_params,
 * cg_module_param, cg_module_find_param, cg_module_params) are the
 * children's, child by child, named child + "." + the child's parameter
 * name ("0.weight", "fc1.bias", "1.0.weight" for nested containers), as
 * model.state_dict() names them, so cg_checkpoint_add_module and
 * cg_checkpoint_restore_module take the whole model at once.
 * cg_module_set_training and cg_module_zero_grad reach every child;
 * cg_module_free frees the children with the container. */
cg_module *cg_sequential_new(cg_context *ctx);

/* Appends `child` under `name` (NULL: its position, "0", "1", ..., as
 * nn.Sequential names them; else 1..63 bytes without '.', unique among
 * the children).  On success the container owns the child: the caller's
 * reference passes to it, so the caller must not free the child (it stays
 * usable, borrowed, until the container is freed).  On error the caller
 * still owns the child and nothing changed: CG_EINVAL for a NULL or non-
 * container m, a NULL child (the message carries the error that made it
 * NULL, so cg_module_add(seq, NULL, cg_linear_new(...)) reports the
 * linear's), a bad or repeated name, a child already in a container or
 * that would hold m; CG_ECONTEXT for a child of another context. */
int cg_module_add(cg_module *m, const char *name, cg_module *child);
/* The number of children (0 for a layer that is no container, -1 for
 * NULL), and child i, borrowed, with its name (valid as long as m), or
 * NULL (CG_EINVAL) if i is out of range. */
int cg_module_num_children(const cg_module *m);
cg_module *cg_module_child(const cg_module *m, int i, const char **name);

/* Copies borrowed pointers to m's parameters, in cg_module_param order,
 * into params[0 .. max-1] (for the optimizers and gradient clipping) and
 * returns how many parameters there are, which may exceed max (call with
 * max 0 to size the array).  -1 with CG_EINVAL for a NULL m, or a NULL
 * params with max > 0. */
int cg_module_params(const cg_module *m, cg_tensor **params, int max);

/* A layer without parameters applying an activation: name is "relu",
 * "tanh", "sigmoid" or "gelu" (else CG_EINVAL); its kind is that name. */
cg_module *cg_activation_new(cg_context *ctx, const char *name);

/* The forward of a one-input layer: linear, embedding, conv2d,
 * conv_transpose2d, batch norm, pooling, flatten, an activation, or a
 * container (each child's forward applied in order; every child must be
 * one of these).  A recurrent layer takes states: call cg_rnn_forward
 * (CG_EINVAL here).  The caller owns the result.
 *
 * In a container, a linear layer directly followed by a relu, tanh or
 * sigmoid layer runs as one op: the activation is applied in the matrix
 * product's epilogue, recorded as one graph node "linear_relu"
 * ("linear_tanh", "linear_sigmoid") that keeps the activation's output
 * and not the product, and whose backward runs the activation's gradient
 * from that output.  The output and every gradient are bit for bit those
 * of the two layers run one by one; it saves a pass over the output and
 * one saved tensor per pair.  For float16 and bfloat16, only relu fuses
 * (tanh and sigmoid of a 16-bit product round the product first, as the
 * separate layers do); where CLBlast runs the product (it has no
 * epilogue), the activation runs as its own op. */
cg_tensor *cg_module_forward(cg_module *m, cg_tensor *x);

/* ------------------------------------------------------------------------
 * Optimizers
 *
 * SGD, Adam, AdamW and RMSprop with PyTorch 1.13's semantics and float32
 * arithmetic order (torch.optim's single-tensor code paths).  One
 * optimizer updates one group of parameters with one learning rate.
 *
 * Parameters are float32, float16 or bfloat16, contiguous, leaf tensors
 * that require grad, of one context, each named once.  A 16-bit parameter
 * has fp32 master weights: the optimizer keeps a float32 copy "master",
 * made from the parameter when the optimizer is made, and float32 state;
 * each step reads the 16-bit gradient, updates master and state in
 * float32 exactly as a float32 parameter with that gradient would be, and
 * writes the master rounded to nearest even into the parameter, all in
 * the one launch.  So change a 16-bit parameter's value through the
 * master (cg_optim_state_set "master.INDEX", or a restored checkpoint),
 * not by writing the parameter.  The optimizer holds a reference to each;
 * the caller keeps its own.  cg_optim_step updates every parameter that has
 * a gradient, in place, with one kernel launch per parameter; parameters
 * whose gradient is NULL are skipped (their state and step count do not
 * change), as in PyTorch.  Steps are enqueued without waiting and record
 * nothing in the graph.
 *
 * Hyper-parameters are doubles on the host, as PyTorch's Python floats are,
 * and reach the kernels rounded to float32 the way PyTorch rounds them.
 * In the options structs a zero field means PyTorch's default where the
 * comment gives one; CG_OPTIM_ZERO (-0.0) asks for an exact zero in a
 * field whose zero would otherwise mean the default (a beta of 0, say).
 *
 * State, for checkpoints: every state tensor has a name "KIND.INDEX", KIND
 * being PyTorch's state key and INDEX the parameter's position in the
 * params array given to the constructor:
 *   SGD      momentum_buffer   (when momentum != 0, from the parameter's
 *                               first step on, as PyTorch creates it then)
 *   Adam(W)  exp_avg, exp_avg_sq, max_exp_avg_sq (amsgrad only)
 *   RMSprop  square_avg, momentum_buffer (momentum > 0), grad_avg (centered)
 *   any      master            (a float16 or bfloat16 parameter's float32
 *                               master weights; last of its kinds)
 * plus each parameter's step count.  Writing back what was read
 * (cg_optim_state_set, cg_optim_set_step) into an optimizer made with the
 * same options over parameters with the same values continues bit-for-bit
 * as the original would have.
 * ------------------------------------------------------------------------ */
typedef struct cg_optimizer cg_optimizer;

/* An explicit zero for an options field whose 0 means "default". */
#define CG_OPTIM_ZERO (-0.0)

/* SGD.  Defaults: lr 1e-3 (PyTorch >= 2.2; 1.13 had none), and zero for
 * the rest.  With momentum m and dampening d the buffer starts as the first
 * gradient and is then b = m b + (1 - d) g; nesterov (needs m > 0 and
 * d = 0) steps along g + m b instead of b.  weight_decay adds wd * p to the
 * gradient; maximize ascends. */
typedef struct cg_sgd_options {
    double lr;
    double momentum;
    double dampening;
    double weight_decay;
    int nesterov;
    int maximize;
} cg_sgd_options;

/* Adam and AdamW.  Defaults: lr 1e-3, beta1 0.9, beta2 0.999, eps 1e-8;
 * weight_decay 0 for Adam (an L2 term added to the gradient) and 1e-2 for
 * AdamW (decoupled: p *= 1 - lr * wd before the update); amsgrad keeps the
 * running maximum of exp_avg_sq and divides by it; maximize ascends. */
typedef struct cg_adam_options {
    double lr;
    double beta1;
    double beta2;
    double eps;
    double weight_decay;
    int amsgrad;
    int maximize;
} cg_adam_options;

/* RMSprop.  Defaults: lr 1e-2, alpha 0.99, eps 1e-8, and zero for the
 * rest.  centered divides by the estimated variance instead of the raw
 * second moment; momentum > 0 keeps a buffer of the scaled steps. */
typedef struct cg_rmsprop_options {
    double lr;
    double alpha;
    double eps;
    double weight_decay;
    double momentum;
    int centered;
    int maximize;
} cg_rmsprop_options;

/* Makes an optimizer over params[0..nparams-1] (nparams >= 1); opts may be
 * NULL (all defaults).  A NULL, non-contiguous, non-leaf or repeated
 * parameter, one that does not require grad, or an option outside
 * PyTorch's range (lr, eps, weight_decay, momentum, dampening, alpha < 0
 * or not finite, betas outside [0, 1), nesterov without momentum or with
 * dampening) gives CG_EINVAL naming it; an int32 parameter CG_EDTYPE,
 * a parameter of another context CG_ECONTEXT; the result is then NULL.
 * The state is allocated on the device here (zeros).  The caller owns the
 * optimizer; free it with cg_optim_free. */
cg_optimizer *cg_optim_sgd_new(cg_context *ctx, cg_tensor *const *params,
                               int nparams, const cg_sgd_options *opts);
cg_optimizer *cg_optim_adam_new(cg_context *ctx, cg_tensor *const *params,
                                int nparams, const cg_adam_options *opts);
cg_optimizer *cg_optim_adamw_new(cg_context *ctx, cg_tensor *const *params,
                                 int nparams, const cg_adam_options *opts);
cg_optimizer *cg_optim_rmsprop_new(cg_context *ctx,
                                   cg_tensor *const *params, int nparams,
                                   const cg_rmsprop_options *opts);

/* Drops the caller's reference: the optimizer, its state and its
 * references to the parameters go when no schedule holds it either.  NULL
 * is ignored. */
void cg_optim_free(cg_optimizer *opt);

/* One update of every parameter that has a gradient.  A gradient that is
 * not a contiguous tensor of its parameter's dtype and shape gives
 * CG_ESHAPE (CG_EDTYPE) and nothing is enqueued.  Each parameter is
 * updated by one launch, in order, so a launch failure part-way (an error)
 * leaves every parameter, with its state and step count, either wholly
 * stepped or untouched: those before the failing one have stepped, it and
 * those after it have not, and cg_optim_get_step tells which
 * (tests/test_faults.c). */
int cg_optim_step(cg_optimizer *opt);

/* Drops every parameter's gradient (cg_tensor_zero_grad: PyTorch's
 * zero_grad(set_to_none=True)). */
int cg_optim_zero_grad(cg_optimizer *opt);

/* The learning rate of the next step.  set_lr takes a finite lr >= 0, else
 * CG_EINVAL; a schedule overwrites it at its next step.  get_lr returns -1
 * for a NULL optimizer. */
int cg_optim_set_lr(cg_optimizer *opt, double lr);
double cg_optim_get_lr(const cg_optimizer *opt);

/* The number of parameters (the constructor's nparams), or -1 for NULL. */
int cg_optim_param_count(const cg_optimizer *opt);

/* The number of state tensors there are now (a kind PyTorch creates at a
 * parameter's first step, SGD's momentum_buffer, appears then), or -1 for
 * NULL; and state tensor i (0 <= i < count): its name ("exp_avg.3", valid
 * until the optimizer is freed) and the tensor, borrowed: it is the live
 * state (take cg_tensor_ref to keep it; cg_tensor_to_host reads it after
 * the queued steps).  Either output may be NULL.  The order is by
 * parameter, then kind. */
int cg_optim_state_count(const cg_optimizer *opt);
int cg_optim_state_get(const cg_optimizer *opt, int i, const char **name,
                       cg_tensor **tensor);

/* Copies `value` (float32, the parameter's shape, any layout, this
 * context) into the state tensor `name`, creating it if the optimizer has
 * that kind of state but the parameter has not made it yet.  An unknown
 * name (or a kind these options do not use, or "master" of a float32
 * parameter) gives CG_EINVAL, a wrong shape CG_ESHAPE.  Enqueued like an
 * op: no wait (but after cg_grad_scaler_step it reads the device step
 * counts back first). */
int cg_optim_state_set(cg_optimizer *opt, const char *name,
                       cg_tensor *value);

/* Parameter `index`'s step count: the steps it has taken (Adam's bias
 * corrections use it; SGD and RMSprop only count).  set_step takes
 * step >= 0.  After cg_grad_scaler_step the counts are on the device:
 * these (and cg_optim_step, and checkpointing the optimizer) read them
 * back, one wait. */
int cg_optim_get_step(const cg_optimizer *opt, int index, int64_t *step);
int cg_optim_set_step(cg_optimizer *opt, int index, int64_t step);

/* ------------------------------------------------------------------------
 * Gradient clipping, as torch.nn.utils.clip_grad_norm_ and
 * clip_grad_value_.  Tensors without a gradient are skipped; gradients
 * are changed in place.
 * ------------------------------------------------------------------------ */

/* Scales the gradients of params[0..n-1] by min(1, max_norm / (total +
 * 1e-6)), total being the norm of all of them together: norm_type p > 0
 * ((sum |g|^p)^(1/p); 2 is usual) or INFINITY (the largest |g|).  The
 * total and the scale are computed on the device by a fixed-order
 * reduction (no atomics: bit-identical from run to run) and applied there,
 * so nothing waits unless total_norm is non-NULL: then the total is read
 * back into *total_norm (one synchronisation).  With no gradient at all
 * the total is 0 and nothing is enqueued.  A NULL parameter, one of
 * another context, a gradient of another dtype, max_norm < 0 or NaN, or
 * norm_type <= 0 or NaN give CG_EINVAL (CG_ECONTEXT, CG_EDTYPE) and change
 * nothing. */
int cg_clip_grad_norm(cg_tensor *const *params, int n, double max_norm,
                      double norm_type, float *total_norm);

/* Clamps every gradient element of params[0..n-1] to [-clip, clip]
 * (clip >= 0, else CG_EINVAL).  One launch per gradient, no wait.
 * Both take float32, float16 and bfloat16 gradients (16-bit ones are
 * read and written in their dtype; the norm is accumulated in float32). */
int cg_clip_grad_value(cg_tensor *const *params, int n, double clip);

/* ------------------------------------------------------------------------
 * Data parallelism, as torch.nn.parallel.DistributedDataParallel
 *
 * A cg_dp trains one model as replicas, one per device: each replica
 * computes the gradients of its shard of the batch, the gradients are
 * averaged across all replicas, and each replica's optimizer then takes
 * the same step, so the replicas stay equal and training equals one device
 * on the whole batch, to rounding.  Gradients travel in buckets, in
 * reverse parameter order (the order backward makes them; the first
 * bucket is small so that communication starts early): a bucket's
 * reduction starts as soon as backward has made all of its gradients on
 * every replica, while backward goes on with the earlier layers.  The
 * reduction order is fixed, so a run gives the same result every time for
 * a world size.
 *
 * Replicas live in one process (cg_dp_new: a context per device, one host
 * thread driving each, gradients summed in host memory) or one per process
 * across processes and machines (cg_dp_new_mpi, in a clgrad configured
 * with MPI; launched with mpirun).  The world size is the number of
 * replicas in all; a replica's rank its place among them.
 * ------------------------------------------------------------------------ */
typedef struct cg_dp cg_dp;

/* Bucket sizes in MiB.  A field left 0 takes the tuning database's entry
 * "dp" (shape "any"; parameters bucket_kb and first_bucket_kb, in KiB,
 * which clgrad-tune's stage "dp" measures) in force on replica 0's
 * context (across processes: rank 0's sizes hold on every rank), else
 * PyTorch DDP's defaults, 25 and 1.  cg_dp_get_stats says which sizes a
 * cg_dp uses and where they came from. */
typedef struct cg_dp_options {
    double bucket_mb;       /* a bucket's size (0: tuning, else 25) */
    double first_bucket_mb; /* the first bucket's (0: tuning, else 1) */
} cg_dp_options;

/* A data-parallel model of n in-process replicas (1 <= n <= CG_DP_MAX):
 * replicas[i] is a module on its own context and opts[i] an optimizer
 * over cg_module_params(replicas[i]), in that order.  The replicas must
 * have the same parameters (count, names, shapes; float32); replica 0's
 * parameter values, optimizer state and step counts are copied to the
 * others (cg_dp_broadcast).  Mismatched replicas give CG_ESHAPE naming the
 * first parameter that differs, a context used twice CG_ECONTEXT, a
 * 16-bit parameter CG_EDTYPE.  The modules and optimizers stay the
 * caller's: free them after cg_dp_free, and use them only between
 * cg_dp calls.  opts may be NULL (defaults). */
#define CG_DP_MAX 16
cg_dp *cg_dp_new(int n, cg_module *const *replicas,
                 cg_optimizer *const *opts, const cg_dp_options *options);

/* The same with one replica per process: module and optimizer are this
 * process's, on the device of its choice (by its local rank, say).  Every
 * process of MPI_COMM_WORLD calls it; MPI is initialised here (thread
 * level MPI_THREAD_MULTIPLE) unless the program has done so.  Rank 0's
 * parameters and optimizer state are sent to the others; a process whose
 * parameters differ in count or shapes from rank 0's makes every process
 * fail with CG_ESHAPE.  CG_EUNSUPPORTED in a clgrad built without MPI. */
cg_dp *cg_dp_new_mpi(cg_module *module, cg_optimizer *opt,
                     const cg_dp_options *options);

/* Waits for and frees the data-parallel state (not the modules or
 * optimizers).  NULL is ignored.  After the last MPI one, MPI is finalised
 * if cg_dp_new_mpi initialised it. */
void cg_dp_free(cg_dp *dp);

/* The number of replicas in all processes, this process's first replica's
 * rank (0 in-process), and the number of replicas in this process. */
int cg_dp_world_size(const cg_dp *dp);
int cg_dp_rank(const cg_dp *dp);
int cg_dp_local_count(const cg_dp *dp);

/* Computes replica `rank`'s loss on its shard: a new one-element float32
 * tensor on m's context, stored in *loss (cg_dp_step frees it); returns
 * CG_OK or an error status.  Called for every local replica at once, each
 * from its own host thread, which may use only that replica's context
 * (its module, its tensors).  user is cg_dp_step's. */
typedef int (*cg_dp_loss_fn)(void *user, int rank, cg_module *m,
                             cg_tensor **loss);

/* Updates replica `rank` once its gradients are averaged: what a
 * training loop does between backward and the next step (clip the
 * gradients, step a cg_grad_scaler, then the optimizer).  Called like the
 * loss function, from the replica's thread.  user is cg_dp_step's. */
typedef int (*cg_dp_update_fn)(void *user, int rank, cg_module *m,
                               cg_optimizer *opt);

/* One training step: drops the replicas' gradients, calls loss for each
 * local replica, runs backward, averages every gradient over the world
 * (in buckets, overlapping backward), then updates each replica: update
 * (NULL: cg_optim_step of its optimizer).  A parameter that got no
 * gradient on a replica counts as a zero gradient there.  losses, if not
 * NULL, receives each local replica's loss (cg_dp_local_count values;
 * one wait).  An error on any replica (the loss function's, backward's)
 * is returned naming the replica, and then no replica is updated. */
int cg_dp_step(cg_dp *dp, cg_dp_loss_fn loss, cg_dp_update_fn update,
               void *user, float *losses);

/* The mean over every replica of the world of one host value per local
 * replica, local[0 .. cg_dp_local_count - 1] (their losses, say), into
 * *mean; across processes a collective call: every rank makes it. */
int cg_dp_mean(cg_dp *dp, const float *local, double *mean);

/* Gathers n floats from every replica of the world into all[world * n],
 * in rank order, on every process: local holds the local replicas' n
 * each, in order.  Across processes a collective call. */
int cg_dp_gather(cg_dp *dp, const float *local, size_t n, float *all);

/* Copies rank 0's parameters, optimizer state and step counts to every
 * replica: after loading a checkpoint into rank 0's (on resume). */
int cg_dp_broadcast(cg_dp *dp);

/* What the last cg_dp_step communicated, and when (for one local replica;
 * host times in seconds). */
typedef struct cg_dp_stats {
    int world_size;
    int buckets;              /* buckets per step */
    int params;               /* parameters (gradient tensors) */
    double bytes;             /* gradient bytes each replica sent */
    double reduce_s;          /* time spent reducing buckets */
    double exposed_s;         /* of which after backward had returned on
                               * every local replica: not hidden */
    /* Overlap, by queue order: backward's launches on replica 0's queue,
     * and how many of them had been queued when the first bucket's read
     * was queued (less than all: it ran while backward went on). */
    int backward_launches;
    int first_bucket_after;
    /* The bucket sizes in MiB, and where they came from: "cg_dp_options",
     * "tuning (ORIGIN)" with the entry's file or "shipped:NAME",
     * "default", or a mix ("cg_dp_options; first bucket default"); on a
     * rank other than 0, "rank 0's: ..." */
    double bucket_mb, first_bucket_mb;
    char bucket_origin[256];
} cg_dp_stats;
int cg_dp_get_stats(const cg_dp *dp, cg_dp_stats *stats);

/* ------------------------------------------------------------------------
 * Dynamic loss scaling, as torch.cuda.amp.GradScaler
 *
 *     loss = ...;  scaled = cg_grad_scaler_scale(sc, loss);
 *     cg_backward(scaled, NULL, 0);
 *     [cg_grad_scaler_unscale(sc, opt);  cg_clip_grad_norm(...);]
 *     cg_grad_scaler_step(sc, opt);  cg_grad_scaler_update(sc);
 *
 * The scale, the growth tracker, found_inf and a count of skipped steps
 * live on the device, and nothing here waits for it: the optimizer
 * kernels read found_inf and the inverse scale from device memory and do
 * nothing at all when a gradient held inf or NaN, and the update is a
 * kernel.  Only the queries (get_scale, skipped_steps, growth_tracker)
 * read back, for logging at intervals.  The scale is a float32 and its
 * inverse 1 / scale rounded to float32 (exact for the power-of-two
 * scales the defaults give).
 *
 * Skipped steps advance nothing: while a scaler steps an optimizer its
 * step counts live on the device and count only the steps taken, and
 * Adam(W) computes its bias corrections there, in float32, as PyTorch's
 * capturable=True path does (beta^step as exp2(step log2 beta), within a
 * few ulp of float32 pow; so not bit-identical to the host-computed
 * corrections of cg_optim_step); SGD's momentum buffer is made at the
 * first step taken (cg_optim_state_get lists it from the first scaled
 * step on, zeros until a step is taken).  growth_factor and
 * backoff_factor are applied in float32 (PyTorch multiplies the float32
 * scale by a double; the same for the default powers of two).  With
 * several optimizers one found_inf serves them all: an inf found for one
 * skips the optimizers stepped after it in the same iteration too.
 * ------------------------------------------------------------------------ */
typedef struct cg_grad_scaler cg_grad_scaler;

/* Zero fields mean GradScaler's defaults: init_scale 65536 (2^16),
 * growth_factor 2, backoff_factor 0.5, growth_interval 2000. */
typedef struct cg_grad_scaler_options {
    double init_scale;          /* > 0, a finite float32 */
    double growth_factor;       /* > 1 */
    double backoff_factor;      /* in (0, 1) */
    int growth_interval;        /* 1 .. 2^24 clean steps */
} cg_grad_scaler_options;

/* A new scaler (opts may be NULL); a bad option gives CG_EINVAL and
 * NULL.  Free it with cg_grad_scaler_free (NULL is ignored). */
cg_grad_scaler *cg_grad_scaler_new(cg_context *ctx,
                                   const cg_grad_scaler_options *opts);
void cg_grad_scaler_free(cg_grad_scaler *s);

/* loss * scale, float32 (a 16-bit loss is cast up first), recorded in the
 * graph: backward from it gives gradients scaled by the scale.  The scale
 * is read on the device when the product runs. */
cg_tensor *cg_grad_scaler_scale(cg_grad_scaler *s, cg_tensor *loss);

/* Optional, before clipping: multiplies every gradient of opt by the
 * inverse scale in place (in its dtype, as PyTorch's unscale_) and notes
 * any inf/NaN in found_inf.  A second call for the same optimizer before
 * cg_grad_scaler_update gives CG_ESTATE. */
int cg_grad_scaler_unscale(cg_grad_scaler *s, cg_optimizer *opt);

/* Checks opt's gradients for inf/NaN (unless cg_grad_scaler_unscale did)
 * and enqueues opt's step on the unscaled gradients (unscaled in registers:
 * the gradients in memory stay scaled), which the device skips when
 * found_inf is set: parameters, masters, state and step counts unchanged.
 * Bad gradients give what cg_optim_step gives; a NULL argument CG_EINVAL,
 * another context CG_ECONTEXT. */
int cg_grad_scaler_step(cg_grad_scaler *s, cg_optimizer *opt);

/* GradScaler.update(): on found_inf scale *= backoff_factor, the tracker
 * reset and one more skipped step; else the tracker counts one more clean
 * step and at growth_interval scale *= growth_factor (unless that is
 * inf) and the tracker restarts.  Clears found_inf.  One launch. */
int cg_grad_scaler_update(cg_grad_scaler *s);

/* Read back (waiting for the queue): the scale, the number of updates
 * that found inf/NaN (steps skipped), the growth tracker. */
int cg_grad_scaler_get_scale(const cg_grad_scaler *s, float *scale);
int cg_grad_scaler_skipped_steps(const cg_grad_scaler *s, int64_t *count);
int cg_grad_scaler_growth_tracker(const cg_grad_scaler *s, int *tracker);

/* Sets the scale (> 0, finite) and the growth tracker (0 .. interval - 1)
 * (GradScaler.load_state_dict), e.g. to resume a run from what get_scale
 * and growth_tracker returned; a bad value gives CG_EINVAL and changes
 * nothing.  Waits for the queue. */
int cg_grad_scaler_set_state(cg_grad_scaler *s, float scale, int tracker);

/* ------------------------------------------------------------------------
 * Learning-rate schedules
 *
 * A schedule sets its optimizer's lr from a position t (PyTorch's
 * last_epoch): the constructor takes the optimizer's current lr as the base
 * and sets lr(0); each cg_lr_schedule_step then advances t by one and sets
 * lr(t), so call it after cg_optim_step, as in PyTorch.  Values come from
 * closed forms in double, so they depend on t alone (PyTorch's recursive
 * forms agree to about 1e-15 relative):
 *   step         base * gamma^floor(t / step_size)           (StepLR)
 *   exponential  base * gamma^t                              (ExponentialLR)
 *   cosine       t < W:  base * (s + (1 - s) t / W)
 *                t >= W: eta_min + (base - eta_min) (1 + cos(pi (t - W) /
 *                        (T - W))) / 2
 *                with W warm-up steps starting from factor s and T steps
 *                in all (LinearLR then CosineAnnealingLR in a
 *                SequentialLR); past T the cosine goes on (the lr rises
 *                again), as PyTorch's does.
 * The schedule holds a reference to its optimizer, so either may be freed
 * first.  The caller owns the schedule; free it with cg_lr_schedule_free.
 * ------------------------------------------------------------------------ */
typedef struct cg_lr_schedule cg_lr_schedule;

/* step_size >= 1 and a finite gamma > 0, else CG_EINVAL and NULL. */
cg_lr_schedule *cg_lr_schedule_step_new(cg_optimizer *opt,
                                        int64_t step_size, double gamma);
/* A finite gamma > 0. */
cg_lr_schedule *cg_lr_schedule_exponential_new(cg_optimizer *opt,
                                               double gamma);
/* 0 <= warmup_steps < total_steps, 0 <= warmup_start_factor <= 1 (unused
 * when warmup_steps is 0), a finite eta_min >= 0. */
cg_lr_schedule *cg_lr_schedule_cosine_new(cg_optimizer *opt,
                                          int64_t warmup_steps,
                                          double warmup_start_factor,
                                          int64_t total_steps,
                                          double eta_min);

/* Advances the position by one and sets the optimizer's lr. */
int cg_lr_schedule_step(cg_lr_schedule *sched);

/* The position (0 after the constructor; -1 for NULL), and setting it
 * (>= 0, for resuming from a checkpoint), which sets the optimizer's lr to
 * lr(position). */
int64_t cg_lr_schedule_get_position(const cg_lr_schedule *sched);
int cg_lr_schedule_set_position(cg_lr_schedule *sched, int64_t position);

/* The base lr (the optimizer's lr when the schedule was made; -1 for
 * NULL). */
double cg_lr_schedule_base_lr(const cg_lr_schedule *sched);

/* Frees the schedule; the optimizer's lr stays as it is.  NULL is
 * ignored. */
void cg_lr_schedule_free(cg_lr_schedule *sched);

/* ------------------------------------------------------------------------
 * Checkpoints
 *
 * A checkpoint is an ordered set of named tensors and string metadata,
 * saved as a safetensors file: an 8-byte little-endian header length N,
 * N bytes of JSON (an object mapping each tensor's name to its "dtype"
 * ("F32", "I32", "I64", "F16" or "BF16"), "shape" and "data_offsets"
 * [begin, end) within the data, and "__metadata__" to a string-to-string
 * map), then the raw little-endian data.  The safetensors package and
 * PyTorch read these files, and clgrad reads theirs when every tensor is
 * F32, I32, I64, F16 or BF16 (torch.float16 and torch.bfloat16 tensors
 * load as CG_F16 and CG_BF16 tensors, bit for bit, and the reverse).
 * I64 entries stay on the host (cg_checkpoint_tensor_data): no device
 * tensor is int64; batch norm layers read their num_batches_tracked from
 * one (cg_checkpoint_restore_module).
 * Parameters keep PyTorch's names (cg_checkpoint_add_module with prefix
 * "lstm." gives "lstm.weight_ih_l0", as model.state_dict() does).
 *
 * Resuming a run: the model with cg_checkpoint_add_module, the optimizer's
 * state with cg_checkpoint_add_optimizer, the generator's state with
 * cg_checkpoint_add_generator, the training position (step, epoch, batch,
 * schedule) with cg_checkpoint_add_position, and anything else
 * (vocabulary, training configuration) as metadata (cg_checkpoint_set_meta*,
 * JSON text is fine as a value).  Each has its restore (get) below.
 *
 * A checkpoint holds host copies: adding a tensor copies its contents
 * (waiting for the work that computes it), and nothing in a checkpoint
 * refers to a context or a tensor afterwards.  Names and metadata are
 * copied too.  Names and metadata must be valid UTF-8 (CG_EINVAL).
 * ------------------------------------------------------------------------ */
typedef struct cg_checkpoint cg_checkpoint;

/* An empty checkpoint.  The caller owns it; free it with
 * cg_checkpoint_free. */
cg_checkpoint *cg_checkpoint_new(void);
/* NULL is ignored. */
void cg_checkpoint_free(cg_checkpoint *ck);

/* Copies t's elements (any layout; row-major in the file) under `name`,
 * replacing a tensor of that name.  Names are 1..1024 bytes and not
 * "__metadata__". */
int cg_checkpoint_add_tensor(cg_checkpoint *ck, const char *name,
                             const cg_tensor *t);
/* The same from host memory: numel(shape) elements of dtype, row-major.
 * Dimensions may be 0 here (an empty tensor). */
int cg_checkpoint_add_host(cg_checkpoint *ck, const char *name,
                           cg_dtype dtype, int ndim, const int64_t *shape,
                           const void *data);
/* Every parameter of m as prefix + its name (prefix may be NULL or ""),
 * then its buffers (batch norm's running statistics, F32, and
 * num_batches_tracked, I64 of shape []), as model.state_dict() holds
 * them.  On error nothing was added. */
int cg_checkpoint_add_module(cg_checkpoint *ck, const char *prefix,
                             const cg_module *m);

/* Sets metadata `key` (1..1024 bytes) to a copy of `value`, replacing any
 * earlier value.  A checkpoint without a "format" key is saved with
 * "format": "pt", as safetensors.torch writes. */
int cg_checkpoint_set_meta(cg_checkpoint *ck, const char *key,
                           const char *value);
/* The same with a number written in decimal ("%.17g" for a double, which
 * reads back exactly). */
int cg_checkpoint_set_meta_int(cg_checkpoint *ck, const char *key,
                               int64_t value);
int cg_checkpoint_set_meta_double(cg_checkpoint *ck, const char *key,
                                  double value);
/* Stores the context's generator state (cg_generator_state) as metadata
 * "clgrad.generator.seed" and "clgrad.generator.offset". */
int cg_checkpoint_add_generator(cg_checkpoint *ck, const cg_context *ctx);

/* Writes the checkpoint to `path` atomically: a temporary file beside it,
 * fsync, rename over `path`, fsync of the directory.  A crash or an error
 * at any point leaves the old file (or none) under `path`, never a
 * partial one.  I/O failures give CG_EIO naming the file. */
int cg_checkpoint_save(const cg_checkpoint *ck, const char *path);

/* Reads and validates a whole safetensors file: the header length against
 * the file's size, the JSON (strict, UTF-8, an object), every entry's
 * fields and types, dtypes (F32, I32, I64, F16, BF16; others are named in
 * the error),
 * shapes against byte ranges, and that the ranges neither overlap, leave
 * gaps nor run past the end of the file.  Any fault gives NULL with
 * CG_EFORMAT and a message naming the file, the entry and the fault (CG_EIO
 * if the file cannot be read).  The caller owns the result; free it with
 * cg_checkpoint_free. */
cg_checkpoint *cg_checkpoint_load(const char *path);

/* The tensors, in file order: their number and the name of the i-th
 * (NULL if i is out of range; valid as long as ck). */
int cg_checkpoint_num_tensors(const cg_checkpoint *ck);
const char *cg_checkpoint_tensor_name(const cg_checkpoint *ck, int i);
/* Dtype, ndim and shape (up to CG_MAX_DIMS entries) of tensor `name`;
 * any output may be NULL.  A missing name gives CG_EFORMAT. */
int cg_checkpoint_tensor_info(const cg_checkpoint *ck, const char *name,
                              cg_dtype *dtype, int *ndim, int64_t *shape);
/* Its elements in host memory, row-major, in the host's byte order
 * (borrowed: valid as long as ck), and their size in bytes if `bytes` is
 * not NULL.  NULL with CG_EFORMAT if there is no such tensor. */
const void *cg_checkpoint_tensor_data(const cg_checkpoint *ck,
                                      const char *name, size_t *bytes);
/* A new device tensor on ctx holding tensor `name` (caller owns).  A
 * tensor with a dimension of 0 cannot be made (CG_ESHAPE). */
cg_tensor *cg_checkpoint_tensor(const cg_checkpoint *ck, cg_context *ctx,
                                const char *name);

/* Metadata, in file order (a saved file keeps insertion order). */
int cg_checkpoint_num_meta(const cg_checkpoint *ck);
const char *cg_checkpoint_meta_key(const cg_checkpoint *ck, int i);
/* The value of `key`, borrowed, or NULL (CG_EFORMAT) if it is absent. */
const char *cg_checkpoint_get_meta(const cg_checkpoint *ck, const char *key);
/* The value as a whole decimal number / a floating-point number: absent
 * or not exactly that (trailing text, out of range) gives CG_EFORMAT and
 * leaves *value unchanged. */
int cg_checkpoint_get_meta_int(const cg_checkpoint *ck, const char *key,
                               int64_t *value);
int cg_checkpoint_get_meta_double(const cg_checkpoint *ck, const char *key,
                                  double *value);

/* Overwrites tensors[i] with checkpoint tensor names[i], for i < n.  Every
 * name, dtype and shape is checked before anything is written: a missing
 * name, another dtype or shape (CG_EFORMAT, naming both) or a non-
 * contiguous target (CG_EINVAL) changes no tensor.  Only a device failure
 * while writing could leave some tensors written. */
int cg_checkpoint_restore(const cg_checkpoint *ck, int n,
                          const char *const *names, cg_tensor *const *tensors);
/* Restores every parameter and buffer of m from prefix + its name, with
 * the same all-or-nothing checks; tensors the layer lacks are ignored
 * (optimizer state, other layers).  num_batches_tracked may be I64 or I32
 * of shape [] or [1], and must not be negative. */
int cg_checkpoint_restore_module(const cg_checkpoint *ck, const char *prefix,
                                 cg_module *m);
/* Sets ctx's generator from cg_checkpoint_add_generator's metadata
 * (CG_EFORMAT if it is missing or malformed; the generator is then left
 * alone). */
int cg_checkpoint_restore_generator(const cg_checkpoint *ck, cg_context *ctx);

/* An optimizer's state (see Optimizers): every state tensor there is now
 * (cg_optim_state_get) as prefix + its name, "optim.exp_avg.3", and each
 * parameter's step count as metadata prefix + "step." + index,
 * "optim.step.3".  prefix NULL means "optim.", the names clgrad-train has
 * always used; "" is CG_EINVAL.  The tensors are copied (waiting for the
 * queued steps).  On error nothing was added. */
int cg_checkpoint_add_optimizer(cg_checkpoint *ck, const char *prefix,
                                const cg_optimizer *opt);
/* Writes that state back into opt, which must be made with the same
 * options over parameters of the same shapes (its own parameters are not
 * touched: restore them with cg_checkpoint_restore_module).  Everything
 * is checked first, and any fault changes nothing: a missing step count,
 * a negative or malformed one, a state tensor of another dtype or shape
 * than its parameter, a state tensor missing for a parameter that has
 * taken steps, or a tensor under the prefix that is no state of this
 * optimizer (another kind of optimizer, more parameters) give CG_EFORMAT
 * naming the tensor or key.  State the checkpoint does not hold for a
 * parameter that has not stepped stays as it is.  Only a device failure
 * while writing (one transfer per tensor) can stop part-way: each state
 * tensor is then either as it was or as in the checkpoint, and a
 * parameter's step count is set only once all its state is written. */
int cg_checkpoint_restore_optimizer(const cg_checkpoint *ck,
                                    const char *prefix, cg_optimizer *opt);

/* Where a training run stands, as whole numbers >= 0, stored as metadata
 * "train.total", "train.step", "train.epoch", "train.index" and
 * "train.schedule" (clgrad-train's names). */
typedef struct cg_train_position {
    int64_t step;       /* optimizer steps taken */
    int64_t epoch;      /* the next batch's epoch (pass over the data) */
    int64_t index;      /* the next batch's index within its epoch */
    int64_t schedule;   /* cg_lr_schedule_get_position, 0 without one */
    int64_t total;      /* steps planned, 0 if open-ended */
} cg_train_position;

/* A negative field gives CG_EINVAL and adds nothing. */
int cg_checkpoint_add_position(cg_checkpoint *ck,
                               const cg_train_position *pos);
/* Reads the position into *pos: step, epoch and index must be present
 * (total and schedule read as 0 when absent); a missing, malformed or
 * negative value gives CG_EFORMAT naming the key and leaves *pos alone. */
int cg_checkpoint_get_position(const cg_checkpoint *ck,
                               cg_train_position *pos);

/* ------------------------------------------------------------------------
 * Data
 *
 * Loaders for training sets held in host memory, handing out batches as
 * new device tensors: a CSV table of numeric features and an integer class
 * label, and a text read as byte ids for character models.  data/ in the
 * source tree (installed under $(datadir)/clgrad) holds digits.csv, the
 * 8x8 handwritten digits, and kjv.txt, about 1 MB of English; data/README
 * says where they come from.
 *
 * Shuffles are Fisher-Yates driven by SplitMix64 on the host, seeded by
 * the caller and independent of the context's generator: an order depends
 * only on (seed, epoch), so a resumed run sees the same batches.  Errors in
 * a file give CG_EFORMAT (CG_EIO if it cannot be read) with the file name
 * and line number in cg_last_error().
 * ------------------------------------------------------------------------ */
typedef struct cg_dataset cg_dataset;

enum {
    CG_CSV_HEADER_DETECT = 0,  /* a first row with a non-number is one */
    CG_CSV_HEADER_NONE = 1,
    CG_CSV_HEADER_PRESENT = 2
};

typedef struct cg_csv_options {
    int label_column;  /* 0-based; negative counts from the end (-1: last) */
    int header;        /* CG_CSV_HEADER_* */
    char delimiter;    /* 0 means ',' */
} cg_csv_options;

/* Reads a CSV file: every row has the same number of fields (at least 2),
 * each a finite number (spaces around it allowed; no quoting); the label
 * column is an integer >= 0 and the others are the features, in file
 * order, finite as float32 too (1e39 is CG_EFORMAT, not +inf).  Blank lines are skipped.  opts NULL means { -1,
 * CG_CSV_HEADER_DETECT, ',' }.  A ragged row, a field that is not a
 * number, a bad label or a file with no rows give CG_EFORMAT naming the
 * file and line.  The caller owns the result; free it with
 * cg_dataset_free. */
cg_dataset *cg_csv_load(const char *path, const cg_csv_options *opts);
/* NULL is ignored. */
void cg_dataset_free(cg_dataset *ds);

int64_t cg_dataset_rows(const cg_dataset *ds);
int cg_dataset_features(const cg_dataset *ds);
/* The largest label + 1 (of the file a split came from). */
int cg_dataset_classes(const cg_dataset *ds);
/* The table in host memory, borrowed: features [rows, features] row-
 * major, labels [rows]. */
const float *cg_dataset_feature_data(const cg_dataset *ds);
const int32_t *cg_dataset_label_data(const cg_dataset *ds);

/* Splits ds into two new datasets: round(holdout * rows) rows picked by a
 * shuffle seeded by `seed` go to *test, the rest to *train, each keeping
 * ds's row order.  Both parts must be non-empty (CG_EINVAL).  The caller
 * owns both. */
int cg_dataset_split(const cg_dataset *ds, double holdout, uint64_t seed,
                     cg_dataset **train, cg_dataset **test);

/* Feature standardisation, as clgrad-train does it: the statistics come
 * from the training split and the same ones are applied to every split.
 * feature_stats writes, for each of the features() columns j, the mean
 * and 1 / (population standard deviation), both computed in double over
 * every row and rounded to float, into mean[j] and inv_std[j] (arrays of
 * features() floats the caller provides).  A constant column (standard
 * deviation <= 1e-8) gets inv_std 1, so that it becomes x - mean (all 0
 * in the split the statistics came from) instead of dividing by zero.
 * standardize replaces every feature x of ds by (x - mean[j]) * inv_std[j]
 * in float32, rounded after each operation (what cg_sub then cg_mul on
 * the batches would give); a non-finite mean or inv_std gives CG_EINVAL
 * and changes nothing.  Save mean and inv_std with the model (as
 * clgrad-train does, "data.mean" and "data.inv_std") to apply them to new
 * data later.  NULL arguments give CG_EINVAL. */
int cg_dataset_feature_stats(const cg_dataset *ds, float *mean,
                             float *inv_std);
int cg_dataset_standardize(cg_dataset *ds, const float *mean,
                           const float *inv_std);

/* ceil(rows / batch_size): the last batch may be smaller. */
int64_t cg_dataset_num_batches(const cg_dataset *ds, int batch_size);

/* Batch `index` of an epoch: *x float32 [n, features] and *y int32 [n]
 * (new tensors on ctx; the caller owns both), rows in file order or, with
 * `shuffled`, in the order of (seed, epoch).  Returns n (1..batch_size),
 * 0 with *x = *y = NULL when index is past the epoch's last batch, or a
 * negative status.  ds keeps the current epoch's order between calls
 * (so it is not const). */
int cg_dataset_batch(cg_dataset *ds, cg_context *ctx, int batch_size,
                     int shuffled, uint64_t seed, int64_t epoch,
                     int64_t index, cg_tensor **x, cg_tensor **y);

typedef struct cg_text cg_text;

/* Reads a file as bytes.  vocab NULL: the vocabulary is the bytes present,
 * in increasing order, id i for the i-th; otherwise it is a string from
 * cg_text_vocab (as kept in a checkpoint's metadata), and a byte of the
 * file not in it gives CG_EFORMAT naming the line.  An empty file gives
 * CG_EFORMAT.  The caller owns the result; free it with cg_text_free. */
cg_text *cg_text_load(const char *path, const char *vocab);
/* NULL is ignored. */
void cg_text_free(cg_text *t);

int64_t cg_text_length(const cg_text *t);     /* in bytes (= ids) */
int cg_text_vocab_size(const cg_text *t);
/* The ids, borrowed. */
const int32_t *cg_text_ids(const cg_text *t);
/* The vocabulary as text, "[10,32,33,...]" (the byte of each id, as a JSON
 * array), borrowed: store it with cg_checkpoint_set_meta. */
const char *cg_text_vocab(const cg_text *t);
/* Bytes to ids and back.  A byte outside the vocabulary, or an id outside
 * 0..size-1, gives CG_EINVAL naming its position and writes nothing.
 * decode writes n bytes and a terminating zero. */
int cg_text_encode(const cg_text *t, const char *s, size_t n, int32_t *ids);
int cg_text_decode(const cg_text *t, const int32_t *ids, size_t n,
                   char *out);

/* Splits t into its first part and its last round(holdout * length)
 * bytes (*valid), with t's vocabulary; each must keep at least 2 bytes
 * (CG_EINVAL).  The caller owns both. */
int cg_text_split(const cg_text *t, double holdout, cg_text **train,
                  cg_text **valid);

/* Batches for truncated BPTT with `batch` parallel streams: stream b is
 * the contiguous slice [b S, (b + 1) S) of the text, S = (length - 1) /
 * batch, and batch i holds its steps [i T, i T + n) with T = steps (n < T
 * only in the last batch).  *inputs and *targets are int32 [n, batch]
 * (new tensors; the caller owns both), targets[k, b] being the id after
 * inputs[k, b], so batch i + 1 continues every stream of batch i and the
 * recurrent state carries over.  Returns n, 0 with NULL outputs past the
 * last batch, or a negative status (CG_EINVAL if S < 1). */
int64_t cg_text_num_batches(const cg_text *t, int steps, int batch);
int cg_text_batch(const cg_text *t, cg_context *ctx, int steps, int batch,
                  int64_t index, cg_tensor **inputs, cg_tensor **targets);

/* ------------------------------------------------------------------------
 * Tuning
 *
 * A tuning database holds, per device, the kernel parameters that
 * clgrad-tune measured fastest.  An entry names a kernel, a shape class,
 * and parameter values:
 *   "clblast.Xgemm", "clblast.XgemmDirect", "clblast.Copy", "clblast.Pad",
 *   "clblast.Transpose", "clblast.Padtranspose", "clblast.GemmRoutine"
 *       CLBlast's single-precision kernel parameters (its names: KWG, MWG,
 *       ..., XGEMM_MIN_INDIRECT_SIZE), shape "any": CLBlast keeps one set
 *       per device.  Applied with CLBlastOverrideParameters, which holds
 *       for every context of the process on that device.
 *   "gemm"
 *       clgrad's matrix products per product class, shape "NN.skinny",
 *       "TN.longk", ... (the transposes, then skinny, small, large or
 *       longk): kernels/gemm.cl's tile values, "clblast" 1 or 0 (whether
 *       CLBlast runs the class), "pack" 1 or 0 (NT: on a packed copy of
 *       B^T), "packed" 1 or 0 (whether clgrad's kernels run the class on
 *       packed, cache-blocked operands, kernels/gemm_pack.cl).  Without
 *       one of these three keys, a built-in rule by each product's sizes
 *       decides; clgrad-tune writes them only where its measurement
 *       contradicts that rule for the class's representative product.
 *   "rnn.lstm", "rnn.gru", "rnn.rnn"
 *       the fused recurrent step kernels' VW, RB and WG (kernels/rnn.cl),
 *       shape "H<hidden size>"; a layer takes the entry whose hidden size
 *       is nearest to its own (on a log scale).  They become -D build
 *       options, so they are part of the program-cache key.
 *   "rnn.path"
 *       gemm_min_h: the hidden size from which an RNN layer forms the
 *       recurrent product with a GEMM per step (0: never); packed (0 or
 *       1): whether those GEMMs run on W_hh packed once per pass
 *       (kernels/gemm_pack.cl's panels, 3 launches a step instead of 2)
 *       rather than through the GEMM entry's choice per product.
 *   "reduce" (RWG), "softmax" (SWG), "layer_norm" (LWG), "loss" (LWG),
 *   "optim" (RWG)
 *       the work-group size of a kernel file's tree reductions (a power
 *       of two), shape "any": every kernel of the file is built with it
 *       as a -D option and launched with it.
 *   "dp"
 *       data parallelism's gradient buckets (cg_dp_options), shape "any":
 *       bucket_kb and first_bucket_kb, in KiB (1 to 1048576).  No kernel
 *       file, so no source hash, as CLBlast's entries.
 * An entry for clgrad's own kernels records the hash of the kernel file it
 * was measured with (cg_kernel_source_hash); when the file has changed
 * since, the entry is stale and ignored.
 *
 * Files: one JSON file per device in cg_tuning_dir() (written by
 * clgrad-tune), plus the read-only entries shipped with clgrad in
 * data/tuning/ (built into the library, and installed).  When a context is
 * made, every file is matched against its device: the same platform,
 * device name and driver version (CG_TUNING_EXACT), the same platform and
 * device name (CG_TUNING_DEVICE), the same platform vendor and device type
 * (CG_TUNING_VENDOR).  For each kernel and shape the best match wins, a
 * user file before a shipped one at the same level; kernels with no entry
 * keep the built-in defaults.  A file that is unreadable, not valid JSON,
 * of another format version, or with a bad entry, and a stale entry, are
 * skipped: the context is still made, and each one is logged as a
 * CG_LOG_WARNING ("tuning: ...", see cg_set_log) that says what was skipped
 * and why.  CLGRAD_TUNING=0 in the environment when a context is made
 * works as options.no_tuning.
 *
 * The tools' boundary.  clgrad-info, clgrad-train and clgrad-bench use
 * this header only.  clgrad-tune does not: it is the library's own
 * measuring instrument, built from the internal library, and it times
 * what no application should touch (raw CLBlast calls on the context's
 * queue, one recurrent step with forced tunables, the program cache, a
 * kernel file's source).  Making it public-API-only would take a dozen
 * OpenCL-level accessors into this header for one tool, so instead the
 * functions that existed only for it - writing database files
 * (cg_tuning_db_*, cg_tuning_path), kernel source hashes and putting a
 * single entry in force or clearing them (cg_context_set_tuning,
 * cg_context_clear_tuning) - are declared in lib/tune/tuner.h, which the
 * tool includes knowingly.  They are not part of the API and carry no
 * compatibility promise.  What an application needs of tuning stays
 * here: the entries in force in a context, and re-applying the files.
 * ------------------------------------------------------------------------ */
#define CG_TUNING_MAX_PARAMS 24

typedef enum cg_tuning_match {
    CG_TUNING_NONE = 0,       /* not in force / built-in default */
    CG_TUNING_VENDOR = 1,     /* platform vendor and device type */
    CG_TUNING_DEVICE = 2,     /* platform and device name */
    CG_TUNING_EXACT = 3       /* platform, device name and driver version */
} cg_tuning_match;

typedef struct cg_tuning_entry {
    char kernel[48];          /* "clblast.Xgemm", "rnn.lstm", ... */
    char shape[48];           /* shape class: "any", "H256", ... */
    int nparams;
    char names[CG_TUNING_MAX_PARAMS][40];
    long values[CG_TUNING_MAX_PARAMS];
    double time_us;           /* measured with these parameters */
    double default_time_us;   /* measured with the built-in defaults */
    char source_hash[33];     /* own kernels: cg_kernel_source_hash */
    char note[128];           /* free text: what was timed */
    /* Set by lookups, ignored when saving: */
    cg_tuning_match match;
    char origin[256];         /* the file it came from, or "shipped:NAME" */
} cg_tuning_entry;

/* The user's tuning directory: $CLGRAD_TUNING_DIR, else
 * $XDG_DATA_HOME/clgrad/tuning, else ~/.local/share/clgrad/tuning. */
int cg_tuning_dir(char *out, size_t size);

/* The entries in force in a context: *count of them, and entry i. */
int cg_context_tuning_count(const cg_context *ctx, int *count);
int cg_context_tuning_entry(const cg_context *ctx, int i,
                            cg_tuning_entry *out);

/* Looks up the databases for the context's device and puts what matches in
 * force (what cg_context_new does unless options.no_tuning is set).  A
 * file that cannot be read or holds unusable entries is skipped with a
 * warning to the log callback; running out of host memory is an error
 * (CG_EHOSTMEM) and leaves the entries in force as they were. */
int cg_context_apply_tuning(cg_context *ctx);

#ifdef __cplusplus
}
#endif
#endif /* CLGRAD_H */
