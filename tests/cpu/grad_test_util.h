/* SPDX-License-Identifier: Apache-2.0 */
// Helpers shared by the CPU suites of the backward and sharded-row operations: every (x, y)
// storage pair, options that select it, float64 references of the backward formulas and an
// element check whose tolerance follows the size of the terms that were rounded.
#pragma once

#include <gtest/gtest.h>
#include <softmax/softmax.h>

#include <cmath>
#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "reference.h"

namespace softmax_grad_test {

using softmax_test::Buffer;

// Storage of the arrays that mirror x (x, dx) and of those that mirror y (y, dy).
struct Pair {
  softmax_dtype x;
  softmax_dtype y;
};

inline std::vector<Pair> all_pairs() {
  std::vector<Pair> out;
  for (const softmax_dtype x : softmax_test::kAllDtypes)
    for (const softmax_dtype y : softmax_test::kAllDtypes) out.push_back({x, y});
  return out;
}

// The pairs the sharded functions accept: no f64 anywhere.
inline std::vector<Pair> float_pairs() {
  std::vector<Pair> out;
  for (const Pair p : all_pairs())
    if (p.x != SOFTMAX_DTYPE_F64 && p.y != SOFTMAX_DTYPE_F64) out.push_back(p);
  return out;
}

inline bool fp64(Pair p) { return p.x == SOFTMAX_DTYPE_F64 || p.y == SOFTMAX_DTYPE_F64; }

inline std::string name(Pair p) {
  return std::string("x=") + softmax_test::dtype_name(p.x) + " y=" + softmax_test::dtype_name(p.y);
}

// CPU backend, y stored as p.y (SOFTMAX_FLAG_Y_DTYPE whenever it differs from x).
inline softmax_options options(Pair p, int threads = 0, bool log = false) {
  softmax_options o = softmax_default_options();
  o.backend = SOFTMAX_BACKEND_CPU;
  o.num_threads = threads;
  o.flags = (log ? SOFTMAX_FLAG_LOG : 0u) | (p.y != p.x ? SOFTMAX_FLAG_Y_DTYPE : 0u);
  o.y_dtype = p.y;
  return o;
}

// Fresh random values in [lo, hi], stored as `t`.
inline Buffer uniform(softmax_dtype t, size_t n, uint64_t seed, double lo, double hi) {
  Buffer b(t, n);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (size_t i = 0; i < n; ++i) b.set(i, dist(rng));
  return b;
}

// y = softmax (or log-softmax) of x by the float64 reference, stored as `t`: what a forward
// call would have handed to the backward.
inline Buffer forward_output(const Buffer& x, softmax_dtype t, int64_t rows, int64_t cols, bool log) {
  Buffer y(t, x.size());
  std::vector<double> ref;
  for (int64_t r = 0; r < rows; ++r) {
    softmax_test::reference_row(x, size_t(r), size_t(cols), log, &ref);
    for (int64_t c = 0; c < cols; ++c) y.set(size_t(r * cols + c), ref[size_t(c)]);
  }
  return y;
}

// Float64 reference of one row of the backward from stored y and dy, with the size of the
// terms behind each element (for the tolerance): dot = sum(y * dy) (log: sum(dy)) and
//   dx = y * (dy - dot),            bound = |y| (|dy| + |dot| + sum|y dy|)
//   dx = dy - exp(y) * dot  (log),  bound = |dy| + exp(y) (|dot| + sum|dy|).
struct GradRef {
  std::vector<double> dx, bound;
};

// The sums run in long double (64-bit mantissa on x86-64), so that the reference stays well
// ahead of fp64 arithmetic on rows of 10^5 elements.
inline GradRef grad_reference_row(const std::vector<double>& y, const std::vector<double>& dy, bool log) {
  const size_t n = y.size();
  long double dot_sum = 0.0L, mag_sum = 0.0L;
  for (size_t i = 0; i < n; ++i) {
    dot_sum += log ? (long double)dy[i] : (long double)y[i] * dy[i];
    mag_sum += log ? std::fabs((long double)dy[i]) : std::fabs((long double)y[i] * dy[i]);
  }
  const double dot = double(dot_sum), mag = double(mag_sum);
  GradRef r{std::vector<double>(n), std::vector<double>(n)};
  for (size_t i = 0; i < n; ++i) {
    if (log) {
      const double e = std::exp(y[i]);
      r.dx[i] = dy[i] - e * dot;
      r.bound[i] = std::fabs(dy[i]) + e * (std::fabs(dot) + mag);
    } else {
      r.dx[i] = y[i] * (dy[i] - dot);
      r.bound[i] = std::fabs(y[i]) * (std::fabs(dy[i]) + std::fabs(dot) + mag);
    }
  }
  return r;
}

// softmax of row r of x in float64 from long double sums (softmax_test::reference_row sums in
// double, whose error on 10^5 terms approaches the fp64 tolerance itself). Non-finite rows as
// there: NaN, +inf or all -inf give a NaN row.
inline std::vector<double> softmax_row(const Buffer& x, int64_t r, int64_t cols) {
  double m = -std::numeric_limits<double>::infinity();
  bool nan = false;
  for (int64_t c = 0; c < cols; ++c) {
    const double v = x.get(size_t(r * cols + c));
    nan |= std::isnan(v);
    m = std::max(m, v);
  }
  if (nan || std::isinf(m)) return std::vector<double>(static_cast<size_t>(cols), std::numeric_limits<double>::quiet_NaN());
  long double s = 0.0L;
  for (int64_t c = 0; c < cols; ++c) s += std::exp((long double)x.get(size_t(r * cols + c)) - m);
  std::vector<double> out(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c) out[size_t(c)] = double(std::exp((long double)x.get(size_t(r * cols + c)) - m) / s);
  return out;
}

inline std::vector<double> row_of(const Buffer& b, int64_t r, int64_t cols) {
  std::vector<double> v(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c) v[size_t(c)] = b.get(size_t(r * cols + c));
  return v;
}

// Tolerance for a result stored as `t` whose exact value is `want`, computed from terms of
// total size `bound`: the arithmetic's error on those terms (fp64 or fp32 with the usual
// log-length allowance, as softmax_test::tolerance) plus the rounding of the stored result.
inline double grad_tolerance(softmax_dtype t, double want, double bound, size_t cols, bool fp64_arith) {
  const double storage = t == SOFTMAX_DTYPE_F64   ? 0x1p-53
                         : t == SOFTMAX_DTYPE_F32 ? 0x1p-24
                         : t == SOFTMAX_DTYPE_F16 ? 0x1p-11
                                                  : 0x1p-8;
  const double unit = fp64_arith ? 2e-15 : 1e-6;
  const double arith = unit * (1.0 + std::log2(double(cols) + 1.0) / 8.0);
  const double floor = t == SOFTMAX_DTYPE_F64   ? 0x1p-1074
                       : t == SOFTMAX_DTYPE_F32 ? 0x1p-149
                       : t == SOFTMAX_DTYPE_F16 ? 0x1p-24
                                                : 0x1p-133;
  return std::fabs(want) * storage + arith * bound + floor;
}

// NaN must be NaN, an infinity must be met exactly, an exact zero must be a zero (either
// sign: y * (dy - dot) is -0 whenever y = 0 and dy < dot, in float64 too), and anything else
// must lie within tol.
inline bool value_ok(double got, double want, double tol) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  if (want == 0.0) return got == 0.0;
  return std::fabs(got - want) <= tol;
}

// dx of `rows` rows against the float64 backward of the stored y and dy.
inline ::testing::AssertionResult grad_matches(const Buffer& y, const Buffer& dy, const Buffer& dx, int64_t rows,
                                               int64_t cols, bool log, bool fp64_arith) {
  for (int64_t r = 0; r < rows; ++r) {
    const GradRef ref = grad_reference_row(row_of(y, r, cols), row_of(dy, r, cols), log);
    for (int64_t c = 0; c < cols; ++c) {
      const double got = dx.get(size_t(r * cols + c)), want = ref.dx[size_t(c)];
      const double tol = grad_tolerance(dx.dtype, want, ref.bound[size_t(c)], size_t(cols), fp64_arith);
      if (!value_ok(got, want, tol)) {
        return ::testing::AssertionFailure() << "row " << r << " col " << c << ": got " << got << " want " << want
                                             << " (tolerance " << tol << ")";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace softmax_grad_test
