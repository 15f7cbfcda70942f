// SPDX-License-Identifier: Apache-2.0
// softmax_bench: every (device, shape, dtype, variant) as ms, effective GB/s and % of a copy of
// the same bytes measured in the same run. Each variant's output is checked against float64 on
// sampled rows before it is timed; any failed check makes the exit code non-zero.
//
//   softmax_bench                        CPU section, plus the GPU section when a GPU is present
//   softmax_bench --quick                small sizes, few reps (CI smoke test)
//   softmax_bench --device cuda --json results.json
#include <softmax/softmax.h>

#include <cstdio>
#include <ctime>
#include <string>

#include "bench_options.h"
#include "bench_report.h"
#include "sections.h"

int main(int argc, char** argv) {
  bench::Options o;
  std::string error;
  if (!bench::parse_options(argc, argv, &o, &error)) {
    std::fprintf(stderr, "softmax_bench: %s\n", error.c_str());
    return 2;
  }

#if defined(SOFTMAX_BENCH_WITH_CUDA)
  std::string why;
  const bool gpu = bench::cuda_device_present(&why);
  if (o.run_cuda && !gpu) {
    if (o.device_given) {
      std::fprintf(stderr, "softmax_bench: --device cuda asked for, but %s\n", why.c_str());
      return 2;
    }
    std::printf("no CUDA device (%s): GPU section skipped\n", why.c_str());
    o.run_cuda = false;
  }
#else
  if (o.run_cuda && o.device_given) {
    std::fprintf(stderr, "softmax_bench: built without CUDA (SOFTMAX_WITH_CUDA=OFF)\n");
    return 2;
  }
  o.run_cuda = false;
#endif

  char when[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::printf("softmax_bench  libsoftmax %s  %s  seed %llu%s\n", softmax_version(), when,
              static_cast<unsigned long long>(o.seed), o.quick ? "  (--quick)" : "");
  std::printf("backends available: cpu=%d cuda=%d\n", softmax_backend_available(SOFTMAX_BACKEND_CPU),
              softmax_backend_available(SOFTMAX_BACKEND_CUDA));
  std::printf("method: median of timed runs after warm-up; GB/s = (bytes of x + bytes of y [+ mask])"
              " / time; %%copy = GB/s over a copy of x's bytes (read + write) in this run;\n"
              "        max_err = max relative error vs float64 on sampled rows, checked before timing\n");

  bench::Report report;
  if (o.run_cpu) bench::run_cpu_section(o, &report);
#if defined(SOFTMAX_BENCH_WITH_CUDA)
  if (o.run_cuda) bench::run_cuda_section(o, &report);
#endif
  report.print_summary();

  if (!o.json_path.empty()) {
    const std::string meta = std::string("{\"library_version\": \"") + softmax_version() +
                             "\", \"date\": \"" + when + "\", \"seed\": " + std::to_string(o.seed) +
                             ", \"threads\": " + std::to_string(o.threads) +
                             ", \"quick\": " + (o.quick ? "true" : "false") + "}";
    if (!report.write_json(o.json_path, meta)) {
      std::fprintf(stderr, "softmax_bench: cannot write %s\n", o.json_path.c_str());
      return 2;
    }
    std::printf("wrote %s\n", o.json_path.c_str());
  }
  return report.failures() > 0 ? 1 : 0;
}
