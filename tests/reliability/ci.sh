#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The reliability checks that need builds of their own, run by CI after the main build's ctest
# (which already ran the reliability.* tests: concurrency, determinism, fuzz regressions, ABI
# guard). Runs everything even when one part fails, prints a summary, exits non-zero on any
# failure.
#
#   tests/reliability/ci.sh                    # sanitizers + 60 s of fuzzing
#   SOFTMAX_FUZZ_SECONDS=600 tests/reliability/ci.sh
#
# Runtime on a 2-core AVX-512 Xeon VM, from a clean tree: about 13 minutes -- ASan+UBSan build
# ~4.5 min (the two Highway kernel files, each compiled once per x86 target, take a core each)
# and its ctest ~5.5 min, TSan build and run ~30 s, clang fuzz build ~1.5 min, fuzzing 60 s.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
fuzz_seconds="${SOFTMAX_FUZZ_SECONDS:-60}"
start=$SECONDS
results=()
failed=0

step() {  # <name> <command...>
  local name="$1" t0=$SECONDS
  shift
  echo
  echo "################ reliability: $name"
  if "$@"; then
    results+=("PASS  $name ($((SECONDS - t0)) s)")
  else
    results+=("FAIL  $name ($((SECONDS - t0)) s)")
    failed=1
  fi
}

# The ABI guard's abidiff test skips (ctest exit 77) where abigail-tools is missing; in CI that
# would silently switch the guard off, so here its absence is a failure.
require_tools() {
  local ok=0
  for tool in abidiff abidw nm readelf; do
    command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install abigail-tools binutils)"; ok=1; }
  done
  command -v clang++-14 >/dev/null || command -v clang++ >/dev/null ||
    { echo "missing clang++ (apt-get install clang libclang-rt-14-dev libomp-dev)"; ok=1; }
  return $ok
}

step "tools present (abigail-tools, binutils, clang)" require_tools
step "sanitizers (ASan+UBSan: whole CPU ctest suite; TSan: concurrency)" "$here/sanitizers.sh"
step "fuzz ${fuzz_seconds} s (libFuzzer, ASan+UBSan, CPU backend)" "$here/fuzz.sh" "$fuzz_seconds"

echo
echo "################ reliability summary ($((SECONDS - start)) s)"
for r in "${results[@]}"; do echo "  $r"; done
if [[ $failed -ne 0 ]]; then
  echo "  => FAILED"
  exit 1
fi
echo "  => all reliability checks passed"
