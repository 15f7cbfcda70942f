#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds libsoftmax and runs every test: the GoogleTest suites (CPU; GPU ones skip with a reason
# when no CUDA device is present), the bindings', examples' and packaging tests, then the
# reliability checks (sanitizer builds, fuzz smoke test). Under CI (CI=true) also a Debug build
# and the Debian packages. Installs the Debian packages it needs when they are missing.
#
#   bash tests/run_all.sh                 # everything (Debug build and .deb only with CI=true)
#   SOFTMAX_SKIP_RELIABILITY=1 ...        # without the sanitizer and fuzz builds
#   SOFTMAX_REQUIRE_CUDA=1 ...            # fail if nvcc is missing (CI: the CUDA code must compile)
#   SOFTMAX_CUDA_ARCHITECTURES=90 ...     # CUDA architectures of the test builds (default under
#                                         # CI: the library for the project's list, which the
#                                         # Debian package step then packages, and the test code
#                                         # for 90; else this GPU's when one is present, else the
#                                         # project's list)
#   SOFTMAX_DEBUG_CHECK=0|1               # Debug build + CPU/API suites, and the CUDA suite when a
#                                         # GPU can run it (default: on under CI)
#   SOFTMAX_DEB_CHECK=0|1                 # Debian packages, all CUDA architectures (default: on under CI)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${SOFTMAX_BUILD_DIR:-$root/build-test}
jobs=${SOFTMAX_JOBS:-$(nproc)}
ci=false
[ "${CI:-}" = true ] && ci=true
start=$SECONDS
timings=()
stage_done() {  # <stage> <start second>
  timings+=("$1: $((SECONDS - $2)) s")
  echo "== $1: done in $((SECONDS - $2)) s"
}

# --- packages ----------------------------------------------------------------------------------
[ -d /usr/local/cuda/bin ] && export PATH="$PATH:/usr/local/cuda/bin"
[ -d "$HOME/.cargo/bin" ] && export PATH="$PATH:$HOME/.cargo/bin"
need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in cmake ninja-build g++ pkg-config libgtest-dev libhwy-dev python3 python3-numpy python3-venv \
         abigail-tools clang libclang-rt-14-dev libomp-dev binutils dpkg-dev libopenmpi-dev openmpi-bin; do
  have_pkg "$p" || need+=("$p")
done
command -v cargo >/dev/null 2>&1 || need+=(cargo)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "== installing Debian packages: ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
  else
    echo "== missing Debian packages (run as root to install): ${need[*]}" >&2
  fi
fi

cuda_flags=(-DSOFTMAX_WITH_CUDA=OFF)
debug_cuda_flags=(-DSOFTMAX_WITH_CUDA=OFF)
deb_from_main=false  # the Debian package step packages the main build
if command -v nvcc >/dev/null 2>&1; then
  cuda_flags=(-DSOFTMAX_WITH_CUDA=ON)
  if [ -n "${SOFTMAX_CUDA_ARCHITECTURES:-}" ]; then
    cuda_flags+=("-DCMAKE_CUDA_ARCHITECTURES=$SOFTMAX_CUDA_ARCHITECTURES")
  elif [ $ci = true ]; then
    # Under CI the library is compiled once, for every default architecture (so code that only
    # some architectures reject is caught), and packaged from this build; the test code for one.
    cuda_flags+=(-DSOFTMAX_TEST_CUDA_ARCHITECTURES=90 -DCMAKE_INSTALL_PREFIX=/usr)
    deb_from_main=true
  elif nvidia-smi >/dev/null 2>&1; then
    cuda_flags+=(-DCMAKE_CUDA_ARCHITECTURES=native)
  fi
  debug_cuda_flags=("${cuda_flags[@]}")
  $deb_from_main && debug_cuda_flags=(-DSOFTMAX_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90)
elif [ "${SOFTMAX_REQUIRE_CUDA:-0}" = 1 ]; then
  echo "nvcc not found but SOFTMAX_REQUIRE_CUDA=1: the CUDA sources must be compiled" >&2
  exit 1
fi

# ctest runs $jobs tests at once, each with OpenMP's default of a thread per core; threads that
# spin while they wait take the cores from the other tests' threads (on two cores the CPU suites
# took 20-30% longer than with waits that sleep).
run_ctest() { OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive} ctest "$@"; }

# --- main build and ctest ----------------------------------------------------------------------
t0=$SECONDS
echo "== configure (${cuda_flags[*]}) in $build"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${cuda_flags[@]}"
echo "== build (-j$jobs)"
cmake --build "$build" -j "$jobs"
echo "== ctest"
run_ctest --test-dir "$build" --output-on-failure -j "$jobs"
if [ -x "$build/tests/cuda/softmax_cuda_tests" ] && ! nvidia-smi >/dev/null 2>&1; then
  # Without a GPU every CUDA test must skip, and say why.
  xml="$build/cuda-skips.xml"
  "$build/tests/cuda/softmax_cuda_tests" --gtest_output="xml:$xml" >/dev/null
  python3 - "$xml" <<'EOF'
import sys
import xml.etree.ElementTree as ET
cases = ET.parse(sys.argv[1]).getroot().iter("testcase")
total, silent, ran = 0, [], []
for c in cases:
    total += 1
    skipped = c.find("skipped")
    if skipped is None:
        ran.append(c.get("name"))
    elif not (skipped.get("message") or "").split("\n", 1)[-1].strip():
        silent.append(c.get("name"))
if ran or silent or total == 0:
    sys.exit("CUDA tests without a GPU: %d tests, ran instead of skipping: %s; skipped without a reason: %s"
             % (total, ran[:5], silent[:5]))
print("== all %d CUDA tests skipped without a GPU, each with its reason" % total)
EOF
fi
stage_done "Release build and ctest" $t0

# --- reliability: sanitizers, fuzz smoke test, ABI checks that need their own builds -----------
if [ "${SOFTMAX_SKIP_RELIABILITY:-0}" != 1 ] && [ -x "$root/tests/reliability/ci.sh" ]; then
  t0=$SECONDS
  echo "== reliability checks"
  "$root/tests/reliability/ci.sh"
  stage_done "reliability" $t0
fi

# --- Debug build: CPU and API suites, and CUDA where a GPU runs it ----------------------------
if [ "${SOFTMAX_DEBUG_CHECK:-$ci}" = 1 ] || [ "${SOFTMAX_DEBUG_CHECK:-$ci}" = true ]; then
  t0=$SECONDS
  debug=${SOFTMAX_DEBUG_BUILD_DIR:-$root/build-debug}
  # The Debug build compiles the CUDA backend where its suite can run; without a GPU the Release
  # build above has compiled it and shown every CUDA test skipping with its reason.
  nvidia-smi >/dev/null 2>&1 || debug_cuda_flags=(-DSOFTMAX_WITH_CUDA=OFF)
  echo "== Debug build (${debug_cuda_flags[*]}) in $debug"
  cmake -S "$root" -B "$debug" -G Ninja -DCMAKE_BUILD_TYPE=Debug "${debug_cuda_flags[@]}" \
        -DSOFTMAX_BUILD_BENCH=OFF -DSOFTMAX_BUILD_BINDINGS_TESTS=OFF >/dev/null
  targets=(softmax softmax_api_tests softmax_c99_header_test softmax_cpu_tests)
  if ninja -C "$debug" -t targets all | grep -q '^softmax_cpu_highway_target_tests:'; then
    targets+=(softmax_cpu_highway_target_tests)
  fi
  if ninja -C "$debug" -t targets all | grep -q '^softmax_cuda_tests:'; then
    targets+=(softmax_cuda_tests)
  fi
  cmake --build "$debug" -j "$jobs" --target "${targets[@]}"
  # What the build type can change is the dispatch, the clones and the inlining of the kernels
  # the suites pick by default; the portable kernels forced through the same suites, and the
  # 16M-element rows (minutes at -O0; their chunked code is what the 65K-2M rows run), are left
  # to the Release run above.
  run_ctest --test-dir "$debug" --output-on-failure -j "$jobs" -R '^(api|cpu|cuda)\.' \
        -E '^cpu\.(portable\.|CpuLongRow\.SixteenMillionPlusThree$)'
  stage_done "Debug build and its suites" $t0
fi

# --- Debian packages: every CUDA architecture, installed into a scratch folder -----------------
if [ "${SOFTMAX_DEB_CHECK:-$ci}" = 1 ] || [ "${SOFTMAX_DEB_CHECK:-$ci}" = true ]; then
  t0=$SECONDS
  echo "== Debian packages"
  deb_from=""
  $deb_from_main && deb_from=$build
  SOFTMAX_DEB_FROM=$deb_from SOFTMAX_JOBS=$jobs bash "$root/tests/packaging/deb_package_check.sh"
  stage_done "Debian packages" $t0
fi

echo "== all tests passed ($((SECONDS - start)) s)"
for t in "${timings[@]}"; do echo "   $t"; done
