// SPDX-License-Identifier: Apache-2.0
// CUB-based comparison softmax: block per row, cub::BlockReduce for the max and the sum.
#include "cub_softmax.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cub/block/block_reduce.cuh>

namespace softmax_compare {

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float load_as_float(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load_as_float(const __half* p, int64_t i) { return __half2float(p[i]); }
__device__ __forceinline__ float load_as_float(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void store_float(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store_float(__half* p, int64_t i, float v) { p[i] = __float2half_rn(v); }
__device__ __forceinline__ void store_float(__nv_bfloat16* p, int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }

// Max that lets NaN win (fmaxf would drop it), so a NaN anywhere in a row makes the row NaN, as
// the float64 formula does.
struct NanPropagatingMax {
  __device__ __forceinline__ float operator()(float a, float b) const { return (a > b || a != a) ? a : b; }
};

template <typename T>
__global__ void __launch_bounds__(kThreads) cub_block_softmax_kernel(const T* __restrict__ x, T* __restrict__ y,
                                                                     int64_t cols, bool log_softmax) {
  using BlockReduce = cub::BlockReduce<float, kThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  __shared__ float row_max, row_sum;
  const T* xr = x + static_cast<int64_t>(blockIdx.x) * cols;
  T* yr = y + static_cast<int64_t>(blockIdx.x) * cols;

  const NanPropagatingMax max_op;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) m = max_op(m, load_as_float(xr, c));
  m = BlockReduce(temp).Reduce(m, max_op);
  if (threadIdx.x == 0) row_max = m;
  __syncthreads();
  m = row_max;

  float s = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) s += expf(load_as_float(xr, c) - m);
  s = BlockReduce(temp).Sum(s);  // temp is free again: the barrier above separates the two uses
  if (threadIdx.x == 0) row_sum = s;
  __syncthreads();
  s = row_sum;

  if (log_softmax) {
    const float log_s = logf(s);
    for (int64_t c = threadIdx.x; c < cols; c += kThreads) store_float(yr, c, load_as_float(xr, c) - m - log_s);
  } else {
    const float inv = 1.0f / s;
    for (int64_t c = threadIdx.x; c < cols; c += kThreads) store_float(yr, c, expf(load_as_float(xr, c) - m) * inv);
  }
}

template <typename T>
cudaError_t launch(const void* x, void* y, int64_t rows, int64_t cols, bool log_softmax, cudaStream_t stream) {
  cub_block_softmax_kernel<T><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      static_cast<const T*>(x), static_cast<T*>(y), cols, log_softmax);
  return cudaGetLastError();
}

}  // namespace

cudaError_t cub_block_softmax(const void* x, void* y, int64_t rows, int64_t cols, softmax_dtype dtype,
                              bool log_softmax, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0 || rows > 0x7fffffff || !x || !y) return cudaErrorInvalidValue;
  switch (dtype) {
    case SOFTMAX_DTYPE_F32: return launch<float>(x, y, rows, cols, log_softmax, stream);
    case SOFTMAX_DTYPE_F16: return launch<__half>(x, y, rows, cols, log_softmax, stream);
    case SOFTMAX_DTYPE_BF16: return launch<__nv_bfloat16>(x, y, rows, cols, log_softmax, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace softmax_compare
