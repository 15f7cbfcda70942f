// SPDX-License-Identifier: Apache-2.0
// Rung 03 of the seed article's ladder: rung 02 with 16-byte (float4) loads and stores.
//
// What changed from 02: each thread moves four floats per memory instruction (LDG.128 / STG.128
// instead of LDG.32), a quarter of the instructions and of the memory transactions for the same
// bytes, with a scalar tail for the last n % 4 elements; the divide became a multiply by one
// reciprocal per vector. Why: with one block the bytes in flight per SM are what limits the
// speed, and a 16-byte load puts four times as many bytes in flight per instruction (the seed
// measured 13 -> 39 GB/s on the H200). What it still leaves: one SM for the whole vector, three
// sweeps over x. The library splits the vector over every SM instead.
// Requires x and y 16-byte aligned (the launcher checks).
#pragma once

#include <cstdint>

#include "02_warp_shuffle_reduce.cuh"

namespace seed_ladder {

__global__ void __launch_bounds__(kLadderThreads) float4_vectorized_kernel(const float* __restrict__ x,
                                                                          float* __restrict__ y, int64_t n) {
  __shared__ float scratch[33];
  const int64_t vectors = n / 4;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float4* y4 = reinterpret_cast<float4*>(y);

  float m = -INFINITY;
  for (int64_t i = threadIdx.x; i < vectors; i += blockDim.x) {
    const float4 v = x4[i];
    m = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
  }
  for (int64_t i = 4 * vectors + threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, x[i]);
  m = block_reduce_broadcast<true>(m, scratch);

  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < vectors; i += blockDim.x) {
    const float4 v = x4[i];
    s += expf(v.x - m) + expf(v.y - m) + expf(v.z - m) + expf(v.w - m);
  }
  for (int64_t i = 4 * vectors + threadIdx.x; i < n; i += blockDim.x) s += expf(x[i] - m);
  s = block_reduce_broadcast<false>(s, scratch);

  const float inv = 1.0f / s;
  for (int64_t i = threadIdx.x; i < vectors; i += blockDim.x) {
    const float4 v = x4[i];
    y4[i] = make_float4(expf(v.x - m) * inv, expf(v.y - m) * inv, expf(v.z - m) * inv, expf(v.w - m) * inv);
  }
  for (int64_t i = 4 * vectors + threadIdx.x; i < n; i += blockDim.x) y[i] = expf(x[i] - m) * inv;
}

}  // namespace seed_ladder
