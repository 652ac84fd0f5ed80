/* SPDX-License-Identifier: MIT */
/*
 * tests/gradgrad_cases.h - the op cases of tests/test_higher_order.c's
 * gradgradcheck (tests/gradgrad_cases.c).
 */
#ifndef CG_GRADGRAD_CASES_H
#define CG_GRADGRAD_CASES_H

#include "opcheck.h"

/* An op y = F(x1..xn): the inputs' shapes ("3,5") and value ranges, the op
 * on device tensors (a new tensor, the caller owns it) and its reference
 * in double (out allocated with oc_alloc). */
typedef struct gg_case {
    const char *name;
    int n;
    const char *shapes[4];
    double lo[4], hi[4];
    double away;            /* inputs at least this far from 0 (kinks) */
    cg_tensor *(*run)(cg_tensor **x);
    void (*ref)(const oc_tensor *in, oc_tensor *out);
} gg_case;

extern const gg_case gg_cases[];
extern const int gg_ncases;

/* The class targets the loss cases use, on the device: made once, freed
 * by gg_free_targets. */
void gg_make_targets(void);
void gg_free_targets(void);

/* Temporaries of nested op calls: T keeps t (asserting it is not NULL)
 * until drop_temps frees them all; the graph keeps what it needs. */
cg_tensor *T(cg_tensor *t);
void drop_temps(void);

#endif
