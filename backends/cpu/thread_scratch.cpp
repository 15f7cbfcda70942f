// SPDX-License-Identifier: Apache-2.0
// Per-thread work buffers: see thread_scratch.h.
#include "backends/cpu/thread_scratch.h"

#include <cstdlib>
#include <new>

namespace softmax_internal {
namespace cpu {

ScratchBuffer::~ScratchBuffer() { std::free(data_); }

void* ScratchBuffer::reserve(size_t bytes) {
  if (bytes_ < bytes || data_ == nullptr) {
    std::free(data_);
    data_ = nullptr;
    bytes_ = 0;
    // Round up to whole cache lines (aligned_alloc wants a multiple of the alignment) and leave
    // a vector's worth of slack.
    const size_t rounded = (bytes + 64 + 63) & ~size_t{63};
    void* p = std::aligned_alloc(64, rounded);
    if (p == nullptr) throw std::bad_alloc();
    data_ = p;
    bytes_ = rounded - 64;
  }
  return data_;
}

namespace {

thread_local ScratchBuffer t_slots[static_cast<int>(ScratchSlot::Count)];

}  // namespace

void* thread_scratch(ScratchSlot slot, size_t bytes) { return t_slots[static_cast<int>(slot)].reserve(bytes); }

}  // namespace cpu
}  // namespace softmax_internal
