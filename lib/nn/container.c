/* SPDX-License-Identifier: MIT */
/*
 * lib/nn/container.c - modules made of modules: the sequential container
 * (children in order, parameters iterated across them under dotted names
 * as PyTorch's state_dict names them) and the parameterless activation
 * layers that let a sequential container be a whole MLP.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/internal.h"
#include "ops/internal.h"
#include "tensor/internal.h"

#define NAME_MAX_ 64

static void
free_flat(cg__module_list *l)
{
    int i;

    for (i = 0; i < l->nflat; i++)
        free(l->flat_name[i]);
    free(l->flat);
    free(l->flat_name);
    l->flat = NULL;
    l->flat_name = NULL;
    l->nflat = 0;
}

void
cg__module_list_free(cg__module_list *l)
{
    int i;

    if (!l)
        return;
    for (i = 0; i < l->n; i++) {
        l->child[i]->parent = NULL;
        cg__module_unref(l->child[i]);
        free(l->name[i]);
    }
    free(l->child);
    free(l->name);
    free_flat(l);
    free(l);
}

cg_module *
cg_sequential_new(cg_context *ctx)
{
    cg_module *m;

    cg__error_clear();
    if (!ctx) {
        cg__error(CG_EINVAL, "context is NULL");
        return NULL;
    }
    if (!(m = cg__module_new(ctx, "sequential")))
        return NULL;
    if (!(m->list = cg__calloc(1, sizeof *m->list))) {
        cg__module_unref(m);
        return NULL;
    }
    return m;
}

/* Recomputes m's flattened parameters from its children's; on failure
 * the old ones stay. */
static int
rebuild(cg_module *m)
{
    cg__module_list *l = m->list, nl;
    int i, j, total = 0;

    for (i = 0; i < l->n; i++)
        total += cg_module_num_params(l->child[i]);
    memset(&nl, 0, sizeof nl);
    nl.flat = cg__calloc((size_t)total + 1, sizeof *nl.flat);
    nl.flat_name = cg__calloc((size_t)total + 1, sizeof *nl.flat_name);
    if (!nl.flat || !nl.flat_name)
        goto fail;
    for (i = 0; i < l->n; i++)
        for (j = 0; j < cg_module_num_params(l->child[i]); j++) {
            const char *pn;
            size_t len;

            nl.flat[nl.nflat] = cg_module_param(l->child[i], j, &pn);
            len = strlen(l->name[i]) + strlen(pn) + 2;
            if (!(nl.flat_name[nl.nflat] = cg__malloc(len)))
                goto fail;
            snprintf(nl.flat_name[nl.nflat++], len, "%s.%s", l->name[i], pn);
        }
    free_flat(l);
    l->flat = nl.flat;
    l->flat_name = nl.flat_name;
    l->nflat = nl.nflat;
    return CG_OK;
fail:
    free_flat(&nl);
    return cg__last_status();
}

/* m and every container above it. */
static int
rebuild_up(cg_module *m)
{
    int status = CG_OK;

    for (; m && status == CG_OK; m = m->parent)
        status = rebuild(m);
    return status;
}

static int
check_add(const cg_module *m, const char *name, const cg_module *child)
{
    const cg_module *up;
    int i;

    if (!m || !m->list)
        return cg__error(CG_EINVAL, "module_add: %s", m ? "not a container"
                         : "container is NULL");
    if (!child)
        return cg__error(CG_EINVAL, "module_add: child is NULL");
    if (child->ctx != m->ctx)
        return cg__error(CG_ECONTEXT, "module_add: the child %s layer "
                         "belongs to another context", child->kind);
    for (up = m; up; up = up->parent)
        if (up == child)
            return cg__error(CG_EINVAL, "module_add: a container cannot "
                             "hold itself");
    if (child->parent)
        return cg__error(CG_EINVAL, "module_add: the %s layer already "
                         "belongs to a container", child->kind);
    if (name && (!*name || strchr(name, '.') ||
                 strlen(name) >= NAME_MAX_))
        return cg__error(CG_EINVAL, "module_add: name '%.80s' must be 1..%d "
                         "bytes without '.'", name, NAME_MAX_ - 1);
    for (i = 0; name && i < m->list->n; i++)
        if (strcmp(m->list->name[i], name) == 0)
            return cg__error(CG_EINVAL, "module_add: the container already "
                             "has a child '%s'", name);
    return CG_OK;
}

int
cg_module_add(cg_module *m, const char *name, cg_module *child)
{
    char buf[NAME_MAX_];
    cg__module_list *l;
    int status;

    if (!child && cg__last_status() != CG_OK) {
        char why[400];

        snprintf(why, sizeof why, "%s", cg_last_error());
        return cg__error(cg__last_status(), "module_add: child is NULL "
                         "(%s)", why);
    }
    cg__error_clear();
    if ((status = check_add(m, name, child)))
        return status;
    l = m->list;
    if (!name) {
        snprintf(buf, sizeof buf, "%d", l->n);
        if ((status = check_add(m, buf, child)))
            return status;
        name = buf;
    }
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 4;
        void *c = realloc(l->child, (size_t)cap * sizeof *l->child);

        if (c)
            l->child = c;
        c = c ? realloc(l->name, (size_t)cap * sizeof *l->name) : NULL;
        if (!c)
            return cg__error(CG_EHOSTMEM, "out of host memory");
        l->name = c;
        l->cap = cap;
    }
    if (!(l->name[l->n] = cg__strdup(name)))
        return cg__last_status();
    l->child[l->n++] = child;
    child->parent = m;
    if ((status = rebuild_up(m)) != CG_OK) {
        child->parent = NULL;
        free(l->name[--l->n]);
        rebuild_up(m);
        return status;
    }
    return CG_OK;
}

int
cg_module_num_children(const cg_module *m)
{
    if (cg__module_check(m, NULL))
        return -1;
    return m->list ? m->list->n : 0;
}

cg_module *
cg_module_child(const cg_module *m, int i, const char **name)
{
    cg__error_clear();
    if (cg__module_check(m, NULL))
        return NULL;
    if (i < 0 || i >= cg_module_num_children(m)) {
        cg__error(CG_EINVAL, "%s layer has %d children, not %d", m->kind,
                  cg_module_num_children(m), i + 1);
        return NULL;
    }
    if (name)
        *name = m->list->name[i];
    return m->list->child[i];
}

int
cg_module_params(const cg_module *m, cg_tensor **params, int max)
{
    int i, n;

    cg__error_clear();
    if ((n = cg_module_num_params(m)) < 0)
        return -1;
    if (max < 0 || (max > 0 && !params)) {
        cg__error(CG_EINVAL, "module_params: params is NULL or max %d < 0",
                  max);
        return -1;
    }
    for (i = 0; i < n && i < max; i++)
        params[i] = cg_module_param(m, i, NULL);
    return n;
}

/* ------------------------------------------------------------------------
 * Activations and forward
 * ------------------------------------------------------------------------ */

/* fused: the activation a linear layer before it runs in its GEMM's
 * epilogue (lib/ops/internal.h's cg__act; 0: none, gelu's derivative
 * needs its input). */
static const struct {
    const char *name;
    cg_tensor *(*fn)(cg_tensor *);
    cg__act fused;
} activations[] = {
    { "relu", cg_relu, CG__ACT_RELU },
    { "tanh", cg_tanh, CG__ACT_TANH },
    { "sigmoid", cg_sigmoid, CG__ACT_SIGMOID },
    { "gelu", cg_gelu, CG__ACT_NONE },
};

cg_module *
cg_activation_new(cg_context *ctx, const char *name)
{
    size_t i;
    cg_module *m;

    cg__error_clear();
    if (!ctx || !name) {
        cg__error(CG_EINVAL, "%s is NULL", ctx ? "name" : "context");
        return NULL;
    }
    for (i = 0; i < sizeof activations / sizeof activations[0]; i++)
        if (strcmp(name, activations[i].name) == 0)
            break;
    if (i == sizeof activations / sizeof activations[0]) {
        cg__error(CG_EINVAL, "activation '%.64s' is none of relu, tanh, "
                  "sigmoid, gelu", name);
        return NULL;
    }
    if ((m = cg__module_new(ctx, activations[i].name)))
        m->act = activations[i].fn;
    return m;
}

/* The activation (lib/ops/internal.h's cg__act number) a linear layer
 * followed by the activation layer `next` runs in its GEMM's epilogue,
 * or 0: a relu, tanh or sigmoid after a linear layer is one op, the same
 * values, one pass and one saved tensor fewer.  Not inside a dual level:
 * the fused nodes have no forward-mode rule, the two ops have. */
static int
fusable(const cg_module *m, const cg_module *next)
{
    size_t i;

    if (strcmp(m->kind, "linear") != 0 || !next->act ||
        m->ctx->fwad_level)
        return 0;
    for (i = 0; i < sizeof activations / sizeof activations[0]; i++)
        if (next->act == activations[i].fn)
            return activations[i].fused;
    return 0;
}

cg_tensor *
cg_module_forward(cg_module *m, cg_tensor *x)
{
    cg_tensor *h;
    int i;

    cg__error_clear();
    if (cg__module_check(m, NULL))
        return NULL;
    if (!x) {
        cg__error(CG_EINVAL, "module_forward: x is NULL");
        return NULL;
    }
    if (m->act)
        return m->act(x);
    if (strcmp(m->kind, "linear") == 0)
        return cg_linear_forward(m, x);
    if (strcmp(m->kind, "embedding") == 0)
        return cg_embedding_forward(m, x);
    if (strcmp(m->kind, "conv2d") == 0)
        return cg_conv2d_forward(m, x);
    if (!m->list) {
        int handled;

        h = cg__cnn_layer_forward(m, x, &handled);
        if (handled)
            return h;
        cg__error(CG_EINVAL, "module_forward: a %s layer needs its own "
                  "forward function", m->kind);
        return NULL;
    }
    h = cg_tensor_ref(x);
    for (i = 0; h && i < m->list->n; i++) {
        cg_module *c = m->list->child[i];
        int act = i + 1 < m->list->n ? fusable(c, m->list->child[i + 1]) : 0;
        cg_tensor *y = act ? cg__linear_forward_act(c, h, act)
                           : cg_module_forward(c, h);

        i += act != 0;
        cg_tensor_free(h);
        h = y;
    }
    return h;
}
