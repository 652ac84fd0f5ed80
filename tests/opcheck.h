/* SPDX-License-Identifier: MIT */
/*
 * tests/opcheck.h - the op test harness: a forward check against a plain C
 * reference computed in double, and a gradcheck - central finite
 * differences of that reference, in double on the host - against the
 * gradient the backward kernels produce.
 *
 * For an op with output y = f(x1..xn), a random upstream gradient G and
 * L = sum(f(x) * G): dL/dx[j] ~ (L(x + h e_j) - L(x - h e_j)) / 2h.
 * Inputs are random (never all zero) float32 values; the reference sees
 * exactly those float32 values, in double.
 *
 * Errors are normalised: max |device - reference| / max(1, max |ref|).
 * Tolerances: forward 2e-5, gradient 2e-4.  The device computes in float32
 * (unit roundoff 6e-8); sums over a few hundred terms and the transcendental
 * functions' few-ulp errors stay below 1e-5, and the finite differences of
 * the double reference add about h^2 = 1e-12 - so these bounds are about
 * ten times what float32 rounding explains, and any wrong formula misses
 * them by orders of magnitude.
 */
#ifndef CG_OPCHECK_H
#define CG_OPCHECK_H

#include <stdint.h>

#include "clgrad.h"
#include "testutil.h"

#define OC_MAX_IN 6

/* A host tensor in double, row-major. */
typedef struct oc_tensor {
    int ndim;
    int64_t shape[CG_MAX_DIMS];
    int64_t numel;
    double *data;
} oc_tensor;

typedef struct oc_op {
    const char *name;
    int ninputs;
    /* Runs the op on device tensors. */
    cg_tensor *(*run)(cg_tensor **in, const void *param);
    /* The reference: sets out->ndim/shape and fills out->data, which it
     * allocates with oc_alloc. */
    void (*ref)(const oc_tensor *in, oc_tensor *out, const void *param);
    /* Input value ranges (default [-2, 2]) and kinds. */
    double lo[OC_MAX_IN], hi[OC_MAX_IN];
    cg_dtype dtype[OC_MAX_IN];      /* CG_I32 inputs: integers in [lo, hi) */
    int no_grad[OC_MAX_IN];         /* inputs that get no gradient */
    double fwd_tol, grad_tol;       /* 0: the defaults above */
} oc_op;

/* Allocates out->data for the shape already set in out. */
void oc_alloc(oc_tensor *out);

/* Checks `op` for inputs of the given shapes: strings like "7,33", "" for
 * a 0-d tensor; a leading 'T' passes a non-contiguous (transposed) view of
 * that shape, a leading 'O' a contiguous view at an odd element offset
 * into its storage (no vector alignment). */
void oc_check(const oc_op *op, const void *param, ...);

/* Row-major offset into t of the multi-index of element i of the shape
 * (ndim, shape), broadcasting t (NumPy rules). */
int64_t oc_bcast_index(const oc_tensor *t, int ndim, const int64_t *shape,
                       int64_t i);

/* Sets out's shape to the broadcast of a and b. */
void oc_bcast_shape(const oc_tensor *a, const oc_tensor *b, oc_tensor *out);

/* Prints each op's largest forward and gradient errors so far. */
void oc_report(void);

/* A uniform random double in [lo, hi) from the harness's generator. */
double oc_uniform(double lo, double hi);

#endif
