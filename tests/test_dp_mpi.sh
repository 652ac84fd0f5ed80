#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/test_dp_mpi.sh - data parallelism across processes (cg_dp_new_mpi)
# with Open MPI's mpirun, and clgrad-train's: 20 steps of the MLP of
# tests/dp_model.h with a global batch of 32 on 2 ranks equal one process
# with the whole batch to 1e-6 of each parameter's scale, and the
# in-process transport on 2 replicas (the two transports agree), with
# the first bucket's reduction queued while backward goes on; 4 ranks
# (batch 32) and 3 ranks (batch 48) likewise; a rank with a wider model
# or one with more parameters makes every rank fail with a clear error; a
# rank killed mid-run ends the job with a non-zero status (no hang:
# `timeout` only guards against one).
# Then clgrad-train: the MLP and the character LSTM for 20 steps of batch
# 32 on --devices 0,1 and on 2 ranks equal one device (every tensor of the
# checkpoints to 1e-6 relative, norm-wise), and each other; a data-
# parallel run stopped and resumed equals one run; --save-best under
# mpirun keeps the best checkpoint as one device does; bf16 and fp16
# autocast on --devices 0,1 match one device to 16-bit rounding; a rank
# killed mid-run ends the job and leaves the last checkpoint loadable; a
# batch that does not split (in process and on every rank), a missing
# device and --devices under mpirun are refused.
# Skipped in a build without MPI and under valgrind (Open MPI's own
# noise); ASan runs it.
name=test_dp_mpi
. "${TEST_SRCDIR:-.}/tests/shell_common.sh"

worker=$bld/tests/dp_worker
if ! grep -q '^#define HAVE_MPI 1' "$bld/config.h" 2>/dev/null; then
    echo "clgrad was configured without MPI"
    [ -n "${CI:-}" ] && exit 1
    exit 77
fi
if ! command -v mpirun >/dev/null 2>&1; then
    echo "no mpirun (apt-get install openmpi-bin)"
    [ -n "${CI:-}" ] && exit 1
    exit 77
fi
if [ "${CLGRAD_TEST_CHECKER:-}" = valgrind ]; then
    echo "skipped under valgrind: Open MPI is not valgrind-clean"
    exit 77
fi
# Two OpenCL devices from PoCL (each rank takes its local rank's).
POCL_DEVICES=${POCL_DEVICES:-pthread pthread}
export POCL_DEVICES
mpiflags="--oversubscribe"
[ "$(id -u)" = 0 ] && mpiflags="$mpiflags --allow-run-as-root"

# run NP ARGS...: the worker on NP ranks.
run() {
    np=$1
    shift
    # shellcheck disable=SC2086
    timeout 600 mpirun $mpiflags -np "$np" "$worker" mpi "$@"
}

# With Adam, buckets of one parameter each: on every rank the first
# bucket's read is queued while backward still has launches to queue (its
# reduction overlaps backward; queue order, not time).
for opt in sgd adam; do
    "$worker" local:1 $opt 20 32 "$tmp/one-$opt" || fail "$opt: one process"
    if [ $opt = adam ]; then
        out=$(run 2 $opt 20 32 "$tmp/mpi2-$opt" --bucket-mb 1e-6) ||
            fail "$opt: 2 ranks"
        for r in 0 1; do
            line=$(echo "$out" | grep "^rank $r: 4 buckets; ") ||
                fail "adam: rank $r's buckets: '$out'"
            # shellcheck disable=SC2086
            set -- $line
            [ "$9" -lt "${12}" ] ||
                fail "adam: rank $r: no overlap by queue order: '$line'"
        done
    else
        run 2 $opt 20 32 "$tmp/mpi2-$opt" || fail "$opt: 2 ranks"
    fi
    "$worker" local:2 $opt 20 32 "$tmp/local2-$opt" ||
        fail "$opt: 2 replicas in process"
    "$worker" compare "$tmp/mpi2-$opt" "$tmp/one-$opt" 1e-6 ||
        fail "$opt: 2 ranks differ from one process"
    "$worker" compare "$tmp/mpi2-$opt" "$tmp/local2-$opt" 1e-6 ||
        fail "$opt: 2 ranks differ from 2 replicas in process"
done
run 4 sgd 20 32 "$tmp/mpi4" || fail "4 ranks"
"$worker" compare "$tmp/mpi4" "$tmp/one-sgd" 1e-6 ||
    fail "4 ranks differ from one process"
"$worker" local:1 sgd 20 48 "$tmp/one48" || fail "one process, batch 48"
run 3 sgd 20 48 "$tmp/mpi3" || fail "3 ranks"
"$worker" compare "$tmp/mpi3" "$tmp/one48" 1e-6 ||
    fail "3 ranks differ from one process"

# A rank whose model differs: every rank fails and says why.
out=$(run 2 sgd 2 32 "$tmp/bad" --hid-rank 1 2>&1)
[ $? -ne 0 ] || fail "mismatched model: exit status 0"
case $out in
*"on rank 1 but"*"on rank 0"*) ;;
*) fail "mismatched model: '$out' lacks the shapes" ;;
esac
case $out in
*"another rank's model differs"*) ;;
*) fail "mismatched model: rank 0 did not say so: '$out'" ;;
esac

# A rank whose model has more parameters: likewise (natively only: the
# same collective path as the shapes', an mpirun less under ASan).
if [ -z "${CLGRAD_TEST_CHECKER:-}" ]; then
    out=$(run 2 sgd 2 32 "$tmp/bad" --extra-rank 1 2>&1)
    [ $? -ne 0 ] || fail "model with more parameters: exit status 0"
    case $out in
    *"rank 1's model has 6 parameters, rank 0's 4"*) ;;
    *) fail "model with more parameters: '$out' lacks the counts" ;;
    esac
    case $out in
    *"another rank's model differs"*) ;;
    *) fail "model with more parameters: rank 0 did not say so: '$out'" ;;
    esac
fi

# A rank whose step fails: every rank stops with the reason.
out=$(run 2 sgd 10 32 "$tmp/failed" --fail-at 4 2>&1)
[ $? -ne 0 ] || fail "failed step: exit status 0"
case $out in
*"replica 1:"*"another rank failed"*|*"another rank failed"*"replica 1:"*) ;;
*) fail "failed step: '$out' lacks a rank's reason or the other's" ;;
esac
[ -e "$tmp/failed" ] && fail "failed step: a result was written"

# A rank killed mid-run: the job ends, non-zero.
run 2 sgd 20 32 "$tmp/killed" --die-at 5 >"$tmp/killed.log" 2>&1
status=$?
[ $status -ne 0 ] || fail "killed rank: exit status 0"
[ $status -ne 124 ] || fail "killed rank: the job hung"
[ -e "$tmp/killed" ] && fail "killed rank: a result was written"

# clgrad-train.
train=$bld/tools/clgrad-train
mlp="--model mlp --data $top/data/digits.csv --steps 20 --batch 32 --quiet"
lstm="--model char-lstm --data $top/data/kjv.txt --layers 2 --hidden 32
      --seq-len 16 --steps 20 --batch 32 --quiet --sample 0"
# --devices 0,1 with small buckets (several per step; the bucket sizes
# change no sum).
# With --save-best (the LSTM validating at step 10 too): under mpirun rank
# 0 evaluates, every rank takes part in the best checkpoint (the LSTM's
# state is gathered), rank 0 writes it; it equals one device's.
for m in mlp lstm; do
    eval "args=\$$m"
    best="--save-best"
    [ $m = lstm ] && best="$best --eval-every 10"
    # shellcheck disable=SC2086
    "$train" $args $best --device 0 --checkpoint "$tmp/$m-1.ck" ||
        fail "$m: one device"
    # shellcheck disable=SC2086
    "$train" $args --devices 0,1 --bucket-mb 0.01 --first-bucket-mb 0.001 \
        --checkpoint "$tmp/$m-d2.ck" ||
        fail "$m: --devices 0,1"
    # shellcheck disable=SC2086
    timeout 600 mpirun $mpiflags -np 2 "$train" $args $best \
        --checkpoint "$tmp/$m-m2.ck" || fail "$m: 2 ranks"
    "$worker" ckcompare "$tmp/$m-d2.ck" "$tmp/$m-1.ck" 1e-6 ||
        fail "$m: --devices 0,1 differs from one device"
    "$worker" ckcompare "$tmp/$m-m2.ck" "$tmp/$m-1.ck" 1e-6 ||
        fail "$m: 2 ranks differ from one device"
    "$worker" ckcompare "$tmp/$m-m2.ck" "$tmp/$m-d2.ck" 1e-6 ||
        fail "$m: 2 ranks differ from --devices 0,1"
    "$worker" ckcompare "$tmp/$m-m2.best.ck" "$tmp/$m-1.best.ck" 1e-6 ||
        fail "$m: --save-best on 2 ranks differs from one device's"
done
# Mixed precision (autocast: 16-bit products, float32 parameters, which
# data parallelism requires; fp16 with dynamic loss scaling, each
# replica's scaler deciding on the same averaged gradients) on --devices
# 0,1 matches one device to 16-bit rounding: 5e-2 of each tensor's norm
# (splitting the batch changes the 16-bit roundings; measured over 20
# steps: 0.018 for bf16, 0.011 for fp16, both in Adam's moments of the
# first layer, whose pixels' gradients are mostly near zero).  The
# transport does not touch the losses: in process stands for both.  Under
# a checker fp16 alone (autocast and the scalers).
precisions="bf16 fp16"
[ -n "${CLGRAD_TEST_CHECKER:-}" ] && precisions=fp16
for p in $precisions; do
    # shellcheck disable=SC2086
    "$train" $mlp --precision $p --device 0 \
        --checkpoint "$tmp/$p-1.ck" || fail "$p: one device"
    # shellcheck disable=SC2086
    "$train" $mlp --precision $p --devices 0,1 \
        --checkpoint "$tmp/$p-d2.ck" || fail "$p: --devices 0,1"
    "$worker" ckcompare "$tmp/$p-d2.ck" "$tmp/$p-1.ck" 5e-2 ||
        fail "$p: --devices 0,1 differs from one device"
done

# shellcheck disable=SC2086
"$train" $lstm --devices 0,1 --stop-at 10 --checkpoint "$tmp/half.ck" ||
    fail "lstm: stopping at step 10"
"$train" --resume "$tmp/half.ck" --data "$top/data/kjv.txt" --devices 0,1 \
    --quiet --sample 0 --checkpoint "$tmp/resumed.ck" || fail "lstm: resume"
"$worker" ckcompare "$tmp/resumed.ck" "$tmp/lstm-d2.ck" 0 ||
    fail "lstm: a resumed data-parallel run differs"

# A rank killed mid-run: the job ends, non-zero; the checkpoint loads.
# shellcheck disable=SC2086
timeout 600 mpirun $mpiflags -np 2 "$train" $lstm --steps 100000 \
    --save-every 5 --checkpoint "$tmp/kill.ck" >"$tmp/kill.log" 2>&1 &
job=$!
i=0
while [ ! -e "$tmp/kill.ck" ] && [ $i -lt 3000 ]; do
    sleep 0.2
    i=$((i + 1))
done
# A rank: a clgrad-train process with this checkpoint (from /proc: a
# fresh Debian may lack procps).
victim=
for d in /proc/[0-9]*; do
    case $(cat "$d/comm" 2>/dev/null) in
    *clgrad-train*)
        case $(tr '\0' ' ' <"$d/cmdline" 2>/dev/null) in
        *"--checkpoint $tmp/kill.ck"*) victim=${d#/proc/} ;;
        esac ;;
    esac
done
if [ -n "$victim" ]; then
    kill -9 "$victim"
else
    fail "killed rank: no rank to kill"
fi
wait $job
status=$?
[ $status -ne 0 ] || fail "killed rank: exit status 0"
[ $status -ne 124 ] || fail "killed rank: the job hung"
"$train" --resume "$tmp/kill.ck" --sample-only --sample 20 >/dev/null ||
    fail "killed rank: the last checkpoint does not load"

# Bad configurations.
# shellcheck disable=SC2086
out=$("$train" $mlp --batch 30 --devices 0,1,0,1 2>&1) &&
    fail "batch 30 on 4 replicas: exit status 0"
case $out in
*"does not split evenly over 4 replicas"*) ;;
*) fail "batch 30 on 4 replicas: '$out'" ;;
esac
# The same on every rank (natively only: an mpirun less under ASan).
if [ -z "${CLGRAD_TEST_CHECKER:-}" ]; then
    # shellcheck disable=SC2086
    out=$(timeout 600 mpirun $mpiflags -np 2 "$train" $mlp --batch 31 2>&1) &&
        fail "batch 31 on 2 ranks: exit status 0"
    case $out in
    *"not split evenly over 2 replicas"*"not split evenly over 2 replicas"*) ;;
    *) fail "batch 31 on 2 ranks: not every rank said why: '$out'" ;;
    esac
fi
# shellcheck disable=SC2086
out=$("$train" $mlp --devices 0,1 --bucket-mb 0 2>&1) &&
    fail "--bucket-mb 0: exit status 0"
case $out in
*"--bucket-mb 0: want a number above 0"*) ;;
*) fail "--bucket-mb 0: '$out'" ;;
esac
# shellcheck disable=SC2086
out=$("$train" $mlp --devices 0,9 2>&1) && fail "--devices 0,9: exit 0"
case $out in
*"no OpenCL device matches '9'"*) ;;
*) fail "--devices 0,9: '$out'" ;;
esac
# shellcheck disable=SC2086
out=$(timeout 600 mpirun $mpiflags -np 2 "$train" $mlp --devices 0,1 2>&1) &&
    fail "--devices under mpirun: exit 0"
case $out in
*"--devices and mpirun together"*) ;;
*) fail "--devices under mpirun: '$out'" ;;
esac

[ $fails -eq 0 ]
