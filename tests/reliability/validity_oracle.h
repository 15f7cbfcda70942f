/* SPDX-License-Identifier: Apache-2.0 */
// Which arguments the C API must accept, stated from the public header's documentation alone
// (not from src/validate.cpp), so that the fuzzer and the regression tests can check
// "SUCCESS if and only if the arguments are valid" against a second, independent reading.
//
// The oracle does not fix the order in which the library checks things: for invalid arguments it
// returns the set of statuses that name something really wrong with the call, and a failing call
// must report one of them.
//
// What the header says, rule by rule:
//   - Every array is a dense [rows, cols] matrix, except the row statistics (row_max,
//     row_sumexp, row_dot): `rows` floats. Arrays that mirror x (x, dx) are stored as `dtype`,
//     arrays that mirror y (y, dy) as options->y_dtype when SOFTMAX_FLAG_Y_DTYPE is set, else
//     as `dtype`; keep_mask has one byte per element.
//   - rows == 0 or cols == 0: success, nothing read or written, pointers may be NULL; rows or
//     cols < 0: INVALID_SIZE. An empty call is still refused for its options, storage types and
//     p (those are not pointers).
//   - rows * cols * element size must fit (every array): SIZE_OVERFLOW otherwise.
//   - Options: NULL = defaults. struct_size below the first version's size (the struct through
//     num_threads) or above SOFTMAX_OPTIONS_MAX_SIZE: INVALID_OPTIONS, and then no other field
//     can be read. Bytes past sizeof(softmax_options) up to struct_size must be zero. Unknown
//     flags, negative num_threads: INVALID_OPTIONS; backend outside the enum: INVALID_BACKEND.
//     SOFTMAX_FLAG_Y_DTYPE in a struct too small to hold y_dtype: INVALID_OPTIONS (y_dtype is
//     read only behind that flag).
//   - dtype or y_dtype outside the enum: INVALID_DTYPE. The four statistics functions refuse
//     f64 rows: INVALID_DTYPE when x or y is f64 (f64 storage means fp64 arithmetic, which
//     float statistics cannot carry).
//   - SOFTMAX_FLAG_LOG is rejected by softmax_dropout and softmax_dropout_backward.
//   - p (the dropout functions) outside [0, 1] or NaN: INVALID_PROBABILITY.
//   - Overlap: an output may share bytes with no other array, except its in-place partner
//     (y with x, dx with dy) when both start at the same address and have the same element
//     size. Inputs may share bytes with each other.
//   - Host memory only in these callers: CUDA asked for but unavailable is BACKEND_UNAVAILABLE;
//     available, plain host memory is in the wrong space. An empty call reads no pointer, so it
//     never gets that far.
#pragma once

#include <softmax/softmax.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace softmax_reliability {

enum class Op {
  Rows,
  Dropout,
  RowsBackward,
  DropoutBackward,
  RowStats,
  RowsFromStats,
  BackwardRowStats,
  RowsBackwardFromStats,
};
constexpr int kOpCount = 8;

// How an array argument is stored.
enum class Storage {
  X,         // as dtype (x, dx)
  Y,         // as y's type (y, dy)
  Mask,      // one byte per element
  RowFloat,  // `rows` floats
};

struct ArrayRule {
  const char* name;
  Storage storage;
  bool output;
  bool optional;      // NULL is allowed (keep_mask)
  int in_place_with;  // the one array this output may equal exactly, or -1
};

struct OpRule {
  const char* function;
  int arrays;
  ArrayRule array[4];  // in the function's parameter order
  bool takes_p;        // dropout probability, seed and offset
  bool log_allowed;
  bool f64_allowed;
};

inline const OpRule& op_rule(Op op) {
  static const OpRule kRules[kOpCount] = {
      {"softmax_rows", 2,
       {{"x", Storage::X, false, false, -1}, {"y", Storage::Y, true, false, 0}}, false, true, true},
      {"softmax_dropout", 3,
       {{"x", Storage::X, false, false, -1}, {"y", Storage::Y, true, false, 0},
        {"keep_mask", Storage::Mask, true, true, -1}},
       true, false, true},
      {"softmax_rows_backward", 3,
       {{"y", Storage::Y, false, false, -1}, {"dy", Storage::Y, false, false, -1},
        {"dx", Storage::X, true, false, 1}},
       false, true, true},
      {"softmax_dropout_backward", 3,
       {{"x", Storage::X, false, false, -1}, {"dy", Storage::Y, false, false, -1},
        {"dx", Storage::X, true, false, 1}},
       true, false, true},
      {"softmax_row_stats", 3,
       {{"x", Storage::X, false, false, -1}, {"row_max", Storage::RowFloat, true, false, -1},
        {"row_sumexp", Storage::RowFloat, true, false, -1}},
       false, true, false},
      {"softmax_rows_from_stats", 4,
       {{"x", Storage::X, false, false, -1}, {"y", Storage::Y, true, false, 0},
        {"row_max", Storage::RowFloat, false, false, -1}, {"row_sumexp", Storage::RowFloat, false, false, -1}},
       false, true, false},
      {"softmax_backward_row_stats", 3,
       {{"y", Storage::Y, false, false, -1}, {"dy", Storage::Y, false, false, -1},
        {"row_dot", Storage::RowFloat, true, false, -1}},
       false, true, false},
      {"softmax_rows_backward_from_stats", 4,
       {{"y", Storage::Y, false, false, -1}, {"dy", Storage::Y, false, false, -1},
        {"dx", Storage::X, true, false, 1}, {"row_dot", Storage::RowFloat, false, false, -1}},
       false, true, false},
  };
  return kRules[static_cast<int>(op)];
}

// One call, with the enum arguments as the raw integers a C caller may pass.
struct CallArgs {
  Op op = Op::Rows;
  const void* array[4] = {nullptr, nullptr, nullptr, nullptr};  // in parameter order
  int64_t rows = 0;
  int64_t cols = 0;
  int32_t dtype = 0;
  const unsigned char* options = nullptr;  // the options struct's bytes, or NULL
  float p = 0.0f;
  bool cuda_available = false;  // softmax_backend_available(SOFTMAX_BACKEND_CUDA)
};

// The first version of the options struct ends after num_threads: the smallest struct_size a
// caller can have been built with. y_dtype needs a struct that reaches past it.
constexpr size_t kOptionsMinSize = offsetof(softmax_options, num_threads) + sizeof(int32_t);
constexpr size_t kOptionsWithYDtype = offsetof(softmax_options, y_dtype) + sizeof(int32_t);

inline size_t oracle_element_size(int32_t dtype) {
  switch (dtype) {
    case SOFTMAX_DTYPE_F32: return 4;
    case SOFTMAX_DTYPE_F16: return 2;
    case SOFTMAX_DTYPE_BF16: return 2;
    case SOFTMAX_DTYPE_F64: return 8;
    default: return 0;
  }
}

// What the oracle read from the call, for the result checks of a valid one.
struct Verdict {
  uint32_t allowed = 0;  // bit s set: failing with status s is justified
  bool empty = false;    // rows == 0 or cols == 0 (and neither negative)
  bool log = false;      // SOFTMAX_FLAG_LOG
  int32_t x_type = 0;    // storage of x and dx
  int32_t y_type = 0;    // storage of y and dy
  size_t bytes[4] = {};  // each array's size in bytes, when the shape and types are valid

  void allow(softmax_status s) { allowed |= 1u << static_cast<unsigned>(s); }
  bool valid() const { return allowed == 0; }
  bool permits(softmax_status s) const {
    const auto v = static_cast<unsigned>(s);
    return v < 32 && ((allowed >> v) & 1u) != 0;
  }
  bool fp64() const { return x_type == SOFTMAX_DTYPE_F64 || y_type == SOFTMAX_DTYPE_F64; }
};

// [a, a + an) and [b, b + bn) share a byte. 128-bit so that no size can wrap.
inline bool oracle_ranges_meet(const void* a, unsigned __int128 an, const void* b, unsigned __int128 bn) {
  const auto ua = static_cast<unsigned __int128>(reinterpret_cast<uintptr_t>(a));
  const auto ub = static_cast<unsigned __int128>(reinterpret_cast<uintptr_t>(b));
  return an > 0 && bn > 0 && ua < ub + bn && ub < ua + an;
}

template <class T>
T read_field(const unsigned char* options, size_t offset) {
  T v;
  std::memcpy(&v, options + offset, sizeof v);
  return v;
}

inline Verdict judge(const CallArgs& c) {
  const OpRule& rule = op_rule(c.op);
  Verdict v;

  // Options. A struct_size out of bounds makes every other field unreadable.
  int32_t backend = SOFTMAX_BACKEND_AUTO;
  bool y_known = true;
  int32_t y_raw = c.dtype;
  if (c.options != nullptr) {
    const auto struct_size = read_field<size_t>(c.options, offsetof(softmax_options, struct_size));
    if (struct_size < kOptionsMinSize || struct_size > SOFTMAX_OPTIONS_MAX_SIZE) {
      v.allow(SOFTMAX_STATUS_INVALID_OPTIONS);
      y_known = false;  // a Y_DTYPE flag might be set in the unreadable struct
    } else {
      // A newer caller's struct: its fields unknown to this header must all be zero.
      for (size_t i = sizeof(softmax_options); i < struct_size; ++i) {
        if (c.options[i] != 0) {
          v.allow(SOFTMAX_STATUS_INVALID_OPTIONS);
          break;
        }
      }
      backend = read_field<int32_t>(c.options, offsetof(softmax_options, backend));
      const auto flags = read_field<uint32_t>(c.options, offsetof(softmax_options, flags));
      const auto threads = read_field<int32_t>(c.options, offsetof(softmax_options, num_threads));
      if (backend != SOFTMAX_BACKEND_AUTO && backend != SOFTMAX_BACKEND_CPU && backend != SOFTMAX_BACKEND_CUDA) {
        v.allow(SOFTMAX_STATUS_INVALID_BACKEND);
      }
      if ((flags & ~(SOFTMAX_FLAG_LOG | SOFTMAX_FLAG_Y_DTYPE)) != 0) v.allow(SOFTMAX_STATUS_INVALID_OPTIONS);
      v.log = (flags & SOFTMAX_FLAG_LOG) != 0;
      if (v.log && !rule.log_allowed) v.allow(SOFTMAX_STATUS_INVALID_OPTIONS);
      if (threads < 0) v.allow(SOFTMAX_STATUS_INVALID_OPTIONS);
      if ((flags & SOFTMAX_FLAG_Y_DTYPE) != 0) {
        if (struct_size < kOptionsWithYDtype) {
          v.allow(SOFTMAX_STATUS_INVALID_OPTIONS);
          y_known = false;
        } else {
          y_raw = read_field<int32_t>(c.options, offsetof(softmax_options, y_dtype));
        }
      }
    }
  }

  // Storage types.
  const size_t x_es = oracle_element_size(c.dtype);
  const size_t y_es = y_known ? oracle_element_size(y_raw) : 0;
  if (x_es == 0) v.allow(SOFTMAX_STATUS_INVALID_DTYPE);
  if (y_known && y_es == 0) v.allow(SOFTMAX_STATUS_INVALID_DTYPE);
  v.x_type = c.dtype;
  v.y_type = y_raw;
  if (!rule.f64_allowed && (c.dtype == SOFTMAX_DTYPE_F64 || (y_known && y_raw == SOFTMAX_DTYPE_F64))) {
    v.allow(SOFTMAX_STATUS_INVALID_DTYPE);
  }
  if (rule.takes_p && !(c.p >= 0.0f && c.p <= 1.0f)) v.allow(SOFTMAX_STATUS_INVALID_PROBABILITY);  // NaN fails both

  if (c.rows < 0 || c.cols < 0) {
    v.allow(SOFTMAX_STATUS_INVALID_SIZE);
    return v;
  }
  v.empty = c.rows == 0 || c.cols == 0;
  if (v.empty) return v;  // nothing read: pointers, sizes and backend do not matter

  // Sizes. With an unknown storage type any element size of at least 2 bytes is plausible.
  bool sizes_known = x_es != 0 && y_es != 0;
  const auto rows = static_cast<unsigned __int128>(c.rows), cols = static_cast<unsigned __int128>(c.cols);
  for (int i = 0; i < rule.arrays; ++i) {
    const ArrayRule& a = rule.array[i];
    unsigned __int128 total = 0;
    switch (a.storage) {
      case Storage::X: total = rows * cols * (x_es ? x_es : 2); break;
      case Storage::Y: total = rows * cols * (y_es ? y_es : 2); break;
      case Storage::Mask: total = rows * cols; break;
      case Storage::RowFloat: total = rows * sizeof(float); break;
    }
    if (total > static_cast<unsigned __int128>(PTRDIFF_MAX)) {
      v.allow(SOFTMAX_STATUS_SIZE_OVERFLOW);
      sizes_known = false;
    } else {
      v.bytes[i] = static_cast<size_t>(total);
    }
  }

  for (int i = 0; i < rule.arrays; ++i) {
    if (c.array[i] == nullptr && !rule.array[i].optional) v.allow(SOFTMAX_STATUS_NULL_POINTER);
  }
  // "an array is not aligned to its element size" (MISALIGNED_POINTER).
  for (int i = 0; i < rule.arrays; ++i) {
    if (c.array[i] == nullptr) continue;
    size_t es = 0;
    switch (rule.array[i].storage) {
      case Storage::X: es = x_es; break;
      case Storage::Y: es = y_es; break;
      case Storage::Mask: es = 1; break;
      case Storage::RowFloat: es = sizeof(float); break;
    }
    if (es != 0 && reinterpret_cast<uintptr_t>(c.array[i]) % es != 0) v.allow(SOFTMAX_STATUS_MISALIGNED_POINTER);
  }

  if (sizes_known) {
    for (int i = 0; i < rule.arrays; ++i) {
      for (int j = i + 1; j < rule.arrays; ++j) {
        const ArrayRule &a = rule.array[i], &b = rule.array[j];
        if (!a.output && !b.output) continue;
        if (c.array[i] == nullptr || c.array[j] == nullptr) continue;
        if (!oracle_ranges_meet(c.array[i], v.bytes[i], c.array[j], v.bytes[j])) continue;
        const bool partners = a.in_place_with == j || b.in_place_with == i;
        const bool same_elements = v.bytes[i] == v.bytes[j];  // both [rows, cols] of one element size
        if (partners && c.array[i] == c.array[j] && same_elements) continue;
        v.allow(SOFTMAX_STATUS_OVERLAPPING_BUFFERS);
      }
    }
  }

  // Host memory only in these callers: CUDA is refused when the backend cannot run here.
  if (backend == SOFTMAX_BACKEND_CUDA && !c.cuda_available) v.allow(SOFTMAX_STATUS_BACKEND_UNAVAILABLE);
  if (backend == SOFTMAX_BACKEND_CUDA && c.cuda_available) {
    // Host pointers handed to an available CUDA backend: the header allows pinned or managed
    // memory there, plain host memory is in the wrong space.
    v.allow(SOFTMAX_STATUS_WRONG_MEMORY_SPACE);
  }
  return v;
}

}  // namespace softmax_reliability
