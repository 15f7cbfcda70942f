/* SPDX-License-Identifier: Apache-2.0 */
// Host-side conversions between float and the 16-bit storage types (IEEE binary16 and bfloat16),
// round-to-nearest-even, NaN preserved. Used by the CPU backend's scalar tails, the tests and
// the benchmark; the SIMD paths and CUDA kernels use their own hardware conversions, which
// round the same way.
#pragma once

#include <cstdint>
#include <cstring>

namespace softmax_internal {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline float bf16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

inline uint16_t float_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

inline float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  if (exp == 0) {
    if (mant == 0) return bits_float(sign);
    // Subnormal: normalise.
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    return bits_float(sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ffu) << 13);
  }
  return bits_float(sign | (exp + 112u) << 23 | mant << 13);
}

inline uint16_t float_to_f16(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u;                  // NaN
  if (a >= 0x477ff000u) return sign | 0x7c00u;                 // overflow (incl. inf) -> inf
  if (a < 0x38800000u) {                                       // subnormal or zero in f16
    if (a < 0x33000000u) return sign;                          // rounds to zero
    const uint32_t e = a >> 23;
    const uint32_t m = (a & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - e;                           // 14..24 (113 - e + 13)
    uint32_t h = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return sign | static_cast<uint16_t>(h);
  }
  uint32_t h = ((a >> 13) - (112u << 10));
  const uint32_t rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return sign | static_cast<uint16_t>(h);
}

}  // namespace softmax_internal
