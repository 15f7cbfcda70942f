/* SPDX-License-Identifier: Apache-2.0 */
// A softmax assembled from CUB's block-level reduction: an independent implementation that the
// comparison tests hold the library against and that the bench prints next to it.
#pragma once

#include <cuda_runtime_api.h>
#include <softmax/softmax.h>

#include <cstdint>

namespace softmax_compare {

// One block of 256 threads per row; cub::BlockReduce gives the row max, then the sum of
// exp(x - max); a third sweep writes y. Each sweep reads the row from global memory (three reads
// of x), which is the price of keeping this version obviously correct. rows < 2^31.
// log_softmax writes x - max - log(sum). Asynchronous on `stream`; returns the launch status.
cudaError_t cub_block_softmax(const void* x, void* y, int64_t rows, int64_t cols, softmax_dtype dtype,
                              bool log_softmax, cudaStream_t stream);

}  // namespace softmax_compare
