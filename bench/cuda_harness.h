/* SPDX-License-Identifier: Apache-2.0 */
// GPU measuring harness: checked CUDA calls, device buffers, the input fill kernel, input sets
// to rotate through, event timing, and the check of sampled rows against float64.
#pragma once

#include <cuda_runtime_api.h>
#include <softmax/softmax.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "accuracy_check.h"
#include "bench_options.h"
#include "bench_report.h"

namespace bench {

[[noreturn]] void cuda_fatal(const char* what, cudaError_t e, const char* file, int line);
#define BENCH_CUDA_CHECK(call)                                            \
  do {                                                                    \
    const cudaError_t bench_e_ = (call);                                  \
    if (bench_e_ != cudaSuccess) ::bench::cuda_fatal(#call, bench_e_, __FILE__, __LINE__); \
  } while (0)

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), bytes_(o.bytes_) { o.p_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  unsigned char* get() const { return static_cast<unsigned char*>(p_); }
  size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// n elements of `dtype` with bench::input_value(seed, index_base + i).
void fill_device_input(void* dst, softmax_dtype dtype, int64_t n, uint64_t seed, uint64_t index_base,
                       cudaStream_t stream);

// `sets` copies of (x, y[, mask]) for one shape, each set's x filled with different values.
// Launch i uses set i % sets, so that inputs smaller than a few L2s are not served from L2 on the
// next launch (DESIGN: sizes >> cache, or rotate). Set 0 is the one checked.
struct GpuCase {
  Shape shape;
  softmax_dtype dtype;
  size_t bytes_x = 0;     // one set's x (= y) bytes
  size_t bytes_mask = 0;  // one set's mask bytes (0: no mask buffers)
  int sets = 1;
  int batch = 1;          // launches per timed sample: 10 when sets > 1 (small problems), else 1
  DeviceBuffer x, y, mask;
  void* x_at(int s) const { return x.get() + static_cast<size_t>(s % sets) * stride_x; }
  void* y_at(int s) const { return y.get() + static_cast<size_t>(s % sets) * stride_x; }
  uint8_t* mask_at(int s) const {
    return bytes_mask ? mask.get() + static_cast<size_t>(s % sets) * stride_mask : nullptr;
  }
  size_t stride_x = 0, stride_mask = 0;
  // Host copies of set 0's sampled input rows (widened to float) and their float64 stats.
  std::vector<int64_t> sampled_rows;
  std::vector<std::vector<float>> x_rows;
  std::vector<RowStats> stats;
};

// Allocates and fills a case; with_mask adds uint8 mask buffers. L2 size decides the set count.
void make_gpu_case(GpuCase* c, Shape shape, softmax_dtype dtype, bool with_mask, uint64_t seed,
                   size_t l2_bytes, cudaStream_t stream);

struct LaunchResult {
  bool ok = true;
  bool unavailable = false;  // the library's CUDA backend is not available: skipped, not failed
  std::string message;
  static LaunchResult from_cuda(cudaError_t e);
  static LaunchResult from_status(softmax_status s);
};
using Launch = std::function<LaunchResult(int set)>;

// Per-launch times in ms: `warmup` untimed launches, then `reps` samples back to back on
// `stream`, each sample `batch` launches between two events, divided by `batch`. (Batches are for
// problems of a few MiB, whose launches take microseconds: an event pair per launch would add
// its own overhead to every sample.) The first failing launch aborts with its result.
std::vector<double> time_device_ms(const Launch& launch, int warmup, int reps, cudaStream_t stream,
                                   LaunchResult* failure, int batch = 1);

// What the output of set 0 must be. `uniforms` (host copies, one vector per sampled row)
// replace the Philox keep decision for the pre-generated-uniform dropout variant.
struct Expectation {
  Expect expect = Expect::Softmax;
  DropoutExpect dropout;
  bool mask_written = false;  // the variant writes set 0's mask: check it bit for bit
  bool float_sum = false;  // loose bound: a reference variant with a plain float running sum
  const std::vector<std::vector<float>>* uniforms = nullptr;
};

// Poisons set 0's outputs, runs launch(0), checks the sampled rows; then times the variant.
// Fills ms/gbs/max_err/check/note of a row with the given identity, adds it to the report and
// returns it. bytes: what GB/s counts; copy_gbs: the copy rate of this case.
Row measure_gpu_variant(Report* report, GpuCase& c, const std::string& section,
                        const std::string& variant, double bytes, double copy_gbs,
                        const Expectation& expectation, const Launch& launch, int warmup, int reps,
                        cudaStream_t stream);

// Copy of set s's x into y with cudaMemcpyAsync: the copy row of a case (GB/s counting read +
// write); it is also checked (y must equal x).
Row measure_gpu_copy(Report* report, GpuCase& c, const std::string& section, int warmup, int reps,
                     cudaStream_t stream);

// Best anchor for (dtype, shape) among the implementations accepted by `accept`.
bool best_anchor(const std::string& dtype, const Shape& shape,
                 const std::function<bool(const std::string& impl)>& accept, double* gbs, std::string* impl);
bool is_softmax_anchor(const std::string& impl);
bool is_dropout_anchor(const std::string& impl);

}  // namespace bench
