/* SPDX-License-Identifier: Apache-2.0 */
// exp over the whole float and double range as branch-free element functions that loops can
// vectorise. The forward's exp (vector_kernels.h) only serves arguments x - max <= 0; the
// backward and sharded kernels also see positive arguments (a log-softmax gradient whose y was
// rounded just above 0, statistics from another shard) and need subnormal results where the
// float64 reference has them, so they use these.
//
// Both: clamp x to [lo, hi] (NaN passes through the clamp: every comparison with it is false); n = round(x / ln2) by the
// 1.5 * 2^(mantissa bits) magic number, which also leaves n in the low bits of t; Cody-Waite
// reduction r = x - n ln2 with ln2 split in two (n * hi exact for every n the clamp allows);
// e^r by a polynomial on |r| <= ln2 / 2; then times 2^n as two factors 2^(n/2) and 2^(n - n/2),
// each a normal number, so p * 2^(n/2) is exact and the second product rounds once: results
// down to the smallest subnormal are correctly scaled, and 2^n past the largest finite value
// gives inf. NaN stays NaN (p is NaN whatever the scale bits are).
#pragma once

#include <cstdint>

#define SOFTMAX_CPU_EXP_INLINE inline __attribute__((always_inline))

namespace softmax_internal {
namespace cpu {

// The clamp bounds, fetched once before a loop and hidden from the optimiser: with both bounds
// known constants, GCC threads the second comparison through the first (x < lo implies
// !(x > hi)), which leaves a branch in the loop body and stops vectorisation.
template <class T>
struct ExpClamp {
  T lo, hi;
};

// fp32: clamp to [-104, 89] (e^-104 < 2^-150 rounds to 0, e^89 > FLT_MAX).
inline ExpClamp<float> exp_clamp_f32() {
  float lo = -104.0f, hi = 89.0f;
  __asm__("" : "+x"(lo), "+x"(hi));
  return {lo, hi};
}

// fp64: clamp to [-746, 710] (e^-746 < 2^-1075 rounds to 0, e^710 > DBL_MAX).
inline ExpClamp<double> exp_clamp_f64() {
  double lo = -746.0, hi = 710.0;
  __asm__("" : "+x"(lo), "+x"(hi));
  return {lo, hi};
}

// fp32's constants, also read by the AVX-512 form of the log-softmax gradient (grad_kernels.cpp):
// the degree-5 polynomial and the ln2 split are the forward's (highway_exp-inl.h), relative
// error 1.05e-7 on the reduced argument.
struct ExpF32 {
  static constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  static constexpr float kLog2e = 1.44269504088896341f;
  static constexpr float kLn2Hi = 0.693145751953125f;
  static constexpr float kLn2Lo = 1.428606820309417232e-06f;
  static constexpr float kP5 = 0.00831252709031105f, kP4 = 0.041890114545822144f, kP3 = 0.16667114198207855f,
                         kP2 = 0.499992311000824f;
};

SOFTMAX_CPU_EXP_INLINE float exp_f32(float x, ExpClamp<float> clamp) {
  using C = ExpF32;
  x = x < clamp.lo ? clamp.lo : x;
  x = x > clamp.hi ? clamp.hi : x;
  const float t = x * C::kLog2e + C::kMagic;
  const float n = t - C::kMagic;
  float r = x - n * C::kLn2Hi;
  r = r - n * C::kLn2Lo;
  float p = C::kP5 * r + C::kP4;
  p = p * r + C::kP3;
  p = p * r + C::kP2;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t ni = int32_t(__builtin_bit_cast(uint32_t, t) - __builtin_bit_cast(uint32_t, C::kMagic));
  const int32_t n1 = ni >> 1, n2 = ni - n1;
  const float s1 = __builtin_bit_cast(float, uint32_t(n1 + 127) << 23);
  const float s2 = __builtin_bit_cast(float, uint32_t(n2 + 127) << 23);
  return (p * s1) * s2;
}

// fp64: e^r by its Taylor series to degree 13 (truncation below 5e-18 relative on
// |r| <= 0.35), ln2 split with 32 significant bits in the high part.
SOFTMAX_CPU_EXP_INLINE double exp_f64(double x, ExpClamp<double> clamp) {
  constexpr double kMagic = 6755399441055744.0;  // 1.5 * 2^52
  x = x < clamp.lo ? clamp.lo : x;
  x = x > clamp.hi ? clamp.hi : x;
  const double t = x * 1.4426950408889634 + kMagic;
  const double n = t - kMagic;
  double r = x - n * 6.93147180369123816490e-01;
  r = r - n * 1.90821492927058770002e-10;
  double p = 1.6059043836821613e-10;
  p = p * r + 2.08767569878681e-09;
  p = p * r + 2.505210838544172e-08;
  p = p * r + 2.755731922398589e-07;
  p = p * r + 2.7557319223985893e-06;
  p = p * r + 2.48015873015873e-05;
  p = p * r + 0.0001984126984126984;
  p = p * r + 0.001388888888888889;
  p = p * r + 0.008333333333333333;
  p = p * r + 0.041666666666666664;
  p = p * r + 0.16666666666666666;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  const int64_t ni = int64_t(__builtin_bit_cast(uint64_t, t) - __builtin_bit_cast(uint64_t, kMagic));
  const int64_t n1 = ni >> 1, n2 = ni - n1;
  const double s1 = __builtin_bit_cast(double, uint64_t(n1 + 1023) << 52);
  const double s2 = __builtin_bit_cast(double, uint64_t(n2 + 1023) << 52);
  return (p * s1) * s2;
}

}  // namespace cpu
}  // namespace softmax_internal
