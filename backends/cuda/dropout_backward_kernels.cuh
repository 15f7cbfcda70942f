// SPDX-License-Identifier: Apache-2.0
// Backward of softmax_dropout from x alone: s = softmax(x) and the keep bits are recomputed
// (the forward's rule, the same flat indices), g = keep ? dy * scale : 0, and
//   D = sum(s * g),  dx = s * (g - D).
// Each thread folds (max, sum of exp, sum of exp * g) relative to its own maximum, so one
// reduction gives all three; the layout type T is x's, dy is stored as the forward's y.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/dropout_bits.cuh"
#include "backends/cuda/forward_kernels.cuh"
#include "backends/cuda/row_frame.cuh"
#include "backends/cuda/row_math.cuh"
#include "backends/cuda/split_parts.cuh"

namespace softmax_internal {
namespace cuda_kernels {

// The dropout backward moves its rows like the dropout forward into its dx type, x's
// (kRowsInPieces): f32 dropout backward at 4097 columns 2.7 -> 3.2 TB/s, bf16 -5% in pieces; 16-bit
// rows have the second form in pieces (the kernel's kPieces) for rows on 4-byte boundaries.
template <class T>
constexpr bool kDropoutRowsInPieces = kRowsInPieces<Forward::Dropout, T>;

struct DropoutBackwardArgs {
  softmax_dtype x_dtype;  // x and dx
  const void* x;
  const void* dy;
  const char* x_end;
  const char* dy_end;
  softmax_dtype dy_dtype;
  void* dx;
  DropoutKeys keys;
  bool drop;  // false when p == 0: every element kept, no random numbers drawn
  int64_t rows;
  int64_t cols;
};

// dy of the thread's chunks, as values (columns past `limit` zero), whatever dy's type
// (kPieces and kLastChunkOnce as for load_values).
template <class T, class A, int K, int V, bool kPieces, bool kLastChunkOnce>
__device__ __forceinline__ void load_dy(const DropoutBackwardArgs& a, int64_t first, int limit, bool live,
                                        const Place& p, A (&dy)[K][V]) {
  if (kGeneric<T> || dtype_bytes(a.dy_dtype) != Elem<T>::kBytes) {
    load_resized<A, K, V>(static_cast<const char*>(a.dy) + first * dtype_bytes(a.dy_dtype), limit, live, a.dy_dtype,
                          p, A(0), dy);
  } else {
    load_values<T, A, K, V, false, kPieces, kLastChunkOnce>(a.dy, a.dy_end, first, limit, live, a.dy_dtype, p, A(0),
                                                          dy);
  }
}

// The keep bits of a thread's chunks (all set when nothing is dropped). They depend on where the
// row lies, not on its values: taken before the values are loaded (16-bit x: before they are
// realigned), only the bits stay live past the Philox rounds beside the row's loaded words.
template <int K, int V>
__device__ __forceinline__ void backward_keep_bits(const DropoutBackwardArgs& a, uint64_t flat0, int cols,
                                                   const Place& p, bool live, uint32_t (&bits)[K]) {
  if (a.drop) {
    keep_bits<K, V>(a.keys, flat0, cols, p, live, bits);
  } else {
#pragma unroll
    for (int k = 0; k < K; ++k) bits[k] = ~0u;
  }
}

// g = keep ? dy * scale : 0, in place.
template <int K, int V, class A>
__device__ __forceinline__ void apply_keep(const DropoutBackwardArgs& a, const uint32_t (&bits)[K], A (&g)[K][V]) {
  if (!a.drop) return;
#pragma unroll
  for (int k = 0; k < K; ++k) {
#pragma unroll
    for (int j = 0; j < V; ++j) g[k][j] = ((bits[k] >> j) & 1u) ? g[k][j] * a.keys.template scale_as<A>() : A(0);
  }
}

// The thread's (max, sum e, sum e*g); v becomes e = exp(x - own max).
template <class A, int K, int V>
__device__ __forceinline__ OwnPartial<A, K, V> fold_exps_dot(A (&v)[K][V], const A (&g)[K][V],
                                                             Weighted<A, 2>& part) {
  A m = A(-INFINITY);
#pragma unroll
  for (int k = 0; k < K; ++k) {
#pragma unroll
    for (int j = 0; j < V; ++j) m = fmax_(m, v[k][j]);
  }
  const Shift<A> sh(m);
  A s = A(0), d = A(0);
#pragma unroll
  for (int k = 0; k < K; ++k) {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const A e = sh.exp(v[k][j]);
      s += e;
      d += e * g[k][j];
      v[k][j] = e;
    }
  }
  part = Weighted<A, 2>{m, {s * sh.to_m, d * sh.to_m}};
  return {m, sh.to_m, sh.m};
}

// dx = s * (g - D) with s = e * factor, into g.
template <class A, int K, int V>
__device__ __forceinline__ void dropout_backward_finish(const A (&e)[K][V], A (&g)[K][V], A factor, A D) {
#pragma unroll
  for (int k = 0; k < K; ++k) {
#pragma unroll
    for (int j = 0; j < V; ++j) g[k][j] = e[k][j] * factor * (g[k][j] - D);
  }
}

// Registers a thread of the register kernel may take beyond its launch bounds: the block kernel
// of 16-bit rows in pieces is held to 56, the realigning one's count (ptxas, no spill), so that it
// keeps as many blocks resident. At its own 64, 8196-column rows (544-thread blocks) fitted one
// block to an SM instead of two and ran 29% slower on the H200, 4100 columns 2.6% slower.
template <class T, bool kBlock, bool kPieces>
constexpr int kDropoutBackwardMaxRegisters = kBlock && kPieces && Elem<T>::kBytes == 2 ? 56 : 255;

template <class T, class A, int K, int R, bool kBlock, bool kPieces = kDropoutRowsInPieces<T>>
__global__ void __launch_bounds__(register_block_limit(kBlock, K), segment_min_blocks(kBlock, K * R * kChunkElems<T> * int(sizeof(A)) / 4)) __maxnreg__((kDropoutBackwardMaxRegisters<T, kBlock, kPieces>)) register_rows_dropout_backward(
    DropoutBackwardArgs a, RowShape shape) {
  constexpr int V = kChunkElems<T>;
  using Part = Weighted<A, 2>;
  __shared__ BlockScratch<Part, kBlock ? R : 1> scratch;
  RowWalk<K, R, kBlock, kBlock && kRealignInStage16<T>> walk(shape);
  if constexpr (kBlock) cluster_exchange_setup(scratch);
  const int64_t rows = shape.rows;
  const int cols = shape.cols;
  int round = 0;  // cluster_reduce's rounds
  for (; walk.base < rows; walk.base += walk.stride, ++round) {
    A v[R][K][V], g[R][K][V];
    Part part[R];
    OwnPartial<A, K, V> own[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t row = walk.row(r);
      const bool live = row < rows;
      const int64_t first = (live ? row : 0) * int64_t(cols);
      uint32_t bits[K];
      if constexpr (kIssueBeforeBits<T, Forward::Dropout, kPieces>) {
        // x's loads are issued before the rounds and realigned after them, as in the forward.
        // Issuing dy's too spilled (ptxas: 4-28 bytes).
        LoadedUnits<K> u;
        issue_row<T, K>(a.x, a.x_end, first, cols, live, walk.place, u);
        backward_keep_bits<K, V>(a, uint64_t(first), cols, walk.place, live, bits);
        take_values<T, A, K, V>(u, cols, walk.place, A(-INFINITY), v[r]);
      } else {
        backward_keep_bits<K, V>(a, uint64_t(first), cols, walk.place, live, bits);
        load_values<T, A, K, V, true, kPieces, kBlock>(a.x, a.x_end, first, cols, live, a.x_dtype, walk.place,
                                                     A(-INFINITY), v[r]);
      }
      load_dy<T, A, K, V, kPieces, kBlock>(a, first, cols, live, walk.place, g[r]);
      apply_keep<K, V>(a, bits, g[r]);
      own[r] = fold_exps_dot<A, K, V>(v[r], g[r], part[r]);
    }
    if constexpr (kBlock) {
      cluster_reduce(part, scratch, round, shape.cluster);
    } else {
      lane_reduce(part, shape.width);
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t row = walk.row(r);
      const bool live = row < rows;
      const A M = part[r].m, S = part[r].s[0], D = part[r].s[1] / S;
      const A factor = (own[r].max == A(-INFINITY) ? A(0) : own[r].to_m * exp_diff(own[r].m, M)) / S;
      dropout_backward_finish<A, K, V>(v[r], g[r], factor, D);
      store_row<T, T, A, K, V, kPieces>(a.dx, (live ? row : 0) * int64_t(cols), cols, live, a.x_dtype, walk.place,
                                     g[r]);
    }
  }
}

template <class T, class A>
__global__ void __launch_bounds__(kSplitThreads, 2) split_rows_dropout_backward(DropoutBackwardArgs a, SplitShape sp,
                                                                             SplitWave w) {
  release_next_wave();
  constexpr int V = kChunkElems<T>;
  constexpr int K = kSplitK / 2;
  constexpr int64_t kTile = int64_t(kSplitThreads) * K;
  using Part = Weighted<A, 2>;
  __shared__ BlockScratch<Part, 1> scratch;
  const int64_t cols = a.cols;
  const WavePart wp(sp, w);
  const int64_t row = wp.row;
  const PartSpan at = wp.span(sp, cols, V);
  const Place p = split_tile_place<K>();

  auto load_tile = [&](int64_t col0, int limit, A (&v)[K][V], A (&g)[K][V]) {
    const int64_t first = row * cols + col0;
    uint32_t bits[K];
    backward_keep_bits<K, V>(a, uint64_t(first), limit, p, true, bits);
    load_values<T, A, K, V, true, kDropoutRowsInPieces<T>, true>(a.x, a.x_end, first, limit, true, a.x_dtype, p,
                                                               A(-INFINITY), v);
    load_dy<T, A, K, V, kDropoutRowsInPieces<T>, true>(a, first, limit, true, p, g);
    apply_keep<K, V>(a, bits, g);
  };

  if (wp.stats_role) {
    Part acc{A(-INFINITY), {A(0), A(0)}};
    for (int64_t t = at.begin; t < at.end; t += kTile) {
      const int64_t col0 = t * V;
      const int limit = at.limit(col0, kTile * V);
      A v[K][V], g[K][V];
      load_tile(col0, limit, v, g);
      Part tile;
      fold_exps_dot<A, K, V>(v, g, tile);
      acc = merge(acc, tile);
    }
    Part red[1] = {acc};
    block_reduce(red, scratch, 0);
    publish_partial(sp, w, wp, red[0]);
    return;
  }

  if (at.empty()) return;  // a piece past the end of the row's shorter last part
  await_previous_wave();

  Part acc{A(-INFINITY), {A(0), A(0)}};
  const Part* pr = static_cast<const Part*>(w.norm_in) + wp.row_partials(sp);
  for (int i = int(threadIdx.x); i < sp.parts; i += kSplitThreads) acc = merge(acc, pr[i]);
  Part red[1] = {acc};
  block_reduce(red, scratch, 0);
  const A M = red[0].m, S = red[0].s[0], D = red[0].s[1] / S;
  const Shift<A> sh(M);
  const A factor = sh.to_m / S;
  const int64_t last = at.last_tile(kTile);
  for (int64_t t = last; t >= at.begin; t -= kTile) {
    const int64_t col0 = t * V;
    const int limit = at.limit(col0, kTile * V);
    A v[K][V], g[K][V];
    load_tile(col0, limit, v, g);
#pragma unroll
    for (int k = 0; k < K; ++k) {
#pragma unroll
      for (int j = 0; j < V; ++j) v[k][j] = sh.exp(v[k][j]);
    }
    dropout_backward_finish<A, K, V>(v, g, factor, D);
    store_row<T, T, A, K, V, kDropoutRowsInPieces<T>>(a.dx, row * cols + col0, limit, true, a.x_dtype, p, g);
  }
}

}  // namespace cuda_kernels
}  // namespace softmax_internal
