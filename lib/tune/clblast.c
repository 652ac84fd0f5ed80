/* SPDX-License-Identifier: MIT */
/*
 * lib/tune/clblast.c - whether a set of CLBlast kernel parameters can run
 * on a device, before it is handed to CLBlastOverrideParameters: CLBlast
 * checks only that the names are its kernel's, so a set that breaks the
 * kernel's own assumptions (Xgemm MWG=3 NWG=5) was put in force and the
 * next GEMM spent minutes in the kernel compiler, or failed to build with
 * nothing naming the tuning file.
 *
 * The rules are CLBlast 1.5's, from its tuners (src/tuning/kernels/
 * xgemm.hpp, xgemm_direct.hpp, copy_fast.hpp, copy_pad.hpp,
 * transpose_fast.hpp, transpose_pad.hpp): the divisibility constraints
 * each tuner adds, the local memory each kernel declares, and the
 * work-group each launches (MulLocal), against the device's limits.
 * Vector widths are OpenCL's 1, 2, 4, 8 or 16 (the kernels declare floatN
 * types of them); switches are 0 or 1; sizes are at least 1.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "tune/internal.h"

/* The kernels' parameter roles. */
enum { POS, VEC, BOOL, ANY };

typedef struct {
    const char *name;
    int role;
} cparam;

typedef struct {
    const char *kernel;         /* after "clblast." */
    cparam p[16];
} ckernel;

static const ckernel kernels[] = {
    { "Xgemm", { { "GEMMK", BOOL }, { "KREG", POS }, { "KWG", POS },
                 { "KWI", POS }, { "MDIMA", POS }, { "MDIMC", POS },
                 { "MWG", POS }, { "NDIMB", POS }, { "NDIMC", POS },
                 { "NWG", POS }, { "SA", BOOL }, { "SB", BOOL },
                 { "STRM", BOOL }, { "STRN", BOOL }, { "VWM", VEC },
                 { "VWN", VEC } } },
    { "XgemmDirect", { { "KWID", POS }, { "MDIMAD", POS },
                       { "MDIMCD", POS }, { "NDIMBD", POS },
                       { "NDIMCD", POS }, { "PADA", BOOL }, { "PADB", BOOL },
                       { "VWMD", VEC }, { "VWND", VEC }, { "WGD", POS } } },
    { "Copy", { { "COPY_DIMX", POS }, { "COPY_DIMY", POS },
                { "COPY_VW", VEC }, { "COPY_WPT", POS } } },
    { "Pad", { { "PAD_DIMX", POS }, { "PAD_DIMY", POS },
               { "PAD_WPTX", POS }, { "PAD_WPTY", POS } } },
    { "Transpose", { { "TRA_DIM", POS }, { "TRA_PAD", BOOL },
                     { "TRA_SHUFFLE", BOOL }, { "TRA_WPT", VEC } } },
    { "Padtranspose", { { "PADTRA_PAD", BOOL }, { "PADTRA_TILE", POS },
                        { "PADTRA_WPT", POS } } },
    { "GemmRoutine", { { "XGEMM_MIN_INDIRECT_SIZE", ANY } } },
};
#define NKERNELS (sizeof kernels / sizeof kernels[0])

/* A parameter's value; the entry has every one (checked first). */
static long
P(const cg_tuning_entry *e, const char *name)
{
    long v = 0;

    cg__tuning_param(e, name, &v);
    return v;
}

/* "a % b == 0" with the names of both sides for the message. */
#define MULTIPLE(a, b, what)                                              \
    do {                                                                  \
        if ((b) <= 0 || (a) % (b) != 0)                                   \
            return cg__error(CG_EINVAL, "%s: %s (%ld) must be a multiple " \
                             "of %s (%ld)", e->kernel, #a, (long)(a),      \
                             what, (long)(b));                            \
    } while (0)

/* The work-group wx x wy and `local` bytes of local memory against the
 * device. */
static int
fits(const cg_device_info *d, const cg_tuning_entry *e, const char *wg,
     long wx, long wy, long local)
{
    if ((size_t)wx > d->max_work_item_sizes[0] ||
        (size_t)wy > d->max_work_item_sizes[1] ||
        (size_t)(wx * wy) > d->max_work_group_size)
        return cg__error(CG_EINVAL, "%s: a work-group of %s = %ld x %ld "
                         "exceeds the device's limits (%zu items, %zu x "
                         "%zu)", e->kernel, wg, wx, wy,
                         d->max_work_group_size, d->max_work_item_sizes[0],
                         d->max_work_item_sizes[1]);
    if ((uint64_t)local > d->local_mem_size)
        return cg__error(CG_EINVAL, "%s: needs %ld bytes of local memory, "
                         "the device has %llu", e->kernel, local,
                         (unsigned long long)d->local_mem_size);
    return CG_OK;
}

static int
xgemm(const cg_device_info *d, const cg_tuning_entry *e)
{
    long KWG = P(e, "KWG"), KWI = P(e, "KWI"), MWG = P(e, "MWG"),
         NWG = P(e, "NWG"), MDIMC = P(e, "MDIMC"), NDIMC = P(e, "NDIMC"),
         MDIMA = P(e, "MDIMA"), NDIMB = P(e, "NDIMB"), VWM = P(e, "VWM"),
         VWN = P(e, "VWN"), KREG = P(e, "KREG");
    long MDIMC_VWM = MDIMC * VWM, NDIMC_VWN = NDIMC * VWN,
         MDIMA_VWM = MDIMA * VWM, NDIMB_VWN = NDIMB * VWN,
         CTHREADS = MDIMC * NDIMC;

    MULTIPLE(MWG, MDIMC_VWM, "MDIMC * VWM");
    MULTIPLE(NWG, NDIMC_VWN, "NDIMC * VWN");
    MULTIPLE(MWG, MDIMA_VWM, "MDIMA * VWM");
    MULTIPLE(NWG, NDIMB_VWN, "NDIMB * VWN");
    if (P(e, "GEMMK") == 0) {
        long KDIMA, KDIMB;

        MULTIPLE(KWG, KWI, "KWI");
        MULTIPLE(CTHREADS, MDIMA, "MDIMA");
        MULTIPLE(CTHREADS, NDIMB, "NDIMB");
        KDIMA = CTHREADS / MDIMA;
        KDIMB = CTHREADS / NDIMB;
        MULTIPLE(KWG, KDIMA, "MDIMC * NDIMC / MDIMA");
        MULTIPLE(KWG, KDIMB, "MDIMC * NDIMC / NDIMB");
    } else {
        MULTIPLE(KREG, VWN, "VWN");
        if (MDIMA != MDIMC || NDIMB != NDIMC)
            return cg__error(CG_EINVAL, "%s: with GEMMK 1, MDIMA (%ld) must "
                             "equal MDIMC (%ld) and NDIMB (%ld) NDIMC (%ld)",
                             e->kernel, MDIMA, MDIMC, NDIMB, NDIMC);
    }
    return fits(d, e, "MDIMC x NDIMC", MDIMC, NDIMC,
                4 * (P(e, "SA") * KWG * MWG + P(e, "SB") * KWG * NWG));
}

static int
xgemm_direct(const cg_device_info *d, const cg_tuning_entry *e)
{
    long WGD = P(e, "WGD"), KWID = P(e, "KWID"), MDIMCD = P(e, "MDIMCD"),
         NDIMCD = P(e, "NDIMCD"), MDIMAD = P(e, "MDIMAD"),
         NDIMBD = P(e, "NDIMBD"), VWMD = P(e, "VWMD"), VWND = P(e, "VWND");
    long MDIMCD_VWMD = MDIMCD * VWMD, NDIMCD_VWND = NDIMCD * VWND,
         MDIMAD_VWMD = MDIMAD * VWMD, NDIMBD_VWND = NDIMBD * VWND,
         CTHREADS = MDIMCD * NDIMCD, KDIMAD, KDIMBD;

    MULTIPLE(WGD, KWID, "KWID");
    MULTIPLE(WGD, MDIMCD_VWMD, "MDIMCD * VWMD");
    MULTIPLE(WGD, NDIMCD_VWND, "NDIMCD * VWND");
    MULTIPLE(WGD, MDIMAD_VWMD, "MDIMAD * VWMD");
    MULTIPLE(WGD, NDIMBD_VWND, "NDIMBD * VWND");
    MULTIPLE(CTHREADS, MDIMAD, "MDIMAD");
    MULTIPLE(CTHREADS, NDIMBD, "NDIMBD");
    KDIMAD = CTHREADS / MDIMAD;
    KDIMBD = CTHREADS / NDIMBD;
    MULTIPLE(WGD, KDIMAD, "MDIMCD * NDIMCD / MDIMAD");
    MULTIPLE(WGD, KDIMBD, "MDIMCD * NDIMCD / NDIMBD");
    return fits(d, e, "MDIMCD x NDIMCD", MDIMCD, NDIMCD,
                4 * (WGD * (WGD + P(e, "PADA")) + WGD * (WGD + P(e, "PADB"))));
}

static int
others(const cg_device_info *d, const cg_tuning_entry *e, const char *k)
{
    long a, b;

    if (strcmp(k, "Copy") == 0)
        return fits(d, e, "COPY_DIMX x COPY_DIMY", P(e, "COPY_DIMX"),
                    P(e, "COPY_DIMY"), 0);
    if (strcmp(k, "Pad") == 0)
        return fits(d, e, "PAD_DIMX x PAD_DIMY", P(e, "PAD_DIMX"),
                    P(e, "PAD_DIMY"), 0);
    if (strcmp(k, "Transpose") == 0) {
        a = P(e, "TRA_DIM");
        b = P(e, "TRA_WPT");
        return fits(d, e, "TRA_DIM x TRA_DIM", a, a,
                    4 * b * (b * a) * (a + P(e, "TRA_PAD")));
    }
    if (strcmp(k, "Padtranspose") == 0) {
        a = P(e, "PADTRA_TILE") * P(e, "PADTRA_WPT");
        return fits(d, e, "PADTRA_TILE x PADTRA_TILE", P(e, "PADTRA_TILE"),
                    P(e, "PADTRA_TILE"), 4 * a * (a + P(e, "PADTRA_PAD")));
    }
    return CG_OK;
}

int
cg__clblast_check(const cg_device_info *dev, const cg_tuning_entry *e)
{
    const char *k = e->kernel + strlen("clblast.");
    const ckernel *ck = NULL;
    size_t i;
    int j, n = 0;

    for (i = 0; i < NKERNELS; i++)
        if (strcmp(kernels[i].kernel, k) == 0)
            ck = &kernels[i];
    if (!ck)
        return cg__error(CG_EINVAL, "%s: not a CLBlast kernel clgrad "
                         "tunes (Xgemm, XgemmDirect, Copy, Pad, Transpose, "
                         "Padtranspose, GemmRoutine)", e->kernel);
    for (j = 0; j < 16 && ck->p[j].name; j++) {
        long v;

        n++;
        if (!cg__tuning_param(e, ck->p[j].name, &v))
            return cg__error(CG_EINVAL, "%s: parameter %s is missing",
                             e->kernel, ck->p[j].name);
        if ((ck->p[j].role == POS || ck->p[j].role == VEC) &&
            (v < 1 || v > 4096))
            return cg__error(CG_EINVAL, "%s: %s = %ld (1 to 4096)",
                             e->kernel, ck->p[j].name, v);
        if (ck->p[j].role == VEC && v != 1 && v != 2 && v != 4 && v != 8 &&
            v != 16)
            return cg__error(CG_EINVAL, "%s: %s = %ld is not a vector width "
                             "(1, 2, 4, 8 or 16)", e->kernel, ck->p[j].name,
                             v);
        if (ck->p[j].role == BOOL && v != 0 && v != 1)
            return cg__error(CG_EINVAL, "%s: %s = %ld (0 or 1)", e->kernel,
                             ck->p[j].name, v);
    }
    if (e->nparams != n)
        for (j = 0; j < e->nparams; j++) {
            int known = 0, m;

            for (m = 0; m < n; m++)
                known |= strcmp(e->names[j], ck->p[m].name) == 0;
            if (!known)
                return cg__error(CG_EINVAL, "%s: unknown parameter %s",
                                 e->kernel, e->names[j]);
        }
    if (strcmp(k, "Xgemm") == 0)
        return xgemm(dev, e);
    if (strcmp(k, "XgemmDirect") == 0)
        return xgemm_direct(dev, e);
    return others(dev, e, k);
}
