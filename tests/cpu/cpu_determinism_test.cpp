// SPDX-License-Identifier: Apache-2.0
// Bitwise reproducibility of the CPU backend: the same input gives the same bits whatever the
// thread count (1, 2, 3, 7), and a row gives the same bits whether it is computed alone or as
// part of a bigger call (so the choice between rows-over-threads and split-row schedules, which
// depends on the row count, never shows in the result).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

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

// Rows of up to four vectors go 16 at a time where the target allows (their reductions taken
// together), others one at a time: 37 rows are two such groups and five rows alone.
TEST(CpuDeterminism, RowAloneEqualsRowInBatch) {
  for (const softmax_dtype dtype : softmax_cpu_test::kAllDtypes) {
    for (const int64_t cols : {int64_t{1}, int64_t{5}, int64_t{16}, int64_t{17}, int64_t{31}, int64_t{32},
                               int64_t{33}, int64_t{48}, int64_t{64}, int64_t{65}, int64_t{4097}, int64_t{20000},
                               int64_t{65537}}) {
      const int64_t rows = 37;
      const uint64_t seed = softmax_test::fresh_seed();
      const Buffer x = softmax_test::random_input(dtype, size_t(rows * cols), seed);
      const size_t es = softmax_test::element_size(dtype);
      for (const bool log_softmax : {false, true}) {
        const Buffer all = softmax_cpu_test::run_rows(x, rows, cols, log_softmax, 2);
        for (const int64_t r : {int64_t{0}, int64_t{6}, int64_t{15}, int64_t{17}, int64_t{31}, rows - 1}) {
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

// Every route to a streamed f32 y (cpu_test_util.h) gives the bits of small calls over the whole
// output and writes nothing outside it, and the rows match the reference. Rows of up to 128
// columns are held in registers, longer ones go through L1; x is f32, or bf16 with y in f32.
const int64_t kStreamedCols[] = {32, 33, 128, 129, 257, 511, 512, 1000, 1024, 1040};

TEST(CpuDeterminism, StreamedOutputsEqualSmallCalls) {
  for (const softmax_dtype x_dtype : {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_BF16}) {
    for (const int64_t cols : kStreamedCols) {
      const int64_t rows = softmax_cpu_test::streamed_rows_for(cols);
      const size_t es = softmax_test::element_size(x_dtype);
      const uint64_t seed = softmax_test::fresh_seed();
      const Buffer x = softmax_test::random_input(x_dtype, size_t(rows * cols), seed);
      for (const bool log_softmax : {false, true}) {
        const std::vector<float> small = softmax_cpu_test::rows_in_small_calls(x, cols, log_softmax);
        for (const size_t misalign : {size_t{0}, size_t{1}, size_t{5}}) {
          ASSERT_TRUE(softmax_cpu_test::streamed_rows_equal(x, cols, log_softmax, misalign, small))
              << softmax_test::dtype_name(x_dtype) << " cols " << cols << " misalign " << misalign
              << (log_softmax ? " log" : "") << " seed " << seed;
        }
        for (const int64_t r : {int64_t{0}, rows / 3, rows - 1}) {
          Buffer xr(x_dtype, size_t(cols)), yr(SOFTMAX_DTYPE_F32, size_t(cols));
          std::memcpy(xr.data(), x.bytes.data() + size_t(r * cols) * es, size_t(cols) * es);
          std::memcpy(yr.data(), small.data() + r * cols, size_t(cols) * sizeof(float));
          ASSERT_TRUE(softmax_cpu_test::rows_match_reference(xr, yr, 1, cols, log_softmax, seed));
        }
      }
    }
  }
}

// softmax_dropout into a streamed f32 y: every y alignment (each taking its own route for some of
// these lengths) gives the same bits and mask, nothing outside y is written, and the rows match
// the reference. Offset 3 puts each row's Philox groups across row boundaries.
TEST(CpuDeterminism, StreamedDropoutSameBitsAtEveryAlignment) {
  const float p = 0.25f;
  const uint64_t offset = 3;
  for (const softmax_dtype x_dtype : {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_BF16}) {
    for (const int64_t cols : kStreamedCols) {
      const int64_t rows = softmax_cpu_test::streamed_rows_for(cols);
      const size_t n = size_t(rows * cols), es = softmax_test::element_size(x_dtype);
      const uint64_t seed = softmax_test::fresh_seed();
      const Buffer x = softmax_test::random_input(x_dtype, n, seed);
      const softmax_options o = softmax_cpu_test::f32_y_options(x_dtype, 0u);
      softmax_cpu_test::GuardedF32 first(n, 0);
      std::vector<uint8_t> first_mask(n);
      ASSERT_EQ(softmax_dropout(x.data(), first.y(), first_mask.data(), rows, cols, x_dtype, p, seed, offset, &o),
                SOFTMAX_STATUS_SUCCESS);
      ASSERT_TRUE(first.guards_intact()) << "cols " << cols << " seed " << seed;
      for (const size_t misalign : {size_t{1}, size_t{5}}) {
        softmax_cpu_test::GuardedF32 y(n, misalign);
        std::vector<uint8_t> mask(n, 7);
        ASSERT_EQ(softmax_dropout(x.data(), y.y(), mask.data(), rows, cols, x_dtype, p, seed, offset, &o),
                  SOFTMAX_STATUS_SUCCESS);
        const std::string what = std::string(softmax_test::dtype_name(x_dtype)) + " cols " + std::to_string(cols) +
                                 " misalign " + std::to_string(misalign) + " seed " + std::to_string(seed);
        ASSERT_EQ(0, std::memcmp(first.y(), y.y(), n * sizeof(float))) << what;
        ASSERT_TRUE(mask == first_mask) << what;
        ASSERT_TRUE(y.guards_intact()) << what;
      }
      for (const int64_t r : {int64_t{0}, rows / 3, rows - 1}) {
        Buffer xr(x_dtype, size_t(cols)), yr(SOFTMAX_DTYPE_F32, size_t(cols));
        std::memcpy(xr.data(), x.bytes.data() + size_t(r * cols) * es, size_t(cols) * es);
        std::memcpy(yr.data(), first.y() + r * cols, size_t(cols) * sizeof(float));
        const std::vector<uint8_t> mr(first_mask.begin() + r * cols, first_mask.begin() + (r + 1) * cols);
        ASSERT_TRUE(softmax_cpu_test::dropout_matches_reference(xr, yr, mr, 1, cols, p, seed))
            << "cols " << cols << " row " << r;
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
