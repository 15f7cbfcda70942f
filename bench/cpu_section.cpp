// SPDX-License-Identifier: Apache-2.0
// CPU section: 256 MiB of fp32 per shape, 2 threads by default. Every variant is
// checked on sampled rows against float64 before it is timed; the copy of the same bytes is
// measured in the same run so that %copy compares like with like on a shared machine. The f32
// backward table follows the forward rows (cpu_backward_table.cpp).
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>

#include "accuracy_check.h"
#include "cpu_backward_table.h"
#include "cpu_variants.h"
#include "host_buffer.h"
#include "sections.h"
#include "timing.h"
#if defined(SOFTMAX_BENCH_HAVE_ONEDNN)
#include "onednn_variant.h"
#endif

namespace bench {

namespace {

const std::vector<Shape> kFullShapes = {{2097152, 32}, {524288, 128},  {65536, 1024}, {16384, 4096},
                                        {2048, 32768}, {64, 1048576}, {1, 67108864}};
const std::vector<Shape> kQuickShapes = {{512, 1024}, {4099, 33}, {1, 300007}};
// The backward table's subset of kFullShapes, one per schedule of the CPU backward (narrow and
// wide tiles of short rows, whole long rows per thread, chunks of a single row over the threads):
// all seven would add about as much time again as the forward rows take.
const std::vector<Shape> kBackwardShapes = {{2097152, 32}, {16384, 4096}, {64, 1048576}, {1, 67108864}};

constexpr float kDropoutP = 0.1f;

// "model name" from /proc/cpuinfo, for the JSON file's meta.
std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos)
      return line.substr(line.find(':') + 2);
  return "unknown";
}

// A variant's call: true on success, else false with a message and whether it was only
// "unavailable" (not a failure).
using Call = std::function<bool(std::string* message, bool* unavailable)>;

Call library_call(std::function<softmax_status()> f) {
  return [f](std::string* message, bool* unavailable) {
    const softmax_status s = f();
    if (s == SOFTMAX_STATUS_SUCCESS) return true;
    *unavailable = s == SOFTMAX_STATUS_BACKEND_UNAVAILABLE;
    *message = std::string(softmax_status_string(s)) + ": " + softmax_last_error();
    return false;
  };
}

struct ShapeRun {
  const Options& o;
  Report* report;
  Shape shape;
  softmax_dtype dtype;
  const unsigned char* x;
  unsigned char* y;
  size_t bytes_x;
  double copy_gbs;
  int reps;
  std::vector<int64_t> sampled;

  Row measure(const std::string& variant, const std::string& section, Expect expect,
              bool float_sum, const DropoutExpect& dropout, const Call& call,
              const std::string& note = "") {
    Row row;
    row.note = note;
    row.device = "cpu";
    row.section = section;
    row.rows = shape.rows;
    row.cols = shape.cols;
    row.dtype = dtype_label(dtype);
    row.variant = variant;
    row.bytes = 2.0 * bytes_x;
    row.copy_gbs = copy_gbs;
    row.tolerance = tolerance_for(dtype, float_sum);
    std::memset(y, 0xFF, bytes_x);  // NaN in every dtype: unwritten elements fail the check
    std::string message;
    bool unavailable = false;
    if (!call(&message, &unavailable)) {
      row.check = unavailable ? "skipped" : "FAIL";
      row.note = message;
      report->add(row);
      return row;
    }
    const size_t es = dtype_bytes(dtype);
    std::vector<float> xr(shape.cols), yr(shape.cols);
    row.max_err = 0;
    for (int64_t r : sampled) {
      widen(x + r * shape.cols * es, dtype, shape.cols, xr.data());
      widen(y + r * shape.cols * es, dtype, shape.cols, yr.data());
      const RowError e = row_error(xr.data(), row_stats(xr.data(), shape.cols), yr.data(), nullptr,
                                   shape.cols, dtype, expect, dropout, r * shape.cols);
      if (e.max_err > row.max_err || !e.problem.empty()) {
        row.max_err = std::max(row.max_err, e.max_err);
        if (!e.problem.empty())
          row.note = "row " + std::to_string(r) + " col " + std::to_string(e.worst_col) + ": " + e.problem;
      }
    }
    row.check = row.max_err <= row.tolerance ? "pass" : "FAIL";
    const std::vector<double> ms = time_host_ms(
        [&] {
          std::string m;
          bool u;
          call(&m, &u);
        },
        o.warmup, reps);
    row.ms = median(ms);
    row.reps = reps;
    finish_rates(&row);
    report->add(row);
    return row;
  }
};

}  // namespace

void run_cpu_section(const Options& o, Report* report) {
  const std::vector<Shape>& shapes = !o.shapes.empty() ? o.shapes : o.quick ? kQuickShapes : kFullShapes;
  const std::vector<softmax_dtype> dtypes =
      !o.dtypes.empty() ? o.dtypes : std::vector<softmax_dtype>{SOFTMAX_DTYPE_F32};
  const int reps = o.reps > 0 ? o.reps : o.quick ? 3 : 11;
  const int threads = o.threads;
  omp_set_num_threads(threads);  // oneDNN (OpenMP runtime) follows this too

  std::printf("\nCPU section: %s, %d thread(s), %d timed reps (median), warm-up %d, library %s\n",
              cpu_model_name().c_str(), threads, reps, o.warmup, softmax_version());
#if defined(SOFTMAX_BENCH_HAVE_ONEDNN)
  std::printf("oneDNN %s is the anchor\n", OneDnnSoftmax::version().c_str());
#else
  std::printf("oneDNN was not found at configure time (Debian libdnnl-dev): no onednn rows\n");
#endif
  report->set_meta("cpu", cpu_model_name());
  report->set_meta("cpu_threads", std::to_string(threads));
  report->section_header("CPU: row softmax (GB/s = bytes of x + bytes of y over the median time)");

  for (softmax_dtype dtype : dtypes) {
    for (const Shape& shape : shapes) {
      const size_t bytes_x = static_cast<size_t>(shape.elements()) * dtype_bytes(dtype);
      HostBytes x = host_alloc(bytes_x), y = host_alloc(bytes_x);
      fill_host_input(x.get(), dtype, shape.elements(), o.seed ^ static_cast<uint64_t>(shape.cols), threads);

      // Copy of the same bytes, same threads, same run.
      Row copy;
      copy.device = "cpu";
      copy.section = "rows";
      copy.rows = shape.rows;
      copy.cols = shape.cols;
      copy.dtype = dtype_label(dtype);
      copy.variant = "copy";
      copy.bytes = 2.0 * bytes_x;
      copy.ms = median(time_host_ms([&] { parallel_copy(x.get(), y.get(), bytes_x, threads); },
                                    o.warmup, reps));
      copy.reps = reps;
      copy.check = std::memcmp(x.get(), y.get(), bytes_x) == 0 ? "pass" : "FAIL";
      copy.max_err = copy.check == "pass" ? 0 : NAN;
      finish_rates(&copy);
      copy.copy_gbs = copy.gbs;
      finish_rates(&copy);
      report->add(copy);

      ShapeRun run{o, report, shape, dtype, x.get(), y.get(), bytes_x, copy.gbs, reps,
                   sample_rows(shape.rows, shape.cols, int64_t(1) << 24, o.seed + 1)};
      softmax_options opt = softmax_default_options();
      opt.backend = SOFTMAX_BACKEND_CPU;
      opt.num_threads = threads;
      const DropoutExpect none{};

      const Row lib = run.measure("libsoftmax", "rows", Expect::Softmax, false, none, library_call([&] {
                                    return softmax_rows(x.get(), y.get(), shape.rows, shape.cols, dtype, &opt);
                                  }));

      if (dtype == SOFTMAX_DTYPE_F32) {
        run.measure("textbook_3pass", "rows", Expect::Softmax, true, none,
                    [&](std::string*, bool*) {
                      textbook_3pass_rows(reinterpret_cast<const float*>(x.get()),
                                          reinterpret_cast<float*>(y.get()), shape.rows, shape.cols, threads);
                      return true;
                    });
#if defined(SOFTMAX_BENCH_HAVE_ONEDNN)
        OneDnnSoftmax onednn(shape.rows, shape.cols);
        const Row anchor = run.measure(
            "onednn", "rows", Expect::Softmax, true, none,
            [&](std::string*, bool*) {
              onednn.run(reinterpret_cast<const float*>(x.get()), reinterpret_cast<float*>(y.get()));
              return true;
            },
            onednn.impl_name());
        if (lib.check == "pass" && anchor.check == "pass") {
          report->summary(anchor_ratio_line(shape_name(shape) + " " + dtype_label(dtype), lib, anchor, copy.gbs));
        }
#endif
      }

      // Dropout at offset 0 and at offset 3, where every group of four elements needs two Philox
      // blocks; the summary gives each one's time over softmax_rows'.
      Row dropout[2];
      for (int i = 0; i < 2; ++i) {
        DropoutExpect d;
        d.p = kDropoutP;
        d.seed = o.seed;
        d.offset = i == 0 ? 0 : 3;
        dropout[i] = run.measure(i == 0 ? "libsoftmax_dropout_p0.1" : "libsoftmax_dropout_p0.1_offset3", "dropout",
                                 Expect::Dropout, false, d, library_call([&] {
                                   return softmax_dropout(x.get(), y.get(), nullptr, shape.rows, shape.cols, dtype,
                                                          d.p, d.seed, d.offset, &opt);
                                 }));
      }
      if (lib.check == "pass" && dropout[0].check == "pass" && dropout[1].check == "pass") {
        // The ratios from rounds of the three calls in turn (timing.h), not from the medians above.
        const auto dropout_call = [&](uint64_t offset) -> std::function<void()> {
          return [&, offset] {
            softmax_dropout(x.get(), y.get(), nullptr, shape.rows, shape.cols, dtype, kDropoutP, o.seed, offset, &opt);
          };
        };
        const std::vector<double> ratio = median_ratios_in_turn(
            reps, [&] { softmax_rows(x.get(), y.get(), shape.rows, shape.cols, dtype, &opt); },
            {dropout_call(0), dropout_call(3)});
        char line[240];
        std::snprintf(line, sizeof line,
                      "cpu %s %s: softmax_dropout / softmax_rows time = %.2fx at offset 0, %.2fx at offset 3 "
                      "(median of %d rounds of the three calls in turn)",
                      shape_name(shape).c_str(), dtype_label(dtype), ratio[0], ratio[1], reps);
        report->summary(line);
      }
    }
  }

  // The backward is measured in f32 only (oneDNN's f32 is the anchor).
  if (std::find(dtypes.begin(), dtypes.end(), SOFTMAX_DTYPE_F32) != dtypes.end())
    run_cpu_backward_table(o, report, !o.shapes.empty() || o.quick ? shapes : kBackwardShapes, reps);
}

}  // namespace bench
