// SPDX-License-Identifier: Apache-2.0
// A small timing program for the CPU backend (not a test, not the team's bench): GB/s
// (8 bytes per fp32 element, read x + write y) for the shapes at 256 MiB, and the
// relative error of the single 64M-element row against a float64 reference.
//   softmax_cpu_timing [threads=2] [repeats=5] [shape filter substring] [log2 elements=26]
// Besides wall-clock GB/s it prints "cpu" GB/s from the process CPU time divided by the thread
// count: on a machine shared with other jobs that estimates the uncontended rate (run with
// OMP_WAIT_POLICY=passive so waiting threads do not burn CPU time).
// With fewer elements (e.g. 18) the rows of each shape shrink so the data stays in cache: that
// shows the kernels' compute rate apart from memory.
#include <softmax/softmax.h>

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

static double process_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  const std::string filter = argc > 3 ? argv[3] : "";
  int64_t shapes[][2] = {{2097152, 32}, {524288, 128}, {65536, 1024}, {16384, 4096},
                               {2048, 32768}, {64, 1048576}, {1, 67108864}};
  const int log2n = argc > 4 ? std::atoi(argv[4]) : 26;
  const size_t n = size_t{1} << log2n;
  std::vector<float> x(n), y(n);
  std::mt19937 rng(12345);
  std::uniform_real_distribution<float> dist(-8.0f, 8.0f);
  for (auto& v : x) v = dist(rng);
  softmax_options opt = softmax_default_options();
  opt.backend = SOFTMAX_BACKEND_CPU;
  opt.num_threads = threads;
  // Copy rate of the same bytes, same threads, for reference.
  {
    double best = 1e9;
    for (int r = 0; r < repeats; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for num_threads(threads) schedule(static)
      for (int b = 0; b < 64; ++b) std::memcpy(y.data() + b * (n / 64), x.data() + b * (n / 64), n / 64 * 4);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::printf("%-14s %8.2f ms %7.1f GB/s\n", "memcpy", best * 1e3, 8.0 * n / best / 1e9);
  }
  for (const auto& shape : shapes) {
    int64_t s[2] = {shape[0], shape[1]};
    while (s[0] > 1 && size_t(s[0] * s[1]) > n) s[0] /= 2;
    if (size_t(s[0] * s[1]) != n) s[1] = int64_t(n) / s[0];
    const std::string name = std::to_string(s[0]) + "x" + std::to_string(s[1]);
    if (!filter.empty() && name.find(filter) == std::string::npos) continue;
    for (int log = 0; log < 2; ++log) {
      double best = 1e9, best_cpu = 1e9;
      for (int r = 0; r < repeats; ++r) {
        opt.flags = log ? SOFTMAX_FLAG_LOG : 0;
        const double c0 = process_cpu_seconds();
        const auto t0 = std::chrono::steady_clock::now();
        const softmax_status st = softmax_rows(x.data(), y.data(), s[0], s[1], SOFTMAX_DTYPE_F32, &opt);
        const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (st != SOFTMAX_STATUS_SUCCESS) {
          std::printf("error %s\n", softmax_last_error());
          return 1;
        }
        best = std::min(best, t);
        best_cpu = std::min(best_cpu, (process_cpu_seconds() - c0) / threads);
      }
      std::printf("%-14s %s %8.2f ms %7.1f GB/s   cpu %7.1f GB/s\n", name.c_str(), log ? "log " : "soft",
                  best * 1e3, 8.0 * n / best / 1e9, 8.0 * n / best_cpu / 1e9);
    }
    {
      // Fused softmax + dropout (p = 0.1) with the uint8 mask written too.
      std::vector<uint8_t> mask(n);
      opt.flags = 0;
      double best = 1e9;
      for (int r = 0; r < repeats; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        softmax_dropout(x.data(), y.data(), mask.data(), s[0], s[1], SOFTMAX_DTYPE_F32, 0.1f, 42, 0, &opt);
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      std::printf("%-14s drop %8.2f ms %7.1f GB/s (x + y; the mask adds 1 byte per element)\n", name.c_str(),
                  best * 1e3, 8.0 * n / best / 1e9);
    }
    if (s[0] == 1) {
      opt.flags = 0;
      softmax_rows(x.data(), y.data(), 1, int64_t(n), SOFTMAX_DTYPE_F32, &opt);
      double m = -INFINITY, sum = 0, worst = 0, ysum = 0;
      for (float v : x) m = std::max(m, double(v));
      for (float v : x) sum += std::exp(double(v) - m);
      for (size_t i = 0; i < n; ++i) {
        const double ref = std::exp(double(x[i]) - m) / sum;
        worst = std::max(worst, std::fabs(y[i] - ref) / ref);
        ysum += y[i];
      }
      std::printf("1x%zu max relative error %.3g, sum(y) - 1 = %.3g\n", n, worst, ysum - 1.0);
    }
  }
  return 0;
}
