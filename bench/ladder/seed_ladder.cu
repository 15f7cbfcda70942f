// SPDX-License-Identifier: Apache-2.0
// Launchers of the seed ladder's three rungs: one launch each, all of them single-block by design.
#include "01_naive_one_thread.cuh"
#include "02_warp_shuffle_reduce.cuh"
#include "03_float4_vectorized.cuh"
#include "seed_ladder.h"

namespace seed_ladder {

cudaError_t launch_naive_one_thread(const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (!x || !y || n <= 0) return cudaErrorInvalidValue;
  naive_one_thread_kernel<<<1, 1, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t launch_warp_shuffle_reduce(const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (!x || !y || n <= 0) return cudaErrorInvalidValue;
  warp_shuffle_reduce_kernel<<<1, kLadderThreads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t launch_float4_vectorized(const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (!x || !y || n <= 0) return cudaErrorInvalidValue;
  if ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) % 16 != 0) return cudaErrorInvalidValue;
  float4_vectorized_kernel<<<1, kLadderThreads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

}  // namespace seed_ladder
