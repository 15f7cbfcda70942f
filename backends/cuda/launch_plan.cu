// SPDX-License-Identifier: Apache-2.0
#include "backends/cuda/launch_plan.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace softmax_internal {
namespace {

enum class Forced { None, Segment, Block, Cluster, Split };

struct Overrides {
  Forced strategy = Forced::None;
  int max_threads = 1024;
  int max_cluster = 0;  // SOFTMAX_CUDA_MAX_CLUSTER; 0: not set
};

// The largest cluster of small blocks (SmallBlockClusters) and of a forced cluster plan without
// SOFTMAX_CUDA_MAX_CLUSTER: the portable size. Only rows that no cluster of eight holds take 16.
constexpr int kPortableCluster = 8;

const Overrides& overrides() {
  static const Overrides o = [] {
    Overrides r;
    if (const char* s = std::getenv("SOFTMAX_CUDA_STRATEGY"); s && *s) {
      if (!std::strcmp(s, "segment")) r.strategy = Forced::Segment;
      if (!std::strcmp(s, "block")) r.strategy = Forced::Block;
      if (!std::strcmp(s, "cluster")) r.strategy = Forced::Cluster;
      if (!std::strcmp(s, "split")) r.strategy = Forced::Split;
    }
    if (const char* s = std::getenv("SOFTMAX_CUDA_MAX_THREADS"); s && *s) {
      const int t = std::atoi(s);
      if (t >= 32 && t <= 1024 && t % 32 == 0) r.max_threads = t;
    }
    if (const char* s = std::getenv("SOFTMAX_CUDA_MAX_CLUSTER"); s && *s) {
      const int c = std::atoi(s);
      if (c >= 1 && c <= 16 && (c & (c - 1)) == 0) r.max_cluster = c;  // 1: the path of GPUs without clusters
    }
    return r;
  }();
  return o;
}

int pow2_at_least(int64_t n) {
  int p = 1;
  while (p < n) p <<= 1;
  return p;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int round_up32(int64_t n) { return int((n + 31) / 32 * 32); }

// The segment shape whose lanes hold the fewest chunks past the row (the exps and the stage's
// moves of a lane cost the same for chunks past the row as for the row's), on the narrowest
// segment that holds the row; of shapes that hold as many, the one with the most chunks per
// thread that the row fills (each lane then folds more of its row before the shuffles, which
// cost the same per row whatever K is); rows shorter than that K take several rows per lane.
// With K a power of two every K up to the row's chunks holds the same (the power of two at or
// above them), so the largest such K is taken.
bool segment_plan(int64_t chunks, const KernelFamily& f, int max_width, Plan* p) {
  int best = -1, best_width = 0;
  for (int i = 0; i < f.segments; ++i) {
    const int k = f.segment_k[i];
    if (i > 0 && k > chunks) continue;
    const int width = pow2_at_least(ceil_div(chunks, k));
    if (width > max_width) continue;
    if (best < 0 || width * k <= best_width * f.segment_k[best]) {
      best = i;
      best_width = width;
    }
  }
  if (best < 0) return false;
  *p = Plan{Strategy::Segment, f.segment_k[best], f.segment_r[best], best_width, 0, 1};
  return true;
}

// Warps an SM keeps resident of a block kernel launched with `threads` threads: the block
// kernels are compiled for 1024-thread blocks, so they take up to 64 registers, and an SM's
// 65536 registers hold 1024 / threads blocks.
int resident_blocks(int threads) { return 1024 / threads; }
int resident_warps(int threads) { return resident_blocks(threads) * threads / 32; }

// The most narrow blocks per SM beside which block_plan takes a packed wide kernel (16-bit
// softmax rows). On the H200 against the narrow blocks, three to an SM: bf16 8196 columns +5%,
// 8200 +20%, 9216 +6%, 10240 (a tie, 30 warps either way) +3%; ten to an SM (sixteen packed
// blocks of 64 threads), the second pass of exps cost more than the warps gained: 2050 columns
// -48%, 2500 -29%, 3000 -16% (bench/RESULTS.md).
constexpr int kPackedWideNarrowBlocks = 3;

// Whether a block of `wide` threads of the wide kernel is taken over one of `narrow` threads of
// block_k chunks: where it keeps more warps resident per SM, or as many with the narrow blocks at
// most KernelFamily::wide_tie_blocks to an SM. A packed wide kernel (KernelFamily::wide_packed)
// pays for its residency with a second pass of exps: only beside at most kPackedWideNarrowBlocks
// narrow blocks an SM.
bool wide_block_wins(int wide, int narrow, const KernelFamily& f) {
  const int narrow_blocks = resident_blocks(narrow);
  if (f.wide_packed && narrow_blocks > kPackedWideNarrowBlocks) return false;
  const int wide_warps = resident_warps(wide), narrow_warps = resident_warps(narrow);
  return wide_warps > narrow_warps || (wide_warps == narrow_warps && narrow_blocks <= f.wide_tie_blocks);
}

// One warp of warp_k chunks per thread for a row that it holds past one warp of block_k (bf16
// rows of 1100 / 1200 / 1500 columns on the H200: 2.1 / 2.7 / 2.8 TB/s in two warps of four
// chunks, 2.5 / 3.6 / 3.1 in one warp of six). Else one block of trim_k chunks per thread where
// that holds the row in as many threads as block_k (KernelFamily::trim_k), or of block_k, or of
// wide_k when the row needs more or when the wide block keeps more warps resident per SM: a row
// of 1025 chunks takes 288 threads of four chunks (three blocks, 27 warps per SM) or 160 of eight
// (six blocks, 30 warps). Rows that fall just past a multiple of a warp's chunks ran 4-11% faster
// so on the H200 (f32 4097-6000 columns), those that fill their warps alike either way (ties and
// packed kernels: wide_block_wins).
bool block_plan(int64_t chunks, const KernelFamily& f, int max_threads, Plan* p) {
  if (f.warp_k > 0 && chunks > 32 * f.block_k && chunks <= 32 * f.warp_k) {
    *p = Plan{Strategy::Block, f.warp_k, 1, 32, 32, 1};
    return true;
  }
  // The wide kernel never needs more threads than the narrow one.
  const int narrow = round_up32(ceil_div(chunks, f.block_k)), wide = round_up32(ceil_div(chunks, f.wide_k));
  if (narrow <= max_threads) {
    const bool trim = f.trim_k > 0 && round_up32(ceil_div(chunks, f.trim_k)) == narrow;
    *p = Plan{Strategy::Block, trim ? f.trim_k : f.block_k, 1, 32, narrow, 1};
    if (trim || !wide_block_wins(wide, narrow, f)) return true;
  } else if (wide > max_threads) {
    return false;
  }
  *p = Plan{Strategy::Block, f.wide_k, 1, 32, wide, 1};
  return true;
}

// The smallest cluster (at least `min_cluster` blocks of wide_k chunks per thread) whose blocks
// hold the row.
bool cluster_plan(int64_t chunks, const KernelFamily& f, int max_threads, int max_cluster, int min_cluster,
                  Plan* p) {
  for (int c = min_cluster; c <= max_cluster; c *= 2) {
    const int64_t threads = round_up32(ceil_div(ceil_div(chunks, c), f.wide_k));
    if (threads <= max_threads) {
      *p = Plan{Strategy::Cluster, f.wide_k, 1, 32, int(threads), c};
      return true;
    }
  }
  return false;
}

// The family's cluster of small blocks (KernelFamily::cluster_block_threads) for a row whose
// block (`block` threads, 0 where no one block holds the row) would fit at most
// cluster_block_residency to an SM, when a cluster of such small blocks holds it; with
// cluster_for_warps, for a row that no one block holds, when the small blocks keep more warps
// resident than the cluster of blocks of up to `max_threads`.
bool small_block_cluster_plan(int64_t chunks, const KernelFamily& f, int block, int max_threads, int max_cluster,
                              Plan* p) {
  const int t = std::min(f.cluster_block_threads, max_threads);
  if (t == 0 || max_cluster < 2) return false;
  if (f.cluster_for_warps) {
    Plan small, large;
    if (block > 0 || !cluster_plan(chunks, f, t, max_cluster, 2, &small)) return false;
    if (cluster_plan(chunks, f, max_threads, max_cluster, 2, &large) &&
        resident_warps(small.threads) <= resident_warps(large.threads))
      return false;
    *p = small;
    return true;
  }
  if (block > 0 && resident_blocks(block) > f.cluster_block_residency) return false;
  return cluster_plan(chunks, f, t, max_cluster, 2, p);
}

}  // namespace

KernelFamily kernel_family(int chunk_elems, int arrays, bool full, bool wide_first, int wide_k, int segment_chunks,
                           int max_cluster, SmallBlockClusters small, int wide_tie_blocks, int trim_k,
                           bool segment_three) {
  const int kmax = max_chunks(chunk_elems, arrays);
  KernelFamily f{};
  for (int k = 1; k <= kmax; k *= 2) {
    if (!full && k != 1 && k != kmax) continue;
    if (segment_three && k == 4) {
      f.segment_k[f.segments] = 3;
      f.segment_r[f.segments] = segment_rows(3, segment_chunks);
      ++f.segments;
    }
    f.segment_k[f.segments] = k;
    f.segment_r[f.segments] = segment_rows(k, segment_chunks);
    ++f.segments;
  }
  f.wide_k = wide_k;
  f.block_k = wide_first ? f.wide_k : kmax;
  f.segment_width = chunk_elems == 8 && arrays == 1 ? 16 : 32;
  f.cluster_block_threads = small == SmallBlockClusters::None ? 0 : 256;
  f.cluster_block_residency = small == SmallBlockClusters::PairedBlocks ? 2 : 1;
  f.cluster_for_warps = small == SmallBlockClusters::MoreWarps;
  f.block_threads = arrays == 1 && (wide_first || wide_k > kmax) ? 512 : 1024;
  f.max_cluster = max_cluster;
  f.wide_packed = chunk_elems == 8 && arrays == 1 && wide_k > kmax;
  f.wide_tie_blocks = wide_tie_blocks;
  f.warp_k = warp_chunks(chunk_elems, arrays, f.wide_packed);
  f.trim_k = trim_k;
  return f;
}

Outcome make_plan(int64_t cols, int chunk_elems, const KernelFamily& family, const DeviceLimits& dev, Plan* out) {
  const Overrides& o = overrides();
  // The register plans count lanes and threads in int: rows past 2^30 chunks, which no register
  // plan holds (a cluster holds at most 16 x 1024 threads of eight chunks), plan as 2^30 would.
  const int64_t chunks = std::min(ceil_div(cols, chunk_elems), int64_t{1} << 30);
  const int max_threads = o.max_threads;
  // Clusters need sm_90; 16 blocks need a non-portable launch (which the launch code requests)
  // and a GPU that keeps such clusters resident.
  const int device_cluster = !dev.cluster_launch ? 1 : dev.large_clusters ? 16 : kPortableCluster;
  const int max_cluster = o.max_cluster > 0 ? std::min(o.max_cluster, device_cluster) : device_cluster;
  Plan p;
  auto refuse = [&](const char* why) {
    return Outcome::fail(SOFTMAX_STATUS_INTERNAL_ERROR,
                         std::string("SOFTMAX_CUDA_STRATEGY forces a strategy that cannot run rows of ") +
                             std::to_string(cols) + " columns: " + why);
  };
  switch (o.strategy) {
    case Forced::Segment:
      if (!segment_plan(chunks, family, 32, &p)) return refuse("the row does not fit in one warp's registers");
      break;
    case Forced::Block:
      if (!block_plan(chunks, family, max_threads, &p)) return refuse("the row does not fit in one block's registers");
      break;
    case Forced::Cluster:
      if (max_cluster < 2) return refuse("this device has no thread-block clusters");
      if (!cluster_plan(chunks, family, max_threads, o.max_cluster > 0 ? max_cluster : kPortableCluster, 2, &p))
        return refuse("the row does not fit in one cluster's registers");
      break;
    case Forced::Split: p = Plan{}; break;
    case Forced::None: {
      const int threads = std::min(max_threads, family.block_threads);
      const int cluster = std::min(max_cluster, family.max_cluster);
      if (segment_plan(chunks, family, family.segment_width, &p)) break;
      Plan block;
      const bool one_block = block_plan(chunks, family, threads, &block);
      if (small_block_cluster_plan(chunks, family, one_block ? block.threads : 0, threads,
                                   std::min(cluster, kPortableCluster), &p))
        break;
      if (one_block) {
        p = block;
      } else if (!(cluster >= 2 && cluster_plan(chunks, family, threads, cluster, 2, &p))) {
        p = Plan{};
      }
      break;
    }
  }
  *out = p;
  return Outcome::ok();
}

const char* resident_split_shape(int64_t tiles, int tiles_per_part, int64_t resident, int64_t rows,
                                 ResidentShape* out) {
  const int64_t parts = ceil_div(tiles, tiles_per_part);
  if (parts > resident) return "its parts outnumber the resident blocks";
  const int64_t groups = std::min(resident / parts, rows);
  if ((ceil_div(rows, groups) + 1) * parts >= (int64_t{1} << 32)) return "too many rows for the arrival counters";
  *out = ResidentShape{parts, groups};
  return nullptr;
}

int64_t split_piece_tiles(int64_t part_tiles, int64_t rows, int64_t parts, int64_t stats_blocks, int64_t resident) {
  const int64_t norm_parts = rows * parts;
  if (part_tiles <= 1 || norm_parts <= 0 || stats_blocks + 2 * norm_parts > resident) return part_tiles;
  const int64_t pieces = std::min(part_tiles, (resident - stats_blocks) / norm_parts);
  return ceil_div(part_tiles, pieces);
}

}  // namespace softmax_internal
