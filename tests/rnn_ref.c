/* SPDX-License-Identifier: MIT */
/*
 * tests/rnn_ref.c - one recurrent cell step in double (PyTorch's
 * equations, as clgrad.h states them for cg_rnn_new).
 */
#include <math.h>

#include "rnn_ref.h"

static double sig(double v) { return 1 / (1 + exp(-v)); }

/* The new h of unit u; the LSTM's c[u] and saved values on the way. */
static double
unit(cg__rnn_cell cell, int H, int u, const double *ig, const double *hg,
     const double *hp, double *c, double *s)
{
    double a = ig[u] + hg[u];

    if (cell == CG__RNN_LSTM) {
        double i = sig(a), f = sig(ig[H + u] + hg[H + u]);
        double g = tanh(ig[2 * H + u] + hg[2 * H + u]);
        double o = sig(ig[3 * H + u] + hg[3 * H + u]);

        c[u] = f * c[u] + i * g;
        if (s)
            s[u] = i, s[H + u] = f, s[2 * H + u] = g, s[3 * H + u] = o;
        return o * tanh(c[u]);
    }
    if (cell == CG__RNN_GRU) {
        double r = sig(a), z = sig(ig[H + u] + hg[H + u]);
        double n = tanh(ig[2 * H + u] + r * hg[2 * H + u]);

        if (s)
            s[u] = r, s[H + u] = z, s[2 * H + u] = n,
            s[3 * H + u] = hg[2 * H + u];
        return (1 - z) * n + z * hp[u];
    }
    return cell == CG__RNN_RELU ? fmax(0.0, a) : tanh(a);
}

void
rr_cell(cg__rnn_cell cell, int H, const double *ig, const double *hg,
        const double *hp, double *c, double *h, double *saved)
{
    int u;

    /* Unit u reads hp[u] alone (hg holds the rest), so h may be hp. */
    for (u = 0; u < H; u++)
        h[u] = unit(cell, H, u, ig, hg, hp, c, saved);
}
