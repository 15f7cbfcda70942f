// SPDX-License-Identifier: Apache-2.0
// Forward kernels: softmax, log-softmax, softmax fused with dropout, and the row statistics of
// sharded rows. Two strategies (backends/cuda/launch_plan.h picks one):
//
//   register_rows  the row held in registers by a segment, a block or a cluster (row_frame.cuh):
//                  one read, one write. Each thread folds its elements into a (max, sum)
//                  partial taken relative to its own maximum, so a single reduction gives the
//                  row's (max, sum); the exps stay in registers and are rescaled by one
//                  per-thread factor on the way out.
//   split_rows     rows past a cluster's registers: each row is cut into parts of whole tiles,
//                  one block a part. A launch computes the (max, sum) partials of one wave of
//                  rows next to the normalisation of the previous wave, which merges its row's
//                  partials and re-reads the part (from L2 when the wave fits there).
//   resident_split_rows  the same parts, for rows whose parts all fit in the shared memory of
//                  the GPU's resident blocks: one cooperative launch in which each block keeps
//                  its part in shared memory from the reduction to the normalisation (one read
//                  of x), its group of blocks exchanging partials through global memory
//                  (resident_split.cuh).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "backends/cuda/dropout_bits.cuh"
#include "backends/cuda/resident_split.cuh"
#include "backends/cuda/row_frame.cuh"
#include "backends/cuda/row_math.cuh"
#include "backends/cuda/split_parts.cuh"
#include "backends/cuda/warp_stage.cuh"

namespace softmax_internal {
namespace cuda_kernels {

// Softmax covers log-softmax (a flag); Stats is softmax_row_stats; FromStats is
// softmax_rows_from_stats (the row's max and sum read instead of reduced).
enum class Forward { Softmax, Dropout, Stats, FromStats };

// Whether an operation's rows move between memory and registers in per-thread pieces
// (load_chunks_in_pieces, store_chunks_in_pieces) rather than through the realigning vector
// loads and stores: dropout into f32 or f64 output (y of Y), bound by its instruction count.
// On the H200 against the realigning path: f32 one element off alignment 2.8 -> 3.6 TB/s, 4097
// columns 2.2 -> 2.65, aligned 1K +6%; bf16 x -> f32 y 4097 columns +15%, one element off +30%.
// Softmax rows, bound by memory, lose (pieces from lanes 16 bytes apart write each sector
// partly several times), and so do 16-bit outputs of rows in every alignment: bf16 dropout at
// 4097 columns -11%, 255 columns -7%. Loads in pieces with realigned stores lost too (f32 dropout
// 4097 columns -13%). 16-bit dropout has a second form in pieces (the kernels' kPieces), which
// the launcher takes where every row starts on a 4-byte boundary (forward_launch.cuh).
template <Forward kOp, class Y>
constexpr bool kRowsInPieces = kOp == Forward::Dropout && Elem<Y>::kBytes >= 4;

struct ForwardArgs {
  const void* x;
  softmax_dtype x_dtype;
  const char* x_end;     // x + rows * cols elements: vectors past it are read element-wise
  void* y;               // Softmax, Dropout
  softmax_dtype y_dtype;
  bool log_softmax;
  uint8_t* mask;         // Dropout: keep bytes, or nullptr
  DropoutKeys keys;      // Dropout
  float* row_max;        // Stats (written), FromStats (read)
  float* row_sumexp;
  int64_t rows;
  int64_t cols;
  // Whether y is log-softmax: never for softmax_dropout (its API has no log form), which the
  // dropout kernels then know at compile time (no log path, no per-element select of the exps).
  template <Forward kOp>
  __device__ __forceinline__ bool log_output() const {
    return kOp != Forward::Dropout && log_softmax;
  }
};

// log-softmax is (x - max) - log(sum): two subtractions, because max + log(sum) rounded to one
// number loses the low bits of log(sum) when the max is large (1e4: 5e-4 absolute in fp32).
template <class A>
struct LogShift {
  A max;
  A log_sum;
  __device__ __forceinline__ static LogShift of(bool log_softmax, A M, A S) {
    return log_softmax ? LogShift{M, log(S)} : LogShift{A(0), A(0)};
  }
};

// Keep bytes of one chunk (bit j of `bits` -> byte j), V bytes at mask_row + col0.
template <int V>
__device__ __forceinline__ void store_keep_bytes(uint8_t* mask_row, int col0, int limit, uint32_t bits,
                                                 bool vectors) {
  uint32_t w[2] = {0, 0};
#pragma unroll
  for (int j = 0; j < V; ++j) w[j >> 2] |= ((bits >> j) & 1u) << (8 * (j & 3));
  uint8_t* p = mask_row + col0;
  if (vectors && col0 + V <= limit) {
    if constexpr (V == 8) {
      store8(p, w[0], w[1]);
    } else if constexpr (V == 4) {
      store4(p, w[0]);
    } else {
      *reinterpret_cast<uint16_t*>(p) = uint16_t(w[0]);
    }
    return;
  }
#pragma unroll
  for (int j = 0; j < V; ++j) {
    if (col0 + j < limit) p[j] = uint8_t((bits >> j) & 1u);
  }
}

// Keep bits of a thread's K chunks; chunk k starts at flat element flat0 + chunk(k) * V. Chunks
// of four or more elements that start at or past column `cols` (counted from flat0) are not
// evaluated; f64 chunks (two elements) are, since skipping them doubled the f64 segment
// kernel's spills (68 -> 132 bytes).
template <int K, int V>
__device__ __forceinline__ void keep_bits(const DropoutKeys& d, uint64_t flat0, int cols, const Place& p, bool live,
                                          uint32_t (&bits)[K]) {
  if constexpr (V % 4 == 0) {
    chunk_keep_bits<K, V>(d, flat0, cols, p, live, bits);
  } else {
#pragma unroll
    for (int k = 0; k < K; ++k) bits[k] = live ? keep_bits2(d, flat0 + uint64_t(p.chunk(k)) * V) : 0u;
  }
}

// Applies the output factor (or log offset) and, for dropout, the keep bits (keep_bits) to a
// thread's held chunks and writes the mask and y. The held chunks are the exps (softmax, where
// they hold values), or the inputs: log-softmax uses them as they are, softmax takes their exps
// with `sh` first. The pointers and flat0 point at column 0 of the thread's row (or of its split
// tile); only columns below `limit` are written. With kStaging, y's chunks go to the row's place
// in the warp's stage instead (warp_stage.cuh), which the kernel stores.
template <class T, class Y, class A, Forward kOp, int K, int V, class Held, Staging kStaging = Staging::None,
          bool kPieces = kRowsInPieces<kOp, Y>>
__device__ __forceinline__ void finish_forward(const ForwardArgs& a, uint64_t flat0, int limit, bool live,
                                               const Place& p, const Held& h, const Shift<A>& sh, A factor,
                                               LogShift<A> log, const uint32_t (&bits)[K],
                                               const StagedRow& staged = StagedRow{}) {
  if constexpr (kOp == Forward::Dropout) {
    uint8_t* mask_row = a.mask != nullptr ? a.mask + flat0 : nullptr;
    if (mask_row != nullptr && live) {
      const bool vectors = reinterpret_cast<uintptr_t>(mask_row) % unsigned(V) == 0;
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int col0 = p.chunk(k) * V;
        if (col0 < limit) store_keep_bytes<V>(mask_row, col0, limit, bits[k], vectors);
      }
    }
  }
  // y's chunk k as values, log-softmax or not.
  const auto drop = [&](int k, A (&v)[V]) {
    if constexpr (kOp == Forward::Dropout) {
#pragma unroll
      for (int j = 0; j < V; ++j) {
        if (!((bits[k] >> j) & 1u)) v[j] = A(0);
      }
    }
  };
  const auto log_chunk = [&](int k, A (&v)[V]) {
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = (h.get(k, j) - log.max) - log.log_sum;
    drop(k, v);
  };
  const auto exp_chunk = [&](int k, A (&v)[V]) {
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = (Held::kHoldsValues ? h.get(k, j) : sh.exp(h.get(k, j))) * factor;
    drop(k, v);
  };
  if constexpr (kGeneric<T>) {
    A v[K][V];
    if (a.log_output<kOp>()) {
#pragma unroll
      for (int k = 0; k < K; ++k) log_chunk(k, v[k]);
    } else {
#pragma unroll
      for (int k = 0; k < K; ++k) exp_chunk(k, v[k]);
    }
    store_row<T, Y, A, K, V>(a.y, int64_t(flat0), limit, live, a.y_dtype, p, v);
  } else {
    // Each branch packs its chunks as it goes: the values of the whole row, joined after the
    // branch, took 64 registers in the wide 16-bit kernel and spilled.
    Words c[K];
    if (a.log_output<kOp>()) {
#pragma unroll
      for (int k = 0; k < K; ++k) {
        A v[V];
        log_chunk(k, v);
        c[k] = pack_as<Y, A, V>(v);
      }
    } else {
#pragma unroll
      for (int k = 0; k < K; ++k) {
        A v[V];
        exp_chunk(k, v);
        c[k] = pack_as<Y, A, V>(v);
      }
    }
    if constexpr (kStaging != Staging::None) {
      if (live) leave_staged<kStaging, K, Elem<Y>::kBytes>(staged, p, c);
    } else {
      store_packed<Y, K, V, kPieces>(static_cast<char*>(a.y) + int64_t(flat0) * Elem<Y>::kBytes, limit, live, p, c);
    }
  }
}

// The thread's exps relative to its own maximum, folded into a (max, sum) partial; v becomes
// the exps unless log-softmax or statistics need only the sum.
template <class A, int K, int V>
struct OwnPartial {
  A max;   // the thread's maximum (-inf when it holds only -inf or padding)
  A to_m;  // Shift::to_m
  A m;     // Shift::m
};

template <class A, int K, int V, class Held>
__device__ __forceinline__ OwnPartial<A, K, V> fold_exps(Held& h, bool keep_exps, Weighted<A, 1>& part) {
  const A m = h.max();
  const Shift<A> sh(m);
  A s = A(0);
#pragma unroll
  for (int k = 0; k < K; ++k) {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const A e = sh.exp(h.get(k, j));
      s += e;
      if (keep_exps) h.set(k, j, e);
    }
  }
  part = Weighted<A, 1>{m, {s * sh.to_m}};
  h.renew();  // the output widens a packed row again (HeldRow::renew)
  return {m, sh.to_m, sh.m};
}

// Threads per block the register kernels are compiled for (segment kernels run 256-thread blocks),
// and the resident segment blocks their registers leave room for: three when a thread holds at
// most 16 registers of row data, two beyond.
__host__ __device__ constexpr int register_block_limit(bool block, int /*k*/) { return block ? 1024 : 256; }
__host__ __device__ constexpr int segment_min_blocks(bool block, int data_registers) {
  return block ? 1 : data_registers > 16 ? 2 : 3;
}

// Registers of row data a thread holds for `chunks` chunks of T (HeldRow).
template <class T, class A, bool kPacked>
__host__ __device__ constexpr int held_registers(int chunks) {
  return kPacked ? chunks * kChunkBytes<T> / 4 : chunks * kChunkElems<T> * int(sizeof(A)) / 4;
}

// Whether a forward kernel holds 16-bit rows packed (HeldRow): segment kernels do, since their
// occupancy is bound by registers, and so do block kernels whose values would take more than 32
// registers (the wide 16-bit kernel, eight chunks of eight columns); other block kernels, capped
// at 64 registers by their 1024-thread bound either way, keep the exps instead of taking them
// twice (packed, mixed bf16 -> f32 rows of 2K-4K columns ran 14-18% slower on the H200).
template <class T, class A, bool kBlock, int K>
constexpr bool kForwardPacked = Elem<T>::kBytes == 2 && (!kBlock || held_registers<T, A, false>(K) > 32);

// Whether a block kernel may issue the loads of its block's next row before it reduces and
// writes the current one (kPrefetch below): where the values held and the loaded words of the
// next row fit in 24 registers, which leaves the Narrow layouts at max_chunks (16-bit x with f32
// y). With the f32 layout (32 registers) the kernel spilled and f32 16K-column rows ran 15%
// slower on the H200. softmax_dropout runs a block per row.
template <class T, class A, Forward kOp, int K, int R, bool kBlock>
constexpr bool kPrefetchNextRow = kBlock && R == 1 && kOp != Forward::Dropout && !kGeneric<T> &&
                                  !kForwardPacked<T, A, kBlock, K> &&
                                  held_registers<T, A, false>(K) + K * kChunkBytes<T> / 4 <= 24;

// Whether a dropout kernel issues its row's loads before it takes the keep bits, and realigns the
// loaded words after them, so that the Philox rounds run while the row is in flight: 16-bit rows
// with 16-bit output, whose loaded words (16 registers at four chunks) fit beside the rounds
// without spilling (ptxas; the segment kernel of four chunks spilled 12 bytes the other way). Rows
// moved in pieces (kPieces: the f32 layouts, whose wide kernels spilled this way, and 16-bit rows
// on 4-byte boundaries) load after the bits.
template <class T, Forward kOp, bool kPieces>
constexpr bool kIssueBeforeBits = kOp == Forward::Dropout && !kGeneric<T> && Elem<T>::kBytes == 2 && !kPieces;

// Whether a forward kernel's blocks realign misaligned rows through their warps' stages
// (kRealignInStage16, row_frame.cuh): 16-bit softmax_dropout.
template <class T, Forward kOp>
constexpr bool kForwardRealignInStage = kOp == Forward::Dropout && kRealignInStage16<T>;

// Whether a forward block kernel realigns misaligned rows with the paths of a shift known at
// compile time (Place::one_row_per_warp): all but the 16-bit x -> f32 y kernels of up to four
// chunks, which those paths took from 56 to 61-64 registers (ptxas), one block an SM fewer: on
// the H200 bf16 -> f32 rows of 2K columns ran 3% slower, 3K 8%. Their eight-chunk kernels, at
// 64 registers either way, write misaligned rows so 10% faster (4097 columns).
template <class T, int K>
constexpr bool kForwardOneShift = !kNarrow<T> || K > 4;

// Whether a forward kernel has a staged form (warp_stage.cuh): softmax and log-softmax segments
// whose output has the input's type. The launcher picks the aligned or the mid-vector form, or
// none, by the segment's width, the element size and the alignment (segment_staging).
template <class T, class Y, Forward kOp>
constexpr bool kStageable = kOp == Forward::Softmax && !kGeneric<T> && std::is_same_v<T, Y>;

// kPrefetch: for blocks that fit at most two to an SM, on a grid that loops over the rows
// (launch_register), whose memory traffic would otherwise stop while a block reduces and writes
// a row. kStaging: how a segment kernel's warps move their rows through a shared-memory stage
// (warp_stage.cuh), if they do. kPieces: each thread moves its own chunks (kRowsInPieces).
template <class T, class Y, class A, Forward kOp, int K, int R, bool kBlock, bool kPrefetch = false,
          Staging kStaging = Staging::None, bool kPieces = kRowsInPieces<kOp, Y>>
__global__ void __launch_bounds__(register_block_limit(kBlock, K), segment_min_blocks(kBlock, held_registers<T, A, kForwardPacked<T, A, kBlock, K>>(K * R))) register_rows_forward(ForwardArgs a, RowShape shape) {
  constexpr int V = kChunkElems<T>;
  using Part = Weighted<A, 1>;
  using Held = HeldRow<T, A, K, V, kForwardPacked<T, A, kBlock, K>, kPieces, kBlock>;
  __shared__ BlockScratch<Part, kBlock ? R : 1> scratch;
  RowWalk<K, R, kBlock, kBlock && kForwardRealignInStage<T, kOp>, kBlock && kForwardOneShift<T, K>> walk(shape);
  if constexpr (kBlock && kOp != Forward::FromStats) cluster_exchange_setup(scratch);
  const int64_t rows = shape.rows;
  const int cols = shape.cols;
  const bool keep_exps = kOp != Forward::Stats && !a.log_output<kOp>();
  static_assert(!kPrefetch || kPrefetchNextRow<T, A, kOp, K, R, kBlock>, "no room to prefetch");
  constexpr bool kStaged = kStaging != Staging::None;
  static_assert(!kStaged || (kStageable<T, Y, kOp> && !kBlock && !kPrefetch), "no staged form");
  // This warp's two stages (kStaged): the current group of rows in one while the next one's
  // copies land in the other.
  Words* stage = nullptr;
  Words* stage_next = nullptr;
  using Run = StageRun<Elem<T>::kBytes>;
  constexpr int kPasses = kStagePasses<kStaging, K, R>;
  if constexpr (kStaged) {
    __shared__ alignas(16) Words stage_slots[register_block_limit(false, K) / 32 * 2 * kStageSlots<kStaging, K, R>];
    stage = stage_slots + (threadIdx.x >> 5) * 2 * kStageSlots<kStaging, K, R>;
    stage_next = stage + kStageSlots<kStaging, K, R>;
  }
  // The warp's group of rows from `first` on, in an array.
  const auto run_at = [&](const void* base, int64_t first) {
    const int64_t left = rows - first;
    return Run(base, first * cols, int(left < int64_t(walk.step) * R ? left : int64_t(walk.step) * R) * cols);
  };
  // The warp's current rows in x and y (kStaged), and where the thread's r-th row of them lies in
  // the stage: y's rows are left at y's alignment, which may differ from x's.
  Run x_run(a.x, 0, 0), y_run(a.y, 0, 0);
  const auto staged_row = [&](const Run& run, int r) {
    return StagedRow{stage, (walk.in_group + r * walk.step) * cols + run.lead, cols};
  };
  if constexpr (kStaged) {
    if (walk.base < rows) {
      stage_in_async<kStaging, kPasses>(a.x, a.x_end, run_at(a.x, walk.base), stage, int(threadIdx.x & 31));
    }
  }
  LoadedUnits<K> next;
  if constexpr (kPrefetch) {
    const bool live = walk.base < rows;
    issue_row<T, K>(a.x, a.x_end, (live ? walk.base : 0) * int64_t(cols), cols, live, walk.place, next);
  }
  int round = 0;  // cluster_reduce's rounds
  for (; walk.base < rows; walk.base += walk.stride, ++round) {
    Held h[R];
    uint32_t bits[R][K];  // dropout's keep bits
    if constexpr (kStaged) {
      // The next group's copies go out before this group is waited for (an empty group past the
      // last rows keeps the count of groups in flight).
      const int64_t following = walk.base + walk.stride;
      if (following < rows) {
        stage_in_async<kStaging, kPasses>(a.x, a.x_end, run_at(a.x, following), stage_next, int(threadIdx.x & 31));
      } else {
        close_copy_group();
      }
      await_copy_groups(1);
      __syncwarp();
      x_run = run_at(a.x, walk.base);
      y_run = run_at(a.y, walk.base);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        LoadedUnits<K> u;
        take_staged<kStaging, K, Elem<T>::kBytes>(staged_row(x_run, r), walk.place, u);
        h[r].take(u, cols, walk.place, A(-INFINITY));
      }
      // Mid-vector, y's elements may lie where other lanes' x elements were: every lane has
      // taken its rows before any leaves its output.
      if constexpr (kStaging == Staging::MidVector) __syncwarp();
    } else if constexpr (kPrefetch) {
      h[0].take(next, cols, walk.place, A(-INFINITY));
      const int64_t following = walk.base + walk.stride;
      const bool live = following < rows;
      issue_row<T, K>(a.x, a.x_end, (live ? following : 0) * int64_t(cols), cols, live, walk.place, next);
    } else {
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int64_t row = walk.row(r);
        const bool live = row < rows;
        const int64_t first = (live ? row : 0) * int64_t(cols);
        // Dropout's keep bits depend on where the row lies, not on its values. Taken before the
        // row is realigned (16-bit: kIssueBeforeBits) or loaded, the Philox rounds never share
        // the registers with the row's values: the block kernels, capped at 64 registers, then
        // hold the row without spilling (fp64 rows, whose kernels spilled more that way, take
        // them on the way out).
        if constexpr (kIssueBeforeBits<T, kOp, kPieces>) {
          LoadedUnits<K> u;
          issue_row<T, K>(a.x, a.x_end, first, cols, live, walk.place, u);
          keep_bits<K, V>(a.keys, uint64_t(first), cols, walk.place, live, bits[r]);
          h[r].take(u, cols, walk.place, A(-INFINITY));
        } else {
          if constexpr (kOp == Forward::Dropout && !kGeneric<T>) {
            keep_bits<K, V>(a.keys, uint64_t(first), cols, walk.place, live, bits[r]);
          }
          h[r].load(a.x, a.x_end, first, cols, live, a.x_dtype, walk.place, A(-INFINITY));
        }
      }
    }
    if constexpr (kOp == Forward::FromStats) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int64_t row = walk.row(r);
        const bool live = row < rows;
        const A M = live ? A(a.row_max[row]) : A(0), S = live ? A(a.row_sumexp[row]) : A(1);
        const Shift<A> sh(M);
        if (!a.log_output<kOp>() && Held::kHoldsValues) {
#pragma unroll
          for (int k = 0; k < K; ++k) {
#pragma unroll
            for (int j = 0; j < V; ++j) h[r].set(k, j, sh.exp(h[r].get(k, j)));
          }
        }
        const int64_t first = (live ? row : 0) * int64_t(cols);
        finish_forward<T, Y, A, kOp, K, V>(a, uint64_t(first), cols, live, walk.place, h[r], sh, sh.to_m / S,
                                           LogShift<A>::of(a.log_output<kOp>(), M, S), bits[r]);
      }
      continue;
    }
    // Each row's max M, sum S = sum exp(x - M), what turns a held value into y, and the shift
    // its exps are taken with.
    A M[R], S[R], factor[R], shift_at[R];
    if constexpr (!kBlock) {
      // A segment takes the row max first (shuffles are cheap), so every exp is relative to it.
#pragma unroll
      for (int r = 0; r < R; ++r) {
        M[r] = lanes_max(h[r].max(), shape.width);
        shift_at[r] = M[r];
        const Shift<A> sh(M[r]);
        A sum = A(0);
#pragma unroll
        for (int k = 0; k < K; ++k) {
#pragma unroll
          for (int j = 0; j < V; ++j) {
            const A e = sh.exp(h[r].get(k, j));
            sum += e;
            if (keep_exps) h[r].set(k, j, e);
          }
        }
        h[r].renew();  // the output widens a packed row again (HeldRow::renew)
        sum = lanes_sum(sum, shape.width);
        S[r] = sum * sh.to_m;
        factor[r] = reciprocal(sum);  // the fast form's 2^delta cancels between e and sum
      }
    } else {
      // A block (or cluster) saves a barrier: each thread's partial is relative to its own max.
      Part part[R];
      OwnPartial<A, K, V> own[R];
#pragma unroll
      for (int r = 0; r < R; ++r) own[r] = fold_exps<A, K, V>(h[r], keep_exps, part[r]);
      cluster_reduce(part, scratch, round, shape.cluster);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        M[r] = part[r].m;
        S[r] = part[r].s[0];
        shift_at[r] = own[r].max;
        // A thread whose elements are all -inf (or padding) outputs zeros, or NaN when the
        // whole row is -inf (S = 0).
        factor[r] = (own[r].max == A(-INFINITY) ? A(0) : own[r].to_m * exp_diff(own[r].m, M[r])) / S[r];
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t row = walk.row(r);
      const bool live = row < rows;
      if constexpr (kOp == Forward::Stats) {
        const bool writer = kBlock ? (threadIdx.x == 0 && walk.rank == 0) : walk.place.lane == 0;
        if (live && writer) {
          a.row_max[row] = static_cast<float>(M[r]);
          a.row_sumexp[row] = static_cast<float>(S[r]);
        }
      } else {
        A f = factor[r];
        if constexpr (kOp == Forward::Dropout) f *= a.keys.template scale_as<A>();
        const int64_t first = (live ? row : 0) * int64_t(cols);
        if constexpr (kOp == Forward::Dropout && kGeneric<T>) {
          keep_bits<K, V>(a.keys, uint64_t(first), cols, walk.place, live, bits[r]);
        }
        finish_forward<T, Y, A, kOp, K, V, Held, kStaging, kPieces>(
            a, uint64_t(first), cols, live, walk.place, h[r], Shift<A>(shift_at[r]), f,
            LogShift<A>::of(a.log_output<kOp>(), M[r], S[r]), bits[r], staged_row(y_run, r));
      }
    }
    if constexpr (kStaged) {
      stage_out<kStaging, kPasses>(a.y, y_run, stage, int(threadIdx.x & 31));
      Words* const done = stage;
      stage = stage_next;
      stage_next = done;
    }
  }
  if constexpr (kBlock && kOp == Forward::FromStats) cluster_barrier_at_exit(shape.cluster);
}

// ---- split rows ---------------------------------------------------------------------------------

// Writes a split tile from its held inputs (split_rows_forward, resident_split_rows_forward):
// softmax first takes their exps under the row's shift where the tile holds values (a packed
// tile takes them in finish_forward).
template <class T, class Y, class A, Forward kOp, int K, int V, class Held>
__device__ __forceinline__ void finish_split_tile(const ForwardArgs& a, uint64_t flat0, int limit, const Place& p,
                                                  Held& h, const Shift<A>& sh, A factor, LogShift<A> log,
                                                  const uint32_t (&bits)[K]) {
  if (Held::kHoldsValues && !a.log_output<kOp>()) {
#pragma unroll
    for (int k = 0; k < K; ++k) {
#pragma unroll
      for (int j = 0; j < V; ++j) h.set(k, j, sh.exp(h.get(k, j)));
    }
  }
  finish_forward<T, Y, A, kOp, K, V>(a, flat0, limit, true, p, h, sh, factor, log, bits);
}

// Whether a split block issues the loads of its part's next tile once it has taken the current
// one's words, before it reduces or writes it: two tiles in flight, where a lone row's part (one
// block on its SM) otherwise takes its tiles one memory latency at a time. Where the architecture
// allows it (kSplitTilesAheadOnThisArch); not for run-time types (loaded in place) nor rows moved
// in pieces.
template <class T, class Y, Forward kOp>
constexpr bool kSplitTilesAhead = kSplitTilesAheadOnThisArch && !kGeneric<T> && !kRowsInPieces<kOp, Y>;

template <class T, class Y, class A, Forward kOp>
__global__ void __launch_bounds__(kSplitThreads, kOp == Forward::Dropout ? 2 : 3) split_rows_forward(ForwardArgs a, SplitShape sp, SplitWave w) {
  release_next_wave();
  constexpr int V = kChunkElems<T>;
  constexpr int K = kSplitK;
  using Part = Weighted<A, 1>;
  __shared__ BlockScratch<Part, 1> scratch;
  const int64_t cols = a.cols;
  const WavePart wp(sp, w);
  const int64_t row = wp.row;
  const PartSpan at = wp.span(sp, cols, V);
  const Place p = split_tile_place<K>();

  using Held = HeldRow<T, A, K, V, false, kRowsInPieces<kOp, Y>, true>;
  constexpr bool kAhead = kSplitTilesAhead<T, Y, kOp>;
  // Issues the loads of tile t (its first chunk) of this block's part of the row.
  auto issue_tile = [&](int64_t t, LoadedUnits<K>& u) {
    issue_row<T, K>(a.x, a.x_end, row * cols + t * V, at.limit(t * V, kSplitTile * V), true, p, u);
  };
  if (wp.stats_role) {
    Part acc{A(-INFINITY), {A(0)}};
    LoadedUnits<K> next;
    if constexpr (kAhead) issue_tile(at.begin, next);
    for (int64_t t = at.begin; t < at.end; t += kSplitTile) {
      const int64_t col0 = t * V;
      const int limit = at.limit(col0, kSplitTile * V);
      Held h;
      if constexpr (kAhead) {
        h.take(next, limit, p, A(-INFINITY));
        if (t + kSplitTile < at.end) issue_tile(t + kSplitTile, next);
      } else {
        h.load(a.x, a.x_end, row * cols + col0, limit, true, a.x_dtype, p, A(-INFINITY));
      }
      Part tile;
      fold_exps<A, K, V>(h, false, tile);
      acc = merge(acc, tile);
    }
    Part red[1] = {acc};
    block_reduce(red, scratch, 0);
    publish_partial(sp, w, wp, red[0]);
    return;
  }

  if (at.empty()) return;  // a piece past the end of the row's shorter last part
  await_previous_wave();

  // Normalise: merge the row's partials (the same order in every block of the row), then read
  // the block's piece of its part again, last tile first (the most recently read, the likeliest
  // still in L2).
  A M, S;
  if constexpr (kOp == Forward::FromStats) {
    M = A(a.row_max[row]);
    S = A(a.row_sumexp[row]);
  } else {
    Part acc{A(-INFINITY), {A(0)}};
    const Part* pr = static_cast<const Part*>(w.norm_in) + wp.row_partials(sp);
    for (int i = int(threadIdx.x); i < sp.parts; i += kSplitThreads) acc = merge(acc, pr[i]);
    Part red[1] = {acc};
    block_reduce(red, scratch, 0);
    M = red[0].m, S = red[0].s[0];
  }
  if constexpr (kOp == Forward::Stats) {
    if (wp.part == 0 && wp.piece == 0 && threadIdx.x == 0) {
      a.row_max[row] = static_cast<float>(M);
      a.row_sumexp[row] = static_cast<float>(S);
    }
    return;
  }
  const Shift<A> sh(M);
  A factor = sh.to_m / S;
  if constexpr (kOp == Forward::Dropout) factor *= a.keys.template scale_as<A>();
  const LogShift<A> log = LogShift<A>::of(a.log_output<kOp>(), M, S);
  const int64_t last = at.last_tile(kSplitTile);
  LoadedUnits<K> next;
  if constexpr (kAhead) issue_tile(last, next);
  for (int64_t t = last; t >= at.begin; t -= kSplitTile) {
    const int64_t col0 = t * V;
    const int limit = at.limit(col0, kSplitTile * V);
    uint32_t bits[K];
    if constexpr (kOp == Forward::Dropout) {
      keep_bits<K, V>(a.keys, uint64_t(row * cols + col0), limit, p, true, bits);
    }
    Held h;
    if constexpr (kAhead) {
      h.take(next, limit, p, A(-INFINITY));
      if (t > at.begin) issue_tile(t - kSplitTile, next);
    } else {
      h.load(a.x, a.x_end, row * cols + col0, limit, true, a.x_dtype, p, A(-INFINITY));
    }
    finish_split_tile<T, Y, A, kOp, K, V>(a, uint64_t(row * cols + col0), limit, p, h, sh, factor, log, bits);
  }
}

// ---- resident split rows -------------------------------------------------------------------------

// The tile a resident split block stashes: 16-bit rows packed as loaded, 16 KB a tile as for
// f32, so that a part holds as many columns (held as f32 values, parts of 16-bit rows held half
// as many columns and ran 256 rows of 1M bf16 columns at 2.3 TB/s on the H200 against f32's 3.2).
template <class T, class Y, class A, Forward kOp>
using ResidentHeld = HeldRow<T, A, kSplitK, kChunkElems<T>, kChunkElems<T> == 8, kRowsInPieces<kOp, Y>, true>;

template <class T, class Y, class A, Forward kOp>
__global__ void __launch_bounds__(kSplitThreads, kOp == Forward::Dropout ? 2 : 3)
    resident_split_rows_forward(ForwardArgs a, ResidentSplit<Weighted<A, 1>> rs) {
  static_assert(kOp == Forward::Softmax || kOp == Forward::Dropout, "only operations that write y");
  constexpr int V = kChunkElems<T>;
  constexpr int K = kSplitK;
  using Part = Weighted<A, 1>;
  using Held = ResidentHeld<T, Y, A, kOp>;
  constexpr int kTileWords = kHeldWords<Held> * kSplitThreads;
  extern __shared__ uint4 stash[];
  __shared__ BlockScratch<Part, 1> scratch;
  const PartExchange<Part>& ex = rs.exchange;
  const int64_t cols = a.cols;
  const ResidentPart at(rs, cols, V);
  const Place p = split_tile_place<K>();
  // The block's first row is loaded through registers. Later ones, where x's rows hold whole
  // chunks on 16-byte boundaries, are copied into the stash (resident_split.cuh), each tile as
  // soon as the previous row's tile in that slot is written: 256 rows of 1M f32 columns 5-6%
  // faster on the H200. A lone row copied all at once ran slower (4M f32 columns 13.4 -> 15.2 us).
  const bool copies_ahead = rows_copied_ahead<T, A, Held>(cols, a.x, a.x);
  const int part_tiles = at.tiles(kSplitTile);
  auto copy_tile = [&](int64_t row, int64_t t, uint4* tile_stash) {
    if constexpr (kHeldAsLoaded<T, A, Held>) {
      static_assert(kHeldWords<Held> == K, "one held word per chunk");
      const int64_t col0 = t * V;
      stash_async<T, K, V, kSplitThreads>(tile_stash, static_cast<const T*>(a.x) + row * cols + col0,
                                          at.limit(col0, kSplitTile * V), p, padding_word<T>(A(-INFINITY)));
      close_copy_group();
    }
  };

  unsigned round = 0;
  for (int64_t row = at.group; row < a.rows; row += ex.groups, ++round) {
    // The part's (max, sum), its tiles kept as loaded.
    const bool copied = copies_ahead && round > 0;
    Part acc{A(-INFINITY), {A(0)}};
    uint4* tile_stash = stash;
    int tile_index = 0;
    for (int64_t t = at.begin; t < at.end; t += kSplitTile, tile_stash += kTileWords, ++tile_index) {
      Held h;
      if (copied) {
        await_copy_groups(part_tiles - 1 - tile_index);
        unstash_held<kSplitThreads>(tile_stash, h);
      } else {
        const int64_t col0 = t * V;
        h.load(a.x, a.x_end, row * cols + col0, at.limit(col0, kSplitTile * V), true, a.x_dtype, p, A(-INFINITY));
      }
      Part tile;
      fold_exps<A, K, V>(h, false, tile);
      acc = merge(acc, tile);
      if (!copied) stash_held<kSplitThreads>(tile_stash, h);
    }
    Part red[1] = {acc};
    block_reduce(red, scratch, 0);
    if (threadIdx.x == 0) ex.publish_and_wait(at.group, at.part, round, red[0]);
    __syncthreads();

    red[0] = ex.template merged<kSplitThreads>(at.group, round);
    block_reduce(red, scratch, 1);
    const A M = red[0].m, S = red[0].s[0];
    const Shift<A> sh(M);
    A factor = sh.to_m / S;
    if constexpr (kOp == Forward::Dropout) factor *= a.keys.template scale_as<A>();
    const LogShift<A> log = LogShift<A>::of(a.log_output<kOp>(), M, S);
    const int64_t next_row = row + ex.groups;
    tile_stash = stash;
    for (int64_t t = at.begin; t < at.end; t += kSplitTile, tile_stash += kTileWords) {
      const int64_t col0 = t * V;
      const int limit = at.limit(col0, kSplitTile * V);
      uint32_t bits[K];
      if constexpr (kOp == Forward::Dropout) {
        keep_bits<K, V>(a.keys, uint64_t(row * cols + col0), limit, p, true, bits);
      }
      Held h;
      unstash_held<kSplitThreads>(tile_stash, h);
      finish_split_tile<T, Y, A, kOp, K, V>(a, uint64_t(row * cols + col0), limit, p, h, sh, factor, log, bits);
      // The thread's stores above used the words it read from this slot, so it may refill it.
      if (copies_ahead && next_row < a.rows) copy_tile(next_row, t, tile_stash);
    }
  }
}

}  // namespace cuda_kernels
}  // namespace softmax_internal
