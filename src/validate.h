/* SPDX-License-Identifier: Apache-2.0 */
// Argument checks for the C entry points. Each check turns the raw C arguments into either a
// resolved request or a named status with a message; nothing here touches the data.
#pragma once

#include "backends/backend.h"

#include <softmax/softmax.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace softmax_internal {

// Options after defaults and struct_size handling.
struct ResolvedOptions {
  softmax_backend backend = SOFTMAX_BACKEND_AUTO;
  uint32_t flags = 0;
  void* stream = nullptr;
  int num_threads = 0;
  bool has_y_dtype = false;  // SOFTMAX_FLAG_Y_DTYPE was set
  int y_dtype_raw = 0;       // the caller's y_dtype bits, when has_y_dtype
};

size_t dtype_size(softmax_dtype dtype);  // 0 for values outside the enum

Outcome resolve_options(const softmax_options* options, ResolvedOptions* out);

// `raw` is the caller's dtype argument read with enum_bits(); on success *dtypes holds it as x's
// type and, unless the options name another one, as y's.
Outcome check_dtypes(int raw, const ResolvedOptions& opts, Dtypes* dtypes);

// rows, cols >= 0; *empty is set when either is 0.
Outcome check_sizes(int64_t rows, int64_t cols, bool* empty);

Outcome check_probability(float p);

// One array argument of a call, as the size, pointer and overlap checks see it.
struct ArraySpec {
  const char* name;
  const void* ptr;
  size_t elem_size;      // bytes per element
  bool per_row;          // `rows` elements (row statistics) instead of rows * cols
  bool output;           // written by the call
  int in_place_with;     // index of the one array this output may equal exactly, or -1
};

// Non-null pointers, every byte size representable in a ptrdiff_t, and outputs disjoint from
// every other array except their in-place partner (identical start and element size).
Outcome check_arrays(std::initializer_list<ArraySpec> arrays, int64_t rows, int64_t cols);

}  // namespace softmax_internal
