// SPDX-License-Identifier: Apache-2.0
// Bitwise reproducibility of the CPU backend: the same input gives the same bits whatever the
// thread count (1, 2, 3, 7), and a row gives the same bits whether it is computed alone or as
// part of a bigger call (so the choice between rows-over-threads and split-row schedules, which
// depends on the row count, never shows in the result).
#include <gtest/gtest.h>

#include <cstdlib>
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

namespace {

// Outputs of 32 MiB and more go out through non-temporal stores, by a different route when y
// and every row are vector-aligned. Those routes must give the bits of the ordinary one (a
// single row, whose output is small) and match the reference. Rows of up to 64 columns are held
// in registers (32, 40: whole vectors; 33: a partial last one), longer ones go through L1.
TEST(CpuDeterminism, StreamedOutputsEqualSmallCalls) {
  struct AlignedFloats {
    float* p;
    explicit AlignedFloats(size_t n)
        : p(static_cast<float*>(std::aligned_alloc(64, (n * sizeof(float) + 63) & ~size_t{63}))) {}
    ~AlignedFloats() { std::free(p); }
  };
  for (const int64_t cols : {int64_t{128}, int64_t{1024}, int64_t{1040}, int64_t{33}, int64_t{32}, int64_t{40}}) {
    for (const size_t misalign : {size_t{0}, size_t{1}}) {
      for (const bool log_softmax : {false, true}) {
        const int64_t rows = ((int64_t{32} << 20) / 4 + cols - 1) / cols;
        const size_t n = size_t(rows * cols);
        const uint64_t seed = softmax_test::fresh_seed();
        const Buffer x = softmax_test::random_input(SOFTMAX_DTYPE_F32, n, seed);
        AlignedFloats y(n + 16);
        float* yp = y.p + misalign;
        const softmax_options o = softmax_cpu_test::cpu_options(2, log_softmax ? SOFTMAX_FLAG_LOG : 0u);
        ASSERT_EQ(softmax_rows(x.data(), yp, rows, cols, SOFTMAX_DTYPE_F32, &o), SOFTMAX_STATUS_SUCCESS);
        const size_t es = 4;
        for (const int64_t r : {int64_t{0}, rows / 3, rows - 1}) {
          Buffer xr(SOFTMAX_DTYPE_F32, size_t(cols));
          std::memcpy(xr.data(), x.bytes.data() + size_t(r * cols) * es, size_t(cols) * es);
          const Buffer yr = softmax_cpu_test::run_rows(xr, 1, cols, log_softmax, 1);
          ASSERT_EQ(0, std::memcmp(yr.data(), yp + r * cols, size_t(cols) * es))
              << "cols " << cols << " misalign " << misalign << " row " << r << (log_softmax ? " log" : "")
              << " seed " << seed;
          ASSERT_TRUE(softmax_cpu_test::rows_match_reference(xr, yr, 1, cols, log_softmax, seed));
        }
      }
    }
  }
}

}  // namespace

namespace {

// Long rows whose output is streamed: vector-aligned chunks go to y directly, misaligned ones
// through the Output buffer; both must give the same bits, and match the reference.
TEST(CpuDeterminism, StreamedLongRowsAlignedEqualsMisaligned) {
  for (const int64_t cols : {int64_t{65536}, int64_t{1} << 23}) {
    for (const bool log_softmax : {false, true}) {
      const int64_t rows = (int64_t{32} << 20) / 4 / cols;
      const size_t n = size_t(rows * cols);
      const uint64_t seed = softmax_test::fresh_seed();
      const Buffer x = softmax_test::random_input(SOFTMAX_DTYPE_F32, n, seed);
      float* buf = static_cast<float*>(std::aligned_alloc(64, ((2 * n + 32) * sizeof(float) + 63) & ~size_t{63}));
      float* aligned = buf;
      float* misaligned = buf + n + 17;
      const softmax_options o = softmax_cpu_test::cpu_options(2, log_softmax ? SOFTMAX_FLAG_LOG : 0u);
      ASSERT_EQ(softmax_rows(x.data(), aligned, rows, cols, SOFTMAX_DTYPE_F32, &o), SOFTMAX_STATUS_SUCCESS);
      ASSERT_EQ(softmax_rows(x.data(), misaligned, rows, cols, SOFTMAX_DTYPE_F32, &o), SOFTMAX_STATUS_SUCCESS);
      const bool same = std::memcmp(aligned, misaligned, n * sizeof(float)) == 0;
      Buffer y(SOFTMAX_DTYPE_F32, size_t(cols));
      std::memcpy(y.data(), aligned, size_t(cols) * sizeof(float));
      Buffer x0(SOFTMAX_DTYPE_F32, size_t(cols));
      std::memcpy(x0.data(), x.data(), size_t(cols) * sizeof(float));
      std::free(buf);
      ASSERT_TRUE(same) << "cols " << cols << (log_softmax ? " log" : "") << " seed " << seed;
      ASSERT_TRUE(softmax_cpu_test::rows_match_reference(x0, y, 1, cols, log_softmax, seed));
    }
  }
}

}  // namespace
