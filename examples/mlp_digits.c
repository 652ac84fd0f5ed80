/* SPDX-License-Identifier: MIT */
/*
 * examples/mlp_digits.c - a two-layer perceptron on the 8x8 handwritten
 * digits: a held-out fifth of the rows, features standardised with the
 * training part's statistics, a sequential container (linear, relu,
 * linear), cross-entropy and Adam; after each epoch the held-out accuracy
 * from cg_argmax of the logits.
 *
 *     cc mlp_digits.c -o mlp_digits $(pkg-config --cflags --libs clgrad)
 *     ./mlp_digits $(pkg-config --variable=pkgdatadir clgrad)/digits.csv
 *
 * Arguments: the CSV file (64 features and a label per row), then the
 * number of epochs (default 5).  The last line is "accuracy P%".
 */
#include <stdio.h>
#include <stdlib.h>

#include <clgrad.h>

#define BATCH 64
#define HIDDEN 64
#define MAXP 8

static int
fail(const char *what)
{
    fprintf(stderr, "mlp_digits: %s: %s\n", what, cg_last_error());
    return 1;
}

/* One pass over the training split in shuffled batches; the mean loss. */
static int
train_epoch(cg_module *mlp, cg_optimizer *opt, cg_dataset *train,
            cg_context *ctx, int64_t epoch, double *mean_loss)
{
    double sum = 0;
    int64_t i, nb = cg_dataset_num_batches(train, BATCH);

    for (i = 0; i < nb; i++) {
        cg_tensor *x, *y, *logits = NULL, *loss = NULL;
        float l = 0;
        int n = cg_dataset_batch(train, ctx, BATCH, 1, 42, epoch, i, &x, &y);
        int status;

        if (n <= 0)
            return n ? n : CG_EINVAL;
        logits = cg_module_forward(mlp, x);
        loss = cg_cross_entropy(logits, y, CG_REDUCTION_MEAN,
                                CG_IGNORE_INDEX, 0);
        status = loss ? cg_optim_zero_grad(opt) : -1;
        if (status == CG_OK)
            status = cg_backward(loss, NULL, 0);
        if (status == CG_OK)
            status = cg_optim_step(opt);
        if (status == CG_OK)
            status = cg_tensor_item(loss, &l);
        sum += l;
        cg_tensor_free(loss);
        cg_tensor_free(logits);
        cg_tensor_free(y);
        cg_tensor_free(x);
        if (status != CG_OK)
            return status;
    }
    *mean_loss = sum / (double)nb;
    return CG_OK;
}

/* The fraction of rows of ds whose largest logit is at their label. */
static int
accuracy(cg_module *mlp, cg_dataset *ds, cg_context *ctx, double *acc)
{
    int64_t i, nb = cg_dataset_num_batches(ds, BATCH), right = 0, rows = 0;
    int status = CG_OK;

    cg_no_grad_enter();
    for (i = 0; i < nb && status == CG_OK; i++) {
        cg_tensor *x, *y, *logits = NULL, *pred = NULL;
        int32_t p[BATCH], t[BATCH];
        int k, n = cg_dataset_batch(ds, ctx, BATCH, 0, 0, 0, i, &x, &y);

        if (n <= 0) {
            status = n ? n : CG_EINVAL;
            break;
        }
        logits = cg_module_forward(mlp, x);
        pred = logits ? cg_argmax(logits, 1, 0) : NULL;
        status = pred ? cg_tensor_to_host(pred, p, n * sizeof *p) : -1;
        if (status == CG_OK)
            status = cg_tensor_to_host(y, t, n * sizeof *t);
        for (k = 0; status == CG_OK && k < n; k++)
            right += p[k] == t[k];
        rows += n;
        cg_tensor_free(pred);
        cg_tensor_free(logits);
        cg_tensor_free(y);
        cg_tensor_free(x);
    }
    cg_no_grad_leave();
    *acc = rows ? (double)right / (double)rows : 0;
    return status;
}

int
main(int argc, char **argv)
{
    cg_context *ctx = NULL;
    cg_dataset *all = NULL, *train = NULL, *test = NULL;
    cg_module *mlp = NULL;
    cg_optimizer *opt = NULL;
    cg_tensor *params[MAXP];
    cg_adam_options adam = { 1e-2, 0.9, 0.999, 1e-8, 0, 0, 0 };
    float *mean = NULL, *inv_std = NULL;
    int epochs = argc > 2 ? atoi(argv[2]) : 5, nf, np, status = 1;
    int64_t e;
    double loss = 0, acc = 0;

    if (argc < 2 || argc > 3 || epochs < 1) {
        fprintf(stderr, "usage: mlp_digits DIGITS.CSV [EPOCHS]\n");
        return 2;
    }
    all = cg_csv_load(argv[1], NULL);
    if (!all)
        return fail(argv[1]);
    if (cg_dataset_split(all, 0.2, 1, &train, &test) != CG_OK) {
        fail("split");
        goto out;
    }
    nf = cg_dataset_features(train);
    mean = malloc(nf * sizeof *mean);
    inv_std = malloc(nf * sizeof *inv_std);
    if (!mean || !inv_std ||
        cg_dataset_feature_stats(train, mean, inv_std) != CG_OK ||
        cg_dataset_standardize(train, mean, inv_std) != CG_OK ||
        cg_dataset_standardize(test, mean, inv_std) != CG_OK) {
        fail("standardise");
        goto out;
    }
    ctx = cg_context_new(NULL);
    if (!ctx) {
        fail("no OpenCL device");
        goto out;
    }
    /* The container owns each layer once added. */
    mlp = cg_sequential_new(ctx);
    if (!mlp ||
        cg_module_add(mlp, "fc0", cg_linear_new(ctx, nf, HIDDEN, 1)) ||
        cg_module_add(mlp, "relu0", cg_activation_new(ctx, "relu")) ||
        cg_module_add(mlp, "fc1", cg_linear_new(ctx, HIDDEN,
                                                cg_dataset_classes(all), 1))) {
        fail("model");
        goto out;
    }
    np = cg_module_params(mlp, params, MAXP);
    opt = np > 0 ? cg_optim_adam_new(ctx, params, np, &adam) : NULL;
    if (!opt) {
        fail("optimizer");
        goto out;
    }
    printf("%lld training rows, %lld held out, %d features, %d classes\n",
           (long long)cg_dataset_rows(train), (long long)cg_dataset_rows(test),
           nf, cg_dataset_classes(all));
    for (e = 0; e < epochs; e++) {
        if (train_epoch(mlp, opt, train, ctx, e, &loss) != CG_OK) {
            fail("training");
            goto out;
        }
        if (accuracy(mlp, test, ctx, &acc) != CG_OK) {
            fail("evaluation");
            goto out;
        }
        printf("epoch %lld  loss %.4f  held-out accuracy %.2f%%\n",
               (long long)e + 1, loss, 100 * acc);
    }
    printf("accuracy %.2f%%\n", 100 * acc);
    status = 0;
out:
    cg_optim_free(opt);
    cg_module_free(mlp);
    cg_context_free(ctx);
    free(inv_std);
    free(mean);
    cg_dataset_free(test);
    cg_dataset_free(train);
    cg_dataset_free(all);
    return status;
}
