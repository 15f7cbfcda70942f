/* SPDX-License-Identifier: Apache-2.0 */
// Helpers for the CUDA suites: skipping without a GPU, device buffers that poison themselves,
// and checks of device results against the float64 reference of tests/common/reference.h.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <softmax/softmax.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/launch_plan.h"
#include "reference.h"

namespace softmax_cuda_test {

using namespace softmax_test;
using softmax_internal::dropout_keep;
using softmax_internal::dropout_scale;

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

// A row count past what the device holds at once of the long-row kernels' blocks or clusters
// (at most one block per SM), so their grid loops over the rows (launch_register): twice the
// SM count and an odd remainder.
inline size_t rows_past_resident_blocks() {
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    sms = 0;
  }
  return 2 * size_t(sms) + 3;
}

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

// The strategy SOFTMAX_CUDA_STRATEGY forces on this process's calls, if any.
inline bool forced_strategy(softmax_internal::Strategy* s) {
  const char* v = std::getenv("SOFTMAX_CUDA_STRATEGY");
  if (v == nullptr || *v == '\0') return false;
  const std::string name(v);
  using softmax_internal::Strategy;
  for (Strategy c : {Strategy::Segment, Strategy::Block, Strategy::Cluster, Strategy::Split}) {
    if (name == softmax_internal::strategy_name(c)) {
      *s = c;
      return true;
    }
  }
  return false;
}

// The status a call on rows of `cols` columns must return: SUCCESS, or INTERNAL_ERROR when a
// forced strategy cannot hold such rows (the library must refuse, not run another strategy).
// `layout_bytes` is the element size of the arrays the kernels hold (x for the forward, y for the
// backward), `arrays` how many of them a thread holds; `softmax_rows`: the call runs softmax_rows'
// kernels (whose wide block holds 16-bit rows packed, launch_plan.h wide_chunks).
inline softmax_status expected_status(int64_t cols, size_t layout_bytes, int arrays = 1, bool softmax_rows = false) {
  softmax_internal::Strategy s;
  if (!forced_strategy(&s)) return SOFTMAX_STATUS_SUCCESS;
  const int chunk_elems = 16 / int(layout_bytes);
  const int64_t chunks = (cols + chunk_elems - 1) / chunk_elems;
  return chunks <= softmax_internal::strategy_capacity_chunks(s, chunk_elems, arrays, softmax_rows)
             ? SOFTMAX_STATUS_SUCCESS
             : SOFTMAX_STATUS_INTERNAL_ERROR;
}

// The runtime-behaviour tests (threads, streams, graphs, memory kinds) run lengths of every
// strategy in one test and check the call machinery, not a kernel: under a forced strategy that
// refuses some of those lengths (all but split), they skip and say so.
#define SKIP_UNDER_FORCED_STRATEGY()                                                                 \
  do {                                                                                               \
    softmax_internal::Strategy s_;                                                                   \
    if (::softmax_cuda_test::forced_strategy(&s_) && s_ != softmax_internal::Strategy::Split)       \
      GTEST_SKIP() << "checks the call machinery under the default plan; SOFTMAX_CUDA_STRATEGY="     \
                   << softmax_internal::strategy_name(s_) << " refuses some of its row lengths";     \
  } while (0)

// Asserts that `call` returns expected_status(...); after a (checked) refusal the test returns.
// ASSERT_ROWS_RUN_OR_REFUSED: a call that runs softmax_rows' kernels (one array).
#define ASSERT_ROWS_RUN_OR_REFUSED(call, cols, layout_bytes) \
  ASSERT_STATUS_OR_REFUSED(call, ::softmax_cuda_test::expected_status(cols, layout_bytes, 1, true))
#define ASSERT_RUNS_OR_REFUSED(call, cols, layout_bytes, arrays) \
  ASSERT_STATUS_OR_REFUSED(call, ::softmax_cuda_test::expected_status(cols, layout_bytes, arrays))
#define ASSERT_STATUS_OR_REFUSED(call, want)                                                       \
  do {                                                                                             \
    const softmax_status want_ = (want);                                                           \
    const softmax_status got_ = (call);                                                            \
    ASSERT_EQ(got_, want_) << softmax_status_string(got_) << ": " << softmax_last_error();        \
    if (want_ != SOFTMAX_STATUS_SUCCESS) {                                                         \
      ASSERT_NE(std::string(softmax_last_error()).find("SOFTMAX_CUDA_STRATEGY"), std::string::npos) \
          << softmax_last_error();                                                                 \
      return;                                                                                      \
    }                                                                                              \
  } while (0)

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

// reference.h's rule for one output element (exact NaN, infinities and zeros, else tolerance).
inline bool close(softmax_dtype t, double got, double want, bool log_softmax, size_t cols) {
  return element_ok(t, got, want, log_softmax, cols);
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
