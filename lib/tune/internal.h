/* SPDX-License-Identifier: MIT */
/*
 * lib/tune/internal.h - the tuning database inside the library: parsing
 * and writing database files (db.c), and the lookup that puts entries in
 * force in a context (apply.c).  The entries in force are this layer's
 * state, hung on the context (ctx->tuning, which lib/cl only holds);
 * whole-file entries become the context's kernel parameters
 * (cg__param_set); layers above (nn) ask for their parameters here.
 */
#ifndef CG_TUNE_INTERNAL_H
#define CG_TUNE_INTERNAL_H

#include "cl/internal.h"
#include "tune/tuner.h"

#define CG__TUNING_FORMAT "clgrad-tuning"
#define CG__TUNING_VERSION 1

/* The entries in force in a context; allocated with the first. */
struct cg__tuning {
    cg_tuning_entry *e;
    int n;
    int cap;            /* entries e has room for */
};

/* Frees ctx's entries in force (the context's destructor). */
void cg__tuning_free(cg_context *ctx);

struct cg_tuning_db {
    cg_tuning_device device;
    cg_tuning_entry *entries;
    int count, cap;
};

/* Parses a database from JSON text; `what` names it in messages. */
cg_tuning_db *cg__tuning_db_parse(const char *text, const char *what);

/* The device block describing `dev`. */
void cg__tuning_device_of(const cg_device_info *dev, cg_tuning_device *out);

/* How well a database's device matches `dev`. */
cg_tuning_match cg__tuning_match(const cg_tuning_device *db,
                                 const cg_device_info *dev);

/* The entry in force for `kernel` whose shape is "H<n>" with n nearest to
 * `h` on a log scale (or "any"); NULL if none. */
const cg_tuning_entry *cg__tuning_find_h(const cg_context *ctx,
                                         const char *kernel, long h);

/* Parameter `name` of entry e into *value; 0 if e lacks it. */
int cg__tuning_param(const cg_tuning_entry *e, const char *name,
                     long *value);

/* The entry in force for kernel and exactly this shape, or NULL. */
const cg_tuning_entry *cg__tuning_find(const cg_context *ctx,
                                       const char *kernel, const char *shape);

/* A product's shape class (gemm_class.c): transposes NN, NT, TN, TT times
 * sizes skinny, small, large, longk; 0 .. CG__GEMM_NCLASSES - 1. */
#define CG__GEMM_NCLASSES 16
int cg__gemm_class(int ta, int tb, size_t m, size_t n, size_t k);
/* Its name, "NT.skinny", into buf. */
const char *cg__gemm_class_name(int c, char *buf, size_t size);
/* The class a name gives, or -1. */
int cg__gemm_class_parse(const char *shape);

/* A 2-D convolution's shape class (conv_class.c): direction dir (0
 * forward, 1 backward, 2 and 3 a transposed convolution's forward and
 * backward) times depthwise, small (at most 4 input channels per group)
 * or large, from the input channels C (of the convolution a transposed
 * one transposes) and the groups G; 0 .. CG__CONV_NCLASSES - 1. */
#define CG__CONV_NCLASSES 12
int cg__conv_class(int dir, int64_t C, int64_t G);
/* Its name, "fwd.depthwise", into buf. */
const char *cg__conv_class_name(int c, char *buf, size_t size);
/* The class a name gives, or -1. */
int cg__conv_class_parse(const char *shape);

/* The shape classes of a Fourier transform (lib/ops/fft.c), by which a
 * tuning entry "fft" chooses its path ("path" 0 clFFT, 1 Bluestein's
 * algorithm on a padded complex transform, 2 a real kind through the
 * complex transform of its length): "real.large", rfft and irfft of
 * n > 2048, and "complex.large", complex transforms of n >= 1024 (the
 * rows of fft2 and the other 2-D ops of such a width or height).
 * cg__fft_class gives -1 for a transform of no class (kind a
 * cg__fft_kind); cg__fft_class_parse -1 for a shape that names none. */
enum { CG__FFT_REAL_LARGE, CG__FFT_COMPLEX_LARGE, CG__FFT_NCLASSES };
int cg__fft_class(int kind, size_t n);
const char *cg__fft_class_name(int cls);
int cg__fft_class_parse(const char *shape);

/* Whether the CLBlast parameters of e ("clblast.Xgemm", ...) can run on
 * dev: every parameter of the kernel given and none other, CLBlast's
 * divisibility constraints, vector widths, the work-group and local
 * memory against the device's limits (lib/tune/clblast.c).  CG_OK, or
 * CG_EINVAL with a message naming the entry and the rule. */
int cg__clblast_check(const cg_device_info *dev, const cg_tuning_entry *e);

/* The shipped databases, built into the library from data/tuning/ by
 * build-aux/json2c.sh: { name, text }, ended by { NULL, NULL }. */
typedef struct {
    const char *name;
    const char *text;
} cg__embedded_tuning;
extern const cg__embedded_tuning cg__tuning_embedded[];

#endif
