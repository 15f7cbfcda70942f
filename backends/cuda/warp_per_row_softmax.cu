// Warp-per-row softmax for rows of up to 1024 columns: a group of `width` lanes (1..32, a power
// of two) owns one row and holds it in registers, so global memory is read once and written
// once. Tiny rows use narrow groups and several rows per warp, so 32 columns keep all 32 lanes
// busy (8 lanes x one float4 each, 4 rows per warp) instead of wasting 31 of them. Reductions
// are xor shuffles inside the group: no shared memory, no barriers.
#include <cuda_runtime.h>

#include <algorithm>

#include "backends/cuda/cuda_outcome.h"
#include "backends/cuda/launch_args.h"
#include "backends/cuda/row_math.cuh"

namespace softmax_internal {
namespace cuda_kernels {

constexpr int kWarpKernelThreads = 128;

// kVec: elements per access (the 16-byte vector width, or 1 for the scalar path used when the
// pointers or cols do not allow vectors). kPerLane: accesses per lane, so a group of width w
// holds w * kPerLane * kVec columns. kRows: rows per group per iteration; tiny rows (one access
// per lane) take 2, so each lane has two independent loads in flight instead of one.
template <class T, bool kDropout, int kVec, int kPerLane, int kRows>
__global__ void __launch_bounds__(kWarpKernelThreads)
    warp_per_row_softmax(const T* x, T* y, int64_t rows, int cols, int width_log2, RowEpilogue ep) {
  const int width = 1 << width_log2;
  const int lane = threadIdx.x & 31;
  const int group_lane = lane & (width - 1);
  const int rows_per_warp = 32 >> width_log2;
  const int64_t warp = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) >> 5;
  const int64_t warps = (int64_t{gridDim.x} * blockDim.x) >> 5;
  const int64_t rows_per_step = int64_t{rows_per_warp} * kRows;

  // The loop bound is per warp so that every lane takes part in every shuffle.
  for (int64_t base = warp * rows_per_step; base < rows; base += warps * rows_per_step) {
    float v[kRows][kPerLane][kVec];
    float m[kRows], s[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int64_t row = base + r * rows_per_warp + (lane >> width_log2);
      m[r] = -INFINITY;
#pragma unroll
      for (int k = 0; k < kPerLane; ++k) {
        const int col = (group_lane + k * width) * kVec;
        if (row < rows && col < cols) {
          Chunk<T, kVec>::load(x + row * cols + col, v[r][k]);
#pragma unroll
          for (int j = 0; j < kVec; ++j) m[r] = fmaxf(m[r], v[r][k][j]);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) m[r] = group_max(m[r], width);

#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int64_t row = base + r * rows_per_warp + (lane >> width_log2);
      const float m_log2e = m[r] * kLog2e;
      s[r] = 0.0f;
#pragma unroll
      for (int k = 0; k < kPerLane; ++k) {
        const int col = (group_lane + k * width) * kVec;
        if (row < rows && col < cols) {
#pragma unroll
          for (int j = 0; j < kVec; ++j) {
            const float e = exp_shifted(v[r][k][j], m_log2e);
            s[r] += e;
            if (!ep.log_softmax) v[r][k][j] = e;  // keep exp for the output; log needs x itself
          }
        }
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) s[r] = group_sum(s[r], width);

#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int64_t row = base + r * rows_per_warp + (lane >> width_log2);
      if (row < rows) {
        const RowScale rs = row_scale(m[r], s[r], ep, kDropout);
#pragma unroll
        for (int k = 0; k < kPerLane; ++k) {
          const int col = (group_lane + k * width) * kVec;
          if (col < cols) finish_chunk<T, kDropout, kVec>(v[r][k], y, row * cols + col, rs, ep);
        }
      }
    }
  }
}

template <class T, bool kDropout, int kVec, int kPerLane, int kRows>
Outcome launch_shape(const LaunchArgs& a, int width_log2, int grid_waves) {
  const int64_t rows_per_block = int64_t{kWarpKernelThreads / 32} * (32 >> width_log2) * kRows;
  const int64_t blocks_needed = (a.rows + rows_per_block - 1) / rows_per_block;
  // A grid of `grid_waves` full waves of resident blocks; the kernel's row loop takes the rest.
  const int64_t cap = int64_t{a.limits->sm_count} * (a.limits->max_threads_per_sm / kWarpKernelThreads) * grid_waves;
  const unsigned grid = static_cast<unsigned>(std::min(blocks_needed, cap));
  warp_per_row_softmax<T, kDropout, kVec, kPerLane, kRows><<<grid, kWarpKernelThreads, 0, a.stream>>>(
      static_cast<const T*>(a.x), static_cast<T*>(a.y), a.rows, static_cast<int>(a.cols),
      width_log2, a.ep);
  return cuda_launch_outcome("warp_per_row_softmax launch");
}

int ceil_log2(int64_t n) {
  int l = 0;
  while ((int64_t{1} << l) < n) ++l;
  return l;
}

// Group width and accesses per lane for `n` accesses per row: up to 32 accesses a row gets a
// group of the next power of two lanes, one access each (and two rows per group); longer rows
// take the whole warp and the next power of two accesses per lane.
template <class T, bool kDropout, int kVec, int... kPerLane>
Outcome launch_for_accesses(const LaunchArgs& a, int64_t n, int grid_waves) {
  if (n <= 32) return launch_shape<T, kDropout, kVec, 1, 2>(a, ceil_log2(n), grid_waves);
  const int per_lane = 1 << ceil_log2((n + 31) / 32);
  Outcome o = Outcome::fail(SOFTMAX_STATUS_INTERNAL_ERROR,
                            "warp_per_row_softmax: no instantiation for " + std::to_string(n) +
                                " accesses per row");
  ((per_lane == kPerLane ? (o = launch_shape<T, kDropout, kVec, kPerLane, 1>(a, 5, grid_waves), 0) : 0), ...);
  return o;
}

template <class T, bool kDropout>
Outcome launch_typed(const LaunchArgs& a, int grid_waves) {
  constexpr int kVec = Storage<T>::kVec;
  if (a.vector_ok) {
    if constexpr (kVec == 4) {
      return launch_for_accesses<T, kDropout, 4, 2, 4, 8>(a, a.cols / 4, grid_waves);
    } else {
      return launch_for_accesses<T, kDropout, 8, 2, 4>(a, a.cols / 8, grid_waves);
    }
  }
  return launch_for_accesses<T, kDropout, 1, 2, 4, 8, 16, 32>(a, a.cols, grid_waves);
}

template <class T>
Outcome launch_dtype(const LaunchArgs& a, int grid_waves) {
  return a.dropout ? launch_typed<T, true>(a, grid_waves) : launch_typed<T, false>(a, grid_waves);
}

}  // namespace cuda_kernels

Outcome launch_warp_per_row(const LaunchArgs& a, int grid_waves) {
  using namespace cuda_kernels;
  switch (a.dtype) {
    case SOFTMAX_DTYPE_F32: return launch_dtype<float>(a, grid_waves);
    case SOFTMAX_DTYPE_F16: return launch_dtype<__half>(a, grid_waves);
    case SOFTMAX_DTYPE_BF16: return launch_dtype<__nv_bfloat16>(a, grid_waves);
  }
  return Outcome::fail(SOFTMAX_STATUS_INTERNAL_ERROR, "warp_per_row_softmax: unknown dtype");
}

}  // namespace softmax_internal
