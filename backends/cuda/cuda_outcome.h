/* SPDX-License-Identifier: Apache-2.0 */
// Turning CUDA runtime errors into the backend's Outcome. Kernels never see status codes: every
// runtime call and every launch on the host side goes through these helpers, which also clear
// the runtime's per-thread "last error" so that a failure here is never reported again to the
// next, unrelated caller of the CUDA runtime in the same process.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "backends/backend.h"

namespace softmax_internal {

inline Outcome cuda_failure(const char* what, cudaError_t err) {
  (void)cudaGetLastError();  // a non-sticky error must not leak to the next runtime caller
  const softmax_status status =
      err == cudaErrorMemoryAllocation ? SOFTMAX_STATUS_OUT_OF_MEMORY : SOFTMAX_STATUS_CUDA_ERROR;
  return Outcome::fail(status, std::string(what) + " failed: " + cudaGetErrorName(err) + " (" +
                                   cudaGetErrorString(err) + ")");
}

// The launch check: configuration errors (bad grid, too much shared memory, no kernel image
// for this GPU) surface through cudaGetLastError right after the launch.
inline Outcome cuda_launch_outcome(const char* kernel) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return cuda_failure(kernel, err);
  return Outcome::ok();
}

}  // namespace softmax_internal

// Early return from a function returning Outcome when a CUDA runtime call fails.
#define SOFTMAX_CUDA_TRY(call)                                                     \
  do {                                                                             \
    const cudaError_t softmax_cuda_err_ = (call);                                  \
    if (softmax_cuda_err_ != cudaSuccess)                                          \
      return ::softmax_internal::cuda_failure(#call, softmax_cuda_err_);           \
  } while (0)
