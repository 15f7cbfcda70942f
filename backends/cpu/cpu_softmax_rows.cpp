// softmax_rows on the CPU: rows that fit in one chunk go to the short-row kernel in blocks of
// rows (one sweep over memory, everything else in L1); longer rows go through the two-phase
// chunk schedule (chunked_rows.h).
#include <algorithm>
#include <atomic>

#include "backends/cpu/chunked_rows.h"
#include "backends/cpu/cpu_drivers.h"

namespace softmax_internal {
namespace cpu {

namespace {

// Keep a long row's exp values for phase 2 (exp computed once) up to 1M elements = 4 MiB per
// thread (fp64: 8 MiB); past that they would not stay in cache either and recomputing exp is
// cheaper than a second trip to memory for them. Same bits either way (vector_kernels.h).
constexpr int64_t kStoreExpUpToCols = int64_t{1} << 20;

Outcome short_rows(const VectorKernels& k, const RowsView& v, bool log_softmax, int threads) {
  const bool stream = stream_output(v);
  // Blocks of whole rows, a few per thread so a static split stays balanced, each at least
  // a tile's worth of work so the per-block overhead stays small.
  const int64_t min_block = std::max<int64_t>(1, 8192 / v.cols);
  const int64_t block = std::max(min_block, (v.rows + 8 * threads - 1) / (8 * threads));
  const int64_t blocks = (v.rows + block - 1) / block;
  std::atomic<bool> failed{false};
#pragma omp parallel num_threads(threads)
  {
#pragma omp for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      if (failed.load(std::memory_order_relaxed)) continue;
      const int64_t r0 = b * block, nr = std::min(block, v.rows - r0);
      try {
        k.short_rows(v.x_at(r0, 0), v.y_at(r0, 0), v.dtype, nr, v.cols, log_softmax, stream);
      } catch (...) {
        failed.store(true);
      }
    }
    k.stream_fence();
  }
  if (failed.load()) return Outcome::fail(SOFTMAX_STATUS_OUT_OF_MEMORY, "CPU backend: out of scratch memory");
  return Outcome::ok();
}

}  // namespace

Outcome softmax_rows(const RowsProblem& problem, const ExecContext& ctx) {
  const RowsView v(problem);
  const int threads = threads_for(ctx, v.total());
  const VectorKernels& k = vector_kernels_for(problem.dtype);
  if (v.cols <= kChunkElems) return short_rows(k, v, problem.log_softmax, threads);

  const bool stream = stream_output(v);
  const bool fp64 = fp64_arithmetic(problem.dtype);
  bool ok;
  if (problem.log_softmax) {
    ok = run_two_phase(k, v, threads, 0,
                       [&](int64_t r, int64_t c, const ChunkPartial&, const RowNormaliser& norm, const void*) {
                         k.finish_log(v.x_at(r, c), v.y_at(r, c), v.dtype, v.chunk_len(c), norm.max,
                                      row_log_sum(norm), stream);
                       });
  } else {
    ok = run_two_phase(k, v, threads, kStoreExpUpToCols,
                       [&](int64_t r, int64_t c, const ChunkPartial& part, const RowNormaliser& norm,
                           const void* stored) {
                         const ChunkFinish f = chunk_finish(part, norm, 1.0, fp64);
                         if (stored != nullptr && f.shift == part.max) {
                           k.finish_stored(stored, v.y_at(r, c), v.dtype, v.chunk_len(c), f.factor, stream);
                         } else {
                           k.finish_recompute(v.x_at(r, c), v.y_at(r, c), v.dtype, v.chunk_len(c), f, stream);
                         }
                       });
  }
  if (!ok) return Outcome::fail(SOFTMAX_STATUS_OUT_OF_MEMORY, "CPU backend: out of scratch memory");
  return Outcome::ok();
}

}  // namespace cpu
}  // namespace softmax_internal
