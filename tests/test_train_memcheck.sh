#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/test_train_memcheck.sh - clgrad-train itself under a memory
# checker: a tiny character LSTM that stops at step 2 with a checkpoint, a
# second process that resumes it to step 4, saves and samples, and a tiny
# MLP; every run must exit 0, and under valgrind's memcheck with no error
# and no leak (build-aux/valgrind.supp holds only PoCL/LLVM internals).
#
# make check-valgrind sets CLGRAD_TEST_WRAPPER to the valgrind command of
# its pass (--tool=none first when PoCL names the CPU differently under
# valgrind, which compiles clgrad's and CLBlast's kernels for that name
# into the caches; then memcheck, which finds them there: a few minutes,
# not the hour that compiling every kernel under memcheck takes).  In
# make check it is unset and the same runs are a quick native test.
set -u
name=test_train_memcheck
. "${TEST_SRCDIR:-.}/tests/shell_common.sh"
train="$bld/tools/clgrad-train"
wrap=${CLGRAD_TEST_WRAPPER:-}

# Runs clgrad-train under the wrapper; shows its output if it fails.
run() {
    what=$1
    shift
    # shellcheck disable=SC2086
    if ! $wrap "$train" "$@" > "$tmp/out" 2>&1; then
        cat "$tmp/out"
        fail "$what${wrap:+ under $wrap}"
    fi
}

# Small data: the first lines of the shipped sets.
head -c 3000 "$top/data/kjv.txt" > "$tmp/text.txt"
head -n 121 "$top/data/digits.csv" > "$tmp/digits.csv"

lstm="--model char-lstm --data $tmp/text.txt --layers 2 --hidden 12
      --embed 6 --seq-len 8 --batch 2 --steps 4 --eval-every 2 --seed 5
      --dropout 0.1 --clip 1 --quiet"
# shellcheck disable=SC2086
run "char-lstm: 2 steps and a checkpoint" $lstm --sample 0 --stop-at 2 \
    --checkpoint "$tmp/l2.st"
run "char-lstm: resumed to step 4, saved, sampled" --resume "$tmp/l2.st" \
    --data "$tmp/text.txt" --steps 4 --sample 16 --quiet \
    --checkpoint "$tmp/l4.st"
[ -s "$tmp/l4.st" ] || fail "char-lstm: no checkpoint after the resume"
cmp -s "$tmp/l2.st" "$tmp/l4.st" &&
    fail "char-lstm: the resume changed nothing"
run "mlp: 3 steps" --model mlp --data "$tmp/digits.csv" --hidden 8,8 \
    --batch 16 --steps 3 --seed 2 --quiet --checkpoint "$tmp/m.st"
[ -s "$tmp/m.st" ] || fail "mlp: no checkpoint"

[ "$fails" -eq 0 ] || exit 1
exit 0
