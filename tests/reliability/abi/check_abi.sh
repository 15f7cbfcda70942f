#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The ABI guard for libsoftmax.so. One check per call, so that ctest names what broke:
#
#   check_abi.sh symbols  <libsoftmax.so>         exported dynamic symbols == exported_symbols.txt
#   check_abi.sh needed   <libsoftmax.so>         no NEEDED libcuda/libcudart/..., SONAME libsoftmax.so.0
#   check_abi.sh abidiff  <libsoftmax.so with -g> <include/softmax>   no ABI change vs baseline.abi
#   check_abi.sh update   <libsoftmax.so> <libsoftmax.so with -g> <include/softmax>
#                                                 rewrite exported_symbols.txt and baseline.abi
#
# The library with -g is the build's twin, <build>/tests/reliability/abi_twin/libsoftmax.so
# (target softmax_abi_twin), e.g. from the top of the source tree:
#   tests/reliability/abi/check_abi.sh update build/libsoftmax.so \
#     build/tests/reliability/abi_twin/libsoftmax.so include/softmax
#
# Changing the ABI on purpose: a compatible addition (a new softmax_* function, a new status
# value) needs `update`; an incompatible change (removed or changed function, changed struct
# layout or enum value) also needs the SONAME bumped (SOVERSION in the top CMakeLists.txt) so
# that old binaries refuse to load the new library, and then `update`.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
expected_soname="libsoftmax.so.0"

exported_symbols() {  # name@@version of every defined dynamic symbol, sorted
  nm -D --defined-only "$1" | awk '{print $NF}' | LC_ALL=C sort
}

mode="${1:?mode: symbols|needed|abidiff|update}"
case "$mode" in
  symbols)
    lib="${2:?library}"
    if ! diff -u "$here/exported_symbols.txt" <(exported_symbols "$lib"); then
      echo "FAIL: the exported symbols of $lib differ from tests/reliability/abi/exported_symbols.txt"
      echo "      (- expected, + found). Only the softmax_* API may be exported; if the API changed on"
      echo "      purpose, run: tests/reliability/abi/check_abi.sh update ..."
      exit 1
    fi
    echo "OK: $(wc -l <"$here/exported_symbols.txt") exported symbols, exactly the checked-in list"
    ;;
  needed)
    lib="${2:?library}"
    dyn="$(readelf -d "$lib")"
    echo "$dyn" | grep -E "NEEDED|SONAME" || true
    status=0
    # The library must load on a machine without the NVIDIA driver: nothing from CUDA at load time.
    if echo "$dyn" | grep -E "\(NEEDED\)" | grep -Eq "\[lib(cuda|cudart|nvidia-[a-z-]*|nvrtc|cublas[A-Za-z]*|curand|cufft|cusparse|cusolver)\.so"; then
      echo "FAIL: $lib has a load-time dependency on a CUDA library (link cudart statically;"
      echo "      libcuda.so must only be opened at run time)"
      status=1
    fi
    soname="$(echo "$dyn" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"
    if [[ "$soname" != "$expected_soname" ]]; then
      echo "FAIL: SONAME is '$soname', expected '$expected_soname' (update check_abi.sh when bumping it)"
      status=1
    fi
    [[ $status -eq 0 ]] && echo "OK: SONAME $soname, no NEEDED entry for any CUDA library"
    exit $status
    ;;
  abidiff)
    lib="${2:?library with debug info}"
    headers="${3:?include/softmax}"
    if ! command -v abidiff >/dev/null; then
      echo "SKIP: abidiff not installed (apt-get install abigail-tools); ci.sh requires it"
      exit 77
    fi
    set +e
    report="$(abidiff --headers-dir2 "$headers" "$here/baseline.abi" "$lib" 2>&1)"
    rc=$?
    set -e
    echo "$report"
    # abidiff's exit status is a bit field: 1 error, 2 usage, 4 ABI change, 8 incompatible change.
    if (( rc & 3 )); then echo "FAIL: abidiff could not compare (exit $rc)"; exit 1; fi
    if (( rc & 8 )); then
      echo "FAIL: INCOMPATIBLE ABI change against tests/reliability/abi/baseline.abi. If intended: bump"
      echo "      SOVERSION (and expected_soname in check_abi.sh), then run check_abi.sh update"
      exit 1
    fi
    if (( rc & 4 )); then
      echo "FAIL: the public ABI changed against tests/reliability/abi/baseline.abi. If intended (and"
      echo "      compatible), run check_abi.sh update; if not compatible, bump the SONAME too"
      exit 1
    fi
    echo "OK: public ABI identical to the checked-in baseline"
    ;;
  update)
    lib="${2:?library}"
    dbg="${3:?library with debug info}"
    headers="${4:?include/softmax}"
    exported_symbols "$lib" >"$here/exported_symbols.txt"
    # No machine paths in the baseline: it must not depend on where the source or build tree
    # was. abidw's options drop the corpus and compilation-directory paths; each translation
    # unit's path (the DWARF name of its source file) is made relative to the source root here.
    # abidiff matches functions and types, not translation-unit paths, so nothing is lost.
    root="$(cd "$headers/../.." && pwd)"
    abidw --headers-dir "$headers" --no-corpus-path --no-comp-dir-path --no-show-locs --drop-private-types \
      --drop-undefined-syms "$dbg" | sed "s|path='$root/|path='|" >"$here/baseline.abi"
    if grep -n "path='/" "$here/baseline.abi"; then
      echo "FAIL: the baseline still names absolute paths (above); relativise them too" >&2
      exit 1
    fi
    echo "wrote $here/exported_symbols.txt and $here/baseline.abi"
    ;;
  *) echo "unknown mode $mode" >&2; exit 2 ;;
esac
