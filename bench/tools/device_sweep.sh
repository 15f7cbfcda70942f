#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Strategy sweep on a GPU machine: gpu_sweep.py once per setting of the strategy knobs, over a
# list of cases, logs under $OUT. The named case lists are ~2^26 elements a case (enough to fill
# an H200 for tens of microseconds per pass); ELEMS_LOG2=28 gives them the benchmark's size (1 GiB
# of f32), where some settings rank differently (backends/cuda/TUNING.md, "Segment grids").
#
#   LIB=build/libsoftmax.so.0 OUT=out CASES=default|mid|segment|misaligned|LIST CONFIGS="default max256=SOFTMAX_CUDA_MAX_THREADS=256" \
#     [BATCH=10] [ROUNDS=2] [ELEMS_LOG2=26] bash bench/tools/device_sweep.sh
# BATCH=N times N calls back to back per sample (softmax_bench's steady rate; single calls carry
# the host's launch); ROUNDS=N runs every setting N times, settings alternating, so that a drift of
# the machine shows as spread rather than as a difference between settings.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT=${OUT:-sweep-out}
LIB=${LIB:?path to libsoftmax.so}
mkdir -p "$OUT"

rows() {  # rows for about 2^ELEMS_LOG2 elements of `cols` columns
  local c=$1 r
  r=$(( (1 << ${ELEMS_LOG2:-26}) / c ))
  [ "$r" -lt 1 ] && r=1
  echo "$r"
}
cases_for() {  # op dtype cols... -> op:dtype:RxC,...
  local op=$1 dt=$2
  shift 2
  local c out=""
  for c in "$@"; do
    local off=""
    case $c in *+*) off="+${c#*+}"; c=${c%+*};; esac
    out+="$op:$dt:$(rows "$c")x$c$off,"
  done
  echo "${out%,}"
}

case ${CASES:-default} in
  default)
    CASES_LIST=$(IFS=,; echo "$(cases_for rows f32 32 128 1000 1024 2048 4096 4097 4096+1 8191 8192 16384 32001 32768 65536 100003 131072 262144 1048576 67108864),$(cases_for rows bf16 32 1024 2050 4096 4096+1 8196 16384 32001 65536 131072),$(cases_for dropout f32 128 1024 4096 4097 32768),$(cases_for dropout3 f32 1024 4096),$(cases_for dropout bf16 1024 4096),$(cases_for bwd f32 1024 4096 32768 131072),$(cases_for bwd bf16 4096),$(cases_for dbwd f32 1024 4096 32768),$(cases_for mixed bf16 1024 4096 32768),$(cases_for stats f32 4096 100003),$(cases_for log f32 1024 32768)")
    ;;
  segment)  # the segment plans' rows (up to 512 columns) of every family, type and phase
    CASES_LIST=$(IFS=,; echo "$(cases_for rows f32 16 32 33 64 100 127 128 128+1 256 512),$(cases_for log f32 128),$(cases_for rows bf16 32 127 128 512),$(cases_for rows f16 64),$(cases_for mixed bf16 32 512),$(cases_for dropout f32 128 512),$(cases_for dropout3 f32 128 512),$(cases_for dropout bf16 128),$(cases_for dropout3 bf16 256),$(cases_for bwd f32 128 512),$(cases_for bwd bf16 128),$(cases_for dbwd f32 128),$(cases_for dbwd bf16 128),$(cases_for stats f32 128)")
    ;;
  misaligned)  # segment rows that start mid-vector (odd lengths, pointers one element off) beside aligned ones
    CASES_LIST=$(IFS=,; echo "$(cases_for rows f32 3 5 16 17 31 32 33 47 63 64 65 100 127 128 128+1 129 200 255 256 256+1 300 511 512 512+1),$(cases_for log f32 33 100),$(cases_for rows bf16 31 32 33 63 64+1 65 127 128 130 255 256 256+1 500 512),$(cases_for rows f16 33 128+1)")
    ;;
  mid)
    CASES_LIST=$(cases_for rows f32 2048 4096 8192 16384 32768 65536 131072),$(cases_for rows bf16 2048 4096 8192 16384 32768 65536)
    ;;
  *)
    CASES_LIST=$CASES
    ;;
esac

rounds=${ROUNDS:-1}
for round in $(seq "$rounds"); do
  for config in ${CONFIGS:-default}; do
    name=${config%%=*}
    vars=""
    [ "$config" != "$name" ] && vars=${config#*=}
    tag=$name
    [ "$rounds" -gt 1 ] && tag=${name}_r$round
    echo "== $name ${vars}${ROUNDS:+ (round $round)}"
    env $(echo "$vars" | tr ',' ' ') python3 bench/tools/gpu_sweep.py --lib "$LIB" --cases "$CASES_LIST" \
      ${TORCH:+--torch} --reps "${REPS:-15}" --batch "${BATCH:-1}" --json "$OUT/sweep_$tag.json" 2>&1 |
      tee "$OUT/sweep_$tag.log"
  done
done
