#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/test_train_safety.sh - clgrad-train refuses what it cannot do
# well before it starts, and never damages a user's file (issue 16):
#   - option values: --lr 0, a fractional --batch, a ninth --hidden width,
#     a trailing comma; every --checkpoint that cannot be written ('', a
#     directory, a missing directory, a read-only directory) fails before
#     the first step, with nothing written;
#   - a checkpoint with a NaN weight, a negative step, an unknown schedule
#     or an out-of-range configuration value is refused, naming the file
#     and the field; a message about a value the checkpoint or the
#     defaults gave does not present it as a command-line option;
#   - a layer over 2^31-1 elements is named; a text without a newline
#     trains and samples with the default --prime;
#   - an environment variable with a bad value is an error naming it;
#   - a checkpoint that is a symbolic link stays one (the file it names is
#     replaced), and a 0600 checkpoint stays 0600;
#   - the summary gives the compile time apart from the throughput.
set -u
name=test_train_safety
. "${TEST_SRCDIR:-.}/tests/shell_common.sh"
train="$bld/tools/clgrad-train"
digits="$top/data/digits.csv"
mlp="--model mlp --data $digits --hidden 8 --quiet"

# --- option values
expect_error "--lr 0" "--lr 0: want a number above 0" --model mlp \
    --data "$digits" --lr 0
expect_error "--batch 2.7" "--batch 2.7: want an integer from 1" \
    --model mlp --data "$digits" --batch 2.7
expect_error "nine widths" "at most 8 widths" --model mlp --data "$digits" \
    --hidden 1,2,3,4,5,6,7,8,9
expect_error "trailing comma" "a width is missing" --model mlp \
    --data "$digits" --hidden 8,
# (no step may run: each would print a progress line and write the file)
expect_error "--checkpoint ''" "--checkpoint '': want a file name" \
    --model mlp --data "$digits" --steps 1 --checkpoint ''
mkdir "$tmp/dir"
# shellcheck disable=SC2086
expect_error "--checkpoint DIR" "--checkpoint $tmp/dir: is a directory" \
    $mlp --steps 1 --checkpoint "$tmp/dir"
# shellcheck disable=SC2086
expect_error "--checkpoint in a missing directory" \
    "the directory $tmp/nope does not exist" $mlp --steps 1 \
    --checkpoint "$tmp/nope/c.st"
[ -e "$tmp/nope" ] && fail "a missing directory was created"
if [ "$(id -u)" != 0 ]; then
    mkdir "$tmp/ro" && chmod 555 "$tmp/ro"
    # shellcheck disable=SC2086
    expect_error "--checkpoint read-only" "cannot create files in $tmp/ro" \
        $mlp --steps 1 --checkpoint "$tmp/ro/c.st"
else
    echo "running as root: the read-only directory not checked"
fi

# --- a checkpoint to edit
# shellcheck disable=SC2086
"$train" $mlp --steps 2 --checkpoint "$tmp/m.st" || fail "mlp: 2 steps"
# edit IN OUT PERL: runs PERL with $m (the metadata) and $d (the tensor
# data) and $h (the header) and writes the checkpoint back.
edit() {
    perl - "$1" "$2" "$3" <<'PL'
use strict;
use JSON::PP;
my ($in, $out, $code) = @ARGV;
open(my $f, '<:raw', $in) or die "$in: $!";
my $src = do { local $/; <$f> };
my $n = unpack('Q<', substr($src, 0, 8));
my $h = decode_json(substr($src, 8, $n));
my $d = substr($src, 8 + $n);
my $m = $h->{__metadata__};
eval $code; die $@ if $@;
my $t = JSON::PP->new->canonical->encode($h);
$t .= ' ' x (-length($t) % 8);
open(my $g, '>:raw', $out) or die "$out: $!";
print $g pack('Q<', length($t)), $t, $d;
PL
}
if command -v perl >/dev/null; then
    resume() {
        expect_error "$1" "$2" --resume "$3" --data "$digits" --steps 4 \
            --quiet
    }
    edit "$tmp/m.st" "$tmp/nan.st" \
        'my $o = $h->{"fc0.weight"}{data_offsets}[0];
         substr($d, $o + 12, 4) = pack("L<", 0x7fc00000);' ||
        fail "edit: nan"
    resume "NaN weight" "$tmp/nan.st: fc0.weight holds nan at element 3" \
        "$tmp/nan.st"
    edit "$tmp/m.st" "$tmp/inf.st" \
        'my $o = $h->{"fc1.bias"}{data_offsets}[0];
         substr($d, $o, 4) = pack("L<", 0xff800000);' || fail "edit: inf"
    resume "Inf weight" "fc1.bias holds -inf at element 0" "$tmp/inf.st"
    edit "$tmp/m.st" "$tmp/step.st" '$m->{"train.step"} = "-5";' ||
        fail "edit: step"
    resume "negative step" "$tmp/step.st" "$tmp/step.st"
    out=$("$train" --resume "$tmp/step.st" --data "$digits" --steps 4 2>&1)
    case $out in
    *"negative"*|*"step -5"*) ;;
    *) fail "negative step: '$out' says nothing of the step" ;;
    esac
    edit "$tmp/m.st" "$tmp/epoch.st" '$m->{"train.epoch"} = "-1";' ||
        fail "edit: epoch"
    expect_error "negative epoch" "$tmp/epoch.st" --resume "$tmp/epoch.st" \
        --data "$digits" --steps 4
    edit "$tmp/m.st" "$tmp/sched.st" '$m->{"config.schedule"} = "warp";' ||
        fail "edit: schedule"
    resume "unknown schedule" \
        "$tmp/sched.st: config.schedule \"warp\" is not constant" \
        "$tmp/sched.st"
    edit "$tmp/m.st" "$tmp/batch.st" '$m->{"config.batch"} = "0";' ||
        fail "edit: batch"
    resume "batch 0" "$tmp/batch.st: config.batch = 0 is out of range" \
        "$tmp/batch.st"
else
    echo "perl is not installed: the edited checkpoints not checked"
fi

# --- sizes, the prime, the names of values not given
expect_error "huge layer" "layer fc1 (1048576 inputs, 1048576 outputs)" \
    --model mlp --data "$digits" --hidden 1048576,1048576 --steps 1
i=0
while [ $i -lt 40 ]; do printf 'abc cab bca '; i=$((i + 1)); done \
    > "$tmp/nonl.txt"
small="--model char-lstm --data $tmp/nonl.txt --layers 1 --hidden 8
       --embed 4 --seq-len 4 --batch 2 --holdout 0"
# shellcheck disable=SC2086
out=$("$train" $small --steps 2 --sample 12 --quiet 2>&1) ||
    fail "text without a newline: $out"
# shellcheck disable=SC2086
expect_error "a given prime outside the text" "'Z' is not in the vocabulary" \
    $small --steps 2 --sample 12 --prime Z
# shellcheck disable=SC2086
expect_error "too short" "too few for one batch of the default --seq-len 100" \
    --model char-lstm --data "$tmp/nonl.txt" --holdout 0 --batch 1000 \
    --steps 1
case $out in
*"default --batch"*) fail "--batch 1000 presented as a default" ;;
esac

# --- environment variables (VAR=VALUE, then what the message says)
for e in "CLGRAD_RNN_GEMM_MIN_H=garbage:want an integer from 0" \
         "CLGRAD_RNN_GEMM_MIN_H=-1:want an integer from 0" \
         "CLGRAD_RNN_PACKED_WHH=2:want an integer from 0 to 1" \
         "CLGRAD_TUNING=yes:want 0 or 1" "CLGRAD_POOL_EXACT=2:want 0 or 1" \
         "CLGRAD_CACHE=off:want 0 or 1" \
         "CLGRAD_NATIVE_FLOAT_WIDTH=0:want an integer from 1 to 64" \
         "CLGRAD_NATIVE_FLOAT_WIDTH=8x:want an integer from 1 to 64"; do
    var=${e%%:*}
    # shellcheck disable=SC2086
    out=$(env "$var" "$train" $mlp --steps 1 2>&1)
    status=$?
    [ $status -ne 0 ] || fail "$var: exit status 0"
    case $out in
    *"environment variable $var: ${e#*:}"*) ;;
    *) fail "$var: '$out'" ;;
    esac
done

# --- a symbolic link stays a link, a 0600 file stays 0600
mkdir "$tmp/real"
cp "$tmp/m.st" "$tmp/real/target.st"
chmod 600 "$tmp/real/target.st"
ln -s real/target.st "$tmp/link.st"
# shellcheck disable=SC2086
"$train" $mlp --steps 3 --checkpoint "$tmp/link.st" ||
    fail "through a link: exit status $?"
[ -L "$tmp/link.st" ] || fail "the checkpoint link became a regular file"
cmp -s "$tmp/real/target.st" "$tmp/m.st" &&
    fail "the link's target was not written"
mode=$(stat -c %a "$tmp/real/target.st")
[ "$mode" = 600 ] || fail "the 0600 checkpoint is now $mode"
ls "$tmp/real" | grep -q tmp && fail "a temporary file was left"

# --- the summary: throughput, and the compile time apart when there was
# one (a cache of its own, so the first run compiles)
# shellcheck disable=SC2086
out=$(CLGRAD_CACHE_DIR="$tmp/cache" "$train" --model mlp --data "$digits" \
      --hidden 8 --epochs 1 2>&1) || fail "summary: $out"
case $out in
*"compiling OpenCL kernels for "*"(once per device; cached in $tmp/cache)"*\
"summary: steps 0 to "*" of it compiling kernels), "*" rows/s"*) ;;
*) fail "summary with compiles: '$out'" ;;
esac
[ "$(printf '%s\n' "$out" | grep -c "compiling OpenCL kernels")" = 1 ] ||
    fail "the compile line was printed more than once"
out=$(CLGRAD_CACHE_DIR="$tmp/cache" "$train" --model mlp --data "$digits" \
      --hidden 8 --epochs 1 2>&1) || fail "summary, cached: $out"
case $out in
*"compiling"*) fail "cached run: '$out' compiles" ;;
*"summary: steps 0 to "*" rows/s"*) ;;
*) fail "summary, cached: '$out'" ;;
esac

[ $fails -eq 0 ] || exit 1
echo "all clgrad-train safety checks passed"
