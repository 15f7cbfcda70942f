/* SPDX-License-Identifier: Apache-2.0 */
// One call of softmax_rows or softmax_dropout on a backend, from host inputs to host outputs, so
// that the differential tests read the same on every backend: the runner puts x where the
// backend wants it (optionally one element off alignment, or in y's place for an in-place call),
// poisons y and the mask, calls the public C API, and brings y and the mask back.
#pragma once

#include <softmax/softmax.h>

#include <cstdint>
#include <string>
#include <vector>

#include "reference.h"

namespace softmax_semantics {

using softmax_test::Buffer;

struct DropoutArgs {
  float p = 0.0f;
  uint64_t seed = 0;
  uint64_t offset = 0;
  bool want_mask = true;
};

struct Call {
  const Buffer* x = nullptr;  // host input, stored as the call's x dtype
  softmax_dtype y_dtype = SOFTMAX_DTYPE_F32;
  bool set_y_dtype_flag = false;  // also passed when y_dtype equals x's type
  int64_t rows = 0, cols = 0;
  bool log_softmax = false;
  bool dropout = false;
  DropoutArgs drop;
  size_t x_offset = 0, y_offset = 0;  // in elements of their own type
  bool in_place = false;              // y is x's storage (equal element sizes only)
};

struct Result {
  softmax_status status = SOFTMAX_STATUS_INTERNAL_ERROR;
  std::string message;        // softmax_last_error() after a failure, or what went wrong here
  Buffer y{SOFTMAX_DTYPE_F32, 0};
  std::vector<uint8_t> mask;  // empty unless the call asked for one
  // The CUDA backend refused the call, as it must, because SOFTMAX_CUDA_STRATEGY forces a
  // strategy that cannot hold the row: nothing to compare.
  bool refused_by_forced_strategy = false;
};

class Runner {
 public:
  virtual ~Runner() = default;
  virtual const char* name() const = 0;
  // Empty when the backend can run here; otherwise the reason its tests skip.
  virtual std::string unavailable() const = 0;
  virtual Result run(const Call& call) const = 0;
};

const Runner& cpu_runner();
#if defined(SOFTMAX_SEMANTICS_WITH_CUDA)
const Runner& cuda_runner();
#endif

// The options a call passes (backend chosen by the runner).
inline softmax_options call_options(const Call& c, softmax_backend backend) {
  softmax_options o = softmax_default_options();
  o.backend = backend;
  o.flags = c.log_softmax ? SOFTMAX_FLAG_LOG : 0u;
  if (c.set_y_dtype_flag || c.y_dtype != c.x->dtype) {
    o.flags |= SOFTMAX_FLAG_Y_DTYPE;
    o.y_dtype = c.y_dtype;
  }
  return o;
}

}  // namespace softmax_semantics
