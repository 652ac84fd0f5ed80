/* SPDX-License-Identifier: MIT */
/*
 * lib/nn/rnn.c - RNN (tanh, relu), LSTM and GRU layers with PyTorch's
 * semantics, on the fused step kernels of kernels/rnn.cl.
 *
 * Each layer of a call is one graph node with both directions.  Forward:
 *   1. xproj [T*B, D*G*H] = bias row, then += x W_ih^T for every step and
 *      both directions in one GEMM (the directions' W_ih stacked);
 *   2. per direction, one step launch per time step, reading xproj_t and
 *      h_{t-1}, writing h_t into a state array and into its half of y.
 * State arrays have T + 1 slots of [B, H] indexed by time: for the
 * forward direction slot 0 is h0 and slot t + 1 is h_t; for the reverse
 * direction slot T is h0 and slot t is h_t (the state after it has seen
 * steps T-1 .. t).  So h_{t-1} of step t, in processing order, is slot t
 * (forward) or t + 1 (reverse), and the T states that multiply W_hh are
 * one contiguous [T*B, H] matrix either way: dW_hh is one GEMM.
 * Backward runs the step kernels in reverse processing order, leaving the
 * pre-activation gradients dg [T*B, G*H] indexed by time, then forms
 * dW_hh, dW_ih, dx (one GEMM each per direction) and the bias gradients
 * (column sums).  Forward mode (a dual level with a tangent on an input):
 * the layer computes its outputs' tangents itself after the primal's
 * steps (layer_jvp: GEMMs over all steps, then one tangent step launch per
 * time step), and records only the reverse graph's node.  A backward with
 * create_graph runs the node's composite form instead of the kernels
 * (layer_backward_graph: the forward recomputed and backpropagation
 * through time, both with recorded ops).
 *
 * float16 and bfloat16 (x, h0, c0 and every parameter of one 16-bit
 * dtype, or cast to the autocast region's): the step kernels' storage
 * variant (cg__rnn_step_init_dt) with float32 gate arithmetic.  xproj
 * (and the GEMM path's h W_hh^T) are float32 sums of 16-bit products
 * (cg__gemm_dt), so a gate's pre-activation is rounded nowhere; the c
 * states and the dh / dc carries are float32; the h states, the output,
 * the saved gates and the gate gradients are stored in the dtype, each
 * rounded once.  Weight gradients and dx are 16-bit products summed in
 * float32 (two directions' dx summed in float32 before their rounding).
 */
#include "config.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/internal.h"
#include "nn/internal.h"
#include "tune/internal.h"
#include "ops/internal.h"

/* Indices into a layer node's inputs and saved tensors. */
#define IN_X 0
#define IN_H0 1
#define IN_C0 2
#define IN_P(d, j) (3 + 4 * (d) + (j))  /* j: 0 W_ih, 1 W_hh, 2 b_ih, 3 b_hh */
#define SV_X 0
#define SV_LEN 1
#define SV_HS(d) (2 + 3 * (d))
#define SV_CS(d) (3 + 3 * (d))
#define SV_G(d) (4 + 3 * (d))

static const char *const mode_names[] = { "RNN_TANH", "RNN_RELU", "LSTM",
                                          "GRU" };

static int
ndirs(const cg_module *m)
{
    return m->rnn.bidirectional ? 2 : 1;
}

/* The parameter of layer l, direction d, j as IN_P, in P (m->params, or
 * their autocast casts). */
static cg_tensor *
param(cg_tensor *const *P, const cg_module *m, int l, int d, int j)
{
    return P[(l * ndirs(m) + d) * 4 + j];
}

int
cg__rnn_set_path(cg_module *m, int path)
{
    int status = cg__module_check(m, "rnn");

    if (status == CG_OK && (path < CG__RNN_PATH_AUTO ||
                            path > CG__RNN_PATH_GEMM))
        status = cg__error(CG_EINVAL, "rnn: unknown path %d", path);
    if (status == CG_OK)
        m->path = path;
    return status;
}

int
cg__rnn_set_packed(cg_module *m, int packed)
{
    int status = cg__module_check(m, "rnn");

    if (status == CG_OK)
        m->packed_whh = packed != 0;
    return status;
}

/* Whether layer m forms h W_hh^T with a GEMM: *gemm 0 no, 1 through
 * cg__sgemm, 2 on W_hh packed once per pass. */
static int
use_gemm(cg_module *m, int *gemm)
{
    long min_h = m->gemm_min_h;

    *gemm = m->path == CG__RNN_PATH_GEMM;
    if (m->path == CG__RNN_PATH_AUTO) {
        int set, status = cg__env_long("CLGRAD_RNN_GEMM_MIN_H", 0,
                                       1L << 30, &min_h, &set);

        if (status)
            return status;
        *gemm = min_h > 0 && m->rnn.hidden_size >= min_h;
    }
    if (*gemm) {    /* 2: the step products on a packed W_hh */
        long packed = m->packed_whh;
        int set, status = cg__env_long("CLGRAD_RNN_PACKED_WHH", 0, 1,
                                       &packed, &set);

        if (status)
            return status;
        *gemm = packed ? 2 : 1;
    }
    return CG_OK;
}

/* m's step kernels for storage dtype dt, the GEMM path's forward kernels
 * (gemm 1) or the fused ones; all but m->step are built on first use,
 * with m->step's tuning. */
static int
step_for(cg_module *m, cg_dtype dt, int gemm, const cg__rnn_step **out)
{
    cg__rnn_step *s = dt == CG_F32 ? (gemm ? &m->gstep : &m->step)
                                   : &m->hstep[dt == CG_BF16][gemm != 0];
    cg__rnn_tune tune;
    int status;

    *out = s;
    if (s->ctx)
        return CG_OK;
    tune = m->step.tune;
    tune.hproj = gemm != 0;
    status = cg__rnn_step_init_dt(s, m->ctx, m->step.cell, &tune, dt);
    if (status)
        memset(s, 0, sizeof *s);
    return status;
}

/* Builds m's step kernels with the tuning in force for its cell and
 * hidden size, and takes the path threshold. */
static int
rnn_tuning(cg_module *m, cg_context *ctx, cg__rnn_cell cell)
{
    static const char *const kernel[] = { "rnn.rnn", "rnn.rnn", "rnn.lstm",
                                          "rnn.gru" };
    const cg_tuning_entry *e;
    cg__rnn_tune tune = { 0, 0, 0, 0 };
    long v;

    e = cg__tuning_find_h(ctx, kernel[cell], m->rnn.hidden_size);
    if (e) {
        if (cg__tuning_param(e, "VW", &v))
            tune.vw = (int)v;
        if (cg__tuning_param(e, "RB", &v))
            tune.rb = (int)v;
        if (cg__tuning_param(e, "WG", &v))
            tune.wg = (int)v;
    }
    m->gemm_min_h = CG__RNN_GEMM_MIN_H;
    m->packed_whh = CG__RNN_PACKED_WHH;
    e = cg__tuning_find_h(ctx, "rnn.path", m->rnn.hidden_size);
    if (e && cg__tuning_param(e, "gemm_min_h", &v))
        m->gemm_min_h = v;
    if (e && cg__tuning_param(e, "packed", &v))
        m->packed_whh = v != 0;
    return cg__rnn_step_init(&m->step, ctx, cell, &tune);
}

cg_module *
cg_rnn_new(cg_context *ctx, const cg_rnn_options *options)
{
    static const char *const pname[4] = { "weight_ih", "weight_hh",
                                          "bias_ih", "bias_hh" };
    cg_rnn_options o;
    cg_module *m;
    int l, d, j, G, D;
    float bound;

    cg__error_clear();
    if (!ctx || !options) {
        cg__error(CG_EINVAL, "%s is NULL", ctx ? "options" : "context");
        return NULL;
    }
    o = *options;
    if (o.num_layers == 0)
        o.num_layers = 1;
    if ((int)o.mode < CG_RNN_TANH || (int)o.mode > CG_GRU) {
        cg__error(CG_EINVAL, "rnn: unknown mode %d", (int)o.mode);
        return NULL;
    }
    if (o.input_size < 1 || o.hidden_size < 1 || o.num_layers < 1) {
        cg__error(CG_EINVAL, "rnn: input_size %d, hidden_size %d and "
                  "num_layers %d must be positive", o.input_size,
                  o.hidden_size, o.num_layers);
        return NULL;
    }
    if (!(o.dropout >= 0.0f && o.dropout < 1.0f)) {
        cg__error(CG_EINVAL, "rnn: dropout %g is not in [0, 1)",
                  (double)o.dropout);
        return NULL;
    }
    D = o.bidirectional ? 2 : 1;
    /* Divided, not multiplied: num_layers * D * 4 overflows an int. */
    if (o.num_layers > CG__MODULE_MAX_PARAMS / (D * 4)) {
        cg__error(CG_EINVAL, "rnn: %d layers%s are more than clgrad "
                  "supports (%d)", o.num_layers,
                  D == 2 ? " in two directions" : "",
                  CG__MODULE_MAX_PARAMS / (4 * D));
        return NULL;
    }
    o.bidirectional = D == 2;
    o.batch_first = o.batch_first != 0;
    m = cg__module_new(ctx, "rnn");
    if (!m)
        return NULL;
    m->rnn = o;
    if (rnn_tuning(m, ctx, cg__rnn_cell_of(o.mode))) {
        cg__module_unref(m);
        return NULL;
    }
    G = m->step.gates;
    bound = (float)(1.0 / sqrt((double)o.hidden_size));
    for (l = 0; l < o.num_layers; l++)
        for (d = 0; d < D; d++)
            for (j = 0; j < 4; j++) {
                int64_t shape[2];
                char name[64];

                shape[0] = (int64_t)G * o.hidden_size;
                shape[1] = j == 0 ? (l ? (int64_t)D * o.hidden_size
                                         : o.input_size)
                                  : o.hidden_size;
                snprintf(name, sizeof name, "%s_l%d%s", pname[j], l,
                         d ? "_reverse" : "");
                if (cg__module_add_param(m, name, j < 2 ? 2 : 1, shape,
                                         bound)) {
                    cg__module_unref(m);
                    return NULL;
                }
            }
    return m;
}

/* ------------------------------------------------------------------------
 * Small helpers over device tensors
 * ------------------------------------------------------------------------ */

static cg_tensor *
empty1(cg_context *ctx, int64_t n)
{
    return cg__tensor_empty(ctx, CG_F32, 1, &n);
}

/* The same of dtype dt. */
static cg_tensor *
empty_dt(cg_context *ctx, cg_dtype dt, int64_t n)
{
    return cg__tensor_empty(ctx, dt, 1, &n);
}

/* c = alpha op(a) op(b) + beta c, a and b of dtype ab, c of cd (ab's, or
 * float32 for 16-bit operands): float32 through cg__sgemm as before,
 * 16-bit through cg__gemm_dt (float32 sums). */
static int
rnn_gemm(cg_context *ctx, cg_dtype ab, cg_dtype cd, int ta, int tb,
         size_t m, size_t n, size_t k, float alpha, cg__mat a, cg__mat b,
         float beta, cg__mat c)
{
    if (ab == CG_F32)
        return cg__sgemm(ctx, ta, tb, m, n, k, alpha, a, b, beta, c);
    return cg__gemm_dt(ctx, ab, cd, ta, tb, m, n, k, alpha, a, 0, b, 0,
                       beta, c, 0, 1, NULL, NULL);
}

/* Elements of the operand with T*B rows that one 16-bit product over
 * those rows reads at most: cg__gemm_dt may read 16-bit operands through
 * float32 copies (gemm.c's widen rule) or packed float32 panels, and a
 * copy of a whole [T*B, G*H] gate-gradient array is twice the array (the
 * char-LSTM's, 2x512 B32 T100: 26 MB a layer, which raised the step's
 * peak memory by 50 MB).  Parts of 2^19 elements keep those at 2 MB (the
 * bfloat16 char-LSTM step's peak: 137.9 MB with parts of 2^20, 134.8 with
 * 2^19, against float32's 225.8); each part is still a product of at
 * least 2^19 * H multiply-adds.  The float32 input projection of 16-bit
 * layers is made in parts of this size too.  $CLGRAD_RNN_PART16 sets
 * another size (tests). */
#define PART16 (1L << 19)

static int
part16(long *part)
{
    int set;

    *part = PART16;
    return cg__env_long("CLGRAD_RNN_PART16", 1, 1L << 30, part, &set);
}

/* rnn_gemm for 16-bit operands in parts of the T*B dimension: m (the rows
 * of a and c; ta 0) or, for ta 1, k (the rows of a and b, summed: later
 * parts add with beta 1, so c should then be float32).  width: the
 * elements of a row of a.  With ta 0, b (the weights, k x n) is taken n
 * columns at a time so that it too is at most PART16 elements: the packed
 * kernels copy it whole into float32 panels for every product (W_ih of a
 * 512-unit LSTM: 4 MB, which the bfloat16 char-LSTM step's input
 * gradient parts would add at its peak). */
static int
rnn_gemm_parts(cg_context *ctx, cg_dtype ab, cg_dtype cd, int ta, int tb,
               size_t m, size_t n, size_t k, float alpha, cg__mat a,
               cg__mat b, float beta, cg__mat c)
{
    size_t rows = ta ? k : m, width = ta ? m : k, step, cols, r, j;
    long part;
    int status = CG_OK;

    if (ab == CG_F32)
        return rnn_gemm(ctx, ab, cd, ta, tb, m, n, k, alpha, a, b, beta, c);
    if ((status = part16(&part)))
        return status;
    step = width < (size_t)part ? (size_t)part / width : 1;
    cols = ta ? n : k < (size_t)part ? (size_t)part / k : 1;
    if (step >= rows && cols >= n)
        return rnn_gemm(ctx, ab, cd, ta, tb, m, n, k, alpha, a, b, beta, c);
    for (r = 0; r < rows && status == CG_OK; r += step) {
        size_t len = rows - r < step ? rows - r : step;
        cg__mat ap = a, bp = b, cp = c;

        ap.off += r * a.ld;
        if (ta) {       /* k: b's rows (tb 0) */
            bp.off += r * b.ld;
            status = rnn_gemm(ctx, ab, cd, ta, tb, m, n, len, alpha, ap, bp,
                              r ? 1.0f : beta, c);
            continue;
        }
        for (j = 0; j < n && status == CG_OK; j += cols) {  /* m: c's rows */
            size_t w = n - j < cols ? n - j : cols;

            bp.off = b.off + (tb ? j * b.ld : j);
            cp.off = c.off + r * c.ld + j;
            status = rnn_gemm(ctx, ab, cd, ta, tb, len, w, k, alpha, ap, bp,
                              beta, cp);
        }
    }
    return status;
}

/* dst (any layout) = src (same shape, any layout), converted to dst's
 * dtype when src's differs (float32 <-> 16-bit, rounded once). */
static int
copy_cast(cg_tensor *dst, const cg_tensor *src)
{
    cg_tensor *c;
    int status;

    if (src->dtype == dst->dtype)
        return cg__copy_into(dst, src);
    if (!(c = cg__cast((cg_tensor *)src, dst->dtype)))
        return cg__last_status();
    status = cg__copy_into(dst, c);
    cg_tensor_free(c);
    return status;
}

/* A contiguous [rows, cols] view of t's storage at element off (from the
 * start of the storage). */
static cg_tensor *
view2(const cg_tensor *t, int64_t off, int64_t rows, int64_t cols)
{
    int64_t shape[2] = { rows, cols }, strides[2] = { cols, 1 };

    return cg__tensor_view(t, 2, shape, strides, off);
}

/* dst's [B, H] slot at element off = src (a [B, H] tensor of any layout
 * and floating dtype, converted to dst's), or zeros if src is NULL. */
static int
set_state(cg_tensor *dst, int64_t off, int B, int H, const cg_tensor *src)
{
    cg_tensor *v = view2(dst, off, B, H);
    int status;

    if (!v)
        return cg__last_status();
    status = src ? copy_cast(v, src) : cg__fill(v, 0.0f);
    cg_tensor_free(v);
    return status;
}

/* t[d] of a [D, B, H] tensor t (any layout) as a [B, H] view. */
static cg_tensor *
dir_slice(const cg_tensor *t, int d)
{
    return cg__tensor_view(t, 2, t->shape + 1, t->strides + 1,
                           t->offset + d * t->strides[0]);
}

/* dst's [B, H] slot at element off = t[d] of a [D, B, H] tensor t (any
 * layout), or zeros if t is NULL. */
static int
set_state_dir(cg_tensor *dst, int64_t off, int B, int H, const cg_tensor *t,
              int d)
{
    cg_tensor *v = NULL;
    int status;

    if (t && !(v = dir_slice(t, d)))
        return cg__last_status();
    status = set_state(dst, off, B, H, v);
    cg_tensor_free(v);
    return status;
}

/* dst's [B, H] slot at element doff = src's dense [B, H] slot at soff. */
static int
copy_slot(cg_tensor *dst, int64_t doff, const cg_tensor *src, int64_t soff,
          int B, int H)
{
    cg_tensor *v = view2(src, soff, B, H);
    int status;

    if (!v)
        return cg__last_status();
    status = set_state(dst, doff, B, H, v);
    cg_tensor_free(v);
    return status;
}

static cg__rnn_buf
at(const cg_tensor *t, int64_t off)
{
    cg__rnn_buf b;

    b.mem = t ? cg__tensor_mem(t) : NULL;
    b.off = t ? (cl_int)(t->offset + off) : 0;
    return b;
}

static cg__mat
mat(const cg_tensor *t, int64_t off, int64_t ld)
{
    cg__mat a;

    a.mem = cg__tensor_mem(t);
    a.off = (size_t)(t->offset + off);
    a.ld = (size_t)ld;
    return a;
}

/* The GEMM path's step product c = a w + beta c: a the [rows, cols]
 * matrix at element off of t's storage (h_{t-1}, or a step's gate
 * gradients), w [cols, n] contiguous and float32 (16-bit layers: the
 * recurrent weights converted once per pass, not in every step's
 * product), c [rows, n] float32.  A 16-bit a is converted first: both
 * conversions are exact, so the sums are those of the 16-bit product.  On the 2-core PoCL
 * machine, GFLOP/s of the char-LSTM's step products in place / float32:
 * 32x2048x512 NN bfloat16 44/80, float16 25/80; 32x512x2048 NN bfloat16
 * 39/87, float16 38/87 (tests/bench_gemm16). */
static int
step_product(cg_context *ctx, const cg_tensor *t, int64_t off, int64_t rows,
             int64_t cols, const cg_tensor *w, int64_t n, float beta,
             cg_tensor *c)
{
    cg_tensor *v, *a;
    int status;

    if (t->dtype == CG_F32)
        return cg__sgemm(ctx, 0, 0, (size_t)rows, (size_t)n, (size_t)cols,
                         1.0f, mat(t, off, cols), mat(w, 0, n), beta,
                         mat(c, 0, n));
    v = view2(t, t->offset + off, rows, cols);
    a = v ? cg__cast(v, CG_F32) : NULL;
    status = a ? cg__sgemm(ctx, 0, 0, (size_t)rows, (size_t)n, (size_t)cols,
                           1.0f, mat(a, 0, cols), mat(w, 0, n), beta,
                           mat(c, 0, n))
               : cg__last_status();
    cg_tensor_free(a);
    cg_tensor_free(v);
    return status;
}

/* ------------------------------------------------------------------------
 * One layer, both directions
 * ------------------------------------------------------------------------ */

typedef struct layer_dims {
    int T, B, I, H, G, D;
} layer_dims;

static int
layer_backward(cg__node *n, cg_tensor *gy, cg_tensor **gin);
static int
layer_backward_graph(cg__node *n, cg_tensor *gy, cg_tensor **gin);

/* Runs direction d's steps with step's kernels.  xproj [T*B, D*G*H]
 * (float32), or NULL: the projection is made here, tc steps at a time
 * (in processing order) into a float32 [tc*B, G*H] buffer, from xd [T*B,
 * I] and w_ih, direction d's.  hs, cs: T + 1 state slots; sv: T slots of
 * 4H per row; y [T, B, D*H].  With hproj ([B, G*H], float32) each step is
 * a GEMM into hproj and the GEMM-path cell kernel, else one fused launch
 * reading the packed wt. */
static int
run_forward(cg_module *m, const cg__rnn_step *step, const layer_dims *k,
            int d, cl_mem lengths, const cg_tensor *wt,
            const cg_tensor *xproj, const cg_tensor *xd,
            const cg_tensor *w_ih, int tc, cg_tensor *w_hh,
            cg_tensor *b_ih, cg_tensor *b_hh, cg_tensor *hs, cg_tensor *cs,
            cg_tensor *sv, cg_tensor *y, cg_tensor *hproj, int packed)
{
    int64_t bh = (int64_t)k->B * k->H, DGH = (int64_t)k->D * k->G * k->H;
    int64_t DH = (int64_t)k->D * k->H, GH = (int64_t)k->G * k->H;
    int64_t lo = 0;
    cg_tensor *whh_t = NULL, *xc = NULL;
    cg__packed_b pw = { NULL, 0, 0, 0 };
    int s, status = CG_OK;

    if (!xproj && !(xc = empty1(m->ctx, (int64_t)tc * k->B * GH)))
        return cg__last_status();

    /* The GEMM path: W_hh^T [H, G*H] once, packed (its panels converted
     * to float32), or else contiguous, so that each step is an NN product
     * (an NT one might pack B^T again at every step), in float32
     * (step_product). */
    if (hproj && packed) {
        status = cg__gemm_pack_b(m->ctx, w_hh->dtype, 1, (size_t)GH,
                                 (size_t)k->H, mat(w_hh, 0, k->H), &pw);
        if (status) {
            cg_tensor_free(xc);
            return status;
        }
    } else if (hproj) {
        int64_t shape[2] = { k->H, GH }, strides[2] = { 1, k->H };
        cg_tensor *v = cg__tensor_view(w_hh, 2, shape, strides,
                                       w_hh->offset);

        whh_t = !v ? NULL : w_hh->dtype == CG_F32 ? cg__copy_contiguous(v)
                                                 : cg__cast(v, CG_F32);
        cg_tensor_free(v);
        if (!whh_t) {
            cg_tensor_free(xc);
            return cg__last_status();
        }
    }

    for (s = 0; s < k->T && status == CG_OK; s++) {
        int t = d ? k->T - 1 - s : s;
        int prev = d ? t + 1 : t, next = d ? t : t + 1;
        cg__rnn_fwd_args f;

        memset(&f, 0, sizeof f);
        f.B = k->B;
        f.H = k->H;
        f.t = t;
        f.lengths = lengths;
        if (xc && s % tc == 0) {
            int n = k->T - s < tc ? k->T - s : tc;

            lo = d ? k->T - s - n : s;
            status = rnn_gemm(m->ctx, xd->dtype, CG_F32, 0, 1,
                              (size_t)n * k->B, (size_t)GH, (size_t)k->I,
                              1.0f, mat(xd, lo * k->B * k->I, k->I),
                              mat(w_ih, 0, k->I), 0.0f, mat(xc, 0, GH));
            if (status)
                break;
        }
        if (hproj && packed) {
            status = cg__gemm_packed_b(m->ctx, hs->dtype, CG_F32, 0,
                                       (size_t)k->B, 1.0f,
                                       mat(hs, prev * bh, k->H), &pw, 0.0f,
                                       mat(hproj, 0, GH));
            if (status)
                break;
        } else if (hproj) {
            status = step_product(m->ctx, hs, prev * bh, k->B, k->H,
                                  whh_t, GH, 0.0f, hproj);
            if (status)
                break;
        }
        f.whh_t = cg__tensor_mem(hproj ? hproj : wt);
        if (xc) {
            f.xproj.mem = cg__tensor_mem(xc);
            f.xproj.off = (cl_int)((t - lo) * k->B * GH);
            f.xproj.ld = (cl_int)GH;
        } else {
            f.xproj.mem = cg__tensor_mem(xproj);
            f.xproj.off = (cl_int)(xproj->offset + t * k->B * DGH +
                                   (int64_t)d * k->G * k->H);
            f.xproj.ld = (cl_int)DGH;
        }
        f.b_ih = at(b_ih, 0);
        f.b_hh = at(b_hh, 0);
        f.h_prev = at(hs, prev * bh);
        f.h_next = at(hs, next * bh);
        if (cs) {
            f.c_prev = at(cs, prev * bh);
            f.c_next = at(cs, next * bh);
        }
        f.y.mem = cg__tensor_mem(y);
        f.y.off = (cl_int)(y->offset + t * k->B * DH + (int64_t)d * k->H);
        f.y.ld = (cl_int)DH;
        if (sv)
            f.saved = at(sv, t * bh * 4);
        status = cg__rnn_forward_step(step, &f);
    }
    cg__packed_b_free(&pw);
    cg_tensor_free(whh_t);
    cg_tensor_free(xc);
    return status;
}

/* The input projection of every step of layer l, both directions, in one
 * GEMM: *xproj [T*B, D*G*H] (float32) = xd W_ih^T, the directions' W_ih
 * stacked in *wcat (the step kernels add the biases).  The caller frees
 * both, also on failure. */
static int
project_inputs(cg_module *m, cg_tensor *const *P, int l, const layer_dims *k,
               const cg_tensor *xd, cg_tensor **xproj, cg_tensor **wcat)
{
    cg_context *ctx = m->ctx;
    cg_dtype dt = xd->dtype;
    int64_t TB = (int64_t)k->T * k->B, GH = (int64_t)k->G * k->H;
    int d, status = CG_OK;

    if (!(*xproj = empty1(ctx, TB * k->D * GH)))
        return cg__last_status();
    if (k->D == 1) {
        *wcat = cg_tensor_ref(param(P, m, l, 0, 0));
    } else {
        if (!(*wcat = empty_dt(ctx, dt, k->D * GH * k->I)))
            return cg__last_status();
        for (d = 0; d < k->D && status == CG_OK; d++) {
            cg_tensor *v = view2(*wcat, d * GH * k->I, GH, k->I);

            status = v ? cg__copy_into(v, param(P, m, l, d, 0))
                       : cg__last_status();
            cg_tensor_free(v);
        }
        if (status)
            return status;
    }
    return rnn_gemm(ctx, dt, CG_F32, 0, 1, (size_t)TB, (size_t)(k->D * GH),
                    (size_t)k->I, 1.0f, mat(xd, 0, k->I),
                    mat(*wcat, 0, k->I), 0.0f, mat(*xproj, 0, k->D * GH));
}

/* ------------------------------------------------------------------------
 * Forward mode: the tangent recurrence
 * ------------------------------------------------------------------------ */

/* What layer_forward leaves for layer_jvp: the primal's buffers of one
 * layer (both directions). */
typedef struct layer_primal {
    cg_tensor *xd, *wcat, *len;
    cg_tensor *hs[2], *cs[2], *sv[2], *wt[2];
} layer_primal;

/* A dense tangent of dtype dt (a new reference), or NULL for none; *status
 * set on failure. */
static cg_tensor *
dense_tangent(cg_tensor *t, cg_dtype dt, int *status)
{
    cg_tensor *c, *d;

    if (!t)
        return NULL;
    c = t->dtype == dt ? cg_tensor_ref(t) : cg__cast(t, dt);
    d = c ? cg__dense(c) : NULL;
    cg_tensor_free(c);
    if (!d)
        *status = cg__last_status();
    return d;
}

/* The tangents of layer l's outputs y, hn and cn (*ty, *thn, *tcn: new
 * tensors; tcn LSTM only) from its inputs' tangents tin[] (as the node's
 * inputs; NULL: zero), after the primal's steps:
 *   1. the tangent of the input projection, float32 [T*B, D*G*H]:
 *      x' W_ih^T (one GEMM, the directions' W_ih stacked as forward)
 *      + x W_ih'^T, and h_{t-1} W_hh'^T over all steps at once (the
 *      states that multiply W_hh are one [T*B, H] matrix; GRU: into an
 *      array of its own, its n block being multiplied by r);
 *   2. per direction, one tangent step launch per time step (kernels/
 *      rnn.cl's lstm_jvp, gru_jvp, rnn_jvp) on two ping-pong state slots,
 *      reading the primal's saved gates; on the GEMM path a GEMM per step
 *      forms h'_{t-1} W_hh^T first, as the primal's steps do. */
static int
layer_jvp(cg_module *m, const layer_dims *k, int gemm,
          const cg__rnn_step *cstep, const layer_primal *pr,
          cg_tensor *const *in, cg_tensor *const *tin, cg_tensor **ty,
          cg_tensor **thn, cg_tensor **tcn)
{
    cg_context *ctx = m->ctx;
    cg_dtype dt = pr->xd->dtype;
    /* The module's own step (not const): its tangent kernel is built on
     * first use. */
    cg__rnn_step *step = (cg__rnn_step *)cstep;
    int lstm = k->G == 4, gru = m->rnn.mode == CG_GRU, d, j, s;
    int64_t TB = (int64_t)k->T * k->B, GH = (int64_t)k->G * k->H;
    int64_t DGH = k->D * GH, DH = (int64_t)k->D * k->H;
    int64_t bh = (int64_t)k->B * k->H, shape[3];
    cg_tensor *tx = NULL, *px = NULL, *ph = NULL, *hproj = NULL;
    cg_tensor *whh_t = NULL, *th = NULL, *tc = NULL;
    cg_tensor *tp[2][4] = { { NULL } }, *th0 = NULL, *tc0 = NULL;
    cg_tensor *y = NULL, *hn = NULL, *cn = NULL;
    int status = CG_OK;

    tx = dense_tangent(tin[IN_X], dt, &status);
    for (d = 0; d < k->D && status == CG_OK; d++)
        for (j = 0; j < 4 && status == CG_OK; j++)
            tp[d][j] = dense_tangent(tin[IN_P(d, j)], dt, &status);
    if (status)
        goto out;
    th0 = tin[IN_H0];
    tc0 = tin[IN_C0];

    /* 1. The projections' tangents. */
    if (!(px = empty1(ctx, TB * DGH))) {
        status = cg__last_status();
        goto out;
    }
    status = tx ? rnn_gemm_parts(ctx, dt, CG_F32, 0, 1, (size_t)TB,
                                 (size_t)DGH, (size_t)k->I, 1.0f,
                                 mat(tx, 0, k->I), mat(pr->wcat, 0, k->I),
                                 0.0f, mat(px, 0, DGH))
                : cg__fill(px, 0.0f);
    if (gru && status == CG_OK && (tp[0][1] || tp[1][1]) &&
        !(ph = empty1(ctx, k->D * TB * GH)))
        status = cg__last_status();
    for (d = 0; d < k->D && status == CG_OK; d++) {
        if (tp[d][0])
            status = rnn_gemm_parts(ctx, dt, CG_F32, 0, 1, (size_t)TB,
                                    (size_t)GH, (size_t)k->I, 1.0f,
                                    mat(pr->xd, 0, k->I),
                                    mat(tp[d][0], 0, k->I), 1.0f,
                                    mat(px, d * GH, DGH));
        if (status == CG_OK && tp[d][1])
            status = rnn_gemm_parts(ctx, dt, CG_F32, 0, 1, (size_t)TB,
                                    (size_t)GH, (size_t)k->H, 1.0f,
                                    mat(pr->hs[d], d ? bh : 0, k->H),
                                    mat(tp[d][1], 0, k->H),
                                    gru ? 0.0f : 1.0f,
                                    gru ? mat(ph, d * TB * GH, GH)
                                        : mat(px, d * GH, DGH));
    }
    if (status)
        goto out;

    /* 2. The tangent steps. */
    shape[0] = k->T;
    shape[1] = k->B;
    shape[2] = DH;
    y = cg__tensor_empty(ctx, dt, 3, shape);
    shape[0] = k->D;
    shape[2] = k->H;
    hn = cg__tensor_empty(ctx, dt, 3, shape);
    if (lstm)
        cn = cg__tensor_empty(ctx, dt, 3, shape);
    th = empty_dt(ctx, dt, 2 * bh);
    if (lstm)
        tc = empty1(ctx, 2 * bh);
    if (gemm)
        hproj = empty1(ctx, k->B * GH);
    if (!y || !hn || (lstm && (!cn || !tc)) || !th || (gemm && !hproj)) {
        status = cg__last_status();
        goto out;
    }
    for (d = 0; d < k->D && status == CG_OK; d++) {
        cg_tensor *whh = in[IN_P(d, 1)];

        status = set_state_dir(th, 0, k->B, k->H, th0, d);
        if (status == CG_OK && lstm)
            status = set_state_dir(tc, 0, k->B, k->H, tc0, d);
        if (status == CG_OK && gemm) {
            int64_t ws[2] = { k->H, GH }, wst[2] = { 1, k->H };
            cg_tensor *v = cg__tensor_view(whh, 2, ws, wst, whh->offset);

            cg_tensor_free(whh_t);
            whh_t = v ? cg__copy_contiguous(v) : NULL;
            cg_tensor_free(v);
            if (!whh_t)
                status = cg__last_status();
        }
        for (s = 0; s < k->T && status == CG_OK; s++) {
            int t = d ? k->T - 1 - s : s;
            int prev = d ? t + 1 : t, cur = d ? t : t + 1;
            int64_t a = (s & 1) * bh, b = (~s & 1) * bh;
            cg__rnn_jvp_args ja;
            cg__rnn_fwd_args *f = &ja.f;

            if (gemm)
                status = rnn_gemm(ctx, dt, CG_F32, 0, 0, (size_t)k->B,
                                  (size_t)GH, (size_t)k->H, 1.0f,
                                  mat(th, a, k->H), mat(whh_t, 0, GH),
                                  0.0f, mat(hproj, 0, GH));
            if (status)
                break;
            memset(&ja, 0, sizeof ja);
            f->B = k->B;
            f->H = k->H;
            f->t = t;
            f->lengths = pr->len ? cg__tensor_mem(pr->len) : NULL;
            f->whh_t = cg__tensor_mem(gemm ? hproj : pr->wt[d]);
            f->xproj.mem = cg__tensor_mem(px);
            f->xproj.off = (cl_int)(px->offset + t * k->B * DGH + d * GH);
            f->xproj.ld = (cl_int)DGH;
            f->b_ih = at(tp[d][2], 0);
            f->b_hh = at(tp[d][3], 0);
            f->h_prev = at(th, a);
            f->h_next = at(th, b);
            if (tc) {
                f->c_prev = at(tc, a);
                f->c_next = at(tc, b);
                ja.pc_prev = at(pr->cs[d], prev * bh);
                ja.pc_t = at(pr->cs[d], cur * bh);
            }
            f->y.mem = cg__tensor_mem(y);
            f->y.off = (cl_int)(y->offset + t * k->B * DH +
                                (int64_t)d * k->H);
            f->y.ld = (cl_int)DH;
            if (pr->sv[d])
                f->saved = at(pr->sv[d], t * bh * 4);
            ja.ph_prev = at(pr->hs[d], prev * bh);
            ja.ph_t = at(pr->hs[d], cur * bh);
            if (ph && tp[d][1])
                ja.ph = at(ph, d * TB * GH + t * k->B * GH);
            status = cg__rnn_jvp_step(step, &ja);
        }
        /* The final states: each row's last slot written (T steps end in
         * slot T % 2). */
        if (status == CG_OK)
            status = copy_slot(hn, d * bh, th, (k->T & 1) * bh, k->B, k->H);
        if (status == CG_OK && lstm)
            status = copy_slot(cn, d * bh, tc, (k->T & 1) * bh, k->B, k->H);
    }
out:
    cg_tensor_free(tx);
    for (d = 0; d < 2; d++)
        for (j = 0; j < 4; j++)
            cg_tensor_free(tp[d][j]);
    cg_tensor_free(px);
    cg_tensor_free(ph);
    cg_tensor_free(hproj);
    cg_tensor_free(whh_t);
    cg_tensor_free(th);
    cg_tensor_free(tc);
    if (status) {
        cg_tensor_free(y);
        cg_tensor_free(hn);
        cg_tensor_free(cn);
        return status;
    }
    *ty = y;
    *thn = hn;
    *tcn = cn;
    return CG_OK;
}

/* Forward of layer l over x [T, B, I] (any layout) with initial states h0,
 * c0 ([D, B, H] views or NULL) and the parameters P (as m->params), all of
 * x's dtype.  Makes *y [T, B, D*H], *hn and *cn ([D, B, H]; cn only for
 * LSTM), of that dtype, and records one node when needed. */
static int
layer_forward(cg_module *m, cg_tensor *const *P, int l, cg_tensor *x,
              cg_tensor *h0, cg_tensor *c0, cg_tensor *len,
              cg_tensor **y_out, cg_tensor **hn_out, cg_tensor **cn_out)
{
    cg_context *ctx = m->ctx;
    cg_dtype dt = x->dtype;
    const cg__rnn_step *step;
    layer_dims k;
    int lstm = m->rnn.mode == CG_LSTM, d, j, status = CG_OK;
    int64_t TB, GH, bh, hp, shape[3];
    cg_tensor *xd = NULL, *xproj = NULL, *wcat = NULL, *y = NULL;
    cg_tensor *hn = NULL, *cn = NULL;
    cg_tensor *hs[2] = { NULL }, *cs[2] = { NULL }, *sv[2] = { NULL };
    cg_tensor *wt[2] = { NULL }, *hproj = NULL;
    cg_tensor *inputs[3 + 8] = { NULL }, *tin[3 + 8] = { NULL };
    cg_tensor *ty = NULL, *thn = NULL, *tcn = NULL;
    cg__node *node = NULL;
    int gemm, done = 0, fw, tc = 0;
    long part;

    k.T = (int)x->shape[0];
    k.B = (int)x->shape[1];
    k.I = (int)x->shape[2];
    k.H = m->rnn.hidden_size;
    k.G = m->step.gates;
    k.D = ndirs(m);
    TB = (int64_t)k.T * k.B;
    GH = (int64_t)k.G * k.H;
    bh = (int64_t)k.B * k.H;
    hp = cg__rnn_hpad(&m->step, k.H);

    if ((status = use_gemm(m, &gemm)) ||
        (status = step_for(m, dt, gemm, &step)))
        return status;
    inputs[IN_X] = x;
    inputs[IN_H0] = h0;
    inputs[IN_C0] = c0;
    for (d = 0; d < k.D; d++)
        for (j = 0; j < 4; j++)
            inputs[IN_P(d, j)] = param(P, m, l, d, j);
    /* Forward mode: the inputs' tangents, computed now if pending. */
    fw = cg__fw_wanted(3 + 4 * k.D, inputs);
    for (j = 0; fw && j < 3 + 4 * k.D; j++)
        if (inputs[j] && !(tin[j] = cg__fw_input_tangent(inputs[j],
                                                          &status)) &&
            status)
            return status;
    /* 1. The input projection: one GEMM (the step kernels add the
     * biases).  16-bit storage (no tangents wanted): made by run_forward a
     * part of PART16 elements (tc steps) at a time, so that its float32
     * sums (the char-LSTM's: 26 MB a layer, at the bfloat16 step's peak)
     * do not outweigh the 16-bit states. */
    xd = cg__dense(x);
    if (!xd || (status = part16(&part)))
        goto fail;
    if (dt != CG_F32 && !fw && TB * GH > part) {
        int64_t steps = part / ((int64_t)k.B * GH);

        tc = steps > 1 ? (int)steps : 1;
    } else if ((status = project_inputs(m, P, l, &k, xd, &xproj, &wcat))) {
        goto fail;
    }

    /* 2. The steps. */
    shape[0] = k.T;
    shape[1] = k.B;
    shape[2] = (int64_t)k.D * k.H;
    y = cg__tensor_empty(ctx, dt, 3, shape);
    shape[0] = k.D;
    shape[2] = k.H;
    hn = cg__tensor_empty(ctx, dt, 3, shape);
    if (lstm)
        cn = cg__tensor_empty(ctx, dt, 3, shape);
    if (!y || !hn || (lstm && !cn))
        goto fail;
    for (d = 0; d < k.D; d++) {
        int first = d ? k.T : 0, last = d ? 0 : k.T;

        hs[d] = empty_dt(ctx, dt, (k.T + 1) * bh);
        if (lstm)
            cs[d] = empty1(ctx, (k.T + 1) * bh);
        if (k.G > 1)
            sv[d] = empty_dt(ctx, dt, TB * 4 * k.H);
        if (gemm && !hproj)
            hproj = empty1(ctx, (int64_t)k.B * GH);
        else if (!gemm)
            wt[d] = empty_dt(ctx, dt, (int64_t)k.H * k.G * hp);
        if (!hs[d] || (lstm && !cs[d]) || (k.G > 1 && !sv[d]) ||
            (gemm ? !hproj : !wt[d]))
            goto fail;
        if (!gemm)
            status = cg__rnn_pack_whh(step, at(param(P, m, l, d, 1), 0),
                                      k.H, cg__tensor_mem(wt[d]), NULL);
        if (status == CG_OK)
            status = set_state_dir(hs[d], first * bh, k.B, k.H, h0, d);
        if (status == CG_OK && lstm)
            status = set_state_dir(cs[d], first * bh, k.B, k.H, c0, d);
        if (status == CG_OK)
            status = run_forward(m, step, &k, d,
                                 len ? cg__tensor_mem(len) : NULL, wt[d],
                                 xproj, xd, param(P, m, l, d, 0), tc,
                                 param(P, m, l, d, 1),
                                 param(P, m, l, d, 2), param(P, m, l, d, 3),
                                 hs[d], cs[d], sv[d], y, hproj,
                                 gemm == 2);
        /* The final states: each row stopped changing at its own last
         * step, so the last slot written holds it. */
        if (status == CG_OK)
            status = copy_slot(hn, d * bh, hs[d], last * bh, k.B, k.H);
        if (status == CG_OK && lstm)
            status = copy_slot(cn, d * bh, cs[d], last * bh, k.B, k.H);
        if (status)
            goto fail;
    }

    /* Forward mode: the outputs' tangents, from the buffers at hand. */
    if (fw) {
        layer_primal pr;

        memset(&pr, 0, sizeof pr);
        pr.xd = xd;
        pr.wcat = wcat;
        pr.len = len;
        for (d = 0; d < k.D; d++) {
            pr.hs[d] = hs[d];
            pr.cs[d] = cs[d];
            pr.sv[d] = sv[d];
            pr.wt[d] = wt[d];
        }
        status = layer_jvp(m, &k, gemm, step, &pr, inputs, tin, &ty, &thn,
                           &tcn);
        if (status)
            goto fail;
    }

    /* 3. The node (forward mode: the reverse graph's alone, the tangents
     * being given here). */
    node = fw ? cg__fw_record_own(y, "rnn_layer", layer_backward,
                                  3 + 4 * k.D, inputs, &status)
              : cg__record(y, "rnn_layer", layer_backward, 3 + 4 * k.D,
                           inputs, &status);
    if (node) {
        node->i[0] = l;
        node->i[1] = k.T;
        node->i[2] = k.B;
        node->i[3] = k.I;
        node->i[4] = gemm;
        node->keep = cg__module_ref(m);
        node->keep_unref = (void (*)(void *))cg__module_unref;
        /* create_graph's composite (not for variable lengths). */
        node->backward_graph = len ? NULL : layer_backward_graph;
        status = cg__node_save(node, SV_X, xd);
        if (status == CG_OK && len)
            status = cg__node_save(node, SV_LEN, len);
        for (d = 0; d < k.D && status == CG_OK; d++) {
            status = cg__node_save(node, SV_HS(d), hs[d]);
            if (status == CG_OK && cs[d])
                status = cg__node_save(node, SV_CS(d), cs[d]);
            if (status == CG_OK && sv[d])
                status = cg__node_save(node, SV_G(d), sv[d]);
        }
        cg__record_extra(node, hn, 1);
        if (cn)
            cg__record_extra(node, cn, 2);
    }
    if (status)
        goto fail;
    if (fw) {
        cg__fw_attach(y, ty);
        cg__fw_attach(hn, thn);
        if (cn)
            cg__fw_attach(cn, tcn);
        ty = thn = tcn = NULL;
    }
    *y_out = y;
    *hn_out = hn;
    *cn_out = cn;
    y = hn = cn = NULL;
    done = 1;
fail:
    /* A NULL from an allocation or a copy jumped here with status OK. */
    if (status == CG_OK && !done)
        status = cg__last_status();
    cg_tensor_free(xd);
    cg_tensor_free(xproj);
    cg_tensor_free(wcat);
    cg_tensor_free(hproj);
    cg_tensor_free(y);
    cg_tensor_free(hn);
    cg_tensor_free(cn);
    cg_tensor_free(ty);
    cg_tensor_free(thn);
    cg_tensor_free(tcn);
    for (d = 0; d < 2; d++) {
        cg_tensor_free(hs[d]);
        cg_tensor_free(cs[d]);
        cg_tensor_free(sv[d]);
        cg_tensor_free(wt[d]);
    }
    return status;
}

/* gin[p], a weight's gradient [rows, cols] = a^T b over TB rows (a, b and
 * the gradient of the parameter's dtype): float32, added by the GEMM
 * itself (beta 1) into what has collected for parameter p
 * (cg__grad_into), else written into a new tensor (beta 0); 16-bit, a new
 * tensor. */
static int
weight_grad(cg__node *n, int p, int64_t rows, int64_t cols, int64_t TB,
            cg__mat a, cg__mat b, cg_tensor **gin)
{
    cg_dtype dt = n->inputs[p]->dtype;
    cg_context *ctx = n->inputs[p]->ctx;
    cg_tensor *acc = dt == CG_F32 ? cg__grad_into(n, p) : NULL;
    int64_t shape[2] = { rows, cols };
    cg_tensor *g = acc ? cg_tensor_ref(acc)
                       : cg__tensor_empty(ctx, CG_F32, 2, shape);
    int status;

    /* 16-bit: summed over the T*B rows in parts into a float32 g, rounded
     * once here; the engine adds it to what has collected. */
    status = g ? rnn_gemm_parts(ctx, dt, CG_F32, 1, 0, (size_t)rows,
                                (size_t)cols, (size_t)TB, 1.0f, a, b,
                                acc ? 1.0f : 0.0f, mat(g, 0, cols))
               : cg__last_status();
    if (status == CG_OK && dt != CG_F32) {
        cg_tensor *r = cg__cast(g, dt);

        cg_tensor_free(g);
        if (!(g = r))
            status = cg__last_status();
    }
    gin[p] = g;
    return status;
}

/* Backward of one direction: the step launches, then the gradients of
 * its parameters, of h0 / c0 (into gh0[d], gc0[d]) and its part of dx
 * (16-bit operands: dx may be float32, summing both directions). */
static int
direction_backward(cg__node *n, const layer_dims *k, int d, cg_tensor *gy,
                   cg_tensor **gin, cg_tensor *dx, cg_tensor *gh0,
                   cg_tensor *gc0)
{
    cg_module *m = n->keep;
    cg_context *ctx = m->ctx;
    int lstm = k->G == 4, gru = m->rnn.mode == CG_GRU, s, status = CG_OK;
    int64_t bh = (int64_t)k->B * k->H, GH = (int64_t)k->G * k->H;
    int64_t TB = (int64_t)k->T * k->B, DH = (int64_t)k->D * k->H;
    cg_tensor *ghn = n->extra_acc[0], *gcn = n->extra_acc[1];
    cg_tensor *hs = n->saved[SV_HS(d)], *cs = n->saved[SV_CS(d)];
    cg_tensor *sv = n->saved[SV_G(d)], *xd = n->saved[SV_X];
    cg_tensor *len = n->saved[SV_LEN];
    cg_tensor *wih = n->inputs[IN_P(d, 0)], *whh = n->inputs[IN_P(d, 1)];
    cg_tensor *wp = NULL, *dh, *dc = NULL, *dg, *dgi = NULL;
    cg_tensor *dgw, *w32 = NULL;    /* the GEMM path's float32 W_hh */
    cg__packed_b pw = { NULL, 0, 0, 0 };    /* or packed (gemm 2) */
    cg_dtype dt = xd->dtype;
    const cg__rnn_step *step;
    int gemm = (int)n->i[4];

    if ((status = step_for(m, dt, 0, &step)))
        return status;
    if (!gemm &&
        !(wp = empty_dt(ctx, dt, GH * cg__rnn_hpad(step, k->H))))
        return cg__last_status();
    dh = empty1(ctx, bh);
    dg = empty_dt(ctx, dt, TB * GH);
    if (lstm)
        dc = empty1(ctx, bh);
    if (gru)
        dgi = empty_dt(ctx, dt, TB * GH);
    if (!dh || !dg || (lstm && !dc) || (gru && !dgi)) {
        status = cg__last_status();
        goto out;
    }
    if (!gemm)
        status = cg__rnn_pack_whh(step, at(whh, 0), k->H, NULL,
                                  cg__tensor_mem(wp));
    else if (gemm == 2)
        status = cg__gemm_pack_b(ctx, whh->dtype, 0, (size_t)k->H,
                                 (size_t)GH, mat(whh, 0, k->H), &pw);
    else if (dt != CG_F32 && !(w32 = cg__cast(whh, CG_F32)))
        status = cg__last_status();
    if (status == CG_OK)
        status = set_state_dir(dh, 0, k->B, k->H, ghn, d);
    if (status == CG_OK && lstm)
        status = set_state_dir(dc, 0, k->B, k->H, gcn, d);
    /* Reverse processing order: s = T-1 .. 0, then the closing launch. */
    for (s = k->T - 1; s >= -1 && status == CG_OK; s--) {
        int t = s < 0 ? -1 : d ? k->T - 1 - s : s;
        cg__rnn_bwd_args b;

        memset(&b, 0, sizeof b);
        b.B = k->B;
        b.H = k->H;
        b.t = t;
        b.lengths = len ? cg__tensor_mem(len) : NULL;
        b.whh_p = wp ? cg__tensor_mem(wp) : NULL;
        if (s < k->T - 1) {
            int tn = d ? k->T - 2 - s : s + 1;     /* step s + 1's time */

            b.dg_next = at(dg, tn * k->B * GH);
            if (gemm) {
                /* dh += dgates_{s+1} W_hh, and the kernel adds nothing. */
                status = gemm == 2
                    ? cg__gemm_packed_b(ctx, dg->dtype, CG_F32, 0,
                                        (size_t)k->B, 1.0f,
                                        mat(dg, tn * k->B * GH, GH), &pw,
                                        1.0f, mat(dh, 0, k->H))
                    : step_product(ctx, dg, tn * k->B * GH, k->B, GH,
                                   w32 ? w32 : whh, k->H, 1.0f, dh);
                b.dg_next.mem = NULL;
                if (status || s < 0)
                    break;
            }
        }
        if (gy && t >= 0) {
            b.dy.mem = cg__tensor_mem(gy);
            b.dy.off = (cl_int)(gy->offset + t * k->B * DH +
                                (int64_t)d * k->H);
            b.dy.ld = (cl_int)DH;
        }
        b.dh = cg__tensor_mem(dh);
        b.dc = dc ? cg__tensor_mem(dc) : NULL;
        if (t >= 0) {
            int prev = d ? t + 1 : t, cur = d ? t : t + 1;

            if (sv)
                b.saved = at(sv, t * bh * 4);
            b.h_prev = at(hs, prev * bh);
            b.h_t = at(hs, cur * bh);
            if (cs) {
                b.c_prev = at(cs, prev * bh);
                b.c_t = at(cs, cur * bh);
            }
            b.dg = at(dg, t * k->B * GH);
            if (dgi)
                b.dgi = at(dgi, t * k->B * GH);
        }
        status = cg__rnn_backward_step(step, &b);
    }
    /* the float32 W_hh of the steps' products is no longer needed */
    cg_tensor_free(w32);
    w32 = NULL;
    cg__packed_b_free(&pw);
    if (status)
        goto out;
    if (gh0)
        status = copy_slot(gh0, d * bh, dh, 0, k->B, k->H);
    if (status == CG_OK && gc0)
        status = copy_slot(gc0, d * bh, dc, 0, k->B, k->H);
    /* dgw: the pre-activation gradients that multiply W_ih (GRU: n_pre's
     * own, not r * n_pre's). */
    dgw = dgi ? dgi : dg;
    if (status == CG_OK && n->needs[IN_P(d, 0)])
        status = weight_grad(n, IN_P(d, 0), GH, k->I, TB, mat(dgw, 0, GH),
                             mat(xd, 0, k->I), gin);
    if (status == CG_OK && n->needs[IN_P(d, 1)])
        status = weight_grad(n, IN_P(d, 1), GH, k->H, TB, mat(dg, 0, GH),
                             mat(hs, d ? bh : 0, k->H), gin);
    for (s = 2; s < 4 && status == CG_OK; s++) {
        cg_tensor *rows;

        if (!n->needs[IN_P(d, s)])
            continue;
        rows = view2(s == 2 ? dgw : dg, 0, TB, GH);
        gin[IN_P(d, s)] = rows ? cg__sum_mask(rows, 1u, 0, 1.0f) : NULL;
        cg_tensor_free(rows);
        if (!gin[IN_P(d, s)])
            status = cg__last_status();
    }
    if (status == CG_OK && dx)
        status = rnn_gemm_parts(ctx, dt, dx->dtype, 0, 0, (size_t)TB,
                                (size_t)k->I, (size_t)GH, 1.0f,
                                mat(dgw, 0, GH), mat(wih, 0, k->I),
                                d ? 1.0f : 0.0f, mat(dx, 0, k->I));
out:
    cg__packed_b_free(&pw);
    cg_tensor_free(wp);
    cg_tensor_free(w32);
    cg_tensor_free(dh);
    cg_tensor_free(dc);
    cg_tensor_free(dg);
    cg_tensor_free(dgi);
    return status;
}

static int
layer_backward(cg__node *n, cg_tensor *gy, cg_tensor **gin)
{
    cg_module *m = n->keep;
    cg_context *ctx = m->ctx;
    layer_dims k;
    int64_t shape[3];
    cg_tensor *dx = NULL, *gh0 = NULL, *gc0 = NULL, *gyc = NULL;
    cg_dtype dt = n->saved[SV_X]->dtype;
    int d, status = CG_OK;

    k.T = (int)n->i[1];
    k.B = (int)n->i[2];
    k.I = (int)n->i[3];
    k.H = m->rnn.hidden_size;
    k.G = m->step.gates;
    k.D = ndirs(m);
    shape[0] = k.T;
    shape[1] = k.B;
    shape[2] = k.I;
    /* The step kernels read dy in the layer's dtype (the output's). */
    if (gy && gy->dtype != dt) {
        if (!(gyc = cg__cast(gy, dt)))
            return cg__last_status();
        gy = gyc;
    }
    /* Two directions' 16-bit dx add up in float32, rounded once below. */
    if (n->needs[IN_X] &&
        !(dx = cg__tensor_empty(ctx, k.D == 2 ? CG_F32 : dt, 3, shape)))
        status = cg__last_status();
    shape[0] = k.D;
    shape[2] = k.H;
    if (status == CG_OK && n->needs[IN_H0] &&
        !(gh0 = cg__tensor_empty(ctx, dt, 3, shape)))
        status = cg__last_status();
    if (status == CG_OK && n->needs[IN_C0] &&
        !(gc0 = cg__tensor_empty(ctx, dt, 3, shape)))
        status = cg__last_status();
    for (d = 0; d < k.D && status == CG_OK; d++)
        status = direction_backward(n, &k, d, gy, gin, dx, gh0, gc0);
    if (status == CG_OK && dx && dx->dtype != dt) {
        cg_tensor *c = cg__cast(dx, dt);

        cg_tensor_free(dx);
        dx = c;
        if (!c)
            status = cg__last_status();
    }
    cg_tensor_free(gyc);
    if (status) {
        cg_tensor_free(dx);
        cg_tensor_free(gh0);
        cg_tensor_free(gc0);
        return status;
    }
    gin[IN_X] = dx;
    gin[IN_H0] = gh0;
    gin[IN_C0] = gc0;
    return CG_OK;
}

/* ------------------------------------------------------------------------
 * The composite backward (create_graph)
 *
 * The fused step kernels have no backward of their own, so a backward
 * with create_graph (cg_grad, cg_hvp) runs this instead: the layer's
 * forward recomputed from the node's inputs with recorded ops (their
 * graphs kept, so that the gradients depend on them differentiably), then
 * backpropagation through time written with recorded ops too.  Slower
 * than the kernels by far (tens of launches per step); taken only for
 * create_graph.  Not for variable lengths (the node gets no composite
 * then, and create_graph fails naming "rnn_layer").
 * ------------------------------------------------------------------------ */

/* The temporaries of a composite, freed together. */
typedef struct ctape {
    cg_tensor **t;
    size_t n, cap;
    int status;
} ctape;

static cg_tensor *
ckeep(ctape *tp, cg_tensor *t)
{
    if (!t) {
        if (tp->status == CG_OK)
            tp->status = cg__last_status();
        return NULL;
    }
    if (tp->n == tp->cap) {
        size_t cap = tp->cap ? 2 * tp->cap : 256;
        cg_tensor **v = realloc(tp->t, cap * sizeof *v);

        if (!v) {
            cg_tensor_free(t);
            tp->status = cg__error(CG_EHOSTMEM, "rnn double backward: out "
                                   "of host memory");
            return NULL;
        }
        tp->t = v;
        tp->cap = cap;
    }
    tp->t[tp->n++] = t;
    return t;
}

/* e evaluated only while nothing has failed. */
#define REC(tp, e) ((tp)->status ? NULL : ckeep((tp), (e)))

static cg_tensor *
c_one_minus(ctape *tp, cg_tensor *a)
{
    return REC(tp, cg_add_scalar(REC(tp, cg_neg(a)), 1.0f));
}

/* [r0, r1, ...]: n tensors joined along dim (in groups, as one node takes
 * at most CG__NODE_INPUTS). */
static cg_tensor *
c_concat(ctape *tp, cg_tensor **v, int n, int dim)
{
    cg_tensor *parts[CG__NODE_INPUTS];
    int k, np = 0, step = CG__NODE_INPUTS;

    if (tp->status)
        return NULL;
    if (n <= step)
        return REC(tp, n == 1 ? cg_tensor_ref(v[0]) : cg_concat(v, n, dim));
    for (k = 0; k < n; k += step)
        parts[np++] = c_concat(tp, v + k, n - k < step ? n - k : step, dim);
    if (np > step)      /* more than 256 steps: one level more */
        return c_concat(tp, parts, np, dim);
    return tp->status ? NULL : REC(tp, cg_concat(parts, np, dim));
}

/* t[d] of a [D, B, H] tensor as [B, H], recorded; NULL t: NULL. */
static cg_tensor *
c_dir(ctape *tp, cg_tensor *t, int d)
{
    int64_t s[2];

    if (!t)
        return NULL;
    s[0] = t->shape[1];
    s[1] = t->shape[2];
    return REC(tp, cg_reshape(REC(tp, cg_narrow(t, 0, d, 1)), 2, s));
}

/* One direction: the gradients of its parameters (into gin), its part of
 * dx ([T*B, I], *dx), and of h0 / c0 (*dh0, *dc0, [B, H]). */
static void
composite_direction(ctape *tp, cg__node *n, const layer_dims *k, int d,
                    cg_tensor *x2, cg_tensor *gy, cg_tensor **gin,
                    cg_tensor **dx, cg_tensor **dh0, cg_tensor **dc0)
{
    cg_module *m = n->keep;
    int mode = m->rnn.mode, H = k->H, B = k->B, T = k->T, s;
    cg_tensor *wih = n->inputs[IN_P(d, 0)], *whh = n->inputs[IN_P(d, 1)];
    cg_tensor *bih = n->inputs[IN_P(d, 2)], *bhh = n->inputs[IN_P(d, 3)];
    cg_tensor *xp, *h, *c, *bhn = NULL;
    cg_tensor **hp, **cp, **g0, **g1, **g2, **g3, **dgi, **dgh, **xs;
    cg_tensor *dh, *dc = NULL;
    int64_t bhs[2] = { B, H };

    hp = calloc((size_t)T * 9, sizeof *hp);
    if (!hp) {
        tp->status = cg__error(CG_EHOSTMEM, "rnn double backward: out of "
                               "host memory");
        return;
    }
    cp = hp + T;
    g0 = cp + T;
    g1 = g0 + T;
    g2 = g1 + T;
    g3 = g2 + T;
    dgi = g3 + T;
    dgh = dgi + T;
    xs = dgh + T;

    /* The forward, recorded.  xp = x W_ih^T + b_ih (+ b_hh but GRU's n
     * block, which takes b_hn inside r * (W_hn h + b_hn)). */
    xp = REC(tp, cg_add(REC(tp, cg_matmul_t(x2, wih, 0, 1)), bih));
    if (mode == CG_GRU) {
        cg_tensor *parts[2];

        bhn = REC(tp, cg_narrow(bhh, 0, 2 * (int64_t)H, H));
        parts[0] = REC(tp, cg_narrow(bhh, 0, 0, 2 * (int64_t)H));
        parts[1] = REC(tp, cg_full_dtype(m->ctx, bhh->dtype, 1, &bhs[1],
                                         0.0f));
        xp = REC(tp, cg_add(xp, REC(tp, cg_concat(parts, 2, 0))));
    } else {
        xp = REC(tp, cg_add(xp, bhh));
    }
    h = c_dir(tp, n->inputs[IN_H0], d);
    if (!h)
        h = REC(tp, cg_full_dtype(m->ctx, x2->dtype, 2, bhs, 0.0f));
    c = mode == CG_LSTM ? c_dir(tp, n->inputs[IN_C0], d) : NULL;
    if (mode == CG_LSTM && !c)
        c = REC(tp, cg_full_dtype(m->ctx, x2->dtype, 2, bhs, 0.0f));
    for (s = 0; s < T && tp->status == CG_OK; s++) {
        int t = d ? T - 1 - s : s;
        cg_tensor *a, *hw;

        hp[t] = h;
        cp[t] = c;
        xs[t] = REC(tp, cg_narrow(xp, 0, (int64_t)t * B, B));
        hw = REC(tp, cg_matmul_t(h, whh, 0, 1));
        if (mode == CG_LSTM) {
            a = REC(tp, cg_add(xs[t], hw));
            g0[t] = REC(tp, cg_sigmoid(REC(tp, cg_narrow(a, 1, 0, H))));
            g1[t] = REC(tp, cg_sigmoid(REC(tp, cg_narrow(a, 1, H, H))));
            g2[t] = REC(tp, cg_tanh(REC(tp, cg_narrow(a, 1, 2 * H, H))));
            g3[t] = REC(tp, cg_sigmoid(REC(tp, cg_narrow(a, 1, 3 * H, H))));
            c = REC(tp, cg_add(REC(tp, cg_mul(g1[t], c)),
                             REC(tp, cg_mul(g0[t], g2[t]))));
            h = REC(tp, cg_mul(g3[t], REC(tp, cg_tanh(c))));
        } else if (mode == CG_GRU) {
            a = REC(tp, cg_add(REC(tp, cg_narrow(xs[t], 1, 0, 2 * H)),
                             REC(tp, cg_narrow(hw, 1, 0, 2 * H))));
            g0[t] = REC(tp, cg_sigmoid(REC(tp, cg_narrow(a, 1, 0, H))));
            g1[t] = REC(tp, cg_sigmoid(REC(tp, cg_narrow(a, 1, H, H))));
            g3[t] = REC(tp, cg_add(REC(tp, cg_narrow(hw, 1, 2 * H, H)), bhn));
            g2[t] = REC(tp, cg_tanh(REC(tp, cg_add(
                        REC(tp, cg_narrow(xs[t], 1, 2 * H, H)),
                        REC(tp, cg_mul(g0[t], g3[t]))))));
            h = REC(tp, cg_add(REC(tp, cg_mul(c_one_minus(tp, g1[t]), g2[t])),
                             REC(tp, cg_mul(g1[t], h))));
        } else {
            a = REC(tp, cg_add(xs[t], hw));
            g0[t] = a;
            h = REC(tp, mode == CG_RNN_RELU ? cg_relu(a) : cg_tanh(a));
            g1[t] = h;
        }
    }

    /* Backpropagation through time, recorded. */
    dh = c_dir(tp, n->extra_acc[0], d);
    if (!dh)
        dh = REC(tp, cg_full_dtype(m->ctx, x2->dtype, 2, bhs, 0.0f));
    if (mode == CG_LSTM) {
        dc = c_dir(tp, n->extra_acc[1], d);
        if (!dc)
            dc = REC(tp, cg_full_dtype(m->ctx, x2->dtype, 2, bhs, 0.0f));
    }
    for (s = T - 1; s >= 0 && tp->status == CG_OK; s--) {
        int t = d ? T - 1 - s : s;
        cg_tensor *da[4], *direct = NULL;

        if (gy)
            dh = REC(tp, cg_add(dh, REC(tp, cg_reshape(REC(tp, cg_narrow(
                     REC(tp, cg_narrow(gy, 0, t, 1)), 2, (int64_t)d * H, H)),
                     2, bhs))));
        if (mode == CG_LSTM) {
            cg_tensor *ig = g0[t], *fg = g1[t], *gg = g2[t], *og = g3[t];
            cg_tensor *ct = REC(tp, cg_add(REC(tp, cg_mul(fg, cp[t])),
                                         REC(tp, cg_mul(ig, gg))));
            cg_tensor *tc = REC(tp, cg_tanh(ct)), *dcc;

            dcc = REC(tp, cg_add(dc, REC(tp, cg_mul(REC(tp, cg_mul(dh, og)),
                      c_one_minus(tp, REC(tp, cg_mul(tc, tc)))))));
            da[0] = REC(tp, cg_mul(REC(tp, cg_mul(dcc, gg)),
                                 REC(tp, cg_mul(ig, c_one_minus(tp, ig)))));
            da[1] = REC(tp, cg_mul(REC(tp, cg_mul(dcc, cp[t])),
                                 REC(tp, cg_mul(fg, c_one_minus(tp, fg)))));
            da[2] = REC(tp, cg_mul(REC(tp, cg_mul(dcc, ig)),
                                 c_one_minus(tp, REC(tp, cg_mul(gg, gg)))));
            da[3] = REC(tp, cg_mul(REC(tp, cg_mul(dh, tc)),
                                 REC(tp, cg_mul(og, c_one_minus(tp, og)))));
            dc = REC(tp, cg_mul(dcc, fg));
            dgi[t] = dgh[t] = REC(tp, cg_concat(da, 4, 1));
        } else if (mode == CG_GRU) {
            cg_tensor *rg = g0[t], *zg = g1[t], *ng = g2[t], *hh = g3[t];
            cg_tensor *dn, *dz;

            /* dn: n's pre-activation; dz: z's output. */
            dn = REC(tp, cg_mul(REC(tp, cg_mul(dh, c_one_minus(tp, zg))),
                                c_one_minus(tp, REC(tp, cg_mul(ng, ng)))));
            dz = REC(tp, cg_mul(dh, REC(tp, cg_sub(hp[t], ng))));
            da[0] = REC(tp, cg_mul(REC(tp, cg_mul(dn, hh)),
                                   REC(tp, cg_mul(rg, c_one_minus(tp, rg)))));
            da[1] = REC(tp, cg_mul(dz, REC(tp, cg_mul(zg,
                                                      c_one_minus(tp, zg)))));
            da[2] = dn;
            dgi[t] = REC(tp, cg_concat(da, 3, 1));
            da[2] = REC(tp, cg_mul(dn, rg));
            dgh[t] = REC(tp, cg_concat(da, 3, 1));
            direct = REC(tp, cg_mul(dh, zg));
        } else {
            cg_tensor *hv = g1[t];

            if (mode == CG_RNN_RELU) {
                /* relu' = [h > 0], constant where it exists (so not
                 * recorded, as PyTorch's relu has a zero second
                 * derivative): h >= 0 scaled past 1 and clamped. */
                cg_tensor *mask;

                cg_no_grad_enter();
                mask = REC(tp, cg_clamp(REC(tp, cg_mul_scalar(hv, 3.0e38f)),
                                      0.0f, 1.0f));
                cg_no_grad_leave();
                dgi[t] = REC(tp, cg_mul(dh, mask));
            } else {
                cg_tensor *h2 = REC(tp, cg_mul(hv, hv));

                dgi[t] = REC(tp, cg_mul(dh, c_one_minus(tp, h2)));
            }
            dgh[t] = dgi[t];
        }
        dh = REC(tp, cg_matmul(dgh[t], whh));
        if (direct)
            dh = REC(tp, cg_add(dh, direct));
    }
    if (tp->status == CG_OK) {
        cg_tensor *DI = c_concat(tp, dgi, T, 0), *DH = c_concat(tp, dgh, T, 0);
        cg_tensor *HP = c_concat(tp, hp, T, 0);
        int ax0 = 0;

        if (n->needs[IN_P(d, 0)])
            gin[IN_P(d, 0)] = REC(tp, cg_matmul_t(DI, x2, 1, 0));
        if (n->needs[IN_P(d, 1)])
            gin[IN_P(d, 1)] = REC(tp, cg_matmul_t(DH, HP, 1, 0));
        if (n->needs[IN_P(d, 2)])
            gin[IN_P(d, 2)] = REC(tp, cg_sum(DI, 1, &ax0, 0));
        if (n->needs[IN_P(d, 3)])
            gin[IN_P(d, 3)] = REC(tp, cg_sum(DH, 1, &ax0, 0));
        for (s = 0; s < 4; s++)
            if (gin[IN_P(d, s)])
                cg_tensor_ref(gin[IN_P(d, s)]);
        *dx = REC(tp, cg_matmul(DI, wih));
        *dh0 = dh;
        *dc0 = dc;
    }
    free(hp);
}

static int
layer_backward_graph(cg__node *n, cg_tensor *gy, cg_tensor **gin)
{
    cg_module *m = n->keep;
    ctape tp = { NULL, 0, 0, CG_OK };
    layer_dims k;
    cg_tensor *x = n->inputs[IN_X], *x2, *dx = NULL;
    cg_tensor *dxs[2] = { NULL }, *dhs[2] = { NULL }, *dcs[2] = { NULL };
    int64_t s2[2], s3[3];
    int d;
    size_t i;

    k.T = (int)n->i[1];
    k.B = (int)n->i[2];
    k.I = (int)n->i[3];
    k.H = m->rnn.hidden_size;
    k.G = m->step.gates;
    k.D = ndirs(m);
    s2[0] = (int64_t)k.T * k.B;
    s2[1] = k.I;
    x2 = REC(&tp, cg_reshape(REC(&tp, cg_contiguous(x)), 2, s2));
    if (gy && gy->dtype != x->dtype)
        gy = REC(&tp, cg_to_dtype(gy, x->dtype));
    for (d = 0; d < k.D && tp.status == CG_OK; d++)
        composite_direction(&tp, n, &k, d, x2, gy, gin, &dxs[d], &dhs[d],
                            &dcs[d]);
    if (tp.status == CG_OK && n->needs[IN_X]) {
        s3[0] = k.T;
        s3[1] = k.B;
        s3[2] = k.I;
        dx = k.D == 2 ? REC(&tp, cg_add(dxs[0], dxs[1])) : dxs[0];
        gin[IN_X] = REC(&tp, cg_reshape(dx, 3, s3));
        if (gin[IN_X])
            cg_tensor_ref(gin[IN_X]);
    }
    if (tp.status == CG_OK && n->needs[IN_H0] &&
        (gin[IN_H0] = REC(&tp, cg_stack(dhs, k.D, 0))))
        cg_tensor_ref(gin[IN_H0]);
    if (tp.status == CG_OK && n->needs[IN_C0] &&
        (gin[IN_C0] = REC(&tp, cg_stack(dcs, k.D, 0))))
        cg_tensor_ref(gin[IN_C0]);
    for (i = 0; i < tp.n; i++)
        cg_tensor_free(tp.t[i]);
    free(tp.t);
    if (tp.status) {
        for (d = 0; d < CG__NODE_INPUTS; d++) {
            cg_tensor_free(gin[d]);
            gin[d] = NULL;
        }
    }
    return tp.status;
}

/* ------------------------------------------------------------------------
 * The whole layer stack
 * ------------------------------------------------------------------------ */

static int
check_state(const cg_module *m, const cg_tensor *x, const cg_tensor *s,
            const char *name, int64_t B)
{
    int64_t want[3];
    char s1[128], s2[128];
    int status = cg__check_tensor(s, name, CG__FLOAT_DTYPE);

    if (status)
        return status;
    if (s->ctx != x->ctx)
        return cg__error(CG_ECONTEXT, "rnn: %s and x belong to different "
                         "contexts", name);
    want[0] = (int64_t)m->rnn.num_layers * ndirs(m);
    want[1] = B;
    want[2] = m->rnn.hidden_size;
    if (s->ndim != 3 || memcmp(s->shape, want, sizeof want) != 0)
        return cg__error(CG_ESHAPE, "rnn: %s has shape %s, want %s "
                         "(layers * directions, batch, hidden_size)", name,
                         cg__shape_str(s->ndim, s->shape, s1, sizeof s1),
                         cg__shape_str(3, want, s2, sizeof s2));
    return CG_OK;
}

static int
check_args(const cg_module *m, const cg_tensor *x, const cg_tensor *h0,
           const cg_tensor *c0, const int *lengths, cg_tensor **output,
           cg_tensor **c_n, int64_t *T, int64_t *B)
{
    const cg_rnn_options *o;
    char s1[128];
    int64_t widest, cells, b;
    int status;

    if ((status = cg__module_check(m, "rnn")))
        return status;
    o = &m->rnn;
    if (!output)
        return cg__error(CG_EINVAL, "rnn: output pointer is NULL");
    if (o->mode != CG_LSTM && (c0 || c_n))
        return cg__error(CG_EINVAL, "rnn: c0 and c_n are for LSTM only, "
                         "not %s", mode_names[o->mode]);
    if ((status = cg__check_tensor(x, "x", CG__FLOAT_DTYPE)))
        return status;
    if (x->ctx != m->ctx)
        return cg__error(CG_ECONTEXT, "rnn: x and the layer belong to "
                         "different contexts");
    if (x->ndim != 3 || x->shape[2] != o->input_size || x->shape[0] < 1 ||
        x->shape[1] < 1)
        return cg__error(CG_ESHAPE, "rnn: x has shape %s, want %s with "
                         "input_size %d", cg__shape_str(x->ndim, x->shape,
                                                        s1, sizeof s1),
                         o->batch_first ? "[B, T, input_size]"
                                        : "[T, B, input_size]",
                         o->input_size);
    *T = x->shape[o->batch_first ? 1 : 0];
    *B = x->shape[o->batch_first ? 0 : 1];
    if (h0 && (status = check_state(m, x, h0, "h0", *B)))
        return status;
    if (c0 && (status = check_state(m, x, c0, "c0", *B)))
        return status;
    /* The kernels index with 32-bit offsets. */
    widest = (int64_t)ndirs(m) * m->step.gates * o->hidden_size;
    if (widest < 4 * (int64_t)o->hidden_size)
        widest = 4 * (int64_t)o->hidden_size;
    if (widest < o->input_size)
        widest = o->input_size;
    if (cg__mul_i64(*T + 1, *B, &cells) ||
        cg__mul_i64(cells, widest, &cells) || cells > INT_MAX)
        return cg__error(CG_EINVAL, "rnn: T %lld x B %lld x %lld elements "
                         "exceed 32-bit indexing", (long long)*T,
                         (long long)*B, (long long)widest);
    if (lengths)
        for (b = 0; b < *B; b++)
            if (lengths[b] < 1 || lengths[b] > *T)
                return cg__error(CG_EINVAL, "rnn: lengths[%lld] = %d is not "
                                 "in 1..T = %lld", (long long)b, lengths[b],
                                 (long long)*T);
    return CG_OK;
}

/* t[l*D : (l+1)*D] as a recorded narrow, or NULL for a NULL t. */
static int
layer_state(cg_tensor *t, int l, int D, cg_tensor **out)
{
    *out = NULL;
    if (!t)
        return CG_OK;
    *out = cg_narrow(t, 0, (int64_t)l * D, D);
    return *out ? CG_OK : cg__last_status();
}

/* Joins the layers' [D, B, H] states into [L*D, B, H]; takes them. */
static cg_tensor *
join_states(cg_tensor **s, int L)
{
    cg_tensor *r;
    int l;

    if (L == 1) {
        r = s[0];
        s[0] = NULL;
        return r;
    }
    r = cg_concat(s, L, 0);
    for (l = 0; l < L; l++) {
        cg_tensor_free(s[l]);
        s[l] = NULL;
    }
    return r;
}

/* x, h0 and c0 (when given) and the parameters P share one dtype. */
static int
check_dtypes(const cg_module *m, cg_tensor *const *P, const cg_tensor *x,
             const cg_tensor *h0, const cg_tensor *c0)
{
    int i, status = CG_OK;

    if (h0)
        status = cg__check_same_dtype(x, "x", h0, "h0");
    if (status == CG_OK && c0)
        status = cg__check_same_dtype(x, "x", c0, "c0");
    for (i = 0; i < m->nparams && status == CG_OK; i++)
        status = cg__check_same_dtype(x, "x", P[i], m->names[i]);
    return status;
}

static int
rnn_forward(cg_module *m, cg_tensor *const *P, cg_tensor *x, cg_tensor *h0,
            cg_tensor *c0, const int *lengths, int64_t T, int64_t B,
            cg_tensor **output, cg_tensor **h_n, cg_tensor **c_n);

int
cg_rnn_forward(cg_module *m, cg_tensor *x, cg_tensor *h0, cg_tensor *c0,
               const int *lengths, cg_tensor **output, cg_tensor **h_n,
               cg_tensor **c_n)
{
    cg_tensor *args[3 + CG__MODULE_MAX_PARAMS];
    cg_tensor *ac[3 + CG__MODULE_MAX_PARAMS];
    cg_tensor *const *P;
    int64_t T = 0, B = 0;
    int i, n, cast, status;

    cg__error_clear();
    status = check_args(m, x, h0, c0, lengths, output, c_n, &T, &B);
    if (status)
        return status;
    /* Under autocast the layer runs in the region's dtype: x, the states
     * and the parameters cast to it (the parameters' casts kept for the
     * region). */
    n = 3 + m->nparams;
    args[0] = x;
    args[1] = h0;
    args[2] = c0;
    for (i = 0; i < m->nparams; i++)
        args[3 + i] = m->params[i];
    cast = cg__autocast_args(CG__AC_LOW, n, args, ac);
    if (cast < 0)
        return cg__last_status();
    P = cast ? ac + 3 : m->params;
    if (cast) {
        x = ac[0];
        h0 = ac[1];
        c0 = ac[2];
    }
    status = check_dtypes(m, P, x, h0, c0);
    if (status == CG_OK)
        status = rnn_forward(m, P, x, h0, c0, lengths, T, B, output, h_n,
                             c_n);
    if (cast)
        cg__autocast_release(n, ac);
    return status;
}

/* cg_rnn_forward on checked arguments of one dtype. */
static int
rnn_forward(cg_module *m, cg_tensor *const *P, cg_tensor *x, cg_tensor *h0,
            cg_tensor *c0, const int *lengths, int64_t T, int64_t B,
            cg_tensor **output, cg_tensor **h_n, cg_tensor **c_n)
{
    cg_tensor *hn[CG__MODULE_MAX_PARAMS / 4] = { NULL };
    cg_tensor *cn[CG__MODULE_MAX_PARAMS / 4] = { NULL };
    cg_tensor *in = NULL, *len = NULL, *y = NULL, *r_h = NULL, *r_c = NULL;
    int l, L, D, status = CG_OK;

    L = m->rnn.num_layers;
    D = ndirs(m);
    if (lengths) {
        int all = 1;

        for (l = 0; l < B; l++)
            all &= lengths[l] == T;
        if (!all) {
            len = cg_tensor_from_host(m->ctx, CG_I32, 1, &B, lengths);
            if (!len)
                return cg__last_status();
        }
    }
    in = m->rnn.batch_first ? cg_transpose(x, 0, 1) : cg_tensor_ref(x);
    if (!in)
        status = cg__last_status();
    for (l = 0; l < L && status == CG_OK; l++) {
        cg_tensor *h0l = NULL, *c0l = NULL;

        status = layer_state(h0, l, D, &h0l);
        if (status == CG_OK)
            status = layer_state(c0, l, D, &c0l);
        if (status == CG_OK)
            status = layer_forward(m, P, l, in, h0l, c0l, len, &y, &hn[l],
                                   &cn[l]);
        cg_tensor_free(h0l);
        cg_tensor_free(c0l);
        if (status)
            break;
        cg_tensor_free(in);
        in = y;
        y = NULL;
        if (l < L - 1 && m->training && m->rnn.dropout > 0.0f) {
            y = cg_dropout(in, m->rnn.dropout, 1);
            cg_tensor_free(in);
            in = y;
            y = NULL;
            if (!in)
                status = cg__last_status();
        }
    }
    if (status == CG_OK && m->rnn.batch_first) {
        cg_tensor *t = cg_transpose(in, 0, 1);

        y = t ? cg_contiguous(t) : NULL;
        cg_tensor_free(t);
        if (!y)
            status = cg__last_status();
    } else if (status == CG_OK) {
        y = in;
        in = NULL;
    }
    if (status == CG_OK && h_n && !(r_h = join_states(hn, L)))
        status = cg__last_status();
    if (status == CG_OK && c_n && !(r_c = join_states(cn, L)))
        status = cg__last_status();
    for (l = 0; l < L; l++) {
        cg_tensor_free(hn[l]);
        cg_tensor_free(cn[l]);
    }
    cg_tensor_free(in);
    cg_tensor_free(len);
    if (status) {
        cg_tensor_free(y);
        cg_tensor_free(r_h);
        cg_tensor_free(r_c);
        return status;
    }
    *output = y;
    if (h_n)
        *h_n = r_h;
    if (c_n)
        *c_n = r_c;
    return CG_OK;
}
