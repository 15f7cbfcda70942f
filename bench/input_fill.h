/* SPDX-License-Identifier: Apache-2.0 */
// Bench inputs: a counter-based hash turns (seed, flat index) into a uniform value in [-8, 8).
//
// Why a hash and not std::mt19937: a 1 GiB input must be produced in milliseconds on the GPU and
// the same values must be reproducible on the host for the float64 check of sampled rows. A pure
// function of (seed, index) gives both: the GPU fills in parallel, the host recomputes nothing (it
// copies the sampled rows back), and the CPU section fills 256 MiB with OpenMP in parallel.
// The seed changes every run (printed in the header), so no variant is tuned to one vector.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define BENCH_HD __host__ __device__ __forceinline__
#else
#define BENCH_HD inline
#endif

namespace bench {

// SplitMix64's finaliser: a bijective mixer whose output passes BigCrush when fed a counter.
BENCH_HD uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [-8, 8) with 24 random bits: a spread that makes exp() span e^16 inside a row, so
// the max subtraction and the sum's accuracy are both exercised.
BENCH_HD float input_value(uint64_t seed, uint64_t index) {
  const uint64_t h = mix64(seed + 0x9E3779B97F4A7C15ull * (index + 1));
  const float unit = static_cast<float>(h >> 40) * (1.0f / 16777216.0f);  // [0, 1)
  return unit * 16.0f - 8.0f;
}

}  // namespace bench
