/* SPDX-License-Identifier: Apache-2.0 */
// Command line of softmax_bench: which devices, shapes, dtypes and how many repetitions.
#pragma once

#include <softmax/softmax.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace bench {

struct Shape {
  int64_t rows;
  int64_t cols;
  int64_t elements() const { return rows * cols; }
};

struct Options {
  bool run_cpu = true;
  bool run_cuda = true;       // cleared when no CUDA device is present and --device was not given
  bool device_given = false;  // --device cuda with no device is an error, not a silent skip
  std::vector<Shape> shapes;  // empty: each section's own list
  std::vector<softmax_dtype> dtypes;  // empty: each section's own list
  int reps = 0;               // 0: the section's default (CPU 11, GPU 50; --quick 3)
  int warmup = 2;
  int threads = 2;            // CPU section: OpenMP threads (OMP_NUM_THREADS, else 2)
  bool quick = false;         // small sizes, few reps: the CI smoke test
  // --lib-only: the GPU rows table times the copy, softmax_rows and softmax_dropout only (no
  // log-softmax, CUB, Thrust or mask variants): for strategy sweeps that run it many times.
  bool lib_only = false;
  std::string json_path;      // --json FILE
  uint64_t seed = 0;          // input seed; fresh per run unless --seed
  // Parts of the GPU section: "rows" (shape table), "ladder" (seed ladder on one vector),
  // "dropout_ladder" (unfused / pre-generated / fused dropout).
  std::set<std::string> gpu_parts = {"rows", "ladder", "dropout_ladder"};
};

// Parses argv; on error returns false with a message. --help prints usage and exits.
bool parse_options(int argc, char** argv, Options* out, std::string* error);

std::string shape_name(const Shape& s);
const char* dtype_label(softmax_dtype t);
size_t dtype_bytes(softmax_dtype t);

}  // namespace bench
