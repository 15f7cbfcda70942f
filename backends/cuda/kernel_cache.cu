// SPDX-License-Identifier: Apache-2.0
#include "backends/cuda/kernel_cache.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include "backends/cuda/cuda_outcome.h"
#include "backends/cuda/relaxed_capture.h"

namespace softmax_internal {
namespace {

// What was asked: resident groups of (threads, cluster, dynamic shared memory), or an opt-in
// (threads 0: clusters of 16 blocks, or `smem` bytes of dynamic shared memory).
struct Key {
  const void* kernel;
  int device;
  int threads;
  int cluster;
  int smem = 0;
  bool operator==(const Key& o) const {
    return kernel == o.kernel && device == o.device && threads == o.threads && cluster == o.cluster &&
           smem == o.smem;
  }
};

struct Entry {
  Key key;
  int value;
};

// A few dozen entries per process: a vector scanned under a mutex is simple and fast enough.
std::mutex g_mutex;
std::vector<Entry> g_entries;

bool cached(const Key& k, int* value) {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (const Entry& e : g_entries) {
    if (e.key == k) {
      *value = e.value;
      return true;
    }
  }
  return false;
}

void remember(const Key& k, int value) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_entries.push_back({k, value});
}

}  // namespace

cudaError_t max_active_clusters(const void* kernel, int threads, int cluster, int smem, int* clusters) {
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned>(cluster);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.gridDim = dim3(static_cast<unsigned>(cluster));
  cfg.blockDim = dim3(static_cast<unsigned>(threads));
  cfg.dynamicSmemBytes = size_t(smem);
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaOccupancyMaxActiveClusters(clusters, kernel, &cfg);
}

Outcome resident_blocks(const void* kernel, int device, int threads, int smem, int sm_count, int* blocks) {
  return resident_clusters(kernel, device, threads, 1, smem, sm_count, blocks);
}

Outcome resident_clusters(const void* kernel, int device, int threads, int cluster, int smem, int sm_count,
                          int* clusters) {
  const Key key{kernel, device, threads, cluster, smem};
  if (cached(key, clusters)) return Outcome::ok();
  // Two threads may both ask the first time; both get the same answer.
  int n = 0;
  if (cluster <= 1) {
    int per_sm = 0;
    SOFTMAX_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, size_t(smem)));
    n = per_sm * sm_count;
  } else {
    SOFTMAX_CUDA_TRY(max_active_clusters(kernel, threads, cluster, smem, &n));
  }
  *clusters = std::max(1, n);
  remember(key, *clusters);
  return Outcome::ok();
}

Outcome resident_blocks_with_smem(const void* kernel, int device, int threads, int smem, int max_smem, int sm_count,
                                  int* blocks) {
  const Key key{kernel, device, threads, 1, smem};
  if (cached(key, blocks)) return Outcome::ok();
  int done = 0;
  const Key opt_in{kernel, device, 0, 1, max_smem};
  if (!cached(opt_in, &done)) {
    {
      const RelaxedCaptureMode relaxed;  // the first such call may be under graph capture
      SOFTMAX_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem));
    }
    remember(opt_in, 1);
  }
  int per_sm = 0;
  SOFTMAX_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, size_t(smem)));
  *blocks = per_sm * sm_count;
  remember(key, *blocks);
  return Outcome::ok();
}

Outcome allow_large_clusters(const void* kernel, int device) {
  int done = 0;
  const Key key{kernel, device, 0, 16};
  if (cached(key, &done)) return Outcome::ok();
  {
    const RelaxedCaptureMode relaxed;  // the first such call may be under graph capture
    SOFTMAX_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  }
  remember(key, 1);
  return Outcome::ok();
}

}  // namespace softmax_internal
