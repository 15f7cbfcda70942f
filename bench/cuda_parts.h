/* SPDX-License-Identifier: Apache-2.0 */
// The three parts of the GPU section, run in order by run_cuda_section (cuda_section.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "bench_options.h"
#include "bench_report.h"

namespace bench {

struct GpuInfo {
  std::string name;
  int sms = 0;
  size_t l2_bytes = 0;
};

// The shape table (copy, library, log, CUB, Thrust, library dropout).
void run_gpu_rows_table(const Options& o, Report* report, const GpuInfo& gpu, cudaStream_t stream);
// The seed article's ladder on one vector of 2^20 fp32, and the library on it.
void run_seed_ladder(const Options& o, Report* report, const GpuInfo& gpu, cudaStream_t stream);
// The dropout ladder: softmax then dropout / fused with cuRAND-host uniforms / the library's fused.
void run_dropout_ladder(const Options& o, Report* report, const GpuInfo& gpu, cudaStream_t stream);

}  // namespace bench
