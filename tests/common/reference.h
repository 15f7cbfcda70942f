/* SPDX-License-Identifier: Apache-2.0 */
// Test support: fresh random inputs, a float64 reference softmax, dtype conversions and error
// metrics. Shared by every suite so that all backends are judged by the same yardstick.
#pragma once

#include <softmax/softmax.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backends/common/double_to_half.h"
#include "backends/common/half_bits.h"
#include "backends/common/philox.h"

namespace softmax_test {

using softmax_internal::bf16_to_float;
using softmax_internal::f16_to_float;
using softmax_internal::float_to_bf16;
using softmax_internal::float_to_f16;

inline size_t element_size(softmax_dtype t) {
  return t == SOFTMAX_DTYPE_F64 ? 8 : t == SOFTMAX_DTYPE_F32 ? 4 : 2;
}

inline const char* dtype_name(softmax_dtype t) {
  return t == SOFTMAX_DTYPE_F64   ? "f64"
         : t == SOFTMAX_DTYPE_F32 ? "f32"
         : t == SOFTMAX_DTYPE_F16 ? "f16"
                                  : "bf16";
}

constexpr softmax_dtype kAllDtypes[] = {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F16, SOFTMAX_DTYPE_BF16,
                                        SOFTMAX_DTYPE_F64};

// A seed that differs from run to run (and is printed on failure by the caller), so tests see
// fresh inputs every time instead of one lucky fixed vector.
inline uint64_t fresh_seed() {
  static std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

// Storage for n elements of `dtype`, as raw bytes.
struct Buffer {
  softmax_dtype dtype;
  std::vector<unsigned char> bytes;
  Buffer(softmax_dtype t, size_t n) : dtype(t), bytes(n * element_size(t)) {}
  size_t size() const { return bytes.size() / element_size(dtype); }
  void* data() { return bytes.data(); }
  const void* data() const { return bytes.data(); }

  double get(size_t i) const {
    if (dtype == SOFTMAX_DTYPE_F64) {
      double d;
      std::memcpy(&d, bytes.data() + 8 * i, 8);
      return d;
    }
    if (dtype == SOFTMAX_DTYPE_F32) {
      float f;
      std::memcpy(&f, bytes.data() + 4 * i, 4);
      return f;
    }
    uint16_t h;
    std::memcpy(&h, bytes.data() + 2 * i, 2);
    return dtype == SOFTMAX_DTYPE_F16 ? f16_to_float(h) : bf16_to_float(h);
  }
  // Stores v rounded (once, to nearest even) to the buffer's type.
  void set(size_t i, double v) {
    if (dtype == SOFTMAX_DTYPE_F64) {
      std::memcpy(bytes.data() + 8 * i, &v, 8);
      return;
    }
    if (dtype == SOFTMAX_DTYPE_F32) {
      const float f = static_cast<float>(v);
      std::memcpy(bytes.data() + 4 * i, &f, 4);
      return;
    }
    const uint16_t h = dtype == SOFTMAX_DTYPE_F16 ? softmax_internal::double_to_f16(v)
                                                  : softmax_internal::double_to_bf16(v);
    std::memcpy(bytes.data() + 2 * i, &h, 2);
  }
  // Fill with a NaN bit pattern so that any element a kernel forgets to write fails the check.
  void poison() {
    if (dtype == SOFTMAX_DTYPE_F64) {
      const uint64_t nan = 0x7ff8dead0000beefull;
      for (size_t i = 0; i < size(); ++i) std::memcpy(bytes.data() + 8 * i, &nan, 8);
    } else if (dtype == SOFTMAX_DTYPE_F32) {
      const uint32_t nan = 0x7fc0dead;
      for (size_t i = 0; i < size(); ++i) std::memcpy(bytes.data() + 4 * i, &nan, 4);
    } else {
      const uint16_t nan = 0x7e5a;  // a NaN in both f16 and bf16
      for (size_t i = 0; i < size(); ++i) std::memcpy(bytes.data() + 2 * i, &nan, 2);
    }
  }
};

// Uniform values in [-scale, scale], stored in `dtype` (so the reference sees the rounded values).
inline Buffer random_input(softmax_dtype dtype, size_t n, uint64_t seed, float scale = 8.0f) {
  Buffer b(dtype, n);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  for (size_t i = 0; i < n; ++i) b.set(i, dist(rng));
  return b;
}

// The textbook formula for one row of the stored input, evaluated in long double (on x86 a 64-bit
// significand and a 15-bit exponent) and rounded once to double: accurate enough to judge fp64
// arithmetic, and free of intermediate underflow at the bottom of double's range. `scale`
// multiplies each softmax value before that rounding (dropout's 1 / (1 - p)).
inline void reference_row(const Buffer& x, size_t row, size_t cols, bool log_softmax,
                          std::vector<double>* out, double scale = 1.0) {
  out->assign(cols, 0.0);
  double m = -std::numeric_limits<double>::infinity();
  bool has_nan = false;
  for (size_t c = 0; c < cols; ++c) {
    const double v = x.get(row * cols + c);
    has_nan |= std::isnan(v);
    m = std::max(m, v);
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // NaN anywhere, or a max of +-inf (all -inf, or any +inf), makes the whole row NaN, as
  // exp(x - max) / sum does in float64 (inf - inf = NaN).
  if (has_nan || std::isinf(m)) {
    out->assign(cols, nan);
    return;
  }
  long double s = 0.0L;
  for (size_t c = 0; c < cols; ++c) s += std::exp(static_cast<long double>(x.get(row * cols + c)) - m);
  const long double log_s = std::log(s);
  for (size_t c = 0; c < cols; ++c) {
    const long double d = static_cast<long double>(x.get(row * cols + c)) - m;
    (*out)[c] = static_cast<double>(log_softmax ? d - log_s : std::exp(d) / s * scale);
  }
}

// Absolute tolerance for an output element stored as `t` whose exact value is `ref`: the
// arithmetic's error (fp64 when `fp64_arith`, else fp32) plus the rounding of the stored result,
// plus a floor below which any backend may differ: a result under the smallest normal number of
// f32, bf16 and f64 may come out flushed to zero (GPUs flush subnormal exp results), f16 keeps
// its subnormal step (conversions to f16 round subnormals exactly).
inline double tolerance_floor(softmax_dtype t) {
  return t == SOFTMAX_DTYPE_F64 ? 0x1p-1022 : t == SOFTMAX_DTYPE_F16 ? 0x1p-24 : 0x1p-126;
}
inline double tolerance(softmax_dtype t, double ref, bool log_softmax, size_t cols,
                        bool fp64_arith = false) {
  const double storage = t == SOFTMAX_DTYPE_F64   ? 0x1p-53
                         : t == SOFTMAX_DTYPE_F32 ? 0x1p-24
                         : t == SOFTMAX_DTYPE_F16 ? 0x1p-11
                                                  : 0x1p-8;
  // fp64: sums of 10^5 terms in any order drift by ~1e-14.
  const double unit = fp64_arith || t == SOFTMAX_DTYPE_F64 ? 1e-14 : 1e-6;
  const double arith = unit * (1.0 + std::log2(double(cols) + 1.0) / 8.0);
  return std::fabs(ref) * (storage + arith) + tolerance_floor(t) +
         (log_softmax ? arith * (1.0 + std::fabs(ref)) : 0.0);
}

// v as the nearest value of type t (once rounded), e.g. +-inf past the type's range.
inline double round_to(softmax_dtype t, double v) {
  switch (t) {
    case SOFTMAX_DTYPE_F64:
      return v;
    case SOFTMAX_DTYPE_F32:
      return static_cast<float>(v);
    case SOFTMAX_DTYPE_F16:
      return f16_to_float(softmax_internal::double_to_f16(v));
    default:
      return bf16_to_float(softmax_internal::double_to_bf16(v));
  }
}

// Half the smallest subnormal of t: nonnegative results below it round to +0 in t. For f64 that
// is below every positive double, so 0 (only an exact 0 must be +0).
inline double half_smallest_subnormal(softmax_dtype t) {
  return t == SOFTMAX_DTYPE_F64   ? 0.0
         : t == SOFTMAX_DTYPE_F32 ? 0x1p-150
         : t == SOFTMAX_DTYPE_F16 ? 0x1p-25
                                  : 0x1p-134;
}

// One output element stored as `t` against its float64 value `want`:
//   NaN must stay NaN;
//   where `want` rounded to t is infinite (log-softmax of -inf, or a value past t's range) the
//     output must be exactly that infinity (inf - inf would make any tolerance check NaN);
//   a softmax value that is exactly 0, or so far below half of t's smallest subnormal that the
//     arithmetic's error cannot reach it, must be exactly +0 (never a stray subnormal). fp32
//     arithmetic may round exp(x - max) to f32's subnormal grid before dividing it by the sum
//     (>= 1): an absolute error of up to 2^-150, which can turn a value just below 2^-150 into
//     f32's smallest subnormal;
//   anything else within tolerance(), plus, for softmax, the effect of rounding the argument of
//     exp: x - max is computed in the arithmetic's precision (unit roundoff u), an absolute error
//     of up to |x - max| u, hence a relative error of |x - max| u in exp(x - max). The caller
//     passes the element's exact softmax value s (before any dropout scale), which bounds it:
//     |x - max| = -log(s * sum) <= -log(s).
inline bool value_matches(softmax_dtype t, double got, double want, bool log_softmax, size_t cols,
                          bool fp64_arith = false, double softmax_value = 1.0) {
  if (std::isnan(want)) return std::isnan(got);
  const double rounded = round_to(t, want);
  if (std::isinf(rounded)) return got == rounded;
  const bool fp64 = fp64_arith || t == SOFTMAX_DTYPE_F64;
  const double exp_argument = !log_softmax && softmax_value > 0.0 ? -std::log(softmax_value) : 0.0;
  const double tol = tolerance(t, want, log_softmax, cols, fp64_arith) +
                     std::fabs(want) * exp_argument * (fp64 ? 0x1p-53 : 0x1p-24);
  // For softmax the tolerance is a relative part plus the floor.
  const double half = half_smallest_subnormal(t), relative_part = tol - tolerance_floor(t);
  const double subnormal_exp = fp64 ? 0.0 : 0x1p-150;
  // (log-softmax has no such rule: its exact zeros, log(1), are values like any other; f64 keeps
  // a zero's floor too, as exp at the bottom of double's range may land on either side of 0.)
  const bool must_be_zero = !log_softmax && ((want == 0.0 && t != SOFTMAX_DTYPE_F64) ||
                                             (want > 0.0 && want + relative_part + subnormal_exp < half));
  if (must_be_zero) return got == 0.0 && !std::signbit(got);
  return std::fabs(got - want) <= tol;
}

// value_matches for a softmax (or log-softmax) value that is its own softmax value.
inline bool element_ok(softmax_dtype t, double got, double want, bool log_softmax, size_t cols,
                       bool fp64_arith = false) {
  return value_matches(t, got, want, log_softmax, cols, fp64_arith, log_softmax ? 1.0 : want);
}

// Max relative-to-tolerance violation over a row: <= 1 passes. NaN expected must be NaN got.
struct RowCheck {
  bool ok = true;
  size_t bad_col = 0;
  double got = 0, want = 0;
};

inline RowCheck check_row(const Buffer& y, size_t row, size_t cols, const std::vector<double>& ref,
                          bool log_softmax, bool fp64_arith = false) {
  RowCheck r;
  for (size_t c = 0; c < cols; ++c) {
    const double got = y.get(row * cols + c), want = ref[c];
    if (!value_matches(y.dtype, got, want, log_softmax, cols, fp64_arith, want)) return RowCheck{false, c, got, want};
  }
  return r;
}

}  // namespace softmax_test
