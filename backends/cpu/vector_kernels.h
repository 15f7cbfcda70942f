/* SPDX-License-Identifier: Apache-2.0 */
// The table of vector kernels the CPU drivers call, and the arithmetic every implementation of it
// must share so that a row's result never depends on how the work was shared out.
//
// Arithmetic: fp32 when x and y are f32/f16/bf16 (vector_kernels(): Highway or portable), fp64
// when either is f64 (f64_vector_kernels()); vector_kernels_for(dtypes) picks. Storage types are
// converted inside the kernels as they read x and write y (Dtypes: x's type, y's type), so mixed
// storage costs no extra pass. Below, "float" means the table's arithmetic type.
//
// A row is cut into chunks of kChunkElems elements at fixed offsets (0, K, 2K, ...), whatever the
// number of threads or rows. For each chunk c the kernels compute
//   m_c = max(x_c),  e_i = exp(x_i - m_c),  s_c = sum of e_i (fixed accumulator tree)
// and the drivers merge the partials in double, in chunk order (chunk_merge.h):
//   M = max m_c,  S = sum_c s_c * exp(m_c - M),  f_c = float(exp(m_c - M) / S),  y_i = e_i * f_c.
// Inside the kernels e_i is held as e_i * 2^64 (fp64: 2^128) so that y_i is rounded into the
// subnormal range only once, in the final product (exp_range.h); s_c is reported unscaled.
// Because e_i is a pure function of (x_i, m_c), storing it in phase 1 and recomputing it in phase 2
// give the same bits, so a driver may pick either for speed without changing any result.
// Non-finite input needs no test in the loops: exp propagates NaN, and x - m_c is NaN for a +inf
// element or an all -inf chunk, so such sums come out NaN and the row becomes NaN through f_c
// (all -inf chunks are the one case handled apart, as they may sit in an otherwise finite row).
// A row with cols <= kChunkElems is a single chunk: f = float(1 / double(s)), which the short-row
// kernels compute as the division 1 / (s * 2^64) in the arithmetic type, applied to the scaled
// e_i: for a quotient of two floats the two are the same number up to that exact power of two
// (double has more than 2 * 24 + 2 bits, so rounding twice cannot differ from rounding once), and
// the fp32 division is shorter on the per-row critical path.
#pragma once

#include <softmax/softmax.h>

#include <cstddef>
#include <cstdint>

#include "backends/backend.h"

namespace softmax_internal {
namespace cpu {

// 8192 fp32 = 32 KiB: a chunk fits in L1 (48 KiB here), so the second touch of it in phase 1
// (the exp pass after the max pass) hits L1; and 64 partials per 8K elements keep the fp32
// chunk sum accurate (each accumulator lane adds at most 128 values).
constexpr int64_t kChunkElems = 8192;

// Phase-1 result for one chunk, in double whatever the arithmetic (fp32 values widen exactly).
struct ChunkPartial {
  double max;    // m_c; -inf when every element is -inf, +inf when one is +inf
  double sum;    // s_c = sum exp(x - m_c); 0 when max is -inf
  bool has_nan;  // a NaN or a +inf in the chunk (the sum came out NaN): the row is NaN
};

// What phase 2 of one chunk does with e_i = exp(x_i - shift); fp32 kernels round both to float.
struct ChunkFinish {
  double shift;   // m_c, or 0 for an all -inf chunk (whose factor is 0)
  double factor;  // f_c (softmax) or the dropout-scaled f_c * 1/(1-p); NaN for a NaN row
};

// One softmax_dropout call's keep rule and scale (backends/common/philox.h): element i is kept
// when its Philox word is above `threshold` (dropout_word_threshold(p), derived once per call),
// and a kept element is multiplied by scale = 1 / (1 - p).
struct DropoutRule {
  uint64_t seed;
  uint64_t offset;
  int64_t threshold;
  double scale;
};

struct VectorKernels {
  const char* name;
  size_t exp_bytes;  // bytes per e_i that chunk_partial stores (sizeof the arithmetic type)

  // Whole rows with cols <= kChunkElems: max, exp+store+sum, scale, all while the row is in L1.
  // `stream` asks for non-temporal stores of y (large outputs that will not be re-read soon).
  void (*short_rows)(const void* x, void* y, Dtypes dtype, int64_t rows, int64_t cols,
                     bool log_softmax, bool stream);

  // Phase 1 of one chunk of n <= kChunkElems elements of x. When exp_out is not null the e_i are
  // stored there (n * exp_bytes bytes, scaled as above) for a later finish_stored.
  ChunkPartial (*chunk_partial)(const void* x, Dtypes dtype, int64_t n, void* exp_out);

  // Phase 2 of one chunk: y = exp(x - shift) * factor (recomputing e), or from the stored e.
  void (*finish_recompute)(const void* x, void* y, Dtypes dtype, int64_t n, ChunkFinish f,
                           bool stream);
  void (*finish_stored)(const void* e, void* y, Dtypes dtype, int64_t n, double factor,
                        bool stream);

  // Phase 2 of log-softmax: y = (x - max) - log_sum.
  void (*finish_log)(const void* x, void* y, Dtypes dtype, int64_t n, double max,
                     double log_sum, bool stream);

  // Dropout phase 2: y = keep[i] ? exp(x - shift) * factor : 0 (keep holds 0/1 bytes), with e
  // recomputed from x or taken from chunk_partial's stored values.
  void (*finish_dropout)(const void* x, void* y, Dtypes dtype, int64_t n, ChunkFinish f,
                         const uint8_t* keep);
  void (*finish_dropout_stored)(const void* e, void* y, Dtypes dtype, int64_t n, double factor,
                                const uint8_t* keep, bool stream);

  // softmax_dropout of whole rows with cols <= kChunkElems whose first element has flat index
  // `first`: y = keep ? softmax(x) * rule.scale : 0, exp computed once per element, the keep
  // bytes drawn a tile of rows at a time and copied to `mask` when it is not null.
  void (*short_rows_dropout)(const void* x, void* y, Dtypes dtype, int64_t rows, int64_t cols,
                             uint64_t first, const DropoutRule& rule, uint8_t* mask, bool stream);

  // Dropout keep decisions of flat elements first .. first+n-1 as 0/1 bytes, exactly
  // dropout_keep() of backends/common/philox.h (see dropout_keep_bytes.h); the first form derives
  // the word threshold from p on each call, the second takes the call's rule.
  void (*keep_bytes)(uint64_t seed, uint64_t offset, float p, uint64_t first, int64_t n, uint8_t* keep);
  void (*keep_bytes_for)(const DropoutRule& rule, uint64_t first, int64_t n, uint8_t* keep);

  // Publishes non-temporal stores of the calling thread (a fence); call before a barrier.
  void (*stream_fence)();
};

// The portable implementation (always built) and the Highway one (when configured with it), both
// fp32 arithmetic; and the fp64 one (portable code, always built).
const VectorKernels& portable_vector_kernels();
#if defined(SOFTMAX_CPU_HAVE_HIGHWAY)
const VectorKernels& highway_vector_kernels();
#endif
const VectorKernels& f64_vector_kernels();

// The fp32 implementation the drivers use: Highway when built with it, else portable.
// SOFTMAX_CPU_KERNELS=portable in the environment forces the portable one (for testing it on a
// machine that has Highway).
const VectorKernels& vector_kernels();

// The table for a call's storage types: fp64 arithmetic when x or y is f64, else fp32.
inline const VectorKernels& vector_kernels_for(Dtypes dtype) {
  return fp64_arithmetic(dtype) ? f64_vector_kernels() : vector_kernels();
}

}  // namespace cpu
}  // namespace softmax_internal
