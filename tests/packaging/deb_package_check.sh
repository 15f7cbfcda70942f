#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the Debian packages the way a release would (CMAKE_INSTALL_PREFIX=/usr, CUDA for every
# default architecture when nvcc is present), checks what each contains, unpacks both into an
# empty folder with dpkg -x and builds and runs the C example against that tree twice: with
# `pkg-config --cflags --libs softmax` and with find_package(softmax CONFIG).
#
#   bash tests/packaging/deb_package_check.sh
#   SOFTMAX_DEB_BUILD_DIR=...          build folder (default: build-deb)
#   SOFTMAX_DEB_FROM=DIR               package an existing build configured with
#                                      CMAKE_INSTALL_PREFIX=/usr (CI: its test build) instead
#   SOFTMAX_DEB_CUDA_ARCHITECTURES=90  fewer architectures (default: the project's list)
#   SOFTMAX_JOBS=N                     parallel build jobs (default: nproc)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
build=${SOFTMAX_DEB_BUILD_DIR:-$root/build-deb}
jobs=${SOFTMAX_JOBS:-$(nproc)}
[ -d /usr/local/cuda/bin ] && export PATH="$PATH:/usr/local/cuda/bin"
fail() { echo "deb_package_check: $*" >&2; exit 1; }

cuda=(-DSOFTMAX_WITH_CUDA=OFF)
if command -v nvcc >/dev/null 2>&1; then
  cuda=(-DSOFTMAX_WITH_CUDA=ON)
  [ -n "${SOFTMAX_DEB_CUDA_ARCHITECTURES:-}" ] &&
    cuda+=("-DCMAKE_CUDA_ARCHITECTURES=$SOFTMAX_DEB_CUDA_ARCHITECTURES")
fi

if [ -n "${SOFTMAX_DEB_FROM:-}" ]; then
  build=$SOFTMAX_DEB_FROM
  prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:[A-Z]*=//p' "$build/CMakeCache.txt")
  [ "$prefix" = /usr ] || fail "$build was configured with CMAKE_INSTALL_PREFIX=$prefix, not /usr"
  echo "== packaging the build in $build"
else
  echo "== configure ${cuda[*]} (prefix /usr) in $build"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
        -DSOFTMAX_BUILD_TESTS=OFF -DSOFTMAX_BUILD_BENCH=OFF "${cuda[@]}" >/dev/null
fi
arches=$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$build/CMakeCache.txt")
t0=$SECONDS
echo "== build libsoftmax (-j$jobs${arches:+, CUDA architectures $arches})"
cmake --build "$build" -j "$jobs" --target softmax
echo "   built in $((SECONDS - t0)) s"
rm -f "$build"/*.deb
(cd "$build" && cpack -G DEB >/dev/null)
version=$(cat "$root/VERSION")
runtime_deb=$(ls "$build"/libsoftmax0_"$version"_*.deb 2>/dev/null) || fail "no libsoftmax0 .deb in $build"
dev_deb=$(ls "$build"/libsoftmax-dev_"$version"_*.deb 2>/dev/null) || fail "no libsoftmax-dev .deb in $build"

# --- contents and control fields -------------------------------------------------------------
contents() { dpkg-deb --contents "$1" | awk '{print $6}' | sed 's#^\./#/#'; }
expect_file() {  # <deb> <regex>
  contents "$1" | grep -Eq "$2" || { contents "$1"; fail "$(basename "$1") has no file matching $2"; }
}
multiarch=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:[A-Z]*=//p' "$build/CMakeCache.txt")
for deb in "$runtime_deb" "$dev_deb"; do
  echo "== $(basename "$deb")"
  dpkg-deb --field "$deb" Package Version Architecture Depends Section
  contents "$deb" | grep -v '/$' | sed 's/^/   /'
done
expect_file "$runtime_deb" "^/usr/$multiarch/libsoftmax\.so\.0$"
expect_file "$runtime_deb" "^/usr/$multiarch/libsoftmax\.so\.$version$"
expect_file "$runtime_deb" "^/usr/share/doc/softmax/LICENSE$"
expect_file "$dev_deb" "^/usr/include/softmax/softmax\.h$"
expect_file "$dev_deb" "^/usr/$multiarch/libsoftmax\.so$"
expect_file "$dev_deb" "^/usr/$multiarch/pkgconfig/softmax\.pc$"
expect_file "$dev_deb" "^/usr/$multiarch/cmake/softmax/softmaxConfig\.cmake$"
if contents "$dev_deb" | grep -q 'libsoftmax\.so\.'; then fail "libsoftmax-dev carries the runtime library"; fi
dpkg-deb --field "$dev_deb" Depends | grep -q "libsoftmax0 (= $version)" ||
  fail "libsoftmax-dev does not depend on libsoftmax0 (= $version)"
dpkg-deb --field "$runtime_deb" Depends | grep -q libgomp1 ||
  fail "libsoftmax0's Depends lacks libgomp1 (dpkg-shlibdeps not run?)"

# --- unpack into an empty folder and build the C example against it --------------------------
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
dpkg -x "$runtime_deb" "$tree"
dpkg -x "$dev_deb" "$tree"
lib="$tree/usr/$multiarch/libsoftmax.so.0"

if grep -q '^SOFTMAX_WITH_CUDA:BOOL=ON' "$build/CMakeCache.txt"; then
  echo "== CUDA code in the packaged library"
  found=$(python3 "$root/tests/packaging/fatbin_archs.py" "$lib") || fail "the packaged library has no CUDA code"
  sass=$(sed -n 's/^sass: //p' <<<"$found")
  ptx=$(sed -n 's/^ptx: //p' <<<"$found")
  echo "   machine code: $sass"
  echo "   PTX:          $ptx"
  for a in ${arches//;/ }; do  # CMake's forms: 90 (both), 90-real, 90-virtual
    n=${a%-*}
    case $a in
      *-real) grep -qw "$n" <<<"$sass" || fail "no sm_$n machine code" ;;
      *-virtual) grep -qw "$n" <<<"$ptx" || fail "no compute_$n PTX" ;;
      *) { grep -qw "$n" <<<"$sass" && grep -qw "$n" <<<"$ptx"; } || fail "no sm_$n machine code and PTX" ;;
    esac
  done
fi

example="$root/examples/c/softmax_example.c"
echo "== C example with pkg-config against the unpacked packages"
export PKG_CONFIG_PATH="$tree/usr/$multiarch/pkgconfig"
flags=$(pkg-config --cflags --libs softmax)
echo "   pkg-config --cflags --libs softmax: $flags"
# shellcheck disable=SC2086  # flags are words
# -lm: the example's own expf (merging its two shards), not something libsoftmax asks of callers.
cc -std=c99 -Wall -Werror "$example" $flags -lm -Wl,-rpath,"$tree/usr/$multiarch" -o "$tree/example_pkgconfig"
loaded=$(ldd "$tree/example_pkgconfig")
grep -qF "$tree/usr/$multiarch/libsoftmax.so.0" <<<"$loaded" ||
  fail "the example does not load the unpacked library: $loaded"
"$tree/example_pkgconfig"

echo "== C example with find_package(softmax CONFIG) against the unpacked packages"
cmake -S "$root/examples/c" -B "$tree/example-cmake" -G Ninja -DCMAKE_PREFIX_PATH="$tree/usr" >/dev/null
cmake --build "$tree/example-cmake" >/dev/null
"$tree/example-cmake/softmax_example_c"
echo "== Debian packages OK: $(basename "$runtime_deb") $(basename "$dev_deb")"
