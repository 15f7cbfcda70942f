/* SPDX-License-Identifier: Apache-2.0 */
// Per-thread work buffers of the backward and sharded-row drivers: widened chunks of y, dy, x,
// results waiting to be narrowed, a row's probabilities and gradients, keep bytes. They live as
// long as the thread (OpenMP keeps its pool), so a call allocates nothing after the first one of
// its size. Separate from thread_scratch.h on purpose: the drivers call the forward's kernels
// (chunk_partial, keep_bytes), which use those slots themselves.
#pragma once

#include <cstddef>

namespace softmax_internal {
namespace cpu {

enum class GradSlot : int {
  A = 0,     // first operand of a chunk or tile (y, or x)
  B = 1,     // second operand (dy)
  Out = 2,   // results before they are narrowed to the storage type
  Probs = 3, // softmax probabilities of a dropout-backward row
  Grads = 4, // masked, scaled dy of a dropout-backward row
  Keep = 5,  // keep bytes of a dropout-backward row
  Count = 6
};

// A 64-byte aligned buffer of at least `bytes` bytes owned by the calling thread; contents are
// not preserved when it grows. Throws std::bad_alloc when memory runs out.
void* grad_scratch(GradSlot slot, size_t bytes);

template <class T>
T* grad_scratch_of(GradSlot slot, size_t n) {
  return static_cast<T*>(grad_scratch(slot, n * sizeof(T)));
}

}  // namespace cpu
}  // namespace softmax_internal
