/* SPDX-License-Identifier: Apache-2.0 */
// The benchmark's sections; each appends its rows and summary lines to the report.
#pragma once

#include "bench_options.h"
#include "bench_report.h"

namespace bench {

// CPU: copy, libsoftmax, textbook_3pass, onednn (when built), library dropout p=0.1; then the
// f32 backward table: libsoftmax and oneDNN's softmax backward, plain and log.
void run_cpu_section(const Options& options, Report* report);

#if defined(SOFTMAX_BENCH_WITH_CUDA)
// True when a CUDA device can be used; otherwise *why says why not.
bool cuda_device_present(std::string* why);
// GPU: the shape table, the seed ladder on one vector, the dropout ladder.
void run_cuda_section(const Options& options, Report* report);
#endif

}  // namespace bench
