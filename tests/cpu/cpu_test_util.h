/* SPDX-License-Identifier: Apache-2.0 */
// Helpers shared by the CPU suites: run the public API on the CPU backend and compare rows with
// the float64 reference, reporting the seed so a failure can be replayed.
#pragma once

#include <gtest/gtest.h>
#include <softmax/softmax.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "reference.h"

namespace softmax_cpu_test {

using softmax_test::Buffer;

inline softmax_options cpu_options(int threads = 0, uint32_t flags = 0) {
  softmax_options o = softmax_default_options();
  o.backend = SOFTMAX_BACKEND_CPU;
  o.num_threads = threads;
  o.flags = flags;
  return o;
}

inline const softmax_dtype kAllDtypes[] = {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F16, SOFTMAX_DTYPE_BF16};

// Runs softmax_rows on the CPU into a poisoned output buffer.
inline Buffer run_rows(const Buffer& x, int64_t rows, int64_t cols, bool log_softmax, int threads = 0) {
  Buffer y(x.dtype, x.size());
  y.poison();
  const softmax_options o = cpu_options(threads, log_softmax ? SOFTMAX_FLAG_LOG : 0u);
  const softmax_status s = softmax_rows(x.data(), y.data(), rows, cols, x.dtype, &o);
  EXPECT_EQ(s, SOFTMAX_STATUS_SUCCESS) << softmax_last_error();
  return y;
}

// Rows that probe the bottom and top of the range (at least 2 columns make them meaningful):
//   0: finite values alternating with -inf ([0, -inf, 1, -inf, ...]): exact +0 (log: -inf);
//   1: a ramp from 0 down to -130: outputs that are normal, subnormal, and +0 in every type;
//   2: random values up to 1e4 in magnitude: nearly every element far below the max;
//   3: the type's largest magnitudes of both signs next to small values ([big, -big, 1, ...]):
//      x - max overflows to -inf, softmax gives exact zeros and log-softmax -inf;
//   4: ordinary random values with -inf at every third element.
inline constexpr int64_t kExactnessRows = 5;
inline Buffer exactness_rows(softmax_dtype dtype, int64_t cols, uint64_t seed) {
  Buffer x = softmax_test::random_input(dtype, size_t(kExactnessRows * cols), seed);
  const Buffer large = softmax_test::random_input(dtype, size_t(cols), seed ^ 0x9e3779b97f4a7c15ull, 1e4f);
  const double inf = std::numeric_limits<double>::infinity();
  const double big = dtype == SOFTMAX_DTYPE_F16 ? 65504.0 : dtype == SOFTMAX_DTYPE_F64 ? 1.7e308 : 3.0e38;
  auto at = [cols](int64_t r, int64_t c) { return size_t(r * cols + c); };
  for (int64_t c = 0; c < cols; ++c) {
    const double v = x.get(at(0, c)) / 8.0;  // in [-1, 1]
    x.set(at(0, c), c % 2 == 0 ? v : -inf);
    x.set(at(1, c), -130.0 * double(c) / double(std::max<int64_t>(cols - 1, 1)));
    x.set(at(2, c), large.get(size_t(c)));
    x.set(at(3, c), c % 3 == 0 ? big : c % 3 == 1 ? -big : v);
    if (c % 3 == 2) x.set(at(4, c), -inf);
  }
  return x;
}

// Every row of y against the float64 reference of x; stops at the first bad row.
inline ::testing::AssertionResult rows_match_reference(const Buffer& x, const Buffer& y, int64_t rows,
                                                       int64_t cols, bool log_softmax, uint64_t seed) {
  std::vector<double> ref;
  for (int64_t r = 0; r < rows; ++r) {
    softmax_test::reference_row(x, size_t(r), size_t(cols), log_softmax, &ref);
    const softmax_test::RowCheck c = softmax_test::check_row(y, size_t(r), size_t(cols), ref, log_softmax);
    if (!c.ok) {
      return ::testing::AssertionFailure()
             << softmax_test::dtype_name(x.dtype) << " rows=" << rows << " cols=" << cols
             << (log_softmax ? " log" : "") << " seed=" << seed << ": row " << r << " col " << c.bad_col
             << " got " << c.got << " want " << c.want;
    }
  }
  return ::testing::AssertionSuccess();
}

// Dropout output against the float64 reference: the mask is the caller's (checked apart),
// kept elements are softmax / (1 - p) within value_matches, dropped ones exactly +0.
inline ::testing::AssertionResult dropout_matches_reference(const Buffer& x, const Buffer& y,
                                                            const std::vector<uint8_t>& mask, int64_t rows,
                                                            int64_t cols, float p, uint64_t seed) {
  const double scale = 1.0 / (1.0 - double(p));
  std::vector<double> ref;
  for (int64_t r = 0; r < rows; ++r) {
    softmax_test::reference_row(x, size_t(r), size_t(cols), false, &ref, scale);
    for (int64_t c = 0; c < cols; ++c) {
      const size_t i = size_t(r * cols + c);
      const double want = mask[i] ? ref[size_t(c)] : 0.0, got = y.get(i);
      if (!softmax_test::value_matches(y.dtype, got, want, false, size_t(cols), false, ref[size_t(c)] / scale)) {
        return ::testing::AssertionFailure() << softmax_test::dtype_name(x.dtype) << " rows=" << rows
                                             << " cols=" << cols << " p=" << p << " seed=" << seed << ": row "
                                             << r << " col " << c << " got " << got << " want " << want;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

inline bool same_bytes(const Buffer& a, const Buffer& b) { return a.bytes == b.bytes; }

// ---- streamed outputs ----

// f32 y of 32 MiB and more is finished with non-temporal stores where every row starts on a
// vector boundary or is at least 512 elements long (the partial vectors at its ends with masked
// ordinary stores), with ordinary stores otherwise, and smaller outputs always with ordinary
// stores: routes that must give the same bits and write nothing outside y.
inline constexpr size_t kStreamedBytes = size_t{32} << 20;

inline int64_t streamed_rows_for(int64_t cols) {
  return (int64_t(kStreamedBytes / 4) + cols - 1) / cols;
}

// An f32 output of n elements `misalign` floats past a 64-byte boundary, between guards of
// 0xFF bytes.
class GuardedF32 {
 public:
  static constexpr size_t kGuard = 32;  // floats on either side
  GuardedF32(size_t n, size_t misalign)
      : base_(static_cast<float*>(std::aligned_alloc(64, ((n + 2 * kGuard) * sizeof(float) + 63) & ~size_t{63}))),
        y_(base_ + kGuard + misalign),
        n_(n) {
    std::memset(base_, 0xFF, (n + 2 * kGuard) * sizeof(float));
  }
  ~GuardedF32() { std::free(base_); }
  GuardedF32(const GuardedF32&) = delete;
  GuardedF32& operator=(const GuardedF32&) = delete;
  float* y() const { return y_; }
  // Whether every byte outside y[0 .. n) still holds the guard.
  bool guards_intact() const {
    const unsigned char* b = reinterpret_cast<const unsigned char*>(base_);
    const size_t before = size_t(y_ - base_) * sizeof(float), end = before + n_ * sizeof(float);
    const size_t total = (n_ + 2 * kGuard) * sizeof(float);
    for (size_t i = 0; i < total; ++i) {
      if ((i < before || i >= end) && b[i] != 0xFF) return false;
    }
    return true;
  }

 private:
  float* base_;
  float* y_;
  size_t n_;
};

// CPU options for x of x_dtype into f32 y.
inline softmax_options f32_y_options(softmax_dtype x_dtype, uint32_t flags) {
  softmax_options o = cpu_options(2, flags);
  if (x_dtype != SOFTMAX_DTYPE_F32) {
    o.flags |= SOFTMAX_FLAG_Y_DTYPE;
    o.y_dtype = SOFTMAX_DTYPE_F32;
  }
  return o;
}

// softmax_rows of x (streamed_rows_for(cols) rows) into a streamed f32 y `misalign` floats off
// a 64-byte boundary, against `small`: the same rows in calls of at most 1 MiB of y.
inline ::testing::AssertionResult streamed_rows_equal(const Buffer& x, int64_t cols, bool log_softmax,
                                                      size_t misalign, const std::vector<float>& small) {
  const int64_t rows = streamed_rows_for(cols);
  const size_t n = size_t(rows * cols);
  const softmax_options o = f32_y_options(x.dtype, log_softmax ? SOFTMAX_FLAG_LOG : 0u);
  GuardedF32 y(n, misalign);
  if (softmax_rows(x.data(), y.y(), rows, cols, x.dtype, &o) != SOFTMAX_STATUS_SUCCESS)
    return ::testing::AssertionFailure() << softmax_last_error();
  if (std::memcmp(small.data(), y.y(), n * sizeof(float)) != 0)
    return ::testing::AssertionFailure() << "streamed output differs from small calls";
  if (!y.guards_intact()) return ::testing::AssertionFailure() << "wrote outside y";
  return ::testing::AssertionSuccess();
}

// The small calls of streamed_rows_equal.
inline std::vector<float> rows_in_small_calls(const Buffer& x, int64_t cols, bool log_softmax) {
  const int64_t rows = streamed_rows_for(cols), block = std::max<int64_t>(1, (int64_t{1} << 18) / cols);
  const size_t es = softmax_test::element_size(x.dtype);
  const softmax_options o = f32_y_options(x.dtype, log_softmax ? SOFTMAX_FLAG_LOG : 0u);
  std::vector<float> small(size_t(rows * cols));
  for (int64_t r0 = 0; r0 < rows; r0 += block) {
    const int64_t nr = std::min(block, rows - r0);
    EXPECT_EQ(softmax_rows(x.bytes.data() + size_t(r0 * cols) * es, small.data() + r0 * cols, nr, cols, x.dtype, &o),
              SOFTMAX_STATUS_SUCCESS);
  }
  return small;
}

}  // namespace softmax_cpu_test
