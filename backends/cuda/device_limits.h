/* SPDX-License-Identifier: Apache-2.0 */
// What the launcher needs to know about a GPU, read once per device and cached: the strategy
// table is a function of these numbers, and cudaGetDeviceProperties is far too slow to call
// on every softmax.
#pragma once

#include <cstddef>

#include "backends/backend.h"

namespace softmax_internal {

struct DeviceLimits {
  int sm_count = 0;
  int max_threads_per_sm = 0;
  int max_smem_per_block_optin = 0;  // bytes
  size_t l2_bytes = 0;
  bool cluster_launch = false;       // thread-block clusters (sm_90+)
  bool large_clusters = false;       // clusters of 16 blocks (non-portable) can be resident
  bool cooperative_launch = false;   // grids whose blocks are all resident at once
  bool dependent_launch = false;     // programmatic dependent launches (compute capability 9.0+)
};

// Limits of `device`, filled on first use (thread-safe; later calls only read).
Outcome device_limits(int device, const DeviceLimits** out);

}  // namespace softmax_internal
