/* SPDX-License-Identifier: MIT */
/*
 * lib/ops/conv_internal.h - what lib/ops/conv.c (conv2d, conv1d) shares
 * with lib/ops/conv_transpose.c (conv_transpose2d): the geometry, the
 * argument checks, the two algorithms' steps and the graph node's
 * helpers.  A transposed convolution is described by the geometry of
 * the convolution it transposes (its input is that convolution's output
 * [N, K, OH, OW], its output that convolution's input [N, C, H, W]), so
 * both files run the same steps on the same struct.
 */
#ifndef CLGRAD_OPS_CONV_INTERNAL_H
#define CLGRAD_OPS_CONV_INTERNAL_H

#include "ops/internal.h"

/* The geometry of one convolution, stored in the graph node's i[]. */
typedef struct cg__conv_geom {
    int64_t N, C, H, W, K, R, S, OH, OW, sh, sw, ph, pw, dh, dw, G;
    /* 1 where the direction's class entry says "shift" 0: im2col always
     * makes columns, never reading stride-1 windows in place (set by
     * cg__conv_choose; 0, the built-in rule, elsewhere) */
    int64_t no_shift;
} cg__conv_geom;

typedef enum cg__conv_algorithm { CG__CONV_IM2COL, CG__CONV_DIRECT }
    cg__conv_algorithm;

/* The directions whose algorithm is chosen apart (lib/tune/
 * conv_class.c's classes): a convolution's forward and backward, a
 * transposed convolution's forward and backward. */
enum { CG__CONV_FWD, CG__CONV_BWD, CG__CONV_TFWD, CG__CONV_TBWD };

/* v, or dflt where v is 0 (the options' "0 means the default"). */
static inline int
cg__conv_opt_or(int v, int dflt)
{
    return v == 0 ? dflt : v;
}

/* The algorithm of direction dir (CG__CONV_FWD ...) of the convolution
 * g, whatever its dtype: CLGRAD_CONV_ALGO, else the tuning entry of the
 * class, else the built-in rule (direct for depthwise); im2col whatever
 * is chosen for a weight the direct kernels cannot index.  Sets
 * g->no_shift from the entry's "shift" (where CLGRAD_CONV_ALGO chooses,
 * the rule's).  CG_EINVAL for a bad CLGRAD_CONV_ALGO. */
int cg__conv_choose(cg_context *ctx, int dir, cg__conv_geom *g,
                    cg__conv_algorithm *out);
/* Whether im2col reads g's stride-1 windows in place (*yes) for its
 * forward and weight gradient: g->no_shift, the built-in rule
 * (lib/ops/conv.c, shifts) and the structural limits.  For clgrad-tune,
 * which tries "shift" 0 only where it would change something. */
int cg__conv_shifts(cg_context *ctx, const cg__conv_geom *g, int *yes);

/* CLGRAD_CONV_ALGO's values: im2col, direct, auto, fft (conv1d only;
 * auto for the others). */
extern const char *const cg__conv_algo_names[4];

/* conv1d by FFT (lib/ops/conv_fft.c).  The built-in crossover: a conv1d
 * whose dilated kernel has at least this many taps runs by FFT.  Measured
 * on PoCL's CPU device (2 cores, loaded by other jobs), depthwise, 64
 * channels, length 4096, padding "same", best of 5: forward, FFT 16-28
 * ms at every length against direct 6 ms at 128 taps, 16 ms at 256 and
 * 47 ms at 512; forward and backward, FFT 44-102 ms against direct 40 ms
 * at 128, 85 ms at 256 and 170 ms at 512. */
#define CG__CONV_FFT_MIN_KERNEL 256

/* The least dilated kernel length that runs by FFT on ctx (0: none): the
 * entry "conv" "fwd1d.long" ("algo" 2 and "min_kernel", else not FFT), or
 * the built-in crossover. */
int cg__conv1d_fft_min_kernel(cg_context *ctx, int64_t *min_kernel);
/* Whether conv1d g runs by FFT: CLGRAD_CONV_ALGO (fft: yes; im2col or
 * direct: no), else the crossover above.  CG_EINVAL for a bad
 * CLGRAD_CONV_ALGO. */
int cg__conv1d_fft_choose(cg_context *ctx, const cg__conv_geom *g,
                          int *fft);
/* y [N, K, OL] = conv1d(x [N, C, L], w [K, Cg, S]) + b by FFT, recorded
 * through the ops it is made of; g is the conv1d's geometry (W = L, S,
 * sw, pw, dw, OW); x, w, b of one dtype (16 bits: the float32 algorithm
 * between casts).  NULL on error. */
cg_tensor *cg__conv1d_fft(const cg__conv_geom *g, cg_tensor *x, cg_tensor *w,
                          cg_tensor *b);

/* The checks: the tensors of a convolution (one context and dtype, x and
 * w 4-D); b NULL or [K]; x, y and one image's columns within the
 * kernels' ints.  op names the op in the messages. */
int cg__conv_tensors(const char *op, cg_tensor *x, cg_tensor *w,
                     cg_tensor *b);
int cg__conv_bias_check(const char *op, const cg_tensor *b,
                        const cg_tensor *w, const cg__conv_geom *g,
                        int64_t K);
int cg__conv_geom_fits(const char *op, const cg__conv_geom *g);

/* im2col + GEMM.  forward: y = conv(x, w) + b (NULL: none), chunk by
 * chunk (x, w dense; *keep, when keep is not NULL, may receive what the
 * backward can use, owned by the caller: the columns of the whole batch,
 * or at stride 1 x's padded planes; with groups 1, columns not kept go
 * straight into the packed GEMM's operand instead of a column buffer).
 * backward: dx and dw (either NULL) of y = conv(x, w) from dense dy (x
 * may be NULL without dw; saved: what the forward kept, or NULL; dx_add
 * nonzero: dx holds a gradient to add to, which the backward can only
 * at stride 1 and groups 1 (the convolution's own backward asks;
 * CG_EINVAL elsewhere)). */
int cg__conv_forward_im2col(const cg__conv_geom *g, cg_tensor *x,
                            cg_tensor *w, cg_tensor *b, cg_tensor *y,
                            cg_tensor **keep);
int cg__conv_backward_im2col(const cg__conv_geom *g, cg_tensor *x,
                             cg_tensor *w, cg_tensor *dy, cg_tensor *dx,
                             cg_tensor *dw, cg_tensor *saved, int dx_add);
/* y [N, K, OH, OW] += b [K] along dimension 1; b may be any view. */
int cg__conv_add_bias(cg_tensor *y, cg_tensor *b);

/* Enqueues direct kernel kid (CG__K_CONV_DIRECT_FWD, _DX or _DW) over n
 * work-items (the forward's and dx's times the pieces of their rows that
 * it cuts for a device with few rows per compute unit): out from a and
 * b, all three of dtype dt; the forward and dx kernels add bias (dense,
 * or NULL) before their one rounding. */
int cg__conv_direct(cg_context *ctx, cg__kid kid, cg_dtype dt,
                    const cg__conv_geom *g, cl_mem a, cl_mem b, cl_mem out,
                    const cg_tensor *bias, size_t n);
/* conv_direct_fwd's work-items: N G blocks-of-output-channels OH (OH / 4
 * rounded up on its 3 x 3 path); conv_direct_dx's: N C H (likewise). */
size_t cg__conv_direct_fwd_items(const cg__conv_geom *g);
size_t cg__conv_direct_dx_items(const cg__conv_geom *g);

/* The backward's start: the node's geometry into g, the dense dy into
 * *gd, and the gradient buffers of saved[0] and saved[1] where needed.
 * Its end: db (dy summed over N, OH, OW) into gin[2] where needed, gd
 * freed; returns status or the first error. */
int cg__conv_grads_begin(cg__node *node, cg_tensor *dy, cg_tensor **gin,
                         cg_tensor **gd, cg__conv_geom *g);
int cg__conv_grads_end(cg__node *node, cg_tensor *gd, cg_tensor **gin,
                       int status);

/* Records y's node for op with backward fn over in[3] (in[2] the bias or
 * NULL): g in its i[], dense x and w saved as saved[0] and [1], kept
 * (NULL: none; what the forward kept for the backward) as saved[2]
 * when w needs a gradient. */
int cg__conv_record(cg_tensor *y, const char *op, cg__backward_fn fn,
                    const cg__conv_geom *g, cg_tensor **in, cg_tensor *x,
                    cg_tensor *w, cg_tensor *cols);

/* A 16-bit convolution that runs im2col: apply (the float32 op of op
 * on checked arguments) on x, w and b cast up, its result rounded once to
 * x's dtype; every step a recorded op, so gradients come back through
 * the casts in the arguments' dtype. */
typedef cg_tensor *(*cg__conv_apply_fn)(const char *op,
                                        const cg__conv_geom *g,
                                        cg_tensor *x, cg_tensor *w,
                                        cg_tensor *b);
cg_tensor *cg__conv_via_f32(cg__conv_apply_fn apply, const char *op,
                            const cg__conv_geom *g, cg_tensor *x,
                            cg_tensor *w, cg_tensor *b);

/* Forward mode (lib/autograd/jvp.c): the convolution (transposed for
 * cg__convt_geom_apply) of geometry g, as recorded in a node's i[], of x
 * and w without bias; recorded as `op` (nothing, in no-grad mode). */
cg_tensor *cg__conv_geom_apply(const char *op, const cg__conv_geom *g,
                               cg_tensor *x, cg_tensor *w);
cg_tensor *cg__convt_geom_apply(const char *op, const cg__conv_geom *g,
                                cg_tensor *x, cg_tensor *w);

/* Double backward (lib/ops/conv.c): the weight gradient of geometry g
 * from a (the convolution's input, [N, C, H, W]) and b (its output's
 * gradient, [N, K, OH, OW]), not recorded; the composite backward of
 * the convolution nodes (conv2d, conv1d, conv_transpose2d); the
 * backward of the recorded weight gradient, "conv_wgrad". */
cg_tensor *cg__conv_wgrad(const cg__conv_geom *g, cg_tensor *a,
                          cg_tensor *b);
int cg__conv_graph(cg__node *n, cg_tensor *dy, cg_tensor **gin);
int cg__conv_wgrad_backward(cg__node *n, cg_tensor *gg, cg_tensor **gin);

#endif
