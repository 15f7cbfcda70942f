// SPDX-License-Identifier: Apache-2.0
// softmax_rows on the CPU: rows that fit in one chunk go to the short-row kernel in blocks of
// rows (one sweep over memory, everything else in L1); longer rows go through the two-phase
// chunk schedule (chunked_rows.h).
#include "backends/cpu/chunked_rows.h"
#include "backends/cpu/cpu_drivers.h"

namespace softmax_internal {
namespace cpu {

namespace {

Outcome short_rows(const VectorKernels& k, const RowsView& v, bool log_softmax, int threads) {
  const bool stream = stream_output(v);
  const bool ok = run_row_blocks(k, v, threads, [&](int64_t r0, int64_t nr) {
    k.short_rows(v.x_at(r0, 0), v.y_at(r0, 0), v.dtype, nr, v.cols, log_softmax, stream);
  });
  if (!ok) return Outcome::fail(SOFTMAX_STATUS_OUT_OF_MEMORY, "CPU backend: out of scratch memory");
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
