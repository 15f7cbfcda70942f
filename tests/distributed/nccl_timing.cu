// SPDX-License-Identifier: Apache-2.0
// Times softmax_rows_nccl against what it is made of, on every visible GPU (one rank and one host
// thread per GPU, communicators from ncclCommInitAll):
//   adapter      softmax_rows_nccl on a [rows, cols / ranks] slice
//   graph        the same call captured once into a CUDA graph, then replayed
//   parts        softmax_rows on the same slice plus two ncclAllReduce of `rows` floats: the
//                floor any sharded softmax pays (local pass over the data, two reductions)
// and prints one line per shape with rank 0's mean time per call (the collectives keep the
// ranks in step). Not a ctest test: run it on a GPU machine,
//   nccl_timing [iterations]        (default 50; CUDA_VISIBLE_DEVICES picks the GPUs)
#include <cuda_runtime.h>
#include <nccl.h>
#include <softmax/softmax_nccl.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Shape {
  int64_t rows;
  int64_t cols;  // whole rows; each rank holds cols / ranks
  softmax_dtype dtype;
};

const char* dtype_name(softmax_dtype t) {
  return t == SOFTMAX_DTYPE_F32 ? "f32" : t == SOFTMAX_DTYPE_F16 ? "f16" : "bf16";
}

bool check_cuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  return false;
}

struct Times {
  double adapter_us = 0, graph_us = 0, parts_us = 0;
  bool ok = false;
};

// One rank's measurements of one shape; the same sequence of collectives runs on every rank.
Times time_rank(int device, ncclComm_t comm, const Shape& s, int ranks, int iterations) {
  Times t;
  if (!check_cuda(cudaSetDevice(device), "cudaSetDevice")) return t;
  const int64_t local_cols = s.cols / ranks;
  const size_t esize = s.dtype == SOFTMAX_DTYPE_F32 ? 4 : 2;
  const size_t bytes = size_t(s.rows * local_cols) * esize;
  cudaStream_t stream = nullptr;
  void *x = nullptr, *y = nullptr;
  float* stats = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  if (!check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate") ||
      !check_cuda(cudaMalloc(&x, bytes), "cudaMalloc x") || !check_cuda(cudaMalloc(&y, bytes), "cudaMalloc y") ||
      !check_cuda(cudaMalloc(&stats, 2 * size_t(s.rows) * sizeof(float)), "cudaMalloc stats") ||
      !check_cuda(cudaEventCreate(&start), "cudaEventCreate") || !check_cuda(cudaEventCreate(&stop), "cudaEventCreate"))
    return t;
  cudaMemsetAsync(x, 0x3c, bytes, stream);  // finite values in every dtype
  cudaMemsetAsync(stats, 0, 2 * size_t(s.rows) * sizeof(float), stream);
  softmax_options o = softmax_default_options();
  o.backend = SOFTMAX_BACKEND_CUDA;
  o.stream = stream;

  auto adapter = [&] { return softmax_rows_nccl(x, y, s.rows, local_cols, s.dtype, comm, &o); };
  auto parts = [&] {
    softmax_status st = softmax_rows(x, y, s.rows, local_cols, s.dtype, &o);
    ncclAllReduce(stats, stats, size_t(s.rows), ncclFloat, ncclMax, comm, stream);
    ncclAllReduce(stats + s.rows, stats + s.rows, size_t(s.rows), ncclFloat, ncclSum, comm, stream);
    return st;
  };
  // Mean microseconds per call over `iterations` calls, after a warm-up of the same length.
  auto measure = [&](auto&& call, double* us) {
    for (int i = 0; i < iterations; ++i)
      if (call() != SOFTMAX_STATUS_SUCCESS) return false;
    cudaEventRecord(start, stream);
    for (int i = 0; i < iterations; ++i) call();
    cudaEventRecord(stop, stream);
    if (!check_cuda(cudaEventSynchronize(stop), "timed loop")) return false;
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    *us = 1000.0 * ms / iterations;
    return true;
  };

  bool ok = measure(adapter, &t.adapter_us) && measure(parts, &t.parts_us);
  if (ok) {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
    const softmax_status captured = adapter();
    ok = check_cuda(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture") &&
         captured == SOFTMAX_STATUS_SUCCESS && check_cuda(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
    if (ok) {
      ok = measure([&] { return cudaGraphLaunch(exec, stream) == cudaSuccess ? SOFTMAX_STATUS_SUCCESS
                                                                              : SOFTMAX_STATUS_CUDA_ERROR; },
                   &t.graph_us);
    }
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
  }
  if (!ok) std::fprintf(stderr, "GPU %d: %s\n", device, softmax_nccl_last_error());
  t.ok = ok;
  cudaFree(x);
  cudaFree(y);
  cudaFree(stats);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 50;
  int ranks = 0;
  if (cudaGetDeviceCount(&ranks) != cudaSuccess || ranks == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return 77;
  }
  std::vector<int> devices(static_cast<size_t>(ranks));
  for (int d = 0; d < ranks; ++d) devices[size_t(d)] = d;
  std::vector<ncclComm_t> comms(static_cast<size_t>(ranks));
  if (ncclCommInitAll(comms.data(), ranks, devices.data()) != ncclSuccess) {
    std::fprintf(stderr, "ncclCommInitAll failed\n");
    return 1;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("softmax_rows_nccl on %d x %s, NCCL %d.%d.%d, %d iterations, mean per call on rank 0\n", ranks,
              prop.name, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, iterations);
  std::printf("%-7s %7s %8s %10s | %11s %11s %11s | %13s\n", "dtype", "rows", "cols", "cols/rank", "adapter us",
              "graph us", "parts us", "adapter/parts");

  const Shape shapes[] = {{4096, 8192, SOFTMAX_DTYPE_F32},  {4096, 8192, SOFTMAX_DTYPE_BF16},
                          {16384, 2048, SOFTMAX_DTYPE_BF16}, {1024, 65536, SOFTMAX_DTYPE_F32},
                          {256, 262144, SOFTMAX_DTYPE_BF16}, {32, 1048576, SOFTMAX_DTYPE_F32},
                          {8, 4096, SOFTMAX_DTYPE_F32}};
  int failures = 0;
  for (const Shape& s : shapes) {
    std::vector<Times> times(static_cast<size_t>(ranks));
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; ++r)
      threads.emplace_back([&, r] { times[size_t(r)] = time_rank(devices[size_t(r)], comms[size_t(r)], s, ranks, iterations); });
    for (std::thread& t : threads) t.join();
    const Times& t = times[0];
    if (!t.ok) {
      ++failures;
      std::printf("%-7s %7lld %8lld %10lld | failed\n", dtype_name(s.dtype), (long long)s.rows, (long long)s.cols,
                  (long long)(s.cols / ranks));
      continue;
    }
    std::printf("%-7s %7lld %8lld %10lld | %11.1f %11.1f %11.1f | %13.2f\n", dtype_name(s.dtype), (long long)s.rows,
                (long long)s.cols, (long long)(s.cols / ranks), t.adapter_us, t.graph_us, t.parts_us,
                t.adapter_us / t.parts_us);
  }
  for (ncclComm_t c : comms) ncclCommDestroy(c);
  return failures == 0 ? 0 : 1;
}
