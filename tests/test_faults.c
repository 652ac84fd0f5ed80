/* SPDX-License-Identifier: MIT */
/*
 * tests/test_faults.c - every failure point of the common paths, one at a
 * time, in the spirit of SQLite's out-of-memory tests.
 *
 * cg__fault_after (lib/core/internal.h) makes the Nth host allocation,
 * device allocation, program build, kernel enqueue (clgrad's launches,
 * fills and CLBlast's GEMMs), host transfer or file write fail.  Each
 * scenario below runs with N = 0, 1, 2, ... until a run completes with no
 * fault fired, and at every N checks that the call either fails with an
 * error status and a message, or succeeds with exactly the result of a run
 * without faults; that a failure left the model's parameters, the
 * optimizer's state and the files on disk byte for byte as they were (or,
 * where a multi-launch update cannot be undone, exactly what the
 * library's documentation guarantees); and that the objects still work.
 * Under make check-valgrind every such point is also leak-checked; there
 * the first FULL points and then every STRIDE-th are swept (tt_checker),
 * which still runs each kind of site, so that the test takes about two
 * minutes, not ten.
 *
 * Each scenario prints the number of points it swept by kind.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "testutil.h"

#define MAXT 32
#define STRIDE 5        /* under a memory checker, after the first */
#define FULL 16         /* FULL points, all swept */
#define LIMIT 100000    /* points: more means a site fails without end */

/* ------------------------------------------------------------------------
 * Sweeping
 * ------------------------------------------------------------------------ */

typedef struct sweep {
    const char *name;
    long n;             /* the point being swept */
    long points;        /* points at which a fault fired */
    long kinds[6];      /* of them, by kind (bit index) */
    long failed;        /* calls that returned an error */
} sweep;

static void
sweep_begin(sweep *s, const char *name)
{
    memset(s, 0, sizeof *s);
    s->name = name;
}

/* Arms the fault for point s->n. */
static void
arm(const sweep *s)
{
    cg__fault_after(CG__FAULT_ALL, s->n);
}

/* Disarms; returns whether the fault fired (and counts it). */
static int
disarm(sweep *s)
{
    unsigned kind = cg__fault_fired_kind();
    int fired = cg__fault_after(CG__FAULT_ALL, -1) < 0;
    int b;

    if (!fired)
        return 0;
    s->points++;
    for (b = 0; b < 6; b++)
        if (kind & (1u << b))
            s->kinds[b]++;
    return 1;
}

/* Moves to the next point; prints the tally after the last. */
static int
sweep_next(sweep *s, int fired)
{
    if (!fired) {
        printf("fault sweep %-22s %4ld points (host alloc %ld, device alloc "
               "%ld, build %ld, enqueue %ld, transfer %ld, file write %ld), "
               "%ld calls failed%s\n", s->name, s->points, s->kinds[0],
               s->kinds[1], s->kinds[2], s->kinds[3], s->kinds[4],
               s->kinds[5], s->failed,
               tt_checker() ? " (the first 16, then every 5th point: a "
               "memory checker)" : "");
        fflush(stdout);
        return 0;
    }
    s->n += tt_checker() && s->n >= FULL ? STRIDE : 1;
    ck_assert_msg(s->n < LIMIT, "%s: faults fire without end", s->name);
    return 1;
}

/* A failed call: an error status with a message. */
static void
check_error(sweep *s, int status)
{
    s->failed++;
    ck_assert_msg(status != CG_OK, "%s", s->name);
    ck_assert_msg(cg_last_error()[0] != '\0', "%s at point %ld: no message",
                  s->name, s->n);
}

/* ------------------------------------------------------------------------
 * Byte snapshots of tensors and files
 * ------------------------------------------------------------------------ */

typedef struct snap {
    int n;
    size_t bytes[MAXT];
    unsigned char *data[MAXT];
} snap;

static void
snap_take(snap *s, cg_tensor *const *t, int n)
{
    int i;

    ck_assert_int_le(n, MAXT);
    s->n = n;
    for (i = 0; i < n; i++) {
        s->bytes[i] = t[i] ? (size_t)cg_tensor_numel(t[i]) * 4 : 0;
        s->data[i] = malloc(s->bytes[i] + 1);
        ck_assert_ptr_nonnull(s->data[i]);
        if (t[i])
            ck_assert_msg(cg_tensor_to_host(t[i], s->data[i], s->bytes[i])
                          == CG_OK, "%s", TT_ERR);
    }
}

static void
snap_free(snap *s)
{
    int i;

    for (i = 0; i < s->n; i++)
        free(s->data[i]);
    s->n = 0;
}

static int
snap_same(const snap *a, const snap *b, int i)
{
    return a->bytes[i] == b->bytes[i] &&
           memcmp(a->data[i], b->data[i], a->bytes[i]) == 0;
}

static void
snap_expect(const snap *want, cg_tensor *const *t, const char *what,
            const sweep *s)
{
    snap now;
    int i;

    snap_take(&now, t, want->n);
    for (i = 0; i < want->n; i++)
        ck_assert_msg(snap_same(want, &now, i), "%s at point %ld: %s %d "
                      "changed", s->name, s->n, what, i);
    snap_free(&now);
}

static char *
slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;

    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void
spill(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");

    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

/* The number of entries in directory `dir` (no stray temporary files). */
static int
dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

/* ------------------------------------------------------------------------
 * Models
 * ------------------------------------------------------------------------ */

static cg_tensor *
host_tensor(cg_context *ctx, int ndim, const int64_t *shape, float scale)
{
    float v[64];
    int64_t n = 1;
    int i;

    for (i = 0; i < ndim; i++)
        n *= shape[i];
    ck_assert_int_le(n, 64);
    for (i = 0; i < n; i++)
        v[i] = scale * (float)((i * 37 % 17) - 8) / 8.0f;
    return cg_tensor_from_host(ctx, CG_F32, ndim, shape, v);
}

/* linear(3, 5), tanh, linear(5, 2): a model of three kinds of module. */
static cg_module *
mlp_new(cg_context *ctx)
{
    cg_module *m = cg_sequential_new(ctx);

    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(cg_manual_seed(ctx, 11), CG_OK);
    ck_assert_int_eq(cg_module_add(m, "0", cg_linear_new(ctx, 3, 5, 1)),
                     CG_OK);
    ck_assert_int_eq(cg_module_add(m, "1", cg_activation_new(ctx, "tanh")),
                     CG_OK);
    ck_assert_int_eq(cg_module_add(m, "2", cg_linear_new(ctx, 5, 2, 1)),
                     CG_OK);
    return m;
}

/* Parameters and their gradients (NULL where none) of m. */
static int
params_of(cg_module *m, cg_tensor **p, cg_tensor **g)
{
    int n = cg_module_params(m, p, MAXT), i;

    ck_assert_int_gt(n, 0);
    for (i = 0; g && i < n; i++)
        g[i] = cg_tensor_grad(p[i]);
    return n;
}

/* MSE of the MLP on a fixed batch, then backward. */
static int
mlp_step(cg_module *m, cg_context *ctx)
{
    static const int64_t xs[2] = { 4, 3 }, ys[2] = { 4, 2 };
    cg_tensor *x = host_tensor(ctx, 2, xs, 1.0f), *t = NULL, *y = NULL;
    cg_tensor *l = NULL;
    int status;

    /* Each public call clears the last error: check before the next. */
    if (!x || !(t = host_tensor(ctx, 2, ys, 0.5f))) {
        status = cg__last_status();
        goto out;
    }
    y = cg_module_forward(m, x);
    l = y ? cg_mse_loss(y, t, CG_REDUCTION_MEAN) : NULL;
    status = l ? cg_backward(l, NULL, 0) : cg__last_status();
out:
    cg_tensor_free(l);
    cg_tensor_free(y);
    cg_tensor_free(t);
    cg_tensor_free(x);
    return status;
}

/* An LSTM (input 3, hidden 4, 2 layers) over T = 3, B = 2; the sum of
 * its output and final states, then backward. */
static cg_module *
lstm_new(cg_context *ctx)
{
    cg_rnn_options o = { CG_LSTM, 3, 4, 2, 0, 0, 0.0f };

    ck_assert_int_eq(cg_manual_seed(ctx, 12), CG_OK);
    return cg_rnn_new(ctx, &o);
}

static int
lstm_step(cg_module *m, cg_context *ctx)
{
    static const int64_t xs[3] = { 3, 2, 3 };
    cg_tensor *x = host_tensor(ctx, 3, xs, 1.0f), *out = NULL, *hn = NULL;
    cg_tensor *cn = NULL, *s[3] = { NULL, NULL, NULL }, *a = NULL, *l = NULL;
    int status, i;

    if (!x)
        return cg__last_status();
    status = cg_rnn_forward(m, x, NULL, NULL, NULL, &out, &hn, &cn);
    if (status == CG_OK) {
        s[0] = cg_sum(out, 0, NULL, 0);
        s[1] = s[0] ? cg_sum(hn, 0, NULL, 0) : NULL;
        s[2] = s[1] ? cg_sum(cn, 0, NULL, 0) : NULL;
        a = s[2] ? cg_add(s[0], s[1]) : NULL;
        l = a ? cg_add(a, s[2]) : NULL;
        status = l ? cg_backward(l, NULL, 0) : cg__last_status();
    }
    cg_tensor_free(l);
    cg_tensor_free(a);
    for (i = 0; i < 3; i++)
        cg_tensor_free(s[i]);
    cg_tensor_free(cn);
    cg_tensor_free(hn);
    cg_tensor_free(out);
    cg_tensor_free(x);
    return status;
}

/* ------------------------------------------------------------------------
 * Scenarios
 * ------------------------------------------------------------------------ */

/* A context: NULL with a message, or one that computes (a failure in the
 * optional tuning lookup leaves built-in parameters in force). */
START_TEST(creating_a_context)
{
    static const int64_t shape[1] = { 7 };
    sweep s;
    int fired;

    tt_require_device();
    sweep_begin(&s, "context");
    do {
        cg_context *c;
        cg_tensor *o, *sum;
        float v = 0;

        arm(&s);
        c = cg_context_new(NULL);
        fired = disarm(&s);
        if (!c) {
            ck_assert_msg(fired, "no context without a fault: %s", TT_ERR);
            check_error(&s, cg__last_status());
            continue;
        }
        o = cg_ones(c, 1, shape);
        sum = o ? cg_sum(o, 0, NULL, 0) : NULL;
        ck_assert_msg(sum && cg_tensor_item(sum, &v) == CG_OK, "%s", TT_ERR);
        ck_assert(v == 7.0f);
        cg_tensor_free(sum);
        cg_tensor_free(o);
        cg_context_free(c);
    } while (sweep_next(&s, fired));
}
END_TEST

typedef cg_module *(*model_fn)(cg_context *ctx);
typedef int (*step_fn)(cg_module *m, cg_context *ctx);

/* Forward and backward of a fresh model at every point: a failure leaves
 * the parameters as they were, and after it (gradients dropped) the same
 * model computes the gradients of a run without faults, as a success
 * does.  cold: a fresh context at each point, so that the programs are
 * built (or read from the binary cache) inside the sweep. */
static void
sweep_forward_backward(const char *name, model_fn make, step_fn step,
                       int cold)
{
    cg_tensor *p[MAXT], *g[MAXT];
    cg_module *m;
    snap p0, gref;
    sweep s;
    int n, fired;

    m = make(tt_ctx());
    n = params_of(m, p, NULL);
    snap_take(&p0, p, n);
    ck_assert_msg(step(m, tt_ctx()) == CG_OK, "%s", TT_ERR);
    params_of(m, p, g);
    snap_take(&gref, g, n);
    cg_module_free(m);
    sweep_begin(&s, name);
    do {
        cg_context *c = cold ? cg_context_new(NULL) : tt_ctx();
        int status;

        ck_assert_msg(c != NULL, "%s", TT_ERR);
        m = make(c);
        ck_assert_int_eq(params_of(m, p, NULL), n);
        /* An empty pool: device allocations happen inside the sweep. */
        ck_assert_int_eq(cg_context_release_cache(c), CG_OK);
        arm(&s);
        status = step(m, c);
        fired = disarm(&s);
        if (status != CG_OK) {
            ck_assert_msg(fired, "%s failed without a fault: %s", name,
                          TT_ERR);
            check_error(&s, status);
            snap_expect(&p0, p, "parameter", &s);
            ck_assert_int_eq(cg_module_zero_grad(m), CG_OK);
            ck_assert_msg(step(m, c) == CG_OK, "%s after point %ld: %s",
                          name, s.n, TT_ERR);
        }
        params_of(m, p, g);
        snap_expect(&gref, g, "gradient", &s);
        snap_expect(&p0, p, "parameter", &s);
        cg_module_free(m);
        if (cold)
            cg_context_free(c);
    } while (sweep_next(&s, fired));
    snap_free(&gref);
    snap_free(&p0);
}

START_TEST(mlp_forward_backward)
{
    sweep_forward_backward("mlp forward+backward", mlp_new, mlp_step, 1);
}
END_TEST

START_TEST(lstm_forward_backward)
{
    sweep_forward_backward("lstm forward+backward", lstm_new, lstm_step, 0);
}
END_TEST

/* What an optimizer holds: its parameters, its state tensors and each
 * parameter's step count, as host bytes. */
typedef struct optim_image {
    snap p, st;
    int owner[MAXT];            /* st[i] belongs to parameter owner[i] */
    char names[MAXT][48];
    int64_t steps[MAXT];
} optim_image;

static void
image_take(optim_image *im, cg_optimizer *opt, cg_tensor *const *p, int n)
{
    cg_tensor *t[MAXT];
    int k = cg_optim_state_count(opt), i;

    ck_assert_int_le(k, MAXT);
    snap_take(&im->p, p, n);
    for (i = 0; i < k; i++) {
        const char *name, *dot;

        ck_assert_int_eq(cg_optim_state_get(opt, i, &name, &t[i]), CG_OK);
        snprintf(im->names[i], sizeof im->names[i], "%s", name);
        dot = strrchr(name, '.');
        ck_assert_ptr_nonnull(dot);
        im->owner[i] = atoi(dot + 1);
    }
    snap_take(&im->st, t, k);
    for (i = 0; i < n; i++)
        ck_assert_int_eq(cg_optim_get_step(opt, i, &im->steps[i]), CG_OK);
}

static void
image_free(optim_image *im)
{
    snap_free(&im->p);
    snap_free(&im->st);
}

/* Puts an image back (no faults armed). */
static void
image_put(const optim_image *im, cg_optimizer *opt, cg_tensor *const *p)
{
    int i;

    for (i = 0; i < im->p.n; i++) {
        ck_assert_int_eq(cg_tensor_write(p[i], im->p.data[i],
                                         im->p.bytes[i]), CG_OK);
        ck_assert_int_eq(cg_optim_set_step(opt, i, im->steps[i]), CG_OK);
    }
    for (i = 0; i < im->st.n; i++) {
        const cg_tensor *pp = p[im->owner[i]];
        int64_t shape[CG_MAX_DIMS];
        cg_tensor *v;

        ck_assert_int_eq(cg_tensor_shape(pp, shape), CG_OK);
        v = cg_tensor_from_host(cg_tensor_context(pp), CG_F32,
                                cg_tensor_ndim(pp), shape, im->st.data[i]);
        ck_assert_ptr_nonnull(v);
        ck_assert_int_eq(cg_optim_state_set(opt, im->names[i], v), CG_OK);
        cg_tensor_free(v);
    }
}

/* Whether parameter i (its values, state and step count) is as in im. */
static int
param_is(const optim_image *im, const optim_image *now, int i)
{
    int k;

    if (!snap_same(&im->p, &now->p, i) || im->steps[i] != now->steps[i])
        return 0;
    for (k = 0; k < im->st.n; k++)
        if (im->owner[k] == i && !snap_same(&im->st, &now->st, k))
            return 0;
    return 1;
}

/* An optimizer step at every point.  cg_optim_step's guarantee (one
 * launch per parameter, in order): each parameter, with its state and
 * step count, has either taken the whole step or none of it, and those
 * that took it come first. */
static void
sweep_optim(const char *name, int adam)
{
    cg_context *ctx = tt_ctx();
    cg_sgd_options so = { 0 };
    cg_module *m = mlp_new(ctx);
    cg_tensor *p[MAXT];
    cg_optimizer *opt;
    optim_image before, after;
    int n = params_of(m, p, NULL), fired;
    sweep s;

    so.lr = 0.1;
    so.momentum = 0.9;
    opt = adam ? cg_optim_adam_new(ctx, p, n, NULL)
               : cg_optim_sgd_new(ctx, p, n, &so);
    ck_assert_msg(opt != NULL, "%s", TT_ERR);
    ck_assert_int_eq(mlp_step(m, ctx), CG_OK);
    ck_assert_int_eq(cg_optim_step(opt), CG_OK);    /* state made */
    image_take(&before, opt, p, n);
    ck_assert_int_eq(cg_optim_step(opt), CG_OK);
    image_take(&after, opt, p, n);
    ck_assert(!param_is(&before, &after, 0));
    sweep_begin(&s, name);
    do {
        optim_image now;
        int status, i, stepped = 1;

        image_put(&before, opt, p);
        arm(&s);
        status = cg_optim_step(opt);
        fired = disarm(&s);
        if (status != CG_OK)
            check_error(&s, status);
        image_take(&now, opt, p, n);
        if (status != CG_OK) {
            for (i = 0; i < n; i++) {
                if (stepped && !param_is(&after, &now, i))
                    stepped = 0;
                ck_assert_msg(param_is(stepped ? &after : &before, &now, i),
                              "%s at point %ld: parameter %d half-stepped "
                              "or out of order", name, s.n, i);
            }
        } else {
            for (i = 0; i < n; i++)
                ck_assert_msg(param_is(&after, &now, i), "%s at point %ld: "
                              "parameter %d", name, s.n, i);
        }
        image_free(&now);
    } while (sweep_next(&s, fired));
    image_free(&before);
    image_free(&after);
    cg_optim_free(opt);
    cg_module_free(m);
}

START_TEST(sgd_step)
{
    sweep_optim("sgd step", 0);
}
END_TEST

START_TEST(adam_step)
{
    sweep_optim("adam step", 1);
}
END_TEST

/* A model, its optimizer and a checkpoint file of them. */
typedef struct trained {
    cg_module *m;
    cg_optimizer *opt;
    cg_tensor *p[MAXT];
    int n;
} trained;

static void
trained_new(trained *t)
{
    cg_context *ctx = tt_ctx();

    t->m = mlp_new(ctx);
    t->n = params_of(t->m, t->p, NULL);
    t->opt = cg_optim_adam_new(ctx, t->p, t->n, NULL);
    ck_assert_ptr_nonnull(t->opt);
    ck_assert_int_eq(mlp_step(t->m, ctx), CG_OK);
    ck_assert_int_eq(cg_optim_step(t->opt), CG_OK);
}

static void
trained_free(trained *t)
{
    cg_optim_free(t->opt);
    cg_module_free(t->m);
}

/* What clgrad-train saves: the model, the optimizer, metadata. */
static int
save(const trained *t, const char *path)
{
    cg_checkpoint *ck = cg_checkpoint_new();
    int status;

    if (!ck)
        return cg__last_status();
    status = cg_checkpoint_add_module(ck, NULL, t->m);
    if (status == CG_OK)
        status = cg_checkpoint_add_optimizer(ck, NULL, t->opt);
    if (status == CG_OK)
        status = cg_checkpoint_set_meta_int(ck, "train.step", 2);
    if (status == CG_OK)
        status = cg_checkpoint_save(ck, path);
    cg_checkpoint_free(ck);
    return status;
}

static void
paths(char *dir, char *file, char *ref, size_t size, const char *sub)
{
    snprintf(dir, size, "%s/%s", tt_tmpdir(), sub);
    ck_assert_int_eq(cg__mkdir_p(dir), CG_OK);
    snprintf(file, size, "%s/model.safetensors", dir);
    snprintf(ref, size, "%s/%s.ref.safetensors", tt_tmpdir(), sub);
}

/* Saving over an older checkpoint at every point: a failure leaves the
 * old file, byte for byte, and no temporary file beside it; a success
 * writes what a run without faults writes. */
START_TEST(checkpoint_save)
{
    char dir[512], file[600], ref[600];
    char *old, *want, *got;
    size_t nold, nwant, ngot;
    trained t;
    sweep s;
    int fired;

    trained_new(&t);
    paths(dir, file, ref, sizeof dir, "save");
    ck_assert_int_eq(save(&t, file), CG_OK);
    old = slurp(file, &nold);
    ck_assert_int_eq(mlp_step(t.m, tt_ctx()), CG_OK);
    ck_assert_int_eq(cg_optim_step(t.opt), CG_OK);
    ck_assert_int_eq(save(&t, ref), CG_OK);
    want = slurp(ref, &nwant);
    ck_assert(nwant != nold || memcmp(want, old, nold) != 0);
    sweep_begin(&s, "checkpoint save");
    do {
        int status;

        ck_assert_int_eq(cg_context_release_cache(tt_ctx()), CG_OK);
        arm(&s);
        status = save(&t, file);
        fired = disarm(&s);
        got = slurp(file, &ngot);
        if (status != CG_OK) {
            check_error(&s, status);
            ck_assert_msg(ngot == nold && memcmp(got, old, nold) == 0,
                          "point %ld: the old checkpoint changed", s.n);
        } else {
            ck_assert_msg(ngot == nwant && memcmp(got, want, nwant) == 0,
                          "point %ld: a wrong checkpoint", s.n);
            spill(file, old, nold);
        }
        ck_assert_int_eq(dir_entries(dir), 1);
        free(got);
    } while (sweep_next(&s, fired));
    free(want);
    free(old);
    trained_free(&t);
}
END_TEST

/* Loading a checkpoint into a model and its optimizer at every point.  A
 * failure while reading the file changes nothing; cg_checkpoint_restore
 * checks everything before it writes, one transfer per tensor, so a
 * transfer failing part-way leaves each tensor either as it was or as in
 * the file, which is what its documentation promises. */
START_TEST(checkpoint_load)
{
    char dir[512], file[600], ref[600];
    optim_image before, loaded;
    trained t;
    sweep s;
    int fired;

    trained_new(&t);
    paths(dir, file, ref, sizeof dir, "load");
    image_take(&before, t.opt, t.p, t.n);
    ck_assert_int_eq(mlp_step(t.m, tt_ctx()), CG_OK);
    ck_assert_int_eq(cg_optim_step(t.opt), CG_OK);
    ck_assert_int_eq(save(&t, file), CG_OK);
    image_take(&loaded, t.opt, t.p, t.n);
    sweep_begin(&s, "checkpoint load");
    do {
        cg_checkpoint *ck;
        optim_image now;
        int status, i;

        image_put(&before, t.opt, t.p);
        ck_assert_int_eq(cg_context_release_cache(tt_ctx()), CG_OK);
        arm(&s);
        ck = cg_checkpoint_load(file);
        status = ck ? cg_checkpoint_restore_module(ck, NULL, t.m)
                    : cg__last_status();
        if (status == CG_OK)
            status = cg_checkpoint_restore_optimizer(ck, NULL, t.opt);
        fired = disarm(&s);
        if (status != CG_OK)
            check_error(&s, status);
        cg_checkpoint_free(ck);
        image_take(&now, t.opt, t.p, t.n);
        if (status != CG_OK) {
            for (i = 0; i < t.n; i++) {
                ck_assert_msg(ck || snap_same(&before.p, &now.p, i),
                              "point %ld: parameter %d changed by a failed "
                              "load", s.n, i);
                ck_assert_msg(snap_same(&before.p, &now.p, i) ||
                              snap_same(&loaded.p, &now.p, i), "point %ld: "
                              "parameter %d is neither old nor loaded", s.n,
                              i);
            }
            for (i = 0; i < now.st.n; i++)
                ck_assert_msg(snap_same(&before.st, &now.st, i) ||
                              snap_same(&loaded.st, &now.st, i), "point %ld: "
                              "state %d is neither old nor loaded", s.n, i);
        } else {
            for (i = 0; i < t.n; i++)
                ck_assert(param_is(&loaded, &now, i));
        }
        image_free(&now);
    } while (sweep_next(&s, fired));
    image_free(&before);
    image_free(&loaded);
    trained_free(&t);
}
END_TEST

/* Reading the tuning databases into a context at every point: a failure
 * leaves the entries in force as they were; a success puts the same ones
 * in force as a run without faults. */
START_TEST(tuning_load)
{
    cg_context *ctx = tt_ctx();
    cg_tuning_entry want[64], got;
    int nwant, n, i, fired;
    sweep s;

    ck_assert_int_eq(cg_context_apply_tuning(ctx), CG_OK);
    ck_assert_int_eq(cg_context_tuning_count(ctx, &nwant), CG_OK);
    ck_assert_int_le(nwant, 64);
    for (i = 0; i < nwant; i++)
        ck_assert_int_eq(cg_context_tuning_entry(ctx, i, &want[i]), CG_OK);
    sweep_begin(&s, "tuning database load");
    do {
        int status;

        arm(&s);
        status = cg_context_apply_tuning(ctx);
        fired = disarm(&s);
        if (status != CG_OK)
            check_error(&s, status);
        ck_assert_int_eq(cg_context_tuning_count(ctx, &n), CG_OK);
        ck_assert_msg(n == nwant, "point %ld: %d entries in force, not %d "
                      "(status %d)", s.n, n, nwant, status);
        for (i = 0; i < n; i++) {
            ck_assert_int_eq(cg_context_tuning_entry(ctx, i, &got), CG_OK);
            ck_assert_msg(memcmp(&got, &want[i], sizeof got) == 0,
                          "point %ld: tuning entry %d changed", s.n, i);
        }
    } while (sweep_next(&s, fired));
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("faults");
    TCase *tc = tcase_create("faults");

    tt_require_device();
    tcase_set_timeout(tc, 3600);
    tcase_add_test(tc, creating_a_context);
    tcase_add_test(tc, mlp_forward_backward);
    tcase_add_test(tc, lstm_forward_backward);
    tcase_add_test(tc, sgd_step);
    tcase_add_test(tc, adam_step);
    tcase_add_test(tc, checkpoint_save);
    tcase_add_test(tc, checkpoint_load);
    tcase_add_test(tc, tuning_load);
    suite_add_tcase(s, tc);
    return tt_run(s);
}
