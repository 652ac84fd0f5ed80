#!/bin/sh
# SPDX-License-Identifier: MIT
# fuzz-run.sh SRCDIR TARGET [LIBFUZZER-FLAG...]
#
# Runs one fuzz target (tests/fuzz/fuzz_NAME) of `make fuzz` from its
# committed corpus SRCDIR/tests/fuzz/corpus/NAME, keeping new inputs and any
# crash input in tests/fuzz/work/NAME/, and prints one line: the number of
# executions and the exit status.  On a finding it prints the log's tail
# and the artifacts, and exits 1.  `make fuzz` runs FUZZ_JOBS of these at
# once (xargs -P): each libFuzzer process uses one core.
set -u
if [ $# -lt 2 ]; then
    echo "usage: $0 SRCDIR TARGET [LIBFUZZER-FLAG...]" >&2
    exit 2
fi
srcdir=$1
target=$2
shift 2
name=${target##*/fuzz_}
work=tests/fuzz/work/$name
rm -rf "$work" && mkdir -p "$work/corpus" || exit 1
"./$target" "$@" -artifact_prefix="$work/" "$work/corpus" \
    "$srcdir/tests/fuzz/corpus/$name" >"$work/log" 2>&1
rc=$?
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log")
if [ "$rc" -eq 0 ]; then
    echo "fuzz $name: ${execs:-?} executions, exit 0"
    exit 0
fi
# One write, so that a parallel target's line does not land inside it.
{
    echo "fuzz $name: ${execs:-?} executions, exit $rc"
    tail -n 60 "$work/log"
    ls "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* \
        2>/dev/null
} >"$work/report"
cat "$work/report"
exit 1
