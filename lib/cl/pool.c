/* SPDX-License-Identifier: MIT */
/*
 * lib/cl/pool.c - the per-context caching allocator of device memory.
 *
 * Requests are rounded up to size classes, four per power of two from 256
 * bytes (at most 25% waste); a freed block waits on its class's free list
 * for the next request of that class.  A context has one in-order queue, so
 * a block can be handed out again as soon as its buffer is freed: every
 * later command that touches it is queued behind the earlier ones.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "cl/internal.h"

#define MIN_BLOCK 256

static int
size_class(size_t bytes, size_t *block)
{
    int e = 8;
    size_t step, q;

    if (bytes <= MIN_BLOCK) {
        *block = MIN_BLOCK;
        return 0;
    }
    while (e < 63 && ((size_t)1 << (e + 1)) <= bytes - 1)
        e++;
    step = (size_t)1 << (e - 2);
    q = (bytes - 1 - ((size_t)1 << e)) / step;
    *block = ((size_t)1 << e) + (q + 1) * step;
    return 1 + (e - 8) * 4 + (int)q;
}

int
cg_context_release_cache(cg_context *ctx)
{
    int i;

    cg__error_clear();
    if (!ctx)
        return cg__error(CG_EINVAL, "ctx is NULL");
    for (i = 0; i < CG__POOL_CLASSES; i++) {
        cg__block *b = ctx->free_blocks[i], *next;

        for (; b; b = next) {
            next = b->next;
            clReleaseMemObject(b->mem);
            free(b);
        }
        ctx->free_blocks[i] = NULL;
    }
    ctx->stats.bytes_cached = 0;
    return CG_OK;
}

static int
enomem(cg_context *ctx, size_t bytes, const char *why)
{
    return cg__error(CG_ENOMEM, "cannot allocate %zu bytes on %s: %s; the "
                     "device has %llu bytes, at most %llu per allocation, "
                     "and clgrad holds %llu in live buffers", bytes,
                     ctx->info.name, why,
                     (unsigned long long)ctx->info.global_mem_size,
                     (unsigned long long)ctx->info.max_alloc_size,
                     (unsigned long long)ctx->stats.bytes_in_use);
}

/* Asks the device for a block; *why says what refused, or is NULL when
 * host memory ran out (then the error is recorded: CG_EHOSTMEM). */
static cg__block *
device_block(cg_context *ctx, size_t size, const char **why)
{
    cg__block *b;
    cl_int rc;

    if (size > ctx->info.max_alloc_size) {
        *why = "larger than the device's largest allocation";
        return NULL;
    }
    if (ctx->stats.bytes_in_use + ctx->stats.bytes_cached + size >
        ctx->info.global_mem_size) {
        *why = "more than the device memory left";
        return NULL;
    }
    b = cg__malloc(sizeof *b);
    if (!b) {
        *why = NULL;
        return NULL;
    }
    b->mem = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE, size, NULL, &rc);
    if (rc != CL_SUCCESS) {
        *why = cg__cl_error_name(rc) ? cg__cl_error_name(rc)
             : "the driver refused";
        free(b);
        return NULL;
    }
    b->size = size;
    b->next = NULL;
    return b;
}

cg_buffer *
cg_buffer_new(cg_context *ctx, size_t bytes)
{
    cg_buffer *buf;
    cg__block *b;
    const char *why = "";
    size_t size;
    int cls;

    cg__error_clear();
    if (!ctx) {
        cg__error(CG_EINVAL, "ctx is NULL");
        return NULL;
    }
    if (bytes == 0) {
        cg__error(CG_EINVAL, "a buffer of 0 bytes was requested");
        return NULL;
    }
    buf = cg__malloc(sizeof *buf);
    if (!buf)
        return NULL;
    cls = size_class(bytes, &size);
    /* No rounding over the limit, or none asked.  Nor for a request over
     * it, which device_block refuses: the rounding of sizes near SIZE_MAX
     * wraps around to a small block. */
    if (size > ctx->info.max_alloc_size || size < bytes || ctx->exact_blocks)
        size = bytes;
    b = ctx->exact_blocks ? NULL : ctx->free_blocks[cls];
    if (b && b->size >= bytes) {
        ctx->free_blocks[cls] = b->next;
        ctx->stats.bytes_cached -= b->size;
        ctx->stats.reuses++;
    } else {
        b = device_block(ctx, size, &why);
        if (!b && why) {
            /* Give the cache back to the device and try once more. */
            cg_context_release_cache(ctx);
            b = device_block(ctx, size, &why);
        }
        if (!b) {
            if (why)
                enomem(ctx, bytes, why);
            free(buf);
            return NULL;
        }
        ctx->stats.device_allocations++;
    }
    ctx->stats.allocations++;
    ctx->stats.bytes_in_use += b->size;
    if (ctx->stats.bytes_in_use > ctx->stats.peak_bytes)
        ctx->stats.peak_bytes = ctx->stats.bytes_in_use;
    buf->ctx = ctx;
    buf->block = b;
    buf->size = bytes;
    buf->prev = NULL;
    buf->next = ctx->live;
    if (ctx->live)
        ctx->live->prev = buf;
    ctx->live = buf;
    return buf;
}

static void
unlink_live(cg_buffer *buf)
{
    if (buf->prev)
        buf->prev->next = buf->next;
    else
        buf->ctx->live = buf->next;
    if (buf->next)
        buf->next->prev = buf->prev;
}

void
cg_buffer_free(cg_buffer *buf)
{
    cg_context *ctx;
    cg__block *b;
    size_t size;
    int cls;

    if (!buf)
        return;
    ctx = buf->ctx;
    b = buf->block;
    unlink_live(buf);
    ctx->stats.bytes_in_use -= b->size;
    free(buf);
    if (ctx->exact_blocks) {
        clReleaseMemObject(b->mem);
        free(b);
        return;
    }
    cls = size_class(b->size, &size);
    b->next = ctx->free_blocks[cls];
    ctx->free_blocks[cls] = b;
    ctx->stats.bytes_cached += b->size;
}

size_t
cg_buffer_size(const cg_buffer *buf)
{
    return buf ? buf->size : 0;
}

static int
check_range(const cg_buffer *buf, size_t offset, const void *host,
            size_t bytes)
{
    if (!buf || !host)
        return cg__error(CG_EINVAL, "%s is NULL", buf ? "host pointer"
                         : "buffer");
    if (offset > buf->size || bytes > buf->size - offset)
        return cg__error(CG_EINVAL, "range of %zu bytes at offset %zu is "
                         "outside the buffer of %zu bytes", bytes, offset,
                         buf->size);
    return CG_OK;
}

int
cg_buffer_write(cg_buffer *buf, size_t offset, const void *src, size_t bytes)
{
    int status;

    cg__error_clear();
    status = check_range(buf, offset, src, bytes);
    if (status || bytes == 0)
        return status;
    CG__CHECK_CL(clEnqueueWriteBuffer(buf->ctx->queue, cg__buffer_mem(buf),
                                      CL_TRUE, offset, bytes, src, 0, NULL,
                                      NULL),
                 "clEnqueueWriteBuffer");
fail:
    return status;
}

int
cg_buffer_read(const cg_buffer *buf, size_t offset, void *dst, size_t bytes)
{
    int status;

    cg__error_clear();
    status = check_range(buf, offset, dst, bytes);
    if (status || bytes == 0)
        return status;
    CG__CHECK_CL(clEnqueueReadBuffer(buf->ctx->queue, cg__buffer_mem(buf),
                                     CL_TRUE, offset, bytes, dst, 0, NULL,
                                     NULL),
                 "clEnqueueReadBuffer");
fail:
    return status;
}

void
cg__pool_destroy(cg_context *ctx)
{
    while (ctx->live) {
        cg_buffer *buf = ctx->live;

        ctx->live = buf->next;
        clReleaseMemObject(buf->block->mem);
        free(buf->block);
        free(buf);
    }
    ctx->stats.bytes_in_use = 0;
    cg_context_release_cache(ctx);
}
