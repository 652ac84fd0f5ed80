/* SPDX-License-Identifier: MIT */
/*
 * lib/tune/gemm_class.c - the shape classes of a matrix product, by which
 * tuning entries for clgrad's GEMM apply: kernel "gemm" with shape
 * "<transposes>.<size>", e.g. "NT.skinny", carries that class's values
 * of kernels/gemm.cl's tunables, with "clblast" 1 or 0 which backend
 * runs it, and for an NT class with "pack" 1 or 0 whether clgrad's
 * kernels run it as NN on a packed B^T (gemm_tpose, then gemm: VW, TM
 * and TN apply) or in place (gemm_nt: DVW, DTM, DTN), and with "packed"
 * 1 or 0 whether clgrad's kernels run it on packed, cache-blocked
 * operands (kernels/gemm_pack.cl, whose own tunables then apply) or with
 * gemm.cl's kernels; lib/ops/gemm.c looks the entry up per product.
 *
 * The sizes, from the products the layers run (B rows of a recurrent
 * step, the batch rows of a linear layer, T * B rows over a sequence):
 *   skinny  M or N up to 96: a recurrent step (32 x 4H x H), a small
 *           head (N 10); few tiles, so tile shape and group size weigh
 *   small   under 2^24 multiply-adds: launch cost and edges weigh
 *   longk   K from 1024: the operands' K panels leave the cache (the
 *           weight gradients over T * B rows, the input gradient)
 *   large   the rest (the projections over a sequence, the MLP's)
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "tune/internal.h"

static const char *const trans_names[4] = { "NN", "NT", "TN", "TT" };
static const char *const size_names[4] = { "skinny", "small", "large",
                                           "longk" };

int
cg__gemm_class(int ta, int tb, size_t m, size_t n, size_t k)
{
    int t = (ta ? 2 : 0) + (tb ? 1 : 0), s;

    if ((m < n ? m : n) <= 96)
        s = 0;
    else if ((double)m * (double)n * (double)k < 16777216.0)
        s = 1;
    else if (k >= 1024)
        s = 3;
    else
        s = 2;
    return t * 4 + s;
}

const char *
cg__gemm_class_name(int c, char *buf, size_t size)
{
    if (c < 0 || c >= CG__GEMM_NCLASSES)
        snprintf(buf, size, "?");
    else
        snprintf(buf, size, "%s.%s", trans_names[c / 4], size_names[c % 4]);
    return buf;
}

int
cg__gemm_class_parse(const char *shape)
{
    char buf[32];
    int c;

    for (c = 0; c < CG__GEMM_NCLASSES; c++)
        if (strcmp(shape, cg__gemm_class_name(c, buf, sizeof buf)) == 0)
            return c;
    return -1;
}
