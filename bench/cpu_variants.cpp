// SPDX-License-Identifier: Apache-2.0
// Copy baseline, textbook 3-pass loop and input fill for the CPU section.
#include "cpu_variants.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/common/half_bits.h"
#include "input_fill.h"

namespace bench {

void parallel_copy(const void* src, void* dst, size_t bytes, int threads) {
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
#pragma omp parallel num_threads(threads)
  {
    const size_t t = static_cast<size_t>(omp_get_thread_num());
    const size_t n = static_cast<size_t>(omp_get_num_threads());
    // Chunks rounded to 4 KiB so no two threads share a page.
    const size_t chunk = ((bytes + n - 1) / n + 4095) & ~size_t(4095);
    const size_t begin = std::min(bytes, t * chunk), end = std::min(bytes, begin + chunk);
    if (end > begin) std::memcpy(d + begin, s + begin, end - begin);
  }
}

namespace {

// One row, exactly the article's three steps (our own code): the float running sum is the
// reason its error grows with the row length.
void textbook_row(const float* x, float* y, int64_t n) {
  float max_value = x[0];
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > max_value) max_value = x[i];
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    y[i] = std::exp(x[i] - max_value);
    sum += y[i];
  }
  for (int64_t i = 0; i < n; ++i) y[i] /= sum;
}

}  // namespace

void textbook_3pass_rows(const float* x, float* y, int64_t rows, int64_t cols, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t r = 0; r < rows; ++r) textbook_row(x + r * cols, y + r * cols, cols);
}

void fill_host_input(void* dst, softmax_dtype dtype, int64_t n, uint64_t seed, int threads) {
  float* f = static_cast<float*>(dst);
  uint16_t* h = static_cast<uint16_t*>(dst);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float v = input_value(seed, static_cast<uint64_t>(i));
    if (dtype == SOFTMAX_DTYPE_F32) f[i] = v;
    else if (dtype == SOFTMAX_DTYPE_BF16) h[i] = softmax_internal::float_to_bf16(v);
    else h[i] = softmax_internal::float_to_f16(v);
  }
}

}  // namespace bench
