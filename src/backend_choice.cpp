// SPDX-License-Identifier: Apache-2.0
#include "backend_choice.h"

#include <string>

namespace softmax_internal {
namespace {

const char* space_name(MemorySpace s) {
  switch (s) {
    case MemorySpace::Host: return "host memory";
    case MemorySpace::Pinned: return "pinned host memory";
    case MemorySpace::Device: return "CUDA device memory";
    case MemorySpace::Managed: return "CUDA managed memory";
  }
  return "unknown memory";
}

bool cpu_reachable(MemorySpace s) { return s != MemorySpace::Device; }
bool cuda_reachable(MemorySpace s) { return s != MemorySpace::Host; }

Outcome require_available(const Backend& b) {
  std::string why;
  if (!b.available(&why)) {
    return Outcome::fail(SOFTMAX_STATUS_BACKEND_UNAVAILABLE,
                         std::string("the ") + b.name + " backend is unavailable: " + why);
  }
  return Outcome::ok();
}

}  // namespace

Outcome choose_backend(softmax_backend requested, void* stream, std::initializer_list<NamedPointer> pointers,
                       const Backend** chosen) {
  // With no usable CUDA driver every pointer classifies as Host, so AUTO falls back to the CPU.
  struct Classified {
    const char* name;
    MemorySpace space;
  };
  Classified ptrs[8];
  int n = 0;
  for (const NamedPointer& p : pointers) {
    if (p.ptr != nullptr && n < 8) ptrs[n++] = {p.name, cuda_memory_space(p.ptr, stream)};
  }

  if (requested == SOFTMAX_BACKEND_AUTO) {
    bool any_device = false;
    for (int i = 0; i < n; ++i) any_device |= ptrs[i].space == MemorySpace::Device;
    requested = any_device ? SOFTMAX_BACKEND_CUDA : SOFTMAX_BACKEND_CPU;
  }
  const bool cuda = requested == SOFTMAX_BACKEND_CUDA;
  const Backend& backend = cuda ? cuda_backend() : cpu_backend();
  if (Outcome o = require_available(backend); !o.good()) return o;

  for (int i = 0; i < n; ++i) {
    const bool ok = cuda ? cuda_reachable(ptrs[i].space) : cpu_reachable(ptrs[i].space);
    if (!ok) {
      return Outcome::fail(SOFTMAX_STATUS_WRONG_MEMORY_SPACE,
                           std::string(ptrs[i].name) + " points to " + space_name(ptrs[i].space) +
                               ", which the " + backend.name + " backend cannot access" +
                               (cuda ? " (pass a cudaMalloc'd, managed or pinned buffer)"
                                     : " (copy it to the host or use SOFTMAX_BACKEND_CUDA)"));
    }
  }
  *chosen = &backend;
  return Outcome::ok();
}

}  // namespace softmax_internal
