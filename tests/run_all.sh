#!/usr/bin/env bash
# Builds libsoftmax and runs every test: the GoogleTest suites (CPU; GPU ones skip with a reason
# when no CUDA device is present), the bindings' and examples' tests, then the reliability checks
# (sanitizer builds, fuzz smoke test). Installs the Debian packages it needs when they are missing.
#
#   bash tests/run_all.sh            # everything
#   SOFTMAX_SKIP_RELIABILITY=1 ...   # only the main build's ctest
#   SOFTMAX_REQUIRE_CUDA=1 ...       # fail if nvcc is missing (CI: the CUDA code must compile)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${SOFTMAX_BUILD_DIR:-$root/build-test}
jobs=${SOFTMAX_JOBS:-$(nproc)}

# --- packages ----------------------------------------------------------------------------------
[ -d /usr/local/cuda/bin ] && export PATH="$PATH:/usr/local/cuda/bin"
[ -d "$HOME/.cargo/bin" ] && export PATH="$PATH:$HOME/.cargo/bin"
need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in cmake ninja-build g++ pkg-config libgtest-dev libhwy-dev python3-numpy abigail-tools \
         clang libclang-rt-14-dev libomp-dev binutils libopenmpi-dev openmpi-bin; do
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

cuda_flag=-DSOFTMAX_WITH_CUDA=OFF
if command -v nvcc >/dev/null 2>&1; then
  cuda_flag=-DSOFTMAX_WITH_CUDA=ON
elif [ "${SOFTMAX_REQUIRE_CUDA:-0}" = 1 ]; then
  echo "nvcc not found but SOFTMAX_REQUIRE_CUDA=1: the CUDA sources must be compiled" >&2
  exit 1
fi

# --- main build and ctest ----------------------------------------------------------------------
echo "== configure ($cuda_flag) in $build"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$cuda_flag"
echo "== build (-j$jobs)"
cmake --build "$build" -j "$jobs"
echo "== ctest"
ctest --test-dir "$build" --output-on-failure -j "$jobs"

# --- reliability: sanitizers, fuzz smoke test, ABI checks that need their own builds -----------
if [ "${SOFTMAX_SKIP_RELIABILITY:-0}" != 1 ] && [ -x "$root/tests/reliability/ci.sh" ]; then
  echo "== reliability checks"
  "$root/tests/reliability/ci.sh"
fi
echo "== all tests passed"
