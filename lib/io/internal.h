/* SPDX-License-Identifier: MIT */
/*
 * lib/io/internal.h - the checkpoint object shared by checkpoint.c (adding,
 * querying, restoring) and safetensors.c (the file format).
 */
#ifndef CG_IO_INTERNAL_H
#define CG_IO_INTERNAL_H

#include "core/internal.h"

/* Longest tensor name or metadata key, in bytes. */
#define CG__CKPT_NAME_MAX 1024

typedef struct cg__ckpt_tensor {
    char *name;
    cg_dtype dtype;
    int ndim;
    int64_t shape[CG_MAX_DIMS];
    size_t bytes;
    void *data;          /* host byte order */
} cg__ckpt_tensor;

typedef struct cg__ckpt_meta {
    char *key;
    char *value;
} cg__ckpt_meta;

struct cg_checkpoint {
    cg__ckpt_tensor *tensors;
    int ntensors, tensors_cap;
    cg__ckpt_meta *meta;
    int nmeta, meta_cap;
};

/* Takes over `data` (malloc'd, `bytes` long) and `name` (malloc'd) as a
 * new or replacing entry; frees both on failure. */
int cg__ckpt_put(cg_checkpoint *ck, char *name, cg_dtype dtype, int ndim,
                 const int64_t *shape, void *data, size_t bytes);
/* Copies key and value in, replacing an earlier value. */
int cg__ckpt_put_meta(cg_checkpoint *ck, const char *key, const char *value);
/* Moves every tensor of tmp into ck and copies its metadata, with room
 * reserved first, so that only a host allocation failure while copying
 * metadata could stop it part-way; tmp is left to be freed. */
int cg__ckpt_merge(cg_checkpoint *ck, cg_checkpoint *tmp);
/* Index of a tensor, or -1. */
int cg__ckpt_find(const cg_checkpoint *ck, const char *name);

/* Whether s (len bytes) is well-formed UTF-8. */
int cg__utf8_valid(const char *s, size_t len);

/* "F32" / "I32" / "I64" / "F16" / "BF16", and the reverse (-1 if none); the size of one
 * element in bytes. */
const char *cg__ckpt_dtype_name(cg_dtype dtype);
int cg__ckpt_dtype_parse(const char *s);
int cg__ckpt_dtype_size(cg_dtype dtype);

/* Copies `bytes` bytes of elements `size` bytes wide (2, 4 or 8), converting
 * between host order and little-endian (the same swap both ways; memcpy
 * on little-endian hosts). */
void cg__le_copy(void *dst, const void *src, size_t bytes, int size);

#endif
