/* SPDX-License-Identifier: Apache-2.0 */
// The CPU section's backward table (f32): softmax_rows_backward, plain and log, against oneDNN's
// softmax backward (algorithms softmax_accurate and softmax_log) when it is built.
#pragma once

#include <vector>

#include "bench_options.h"
#include "bench_report.h"

namespace bench {

// For each shape: y = softmax(x) (log-softmax for the log rows) of the forward rows' x, computed
// by the library, and a random dy; every variant's dx is checked on sampled rows against float64
// before it is timed. GB/s counts y + dy + dx; %copy compares with the f32 copy row of the same
// shape measured earlier in the run (none when the forward rows did not run f32).
void run_cpu_backward_table(const Options& o, Report* report, const std::vector<Shape>& shapes, int reps);

}  // namespace bench
