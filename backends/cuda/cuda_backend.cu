// The CUDA backend's table entry: availability, pointer classification, and the two operations,
// each run on the device that owns the pointers (the caller's current device is restored).
// Nothing here synchronises with the host; every runtime error is cleared before returning so
// that it never reaches the next, unrelated user of the CUDA runtime.
#include <cuda_runtime.h>

#include <mutex>
#include <string>

#include "backends/backend.h"
#include "backends/common/philox.h"
#include "backends/cuda/cuda_outcome.h"
#include "backends/cuda/device_limits.h"
#include "backends/cuda/softmax_launcher.h"

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

// The owning device of x, y and the mask; device pointers on two different GPUs are refused.
Outcome owning_device(const void* x, const void* y, const void* mask, int* device) {
  const char* names[3] = {"x", "y", "keep_mask"};
  const void* ptrs[3] = {x, y, mask};
  int found = -1;
  const char* found_name = nullptr;
  for (int i = 0; i < 3; ++i) {
    if (ptrs[i] == nullptr) continue;
    int d = -1;
    if (Outcome o = pointer_device(ptrs[i], &d); !o.good()) return o;
    if (d < 0) continue;
    if (found >= 0 && d != found) {
      return Outcome::fail(SOFTMAX_STATUS_WRONG_MEMORY_SPACE,
                           std::string(found_name) + " is on CUDA device " + std::to_string(found) +
                               " but " + names[i] + " is on CUDA device " + std::to_string(d) +
                               "; all buffers of one call must be on the same device");
    }
    found = d;
    found_name = names[i];
  }
  *device = found;
  return Outcome::ok();
}

Outcome run(const RowsProblem& p, const DropoutParams* d, const ExecContext& c) {
  int device = -1;
  if (Outcome o = owning_device(p.x, p.y, d ? d->keep_mask : nullptr, &device); !o.good()) return o;
  DeviceScope scope;
  if (Outcome o = scope.enter(device); !o.good()) return o;
  SOFTMAX_CUDA_TRY(cudaGetDevice(&device));
  const DeviceLimits* limits = nullptr;
  if (Outcome o = device_limits(device, &limits); !o.good()) return o;

  LaunchArgs a{};
  a.x = p.x;
  a.y = p.y;
  a.rows = p.rows;
  a.cols = p.cols;
  a.dtype = p.dtype.x;
  a.stream = static_cast<cudaStream_t>(c.stream);
  a.device = device;
  a.limits = limits;
  a.ep.log_softmax = p.log_softmax;

  const size_t n = static_cast<size_t>(p.rows) * static_cast<size_t>(p.cols);
  if (d == nullptr || d->p == 0.0f) {
    // p == 0 keeps everything: exactly softmax_rows (bit for bit), no random numbers drawn.
    if (Outcome o = launch_softmax(a); !o.good()) return o;
    if (d != nullptr && d->keep_mask != nullptr)
      SOFTMAX_CUDA_TRY(cudaMemsetAsync(d->keep_mask, 1, n, a.stream));
    return Outcome::ok();
  }
  if (d->p >= 1.0f) {
    // p == 1 drops everything (u lies in (0, 1], never > 1): zeros, whatever x holds.
    const size_t elem = p.dtype.x == SOFTMAX_DTYPE_F32 ? 4 : 2;
    SOFTMAX_CUDA_TRY(cudaMemsetAsync(p.y, 0, n * elem, a.stream));
    if (d->keep_mask != nullptr) SOFTMAX_CUDA_TRY(cudaMemsetAsync(d->keep_mask, 0, n, a.stream));
    return Outcome::ok();
  }
  a.dropout = true;
  a.ep.p = d->p;
  a.ep.keep_scale = dropout_scale(d->p);
  a.ep.seed = d->seed;
  a.ep.offset = d->offset;
  a.ep.keep_mask = d->keep_mask;
  return launch_softmax(a);
}

// TEMPORARY (replaced by the new kernels before this lands).
template <class... Args>
Outcome not_yet(const Args&...) {
  return Outcome::fail(SOFTMAX_STATUS_INTERNAL_ERROR, "not implemented yet on the CUDA backend");
}
bool same_16_32(Dtypes t) { return t.x == t.y && t.x != SOFTMAX_DTYPE_F64; }

Outcome cuda_rows(const RowsProblem& p, const ExecContext& c) {
  return same_16_32(p.dtype) ? run(p, nullptr, c) : not_yet(p);
}

Outcome cuda_dropout(const RowsProblem& p, const DropoutParams& d, const ExecContext& c) {
  return same_16_32(p.dtype) ? run(p, &d, c) : not_yet(p);
}

}  // namespace

const Backend& cuda_backend() {
  static const Backend backend{"CUDA",
                               cuda_available,
                               cuda_rows,
                               cuda_dropout,
                               not_yet<RowsBackwardProblem, ExecContext>,
                               not_yet<DropoutBackwardProblem, DropoutParams, ExecContext>,
                               not_yet<RowStatsProblem, ExecContext>,
                               not_yet<RowsFromStatsProblem, ExecContext>,
                               not_yet<BackwardRowStatsProblem, ExecContext>,
                               not_yet<RowsBackwardFromStatsProblem, ExecContext>};
  return backend;
}

MemorySpace cuda_memory_space(const void* p) {
  if (!availability().ok) return MemorySpace::Host;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    (void)cudaGetLastError();  // e.g. older drivers reject unregistered host pointers
    return MemorySpace::Host;
  }
  switch (attr.type) {
    case cudaMemoryTypeDevice: return MemorySpace::Device;
    case cudaMemoryTypeManaged: return MemorySpace::Managed;
    case cudaMemoryTypeHost: return MemorySpace::Pinned;
    case cudaMemoryTypeUnregistered: return MemorySpace::Host;
  }
  return MemorySpace::Host;
}

}  // namespace softmax_internal
