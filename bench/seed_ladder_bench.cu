// SPDX-License-Identifier: Apache-2.0
// The seed article's ladder on ONE fp32 vector of 2^20 elements (seed 000): 01 one thread,
// 02 one block with __shfl_down_sync, 03 float4, then the library on the same vector, all timed
// in this run.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>

#include "cuda_harness.h"
#include "cuda_parts.h"
#include "ladder/seed_ladder.h"
#include "timing.h"

namespace bench {
namespace {

// Microseconds of the host's time per call, calls issued back to back in rounds of 100 (the
// stream's queue then never makes the host wait) with the stream drained between rounds; the
// median round. A one-row call moves a few MiB, so where the host needs longer to issue it than
// the GPU to run it, calls back to back run at the host's pace. `call(i)` says whether the call
// was accepted; NaN if one was not.
template <class Call>
double host_us_per_call(Call&& call, cudaStream_t stream) {
  constexpr int kCalls = 100, kRounds = 15;
  std::vector<double> us;
  bool ok = true;
  for (int r = 0; r < kRounds; ++r) {
    BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
    const std::vector<double> ms = time_host_ms([&] { for (int i = 0; i < kCalls; ++i) ok &= call(i); }, 0, 1);
    us.push_back(ms[0] * 1000.0 / kCalls);
  }
  BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
  return ok ? median(us) : NAN;
}

}  // namespace

void run_seed_ladder(const Options& o, Report* report, const GpuInfo& gpu, cudaStream_t stream) {
  const Shape shape{1, o.quick ? (int64_t(1) << 16) : (int64_t(1) << 20)};
  const int reps = o.reps > 0 ? o.reps : o.quick ? 5 : 50;
  report->section_header("CUDA: seed ladder on one vector of " + std::to_string(shape.cols) +
                         " fp32 (anchor = the seed's kernels measured on the H200)");
  GpuCase c;
  make_gpu_case(&c, shape, SOFTMAX_DTYPE_F32, false, o.seed ^ 0x5eed, gpu.l2_bytes, stream);
  const Row copy = measure_gpu_copy(report, c, "ladder", o.warmup, reps, stream);
  const double xy = 2.0 * c.bytes_x;
  const int64_t n = shape.cols;
  auto fx = [&](int s) { return static_cast<const float*>(c.x_at(s)); };
  auto fy = [&](int s) { return static_cast<float*>(c.y_at(s)); };

  // Anchors for the rungs (seed-naive/-reduce/-float4 at this length), shown in the note.
  auto seed_anchor = [&](const char* impl) {
    double gbs = 0;
    std::string name;
    if (best_anchor("f32", shape, [&](const std::string& i) { return i == impl; }, &gbs, &name)) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "H200 anchor %s %.2f GB/s", impl, gbs);
      return std::string(buf);
    }
    return std::string();
  };

  Expectation loose;
  loose.float_sum = true;  // the rungs keep float running sums, as in the article
  // One thread over 2^20 elements takes ~0.15 s per launch: a few single-launch samples suffice.
  const int batch = c.batch;
  c.batch = 1;
  Row naive = measure_gpu_variant(report, c, "ladder", "01_naive_one_thread", xy, copy.gbs, loose,
                                  [&](int s) { return LaunchResult::from_cuda(seed_ladder::launch_naive_one_thread(fx(s), fy(s), n, stream)); },
                                  1, 3, stream);
  c.batch = batch;
  Row shuffle = measure_gpu_variant(report, c, "ladder", "02_warp_shuffle_reduce", xy, copy.gbs, loose,
                                    [&](int s) { return LaunchResult::from_cuda(seed_ladder::launch_warp_shuffle_reduce(fx(s), fy(s), n, stream)); },
                                    o.warmup, reps, stream);
  Row vec = measure_gpu_variant(report, c, "ladder", "03_float4_vectorized", xy, copy.gbs, loose,
                                [&](int s) { return LaunchResult::from_cuda(seed_ladder::launch_float4_vectorized(fx(s), fy(s), n, stream)); },
                                o.warmup, reps, stream);
  softmax_options opt = softmax_default_options();
  opt.backend = SOFTMAX_BACKEND_CUDA;
  opt.stream = stream;
  Expectation exact;
  Row lib = measure_gpu_variant(report, c, "ladder", "libsoftmax", xy, copy.gbs, exact, [&](int s) {
    return LaunchResult::from_status(softmax_rows(c.x_at(s), c.y_at(s), 1, n, SOFTMAX_DTYPE_F32, &opt));
  }, o.warmup, reps, stream);

  char line[320];
  std::snprintf(line, sizeof line,
                "seed ladder, 1x%lld f32: 01 %.3f GB/s, 02 %.1f GB/s (%.0fx 01), 03 %.1f GB/s (%.1fx 02) [%s; %s; %s]",
                static_cast<long long>(n), naive.gbs, shuffle.gbs, shuffle.gbs / naive.gbs, vec.gbs,
                vec.gbs / shuffle.gbs, seed_anchor("seed-naive").c_str(), seed_anchor("seed-reduce").c_str(),
                seed_anchor("seed-float4").c_str());
  report->summary(line);
  if (lib.check == "pass") {
    std::snprintf(line, sizeof line, "seed ladder: libsoftmax %.1f GB/s = %.1fx rung 03: %s",
                  lib.gbs, lib.gbs / vec.gbs, lib.gbs / vec.gbs >= 30 ? "met" : "NOT met");
  } else {
    std::snprintf(line, sizeof line, "seed ladder: libsoftmax not measured (%s)", lib.note.c_str());
  }
  report->summary(line);
  if (lib.check == "pass") {
    const double lib_host = host_us_per_call(
        [&](int s) { return softmax_rows(c.x_at(s), c.y_at(s), 1, n, SOFTMAX_DTYPE_F32, &opt) == SOFTMAX_STATUS_SUCCESS; },
        stream);
    const double launch_host = host_us_per_call(
        [&](int s) { return seed_ladder::launch_float4_vectorized(fx(s), fy(s), n, stream) == cudaSuccess; }, stream);
    if (std::isnan(lib_host) || std::isnan(launch_host)) {
      Row failed = lib;
      failed.variant = "host_issue_time";
      failed.check = "FAIL";
      failed.note = "a call failed while the host's time per call was measured";
      report->add(failed);
    }
    std::snprintf(line, sizeof line,
                  "seed ladder: the host issues a libsoftmax call in %.2f us (one launch of rung 03's kernel: "
                  "%.2f us); the GPU's rate above is %.2f us per call",
                  lib_host, launch_host, lib.ms * 1000.0);
    report->summary(line);
  }
}

}  // namespace bench
