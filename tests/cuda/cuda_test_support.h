// Helpers for the CUDA suites: skipping without a GPU, device buffers that poison themselves,
// and checks of device results against the float64 reference of tests/common/reference.h.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <softmax/softmax.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "reference.h"

namespace softmax_cuda_test {

using namespace softmax_test;

// Empty when a CUDA device is usable; otherwise why not. Asked once (never at static
// initialisation, so test discovery works on machines without a driver).
inline const std::string& no_gpu_reason() {
  static const std::string reason = [] {
    int n = 0;
    const cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return std::string("no CUDA device: ") + cudaGetErrorString(err);
    }
    if (n == 0) return std::string("no CUDA device: cudaGetDeviceCount returned 0");
    return std::string();
  }();
  return reason;
}

#define REQUIRE_GPU()                                                     \
  do {                                                                    \
    if (!::softmax_cuda_test::no_gpu_reason().empty())                    \
      GTEST_SKIP() << ::softmax_cuda_test::no_gpu_reason();               \
  } while (0)

#define CUDA_OK(call)                                                                    \
  do {                                                                                   \
    const cudaError_t e_ = (call);                                                       \
    ASSERT_EQ(e_, cudaSuccess) << #call << ": " << cudaGetErrorString(e_);               \
  } while (0)

// cudaMalloc'd bytes, freed on scope exit.
struct DeviceBytes {
  void* p = nullptr;
  size_t bytes = 0;
  explicit DeviceBytes(size_t n) : bytes(n) {
    if (cudaMalloc(&p, n) != cudaSuccess) {
      (void)cudaGetLastError();
      p = nullptr;
    }
  }
  ~DeviceBytes() {
    if (p) cudaFree(p);
  }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  template <class T = unsigned char>
  T* at(size_t byte_offset = 0) const {
    return reinterpret_cast<T*>(static_cast<unsigned char*>(p) + byte_offset);
  }
};

// 0xFF bytes are NaN in f32, f16 and bf16: any element a kernel forgets to write fails.
inline cudaError_t poison(void* p, size_t bytes, cudaStream_t s = nullptr) {
  return cudaMemsetAsync(p, 0xFF, bytes, s);
}

inline softmax_options cuda_options(cudaStream_t s = nullptr, uint32_t flags = 0) {
  softmax_options o = softmax_default_options();
  o.backend = SOFTMAX_BACKEND_CUDA;
  o.stream = s;
  o.flags = flags;
  return o;
}

// Rows to compare against float64: all of them for small problems, else first, last and a
// random sample (the reference costs a float64 exp per element).
inline std::vector<size_t> rows_to_check(size_t rows, size_t cols, uint64_t seed) {
  std::vector<size_t> out;
  if (rows * cols <= (size_t{1} << 21) || rows <= 8) {
    for (size_t r = 0; r < rows; ++r) out.push_back(r);
    return out;
  }
  std::mt19937_64 rng(seed);
  out = {0, rows - 1};
  const size_t want = std::max<size_t>(4, (size_t{1} << 21) / cols);
  for (size_t i = 0; i < want; ++i) out.push_back(rng() % rows);
  return out;
}

// reference.h's tolerance plus, for f16, half the spacing of f16 subnormals (2^-25): outputs
// below 6.1e-5 (every long row, and e^-16 in any row of inputs in [-8, 8]) are stored with an
// absolute, not relative, rounding error in binary16, whatever the backend.
inline double tol(softmax_dtype t, double want, bool log_softmax, size_t cols) {
  return tolerance(t, want, log_softmax, cols) + (t == SOFTMAX_DTYPE_F16 ? 0x1p-25 : 0.0);
}

// NaN must be NaN and an infinity (log-softmax of a -inf input) exactly that infinity.
inline bool close(softmax_dtype t, double got, double want, bool log_softmax, size_t cols) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= tol(t, want, log_softmax, cols);
}

// Checks the selected rows of y (host copy) against the float64 softmax of x.
inline ::testing::AssertionResult rows_match_reference(const Buffer& x, const Buffer& y, size_t rows,
                                                       size_t cols, bool log_softmax,
                                                       const std::vector<size_t>& which) {
  std::vector<double> ref;
  for (size_t r : which) {
    reference_row(x, r, cols, log_softmax, &ref);
    for (size_t c = 0; c < cols; ++c) {
      const double got = y.get(r * cols + c);
      if (!close(y.dtype, got, ref[c], log_softmax, cols)) {
        return ::testing::AssertionFailure()
               << dtype_name(x.dtype) << " " << rows << "x" << cols << (log_softmax ? " log" : "")
               << ": row " << r << " col " << c << " got " << got << " want " << ref[c]
               << " (x = " << x.get(r * cols + c) << ")";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace softmax_cuda_test
