// SPDX-License-Identifier: Apache-2.0
// Per-device limits, cached. Each device gets its own once-flag, so the first call on one GPU
// never waits for another, and every later call is a plain read.
#include "backends/cuda/device_limits.h"

#include <cuda_runtime.h>

#include <mutex>

#include "backends/cuda/cuda_outcome.h"

namespace softmax_internal {
namespace {

constexpr int kMaxCachedDevices = 64;

struct CachedLimits {
  std::once_flag once;
  DeviceLimits limits;
  cudaError_t error = cudaSuccess;
};

CachedLimits g_cache[kMaxCachedDevices];

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
