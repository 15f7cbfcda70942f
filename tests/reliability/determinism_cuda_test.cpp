// SPDX-License-Identifier: Apache-2.0
// Bitwise determinism of the CUDA backend, on fresh random inputs in device memory:
//   - run to run: the same call twice gives the same bytes;
//   - batch invariance: a slice of rows computed alone equals those rows of the whole call, also
//     when the row count moves the launcher to another strategy (few long rows: split-row);
//   - alignment invariance: x and y off 16-byte alignment by some elements, every pair of types;
//   - streams: the legacy default stream, a created stream, a non-blocking stream and two host
//     threads on two streams at once all give the same bytes;
//   - dropout's keep_mask equals the CPU backend's, bit for bit (DESIGN.md's promise).
// Skips, with the reason, when built without CUDA or when no CUDA device is usable.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "reference.h"

#ifdef SOFTMAX_RELIABILITY_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace {

using softmax_test::Buffer;

#ifndef SOFTMAX_RELIABILITY_HAVE_CUDA

#define REQUIRE_CUDA() GTEST_SKIP() << "libsoftmax was built without CUDA (SOFTMAX_WITH_CUDA=OFF)"

#else

const std::string& no_cuda_reason() {
  static const std::string reason = [] {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return std::string("no CUDA device: ") + cudaGetErrorString(e);
    }
    if (n == 0) return std::string("no CUDA device: cudaGetDeviceCount returned 0");
    if (!softmax_backend_available(SOFTMAX_BACKEND_CUDA)) {
      return std::string("softmax_backend_available(SOFTMAX_BACKEND_CUDA) is 0");
    }
    return std::string();
  }();
  return reason;
}

#define REQUIRE_CUDA()                                              \
  do {                                                              \
    if (!no_cuda_reason().empty()) GTEST_SKIP() << no_cuda_reason(); \
  } while (0)

#define CUDA_CHECK(call)                                                              \
  do {                                                                                \
    const cudaError_t e_ = (call);                                                    \
    ASSERT_EQ(e_, cudaSuccess) << #call << ": " << cudaGetErrorString(e_);            \
  } while (0)

// Device bytes, freed on scope exit.
struct Device {
  void* p = nullptr;
  size_t n = 0;
  explicit Device(size_t bytes) : n(bytes) {
    if (cudaMalloc(&p, bytes) != cudaSuccess) p = nullptr;
  }
  ~Device() { cudaFree(p); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
};

enum class Op { Softmax, Log, Dropout };
const char* op_name(Op op) { return op == Op::Softmax ? "softmax" : op == Op::Log ? "log" : "dropout"; }

struct Result {
  std::vector<unsigned char> y;
  std::vector<uint8_t> mask;
  softmax_status status = SOFTMAX_STATUS_INTERNAL_ERROR;
  std::string error;
};

// Uploads x, runs one call on `stream` (y and mask poisoned with `poison`), downloads the results.
Result run_on_device(Op op, const Buffer& x, int64_t rows, int64_t cols, void* stream, uint8_t poison,
                     float p = 0.4f, uint64_t seed = 77, uint64_t offset = 3) {
  // SOFTMAX_RELIABILITY_VERBOSE=1 names each call before it is made (to find a call that hangs).
  static const bool verbose = std::getenv("SOFTMAX_RELIABILITY_VERBOSE") != nullptr;
  if (verbose) {
    std::fprintf(stderr, "cuda call: %s %s %lldx%lld stream %p\n", op_name(op),
                 softmax_test::dtype_name(x.dtype), static_cast<long long>(rows),
                 static_cast<long long>(cols), stream);
  }
  Result r;
  const size_t bytes = x.bytes.size(), n = size_t(rows * cols);
  Device dx(bytes), dy(bytes), dm(n);
  if (!dx.p || !dy.p || !dm.p) {
    r.error = "cudaMalloc failed";
    return r;
  }
  auto s = static_cast<cudaStream_t>(stream);
  if (cudaMemcpyAsync(dx.p, x.data(), bytes, cudaMemcpyHostToDevice, s) != cudaSuccess ||
      cudaMemsetAsync(dy.p, poison, bytes, s) != cudaSuccess ||
      cudaMemsetAsync(dm.p, poison, n, s) != cudaSuccess) {
    r.error = "upload failed";
    return r;
  }
  softmax_options o = softmax_default_options();
  o.backend = SOFTMAX_BACKEND_CUDA;
  o.stream = stream;
  if (op == Op::Dropout) {
    r.status = softmax_dropout(dx.p, dy.p, static_cast<uint8_t*>(dm.p), rows, cols, x.dtype, p, seed,
                               offset, &o);
  } else {
    o.flags = op == Op::Log ? SOFTMAX_FLAG_LOG : 0u;
    r.status = softmax_rows(dx.p, dy.p, rows, cols, x.dtype, &o);
  }
  r.error = softmax_last_error();
  r.y.resize(bytes);
  r.mask.resize(n);
  if (cudaMemcpyAsync(r.y.data(), dy.p, bytes, cudaMemcpyDeviceToHost, s) != cudaSuccess ||
      cudaMemcpyAsync(r.mask.data(), dm.p, n, cudaMemcpyDeviceToHost, s) != cudaSuccess ||
      cudaStreamSynchronize(s) != cudaSuccess) {
    r.status = SOFTMAX_STATUS_CUDA_ERROR;
    r.error = cudaGetErrorString(cudaGetLastError());
  }
  return r;
}

// softmax_rows or softmax_dropout of x (uploaded `x_off` elements into its allocation) into y of
// type `y_dtype`, `y_off` elements into its (poisoned) allocation; y's bytes come back.
Result run_placed(Op op, const Buffer& x, softmax_dtype y_dtype, int64_t rows, int64_t cols, size_t x_off,
                  size_t y_off) {
  Result r;
  const size_t n = size_t(rows * cols), xs = softmax_test::element_size(x.dtype),
               ys = softmax_test::element_size(y_dtype);
  Device dx((n + x_off) * xs), dy((n + y_off) * ys);
  if (!dx.p || !dy.p) {
    r.error = "cudaMalloc failed";
    return r;
  }
  void* xp = static_cast<char*>(dx.p) + x_off * xs;
  void* yp = static_cast<char*>(dy.p) + y_off * ys;
  if (cudaMemcpy(xp, x.data(), n * xs, cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMemset(dy.p, 0xA5, (n + y_off) * ys) != cudaSuccess) {
    r.error = "upload failed";
    return r;
  }
  softmax_options o = softmax_default_options();
  o.backend = SOFTMAX_BACKEND_CUDA;
  o.flags = SOFTMAX_FLAG_Y_DTYPE | (op == Op::Log ? SOFTMAX_FLAG_LOG : 0u);
  o.y_dtype = y_dtype;
  r.status = op == Op::Dropout ? softmax_dropout(xp, yp, nullptr, rows, cols, x.dtype, 0.3f, 91, 5, &o)
                               : softmax_rows(xp, yp, rows, cols, x.dtype, &o);
  r.error = softmax_last_error();
  r.y.resize(n * ys);
  if (cudaMemcpy(r.y.data(), yp, n * ys, cudaMemcpyDeviceToHost) != cudaSuccess) {
    r.status = SOFTMAX_STATUS_CUDA_ERROR;
    r.error = cudaGetErrorString(cudaGetLastError());
  }
  return r;
}

struct Shape {
  int64_t rows, cols;
};
// Warp-per-row, block-per-row, and few long rows (split over blocks / clusters).
const Shape kShapes[] = {{4099, 32}, {1000, 1000}, {64, 20000}, {3, 300007}, {1, (1 << 21) + 3}};
constexpr softmax_dtype kDtypes[] = {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F16, SOFTMAX_DTYPE_BF16};

std::string what(Op op, softmax_dtype dtype, Shape s, uint64_t seed) {
  return std::string(op_name(op)) + " " + softmax_test::dtype_name(dtype) + " " +
         std::to_string(s.rows) + "x" + std::to_string(s.cols) + " input seed " + std::to_string(seed);
}

#endif  // SOFTMAX_RELIABILITY_HAVE_CUDA

TEST(CudaDeterminism, SameCallSameBitsRunToRun) {
  REQUIRE_CUDA();
#ifdef SOFTMAX_RELIABILITY_HAVE_CUDA
  for (const softmax_dtype dtype : kDtypes) {
    for (const Shape s : kShapes) {
      const uint64_t seed = softmax_test::fresh_seed();
      const Buffer x = softmax_test::random_input(dtype, size_t(s.rows * s.cols), seed);
      for (const Op op : {Op::Softmax, Op::Log, Op::Dropout}) {
        const Result a = run_on_device(op, x, s.rows, s.cols, nullptr, 0x11);
        const Result b = run_on_device(op, x, s.rows, s.cols, nullptr, 0xEE);
        ASSERT_EQ(a.status, SOFTMAX_STATUS_SUCCESS) << a.error << " " << what(op, dtype, s, seed);
        ASSERT_EQ(b.status, SOFTMAX_STATUS_SUCCESS) << b.error;
        ASSERT_EQ(a.y, b.y) << "run to run: " << what(op, dtype, s, seed);
        if (op == Op::Dropout) ASSERT_EQ(a.mask, b.mask) << "run to run: " << what(op, dtype, s, seed);
      }
    }
  }
#endif
}

TEST(CudaDeterminism, RowResultDoesNotDependOnOtherRowsInTheCall) {
  REQUIRE_CUDA();
#ifdef SOFTMAX_RELIABILITY_HAVE_CUDA
  std::mt19937_64 pick(softmax_test::fresh_seed());
  for (const softmax_dtype dtype : kDtypes) {
    for (const Shape s : {Shape{5000, 32}, Shape{700, 1500}, Shape{300, 20000}, Shape{200, 70001}}) {
      const uint64_t seed = softmax_test::fresh_seed();
      const Buffer x = softmax_test::random_input(dtype, size_t(s.rows * s.cols), seed);
      const size_t row_bytes = size_t(s.cols) * softmax_test::element_size(dtype);
      for (const Op op : {Op::Softmax, Op::Log}) {
        const Result whole = run_on_device(op, x, s.rows, s.cols, nullptr, 0x11);
        ASSERT_EQ(whole.status, SOFTMAX_STATUS_SUCCESS) << whole.error;
        // One row alone (the strategy for few rows differs), both ends, and random slices.
        std::vector<std::pair<int64_t, int64_t>> slices = {{0, 1}, {s.rows - 1, s.rows}, {1, 3}};
        for (int k = 0; k < 3; ++k) {
          const int64_t a = int64_t(pick() % uint64_t(s.rows));
          slices.emplace_back(a, a + 1 + int64_t(pick() % uint64_t(s.rows - a)));
        }
        for (const auto& [a, b] : slices) {
          Buffer xs(dtype, size_t((b - a) * s.cols));
          std::memcpy(xs.data(), x.bytes.data() + size_t(a) * row_bytes, size_t(b - a) * row_bytes);
          const Result part = run_on_device(op, xs, b - a, s.cols, nullptr, 0xEE);
          ASSERT_EQ(part.status, SOFTMAX_STATUS_SUCCESS) << part.error;
          ASSERT_EQ(0, std::memcmp(part.y.data(), whole.y.data() + size_t(a) * row_bytes,
                                   size_t(b - a) * row_bytes))
              << "rows [" << a << ", " << b << ") alone vs in the whole call: " << what(op, dtype, s, seed);
        }
      }
    }
  }
#endif
}

// The README's promise: a row's result does not depend on the pointers' alignment, for every
// pair of storage types (16-bit x with f32 y has a layout of its own) and every strategy.
TEST(CudaDeterminism, RowResultDoesNotDependOnAlignment) {
  REQUIRE_CUDA();
#ifdef SOFTMAX_RELIABILITY_HAVE_CUDA
  const std::pair<size_t, size_t> placements[] = {{1, 0}, {0, 1}, {3, 5}, {2, 2}};
  for (const softmax_dtype xt : kDtypes) {
    for (const softmax_dtype yt : kDtypes) {
      for (const Shape s : {Shape{301, 100}, Shape{40, 1004}, Shape{9, 20004}, Shape{3, 70000}, Shape{2, 300008}}) {
        const uint64_t seed = softmax_test::fresh_seed();
        const Buffer x = softmax_test::random_input(xt, size_t(s.rows * s.cols), seed);
        const std::string where = std::string(softmax_test::dtype_name(xt)) + " -> " + softmax_test::dtype_name(yt) +
                                  " " + std::to_string(s.rows) + "x" + std::to_string(s.cols) + " input seed " +
                                  std::to_string(seed);
        for (const Op op : {Op::Softmax, Op::Log, Op::Dropout}) {
          const Result aligned = run_placed(op, x, yt, s.rows, s.cols, 0, 0);
          ASSERT_EQ(aligned.status, SOFTMAX_STATUS_SUCCESS) << aligned.error << " " << op_name(op) << " " << where;
          for (const auto& [xo, yo] : placements) {
            const Result moved = run_placed(op, x, yt, s.rows, s.cols, xo, yo);
            ASSERT_EQ(moved.status, SOFTMAX_STATUS_SUCCESS) << moved.error;
            ASSERT_EQ(aligned.y, moved.y) << op_name(op) << " " << where << ": x " << xo << ", y " << yo
                                          << " elements off alignment vs aligned";
          }
        }
      }
    }
  }
#endif
}

TEST(CudaDeterminism, SameBitsOnEveryStreamAndFromConcurrentThreads) {
  REQUIRE_CUDA();
#ifdef SOFTMAX_RELIABILITY_HAVE_CUDA
  cudaStream_t blocking = nullptr, nonblocking = nullptr, other = nullptr;
  CUDA_CHECK(cudaStreamCreate(&blocking));
  CUDA_CHECK(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  for (const softmax_dtype dtype : kDtypes) {
    for (const Shape s : kShapes) {
      const uint64_t seed = softmax_test::fresh_seed();
      const Buffer x = softmax_test::random_input(dtype, size_t(s.rows * s.cols), seed);
      for (const Op op : {Op::Softmax, Op::Log, Op::Dropout}) {
        const Result ref = run_on_device(op, x, s.rows, s.cols, nullptr, 0x11);
        ASSERT_EQ(ref.status, SOFTMAX_STATUS_SUCCESS) << ref.error;
        for (cudaStream_t st : {blocking, nonblocking, cudaStreamPerThread}) {
          const Result r = run_on_device(op, x, s.rows, s.cols, st, 0xEE);
          ASSERT_EQ(r.status, SOFTMAX_STATUS_SUCCESS) << r.error;
          ASSERT_EQ(ref.y, r.y) << "stream vs default stream: " << what(op, dtype, s, seed);
          // Only dropout writes a mask; for the other ops it holds each run's own poison.
          if (op == Op::Dropout) ASSERT_EQ(ref.mask, r.mask) << "stream vs default stream: " << what(op, dtype, s, seed);
        }
        Result r1, r2;
        std::thread t1([&] { r1 = run_on_device(op, x, s.rows, s.cols, nonblocking, 0x33); });
        std::thread t2([&] { r2 = run_on_device(op, x, s.rows, s.cols, other, 0x44); });
        t1.join();
        t2.join();
        ASSERT_EQ(r1.status, SOFTMAX_STATUS_SUCCESS) << r1.error;
        ASSERT_EQ(r2.status, SOFTMAX_STATUS_SUCCESS) << r2.error;
        ASSERT_EQ(ref.y, r1.y) << "two threads, two streams: " << what(op, dtype, s, seed);
        ASSERT_EQ(ref.y, r2.y) << "two threads, two streams: " << what(op, dtype, s, seed);
      }
    }
  }
  cudaStreamDestroy(blocking);
  cudaStreamDestroy(nonblocking);
  cudaStreamDestroy(other);
#endif
}

TEST(CudaDeterminism, DropoutMaskEqualsTheCpuBackendsBitForBit) {
  REQUIRE_CUDA();
#ifdef SOFTMAX_RELIABILITY_HAVE_CUDA
  for (const Shape s : kShapes) {
    const uint64_t seed = softmax_test::fresh_seed();
    const Buffer x = softmax_test::random_input(SOFTMAX_DTYPE_F32, size_t(s.rows * s.cols), seed);
    for (const uint64_t offset : {uint64_t{0}, uint64_t{1}, uint64_t{6}}) {
      const Result gpu = run_on_device(Op::Dropout, x, s.rows, s.cols, nullptr, 0x11, 0.35f, seed, offset);
      ASSERT_EQ(gpu.status, SOFTMAX_STATUS_SUCCESS) << gpu.error;
      Buffer y(SOFTMAX_DTYPE_F32, x.size());
      std::vector<uint8_t> mask(x.size(), 0xEE);
      softmax_options o = softmax_default_options();
      o.backend = SOFTMAX_BACKEND_CPU;
      ASSERT_EQ(softmax_dropout(x.data(), y.data(), mask.data(), s.rows, s.cols, SOFTMAX_DTYPE_F32,
                                0.35f, seed, offset, &o),
                SOFTMAX_STATUS_SUCCESS)
          << softmax_last_error();
      ASSERT_EQ(gpu.mask, mask) << s.rows << "x" << s.cols << " seed " << seed << " offset " << offset;
    }
  }
#endif
}

}  // namespace
