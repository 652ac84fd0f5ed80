/* SPDX-License-Identifier: MIT */
/*
 * lib/tensor/internal.h - tensors: a shape, strides and an offset over a
 * reference-counted storage.
 */
#ifndef CG_TENSOR_INTERNAL_H
#define CG_TENSOR_INTERNAL_H

#include "cl/internal.h"

typedef struct cg__storage {
    int refs;
    cg_buffer *buf;
} cg__storage;

struct cg__node;

struct cg_tensor {
    int refs;
    cg_context *ctx;
    cg__storage *storage;
    cg_dtype dtype;
    int ndim;
    int64_t shape[CG_MAX_DIMS];
    int64_t strides[CG_MAX_DIMS];   /* in elements */
    int64_t offset;                 /* in elements */
    int requires_grad;
    struct cg__node *grad_fn;       /* owned reference; NULL for leaves */
    /* Drops that reference: lib/autograd's function, set with grad_fn,
     * so that this layer calls nothing above it. */
    void (*grad_fn_unref)(struct cg__node *n);
    int grad_slot;                  /* which of grad_fn's outputs: 0 the
                                     * first, k its extra output k */
    cg_tensor *grad;                /* owned; leaves only */
    /* Forward mode (lib/autograd/forward.c): the tangent at the context's
     * dual level, or the node whose JVP rule computes it when first
     * needed; both owned and dropped by fw_drop (set with them, so that
     * this layer calls nothing above it), which also unlinks the tensor
     * from the context's fwad_list (fw_prev, fw_next). */
    cg_tensor *fw_tangent;
    struct cg__node *fw_node;
    void (*fw_drop)(cg_tensor *t);
    cg_tensor *fw_prev, *fw_next;
    /* cg_backward's scratch while a leaf-gradient hook is set (lib/
     * autograd/graph.c): how many nodes still to run pass a gradient to
     * this leaf; 0 outside backward. */
    int bw_pending;
};

/* Bytes per element. */
size_t cg__dtype_size(cg_dtype dtype);
/* "float32", "int32", "int64", "float16", "bfloat16" (static). */
const char *cg__dtype_name(cg_dtype dtype);

/* A new contiguous tensor with fresh storage; contents undefined. */
cg_tensor *cg__tensor_empty(cg_context *ctx, cg_dtype dtype, int ndim,
                            const int64_t *shape);

/* A new tensor header over t's storage with the given geometry (no grad
 * information).  Takes a storage reference. */
cg_tensor *cg__tensor_view(const cg_tensor *t, int ndim,
                           const int64_t *shape, const int64_t *strides,
                           int64_t offset);

/* The product of the sizes; INT64_MAX when it overflows. */
int64_t cg__numel(int ndim, const int64_t *shape);
void cg__contiguous_strides(int ndim, const int64_t *shape,
                            int64_t *strides);

/* Checks an argument tensor: not NULL, and float32 (any_dtype 0), float32
 * or int32 (1: the 32-bit dtypes that ops index and copy), or any dtype
 * (CG__ANY_DTYPE: views, which copy nothing, and cg_detach), or a
 * floating dtype (CG__FLOAT_DTYPE: float32, float16 or bfloat16, for ops
 * whose kernels come in storage variants, cg__kernel_dt).  The name and
 * the dtype go into the message. */
#define CG__ANY_DTYPE 2
#define CG__FLOAT_DTYPE 3
int cg__check_tensor(const cg_tensor *t, const char *name, int any_dtype);

/* Whether dt is a floating dtype (CG_F32, CG_F16, CG_BF16). */
#define CG__IS_FLOAT(dt) ((dt) == CG_F32 || (dt) == CG_F16 || (dt) == CG_BF16)

/* CG_OK if b has a's dtype, else CG_EDTYPE naming both (and the op). */
int cg__check_same_dtype(const cg_tensor *a, const char *aname,
                         const cg_tensor *b, const char *bname);

/* Formats a shape as "[2, 3]" into buf (returns buf). */
const char *cg__shape_str(int ndim, const int64_t *shape, char *buf,
                          size_t size);

/* Normalises a possibly negative dimension index; -1 if out of range. */
int cg__dim(int dim, int ndim);

static inline cl_mem
cg__tensor_mem(const cg_tensor *t)
{
    return cg__buffer_mem(t->storage->buf);
}

#endif
