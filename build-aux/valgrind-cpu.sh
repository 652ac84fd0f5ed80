#!/bin/sh
# SPDX-License-Identifier: MIT
# valgrind-cpu.sh LIBTOOL - prints the LLVM CPU name PoCL picks when the
# program runs under valgrind, or nothing if that is not PoCL's CPU device.
#
# Valgrind hides CPU features it cannot emulate (AVX-512), so under it PoCL
# names and compiles for another CPU ("pthread-haswell-..." instead of
# "pthread-skylake-avx512-...") and finds none of the kernels compiled by
# a native run, neither in its cache nor in clgrad's (keyed by the device
# name): memcheck would then run LLVM on every kernel, minutes each.  make
# check-valgrind therefore first runs the tests under valgrind --tool=none
# (same CPU as memcheck sees, a few times faster) when this prints a name,
# which fills both caches for that CPU.  (POCL_LLVM_CPU_NAME is no
# substitute: PoCL then compiles for that CPU but keeps the native device
# name, so clgrad's cache keys still differ.)
set -u
libtool=${1:-./libtool}
native=$(./tools/clgrad-info --list 2>/dev/null | sed -n '1s/.*\(pthread-[^(]*\) (.*/\1/p')
under=$($libtool --mode=execute valgrind -q ./tools/clgrad-info --list 2>/dev/null |
        sed -n '1s/.*\(pthread-[^(]*\) (.*/\1/p')
[ -n "$native" ] && [ -n "$under" ] && [ "$native" != "$under" ] || exit 0
# Strip the longest common suffix that starts with '-'.
tail=$under
while [ -n "$tail" ]; do
    case $native in
    *"$tail") break ;;
    esac
    rest=${tail#-}
    case $rest in
    *-*) tail=-${rest#*-} ;;
    *) tail= ;;
    esac
done
cpu=${under#pthread-}
cpu=${cpu%"$tail"}
[ -n "$cpu" ] && echo "$cpu"
