/* SPDX-License-Identifier: Apache-2.0 */
// The forward kernel family: which instantiation serves which storage types and plan.
//   x and y f32, or both 16-bit  the full set of shapes (the speed paths)
//   16-bit x with f32 y          the full set, x held in 8-byte chunks (Narrow) so that each
//                                chunk's output is one 16-byte f32 vector
//   f32 x with 16-bit y          a reduced set
//   any f64                      the generic kernels, fp64 arithmetic
// One layout per pair of types, whatever the pointers' alignment, so a row's bits never depend on
// where it lies.
// Instantiated per operation in forward_launch.cu (softmax, statistics) and
// dropout_forward_launch.cu (softmax_dropout): the two halves compile in parallel.
#pragma once

#include <type_traits>

#include "backends/cuda/launch_ops.h"
#include "backends/cuda/storage_types.h"

namespace softmax_internal {
namespace forward_family {

using namespace cuda_kernels;

template <class T, class Y, class A, Forward kOp>
struct Launches {
  const ForwardArgs& a;
  const LaunchEnv& env;
  static constexpr int V = kChunkElems<T>;
  static constexpr const char* kName = "softmax forward kernel launch";
  // softmax_dropout of 16-bit rows moves them in pieces of 4 bytes and more (kRowsInPieces) where
  // every row of x and y starts on a 4-byte boundary and not every one on a 16-byte boundary: on
  // the H200 bf16 rows of 2050 columns 1.32 -> 1.65 TB/s, 4100 columns +18%, 4096 columns two
  // elements off +37%, offset 3 at 2050 columns +29%. Rows that all start on 16-byte boundaries
  // keep the realigning kernel, whose loads are in flight during the Philox rounds
  // (kIssueBeforeBits; in pieces, 11000 and 16384 columns ran 12-13% slower), and so do rows on
  // odd elements, which would move in 2-byte pieces.
  static constexpr bool kPiecesForm = kOp == Forward::Dropout && std::is_same_v<T, Y> && Elem<T>::kBytes == 2;
  bool rows_in_pieces() const {
    const uintptr_t x = reinterpret_cast<uintptr_t>(a.x), y = reinterpret_cast<uintptr_t>(a.y);
    if (a.cols % 2 != 0 || x % 4 != 0 || y % 4 != 0) return false;
    return a.cols % V != 0 || x % 16 != 0 || y % 16 != 0;
  }
  template <int K, int R>
  Outcome segment(const Plan& plan) const {
    const SegmentWaves waves = kOp == Forward::Dropout ? kDropoutOrBackwardWaves<T> : SegmentWaves::Many;
    const auto run = [&](auto kernel) {
      return launch_register(kernel, a, a.rows, a.cols, plan, env, kName, Looping::WhenAlone, waves);
    };
    if constexpr (kPiecesForm) {
      if (rows_in_pieces()) return run(register_rows_forward<T, Y, A, kOp, K, R, false, false, Staging::None, true>);
    }
    if constexpr (kStageable<T, Y, kOp>) {
      switch (segment_staging(plan, Elem<T>::kBytes, a.cols, a.x, a.y)) {
        case Staging::Aligned:
          return run(register_rows_forward<T, Y, A, kOp, K, R, false, false, Staging::Aligned>);
        case Staging::MidVector:
          return run(register_rows_forward<T, Y, A, kOp, K, R, false, false, Staging::MidVector>);
        case Staging::None:
          break;
      }
    }
    return run(register_rows_forward<T, Y, A, kOp, K, R, false>);
  }
  // softmax_dropout's blocks ran slower on a looping grid. Where at most two blocks fit on an SM
  // (352 threads and more at 64 registers), the kernel with room for it prefetches the next row
  // on a looping grid (16-bit x with f32 y on the H200: +18-25% at 5.6K-6K columns, +9-10% at
  // 8K, +13-27% at 12K-16K; at 2K-4K columns, four or more blocks per SM, it ran 2-6% slower).
  template <int K>
  Outcome block(const Plan& plan) const {
    if constexpr (kPrefetchNextRow<T, A, kOp, K, 1, true>) {
      const auto prefetching = register_rows_forward<T, Y, A, kOp, K, 1, true, true>;
      int resident = 0;
      if (Outcome o = resident_blocks(reinterpret_cast<const void*>(prefetching), env.device, plan.threads,
                                      realign_stage_bytes(plan.threads, kForwardRealignInStage<T, kOp>),
                                      env.limits->sm_count, &resident);
          !o.good())
        return o;
      if (resident <= 2 * env.limits->sm_count) {
        return launch_register(prefetching, a, a.rows, a.cols, plan, env, kName, Looping::Always, SegmentWaves::Few,
                               kForwardRealignInStage<T, kOp>);
      }
    }
    if constexpr (kPiecesForm) {
      if (rows_in_pieces()) {
        return launch_register(register_rows_forward<T, Y, A, kOp, K, 1, true, false, Staging::None, true>, a, a.rows,
                               a.cols, plan, env, kName, Looping::Never, SegmentWaves::Few,
                               kForwardRealignInStage<T, kOp>);
      }
    }
    return launch_register(register_rows_forward<T, Y, A, kOp, K, 1, true>, a, a.rows, a.cols, plan, env, kName,
                           kOp == Forward::Dropout ? Looping::Never : Looping::WhenAlone, SegmentWaves::Few,
                           kForwardRealignInStage<T, kOp>);
  }
  Outcome split() const {
    const int64_t bytes_per_col = kGeneric<T> ? dtype_bytes(a.x_dtype) : Elem<T>::kBytes;
    if constexpr (kOp == Forward::Softmax || kOp == Forward::Dropout) {
      bool launched = false;
      if (Outcome o = launch_resident_split(resident_split_rows_forward<T, Y, A, kOp>, a, a.rows, a.cols, V,
                                            int(kSplitTile), kHeldWords<ResidentHeld<T, Y, A, kOp>>, bytes_per_col,
                                            env, kName, &launched);
          !o.good() || launched)
        return o;
    }
    return launch_split<Weighted<A, 1>>(split_rows_forward<T, Y, A, kOp>, a, a.rows, a.cols, V, int(kSplitTile),
                                        bytes_per_col, split_work(kOp == Forward::FromStats, kOp == Forward::Stats),
                                        env, kName);
  }
};

// Chunks of rows a forward segment lane holds at a time. 16-bit dropout segments (packed rows
// and a keep word per chunk) hold two: holding four, the shapes for 8-24 columns spilled 24-480
// bytes at three blocks per SM and ran 10-20% slower on the H200 (at two blocks per SM, slower
// still). One row of four chunks stays a segment shape (32-128 columns).
template <class T, Forward kOp>
constexpr int kForwardSegmentChunks =
    kOp == Forward::Dropout && kChunkElems<T> == 8 ? 2 : max_chunks(kChunkElems<T>, 1);

// Which forward rows run as clusters of small blocks (SmallBlockClusters): softmax_dropout's f32
// layouts where their one block fits at most two to an SM, 16-bit softmax rows past one block,
// 16-bit x with f32 y softmax rows past one block where the small blocks keep more warps.
// 16-bit softmax_dropout rows, bound by their instructions more than by memory latency, keep
// their blocks: past one block, as clusters of small ones, they ran 4-10% faster at 48K-64K
// columns on the H200 but 3-6% slower at 20K-24K, offset 3 and one element off included.
template <class T, Forward kOp>
constexpr SmallBlockClusters kForwardSmallBlocks =
    kOp == Forward::Dropout && kChunkElems<T> == 4   ? SmallBlockClusters::PairedBlocks
    : kOp == Forward::Softmax && kChunkElems<T> == 8 ? SmallBlockClusters::LoneBlocks
    : kOp == Forward::Softmax && kNarrow<T>          ? SmallBlockClusters::MoreWarps
                                                     : SmallBlockClusters::None;

// The most narrow blocks per SM at which a softmax family takes the wide block kernel on a tie in
// resident warps (KernelFamily::wide_tie_blocks): f32 rows two, 16-bit rows three, 16-bit x with
// f32 y four; the other families (measured where they hold the narrow kernel) never.
template <class T, class Y, Forward kOp>
constexpr int kForwardWideTieBlocks = kOp != Forward::Softmax  ? 0
                                      : kNarrow<T>             ? 4
                                      : !std::is_same_v<T, Y>  ? 0
                                      : std::is_same_v<T, float> ? 2
                                      : Elem<T>::kBytes == 2   ? 3
                                                               : 0;

// Whether a forward family has a block kernel of three chunks a thread (trim_chunks): softmax
// rows and 16-bit softmax_dropout rows of the full families, whose blocks otherwise hold four.
template <class T, Forward kOp, bool kFull>
constexpr bool kForwardTrim =
    kFull && (kOp == Forward::Softmax || (kOp == Forward::Dropout && kChunkElems<T> == 8));

// The largest cluster of a forward family's default plan (KernelFamily::max_cluster): 16 for the
// full families, taken only by rows that no cluster of eight holds (f32 chunks 128K-256K columns,
// 16-bit softmax rows 256K-512K, 16-bit dropout 128K-256K) on GPUs that keep clusters of 16
// resident (DeviceLimits::large_clusters); longer rows run as split rows. On the H100, against
// those split rows: one to four rows 1.2-1.6x as fast (one f32 row of 160K columns 7.2 -> 4.6 us,
// 256K 7.4 -> 6.3; 16-bit dropout 2x), 64-256 rows +8-37% (256 f32 rows of 256K columns 91% ->
// 98% of copy; bf16 x dropout into f32 y, 256 rows of 200003 columns, -4%); 16 rows of 256K
// columns -4% for softmax rows, -12-14% for dropout into f32, +9% for 16-bit dropout: the H100
// keeps 14 such clusters resident, and past 7 they share SMs, which the dropout's Philox rounds
// pay for (bench/RESULTS.md).
template <bool kFull>
constexpr int kForwardMaxCluster = kFull ? 16 : 8;

// Whether a forward family has segments of three chunks a lane: softmax rows whose segments may
// run through the stage (warp_stage.cuh), where a lane pays for every chunk it holds, past the
// row or not (on an H100, f32 and 16-bit rows that fill part of a power-of-two segment ran
// 10-44% faster in segments of three).
template <class T, class Y, Forward kOp>
constexpr bool kForwardSegmentThree = kStageable<T, Y, kOp>;

template <class T, class Y, class A, Forward kOp, bool kFull>
Outcome launch_family(const ForwardArgs& a, const LaunchEnv& env) {
  return launch_plan_of<kChunkElems<T>, 1, kFull, kOp == Forward::Dropout, kOp == Forward::Softmax,
                        kForwardSegmentChunks<T, kOp>, kForwardMaxCluster<kFull>, kForwardSmallBlocks<T, kOp>,
                        kForwardWideTieBlocks<T, Y, kOp>, kForwardTrim<T, kOp, kFull>,
                        kForwardSegmentThree<T, Y, kOp>>(
      a.cols, Launches<T, Y, A, kOp>{a, env}, env);
}

// Same types, and 16-bit x with f32 y (mixed-precision attention), get every shape.
template <Forward kOp>
struct Family {
  const ForwardArgs& a;
  const LaunchEnv& env;
  template <class X, class Y>
  Outcome run() const {
    constexpr bool kFull =
        (kOp == Forward::Softmax || kOp == Forward::Dropout) && (std::is_same_v<X, Y> || std::is_same_v<Y, float>);
    return launch_family<HeldLayout<X, Y>, Y, float, kOp, kFull>(a, env);
  }
};

template <Forward kOp>
Outcome by_dtypes(const ForwardArgs& a, const LaunchEnv& env) {
  constexpr bool kSpeed = kOp == Forward::Softmax || kOp == Forward::Dropout;
  if constexpr (kOp == Forward::Stats) {  // no output, and never f64
    return with_types(a.x_dtype, a.x_dtype, Family<kOp>{a, env});
  } else {
    if (a.x_dtype == SOFTMAX_DTYPE_F64 || a.y_dtype == SOFTMAX_DTYPE_F64) {
      if constexpr (kSpeed) return launch_family<AnyDtype, AnyDtype, double, kOp, false>(a, env);
      return Outcome::fail(SOFTMAX_STATUS_INTERNAL_ERROR, "row statistics are never f64");
    }
    return with_types(a.x_dtype, a.y_dtype, Family<kOp>{a, env});
  }
}

}  // namespace forward_family

// softmax_dropout's share of launch_forward (dropout_forward_launch.cu).
Outcome launch_forward_dropout(const cuda_kernels::ForwardArgs& a, const LaunchEnv& env);

}  // namespace softmax_internal
