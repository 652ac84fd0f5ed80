/* SPDX-License-Identifier: MIT */
/*
 * lib/tune/conv_class.c - the shape classes of a 2-D convolution, by
 * which tuning entries choose its algorithm: kernel "conv" with shape
 * "<direction>.<kind>", e.g. "fwd.depthwise", and "algo" 0 (im2col +
 * GEMM) or 1 (the direct kernels of kernels/conv.cl), and for im2col
 * "shift" 0 where it should make columns always instead of reading
 * stride-1 windows in place where its rule says so (lib/ops/conv.c,
 * shifts); lib/ops/conv.c looks the entry up per call, forward and
 * backward apart.
 *
 * The directions: "fwd" and "bwd" (dx and dW) of conv2d and conv1d;
 * "tfwd" and "tbwd" of conv_transpose2d (lib/ops/conv_transpose.c),
 * classes of their own because the same steps serve other directions
 * there (its forward is a convolution's dx step, its dx a convolution's
 * forward), so the fastest algorithm of a shape need not be the same.  A
 * transposed convolution's kind is that of the convolution it transposes:
 * C below is that convolution's input channels, conv_transpose2d's
 * output channels (a generator's last layer, 64 -> 3 channels, is
 * "small", as the first layer on RGB it transposes).
 *
 * One more class is conv1d's alone: "fwd1d.long", whose entry says from
 * which dilated kernel length on ("min_kernel") a conv1d runs by FFT
 * ("algo" 2; 0 or 1: never), forward and backward (lib/ops/conv_fft.c);
 * shorter kernels take the classes below.  It is not one of the
 * CG__CONV_NCLASSES (lib/tune/apply.c checks it by name).
 *
 * The kinds, by what the GEMM of im2col would get:
 *   depthwise  one input channel per group (groups = C > 1): products
 *              of a single row per group, far below what a GEMM tiles
 *   small      at most 4 input channels per group (a first layer on RGB,
 *              1-D signals): a short inner dimension, while the columns
 *              cost R S times the input
 *   large      the rest
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "tune/internal.h"

static const char *const dir_names[4] = { "fwd", "bwd", "tfwd", "tbwd" };
static const char *const kind_names[3] = { "depthwise", "small", "large" };

int
cg__conv_class(int dir, int64_t C, int64_t G)
{
    int kind = G > 1 && G == C ? 0 : C / (G > 0 ? G : 1) <= 4 ? 1 : 2;

    return (dir >= 0 && dir < 4 ? dir : 0) * 3 + kind;
}

const char *
cg__conv_class_name(int c, char *buf, size_t size)
{
    if (c < 0 || c >= CG__CONV_NCLASSES)
        snprintf(buf, size, "?");
    else
        snprintf(buf, size, "%s.%s", dir_names[c / 3], kind_names[c % 3]);
    return buf;
}

int
cg__conv_class_parse(const char *shape)
{
    char buf[32];
    int c;

    for (c = 0; c < CG__CONV_NCLASSES; c++)
        if (strcmp(shape, cg__conv_class_name(c, buf, sizeof buf)) == 0)
            return c;
    return -1;
}
