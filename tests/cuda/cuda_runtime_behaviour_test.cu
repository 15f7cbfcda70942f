// SPDX-License-Identifier: Apache-2.0
// How the CUDA backend behaves as part of a program: concurrent calls from several host threads
// on several streams, capture into a CUDA graph and replay, AUTO choosing CUDA for device
// memory, host memory refused by SOFTMAX_BACKEND_CUDA, pinned, managed and stream-ordered memory
// accepted, and the caller's current device left alone.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "cuda_test_support.h"

namespace softmax_cuda_test {
namespace {

// Each thread owns a stream and a few problems of different strategies; every call is checked.
// Split rows run as cooperative launches, several of them at once on the threads' streams.
TEST(CudaRuntime, ConcurrentThreadsAndStreams) {
  REQUIRE_GPU();
  SKIP_UNDER_FORCED_STRATEGY();
  constexpr int kThreads = 6, kIters = 6;
  const std::pair<size_t, size_t> shapes[] = {{2049, 33}, {301, 1000}, {97, 6000},
                                              {37, 40000}, {3, 150001}, {5, 300001}};
  constexpr int kShapes = int(sizeof(shapes) / sizeof(shapes[0]));
  std::atomic<int> failures{0};
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([&, t] {
      cudaStream_t s;
      if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
        ++failures;
        errors[t] = "cudaStreamCreate failed";
        return;
      }
      for (int it = 0; it < kIters; ++it) {
        const auto [rows, cols] = shapes[(t + it) % kShapes];
        const softmax_dtype dt = (t + it) % 3 == 0 ? SOFTMAX_DTYPE_BF16 : SOFTMAX_DTYPE_F32;
        const bool log_softmax = it % 2 == 1;
        const size_t n = rows * cols, es = element_size(dt);
        const uint64_t seed = fresh_seed();
        const Buffer x = random_input(dt, n, seed);
        DeviceBytes dx(n * es), dy(n * es);
        Buffer y(dt, n);
        const softmax_options o = cuda_options(s, log_softmax ? SOFTMAX_FLAG_LOG : 0u);
        bool ok = dx.p && dy.p &&
                  cudaMemcpyAsync(dx.p, x.data(), n * es, cudaMemcpyHostToDevice, s) == cudaSuccess &&
                  poison(dy.p, n * es, s) == cudaSuccess;
        const softmax_status st = ok ? softmax_rows(dx.p, dy.p, rows, cols, dt, &o) : SOFTMAX_STATUS_INTERNAL_ERROR;
        ok = ok && st == SOFTMAX_STATUS_SUCCESS &&
             cudaMemcpyAsync(y.data(), dy.p, n * es, cudaMemcpyDeviceToHost, s) == cudaSuccess &&
             cudaStreamSynchronize(s) == cudaSuccess;
        const auto check = ok ? rows_match_reference(x, y, rows, cols, log_softmax, rows_to_check(rows, cols, seed))
                              : ::testing::AssertionFailure() << "call failed: " << softmax_last_error();
        if (!check) {
          ++failures;
          errors[t] = check.message();
          break;
        }
      }
      cudaStreamDestroy(s);
    });
  }
  for (auto& th : pool) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_TRUE(errors[t].empty()) << "thread " << t << ": " << errors[t];
  EXPECT_EQ(failures.load(), 0);
}

// softmax_rows and softmax_dropout captured into one graph (including the split-row path,
// whose workspace is a stream-ordered allocation), replayed on two different inputs.
TEST(CudaRuntime, GraphCaptureAndReplay) {
  REQUIRE_GPU();
  SKIP_UNDER_FORCED_STRATEGY();
  const std::pair<size_t, size_t> shapes[] = {{1001, 64}, {65, 5000}, {33, 40000}, {2, 300000}};
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (auto [rows, cols] : shapes) {
    SCOPED_TRACE(::testing::Message() << rows << "x" << cols);
    const size_t n = rows * cols;
    DeviceBytes dx(n * 4), dy(n * 4), dz(n * 4), dm(n);
    const softmax_options o = cuda_options(s);
    cudaGraph_t graph;
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    const softmax_status a = softmax_rows(dx.p, dy.p, rows, cols, SOFTMAX_DTYPE_F32, &o);
    const softmax_status b =
        softmax_dropout(dx.p, dz.p, dm.at<uint8_t>(), rows, cols, SOFTMAX_DTYPE_F32, 0.3f, 77, 5, &o);
    CUDA_OK(cudaStreamEndCapture(s, &graph));
    ASSERT_EQ(a, SOFTMAX_STATUS_SUCCESS) << softmax_last_error();
    ASSERT_EQ(b, SOFTMAX_STATUS_SUCCESS) << softmax_last_error();
    cudaGraphExec_t exec;
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    for (int replay = 0; replay < 2; ++replay) {
      const uint64_t seed = fresh_seed();
      const Buffer x = random_input(SOFTMAX_DTYPE_F32, n, seed);
      CUDA_OK(cudaMemcpyAsync(dx.p, x.data(), n * 4, cudaMemcpyHostToDevice, s));
      CUDA_OK(poison(dy.p, n * 4, s));
      CUDA_OK(poison(dz.p, n * 4, s));
      CUDA_OK(cudaGraphLaunch(exec, s));
      Buffer y(SOFTMAX_DTYPE_F32, n), z(SOFTMAX_DTYPE_F32, n);
      std::vector<uint8_t> mask(n);
      CUDA_OK(cudaMemcpyAsync(y.data(), dy.p, n * 4, cudaMemcpyDeviceToHost, s));
      CUDA_OK(cudaMemcpyAsync(z.data(), dz.p, n * 4, cudaMemcpyDeviceToHost, s));
      CUDA_OK(cudaMemcpyAsync(mask.data(), dm.p, n, cudaMemcpyDeviceToHost, s));
      CUDA_OK(cudaStreamSynchronize(s));
      const auto which = rows_to_check(rows, cols, seed);
      EXPECT_TRUE(rows_match_reference(x, y, rows, cols, false, which));
      std::vector<double> ref;
      const double scale = softmax_internal::dropout_scale(0.3f);
      for (size_t r : which) {
        reference_row(x, r, cols, false, &ref);
        for (size_t c = 0; c < cols; ++c) {
          const size_t i = r * cols + c;
          ASSERT_EQ(mask[i], softmax_internal::dropout_keep(77, 5, i, 0.3f) ? 1 : 0) << i;
          const double want = mask[i] ? ref[c] * scale : 0.0;
          ASSERT_TRUE(close(SOFTMAX_DTYPE_F32, z.get(i), want, false, cols)) << i;
        }
      }
    }
    CUDA_OK(cudaGraphExecDestroy(exec));
    CUDA_OK(cudaGraphDestroy(graph));
  }
  CUDA_OK(cudaStreamDestroy(s));
}

// Memory from cudaMallocAsync on the caller's stream, used before the stream has reached the
// allocation (a host function holds the stream), and memory a graph allocates while it is being
// captured: both are device memory, so the CUDA backend must take them. (The H200's driver already
// reports the first as device memory; the runtime calls the second unregistered, which only the
// capture graph's allocation nodes tell apart from host memory.)
TEST(CudaRuntime, StreamOrderedAllocations) {
  REQUIRE_GPU();
  SKIP_UNDER_FORCED_STRATEGY();
  const size_t rows = 257, cols = 3000, n = rows * cols;
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float* host = nullptr;  // pinned, so the graph may copy into it
  CUDA_OK(cudaMallocHost(&host, 2 * n * 4));
  for (const bool captured : {false, true}) {
    SCOPED_TRACE(captured ? "allocated in a captured graph" : "allocated ahead of the stream");
    const uint64_t seed = fresh_seed();
    const Buffer x = random_input(SOFTMAX_DTYPE_F32, n, seed);
    std::memcpy(host, x.data(), n * 4);
    std::memset(host + n, 0xFF, n * 4);
    static std::atomic<bool> release;  // outlives the host function even if a check below fails
    release = false;
    cudaGraph_t graph = nullptr;
    if (captured) {
      CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    } else {
      // Waits (at most 10 s) until the call below has been made.
      CUDA_OK(cudaLaunchHostFunc(
          s,
          [](void* flag) {
            auto* f = static_cast<std::atomic<bool>*>(flag);
            for (int i = 0; i < 10000 && !f->load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
          },
          &release));
    }
    void *dx = nullptr, *dy = nullptr;
    CUDA_OK(cudaMallocAsync(&dx, n * 4, s));
    CUDA_OK(cudaMallocAsync(&dy, n * 4, s));
    CUDA_OK(cudaMemcpyAsync(dx, host, n * 4, cudaMemcpyHostToDevice, s));
    CUDA_OK(poison(dy, n * 4, s));
    const softmax_options o = cuda_options(s);
    const softmax_status st = softmax_rows(dx, dy, rows, cols, SOFTMAX_DTYPE_F32, &o);
    const std::string why = softmax_last_error();
    CUDA_OK(cudaMemcpyAsync(host + n, dy, n * 4, cudaMemcpyDeviceToHost, s));
    CUDA_OK(cudaFreeAsync(dx, s));
    CUDA_OK(cudaFreeAsync(dy, s));
    if (captured) {
      CUDA_OK(cudaStreamEndCapture(s, &graph));
      cudaGraphExec_t exec;
      CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
      CUDA_OK(cudaGraphLaunch(exec, s));
      CUDA_OK(cudaStreamSynchronize(s));
      CUDA_OK(cudaGraphExecDestroy(exec));
      CUDA_OK(cudaGraphDestroy(graph));
    } else {
      release = true;
      CUDA_OK(cudaStreamSynchronize(s));
    }
    ASSERT_EQ(st, SOFTMAX_STATUS_SUCCESS) << why;
    Buffer y(SOFTMAX_DTYPE_F32, n);
    std::memcpy(y.data(), host + n, n * 4);
    EXPECT_TRUE(rows_match_reference(x, y, rows, cols, false, rows_to_check(rows, cols, seed)));
  }
  CUDA_OK(cudaFreeHost(host));
  CUDA_OK(cudaStreamDestroy(s));
}

TEST(CudaRuntime, AutoPicksCudaForDevicePointers) {
  REQUIRE_GPU();
  SKIP_UNDER_FORCED_STRATEGY();
  EXPECT_EQ(softmax_backend_available(SOFTMAX_BACKEND_CUDA), 1);
  const size_t rows = 513, cols = 700, n = rows * cols;
  const uint64_t seed = fresh_seed();
  const Buffer x = random_input(SOFTMAX_DTYPE_F32, n, seed);
  DeviceBytes dx(n * 4), dy(n * 4);
  CUDA_OK(cudaMemcpy(dx.p, x.data(), n * 4, cudaMemcpyHostToDevice));
  CUDA_OK(poison(dy.p, n * 4));
  // NULL options: AUTO on the legacy default stream. The CPU backend could not touch device
  // memory, so a correct result means CUDA ran it.
  ASSERT_EQ(softmax_rows(dx.p, dy.p, rows, cols, SOFTMAX_DTYPE_F32, nullptr), SOFTMAX_STATUS_SUCCESS)
      << softmax_last_error();
  Buffer y(SOFTMAX_DTYPE_F32, n);
  CUDA_OK(cudaMemcpy(y.data(), dy.p, n * 4, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(rows_match_reference(x, y, rows, cols, false, rows_to_check(rows, cols, seed)));
}

TEST(CudaRuntime, HostPointerToCudaBackendIsWrongMemorySpace) {
  REQUIRE_GPU();
  std::vector<float> host(64, 1.0f);
  DeviceBytes dy(64 * 4);
  const softmax_options o = cuda_options();
  EXPECT_EQ(softmax_rows(host.data(), dy.p, 8, 8, SOFTMAX_DTYPE_F32, &o), SOFTMAX_STATUS_WRONG_MEMORY_SPACE);
  EXPECT_NE(std::string(softmax_last_error()), "");
  EXPECT_EQ(softmax_rows(dy.p, host.data(), 8, 8, SOFTMAX_DTYPE_F32, &o), SOFTMAX_STATUS_WRONG_MEMORY_SPACE);
  std::vector<uint8_t> mask(64);
  DeviceBytes dx(64 * 4);
  EXPECT_EQ(softmax_dropout(dx.p, dy.p, mask.data(), 8, 8, SOFTMAX_DTYPE_F32, 0.5f, 1, 0, &o),
            SOFTMAX_STATUS_WRONG_MEMORY_SPACE);
  // And the CPU backend refuses device memory.
  softmax_options c = softmax_default_options();
  c.backend = SOFTMAX_BACKEND_CPU;
  EXPECT_EQ(softmax_rows(dx.p, dy.p, 8, 8, SOFTMAX_DTYPE_F32, &c), SOFTMAX_STATUS_WRONG_MEMORY_SPACE);
  // No CUDA error may stay behind for the next runtime caller.
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(CudaRuntime, PinnedAndManagedMemoryAccepted) {
  REQUIRE_GPU();
  SKIP_UNDER_FORCED_STRATEGY();
  const size_t rows = 129, cols = 3000, n = rows * cols;
  const uint64_t seed = fresh_seed();
  const Buffer x = random_input(SOFTMAX_DTYPE_F32, n, seed);
  float *pinned_x = nullptr, *pinned_y = nullptr, *managed_y = nullptr;
  CUDA_OK(cudaMallocHost(&pinned_x, n * 4));
  CUDA_OK(cudaMallocHost(&pinned_y, n * 4));
  CUDA_OK(cudaMallocManaged(&managed_y, n * 4));
  std::memcpy(pinned_x, x.data(), n * 4);
  for (float* y : {pinned_y, managed_y}) {
    std::memset(y, 0xFF, n * 4);
    const softmax_options o = cuda_options();
    ASSERT_EQ(softmax_rows(pinned_x, y, rows, cols, SOFTMAX_DTYPE_F32, &o), SOFTMAX_STATUS_SUCCESS)
        << softmax_last_error();
    CUDA_OK(cudaDeviceSynchronize());
    Buffer yb(SOFTMAX_DTYPE_F32, n);
    std::memcpy(yb.data(), y, n * 4);
    EXPECT_TRUE(rows_match_reference(x, yb, rows, cols, false, rows_to_check(rows, cols, seed)));
  }
  cudaFreeHost(pinned_x);
  cudaFreeHost(pinned_y);
  cudaFree(managed_y);
}

TEST(CudaRuntime, CurrentDeviceUnchanged) {
  REQUIRE_GPU();
  SKIP_UNDER_FORCED_STRATEGY();
  int n = 0;
  CUDA_OK(cudaGetDeviceCount(&n));
  int before = -1, after = -2;
  CUDA_OK(cudaGetDevice(&before));
  // With several GPUs, data on the last one while another is current.
  const int target = n - 1;
  CUDA_OK(cudaSetDevice(target));
  DeviceBytes dx(4096 * 4), dy(4096 * 4);
  CUDA_OK(cudaSetDevice(0));
  const Buffer x = random_input(SOFTMAX_DTYPE_F32, 4096, fresh_seed());
  CUDA_OK(cudaMemcpy(dx.p, x.data(), 4096 * 4, cudaMemcpyDefault));
  const softmax_options o = cuda_options();
  ASSERT_EQ(softmax_rows(dx.p, dy.p, 4, 1024, SOFTMAX_DTYPE_F32, &o), SOFTMAX_STATUS_SUCCESS) << softmax_last_error();
  CUDA_OK(cudaGetDevice(&after));
  EXPECT_EQ(after, 0);
  CUDA_OK(cudaSetDevice(target));
  CUDA_OK(cudaDeviceSynchronize());
  Buffer y(SOFTMAX_DTYPE_F32, 4096);
  CUDA_OK(cudaMemcpy(y.data(), dy.p, 4096 * 4, cudaMemcpyDefault));
  EXPECT_TRUE(rows_match_reference(x, y, 4, 1024, false, {0, 1, 2, 3}));
  CUDA_OK(cudaSetDevice(before));
}

}  // namespace
}  // namespace softmax_cuda_test
