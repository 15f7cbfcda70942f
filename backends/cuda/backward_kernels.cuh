// SPDX-License-Identifier: Apache-2.0
// Backward kernels of softmax_rows (and the sharded backward's statistics and finish), with the
// same strategies as the forward (forward_kernels.cuh): rows held in registers, or split into
// parts whose dot products are merged before the parts are read again (in waves) or taken again
// from shared memory (the resident split, resident_split.cuh).
//
//   softmax      D = sum(dy * y),  dx = y * (dy - D)
//   log-softmax  D = sum(dy),      dx = dy - exp(y) * D
//
// The layout type T is y's (and dy's); dx is stored as Y, the forward input's type.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "backends/cuda/forward_kernels.cuh"
#include "backends/cuda/resident_split.cuh"
#include "backends/cuda/row_frame.cuh"
#include "backends/cuda/row_math.cuh"
#include "backends/cuda/split_parts.cuh"

namespace softmax_internal {
namespace cuda_kernels {

enum class Backward {
  Full,       // softmax_rows_backward
  Stats,      // softmax_backward_row_stats: row_dot only
  FromStats,  // softmax_rows_backward_from_stats: D read from row_dot
};

struct BackwardArgs {
  softmax_dtype y_dtype;  // y and dy
  const void* y;
  const void* dy;
  const char* y_end;   // ends of y and dy, for the vectors that stick out of them
  const char* dy_end;
  void* dx;
  softmax_dtype dx_dtype;
  bool log_softmax;
  float* row_dot;          // Stats
  const float* row_dot_in; // FromStats
  int64_t rows;
  int64_t cols;
};

// The thread's share of D over its held chunks of y and dy.
template <class A, int K, int V, class Held>
__device__ __forceinline__ A backward_dot(const Held& y, const Held& dy, bool log_softmax) {
  A d = A(0);
#pragma unroll
  for (int k = 0; k < K; ++k) {
#pragma unroll
    for (int j = 0; j < V; ++j) d += log_softmax ? dy.get(k, j) : dy.get(k, j) * y.get(k, j);
  }
  return d;
}

// dx from the held y and dy and D.
template <class A, int K, int V, class Held>
__device__ __forceinline__ void backward_finish(const Held& y, const Held& dy, A D, bool log_softmax, A (&dx)[K][V]) {
#pragma unroll
  for (int k = 0; k < K; ++k) {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const A yv = y.get(k, j), g = dy.get(k, j);
      dx[k][j] = log_softmax ? g - exp_of(yv) * D : yv * (g - D);
    }
  }
}

// Whether a backward block kernel realigns misaligned rows with the paths of a shift known at
// compile time (Place::one_row_per_warp): the f32 ones, at their 64 registers either way, gain
// 2-6% on the H200; those paths took the 16-bit block kernels from 48 to 62 registers (ptxas),
// 10 to 8 blocks an SM at 2K columns (bf16 2048 columns 9% slower, 2050 3%).
template <class T>
constexpr bool kBackwardOneShift = std::is_same_v<T, float>;

template <class T, class Y, class A, Backward kOp, int K, int R, bool kBlock>
__global__ void __launch_bounds__(register_block_limit(kBlock, K), segment_min_blocks(kBlock, 2 * held_registers<T, A, Elem<T>::kBytes == 2>(K * R))) register_rows_backward(BackwardArgs a,
                                                                                          RowShape shape) {
  constexpr int V = kChunkElems<T>;
  using Part = Sums<A, 1>;
  __shared__ BlockScratch<Part, kBlock ? R : 1> scratch;
  RowWalk<K, R, kBlock, false, kBlock && kBackwardOneShift<T>> walk(shape);
  if constexpr (kBlock && kOp != Backward::FromStats) cluster_exchange_setup(scratch);
  const int64_t rows = shape.rows;
  const int cols = shape.cols;
  int round = 0;  // cluster_reduce's rounds
  for (; walk.base < rows; walk.base += walk.stride, ++round) {
    HeldRow<T, A, K, V> y[R], dy[R];
    Part part[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t row = walk.row(r);
      const bool live = row < rows;
      const int64_t first = (live ? row : 0) * int64_t(cols);
      y[r].load(a.y, a.y_end, first, cols, live, a.y_dtype, walk.place, A(0));
      dy[r].load(a.dy, a.dy_end, first, cols, live, a.y_dtype, walk.place, A(0));
      part[r] = Part{{kOp == Backward::FromStats ? A(0) : backward_dot<A, K, V>(y[r], dy[r], a.log_softmax)}};
    }
    if constexpr (kOp != Backward::FromStats) {
      if constexpr (kBlock) {
        cluster_reduce(part, scratch, round, shape.cluster);
      } else {
        lane_reduce(part, shape.width);
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t row = walk.row(r);
      const bool live = row < rows;
      if constexpr (kOp == Backward::Stats) {
        const bool writer = kBlock ? (threadIdx.x == 0 && walk.rank == 0) : walk.place.lane == 0;
        if (live && writer) a.row_dot[row] = static_cast<float>(part[r].s[0]);
      } else {
        const A D = kOp == Backward::FromStats ? (live ? A(a.row_dot_in[row]) : A(0)) : part[r].s[0];
        A dx[K][V];
        backward_finish<A, K, V>(y[r], dy[r], D, a.log_softmax, dx);
        store_row<T, Y, A, K, V>(a.dx, (live ? row : 0) * int64_t(cols), cols, live, a.dx_dtype, walk.place, dx);
      }
    }
  }
  if constexpr (kBlock && kOp == Backward::FromStats) cluster_barrier_at_exit(shape.cluster);
}

// Split rows: the stats role writes each part's share of D, the finish role sums its row's
// shares (the same order in every block) and writes dx for its part.
template <class T, class Y, class A, Backward kOp>
__global__ void __launch_bounds__(kSplitThreads, 3) split_rows_backward(BackwardArgs a, SplitShape sp, SplitWave w) {
  release_next_wave();
  constexpr int V = kChunkElems<T>;
  constexpr int K = kSplitK / 2;  // two arrays in registers
  constexpr int64_t kTile = int64_t(kSplitThreads) * K;
  using Part = Sums<A, 1>;
  __shared__ BlockScratch<Part, 1> scratch;
  const int64_t cols = a.cols;
  const WavePart wp(sp, w);
  const int64_t row = wp.row;
  const PartSpan at = wp.span(sp, cols, V);
  const Place p = split_tile_place<K>();
  using Held = HeldRow<T, A, K, V>;
  auto load_tile = [&](int64_t col0, int limit, Held& y, Held& dy) {
    y.load(a.y, a.y_end, row * cols + col0, limit, true, a.y_dtype, p, A(0));
    dy.load(a.dy, a.dy_end, row * cols + col0, limit, true, a.y_dtype, p, A(0));
  };
  // As split_rows_forward (kSplitTilesAhead): the next tile's loads go out once the current
  // tile's words are taken, where the architecture allows it and the types are known at compile
  // time.
  constexpr bool kAhead = kSplitTilesAheadOnThisArch && !kGeneric<T>;
  struct Issued {
    LoadedUnits<K> y, dy;
  };
  auto issue_tile = [&](int64_t t, Issued& u) {
    const int64_t first = row * cols + t * V;
    const int limit = at.limit(t * V, kTile * V);
    issue_row<T, K>(a.y, a.y_end, first, limit, true, p, u.y);
    issue_row<T, K>(a.dy, a.dy_end, first, limit, true, p, u.dy);
  };
  if (wp.stats_role) {
    A d = A(0);
    Issued next;
    if constexpr (kAhead) issue_tile(at.begin, next);
    for (int64_t t = at.begin; t < at.end; t += kTile) {
      const int64_t col0 = t * V;
      const int limit = at.limit(col0, kTile * V);
      Held y, dy;
      if constexpr (kAhead) {
        y.take(next.y, limit, p, A(0));
        dy.take(next.dy, limit, p, A(0));
        if (t + kTile < at.end) issue_tile(t + kTile, next);
      } else {
        load_tile(col0, limit, y, dy);
      }
      d += backward_dot<A, K, V>(y, dy, a.log_softmax);
    }
    Part red[1] = {Part{{d}}};
    block_reduce(red, scratch, 0);
    publish_partial(sp, w, wp, red[0]);
    return;
  }

  if (at.empty()) return;  // a piece past the end of the row's shorter last part
  await_previous_wave();

  A D;
  if constexpr (kOp == Backward::FromStats) {
    D = A(a.row_dot_in[row]);
  } else {
    Part acc{{A(0)}};
    const Part* pr = static_cast<const Part*>(w.norm_in) + wp.row_partials(sp);
    for (int i = int(threadIdx.x); i < sp.parts; i += kSplitThreads) acc = merge(acc, pr[i]);
    Part red[1] = {acc};
    block_reduce(red, scratch, 0);
    D = red[0].s[0];
  }
  if constexpr (kOp == Backward::Stats) {
    if (wp.part == 0 && wp.piece == 0 && threadIdx.x == 0) a.row_dot[row] = static_cast<float>(D);
    return;
  }
  const int64_t last = at.last_tile(kTile);
  Issued next;
  if constexpr (kAhead) issue_tile(last, next);
  for (int64_t t = last; t >= at.begin; t -= kTile) {
    const int64_t col0 = t * V;
    const int limit = at.limit(col0, kTile * V);
    Held y, dy;
    if constexpr (kAhead) {
      y.take(next.y, limit, p, A(0));
      dy.take(next.dy, limit, p, A(0));
      if (t > at.begin) issue_tile(t - kTile, next);
    } else {
      load_tile(col0, limit, y, dy);
    }
    A dx[K][V];
    backward_finish<A, K, V>(y, dy, D, a.log_softmax, dx);
    store_row<T, Y, A, K, V>(a.dx, row * cols + col0, limit, true, a.dx_dtype, p, dx);
  }
}

// The tile of one array (y or dy) a resident split block stashes; the launcher sizes the stash
// from it.
template <class T, class A>
using ResidentBackwardHeld = HeldRow<T, A, kSplitK / 2, kChunkElems<T>>;

// The resident split (resident_split.cuh): each block stashes its part's tiles of y and dy while
// it sums its share of D, then finishes dx from the stash once its group has every share.
template <class T, class Y, class A, Backward kOp>
__global__ void __launch_bounds__(kSplitThreads, 3) resident_split_rows_backward(BackwardArgs a,
                                                                                 ResidentSplit<Sums<A, 1>> rs) {
  static_assert(kOp == Backward::Full, "only the full backward reduces and writes dx");
  constexpr int V = kChunkElems<T>;
  constexpr int K = kSplitK / 2;  // two arrays in registers
  constexpr int64_t kTile = int64_t(kSplitThreads) * K;
  using Part = Sums<A, 1>;
  using Held = ResidentBackwardHeld<T, A>;
  constexpr int kArrayWords = kHeldWords<Held> * kSplitThreads;
  extern __shared__ uint4 stash[];
  __shared__ BlockScratch<Part, 1> scratch;
  const PartExchange<Part>& ex = rs.exchange;
  const int64_t cols = a.cols;
  const ResidentPart at(rs, cols, V);
  const Place p = split_tile_place<K>();
  // Where y and dy hold whole chunks on 16-byte boundaries, the block's first row is loaded
  // through registers and later ones are copied into the stash (resident_split.cuh), each tile as
  // soon as the previous row's tile in that slot is written (H200, 256 rows of 1M f32 columns
  // +8%, 1024 rows of 256K +18%). Other rows load a tile ahead of the tile being summed, across
  // rows, so that the next row's first tile is in flight while the block waits for its group and
  // writes dx (256 rows of 1M columns: f32 +6%, bf16 +12%); the kernel spilled where rows copied
  // ahead used that stream for their first row.
  const bool copies_ahead = rows_copied_ahead<T, A, Held>(cols, a.y, a.dy);
  const int part_tiles = at.tiles(kTile);
  auto copy_tile = [&](int64_t row, int64_t t, uint4* tile_stash) {
    if constexpr (kHeldAsLoaded<T, A, Held>) {
      static_assert(kHeldWords<Held> == K, "one held word per chunk");
      const int64_t first = row * cols + t * V;
      const int limit = at.limit(t * V, kTile * V);
      const uint4 pad = padding_word<T>(A(0));
      stash_async<T, K, V, kSplitThreads>(tile_stash, static_cast<const T*>(a.y) + first, limit, p, pad);
      stash_async<T, K, V, kSplitThreads>(tile_stash + kArrayWords, static_cast<const T*>(a.dy) + first, limit, p, pad);
      close_copy_group();
    }
  };
  TileStream<T, K, V, kSplitThreads> ahead(at, ex.groups, a.rows, cols);
  LoadedUnits<K> y_next, dy_next;
  if constexpr (!kGeneric<T>) {
    if (!copies_ahead) {
      ahead.issue(a.y, a.y_end, p, y_next);
      ahead.issue(a.dy, a.dy_end, p, dy_next);
      ahead.advance();
    }
  }

  unsigned round = 0;
  for (int64_t row = at.group; row < a.rows; row += ex.groups, ++round) {
    const bool copied = copies_ahead && round > 0;
    A d = A(0);
    uint4* tile_stash = stash;
    int tile_index = 0;
    for (int64_t t = at.begin; t < at.end; t += kTile, tile_stash += 2 * kArrayWords, ++tile_index) {
      const int64_t col0 = t * V;
      const int limit = at.limit(col0, kTile * V);
      Held y, dy;
      if (copied) {
        await_copy_groups(part_tiles - 1 - tile_index);
        unstash_held<kSplitThreads>(tile_stash, y);
        unstash_held<kSplitThreads>(tile_stash + kArrayWords, dy);
      } else if (kGeneric<T> || copies_ahead) {
        y.load(a.y, a.y_end, row * cols + col0, limit, true, a.y_dtype, p, A(0));
        dy.load(a.dy, a.dy_end, row * cols + col0, limit, true, a.y_dtype, p, A(0));
      } else if constexpr (!kGeneric<T>) {
        y.take(y_next, limit, p, A(0));
        dy.take(dy_next, limit, p, A(0));
        ahead.issue(a.y, a.y_end, p, y_next);
        ahead.issue(a.dy, a.dy_end, p, dy_next);
        ahead.advance();
      }
      d += backward_dot<A, K, V>(y, dy, a.log_softmax);
      if (!copied) {
        stash_held<kSplitThreads>(tile_stash, y);
        stash_held<kSplitThreads>(tile_stash + kArrayWords, dy);
      }
    }
    Part red[1] = {Part{{d}}};
    block_reduce(red, scratch, 0);
    if (threadIdx.x == 0) ex.publish_and_wait(at.group, at.part, round, red[0]);
    __syncthreads();
    red[0] = ex.template merged<kSplitThreads>(at.group, round);
    block_reduce(red, scratch, 1);
    const A D = red[0].s[0];
    const int64_t next_row = row + ex.groups;
    tile_stash = stash;
    for (int64_t t = at.begin; t < at.end; t += kTile, tile_stash += 2 * kArrayWords) {
      const int64_t col0 = t * V;
      Held y, dy;
      unstash_held<kSplitThreads>(tile_stash, y);
      unstash_held<kSplitThreads>(tile_stash + kArrayWords, dy);
      A dx[K][V];
      backward_finish<A, K, V>(y, dy, D, a.log_softmax, dx);
      store_row<T, Y, A, K, V>(a.dx, row * cols + col0, at.limit(col0, kTile * V), true, a.dx_dtype, p, dx);
      // The thread's stores above used the words it read from this slot, so it may refill it.
      if (copies_ahead && next_row < a.rows) copy_tile(next_row, t, tile_stash);
    }
  }
}

}  // namespace cuda_kernels
}  // namespace softmax_internal
