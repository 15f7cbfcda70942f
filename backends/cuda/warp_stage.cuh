// SPDX-License-Identifier: Apache-2.0
// A warp's rows moved through shared memory. A segment of w lanes holds a row as 16-byte chunks
// w apart, so where w is small (one or two lanes: rows of up to 32 f32 or 64 16-bit columns)
// each vector load or store of the warp touches 32 / w rows, one or two sectors of each, and the
// L2 serves many partial requests per instruction (Nsight Compute: L2 throughput at 92% of peak
// with DRAM at 73% for rows of 32 f32 columns). Where every row starts and ends on a 16-byte
// boundary the warp's rows are one contiguous run of chunks: the warp loads (and stores) that
// run with consecutive lanes on consecutive chunks, through a shared-memory stage, and each lane
// takes (and leaves) its own chunks there in the segment's layout.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/row_layout.cuh"
#include "backends/cuda/storage.cuh"

namespace softmax_internal {
namespace cuda_kernels {

// The stage slot of a warp's chunk q: the chunk index with its low three bits XORed by the next
// three, so that the lanes reading one chunk of consecutive rows (rows of 2-16 chunks) and the
// lanes reading consecutive chunks both fall on distinct 16-byte bank groups.
__device__ __forceinline__ int stage_slot(int q) { return q ^ ((q >> 3) & 7); }

// Chunks [first, first + count) of a 16-byte-aligned array into stage slots (count <= 32 * N),
// lane l taking chunks l, l + 32, ... Every lane of the warp calls this together; the stage is
// ready to read after it.
template <int N>
__device__ __forceinline__ void stage_in(const void* base, int64_t first, int count, Words* stage, int lane) {
  const Words* src = static_cast<const Words*>(base) + first;
#pragma unroll
  for (int j = 0; j < N; ++j) {
    const int q = j * 32 + lane;
    if (q < count) stage[stage_slot(q)] = load16(src + q);
  }
  __syncwarp();
}

// Stage slots of chunks [0, count) out to chunks [first, first + count) of a 16-byte-aligned
// array, lane l storing chunks l, l + 32, ... Every lane of the warp calls this together, after
// writing its chunks; the stage may be refilled after it.
template <int N>
__device__ __forceinline__ void stage_out(void* base, int64_t first, int count, const Words* stage, int lane) {
  __syncwarp();
  Words* dst = static_cast<Words*>(base) + first;
#pragma unroll
  for (int j = 0; j < N; ++j) {
    const int q = j * 32 + lane;
    if (q < count) store16(dst + q, stage[stage_slot(q)]);
  }
  __syncwarp();
}

// One row's place in a warp's stage: its first chunk there and its length in chunks.
struct StagedRow {
  Words* stage;
  int first;
  int chunks;
};

// The thread's K chunks of a staged row as loaded units on 16-byte boundaries (realigning them
// is a copy): chunk P of the row, zero words past the row or past the `count` chunks staged.
template <int K>
__device__ __forceinline__ void take_staged(const StagedRow& r, int count, const Place& p, LoadedUnits<K>& u) {
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int P = p.chunk(k);
    const int q = r.first + P;
    u.unit[k] = P < r.chunks && q < count ? r.stage[stage_slot(q)] : Words{{0, 0, 0, 0}};
  }
  u.extra = Words{{0, 0, 0, 0}};
  u.shift = 0;
  u.misaligned = false;
}

// The thread's K output chunks of a staged row into their slots (chunks past the row dropped).
template <int K>
__device__ __forceinline__ void leave_staged(const StagedRow& r, const Place& p, const Words (&c)[K]) {
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int P = p.chunk(k);
    if (P < r.chunks) r.stage[stage_slot(r.first + P)] = c[k];
  }
}

}  // namespace cuda_kernels
}  // namespace softmax_internal
