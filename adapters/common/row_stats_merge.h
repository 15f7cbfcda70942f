/* SPDX-License-Identifier: Apache-2.0 */
// The merge rule for per-shard row statistics (softmax/softmax.h, softmax_row_stats): a shard's
// (max m, sum s) rescaled to a global max M contributes s * exp(m - M). A shard with s == 0 (no
// columns, or all -inf) contributes exactly 0, so it never turns a row into NaN through
// exp(-inf - -inf); a NaN sum (the shard held a NaN or +inf) stays NaN and makes the row NaN.
// Used on the host by the MPI all-reduce and on the device by the NCCL adapter.
#pragma once

#include <math.h>

#if defined(__CUDACC__)
#define SOFTMAX_ADAPTER_HD __host__ __device__
#else
#define SOFTMAX_ADAPTER_HD
#endif

namespace softmax_adapter {

// A shard's sum rescaled to the global max, in double so that the merged sum is rounded once.
SOFTMAX_ADAPTER_HD inline double rescaled_sum(float s, float m, float global_max) {
  return s == 0.0f ? 0.0 : static_cast<double>(s) * exp(static_cast<double>(m) - static_cast<double>(global_max));
}

// Merges two shards' (max, sum) into one. Symmetric bit for bit (a, b gives the same as b, a),
// so every order an all-reduce may apply it in gives every rank the same numbers.
SOFTMAX_ADAPTER_HD inline void merge_row_stats(float ma, float sa, float mb, float sb, float* m, float* s) {
  const float global = fmaxf(ma, mb);  // fmax ignores a NaN max; the NaN sum beside it still poisons
  *m = global;
  *s = static_cast<float>(rescaled_sum(sa, ma, global) + rescaled_sum(sb, mb, global));
}

}  // namespace softmax_adapter
