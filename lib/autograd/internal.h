/* SPDX-License-Identifier: MIT */
/*
 * lib/autograd/internal.h - graph nodes recorded by ops, and what their
 * backward functions may use.  Nothing here knows OpenCL.
 */
#ifndef CG_AUTOGRAD_INTERNAL_H
#define CG_AUTOGRAD_INTERNAL_H

#include "tensor/internal.h"

/* A recurrent layer takes its input, two initial states and four
 * parameters per direction. */
#define CG__NODE_INPUTS 16
#define CG__NODE_SAVED (CG__NODE_INPUTS + 1)
/* Outputs beyond the first (a recurrent layer's final states). */
#define CG__NODE_EXTRA 2

typedef struct cg__node cg__node;

/* Computes the gradients of the node's inputs from the gradient of its
 * output, `gout` (contiguous, the output's shape).  A node with extra
 * outputs finds their gradients in extra_acc[] (NULL: none) and may get a
 * NULL gout when only extra outputs were used.  For each input i with
 * n->needs[i] set it stores a new tensor of input i's shape in gin[i] (or
 * leaves NULL for "no gradient").  Runs in no-grad mode, so it may use the
 * public ops freely. */
typedef int (*cg__backward_fn)(cg__node *n, cg_tensor *gout,
                               cg_tensor **gin);

struct cg__node {
    int refs;
    const char *op;               /* static name, e.g. "add" */
    cg__backward_fn backward;
    int ninputs;
    cg_tensor *inputs[CG__NODE_INPUTS];   /* references */
    int needs[CG__NODE_INPUTS];           /* input requires grad */
    cg_tensor *saved[CG__NODE_SAVED];     /* detached references */
    double f[4];                         /* op parameters */
    int64_t i[2 * CG_MAX_DIMS + 2];
    /* An object backward needs that may outlive its creator's handle (a
     * custom op): the node holds a reference, dropped by `keep_unref` when
     * the node is freed. */
    void *keep;
    void (*keep_unref)(void *keep);
    /* A layer's composite backward for create_graph (a node with keep set
     * finds none in lib/ops/grad_graph.c's table), or NULL. */
    cg__backward_fn backward_graph;
    int out_ndim;
    int64_t out_shape[CG_MAX_DIMS];
    uint64_t seq;                 /* creation order */
    int released;                 /* saved tensors freed by backward */
    int nextra;                   /* extra outputs (cg__record_extra) */
    /* Scratch for backward. */
    cg_tensor *grad_acc;
    cg_tensor *extra_acc[CG__NODE_EXTRA];
    int mark;
};

/* If grad mode is on and any of the inputs requires grad, creates a node
 * for `out`, makes out require grad and returns the node (owned by out);
 * else returns NULL, which is not an error.  On host allocation failure
 * returns NULL with *status set. */
cg__node *cg__record(cg_tensor *out, const char *op, cg__backward_fn bwd,
                     int ninputs, cg_tensor *const *inputs, int *status);

/* Makes t, a further output of the op that recorded n, the node's extra
 * output number `slot` (1..CG__NODE_EXTRA): t requires grad and its
 * gradient reaches n's backward in n->extra_acc[slot - 1].  t takes a
 * reference to n. */
void cg__record_extra(cg__node *n, cg_tensor *t, int slot);

/* What has collected so far of the gradient of input k of n, for a
 * backward that can add its result into it itself (a GEMM with beta 1)
 * rather than return a new tensor for the engine to add in a second
 * pass: the accumulator, contiguous and of input k's shape, or NULL when
 * there is none yet (then the backward writes a new tensor, beta 0) or
 * it is shared.  A backward that adds into it stores a new reference to
 * it in gin[k], which the engine then leaves as it is.  Only during n's
 * backward. */
cg_tensor *cg__grad_into(cg__node *n, int k);

/* Saves a detached reference to t in slot k of the node. */
int cg__node_save(cg__node *n, int k, const cg_tensor *t);

void cg__node_unref(cg__node *n);

/* The backward pass behind cg_backward, cg_backward_ex and cg_grad (lib/
 * autograd/graph.c): create_graph runs the composite backward of each node
 * (cg__backward_graph_of) in grad mode.  With inputs (ninputs of them, at
 * most CG_GRAD_MAX_INPUTS; NULL: none) their gradients collect in
 * grads[] (new references, NULL where none reached) instead of any leaf's
 * grad, and only the nodes that lead to them run. */
int cg__backward_walk(cg_tensor *root, cg_tensor *grad_output,
                      int retain_graph, int create_graph, int ninputs,
                      cg_tensor *const *inputs, cg_tensor **grads);

/* Sets ctx's leaf-gradient hook (NULL: none): during a cg_backward or
 * cg_backward_ex of a graph on ctx (not cg_grad's, whose gradients go
 * elsewhere), fn(user, leaf) runs once for each leaf that gets a
 * gradient, as soon as the last node that adds to it has run (its grad
 * then holds the complete gradient, queued but perhaps not computed yet);
 * in the calling thread, so it may enqueue work after it.  A leaf that
 * gets no gradient gets no call.  Costs nothing while unset. */
void cg__set_grad_ready(cg_context *ctx,
                        void (*fn)(void *user, cg_tensor *leaf), void *user);

/* Nonzero while cg_backward runs backward functions. */
int cg__in_backward(void);
/* Nonzero while the innermost backward running is a create_graph one
 * (its composites record, and propagate tangents in a dual level). */
int cg__in_graph_backward(void);

/* Forward mode (lib/autograd/forward.c).  cg__record hands over to
 * cg__fw_record while a dual level is open on the output's context: it
 * records as cg__record does and, when an input has a tangent, checks
 * that the op has a JVP rule (CG_EUNSUPPORTED naming it otherwise), and
 * makes the node the output's pending tangent (a node of its own, not in
 * the reverse graph, when nothing requires grad), which the rule turns
 * into the tangent when it is first needed.  Suspended (nonzero) while a
 * rule runs, so that the ops it uses record no tangents. */
int cg__fw_suspended(void);
cg__node *cg__fw_record(cg_tensor *out, const char *op, cg__backward_fn bwd,
                        int ninputs, cg_tensor *const *inputs, int *status);
/* Suspends forward mode on this thread (on nonzero; nestable) or
 * resumes it (on 0): what ops compute in between gets no tangent (a
 * constant of a composite backward). */
void cg__fw_suspend(int on);
/* Computes every pending tangent of ctx's level. */
int cg__fw_flush(cg_context *ctx);
/* Drops every tangent of ctx's level and closes it, leaving
 * cg_last_error alone. */
void cg__fw_close(cg_context *ctx);

/* Ops that compute their outputs' tangents themselves, in their own call
 * (the recurrent layers: three outputs from one node, and a tangent
 * recurrence that wants the primal's buffers while they are at hand; the
 * elementwise ops: the tangent in the primal's launch).
 * cg__fw_wanted: nonzero when a dual level is open, not suspended, and one
 * of the inputs has a tangent.  cg__fw_input_tangent: t's tangent at the
 * level (computed if pending; borrowed), or NULL for none (t NULL, or no
 * tangent) or on failure (*status).  cg__fw_record_own: cg__record for
 * the reverse graph alone (no pending tangent, no rule looked up).
 * cg__fw_attach: gives t (an output of the op) the tangent `tangent`,
 * taking it over. */
int cg__fw_wanted(int ninputs, cg_tensor *const *inputs);
cg_tensor *cg__fw_input_tangent(cg_tensor *t, int *status);
cg__node *cg__fw_record_own(cg_tensor *out, const char *op,
                            cg__backward_fn bwd, int ninputs,
                            cg_tensor *const *inputs, int *status);
void cg__fw_attach(cg_tensor *t, cg_tensor *tangent);

/* A JVP rule (lib/autograd/jvp.c): from the node the op filled (as for
 * its backward), its output y and its inputs' tangents t[k] (NULL: zero;
 * at least one is set), stores y's new tangent (y's shape and dtype) in
 * *out.  Runs in no-grad mode with forward mode suspended. */
typedef int (*cg__jvp_fn)(cg__node *n, cg_tensor *y, cg_tensor *const *t,
                          cg_tensor **out);
/* The rule of op `op`, or NULL when it has none yet. */
cg__jvp_fn cg__jvp_rule(const char *op);

#endif
