// Argument checks for the C entry points. Each check turns the raw C arguments into either a
// resolved request or a named status with a message; nothing here touches the data.
#pragma once

#include "backends/backend.h"

#include <softmax/softmax.h>

namespace softmax_internal {

// Options after defaults and struct_size handling.
struct ResolvedOptions {
  softmax_backend backend = SOFTMAX_BACKEND_AUTO;
  uint32_t flags = 0;
  void* stream = nullptr;
  int num_threads = 0;
};

size_t dtype_size(softmax_dtype dtype);  // 0 for values outside the enum

Outcome resolve_options(const softmax_options* options, ResolvedOptions* out);
// `raw` is the caller's dtype argument read with enum_bits(); on success *dtype holds it.
Outcome check_dtype(int raw, softmax_dtype* dtype);
// rows, cols > 0 and rows * cols * element_size fits in a ptrdiff_t; *bytes gets that size.
Outcome check_shape(int64_t rows, int64_t cols, softmax_dtype dtype, size_t* bytes);
// x and y identical or disjoint; mask (if any) disjoint from both.
Outcome check_overlap(const void* x, const void* y, size_t bytes, const void* mask,
                      size_t mask_bytes);
Outcome check_probability(float p);

}  // namespace softmax_internal
