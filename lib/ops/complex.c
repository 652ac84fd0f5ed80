/* SPDX-License-Identifier: MIT */
/*
 * lib/ops/complex.c - helpers for complex tensors (float32, last
 * dimension 2: torch.view_as_real's layout): product, conjugate, modulus
 * and argument, differentiable with PyTorch's gradients.
 *
 * The product and the conjugate are made of recorded real ops (views of
 * the real and imaginary parts, mul, sub, add, concat), so they broadcast
 * as cg_mul does and their gradients are those ops'; abs and angle have
 * kernels of their own (kernels/fft.cl), which give PyTorch's gradient of
 * 0 at z = 0 where the formula divides by |z|.
 */
#include "config.h"

#include <string.h>

#include "ops/internal.h"

/* CG_ESHAPE unless t is a float32 tensor with a last dimension of 2. */
static int
check_complex(const char *op, const char *name, const cg_tensor *t)
{
    char buf[96];

    if (cg__check_tensor(t, name, 0))
        return cg__last_status();
    if (t->ndim < 1 || t->shape[t->ndim - 1] != 2)
        return cg__error(CG_ESHAPE, "%s: %s of shape %s is not complex: its "
                         "last dimension must be 2 (real, imaginary)", op,
                         name, cg__shape_str(t->ndim, t->shape, buf,
                                             sizeof buf));
    return CG_OK;
}

cg_tensor *
cg_complex_mul(cg_tensor *a, cg_tensor *b)
{
    cg_tensor *ar = NULL, *ai = NULL, *br = NULL, *bi = NULL;
    cg_tensor *p[4] = { NULL, NULL, NULL, NULL }, *parts[2] = { NULL, NULL };
    cg_tensor *y = NULL;
    int ndim, k;
    int64_t shape[CG_MAX_DIMS];
    const cg_tensor *ab[2] = { a, b };

    cg__error_clear();
    if (check_complex("complex_mul", "a", a) ||
        check_complex("complex_mul", "b", b) ||
        cg__same_context(2, ab) ||
        cg__broadcast_shape(a, b, &ndim, shape))
        return NULL;
    ar = cg_narrow(a, -1, 0, 1);
    ai = cg_narrow(a, -1, 1, 1);
    br = cg_narrow(b, -1, 0, 1);
    bi = cg_narrow(b, -1, 1, 1);
    if (ar && ai && br && bi) {
        p[0] = cg_mul(ar, br);
        p[1] = cg_mul(ai, bi);
        p[2] = cg_mul(ar, bi);
        p[3] = cg_mul(ai, br);
    }
    if (p[0] && p[1] && p[2] && p[3]) {
        parts[0] = cg_sub(p[0], p[1]);
        parts[1] = cg_add(p[2], p[3]);
    }
    if (parts[0] && parts[1])
        y = cg_concat(parts, 2, -1);
    for (k = 0; k < 4; k++)
        cg_tensor_free(p[k]);
    cg_tensor_free(parts[0]);
    cg_tensor_free(parts[1]);
    cg_tensor_free(ar);
    cg_tensor_free(ai);
    cg_tensor_free(br);
    cg_tensor_free(bi);
    return y;
}

cg_tensor *
cg_complex_conj(cg_tensor *x)
{
    static const float sign[2] = { 1.0f, -1.0f };
    const int64_t two = 2;
    cg_tensor *s, *y;

    cg__error_clear();
    if (check_complex("complex_conj", "input", x))
        return NULL;
    s = cg_tensor_from_host(x->ctx, CG_F32, 1, &two, sign);
    y = s ? cg_mul(x, s) : NULL;
    cg_tensor_free(s);
    return y;
}

/* abs and angle: i[0] 0 abs, 1 angle; the input saved. */
static int
polar_backward(cg__node *node, cg_tensor *g, cg_tensor **gin)
{
    cg_tensor *x = node->saved[0], *gx;
    cl_mem mx = cg__tensor_mem(x), mg = cg__tensor_mem(g), mgx;
    cl_uint n = (cl_uint)(cg_tensor_numel(x) / 2);
    cl_kernel k;
    int status;

    gx = cg__tensor_empty(x->ctx, CG_F32, x->ndim, x->shape);
    if (!gx)
        return cg__last_status();
    mgx = cg__tensor_mem(gx);
    status = cg__kernel(x->ctx, node->i[0] ? CG__K_COMPLEX_ANGLE_B
                                           : CG__K_COMPLEX_ABS_B, &k);
    if (status == CG_OK)
        status = cg__args(k, CG__ARG(mx), CG__ARG(mg), CG__ARG(mgx),
                          CG__ARG(n));
    if (status == CG_OK && n > 0)
        status = cg__launch1d(x->ctx, k, n, CG__WG);
    if (status) {
        cg_tensor_free(gx);
        return status;
    }
    gin[0] = gx;
    return CG_OK;
}

static cg_tensor *
polar_op(const char *op, int angle, cg_tensor *x)
{
    cg_tensor *xd, *y = NULL;
    cg__node *node;
    cl_mem mx, my;
    cl_uint n;
    cl_kernel k;
    int status;

    cg__error_clear();
    if (check_complex(op, "input", x))
        return NULL;
    /* The kernels read x densely from element 0. */
    xd = cg__dense(x);
    if (!xd)
        return NULL;
    n = (cl_uint)(cg_tensor_numel(xd) / 2);
    y = cg__tensor_empty(x->ctx, CG_F32, x->ndim - 1, x->shape);
    status = y ? cg__kernel(x->ctx, angle ? CG__K_COMPLEX_ANGLE_F
                                          : CG__K_COMPLEX_ABS_F, &k)
               : cg__last_status();
    if (status == CG_OK) {
        mx = cg__tensor_mem(xd);
        my = cg__tensor_mem(y);
        status = cg__args(k, CG__ARG(mx), CG__ARG(my), CG__ARG(n));
    }
    if (status == CG_OK && n > 0)
        status = cg__launch1d(x->ctx, k, n, CG__WG);
    if (status == CG_OK) {
        node = cg__record(y, op, polar_backward, 1, &x, &status);
        if (node) {
            node->i[0] = angle;
            status = cg__node_save(node, 0, xd);
        }
    }
    cg_tensor_free(xd);
    if (status) {
        cg_tensor_free(y);
        return NULL;
    }
    return y;
}

cg_tensor *
cg_complex_abs(cg_tensor *x)
{
    return polar_op("complex_abs", 0, x);
}

cg_tensor *
cg_complex_angle(cg_tensor *x)
{
    return polar_op("complex_angle", 1, x);
}
