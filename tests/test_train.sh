#!/bin/sh
# tests/test_train.sh - clgrad-train end to end, on small models:
#   - resuming is exact: 20 steps straight and 10 steps, a checkpoint, a
#     new process that loads it and 10 more steps give byte-identical
#     checkpoints (parameters, optimizer state, generator, position), for
#     the character LSTM (dropout, cosine schedule with warm-up, clipping,
#     carried state) and the MLP (across an epoch boundary);
#   - --sample-only generates text from a checkpoint; --profile prints
#     device time per kernel;
#   - Ctrl-C saves a checkpoint and exits cleanly;
#   - a diverging run stops at a non-finite loss naming the step;
#   - a skipped tuning file is a warning on stderr, not a failure;
#   - bad arguments and a corrupt checkpoint give messages, not crashes.
set -u
top=${TEST_SRCDIR:-.}
bld=${TEST_BUILDDIR:-.}
train="$bld/tools/clgrad-train"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_train.XXXXXX") || exit 99
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

# --- exact resume, character LSTM
lstm="--model char-lstm --data $top/data/kjv.txt --layers 2 --hidden 24
      --embed 8 --seq-len 16 --batch 4 --steps 20 --sample 0 --quiet
      --seed 7 --dropout 0.2 --schedule cosine --warmup 3 --clip 1"
# shellcheck disable=SC2086
"$train" $lstm --checkpoint "$tmp/l20.st" || fail "lstm: 20 steps"
# shellcheck disable=SC2086
"$train" $lstm --stop-at 10 --checkpoint "$tmp/l10.st" || fail "lstm: 10 steps"
"$train" --resume "$tmp/l10.st" --data "$top/data/kjv.txt" --steps 20 \
    --sample 0 --quiet --checkpoint "$tmp/l10+10.st" || fail "lstm: resume"
cmp "$tmp/l20.st" "$tmp/l10+10.st" ||
    fail "lstm: 10 + 10 steps differ from 20 steps"
cmp -s "$tmp/l10.st" "$tmp/l20.st" && fail "lstm: training changed nothing"

# --- exact resume, MLP (23 batches per epoch: the resume crosses one)
mlp="--model mlp --data $top/data/digits.csv --hidden 32,16 --steps 30
     --quiet --seed 3"
# shellcheck disable=SC2086
"$train" $mlp --checkpoint "$tmp/m30.st" || fail "mlp: 30 steps"
# shellcheck disable=SC2086
"$train" $mlp --stop-at 13 --checkpoint "$tmp/m13.st" || fail "mlp: 13 steps"
"$train" --resume "$tmp/m13.st" --data "$top/data/digits.csv" --steps 30 \
    --quiet --checkpoint "$tmp/m13+17.st" || fail "mlp: resume"
cmp "$tmp/m30.st" "$tmp/m13+17.st" ||
    fail "mlp: 13 + 17 steps differ from 30 steps"

# --- what the library logs (a skipped tuning file) is on stderr, after
# the program's name, and the run goes on
mkdir "$tmp/tuning" && printf '{"format": "clgrad-tuning", "ver' \
    > "$tmp/tuning/corrupt.json"
# shellcheck disable=SC2086
CLGRAD_TUNING_DIR="$tmp/tuning" "$train" $mlp --steps 1 2> "$tmp/log.err" ||
    fail "corrupt tuning file: exit status $?"
grep -q "^clgrad-train: warning: tuning: .*corrupt.json ignored" \
    "$tmp/log.err" || fail "corrupt tuning file: no warning ($(cat "$tmp/log.err"))"

# --- sampling from a checkpoint
# (the vocabulary comes from the checkpoint: no --data needed)
# (stderr apart: a first run says that it compiles kernels)
out=$("$train" --model char-lstm --sample-only --resume "$tmp/l20.st" \
      --sample 40 --prime "And " 2> "$tmp/sample.err") ||
    fail "sample-only: $out $(cat "$tmp/sample.err")"
case $out in
"And "?????????????????????????????????????*) ;;
*) fail "sample-only printed '$out'" ;;
esac

# --- --profile: device time per kernel, the recurrent kernels among them
out=$("$train" --model char-lstm --data "$top/data/kjv.txt" --layers 1 \
      --hidden 16 --embed 8 --seq-len 8 --batch 2 --steps 3 --sample 0 \
      --quiet --profile 2>&1) || fail "profile: $out"
case $out in
*"device time by kernel"*lstm_fwd*) ;;
*) fail "--profile printed '$out'" ;;
esac

# --- Ctrl-C: a checkpoint, exit 0
"$train" --model char-lstm --data "$top/data/kjv.txt" --layers 1 \
    --hidden 16 --embed 8 --seq-len 8 --batch 2 --steps 1000000 --quiet \
    --log "$tmp/int.csv" --checkpoint "$tmp/int.st" --save-every 1000000 &
pid=$!
i=0
while [ "$(cat "$tmp/int.csv" 2>/dev/null | wc -l)" -lt 4 ] &&
      [ $i -lt 600 ]; do
    sleep 0.1
    i=$((i + 1))
done
kill -INT $pid
wait $pid
status=$?
[ $status -eq 0 ] || fail "Ctrl-C: exit status $status"
[ -s "$tmp/int.st" ] || fail "Ctrl-C: no checkpoint"
"$train" --resume "$tmp/int.st" --data "$top/data/kjv.txt" --sample-only \
    --sample 5 >/dev/null 2>&1 || fail "Ctrl-C: the checkpoint does not load"

# --- divergence: SGD at an absurd learning rate
out=$("$train" --model mlp --data "$top/data/digits.csv" --optimizer sgd \
      --lr 90 --clip 0 --steps 200 --quiet 2>&1)
status=$?
[ $status -ne 0 ] || fail "divergence: exit status 0"
case $out in
*"the loss is"*"stopping"*) ;;
*) fail "divergence: '$out'" ;;
esac

# --- bad input
expect_error() {
    what=$1
    pattern=$2
    shift 2
    out=$("$train" "$@" 2>&1)
    status=$?
    [ $status -ne 0 ] || fail "$what: exit status 0"
    case $out in
    *$pattern*) ;;
    *) fail "$what: '$out' lacks '$pattern'" ;;
    esac
}
expect_error "no data" "--data FILE is needed" --model mlp
expect_error "bad model" "want mlp or char-lstm" --model cnn
expect_error "missing file" "nope.csv" --model mlp --data "$tmp/nope.csv"
expect_error "bad number" "--lr x" --model mlp --data x --lr x
head -c 100 "$tmp/l20.st" > "$tmp/cut.st"
expect_error "truncated checkpoint" "cut.st" --resume "$tmp/cut.st" \
    --data "$top/data/kjv.txt"
expect_error "wrong model" "holds a char-lstm model" --model mlp \
    --resume "$tmp/l20.st" --data "$top/data/digits.csv"
expect_error "prime outside the vocabulary" "not in the vocabulary" \
    --sample-only --resume "$tmp/l20.st" --prime "{"

[ $fails -eq 0 ] || exit 1
echo "all clgrad-train checks passed"
