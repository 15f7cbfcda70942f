#include "backends/cuda/resident_grid.h"

#include <mutex>
#include <vector>

#include "backends/cuda/cuda_outcome.h"

namespace softmax_internal {
namespace {

struct Entry {
  ResidentQuery q;
  int clusters;
};

bool same(const ResidentQuery& a, const ResidentQuery& b) {
  return a.kernel == b.kernel && a.device == b.device && a.threads == b.threads &&
         a.cluster == b.cluster && a.dynamic_smem == b.dynamic_smem;
}

// A handful of entries per process (one per instantiation and block shape in use): a vector
// scanned under a mutex is simpler than a hash map and just as fast at this size.
std::mutex g_mutex;
std::vector<Entry> g_entries;

Outcome ask_runtime(const ResidentQuery& q, int sm_count, int* clusters) {
  // Beyond 48 KB of dynamic shared memory a kernel must opt in; the setting belongs to the
  // current device's context, which is q.device here (the backend made it current).
  cudaFuncAttributes attrs{};
  SOFTMAX_CUDA_TRY(cudaFuncGetAttributes(&attrs, q.kernel));
  const int limit = q.smem_optin - static_cast<int>(attrs.sharedSizeBytes);
  if (q.dynamic_smem > limit) {
    *clusters = 0;
    return Outcome::ok();
  }
  SOFTMAX_CUDA_TRY(cudaFuncSetAttribute(q.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, limit));
  if (q.cluster <= 1) {
    int per_sm = 0;
    SOFTMAX_CUDA_TRY(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, q.kernel, q.threads, q.dynamic_smem));
    *clusters = per_sm * sm_count;
    return Outcome::ok();
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(q.cluster));
  cfg.blockDim = dim3(static_cast<unsigned>(q.threads));
  cfg.dynamicSmemBytes = static_cast<size_t>(q.dynamic_smem);
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned>(q.cluster);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  SOFTMAX_CUDA_TRY(cudaOccupancyMaxActiveClusters(clusters, q.kernel, &cfg));
  return Outcome::ok();
}

}  // namespace

Outcome resident_clusters(const ResidentQuery& q, int sm_count, int* clusters) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    for (const Entry& e : g_entries) {
      if (same(e.q, q)) {
        *clusters = e.clusters;
        return Outcome::ok();
      }
    }
  }
  // Asked outside the lock: two threads may both ask the first time; both get the same answer.
  int n = 0;
  if (Outcome o = ask_runtime(q, sm_count, &n); !o.good()) return o;
  std::lock_guard<std::mutex> lock(g_mutex);
  g_entries.push_back({q, n});
  *clusters = n;
  return Outcome::ok();
}

}  // namespace softmax_internal
