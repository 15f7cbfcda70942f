// SPDX-License-Identifier: Apache-2.0
// The CUDA strategy table on the host (no GPU needed): for every kernel family the launchers
// build and every row length, the default plan holds the row within the launch limits and asks
// only for kernel shapes the family instantiates (kernel_launch.cuh refuses any other shape at
// run time, which only a GPU run would show).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <ostream>
#include <string>
#include <vector>

#include "backends/cuda/launch_plan.h"

namespace softmax_internal {
namespace {

struct FamilyCase {
  const char* name;
  int chunk_elems;
  int arrays;
  bool full;
  bool wide_first;
  bool packed16;  // softmax rows: 16-bit ones in a wide block kernel that holds them packed
  int segment_chunks;
  int max_cluster;
  SmallBlockClusters small;
  int wide_tie_blocks;  // KernelFamily::wide_tie_blocks
  bool trim;            // a block kernel of trim_chunks
  bool three = false;   // segments of three chunks
};

void PrintTo(const FamilyCase& f, std::ostream* os) { *os << f.name; }

// The families of forward_launch.cuh, backward_launch.cu and dropout_backward_launch.cu.
const std::vector<FamilyCase>& families() {
  static const std::vector<FamilyCase> f = {
      {"f32 softmax", 4, 1, true, false, true, 4, 16, SmallBlockClusters::None, 2, true, true},
      {"16-bit softmax", 8, 1, true, false, true, 4, 16, SmallBlockClusters::LoneBlocks, 3, true, true},
      {"16-bit x f32 y softmax", 4, 1, true, false, true, 4, 16, SmallBlockClusters::MoreWarps, 4, true},
      {"16-bit statistics", 8, 1, false, false, false, 4, 8, SmallBlockClusters::None, 0, false},
      {"f64 softmax", 2, 1, false, false, true, 4, 8, SmallBlockClusters::None, 0, false},
      {"f32 dropout", 4, 1, true, true, false, 4, 16, SmallBlockClusters::PairedBlocks, 0, false},
      {"16-bit dropout", 8, 1, true, true, false, 2, 16, SmallBlockClusters::None, 0, true},
      {"f32 backward", 4, 2, true, true, false, 2, 4, SmallBlockClusters::None, 0, false},
      {"16-bit backward", 8, 2, true, true, false, 2, 1, SmallBlockClusters::None, 0, false},
      {"mixed backward", 4, 2, false, true, false, 2, 4, SmallBlockClusters::None, 0, false},
      {"f32 dropout backward", 4, 2, true, true, false, 2, 8, SmallBlockClusters::LoneBlocks, 0, false},
      {"16-bit dropout backward", 8, 2, true, true, false, 2, 8, SmallBlockClusters::LoneBlocks, 0, false},
  };
  return f;
}

KernelFamily family_of(const FamilyCase& fc) {
  return kernel_family(fc.chunk_elems, fc.arrays, fc.full, fc.wide_first,
                       wide_chunks(fc.chunk_elems, fc.arrays, fc.packed16), fc.segment_chunks, fc.max_cluster, fc.small,
                       fc.wide_tie_blocks, trim_chunks(fc.chunk_elems, fc.arrays, fc.trim), fc.three);
}

DeviceLimits hopper() {
  DeviceLimits d;
  d.sm_count = 132;
  d.max_threads_per_sm = 2048;
  d.cluster_launch = true;
  d.large_clusters = true;
  return d;
}

// Every length up to 70000 columns, then every 997th up to 2^21 and a few past it.
std::vector<int64_t> lengths() {
  std::vector<int64_t> c;
  for (int64_t n = 1; n <= 70000; ++n) c.push_back(n);
  for (int64_t n = 70001; n <= (int64_t{1} << 21); n += 997) c.push_back(n);
  for (int64_t n : {int64_t{1} << 22, (int64_t{1} << 28) + 3}) c.push_back(n);
  return c;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

class DefaultPlan : public ::testing::TestWithParam<FamilyCase> {
 protected:
  void SetUp() override {
    for (const char* v : {"SOFTMAX_CUDA_STRATEGY", "SOFTMAX_CUDA_MAX_THREADS", "SOFTMAX_CUDA_MAX_CLUSTER"}) {
      if (const char* s = std::getenv(v); s && *s) GTEST_SKIP() << v << " is set: these tests check the default plan";
    }
  }
};

TEST_P(DefaultPlan, HoldsEveryRowWithAnInstantiatedShape) {
  const FamilyCase fc = GetParam();
  const KernelFamily f = family_of(fc);
  const int kmax = max_chunks(fc.chunk_elems, fc.arrays);
  const int kwide = wide_chunks(fc.chunk_elems, fc.arrays, fc.packed16);
  ASSERT_EQ(f.block_k, fc.wide_first ? kwide : kmax);
  ASSERT_EQ(f.wide_k, kwide);
  const DeviceLimits dev = hopper();
  int64_t failures = 0;
  for (int64_t cols : lengths()) {
    Plan p;
    const Outcome o = make_plan(cols, fc.chunk_elems, f, dev, &p);
    ASSERT_TRUE(o.good()) << o.message;
    const int64_t chunks = ceil_div(cols, fc.chunk_elems);
    std::string bad;
    switch (p.strategy) {
      case Strategy::Segment: {
        bool instantiated = false;
        for (int i = 0; i < f.segments; ++i) instantiated |= f.segment_k[i] == p.k && f.segment_r[i] == p.r;
        if (!instantiated) bad = "segment shape not instantiated";
        if (p.r != segment_rows(p.k, fc.segment_chunks)) bad = "rows per lane not the family's";
        if (p.width < 1 || p.width > 32 || (p.width & (p.width - 1)) != 0) bad = "segment width";
        if (int64_t{p.width} * p.k < chunks) bad = "segment does not hold the row";
        if (p.width > 1 && int64_t{p.width / 2} * p.k >= chunks) bad = "segment wider than needed";
        break;
      }
      case Strategy::Block:
      case Strategy::Cluster: {
        if (p.k != f.block_k && p.k != f.wide_k && p.k != f.warp_k && p.k != f.trim_k)
          bad = "no block kernel of that many chunks";
        if (p.k == f.warp_k && p.threads != 32) bad = "the one-warp kernel in a larger block";
        if (fc.wide_first && p.k != kwide && p.k != f.trim_k) bad = "wide_first family planned a narrow block";
        if (p.threads < 32 || p.threads > f.block_threads || p.threads % 32 != 0) bad = "block threads";
        if (p.cluster < 1 || p.cluster > f.max_cluster || (p.cluster & (p.cluster - 1)) != 0) bad = "cluster size";
        if (p.strategy == Strategy::Block && p.cluster != 1) bad = "block with a cluster";
        if (int64_t{p.threads} * p.k * p.cluster < chunks) bad = "blocks do not hold the row";
        if (int64_t{p.threads - 32} * p.k * p.cluster >= chunks) bad = "more warps than the row needs";
        break;
      }
      case Strategy::Split:
        if (chunks <= int64_t{f.max_cluster} * f.block_threads * kwide) bad = "split a row that a cluster holds";
        break;
    }
    if (!bad.empty() && ++failures <= 10) {
      ADD_FAILURE() << fc.name << ", " << cols << " columns: " << bad << " (strategy " << strategy_name(p.strategy)
                    << ", k " << p.k << ", r " << p.r << ", width " << p.width << ", threads " << p.threads
                    << ", cluster " << p.cluster << ")";
    }
  }
  EXPECT_EQ(failures, 0);
}

// Warps an SM keeps of a 64-register block of `threads` threads (65536 registers).
int warps_per_sm(int threads) { return 65536 / (64 * threads) * threads / 32; }

// Where both block kernels hold a row, the plan takes the narrow one trimmed to trim_k chunks a
// thread where that holds the row in as many threads, else the one that keeps more warps resident
// (on a tie the narrow one, but the wide one where the narrow blocks fit at most the family's
// wide_tie_blocks to an SM): rows just past a multiple of a warp's chunks (4097 f32 columns: 1025
// chunks) would otherwise run a nearly empty last warp in fewer blocks per SM. A packed wide
// kernel (16-bit softmax rows) is taken so only where the narrow blocks fit at most three to an SM.
TEST_P(DefaultPlan, BlockKernelKeepsTheMostWarpsResident) {
  const FamilyCase fc = GetParam();
  const KernelFamily f = family_of(fc);
  const DeviceLimits dev = hopper();
  int64_t failures = 0, wide_chosen = 0;
  for (int64_t cols : lengths()) {
    Plan p;
    ASSERT_TRUE(make_plan(cols, fc.chunk_elems, f, dev, &p).good());
    if (p.strategy != Strategy::Block) continue;
    const int64_t chunks = ceil_div(cols, fc.chunk_elems);
    if (f.warp_k > 0 && chunks > 32 * f.block_k && chunks <= 32 * f.warp_k) continue;  // one warp, below
    const int64_t narrow_threads = ceil_div(ceil_div(chunks, f.block_k), 32) * 32;
    int narrow_k = f.block_k;
    const bool trimmed = f.trim_k > 0 && ceil_div(ceil_div(chunks, f.trim_k), 32) * 32 == narrow_threads;
    if (trimmed) narrow_k = f.trim_k;
    const int64_t wide_threads = ceil_div(ceil_div(chunks, f.wide_k), 32) * 32;
    const bool packed_wide = fc.packed16 && fc.chunk_elems == 8 && f.wide_k != f.block_k;
    EXPECT_EQ(f.wide_packed, packed_wide) << fc.name;
    int want = narrow_k;
    const int wide_warps = warps_per_sm(int(wide_threads)), narrow_warps = warps_per_sm(int(narrow_threads));
    const int64_t narrow_blocks = 1024 / narrow_threads;
    const bool takes_wide =
        wide_warps > narrow_warps || (wide_warps == narrow_warps && narrow_blocks <= fc.wide_tie_blocks);
    EXPECT_EQ(f.wide_tie_blocks, fc.wide_tie_blocks) << fc.name;
    if (narrow_threads > f.block_threads || (!trimmed && takes_wide && (!packed_wide || narrow_blocks <= 3)))
      want = f.wide_k;
    wide_chosen += p.k == f.wide_k && f.wide_k != f.block_k;
    if (p.k != want && ++failures <= 10) {
      ADD_FAILURE() << fc.name << ", " << cols << " columns: block of " << p.k << " chunks per thread, expected "
                    << want;
    }
  }
  EXPECT_EQ(failures, 0);
  if (f.wide_k != f.block_k) EXPECT_GT(wide_chosen, 0) << fc.name << ": the wide block kernel never planned";
}

// Sixteen-bit dropout segments hold two chunks of rows per lane (one row of four chunks
// excepted); every other family's segments hold max_chunks, but for segments of three chunks,
// which hold one row.
TEST_P(DefaultPlan, SegmentShapesHoldTheFamilysChunksOfRows) {
  const FamilyCase fc = GetParam();
  const KernelFamily f = family_of(fc);
  const int kmax = max_chunks(fc.chunk_elems, fc.arrays);
  ASSERT_GE(f.segments, 2);
  EXPECT_EQ(f.segment_k[0], 1);
  EXPECT_EQ(f.segment_k[f.segments - 1], kmax);
  int threes = 0;
  for (int i = 0; i < f.segments; ++i) {
    const int k = f.segment_k[i], r = f.segment_r[i];
    if (i > 0) EXPECT_GT(k, f.segment_k[i - 1]) << fc.name << ": segment shapes in increasing K";
    if (k == 3) {
      ++threes;
      EXPECT_EQ(r, 1) << fc.name;
      continue;
    }
    EXPECT_EQ(k & (k - 1), 0) << fc.name << ": K " << k;
    EXPECT_EQ(k < fc.segment_chunks ? k * r : r, k < fc.segment_chunks ? fc.segment_chunks : 1)
        << fc.name << ": K " << k << " R " << r;
  }
  EXPECT_EQ(threes, fc.three ? 1 : 0) << fc.name;
}

// A segment plan holds the fewest chunks a segment (K x width) of any shape of the family, and of
// shapes that hold as many, has the largest K: without segments of three that is the largest
// power of two up to the row's chunks; with them, rows of 9 chunks (33-36 f32 columns, 65-72
// 16-bit ones) take four lanes of three (12 chunks, not 16), rows of 5-6 chunks two lanes of
// three, rows of 7-8 two lanes of four.
TEST_P(DefaultPlan, SegmentsHoldTheFewestChunksPastTheRow) {
  const FamilyCase fc = GetParam();
  const KernelFamily f = family_of(fc);
  const DeviceLimits dev = hopper();
  int64_t three_planned = 0;
  for (int64_t cols = 1; cols <= 32 * 4 * fc.chunk_elems; ++cols) {
    Plan p;
    ASSERT_TRUE(make_plan(cols, fc.chunk_elems, f, dev, &p).good());
    if (p.strategy != Strategy::Segment) continue;
    const int64_t chunks = ceil_div(cols, fc.chunk_elems);
    for (int i = 0; i < f.segments; ++i) {
      const int k = f.segment_k[i];
      if (i > 0 && k > chunks) continue;
      int64_t w = 1;
      while (w * k < chunks) w *= 2;
      if (w > f.segment_width) continue;
      EXPECT_TRUE(w * k > int64_t{p.width} * p.k || (w * k == int64_t{p.width} * p.k && k <= p.k))
          << fc.name << ", " << cols << " columns: K " << k << " x " << w << " lanes beats the plan's K " << p.k
          << " x " << p.width;
    }
    if (!fc.three) {
      int i = f.segments - 1;
      while (i > 0 && f.segment_k[i] > chunks) --i;
      EXPECT_EQ(p.k, f.segment_k[i]) << fc.name << ", " << cols << " columns";
    }
    three_planned += p.k == 3;
  }
  if (fc.three) {
    EXPECT_GT(three_planned, 0) << fc.name;
    Plan p;
    ASSERT_TRUE(make_plan(8 * fc.chunk_elems + 1, fc.chunk_elems, f, dev, &p).good());
    EXPECT_EQ(p.k * 10 + p.width, 34) << fc.name << ": nine chunks";
  }
}

// Warps an SM keeps resident of a register kernel's blocks of `threads` (64 registers a thread).
int resident_warps(int64_t threads) { return int(1024 / threads * threads / 32); }

// The threads of the smallest cluster (up to eight blocks) of at most `most_threads` threads a
// block, wide_k chunks a thread, that holds a row of `chunks` chunks; 0 if none does.
int64_t cluster_threads(int64_t chunks, const KernelFamily& f, int64_t most_threads) {
  for (int64_t c = 2; c <= 8; c *= 2) {
    const int64_t t = ceil_div(ceil_div(ceil_div(chunks, c), f.wide_k), 32) * 32;
    if (t <= most_threads) return t;
  }
  return 0;
}

// Rows whose block would share its SM with at most one other (f32 softmax_dropout) or with none
// (the dropout backward, 16-bit softmax rows), or that no one block of the family holds, run as
// clusters of blocks of up to 256 threads where up to eight such blocks hold them; 16-bit x with
// f32 y softmax rows only where no one block holds them and the small blocks keep more warps
// resident than the cluster of the family's blocks; every other family keeps its blocks.
TEST_P(DefaultPlan, RowsOfLargeBlocksRunAsClustersOfSmallOnes) {
  const FamilyCase fc = GetParam();
  const KernelFamily f = family_of(fc);
  const bool small = fc.small != SmallBlockClusters::None;
  EXPECT_EQ(f.cluster_block_threads, small ? 256 : 0) << fc.name;
  EXPECT_EQ(f.cluster_for_warps, fc.small == SmallBlockClusters::MoreWarps) << fc.name;
  const int most = 8;
  const int residency = fc.small == SmallBlockClusters::PairedBlocks ? 2 : 1;
  int64_t clusters = 0;
  for (int64_t cols : lengths()) {
    Plan p;
    ASSERT_TRUE(make_plan(cols, fc.chunk_elems, f, hopper(), &p).good());
    const int64_t chunks = ceil_div(cols, fc.chunk_elems);
    if (fc.small == SmallBlockClusters::MoreWarps) {
      if (p.strategy != Strategy::Cluster || p.cluster > 8) continue;  // 16: SixteenBlocksOnlyPastEight
      const int64_t small_threads = cluster_threads(chunks, f, 256);
      const int64_t large_threads = cluster_threads(chunks, f, f.block_threads);
      const bool more = small_threads > 0 && (large_threads == 0 || resident_warps(small_threads) >
                                                                        resident_warps(large_threads));
      ASSERT_EQ(p.threads, more ? small_threads : large_threads) << fc.name << ", " << cols << " columns";
      clusters += more;
      continue;
    }
    const bool small_ones_hold = small && chunks <= int64_t{most} * 256 * f.wide_k;
    if (p.strategy == Strategy::Block) {
      if (small_ones_hold) ASSERT_GT(1024 / p.threads, residency) << fc.name << ", " << cols << " columns";
    } else if (p.strategy == Strategy::Cluster && p.threads <= 256 && small) {
      ++clusters;
      ASSERT_LE(p.cluster, most) << fc.name << ", " << cols << " columns";
      ASSERT_EQ(p.k, f.wide_k) << fc.name << ", " << cols << " columns";
    } else if (p.strategy == Strategy::Cluster) {
      ASSERT_FALSE(small_ones_hold) << fc.name << ", " << cols << " columns: a cluster of " << p.threads
                                    << "-thread blocks";
    }
  }
  EXPECT_EQ(clusters > 0, small) << fc.name;
}

// Examples of the rule above: f32 dropout rows of 8196 columns keep 288-thread blocks (three to
// an SM), 12000 take two of 192 threads (one block would be 384) and 49152 eight of 192; f32
// dropout backward rows of 8192 columns keep 512-thread blocks (two to an SM) and 10240 take four
// of 160 threads; 16-bit softmax rows of 32768 columns keep one 512-thread block and 49152 take
// four of 192 threads; 16-bit x with f32 y rows of 24576 columns take four blocks of 192 threads
// (30 warps an SM) instead of two of 384 (24), 20480 keep two of 320 (30 warps either way).
TEST(DefaultPlanExamples, ClustersOfSmallBlocks) {
  const struct {
    const char* family;
    int64_t cols;
    Strategy strategy;
    int threads, cluster;
  } cases[] = {{"f32 dropout", 8196, Strategy::Block, 288, 1},
               {"f32 dropout", 12000, Strategy::Cluster, 192, 2},
               {"f32 dropout", 49152, Strategy::Cluster, 192, 8},
               {"f32 dropout backward", 8192, Strategy::Block, 512, 1},
               {"f32 dropout backward", 10240, Strategy::Cluster, 160, 4},
               {"16-bit softmax", 32768, Strategy::Block, 512, 1},
               {"16-bit softmax", 49152, Strategy::Cluster, 192, 4},
               {"16-bit x f32 y softmax", 16384, Strategy::Block, 512, 1},
               {"16-bit x f32 y softmax", 20480, Strategy::Cluster, 320, 2},
               {"16-bit x f32 y softmax", 24576, Strategy::Cluster, 192, 4},
               {"16-bit x f32 y softmax", 32768, Strategy::Cluster, 512, 2},
               {"16-bit x f32 y softmax", 49152, Strategy::Cluster, 192, 8},
               {"16-bit x f32 y softmax", 65536, Strategy::Cluster, 512, 4}};
  for (const auto& c : cases) {
    const auto fc = std::find_if(families().begin(), families().end(),
                                 [&](const FamilyCase& f) { return std::string(f.name) == c.family; });
    ASSERT_NE(fc, families().end()) << c.family;
    Plan p;
    ASSERT_TRUE(make_plan(c.cols, fc->chunk_elems, family_of(*fc), hopper(), &p).good());
    EXPECT_EQ(p.strategy, c.strategy) << c.family << ", " << c.cols;
    EXPECT_EQ(p.threads, c.threads) << c.family << ", " << c.cols;
    EXPECT_EQ(p.cluster, c.cluster) << c.family << ", " << c.cols;
  }
}

// Forward families of f32 chunks, the 16-bit softmax (whose wide kernel holds 32K columns in
// 512 threads) and dropout give a block at most 512 threads, the 16-bit statistics and the
// backward families up to 1024.
TEST_P(DefaultPlan, BlockThreadsOfTheFamily) {
  const FamilyCase fc = GetParam();
  const KernelFamily f = family_of(fc);
  const std::string n = fc.name;
  const bool capped = n == "f32 softmax" || n == "16-bit softmax" || n == "16-bit x f32 y softmax" ||
                      n == "f32 dropout" || n == "16-bit dropout";
  EXPECT_EQ(f.block_threads, capped ? 512 : 1024) << n;
  int64_t widest = 0;
  for (int64_t cols : lengths()) {
    Plan p;
    ASSERT_TRUE(make_plan(cols, fc.chunk_elems, f, hopper(), &p).good());
    if (p.strategy == Strategy::Block || p.strategy == Strategy::Cluster) widest = std::max<int64_t>(widest, p.threads);
  }
  EXPECT_EQ(widest, f.block_threads) << n;
}

// Rows past the family's largest cluster run as split rows: no clusters for 16-bit backward rows,
// up to four blocks for the f32 and mixed backward, eight for the statistics and the f64 and
// dropout backward families, sixteen for the full forward families. A GPU that cannot keep
// clusters of 16 resident stops every family at eight.
TEST_P(DefaultPlan, ClustersUpToTheFamilysLargest) {
  const FamilyCase fc = GetParam();
  const KernelFamily f = family_of(fc);
  EXPECT_EQ(f.max_cluster, fc.max_cluster);
  DeviceLimits portable = hopper();
  portable.large_clusters = false;
  for (const DeviceLimits& dev : {hopper(), portable}) {
    const int most = dev.large_clusters ? fc.max_cluster : std::min(fc.max_cluster, 8);
    int largest = 0;
    bool split = false;
    for (int64_t cols : lengths()) {
      Plan p;
      ASSERT_TRUE(make_plan(cols, fc.chunk_elems, f, dev, &p).good());
      if (p.strategy == Strategy::Cluster) largest = std::max(largest, p.cluster);
      if (p.strategy == Strategy::Split && ceil_div(cols, fc.chunk_elems) <= int64_t{most} * f.block_threads * f.wide_k)
        ADD_FAILURE() << fc.name << ", " << cols << " columns: split rows that a cluster of " << most << " holds";
      split |= p.strategy == Strategy::Split;
    }
    EXPECT_EQ(largest, most == 1 ? 0 : most) << fc.name << (dev.large_clusters ? "" : ", clusters of 8 at most");
    EXPECT_TRUE(split) << fc.name;
  }
}

// Clusters of 16 blocks hold only rows that no cluster of eight of the family's blocks holds;
// clusters of small blocks stay at eight blocks (RowsOfLargeBlocksRunAsClustersOfSmallOnes).
TEST_P(DefaultPlan, SixteenBlocksOnlyPastEight) {
  const FamilyCase fc = GetParam();
  const KernelFamily f = family_of(fc);
  int64_t sixteen = 0;
  for (int64_t cols : lengths()) {
    Plan p;
    ASSERT_TRUE(make_plan(cols, fc.chunk_elems, f, hopper(), &p).good());
    const int64_t chunks = ceil_div(cols, fc.chunk_elems);
    const int64_t eight = int64_t{8} * f.block_threads * f.wide_k;
    const bool past_eight = chunks > eight && chunks <= 2 * eight;
    if (p.strategy == Strategy::Cluster && p.cluster == 16) {
      ++sixteen;
      ASSERT_TRUE(past_eight) << fc.name << ", " << cols << " columns";
      ASSERT_EQ(p.k, f.wide_k) << fc.name << ", " << cols << " columns";
      ASSERT_GT(p.threads, f.block_threads / 2) << fc.name << ", " << cols << " columns";
    } else if (fc.max_cluster == 16) {
      ASSERT_FALSE(past_eight) << fc.name << ", " << cols << " columns: " << strategy_name(p.strategy);
    }
  }
  EXPECT_EQ(sixteen > 0, fc.max_cluster == 16) << fc.name;
}

// Rows just past one warp of block_k chunks run one warp of warp_chunks (16-bit softmax rows of
// 1025-1536 columns: six chunks a thread); other families have no such kernel.
TEST_P(DefaultPlan, OneWarpKernelForRowsJustPastOneWarp) {
  const FamilyCase fc = GetParam();
  const KernelFamily f = family_of(fc);
  EXPECT_EQ(f.warp_k, warp_chunks(fc.chunk_elems, fc.arrays, fc.packed16));
  EXPECT_EQ(f.warp_k, fc.packed16 && fc.chunk_elems == 8 && fc.arrays == 1 ? 6 : 0) << fc.name;
  int64_t warp_rows = 0;
  for (int64_t cols : lengths()) {
    Plan p;
    ASSERT_TRUE(make_plan(cols, fc.chunk_elems, f, hopper(), &p).good());
    const int64_t chunks = ceil_div(cols, fc.chunk_elems);
    const bool in_range = f.warp_k > 0 && chunks > 32 * f.block_k && chunks <= 32 * f.warp_k;
    if (in_range) {
      ++warp_rows;
      EXPECT_EQ(p.strategy, Strategy::Block) << fc.name << ", " << cols;
      EXPECT_EQ(p.k, f.warp_k) << fc.name << ", " << cols;
      EXPECT_EQ(p.threads, 32) << fc.name << ", " << cols;
    } else if (f.warp_k > 0) {
      EXPECT_NE(p.k, f.warp_k) << fc.name << ", " << cols;
    }
  }
  EXPECT_EQ(warp_rows, f.warp_k > 0 ? 32 * int64_t(f.warp_k - f.block_k) * fc.chunk_elems : 0) << fc.name;
}

// An f32 row of 4097 columns (1025 chunks) takes the wide kernel's 160 threads for residency, of
// 1025 three warps of three chunks (the wide kernel's 64 threads would keep more warps), of 8192
// its 256 threads (a tie with 512 threads of four chunks, two blocks to an SM), of 5120 the
// narrow kernel's 320 (a tie with 160, three blocks to an SM). 16-bit rows of 640 columns take
// one warp of three chunks, of 1100 or 1536 one warp of six, of 1537 two warps of four, of 2050
// three warps of three, of 4104 five warps of four (six of three would hold fewer chunks in more
// threads), of 8192 the narrow kernel (a tie, four blocks to an SM), of 8196 (three narrow blocks
// to an SM against six) and 12000 (five blocks of 192 threads against two of 384) the packed wide
// one, of 16392 the wide one because the narrow blocks cannot hold it. bf16 x with f32 y takes
// three warps of three chunks at 1100 columns, the wide kernel at 4096 and 8192 (as many warps
// per SM, blocks of 128 and 256 threads) and the narrow one at 2048 (wide blocks of 64 threads)
// and 3072 (192 threads, five blocks to an SM, against 96).
TEST(DefaultPlanExamples, BlockKernelOfOddLengths) {
  const struct {
    int family;  // index in families()
    int64_t cols;
    int k, threads;
  } cases[] = {{0, 4097, 8, 160}, {0, 1025, 3, 96},   {0, 8192, 8, 256},  {0, 5120, 4, 320},
               {1, 640, 3, 32},   {1, 1100, 6, 32},   {1, 1536, 6, 32},   {1, 1537, 4, 64},
               {1, 2050, 3, 96},  {1, 4104, 4, 160},  {1, 8192, 4, 256},  {1, 8196, 8, 160},
               {1, 12000, 8, 192}, {1, 16392, 8, 288}, {2, 1100, 3, 96},  {2, 2048, 4, 128},
               {2, 3072, 4, 192}, {2, 4096, 8, 128},  {2, 8192, 8, 256}};
  for (const auto& c : cases) {
    const FamilyCase& fc = families()[size_t(c.family)];
    Plan p;
    ASSERT_TRUE(make_plan(c.cols, fc.chunk_elems, family_of(fc), hopper(), &p).good());
    EXPECT_EQ(p.strategy, Strategy::Block) << fc.name << ", " << c.cols;
    EXPECT_EQ(p.k, c.k) << fc.name << ", " << c.cols;
    EXPECT_EQ(p.threads, c.threads) << fc.name << ", " << c.cols;
  }
}

// Softmax rows of the full families and 16-bit softmax_dropout rows take one, two or three warps
// of trim_chunks (three) chunks a thread instead of as many warps of four wherever three hold the
// row in as many threads (65-96, 129-192 and 257-288 chunks) and no segment or one-warp kernel
// of six chunks takes it: 16-bit softmax rows of 513-768 and 2049-2304 columns, 16-bit dropout
// also 1025-1536, f32 chunks 513-768 and 1025-1152. Other families have no trimmed kernel.
TEST_P(DefaultPlan, TrimmedBlockForRowsThatLeaveTheLastWarpEmpty) {
  const FamilyCase fc = GetParam();
  const KernelFamily f = family_of(fc);
  EXPECT_EQ(f.trim_k, fc.trim ? 3 : 0) << fc.name;
  int64_t trimmed = 0;
  for (int64_t cols = 1; cols <= 70000; ++cols) {
    Plan p;
    ASSERT_TRUE(make_plan(cols, fc.chunk_elems, f, hopper(), &p).good());
    const int64_t chunks = ceil_div(cols, fc.chunk_elems);
    const bool trim = p.strategy == Strategy::Block && f.trim_k > 0 && p.k == f.trim_k;
    trimmed += trim;
    const bool fits = chunks <= 96 || (chunks > 128 && chunks <= 192) || (chunks > 256 && chunks <= 288);
    const bool block = p.strategy == Strategy::Block && p.k != f.warp_k;
    if (fc.trim) EXPECT_EQ(trim, block && fits) << fc.name << ", " << cols;
    if (trim) EXPECT_EQ(p.threads, chunks <= 96 ? 32 : chunks <= 192 ? 64 : 96) << fc.name << ", " << cols;
  }
  const int64_t expected = !fc.trim ? 0 : fc.chunk_elems == 4 ? 384 : fc.wide_first ? 1024 : 512;
  EXPECT_EQ(trimmed, expected) << fc.name;
}

// Rows far past any register plan (2^33 to 2^62 columns, past the planners' int counts of lanes
// and threads) plan the split like any long row.
TEST(DefaultPlanExamples, RowsPastEveryWidthSplit) {
  for (const FamilyCase& fc : families()) {
    for (int64_t cols : {int64_t{1} << 33, int64_t{1} << 40, int64_t{1} << 62}) {
      Plan p;
      ASSERT_TRUE(make_plan(cols, fc.chunk_elems, family_of(fc), hopper(), &p).good()) << fc.name;
      EXPECT_EQ(p.strategy, Strategy::Split) << fc.name << ", " << cols << " columns";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Families, DefaultPlan, ::testing::ValuesIn(families()),
                         [](const ::testing::TestParamInfo<FamilyCase>& i) {
                           std::string n = i.param.name;
                           for (char& c : n) c = (c == ' ' || c == '-') ? '_' : c;
                           return n;
                         });

// The resident split's grid: groups of a row's parts within the resident blocks, at most one
// group per row, and refusals for rows too long or too many for the arrival counters.
TEST(ResidentSplitShape, GroupsWithinTheResidentBlocks) {
  ResidentShape s;
  // 1M f32 columns: 256 tiles of 4096 columns, four per part; three 256-thread blocks per SM.
  ASSERT_EQ(resident_split_shape(256, 4, 396, 256, &s), nullptr);
  EXPECT_EQ(s.parts, 64);
  EXPECT_EQ(s.groups, 6);
  ASSERT_EQ(resident_split_shape(256, 4, 396, 1, &s), nullptr);
  EXPECT_EQ(s.groups, 1);
  ASSERT_EQ(resident_split_shape(257, 4, 396, 100, &s), nullptr);  // a last part of one tile
  EXPECT_EQ(s.parts, 65);
  EXPECT_EQ(s.groups, 6);
  ASSERT_EQ(resident_split_shape(1584, 4, 396, 3, &s), nullptr);  // parts == resident blocks
  EXPECT_EQ(s.parts, 396);
  EXPECT_EQ(s.groups, 1);
  EXPECT_NE(resident_split_shape(1585, 4, 396, 3, &s), nullptr);  // one part too many
  EXPECT_NE(resident_split_shape(1, 1, 0, 3, &s), nullptr);        // no block fits
  // Arrivals up to (rounds + 1) * parts must stay below 2^32.
  ASSERT_EQ(resident_split_shape(4, 1, 4, (int64_t{1} << 30) - 2, &s), nullptr);
  EXPECT_NE(resident_split_shape(4, 1, 4, int64_t{1} << 30, &s), nullptr);
}

// Normalisation pieces are resident beside the stats role (an H100 SXM holds 396 split blocks of
// f32 softmax rows: three on each of 132 SMs).
TEST(SplitPieceTiles, PiecesResidentBesideTheStatsRole) {
  // One f32 row of 300000 columns: 74 tiles, 19 parts of four (the last of two): pieces of one
  // tile. A row of 1M columns (64 parts) too: 64 + 256 blocks.
  EXPECT_EQ(split_piece_tiles(4, 1, 19, 19, 396), 1);
  EXPECT_EQ(split_piece_tiles(4, 1, 64, 64, 396), 1);
  // Two rows of 1M: 128 stats blocks leave room for two pieces a part, of two tiles.
  EXPECT_EQ(split_piece_tiles(4, 2, 64, 128, 396), 2);
  // Four rows of 1M: a second piece each would not be resident beside the 256 stats blocks.
  EXPECT_EQ(split_piece_tiles(4, 4, 64, 256, 396), 4);
  // Given statistics: no stats role.
  EXPECT_EQ(split_piece_tiles(4, 4, 64, 0, 396), 4);
  EXPECT_EQ(split_piece_tiles(4, 2, 64, 0, 396), 2);
  // Room for three pieces of a part of four tiles: two pieces of two.
  EXPECT_EQ(split_piece_tiles(4, 1, 32, 32, 132), 2);
  // Parts of one tile have no pieces, and more room than tiles gives pieces of one tile.
  EXPECT_EQ(split_piece_tiles(1, 1, 3, 3, 396), 1);
  EXPECT_EQ(split_piece_tiles(166, 1, 1, 1, 132), 2);
  EXPECT_EQ(split_piece_tiles(8, 1, 2, 2, 396), 1);
  // More stats blocks than are resident.
  EXPECT_EQ(split_piece_tiles(4, 1, 500, 500, 396), 4);
}

}  // namespace
}  // namespace softmax_internal
