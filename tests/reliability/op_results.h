/* SPDX-License-Identifier: Apache-2.0 */
// What a successful call must have written, for each of the eight functions, judged against the
// header's formulas evaluated in float64 on the bytes the call read. Loose on purpose: the
// fuzzer hunts crashes and gross errors, tests/cpu owns the tight bounds. Exact where float64 is
// exact: NaN stays NaN, dropped elements are 0, a zero factor gives 0, statistics of an all -inf
// row are (-inf, 0), the row maximum is one of the row's values.
//
// Non-finite values: the header defines them for the forward (NaN, +inf or all -inf make a NaN
// row) and for the statistics; the backward formulas are plain arithmetic. Where a NaN feeds an
// element's formula, that element must be NaN; where an infinity does, or an intermediate leaves
// the arithmetic type's range, the order of evaluation decides between inf and NaN, so such
// elements are not judged (everything else about the call still is).
#pragma once

#include <softmax/softmax.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backends/common/half_bits.h"
#include "backends/common/philox.h"
#include "validity_oracle.h"

namespace softmax_reliability {
namespace results {

inline double load(const unsigned char* p, size_t i, int32_t type) {
  switch (type) {
    case SOFTMAX_DTYPE_F64: {
      double d;
      std::memcpy(&d, p + 8 * i, 8);
      return d;
    }
    case SOFTMAX_DTYPE_F32: {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      return f;
    }
    default: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return type == SOFTMAX_DTYPE_F16 ? softmax_internal::f16_to_float(h) : softmax_internal::bf16_to_float(h);
    }
  }
}

inline double load_float(const unsigned char* p, size_t i) { return load(p, i, SOFTMAX_DTYPE_F32); }

inline double max_finite(int32_t type) {
  switch (type) {
    case SOFTMAX_DTYPE_F16: return 65504.0;
    case SOFTMAX_DTYPE_BF16: return 0x1.fep127;
    case SOFTMAX_DTYPE_F64: return std::numeric_limits<double>::max();
    default: return 0x1.fffffep127;
  }
}

// Tolerances of one output element.
struct Tolerance {
  double arith;    // relative error of the arithmetic (fp32 or fp64), grown with the row length
  double storage;  // relative rounding of the output type
  double floor;    // absolute: values near the output type's subnormals (flushed or rounded)
  double range;    // intermediates beyond this overflow the arithmetic: not judged
  // Absolute error of one intermediate near the arithmetic type's subnormals (an exp or a
  // product that underflows, or is flushed to zero), to be scaled by what multiplies it.
  double arith_floor;
};

inline Tolerance tolerance_for(int32_t out_type, bool fp64, int64_t cols) {
  const double growth = 1.0 + std::log2(static_cast<double>(cols) + 1.0) / 4.0;
  Tolerance t;
  t.arith = (fp64 ? 1e-13 : 2e-5) * growth;
  t.range = fp64 ? 1e300 : 1e37;
  t.arith_floor = fp64 ? 0x1p-1020 : 0x1p-124;
  switch (out_type) {
    case SOFTMAX_DTYPE_F16: t.storage = 0x1p-10; t.floor = 0x1p-23; break;
    case SOFTMAX_DTYPE_BF16: t.storage = 0x1p-7; t.floor = 0x1p-125; break;
    case SOFTMAX_DTYPE_F64: t.storage = 0x1p-50; t.floor = 0x1p-1020; break;
    default: t.storage = 0x1p-22; t.floor = 0x1p-125; break;
  }
  return t;
}

inline bool value_matches(double got, double want, double tol, double maxf) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isnan(got)) return false;
  if (std::isinf(want)) return got == want;
  // A finite result at or past the storage type's largest value may round to infinity.
  if (std::fabs(want) >= maxf * 0.99 && std::isinf(got)) return std::signbit(got) == std::signbit(want);
  return std::fabs(got - want) <= tol;
}

inline std::string fmt(const char* format, double a = 0, double b = 0, double c = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, format, a, b, c);
  return buf;
}

inline std::string element_failure(const char* array, size_t i, size_t row, double got, double want, double tol) {
  return std::string(array) + "[" + std::to_string(i) + "] (row " + std::to_string(row) + ")" +
         fmt(": got %.9g, expected %.9g (tolerance %.3g)", got, want, tol);
}

// The arrays of one successful call: inputs as they were before it (in-place outputs overwrite
// them), outputs as it left them.
struct Io {
  const CallArgs* args;
  const Verdict* verdict;
  uint64_t seed, offset;
  const unsigned char* before[4];  // each array's bytes before the call
  const unsigned char* after[4];   // and after
  size_t rows, cols;
};

// Forward softmax of one stored row in float64: the header's semantics for non-finite input.
inline void softmax_row(const unsigned char* x, size_t row, size_t cols, int32_t type, bool log,
                        std::vector<double>* out, double* max_out = nullptr, double* sum_out = nullptr) {
  out->assign(cols, 0.0);
  double m = -std::numeric_limits<double>::infinity();
  bool has_nan = false;
  for (size_t c = 0; c < cols; ++c) {
    const double v = load(x, row * cols + c, type);
    has_nan |= std::isnan(v);
    if (v > m) m = v;
  }
  if (max_out) *max_out = m;
  // NaN anywhere, any +inf, or all -inf: the textbook formula gives NaN for the whole row.
  if (has_nan || std::isinf(m)) {
    out->assign(cols, std::numeric_limits<double>::quiet_NaN());
    if (sum_out) *sum_out = std::numeric_limits<double>::quiet_NaN();
    return;
  }
  double s = 0.0;
  for (size_t c = 0; c < cols; ++c) s += std::exp(load(x, row * cols + c, type) - m);
  if (sum_out) *sum_out = s;
  const double log_s = std::log(s);
  for (size_t c = 0; c < cols; ++c) {
    const double d = load(x, row * cols + c, type) - m;
    (*out)[c] = log ? d - log_s : std::exp(d) / s;
  }
}

// softmax_rows and softmax_dropout: y (and keep_mask).
inline std::string check_forward(const Io& io) {
  const CallArgs& a = *io.args;
  const Verdict& v = *io.verdict;
  const bool dropout = a.op == Op::Dropout;
  const double scale = dropout && a.p < 1.0f ? 1.0 / (1.0 - static_cast<double>(a.p)) : 0.0;
  const Tolerance tol = tolerance_for(v.y_type, v.fp64(), a.cols);
  const double maxf = max_finite(v.y_type);
  const unsigned char* mask = dropout ? io.after[2] : nullptr;
  std::vector<double> want_row;
  unsigned keep4 = 0;
  for (size_t r = 0; r < io.rows; ++r) {
    softmax_row(io.before[0], r, io.cols, v.x_type, v.log, &want_row);
    const bool nan_row = std::isnan(want_row[0]);
    double row_sum = 0.0, row_tol = 0.0;
    for (size_t col = 0; col < io.cols; ++col) {
      const size_t i = r * io.cols + col;
      const double got = load(io.after[1], i, v.y_type);
      bool kept = true;
      if (dropout) {
        if ((i & 3) == 0 || col == 0) keep4 = softmax_internal::dropout_keep4(io.seed, io.offset, i >> 2, a.p);
        kept = (keep4 >> (i & 3)) & 1u;
        if (mask && mask[i] != (kept ? 1 : 0)) {
          return "keep_mask[" + std::to_string(i) + "] is " + std::to_string(mask[i]) + ", expected " +
                 (kept ? "1" : "0");
        }
      }
      if (!kept) {
        if (got != 0.0) return "dropped element " + std::to_string(i) + fmt(" is %g, not 0", got);
        continue;
      }
      double want = want_row[col], t = 0;
      if (!nan_row) {
        if (v.log) {
          t = tol.arith * (std::fabs(want) + 1.0) * 4 + tol.storage * std::fabs(want) + tol.floor;
        } else {
          want *= dropout ? scale : 1.0;
          t = (tol.arith + tol.storage) * std::fabs(want) + tol.floor * (dropout ? scale : 1.0);
        }
      }
      if (!value_matches(got, want, t, maxf)) return element_failure("y", i, r, got, want, t);
      row_sum += dropout ? got / scale : got;
      row_tol += t / (dropout ? scale : 1.0);
    }
    // Rows of finite input sum to 1 (softmax and dropout with nothing dropped).
    if (!nan_row && !v.log && (!dropout || a.p == 0.0f) && !(std::fabs(row_sum - 1.0) <= row_tol + 1e-6)) {
      return "row " + std::to_string(r) + fmt(" sums to %.9g, not 1 (tolerance %.3g)", row_sum, row_tol);
    }
  }
  return "";
}

// An element's inputs: NaN among them must give NaN; an infinity, or an intermediate past the
// arithmetic's range, leaves the element unjudged.
enum class Inputs { Finite, HasNan, Unjudged };

inline Inputs classify(std::initializer_list<double> values, double range) {
  bool nan = false, unjudged = false;
  for (const double x : values) {
    nan |= std::isnan(x);
    unjudged |= std::isinf(x) || std::fabs(x) > range;
  }
  return nan ? Inputs::HasNan : unjudged ? Inputs::Unjudged : Inputs::Finite;
}

// The row's dot product (sum of dy * y, or of dy for log-softmax) in float64, with the sum of
// its terms' magnitudes that bounds its rounding error.
struct RowDot {
  double dot = 0, magnitude = 0;
  Inputs state = Inputs::Finite;
};

inline RowDot row_dot(const Io& io, size_t r, double range) {
  const Verdict& v = *io.verdict;
  RowDot d;
  bool nan = false, unjudged = false;
  for (size_t col = 0; col < io.cols; ++col) {
    const size_t i = r * io.cols + col;
    const double dy = load(io.before[1], i, v.y_type);
    const double term = v.log ? dy : dy * load(io.before[0], i, v.y_type);
    nan |= std::isnan(term);
    unjudged |= std::isinf(term) || std::isinf(dy);
    d.dot += term;
    d.magnitude += std::fabs(term);
  }
  unjudged |= d.magnitude > range;
  d.state = nan ? Inputs::HasNan : unjudged ? Inputs::Unjudged : Inputs::Finite;
  return d;
}

// One element of dx = y * (dy - dot), log: dx = dy - exp(y) * dot, from y and dy (stored as y)
// and the row's dot: computed (softmax_rows_backward) or given (..._from_stats, magnitude 0).
inline std::string check_dx_element(const Io& io, size_t r, size_t col, const RowDot& d, const Tolerance& tol,
                                    const unsigned char* dx) {
  const Verdict& v = *io.verdict;
  const size_t i = r * io.cols + col;
  const double y = load(io.before[0], i, v.y_type), dy = load(io.before[1], i, v.y_type);
  const double got = load(dx, i, v.x_type);
  if (std::isnan(y) || std::isnan(dy) || d.state == Inputs::HasNan) {
    if (!std::isnan(got)) return element_failure("dx", i, r, got, std::nan(""), 0);
    return "";
  }
  if (d.state == Inputs::Unjudged || std::isinf(dy) || std::fabs(dy) > tol.range) return "";
  double want, t;
  if (v.log) {
    // y = -inf (a log-probability of 0) is an ordinary input here: exp(y) = 0, dx = dy.
    if (y == std::numeric_limits<double>::infinity()) return "";
    const double e = std::exp(y);
    if (e > tol.range || e * (std::fabs(d.dot) + d.magnitude) > tol.range) return "";
    want = dy - e * d.dot;
    // exp's relative error grows with |y|; e * |y| first, which is 0 where exp(y) underflows.
    const double e_growth = std::isfinite(y) ? e * (2.0 + std::fabs(y)) : 0.0;
    t = tol.arith * 4 * (std::fabs(dy) + e * d.magnitude + e_growth * std::fabs(d.dot)) +
        tol.arith_floor * (std::fabs(d.dot) + 1.0) + tol.storage * std::fabs(want) + tol.floor;
  } else {
    if (std::isinf(y) || std::fabs(y) * (std::fabs(dy) + std::fabs(d.dot) + d.magnitude) > tol.range) return "";
    if (y == 0.0) {
      if (got != 0.0) return element_failure("dx", i, r, got, 0.0, 0.0) + " (y is 0)";
      return "";
    }
    want = y * (dy - d.dot);
    t = tol.arith * 4 * std::fabs(y) * (std::fabs(dy) + d.magnitude + std::fabs(d.dot)) +
        tol.arith_floor * (std::fabs(dy) + std::fabs(d.dot) + 1.0) + tol.storage * std::fabs(want) + tol.floor;
  }
  if (!value_matches(got, want, t, max_finite(v.x_type))) return element_failure("dx", i, r, got, want, t);
  return "";
}

// softmax_rows_backward: dx = y * (dy - sum(dy * y)), log: dx = dy - exp(y) * sum(dy).
inline std::string check_rows_backward(const Io& io) {
  const Tolerance tol = tolerance_for(io.verdict->x_type, io.verdict->fp64(), io.args->cols);
  for (size_t r = 0; r < io.rows; ++r) {
    const RowDot d = row_dot(io, r, tol.range);
    for (size_t col = 0; col < io.cols; ++col) {
      const std::string f = check_dx_element(io, r, col, d, tol, io.after[2]);
      if (!f.empty()) return f;
    }
  }
  return "";
}

// softmax_rows_backward_from_stats: the same with the row's dot given in row_dot.
inline std::string check_rows_backward_from_stats(const Io& io) {
  const Tolerance tol = tolerance_for(io.verdict->x_type, false, io.args->cols);
  for (size_t r = 0; r < io.rows; ++r) {
    RowDot d;
    d.dot = load_float(io.before[3], r);
    d.state = classify({d.dot}, tol.range);
    for (size_t col = 0; col < io.cols; ++col) {
      const std::string f = check_dx_element(io, r, col, d, tol, io.after[2]);
      if (!f.empty()) return f;
    }
  }
  return "";
}

// softmax_backward_row_stats: row_dot = sum(dy * y), log: sum(dy).
inline std::string check_backward_row_stats(const Io& io) {
  const Tolerance tol = tolerance_for(SOFTMAX_DTYPE_F32, false, io.args->cols);
  for (size_t r = 0; r < io.rows; ++r) {
    const RowDot d = row_dot(io, r, tol.range);
    const double got = load_float(io.after[2], r);
    if (d.state == Inputs::HasNan) {
      if (!std::isnan(got)) return element_failure("row_dot", r, r, got, std::nan(""), 0);
      continue;
    }
    if (d.state == Inputs::Unjudged) continue;
    const double t = tol.arith * d.magnitude + tol.arith_floor * static_cast<double>(io.cols) +
                     tol.storage * std::fabs(d.dot) + tol.floor;
    if (!value_matches(got, d.dot, t, max_finite(SOFTMAX_DTYPE_F32))) {
      return element_failure("row_dot", r, r, got, d.dot, t);
    }
  }
  return "";
}

// softmax_dropout_backward: s = softmax(x), g = keep ? dy / (1 - p) : 0, dx = s * (g - sum(s * g));
// p = 1: dx = +0 whatever x holds (the forward's output is zeros for any x, NaN included).
inline std::string check_dropout_backward(const Io& io) {
  const CallArgs& a = *io.args;
  const Verdict& v = *io.verdict;
  if (a.p >= 1.0f) {
    for (size_t i = 0; i < io.rows * io.cols; ++i) {
      const double got = load(io.after[2], i, v.x_type);
      if (got != 0.0 || std::signbit(got)) return element_failure("dx", i, i / io.cols, got, 0.0, 0.0) + " (p = 1)";
    }
    return "";
  }
  const Tolerance tol = tolerance_for(v.x_type, v.fp64(), a.cols);
  const double scale = a.p < 1.0f ? 1.0 / (1.0 - static_cast<double>(a.p)) : 0.0;
  std::vector<double> s, g(io.cols);
  unsigned keep4 = 0;
  for (size_t r = 0; r < io.rows; ++r) {
    softmax_row(io.before[0], r, io.cols, v.x_type, false, &s);
    bool nan = std::isnan(s[0]), unjudged = false;
    double dot = 0, magnitude = 0, g_magnitude = 0;
    for (size_t col = 0; col < io.cols; ++col) {
      const size_t i = r * io.cols + col;
      if ((i & 3) == 0 || col == 0) keep4 = softmax_internal::dropout_keep4(io.seed, io.offset, i >> 2, a.p);
      const bool kept = (keep4 >> (i & 3)) & 1u;
      g[col] = kept ? load(io.before[1], i, v.y_type) * scale : 0.0;  // a dropped dy is never read
      nan |= std::isnan(g[col]);
      unjudged |= std::isinf(g[col]) || std::fabs(g[col]) > tol.range;  // the dot then overflows too
      dot += s[col] * g[col];
      magnitude += std::fabs(s[col] * g[col]);
      g_magnitude += std::fabs(g[col]);
    }
    unjudged |= magnitude > tol.range;
    for (size_t col = 0; col < io.cols; ++col) {
      const size_t i = r * io.cols + col;
      const double got = load(io.after[2], i, v.x_type);
      if (nan) {
        if (!std::isnan(got)) return element_failure("dx", i, r, got, std::nan(""), 0);
        continue;
      }
      if (unjudged) continue;
      const double want = s[col] * (g[col] - dot);
      if (s[col] == 0.0) {
        if (got != 0.0) return element_failure("dx", i, r, got, 0.0, 0.0) + " (softmax is 0)";
        continue;
      }
      // s carries the forward's relative error, which scales both terms alike, and near the
      // arithmetic's subnormals an absolute one, scaled by what s multiplies.
      const double t = (tol.arith * 4 + tol.storage) * s[col] * (std::fabs(g[col]) + magnitude + std::fabs(dot)) +
                       tol.arith_floor * (std::fabs(g[col]) + std::fabs(dot) + s[col] * g_magnitude) +
                       tol.storage * std::fabs(want) + tol.floor;
      if (!value_matches(got, want, t, max_finite(v.x_type))) return element_failure("dx", i, r, got, want, t);
    }
  }
  return "";
}

// softmax_row_stats: row_max = max x, row_sumexp = sum exp(x - row_max); all -inf gives
// (-inf, 0), NaN or +inf a NaN sum.
inline std::string check_row_stats(const Io& io) {
  const Verdict& v = *io.verdict;
  const Tolerance tol = tolerance_for(SOFTMAX_DTYPE_F32, false, io.args->cols);
  std::vector<double> unused;
  for (size_t r = 0; r < io.rows; ++r) {
    double m = 0, s = 0;
    softmax_row(io.before[0], r, io.cols, v.x_type, false, &unused, &m, &s);
    bool has_nan = false;
    for (size_t col = 0; col < io.cols; ++col) has_nan |= std::isnan(load(io.before[0], r * io.cols + col, v.x_type));
    const double got_max = load_float(io.after[1], r), got_sum = load_float(io.after[2], r);
    if (has_nan || m == std::numeric_limits<double>::infinity()) {
      if (!std::isnan(got_sum)) return element_failure("row_sumexp", r, r, got_sum, std::nan(""), 0);
      // With a NaN the maximum is undefined; with +inf (and no NaN) it is +inf.
      if (!has_nan && got_max != m) return element_failure("row_max", r, r, got_max, m, 0);
      continue;
    }
    if (m == -std::numeric_limits<double>::infinity()) {
      if (got_max != m || got_sum != 0.0) {
        return "row " + std::to_string(r) + fmt(" is all -inf: statistics (%g, %g), expected (-inf, 0)", got_max, got_sum);
      }
      continue;
    }
    // x is f32, f16 or bf16 here: its maximum is a float, exactly.
    if (got_max != m) return element_failure("row_max", r, r, got_max, m, 0);
    const double t = (tol.arith + tol.storage) * s;
    if (!value_matches(got_sum, s, t, max_finite(SOFTMAX_DTYPE_F32))) return element_failure("row_sumexp", r, r, got_sum, s, t);
  }
  return "";
}

// softmax_rows_from_stats: y = exp(x - row_max) / row_sumexp, log: x - row_max - log(row_sumexp),
// elementwise from the given statistics. Judged where they are what a merge produces (finite
// maximum at or above x, sum >= 1), NaN where a NaN feeds the element, and NaN for a merged
// all -inf row (max -inf, sum 0), as softmax_rows gives it.
inline std::string check_rows_from_stats(const Io& io) {
  const Verdict& v = *io.verdict;
  const Tolerance tol = tolerance_for(v.y_type, false, io.args->cols);
  const double inf = std::numeric_limits<double>::infinity();
  for (size_t r = 0; r < io.rows; ++r) {
    const double m = load_float(io.before[2], r), s = load_float(io.before[3], r);
    for (size_t col = 0; col < io.cols; ++col) {
      const size_t i = r * io.cols + col;
      const double x = load(io.before[0], i, v.x_type);
      const double got = load(io.after[1], i, v.y_type);
      if (std::isnan(x) || std::isnan(m) || std::isnan(s) || (m == -inf && s == 0.0 && x == -inf)) {
        if (!std::isnan(got)) return element_failure("y", i, r, got, std::nan(""), 0);
        continue;
      }
      if (!(std::isfinite(m) && std::isfinite(s) && s >= 1.0 && x <= m)) continue;
      const double d = x - m;
      double want, t;
      if (v.log) {
        want = d - std::log(s);
        t = tol.arith * (std::fabs(x) + std::fabs(m) + std::fabs(std::log(s)) + 1.0) * 4 + tol.storage * std::fabs(want) +
            tol.floor;
      } else {
        want = std::exp(d) / s;
        if (want == 0.0) {  // exp(-inf), or below even float64's range: exactly +0
          if (got != 0.0 || std::signbit(got)) return element_failure("y", i, r, got, 0.0, 0.0);
          continue;
        }
        t = tol.arith * (2.0 + std::fabs(d)) * 4 * want + tol.storage * want + tol.floor;
      }
      if (!value_matches(got, want, t, max_finite(v.y_type))) return element_failure("y", i, r, got, want, t);
    }
  }
  return "";
}

inline std::string check(const Io& io) {
  switch (io.args->op) {
    case Op::Rows:
    case Op::Dropout: return check_forward(io);
    case Op::RowsBackward: return check_rows_backward(io);
    case Op::DropoutBackward: return check_dropout_backward(io);
    case Op::RowStats: return check_row_stats(io);
    case Op::RowsFromStats: return check_rows_from_stats(io);
    case Op::BackwardRowStats: return check_backward_row_stats(io);
    case Op::RowsBackwardFromStats: return check_rows_backward_from_stats(io);
  }
  return "unknown op";
}

}  // namespace results
}  // namespace softmax_reliability
