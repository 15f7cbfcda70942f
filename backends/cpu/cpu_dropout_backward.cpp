// SPDX-License-Identifier: Apache-2.0
// softmax_dropout_backward on the CPU. Nothing from the forward is saved: per row
//   s = softmax(x)                      recomputed,
//   keep                                regenerated from (seed, offset, flat index) with the
//                                       forward's rule and kernel (keep_bytes),
//   g = keep ? dy * scale : 0           scale = 1 / (1 - p), the forward's own factor,
//   dx = s * (g - sum(s * g)).
// In fp32 arithmetic s comes from the forward's chunk kernels (chunk_partial's exp values times
// the merged factor of chunk_finish), i.e. it is the forward's fp32 softmax bit for bit, before
// rounding to y's storage type. fp64 arithmetic (x or dy stored as f64) computes s in double.
// p == 0 keeps everything (no random numbers are drawn), p == 1 drops everything: dx = 0.
//
// Rows of one chunk go a tile of rows at a time. Longer rows of up to kStoreUpToChunks chunks
// handled whole by one thread keep s and g of the row in per-thread buffers between the
// passes; longer rows, and few rows spread over threads by chunk, recompute them in each pass
// (three passes: softmax statistics, dot, dx). Recomputing gives the same bits, so the choice
// never shows in the result.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "backends/common/philox.h"
#include "backends/cpu/chunk_merge.h"
#include "backends/cpu/chunked_rows.h"
#include "backends/cpu/cpu_drivers.h"
#include "backends/cpu/grad_arrays.h"
#include "backends/cpu/grad_schedule.h"

namespace softmax_internal {
namespace cpu {

namespace {

// Rows of up to 1M columns (the forward's kStoreExpUpToCols; s and g 8 MiB per thread in fp32)
// keep s and g between the passes. Recomputing them (exp and Philox again in each pass) took
// 1.6-1.7x as long at 65537-1M columns on a 2-core Zen 5 EPYC, where their buffers, far past L2,
// cost less than the arithmetic.
constexpr int64_t kStoreUpToChunks = kStoreExpUpToCols / kChunkElems;

// Rows of one chunk go in tiles of whole rows of about this many elements (a tile's s, g, keep
// bytes and results stay in L1; rows longer than this, one to a tile). On a 2-core Zen 5 EPYC,
// against one row at a time: 32 columns 11x faster, 128 3.8x, 512 1.3x, 1024-8192 1.08-1.22x;
// tiles of 1024 elements were up to 5% slower at 128-1024 columns, tiles of 4096 5-18% slower at
// 512-1024.
constexpr int64_t kDropoutGradTileElems = 2048;

// The softmax of x, a chunk at a time, in the work type T.
template <class T>
struct ChunkedSoftmax;

template <>
struct ChunkedSoftmax<float> {
  using Part = ChunkPartial;
  using Norm = RowNormaliser;
  // A chunk's statistics; with e_out, also its exp(x - chunk max).
  static Part partial(const InArray& x, size_t first, int64_t n, float* e_out) {
    return vector_kernels().chunk_partial(x.at(first), Dtypes{x.type, x.type}, n, e_out);
  }
  static Norm merge(const Part* parts, int64_t count) { return merge_chunk_partials(parts, count); }
  // s of the chunk, from its stored exp values e (scaled: exp_range.h) by the forward's own
  // finish kernels, so s is the forward's fp32 softmax bit for bit. A chunk far below the row's
  // max is finished from x with the row's max as shift (chunk_finish), as the forward does.
  static void probs(const InArray& x, size_t first, int64_t n, const Part& part, const Norm& norm, float* e_to_s) {
    const VectorKernels& k = vector_kernels();
    const ChunkFinish f = chunk_finish(part, norm, 1.0, false);
    if (f.shift == part.max) {
      k.finish_stored(e_to_s, e_to_s, Dtypes{SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F32}, n, f.factor, false);
    } else {
      k.finish_recompute(x.at(first), e_to_s, Dtypes{x.type, SOFTMAX_DTYPE_F32}, n, f, false);
    }
  }
};

template <>
struct ChunkedSoftmax<double> {
  using Part = ChunkStats64;
  struct Norm {
    bool nan_row;
    double max;
    double sum;
  };
  static Part partial(const InArray& x, size_t first, int64_t n, double* e_out) {
    return softmax_chunk_stats_f64(read_as<double>(x, first, n, GradSlot::A), n, e_out);
  }
  // The forward's merge rule (chunk_merge.h) with double maxima.
  static Norm merge(const Part* parts, int64_t count) {
    Norm r{false, -std::numeric_limits<double>::infinity(), 0.0};
    for (int64_t c = 0; c < count; ++c) {
      r.nan_row |= parts[c].has_nan;
      if (parts[c].max > r.max) r.max = parts[c].max;
    }
    if (r.nan_row || std::isinf(r.max)) return Norm{true, r.max, std::numeric_limits<double>::quiet_NaN()};
    for (int64_t c = 0; c < count; ++c)
      if (parts[c].sum != 0.0) r.sum += parts[c].sum * std::exp(parts[c].max - r.max);
    return r;
  }
  // s = e * exp(m_c - M) / S for the chunk (e unscaled in double).
  static void probs(const InArray&, size_t, int64_t n, const Part& part, const Norm& norm, double* e_to_s) {
    double factor;
    if (norm.nan_row) {
      factor = std::numeric_limits<double>::quiet_NaN();
    } else if (part.max == -std::numeric_limits<double>::infinity()) {
      factor = 0.0;
    } else {
      factor = std::exp(part.max - norm.max) / norm.sum;
    }
    scale_by(e_to_s, n, factor);
  }
};

template <class T>
struct DropoutGrad {
  using Softmax = ChunkedSoftmax<T>;
  using Part = typename Softmax::Part;
  using Norm = typename Softmax::Norm;

  ChunkGrid grid;
  InArray x, dy;
  OutArray dx;
  DropoutParams d;
  T scale;

  void keep_bytes(size_t first, int64_t n, uint8_t* keep) const {
    if (d.p == 0.0f) {
      std::memset(keep, 1, size_t(n));  // u > 0 always holds: no need to draw
    } else {
      vector_kernels().keep_bytes(d.seed, d.offset, d.p, first, n, keep);
    }
  }

  // Turns a chunk's e (in probs) into s, fills keep and g, and returns the chunk's sum(s * g).
  T probs_and_grads(int64_t r, int64_t c, const Part& part, const Norm& norm, T* probs, T* grads,
                    uint8_t* keep) const {
    const size_t first = grid.flat(r, c);
    const int64_t n = grid.len(c);
    Softmax::probs(x, first, n, part, norm, probs);
    keep_bytes(first, n, keep);
    dropout_grad(read_as<T>(dy, first, n, GradSlot::B), keep, scale, n, grads);
    return grad_dot(probs, grads, n, false);
  }

  void finish(int64_t r, int64_t c, const T* probs, const T* grads, T dot) const {
    const size_t first = grid.flat(r, c);
    const int64_t n = grid.len(c);
    T* out = result_space<T>(dx, first, n);
    grad_finish(probs, grads, out, n, dot, false);
    write_back(out, dx, first, n);
  }

  // ---- the recomputing passes, one chunk at a time ----

  struct ChunkBuffers {
    T* probs;
    T* grads;
    uint8_t* keep;
  };
  static ChunkBuffers chunk_buffers(int64_t n) {
    return {grad_scratch_of<T>(GradSlot::Probs, size_t(n)), grad_scratch_of<T>(GradSlot::Grads, size_t(n)),
            grad_scratch_of<uint8_t>(GradSlot::Keep, size_t(n))};
  }

  Part pass1(int64_t r, int64_t c) const { return Softmax::partial(x, grid.flat(r, c), grid.len(c), nullptr); }

  // s, keep and g of the chunk into b (the chunk's exp values recomputed: same bits as pass 1's).
  T pass2(int64_t r, int64_t c, const Norm& norm, const ChunkBuffers& b) const {
    const Part part = Softmax::partial(x, grid.flat(r, c), grid.len(c), b.probs);
    return probs_and_grads(r, c, part, norm, b.probs, b.grads, b.keep);
  }

  void pass3(int64_t r, int64_t c, const Norm& norm, T dot) const {
    const ChunkBuffers b = chunk_buffers(grid.len(c));
    pass2(r, c, norm, b);
    finish(r, c, b.probs, b.grads, dot);
  }

  // ---- short rows, a tile at a time ----

  // A tile of nr whole rows of one chunk each, a call per step for the whole tile: the keep bytes,
  // g, s (fp32: the forward's short-row kernel, whose bits are the chunk kernels' for rows of one
  // chunk, vector_kernels.h), then each row's dot and dx by the softmax backward's row kernels.
  // Rows of a few dozen elements spent most of their time in row_stored's per-row calls.
  void tile(int64_t r0, int64_t nr) const {
    const int64_t cols = grid.cols, n = nr * cols;
    const size_t first = grid.flat(r0, 0);
    T* probs = grad_scratch_of<T>(GradSlot::Probs, size_t(n));
    T* grads = grad_scratch_of<T>(GradSlot::Grads, size_t(n));
    uint8_t* keep = grad_scratch_of<uint8_t>(GradSlot::Keep, size_t(n));
    keep_bytes(first, n, keep);
    dropout_grad(read_as<T>(dy, first, n, GradSlot::B), keep, scale, n, grads);  // before dx == dy is written
    if constexpr (std::is_same<T, float>::value) {
      vector_kernels().short_rows(x.at(first), probs, Dtypes{x.type, SOFTMAX_DTYPE_F32}, nr, cols, false, false);
    } else {
      for (int64_t r = 0; r < nr; ++r) {
        const size_t o = size_t(r * cols);
        const Part part = Softmax::partial(x, first + o, cols, probs + o);
        Softmax::probs(x, first + o, cols, part, Softmax::merge(&part, 1), probs + o);
      }
    }
    if (finish_streamed_to_dx(dx, probs, grads, first, nr, cols, static_cast<const T*>(nullptr), false,
                              FinishPrefetch::None))
      return;
    T* out = result_space<T>(dx, first, n);
    grad_rows(probs, grads, out, nr, cols, static_cast<const T*>(nullptr), false, false);
    write_back(out, dx, first, n);
  }

  // ---- a whole row on one thread ----

  void row_stored(int64_t r) const {
    const int64_t chunks = grid.chunks();
    T* probs = grad_scratch_of<T>(GradSlot::Probs, size_t(grid.cols));
    T* grads = grad_scratch_of<T>(GradSlot::Grads, size_t(grid.cols));
    uint8_t* keep = grad_scratch_of<uint8_t>(GradSlot::Keep, size_t(grid.cols));
    Part parts[kStoreUpToChunks];
    for (int64_t c = 0; c < chunks; ++c) parts[c] = Softmax::partial(x, grid.flat(r, c), grid.len(c), probs + c * kChunkElems);
    const Norm norm = Softmax::merge(parts, chunks);
    double s = 0.0;
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t o = c * kChunkElems;
      s += double(probs_and_grads(r, c, parts[c], norm, probs + o, grads + o, keep + o));
    }
    const T dot = T(s);
    for (int64_t c = chunks - 1; c >= 0; --c) finish(r, c, probs + c * kChunkElems, grads + c * kChunkElems, dot);
  }

  void row_recomputed(int64_t r) const {
    const int64_t chunks = grid.chunks();
    std::vector<Part> parts(static_cast<size_t>(chunks));
    for (int64_t c = 0; c < chunks; ++c) parts[size_t(c)] = pass1(r, c);
    const Norm norm = Softmax::merge(parts.data(), chunks);
    double s = 0.0;
    for (int64_t c = 0; c < chunks; ++c) s += double(pass2(r, c, norm, chunk_buffers(grid.len(c))));
    const T dot = T(s);
    for (int64_t c = chunks - 1; c >= 0; --c) pass3(r, c, norm, dot);
  }

  bool run(int threads) const {
    if (grid.short_rows()) {
      const int64_t rows_per_tile = std::max<int64_t>(1, kDropoutGradTileElems / grid.cols);
      return for_tiles(grid, threads, [&](int64_t r0, int64_t nr) {
        for (int64_t r = r0; r < r0 + nr; r += rows_per_tile) tile(r, std::min(rows_per_tile, r0 + nr - r));
      });
    }
    if (whole_rows_per_thread(grid, threads)) {
      if (grid.chunks() <= kStoreUpToChunks) return for_rows(grid, threads, [&](int64_t r) { row_stored(r); });
      return for_rows(grid, threads, [&](int64_t r) { row_recomputed(r); });
    }
    const int64_t chunks = grid.chunks();
    std::vector<Part> parts(size_t(grid.rows * chunks));
    if (!for_chunk_items(grid, threads, false, [&](int64_t r, int64_t c) { parts[size_t(r * chunks + c)] = pass1(r, c); }))
      return false;
    std::vector<Norm> norms(size_t(grid.rows));
    for (int64_t r = 0; r < grid.rows; ++r) norms[size_t(r)] = Softmax::merge(&parts[size_t(r * chunks)], chunks);
    std::vector<T> dots(size_t(grid.rows * chunks));
    if (!for_chunk_items(grid, threads, false,
                         [&](int64_t r, int64_t c) {
                           dots[size_t(r * chunks + c)] = pass2(r, c, norms[size_t(r)], chunk_buffers(grid.len(c)));
                         }))
      return false;
    std::vector<T> row_dot(size_t(grid.rows));
    for (int64_t r = 0; r < grid.rows; ++r) row_dot[size_t(r)] = T(merge_in_order(&dots[size_t(r * chunks)], chunks));
    return for_chunk_items(grid, threads, true,
                           [&](int64_t r, int64_t c) { pass3(r, c, norms[size_t(r)], row_dot[size_t(r)]); });
  }
};

// p == 1: every element dropped, dx = 0 (+0 is all-zero bits in every storage type).
bool zero_fill(const ChunkGrid& g, const OutArray& dx, int threads) {
  return for_chunk_items(g, threads, false, [&](int64_t r, int64_t c) {
    std::memset(dx.at(g.flat(r, c)), 0, size_t(g.len(c)) * storage_size(dx.type));
  });
}

}  // namespace

Outcome softmax_dropout_backward(const DropoutBackwardProblem& p, const DropoutParams& d, const ExecContext& ctx) {
  const ChunkGrid g{p.rows, p.cols};
  const InArray x{p.x, p.dtype.x}, dy{p.dy, p.dtype.y};
  const OutArray dx{p.dx, p.dtype.x,
                    stream_results(p.dtype.x, fp64_arithmetic(p.dtype), p.dx == p.dy, size_t(p.rows) * size_t(p.cols))};
  const int threads = threads_for(ctx, g.total());
  // The forward's scale: 1 / (1 - p) in double, rounded once to the arithmetic type.
  const double scale = 1.0 / (1.0 - double(d.p));
  bool ok;
  if (d.p >= 1.0f) {
    ok = zero_fill(g, dx, threads);
  } else if (fp64_arithmetic(p.dtype)) {
    ok = DropoutGrad<double>{g, x, dy, dx, d, scale}.run(threads);
  } else {
    ok = DropoutGrad<float>{g, x, dy, dx, d, static_cast<float>(scale)}.run(threads);
  }
  if (!ok) return Outcome::fail(SOFTMAX_STATUS_OUT_OF_MEMORY, "CPU backend: out of scratch memory");
  return Outcome::ok();
}

}  // namespace cpu
}  // namespace softmax_internal
