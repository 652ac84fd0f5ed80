#!/bin/sh
# SPDX-License-Identifier: MIT
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
#   - bad arguments and a corrupt checkpoint give messages, not crashes;
#   - -h and -V; a run given neither --steps nor --epochs is finite;
#   - resuming: a model or data option that differs from the checkpoint
#     fails naming both values, a training option (--lr) takes effect and
#     is reported, a new log file gets its header; --stop-at without
#     --checkpoint is an error;
#   - validation: the character LSTM's validation loss and bits per
#     character, the MLP's epoch mean and held-out loss, the summary,
#     --save-best's file, --plot with gnuplot and without it;
#   - sampling: --temperature 0 is greedy and equals --top-k 1, --seed
#     decides the sample, --sample-only reads a weights-only checkpoint;
#   - --precision bf16 and fp16 train to float32's loss; fp16's loss
#     scaler skips overflowing steps, reports them and recovers.
set -u
name=test_train
. "${TEST_SRCDIR:-.}/tests/shell_common.sh"
train="$bld/tools/clgrad-train"

# Two checkpoints hold the same state: the same bytes but for the run's
# elapsed time, train.elapsed in the safetensors header (8 bytes of
# little-endian length, the JSON header padded with spaces, the data).
same_state() {
    for f in "$1" "$2"; do
        n=$(head -c 8 "$f" | od -An -tu8 | tr -d ' ')
        head -c $((n + 8)) "$f" | tail -c "$n" |
            sed 's/"train.elapsed":"[^"]*",\{0,1\}//; s/ *$//' > "$f.head"
        tail -c +$((n + 9)) "$f" > "$f.data"
    done
    cmp "$1.head" "$2.head" && cmp "$1.data" "$2.data"
}

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
same_state "$tmp/l20.st" "$tmp/l10+10.st" ||
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
same_state "$tmp/m30.st" "$tmp/m13+17.st" ||
    fail "mlp: 13 + 17 steps differ from 30 steps"

# --- exact resume, CNN: the batch norm's running statistics and
# num_batches_tracked travel in the checkpoint
cnn="--model cnn --data $top/data/digits.csv --hidden 4,6 --steps 30
     --quiet --seed 3"
# shellcheck disable=SC2086
"$train" $cnn --checkpoint "$tmp/c30.st" || fail "cnn: 30 steps"
# shellcheck disable=SC2086
"$train" $cnn --stop-at 13 --checkpoint "$tmp/c13.st" || fail "cnn: 13 steps"
"$train" --resume "$tmp/c13.st" --data "$top/data/digits.csv" --steps 30 \
    --quiet --checkpoint "$tmp/c13+17.st" || fail "cnn: resume"
same_state "$tmp/c30.st" "$tmp/c13+17.st" ||
    fail "cnn: 13 + 17 steps differ from 30 steps"
grep -q '"bn1.num_batches_tracked":{"dtype":"I64","shape":\[\]' \
    "$tmp/c30.st.head" || fail "cnn: no I64 bn1.num_batches_tracked"

# --- the CNN's default run reaches 98.5% held-out accuracy on the digits
# (issue 18's target; 99.44% on PoCL, 2 of 359 rows wrong)
out=$("$train" --model cnn --data "$top/data/digits.csv" 2>&1) ||
    fail "cnn: default run: $out"
acc=$(printf '%s\n' "$out" | sed -n 's/^epoch 20: .*accuracy \([0-9.]*\)%.*/\1/p')
case $acc in
'') fail "cnn: no accuracy after epoch 20: '$out'" ;;
*) awk "BEGIN { exit !($acc >= 98.5) }" ||
       fail "cnn: held-out accuracy $acc% < 98.5%" ;;
esac
"$train" --eval-only --resume "$tmp/c30.st" --data "$top/data/digits.csv" |
    grep -q "^evaluation of $tmp/c30.st on .*: loss [0-9.]*, accuracy .*(1797 rows)" ||
    fail "cnn: --eval-only"

# --- mixed precision (the CNN: convolutions run in 16 bits under
# autocast): bf16 and fp16 end near float32's held-out loss; fp16 with an
# initial loss scale far too large overflows, skips those steps (each
# reported with the scale it backs off to), and recovers
mp="--model cnn --data $top/data/digits.csv --hidden 4,6 --epochs 2 --seed 5"
heldout() {
    sed -n 's/^epoch 2: .*held-out loss \([0-9.]*\),.*/\1/p'
}
# shellcheck disable=SC2086
l32=$("$train" $mp | heldout)
for p in bf16 fp16; do
    # shellcheck disable=SC2086
    out=$("$train" $mp --precision $p 2>&1) || fail "$p: $out"
    case $out in
    *"mixed precision $p"*) ;;
    *) fail "$p: the headline does not say mixed precision: $out" ;;
    esac
    l=$(printf '%s\n' "$out" | heldout)
    awk "BEGIN { d = $l - $l32; exit !(d < 0.05 && d > -0.05) }" ||
        fail "$p: held-out loss $l, float32's $l32"
done
# shellcheck disable=SC2086
out=$("$train" $mp --precision fp16 --loss-scale 1e8 --log-every 1 2>&1) ||
    fail "fp16 overflow: $out"
printf '%s\n' "$out" | grep -q "^step 1: fp16 gradients overflowed: 1 step skipped so far, the loss scale is now 5e+07" ||
    fail "fp16 overflow: step 1 not reported: $out"
n=$(printf '%s\n' "$out" | sed -n 's/.*fp16 loss scaling skipped \([0-9]*\) steps.*/\1/p')
l=$(printf '%s\n' "$out" | heldout)
case $n in
''|0) fail "fp16 overflow: no skipped steps in the summary: $out" ;;
*) [ "$n" -lt 20 ] || fail "fp16 overflow: $n steps skipped: no recovery" ;;
esac
l1=$(printf '%s\n' "$out" | sed -n 's/^epoch 1: .*held-out loss \([0-9.]*\),.*/\1/p')
awk "BEGIN { exit !($l < $l1 - 0.05) }" ||
    fail "fp16 overflow: held-out loss $l1 after epoch 1, $l after epoch 2"

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
    --log "$tmp/int.csv" --checkpoint "$tmp/int.st" --save-every 1000000 \
    2> "$tmp/int.err" &
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
grep -q "^clgrad-train: interrupted after step [0-9]*; saved $tmp/int.st" \
    "$tmp/int.err" || fail "Ctrl-C: '$(cat "$tmp/int.err")' names no file"
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
expect_error "no data" "--data FILE is needed" --model mlp
expect_error "bad model" "want mlp, cnn or char-lstm" --model resnet
expect_error "eval-only without a checkpoint" "--eval-only needs --resume" \
    --model cnn --data "$top/data/digits.csv" --eval-only
expect_error "missing file" "nope.csv" --model mlp --data "$tmp/nope.csv"
expect_error "bad number" "--lr x" --model mlp --data x --lr x
head -c 100 "$tmp/l20.st" > "$tmp/cut.st"
expect_error "truncated checkpoint" "cut.st" --resume "$tmp/cut.st" \
    --data "$top/data/kjv.txt"
expect_error "wrong model" "holds a char-lstm model" --model mlp \
    --resume "$tmp/l20.st" --data "$top/data/digits.csv"
expect_error "prime outside the vocabulary" "not in the vocabulary" \
    --sample-only --resume "$tmp/l20.st" --prime "{"

# --- -h, -V, and a run given neither --steps nor --epochs ends
out=$("$train" -V) || fail "-V: exit status $?"
case $out in
"clgrad-train (clgrad) "[0-9]*.[0-9]*.[0-9]*) ;;
*) fail "-V printed '$out'" ;;
esac
out=$("$train" -h) || fail "-h: exit status $?"
case $out in
*"Without --steps or"*"--epochs the character LSTM takes 2000 steps, the MLP"*\
"and the CNN 20"*"epochs"*) ;;
*) fail "-h does not state the default length" ;;
esac
small="--model char-lstm --data $top/data/kjv.txt --layers 1 --hidden 16
       --embed 8 --seq-len 8 --batch 2"
# shellcheck disable=SC2086
out=$("$train" $small --stop-at 2 --checkpoint "$tmp/d.st" --sample 0 2>&1) ||
    fail "default length: $out"
case $out in
*", 2000 steps (resumed"*) fail "default length: resumed? '$out'" ;;
*", 2000 steps, stopping at step 2"*) ;;
*) fail "default length: '$out'" ;;
esac

# --- resuming: model and data options must match, training options
# change and are reported, a new log gets its header
expect_error "resume: --hidden" "--hidden 32 differs from $tmp/l10.st's 24" \
    --resume "$tmp/l10.st" --data "$top/data/kjv.txt" --hidden 32
expect_error "resume: --seq-len" "--seq-len 9 differs from $tmp/l10.st's 16" \
    --resume "$tmp/l10.st" --data "$top/data/kjv.txt" --seq-len 9
expect_error "--stop-at without --checkpoint" "--stop-at needs --checkpoint" \
    --model mlp --data "$top/data/digits.csv" --stop-at 3
out=$("$train" --resume "$tmp/l10.st" --data "$top/data/kjv.txt" --steps 20 \
      --lr 0.01 --sample 0 --log "$tmp/resumed.csv" 2>&1) ||
    fail "resume with --lr: $out"
case $out in
*"resuming with --lr 0.01 ($tmp/l10.st had 0.002)"*"validation loss"*) ;;
*) fail "resume with --lr: '$out'" ;;
esac
[ "$(head -n 1 "$tmp/resumed.csv")" = \
  "step,loss,accuracy,lr,items_per_s,elapsed_s,val_loss" ] ||
    fail "resumed log: no header"
# (cosine from 0.01 over 20 steps, warm-up 3: 0.0046 at step 12; from
# the checkpoint's 0.002 it would be 0.0009)
awk -F, '$1 == 12 && $4 > 0.004 && $4 < 0.005 { ok = 1 } END { exit !ok }' \
    "$tmp/resumed.csv" || fail "resumed log: step 12 not at lr 0.0046"

# --- validation and the summary: character LSTM, --save-best, --plot
# shellcheck disable=SC2086
out=$("$train" $small --steps 6 --eval-every 3 --sample 0 \
      --checkpoint "$tmp/v.st" --save-best 2>&1) || fail "validation: $out"
case $out in
*"step 3: validation loss "*" bits per character)"*"step 6: validation"*\
"summary: steps 0 to 6"*"best "*"checkpoint $tmp/v.st, best $tmp/v.best.st"*) ;;
*) fail "validation: '$out'" ;;
esac
[ -s "$tmp/v.best.st" ] || fail "--save-best: no $tmp/v.best.st"
out=$("$train" --model mlp --data "$top/data/digits.csv" --hidden 16 \
      --epochs 1 2>&1) || fail "mlp validation: $out"
case $out in
*"epoch 1: loss "*"(the epoch's mean), held-out loss "*"summary"*) ;;
*) fail "mlp validation: '$out'" ;;
esac
mkdir "$tmp/bin"
for c in sh sed cat ls dirname; do
    p=$(command -v $c) && ln -s "$p" "$tmp/bin/$c"
done
# shellcheck disable=SC2086
out=$(PATH="$tmp/bin" "$train" $small --steps 4 --sample 0 --quiet \
      --plot "$tmp/none.svg" 2>&1) || fail "--plot without gnuplot: $out"
case $out in
*"gnuplot is not installed (on Debian: apt-get install gnuplot-nox)"*) ;;
*) fail "--plot without gnuplot: '$out'" ;;
esac
if command -v gnuplot >/dev/null; then
    # shellcheck disable=SC2086
    "$train" $small --steps 4 --eval-every 2 --sample 0 --quiet \
        --plot "$tmp/loss.svg" || fail "--plot: exit status $?"
    grep -q "<svg" "$tmp/loss.svg" 2>/dev/null || fail "--plot: no SVG"
else
    echo "gnuplot is not installed: --plot's drawing not checked"
fi

# --- the progress bar on a terminal (script(1) gives one): every redraw
# fits the width, the last shows the last step
if command -v script >/dev/null; then
    # shellcheck disable=SC2086
    cmd=$(echo "$train" $small --steps 30 --sample 0)  # one line
    for cols in 80 40; do
        COLUMNS=$cols script -qec "$cmd" /dev/null > "$tmp/tty.out" 2>&1 ||
            fail "tty $cols: status $? ($(cat "$tmp/tty.out"))"
        tr '\r' '\n' < "$tmp/tty.out" | grep "ETA" > "$tmp/bar" ||
            fail "tty $cols: no progress bar"
        awk -v w=$cols 'length($0) >= w { bad = 1 } END { exit bad }' \
            "$tmp/bar" || fail "tty $cols: wider than $cols columns"
        tail -n 1 "$tmp/bar" | grep -q "30/30 loss " ||
            fail "tty $cols: the last redraw is not step 30"
    done
else
    echo "script(1) is not installed: the progress bar not checked"
fi

# --- sampling: greedy, top-k, the seed
smp() {
    "$train" --sample-only --resume "$tmp/l20.st" --sample 60 --prime "And " \
        "$@" 2>&1
}
g1=$(smp --temperature 0 --seed 1) || fail "greedy: $g1"
g2=$(smp --temperature 0 --seed 2)
[ "$g1" = "$g2" ] || fail "greedy: '$g1' then '$g2'"
k1=$(smp --temperature 1 --top-k 1 --seed 3)
[ "$g1" = "$k1" ] || fail "--top-k 1: '$k1', greedy '$g1'"
s1=$(smp --temperature 1 --seed 5)
s2=$(smp --temperature 1 --seed 5)
s3=$(smp --temperature 1 --seed 6)
[ "$s1" = "$s2" ] || fail "--seed 5 twice: '$s1' then '$s2'"
[ "$s1" != "$s3" ] || fail "--seed 5 and 6 gave the same sample"
k3=$(smp --temperature 1 --top-k 3 --seed 5) || fail "--top-k 3: $k3"

# --- a weights-only checkpoint (as a PyTorch export writes it): the
# model's tensors and data.vocab, nothing else
if command -v perl >/dev/null; then
    perl - "$tmp/l20.st" "$tmp/w.st" <<'PL' || fail "weights-only: perl"
use strict;
use JSON::PP;
my ($in, $out) = @ARGV;
open(my $f, '<:raw', $in) or die "$in: $!";
my $src = do { local $/; <$f> };
my $n = unpack('Q<', substr($src, 0, 8));
my $head = decode_json(substr($src, 8, $n));
my $data = substr($src, 8 + $n);
my $vocab = $head->{__metadata__}{'data.vocab'};
my %o = (__metadata__ => { 'data.vocab' => $vocab });
my $blob = '';
for my $k (sort keys %$head) {
    next unless $k =~ /^(embed|lstm|head)\./;
    my ($b, $e) = @{ $head->{$k}{data_offsets} };
    $o{$k} = { %{ $head->{$k} },
               data_offsets => [length($blob), length($blob) + $e - $b] };
    $blob .= substr($data, $b, $e - $b);
}
my $h = JSON::PP->new->canonical->encode(\%o);
$h .= ' ' x (-length($h) % 8);
open(my $g, '>:raw', $out) or die "$out: $!";
print $g pack('Q<', length($h)), $h, $blob;
PL
    w=$("$train" --sample-only --resume "$tmp/w.st" --sample 60 \
        --prime "And " --temperature 0 2>&1) || fail "weights-only: $w"
    [ "$w" = "$g1" ] || fail "weights-only: '$w', the checkpoint's '$g1'"
    expect_error "weights-only training" "use it with --sample-only" \
        --resume "$tmp/w.st" --data "$top/data/kjv.txt"
else
    echo "perl is not installed: the weights-only checkpoint not checked"
fi

[ $fails -eq 0 ] || exit 1
echo "all clgrad-train checks passed"
