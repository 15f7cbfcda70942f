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
// holds w * kPerLane * kVec columns.
template <class T, bool kDropout, int kVec, int kPerLane>
__global__ void __launch_bounds__(kWarpKernelThreads)
    warp_per_row_softmax(const T* x, T* y, int64_t rows, int cols, int width_log2, RowEpilogue ep) {
  const int width = 1 << width_log2;
  const int lane = threadIdx.x & 31;
  const int group_lane = lane & (width - 1);
  const int rows_per_warp = 32 >> width_log2;
  const int64_t warp = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) >> 5;
  const int64_t warps = (int64_t{gridDim.x} * blockDim.x) >> 5;

  // The loop bound is per warp so that every lane takes part in every shuffle.
  for (int64_t base = warp * rows_per_warp; base < rows; base += warps * rows_per_warp) {
    const int64_t row = base + (lane >> width_log2);
    const bool row_ok = row < rows;
    const int64_t row_start = row * cols;

    float v[kPerLane][kVec];
    float m = -INFINITY;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int col = (group_lane + k * width) * kVec;
      if (row_ok && col < cols) {
        Chunk<T, kVec>::load(x + row_start + col, v[k]);
#pragma unroll
        for (int j = 0; j < kVec; ++j) m = fmaxf(m, v[k][j]);
      }
    }
    m = group_max(m, width);
    const float m_log2e = m * kLog2e;

    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int col = (group_lane + k * width) * kVec;
      if (row_ok && col < cols) {
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          const float e = exp_shifted(v[k][j], m_log2e);
          s += e;
          if (!ep.log_softmax) v[k][j] = e;  // keep exp for the output; log needs x itself
        }
      }
    }
    s = group_sum(s, width);

    if (row_ok) {
      const RowScale rs = row_scale(m, s, ep, kDropout);
#pragma unroll
      for (int k = 0; k < kPerLane; ++k) {
        const int col = (group_lane + k * width) * kVec;
        if (col < cols) finish_chunk<T, kDropout, kVec>(v[k], y, row_start + col, rs, ep);
      }
    }
  }
}

template <class T, bool kDropout, int kVec, int kPerLane>
Outcome launch_shape(const LaunchArgs& a, int width_log2) {
  const int rows_per_block = (kWarpKernelThreads / 32) * (32 >> width_log2);
  const int64_t blocks_needed = (a.rows + rows_per_block - 1) / rows_per_block;
  // Beyond ~2^31 blocks the kernel's row loop takes over.
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(blocks_needed, int64_t{1} << 30));
  warp_per_row_softmax<T, kDropout, kVec, kPerLane><<<grid, kWarpKernelThreads, 0, a.stream>>>(
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
// group of the next power of two lanes, one access each; longer rows take the whole warp and
// the next power of two accesses per lane.
template <class T, bool kDropout, int kVec, int... kPerLane>
Outcome launch_for_accesses(const LaunchArgs& a, int64_t n) {
  if (n <= 32) return launch_shape<T, kDropout, kVec, 1>(a, ceil_log2(n));
  const int per_lane = 1 << ceil_log2((n + 31) / 32);
  Outcome o = Outcome::fail(SOFTMAX_STATUS_INTERNAL_ERROR,
                            "warp_per_row_softmax: no instantiation for " + std::to_string(n) +
                                " accesses per row");
  ((per_lane == kPerLane ? (o = launch_shape<T, kDropout, kVec, kPerLane>(a, 5), 0) : 0), ...);
  return o;
}

template <class T, bool kDropout>
Outcome launch_typed(const LaunchArgs& a) {
  constexpr int kVec = Storage<T>::kVec;
  if (a.vector_ok) {
    if constexpr (kVec == 4) {
      return launch_for_accesses<T, kDropout, 4, 2, 4, 8>(a, a.cols / 4);
    } else {
      return launch_for_accesses<T, kDropout, 8, 2, 4>(a, a.cols / 8);
    }
  }
  return launch_for_accesses<T, kDropout, 1, 2, 4, 8, 16, 32>(a, a.cols);
}

template <class T>
Outcome launch_dtype(const LaunchArgs& a) {
  return a.dropout ? launch_typed<T, true>(a) : launch_typed<T, false>(a);
}

}  // namespace cuda_kernels

Outcome launch_warp_per_row(const LaunchArgs& a) {
  using namespace cuda_kernels;
  switch (a.dtype) {
    case SOFTMAX_DTYPE_F32: return launch_dtype<float>(a);
    case SOFTMAX_DTYPE_F16: return launch_dtype<__half>(a);
    case SOFTMAX_DTYPE_BF16: return launch_dtype<__nv_bfloat16>(a);
  }
  return Outcome::fail(SOFTMAX_STATUS_INTERNAL_ERROR, "warp_per_row_softmax: unknown dtype");
}

}  // namespace softmax_internal
