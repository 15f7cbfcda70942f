// SPDX-License-Identifier: Apache-2.0
// Per-device limits, cached. Each device gets its own once-flag, so the first call on one GPU
// never waits for another, and every later call is a plain read.
#include "backends/cuda/device_limits.h"

#include <cuda_runtime.h>

#include <mutex>

#include "backends/cuda/cuda_outcome.h"
#include "backends/cuda/kernel_cache.h"
#include "backends/cuda/relaxed_capture.h"

namespace softmax_internal {
namespace {

constexpr int kMaxCachedDevices = 64;

struct CachedLimits {
  std::once_flag once;
  DeviceLimits limits;
  cudaError_t error = cudaSuccess;
};

CachedLimits g_cache[kMaxCachedDevices];

__global__ void cluster_probe_kernel() {}

// Whether clusters of 16 blocks, each block alone on its SM, can be resident on the current
// device: then so can every cluster the launcher plans, whatever its blocks' registers. 16 is a
// non-portable size that a GPU with clusters may not offer (a MIG slice, a GPC of fewer SMs); any
// error here only means no.
bool probe_large_clusters(int device, const DeviceLimits& l) {
  const void* fn = reinterpret_cast<const void*>(cluster_probe_kernel);
  if (!allow_large_clusters(fn, device).good()) return false;
  const RelaxedCaptureMode relaxed;  // the first call may be under the caller's graph capture
  int clusters = 0;
  const bool ok =
      cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, l.max_smem_per_block_optin) ==
          cudaSuccess &&
      max_active_clusters(fn, 1024, 16, l.max_smem_per_block_optin, &clusters) == cudaSuccess;  // one block an SM
  (void)cudaGetLastError();
  return ok && clusters > 0;
}

cudaError_t read_limits(int device, DeviceLimits* l) {
  int v = 0;
  cudaError_t e;
  if ((e = cudaDeviceGetAttribute(&l->sm_count, cudaDevAttrMultiProcessorCount, device))) return e;
  if ((e = cudaDeviceGetAttribute(&l->max_threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor,
                                  device)))
    return e;
  if ((e = cudaDeviceGetAttribute(&l->max_smem_per_block_optin,
                                  cudaDevAttrMaxSharedMemoryPerBlockOptin, device)))
    return e;
  if ((e = cudaDeviceGetAttribute(&v, cudaDevAttrL2CacheSize, device))) return e;
  l->l2_bytes = static_cast<size_t>(v);
  if ((e = cudaDeviceGetAttribute(&v, cudaDevAttrClusterLaunch, device))) return e;
  l->cluster_launch = v != 0;
  l->large_clusters = l->cluster_launch && probe_large_clusters(device, *l);
  if ((e = cudaDeviceGetAttribute(&v, cudaDevAttrCooperativeLaunch, device))) return e;
  l->cooperative_launch = v != 0;
  if ((e = cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, device))) return e;
  l->dependent_launch = v >= 9;
  return cudaSuccess;
}

}  // namespace

Outcome device_limits(int device, const DeviceLimits** out) {
  if (device < 0 || device >= kMaxCachedDevices) {
    return Outcome::fail(SOFTMAX_STATUS_INTERNAL_ERROR,
                         "CUDA device ordinal " + std::to_string(device) + " is outside the cache");
  }
  CachedLimits& c = g_cache[device];
  std::call_once(c.once, [&] {
    c.error = read_limits(device, &c.limits);
    if (c.error != cudaSuccess) (void)cudaGetLastError();
  });
  if (c.error != cudaSuccess) return cuda_failure("cudaDeviceGetAttribute", c.error);
  *out = &c.limits;
  return Outcome::ok();
}

}  // namespace softmax_internal
