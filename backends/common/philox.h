/* SPDX-License-Identifier: Apache-2.0 */
// Philox4x32-10 and the dropout keep decision, shared bit for bit by the CPU and CUDA backends.
//
// The keep decision for flat element i is defined (docs/DESIGN.md) through cuRAND's device API:
//   curand_init(seed, i / 4, offset, &s);  u = component (i % 4) of curand_uniform4(&s);
//   keep = u > p
// curand_init puts the key at (lo32(seed), hi32(seed)), adds the subsequence i/4 to the upper 64
// bits of the 128-bit counter, then skips `offset` 32-bit outputs: offset/4 is added to the
// lower 64 bits and offset%4 becomes a phase within the 4-word block. curand_uniform4 returns the
// 4 words starting at that phase (spilling into the next block when phase != 0), each mapped to
// (0, 1] as x * 2^-32 + 2^-33 in float. Computing the counter directly, as below, costs one
// Philox block per 4 elements (two when offset % 4 != 0) instead of curand_init's three; the
// CUDA tests check it against curand_init/curand_uniform4 themselves.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define SOFTMAX_HD __host__ __device__ __forceinline__
#else
#define SOFTMAX_HD inline
#endif

namespace softmax_internal {

struct PhiloxBlock {
  uint32_t v[4];
};

SOFTMAX_HD void mulhilo32(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
#if defined(__CUDA_ARCH__)
  *lo = a * b;
  *hi = __umulhi(a, b);
#else
  const uint64_t p = static_cast<uint64_t>(a) * b;
  *lo = static_cast<uint32_t>(p);
  *hi = static_cast<uint32_t>(p >> 32);
#endif
}

// Philox4x32 with 10 rounds (Salmon et al., SC'11; the constants are Random123's).
SOFTMAX_HD PhiloxBlock philox4x32_10(PhiloxBlock ctr, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo32(kMul0, ctr.v[0], &hi0, &lo0);
    mulhilo32(kMul1, ctr.v[2], &hi1, &lo1);
    ctr = PhiloxBlock{{hi1 ^ ctr.v[1] ^ k0, lo1, hi0 ^ ctr.v[3] ^ k1, lo0}};
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return ctr;
}

// cuRAND's _curand_uniform: x * 2^-32 + 2^-33 in float, a value in (0, 1]. The product is
// exact (a power-of-two scale), so fused and unfused evaluation round identically.
SOFTMAX_HD float philox_word_to_uniform(uint32_t x) {
  return static_cast<float>(x) * 2.3283064e-10f + (2.3283064e-10f / 2.0f);
}

// The counter curand_init(seed, group, offset) would hold after its skips: the block that
// provides words [offset % 4, 4) of this group's draw.
SOFTMAX_HD PhiloxBlock philox_group_counter(uint64_t group, uint64_t offset) {
  const uint64_t lo = offset >> 2;
  return PhiloxBlock{{static_cast<uint32_t>(lo), static_cast<uint32_t>(lo >> 32),
                      static_cast<uint32_t>(group), static_cast<uint32_t>(group >> 32)}};
}

// The 128-bit counter plus one, with carry (cuRAND's Philox_State_Incr).
SOFTMAX_HD PhiloxBlock philox_counter_next(PhiloxBlock c) {
  if (++c.v[0] == 0 && ++c.v[1] == 0 && ++c.v[2] == 0) ++c.v[3];
  return c;
}

// The four uniforms curand_uniform4 returns for subsequence `group` of (seed, offset).
SOFTMAX_HD void dropout_uniforms4(uint64_t seed, uint64_t offset, uint64_t group, float u[4]) {
  const uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  const PhiloxBlock ctr = philox_group_counter(group, offset);
  const PhiloxBlock a = philox4x32_10(ctr, k0, k1);
  const unsigned phase = static_cast<unsigned>(offset & 3u);
  if (phase == 0) {
    for (int j = 0; j < 4; ++j) u[j] = philox_word_to_uniform(a.v[j]);
    return;
  }
  const PhiloxBlock b = philox4x32_10(philox_counter_next(ctr), k0, k1);
  for (unsigned j = 0; j < 4; ++j) {
    const unsigned w = phase + j;
    u[j] = philox_word_to_uniform(w < 4 ? a.v[w] : b.v[w - 4]);
  }
}

// Keep bits for the 4 elements of group `group` (flat elements 4*group .. 4*group+3), as a
// 4-bit mask: bit j set when element 4*group+j is kept.
SOFTMAX_HD unsigned dropout_keep4(uint64_t seed, uint64_t offset, uint64_t group, float p) {
  float u[4];
  dropout_uniforms4(seed, offset, group, u);
  unsigned bits = 0;
  for (int j = 0; j < 4; ++j) bits |= (u[j] > p ? 1u : 0u) << j;
  return bits;
}

// Keep decision for one flat element (the definition; slow when called per element).
SOFTMAX_HD bool dropout_keep(uint64_t seed, uint64_t offset, uint64_t flat_index, float p) {
  return (dropout_keep4(seed, offset, flat_index >> 2, p) >> (flat_index & 3)) & 1u;
}

// The keep rule u > p as an integer test on the 32-bit word x behind u: keep iff
// x >= dropout_keep_threshold(p). u(x) = x * 2^-32 + 2^-33 in float is non-decreasing in x (float
// conversion and the exact scaling both preserve order), so the kept words form a suffix of
// [0, 2^32); the threshold is its first word, found by bisection on the same float formula, and
// 2^32 when no word is kept (p >= 1). Tests compare it with the float rule around the threshold.
inline uint64_t dropout_keep_threshold(float p) {
  uint64_t lo = 0, hi = uint64_t{1} << 32;  // u(lo - 1) <= p < u(hi), with u(-1) = -inf, u(2^32) = +inf
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (philox_word_to_uniform(static_cast<uint32_t>(mid)) > p) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

// The inverted-dropout scale applied to kept elements; p == 1 drops everything, so any finite
// value will do there.
SOFTMAX_HD float dropout_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

}  // namespace softmax_internal
