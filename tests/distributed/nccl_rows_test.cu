// SPDX-License-Identifier: Apache-2.0
// softmax_rows_nccl and softmax_rows_backward_nccl.
//   NcclArguments.*   host-side checks that need no GPU (they return before touching CUDA or NCCL)
//   NcclOneRank.*     a one-rank communicator on GPU 0: the adapter must equal the unsharded call,
//                     also when captured into a CUDA graph
//   NcclMultiGpu.*    one rank per visible GPU (2 or more), one host thread each: every GPU's
//                     slice against the float64 formula and the unsharded call on the whole row
// GPU tests skip, with the reason, where no (or one) CUDA device is usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <nccl.h>
#include <softmax/softmax_nccl.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "cuda_test_support.h"
#include "reference.h"
#include "shard_cases.h"
#include "shard_check.h"

namespace {

using softmax_cuda_test::DeviceBytes;
using softmax_shard_test::Buffer;
using softmax_shard_test::Layout;

constexpr softmax_dtype kDtypes[] = {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F16, SOFTMAX_DTYPE_BF16};
constexpr int64_t kRows = 16;  // two of each special row kind (shard_cases.h)

uint64_t case_seed() {
  static const uint64_t base = softmax_test::fresh_seed();
  static uint64_t n = 0;
  return base + 0x9e3779b97f4a7c15ull * ++n;
}

softmax_options options(cudaStream_t stream, bool log_softmax, softmax_backend backend = SOFTMAX_BACKEND_CUDA) {
  softmax_options o = softmax_default_options();
  o.backend = backend;
  o.stream = stream;
  o.flags = log_softmax ? SOFTMAX_FLAG_LOG : 0u;
  return o;
}

std::string adapter_error() { return softmax_nccl_last_error(); }

// A host buffer copied to a fresh device allocation (one spare byte, so that an empty buffer
// still has a non-null address).
struct DeviceCopy {
  DeviceBytes dev;
  explicit DeviceCopy(const Buffer& b) : dev(b.bytes.size() + 1) {
    if (dev.p != nullptr) cudaMemcpy(dev.p, b.data(), b.bytes.size(), cudaMemcpyHostToDevice);
  }
};

// --- no GPU needed ------------------------------------------------------------------------------

// Never dereferenced: these calls fail (or, with rows == 0, succeed) before the communicator is used.
ncclComm_t unused_comm() {
  static int placeholder;
  return reinterpret_cast<ncclComm_t>(&placeholder);
}

TEST(NcclArguments, NullCommunicator) {
  float x = 0, y = 0;
  EXPECT_EQ(softmax_rows_nccl(&x, &y, 1, 1, SOFTMAX_DTYPE_F32, nullptr, nullptr), SOFTMAX_STATUS_NULL_POINTER);
  EXPECT_NE(adapter_error().find("comm is NULL"), std::string::npos) << adapter_error();
  EXPECT_EQ(softmax_rows_backward_nccl(&x, &x, &y, 1, 1, SOFTMAX_DTYPE_F32, nullptr, nullptr),
            SOFTMAX_STATUS_NULL_POINTER);
  EXPECT_EQ(y, 0.0f);
}

TEST(NcclArguments, NegativeRows) {
  float x = 0, y = 0;
  EXPECT_EQ(softmax_rows_nccl(&x, &y, -2, 1, SOFTMAX_DTYPE_F32, unused_comm(), nullptr), SOFTMAX_STATUS_INVALID_SIZE);
  EXPECT_NE(adapter_error().find("rows must be >= 0, got -2"), std::string::npos) << adapter_error();
  EXPECT_EQ(softmax_rows_backward_nccl(&x, &x, &y, -1, 1, SOFTMAX_DTYPE_F32, unused_comm(), nullptr),
            SOFTMAX_STATUS_INVALID_SIZE);
}

TEST(NcclArguments, NoRowsSucceedsWithoutCommunicating) {
  EXPECT_EQ(softmax_rows_nccl(nullptr, nullptr, 0, 5, SOFTMAX_DTYPE_F16, unused_comm(), nullptr),
            SOFTMAX_STATUS_SUCCESS);
  EXPECT_EQ(adapter_error(), "");
  EXPECT_EQ(softmax_rows_backward_nccl(nullptr, nullptr, nullptr, 0, 5, SOFTMAX_DTYPE_F16, unused_comm(), nullptr),
            SOFTMAX_STATUS_SUCCESS);
  EXPECT_EQ(adapter_error(), "");
}

// --- one rank on one GPU ------------------------------------------------------------------------

class NcclOneRank : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_GPU();
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ncclUniqueId id;
    ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    ASSERT_EQ(ncclCommInitRank(&comm_, 1, id, 0), ncclSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    if (comm_ != nullptr) ncclCommDestroy(comm_);
  }

  // The adapter on the whole matrix against softmax_rows on the same device.
  void check_forward(const Buffer& x_full, int64_t cols, bool log_softmax) {
    SCOPED_TRACE(std::string(softmax_test::dtype_name(x_full.dtype)) + (log_softmax ? " log" : "") + ", cols " +
                 std::to_string(cols));
    const softmax_options o = options(stream_, log_softmax);
    const size_t n = x_full.size();
    DeviceCopy x(x_full);
    DeviceBytes y_unsharded(x_full.bytes.size()), y(x_full.bytes.size());
    ASSERT_EQ(softmax_cuda_test::poison(y.p, y.bytes, stream_), cudaSuccess);
    ASSERT_EQ(softmax_rows(x.dev.p, y_unsharded.p, kRows, cols, x_full.dtype, &o), SOFTMAX_STATUS_SUCCESS)
        << softmax_last_error();
    ASSERT_EQ(softmax_rows_nccl(x.dev.p, y.p, kRows, cols, x_full.dtype, comm_, &o), SOFTMAX_STATUS_SUCCESS)
        << adapter_error();
    EXPECT_EQ(adapter_error(), "");
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    Buffer got(x_full.dtype, n), unsharded(x_full.dtype, n);
    cudaMemcpy(got.data(), y.p, got.bytes.size(), cudaMemcpyDeviceToHost);
    cudaMemcpy(unsharded.data(), y_unsharded.p, unsharded.bytes.size(), cudaMemcpyDeviceToHost);
    EXPECT_TRUE(softmax_shard_test::forward_slice_ok(x_full, unsharded, got, kRows, cols, 0, cols, log_softmax));
  }

  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

TEST_F(NcclOneRank, ForwardEqualsTheUnshardedCall) {
  for (int64_t cols : {7, 3000, 70000})
    for (softmax_dtype t : kDtypes)
      for (bool log_softmax : {false, true}) {
        check_forward(softmax_test::random_input(t, size_t(kRows * cols), case_seed()), cols, log_softmax);
        check_forward(softmax_shard_test::special_input(t, kRows, cols, case_seed()), cols, log_softmax);
      }
}

TEST_F(NcclOneRank, BackwardEqualsTheUnshardedCall) {
  for (int64_t cols : {7, 3000, 70000})
    for (softmax_dtype t : kDtypes)
      for (bool log_softmax : {false, true}) {
        SCOPED_TRACE(std::string(softmax_test::dtype_name(t)) + (log_softmax ? " log" : "") + ", cols " +
                     std::to_string(cols));
        const softmax_options o = options(stream_, log_softmax);
        const size_t n = size_t(kRows * cols);
        const Buffer x_host = softmax_test::random_input(t, n, case_seed(), 4.0f);
        const Buffer dy_host = softmax_test::random_input(t, n, case_seed(), 1.0f);
        DeviceCopy x(x_host), dy(dy_host);
        DeviceBytes y(x_host.bytes.size()), dx_unsharded(x_host.bytes.size()), dx(x_host.bytes.size());
        ASSERT_EQ(softmax_cuda_test::poison(dx.p, dx.bytes, stream_), cudaSuccess);
        ASSERT_EQ(softmax_rows(x.dev.p, y.p, kRows, cols, t, &o), SOFTMAX_STATUS_SUCCESS) << softmax_last_error();
        ASSERT_EQ(softmax_rows_backward(y.p, dy.dev.p, dx_unsharded.p, kRows, cols, t, &o), SOFTMAX_STATUS_SUCCESS)
            << softmax_last_error();
        ASSERT_EQ(softmax_rows_backward_nccl(y.p, dy.dev.p, dx.p, kRows, cols, t, comm_, &o), SOFTMAX_STATUS_SUCCESS)
            << adapter_error();
        ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
        Buffer y_host(t, n), got(t, n), unsharded(t, n);
        cudaMemcpy(y_host.data(), y.p, y_host.bytes.size(), cudaMemcpyDeviceToHost);
        cudaMemcpy(got.data(), dx.p, got.bytes.size(), cudaMemcpyDeviceToHost);
        cudaMemcpy(unsharded.data(), dx_unsharded.p, unsharded.bytes.size(), cudaMemcpyDeviceToHost);
        EXPECT_TRUE(
            softmax_shard_test::backward_slice_ok(y_host, dy_host, unsharded, got, kRows, cols, 0, cols, log_softmax));
      }
}

TEST_F(NcclOneRank, CapturedIntoACudaGraphAndReplayedOnNewInput) {
  const int64_t cols = 3000;
  const softmax_dtype t = SOFTMAX_DTYPE_BF16;
  const size_t n = size_t(kRows * cols);
  const softmax_options o = options(stream_, false);
  Buffer first = softmax_shard_test::special_input(t, kRows, cols, case_seed());
  DeviceCopy x(first);
  DeviceBytes y(first.bytes.size()), y_unsharded(first.bytes.size());

  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  const softmax_status captured = softmax_rows_nccl(x.dev.p, y.p, kRows, cols, t, comm_, &o);
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  ASSERT_EQ(captured, SOFTMAX_STATUS_SUCCESS) << adapter_error();
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);

  for (int replay = 0; replay < 2; ++replay) {
    SCOPED_TRACE("replay " + std::to_string(replay));
    const Buffer input = replay == 0 ? first : softmax_test::random_input(t, n, case_seed(), 20.0f);
    ASSERT_EQ(cudaMemcpy(x.dev.p, input.data(), input.bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(softmax_cuda_test::poison(y.p, y.bytes, stream_), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
    ASSERT_EQ(softmax_rows(x.dev.p, y_unsharded.p, kRows, cols, t, &o), SOFTMAX_STATUS_SUCCESS);
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    Buffer got(t, n), unsharded(t, n);
    cudaMemcpy(got.data(), y.p, got.bytes.size(), cudaMemcpyDeviceToHost);
    cudaMemcpy(unsharded.data(), y_unsharded.p, unsharded.bytes.size(), cudaMemcpyDeviceToHost);
    EXPECT_TRUE(softmax_shard_test::forward_slice_ok(input, unsharded, got, kRows, cols, 0, cols, false));
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

TEST_F(NcclOneRank, EmptySliceWritesNothingAndSucceeds) {
  const softmax_options o = options(stream_, false);
  EXPECT_EQ(softmax_rows_nccl(nullptr, nullptr, kRows, 0, SOFTMAX_DTYPE_F32, comm_, &o), SOFTMAX_STATUS_SUCCESS)
      << adapter_error();
  EXPECT_EQ(softmax_rows_backward_nccl(nullptr, nullptr, nullptr, kRows, 0, SOFTMAX_DTYPE_F32, comm_, &o),
            SOFTMAX_STATUS_SUCCESS)
      << adapter_error();
  EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
}

TEST_F(NcclOneRank, BadArgumentsFailBeforeAnyCollectiveAndWriteNothing) {
  const int64_t cols = 64;
  const Buffer x_host = softmax_test::random_input(SOFTMAX_DTYPE_F32, size_t(kRows * cols), case_seed());
  DeviceCopy x(x_host);
  DeviceBytes y(x_host.bytes.size());
  ASSERT_EQ(softmax_cuda_test::poison(y.p, y.bytes, stream_), cudaSuccess);
  const softmax_options o = options(stream_, false);

  EXPECT_EQ(softmax_rows_nccl(x.dev.p, nullptr, kRows, cols, SOFTMAX_DTYPE_F32, comm_, &o),
            SOFTMAX_STATUS_NULL_POINTER);
  EXPECT_NE(adapter_error().find("y is NULL"), std::string::npos) << adapter_error();
  EXPECT_EQ(softmax_rows_nccl(x.dev.p, y.p, kRows, cols, SOFTMAX_DTYPE_F64, comm_, &o), SOFTMAX_STATUS_INVALID_DTYPE);
  EXPECT_NE(adapter_error().find("softmax_row_stats"), std::string::npos) << adapter_error();
  // Host input: the statistics workspace is device memory, which the CPU backend refuses.
  EXPECT_EQ(softmax_rows_nccl(x_host.data(), y.p, kRows, cols, SOFTMAX_DTYPE_F32, comm_,
                              nullptr),
            SOFTMAX_STATUS_WRONG_MEMORY_SPACE);
  EXPECT_NE(adapter_error().find("softmax_row_stats"), std::string::npos) << adapter_error();

  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  std::vector<unsigned char> after(y.bytes), poisoned(y.bytes, 0xFF);
  cudaMemcpy(after.data(), y.p, y.bytes, cudaMemcpyDeviceToHost);
  EXPECT_TRUE(after == poisoned) << "y was written by a failed call";

  // The communicator still works: nothing was left half-enqueued.
  EXPECT_EQ(softmax_rows_nccl(x.dev.p, y.p, kRows, cols, SOFTMAX_DTYPE_F32, comm_, &o), SOFTMAX_STATUS_SUCCESS)
      << adapter_error();
  EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
}

// --- one rank per GPU ---------------------------------------------------------------------------

class NcclMultiGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_GPU();
    int n = 0;
    ASSERT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
    if (n < 2) GTEST_SKIP() << "one CUDA device visible; this test needs two or more";
    devices_.resize(size_t(n));
    for (int d = 0; d < n; ++d) devices_[size_t(d)] = d;
    comms_.resize(size_t(n));
    ASSERT_EQ(ncclCommInitAll(comms_.data(), n, devices_.data()), ncclSuccess);
  }
  void TearDown() override {
    for (ncclComm_t c : comms_)
      if (c != nullptr) ncclCommDestroy(c);
  }
  int ranks() const { return int(devices_.size()); }

  // Runs `per_rank(rank)` on one host thread per GPU (NCCL's one-thread-per-device model: the
  // adapter's collectives on different GPUs must be enqueued concurrently).
  template <class F>
  void on_every_gpu(F per_rank) {
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks(); ++r) threads.emplace_back([&, r] {
      cudaSetDevice(devices_[size_t(r)]);
      per_rank(r);
    });
    for (std::thread& t : threads) t.join();
  }

  std::vector<int> devices_;
  std::vector<ncclComm_t> comms_;
};

TEST_F(NcclMultiGpu, EverySliceMatchesTheUnshardedRow) {
  for (int64_t cols : {7, 3000, 70000})
    for (const Layout& layout : softmax_shard_test::layouts(ranks(), cols))
      for (softmax_dtype t : kDtypes)
        for (bool log_softmax : {false, true})
          for (bool special : {false, true}) {
            const Buffer x_full = special ? softmax_shard_test::special_input(t, kRows, cols, case_seed())
                                          : softmax_test::random_input(t, size_t(kRows * cols), case_seed());
            // The unsharded reference: libsoftmax's CPU backend on the whole matrix.
            Buffer y_full(t, x_full.size());
            const softmax_options cpu = options(nullptr, log_softmax, SOFTMAX_BACKEND_CPU);
            ASSERT_EQ(softmax_rows(x_full.data(), y_full.data(), kRows, cols, t, &cpu), SOFTMAX_STATUS_SUCCESS);

            std::vector<Buffer> slices(size_t(ranks()), Buffer(t, 0));
            std::vector<softmax_status> status(size_t(ranks()), SOFTMAX_STATUS_INTERNAL_ERROR);
            std::vector<std::string> messages(static_cast<size_t>(ranks()));
            on_every_gpu([&](int r) {
              const int64_t first = layout.first_col(r), width = layout.cols[size_t(r)];
              const Buffer x_host = softmax_shard_test::slice(x_full, kRows, cols, first, width);
              DeviceCopy x(x_host);
              DeviceBytes y(x_host.bytes.size() + 1);
              softmax_cuda_test::poison(y.p, y.bytes);
              const softmax_options o = options(nullptr, log_softmax);
              status[size_t(r)] = softmax_rows_nccl(width ? x.dev.p : nullptr, width ? y.p : nullptr, kRows, width,
                                                    t, comms_[size_t(r)], &o);
              messages[size_t(r)] = softmax_nccl_last_error();
              cudaDeviceSynchronize();
              slices[size_t(r)] = Buffer(t, x_host.size());
              cudaMemcpy(slices[size_t(r)].data(), y.p, slices[size_t(r)].bytes.size(), cudaMemcpyDeviceToHost);
            });
            for (int r = 0; r < ranks(); ++r) {
              SCOPED_TRACE(layout.name + ", " + softmax_test::dtype_name(t) + (log_softmax ? " log" : "") +
                           (special ? ", special rows" : ", random") + ", cols " + std::to_string(cols) +
                           ", GPU " + std::to_string(r));
              ASSERT_EQ(status[size_t(r)], SOFTMAX_STATUS_SUCCESS) << messages[size_t(r)];
              EXPECT_TRUE(softmax_shard_test::forward_slice_ok(x_full, y_full, slices[size_t(r)], kRows, cols,
                                                               layout.first_col(r), layout.cols[size_t(r)],
                                                               log_softmax));
            }
          }
}

TEST_F(NcclMultiGpu, EveryGradientSliceMatchesTheUnshardedRow) {
  for (int64_t cols : {7, 3000, 70000})
    for (const Layout& layout : softmax_shard_test::layouts(ranks(), cols))
      for (softmax_dtype t : kDtypes)
        for (bool log_softmax : {false, true}) {
          const softmax_options cpu = options(nullptr, log_softmax, SOFTMAX_BACKEND_CPU);
          const Buffer x_full = softmax_test::random_input(t, size_t(kRows * cols), case_seed(), 4.0f);
          const Buffer dy_full = softmax_test::random_input(t, size_t(kRows * cols), case_seed(), 1.0f);
          Buffer y_full(t, x_full.size()), dx_full(t, x_full.size());
          ASSERT_EQ(softmax_rows(x_full.data(), y_full.data(), kRows, cols, t, &cpu), SOFTMAX_STATUS_SUCCESS);
          ASSERT_EQ(softmax_rows_backward(y_full.data(), dy_full.data(), dx_full.data(), kRows, cols, t, &cpu),
                    SOFTMAX_STATUS_SUCCESS);

          std::vector<Buffer> slices(size_t(ranks()), Buffer(t, 0));
          std::vector<softmax_status> status(size_t(ranks()), SOFTMAX_STATUS_INTERNAL_ERROR);
          std::vector<std::string> messages(static_cast<size_t>(ranks()));
          on_every_gpu([&](int r) {
            const int64_t first = layout.first_col(r), width = layout.cols[size_t(r)];
            DeviceCopy y(softmax_shard_test::slice(y_full, kRows, cols, first, width));
            DeviceCopy dy(softmax_shard_test::slice(dy_full, kRows, cols, first, width));
            DeviceBytes dx(size_t(kRows * width) * softmax_test::element_size(t) + 1);
            softmax_cuda_test::poison(dx.p, dx.bytes);
            const softmax_options o = options(nullptr, log_softmax);
            status[size_t(r)] = softmax_rows_backward_nccl(width ? y.dev.p : nullptr, width ? dy.dev.p : nullptr,
                                                           width ? dx.p : nullptr, kRows, width, t,
                                                           comms_[size_t(r)], &o);
            messages[size_t(r)] = softmax_nccl_last_error();
            cudaDeviceSynchronize();
            slices[size_t(r)] = Buffer(t, size_t(kRows * width));
            cudaMemcpy(slices[size_t(r)].data(), dx.p, slices[size_t(r)].bytes.size(), cudaMemcpyDeviceToHost);
          });
          for (int r = 0; r < ranks(); ++r) {
            SCOPED_TRACE(layout.name + ", " + softmax_test::dtype_name(t) + (log_softmax ? " log" : "") + ", cols " +
                         std::to_string(cols) + ", GPU " + std::to_string(r));
            ASSERT_EQ(status[size_t(r)], SOFTMAX_STATUS_SUCCESS) << messages[size_t(r)];
            EXPECT_TRUE(softmax_shard_test::backward_slice_ok(y_full, dy_full, dx_full, slices[size_t(r)], kRows, cols,
                                                              layout.first_col(r), layout.cols[size_t(r)],
                                                              log_softmax));
          }
        }
}

}  // namespace
