// SPDX-License-Identifier: Apache-2.0
// The host fp16/bf16 conversions in backends/common/half_bits.h: f16 against GCC's _Float16
// conversions (random floats and every f16 bit pattern), bf16 against an independent
// round-to-nearest-even computed in double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

#include "backends/common/half_bits.h"
#include "reference.h"

namespace {

using namespace softmax_internal;

uint16_t f16_bits_gcc(float f) {
  const _Float16 h = static_cast<_Float16>(f);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

float f16_value_gcc(uint16_t b) {
  _Float16 h;
  std::memcpy(&h, &b, 2);
  return static_cast<float>(h);
}

bool f16_is_nan(uint16_t b) { return (b & 0x7c00u) == 0x7c00u && (b & 0x3ffu) != 0; }

TEST(HalfBits, FloatToF16MatchesGccOnRandomFloats) {
  const uint64_t seed = softmax_test::fresh_seed();
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 2000000; ++i) {
    // Random bit patterns cover every exponent; half of them are pulled into f16's range.
    uint32_t u = uint32_t(rng());
    if (i & 1) u = (u & 0x807fffffu) | ((uint32_t(rng()) % 40u + 100u) << 23);
    const float f = bits_float(u);
    const uint16_t got = float_to_f16(f), want = f16_bits_gcc(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(f16_is_nan(got)) << std::hex << u;
    } else {
      ASSERT_EQ(got, want) << std::hex << "float bits " << u << " seed " << std::dec << seed;
    }
  }
}

TEST(HalfBits, EveryF16RoundTripsAndMatchesGcc) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t h = uint16_t(b);
    const float f = f16_to_float(h);
    if (f16_is_nan(h)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << b;
      ASSERT_TRUE(f16_is_nan(float_to_f16(f))) << std::hex << b;
      continue;
    }
    ASSERT_EQ(float_bits(f), float_bits(f16_value_gcc(h))) << std::hex << b;
    ASSERT_EQ(float_to_f16(f), h) << std::hex << b;
  }
}

// Nearest bf16 to f, ties to even, by comparing the two candidates around f in double.
uint16_t bf16_reference(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t lo = uint16_t(u >> 16);
  if ((u & 0xffffu) == 0) return lo;
  const uint16_t hi = uint16_t(lo + 1);  // next bf16 away from zero (may be inf)
  const double vlo = bf16_to_float(lo);
  // Past the largest finite bf16 the next step would be one ulp (2^120) further: that is the
  // candidate rounding compares against before the result becomes inf.
  const double vhi = std::isinf(bf16_to_float(hi)) ? vlo + std::copysign(0x1p120, double(f)) : bf16_to_float(hi);
  const double dlo = std::fabs(double(f) - vlo), dhi = std::fabs(vhi - double(f));
  if (dlo < dhi) return lo;
  if (dhi < dlo) return hi;
  return (lo & 1u) ? hi : lo;
}

TEST(HalfBits, FloatToBf16RoundsToNearestEven) {
  const uint64_t seed = softmax_test::fresh_seed();
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 2000000; ++i) {
    const float f = bits_float(uint32_t(rng()));
    if (std::isnan(f)) {
      const uint16_t b = float_to_bf16(f);
      ASSERT_TRUE(std::isnan(bf16_to_float(b))) << std::hex << float_bits(f);
      continue;
    }
    ASSERT_EQ(float_to_bf16(f), bf16_reference(f)) << std::hex << float_bits(f) << " seed " << std::dec << seed;
  }
  // Every bf16 value converts back to itself.
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = bf16_to_float(uint16_t(b));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_bf16(f), b) << std::hex << b;
  }
}

}  // namespace
