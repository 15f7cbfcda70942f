// The strategy table. Reads like this (fp32 and 16-bit alike; "elements" = columns):
//
//   cols <= 1024                         warp_per_row   a 1..32-lane group per row, row in
//                                                       registers, several rows per warp
//   1024 < cols <= 64K                   cluster_row    one block (cols <= 8K) or a cluster of
//                                                       2/4/8 blocks per row, row in registers,
//                                                       <= 16 elements x 512 threads per block
//   cols > 64K                           split_row      many blocks per row, (max, sum)
//                                                       partials, L2-sized waves
//
// Few rows: a cluster row already spreads a row of up to 64K columns over up to 8 SMs, as many
// blocks as split_row's 4096-element tiles would give it, and in one read; so few rows only
// change the strategy beyond 64K columns, where split_row sizes its parts to fill every SM
// (one row of 2^28 runs on all of them). 16-byte vectors are used when x, y
// (and the mask) are 16-byte aligned and cols is a multiple of the vector width, so every row
// starts aligned; otherwise each strategy runs its scalar variant (same kernel, kVec = 1).
#include "backends/cuda/softmax_launcher.h"

#include <cstdint>

namespace softmax_internal {
namespace {

int64_t vector_width(softmax_dtype t) { return t == SOFTMAX_DTYPE_F32 ? 4 : 8; }

bool aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

}  // namespace

Outcome launch_softmax(LaunchArgs a) {
  const int64_t vec = vector_width(a.dtype);
  const uint8_t* mask = a.dropout ? a.ep.keep_mask : nullptr;
  a.vector_ok = a.cols % vec == 0 && aligned(a.x, 16) && aligned(a.y, 16) &&
                (mask == nullptr || aligned(mask, static_cast<uintptr_t>(vec)));

  if (a.cols <= kWarpRowMaxCols) return launch_warp_per_row(a);

  if (a.cols <= kClusterRowMaxCols) {
    const int64_t per_block_max = int64_t{kClusterElemsPerThread} * kClusterMaxThreads;
    int cluster = 1;
    while ((a.cols + cluster - 1) / cluster > per_block_max) cluster *= 2;
    const bool clusters_ok = cluster == 1 || a.limits->cluster_launch;
    if (clusters_ok) {
      const int64_t slice = ((a.cols + cluster - 1) / cluster + vec - 1) / vec * vec;
      const int64_t threads = (slice + kClusterElemsPerThread - 1) / kClusterElemsPerThread;
      const int block = static_cast<int>((threads + 31) / 32 * 32);
      return launch_cluster_row(a, cluster, block);
    }
  }
  return launch_split_row(a);
}

}  // namespace softmax_internal
