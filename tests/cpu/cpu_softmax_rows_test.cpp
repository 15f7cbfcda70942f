// SPDX-License-Identifier: Apache-2.0
// softmax_rows on the CPU backend against the float64 reference: every dtype, softmax and
// log-softmax, the column counts (including chunk boundaries of the long-row path),
// several row counts (so both thread schedules run), large magnitudes, in-place, and single
// rows of 16M+3 elements with a relative-error bound on the whole row.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <tuple>
#include <vector>

#include "cpu_test_util.h"

namespace {

using softmax_cpu_test::Buffer;
using softmax_cpu_test::rows_match_reference;
using softmax_cpu_test::run_rows;

class CpuRows : public ::testing::TestWithParam<std::tuple<softmax_dtype, bool>> {};

// The sizes, plus the chunk edges of the long-row path (8192 elements per chunk).
const int64_t kCols[] = {1, 2, 3, 31, 32, 33, 1023, 1025, 4097, 8191, 8192, 8193, 65537};

TEST_P(CpuRows, MatchesReferenceAcrossSizes) {
  const auto [dtype, log_softmax] = GetParam();
  for (const int64_t cols : kCols) {
    // 1 and 3 rows take the split-row schedule for long rows on 2+ threads, 37 rows the
    // rows-over-threads one; the short-row kernel sees partial and whole tiles.
    for (const int64_t rows : {int64_t{1}, int64_t{3}, int64_t{37}}) {
      if (cols == 65537 && rows == 37 && dtype != SOFTMAX_DTYPE_F32) continue;  // keep the suite quick
      const uint64_t seed = softmax_test::fresh_seed();
      const Buffer x = softmax_test::random_input(dtype, size_t(rows * cols), seed);
      const Buffer y = run_rows(x, rows, cols, log_softmax);
      ASSERT_TRUE(rows_match_reference(x, y, rows, cols, log_softmax, seed));
    }
  }
}

TEST_P(CpuRows, ManyShortRows) {
  // Enough rows that the short-row kernel is shared out over blocks and threads.
  const auto [dtype, log_softmax] = GetParam();
  for (const int64_t cols : {int64_t{32}, int64_t{33}, int64_t{128}}) {
    const int64_t rows = 20011;
    const uint64_t seed = softmax_test::fresh_seed();
    const Buffer x = softmax_test::random_input(dtype, size_t(rows * cols), seed);
    const Buffer y = run_rows(x, rows, cols, log_softmax);
    ASSERT_TRUE(rows_match_reference(x, y, rows, cols, log_softmax, seed));
  }
}

TEST_P(CpuRows, LargeMagnitudes) {
  // Values up to 1e4 in magnitude: most exp terms underflow, the max must be subtracted first,
  // and log-softmax must not lose the small differences to the size of the max.
  const auto [dtype, log_softmax] = GetParam();
  for (const int64_t cols : {int64_t{33}, int64_t{1025}, int64_t{20000}}) {
    const int64_t rows = 5;
    const uint64_t seed = softmax_test::fresh_seed();
    const Buffer x = softmax_test::random_input(dtype, size_t(rows * cols), seed, 1e4f);
    const Buffer y = run_rows(x, rows, cols, log_softmax);
    ASSERT_TRUE(rows_match_reference(x, y, rows, cols, log_softmax, seed));
  }
}

TEST_P(CpuRows, ExactZerosSubnormalsAndInfinities) {
  // Where the float64 result is 0 (or rounds to 0 with room to spare) the output is exactly +0,
  // subnormal results are right to within one subnormal step, and log-softmax gives exactly
  // -inf where float64 rounded to the output type does: short rows, rows in registers, chunks.
  const auto [dtype, log_softmax] = GetParam();
  for (const int64_t cols : {int64_t{2}, int64_t{7}, int64_t{33}, int64_t{1000}, int64_t{8193}, int64_t{20001}}) {
    for (const int threads : {1, 2}) {
      const uint64_t seed = softmax_test::fresh_seed();
      const Buffer x = softmax_cpu_test::exactness_rows(dtype, cols, seed);
      const Buffer y = run_rows(x, softmax_cpu_test::kExactnessRows, cols, log_softmax, threads);
      ASSERT_TRUE(rows_match_reference(x, y, softmax_cpu_test::kExactnessRows, cols, log_softmax, seed))
          << "threads " << threads;
    }
  }
}

// Log-softmax of a row whose max is -0 and whose sum rounds to exactly 1: the max element's
// output is (-0 - -0) - 0 = +0, whatever route the row takes (registers, L1, streamed stores).
TEST(CpuLogSoftmax, ZeroResultOfANegativeZeroMaxIsPositive) {
  for (const int64_t cols : {int64_t{2}, int64_t{7}, int64_t{20}, int64_t{32}, int64_t{40}, int64_t{128}, int64_t{1024}}) {
    for (const bool streamed_size : {false, true}) {
      if (streamed_size && cols != 32 && cols != 128) continue;
      const int64_t rows = streamed_size ? (int64_t{32} << 20) / (4 * cols) : 64;
      std::vector<float> x(size_t(rows * cols), -100.0f), y(size_t(rows * cols));
      for (int64_t r = 0; r < rows; ++r) x[size_t(r * cols)] = -0.0f;
      const softmax_options o = softmax_cpu_test::cpu_options(2, SOFTMAX_FLAG_LOG);
      ASSERT_EQ(softmax_rows(x.data(), y.data(), rows, cols, SOFTMAX_DTYPE_F32, &o), SOFTMAX_STATUS_SUCCESS);
      for (const int64_t r : {int64_t{0}, rows / 2, rows - 1}) {
        ASSERT_EQ(y[size_t(r * cols)], 0.0f) << "cols " << cols << " row " << r;
        ASSERT_FALSE(std::signbit(y[size_t(r * cols)])) << "cols " << cols << " row " << r;
      }
    }
  }
}

TEST_P(CpuRows, InPlace) {
  const auto [dtype, log_softmax] = GetParam();
  // 37 rows of up to four vectors: two groups of 16 taken together where the target allows.
  for (const int64_t cols : {int64_t{16}, int64_t{32}, int64_t{33}, int64_t{64}, int64_t{4097}, int64_t{65537}}) {
    for (const int64_t rows : {int64_t{1}, int64_t{9}, int64_t{37}}) {
      const uint64_t seed = softmax_test::fresh_seed();
      const Buffer x = softmax_test::random_input(dtype, size_t(rows * cols), seed);
      Buffer xy = x;
      const softmax_options o = softmax_cpu_test::cpu_options(0, log_softmax ? SOFTMAX_FLAG_LOG : 0u);
      ASSERT_EQ(softmax_rows(xy.data(), xy.data(), rows, cols, dtype, &o), SOFTMAX_STATUS_SUCCESS)
          << softmax_last_error();
      ASSERT_TRUE(rows_match_reference(x, xy, rows, cols, log_softmax, seed));
      // In place gives the same bits as out of place.
      ASSERT_EQ(xy.bytes, run_rows(x, rows, cols, log_softmax).bytes) << "seed " << seed;
    }
  }
}

TEST_P(CpuRows, MisalignedPointers) {
  // x and y one element off a cache line (and, for 16-bit types, off 4-byte alignment).
  const auto [dtype, log_softmax] = GetParam();
  const int64_t rows = 3, cols = 1031;
  const size_t n = size_t(rows * cols);
  const uint64_t seed = softmax_test::fresh_seed();
  const Buffer x = softmax_test::random_input(dtype, n, seed);
  Buffer xs(dtype, n + 1), ys(dtype, n + 1);
  const size_t es = softmax_test::element_size(dtype);
  std::memcpy(xs.bytes.data() + es, x.bytes.data(), n * es);
  ys.poison();
  const softmax_options o = softmax_cpu_test::cpu_options(0, log_softmax ? SOFTMAX_FLAG_LOG : 0u);
  ASSERT_EQ(softmax_rows(xs.bytes.data() + es, ys.bytes.data() + es, rows, cols, dtype, &o),
            SOFTMAX_STATUS_SUCCESS);
  Buffer y(dtype, n);
  std::memcpy(y.bytes.data(), ys.bytes.data() + es, n * es);
  ASSERT_TRUE(rows_match_reference(x, y, rows, cols, log_softmax, seed));
}

std::string ParamName(const ::testing::TestParamInfo<CpuRows::ParamType>& info) {
  return std::string(softmax_test::dtype_name(std::get<0>(info.param))) +
         (std::get<1>(info.param) ? "_log" : "_softmax");
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, CpuRows,
                         ::testing::Combine(::testing::Values(SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F16,
                                                              SOFTMAX_DTYPE_BF16),
                                            ::testing::Bool()),
                         ParamName);

// Rows of 4 MiB of x and more whose exps are not kept (past 1M columns; log-softmax keeps none)
// run each thread's rows in order, the next row's first pass between the current row's
// second-pass chunks: with two threads against float64, and the bits of three threads (9 rows:
// chunks over threads), of one (rows in order too) and of each row alone.
TEST(CpuLongRow, RowsPastTheCacheMatchFloat64AndTheirBitsAlone) {
  const int64_t rows = 9, cols = (int64_t{1} << 20) + 5;
  for (const bool log_softmax : {false, true}) {
    const uint64_t seed = softmax_test::fresh_seed();
    const Buffer x = softmax_test::random_input(SOFTMAX_DTYPE_F32, size_t(rows * cols), seed);
    const Buffer y = softmax_cpu_test::run_rows(x, rows, cols, log_softmax, 2);
    ASSERT_TRUE(rows_match_reference(x, y, rows, cols, log_softmax, seed));
    for (const int threads : {1, 3})
      ASSERT_TRUE(softmax_cpu_test::same_bytes(softmax_cpu_test::run_rows(x, rows, cols, log_softmax, threads), y))
          << "threads " << threads << (log_softmax ? " log" : "") << " seed " << seed;
    for (const int64_t r : {int64_t{0}, int64_t{5}, rows - 1}) {
      Buffer xr(SOFTMAX_DTYPE_F32, size_t(cols));
      std::memcpy(xr.data(), x.bytes.data() + size_t(r * cols) * 4, size_t(cols) * 4);
      const Buffer yr = softmax_cpu_test::run_rows(xr, 1, cols, log_softmax, 2);
      ASSERT_EQ(0, std::memcmp(yr.data(), y.bytes.data() + size_t(r * cols) * 4, size_t(cols) * 4))
          << "row " << r << (log_softmax ? " log" : "") << " seed " << seed;
    }
  }
}

// One row of 16M+3 elements: split over threads in chunks; the whole row must sum to 1 and every
// element must be within relative 1e-5 of the float64 value (fp32 storage; 16-bit storage is
// checked with its own rounding by check_row).
TEST(CpuLongRow, SixteenMillionPlusThree) {
  const int64_t cols = (int64_t{1} << 24) + 3;
  for (const softmax_dtype dtype : softmax_cpu_test::kAllDtypes) {
    for (const bool log_softmax : {false, true}) {
      const uint64_t seed = softmax_test::fresh_seed();
      const Buffer x = softmax_test::random_input(dtype, size_t(cols), seed);
      const Buffer y = run_rows(x, 1, cols, log_softmax);
      ASSERT_TRUE(rows_match_reference(x, y, 1, cols, log_softmax, seed));
      if (dtype == SOFTMAX_DTYPE_F32 && !log_softmax) {
        std::vector<double> ref;
        softmax_test::reference_row(x, 0, size_t(cols), false, &ref);
        double worst = 0, sum = 0;
        for (int64_t c = 0; c < cols; ++c) {
          worst = std::max(worst, std::fabs(y.get(size_t(c)) - ref[size_t(c)]) / ref[size_t(c)]);
          sum += y.get(size_t(c));
        }
        EXPECT_LT(worst, 1e-5) << "seed " << seed;
        EXPECT_NEAR(sum, 1.0, 1e-5) << "seed " << seed;
        RecordProperty("max_relative_error", std::to_string(worst));
      }
    }
  }
}

}  // namespace
