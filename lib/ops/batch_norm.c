/* SPDX-License-Identifier: MIT */
/*
 * lib/ops/batch_norm.c - batch normalisation per channel of [N, C],
 * [N, C, L] or [N, C, H, W] inputs, PyTorch semantics: batch statistics
 * and in-place running-statistics updates in training, the running
 * statistics in evaluation; optional affine weight and bias.  Kernels:
 * kernels/batch_norm.cl (one work-group per channel for the reductions,
 * fixed-order tree sums, no atomics).
 *
 * float16 and bfloat16 inputs use the same kernels built for their storage
 * (cg__kernel_dt): x, weight, bias, y and the gradients in one dtype; the
 * batch statistics, the sums behind the weight and bias gradients (rounded
 * once) and all arithmetic float32.  The running statistics are float32
 * buffers for every input dtype (the precision their slow averages need;
 * PyTorch keeps them in the module's parameter dtype, which under
 * autocast's float32 batch norm is float32 too).
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "ops/internal.h"

#define BN_WG 64                /* kernels/batch_norm.cl's BN_WG */

enum { BN_WEIGHT = 1, BN_BIAS = 2, BN_UPDATE = 4, BN_TRAIN = 8 };

/* Checks the arguments; *N, *C, *L give x's [N, C, L] view. */
static int
bn_check(cg_tensor *x, cg_tensor *rm, cg_tensor *rv, cg_tensor *w,
         cg_tensor *b, int training, float momentum, float eps, int64_t *N,
         int64_t *C, int64_t *L)
{
    cg_tensor *all[5] = { x, rm, rv, w, b };
    static const char *names[5] = { "input", "running_mean", "running_var",
                                    "weight", "bias" };
    char s1[128], s2[128];
    int k, d, status;

    if ((status = cg__check_tensor(x, "input", CG__FLOAT_DTYPE)))
        return status;
    for (k = 1; k < 5; k++)
        if (all[k] && (status = cg__check_tensor(all[k], names[k],
                                                 k < 3 ? 0 : CG__FLOAT_DTYPE)))
            return status;
    for (k = 3; k < 5; k++)
        if (all[k] && (status = cg__check_same_dtype(x, "input", all[k],
                                                     names[k])))
            return status;
    if ((status = cg__same_context(5, (const cg_tensor *const *)all)))
        return status;
    if (!(eps >= 0.0f) || isinf(eps))
        return cg__error(CG_EINVAL, "batch_norm: eps %g must be finite and "
                         ">= 0", eps);
    if (!(momentum >= 0.0f && momentum <= 1.0f))
        return cg__error(CG_EINVAL, "batch_norm: momentum %g must be in "
                         "[0, 1]", momentum);
    if (!training && (!rm || !rv))
        return cg__error(CG_EINVAL, "batch_norm: evaluation needs "
                         "running_mean and running_var");
    if (!rm != !rv)
        return cg__error(CG_EINVAL, "batch_norm: running_mean and "
                         "running_var go together");
    cg__shape_str(x->ndim, x->shape, s1, sizeof s1);
    if (x->ndim < 2 || x->ndim > 4)
        return cg__error(CG_ESHAPE, "batch_norm: input %s must be [N, C], "
                         "[N, C, L] or [N, C, H, W]", s1);
    *N = x->shape[0];
    *C = x->shape[1];
    *L = 1;
    for (d = 2; d < x->ndim; d++)
        if (cg__checked_mul_i64(*L, x->shape[d], L, "batch_norm: H * W"))
            return cg__last_status();
    for (k = 1; k < 5; k++) {
        const cg_tensor *t = all[k];

        if (t && (t->ndim != 1 || t->shape[0] != *C))
            return cg__error(CG_ESHAPE, "batch_norm: %s %s must be [%lld] "
                             "(the channels of input %s)", names[k],
                             cg__shape_str(t->ndim, t->shape, s2, sizeof s2),
                             (long long)*C, s1);
    }
    if (*C > UINT32_MAX || *L > UINT32_MAX || *N > UINT32_MAX)
        return cg__error(CG_ESHAPE, "batch_norm: input %s is too large",
                         s1);
    if (training && *N * *L <= 1)
        return cg__error(CG_ESHAPE, "batch_norm: input %s has %lld value "
                         "per channel; training needs more than 1", s1,
                         (long long)(*N * *L));
    for (k = 1; k < 3; k++)
        if (all[k] && (!cg_tensor_is_contiguous(all[k]) ||
                       all[k]->offset != 0))
            return cg__error(CG_EINVAL, "batch_norm: %s must be "
                             "contiguous (it is updated in place)",
                             names[k]);
    return CG_OK;
}

/* *out = *sum (float32) in dtype, rounded once; *sum is taken or freed. */
static int
take_sum(cg_tensor **sum, cg_dtype dtype, cg_tensor **out)
{
    if (dtype == CG_F32) {
        *out = *sum;
        *sum = NULL;
        return CG_OK;
    }
    *out = cg__cast(*sum, dtype);
    return *out ? CG_OK : cg__last_status();
}

static int
bn_backward(cg__node *node, cg_tensor *g, cg_tensor **gin)
{
    cg_tensor *x = node->saved[0], *w = node->saved[1];
    cg_tensor *sg = NULL, *sgx = NULL, *dg = NULL;
    cl_mem mx = cg__tensor_mem(x), mw = w ? cg__tensor_mem(w) : mx;
    cl_mem mm = cg__tensor_mem(node->saved[2]);
    cl_mem mi = cg__tensor_mem(node->saved[3]), mg, msg, msgx, mgx;
    cl_uint N = (cl_uint)node->i[0], C = (cl_uint)node->i[1];
    cl_uint L = (cl_uint)node->i[2];
    cl_int flags = (cl_int)node->i[3];
    cl_ulong M = (cl_ulong)N * L, n = (cl_ulong)cg_tensor_numel(x);
    size_t local = BN_WG, global = (size_t)C * BN_WG;
    int64_t cs = C;
    cl_kernel k;
    int status;

    if (!(dg = cg__dense(g)) ||
        !(sg = cg__tensor_empty(g->ctx, CG_F32, 1, &cs)) ||
        !(sgx = cg__tensor_empty(g->ctx, CG_F32, 1, &cs))) {
        status = cg__last_status();
        goto done;
    }
    mg = cg__tensor_mem(dg);
    msg = cg__tensor_mem(sg);
    msgx = cg__tensor_mem(sgx);
    status = cg__kernel_dt(g->ctx, CG__K_BATCH_NORM_SUMS, x->dtype, &k);
    if (status == CG_OK)
        status = cg__args(k, CG__ARG(mx), CG__ARG(mg), CG__ARG(N),
                          CG__ARG(C), CG__ARG(L), CG__ARG(mm), CG__ARG(mi),
                          CG__ARG(msg), CG__ARG(msgx));
    if (status == CG_OK && C > 0)
        status = cg__launch(g->ctx, k, 1, &global, &local, NULL);
    if (status == CG_OK && node->needs[0]) {
        if (!(gin[0] = cg__tensor_empty(g->ctx, x->dtype, x->ndim, x->shape)))
            status = cg__last_status();
        if (status == CG_OK)
            status = cg__kernel_dt(g->ctx, CG__K_BATCH_NORM_GX, x->dtype, &k);
        if (status == CG_OK) {
            mgx = cg__tensor_mem(gin[0]);
            status = cg__args(k, CG__ARG(mx), CG__ARG(mw), CG__ARG(mg),
                              CG__ARG(C), CG__ARG(L), CG__ARG(flags),
                              CG__ARG(M), CG__ARG(mm), CG__ARG(mi),
                              CG__ARG(msg), CG__ARG(msgx), CG__ARG(n),
                              CG__ARG(mgx));
        }
        if (status == CG_OK && n > 0)
            status = cg__launch1d(g->ctx, k, (size_t)n, CG__WG);
    }
    if (status == CG_OK && node->needs[1])
        status = take_sum(&sgx, x->dtype, &gin[1]);
    if (status == CG_OK && node->needs[2])
        status = take_sum(&sg, x->dtype, &gin[2]);
done:
    cg_tensor_free(dg);
    cg_tensor_free(sg);
    cg_tensor_free(sgx);
    return status;
}

cg_tensor *
cg_batch_norm(cg_tensor *x, cg_tensor *running_mean, cg_tensor *running_var,
              cg_tensor *weight, cg_tensor *bias, int training,
              float momentum, float eps)
{
    cg_tensor *ac[3];
    cg_tensor *in[3] = { x, weight, bias }, *d[3] = { NULL, NULL, NULL };
    cg_tensor *y = NULL, *mean = NULL, *invstd = NULL, *uvar = NULL;
    int64_t N = 0, C = 0, L = 1;
    cl_mem mx, mw, mb, mrm, mrv, mm, mi, mu, my;
    cl_uint uN, uC, uL;
    cl_int flags;
    cl_ulong n;
    size_t local = BN_WG, global;
    cg__node *node;
    cl_kernel k;
    int status = CG_OK, j;

    CG__AUTOCAST_RETURN(CG__AC_F32, ac,
                        cg_batch_norm(ac[0], running_mean, running_var,
                                      ac[1], ac[2], training, momentum, eps),
                        x, weight, bias);

    cg__error_clear();
    if (bn_check(x, running_mean, running_var, weight, bias, training,
                 momentum, eps, &N, &C, &L))
        return NULL;
    flags = (weight ? BN_WEIGHT : 0) | (bias ? BN_BIAS : 0) |
            (training ? BN_TRAIN : 0) |
            (training && running_mean ? BN_UPDATE : 0);
    for (j = 0; j < 3 && status == CG_OK; j++)
        if (in[j] && !(d[j] = cg__dense(in[j])))
            status = cg__last_status();
    if (status == CG_OK &&
        (!(y = cg__tensor_empty(x->ctx, x->dtype, x->ndim, x->shape)) ||
         !(mean = cg__tensor_empty(x->ctx, CG_F32, 1, &C)) ||
         !(invstd = cg__tensor_empty(x->ctx, CG_F32, 1, &C)) ||
         !(uvar = cg__tensor_empty(x->ctx, CG_F32, 1, &C))))
        status = cg__last_status();
    if (status)
        goto done;
    mx = cg__tensor_mem(d[0]);
    mw = d[1] ? cg__tensor_mem(d[1]) : mx;
    mb = d[2] ? cg__tensor_mem(d[2]) : mx;
    mm = cg__tensor_mem(mean);
    mi = cg__tensor_mem(invstd);
    mu = cg__tensor_mem(uvar);
    mrm = running_mean ? cg__tensor_mem(running_mean) : mm;
    mrv = running_var ? cg__tensor_mem(running_var) : mi;
    my = cg__tensor_mem(y);
    uN = (cl_uint)N;
    uC = (cl_uint)C;
    uL = (cl_uint)L;
    n = (cl_ulong)cg_tensor_numel(x);
    global = (size_t)C * BN_WG;
    status = cg__kernel_dt(x->ctx, CG__K_BATCH_NORM_STATS, x->dtype, &k);
    if (status == CG_OK)
        status = cg__args(k, CG__ARG(mx), CG__ARG(uN), CG__ARG(uC),
                          CG__ARG(uL), CG__ARG(flags), CG__ARG(eps),
                          CG__ARG(mrm), CG__ARG(mrv), CG__ARG(mm),
                          CG__ARG(mi), CG__ARG(mu));
    if (status == CG_OK && C > 0)
        status = cg__launch(x->ctx, k, 1, &global, &local, NULL);
    if (status == CG_OK && (flags & BN_UPDATE))
        status = cg__kernel(x->ctx, CG__K_BATCH_NORM_RUNNING, &k);
    if (status == CG_OK && (flags & BN_UPDATE))
        status = cg__args(k, CG__ARG(mm), CG__ARG(mu), CG__ARG(uC),
                          CG__ARG(momentum), CG__ARG(mrm), CG__ARG(mrv));
    if (status == CG_OK && (flags & BN_UPDATE) && C > 0)
        status = cg__launch1d(x->ctx, k, (size_t)C, CG__WG);
    if (status == CG_OK)
        status = cg__kernel_dt(x->ctx, CG__K_BATCH_NORM_F, x->dtype, &k);
    if (status == CG_OK)
        status = cg__args(k, CG__ARG(mx), CG__ARG(mw), CG__ARG(mb),
                          CG__ARG(uC), CG__ARG(uL), CG__ARG(flags),
                          CG__ARG(mm), CG__ARG(mi), CG__ARG(n), CG__ARG(my));
    if (status == CG_OK && n > 0)
        status = cg__launch1d(x->ctx, k, (size_t)n, CG__WG);
    if (status == CG_OK) {
        node = cg__record(y, "batch_norm", bn_backward, 3, in, &status);
        if (node) {
            node->i[0] = N;
            node->i[1] = C;
            node->i[2] = L;
            node->i[3] = flags;
            status = cg__node_save(node, 0, d[0]);
            if (status == CG_OK && d[1])
                status = cg__node_save(node, 1, d[1]);
            if (status == CG_OK)
                status = cg__node_save(node, 2, mean);
            if (status == CG_OK)
                status = cg__node_save(node, 3, invstd);
        }
    }
done:
    for (j = 0; j < 3; j++)
        cg_tensor_free(d[j]);
    cg_tensor_free(mean);
    cg_tensor_free(invstd);
    cg_tensor_free(uvar);
    if (status) {
        cg_tensor_free(y);
        return NULL;
    }
    return y;
}
