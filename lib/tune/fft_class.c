/* SPDX-License-Identifier: MIT */
/*
 * lib/tune/fft_class.c - the shape classes of a Fourier transform, by
 * which tuning entries choose its path (lib/ops/fft.c): kernel "fft"
 * with shape "real.large" (rfft and irfft longer than 2048) or
 * "complex.large" (complex transforms of 1024 or more: a 2-D transform
 * of that width or height runs them), and "path" 0 (clFFT's plan), 1
 * (Bluestein's algorithm on a padded complex transform), 2 (a real kind
 * through the complex transform of its length) or 3 (clgrad's own radix
 * passes, kernels/fft.cl).  The limits are where users reported clFFT
 * 2.12 failing on NVIDIA: real transforms above 2048 and 2-D widths from
 * 1024.
 */
#include "config.h"

#include <string.h>

#include "ops/internal.h"
#include "tune/internal.h"

int
cg__fft_class(int kind, size_t n)
{
    if (kind == CG__FFT_R2C || kind == CG__FFT_C2R)
        return n > 2048 ? CG__FFT_REAL_LARGE : -1;
    return n >= 1024 ? CG__FFT_COMPLEX_LARGE : -1;
}

const char *
cg__fft_class_name(int cls)
{
    return cls == CG__FFT_REAL_LARGE ? "real.large"
           : cls == CG__FFT_COMPLEX_LARGE ? "complex.large" : NULL;
}

int
cg__fft_class_parse(const char *shape)
{
    return strcmp(shape, "real.large") == 0 ? CG__FFT_REAL_LARGE
           : strcmp(shape, "complex.large") == 0 ? CG__FFT_COMPLEX_LARGE
           : -1;
}
