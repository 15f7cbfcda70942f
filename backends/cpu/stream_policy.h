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

// Rows of at least this many f32 elements (2 KiB) are streamed on their own wherever they start:
// the partial vectors at their two ends, stored with ordinary stores, hold a line in 16 or fewer.
constexpr int64_t kStreamOwnRowElems = 512;

// Within a streamed result, whether rows of `cols` f32 elements from `out` on go out through
// non-temporal stores a row at a time: where every row starts on a boundary of `vector_bytes`, or
// is at least kStreamOwnRowElems long. Shorter rows off those boundaries take ordinary stores: on
// a 2-core Zen 5 EPYC, streaming them left a partially written line at both ends of every row
// (softmax_rows at 129-513 columns 1.1-1.5x as long).
inline bool stream_rows_alone(const void* out, int64_t cols, size_t vector_bytes) {
  const bool rows_on_vectors = size_t(cols) * sizeof(float) % vector_bytes == 0 &&
                               reinterpret_cast<uintptr_t>(out) % vector_bytes == 0;
  return rows_on_vectors || cols >= kStreamOwnRowElems;
}

}  // namespace cpu
}  // namespace softmax_internal
