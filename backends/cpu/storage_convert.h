/* SPDX-License-Identifier: Apache-2.0 */
// Conversions between the four storage types and the fp32 / fp64 work types, written as
// branch-free element functions (selects, integer ops, no table lookups) so that loops of them
// vectorise under every target_clones target. They round exactly as backends/common/half_bits.h
// (round to nearest even, NaN kept as a quiet NaN) and are checked against it element for element
// by tests/cpu/storage_convert_test.cpp.
//
// Memory is accessed through memcpy: callers' arrays need not be aligned to their element size,
// and the compiler then uses unaligned vector loads instead of assuming an alignment it would
// have to peel for.
#pragma once

#include <softmax/softmax.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#define SOFTMAX_CPU_CONVERT_INLINE inline __attribute__((always_inline))

namespace softmax_internal {
namespace cpu {
namespace convert {

template <class T>
SOFTMAX_CPU_CONVERT_INLINE T load(const void* base, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const unsigned char*>(base) + i * sizeof(T), sizeof(T));
  return v;
}

template <class T>
SOFTMAX_CPU_CONVERT_INLINE void store(void* base, size_t i, T v) {
  std::memcpy(static_cast<unsigned char*>(base) + i * sizeof(T), &v, sizeof(T));
}

SOFTMAX_CPU_CONVERT_INLINE uint32_t bits(float f) { return __builtin_bit_cast(uint32_t, f); }
SOFTMAX_CPU_CONVERT_INLINE float from_bits(uint32_t u) { return __builtin_bit_cast(float, u); }

// All-ones when a < b, else 0, for a, b < 2^31: the sign of a - b. Arithmetic instead of a
// comparison, because GCC threads a chain of comparisons of one value with constants (a < 0x400
// implies !(a >= 0x7c00)) into branches, and a loop with branches does not vectorise.
SOFTMAX_CPU_CONVERT_INLINE uint32_t below(uint32_t a, uint32_t b) { return 0u - ((a - b) >> 31); }

SOFTMAX_CPU_CONVERT_INLINE uint32_t pick(uint32_t mask, uint32_t if_set, uint32_t if_clear) {
  return (if_set & mask) | (if_clear & ~mask);
}

// binary16 -> float, exact. Normal numbers move their exponent from bias 15 to bias 127;
// subnormals (and zero) are their 10-bit integer times 2^-24 (exact in float); inf and NaN keep
// their mantissa under an all-ones exponent.
SOFTMAX_CPU_CONVERT_INLINE float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu;
  const uint32_t normal = (em << 13) + (112u << 23);
  const uint32_t subnormal = bits(float(int32_t(em)) * 0x1p-24f);
  const uint32_t special = (em << 13) | 0x7f800000u;
  uint32_t r = pick(below(em, 0x7c00u), normal, special);
  r = pick(below(em, 0x400u), subnormal, r);
  return from_bits(r | sign);
}

// float -> binary16, round to nearest even. Results in the normal range round the mantissa by
// adding 0xfff plus the kept lsb before the shift (a carry into the exponent is the correct
// rounding up); values below 2^-14 are rounded by the FPU itself: adding 0.5f leaves the value
// in units of 2^-24 (the binary16 subnormal step) in the low mantissa bits. 65520 and above
// round to infinity; NaN becomes the quiet NaN 0x7e00.
SOFTMAX_CPU_CONVERT_INLINE uint16_t f32_to_f16(float f) {
  const uint32_t u = bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  const uint32_t normal = (a + 0xfffu + ((a >> 13) & 1u) - (112u << 23)) >> 13;
  const uint32_t small = bits(from_bits(a) + 0.5f) - 0x3f000000u;
  uint32_t h = pick(below(a, 0x38800000u), small, normal);
  h = pick(below(a, 0x477ff000u), h, 0x7c00u);
  h = pick(below(0x7f800000u, a), 0x7e00u, h);
  return uint16_t(h | sign);
}

SOFTMAX_CPU_CONVERT_INLINE float bf16_to_f32(uint16_t h) { return from_bits(uint32_t(h) << 16); }

// float -> bfloat16, round to nearest even on the upper half; NaN stays NaN (quiet bit set).
SOFTMAX_CPU_CONVERT_INLINE uint16_t f32_to_bf16(float f) {
  const uint32_t u = bits(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet = (u >> 16) | 0x40u;
  return uint16_t(pick(below(0x7f800000u, u & 0x7fffffffu), quiet, rounded));
}

// Element i of an array stored as `t`, widened to T (float or double). T = float never meets
// f64 storage: such calls use fp64 arithmetic (backends/backend.h).
template <class T>
SOFTMAX_CPU_CONVERT_INLINE T load_as(const void* base, softmax_dtype t, size_t i) {
  switch (t) {
    case SOFTMAX_DTYPE_F64: return T(load<double>(base, i));
    case SOFTMAX_DTYPE_F32: return T(load<float>(base, i));
    case SOFTMAX_DTYPE_F16: return T(f16_to_f32(load<uint16_t>(base, i)));
    case SOFTMAX_DTYPE_BF16: break;
  }
  return T(bf16_to_f32(load<uint16_t>(base, i)));
}

}  // namespace convert
}  // namespace cpu
}  // namespace softmax_internal
