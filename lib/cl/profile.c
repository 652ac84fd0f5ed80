/* SPDX-License-Identifier: MIT */
/*
 * lib/cl/profile.c - per-kernel device times for a context made with
 * options.profiling: every launch gets an OpenCL event; events are read
 * (CL_PROFILING_COMMAND_START..END) and summed per kernel name when the
 * caller asks, or when 4096 are pending.  Without profiling nothing here
 * runs, and launches stay event-free.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl/internal.h"

#define MAX_PENDING 4096

/* Sums the pending events into the per-name table (waits for them). */
static int
drain(cg_context *ctx)
{
    cg__profile *p = &ctx->prof;
    int i, j, status = CG_OK;

    if (p->npending == 0)
        return CG_OK;
    for (i = 0; i < p->npending; i++) {
        cl_ulong t0 = 0, t1 = 0;
        cl_int rc;
        cg_profile_entry *e = NULL;

        rc = clWaitForEvents(1, &p->pending[i].event);
        if (rc == CL_SUCCESS)
            rc = clGetEventProfilingInfo(p->pending[i].event,
                                         CL_PROFILING_COMMAND_START,
                                         sizeof t0, &t0, NULL);
        if (rc == CL_SUCCESS)
            rc = clGetEventProfilingInfo(p->pending[i].event,
                                         CL_PROFILING_COMMAND_END,
                                         sizeof t1, &t1, NULL);
        clReleaseEvent(p->pending[i].event);
        if (rc != CL_SUCCESS) {
            if (status == CG_OK)
                status = cg__cl_fail(rc, "clGetEventProfilingInfo");
            continue;
        }
        for (j = 0; j < p->nentries; j++)
            if (strcmp(p->entries[j].name, p->pending[i].name) == 0) {
                e = &p->entries[j];
                break;
            }
        if (!e) {
            cg_profile_entry *n = realloc(p->entries, (size_t)(p->nentries
                                          + 1) * sizeof *n);

            if (!n) {
                if (status == CG_OK)
                    status = cg__error(CG_EHOSTMEM, "out of host memory");
                continue;
            }
            p->entries = n;
            e = &p->entries[p->nentries++];
            memset(e, 0, sizeof *e);
            snprintf(e->name, sizeof e->name, "%s", p->pending[i].name);
        }
        e->launches++;
        if (t1 > t0) {
            double us = (double)(t1 - t0) * 1e-3;

            e->total_us += us;
            if (us > e->max_us)
                e->max_us = us;
        }
    }
    p->npending = 0;
    return status;
}

int
cg__profile_event(cg_context *ctx, cl_event event, const char *name)
{
    cg__profile *p = &ctx->prof;

    if (p->npending == MAX_PENDING) {
        int status = drain(ctx);

        if (status) {
            clReleaseEvent(event);
            return status;
        }
    }
    if (!p->pending) {
        p->pending = malloc(MAX_PENDING * sizeof *p->pending);
        if (!p->pending) {
            clReleaseEvent(event);
            return cg__error(CG_EHOSTMEM, "out of host memory");
        }
    }
    p->pending[p->npending].event = event;
    snprintf(p->pending[p->npending].name, sizeof p->pending[0].name, "%s",
             name);
    p->npending++;
    return CG_OK;
}

int
cg__profile_kernel(cg_context *ctx, cl_kernel kernel, cl_event event)
{
    char name[64];

    if (clGetKernelInfo(kernel, CL_KERNEL_FUNCTION_NAME, sizeof name, name,
                        NULL) != CL_SUCCESS)
        snprintf(name, sizeof name, "(unknown kernel)");
    return cg__profile_event(ctx, event, name);
}

void
cg__profile_free(cg_context *ctx)
{
    int i;

    for (i = 0; i < ctx->prof.npending; i++)
        clReleaseEvent(ctx->prof.pending[i].event);
    free(ctx->prof.pending);
    free(ctx->prof.entries);
    memset(&ctx->prof, 0, sizeof ctx->prof);
}

static int
by_total(const void *a, const void *b)
{
    const cg_profile_entry *x = a, *y = b;

    if (x->total_us != y->total_us)
        return x->total_us < y->total_us ? 1 : -1;
    return strcmp(x->name, y->name);
}

int
cg_context_profile(cg_context *ctx, cg_profile_entry *out, int max,
                   int *count)
{
    int status, i;

    cg__error_clear();
    if (!ctx || !count || (max > 0 && !out))
        return cg__error(CG_EINVAL, "%s is NULL", !ctx ? "ctx" : !count
                         ? "count" : "out");
    if (!ctx->profiling)
        return cg__error(CG_EINVAL, "the context was made without "
                         "options.profiling");
    status = drain(ctx);
    if (status)
        return status;
    qsort(ctx->prof.entries, (size_t)ctx->prof.nentries,
          sizeof *ctx->prof.entries, by_total);
    for (i = 0; i < max && i < ctx->prof.nentries; i++)
        out[i] = ctx->prof.entries[i];
    *count = ctx->prof.nentries;
    return CG_OK;
}

int
cg_context_profile_reset(cg_context *ctx)
{
    int status;

    cg__error_clear();
    if (!ctx)
        return cg__error(CG_EINVAL, "ctx is NULL");
    if (!ctx->profiling)
        return cg__error(CG_EINVAL, "the context was made without "
                         "options.profiling");
    status = drain(ctx);
    ctx->prof.nentries = 0;
    return status;
}
