// SPDX-License-Identifier: Apache-2.0
// Rung 01 of the seed article's ladder (seed 000): the CPU loop moved onto the GPU unchanged.
//
// What this rung is: one thread of one block walks the whole vector three times (max, sum of
// exp(x - max), write exp(x - max) / sum), exactly the CPU algorithm. Why it is here: it is the
// baseline that shows the GPU is nothing without parallelism: a single thread has one load in
// flight at a time and runs at a few hundred MB/s at best, about 1/10000 of the memory system.
// Its float running sum also drifts on long vectors, like the CPU loop's.
#pragma once

#include <cstdint>

namespace seed_ladder {

__global__ void naive_one_thread_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  float max_value = -INFINITY;
  for (int64_t i = 0; i < n; ++i) max_value = fmaxf(max_value, x[i]);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += expf(x[i] - max_value);
  for (int64_t i = 0; i < n; ++i) y[i] = expf(x[i] - max_value) / sum;
}

}  // namespace seed_ladder
