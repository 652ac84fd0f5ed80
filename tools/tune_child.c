/* SPDX-License-Identifier: MIT */
/*
 * tools/tune_child.c - CLBlast's own random search in a child process.
 * CLBlast's tuner compiles every candidate and cannot be interrupted, so
 * clgrad-tune runs it in a child (this program with the hidden option
 * --clblast-child) that the parent kills at its deadline.  The child
 * searches growing fractions of the space, F/16, F/4, F (--fraction), then
 * 4F, 16F, ... up to the whole space while the parent lets it run (each a
 * prefix of the next one's shuffled order: CLBlast shuffles with a fixed
 * seed), and prints the best after each round as a JSON line, so that a
 * child killed early still leaves an answer, and a small space (the copy
 * kernels') is covered when F of it is not one candidate.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "tune.h"
#include "cl/internal.h"

/* Reads the child's lines until it exits or `end`; keeps the last one. */
static void
read_child(tu_run *r, int fd, pid_t pid, double end, char *last,
           size_t lastlen)
{
    char buf[8192];
    size_t len = 0;
    int killed = 0;

    last[0] = '\0';
    for (;;) {
        struct pollfd pfd = { fd, POLLIN, 0 };
        ssize_t got;
        char *nl;

        if (!killed && (tu_stopped(r) || tu_now() >= end)) {
            kill(pid, SIGKILL);
            killed = 1;
        }
        if (poll(&pfd, 1, 200) <= 0)
            continue;
        got = read(fd, buf + len, sizeof buf - 1 - len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        len += (size_t)got;
        buf[len] = '\0';
        while ((nl = strchr(buf, '\n'))) {
            *nl = '\0';
            if (buf[0] == '{')
                snprintf(last, lastlen, "%s", buf);
            len -= (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, len + 1);
        }
        if (len == sizeof buf - 1)
            len = 0;
    }
}

int
tu_child_search(tu_run *r, const char *kernel, const char *name, size_t m,
                size_t n, size_t k, double end, tu_params *p, char *why,
                size_t whylen)
{
    char dev[16], sm[24], sn[24], sk[24], sf[32], last[8192];
    char *argv[9];
    json_object *o = NULL, *params = NULL;
    int fds[2], status, quiet;
    pid_t pid;

    snprintf(dev, sizeof dev, "%d", r->dev.index);
    snprintf(sm, sizeof sm, "%zu", m);
    snprintf(sn, sizeof sn, "%zu", n);
    snprintf(sk, sizeof sk, "%zu", k);
    snprintf(sf, sizeof sf, "%.17g", r->cfg->fraction);
    argv[0] = (char *)"clgrad-tune";
    argv[1] = (char *)"--clblast-child";
    argv[2] = dev;
    argv[3] = (char *)name;
    argv[4] = sm;
    argv[5] = sn;
    argv[6] = sk;
    argv[7] = sf;
    argv[8] = NULL;
    if (pipe(fds)) {
        snprintf(why, whylen, "pipe: %s", strerror(errno));
        return -1;
    }
    quiet = !getenv("CLGRAD_TUNE_CHILD_STDERR");
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        snprintf(why, whylen, "fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);

#ifdef __linux__
        /* Not to outlive a parent killed outright. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
        dup2(fds[1], 1);
        if (null >= 0 && quiet)
            dup2(null, 2);
        close(fds[0]);
        execv("/proc/self/exe", argv);
        execvp(r->cfg->self, argv);
        _exit(127);
    }
    close(fds[1]);
    read_child(r, fds[0], pid, end, last, sizeof last);
    close(fds[0]);
    waitpid(pid, &status, 0);
    if (last[0])
        o = json_tokener_parse(last);
    if (!o || !json_object_object_get_ex(o, "parameters", &params)) {
        snprintf(why, whylen, "CLBlast's search gave no result (%s)",
                 WIFSIGNALED(status) ? "stopped at its deadline"
                 : "it found no valid candidate");
        json_object_put(o);
        return -1;
    }
    tu_params_init(p, kernel, "any");
    json_object_object_foreach(params, key, val)
        tu_params_add(p, key, (long)json_object_get_int64(val));
    json_object_put(o);
    return 0;
}

int
tu_clblast_child(const char *device, const char *kernel, size_t m, size_t n,
                 size_t k, double fraction)
{
    cg_context_options opts;
    cg_context *ctx;
    char names[CG_TUNING_MAX_PARAMS][40], why[512];
    long values[CG_TUNING_MAX_PARAMS];
    int out, null, count, i;
    double fr;
    FILE *f;

    memset(&opts, 0, sizeof opts);
    opts.device = device;
    opts.no_tuning = 1;
    ctx = cg_context_new_with(&opts);
    if (!ctx) {
        fprintf(stderr, "clgrad-tune: %s\n", cg_last_error());
        return 1;
    }
    /* Only the result lines go to the parent. */
    out = dup(1);
    null = open("/dev/null", O_WRONLY);
    if (out < 0 || null < 0 || dup2(null, 1) < 0 ||
        !(f = fdopen(out, "w"))) {
        cg_context_free(ctx);
        return 1;
    }
    for (fr = fraction / 16;; fr *= 4) {
        int rc;
        json_object *o, *p;

        if (fr > 1)
            fr = 1;
        rc = tu_clblast_tune(&ctx->queue, kernel, m, n, k, fr, names,
                             values, CG_TUNING_MAX_PARAMS, &count, why,
                             sizeof why);
        if (count) {
            o = json_object_new_object();
            p = json_object_new_object();
            for (i = 0; i < count; i++)
                json_object_object_add(p, names[i],
                                       json_object_new_int64(values[i]));
            json_object_object_add(o, "fraction",
                                   json_object_new_double(fr));
            json_object_object_add(o, "status", json_object_new_int(rc));
            json_object_object_add(o, "parameters", p);
            fprintf(f, "%s\n", json_object_to_json_string_ext(
                        o, JSON_C_TO_STRING_PLAIN));
            fflush(f);
            json_object_put(o);
        }
        if (fr >= 1)
            break;
    }
    fclose(f);
    cg_context_free(ctx);
    return 0;
}
