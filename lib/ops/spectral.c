/* SPDX-License-Identifier: MIT */
/*
 * lib/ops/spectral.c - fft, ifft, rfft and irfft along one axis, with
 * torch.fft's n (crop or zero-pad) and norm, and their gradients as
 * PyTorch defines them.  Complex tensors are float32 tensors whose last
 * dimension is 2 (real, imaginary): torch.view_as_real's layout.
 *
 * Each transform brings its axis next to the (real, imaginary) pair with
 * a contiguous copy when it is not there already (clFFT's batched 1-D
 * plans take one distance between rows, so other axes would need one
 * launch per outer index), runs lib/ops/fft.c's batched plan on the rows,
 * and moves the axis back; except that a complex transform on the path
 * radix runs along the axis where it is (cg__fft_columns).  No kernels of
 * their own: copies and fills.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "ops/internal.h"

/* A view of t with dimensions a and b swapped (a new header). */
static cg_tensor *
swap_view(cg_tensor *t, int a, int b)
{
    int64_t shape[CG_MAX_DIMS], strides[CG_MAX_DIMS], s;

    memcpy(shape, t->shape, sizeof shape);
    memcpy(strides, t->strides, sizeof strides);
    s = shape[a], shape[a] = shape[b], shape[b] = s;
    s = strides[a], strides[a] = strides[b], strides[b] = s;
    return cg__tensor_view(t, t->ndim, shape, strides, t->offset);
}

/* t with dimension ax cropped (its first len) or zero-padded (at the end)
 * to len: a contiguous tensor from offset 0, new, or a new reference to t
 * when t is that already with that length. */
static cg_tensor *
resize_axis(cg_tensor *t, int ax, int64_t len)
{
    int64_t shape[CG_MAX_DIMS];
    cg_tensor *v, *out;
    int status;

    memcpy(shape, t->shape, sizeof shape);
    shape[ax] = len;
    if (t->shape[ax] >= len) {
        v = cg__tensor_view(t, t->ndim, shape, t->strides, t->offset);
        out = v ? cg__dense(v) : NULL;
        cg_tensor_free(v);
        return out;
    }
    out = cg__tensor_empty(t->ctx, CG_F32, t->ndim, shape);
    if (!out)
        return NULL;
    v = cg__tensor_view(out, t->ndim, t->shape, out->strides, 0);
    status = v ? cg__fill(out, 0.0f) : cg__last_status();
    if (status == CG_OK && cg_tensor_numel(t) > 0)
        status = cg__copy_into(v, t);
    cg_tensor_free(v);
    if (status) {
        cg_tensor_free(out);
        return NULL;
    }
    return out;
}

/* Zeroes the imaginary parts of bin 0 and, for even n, of bin n/2 of each
 * row of rows (contiguous [..., n/2 + 1, 2]): the Hermitian input of a
 * complex-to-real transform ignores them, as pocketfft (torch.fft.irfft)
 * does. */
static int
zero_edge_imag(cg_tensor *rows, int64_t n)
{
    int64_t half = n / 2 + 1, nrows = cg_tensor_numel(rows) / (2 * half);
    int64_t stride = 2 * half, zstride = 0;
    cg_tensor *z, *zv = NULL, *dst;
    int64_t one = 1;
    int status, k;

    z = cg__tensor_empty(rows->ctx, CG_F32, 1, &one);
    if (!z)
        return cg__last_status();
    status = cg__fill(z, 0.0f);
    if (status == CG_OK && !(zv = cg__tensor_view(z, 1, &nrows, &zstride, 0)))
        status = cg__last_status();
    for (k = 0; k < 1 + (n % 2 == 0 && half > 1) && status == CG_OK; k++) {
        dst = cg__tensor_view(rows, 1, &nrows, &stride,
                              k == 0 ? 1 : 2 * (half - 1) + 1);
        status = dst ? cg__copy_into(dst, zv) : cg__last_status();
        cg_tensor_free(dst);
    }
    cg_tensor_free(zv);
    cg_tensor_free(z);
    return status;
}

/* A complex transform along axis ax (not the last) of r (contiguous,
 * from offset 0) as the columns of [outer][n][inner] matrices, into a
 * new tensor of r's shape; takes r. */
static cg_tensor *
columns(cg_tensor *r, cg__fft_kind kind, int ax, int64_t n, float scale)
{
    size_t outer = 1, inner = 1;
    cg_tensor *y;
    int i, status;

    for (i = 0; i < ax; i++)
        outer *= (size_t)r->shape[i];
    for (i = ax + 1; i < r->ndim - 1; i++)
        inner *= (size_t)r->shape[i];
    y = cg__tensor_empty(r->ctx, CG_F32, r->ndim, r->shape);
    status = y ? CG_OK : cg__last_status();
    if (status == CG_OK && outer * inner > 0)
        status = cg__fft_columns(r->ctx, kind, (size_t)n, outer, inner,
                                 scale, cg__tensor_mem(r), cg__tensor_mem(y));
    cg_tensor_free(r);
    if (status) {
        cg_tensor_free(y);
        return NULL;
    }
    return y;
}

/* Runs transform kind of length n, times scale, along axis ax of x (of
 * x's dims; x complex but for R2C), x cropped or zero-padded to the
 * transform's input length there first.  A new contiguous tensor: x's
 * shape with the output length along ax, and the pair dropped (C2R) or
 * added (R2C).  No recording. */
static cg_tensor *
transform(cg_tensor *x, cg__fft_kind kind, int ax, int64_t n, float scale)
{
    int cin = kind != CG__FFT_R2C, cout = kind != CG__FFT_C2R;
    int lax = x->ndim - 1 - cin, nd = x->ndim - cin, ndo, status;
    int64_t half = n / 2 + 1, inlen = kind == CG__FFT_C2R ? half : n;
    int64_t shape[CG_MAX_DIMS];
    cg_tensor *r, *s, *rows, *y, *out = NULL;
    cg__fft_path path = CG__FFT_CLFFT;
    size_t batch;
    /* clFFT's C2R wants the imaginary parts of bins 0 and n/2 zero; the
     * other paths ignore them. */
    int zero_edges;

    if (kind == CG__FFT_C2R && n > 1 &&
        cg__fft_choose(x->ctx, kind, (size_t)n, &path) != CG_OK)
        return NULL;
    zero_edges = kind == CG__FFT_C2R && path == CG__FFT_CLFFT;
    r = resize_axis(x, ax, inlen);
    if (!r)
        return NULL;
    if (ax != lax && cg__fft_columns_ok(x->ctx, kind, (size_t)n))
        return columns(r, kind, ax, n, scale);
    if (ax != lax) {
        s = swap_view(r, ax, lax);
        rows = s ? cg__copy_contiguous(s) : NULL;
        cg_tensor_free(s);
    } else if (zero_edges && r->storage == x->storage) {
        /* zero_edge_imag writes its input. */
        rows = cg__copy_contiguous(r);
    } else {
        rows = cg_tensor_ref(r);
    }
    cg_tensor_free(r);
    if (!rows)
        return NULL;
    memcpy(shape, rows->shape, sizeof shape);
    shape[nd - 1] = kind == CG__FFT_R2C ? half : n;
    ndo = nd;
    if (cout)
        shape[ndo++] = 2;
    y = cg__tensor_empty(x->ctx, CG_F32, ndo, shape);
    batch = (size_t)(cg_tensor_numel(rows) / (inlen * (cin ? 2 : 1)));
    status = y ? CG_OK : cg__last_status();
    if (status == CG_OK && batch > 0 && zero_edges)
        status = zero_edge_imag(rows, n);
    if (status == CG_OK && batch > 0)
        status = cg__fft_rows(x->ctx, kind, (size_t)n, batch, scale,
                              cg__tensor_mem(rows), cg__tensor_mem(y));
    cg_tensor_free(rows);
    if (status == CG_OK && ax != nd - 1) {
        s = swap_view(y, ax, nd - 1);
        out = s ? cg__copy_contiguous(s) : NULL;
        cg_tensor_free(s);
        cg_tensor_free(y);
    } else if (status == CG_OK) {
        out = y;
    } else {
        cg_tensor_free(y);
    }
    return out;
}

static cg_tensor *length_one(cg__fft_kind kind, cg_tensor *x, int ax);

/* transform, or length_one for n = 1 (which clFFT need not run). */
static cg_tensor *
run(cg_tensor *x, cg__fft_kind kind, int ax, int64_t n, float scale)
{
    return n == 1 ? length_one(kind, x, ax) : transform(x, kind, ax, n, scale);
}

static const char *const op_names[] = { "fft", "ifft", "rfft", "irfft" };

/* The factor norm gives the transform of kind and length n. */
static float
norm_scale(cg__fft_kind kind, cg_fft_norm norm, int64_t n)
{
    int inverse = kind == CG__FFT_C2C_INV || kind == CG__FFT_C2R;

    if (norm == CG_FFT_ORTHO)
        return (float)(1.0 / sqrt((double)n));
    if ((norm == CG_FFT_BACKWARD) == inverse)
        return (float)(1.0 / (double)n);
    return 1.0f;
}

/* The gradient of a transform node: i[0] the kind, i[1] the axis, i[2]
 * the length n, i[3] the input's length along the axis; f[0] the
 * scale.  With PyTorch's definitions: a complex transform's gradient is
 * the opposite transform with the same scale; rfft's is the real part of
 * the inverse complex transform of the gradient zero-padded to n bins;
 * irfft's is rfft of the gradient with the bins that stand for two (1 to
 * n - n/2 - 1) doubled.  Then cropped or zero-padded back to the input's
 * length. */
static cg_tensor *
adjoint(const cg__node *node, cg_tensor *g)
{
    cg__fft_kind kind = (cg__fft_kind)node->i[0];
    int ax = (int)node->i[1], nd, k;
    int64_t n = node->i[2], len = node->i[3], half = n / 2 + 1;
    int64_t wshape[CG_MAX_DIMS];
    float scale = (float)node->f[0], *w;
    cg_tensor *t = NULL, *p, *re, *wt, *gx;

    switch (kind) {
    case CG__FFT_C2C_FWD:
    case CG__FFT_C2C_INV:
        t = run(g, kind == CG__FFT_C2C_FWD ? CG__FFT_C2C_INV
                                             : CG__FFT_C2C_FWD,
                ax, n, scale);
        break;
    case CG__FFT_R2C:
        p = resize_axis(g, ax, n);
        t = p ? run(p, CG__FFT_C2C_INV, ax, n, scale) : NULL;
        cg_tensor_free(p);
        if (!t)
            break;
        re = cg__tensor_view(t, t->ndim - 1, t->shape, t->strides, 0);
        cg_tensor_free(t);
        t = re;
        break;
    case CG__FFT_C2R:
        t = run(g, CG__FFT_R2C, ax, n, scale);
        if (!t || n - half < 1)
            break;
        nd = t->ndim - ax;
        for (k = 0; k < nd; k++)
            wshape[k] = 1;
        wshape[0] = half;
        wshape[nd - 1] = 2;
        w = cg__malloc((size_t)half * 2 * sizeof *w);
        if (!w) {
            cg_tensor_free(t);
            return NULL;
        }
        for (k = 0; k < 2 * half; k++)
            w[k] = k / 2 >= 1 && k / 2 <= n - half ? 2.0f : 1.0f;
        wt = cg_tensor_from_host(t->ctx, CG_F32, nd, wshape, w);
        free(w);
        p = wt ? cg_mul(t, wt) : NULL;
        cg_tensor_free(wt);
        cg_tensor_free(t);
        t = p;
        break;
    }
    if (!t)
        return NULL;
    gx = resize_axis(t, ax, len);
    cg_tensor_free(t);
    return gx;
}

static int
spectral_backward(cg__node *node, cg_tensor *g, cg_tensor **gin)
{
    gin[0] = adjoint(node, g);
    return gin[0] ? CG_OK : cg__last_status();
}

/* The adjoint as a recorded op ("<op>_adjoint", node parameters copied
 * from the transform's), whose gradient is the transform itself: a
 * transform is linear, so the gradient of its gradient is the transform
 * of the second-order gradient.  What a create_graph backward records
 * for a transform, and any order of derivative follows. */
static int adjoint_backward(cg__node *node, cg_tensor *h, cg_tensor **gin);

static const char *const adjoint_names[] = { "fft_adjoint", "ifft_adjoint",
                                             "rfft_adjoint",
                                             "irfft_adjoint" };

static cg_tensor *
record_pair(const cg__node *from, cg_tensor *in, int adj)
{
    cg__fft_kind kind = (cg__fft_kind)from->i[0];
    cg_tensor *y;
    cg__node *node;
    int status = CG_OK, k;

    /* The kernel-level computation, with no graph of its own. */
    cg_no_grad_enter();
    y = adj ? adjoint(from, in)
            : run(in, kind, (int)from->i[1], from->i[2], (float)from->f[0]);
    cg_no_grad_leave();
    if (!y)
        return NULL;
    node = cg__record(y, adj ? adjoint_names[kind] : op_names[kind],
                      adj ? adjoint_backward : spectral_backward, 1, &in,
                      &status);
    if (node) {
        for (k = 0; k < 5; k++)
            node->i[k] = from->i[k];
        node->f[0] = from->f[0];
    }
    if (status) {
        cg_tensor_free(y);
        return NULL;
    }
    return y;
}

static int
adjoint_backward(cg__node *node, cg_tensor *h, cg_tensor **gin)
{
    gin[0] = run(h, (cg__fft_kind)node->i[0], (int)node->i[1], node->i[2],
                 (float)node->f[0]);
    return gin[0] ? CG_OK : cg__last_status();
}

int
cg__spectral_graph(cg__node *n, cg_tensor *g, cg_tensor **gin)
{
    gin[0] = record_pair(n, g, 1);
    return gin[0] ? CG_OK : cg__last_status();
}

int
cg__spectral_adjoint_graph(cg__node *n, cg_tensor *h, cg_tensor **gin)
{
    gin[0] = record_pair(n, h, 0);
    return gin[0] ? CG_OK : cg__last_status();
}

int
cg__spectral_jvp(cg__node *n, cg_tensor *y, cg_tensor *const *t,
                 cg_tensor **out)
{
    cg_tensor *td = cg__dense(t[0]);

    (void)y;
    if (!td)
        return cg__last_status();
    *out = strstr(n->op, "_adjoint") ? adjoint(n, td)
           : run(td, (cg__fft_kind)n->i[0], (int)n->i[1], n->i[2],
                 (float)n->f[0]);
    cg_tensor_free(td);
    return *out ? CG_OK : cg__last_status();
}

/* Checks the arguments of op (kind) on x; sets the axis (of x's dims), the
 * transform length and the input's length along the axis. */
static int
check_args(cg__fft_kind kind, cg_tensor *x, int64_t n, int dim,
           cg_fft_norm norm, int *ax, int64_t *len, int64_t *nout)
{
    const char *op = op_names[kind];
    int cin = kind != CG__FFT_R2C, nd;
    cg__fft_path path;
    char buf[96];

    if (cg__check_tensor(x, "input", 0))
        return cg__last_status();
    if (cin && (x->ndim < 2 || x->shape[x->ndim - 1] != 2))
        return cg__error(CG_ESHAPE, "%s: input of shape %s is not complex: "
                         "complex tensors have at least 2 dimensions, the "
                         "last of size 2 (real, imaginary)", op,
                         cg__shape_str(x->ndim, x->shape, buf, sizeof buf));
    nd = x->ndim - cin;
    *ax = cg__dim(dim, nd);
    if (nd < 1 || *ax < 0)
        return cg__error(CG_EINVAL, "%s: dim %d is out of range for a "
                         "%d-D %s tensor", op, dim, nd,
                         cin ? "complex" : "real");
    *len = x->shape[*ax];
    if (n == CG_FFT_DEFAULT_N)
        n = kind == CG__FFT_C2R ? 2 * (*len - 1) : *len;
    if (n < 1)
        return cg__error(CG_EINVAL, "%s: n = %lld points (input of shape "
                         "%s along dim %d): a transform needs at least 1",
                         op, (long long)n,
                         cg__shape_str(x->ndim, x->shape, buf, sizeof buf),
                         dim);
    if (norm != CG_FFT_BACKWARD && norm != CG_FFT_ORTHO &&
        norm != CG_FFT_FORWARD)
        return cg__error(CG_EINVAL, "%s: norm %d is not CG_FFT_BACKWARD, "
                         "CG_FFT_ORTHO or CG_FFT_FORWARD", op, (int)norm);
    /* Bluestein's algorithm indexes rows of about 2n complex values with
     * 32-bit integers. */
    if (n > (1 << 29))
        return cg__error(CG_EUNSUPPORTED, "%s: length n = %lld is longer "
                         "than the 2^29 points clgrad transforms", op,
                         (long long)n);
    /* A bad CLGRAD_FFT_PATH fails here, before anything is launched. */
    if (cg__fft_choose(x->ctx, kind, (size_t)n, &path))
        return cg__last_status();
    *nout = n;
    return CG_OK;
}

/* Length 1: every norm's scale is 1, so the transform is the input itself
 * (rfft: with a zero imaginary part; irfft: the real part). */
static cg_tensor *
length_one(cg__fft_kind kind, cg_tensor *x, int ax)
{
    int64_t shape[CG_MAX_DIMS];
    cg_tensor *r, *v, *y;
    int status;

    r = resize_axis(x, ax, 1);
    if (!r || kind == CG__FFT_C2C_FWD || kind == CG__FFT_C2C_INV) {
        /* A result of its own, never x's storage. */
        if (r && r->storage == x->storage) {
            y = cg__copy_contiguous(r);
            cg_tensor_free(r);
            return y;
        }
        return r;
    }
    if (kind == CG__FFT_C2R) {
        v = cg__tensor_view(r, r->ndim - 1, r->shape, r->strides, 0);
        y = v ? cg__copy_contiguous(v) : NULL;
    } else {
        memcpy(shape, r->shape, sizeof shape);
        shape[r->ndim] = 2;
        y = cg__tensor_empty(x->ctx, CG_F32, r->ndim + 1, shape);
        v = y ? cg__tensor_view(y, r->ndim, r->shape, y->strides, 0) : NULL;
        status = v ? cg__fill(y, 0.0f) : cg__last_status();
        if (status == CG_OK && cg_tensor_numel(r) > 0)
            status = cg__copy_into(v, r);
        if (status) {
            cg_tensor_free(y);
            y = NULL;
        }
    }
    cg_tensor_free(v);
    cg_tensor_free(r);
    return y;
}

static cg_tensor *
spectral_op(cg__fft_kind kind, cg_tensor *x, int64_t n, int dim,
            cg_fft_norm norm)
{
    cg_tensor *y;
    cg__node *node;
    int64_t len = 0;
    float scale;
    int ax = 0, status = CG_OK;

    cg__error_clear();
    if (check_args(kind, x, n, dim, norm, &ax, &len, &n))
        return NULL;
    scale = norm_scale(kind, norm, n);
    y = run(x, kind, ax, n, scale);
    if (!y)
        return NULL;
    node = cg__record(y, op_names[kind], spectral_backward, 1, &x, &status);
    if (node) {
        node->i[0] = kind;
        node->i[1] = ax;
        node->i[2] = n;
        node->i[3] = len;
        node->i[4] = norm;
        node->f[0] = scale;
    }
    if (status) {
        cg_tensor_free(y);
        return NULL;
    }
    return y;
}

cg_tensor *
cg_fft(cg_tensor *x, int64_t n, int dim, cg_fft_norm norm)
{
    return spectral_op(CG__FFT_C2C_FWD, x, n, dim, norm);
}

cg_tensor *
cg_ifft(cg_tensor *x, int64_t n, int dim, cg_fft_norm norm)
{
    return spectral_op(CG__FFT_C2C_INV, x, n, dim, norm);
}

cg_tensor *
cg_rfft(cg_tensor *x, int64_t n, int dim, cg_fft_norm norm)
{
    return spectral_op(CG__FFT_R2C, x, n, dim, norm);
}

cg_tensor *
cg_irfft(cg_tensor *x, int64_t n, int dim, cg_fft_norm norm)
{
    return spectral_op(CG__FFT_C2R, x, n, dim, norm);
}

/* The 2-D transforms: two 1-D transforms, each recorded (so the gradient
 * is theirs), the norm's factor split between them (its product over the
 * two lengths is torch.fft's over the plane).  Everything is checked
 * first, so that bad input launches nothing. */
static cg_tensor *
two_d(const char *op, cg__fft_kind kind, cg_tensor *x, const int64_t *s,
      cg_fft_norm norm)
{
    int64_t n0 = s ? s[0] : CG_FFT_DEFAULT_N, n1 = s ? s[1] : CG_FFT_DEFAULT_N;
    int cin = kind != CG__FFT_R2C, ax;
    int64_t len, n;
    cg_tensor *t, *y;
    char buf[96];

    cg__error_clear();
    if (cg__check_tensor(x, "input", 0))
        return NULL;
    if (x->ndim - cin < 2 || (cin && x->shape[x->ndim - 1] != 2)) {
        cg__error(CG_ESHAPE, "%s: input of shape %s is not a %s tensor of "
                  "at least 2 dimensions%s", op,
                  cg__shape_str(x->ndim, x->shape, buf, sizeof buf),
                  cin ? "complex" : "real",
                  cin ? " (and the last dimension of size 2: real, "
                        "imaginary)" : "");
        return NULL;
    }
    /* The first transform's checks on x, the second's on the shape it
     * will see (its length along -2 is unchanged). */
    if (check_args(kind == CG__FFT_C2R ? CG__FFT_C2C_INV : kind, x,
                   kind == CG__FFT_C2R ? n0 : n1,
                   kind == CG__FFT_C2R ? -2 : -1, norm, &ax, &len, &n) ||
        check_args(kind, x,
                   kind == CG__FFT_C2R ? n1 : n0,
                   kind == CG__FFT_C2R ? -1 : -2, norm, &ax, &len, &n)) {
        cg__error_append(" (in %s)", op);
        return NULL;
    }
    switch (kind) {
    case CG__FFT_C2C_FWD:
        t = cg_fft(x, n1, -1, norm);
        y = t ? cg_fft(t, n0, -2, norm) : NULL;
        break;
    case CG__FFT_C2C_INV:
        t = cg_ifft(x, n1, -1, norm);
        y = t ? cg_ifft(t, n0, -2, norm) : NULL;
        break;
    case CG__FFT_R2C:
        t = cg_rfft(x, n1, -1, norm);
        y = t ? cg_fft(t, n0, -2, norm) : NULL;
        break;
    default:
        t = cg_ifft(x, n0, -2, norm);
        y = t ? cg_irfft(t, n1, -1, norm) : NULL;
        break;
    }
    cg_tensor_free(t);
    return y;
}

cg_tensor *
cg_fft2(cg_tensor *x, const int64_t *s, cg_fft_norm norm)
{
    return two_d("fft2", CG__FFT_C2C_FWD, x, s, norm);
}

cg_tensor *
cg_ifft2(cg_tensor *x, const int64_t *s, cg_fft_norm norm)
{
    return two_d("ifft2", CG__FFT_C2C_INV, x, s, norm);
}

cg_tensor *
cg_rfft2(cg_tensor *x, const int64_t *s, cg_fft_norm norm)
{
    return two_d("rfft2", CG__FFT_R2C, x, s, norm);
}

cg_tensor *
cg_irfft2(cg_tensor *x, const int64_t *s, cg_fft_norm norm)
{
    return two_d("irfft2", CG__FFT_C2R, x, s, norm);
}
