#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds softmax_bench (Release) and prints the benchmark table: the CPU section always, the GPU
# section when a GPU is present; then charts of the results when matplotlib is available.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() {
  cat <<'EOF'
usage: bash bench/run.sh [softmax_bench options]

Builds softmax_bench in Release and runs it: the CPU section (256 MiB per shape, 2 threads), and
the GPU section (1 GiB per shape) when `nvidia-smi` works and the CUDA backend is built. Tables
and JSON go to the terminal and to $BUILD_DIR/bench-results/, with PNG charts made by
bench/tools/plot.py when Python has matplotlib. Missing Debian packages are installed with
apt-get when running as root.

environment:
  BUILD_DIR=build                 build folder
  JOBS=2                          parallel build jobs
  SOFTMAX_CUDA_ARCHITECTURES=...  CUDA architectures (default: native when a GPU is present,
                                  else 90 alone)

softmax_bench options (passed through; --device and --json are set by this script):
EOF
  # The option list lives in one place, softmax_bench's own usage text.
  sed -n '/^const char kUsage\[\] =/,/;$/p' bench/bench_options.cpp | sed -n 's/^ *"\(.*\)\\n";\{0,1\}$/\1/p' |
    grep -v '^usage:' | grep -v -- '--json\|--device'
}
for arg in "$@"; do
  case $arg in -h | --help) usage; exit 0 ;; esac
done

BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-2}

# --- Debian packages -----------------------------------------------------------------------------
packages=(cmake ninja-build g++ libgtest-dev libhwy-dev pkg-config libdnnl-dev python3-matplotlib)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    echo "run.sh: installing ${missing[*]}"
    # libhwy-dev, libdnnl-dev and python3-matplotlib are optional (portable CPU kernels, no oneDNN
    # rows, no charts): a failed install (no network, say) is reported and the run goes on.
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
gpu=0
[[ $cuda == ON ]] && nvidia-smi >/dev/null 2>&1 && gpu=1
arch=()
if [[ -n ${SOFTMAX_CUDA_ARCHITECTURES:-} ]]; then
  arch=("-DCMAKE_CUDA_ARCHITECTURES=$SOFTMAX_CUDA_ARCHITECTURES")
elif ((gpu)); then
  arch=(-DCMAKE_CUDA_ARCHITECTURES=native)  # measure this GPU; no time on the others
else
  arch=(-DCMAKE_CUDA_ARCHITECTURES=90)      # nothing runs on a GPU here: one architecture will do
fi
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSOFTMAX_WITH_CUDA=$cuda "${arch[@]}"
cmake --build "$BUILD_DIR" -j "$JOBS" --target softmax_bench

# --- run -----------------------------------------------------------------------------------------
results="$BUILD_DIR/bench-results"
mkdir -p "$results"
rm -f "$results"/bench-*.json "$results"/*.png
status=0
"$BUILD_DIR/bench/softmax_bench" --device cpu --json "$results/bench-cpu.json" "$@" |
  tee "$results/bench-cpu.txt" || status=1
if ((gpu)); then
  "$BUILD_DIR/bench/softmax_bench" --device cuda --json "$results/bench-cuda.json" "$@" |
    tee "$results/bench-cuda.txt" || status=1
else
  echo "run.sh: no working nvidia-smi (or CUDA not built): GPU section not run"
fi

# --- charts --------------------------------------------------------------------------------------
# Debian's matplotlib belongs to /usr/bin/python3, which need not be the first python3 on PATH.
plot_python=""
for py in python3 /usr/bin/python3; do
  if command -v "$py" >/dev/null && "$py" -c "import matplotlib" 2>/dev/null; then plot_python=$py; break; fi
done
jsons=("$results"/bench-*.json)
if [[ -z $plot_python ]]; then
  echo "run.sh: no Python with matplotlib (apt-get install python3-matplotlib): no charts"
elif [[ -e ${jsons[0]} ]]; then
  "$plot_python" bench/tools/plot.py "${jsons[@]}" --out "$results" || status=1
fi
echo "run.sh: tables, JSON and charts in $results/"
exit $status
