// How many clusters (or blocks) of a kernel are resident on a device at once, for persistent
// grids that loop over rows. The occupancy calculator is far too slow for every softmax call,
// so each (device, kernel, block size, cluster size, shared memory) is asked once and cached.
#pragma once

#include <cuda_runtime.h>

#include "backends/backend.h"

namespace softmax_internal {

struct ResidentQuery {
  const void* kernel;   // the __global__ function
  int device;
  int threads;          // per block
  int cluster;          // blocks per cluster, 1 = no cluster
  int dynamic_smem;     // bytes per block
  int smem_optin;       // the device's per-block shared memory limit (DeviceLimits)
};

// *clusters = clusters (blocks when cluster == 1) resident at once on the whole device; 0 means
// the configuration cannot run there and the caller must pick another strategy. The first
// query of a kernel on a device also raises its dynamic shared memory limit to all the device
// allows (a kernel-wide setting: raising it only as far as one shape needs would break the
// next launch of a bigger shape, whose answer comes from the cache).
Outcome resident_clusters(const ResidentQuery& q, int sm_count, int* clusters);

}  // namespace softmax_internal
