/* SPDX-License-Identifier: Apache-2.0 */
// One call of any of the eight compute functions on owned buffers, with fresh random inputs in
// the role each array plays: the unit the concurrency and determinism tests repeat and compare.
#pragma once

#include <softmax/softmax.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "checked_call.h"
#include "reference.h"

namespace softmax_reliability {

struct OpCall {
  Op op = Op::Rows;
  bool log = false;
  softmax_dtype dtype = SOFTMAX_DTYPE_F32;  // x and dx
  softmax_dtype y_dtype = SOFTMAX_DTYPE_F32;  // y and dy (SOFTMAX_FLAG_Y_DTYPE when different)
  int64_t rows = 0, cols = 0;
  float p = 0.0f;
  uint64_t seed = 0, offset = 0;
  std::vector<std::vector<unsigned char>> arrays;  // in parameter order: inputs filled, outputs sized
  bool mask = true;                                // softmax_dropout: pass keep_mask (else NULL)

  const OpRule& rule() const { return op_rule(op); }
  bool is_output(int i) const { return rule().array[i].output; }
  // The output that may alias an input (y = x, dx = dy), or -1.
  int in_place_output() const {
    for (int i = 0; i < rule().arrays; ++i) {
      if (rule().array[i].in_place_with >= 0) return i;
    }
    return -1;
  }

  softmax_options options(int num_threads) const {
    softmax_options o = softmax_default_options();
    o.backend = SOFTMAX_BACKEND_CPU;
    o.num_threads = num_threads;
    o.flags = (log ? SOFTMAX_FLAG_LOG : 0u) | (y_dtype != dtype ? SOFTMAX_FLAG_Y_DTYPE : 0u);
    o.y_dtype = y_dtype;
    return o;
  }

  // The call on `ptrs` (parameter order), as the C API sees it.
  CallArgs args(void* const* ptrs, const softmax_options* o) const {
    CallArgs a;
    a.op = op;
    for (int i = 0; i < rule().arrays; ++i) a.array[i] = ptrs[i];
    if (op == Op::Dropout && !mask) a.array[2] = nullptr;
    a.rows = rows;
    a.cols = cols;
    a.dtype = dtype;
    a.options = reinterpret_cast<const unsigned char*>(o);
    a.p = p;
    return a;
  }

  // Runs on `out` (outputs written there; its inputs are copies of this call's). In place, the
  // aliasing output starts as a copy of its partner input and is passed for both.
  softmax_status run(std::vector<std::vector<unsigned char>>* out, int num_threads, bool in_place) const {
    *out = arrays;
    void* ptrs[4] = {};
    for (int i = 0; i < rule().arrays; ++i) ptrs[i] = (*out)[i].data();
    const int alias = in_place ? in_place_output() : -1;
    if (alias >= 0) {
      const int partner = rule().array[alias].in_place_with;
      (*out)[alias] = (*out)[partner];
      ptrs[alias] = ptrs[partner] = (*out)[alias].data();
    }
    const softmax_options o = options(num_threads);
    return call_c_api(args(ptrs, &o), seed, offset);
  }

  // The outputs of a separate (not in-place) run checked against the float64 reference.
  std::string check(const std::vector<std::vector<unsigned char>>& out) const {
    void* ptrs[4] = {};
    for (int i = 0; i < rule().arrays; ++i) ptrs[i] = const_cast<unsigned char*>(out[i].data());
    const softmax_options o = options(0);
    return check_outputs(args(ptrs, &o), seed, offset);
  }

  std::string describe() const {
    return std::string(rule().function) + (log ? " (log)" : "") + " " + softmax_test::dtype_name(dtype) +
           (y_dtype != dtype ? std::string(" -> ") + softmax_test::dtype_name(y_dtype) : std::string()) + " " +
           std::to_string(rows) + "x" + std::to_string(cols);
  }
};

// A call of `op` on fresh inputs from `input_seed`: x in [-8, 8], the forward's y in [0, 1]
// (log-softmax: [-10, 0]), dy in [-2, 2], row_dot in [-1, 1], row_max and row_sumexp x's own
// statistics merged with another shard's (maximum 0.5, sum 3). Outputs are sized and poisoned.
inline OpCall make_op_call(Op op, bool log, softmax_dtype dtype, softmax_dtype y_dtype, int64_t rows, int64_t cols,
                           uint64_t input_seed) {
  OpCall c;
  c.op = op;
  c.log = log;
  c.dtype = dtype;
  c.y_dtype = y_dtype;
  c.rows = rows;
  c.cols = cols;
  std::mt19937_64 rng(input_seed);
  c.p = static_cast<float>(rng() % 1000) / 1000.0f;
  c.seed = rng();
  c.offset = rng() % 64;
  const auto n = static_cast<size_t>(rows * cols);
  const OpRule& rule = op_rule(op);
  softmax_test::Buffer x(dtype, 0);
  for (int i = 0; i < rule.arrays; ++i) {
    const ArrayRule& a = rule.array[i];
    std::vector<unsigned char> bytes;
    if (a.storage == Storage::RowFloat && a.output) {
      bytes.assign(static_cast<size_t>(rows) * sizeof(float), 0xFF);  // NaN bit patterns
    } else if (a.storage == Storage::RowFloat) {
      std::vector<float> f(static_cast<size_t>(rows));
      for (size_t r = 0; r < f.size(); ++r) {
        if (std::strcmp(a.name, "row_dot") == 0 || x.size() != n) {
          f[r] = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
          continue;
        }
        double m = -INFINITY, s = 0;
        for (size_t k = 0; k < size_t(cols); ++k) m = std::max(m, x.get(r * cols + k));
        for (size_t k = 0; k < size_t(cols); ++k) s += std::exp(x.get(r * cols + k) - m);
        const double merged_m = std::max(m, 0.5);
        const double merged_s = s * std::exp(m - merged_m) + 3.0 * std::exp(0.5 - merged_m);
        f[r] = static_cast<float>(std::strcmp(a.name, "row_max") == 0 ? merged_m : merged_s);
      }
      bytes.resize(f.size() * sizeof(float));
      std::memcpy(bytes.data(), f.data(), bytes.size());
    } else if (a.storage == Storage::Mask) {
      bytes.assign(n, 0xCD);
    } else {
      softmax_test::Buffer b(a.storage == Storage::X ? dtype : y_dtype, n);
      if (a.output) {
        b.poison();
      } else if (a.storage == Storage::X) {
        b = softmax_test::random_input(dtype, n, rng());
        x = b;
      } else {
        const bool is_dy = std::strcmp(a.name, "dy") == 0;
        std::uniform_real_distribution<double> dist(is_dy ? -2.0 : log ? -10.0 : 0.0, is_dy ? 2.0 : log ? 0.0 : 1.0);
        for (size_t k = 0; k < n; ++k) b.set(k, dist(rng));
      }
      bytes = std::move(b.bytes);
    }
    c.arrays.push_back(std::move(bytes));
  }
  return c;
}

}  // namespace softmax_reliability
