// SPDX-License-Identifier: Apache-2.0
// The sharded-row functions on the CPU. Rows are split by columns into 1..4 uneven shards (one
// column wide, all -inf, ...), each shard goes through softmax_row_stats, the statistics are
// merged in double with the rule the header documents, softmax_rows_from_stats finishes every
// shard, and the reassembled rows must be the unsharded softmax (float64 reference, and the
// library's softmax_rows where it runs the pair). The same for the backward halves against
// softmax_rows_backward, which one shard must reproduce bit for bit. Plus the statistics of
// special rows, long rows, and thread-count independence.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "grad_test_util.h"

namespace {

using softmax_grad_test::Buffer;
using softmax_grad_test::Pair;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Columns [begin, end) of a [rows, cols] matrix.
struct Shard {
  int64_t begin, end;
  int64_t width() const { return end - begin; }
};

// `count` shards of random, uneven widths; when there is room, the first one is one column wide.
std::vector<Shard> split(int64_t cols, int count, uint64_t seed) {
  count = int(std::min<int64_t>(count, cols));
  std::mt19937_64 rng(seed);
  std::vector<int64_t> cuts;
  if (count > 1) cuts.push_back(1);
  while (int64_t(cuts.size()) < count - 1) {
    const int64_t c = 2 + int64_t(rng() % uint64_t(std::max<int64_t>(1, cols - 2)));
    if (c < cols && std::find(cuts.begin(), cuts.end(), c) == cuts.end()) cuts.push_back(c);
  }
  std::sort(cuts.begin(), cuts.end());
  std::vector<Shard> out;
  int64_t begin = 0;
  for (const int64_t c : cuts) {
    out.push_back({begin, c});
    begin = c;
  }
  out.push_back({begin, cols});
  return out;
}

Buffer columns(const Buffer& m, int64_t rows, int64_t cols, Shard s) {
  Buffer out(m.dtype, size_t(rows * s.width()));
  const size_t es = softmax_test::element_size(m.dtype);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(out.bytes.data() + size_t(r * s.width()) * es, m.bytes.data() + size_t(r * cols + s.begin) * es,
                size_t(s.width()) * es);
  return out;
}

void put_columns(const Buffer& part, Buffer* m, int64_t rows, int64_t cols, Shard s) {
  const size_t es = softmax_test::element_size(m->dtype);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(m->bytes.data() + size_t(r * cols + s.begin) * es, part.bytes.data() + size_t(r * s.width()) * es,
                size_t(s.width()) * es);
}

// The largest finite value of a storage type.
double max_finite(softmax_dtype t) {
  return t == SOFTMAX_DTYPE_F16 ? 65504.0 : t == SOFTMAX_DTYPE_BF16 ? 0x1.fep127 : double(FLT_MAX);
}

// Random rows with one pattern per row: finite; all -inf; a NaN; a +inf; the first shard's
// columns all -inf (the first shard is one column wide when there are several); values spread
// over the whole finite range of x's type, both extremes included; -inf in every third column;
// integers from -120 to 5, whose results reach down into the subnormals and to exact zeros
// (integers, so that x - max is exact in fp32 and only the exp is judged: the rounding of a
// non-integer x - max of size 100 alone exceeds the fp32 tolerance).
constexpr int64_t kRows = 8;
Buffer special_rows(softmax_dtype t, int64_t cols, uint64_t seed) {
  Buffer x = softmax_grad_test::uniform(t, size_t(kRows * cols), seed, -8.0, 8.0);
  auto at = [&](int64_t r, int64_t c) { return size_t(r * cols + c); };
  std::mt19937_64 rng(seed + 7);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  for (int64_t c = 0; c < cols; ++c) {
    x.set(at(1, c), -kInf);
    x.set(at(5, c), unit(rng) * max_finite(t));
    if (c % 3 == 0) x.set(at(6, c), -kInf);
    x.set(at(7, c), std::floor(unit(rng) * 62.5 - 57.5));
  }
  x.set(at(2, cols / 2), kNaN);
  x.set(at(3, cols - 1), kInf);
  x.set(at(4, 0), -kInf);
  x.set(at(5, cols / 3), max_finite(t));
  x.set(at(5, cols - 1), -max_finite(t));
  return x;
}

// The documented merge, in double: M = max of the shard maxima, S = sum of the shard sums
// scaled by exp(shard max - M), terms whose sum is 0 dropped.
struct Merged {
  std::vector<float> max, sumexp;
};

Merged merge(const std::vector<std::vector<float>>& maxes, const std::vector<std::vector<float>>& sums, int64_t rows) {
  Merged m{std::vector<float>(static_cast<size_t>(rows)), std::vector<float>(static_cast<size_t>(rows))};
  for (int64_t r = 0; r < rows; ++r) {
    double mx = -kInf;
    for (const auto& shard : maxes) mx = std::max(mx, double(shard[size_t(r)]));
    double s = 0.0;
    for (size_t k = 0; k < sums.size(); ++k)
      if (sums[k][size_t(r)] != 0.0f) s += double(sums[k][size_t(r)]) * std::exp(double(maxes[k][size_t(r)]) - mx);
    m.max[size_t(r)] = float(mx);
    m.sumexp[size_t(r)] = float(s);
  }
  return m;
}

Buffer sharded_forward(const Buffer& x, Pair p, int64_t rows, int64_t cols, const std::vector<Shard>& shards, bool log,
                       int threads) {
  const softmax_options o = softmax_grad_test::options(p, threads, log);
  std::vector<std::vector<float>> maxes, sums;
  std::vector<Buffer> xs;
  for (const Shard s : shards) {
    xs.push_back(columns(x, rows, cols, s));
    maxes.emplace_back(size_t(rows), -1.0f);
    sums.emplace_back(size_t(rows), -1.0f);
    EXPECT_EQ(softmax_row_stats(xs.back().data(), maxes.back().data(), sums.back().data(), rows, s.width(), p.x, &o),
              SOFTMAX_STATUS_SUCCESS)
        << softmax_last_error();
  }
  const Merged m = merge(maxes, sums, rows);
  Buffer y(p.y, x.size());
  y.poison();
  for (size_t k = 0; k < shards.size(); ++k) {
    Buffer ys(p.y, xs[k].size());
    ys.poison();
    EXPECT_EQ(softmax_rows_from_stats(xs[k].data(), ys.data(), m.max.data(), m.sumexp.data(), rows, shards[k].width(),
                                      p.x, &o),
              SOFTMAX_STATUS_SUCCESS)
        << softmax_last_error();
    put_columns(ys, &y, rows, cols, shards[k]);
  }
  return y;
}

// v rounded to storage type t (a value beyond t's range becomes an infinity).
double stored(softmax_dtype t, double v) {
  Buffer b(t, 1);
  b.set(0, v);
  return b.get(0);
}

// y against the float64 softmax of x: the reference rounded to y's type where that makes it
// infinite (log-softmax of extreme spreads), else reference.h's tolerance. A 16-bit y is rounded
// from an f32 result, so a reference within half an f32 ulp of the type's overflow threshold may
// come out infinite through that double rounding (bf16: -3.39617752e38 rounds to the f32
// -0x1.ffp127, halfway between bf16's largest finite value and infinity, then to -inf): allowed
// for.
::testing::AssertionResult matches_unsharded(const Buffer& x, const Buffer& y, int64_t rows, int64_t cols, bool log) {
  std::vector<double> ref;
  for (int64_t r = 0; r < rows; ++r) {
    softmax_test::reference_row(x, size_t(r), size_t(cols), log, &ref);
    for (int64_t c = 0; c < cols; ++c) {
      const double got = y.get(size_t(r * cols + c)), want = ref[size_t(c)];
      const double want_stored = stored(y.dtype, want);
      const bool overflowed_via_f32 = std::isinf(got) && got == stored(y.dtype, double(static_cast<float>(want)));
      const double tol = softmax_test::tolerance(y.dtype, want, log, size_t(cols));
      const bool ok = std::isinf(want_stored) ? got == want_stored
                                              : overflowed_via_f32 || softmax_grad_test::value_ok(got, want, tol);
      if (!ok) return ::testing::AssertionFailure() << "row " << r << " col " << c << ": got " << got << " want " << want;
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(CpuShardedRows, ShardsMergedEqualTheUnshardedSoftmax) {
  for (const Pair p : softmax_grad_test::float_pairs()) {
    for (const int64_t cols : {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{300}, int64_t{2 * 8192 + 9}}) {
      for (const bool log : {false, true}) {
        // Long rows: one shard and the most shards (the split code is the same for all counts).
        for (const int count : cols > 8192 ? std::vector<int>{1, 4} : std::vector<int>{1, 2, 3, 4}) {
          const uint64_t seed = softmax_test::fresh_seed();
          const Buffer x = special_rows(p.x, cols, seed);
          const std::vector<Shard> shards = split(cols, count, seed);
          const Buffer y = sharded_forward(x, p, kRows, cols, shards, log, 2);
          ASSERT_TRUE(matches_unsharded(x, y, kRows, cols, log))
              << softmax_grad_test::name(p) << " cols " << cols << " shards " << shards.size() << (log ? " log" : "")
              << " seed " << seed;
          if (p.x != p.y) continue;
          // The library's own unsharded forward, for the pairs it runs. Its exp flushes results
          // below about 2^-126 to zero (vector_kernels.h), where the float64 reference and the
          // sharded path keep subnormals: allowed for here.
          Buffer y_rows(p.y, x.size());
          const softmax_options o = softmax_grad_test::options(p, 2, log);
          ASSERT_EQ(softmax_rows(x.data(), y_rows.data(), kRows, cols, p.x, &o), SOFTMAX_STATUS_SUCCESS)
              << softmax_last_error();
          for (size_t i = 0; i < x.size(); ++i) {
            const double a = y.get(i), b = y_rows.get(i);
            const bool ok = std::isnan(b)   ? std::isnan(a)
                            : std::isinf(b) ? a == b
                                            : std::fabs(a - b) <= 2 * softmax_test::tolerance(p.y, b, log, size_t(cols)) + 0x1p-126;
            ASSERT_TRUE(ok) << softmax_grad_test::name(p) << " cols " << cols << " element " << i << " sharded " << a
                            << " softmax_rows " << b << (log ? " log" : "") << " seed " << seed;
          }
        }
      }
    }
  }
}

TEST(CpuShardedRows, StatisticsOfSpecialAndLongRows) {
  for (const softmax_dtype t : {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F16, SOFTMAX_DTYPE_BF16}) {
    for (const int64_t cols : {int64_t{1}, int64_t{33}, int64_t{3 * 8192 + 1}}) {
      for (const int threads : {1, 2}) {
        const uint64_t seed = softmax_test::fresh_seed();
        const Buffer x = special_rows(t, cols, seed);
        std::vector<float> mx(kRows, 7.0f), sum(kRows, 7.0f);
        const softmax_options o = softmax_grad_test::options({t, t}, threads);
        ASSERT_EQ(softmax_row_stats(x.data(), mx.data(), sum.data(), kRows, cols, t, &o), SOFTMAX_STATUS_SUCCESS)
            << softmax_last_error();
        for (int64_t r = 0; r < kRows; ++r) {
          double want_max = -kInf;
          bool nan = false;
          for (int64_t c = 0; c < cols; ++c) {
            const double v = x.get(size_t(r * cols + c));
            nan |= std::isnan(v);
            want_max = std::max(want_max, v);
          }
          const std::string where = std::string(softmax_test::dtype_name(t)) + " cols " + std::to_string(cols) +
                                    " row " + std::to_string(r) + " seed " + std::to_string(seed);
          if (nan) {
            EXPECT_TRUE(std::isnan(mx[size_t(r)]) && std::isnan(sum[size_t(r)])) << where;
          } else if (want_max == kInf) {
            EXPECT_EQ(mx[size_t(r)], INFINITY) << where;
            EXPECT_TRUE(std::isnan(sum[size_t(r)])) << where;
          } else if (want_max == -kInf) {
            EXPECT_EQ(mx[size_t(r)], -INFINITY) << where;
            EXPECT_EQ(sum[size_t(r)], 0.0f) << where;
          } else {
            long double s = 0.0L;
            for (int64_t c = 0; c < cols; ++c) s += std::exp((long double)x.get(size_t(r * cols + c)) - want_max);
            EXPECT_EQ(double(mx[size_t(r)]), want_max) << where;
            EXPECT_NEAR(sum[size_t(r)], double(s), double(s) * 2e-6) << where;
          }
        }
      }
    }
  }
}

TEST(CpuShardedRows, LongRowStatisticsAreAccurateAndThreadIndependent) {
  const int64_t cols = (int64_t{1} << 21) + 7;
  const uint64_t seed = softmax_test::fresh_seed();
  const Buffer x = softmax_test::random_input(SOFTMAX_DTYPE_F32, size_t(cols), seed);
  long double s = 0.0L;
  double m = -kInf;
  for (int64_t c = 0; c < cols; ++c) m = std::max(m, x.get(size_t(c)));
  for (int64_t c = 0; c < cols; ++c) s += std::exp((long double)x.get(size_t(c)) - m);
  float first_max = 0, first_sum = 0;
  for (const int threads : {1, 2, 3}) {
    float mx = 0, sum = 0;
    const softmax_options o = softmax_grad_test::options({SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F32}, threads);
    ASSERT_EQ(softmax_row_stats(x.data(), &mx, &sum, 1, cols, SOFTMAX_DTYPE_F32, &o), SOFTMAX_STATUS_SUCCESS);
    EXPECT_EQ(double(mx), m);
    EXPECT_NEAR(sum, double(s), double(s) * 1e-6) << "seed " << seed;
    if (threads == 1) {
      first_max = mx;
      first_sum = sum;
    }
    EXPECT_EQ(mx, first_max);
    EXPECT_EQ(sum, first_sum) << "threads " << threads << " seed " << seed;
  }
}

// ---- the backward halves ----

TEST(CpuShardedRows, ShardedBackwardEqualsRowsBackward) {
  for (const Pair p : softmax_grad_test::float_pairs()) {
    for (const int64_t cols : {int64_t{1}, int64_t{9}, int64_t{1000}, int64_t{2 * 8192 + 9}}) {
      for (const bool log : {false, true}) {
        for (const int count : cols > 8192 ? std::vector<int>{1, 3} : std::vector<int>{1, 2, 4}) {
          const int64_t rows = 6;
          const uint64_t seed = softmax_test::fresh_seed();
          const size_t n = size_t(rows * cols);
          const Buffer x = softmax_test::random_input(SOFTMAX_DTYPE_F64, n, seed);
          const Buffer y = softmax_grad_test::forward_output(x, p.y, rows, cols, log);
          const Buffer dy = softmax_grad_test::uniform(p.y, n, seed + 1, -2.0, 2.0);
          const softmax_options o = softmax_grad_test::options(p, 2, log);
          const std::vector<Shard> shards = split(cols, count, seed);

          std::vector<double> dot(size_t(rows), 0.0);
          std::vector<Buffer> ys, dys;
          for (const Shard s : shards) {
            ys.push_back(columns(y, rows, cols, s));
            dys.push_back(columns(dy, rows, cols, s));
            std::vector<float> part(size_t(rows), -1.0f);
            ASSERT_EQ(softmax_backward_row_stats(ys.back().data(), dys.back().data(), part.data(), rows, s.width(), p.x,
                                                 &o),
                      SOFTMAX_STATUS_SUCCESS)
                << softmax_last_error();
            for (int64_t r = 0; r < rows; ++r) dot[size_t(r)] += part[size_t(r)];
          }
          const std::vector<float> row_dot(dot.begin(), dot.end());
          Buffer dx(p.x, n);
          dx.poison();
          for (size_t k = 0; k < shards.size(); ++k) {
            Buffer part(p.x, size_t(rows * shards[k].width()));
            part.poison();
            ASSERT_EQ(softmax_rows_backward_from_stats(ys[k].data(), dys[k].data(), part.data(), row_dot.data(), rows,
                                                       shards[k].width(), p.x, &o),
                      SOFTMAX_STATUS_SUCCESS)
                << softmax_last_error();
            put_columns(part, &dx, rows, cols, shards[k]);
          }
          const std::string what = softmax_grad_test::name(p) + " cols " + std::to_string(cols) + " shards " +
                                   std::to_string(shards.size()) + (log ? " log" : "") + " seed " + std::to_string(seed);
          ASSERT_TRUE(softmax_grad_test::grad_matches(y, dy, dx, rows, cols, log, false)) << what;
          Buffer unsharded(p.x, n);
          ASSERT_EQ(softmax_rows_backward(y.data(), dy.data(), unsharded.data(), rows, cols, p.x, &o),
                    SOFTMAX_STATUS_SUCCESS)
              << softmax_last_error();
          // One shard is the unsharded computation: same kernels, same dot, same bits.
          if (shards.size() == 1) {
            ASSERT_EQ(dx.bytes, unsharded.bytes) << what;
          }
        }
      }
    }
  }
}

}  // namespace
