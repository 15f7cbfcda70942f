// Split-row softmax for rows too long to hold on chip (> 128K columns), however few: every row
// is cut into `parts` contiguous parts, each taken by its own block, with as many parts as it
// takes to fill every SM, so a single row of 2^28 elements runs on the whole GPU.
//
// Two roles, one kernel:
//   stats      reads its part once and writes the part's (max, sum of exp) partial;
//   normalize  merges all partials of its row with the online rule (every block of a row merges
//              them in the same order, so they agree bit for bit) and then re-reads its part
//              and writes y.
// Rows go in waves of `wave_rows` rows sized to half of L2, and launch k runs the stats of wave
// k next to the normalisation of wave k-1, so that the second read of a part can hit L2 (the
// part was read one launch earlier) and the two roles overlap instead of leaving a gap between
// two kernels. (Measured on the H200 the reuse barely pays: 256x1M fp32 runs at ~2.0 TB/s, about
// what two full passes over HBM give; waves of L2/2 beat L2/3 by 4%, and L2/6 or L2/12 lost
// 15-35% to the extra launches.) One launch more than there are waves; partials are
// double-buffered by wave parity in a stream-ordered, graph-capturable workspace from the
// library's own pool (workspace_pool.cu). The normalize role
// walks its part backwards, so even a row larger than L2 re-reads its most recently fetched
// tiles first.
#include <cuda_runtime.h>

#include <algorithm>
#include <mutex>

#include "backends/cuda/cuda_outcome.h"
#include "backends/cuda/launch_args.h"
#include "backends/cuda/row_math.cuh"
#include "backends/cuda/workspace_pool.h"

namespace softmax_internal {
namespace cuda_kernels {

constexpr int kSplitThreads = 256;  // 4096-element tiles: a 1M row still gets 256 blocks
constexpr int kSplitElemsPerThread = 16;
constexpr int64_t kSplitTile = int64_t{kSplitThreads} * kSplitElemsPerThread;  // elements

struct SplitWave {
  int64_t stats_row0;  // first row of the wave whose partials this launch computes
  int stats_rows;      // 0: no stats role in this launch
  MaxSum* stats_out;   // [stats_rows][parts]
  int64_t norm_row0;   // first row of the wave this launch normalises
  int norm_rows;       // 0: no normalize role
  const MaxSum* norm_in;
};

// Loads tile `tile_start` of a row (columns [tile_start, min(tile_start + kSplitTile, end))).
template <class T, int kVec>
__device__ __forceinline__ void load_tile(const T* row, int64_t tile_start, int64_t end,
                                          float (&v)[kSplitElemsPerThread / kVec][kVec]) {
#pragma unroll
  for (int k = 0; k < kSplitElemsPerThread / kVec; ++k) {
    const int64_t col = tile_start + (threadIdx.x + int64_t{k} * kSplitThreads) * kVec;
    if (col < end) Chunk<T, kVec>::load(row + col, v[k]);
  }
}

// The block's (max, sum) partial from per-thread partials; see MaxSum for the -inf convention.
__device__ __forceinline__ MaxSum block_merge(MaxSum t, float* max_scratch, float* sum_scratch) {
  const float m = block_max(t.m, max_scratch);
  const float shift = part_shift(m);
  const float s = t.s == 0.0f ? 0.0f : t.s * exp2f((part_shift(t.m) - shift) * kLog2e);
  return {m, block_sum(s, sum_scratch)};
}

template <class T, bool kDropout, int kVec>
__global__ void __launch_bounds__(kSplitThreads)
    split_row_softmax(const T* x, T* y, int64_t cols, int64_t part_len, int parts, SplitWave w,
                      RowEpilogue ep) {
  constexpr int kPerThread = kSplitElemsPerThread / kVec;
  __shared__ float max_scratch[32];
  __shared__ float sum_scratch[32];
  float v[kPerThread][kVec];

  const int64_t stats_blocks = int64_t{w.stats_rows} * parts;
  if (blockIdx.x < stats_blocks) {
    // ---- stats: one read of the part, a running (max, sum) per thread ----
    const int part = blockIdx.x % parts;
    const int64_t row = w.stats_row0 + blockIdx.x / parts;
    const T* xr = x + row * cols;
    const int64_t begin = part * part_len, end = min(begin + part_len, cols);
    MaxSum acc{-INFINITY, 0.0f};
    for (int64_t t = begin; t < end; t += kSplitTile) {
      load_tile<T, kVec>(xr, t, end, v);
      float mt = acc.m;
#pragma unroll
      for (int k = 0; k < kPerThread; ++k) {
        const int64_t col = t + (threadIdx.x + int64_t{k} * kSplitThreads) * kVec;
        if (col < end) {
#pragma unroll
          for (int j = 0; j < kVec; ++j) mt = fmaxf(mt, v[k][j]);
        }
      }
      // Rescale the running sum to the new shift once per tile, not per element.
      const float old_shift = part_shift(acc.m), shift = part_shift(mt);
      float s = acc.s == 0.0f ? 0.0f : acc.s * exp2f((old_shift - shift) * kLog2e);
      const float shift_log2e = shift * kLog2e;
#pragma unroll
      for (int k = 0; k < kPerThread; ++k) {
        const int64_t col = t + (threadIdx.x + int64_t{k} * kSplitThreads) * kVec;
        if (col < end) {
#pragma unroll
          for (int j = 0; j < kVec; ++j) s += exp_shifted(v[k][j], shift_log2e);
        }
      }
      acc = {mt, s};
    }
    const MaxSum part_stats = block_merge(acc, max_scratch, sum_scratch);
    if (threadIdx.x == 0) w.stats_out[(blockIdx.x / parts) * parts + part] = part_stats;
    return;
  }

  // ---- normalize: merge the row's partials, then re-read the part (hopefully from L2) ----
  const int64_t b = blockIdx.x - stats_blocks;
  const int part = b % parts;
  const int64_t row_in_wave = b / parts;
  const int64_t row = w.norm_row0 + row_in_wave;
  const MaxSum* partials = w.norm_in + row_in_wave * parts;
  MaxSum acc{-INFINITY, 0.0f};
  for (int i = threadIdx.x; i < parts; i += kSplitThreads) acc = merge(acc, partials[i]);
  const MaxSum row_stats = block_merge(acc, max_scratch, sum_scratch);
  const float M = part_shift(row_stats.m);
  const RowScale rs = row_scale(M, row_stats.s, ep, kDropout);
  // For log-softmax with an all -inf row, M + log(0) must stay NaN-producing: part_shift made
  // M finite (0), so use the true max there.
  const float log_offset = row_stats.m + logf(row_stats.s);

  const T* xr = x + row * cols;
  const int64_t begin = part * part_len, end = min(begin + part_len, cols);
  const int64_t last_tile = begin + (end - 1 - begin) / kSplitTile * kSplitTile;
  for (int64_t t = last_tile; t >= begin; t -= kSplitTile) {
    load_tile<T, kVec>(xr, t, end, v);
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int64_t col = t + (threadIdx.x + int64_t{k} * kSplitThreads) * kVec;
      if (col < end) {
        if (!ep.log_softmax) {
#pragma unroll
          for (int j = 0; j < kVec; ++j) v[k][j] = exp_shifted(v[k][j], rs.max_log2e);
          finish_chunk<T, kDropout, kVec>(v[k], y, row * cols + col, rs, ep);
        } else {
          RowScale lrs = rs;
          lrs.log_offset = log_offset;
          finish_chunk<T, kDropout, kVec>(v[k], y, row * cols + col, lrs, ep);
        }
      }
    }
  }
}

// Resident blocks per SM of one instantiation, read once per device (thread-safe).
template <class Kernel>
int blocks_per_sm(Kernel kernel, int device) {
  static std::once_flag once[64];
  static int cached[64];
  if (device < 0 || device >= 64) return 1;
  std::call_once(once[device], [&] {
    int n = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kSplitThreads, 0) != cudaSuccess) {
      (void)cudaGetLastError();
      n = 1;
    }
    cached[device] = std::max(n, 1);
  });
  return cached[device];
}

template <class T, bool kDropout, int kVec>
Outcome launch_shape(const LaunchArgs& a, int l2_share) {
  auto kernel = split_row_softmax<T, kDropout, kVec>;
  const DeviceLimits& dev = *a.limits;
  const int64_t row_bytes = a.cols * static_cast<int64_t>(sizeof(T));
  // A wave: all rows when the whole matrix fits in 1/l2_share of L2 (so the re-read hits L2
  // even without overlap), else as many rows as fit there (the launch holds this wave's and
  // the previous wave's parts in L2 at once), at least one.
  const int64_t l2_budget = static_cast<int64_t>(dev.l2_bytes) / l2_share;
  int64_t wave_rows = a.rows * row_bytes <= l2_budget ? a.rows : std::max<int64_t>(1, l2_budget / row_bytes);
  wave_rows = std::min<int64_t>(wave_rows, 1 << 16);
  // Parts per row: enough for one row's stats role to fill every SM once, whatever the number
  // of rows. The partition decides the order of the sums, so it must depend on cols (and the
  // device) alone: a row's result may not change with the rows around it (batch invariance,
  // tests/reliability/determinism_cuda_test.cpp). Many rows just bring many more blocks.
  const int64_t resident = int64_t{dev.sm_count} * blocks_per_sm(kernel, a.device);
  const int64_t tiles = (a.cols + kSplitTile - 1) / kSplitTile;
  int64_t parts = std::clamp<int64_t>(resident, 1, tiles);
  const int64_t part_len = (tiles + parts - 1) / parts * kSplitTile;
  parts = (a.cols + part_len - 1) / part_len;
  const int64_t waves = (a.rows + wave_rows - 1) / wave_rows;

  const size_t per_wave = static_cast<size_t>(wave_rows * parts);
  MaxSum* partials = nullptr;
  if (Outcome o = workspace_alloc(a.device, 2 * per_wave * sizeof(MaxSum), a.stream,
                                  reinterpret_cast<void**>(&partials));
      !o.good())
    return o;
  Outcome result = Outcome::ok();
  for (int64_t k = 0; k <= waves && result.good(); ++k) {
    SplitWave w{};
    if (k < waves) {
      w.stats_row0 = k * wave_rows;
      w.stats_rows = static_cast<int>(std::min(wave_rows, a.rows - w.stats_row0));
      w.stats_out = partials + (k & 1) * per_wave;
    }
    if (k >= 1) {
      w.norm_row0 = (k - 1) * wave_rows;
      w.norm_rows = static_cast<int>(std::min(wave_rows, a.rows - w.norm_row0));
      w.norm_in = partials + ((k - 1) & 1) * per_wave;
    }
    const int64_t blocks = (int64_t{w.stats_rows} + w.norm_rows) * parts;
    kernel<<<static_cast<unsigned>(blocks), kSplitThreads, 0, a.stream>>>(
        static_cast<const T*>(a.x), static_cast<T*>(a.y), a.cols, part_len, static_cast<int>(parts),
        w, a.ep);
    result = cuda_launch_outcome("split_row_softmax launch");
  }
  // Freed in stream order even after a failed launch, so the pool never leaks.
  const cudaError_t free_err = workspace_free(partials, a.stream);
  if (result.good() && free_err != cudaSuccess) return cuda_failure("cudaFreeAsync", free_err);
  return result;
}

template <class T, bool kDropout>
Outcome launch_typed(const LaunchArgs& a, int l2_share) {
  if (a.vector_ok) return launch_shape<T, kDropout, Storage<T>::kVec>(a, l2_share);
  return launch_shape<T, kDropout, 1>(a, l2_share);
}

template <class T>
Outcome launch_dtype(const LaunchArgs& a, int l2_share) {
  return a.dropout ? launch_typed<T, true>(a, l2_share) : launch_typed<T, false>(a, l2_share);
}

}  // namespace cuda_kernels

Outcome launch_split_row(const LaunchArgs& a, int l2_share) {
  using namespace cuda_kernels;
  switch (a.dtype) {
    case SOFTMAX_DTYPE_F32: return launch_dtype<float>(a, l2_share);
    case SOFTMAX_DTYPE_F16: return launch_dtype<__half>(a, l2_share);
    case SOFTMAX_DTYPE_BF16: return launch_dtype<__nv_bfloat16>(a, l2_share);
  }
  return Outcome::fail(SOFTMAX_STATUS_INTERNAL_ERROR, "split_row_softmax: unknown dtype");
}

}  // namespace softmax_internal
