/* SPDX-License-Identifier: MIT */
/*
 * clgrad-train - trains networks from the command line: an MLP classifier
 * on a CSV dataset (data/digits.csv), or a character-level LSTM on a text
 * (data/kjv.txt), with checkpoints that resume exactly.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clgrad.h"
#include "log.h"
#include "progress.h"
#include "train.h"
#include "train_run.h"

static volatile sig_atomic_t interrupted;

static void
on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

double
tr_compile_seconds(void)
{
    return tool_compile_seconds();
}

static void
usage(FILE *f)
{
    fprintf(f,
"usage: clgrad-train --model mlp|cnn|char-lstm --data FILE [OPTION]...\n"
"       clgrad-train --resume CHECKPOINT --data FILE [OPTION]...\n"
"       clgrad-train --sample-only --resume CHECKPOINT [OPTION]...\n"
"\n"
"Trains on the default OpenCL device (or --device).  Without --steps or\n"
"--epochs the character LSTM takes %d steps, the MLP and the CNN %d\n"
"epochs.  All evaluate on held-out data: the MLP and the CNN after every\n"
"epoch (loss and accuracy), the character LSTM every --eval-every steps\n"
"(loss and bits per character); all at the end, with a summary.  The CNN\n"
"reads each CSV row as a square one-channel image (64 features: 8x8) and\n"
"stacks one block per --hidden width: conv 3x3 (padding 1), batch norm,\n"
"relu, max pool 2x2; then flatten and a linear layer to the classes.\n"
"\n"
"Model (a resumed run must give the checkpoint's values, or none):\n"
"  --model NAME        mlp, cnn or char-lstm\n"
"  --hidden LIST       mlp: hidden widths (default 256,256);\n"
"                      cnn: channels per block (default 32,64);\n"
"                      char-lstm: hidden size (default 256)\n"
"  --layers N          char-lstm: LSTM layers (default 2)\n"
"  --embed N           char-lstm: embedding size (default 64)\n"
"  --dropout P         char-lstm: dropout between LSTM layers (default 0)\n"
"Data and optimizer (likewise; with --sample-only only the model):\n"
"  --data FILE         CSV (features, then an integer label) or text\n"
"  --holdout F         held-out fraction: mlp, cnn rows drawn at random\n"
"                      (default 0.2); char-lstm the end of the text\n"
"                      (default 0.05; 0 = no validation)\n"
"  --seq-len N         char-lstm: steps per batch (default 100)\n"
"  --batch N           batch size (mlp, cnn default 64, char-lstm 32)\n"
"  --optimizer NAME    adam (default), adamw, sgd, rmsprop\n"
"  --seed N            random seed: initialisation, shuffling, the split,\n"
"                      dropout and sampling (default 1)\n"
"Training (may change when resuming; a change is reported):\n"
"  --steps N           stop after N optimizer steps in all\n"
"  --epochs N          passes over the data\n"
"  --stop-at N         end after step N with a checkpoint, keeping the\n"
"                      schedule of the whole run (resume it later)\n"
"  --lr X              learning rate (default: adam 1e-3 for mlp and cnn,\n"
"                      2e-3 for char-lstm; sgd 0.1, rmsprop 1e-3)\n"
"  --momentum X        sgd / rmsprop momentum (default 0.9 for sgd)\n"
"  --weight-decay X    (default 0)\n"
"  --clip X            clip gradients to global norm X (default 5 for\n"
"                      char-lstm, none for mlp; 0 = none)\n"
"  --precision P       fp32 (the default); bf16 or fp16: mixed precision,\n"
"                      the forward pass and loss under autocast (products\n"
"                      in 16 bits, float32 parameters and optimizer);\n"
"                      fp16 scales the loss dynamically, skipping steps\n"
"                      whose gradients overflow\n"
"  --loss-scale X      fp16: the initial loss scale (default 65536)\n"
"  --schedule NAME     the learning rate at step t of T (the whole run):\n"
"                      constant  lr (the default)\n"
"                      step      lr * gamma^floor(t / step-size)\n"
"                      exp       lr * gamma^t\n"
"                      cosine    a linear warm-up from 0 over --warmup\n"
"                                steps, then min-lr + (lr - min-lr)\n"
"                                (1 + cos(pi (t - W) / (T - W))) / 2\n"
"  --step-size N       step: steps between decays (default T / 3)\n"
"  --gamma X           step: the factor (default 0.1); exp: the factor\n"
"                      per step (default: lr falls to 1%% by step T)\n"
"  --warmup N          cosine: warm-up steps W (default 0)\n"
"  --min-lr X          cosine: the final rate (default 0)\n"
"  --device SEL        OpenCL device (see clgrad-info --list)\n"
"  --devices LIST      data-parallel training on these devices (selectors\n"
"                      separated by commas, e.g. 0,1): one replica each, a\n"
"                      share of every batch each, gradients averaged; under\n"
"                      mpirun -np N each rank trains one replica, on its\n"
"                      local rank's device\n"
"  --bucket-mb X       data parallelism's gradient buckets of up to X MiB\n"
"  --first-bucket-mb X ... and the first's (default: the device's tuning\n"
"                      entry \"dp\" from clgrad-tune, else 25 and 1)\n"
"Evaluation, checkpoints and output:\n"
"  --eval-every N      char-lstm: validation every N steps (default 100)\n"
"  --checkpoint PATH   save here every --save-every steps and at the end\n"
"  --save-every N      (default 500)\n"
"  --save-best         also keep the checkpoint of the lowest validation\n"
"                      loss, in PATH with .best before its extension\n"
"  --resume PATH       continue from a checkpoint\n"
"  --log FILE.csv      step, loss, accuracy, lr, items/s, elapsed_s,\n"
"                      val_loss (appended to when resuming)\n"
"  --plot FILE.svg     draw the training and validation loss (gnuplot)\n"
"  --log-every N       plain progress lines every N steps (default 50)\n"
"  --quiet             no progress output\n"
"  --profile           time every kernel on the device (OpenCL events) and\n"
"                      print the kernels that took the most time at the end\n"
"Sampling (char-lstm):\n"
"  --sample N          print N sampled characters every --sample-every\n"
"                      steps and at the end (default 200)\n"
"  --sample-every N    (default 500)\n"
"  --temperature T     sampling temperature (default 0.8; 0 = greedy,\n"
"                      always the likeliest character)\n"
"  --top-k K           sample among the K likeliest characters only\n"
"                      (default 0 = all)\n"
"  --prime TEXT        sampling starts after this text (default \"\\n\")\n"
"  --sample-only       only sample from --resume's model: a clgrad-train\n"
"                      checkpoint, or weights only (see README)\n"
"  --eval-only         only evaluate --resume's mlp or cnn model on every\n"
"                      row of --data: mean loss and accuracy\n"
"  -h, --help          show this help and exit\n"
"  -V, --version       show the version and exit\n",
            TR_LSTM_STEPS, TR_MLP_EPOCHS);
}

/* --hidden's comma-separated widths into out[max]; the count, or -1
 * after a message (a bad width, or more than max of them). */
static int
parse_int_list(const char *s, int *out, int max)
{
    const char *a = s;
    int n = 0;
    char *end;

    while (*s) {
        long v;

        errno = 0;
        v = strtol(s, &end, 10);
        if (errno || end == s || v < 1 || v > 1 << 20 ||
            (*end && *end != ',')) {
            fprintf(stderr, "clgrad-train: --hidden %s: want positive "
                    "integers up to %d separated by commas\n", a, 1 << 20);
            return -1;
        }
        if (n == max) {
            fprintf(stderr, "clgrad-train: --hidden %s: at most %d widths "
                    "(hidden layers)\n", a, max);
            return -1;
        }
        out[n++] = (int)v;
        s = *end ? end + 1 : end;
        if (*end && !*s) {
            fprintf(stderr, "clgrad-train: --hidden %s: a width is "
                    "missing after the last comma\n", a);
            return -1;
        }
    }
    if (!n)
        fprintf(stderr, "clgrad-train: --hidden '%s': want positive "
                "integers separated by commas\n", a);
    return n ? n : -1;
}

/* A number in [lo, hi] (lo excluded when open_lo; an integer when
 * integer); -1 after a message naming the option and what it wants. */
static int
parse_num(const char *opt, const char *s, double lo, double hi, int open_lo,
          int integer, double *v)
{
    char *end;

    errno = 0;
    *v = strtod(s, &end);
    if (errno || end == s || *end || !(open_lo ? *v > lo : *v >= lo) ||
        !(*v <= hi) || (integer && *v != floor(*v))) {
        fprintf(stderr, "clgrad-train: %s %s: want %s %s %.15g %s %.15g\n",
                opt, s, integer ? "an integer" : "a number",
                open_lo ? "above" : "from", lo, open_lo ? "up to" : "to",
                hi);
        return -1;
    }
    return 0;
}

enum {
    O_MODEL = 256, O_HIDDEN, O_LAYERS, O_EMBED, O_DROPOUT, O_DATA, O_HOLDOUT,
    O_SEQ, O_BATCH, O_OPT, O_LR, O_MOMENTUM, O_WD, O_SCHEDULE, O_WARMUP,
    O_CLIP, O_EPOCHS, O_STEPS, O_SEED, O_DEVICE, O_DEVICES, O_CKPT,
    O_SAVE_EVERY,
    O_RESUME, O_SAMPLE, O_SAMPLE_EVERY, O_TEMP, O_PRIME, O_SAMPLE_ONLY, O_EVAL_ONLY,
    O_LOG, O_LOG_EVERY, O_QUIET, O_PROFILE, O_STOP_AT, O_STEP_SIZE,
    O_GAMMA, O_MIN_LR, O_EVAL_EVERY, O_SAVE_BEST, O_PLOT, O_TOP_K,
    O_PRECISION, O_LOSS_SCALE, O_BUCKET, O_FIRST_BUCKET,
    O_HELP = 'h', O_VERSION = 'V'
};

static const struct option long_opts[] = {
    { "model", required_argument, NULL, O_MODEL },
    { "hidden", required_argument, NULL, O_HIDDEN },
    { "layers", required_argument, NULL, O_LAYERS },
    { "embed", required_argument, NULL, O_EMBED },
    { "dropout", required_argument, NULL, O_DROPOUT },
    { "data", required_argument, NULL, O_DATA },
    { "holdout", required_argument, NULL, O_HOLDOUT },
    { "seq-len", required_argument, NULL, O_SEQ },
    { "batch", required_argument, NULL, O_BATCH },
    { "optimizer", required_argument, NULL, O_OPT },
    { "lr", required_argument, NULL, O_LR },
    { "momentum", required_argument, NULL, O_MOMENTUM },
    { "weight-decay", required_argument, NULL, O_WD },
    { "schedule", required_argument, NULL, O_SCHEDULE },
    { "warmup", required_argument, NULL, O_WARMUP },
    { "clip", required_argument, NULL, O_CLIP },
    { "precision", required_argument, NULL, O_PRECISION },
    { "loss-scale", required_argument, NULL, O_LOSS_SCALE },
    { "epochs", required_argument, NULL, O_EPOCHS },
    { "steps", required_argument, NULL, O_STEPS },
    { "stop-at", required_argument, NULL, O_STOP_AT },
    { "seed", required_argument, NULL, O_SEED },
    { "device", required_argument, NULL, O_DEVICE },
    { "devices", required_argument, NULL, O_DEVICES },
    { "bucket-mb", required_argument, NULL, O_BUCKET },
    { "first-bucket-mb", required_argument, NULL, O_FIRST_BUCKET },
    { "checkpoint", required_argument, NULL, O_CKPT },
    { "save-every", required_argument, NULL, O_SAVE_EVERY },
    { "resume", required_argument, NULL, O_RESUME },
    { "sample", required_argument, NULL, O_SAMPLE },
    { "sample-every", required_argument, NULL, O_SAMPLE_EVERY },
    { "temperature", required_argument, NULL, O_TEMP },
    { "prime", required_argument, NULL, O_PRIME },
    { "sample-only", no_argument, NULL, O_SAMPLE_ONLY },
    { "eval-only", no_argument, NULL, O_EVAL_ONLY },
    { "log", required_argument, NULL, O_LOG },
    { "log-every", required_argument, NULL, O_LOG_EVERY },
    { "quiet", no_argument, NULL, O_QUIET },
    { "profile", no_argument, NULL, O_PROFILE },
    { "step-size", required_argument, NULL, O_STEP_SIZE },
    { "gamma", required_argument, NULL, O_GAMMA },
    { "min-lr", required_argument, NULL, O_MIN_LR },
    { "eval-every", required_argument, NULL, O_EVAL_EVERY },
    { "save-best", no_argument, NULL, O_SAVE_BEST },
    { "plot", required_argument, NULL, O_PLOT },
    { "top-k", required_argument, NULL, O_TOP_K },
    { "help", no_argument, NULL, O_HELP },
    { "version", no_argument, NULL, O_VERSION },
    { NULL, 0, NULL, 0 }
};

/* Fills cfg from argv; returns 0, 1 (exit 0: --help/--version) or -1. */
static int
parse_args(int argc, char **argv, tr_config *cfg)
{
    int c;
    double v;

    tr_config_defaults(cfg);
    while ((c = getopt_long(argc, argv, "hV", long_opts, NULL)) != -1) {
        const char *a = optarg;

        switch (c) {
        case O_MODEL:
            if ((cfg->model = tr_model_parse(a)) == TR_NONE) {
                fprintf(stderr, "clgrad-train: --model %s: want mlp, cnn "
                        "or char-lstm\n", a);
                return -1;
            }
            break;
        case O_HIDDEN:
            cfg->nhidden = parse_int_list(a, cfg->hidden, TR_MAX_HIDDEN);
            if (cfg->nhidden < 1)
                return -1;
            cfg->hidden_set = 1;
            break;
#define INTOPT(ID, NAME, FIELD, LO, HI)                                   \
        case ID:                                                          \
            if (parse_num(NAME, a, LO, HI, 0, 1, &v))                     \
                return -1;                                                \
            cfg->FIELD = (int64_t)v;                                      \
            break;
        INTOPT(O_LAYERS, "--layers", layers, 1, 8)
        INTOPT(O_EMBED, "--embed", embed, 1, 65536)
        INTOPT(O_SEQ, "--seq-len", seq_len, 1, 1e6)
        INTOPT(O_BATCH, "--batch", batch, 1, 1e6)
        INTOPT(O_WARMUP, "--warmup", warmup, 0, 1e12)
        INTOPT(O_EPOCHS, "--epochs", epochs, 1, 1e9)
        INTOPT(O_STEPS, "--steps", steps, 1, 1e12)
        INTOPT(O_STOP_AT, "--stop-at", stop_at, 1, 1e12)
        INTOPT(O_SEED, "--seed", seed, 0, 9e15)
        INTOPT(O_SAVE_EVERY, "--save-every", save_every, 1, 1e12)
        INTOPT(O_SAMPLE, "--sample", sample, 0, 1e7)
        INTOPT(O_SAMPLE_EVERY, "--sample-every", sample_every, 1, 1e12)
        INTOPT(O_LOG_EVERY, "--log-every", log_every, 1, 1e12)
        INTOPT(O_STEP_SIZE, "--step-size", step_size, 1, 1e12)
        INTOPT(O_EVAL_EVERY, "--eval-every", eval_every, 1, 1e12)
        INTOPT(O_TOP_K, "--top-k", top_k, 0, 256)
#undef INTOPT
#define DBLOPT(ID, NAME, FIELD, LO, HI, OPEN)                             \
        case ID:                                                          \
            if (parse_num(NAME, a, LO, HI, OPEN, 0, &cfg->FIELD))         \
                return -1;                                                \
            break;
        DBLOPT(O_DROPOUT, "--dropout", dropout, 0, 0.99, 0)
        DBLOPT(O_HOLDOUT, "--holdout", holdout, 0, 0.99, 0)
        DBLOPT(O_LR, "--lr", lr, 0, 100, 1)
        DBLOPT(O_MOMENTUM, "--momentum", momentum, 0, 0.9999, 0)
        DBLOPT(O_WD, "--weight-decay", weight_decay, 0, 10, 0)
        DBLOPT(O_CLIP, "--clip", clip, 0, 1e9, 0)
        DBLOPT(O_TEMP, "--temperature", temperature, 0, 100, 0)
        DBLOPT(O_GAMMA, "--gamma", gamma, 0, 1e3, 1)
        DBLOPT(O_MIN_LR, "--min-lr", min_lr, 0, 100, 0)
        DBLOPT(O_LOSS_SCALE, "--loss-scale", loss_scale, 0, 1e38, 1)
        DBLOPT(O_BUCKET, "--bucket-mb", bucket_mb, 0, 1048576, 1)
        DBLOPT(O_FIRST_BUCKET, "--first-bucket-mb", first_bucket_mb, 0,
               1048576, 1)
#undef DBLOPT
        case O_DATA: cfg->data = a; break;
        case O_PRECISION:
            if (strcmp(a, "fp32") == 0) {
                cfg->precision = CG_F32;
            } else if (strcmp(a, "bf16") == 0) {
                cfg->precision = CG_BF16;
            } else if (strcmp(a, "fp16") == 0) {
                cfg->precision = CG_F16;
            } else {
                fprintf(stderr, "clgrad-train: --precision %s: want fp32, "
                        "bf16 or fp16\n", a);
                return -1;
            }
            break;
        case O_OPT:
            if (tr_optimizer_kind(a) < 0) {
                fprintf(stderr, "clgrad-train: --optimizer %s: want adam, "
                        "adamw, sgd or rmsprop\n", a);
                return -1;
            }
            snprintf(cfg->optimizer, sizeof cfg->optimizer, "%s", a);
            break;
        case O_SCHEDULE:
            if (strcmp(a, "constant") && strcmp(a, "step") &&
                strcmp(a, "exp") && strcmp(a, "cosine")) {
                fprintf(stderr, "clgrad-train: --schedule %s: want "
                        "constant, step, exp or cosine\n", a);
                return -1;
            }
            snprintf(cfg->schedule, sizeof cfg->schedule, "%s", a);
            break;
        case O_DEVICE: cfg->device = a; break;
        case O_DEVICES: cfg->devices = a; break;
        case O_CKPT:
            if (!*a) {
                fprintf(stderr, "clgrad-train: --checkpoint '': want a "
                        "file name\n");
                return -1;
            }
            cfg->checkpoint = a;
            break;
        case O_RESUME: cfg->resume = a; break;
        case O_PRIME: cfg->prime = a; cfg->prime_set = 1; break;
        case O_SAMPLE_ONLY: cfg->sample_only = 1; break;
        case O_EVAL_ONLY: cfg->eval_only = 1; break;
        case O_LOG: cfg->log = a; break;
        case O_QUIET: cfg->quiet = 1; break;
        case O_PROFILE: cfg->profile = 1; break;
        case O_SAVE_BEST: cfg->save_best = 1; break;
        case O_PLOT: cfg->plot = a; break;
        case O_HELP: usage(stdout); return 1;
        case O_VERSION: printf("clgrad-train (clgrad) %s\n", cg_version());
            return 1;
        default: usage(stderr); return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "clgrad-train: unexpected argument '%s'\n",
                argv[optind]);
        return -1;
    }
    if ((cfg->stop_at || cfg->save_best) && !cfg->checkpoint) {
        fprintf(stderr, "clgrad-train: %s needs --checkpoint PATH (else "
                "nothing is saved)\n", cfg->stop_at ? "--stop-at"
                                                    : "--save-best");
        return -1;
    }
    return 0;
}

int
main(int argc, char **argv)
{
    tr_config cfg;
    int r = parse_args(argc, argv, &cfg);

    if (r)
        return r > 0 ? 0 : 2;
    cg_set_log(tool_log, (void *)"clgrad-train");
    /* Also with --quiet: the summary's throughput leaves out the time
     * spent compiling kernels, which the callback measures. */
    tool_progress_silent = cfg.quiet;
    cg_set_compile_progress(tool_progress, (void *)"clgrad-train");
    signal(SIGINT, on_sigint);
    return tr_run(&cfg, &interrupted);
}
