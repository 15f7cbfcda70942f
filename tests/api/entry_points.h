/* SPDX-License-Identifier: Apache-2.0 */
// The eight compute functions of the C API behind one calling convention, so that a test can
// loop over all of them: what each accepts (from the header's comments) and a call that takes
// its array arguments as a list, in the order of the function's parameters.
#pragma once

#include <softmax/softmax.h>

#include <cstdint>

namespace softmax_api_test {

struct EntryPoint {
  const char* name;
  int arrays;         // how many array (pointer) parameters
  bool takes_p;       // dropout probability, seed and offset
  bool log_allowed;   // SOFTMAX_FLAG_LOG accepted
  bool f64_allowed;   // f64 storage accepted (the four statistics functions refuse it)
  // ptrs[0 .. arrays-1] in parameter order; p is ignored unless takes_p.
  softmax_status (*call)(void* const* ptrs, int64_t rows, int64_t cols, softmax_dtype dtype,
                         float p, const softmax_options* options);
};

inline const EntryPoint kEntryPoints[] = {
    {"softmax_rows", 2, false, true, true,
     [](void* const* a, int64_t r, int64_t c, softmax_dtype t, float, const softmax_options* o) {
       return softmax_rows(a[0], a[1], r, c, t, o);
     }},
    {"softmax_dropout", 3, true, false, true,
     [](void* const* a, int64_t r, int64_t c, softmax_dtype t, float p, const softmax_options* o) {
       return softmax_dropout(a[0], a[1], static_cast<uint8_t*>(a[2]), r, c, t, p, 7, 3, o);
     }},
    {"softmax_rows_backward", 3, false, true, true,
     [](void* const* a, int64_t r, int64_t c, softmax_dtype t, float, const softmax_options* o) {
       return softmax_rows_backward(a[0], a[1], a[2], r, c, t, o);
     }},
    {"softmax_dropout_backward", 3, true, false, true,
     [](void* const* a, int64_t r, int64_t c, softmax_dtype t, float p, const softmax_options* o) {
       return softmax_dropout_backward(a[0], a[1], a[2], r, c, t, p, 7, 3, o);
     }},
    {"softmax_row_stats", 3, false, true, false,
     [](void* const* a, int64_t r, int64_t c, softmax_dtype t, float, const softmax_options* o) {
       return softmax_row_stats(a[0], static_cast<float*>(a[1]), static_cast<float*>(a[2]), r, c, t, o);
     }},
    {"softmax_rows_from_stats", 4, false, true, false,
     [](void* const* a, int64_t r, int64_t c, softmax_dtype t, float, const softmax_options* o) {
       return softmax_rows_from_stats(a[0], a[1], static_cast<const float*>(a[2]),
                                      static_cast<const float*>(a[3]), r, c, t, o);
     }},
    {"softmax_backward_row_stats", 3, false, true, false,
     [](void* const* a, int64_t r, int64_t c, softmax_dtype t, float, const softmax_options* o) {
       return softmax_backward_row_stats(a[0], a[1], static_cast<float*>(a[2]), r, c, t, o);
     }},
    {"softmax_rows_backward_from_stats", 4, false, true, false,
     [](void* const* a, int64_t r, int64_t c, softmax_dtype t, float, const softmax_options* o) {
       return softmax_rows_backward_from_stats(a[0], a[1], a[2], static_cast<const float*>(a[3]), r, c,
                                               t, o);
     }},
};

}  // namespace softmax_api_test
