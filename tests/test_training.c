/* SPDX-License-Identifier: MIT */
/*
 * tests/test_training.c - what the library gives every training program:
 * optimizer state and the training position in checkpoints (a run saved,
 * loaded and continued is bit-identical to one never interrupted; bad
 * files change nothing) and the module container (names, order,
 * ownership, forward, errors).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define NP 2
static const int64_t pshape[NP][2] = { { 7, 3 }, { 5, 1 } };

static int64_t
numel(int i)
{
    return pshape[i][0] * pshape[i][1];
}

/* Parameters with fixed starting values. */
static void
make_params(cg_tensor **p)
{
    float v[32];
    int i, j;

    for (i = 0; i < NP; i++) {
        for (j = 0; j < numel(i); j++)
            v[j] = (float)((j * 7 + i * 3) % 11) / 5.0f - 1.0f;
        p[i] = cg_tensor_from_host(tt_ctx(), CG_F32, 2, pshape[i], v);
        ck_assert_msg(p[i] != NULL, "%s", TT_ERR);
        cg_tensor_set_requires_grad(p[i], 1);
    }
}

/* One step of sum((p - 0.3)^3) over both parameters, whose gradient
 * changes from step to step. */
static void
train_step(cg_optimizer *opt, cg_tensor **p)
{
    cg_tensor *total = NULL;
    int i;

    for (i = 0; i < NP; i++) {
        cg_tensor *d = cg_add_scalar(p[i], -0.3f);
        cg_tensor *c = cg_pow_scalar(d, 3.0f);
        cg_tensor *s = cg_sum(c, 0, NULL, 0), *t;

        ck_assert_msg(s != NULL, "%s", TT_ERR);
        t = total ? cg_add(total, s) : cg_tensor_ref(s);
        cg_tensor_free(total);
        total = t;
        cg_tensor_free(d);
        cg_tensor_free(c);
        cg_tensor_free(s);
    }
    ck_assert_int_eq(cg_backward(total, NULL, 0), CG_OK);
    cg_tensor_free(total);
    ck_assert_int_eq(cg_optim_step(opt), CG_OK);
    ck_assert_int_eq(cg_optim_zero_grad(opt), CG_OK);
}

enum { K_SGD, K_ADAM, K_RMSPROP, K_KINDS };

static cg_optimizer *
make_opt(int kind, cg_tensor **p)
{
    cg_optimizer *opt = NULL;

    if (kind == K_SGD) {
        cg_sgd_options o = { 0.05, 0.9, 0, 0.01, 1, 0 };

        opt = cg_optim_sgd_new(tt_ctx(), p, NP, &o);
    } else if (kind == K_ADAM) {
        cg_adam_options o = { 0.01, 0, 0, 0, 0.001, 1, 0 };

        opt = cg_optim_adam_new(tt_ctx(), p, NP, &o);
    } else {
        cg_rmsprop_options o = { 0.01, 0, 0, 0, 0.5, 1, 0 };

        opt = cg_optim_rmsprop_new(tt_ctx(), p, NP, &o);
    }
    ck_assert_msg(opt != NULL, "%s", TT_ERR);
    return opt;
}

static void
read_params(cg_tensor **p, float *out)
{
    int i;

    for (i = 0; i < NP; i++) {
        ck_assert_int_eq(cg_tensor_to_host(p[i], out, (size_t)numel(i) * 4),
                         CG_OK);
        out += numel(i);
    }
}

static void
save_run(cg_optimizer *opt, cg_tensor **p, const char *path)
{
    cg_checkpoint *ck = cg_checkpoint_new();
    cg_train_position pos = { 3, 1, 4, 0, 6 };

    ck_assert_int_eq(cg_checkpoint_add_tensor(ck, "p0", p[0]), CG_OK);
    ck_assert_int_eq(cg_checkpoint_add_tensor(ck, "p1", p[1]), CG_OK);
    ck_assert_int_eq(cg_checkpoint_add_optimizer(ck, NULL, opt), CG_OK);
    ck_assert_int_eq(cg_checkpoint_add_position(ck, &pos), CG_OK);
    ck_assert_int_eq(cg_checkpoint_save(ck, path), CG_OK);
    cg_checkpoint_free(ck);
}

/* Three steps, a checkpoint, three more; against three steps, a fresh
 * optimizer and parameters restored from the file, three more. */
START_TEST(optimizer_state_resumes_bit_identically)
{
    cg_tensor *a[NP], *b[NP];
    cg_optimizer *oa, *ob;
    cg_checkpoint *ck;
    cg_train_position pos;
    const char *names[NP] = { "p0", "p1" };
    float va[26], vb[26];
    char path[512];
    int s, i;

    snprintf(path, sizeof path, "%s/opt%d.safetensors", tt_tmpdir(), _i);
    make_params(a);
    oa = make_opt(_i, a);
    for (s = 0; s < 3; s++)
        train_step(oa, a);
    save_run(oa, a, path);
    for (s = 0; s < 3; s++)
        train_step(oa, a);
    read_params(a, va);

    make_params(b);
    ob = make_opt(_i, b);
    ck = cg_checkpoint_load(path);
    ck_assert_msg(ck != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_checkpoint_restore(ck, NP, names, b), CG_OK);
    ck_assert_msg(cg_checkpoint_restore_optimizer(ck, NULL, ob) == CG_OK,
                  "%s", TT_ERR);
    ck_assert_int_eq(cg_optim_state_count(ob), cg_optim_state_count(oa));
    for (i = 0; i < NP; i++) {
        int64_t st;

        ck_assert_int_eq(cg_optim_get_step(ob, i, &st), CG_OK);
        ck_assert_int_eq(st, 3);
    }
    ck_assert_int_eq(cg_checkpoint_get_position(ck, &pos), CG_OK);
    ck_assert_int_eq(pos.step, 3);
    ck_assert_int_eq(pos.epoch, 1);
    ck_assert_int_eq(pos.index, 4);
    ck_assert_int_eq(pos.schedule, 0);
    ck_assert_int_eq(pos.total, 6);
    cg_checkpoint_free(ck);
    for (s = 0; s < 3; s++)
        train_step(ob, b);
    read_params(b, vb);
    ck_assert(memcmp(va, vb, sizeof va) == 0);
    cg_optim_free(oa);
    cg_optim_free(ob);
    for (i = 0; i < NP; i++) {
        cg_tensor_free(a[i]);
        cg_tensor_free(b[i]);
    }
}
END_TEST

/* Every state tensor and step count of opt, for comparing before and
 * after a refused restore. */
static size_t
snapshot(cg_optimizer *opt, float *v)
{
    int i, n = cg_optim_state_count(opt);
    size_t at = 0;

    for (i = 0; i < n; i++) {
        cg_tensor *t;
        int64_t k;

        ck_assert_int_eq(cg_optim_state_get(opt, i, NULL, &t), CG_OK);
        k = cg_tensor_numel(t);
        ck_assert_int_eq(cg_tensor_to_host(t, v + at, (size_t)k * 4), CG_OK);
        at += (size_t)k;
    }
    for (i = 0; i < NP; i++) {
        int64_t st;

        cg_optim_get_step(opt, i, &st);
        v[at++] = (float)st;
    }
    return at;
}

/* A copy of ck without tensor `drop` and metadata `drop_meta` (either may
 * be NULL). */
static cg_checkpoint *
copy_without(const cg_checkpoint *ck, const char *drop, const char *drop_meta)
{
    cg_checkpoint *out = cg_checkpoint_new();
    int i;

    for (i = 0; i < cg_checkpoint_num_tensors(ck); i++) {
        const char *name = cg_checkpoint_tensor_name(ck, i);
        int64_t shape[CG_MAX_DIMS];
        cg_dtype dt;
        int nd;

        if (drop && strcmp(name, drop) == 0)
            continue;
        cg_checkpoint_tensor_info(ck, name, &dt, &nd, shape);
        ck_assert_int_eq(cg_checkpoint_add_host(out, name, dt, nd, shape,
                         cg_checkpoint_tensor_data(ck, name, NULL)), CG_OK);
    }
    for (i = 0; i < cg_checkpoint_num_meta(ck); i++) {
        const char *key = cg_checkpoint_meta_key(ck, i);

        if (!drop_meta || strcmp(key, drop_meta) != 0)
            cg_checkpoint_set_meta(out, key, cg_checkpoint_get_meta(ck, key));
    }
    return out;
}

static void
expect_refused(const cg_checkpoint *ck, cg_optimizer *opt, const char *what)
{
    float before[200], after[200];
    size_t n = snapshot(opt, before);
    int rc = cg_checkpoint_restore_optimizer(ck, NULL, opt);

    ck_assert_int_eq(rc, CG_EFORMAT);
    ck_assert_msg(strstr(cg_last_error(), what) != NULL, "'%s' lacks '%s'",
                  cg_last_error(), what);
    ck_assert_uint_eq(snapshot(opt, after), n);
    ck_assert(memcmp(before, after, n * sizeof *before) == 0);
}

START_TEST(bad_optimizer_state_changes_nothing)
{
    cg_tensor *p[NP], *q[NP];
    cg_optimizer *adam, *target, *sgd;
    cg_checkpoint *ck = cg_checkpoint_new(), *bad;
    const int64_t other[2] = { 7, 2 };
    float zeros[14] = { 0 };
    int i;

    make_params(p);
    make_params(q);
    adam = make_opt(K_ADAM, p);
    target = make_opt(K_ADAM, q);
    sgd = make_opt(K_SGD, q);
    train_step(adam, p);
    train_step(adam, p);
    train_step(target, q);
    ck_assert_int_eq(cg_checkpoint_add_optimizer(ck, NULL, adam), CG_OK);
    ck_assert_ptr_nonnull(cg_checkpoint_get_meta(ck, "optim.step.1"));
    ck_assert_int_eq(cg_checkpoint_tensor_info(ck, "optim.exp_avg_sq.1", NULL,
                                               NULL, NULL), CG_OK);

    bad = copy_without(ck, "optim.exp_avg.1", NULL);
    expect_refused(bad, target, "optim.exp_avg.1");
    cg_checkpoint_free(bad);
    bad = copy_without(ck, NULL, "optim.step.0");
    expect_refused(bad, target, "optim.step.0");
    cg_checkpoint_free(bad);
    bad = copy_without(ck, NULL, NULL);
    ck_assert_int_eq(cg_checkpoint_add_host(bad, "optim.exp_avg.0", CG_F32, 2,
                                            other, zeros), CG_OK);
    expect_refused(bad, target, "[7, 2]");
    cg_checkpoint_free(bad);
    bad = copy_without(ck, NULL, NULL);
    cg_checkpoint_set_meta(bad, "optim.step.1", "-4");
    expect_refused(bad, target, "optim.step.1");
    cg_checkpoint_free(bad);
    /* Adam's state is no SGD's. */
    expect_refused(ck, sgd, "optim.exp_avg");
    ck_assert_int_eq(cg_checkpoint_add_optimizer(ck, "", adam), CG_EINVAL);
    ck_assert_int_eq(cg_checkpoint_restore_optimizer(NULL, NULL, adam),
                     CG_EINVAL);
    ck_assert_int_eq(cg_checkpoint_add_optimizer(ck, NULL, NULL), CG_EINVAL);
    /* Another prefix keeps two optimizers apart. */
    ck_assert_int_eq(cg_checkpoint_add_optimizer(ck, "d.", sgd), CG_OK);
    ck_assert_int_eq(cg_checkpoint_restore_optimizer(ck, "d.", sgd), CG_OK);
    ck_assert_int_eq(cg_checkpoint_restore_optimizer(ck, NULL, target), CG_OK);
    cg_checkpoint_free(ck);
    cg_optim_free(adam);
    cg_optim_free(target);
    cg_optim_free(sgd);
    for (i = 0; i < NP; i++) {
        cg_tensor_free(p[i]);
        cg_tensor_free(q[i]);
    }
}
END_TEST

START_TEST(position_checks_its_fields)
{
    cg_checkpoint *ck = cg_checkpoint_new();
    cg_train_position pos = { 10, 2, 3, 10, 0 }, got = { 1, 1, 1, 1, 1 };
    cg_train_position neg = { -1, 0, 0, 0, 0 };

    ck_assert_int_eq(cg_checkpoint_get_position(ck, &got), CG_EFORMAT);
    ck_assert_int_eq(got.step, 1);
    ck_assert_int_eq(cg_checkpoint_add_position(ck, &neg), CG_EINVAL);
    ck_assert_int_eq(cg_checkpoint_num_meta(ck), 0);
    ck_assert_int_eq(cg_checkpoint_add_position(ck, &pos), CG_OK);
    ck_assert_str_eq(cg_checkpoint_get_meta(ck, "train.step"), "10");
    ck_assert_str_eq(cg_checkpoint_get_meta(ck, "train.schedule"), "10");
    ck_assert_int_eq(cg_checkpoint_get_position(ck, &got), CG_OK);
    ck_assert(memcmp(&got, &pos, sizeof pos) == 0);
    cg_checkpoint_set_meta(ck, "train.epoch", "x");
    got.step = 99;
    ck_assert_int_eq(cg_checkpoint_get_position(ck, &got), CG_EFORMAT);
    ck_assert(strstr(cg_last_error(), "train.epoch") != NULL);
    ck_assert_int_eq(got.step, 99);
    ck_assert_int_eq(cg_checkpoint_get_position(NULL, &got), CG_EINVAL);
    cg_checkpoint_free(ck);
}
END_TEST

/* ------------------------------------------------------------------------
 * Containers
 * ------------------------------------------------------------------------ */

static cg_module *
mlp(int nested)
{
    cg_module *seq = cg_sequential_new(tt_ctx()), *inner;

    ck_assert_ptr_nonnull(seq);
    ck_assert_int_eq(cg_module_add(seq, NULL, cg_linear_new(tt_ctx(), 5, 4,
                                                            1)), CG_OK);
    ck_assert_int_eq(cg_module_add(seq, NULL,
                                   cg_activation_new(tt_ctx(), "relu")),
                     CG_OK);
    if (!nested) {
        ck_assert_int_eq(cg_module_add(seq, NULL, cg_linear_new(tt_ctx(), 4,
                                                                3, 0)),
                         CG_OK);
        return seq;
    }
    inner = cg_sequential_new(tt_ctx());
    ck_assert_int_eq(cg_module_add(seq, "head", inner), CG_OK);
    /* Added after nesting: the outer names follow. */
    ck_assert_int_eq(cg_module_add(inner, NULL, cg_linear_new(tt_ctx(), 4, 3,
                                                              0)), CG_OK);
    return seq;
}

START_TEST(containers_name_parameters_as_state_dict)
{
    static const char *const flat[] = { "0.weight", "0.bias", "2.weight" };
    static const char *const nested[] = { "0.weight", "0.bias",
                                          "head.0.weight" };
    cg_module *a = mlp(0), *b = mlp(1);
    cg_tensor *ps[8];
    const char *name;
    int i;

    ck_assert_str_eq(cg_module_kind(a), "sequential");
    ck_assert_int_eq(cg_module_num_children(a), 3);
    ck_assert_str_eq(cg_module_kind(cg_module_child(a, 1, &name)), "relu");
    ck_assert_str_eq(name, "1");
    ck_assert_ptr_null(cg_module_child(a, 3, NULL));
    ck_assert_int_eq(cg_module_num_params(a), 3);
    ck_assert_int_eq(cg_module_num_params(b), 3);
    ck_assert_int_eq(cg_module_params(a, ps, 8), 3);
    ck_assert_int_eq(cg_module_params(a, NULL, 0), 3);
    ck_assert_int_eq(cg_module_params(a, NULL, 2), -1);
    for (i = 0; i < 3; i++) {
        ck_assert_ptr_eq(cg_module_param(a, i, &name), ps[i]);
        ck_assert_str_eq(name, flat[i]);
        ck_assert_ptr_nonnull(cg_module_param(b, i, &name));
        ck_assert_str_eq(name, nested[i]);
        ck_assert_ptr_eq(cg_module_find_param(b, nested[i]),
                         cg_module_param(b, i, NULL));
    }
    ck_assert_ptr_eq(ps[0], cg_module_param(cg_module_child(a, 0, NULL), 0,
                                            NULL));
    ck_assert_ptr_null(cg_module_find_param(a, "1.weight"));
    ck_assert_int_eq(cg_module_num_children(ps[0] ? cg_module_child(a, 0,
                                                    NULL) : NULL), 0);
    cg_module_free(a);
    cg_module_free(b);
}
END_TEST

START_TEST(sequential_forward_is_its_children_in_order)
{
    cg_module *seq = mlp(1);
    cg_module *l0 = cg_module_child(seq, 0, NULL);
    cg_module *l2 = cg_module_child(cg_module_child(seq, 2, NULL), 0, NULL);
    const int64_t shape[2] = { 6, 5 };
    float x[30], want[18], got[18];
    cg_tensor *xt, *h, *r, *y, *z;
    int i;

    for (i = 0; i < 30; i++)
        x[i] = (float)((i * 13) % 7) / 3.0f - 1.0f;
    xt = cg_tensor_from_host(tt_ctx(), CG_F32, 2, shape, x);
    h = cg_linear_forward(l0, xt);
    r = cg_relu(h);
    y = cg_linear_forward(l2, r);
    z = cg_module_forward(seq, xt);
    ck_assert_msg(z != NULL, "%s", TT_ERR);
    ck_assert_int_eq(cg_tensor_to_host(y, want, sizeof want), CG_OK);
    ck_assert_int_eq(cg_tensor_to_host(z, got, sizeof got), CG_OK);
    ck_assert(memcmp(want, got, sizeof got) == 0);
    /* Backward reaches every child's parameters. */
    {
        cg_tensor *s = cg_sum(z, 0, NULL, 0);

        ck_assert_int_eq(cg_backward(s, NULL, 0), CG_OK);
        for (i = 0; i < cg_module_num_params(seq); i++)
            ck_assert_ptr_nonnull(cg_tensor_grad(cg_module_param(seq, i,
                                                                 NULL)));
        ck_assert_int_eq(cg_module_zero_grad(seq), CG_OK);
        for (i = 0; i < cg_module_num_params(seq); i++)
            ck_assert_ptr_null(cg_tensor_grad(cg_module_param(seq, i,
                                                              NULL)));
        cg_tensor_free(s);
    }
    ck_assert_int_eq(cg_module_set_training(seq, 0), CG_OK);
    cg_tensor_free(xt);
    cg_tensor_free(h);
    cg_tensor_free(r);
    cg_tensor_free(y);
    cg_tensor_free(z);
    cg_module_free(seq);
}
END_TEST

START_TEST(container_errors_change_nothing)
{
    cg_module *seq = mlp(0), *other = cg_sequential_new(tt_ctx());
    cg_module *lin = cg_linear_new(tt_ctx(), 2, 2, 1);
    cg_rnn_options o = { CG_LSTM, 3, 4, 1, 0, 0, 0.0f };
    cg_module *rnn = cg_rnn_new(tt_ctx(), &o);
    const int64_t shape[2] = { 2, 5 };
    cg_tensor *x = cg_zeros(tt_ctx(), 2, shape);

    ck_assert_int_eq(cg_module_add(seq, "a.b", lin), CG_EINVAL);
    ck_assert_int_eq(cg_module_add(seq, "", lin), CG_EINVAL);
    ck_assert_int_eq(cg_module_add(seq, "0", lin), CG_EINVAL);
    ck_assert(strstr(cg_last_error(), "already has a child '0'") != NULL);
    ck_assert_int_eq(cg_module_add(lin, NULL, seq), CG_EINVAL);
    ck_assert_int_eq(cg_module_add(NULL, NULL, lin), CG_EINVAL);
    ck_assert_int_eq(cg_module_add(seq, NULL, seq), CG_EINVAL);
    ck_assert_int_eq(cg_module_add(seq, NULL, cg_linear_new(tt_ctx(), 0, 2,
                                                            1)), CG_EINVAL);
    ck_assert(strstr(cg_last_error(), "in_features 0") != NULL);
    ck_assert_int_eq(cg_module_num_children(seq), 3);
    ck_assert_int_eq(cg_module_num_params(seq), 3);
    /* A child belongs to one container; a container cannot hold its
     * ancestor. */
    ck_assert_int_eq(cg_module_add(other, "x", lin), CG_OK);
    ck_assert_int_eq(cg_module_add(seq, "x", lin), CG_EINVAL);
    ck_assert_int_eq(cg_module_add(seq, "o", other), CG_OK);
    ck_assert_int_eq(cg_module_add(other, "s", seq), CG_EINVAL);
    ck_assert_int_eq(cg_module_num_params(seq), 5);
    ck_assert_ptr_nonnull(cg_module_find_param(seq, "o.x.bias"));
    ck_assert_ptr_null(cg_activation_new(tt_ctx(), "softplus"));
    ck_assert_ptr_null(cg_module_forward(rnn, x));
    ck_assert(strstr(cg_last_error(), "rnn") != NULL);
    ck_assert_int_eq(cg_module_add(seq, "r", rnn), CG_OK);
    ck_assert_ptr_null(cg_module_forward(seq, x));
    cg_tensor_free(x);
    cg_module_free(seq);
}
END_TEST

/* A container's checkpoint has PyTorch's flat names and restores whole. */
START_TEST(containers_checkpoint_as_one_model)
{
    cg_module *a = mlp(1), *b = mlp(1);
    cg_checkpoint *ck = cg_checkpoint_new();
    float wa[20], wb[20];

    ck_assert_int_eq(cg_checkpoint_add_module(ck, "model.", a), CG_OK);
    ck_assert_int_eq(cg_checkpoint_num_tensors(ck), 3);
    ck_assert_str_eq(cg_checkpoint_tensor_name(ck, 2),
                     "model.head.0.weight");
    ck_assert_int_eq(cg_checkpoint_restore_module(ck, "model.", b), CG_OK);
    cg_tensor_to_host(cg_module_find_param(a, "0.weight"), wa, sizeof wa);
    cg_tensor_to_host(cg_module_find_param(b, "0.weight"), wb, sizeof wb);
    ck_assert(memcmp(wa, wb, sizeof wa) == 0);
    cg_checkpoint_free(ck);
    cg_module_free(a);
    cg_module_free(b);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("training");
    TCase *tc = tcase_create("checkpoints");

    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, optimizer_state_resumes_bit_identically, 0,
                        K_KINDS);
    tcase_add_test(tc, bad_optimizer_state_changes_nothing);
    tcase_add_test(tc, position_checks_its_fields);
    tcase_add_test(tc, containers_name_parameters_as_state_dict);
    tcase_add_test(tc, sequential_forward_is_its_children_in_order);
    tcase_add_test(tc, container_errors_change_nothing);
    tcase_add_test(tc, containers_checkpoint_as_one_model);
    suite_add_tcase(s, tc);
    return tt_run(s);
}
