/* SPDX-License-Identifier: MIT */
/*
 * tests/test_amp.c - mixed precision training (issue 19): 16-bit leaves
 * that require grad, cg_module_to_dtype, fp32 master weights in every
 * optimizer, clipping 16-bit gradients, masters in optimizer checkpoints,
 * and the dynamic loss scaler against a host reference of GradScaler's
 * rules.
 *
 * No tolerances: an optimizer over a float16 or bfloat16 parameter does
 * the float32 arithmetic of the float32 optimizer on the same gradient
 * values (the 16-bit gradient widened exactly), so its master must equal
 * the float32 run's parameter bit for bit and the 16-bit parameter must
 * be that rounded to nearest even; the scaler's scales are powers of two,
 * so unscaling is exact and a scaled run equals an unscaled one.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static uint32_t rng = 12345;

/* Uniform in [-1, 1). */
static float
frand(void)
{
    rng = rng * 1664525u + 1013904223u;
    return (float)(rng >> 8) / 8388608.0f - 1.0f;
}

static cg_tensor *
f32(int64_t n, const float *v)
{
    cg_tensor *t = cg_tensor_from_host(tt_ctx(), CG_F32, 1, &n, v);

    ck_assert_msg(t != NULL, "%s", TT_ERR);
    return t;
}

/* A new leaf of dtype dt holding v rounded to dt (no graph). */
static cg_tensor *
leaf(cg_dtype dt, int64_t n, const float *v, int requires_grad)
{
    cg_tensor *a = f32(n, v), *t = cg_to_dtype(a, dt);

    ck_assert_msg(t != NULL, "%s", TT_ERR);
    cg_tensor_free(a);
    if (requires_grad)
        ck_assert_int_eq(cg_tensor_set_requires_grad(t, 1), CG_OK);
    return t;
}

/* t's bytes (numel * element size) into a new host array. */
static void *
bytes_of(const cg_tensor *t, size_t *len)
{
    size_t es = cg_tensor_dtype(t) == CG_F32 ? 4 : 2;
    size_t n = (size_t)cg_tensor_numel(t) * es;
    void *b = malloc(n);

    ck_assert_ptr_nonnull(b);
    ck_assert_msg(cg_tensor_to_host(t, b, n) == CG_OK, "%s", TT_ERR);
    *len = n;
    return b;
}

static void
assert_same_bits(const cg_tensor *a, const cg_tensor *b, const char *what)
{
    size_t na, nb;
    void *x = bytes_of(a, &na), *y = bytes_of(b, &nb);

    ck_assert_msg(na == nb && memcmp(x, y, na) == 0, "%s differ", what);
    free(x);
    free(y);
}

/* Sets t's gradient to g (backward from a leaf with grad_output g). */
static void
set_grad(cg_tensor *t, cg_tensor *g)
{
    ck_assert_int_eq(cg_tensor_zero_grad(t), CG_OK);
    ck_assert_msg(cg_backward(t, g, 0) == CG_OK, "%s", TT_ERR);
}

static cg_tensor *
state_named(const cg_optimizer *opt, const char *name)
{
    int i, n = cg_optim_state_count(opt);

    for (i = 0; i < n; i++) {
        const char *nm;
        cg_tensor *t;

        ck_assert_int_eq(cg_optim_state_get(opt, i, &nm, &t), CG_OK);
        if (strcmp(nm, name) == 0)
            return t;
    }
    return NULL;
}

/* The optimizer configurations: SGD (plain, momentum with dampening,
 * Nesterov with weight decay, maximize), Adam (plain, amsgrad with L2),
 * AdamW, RMSprop (plain, centered with momentum and weight decay). */
#define NCONF 9

static cg_optimizer *
make_opt(int conf, cg_tensor **p, int n)
{
    cg_sgd_options so = { 0 };
    cg_adam_options ao = { 0 };
    cg_rmsprop_options ro = { 0 };

    switch (conf) {
    case 0:
        so.lr = 0.1;
        return cg_optim_sgd_new(tt_ctx(), p, n, &so);
    case 1:
        so.lr = 0.05;
        so.momentum = 0.9;
        so.dampening = 0.1;
        return cg_optim_sgd_new(tt_ctx(), p, n, &so);
    case 2:
        so.lr = 0.05;
        so.momentum = 0.8;
        so.nesterov = 1;
        so.weight_decay = 0.01;
        return cg_optim_sgd_new(tt_ctx(), p, n, &so);
    case 3:
        so.lr = 0.02;
        so.maximize = 1;
        so.momentum = 0.5;
        return cg_optim_sgd_new(tt_ctx(), p, n, &so);
    case 4:
        ao.lr = 0.01;
        return cg_optim_adam_new(tt_ctx(), p, n, &ao);
    case 5:
        ao.lr = 0.01;
        ao.amsgrad = 1;
        ao.weight_decay = 0.05;
        return cg_optim_adam_new(tt_ctx(), p, n, &ao);
    case 6:
        ao.lr = 0.01;
        return cg_optim_adamw_new(tt_ctx(), p, n, &ao);
    case 7:
        ro.lr = 0.01;
        return cg_optim_rmsprop_new(tt_ctx(), p, n, &ro);
    default:
        ro.lr = 0.01;
        ro.centered = 1;
        ro.momentum = 0.9;
        ro.weight_decay = 0.02;
        return cg_optim_rmsprop_new(tt_ctx(), p, n, &ro);
    }
}

/* Sizes: a vector and a tail in one (8 * k + 5), and a short tail. */
#define NPAR 2
static const int64_t sizes[NPAR] = { 93, 5 };

/* Five steps of configuration conf over 16-bit parameters (dtype dt) and
 * over float32 copies of them with the same gradient values. */
static void
master_run(cg_dtype dt, int conf)
{
    cg_tensor *p16[NPAR], *p32[NPAR];
    cg_optimizer *o16, *o32;
    int s, k, i;

    for (k = 0; k < NPAR; k++) {
        float v[128];

        for (i = 0; i < sizes[k]; i++)
            v[i] = frand();
        p16[k] = leaf(dt, sizes[k], v, 1);
        cg_no_grad_enter();
        p32[k] = cg_to_dtype(p16[k], CG_F32);
        cg_no_grad_leave();
        ck_assert_ptr_nonnull(p32[k]);
        ck_assert_int_eq(cg_tensor_set_requires_grad(p32[k], 1), CG_OK);
    }
    o16 = make_opt(conf, p16, NPAR);
    o32 = make_opt(conf, p32, NPAR);
    ck_assert_msg(o16 && o32, "%s", TT_ERR);
    for (s = 0; s < 5; s++) {
        for (k = 0; k < NPAR; k++) {
            float v[128];
            cg_tensor *g16, *g32;

            for (i = 0; i < sizes[k]; i++)
                v[i] = frand() * (dt == CG_F16 ? 4.0f : 100.0f);
            g16 = leaf(dt, sizes[k], v, 0);
            g32 = cg_to_dtype(g16, CG_F32);
            set_grad(p16[k], g16);
            set_grad(p32[k], g32);
            ck_assert_int_eq(cg_tensor_dtype(cg_tensor_grad(p16[k])), dt);
            cg_tensor_free(g16);
            cg_tensor_free(g32);
        }
        ck_assert_msg(cg_optim_step(o16) == CG_OK, "%s", TT_ERR);
        ck_assert_msg(cg_optim_step(o32) == CG_OK, "%s", TT_ERR);
    }
    /* The 16-bit optimizer's state is the float32 one's plus masters. */
    ck_assert_int_eq(cg_optim_state_count(o16),
                     cg_optim_state_count(o32) + NPAR);
    for (k = 0; k < NPAR; k++) {
        char name[32];
        cg_tensor *m, *r;

        snprintf(name, sizeof name, "master.%d", k);
        m = state_named(o16, name);
        ck_assert_msg(m != NULL, "no %s", name);
        assert_same_bits(m, p32[k], "master and float32 parameter");
        r = cg_to_dtype(p32[k], dt);
        assert_same_bits(p16[k], r, "16-bit parameter and rounded master");
        cg_tensor_free(r);
    }
    for (i = 0; i < cg_optim_state_count(o32); i++) {
        const char *nm;
        cg_tensor *t, *u;

        ck_assert_int_eq(cg_optim_state_get(o32, i, &nm, &t), CG_OK);
        u = state_named(o16, nm);
        ck_assert_msg(u != NULL, "no %s", nm);
        assert_same_bits(u, t, nm);
    }
    cg_optim_free(o16);
    cg_optim_free(o32);
    for (k = 0; k < NPAR; k++) {
        cg_tensor_free(p16[k]);
        cg_tensor_free(p32[k]);
    }
}

START_TEST(masters_follow_the_float32_optimizer_exactly)
{
    cg_dtype dt = _i ? CG_BF16 : CG_F16;
    int conf;

    for (conf = 0; conf < NCONF; conf++)
        master_run(dt, conf);
}
END_TEST

START_TEST(sixteen_bit_leaves_require_grad)
{
    float v[4] = { 1, 2, 3, 4 };
    int64_t n = 4;
    int32_t iv[4] = { 1, 2, 3, 4 };
    cg_tensor *h = leaf(CG_BF16, 4, v, 1), *y, *s;
    cg_tensor *it = cg_tensor_from_host(tt_ctx(), CG_I32, 1, &n, iv);

    /* Through a cast to float32 and a sum: the gradient is bfloat16
     * ones. */
    y = cg_to_dtype(h, CG_F32);
    s = cg_sum(y, 0, NULL, 0);
    ck_assert_msg(s != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_backward(s, NULL, 0), CG_OK);
    ck_assert_int_eq(cg_tensor_dtype(cg_tensor_grad(h)), CG_BF16);
    {
        uint16_t g[4];

        ck_assert_int_eq(cg_tensor_to_host(cg_tensor_grad(h), g, sizeof g),
                         CG_OK);
        for (int i = 0; i < 4; i++)
            ck_assert_uint_eq(g[i], 0x3F80);
    }
    ck_assert_int_eq(cg_tensor_set_requires_grad(it, 1), CG_EDTYPE);
    ck_assert_int_eq(cg_tensor_requires_grad(it), 0);
    cg_tensor_free(s);
    cg_tensor_free(y);
    cg_tensor_free(h);
    cg_tensor_free(it);
}
END_TEST

START_TEST(module_to_dtype_casts_parameters_in_place)
{
    cg_module *m = cg_sequential_new(tt_ctx());
    cg_tensor *w, *r;
    const char *name;
    float *w32;
    size_t nb;
    int i;

    ck_assert_int_eq(cg_module_add(m, NULL, cg_linear_new(tt_ctx(), 7, 5,
                                                          1)), CG_OK);
    ck_assert_int_eq(cg_module_add(m, NULL, cg_linear_new(tt_ctx(), 5, 3,
                                                          1)), CG_OK);
    w = cg_module_param(m, 2, &name);
    w32 = bytes_of(w, &nb);
    ck_assert_int_eq(cg_module_to_dtype(m, CG_I32), CG_EDTYPE);
    ck_assert_int_eq(cg_tensor_dtype(w), CG_F32);
    ck_assert_int_eq(cg_module_to_dtype(m, CG_F16), CG_OK);
    for (i = 0; i < cg_module_num_params(m); i++) {
        cg_tensor *p = cg_module_param(m, i, &name);

        ck_assert_int_eq(cg_tensor_dtype(p), CG_F16);
        ck_assert(cg_tensor_requires_grad(p));
    }
    /* The same tensor, its values rounded as PyTorch's .half(). */
    ck_assert_ptr_eq(cg_module_param(m, 2, &name), w);
    ck_assert_ptr_eq(cg_module_find_param(m, "1.weight"), w);
    r = leaf(CG_F16, (int64_t)(nb / 4), w32, 0);
    assert_same_bits(w, r, "the cast parameter");
    cg_tensor_free(r);
    ck_assert_int_eq(cg_module_to_dtype(m, CG_F32), CG_OK);
    ck_assert_int_eq(cg_tensor_dtype(w), CG_F32);
    free(w32);
    cg_module_free(m);
}
END_TEST

/* Clipping 16-bit gradients: the norm (accumulated in float32) is the
 * float32 one of the same values, bit for bit, and the clipped gradient is
 * the float32 clipped gradient rounded. */
START_TEST(clip_grad_norm_on_16_bit_gradients)
{
    cg_dtype dt = _i ? CG_BF16 : CG_F16;
    float v[300], tot16, tot32;
    cg_tensor *p16[NPAR], *p32[NPAR];
    int k, i;

    for (k = 0; k < NPAR; k++) {
        cg_tensor *g16, *g32;

        for (i = 0; i < 300; i++)
            v[i] = frand() * 3.0f;
        p16[k] = leaf(dt, 300 - 200 * k, v, 1);
        p32[k] = leaf(CG_F32, 300 - 200 * k, v, 1);
        g16 = leaf(dt, 300 - 200 * k, v, 0);
        g32 = cg_to_dtype(g16, CG_F32);
        set_grad(p16[k], g16);
        set_grad(p32[k], g32);
        cg_tensor_free(g16);
        cg_tensor_free(g32);
    }
    ck_assert_int_eq(cg_clip_grad_norm(p16, NPAR, 1.0, 2.0, &tot16), CG_OK);
    ck_assert_int_eq(cg_clip_grad_norm(p32, NPAR, 1.0, 2.0, &tot32), CG_OK);
    ck_assert(tot16 == tot32 && tot16 > 1.0f);
    for (k = 0; k < NPAR; k++) {
        cg_tensor *r = cg_to_dtype(cg_tensor_grad(p32[k]), dt);

        ck_assert_int_eq(cg_tensor_dtype(cg_tensor_grad(p16[k])), dt);
        assert_same_bits(cg_tensor_grad(p16[k]), r, "clipped gradient");
        cg_tensor_free(r);
    }
    ck_assert_int_eq(cg_clip_grad_value(p16, NPAR, 0.5), CG_OK);
    ck_assert_int_eq(cg_clip_grad_value(p32, NPAR, 0.5), CG_OK);
    for (k = 0; k < NPAR; k++) {
        cg_tensor *r = cg_to_dtype(cg_tensor_grad(p32[k]), dt);

        assert_same_bits(cg_tensor_grad(p16[k]), r, "clamped gradient");
        cg_tensor_free(r);
        cg_tensor_free(p16[k]);
        cg_tensor_free(p32[k]);
    }
}
END_TEST

/* An optimizer over a 16-bit parameter checkpointed after 3 steps and
 * restored into a fresh one continues bit for bit: the master is saved. */
START_TEST(checkpoints_keep_masters)
{
    float v[37];
    cg_tensor *a, *b, *g[5];
    cg_optimizer *oa, *ob;
    cg_checkpoint *ck;
    cg_dtype dt;
    int s, i;

    for (i = 0; i < 37; i++)
        v[i] = frand();
    a = leaf(CG_F16, 37, v, 1);
    b = leaf(CG_F16, 37, v, 1);
    for (s = 0; s < 5; s++) {
        for (i = 0; i < 37; i++)
            v[i] = frand();
        g[s] = leaf(CG_F16, 37, v, 0);
    }
    oa = make_opt(5, &a, 1);
    for (s = 0; s < 3; s++) {
        set_grad(a, g[s]);
        ck_assert_int_eq(cg_optim_step(oa), CG_OK);
    }
    ck = cg_checkpoint_new();
    ck_assert_int_eq(cg_checkpoint_add_optimizer(ck, NULL, oa), CG_OK);
    ck_assert_int_eq(cg_checkpoint_tensor_info(ck, "optim.master.0", &dt,
                                               NULL, NULL), CG_OK);
    ck_assert_int_eq(dt, CG_F32);
    /* b: another parameter's value (the master is what counts). */
    ob = make_opt(5, &b, 1);
    ck_assert_msg(cg_checkpoint_restore_optimizer(ck, NULL, ob) == CG_OK,
                  "%s", TT_ERR);
    assert_same_bits(state_named(ob, "master.0"),
                     state_named(oa, "master.0"), "restored master");
    for (s = 3; s < 5; s++) {
        set_grad(a, g[s]);
        set_grad(b, g[s]);
        ck_assert_int_eq(cg_optim_step(oa), CG_OK);
        ck_assert_int_eq(cg_optim_step(ob), CG_OK);
    }
    assert_same_bits(a, b, "parameters after restore");
    assert_same_bits(state_named(ob, "master.0"),
                     state_named(oa, "master.0"), "masters after restore");
    assert_same_bits(state_named(ob, "exp_avg_sq.0"),
                     state_named(oa, "exp_avg_sq.0"), "exp_avg_sq");
    cg_checkpoint_free(ck);
    cg_optim_free(oa);
    cg_optim_free(ob);
    for (s = 0; s < 5; s++)
        cg_tensor_free(g[s]);
    cg_tensor_free(a);
    cg_tensor_free(b);
}
END_TEST

/* GradScaler's rules on the host. */
typedef struct ref_scaler {
    float scale;
    int tracker, interval;
    int64_t skipped;
} ref_scaler;

static void
ref_update(ref_scaler *r, int found_inf)
{
    if (found_inf) {
        r->scale *= 0.5f;
        r->tracker = 0;
        r->skipped++;
    } else if (++r->tracker == r->interval) {
        r->scale *= 2.0f;
        r->tracker = 0;
    }
}

#define NSTEP 14
/* Steps whose gradient gets inf, NaN, -inf (element 3 of parameter 0). */
static int
bad_step(int s)
{
    return s == 2 ? 1 : s == 3 ? 2 : s == 9 ? 3 : 0;
}

/* One scaled run of NSTEP steps of configuration conf over parameters of
 * dtype dt with gradients grads[s] (float32 host values, unscaled),
 * injecting bad values unless clean (then bad steps are left out
 * entirely).  Checks the scaler against the reference every step, and
 * that a skipped step changes nothing.  Returns the parameter and state
 * in *p_out / *opt_out. */
static void
scaled_run(cg_dtype dt, int conf, float grads[NSTEP][61], int clean,
           int use_unscale, cg_tensor **p_out, cg_optimizer **opt_out)
{
    cg_grad_scaler_options so = { 0 };
    cg_grad_scaler *sc;
    ref_scaler ref = { 1024.0f, 0, 3, 0 };
    float v[61];
    cg_tensor *p;
    cg_optimizer *opt;
    int s, i, taken = 0;

    for (i = 0; i < 61; i++)
        v[i] = (float)i / 61.0f - 0.5f;
    p = leaf(dt, 61, v, 1);
    opt = make_opt(conf, &p, 1);
    ck_assert_ptr_nonnull(opt);
    so.init_scale = 1024;
    so.growth_interval = 3;
    sc = cg_grad_scaler_new(tt_ctx(), &so);
    ck_assert_msg(sc != NULL, "%s", TT_ERR);
    for (s = 0; s < NSTEP; s++) {
        int bad = bad_step(s);
        cg_tensor *g, *st = NULL;
        void *before = NULL, *state_before = NULL;
        size_t nb = 0, ns = 0;
        float scale;
        int64_t skipped, step;
        int tracker;

        if (clean && bad)
            continue;
        /* The gradient a scaled loss would give: g * scale. */
        for (i = 0; i < 61; i++)
            v[i] = grads[s][i] * ref.scale;
        if (bad)
            v[3] = bad == 1 ? INFINITY : bad == 2 ? NAN : -INFINITY;
        g = leaf(dt, 61, v, 0);
        set_grad(p, g);
        cg_tensor_free(g);
        if (bad) {
            before = bytes_of(p, &nb);
            if (cg_optim_state_count(opt) > 0) {
                cg_optim_state_get(opt, 0, NULL, &st);
                state_before = bytes_of(st, &ns);
            }
        }
        if (use_unscale)
            ck_assert_msg(cg_grad_scaler_unscale(sc, opt) == CG_OK, "%s",
                          TT_ERR);
        ck_assert_msg(cg_grad_scaler_step(sc, opt) == CG_OK, "%s", TT_ERR);
        ck_assert_int_eq(cg_grad_scaler_update(sc), CG_OK);
        ref_update(&ref, bad != 0);
        taken += !bad;
        ck_assert_int_eq(cg_grad_scaler_get_scale(sc, &scale), CG_OK);
        ck_assert_int_eq(cg_grad_scaler_skipped_steps(sc, &skipped), CG_OK);
        ck_assert_int_eq(cg_grad_scaler_growth_tracker(sc, &tracker), CG_OK);
        ck_assert_msg(scale == ref.scale, "step %d: scale %g, GradScaler "
                      "%g", s, scale, ref.scale);
        ck_assert_int_eq(skipped, ref.skipped);
        ck_assert_int_eq(tracker, ref.tracker);
        if (bad) {
            size_t n;
            void *after = bytes_of(p, &n);

            ck_assert_msg(memcmp(after, before, nb) == 0, "step %d: the "
                          "parameter changed on a skipped step", s);
            free(after);
            if (state_before) {
                after = bytes_of(st, &n);
                ck_assert_msg(memcmp(after, state_before, ns) == 0, "step "
                              "%d: state changed on a skipped step", s);
                free(after);
            }
            free(before);
            free(state_before);
        }
        ck_assert_int_eq(cg_optim_get_step(opt, 0, &step), CG_OK);
        ck_assert_int_eq(step, taken);
    }
    /* The scale grew after 3 clean steps and backed off on bad ones. */
    if (!clean)
        ck_assert_int_eq(ref.skipped, 3);
    cg_grad_scaler_free(sc);
    *p_out = p;
    *opt_out = opt;
}

/* A scaled run with inf/NaN injected equals one with those steps left
 * out (state included), for SGD with momentum (whose buffer is made at the
 * first step taken), Adam (whose bias corrections use the steps taken) and
 * RMSprop, in float32, float16 and bfloat16; and for SGD, the scaled run equals the
 * plain float32 optimizer on the unscaled gradients. */
START_TEST(grad_scaler_skips_and_scales_as_gradscaler)
{
    static const int confs[4] = { 1, 4, 5, 8 };
    static float grads[NSTEP][61];
    cg_dtype dt = _i == 2 ? CG_BF16 : _i ? CG_F16 : CG_F32;
    int c, s, i;

    for (s = 0; s < NSTEP; s++)
        for (i = 0; i < 61; i++)
            grads[s][i] = frand() * 0.5f;
    for (c = 0; c < 4; c++) {
        cg_tensor *pa, *pb, *pc;
        cg_optimizer *oa, *ob, *oc;
        int k;

        scaled_run(dt, confs[c], grads, 0, c == 2, &pa, &oa);
        scaled_run(dt, confs[c], grads, 1, 0, &pb, &ob);
        assert_same_bits(pa, pb, "parameters with and without skipped "
                         "steps");
        ck_assert_int_eq(cg_optim_state_count(oa), cg_optim_state_count(ob));
        for (k = 0; k < cg_optim_state_count(oa); k++) {
            const char *nm;
            cg_tensor *t;

            ck_assert_int_eq(cg_optim_state_get(oa, k, &nm, &t), CG_OK);
            assert_same_bits(t, state_named(ob, nm), nm);
        }
        if (confs[c] == 1) {
            /* Unscaled gradients through the plain optimizer. */
            float v[61];

            for (i = 0; i < 61; i++)
                v[i] = (float)i / 61.0f - 0.5f;
            pc = leaf(dt, 61, v, 1);
            oc = make_opt(confs[c], &pc, 1);
            for (s = 0; s < NSTEP; s++) {
                cg_tensor *g;

                if (bad_step(s))
                    continue;
                g = leaf(dt, 61, grads[s], 0);
                set_grad(pc, g);
                cg_tensor_free(g);
                ck_assert_int_eq(cg_optim_step(oc), CG_OK);
            }
            assert_same_bits(pa, pc, "scaled SGD and plain SGD");
            cg_optim_free(oc);
            cg_tensor_free(pc);
        }
        cg_optim_free(oa);
        cg_optim_free(ob);
        cg_tensor_free(pa);
        cg_tensor_free(pb);
    }
}
END_TEST

/* Parameters without a gradient take no step under the scaler either, and
 * the device step counts of the others count only the steps taken. */
START_TEST(grad_scaler_counts_steps_per_parameter)
{
    /* Which of 4 parameters have a gradient at each of 6 steps; step 3
     * has inf. */
    static const int has[6][4] = {
        { 1, 1, 1, 1 }, { 1, 0, 1, 0 }, { 0, 1, 1, 0 }, { 1, 1, 1, 1 },
        { 0, 0, 0, 1 }, { 1, 0, 0, 1 }
    };
    float v[70];
    cg_tensor *p[4];
    cg_grad_scaler *sc = cg_grad_scaler_new(tt_ctx(), NULL);
    cg_optimizer *opt;
    int64_t want[4] = { 0, 0, 0, 0 }, got;
    int s, k, i;

    for (i = 0; i < 70; i++)
        v[i] = frand();
    for (k = 0; k < 4; k++)
        p[k] = leaf(CG_F16, 70 - 9 * k, v, 1);
    opt = make_opt(4, p, 4);
    ck_assert_ptr_nonnull(opt);
    for (s = 0; s < 6; s++) {
        for (k = 0; k < 4; k++) {
            cg_tensor *g;

            ck_assert_int_eq(cg_tensor_zero_grad(p[k]), CG_OK);
            if (!has[s][k])
                continue;
            for (i = 0; i < 70; i++)
                v[i] = frand() * 1000.0f;
            if (s == 3 && k == 2)
                v[69 - 9 * k] = INFINITY;
            g = leaf(CG_F16, 70 - 9 * k, v, 0);
            set_grad(p[k], g);
            cg_tensor_free(g);
            want[k] += s != 3;
        }
        ck_assert_int_eq(cg_grad_scaler_step(sc, opt), CG_OK);
        ck_assert_int_eq(cg_grad_scaler_update(sc), CG_OK);
    }
    for (k = 0; k < 4; k++) {
        ck_assert_int_eq(cg_optim_get_step(opt, k, &got), CG_OK);
        ck_assert_msg(got == want[k], "parameter %d: %lld steps, not %lld",
                      k, (long long)got, (long long)want[k]);
    }
    ck_assert_int_eq(cg_grad_scaler_skipped_steps(sc, &got), CG_OK);
    ck_assert_int_eq(got, 1);
    cg_optim_free(opt);
    cg_grad_scaler_free(sc);
    for (k = 0; k < 4; k++)
        cg_tensor_free(p[k]);
}
END_TEST

START_TEST(grad_scaler_scales_the_loss_and_checks_input)
{
    float v = 3.0f, got;
    cg_grad_scaler_options bad = { 0 };
    cg_grad_scaler *sc = cg_grad_scaler_new(tt_ctx(), NULL);
    cg_tensor *loss = leaf(CG_F32, 1, &v, 1), *y, *p;
    cg_optimizer *opt;

    ck_assert_ptr_nonnull(sc);
    ck_assert_int_eq(cg_grad_scaler_get_scale(sc, &got), CG_OK);
    ck_assert(got == 65536.0f);
    y = cg_grad_scaler_scale(sc, loss);
    ck_assert_msg(y != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_to_host(y, &got, sizeof got), CG_OK);
    ck_assert(got == 3.0f * 65536.0f);
    ck_assert_int_eq(cg_backward(y, NULL, 0), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(cg_tensor_grad(loss), &got,
                                       sizeof got), CG_OK);
    ck_assert(got == 65536.0f);
    bad.backoff_factor = 1.5;
    ck_assert_ptr_null(cg_grad_scaler_new(tt_ctx(), &bad));
    ck_assert_ptr_nonnull(strstr(cg_last_error(), "backoff_factor"));
    bad.backoff_factor = 0;
    bad.growth_interval = -1;
    ck_assert_ptr_null(cg_grad_scaler_new(tt_ctx(), &bad));
    /* unscale twice before an update: CG_ESTATE. */
    p = loss;
    opt = make_opt(0, &p, 1);
    ck_assert_int_eq(cg_grad_scaler_unscale(sc, opt), CG_OK);
    ck_assert_int_eq(cg_grad_scaler_unscale(sc, opt), CG_ESTATE);
    ck_assert_int_eq(cg_grad_scaler_step(sc, opt), CG_OK);
    ck_assert_int_eq(cg_grad_scaler_update(sc), CG_OK);
    ck_assert_int_eq(cg_grad_scaler_step(NULL, opt), CG_EINVAL);
    /* Resuming: the scale and tracker set, bad ones refused. */
    ck_assert_int_eq(cg_grad_scaler_set_state(sc, 512.0f, 7), CG_OK);
    ck_assert_int_eq(cg_grad_scaler_set_state(sc, -1.0f, 0), CG_EINVAL);
    ck_assert_int_eq(cg_grad_scaler_set_state(sc, 8.0f, 2000), CG_EINVAL);
    ck_assert_int_eq(cg_grad_scaler_get_scale(sc, &got), CG_OK);
    ck_assert(got == 512.0f);
    {
        int tracker;

        ck_assert_int_eq(cg_grad_scaler_growth_tracker(sc, &tracker), CG_OK);
        ck_assert_int_eq(tracker, 7);
    }
    ck_assert_ptr_null(cg_grad_scaler_scale(sc, NULL));
    cg_optim_free(opt);
    cg_tensor_free(y);
    cg_tensor_free(loss);
    cg_grad_scaler_free(sc);
    cg_grad_scaler_free(NULL);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("amp");
    TCase *tc = tcase_create("amp");

    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, sixteen_bit_leaves_require_grad);
    tcase_add_test(tc, module_to_dtype_casts_parameters_in_place);
    tcase_add_loop_test(tc, masters_follow_the_float32_optimizer_exactly,
                        0, 2);
    tcase_add_loop_test(tc, clip_grad_norm_on_16_bit_gradients, 0, 2);
    tcase_add_test(tc, checkpoints_keep_masters);
    tcase_add_loop_test(tc, grad_scaler_skips_and_scales_as_gradscaler,
                        0, 3);
    tcase_add_test(tc, grad_scaler_counts_steps_per_parameter);
    tcase_add_test(tc, grad_scaler_scales_the_loss_and_checks_input);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tt_run(suite());
}
