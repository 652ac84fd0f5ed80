# SPDX-License-Identifier: MIT
# tests/shell_common.sh - what the shell tests share; each sources it,
#     . "${TEST_SRCDIR:-.}/tests/shell_common.sh"
# after setting `name`: top and bld (the source and build trees), tmp (a
# scratch directory removed on exit), fails and fail (count a failure and
# go on), and the device check: no OpenCL device skips the test (77),
# except under CI, where that is a failure.
top=${TEST_SRCDIR:-.}
bld=${TEST_BUILDDIR:-.}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/$name.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
fails=0

fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}

if ! "$bld/tools/clgrad-info" --list 2>/dev/null | grep -q .; then
    echo "no OpenCL device"
    if [ -n "${CI:-}" ]; then exit 1; fi
    exit 77
fi

# expect_error WHAT TEXT ARGS...: "$train" with ARGS must fail and print
# TEXT (taken literally) among its output.
expect_error() {
    what=$1
    text=$2
    shift 2
    out=$("$train" "$@" 2>&1)
    status=$?
    [ $status -ne 0 ] || fail "$what: exit status 0"
    case $out in
    *"$text"*) ;;
    *) fail "$what: '$out' lacks '$text'" ;;
    esac
}
