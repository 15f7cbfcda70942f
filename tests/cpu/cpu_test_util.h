// Helpers shared by the CPU suites: run the public API on the CPU backend and compare rows with
// the float64 reference, reporting the seed so a failure can be replayed.
#pragma once

#include <gtest/gtest.h>
#include <softmax/softmax.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
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

// softmax_test::check_row plus what the shared helper lacks (reported to the lead): an infinite
// expected value (log-softmax of a -inf element) must be met exactly, where the shared check
// computes inf - inf = NaN and fails.
inline softmax_test::RowCheck check_row_cpu(const Buffer& y, size_t row, size_t cols,
                                            const std::vector<double>& ref, bool log_softmax) {
  for (size_t c = 0; c < cols; ++c) {
    const double got = y.get(row * cols + c), want = ref[c];
    const double tol = softmax_test::tolerance(y.dtype, want, log_softmax, cols);
    const bool pass = std::isnan(want)   ? std::isnan(got)
                      : std::isinf(want) ? got == want
                                         : std::fabs(got - want) <= tol;
    if (!pass) return softmax_test::RowCheck{false, c, got, want};
  }
  return softmax_test::RowCheck{};
}

// Every row of y against the float64 reference of x; stops at the first bad row.
inline ::testing::AssertionResult rows_match_reference(const Buffer& x, const Buffer& y, int64_t rows,
                                                       int64_t cols, bool log_softmax, uint64_t seed) {
  std::vector<double> ref;
  for (int64_t r = 0; r < rows; ++r) {
    softmax_test::reference_row(x, size_t(r), size_t(cols), log_softmax, &ref);
    const softmax_test::RowCheck c = check_row_cpu(y, size_t(r), size_t(cols), ref, log_softmax);
    if (!c.ok) {
      return ::testing::AssertionFailure()
             << softmax_test::dtype_name(x.dtype) << " rows=" << rows << " cols=" << cols
             << (log_softmax ? " log" : "") << " seed=" << seed << ": row " << r << " col " << c.bad_col
             << " got " << c.got << " want " << c.want;
    }
  }
  return ::testing::AssertionSuccess();
}

inline bool same_bytes(const Buffer& a, const Buffer& b) { return a.bytes == b.bytes; }

}  // namespace softmax_cpu_test
