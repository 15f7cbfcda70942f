// SPDX-License-Identifier: Apache-2.0
// The CPU entry of the backend table, and the choice of vector kernel implementation.
#include <cstdlib>
#include <cstring>
#include <string>

#include "backends/backend.h"
#include "backends/cpu/cpu_drivers.h"
#include "backends/cpu/vector_kernels.h"

namespace softmax_internal {

namespace cpu {

const VectorKernels& vector_kernels() {
  static const VectorKernels& chosen = []() -> const VectorKernels& {
#if defined(SOFTMAX_CPU_HAVE_HIGHWAY)
    const char* force = std::getenv("SOFTMAX_CPU_KERNELS");
    if (force != nullptr && std::strcmp(force, "portable") == 0) return portable_vector_kernels();
    return highway_vector_kernels();
#else
    return portable_vector_kernels();
#endif
  }();
  return chosen;
}

int stream_stores_override() {
  static const int value = [] {
    const char* v = std::getenv("SOFTMAX_CPU_STREAM_STORES");
    if (v == nullptr) return -1;
    if (std::strcmp(v, "0") == 0) return 0;
    if (std::strcmp(v, "1") == 0) return 1;
    return -1;
  }();
  return value;
}

namespace {

// The CPU can always run: OpenMP falls back to one thread if it cannot start more.
bool cpu_available(std::string* /*why*/) { return true; }

}  // namespace
}  // namespace cpu

const Backend& cpu_backend() {
  static const Backend backend{"cpu",
                               cpu::cpu_available,
                               cpu::softmax_rows,
                               cpu::softmax_dropout,
                               cpu::softmax_rows_backward,
                               cpu::softmax_dropout_backward,
                               cpu::softmax_row_stats,
                               cpu::softmax_rows_from_stats,
                               cpu::softmax_backward_row_stats,
                               cpu::softmax_rows_backward_from_stats};
  return backend;
}

}  // namespace softmax_internal
