// The CUDA backend's entry points in a build configured with SOFTMAX_WITH_CUDA=OFF: the backend
// exists in the table but always reports why it cannot run, and every pointer is host memory.
#include "backends/backend.h"

namespace softmax_internal {
namespace {

bool not_built(std::string* why) {
  *why = "libsoftmax was built without CUDA support (SOFTMAX_WITH_CUDA=OFF)";
  return false;
}

Outcome unavailable_rows(const RowsProblem&, const ExecContext&) {
  return Outcome::fail(SOFTMAX_STATUS_BACKEND_UNAVAILABLE,
                       "libsoftmax was built without CUDA support");
}

Outcome unavailable_dropout(const RowsProblem&, const DropoutParams&, const ExecContext&) {
  return Outcome::fail(SOFTMAX_STATUS_BACKEND_UNAVAILABLE,
                       "libsoftmax was built without CUDA support");
}

}  // namespace

const Backend& cuda_backend() {
  static const Backend backend{"CUDA", not_built, unavailable_rows, unavailable_dropout};
  return backend;
}

MemorySpace cuda_memory_space(const void*) { return MemorySpace::Host; }

}  // namespace softmax_internal
