// SPDX-License-Identifier: Apache-2.0
// A warp's rows moved through shared memory. A segment of w lanes holds a row as 16-byte chunks
// w apart, so where w is small (one or two lanes: rows of up to 32 f32 or 64 16-bit columns)
// each vector load or store of the warp touches 32 / w rows, one or two sectors of each, and the
// L2 serves many partial requests per instruction (Nsight Compute: L2 throughput at 92% of peak
// with DRAM at 73% for rows of 32 f32 columns). A row that starts mid-vector (a length that is
// not a multiple of the vector, or a pointer off a 16-byte boundary) is worse still: its
// segment realigns every chunk by shuffles, and its vectors straddle rows. But a warp's rows are
// one contiguous run of elements whatever their length and alignment: the warp loads (and
// stores) that run as the aligned 16-byte vectors that cover it, consecutive lanes on
// consecutive vectors, through a shared-memory stage, and each lane takes (and leaves) its own
// chunks there in the segment's layout. Where every row starts and ends on a 16-byte boundary
// (Staging::Aligned) a chunk is one stage slot; otherwise (Staging::MidVector) a lane takes its
// chunk from the two slots it straddles and leaves it word by word, the run's two end
// vectors are stored element by element (their other elements belong to the neighbouring warps'
// rows), and vectors that stick out of the whole array are loaded so. Each warp has two stages:
// the next group's vectors are copied into one (`cp.async`, no registers held) while the warp
// works on the rows in the other; with one, a warp's load, reduce and store ran one after the
// other with nothing in flight between (on an H100, f32 rows of 31 columns at 73% of the copy
// with one stage, 97% with two).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/row_layout.cuh"
#include "backends/cuda/storage.cuh"

namespace softmax_internal {
namespace cuda_kernels {

// How a segment kernel moves its warps' rows (register_rows_forward): by itself, or through
// the stage with every row on 16-byte boundaries, or through the stage from mid-vector.
enum class Staging { None, Aligned, MidVector };

// The stage slot of a warp's chunk q: the chunk index with its low three bits XORed by the next
// three, so that the lanes reading one chunk of consecutive rows (rows of 2-16 chunks) and the
// lanes reading consecutive chunks both fall on distinct 16-byte bank groups. It stays within
// q's aligned group of eight slots.
__device__ __forceinline__ int stage_slot(int q) { return q ^ ((q >> 3) & 7); }

// A stage slot's 16 bytes as one 16-byte shared-memory access (through Words, 4-byte aligned,
// the compiler would issue four word accesses); the stage is 16-byte aligned for its copies.
__device__ __forceinline__ Words slot_at(const Words* stage, int slot) {
  const uint4 v = reinterpret_cast<const uint4*>(stage)[slot];
  return Words{{v.x, v.y, v.z, v.w}};
}
__device__ __forceinline__ void set_slot(Words* stage, int slot, const Words& w) {
  reinterpret_cast<uint4*>(stage)[slot] = make_uint4(w.w[0], w.w[1], w.w[2], w.w[3]);
}

// Slots of a warp's stage for segment kernels of K chunks and R rows a lane: the warp's rows hold
// at most 32 * K * R chunks of elements, which straddle one vector more when they start
// mid-vector, and stage_slot keeps that last vector within its group of eight.
template <Staging S, int K, int R>
constexpr int kStageSlots = 32 * K * R + (S == Staging::MidVector ? 8 : 0);

// Passes of the warp over its run's vectors (32 a pass).
template <Staging S, int K, int R>
constexpr int kStagePasses = K * R + (S == Staging::MidVector ? 1 : 0);

// A warp's run of rows in one array: elements [first, first + count), the first of them
// `lead` elements past the 16-byte boundary it follows (stage element `lead` of slot 0).
template <int ES>
struct StageRun {
  static constexpr int V = 16 / ES;
  int64_t first;
  int count;
  int lead;
  __device__ __forceinline__ StageRun(const void* base, int64_t first_, int count_) : first(first_), count(count_) {
    lead = int((reinterpret_cast<uintptr_t>(base) + uintptr_t(first_) * ES) & 15) / ES;
  }
  // Vectors that cover the run.
  __device__ __forceinline__ int vectors() const { return (lead + count + V - 1) / V; }
  // The 16-byte boundary at or before element `first`.
  __device__ __forceinline__ const char* vector0(const void* base) const {
    return static_cast<const char*>(base) + (first - lead) * ES;
  }
};

// Issues the copies of the run's vectors of an array that ends at `end` into stage slots, lane l
// taking vectors l, l + 32, ..., as one group of asynchronous copies (`cp.async`, no registers
// hold them in flight), so that a warp has its next rows on the way while it works on these;
// MidVector: vectors that stick out of the array are read element by element, at once. The stage
// is ready to read once the group has landed (await_copy_groups) and the warp has met
// (__syncwarp).
template <Staging S, int N, int ES>
__device__ __forceinline__ void stage_in_async(const void* base, const char* end, const StageRun<ES>& run,
                                               Words* stage, int lane) {
  const char* v0 = run.vector0(base);
  const RowBytes array{nullptr, 0, static_cast<const char*>(base), end};
  const int n = run.vectors();
#pragma unroll
  for (int j = 0; j < N; ++j) {
    const int q = j * 32 + lane;
    if (q >= n) continue;
    const char* v = v0 + 16 * q;
    if (S == Staging::Aligned || (v >= array.begin && v + 16 <= array.end)) {
      copy_async16(stage + stage_slot(q), v);
    } else {
      set_slot(stage, stage_slot(q), load_unit<16, ES>(v, array));
    }
  }
  close_copy_group();
}

// The run's stage slots out to its vectors of an array, lane l storing vectors l, l + 32, ...;
// MidVector: the first and last vectors, where the run starts or ends mid-vector, element by
// element. Every lane of the warp calls this together, after leaving its chunks; the stage may
// be refilled after it.
template <Staging S, int N, int ES>
__device__ __forceinline__ void stage_out(void* base, const StageRun<ES>& run, const Words* stage, int lane) {
  constexpr int V = 16 / ES;
  __syncwarp();
  char* v0 = const_cast<char*>(run.vector0(base));
  const int n = run.vectors();
  const int tail = run.lead + run.count - (n - 1) * V;  // elements of the run in the last vector
#pragma unroll
  for (int j = 0; j < N; ++j) {
    const int q = j * 32 + lane;
    if (q >= n) continue;
    const Words w = slot_at(stage, stage_slot(q));
    const int begin = q == 0 ? run.lead : 0, end = q == n - 1 ? tail : V;
    if (S == Staging::Aligned || (begin == 0 && end == V)) {
      store16(v0 + 16 * q, w);
    } else {
      store_chunk_elements<ES, 16>(v0 + 16 * q, 0, w, V, begin, end);
    }
  }
  __syncwarp();
}

// One row's place in a warp's stage: the stage element of its column 0, and its length.
struct StagedRow {
  Words* stage;
  int first;
  int cols;
};

// The thread's K chunks of a staged row as loaded units on 16-byte boundaries (the realigning
// is done here): chunk P of the row from its stage elements, zero words for chunks past the row
// and arbitrary elements past its last column.
template <Staging S, int K, int ES>
__device__ __forceinline__ void take_staged(const StagedRow& r, const Place& p, LoadedUnits<K>& u) {
  constexpr int V = 16 / ES;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int P = p.chunk(k);
    const unsigned s = unsigned(r.first + P * V);
    const int q = int(s / V), sh = int(s % V);
    if (P * V >= r.cols) {
      u.unit[k] = Words{{0, 0, 0, 0}};
    } else if (S == Staging::Aligned || sh == 0) {
      u.unit[k] = slot_at(r.stage, stage_slot(q));
    } else {
      u.unit[k] = window16(slot_at(r.stage, stage_slot(q)), slot_at(r.stage, stage_slot(q + 1)), sh * ES);
    }
  }
  u.extra = Words{{0, 0, 0, 0}};
  u.shift = 0;
  u.misaligned = false;
}

// Chunk P of a staged row's output, which starts at stage element s, element by element (its
// columns past the row dropped).
template <int ES>
__device__ __forceinline__ void leave_elements(const StagedRow& r, int P, unsigned s, const Words& c) {
  constexpr int V = 16 / ES;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    if (P * V + j >= r.cols) break;
    const unsigned e = s + j;
    const int at = stage_slot(int(e / V)) * V + int(e % V);  // the element's index in the stage
    if constexpr (ES == 4) {
      reinterpret_cast<uint32_t*>(r.stage)[at] = uint32_t(chunk_element_bits<ES>(c, j));
    } else {
      static_assert(ES == 2, "staged rows are f32 or 16-bit");
      reinterpret_cast<uint16_t*>(r.stage)[at] = uint16_t(chunk_element_bits<ES>(c, j));
    }
  }
}

// A whole output chunk that starts at stage element s, s % V != 0, into the two slots it
// straddles: word by word where it starts on a 4-byte boundary (f32, 16-bit at an even shift),
// else element by element; each word's place is one of two slot addresses and an offset, not
// the stage index of each element that leave_elements derives.
template <int ES>
__device__ __forceinline__ void leave_straddling(const StagedRow& r, unsigned s, const Words& c) {
  constexpr int V = 16 / ES;
  const int q = int(s / V);
  const int b = int(s % V) * ES;  // the chunk's first byte within slot q
  char* const lo = reinterpret_cast<char*>(r.stage + stage_slot(q));
  char* const hi = reinterpret_cast<char*>(r.stage + stage_slot(q + 1)) - 16;  // lo's bytes 16.. lie here
  if (ES == 4 || b % 4 == 0) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int at = b + 4 * i;
      *reinterpret_cast<uint32_t*>((at < 16 ? lo : hi) + at) = c.w[i];
    }
  } else {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const int at = b + ES * j;
      *reinterpret_cast<uint16_t*>((at < 16 ? lo : hi) + at) = uint16_t(chunk_element_bits<ES>(c, j));
    }
  }
}

// The thread's K output chunks of a staged row into their stage elements (columns past the row
// dropped): whole slots where a chunk lies on one, word by word where it straddles two, element
// by element where the row ends within it.
template <Staging S, int K, int ES>
__device__ __forceinline__ void leave_staged(const StagedRow& r, const Place& p, const Words (&c)[K]) {
  constexpr int V = 16 / ES;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int P = p.chunk(k);
    if (P * V >= r.cols) continue;
    const unsigned s = unsigned(r.first + P * V);
    if constexpr (S == Staging::MidVector) {
      if ((P + 1) * V > r.cols) {
        leave_elements<ES>(r, P, s, c[k]);
        continue;
      }
      if (s % V != 0) {
        leave_straddling<ES>(r, s, c[k]);
        continue;
      }
    }
    set_slot(r.stage, stage_slot(int(s / V)), c[k]);
  }
}

}  // namespace cuda_kernels
}  // namespace softmax_internal
