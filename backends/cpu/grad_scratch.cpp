// SPDX-License-Identifier: Apache-2.0
// Per-thread work buffers of the backward and sharded-row drivers: see grad_scratch.h.
#include "backends/cpu/grad_scratch.h"

#include <cstdlib>
#include <new>

namespace softmax_internal {
namespace cpu {

namespace {

struct GradBuffer {
  void* data = nullptr;
  size_t bytes = 0;
  ~GradBuffer() { std::free(data); }
};

thread_local GradBuffer t_grad_slots[static_cast<int>(GradSlot::Count)];

}  // namespace

void* grad_scratch(GradSlot slot, size_t bytes) {
  GradBuffer& b = t_grad_slots[static_cast<int>(slot)];
  if (b.bytes < bytes || b.data == nullptr) {
    std::free(b.data);
    b.data = nullptr;
    b.bytes = 0;
    const size_t rounded = (bytes + 63) & ~size_t{63};  // aligned_alloc wants a multiple of 64
    void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (p == nullptr) throw std::bad_alloc();
    b.data = p;
    b.bytes = rounded;
  }
  return b.data;
}

}  // namespace cpu
}  // namespace softmax_internal
