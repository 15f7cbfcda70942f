// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's table entry: availability, pointer classification, and the two operations,
// each run on the device that owns the pointers (the caller's current device is restored).
// Nothing here synchronises with the host; every runtime error is cleared before returning so
// that it never reaches the next, unrelated user of the CUDA runtime.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "backends/common/philox.h"
#include "backends/cuda/cuda_outcome.h"
#include "backends/cuda/device_limits.h"
#include "backends/cuda/launch_ops.h"

namespace softmax_internal {
namespace {

struct Availability {
  bool ok = false;
  std::string why;
};

// Asked once per process: a machine does not grow a GPU while running, and the answer is
// needed on every call (AUTO classifies every pointer through it).
const Availability& availability() {
  static std::once_flag once;
  static Availability a;
  std::call_once(once, [] {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      a.why = std::string("no usable CUDA device: cudaGetDeviceCount failed: ") +
              cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
    } else if (count == 0) {
      a.why = "no CUDA device found";
    } else {
      a.ok = true;
    }
  });
  return a;
}

bool cuda_available(std::string* why) {
  const Availability& a = availability();
  if (!a.ok && why != nullptr) *why = a.why;
  return a.ok;
}

// The device a pointer's memory lives on, or -1 when it is reachable from any device
// (pinned or managed memory).
Outcome pointer_device(const void* p, int* device) {
  cudaPointerAttributes attr{};
  const cudaError_t err = cudaPointerGetAttributes(&attr, p);
  if (err != cudaSuccess) return cuda_failure("cudaPointerGetAttributes", err);
  *device = attr.type == cudaMemoryTypeDevice ? attr.device : -1;
  return Outcome::ok();
}

// Makes `device` current for the scope of a call and puts the caller's device back after.
class DeviceScope {
 public:
  Outcome enter(int device) {
    SOFTMAX_CUDA_TRY(cudaGetDevice(&saved_));
    if (device >= 0 && device != saved_) {
      SOFTMAX_CUDA_TRY(cudaSetDevice(device));
      switched_ = true;
    }
    return Outcome::ok();
  }
  ~DeviceScope() {
    if (switched_ && cudaSetDevice(saved_) != cudaSuccess) (void)cudaGetLastError();
  }

 private:
  int saved_ = 0;
  bool switched_ = false;
};

// The device that owns the call's device pointers; buffers on two different GPUs are refused.
Outcome owning_device(std::initializer_list<std::pair<const char*, const void*>> ptrs, int* device) {
  int found = -1;
  const char* found_name = nullptr;
  for (const auto& [name, ptr] : ptrs) {
    if (ptr == nullptr) continue;
    int d = -1;
    if (Outcome o = pointer_device(ptr, &d); !o.good()) return o;
    if (d < 0) continue;
    if (found >= 0 && d != found) {
      return Outcome::fail(SOFTMAX_STATUS_WRONG_MEMORY_SPACE,
                           std::string(found_name) + " is on CUDA device " + std::to_string(found) + " but " + name +
                               " is on CUDA device " + std::to_string(d) +
                               "; all buffers of one call must be on the same device");
    }
    found = d;
    found_name = name;
  }
  *device = found;
  return Outcome::ok();
}

// Runs `body(env)` on the device that owns the pointers, with the caller's device restored after.
template <class Body>
Outcome on_device(std::initializer_list<std::pair<const char*, const void*>> ptrs, const ExecContext& c, Body&& body) {
  int device = -1;
  if (Outcome o = owning_device(ptrs, &device); !o.good()) return o;
  DeviceScope scope;
  if (Outcome o = scope.enter(device); !o.good()) return o;
  SOFTMAX_CUDA_TRY(cudaGetDevice(&device));
  const DeviceLimits* limits = nullptr;
  if (Outcome o = device_limits(device, &limits); !o.good()) return o;
  return body(LaunchEnv{static_cast<cudaStream_t>(c.stream), device, limits});
}

size_t dtype_size(softmax_dtype t) { return static_cast<size_t>(cuda_kernels::dtype_bytes(t)); }

const char* end_of(const void* p, int64_t rows, int64_t cols, softmax_dtype t) {
  return static_cast<const char*>(p) + static_cast<size_t>(rows) * static_cast<size_t>(cols) * dtype_size(t);
}

cuda_kernels::DropoutKeys dropout_keys(const DropoutParams& d) {
  cuda_kernels::DropoutKeys k;
  cuda_kernels::set_round_keys(&k, d.seed);
  k.offset = d.offset;
  // 0 < p < 1 here: some word is always kept (u(2^32 - 1) = 1 > p), so the threshold fits.
  k.threshold = static_cast<uint32_t>(dropout_keep_threshold(d.p));
  k.scale = dropout_scale(d.p);
  k.scale64 = 1.0 / (1.0 - static_cast<double>(d.p));
  return k;
}

cuda_kernels::ForwardArgs forward_args(const RowsProblem& p) {
  cuda_kernels::ForwardArgs a{};
  a.x = p.x;
  a.x_dtype = p.dtype.x;
  a.x_end = end_of(p.x, p.rows, p.cols, p.dtype.x);
  a.y = p.y;
  a.y_dtype = p.dtype.y;
  a.log_softmax = p.log_softmax;
  a.rows = p.rows;
  a.cols = p.cols;
  return a;
}

Outcome cuda_rows(const RowsProblem& p, const ExecContext& c) {
  return on_device({{"x", p.x}, {"y", p.y}}, c, [&](const LaunchEnv& env) {
    return launch_forward(forward_args(p), cuda_kernels::Forward::Softmax, env);
  });
}

Outcome cuda_dropout(const RowsProblem& p, const DropoutParams& d, const ExecContext& c) {
  return on_device({{"x", p.x}, {"y", p.y}, {"keep_mask", d.keep_mask}}, c, [&](const LaunchEnv& env) -> Outcome {
    const size_t n = static_cast<size_t>(p.rows) * static_cast<size_t>(p.cols);
    cuda_kernels::ForwardArgs a = forward_args(p);
    if (d.p == 0.0f) {
      // p == 0 keeps everything: exactly softmax_rows (bit for bit), no random numbers drawn.
      if (Outcome o = launch_forward(a, cuda_kernels::Forward::Softmax, env); !o.good()) return o;
      if (d.keep_mask != nullptr) SOFTMAX_CUDA_TRY(cudaMemsetAsync(d.keep_mask, 1, n, env.stream));
      return Outcome::ok();
    }
    if (d.p >= 1.0f) {
      // p == 1 drops everything (u lies in (0, 1], never > 1): zeros (all-zero bits: +0 in
      // every storage type), whatever x holds.
      SOFTMAX_CUDA_TRY(cudaMemsetAsync(p.y, 0, n * dtype_size(p.dtype.y), env.stream));
      if (d.keep_mask != nullptr) SOFTMAX_CUDA_TRY(cudaMemsetAsync(d.keep_mask, 0, n, env.stream));
      return Outcome::ok();
    }
    a.mask = d.keep_mask;
    a.keys = dropout_keys(d);
    return launch_forward(a, cuda_kernels::Forward::Dropout, env);
  });
}

cuda_kernels::BackwardArgs backward_args(const void* y, const void* dy, void* dx, int64_t rows, int64_t cols,
                                         Dtypes t, bool log_softmax) {
  cuda_kernels::BackwardArgs a{};
  a.y_dtype = t.y;
  a.y = y;
  a.dy = dy;
  a.y_end = end_of(y, rows, cols, t.y);
  a.dy_end = end_of(dy, rows, cols, t.y);
  a.dx = dx;
  a.dx_dtype = t.x;
  a.log_softmax = log_softmax;
  a.rows = rows;
  a.cols = cols;
  return a;
}

Outcome cuda_rows_backward(const RowsBackwardProblem& p, const ExecContext& c) {
  return on_device({{"y", p.y}, {"dy", p.dy}, {"dx", p.dx}}, c, [&](const LaunchEnv& env) {
    return launch_backward(backward_args(p.y, p.dy, p.dx, p.rows, p.cols, p.dtype, p.log_softmax),
                           cuda_kernels::Backward::Full, env);
  });
}

Outcome cuda_dropout_backward(const DropoutBackwardProblem& p, const DropoutParams& d, const ExecContext& c) {
  return on_device({{"x", p.x}, {"dy", p.dy}, {"dx", p.dx}}, c, [&](const LaunchEnv& env) -> Outcome {
    if (d.p >= 1.0f) {
      // Every element dropped: the output never depended on x.
      const size_t n = static_cast<size_t>(p.rows) * static_cast<size_t>(p.cols);
      SOFTMAX_CUDA_TRY(cudaMemsetAsync(p.dx, 0, n * dtype_size(p.dtype.x), env.stream));
      return Outcome::ok();
    }
    cuda_kernels::DropoutBackwardArgs a{};
    a.x_dtype = p.dtype.x;
    a.x = p.x;
    a.dy = p.dy;
    a.x_end = end_of(p.x, p.rows, p.cols, p.dtype.x);
    a.dy_end = end_of(p.dy, p.rows, p.cols, p.dtype.y);
    a.dy_dtype = p.dtype.y;
    a.dx = p.dx;
    a.drop = d.p > 0.0f;
    if (a.drop) a.keys = dropout_keys(d);
    a.rows = p.rows;
    a.cols = p.cols;
    return launch_dropout_backward(a, env);
  });
}

Outcome cuda_row_stats(const RowStatsProblem& p, const ExecContext& c) {
  return on_device({{"x", p.x}, {"row_max", p.row_max}, {"row_sumexp", p.row_sumexp}}, c, [&](const LaunchEnv& env) {
    cuda_kernels::ForwardArgs a = forward_args(RowsProblem{p.x, nullptr, p.rows, p.cols, p.dtype, false});
    a.y_dtype = p.dtype.x;
    a.row_max = p.row_max;
    a.row_sumexp = p.row_sumexp;
    return launch_forward(a, cuda_kernels::Forward::Stats, env);
  });
}

Outcome cuda_rows_from_stats(const RowsFromStatsProblem& p, const ExecContext& c) {
  return on_device({{"x", p.x}, {"y", p.y}, {"row_max", p.row_max}, {"row_sumexp", p.row_sumexp}}, c,
                   [&](const LaunchEnv& env) {
                     cuda_kernels::ForwardArgs a =
                         forward_args(RowsProblem{p.x, p.y, p.rows, p.cols, p.dtype, p.log_softmax});
                     a.row_max = const_cast<float*>(p.row_max);  // read only by FromStats
                     a.row_sumexp = const_cast<float*>(p.row_sumexp);
                     return launch_forward(a, cuda_kernels::Forward::FromStats, env);
                   });
}

Outcome cuda_backward_row_stats(const BackwardRowStatsProblem& p, const ExecContext& c) {
  return on_device({{"y", p.y}, {"dy", p.dy}, {"row_dot", p.row_dot}}, c, [&](const LaunchEnv& env) {
    cuda_kernels::BackwardArgs a = backward_args(p.y, p.dy, nullptr, p.rows, p.cols, p.dtype, p.log_softmax);
    a.row_dot = p.row_dot;
    return launch_backward(a, cuda_kernels::Backward::Stats, env);
  });
}

Outcome cuda_rows_backward_from_stats(const RowsBackwardFromStatsProblem& p, const ExecContext& c) {
  return on_device({{"y", p.y}, {"dy", p.dy}, {"dx", p.dx}, {"row_dot", p.row_dot}}, c, [&](const LaunchEnv& env) {
    cuda_kernels::BackwardArgs a = backward_args(p.y, p.dy, p.dx, p.rows, p.cols, p.dtype, p.log_softmax);
    a.row_dot_in = p.row_dot;
    return launch_backward(a, cuda_kernels::Backward::FromStats, env);
  });
}

// Whether p comes from a stream-ordered allocation (cudaMallocAsync or a memory pool).
// cudaPointerGetAttributes calls such memory unregistered until the stream has reached the
// allocation, so a caller that allocates on its stream and calls at once (or captures both into
// a graph) would be refused; the driver's pool handle says where it lives. cuPointerGetAttributes
// (plural) answers plain host memory with a null handle, where the singular form fails the call,
// which compute-sanitizer reports as an API error on every call with host pointers. The driver
// entry point is looked up through the runtime, so libsoftmax still needs no libcuda at load time.
bool from_memory_pool(const void* p) {
  using GetAttributes = CUresult (*)(unsigned, CUpointer_attribute*, void**, CUdeviceptr);
  static const GetAttributes get = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuPointerGetAttributes", &fn, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return GetAttributes{nullptr};
    }
    return reinterpret_cast<GetAttributes>(fn);
  }();
  if (get == nullptr) return false;
  CUpointer_attribute what = CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE;
  void* pool = nullptr;
  void* data[1] = {&pool};
  return get(1, &what, data, reinterpret_cast<CUdeviceptr>(p)) == CUDA_SUCCESS && pool != nullptr;
}

// Whether p lies in memory that the graph being captured on `stream` allocates (cudaMallocAsync
// during capture adds an allocation node; the memory exists only once the graph runs, so neither
// cudaPointerGetAttributes nor the pool handle knows it yet). The capture graph's allocation
// nodes say exactly which ranges they reserve.
bool allocated_by_capture(const void* p, cudaStream_t stream) {
  // The legacy default stream is never captured, and querying it while another stream captures
  // could end that capture.
  if (stream == nullptr) return false;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t graph = nullptr;
  if (cudaStreamGetCaptureInfo(stream, &status, nullptr, &graph) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  if (status != cudaStreamCaptureStatusActive || graph == nullptr) return false;
  size_t count = 0;
  if (cudaGraphGetNodes(graph, nullptr, &count) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  std::vector<cudaGraphNode_t> nodes(count);
  if (count == 0 || cudaGraphGetNodes(graph, nodes.data(), &count) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  const auto addr = reinterpret_cast<uintptr_t>(p);
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    if (cudaGraphNodeGetType(node, &type) != cudaSuccess || type != cudaGraphNodeTypeMemAlloc) continue;
    cudaMemAllocNodeParams params{};
    if (cudaGraphMemAllocNodeGetParams(node, &params) != cudaSuccess) continue;
    const auto first = reinterpret_cast<uintptr_t>(params.dptr);
    if (addr >= first && addr - first < params.bytesize) return true;
  }
  (void)cudaGetLastError();
  return false;
}

}  // namespace

const Backend& cuda_backend() {
  static const Backend backend{"CUDA",
                               cuda_available,
                               cuda_rows,
                               cuda_dropout,
                               cuda_rows_backward,
                               cuda_dropout_backward,
                               cuda_row_stats,
                               cuda_rows_from_stats,
                               cuda_backward_row_stats,
                               cuda_rows_backward_from_stats};
  return backend;
}

MemorySpace cuda_memory_space(const void* p, void* stream) {
  if (!availability().ok) return MemorySpace::Host;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    (void)cudaGetLastError();  // e.g. older drivers reject unregistered host pointers
    return MemorySpace::Host;
  }
  if (attr.type == cudaMemoryTypeUnregistered &&
      (from_memory_pool(p) || allocated_by_capture(p, static_cast<cudaStream_t>(stream))))
    return MemorySpace::Device;
  switch (attr.type) {
    case cudaMemoryTypeDevice: return MemorySpace::Device;
    case cudaMemoryTypeManaged: return MemorySpace::Managed;
    case cudaMemoryTypeHost: return MemorySpace::Pinned;
    case cudaMemoryTypeUnregistered: return MemorySpace::Host;
  }
  return MemorySpace::Host;
}

}  // namespace softmax_internal
