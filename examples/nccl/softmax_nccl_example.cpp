// SPDX-License-Identifier: Apache-2.0
// Softmax over rows whose columns are split across GPUs: one NCCL rank and one host thread per
// visible GPU, each holding its own columns of a [kRows, kCols] matrix in device memory.
// softmax_rows_nccl normalises whole rows on each GPU's stream; every GPU's slice is then checked
// against softmax_rows on the full matrix (on the CPU), and the slices of each row add up to 1.
// With one GPU it runs as a one-rank communicator. Exits with 77 where no GPU is visible.
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <softmax/softmax_nccl.h>

#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>

constexpr int kRows = 4;
constexpr int kCols = 1000;

// The full matrix, which every thread can compute.
static float full_x(int r, int c) { return 6.0f * std::sin(0.37f * c + r); }

int main() {
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
    std::printf("no CUDA device visible: nothing to run\n");
    return 77;
  }
  std::vector<int> devices(gpus);
  for (int d = 0; d < gpus; ++d) devices[d] = d;
  std::vector<ncclComm_t> comms(gpus);
  if (ncclCommInitAll(comms.data(), gpus, devices.data()) != ncclSuccess) {
    std::fprintf(stderr, "ncclCommInitAll failed\n");
    return 1;
  }

  // Each GPU's columns [first, first + width), and its result copied back.
  std::vector<std::vector<float>> slices(gpus);
  std::vector<int> failed(gpus, 0);
  std::vector<std::thread> threads;
  for (int g = 0; g < gpus; ++g) {
    threads.emplace_back([&, g] {
      cudaSetDevice(devices[g]);
      const int first = kCols * g / gpus, width = kCols * (g + 1) / gpus - first;
      std::vector<float> x(size_t(kRows) * width);
      for (int r = 0; r < kRows; ++r)
        for (int c = 0; c < width; ++c) x[size_t(r) * width + c] = full_x(r, first + c);
      cudaStream_t stream;
      cudaStreamCreate(&stream);
      float *dx = nullptr, *dy = nullptr;
      cudaMalloc(&dx, x.size() * sizeof(float) + 1);
      cudaMalloc(&dy, x.size() * sizeof(float) + 1);
      cudaMemcpy(dx, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice);

      softmax_options o = softmax_default_options();
      o.stream = stream;  // asynchronous on this stream, like any NCCL collective
      const softmax_status s = softmax_rows_nccl(dx, dy, kRows, width, SOFTMAX_DTYPE_F32, comms[g], &o);
      if (s != SOFTMAX_STATUS_SUCCESS) {
        std::fprintf(stderr, "GPU %d: %s: %s\n", g, softmax_status_string(s), softmax_nccl_last_error());
        failed[g] = 1;
      }
      cudaStreamSynchronize(stream);
      slices[g].resize(x.size());
      cudaMemcpy(slices[g].data(), dy, x.size() * sizeof(float), cudaMemcpyDeviceToHost);
      cudaFree(dx);
      cudaFree(dy);
      cudaStreamDestroy(stream);
    });
  }
  for (std::thread& t : threads) t.join();
  for (ncclComm_t c : comms) ncclCommDestroy(c);

  // The unsharded softmax of the full matrix, on the CPU, against every slice.
  std::vector<float> fx(size_t(kRows) * kCols), fy(fx.size());
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kCols; ++c) fx[size_t(r) * kCols + c] = full_x(r, c);
  softmax_options cpu = softmax_default_options();
  cpu.backend = SOFTMAX_BACKEND_CPU;
  if (softmax_rows(fx.data(), fy.data(), kRows, kCols, SOFTMAX_DTYPE_F32, &cpu) != SOFTMAX_STATUS_SUCCESS) return 1;
  double worst = 0.0, sums[kRows] = {0};
  bool ok = true;
  for (int g = 0; g < gpus; ++g) {
    ok = ok && !failed[g];
    const int first = kCols * g / gpus, width = kCols * (g + 1) / gpus - first;
    for (int r = 0; r < kRows; ++r)
      for (int c = 0; c < width; ++c) {
        const float got = slices[g][size_t(r) * width + c];
        worst = std::fmax(worst, std::fabs(got - fy[size_t(r) * kCols + first + c]));
        sums[r] += got;
      }
  }
  std::printf("%d GPU(s): largest difference from the unsharded softmax %.2g; row sums %.6f %.6f %.6f %.6f\n", gpus,
              worst, sums[0], sums[1], sums[2], sums[3]);
  for (double s : sums) ok = ok && std::fabs(s - 1.0) <= 1e-5;
  ok = ok && worst <= 1e-6;
  std::printf(ok ? "NCCL example OK\n" : "NCCL example FAILED\n");
  return ok ? 0 : 1;
}
