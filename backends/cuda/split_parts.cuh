// SPDX-License-Identifier: Apache-2.0
// Rows past a cluster's registers, cut into parts of whole tiles, one block a part: the tile
// shape and the part geometry both split forms share. In waves (split_rows_forward and the
// backward kernels' split_rows_*), a launch's first blocks compute the partials of one wave of
// rows (the stats role) and the others normalise the previous wave (SplitWave), a part or a
// piece of one each (SplitShape); resident in shared memory (resident_split.cuh), groups of
// blocks take rows in rounds.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/row_layout.cuh"

namespace softmax_internal {
namespace cuda_kernels {

constexpr int kSplitThreads = 256;
constexpr int kSplitK = 4;                                        // chunks per thread per tile
constexpr int64_t kSplitTile = int64_t(kSplitThreads) * kSplitK;  // chunks per tile

// A split block's thread in a tile of K chunks a thread: each warp takes K * 32 consecutive
// chunks, its lanes on consecutive chunks.
template <int K>
__device__ __forceinline__ Place split_tile_place() {
  return Place{int(threadIdx.x & 31), 32, int(threadIdx.x >> 5) * K * 32};
}

// Whether the kernels in waves keep two tiles of a part in flight, issuing the next tile's loads
// once they have taken the current one's words (forward_kernels.cuh, kSplitTilesAhead): in the
// code for sm_90, where it was measured (lone split rows 5-11% faster on an H100) and fits the
// kernels' registers. For sm_80, sm_100 and sm_120 ptxas spilled 4-56 bytes that way (not
// measured there), so their code takes one tile at a time.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900
constexpr bool kSplitTilesAheadOnThisArch = true;
#else
constexpr bool kSplitTilesAheadOnThisArch = false;
#endif

// One launch's share of the waves.
struct SplitWave {
  int64_t stats_row0;  // first row whose partials this launch computes
  int stats_rows;      // 0: no stats role in this launch
  void* stats_out;     // [stats_rows][parts] partials
  int64_t norm_row0;   // first row this launch normalises
  int norm_rows;       // 0: no normalisation role
  const void* norm_in;
};

// A row's parts, and the pieces of a part that the normalisation gives a block each: its
// arithmetic depends on the row's merged partials only, not on which block writes which tile, so
// a lone row's normalisation may spread over more SMs than its parts take (launch_split decides).
struct SplitShape {
  int64_t part_chunks;  // logical chunks per part, a multiple of kSplitTile
  int parts;
  int pieces;            // normalisation blocks per part (1: the part's own block)
  int64_t piece_chunks;  // chunks per piece, a multiple of the tile; part_chunks where pieces is 1
};

// Where a block's share of a row lies: chunks [begin, end) of the row (chunks of V columns), at
// most `count` from chunk `first` (empty where the row ends before it), and the columns a tile of
// it writes.
struct PartSpan {
  int64_t begin;
  int64_t end;
  int64_t cols_end;  // first column past the span
  __device__ __forceinline__ PartSpan(int64_t first, int64_t count, int64_t cols, int V) {
    const int64_t chunks = (cols + V - 1) / V;
    begin = first;
    end = begin + count < chunks ? begin + count : chunks;
    cols_end = end * V < cols ? end * V : cols;
  }
  __device__ __forceinline__ bool empty() const { return end <= begin; }
  // The columns of the span in a tile of `tile_cols` columns that starts at column col0.
  __device__ __forceinline__ int limit(int64_t col0, int64_t tile_cols) const {
    return int(cols_end - col0 < tile_cols ? cols_end - col0 : tile_cols);
  }
  // Tiles of `tile_chunks` chunks in the span, the last one possibly short.
  __device__ __forceinline__ int tiles(int64_t tile_chunks) const {
    return int((end - begin + tile_chunks - 1) / tile_chunks);
  }
  // The first chunk of the span's last tile (the normalisation walks the tiles backwards, from
  // the ones the stats role left in cache).
  __device__ __forceinline__ int64_t last_tile(int64_t tile_chunks) const {
    return begin + (end - 1 - begin) / tile_chunks * tile_chunks;
  }
};

// Consecutive launches of the waves may overlap (programmatic dependent launch, sm_90+; where,
// launch_split decides, and never for a call's first launch, whose rows the stream's earlier work
// may still be writing). Each block lets the next launch start at once, so that its blocks are
// resident while this one finishes, and waits for the previous launch to complete before it
// touches what that launch reads or writes: the stats role before it writes its partial (the
// previous launch may still read that parity's slots), the normalisation before it reads the
// partials (and before it writes rows that the previous launch's stats role read, where y is x).
// In a launch without the overlap both are no-ops.
__device__ __forceinline__ void release_next_wave() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void await_previous_wave() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// A block's role, row and share of it in a launch of waves: the first stats_rows * parts blocks
// compute the partials of a part each, the others normalise a piece of a part each.
struct WavePart {
  bool stats_role;
  int64_t wave_row;  // the row among its role's rows in this launch
  int part;
  int piece;  // of the part, in the normalisation; 0 in the stats role
  int64_t row;
  __device__ __forceinline__ WavePart(const SplitShape& sp, const SplitWave& w) {
    const int64_t stats_blocks = int64_t(w.stats_rows) * sp.parts;
    stats_role = blockIdx.x < stats_blocks;
    const int64_t per_row = stats_role ? sp.parts : int64_t(sp.parts) * sp.pieces;
    const int64_t slot = stats_role ? blockIdx.x : blockIdx.x - stats_blocks;
    wave_row = slot / per_row;
    const int64_t share = slot % per_row;
    part = int(stats_role ? share : share / sp.pieces);
    piece = int(stats_role ? 0 : share % sp.pieces);
    row = (stats_role ? w.stats_row0 : w.norm_row0) + wave_row;
  }
  // The chunks this block reads: its part in the stats role, its piece of the part otherwise (the
  // last piece cut at the part's end where the pieces do not divide it: in place, a piece that
  // ran on would write the next part's x before that part's block reads it).
  __device__ __forceinline__ PartSpan span(const SplitShape& sp, int64_t cols, int V) const {
    if (stats_role) return PartSpan(part * sp.part_chunks, sp.part_chunks, cols, V);
    const int64_t into_part = piece * sp.piece_chunks;
    const int64_t left = sp.part_chunks - into_part;
    return PartSpan(part * sp.part_chunks + into_part, left < sp.piece_chunks ? left : sp.piece_chunks, cols, V);
  }
  // The partial this block publishes (stats role), and its row's first partial (normalisation).
  __device__ __forceinline__ int64_t slot(const SplitShape& sp) const { return wave_row * sp.parts + part; }
  __device__ __forceinline__ int64_t row_partials(const SplitShape& sp) const { return wave_row * sp.parts; }
};

// The stats role's thread 0 stores its block's partial, once the previous launch is done with
// the slots of that parity (release_next_wave).
template <class Part>
__device__ __forceinline__ void publish_partial(const SplitShape& sp, const SplitWave& w, const WavePart& wp,
                                                const Part& part) {
  if (threadIdx.x == 0) {
    await_previous_wave();
    static_cast<Part*>(w.stats_out)[wp.slot(sp)] = part;
  }
}

}  // namespace cuda_kernels
}  // namespace softmax_internal
