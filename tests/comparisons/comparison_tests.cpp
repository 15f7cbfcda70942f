// SPDX-License-Identifier: Apache-2.0
// The independent CUDA softmax versions kept in bench/ (CUB block reduce, Thrust segmented
// reductions, the seed article's ladder) against the float64 reference, and the library's CUDA
// path against them. Fresh random inputs every run (the seed is printed on failure); outputs are
// poisoned with NaN before each call, so an unwritten element fails. Every test skips, with the
// reason, when no CUDA device is present.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <softmax/softmax.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cub_softmax.h"
#include "reference.h"
#include "seed_ladder.h"
#include "thrust_softmax.h"

namespace {

using softmax_test::Buffer;
using softmax_test::check_row;
using softmax_test::dtype_name;
using softmax_test::fresh_seed;
using softmax_test::random_input;
using softmax_test::reference_row;

std::string gpu_absent_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return std::string("no usable CUDA device (cudaGetDeviceCount: ") + cudaGetErrorName(e) + ")";
  }
  return n == 0 ? "no CUDA device present" : "";
}

#define SKIP_WITHOUT_GPU()                                     \
  do {                                                         \
    const std::string why_ = gpu_absent_reason();              \
    if (!why_.empty()) GTEST_SKIP() << why_;                   \
  } while (0)

#define ASSERT_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call << ": " << cudaGetErrorString(cudaGetLastError())

// Device copy of a host Buffer, and the way back.
struct DeviceArray {
  void* p = nullptr;
  size_t bytes = 0;
  explicit DeviceArray(size_t b) : bytes(b) {
    if (cudaMalloc(&p, b) != cudaSuccess) p = nullptr;
  }
  ~DeviceArray() {
    if (p) cudaFree(p);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
};

const std::vector<int64_t> kCols = {1, 2, 3, 31, 32, 33, 127, 1000, 1023, 1024, 1025, 4097, 12345, 65537};
constexpr int64_t kRows = 5;

// Runs `op` on a device copy of x (y poisoned first) and returns y on the host.
template <class Op>
::testing::AssertionResult run_on_device(const Buffer& x, Buffer* y, Op op) {
  DeviceArray dx(x.bytes.size()), dy(y->bytes.size());
  if (!dx.p || !dy.p) return ::testing::AssertionFailure() << "cudaMalloc failed";
  y->poison();
  if (cudaMemcpy(dx.p, x.data(), x.bytes.size(), cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMemcpy(dy.p, y->data(), y->bytes.size(), cudaMemcpyHostToDevice) != cudaSuccess)
    return ::testing::AssertionFailure() << "cudaMemcpy to device failed";
  const std::string err = op(dx.p, dy.p);
  if (!err.empty()) return ::testing::AssertionFailure() << err;
  const cudaError_t sync = cudaDeviceSynchronize();
  if (sync != cudaSuccess) return ::testing::AssertionFailure() << "kernel failed: " << cudaGetErrorString(sync);
  if (cudaMemcpy(y->data(), dy.p, y->bytes.size(), cudaMemcpyDeviceToHost) != cudaSuccess)
    return ::testing::AssertionFailure() << "cudaMemcpy to host failed";
  return ::testing::AssertionSuccess();
}

std::string cuda_result(cudaError_t e) { return e == cudaSuccess ? "" : cudaGetErrorString(e); }

// Every row of y against the float64 reference with the shared tolerance (reference.h; it has an
// absolute floor for f16's subnormal outputs).
void expect_rows_match_reference(const Buffer& x, const Buffer& y, int64_t rows, int64_t cols, bool log_softmax,
                                 const std::string& what, uint64_t seed) {
  std::vector<double> ref;
  for (int64_t r = 0; r < rows; ++r) {
    reference_row(x, r, cols, log_softmax, &ref);
    const softmax_test::RowCheck c = check_row(y, r, cols, ref, log_softmax);
    ASSERT_TRUE(c.ok) << what << " " << dtype_name(y.dtype) << " " << rows << "x" << cols << " row " << r
                      << " col " << c.bad_col << ": got " << c.got << ", want " << c.want << " (seed " << seed << ")";
  }
}

TEST(CubBlockSoftmax, MatchesFloat64ReferenceEveryDtypeAndLength) {
  SKIP_WITHOUT_GPU();
  for (softmax_dtype dtype : {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F16, SOFTMAX_DTYPE_BF16}) {
    for (bool log_softmax : {false, true}) {
      for (int64_t cols : kCols) {
        const uint64_t seed = fresh_seed();
        const Buffer x = random_input(dtype, kRows * cols, seed);
        Buffer y(dtype, kRows * cols);
        ASSERT_TRUE(run_on_device(x, &y, [&](void* dx, void* dy) {
          return cuda_result(softmax_compare::cub_block_softmax(dx, dy, kRows, cols, dtype, log_softmax, nullptr));
        }));
        expect_rows_match_reference(x, y, kRows, cols, log_softmax, log_softmax ? "cub log" : "cub", seed);
      }
    }
  }
}

TEST(CubBlockSoftmax, LongSingleRowAndLargeMagnitudes) {
  SKIP_WITHOUT_GPU();
  const int64_t cols = (int64_t(1) << 20) + 3;
  const uint64_t seed = fresh_seed();
  const Buffer x = random_input(SOFTMAX_DTYPE_F32, cols, seed, 1e4f);
  Buffer y(SOFTMAX_DTYPE_F32, cols);
  ASSERT_TRUE(run_on_device(x, &y, [&](void* dx, void* dy) {
    return cuda_result(softmax_compare::cub_block_softmax(dx, dy, 1, cols, SOFTMAX_DTYPE_F32, false, nullptr));
  }));
  expect_rows_match_reference(x, y, 1, cols, false, "cub", seed);
}

TEST(ThrustRowSoftmax, MatchesFloat64Reference) {
  SKIP_WITHOUT_GPU();
  for (bool log_softmax : {false, true}) {
    for (int64_t cols : kCols) {
      const uint64_t seed = fresh_seed();
      const Buffer x = random_input(SOFTMAX_DTYPE_F32, kRows * cols, seed);
      Buffer y(SOFTMAX_DTYPE_F32, kRows * cols);
      DeviceArray ws(softmax_compare::thrust_softmax_workspace_bytes(kRows));
      ASSERT_TRUE(run_on_device(x, &y, [&](void* dx, void* dy) {
        return cuda_result(softmax_compare::thrust_row_softmax(static_cast<const float*>(dx), static_cast<float*>(dy),
                                                               kRows, cols, log_softmax, ws.p, nullptr));
      }));
      expect_rows_match_reference(x, y, kRows, cols, log_softmax, log_softmax ? "thrust log" : "thrust", seed);
    }
  }
}

TEST(ComparisonVersions, NonFiniteRowsBecomeNaNLikeTheFormula) {
  SKIP_WITHOUT_GPU();
  const int64_t rows = 4, cols = 37;
  const uint64_t seed = fresh_seed();
  Buffer x = random_input(SOFTMAX_DTYPE_F32, rows * cols, seed);
  const float inf = std::numeric_limits<float>::infinity();
  x.set(0 * cols + 5, std::numeric_limits<float>::quiet_NaN());     // NaN in a row
  for (int64_t c = 0; c < cols; ++c) x.set(1 * cols + c, -inf);     // all -inf
  x.set(2 * cols + 9, inf);                                          // one +inf
  // row 3 stays finite
  Buffer y(SOFTMAX_DTYPE_F32, rows * cols);
  ASSERT_TRUE(run_on_device(x, &y, [&](void* dx, void* dy) {
    return cuda_result(softmax_compare::cub_block_softmax(dx, dy, rows, cols, SOFTMAX_DTYPE_F32, false, nullptr));
  }));
  expect_rows_match_reference(x, y, rows, cols, false, "cub non-finite", seed);
  DeviceArray ws(softmax_compare::thrust_softmax_workspace_bytes(rows));
  ASSERT_TRUE(run_on_device(x, &y, [&](void* dx, void* dy) {
    return cuda_result(softmax_compare::thrust_row_softmax(static_cast<const float*>(dx), static_cast<float*>(dy), rows,
                                                           cols, false, ws.p, nullptr));
  }));
  expect_rows_match_reference(x, y, rows, cols, false, "thrust non-finite", seed);
}

// The seed kernels sum in plain float in one chain per thread (n for rung 01, n / 1024 for the
// one-block rungs), so they are held to the classical bound of such a sum, chain * 2^-24, plus
// the shared per-element tolerance: enough to catch any indexing or reduction bug (those give
// errors of order 1), not a claim that they are accurate.
void expect_ladder_rung(const char* name, cudaError_t (*launch)(const float*, float*, int64_t, cudaStream_t), int64_t n,
                        int64_t chain) {
  const uint64_t seed = fresh_seed();
  const Buffer x = random_input(SOFTMAX_DTYPE_F32, n, seed);
  Buffer y(SOFTMAX_DTYPE_F32, n);
  ASSERT_TRUE(run_on_device(x, &y, [&](void* dx, void* dy) {
    return cuda_result(launch(static_cast<const float*>(dx), static_cast<float*>(dy), n, nullptr));
  }));
  std::vector<double> ref;
  reference_row(x, 0, n, false, &ref);
  const double bound = 1e-6 + static_cast<double>(chain + 16) * 0x1p-24;
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double got = y.get(i);
    ASSERT_FALSE(std::isnan(got)) << name << " n=" << n << ": NaN (unwritten?) at " << i << " (seed " << seed << ")";
    worst = std::max(worst, std::fabs(got - ref[i]) / ref[i]);
  }
  EXPECT_LE(worst, bound) << name << " n=" << n << " (seed " << seed << ")";
}

TEST(SeedLadder, NaiveOneThreadMatchesReference) {
  SKIP_WITHOUT_GPU();
  for (int64_t n : {int64_t(1), int64_t(33), int64_t(4099), int64_t(65537)})
    expect_ladder_rung("01_naive_one_thread", seed_ladder::launch_naive_one_thread, n, n);
}

TEST(SeedLadder, WarpShuffleReduceMatchesReference) {
  SKIP_WITHOUT_GPU();
  for (int64_t n : {int64_t(1), int64_t(33), int64_t(1025), int64_t(65537), int64_t(1) << 20})
    expect_ladder_rung("02_warp_shuffle_reduce", seed_ladder::launch_warp_shuffle_reduce, n, n / 1024 + 1);
}

TEST(SeedLadder, Float4VectorizedMatchesReferenceWithTails) {
  SKIP_WITHOUT_GPU();
  for (int64_t n : {int64_t(1), int64_t(3), int64_t(4), int64_t(4097), int64_t(65538), (int64_t(1) << 20) + 3})
    expect_ladder_rung("03_float4_vectorized", seed_ladder::launch_float4_vectorized, n, n / 4096 * 4 + 8);
}

// The library's CUDA path and the two independent versions compute the same function: each is
// held to the float64 reference, and the library is compared with CUB and Thrust element by
// element (within the sum of their tolerances).
TEST(LibraryAgreement, CudaBackendAgreesWithCubAndThrust) {
  SKIP_WITHOUT_GPU();
  if (!softmax_backend_available(SOFTMAX_BACKEND_CUDA))
    GTEST_SKIP() << "the library's CUDA backend is not available on this machine";
  softmax_options opt = softmax_default_options();
  opt.backend = SOFTMAX_BACKEND_CUDA;
  for (softmax_dtype dtype : {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_BF16, SOFTMAX_DTYPE_F16}) {
    for (int64_t cols : {int64_t(32), int64_t(1000), int64_t(1025), int64_t(4097), int64_t(32769), int64_t(1048577)}) {
      const int64_t rows = cols > 100000 ? 2 : 7;
      const uint64_t seed = fresh_seed();
      const Buffer x = random_input(dtype, rows * cols, seed);
      Buffer lib(dtype, rows * cols), cub(dtype, rows * cols);
      ASSERT_TRUE(run_on_device(x, &lib, [&](void* dx, void* dy) {
        const softmax_status s = softmax_rows(dx, dy, rows, cols, dtype, &opt);
        return s == SOFTMAX_STATUS_SUCCESS ? std::string() : std::string(softmax_last_error());
      }));
      ASSERT_TRUE(run_on_device(x, &cub, [&](void* dx, void* dy) {
        return cuda_result(softmax_compare::cub_block_softmax(dx, dy, rows, cols, dtype, false, nullptr));
      }));
      expect_rows_match_reference(x, lib, rows, cols, false, "library", seed);
      std::vector<double> ref;
      for (int64_t r = 0; r < rows; ++r) {
        reference_row(x, r, cols, false, &ref);
        for (int64_t c = 0; c < cols; ++c) {
          const double t = 2 * softmax_test::tolerance(dtype, ref[c], false, cols);
          ASSERT_LE(std::fabs(lib.get(r * cols + c) - cub.get(r * cols + c)), t)
              << dtype_name(dtype) << " " << rows << "x" << cols << " row " << r << " col " << c
              << ": library " << lib.get(r * cols + c) << " vs CUB " << cub.get(r * cols + c) << " (seed " << seed << ")";
        }
      }
      if (dtype == SOFTMAX_DTYPE_F32) {
        Buffer thr(dtype, rows * cols);
        DeviceArray ws(softmax_compare::thrust_softmax_workspace_bytes(rows));
        ASSERT_TRUE(run_on_device(x, &thr, [&](void* dx, void* dy) {
          return cuda_result(softmax_compare::thrust_row_softmax(static_cast<const float*>(dx), static_cast<float*>(dy),
                                                                 rows, cols, false, ws.p, nullptr));
        }));
        for (int64_t r = 0; r < rows; ++r) {
          reference_row(x, r, cols, false, &ref);
          for (int64_t c = 0; c < cols; ++c) {
            const double t = 2 * softmax_test::tolerance(dtype, ref[c], false, cols);
            ASSERT_LE(std::fabs(lib.get(r * cols + c) - thr.get(r * cols + c)), t)
                << rows << "x" << cols << " row " << r << " col " << c << ": library vs Thrust (seed " << seed << ")";
          }
        }
      }
    }
  }
}

}  // namespace
