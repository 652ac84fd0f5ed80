#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/test_torch_export.sh - tools/clgrad_torch.py moves the character
# LSTM between PyTorch and clgrad-train both ways, with the same losses and
# samples on both sides (tests/torch_export.py says what it checks).
# Needs python3 with torch: /usr/bin/python3 (Debian's python3-torch) or
# $CLGRAD_TEST_PYTHON.  Without it the test is skipped (exit 77), except
# under CI, where that is a failure.
set -u
top=${TEST_SRCDIR:-.}
bld=${TEST_BUILDDIR:-.}
python=${CLGRAD_TEST_PYTHON:-/usr/bin/python3}

in_ci() {
    [ -n "${CI:-}" ] && [ "${CI:-}" != false ]
}

if ! "$python" -c 'import torch' >/dev/null 2>&1; then
    if in_ci; then
        echo "FAIL: $python cannot import torch in CI (install python3-torch)"
        exit 1
    fi
    echo "SKIP: $python cannot import torch (apt-get install python3-torch," \
        "or set CLGRAD_TEST_PYTHON)"
    exit 77
fi
if ! "$bld/tools/clgrad-info" --list 2>/dev/null | grep -q .; then
    echo "no OpenCL device"
    if in_ci; then exit 1; fi
    exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_torch_export.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
"$python" "$top/tests/torch_export.py" "$top" "$bld/tools/clgrad-train" "$tmp"
