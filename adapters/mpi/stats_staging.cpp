// SPDX-License-Identifier: Apache-2.0
#include "adapters/mpi/stats_staging.h"

#include <string>

#if defined(SOFTMAX_ADAPTER_WITH_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace softmax_adapter {

#if defined(SOFTMAX_ADAPTER_WITH_CUDA)
namespace {

Outcome cuda_step(const char* step, cudaError_t e) {
  if (e == cudaSuccess) return Outcome::ok();
  cudaGetLastError();  // do not leave the error for an unrelated later check to find
  return Outcome::fail(e == cudaErrorMemoryAllocation ? SOFTMAX_STATUS_OUT_OF_MEMORY : SOFTMAX_STATUS_CUDA_ERROR,
                       std::string(step) + ": " + cudaGetErrorString(e));
}

bool in_device_memory(const void* p) {
  if (p == nullptr) return false;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();  // no driver or no device: every pointer is host memory
    return false;
  }
  return a.type == cudaMemoryTypeDevice;
}

}  // namespace

bool runs_on_cuda_backend(const softmax_options* options, std::initializer_list<const void*> pointers) {
  // Mirrors libsoftmax's choice (src/backend_choice.cpp): AUTO means CUDA when any array is
  // device memory. An unavailable CUDA backend keeps the statistics on the host; libsoftmax then
  // reports BACKEND_UNAVAILABLE or WRONG_MEMORY_SPACE itself.
  if (!softmax_backend_available(SOFTMAX_BACKEND_CUDA)) return false;
  const softmax_backend b = requested_backend(options);
  if (b == SOFTMAX_BACKEND_CUDA) return true;
  if (b != SOFTMAX_BACKEND_AUTO) return false;
  for (const void* p : pointers) {
    if (in_device_memory(p)) return true;
  }
  return false;
}

StatsStaging::~StatsStaging() {
  if (device_ != nullptr) cudaFreeAsync(device_, static_cast<cudaStream_t>(stream_));
}

Outcome StatsStaging::open(bool on_device, void* stream, size_t n, size_t host_prefix) {
  on_device_ = on_device;
  stream_ = stream;
  n_ = n;
  prefix_ = host_prefix;
  host_.assign(host_prefix + n, 0.0f);
  if (!on_device || n == 0) return Outcome::ok();
  void* p = nullptr;
  if (Outcome o = cuda_step("cudaMallocAsync (row statistics)",
                            cudaMallocAsync(&p, n * sizeof(float), static_cast<cudaStream_t>(stream)));
      !o.good())
    return o;
  device_ = static_cast<float*>(p);
  return Outcome::ok();
}

Outcome StatsStaging::download() {
  if (!on_device_ || n_ == 0) return Outcome::ok();
  const auto s = static_cast<cudaStream_t>(stream_);
  if (Outcome o = cuda_step("cudaMemcpyAsync (row statistics to the host)",
                            cudaMemcpyAsync(host(), device_, n_ * sizeof(float), cudaMemcpyDeviceToHost, s));
      !o.good())
    return o;
  return cuda_step("cudaStreamSynchronize (before the all-reduce)", cudaStreamSynchronize(s));
}

Outcome StatsStaging::upload() {
  if (!on_device_ || n_ == 0) return Outcome::ok();
  // From pageable memory the copy is staged before cudaMemcpyAsync returns, so host_ may be freed
  // while the copy is still queued.
  return cuda_step("cudaMemcpyAsync (merged row statistics to the device)",
                   cudaMemcpyAsync(device_, host(), n_ * sizeof(float), cudaMemcpyHostToDevice,
                                   static_cast<cudaStream_t>(stream_)));
}

#else  // no CUDA in this build: statistics are always host arrays

bool runs_on_cuda_backend(const softmax_options*, std::initializer_list<const void*>) { return false; }

StatsStaging::~StatsStaging() = default;

Outcome StatsStaging::open(bool /*on_device*/, void* stream, size_t n, size_t host_prefix) {
  stream_ = stream;
  n_ = n;
  prefix_ = host_prefix;
  host_.assign(host_prefix + n, 0.0f);
  return Outcome::ok();
}

Outcome StatsStaging::download() { return Outcome::ok(); }
Outcome StatsStaging::upload() { return Outcome::ok(); }

#endif

}  // namespace softmax_adapter
