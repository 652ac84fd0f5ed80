/* SPDX-License-Identifier: MIT */
/*
 * tools/bench_fft.c - clgrad-bench's suite "fft": batched rfft and irfft
 * of 256 x 4096 and 64 x 65536 and the complex fft2 of 1024 x 1024, each
 * against PyTorch's CPU (torch.fft, pocketfft; tools/bench_torch.py) in
 * the same run with the same threads, and as GB/s (the bytes the
 * transform must read and write once) against the device's copy
 * bandwidth.  A case is one call on an input made beforehand, the result
 * freed; the first (warm-up) call bakes the plans.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define SPEEDUP "speedup_ratio"
#define SPEEDUP_MEANING "speed-up = PyTorch time / clgrad time (above 1: " \
    "clgrad is faster)"
#define FFT_NOTE "gbps: the input's and output's bytes (each once) per " \
    "second; copy_fraction: that over the device's copy bandwidth; path: " \
    "cg_fft_path's choice (CLGRAD_FFT_PATH, the tuning database)"

enum { RFFT, IRFFT, FFT2 };

typedef struct fcase {
    int kind;
    int64_t rows, n;            /* fft2: n x n, rows 1 */
    cg_tensor *x;
} fcase;

static const fcase cases[] = {
    { RFFT, 256, 4096, NULL },
    { IRFFT, 256, 4096, NULL },
    { RFFT, 64, 65536, NULL },
    { IRFFT, 64, 65536, NULL },
    { FFT2, 1, 1024, NULL },
};
#define NCASES (int)(sizeof cases / sizeof cases[0])
static const char *const kind_names[3] = { "rfft", "irfft", "fft2" };

static int
fcase_step(void *arg)
{
    fcase *c = arg;
    cg_tensor *y = c->kind == RFFT
                   ? cg_rfft(c->x, CG_FFT_DEFAULT_N, -1, CG_FFT_BACKWARD)
                   : c->kind == IRFFT
                   ? cg_irfft(c->x, c->n, -1, CG_FFT_BACKWARD)
                   : cg_fft2(c->x, NULL, CG_FFT_BACKWARD);

    if (!y)
        return -1;
    cg_tensor_free(y);
    return 0;
}

/* The input: reals rows x n, the n/2 + 1 bins of rows, or n x n complex,
 * uniform in [-1, 1). */
static int
fcase_build(fcase *c, cg_context *ctx, double *bytes)
{
    int64_t shape[3], numel, i, half = c->n / 2 + 1;
    int nd;
    float *h;
    uint64_t seed = 99;

    shape[0] = c->rows;
    shape[1] = c->kind == IRFFT ? half : c->n;
    shape[2] = 2;
    nd = c->kind == RFFT ? 2 : 3;
    if (c->kind == FFT2)
        shape[0] = c->n;
    numel = shape[0] * shape[1] * (nd == 3 ? 2 : 1);
    /* in and out, float32: reals n and complex half each row, or the
     * complex plane twice */
    *bytes = c->kind == FFT2 ? 2.0 * numel * 4
             : (double)c->rows * (c->n + 2 * half) * 4;
    h = malloc((size_t)numel * sizeof *h);
    if (!h) {
        bench_fail("fft: out of host memory");
        return -1;
    }
    for (i = 0; i < numel; i++)
        h[i] = (float)(cg_splitmix64_uniform(&seed) * 2 - 1);
    c->x = cg_tensor_from_host(ctx, CG_F32, nd, shape, h);
    free(h);
    if (!c->x) {
        bench_fail("fft: %s", cg_last_error());
        return -1;
    }
    return 0;
}

json_object *
suite_fft(bench *b)
{
    char specs_buf[NCASES][64], *specs[NCASES], name[128];
    bstat ref[NCASES], st;
    cg_context *ctx = NULL;
    json_object *s, *row;
    int i, status;

    for (i = 0; i < NCASES; i++) {
        int64_t rows = cases[i].rows, n = cases[i].n;

        if (b->quick)
            rows = 2, n = cases[i].kind == FFT2 ? 16 : 64;
        snprintf(specs_buf[i], sizeof specs_buf[i], "fft:%d:%lld:%lld",
                 cases[i].kind, (long long)rows, (long long)n);
        specs[i] = specs_buf[i];
    }
    bench_progress("fft: PyTorch");
    status = bench_torch(b, NCASES, specs, ref);
    if (status == 1)
        return bench_suite_skipped(b->torch_missing);
    if (status)
        return NULL;
    snprintf(name, sizeof name, "PyTorch %s %s (torch.fft), %d threads",
             b->torch_version, bench_torch_where(b), b->threads);
    s = bench_suite_new(name, SPEEDUP_MEANING);
    json_object_object_add(s, "note", json_object_new_string(FFT_NOTE));
    if (!(ctx = bench_context(b, 0)))
        goto fail;
    for (i = 0; i < NCASES; i++) {
        fcase c = cases[i];
        double bytes;
        const char *path;

        if (b->quick)
            c.rows = 2, c.n = c.kind == FFT2 ? 16 : 64;
        if (c.kind == FFT2)
            snprintf(name, sizeof name, "fft2 %lld x %lld complex",
                     (long long)c.n, (long long)c.n);
        else
            snprintf(name, sizeof name, "%s %lld x %lld",
                     kind_names[c.kind], (long long)c.rows, (long long)c.n);
        bench_progress("%s", name);
        if (fcase_build(&c, ctx, &bytes))
            goto fail;
        status = bench_time(b, ctx, fcase_step, &c, &st);
        cg_tensor_free(c.x);
        if (status)
            goto fail;
        row = bench_row(name, &st, &ref[i], SPEEDUP);
        bench_add_double(row, "gbps", bytes / st.med * 1e-9);
        bench_add_double(row, "copy_fraction", b->copy_gbps > 0
                         ? bytes / st.med * 1e-9 / b->copy_gbps : 0);
        path = cg_fft_path(ctx, c.kind != FFT2, c.n);
        json_object_object_add(row, "path",
                               json_object_new_string(path ? path : "?"));
        bench_suite_add(s, row);
    }
    cg_context_free(ctx);
    return s;
fail:
    cg_context_free(ctx);
    json_object_put(s);
    return NULL;
}
