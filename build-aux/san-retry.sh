#!/bin/sh
# SPDX-License-Identifier: MIT
# san-retry.sh PROGRAM [ARG...] - runs a test of a sanitizer build once
# more when its first run failed only because LeakSanitizer's own tracer
# crashed ("Tracer caught signal 11 ... LeakSanitizer has encountered a
# fatal error"): LLVM 14's LSan stops every thread to scan them at exit,
# and now and then its tracer faults on one of the OpenCL runtime's
# threads, with no report about the program.  Any report (AddressSanitizer,
# UndefinedBehaviorSanitizer, "LeakSanitizer: detected memory leaks") or
# any other failure counts at once; a second tracer crash fails too.
# The LOG_COMPILER of make check in a sanitizer build (Makefile.am).
set -u
log=$(mktemp "${TMPDIR:-/tmp}/san-retry.XXXXXX") || exit 99
trap 'rm -f "$log"' EXIT
"$@" >"$log" 2>&1
status=$?
cat "$log"
[ "$status" -ne 0 ] || exit 0
if grep -q "LeakSanitizer has encountered a fatal error" "$log" &&
   ! grep -qE "ERROR: (AddressSanitizer|LeakSanitizer: detected)|runtime error:" "$log"; then
    echo "san-retry: LeakSanitizer's tracer crashed at exit (no report" \
        "about the program); running it once more"
    "$@"
    exit $?
fi
exit "$status"
