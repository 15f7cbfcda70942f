/* SPDX-License-Identifier: Apache-2.0 */
// When the CPU backend's f32 results go out through non-temporal stores: one rule for the
// forward and backward kernels.
#pragma once

#include <cstddef>
#include <cstdint>

namespace softmax_internal {
namespace cpu {

// SOFTMAX_CPU_STREAM_STORES, read once (cpu_backend.cpp): -1 the size rule, 0 never, 1 always.
int stream_stores_override();

// Results of 32 MiB and more are streamed: far bigger than the caches, their lines would only
// evict the inputs.
inline bool stream_result_bytes(size_t bytes) {
  const int forced = stream_stores_override();
  if (forced >= 0) return forced == 1;
  return bytes >= (size_t{32} << 20);
}

// Within a streamed result, whether rows of `cols` f32 elements from `out` on go out through
// non-temporal stores a row at a time: where every row starts on a boundary of `vector_bytes`, or
// is at least `min_cols` long. A row streamed on its own off those boundaries leaves a partially
// written line at each end, stored with ordinary stores; shorter rows take ordinary stores
// throughout.
inline bool stream_rows_alone(const void* out, int64_t cols, size_t vector_bytes, int64_t min_cols) {
  const bool rows_on_vectors = size_t(cols) * sizeof(float) % vector_bytes == 0 &&
                               reinterpret_cast<uintptr_t>(out) % vector_bytes == 0;
  return rows_on_vectors || cols >= min_cols;
}

// min_cols of the forward kernels (2 KiB rows). On a 2-core Zen 5 EPYC, rows streamed on their
// own against ordinary stores: softmax_rows at 129-513 columns 1.1-1.45x the time, at 769-4095
// 0.75-0.9x; softmax_dropout at 129 columns 1.45x, at 257-513 0.8-0.95x, at 769-4095 0.75-0.8x.
constexpr int64_t kForwardStreamRowsFrom = 512;

// min_cols of the backward kernels, whose rows of 129-384 columns streamed on their own took
// 10-15% less time than with ordinary stores on the same machine, rows of 33-100 columns 3-25%
// more (127: equal).
constexpr int64_t kBackwardStreamRowsFrom = 128;

}  // namespace cpu
}  // namespace softmax_internal
