#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The whole GPU check in one call on the H200 (device tool), under a global deadline:
#   1. build the library, the GPU test suites and the benchmark;
#   2. run the correctness suites alone, then compute-sanitizer's memcheck, racecheck, synccheck
#      and initcheck side by side;
#   3. then, alone on the GPU, the benchmark (rows table, seed ladder, dropout ladder) and the
#      PyTorch comparison, in that order, each cut short by what is left of the deadline.
# At most 8 files come back from $OUT, so the logs are gathered into a few.
#
#   OUT=out DEADLINE_S=560 COMMIT=<sha> bash tests/device_check.sh   (run with timeout_s 600)
# Everything rarely fits one 10-minute call: split it into two calls on the warm machine (the
# build folder survives between them) with SKIP_BENCH=1, then SKIP_TESTS=1. BATCH=10 makes the
# GPU tables (bench/gpu_tables.sh) time calls back to back; TORCH_COMPARE=1 adds
# bench/torch_compare.py.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/device-out}
BUILD=${BUILD_DIR:-build-dev}
mkdir -p "$OUT" "$BUILD/logs"
start=$(date +%s)
deadline=$((start + ${DEADLINE_S:-560}))
left() { echo $((deadline - $(date +%s))); }
stamp() { echo "[$(($(date +%s) - start))s] $*"; }
# cap SECONDS: the smaller of SECONDS and what is left before the deadline (at least 1).
cap() { local l; l=$(left); [ "$l" -lt "$1" ] && echo $((l > 1 ? l : 1)) || echo "$1"; }

{
  echo "commit: ${COMMIT:-unknown}"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  nvcc --version | tail -2
} > "$OUT/summary.txt" 2>&1

# PREBUILT=DIR: binaries built elsewhere (same commit, -DCMAKE_CUDA_ARCHITECTURES=90) laid out
# flat in DIR with libsoftmax.so*: no build on the device, which saves minutes of device time.
# A library built where Highway is installed links libhwy.so.1, which the GPU machine lacks:
# put a copy in DIR too (`readelf -d libsoftmax.so.0 | grep NEEDED` lists what it needs).
if [ -n "${PREBUILT:-}" ]; then
  stamp "prebuilt binaries from $PREBUILT"
  export LD_LIBRARY_PATH=$PREBUILT${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  CUDA_TESTS=$PREBUILT/softmax_cuda_tests COMP_TESTS=$PREBUILT/softmax_comparison_tests
  REL_TESTS=$PREBUILT/softmax_reliability_tests API_TESTS=$PREBUILT/softmax_api_tests
  SEM_TESTS=$PREBUILT/softmax_semantics_tests
  BENCH_BIN=$PREBUILT/softmax_bench LIB=$PREBUILT/libsoftmax.so.0
else
  stamp "configure + build"
  if ! { cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
           -DSOFTMAX_BUILD_BINDINGS_TESTS=OFF &&
         timeout "$(cap 240)" cmake --build "$BUILD" -j16 --target softmax softmax_api_tests \
           softmax_cuda_tests softmax_comparison_tests softmax_reliability_tests softmax_semantics_tests \
           softmax_bench; } \
         > "$OUT/build.log" 2>&1; then
    grep -E "error|Error" -A3 "$OUT/build.log" | head -60
    echo "device_check.sh: BUILD FAILED"
    exit 1
  fi
  T=$BUILD/tests
  CUDA_TESTS=$T/cuda/softmax_cuda_tests COMP_TESTS=$T/comparisons/softmax_comparison_tests
  REL_TESTS=$T/reliability/softmax_reliability_tests API_TESTS=$T/api/softmax_api_tests
  SEM_TESTS=$T/semantics/softmax_semantics_tests
  BENCH_BIN=$BUILD/bench/softmax_bench LIB=$BUILD/libsoftmax.so
fi
readelf -d "$LIB" | grep -E "NEEDED|SONAME" >> "$OUT/summary.txt"

L=$BUILD/logs
# Line-buffered output: a step cut off by its timeout still leaves every line it printed.
lb() { stdbuf -oL -eL "$@"; }
# The correctness suites first and alone: in the last session they shared the GPU and the host's
# cores with four compute-sanitizer processes and every one of them ran out of time.
if [ "${SKIP_TESTS:-0}" != 1 ]; then
stamp "correctness suites"
# Graph capture first, in a process of its own: the library's one-time setup (its workspace pool,
# kernel attributes) then happens inside the capture, as in a program whose first call is captured;
# later in the whole suite, earlier tests have done it already.
lb timeout "$(cap 60)" "$CUDA_TESTS" --gtest_filter='CudaRuntime.GraphCaptureAndReplay' > "$L/capture_first.log" 2>&1
echo "rc=$?" >> "$L/capture_first.log"
# The whole suite under the default table, beside the forced runs below: alone it needed more
# than 180 s of a 560 s deadline on the H200, and the forced runs take as long side by side.
( lb timeout "$(cap 300)" "$CUDA_TESTS" > "$L/cuda_tests.log" 2>&1; echo "rc=$?" >> "$L/cuda_tests.log" ) &
# The ctest entries cuda.forced_* (tests/cuda/CMakeLists.txt): each row strategy forced, and
# the plan of GPUs without thread-block clusters (SOFTMAX_CUDA_MAX_CLUSTER=1).
FORCED_FILTER='CudaRowsStrategies.*:CudaRowsInPlace.*:CudaRowsNonFinite.*:AllShapes/*:CudaDropout.MaskMatchesCpuBitForBit:CudaDropout.EveryOffsetPhase:CudaBackward.*:CudaDropoutBackward.*:CudaSharded.*:CudaTypes.*'
# The forced runs are independent processes: side by side on the GPU, where five at once take up
# to four minutes each.
for strategy in segment block cluster split; do
  ( SOFTMAX_CUDA_STRATEGY=$strategy lb timeout "$(cap 270)" "$CUDA_TESTS" --gtest_filter="$FORCED_FILTER" \
      > "$L/forced_$strategy.log" 2>&1; echo "rc=$?" >> "$L/forced_$strategy.log" ) &
done
( SOFTMAX_CUDA_MAX_CLUSTER=1 lb timeout "$(cap 270)" "$CUDA_TESTS" --gtest_filter="$FORCED_FILTER" \
    > "$L/forced_no_clusters.log" 2>&1
  echo "rc=$?" >> "$L/forced_no_clusters.log" ) &
# The ctest entry cuda.segment_one_wave: segment grids of one wave, every segment kernel looping.
( SOFTMAX_CUDA_STRATEGY=segment SOFTMAX_CUDA_SEGMENT_WAVES=1 lb timeout "$(cap 270)" "$CUDA_TESTS" \
    --gtest_filter="$FORCED_FILTER" > "$L/segment_one_wave.log" 2>&1
  echo "rc=$?" >> "$L/segment_one_wave.log" ) &
# The ctest entries cuda.forced_split_waves and cuda.forced_split_resident: split rows in waves
# only, and through the resident split only (one tile per part).
SPLIT_FILTER='CudaRowsStrategies.*:CudaRowsInPlace.*:CudaRowsNonFinite.*:AllShapes/*:CudaDropout.MaskMatchesCpuBitForBit:CudaDropout.EveryOffsetPhase'
( SOFTMAX_CUDA_STRATEGY=split SOFTMAX_CUDA_RESIDENT_SPLIT=0 lb timeout "$(cap 270)" "$CUDA_TESTS" \
    --gtest_filter="$SPLIT_FILTER:CudaBackward.*:CudaRowsSplit.*:CudaRowsSingleLongRow.*" > "$L/forced_split_waves.log" 2>&1
  echo "rc=$?" >> "$L/forced_split_waves.log" ) &
( SOFTMAX_CUDA_STRATEGY=split SOFTMAX_CUDA_RESIDENT_SPLIT=1 lb timeout "$(cap 270)" "$CUDA_TESTS" \
    --gtest_filter="$SPLIT_FILTER:CudaBackward.*-CudaBackward.SplitRowsInRounds:CudaBackward.CopiedTilesGiveTheBitsOfLoadedOnes" > "$L/forced_split_resident.log" 2>&1
  echo "rc=$?" >> "$L/forced_split_resident.log" ) &
# The ctest entry cuda.split_pieces: every split call in waves, normalised in pieces of three tiles.
( SOFTMAX_CUDA_STRATEGY=split SOFTMAX_CUDA_RESIDENT_SPLIT=0 SOFTMAX_CUDA_SPLIT_PIECE_TILES=3 lb timeout "$(cap 270)" \
    "$CUDA_TESTS" --gtest_filter="$FORCED_FILTER:CudaRowsSplit.*:CudaRowsSingleLongRow.*:CudaDropout.Split*" \
    > "$L/split_pieces.log" 2>&1
  echo "rc=$?" >> "$L/split_pieces.log" ) &
# The ctest entry cuda.split_waves_overlapped: split rows in waves of few blocks, whose launches
# overlap through calls of several waves.
( SOFTMAX_CUDA_RESIDENT_SPLIT=0 SOFTMAX_CUDA_SPLIT_MIN_TILES=1024 lb timeout "$(cap 270)" "$CUDA_TESTS" \
    --gtest_filter='CudaRowsSplit.*:CudaRowsSingleLongRow.*:CudaBackward.*:CudaDropout.Split*:CudaDropoutBackward.*' \
    > "$L/split_waves_overlapped.log" 2>&1
  echo "rc=$?" >> "$L/split_waves_overlapped.log" ) &
wait
# The ctest entries cuda.unstaged_rows (segment kernels without their shared-memory stages) and
# cuda.staged_every_width (every segment width's rows staged, aligned or not), one after the
# other beside the short suites below: beside the forced runs above, they pushed those past
# their deadline.
( for v in unstaged_rows:SOFTMAX_CUDA_STAGED_ROWS=0 \
    staged_every_width:SOFTMAX_CUDA_STAGED_WIDTH=32,SOFTMAX_CUDA_STAGED_ALIGNED_WIDTH=32; do
    IFS=, read -r -a vars <<< "${v#*:}"
    env "${vars[@]}" timeout "$(cap 120)" "$CUDA_TESTS" --gtest_filter='CudaRowsStaged.*:AllShapes/*' \
      > "$L/${v%%:*}.log" 2>&1
    echo "rc=$?" >> "$L/${v%%:*}.log"
  done ) &
staged_runs=$!
lb timeout "$(cap 90)" "$COMP_TESTS" > "$L/comparison_tests.log" 2>&1
lb timeout "$(cap 60)" "$REL_TESTS" --gtest_filter='CudaDeterminism.*' > "$L/determinism_tests.log" 2>&1
lb timeout "$(cap 30)" "$API_TESTS" > "$L/api_tests.log" 2>&1
# Every (x, y) storage pair, magnitude and alignment against float64, dropout included, on both
# backends (tests/semantics).
if [ -x "$SEM_TESTS" ]; then
  lb timeout "$(cap 150)" "$SEM_TESTS" > "$L/semantics_tests.log" 2>&1
  echo "rc=$?" >> "$L/semantics_tests.log"
else
  echo "not run: no $SEM_TESTS among the binaries" > "$L/semantics_tests.log"
fi
wait "$staged_runs"

stamp "compute-sanitizer memcheck, racecheck, synccheck, initcheck (side by side)"
san() {  # <tool> <filter>
  lb timeout "$(cap 140)" compute-sanitizer --tool "$1" --error-exitcode 3 \
    $([ "$1" = memcheck ] && echo --leak-check full) \
    "$CUDA_TESTS" --gtest_filter="$2" > "$L/sanitizer_$1.log" 2>&1
  echo "$1 rc=$?" >> "$L/sanitizer_$1.log"
}
san memcheck 'CudaRowsStaged.MisalignedRowsOfEverySegmentWidth:CudaRowsStrategies.*:CudaRowsInPlace.*:CudaRowsNonFinite.*:CudaDropout.MaskMatchesCpuBitForBit:CudaDropout.EveryOffsetPhase:CudaRuntime.*:CudaBackward.InPlaceAndMisaligned:CudaDropoutBackward.*:CudaSharded.*' &
# racecheck instruments every shared-memory access and is by far the slowest: the non-finite
# test (few rows on every strategy: segments, blocks, clusters, split) and a misaligned block
# and a split shape.
san racecheck 'CudaRowsStaged.MisalignedRowsOfEverySegmentWidth:CudaRowsNonFinite.*:AllShapes/CudaRowsTest.*/f32_cols4097*:AllShapes/CudaRowsTest.*/f32_cols1048577' &
# synccheck runs the plan of GPUs without clusters of 16 blocks: under it (CUDA 13.0, H100), a
# cluster of 16 whose blocks exchange words by st.async counted on their mbarriers fails with an
# illegal address and no synccheck report, a minimal such kernel as much as the library's, while
# the same kernels pass memcheck, racecheck and initcheck and without a tool give right results;
# clusters of 8 pass synccheck.
SOFTMAX_CUDA_MAX_CLUSTER=8 san synccheck 'CudaRowsStrategies.EveryBranchOfTheTable:CudaDropout.EveryOffsetPhase' &
san initcheck 'CudaRowsStrategies.EveryBranchOfTheTable:CudaRowsInPlace.*:CudaDropout.MaskMatchesCpuBitForBit' &
wait
for f in capture_first cuda_tests forced_segment forced_block forced_cluster forced_split forced_no_clusters segment_one_wave unstaged_rows staged_every_width forced_split_waves forced_split_resident split_pieces split_waves_overlapped comparison_tests determinism_tests api_tests semantics_tests; do
  echo "=== $f"; grep -E "tests ran|PASSED|FAILED|SKIPPED|Failure|^rc=" -A3 "$L/$f.log" | head -40
done > "$L/tests.txt"
cat "$L"/capture_first.log "$L"/cuda_tests.log "$L"/forced_*.log "$L"/segment_one_wave.log "$L"/unstaged_rows.log "$L"/staged_every_width.log "$L"/split_pieces.log "$L"/split_waves_overlapped.log "$L"/comparison_tests.log "$L"/determinism_tests.log "$L"/api_tests.log "$L"/semantics_tests.log > "$OUT/tests_full.log"
for t in memcheck racecheck synccheck initcheck; do
  echo "=== $t"; grep -E "SUMMARY|tests ran|PASSED|FAILED| rc=" "$L/sanitizer_$t.log"
  grep -E -m3 -B2 -A12 "Invalid|Error:|Race reported|Uninitialized" "$L/sanitizer_$t.log"
done > "$OUT/sanitizers.txt" 2>&1
fi

if [ "${SKIP_BENCH:-0}" != 1 ]; then
stamp "benchmark (GPU alone)"
bench() {  # <seconds> <parts> <args...>
  local s=$1 part=$2; shift 2
  echo "### softmax_bench --gpu-parts $part $*" >> "$OUT/bench_gpu.txt"
  timeout "$(cap "$s")" "$BENCH_BIN" --device cuda --gpu-parts "$part" \
    --json "$L/bench_$part.json" "$@" >> "$OUT/bench_gpu.txt" 2>&1
  echo "### rc=$?" >> "$OUT/bench_gpu.txt"
}
bench 150 rows --reps ${BENCH_REPS:-15}
bench 40 ladder
bench 60 dropout_ladder --reps ${BENCH_REPS:-15}
python3 - "$OUT/bench_gpu.json" "$L"/bench_rows.json "$L"/bench_ladder.json "$L"/bench_dropout_ladder.json <<'PY'
import json, os, sys
json.dump({"parts": [json.load(open(p)) for p in sys.argv[2:] if os.path.exists(p)]},
          open(sys.argv[1], "w"), indent=1)
PY

if [ "$(left)" -gt 60 ]; then
  stamp "GPU tables ($(left) s left)"
  LIB=$LIB OUT=$OUT/tables timeout "$(cap 420)" bash bench/gpu_tables.sh > "$L/gpu_tables.log" 2>&1
  echo "gpu_tables rc=$?" >> "$OUT/summary.txt"
  # The tables' folder holds more files than come back from $OUT: one archive instead.
  [ -d "$OUT/tables" ] && tar czf "$OUT/tables.tgz" -C "$OUT" tables && rm -rf "$OUT/tables"
fi

if [ "${TORCH_COMPARE:-0}" = 1 ] && [ "$(left)" -gt 45 ]; then
  stamp "torch comparison ($(left) s left)"
  compile_flag=""
  [ "$(left)" -lt 150 ] && compile_flag=--no-compile
  PYTHONUNBUFFERED=1 timeout "$(cap 400)" python3 bench/torch_compare.py --lib "$LIB" \
    --reps 15 $compile_flag --json "$L/torch_compare.json" > "$OUT/torch_compare.txt" 2>&1
  echo "torch_compare rc=$? ($compile_flag)" >> "$OUT/torch_compare.txt"
  [ -f "$L/torch_compare.json" ] && cp "$L/torch_compare.json" "$OUT/"
fi

fi
stamp "done"
{
  echo "================ summary ================"
  cat "$L/tests.txt" "$OUT/sanitizers.txt" 2>/dev/null
  grep -E "^!!!!|### rc" "$OUT/bench_gpu.txt" 2>/dev/null
  tail -3 "$OUT/torch_compare.txt" 2>/dev/null
} | tee -a "$OUT/summary.txt"
