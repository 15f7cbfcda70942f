// SPDX-License-Identifier: Apache-2.0
// The dropout keep bits on the device: the rule of backends/common/philox.h (Philox4x32-10,
// cuRAND's counter layout), evaluated once per group of four flat elements and shared between
// neighbouring chunks, with the word compared against an integer threshold instead of
// converting it to a float.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/common/philox.h"
#include "backends/cuda/row_layout.cuh"

namespace softmax_internal {
namespace cuda_kernels {

constexpr int kPhiloxRounds = 10;

// Everything a kernel needs to decide keep bits: the key schedule, the offset, and the threshold
// (keep when the 32-bit word >= threshold, equivalent to u > p; see dropout_keep_threshold).
// The round keys are the same for every thread: computed once on the host, they sit in the
// kernel's parameter space, where each round's XOR reads them as a constant operand instead of
// spending two additions per round per evaluation on them.
struct DropoutKeys {
  uint32_t round_k0[kPhiloxRounds];  // k0 + r * 0x9E3779B9, r = 0..9
  uint32_t round_k1[kPhiloxRounds];  // k1 + r * 0xBB67AE85
  uint64_t offset;
  uint32_t threshold;
  float scale;     // 1 / (1 - p) in fp32 (dropout_scale)
  double scale64;  // the same in fp64, for fp64 arithmetic
  template <class A>
  __device__ __forceinline__ A scale_as() const {
    if constexpr (sizeof(A) == 8) {
      return scale64;
    } else {
      return scale;
    }
  }
};

// The host side of DropoutKeys: the key schedule of the 64-bit seed.
inline void set_round_keys(DropoutKeys* d, uint64_t seed) {
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int r = 0; r < kPhiloxRounds; ++r) {
    d->round_k0[r] = k0;
    d->round_k1[r] = k1;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
}

// Philox4x32-10 with each 32x32 -> 64 product as one wide multiply.
__device__ __forceinline__ void philox_rounds(uint32_t (&c)[4], const DropoutKeys& d) {
#pragma unroll
  for (int round = 0; round < kPhiloxRounds; ++round) {
    const uint64_t p0 = uint64_t(0xD2511F53u) * c[0];
    const uint64_t p1 = uint64_t(0xCD9E8D57u) * c[2];
    const uint32_t n0 = uint32_t(p1 >> 32) ^ c[1] ^ d.round_k0[round];
    const uint32_t n2 = uint32_t(p0 >> 32) ^ c[3] ^ d.round_k1[round];
    c[0] = n0;
    c[1] = uint32_t(p1);
    c[2] = n2;
    c[3] = uint32_t(p0);
  }
}

// Bit j set when word j of a Philox block is kept.
__device__ __forceinline__ uint32_t keep_nibble(const uint32_t (&w)[4], uint32_t threshold) {
  return uint32_t(w[0] >= threshold) | uint32_t(w[1] >= threshold) << 1 | uint32_t(w[2] >= threshold) << 2 |
         uint32_t(w[3] >= threshold) << 3;
}

// Keep bits of the four flat elements 4g .. 4g+3 (bit j: element 4g + j kept), for an offset
// that is (kStraddle false) or is not a multiple of 4.
template <bool kStraddle>
__device__ __forceinline__ uint32_t keep4_at(const DropoutKeys& d, uint64_t g) {
  const uint64_t lo = d.offset >> 2;
  uint32_t a[4] = {uint32_t(lo), uint32_t(lo >> 32), uint32_t(g), uint32_t(g >> 32)};
  if constexpr (!kStraddle) {
    philox_rounds(a, d);
    return keep_nibble(a, d.threshold);
  } else {
    // The draw straddles two blocks: words [phase, 4) of this one, [0, phase) of the next. Both
    // blocks' bits side by side in one byte, shifted by the phase (no word is indexed by a
    // run-time value, which would move the blocks to local memory).
    const unsigned phase = unsigned(d.offset & 3u);
    uint32_t b[4] = {a[0] + 1u, a[1] + (a[0] == 0xffffffffu ? 1u : 0u), a[2], a[3]};
    if (b[0] == 0 && b[1] == 0) {  // carry into the upper half of the counter (curand's increment)
      if (++b[2] == 0) ++b[3];
    }
    philox_rounds(a, d);
    philox_rounds(b, d);
    return ((keep_nibble(a, d.threshold) | keep_nibble(b, d.threshold) << 4) >> phase) & 0xFu;
  }
}

__device__ __forceinline__ uint32_t keep4(const DropoutKeys& d, uint64_t g) {
  return (d.offset & 3u) == 0 ? keep4_at<false>(d, g) : keep4_at<true>(d, g);
}

// The bits of the groups that start inside C consecutive chunks of a round (chunk c's V / 4
// groups from g + c * step), chunk c at bit c * V; chunks from `left` columns on get zero bits,
// and a round wholly past the row evaluates nothing.
template <int C, int V, bool kStraddle>
__device__ __forceinline__ uint32_t round_bits(const DropoutKeys& d, uint64_t g, uint64_t step, int left,
                                               int col_step) {
  constexpr int kGroups = V / 4;  // per chunk
  uint32_t own = 0;
  if (left > 0) {
#pragma unroll
    for (int c = 0; c < C; ++c) {
      uint32_t chunk = 0;
#pragma unroll
      for (int i = 0; i < kGroups; ++i) chunk |= keep4_at<kStraddle>(d, g + uint64_t(c) * step + i) << (4 * i);
      own |= (left > c * col_step ? chunk : 0u) << (c * V);
    }
  }
  return own;
}

// The bits of the groups g, g + 1, ... that start inside each of a thread's K chunks of V
// elements, chunk k's V / 4 groups from g + k * step, packed at bit k * V. `left` counts the
// row's columns from the thread's first chunk on; chunks past the row get zero bits, and a round
// wholly past it evaluates nothing. Each round of the loop evaluates four Philox blocks side by
// side (four groups, or two that straddle two blocks each): enough independent work to hide the
// rounds' latency, few enough registers (unrolled all the way, the compiler interleaves every
// evaluation of the thread and runs out of them). A K that is not a multiple of a round's chunks
// ends with a shorter round.
template <int K, int V, bool kStraddle>
__device__ __forceinline__ uint32_t group_bits(const DropoutKeys& d, uint64_t g, uint64_t step, int left,
                                               int col_step) {
  constexpr int kGroups = V / 4;                    // per chunk
  constexpr int kRound = kStraddle ? 2 : 4;          // groups per round (a straddling group: two blocks)
  constexpr int kFit = kGroups >= kRound ? 1 : kRound / kGroups;  // chunks whose groups fill a round
  constexpr int kChunks = kFit < K ? kFit : K;                     // per round
  constexpr int kTail = K % kChunks;                               // chunks of the last, shorter round
  constexpr int kWhole = K - kTail;                                // chunks of whole rounds
  uint32_t packed = 0;
  // The rounds' bits enter at the top and move down: chunk k ends at bit k * V.
#pragma unroll 1
  for (int k = 0; k < kWhole; k += kChunks) {
    const uint32_t own = round_bits<kChunks, V, kStraddle>(d, g, step, left, col_step);
    if constexpr (kChunks == K) {
      packed = own;
    } else {
      packed = (packed >> (kChunks * V)) | (own << ((K - kChunks) * V));
    }
    g += kChunks * step;
    left -= kChunks * col_step;
  }
  if constexpr (kTail > 0) {
    const uint32_t own = round_bits<kTail, V, kStraddle>(d, g, step, left, col_step);
    packed = (packed >> (kTail * V)) | (own << ((K - kTail) * V));
  }
  return packed;
}

// Keep bits of each of a thread's K chunks of V elements (V a multiple of 4), chunk k starting
// at flat element row_flat + chunk(k) * V; chunks from column `cols` on are not evaluated (their
// bits are zero: a row's last warp may hold a single chunk of it). Each group of four is
// evaluated once: a chunk evaluates the V/4 groups that start inside it and takes the bits of
// the group it starts in the middle of (when row_flat is not a multiple of 4) from the previous
// chunk's owner.
// Every lane of the warp calls this together.
template <int K, int V>
__device__ __forceinline__ void chunk_keep_bits(const DropoutKeys& d, uint64_t row_flat, int cols, const Place& p,
                                                bool live, uint32_t (&bits)[K]) {
  static_assert(V % 4 == 0 && V < 32 && K * V <= 32, "groups of four, packed in one word");
  const unsigned a = unsigned(row_flat & 3u);
  const int left = cols - p.chunk(0) * V;  // the row's columns from the thread's first chunk on
  uint32_t packed = 0;
  if (live) {
    const uint64_t g = (row_flat >> 2) + (a != 0 ? 1u : 0u) + uint64_t(p.chunk(0)) * (V / 4);
    const uint64_t step = uint64_t(p.width) * (V / 4);
    const int col_step = p.width * V;
    packed = (d.offset & 3u) == 0 ? group_bits<K, V, false>(d, g, step, left, col_step)
                                  : group_bits<K, V, true>(d, g, step, left, col_step);
  }
#pragma unroll
  for (int k = 0; k < K; ++k) bits[k] = (packed >> (k * V)) & ((1u << V) - 1u);
  if (!__any_sync(kFullMask, a != 0)) return;
  const int src = (p.lane - 1) & (p.width - 1);
  uint32_t first_prev = 0;  // the segment's first chunk takes its group from before the segment
  if (a != 0 && live && p.lane == 0 && left > 0) {
    first_prev = keep4(d, (row_flat + uint64_t(p.chunk(0)) * V) >> 2);
  }
#pragma unroll
  for (int k = 0; k < K; ++k) {
    // The group this chunk starts in the middle of is the previous chunk's last one: lane l - 1
    // in the same round, or (lane 0) the last lane of the previous round.
    const uint32_t last_k = (packed >> (k * V + V - 4)) & 0xFu;
    const uint32_t last_prev = k > 0 ? (packed >> ((k - 1) * V + V - 4)) & 0xFu : 0u;
    const uint32_t provided = p.lane == p.width - 1 ? last_prev : last_k;
    uint32_t prev = __shfl_sync(kFullMask, provided, src, p.width);
    if (a == 0) continue;
    if (k == 0 && p.lane == 0) prev = first_prev;
    bits[k] = ((prev >> a) | (bits[k] << (4 - a))) & ((1u << V) - 1u);
  }
}

// Keep bits of one chunk of 2 elements (f64), evaluated directly.
__device__ __forceinline__ uint32_t keep_bits2(const DropoutKeys& d, uint64_t f) {
  const uint32_t g = keep4(d, f >> 2);
  const unsigned a = unsigned(f & 3u);
  if (a < 3) return (g >> a) & 3u;
  return (g >> 3) | ((keep4(d, (f >> 2) + 1) & 1u) << 1);
}

}  // namespace cuda_kernels
}  // namespace softmax_internal
