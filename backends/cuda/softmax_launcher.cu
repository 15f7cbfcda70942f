// The strategy table. Reads like this ("elements" = columns):
//
//   cols <= 1024                 warp_per_row    a 1..32-lane group per row, row in registers,
//                                                1-2 rows per group per step
//   16-byte aligned rows of      prefetch_row    persistent blocks / clusters of up to 8 blocks,
//   4K (fp32) or 1K (16-bit)                     32 elements per thread, the next rows stream
//   < cols <= 128K                               into shared memory while one is reduced
//   other rows <= 128K           cluster_row     row in registers: one 128-thread block (<= 4K
//                                                elements), or a cluster of 2/4/8 such blocks
//   cols > 128K                  split_row       many blocks per row, (max, sum) partials,
//                                                L2-sized waves, second read from L2
//
// cluster_row: small blocks hold a row piece best when nothing is prefetched: their loads,
// barriers and stores overlap with many other resident blocks'. Measured on the H200 (fp32,
// 1 GiB): an 8K row on one 512-thread block ran at 2.5 TB/s, on one 256-thread block at 3.3,
// on two 128-thread blocks at 3.5; a 4K row on one 128-thread block at 3.9. Each cluster
// exchange costs a barrier, so clusters grow only as far as the row needs. prefetch_row keeps
// loads in flight through its barriers, so its blocks can be big (up to 512 threads); it takes
// over where cluster_row fell short. Sweep on the H200 (bench/strategy_sweep.sh, 1 GiB, TB/s,
// prefetch_row against cluster_row): fp32 2K 3.40 / 4.09 and 4K 3.42 / 3.96 (so cluster_row
// keeps them), 8K 3.42 / 3.08, 16K 3.40 / 2.83, 32K 2.94 / 2.54, 64K 2.57 / 2.18; bf16 2K
// 3.28 / 2.68, 4K 3.28 / 2.25, 16K 2.86 / 1.63, 64K 2.37 / 1.08.
//
// Few rows: prefetch_row and cluster_row spread a row of up to 128K columns over up to 8 SMs
// in one read, so few rows only change the strategy beyond 128K columns, where split_row sizes
// its parts to fill every SM (one row of 2^28 runs on all of them). 16-byte vectors are used
// when x, y (and the mask) are 16-byte aligned and cols is a multiple of the vector width, so
// every row starts aligned; otherwise each strategy runs its scalar variant (kVec = 1), and
// prefetch_row, which needs vectors, is not used.
//
// SOFTMAX_CUDA_STRATEGY=warp|prefetch|cluster|split (read once per process) forces a strategy
// wherever it can serve the shape, for tests and tuning sweeps; SOFTMAX_CUDA_PREFETCH_THREADS
// caps prefetch_row's block size (a power of two, 32..512), trading block size for cluster size;
// SOFTMAX_CUDA_PREFETCH_STAGES picks its ring (0: cp.async; 2..8: bulk copies that deep).
#include "backends/cuda/softmax_launcher.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

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

// prefetch_row from these lengths up (exclusive): below, cluster_row's single small blocks
// already run near the copy rate. 16-bit rows hold half the bytes per element in flight, so
// they profit from prefetching sooner.
int64_t prefetch_min_cols(softmax_dtype t) { return t == SOFTMAX_DTYPE_F32 ? 4096 : 1024; }

// prefetch_row's ring and block size, from the strategy sweep (bench/strategy_sweep.sh, H200,
// bench/RESULTS.md): softmax fills its ring with bulk copies, 3 deep (fp32 16K: 3.40 TB/s
// against 2.98 with cp.async, 32K 2.94 against 2.45; bf16 4K 3.28 against 3.09). Dropout does
// better with per-thread cp.async (fp32 16K 2.52 against 2.34), and so do 16-bit rows past 32K
// columns on 256-thread blocks (bf16 64K 2.37 against 2.11 with bulk copies on 512).
struct PrefetchPlan {
  int max_threads;
  int bulk_stages;  // 0: cp.async ring, kPrefetchStages deep
};
PrefetchPlan prefetch_plan(const LaunchArgs& a) {
  if (a.dropout) return {kPrefetchMaxThreads, 0};
  if (a.dtype != SOFTMAX_DTYPE_F32 && a.cols > 32768) return {256, 0};
  return {kPrefetchMaxThreads, 3};
}

struct PrefetchShape {
  int cluster = 0, threads = 0;  // cluster == 0: the row does not fit
};

// The fewest blocks whose slices fit max_threads x 32 elements, then the fewest threads (whole
// warps) that hold the slice.
PrefetchShape prefetch_shape(int64_t cols, int64_t vec, int max_threads) {
  const int64_t per_block = int64_t{max_threads} * kPrefetchElemsPerThread;
  int cluster = 1;
  while (cluster < kClusterMaxSize && (cols + cluster - 1) / cluster > per_block) cluster *= 2;
  const int64_t slice = ((cols + cluster - 1) / cluster + vec - 1) / vec * vec;
  if (slice > per_block) return {};
  const int64_t threads = (slice + kPrefetchElemsPerThread - 1) / kPrefetchElemsPerThread;
  return {cluster, static_cast<int>((threads + 31) / 32 * 32)};
}

enum class Forced { None, Warp, Prefetch, Cluster, Split };

struct Overrides {
  Forced strategy = Forced::None;
  int prefetch_threads = 0;  // 0: the table's choice
  int bulk_stages = -1;      // -1: the table's choice; 0: cp.async; > 0: bulk copies, that deep
};

const Overrides& overrides() {
  static const Overrides o = [] {
    Overrides r;
    if (const char* s = std::getenv("SOFTMAX_CUDA_STRATEGY"); s && *s) {
      if (!std::strcmp(s, "warp")) r.strategy = Forced::Warp;
      if (!std::strcmp(s, "prefetch")) r.strategy = Forced::Prefetch;
      if (!std::strcmp(s, "cluster")) r.strategy = Forced::Cluster;
      if (!std::strcmp(s, "split")) r.strategy = Forced::Split;
    }
    if (const char* s = std::getenv("SOFTMAX_CUDA_PREFETCH_THREADS"); s && *s) {
      const int t = std::atoi(s);
      if (t >= 32 && t <= kPrefetchMaxThreads && (t & (t - 1)) == 0) r.prefetch_threads = t;
    }
    if (const char* s = std::getenv("SOFTMAX_CUDA_PREFETCH_STAGES"); s && *s) {
      const int n = std::atoi(s);
      if (n >= 0 && n <= kPrefetchMaxStages && n != 1) r.bulk_stages = n;
    }
    return r;
  }();
  return o;
}

}  // namespace

Outcome launch_softmax(LaunchArgs a) {
  const int64_t vec = vector_width(a.dtype);
  const uint8_t* mask = a.dropout ? a.ep.keep_mask : nullptr;
  a.vector_ok = a.cols % vec == 0 && aligned(a.x, 16) && aligned(a.y, 16) &&
                (mask == nullptr || aligned(mask, static_cast<uintptr_t>(vec)));

  const Overrides& o = overrides();
  const Forced forced = o.strategy;
  const bool clusters = a.limits->cluster_launch;

  // Forcing split_row leaves short rows to warp_per_row: split_row is built for long rows.
  if (a.cols <= kWarpRowMaxCols && forced != Forced::Prefetch && forced != Forced::Cluster)
    return launch_warp_per_row(a);

  const bool prefetch_wanted = forced == Forced::Prefetch ||
                               (forced == Forced::None && a.cols > prefetch_min_cols(a.dtype));
  if (a.vector_ok && prefetch_wanted && a.cols <= kPrefetchRowMaxCols) {
    const PrefetchPlan plan = prefetch_plan(a);
    const PrefetchShape p = prefetch_shape(a.cols, vec, o.prefetch_threads > 0 ? o.prefetch_threads : plan.max_threads);
    const int stages = o.bulk_stages >= 0 ? o.bulk_stages : plan.bulk_stages;
    // The shallowest ring it may run with must fit a block's shared memory (1 KB left for the
    // static arrays). Always true on sm_90 parts (227 KB; the largest ring here takes 192 KB).
    const int64_t stage_bytes = int64_t{p.threads} * kPrefetchElemsPerThread * (a.dtype == SOFTMAX_DTYPE_F32 ? 4 : 2);
    const bool fits = stage_bytes * (stages > 0 ? 2 : kPrefetchStages) <= a.limits->max_smem_per_block_optin - 1024;
    if (fits && (p.cluster == 1 || (p.cluster > 1 && clusters)))
      return launch_prefetch_row(a, p.cluster, p.threads, stages);
  }

  if (a.cols <= kClusterRowMaxCols && forced != Forced::Split) {
    const ClusterShape c = cluster_shape(a.cols, a.vector_ok ? vec : 1, a.vector_ok, a.dropout);
    if (c.cluster == 1 || (c.cluster > 1 && clusters))
      return launch_cluster_row(a, c.cluster, c.threads, c.elems_per_thread);
  }
  return launch_split_row(a);
}

}  // namespace softmax_internal
