// SPDX-License-Identifier: Apache-2.0
// Thrust-based comparison softmax: segmented reductions keyed by the row index.
#include "thrust_softmax.h"

#include <thrust/execution_policy.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/discard_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/reduce.h>
#include <thrust/system/cuda/execution_policy.h>
#include <thrust/system_error.h>
#include <thrust/transform.h>

namespace softmax_compare {

namespace {

struct RowOfElement {
  int64_t cols;
  __host__ __device__ int64_t operator()(int64_t i) const { return i / cols; }
};

struct NanPropagatingMax {
  __host__ __device__ float operator()(float a, float b) const { return (a > b || a != a) ? a : b; }
};

struct ExpMinusRowMax {
  const float* x;
  const float* row_max;
  int64_t cols;
  __host__ __device__ float operator()(int64_t i) const { return expf(x[i] - row_max[i / cols]); }
};

struct Normalize {
  const float* x;
  const float* row_max;
  const float* row_sum;
  int64_t cols;
  bool log_softmax;
  __host__ __device__ float operator()(int64_t i) const {
    const int64_t r = i / cols;
    const float z = x[i] - row_max[r];
    return log_softmax ? z - logf(row_sum[r]) : expf(z) / row_sum[r];
  }
};

}  // namespace

size_t thrust_softmax_workspace_bytes(int64_t rows) { return 2 * static_cast<size_t>(rows) * sizeof(float); }

cudaError_t thrust_row_softmax(const float* x, float* y, int64_t rows, int64_t cols, bool log_softmax,
                               void* workspace, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0 || !x || !y || !workspace) return cudaErrorInvalidValue;
  float* row_max = static_cast<float*>(workspace);
  float* row_sum = row_max + rows;
  const int64_t n = rows * cols;
  const auto policy = thrust::cuda::par.on(stream);
  const thrust::counting_iterator<int64_t> first(0);
  const auto keys = thrust::make_transform_iterator(first, RowOfElement{cols});
  try {
    thrust::reduce_by_key(policy, keys, keys + n, x, thrust::make_discard_iterator(), row_max,
                          thrust::equal_to<int64_t>(), NanPropagatingMax());
    thrust::reduce_by_key(policy, keys, keys + n,
                          thrust::make_transform_iterator(first, ExpMinusRowMax{x, row_max, cols}),
                          thrust::make_discard_iterator(), row_sum, thrust::equal_to<int64_t>(),
                          thrust::plus<float>());
    thrust::transform(policy, first, first + n, y, Normalize{x, row_max, row_sum, cols, log_softmax});
  } catch (const thrust::system_error& e) {
    return static_cast<cudaError_t>(e.code().value());
  } catch (...) {
    return cudaErrorUnknown;
  }
  return cudaGetLastError();
}

}  // namespace softmax_compare
