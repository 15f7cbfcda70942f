/* SPDX-License-Identifier: Apache-2.0 */
// Host launchers for the seed article's ladder (bench/ladder/0N_*.cuh): softmax of ONE fp32
// vector of n elements. Kept as a library (softmax_cuda_comparisons) so the bench times them and
// the comparison tests check them against float64.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace seed_ladder {

// 01: one thread does everything.
cudaError_t launch_naive_one_thread(const float* x, float* y, int64_t n, cudaStream_t stream);
// 02: one block of 1024 threads, warp-shuffle reduction.
cudaError_t launch_warp_shuffle_reduce(const float* x, float* y, int64_t n, cudaStream_t stream);
// 03: 02 with float4 loads and stores; x and y must be 16-byte aligned (else cudaErrorInvalidValue).
cudaError_t launch_float4_vectorized(const float* x, float* y, int64_t n, cudaStream_t stream);

}  // namespace seed_ladder
