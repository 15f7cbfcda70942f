/* SPDX-License-Identifier: Apache-2.0 */
// The NCCL adapter's two small kernels over per-row statistics, enqueued on the caller's stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace softmax_adapter {

// row_max[r] = -inf, row_sumexp[r] = 0: the statistics of a slice without columns, which
// libsoftmax does not write (an empty call writes nothing).
cudaError_t fill_empty_slice_stats(float* row_max, float* row_sumexp, int64_t rows, cudaStream_t stream);

// row_sumexp[r] = row_sumexp[r] * exp(local_max[r] - global_max[r]), exactly 0 where it was 0
// (adapters/common/row_stats_merge.h): the local sums on the common scale, ready for ncclSum.
cudaError_t rescale_sums_to_global_max(float* row_sumexp, const float* local_max, const float* global_max,
                                       int64_t rows, cudaStream_t stream);

}  // namespace softmax_adapter
