/* SPDX-License-Identifier: MIT */
/*
 * tools/train_ckpt.c - clgrad-train's checkpoints: what a run saves (the
 * model, optimizer state, position and generator through the library,
 * plus its configuration, vocabulary and standardisation as metadata and
 * tensors) and how a resumed run reads it back.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outpath.h"
#include "train_run.h"

int
tr_ck_fail(const char *what, const char *path)
{
    tr_fail("%s %s: %s", what, path, cg_last_error());
    return -1;
}

int
tr_check_output(const char *opt, const char *path)
{
    char dir[PATH_MAX];
    int err;

    switch (out_check(path, dir, sizeof dir, &err)) {
    case OUT_OK:
        return 0;
    case OUT_EMPTY:
        tr_fail("%s '': want a file name", opt);
        break;
    case OUT_IS_DIR:
        tr_fail("%s %s: is a directory; want a file name", opt, path);
        break;
    case OUT_NO_WRITE:
        tr_fail("%s %s: cannot write it: %s", opt, path, strerror(err));
        break;
    case OUT_NO_DIR:
        tr_fail("%s %s: the directory %s %s", opt, path, dir,
                err == ENOTDIR ? "is not a directory" : "does not exist");
        break;
    case OUT_DIR_NO_WRITE:
        tr_fail("%s %s: cannot create files in %s: %s", opt, path, dir,
                strerror(err));
        break;
    }
    return -1;
}

int
tr_save(run *r, const char *path, double val_loss)
{
    cg_checkpoint *ck;
    cg_tensor *h = r->h, *c = r->c;
    char hid[128] = "";
    int64_t nf = r->features;
    int i, status;

    /* Data parallel: the state of every replica's streams, from every
     * rank (collective); rank 0 writes. */
    if (r->dp && r->cfg.model == TR_CHAR_LSTM) {
        if (tr_dp_state(r, &h, &c))
            return -1;
    } else {
        h = h ? cg_tensor_ref(h) : NULL;
        c = c ? cg_tensor_ref(c) : NULL;
    }
    if (r->rank != 0) {
        cg_tensor_free(h);
        cg_tensor_free(c);
        return 0;
    }
    ck = cg_checkpoint_new();
    status = ck ? CG_OK : -1;

    if (status == CG_OK)
        status = cg_checkpoint_add_module(ck, NULL, r->model);
    if (status == CG_OK)
        status = cg_checkpoint_add_optimizer(ck, NULL, r->opt);
    if (status == CG_OK && r->mean)
        status = cg_checkpoint_add_host(ck, "data.mean", CG_F32, 1, &nf,
                                        r->mean);
    if (status == CG_OK && r->inv_std)
        status = cg_checkpoint_add_host(ck, "data.inv_std", CG_F32, 1, &nf,
                                        r->inv_std);
    if (status == CG_OK && h)
        status = cg_checkpoint_add_tensor(ck, "train.state.h", h);
    if (status == CG_OK && c)
        status = cg_checkpoint_add_tensor(ck, "train.state.c", c);
    cg_tensor_free(h);
    cg_tensor_free(c);
    for (i = 0; i < r->cfg.nhidden; i++)
        snprintf(hid + strlen(hid), sizeof hid - strlen(hid), "%s%d",
                 i ? "," : "", r->cfg.hidden[i]);
#define META(k, v) if (status == CG_OK) \
        status = cg_checkpoint_set_meta(ck, k, v)
#define IMETA(k, v) if (status == CG_OK) \
        status = cg_checkpoint_set_meta_int(ck, k, (int64_t)(v))
#define DMETA(k, v) if (status == CG_OK) \
        status = cg_checkpoint_set_meta_double(ck, k, v)
    META("clgrad.model", tr_model_name(r->cfg.model));
    META("config.hidden", hid);
    IMETA("config.layers", r->cfg.layers);
    IMETA("config.embed", r->cfg.embed);
    DMETA("config.dropout", r->cfg.dropout);
    IMETA("config.seq_len", r->cfg.seq_len);
    IMETA("config.batch", r->cfg.batch);
    META("config.optimizer", r->cfg.optimizer);
    META("config.schedule", r->cfg.schedule);
    DMETA("config.lr", r->cfg.lr);
    DMETA("config.momentum", r->cfg.momentum);
    DMETA("config.weight_decay", r->cfg.weight_decay);
    DMETA("config.clip", r->cfg.clip);
    DMETA("config.holdout", r->cfg.holdout);
    IMETA("config.warmup", r->cfg.warmup);
    IMETA("config.step_size", r->cfg.step_size);
    DMETA("config.gamma", r->cfg.gamma);
    DMETA("config.min_lr", r->cfg.min_lr);
    IMETA("config.seed", r->cfg.seed);
    if (status == CG_OK) {
        cg_train_position pos;

        pos.total = r->total;
        pos.step = r->step;
        pos.epoch = r->epoch;
        pos.index = r->index;
        pos.schedule = r->sched ? cg_lr_schedule_get_position(r->sched) : 0;
        status = cg_checkpoint_add_position(ck, &pos);
    }
    DMETA("train.elapsed", tr_now() - r->prog.t0);
    DMETA("train.epoch_loss", r->epoch_loss);
    IMETA("train.epoch_steps", r->epoch_steps);
    if (!isnan(val_loss))
        DMETA("train.val_loss", val_loss);
    IMETA("data.features", r->features);
    IMETA("data.classes", r->classes);
    if (r->text)
        META("data.vocab", cg_text_vocab(r->text));
#undef META
#undef IMETA
#undef DMETA
    if (status == CG_OK)
        status = cg_checkpoint_add_generator(ck, r->ctx);
    if (status == CG_OK)
        status = cg_checkpoint_save(ck, path);
    cg_checkpoint_free(ck);
    return status == CG_OK ? 0 : tr_ck_fail("saving", path);
}

/* A weights-only checkpoint (embed, lstm, head tensors and data.vocab):
 * the character LSTM's shape from its tensors' shapes. */
static int
infer_lstm(const cg_checkpoint *ck, tr_config *cfg, const char *path)
{
    int64_t e[CG_MAX_DIMS], w[CG_MAX_DIMS], hd[CG_MAX_DIMS];
    char name[64];
    int nd, nw, nh;

    if (cg_checkpoint_tensor_info(ck, "embed.weight", NULL, &nd, e) ||
        cg_checkpoint_tensor_info(ck, "lstm.weight_hh_l0", NULL, &nw, w) ||
        cg_checkpoint_tensor_info(ck, "head.weight", NULL, &nh, hd) ||
        nd != 2 || nw != 2 || nh != 2 || w[0] != 4 * w[1] ||
        hd[1] != w[1] || hd[0] != e[0] || w[1] > 1 << 20) {
        tr_fail("%s is neither a clgrad-train checkpoint (no clgrad.model) "
                "nor a character LSTM's weights (embed.weight [V, E], "
                "lstm.weight_hh_l0 [4H, H], head.weight [V, H])", path);
        return -1;
    }
    cfg->model = TR_CHAR_LSTM;
    cfg->embed = e[1];
    cfg->hidden[0] = (int)w[1];
    cfg->nhidden = 1;
    cfg->hidden_set = 1;
    for (cfg->layers = 1; cfg->layers < 64; cfg->layers++) {
        snprintf(name, sizeof name, "lstm.weight_hh_l%d", (int)cfg->layers);
        if (cg_checkpoint_tensor_info(ck, name, NULL, NULL, NULL))
            break;
    }
    cfg->dropout = 0;
    return 1;
}

/* The checkpoint's configuration values against the command line's
 * ranges (clgrad-train.c), named as the checkpoint's fields: -1 after a
 * message for the first out of range. */
static int
check_ranges(const tr_config *c, const char *path)
{
    static const struct {
        const char *key;
        size_t off;
        int is_int, open_lo;
        double lo, hi;
    } f[] = {
#define I(k, m, lo, hi) { k, offsetof(tr_config, m), 1, 0, lo, hi }
#define D(k, m, o, lo, hi) { k, offsetof(tr_config, m), 0, o, lo, hi }
        I("config.layers", layers, 1, 8),
        I("config.embed", embed, 1, 65536),
        I("config.seq_len", seq_len, 1, 1e6),
        I("config.batch", batch, 1, 1e6),
        I("config.warmup", warmup, 0, 1e12),
        I("config.step_size", step_size, 0, 1e12),
        I("config.seed", seed, 0, 9e15),
        D("config.dropout", dropout, 0, 0, 0.99),
        D("config.lr", lr, 1, 0, 100),
        D("config.momentum", momentum, 0, 0, 0.9999),
        D("config.weight_decay", weight_decay, 0, 0, 10),
        D("config.clip", clip, 0, 0, 1e9),
        D("config.holdout", holdout, 0, 0, 0.99),
        D("config.gamma", gamma, 0, 0, 1e3),
        D("config.min_lr", min_lr, 0, 0, 100),
#undef I
#undef D
    };
    size_t i;

    for (i = 0; i < sizeof f / sizeof f[0]; i++) {
        const char *p = (const char *)c + f[i].off;
        double v = f[i].is_int ? (double)*(const int64_t *)(const void *)p
                               : *(const double *)(const void *)p;

        if (v == -1)
            continue;           /* not recorded */
        if (!(f[i].open_lo ? v > f[i].lo : v >= f[i].lo) ||
            !(v <= f[i].hi)) {
            tr_fail("%s: %s = %g is out of range (want %s %.15g to %.15g)",
                    path, f[i].key, v, f[i].open_lo ? "above" : "from",
                    f[i].lo, f[i].hi);
            return -1;
        }
    }
    return 0;
}

/* The model's shape and the training configuration of a checkpoint into
 * cfg; 1 for a weights-only checkpoint (shape inferred, no state). */
static int
read_config(const cg_checkpoint *ck, tr_config *cfg, const char *path)
{
    const char *model = cg_checkpoint_get_meta(ck, "clgrad.model");
    const char *s;
    int64_t v;

    if (!model)
        return infer_lstm(ck, cfg, path);
    if ((cfg->model = tr_model_parse(model)) == TR_NONE) {
        tr_fail("%s: unknown clgrad.model \"%s\"", path, model);
        return -1;
    }
    s = cg_checkpoint_get_meta(ck, "config.hidden");
    if (!s || (cfg->nhidden = 0, sscanf(s, "%d", &cfg->hidden[0]) != 1)) {
        tr_fail("%s: bad config.hidden", path);
        return -1;
    }
    while (s && *s && cfg->nhidden < TR_MAX_HIDDEN) {
        cfg->hidden[cfg->nhidden++] = atoi(s);
        s = strchr(s, ',');
        s = s ? s + 1 : NULL;
    }
    cfg->hidden_set = 1;
#define GETI(k, f) if (cg_checkpoint_get_meta_int(ck, k, &v) == CG_OK) f = v
#define GETD(k, f) cg_checkpoint_get_meta_double(ck, k, &f)
    GETI("config.layers", cfg->layers);
    GETI("config.embed", cfg->embed);
    GETI("config.seq_len", cfg->seq_len);
    GETI("config.batch", cfg->batch);
    GETI("config.warmup", cfg->warmup);
    GETI("config.step_size", cfg->step_size);
    GETI("config.seed", cfg->seed);
    GETD("config.dropout", cfg->dropout);
    GETD("config.lr", cfg->lr);
    GETD("config.momentum", cfg->momentum);
    GETD("config.weight_decay", cfg->weight_decay);
    GETD("config.clip", cfg->clip);
    GETD("config.holdout", cfg->holdout);
    GETD("config.gamma", cfg->gamma);
    GETD("config.min_lr", cfg->min_lr);
#undef GETI
#undef GETD
    for (v = 0; v < cfg->nhidden; v++)
        if (cfg->hidden[v] < 1 || cfg->hidden[v] > 1 << 20) {
            tr_fail("%s: config.hidden \"%s\": want widths from 1 to %d",
                    path, cg_checkpoint_get_meta(ck, "config.hidden"),
                    1 << 20);
            return -1;
        }
    if (check_ranges(cfg, path))
        return -1;
    if ((s = cg_checkpoint_get_meta(ck, "config.optimizer"))) {
        if (tr_optimizer_kind(s) < 0) {
            tr_fail("%s: config.optimizer \"%s\" is not adam, adamw, sgd "
                    "or rmsprop", path, s);
            return -1;
        }
        snprintf(cfg->optimizer, sizeof cfg->optimizer, "%s", s);
    }
    if ((s = cg_checkpoint_get_meta(ck, "config.schedule"))) {
        if (strcmp(s, "constant") && strcmp(s, "step") && strcmp(s, "exp") &&
            strcmp(s, "cosine")) {
            tr_fail("%s: config.schedule \"%s\" is not constant, step, "
                    "exp or cosine", path, s);
            return -1;
        }
        snprintf(cfg->schedule, sizeof cfg->schedule, "%s", s);
    }
    return 0;
}

static void
hidden_str(const tr_config *c, char *buf, size_t n)
{
    int i;

    buf[0] = 0;
    for (i = 0; i < c->nhidden; i++)
        snprintf(buf + strlen(buf), n - strlen(buf), "%s%d", i ? "," : "",
                 c->hidden[i]);
}

int
tr_resume_config(const cg_checkpoint *ck, tr_config *cfg, const char *path)
{
    tr_config k;
    char a[128], b[128];
    int weights_only, fixed = !cfg->sample_only;

    tr_config_defaults(&k);
    if ((weights_only = read_config(ck, &k, path)) < 0)
        return -1;
    if (cfg->model != TR_NONE && cfg->model != k.model) {
        tr_fail("%s holds a %s model, not the --model given", path,
                tr_model_name(k.model));
        return -1;
    }
    cfg->model = k.model;
    hidden_str(cfg, a, sizeof a);
    hidden_str(&k, b, sizeof b);
    if (cfg->hidden_set && strcmp(a, b)) {
        tr_fail("--hidden %s differs from %s's %s (the model's shape must "
                "match its checkpoint)", a, path, b);
        return -1;
    }
    memcpy(cfg->hidden, k.hidden, sizeof k.hidden);
    cfg->nhidden = k.nhidden;
    cfg->hidden_set = 1;
    /* Model and data options: the checkpoint's, or an error. */
#define FIX(f, opt, fmt)                                                  \
    if (cfg->f < 0)                                                       \
        cfg->f = k.f;                                                     \
    else if (cfg->f != k.f && k.f >= 0) {                                 \
        tr_fail(opt " " fmt " differs from %s's " fmt " (model and data " \
                "options must match the checkpoint)", cfg->f, path, k.f); \
        return -1;                                                        \
    }
    FIX(layers, "--layers", "%" PRId64)
    FIX(embed, "--embed", "%" PRId64)
    if (fixed) {
        FIX(seq_len, "--seq-len", "%" PRId64)
        FIX(batch, "--batch", "%" PRId64)
        FIX(seed, "--seed", "%" PRId64)
        FIX(dropout, "--dropout", "%g")
        FIX(holdout, "--holdout", "%g")
    }
#undef FIX
    if (fixed && cfg->optimizer[0] && k.optimizer[0] &&
        strcmp(cfg->optimizer, k.optimizer)) {
        tr_fail("--optimizer %s differs from %s's %s (its state is the "
                "checkpoint's)", cfg->optimizer, path, k.optimizer);
        return -1;
    }
    if (!cfg->optimizer[0])
        memcpy(cfg->optimizer, k.optimizer, sizeof k.optimizer);
    if (!fixed)
        return weights_only;
    /* Training options: what is given takes effect, and is reported. */
#define MAY(f, opt, fmt)                                                  \
    if (cfg->f < 0)                                                       \
        cfg->f = k.f;                                                     \
    else if (cfg->f != k.f && !cfg->quiet)                                \
        printf("clgrad-train: resuming with " opt " " fmt " (%s had "      \
               fmt ")\n", cfg->f, path, k.f);
    MAY(lr, "--lr", "%g")
    MAY(momentum, "--momentum", "%g")
    MAY(weight_decay, "--weight-decay", "%g")
    MAY(clip, "--clip", "%g")
    MAY(warmup, "--warmup", "%" PRId64)
    MAY(step_size, "--step-size", "%" PRId64)
    MAY(gamma, "--gamma", "%g")
    MAY(min_lr, "--min-lr", "%g")
#undef MAY
    if (!cfg->schedule[0])
        memcpy(cfg->schedule, k.schedule, sizeof k.schedule);
    else if (strcmp(cfg->schedule, k.schedule) && !cfg->quiet)
        printf("clgrad-train: resuming with --schedule %s (%s had %s)\n",
               cfg->schedule, path, k.schedule);
    return weights_only;
}

/* Every parameter's elements finite: -1 after a message naming the
 * first tensor with a NaN or an infinity, and the element. */
static int
check_finite(run *r, const char *path)
{
    int i;

    for (i = 0; i < cg_module_num_params(r->model); i++) {
        const char *name;
        cg_tensor *t = cg_module_param(r->model, i, &name);
        int64_t n = cg_tensor_numel(t), j;
        float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);

        if (!v || cg_tensor_to_host(t, v, (size_t)n * sizeof *v)) {
            free(v);
            return tr_ck_fail("reading the model of", path);
        }
        for (j = 0; j < n && isfinite(v[j]); j++)
            ;
        if (j < n) {
            tr_fail("%s: %s holds %g at element %lld: not a usable model",
                    path, name, (double)v[j], (long long)j);
            free(v);
            return -1;
        }
        free(v);
    }
    return 0;
}

/* Restores parameters, optimizer state, the generator and the position
 * from ck into the freshly built run. */
int
tr_restore(run *r, const cg_checkpoint *ck, const char *path)
{
    cg_train_position pos;

    if (cg_checkpoint_restore_module(ck, NULL, r->model))
        return tr_ck_fail("restoring the model from", path);
    if (check_finite(r, path))
        return -1;
    if (r->weights_only)
        return 0;
    if (cg_checkpoint_restore_optimizer(ck, NULL, r->opt))
        return tr_ck_fail("restoring the optimizer from", path);
    if (cg_checkpoint_tensor_info(ck, "train.state.h", NULL, NULL, NULL) ==
        CG_OK) {
        r->h = cg_checkpoint_tensor(ck, r->ctx, "train.state.h");
        r->c = cg_checkpoint_tensor(ck, r->ctx, "train.state.c");
        if (!r->h || !r->c)
            return tr_ck_fail("restoring the LSTM state from", path);
    }
    if (cg_checkpoint_get_position(ck, &pos) ||
        cg_checkpoint_restore_generator(ck, r->ctx))
        return tr_ck_fail("restoring the position from", path);
    cg_checkpoint_get_meta_double(ck, "train.elapsed", &r->elapsed);
    cg_checkpoint_get_meta_double(ck, "train.epoch_loss", &r->epoch_loss);
    cg_checkpoint_get_meta_int(ck, "train.epoch_steps", &r->epoch_steps);
    if (pos.step < 0 || pos.epoch < 0 || pos.index < 0 ||
        r->epoch_steps < 0 || !(r->elapsed >= 0) || !isfinite(r->elapsed)) {
        tr_fail("%s: bad training position (step %lld, epoch %lld, batch "
                "%lld, epoch_steps %lld, elapsed %g): none may be negative",
                path, (long long)pos.step, (long long)pos.epoch,
                (long long)pos.index, (long long)r->epoch_steps,
                r->elapsed);
        return -1;
    }
    r->step = pos.step;
    r->epoch = pos.epoch;
    r->index = pos.index;
    if (r->sched && cg_lr_schedule_set_position(r->sched, pos.schedule))
        return tr_ck_fail("restoring the schedule from", path);
    return 0;
}

/* One standardisation statistic [F] from a checkpoint into v. */
static int
stat_from(const cg_checkpoint *ck, const char *path, const char *name, int F,
          float *v)
{
    int64_t shape[CG_MAX_DIMS];
    cg_dtype dt;
    int nd;

    if (cg_checkpoint_tensor_info(ck, name, &dt, &nd, shape))
        return tr_ck_fail("restoring the normalisation from", path);
    if (dt != CG_F32 || nd != 1 || shape[0] != F) {
        tr_fail("restoring the normalisation from %s: %s is not %d floats",
                path, name, F);
        return -1;
    }
    memcpy(v, cg_checkpoint_tensor_data(ck, name, NULL),
           (size_t)F * sizeof *v);
    return 0;
}

/* Standardises both splits' features with the training split's
 * statistics, or a resumed run's checkpoint's. */
int
tr_normalisation(run *r, const cg_checkpoint *ck)
{
    r->mean = calloc((size_t)r->features, sizeof *r->mean);
    r->inv_std = calloc((size_t)r->features, sizeof *r->inv_std);
    if (!r->mean || !r->inv_std) {
        tr_fail("out of memory");
        return -1;
    }
    if (ck && (stat_from(ck, r->cfg.resume, "data.mean", r->features,
                         r->mean) ||
               stat_from(ck, r->cfg.resume, "data.inv_std", r->features,
                         r->inv_std)))
        return -1;
    if ((!ck && cg_dataset_feature_stats(r->train, r->mean, r->inv_std)) ||
        (r->train && cg_dataset_standardize(r->train, r->mean,
                                            r->inv_std)) ||
        cg_dataset_standardize(r->test, r->mean, r->inv_std)) {
        tr_fail("%s", cg_last_error());
        return -1;
    }
    return 0;
}

/* Reads a vocabulary as cg_text_vocab writes it ("[10,32,...]": the
 * byte of each id) into r. */
int
tr_parse_vocab(run *r, const char *s)
{
    int i;

    for (i = 0; i < 256; i++)
        r->id_of[i] = -1;
    r->nvocab = 0;
    if (!s || *s++ != '[')
        return -1;
    while (*s && *s != ']') {
        char *end;
        long b = strtol(s, &end, 10);

        if (end == s || b < 0 || b > 255 || r->nvocab == 256 ||
            r->id_of[b] >= 0)
            return -1;
        r->id_of[b] = r->nvocab;
        r->vocab[r->nvocab++] = (unsigned char)b;
        s = end;
        if (*s == ',')
            s++;
    }
    return *s == ']' && r->nvocab > 0 ? 0 : -1;
}
