// SPDX-License-Identifier: Apache-2.0
// Every kind of bad input, through every entry point, gets its named status, a message that says
// what was wrong, and leaves all memory untouched: each case runs on one arena that holds every
// array of the call (inputs with values, outputs with canaries) and is compared afterwards.
#include <softmax/softmax.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

namespace {

constexpr int64_t kRows = 4, kCols = 16;
constexpr size_t kN = kRows * kCols;
constexpr size_t kSlot = kN * 8;  // one [kRows, kCols] array of the widest type (f64)

constexpr softmax_dtype F32 = SOFTMAX_DTYPE_F32, F16 = SOFTMAX_DTYPE_F16, F64 = SOFTMAX_DTYPE_F64;

// One arena of slots, so that overlap cases are offsets into it: two input slots filled with
// smooth values (x, or the forward's y, and dy), two output slots, a mask slot and a slot of
// per-row statistics (three float arrays of kRows), all outputs and statistics canary-filled.
struct Arena {
  std::vector<unsigned char> mem = std::vector<unsigned char>(6 * kSlot);
  unsigned char* slot(int i) { return mem.data() + size_t(i) * kSlot; }
  float* in(int i) { return reinterpret_cast<float*>(slot(i)); }         // i = 0, 1
  float* out(int i) { return reinterpret_cast<float*>(slot(2 + i)); }    // i = 0, 1
  uint8_t* mask() { return slot(4); }
  float* stat(int i) { return reinterpret_cast<float*>(slot(5)) + 2 * kRows * i; }  // i = 0, 1, 2
  Arena() {
    for (size_t i = 0; i < 2 * kSlot / 4; ++i) in(0)[i] = std::sin(0.37f * float(i)) * 3.0f;
    std::memset(slot(2), 0xA5, 4 * kSlot);
  }
};

struct ErrorCase {
  const char* name;
  softmax_status expected;
  const char* message_part;  // must appear in softmax_last_error()
  std::function<softmax_status(Arena&)> call;
};

// gtest prints the case's name instead of its bytes.
void PrintTo(const ErrorCase& c, std::ostream* os) { *os << c.name; }

softmax_options cpu_options(uint32_t flags = 0) {
  softmax_options o = SOFTMAX_OPTIONS_INIT;
  o.backend = SOFTMAX_BACKEND_CPU;
  o.flags = flags;
  return o;
}

// y (and dy) stored as `y_dtype`, x (and dx) as the call's dtype.
softmax_options y_dtype_options(int y_dtype) {
  softmax_options o = cpu_options(SOFTMAX_FLAG_Y_DTYPE);
  std::memcpy(&o.y_dtype, &y_dtype, sizeof y_dtype);  // any int a C caller may store there
  return o;
}

softmax_status rows_with(Arena& a, softmax_options o) {
  return softmax_rows(a.in(0), a.out(0), kRows, kCols, F32, &o);
}

softmax_status dropout_p(Arena& a, float p) {
  const softmax_options o = cpu_options();
  return softmax_dropout(a.in(0), a.out(0), a.mask(), kRows, kCols, F32, p, 1, 0, &o);
}

softmax_status dropout_backward_p(Arena& a, float p) {
  const softmax_options o = cpu_options();
  return softmax_dropout_backward(a.in(0), a.in(1), a.out(0), kRows, kCols, F32, p, 1, 0, &o);
}

softmax_dtype raw_dtype(int v) {
  softmax_dtype t;
  std::memcpy(&t, &v, sizeof v);
  return t;
}

// The forward entry points and the options struct.
std::vector<ErrorCase> forward_and_options_cases() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  return {
      {"null_x", SOFTMAX_STATUS_NULL_POINTER, "x is NULL",
       [](Arena& a) { return softmax_rows(nullptr, a.out(0), kRows, kCols, F32, nullptr); }},
      {"null_y", SOFTMAX_STATUS_NULL_POINTER, "y is NULL",
       [](Arena& a) { return softmax_rows(a.in(0), nullptr, kRows, kCols, F32, nullptr); }},
      {"dropout_null_y", SOFTMAX_STATUS_NULL_POINTER, "y is NULL",
       [](Arena& a) { return softmax_dropout(a.in(0), nullptr, a.mask(), kRows, kCols, F32, 0.5f, 1, 0, nullptr); }},
      {"negative_rows", SOFTMAX_STATUS_INVALID_SIZE, "rows must be >= 0, got -1",
       [](Arena& a) { return softmax_rows(a.in(0), a.out(0), -1, kCols, F32, nullptr); }},
      {"negative_cols", SOFTMAX_STATUS_INVALID_SIZE, "cols must be >= 0, got -3",
       [](Arena& a) { return softmax_rows(a.in(0), a.out(0), kRows, -3, F32, nullptr); }},
      {"int64_min_rows", SOFTMAX_STATUS_INVALID_SIZE, "rows must be >= 0, got -9223372036854775808",
       [](Arena& a) {
         return softmax_rows(a.in(0), a.out(0), std::numeric_limits<int64_t>::min(), kCols, F32, nullptr);
       }},
      {"negative_cols_with_zero_rows", SOFTMAX_STATUS_INVALID_SIZE, "cols must be >= 0, got -1",
       [](Arena& a) { return softmax_rows(a.in(0), a.out(0), 0, -1, F32, nullptr); }},
      {"overflowing_product", SOFTMAX_STATUS_SIZE_OVERFLOW, "overflows",
       [](Arena& a) { return softmax_rows(a.in(0), a.out(0), int64_t(1) << 40, int64_t(1) << 30, F32, nullptr); }},
      {"overflowing_bytes", SOFTMAX_STATUS_SIZE_OVERFLOW, "overflows",
       [](Arena& a) {
         // 2^61 elements fit in int64 but 2^63 bytes do not fit in ptrdiff_t.
         return softmax_rows(a.in(0), a.out(0), 1, int64_t(1) << 61, F32, nullptr);
       }},
      {"overflowing_f64_bytes", SOFTMAX_STATUS_SIZE_OVERFLOW, "x: rows * cols * element size overflows",
       [](Arena& a) {
         // 2^60 f64 elements: 2^63 bytes, while the same shape in f32 would fit.
         return softmax_rows(a.in(0), a.out(0), int64_t(1) << 30, int64_t(1) << 30, F64, nullptr);
       }},
      {"overflowing_y_dtype_bytes", SOFTMAX_STATUS_SIZE_OVERFLOW, "y: rows * cols * element size overflows",
       [](Arena& a) {
         // x in f16 fits (2^62 bytes); y stored as f64 would need 2^64.
         const softmax_options o = y_dtype_options(F64);
         return softmax_rows(a.in(0), a.out(0), int64_t(1) << 31, int64_t(1) << 30, F16, &o);
       }},
      {"overflowing_dropout", SOFTMAX_STATUS_SIZE_OVERFLOW, "overflows",
       [](Arena& a) {
         return softmax_dropout(a.in(0), a.out(0), nullptr, std::numeric_limits<int64_t>::max(), 2,
                                SOFTMAX_DTYPE_BF16, 0.1f, 1, 0, nullptr);
       }},
      {"unknown_dtype", SOFTMAX_STATUS_INVALID_DTYPE, "dtype is 4",
       [](Arena& a) { return softmax_rows(a.in(0), a.out(0), kRows, kCols, raw_dtype(4), nullptr); }},
      {"negative_dtype", SOFTMAX_STATUS_INVALID_DTYPE, "dtype is -1",
       [](Arena& a) { return softmax_rows(a.in(0), a.out(0), kRows, kCols, raw_dtype(-1), nullptr); }},
      {"dropout_unknown_dtype", SOFTMAX_STATUS_INVALID_DTYPE, "dtype is 1000",
       [](Arena& a) {
         return softmax_dropout(a.in(0), a.out(0), a.mask(), kRows, kCols, raw_dtype(1000), 0.5f, 1, 0, nullptr);
       }},
      {"unknown_backend", SOFTMAX_STATUS_INVALID_BACKEND, "options->backend is 9",
       [](Arena& a) {
         softmax_options o = SOFTMAX_OPTIONS_INIT;
         o.backend = static_cast<softmax_backend>(9);
         return rows_with(a, o);
       }},
      {"options_size_zero", SOFTMAX_STATUS_INVALID_OPTIONS, "struct_size is 0",
       [](Arena& a) {
         softmax_options o = cpu_options();
         o.struct_size = 0;
         return rows_with(a, o);
       }},
      {"options_size_too_small", SOFTMAX_STATUS_INVALID_OPTIONS, "struct_size is 8",
       [](Arena& a) {
         softmax_options o = cpu_options();
         o.struct_size = 8;
         return rows_with(a, o);
       }},
      {"options_size_above_max", SOFTMAX_STATUS_INVALID_OPTIONS, "struct_size is 4097, expected 28 to 4096",
       [](Arena& a) {
         softmax_options o = cpu_options();
         o.struct_size = SOFTMAX_OPTIONS_MAX_SIZE + 1;
         return rows_with(a, o);
       }},
      {"options_size_max", SOFTMAX_STATUS_INVALID_OPTIONS, "struct_size is 18446744073709551615",
       [](Arena& a) {
         softmax_options o = cpu_options();
         o.struct_size = SIZE_MAX;
         return rows_with(a, o);
       }},
      {"options_unknown_tail_set", SOFTMAX_STATUS_INVALID_OPTIONS, "unknown",
       [](Arena& a) {
         // A caller from the future: a larger struct whose extra field is set.
         struct Bigger {
           softmax_options base;
           uint64_t future_field;
         } big{cpu_options(), 7};
         big.base.struct_size = sizeof(Bigger);
         return softmax_rows(a.in(0), a.out(0), kRows, kCols, F32, &big.base);
       }},
      {"unknown_flags", SOFTMAX_STATUS_INVALID_OPTIONS, "unknown bits 0x10",
       [](Arena& a) { return rows_with(a, cpu_options(0x10)); }},
      {"unknown_flags_beside_known_ones", SOFTMAX_STATUS_INVALID_OPTIONS, "unknown bits 0x80000000",
       [](Arena& a) { return rows_with(a, cpu_options(0x80000000u | SOFTMAX_FLAG_LOG | SOFTMAX_FLAG_Y_DTYPE)); }},
      {"negative_threads", SOFTMAX_STATUS_INVALID_OPTIONS, "num_threads must be >= 0",
       [](Arena& a) {
         softmax_options o = cpu_options();
         o.num_threads = -2;
         return rows_with(a, o);
       }},
      {"log_with_dropout", SOFTMAX_STATUS_INVALID_OPTIONS, "SOFTMAX_FLAG_LOG is not supported by softmax_dropout",
       [](Arena& a) {
         const softmax_options o = cpu_options(SOFTMAX_FLAG_LOG);
         return softmax_dropout(a.in(0), a.out(0), nullptr, kRows, kCols, F32, 0.5f, 1, 0, &o);
       }},
      {"p_nan", SOFTMAX_STATUS_INVALID_PROBABILITY, "got nan", [nan](Arena& a) { return dropout_p(a, nan); }},
      {"p_negative", SOFTMAX_STATUS_INVALID_PROBABILITY, "got -0.25", [](Arena& a) { return dropout_p(a, -0.25f); }},
      {"p_above_one", SOFTMAX_STATUS_INVALID_PROBABILITY, "got 1.5", [](Arena& a) { return dropout_p(a, 1.5f); }},
      {"p_infinite", SOFTMAX_STATUS_INVALID_PROBABILITY, "got inf", [inf](Arena& a) { return dropout_p(a, inf); }},
      {"y_overlaps_x_partially", SOFTMAX_STATUS_OVERLAPPING_BUFFERS, "x and y overlap",
       [](Arena& a) { return softmax_rows(a.in(0), a.in(0) + 3, kRows, kCols, F32, nullptr); }},
      {"x_overlaps_y_from_above", SOFTMAX_STATUS_OVERLAPPING_BUFFERS, "x and y overlap",
       [](Arena& a) {
         // Reads from y's second half region: x = y + 1 element.
         return softmax_rows(a.out(0) + 1, a.out(0), kRows, kCols / 2, F32, nullptr);
       }},
      {"mask_overlaps_y", SOFTMAX_STATUS_OVERLAPPING_BUFFERS, "keep_mask overlaps",
       [](Arena& a) {
         return softmax_dropout(a.in(0), a.out(0), reinterpret_cast<uint8_t*>(a.out(0) + 5), kRows, kCols, F32,
                                0.5f, 1, 0, nullptr);
       }},
      {"mask_overlaps_x", SOFTMAX_STATUS_OVERLAPPING_BUFFERS, "keep_mask overlaps",
       [](Arena& a) {
         return softmax_dropout(a.in(0), a.out(0), reinterpret_cast<uint8_t*>(a.in(0)), kRows, kCols, F32, 0.5f,
                                1, 0, nullptr);
       }},
      // y_dtype: read only behind its flag, and then checked like dtype.
      {"y_dtype_unknown", SOFTMAX_STATUS_INVALID_DTYPE, "options->y_dtype is 7",
       [](Arena& a) { return rows_with(a, y_dtype_options(7)); }},
      {"y_dtype_negative", SOFTMAX_STATUS_INVALID_DTYPE, "options->y_dtype is -3",
       [](Arena& a) { return rows_with(a, y_dtype_options(-3)); }},
      {"y_dtype_flag_in_a_struct_too_small_for_it", SOFTMAX_STATUS_INVALID_OPTIONS, "too small to hold y_dtype",
       [](Arena& a) {
         // A struct of the first ABI version (it ends after num_threads) cannot hold y_dtype.
         softmax_options o = y_dtype_options(SOFTMAX_DTYPE_F16);
         o.struct_size = offsetof(softmax_options, y_dtype);
         return rows_with(a, o);
       }},
      {"y_dtype_in_place_with_another_element_size", SOFTMAX_STATUS_OVERLAPPING_BUFFERS,
       "y == x (in place) needs equal element sizes, got 4 and 2",
       [](Arena& a) {
         const softmax_options o = y_dtype_options(F16);
         return softmax_rows(a.in(0), a.in(0), kRows, kCols, F32, &o);
       }},
      {"y_dtype_in_place_f16_into_f64", SOFTMAX_STATUS_OVERLAPPING_BUFFERS, "needs equal element sizes, got 2 and 8",
       [](Arena& a) {
         const softmax_options o = y_dtype_options(F64);
         return softmax_rows(a.in(0), a.in(0), kRows, kCols, F16, &o);
       }},
      {"y_dtype_wider_y_reaches_x", SOFTMAX_STATUS_OVERLAPPING_BUFFERS, "x and y overlap",
       [](Arena& a) {
         // Disjoint if y were f16 like x (kN * 2 bytes apart), but y in f32 runs into x.
         const softmax_options o = y_dtype_options(F32);
         auto* x = reinterpret_cast<unsigned char*>(a.in(1));
         return softmax_rows(x, x - kN * 3, kRows, kCols, F16, &o);
       }},
      {"y_dtype_dropout_mask_on_wider_y", SOFTMAX_STATUS_OVERLAPPING_BUFFERS, "keep_mask overlaps",
       [](Arena& a) {
         // The mask starts where an f16 y would end; y is f64, so it lies inside y.
         const softmax_options o = y_dtype_options(F64);
         auto* mask = reinterpret_cast<uint8_t*>(a.out(0)) + kN * 2;
         return softmax_dropout(a.in(0), a.out(0), mask, kRows, kCols, F16, 0.5f, 1, 0, &o);
       }},
  };
}

// The backward and sharded entry points.
std::vector<ErrorCase> backward_and_stats_cases() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  return {
      // softmax_rows_backward(y, dy, dx)
      {"backward_null_y", SOFTMAX_STATUS_NULL_POINTER, "y is NULL",
       [](Arena& a) { return softmax_rows_backward(nullptr, a.in(1), a.out(0), kRows, kCols, F32, nullptr); }},
      {"backward_null_dy", SOFTMAX_STATUS_NULL_POINTER, "dy is NULL",
       [](Arena& a) { return softmax_rows_backward(a.in(0), nullptr, a.out(0), kRows, kCols, F32, nullptr); }},
      {"backward_null_dx", SOFTMAX_STATUS_NULL_POINTER, "dx is NULL",
       [](Arena& a) { return softmax_rows_backward(a.in(0), a.in(1), nullptr, kRows, kCols, F32, nullptr); }},
      {"backward_negative_cols", SOFTMAX_STATUS_INVALID_SIZE, "cols must be >= 0, got -16",
       [](Arena& a) { return softmax_rows_backward(a.in(0), a.in(1), a.out(0), kRows, -16, F32, nullptr); }},
      {"backward_overflow", SOFTMAX_STATUS_SIZE_OVERFLOW, "overflows",
       [](Arena& a) {
         return softmax_rows_backward(a.in(0), a.in(1), a.out(0), int64_t(1) << 62, 4, F16, nullptr);
       }},
      {"backward_unknown_dtype", SOFTMAX_STATUS_INVALID_DTYPE, "dtype is 5",
       [](Arena& a) { return softmax_rows_backward(a.in(0), a.in(1), a.out(0), kRows, kCols, raw_dtype(5), nullptr); }},
      {"backward_unknown_y_dtype", SOFTMAX_STATUS_INVALID_DTYPE, "options->y_dtype is 4",
       [](Arena& a) {
         const softmax_options o = y_dtype_options(4);
         return softmax_rows_backward(a.in(0), a.in(1), a.out(0), kRows, kCols, F32, &o);
       }},
      {"backward_unknown_flags", SOFTMAX_STATUS_INVALID_OPTIONS, "unknown bits 0x4",
       [](Arena& a) {
         const softmax_options o = cpu_options(0x4);
         return softmax_rows_backward(a.in(0), a.in(1), a.out(0), kRows, kCols, F32, &o);
       }},
      {"backward_dx_overlaps_dy_partially", SOFTMAX_STATUS_OVERLAPPING_BUFFERS, "dy and dx overlap without being identical",
       [](Arena& a) { return softmax_rows_backward(a.in(0), a.out(0), a.out(0) + 1, kRows, kCols, F32, nullptr); }},
      {"backward_dx_is_y", SOFTMAX_STATUS_OVERLAPPING_BUFFERS, "dx overlaps y",
       [](Arena& a) { return softmax_rows_backward(a.out(0), a.in(1), a.out(0), kRows, kCols, F32, nullptr); }},
      {"backward_dx_overlaps_y_partially", SOFTMAX_STATUS_OVERLAPPING_BUFFERS, "dx overlaps y",
       [](Arena& a) { return softmax_rows_backward(a.out(0) + 17, a.in(1), a.out(0), kRows, kCols, F32, nullptr); }},
      {"backward_dx_is_dy_with_other_element_size", SOFTMAX_STATUS_OVERLAPPING_BUFFERS,
       "dx == dy (in place) needs equal element sizes, got 2 and 4",
       [](Arena& a) {
         // dy is stored as y (f16), dx as x (f32): the same start, different elements.
         const softmax_options o = y_dtype_options(F16);
         return softmax_rows_backward(a.in(0), a.out(0), a.out(0), kRows, kCols, F32, &o);
       }},

      // softmax_dropout_backward(x, dy, dx)
      {"dropout_backward_null_x", SOFTMAX_STATUS_NULL_POINTER, "x is NULL",
       [](Arena& a) {
         return softmax_dropout_backward(nullptr, a.in(1), a.out(0), kRows, kCols, F32, 0.5f, 1, 0, nullptr);
       }},
      {"dropout_backward_null_dy", SOFTMAX_STATUS_NULL_POINTER, "dy is NULL",
       [](Arena& a) {
         return softmax_dropout_backward(a.in(0), nullptr, a.out(0), kRows, kCols, F32, 0.5f, 1, 0, nullptr);
       }},
      {"dropout_backward_null_dx", SOFTMAX_STATUS_NULL_POINTER, "dx is NULL",
       [](Arena& a) {
         return softmax_dropout_backward(a.in(0), a.in(1), nullptr, kRows, kCols, F32, 0.5f, 1, 0, nullptr);
       }},
      {"dropout_backward_negative_rows", SOFTMAX_STATUS_INVALID_SIZE, "rows must be >= 0, got -4",
       [](Arena& a) {
         return softmax_dropout_backward(a.in(0), a.in(1), a.out(0), -4, kCols, F32, 0.5f, 1, 0, nullptr);
       }},
      {"dropout_backward_overflow", SOFTMAX_STATUS_SIZE_OVERFLOW, "overflows",
       [](Arena& a) {
         return softmax_dropout_backward(a.in(0), a.in(1), a.out(0), std::numeric_limits<int64_t>::max(),
                                         std::numeric_limits<int64_t>::max(), F32, 0.5f, 1, 0, nullptr);
       }},
      {"dropout_backward_unknown_dtype", SOFTMAX_STATUS_INVALID_DTYPE, "dtype is -7",
       [](Arena& a) {
         return softmax_dropout_backward(a.in(0), a.in(1), a.out(0), kRows, kCols, raw_dtype(-7), 0.5f, 1, 0,
                                         nullptr);
       }},
      {"dropout_backward_log", SOFTMAX_STATUS_INVALID_OPTIONS, "SOFTMAX_FLAG_LOG is not supported by softmax_dropout_backward",
       [](Arena& a) {
         const softmax_options o = cpu_options(SOFTMAX_FLAG_LOG);
         return softmax_dropout_backward(a.in(0), a.in(1), a.out(0), kRows, kCols, F32, 0.5f, 1, 0, &o);
       }},
      {"dropout_backward_p_nan", SOFTMAX_STATUS_INVALID_PROBABILITY, "got nan",
       [nan](Arena& a) { return dropout_backward_p(a, nan); }},
      {"dropout_backward_p_negative", SOFTMAX_STATUS_INVALID_PROBABILITY, "got -0.100000001",
       [](Arena& a) { return dropout_backward_p(a, -0.1f); }},
      {"dropout_backward_p_above_one", SOFTMAX_STATUS_INVALID_PROBABILITY, "got 1.00000012",
       [](Arena& a) { return dropout_backward_p(a, std::nextafter(1.0f, 2.0f)); }},
      {"dropout_backward_dx_is_x", SOFTMAX_STATUS_OVERLAPPING_BUFFERS, "dx overlaps x",
       [](Arena& a) {
         // Only dy may be overwritten: x is read again for the recomputed softmax.
         return softmax_dropout_backward(a.out(0), a.in(1), a.out(0), kRows, kCols, F32, 0.5f, 1, 0, nullptr);
       }},
      {"dropout_backward_dx_overlaps_dy_partially", SOFTMAX_STATUS_OVERLAPPING_BUFFERS,
       "dy and dx overlap without being identical",
       [](Arena& a) {
         return softmax_dropout_backward(a.in(0), a.out(0) + kCols, a.out(0), kRows, kCols, F32, 0.5f, 1, 0,
                                         nullptr);
       }},
      {"dropout_backward_dx_is_dy_with_other_element_size", SOFTMAX_STATUS_OVERLAPPING_BUFFERS,
       "dx == dy (in place) needs equal element sizes, got 4 and 8",
       [](Arena& a) {
         const softmax_options o = y_dtype_options(F32);
         return softmax_dropout_backward(a.in(0), a.out(0), a.out(0), kRows, kCols, F64, 0.5f, 1, 0, &o);
       }},

      // softmax_row_stats(x, row_max, row_sumexp)
      {"row_stats_null_x", SOFTMAX_STATUS_NULL_POINTER, "x is NULL",
       [](Arena& a) { return softmax_row_stats(nullptr, a.stat(0), a.stat(1), kRows, kCols, F32, nullptr); }},
      {"row_stats_null_row_max", SOFTMAX_STATUS_NULL_POINTER, "row_max is NULL",
       [](Arena& a) { return softmax_row_stats(a.in(0), nullptr, a.stat(1), kRows, kCols, F32, nullptr); }},
      {"row_stats_null_row_sumexp", SOFTMAX_STATUS_NULL_POINTER, "row_sumexp is NULL",
       [](Arena& a) { return softmax_row_stats(a.in(0), a.stat(0), nullptr, kRows, kCols, F32, nullptr); }},
      {"row_stats_negative_cols", SOFTMAX_STATUS_INVALID_SIZE, "cols must be >= 0, got -1",
       [](Arena& a) { return softmax_row_stats(a.in(0), a.stat(0), a.stat(1), kRows, -1, F32, nullptr); }},
      {"row_stats_statistics_overflow", SOFTMAX_STATUS_SIZE_OVERFLOW, "row_max: rows * cols * element size overflows",
       [](Arena& a) {
         // x (2^61 f16 elements, 2^62 bytes) fits; rows floats of statistics (2^63 bytes) do not.
         return softmax_row_stats(a.in(0), a.stat(0), a.stat(1), int64_t(1) << 61, 1, F16, nullptr);
       }},
      {"row_stats_f64", SOFTMAX_STATUS_INVALID_DTYPE, "softmax_row_stats keeps float row statistics",
       [](Arena& a) { return softmax_row_stats(a.in(0), a.stat(0), a.stat(1), kRows, kCols, F64, nullptr); }},
      {"row_stats_f64_y_dtype", SOFTMAX_STATUS_INVALID_DTYPE, "softmax_row_stats keeps float row statistics",
       [](Arena& a) {
         // The forward's (dtype, options) with y in f64: fp64 arithmetic, refused as well.
         const softmax_options o = y_dtype_options(F64);
         return softmax_row_stats(a.in(0), a.stat(0), a.stat(1), kRows, kCols, F32, &o);
       }},
      {"row_stats_unknown_dtype", SOFTMAX_STATUS_INVALID_DTYPE, "dtype is 4",
       [](Arena& a) { return softmax_row_stats(a.in(0), a.stat(0), a.stat(1), kRows, kCols, raw_dtype(4), nullptr); }},
      {"row_stats_bad_options", SOFTMAX_STATUS_INVALID_OPTIONS, "num_threads must be >= 0",
       [](Arena& a) {
         softmax_options o = cpu_options();
         o.num_threads = -1;
         return softmax_row_stats(a.in(0), a.stat(0), a.stat(1), kRows, kCols, F32, &o);
       }},
      {"row_stats_max_is_sumexp", SOFTMAX_STATUS_OVERLAPPING_BUFFERS, "row_sumexp overlaps row_max",
       [](Arena& a) { return softmax_row_stats(a.in(0), a.stat(0), a.stat(0), kRows, kCols, F32, nullptr); }},
      {"row_stats_sumexp_overlaps_max", SOFTMAX_STATUS_OVERLAPPING_BUFFERS, "row_sumexp overlaps row_max",
       [](Arena& a) {
         return softmax_row_stats(a.in(0), a.stat(0), a.stat(0) + kRows - 1, kRows, kCols, F32, nullptr);
       }},
      {"row_stats_max_overlaps_x", SOFTMAX_STATUS_OVERLAPPING_BUFFERS, "row_max overlaps x",
       [](Arena& a) { return softmax_row_stats(a.in(0), a.in(0) + 9, a.stat(1), kRows, kCols, F32, nullptr); }},
      {"row_stats_sumexp_is_x", SOFTMAX_STATUS_OVERLAPPING_BUFFERS, "row_sumexp overlaps x",
       [](Arena& a) {
         return softmax_row_stats(a.in(0), a.stat(0), a.in(0), kRows, kCols, F32, nullptr);
       }},

      // softmax_rows_from_stats(x, y, row_max, row_sumexp)
      {"from_stats_null_x", SOFTMAX_STATUS_NULL_POINTER, "x is NULL",
       [](Arena& a) {
         return softmax_rows_from_stats(nullptr, a.out(0), a.stat(0), a.stat(1), kRows, kCols, F32, nullptr);
       }},
      {"from_stats_null_y", SOFTMAX_STATUS_NULL_POINTER, "y is NULL",
       [](Arena& a) {
         return softmax_rows_from_stats(a.in(0), nullptr, a.stat(0), a.stat(1), kRows, kCols, F32, nullptr);
       }},
      {"from_stats_null_row_max", SOFTMAX_STATUS_NULL_POINTER, "row_max is NULL",
       [](Arena& a) {
         return softmax_rows_from_stats(a.in(0), a.out(0), nullptr, a.stat(1), kRows, kCols, F32, nullptr);
       }},
      {"from_stats_null_row_sumexp", SOFTMAX_STATUS_NULL_POINTER, "row_sumexp is NULL",
       [](Arena& a) {
         return softmax_rows_from_stats(a.in(0), a.out(0), a.stat(0), nullptr, kRows, kCols, F32, nullptr);
       }},
      {"from_stats_negative_rows", SOFTMAX_STATUS_INVALID_SIZE, "rows must be >= 0, got -2",
       [](Arena& a) {
         return softmax_rows_from_stats(a.in(0), a.out(0), a.stat(0), a.stat(1), -2, kCols, F32, nullptr);
       }},
      {"from_stats_overflow", SOFTMAX_STATUS_SIZE_OVERFLOW, "overflows",
       [](Arena& a) {
         return softmax_rows_from_stats(a.in(0), a.out(0), a.stat(0), a.stat(1), 3, int64_t(1) << 62, F32, nullptr);
       }},
      {"from_stats_f64", SOFTMAX_STATUS_INVALID_DTYPE, "softmax_rows_from_stats keeps float row statistics",
       [](Arena& a) {
         return softmax_rows_from_stats(a.in(0), a.out(0), a.stat(0), a.stat(1), kRows, kCols, F64, nullptr);
       }},
      {"from_stats_f64_y_dtype", SOFTMAX_STATUS_INVALID_DTYPE, "keeps float row statistics",
       [](Arena& a) {
         const softmax_options o = y_dtype_options(F64);
         return softmax_rows_from_stats(a.in(0), a.out(0), a.stat(0), a.stat(1), kRows, kCols, F16, &o);
       }},
      {"from_stats_unknown_backend", SOFTMAX_STATUS_INVALID_BACKEND, "options->backend is -1",
       [](Arena& a) {
         softmax_options o = cpu_options();
         const int bad = -1;
         std::memcpy(&o.backend, &bad, sizeof bad);
         return softmax_rows_from_stats(a.in(0), a.out(0), a.stat(0), a.stat(1), kRows, kCols, F32, &o);
       }},
      {"from_stats_y_overlaps_x_partially", SOFTMAX_STATUS_OVERLAPPING_BUFFERS, "x and y overlap",
       [](Arena& a) {
         return softmax_rows_from_stats(a.in(0), a.in(0) + 2, a.stat(0), a.stat(1), kRows, kCols, F32, nullptr);
       }},
      {"from_stats_y_overlaps_row_max", SOFTMAX_STATUS_OVERLAPPING_BUFFERS, "y overlaps row_max",
       [](Arena& a) {
         return softmax_rows_from_stats(a.in(0), a.out(0), a.out(0) + kN - 1, a.stat(1), kRows, kCols, F32, nullptr);
       }},
      {"from_stats_y_is_row_sumexp", SOFTMAX_STATUS_OVERLAPPING_BUFFERS, "y overlaps row_sumexp",
       [](Arena& a) {
         return softmax_rows_from_stats(a.in(0), a.out(0), a.stat(0), a.out(0), kRows, kCols, F32, nullptr);
       }},
      {"from_stats_in_place_with_other_element_size", SOFTMAX_STATUS_OVERLAPPING_BUFFERS,
       "y == x (in place) needs equal element sizes",
       [](Arena& a) {
         const softmax_options o = y_dtype_options(SOFTMAX_DTYPE_BF16);
         return softmax_rows_from_stats(a.out(0), a.out(0), a.stat(0), a.stat(1), kRows, kCols, F32, &o);
       }},

      // softmax_backward_row_stats(y, dy, row_dot)
      {"backward_row_stats_null_y", SOFTMAX_STATUS_NULL_POINTER, "y is NULL",
       [](Arena& a) { return softmax_backward_row_stats(nullptr, a.in(1), a.stat(0), kRows, kCols, F32, nullptr); }},
      {"backward_row_stats_null_dy", SOFTMAX_STATUS_NULL_POINTER, "dy is NULL",
       [](Arena& a) { return softmax_backward_row_stats(a.in(0), nullptr, a.stat(0), kRows, kCols, F32, nullptr); }},
      {"backward_row_stats_null_row_dot", SOFTMAX_STATUS_NULL_POINTER, "row_dot is NULL",
       [](Arena& a) { return softmax_backward_row_stats(a.in(0), a.in(1), nullptr, kRows, kCols, F32, nullptr); }},
      {"backward_row_stats_int64_min_cols", SOFTMAX_STATUS_INVALID_SIZE, "cols must be >= 0",
       [](Arena& a) {
         return softmax_backward_row_stats(a.in(0), a.in(1), a.stat(0), kRows, std::numeric_limits<int64_t>::min(),
                                           F32, nullptr);
       }},
      {"backward_row_stats_overflow", SOFTMAX_STATUS_SIZE_OVERFLOW, "overflows",
       [](Arena& a) {
         return softmax_backward_row_stats(a.in(0), a.in(1), a.stat(0), int64_t(1) << 40, int64_t(1) << 40, F32,
                                           nullptr);
       }},
      {"backward_row_stats_f64", SOFTMAX_STATUS_INVALID_DTYPE, "softmax_backward_row_stats keeps float row statistics",
       [](Arena& a) { return softmax_backward_row_stats(a.in(0), a.in(1), a.stat(0), kRows, kCols, F64, nullptr); }},
      {"backward_row_stats_f64_y_dtype", SOFTMAX_STATUS_INVALID_DTYPE, "keeps float row statistics",
       [](Arena& a) {
         const softmax_options o = y_dtype_options(F64);
         return softmax_backward_row_stats(a.in(0), a.in(1), a.stat(0), kRows, kCols, F32, &o);
       }},
      {"backward_row_stats_options_too_small", SOFTMAX_STATUS_INVALID_OPTIONS, "struct_size is 27",
       [](Arena& a) {
         softmax_options o = cpu_options();
         o.struct_size = offsetof(softmax_options, num_threads) + 3;
         return softmax_backward_row_stats(a.in(0), a.in(1), a.stat(0), kRows, kCols, F32, &o);
       }},
      {"backward_row_stats_row_dot_overlaps_y", SOFTMAX_STATUS_OVERLAPPING_BUFFERS, "row_dot overlaps y",
       [](Arena& a) {
         return softmax_backward_row_stats(a.in(0), a.in(1), a.in(0) + kN - 2, kRows, kCols, F32, nullptr);
       }},
      {"backward_row_stats_row_dot_is_dy", SOFTMAX_STATUS_OVERLAPPING_BUFFERS, "row_dot overlaps dy",
       [](Arena& a) { return softmax_backward_row_stats(a.in(0), a.in(1), a.in(1), kRows, kCols, F32, nullptr); }},

      // softmax_rows_backward_from_stats(y, dy, dx, row_dot)
      {"backward_from_stats_null_y", SOFTMAX_STATUS_NULL_POINTER, "y is NULL",
       [](Arena& a) {
         return softmax_rows_backward_from_stats(nullptr, a.in(1), a.out(0), a.stat(0), kRows, kCols, F32, nullptr);
       }},
      {"backward_from_stats_null_dy", SOFTMAX_STATUS_NULL_POINTER, "dy is NULL",
       [](Arena& a) {
         return softmax_rows_backward_from_stats(a.in(0), nullptr, a.out(0), a.stat(0), kRows, kCols, F32, nullptr);
       }},
      {"backward_from_stats_null_dx", SOFTMAX_STATUS_NULL_POINTER, "dx is NULL",
       [](Arena& a) {
         return softmax_rows_backward_from_stats(a.in(0), a.in(1), nullptr, a.stat(0), kRows, kCols, F32, nullptr);
       }},
      {"backward_from_stats_null_row_dot", SOFTMAX_STATUS_NULL_POINTER, "row_dot is NULL",
       [](Arena& a) {
         return softmax_rows_backward_from_stats(a.in(0), a.in(1), a.out(0), nullptr, kRows, kCols, F32, nullptr);
       }},
      {"backward_from_stats_negative_rows", SOFTMAX_STATUS_INVALID_SIZE, "rows must be >= 0, got -1",
       [](Arena& a) {
         return softmax_rows_backward_from_stats(a.in(0), a.in(1), a.out(0), a.stat(0), -1, -1, F32, nullptr);
       }},
      {"backward_from_stats_overflow", SOFTMAX_STATUS_SIZE_OVERFLOW, "overflows",
       [](Arena& a) {
         return softmax_rows_backward_from_stats(a.in(0), a.in(1), a.out(0), a.stat(0), int64_t(1) << 32,
                                                 int64_t(1) << 30, SOFTMAX_DTYPE_BF16, nullptr);
       }},
      {"backward_from_stats_f64", SOFTMAX_STATUS_INVALID_DTYPE, "softmax_rows_backward_from_stats keeps float row statistics",
       [](Arena& a) {
         return softmax_rows_backward_from_stats(a.in(0), a.in(1), a.out(0), a.stat(0), kRows, kCols, F64, nullptr);
       }},
      {"backward_from_stats_unknown_dtype", SOFTMAX_STATUS_INVALID_DTYPE, "dtype is 2147483647",
       [](Arena& a) {
         return softmax_rows_backward_from_stats(a.in(0), a.in(1), a.out(0), a.stat(0), kRows, kCols,
                                                 raw_dtype(std::numeric_limits<int>::max()), nullptr);
       }},
      {"backward_from_stats_dx_overlaps_row_dot", SOFTMAX_STATUS_OVERLAPPING_BUFFERS, "dx overlaps row_dot",
       [](Arena& a) {
         return softmax_rows_backward_from_stats(a.in(0), a.in(1), a.out(0), a.out(0) + 5, kRows, kCols, F32,
                                                 nullptr);
       }},
      {"backward_from_stats_dx_is_y", SOFTMAX_STATUS_OVERLAPPING_BUFFERS, "dx overlaps y",
       [](Arena& a) {
         return softmax_rows_backward_from_stats(a.out(0), a.in(1), a.out(0), a.stat(0), kRows, kCols, F32, nullptr);
       }},
      {"backward_from_stats_dx_overlaps_dy_partially", SOFTMAX_STATUS_OVERLAPPING_BUFFERS,
       "dy and dx overlap without being identical",
       [](Arena& a) {
         return softmax_rows_backward_from_stats(a.in(0), a.out(0), a.out(0) + kN - 1, a.stat(0), kRows, kCols,
                                                 F32, nullptr);
       }},
  };
}

std::vector<ErrorCase> all_cases() {
  std::vector<ErrorCase> cases = forward_and_options_cases();
  for (ErrorCase& c : backward_and_stats_cases()) cases.push_back(std::move(c));
  return cases;
}

class ErrorPaths : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(ErrorPaths, NamedStatusMessageAndNothingWritten) {
  const ErrorCase& c = GetParam();
  Arena a;
  const std::vector<unsigned char> before = a.mem;
  const softmax_status s = c.call(a);
  EXPECT_EQ(s, c.expected) << softmax_status_string(s) << ": " << softmax_last_error();
  const std::string msg = softmax_last_error();
  EXPECT_NE(msg.find(c.message_part), std::string::npos)
      << "message \"" << msg << "\" lacks \"" << c.message_part << "\"";
  EXPECT_TRUE(before == a.mem) << "a failed call wrote to memory";
}

INSTANTIATE_TEST_SUITE_P(Api, ErrorPaths, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<ErrorCase>& i) { return std::string(i.param.name); });

// Without a usable CUDA device, asking for the CUDA backend is a named error, not a crash.
TEST(BackendChoice, CudaRequestedWithoutDevice) {
  if (softmax_backend_available(SOFTMAX_BACKEND_CUDA)) {
    GTEST_SKIP() << "a CUDA device is present; the unavailable path cannot be exercised here";
  }
  Arena a;
  const std::vector<unsigned char> before = a.mem;
  softmax_options o = SOFTMAX_OPTIONS_INIT;
  o.backend = SOFTMAX_BACKEND_CUDA;
  EXPECT_EQ(rows_with(a, o), SOFTMAX_STATUS_BACKEND_UNAVAILABLE);
  EXPECT_NE(std::string(softmax_last_error()).find("CUDA backend is unavailable"), std::string::npos)
      << softmax_last_error();
  EXPECT_EQ(softmax_rows_backward(a.in(0), a.in(1), a.out(0), kRows, kCols, F32, &o),
            SOFTMAX_STATUS_BACKEND_UNAVAILABLE);
  EXPECT_EQ(softmax_row_stats(a.in(0), a.stat(0), a.stat(1), kRows, kCols, F32, &o),
            SOFTMAX_STATUS_BACKEND_UNAVAILABLE);
  EXPECT_TRUE(before == a.mem);
}

// A host pointer given to the CUDA backend is refused by name when a device is present.
TEST(BackendChoice, HostPointerToCudaBackend) {
  if (!softmax_backend_available(SOFTMAX_BACKEND_CUDA)) {
    GTEST_SKIP() << "no CUDA device: the memory-space check needs one";
  }
  Arena a;
  const std::vector<unsigned char> before = a.mem;
  softmax_options o = SOFTMAX_OPTIONS_INIT;
  o.backend = SOFTMAX_BACKEND_CUDA;
  EXPECT_EQ(rows_with(a, o), SOFTMAX_STATUS_WRONG_MEMORY_SPACE);
  EXPECT_NE(std::string(softmax_last_error()).find("x points to host memory"), std::string::npos)
      << softmax_last_error();
  EXPECT_EQ(softmax_rows_backward(a.in(0), a.in(1), a.out(0), kRows, kCols, F32, &o),
            SOFTMAX_STATUS_WRONG_MEMORY_SPACE);
  EXPECT_NE(std::string(softmax_last_error()).find("y points to host memory"), std::string::npos)
      << softmax_last_error();
  EXPECT_TRUE(before == a.mem);
}

}  // namespace
