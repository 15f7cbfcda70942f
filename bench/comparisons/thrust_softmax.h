/* SPDX-License-Identifier: Apache-2.0 */
// A softmax written only with Thrust's device algorithms: slow, but independent of every kernel
// in the library and in CUB's block layer, so an agreement with it means something.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace softmax_compare {

// Scratch the caller provides: the per-row max and sum (2 * rows floats).
size_t thrust_softmax_workspace_bytes(int64_t rows);

// fp32 only (one instantiation keeps Thrust's compile time down). Three device-wide passes:
// reduce_by_key over the row index for the max, reduce_by_key of exp(x - max[row]) for the sum,
// transform for y. Runs on `stream` but synchronises inside (reduce_by_key returns a count).
// Thrust's exceptions are caught and returned as a cudaError_t.
cudaError_t thrust_row_softmax(const float* x, float* y, int64_t rows, int64_t cols, bool log_softmax,
                               void* workspace, cudaStream_t stream);

}  // namespace softmax_compare
