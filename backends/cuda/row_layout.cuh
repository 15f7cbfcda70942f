// SPDX-License-Identifier: Apache-2.0
// Where each thread's elements lie in its row, and how they get there and back for any row
// length and any pointer alignment.
//
// A row is cut into logical chunks of 16 bytes of its layout type T (kChunkElems<T> columns; 8
// bytes for Narrow layouts, storage.cuh): chunk L holds columns [L*V, L*V + V), counted from the
// row's first column whatever that column's address. Threads form segments of G lanes (G <= 32, a
// power of two); segment s owns logical chunks [s*K*G, (s+1)*K*G) of its row, lane l holding
// chunks s*K*G + k*G + l for k = 0..K-1. So which thread holds which column, and so the order of
// every reduction, depends on the row length alone: a row gives the same bits wherever it sits in
// the batch and however its pointers are aligned.
//
// Memory is only touched with aligned 16-byte vectors (8-byte units for a Narrow layout's loads and
// for an f32 row's chunks stored as 16-bit), also for rows that start mid-vector (cols not a
// multiple of V, or pointers offset by some elements). A misaligned row is loaded as the aligned
// vectors that cover it: lane l loads physical vector L (its own index) and takes the rest of its
// logical chunk from physical vector L + 1, which its right neighbour loaded (one shuffle per word;
// the segment's lane 0 loads one extra vector for the segment's last chunk). Stores go the other
// way: physical vector L + 1 is written whole by the owner of logical chunk L, with its neighbour's
// chunk; only a segment's first and last vectors and a row's ends are written element by element.
// Vectors that stick out of the whole array (the first row's head, the last row's tail) are read
// element by element, so nothing outside the caller's buffers is ever touched.
//
// In block mode every lane of a warp works on the same row, so the warp has one shift. The
// realigning loads and stores then branch on it once into code where it is a constant
// (with_shift, window_at; Place::one_row_per_warp, for the kernels whose registers allow it):
// a chunk takes the one to three shuffles of the words it needs and, for 16-bit rows on 2-byte
// boundaries, four funnel shifts, where a shift known only at run time takes four shuffles and
// about twenty selects and shifts each way. Or the realigning goes through a small shared-memory
// stage per warp (warp_realign_stage; 16-bit dropout, Place::realign_in_stage): a pass over the
// warp's k-th chunks writes the 33 units it touches into the stage and reads back 32 chunks at
// the row's shift (stores: the chunks written at the shift, 32 whole units read back).
//
// Kernels bound by their instruction count (dropout into f32) may instead move each thread's
// chunks itself in the widest aligned pieces the row allows (load_chunks_in_pieces,
// store_chunks_in_pieces, at the end of this file): no shuffles, but partly written sectors.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "backends/cuda/storage.cuh"

namespace softmax_internal {
namespace cuda_kernels {

constexpr unsigned kFullMask = 0xffffffffu;

// A thread's place: its lane in its segment, the segment width and the segment's first chunk.
// Chunk indices are counted from the start of the row (or of a split part's tile) and fit in
// 32 bits: the row pointers passed along are moved to that start.
struct Place {
  int lane;
  int width;  // G
  int first;  // s*K*G
  // Block mode (every lane of the warp on one row) in kernels that choose it: a misaligned row is
  // realigned through the warp's shared-memory stage (warp_realign_stage), which the launch
  // provides, instead of by shuffles.
  bool realign_in_stage = false;
  // Block mode: every lane of the warp is on one row, so a misaligned row has one shift, which
  // the realigning loads and stores then know at compile time (with_shift).
  bool one_row_per_warp = false;
  __device__ __forceinline__ int chunk(int k) const { return first + k * width + lane; }
  // Whether the thread's K units of UB bytes all end within the row's first `bytes` bytes.
  template <int K, int UB>
  __device__ __forceinline__ bool units_within(int bytes) const {
    return UB * (chunk(K - 1) + 1) <= bytes;
  }
  // Which of the thread's K chunks is logical chunk L, or -1 when another thread holds it.
  template <int K>
  __device__ __forceinline__ int slot_of(int L) const {
    const int d = L - first - lane;
    const int k = d >> (31 - __clz(width));
    return d >= 0 && (d & (width - 1)) == 0 && k < K ? k : -1;
  }
};

// Bytes [b, b + 16) of the 32 bytes a ++ c, for b in [0, 16): two select stages and a funnel
// shift, no indexing by a run-time value (which would move the words to local memory).
__device__ __forceinline__ Words window16(const Words& a, const Words& c, int b) {
  const uint32_t w[8] = {a.w[0], a.w[1], a.w[2], a.w[3], c.w[0], c.w[1], c.w[2], c.w[3]};
  const int q = b >> 2;
  const uint32_t r = uint32_t(b & 3) * 8u;
  uint32_t t1[7], t2[5];
#pragma unroll
  for (int i = 0; i < 7; ++i) t1[i] = (q & 1) ? w[i + 1] : w[i];
#pragma unroll
  for (int i = 0; i < 5; ++i) t2[i] = (q & 2) ? t1[i + 2] : t1[i];
  Words out;
#pragma unroll
  for (int i = 0; i < 4; ++i) out.w[i] = __funnelshift_r(t2[i], t2[i + 1], r);
  return out;
}

// Bytes [b, b + 8) of the 16 bytes a ++ c (8 bytes each, in their first two words), for b in
// [0, 8).
__device__ __forceinline__ Words window8(const Words& a, const Words& c, int b) {
  const uint32_t w[4] = {a.w[0], a.w[1], c.w[0], c.w[1]};
  const uint32_t r = uint32_t(b & 3) * 8u;
  uint32_t t[3];
#pragma unroll
  for (int i = 0; i < 3; ++i) t[i] = (b & 4) ? w[i + 1] : w[i];
  return Words{{__funnelshift_r(t[0], t[1], r), __funnelshift_r(t[1], t[2], r), 0, 0}};
}

// Bytes [b, b + UB) of the units a ++ c of UB bytes.
template <int UB>
__device__ __forceinline__ Words window(const Words& a, const Words& c, int b) {
  if constexpr (UB == 16) {
    return window16(a, c, b);
  } else {
    static_assert(UB == 8, "units are 16 or 8 bytes");
    return window8(a, c, b);
  }
}

// Bytes [B, B + UB) of the units a ++ c of UB bytes, for a byte offset B in [0, UB) known at
// compile time: the words are picked by the compiler, and shifted only for 2-byte offsets. It
// reads the first ceil(B / 4) words of c.
template <int UB, int B>
__device__ __forceinline__ Words window_at(const Words& a, const Words& c) {
  constexpr int W = UB / 4;
  constexpr int q = B / 4;
  constexpr uint32_t r = uint32_t(B % 4) * 8u;
  uint32_t w[2 * W + 1];
#pragma unroll
  for (int i = 0; i < W; ++i) w[i] = a.w[i], w[W + i] = c.w[i];
  w[2 * W] = 0;
  Words out = {{0, 0, 0, 0}};
#pragma unroll
  for (int i = 0; i < W; ++i) out.w[i] = r == 0 ? w[q + i] : __funnelshift_r(w[q + i], w[q + i + 1], r);
  return out;
}

// Calls f(std::integral_constant<int, S>{}) for S == sh, one of the shifts ES, 2 ES, ... < UB
// of a misaligned row: where every lane of a warp is on one row, its shift is the same in every
// lane, and each branch moves the row's words as window_at does (for a shift held at run time,
// window16 takes some twelve selects a chunk, and the shuffles four words where one to three do).
template <int UB, int ES, int S = ES, class F>
__device__ __forceinline__ void with_shift(int sh, F&& f) {
  if constexpr (S < UB) {
    if (sh == S) {
      f(std::integral_constant<int, S>{});
      return;
    }
    with_shift<UB, ES, S + ES>(sh, f);
  }
}

// Lane l gets the first NW words of `provided` of lane (l + 1) mod G in its segment.
template <int NW = 4>
__device__ __forceinline__ Words from_right(const Words& provided, const Place& p) {
  Words n = {{0, 0, 0, 0}};
  const int src = (p.lane + 1) & (p.width - 1);
#pragma unroll
  for (int i = 0; i < NW; ++i) n.w[i] = __shfl_sync(kFullMask, provided.w[i], src, p.width);
  return n;
}

// One row of one array, as bytes.
struct RowBytes {
  const char* row;    // column 0
  int bytes;          // cols * element size (from `row` on)
  const char* begin;  // the whole array, for the vectors that stick out of it
  const char* end;
  // Bytes from the last UB-aligned address to the row's start.
  template <int UB>
  __device__ __forceinline__ int shift() const {
    return int(reinterpret_cast<uintptr_t>(row) & (UB - 1));
  }
};

// The aligned unit of UB bytes at `p` (16 or 8), reading only the bytes inside [begin, end)
// element by element (ES bytes each) when it sticks out of the array. `in_row`: the caller knows
// the unit lies within the row (most units of a row), which spares the pointer comparisons.
template <int UB, int ES>
__device__ __forceinline__ Words load_unit(const char* p, const RowBytes& r, bool in_row = false) {
  if (in_row || (p >= r.begin && p + UB <= r.end)) {
    if constexpr (UB == 16) {
      return load16(p);
    } else {
      return load8(p);
    }
  }
  Words v = {{0, 0, 0, 0}};
#pragma unroll
  for (int o = 0; o < UB; o += ES) {
    if (p + o >= r.begin && p + o < r.end) {
      const uint64_t e = load_element(p + o, ES);
      if constexpr (ES == 8) {
        v.w[o / 4] = uint32_t(e), v.w[o / 4 + 1] = uint32_t(e >> 32);
      } else if constexpr (ES == 4) {
        v.w[o / 4] = uint32_t(e);
      } else {
        v.w[o / 4] |= uint32_t(e) << (8 * (o & 3));
      }
    }
  }
  return v;
}

// A thread's share of one row as loaded: the aligned units its logical chunks start in, and, for
// a misaligned row, the extra unit lane 0 loads for the segment's last chunk. Issuing the loads
// and realigning them are separate steps, so that a kernel can issue the next row's loads before
// it works on the current row.
template <int K>
struct LoadedUnits {
  Words unit[K];
  Words extra;
  int shift;        // bytes from the last aligned address to the row's start (this lane)
  bool misaligned;  // some lane of the warp has shift != 0
};

// Issues the loads of the thread's K logical chunks of UB bytes (16, or 8 for a Narrow layout)
// of a row whose element size is ES bytes. Units past the row come back as zero words. Every
// lane of the warp must call this together (it votes), also for rows past the end (pass
// live = false).
template <int K, int ES, int UB = 16>
__device__ __forceinline__ void issue_units(const RowBytes& r, bool live, const Place& p, LoadedUnits<K>& out) {
  const int sh = live ? r.shift<UB>() : 0;
  // A warp whose units all lie inside their aligned rows loads them without a test per unit: the
  // tests and their branches took a tenth of the instructions of 16-bit dropout, which its
  // instruction count bounds.
  if (__all_sync(kFullMask, live && sh == 0 && p.units_within<K, UB>(r.bytes))) {
#pragma unroll
    for (int k = 0; k < K; ++k) out.unit[k] = load_unit<UB, ES>(r.row + UB * p.chunk(k), r, true);
    out.extra = Words{{0, 0, 0, 0}};
    out.shift = 0;
    out.misaligned = false;
    return;
  }
  const char* base = r.row - sh;
  const int npv = live ? (r.bytes + sh + UB - 1) / UB : 0;  // physical units touching the row
  // Units stick out of the array only in its first and last rows: a warp on one row whose units
  // all lie inside it loads them without a test per unit (not in the eight-chunk kernels, which
  // spilled 8 bytes with it at their 64 registers).
  const bool inside = npv == 0 || (base >= r.begin && base + UB * npv <= r.end);
  if (K <= 4 && p.one_row_per_warp && __all_sync(kFullMask, inside)) {
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int P = p.chunk(k);
      out.unit[k] = P < npv ? load_unit<UB, ES>(base + UB * P, r, true) : Words{{0, 0, 0, 0}};
    }
    out.shift = sh;
    out.misaligned = sh != 0;  // the same in every lane
    const int extra_p = p.first + K * 32;
    out.extra = (sh != 0 && p.lane == 0 && extra_p < npv) ? load_unit<UB, ES>(base + UB * extra_p, r, true)
                                                         : Words{{0, 0, 0, 0}};
    return;
  }
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int P = p.chunk(k);
    const bool in_row = UB * P >= sh && UB * (P + 1) <= r.bytes + sh;
    out.unit[k] = P < npv ? load_unit<UB, ES>(base + UB * P, r, in_row) : Words{{0, 0, 0, 0}};
  }
  out.shift = sh;
  out.misaligned = __any_sync(kFullMask, sh != 0);
  const int extra_p = p.first + K * p.width;
  out.extra = (out.misaligned && p.lane == 0 && extra_p < npv) ? load_unit<UB, ES>(base + UB * extra_p, r)
                                                                 : Words{{0, 0, 0, 0}};
}

// ---- the warp's stage (block mode) ----

// Slots of 16 bytes in a warp's stage: the 33 units (or chunks) one pass touches. The launch of
// a kernel that realigns in the stage provides kRealignStageBytesPerWarp of dynamic shared memory
// per warp.
constexpr int kRealignStageSlots = 33;
constexpr int kRealignStageBytesPerWarp = kRealignStageSlots * 16;

__device__ __forceinline__ uint32_t* warp_realign_stage() {
  extern __shared__ uint4 row_stage[];
  return reinterpret_cast<uint32_t*>(row_stage + (threadIdx.x >> 5) * kRealignStageSlots);
}

// Unit j (UB bytes) of the stage, or writes it.
template <int UB>
__device__ __forceinline__ Words stage_unit(const uint32_t* st, int j) {
  if constexpr (UB == 16) {
    const uint4 q = reinterpret_cast<const uint4*>(st)[j];
    return Words{{q.x, q.y, q.z, q.w}};
  } else {
    const uint2 q = reinterpret_cast<const uint2*>(st)[j];
    return Words{{q.x, q.y, 0, 0}};
  }
}
template <int UB>
__device__ __forceinline__ void set_stage_unit(uint32_t* st, int j, const Words& u) {
  if constexpr (UB == 16) {
    reinterpret_cast<uint4*>(st)[j] = make_uint4(u.w[0], u.w[1], u.w[2], u.w[3]);
  } else {
    reinterpret_cast<uint2*>(st)[j] = make_uint2(u.w[0], u.w[1]);
  }
}

// The UB bytes at byte UB * j + sh of the stage (0 <= sh < UB; a multiple of ES, which is 2 or
// more): the words they touch, funnel-shifted for 16-bit elements on a 2-byte boundary.
template <int UB, int ES>
__device__ __forceinline__ Words stage_chunk(const uint32_t* st, int j, int sh) {
  constexpr int W = UB / 4;
  const uint32_t* s = st + W * j + (sh >> 2);
  Words out = {{0, 0, 0, 0}};
  if constexpr (ES >= 4) {
#pragma unroll
    for (int i = 0; i < W; ++i) out.w[i] = s[i];
  } else {
    const uint32_t r = uint32_t(sh & 3) * 8u;
    uint32_t a[W + 1];
#pragma unroll
    for (int i = 0; i <= W; ++i) a[i] = s[i];
#pragma unroll
    for (int i = 0; i < W; ++i) out.w[i] = __funnelshift_r(a[i], a[i + 1], r);
  }
  return out;
}

// Writes a chunk's UB bytes at byte UB * j + sh of the stage (as stage_chunk reads them).
template <int UB, int ES>
__device__ __forceinline__ void set_stage_chunk(uint32_t* st, int j, int sh, const Words& c) {
  constexpr int W = UB / 4;
  uint32_t* s = st + W * j + (sh >> 2);
  if (ES >= 4 || (sh & 3) == 0) {
#pragma unroll
    for (int i = 0; i < W; ++i) s[i] = c.w[i];
  } else {  // 16-bit elements on a 2-byte boundary: half words at both ends
    uint16_t* h = reinterpret_cast<uint16_t*>(s);
    h[1] = uint16_t(c.w[0]);
#pragma unroll
    for (int i = 1; i < W; ++i) s[i] = __funnelshift_r(c.w[i - 1], c.w[i], 16);
    h[2 * W] = uint16_t(c.w[W - 1] >> 16);
  }
}

// realign_units through the warp's stage: pass k writes the warp's k-th units to slots 0..31 and
// the segment's next unit (lane 0's next one, or its extra) to slot 32, and each lane reads its
// chunk at the row's shift.
template <int K, int UB, int ES>
__device__ __forceinline__ void realign_units_in_stage(const LoadedUnits<K>& in, const Place& p, Words (&out)[K]) {
  uint32_t* st = warp_realign_stage();
#pragma unroll
  for (int k = 0; k < K; ++k) {
    set_stage_unit<UB>(st, p.lane, in.unit[k]);
    if (p.lane == 0) set_stage_unit<UB>(st, 32, k + 1 < K ? in.unit[k + 1] : in.extra);
    __syncwarp();
    out[k] = stage_chunk<UB, ES>(st, p.lane, in.shift);
    __syncwarp();
  }
}

// realign_units for a warp on one row of shift SH (known at compile time): the first ceil(SH / 4)
// words of the right neighbour's unit complete each chunk.
template <int K, int UB, int SH>
__device__ __forceinline__ void realign_units_shifted(const LoadedUnits<K>& in, const Place& p, Words (&out)[K]) {
  constexpr int NW = (SH + 3) / 4;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    Words provided = {{0, 0, 0, 0}};
#pragma unroll
    for (int i = 0; i < NW; ++i) {
      provided.w[i] = p.lane == 0 ? (k + 1 < K ? in.unit[k + 1] : in.extra).w[i] : in.unit[k].w[i];
    }
    out[k] = window_at<UB, SH>(in.unit[k], from_right<NW>(provided, p));
  }
}

// The thread's K logical chunks from its loaded units: lane l takes the rest of its chunk from
// the unit its right neighbour loaded (by shuffles, or through the warp's stage in block mode
// where the kernel chooses it). Callers mask columns >= cols. Every lane of the warp calls this
// together.
template <int K, int UB, int ES>
__device__ __forceinline__ void realign_units(const LoadedUnits<K>& in, const Place& p, Words (&out)[K]) {
#pragma unroll
  for (int k = 0; k < K; ++k) out[k] = in.unit[k];
  if (!in.misaligned) return;
  if (p.realign_in_stage) {
    realign_units_in_stage<K, UB, ES>(in, p, out);
    return;
  }
  // One shift per warp; not in the eight-chunk kernels, which spilled 28-40 bytes with it.
  if (K <= 4 && p.one_row_per_warp) {
    with_shift<UB, ES>(in.shift, [&](auto s) { realign_units_shifted<K, UB, decltype(s)::value>(in, p, out); });
    return;
  }
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const Words provided = p.lane == 0 ? (k + 1 < K ? in.unit[k + 1] : in.extra) : in.unit[k];
    const Words next = from_right<UB / 4>(provided, p);
    out[k] = window<UB>(in.unit[k], next, in.shift);
  }
}

// Both steps at once: the thread's K logical chunks of a row.
template <int K, int ES, int UB = 16>
__device__ __forceinline__ void load_chunks(const RowBytes& r, bool live, const Place& p, Words (&out)[K]) {
  LoadedUnits<K> u;
  issue_units<K, ES, UB>(r, live, p, u);
  realign_units<K, UB, ES>(u, p, out);
}

// Stores bytes [o, o + S) of a chunk's words at q.
template <int S>
__device__ __forceinline__ void store_piece(char* q, int o, const Words& c) {
  if constexpr (S == 16) {
    store16(q, c);
  } else if constexpr (S == 8) {
    store8(q, c.w[o / 4], c.w[o / 4 + 1]);
  } else if constexpr (S == 4) {
    store4(q, c.w[o / 4]);
  } else {
    static_assert(S == 2, "pieces of 16, 8, 4 or 2 bytes");
    store_element(q, (c.w[o / 4] >> (8 * (o & 3))) & 0xffffu, 2);
  }
}

// The raw bits of element j (ES bytes) of a chunk's words.
template <int ES>
__device__ __forceinline__ uint64_t chunk_element_bits(const Words& c, int j) {
  if constexpr (ES == 8) {
    return uint64_t(c.w[2 * j]) | uint64_t(c.w[2 * j + 1]) << 32;
  } else if constexpr (ES == 4) {
    return c.w[j];
  } else {
    static_assert(ES == 2, "elements of 2, 4 or 8 bytes");
    return (c.w[j >> 1] >> (16 * (j & 1))) & 0xffffu;
  }
}

// Stores elements [j_begin, j_end) of a logical chunk of UB bytes (raw bits of ES bytes each)
// whose column is < cols.
template <int ES, int UB>
__device__ __forceinline__ void store_chunk_elements(char* row, int L, const Words& c, int cols, int j_begin,
                                                     int j_end) {
  constexpr int V = UB / ES;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const int col = L * V + j;
    if (j < j_begin || j >= j_end || col >= cols) continue;
    store_element(row + col * ES, chunk_element_bits<ES>(c, j), ES);
  }
}

// store_chunks of a misaligned row (shift sh != 0, the same for the whole warp) through the
// warp's stage. Pass k writes the warp's k-th chunks at the shift, so that slot j holds unit
// first + 32k + j, and lane j writes that unit: whole where it lies inside the row and in the
// warp's chunks, else the bytes that do, element by element (the row's ends; the head of the
// segment's first unit, whose first sh bytes belong to the previous segment; the tail of the unit
// after the segment's last chunk). Slot 32, the head of the next pass's first unit, is carried to
// slot 0 by lane 0 between passes.
template <int K, int ES, int UB>
__device__ __forceinline__ void store_chunks_in_stage(char* row, int cols, int sh, const Place& p,
                                                    const Words (&c)[K]) {
  uint32_t* st = warp_realign_stage();
  char* base = row - sh;
  const int end = sh + cols * ES;  // the row's end, in bytes from base
#pragma unroll
  for (int k = 0; k < K; ++k) {
    set_stage_chunk<UB, ES>(st, p.lane, sh, c[k]);
    __syncwarp();
    const Words u = stage_unit<UB>(st, p.lane);
    const int P = p.first + 32 * k + p.lane;
    const int lo = k == 0 && p.lane == 0 ? sh : 0;
    const int hi = min(UB, end - UB * P);
    if (lo == 0 && hi == UB) {
      store_piece<UB>(base + UB * P, 0, u);
    } else if (hi > lo) {  // bytes [lo, hi) of the unit, as elements of a chunk at its address
      store_chunk_elements<ES, UB>(base + UB * P, 0, u, hi / ES, lo / ES, UB / ES);
    }
    if (p.lane == 0) {
      const Words carried = stage_unit<UB>(st, 32);
      if (k + 1 < K) {
        set_stage_unit<UB>(st, 0, carried);
      } else {
        const int Q = p.first + 32 * K;
        const int tail = min(sh, end - UB * Q);
        if (tail > 0) store_chunk_elements<ES, UB>(base + UB * Q, 0, carried, tail / ES, 0, UB / ES);
      }
    }
    __syncwarp();
  }
}

// store_chunks of a misaligned row for a warp on one row of shift SH (known at compile time).
// The owner of chunk L writes physical unit L + 1 (its chunk's tail and the head of its right
// neighbour's, the first ceil((UB - SH) / 4) words of it) whole where the unit lies inside the
// row, else the bytes that do; the unit after the warp's last chunk only up to SH (the rest is
// the next warp's first chunk), and lane 0 the head of the warp's first chunk.
template <int K, int ES, int UB, int SH>
__device__ __forceinline__ void store_chunks_shifted(char* row, int cols, const Place& p, const Words (&c)[K]) {
  constexpr int NW = (UB - SH + 3) / 4;
  char* base = row - SH;
  const int end = SH + cols * ES;  // the row's end, in bytes from base
  const int last = p.first + 32 * K;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    Words provided = {{0, 0, 0, 0}};
#pragma unroll
    for (int i = 0; i < NW; ++i) provided.w[i] = p.lane == 0 ? (k + 1 < K ? c[k + 1].w[i] : 0u) : c[k].w[i];
    const Words u = window_at<UB, UB - SH>(c[k], from_right<NW>(provided, p));
    const int U = p.chunk(k) + 1;
    const int hi = min(U == last ? SH : UB, end - UB * U);
    if (hi == UB) {
      store_piece<UB>(base + UB * U, 0, u);
    } else if (hi > 0) {
      store_chunk_elements<ES, UB>(base + UB * U, 0, u, hi / ES, 0, UB / ES);
    }
  }
  if (p.lane == 0) {
    const int hi = min(UB, end - UB * p.first);
    if (hi > SH) {
      const Words head = window_at<UB, UB - SH>(Words{{0, 0, 0, 0}}, c[0]);
      store_chunk_elements<ES, UB>(base + UB * p.first, 0, head, hi / ES, SH / ES, UB / ES);
    }
  }
}

// Writes the thread's K logical chunks (UB bytes each: 16, or 8 for an f32 row stored as
// 16-bit; c[k] for chunk p.chunk(k)) to a row of ES-byte elements, for any alignment of the
// row. Every lane of the warp calls this together.
template <int K, int ES, int UB = 16>
__device__ __forceinline__ void store_chunks(char* row, int cols, bool live, const Place& p, const Words (&c)[K]) {
  constexpr int kElems = UB / ES;
  const int sh = live ? int(reinterpret_cast<uintptr_t>(row) & (UB - 1)) : 0;
  const int bytes = cols * ES;
  if (p.realign_in_stage && sh != 0) {  // one row per warp: sh and live are the same for every lane
    store_chunks_in_stage<K, ES, UB>(row, cols, sh, p, c);
    return;
  }
  if (p.realign_in_stage || !__any_sync(kFullMask, sh != 0)) {
    if (__all_sync(kFullMask, live && p.units_within<K, UB>(bytes))) {  // as issue_units loads
#pragma unroll
      for (int k = 0; k < K; ++k) store_piece<UB>(row + UB * p.chunk(k), 0, c[k]);
      return;
    }
    if (!live) return;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int L = p.chunk(k);
      if (UB * L + UB <= bytes) {
        store_piece<UB>(row + UB * L, 0, c[k]);
      } else if (UB * L < bytes) {
        store_chunk_elements<ES, UB>(row, L, c[k], cols, 0, kElems);
      }
    }
    return;
  }
  // One shift per warp (live in every lane, or in none); not in the eight-chunk kernels of f32
  // rows stored as 16-bit, which spilled 24 bytes with it.
  if ((K <= 4 || UB == 16) && p.one_row_per_warp) {
    with_shift<UB, ES>(sh, [&](auto s) { store_chunks_shifted<K, ES, UB, decltype(s)::value>(row, cols, p, c); });
    return;
  }
  char* base = row - sh;
  const int head = (UB - sh) / ES;  // elements of a chunk in its own physical unit
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int L = p.chunk(k);
    // The next chunk: the right neighbour's; lane 0 hands its next chunk to the segment's
    // previous lane, and the segment's last chunk has no right neighbour here.
    const Words provided = p.lane == 0 ? (k + 1 < K ? c[k + 1] : Words{{0, 0, 0, 0}}) : c[k];
    const Words next = from_right<UB / 4>(provided, p);
    if (!live || UB * L >= bytes) continue;
    if (sh == 0) {  // an aligned row in a warp that also holds misaligned ones
      if (UB * L + UB <= bytes) {
        store_piece<UB>(row + UB * L, 0, c[k]);
      } else {
        store_chunk_elements<ES, UB>(row, L, c[k], cols, 0, kElems);
      }
      continue;
    }
    const bool has_next = !(k == K - 1 && p.lane == p.width - 1);
    const bool is_first = k == 0 && p.lane == 0;
    // Physical unit L (this chunk's head) is written whole by the previous chunk's owner when
    // that owner is in this segment and the unit lies inside the row.
    const bool head_by_prev = !is_first && UB * L - sh >= 0 && UB * L - sh + UB <= bytes;
    if (!head_by_prev) store_chunk_elements<ES, UB>(row, L, c[k], cols, 0, head);
    // Physical unit L + 1: whole when it lies inside the row and the next chunk is here.
    const int p1 = UB * (L + 1) - sh;  // its first byte, relative to the row
    if (has_next && p1 + UB <= bytes) {
      store_piece<UB>(base + UB * (L + 1), 0, window<UB>(c[k], next, UB - sh));
    } else {
      store_chunk_elements<ES, UB>(row, L, c[k], cols, head, kElems);
    }
  }
}

// The widest access (a power of two from the element size up to UB bytes) that every chunk of
// a row starting at `row` is aligned to: UB for an aligned row, else the lowest set bit of its
// misalignment.
template <int UB>
__device__ __forceinline__ int piece_bytes(const void* row) {
  const int sh = int(reinterpret_cast<uintptr_t>(row) & (UB - 1));
  return sh == 0 ? UB : (sh & -sh);
}

// S bytes (S = 16, 8, 4 or 2, aligned) at q into bytes [o, o + S) of a chunk's words.
template <int S>
__device__ __forceinline__ void load_piece(const char* q, int o, Words& v) {
  if constexpr (S == 16) {
    v = load16(q);
  } else if constexpr (S == 8) {
    const Words h = load8(q);
    v.w[o / 4] = h.w[0], v.w[o / 4 + 1] = h.w[1];
  } else if constexpr (S == 4) {
    v.w[o / 4] = *reinterpret_cast<const uint32_t*>(q);
  } else {
    static_assert(S == 2, "pieces of 16, 8, 4 or 2 bytes");
    v.w[o / 4] |= uint32_t(*reinterpret_cast<const uint16_t*>(q)) << (8 * (o & 3));
  }
}

// The logical chunk of UB bytes at q (S-aligned) as pieces of S bytes; a piece that sticks out
// of the array is read element by element (ES bytes each), only the bytes inside it.
template <int UB, int S, int ES>
__device__ __forceinline__ Words load_chunk(const char* q, const RowBytes& r) {
  Words v = {{0, 0, 0, 0}};
#pragma unroll
  for (int o = 0; o < UB; o += S) {
    if (q + o + S <= r.end) {
      load_piece<S>(q + o, o, v);
      continue;
    }
#pragma unroll
    for (int e = 0; e < S; e += ES) {
      if (q + o + e < r.end) {
        const uint64_t x = load_element(q + o + e, ES);
        if constexpr (ES == 8) {
          v.w[(o + e) / 4] = uint32_t(x), v.w[(o + e) / 4 + 1] = uint32_t(x >> 32);
        } else {
          v.w[(o + e) / 4] |= uint32_t(x) << (8 * ((o + e) & 3));
        }
      }
    }
  }
  return v;
}

// The thread's K logical chunks read in pieces of the widest of S, S/2, ..., ES bytes that s
// allows; chunks past the row (n bytes) are zero. A chunk that the row's end cuts may stick out
// of the array, so its pieces are read with the array-end test. kLastChunkOnce (block kernels):
// chunks inside the row load untested and the cut chunk once, by its holder, after them; one copy
// of that path rather than one per chunk. With it inlined per chunk (and per piece size), the
// block kernels that move rows in pieces had outgrown the instruction cache (H200, f32 dropout of
// 4097-column rows, which come in every alignment: a third of the stall samples waited for
// instructions; 2.6 -> 3.3 TB/s). In segment kernels every warp holds rows' ends, and the
// separate pass cost f32 dropout of 127 columns 6%: they test each chunk.
template <int S, int K, int ES, int UB, bool kLastChunkOnce>
__device__ __forceinline__ void load_in_pieces(const RowBytes& r, int n, const Place& p, int s, Words (&out)[K]) {
  if constexpr (S > ES) {
    if (s < S) {
      load_in_pieces<S / 2, K, ES, UB, kLastChunkOnce>(r, n, p, s, out);
      return;
    }
  }
  if constexpr (!kLastChunkOnce) {
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int L = p.chunk(k);
      out[k] = UB * L < n ? load_chunk<UB, S, ES>(r.row + UB * L, r) : Words{{0, 0, 0, 0}};
    }
  } else {
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int L = p.chunk(k);
      out[k] = Words{{0, 0, 0, 0}};
      if (UB * (L + 1) <= n) {
#pragma unroll
        for (int o = 0; o < UB; o += S) load_piece<S>(r.row + UB * L + o, o, out[k]);
      }
    }
    const int kt = n % UB != 0 ? p.slot_of<K>(n / UB) : -1;
    if (kt >= 0) {
      const Words t = load_chunk<UB, S, ES>(r.row + UB * (n / UB), r);
#pragma unroll
      for (int k = 0; k < K; ++k) {
        if (k == kt) out[k] = t;
      }
    }
  }
}

// The same as load_chunks, each thread reading its own chunks with the widest loads the row's
// alignment allows (the later pieces of a chunk hit in L1): no votes, shuffles or extra vectors.
// Fewer instructions for kernels bound by their instruction count; softmax rows ran slower so
// (f32 rows of 127 columns 3.0 -> 2.7 TB/s, misaligned rows up to half with the stores below).
template <int K, int ES, int UB = 16, bool kLastChunkOnce = false>
__device__ __forceinline__ void load_chunks_in_pieces(const RowBytes& r, bool live, const Place& p, Words (&out)[K]) {
  const int s = live ? piece_bytes<UB>(r.row) : UB;
  if constexpr (ES == 2) {
    if (__any_sync(kFullMask, s == 2)) {
      load_chunks<K, ES, UB>(r, live, p, out);
      return;
    }
  }
  load_in_pieces<UB, K, ES, UB, kLastChunkOnce>(r, live ? r.bytes : 0, p, s, out);
}

// Writes the thread's K logical chunks in pieces of the widest of S, S/2, ..., ES bytes that
// s allows; the row's last chunk, when the row ends inside it, element by element.
template <int S, int K, int ES, int UB>
__device__ __forceinline__ void store_in_pieces(char* row, int cols, const Place& p, int s, const Words (&c)[K]) {
  if constexpr (S > ES) {
    if (s < S) {
      store_in_pieces<S / 2, K, ES, UB>(row, cols, p, s, c);
      return;
    }
  }
  const int bytes = cols * ES;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int L = p.chunk(k);
    if (UB * L + UB <= bytes) {
#pragma unroll
      for (int o = 0; o < UB; o += S) store_piece<S>(row + UB * L + o, o, c[k]);
    } else if (UB * L < bytes) {
      store_chunk_elements<ES, UB>(row, L, c[k], cols, 0, UB / ES);
    }
  }
}

// The same as store_chunks, each thread writing its own chunks with the widest stores the row's
// alignment allows: no shuffles and no element-wise segment ends, so far fewer instructions for
// a misaligned row, but pieces from lanes 16 bytes apart leave each sector partly written by
// several instructions, which costs L2 bandwidth: f32 softmax rows one element off alignment
// ran 3.4 -> 1.7 TB/s at 32K columns on the H200, bf16 rows 3.2 -> 1.3 at 4K.
template <int K, int ES, int UB = 16>
__device__ __forceinline__ void store_chunks_in_pieces(char* row, int cols, bool live, const Place& p,
                                                       const Words (&c)[K]) {
  const int s = live ? piece_bytes<UB>(row) : UB;
  if constexpr (ES == 2) {
    if (__any_sync(kFullMask, s == 2)) {
      store_chunks<K, ES, UB>(row, cols, live, p, c);
      return;
    }
  }
  if (live) store_in_pieces<UB, K, ES, UB>(row, cols, p, s, c);
}

}  // namespace cuda_kernels
}  // namespace softmax_internal
