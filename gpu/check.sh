#!/bin/bash
# gpu/check.sh - the whole GPU check in one go, from the checkout root on
# the GPU machine, after gpu/prepare.sh filled .gpu/ elsewhere: builds the
# `make dist` tarball against the unpacked packages, then clgrad-info,
# make check, clgrad-bench against PyTorch on CUDA and clgrad-tune, each
# under a time limit.  Results go to $OUT (default gpu-out/): log.txt (all
# of it), check.txt, failed.txt (the failed tests' logs), bench.txt,
# tune-fft.json, tune.json and tune-conv.json (clgrad-tune's reports),
# tuning/ (the database it wrote) and profile.txt (the LSTM suite's
# per-kernel profile on that database).
# CG_GPU_STEPS picks steps (default "info check bench tune profile");
# CG_GPU_CHECK_S, CG_GPU_BENCH_S, CG_GPU_TUNE_S and CG_GPU_PROFILE_S are
# their time limits, CG_GPU_TUNE_ARGS replaces clgrad-tune's arguments.
set -u
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
exec > >(tee -a "$out/log.txt") 2>&1
t0=$(date +%s)
step() { echo "=== $(date -u +%T) +$(( $(date +%s) - t0 ))s: $*"; }
steps=${CG_GPU_STEPS:-info check bench tune profile}
jobs=$(nproc)

step "machine"
uname -a; nproc; free -g | head -2
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
gcc --version | head -n1; make --version | head -n1; ldd --version | head -n1
py=$(command -v python3)
"$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available())' 2>&1

step "setup"
. gpu/setup.sh || exit 1

step "build"
b=/tmp/cg-gpu-build
rm -rf "$b"; mkdir -p "$b"
tar xzf .gpu/clgrad-*.tar.gz -C "$b" || exit 1
cd "$b"/clgrad-*/ || exit 1
if ! ./configure PYTHON="$py" --without-mpi > "$b/configure.txt" 2>&1; then
    tail -n 30 "$b/configure.txt"; tail -n 60 config.log; exit 1
fi
grep -E "^configure: WARNING" "$b/configure.txt"
if ! make -j"$jobs" > "$b/make.txt" 2>&1; then
    grep -E "error|Error" "$b/make.txt" | head -n 40; exit 1
fi
export CLGRAD_CACHE_DIR=$b/cache
export CLGRAD_TEST_PYTHON=$py CLGRAD_BENCH_PYTHON=$py

case " $steps " in *" info "*)
    step "clgrad-info"
    timeout 60 tools/clgrad-info; echo "clgrad-info: exit $?";;
esac

case " $steps " in *" check "*)
    step "make check"
    timeout "${CG_GPU_CHECK_S:-250}" make -j"$jobs" check > "$out/check.txt" 2>&1
    echo "make check: exit $?"
    pkill -9 -f 'tests/(\.libs/)?(lt-)?test_' 2>/dev/null
    grep -E "^(FAIL|ERROR|XPASS|SKIP):|^# [A-Z]+:" "$out/check.txt"
    for t in tests/*.trs; do
        grep -qE "^:test-result: (FAIL|ERROR)" "$t" || continue
        echo "---- ${t%.trs}.log"; tail -c 6000 "${t%.trs}.log"
    done > "$out/failed.txt" 2>&1
    # when each program finished, and those that never did (timeout)
    ls -l --time-style=+%T tests/*.trs tests/fuzz/*.trs 2>/dev/null |
        awk '{ print $6, $7 }' | sort | tr '\n' ' '; echo
    for l in tests/*.log; do [ -f "${l%.log}.trs" ] || echo "unfinished: $l"; done
    ls tests/*.log 2>/dev/null | grep -q . || echo "no test logs"
    ;;
esac

case " $steps " in *" bench "*)
    step "clgrad-bench"
    timeout "${CG_GPU_BENCH_S:-110}" tools/clgrad-bench -s gemm -s mlp -s lstm \
        -t "$jobs" -T cuda -r 5 -P fp32,bf16,fp16 > "$out/bench.txt" 2>&1
    echo "clgrad-bench: exit $?"; cat "$out/bench.txt";;
esac

case " $steps " in *" tune "*)
    step "clgrad-tune"
    if [ -n "${CG_GPU_TUNE_ARGS:-}" ]; then
        # shellcheck disable=SC2086
        CLGRAD_TUNING_DIR=$out/tuning timeout "${CG_GPU_TUNE_S:-95}" \
            tools/clgrad-tune $CG_GPU_TUNE_ARGS -j > "$out/tune.json"
        echo "clgrad-tune $CG_GPU_TUNE_ARGS: exit $?"
    else
        # fft first, on its own: whether clFFT's real transforms above
        # 2048 and 2-D widths from 1024 are right on this device
        CLGRAD_TUNING_DIR=$out/tuning timeout 40 tools/clgrad-tune -b 20 \
            -k fft -j > "$out/tune-fft.json"
        echo "clgrad-tune -k fft: exit $?"
        CLGRAD_TUNING_DIR=$out/tuning timeout "${CG_GPU_TUNE_S:-95}" \
            tools/clgrad-tune -b "${CG_GPU_TUNE_BUDGET:-75}" \
            -k rnn,gemm,rnn.path,kernels -j > "$out/tune.json"
        echo "clgrad-tune: exit $?"
        # the convolution algorithm per class (and conv1d's FFT
        # threshold), on its own budget: no NVIDIA file has them yet
        CLGRAD_TUNING_DIR=$out/tuning timeout 60 tools/clgrad-tune -b 40 \
            -k conv -j > "$out/tune-conv.json"
        echo "clgrad-tune -k conv: exit $?"
    fi;;
esac
case " $steps " in *" profile "*)
    # the per-kernel profile of the LSTM steps, tuned by the run above
    step "clgrad-bench --profile"
    CLGRAD_TUNING_DIR=$out/tuning timeout "${CG_GPU_PROFILE_S:-50}" \
        tools/clgrad-bench -s lstm -p -t "$jobs" -T cuda -r 3 > "$out/profile.txt" 2>&1
    echo "clgrad-bench --profile: exit $?"; cat "$out/profile.txt";;
esac
step "done"
