/* SPDX-License-Identifier: Apache-2.0 */
// Facts about compiled kernels that the launches need on every call and the runtime is slow to
// answer: resident blocks or clusters per device, and the one-time opt-ins to clusters of 16
// blocks and to more than 48 KB of dynamic shared memory. Asked once per kernel, device and shape, and cached.
#pragma once

#include <cuda_runtime.h>

#include "backends/backend.h"

namespace softmax_internal {

// Blocks of `threads` threads of `kernel`, launched with `smem` bytes of dynamic shared memory
// (at most 48 KB), resident at once on the whole device (>= 1).
Outcome resident_blocks(const void* kernel, int device, int threads, int smem, int sm_count, int* blocks);

// Clusters of `cluster` blocks of `threads` threads of `kernel` (with `smem` bytes of dynamic
// shared memory each, at most 48 KB) resident at once on the whole device (>= 1); cluster 1
// counts blocks. Clusters of more than 8 blocks need allow_large_clusters first.
Outcome resident_clusters(const void* kernel, int device, int threads, int cluster, int smem, int sm_count,
                          int* clusters);

// Blocks of `threads` threads of `kernel` with `smem` bytes of dynamic shared memory resident at
// once on the whole device (0 when not even one fits). The first call for a kernel lets it take up to `max_smem`.
Outcome resident_blocks_with_smem(const void* kernel, int device, int threads, int smem, int max_smem, int sm_count,
                                  int* blocks);
// Lets `kernel` launch clusters of more than 8 blocks (a kernel-wide attribute, set once).
Outcome allow_large_clusters(const void* kernel, int device);

// The occupancy calculator's count of clusters of `cluster` blocks of `threads` threads of
// `kernel` (`smem` bytes of dynamic shared memory each) resident at once on the current device,
// 0 included; not cached (resident_clusters caches it).
cudaError_t max_active_clusters(const void* kernel, int threads, int cluster, int smem, int* clusters);

}  // namespace softmax_internal
