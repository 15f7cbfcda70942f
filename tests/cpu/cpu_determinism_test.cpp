// Bitwise reproducibility of the CPU backend: the same input gives the same bits whatever the
// thread count (1, 2, 3, 7), and a row gives the same bits whether it is computed alone or as
// part of a bigger call (so the choice between rows-over-threads and split-row schedules, which
// depends on the row count, never shows in the result).
#include <gtest/gtest.h>

#include <cstring>

#include "cpu_test_util.h"

namespace {

using softmax_cpu_test::Buffer;

struct Shape {
  int64_t rows, cols;
};

// Short rows, rows of a few chunks (both schedules), and a long row split over many chunks.
const Shape kShapes[] = {{1000, 33}, {64, 4097}, {1, 65537}, {3, 65537}, {9, 65537}, {1, (1 << 21) + 7}};

TEST(CpuDeterminism, SameBitsForAnyThreadCount) {
  for (const softmax_dtype dtype : softmax_cpu_test::kAllDtypes) {
    for (const Shape s : kShapes) {
      const uint64_t seed = softmax_test::fresh_seed();
      const Buffer x = softmax_test::random_input(dtype, size_t(s.rows * s.cols), seed);
      for (const bool log_softmax : {false, true}) {
        const Buffer one = softmax_cpu_test::run_rows(x, s.rows, s.cols, log_softmax, 1);
        for (const int threads : {2, 3, 7}) {
          const Buffer many = softmax_cpu_test::run_rows(x, s.rows, s.cols, log_softmax, threads);
          ASSERT_TRUE(softmax_cpu_test::same_bytes(one, many))
              << softmax_test::dtype_name(dtype) << " " << s.rows << "x" << s.cols << (log_softmax ? " log" : "")
              << " threads " << threads << " seed " << seed;
        }
      }
    }
  }
}

TEST(CpuDeterminism, RowAloneEqualsRowInBatch) {
  for (const softmax_dtype dtype : softmax_cpu_test::kAllDtypes) {
    for (const int64_t cols : {int64_t{33}, int64_t{4097}, int64_t{20000}, int64_t{65537}}) {
      const int64_t rows = 13;
      const uint64_t seed = softmax_test::fresh_seed();
      const Buffer x = softmax_test::random_input(dtype, size_t(rows * cols), seed);
      const size_t es = softmax_test::element_size(dtype);
      for (const bool log_softmax : {false, true}) {
        const Buffer all = softmax_cpu_test::run_rows(x, rows, cols, log_softmax, 2);
        for (const int64_t r : {int64_t{0}, int64_t{6}, rows - 1}) {
          Buffer xr(dtype, size_t(cols));
          std::memcpy(xr.data(), x.bytes.data() + size_t(r * cols) * es, size_t(cols) * es);
          const Buffer yr = softmax_cpu_test::run_rows(xr, 1, cols, log_softmax, 2);
          ASSERT_EQ(0, std::memcmp(yr.data(), all.bytes.data() + size_t(r * cols) * es, size_t(cols) * es))
              << softmax_test::dtype_name(dtype) << " cols " << cols << " row " << r
              << (log_softmax ? " log" : "") << " seed " << seed;
        }
      }
    }
  }
}

}  // namespace
