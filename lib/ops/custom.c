/* SPDX-License-Identifier: MIT */
/*
 * lib/ops/custom.c - differentiable ops whose kernels the user writes (see
 * "Custom ops" in clgrad.h for the kernel calling convention).
 *
 * The op's program goes through cg__program_get_source, so it is built
 * once per context and kept in the on-disk binary cache like clgrad's own
 * kernels.  The program is named after the op and a hash of its source:
 * two ops that share a name but not a source never share a program.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/internal.h"

#define MAX_NAME 64
#define MAX_PARAMS 1024
/* The public limit on a custom op's inputs (clgrad.h). */
#define MAX_INPUTS 8

struct cg_custom_op {
    int refs;                /* the creator's handle + recorded nodes */
    cg_context *ctx;
    char *name;
    int ninputs;
    cg_shape_rule shape_rule;
    void *user;
    cl_kernel forward;       /* owned */
    cl_kernel backward[CG__NODE_INPUTS];
    cg_buffer *params;       /* max(nparams, 1) floats */
};

/* ------------------------------------------------------------------------
 * Creation
 * ------------------------------------------------------------------------ */

/* The name goes into #line and into cache labels, so it must not need
 * quoting. */
static int
check_name(const char *name)
{
    size_t i, n;

    if (!name)
        return cg__error(CG_EINVAL, "custom op: name is NULL");
    n = strlen(name);
    if (n == 0 || n > MAX_NAME)
        return cg__error(CG_EINVAL, "custom op: name must have 1 to %d "
                         "characters, not %zu", MAX_NAME, n);
    for (i = 0; i < n; i++) {
        char c = name[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-'))
            return cg__error(CG_EINVAL, "custom op: name '%s' has a "
                             "character outside [A-Za-z0-9_.-]", name);
    }
    return CG_OK;
}

static int
check_def(const cg_context *ctx, const cg_custom_op_def *def)
{
    int k, status;

    if (!ctx)
        return cg__error(CG_EINVAL, "custom op: ctx is NULL");
    if (!def)
        return cg__error(CG_EINVAL, "custom op: def is NULL");
    if ((status = check_name(def->name)))
        return status;
    if (!def->source)
        return cg__error(CG_EINVAL, "custom op '%s': source is NULL",
                         def->name);
    if (def->ninputs < 1 || def->ninputs > MAX_INPUTS)
        return cg__error(CG_EINVAL, "custom op '%s': ninputs is %d, not "
                         "1..%d", def->name, def->ninputs, MAX_INPUTS);
    if (!def->forward_kernel || !*def->forward_kernel)
        return cg__error(CG_EINVAL, "custom op '%s': no forward kernel name",
                         def->name);
    if (!def->backward_kernels)
        return cg__error(CG_EINVAL, "custom op '%s': backward_kernels is "
                         "NULL (one name per input is needed)", def->name);
    for (k = 0; k < def->ninputs; k++)
        if (!def->backward_kernels[k] || !*def->backward_kernels[k])
            return cg__error(CG_EINVAL, "custom op '%s': no backward kernel "
                             "name for input %d", def->name, k);
    if (def->nparams < 0 || def->nparams > MAX_PARAMS ||
        (def->nparams > 0 && !def->params))
        return cg__error(CG_EINVAL, "custom op '%s': nparams is %d with "
                         "params %s (0..%d values expected)", def->name,
                         def->nparams, def->params ? "set" : "NULL",
                         MAX_PARAMS);
    return CG_OK;
}

/* The prelude of the calling convention, then the user's source with its
 * own line numbers. */
static char *
full_source(const cg_custom_op_def *def)
{
    static const char fmt[] =
        "#define CG_NINPUTS %d\n"
        "#define CG_CUSTOM_SHAPE_STRIDE %d\n"
        "#define CG_NDIM(s, t) ((s)[(t) * CG_CUSTOM_SHAPE_STRIDE])\n"
        "#define CG_DIM(s, t, d) ((s)[(t) * CG_CUSTOM_SHAPE_STRIDE + 1 + "
        "(d)])\n"
        "#line 1 \"%s.cl\"\n%s\n";
    size_t n = sizeof fmt + strlen(def->name) + strlen(def->source) + 32;
    char *s = cg__malloc(n);

    if (s)
        snprintf(s, n, fmt, def->ninputs, CG_CUSTOM_SHAPE_STRIDE, def->name,
                 def->source);
    return s;
}

/* Kernel `kname` of the program, checked to take `nargs` arguments. */
static int
make_kernel(cg_custom_op *op, cl_program prog, const char *kname,
            cl_uint nargs, const char *role, cl_kernel *out)
{
    cl_uint have = 0;
    cl_int rc;
    cl_kernel k = clCreateKernel(prog, kname, &rc);

    if (rc != CL_SUCCESS)
        return cg__error(rc == CL_INVALID_KERNEL_NAME ? CG_EINVAL : rc,
                         "custom op '%s': %s kernel '%s' is not in its "
                         "source (clCreateKernel: %s)", op->name, role, kname,
                         cg__cl_error_name(rc) ? cg__cl_error_name(rc)
                         : "unknown error");
    rc = clGetKernelInfo(k, CL_KERNEL_NUM_ARGS, sizeof have, &have, NULL);
    if (rc != CL_SUCCESS) {
        clReleaseKernel(k);
        return cg__cl_fail(rc, "clGetKernelInfo(CL_KERNEL_NUM_ARGS)");
    }
    if (have != nargs) {
        clReleaseKernel(k);
        return cg__error(CG_EINVAL, "custom op '%s': %s kernel '%s' takes "
                         "%u arguments; with %d inputs it must take %u (see "
                         "\"Custom ops\" in clgrad.h)", op->name, role, kname,
                         have, op->ninputs, nargs);
    }
    *out = k;
    return CG_OK;
}

static int
build_kernels(cg_custom_op *op, const cg_custom_op_def *def)
{
    char label[MAX_NAME + 48], hex[33], role[32];
    char *src = full_source(def);
    cg__program *p;
    cg__hash h;
    cl_uint n = (cl_uint)def->ninputs;
    int k, status;

    if (!src)
        return CG_EHOSTMEM;
    cg__hash_init(&h);
    cg__hash_str(&h, src);
    cg__hash_hex(&h, hex);
    snprintf(label, sizeof label, "custom:%s:%s", def->name, hex);
    status = cg__program_get_source(op->ctx, label, src, NULL, &p);
    free(src);
    if (status)
        return status;
    status = make_kernel(op, p->program, def->forward_kernel, n + 4,
                         "forward", &op->forward);
    for (k = 0; k < def->ninputs && status == CG_OK; k++) {
        snprintf(role, sizeof role, "backward (input %d)", k);
        status = make_kernel(op, p->program, def->backward_kernels[k], n + 6,
                             role, &op->backward[k]);
    }
    return status;
}

static void
op_release(cg_custom_op *op)
{
    int k;

    if (op->forward)
        clReleaseKernel(op->forward);
    for (k = 0; k < CG__NODE_INPUTS; k++)
        if (op->backward[k])
            clReleaseKernel(op->backward[k]);
    cg_buffer_free(op->params);
    free(op->name);
    free(op);
}

/* The node's hold on the op (cg__node.keep_unref). */
static void
op_unref(void *p)
{
    cg_custom_op *op = p;

    if (op && --op->refs == 0)
        op_release(op);
}

static int
upload_params(cg_custom_op *op, const cg_custom_op_def *def)
{
    float zero = 0.0f;
    size_t n = def->nparams > 0 ? (size_t)def->nparams : 1;

    op->params = cg_buffer_new(op->ctx, n * sizeof(float));
    if (!op->params)
        return cg__last_status();
    return cg_buffer_write(op->params, 0, def->nparams ? def->params : &zero,
                           n * sizeof(float));
}

cg_custom_op *
cg_custom_op_new(cg_context *ctx, const cg_custom_op_def *def)
{
    cg_custom_op *op;

    cg__error_clear();
    if (check_def(ctx, def))
        return NULL;
    op = cg__calloc(1, sizeof *op);
    if (!op)
        return NULL;
    op->refs = 1;
    op->ctx = ctx;
    op->ninputs = def->ninputs;
    op->shape_rule = def->shape_rule;
    op->user = def->user;
    if (!(op->name = cg__strdup(def->name)) || build_kernels(op, def) ||
        upload_params(op, def)) {
        op_release(op);
        return NULL;
    }
    return op;
}

void
cg_custom_op_free(cg_custom_op *op)
{
    op_unref(op);
}

/* ------------------------------------------------------------------------
 * Application
 * ------------------------------------------------------------------------ */

static int
check_inputs(const cg_custom_op *op, int n, cg_tensor *const *in)
{
    char what[32];
    int k, status;

    if (!op)
        return cg__error(CG_EINVAL, "custom op: op is NULL");
    if (n != op->ninputs)
        return cg__error(CG_EINVAL, "custom op '%s' takes %d inputs, not %d",
                         op->name, op->ninputs, n);
    if (!in)
        return cg__error(CG_EINVAL, "custom op '%s': inputs is NULL",
                         op->name);
    for (k = 0; k < n; k++) {
        snprintf(what, sizeof what, "input %d", k);
        if ((status = cg__check_tensor(in[k], what, 0)))
            return status;
        if (in[k]->ctx != op->ctx)
            return cg__error(CG_ECONTEXT, "custom op '%s': input %d belongs "
                             "to another context than the op", op->name, k);
        if (cg__numel(in[k]->ndim, in[k]->shape) > INT32_MAX)
            return cg__error(CG_EUNSUPPORTED, "custom op '%s': input %d has "
                             "2^31 elements or more", op->name, k);
    }
    return CG_OK;
}

/* "[2, 3], [3]" for messages. */
static const char *
shapes_str(int n, cg_tensor *const *in, char *buf, size_t size)
{
    size_t used = 0;
    int k;

    buf[0] = '\0';
    for (k = 0; k < n && used < size; k++) {
        char s[128];

        cg__shape_str(in[k]->ndim, in[k]->shape, s, sizeof s);
        used += (size_t)snprintf(buf + used, size - used, "%s%s",
                                 k ? ", " : "", s);
    }
    return buf;
}

/* The default rule: every input has the output's shape. */
static int
same_shape(const cg_custom_op *op, int n, cg_tensor *const *in, int *ndim,
           int64_t *shape)
{
    char buf[512];
    int k;

    for (k = 1; k < n; k++)
        if (in[k]->ndim != in[0]->ndim ||
            memcmp(in[k]->shape, in[0]->shape,
                   (size_t)in[0]->ndim * sizeof(int64_t)) != 0)
            return cg__error(CG_ESHAPE, "custom op '%s' is elementwise (no "
                             "shape rule) but its inputs have shapes %s",
                             op->name, shapes_str(n, in, buf, sizeof buf));
    *ndim = in[0]->ndim;
    memcpy(shape, in[0]->shape, sizeof(int64_t) * (size_t)*ndim);
    return CG_OK;
}

static int
output_shape(const cg_custom_op *op, int n, cg_tensor *const *in, int *ndim,
             int64_t *shape)
{
    const int64_t *shapes[CG__NODE_INPUTS];
    int ndims[CG__NODE_INPUTS], k, d;
    char buf[512];

    if (!op->shape_rule)
        return same_shape(op, n, in, ndim, shape);
    for (k = 0; k < n; k++) {
        ndims[k] = in[k]->ndim;
        shapes[k] = in[k]->shape;
    }
    *ndim = -1;
    if (op->shape_rule(n, ndims, shapes, ndim, shape, op->user) != 0)
        return cg__error(CG_ESHAPE, "custom op '%s': its shape rule rejects "
                         "input shapes %s", op->name,
                         shapes_str(n, in, buf, sizeof buf));
    if (*ndim < 0 || *ndim > CG_MAX_DIMS)
        return cg__error(CG_ESHAPE, "custom op '%s': its shape rule gave %d "
                         "output dimensions (0..%d allowed)", op->name,
                         *ndim, CG_MAX_DIMS);
    for (d = 0; d < *ndim; d++)
        if (shape[d] < 1)
            return cg__error(CG_ESHAPE, "custom op '%s': its shape rule gave "
                             "size %lld for output dimension %d", op->name,
                             (long long)shape[d], d);
    if (cg__numel(*ndim, shape) > INT32_MAX)
        return cg__error(CG_EUNSUPPORTED, "custom op '%s': the output has "
                         "2^31 elements or more", op->name);
    return CG_OK;
}

/* t itself when the kernels can index it from element 0, else a copy. */
static cg_tensor *
plain(cg_tensor *t)
{
    if (cg_tensor_is_contiguous(t) && t->offset == 0)
        return cg_tensor_ref(t);
    return cg__copy_contiguous(t);
}

/* The shapes argument for tensors t[0..n] (inputs, then the output). */
static cg_tensor *
shapes_tensor(cg_context *ctx, int n, cg_tensor *const *t)
{
    cl_int host[(CG__NODE_INPUTS + 1) * CG_CUSTOM_SHAPE_STRIDE];
    int64_t len = (int64_t)(n + 1) * CG_CUSTOM_SHAPE_STRIDE;
    int k, d;

    memset(host, 0, sizeof host);
    for (k = 0; k <= n; k++) {
        cl_int *row = host + k * CG_CUSTOM_SHAPE_STRIDE;

        row[0] = t[k]->ndim;
        for (d = 0; d < t[k]->ndim; d++)
            row[1 + d] = (cl_int)t[k]->shape[d];
    }
    return cg_tensor_from_host(ctx, CG_I32, 1, &len, host);
}

/* Sets the tensor arguments, then n_items, shapes and params, and launches
 * one work-item per item. */
static int
run_kernel(cg_custom_op *op, cl_kernel k, int nmem, cg_tensor *const *mem,
           int64_t items, const cg_tensor *shapes)
{
    cl_mem m[CG__NODE_INPUTS + 3];
    cl_mem ms = cg__tensor_mem(shapes), mp = cg__buffer_mem(op->params);
    cl_uint n = (cl_uint)items;
    cg__arg_list a;
    int i, status;

    a.n = 0;
    for (i = 0; i < nmem; i++) {
        m[i] = cg__tensor_mem(mem[i]);
        CG__PUSH(&a, m[i]);
    }
    CG__PUSH(&a, n);
    CG__PUSH(&a, ms);
    CG__PUSH(&a, mp);
    status = cg__set_args(k, a.a, a.n);
    return status ? status : cg__launch1d(op->ctx, k, n, CG__WG);
}

static int
custom_backward(cg__node *node, cg_tensor *gy, cg_tensor **gin)
{
    cg_custom_op *op = node->keep;
    cg_tensor *mem[CG__NODE_INPUTS + 3], *shapes, *g;
    int n = node->ninputs, j, status = CG_OK;

    /* saved[0..n-1]: plain inputs; saved[n]: the output. */
    shapes = shapes_tensor(op->ctx, n, node->saved);
    g = shapes ? plain(gy) : NULL;
    if (!g) {
        cg_tensor_free(shapes);
        return cg__last_status();
    }
    memcpy(mem, node->saved, sizeof(cg_tensor *) * (size_t)(n + 1));
    mem[n + 1] = g;
    for (j = 0; j < n && status == CG_OK; j++) {
        cg_tensor *x = node->saved[j];

        if (!node->needs[j])
            continue;
        gin[j] = cg__tensor_empty(op->ctx, CG_F32, x->ndim, x->shape);
        if (!gin[j]) {
            status = cg__last_status();
            break;
        }
        mem[n + 2] = gin[j];
        status = run_kernel(op, op->backward[j], n + 3, mem,
                            cg__numel(x->ndim, x->shape), shapes);
    }
    cg_tensor_free(g);
    cg_tensor_free(shapes);
    return status;
}

static int
record(cg_custom_op *op, cg_tensor *y, cg_tensor *const *in,
       cg_tensor *const *plain_in)
{
    cg__node *node;
    int k, status;

    node = cg__record(y, op->name, custom_backward, op->ninputs, in,
                      &status);
    if (!node)
        return status;
    node->keep = op;
    node->keep_unref = op_unref;
    op->refs++;
    for (k = 0; k < op->ninputs && status == CG_OK; k++)
        status = cg__node_save(node, k, plain_in[k]);
    if (status == CG_OK)
        status = cg__node_save(node, op->ninputs, y);
    return status;
}

cg_tensor *
cg_custom_op_apply(cg_custom_op *op, int ninputs, cg_tensor *const *inputs)
{
    cg_tensor *mem[CG__NODE_INPUTS + 1] = { NULL }, *y = NULL, *shapes = NULL;
    int64_t shape[CG_MAX_DIMS];
    int ndim, k, status;

    cg__error_clear();
    if (check_inputs(op, ninputs, inputs) ||
        output_shape(op, ninputs, inputs, &ndim, shape))
        return NULL;
    status = CG_OK;
    for (k = 0; k < ninputs && status == CG_OK; k++)
        if (!(mem[k] = plain(inputs[k])))
            status = cg__last_status();
    if (status == CG_OK &&
        !(y = mem[ninputs] = cg__tensor_empty(op->ctx, CG_F32, ndim, shape)))
        status = cg__last_status();
    if (status == CG_OK && !(shapes = shapes_tensor(op->ctx, ninputs, mem)))
        status = cg__last_status();
    if (status == CG_OK)
        status = run_kernel(op, op->forward, ninputs + 1, mem,
                            cg__numel(ndim, shape), shapes);
    if (status == CG_OK)
        status = record(op, y, inputs, mem);
    cg_tensor_free(shapes);
    for (k = 0; k < ninputs; k++)
        cg_tensor_free(mem[k]);
    if (status) {
        cg_tensor_free(y);
        return NULL;
    }
    return y;
}

int
cg__custom_backward_is(cg__backward_fn bwd)
{
    return bwd == custom_backward;
}
