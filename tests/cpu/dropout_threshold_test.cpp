// SPDX-License-Identifier: Apache-2.0
// The CPU backend's integer form of the dropout keep rule (backends/cpu/dropout_keep_bytes.h):
// keep = word > dropout_word_threshold(p) must equal u(word) > p (philox.h's word-to-float
// rounding included) for every word, and the scalar keep bytes must equal dropout_keep() and the
// independent cuRAND restatement for every Philox phase (offset % 4) and counters next to 2^64.
// Compiled with the backend's source file, as these functions are not exported.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "backends/common/philox.h"
#include "backends/cpu/dropout_keep_bytes.h"
#include "curand_reference.h"
#include "reference.h"

namespace {

using softmax_internal::philox_word_to_uniform;
using softmax_internal::cpu::dropout_word_threshold;

// Every word within `radius` of the threshold (and the ends of the word range) decides as the
// float compare does.
::testing::AssertionResult threshold_is_exact(float p, int64_t radius) {
  const int64_t t = dropout_word_threshold(p);
  const int64_t lo = std::max<int64_t>(0, t - radius), hi = std::min<int64_t>(int64_t{0xffffffff}, t + radius);
  auto check = [&](int64_t w) {
    return (w > t) == (philox_word_to_uniform(static_cast<uint32_t>(w)) > p);
  };
  for (int64_t w = lo; w <= hi; ++w) {
    if (!check(w)) return ::testing::AssertionFailure() << "p " << p << " threshold " << t << " word " << w;
  }
  for (const int64_t w : {int64_t{0}, int64_t{1}, int64_t{0xfffffffe}, int64_t{0xffffffff}}) {
    if (!check(w)) return ::testing::AssertionFailure() << "p " << p << " threshold " << t << " word " << w;
  }
  return ::testing::AssertionSuccess();
}

TEST(DropoutWordThreshold, EqualsTheFloatCompareAroundTheThreshold) {
  // The edges: nothing dropped, everything dropped, the smallest uniform 2^-33 and its
  // neighbours, p just below 1, and values whose threshold sits where float(word) rounds in steps
  // of 256 (words above 2^24 share a float).
  for (const float p : {0.0f, 0x1p-40f, 0x1p-33f, std::nextafter(0x1p-33f, 1.0f), 0x1p-32f, 0x1p-24f, 0.1f, 0.3f,
                        0.5f, std::nextafter(0.5f, 0.0f), 0.9f, 0.999f, std::nextafter(1.0f, 0.0f), 1.0f}) {
    ASSERT_TRUE(threshold_is_exact(p, int64_t{1} << 20));
  }
  EXPECT_EQ(dropout_word_threshold(0.0f), -1);
  EXPECT_EQ(dropout_word_threshold(1.0f), int64_t{0xffffffff});
  const uint64_t seed = softmax_test::fresh_seed();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(0.0f, 1.0f);
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(threshold_is_exact(dist(rng), int64_t{1} << 12)) << "seed " << seed;
}

TEST(DropoutKeepBytesScalar, EqualsTheDefinitionAtEveryPhaseAndCounterCarry) {
  const uint64_t max = ~uint64_t{0};
  for (const uint64_t seed : {softmax_test::fresh_seed(), max, max - 1, uint64_t{0}}) {
    for (const uint64_t offset : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{4}, uint64_t{5},
                                  uint64_t{6}, uint64_t{7}, max - 7, max - 4, max - 1, max}) {
      for (const float p : {0.25f, 0.75f}) {
        // A run that starts and ends inside groups, and starts at a large flat index.
        for (const uint64_t first : {uint64_t{3}, (uint64_t{1} << 40) + 1}) {
          const int64_t n = 45;
          std::vector<uint8_t> keep(n, 0xAB);
          softmax_internal::cpu::dropout_keep_bytes_scalar(seed, offset, dropout_word_threshold(p), first, n,
                                                           keep.data());
          for (int64_t j = 0; j < n; ++j) {
            const uint64_t i = first + uint64_t(j);
            ASSERT_EQ(keep[size_t(j)], softmax_internal::dropout_keep(seed, offset, i, p) ? 1 : 0)
                << "seed " << seed << " offset " << offset << " element " << i;
            ASSERT_EQ(keep[size_t(j)], softmax_cpu_test::curand_keep(seed, offset, i, p) ? 1 : 0)
                << "seed " << seed << " offset " << offset << " element " << i;
          }
        }
      }
    }
  }
}

}  // namespace
