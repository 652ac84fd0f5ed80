/* SPDX-License-Identifier: MIT */
/*
 * lib/nn/cnn.c - the layers around convolutions: batch normalisation
 * (with its running statistics as buffers), max, average and adaptive
 * average pooling, flatten and transposed convolution, named and
 * initialised as PyTorch's BatchNorm1d/2d, MaxPool2d, AvgPool2d,
 * AdaptiveAvgPool2d, Flatten and ConvTranspose2d.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "nn/internal.h"
#include "tensor/internal.h"

/* ------------------------------------------------------------------------
 * BatchNorm1d, BatchNorm2d
 * ------------------------------------------------------------------------ */

static cg_module *
batch_norm_new(cg_context *ctx, const char *kind, int num_features,
               float eps, float momentum, int affine, int track)
{
    int64_t c = num_features;
    cg_module *m;

    cg__error_clear();
    if (!ctx) {
        cg__error(CG_EINVAL, "context is NULL");
        return NULL;
    }
    if (num_features < 1 || !isfinite(eps) || eps < 0.0f ||
        !(momentum >= 0.0f && momentum <= 1.0f)) {
        cg__error(CG_EINVAL, "%s layer: num_features %d must be positive, "
                  "eps %g finite and >= 0, momentum %g in [0, 1]", kind,
                  num_features, (double)eps, (double)momentum);
        return NULL;
    }
    if (!(m = cg__module_new(ctx, kind)))
        return NULL;
    m->eps = eps;
    m->momentum = momentum;
    m->bias = affine != 0;
    m->has_count = track != 0;
    /* PyTorch: weight ones, bias zeros; running_mean zeros, running_var
     * ones, num_batches_tracked 0. */
    if ((affine && (cg__module_add_tensor(m, "weight",
                                          cg_ones(ctx, 1, &c), 0) ||
                    cg__module_add_tensor(m, "bias",
                                          cg_zeros(ctx, 1, &c), 0))) ||
        (track && (cg__module_add_tensor(m, "running_mean",
                                         cg_zeros(ctx, 1, &c), 1) ||
                   cg__module_add_tensor(m, "running_var",
                                         cg_ones(ctx, 1, &c), 1)))) {
        cg__module_unref(m);
        return NULL;
    }
    return m;
}

cg_module *
cg_batch_norm1d_new(cg_context *ctx, int num_features, float eps,
                    float momentum, int affine, int track_running_stats)
{
    return batch_norm_new(ctx, "batch_norm1d", num_features, eps, momentum,
                          affine, track_running_stats);
}

cg_module *
cg_batch_norm2d_new(cg_context *ctx, int num_features, float eps,
                    float momentum, int affine, int track_running_stats)
{
    return batch_norm_new(ctx, "batch_norm2d", num_features, eps, momentum,
                          affine, track_running_stats);
}

static int
is_batch_norm(const cg_module *m)
{
    return strcmp(m->kind, "batch_norm1d") == 0 ||
           strcmp(m->kind, "batch_norm2d") == 0;
}

cg_tensor *
cg_batch_norm_forward(cg_module *m, cg_tensor *x)
{
    int nd, two_d;
    cg_tensor *y;

    cg__error_clear();
    if (cg__module_check(m, NULL))
        return NULL;
    if (!is_batch_norm(m)) {
        cg__error(CG_EINVAL, "a %s layer where a batch norm layer is "
                  "needed", m->kind);
        return NULL;
    }
    if (cg__check_tensor(x, "input", CG__FLOAT_DTYPE))
        return NULL;
    nd = cg_tensor_ndim(x);
    two_d = strcmp(m->kind, "batch_norm2d") == 0;
    if (two_d ? nd != 4 : nd != 2 && nd != 3) {
        cg__error(CG_ESHAPE, "%s layer: expected a %s input, got %d "
                  "dimensions", m->kind, two_d ? "4-D [N, C, H, W]"
                  : "2-D [N, C] or 3-D [N, C, L]", nd);
        return NULL;
    }
    /* Without running statistics the batch's are used in both modes. */
    y = cg_batch_norm(x, m->has_count ? m->buffers[0] : NULL,
                      m->has_count ? m->buffers[1] : NULL,
                      m->bias ? m->params[0] : NULL,
                      m->bias ? m->params[1] : NULL,
                      m->training || !m->has_count, m->momentum, m->eps);
    if (y && m->training && m->has_count)
        m->count++;
    return y;
}

int
cg_batch_norm_stats(const cg_module *m, cg_tensor **running_mean,
                    cg_tensor **running_var, int64_t *num_batches_tracked)
{
    cg__error_clear();
    if (cg__module_check(m, NULL))
        return cg__last_status();
    if (!is_batch_norm(m))
        return cg__error(CG_EINVAL, "a %s layer where a batch norm layer "
                         "is needed", m->kind);
    if (!m->has_count)
        return cg__error(CG_EINVAL, "%s layer: made without running "
                         "statistics", m->kind);
    if (running_mean)
        *running_mean = m->buffers[0];
    if (running_var)
        *running_var = m->buffers[1];
    if (num_batches_tracked)
        *num_batches_tracked = m->count;
    return CG_OK;
}

/* ------------------------------------------------------------------------
 * MaxPool2d, AvgPool2d
 * ------------------------------------------------------------------------ */

static cg_module *
pool_new(cg_context *ctx, const char *kind, const int kernel[2],
         const int stride[2], const int padding[2])
{
    cg_module *m;
    int i;

    cg__error_clear();
    if (!ctx || !kernel) {
        cg__error(CG_EINVAL, "%s is NULL", ctx ? "kernel" : "context");
        return NULL;
    }
    for (i = 0; i < 2; i++)
        if (kernel[i] < 1 || (stride && stride[i] < 1) ||
            (padding && (padding[i] < 0 || padding[i] > kernel[i] / 2))) {
            cg__error(CG_EINVAL, "%s layer: kernel %dx%d, stride %dx%d, "
                      "padding %dx%d: kernel and stride must be positive, "
                      "padding in 0 .. kernel / 2", kind, kernel[0],
                      kernel[1], stride ? stride[0] : kernel[0],
                      stride ? stride[1] : kernel[1],
                      padding ? padding[0] : 0, padding ? padding[1] : 0);
            return NULL;
        }
    if (!(m = cg__module_new(ctx, kind)))
        return NULL;
    for (i = 0; i < 2; i++) {
        m->pool[i] = kernel[i];
        m->pool[2 + i] = stride ? stride[i] : kernel[i];
        m->pool[4 + i] = padding ? padding[i] : 0;
        m->pool[6 + i] = 1;
    }
    return m;
}

cg_module *
cg_max_pool2d_new(cg_context *ctx, const int kernel[2], const int stride[2],
                  const int padding[2])
{
    return pool_new(ctx, "max_pool2d", kernel, stride, padding);
}

cg_module *
cg_avg_pool2d_new(cg_context *ctx, const int kernel[2], const int stride[2],
                  const int padding[2])
{
    cg_module *m = pool_new(ctx, "avg_pool2d", kernel, stride, padding);

    if (m)
        m->pool_flags = 2;      /* count_include_pad, PyTorch's default */
    return m;
}

cg_module *
cg_adaptive_avg_pool2d_new(cg_context *ctx, int out_h, int out_w)
{
    cg_module *m;

    cg__error_clear();
    if (!ctx) {
        cg__error(CG_EINVAL, "context is NULL");
        return NULL;
    }
    if (out_h < 1 || out_w < 1) {
        cg__error(CG_EINVAL, "adaptive_avg_pool2d layer: output size %dx%d "
                  "must be positive", out_h, out_w);
        return NULL;
    }
    if ((m = cg__module_new(ctx, "adaptive_avg_pool2d"))) {
        m->pool[0] = out_h;
        m->pool[1] = out_w;
    }
    return m;
}

/* ------------------------------------------------------------------------
 * ConvTranspose2d
 * ------------------------------------------------------------------------ */

cg_module *
cg_conv_transpose2d_new(cg_context *ctx, int in_channels, int out_channels,
                        const int kernel[2], int bias,
                        const cg_conv_transpose_options *opts)
{
    cg_conv_transpose_options o;
    cg_module *m;
    int g, i;

    cg__error_clear();
    if (!ctx || !kernel) {
        cg__error(CG_EINVAL, "%s is NULL", ctx ? "kernel" : "context");
        return NULL;
    }
    if (opts)
        o = *opts;
    else
        memset(&o, 0, sizeof o);
    g = o.groups ? o.groups : 1;
    if (cg__conv_layer_check("conv_transpose2d", in_channels, out_channels,
                             kernel, g))
        return NULL;
    for (i = 0; i < 2; i++)
        if (o.stride[i] < 0 || o.padding[i] < 0 || o.dilation[i] < 0 ||
            o.output_padding[i] < 0) {
            cg__error(CG_EINVAL, "conv_transpose2d layer: stride, padding, "
                      "output_padding and dilation must not be negative");
            return NULL;
        }
    if (!(m = cg__module_new(ctx, "conv_transpose2d")))
        return NULL;
    m->convt = o;
    /* The weight is [in, out / groups, kh, kw]: PyTorch's fan_in, from
     * its dimension 1, is out_channels / groups * kh * kw. */
    if (cg__conv_layer_params(m, in_channels, out_channels / g, kernel, bias,
                              out_channels)) {
        cg__module_unref(m);
        return NULL;
    }
    return m;
}

/* ------------------------------------------------------------------------
 * Flatten
 * ------------------------------------------------------------------------ */

cg_module *
cg_flatten_new(cg_context *ctx, int start_dim, int end_dim)
{
    cg_module *m;

    cg__error_clear();
    if (!ctx) {
        cg__error(CG_EINVAL, "context is NULL");
        return NULL;
    }
    if ((m = cg__module_new(ctx, "flatten"))) {
        m->pool[0] = start_dim;
        m->pool[1] = end_dim;
    }
    return m;
}

/* ------------------------------------------------------------------------
 * The forward of the parameter-free layers above, for cg_module_forward.
 * ------------------------------------------------------------------------ */

cg_tensor *
cg__cnn_layer_forward(cg_module *m, cg_tensor *x, int *handled)
{
    *handled = 1;
    if (is_batch_norm(m))
        return cg_batch_norm_forward(m, x);
    if (strcmp(m->kind, "max_pool2d") == 0)
        return cg_max_pool2d(x, m->pool, m->pool + 2, m->pool + 4,
                             m->pool + 6, m->pool_flags & 1);
    if (strcmp(m->kind, "avg_pool2d") == 0)
        return cg_avg_pool2d(x, m->pool, m->pool + 2, m->pool + 4,
                             m->pool_flags & 1, (m->pool_flags & 2) != 0, 0);
    if (strcmp(m->kind, "flatten") == 0)
        return cg_flatten(x, m->pool[0], m->pool[1]);
    if (strcmp(m->kind, "adaptive_avg_pool2d") == 0)
        return cg_adaptive_avg_pool2d(x, m->pool[0], m->pool[1]);
    if (strcmp(m->kind, "conv_transpose2d") == 0)
        return cg_conv_transpose2d(x, m->params[0],
                                   m->bias ? m->params[1] : NULL, &m->convt);
    *handled = 0;
    return NULL;
}
