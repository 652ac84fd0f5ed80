#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/test_bench.sh - clgrad-bench end to end, at --quick sizes.  It
# proves the tool works, never how fast anything is: no timing threshold.
#   - --quick --json: valid JSON in which every suite that ran reports, in
#     every row, a field whose name contains "ratio" with a positive
#     median, min and max; the device's FMA peak and copy bandwidth and
#     OpenBLAS's core and threads are there; where PyTorch can be
#     imported (always in CI) no suite is skipped;
#   - built without OpenBLAS (configure says so, and make check passes
#     CLGRAD_TEST_OPENBLAS=no), no OpenBLAS configuration and the gemm
#     suite skipped with a message that says why;
#   - without PyTorch (CLGRAD_BENCH_PYTHON=/nonexistent) the PyTorch
#     suites are skipped with a message and the run still succeeds;
#   - the human table, --suite, --csv (the scaling CSV), bad arguments;
#   - a warning of the library (a corrupt tuning file) shown once.
set -u
name=test_bench
. "${TEST_SRCDIR:-.}/tests/shell_common.sh"
bench="$bld/tools/clgrad-bench"
# Any python3 reads the JSON; the PyTorch side runs where clgrad-bench
# runs it: $CLGRAD_BENCH_PYTHON, else /usr/bin/python3.
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3) || {
    echo "python3 is needed to read the JSON"
    exit 77
}
torch_py=${CLGRAD_BENCH_PYTHON:-/usr/bin/python3}

# check_json FILE SUITES TORCH: every suite in SUITES is there; those that
# ran have positive ratios in every row; TORCH=yes: none may be skipped,
# TORCH=no: the PyTorch suites must be skipped; the gemm suite must be
# skipped if and only if clgrad-bench has no OpenBLAS.
check_json() {
    "$py" - "$@" "${CLGRAD_TEST_OPENBLAS:-yes}" <<'EOF'
import json, sys
path, suites, torch = sys.argv[1], sys.argv[2].split(","), sys.argv[3]
openblas = sys.argv[4] != "no"
doc = json.load(open(path))
bad = []
dev = doc.get("device", {})
for k in ("fp32_fma_peak_gflops", "copy_gbps", "fp32_fma_peak_end_gflops"):
    if not dev.get(k, 0) > 0:
        bad.append("device.%s missing or not positive" % k)
# measured at the start, before every suite after the first, and at the end
if dev.get("fp32_fma_peak_measurements") != len(suites) + 1:
    bad.append("fp32_fma_peak_measurements %r for %d suites" %
               (dev.get("fp32_fma_peak_measurements"), len(suites)))
if not dev.get("fp32_fma_peak_max_gflops", 0) >= max(
        dev.get("fp32_fma_peak_gflops", 0),
        dev.get("fp32_fma_peak_end_gflops", 0)):
    bad.append("fp32_fma_peak_max_gflops below a measurement: %r" % dev)
ob = doc.get("openblas", {})
if openblas and (not ob.get("core") or not ob.get("threads", 0) >= 1):
    bad.append("openblas core/threads missing: %r" % ob)
if not openblas and "openblas" in doc:
    bad.append("openblas configuration without OpenBLAS: %r" % ob)
for name in suites:
    s = doc.get("suites", {}).get(name)
    if s is None:
        bad.append("%s: missing" % name)
        continue
    if name == "gemm" and not openblas:
        if "without OpenBLAS" not in s.get("skipped", ""):
            bad.append("gemm: not skipped without OpenBLAS: %r" % s)
        continue
    if "skipped" in s:
        if torch == "yes" or name in ("gemm", "bandwidth"):
            bad.append("%s: skipped: %s" % (name, s["skipped"]))
        elif not s["skipped"]:
            bad.append("%s: skipped with no message" % name)
        continue
    if torch == "no" and name not in ("gemm", "bandwidth"):
        bad.append("%s: ran without PyTorch" % name)
    # the highest FMA peak measured before the suite
    peak = s.get("fp32_fma_peak_gflops", 0)
    if not dev.get("fp32_fma_peak_gflops", 0) <= peak <= \
            dev.get("fp32_fma_peak_max_gflops", 0):
        bad.append("%s: fp32_fma_peak_gflops %r outside the device's %r" %
                   (name, peak, dev))
    rows = s.get("rows") or []
    if not rows:
        bad.append("%s: no rows (%r)" % (name, s))
    if name == "gemm":
        cases = {}
        for r in rows:
            c, _, v = r.get("case", "").rpartition(" ")
            cases.setdefault(c, set()).add(v)
            pps = r.get("products_per_sample")
            if not (isinstance(pps, int) and 1 <= pps <= 256):
                bad.append("gemm/%s: products_per_sample %r" %
                           (r.get("case"), pps))
            if not r.get("max_rel_err", 1) < 1e-4:
                bad.append("gemm/%s: max_rel_err %r" % (r.get("case"),
                                                        r.get("max_rel_err")))
        for c, v in cases.items():
            if v != {"auto", "clgrad", "packed", "clblast"}:
                bad.append("gemm/%s: variants %r" % (c, sorted(v)))
    for r in rows:
        if name in ("gemm", "mlp", "lstm", "conv"):
            for k in ("clgrad_gflops", "peak_fraction") + \
                     (() if name == "gemm" else
                      ("gflop",) if name == "conv" else ("gflop_per_step",)):
                if not (isinstance(r.get(k), (int, float)) and r[k] > 0):
                    bad.append("%s/%s: %s = %r" % (name, r.get("case"), k,
                                                   r.get(k)))
            if peak > 0 and r.get("peak_fraction", 0) > 0 and \
                    abs(r["peak_fraction"] * peak / r["clgrad_gflops"] -
                        1) > 1e-6:
                bad.append("%s/%s: peak_fraction %r not clgrad_gflops "
                           "%r over the suite's peak %r" %
                           (name, r.get("case"), r["peak_fraction"],
                            r["clgrad_gflops"], peak))
        # the step's products timed on OpenBLAS, fp32 rows only; the
        # fraction is gflop_per_step over that time and the suite's peak
        if name in ("mlp", "lstm"):
            fp32 = r.get("precision") == "fp32"
            ms, frac = r.get("openblas_products_ms"), \
                r.get("openblas_peak_fraction")
            if not (openblas and fp32):
                if ms is not None or frac is not None:
                    bad.append("%s/%s: openblas_products_ms %r" %
                               (name, r.get("case"), ms))
            elif not (isinstance(ms, (int, float)) and ms > 0 and
                      isinstance(frac, (int, float)) and frac > 0 and
                      abs(frac * peak * ms * 1e-3 / r["gflop_per_step"] -
                          1) < 1e-6):
                bad.append("%s/%s: openblas_products_ms %r, "
                           "openblas_peak_fraction %r, peak %r" %
                           (name, r.get("case"), ms, frac, peak))
        keys = [k for k in r if "ratio" in k]
        if not keys:
            bad.append("%s/%s: no ratio field" % (name, r.get("case")))
        for k in keys:
            v = r[k]
            for f in ("median", "min", "max"):
                x = v.get(f) if isinstance(v, dict) else None
                if not isinstance(x, (int, float)) or not x > 0:
                    bad.append("%s/%s: %s.%s = %r" % (name, r.get("case"),
                                                      k, f, x))
for b in bad:
    print("FAIL: " + b)
sys.exit(1 if bad else 0)
EOF
}

all=gemm,bandwidth,mlp,lstm,scaling,conv,fft
if "$torch_py" -c 'import torch' 2>/dev/null; then
    torch=yes
elif [ -n "${CI:-}" ]; then
    fail "$torch_py cannot import torch in CI (install python3-torch)"
    torch=no
else
    echo "note: $torch_py cannot import torch: the PyTorch suites must skip"
    torch=no
fi

# --- everything, quick, JSON
"$bench" --quick --json --csv "$tmp/csv" > "$tmp/all.json" 2> "$tmp/all.err" ||
    fail "--quick --json: exit status $? ($(cat "$tmp/all.err"))"
check_json "$tmp/all.json" "$all" "$torch" ||
    fail "--quick --json: bad results"
if [ $torch = yes ]; then
    [ "$(head -1 "$tmp/csv/scaling.csv" 2>/dev/null | cut -c1-4)" = "T,B," ] ||
        fail "--csv: no scaling.csv"
    [ "$(wc -l < "$tmp/csv/scaling.csv")" -eq 5 ] ||
        fail "--csv: scaling.csv should have a header and 4 rows"
fi

# --- without PyTorch: skipped with a message, exit 0
CLGRAD_BENCH_PYTHON=/nonexistent "$bench" --quick --json --suite mlp \
    --suite lstm --suite scaling --suite conv --suite fft --repeat 1 \
    > "$tmp/nopy.json" ||
    fail "no PyTorch: exit status $?"
check_json "$tmp/nopy.json" mlp,lstm,scaling,conv,fft no ||
    fail "no PyTorch: bad results"
grep -q '"skipped": *".*nonexistent' "$tmp/nopy.json" ||
    fail "no PyTorch: the message does not name the python"

# --- --profile: phases and the kernels with the most device time
if [ $torch = yes ]; then
    "$bench" --quick --suite lstm --repeat 1 --profile > "$tmp/prof.txt" ||
        fail "--profile: exit status $?"
    grep -q "kernels_ms_per_step: .*lstm_fwd" "$tmp/prof.txt" ||
        fail "--profile: no per-kernel times ($(cat "$tmp/prof.txt"))"
    grep -q "profile_phases_ms: forward" "$tmp/prof.txt" ||
        fail "--profile: no phase times"
fi

# --- --precision on the mlp suite, fp32 not first: each bf16 row has
# the rounds' speedup_vs_fp32 with its min and max, the fp32 row none
if [ $torch = yes ]; then
    "$bench" --quick --json --suite mlp --precision bf16,fp32 --repeat 3 \
        > "$tmp/rounds.json" || fail "--precision rounds: exit status $?"
    "$py" - "$tmp/rounds.json" <<'EOF2' || fail "--precision rounds: rows"
import json, sys
rows = json.load(open(sys.argv[1]))["suites"]["mlp"]["rows"]
bad = []
if [r.get("precision") for r in rows] != ["bf16", "fp32"]:
    bad.append("precisions %r" % [r.get("precision") for r in rows])
for r in rows:
    v = [r.get("speedup_vs_fp32" + k) for k in ("_min", "", "_max")]
    if r.get("precision") == "fp32":
        if v != [None] * 3:
            bad.append("%s: %r" % (r["case"], v))
    elif not (all(isinstance(x, (int, float)) for x in v) and
              0 < v[0] <= v[1] <= v[2]):
        bad.append("%s: speedup_vs_fp32 min, median, max %r" % (r["case"],
                                                                v))
for b in bad:
    print("FAIL: " + b)
sys.exit(1 if bad else 0)
EOF2
fi

# --- --precision: a row per precision of the conv suite's CNN step,
# layers and conv1d cases, fp32 not first, each 16-bit one with the
# rounds' speed relative to fp32's (min <= median <= max), the CNN's with
# its peak memory
if [ $torch = yes ]; then
    "$bench" --quick --json --suite conv --precision bf16,fp32 --repeat 2 \
        > "$tmp/prec.json" || fail "--precision: exit status $?"
    "$py" - "$tmp/prec.json" <<'EOF2' || fail "--precision: bad rows"
import json, sys
rows = json.load(open(sys.argv[1]))["suites"]["conv"]["rows"]
bad = []
for p in ("fp32", "bf16"):
    got = [r for r in rows if r.get("precision") == p]
    if len(got) != len(rows) // 2:
        bad.append("%d %s rows of %d" % (len(got), p, len(rows)))
    for r in got:
        if not r["case"].endswith(" " + p):
            bad.append("%s: not named %s" % (r["case"], p))
        v = [r.get("speedup_vs_fp32" + k) for k in ("_min", "", "_max")]
        if p == "fp32" and v != [None] * 3:
            bad.append("%s: %r" % (r["case"], v))
        if p == "bf16" and not (
                all(isinstance(x, (int, float)) for x in v) and
                0 < v[0] <= v[1] <= v[2]):
            bad.append("%s: speedup_vs_fp32 min, median, max %r" %
                       (r["case"], v))
        if r["case"].startswith("cnn") and \
                not r.get("peak_device_bytes", 0) > 0:
            bad.append("%s: no peak_device_bytes" % r["case"])
for b in bad:
    print("FAIL: " + b)
sys.exit(1 if bad else 0)
EOF2
fi

# --- the table, one suite
"$bench" --quick --suite bandwidth --repeat 1 > "$tmp/table.txt" ||
    fail "table: exit status $?"
grep -q "^bandwidth" "$tmp/table.txt" || fail "table: no bandwidth suite"
grep -q "copy bandwidth" "$tmp/table.txt" || fail "table: no copy bandwidth"
grep -q "^gemm" "$tmp/table.txt" && fail "--suite bandwidth ran gemm"

# --- what the library logs is shown once, though every case's context
# reads the tuning files again (the gemm suite makes a context per row)
if [ "${CLGRAD_TEST_OPENBLAS:-yes}" != no ]; then
    mkdir "$tmp/tuning" && printf '{"format": "clgrad-tuning", "ver' \
        > "$tmp/tuning/corrupt.json"
    CLGRAD_TUNING_DIR="$tmp/tuning" "$bench" --quick --suite gemm \
        --repeat 1 > /dev/null 2> "$tmp/log.err" ||
        fail "corrupt tuning file: exit status $?"
    n=$(grep -c "^clgrad-bench: warning: tuning: .*corrupt.json ignored" \
        "$tmp/log.err")
    [ "$n" -eq 1 ] ||
        fail "corrupt tuning file: $n warnings, not 1 ($(cat "$tmp/log.err"))"
fi

# --- bad arguments: exit status 2 and a message
for args in "--suite nope" "--repeat 0" "--threads x" "extra"; do
    # shellcheck disable=SC2086
    out=$("$bench" $args 2>&1)
    status=$?
    [ $status -eq 2 ] ||
        fail "'$args': exit status $status, not 2 ($out)"
    case $out in
    *clgrad-bench:*) ;;
    *) fail "'$args': no message: $out" ;;
    esac
done
"$bench" --help | grep -q -- "--quick" || fail "--help"
"$bench" --version | grep -q "clgrad" || fail "--version"

[ $fails -eq 0 ] || exit 1
echo "all clgrad-bench checks passed"
