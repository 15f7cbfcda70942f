/* SPDX-License-Identifier: Apache-2.0 */
// The CPU section's own variants: the copy baseline and the seed article's textbook loop.
// (The library is called through its C API in cpu_section.cpp; oneDNN lives in onednn_variant.)
#pragma once

#include <softmax/softmax.h>

#include <cstddef>
#include <cstdint>

namespace bench {

// memcpy of `bytes`, cut into one contiguous chunk per thread: the copy rate the softmax
// variants are compared with (each byte read once and written once, like a softmax's floor).
void parallel_copy(const void* src, void* dst, size_t bytes, int threads);

// The seed article's CPU softmax, row by row: max loop, exp loop that stores exp into y and sums
// in one float, divide loop. Rows are spread over the threads; a single row runs on one thread,
// as in the article. Compiled with -O3 and no -ffast-math, as the CPU anchor.
void textbook_3pass_rows(const float* x, float* y, int64_t rows, int64_t cols, int threads);

// Fills n elements of `dtype` with bench::input_value(seed, i), in parallel.
void fill_host_input(void* dst, softmax_dtype dtype, int64_t n, uint64_t seed, int threads);

}  // namespace bench
