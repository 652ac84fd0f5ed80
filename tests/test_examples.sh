#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/test_examples.sh - the programs under examples/ run and learn:
#   - README's "A first example" shows examples/tutorial.c whole (from
#     its first #include on, indented by 4);
#   - tutorial prints y = 19.6667 and x.grad = [2.0000, 2.6667, 3.3333]
#     and writes the graph (before backward) as DOT with every op;
#   - mlp_digits reaches at least 90% held-out accuracy in 5 epochs (96%
#     on PoCL; the threshold leaves room for another device's rounding);
#   - char_lstm's mean loss over its last 5 steps is below that of its
#     first 5, and it prints its sample.
set -u
name=test_examples
. "${TEST_SRCDIR:-.}/tests/shell_common.sh"
ex="$bld/examples"

# --- README shows the tutorial as it is
sed -n '/^#include <stdio.h>/,$p' "$top/examples/tutorial.c" |
    sed 's/^./    &/' >"$tmp/want"
n=$(wc -l <"$tmp/want")
awk -v n="$n" '/^    #include <stdio.h>$/ { on = 1 } on && n-- > 0 { print }' \
    "$top/README" >"$tmp/readme"
diff -u "$tmp/want" "$tmp/readme" ||
    fail "README's first example differs from examples/tutorial.c"

# --- tutorial
"$ex/tutorial" "$tmp/graph.dot" >"$tmp/tutorial.out" || fail "tutorial ran"
cat "$tmp/tutorial.out"
grep -qx 'y = 19.6667' "$tmp/tutorial.out" || fail "tutorial: y"
grep -qx 'x.grad = \[2.0000, 2.6667, 3.3333\]' "$tmp/tutorial.out" ||
    fail "tutorial: x.grad"
for op in add_scalar pow_scalar mean 'leaf (requires grad)'; do
    grep -qF "$op" "$tmp/graph.dot" || fail "tutorial: $op not in the DOT"
done
grep -q 'graph freed' "$tmp/graph.dot" && fail "tutorial: DOT of a freed graph"

# --- MLP on the digits
"$ex/mlp_digits" "$top/data/digits.csv" 5 >"$tmp/mlp.out" || fail "mlp_digits ran"
cat "$tmp/mlp.out"
acc=$(sed -n 's/^accuracy \([0-9.]*\)%$/\1/p' "$tmp/mlp.out")
awk -v a="${acc:-0}" 'BEGIN { exit !(a >= 90) }' ||
    fail "mlp_digits: accuracy ${acc:-missing}% < 90%"

# --- character LSTM
"$ex/char_lstm" "$top/data/kjv.txt" 40 >"$tmp/lstm.out" || fail "char_lstm ran"
cat "$tmp/lstm.out"
first=$(sed -n 's/^first loss //p' "$tmp/lstm.out")
last=$(sed -n 's/^last loss //p' "$tmp/lstm.out")
awk -v f="${first:-0}" -v l="${last:-0}" 'BEGIN { exit !(l > 0 && l < f) }' ||
    fail "char_lstm: loss did not fall (${first:-?} -> ${last:-?})"
grep -q '^And God said.' "$tmp/lstm.out" || fail "char_lstm: no sample"

test $fails -eq 0 || exit 1
