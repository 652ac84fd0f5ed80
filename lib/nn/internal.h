/* SPDX-License-Identifier: MIT */
/*
 * lib/nn/internal.h - layers (cg_module) and what the recurrent layers
 * stand on: launchers for the fused per-step kernels of kernels/rnn.cl.
 * The layer (lib/nn/rnn.c) owns the buffers, runs the input-projection and
 * weight-gradient GEMMs, and calls one step launcher per time step and
 * direction; nothing here waits for the device.
 */
#ifndef CG_NN_INTERNAL_H
#define CG_NN_INTERNAL_H

#include "cl/internal.h"

typedef enum cg__rnn_cell {
    CG__RNN_TANH,
    CG__RNN_RELU,
    CG__RNN_LSTM,       /* gates i, f, g, o */
    CG__RNN_GRU         /* gates r, z, n */
} cg__rnn_cell;

/* Tunables of kernels/rnn.cl: VW consecutive hidden units per work-item
 * as one floatVW (1, 2, 4, 8 or 16), RB batch rows per work-item (1..8),
 * WG work-items per work-group.  Zero fields take the defaults. */
typedef struct cg__rnn_tune {
    int vw, rb, wg;
    int hproj;          /* 1: the GEMM-path variant (HPROJ=1) */
} cg__rnn_tune;

/* An array inside a device buffer: element (row r, column j) at
 * mem[off + r * ld + j], in elements (floats, or 16-bit words for the
 * arrays a 16-bit step keeps in its dtype). */
typedef struct cg__rnn_mat {
    cl_mem mem;
    cl_int off, ld;
} cg__rnn_mat;

/* A dense array inside a device buffer, starting at element mem[off]. */
typedef struct cg__rnn_buf {
    cl_mem mem;
    cl_int off;
} cg__rnn_buf;

/* The kernels of one cell type built with one set of tunables. */
typedef struct cg__rnn_step {
    cg_context *ctx;
    cg__rnn_cell cell;
    int gates;                  /* G: 1, 3 or 4 */
    cg__rnn_tune tune;          /* defaults filled in */
    cg_dtype dtype;             /* the storage variant (CG_T) */
    cl_kernel fwd, bwd, pack_t, pack;   /* owned */
    cl_kernel jvp;              /* owned; the tangent step, built by
                                 * cg__rnn_jvp_step on first use */
} cg__rnn_step;

/* Builds (or finds in the context's programs) the step kernels for `cell`
 * with `tune` (NULL: defaults).  On error nothing is left to release. */
int cg__rnn_step_init(cg__rnn_step *s, cg_context *ctx, cg__rnn_cell cell,
                      const cg__rnn_tune *tune);

/* The same for the storage variant of dtype dt (CG_F32, CG_F16, CG_BF16:
 * kernels/rnn.cl built with -DCG_T).  In a 16-bit variant the weights,
 * biases, h states, output sequence, saved gates, dy and the gate
 * gradients dg / dgi are of dt; xproj (and the GEMM path's h W_hh^T), the
 * c states and the dh / dc carries stay float32. */
int cg__rnn_step_init_dt(cg__rnn_step *s, cg_context *ctx,
                         cg__rnn_cell cell, const cg__rnn_tune *tune,
                         cg_dtype dt);

/* Releases the kernels; s may be zeroed or already released. */
void cg__rnn_step_release(cg__rnn_step *s);

/* The step kernels' cell of a public cg_rnn_mode. */
cg__rnn_cell cg__rnn_cell_of(cg_rnn_mode mode);

/* The gate count G of a cell. */
int cg__rnn_gates(cg__rnn_cell cell);

/* H rounded up to the vector width: the row length of the packed W_hh. */
int cg__rnn_hpad(const cg__rnn_step *s, int H);

/* Lays out W_hh ([G*H, H] at w.mem + w.off) for the step kernels: wt
 * ([H, G, Hp] floats, transposed, for forward) and wp ([G*H, Hp], for
 * backward); either may be NULL.  Hp = cg__rnn_hpad(s, H), padding zero. */
int cg__rnn_pack_whh(const cg__rnn_step *s, cg__rnn_buf w, int H, cl_mem wt,
                     cl_mem wp);

/* One forward step t.  States and saved arrays are dense [B, H] / [B, 4H].
 * h_next and c_next must not alias h_prev and c_prev (other work-items
 * still read h_prev); c may be updated in place only if the caller does
 * not keep c_{t-1} for backward (it needs it). */
typedef struct cg__rnn_fwd_args {
    int B, H, t;
    cl_mem lengths;     /* int32 [B]; NULL: every row runs every step */
    cl_mem whh_t;       /* wt from cg__rnn_pack_whh */
    cg__rnn_mat xproj;  /* [B, G*H]: W_ih x_t, without the biases */
    cg__rnn_buf b_ih, b_hh;     /* [G*H] each, added by the step (GRU:
                                 * b_hn inside r * (W_hn h + b_hn)); a NULL
                                 * mem reads as zeros */
    cg__rnn_buf h_prev, h_next;
    cg__rnn_buf c_prev, c_next;     /* LSTM */
    cg__rnn_mat y;      /* the output sequence's slot for step t, [B, H] */
    cg__rnn_buf saved;  /* LSTM: i, f, g, o; GRU: r, z, n, W_hn h + b_hn */
} cg__rnn_fwd_args;

int cg__rnn_forward_step(const cg__rnn_step *s, const cg__rnn_fwd_args *a);

/* One backward step t (steps run t = T-1 down to 0), or with t = -1 the
 * launch after step 0 that only adds dgates_0 W_hh, leaving dh_0 in dh.
 * Before step T-1 the caller puts the gradient of h_n into dh and (LSTM)
 * that of c_n into dc; after the t = -1 launch they hold those of h_0 and
 * c_0.  dgates of step t goes to dg ([B, G*H]); the caller passes step
 * t+1's as dg_next (NULL mem at t = T-1). */
typedef struct cg__rnn_bwd_args {
    int B, H, t;
    cl_mem lengths;     /* as forward */
    cl_mem whh_p;       /* wp from cg__rnn_pack_whh */
    cg__rnn_buf dg_next;
    cg__rnn_mat dy;     /* gradient of output slot t; NULL mem: none */
    cl_mem dh, dc;      /* dense [B, H], updated in place */
    cg__rnn_buf saved;  /* forward's saved of step t (LSTM, GRU) */
    cg__rnn_buf h_prev; /* GRU: h_{t-1} */
    cg__rnn_buf h_t;    /* RNN: h_t */
    cg__rnn_buf c_prev, c_t;        /* LSTM */
    cg__rnn_buf dg;     /* pre-activation gradients; GRU: r, z, r*n_pre */
    cg__rnn_buf dgi;    /* GRU: r, z, n_pre (for W_ih and b_ih) */
} cg__rnn_bwd_args;

int cg__rnn_backward_step(const cg__rnn_step *s, const cg__rnn_bwd_args *a);

/* One tangent step t of forward-mode AD (kernels/rnn.cl's lstm_jvp,
 * gru_jvp, rnn_jvp, built on the first call with the step's own options):
 * after the primal's steps, from its saved activations.  h_prev / h_next
 * (and c_prev / c_next) are the tangent states, y the output tangent's
 * slot, xproj the float32 tangent of the input projection (with GRU
 * without the h_{t-1} W_hh'^T part, which goes in ph), whh_t the packed
 * W_hh as forward (or the GEMM path's product h'_{t-1} W_hh^T), b_ih and
 * b_hh the bias tangents (NULL mem: zero). */
typedef struct cg__rnn_jvp_args {
    cg__rnn_fwd_args f;
    cg__rnn_buf pc_prev, pc_t;  /* LSTM: the primal's c_{t-1}, c_t */
    cg__rnn_buf ph_prev;        /* GRU: the primal's h_{t-1} */
    cg__rnn_buf ph;             /* GRU: h_{t-1} W_hh'^T, [B, 3H]; NULL mem:
                                 * zero */
    cg__rnn_buf ph_t;           /* RNN: the primal's h_t */
} cg__rnn_jvp_args;

int cg__rnn_jvp_step(cg__rnn_step *s, const cg__rnn_jvp_args *a);

/* Times the step kernels of `cell` built with `tune` (NULL: defaults) at
 * batch B and hidden size H, as a layer queues them: `steps` forward
 * launches back to back after a warm-up, then `steps` backward ones, on
 * scratch buffers of pseudo-random values; *fwd_ms and *bwd_ms get the
 * wall time to cg_context_finish per launch.  For clgrad-tune and
 * tests/bench_rnn_step: the step kernels alone, without a layer's GEMMs,
 * whose time would bury the differences between variants. */
int cg__rnn_time_steps(cg_context *ctx, cg__rnn_cell cell,
                       const cg__rnn_tune *tune, int B, int H, int steps,
                       double *fwd_ms, double *bwd_ms);

/* ------------------------------------------------------------------------
 * Layers
 * ------------------------------------------------------------------------ */

#define CG__MODULE_MAX_PARAMS 64
#define CG__MODULE_MAX_BUFFERS 4

/* A container's children and, flattened over the whole subtree, its
 * parameters with dotted names ("0.weight"), rebuilt whenever a child is
 * added anywhere below. */
typedef struct cg__module_list {
    int n, cap;
    cg_module **child;          /* owned references */
    char **name;                /* owned */
    int nflat;
    cg_tensor **flat;           /* borrowed from the children */
    char **flat_name;           /* owned */
} cg__module_list;

struct cg_module {
    int refs;                   /* the owner, plus graph nodes (rnn) */
    const char *kind;
    cg_context *ctx;
    int training;
    int nparams;
    cg_tensor *params[CG__MODULE_MAX_PARAMS];   /* owned references */
    char *names[CG__MODULE_MAX_PARAMS];         /* owned */
    int nbuffers;
    cg_tensor *buffers[CG__MODULE_MAX_BUFFERS];     /* owned references:
                                 * state that is no parameter (running
                                 * statistics), no gradient */
    char *buffer_names[CG__MODULE_MAX_BUFFERS];     /* owned */
    int has_count;              /* batch norm with running statistics */
    int64_t count;              /* its num_batches_tracked */
    float eps, momentum;        /* batch norm */
    int pool[8];                /* pooling: kernel, stride, padding,
                                 * dilation (pairs); flatten: start, end */
    int pool_flags;             /* pooling: ceil_mode (1),
                                 * count_include_pad (2) */
    int bias;                   /* linear, conv2d: has a bias */
    cg_conv_options conv;       /* conv2d: its options */
    cg_conv_transpose_options convt;    /* conv_transpose2d: its options */
    cg_rnn_options rnn;         /* rnn: num_layers >= 1 filled in */
    cg__rnn_step step;          /* rnn: the fused step kernels */
    cg__rnn_step gstep;         /* rnn: the GEMM-path kernels, made on
                                 * first use (gstep.ctx set) */
    cg__rnn_step hstep[2][2];   /* rnn: the float16 [0] and bfloat16 [1]
                                 * variants of step [0] and gstep [1],
                                 * made on first use */
    int path;                   /* rnn: CG__RNN_PATH_* */
    long gemm_min_h;            /* rnn: the AUTO threshold in force when
                                 * the layer was made (tuning "rnn.path") */
    long packed_whh;            /* rnn: the GEMM path's step products on
                                 * W_hh packed once per pass (1) or on
                                 * gemm's choice (0): tuning "rnn.path"
                                 * "packed", else CG__RNN_PACKED_WHH */
    cg__module_list *list;      /* containers ("sequential"), else NULL */
    cg_tensor *(*act)(cg_tensor *);     /* activations: the op */
    cg_module *parent;          /* the container holding this one */
};

/* How a recurrent layer forms h W_hh^T per step: in the fused kernel, or
 * by a GEMM followed by the cell kernel (2 launches per step; 3 where the
 * GEMM runs on packed operands).  AUTO takes the GEMM path for
 * hidden_size >= gemm_min_h of the tuning entry "rnn.path" in force when
 * the layer was made (else CG__RNN_GEMM_MIN_H), or $CLGRAD_RNN_GEMM_MIN_H
 * when set; 0 means never.  On the GEMM path, the step products (forward
 * h W_hh^T, backward dg W_hh) run on W_hh packed once per pass
 * (cg__gemm_pack_b: gemm_pack_a and gemm_packed per step) where the
 * entry's "packed" is 1 (else CG__RNN_PACKED_WHH), or
 * $CLGRAD_RNN_PACKED_WHH when set, else through cg__sgemm's choice. */
enum { CG__RNN_PATH_AUTO, CG__RNN_PATH_FUSED, CG__RNN_PATH_GEMM };

/* The GEMM path's default threshold on hidden_size (clgrad-tune compares
 * an rnn.path entry with it). */
#define CG__RNN_GEMM_MIN_H 1024
/* The GEMM path's default for packing W_hh (0: today's cg__sgemm; the
 * tuning entries of the devices where packing was measured faster say
 * 1). */
#define CG__RNN_PACKED_WHH 0

/* Forces a recurrent layer's path (tests and benchmarks). */
int cg__rnn_set_path(cg_module *m, int path);
/* Sets whether its GEMM path packs W_hh (as the tuning entry's "packed";
 * $CLGRAD_RNN_PACKED_WHH still wins). */
int cg__rnn_set_packed(cg_module *m, int packed);

/* A module of `kind` with no parameters; NULL on host memory failure. */
cg_module *cg__module_new(cg_context *ctx, const char *kind);

/* Adds a new parameter of `shape` drawn from U(-bound, bound), or N(0, 1)
 * if bound is negative, named `name`. */
int cg__module_add_param(cg_module *m, const char *name, int ndim,
                         const int64_t *shape, float bound);

/* Adds t (reference taken over, also on failure) as parameter `name`
 * (requires grad set) or, buffer nonzero, as a buffer. */
int cg__module_add_tensor(cg_module *m, const char *name, cg_tensor *t,
                          int buffer);

/* Calls fn for every buffer of m's subtree in state-dict order (each
 * module's tensors, then its count), with the dotted name under prefix
 * (NULL: none): t is the buffer, or NULL for a batch norm's
 * num_batches_tracked, whose host count is *count.  Stops at and returns
 * fn's first nonzero status. */
typedef int (*cg__buffer_fn)(void *user, const char *name, cg_tensor *t,
                             int64_t *count);
int cg__module_visit_buffers(const cg_module *m, const char *prefix,
                             cg__buffer_fn fn, void *user);

/* The forward of batch norm, pooling and flatten layers (lib/nn/cnn.c);
 * *handled 0 when m is none of them. */
cg_tensor *cg__cnn_layer_forward(cg_module *m, cg_tensor *x, int *handled);
/* A linear layer's forward with activation act (lib/ops/internal.h's
 * cg__act, 0 none) fused into its GEMM (cg__linear_act): a container's
 * forward runs a linear layer followed by a relu, tanh or sigmoid layer
 * so. */
cg_tensor *cg__linear_forward_act(cg_module *m, cg_tensor *x, int act);

/* The convolution layers' shared parts: the channel, kernel and groups
 * check (CG_EINVAL naming `kind` and the values), and the parameters
 * "weight" [d0, d1, kh, kw] and, with bias, "bias" [nbias], both
 * U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = d1 kh kw, as PyTorch
 * initialises them; it sets m->bias. */
int cg__conv_layer_check(const char *kind, int in_channels, int out_channels,
                         const int kernel[2], int groups);
int cg__conv_layer_params(cg_module *m, int64_t d0, int64_t d1,
                          const int kernel[2], int bias, int64_t nbias);

/* Checks that m is a module of `kind`. */
int cg__module_check(const cg_module *m, const char *kind);

/* Containers (lib/nn/container.c): the flattened parameters that
 * cg_module_param and friends read, and the release of the children. */
void cg__module_list_free(cg__module_list *l);

cg_module *cg__module_ref(cg_module *m);
void cg__module_unref(cg_module *m);

#endif
