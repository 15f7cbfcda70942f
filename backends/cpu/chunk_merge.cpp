// SPDX-License-Identifier: Apache-2.0
// Merging chunk partials: see chunk_merge.h. Kept out of the vector kernels so that every kernel
// implementation and every driver normalises with the very same double arithmetic.
#include "backends/cpu/chunk_merge.h"

#include <cmath>
#include <limits>

#include "backends/cpu/exp_range.h"

namespace softmax_internal {
namespace cpu {

RowNormaliser merge_chunk_partials(const ChunkPartial* parts, int64_t count) {
  RowNormaliser r{false, -std::numeric_limits<double>::infinity(), 0.0};
  for (int64_t c = 0; c < count; ++c) {
    r.nan_row |= parts[c].has_nan;
    if (parts[c].max > r.max) r.max = parts[c].max;
  }
  if (r.nan_row || std::isinf(r.max)) {
    r.nan_row = true;
    r.sum = std::numeric_limits<double>::quiet_NaN();
    return r;
  }
  // Two-step form of the online rule (m = max(ma, mb), s = sa e^(ma-m) + sb e^(mb-m)): with M
  // known first every term is scaled once, in double, in a fixed order.
  for (int64_t c = 0; c < count; ++c) {
    if (parts[c].sum != 0.0f) r.sum += double(parts[c].sum) * std::exp(double(parts[c].max) - r.max);
  }
  return r;
}

ChunkFinish chunk_finish(const ChunkPartial& part, const RowNormaliser& row, double extra_scale, bool fp64) {
  if (row.nan_row) return ChunkFinish{0.0, std::numeric_limits<double>::quiet_NaN()};
  if (part.max == -std::numeric_limits<double>::infinity()) return ChunkFinish{0.0, 0.0};
  const double factor = std::exp(part.max - row.max) / row.sum * extra_scale;
  const bool fits = fp64 ? exp_factor_fits_once(factor) : exp_factor_fits_once(static_cast<float>(factor));
  if (fits) return ChunkFinish{part.max, factor};
  // extra_scale / S is at least 1 / S >= 1 / cols: it always fits.
  return ChunkFinish{row.max, extra_scale / row.sum};
}

double row_log_sum(const RowNormaliser& row) {
  if (row.nan_row) return std::numeric_limits<double>::quiet_NaN();
  return std::log(row.sum);
}

}  // namespace cpu
}  // namespace softmax_internal
