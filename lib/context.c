/* SPDX-License-Identifier: MIT */
/*
 * lib/context.c - the public context constructor and destructor, above
 * every layer: lib/cl builds the device layer (device, queue, programs,
 * pool), lib/ops gives it its random number generator, then lib/tune puts
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
    const char *env = getenv("CLGRAD_TUNING");
    cg_context *ctx;

    cg__error_clear();
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
    if (!(opts && opts->no_tuning) && !(env && strcmp(env, "0") == 0))
        cg_context_apply_tuning(ctx);
    return ctx;
}

void
cg_context_free(cg_context *ctx)
{
    if (!ctx)
        return;
    cg__tuning_free(ctx);
    cg__rng_detach(ctx);
    cg__context_destroy(ctx);
}
