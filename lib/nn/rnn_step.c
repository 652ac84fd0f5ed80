/* SPDX-License-Identifier: MIT */
/*
 * lib/nn/rnn_step.c - host side of the fused recurrent step kernels
 * (kernels/rnn.cl): building a tuned variant, packing W_hh, and setting
 * arguments for one step.  Everything is enqueued without waiting.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/internal.h"
#include "tensor/internal.h"

cg__rnn_cell
cg__rnn_cell_of(cg_rnn_mode mode)
{
    switch (mode) {
    case CG_RNN_RELU: return CG__RNN_RELU;
    case CG_LSTM: return CG__RNN_LSTM;
    case CG_GRU: return CG__RNN_GRU;
    default: return CG__RNN_TANH;
    }
}

int
cg__rnn_gates(cg__rnn_cell cell)
{
    return cell == CG__RNN_LSTM ? 4 : cell == CG__RNN_GRU ? 3 : 1;
}

int
cg__rnn_hpad(const cg__rnn_step *s, int H)
{
    return (H + s->tune.vw - 1) / s->tune.vw * s->tune.vw;
}

/* The step kernels of a cell: forward, backward. */
static void
step_kernels(cg__rnn_cell cell, cg__kid *fwd, cg__kid *bwd)
{
    *fwd = cell == CG__RNN_LSTM ? CG__K_LSTM_FWD
         : cell == CG__RNN_GRU ? CG__K_GRU_FWD : CG__K_RNN_FWD;
    *bwd = cell == CG__RNN_LSTM ? CG__K_LSTM_BWD
         : cell == CG__RNN_GRU ? CG__K_GRU_BWD : CG__K_RNN_BWD;
}

void
cg__rnn_step_release(cg__rnn_step *s)
{
    cl_kernel *ks[5] = { &s->fwd, &s->bwd, &s->pack_t, &s->pack, &s->jvp };
    int j;

    for (j = 0; j < 5; j++) {
        if (*ks[j])
            clReleaseKernel(*ks[j]);
        *ks[j] = NULL;
    }
}

int
cg__rnn_step_init(cg__rnn_step *s, cg_context *ctx, cg__rnn_cell cell,
                  const cg__rnn_tune *tune)
{
    return cg__rnn_step_init_dt(s, ctx, cell, tune, CG_F32);
}

/* The -D options of s's tuning and variant. */
static void
step_options(const cg__rnn_tune *t, cg_dtype dt, char *opts, size_t size)
{
    /* float32's options are as they were before the variants (the same
     * programs in the cache); common.cl's CG_T values are cg__kvariant's. */
    snprintf(opts, size, "-DVW=%d -DRB=%d -DWG=%d%s%s", t->vw, t->rb,
             t->wg, t->hproj ? " -DHPROJ=1" : "",
             dt == CG_F16 ? " -DCG_T=1" : dt == CG_BF16 ? " -DCG_T=2" : "");
}

int
cg__rnn_step_init_dt(cg__rnn_step *s, cg_context *ctx, cg__rnn_cell cell,
                     const cg__rnn_tune *tune, cg_dtype dt)
{
    char opts[112];
    cg__rnn_tune t;
    cg__kid fwd, bwd;
    int status;

    memset(s, 0, sizeof *s);
    /* kernels/rnn.cl's defaults (the kernel table's), which a tuning
     * entry replaces for the shapes it names. */
    t.vw = (int)cg__param_table[CG__P_RNN_VW].dflt;
    t.rb = (int)cg__param_table[CG__P_RNN_RB].dflt;
    t.wg = (int)cg__param_table[CG__P_RNN_WG].dflt;
    t.hproj = 0;
    if (tune) {
        t.vw = tune->vw ? tune->vw : t.vw;
        t.rb = tune->rb ? tune->rb : t.rb;
        t.wg = tune->wg ? tune->wg : t.wg;
        t.hproj = tune->hproj != 0;
    }
    /* VW must name an OpenCL vector type; RB and WG bound register and
     * work-group use to what every device offers. */
    if ((t.vw != 1 && t.vw != 2 && t.vw != 4 && t.vw != 8 && t.vw != 16) ||
        t.rb < 1 || t.rb > 8 || t.wg < 1 || t.wg > 256 ||
        cell < CG__RNN_TANH || cell > CG__RNN_GRU)
        return cg__error(CG_EINVAL, "rnn step: bad cell %d or tuning "
                         "VW=%d RB=%d WG=%d", (int)cell, t.vw, t.rb, t.wg);
    if (dt != CG_F32 && dt != CG_F16 && dt != CG_BF16)
        return cg__error(CG_EDTYPE, "rnn step: dtype %s is not float32, "
                         "float16 or bfloat16", cg__dtype_name(dt));
    s->ctx = ctx;
    s->cell = cell;
    s->gates = cg__rnn_gates(cell);
    s->tune = t;
    s->dtype = dt;
    step_options(&t, dt, opts, sizeof opts);
    step_kernels(cell, &fwd, &bwd);
    status = cg__kernel_create(ctx, fwd, opts, &s->fwd);
    if (status == CG_OK)
        status = cg__kernel_create(ctx, bwd, opts, &s->bwd);
    if (status == CG_OK)
        status = cg__kernel_create(ctx, CG__K_RNN_PACK_T, opts, &s->pack_t);
    if (status == CG_OK)
        status = cg__kernel_create(ctx, CG__K_RNN_PACK, opts, &s->pack);
    if (status) {
        /* not built: a caller that looks at s->ctx must not take it */
        cg__rnn_step_release(s);
        s->ctx = NULL;
    }
    return status;
}

static void
arg_buf(cg__arg_list *a, const cg__rnn_buf *b)
{
    CG__PUSH(a, b->mem);
    CG__PUSH(a, b->off);
}

static void
arg_mat(cg__arg_list *a, const cg__rnn_mat *m)
{
    CG__PUSH(a, m->mem);
    CG__PUSH(a, m->off);
    CG__PUSH(a, m->ld);
}

/* One work-item per (VW units, RB rows). */
static int
launch_step(const cg__rnn_step *s, cl_kernel k, int B, int H)
{
    size_t nvec = (size_t)(H + s->tune.vw - 1) / (size_t)s->tune.vw;
    size_t nrow = (size_t)(B + s->tune.rb - 1) / (size_t)s->tune.rb;

    return cg__launch1d(s->ctx, k, nvec * nrow, (size_t)s->tune.wg);
}

static int
check_sizes(const char *what, int B, int H)
{
    if (B < 1 || H < 1)
        return cg__error(CG_ESHAPE, "%s: batch %d and hidden size %d must "
                         "be positive", what, B, H);
    return CG_OK;
}

int
cg__rnn_pack_whh(const cg__rnn_step *s, cg__rnn_buf w, int H, cl_mem wt,
                 cl_mem wp)
{
    cg__arg_list a;
    size_t n = (size_t)H * s->gates * cg__rnn_hpad(s, H);
    cl_int G = s->gates, h = H;
    int j, status;

    if (check_sizes("rnn pack", 1, H))
        return CG_ESHAPE;
    for (j = 0; j < 2; j++) {
        cl_mem out = j ? wp : wt;

        if (!out)
            continue;
        a.n = 0;
        arg_buf(&a, &w);
        CG__PUSH(&a, G);
        CG__PUSH(&a, h);
        CG__PUSH(&a, out);
        status = cg__set_args(j ? s->pack : s->pack_t, a.a, a.n);
        if (status == CG_OK)
            status = cg__launch1d(s->ctx, j ? s->pack : s->pack_t, n,
                                  (size_t)s->tune.wg);
        if (status)
            return status;
    }
    return CG_OK;
}

/* The arguments the forward step and the tangent step open with: the
 * input projection, W_hh^T, the biases, the states in and out, y. */
static void
push_step_args(cg__arg_list *a, const cg__rnn_step *s,
               const cg__rnn_fwd_args *f)
{
    arg_mat(a, &f->xproj);
    CG__PUSH(a, f->whh_t);
    arg_buf(a, &f->b_ih);
    arg_buf(a, &f->b_hh);
    arg_buf(a, &f->h_prev);
    arg_buf(a, &f->h_next);
    if (s->cell == CG__RNN_LSTM) {
        arg_buf(a, &f->c_prev);
        arg_buf(a, &f->c_next);
    }
    arg_mat(a, &f->y);
}

int
cg__rnn_forward_step(const cg__rnn_step *s, const cg__rnn_fwd_args *f)
{
    cg__arg_list a;
    cl_int relu = s->cell == CG__RNN_RELU, t = f->t, B = f->B, H = f->H;
    int status;

    if (check_sizes("rnn forward step", B, H))
        return CG_ESHAPE;
    a.n = 0;
    push_step_args(&a, s, f);
    if (s->cell == CG__RNN_LSTM || s->cell == CG__RNN_GRU)
        arg_buf(&a, &f->saved);
    else
        CG__PUSH(&a, relu);
    CG__PUSH(&a, f->lengths);
    CG__PUSH(&a, t);
    CG__PUSH(&a, B);
    CG__PUSH(&a, H);
    status = cg__set_args(s->fwd, a.a, a.n);
    return status ? status : launch_step(s, s->fwd, B, H);
}

int
cg__rnn_backward_step(const cg__rnn_step *s, const cg__rnn_bwd_args *b)
{
    cg__arg_list a;
    cl_int relu = s->cell == CG__RNN_RELU, t = b->t, B = b->B, H = b->H;
    /* Bit 1: there is a step t+1 to take dgates from; bit 2: run the cell
     * of step t (not for the final t = -1 launch). */
    cl_int mode = (b->dg_next.mem ? 1 : 0) | (t >= 0 ? 2 : 0);

    int status;

    if (check_sizes("rnn backward step", B, H))
        return CG_ESHAPE;
    a.n = 0;
    CG__PUSH(&a, b->whh_p);
    arg_buf(&a, &b->dg_next);
    CG__PUSH(&a, mode);
    arg_mat(&a, &b->dy);
    CG__PUSH(&a, b->dh);
    switch (s->cell) {
    case CG__RNN_LSTM:
        CG__PUSH(&a, b->dc);
        arg_buf(&a, &b->saved);
        arg_buf(&a, &b->c_prev);
        arg_buf(&a, &b->c_t);
        arg_buf(&a, &b->dg);
        break;
    case CG__RNN_GRU:
        arg_buf(&a, &b->saved);
        arg_buf(&a, &b->h_prev);
        arg_buf(&a, &b->dg);
        arg_buf(&a, &b->dgi);
        break;
    default:
        arg_buf(&a, &b->h_t);
        CG__PUSH(&a, relu);
        arg_buf(&a, &b->dg);
        break;
    }
    CG__PUSH(&a, b->lengths);
    CG__PUSH(&a, t);
    CG__PUSH(&a, B);
    CG__PUSH(&a, H);
    status = cg__set_args(s->bwd, a.a, a.n);
    return status ? status : launch_step(s, s->bwd, B, H);
}

int
cg__rnn_jvp_step(cg__rnn_step *s, const cg__rnn_jvp_args *j)
{
    const cg__rnn_fwd_args *f = &j->f;
    cg__arg_list a;
    cl_int relu = s->cell == CG__RNN_RELU, t = f->t, B = f->B, H = f->H;
    char opts[112];
    int status;

    if (check_sizes("rnn tangent step", B, H))
        return CG_ESHAPE;
    if (!s->jvp) {
        cg__kid id = s->cell == CG__RNN_LSTM ? CG__K_LSTM_JVP
                   : s->cell == CG__RNN_GRU ? CG__K_GRU_JVP : CG__K_RNN_JVP;

        step_options(&s->tune, s->dtype, opts, sizeof opts);
        if ((status = cg__kernel_create(s->ctx, id, opts, &s->jvp)))
            return status;
    }
    a.n = 0;
    push_step_args(&a, s, f);
    switch (s->cell) {
    case CG__RNN_LSTM:
        arg_buf(&a, &f->saved);
        arg_buf(&a, &j->pc_prev);
        arg_buf(&a, &j->pc_t);
        break;
    case CG__RNN_GRU:
        arg_buf(&a, &f->saved);
        arg_buf(&a, &j->ph_prev);
        arg_buf(&a, &j->ph);
        break;
    default:
        CG__PUSH(&a, relu);
        arg_buf(&a, &j->ph_t);
        break;
    }
    CG__PUSH(&a, f->lengths);
    CG__PUSH(&a, t);
    CG__PUSH(&a, B);
    CG__PUSH(&a, H);
    status = cg__set_args(s->jvp, a.a, a.n);
    return status ? status : launch_step(s, s->jvp, B, H);
}

/* A scratch buffer of `floats` values in [-0.5, 0.5). */
static cg_buffer *
scratch(cg_context *ctx, size_t floats)
{
    float *z = malloc(floats * sizeof *z);
    cg_buffer *b = z ? cg_buffer_new(ctx, floats * sizeof *z) : NULL;
    size_t i;

    if (!z) {
        cg__error(CG_EHOSTMEM, "out of host memory");
        return NULL;
    }
    for (i = 0; b && i < floats; i++)
        z[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    if (b && cg_buffer_write(b, 0, z, floats * sizeof *z) != CG_OK) {
        cg_buffer_free(b);
        b = NULL;
    }
    free(z);
    return b;
}

#define NSCRATCH 12

int
cg__rnn_time_steps(cg_context *ctx, cg__rnn_cell cell,
                   const cg__rnn_tune *tune, int B, int H, int steps,
                   double *fwd_ms, double *bwd_ms)
{
    size_t bh, gh, hp;
    cg_buffer *bufs[NSCRATCH] = { NULL };
    cl_mem m[NSCRATCH];
    cg__rnn_step s;
    double t0 = 0;
    int i, status;

    if (B < 1 || H < 1 || steps < 1)
        return cg__error(CG_EINVAL, "rnn step timing: B %d, H %d and steps "
                         "%d must be positive", B, H, steps);
    if ((status = cg__rnn_step_init(&s, ctx, cell, tune)))
        return status;
    /* Checked, as clgrad-tune passes sizes from its command line: the
     * largest buffer, G H x hp floats, must be indexable in 32 bits
     * (which bounds every other product below). */
    {
        int64_t biggest = 0, rows;

        if (H > INT32_MAX - 64 ||
            cg__mul_i64((int64_t)s.gates, H, &rows) ||
            cg__mul_i64(rows, cg__rnn_hpad(&s, H), &biggest) ||
            biggest > INT32_MAX ||
            cg__mul_i64(rows, B, &rows) || rows > INT32_MAX / 2) {
            status = cg__error(CG_ESHAPE, "rnn step timing: B %d and H %d "
                               "need buffers of more than 2^31-1 floats",
                               B, H);
            goto out;
        }
    }
    bh = (size_t)B * H;
    gh = (size_t)s.gates * H;
    hp = (size_t)cg__rnn_hpad(&s, H);
    {
        /* xproj, W_hh, wt, wp, h (2 slots), c (2), y, saved, dh, dc,
         * dgates (2 slots), dgi. */
        size_t n[NSCRATCH] = { bh * gh / H, gh * H, gh * hp,
                               gh * hp, 2 * bh, 2 * bh, bh, 4 * bh, bh, bh,
                               2 * bh * s.gates, bh * s.gates };

        for (i = 0; i < NSCRATCH; i++) {
            if (!(bufs[i] = scratch(ctx, n[i]))) {
                status = cg__last_status();
                goto out;
            }
            m[i] = cg__buffer_mem(bufs[i]);
        }
    }
    {
        cg__rnn_buf wb = { m[1], 0 };

        if ((status = cg__rnn_pack_whh(&s, wb, H, m[2], m[3])))
            goto out;
    }
    /* A warm-up (the first launches compile and fault pages in), then the
     * timed ones; states ping-pong between two slots. */
    for (i = -10; i < steps && status == CG_OK; i++) {
        cl_int cur = (cl_int)((i & 1) * bh), nxt = (cl_int)((~i & 1) * bh);
        cg__rnn_fwd_args f;

        if (i == 0 && (status = cg_context_finish(ctx)) == CG_OK)
            t0 = cg__now();
        memset(&f, 0, sizeof f);
        f.B = B, f.H = H;
        f.whh_t = m[2];
        f.xproj.mem = m[0], f.xproj.ld = (cl_int)gh;
        f.h_prev.mem = f.h_next.mem = m[4];
        f.c_prev.mem = f.c_next.mem = m[5];
        f.h_prev.off = f.c_prev.off = cur;
        f.h_next.off = f.c_next.off = nxt;
        f.y.mem = m[6], f.y.ld = H;
        f.saved.mem = m[7];
        if (status == CG_OK)
            status = cg__rnn_forward_step(&s, &f);
    }
    if (status == CG_OK && (status = cg_context_finish(ctx)) == CG_OK)
        *fwd_ms = (cg__now() - t0) * 1e3 / steps;
    for (i = -10; i < steps && status == CG_OK; i++) {
        cl_int cur = (cl_int)((i & 1) * bh * s.gates);
        cl_int nxt = (cl_int)((~i & 1) * bh * s.gates);
        cg__rnn_bwd_args b;

        if (i == 0 && (status = cg_context_finish(ctx)) == CG_OK)
            t0 = cg__now();
        memset(&b, 0, sizeof b);
        b.B = B, b.H = H;
        b.whh_p = m[3];
        b.dg_next.mem = m[10], b.dg_next.off = cur;
        b.dh = m[8], b.dc = m[9];
        b.saved.mem = m[7];
        b.h_prev.mem = b.h_t.mem = m[4];
        b.c_prev.mem = b.c_t.mem = m[5];
        b.dg.mem = m[10], b.dg.off = nxt;
        b.dgi.mem = m[11];
        if (status == CG_OK)
            status = cg__rnn_backward_step(&s, &b);
    }
    if (status == CG_OK && (status = cg_context_finish(ctx)) == CG_OK)
        *bwd_ms = (cg__now() - t0) * 1e3 / steps;
out:
    for (i = 0; i < NSCRATCH; i++)
        cg_buffer_free(bufs[i]);
    cg__rnn_step_release(&s);
    return status;
}
