/* SPDX-License-Identifier: Apache-2.0 */
// The strategy table: one plan per call, from the row length, the operation's kernel family and
// the device. The plan depends on nothing else (not on the number of rows, not on pointer
// alignment), so a row gives the same bits whatever batch it comes in and wherever it lies.
//
//   segment  a row per segment of 1..32 lanes, several rows per warp     rows up to 32*K chunks
//   block    a row per block, in registers                              up to threads*K chunks
//   cluster  a row per cluster of 2..16 blocks (distributed shared memory)
//   split    rows past a cluster's registers: parts merged through a workspace, in one
//            cooperative launch where the resident blocks' shared memory holds the parts,
//            else in waves of launches
//
// (a chunk is 16 bytes of the layout type: 4 f32, 8 f16/bf16, 2 f64 columns)
#pragma once

#include <cstdint>
#include <string>

#include "backends/backend.h"
#include "backends/cuda/device_limits.h"

namespace softmax_internal {

enum class Strategy { Segment, Block, Cluster, Split };

// The name SOFTMAX_CUDA_STRATEGY uses for a strategy.
inline const char* strategy_name(Strategy s) {
  switch (s) {
    case Strategy::Segment: return "segment";
    case Strategy::Block: return "block";
    case Strategy::Cluster: return "cluster";
    case Strategy::Split: return "split";
  }
  return "?";
}

// Every thread of a register kernel holds kThreadChunks 16-byte chunks of its row (split between
// the arrays it holds, e.g. y and dy for the backward): 64 bytes of loads in flight per thread
// whatever the element size, and few enough registers that 1024-thread blocks do not spill
// (the wide f32 kernels for long rows hold twice that; see wide_chunks).
constexpr int kThreadChunks = 4;

// Chunks per thread per array.
constexpr int max_chunks(int /*chunk_elems*/, int arrays) { return kThreadChunks / arrays; }

// Chunks per thread of the block and cluster kernels for rows past one block of max_chunks (of
// every block and cluster kernel in wide_first families, see kernel_family): f32
// rows hold twice as many (32 values per thread over the arrays held, as 16-bit layouts do at
// max_chunks), so a row takes half the blocks (a backward row of 8K-16K columns one block
// instead of a cluster of two) and the per-row reduction and barriers are paid over twice the
// elements. At 1024 threads some of these kernels spill a few words (forward softmax 104 bytes,
// dropout 328); the forward's f32 rows and dropout now take at most 512 threads a block
// (KernelFamily::block_threads), which gave a forward row of 16K-32K columns one 512-thread
// block or a cluster of two (backends/cuda/TUNING.md).
// 16-bit softmax rows (`packed16`) take eight chunks too, held as loaded (32 registers, as many
// as an f32 thread's 32 values): a row of 32K columns is one 512-thread block, two to an SM,
// instead of one 1024-thread block alone on its SM (forward_kernels.cuh, kForwardPacked).
constexpr int wide_chunks(int chunk_elems, int arrays, bool packed16 = false) {
  return chunk_elems == 4 || (packed16 && chunk_elems == 8 && arrays == 1) ? 2 * max_chunks(chunk_elems, arrays)
                                                                           : max_chunks(chunk_elems, arrays);
}

// Chunks per thread of a one-warp block kernel for rows just past one warp of max_chunks, in
// families whose wide kernel holds 16-bit rows packed (0: none). A 16-bit row of 1025-1536
// columns (129-192 chunks) would otherwise take two warps of four chunks, the second nearly empty
// at the short end, or one warp of eight, a quarter to a half of whose chunks are past the row;
// six chunks are held packed (24 registers), as the wide kernel holds eight.
constexpr int warp_chunks(int chunk_elems, int arrays, bool packed16) {
  return packed16 && chunk_elems == 8 && arrays == 1 ? 6 : 0;
}

// Chunks per thread of a block kernel for rows that would leave most of the last warp of a
// block of max_chunks empty, in families that instantiate one (`trimmed`; forward_launch.cuh's
// kForwardTrim: softmax rows of the full families, 16-bit softmax_dropout rows; 0: none). A
// 16-bit row of 2049-2304 columns (257-288 chunks) takes three warps of four chunks, the third
// holding at most 32 chunks but running every pass of the row's loads, realigning shuffles,
// exps and stores; three warps of three chunks hold it in a quarter fewer passes. Only where
// three chunks a thread hold a row in as many threads as four (65-96, 129-192 and 257-288
// chunks, where no segment or one-warp kernel takes the row) does block_plan take them, and it
// keeps them against the wide kernel. On the H200 (log-softmax and one element off alike): bf16
// and f16 2050 columns +22-24%, 2200 +5%, 2304 +8%, 520-768 +8-22%; f32 520 +15%, 640 +4%, 768
// +2%, 1025 +22% (from a wide block of 64 threads, its second warp holding one chunk: 76% -> 92%
// of copy); bf16 x with f32 y 520-768 +7-21%, 1025-1152 +12-18%; bf16 dropout 520-1100 +22-26%,
// 1500 +9%, 2050 +11-22%. 16-bit rows of 4100 columns in six 192-thread blocks of three, against
// six of 160 of four, ran 9% slower.
constexpr int trim_chunks(int chunk_elems, int arrays, bool trimmed) {
  return trimmed && arrays == 1 && (chunk_elems == 4 || chunk_elems == 8) ? 3 : 0;
}

// Rows a segment lane holds at a time with K chunks per row: row_chunks chunks of rows in all
// (K * R = row_chunks), or one row when K alone reaches that.
constexpr int segment_rows(int k, int row_chunks) { return k < row_chunks ? row_chunks / k : 1; }

// The register-kernel shapes an operation's kernel family instantiates (see *_launch.cu): the
// segment shapes (K chunks per thread per array, R = segment_rows(K, segment_chunks) rows per
// segment at a time) in increasing K, the powers of two up to max_chunks, all of them (full) or
// the smallest and largest (reduced), and in some families three (segment_three); a block
// kernel of max_chunks and one of wide_chunks for longer rows and clusters (the same kernel
// where they are equal, and only the wide one in wide_first families), 16-bit softmax rows a
// one-warp block kernel of warp_chunks, and some families a block kernel of trim_chunks.
struct KernelFamily {
  int segment_k[5];
  int segment_r[5];
  int segments;  // entries used
  int block_k;
  int wide_k;
  // The widest segment the default plan takes (forced, segments take up to 32 lanes). A 16-bit
  // forward row that needs a whole warp runs faster as a block of 32 threads, which keeps its
  // exps, than as a segment, which holds the row packed and takes the exps again on the way out
  // (H200, 640-1024 columns: softmax +3-22%, dropout +5-14%).
  int segment_width;
  // Rows whose block would fit at most cluster_block_residency to an SM (or that no one block
  // holds) run as a cluster of blocks of at most cluster_block_threads threads (0: never), where a
  // cluster of such blocks holds the row, so that several blocks share each SM and one block's
  // reduction and stores overlap another's loads (see SmallBlockClusters for the families and
  // what the H200 measured). With cluster_for_warps, only rows that no one block holds, and only
  // where the small blocks keep more warps resident per SM than the family's cluster.
  int cluster_block_threads;
  int cluster_block_residency;
  bool cluster_for_warps;
  // The most threads the default plan gives a block (forced strategies take up to 1024). Forward
  // families with f32 chunks (f32 rows, 16-bit x with f32 y) and dropout take at most 512: two
  // blocks per SM at 64 registers, so that one block's reduction and stores overlap the other's
  // loads; rows past one such block run as clusters of them, and rows past eight as split rows.
  // On the H200 (1 GiB), against 1024: f32 softmax and log-softmax 12K-256K columns +2-11%,
  // bf16 x with f32 y +4-10%, f32 dropout 64K-256K +7-14%, 16-bit 32K-128K +14-20%. 16-bit
  // softmax rows take 512 too, in their wide packed kernel (wide_chunks): a 32K-column row is one
  // such block, +10-48% at 20K-64K columns against one 1024-thread block or a cluster of them. The
  // backward families, mixed under the cap, keep 1024 (bench/RESULTS.md).
  int block_threads;
  // The largest cluster the default plan takes (forced strategies take up to 8, or
  // SOFTMAX_CUDA_MAX_CLUSTER; a GPU that cannot keep clusters of 16 resident, at most 8; clusters
  // of small blocks, at most 8); rows past it run as split rows. Where the split is resident in
  // shared memory (softmax_rows and its backward), clusters of 1024-thread blocks lost to it on
  // the H200: 16-bit backward rows past one block (32K-128K +19-56%), f32 and mixed backward rows
  // past clusters of four (96K +14%; at 64K the cluster of four is 11% ahead). The forward
  // families, whose blocks take at most 512 threads where rows are long (16-bit softmax rows in
  // the wide packed kernel), take clusters of up to eight: 16-bit rows of 128K-256K columns ran
  // 4-8% faster so than as split rows, 200003 columns one element off 15%, 16 rows of 128K 26%;
  // the full forward families up to 16 (forward_launch.cuh, kForwardMaxCluster).
  int max_cluster;
  // The wide kernel holds 16-bit rows packed and takes their exps twice (16-bit softmax rows):
  // block_plan takes it only where the narrow blocks fit at most three to an SM.
  bool wide_packed;
  // block_plan takes the wide kernel where it keeps as many warps resident as the narrow one and
  // the narrow blocks fit at most wide_tie_blocks to an SM (0: never). On the H200
  // (bench/RESULTS.md):
  //   f32 softmax rows, 2: two 512- or 448-thread blocks against four of 256 or 224, 8191
  //     columns 92% -> 97% of copy, 7168 +4%, 8192 +0.4%; three 320-thread blocks against six of
  //     160 (5120 columns) within 1%.
  //   16-bit softmax rows, 3 (as kPackedWideNarrowBlocks): 10240 columns +3%.
  //   16-bit x with f32 y, 4, whose chunks load 8 bytes of x: a wide thread keeps 64 bytes of
  //     loads in flight, as an f32 thread of the narrow kernel does. 4K columns 90% -> 95-97% of
  //     copy, 8K 88% -> 95%, one element off +17-19%; at 2K columns (eight narrow blocks of 128
  //     threads against sixteen wide ones of 64) within 1%.
  int wide_tie_blocks;
  // warp_chunks of the family: rows of (32 * block_k, 32 * warp_k] chunks run one 32-thread block
  // of warp_k chunks per thread (0: none).
  int warp_k;
  // trim_chunks of the family: block_plan takes a block of trim_k chunks per thread instead of
  // block_k, and instead of the wide kernel, where it holds the row in as many threads as
  // block_k (0: none).
  int trim_k;
};

// Which rows of a family run as clusters of small blocks (KernelFamily::cluster_block_threads),
// in up to eight 256-thread blocks. On the H200, against one block or a cluster of larger ones
// (bench/RESULTS.md):
//   PairedBlocks  rows whose one block fits at most two to an SM: softmax_dropout's f32 layouts
//                 (16-bit x with f32 y too), which do not loop over rows and whose wide block
//                 kernel spills at 1024 threads; 12K-32K columns 1.5-56% faster (+82% one
//                 element off alignment), 40K-64K +6-22% in clusters of eight (one element off
//                 +32%, offset 3 +17%, bf16 x +13-22%), 8196 columns (288-thread blocks, three
//                 to an SM) 8% slower.
//   LoneBlocks    rows whose block would be alone on its SM or that no one block holds: the
//                 dropout backward (f32 10K-32K columns +5-26%, one element off +21-50%; 16K
//                 -0.5%, 8K with two blocks to an SM -4%; bf16 20K-24K +20-31%, 16K -7%) and
//                 16-bit softmax rows past one block (48K +13%, 64K +6%, 128K +11%; 40K, at the
//                 same warps per SM, -3%).
//   MoreWarps     rows that no one block holds, where the small blocks keep more warps resident
//                 per SM than the cluster of the family's blocks: 16-bit x with f32 y softmax rows
//                 (24K columns, four 192-thread blocks instead of two of 384: 91% -> 96% of copy;
//                 48K +16%, 24K one element off +1%, 24577 columns -5.5%). At equal warps (20K,
//                 28K, 32K, 64K) the larger blocks, which ran as fast or faster (28K -2% in small
//                 ones).
enum class SmallBlockClusters { None, PairedBlocks, LoneBlocks, MoreWarps };

// wide_first: the family's block kernel is the wide one at every row length (block_k = wide_k).
// Families whose threads pay a cost per row beyond the loads (dropout's Philox key schedule and
// counters; the backward's second array and its two reductions) pay it over twice the elements
// per thread. On the H200, f32 layouts (and 16-bit arrays in 8-byte chunks) at 512-8K columns,
// against max_chunks per thread: dropout +7-22%, bf16 x with f32 y dropout +8-23%, backward +1-18%
// (+26% one element off alignment), dropout backward +12-37% (backends/cuda/TUNING.md). Plain
// softmax rows keep max_chunks: wide, they ran 0-7% slower at 4K-8K columns.
// segment_chunks: the chunks of rows a segment lane holds at a time (max_chunks but for 16-bit
// dropout, forward_launch.cuh). max_cluster: KernelFamily::max_cluster. small: which rows run as
// clusters of small blocks; wide_tie_blocks: KernelFamily::wide_tie_blocks; trim_k:
// KernelFamily::trim_k; segment_three: the family has segments of three chunks a lane (which
// hold rows of 3, 5-6, 9-12, 17-24, 33-48 and 65-96 chunks with fewer chunks past the row than
// the powers of two: segment_plan).
KernelFamily kernel_family(int chunk_elems, int arrays, bool full, bool wide_first, int wide_k, int segment_chunks,
                           int max_cluster, SmallBlockClusters small, int wide_tie_blocks, int trim_k,
                           bool segment_three);

// Chunks per row a forced strategy can hold with the default limits (1024 threads per block,
// clusters of up to 8 blocks); split holds any row. The test suites that force a strategy read it
// to know which calls must be refused.
inline int64_t strategy_capacity_chunks(Strategy s, int chunk_elems, int arrays, bool packed16 = false) {
  const int64_t k = max_chunks(chunk_elems, arrays), wide = wide_chunks(chunk_elems, arrays, packed16);
  switch (s) {
    case Strategy::Segment: return 32 * k;
    case Strategy::Block: return 1024 * wide;
    case Strategy::Cluster: return 8 * 1024 * wide;
    case Strategy::Split: break;
  }
  return INT64_MAX;
}

struct Plan {
  Strategy strategy = Strategy::Split;
  int k = 0;        // chunks per thread (per array)
  int r = 1;        // rows per segment (segment) or per block (block, cluster) at a time
  int width = 32;   // segment lanes
  int threads = 0;  // block threads (block, cluster)
  int cluster = 1;  // blocks per row (cluster)
};


// The plan for rows of `cols` columns of a layout with `chunk_elems` columns per chunk.
// SOFTMAX_CUDA_STRATEGY=segment|block|cluster|split forces a strategy (tests and tuning): a
// forced strategy that cannot hold the row fails the call with INTERNAL_ERROR and says so,
// rather than quietly running another. SOFTMAX_CUDA_MAX_THREADS caps block threads (a multiple
// of 32), SOFTMAX_CUDA_MAX_CLUSTER the cluster size (1..16, never past the device's: 1 plans as on
// GPUs without thread block clusters, before sm_90, 8 as on GPUs without clusters of 16); both
// are read once per process.
Outcome make_plan(int64_t cols, int chunk_elems, const KernelFamily& family, const DeviceLimits& dev, Plan* out);

// The resident split's grid (kernel_launch.cuh, launch_resident_split) for rows of `tiles` tiles
// cut into parts of `tiles_per_part`: groups of `parts` blocks, as many as the `resident` blocks
// hold and at most one per row. nullptr when it fits, else why not: parts that outnumber the
// resident blocks (every block of a group must be resident), or rows whose arrival count
// ((rounds + 1) * parts) would not fit its 32-bit counter.
struct ResidentShape {
  int64_t parts = 0;
  int64_t groups = 0;
};
const char* resident_split_shape(int64_t tiles, int tiles_per_part, int64_t resident, int64_t rows,
                                 ResidentShape* out);

// Tiles per normalisation piece of a split part in waves (kernel_launch.cuh, launch_split) for a
// call of one wave: `rows` rows of `parts` parts of `part_tiles` tiles each, whose stats role
// takes `stats_blocks` blocks (0 where the statistics are given), of a kernel the device holds
// `resident` blocks of at once. As many pieces of whole tiles as are resident beside the stats
// role's blocks, so that both launches of the wave run side by side; part_tiles (the part its
// own block) where no second piece fits.
int64_t split_piece_tiles(int64_t part_tiles, int64_t rows, int64_t parts, int64_t stats_blocks, int64_t resident);

}  // namespace softmax_internal
