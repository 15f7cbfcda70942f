// SPDX-License-Identifier: Apache-2.0
// Backward table of the CPU section: libsoftmax's softmax_rows_backward and oneDNN's softmax
// backward on the same y and dy, one after the other, each checked against float64 first.
#include "cpu_backward_table.h"

#include <softmax/softmax.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

#include "accuracy_check.h"
#include "cpu_variants.h"
#include "host_buffer.h"
#include "timing.h"
#if defined(SOFTMAX_BENCH_HAVE_ONEDNN)
#include "onednn_backward_variant.h"
#endif

namespace bench {

namespace {

// dy spans [-8, 8) like x, from its own stream of the run's seed.
constexpr uint64_t kDySeedSalt = 0xD1B54A32D192ED03ull;

// A variant whose checked call takes longer than kSlowCallMs is timed with no further warm-up
// (the checked call was one) and enough reps to fill about kSlowVariantMs, at least 3: oneDNN's
// reference backward (ref:any, which Debian's oneDNN 2.6 picks on the AVX2 machines measured
// here) moves well under 1 GB/s, and 2 + 11 runs of it per shape would make the CPU section
// minutes longer.
constexpr double kSlowCallMs = 200;
constexpr double kSlowVariantMs = 1500;

// A variant's call: true on success, else false with a message.
using Call = std::function<bool(std::string* message)>;

struct BackwardRun {
  const Options& o;
  Report* report;
  Shape shape;
  const float* x;  // the forward's input, from which y is made
  const float* y;
  const float* dy;
  float* dx;
  double copy_gbs;
  int reps;
  std::vector<int64_t> sampled;

  // dropout: softmax_dropout_backward's rows, checked from x and dy.
  Row measure(const std::string& variant, bool log, bool float_sum, const Call& call, const std::string& note = "",
              const DropoutExpect* dropout = nullptr) {
    Row row;
    row.note = note;
    row.device = "cpu";
    row.section = "backward";
    row.rows = shape.rows;
    row.cols = shape.cols;
    row.dtype = dtype_label(SOFTMAX_DTYPE_F32);
    row.variant = variant;
    const size_t bytes = static_cast<size_t>(shape.elements()) * sizeof(float);
    row.bytes = 3.0 * double(bytes);
    row.copy_gbs = copy_gbs;
    row.tolerance = tolerance_for(SOFTMAX_DTYPE_F32, float_sum);
    std::memset(dx, 0xFF, bytes);  // NaN: unwritten elements fail the check
    std::string message;
    const auto t0 = std::chrono::steady_clock::now();
    if (!call(&message)) {
      row.check = "FAIL";
      row.note = message;
      report->add(row);
      return row;
    }
    const double check_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const bool slow = check_ms > kSlowCallMs;
    const int timed_reps = slow ? std::min(reps, std::max(3, int(kSlowVariantMs / check_ms))) : reps;
    const int warmup = slow ? 0 : o.warmup;
    row.max_err = 0;
    for (int64_t r : sampled) {
      const size_t first = static_cast<size_t>(r * shape.cols);
      const RowError e = dropout != nullptr
                             ? dropout_grad_row_error(x + first, dy + first, dx + first, shape.cols, *dropout,
                                                      int64_t(first))
                             : grad_row_error(y + first, dy + first, dx + first, shape.cols, log);
      row.max_err = std::max(row.max_err, e.max_err);
      if (!e.problem.empty())
        row.note = "row " + std::to_string(r) + " col " + std::to_string(e.worst_col) + ": " + e.problem;
    }
    row.check = row.max_err <= row.tolerance ? "pass" : "FAIL";
    row.ms = median(time_host_ms([&] { call(&message); }, warmup, timed_reps));
    row.reps = timed_reps;
    if (slow) row.note += (row.note.empty() ? "" : "; ") + std::to_string(timed_reps) + " reps, " + std::to_string(warmup) + " warm-up (slow)";
    finish_rates(&row);
    report->add(row);
    return row;
  }
};

Call library_backward(const float* y, const float* dy, float* dx, const Shape& shape, const softmax_options& opt) {
  return [=](std::string* message) {
    const softmax_status s = softmax_rows_backward(y, dy, dx, shape.rows, shape.cols, SOFTMAX_DTYPE_F32, &opt);
    if (s != SOFTMAX_STATUS_SUCCESS) *message = std::string(softmax_status_string(s)) + ": " + softmax_last_error();
    return s == SOFTMAX_STATUS_SUCCESS;
  };
}

Call library_dropout_backward(const float* x, const float* dy, float* dx, const Shape& shape, const DropoutExpect& d,
                              const softmax_options& opt) {
  return [=](std::string* message) {
    const softmax_status s = softmax_dropout_backward(x, dy, dx, shape.rows, shape.cols, SOFTMAX_DTYPE_F32, d.p,
                                                      d.seed, d.offset, &opt);
    if (s != SOFTMAX_STATUS_SUCCESS) *message = std::string(softmax_status_string(s)) + ": " + softmax_last_error();
    return s == SOFTMAX_STATUS_SUCCESS;
  };
}

}  // namespace

void run_cpu_backward_table(const Options& o, Report* report, const std::vector<Shape>& shapes, int reps) {
  report->section_header(
      "CPU: softmax backward, f32 (GB/s = bytes of y (the dropout backward: x) + dy + dx over the median time)");
  for (const Shape& shape : shapes) {
    const size_t bytes = static_cast<size_t>(shape.elements()) * sizeof(float);
    HostBytes x_bytes = host_alloc(bytes), y_bytes = host_alloc(bytes), dy_bytes = host_alloc(bytes),
              dx_bytes = host_alloc(bytes);
    float* x = reinterpret_cast<float*>(x_bytes.get());
    float* y = reinterpret_cast<float*>(y_bytes.get());
    float* dy = reinterpret_cast<float*>(dy_bytes.get());
    float* dx = reinterpret_cast<float*>(dx_bytes.get());
    // The forward rows' x (same seed).
    fill_host_input(x, SOFTMAX_DTYPE_F32, shape.elements(), o.seed ^ static_cast<uint64_t>(shape.cols), o.threads);
    fill_host_input(dy, SOFTMAX_DTYPE_F32, shape.elements(), (o.seed ^ kDySeedSalt) ^ static_cast<uint64_t>(shape.cols),
                    o.threads);
    const Row* copy = report->find("cpu", "rows", shape.rows, shape.cols, "f32", "copy");
    BackwardRun run{o, report, shape, x, y, dy, dx, copy ? copy->gbs : NAN, reps,
                    sample_rows(shape.rows, shape.cols, int64_t(1) << 24, o.seed + 2)};

    for (const bool log : {false, true}) {
      softmax_options opt = softmax_default_options();
      opt.backend = SOFTMAX_BACKEND_CPU;
      opt.num_threads = o.threads;
      opt.flags = log ? SOFTMAX_FLAG_LOG : 0u;
      const softmax_status forward = softmax_rows(x, y, shape.rows, shape.cols, SOFTMAX_DTYPE_F32, &opt);
      if (forward != SOFTMAX_STATUS_SUCCESS) {
        std::printf("softmax_bench: the forward that makes y for the backward rows failed: %s\n",
                    softmax_last_error());
        std::exit(2);
      }
      const std::string suffix = log ? "_log" : "";
      const Call plain = library_backward(y, dy, dx, shape, opt);
      const Row lib = run.measure("libsoftmax_bwd" + suffix, log, false, plain);
      if (!log) {
        // softmax_dropout_backward (p = 0.1) from the forward's x, and its time over the softmax
        // backward's from rounds of the two calls in turn (timing.h).
        DropoutExpect d;
        d.p = 0.1f;
        d.seed = o.seed;
        const Call dropout = library_dropout_backward(x, dy, dx, shape, d, opt);
        const Row drop = run.measure("libsoftmax_dropout_bwd_p0.1", false, false, dropout, "", &d);
        if (lib.check == "pass" && drop.check == "pass") {
          std::string message;
          const double ratio =
              median_ratios_in_turn(reps, [&] { plain(&message); }, {[&] { dropout(&message); }})[0];
          char line[200];
          std::snprintf(line, sizeof line,
                        "cpu dropout backward %s f32: softmax_dropout_backward / softmax_rows_backward time = %.2fx",
                        shape_name(shape).c_str(), ratio);
          report->summary(line);
        }
      }
#if defined(SOFTMAX_BENCH_HAVE_ONEDNN)
      OneDnnSoftmaxBackward onednn(shape.rows, shape.cols, log);
      const Row anchor = run.measure(
          "onednn_bwd" + suffix, log, true,
          [&](std::string*) {
            onednn.run(y, dy, dx);
            return true;
          },
          onednn.impl_name());
      if (lib.check == "pass" && anchor.check == "pass") {
        report->summary(anchor_ratio_line(std::string("backward") + (log ? " log " : " ") + shape_name(shape) + " f32",
                                          lib, anchor, run.copy_gbs));
      }
#else
      (void)lib;
#endif
    }
  }
}

}  // namespace bench
