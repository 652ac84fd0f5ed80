/* SPDX-License-Identifier: MIT */
/*
 * kernels/optim.cl - optimizer updates and gradient clipping.
 *
 * Update kernels (sgd_step, adam_step, rmsprop_step): one launch per
 * parameter, one work-item per ch consecutive elements (ch a multiple of
 * VW; ceil(n / ch) work-items, padded to the work-group size), VW at a
 * time as vectors and the rest of the last chunk one at a time.  Each
 * reads the parameter p and its gradient g (at element offsets po and go,
 * which need no alignment: vloadn needs only the element's), updates its
 * state in place and writes p.  Explicit vectors and a contiguous chunk
 * per work-item are what lets PoCL stream at memory bandwidth; the update
 * is written once, as a macro over the element type, so both widths do
 * the same float32 operations.
 * The arithmetic is PyTorch 1.13's single-tensor code written out one
 * float32 operation at a time, in its order and with its roundings: its
 * CPU kernels compute `x.add_(y, alpha=a)` as fma(a, y, x),
 * `addcmul_(t1, t2, value=v)` as fma(v * t1, t2, x) and
 * `addcdiv_(t1, t2, value=v)` as v * t1 / t2 + x, and the host rounds
 * every scalar to float32 as PyTorch does (the bias corrections are
 * computed in double on the host).  fma is exact in OpenCL C; implicit
 * contraction is off, so every other operation rounds on its own.
 *
 * 16-bit parameters (the CG_T variants): p and g are float16 or bfloat16
 * in memory, and the update reads and writes `master`, the parameter's
 * float32 master copy, then stores the master rounded into p: the float32
 * arithmetic is the float32 variant's, operation for operation, so a
 * master follows exactly the float32 run on the same gradients.  The
 * float32 variant ignores `master` (p is its own master).
 *
 * Loss scaling (lib/optim/amp.c): with amp_mode != 0 an update first reads
 * the scaler's state `amp` (amp[0] found_inf, amp[1] the inverse scale)
 * and does nothing at all when found_inf is set; amp_mode 1 multiplies
 * each gradient element by the inverse scale in registers (the gradient
 * in memory stays scaled), 2 takes gradients already unscaled.  Step
 * counts then live on the device (dstep[si], float32 as PyTorch's
 * state['step'] tensor), so a skipped step advances nothing: Adam computes
 * its bias corrections from dstep in float32 as PyTorch's capturable=True
 * path does (beta^step as exp2(step log2 beta)), and SGD makes its momentum buffer at the step where dstep[si]
 * equals init_at (-1: already made).  amp_check finds non-finite gradient
 * elements (and unscales in place for cg_grad_scaler_unscale);
 * amp_advance counts the step taken; amp_update is GradScaler's update.
 *
 * Clipping: grad_norm_partial writes, per gradient, NG partial results
 * (sums of |g|^p, or maxima) from work-groups of RWG; grad_norm_finish, one
 * work-group, combines all partials in a fixed order into the total norm
 * and the scale min(1, max_norm / (total + 1e-6)); grad_scale multiplies a
 * gradient by that scale, read from device memory, so the host never waits.
 * clamp_inplace clamps a gradient to [lo, hi].  Every reduction has a fixed
 * shape: results are bit-identical from run to run.
 *
 * Tunable: RWG, the reduction work-group size (a power of two).  The
 * @tunable line is its one default (build-aux/cltable.sh puts it in the
 * kernel table; the library always passes -DRWG) and the candidates
 * clgrad-tune tries.
 *
 * @tunable RWG 64: 16 32 64 128 256
 *
 * Each kernel is a program of its own (common.cl's CG_WANT):
 * @split
 */
#pragma OPENCL FP_CONTRACT OFF

#define VW 8
#define VF float8
#define LD_V(q) vload8(0, (q))
#define ST_V(x, q) vstore8((x), 0, (q))
#define LD_1(q) (*(q))
#define ST_1(x, q) (*(q) = (x))

/* The parameter's element(s) i (PLD), its new value stored (PST), and the
 * gradient's (GLD), VW at a time (_V) or one (_1).  16-bit: through the
 * float32 master. */
#define GLD_V(i) CG_VLOAD(8, 0, g + go + (i))
#define GLD_1(i) CG_LD(g, go + (i))
#if CG_T == 0
#define PLD_V(i) vload8(0, p + po + (i))
#define PLD_1(i) (p[po + (i)])
#define PST_V(x, i) vstore8((x), 0, p + po + (i))
#define PST_1(x, i) (p[po + (i)] = (x))
#else
#define PLD_V(i) vload8(0, master + (i))
#define PLD_1(i) (master[i])
#define PST_V(x, i)                                                          \
    do {                                                                     \
        VF x_ = (x);                                                         \
                                                                             \
        vstore8(x_, 0, master + (i));                                        \
        CG_VSTORE(8, x_, 0, p + po + (i));                                   \
    } while (0)
#define PST_1(x, i)                                                          \
    do {                                                                     \
        float x_ = (x);                                                      \
                                                                             \
        master[i] = x_;                                                      \
        CG_ST(p, po + (i), x_);                                              \
    } while (0)
#endif

/* The gradient unscaled in registers (amp_mode 1). */
#define GLDS_V(i) (GLD_V(i) * gmul)
#define GLDS_1(i) (GLD_1(i) * gmul)

/* Loss scaling: leave if the scaler found inf/NaN; gmul the inverse scale. */
#define AMP_ENTRY                                                            \
    float gmul = 1.0f;                                                       \
                                                                             \
    if (amp_mode != 0) {                                                     \
        if (amp[0] != 0.0f)                                                  \
            return;                                                          \
        gmul = amp[1];                                                       \
    }

/* Runs UPDATE(T, LD, ST, PLD, PST, GLD, i) over elements i of the chunk of
 * ch that work-item gets, VW at a time while whole vectors remain; the
 * loops are written twice so that the gradient's unscaling (amp_mode 1)
 * is decided once, not per element. */
#define CHUNK_LOOPS(UPDATE, GV, G1)                                          \
    do {                                                                     \
        for (i = i0; i + VW <= e; i += VW)                                   \
            UPDATE(VF, LD_V, ST_V, PLD_V, PST_V, GV, i);                     \
        for (; i < e; i++)                                                   \
            UPDATE(float, LD_1, ST_1, PLD_1, PST_1, G1, i);                  \
    } while (0)
#define FOR_CHUNK(UPDATE)                                                    \
    uint i0 = get_global_id(0) * ch, e, i;                                   \
                                                                             \
    if (i0 >= n)                                                             \
        return;                                                              \
    e = min(n, i0 + ch);                                                     \
    if (amp_mode == 1)                                                       \
        CHUNK_LOOPS(UPDATE, GLDS_V, GLDS_1);                                 \
    else                                                                     \
        CHUNK_LOOPS(UPDATE, GLD_V, GLD_1)

/* SGD.  buf is the momentum buffer (unused, may be any buffer, when
 * momentum is 0); init 1: the buffer starts as this step's direction
 * (with amp_mode != 0: when dstep[si] == init_at).  omd = 1 - dampening,
 * neg_lr = -lr. */
#define SGD(T, LD, ST, PLD, PST, GLD, i)                                     \
    do {                                                                     \
        T pv = PLD(i), gv = GLD(i), d = maximize ? -gv : gv;        \
        T b;                                                                 \
                                                                             \
        if (wd != 0.0f)                                                      \
            d = fma((T)wd, pv, d);                                           \
        if (momentum != 0.0f) {                                              \
            if (init) {                                                      \
                b = d;                                                       \
            } else {                                                         \
                b = LD(buf + i) * momentum;                                  \
                b = fma((T)omd, d, b);                                       \
            }                                                                \
            ST(b, buf + i);                                                  \
            d = nesterov ? fma((T)momentum, b, d) : b;                       \
        }                                                                    \
        PST(fma((T)neg_lr, d, pv), i);                                       \
    } while (0)

#if CG_WANT(sgd_step)
__kernel void
sgd_step(__global cg_t *p, int po, __global const cg_t *g, int go,
         __global float *buf, uint n, float momentum, float omd, float wd,
         float neg_lr, int nesterov, int maximize, int init, uint ch,
         __global float *master, __global const float *amp, int amp_mode,
         __global const float *dstep, uint si, float init_at)
{
    AMP_ENTRY
    if (amp_mode != 0)
        init = dstep[si] == init_at;
    FOR_CHUNK(SGD);
}
#endif

/* Adam and AdamW.  pscale multiplies p first (AdamW's 1 - lr * wd, else
 * 1); wd is Adam's L2 term (0 for AdamW).  omb1 = 1 - beta1,
 * omb2 = 1 - beta2; the step is p += c * m / (sqrt(v) / a + b), with
 * a = sqrt(1 - beta2^step), b = eps and c = -lr / (1 - beta1^step) from
 * the host, or with amp_mode != 0 PyTorch's capturable terms from
 * step = dstep[si] + 1: a = sqrt(bc2) * s, b = eps / s (as reciprocal(s)
 * * eps), c = 1, s = -(reciprocal(bc1) * lr), bc = 1 - pow(beta, step),
 * all float32.  vmax is used only when amsgrad is set; torch.maximum
 * there: NaN propagates. */
#define ADAM(T, LD, ST, PLD, PST, GLD, i)                                    \
    do {                                                                     \
        T pv = PLD(i) * pscale, gv = GLD(i);                        \
        T d = maximize ? -gv : gv, mv, vv, den;                              \
                                                                             \
        if (wd != 0.0f)                                                      \
            d = fma((T)wd, pv, d);                                           \
        mv = LD(m + i) * beta1;                                              \
        mv = fma((T)omb1, d, mv);                                            \
        vv = LD(v + i) * beta2;                                              \
        vv = fma(omb2 * d, d, vv);                                           \
        ST(mv, m + i);                                                       \
        ST(vv, v + i);                                                       \
        if (amsgrad) {                                                       \
            T mx = LD(vmax + i);                                             \
                                                                             \
            mx = (isnan(vv) || vv > mx) ? vv : mx;                           \
            ST(mx, vmax + i);                                                \
            vv = mx;                                                         \
        }                                                                    \
        den = sqrt(vv) / bc2s;                                               \
        den = den + eps;                                                     \
        PST(neg_step * mv / den + pv, i);                                    \
    } while (0)

#if CG_WANT(adam_step)
__kernel void
adam_step(__global cg_t *p, int po, __global const cg_t *g, int go,
          __global float *m, __global float *v, __global float *vmax,
          uint n, float pscale, float wd, float beta1, float omb1,
          float beta2, float omb2, float bc2s, float eps, float neg_step,
          int amsgrad, int maximize, uint ch, __global float *master,
          __global const float *amp, int amp_mode,
          __global const float *dstep, uint si, float lr)
{
    AMP_ENTRY
    if (amp_mode != 0) {
        float step = dstep[si] + 1.0f;
        /* beta^step as exp2(step log2 beta): pow in every work-item made
         * the step 4x slower on PoCL; the two agree within a few ulp */
        float bc1 = 1.0f - exp2(step * log2(beta1));
        float bc2 = 1.0f - exp2(step * log2(beta2));
        float s = -((1.0f / bc1) * lr);

        bc2s = sqrt(bc2) * s;
        eps = (1.0f / s) * eps;
        neg_step = 1.0f;
    }
    FOR_CHUNK(ADAM);
}
#endif

/* RMSprop.  sq: square_avg; ga: grad_avg (centered only); buf: momentum
 * buffer (momentum > 0 only).  oma = 1 - alpha, neg_lr = -lr. */
#define RMSPROP(T, LD, ST, PLD, PST, GLD, i)                                 \
    do {                                                                     \
        T pv = PLD(i), gv = GLD(i), d = maximize ? -gv : gv;        \
        T s, avg;                                                            \
                                                                             \
        if (wd != 0.0f)                                                      \
            d = fma((T)wd, pv, d);                                           \
        s = LD(sq + i) * alpha;                                              \
        s = fma(oma * d, d, s);                                              \
        ST(s, sq + i);                                                       \
        if (centered) {                                                      \
            T a = LD(ga + i) * alpha;                                        \
                                                                             \
            a = fma((T)oma, d, a);                                           \
            ST(a, ga + i);                                                   \
            avg = sqrt(fma(-a, a, s));                                       \
        } else {                                                             \
            avg = sqrt(s);                                                   \
        }                                                                    \
        avg = avg + eps;                                                     \
        if (momentum > 0.0f) {                                               \
            T b = LD(buf + i) * momentum;                                    \
                                                                             \
            b = d / avg + b;                                                 \
            ST(b, buf + i);                                                  \
            PST(fma((T)neg_lr, b, pv), i);                                   \
        } else {                                                             \
            PST(neg_lr * d / avg + pv, i);                                   \
        }                                                                    \
    } while (0)

#if CG_WANT(rmsprop_step)
__kernel void
rmsprop_step(__global cg_t *p, int po, __global const cg_t *g, int go,
             __global float *sq, __global float *ga, __global float *buf,
             uint n, float alpha, float oma, float eps, float wd,
             float momentum, float neg_lr, int centered, int maximize,
             uint ch, __global float *master, __global const float *amp,
             int amp_mode)
{
    AMP_ENTRY
    FOR_CHUNK(RMSPROP);
}
#endif

/* Loss scaling.  amp: [0] found_inf, [1] inverse scale, [2] scale, [3]
 * growth tracker, [4] skipped steps (float32 counts, exact to 2^24).
 * amp_check: each work-item checks ch elements of g; any non-finite one
 * sets amp[0] to 1 (an atomic exchange: several may); unscale
 * also writes g * amp[1] back (unless the inverse scale is 1), rounded to
 * the storage dtype, as torch._amp_foreach_non_finite_check_and_unscale_. */
#if CG_WANT(amp_check)
__kernel void
amp_check(__global cg_t *g, int go, uint n, __global float *amp,
          int unscale, uint ch)
{
    uint i0 = get_global_id(0) * ch, e, i;
    float inv = amp[1];
    int bad = 0;

    if (i0 >= n)
        return;
    e = min(n, i0 + ch);
    unscale = unscale && inv != 1.0f;
    for (i = i0; i < e; i++) {
        float x = CG_LD(g, go + i);

        bad |= !isfinite(x);
        if (unscale)
            CG_ST(g, go + i, x * inv);
    }
    if (bad)
        atomic_xchg((volatile __global float *)amp, 1.0f);
}
#endif

/* dstep[first .. first + count - 1] += 1 unless amp[0] (found_inf). */
#if CG_WANT(amp_advance)
__kernel void
amp_advance(__global float *dstep, uint first, uint count,
            __global const float *amp)
{
    uint i = get_global_id(0);

    if (i < count && amp[0] == 0.0f)
        dstep[first + i] += 1.0f;
}
#endif

/* GradScaler's update (torch._amp_update_scale_), one work-item: on
 * found_inf scale *= backoff, tracker 0, one more skipped step; else
 * tracker + 1, and at growth_interval scale *= growth (kept if finite)
 * and tracker 0.  Then the inverse scale and found_inf cleared. */
#if CG_WANT(amp_update)
__kernel void
amp_update(__global float *amp, float growth, float backoff,
           float interval)
{
    float s = amp[2];

    if (get_global_id(0) != 0)
        return;
    if (amp[0] != 0.0f) {
        s = s * backoff;
        amp[3] = 0.0f;
        amp[4] = amp[4] + 1.0f;
    } else {
        float t = amp[3] + 1.0f;

        if (t == interval) {
            float ns = s * growth;

            if (isfinite(ns))
                s = ns;
            t = 0.0f;
        }
        amp[3] = t;
    }
    amp[2] = s;
    amp[1] = 1.0f / s;
    amp[0] = 0.0f;
}
#endif

/* |x|^p for the norm kinds: kind 0 sum of squares, 1 maximum of |x|,
 * 2 sum of |x|^p. */
static inline float
cg_norm_term(float x, int kind, float p)
{
    return kind == 0 ? x * x : kind == 1 ? fabs(x) : pow(fabs(x), p);
}

/* Combines two partials: a sum, or a maximum in which NaN wins. */
static inline float
cg_norm_combine(float a, float b, int kind)
{
    if (kind != 1)
        return a + b;
    return (isnan(a) || a >= b) ? a : b;
}

/* The work-group tree's combination (common.cl's CG_WG_TREE), with the
 * kernel's `kind`. */
#define NORM_COMBINE(a, b) cg_norm_combine(a, b, kind)

/* Work-group w of ng (global size ng * RWG) reduces elements w * RWG +
 * lid, + ng * RWG, ... of g into part[pofs + w]. */
#if CG_WANT(grad_norm_partial)
__kernel __attribute__((reqd_work_group_size(RWG, 1, 1))) void
grad_norm_partial(__global const cg_t *g, int go, uint n,
                  __global float *part, uint pofs, int kind, float p)
{
    __local float buf[RWG];
    uint w = get_group_id(0), ng = get_num_groups(0);
    uint lid = get_local_id(0), j;
    float acc = 0.0f;

    for (j = w * RWG + lid; j < n; j += ng * RWG)
        acc = cg_norm_combine(acc, cg_norm_term(CG_LD(g, go + j), kind, p),
                              kind);
    buf[lid] = acc;
    CG_WG_TREE(buf, lid, RWG, NORM_COMBINE);
    if (lid == 0)
        part[pofs + w] = buf[0];
}
#endif

/* One work-group of RWG: out[0] = the total norm of the npart partials,
 * out[1] = min(1, max_norm / (total + 1e-6)). */
#if CG_WANT(grad_norm_finish)
__kernel __attribute__((reqd_work_group_size(RWG, 1, 1))) void
grad_norm_finish(__global const float *part, uint npart,
                 __global float *out, int kind, float p, float max_norm)
{
    __local float buf[RWG];
    uint lid = get_local_id(0), j;
    float acc = 0.0f, total, coef;

    for (j = lid; j < npart; j += RWG)
        acc = cg_norm_combine(acc, part[j], kind);
    buf[lid] = acc;
    CG_WG_TREE(buf, lid, RWG, NORM_COMBINE);
    if (lid != 0)
        return;
    total = buf[0];
    total = kind == 0 ? sqrt(total) : kind == 1 ? total
                                    : pow(total, 1.0f / p);
    /* PyTorch: max_norm / (total + 1e-6), a Python float over a tensor,
     * which it computes as reciprocal(total + 1e-6) * max_norm. */
    coef = 1.0f / (total + 1e-6f) * max_norm;
    /* torch.clamp(max=1): NaN propagates. */
    out[0] = total;
    out[1] = coef > 1.0f ? 1.0f : coef;
}
#endif

/* g[go + i] *= coef[1] (grad_norm_finish's scale). */
#if CG_WANT(grad_scale)
__kernel void
grad_scale(__global cg_t *g, int go, uint n, __global const float *coef)
{
    uint i = get_global_id(0);

    if (i >= n)
        return;
    CG_ST(g, go + i, CG_LD(g, go + i) * coef[1]);
}
#endif

/* g[go + i] = clamp to [lo, hi] (NaN stays NaN, as torch.clamp). */
#if CG_WANT(clamp_inplace)
__kernel void
clamp_inplace(__global cg_t *g, int go, uint n, float lo, float hi)
{
    uint i = get_global_id(0);
    float x;

    if (i >= n)
        return;
    x = CG_LD(g, go + i);
    CG_ST(g, go + i, x < lo ? lo : x > hi ? hi : x);
}
#endif
