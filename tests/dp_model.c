/* SPDX-License-Identifier: MIT */
/*
 * tests/dp_model.c - the data-parallel tests' model, data and loss
 * (tests/dp_model.h).
 */
#include <math.h>
#include <stdlib.h>

#include "core/internal.h"
#include "dp_model.h"

/* Input i of step t's batch, and its class. */
static float
x_at(int t, int64_t i)
{
    return sinf(0.37f * (float)i + 1.3f * (float)t) *
           cosf(0.11f * (float)(i % 97));
}

static int
y_at(int t, int64_t row)
{
    return (int)((row * 7 + t * 3 + row / 5) % DPM_OUT);
}

cg_module *
dpm_mlp(cg_context *ctx, int hid)
{
    cg_module *m = cg_sequential_new(ctx);
    int i, st = m ? CG_OK : CG_EINVAL;

    if (st == CG_OK)
        st = cg_module_add(m, "fc1", cg_linear_new(ctx, DPM_IN, hid, 1));
    if (st == CG_OK)
        st = cg_module_add(m, "act", cg_activation_new(ctx, "tanh"));
    if (st == CG_OK)
        st = cg_module_add(m, "fc2", cg_linear_new(ctx, hid, DPM_OUT, 1));
    for (i = 0; st == CG_OK && i < cg_module_num_params(m); i++) {
        cg_tensor *p = cg_module_param(m, i, NULL);
        int64_t n = cg_tensor_numel(p), j;
        float *v = malloc((size_t)n * sizeof *v);

        if (!v) {
            st = CG_EHOSTMEM;
            break;
        }
        for (j = 0; j < n; j++)
            v[j] = 0.3f * sinf(0.7f * (float)j + (float)i);
        st = cg_tensor_write(p, v, (size_t)n * sizeof *v);
        free(v);
    }
    if (st != CG_OK) {
        cg_module_free(m);
        return NULL;
    }
    return m;
}

cg_optimizer *
dpm_optimizer(cg_module *m, int adam)
{
    cg_tensor *p[DPM_NPARAM];
    int n = cg_module_params(m, p, DPM_NPARAM);
    cg_context *ctx;

    if (n != DPM_NPARAM)
        return NULL;
    ctx = cg_tensor_context(p[0]);
    if (adam) {
        cg_adam_options o = { 0 };

        o.lr = 1e-2;
        o.beta1 = 0.9;
        o.beta2 = 0.999;
        o.eps = 1e-8;
        return cg_optim_adam_new(ctx, p, n, &o);
    } else {
        cg_sgd_options o = { 0 };

        o.lr = 0.1;
        o.momentum = 0.9;
        return cg_optim_sgd_new(ctx, p, n, &o);
    }
}

int
dpm_loss(void *arg, int rank, cg_module *m, cg_tensor **loss)
{
    const dpm_arg *a = arg;
    cg_context *ctx = cg_tensor_context(cg_module_param(m, 0, NULL));
    int64_t xshape[2] = { a->rows, DPM_IN }, yshape[1] = { a->rows };
    float x[DPM_MAX_BATCH * DPM_IN];
    int y[DPM_MAX_BATCH];
    int64_t first = (int64_t)rank * a->rows, i;
    cg_tensor *xt, *yt, *out;
    int status;

    if (rank == a->fail_rank || a->rows > DPM_MAX_BATCH)
        return cg_tensor_item(NULL, NULL);      /* a real error */
    for (i = 0; i < a->rows * DPM_IN; i++)
        x[i] = x_at(a->step, first * DPM_IN + i);
    for (i = 0; i < a->rows; i++)
        y[i] = y_at(a->step, first + i);
    xt = cg_tensor_from_host(ctx, CG_F32, 2, xshape, x);
    yt = cg_tensor_from_host(ctx, CG_I32, 1, yshape, y);
    out = xt ? cg_module_forward(m, xt) : NULL;
    *loss = out && yt ? cg_cross_entropy(out, yt, CG_REDUCTION_MEAN, -100, 0)
                      : NULL;
    status = *loss ? CG_OK : cg__last_status();
    cg_tensor_free(xt);
    cg_tensor_free(yt);
    cg_tensor_free(out);
    return status;
}

int
dpm_params_host(cg_module *m, float *out[DPM_NPARAM],
                int64_t count[DPM_NPARAM])
{
    int i, st = CG_OK;

    for (i = 0; i < DPM_NPARAM; i++)
        out[i] = NULL;
    for (i = 0; i < DPM_NPARAM && st == CG_OK; i++) {
        cg_tensor *p = cg_module_param(m, i, NULL);
        int64_t n = p ? cg_tensor_numel(p) : 0;

        count[i] = n;
        if (!p || !(out[i] = malloc((size_t)n * sizeof(float))))
            st = CG_EINVAL;
        else
            st = cg_tensor_to_host(p, out[i], (size_t)n * sizeof(float));
    }
    return st;
}
