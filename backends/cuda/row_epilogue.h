// What happens to a row once its max and sum are known: plain softmax, log-softmax, or softmax
// fused with inverted dropout. Passed by value to every kernel; the host fills it once per call.
#pragma once

#include <cstdint>

namespace softmax_internal {

struct RowEpilogue {
  bool log_softmax = false;
  // Dropout (only read by the kernels instantiated with kDropout = true).
  float p = 0.0f;
  float keep_scale = 1.0f;  // dropout_scale(p)
  uint64_t seed = 0;
  uint64_t offset = 0;
  uint8_t* keep_mask = nullptr;  // nullptr: no mask output
};

}  // namespace softmax_internal
