// SPDX-License-Identifier: Apache-2.0
// softmax_dropout on the CPU: y = keep ? softmax(x) * 1/(1-p) : 0 with the keep decision of
// flat element i from Philox (philox.h), written to the optional mask as 1/0 bytes.
//   p == 0: no random numbers at all; exactly softmax_rows (same kernels, same bits), mask all 1.
//   p == 1: nothing is kept (u <= 1 < ... never > 1), so y and the mask are zeros; the softmax
//           itself is skipped.
// Otherwise rows that fit in one chunk go to the short-row dropout kernel (exp once, the keep
// bytes of the next tile of rows drawn between the rows of this one), and longer rows run phase 1
// like softmax_rows while phase 2 draws each chunk's keep bytes (into the caller's mask when there
// is one) and applies them with the scale folded into f_c, a piece at a time.
#include <algorithm>
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

// Elements of a chunk whose keep bytes are drawn, then applied, before the next piece's: the
// Philox arithmetic and the finishing loads and stores take turns at a grain where the core
// overlaps them (a whole chunk, 8K elements, at a time: 5-9% more time at 32K-64M columns on a
// 2-core AVX-512 Xeon).
constexpr int64_t kPieceElems = 1024;

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
          const ChunkFinish f = chunk_finish(part, norm, rule.scale, fp64);
          const bool from_stored = stored != nullptr && f.shift == part.max;
          const auto* x = static_cast<const unsigned char*>(v.x_at(r, c));
          auto* y = static_cast<unsigned char*>(v.y_at(r, c));
          // Pieces end on a group of four flat elements, so that no Philox group is drawn twice
          // (as one piece's ragged tail and the next one's ragged head).
          const int64_t lead = int64_t((4 - first % 4) % 4);
          for (int64_t o = 0, m = 0; o < n; o += m) {
            m = std::min(n - o, o == 0 ? lead + kPieceElems : kPieceElems);
            k.keep_bytes_for(rule, first + size_t(o), m, keep + o);
            if (from_stored) {
              k.finish_dropout_stored(static_cast<const unsigned char*>(stored) + size_t(o) * k.exp_bytes,
                                      y + size_t(o) * v.y_esize, v.dtype, m, f.factor, keep + o, stream);
            } else {
              k.finish_dropout(x + size_t(o) * v.x_esize, y + size_t(o) * v.y_esize, v.dtype, m, f, keep + o);
            }
          }
        });
  }
  if (!ok) return Outcome::fail(SOFTMAX_STATUS_OUT_OF_MEMORY, "CPU backend: out of scratch memory");
  return Outcome::ok();
}

}  // namespace cpu
}  // namespace softmax_internal
