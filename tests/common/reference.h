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
  // Stores v rounded to the buffer's type (16-bit types through float).
  void set(size_t i, double v) {
    if (dtype == SOFTMAX_DTYPE_F64) {
      std::memcpy(bytes.data() + 8 * i, &v, 8);
      return;
    }
    const float f = static_cast<float>(v);
    if (dtype == SOFTMAX_DTYPE_F32) {
      std::memcpy(bytes.data() + 4 * i, &f, 4);
      return;
    }
    const uint16_t h = dtype == SOFTMAX_DTYPE_F16 ? float_to_f16(f) : float_to_bf16(f);
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

// The textbook formula in float64 for one row of the stored input.
inline void reference_row(const Buffer& x, size_t row, size_t cols, bool log_softmax,
                          std::vector<double>* out) {
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
  // The sum in long double: a float64 sum of 10^5 terms drifts by ~1e-14, as much as what fp64
  // backends are held to.
  long double acc = 0.0L;
  for (size_t c = 0; c < cols; ++c) acc += std::exp(static_cast<long double>(x.get(row * cols + c)) - m);
  for (size_t c = 0; c < cols; ++c) {
    const long double d = static_cast<long double>(x.get(row * cols + c)) - m;
    (*out)[c] = log_softmax ? static_cast<double>(d - std::log(acc)) : static_cast<double>(std::exp(d) / acc);
  }
}

// Absolute tolerance for an output element stored as `t` whose exact value is `ref`: the
// arithmetic's error (fp64 when `fp64_arith`, else fp32) plus the rounding of the stored result.
// The floor is the smallest normal number of the output type (f16: half its subnormal step, as
// the conversion to f16 rounds subnormals exactly): a result below it may come out flushed to
// zero, never as some larger number.
inline double tolerance(softmax_dtype t, double ref, bool log_softmax, size_t cols,
                        bool fp64_arith = false) {
  const double storage = t == SOFTMAX_DTYPE_F64   ? 0x1p-53
                         : t == SOFTMAX_DTYPE_F32 ? 0x1p-24
                         : t == SOFTMAX_DTYPE_F16 ? 0x1p-11
                                                  : 0x1p-8;
  const bool fp64 = fp64_arith || t == SOFTMAX_DTYPE_F64;
  const double unit = fp64 ? 1e-14 : 1e-6;
  double arith = unit * (1.0 + std::log2(double(cols) + 1.0) / 8.0);
  // exp's condition number: y = exp(x - max) / sum inherits the rounding of its argument, so a
  // probability far below 1 (|x - max| large, e.g. with large magnitudes) carries a relative
  // error of about |log y| units of the arithmetic.
  if (!log_softmax && ref != 0.0) arith += std::fabs(std::log(std::fabs(ref))) * (fp64 ? 0x1p-52 : 0x1p-23);
  const double floor = t == SOFTMAX_DTYPE_F64   ? 0x1p-1022
                       : t == SOFTMAX_DTYPE_F16 ? 0x1p-25
                                                : 0x1p-126;
  return std::fabs(ref) * (storage + arith) + (log_softmax ? arith * (1.0 + std::fabs(ref)) : floor);
}

// True when `ref` rounds to zero in type t: the output must then be exactly +0. (Written with
// ldexp: some compilers mis-read a hex literal below the double range.)
inline bool rounds_to_zero(softmax_dtype t, double ref) {
  if (t == SOFTMAX_DTYPE_F64) return ref == 0.0;
  const int half_min_subnormal_exp = t == SOFTMAX_DTYPE_F32 ? -150 : t == SOFTMAX_DTYPE_F16 ? -25 : -134;
  return std::fabs(ref) < std::ldexp(1.0, half_min_subnormal_exp);
}

// True when `ref` overflows type t (a log-probability past -FLT_MAX, say): the output must then
// be that infinity.
inline bool rounds_to_infinity(softmax_dtype t, double ref) {
  // The largest finite value plus half a step of the type.
  const double limit = t == SOFTMAX_DTYPE_F64    ? INFINITY
                       : t == SOFTMAX_DTYPE_F16  ? 65520.0
                       : t == SOFTMAX_DTYPE_BF16 ? std::ldexp(255.5, 120)
                                                 : std::ldexp(16777215.5, 104);
  return std::fabs(ref) >= limit;
}

// One output element against its float64 value: NaN must stay NaN; an infinite expected value
// (log-softmax of a -inf input) must be hit exactly, since inf - inf would make any tolerance
// check NaN; a value that rounds to zero must be exactly +0; anything else within tolerance().
inline bool element_ok(softmax_dtype t, double got, double want, bool log_softmax, size_t cols,
                       bool fp64_arith = false) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  // Exactly +0 where the value is clearly below half the smallest step (not within the
  // arithmetic's error of that boundary, where either neighbour is a correct rounding).
  if (!log_softmax && rounds_to_zero(t, want * (1.0 + 1e-5))) return got == 0.0 && !std::signbit(got);
  if (rounds_to_infinity(t, want)) return got == std::copysign(INFINITY, want);
  return std::fabs(got - want) <= tolerance(t, want, log_softmax, cols, fp64_arith);
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
    const bool pass = element_ok(y.dtype, got, want, log_softmax, cols, fp64_arith);
    if (!pass) return RowCheck{false, c, got, want};
  }
  return r;
}

}  // namespace softmax_test
