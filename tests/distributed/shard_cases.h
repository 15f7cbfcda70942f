/* SPDX-License-Identifier: Apache-2.0 */
// What the sharded-row tests run: how the columns of a row are split over ranks, and full
// [rows, cols] inputs (random, or rows built to break a careless merge). Every rank builds the
// same full matrix from a shared seed and takes its own columns.
#pragma once

#include <softmax/softmax.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "reference.h"

namespace softmax_shard_test {

using softmax_test::Buffer;

// Columns of each rank, in rank order; they add up to the row length.
struct Layout {
  std::string name;
  std::vector<int64_t> cols;

  int64_t first_col(int rank) const {
    int64_t c = 0;
    for (int r = 0; r < rank; ++r) c += cols[size_t(r)];
    return c;
  }
};

// Even; ragged with a one-column slice and an empty slice (more empty slices when there are more
// ranks than columns to go round); all on the last rank (every other slice empty).
inline std::vector<Layout> layouts(int ranks, int64_t total) {
  std::vector<Layout> out;
  Layout even{"even", std::vector<int64_t>(size_t(ranks), total / ranks)};
  for (int64_t i = 0; i < total % ranks; ++i) even.cols[size_t(i)] += 1;
  out.push_back(even);

  Layout ragged{"ragged", std::vector<int64_t>(size_t(ranks), 0)};
  ragged.cols[0] = 1;  // rank 1 (or, with 2 ranks, nobody else) keeps an empty slice
  int64_t left = total - 1;
  if (ranks == 2) {
    ragged.cols[1] = left;
  } else {
    // Ranks 2.. share the rest unevenly: each takes two thirds of what is left, the last all.
    for (int r = 2; r < ranks; ++r) {
      const int64_t take = r == ranks - 1 ? left : std::min(left, std::max<int64_t>(1, (2 * left) / 3));
      ragged.cols[size_t(r)] = take;
      left -= take;
    }
  }
  out.push_back(ragged);

  if (ranks > 1) {
    Layout last{"all on the last rank", std::vector<int64_t>(size_t(ranks), 0)};
    last.cols.back() = total;
    out.push_back(last);
  }
  return out;
}

// The largest finite value of a storage type, as a double.
inline double largest_finite(softmax_dtype t) {
  return t == SOFTMAX_DTYPE_F16 ? 65504.0 : double(std::numeric_limits<float>::max());
}

// Rows that a wrong merge gets wrong, one kind per row (row r uses kind r % 8):
//   0 random in [-8, 8]
//   1 all -inf: NaN in every slice's output (the unsharded rule)
//   2 -inf except one finite element: slices without it have (max -inf, sum 0)
//   3 huge magnitudes of both signs, up to 98% of the type's largest value (so that rounding to
//     the type stays finite): x - max overflows to -inf
//   4 one NaN: a NaN row
//   5 one +inf: a NaN row
//   6 two clusters 160 apart (+80 and -80): slice maxima far apart, exp(m - M) underflows
//   7 random in [-30, 30]
inline Buffer special_input(softmax_dtype t, int64_t rows, int64_t cols, uint64_t seed) {
  Buffer x(t, size_t(rows * cols));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::uniform_int_distribution<int64_t> col(0, cols - 1);
  const double inf = std::numeric_limits<double>::infinity();
  for (int64_t r = 0; r < rows; ++r) {
    const int kind = int(r % 8);
    const int64_t special = col(rng);
    for (int64_t c = 0; c < cols; ++c) {
      const double u = unit(rng);
      double v = 8.0 * u;
      switch (kind) {
        case 1: v = -inf; break;
        case 2: v = c == special ? 3.0 * u : -inf; break;
        case 3: v = (u < 0 ? -1.0 : 1.0) * largest_finite(t) * (0.5 + 0.48 * std::fabs(u)); break;
        case 4: v = c == special ? std::numeric_limits<double>::quiet_NaN() : v; break;
        case 5: v = c == special ? inf : v; break;
        case 6: v = (c % 3 == 0 ? 80.0 : -80.0) + u; break;
        case 7: v = 30.0 * u; break;
        default: break;
      }
      x.set(size_t(r * cols + c), v);
    }
  }
  return x;
}

// Columns [first, first + width) of every row of a [rows, cols] matrix.
inline Buffer slice(const Buffer& full, int64_t rows, int64_t cols, int64_t first, int64_t width) {
  Buffer out(full.dtype, size_t(rows * width));
  const size_t esize = softmax_test::element_size(full.dtype);
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(full.bytes.begin() + ptrdiff_t((r * cols + first) * int64_t(esize)), size_t(width) * esize,
                out.bytes.begin() + ptrdiff_t(r * width * int64_t(esize)));
  }
  return out;
}

}  // namespace softmax_shard_test
