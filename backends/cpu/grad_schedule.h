/* SPDX-License-Identifier: Apache-2.0 */
// How the backward and sharded-row drivers share a call out over OpenMP threads. The grid is the
// forward's: rows cut into chunks of kChunkElems at fixed offsets (vector_kernels.h). Three
// shapes of work, chosen only for speed (the kernels and the merge order are the same in each,
// so no result depends on the shape, the thread count or the number of rows in the call):
//   - tiles: rows of at most one chunk, whole rows in tiles of about one chunk's worth of
//     elements, a few blocks of tiles per thread;
//   - whole rows: each thread takes whole long rows and does every pass over a row while its
//     chunks are still in cache (for_rows; or, for rows past the cache, its range of rows in
//     order with the next row's first pass between the current row's last: for_row_ranges,
//     chunked_rows.h);
//   - chunk items: few long rows (fewer than 4 per thread), every (row, chunk) item spread over
//     the threads, one parallel loop per pass with the per-row merges in between.
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "backends/cpu/vector_kernels.h"

namespace softmax_internal {
namespace cpu {

struct ChunkGrid {
  int64_t rows;
  int64_t cols;

  int64_t chunks() const { return (cols + kChunkElems - 1) / kChunkElems; }
  int64_t len(int64_t chunk) const { return std::min(kChunkElems, cols - chunk * kChunkElems); }
  // Flat index of a chunk's first element.
  size_t flat(int64_t row, int64_t chunk) const { return size_t(row) * size_t(cols) + size_t(chunk * kChunkElems); }
  size_t total() const { return size_t(rows) * size_t(cols); }
  bool short_rows() const { return cols <= kChunkElems; }
  // Rows per tile for short rows: whole rows, about one chunk of elements.
  int64_t tile_rows() const { return std::max<int64_t>(1, kChunkElems / cols); }
};

inline bool whole_rows_per_thread(const ChunkGrid& g, int threads) {
  return threads == 1 || g.rows >= 4 * int64_t(threads);
}

// Runs body(first_row, row_count) over tiles of g.tile_rows() rows, in blocks of consecutive
// tiles (a few blocks per thread, so the static split stays balanced). Returns false if a body
// threw (out of scratch memory); the other tiles may or may not have run.
template <class Body>
bool for_tiles(const ChunkGrid& g, int threads, Body&& body) {
  const int64_t tile = g.tile_rows();
  const int64_t tiles = (g.rows + tile - 1) / tile;
  const int64_t per_block = std::max<int64_t>(1, tiles / (8 * int64_t(threads)));
  const int64_t blocks = (tiles + per_block - 1) / per_block;
  std::atomic<bool> failed{false};
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    if (failed.load(std::memory_order_relaxed)) continue;
    try {
      for (int64_t t = b * per_block; t < std::min(tiles, (b + 1) * per_block); ++t) {
        const int64_t r0 = t * tile;
        body(r0, std::min(tile, g.rows - r0));
      }
    } catch (...) {
      failed.store(true);
    }
  }
  return !failed.load();
}

// Runs body(row) for every row, static schedule.
template <class Body>
bool for_rows(const ChunkGrid& g, int threads, Body&& body) {
  std::atomic<bool> failed{false};
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t r = 0; r < g.rows; ++r) {
    if (failed.load(std::memory_order_relaxed)) continue;
    try {
      body(r);
    } catch (...) {
      failed.store(true);
    }
  }
  return !failed.load();
}

// Runs body(row, chunk) for every chunk item. Thread t of the team owns the t-th of `threads`
// equal contiguous ranges of items in every call, so a pass that walks its range backwards
// after one that walked it forwards starts on the chunks still in this core's caches.
template <class Body>
bool for_chunk_items(const ChunkGrid& g, int threads, bool backwards, Body&& body) {
  const int64_t chunks = g.chunks(), items = g.rows * chunks;
  std::atomic<bool> failed{false};
#pragma omp parallel num_threads(threads)
  {
    const int64_t nth = omp_get_num_threads(), tid = omp_get_thread_num();
    const int64_t begin = items * tid / nth, end = items * (tid + 1) / nth;
    for (int64_t k = 0; k < end - begin; ++k) {
      if (failed.load(std::memory_order_relaxed)) break;
      const int64_t i = backwards ? end - 1 - k : begin + k;
      try {
        body(i / chunks, i % chunks);
      } catch (...) {
        failed.store(true);
      }
    }
  }
  return !failed.load();
}

// A row's chunk partials merged in double, in chunk order (the fixed order makes the result
// independent of which thread computed which chunk).
template <class T>
double merge_in_order(const T* partials, int64_t count) {
  double s = 0.0;
  for (int64_t c = 0; c < count; ++c) s += double(partials[c]);
  return s;
}

}  // namespace cpu
}  // namespace softmax_internal
