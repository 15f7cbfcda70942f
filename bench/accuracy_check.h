/* SPDX-License-Identifier: Apache-2.0 */
// The check every variant passes before it is timed: sampled rows of its output against the
// textbook formula evaluated in float64 on the very same (stored, rounded) input values.
#pragma once

#include <softmax/softmax.h>

#include <cstdint>
#include <string>
#include <vector>

namespace bench {

enum class Expect { Softmax, LogSoftmax, Dropout };

struct DropoutExpect {
  float p = 0;
  uint64_t seed = 0;
  uint64_t offset = 0;
};

// float64 max and sum of exp(x - max) of one row.
struct RowStats {
  double max = 0;
  double sum = 0;
};
RowStats row_stats(const float* x, int64_t cols);

struct RowError {
  double max_err = 0;     // worst relative error in the row (inf for NaN or a wrong zero/mask bit)
  int64_t worst_col = -1;
  std::string problem;    // set when something other than rounding is wrong
};

// Relative error: |got - want| / (|want| + tiny(dtype)) for probabilities (tiny keeps f16's
// flushed-to-zero tails from counting as 100% errors), |got - want| / max(1, |want|) for
// log-probabilities. Dropout: want = keep ? softmax / (1 - p) : 0 with keep from the shared Philox
// definition (flat index = flat_base + col); a dropped element must be exactly 0 and the mask,
// when given, must equal keep bit for bit.
RowError row_error(const float* x, const RowStats& stats, const float* y, const uint8_t* mask,
                   int64_t cols, softmax_dtype dtype, Expect expect, const DropoutExpect& dropout,
                   int64_t flat_base);

// Backward (softmax_rows_backward's formulas) of one row from the stored y and dy, against
// float64: dot = sum(y * dy) (log: sum(dy)), want = y * (dy - dot) (log: dy - exp(y) * dot).
// The error of element c is |got - want| / bound(c), with bound the size of the terms that were
// rounded: |y| (|dy| + |dot| + sum|y dy|), or |dy| + exp(y) (|dot| + sum|dy|) for log. (dx is a
// difference, so a plain relative error would blow up wherever dy crosses the row's dot.)
RowError grad_row_error(const float* y, const float* dy, const float* dx, int64_t cols, bool log);

// softmax_dropout_backward of one row from x and dy, against float64: s = softmax(x), g = keep ?
// dy / (1 - p) : 0 with keep from the shared Philox definition (flat index = flat_base + col),
// then the softmax backward's formula and error bound with y = s and dy = g.
RowError dropout_grad_row_error(const float* x, const float* dy, const float* dx, int64_t cols,
                                const DropoutExpect& dropout, int64_t flat_base);

// The bound a variant's max_err is held to. `float_sum` marks the reference variants that sum in
// plain float in one sequence (textbook loop, the seed's kernels, oneDNN): on long rows their
// error grows with the row (a float sum is 5% off at 64M elements), so they get a bound that only
// catches real bugs; their measured error is printed either way.
double tolerance_for(softmax_dtype dtype, bool float_sum);

// Stored dtype -> float (exact).
void widen(const void* src, softmax_dtype dtype, int64_t n, float* dst);

// Rows to check: the first, the last and a few in between, at most max_elements in all (but
// always at least one row, however long).
std::vector<int64_t> sample_rows(int64_t rows, int64_t cols, int64_t max_elements, uint64_t seed);

}  // namespace bench
