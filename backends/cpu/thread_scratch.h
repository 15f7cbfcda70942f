/* SPDX-License-Identifier: Apache-2.0 */
// Per-thread fp32 work buffers for the CPU kernels (converted 16-bit inputs, output tiles, stored
// exp values, chunk partials). They live as long as the thread (OpenMP keeps its pool), so a
// call allocates nothing after the first one of its size; each slot grows on demand.
#pragma once

#include <cstddef>

namespace softmax_internal {
namespace cpu {

enum class ScratchSlot : int {
  Input = 0,   // a chunk of x converted to fp32
  Output = 1,  // an fp32 output tile before it is written (and converted) to y
  Exp = 2,     // e_i of a whole long row kept for phase 2
  Keep = 3,      // dropout keep bytes of a chunk
  Partials = 4,  // the (max, sum) partials of one long row
  Count = 5
};

// One growable work buffer, 64-byte aligned, with a vector's worth of slack past `bytes` so
// kernels may read one full vector past a tail; its contents are not preserved when it grows.
// Throws std::bad_alloc when memory runs out. Meant to be thread_local (here and grad_scratch.h).
class ScratchBuffer {
 public:
  ScratchBuffer() = default;
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  ~ScratchBuffer();
  void* reserve(size_t bytes);

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// A 64-byte aligned buffer of at least `bytes` bytes, owned by the calling thread; its previous
// contents are not preserved when it grows.
void* thread_scratch(ScratchSlot slot, size_t bytes);

inline float* thread_scratch_floats(ScratchSlot slot, size_t n) {
  return static_cast<float*>(thread_scratch(slot, n * sizeof(float)));
}

}  // namespace cpu
}  // namespace softmax_internal
