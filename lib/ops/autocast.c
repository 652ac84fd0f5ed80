/* SPDX-License-Identifier: MIT */
/*
 * lib/ops/autocast.c - automatic mixed precision, as torch.autocast: a
 * stack of regions per context, each with the dtype that the products
 * (matmul, linear, convolutions, recurrent layers) run in, and the casts
 * that ops ask for at their entry (cg__autocast_arg).  Ops of the float32
 * list (softmax, log_softmax, losses, norms, reductions) cast 16-bit
 * arguments up; the other ops run in their arguments' dtype.
 *
 * The casts of float32 leaves that require grad (parameters) are kept for
 * the rest of the outermost region, as PyTorch's autocast cache keeps
 * them: a weight used at every step of a loop is cast once.  A kept cast
 * is a recorded op; once a backward pass has released its node, it is
 * made again.  Nothing is kept while gradients are off, so a cast made
 * under cg_no_grad_enter never stands in for one that records.
 */
#include "config.h"

#include <stdlib.h>

#include "ops/internal.h"

#define AC_DEPTH 16

typedef struct ac_entry {
    cg_tensor *src;         /* a reference: the float32 leaf */
    cg_dtype dtype;
    cg_tensor *cast;        /* a reference: src cast to dtype */
} ac_entry;

struct cg__autocast {
    int depth;
    cg_dtype stack[AC_DEPTH];   /* CG_F32: a region with autocast off */
    ac_entry *cache;
    int ncache, cap;
};

static void
cache_clear(struct cg__autocast *ac)
{
    int i;

    for (i = 0; i < ac->ncache; i++) {
        cg_tensor_free(ac->cache[i].src);
        cg_tensor_free(ac->cache[i].cast);
    }
    free(ac->cache);
    ac->cache = NULL;
    ac->ncache = ac->cap = 0;
}

void
cg__autocast_free(cg_context *ctx)
{
    if (!ctx || !ctx->autocast)
        return;
    cache_clear(ctx->autocast);
    free(ctx->autocast);
    ctx->autocast = NULL;
}

int
cg_autocast_begin(cg_context *ctx, cg_dtype dtype)
{
    cg__error_clear();
    if (!ctx)
        return cg__error(CG_EINVAL, "autocast_begin: ctx is NULL");
    if (dtype != CG_F16 && dtype != CG_BF16 && dtype != CG_F32)
        return cg__error(CG_EDTYPE, "autocast_begin: dtype %s is not "
                         "float16, bfloat16 or float32 (autocast off)",
                         cg__dtype_name(dtype));
    if (!ctx->autocast &&
        !(ctx->autocast = cg__calloc(1, sizeof *ctx->autocast)))
        return cg__error(CG_EHOSTMEM, "autocast_begin: out of host memory");
    if (ctx->autocast->depth == AC_DEPTH)
        return cg__error(CG_EINVAL, "autocast_begin: more than %d regions "
                         "open", AC_DEPTH);
    ctx->autocast->stack[ctx->autocast->depth++] = dtype;
    return CG_OK;
}

int
cg_autocast_end(cg_context *ctx)
{
    /* No cg__error_clear: closing a region after a failed op keeps that
     * op's message. */
    if (!ctx)
        return cg__error(CG_EINVAL, "autocast_end: ctx is NULL");
    if (!ctx->autocast || ctx->autocast->depth == 0)
        return cg__error(CG_EINVAL, "autocast_end: no autocast region is "
                         "open");
    if (--ctx->autocast->depth == 0)
        cache_clear(ctx->autocast);
    return CG_OK;
}

cg_dtype
cg_autocast_dtype(const cg_context *ctx)
{
    if (!ctx || !ctx->autocast || ctx->autocast->depth == 0)
        return CG_F32;
    return ctx->autocast->stack[ctx->autocast->depth - 1];
}

/* Whether a kept cast can still carry gradients to its leaf. */
static int
cache_live(const cg_tensor *cast)
{
    return cast->grad_fn && !cast->grad_fn->released;
}

/* x cast to dt, kept for the region when x is a float32 leaf that
 * requires grad. */
static cg_tensor *
cast_cached(cg_tensor *x, cg_dtype dt)
{
    struct cg__autocast *ac = x->ctx->autocast;
    ac_entry *e;
    cg_tensor *y;
    int i, keep = x->dtype == CG_F32 && !x->grad_fn && x->requires_grad &&
                  cg_is_grad_enabled();

    if (keep)
        for (i = 0; i < ac->ncache; i++) {
            e = &ac->cache[i];
            if (e->src != x || e->dtype != dt)
                continue;
            if (cache_live(e->cast))
                return cg_tensor_ref(e->cast);
            cg_tensor_free(e->src);
            cg_tensor_free(e->cast);
            *e = ac->cache[--ac->ncache];
            break;
        }
    if (x->dtype != CG_F32 && dt != CG_F32) {
        /* float16 <-> bfloat16: through float32, as PyTorch's .to. */
        cg_tensor *f = cg_to_dtype(x, CG_F32);

        y = f ? cg_to_dtype(f, dt) : NULL;
        cg_tensor_free(f);
    } else {
        y = cg_to_dtype(x, dt);
    }
    if (!y || !keep)
        return y;
    if (ac->ncache == ac->cap) {
        int cap = ac->cap ? 2 * ac->cap : 16;
        ac_entry *c = realloc(ac->cache, (size_t)cap * sizeof *c);

        if (!c)
            return y;       /* not kept: only a later cast is repeated */
        ac->cache = c;
        ac->cap = cap;
    }
    e = &ac->cache[ac->ncache++];
    e->src = cg_tensor_ref(x);
    e->dtype = dt;
    e->cast = cg_tensor_ref(y);
    return y;
}

int
cg__autocast_args(cg__autocast_kind kind, int n, cg_tensor **args,
                  cg_tensor **out)
{
    cg_dtype want = CG_F32;
    cg_context *ctx = NULL;
    int i, any = 0;

    for (i = 0; i < n; i++) {
        out[i] = NULL;
        if (args[i] && !ctx)
            ctx = args[i]->ctx;
    }
    if (!ctx || cg_autocast_dtype(ctx) == CG_F32 || cg__in_backward())
        return 0;
    if (kind == CG__AC_LOW)
        want = cg_autocast_dtype(ctx);
    for (i = 0; i < n; i++)
        if (args[i] && CG__IS_FLOAT(args[i]->dtype) &&
            args[i]->dtype != want)
            any = 1;
    if (!any)
        return 0;
    for (i = 0; i < n; i++) {
        if (!args[i] || !CG__IS_FLOAT(args[i]->dtype) ||
            args[i]->dtype == want)
            out[i] = args[i] ? cg_tensor_ref(args[i]) : NULL;
        else
            out[i] = cast_cached(args[i], want);
        if (args[i] && !out[i]) {
            while (i-- > 0)
                cg_tensor_free(out[i]);
            return -1;
        }
    }
    return 1;
}

void
cg__autocast_release(int n, cg_tensor **args)
{
    int i;

    for (i = 0; i < n; i++)
        cg_tensor_free(args[i]);
}
