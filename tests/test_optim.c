/* SPDX-License-Identifier: MIT */
/*
 * tests/test_optim.c - optimizers, gradient clipping and learning-rate
 * schedules: ten steps of SGD, Adam, AdamW and RMSprop (with clipping and
 * schedules in between) agree with PyTorch 1.13 (tests/fixtures/
 * optim_*.txt, from gen_optim.py) to 1e-6 relative, parameters and state;
 * clipping and schedules on their own agree too; exporting the state
 * mid-run and importing it into a fresh optimizer continues bit-for-bit;
 * bad input is refused and changes nothing.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "testutil.h"

#define NP 3            /* parameters in the fixtures */
#define MAX_STEPS 16
/* Parity with PyTorch: |ours - torch| <= TOL * max(|torch|, rms), rms
 * being the root mean square of the tensor's PyTorch values: relative
 * error, except for elements far below the tensor's scale, where
 * cancellation (a momentum buffer summing gradients of both signs) makes
 * an element's own relative error meaningless.  The kernels repeat
 * PyTorch's float32 operations (fma where its CPU kernels fuse), so the
 * optimizers agree bit for bit on this machine; a global norm is reduced
 * in another order than PyTorch's (about 1 ulp apart), and OpenCL allows
 * sqrt, division and pow a few ulp on other devices. */
#define TOL 1e-6

static fx_file *inputs, *results, *clips, *schedules;

static fx_file *
load(const char *name)
{
    char err[512];
    fx_file *f = fx_load_fixture(name, err, sizeof err);

    ck_assert_msg(f != NULL, "%s", err);
    return f;
}

static void
setup(void)
{
    tt_ctx();
    inputs = load("optim_inputs.txt");
    results = load("optim_results.txt");
    clips = load("optim_clip.txt");
    schedules = load("optim_schedules.txt");
}

static void
teardown(void)
{
    fx_free(inputs);
    fx_free(results);
    fx_free(clips);
    fx_free(schedules);
}

static const fx_tensor *
need(const fx_file *f, const char *fmt, ...)
{
    char name[128];
    const fx_tensor *t;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    t = fx_get(f, name);
    ck_assert_msg(t != NULL, "fixture has no tensor %s", name);
    return t;
}

static const char *
need_config(const fx_file *f, const char *fmt, ...)
{
    char key[128];
    const char *v;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(key, sizeof key, fmt, ap);
    va_end(ap);
    v = fx_config_str(f, key);
    ck_assert_msg(v != NULL, "fixture has no config %s", key);
    return v;
}

/* Word n (0-based) of a config value, into buf. */
static const char *
word(const char *s, int n, char *buf, size_t size)
{
    size_t len;

    while (n-- > 0 && s) {
        s = strchr(s, ' ');
        s = s ? s + 1 : NULL;
    }
    ck_assert_msg(s != NULL, "config value too short");
    len = strcspn(s, " ");
    ck_assert(len < size);
    memcpy(buf, s, len);
    buf[len] = '\0';
    return buf;
}

static double
word_num(const char *s, int n)
{
    char buf[64];

    return strtod(word(s, n, buf, sizeof buf), NULL);
}

static cg_tensor *
tensor_of(const fx_tensor *t, int requires_grad)
{
    cg_tensor *x = cg_tensor_from_host(tt_ctx(), CG_F32, t->ndim, t->shape,
                                       t->data);

    ck_assert_msg(x != NULL, "%s", TT_ERR);
    if (requires_grad)
        ck_assert_int_eq(cg_tensor_set_requires_grad(x, 1), CG_OK);
    return x;
}

static float *
host(const cg_tensor *t)
{
    int64_t n = cg_tensor_numel(t);
    float *v = malloc((size_t)n * sizeof *v);

    ck_assert(v != NULL);
    ck_assert_msg(cg_tensor_to_host(t, v, (size_t)n * sizeof *v) == CG_OK,
                  "%s", TT_ERR);
    return v;
}

/* The largest |a - want| / max(|want|, rms(want)) over a tensor. */
static double
rel_err(const cg_tensor *a, const fx_tensor *want)
{
    float *v;
    double worst = 0, rms = 0;
    int64_t i;

    ck_assert_int_eq(cg_tensor_numel(a), want->numel);
    v = host(a);
    for (i = 0; i < want->numel; i++)
        rms += (double)want->data[i] * want->data[i];
    rms = sqrt(rms / (double)want->numel);
    for (i = 0; i < want->numel; i++) {
        double w = want->data[i];
        double e = fabs(v[i] - w) / fmax(fabs(w), rms);

        if (!(e <= worst))
            worst = e;
    }
    free(v);
    return worst;
}

/* ------------------------------------------------------------------------
 * Running a fixture case: parameters, optimizer, clipping, schedule.
 * ------------------------------------------------------------------------ */

typedef struct run {
    cg_tensor *p[NP];
    cg_optimizer *opt;
    cg_lr_schedule *sched;
    char clip[32];
    double clip_a, clip_b;
} run;

static int
absent(int step, int k)
{
    int v[16], n = fx_config_ints(inputs, "absent", v, 16), i;

    for (i = 0; i + 1 < n; i += 2)
        if (v[i] == step && v[i + 1] == k)
            return 1;
    return 0;
}

/* Parses "KIND key=value ..." and makes the optimizer over r->p. */
static cg_optimizer *
make_optimizer(const char *spec, cg_tensor **p)
{
    cg_sgd_options so = { 0 };
    cg_adam_options ao = { 0 };
    cg_rmsprop_options ro = { 0 };
    char kind[16], kv[64];
    const char *s;
    int n;

    word(spec, 0, kind, sizeof kind);
    for (n = 1; (s = strchr(spec, ' ')) && (spec = s + 1); n++) {
        char *eq;
        double v;

        word(spec, 0, kv, sizeof kv);
        eq = strchr(kv, '=');
        ck_assert(eq != NULL);
        *eq = '\0';
        v = strtod(eq + 1, NULL);
#define OPT(name, field) \
        if (strcmp(kv, name) == 0) { so.field = v; ao.field = v; \
                                     ro.field = v; continue; }
        OPT("lr", lr)
        OPT("weight_decay", weight_decay)
        OPT("maximize", maximize)
#undef OPT
        if (strcmp(kv, "momentum") == 0) so.momentum = ro.momentum = v;
        else if (strcmp(kv, "dampening") == 0) so.dampening = v;
        else if (strcmp(kv, "nesterov") == 0) so.nesterov = (int)v;
        else if (strcmp(kv, "beta1") == 0) ao.beta1 = v;
        else if (strcmp(kv, "beta2") == 0) ao.beta2 = v;
        else if (strcmp(kv, "eps") == 0) ao.eps = ro.eps = v;
        else if (strcmp(kv, "amsgrad") == 0) ao.amsgrad = (int)v;
        else if (strcmp(kv, "alpha") == 0) ro.alpha = v;
        else if (strcmp(kv, "centered") == 0) ro.centered = (int)v;
        else ck_abort_msg("unknown option %s", kv);
    }
    if (strcmp(kind, "sgd") == 0)
        return cg_optim_sgd_new(tt_ctx(), p, NP, &so);
    if (strcmp(kind, "adam") == 0)
        return cg_optim_adam_new(tt_ctx(), p, NP, &ao);
    if (strcmp(kind, "adamw") == 0)
        return cg_optim_adamw_new(tt_ctx(), p, NP, &ao);
    ck_assert_str_eq(kind, "rmsprop");
    return cg_optim_rmsprop_new(tt_ctx(), p, NP, &ro);
}

static cg_lr_schedule *
make_schedule(const char *spec, cg_optimizer *opt)
{
    char kind[16];
    cg_lr_schedule *s;

    word(spec, 0, kind, sizeof kind);
    if (strcmp(kind, "none") == 0)
        return NULL;
    if (strcmp(kind, "step") == 0)
        s = cg_lr_schedule_step_new(opt, (int64_t)word_num(spec, 1),
                                    word_num(spec, 2));
    else if (strcmp(kind, "exponential") == 0)
        s = cg_lr_schedule_exponential_new(opt, word_num(spec, 1));
    else
        s = cg_lr_schedule_cosine_new(opt, (int64_t)word_num(spec, 1),
                                      word_num(spec, 2),
                                      (int64_t)word_num(spec, 3),
                                      word_num(spec, 4));
    ck_assert_msg(s != NULL, "%s: %s", spec, TT_ERR);
    return s;
}

/* Applies a clip spec ("none", "norm MAX TYPE", "value CLIP"). */
static void
apply_clip(cg_tensor **p, int n, const char *spec, float *total)
{
    char kind[16];

    word(spec, 0, kind, sizeof kind);
    if (strcmp(kind, "norm") == 0)
        ck_assert_msg(cg_clip_grad_norm(p, n, word_num(spec, 1),
                                        word_num(spec, 2), total) == CG_OK,
                      "%s", TT_ERR);
    else if (strcmp(kind, "value") == 0)
        ck_assert_msg(cg_clip_grad_value(p, n, word_num(spec, 1)) == CG_OK,
                      "%s", TT_ERR);
}

static void
run_start(run *r, const char *name, const fx_tensor *const *init)
{
    int k;

    memset(r, 0, sizeof *r);
    for (k = 0; k < NP; k++)
        r->p[k] = init ? tensor_of(init[k], 1)
                       : tensor_of(need(inputs, "param.%d", k), 1);
    r->opt = make_optimizer(need_config(results, "%s.optimizer", name),
                            r->p);
    ck_assert_msg(r->opt != NULL, "%s: %s", name, TT_ERR);
    r->sched = make_schedule(need_config(results, "%s.schedule", name),
                             r->opt);
    snprintf(r->clip, sizeof r->clip, "%s",
             need_config(results, "%s.clip", name));
}

/* Step s of a run: gradients (absent ones left NULL), clipping, the
 * update, the schedule. */
static void
run_step(run *r, int s)
{
    int k;

    ck_assert_int_eq(cg_optim_zero_grad(r->opt), CG_OK);
    for (k = 0; k < NP; k++) {
        cg_tensor *g;

        if (absent(s, k))
            continue;
        /* Backward from a leaf with grad_output G makes its grad G. */
        g = tensor_of(need(inputs, "grad.%d.%d", s, k), 0);
        ck_assert_msg(cg_backward(r->p[k], g, 0) == CG_OK, "%s", TT_ERR);
        cg_tensor_free(g);
    }
    apply_clip(r->p, NP, r->clip, NULL);
    ck_assert_msg(cg_optim_step(r->opt) == CG_OK, "%s", TT_ERR);
    if (r->sched)
        ck_assert_int_eq(cg_lr_schedule_step(r->sched), CG_OK);
}

static void
run_end(run *r)
{
    int k;

    cg_lr_schedule_free(r->sched);
    cg_optim_free(r->opt);
    for (k = 0; k < NP; k++)
        cg_tensor_free(r->p[k]);
}

static int
case_count(const fx_file *f)
{
    const char *c = need_config(f, "cases");
    int n = 1;

    while ((c = strchr(c, ' ')))
        n++, c++;
    return n;
}

static const char *
case_name(const fx_file *f, int i, char *buf, size_t size)
{
    return word(need_config(f, "cases"), i, buf, size);
}

/* ------------------------------------------------------------------------
 * Parity with PyTorch
 * ------------------------------------------------------------------------ */

/* The optimizer's state tensor called `name`; fails if there is none. */
static cg_tensor *
find_state(const cg_optimizer *opt, const char *name)
{
    int j, n = cg_optim_state_count(opt);
    const char *got;
    cg_tensor *t;

    for (j = 0; j < n; j++) {
        ck_assert_int_eq(cg_optim_state_get(opt, j, &got, &t), CG_OK);
        if (strcmp(got, name) == 0)
            return t;
    }
    ck_abort_msg("no state %s", name);
    return NULL;
}

START_TEST(ten_steps_match_pytorch)
{
    int steps = fx_config_int(inputs, "steps", 0), ncases, c, k, s;
    double worst_all = 0;

    ck_assert(steps > 0 && steps <= MAX_STEPS);
    ncases = case_count(results);
    for (c = 0; c < ncases; c++) {
        char name[64], sname[160];
        int want_steps[NP], nstate = 0, i;
        double worst = 0, e;
        run r;

        case_name(results, c, name, sizeof name);
        run_start(&r, name, NULL);
        for (s = 0; s < steps; s++)
            run_step(&r, s);
        ck_assert_int_eq(fx_config_ints(results,
                                        (snprintf(sname, sizeof sname,
                                                  "%s.steps", name), sname),
                                        want_steps, NP), NP);
        for (k = 0; k < NP; k++) {
            int64_t st;

            ck_assert_int_eq(cg_optim_get_step(r.opt, k, &st), CG_OK);
            ck_assert_int_eq(st, want_steps[k]);
            e = rel_err(r.p[k], need(results, "%s.param.%d", name, k));
            worst = fmax(worst, e);
        }
        /* Every state tensor PyTorch has, under the same name, and no
         * other. */
        for (i = 0; i < results->ntensors; i++) {
            const char *tn = results->tensors[i].name;
            size_t len = strlen(name);

            if (strncmp(tn, name, len) == 0 && tn[len] == '.' &&
                strncmp(tn + len + 1, "param.", 6) != 0) {
                e = rel_err(find_state(r.opt, tn + len + 1),
                            &results->tensors[i]);
                worst = fmax(worst, e);
                nstate++;
            }
        }
        ck_assert_int_eq(cg_optim_state_count(r.opt), nstate);
        printf("optim parity %-28s max rel error %.3g (%d state tensors)\n",
               name, worst, nstate);
        ck_assert_msg(worst <= TOL, "%s: relative error %g > %g", name,
                      worst, TOL);
        worst_all = fmax(worst_all, worst);
        run_end(&r);
    }
    printf("optim parity: worst relative error %.3g over %d cases\n",
           worst_all, ncases);
}
END_TEST

START_TEST(clipping_matches_pytorch)
{
    int ncases = case_count(clips), c, k;

    for (c = 0; c < ncases; c++) {
        char name[64], key[96];
        const char *spec, *tv;
        cg_tensor *p[NP];
        double worst = 0;
        float total = -1;

        case_name(clips, c, name, sizeof name);
        spec = need_config(clips, "%s.clip", name);
        for (k = 0; k < NP; k++) {
            p[k] = tensor_of(need(inputs, "param.%d", k), 1);
            if (!absent(0, k)) {
                cg_tensor *g = tensor_of(need(inputs, "grad.0.%d", k), 0);

                ck_assert_int_eq(cg_backward(p[k], g, 0), CG_OK);
                cg_tensor_free(g);
            }
        }
        apply_clip(p, NP, spec, &total);
        snprintf(key, sizeof key, "%s.total_norm", name);
        if ((tv = fx_config_str(clips, key)))
            worst = fabs(total - strtod(tv, NULL)) / strtod(tv, NULL);
        for (k = 0; k < NP; k++) {
            char gn[96];
            const fx_tensor *want;

            snprintf(gn, sizeof gn, "%s.grad.%d", name, k);
            want = fx_get(clips, gn);
            if (!want) {
                ck_assert_ptr_null(cg_tensor_grad(p[k]));
                continue;
            }
            worst = fmax(worst, rel_err(cg_tensor_grad(p[k]), want));
        }
        printf("clip parity %-12s max rel error %.3g\n", name, worst);
        ck_assert_msg(worst <= TOL, "%s: relative error %g", name, worst);
        for (k = 0; k < NP; k++)
            cg_tensor_free(p[k]);
    }
}
END_TEST

START_TEST(schedules_match_pytorch)
{
    double base = strtod(need_config(schedules, "base_lr"), NULL);
    int ncases = case_count(schedules), c;
    int64_t one = 1;

    for (c = 0; c < ncases; c++) {
        cg_sgd_options so = { .lr = base };
        char name[64];
        const char *lrs;
        cg_tensor *p = cg_zeros(tt_ctx(), 1, &one);
        cg_optimizer *opt;
        cg_lr_schedule *s;
        int t, n;

        ck_assert_int_eq(cg_tensor_set_requires_grad(p, 1), CG_OK);
        case_name(schedules, c, name, sizeof name);
        opt = cg_optim_sgd_new(tt_ctx(), &p, 1, &so);
        ck_assert_ptr_nonnull(opt);
        s = make_schedule(need_config(schedules, "%s.schedule", name), opt);
        ck_assert_double_eq(cg_lr_schedule_base_lr(s), base);
        lrs = need_config(schedules, "%s.lrs", name);
        for (n = 1; (lrs = strchr(lrs, ' ')); lrs++)
            n++;
        lrs = need_config(schedules, "%s.lrs", name);
        for (t = 0; t < n; t++) {
            double want = word_num(lrs, t), got = cg_optim_get_lr(opt);

            ck_assert_int_eq(cg_lr_schedule_get_position(s), t);
            ck_assert_msg(fabs(got - want) <= 1e-12 * base, "%s at %d: lr "
                          "%.17g, PyTorch %.17g", name, t, got, want);
            ck_assert_int_eq(cg_lr_schedule_step(s), CG_OK);
        }
        /* Jumping to a position gives the lr that stepping there gave. */
        for (t = n - 1; t >= 0; t -= 3) {
            double stepped;

            ck_assert_int_eq(cg_lr_schedule_set_position(s, 0), CG_OK);
            while (cg_lr_schedule_get_position(s) < t)
                ck_assert_int_eq(cg_lr_schedule_step(s), CG_OK);
            stepped = cg_optim_get_lr(opt);
            ck_assert_int_eq(cg_lr_schedule_set_position(s, t), CG_OK);
            ck_assert(cg_optim_get_lr(opt) == stepped);
        }
        /* The schedule keeps the optimizer alive. */
        cg_optim_free(opt);
        ck_assert_int_eq(cg_lr_schedule_step(s), CG_OK);
        cg_lr_schedule_free(s);
        cg_tensor_free(p);
    }
}
END_TEST

/* ------------------------------------------------------------------------
 * Checkpoints: export mid-run, import into a fresh optimizer, continue.
 * ------------------------------------------------------------------------ */

static const char *const roundtrip_cases[] = {
    "sgd_nesterov", "sgd_clipnorm_steplr", "adam_amsgrad_wd",
    "adam_clipvalue_cosine", "adamw_clipinf_exp",
    "rmsprop_centered_momentum",
};
#define NROUNDTRIP (int)(sizeof roundtrip_cases / sizeof *roundtrip_cases)

static void
assert_same_bits(const cg_tensor *a, const cg_tensor *b, const char *what)
{
    int64_t n = cg_tensor_numel(a);
    float *va = host(a), *vb = host(b);

    ck_assert_int_eq(n, cg_tensor_numel(b));
    ck_assert_msg(memcmp(va, vb, (size_t)n * sizeof *va) == 0,
                  "%s differs after resuming", what);
    free(va);
    free(vb);
}

/* A host copy of t as a fixture tensor (data malloc'd). */
static fx_tensor
snapshot(const cg_tensor *t)
{
    fx_tensor s = { 0 };

    s.ndim = cg_tensor_ndim(t);
    cg_tensor_shape(t, s.shape);
    s.numel = cg_tensor_numel(t);
    s.data = host(t);
    return s;
}

START_TEST(exported_state_resumes_bit_for_bit)
{
    const char *name = roundtrip_cases[_i / 2];
    int split = _i % 2 ? 5 : 1, steps = fx_config_int(inputs, "steps", 0);
    fx_tensor snap[NP];
    const fx_tensor *init[NP];
    int k, j, s, n;
    run a, b;

    run_start(&a, name, NULL);
    for (s = 0; s < split; s++)
        run_step(&a, s);
    for (k = 0; k < NP; k++) {
        snap[k] = snapshot(a.p[k]);
        init[k] = &snap[k];
    }
    run_start(&b, name, init);
    n = cg_optim_state_count(a.opt);
    for (j = 0; j < n; j++) {
        const char *sn;
        cg_tensor *t, *copy;
        fx_tensor st;

        ck_assert_int_eq(cg_optim_state_get(a.opt, j, &sn, &t), CG_OK);
        st = snapshot(t);
        copy = tensor_of(&st, 0);
        ck_assert_msg(cg_optim_state_set(b.opt, sn, copy) == CG_OK, "%s",
                      TT_ERR);
        cg_tensor_free(copy);
        free(st.data);
    }
    ck_assert_int_eq(cg_optim_state_count(b.opt), n);
    for (k = 0; k < NP; k++) {
        int64_t st;

        ck_assert_int_eq(cg_optim_get_step(a.opt, k, &st), CG_OK);
        ck_assert_int_eq(cg_optim_set_step(b.opt, k, st), CG_OK);
        free(snap[k].data);
    }
    if (a.sched)
        ck_assert_int_eq(cg_lr_schedule_set_position(
                             b.sched, cg_lr_schedule_get_position(a.sched)),
                         CG_OK);
    ck_assert(cg_optim_get_lr(a.opt) == cg_optim_get_lr(b.opt));
    for (s = split; s < steps; s++) {
        run_step(&a, s);
        run_step(&b, s);
    }
    for (k = 0; k < NP; k++)
        assert_same_bits(a.p[k], b.p[k], "a parameter");
    ck_assert_int_eq(cg_optim_state_count(b.opt),
                     cg_optim_state_count(a.opt));
    for (j = 0; j < cg_optim_state_count(a.opt); j++) {
        const char *na, *nb;
        cg_tensor *ta, *tb;

        ck_assert_int_eq(cg_optim_state_get(a.opt, j, &na, &ta), CG_OK);
        ck_assert_int_eq(cg_optim_state_get(b.opt, j, &nb, &tb), CG_OK);
        ck_assert_str_eq(na, nb);
        assert_same_bits(ta, tb, na);
    }
    run_end(&a);
    run_end(&b);
}
END_TEST

/* ------------------------------------------------------------------------
 * Clipping on its own, options, bad input
 * ------------------------------------------------------------------------ */

/* A parameter of n elements whose gradient is a fixed pseudo-random
 * pattern (host copy in *g). */
static cg_tensor *
param_with_grad(int64_t n, unsigned seed, float **g)
{
    cg_tensor *p = cg_zeros(tt_ctx(), 1, &n), *gt;
    int64_t i;

    *g = malloc((size_t)n * sizeof **g);
    ck_assert(p && *g);
    for (i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        (*g)[i] = (float)((seed >> 8) / 16777216.0 - 0.5) * 3.0f;
    }
    ck_assert_int_eq(cg_tensor_set_requires_grad(p, 1), CG_OK);
    gt = cg_tensor_from_host(tt_ctx(), CG_F32, 1, &n, *g);
    ck_assert_int_eq(cg_backward(p, gt, 0), CG_OK);
    cg_tensor_free(gt);
    return p;
}

START_TEST(clip_norm_is_deterministic_and_exact_on_large_gradients)
{
    const int64_t sizes[2] = { 100003, 5 };
    double sum = 0, mx = 0, want;
    float *g[2], total[2], inf_total;
    cg_tensor *p[2][2];
    float *after[2];
    int r, k;
    int64_t i;

    /* The same gradients twice: with and without reading the norm. */
    for (r = 0; r < 2; r++)
        for (k = 0; k < 2; k++) {
            p[r][k] = param_with_grad(sizes[k], 7 + (unsigned)k, &g[k]);
            if (r == 0) {
                for (i = 0; i < sizes[k]; i++) {
                    sum += (double)g[k][i] * g[k][i];
                    mx = fmax(mx, fabs(g[k][i]));
                }
            }
            free(g[k]);
        }
    want = sqrt(sum);
    ck_assert_int_eq(cg_clip_grad_norm(p[0], 2, 1.0, 2.0, &total[0]), CG_OK);
    ck_assert_int_eq(cg_clip_grad_norm(p[1], 2, 1.0, 2.0, NULL), CG_OK);
    ck_assert_msg(fabs(total[0] - want) <= 1e-5 * want, "norm %.9g, want "
                  "%.9g", total[0], want);
    for (k = 0; k < 2; k++)
        assert_same_bits(cg_tensor_grad(p[0][k]), cg_tensor_grad(p[1][k]),
                         "a clipped gradient");
    /* Now the norm is max_norm (to rounding); clipping again reads the
     * same total from both, and scales by about 1. */
    ck_assert_int_eq(cg_clip_grad_norm(p[0], 2, 1.0, 2.0, &total[0]), CG_OK);
    ck_assert_int_eq(cg_clip_grad_norm(p[1], 2, 1.0, 2.0, &total[1]), CG_OK);
    ck_assert(memcmp(&total[0], &total[1], sizeof total[0]) == 0);
    ck_assert_msg(fabs(total[0] - 1.0) < 1e-5, "norm after clip %g",
                  total[0]);
    /* The infinity norm is exactly the largest |g| (scaled). */
    ck_assert_int_eq(cg_clip_grad_norm(p[0], 2, 1e9, INFINITY, &inf_total),
                     CG_OK);
    after[0] = host(cg_tensor_grad(p[0][0]));
    after[1] = host(cg_tensor_grad(p[0][1]));
    mx = 0;
    for (k = 0; k < 2; k++)
        for (i = 0; i < sizes[k]; i++)
            mx = fmax(mx, fabs(after[k][i]));
    ck_assert(inf_total == (float)mx);
    for (r = 0; r < 2; r++)
        for (k = 0; k < 2; k++)
            cg_tensor_free(p[r][k]);
    free(after[0]);
    free(after[1]);
}
END_TEST

/* A parameter of n elements holding vals: at offset 0 of its own storage,
 * or (offset 3) a view 3 elements into a larger tensor, which no vector
 * width divides; its gradient set to grad. */
static cg_tensor *
param_at(int64_t n, int offset, const float *vals, const float *grad)
{
    int64_t full = n + offset;
    float *h = calloc((size_t)full, sizeof *h);
    cg_tensor *base, *p, *gt;

    ck_assert_ptr_nonnull(h);
    memcpy(h + offset, vals, (size_t)n * sizeof *h);
    base = cg_tensor_from_host(tt_ctx(), CG_F32, 1, &full, h);
    free(h);
    ck_assert_ptr_nonnull(base);
    p = cg_narrow(base, 0, offset, n);
    cg_tensor_free(base);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(cg_tensor_set_requires_grad(p, 1), CG_OK);
    gt = cg_tensor_from_host(tt_ctx(), CG_F32, 1, &n, grad);
    ck_assert_int_eq(cg_backward(p, gt, 0), CG_OK);
    cg_tensor_free(gt);
    return p;
}

/* The update kernels take parameters at any element offset: each
 * optimizer, with every state buffer in use, gives the same bits for a
 * parameter 3 elements into its storage as for one at element 0, over a
 * size with whole vectors, whole chunks and a remainder.  (Offset 0 is
 * what ten_steps_match_pytorch checks against PyTorch.) */
START_TEST(updates_at_an_element_offset_match_offset_zero)
{
    const int64_t n = 1001;
    cg_sgd_options sgd = { 0.1, 0.9, 0, 0.01, 1, 0 };
    cg_adam_options adam = { 1e-2, 0.9, 0.999, 1e-8, 0.01, 1, 1 };
    cg_rmsprop_options rms = { 1e-2, 0.99, 1e-8, 0.01, 0.9, 1, 0 };
    float *vals = malloc((size_t)n * sizeof *vals);
    float *grad = malloc((size_t)n * sizeof *grad);
    unsigned seed = 11;
    int kind, off, step;
    int64_t i;

    ck_assert(vals && grad);
    for (i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        vals[i] = (float)((seed >> 8) / 16777216.0 - 0.5) * 2.0f;
        seed = seed * 1664525u + 1013904223u;
        grad[i] = (float)((seed >> 8) / 16777216.0 - 0.5) * 3.0f;
    }
    for (kind = 0; kind < 3; kind++) {
        cg_tensor *p[2];
        cg_optimizer *opt[2];

        for (off = 0; off < 2; off++) {
            p[off] = param_at(n, off ? 3 : 0, vals, grad);
            opt[off] = kind == 0 ? cg_optim_sgd_new(tt_ctx(), &p[off], 1, &sgd)
                     : kind == 1 ? cg_optim_adam_new(tt_ctx(), &p[off], 1,
                                                     &adam)
                     : cg_optim_rmsprop_new(tt_ctx(), &p[off], 1, &rms);
            ck_assert_msg(opt[off] != NULL, "%s", cg_last_error());
            for (step = 0; step < 3; step++)
                ck_assert_int_eq(cg_optim_step(opt[off]), CG_OK);
        }
        assert_same_bits(p[0], p[1], "a parameter at an offset");
        for (off = 0; off < 2; off++) {
            cg_optim_free(opt[off]);
            cg_tensor_free(p[off]);
        }
    }
    free(vals);
    free(grad);
}
END_TEST

START_TEST(defaults_and_explicit_zeros)
{
    cg_adam_options ao = { .beta1 = CG_OPTIM_ZERO };
    cg_memory_stats before, after;
    cg_optimizer *o;
    cg_tensor *p, *m;
    float *g, *mv;
    const char *name;
    int64_t st;

    p = param_with_grad(33, 3, &g);
    o = cg_optim_sgd_new(tt_ctx(), &p, 1, NULL);
    ck_assert_double_eq(cg_optim_get_lr(o), 1e-3);
    ck_assert_int_eq(cg_optim_state_count(o), 0);
    cg_optim_free(o);
    o = cg_optim_rmsprop_new(tt_ctx(), &p, 1, NULL);
    ck_assert_double_eq(cg_optim_get_lr(o), 1e-2);
    ck_assert_int_eq(cg_optim_state_count(o), 1);
    cg_optim_free(o);
    /* beta1 = 0 exactly: exp_avg is the last gradient.  A step is one
     * launch per parameter; clipping by norm two per gradient and one. */
    o = cg_optim_adam_new(tt_ctx(), &p, 1, &ao);
    ck_assert_double_eq(cg_optim_get_lr(o), 1e-3);
    ck_assert_int_eq(cg_context_stats(tt_ctx(), &before), CG_OK);
    ck_assert_int_eq(cg_clip_grad_norm(&p, 1, 1e9, 2, NULL), CG_OK);
    ck_assert_int_eq(cg_optim_step(o), CG_OK);
    ck_assert_int_eq(cg_context_stats(tt_ctx(), &after), CG_OK);
    ck_assert_int_eq(after.kernels_enqueued - before.kernels_enqueued, 4);
    ck_assert_int_eq(cg_optim_state_get(o, 0, &name, &m), CG_OK);
    ck_assert_str_eq(name, "exp_avg.0");
    mv = host(m);
    ck_assert(memcmp(mv, g, 33 * sizeof *g) == 0);
    ck_assert_int_eq(cg_optim_get_step(o, 0, &st), CG_OK);
    ck_assert_int_eq(st, 1);
    /* The step records nothing: p is still a leaf that requires grad. */
    ck_assert(cg_tensor_is_leaf(p) && cg_tensor_requires_grad(p));
    ck_assert_int_eq(cg_optim_zero_grad(o), CG_OK);
    ck_assert_ptr_null(cg_tensor_grad(p));
    /* Without gradients a step changes nothing, not even the count. */
    ck_assert_int_eq(cg_optim_step(o), CG_OK);
    ck_assert_int_eq(cg_optim_get_step(o, 0, &st), CG_OK);
    ck_assert_int_eq(st, 1);
    cg_optim_free(o);
    free(g);
    free(mv);
    cg_tensor_free(p);
}
END_TEST

#define REFUSED(call) \
    ck_assert_msg(!(call) && cg_last_error()[0], "accepted: %s", #call)
#define FAILS(call, code) \
    do { \
        int st_ = (call); \
        ck_assert_msg(st_ == (code), "%s gave %d (%s), want %d", #call, \
                      st_, TT_ERR, code); \
        ck_assert(cg_last_error()[0]); \
    } while (0)

START_TEST(bad_input_is_refused_and_changes_nothing)
{
    cg_context *ctx = tt_ctx(), *other;
    int64_t sh2[2] = { 3, 4 }, two = 2;
    cg_sgd_options so = { .lr = 0.1, .momentum = 0.9 };
    cg_adam_options ao = { 0 };
    cg_rmsprop_options ro = { 0 };
    cg_tensor *p, *q, *ip, *y, *nt, *m, *tr, *op, *wrong, *dup[2];
    cg_optimizer *o;
    float *g, *g2;
    int32_t iv[2] = { 1, 2 };

    p = param_with_grad(7, 5, &g);
    q = cg_zeros(ctx, 1, &two);
    ip = cg_tensor_from_host(ctx, CG_I32, 1, &two, iv);
    y = cg_mul_scalar(p, 2.0f);
    nt = cg_zeros(ctx, 1, &two);
    m = cg_zeros(ctx, 2, sh2);
    tr = cg_transpose(m, 0, 1);
    ck_assert_int_eq(cg_tensor_set_requires_grad(tr, 1), CG_OK);
    dup[0] = dup[1] = p;

    REFUSED(cg_optim_sgd_new(ctx, NULL, 1, NULL));
    REFUSED(cg_optim_sgd_new(ctx, &p, 0, NULL));
    REFUSED(cg_optim_sgd_new(NULL, &p, 1, NULL));
    REFUSED(cg_optim_sgd_new(ctx, &ip, 1, NULL));
    REFUSED(cg_optim_sgd_new(ctx, &y, 1, NULL));
    REFUSED(cg_optim_sgd_new(ctx, &nt, 1, NULL));
    REFUSED(cg_optim_sgd_new(ctx, &tr, 1, NULL));
    REFUSED(cg_optim_sgd_new(ctx, dup, 2, NULL));
    ck_assert_ptr_nonnull(strstr(cg_last_error(), "overlaps"));
    other = cg_context_new(NULL);
    ck_assert_ptr_nonnull(other);
    op = cg_zeros(other, 1, &two);
    cg_tensor_set_requires_grad(op, 1);
    REFUSED(cg_optim_adam_new(ctx, &op, 1, NULL));
    cg_tensor_free(op);
    cg_context_free(other);
    REFUSED(cg_optim_sgd_new(ctx, &p, 1, &(cg_sgd_options){ .lr = -1 }));
    REFUSED(cg_optim_sgd_new(ctx, &p, 1, &(cg_sgd_options){
        .nesterov = 1 }));
    REFUSED(cg_optim_sgd_new(ctx, &p, 1, &(cg_sgd_options){
        .momentum = 0.9, .dampening = 0.1, .nesterov = 1 }));
    REFUSED(cg_optim_sgd_new(ctx, &p, 1, &(cg_sgd_options){
        .momentum = -0.5 }));
    ao.beta1 = 1.0;
    REFUSED(cg_optim_adam_new(ctx, &p, 1, &ao));
    ao.beta1 = 0;
    ao.beta2 = NAN;
    REFUSED(cg_optim_adamw_new(ctx, &p, 1, &ao));
    ao.beta2 = 0;
    ao.eps = -1;
    REFUSED(cg_optim_adam_new(ctx, &p, 1, &ao));
    ro.alpha = -0.5;
    REFUSED(cg_optim_rmsprop_new(ctx, &p, 1, &ro));
    ro.alpha = 0;
    ro.weight_decay = INFINITY;
    REFUSED(cg_optim_rmsprop_new(ctx, &p, 1, &ro));

    /* A working optimizer refuses bad calls and stays as it was. */
    o = cg_optim_sgd_new(ctx, &p, 1, &so);
    ck_assert_ptr_nonnull(o);
    FAILS(cg_optim_set_lr(o, -1), CG_EINVAL);
    FAILS(cg_optim_set_lr(o, NAN), CG_EINVAL);
    ck_assert_double_eq(cg_optim_get_lr(o), 0.1);
    wrong = cg_zeros(ctx, 1, &two);
    FAILS(cg_optim_state_set(o, "exp_avg.0", q), CG_EINVAL);
    FAILS(cg_optim_state_set(o, "momentum_buffer.1", q), CG_EINVAL);
    FAILS(cg_optim_state_set(o, "momentum_buffer", q), CG_EINVAL);
    FAILS(cg_optim_state_set(o, "momentum_buffer.0x", q), CG_EINVAL);
    FAILS(cg_optim_state_set(o, "momentum_buffer.-1", q), CG_EINVAL);
    FAILS(cg_optim_state_set(o, NULL, q), CG_EINVAL);
    FAILS(cg_optim_state_set(o, "momentum_buffer.0", NULL), CG_EINVAL);
    FAILS(cg_optim_state_set(o, "momentum_buffer.0", wrong), CG_ESHAPE);
    FAILS(cg_optim_state_set(o, "momentum_buffer.0", ip), CG_EDTYPE);
    ck_assert_int_eq(cg_optim_state_count(o), 0);
    FAILS(cg_optim_state_get(o, 0, NULL, NULL), CG_EINVAL);
    FAILS(cg_optim_get_step(o, 1, (int64_t[1]){ 0 }), CG_EINVAL);
    FAILS(cg_optim_get_step(o, 0, NULL), CG_EINVAL);
    FAILS(cg_optim_set_step(o, 0, -1), CG_EINVAL);
    FAILS(cg_optim_set_step(o, -1, 0), CG_EINVAL);
    FAILS(cg_optim_step(NULL), CG_EINVAL);
    FAILS(cg_optim_zero_grad(NULL), CG_EINVAL);
    ck_assert_int_eq(cg_optim_state_count(NULL), -1);
    ck_assert_int_eq(cg_optim_param_count(o), 1);

    /* Clipping refuses bad arguments without touching the gradient. */
    FAILS(cg_clip_grad_norm(&p, 1, -1, 2, NULL), CG_EINVAL);
    FAILS(cg_clip_grad_norm(&p, 1, NAN, 2, NULL), CG_EINVAL);
    FAILS(cg_clip_grad_norm(&p, 1, 1, 0, NULL), CG_EINVAL);
    FAILS(cg_clip_grad_norm(&p, 1, 1, NAN, NULL), CG_EINVAL);
    FAILS(cg_clip_grad_norm(NULL, 1, 1, 2, NULL), CG_EINVAL);
    FAILS(cg_clip_grad_norm((cg_tensor *[2]){ p, NULL }, 2, 1, 2, NULL),
          CG_EINVAL);
    FAILS(cg_clip_grad_value(&p, 1, -0.5), CG_EINVAL);
    FAILS(cg_clip_grad_value((cg_tensor *[1]){ NULL }, 1, 0.5), CG_EINVAL);
    g2 = host(cg_tensor_grad(p));
    ck_assert(memcmp(g, g2, 7 * sizeof *g) == 0);
    free(g2);
    {
        float t = -1;

        /* No gradient at all: the norm is 0. */
        ck_assert_int_eq(cg_clip_grad_norm(&q, 1, 1, 2, &t), CG_OK);
        ck_assert(t == 0.0f);
    }

    /* Schedules. */
    REFUSED(cg_lr_schedule_step_new(o, 0, 0.5));
    REFUSED(cg_lr_schedule_step_new(o, 2, 0));
    REFUSED(cg_lr_schedule_step_new(NULL, 2, 0.5));
    REFUSED(cg_lr_schedule_exponential_new(o, INFINITY));
    REFUSED(cg_lr_schedule_cosine_new(o, 5, 0.1, 5, 0));
    REFUSED(cg_lr_schedule_cosine_new(o, -1, 0.1, 5, 0));
    REFUSED(cg_lr_schedule_cosine_new(o, 1, 1.5, 5, 0));
    REFUSED(cg_lr_schedule_cosine_new(o, 1, 0.5, 5, -1));
    ck_assert_double_eq(cg_optim_get_lr(o), 0.1);
    {
        cg_lr_schedule *s = cg_lr_schedule_exponential_new(o, 0.5);

        FAILS(cg_lr_schedule_set_position(s, -1), CG_EINVAL);
        ck_assert_int_eq(cg_lr_schedule_get_position(s), 0);
        FAILS(cg_lr_schedule_step(NULL), CG_EINVAL);
        cg_lr_schedule_free(s);
    }
    cg_optim_free(NULL);
    cg_lr_schedule_free(NULL);

    cg_optim_free(o);
    free(g);
    cg_tensor_free(wrong);
    cg_tensor_free(p);
    cg_tensor_free(q);
    cg_tensor_free(ip);
    cg_tensor_free(y);
    cg_tensor_free(nt);
    cg_tensor_free(m);
    cg_tensor_free(tr);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("optim");
    TCase *tc = tcase_create("optim");

    tt_require_device();
    tcase_set_timeout(tc, 600);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, ten_steps_match_pytorch);
    tcase_add_test(tc, clipping_matches_pytorch);
    tcase_add_test(tc, schedules_match_pytorch);
    tcase_add_loop_test(tc, exported_state_resumes_bit_for_bit, 0,
                        2 * NROUNDTRIP);
    tcase_add_test(tc, clip_norm_is_deterministic_and_exact_on_large_gradients);
    tcase_add_test(tc, updates_at_an_element_offset_match_offset_zero);
    tcase_add_test(tc, defaults_and_explicit_zeros);
    tcase_add_test(tc, bad_input_is_refused_and_changes_nothing);
    suite_add_tcase(s, tc);
    return tt_run(s);
}
