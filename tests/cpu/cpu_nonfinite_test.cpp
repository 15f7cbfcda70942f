// SPDX-License-Identifier: Apache-2.0
// Non-finite inputs follow the textbook formula in float64 (DESIGN.md): NaN anywhere in a row
// makes the row NaN, a row of all -inf is NaN, any +inf makes the row NaN, and -inf elements in
// an otherwise finite row give 0 (log-softmax: -inf). Checked for short rows and for rows long
// enough to be split into chunks (where a chunk may be all -inf, or hold the only NaN).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "cpu_test_util.h"

namespace {

using softmax_cpu_test::Buffer;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Rows of `cols` random values, each row then given its own pattern of non-finite values.
Buffer special_rows(softmax_dtype dtype, int64_t cols, uint64_t seed, int64_t* rows_out) {
  const int64_t rows = 9;
  Buffer x = softmax_test::random_input(dtype, size_t(rows * cols), seed);
  auto at = [&](int64_t r, int64_t c) { return size_t(r * cols + c); };
  const int64_t last = cols - 1, mid = cols / 2;
  x.set(at(0, mid), kNaN);                                  // one NaN
  x.set(at(1, last), kInf);                                 // one +inf
  for (int64_t c = 0; c < cols; ++c) x.set(at(2, c), -kInf);  // all -inf
  x.set(at(3, 0), -kInf);                                   // some -inf, finite max
  x.set(at(3, last), -kInf);
  x.set(at(4, 0), kInf);                                    // +inf and -inf
  x.set(at(4, last), -kInf);
  x.set(at(5, 0), kNaN);                                    // NaN and +inf
  x.set(at(5, mid), kInf);
  // Row 6: the first half all -inf (whole chunks of -inf when the row is long), rest finite.
  for (int64_t c = 0; c < mid; ++c) x.set(at(6, c), -kInf);
  // Row 7: NaN in the last element only (the tail of the last chunk).
  x.set(at(7, last), kNaN);
  // Row 8 stays finite: a neighbour of special rows must be unaffected.
  *rows_out = rows;
  return x;
}

class CpuNonFinite : public ::testing::TestWithParam<softmax_dtype> {};

TEST_P(CpuNonFinite, FollowsFloat64Formula) {
  const softmax_dtype dtype = GetParam();
  for (const int64_t cols : {int64_t{2}, int64_t{33}, int64_t{1025}, int64_t{3 * 8192 + 5}}) {
    for (const bool log_softmax : {false, true}) {
      for (const int threads : {1, 2}) {
        const uint64_t seed = softmax_test::fresh_seed();
        int64_t rows = 0;
        const Buffer x = special_rows(dtype, cols, seed, &rows);
        const Buffer y = softmax_cpu_test::run_rows(x, rows, cols, log_softmax, threads);
        ASSERT_TRUE(softmax_cpu_test::rows_match_reference(x, y, rows, cols, log_softmax, seed))
            << "threads " << threads;
      }
    }
  }
}

TEST_P(CpuNonFinite, SingleElementRows) {
  // cols == 1: softmax is 1 (log: 0) for any finite value, NaN for NaN and +-inf.
  const softmax_dtype dtype = GetParam();
  const float values[] = {0.0f, -3.0f, 1e4f, -kInf, kInf, kNaN};
  Buffer x(dtype, 6);
  for (size_t i = 0; i < 6; ++i) x.set(i, values[i]);
  for (const bool log_softmax : {false, true}) {
    const Buffer y = softmax_cpu_test::run_rows(x, 6, 1, log_softmax);
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(y.get(i), log_softmax ? 0.0f : 1.0f) << i;
    for (size_t i = 3; i < 6; ++i) EXPECT_TRUE(std::isnan(y.get(i))) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, CpuNonFinite,
                         ::testing::Values(SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F16, SOFTMAX_DTYPE_BF16),
                         [](const ::testing::TestParamInfo<softmax_dtype>& i) {
                           return std::string(softmax_test::dtype_name(i.param));
                         });

}  // namespace
