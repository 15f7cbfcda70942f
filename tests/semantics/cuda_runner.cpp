// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's runner: device buffers from cudaMalloc (x and y one element off alignment
// when asked), poisoned with 0xFF (NaN in every type), the call on the default stream, then a
// synchronisation and copies back. Built only when the CUDA backend is.
#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "backend_runner.h"
#include "backends/cuda/launch_plan.h"

namespace softmax_semantics {

namespace {

// Whether SOFTMAX_CUDA_STRATEGY forces a strategy that cannot hold this call's rows (which the
// library must then refuse by name): the strategy's capacity from launch_plan.h, in chunks of
// x's layout (16-bit x with f32 y is held in chunks of four columns, like f32 rows); 16-bit
// dropout holds half the chunks per thread, and softmax_rows' wide block 16-bit rows packed.
bool forced_refusal_expected(const Call& c) {
  const char* v = std::getenv("SOFTMAX_CUDA_STRATEGY");
  if (v == nullptr || *v == '\0') return false;
  if (c.dropout && c.drop.p >= 1.0f) return false;  // zeros (and a zero mask) without a kernel
  using softmax_internal::Strategy;
  for (Strategy s : {Strategy::Segment, Strategy::Block, Strategy::Cluster, Strategy::Split}) {
    if (std::string(v) != softmax_internal::strategy_name(s)) continue;
    const bool generic = c.x->dtype == SOFTMAX_DTYPE_F64 || c.y_dtype == SOFTMAX_DTYPE_F64;
    const bool narrow = softmax_test::element_size(c.x->dtype) == 2 && c.y_dtype == SOFTMAX_DTYPE_F32;
    const int es = generic ? 8 : narrow ? 4 : int(softmax_test::element_size(c.x->dtype));
    const int chunk_elems = 16 / es;
    const bool dropout_kernels = c.dropout && c.drop.p > 0.0f;  // p = 0 runs softmax_rows'
    const int arrays = dropout_kernels && es == 2 ? 2 : 1;
    const int64_t chunks = (c.cols + chunk_elems - 1) / chunk_elems;
    return chunks > softmax_internal::strategy_capacity_chunks(s, chunk_elems, arrays, !dropout_kernels);
  }
  return false;
}

// cudaMalloc'd bytes, freed on scope exit; null when the allocation failed.
class DeviceBytes {
 public:
  explicit DeviceBytes(size_t bytes) {
    if (cudaMalloc(&p_, bytes == 0 ? 1 : bytes) != cudaSuccess) {
      (void)cudaGetLastError();
      p_ = nullptr;
    }
  }
  ~DeviceBytes() {
    if (p_ != nullptr) cudaFree(p_);
  }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  unsigned char* get() const { return static_cast<unsigned char*>(p_); }

 private:
  void* p_ = nullptr;
};

std::string cuda_failure(const char* what, cudaError_t e) {
  return std::string(what) + ": " + cudaGetErrorString(e);
}

class CudaRunner final : public Runner {
 public:
  const char* name() const override { return "cuda"; }

  std::string unavailable() const override {
    static const std::string reason = [] {
      int count = 0;
      const cudaError_t e = cudaGetDeviceCount(&count);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return std::string("no CUDA device: ") + cudaGetErrorString(e);
      }
      if (count == 0) return std::string("no CUDA device: cudaGetDeviceCount returned 0");
      return std::string();
    }();
    return reason;
  }

  Result run(const Call& c) const override {
    const Buffer& x = *c.x;
    const size_t n = size_t(c.rows) * size_t(c.cols);
    const size_t xs = softmax_test::element_size(x.dtype), ys = softmax_test::element_size(c.y_dtype);
    Result r;
    DeviceBytes xd((n + c.x_offset) * xs), yd((n + c.y_offset) * ys), md(n);
    if (xd.get() == nullptr || yd.get() == nullptr || md.get() == nullptr) {
      r.message = "cudaMalloc failed";
      return r;
    }
    unsigned char* xp = xd.get() + c.x_offset * xs;
    unsigned char* yp = c.in_place ? xp : yd.get() + c.y_offset * ys;
    cudaError_t e = cudaMemcpy(xp, x.data(), n * xs, cudaMemcpyHostToDevice);
    if (e == cudaSuccess && !c.in_place) e = cudaMemset(yd.get(), 0xFF, (n + c.y_offset) * ys);
    if (e == cudaSuccess) e = cudaMemset(md.get(), 0xAB, n);
    if (e != cudaSuccess) {
      r.message = cuda_failure("preparing device buffers", e);
      return r;
    }
    const bool with_mask = c.dropout && c.drop.want_mask;
    const softmax_options o = call_options(c, SOFTMAX_BACKEND_CUDA);
    r.status = c.dropout ? softmax_dropout(xp, yp, with_mask ? md.get() : nullptr, c.rows, c.cols, x.dtype,
                                           c.drop.p, c.drop.seed, c.drop.offset, &o)
                         : softmax_rows(xp, yp, c.rows, c.cols, x.dtype, &o);
    if (r.status != SOFTMAX_STATUS_SUCCESS) {
      r.message = softmax_last_error();
      if (forced_refusal_expected(c) && r.status == SOFTMAX_STATUS_INTERNAL_ERROR &&
          r.message.find("SOFTMAX_CUDA_STRATEGY") != std::string::npos) {
        r.refused_by_forced_strategy = true;
      }
      return r;
    }
    if (forced_refusal_expected(c)) {
      r.status = SOFTMAX_STATUS_INTERNAL_ERROR;
      r.message = "the forced strategy ran a row it cannot hold instead of refusing it";
      return r;
    }
    r.y = Buffer(c.y_dtype, n);
    r.mask.assign(with_mask ? n : 0, 0);
    e = cudaDeviceSynchronize();
    if (e == cudaSuccess) e = cudaMemcpy(r.y.data(), yp, n * ys, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess && with_mask) e = cudaMemcpy(r.mask.data(), md.get(), n, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) {
      r.status = SOFTMAX_STATUS_CUDA_ERROR;
      r.message = cuda_failure("after the call", e);
    }
    return r;
  }
};

}  // namespace

const Runner& cuda_runner() {
  static const CudaRunner runner;
  return runner;
}

}  // namespace softmax_semantics
