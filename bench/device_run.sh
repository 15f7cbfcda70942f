#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One call on the H200 (device tool): build, the comparison tests, the GPU benchmark and the
# PyTorch comparison, logs into $OUT, a short summary printed last.
#
#   bash bench/device_run.sh            (OUT=... defaults to ./device-out)
#
# Each step has its own time limit so that one slow step cannot eat the whole 10-minute call.
# Highway and oneDNN are absent on that machine: the build configures without them.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/device-out}
BUILD=${BUILD_DIR:-build-dev}
mkdir -p "$OUT"
start=$(date +%s)
stamp() { echo "[$(( $(date +%s) - start ))s] $*"; }

# COMMIT: pass the commit the working tree was sent from (the device copy carries no .git).
echo "commit: ${COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}" | tee "$OUT/build.log"
nvidia-smi >> "$OUT/build.log" 2>&1
stamp "configure + build"
if ! { cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 &&
       cmake --build "$BUILD" -j16 --target softmax softmax_bench softmax_comparison_tests; } >> "$OUT/build.log" 2>&1; then
  tail -60 "$OUT/build.log"
  echo "device_run.sh: BUILD FAILED"
  exit 1
fi

stamp "comparison tests"
timeout 180 "$BUILD/tests/comparisons/softmax_comparison_tests" > "$OUT/comparison_tests.log" 2>&1
tests_rc=$?

# The three GPU parts run as separate processes: a kernel fault in one (a sticky CUDA error ends
# the process) cannot take the others' numbers with it.
bench_rc=0
: > "$OUT/bench_gpu.txt"
for part in rows ladder dropout_ladder; do
  stamp "softmax_bench --device cuda --gpu-parts $part"
  timeout 240 "$BUILD/bench/softmax_bench" --device cuda --gpu-parts $part --json "$BUILD/bench_$part.json" \
    ${BENCH_ARGS:-} >> "$OUT/bench_gpu.txt" 2>&1 || bench_rc=$?
done
python3 - "$OUT/bench_gpu.json" "$BUILD"/bench_rows.json "$BUILD"/bench_ladder.json "$BUILD"/bench_dropout_ladder.json <<'PY'
import json, os, sys
merged = {"parts": []}
for path in sys.argv[2:]:
    if os.path.exists(path):
        merged["parts"].append(json.load(open(path)))
json.dump(merged, open(sys.argv[1], "w"), indent=1)
PY

torch_rc=skipped
if [[ ${SKIP_TORCH:-0} != 1 ]]; then
  stamp "torch_compare.py"
  PYTHONUNBUFFERED=1 timeout 240 python3 bench/torch_compare.py --lib "$BUILD/libsoftmax.so" \
    --json "$OUT/torch_compare.json" > "$OUT/torch_compare.txt" 2>&1
  torch_rc=$?
fi

stamp "done"
echo "================ summary ================"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests? ran" "$OUT/comparison_tests.log" | head -20
grep -E "^-- |^all checked|FAILED" "$OUT/bench_gpu.txt" | head -60
grep -E "^!!!!" "$OUT/bench_gpu.txt" | head -20
[[ -f $OUT/torch_compare.txt ]] && grep -E "=>|agreement|FAILED|finished|Error|error" "$OUT/torch_compare.txt" | head -40
echo "comparison tests rc=$tests_rc  softmax_bench rc=$bench_rc  torch_compare rc=$torch_rc"
