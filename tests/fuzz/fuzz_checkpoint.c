/* SPDX-License-Identifier: MIT */
/*
 * tests/fuzz/fuzz_checkpoint.c - the checkpoint (safetensors) loader.  The
 * input is the file: cg_checkpoint_load reads it from the scratch
 * directory.  A checkpoint that loads must then answer every query
 * consistently: each tensor's info, its data of exactly numel times the
 * element size (2 for F16 and BF16, 4, or 8 for I64) in bytes,
 * the metadata by index and by key, the number readers, the training
 * position and the generator; small tensors go to the device and back and
 * must come back with the same bytes.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

/* Tensors up to this many elements are copied to the device. */
#define DEVICE_MAX 4096

static void
check_tensor(const cg_checkpoint *ck, int i)
{
    const char *name = cg_checkpoint_tensor_name(ck, i);
    int64_t shape[CG_MAX_DIMS], numel = 1;
    size_t bytes = 0;
    const void *data;
    cg_dtype dtype;
    cg_tensor *t;
    int ndim, d, overflow = 0;

    FUZZ_ASSERT(name != NULL, "tensor %d of %d has no name", i,
                cg_checkpoint_num_tensors(ck));
    FUZZ_ASSERT(cg_checkpoint_tensor_info(ck, name, &dtype, &ndim, shape) ==
                CG_OK, "info of tensor %s", name);
    FUZZ_ASSERT(ndim >= 0 && ndim <= CG_MAX_DIMS, "ndim %d", ndim);
    FUZZ_ASSERT(dtype == CG_F32 || dtype == CG_I32 || dtype == CG_I64 ||
                dtype == CG_F16 || dtype == CG_BF16, "dtype %d", (int)dtype);
    for (d = 0; d < ndim; d++) {
        FUZZ_ASSERT(shape[d] >= 0, "%s: dimension %d is %lld", name, d,
                    (long long)shape[d]);
        overflow |= __builtin_mul_overflow(numel, shape[d], &numel);
    }
    FUZZ_ASSERT(!overflow, "%s: the shape's product overflows", name);
    data = cg_checkpoint_tensor_data(ck, name, &bytes);
    FUZZ_ASSERT(data != NULL || bytes == 0, "%s: no data", name);
    FUZZ_ASSERT(bytes == (size_t)numel * (dtype == CG_I64 ? 8 :
                                          dtype == CG_F16 ||
                                          dtype == CG_BF16 ? 2 : 4),
                "%s: %zu bytes for %lld elements", name, bytes,
                (long long)numel);
    if (numel > DEVICE_MAX || !fuzz_context())
        return;
    if (dtype == CG_I64) {
        FUZZ_ASSERT(cg_checkpoint_tensor(ck, fuzz_context(), name) == NULL,
                    "%s: an I64 device tensor was made", name);
        fuzz_expect_error("cg_checkpoint_tensor of I64");
        return;
    }
    t = cg_checkpoint_tensor(ck, fuzz_context(), name);
    if (!t) {
        fuzz_expect_error("cg_checkpoint_tensor");
        FUZZ_ASSERT(numel == 0, "%s: a tensor of %lld elements was not "
                    "made", name, (long long)numel);
        return;
    }
    {
        unsigned char *back = malloc(bytes ? bytes : 1);

        FUZZ_ASSERT(back != NULL, "out of host memory");
        FUZZ_ASSERT(cg_tensor_numel(t) == numel, "numel %lld, file %lld",
                    (long long)cg_tensor_numel(t), (long long)numel);
        FUZZ_ASSERT(cg_tensor_to_host(t, back, bytes) == CG_OK,
                    "%s: read-back", name);
        FUZZ_ASSERT(memcmp(back, data, bytes) == 0, "%s: the device copy "
                    "differs", name);
        free(back);
    }
    cg_tensor_free(t);
}

static void
check_meta(const cg_checkpoint *ck, int i)
{
    const char *key = cg_checkpoint_meta_key(ck, i), *value;
    int64_t iv;
    double dv;

    FUZZ_ASSERT(key != NULL, "metadata %d has no key", i);
    value = cg_checkpoint_get_meta(ck, key);
    FUZZ_ASSERT(value != NULL, "metadata %s has no value", key);
    if (cg_checkpoint_get_meta_int(ck, key, &iv) != CG_OK)
        fuzz_expect_error("cg_checkpoint_get_meta_int");
    if (cg_checkpoint_get_meta_double(ck, key, &dv) != CG_OK)
        fuzz_expect_error("cg_checkpoint_get_meta_double");
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("ck.safetensors", data, size);
    cg_checkpoint *ck = cg_checkpoint_load(path);
    cg_train_position pos;
    int i, n;

    if (!ck) {
        fuzz_expect_error("cg_checkpoint_load");
        return 0;
    }
    n = cg_checkpoint_num_tensors(ck);
    FUZZ_ASSERT(n >= 0, "%d tensors", n);
    for (i = 0; i < n; i++)
        check_tensor(ck, i);
    FUZZ_ASSERT(cg_checkpoint_tensor_name(ck, n) == NULL, "a name past "
                "the end");
    n = cg_checkpoint_num_meta(ck);
    for (i = 0; i < n; i++)
        check_meta(ck, i);
    if (cg_checkpoint_get_position(ck, &pos) == CG_OK)
        FUZZ_ASSERT(pos.step >= 0 && pos.epoch >= 0 && pos.index >= 0 &&
                    pos.schedule >= 0 && pos.total >= 0,
                    "a negative position was read");
    else
        fuzz_expect_error("cg_checkpoint_get_position");
    if (fuzz_context() &&
        cg_checkpoint_restore_generator(ck, fuzz_context()) != CG_OK)
        fuzz_expect_error("cg_checkpoint_restore_generator");
    /* What loaded saves and loads again with the same tensors and
     * metadata (saving adds safetensors' "format" key). */
    path = fuzz_write("ck2.safetensors", "", 0);
    if (cg_checkpoint_save(ck, path) == CG_OK) {
        cg_checkpoint *again = cg_checkpoint_load(path);

        FUZZ_ASSERT(again != NULL, "a saved checkpoint does not load");
        FUZZ_ASSERT(cg_checkpoint_num_tensors(again) ==
                    cg_checkpoint_num_tensors(ck), "the reloaded checkpoint "
                    "has %d tensors, not %d",
                    cg_checkpoint_num_tensors(again),
                    cg_checkpoint_num_tensors(ck));
        for (i = 0; i < n; i++) {
            const char *key = cg_checkpoint_meta_key(ck, i);
            const char *v = cg_checkpoint_get_meta(again, key);

            FUZZ_ASSERT(v && strcmp(v, cg_checkpoint_get_meta(ck, key)) == 0,
                        "metadata %s changed on the way", key);
        }
        cg_checkpoint_free(again);
    } else {
        fuzz_expect_error("cg_checkpoint_save");
    }
    cg_checkpoint_free(ck);
    return 0;
}
