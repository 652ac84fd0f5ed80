#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/test_dp_mpi.sh - data parallelism across processes (cg_dp_new_mpi)
# with Open MPI's mpirun: 20 steps of the MLP of tests/dp_model.h with a
# global batch of 32 on 2 ranks equal one process with the whole batch to
# 1e-6 of each parameter's scale, and the in-process transport on 2
# replicas (the two transports agree); 4 ranks (batch 32) and 3 ranks
# (batch 48) likewise; a rank with a wider model makes every rank fail
# with a clear error; a rank killed mid-run ends the job with a non-zero
# status (no hang: `timeout` only guards against one).  Skipped in a build
# without MPI and under valgrind (Open MPI's own noise); ASan runs it.
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
    echo "skipped under valgrind: Open MPI's shared-memory transport is not valgrind-clean"
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

for opt in sgd adam; do
    "$worker" local:1 $opt 20 32 "$tmp/one-$opt" || fail "$opt: one process"
    run 2 $opt 20 32 "$tmp/mpi2-$opt" || fail "$opt: 2 ranks"
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

# A rank killed mid-run: the job ends, non-zero.
run 2 sgd 20 32 "$tmp/killed" --die-at 5 >"$tmp/killed.log" 2>&1
status=$?
[ $status -ne 0 ] || fail "killed rank: exit status 0"
[ $status -ne 124 ] || fail "killed rank: the job hung"
[ -e "$tmp/killed" ] && fail "killed rank: a result was written"

[ $fails -eq 0 ]
