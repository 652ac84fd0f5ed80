/* SPDX-License-Identifier: MIT */
/*
 * tests/rnn_ref.h - the host reference of one recurrent cell step, in
 * double, shared by the step-kernel tests (test_rnn_step) and the layer
 * tests (test_rnn): one copy of PyTorch's equations, so the two tests
 * cannot drift apart on them.
 */
#ifndef CG_RNN_REF_H
#define CG_RNN_REF_H

#include "nn/internal.h"

/* One step of one row: ig = W_ih x + b_ih and hg = W_hh h_{t-1} + b_hh
 * (G*H each, gates in PyTorch's order: LSTM i, f, g, o; GRU r, z, n), hp =
 * h_{t-1}.  Writes h_t to h (H values; may be hp itself); for an LSTM
 * updates c from c_{t-1} to c_t (ignored by the other cells).  saved, when
 * not NULL, gets the 4*H values the backward needs: LSTM i, f, g, o; GRU
 * r, z, n and hg's n part (W_hn h + b_hn); the other cells leave it. */
void rr_cell(cg__rnn_cell cell, int H, const double *ig, const double *hg,
             const double *hp, double *c, double *h, double *saved);

#endif
