/* SPDX-License-Identifier: MIT */
/*
 * tests/opcheck.c - the op test harness (see opcheck.h).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opcheck.h"

#define FWD_TOL 2e-5
#define GRAD_TOL 2e-4
#define MAX_OPS 128

static struct {
    const char *name;
    double fwd, grad;
    int cases;
} seen[MAX_OPS];
static int nseen;
static uint64_t rng = 0x9E3779B97F4A7C15ULL;

double
oc_uniform(double lo, double hi)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return lo + (hi - lo) * (double)(rng >> 11) / 9007199254740992.0;
}

void
oc_alloc(oc_tensor *out)
{
    int d;

    out->numel = 1;
    for (d = 0; d < out->ndim; d++)
        out->numel *= out->shape[d];
    out->data = calloc((size_t)out->numel, sizeof(double));
    ck_assert_ptr_nonnull(out->data);
}

int64_t
oc_bcast_index(const oc_tensor *t, int ndim, const int64_t *shape, int64_t i)
{
    int64_t off = 0, stride = 1;
    int d;

    for (d = ndim - 1; d >= 0; d--) {
        int64_t c = i % shape[d];
        int td = d - (ndim - t->ndim);

        i /= shape[d];
        if (td >= 0) {
            if (t->shape[td] != 1)
                off += c * stride;
            stride *= t->shape[td];
        }
    }
    return off;
}

void
oc_bcast_shape(const oc_tensor *a, const oc_tensor *b, oc_tensor *out)
{
    int n = a->ndim > b->ndim ? a->ndim : b->ndim, d;

    out->ndim = n;
    for (d = 0; d < n; d++) {
        int da = d - (n - a->ndim), db = d - (n - b->ndim);
        int64_t x = da >= 0 ? a->shape[da] : 1, y = db >= 0 ? b->shape[db] : 1;

        out->shape[d] = x == 1 ? y : x;
    }
}

static void
record(const char *name, double fwd, double grad)
{
    int i;

    for (i = 0; i < nseen; i++)
        if (strcmp(seen[i].name, name) == 0)
            break;
    if (i == nseen) {
        ck_assert_int_lt(nseen, MAX_OPS);
        seen[nseen].name = name;
        nseen++;
    }
    if (fwd > seen[i].fwd)
        seen[i].fwd = fwd;
    if (grad > seen[i].grad)
        seen[i].grad = grad;
    seen[i].cases++;
}

void
oc_report(void)
{
    int i;

    printf("%-20s %6s %14s %14s\n", "op", "cases", "max fwd err",
           "max grad err");
    for (i = 0; i < nseen; i++)
        printf("%-20s %6d %14.3e %14.3e\n", seen[i].name, seen[i].cases,
               seen[i].fwd, seen[i].grad);
    fflush(stdout);
}

enum { PLAIN, TRANSPOSED, OFFSET };

/* The shape in s, and its layout prefix: T transposed, O offset. */
static void
parse_shape(const char *s, oc_tensor *t, int *layout)
{
    *layout = *s == 'T' ? TRANSPOSED : *s == 'O' ? OFFSET : PLAIN;
    if (*layout != PLAIN)
        s++;
    t->ndim = 0;
    while (*s) {
        char *end;

        ck_assert_int_lt(t->ndim, CG_MAX_DIMS);
        t->shape[t->ndim++] = strtoll(s, &end, 10);
        s = *end == ',' ? end + 1 : end;
    }
}

/* Elements before an OFFSET view's first: odd, so that the view is not
 * aligned to any vector width. */
#define OFFSET_PAD 3

/* A device tensor holding t's values (float32 or int32); layout
 * TRANSPOSED: the same values through a transposed view of a contiguous
 * tensor; OFFSET: through a contiguous view that starts OFFSET_PAD
 * elements into its storage. */
static cg_tensor *
to_device(const oc_tensor *t, cg_dtype dtype, int layout)
{
    int64_t shape[CG_MAX_DIMS];
    int nd = t->ndim, i, transposed = layout == TRANSPOSED;
    int pad = layout == OFFSET ? OFFSET_PAD : 0;
    char *host = calloc((size_t)(t->numel + pad) * 4 + 4, 1);
    void *vals = host + pad * 4;
    cg_tensor *base, *view;

    memcpy(shape, t->shape, sizeof shape);
    if (layout == OFFSET) {
        for (i = 0; i < t->numel; i++) {
            if (dtype == CG_F32)
                ((float *)vals)[i] = (float)t->data[i];
            else
                ((int32_t *)vals)[i] = (int32_t)t->data[i];
        }
        shape[0] = t->numel + pad;
        base = cg_tensor_from_host(tt_ctx(), dtype, 1, shape, host);
        free(host);
        ck_assert_msg(base != NULL, "%s", cg_last_error());
        view = cg_narrow(base, 0, pad, t->numel);
        cg_tensor_free(base);
        ck_assert_msg(view != NULL, "%s", cg_last_error());
        base = cg_reshape(view, nd, t->shape);
        cg_tensor_free(view);
        ck_assert_msg(base != NULL, "%s", cg_last_error());
        return base;
    }
    if (transposed) {
        /* Store the transpose of the last two dimensions, then view it
         * transposed back. */
        int64_t r = shape[nd - 2], c = shape[nd - 1], outer = t->numel / (r * c);
        int64_t o, a, b;

        ck_assert_int_ge(nd, 2);
        shape[nd - 2] = c;
        shape[nd - 1] = r;
        for (o = 0; o < outer; o++)
            for (a = 0; a < r; a++)
                for (b = 0; b < c; b++) {
                    double v = t->data[(o * r + a) * c + b];
                    int64_t j = (o * c + b) * r + a;

                    if (dtype == CG_F32)
                        ((float *)host)[j] = (float)v;
                    else
                        ((int32_t *)host)[j] = (int32_t)v;
                }
    } else {
        for (i = 0; i < t->numel; i++) {
            if (dtype == CG_F32)
                ((float *)host)[i] = (float)t->data[i];
            else
                ((int32_t *)host)[i] = (int32_t)t->data[i];
        }
    }
    base = cg_tensor_from_host(tt_ctx(), dtype, nd, shape, host);
    free(host);
    ck_assert_msg(base != NULL, "%s", cg_last_error());
    if (!transposed)
        return base;
    view = cg_transpose(base, nd - 2, nd - 1);
    cg_tensor_free(base);
    ck_assert_ptr_nonnull(view);
    ck_assert(!cg_tensor_is_contiguous(view));
    return view;
}

static double *
to_host(const cg_tensor *t)
{
    int64_t n = cg_tensor_numel(t), i;
    float *f = malloc((size_t)n * sizeof *f);
    double *d = malloc((size_t)n * sizeof *d);

    ck_assert_msg(cg_tensor_to_host(t, f, (size_t)n * sizeof *f) == CG_OK,
                  "%s", cg_last_error());
    for (i = 0; i < n; i++)
        d[i] = f[i];
    free(f);
    return d;
}

/* L = sum(ref(in) * G). */
static double
loss(const oc_op *op, const oc_tensor *in, const void *param,
     const double *g)
{
    oc_tensor out = { 0 };
    double l = 0;
    int64_t i;

    op->ref(in, &out, param);
    for (i = 0; i < out.numel; i++)
        l += out.data[i] * g[i];
    free(out.data);
    return l;
}

static const char *
describe(const oc_op *op, char shapes[OC_MAX_IN][64], char *buf, size_t size)
{
    size_t n = (size_t)snprintf(buf, size, "%s(", op->name);
    int k;

    for (k = 0; k < op->ninputs && n < size; k++)
        n += (size_t)snprintf(buf + n, size - n, "%s[%s]", k ? ", " : "",
                              shapes[k]);
    if (n < size)
        snprintf(buf + n, size - n, ")");
    return buf;
}

void
oc_check(const oc_op *op, const void *param, ...)
{
    int64_t fd_stride = tt_host_checker() ? 31 : tt_checker() ? 7 : 1;
    oc_tensor in[OC_MAX_IN], ref = { 0 };
    cg_tensor *dev[OC_MAX_IN] = { NULL }, *y, *gt;
    char shapes[OC_MAX_IN][64], what[512];
    double fwd_err = 0, grad_err = 0, scale = 1, *yd, *g;
    double ftol = op->fwd_tol ? op->fwd_tol : FWD_TOL;
    double gtol = op->grad_tol ? op->grad_tol : GRAD_TOL;
    float *gf;
    va_list ap;
    int k, tr[OC_MAX_IN];
    int64_t i, j;

    va_start(ap, param);
    for (k = 0; k < op->ninputs; k++) {
        const char *s = va_arg(ap, const char *);
        double lo = op->lo[k], hi = op->hi[k];

        snprintf(shapes[k], sizeof shapes[k], "%s", s);
        parse_shape(s, &in[k], &tr[k]);
        oc_alloc(&in[k]);
        if (lo == 0 && hi == 0) {
            lo = -2;
            hi = 2;
        }
        for (i = 0; i < in[k].numel; i++)
            in[k].data[i] = op->dtype[k] == CG_I32
                ? floor(oc_uniform(lo, hi))
                : (double)(float)oc_uniform(lo, hi);
        dev[k] = to_device(&in[k], op->dtype[k], tr[k]);
        if (op->dtype[k] == CG_F32 && !op->no_grad[k])
            ck_assert_int_eq(cg_tensor_set_requires_grad(dev[k], 1), CG_OK);
    }
    va_end(ap);
    describe(op, shapes, what, sizeof what);

    /* Forward against the reference. */
    y = op->run(dev, param);
    ck_assert_msg(y != NULL, "%s: %s", what, cg_last_error());
    op->ref(in, &ref, param);
    ck_assert_msg(cg_tensor_ndim(y) == ref.ndim, "%s: %d dims, reference %d",
                  what, cg_tensor_ndim(y), ref.ndim);
    for (k = 0; k < ref.ndim; k++)
        ck_assert_msg(cg_tensor_dim(y, k) == ref.shape[k], "%s: dim %d is "
                      "%lld, reference %lld", what, k,
                      (long long)cg_tensor_dim(y, k),
                      (long long)ref.shape[k]);
    yd = to_host(y);
    for (i = 0; i < ref.numel; i++)
        if (fabs(ref.data[i]) > scale)
            scale = fabs(ref.data[i]);
    for (i = 0; i < ref.numel; i++) {
        double e = fabs(yd[i] - ref.data[i]) / scale;

        if (!(e <= fwd_err))
            fwd_err = isnan(e) ? INFINITY : e;
    }
    ck_assert_msg(fwd_err <= ftol, "%s: forward error %.3e > %.1e", what,
                  fwd_err, ftol);

    /* Backward against finite differences of the reference. */
    g = malloc((size_t)ref.numel * sizeof *g);
    gf = malloc((size_t)ref.numel * sizeof *gf);
    for (i = 0; i < ref.numel; i++) {
        gf[i] = (float)oc_uniform(-1, 1);
        g[i] = gf[i];
    }
    if (cg_tensor_requires_grad(y)) {
        gt = cg_tensor_from_host(tt_ctx(), CG_F32, ref.ndim, ref.shape, gf);
        ck_assert_ptr_nonnull(gt);
        ck_assert_msg(cg_backward(y, gt, 0) == CG_OK, "%s: backward: %s",
                      what, cg_last_error());
        cg_tensor_free(gt);
    }
    for (k = 0; k < op->ninputs; k++) {
        double *an, gscale = 1, *num;

        if (op->dtype[k] != CG_F32 || op->no_grad[k])
            continue;
        num = malloc((size_t)in[k].numel * sizeof *num);
        for (j = 0; j < in[k].numel; j++) {
            double x0 = in[k].data[j], h = 1e-6 * (fabs(x0) > 1 ? fabs(x0) : 1);
            double lp, lm;

            /* Under a checker the host differences dominate the run
             * time: every 7th element (and the last) is enough to run
             * every code path; under a host memory checker, which runs
             * the double-precision reference 20 to 50 times slower,
             * every 31st (test_nn_ops took 220 s under memcheck). */
            if (fd_stride > 1 && j % fd_stride != 0 && j != in[k].numel - 1) {
                num[j] = NAN;
                continue;
            }

            in[k].data[j] = x0 + h;
            lp = loss(op, in, param, g);
            in[k].data[j] = x0 - h;
            lm = loss(op, in, param, g);
            in[k].data[j] = x0;
            num[j] = (lp - lm) / (2 * h);
            if (fabs(num[j]) > gscale)
                gscale = fabs(num[j]);
        }
        if (cg_tensor_grad(dev[k])) {
            an = to_host(cg_tensor_grad(dev[k]));
        } else {
            an = calloc((size_t)in[k].numel, sizeof *an);
        }
        for (j = 0; j < in[k].numel; j++) {
            double e = fabs(an[j] - num[j]) / gscale;

            if (isnan(num[j]))
                continue;

            if (!(e <= grad_err))
                grad_err = isnan(e) ? INFINITY : e;
            ck_assert_msg(e <= gtol, "%s: d/d input %d [%lld]: backward "
                          "%.7g, finite differences %.7g (error %.3e > %.1e)",
                          what, k, (long long)j, an[j], num[j], e, gtol);
        }
        free(an);
        free(num);
    }
    record(op->name, fwd_err, grad_err);
    printf("%-40s fwd %.2e  grad %.2e\n", what, fwd_err, grad_err);

    free(g);
    free(gf);
    free(yd);
    free(ref.data);
    cg_tensor_free(y);
    for (k = 0; k < op->ninputs; k++) {
        cg_tensor_free(dev[k]);
        free(in[k].data);
    }
}
