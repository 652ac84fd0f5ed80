/* SPDX-License-Identifier: MIT */
/*
 * tools/train_model.c - clgrad-train's models (sequential containers of
 * library layers), optimizer and learning-rate schedule.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "train_run.h"

/* Adds a new layer (NULL: its constructor failed) to the model; the
 * model owns it from then on. */
static int
add(cg_module *model, const char *name, cg_module *layer)
{
    if (cg_module_add(model, name, layer) == CG_OK)
        return 0;
    cg_module_free(layer);
    return -1;
}

/* The MLP: fc0, relu0, fc1, relu1, ..., fcN (parameters "fc0.weight"). */
cg_module *
tr_mlp_new(cg_context *ctx, const tr_config *c, int in, int out)
{
    cg_module *m = cg_sequential_new(ctx);
    char name[16];
    int i, width = in;

    for (i = 0; m && i <= c->nhidden; i++) {
        int next = i < c->nhidden ? c->hidden[i] : out;

        snprintf(name, sizeof name, "fc%d", i);
        if (add(m, name, cg_linear_new(ctx, width, next, 1)))
            break;
        snprintf(name, sizeof name, "relu%d", i);
        if (i < c->nhidden && add(m, name, cg_activation_new(ctx, "relu")))
            break;
        width = next;
    }
    if (m && i <= c->nhidden) {
        cg_module_free(m);
        return NULL;
    }
    return m;
}

cg_module *
tr_cnn_new(cg_context *ctx, const tr_config *c, int in, int out)
{
    cg_module *m = cg_sequential_new(ctx);
    const int k3[2] = { 3, 3 }, k2[2] = { 2, 2 };
    cg_conv_options o;
    char name[16];
    int i, ch = 1, side = 1;

    while (side * side < in)
        side++;
    memset(&o, 0, sizeof o);
    o.padding[0] = o.padding[1] = 1;
    for (i = 0; m && i < c->nhidden; i++) {
        snprintf(name, sizeof name, "conv%d", i);
        if (add(m, name, cg_conv2d_new(ctx, ch, c->hidden[i], k3, 1, &o)))
            break;
        snprintf(name, sizeof name, "bn%d", i);
        if (add(m, name, cg_batch_norm2d_new(ctx, c->hidden[i], 1e-5f, 0.1f,
                                             1, 1)))
            break;
        snprintf(name, sizeof name, "relu%d", i);
        if (add(m, name, cg_activation_new(ctx, "relu")))
            break;
        snprintf(name, sizeof name, "pool%d", i);
        if (add(m, name, cg_max_pool2d_new(ctx, k2, NULL, NULL)))
            break;
        ch = c->hidden[i];
        side /= 2;
    }
    if (m && (i < c->nhidden || add(m, "flatten", cg_flatten_new(ctx, 1, -1))
              || add(m, "fc", cg_linear_new(ctx, ch * side * side, out, 1)))) {
        cg_module_free(m);
        return NULL;
    }
    return m;
}

cg_tensor *
tr_forward(run *r, cg_tensor *x)
{
    return tr_forward_model(&r->cfg, r->model, x);
}

cg_tensor *
tr_forward_model(const tr_config *cfg, cg_module *m, cg_tensor *x)
{
    int64_t shape[4] = { 0, 1, 1, 1 };
    cg_tensor *img, *y;

    if (cfg->model != TR_CNN)
        return cg_module_forward(m, x);
    cg_tensor_shape(x, shape);
    shape[2] = 1;
    while (shape[2] * shape[2] < shape[1])
        shape[2]++;
    shape[3] = shape[2];
    shape[1] = 1;
    img = cg_reshape(x, 4, shape);
    y = img ? cg_module_forward(m, img) : NULL;
    cg_tensor_free(img);
    return y;
}

/* The character LSTM: embed, lstm, head. */
cg_module *
tr_lstm_new(cg_context *ctx, const tr_config *c, int vocab)
{
    cg_module *m = cg_sequential_new(ctx);
    cg_rnn_options o;

    memset(&o, 0, sizeof o);
    o.mode = CG_LSTM;
    o.input_size = (int)c->embed;
    o.hidden_size = c->hidden[0];
    o.num_layers = (int)c->layers;
    o.dropout = (float)c->dropout;
    if (m && (add(m, "embed", cg_embedding_new(ctx, vocab, (int)c->embed)) ||
              add(m, "lstm", cg_rnn_new(ctx, &o)) ||
              add(m, "head", cg_linear_new(ctx, c->hidden[0], vocab, 1)))) {
        cg_module_free(m);
        return NULL;
    }
    return m;
}

/* Logits [T*B, V] for ids [T, B]; the final states replace *h and *c
 * (detached when `detach`). */
cg_tensor *
tr_lstm_forward(cg_module *m, cg_tensor *ids, cg_tensor **h, cg_tensor **c,
                int detach)
{
    cg_tensor *e, *y = NULL, *hn = NULL, *cn = NULL, *flat, *logits;
    int64_t shape[3];
    int status;

    e = cg_module_forward(cg_module_child(m, 0, NULL), ids);
    if (!e)
        return NULL;
    status = cg_rnn_forward(cg_module_child(m, 1, NULL), e, *h, *c, NULL, &y,
                            &hn, &cn);
    cg_tensor_free(e);
    if (status)
        return NULL;
    cg_tensor_free(*h);
    cg_tensor_free(*c);
    *h = detach ? cg_detach(hn) : cg_tensor_ref(hn);
    *c = detach ? cg_detach(cn) : cg_tensor_ref(cn);
    cg_tensor_free(hn);
    cg_tensor_free(cn);
    cg_tensor_shape(y, shape);
    shape[0] *= shape[1];
    shape[1] = shape[2];
    flat = cg_reshape(y, 2, shape);
    cg_tensor_free(y);
    if (!flat)
        return NULL;
    logits = cg_module_forward(cg_module_child(m, 2, NULL), flat);
    cg_tensor_free(flat);
    return logits;
}

cg_optimizer *
tr_make_optimizer(cg_context *ctx, const tr_config *c, cg_tensor **params,
                  int nparams)
{
    switch (tr_optimizer_kind(c->optimizer)) {
    case 2: {
        cg_sgd_options o;

        memset(&o, 0, sizeof o);
        o.lr = c->lr;
        o.momentum = c->momentum > 0 ? c->momentum : CG_OPTIM_ZERO;
        o.weight_decay = c->weight_decay;
        return cg_optim_sgd_new(ctx, params, nparams, &o);
    }
    case 3: {
        cg_rmsprop_options o;

        memset(&o, 0, sizeof o);
        o.lr = c->lr;
        o.momentum = c->momentum;
        o.weight_decay = c->weight_decay;
        return cg_optim_rmsprop_new(ctx, params, nparams, &o);
    }
    default: {
        cg_adam_options o;
        int w = tr_optimizer_kind(c->optimizer) == 1;

        memset(&o, 0, sizeof o);
        o.lr = c->lr;
        o.weight_decay = c->weight_decay > 0 ? c->weight_decay
                                             : w ? 0 : CG_OPTIM_ZERO;
        return w ? cg_optim_adamw_new(ctx, params, nparams, &o)
                 : cg_optim_adam_new(ctx, params, nparams, &o);
    }
    }
}

/* NULL for "constant"; step_size, gamma 0: the defaults (a third of the
 * run, 0.1; exp: 1% of lr at the end). */
cg_lr_schedule *
tr_make_schedule(const tr_config *c, cg_optimizer *opt, int64_t total,
                 int *status)
{
    cg_lr_schedule *s = NULL;

    *status = 0;
    if (strcmp(c->schedule, "step") == 0)
        s = cg_lr_schedule_step_new(opt, c->step_size > 0 ? c->step_size
                                         : total / 3 > 0 ? total / 3 : 1,
                                    c->gamma > 0 ? c->gamma : 0.1);
    else if (strcmp(c->schedule, "exp") == 0)
        s = cg_lr_schedule_exponential_new(opt, c->gamma > 0 ? c->gamma
                                           : pow(0.01, 1.0 / (double)total));
    else if (strcmp(c->schedule, "cosine") == 0)
        s = cg_lr_schedule_cosine_new(opt, c->warmup < total ? c->warmup : 0,
                                      0.0, total, c->min_lr);
    else
        return NULL;
    if (!s)
        *status = -1;
    return s;
}
