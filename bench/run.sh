#!/usr/bin/env bash
# The README's "main job": build softmax_bench in Release and print the benchmark table.
#
#   bench/run.sh                 full CPU section (256 MiB per shape, 2 threads), plus the GPU
#                                section when `nvidia-smi` works
#   bench/run.sh --quick         small sizes, few reps (what CI runs)
#   BUILD_DIR=... JOBS=... bench/run.sh [softmax_bench options]
#
# Missing Debian packages are installed with apt-get when running as root (skipped when nothing
# is missing or when not root). The table goes to the terminal and, with the JSON of every row,
# into $BUILD_DIR/bench-results/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-2}

# --- Debian packages -----------------------------------------------------------------------------
packages=(cmake ninja-build g++ libgtest-dev libhwy-dev pkg-config libdnnl-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    echo "run.sh: installing ${missing[*]}"
    # libhwy-dev and libdnnl-dev are optional (portable CPU kernels, no oneDNN anchor): a failed
    # install (no network, say) is reported and the build goes on with what is there.
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; } ||
      echo "run.sh: WARNING: apt-get could not install ${missing[*]}; continuing with what is installed"
  else
    echo "run.sh: not root (or no apt-get): not installing ${missing[*]}"
  fi
fi

# --- configure and build -------------------------------------------------------------------------
if ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then export PATH=/usr/local/cuda/bin:$PATH; fi
cuda=OFF
command -v nvcc >/dev/null && cuda=ON
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSOFTMAX_WITH_CUDA=$cuda
cmake --build "$BUILD_DIR" -j "$JOBS" --target softmax_bench

# --- run -----------------------------------------------------------------------------------------
results="$BUILD_DIR/bench-results"
mkdir -p "$results"
status=0
"$BUILD_DIR/bench/softmax_bench" --device cpu --json "$results/bench-cpu.json" "$@" |
  tee "$results/bench-cpu.txt" || status=1
if [[ $cuda == ON ]] && nvidia-smi >/dev/null 2>&1; then
  "$BUILD_DIR/bench/softmax_bench" --device cuda --json "$results/bench-cuda.json" "$@" |
    tee "$results/bench-cuda.txt" || status=1
else
  echo "run.sh: no working nvidia-smi (or CUDA not built): GPU section not run"
fi
echo "run.sh: tables and JSON in $results/"
exit $status
