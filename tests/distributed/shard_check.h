/* SPDX-License-Identifier: Apache-2.0 */
// Judges one rank's slice of a sharded result twice: against the float64 formula on the whole
// row, and against libsoftmax's unsharded call on the whole row (softmax_rows,
// softmax_rows_backward), element by element. NaN must stay NaN, infinities and the float64
// formula's exact zeros must be met exactly.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "reference.h"

namespace softmax_shard_test {

using softmax_test::Buffer;

// got vs an expected value with tolerance tol (NaN, infinities and, for softmax, +0 exactly;
// a log-softmax 0 is log(1), a value like any other).
inline bool close(double got, double want, double tol, bool log_softmax) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  if (want == 0.0 && !log_softmax) return got == 0.0 && !std::signbit(got);
  return std::fabs(got - want) <= tol;
}

// v rounded to storage type t (values past the type's range become infinite).
inline double stored(double v, softmax_dtype t) {
  Buffer b(t, 1);
  b.set(0, v);
  return b.get(0);
}

// y_slice = columns [first, first + width) of softmax (log-softmax) of x_full's rows.
inline ::testing::AssertionResult forward_slice_ok(const Buffer& x_full, const Buffer& y_unsharded,
                                                   const Buffer& y_slice, int64_t rows, int64_t cols,
                                                   int64_t first, int64_t width, bool log_softmax) {
  std::vector<double> ref;
  for (int64_t r = 0; r < rows; ++r) {
    softmax_test::reference_row(x_full, size_t(r), size_t(cols), log_softmax, &ref);
    double row_max = -std::numeric_limits<double>::infinity();
    for (int64_t c = 0; c < cols; ++c) row_max = std::fmax(row_max, x_full.get(size_t(r * cols + c)));
    for (int64_t c = first; c < first + width; ++c) {
      const double got = y_slice.get(size_t(r * width + c - first));
      // A log-softmax value beyond the output type's range (huge inputs) is its infinity.
      const double want = std::isinf(stored(ref[size_t(c)], y_slice.dtype)) ? stored(ref[size_t(c)], y_slice.dtype)
                                                                           : ref[size_t(c)];
      const double unsharded = y_unsharded.get(size_t(r * cols + c));
      // fp32 rounds the exponent's argument d = x - max to half an ulp, which exp turns into a
      // relative error of up to |d| * 2^-24: more than the shared tolerance allows once |d| > 16.
      const double d = x_full.get(size_t(r * cols + c)) - row_max;
      const double argument = !log_softmax && std::isfinite(d) ? std::fabs(want) * std::fabs(d) * 0x1p-24 : 0.0;
      const double tol = softmax_test::tolerance(y_slice.dtype, want, log_softmax, size_t(cols)) + argument;
      const double tol_unsharded =
          2.0 * softmax_test::tolerance(y_slice.dtype, unsharded, log_softmax, size_t(cols));
      const bool ok_ref = close(got, want, tol, log_softmax);
      // The unsharded output's exact zeros come from exp(x - max) underflowing, the same in both.
      const bool ok_unsharded = close(got, unsharded, tol_unsharded, log_softmax);
      if (!ok_ref || !ok_unsharded) {
        return ::testing::AssertionFailure()
               << "row " << r << " col " << c << ": got " << got << ", float64 formula " << want
               << " (tolerance " << tol << "), unsharded softmax_rows " << unsharded << " (tolerance "
               << tol_unsharded << ")";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// dx_slice = columns [first, first + width) of the softmax gradient of whole rows:
//   dx = y * (dy - sum(dy * y)),  log: dx = dy - exp(y) * sum(dy).
// The tolerance adds to the storage rounding of dx an fp32 error on the terms that make it up
// (|y| * (|dy| + sum |dy * y|), log: |dy| + exp(y) * sum |dy|): the row sum is where order of
// summation, and so sharding, changes the rounding.
inline ::testing::AssertionResult backward_slice_ok(const Buffer& y_full, const Buffer& dy_full,
                                                    const Buffer& dx_unsharded, const Buffer& dx_slice,
                                                    int64_t rows, int64_t cols, int64_t first, int64_t width,
                                                    bool log_softmax) {
  const double arith = 1e-6 * (1.0 + std::log2(double(cols) + 1.0) / 8.0);
  for (int64_t r = 0; r < rows; ++r) {
    double dot = 0.0, scale = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      const double y = y_full.get(size_t(r * cols + c)), dy = dy_full.get(size_t(r * cols + c));
      dot += log_softmax ? dy : dy * y;
      scale += log_softmax ? std::fabs(dy) : std::fabs(dy * y);
    }
    for (int64_t c = first; c < first + width; ++c) {
      const double y = y_full.get(size_t(r * cols + c)), dy = dy_full.get(size_t(r * cols + c));
      const double want = log_softmax ? dy - std::exp(y) * dot : y * (dy - dot);
      const double bound = log_softmax ? std::fabs(dy) + std::exp(y) * scale : std::fabs(y) * (std::fabs(dy) + scale);
      const double tol = softmax_test::tolerance(dx_slice.dtype, want, false, size_t(cols)) + 4.0 * arith * bound;
      const double got = dx_slice.get(size_t(r * width + c - first));
      const double unsharded = dx_unsharded.get(size_t(r * cols + c));
      const bool ok_ref = std::isfinite(got) && std::fabs(got - want) <= tol;
      const bool ok_unsharded = std::isfinite(got) && std::fabs(got - unsharded) <= 2.0 * tol;
      if (!ok_ref || !ok_unsharded) {
        return ::testing::AssertionFailure()
               << "row " << r << " col " << c << ": got " << got << ", float64 formula " << want
               << ", unsharded softmax_rows_backward " << unsharded << " (tolerance " << tol << ")";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace softmax_shard_test
