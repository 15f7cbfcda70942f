#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the libFuzzer target (clang, ASan+UBSan, CPU backend) and fuzzes the C API for
# [seconds] (default 60). Exit status 0 only if the build succeeded, every checked-in crash
# reproducer still passes, and the run found nothing.
#
#   tests/reliability/fuzz.sh [seconds]
#
# Environment: SOFTMAX_FUZZ_BUILD_DIR (default <repo>/build-fuzz), SOFTMAX_FUZZ_JOBS (build
# parallelism, default 2), SOFTMAX_FUZZ_CORPUS (working corpus, default <build>/corpus; the
# checked-in seeds in tests/reliability/fuzz/corpus are read but never written).
# A crash leaves its input as <build>/crash-*; turn it into a regression test in
# tests/reliability/fuzz_regressions_test.cpp (the fuzzer prints the exact call).
set -euo pipefail

seconds="${1:-60}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=hwy_flags.sh
. "$here/hwy_flags.sh"
build="${SOFTMAX_FUZZ_BUILD_DIR:-$root/build-fuzz}"
jobs="${SOFTMAX_FUZZ_JOBS:-2}"
corpus="${SOFTMAX_FUZZ_CORPUS:-$build/corpus}"
seeds="$here/fuzz/corpus"

cc="$(command -v clang-14 || command -v clang)"
cxx="$(command -v clang++-14 || command -v clang++)"

echo "== fuzz: building with $cxx into $build"
mkdir -p "$build"
cmake -S "$here/fuzz" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only $(hwy_runnable_only)" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
  -DSOFTMAX_FUZZ_CHECK_ENUM="${SOFTMAX_FUZZ_CHECK_ENUM:-ON}" >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j "$jobs"

fuzzer="$build/softmax_api_fuzzer"
# Leak checks stay on; OpenMP's thread pool is reachable, not leaked.
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:allocator_may_return_null=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$here/fuzz/lsan.supp:print_suppressions=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# Two cores: keep OpenMP from oversubscribing them (num_threads in the options still varies).
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"

mkdir -p "$corpus"
if compgen -G "$here/fuzz/crashes/*" >/dev/null; then
  echo "== fuzz: replaying checked-in crash reproducers"
  if ! SOFTMAX_FUZZ_TRACE=1 "$fuzzer" "$here"/fuzz/crashes/* >"$build/replay.log" 2>&1; then
    grep -E "^call:|runtime error|ERROR:|INVARIANT" "$build/replay.log" | head -20
    echo "== fuzz: FAILED: a checked-in crash reproducer still fails (log: $build/replay.log)"
    exit 1
  fi
fi

echo "== fuzz: running for ${seconds}s"
cd "$build"
set +e
"$fuzzer" -max_total_time="$seconds" -max_len=512 -timeout=20 -rss_limit_mb=4096 \
  -print_final_stats=1 -artifact_prefix="$build/" "$corpus" "$seeds" 2>&1 | tee "$build/fuzz.log" |
  grep -E "^#[0-9]+ +(INITED|DONE|pulse)|^(stat|INVARIANT|SUMMARY|==[0-9]+==ERROR)|runtime error|Done [0-9]+ runs"
status=${PIPESTATUS[0]}
set -e
if [[ $status -ne 0 ]]; then
  echo "== fuzz: FAILED (exit $status); full log: $build/fuzz.log; reproducer: $(ls "$build"/crash-* "$build"/timeout-* "$build"/leak-* "$build"/oom-* 2>/dev/null | head -1)"
  tail -n 60 "$build/fuzz.log"
  exit 1
fi
echo "== fuzz: OK (${seconds}s, corpus $(ls "$corpus" | wc -l) inputs)"
