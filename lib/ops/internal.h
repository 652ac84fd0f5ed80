/* SPDX-License-Identifier: MIT */
/*
 * lib/ops/internal.h - what op implementations share: strided layouts for
 * kernels, argument checks, and a few ops without graph recording that the
 * autograd engine and backward functions use.
 */
#ifndef CG_OPS_INTERNAL_H
#define CG_OPS_INTERNAL_H

#include "autograd/internal.h"

#define CG__LAYOUT_OPS 4
#define CG__WG 64        /* work-group size of elementwise launches */

/* An iteration space (a shape) and the strides of up to CG__LAYOUT_OPS
 * operands over it, coalesced: size-1 dimensions dropped and neighbours
 * merged where every operand allows, so contiguous data is 1-D. */
typedef struct cg__layout {
    int nd;
    cl_int8 shape;
    cl_int8 strides[CG__LAYOUT_OPS];
    cl_int offset[CG__LAYOUT_OPS];
    int64_t numel;
} cg__layout;

/* Lays `nops` tensors over the iteration space `shape` (ndim dims); each
 * tensor is aligned to the right and broadcast (stride 0) where its size is
 * 1.  The tensors must already be broadcast-compatible with shape. */
void cg__layout_make(cg__layout *l, int ndim, const int64_t *shape, int nops,
                     const cg_tensor *const *ops);

/* The same from explicit strides (strides[k][d] for operand k) and
 * offsets (NULL: zeros). */
void cg__layout_from(cg__layout *l, int ndim, const int64_t *shape, int nops,
                     int64_t (*strides)[CG_MAX_DIMS], const int64_t *offsets);

/* The broadcast shape of a and b, or CG_ESHAPE naming both shapes. */
int cg__broadcast_shape(const cg_tensor *a, const cg_tensor *b, int *ndim,
                        int64_t *shape);

/* Checks that tensors (non-NULL) share one context. */
int cg__same_context(int n, const cg_tensor *const *ts);

/* A contiguous copy of t (no recording; any dtype). */
cg_tensor *cg__copy_contiguous(cg_tensor *t);

/* t itself (a new reference) if kernels can index it densely from
 * element 0 - contiguous with offset 0 - else a contiguous copy. */
cg_tensor *cg__dense(cg_tensor *t);

/* dst (any layout) = src (same shape and element size, any layout): a
 * copy of 32-bit or 16-bit words. */
int cg__copy_into(cg_tensor *dst, const cg_tensor *src);

/* acc += alpha * g; acc contiguous, g of the same shape and dtype, any
 * layout.  A 16-bit acc is added to in float32 and rounded once, as
 * PyTorch adds half tensors. */
int cg__axpy_inplace(cg_tensor *acc, const cg_tensor *g, float alpha);

/* Sets every element of contiguous t to value (float32 or int32 bits; for
 * a 16-bit t, value rounded to its dtype as cg_to_dtype does). */
int cg__fill(cg_tensor *t, float value);

/* x converted to dtype, float32 <-> float16 or bfloat16 (kernels/
 * cast.cl): a new contiguous tensor; no recording.  CG_EDTYPE for another
 * pair. */
cg_tensor *cg__cast(cg_tensor *x, cg_dtype dtype);

/* Sums g (contiguous) over the dimensions along which a tensor of `shape`
 * was broadcast to g's shape, giving a new tensor of that shape. */
cg_tensor *cg__sum_to_shape(cg_tensor *g, int ndim, const int64_t *shape);

/* numel values from kernel kid of random.cl (uniform, normal,
 * dropout_mask) with parameters a, b; advances the generator. */
/* The Philox generator's state, one per context: the key, and the counter
 * of the next draw (in blocks of four numbers). */
struct cg__rng {
    uint64_t seed;
    uint64_t offset;
};

/* Gives ctx its generator, seeded 0 (cg_context_new_with, after the device
 * layer): CG_EHOSTMEM if that fails.  detach frees it (NULL-safe). */
int cg__rng_attach(cg_context *ctx);
void cg__rng_detach(cg_context *ctx);

cg_tensor *cg__random(cg_context *ctx, cg__kid kid, int ndim,
                      const int64_t *shape, float a, float b);

/* Sum of x over the axes in `mask` (bit d: axis d), times scale; no
 * recording.  keepdim keeps the reduced axes as size 1. */
cg_tensor *cg__sum_mask(cg_tensor *x, unsigned mask, int keepdim,
                        float scale);

/* The composite backward of node n (lib/ops/grad_graph.c): the gradients
 * of n->backward computed with recorded ops, run in grad mode by a
 * backward with create_graph so that they can be differentiated again;
 * NULL when n's op has none. */
cg__backward_fn cg__backward_graph_of(const cg__node *n);

/* Forward mode (lib/ops/pool.c): the tangent of pooling node n for its
 * input's tangent t, a new tensor of the output's shape in *out. */
int cg__pool_jvp(cg__node *n, cg_tensor *t, cg_tensor **out);
/* Double backward of the pools (lib/ops/pool.c): the composite backward
 * of a pool node (records "<pool>_grad" of g), that node's backward (the
 * pool again, recorded), and that node's tangent. */
int cg__pool_graph(cg__node *n, cg_tensor *g, cg_tensor **gin);
int cg__pool_grad_backward(cg__node *n, cg_tensor *gg, cg_tensor **gin);
int cg__pool_grad_jvp(cg__node *n, cg_tensor *y, cg_tensor *t,
                      cg_tensor **out);
/* Forward mode (lib/ops/gather.c): the tangent of a "gather_grad" node
 * (a scatter-add, linear) for its input's tangent t. */
int cg__gather_grad_jvp(cg__node *n, cg_tensor *y, cg_tensor *t,
                        cg_tensor **out);

/* The elementwise ops, CG__EW_AFFINE...: kernels/elementwise_ops.def. */
typedef enum {
#define CG_UNARY(ID, NAME, FWD, BWD) CG__EW_##ID,
#define CG_BINARY(ID, NAME, FWD, GA, GB) CG__EW_##ID,
#include "elementwise_ops.def"
#undef CG_UNARY
#undef CG_BINARY
    CG__EW_COUNT
} cg__ew_op;

/* Runs unary op's forward kernel: y = F(x; p0, p1) with y a new
 * contiguous tensor of x's shape.  No recording. */
cg_tensor *cg__unary(cg__ew_op op, cg_tensor *x, float p0, float p1);
/* The unary op's input gradient G(x, y, g; p0, p1) (elementwise_ops.def)
 * into a new tensor *out of x's shape and dtype (the caller's; NULL on
 * error); y and g of x's shape. */
int cg__unary_grad(cg__ew_op op, cg_tensor *x, cg_tensor *y, cg_tensor *g,
                   float p0, float p1, cg_tensor **out);

/* One row-major SGEMM (lib/ops/gemm.c) on ctx's queue, clgrad's kernel or
 * CLBlast's as gemm.c chooses: c = alpha op(a) op(b) + beta c, op
 * transposing when ta / tb is set; op(a) is m x k, op(b) k x n, c m x n;
 * offsets and leading dimensions in elements.  beta == 0 does not read c.
 * Counts one launch in the context statistics. */
typedef struct cg__mat {
    cl_mem mem;
    size_t off, ld;
} cg__mat;

int cg__sgemm(cg_context *ctx, int ta, int tb, size_t m, size_t n, size_t k,
              float alpha, cg__mat a, cg__mat b, float beta, cg__mat c);

/* op(B) (K x N, tb: b stored N x K) packed once for many products
 * (kernels/gemm_pack.cl's micro-panels, float32 whatever dt, in the panel
 * width the context's tunables give now): the recurrent layers' W_hh,
 * used by every time step's product.  buf is owned by the struct: free it
 * with cg__packed_b_free once the products that read it are enqueued. */
typedef struct cg__packed_b {
    cg_buffer *buf;
    size_t n, k, nr;
} cg__packed_b;

int cg__gemm_pack_b(cg_context *ctx, cg_dtype dt, int tb, size_t n, size_t k,
                    cg__mat b, cg__packed_b *out);
void cg__packed_b_free(cg__packed_b *pb);

/* c = alpha op(a) B + beta c for B packed by cg__gemm_pack_b (pb->k,
 * pb->n): op(a) M x K of dtype ab packed (and converted) by gemm_pack_a,
 * then gemm_packed into c of dtype cd (ab's, or CG_F32): two launches.
 * CG_EINVAL if the context's panel width changed since pb was made.
 * (A kernel reading op(a) in place instead, scalar or float4 loads, was
 * slower in every run on the 2-core AVX2 PoCL machine: 786-1274 us a
 * product at 32x2048x512 and 32x512x2048, against 529-748 us for
 * gemm_packed in the same runs.) */
int cg__gemm_packed_b(cg_context *ctx, cg_dtype ab, cg_dtype cd, int ta,
                      size_t m, float alpha, cg__mat a,
                      const cg__packed_b *pb, float beta, cg__mat c);

/* The packed kernels' panel width NR on ctx now (gemm_pack.cl's PTN *
 * PVW). */
size_t cg__gemm_packed_nr(const cg_context *ctx);

/* c_z = a b_z (float32, NN), z < batch: a (m x k, a.ld) packed once by
 * gemm_pack_a; b_z (k x n) packed by the caller into pb + z spb floats in
 * gemm_pack_b's layout, panels of cg__gemm_packed_nr columns (pb owned by
 * the caller, read by the enqueued product); c_z at c.off + z sc.
 * kernels/conv.cl's conv_im2col_packed writes such operands. */
int cg__gemm_packed_bs(cg_context *ctx, size_t m, size_t n, size_t k,
                       cg__mat a, cl_mem pb, size_t spb, cg__mat c,
                       size_t sc, size_t batch);

/* Where the stride-1 convolution kernels read their zero-padded images:
 * the element of batch entry z, channel c, tap (r, s) and pixel q at
 * off + z sx + c cs + r rs + s ss + q floats into mem. */
typedef struct cg__shift_src {
    cl_mem mem;
    size_t off, sx, cs, rs, ss;
} cg__shift_src;

/* A convolution at stride 1 as a product (kernels/gemm_pack.cl's
 * gemm_shift), float32: for z < batch, pixels q < m of x's image z (q =
 * oh rw + ow; those with ow < the output width ow stored) times w^T
 * packed by cg__gemm_pack_b (pb, pb->n output channels), into y (channel
 * n of output (oh, ow) at y.off + z sc + n y.ld + oh ow + ow): the sums
 * plus beta times y (0: y not read), plus bias (NULL: none; channel n at
 * bo + n floats).  x holds cg__gemm_packed_nr floats of slack past its
 * last window. */
int cg__gemm_shift(cg_context *ctx, size_t m, size_t c, size_t r, size_t s,
                   const cg__packed_b *pb, const cg__shift_src *x,
                   cg__mat y, size_t sc, size_t rw, size_t ow, size_t batch,
                   float beta, cl_mem bias, size_t bo);

/* A convolution's weight gradient at stride 1, transposed (kernels/
 * gemm_pack.cl's gemm_shift_dw), float32: c (m taps x pb->n channels,
 * row-major, c.ld) = tap rows of the padded images x (tap t = (ch, r,
 * s) of taps = R S per channel and ts = S per row of them: pb->k floats
 * from ch cs + r rs + s ss, x->sx unused) times the output gradient
 * packed by cg__gemm_pack_b (pb, in the taps' column order).  x holds
 * the floats its last tap's row reads. */
int cg__gemm_shift_dw(cg_context *ctx, size_t m, const cg__packed_b *pb,
                      const cg__shift_src *x, size_t taps, size_t ts,
                      cg__mat c);

/* The same for `batch` products, matrix i of each operand at its offset
 * plus i times its stride (sa, sb, sc; 0 repeats one matrix). */
int cg__sgemm_batched(cg_context *ctx, int ta, int tb, size_t m, size_t n,
                      size_t k, float alpha, cg__mat a, size_t sa, cg__mat b,
                      size_t sb, float beta, cg__mat c, size_t sc,
                      size_t batch);

/* The same with a bias: c = alpha op(a) op(b) + beta c + bias, bias a
 * vector of n floats (from bias->off; bias->ld unused) added to every row
 * of every matrix of c (NULL: none).  clgrad's kernels add it in their
 * epilogue, in the one launch; CLBlast has no epilogue, so where it runs
 * the bias is not added and *added (may be NULL when bias is) is 0: the
 * caller adds it.  Else *added is 1. */
int cg__sgemm_bias(cg_context *ctx, int ta, int tb, size_t m, size_t n,
                   size_t k, float alpha, cg__mat a, size_t sa, cg__mat b,
                   size_t sb, float beta, cg__mat c, size_t sc, size_t batch,
                   const cg__mat *bias, int *added);

/* The same for operands a and b of storage dtype ab (CG_F32, CG_F16 or
 * CG_BF16) and c and the bias of dtype cd (ab's own, or CG_F32 for 16-bit
 * operands): products summed in float32, c rounded once to cd.  16-bit
 * operands never run CLBlast's HGEMM (it sums in half): where CLBlast is
 * the float32 choice they run on its SGEMM through float32 copies, and
 * then the bias is the caller's (*added 0) only for a float32 c; a
 * 16-bit c gets it from gemm_narrow.  CG_EUNSUPPORTED where an int cannot
 * index their elements. */
int cg__gemm_dt(cg_context *ctx, cg_dtype ab, cg_dtype cd, int ta, int tb,
                size_t m, size_t n, size_t k, float alpha, cg__mat a,
                size_t sa, cg__mat b, size_t sb, float beta, cg__mat c,
                size_t sc, size_t batch, const cg__mat *bias, int *added);
/* Activations fused into a GEMM's epilogue (kernels/common.cl's CG_ACT
 * numbers): applied to C's values after alpha, beta and the bias. */
typedef enum cg__act {
    CG__ACT_NONE = 0,
    CG__ACT_RELU = 1,
    CG__ACT_TANH = 2,
    CG__ACT_SIGMOID = 3
} cg__act;
/* cg__gemm_dt with an activation act applied last (not where C is
 * beta-accumulated over calls: act of the finished C).  *added (not NULL
 * when bias or act is given) says whether the epilogue ran: 0 where
 * CLBlast ran the product, and the caller adds the bias and then applies
 * the activation. */
int cg__gemm_act(cg_context *ctx, cg_dtype ab, cg_dtype cd, int ta, int tb,
                 size_t m, size_t n, size_t k, float alpha, cg__mat a,
                 size_t sa, cg__mat b, size_t sb, float beta, cg__mat c,
                 size_t sc, size_t batch, const cg__mat *bias, cg__act act,
                 int *added);
/* How cg__gemm_dt reads 16-bit operands on ctx: mode 1 through float32
 * copies (gemm.cl's gemm_widen), 0 in place, -1 (the default) as gemm.c's
 * widen rule says; for the tests and benchmarks. */
int cg__gemm_widen_force(cg_context *ctx, int mode);

/* The linear layer's y = x W^T + b (b may be NULL) for x [..., in], W
 * [out, in], b [out]: one GEMM with the bias in its epilogue, recorded as
 * one node "linear" whose backward adds the weight's (and the input's)
 * gradient into an existing one with the GEMM itself.  x, W and b are
 * float32, or all float16 or all bfloat16 (summed in float32, y of their
 * dtype, the bias's gradient summed in float32); NULL and CG_ESHAPE on
 * shapes that do not fit, CG_EDTYPE on other dtypes or a mix; no other
 * checks (lib/nn checks the layer's input). */
cg_tensor *cg__linear(cg_tensor *x, cg_tensor *w, cg_tensor *b);
/* cg__linear followed by the activation act (relu, tanh, sigmoid): the
 * activation applied in the GEMM's epilogue where clgrad's kernels run
 * the product, recorded as one node "linear_relu" ("linear_tanh",
 * "linear_sigmoid") that saves the output rather than the product, whose
 * backward runs the activation's backward kernel on (y, g), then the
 * linear layer's products.  The same values as the two ops, bit for bit:
 * the epilogue evaluates the elementwise op's expression on the float32
 * sum, which the separate op reads back unrounded in float32; for 16-bit
 * tensors only relu fuses (it commutes with rounding), tanh and sigmoid
 * run as the two ops.  Where CLBlast runs the product, the two ops. */
cg_tensor *cg__linear_act(cg_tensor *x, cg_tensor *w, cg_tensor *b,
                          cg__act act);

/* Whether bwd is the custom ops' backward: a custom op records under its
 * user's name, which may be a built-in op's ("add"), so forward mode
 * tells them apart by this. */
int cg__custom_backward_is(cg__backward_fn bwd);

/* Which SGEMM runs: CG__GEMM_AUTO chooses per product (the default, or
 * what CLGRAD_GEMM says); the others force one backend (tests, tuning,
 * benchmarks).  Where clgrad's kernels cannot index an operand with an
 * int, CLBlast runs whatever is forced; K = 0 (C = beta C), which CLBlast
 * refuses, always runs clgrad's. */
typedef enum cg__gemm_backend {
    CG__GEMM_AUTO = 1,
    CG__GEMM_CLBLAST,
    CG__GEMM_CLGRAD,
    CG__GEMM_PACKED         /* clgrad's kernels over packed operands
                             * (kernels/gemm_pack.cl); TT, a K of 0 and
                             * packed operands of more than INT_MAX
                             * floats run CG__GEMM_CLGRAD instead */
} cg__gemm_backend;

void cg__gemm_force(cg_context *ctx, cg__gemm_backend b);

/* How the products on a B packed once (cg__gemm_packed_b, _bs) take
 * op(A): AUTO in place where A and C are float32, else packed first
 * (gemm_pack_a); PACK always packed first.  A test hook for the whole
 * process. */
typedef enum cg__packed_a {
    CG__PACKED_A_AUTO = 0,
    CG__PACKED_A_PACK
} cg__packed_a;
void cg__gemm_set_packed_a(cg__packed_a mode);

/* The backend that cg__sgemm_batched would choose for a float32 product
 * ta tb m x n x k over a batch (sa 0: one A for all) on ctx now, before
 * it checks the operands' sizes: CLGRAD_GEMM's, else the tuning entry's
 * or the built-in rules' (lib/ops/conv.c picks its forward by it). */
int cg__gemm_backend_of(cg_context *ctx, int ta, int tb, size_t m, size_t n,
                        size_t k, size_t sa, size_t batch,
                        cg__gemm_backend *out);
/* Live contexts that have run CLBlast (lib/ops/gemm.c clears CLBlast's
 * program cache when the last of them is freed). */
int cg__gemm_clblast_users(void);
/* Releases the per-class configurations and kernels of the GEMM entry
 * (lib/context.c, before the context goes). */
void cg__gemm_classes_free(cg_context *ctx);
/* The configuration in force for product class cls (lib/tune's
 * cg__gemm_class): gemm.cl's tunables VW, TM, TN, DVW, DTM, DTN, WG, and
 * the backend its entry fixes (-1: the built-in rule); for the tests. */
int cg__gemm_class_params(cg_context *ctx, int cls, long p[7], int *backend);

/* Leaves out of e, a "gemm" class entry measured on the product ta tb
 * m x n x k, its keys "clblast", "packed" and "pack" where they say what
 * the built-in rules say for that product, so that the rules go on
 * choosing for the class's other sizes (clgrad-tune's gemm stage, before
 * it records a class). */
void cg__gemm_entry_trim(cg_tuning_entry *e, int ta, int tb, size_t m,
                         size_t n, size_t k);

/* The largest column buffer (bytes) a convolution allocates before it
 * splits the batch into chunks (lib/ops/conv.c); 0 restores the default,
 * an eighth of the device's global memory.  For tests that force
 * chunking; not thread-safe against running convolutions. */
void cg__conv_set_col_limit(size_t bytes);
/* Work-items per compute unit that the direct kernels cut rows into
 * pieces for (0: the built-in 1024; tests: 1 keeps whole rows where there
 * are as many as compute units, SIZE_MAX cuts them into pieces of 8
 * outputs); not thread-safe against running convolutions. */
void cg__conv_set_direct_items(size_t per_cu);
/* Whether the im2col algorithm's forward at stride 1 reads the padded
 * images in place (kernels/gemm_pack.cl's gemm_shift) rather than
 * making columns: -1 by the built-in rule (lib/ops/conv.c's shifts), 0
 * never, 1 wherever it can (groups 1, stride 1, clgrad's product); for
 * tests, not thread-safe against running convolutions. */
void cg__conv_set_shift(int mode);

/* The algorithm a convolution with C input channels, K output channels
 * and G groups runs in direction dir (0: y, 1: dx and dW; 2 and 3 the
 * same of the transposed convolution from K to C channels) on ctx, by
 * lib/ops/conv.c's choice (CLGRAD_CONV_ALGO, the tuning entry of its
 * class, the built-in rule): 0 im2col + GEMM, 1 direct.  CG_EINVAL when
 * CLGRAD_CONV_ALGO is not auto, im2col or direct.  For the tests. */
int cg__conv_algo(cg_context *ctx, int dir, int64_t C, int64_t K,
                  int64_t G, int *algo);

/* Autocast (lib/ops/autocast.c).  An op of the low-precision list
 * (products) or of the float32 list (softmax, losses, norms, sums) asks,
 * at its entry, for its floating arguments in the dtype the open region
 * wants: cg__autocast_args fills out[0..n-1] with new references (NULL
 * stays NULL; int32 and already-right ones are references to themselves)
 * and returns 1 when it cast any, 0 when the op should go on with its own
 * arguments (outside a region, or nothing to cast; out[] all NULL), -1 on
 * error (cg_last_error set, nothing kept).  The op then calls itself on
 * out[] and drops them with cg__autocast_release. */
typedef enum cg__autocast_kind {
    CG__AC_LOW,     /* the region's dtype */
    CG__AC_F32      /* float32 */
} cg__autocast_kind;

int cg__autocast_args(cg__autocast_kind kind, int n, cg_tensor **args,
                      cg_tensor **out);
void cg__autocast_release(int n, cg_tensor **args);
void cg__autocast_free(cg_context *ctx);

/* The entry of an op returning a tensor: when autocast casts any of its
 * floating arguments (the rest of the macro's arguments), returns `call`,
 * the op made again on the cast arguments ac[0..], an array of as many. */
#define CG__AUTOCAST_RETURN(kind, ac, call, ...)                             \
    do {                                                                     \
        cg_tensor *cg_ac_in_[] = { __VA_ARGS__ }, *cg_ac_y_;                 \
        int cg_ac_n_ = (int)(sizeof cg_ac_in_ / sizeof cg_ac_in_[0]);        \
        int cg_ac_ = cg__autocast_args(kind, cg_ac_n_, cg_ac_in_, ac);       \
                                                                             \
        if (cg_ac_ < 0)                                                      \
            return NULL;                                                     \
        if (cg_ac_ > 0) {                                                    \
            cg_ac_y_ = (call);                                               \
            cg__autocast_release(cg_ac_n_, ac);                              \
            return cg_ac_y_;                                                 \
        }                                                                    \
    } while (0)

/* clFFT underneath the spectral ops (lib/ops/fft.c).  The kinds of 1-D
 * transform: complex to complex forward (e^-i) and inverse (e^+i), real
 * to the n/2+1 non-redundant bins, and those bins back to n reals (the
 * imaginary parts of bin 0 and, for even n, bin n/2 must be zero). */
typedef enum cg__fft_kind {
    CG__FFT_C2C_FWD,
    CG__FFT_C2C_INV,
    CG__FFT_R2C,
    CG__FFT_C2R
} cg__fft_kind;

/* Whether clFFT transforms length n (n >= 1 with no prime factor above
 * 13). */
int cg__fft_length_ok(size_t n);

/* Enqueues `batch` transforms of kind and length n, each multiplied by
 * scale, from the contiguous rows of buffer in (from its start: n complex
 * pairs a row, n reals for R2C, n/2+1 pairs for C2R) into the rows of out
 * (which must not be in).  The plan for (kind, n, batch, scale) is made
 * and baked on first use and kept in ctx (the 256 most recently used;
 * cg__fft_set_plan_limit) until cg__fft_free; the first
 * transform of a context takes a clFFT setup (clfftSetup once per
 * process).  The path is cg__fft_choose's: a length clFFT cannot do runs
 * Bluestein's algorithm (kernels/fft.cl) on plans of a longer length it
 * does, with temporaries from the pool; its chirps (and the complex
 * path's) are made once per (n, m, direction) and kept with the plans,
 * outside the pool, until cg__fft_free, as are the path radix's plans
 * (the passes' radices and twiddles, per length).  A clFFT failure names
 * the call and the clFFT code. */
int cg__fft_rows(cg_context *ctx, cg__fft_kind kind, size_t n, size_t batch,
                 float scale, cl_mem in, cl_mem out);

/* The path of a transform: clFFT's plan of the kind, Bluestein's
 * algorithm (complex clFFT transforms of a padded length), for a real
 * kind the complex clFFT transform of its length (the complex path), or
 * clgrad's own radix passes (kernels/fft.cl), which do every kind and
 * length.  cg__fft_choose: CLGRAD_FFT_PATH=clfft|bluestein|complex|radix|
 * auto (read at each call; anything else is CG_EINVAL), else the tuning
 * entry "fft" of the transform's class (lib/tune/internal.h), else
 * clFFT; off the path radix, a length clFFT cannot do is always
 * Bluestein, and the complex path of a complex kind is clFFT. */
typedef enum cg__fft_path {
    CG__FFT_CLFFT,
    CG__FFT_BLUESTEIN,
    CG__FFT_COMPLEX,
    CG__FFT_RADIX
} cg__fft_path;

int cg__fft_choose(cg_context *ctx, cg__fft_kind kind, size_t n,
                   cg__fft_path *out);

/* Complex transforms along the middle axis of `outer` contiguous
 * [n][inner] complex matrices (each column), from in into out (not in)
 * of the same layout, each multiplied by scale: what the path radix does
 * without moving the axis.  cg__fft_columns_ok: whether kind (complex
 * only) of length n runs so (the path is radix, a CLGRAD_FFT_PATH error
 * counts as no, and n >= 2 has no prime factor above 7);
 * cg__fft_columns fails with CG_EINVAL where it does not. */
int cg__fft_columns_ok(cg_context *ctx, cg__fft_kind kind, size_t n);
int cg__fft_columns(cg_context *ctx, cg__fft_kind kind, size_t n,
                    size_t outer, size_t inner, float scale, cl_mem in,
                    cl_mem out);

/* Releases ctx's plans and its clFFT setup (the last one tears clFFT
 * down); NULL-safe, and nothing when ctx ran no transform. */
void cg__fft_free(cg_context *ctx);

/* A transform's node (recorded as "fft", "ifft", "rfft", "irfft") and its
 * adjoint's ("fft_adjoint", ...: what a create_graph backward records):
 * their composite backwards, each recording the other (both ops are
 * linear), and the JVP rule of either, the op itself applied to the
 * tangent (lib/ops/spectral.c). */
int cg__spectral_graph(cg__node *n, cg_tensor *g, cg_tensor **gin);
int cg__spectral_adjoint_graph(cg__node *n, cg_tensor *h, cg_tensor **gin);
int cg__spectral_jvp(cg__node *n, cg_tensor *y, cg_tensor *const *t,
                     cg_tensor **out);

/* How many plans ctx holds and the seconds spent baking them; for the
 * tests and benchmarks. */
int cg__fft_plan_stats(const cg_context *ctx, int *nplans,
                       double *bake_seconds);

/* Keeps at most max_plans plans in ctx (0: the default, 256), destroying
 * the least recently used beyond it, now and as new plans are baked; a
 * destroyed plan is baked again when next needed.  For the tests. */
int cg__fft_set_plan_limit(cg_context *ctx, int max_plans);

#endif
