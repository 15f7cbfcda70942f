// SPDX-License-Identifier: Apache-2.0
// Per-thread work buffers: see thread_scratch.h.
#include "backends/cpu/thread_scratch.h"

#include <cstdlib>
#include <new>

namespace softmax_internal {
namespace cpu {

namespace {

struct AlignedBuffer {
  void* data = nullptr;
  size_t bytes = 0;
  ~AlignedBuffer() { std::free(data); }
};

thread_local AlignedBuffer t_slots[static_cast<int>(ScratchSlot::Count)];

}  // namespace

void* thread_scratch(ScratchSlot slot, size_t bytes) {
  AlignedBuffer& b = t_slots[static_cast<int>(slot)];
  if (b.bytes < bytes) {
    std::free(b.data);
    b.data = nullptr;
    b.bytes = 0;
    // Round up to whole cache lines (aligned_alloc wants a multiple of the alignment) and leave
    // a vector's worth of slack so kernels may read one full vector past a tail.
    const size_t rounded = (bytes + 64 + 63) & ~size_t{63};
    void* p = std::aligned_alloc(64, rounded);
    if (p == nullptr) throw std::bad_alloc();
    b.data = p;
    b.bytes = rounded - 64;
  }
  return b.data;
}

}  // namespace cpu
}  // namespace softmax_internal
