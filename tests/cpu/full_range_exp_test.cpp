// SPDX-License-Identifier: Apache-2.0
// The element exp of the backward and sharded kernels (backends/cpu/full_range_exp.h) over the
// whole range against the C library's exp in wider precision: a few ulps for normal results,
// subnormal results rounded once, exact zeros below the smallest subnormal, infinities
// past the largest finite value, NaN for NaN, exp(0) = 1.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <random>

#include "backends/cpu/full_range_exp.h"

namespace {

float exp_f32(float x) {
  return softmax_internal::cpu::exp_f32(x, softmax_internal::cpu::exp_clamp_f32());
}
double exp_f64(double x) {
  return softmax_internal::cpu::exp_f64(x, softmax_internal::cpu::exp_clamp_f64());
}

TEST(CpuFullRangeExp, FloatAcrossItsRange) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-110.0f, 95.0f);
  for (int i = 0; i < 2000000; ++i) {
    const float x = dist(rng);
    const float got = exp_f32(x);
    const double want = std::exp(double(x));
    if (want > double(FLT_MAX) * (1 + 1e-6)) {
      ASSERT_EQ(got, std::numeric_limits<float>::infinity()) << x;
    } else if (want < 0x1p-151) {
      ASSERT_EQ(got, 0.0f) << x;
    } else if (want < double(FLT_MIN)) {
      // Half a subnormal step of rounding plus the polynomial's relative error.
      ASSERT_LE(std::fabs(double(got) - want), 0x1p-150 + want * 4e-7) << x;
    } else if (want < double(FLT_MAX) * (1 - 1e-6)) {
      ASSERT_LE(std::fabs(double(got) - want), want * 4e-7) << x;  // about 7 ulp; measured ~3.3
    }
  }
  EXPECT_EQ(exp_f32(0.0f), 1.0f);
  EXPECT_EQ(exp_f32(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(exp_f32(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(exp_f32(std::numeric_limits<float>::quiet_NaN())));
}

TEST(CpuFullRangeExp, DoubleAcrossItsRange) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> dist(-750.0, 712.0);
  for (int i = 0; i < 2000000; ++i) {
    const double x = dist(rng);
    const double got = exp_f64(x);
    const long double want = std::exp((long double)x);
    if (want > (long double)DBL_MAX * (1 + 1e-14L)) {
      ASSERT_EQ(got, std::numeric_limits<double>::infinity()) << x;
    } else if (want < 0x1p-1076L) {
      ASSERT_EQ(got, 0.0) << x;
    } else if (want < (long double)DBL_MIN) {
      ASSERT_LE(std::fabs((long double)got - want), 0x1p-1075L + want * 0x1p-50L) << x;
    } else if (want < (long double)DBL_MAX * (1 - 1e-14L)) {
      ASSERT_LE(std::fabs((long double)got - want), want * 0x1p-50L) << x;  // 8 ulp; measured ~2
    }
  }
  EXPECT_EQ(exp_f64(0.0), 1.0);
  EXPECT_EQ(exp_f64(-std::numeric_limits<double>::infinity()), 0.0);
  EXPECT_EQ(exp_f64(std::numeric_limits<double>::infinity()), std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(exp_f64(std::numeric_limits<double>::quiet_NaN())));
}

}  // namespace
