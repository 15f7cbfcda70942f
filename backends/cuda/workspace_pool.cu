// SPDX-License-Identifier: Apache-2.0
// The workspace comes from a memory pool the library owns, one per device, whose release
// threshold keeps its memory mapped across synchronisations. The device's default pool has a
// threshold of 0 and unmaps its free memory at every synchronisation, so a caller that syncs
// between calls (a timing loop, a training step) would pay a fresh mapping on every split-row
// call. In the H200 run with the default pool a single 2^20-element row took 77 us where its
// 8 MB of traffic needs a few; this remapping is the suspected cause (not yet re-measured with
// this pool). A private pool also leaves the caller's default-pool settings alone. If the
// pool cannot be created, the default pool is used.
#include "backends/cuda/workspace_pool.h"

#include <cstdint>
#include <mutex>

#include "backends/cuda/cuda_outcome.h"
#include "backends/cuda/relaxed_capture.h"

namespace softmax_internal {
namespace {

constexpr int kMaxDevices = 64;

struct DevicePool {
  std::once_flag once;
  cudaMemPool_t pool = nullptr;  // nullptr: use the default pool
};

DevicePool g_pools[kMaxDevices];

cudaMemPool_t pool_for(int device) {
  if (device < 0 || device >= kMaxDevices) return nullptr;
  DevicePool& d = g_pools[device];
  std::call_once(d.once, [&] {
    const RelaxedCaptureMode relaxed;  // the first split-row call may be under graph capture
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    cudaMemPool_t pool = nullptr;
    if (cudaMemPoolCreate(&pool, &props) != cudaSuccess) {
      (void)cudaGetLastError();
      return;
    }
    // Partials are small (kilobytes to a few megabytes): keep what was mapped.
    uint64_t keep = UINT64_MAX;
    if (cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) != cudaSuccess) {
      (void)cudaGetLastError();
      (void)cudaMemPoolDestroy(pool);
      return;
    }
    d.pool = pool;
  });
  return d.pool;
}

}  // namespace

Outcome workspace_alloc(int device, size_t bytes, cudaStream_t stream, void** out) {
  cudaMemPool_t pool = pool_for(device);
  const cudaError_t err = pool != nullptr ? cudaMallocFromPoolAsync(out, bytes, pool, stream)
                                          : cudaMallocAsync(out, bytes, stream);
  if (err != cudaSuccess) return cuda_failure("stream-ordered workspace allocation", err);
  return Outcome::ok();
}

cudaError_t workspace_free(void* p, cudaStream_t stream) { return cudaFreeAsync(p, stream); }

}  // namespace softmax_internal
