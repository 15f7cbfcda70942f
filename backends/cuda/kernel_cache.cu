// SPDX-License-Identifier: Apache-2.0
#include "backends/cuda/kernel_cache.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include "backends/cuda/cuda_outcome.h"

namespace softmax_internal {
namespace {

struct Entry {
  const void* kernel;
  int device;
  int threads;  // 0: the large-cluster opt-in
  int blocks;
};

// A few dozen entries per process: a vector scanned under a mutex is simple and fast enough.
std::mutex g_mutex;
std::vector<Entry> g_entries;

bool cached(const void* kernel, int device, int threads, int* blocks) {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (const Entry& e : g_entries) {
    if (e.kernel == kernel && e.device == device && e.threads == threads) {
      *blocks = e.blocks;
      return true;
    }
  }
  return false;
}

void remember(const void* kernel, int device, int threads, int blocks) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_entries.push_back({kernel, device, threads, blocks});
}

}  // namespace

Outcome resident_blocks(const void* kernel, int device, int threads, int sm_count, int* blocks) {
  if (cached(kernel, device, threads, blocks)) return Outcome::ok();
  // Two threads may both ask the first time; both get the same answer.
  int per_sm = 0;
  SOFTMAX_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
  *blocks = std::max(1, per_sm * sm_count);
  remember(kernel, device, threads, *blocks);
  return Outcome::ok();
}

Outcome allow_large_clusters(const void* kernel, int device) {
  int done = 0;
  if (cached(kernel, device, 0, &done)) return Outcome::ok();
  SOFTMAX_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  remember(kernel, device, 0, 1);
  return Outcome::ok();
}

}  // namespace softmax_internal
