#!/bin/sh
# valgrind-cpu.sh LIBTOOL - prints the LLVM CPU name PoCL picks when the
# program runs under valgrind, or nothing if that is not PoCL's CPU device.
#
# Valgrind hides CPU features it cannot emulate (AVX-512), so under it PoCL
# names and compiles for another CPU ("pthread-haswell-..." instead of
# "pthread-skylake-avx512-...") and finds none of its cached kernels:
# LLVM then compiles every kernel under valgrind, minutes each.  make
# check-valgrind first runs the tests natively with POCL_LLVM_CPU_NAME set
# to this name, which fills PoCL's and clgrad's caches for that CPU.
#
# PoCL names its device "pthread-<llvm cpu>-<model>"; the model is the
# common tail of the native and the valgrind names.
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
