// SPDX-License-Identifier: Apache-2.0
// softmax_dropout on the CPU: y = keep ? softmax(x) / (1 - p) : 0 with the keep decision of flat
// element i defined by Philox (backends/common/philox.h). Checks: the mask is exactly
// dropout_keep() per element (groups of 4 straddling rows and chunks, offsets that are not a
// multiple of 4), kept values are the reference softmax times the scale, dropped values are 0,
// the keep rate is within binomial bounds, the same call repeats bit for bit (and for any
// thread count), p = 0 is softmax_rows bit for bit, p = 1 is all zeros.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/common/philox.h"
#include "cpu_test_util.h"
#include "curand_reference.h"

namespace {

using softmax_cpu_test::Buffer;

struct DropoutRun {
  Buffer y;
  std::vector<uint8_t> mask;
};

DropoutRun run_dropout(const Buffer& x, int64_t rows, int64_t cols, float p, uint64_t seed,
                       uint64_t offset, int threads = 0, bool with_mask = true) {
  DropoutRun out{Buffer(x.dtype, x.size()), std::vector<uint8_t>(with_mask ? x.size() : 0, 0xAB)};
  out.y.poison();
  const softmax_options o = softmax_cpu_test::cpu_options(threads);
  const softmax_status s = softmax_dropout(x.data(), out.y.data(), with_mask ? out.mask.data() : nullptr, rows,
                                           cols, x.dtype, p, seed, offset, &o);
  EXPECT_EQ(s, SOFTMAX_STATUS_SUCCESS) << softmax_last_error();
  return out;
}

class CpuDropout : public ::testing::TestWithParam<softmax_dtype> {};

struct Case {
  int64_t rows, cols;
};

TEST_P(CpuDropout, MaskIsPhiloxAndKeptValuesAreScaledSoftmax) {
  const softmax_dtype dtype = GetParam();
  // cols = 3 and 33: Philox groups of 4 straddle rows; 20001: groups straddle chunks; 37-40 rows
  // of up to 128 columns: groups of 16 rows taken together where the target allows.
  for (const Case c : {Case{7, 3}, Case{5, 33}, Case{4, 1025}, Case{2, 20001}, Case{37, 5}, Case{37, 17},
                       Case{40, 32}, Case{37, 50}, Case{37, 100}}) {
    for (const uint64_t offset : {uint64_t{0}, uint64_t{1}, uint64_t{6}, uint64_t{0x100000003}}) {
      const float p = 0.3f;
      const uint64_t seed = softmax_test::fresh_seed();
      const Buffer x = softmax_test::random_input(dtype, size_t(c.rows * c.cols), seed);
      const DropoutRun d = run_dropout(x, c.rows, c.cols, p, seed, offset);
      const double scale = 1.0 / (1.0 - double(p));
      std::vector<double> ref;
      for (int64_t r = 0; r < c.rows; ++r) {
        softmax_test::reference_row(x, size_t(r), size_t(c.cols), false, &ref);
        for (int64_t col = 0; col < c.cols; ++col) {
          const size_t i = size_t(r * c.cols + col);
          const bool keep = softmax_internal::dropout_keep(seed, offset, i, p);
          ASSERT_EQ(d.mask[i], keep ? 1 : 0) << "element " << i << " seed " << seed << " offset " << offset;
          if (keep) {
            const double want = ref[size_t(col)] * scale;
            const double tol = softmax_test::tolerance(dtype, want, false, size_t(c.cols));
            ASSERT_NEAR(d.y.get(i), want, tol)
                << "element " << i << " seed " << seed;
          } else {
            ASSERT_EQ(d.y.get(i), 0.0f) << "element " << i << " seed " << seed;
          }
        }
      }
      // Without a mask the output is the same.
      const DropoutRun no_mask = run_dropout(x, c.rows, c.cols, p, seed, offset, 0, false);
      ASSERT_EQ(no_mask.y.bytes, d.y.bytes) << "seed " << seed;
    }
  }
}

TEST_P(CpuDropout, PZeroIsSoftmaxRowsBitForBit) {
  const softmax_dtype dtype = GetParam();
  for (const int64_t cols : {int64_t{33}, int64_t{4097}, int64_t{65537}}) {
    const int64_t rows = 5;
    const uint64_t seed = softmax_test::fresh_seed();
    const Buffer x = softmax_test::random_input(dtype, size_t(rows * cols), seed);
    const DropoutRun d = run_dropout(x, rows, cols, 0.0f, seed, 0);
    const Buffer plain = softmax_cpu_test::run_rows(x, rows, cols, false);
    ASSERT_EQ(d.y.bytes, plain.bytes) << "cols " << cols << " seed " << seed;
    for (uint8_t m : d.mask) ASSERT_EQ(m, 1);
  }
}

TEST_P(CpuDropout, POneIsAllZeros) {
  const softmax_dtype dtype = GetParam();
  const int64_t rows = 3, cols = 1025;
  const uint64_t seed = softmax_test::fresh_seed();
  const Buffer x = softmax_test::random_input(dtype, size_t(rows * cols), seed);
  const DropoutRun d = run_dropout(x, rows, cols, 1.0f, seed, 0);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(d.y.get(i), 0.0f) << i;
    ASSERT_EQ(d.mask[i], 0) << i;
  }
}

TEST_P(CpuDropout, MaskEqualsIndependentCurandReference) {
  // Every Philox phase and counters next to 2^64, for short rows (groups of 4 straddling rows)
  // and chunked rows (groups straddling chunks), with and without a mask buffer.
  const softmax_dtype dtype = GetParam();
  const uint64_t max = ~uint64_t{0};
  for (const Case c : {Case{6, 7}, Case{2, 8195}}) {
    for (const uint64_t offset : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{4}, uint64_t{5},
                                  uint64_t{6}, uint64_t{7}, max - 1}) {
      for (const uint64_t seed : {softmax_test::fresh_seed(), max, max - 1}) {
        const Buffer x = softmax_test::random_input(dtype, size_t(c.rows * c.cols), seed);
        const DropoutRun d = run_dropout(x, c.rows, c.cols, 0.6f, seed, offset);
        for (size_t i = 0; i < d.mask.size(); ++i) {
          ASSERT_EQ(d.mask[i], softmax_cpu_test::curand_keep(seed, offset, i, 0.6f) ? 1 : 0)
              << "element " << i << " seed " << seed << " offset " << offset;
        }
        ASSERT_TRUE(softmax_cpu_test::dropout_matches_reference(x, d.y, d.mask, c.rows, c.cols, 0.6f, seed));
        ASSERT_EQ(run_dropout(x, c.rows, c.cols, 0.6f, seed, offset, 0, false).y.bytes, d.y.bytes) << seed;
      }
    }
  }
}

// Rows of 4 MiB of x and more whose exps are not kept (past 1M columns) run each thread's rows in
// order, the next row's first pass between the current row's second-pass chunks: with two
// threads, against the reference and the independent keep rule, and the bits of three threads
// (9 rows: chunks over threads) and of one, which runs the rows in order too.
TEST(CpuDropoutLongRows, RowsPastTheCacheMatchTheReferenceAndOtherSchedules) {
  const int64_t rows = 9, cols = (int64_t{1} << 20) + 5;
  const uint64_t seed = softmax_test::fresh_seed(), offset = 3;
  const Buffer x = softmax_test::random_input(SOFTMAX_DTYPE_F32, size_t(rows * cols), seed);
  const DropoutRun d = run_dropout(x, rows, cols, 0.2f, seed, offset, 2);
  for (size_t i = 0; i < d.mask.size(); ++i)
    ASSERT_EQ(d.mask[i], softmax_cpu_test::curand_keep(seed, offset, i, 0.2f) ? 1 : 0) << "element " << i << " seed " << seed;
  ASSERT_TRUE(softmax_cpu_test::dropout_matches_reference(x, d.y, d.mask, rows, cols, 0.2f, seed));
  for (const int threads : {1, 3}) {
    const DropoutRun other = run_dropout(x, rows, cols, 0.2f, seed, offset, threads);
    ASSERT_EQ(other.y.bytes, d.y.bytes) << "threads " << threads << " seed " << seed;
    ASSERT_EQ(other.mask, d.mask) << "threads " << threads << " seed " << seed;
  }
}

TEST_P(CpuDropout, ManyTilesOfShortRowsMatchTheReference) {
  // Short rows go through the kernel in tiles of about 8K elements, the keep bytes of each tile
  // drawn between the rows of the one before: many tiles per thread, rows held in registers
  // (33, 100, 201 columns) and not (1024, 5000), groups of 4 straddling rows (3, 33, 201), every
  // phase.
  const softmax_dtype dtype = GetParam();
  for (const Case c :
       {Case{3000, 3}, Case{1000, 33}, Case{300, 100}, Case{150, 201}, Case{64, 1024}, Case{9, 5000}}) {
    for (const uint64_t offset : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{3}}) {
      const uint64_t seed = softmax_test::fresh_seed();
      const Buffer x = softmax_test::random_input(dtype, size_t(c.rows * c.cols), seed);
      const DropoutRun d = run_dropout(x, c.rows, c.cols, 0.2f, seed, offset);
      for (size_t i = 0; i < d.mask.size(); ++i) {
        ASSERT_EQ(d.mask[i], softmax_cpu_test::curand_keep(seed, offset, i, 0.2f) ? 1 : 0)
            << c.rows << "x" << c.cols << " element " << i << " seed " << seed << " offset " << offset;
      }
      ASSERT_TRUE(softmax_cpu_test::dropout_matches_reference(x, d.y, d.mask, c.rows, c.cols, 0.2f, seed))
          << c.rows << "x" << c.cols << " offset " << offset;
      ASSERT_EQ(run_dropout(x, c.rows, c.cols, 0.2f, seed, offset, 1, false).y.bytes, d.y.bytes) << seed;
      Buffer xy = x;
      std::vector<uint8_t> mask(x.size());
      const softmax_options o = softmax_cpu_test::cpu_options();
      ASSERT_EQ(softmax_dropout(xy.data(), xy.data(), mask.data(), c.rows, c.cols, dtype, 0.2f, seed, offset, &o),
                SOFTMAX_STATUS_SUCCESS);
      ASSERT_EQ(xy.bytes, d.y.bytes) << "in place, seed " << seed;
      ASSERT_EQ(mask, d.mask) << "in place, seed " << seed;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, CpuDropout,
                         ::testing::Values(SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F16, SOFTMAX_DTYPE_BF16),
                         [](const ::testing::TestParamInfo<softmax_dtype>& i) {
                           return std::string(softmax_test::dtype_name(i.param));
                         });

TEST(CpuDropoutStats, KeepRateWithinBinomialBounds) {
  const int64_t rows = 256, cols = 4099;  // ~1M elements
  const double n = double(rows * cols);
  for (const float p : {0.1f, 0.5f, 0.9f}) {
    const uint64_t seed = softmax_test::fresh_seed();
    const Buffer x = softmax_test::random_input(SOFTMAX_DTYPE_F32, size_t(rows * cols), seed);
    const DropoutRun d = run_dropout(x, rows, cols, p, seed, 12345);
    double kept = 0;
    for (uint8_t m : d.mask) kept += m;
    const double mean = n * (1.0 - p), sigma = std::sqrt(n * p * (1.0 - p));
    EXPECT_LE(std::fabs(kept - mean), 6.0 * sigma) << "p " << p << " kept " << kept << " seed " << seed;
  }
}

TEST(CpuDropoutStats, ReproducibleAndThreadIndependent) {
  for (const softmax_dtype dtype : softmax_cpu_test::kAllDtypes) {
    for (const int64_t cols : {int64_t{33}, int64_t{65537}}) {
      const int64_t rows = cols == 33 ? 3001 : 3;
      const uint64_t seed = softmax_test::fresh_seed();
      const Buffer x = softmax_test::random_input(dtype, size_t(rows * cols), seed);
      const DropoutRun first = run_dropout(x, rows, cols, 0.25f, seed, 7, 1);
      for (const int threads : {1, 2, 3, 7}) {
        const DropoutRun again = run_dropout(x, rows, cols, 0.25f, seed, 7, threads);
        ASSERT_EQ(again.y.bytes, first.y.bytes) << "threads " << threads << " seed " << seed;
        ASSERT_EQ(again.mask, first.mask) << "threads " << threads << " seed " << seed;
      }
      // A different seed or offset gives a different mask.
      ASSERT_NE(run_dropout(x, rows, cols, 0.25f, seed + 1, 7).mask, first.mask) << seed;
      ASSERT_NE(run_dropout(x, rows, cols, 0.25f, seed, 8).mask, first.mask) << seed;
    }
  }
}

TEST(CpuDropoutStats, InPlace) {
  const int64_t rows = 4, cols = 20001;
  const uint64_t seed = softmax_test::fresh_seed();
  const Buffer x = softmax_test::random_input(SOFTMAX_DTYPE_F32, size_t(rows * cols), seed);
  const DropoutRun d = run_dropout(x, rows, cols, 0.4f, seed, 3);
  Buffer xy = x;
  std::vector<uint8_t> mask(x.size());
  const softmax_options o = softmax_cpu_test::cpu_options();
  ASSERT_EQ(softmax_dropout(xy.data(), xy.data(), mask.data(), rows, cols, SOFTMAX_DTYPE_F32, 0.4f, seed, 3, &o),
            SOFTMAX_STATUS_SUCCESS);
  ASSERT_EQ(xy.bytes, d.y.bytes) << seed;
  ASSERT_EQ(mask, d.mask) << seed;
}

}  // namespace
