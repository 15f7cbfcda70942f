// SPDX-License-Identifier: Apache-2.0
// softmax_dropout on the CUDA backend: the keep mask equal bit for bit to philox.h's definition
// and to the CPU backend's, whatever the shape and (seed, offset); y within tolerance of the
// float64 reference and of the CPU backend; keep rates within binomial bounds; p = 0 is
// softmax_rows bit for bit; p = 1 gives zeros; philox.h agrees with cuRAND itself.
#include <cuda_runtime.h>
#include <curand_kernel.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "backends/common/philox.h"
#include "cuda_test_support.h"

namespace softmax_cuda_test {
namespace {

using softmax_internal::dropout_keep;
using softmax_internal::dropout_scale;
using softmax_internal::dropout_uniforms4;

struct DropoutCase {
  softmax_dtype dtype;
  size_t rows, cols;
  float p;
  uint64_t seed, offset;
  size_t offset_elems = 0;  // misalign x, y and the mask by this many elements
};

void run_dropout_case(const DropoutCase& c) {
  const uint64_t data_seed = fresh_seed();
  SCOPED_TRACE(::testing::Message() << dtype_name(c.dtype) << " " << c.rows << "x" << c.cols << " p "
                                    << c.p << " seed " << c.seed << " offset " << c.offset
                                    << " misalign " << c.offset_elems << " data seed " << data_seed);
  const size_t n = c.rows * c.cols, es = element_size(c.dtype), oe = c.offset_elems;
  const Buffer x = random_input(c.dtype, n, data_seed);
  DeviceBytes dx((n + oe) * es), dy((n + oe) * es), dm(n + oe);
  ASSERT_NE(dx.p, nullptr);
  CUDA_OK(cudaMemcpy(dx.at(oe * es), x.data(), n * es, cudaMemcpyHostToDevice));
  CUDA_OK(poison(dy.p, (n + oe) * es));
  CUDA_OK(cudaMemset(dm.p, 0x77, n + oe));
  const softmax_options o = cuda_options();
  ASSERT_RUNS_OR_REFUSED(softmax_dropout(dx.at(oe * es), dy.at(oe * es), dm.at<uint8_t>(oe), int64_t(c.rows),
                                         int64_t(c.cols), c.dtype, c.p, c.seed, c.offset, &o),
                         int64_t(c.cols), es, 1);
  Buffer y(c.dtype, n);
  std::vector<uint8_t> mask(n);
  CUDA_OK(cudaMemcpy(y.data(), dy.at(oe * es), n * es, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(mask.data(), dm.at(oe), n, cudaMemcpyDeviceToHost));

  // The CPU backend on host copies of the same call.
  Buffer ycpu(c.dtype, n);
  ycpu.poison();
  std::vector<uint8_t> mcpu(n, 0x77);
  softmax_options co = softmax_default_options();
  co.backend = SOFTMAX_BACKEND_CPU;
  ASSERT_EQ(softmax_dropout(x.data(), ycpu.data(), mcpu.data(), int64_t(c.rows), int64_t(c.cols), c.dtype,
                            c.p, c.seed, c.offset, &co),
            SOFTMAX_STATUS_SUCCESS)
      << softmax_last_error();

  // Mask: bit for bit the CPU's and the definition's (checked on every element).
  for (size_t i = 0; i < n; ++i) {
    const uint8_t want = dropout_keep(c.seed, c.offset, i, c.p) ? 1 : 0;
    ASSERT_EQ(mask[i], want) << "mask element " << i << " differs from philox.h's definition";
    ASSERT_EQ(mask[i], mcpu[i]) << "mask element " << i << " differs from the CPU backend's";
  }
  // y: the float64 reference times the keep decision and the (float) dropout scale.
  const double scale = dropout_scale(c.p);
  std::vector<double> ref;
  for (size_t r : rows_to_check(c.rows, c.cols, data_seed)) {
    reference_row(x, r, c.cols, false, &ref);
    for (size_t col = 0; col < c.cols; ++col) {
      const size_t i = r * c.cols + col;
      const double want = mask[i] ? ref[col] * scale : 0.0;
      const double got = y.get(i), cpu = ycpu.get(i);
      ASSERT_TRUE(close(c.dtype, got, want, false, c.cols))
          << "y[" << r << "][" << col << "] = " << got << ", want " << want;
      ASSERT_LE(std::fabs(got - cpu), 2 * tolerance(c.dtype, want, false, c.cols))
          << "y[" << r << "][" << col << "] = " << got << ", CPU backend gives " << cpu;
    }
  }
}

TEST(CudaDropout, MaskMatchesCpuBitForBit) {
  REQUIRE_GPU();
  const std::pair<size_t, size_t> shapes[] = {{1, 1},     {3, 5},      {7, 3},       {33, 31},    {65, 32},
                                              {17, 33},   {9, 127},    {21, 130},    {31, 1000},  {5, 1023},
                                              {11, 1025}, {7, 2050},   {3, 4097},    {13, 8200},  {2, 12345},
                                              {67, 32768}, {3, 32769}, {2, 65537},   {1, 1 << 20}, {1, 300001},
                                              {19, 400001}, {9, 1 << 20}, {3, 200003}};
  const uint64_t seeds[] = {0, 1, 0x123456789abcdefull, 0xffffffffffffffffull};
  const uint64_t offsets[] = {0, 1, 2, 3, 4, 7, 0x100000001ull, 0xfffffffffffffffdull};
  int i = 0;
  for (auto [rows, cols] : shapes) {
    for (softmax_dtype t : {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F16, SOFTMAX_DTYPE_BF16}) {
      const uint64_t seed = seeds[i % 4], offset = offsets[(i * 3 + 1) % 8];
      const float p = (i % 3 == 0) ? 0.1f : (i % 3 == 1) ? 0.5f : 0.73f;
      run_dropout_case({t, rows, cols, p, seed, offset, 0});
      ++i;
    }
    // One element off alignment: f32 rows read in 4-byte pieces, 16-bit rows realigned. Two
    // elements off: 16-bit rows of even length in 4-byte pieces.
    run_dropout_case({SOFTMAX_DTYPE_F32, rows, cols, 0.3f, seeds[i % 4], offsets[i % 8], 1});
    run_dropout_case({i % 2 ? SOFTMAX_DTYPE_BF16 : SOFTMAX_DTYPE_F16, rows, cols, 0.3f, seeds[i % 4],
                      offsets[(i + 5) % 8], 1});
    run_dropout_case({i % 2 ? SOFTMAX_DTYPE_F16 : SOFTMAX_DTYPE_BF16, rows, cols, 0.3f, seeds[(i + 1) % 4],
                      offsets[(i + 2) % 8], 2});
    ++i;
  }
}

// 16-bit rows of 513-768 and 2049-2304 columns run blocks of three chunks a thread, whose keep
// bits end with a round of one chunk (two Philox blocks instead of four): every phase of the
// offset (the draw straddles two blocks unless it is a multiple of 4), rows on 16-byte
// boundaries, two elements off (moved in 4-byte pieces) and one off (realigned through the stage).
TEST(CudaDropout, ThreeChunkBlocksEveryOffsetPhase) {
  REQUIRE_GPU();
  int i = 0;
  for (size_t cols : {size_t{520}, size_t{700}, size_t{768}, size_t{2050}, size_t{2304}}) {
    for (uint64_t offset : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{0x100000002ull}}) {
      for (size_t misalign : {size_t{0}, size_t{1}, size_t{2}}) {
        const softmax_dtype t = i % 2 ? SOFTMAX_DTYPE_BF16 : SOFTMAX_DTYPE_F16;
        run_dropout_case({t, 5 + size_t(i % 4), cols, i % 3 ? 0.3f : 0.7f, 0x9e3779b97f4a7c15ull + uint64_t(i), offset,
                          misalign});
        ++i;
      }
    }
  }
}

TEST(CudaDropout, EveryOffsetPhase) {
  REQUIRE_GPU();
  for (uint64_t offset = 0; offset < 8; ++offset) {
    run_dropout_case({SOFTMAX_DTYPE_F32, 37, 1001, 0.25f, 42 + offset, offset, 0});
    run_dropout_case({SOFTMAX_DTYPE_BF16, 19, 4096, 0.25f, 7, offset, 0});
    run_dropout_case({SOFTMAX_DTYPE_F16, 3, 70000, 0.25f, 9, offset, 0});
  }
}

// The number kept is Binomial(n, 1 - p): within 6 standard deviations of its mean.
TEST(CudaDropout, KeepRateWithinBinomialBounds) {
  REQUIRE_GPU();
  const size_t rows = 1025, cols = 1000, n = rows * cols;
  DeviceBytes dx(n * 4), dy(n * 4), dm(n);
  const Buffer x = random_input(SOFTMAX_DTYPE_F32, n, fresh_seed());
  CUDA_OK(cudaMemcpy(dx.p, x.data(), n * 4, cudaMemcpyHostToDevice));
  for (float p : {0.1f, 0.5f, 0.9f}) {
    const uint64_t seed = fresh_seed();
    const softmax_options o = cuda_options();
    ASSERT_RUNS_OR_REFUSED(softmax_dropout(dx.p, dy.p, dm.at<uint8_t>(), rows, cols, SOFTMAX_DTYPE_F32, p, seed, 0, &o),
                           int64_t(cols), 4, 1);
    std::vector<uint8_t> mask(n);
    CUDA_OK(cudaMemcpy(mask.data(), dm.p, n, cudaMemcpyDeviceToHost));
    size_t kept = 0;
    for (uint8_t m : mask) kept += m;
    const double mean = n * (1.0 - p), sd = std::sqrt(n * p * (1.0 - p));
    EXPECT_NEAR(double(kept), mean, 6 * sd) << "p " << p << " seed " << seed;
  }
}

TEST(CudaDropout, PZeroIsSoftmaxRowsBitForBit) {
  REQUIRE_GPU();
  for (softmax_dtype t : {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F16, SOFTMAX_DTYPE_BF16}) {
    for (auto [rows, cols] : {std::pair<size_t, size_t>{333, 100}, {31, 5000}, {2, 100001}}) {
      const size_t n = rows * cols, es = element_size(t);
      const Buffer x = random_input(t, n, fresh_seed());
      DeviceBytes dx(n * es), dy(n * es), dz(n * es), dm(n);
      CUDA_OK(cudaMemcpy(dx.p, x.data(), n * es, cudaMemcpyHostToDevice));
      CUDA_OK(poison(dy.p, n * es));
      CUDA_OK(poison(dz.p, n * es));
      const softmax_options o = cuda_options();
      // p = 0 runs softmax_rows' kernels: one array per thread.
      ASSERT_ROWS_RUN_OR_REFUSED(softmax_rows(dx.p, dy.p, rows, cols, t, &o), int64_t(cols), es);
      ASSERT_ROWS_RUN_OR_REFUSED(softmax_dropout(dx.p, dz.p, dm.at<uint8_t>(), rows, cols, t, 0.0f, 5, 3, &o),
                                 int64_t(cols), es);
      std::vector<unsigned char> a(n * es), b(n * es);
      std::vector<uint8_t> mask(n);
      CUDA_OK(cudaMemcpy(a.data(), dy.p, n * es, cudaMemcpyDeviceToHost));
      CUDA_OK(cudaMemcpy(b.data(), dz.p, n * es, cudaMemcpyDeviceToHost));
      CUDA_OK(cudaMemcpy(mask.data(), dm.p, n, cudaMemcpyDeviceToHost));
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), n * es)) << dtype_name(t) << " " << rows << "x" << cols;
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(mask[i], 1) << i;
    }
  }
}

TEST(CudaDropout, POneGivesZeros) {
  REQUIRE_GPU();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (softmax_dtype t : {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_BF16}) {
    const size_t rows = 77, cols = 3001, n = rows * cols, es = element_size(t);
    Buffer x = random_input(t, n, fresh_seed());
    x.set(5, nan);  // even a NaN row drops to zeros
    DeviceBytes dx(n * es), dy(n * es), dm(n);
    CUDA_OK(cudaMemcpy(dx.p, x.data(), n * es, cudaMemcpyHostToDevice));
    CUDA_OK(poison(dy.p, n * es));
    CUDA_OK(cudaMemset(dm.p, 0x77, n));
    const softmax_options o = cuda_options();
    ASSERT_EQ(softmax_dropout(dx.p, dy.p, dm.at<uint8_t>(), rows, cols, t, 1.0f, 11, 0, &o),
              SOFTMAX_STATUS_SUCCESS);
    Buffer y(t, n);
    std::vector<uint8_t> mask(n);
    CUDA_OK(cudaMemcpy(y.data(), dy.p, n * es, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(mask.data(), dm.p, n, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(y.get(i), 0.0f) << i;
      ASSERT_EQ(mask[i], 0) << i;
    }
  }
}

TEST(CudaDropout, WithoutMaskMatchesWithMask) {
  REQUIRE_GPU();
  const size_t rows = 129, cols = 2000, n = rows * cols;
  const Buffer x = random_input(SOFTMAX_DTYPE_F32, n, fresh_seed());
  DeviceBytes dx(n * 4), dy(n * 4), dz(n * 4), dm(n);
  CUDA_OK(cudaMemcpy(dx.p, x.data(), n * 4, cudaMemcpyHostToDevice));
  const softmax_options o = cuda_options();
  ASSERT_RUNS_OR_REFUSED(softmax_dropout(dx.p, dy.p, dm.at<uint8_t>(), rows, cols, SOFTMAX_DTYPE_F32, 0.2f, 99, 6, &o),
                         int64_t(cols), 4, 1);
  ASSERT_EQ(softmax_dropout(dx.p, dz.p, nullptr, rows, cols, SOFTMAX_DTYPE_F32, 0.2f, 99, 6, &o),
            SOFTMAX_STATUS_SUCCESS);
  std::vector<float> a(n), b(n);
  CUDA_OK(cudaMemcpy(a.data(), dy.p, n * 4, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(b.data(), dz.p, n * 4, cudaMemcpyDeviceToHost));
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), n * 4));
}

// A split row's statistics do not depend on its batch, whichever form runs it (a lone row takes
// two plain launches, a batch past half of L2 the resident split): wherever the row alone and the
// same row in the batch both keep an element, y holds the same bits. (The masks themselves differ,
// as the flat index of each element does.)
TEST(CudaDropout, SplitRowAloneHasTheBatchsValuesWhereBothKeep) {
  REQUIRE_GPU();
  for (softmax_dtype t : {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_BF16}) {
    // Batches past half of L2 (50 MB on the H100, 60 MB on the H200) in either type.
    for (const auto& shape : {std::pair<size_t, size_t>{100, 300001}, {20, size_t{1} << 20}}) {
      const size_t rows = shape.first, cols = shape.second;
      const uint64_t seed = fresh_seed();
      SCOPED_TRACE(::testing::Message() << dtype_name(t) << " " << rows << "x" << cols << " seed " << seed);
      const size_t n = rows * cols, es = element_size(t);
      const Buffer x = random_input(t, n, seed);
      const softmax_options o = cuda_options();
      // Rows [first, first + count) of x: y and the mask.
      auto run = [&](size_t first, size_t count, Buffer* y, std::vector<uint8_t>* mask) {
        const size_t m = count * cols;
        DeviceBytes dx(m * es), dy(m * es), dm(m);
        CUDA_OK(cudaMemcpy(dx.p, x.bytes.data() + first * cols * es, m * es, cudaMemcpyHostToDevice));
        CUDA_OK(poison(dy.p, m * es));
        ASSERT_RUNS_OR_REFUSED(softmax_dropout(dx.p, dy.p, dm.at<uint8_t>(), int64_t(count), int64_t(cols), t, 0.1f,
                                               seed, 5, &o),
                               int64_t(cols), es, 1);
        *y = Buffer(t, m);
        mask->resize(m);
        CUDA_OK(cudaMemcpy(y->data(), dy.p, m * es, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(mask->data(), dm.p, m, cudaMemcpyDeviceToHost));
      };
      Buffer batch(t, n), alone(t, cols);
      std::vector<uint8_t> batch_mask, alone_mask;
      run(0, rows, &batch, &batch_mask);
      if (::testing::Test::HasFatalFailure() || batch_mask.empty()) return;
      for (size_t r : {size_t{0}, rows / 2, rows - 1}) {
        run(r, 1, &alone, &alone_mask);
        if (::testing::Test::HasFatalFailure()) return;
        size_t both = 0;
        for (size_t col = 0; col < cols; ++col) {
          const size_t i = r * cols + col;
          if (!alone_mask[col] || !batch_mask[i]) continue;
          ++both;
          ASSERT_EQ(0, std::memcmp(alone.bytes.data() + col * es, batch.bytes.data() + i * es, es))
              << "row " << r << " column " << col << ": " << alone.get(col) << " alone, " << batch.get(i)
              << " in the batch";
        }
        EXPECT_GT(both, cols / 2) << "row " << r;
      }
    }
  }
}

TEST(CudaDropout, BadProbabilityRejected) {
  REQUIRE_GPU();
  DeviceBytes dx(64 * 4), dy(64 * 4);
  const softmax_options o = cuda_options();
  for (float p : {-0.1f, 1.5f, std::numeric_limits<float>::quiet_NaN()}) {
    EXPECT_EQ(softmax_dropout(dx.p, dy.p, nullptr, 8, 8, SOFTMAX_DTYPE_F32, p, 1, 0, &o),
              SOFTMAX_STATUS_INVALID_PROBABILITY);
  }
}

// philox.h's dropout_uniforms4 against the real thing: curand_init(seed, i / 4, offset) and
// curand_uniform4, evaluated in a kernel.
__global__ void curand_uniforms(uint64_t seed, uint64_t offset, uint64_t group0, int groups, float4* out) {
  const int g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= groups) return;
  curandStatePhilox4_32_10_t s;
  curand_init(seed, group0 + g, offset, &s);
  out[g] = curand_uniform4(&s);
}

TEST(CudaPhilox, MatchesCurandDeviceApi) {
  REQUIRE_GPU();
  const int groups = 4096;
  DeviceBytes d(groups * sizeof(float4));
  std::vector<float4> got(groups);
  const uint64_t seeds[] = {0, 1, 0xdeadbeefcafef00dull, fresh_seed()};
  const uint64_t offsets[] = {0, 1, 2, 3, 4, 5, 1000003, 0xfffffffffffffffeull};
  const uint64_t group0s[] = {0, 0xfffffff0ull, 0x1ffffffffull, 0xfffffffffffff000ull};
  for (uint64_t seed : seeds) {
    for (uint64_t offset : offsets) {
      for (uint64_t g0 : group0s) {
        curand_uniforms<<<groups / 256, 256>>>(seed, offset, g0, groups, d.at<float4>());
        CUDA_OK(cudaGetLastError());
        CUDA_OK(cudaMemcpy(got.data(), d.p, groups * sizeof(float4), cudaMemcpyDeviceToHost));
        for (int g = 0; g < groups; ++g) {
          float u[4];
          dropout_uniforms4(seed, offset, g0 + g, u);
          const float c[4] = {got[g].x, got[g].y, got[g].z, got[g].w};
          for (int j = 0; j < 4; ++j) {
            ASSERT_EQ(std::memcmp(&u[j], &c[j], 4), 0)
                << "seed " << seed << " offset " << offset << " group " << g0 + g << " word " << j
                << ": philox.h " << u[j] << " curand " << c[j];
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace softmax_cuda_test
