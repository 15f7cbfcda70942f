# SPDX-License-Identifier: Apache-2.0
# Sourced by sanitizers.sh and fuzz.sh.
#
# hwy_runnable_only prints the compiler flag that leaves out of a sanitizer build the Highway
# targets this x86-64 CPU cannot run (AVX-512 and later, when it lacks avx512f): their code could
# never execute under the sanitizers here, and compiling it is about a third of the Highway
# kernels' build time. The Release build still compiles every target and tests those the CPU
# runs. Highway numbers its x86 targets from the best down, so HWY_AVX2 - 1 is every target
# above AVX2.
hwy_runnable_only() {
  if [ "$(uname -m)" = x86_64 ] && ! grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
    echo "-DHWY_DISABLED_TARGETS=HWY_AVX2-1"
  fi
}
