#!/bin/sh
# SPDX-License-Identifier: MIT
# oclgrind-test.sh [OCLGRIND-OPTION...] -- PROGRAM [ARG...]
#
# Runs PROGRAM under Oclgrind, the OpenCL device simulator, and fails when
# Oclgrind reports anything (an invalid memory access, a data race, an API
# misuse), even if PROGRAM itself passed: Oclgrind keeps the program's exit
# status, so its reports are the only sign of an error.  It writes a
# kernel's errors to its --log file, but those of --check-api (an OpenCL
# call that returned an error) to the program's output, so both are read.
# Used as the test LOG_COMPILER of `make check-oclgrind`.
set -u

opts=
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    opts="$opts $1"
    shift
done
[ $# -gt 0 ] && shift
if [ $# -eq 0 ]; then
    echo "usage: $0 [OCLGRIND-OPTION...] -- PROGRAM [ARG...]" >&2
    exit 2
fi

log=$(mktemp "${TMPDIR:-/tmp}/oclgrind-log.XXXXXX") || exit 99
out=$(mktemp "${TMPDIR:-/tmp}/oclgrind-out.XXXXXX") || exit 99
trap 'rm -f "$log" "$out"' EXIT
# Under Oclgrind its simulator is the only device, whatever the user picked.
unset CLGRAD_DEVICE
# Exact-size buffers: pool rounding would hide overruns from Oclgrind.
CLGRAD_POOL_EXACT=1
export CLGRAD_POOL_EXACT
# Tests check fewer elements numerically under a slow simulator.
CLGRAD_TEST_CHECKER=oclgrind
export CLGRAD_TEST_CHECKER
# shellcheck disable=SC2086
oclgrind $opts --log "$log" "$@" > "$out" 2>&1
status=$?
cat "$out"
if [ -s "$log" ]; then
    echo "oclgrind-test: Oclgrind reported errors running $1:" >&2
    cat "$log" >&2
    [ "$status" -eq 0 ] && status=1
fi
if grep -q "^Oclgrind - OpenCL runtime error detected" "$out"; then
    echo "oclgrind-test: Oclgrind reported an OpenCL call that failed" \
        "running $1 (above)" >&2
    [ "$status" -eq 0 ] && status=1
fi
exit "$status"
