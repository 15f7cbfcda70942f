/* SPDX-License-Identifier: Apache-2.0 */
// Where the row statistics of one MPI adapter call live. libsoftmax wants them in the memory
// space of the data (softmax_row_stats); MPI gets them on the host. For host data both are one
// host array. For a call that runs on the CUDA backend they are a stream-ordered device buffer
// and a host mirror: copied down before the all-reduce, up after it. Staging through the host
// works with any MPI (no CUDA-aware build needed) and costs two copies of a few bytes per row,
// small next to the rows themselves.
#pragma once

#include <softmax/softmax.h>

#include <cstddef>
#include <initializer_list>
#include <vector>

#include "adapters/common/adapter_outcome.h"

namespace softmax_adapter {

// True when libsoftmax will run this call on its CUDA backend: requested explicitly, or AUTO with
// any of `pointers` in device memory. Always false in a build without CUDA.
bool runs_on_cuda_backend(const softmax_options* options, std::initializer_list<const void*> pointers);

class StatsStaging {
 public:
  StatsStaging() = default;
  ~StatsStaging();
  StatsStaging(const StatsStaging&) = delete;
  StatsStaging& operator=(const StatsStaging&) = delete;

  // `n` floats in device memory (ordered on `stream`) when on_device, else in host memory. The
  // host copy gets `host_prefix` more floats in front, for what the all-reduce carries besides
  // the statistics.
  Outcome open(bool on_device, void* stream, size_t n, size_t host_prefix = 0);
  // The n floats libsoftmax reads and writes (device or host).
  float* core() { return on_device_ ? device_ : host(); }
  // Their host copy (the same array for host data).
  float* host() { return host_.data() + prefix_; }
  // The host prefix followed by the host copy, contiguous: what MPI reduces.
  float* host_with_prefix() { return host_.data(); }
  // Device -> host (waits for the stream: MPI runs on the host); nothing for host data.
  Outcome download();
  // Host -> device, ordered on the stream; nothing for host data.
  Outcome upload();

 private:
  bool on_device_ = false;
  void* stream_ = nullptr;
  float* device_ = nullptr;
  size_t n_ = 0;
  size_t prefix_ = 0;
  std::vector<float> host_;
};

}  // namespace softmax_adapter
