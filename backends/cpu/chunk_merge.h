/* SPDX-License-Identifier: Apache-2.0 */
// Merging per-chunk (max, sum) partials of one row into the row's normaliser, in double and in
// chunk order, so the result does not depend on which thread computed which chunk.
#pragma once

#include <cstdint>

#include "backends/cpu/vector_kernels.h"

namespace softmax_internal {
namespace cpu {

struct RowNormaliser {
  bool nan_row;  // NaN anywhere, any +inf, or all -inf: the whole row is NaN
  double max;    // M
  double sum;    // S = sum_c s_c * exp(m_c - M)
};

RowNormaliser merge_chunk_partials(const ChunkPartial* parts, int64_t count);

// Phase-2 parameters of one chunk: y = exp(x - shift) * factor, with extra_scale (1 for softmax,
// the inverted-dropout scale for dropout) folded into the factor in double. Normally shift = m_c
// and factor = exp(m_c - M) / S * extra_scale; for a chunk so far below the row's max that this
// factor would be too small for the kernels to apply in one rounding (exp_range.h), shift = M and
// factor = extra_scale / S instead, so the kernels compute exp(x - M) directly. `fp64` says which
// arithmetic's threshold applies. The choice depends only on the data, so every schedule makes it
// alike; a chunk with shift != m_c must be finished by recomputing exp, not from stored values.
ChunkFinish chunk_finish(const ChunkPartial& part, const RowNormaliser& row, double extra_scale, bool fp64);

// log(S), the constant of log-softmax (NaN for a NaN row); fp32 kernels round it to float.
double row_log_sum(const RowNormaliser& row);

}  // namespace cpu
}  // namespace softmax_internal
