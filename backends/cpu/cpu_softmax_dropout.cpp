// SPDX-License-Identifier: Apache-2.0
// softmax_dropout on the CPU: y = keep ? softmax(x) * 1/(1-p) : 0 with the keep decision of
// flat element i from Philox (philox.h), written to the optional mask as 1/0 bytes.
//   p == 0: no random numbers at all; exactly softmax_rows (same kernels, same bits), mask all 1.
//   p == 1: nothing is kept (u <= 1 < ... never > 1), so y and the mask are zeros; the softmax
//           itself is skipped.
// Otherwise rows that fit in one chunk go to the short-row dropout kernel (exp once, the keep
// bytes of a tile of rows in one go), and longer rows run phase 1 like softmax_rows while phase 2
// draws each chunk's keep bytes (into the caller's mask when there is one) and applies them with
// the scale folded into f_c.
#include <cstring>

#include "backends/cpu/chunked_rows.h"
#include "backends/cpu/cpu_drivers.h"
#include "backends/cpu/dropout_keep_bytes.h"

namespace softmax_internal {
namespace cpu {

namespace {

// memset of n bytes shared over threads (large masks and outputs).
void parallel_fill(unsigned char* p, int value, size_t n, int threads) {
  constexpr size_t kBlock = size_t{1} << 20;
  const int64_t blocks = int64_t((n + kBlock - 1) / kBlock);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const size_t begin = size_t(b) * kBlock;
    std::memset(p + begin, value, std::min(kBlock, n - begin));
  }
}

}  // namespace

Outcome softmax_dropout(const RowsProblem& problem, const DropoutParams& d, const ExecContext& ctx) {
  const RowsView v(problem);
  const int threads = threads_for(ctx, v.total());

  if (d.p == 0.0f) {
    RowsProblem plain = problem;
    plain.log_softmax = false;
    Outcome o = softmax_rows(plain, ctx);
    if (o.good() && d.keep_mask != nullptr) parallel_fill(d.keep_mask, 1, v.total(), threads);
    return o;
  }
  if (d.p >= 1.0f) {
    parallel_fill(v.y, 0, v.y_bytes(), threads);
    if (d.keep_mask != nullptr) parallel_fill(d.keep_mask, 0, v.total(), threads);
    return Outcome::ok();
  }

  const VectorKernels& k = vector_kernels_for(problem.dtype);
  // 1 / (1 - p) in double (1 - p is exact), folded into each chunk's factor before the one
  // rounding to the arithmetic type; the keep rule as an integer threshold, derived once.
  const DropoutRule rule{d.seed, d.offset, dropout_word_threshold(d.p), 1.0 / (1.0 - double(d.p))};
  const bool stream = stream_output(v);
  bool ok;
  if (v.cols <= kChunkElems) {
    ok = run_row_blocks(k, v, threads, [&](int64_t r0, int64_t nr) {
      k.short_rows_dropout(v.x_at(r0, 0), v.y_at(r0, 0), v.dtype, nr, v.cols, v.flat(r0, 0), rule,
                           d.keep_mask != nullptr ? d.keep_mask + v.flat(r0, 0) : nullptr, stream);
    });
  } else {
    const bool fp64 = fp64_arithmetic(problem.dtype);
    ok = run_two_phase(
        k, v, threads, kStoreExpUpToCols,
        [&](int64_t r, int64_t c, const ChunkPartial& part, const RowNormaliser& norm, const void* stored) {
          const int64_t n = v.chunk_len(c);
          const size_t first = v.flat(r, c);
          uint8_t* keep = d.keep_mask != nullptr
                              ? d.keep_mask + first
                              : static_cast<uint8_t*>(thread_scratch(ScratchSlot::Keep, size_t(n)));
          k.keep_bytes_for(rule, first, n, keep);
          const ChunkFinish f = chunk_finish(part, norm, rule.scale, fp64);
          if (stored != nullptr && f.shift == part.max) {
            k.finish_dropout_stored(stored, v.y_at(r, c), v.dtype, n, f.factor, keep, stream);
          } else {
            k.finish_dropout(v.x_at(r, c), v.y_at(r, c), v.dtype, n, f, keep);
          }
        });
  }
  if (!ok) return Outcome::fail(SOFTMAX_STATUS_OUT_OF_MEMORY, "CPU backend: out of scratch memory");
  return Outcome::ok();
}

}  // namespace cpu
}  // namespace softmax_internal
