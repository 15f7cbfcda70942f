/* SPDX-License-Identifier: Apache-2.0 */
// The rows the differential tests feed every backend: for each storage type, finite rows at
// magnitudes from 1 up to the type's range (both signs, and both signs within a row), and rows
// with -inf, NaN and +inf in different places. Each kind fills one row of a call; the test puts
// all kinds of a call side by side, so a row's neighbours are always of other kinds.
#pragma once

#include <softmax/softmax.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "reference.h"

namespace softmax_semantics {

using softmax_test::Buffer;

struct RowSink {
  Buffer* x;
  size_t row;
  int64_t cols;
  std::mt19937_64* rng;
  void set(int64_t c, double v) const { x->set(row * size_t(cols) + size_t(c), v); }
  double uniform(double lo, double hi) const { return std::uniform_real_distribution<double>(lo, hi)(*rng); }
  int64_t index() const { return int64_t((*rng)() % uint64_t(cols)); }
};

struct RowKind {
  std::string name;
  std::function<void(const RowSink&)> fill;
};

// Magnitudes whose values are finite in t (16-bit types saturate at their own range).
inline std::vector<double> magnitudes(softmax_dtype t) {
  switch (t) {
    case SOFTMAX_DTYPE_F16:
      return {1, 1e4, 65504};
    case SOFTMAX_DTYPE_F64:
      return {1, 1e4, 1e8, 1e10, 1e20, 1e30, 3e38, 1e100, 1e300, 1.7e308};
    default:
      return {1, 1e4, 1e8, 1e10, 1e20, 1e30, 3e38};
  }
}

// Spacing of t's values near m (its ulp), so clusters of values near m really differ.
inline double spacing(softmax_dtype t, double m) {
  const int digits = t == SOFTMAX_DTYPE_F64 ? 53 : t == SOFTMAX_DTYPE_F32 ? 24 : t == SOFTMAX_DTYPE_F16 ? 11 : 8;
  return std::ldexp(1.0, std::ilogb(m) - digits + 1);
}

inline std::vector<RowKind> finite_kinds(softmax_dtype t) {
  std::vector<RowKind> kinds;
  for (const double m : magnitudes(t)) {
    // A cluster just below m: differences from a few units up to a few hundred ulps, so exp of
    // x - max spans normal, subnormal and zero results (exact differences: Sterbenz).
    const double spread = std::max(40.0, 8.0 * spacing(t, m));
    const std::string tag = std::to_string(m);
    kinds.push_back({"uniform in [-" + tag + ", " + tag + "]",
                     [m](const RowSink& s) {
                       for (int64_t c = 0; c < s.cols; ++c) s.set(c, m * s.uniform(-1, 1));
                     }});
    kinds.push_back({"cluster below +" + tag, [m, spread](const RowSink& s) {
                       for (int64_t c = 0; c < s.cols; ++c) s.set(c, m - s.uniform(0, spread));
                     }});
    kinds.push_back({"cluster above -" + tag, [m, spread](const RowSink& s) {
                       for (int64_t c = 0; c < s.cols; ++c) s.set(c, -(m - s.uniform(0, spread)));
                     }});
    kinds.push_back({"+-" + tag + " and small values", [m, spread](const RowSink& s) {
                       for (int64_t c = 0; c < s.cols; ++c) {
                         const double v = m - s.uniform(0, spread);
                         s.set(c, c % 3 == 0 ? v : c % 3 == 1 ? -v : s.uniform(-1, 1));
                       }
                     }});
  }
  return kinds;
}

inline std::vector<RowKind> nonfinite_kinds(softmax_dtype t) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double big = magnitudes(t).back();
  auto base = [](const RowSink& s) {
    for (int64_t c = 0; c < s.cols; ++c) s.set(c, s.uniform(-8, 8));
  };
  std::vector<RowKind> kinds;
  for (const int64_t k : {2, 3, 7, 64}) {
    kinds.push_back({"-inf every " + std::to_string(k) + " elements", [=](const RowSink& s) {
                       base(s);
                       for (int64_t c = 0; c < s.cols; c += k) s.set(c, -inf);
                     }});
  }
  kinds.push_back({"all -inf but one", [=](const RowSink& s) {
                     const int64_t keep = s.index();
                     for (int64_t c = 0; c < s.cols; ++c) s.set(c, c == keep ? s.uniform(-8, 8) : -inf);
                   }});
  kinds.push_back({"all -inf", [=](const RowSink& s) {
                     for (int64_t c = 0; c < s.cols; ++c) s.set(c, -inf);
                   }});
  kinds.push_back({"-inf over the first half", [=](const RowSink& s) {
                     base(s);
                     for (int64_t c = 0; c < s.cols / 2; ++c) s.set(c, -inf);
                   }});
  for (const int where : {0, 1, 2}) {
    kinds.push_back({"NaN " + std::string(where == 0 ? "first" : where == 1 ? "in the middle" : "last"),
                     [=](const RowSink& s) {
                       base(s);
                       s.set(where == 0 ? 0 : where == 1 ? s.cols / 2 : s.cols - 1, nan);
                     }});
  }
  kinds.push_back({"NaN among -inf", [=](const RowSink& s) {
                     for (int64_t c = 0; c < s.cols; ++c) s.set(c, -inf);
                     s.set(s.index(), nan);
                   }});
  kinds.push_back({"+inf somewhere", [=](const RowSink& s) {
                     base(s);
                     s.set(s.index(), inf);
                   }});
  kinds.push_back({"+inf and -inf", [=](const RowSink& s) {
                     base(s);
                     s.set(s.cols - 1, -inf);
                     s.set(0, inf);
                   }});
  kinds.push_back({"largest magnitudes of both signs and -inf", [=](const RowSink& s) {
                     for (int64_t c = 0; c < s.cols; ++c)
                       s.set(c, c % 4 == 0 ? big : c % 4 == 1 ? -big : c % 4 == 2 ? -inf : s.uniform(-1, 1));
                   }});
  return kinds;
}

inline std::vector<RowKind> all_kinds(softmax_dtype t) {
  std::vector<RowKind> kinds = finite_kinds(t);
  for (RowKind& k : nonfinite_kinds(t)) kinds.push_back(std::move(k));
  return kinds;
}

}  // namespace softmax_semantics
