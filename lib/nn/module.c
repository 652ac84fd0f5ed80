/* SPDX-License-Identifier: MIT */
/*
 * lib/nn/module.c - what every layer shares (parameters, names, training
 * mode) and the two simplest layers, linear and embedding.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/internal.h"
#include "ops/internal.h"

cg_module *
cg__module_new(cg_context *ctx, const char *kind)
{
    cg_module *m = calloc(1, sizeof *m);

    if (!m) {
        cg__error(CG_EHOSTMEM, "out of host memory for a %s layer", kind);
        return NULL;
    }
    m->refs = 1;
    m->kind = kind;
    m->ctx = ctx;
    m->training = 1;
    return m;
}

int
cg__module_add_param(cg_module *m, const char *name, int ndim,
                     const int64_t *shape, float bound)
{
    cg_tensor *t;
    char *copy;

    if (m->nparams == CG__MODULE_MAX_PARAMS)
        return cg__error(CG_EINVAL, "%s layer: more than %d parameters",
                         m->kind, CG__MODULE_MAX_PARAMS);
    t = bound < 0 ? cg_rand_normal(m->ctx, ndim, shape, 0.0f, 1.0f)
                  : cg_rand_uniform(m->ctx, ndim, shape, -bound, bound);
    if (!t)
        return cg__last_status();
    copy = strdup(name);
    if (!copy) {
        cg_tensor_free(t);
        return cg__error(CG_EHOSTMEM, "out of host memory");
    }
    cg_tensor_set_requires_grad(t, 1);
    m->params[m->nparams] = t;
    m->names[m->nparams] = copy;
    m->nparams++;
    return CG_OK;
}

int
cg__module_add_tensor(cg_module *m, const char *name, cg_tensor *t,
                      int buffer)
{
    int *n = buffer ? &m->nbuffers : &m->nparams;
    int max = buffer ? CG__MODULE_MAX_BUFFERS : CG__MODULE_MAX_PARAMS;
    char *copy;

    if (!t)
        return cg__last_status();
    if (*n == max) {
        cg_tensor_free(t);
        return cg__error(CG_EINVAL, "%s layer: more than %d %s", m->kind,
                         max, buffer ? "buffers" : "parameters");
    }
    if (!(copy = strdup(name))) {
        cg_tensor_free(t);
        return cg__error(CG_EHOSTMEM, "out of host memory");
    }
    if (buffer) {
        m->buffers[*n] = t;
        m->buffer_names[*n] = copy;
    } else {
        cg_tensor_set_requires_grad(t, 1);
        m->params[*n] = t;
        m->names[*n] = copy;
    }
    (*n)++;
    return CG_OK;
}

static int
visit(const cg_module *m, char *name, size_t len, size_t cap,
      cg__buffer_fn fn, void *user)
{
    int i, rc = CG_OK;

    for (i = 0; rc == CG_OK && m->list && i < m->list->n; i++) {
        size_t n = strlen(m->list->name[i]);

        if (len + n + 2 > cap)
            return cg__error(CG_EINVAL, "buffer name '%s%s' is too long",
                             name, m->list->name[i]);
        memcpy(name + len, m->list->name[i], n);
        name[len + n] = '.';
        name[len + n + 1] = '\0';
        rc = visit(m->list->child[i], name, len + n + 1, cap, fn, user);
        name[len] = '\0';
    }
    for (i = 0; rc == CG_OK && i <= m->nbuffers; i++) {
        const char *b = i < m->nbuffers ? m->buffer_names[i]
                      : "num_batches_tracked";

        if (i == m->nbuffers && !m->has_count)
            break;
        if (len + strlen(b) + 1 > cap)
            return cg__error(CG_EINVAL, "buffer name '%s%s' is too long",
                             name, b);
        strcpy(name + len, b);
        rc = i < m->nbuffers ? fn(user, name, m->buffers[i], NULL)
                             : fn(user, name, NULL, (int64_t *)&m->count);
        name[len] = '\0';
    }
    return rc;
}

int
cg__module_visit_buffers(const cg_module *m, const char *prefix,
                         cg__buffer_fn fn, void *user)
{
    char name[1100];
    size_t len = prefix ? strlen(prefix) : 0;

    if (len >= sizeof name)
        return cg__error(CG_EINVAL, "prefix '%.80s...' is too long",
                         prefix);
    memcpy(name, prefix ? prefix : "", len);
    name[len] = '\0';
    return visit(m, name, len, sizeof name, fn, user);
}

int
cg__module_check(const cg_module *m, const char *kind)
{
    if (!m)
        return cg__error(CG_EINVAL, "layer is NULL");
    if (kind && strcmp(m->kind, kind) != 0)
        return cg__error(CG_EINVAL, "a %s layer where a %s layer is needed",
                         m->kind, kind);
    return CG_OK;
}

cg_module *
cg__module_ref(cg_module *m)
{
    m->refs++;
    return m;
}

void
cg__module_unref(cg_module *m)
{
    int i;

    if (!m || --m->refs > 0)
        return;
    cg__module_list_free(m->list);
    for (i = 0; i < m->nparams; i++) {
        cg_tensor_free(m->params[i]);
        free(m->names[i]);
    }
    for (i = 0; i < m->nbuffers; i++) {
        cg_tensor_free(m->buffers[i]);
        free(m->buffer_names[i]);
    }
    cg__rnn_step_release(&m->step);
    cg__rnn_step_release(&m->gstep);
    for (i = 0; i < 4; i++)
        cg__rnn_step_release(&m->hstep[i / 2][i % 2]);
    free(m);
}

void
cg_module_free(cg_module *m)
{
    cg__module_unref(m);
}

const char *
cg_module_kind(const cg_module *m)
{
    return m ? m->kind : NULL;
}

/* A container's parameters are its subtree's, flattened. */
static int
count(const cg_module *m)
{
    return m->list ? m->list->nflat : m->nparams;
}

static cg_tensor *
param_at(const cg_module *m, int i, const char **name)
{
    *name = m->list ? m->list->flat_name[i] : m->names[i];
    return m->list ? m->list->flat[i] : m->params[i];
}

int
cg_module_num_params(const cg_module *m)
{
    if (cg__module_check(m, NULL))
        return -1;
    return count(m);
}

cg_tensor *
cg_module_param(const cg_module *m, int i, const char **name)
{
    const char *n;
    cg_tensor *t;

    if (cg__module_check(m, NULL))
        return NULL;
    if (i < 0 || i >= count(m)) {
        cg__error(CG_EINVAL, "%s layer has %d parameters, not %d", m->kind,
                  count(m), i + 1);
        return NULL;
    }
    t = param_at(m, i, &n);
    if (name)
        *name = n;
    return t;
}

cg_tensor *
cg_module_find_param(const cg_module *m, const char *name)
{
    int i;

    if (cg__module_check(m, NULL))
        return NULL;
    if (!name) {
        cg__error(CG_EINVAL, "parameter name is NULL");
        return NULL;
    }
    for (i = 0; i < count(m); i++) {
        const char *n;
        cg_tensor *t = param_at(m, i, &n);

        if (strcmp(n, name) == 0)
            return t;
    }
    cg__error(CG_EINVAL, "%s layer has no parameter '%s'", m->kind, name);
    return NULL;
}

int
cg_module_set_training(cg_module *m, int training)
{
    int i, status = cg__module_check(m, NULL);

    if (status == CG_OK)
        m->training = training != 0;
    for (i = 0; status == CG_OK && m->list && i < m->list->n; i++)
        status = cg_module_set_training(m->list->child[i], training);
    return status;
}

int
cg_module_zero_grad(cg_module *m)
{
    int i, status = cg__module_check(m, NULL);

    for (i = 0; status == CG_OK && i < count(m); i++) {
        const char *n;

        status = cg_tensor_zero_grad(param_at(m, i, &n));
    }
    return status;
}

int
cg_module_to_dtype(cg_module *m, cg_dtype dtype)
{
    cg_tensor **cast;
    int i, n, status;

    cg__error_clear();
    if ((status = cg__module_check(m, NULL)))
        return status;
    if (dtype != CG_F32 && dtype != CG_F16 && dtype != CG_BF16)
        return cg__error(CG_EDTYPE, "module_to_dtype: %s (only float32, "
                         "float16 or bfloat16)", cg__dtype_name(dtype));
    n = count(m);
    if (n == 0)
        return CG_OK;
    if (!(cast = cg__calloc((size_t)n, sizeof *cast)))
        return CG_EHOSTMEM;
    /* Every cast first, so that a failure changes nothing. */
    for (i = 0; i < n; i++) {
        const char *name;
        cg_tensor *t = param_at(m, i, &name);

        if (t->dtype != dtype && !(cast[i] = cg__cast(t, dtype))) {
            status = cg__last_status();
            break;
        }
    }
    /* Then each parameter takes its cast's storage: the same tensor, so
     * containers and callers holding it see the new dtype. */
    for (i = 0; i < n; i++) {
        const char *name;
        cg_tensor *t = param_at(m, i, &name), *c = cast[i];
        cg__storage *old;

        if (!c)
            continue;
        if (status == CG_OK) {
            old = t->storage;
            t->storage = c->storage;
            c->storage = old;
            t->dtype = dtype;
            t->offset = 0;
            memcpy(t->strides, c->strides, sizeof t->strides);
            cg_tensor_free(t->grad);
            t->grad = NULL;
        }
        cg_tensor_free(c);
    }
    free(cast);
    return status;
}

/* ------------------------------------------------------------------------
 * Linear
 * ------------------------------------------------------------------------ */

cg_module *
cg_linear_new(cg_context *ctx, int in_features, int out_features, int bias)
{
    int64_t wshape[2] = { out_features, in_features };
    float bound;
    cg_module *m;

    cg__error_clear();
    if (!ctx) {
        cg__error(CG_EINVAL, "context is NULL");
        return NULL;
    }
    if (in_features < 1 || out_features < 1) {
        cg__error(CG_EINVAL, "linear layer: in_features %d and out_features "
                  "%d must be positive", in_features, out_features);
        return NULL;
    }
    m = cg__module_new(ctx, "linear");
    if (!m)
        return NULL;
    /* PyTorch: kaiming_uniform_(a = sqrt(5)) gives U(-1/sqrt(in),
     * 1/sqrt(in)) for the weight, and the bias uses the same bound. */
    bound = (float)(1.0 / sqrt((double)in_features));
    m->bias = bias != 0;
    if (cg__module_add_param(m, "weight", 2, wshape, bound) ||
        (m->bias && cg__module_add_param(m, "bias", 1, wshape, bound))) {
        cg__module_unref(m);
        return NULL;
    }
    return m;
}

cg_tensor *
cg_linear_forward(cg_module *m, cg_tensor *x)
{
    return cg__linear_forward_act(m, x, CG__ACT_NONE);
}

cg_tensor *
cg__linear_forward_act(cg_module *m, cg_tensor *x, int act)
{
    cg_tensor *w;
    char s1[128], s2[128];

    cg__error_clear();
    if (cg__module_check(m, "linear") ||
        cg__check_tensor(x, "x", CG__FLOAT_DTYPE))
        return NULL;
    w = m->params[0];
    if (x->ctx != m->ctx) {
        cg__error(CG_ECONTEXT, "x and the linear layer belong to different "
                  "contexts");
        return NULL;
    }
    if (x->ndim < 1 || x->shape[x->ndim - 1] != w->shape[1]) {
        cg__error(CG_ESHAPE, "linear layer: input of shape %s, weight %s "
                  "wants [..., %lld]",
                  cg__shape_str(x->ndim, x->shape, s1, sizeof s1),
                  cg__shape_str(w->ndim, w->shape, s2, sizeof s2),
                  (long long)w->shape[1]);
        return NULL;
    }
    /* one GEMM, the bias (and the activation) in its epilogue */
    return cg__linear_act(x, w, m->bias ? m->params[1] : NULL,
                          (cg__act)act);
}

/* ------------------------------------------------------------------------
 * Conv2d
 * ------------------------------------------------------------------------ */

int
cg__conv_layer_check(const char *kind, int in_channels, int out_channels,
                     const int kernel[2], int groups)
{
    if (in_channels < 1 || out_channels < 1 || kernel[0] < 1 ||
        kernel[1] < 1 || groups < 1 || in_channels % groups ||
        out_channels % groups)
        return cg__error(CG_EINVAL, "%s layer: in_channels %d, out_channels "
                         "%d, kernel %dx%d and groups %d: sizes must be "
                         "positive and groups divide both channel counts",
                         kind, in_channels, out_channels, kernel[0],
                         kernel[1], groups);
    return CG_OK;
}

int
cg__conv_layer_params(cg_module *m, int64_t d0, int64_t d1,
                      const int kernel[2], int bias, int64_t nbias)
{
    int64_t wshape[4] = { d0, d1, kernel[0], kernel[1] };
    /* PyTorch: kaiming_uniform_(a = sqrt(5)) over fan_in = the weight's
     * dimension 1 times the kernel gives U(-1/sqrt(fan_in),
     * 1/sqrt(fan_in)); the bias uses the same bound. */
    float bound = (float)(1.0 / sqrt((double)d1 * (double)kernel[0] *
                                     (double)kernel[1]));

    m->bias = bias != 0;
    if (cg__module_add_param(m, "weight", 4, wshape, bound) ||
        (m->bias && cg__module_add_param(m, "bias", 1, &nbias, bound)))
        return cg__last_status();
    return CG_OK;
}

cg_module *
cg_conv2d_new(cg_context *ctx, int in_channels, int out_channels,
              const int kernel[2], int bias, const cg_conv_options *opts)
{
    cg_conv_options o;
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
    if (cg__conv_layer_check("conv2d", in_channels, out_channels, kernel, g))
        return NULL;
    for (i = 0; i < 2; i++)
        if (o.stride[i] < 0 || o.padding[i] < 0 || o.dilation[i] < 0) {
            cg__error(CG_EINVAL, "conv2d layer: stride %d,%d, padding "
                      "%d,%d, dilation %d,%d must not be negative",
                      o.stride[0], o.stride[1], o.padding[0], o.padding[1],
                      o.dilation[0], o.dilation[1]);
            return NULL;
        }
    m = cg__module_new(ctx, "conv2d");
    if (!m)
        return NULL;
    m->conv = o;
    if (cg__conv_layer_params(m, out_channels, in_channels / g, kernel, bias,
                              out_channels)) {
        cg__module_unref(m);
        return NULL;
    }
    return m;
}

cg_tensor *
cg_conv2d_forward(cg_module *m, cg_tensor *x)
{
    cg__error_clear();
    if (cg__module_check(m, "conv2d"))
        return NULL;
    return cg_conv2d(x, m->params[0], m->bias ? m->params[1] : NULL,
                     &m->conv);
}

/* ------------------------------------------------------------------------
 * Embedding
 * ------------------------------------------------------------------------ */

cg_module *
cg_embedding_new(cg_context *ctx, int num_embeddings, int dim)
{
    int64_t shape[2] = { num_embeddings, dim };
    cg_module *m;

    cg__error_clear();
    if (!ctx) {
        cg__error(CG_EINVAL, "context is NULL");
        return NULL;
    }
    if (num_embeddings < 1 || dim < 1) {
        cg__error(CG_EINVAL, "embedding layer: num_embeddings %d and dim %d "
                  "must be positive", num_embeddings, dim);
        return NULL;
    }
    m = cg__module_new(ctx, "embedding");
    if (m && cg__module_add_param(m, "weight", 2, shape, -1.0f)) {
        cg__module_unref(m);
        m = NULL;
    }
    return m;
}

cg_tensor *
cg_embedding_forward(cg_module *m, cg_tensor *indices)
{
    cg__error_clear();
    if (cg__module_check(m, "embedding"))
        return NULL;
    return cg_embedding(m->params[0], indices);
}
