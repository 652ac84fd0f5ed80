/* SPDX-License-Identifier: MIT */
/*
 * tests/fuzz/fuzz_api.c - the tensor API.  The input is a program: each
 * step's first byte picks a call (creations, views, reductions, softmax,
 * matmul, elementwise ops, joins, index ops, backward) and the following
 * bytes its arguments - slots of up to SLOTS live tensors, dimensions and
 * int64 sizes drawn mostly from small numbers and from a table of extreme
 * values (INT64_MAX, INT64_MIN, 2^63 / 3 and the like, which overflow
 * products and sums).  Every call must either fail, returning NULL or a
 * negative status with cg_last_error() set, or succeed with a consistent
 * tensor: ndim in 0..CG_MAX_DIMS, a shape whose product does not overflow
 * and is cg_tensor_numel, every element's address inside its storage, and
 * a read-back that works and agrees with the storage read directly
 * through the view's strides and offset.  Tensors of more than KEEP_MAX
 * elements are checked and dropped, so that kernels stay cheap.  Created
 * tensors are float32, int32, float16 or bfloat16, and cg_to_dtype
 * converts between them, so every op meets 16-bit operands (which all but
 * views, joins and casts must refuse) and element sizes of 2 and 4.
 */
#include "config.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "tensor/internal.h"

#define SLOTS 8
#define KEEP_MAX 512          /* elements of a tensor kept in a slot */
#define READ_MAX (1 << 18)    /* elements read back to check */
#define STEPS_MAX 32

static cg_tensor *slot[SLOTS];

static const int64_t extreme[] = {
    INT64_MAX, INT64_MAX - 1, INT64_MIN, INT64_MIN + 1, INT64_MAX - 807,
    INT64_MAX / 2 + 1, INT64_MAX / 3 + 1, 6148914691236517206,
    9223372036854775805, (int64_t)1 << 31, ((int64_t)1 << 31) - 1,
    (int64_t)1 << 32, ((int64_t)1 << 32) + 1, (int64_t)1 << 62,
    -((int64_t)1 << 62), INT32_MIN, (int64_t)1 << 21, 3037000500,
    -3, -4, 6, 7, 8, 9, 16
};
#define NEXTREME (int)(sizeof extreme / sizeof extreme[0])

/* A size: mostly 1..4, else 0, -1, -2, an extreme value or raw bits. */
static int64_t
get_size(fuzz_input *in)
{
    unsigned b = fuzz_u8(in);

    if (b < 160)
        return 1 + b % 4;
    if (b < 176)
        return (int64_t)(b % 3) - 2;
    if (b < 176 + NEXTREME)
        return extreme[b - 176];
    return (int64_t)fuzz_u64(in);
}

/* A dimension index: mostly -4..5, sometimes far out. */
static int
get_dim(fuzz_input *in)
{
    unsigned b = fuzz_u8(in);

    if (b < 240)
        return (int)(b % 10) - 4;
    return b & 1 ? INT_MAX : INT_MIN;
}

static int
get_shape(fuzz_input *in, int64_t *shape)
{
    unsigned b = fuzz_u8(in);
    int ndim = b < 250 ? (int)(b % 5) : (int)(b % 11) - 1, i;

    for (i = 0; i < ndim && i < CG_MAX_DIMS + 2; i++)
        shape[i] = get_size(in);
    return ndim;
}

/* The exact product of a shape; -1 if a dimension is < 0 or it overflows
 * int64. */
static int64_t
exact_numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    int i;

    for (i = 0; i < ndim; i++)
        if (shape[i] < 0 || __builtin_mul_overflow(n, shape[i], &n))
            return -1;
    return n;
}

/* Equal bits, or both NaN (a copy may quiet a signalling NaN). */
static int
same_bits(uint32_t a, uint32_t b)
{
    float x, y;

    memcpy(&x, &a, 4);
    memcpy(&y, &b, 4);
    return a == b || (isnan(x) && isnan(y));
}

/* Element i of a buffer of es-byte elements, as a number. */
static uint32_t
elem(const unsigned char *p, int64_t i, size_t es)
{
    uint32_t w = 0;
    uint16_t h;

    if (es == 2) {
        memcpy(&h, p + (size_t)i * 2, 2);
        return h;
    }
    memcpy(&w, p + (size_t)i * 4, 4);
    return w;
}

/* Reads the view's elements from its storage through shape, strides and
 * offset, and compares them with cg_tensor_to_host's. */
static void
check_readback(const cg_tensor *t, int64_t numel)
{
    size_t sbytes = cg_buffer_size(t->storage->buf);
    size_t es = cg__dtype_size(t->dtype);
    unsigned char *all = malloc(sbytes ? sbytes : 4);
    unsigned char *got = malloc((size_t)numel * es + 4);
    int64_t i, idx[CG_MAX_DIMS] = { 0 };
    int d;

    FUZZ_ASSERT(all && got, "out of host memory");
    FUZZ_ASSERT(cg_tensor_to_host(t, got, (size_t)numel * es) == CG_OK,
                "read-back of a consistent tensor failed");
    FUZZ_ASSERT(cg_buffer_read(t->storage->buf, 0, all, sbytes) == CG_OK,
                "reading the storage failed");
    for (i = 0; i < numel; i++) {
        int64_t at = t->offset;
        uint32_t want, g;

        for (d = 0; d < t->ndim; d++)
            at += idx[d] * t->strides[d];
        want = elem(all, at, es);
        g = elem(got, i, es);
        /* 16-bit copies are integer copies: exact. */
        FUZZ_ASSERT(es == 2 ? g == want : same_bits(g, want),
                    "element %lld reads 0x%08x, the storage has 0x%08x",
                    (long long)i, g, want);
        for (d = t->ndim - 1; d >= 0; d--) {
            if (++idx[d] < t->shape[d])
                break;
            idx[d] = 0;
        }
    }
    free(all);
    free(got);
}

/* The promises every tensor keeps. */
static void
check_tensor(const cg_tensor *t, const char *call)
{
    int64_t shape[CG_MAX_DIMS], numel, lo, hi, end, span;
    int ndim = cg_tensor_ndim(t), d;

    FUZZ_ASSERT(ndim >= 0 && ndim <= CG_MAX_DIMS, "%s: ndim %d", call, ndim);
    FUZZ_ASSERT(cg_tensor_shape(t, shape) == CG_OK, "%s: shape", call);
    for (d = 0; d < ndim; d++)
        FUZZ_ASSERT(shape[d] >= 0 && shape[d] == cg_tensor_dim(t, d),
                    "%s: dimension %d is %lld", call, d,
                    (long long)shape[d]);
    numel = exact_numel(ndim, shape);
    FUZZ_ASSERT(numel >= 0, "%s: the shape's product overflows", call);
    FUZZ_ASSERT(numel == cg_tensor_numel(t), "%s: numel %lld, shape "
                "product %lld", call, (long long)cg_tensor_numel(t),
                (long long)numel);
    if (numel == 0)
        return;
    /* Lowest and highest element addressed, without overflow. */
    lo = hi = t->offset;
    for (d = 0; d < ndim; d++) {
        FUZZ_ASSERT(!__builtin_mul_overflow(shape[d] - 1, t->strides[d],
                                            &span), "%s: stride %d "
                    "overflows", call, d);
        FUZZ_ASSERT(!__builtin_add_overflow(span < 0 ? lo : hi, span,
                                            span < 0 ? &lo : &hi),
                    "%s: the extent overflows", call);
    }
    FUZZ_ASSERT(lo >= 0 && !__builtin_add_overflow(hi, 1, &end) &&
                (uint64_t)end * cg__dtype_size(t->dtype) <=
                cg_buffer_size(t->storage->buf),
                "%s: elements %lld..%lld of a storage of %zu bytes", call,
                (long long)lo, (long long)hi,
                cg_buffer_size(t->storage->buf));
    if (numel <= READ_MAX)
        check_readback(t, numel);
}

/* A call's tensor result: checked, then kept in slot s or dropped. */
static void
result(cg_tensor *t, int s, const char *call)
{
    if (!t) {
        fuzz_expect_error(call);
        return;
    }
    check_tensor(t, call);
    if (cg_tensor_numel(t) > KEEP_MAX) {
        cg_tensor_free(t);
        return;
    }
    cg_tensor_free(slot[s]);
    slot[s] = t;
}

static cg_tensor *
pick(fuzz_input *in)
{
    return slot[fuzz_u8(in) % SLOTS];
}

static void
create(fuzz_input *in, int s)
{
    static float host[KEEP_MAX];
    cg_context *ctx = fuzz_context();
    int64_t shape[CG_MAX_DIMS + 2], n;
    unsigned kind = fuzz_u8(in);
    int ndim = get_shape(in, shape), valid, small, i;
    cg_dtype dt = kind & 8 ? CG_I32 : !(kind & 0x20) ? CG_F32
                  : kind & 0x40 ? CG_BF16 : CG_F16;
    cg_tensor *t;

    n = ndim <= CG_MAX_DIMS ? exact_numel(ndim, shape) : -1;
    valid = ndim >= 0 && ndim <= CG_MAX_DIMS && n >= 1;
    for (i = 0; valid && i < ndim; i++)
        valid = shape[i] >= 1;
    /* Real allocations stay small: a valid shape over KEEP_MAX elements
     * but small enough that it might be allocated is not asked for. */
    if (valid && n > KEEP_MAX && n < ((int64_t)1 << 40))
        return;
    for (i = 0; i < KEEP_MAX; i++)
        host[i] = (float)(i % 7) - 3.0f;
    cg__error_clear();
    switch (kind % 6) {
    case 0:
        t = cg_tensor_new(ctx, dt, ndim, shape);
        if (t && cg_tensor_numel(t) <= KEEP_MAX)
            cg_tensor_write(t, host, (size_t)cg_tensor_numel(t) *
                            cg__dtype_size(dt));
        break;
    case 1:
        t = cg_zeros(ctx, ndim, shape);
        break;
    case 2:
        t = cg_full(ctx, ndim, shape, (float)(kind >> 3) - 8.0f);
        break;
    case 3:
        /* host holds KEEP_MAX elements: a shape the library must reject
         * may be asked for, one it could accept must fit. */
        if (valid && n > KEEP_MAX)
            return;
        t = cg_tensor_from_host(ctx, dt, ndim, shape, host);
        break;
    case 4:
        t = cg_rand_uniform(ctx, ndim, shape, -2.0f, 2.0f);
        break;
    default:
        t = cg_arange(ctx, 0.0, (double)(shape[0] % 600),
                      kind & 8 ? 1.0 : 0.5);
        valid = 0;
        break;
    }
    small = valid && n <= KEEP_MAX;
    if (small)
        FUZZ_ASSERT(t != NULL || kind % 6 == 5, "creating a valid shape "
                    "failed");
    else if (t && kind % 6 != 5)
        FUZZ_ASSERT(0, "an invalid shape (ndim %d, product %lld) was "
                    "accepted", ndim, (long long)n);
    if (t && (kind & 0x10) && cg_tensor_dtype(t) == CG_F32)
        cg_tensor_set_requires_grad(t, 1);
    result(t, s, "create");
}

static void
view(fuzz_input *in, unsigned op, int s)
{
    cg_tensor *t = pick(in);
    int64_t shape[CG_MAX_DIMS + 2], a, b;
    int perm[CG_MAX_DIMS], ndim, i, dim;

    cg__error_clear();
    switch (op % 8) {
    case 0:
        ndim = get_shape(in, shape);
        result(cg_reshape(t, ndim, shape), s, "cg_reshape");
        break;
    case 1:
        dim = get_dim(in);
        result(cg_transpose(t, dim, get_dim(in)), s, "cg_transpose");
        break;
    case 2:
        for (i = 0; i < CG_MAX_DIMS; i++)
            perm[i] = get_dim(in);
        result(cg_permute(t, perm), s, "cg_permute");
        break;
    case 3:
        dim = get_dim(in);
        a = (int64_t)((uint64_t)get_size(in) - 1);
        b = get_size(in);
        result(cg_narrow(t, dim, a, b), s, "cg_narrow");
        break;
    case 4:
        ndim = get_shape(in, shape);
        result(cg_expand(t, ndim, shape), s, "cg_expand");
        break;
    case 5:
        result(cg_squeeze(t, get_dim(in)), s, "cg_squeeze");
        break;
    case 6:
        result(cg_unsqueeze(t, get_dim(in)), s, "cg_unsqueeze");
        break;
    default:
        if (op & 8)     /* dtypes 0..4 and one that is none */
            result(cg_to_dtype(t, (cg_dtype)(fuzz_u8(in) % 6)), s,
                   "cg_to_dtype");
        else
            result(cg_contiguous(t), s, "cg_contiguous");
        break;
    }
}

static void
reduce(fuzz_input *in, unsigned op, int s)
{
    cg_tensor *t = pick(in), *v = NULL, *ix = NULL;
    int axes[CG_MAX_DIMS + 1], naxes = fuzz_u8(in) % (CG_MAX_DIMS + 2) - 1;
    int keep = op & 8, i, dim, rc;

    for (i = 0; i < naxes && i < CG_MAX_DIMS + 1; i++)
        axes[i] = get_dim(in);
    if (naxes > CG_MAX_DIMS + 1)
        naxes = CG_MAX_DIMS + 1;
    cg__error_clear();
    switch (op % 9) {
    case 0:
        result(cg_sum(t, naxes, axes, keep), s, "cg_sum");
        break;
    case 1:
        result(cg_mean(t, naxes, axes, keep), s, "cg_mean");
        break;
    case 2:
        result(cg_max(t, naxes, axes, keep), s, "cg_max");
        break;
    case 3:
        result(cg_var(t, naxes, axes, keep, op >> 4 & 1), s, "cg_var");
        break;
    case 4:
        result(cg_softmax(t, get_dim(in)), s, "cg_softmax");
        break;
    case 5:
        result(cg_log_softmax(t, get_dim(in)), s, "cg_log_softmax");
        break;
    case 6:
        result(cg_argmax(t, get_dim(in), keep), s, "cg_argmax");
        break;
    case 7:
        result(cg_argmin(t, get_dim(in), keep), s, "cg_argmin");
        break;
    default:
        dim = get_dim(in);
        rc = (op & 16 ? cg_min_dim : cg_max_dim)(t, dim, keep, &v, &ix);
        if (rc != CG_OK) {
            FUZZ_ASSERT(rc < 0 && !v && !ix, "cg_max_dim: status %d", rc);
            fuzz_expect_error("cg_max_dim");
            break;
        }
        result(v, s, "cg_max_dim values");
        result(ix, (s + 1) % SLOTS, "cg_max_dim indices");
        break;
    }
}

static void
binary(fuzz_input *in, unsigned op, int s)
{
    static cg_tensor *(*const fn[])(cg_tensor *, cg_tensor *) = {
        cg_add, cg_sub, cg_mul, cg_div, cg_pow, cg_maximum, cg_minimum,
        cg_matmul
    };
    cg_tensor *a = pick(in), *b = pick(in), *c;

    cg__error_clear();
    if (op % 10 < 8) {
        result(fn[op % 10](a, b), s, "binary op");
    } else if (op % 10 == 8) {
        result(cg_matmul_t(a, b, op >> 4 & 1, op >> 5 & 1), s, "cg_matmul_t");
    } else {
        c = pick(in);
        result(cg_where(c, a, b), s, "cg_where");
    }
}

static void
unary(fuzz_input *in, unsigned op, int s)
{
    static cg_tensor *(*const fn[])(cg_tensor *) = {
        cg_neg, cg_exp, cg_log, cg_sqrt, cg_abs, cg_tanh, cg_sigmoid,
        cg_relu, cg_gelu
    };
    static const float scalars[] = { 0.0f, 1.0f, -1.0f, 0.5f, 1e30f,
                                     -1e30f, INFINITY, -INFINITY, NAN };
    cg_tensor *t = pick(in);
    float x = scalars[fuzz_u8(in) % 9], y = scalars[fuzz_u8(in) % 9];

    cg__error_clear();
    switch (op % 14) {
    case 9:
        result(cg_clamp(t, x, y), s, "cg_clamp");
        break;
    case 10:
        result(cg_leaky_relu(t, x), s, "cg_leaky_relu");
        break;
    case 11:
        result(cg_add_scalar(t, x), s, "cg_add_scalar");
        break;
    case 12:
        result(cg_pow_scalar(t, x), s, "cg_pow_scalar");
        break;
    case 13:
        result(cg_dropout(t, x, 1), s, "cg_dropout");
        break;
    default:
        result(fn[op % 14](t), s, "unary op");
        break;
    }
}

static void
join(fuzz_input *in, unsigned op, int s)
{
    cg_tensor *ts[3], *out[4] = { NULL, NULL, NULL, NULL };
    int n = 1 + (int)(op >> 4 & 1) + (int)(op >> 5 & 1), i, got;
    int64_t chunk;

    for (i = 0; i < 3; i++)
        ts[i] = pick(in);
    cg__error_clear();
    switch (op % 5) {
    case 0:
        result(cg_concat(ts, n, get_dim(in)), s, "cg_concat");
        break;
    case 1:
        result(cg_stack(ts, n, get_dim(in)), s, "cg_stack");
        break;
    case 2:
        result(cg_index_select(ts[0], get_dim(in), ts[1]), s,
               "cg_index_select");
        break;
    case 3:
        result(cg_embedding(ts[0], ts[1]), s, "cg_embedding");
        break;
    default:
        i = get_dim(in);
        chunk = get_size(in);
        got = cg_split_chunks(ts[0], i, chunk, 4, out);
        if (got < 0) {
            fuzz_expect_error("cg_split_chunks");
            for (i = 0; i < 4; i++)
                FUZZ_ASSERT(!out[i], "cg_split_chunks failed and set "
                            "output %d", i);
            break;
        }
        FUZZ_ASSERT(got >= 1 && got <= 4, "cg_split_chunks: %d pieces", got);
        for (i = 0; i < got; i++)
            result(out[i], (s + i) % SLOTS, "cg_split_chunks");
        break;
    }
}

static void
backward(fuzz_input *in, int s)
{
    cg_tensor *t = pick(in), *loss, *g;
    int i, rc;

    cg__error_clear();
    loss = cg_sum(t, 0, NULL, 0);
    if (!loss) {
        fuzz_expect_error("cg_sum");
        return;
    }
    check_tensor(loss, "cg_sum");
    cg__error_clear();
    rc = cg_backward(loss, NULL, fuzz_u8(in) & 1);
    if (rc != CG_OK)
        fuzz_expect_error("cg_backward");
    cg_tensor_free(loss);
    for (i = 0; i < SLOTS; i++)
        if (slot[i] && (g = cg_tensor_grad(slot[i]))) {
            check_tensor(g, "a gradient");
            FUZZ_ASSERT(cg_tensor_numel(g) == cg_tensor_numel(slot[i]),
                        "a gradient of another size");
        }
    (void)s;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = { data, size };
    int step, i;

    if (!fuzz_context())
        return 0;
    for (step = 0; step < STEPS_MAX && in.n > 0; step++) {
        unsigned op = fuzz_u8(&in), sub = fuzz_u8(&in);
        int s = (int)(sub % SLOTS);

        switch (op % 9) {
        case 0:
        case 1:
            create(&in, s);
            break;
        case 2:
        case 3:
            view(&in, op >> 4, s);
            break;
        case 4:
            reduce(&in, sub >> 3 | (op & 0xf0), s);
            break;
        case 5:
            binary(&in, op >> 4 | (sub & 0xf0), s);
            break;
        case 6:
            unary(&in, op >> 4 | (sub & 0x30), s);
            break;
        case 7:
            join(&in, op >> 3, s);
            break;
        default:
            if (op & 0x80) {
                cg_tensor_free(slot[s]);
                slot[s] = NULL;
            } else {
                backward(&in, s);
            }
            break;
        }
    }
    for (i = 0; i < SLOTS; i++) {
        cg_tensor_free(slot[i]);
        slot[i] = NULL;
    }
    return 0;
}
