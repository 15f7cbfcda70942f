// SPDX-License-Identifier: Apache-2.0
// What the resident split kernels share (resident_split_rows_forward, forward_kernels.cuh, and
// resident_split_rows_backward, backward_kernels.cuh): rows cut into parts of whole tiles, one
// block a part, in one cooperative launch; each block keeps its part's tiles in shared memory as
// they were loaded (the stash), so the row is read once, and exchanges its part's partial with
// the other blocks of its row through global memory (the part exchange).
//
// The grid is `groups` groups of `parts` blocks; group g's blocks take rows g, g + groups, ...
// in rounds. In each round every block publishes its part's partial, then waits until all
// `parts` blocks of its group have published that round's, then reads them all. Partials are
// double-buffered by round parity, and arrivals are counted on one counter per group that is
// zeroed before the launch and never reset: round r is complete at (r + 1) * parts arrivals.
//
// Why this cannot deadlock or race: the launch is cooperative, so every block is resident and a
// block only ever waits on running peers of its own group, which do not wait on anything of a
// later round. A block that writes round r + 2's partials (the buffer of round r) has seen the
// whole group arrive in round r + 1, and a peer arrives there only after reading round r's.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "backends/cuda/row_frame.cuh"
#include "backends/cuda/row_math.cuh"
#include "backends/cuda/split_parts.cuh"

namespace softmax_internal {
namespace cuda_kernels {

// A partial read past L1 (which is not coherent with the peers' writes).
template <class A, int N>
__device__ __forceinline__ Weighted<A, N> load_past_l1(const Weighted<A, N>* p) {
  Weighted<A, N> r;
  r.m = __ldcg(&p->m);
#pragma unroll
  for (int i = 0; i < N; ++i) r.s[i] = __ldcg(&p->s[i]);
  return r;
}
template <class A, int N>
__device__ __forceinline__ Sums<A, N> load_past_l1(const Sums<A, N>* p) {
  Sums<A, N> r;
#pragma unroll
  for (int i = 0; i < N; ++i) r.s[i] = __ldcg(&p->s[i]);
  return r;
}

template <class Part>
struct PartExchange {
  Part* partials;      // [2][groups][parts]
  unsigned* arrivals;  // [groups], zero at launch
  int parts;
  int groups;

  __device__ __forceinline__ Part* round_slots(int group, unsigned round) const {
    return partials + (size_t(round & 1u) * unsigned(groups) + unsigned(group)) * unsigned(parts);
  }

  // Thread 0 of the block of `part`: publishes `mine` for this round, then returns once the
  // whole group has. The caller's __syncthreads() then carries the acquire to the other threads.
  __device__ __forceinline__ void publish_and_wait(int group, int part, unsigned round, const Part& mine) const {
    round_slots(group, round)[part] = mine;
    unsigned* counter = arrivals + group;
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(counter) : "memory");
    const unsigned complete = (round + 1u) * unsigned(parts);
    for (;;) {
      unsigned seen;
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(counter) : "memory");
      if (seen >= complete) break;
      __nanosleep(32);
    }
  }

  // The row's partial: every part's, merged in the same order in every block of the group.
  template <int kThreads>
  __device__ __forceinline__ Part merged(int group, unsigned round) const {
    Part acc = Identity<Part>::value();
    const Part* slots = round_slots(group, round);
    for (int i = int(threadIdx.x); i < parts; i += kThreads) acc = merge(acc, load_past_l1(slots + i));
    return acc;
  }
};

// A launch: parts of `part_chunks` chunks (whole tiles), exchanging Part partials.
template <class Part>
struct ResidentSplit {
  int64_t part_chunks;
  PartExchange<Part> exchange;
};

// A block's group and its part of the group's rows.
struct ResidentPart : PartSpan {
  int group;
  int part;
  template <class Part>
  __device__ __forceinline__ ResidentPart(const ResidentSplit<Part>& rs, int64_t cols, int V)
      : PartSpan(int64_t(int(blockIdx.x) % rs.exchange.parts) * rs.part_chunks, rs.part_chunks, cols, V),
        group(int(blockIdx.x) / rs.exchange.parts),
        part(int(blockIdx.x) % rs.exchange.parts) {}
};

// A part's tiles over its group's rows, row by row, as one stream whose loads a block issues
// ahead of the tile it works on (tiles of kThreads * K chunks of V columns): issue() the tile
// of each array the kernel reads, then advance(). Past the group's last row the stream issues
// no loads and yields zeros.
template <class T, int K, int V, int kThreads>
struct TileStream {
  static constexpr int64_t kTileChunks = int64_t(kThreads) * K;
  const ResidentPart& at;
  int64_t row;   // the next tile's row and first chunk
  int64_t tile;
  int64_t row_step;
  int64_t rows;
  int64_t cols;
  __device__ __forceinline__ TileStream(const ResidentPart& part, int64_t row_step_, int64_t rows_, int64_t cols_)
      : at(part), row(part.group), tile(part.begin), row_step(row_step_), rows(rows_), cols(cols_) {}
  __device__ __forceinline__ void issue(const void* base, const char* end, const Place& p, LoadedUnits<K>& u) const {
    static_assert(!kGeneric<T>, "run-time types are loaded in place, not issued ahead");
    const bool live = row < rows;
    const int64_t col0 = tile * V;
    issue_row<T, K>(base, end, live ? row * cols + col0 : 0, live ? at.limit(col0, kTileChunks * V) : 0, live, p, u);
  }
  __device__ __forceinline__ void advance() {
    tile += kTileChunks;
    if (tile >= at.end) tile = at.begin, row += row_step;
  }
};

// Shared memory one held tile (a HeldRow: the values or packed chunks a thread holds) takes per
// thread, in 16-byte words; consecutive threads take consecutive words, so no bank conflicts.
template <class Held>
constexpr int kHeldWords = int(sizeof(Held) / 16);

template <int kThreads, class Held>
__device__ __forceinline__ void stash_held(uint4* tile, const Held& h) {
  static_assert(sizeof(Held) % 16 == 0, "a held tile fills whole 16-byte words");
#pragma unroll
  for (int i = 0; i < kHeldWords<Held>; ++i) {
    uint4 w;
    memcpy(&w, reinterpret_cast<const char*>(&h) + 16 * i, 16);
    tile[i * kThreads + threadIdx.x] = w;
  }
}

template <int kThreads, class Held>
__device__ __forceinline__ void unstash_held(const uint4* tile, Held& h) {
#pragma unroll
  for (int i = 0; i < kHeldWords<Held>; ++i) {
    const uint4 w = tile[i * kThreads + threadIdx.x];
    memcpy(reinterpret_cast<char*>(&h) + 16 * i, &w, 16);
  }
}

// ---- tiles copied into the stash asynchronously -----------------------------------------------
// Rows of whole chunks on 16-byte boundaries need no realigning, so a tile can go straight from
// global to shared memory with `cp.async`, in the words stash_held would write: no registers hold
// it in flight, so a block can have its next row's tiles on the way while it writes this row's.

// Whether a held tile keeps its 16-byte chunks as the bytes loaded (f32 values, 16-bit rows
// packed), so that copied words are the held ones: not 16-bit rows held in 8-byte chunks
// (Narrow), nor the run-time types of the generic kernels.
template <class T, class A, class Held>
constexpr bool kHeldAsLoaded = !kGeneric<T> && kChunkBytes<T> == 16 && Elem<T>::kBytes <= 4 &&
                               (!Held::kHoldsValues || sizeof(A) == size_t(Elem<T>::kBytes));

// Whether a block may copy its later rows ahead: the tile is held as loaded and every row of the
// arrays at p and q (rows of `cols` elements) starts on a 16-byte boundary with whole chunks.
template <class T, class A, class Held>
__device__ __forceinline__ bool rows_copied_ahead(int64_t cols, const void* p, const void* q) {
  if constexpr (kHeldAsLoaded<T, A, Held>) {
    return (reinterpret_cast<uintptr_t>(p) | reinterpret_cast<uintptr_t>(q)) % 16 == 0 && cols % kChunkElems<T> == 0;
  } else {
    return false;
  }
}

// A stash word of padding elements, as a held tile keeps them.
template <class T, class A>
__device__ __forceinline__ uint4 padding_word(A pad) {
  static_assert(Elem<T>::kBytes == 4 || Elem<T>::kBytes == 2, "f32 or 16-bit elements");
  const uint32_t b = uint32_t(element_bits(pad, Elem<T>::kDtype));
  const uint32_t w = Elem<T>::kBytes == 4 ? b : (b | b << 16);
  return make_uint4(w, w, w, w);
}

// Copies a tile into its stash words: word k of the thread takes chunk p.chunk(k) of the tile
// that starts at `first` (16-byte aligned); chunks at or past `limit` columns take `pad`.
template <class T, int K, int V, int kThreads>
__device__ __forceinline__ void stash_async(uint4* tile, const T* first, int limit, const Place& p, uint4 pad) {
  static_assert(kChunkBytes<T> == 16 && sizeof(T) == Elem<T>::kBytes, "whole 16-byte chunks of T");
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int c = p.chunk(k);
    uint4* dst = tile + k * kThreads + threadIdx.x;
    if (c * V < limit) {
      copy_async16(dst, first + int64_t(c) * V);
    } else {
      *dst = pad;
    }
  }
}

}  // namespace cuda_kernels
}  // namespace softmax_internal
