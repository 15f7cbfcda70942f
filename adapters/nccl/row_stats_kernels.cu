// SPDX-License-Identifier: Apache-2.0
#include "adapters/nccl/row_stats_kernels.h"

#include <algorithm>

#include "adapters/common/row_stats_merge.h"

namespace softmax_adapter {
namespace {

constexpr int kThreads = 256;

// Grid-stride loops, so any number of rows fits a grid of bounded size.
unsigned grid_for(int64_t rows) {
  return static_cast<unsigned>(std::min<int64_t>((rows + kThreads - 1) / kThreads, 65535));
}

__global__ void fill_empty_kernel(float* row_max, float* row_sumexp, int64_t rows) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < rows; r += int64_t{gridDim.x} * blockDim.x) {
    row_max[r] = -INFINITY;
    row_sumexp[r] = 0.0f;
  }
}

__global__ void rescale_kernel(float* row_sumexp, const float* local_max, const float* global_max, int64_t rows) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < rows; r += int64_t{gridDim.x} * blockDim.x) {
    row_sumexp[r] = static_cast<float>(rescaled_sum(row_sumexp[r], local_max[r], global_max[r]));
  }
}

}  // namespace

cudaError_t fill_empty_slice_stats(float* row_max, float* row_sumexp, int64_t rows, cudaStream_t stream) {
  fill_empty_kernel<<<grid_for(rows), kThreads, 0, stream>>>(row_max, row_sumexp, rows);
  return cudaGetLastError();
}

cudaError_t rescale_sums_to_global_max(float* row_sumexp, const float* local_max, const float* global_max,
                                       int64_t rows, cudaStream_t stream) {
  rescale_kernel<<<grid_for(rows), kThreads, 0, stream>>>(row_sumexp, local_max, global_max, rows);
  return cudaGetLastError();
}

}  // namespace softmax_adapter
