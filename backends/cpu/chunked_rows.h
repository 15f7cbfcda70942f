/* SPDX-License-Identifier: Apache-2.0 */
// How the CPU drivers share a call out over OpenMP threads. Rows that fit in one chunk go out in
// blocks of whole rows (run_row_blocks). Longer rows take one of two schedules, chosen only for
// speed — both run the same chunk kernels and merge partials in the same order, so the bits of a
// row do not depend on the schedule, the thread count, or how many rows are in the call
// (vector_kernels.h):
//   - rows over threads: each thread takes whole rows (contiguous blocks of them) and runs phase
//     1, the merge and phase 2 for a row while its chunks are still in cache (rows past the
//     cache: phase 2 with the next row's phase 1 between its chunks, kOverlapRowBytes);
//   - chunks over threads, for few rows (fewer than 4 per thread, e.g. one 64M-element row): all
//     threads compute phase 1 for every (row, chunk), then the per-row merges, then phase 2.
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/chunk_merge.h"
#include "backends/cpu/stream_policy.h"
#include "backends/cpu/thread_scratch.h"
#include "backends/cpu/vector_kernels.h"

namespace softmax_internal {
namespace cpu {

inline size_t dtype_bytes(softmax_dtype t) {
  return t == SOFTMAX_DTYPE_F64 ? 8 : t == SOFTMAX_DTYPE_F32 ? 4 : 2;
}

// The matrices of a call as bytes, with chunk addressing.
struct RowsView {
  const unsigned char* x;
  unsigned char* y;
  int64_t rows;
  int64_t cols;
  Dtypes dtype;
  size_t x_esize, y_esize;

  explicit RowsView(const RowsProblem& p)
      : x(static_cast<const unsigned char*>(p.x)),
        y(static_cast<unsigned char*>(p.y)),
        rows(p.rows),
        cols(p.cols),
        dtype(p.dtype),
        x_esize(dtype_bytes(p.dtype.x)),
        y_esize(dtype_bytes(p.dtype.y)) {}

  int64_t chunks_per_row() const { return (cols + kChunkElems - 1) / kChunkElems; }
  int64_t chunk_len(int64_t chunk) const { return std::min(kChunkElems, cols - chunk * kChunkElems); }
  size_t flat(int64_t row, int64_t chunk) const { return size_t(row) * size_t(cols) + size_t(chunk * kChunkElems); }
  const void* x_at(int64_t row, int64_t chunk) const { return x + flat(row, chunk) * x_esize; }
  void* y_at(int64_t row, int64_t chunk) const { return y + flat(row, chunk) * y_esize; }
  size_t total() const { return size_t(rows) * size_t(cols); }
  size_t y_bytes() const { return total() * y_esize; }
};

// Threads for a call: the caller's choice (0 = OpenMP's default), capped at 4 per processor
// (more only adds overhead, and an unchecked count such as INT32_MAX would make the OpenMP
// runtime abort), and one thread for calls too small to repay waking the pool. The count never
// changes results, only speed.
inline int threads_for(const ExecContext& ctx, size_t elements) {
  int t = ctx.num_threads > 0 ? ctx.num_threads : omp_get_max_threads();
  t = std::min(t, 4 * std::max(1, omp_get_num_procs()));
  if (elements < 32768) t = 1;
  return std::max(t, 1);
}

// Whether y goes out through non-temporal stores (stream_policy.h; SOFTMAX_CPU_STREAM_STORES=0 or
// =1 in the environment overrides the size rule, for measuring either choice on a machine).
inline bool stream_output(const RowsView& v) { return stream_result_bytes(v.y_bytes()); }

// Keep a long row's exp values for phase 2 (exp computed once) up to 1M elements = 4 MiB per
// thread (fp64: 8 MiB); past that they would not stay in cache either and recomputing exp is
// cheaper than a second trip to memory for them. Same bits either way (vector_kernels.h).
constexpr int64_t kStoreExpUpToCols = int64_t{1} << 20;

// Rows of this many bytes or more, re-read by a second pass, come back from L3 whatever the
// order: twice the L2 of the cores measured (2-core Xeon VM, 2 MiB a core). For them each
// thread's next row takes its first pass between the chunks of the current row's second (here,
// and in the softmax backward): f32, two threads, softmax rows of 2M columns 11% faster, dropout
// 7-8%, log-softmax of 1M columns 1-10%, the backward of 1M columns 8-9%. Rows whose second pass
// reads kept exps (softmax up to 1M columns) ran 2-3% slower so, with two rows' exps in cache, and
// rows that L2 holds for the second pass (the backward of 128K-256K columns) 7-12% slower.
constexpr size_t kOverlapRowBytes = size_t{4} << 20;

// Runs body(begin, end) once in each thread of the team that has rows: its equal contiguous range
// [begin, end) of the `rows`. Returns false if a body threw (out of scratch memory).
template <class Body>
bool for_row_ranges(int64_t rows, int threads, Body&& body) {
  std::atomic<bool> failed{false};
#pragma omp parallel num_threads(threads)
  {
    const int64_t nth = omp_get_num_threads(), tid = omp_get_thread_num();
    const int64_t begin = rows * tid / nth, end = rows * (tid + 1) / nth;
    try {
      if (begin < end) body(begin, end);
    } catch (...) {
      failed.store(true);
    }
  }
  return !failed.load();
}

// Runs `block(first_row, row_count)` over blocks of whole rows, a few blocks per thread so a
// static split stays balanced, each at least a tile's worth of work so the per-block overhead
// stays small. Returns false if a thread could not get its scratch memory.
template <class Block>
bool run_row_blocks(const VectorKernels& k, const RowsView& v, int threads, Block&& block) {
  const int64_t min_block = std::max<int64_t>(1, kChunkElems / v.cols);
  const int64_t rows_per_block = std::max(min_block, (v.rows + 8 * threads - 1) / (8 * threads));
  const int64_t blocks = (v.rows + rows_per_block - 1) / rows_per_block;
  std::atomic<bool> failed{false};
#pragma omp parallel num_threads(threads)
  {
#pragma omp for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      if (failed.load(std::memory_order_relaxed)) continue;
      const int64_t r0 = b * rows_per_block;
      try {
        block(r0, std::min(rows_per_block, v.rows - r0));
      } catch (...) {
        failed.store(true);
      }
    }
    k.stream_fence();
  }
  return !failed.load();
}

// Runs both phases over every chunk of every row with the kernels k. `finish(row, chunk, partial,
// normaliser, stored_exp)` does phase 2 of one chunk; stored_exp points at that chunk's e_i when
// `store_exp_up_to_cols` >= cols and the rows-over-threads schedule is used, else is null.
// Returns false if a thread could not get its scratch memory.
template <class Finish>
bool run_two_phase(const VectorKernels& k, const RowsView& v, int threads, int64_t store_exp_up_to_cols,
                   Finish&& finish) {
  const int64_t chunks = v.chunks_per_row();
  const size_t chunk_exp_bytes = size_t(kChunkElems) * k.exp_bytes;
  std::atomic<bool> failed{false};

  if (threads == 1 || v.rows >= 4 * int64_t(threads)) {
    const bool store = v.cols <= store_exp_up_to_cols;
    if (!store && size_t(v.cols) * v.x_esize >= kOverlapRowBytes) {
      // Rows whose phase 2 reads x from L3 anyway: each thread's rows in order, the next row's
      // phase 1 chunk by chunk between the current row's phase 2 chunks (walked backwards, as
      // below), so that memory keeps streaming; two rows' partials at a time.
      return for_row_ranges(v.rows, threads, [&](int64_t begin, int64_t end) {
        auto* parts = static_cast<ChunkPartial*>(
            thread_scratch(ScratchSlot::Partials, 2 * size_t(chunks) * sizeof(ChunkPartial)));
        const auto part_of = [&](int64_t r) { return parts + (r % 2) * chunks; };
        const auto phase1 = [&](int64_t r, int64_t c) {
          part_of(r)[c] = k.chunk_partial(v.x_at(r, c), v.dtype, v.chunk_len(c), nullptr);
        };
        for (int64_t c = 0; c < chunks; ++c) phase1(begin, c);
        for (int64_t r = begin; r < end; ++r) {
          const RowNormaliser norm = merge_chunk_partials(part_of(r), chunks);
          for (int64_t i = 0; i < chunks; ++i) {
            finish(r, chunks - 1 - i, part_of(r)[chunks - 1 - i], norm, nullptr);
            if (r + 1 < end) phase1(r + 1, i);
          }
        }
        k.stream_fence();
      });
    }
#pragma omp parallel num_threads(threads)
    {
#pragma omp for schedule(static)
      for (int64_t r = 0; r < v.rows; ++r) {
        if (failed.load(std::memory_order_relaxed)) continue;
        try {
          auto* parts = static_cast<ChunkPartial*>(
              thread_scratch(ScratchSlot::Partials, size_t(chunks) * sizeof(ChunkPartial)));
          auto* e = store ? static_cast<unsigned char*>(thread_scratch(ScratchSlot::Exp, size_t(v.cols) * k.exp_bytes))
                          : nullptr;
          for (int64_t c = 0; c < chunks; ++c)
            parts[c] = k.chunk_partial(v.x_at(r, c), v.dtype, v.chunk_len(c),
                                       e ? e + size_t(c) * chunk_exp_bytes : nullptr);
          const RowNormaliser norm = merge_chunk_partials(parts, chunks);
          // Backwards: the last chunks phase 1 touched are the ones still in cache.
          for (int64_t c = chunks - 1; c >= 0; --c)
            finish(r, c, parts[c], norm, e ? e + size_t(c) * chunk_exp_bytes : nullptr);
        } catch (...) {
          failed.store(true);
        }
      }
      k.stream_fence();
    }
    return !failed.load();
  }

  const int64_t items = v.rows * chunks;
  std::vector<ChunkPartial> parts{};
  parts.resize(size_t(items));
  std::vector<RowNormaliser> norms{};
  norms.resize(size_t(v.rows));
#pragma omp parallel num_threads(threads)
  {
    // Each thread owns one contiguous range of (row, chunk) items in both phases. Phase 1 walks
    // it forwards, phase 2 backwards, so phase 2 starts on the chunks phase 1 read last, which
    // are the ones still in this core's caches.
    const int64_t nth = omp_get_num_threads(), tid = omp_get_thread_num();
    const int64_t begin = items * tid / nth, end = items * (tid + 1) / nth;
    for (int64_t i = begin; i < end; ++i) {
      try {
        parts[size_t(i)] = k.chunk_partial(v.x_at(i / chunks, i % chunks), v.dtype,
                                           v.chunk_len(i % chunks), nullptr);
      } catch (...) {
        failed.store(true);
      }
    }
#pragma omp barrier
#pragma omp for schedule(static)
    for (int64_t r = 0; r < v.rows; ++r) norms[size_t(r)] = merge_chunk_partials(&parts[size_t(r * chunks)], chunks);
    for (int64_t i = end - 1; i >= begin; --i) {
      if (failed.load(std::memory_order_relaxed)) break;
      try {
        finish(i / chunks, i % chunks, parts[size_t(i)], norms[size_t(i / chunks)], nullptr);
      } catch (...) {
        failed.store(true);
      }
    }
    k.stream_fence();
  }
  return !failed.load();
}

}  // namespace cpu
}  // namespace softmax_internal
