// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's entry points in a build configured with SOFTMAX_WITH_CUDA=OFF: the backend
// exists in the table but always reports why it cannot run, and every pointer is host memory.
#include "backends/backend.h"

namespace softmax_internal {
namespace {

bool not_built(std::string* why) {
  *why = "libsoftmax was built without CUDA support (SOFTMAX_WITH_CUDA=OFF)";
  return false;
}

// One refusal for every operation of the table, whatever its arguments.
template <class... Args>
Outcome unavailable(const Args&...) {
  return Outcome::fail(SOFTMAX_STATUS_BACKEND_UNAVAILABLE,
                       "libsoftmax was built without CUDA support");
}

}  // namespace

const Backend& cuda_backend() {
  static const Backend backend{"CUDA",
                               not_built,
                               unavailable<RowsProblem, ExecContext>,
                               unavailable<RowsProblem, DropoutParams, ExecContext>,
                               unavailable<RowsBackwardProblem, ExecContext>,
                               unavailable<DropoutBackwardProblem, DropoutParams, ExecContext>,
                               unavailable<RowStatsProblem, ExecContext>,
                               unavailable<RowsFromStatsProblem, ExecContext>,
                               unavailable<BackwardRowStatsProblem, ExecContext>,
                               unavailable<RowsBackwardFromStatsProblem, ExecContext>};
  return backend;
}

MemorySpace cuda_memory_space(const void*, void*) { return MemorySpace::Host; }

}  // namespace softmax_internal
