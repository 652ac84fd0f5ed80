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

static volatile sig_atomic_t interrupted;

static void
on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

static void
usage(FILE *f)
{
    fprintf(f,
"usage: clgrad-train --model mlp|char-lstm --data FILE [OPTION]...\n"
"       clgrad-train --model char-lstm --sample-only --resume CHECKPOINT\n"
"\n"
"Trains on the default OpenCL device (or --device).  The MLP reports\n"
"held-out accuracy after every epoch; the character LSTM prints samples.\n"
"\n"
"Model:\n"
"  --model NAME        mlp or char-lstm\n"
"  --hidden LIST       mlp: hidden widths (default 256,256);\n"
"                      char-lstm: hidden size (default 256)\n"
"  --layers N          char-lstm: LSTM layers (default 2)\n"
"  --embed N           char-lstm: embedding size (default 64)\n"
"  --dropout P         char-lstm: dropout between LSTM layers (default 0)\n"
"Data:\n"
"  --data FILE         CSV (features, then an integer label) or text\n"
"  --holdout F         mlp: held-out fraction (default 0.2)\n"
"  --seq-len N         char-lstm: steps per batch (default 100)\n"
"  --batch N           batch size (mlp default 64, char-lstm 32)\n"
"Training:\n"
"  --optimizer NAME    adam (default), adamw, sgd, rmsprop\n"
"  --lr X              learning rate (default: adam 1e-3 for mlp, 2e-3\n"
"                      for char-lstm; sgd 0.1, rmsprop 1e-3)\n"
"  --momentum X        sgd / rmsprop momentum (default 0.9 for sgd)\n"
"  --weight-decay X    (default 0)\n"
"  --schedule NAME     constant (default), step, exp, cosine\n"
"  --warmup N          cosine: warm-up steps (default 0)\n"
"  --clip X            clip gradients to global norm X (default 5 for\n"
"                      char-lstm, none for mlp; 0 = none)\n"
"  --epochs N          passes over the data (mlp default 20)\n"
"  --steps N           stop after N optimizer steps\n"
"  --stop-at N         end after step N with a checkpoint, keeping the\n"
"                      schedule of the whole run (resume it later)\n"
"  --seed N            random seed (default 1)\n"
"  --device SEL        OpenCL device (see clgrad-info --list)\n"
"Checkpoints and output:\n"
"  --checkpoint PATH   save here every --save-every steps and at the end\n"
"  --save-every N      (default 500)\n"
"  --resume PATH       continue from a checkpoint\n"
"  --sample N          char-lstm: print N sampled characters every\n"
"                      --sample-every steps and at the end (default 200)\n"
"  --sample-every N    (default 500)\n"
"  --temperature T     sampling temperature (default 0.8)\n"
"  --prime TEXT        sampling starts after this text (default \"\\n\")\n"
"  --sample-only       only sample from --resume's model\n"
"  --log FILE.csv      step, loss, accuracy, lr, tokens/s, elapsed\n"
"  --log-every N       plain progress lines every N steps (default 50)\n"
"  --quiet             no progress output\n"
"  --profile           time every kernel on the device (OpenCL events) and\n"
"                      print the kernels that took the most time at the end\n"
"  --help, --version\n");
}

static int
parse_int_list(const char *s, int *out, int max)
{
    int n = 0;
    char *end;

    while (*s && n < max) {
        long v = strtol(s, &end, 10);

        if (end == s || v < 1 || v > 1 << 20)
            return -1;
        out[n++] = (int)v;
        s = end;
        if (*s == ',')
            s++;
        else if (*s)
            return -1;
    }
    return n;
}

static int
parse_num(const char *opt, const char *s, double lo, double hi, double *v)
{
    char *end;

    errno = 0;
    *v = strtod(s, &end);
    if (errno || end == s || *end || !(*v >= lo && *v <= hi)) {
        fprintf(stderr, "clgrad-train: %s %s: want a number in [%g, %g]\n",
                opt, s, lo, hi);
        return -1;
    }
    return 0;
}

enum {
    O_MODEL = 256, O_HIDDEN, O_LAYERS, O_EMBED, O_DROPOUT, O_DATA, O_HOLDOUT,
    O_SEQ, O_BATCH, O_OPT, O_LR, O_MOMENTUM, O_WD, O_SCHEDULE, O_WARMUP,
    O_CLIP, O_EPOCHS, O_STEPS, O_SEED, O_DEVICE, O_CKPT, O_SAVE_EVERY,
    O_RESUME, O_SAMPLE, O_SAMPLE_EVERY, O_TEMP, O_PRIME, O_SAMPLE_ONLY,
    O_LOG, O_LOG_EVERY, O_QUIET, O_PROFILE, O_HELP, O_VERSION, O_STOP_AT
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
    { "epochs", required_argument, NULL, O_EPOCHS },
    { "steps", required_argument, NULL, O_STEPS },
    { "stop-at", required_argument, NULL, O_STOP_AT },
    { "seed", required_argument, NULL, O_SEED },
    { "device", required_argument, NULL, O_DEVICE },
    { "checkpoint", required_argument, NULL, O_CKPT },
    { "save-every", required_argument, NULL, O_SAVE_EVERY },
    { "resume", required_argument, NULL, O_RESUME },
    { "sample", required_argument, NULL, O_SAMPLE },
    { "sample-every", required_argument, NULL, O_SAMPLE_EVERY },
    { "temperature", required_argument, NULL, O_TEMP },
    { "prime", required_argument, NULL, O_PRIME },
    { "sample-only", no_argument, NULL, O_SAMPLE_ONLY },
    { "log", required_argument, NULL, O_LOG },
    { "log-every", required_argument, NULL, O_LOG_EVERY },
    { "quiet", no_argument, NULL, O_QUIET },
    { "profile", no_argument, NULL, O_PROFILE },
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
    while ((c = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
        const char *a = optarg;

        switch (c) {
        case O_MODEL:
            if (strcmp(a, "mlp") == 0)
                cfg->model = TR_MLP;
            else if (strcmp(a, "char-lstm") == 0)
                cfg->model = TR_CHAR_LSTM;
            else {
                fprintf(stderr, "clgrad-train: --model %s: want mlp or "
                        "char-lstm\n", a);
                return -1;
            }
            break;
        case O_HIDDEN:
            cfg->nhidden = parse_int_list(a, cfg->hidden, TR_MAX_HIDDEN);
            if (cfg->nhidden < 1) {
                fprintf(stderr, "clgrad-train: --hidden %s: want positive "
                        "integers separated by commas\n", a);
                return -1;
            }
            cfg->hidden_set = 1;
            break;
#define INTOPT(ID, NAME, FIELD, LO, HI)                                   \
        case ID:                                                          \
            if (parse_num(NAME, a, LO, HI, &v))                           \
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
#undef INTOPT
#define DBLOPT(ID, NAME, FIELD, LO, HI)                                   \
        case ID:                                                          \
            if (parse_num(NAME, a, LO, HI, &cfg->FIELD))                  \
                return -1;                                                \
            break;
        DBLOPT(O_DROPOUT, "--dropout", dropout, 0, 0.99)
        DBLOPT(O_HOLDOUT, "--holdout", holdout, 0.01, 0.99)
        DBLOPT(O_LR, "--lr", lr, 0, 100)
        DBLOPT(O_MOMENTUM, "--momentum", momentum, 0, 0.9999)
        DBLOPT(O_WD, "--weight-decay", weight_decay, 0, 10)
        DBLOPT(O_CLIP, "--clip", clip, 0, 1e9)
        DBLOPT(O_TEMP, "--temperature", temperature, 0.01, 100)
#undef DBLOPT
        case O_DATA: cfg->data = a; break;
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
        case O_CKPT: cfg->checkpoint = a; break;
        case O_RESUME: cfg->resume = a; break;
        case O_PRIME: cfg->prime = a; break;
        case O_SAMPLE_ONLY: cfg->sample_only = 1; break;
        case O_LOG: cfg->log = a; break;
        case O_QUIET: cfg->quiet = 1; break;
        case O_PROFILE: cfg->profile = 1; break;
        case O_HELP: usage(stdout); return 1;
        case O_VERSION: printf("clgrad-train %s\n", PACKAGE_VERSION);
            return 1;
        default: usage(stderr); return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "clgrad-train: unexpected argument '%s'\n",
                argv[optind]);
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
    if (!cfg.quiet)
        cg_set_compile_progress(tool_progress, (void *)"clgrad-train");
    signal(SIGINT, on_sigint);
    return tr_run(&cfg, &interrupted);
}
