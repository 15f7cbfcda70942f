// SPDX-License-Identifier: Apache-2.0
// softmax_rows_backward and its sharded halves on the CPU:
//   rows_backward:             dot = sum(dy * y) (log: sum(dy)), then dx = y * (dy - dot)
//                              (log: dx = dy - exp(y) * dot), per row;
//   backward_row_stats:        the dot alone, as a float per row;
//   rows_backward_from_stats:  dx from a given dot.
// Rows of at most one chunk are done a tile at a time, each row's dot and dx back to back while
// the row is in L1/L2 (one read of y and dy from memory). Longer rows take two passes over
// their chunks: the chunk dots, merged in double in chunk order, then dx. All three operations
// use the same kernels and merge, so backward_row_stats followed by rows_backward_from_stats
// gives the bits of rows_backward.
#include <cstdint>
#include <vector>

#include "backends/cpu/chunked_rows.h"
#include "backends/cpu/cpu_drivers.h"
#include "backends/cpu/grad_arrays.h"
#include "backends/cpu/grad_schedule.h"

namespace softmax_internal {
namespace cpu {

namespace {

// One backward call: y and dy stored as the forward's y, dx (when there is one) as its x.
struct GradArrays {
  ChunkGrid grid;
  InArray y, dy;
  OutArray dx;
  bool log;
};

template <class T>
T chunk_dot(const GradArrays& a, int64_t r, int64_t c) {
  const size_t first = a.grid.flat(r, c);
  const int64_t n = a.grid.len(c);
  const T* y = read_as<T>(a.y, first, n, GradSlot::A);
  const T* dy = read_as<T>(a.dy, first, n, GradSlot::B);
  return grad_dot(y, dy, n, a.log);
}

// Finishes chunk c of row r. The schedules that keep a row on one thread finish its chunks in
// reverse, from the ones still in cache; `prefetch_preceding` (c > 0) prefetches chunk c - 1
// meanwhile (f32 on AVX-512: FinishPrefetch::PrecedingChunk where the finish is streamed, the
// log-softmax's in-place finish likewise).
template <class T>
void chunk_finish(const GradArrays& a, int64_t r, int64_t c, T dot, bool prefetch_preceding = false) {
  const size_t first = a.grid.flat(r, c);
  const int64_t n = a.grid.len(c);
  const T* y = read_as<T>(a.y, first, n, GradSlot::A);
  const T* dy = read_as<T>(a.dy, first, n, GradSlot::B);
  // y and dy widened into scratch have no preceding chunk there.
  const bool preceding = prefetch_preceding && a.y.type == kWorkDtype<T>;
  if (finish_streamed_to_dx(a.dx, y, dy, first, 1, n, &dot, a.log,
                            preceding ? FinishPrefetch::PrecedingChunk : FinishPrefetch::None))
    return;
  T* dx = result_space<T>(a.dx, first, n);
  grad_finish(y, dy, dx, n, dot, a.log, preceding);
  write_back(dx, a.dx, first, n);
}

// A tile of short rows: row_dot null computes each row's dot, else uses row_dot[0 .. nr).
template <class T>
void tile_finish(const GradArrays& a, int64_t r0, int64_t nr, const T* row_dot) {
  const size_t first = a.grid.flat(r0, 0);
  const int64_t n = nr * a.grid.cols;
  const T* y = read_as<T>(a.y, first, n, GradSlot::A);
  const T* dy = read_as<T>(a.dy, first, n, GradSlot::B);
  // Tiles follow each other in memory on a thread (for_tiles): what lies past this one is read
  // next, unless y and dy were widened into scratch.
  const bool prefetch = a.y.type == kWorkDtype<T>;
  if (finish_streamed_to_dx(a.dx, y, dy, first, nr, a.grid.cols, row_dot, a.log,
                            prefetch ? FinishPrefetch::FollowingRows : FinishPrefetch::None))
    return;
  T* dx = result_space<T>(a.dx, first, n);
  grad_rows(y, dy, dx, nr, a.grid.cols, row_dot, a.log, prefetch);
  write_back(dx, a.dx, first, n);
}

// The row dots of a call, merged in double in chunk order: out[r] for every row.
template <class T>
bool long_row_dots(const GradArrays& a, int threads, T* out) {
  const ChunkGrid& g = a.grid;
  const int64_t chunks = g.chunks();
  if (whole_rows_per_thread(g, threads)) {
    return for_rows(g, threads, [&](int64_t r) {
      double s = 0.0;
      for (int64_t c = 0; c < chunks; ++c) s += double(chunk_dot<T>(a, r, c));
      out[r] = T(s);
    });
  }
  std::vector<T> parts(size_t(g.rows * chunks));
  if (!for_chunk_items(g, threads, false, [&](int64_t r, int64_t c) { parts[size_t(r * chunks + c)] = chunk_dot<T>(a, r, c); }))
    return false;
  for (int64_t r = 0; r < g.rows; ++r) out[r] = T(merge_in_order(&parts[size_t(r * chunks)], chunks));
  return true;
}

// Whether a call's rows are long enough that the finishing pass reads them from L3 anyway
// (chunked_rows.h, kOverlapRowBytes: y and dy of a row).
bool overlapped_rows(const GradArrays& a) {
  return size_t(a.grid.cols) * 2 * storage_size(a.y.type) >= kOverlapRowBytes;
}

// Whether finishing chunk c of a row prefetches chunk c - 1 (chunk_finish): for log-softmax,
// whose dot pass reads dy alone, so that its finishing pass reads y from memory.
bool preceding_from_memory(const GradArrays& a, int64_t c) { return a.log && c > 0; }

Outcome out_of_memory() { return Outcome::fail(SOFTMAX_STATUS_OUT_OF_MEMORY, "CPU backend: out of scratch memory"); }

template <class T>
Outcome rows_backward_as(const GradArrays& a, int threads) {
  const ChunkGrid& g = a.grid;
  if (g.short_rows()) {
    const bool ok = for_tiles(g, threads, [&](int64_t r0, int64_t nr) { tile_finish<T>(a, r0, nr, nullptr); });
    return ok ? Outcome::ok() : out_of_memory();
  }
  const int64_t chunks = g.chunks();
  if (whole_rows_per_thread(g, threads) && !overlapped_rows(a)) {
    // Both passes over a row on one thread; the second walks backwards from the chunks the first
    // read last, which are the ones still in cache.
    const bool ok = for_rows(g, threads, [&](int64_t r) {
      double s = 0.0;
      for (int64_t c = 0; c < chunks; ++c) s += double(chunk_dot<T>(a, r, c));
      const T dot = T(s);
      for (int64_t c = chunks - 1; c >= 0; --c) chunk_finish<T>(a, r, c, dot, preceding_from_memory(a, c));
    });
    return ok ? Outcome::ok() : out_of_memory();
  }
  if (whole_rows_per_thread(g, threads)) {
    // Rows too long for the core's cache: each thread's rows in order, the next row's dot pass
    // read chunk by chunk between the current row's finishing chunks (walked backwards, as
    // above), so that the memory keeps streaming while the finishing pass reads from L3.
    const bool ok = for_row_ranges(g.rows, threads, [&](int64_t begin, int64_t end) {
      double s = 0.0;
      for (int64_t c = 0; c < chunks; ++c) s += double(chunk_dot<T>(a, begin, c));
      for (int64_t r = begin; r < end; ++r) {
        const T dot = T(s);
        const bool next = r + 1 < end;
        s = 0.0;
        for (int64_t k = 0; k < chunks; ++k) {
          chunk_finish<T>(a, r, chunks - 1 - k, dot, preceding_from_memory(a, chunks - 1 - k));
          if (next) s += double(chunk_dot<T>(a, r + 1, k));
        }
      }
    });
    return ok ? Outcome::ok() : out_of_memory();
  }
  std::vector<T> dots(size_t(g.rows));
  if (!long_row_dots<T>(a, threads, dots.data())) return out_of_memory();
  const bool ok = for_chunk_items(g, threads, true, [&](int64_t r, int64_t c) { chunk_finish<T>(a, r, c, dots[size_t(r)]); });
  return ok ? Outcome::ok() : out_of_memory();
}

}  // namespace

Outcome softmax_rows_backward(const RowsBackwardProblem& p, const ExecContext& ctx) {
  const size_t total = size_t(p.rows) * size_t(p.cols);
  const OutArray dx{p.dx, p.dtype.x, stream_results(p.dtype.x, fp64_arithmetic(p.dtype), p.dx == p.dy, total)};
  const GradArrays a{{p.rows, p.cols}, {p.y, p.dtype.y}, {p.dy, p.dtype.y}, dx, p.log_softmax};
  const int threads = threads_for(ctx, total);
  return fp64_arithmetic(p.dtype) ? rows_backward_as<double>(a, threads) : rows_backward_as<float>(a, threads);
}

// Never f64 (the front door refuses it): fp32 arithmetic, row_dot is float.
Outcome softmax_backward_row_stats(const BackwardRowStatsProblem& p, const ExecContext& ctx) {
  const GradArrays a{{p.rows, p.cols}, {p.y, p.dtype.y}, {p.dy, p.dtype.y}, {nullptr, p.dtype.x}, p.log_softmax};
  const ChunkGrid& g = a.grid;
  const int threads = threads_for(ctx, g.total());
  bool ok;
  if (g.short_rows()) {
    ok = for_tiles(g, threads, [&](int64_t r0, int64_t nr) {
      const size_t first = g.flat(r0, 0);
      const int64_t n = nr * g.cols;
      const float* y = read_as<float>(a.y, first, n, GradSlot::A);
      const float* dy = read_as<float>(a.dy, first, n, GradSlot::B);
      grad_row_dots_f32(y, dy, nr, g.cols, a.log, p.row_dot + r0);
    });
  } else {
    ok = long_row_dots<float>(a, threads, p.row_dot);
  }
  return ok ? Outcome::ok() : out_of_memory();
}

Outcome softmax_rows_backward_from_stats(const RowsBackwardFromStatsProblem& p, const ExecContext& ctx) {
  const size_t total = size_t(p.rows) * size_t(p.cols);
  const OutArray dx{p.dx, p.dtype.x, stream_results(p.dtype.x, false, p.dx == p.dy, total)};
  const GradArrays a{{p.rows, p.cols}, {p.y, p.dtype.y}, {p.dy, p.dtype.y}, dx, p.log_softmax};
  const ChunkGrid& g = a.grid;
  const int threads = threads_for(ctx, g.total());
  const bool ok = g.short_rows()
                      ? for_tiles(g, threads, [&](int64_t r0, int64_t nr) { tile_finish<float>(a, r0, nr, p.row_dot + r0); })
                      : for_chunk_items(g, threads, false,
                                        [&](int64_t r, int64_t c) { chunk_finish<float>(a, r, c, p.row_dot[r]); });
  return ok ? Outcome::ok() : out_of_memory();
}

}  // namespace cpu
}  // namespace softmax_internal
