/* SPDX-License-Identifier: MIT */
/*
 * tools/train_progress.c - what clgrad-train shows while it trains: the
 * progress bar (on a terminal: one line that fits its width) or plain
 * lines, the CSV log, and the loss plot drawn with gnuplot.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "train_run.h"

#define LOG_HEADER "step,loss,accuracy,lr,items_per_s,elapsed_s,val_loss\n"

void
tr_fmt_time(double s, char *buf, size_t n)
{
    if (!isfinite(s) || s < 0)
        snprintf(buf, n, "?");
    else if (s < 60)
        snprintf(buf, n, "%.0fs", s);
    else if (s < 3600)
        snprintf(buf, n, "%dm%02ds", (int)s / 60, (int)s % 60);
    else
        snprintf(buf, n, "%dh%02dm", (int)s / 3600, (int)s % 3600 / 60);
}

/* The terminal's width: TIOCGWINSZ, else $COLUMNS, else 80. */
static int
columns(void)
{
    struct winsize ws;
    const char *env = getenv("COLUMNS");

    if (ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    if (env && atoi(env) > 0)
        return atoi(env);
    return 80;
}

int
tr_progress_start(progress *p, const tr_config *cfg, int64_t step,
                  int64_t total, double elapsed)
{
    double now = tr_now();

    p->cfg = cfg;
    p->tty = isatty(2);
    p->total = total;
    p->end = cfg->stop_at > 0 && cfg->stop_at < total ? cfg->stop_at : total;
    p->first_step = step;
    p->start = p->rate_t0 = now;
    p->compile0 = tr_compile_seconds();
    p->t0 = now - elapsed;
    if (!cfg->log)
        return 0;
    p->log = fopen(cfg->log, cfg->resume ? "a" : "w");
    if (!p->log) {
        tr_fail("%s: cannot write the log", cfg->log);
        return -1;
    }
    if (ftell(p->log) == 0)     /* a new file */
        fputs(LOG_HEADER, p->log);
    return 0;
}

void
tr_progress_log(progress *p, int64_t step, double loss, double acc,
                double lr, double rate, double val)
{
    char a[32] = "", rt[32] = "", v[32] = "";

    if (!p->log)
        return;
    if (!isnan(acc))
        snprintf(a, sizeof a, "%.4f", acc);
    if (!isnan(rate))
        snprintf(rt, sizeof rt, "%.1f", rate);
    if (!isnan(val))
        snprintf(v, sizeof v, "%.6f", val);
    fprintf(p->log, "%lld,%.6f,%s,%.6g,%s,%.3f,%s\n", (long long)step, loss,
            a, lr, rt, tr_now() - p->t0, v);
}

/* The bar's line, at most `width` - 1 columns. */
static void
draw(progress *p)
{
    int64_t step = p->step, done = step - p->first_step;
    double now = tr_now(), el = now - p->t0;
    char eta[32], elapsed[32], text[160], line[512];
    int width = columns() - 1, bar, n, i, filled;

    tr_fmt_time(el, elapsed, sizeof elapsed);
    tr_fmt_time(done > 0 && p->end > step
                ? (now - p->start) / (double)done * (double)(p->end - step)
                : p->end > step ? NAN : 0, eta, sizeof eta);
    snprintf(text, sizeof text, " %lld/%lld loss %.4f %.0f %s/s %s ETA %s",
             (long long)step, (long long)p->total, p->loss, p->rate, p->unit,
             elapsed, eta);
    n = (int)strlen(text);
    bar = width - n - 2;
    if (bar > 40)
        bar = 40;
    if (bar < 10) {             /* no room for a bar: the text, cut */
        snprintf(line, sizeof line, "%.*s", width > 0 ? width : 0, text + 1);
    } else {
        filled = p->total ? (int)(bar * step / p->total) : 0;
        line[0] = '[';
        for (i = 0; i < bar; i++)
            line[1 + i] = i < filled ? '#' : '.';
        line[1 + bar] = ']';
        snprintf(line + bar + 2, sizeof line - (size_t)bar - 2, "%s", text);
    }
    n = (int)strlen(line);
    fprintf(stderr, "\r%s%*s", line, p->shown > n ? p->shown - n : 0, "");
    p->shown = n;
    p->drawn_step = step;
    p->last_print = now;
    fflush(stderr);
}

/* A plain progress line, on stdout. */
static void
plain(progress *p)
{
    char elapsed[32];

    tr_fmt_time(tr_now() - p->t0, elapsed, sizeof elapsed);
    printf("step %lld loss %.4f lr %.3g %.0f %s/s elapsed %s\n",
           (long long)p->step, p->loss, p->lr, p->rate, p->unit, elapsed);
    fflush(stdout);
    p->drawn_step = p->step;
}

void
tr_progress_step(progress *p, int64_t step, double loss, double lr,
                 double rate, const char *unit)
{
    p->step = step;
    p->loss = loss;
    p->lr = lr;
    p->rate = rate;
    p->unit = unit;
    tr_progress_log(p, step, loss, NAN, lr, rate, NAN);
    if (p->cfg->quiet)
        return;
    if (p->tty) {
        if (tr_now() - p->last_print >= 0.2)
            draw(p);
    } else if (step % p->cfg->log_every == 0) {
        plain(p);
    }
}

void
tr_progress_break(progress *p)
{
    if (p->cfg->quiet || p->step == p->first_step)
        return;
    if (!p->tty) {              /* the step before what follows */
        if (p->step != p->drawn_step)
            plain(p);
    } else if (p->shown) {
        if (p->step != p->drawn_step)
            draw(p);            /* the last step, not the last drawn */
        fprintf(stderr, "\n");
        p->shown = 0;
    }
}

/* ------------------------------------------------------------------------
 * The loss plot
 * ------------------------------------------------------------------------ */

void
tr_plot_add(progress *p, int64_t step, double loss, double val)
{
    if (!p->cfg->plot)
        return;
    if (p->npts == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 256;
        tr_point *q = realloc(p->pts, cap * sizeof *q);

        if (!q)
            return;
        p->pts = q;
        p->cap = cap;
    }
    p->pts[p->npts].step = step;
    p->pts[p->npts].loss = loss;
    p->pts[p->npts++].val = val;
}

/* Whether gnuplot is on $PATH. */
int
tr_have_gnuplot(void)
{
    const char *path = getenv("PATH");
    char buf[4096];

    while (path && *path) {
        size_t n = strcspn(path, ":");

        snprintf(buf, sizeof buf, "%.*s/gnuplot", (int)n, n ? path : ".");
        if (access(buf, X_OK) == 0)
            return 1;
        path += n + (path[n] == ':');
    }
    return 0;
}

/* The points: this process's, or with --log all the runs' from the log
 * (a resumed run's plot shows the whole history). */
static void
read_log(progress *p)
{
    FILE *f = p->cfg->log ? fopen(p->cfg->log, "r") : NULL;
    char line[512];

    if (!f)
        return;
    p->npts = 0;
    while (fgets(line, sizeof line, f)) {
        char *s = line, *field[7];
        int i;

        for (i = 0; i < 7 && s; i++) {
            field[i] = s;
            s = strchr(s, ',');
            if (s)
                *s++ = 0;
        }
        if (i < 7 || line[0] < '0' || line[0] > '9')
            continue;
        tr_plot_add(p, atoll(field[0]), atof(field[1]),
                    *field[6] && *field[6] != '\n' ? atof(field[6]) : NAN);
    }
    fclose(f);
}

/* gnuplot's single-quoted string: '' stands for '. */
static void
quoted(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputc('\'', f);
        fputc(*s, f);
    }
    fputc('\'', f);
}

int
tr_plot(progress *p)
{
    FILE *g;
    size_t i, nval = 0;
    int status;

    if (!p->cfg->plot)
        return 0;
    if (!tr_have_gnuplot()) {   /* the training itself succeeded */
        fprintf(stderr, "clgrad-train: warning: --plot %s: gnuplot is not "
                "installed (on Debian: apt-get install gnuplot-nox)%s%s\n",
                p->cfg->plot, p->cfg->log ? "; the losses are in " : "",
                p->cfg->log ? p->cfg->log : "");
        return 0;
    }
    if (p->log)
        fflush(p->log);
    read_log(p);
    g = popen("gnuplot", "w");
    if (!g) {
        tr_fail("--plot: cannot run gnuplot");
        return -1;
    }
    fprintf(g, "set terminal svg size 800,500 dynamic\nset output ");
    quoted(g, p->cfg->plot);
    fprintf(g, "\nset xlabel 'step'\nset ylabel 'loss'\nset grid\n"
            "set key top right\nplot '-' using 1:2 with lines "
            "title 'training'");
    for (i = 0; i < p->npts; i++)
        nval += !isnan(p->pts[i].val);
    if (nval)
        fprintf(g, ", '-' using 1:2 with linespoints pt 7 ps 0.5 "
                "title 'validation'");
    fprintf(g, "\n");
    for (i = 0; i < p->npts; i++)
        fprintf(g, "%lld %g\n", (long long)p->pts[i].step, p->pts[i].loss);
    fprintf(g, "e\n");
    for (i = 0; nval && i < p->npts; i++)
        if (!isnan(p->pts[i].val))
            fprintf(g, "%lld %g\n", (long long)p->pts[i].step,
                    p->pts[i].val);
    if (nval)
        fprintf(g, "e\n");
    status = pclose(g);
    if (status != 0) {
        tr_fail("--plot %s: gnuplot failed (status %d)", p->cfg->plot,
                status);
        return -1;
    }
    if (!p->cfg->quiet)
        printf("loss plot: %s\n", p->cfg->plot);
    return 0;
}
