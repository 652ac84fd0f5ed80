#!/bin/sh
# SPDX-License-Identifier: MIT
# valgrind-prepass.sh LIBTOOL - how make check-valgrind fills the kernel
# caches for the CPU PoCL sees under valgrind: prints
#   POCL_KERNELLIB_NAME=LIB [CLGRAD_NATIVE_FLOAT_WIDTH=W]
#                            a native run with this setting compiles for
#                            that CPU (the same device name, so the same
#                            PoCL and clgrad cache keys), and with the
#                            same kernel options (see below);
#   valgrind                 no kernel library does: run the tests under
#                            valgrind --tool=none first;
#   nothing                  valgrind changes nothing (or the device is
#                            not PoCL's CPU device).
#
# Valgrind hides CPU features it cannot emulate (AVX-512), so under it a
# distribution's PoCL picks another kernel library and CPU
# ("pthread-haswell-..." instead of "pthread-skylake-avx512-...") and finds
# none of the kernels compiled by a native run, neither in its cache nor
# in clgrad's (keyed by the device name): memcheck would run LLVM on every
# kernel, minutes each.  A distribution build of PoCL picks the kernel
# library POCL_KERNELLIB_NAME names when the CPU supports it, and the CPU
# from the library, so a native run can compile exactly what the
# valgrind run will look for, at native speed.  (POCL_LLVM_CPU_NAME is
# no substitute: PoCL's distribution build ignores it.)  PoCL takes the
# device's vector widths from the host's features, though, not from the
# library: natively an AVX-512 CPU reports 16 floats under any library,
# under valgrind 8, and the tuning entries' vector widths (kernel build
# options) are narrowed to that width; CLGRAD_NATIVE_FLOAT_WIDTH makes
# the native run narrow them as the valgrind run will.
set -u
libtool=${1:-./libtool}
# name: the first device's name, without the platform in parentheses at
# the end of the line; the name may hold parentheses itself ("Intel(R)").
name() {
    sed -n '1s/.*\(pthread-.*\) ([^()]*)$/\1/p'
}
# width: the first device's native float vector width, from clgrad-info.
width() {
    sed -n 's/^ *Native vector widths .* float \([0-9]*\),.*/\1/p' |
        sed -n 1p
}
native=$(./tools/clgrad-info --list 2>/dev/null | name)
under=$($libtool --mode=execute valgrind -q ./tools/clgrad-info --list \
        2>/dev/null | name)
[ -n "$native" ] && [ -n "$under" ] && [ "$native" != "$under" ] || exit 0
# PoCL 3.1's distribution kernel libraries.
for lib in avx2 avx_f16c avx_fma4 avx sse41 ssse3 sse2 avx512; do
    n=$(POCL_KERNELLIB_NAME=$lib ./tools/clgrad-info --list 2>/dev/null |
        name)
    if [ "$n" = "$under" ]; then
        wn=$(POCL_KERNELLIB_NAME=$lib ./tools/clgrad-info -n -d 0 \
             2>/dev/null | width)
        wu=$($libtool --mode=execute valgrind --tool=none -q \
             ./tools/clgrad-info -n -d 0 2>/dev/null | width)
        if [ -n "$wu" ] && [ "$wn" != "$wu" ]; then
            echo "POCL_KERNELLIB_NAME=$lib CLGRAD_NATIVE_FLOAT_WIDTH=$wu"
        else
            echo "POCL_KERNELLIB_NAME=$lib"
        fi
        exit 0
    fi
done
echo valgrind
