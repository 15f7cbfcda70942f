// Runs one C API call on host memory and checks every invariant the header promises, whatever the
// arguments: SUCCESS exactly when validity_oracle.h says the arguments are valid; a failure
// names something really wrong, leaves a message and writes nothing anywhere; a success writes
// only y (and keep_mask), leaves an empty message and gives the textbook result (float64
// reference) with rows summing to 1. Shared by the libFuzzer target and the regression tests, so
// a crash input found by the fuzzer is replayed in the unit test through exactly the same checks.
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
#include "fuzz/c_caller.h"
#include "validity_oracle.h"

namespace softmax_reliability {

// The call's memory: x, y and keep_mask point into `arena` (or are NULL); the options struct, if
// any, lies at the start of `options` (options_size bytes owned by the caller).
struct CheckedCall {
  CallArgs args;
  uint64_t seed = 0;
  uint64_t offset = 0;
  unsigned char* arena = nullptr;
  size_t arena_size = 0;
  size_t options_size = 0;
};

namespace detail {

inline double load_element(const unsigned char* p, size_t i, int32_t dtype) {
  if (dtype == SOFTMAX_DTYPE_F32) {
    float f;
    std::memcpy(&f, p + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  return dtype == SOFTMAX_DTYPE_F16 ? softmax_internal::f16_to_float(h)
                                    : softmax_internal::bf16_to_float(h);
}

inline double max_finite(int32_t dtype) {
  return dtype == SOFTMAX_DTYPE_F16 ? 65504.0 : dtype == SOFTMAX_DTYPE_BF16 ? 0x1.fep127 : 0x1.fffffep127;
}

// Loose on purpose: the fuzzer hunts crashes and gross errors; tests/cpu owns the tight bounds.
struct Tolerance {
  double rel;  // relative to the value
  double abs;  // floor for values near the storage type's subnormals (flushed or rounded)
};

inline Tolerance tolerance_for(int32_t dtype, int64_t cols) {
  const double arith = 2e-5 * (1.0 + std::log2(static_cast<double>(cols)) / 4.0);
  switch (dtype) {
    case SOFTMAX_DTYPE_F16: return {0x1p-10 + arith, 0x1p-23};
    case SOFTMAX_DTYPE_BF16: return {0x1p-7 + arith, 0x1p-125};
    default: return {0x1p-22 + arith, 0x1p-125};
  }
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

}  // namespace detail

// A one-line description of the call, enough to write it down as a regression test.
inline std::string describe(const CheckedCall& c) {
  const CallArgs& a = c.args;
  auto where = [&](const void* p) -> std::string {
    if (p == nullptr) return "NULL";
    return "arena+" + std::to_string(static_cast<const unsigned char*>(p) - c.arena);
  };
  std::string s = a.op == Op::Rows ? "softmax_rows(" : "softmax_dropout(";
  s += "x=" + where(a.x) + ", y=" + where(a.y);
  if (a.op == Op::Dropout) s += ", keep_mask=" + where(a.mask);
  s += ", rows=" + std::to_string(a.rows) + ", cols=" + std::to_string(a.cols) +
       ", dtype=" + std::to_string(a.dtype);
  if (a.op == Op::Dropout) {
    char buf[96];
    std::snprintf(buf, sizeof buf, ", p=%a", static_cast<double>(a.p));
    s += buf;
    s += ", seed=" + std::to_string(c.seed) + ", offset=" + std::to_string(c.offset);
  }
  if (a.options == nullptr) {
    s += ", options=NULL)";
  } else {
    softmax_options o;
    std::memcpy(&o, a.options, sizeof o);
    int32_t backend;
    std::memcpy(&backend, a.options + offsetof(softmax_options, backend), sizeof backend);
    s += ", options={struct_size=" + std::to_string(o.struct_size) +
         ", backend=" + std::to_string(backend) + ", flags=" + std::to_string(o.flags) +
         ", stream=" + std::to_string(reinterpret_cast<uintptr_t>(o.stream)) +
         ", num_threads=" + std::to_string(o.num_threads) + ", tail bytes:";
    for (size_t i = sizeof(softmax_options); i < c.options_size; ++i) {
      if (a.options[i] != 0) s += " [" + std::to_string(i) + "]=" + std::to_string(a.options[i]);
    }
    s += "})";
  }
  s += " arena_size=" + std::to_string(c.arena_size);
  return s;
}

// Makes the call and returns "" when every invariant holds, else what broke.
inline std::string run_checked(const CheckedCall& c) {
  using namespace detail;
  const CallArgs& a = c.args;
  const Verdict verdict = judge(a);

  const std::vector<unsigned char> arena_before(c.arena, c.arena + c.arena_size);
  const std::vector<unsigned char> options_before(a.options, a.options + (a.options ? c.options_size : 0));

  softmax_status status;
  if (a.op == Op::Rows) {
    status = fuzz_call_rows(a.x, const_cast<void*>(a.y), a.rows, a.cols, a.dtype, a.options);
  } else {
    status = fuzz_call_dropout(a.x, const_cast<void*>(a.y),
                               static_cast<uint8_t*>(const_cast<void*>(a.mask)), a.rows, a.cols,
                               a.dtype, a.p, c.seed, c.offset, a.options);
  }
  const std::string message = softmax_last_error();
  const std::string status_name = softmax_status_string(status);

  if (status_name.rfind("SOFTMAX_STATUS_", 0) != 0 || status_name == "SOFTMAX_STATUS_UNKNOWN") {
    return "returned an undefined status " + std::to_string(static_cast<int>(status));
  }
  if (a.options && std::memcmp(options_before.data(), a.options, c.options_size) != 0) {
    return "the options struct was modified";
  }
  if (verdict.valid() && status != SOFTMAX_STATUS_SUCCESS) {
    return "valid arguments failed with " + status_name + ": " + message;
  }
  if (!verdict.valid()) {
    if (status == SOFTMAX_STATUS_SUCCESS) {
      return "invalid arguments (oracle's allowed-status mask " + std::to_string(verdict.allowed) +
             ") returned SUCCESS";
    }
    if (!verdict.permits(status)) {
      return "failed with " + status_name + " (\"" + message +
             "\"), which names nothing wrong with the call (oracle mask " +
             std::to_string(verdict.allowed) + ")";
    }
    if (message.empty()) return "failed with " + status_name + " but softmax_last_error() is empty";
    if (std::memcmp(arena_before.data(), c.arena, c.arena_size) != 0) {
      for (size_t i = 0; i < c.arena_size; ++i) {
        if (arena_before[i] != c.arena[i]) {
          return "failed with " + status_name + " yet wrote byte arena+" + std::to_string(i);
        }
      }
    }
    return "";
  }

  // Success.
  if (!message.empty()) return "succeeded but softmax_last_error() is \"" + message + "\"";
  const int32_t dt = a.dtype;
  const size_t es = oracle_element_size(dt);
  const auto* x0 = arena_before.data() + (static_cast<const unsigned char*>(a.x) - c.arena);
  const auto* y = static_cast<const unsigned char*>(a.y);
  const size_t y_off = static_cast<size_t>(y - c.arena);
  const size_t n = verdict.bytes / es;
  const auto* mask = static_cast<const unsigned char*>(a.mask);
  const size_t mask_off = mask ? static_cast<size_t>(mask - c.arena) : 0;
  for (size_t i = 0; i < c.arena_size; ++i) {
    const bool in_y = i >= y_off && i < y_off + verdict.bytes;
    const bool in_mask = mask && a.op == Op::Dropout && i >= mask_off && i < mask_off + n;
    if (!in_y && !in_mask && arena_before[i] != c.arena[i]) {
      return "succeeded but wrote byte arena+" + std::to_string(i) + " outside y and keep_mask";
    }
  }

  bool log_softmax = false;
  if (a.options) {
    uint32_t flags;
    std::memcpy(&flags, a.options + offsetof(softmax_options, flags), sizeof flags);
    log_softmax = (flags & SOFTMAX_FLAG_LOG) != 0;
  }
  const bool dropout = a.op == Op::Dropout;
  const double scale = dropout && a.p < 1.0f ? 1.0 / (1.0 - static_cast<double>(a.p)) : 0.0;
  const Tolerance tol = tolerance_for(dt, a.cols);
  const double maxf = max_finite(dt);
  const auto cols = static_cast<size_t>(a.cols);
  std::vector<double> xr(cols);
  unsigned keep4 = 0;
  for (size_t r = 0; r < static_cast<size_t>(a.rows); ++r) {
    double m = -std::numeric_limits<double>::infinity();
    bool has_nan = false;
    for (size_t col = 0; col < cols; ++col) {
      xr[col] = load_element(x0, r * cols + col, dt);
      has_nan |= std::isnan(xr[col]);
      if (xr[col] > m) m = xr[col];
    }
    // NaN anywhere, any +inf, or all -inf: the textbook formula gives NaN for the whole row.
    const bool nan_row = has_nan || std::isinf(m);
    double s = 0.0;
    if (!nan_row) {
      for (size_t col = 0; col < cols; ++col) s += std::exp(xr[col] - m);
    }
    const double log_s = std::log(s);
    double row_sum = 0.0, row_tol = 0.0;
    for (size_t col = 0; col < cols; ++col) {
      const size_t i = r * cols + col;
      const double got = load_element(y, i, dt);
      double want, t;
      bool kept = true;
      if (dropout) {
        if ((i & 3) == 0 || col == 0) keep4 = softmax_internal::dropout_keep4(c.seed, c.offset, i >> 2, a.p);
        kept = (keep4 >> (i & 3)) & 1u;
        if (mask && mask[i] != (kept ? 1 : 0)) {
          return "keep_mask[" + std::to_string(i) + "] is " + std::to_string(mask[i]) +
                 ", expected " + (kept ? "1" : "0") + " -- " + describe(c);
        }
      }
      if (!kept) {
        if (got != 0.0) return "dropped element " + std::to_string(i) + fmt(" is %g, not 0", got) + " -- " + describe(c);
        continue;
      }
      if (nan_row) {
        want = std::numeric_limits<double>::quiet_NaN();
        t = 0;
      } else if (log_softmax) {
        const double d = xr[col] - m;
        want = d - log_s;
        t = tol.rel * (std::fabs(d) + std::fabs(log_s) + 1.0) + tol.abs;
      } else {
        want = std::exp(xr[col] - m) / s * (dropout ? scale : 1.0);
        t = tol.rel * std::fabs(want) + tol.abs * (dropout ? scale : 1.0);
      }
      if (!value_matches(got, want, t, maxf)) {
        return "element " + std::to_string(i) + " (row " + std::to_string(r) + ")" +
               fmt(": got %.9g, expected %.9g (tolerance %.3g)", got, want, t) + " -- " + describe(c);
      }
      row_sum += dropout ? got / scale : got;
      row_tol += t / (dropout ? scale : 1.0);
    }
    // Rows of finite input sum to 1 (softmax and dropout with nothing dropped).
    if (!nan_row && !log_softmax && (!dropout || a.p == 0.0f) &&
        !(std::fabs(row_sum - 1.0) <= row_tol + 1e-6)) {
      return "row " + std::to_string(r) + fmt(" sums to %.9g, not 1 (tolerance %.3g)", row_sum, row_tol) +
             " -- " + describe(c);
    }
  }
  return "";
}

}  // namespace softmax_reliability
