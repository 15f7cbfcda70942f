#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The GPU tables of bench/RESULTS.md, beyond softmax_bench's own: every operation on 1 GiB of f32
# input (0.5 GiB for 16-bit), row lengths that are and are not multiples of the vector width,
# pointers offset by one element, next to eager torch (and torch.compile on a subset) on the same
# tensors in the same process, with the same-run copy; then single-row latency (graph replay).
#
#   LIB=build/libsoftmax.so.0 OUT=out bash bench/gpu_tables.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-gpu-tables}
LIB=${LIB:?path to libsoftmax.so}
REPS=${REPS:-15}
# BATCH=N: each sample times N calls back to back (the steady rate softmax_bench measures).
BATCH=${BATCH:-1}
mkdir -p "$OUT"

spec() {  # op dtype bytes_per_element cols[+offset]... -> op:dtype:ROWSxCOLS[+OFF],...
  local op=$1 dt=$2 es=$3 total=$((1 << 30))
  shift 3
  local c out=""
  for c in "$@"; do
    local off=""
    case $c in *+*) off="+${c#*+}"; c=${c%+*};; esac
    local rows=$(( total / es / c ))
    [ "$rows" -lt 1 ] && rows=1
    out+="$op:$dt:${rows}x$c$off,"
  done
  echo "${out%,}"
}
# 16-bit tensors are half the bytes of the f32 ones (0.5 GiB), as in softmax_bench.
ROWS_F32=$(spec rows f32 4 32 128 512 1000 1024 2048 4096 4097 4096+1 8191 8192 16384 32001 32768 65536 100003 131072 262144 1048576)
ROWS_16=$(spec rows bf16 4 32 1024 2050 4096 4096+1 8196 16384 32001 65536),$(spec rows f16 4 1024 4100 8196 32001)
DROPOUT=$(spec dropout f32 4 128 1024 4096 4097 32768),$(spec dropout3 f32 4 128 1024 4096 32768),$(spec dropout bf16 4 1024 2048 4096)
BACKWARD=$(spec bwd f32 4 1024 4096 32768 65536 1048576),$(spec bwd bf16 4 1024 4096),$(spec dbwd f32 4 1024 4096 32768)
MIXED=$(spec mixed bf16 4 1024 2048 4096 8192 16384 32768)
LOG=$(spec log f32 4 1024 32768)

run() {  # name args...
  local name=$1
  shift
  PYTHONUNBUFFERED=1 python3 bench/tools/gpu_sweep.py --lib "$LIB" --reps "$REPS" --batch "$BATCH" --json "$OUT/$name.json" "$@" \
    2>&1 | tee "$OUT/$name.log"
}
run table --torch --cases "$ROWS_F32,$ROWS_16,$DROPOUT,$BACKWARD,$MIXED,$LOG"
run latency --latency 32768,65536,131072,262144,1048576
# torch.compile recompiles per shape (seconds each): a subset.
run compile --torch --compile --cases "$(spec rows f32 4 1024 4096 16384 32768 262144),$(spec rows bf16 4 1024 4096 16384),$(spec dropout f32 4 1024 4096),$(spec mixed bf16 4 1024 4096 32768),$(spec bwd f32 4 4096 32768)"
