// SPDX-License-Identifier: Apache-2.0
// The Highway kernels are compiled for several x86 targets (AVX-512, AVX2, SSE4, SSSE3, scalar)
// and the best one the CPU supports is used; the others only run on older machines. This suite
// forces each target this CPU can run, one after another, and checks it against the float64
// reference, including non-finite rows (whose NaN propagation differs between targets' max).
// Built only when libsoftmax uses Highway.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cstdio>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "cpu_test_util.h"
#include "curand_reference.h"

namespace {

using softmax_cpu_test::Buffer;

class ForcedTarget {
 public:
  explicit ForcedTarget(int64_t target) { hwy::SetSupportedTargetsForTest(target); }
  ~ForcedTarget() { hwy::SetSupportedTargetsForTest(0); }
};

// Runs body(target) for each Highway target this CPU can run, with that target forced meanwhile,
// until a fatal failure; returns how many targets ran.
template <class Body>
int for_each_runnable_target(Body&& body) {
  const int64_t runnable = hwy::SupportedTargets() & HWY_TARGETS;
  int ran = 0;
  for (int bit = 0; bit < 63 && !::testing::Test::HasFatalFailure(); ++bit) {
    const int64_t target = int64_t{1} << bit;
    if ((runnable & target) == 0) continue;
    ForcedTarget forced(target);
    std::printf("forcing Highway target %s\n", hwy::TargetName(target));
    body(target);
    ++ran;
  }
  return ran;
}

TEST(CpuHighwayTargets, EveryRunnableTargetMatchesReference) {
  const int ran = for_each_runnable_target([&](int64_t target) {
    for (const softmax_dtype dtype : softmax_cpu_test::kAllDtypes) {
      for (const int64_t cols : {int64_t{1}, int64_t{3}, int64_t{17}, int64_t{33}, int64_t{65}, int64_t{1025},
                                 int64_t{20001}}) {
        for (const bool log_softmax : {false, true}) {
          const int64_t rows = 6;
          const uint64_t seed = softmax_test::fresh_seed();
          Buffer x = softmax_test::random_input(dtype, size_t(rows * cols), seed);
          const float inf = std::numeric_limits<float>::infinity();
          x.set(size_t(1 * cols + cols / 2), std::numeric_limits<float>::quiet_NaN());
          x.set(size_t(2 * cols), inf);
          for (int64_t c = 0; c < cols; ++c) x.set(size_t(3 * cols + c), -inf);
          x.set(size_t(4 * cols + cols - 1), -inf);
          const Buffer y = softmax_cpu_test::run_rows(x, rows, cols, log_softmax);
          ASSERT_TRUE(softmax_cpu_test::rows_match_reference(x, y, rows, cols, log_softmax, seed))
              << "target " << hwy::TargetName(target);
        }
      }
    }
  });
  EXPECT_GT(ran, 0);
}

TEST(CpuHighwayTargets, EveryRunnableTargetIsExactAtTheEndsOfTheRange) {
  // Exact +0 and -inf, subnormal outputs, largest magnitudes (cpu_test_util.h's exactness rows)
  // on each target, for rows in registers (7, 33, 65), in L1 (1025) and in chunks (20001).
  const int ran = for_each_runnable_target([&](int64_t target) {
    for (const softmax_dtype dtype : softmax_cpu_test::kAllDtypes) {
      for (const int64_t cols : {int64_t{2}, int64_t{7}, int64_t{33}, int64_t{65}, int64_t{1025}, int64_t{20001}}) {
        for (const bool log_softmax : {false, true}) {
          const uint64_t seed = softmax_test::fresh_seed();
          const Buffer x = softmax_cpu_test::exactness_rows(dtype, cols, seed);
          const Buffer y = softmax_cpu_test::run_rows(x, softmax_cpu_test::kExactnessRows, cols, log_softmax);
          ASSERT_TRUE(softmax_cpu_test::rows_match_reference(x, y, softmax_cpu_test::kExactnessRows, cols,
                                                             log_softmax, seed))
              << "target " << hwy::TargetName(target);
        }
      }
    }
  });
  EXPECT_GT(ran, 0);
}

TEST(CpuHighwayTargets, EveryRunnableTargetGivesThePhiloxMask) {
  // Against the independent cuRAND restatement (curand_reference.h): every Philox phase
  // (offset % 4), offsets and seeds next to 2^64, groups of 4 straddling rows (3, 33) and chunks
  // (8195), for the short-row and the chunked dropout kernels.
  const uint64_t max = ~uint64_t{0};
  const int ran = for_each_runnable_target([&](int64_t target) {
    for (const int64_t cols : {int64_t{3}, int64_t{33}, int64_t{1027}, int64_t{8195}}) {
      for (const uint64_t offset : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{4}, uint64_t{5},
                                    uint64_t{6}, uint64_t{7}, max - 2, max}) {
        for (const uint64_t seed : {softmax_test::fresh_seed(), max - 1}) {
          const int64_t rows = cols > 1000 ? 2 : softmax_cpu_test::kExactnessRows;
          const Buffer x = softmax_cpu_test::exactness_rows(SOFTMAX_DTYPE_F32, cols, seed);
          Buffer y(SOFTMAX_DTYPE_F32, size_t(rows * cols));
          std::vector<uint8_t> mask(y.size(), 0xAB);
          const softmax_options o = softmax_cpu_test::cpu_options();
          ASSERT_EQ(softmax_dropout(x.data(), y.data(), mask.data(), rows, cols, SOFTMAX_DTYPE_F32, 0.37f, seed,
                                    offset, &o),
                    SOFTMAX_STATUS_SUCCESS);
          for (size_t i = 0; i < mask.size(); ++i) {
            ASSERT_EQ(mask[i], softmax_cpu_test::curand_keep(seed, offset, i, 0.37f) ? 1 : 0)
                << "target " << hwy::TargetName(target) << " element " << i << " seed " << seed << " offset "
                << offset;
          }
          ASSERT_TRUE(softmax_cpu_test::dropout_matches_reference(x, y, mask, rows, cols, 0.37f, seed))
              << "target " << hwy::TargetName(target) << " offset " << offset;
        }
      }
    }
    // Many tiles of short rows, each tile's keep bytes drawn between the rows of the one before.
    for (const auto [rows, cols] : {std::pair<int64_t, int64_t>{700, 33}, {20, 1024}}) {
      for (const uint64_t offset : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{3}}) {
        const uint64_t seed = softmax_test::fresh_seed();
        const Buffer x = softmax_test::random_input(SOFTMAX_DTYPE_F32, size_t(rows * cols), seed);
        Buffer y(SOFTMAX_DTYPE_F32, size_t(rows * cols));
        std::vector<uint8_t> mask(y.size(), 0xAB);
        const softmax_options o = softmax_cpu_test::cpu_options();
        ASSERT_EQ(softmax_dropout(x.data(), y.data(), mask.data(), rows, cols, SOFTMAX_DTYPE_F32, 0.37f, seed, offset,
                                  &o),
                  SOFTMAX_STATUS_SUCCESS);
        for (size_t i = 0; i < mask.size(); ++i) {
          ASSERT_EQ(mask[i], softmax_cpu_test::curand_keep(seed, offset, i, 0.37f) ? 1 : 0)
              << "target " << hwy::TargetName(target) << " " << rows << "x" << cols << " element " << i;
        }
        ASSERT_TRUE(softmax_cpu_test::dropout_matches_reference(x, y, mask, rows, cols, 0.37f, seed))
            << "target " << hwy::TargetName(target) << " " << rows << "x" << cols << " offset " << offset;
      }
    }
  });
  EXPECT_GT(ran, 0);
}

// Streamed f32 outputs (cpu_test_util.h) on each target: rows in registers (33 columns), in L1
// (129, 1000), on and off vector boundaries, give the bits of that target's small calls and write
// nothing outside y; softmax_dropout gives the same bits and mask at every alignment.
TEST(CpuHighwayTargets, EveryRunnableTargetStreamsTheBitsOfSmallCalls) {
  const int ran = for_each_runnable_target([&](int64_t target) {
    for (const int64_t cols : {int64_t{33}, int64_t{129}, int64_t{1000}}) {
      const int64_t rows = softmax_cpu_test::streamed_rows_for(cols);
      const size_t n = size_t(rows * cols);
      const uint64_t seed = softmax_test::fresh_seed();
      const Buffer x = softmax_test::random_input(SOFTMAX_DTYPE_F32, n, seed);
      const std::vector<float> small = softmax_cpu_test::rows_in_small_calls(x, cols, false);
      for (const size_t misalign : {size_t{0}, size_t{1}}) {
        ASSERT_TRUE(softmax_cpu_test::streamed_rows_equal(x, cols, false, misalign, small))
            << "target " << hwy::TargetName(target) << " cols " << cols << " misalign " << misalign << " seed "
            << seed;
      }
      const softmax_options o = softmax_cpu_test::cpu_options(2);
      softmax_cpu_test::GuardedF32 on(n, 0), off(n, 1);
      std::vector<uint8_t> mask_on(n), mask_off(n, 7);
      ASSERT_EQ(softmax_dropout(x.data(), on.y(), mask_on.data(), rows, cols, SOFTMAX_DTYPE_F32, 0.25f, seed, 3, &o),
                SOFTMAX_STATUS_SUCCESS);
      ASSERT_EQ(softmax_dropout(x.data(), off.y(), mask_off.data(), rows, cols, SOFTMAX_DTYPE_F32, 0.25f, seed, 3, &o),
                SOFTMAX_STATUS_SUCCESS);
      ASSERT_TRUE(std::memcmp(on.y(), off.y(), n * sizeof(float)) == 0 && mask_on == mask_off &&
                  on.guards_intact() && off.guards_intact())
          << "target " << hwy::TargetName(target) << " dropout cols " << cols << " seed " << seed;
    }
  });
  EXPECT_GT(ran, 0);
}

}  // namespace
