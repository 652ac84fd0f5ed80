/* SPDX-License-Identifier: MIT */
/*
 * lib/autograd/graph.c - recording nodes, reverse-mode backward, no-grad
 * mode, and the graph as Graphviz DOT.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/internal.h"
#include "ops/internal.h"

static _Thread_local int no_grad_depth;
/* Nonzero while cg_backward runs the backward functions (autocast leaves
 * them alone: they run in the dtypes the forward pass saved). */
static _Thread_local int backward_depth;

int
cg__in_backward(void)
{
    return backward_depth != 0;
}
static _Thread_local uint64_t node_seq;

void
cg_no_grad_enter(void)
{
    no_grad_depth++;
}

void
cg_no_grad_leave(void)
{
    if (no_grad_depth > 0)
        no_grad_depth--;
}

int
cg_is_grad_enabled(void)
{
    return no_grad_depth == 0;
}

static void
release_saved(cg__node *n)
{
    int k;

    for (k = 0; k < CG__NODE_SAVED; k++) {
        cg_tensor_free(n->saved[k]);
        n->saved[k] = NULL;
    }
    for (k = 0; k < n->ninputs; k++) {
        cg_tensor_free(n->inputs[k]);
        n->inputs[k] = NULL;
    }
    n->released = 1;
}

void
cg__node_unref(cg__node *n)
{
    int k;

    if (!n || --n->refs > 0)
        return;
    release_saved(n);
    cg_tensor_free(n->grad_acc);
    for (k = 0; k < CG__NODE_EXTRA; k++)
        cg_tensor_free(n->extra_acc[k]);
    if (n->keep_unref)
        n->keep_unref(n->keep);
    free(n);
}

cg__node *
cg__record(cg_tensor *out, const char *op, cg__backward_fn bwd, int ninputs,
           cg_tensor *const *inputs, int *status)
{
    cg__node *n;
    int k, any = 0;

    *status = CG_OK;
    if (out->ctx->fwad_level && !cg__fw_suspended())
        return cg__fw_record(out, op, bwd, ninputs, inputs, status);
    if (!cg_is_grad_enabled())
        return NULL;
    for (k = 0; k < ninputs; k++)
        if (inputs[k] && inputs[k]->requires_grad)
            any = 1;
    if (!any)
        return NULL;
    n = cg__calloc(1, sizeof *n);
    if (!n) {
        *status = CG_EHOSTMEM;
        return NULL;
    }
    n->refs = 1;
    n->op = op;
    n->backward = bwd;
    n->ninputs = ninputs;
    n->seq = ++node_seq;
    for (k = 0; k < ninputs; k++) {
        n->inputs[k] = cg_tensor_ref(inputs[k]);
        n->needs[k] = inputs[k] && inputs[k]->requires_grad;
    }
    n->out_ndim = out->ndim;
    memcpy(n->out_shape, out->shape, sizeof n->out_shape);
    out->grad_fn = n;
    out->grad_fn_unref = cg__node_unref;
    out->requires_grad = 1;
    return n;
}

void
cg__record_extra(cg__node *n, cg_tensor *t, int slot)
{
    n->refs++;
    t->grad_fn = n;
    t->grad_fn_unref = cg__node_unref;
    t->grad_slot = slot;
    t->requires_grad = 1;
    if (slot > n->nextra)
        n->nextra = slot;
}

int
cg__node_save(cg__node *n, int k, const cg_tensor *t)
{
    cg_tensor *d = cg__tensor_view(t, t->ndim, t->shape, t->strides,
                                   t->offset);

    if (!d)
        return CG_EHOSTMEM;
    cg_tensor_free(n->saved[k]);
    n->saved[k] = d;
    return CG_OK;
}

int
cg_tensor_set_requires_grad(cg_tensor *t, int requires_grad)
{
    cg__error_clear();
    if (!t)
        return cg__error(CG_EINVAL, "t is NULL");
    if (t->grad_fn)
        return cg__error(CG_ESTATE, "requires_grad can only be set on a "
                         "leaf; this tensor was made by '%s'",
                         t->grad_fn->op);
    if (requires_grad && t->dtype != CG_F32 && t->dtype != CG_F16 &&
        t->dtype != CG_BF16)
        return cg__error(CG_EDTYPE, "only float32, float16 and bfloat16 "
                         "tensors can require grad, not %s",
                         cg__dtype_name(t->dtype));
    t->requires_grad = requires_grad != 0;
    return CG_OK;
}

int
cg_tensor_requires_grad(const cg_tensor *t)
{
    return t && t->requires_grad;
}

int
cg_tensor_is_leaf(const cg_tensor *t)
{
    return t && !t->grad_fn;
}

cg_tensor *
cg_tensor_grad(const cg_tensor *t)
{
    return t ? t->grad : NULL;
}

int
cg_tensor_zero_grad(cg_tensor *t)
{
    cg__error_clear();
    if (!t)
        return cg__error(CG_EINVAL, "t is NULL");
    cg_tensor_free(t->grad);
    t->grad = NULL;
    return CG_OK;
}

cg_tensor *
cg_detach(cg_tensor *t)
{
    cg__error_clear();
    if (cg__check_tensor(t, "t", CG__ANY_DTYPE))
        return NULL;
    return cg__tensor_view(t, t->ndim, t->shape, t->strides, t->offset);
}

/* ------------------------------------------------------------------------
 * Backward
 * ------------------------------------------------------------------------ */

typedef struct {
    cg__node **v;
    size_t n, cap;
} node_list;

/* What a pass does besides the plain walk.  create_graph runs each
 * node's composite backward (cg__backward_graph_of) in grad mode, so
 * that the gradients are recorded and can be differentiated again.
 * inputs (cg_grad: n of them, NULL for cg_backward) collects the
 * gradients of those tensors into grads[] instead of any leaf's grad. */
typedef struct {
    int create_graph;
    int n;
    cg_tensor *const *inputs;
    cg_tensor **grads;
} walk;

/* The pass running on this thread (for cg__grad_into), or NULL. */
static _Thread_local const walk *cur_walk;

int
cg__in_graph_backward(void)
{
    return backward_depth != 0 && cur_walk && cur_walk->create_graph;
}

static int
push(node_list *l, cg__node *n)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        cg__node **v = cg__realloc(l->v, cap * sizeof *v);

        if (!v)
            return CG_EHOSTMEM;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = n;
    return CG_OK;
}

/* Depth-first from root without recursion, filling `order` in post-order:
 * every node comes after the nodes of its inputs, so walking `order` from
 * the end visits a node before the nodes it passes gradients to.  A node
 * is marked 1 while on the stack and 2 once in `order`, where it holds a
 * reference; the caller unmarks and unreferences `order`.  A node is
 * marked only once pushed and leaves the stack only once in `order`, so on
 * failure the marked nodes are those of `order` and of the stack; this
 * unmarks the stack's, or a later backward would skip them. */
static int
topo_sort(cg__node *root, node_list *order)
{
    node_list stack = { 0 };
    int status;
    size_t i;

    if ((status = push(&stack, root)) == CG_OK)
        root->mark = 1;
    while (status == CG_OK && stack.n > 0) {
        cg__node *n = stack.v[stack.n - 1], *next = NULL;
        int k;

        for (k = 0; k < n->ninputs && !next; k++) {
            cg_tensor *in = n->inputs[k];

            if (n->needs[k] && in && in->grad_fn && !in->grad_fn->mark)
                next = in->grad_fn;
        }
        if (next) {
            if ((status = push(&stack, next)) == CG_OK)
                next->mark = 1;
        } else if ((status = push(order, n)) == CG_OK) {
            stack.n--;
            n->refs++;
            n->mark = 2;
        }
    }
    for (i = 0; i < stack.n; i++)
        stack.v[i]->mark = 0;
    free(stack.v);
    return status;
}

/* acc += g, or when acc is empty acc = g itself if nothing else can see
 * it (the caller's reference is the only one to g and to its storage, and
 * it is contiguous from the storage's start: later accumulation writes
 * into it in place), else a contiguous copy of g.  Taking it saves a copy
 * launch per node and leaf on the common path, where every node passes
 * back fresh gradients.  An accumulator at an offset into its storage (a
 * slice of concat's gradient, its other slices freed) gave wrong
 * gradients of split views and of the LSTM's Hessian-vector products:
 * taken only at offset 0. */
static int
accumulate(cg_tensor **acc, cg_tensor *g)
{
    cg_tensor *sum;

    if (g == *acc)      /* added by the backward itself (cg__grad_into) */
        return CG_OK;
    /* A gradient made by a create_graph backward is part of a graph:
     * adding into it in place would change what that graph computed. */
    if (*acc && (*acc)->grad_fn) {
        if (!(sum = cg_add(*acc, g)))
            return cg__last_status();
        cg_tensor_free(*acc);
        *acc = sum;
        return CG_OK;
    }
    if (!*acc && g->refs == 1 && g->storage->refs == 1 && !g->grad_fn &&
        g->offset == 0 && cg_tensor_is_contiguous(g)) {
        *acc = cg_tensor_ref(g);
        return CG_OK;
    }
    if (!*acc) {
        *acc = cg__copy_contiguous(g);
        return *acc ? CG_OK : cg__last_status();
    }
    sum = cg__axpy_inplace(*acc, g, 1.0f) == CG_OK ? *acc : NULL;
    return sum ? CG_OK : cg__last_status();
}

/* Where the gradient of t collects: its node's slot, or a leaf's grad. */
static cg_tensor **
grad_target(cg_tensor *t)
{
    if (!t->grad_fn)
        return &t->grad;
    return t->grad_slot ? &t->grad_fn->extra_acc[t->grad_slot - 1]
                        : &t->grad_fn->grad_acc;
}

static cg_tensor **walk_target(const walk *w, cg_tensor *t);

cg_tensor *
cg__grad_into(cg__node *n, int k)
{
    cg_tensor *in = n->inputs[k], **target, *acc;

    /* create_graph adds out of place; cg_grad's leaves collect apart */
    if (!in || !n->needs[k] || (cur_walk && cur_walk->create_graph))
        return NULL;
    target = cur_walk ? walk_target(cur_walk, in) : grad_target(in);
    if (!target)
        return NULL;
    acc = *target;
    /* Nothing else may see the accumulator's memory: a backward that
     * reads a tensor sharing it (a view the graph saved, a reference the
     * caller holds) while writing into it would read its own output. */
    if (!acc || acc->refs != 1 || acc->storage->refs != 1 ||
        acc->grad_fn || !cg_tensor_is_contiguous(acc))
        return NULL;
    return acc;
}

/* Frees the gradients collected for a node. */
static void
drop_acc(cg__node *n)
{
    int k;

    cg_tensor_free(n->grad_acc);
    n->grad_acc = NULL;
    for (k = 0; k < CG__NODE_EXTRA; k++) {
        cg_tensor_free(n->extra_acc[k]);
        n->extra_acc[k] = NULL;
    }
}

static int
has_grad(const cg__node *n)
{
    int k;

    for (k = 0; k < n->nextra; k++)
        if (n->extra_acc[k])
            return 1;
    return n->grad_acc != NULL;
}

static int
check_released(const node_list *order)
{
    size_t i;

    for (i = 0; i < order->n; i++)
        if (order->v[i]->released)
            return cg__error(CG_ESTATE, "backward through a graph a second "
                             "time: node '%s' was freed by the first "
                             "backward; pass retain_graph to keep it",
                             order->v[i]->op);
    return CG_OK;
}

/* Where the walk collects t's gradient: grad_target's, except that for
 * cg_grad a leaf's goes to its slot of grads[] (NULL: a leaf not asked
 * about, whose gradient is dropped). */
static cg_tensor **
walk_target(const walk *w, cg_tensor *t)
{
    int j;

    if (t->grad_fn || !w->inputs)
        return grad_target(t);
    for (j = 0; j < w->n; j++)
        if (w->inputs[j] == t)
            return &w->grads[j];
    return NULL;
}

/* create_graph's accumulation: out of place and recorded, since the sum
 * is part of the graph.  acc takes g itself, except that a leaf's grad
 * (which a later plain backward adds into in place) takes a copy of a
 * g without a graph that something else may still see. */
static int
accumulate_graph(cg_tensor **acc, cg_tensor *g, int leaf_grad)
{
    cg_tensor *sum;

    if (!*acc) {
        if (leaf_grad && !g->grad_fn && (g->refs != 1 ||
                                         g->storage->refs != 1 ||
                                         !cg_tensor_is_contiguous(g)))
            *acc = cg__copy_contiguous(g);
        else
            *acc = cg_tensor_ref(g);
        return *acc ? CG_OK : cg__last_status();
    }
    if (!(sum = cg_add(*acc, g)))
        return cg__last_status();
    cg_tensor_free(*acc);
    *acc = sum;
    return CG_OK;
}

static int
walk_accumulate(const walk *w, cg_tensor *t, cg_tensor *g)
{
    cg_tensor **acc = walk_target(w, t);

    if (!acc)
        return CG_OK;
    return w->create_graph ? accumulate_graph(acc, g, !t->grad_fn &&
                                              !w->inputs)
                           : accumulate(acc, g);
}

/* cg_grad: marks 3 the nodes of order through which a gradient reaches
 * one of w's inputs (order is post-order, so a node's inputs' nodes come
 * first); the walk runs only those. */
static void
mark_useful(const node_list *order, const walk *w)
{
    size_t i;
    int k, j;

    for (i = 0; i < order->n; i++) {
        cg__node *n = order->v[i];

        for (k = 0; k < n->ninputs && n->mark != 3; k++) {
            cg_tensor *in = n->inputs[k];

            if (!n->needs[k] || !in)
                continue;
            if (in->grad_fn && in->grad_fn->mark == 3)
                n->mark = 3;
            for (j = 0; j < w->n; j++)
                if (w->inputs[j] == in)
                    n->mark = 3;
        }
    }
}

/* cg_grad: takes a reference to what collected for the inputs that n
 * made, before n's backward runs (nothing adds to it afterwards). */
static void
capture(const walk *w, cg__node *n)
{
    int j;

    for (j = 0; j < w->n; j++) {
        cg_tensor *t = w->inputs[j], *acc;

        if (t->grad_fn != n || w->grads[j])
            continue;
        acc = t->grad_slot ? n->extra_acc[t->grad_slot - 1] : n->grad_acc;
        w->grads[j] = acc ? cg_tensor_ref(acc) : NULL;
    }
}

/* create_graph: fails before anything runs if a node to be run has no
 * composite backward. */
static int
check_graph_support(const node_list *order, const walk *w)
{
    size_t i;

    for (i = 0; i < order->n; i++) {
        cg__node *n = order->v[i];

        if (w->inputs && n->mark != 3)
            continue;
        if (!cg__backward_graph_of(n))
            return cg__error(CG_EUNSUPPORTED, "backward with create_graph "
                             "through '%s': this op has no double backward "
                             "(see Autograd in clgrad.h for the ops that "
                             "have one)", n->op);
    }
    return CG_OK;
}

static int
check_root(cg_tensor *root, cg_tensor *grad_output)
{
    char s1[128], s2[128];
    int status;

    if (!root)
        return cg__error(CG_EINVAL, "root is NULL");
    if (!root->requires_grad)
        return cg__error(CG_ESTATE, "backward on a tensor that does not "
                         "require grad");
    if (grad_output) {
        if ((status = cg__check_tensor(grad_output, "grad_output",
                                       CG__ANY_DTYPE)))
            return status;
        if (grad_output->dtype != root->dtype)
            return cg__error(CG_EDTYPE, "grad_output is %s, the root %s",
                             cg__dtype_name(grad_output->dtype),
                             cg__dtype_name(root->dtype));
        if (grad_output->ctx != root->ctx)
            return cg__error(CG_ECONTEXT, "grad_output and root belong to "
                             "different contexts");
        if (grad_output->ndim != root->ndim ||
            memcmp(grad_output->shape, root->shape,
                   (size_t)root->ndim * sizeof(int64_t)) != 0)
            return cg__error(CG_ESHAPE, "grad_output has shape %s, the root "
                             "%s", cg__shape_str(grad_output->ndim,
                                                 grad_output->shape, s1,
                                                 sizeof s1),
                             cg__shape_str(root->ndim, root->shape, s2,
                                           sizeof s2));
    } else if (cg_tensor_numel(root) != 1) {
        return cg__error(CG_ESHAPE, "backward without grad_output needs a "
                         "one-element root, not shape %s",
                         cg__shape_str(root->ndim, root->shape, s1,
                                       sizeof s1));
    }
    return CG_OK;
}

/* The leaf-gradient hook's bookkeeping: with `set`, counts in each leaf's
 * bw_pending the inputs of the walk's nodes that pass it a gradient;
 * without, clears the counts (after a failure). */
static void
count_pending(const node_list *order, int set)
{
    size_t i;
    int k;

    for (i = 0; i < order->n; i++) {
        cg__node *n = order->v[i];

        for (k = 0; k < n->ninputs; k++) {
            cg_tensor *in = n->inputs[k];

            if (in && n->needs[k] && !in->grad_fn)
                in->bw_pending = set ? in->bw_pending + 1 : 0;
        }
    }
}

/* Node n has run (or had nothing to pass back): calls the hook for each
 * leaf input whose last contribution this was and that has a gradient. */
static void
leaves_done(cg__node *n, void (*hook)(void *, cg_tensor *), void *user)
{
    int k;

    for (k = 0; k < n->ninputs; k++) {
        cg_tensor *in = n->inputs[k];

        if (in && n->needs[k] && !in->grad_fn && in->bw_pending > 0 &&
            --in->bw_pending == 0 && in->grad)
            hook(user, in);
    }
}

void
cg__set_grad_ready(cg_context *ctx, void (*fn)(void *user, cg_tensor *leaf),
                   void *user)
{
    ctx->grad_ready = fn;
    ctx->grad_ready_user = user;
}

/* The seed: grad_output itself where it is contiguous (create_graph:
 * always, so that the gradients are differentiable in it too), else a
 * contiguous copy; or ones.  The walk never writes into a gradient that
 * something else holds (accumulate, cg__grad_into: refs of 1 alone), so
 * the caller's tensor is not changed, and a backward at a layer's output
 * (clgrad-bench's conv layers: 2 MiB) reads it without a copy. */
static cg_tensor *
make_seed(cg_tensor *root, cg_tensor *grad_output, int create_graph)
{
    cg_tensor *seed;

    if (grad_output)
        return create_graph || cg_tensor_is_contiguous(grad_output)
               ? cg_tensor_ref(grad_output)
               : cg__copy_contiguous(grad_output);
    seed = cg__tensor_empty(root->ctx, root->dtype, root->ndim, root->shape);
    if (seed && cg__fill(seed, 1.0f) != CG_OK) {
        cg_tensor_free(seed);
        seed = NULL;
    }
    return seed;
}

static int
run_backward(cg_tensor *root, cg_tensor *grad_output, int retain_graph,
             const walk *w)
{
    node_list order = { 0 };
    const walk *prev;
    cg_tensor *seed;
    void (*hook)(void *, cg_tensor *);
    int status;
    size_t i;

    if ((status = check_root(root, grad_output)))
        return status;
    /* Pending tangents read their nodes, which this backward may free. */
    if (root->ctx->fwad_level && (status = cg__fw_flush(root->ctx)))
        return status;
    if (!w->create_graph)
        cg_no_grad_enter();
    backward_depth++;
    prev = cur_walk;
    cur_walk = w;
    if (!(seed = make_seed(root, grad_output, w->create_graph))) {
        status = cg__last_status();
        goto out;
    }
    if (!root->grad_fn) {           /* a leaf: its gradient is the seed */
        status = walk_accumulate(w, root, seed);
        goto out;
    }
    status = topo_sort(root->grad_fn, &order);
    if (status == CG_OK)
        status = check_released(&order);
    if (status == CG_OK && w->inputs)
        mark_useful(&order, w);
    if (status == CG_OK && w->create_graph)
        status = check_graph_support(&order, w);
    if (status)
        goto out;
    *grad_target(root) = seed;
    seed = NULL;
    hook = w->inputs ? NULL : root->ctx->grad_ready;
    if (hook)
        count_pending(&order, 1);
    /* order is post-order (inputs first); walk it from the end. */
    for (i = order.n; i-- > 0 && status == CG_OK;) {
        cg__node *n = order.v[i];
        cg_tensor *gin[CG__NODE_INPUTS] = { NULL };
        int k;

        if (!has_grad(n)) {
            if (hook)
                leaves_done(n, hook, root->ctx->grad_ready_user);
            continue;
        }
        if (w->inputs) {
            capture(w, n);
            if (n->mark != 3) {
                drop_acc(n);
                continue;
            }
        }
        status = w->create_graph
                 ? cg__backward_graph_of(n)(n, n->grad_acc, gin)
                 : n->backward(n, n->grad_acc, gin);
        /* n's gradient is used up: dropped first, a gradient passed on
         * as a view of it (a reshape's, a transpose's) or as itself then
         * owns its memory alone, and accumulate takes it without a
         * copy. */
        drop_acc(n);
        for (k = 0; k < n->ninputs; k++) {
            cg_tensor *in = n->inputs[k];

            if (status == CG_OK && gin[k] && n->needs[k])
                status = walk_accumulate(w, in, gin[k]);
            cg_tensor_free(gin[k]);
        }
        if (hook && status == CG_OK)
            leaves_done(n, hook, root->ctx->grad_ready_user);
        /* Its saved tensors are needed no more: free them now, as
         * PyTorch does, so that a deep graph's activations go as the
         * walk passes them rather than all at its end. */
        if (!retain_graph && !w->create_graph && status == CG_OK)
            release_saved(n);
    }
    if (hook && status != CG_OK)
        count_pending(&order, 0);
out:
    /* create_graph keeps the graph: the gradients' graph refers to it. */
    for (i = 0; i < order.n; i++) {
        cg__node *n = order.v[i];

        n->mark = 0;
        drop_acc(n);
        if (!retain_graph && !w->create_graph && status == CG_OK)
            release_saved(n);
    }
    for (i = 0; i < order.n; i++)
        cg__node_unref(order.v[i]);
    free(order.v);
    cg_tensor_free(seed);
    cur_walk = prev;
    backward_depth--;
    if (!w->create_graph)
        cg_no_grad_leave();
    return status;
}

int
cg_backward(cg_tensor *root, cg_tensor *grad_output, int retain_graph)
{
    walk w = { 0, 0, NULL, NULL };

    cg__error_clear();
    return run_backward(root, grad_output, retain_graph, &w);
}

int
cg_backward_ex(cg_tensor *root, cg_tensor *grad_output, int flags)
{
    walk w = { 0, 0, NULL, NULL };

    cg__error_clear();
    if (flags & ~(CG_GRAD_RETAIN_GRAPH | CG_GRAD_CREATE_GRAPH))
        return cg__error(CG_EINVAL, "cg_backward_ex: unknown flags 0x%x",
                         (unsigned)flags);
    w.create_graph = (flags & CG_GRAD_CREATE_GRAPH) != 0;
    return run_backward(root, grad_output,
                        (flags & CG_GRAD_RETAIN_GRAPH) != 0, &w);
}

int
cg__backward_walk(cg_tensor *root, cg_tensor *grad_output, int retain_graph,
                  int create_graph, int ninputs, cg_tensor *const *inputs,
                  cg_tensor **grads)
{
    walk w;

    w.create_graph = create_graph;
    w.n = ninputs;
    w.inputs = inputs;
    w.grads = grads;
    return run_backward(root, grad_output, retain_graph, &w);
}

/* ------------------------------------------------------------------------
 * Graphviz DOT
 * ------------------------------------------------------------------------ */

typedef struct {
    char *s;
    size_t n, cap;
    int failed;
} strbuf;

static void
sb_printf(strbuf *b, const char *fmt, ...) CG__PRINTF(2, 3);

static void
sb_printf(strbuf *b, const char *fmt, ...)
{
    va_list ap;
    int need;

    if (b->failed)
        return;
    for (;;) {
        va_start(ap, fmt);
        need = vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        if (need < 0) {
            b->failed = 1;
            return;
        }
        if ((size_t)need < b->cap - b->n) {
            b->n += (size_t)need;
            return;
        }
        {
            size_t cap = (b->cap + (size_t)need + 1) * 2;
            char *s = realloc(b->s, cap);

            if (!s) {
                b->failed = 1;
                return;
            }
            b->s = s;
            b->cap = cap;
        }
    }
}

char *
cg_graph_dot(const cg_tensor *t)
{
    node_list order = { 0 };
    strbuf b = { NULL, 0, 0, 0 };
    char shape[128];
    size_t i;
    int k, freed = 0;

    cg__error_clear();
    if (!t) {
        cg__error(CG_EINVAL, "t is NULL");
        return NULL;
    }
    b.s = malloc(256);
    b.cap = b.s ? 256 : 0;
    b.failed = !b.s;
    sb_printf(&b, "digraph clgrad {\n  rankdir=BT;\n  node [fontname="
              "\"Helvetica\"];\n");
    cg__shape_str(t->ndim, t->shape, shape, sizeof shape);
    sb_printf(&b, "  out [label=\"result\\n%s\", shape=box, style=filled, "
              "fillcolor=\"#c0e0ff\"];\n", shape);
    if (t->grad_fn) {
        if (topo_sort(t->grad_fn, &order) != CG_OK)
            b.failed = 1;
        sb_printf(&b, "  out -> n%llu;\n",
                  (unsigned long long)t->grad_fn->seq);
    }
    for (i = 0; i < order.n; i++) {
        cg__node *n = order.v[i];

        cg__shape_str(n->out_ndim, n->out_shape, shape, sizeof shape);
        sb_printf(&b, "  n%llu [label=\"%s\\n%s\"];\n",
                  (unsigned long long)n->seq, n->op, shape);
        /* A backward without retain_graph dropped the node's inputs, so
         * the walk ends here: say so in the picture rather than draw a
         * lone node that looks like the whole graph. */
        if (n->released) {
            if (!freed)
                sb_printf(&b, "  freed [label=\"graph freed by backward:\\n"
                          "call cg_graph_dot before cg_backward,\\nor pass "
                          "retain_graph to cg_backward\", shape=note, "
                          "style=filled, fillcolor=\"#ffd0d0\"];\n");
            freed = 1;
            sb_printf(&b, "  n%llu -> freed [style=dashed];\n",
                      (unsigned long long)n->seq);
        }
        for (k = 0; k < n->ninputs; k++) {
            cg_tensor *in = n->inputs[k];

            if (!in)
                continue;
            if (in->grad_fn) {
                sb_printf(&b, "  n%llu -> n%llu;\n",
                          (unsigned long long)n->seq,
                          (unsigned long long)in->grad_fn->seq);
                continue;
            }
            cg__shape_str(in->ndim, in->shape, shape, sizeof shape);
            sb_printf(&b, "  l%p [label=\"%s\\n%s\", shape=box%s];\n",
                      (void *)in, in->requires_grad ? "leaf (requires grad)"
                      : "constant", shape, in->requires_grad
                      ? ", style=filled, fillcolor=\"#c0ffc0\"" : "");
            sb_printf(&b, "  n%llu -> l%p;\n", (unsigned long long)n->seq,
                      (void *)in);
        }
    }
    sb_printf(&b, "}\n");
    for (i = 0; i < order.n; i++) {
        order.v[i]->mark = 0;
        cg__node_unref(order.v[i]);
    }
    free(order.v);
    if (b.failed) {
        free(b.s);
        cg__error(CG_EHOSTMEM, "out of host memory writing DOT");
        return NULL;
    }
    return b.s;
}
