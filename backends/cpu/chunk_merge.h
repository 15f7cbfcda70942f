// Merging per-chunk (max, sum) partials of one row into the row's normaliser, in double and in
// chunk order, so the result does not depend on which thread computed which chunk.
#pragma once

#include <cstdint>

#include "backends/cpu/vector_kernels.h"

namespace softmax_internal {
namespace cpu {

struct RowNormaliser {
  bool nan_row;  // NaN anywhere, any +inf, or all -inf: the whole row is NaN (DESIGN.md)
  float max;     // M
  double sum;    // S = sum_c s_c * exp(m_c - M)
};

RowNormaliser merge_chunk_partials(const ChunkPartial* parts, int64_t count);

// Phase-2 parameters of one chunk: e = exp(x - shift), y = e * factor * extra_scale, where
// extra_scale is 1 for softmax and the inverted-dropout scale for dropout (folded in double).
ChunkFinish chunk_finish(const ChunkPartial& part, const RowNormaliser& row, double extra_scale);

// log(S) as the fp32 constant of log-softmax (NaN for a NaN row).
float row_log_sum(const RowNormaliser& row);

}  // namespace cpu
}  // namespace softmax_internal
