/* SPDX-License-Identifier: MIT */
/*
 * tests/fuzz/fuzz_text.c - the text loader.  Input: a first byte choosing
 * whether a vocabulary string follows (up to a NUL byte, as a checkpoint's
 * "data.vocab" would hold it), then the file.  A text that loads must be
 * consistent (ids in 0 .. vocab - 1, decode(ids) gives the file back,
 * its vocabulary string loads the same file again) and give the first
 * and last BPTT batches of a small split.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

static void
check_batches(const cg_text *t)
{
    cg_context *ctx = fuzz_context();
    int64_t nb = cg_text_num_batches(t, 4, 2), idx[2];
    cg_tensor *in, *tg;
    int i, n;

    if (nb < 0) {
        fuzz_expect_error("cg_text_num_batches");
        FUZZ_ASSERT(cg_text_length(t) < 3, "no batches of a text of %lld",
                    (long long)cg_text_length(t));
        return;
    }
    if (!ctx || nb == 0)
        return;
    idx[0] = 0;
    idx[1] = nb - 1;
    for (i = 0; i < 2; i++) {
        n = cg_text_batch(t, ctx, 4, 2, idx[i], &in, &tg);
        FUZZ_ASSERT(n >= 1 && n <= 4, "batch %lld gave %d",
                    (long long)idx[i], n);
        FUZZ_ASSERT(cg_tensor_dim(in, 0) == n && cg_tensor_dim(in, 1) == 2 &&
                    cg_tensor_dim(tg, 0) == n, "batch shapes");
        cg_tensor_free(in);
        cg_tensor_free(tg);
    }
}

static void
check_text(const cg_text *t, const uint8_t *file, size_t len)
{
    int64_t n = cg_text_length(t), i;
    int v = cg_text_vocab_size(t);
    const int32_t *ids = cg_text_ids(t);
    cg_text *train = NULL, *valid = NULL, *again;
    char *out;

    FUZZ_ASSERT(n == (int64_t)len, "length %lld of a %zu-byte file",
                (long long)n, len);
    FUZZ_ASSERT(v >= 1 && v <= 256, "vocabulary of %d", v);
    for (i = 0; i < n; i++)
        FUZZ_ASSERT(ids[i] >= 0 && ids[i] < v, "id %d at %lld", ids[i],
                    (long long)i);
    out = malloc((size_t)n + 1);
    FUZZ_ASSERT(out != NULL, "out of host memory");
    FUZZ_ASSERT(cg_text_decode(t, ids, (size_t)n, out) == CG_OK, "decode");
    FUZZ_ASSERT(memcmp(out, file, len) == 0, "decode does not give the "
                "file back");
    free(out);
    again = cg_text_load(fuzz_write("text.txt", file, len),
                         cg_text_vocab(t));
    FUZZ_ASSERT(again != NULL, "the text does not load with its own "
                "vocabulary");
    FUZZ_ASSERT(cg_text_vocab_size(again) == v, "another vocabulary");
    cg_text_free(again);
    if (cg_text_split(t, 0.25, &train, &valid) == CG_OK) {
        FUZZ_ASSERT(cg_text_length(train) + cg_text_length(valid) == n,
                    "the split loses bytes");
        check_batches(train);
        cg_text_free(train);
        cg_text_free(valid);
    } else {
        fuzz_expect_error("cg_text_split");
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *file = data + 1, *nul;
    char *vocab = NULL;
    size_t len;
    cg_text *t;

    if (size < 1)
        return 0;
    len = size - 1;
    if (data[0] & 1) {
        nul = memchr(file, 0, len);
        if (!nul)
            return 0;
        vocab = strdup((const char *)file);
        FUZZ_ASSERT(vocab != NULL, "out of host memory");
        len -= (size_t)(nul + 1 - file);
        file = nul + 1;
    }
    t = cg_text_load(fuzz_write("text.txt", file, len), vocab);
    free(vocab);
    if (!t) {
        fuzz_expect_error("cg_text_load");
        return 0;
    }
    check_text(t, file, len);
    cg_text_free(t);
    return 0;
}
