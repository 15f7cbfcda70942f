// The strategy table. Reads like this ("elements" = columns; fp32 and 16-bit alike):
//
//   cols <= 1024            warp_per_row   a 1..32-lane group per row, row in registers,
//                                          1-2 rows per group per step
//   1024 < cols <= 128K     cluster_row    row in registers: one 128-thread block (<= 4K
//                                          elements), or a cluster of 2/4/8 such blocks, then
//                                          bigger blocks (up to 512 threads x 32 elements x 8)
//   cols > 128K             split_row      many blocks per row, (max, sum) partials, L2-sized
//                                          waves, second read from L2
//
// Small blocks hold a row piece best: their loads, barriers and stores overlap with many other
// resident blocks'. Measured on the H200 (fp32, 1 GiB): an 8K row on one 512-thread block ran
// at 2.5 TB/s, on one 256-thread block at 3.3, on two 128-thread blocks at 3.5; a 4K row on
// one 128-thread block at 3.9. Each cluster exchange costs a barrier, so clusters grow only
// as far as the row needs.
//
// Few rows: a cluster row already spreads a row of up to 128K columns over up to 8 SMs in one
// read, as many blocks as split_row's 4096-element tiles would give a 32K row; so few rows only
// change the strategy beyond 128K columns, where split_row sizes its parts to fill every SM
// (one row of 2^28 runs on all of them). 16-byte vectors are used when x, y (and the mask)
// are 16-byte aligned and cols is a multiple of the vector width, so every row starts aligned;
// otherwise each strategy runs its scalar variant (same kernel, kVec = 1).
#include "backends/cuda/softmax_launcher.h"

#include <cstdint>

namespace softmax_internal {
namespace {

int64_t vector_width(softmax_dtype t) { return t == SOFTMAX_DTYPE_F32 ? 4 : 8; }

constexpr int kPreferredThreads = 128;
constexpr int kPreferredThreadsDropout = 256;  // 16 elements per thread: 4096 per block

struct ClusterShape {
  int cluster = 0, threads = 0, elems_per_thread = 0;  // cluster == 0: does not fit on chip
};

// Up to 2K columns, 16 elements per thread (more, smaller blocks); beyond, 32. The scalar path
// (misaligned pointers, cols not a multiple of the vector width) holds at most 16 elements per
// thread: with 32 its per-element 64-bit addresses would spill. Dropout also keeps 16: its
// Philox state needs the registers.
ClusterShape cluster_shape(int64_t cols, int64_t vec, bool vector_ok, bool dropout) {
  const int ept = (cols <= 2048 || !vector_ok || dropout) ? 16 : 32;
  int cluster = 1;
  const int64_t preferred = dropout ? kPreferredThreadsDropout : kPreferredThreads;
  while (cluster < kClusterMaxSize && (cols + cluster - 1) / cluster > preferred * ept) cluster *= 2;
  const int64_t slice = ((cols + cluster - 1) / cluster + vec - 1) / vec * vec;
  const int64_t threads = (slice + ept - 1) / ept;
  if (threads > kClusterMaxThreads) return {};
  return {cluster, static_cast<int>((threads + 31) / 32 * 32), ept};
}

bool aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

}  // namespace

Outcome launch_softmax(LaunchArgs a) {
  const int64_t vec = vector_width(a.dtype);
  const uint8_t* mask = a.dropout ? a.ep.keep_mask : nullptr;
  a.vector_ok = a.cols % vec == 0 && aligned(a.x, 16) && aligned(a.y, 16) &&
                (mask == nullptr || aligned(mask, static_cast<uintptr_t>(vec)));

  if (a.cols <= kWarpRowMaxCols) return launch_warp_per_row(a);

  if (a.cols <= kClusterRowMaxCols) {
    const ClusterShape c = cluster_shape(a.cols, a.vector_ok ? vec : 1, a.vector_ok, a.dropout);
    if (c.cluster == 1 || (c.cluster > 1 && a.limits->cluster_launch))
      return launch_cluster_row(a, c.cluster, c.threads, c.elems_per_thread);
  }
  return launch_split_row(a);
}

}  // namespace softmax_internal
