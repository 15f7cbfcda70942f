// One validated call, as the strategy launchers see it: resolved pointers, the row epilogue,
// the stream and the device's limits. Host-only; kernels get plain parameters.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/backend.h"
#include "backends/cuda/device_limits.h"
#include "backends/cuda/row_epilogue.h"

namespace softmax_internal {

struct LaunchArgs {
  const void* x;
  void* y;
  int64_t rows;
  int64_t cols;
  softmax_dtype dtype;
  bool dropout;        // ep carries p, seed, offset, mask when true
  bool vector_ok;      // 16-byte vectors: cols and every pointer allow them (see the launcher)
  RowEpilogue ep;
  cudaStream_t stream;
  int device;
  const DeviceLimits* limits;
};

// The three strategies; each returns the launch outcome (never synchronises).
Outcome launch_warp_per_row(const LaunchArgs& a);
// One row per cluster of `cluster` blocks (1 = a plain block per row) of `threads` threads.
Outcome launch_cluster_row(const LaunchArgs& a, int cluster, int threads);
Outcome launch_split_row(const LaunchArgs& a);

// Row capacities the launcher's table is built on (elements).
constexpr int64_t kWarpRowMaxCols = 1024;
constexpr int kClusterElemsPerThread = 16;
constexpr int kClusterMaxSize = 8;  // portable cluster size: always schedulable on sm_90
constexpr int kClusterMaxThreads = 512;  // 128 registers per thread: the 16 values never spill
constexpr int64_t kClusterRowMaxCols = int64_t{kClusterElemsPerThread} * kClusterMaxThreads * kClusterMaxSize;

}  // namespace softmax_internal
