/* SPDX-License-Identifier: Apache-2.0 */
// Host-side dispatch from run-time storage types to the device types the kernels are
// instantiated for.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <softmax/softmax.h>

#include "backends/backend.h"

namespace softmax_internal {

// Calls f.template run<X, Y>() with the device types of x and y (each f32, f16 or bf16).
template <class F>
Outcome with_types(softmax_dtype x, softmax_dtype y, const F& f) {
  switch (x) {
    case SOFTMAX_DTYPE_F32:
      if (y == SOFTMAX_DTYPE_F16) return f.template run<float, __half>();
      if (y == SOFTMAX_DTYPE_BF16) return f.template run<float, __nv_bfloat16>();
      return f.template run<float, float>();
    case SOFTMAX_DTYPE_F16:
      if (y == SOFTMAX_DTYPE_F32) return f.template run<__half, float>();
      if (y == SOFTMAX_DTYPE_BF16) return f.template run<__half, __nv_bfloat16>();
      return f.template run<__half, __half>();
    default:
      if (y == SOFTMAX_DTYPE_F32) return f.template run<__nv_bfloat16, float>();
      if (y == SOFTMAX_DTYPE_F16) return f.template run<__nv_bfloat16, __half>();
      return f.template run<__nv_bfloat16, __nv_bfloat16>();
  }
}

}  // namespace softmax_internal
