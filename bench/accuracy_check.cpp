// SPDX-License-Identifier: Apache-2.0
// float64 references for sampled rows (forward and backward), and the error metrics each variant
// is judged by.
#include "accuracy_check.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "backends/common/half_bits.h"
#include "backends/common/philox.h"

namespace bench {

namespace {

// Keeps the column with the largest error, and the first problem seen.
void note_error(RowError& r, double err, const char* problem, int64_t col) {
  if (err > r.max_err || (problem && r.problem.empty())) {
    r.max_err = std::max(err, r.max_err);
    r.worst_col = col;
    if (problem) r.problem = problem;
  }
}

// One thread's RowError into the row's.
void merge_error(RowError& worst, const RowError& mine) {
  if (mine.max_err > worst.max_err || (!mine.problem.empty() && worst.problem.empty())) {
    worst.max_err = std::max(worst.max_err, mine.max_err);
    worst.worst_col = mine.worst_col;
    if (!mine.problem.empty()) worst.problem = mine.problem;
  }
}

// The worst error over a row's columns: err_of(c, &problem) for column c, on every thread for
// long rows.
template <class ErrOf>
RowError worst_over_columns(int64_t cols, const ErrOf& err_of) {
  RowError worst;
#pragma omp parallel if (cols > (1 << 20))
  {
    RowError mine;
#pragma omp for schedule(static)
    for (int64_t c = 0; c < cols; ++c) {
      const char* problem = nullptr;
      const double err = err_of(c, &problem);
      note_error(mine, err, problem, c);
    }
#pragma omp critical
    merge_error(worst, mine);
  }
  return worst;
}

}  // namespace

RowStats row_stats(const float* x, int64_t cols) {
  double m = -std::numeric_limits<double>::infinity();
#pragma omp parallel for reduction(max : m) if (cols > (1 << 20))
  for (int64_t c = 0; c < cols; ++c) m = std::max(m, static_cast<double>(x[c]));
  double s = 0;
#pragma omp parallel for reduction(+ : s) if (cols > (1 << 20))
  for (int64_t c = 0; c < cols; ++c) s += std::exp(static_cast<double>(x[c]) - m);
  return {m, s};
}

RowError row_error(const float* x, const RowStats& st, const float* y, const uint8_t* mask,
                   int64_t cols, softmax_dtype dtype, Expect expect, const DropoutExpect& d,
                   int64_t flat_base) {
  const double tiny = dtype == SOFTMAX_DTYPE_F16 ? 6.2e-5 : 1e-30;
  const double log_sum = std::log(st.sum);
  const double scale = softmax_internal::dropout_scale(d.p);
  const double inf = std::numeric_limits<double>::infinity();
  return worst_over_columns(cols, [&](int64_t c, const char** problem) {
    const double got = y[c];
    const double z = static_cast<double>(x[c]) - st.max;
    double err = 0;
    if (expect == Expect::LogSoftmax) {
      const double want = z - log_sum;
      err = std::fabs(got - want) / std::max(1.0, std::fabs(want));
    } else {
      double want = std::exp(z) / st.sum;
      if (expect == Expect::Dropout) {
        const bool keep =
            softmax_internal::dropout_keep(d.seed, d.offset, static_cast<uint64_t>(flat_base + c), d.p);
        if (mask && (mask[c] != (keep ? 1 : 0))) *problem = "keep-mask byte differs from Philox";
        if (!keep) {
          want = 0;
          if (got != 0) *problem = "dropped element is not 0";
        } else {
          want *= scale;
        }
      }
      err = std::fabs(got - want) / (std::fabs(want) + tiny);
    }
    if (std::isnan(got)) *problem = "NaN in output (unwritten or bad arithmetic)";
    return *problem ? inf : err;
  });
}

namespace {

// The softmax backward's error for y(c) and dy(c) given as float64 functions of the column (the
// stored values, or the dropout backward's recomputed s and g).
template <class Y, class Dy>
RowError backward_error(const Y& y, const Dy& dy, const float* dx, int64_t cols, bool log) {
  double dot = 0, mag = 0;
#pragma omp parallel for reduction(+ : dot, mag) if (cols > (1 << 20))
  for (int64_t c = 0; c < cols; ++c) {
    const double term = log ? dy(c) : y(c) * dy(c);
    dot += term;
    mag += std::fabs(term);
  }
  const double inf = std::numeric_limits<double>::infinity();
  return worst_over_columns(cols, [&](int64_t c, const char** problem) {
    const double yc = y(c), dyc = dy(c), got = dx[c];
    double want, bound;
    if (log) {
      const double e = std::exp(yc);
      want = dyc - e * dot;
      bound = std::fabs(dyc) + e * (std::fabs(dot) + mag);
    } else {
      want = yc * (dyc - dot);
      bound = std::fabs(yc) * (std::fabs(dyc) + std::fabs(dot) + mag);
    }
    if (std::isnan(got)) *problem = "NaN in output (unwritten or bad arithmetic)";
    // An exact zero (y = 0) must come out as a zero of either sign.
    return *problem ? inf : bound > 0 ? std::fabs(got - want) / bound : got == 0 ? 0 : inf;
  });
}

}  // namespace

RowError grad_row_error(const float* y, const float* dy, const float* dx, int64_t cols, bool log) {
  return backward_error([&](int64_t c) { return double(y[c]); }, [&](int64_t c) { return double(dy[c]); }, dx, cols,
                        log);
}

RowError dropout_grad_row_error(const float* x, const float* dy, const float* dx, int64_t cols,
                                const DropoutExpect& d, int64_t flat_base) {
  // s and g once (backward_error reads each element twice).
  const RowStats st = row_stats(x, cols);
  const double scale = 1.0 / (1.0 - double(d.p));
  std::vector<double> s(static_cast<size_t>(cols)), g(static_cast<size_t>(cols));
#pragma omp parallel for if (cols > (1 << 20))
  for (int64_t c = 0; c < cols; ++c) {
    s[size_t(c)] = std::exp(double(x[c]) - st.max) / st.sum;
    const bool keep = softmax_internal::dropout_keep(d.seed, d.offset, static_cast<uint64_t>(flat_base + c), d.p);
    g[size_t(c)] = keep ? double(dy[c]) * scale : 0.0;
  }
  return backward_error([&](int64_t c) { return s[size_t(c)]; }, [&](int64_t c) { return g[size_t(c)]; }, dx, cols,
                        false);
}

double tolerance_for(softmax_dtype dtype, bool float_sum) {
  if (float_sum) return 0.1;
  switch (dtype) {
    case SOFTMAX_DTYPE_F32: return 1e-4;   // fp32 arithmetic on rows up to 2^28 elements
    case SOFTMAX_DTYPE_F16: return 2e-3;   // storage rounding 2^-11 plus arithmetic
    case SOFTMAX_DTYPE_BF16: return 1e-2;  // storage rounding 2^-8 plus arithmetic
  }
  return 0;
}

void widen(const void* src, softmax_dtype dtype, int64_t n, float* dst) {
  if (dtype == SOFTMAX_DTYPE_F32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * 4);
    return;
  }
  const uint16_t* h = static_cast<const uint16_t*>(src);
#pragma omp parallel for if (n > (1 << 20))
  for (int64_t i = 0; i < n; ++i)
    dst[i] = dtype == SOFTMAX_DTYPE_F16 ? softmax_internal::f16_to_float(h[i])
                                        : softmax_internal::bf16_to_float(h[i]);
}

std::vector<int64_t> sample_rows(int64_t rows, int64_t cols, int64_t max_elements, uint64_t seed) {
  const int64_t budget = std::max<int64_t>(1, std::min<int64_t>(8, max_elements / cols));
  std::vector<int64_t> picked = {0};
  if (rows > 1 && budget > 1) picked.push_back(rows - 1);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> pick(0, rows - 1);
  for (int tries = 0; static_cast<int64_t>(picked.size()) < std::min(budget, rows) && tries < 64; ++tries) {
    const int64_t r = pick(rng);
    if (std::find(picked.begin(), picked.end(), r) == picked.end()) picked.push_back(r);
  }
  return picked;
}

}  // namespace bench
