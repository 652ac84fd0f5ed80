/* SPDX-License-Identifier: MIT */
/*
 * lib/context.c - the public context constructor and destructor, above
 * every layer: lib/cl builds the device layer (device, queue, programs,
 * pool), lib/ops gives it its random number generator (and, on the first
 * transform, its clFFT plans), then lib/tune puts
 * the tuning database in force; freeing undoes them in the other order.
 * lib/cl calls nothing upward and keeps no state of the layers above.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "ops/internal.h"
#include "tune/internal.h"

cg_context *
cg_context_new(const char *selector)
{
    cg_context_options opts = { selector, 0, 0 };

    return cg_context_new_with(&opts);
}

cg_context *
cg_context_new_with(const cg_context_options *opts)
{
    cg_context *ctx;
    int tuning, tset, set, flag;
    long v;                 /* checked, then read where used */

    cg__error_clear();
    /* Every variable the library reads, checked once here so that a typo
     * is an error naming it rather than a setting silently ignored (the
     * directories are checked where they are used, naming the variable). */
    if (cg__env_flag("CLGRAD_TUNING", &tuning, &tset) ||
        cg__env_flag("CLGRAD_CACHE", &flag, &set) ||
        cg__env_long("CLGRAD_RNN_GEMM_MIN_H", 0, 1L << 30, &v, &set) ||
        cg__env_long("CLGRAD_RNN_PACKED_WHH", 0, 1, &v, &set))
        return NULL;
    if (!tset)
        tuning = 1;
    ctx = cg__context_create(opts);
    if (!ctx)
        return NULL;
    if (cg__rng_attach(ctx)) {
        cg__context_destroy(ctx);
        cg__error(CG_EHOSTMEM, "cg_context_new: out of host memory for the "
                  "random number generator");
        return NULL;
    }
    /* The tuning database decides the kernels' parameters; a bad or
     * stale file is skipped with a warning to the log callback
     * (cg_set_log), and the context is made all the same. */
    if (!(opts && opts->no_tuning) && tuning)
        cg_context_apply_tuning(ctx);
    return ctx;
}

void
cg_context_free(cg_context *ctx)
{
    if (!ctx)
        return;
    cg__autocast_free(ctx);
    cg__fft_free(ctx);
    cg__gemm_classes_free(ctx);
    cg__tuning_free(ctx);
    cg__rng_detach(ctx);
    cg__context_destroy(ctx);
}
