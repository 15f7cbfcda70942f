/* SPDX-License-Identifier: Apache-2.0 */
// Stream-ordered scratch memory for kernels that need a workspace (split_row's partials).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "backends/backend.h"

namespace softmax_internal {

// Allocates `bytes` on the current device, ordered on `stream` (graph-capturable). Free with
// workspace_free on the same stream.
Outcome workspace_alloc(int device, size_t bytes, cudaStream_t stream, void** out);
cudaError_t workspace_free(void* p, cudaStream_t stream);

}  // namespace softmax_internal
