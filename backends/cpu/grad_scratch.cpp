// SPDX-License-Identifier: Apache-2.0
// Per-thread work buffers of the backward and sharded-row drivers: see grad_scratch.h.
#include "backends/cpu/grad_scratch.h"

#include "backends/cpu/thread_scratch.h"

namespace softmax_internal {
namespace cpu {

namespace {

thread_local ScratchBuffer t_grad_slots[static_cast<int>(GradSlot::Count)];

}  // namespace

void* grad_scratch(GradSlot slot, size_t bytes) { return t_grad_slots[static_cast<int>(slot)].reserve(bytes); }

}  // namespace cpu
}  // namespace softmax_internal
