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
// grid_waves: the grid is at most this many full waves of resident blocks (the kernel loops
// over the remaining rows).
Outcome launch_warp_per_row(const LaunchArgs& a, int grid_waves = 8);
// One row per cluster of `cluster` blocks (1 = a plain block per row) of `threads` threads,
// each holding up to `elems_per_thread` (16 or 32) elements of the row.
Outcome launch_cluster_row(const LaunchArgs& a, int cluster, int threads, int elems_per_thread);
// A persistent grid of blocks, or clusters of `cluster` blocks, of `threads` threads, each
// thread holding kPrefetchElemsPerThread elements; the next rows stream into shared memory
// while one is reduced. Needs 16-byte vectors (vector_ok). bulk_stages > 0: stages filled by
// bulk copies (the copy engine), that many deep; 0: per-thread cp.async, kPrefetchStages deep.
Outcome launch_prefetch_row(const LaunchArgs& a, int cluster, int threads, int bulk_stages);
// l2_share: a wave of rows takes at most 1/l2_share of the L2.
Outcome launch_split_row(const LaunchArgs& a, int l2_share = 2);

// Row capacities the launcher's table is built on (elements).
constexpr int64_t kWarpRowMaxCols = 1024;
constexpr int kClusterMaxElemsPerThread = 32;
constexpr int kClusterMaxSize = 8;       // portable cluster size: always schedulable on sm_90
constexpr int kClusterMaxThreads = 512;  // 128 registers per thread: 32 values never spill
constexpr int64_t kClusterRowMaxCols =
    int64_t{kClusterMaxElemsPerThread} * kClusterMaxThreads * kClusterMaxSize;

constexpr int kPrefetchElemsPerThread = 32;
constexpr int kPrefetchMaxThreads = 512;
// cp.async ring depth: the slice being reduced and two in flight; with 512 threads x 32 fp32
// values that is 3 x 64 KB, the most an SM's 227 KB of shared memory holds.
constexpr int kPrefetchStages = 3;
constexpr int kPrefetchMaxStages = 8;  // bulk-copy ring depth limit
constexpr int64_t kPrefetchRowMaxCols =
    int64_t{kPrefetchElemsPerThread} * kPrefetchMaxThreads * kClusterMaxSize;

}  // namespace softmax_internal
