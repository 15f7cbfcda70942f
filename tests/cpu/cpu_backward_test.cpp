// SPDX-License-Identifier: Apache-2.0
// softmax_rows_backward on the CPU: every (x, y) storage pair against the float64 backward of the
// stored y and dy, softmax and log-softmax, at row lengths that take each schedule (tiles of
// short rows, whole long rows per thread, chunks of few long rows over threads); the gradient
// against finite differences of the forward; in place; non-finite rows; the same bits for any
// thread count and whether a row is alone or in a batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "cpu_test_util.h"
#include "grad_test_util.h"

namespace {

using softmax_grad_test::Buffer;
using softmax_grad_test::Pair;

struct Shape {
  int64_t rows, cols;
};

// One chunk is 8192 elements. With two threads: 1..8192 columns go by tiles; 9 rows of 3.x
// chunks by whole rows (rows of 4 MiB of y and dy, below, in the order that overlaps them); 3
// rows of 3.x chunks by chunk items (threads_for keeps one thread below 32768 elements, so those
// shapes are large enough for two).
const Shape kShapes[] = {{5, 1}, {40, 3}, {23, 33}, {7, 1000}, {4, 8192}, {9, 3 * 8192 + 5}, {3, 3 * 8192 + 5}};

Buffer run_backward(const Buffer& y, const Buffer& dy, Pair p, int64_t rows, int64_t cols, bool log, int threads) {
  Buffer dx(p.x, y.size());
  dx.poison();
  const softmax_options o = softmax_grad_test::options(p, threads, log);
  const softmax_status s = softmax_rows_backward(y.data(), dy.data(), dx.data(), rows, cols, p.x, &o);
  EXPECT_EQ(s, SOFTMAX_STATUS_SUCCESS) << softmax_last_error();
  return dx;
}

// A fresh seed and the backward's inputs from it: y the forward's output (stored as p.y) of random
// x, dy uniform in [-2, 2).
struct Inputs {
  uint64_t seed;
  Buffer y, dy;
};
Inputs inputs(Pair p, Shape s, bool log) {
  const uint64_t seed = softmax_test::fresh_seed();
  const size_t n = size_t(s.rows * s.cols);
  const Buffer x = softmax_test::random_input(SOFTMAX_DTYPE_F64, n, seed);
  return {seed, softmax_grad_test::forward_output(x, p.y, s.rows, s.cols, log),
          softmax_grad_test::uniform(p.y, n, seed + 1, -2.0, 2.0)};
}

// Whether row r of y and dy, run alone (one row: chunks over threads, two threads), gives the
// bits it has in `batch`, the backward of all rows.
::testing::AssertionResult row_alone_has_its_batch_bits(const Inputs& in, const Buffer& batch, Pair p, Shape s,
                                                        int64_t r, bool log) {
  const size_t ys = softmax_test::element_size(p.y), xs = softmax_test::element_size(p.x);
  const size_t first = size_t(r * s.cols);
  Buffer y1(p.y, size_t(s.cols)), dy1(p.y, size_t(s.cols));
  std::memcpy(y1.data(), in.y.bytes.data() + first * ys, size_t(s.cols) * ys);
  std::memcpy(dy1.data(), in.dy.bytes.data() + first * ys, size_t(s.cols) * ys);
  const Buffer alone = run_backward(y1, dy1, p, 1, s.cols, log, 2);
  if (std::memcmp(alone.data(), batch.bytes.data() + first * xs, size_t(s.cols) * xs) == 0)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << softmax_grad_test::name(p) << " " << s.rows << "x" << s.cols << " row "
                                       << r << (log ? " log" : "") << " seed " << in.seed;
}

TEST(CpuRowsBackward, EveryPairMatchesFloat64) {
  for (const Pair p : softmax_grad_test::all_pairs()) {
    for (const Shape s : kShapes) {
      for (const bool log : {false, true}) {
        const Inputs in = inputs(p, s, log);
        const uint64_t seed = in.seed;
        const Buffer &y = in.y, &dy = in.dy;
        // Long rows with two threads only: that is where both of their schedules occur.
        for (const int threads : s.cols > 8192 ? std::vector<int>{2} : std::vector<int>{1, 2}) {
          const Buffer dx = run_backward(y, dy, p, s.rows, s.cols, log, threads);
          ASSERT_TRUE(softmax_grad_test::grad_matches(y, dy, dx, s.rows, s.cols, log, softmax_grad_test::fp64(p)))
              << softmax_grad_test::name(p) << " " << s.rows << "x" << s.cols << (log ? " log" : "") << " threads "
              << threads << " seed " << seed;
        }
      }
    }
  }
}

// The directional derivative of L(x) = sum(dy * f(x)), f = softmax or log-softmax evaluated in
// float64, along a random direction v, by central differences, against sum(dx * v) with dx from
// softmax_rows_backward(f(x), dy) in f64 storage. A wrong formula (a sign, the log form for the
// plain one, a missing term) is off by O(1); the difference quotient is good to about 1e-9.
double loss(const std::vector<double>& x, const std::vector<double>& dy, bool log) {
  Buffer xb(SOFTMAX_DTYPE_F64, x.size());
  for (size_t i = 0; i < x.size(); ++i) xb.set(i, x[i]);
  std::vector<double> f;
  softmax_test::reference_row(xb, 0, x.size(), log, &f);
  double l = 0.0;
  for (size_t i = 0; i < x.size(); ++i) l += dy[i] * f[i];
  return l;
}

TEST(CpuRowsBackward, MatchesFiniteDifferencesOfTheForward) {
  for (const int64_t cols : {int64_t{2}, int64_t{17}, int64_t{300}, int64_t{9000}}) {
    for (const bool log : {false, true}) {
      const uint64_t seed = softmax_test::fresh_seed();
      const size_t n = size_t(cols);
      const Buffer x = softmax_test::random_input(SOFTMAX_DTYPE_F64, n, seed, 3.0f);
      const Buffer dy = softmax_grad_test::uniform(SOFTMAX_DTYPE_F64, n, seed + 1, -1.0, 1.0);
      const Buffer v = softmax_grad_test::uniform(SOFTMAX_DTYPE_F64, n, seed + 2, -1.0, 1.0);
      const Pair p{SOFTMAX_DTYPE_F64, SOFTMAX_DTYPE_F64};
      const Buffer y = softmax_grad_test::forward_output(x, p.y, 1, cols, log);
      const Buffer dx = run_backward(y, dy, p, 1, cols, log, 0);

      const std::vector<double> xv = softmax_grad_test::row_of(x, 0, cols), dyv = softmax_grad_test::row_of(dy, 0, cols);
      const std::vector<double> vv = softmax_grad_test::row_of(v, 0, cols);
      const double h = 1e-5;
      std::vector<double> plus = xv, minus = xv;
      for (size_t i = 0; i < n; ++i) {
        plus[i] += h * vv[i];
        minus[i] -= h * vv[i];
      }
      const double fd = (loss(plus, dyv, log) - loss(minus, dyv, log)) / (2 * h);
      double analytic = 0.0, scale = 0.0;
      for (size_t i = 0; i < n; ++i) {
        analytic += dx.get(i) * vv[i];
        scale += std::fabs(dx.get(i) * vv[i]);
      }
      EXPECT_NEAR(analytic, fd, 1e-7 * (1.0 + scale)) << "cols " << cols << (log ? " log" : "") << " seed " << seed;
    }
  }
}

// The same check with the library's own forward (softmax_rows, f64 storage) as f, so that the
// forward and the backward are checked against each other, flags included.
TEST(CpuRowsBackward, MatchesFiniteDifferencesOfSoftmaxRows) {
  const softmax_dtype f64 = SOFTMAX_DTYPE_F64;
  {
    Buffer probe(f64, 2), out(f64, 2);
    const softmax_options o = softmax_grad_test::options({f64, f64});
    if (softmax_rows(probe.data(), out.data(), 1, 2, f64, &o) == SOFTMAX_STATUS_INTERNAL_ERROR)
      GTEST_SKIP() << "softmax_rows does not run f64 storage on this build's CPU backend: " << softmax_last_error();
  }
  for (const int64_t cols : {int64_t{3}, int64_t{500}, int64_t{8193}}) {
    for (const bool log : {false, true}) {
      const uint64_t seed = softmax_test::fresh_seed();
      const size_t n = size_t(cols);
      const softmax_options o = softmax_grad_test::options({f64, f64}, 0, log);
      const Buffer x = softmax_test::random_input(f64, n, seed, 3.0f);
      const Buffer dy = softmax_grad_test::uniform(f64, n, seed + 1, -1.0, 1.0);
      const Buffer v = softmax_grad_test::uniform(f64, n, seed + 2, -1.0, 1.0);
      auto library_loss = [&](double step) {
        Buffer xs(f64, n), ys(f64, n);
        for (size_t i = 0; i < n; ++i) xs.set(i, x.get(i) + step * v.get(i));
        EXPECT_EQ(softmax_rows(xs.data(), ys.data(), 1, cols, f64, &o), SOFTMAX_STATUS_SUCCESS) << softmax_last_error();
        double l = 0.0;
        for (size_t i = 0; i < n; ++i) l += dy.get(i) * ys.get(i);
        return l;
      };
      Buffer y(f64, n);
      ASSERT_EQ(softmax_rows(x.data(), y.data(), 1, cols, f64, &o), SOFTMAX_STATUS_SUCCESS) << softmax_last_error();
      const Buffer dx = run_backward(y, dy, {f64, f64}, 1, cols, log, 0);
      const double h = 1e-5;
      const double fd = (library_loss(h) - library_loss(-h)) / (2 * h);
      double analytic = 0.0, scale = 0.0;
      for (size_t i = 0; i < n; ++i) {
        analytic += dx.get(i) * v.get(i);
        scale += std::fabs(dx.get(i) * v.get(i));
      }
      EXPECT_NEAR(analytic, fd, 1e-7 * (1.0 + scale)) << "cols " << cols << (log ? " log" : "") << " seed " << seed;
    }
  }
}

// dx == dy: the same bits as out of place, for every pair whose x and y share an element size.
TEST(CpuRowsBackward, InPlaceEqualsOutOfPlace) {
  for (const Pair p : softmax_grad_test::all_pairs()) {
    if (softmax_test::element_size(p.x) != softmax_test::element_size(p.y)) continue;
    for (const Shape s : {Shape{37, 100}, Shape{2, 2 * 8192 + 3}, Shape{9, 8192 + 1}}) {
      for (const bool log : {false, true}) {
        const Inputs in = inputs(p, s, log);
        const uint64_t seed = in.seed;
        const Buffer &y = in.y, &dy = in.dy;
        const Buffer apart = run_backward(y, dy, p, s.rows, s.cols, log, 2);
        Buffer shared = dy;  // dy's bytes, overwritten by dx (stored as p.x)
        const softmax_options o = softmax_grad_test::options(p, 2, log);
        ASSERT_EQ(softmax_rows_backward(y.data(), shared.data(), shared.data(), s.rows, s.cols, p.x, &o),
                  SOFTMAX_STATUS_SUCCESS)
            << softmax_last_error();
        ASSERT_EQ(shared.bytes, apart.bytes) << softmax_grad_test::name(p) << " " << s.rows << "x" << s.cols
                                             << (log ? " log" : "") << " seed " << seed;
      }
    }
  }
}

// What the forward hands over for special rows: a NaN row (NaN, +inf or all -inf input), zeros
// where x was -inf (log: -inf), and dy with infinities. The float64 formula decides.
TEST(CpuRowsBackward, NonFiniteRowsFollowFloat64) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (const Pair p : softmax_grad_test::all_pairs()) {
    for (const int64_t cols : {int64_t{5}, int64_t{1000}, int64_t{2 * 8192 + 7}}) {
      for (const bool log : {false, true}) {
        const int64_t rows = 5;
        const uint64_t seed = softmax_test::fresh_seed();
        Buffer x = softmax_test::random_input(SOFTMAX_DTYPE_F64, size_t(rows * cols), seed);
        x.set(size_t(0 * cols + cols / 2), nan);                 // row 0: NaN row
        for (int64_t c = 0; c < cols; c += 2) x.set(size_t(1 * cols + c), -inf);  // row 1: zeros
        x.set(size_t(2 * cols + cols - 1), inf);                  // row 2: NaN row
        const Buffer y = softmax_grad_test::forward_output(x, p.y, rows, cols, log);
        Buffer dy = softmax_grad_test::uniform(p.y, size_t(rows * cols), seed + 1, -2.0, 2.0);
        dy.set(size_t(3 * cols + cols / 3), inf);                 // row 3: an infinite gradient
        dy.set(size_t(4 * cols), nan);                            // row 4: a NaN gradient
        for (const int threads : cols > 8192 ? std::vector<int>{2} : std::vector<int>{1, 2}) {
          const Buffer dx = run_backward(y, dy, p, rows, cols, log, threads);
          ASSERT_TRUE(softmax_grad_test::grad_matches(y, dy, dx, rows, cols, log, softmax_grad_test::fp64(p)))
              << softmax_grad_test::name(p) << " cols " << cols << (log ? " log" : "") << " threads " << threads
              << " seed " << seed;
        }
      }
    }
  }
}

TEST(CpuRowsBackward, SameBitsForAnyThreadCountAndBatch) {
  const Pair pairs[] = {{SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F32}, {SOFTMAX_DTYPE_BF16, SOFTMAX_DTYPE_F16},
                        {SOFTMAX_DTYPE_F64, SOFTMAX_DTYPE_F32}};
  for (const Pair p : pairs) {
    for (const Shape s : {Shape{1000, 33}, Shape{13, 4097}, Shape{1, 65537}, Shape{3, 65537}, Shape{9, 65537}}) {
      for (const bool log : {false, true}) {
        const Inputs in = inputs(p, s, log);
        const uint64_t seed = in.seed;
        const Buffer &y = in.y, &dy = in.dy;
        const Buffer one = run_backward(y, dy, p, s.rows, s.cols, log, 1);
        for (const int threads : {2, 3, 7}) {
          ASSERT_EQ(run_backward(y, dy, p, s.rows, s.cols, log, threads).bytes, one.bytes)
              << softmax_grad_test::name(p) << " " << s.rows << "x" << s.cols << (log ? " log" : "") << " threads "
              << threads << " seed " << seed;
        }
        // The last row alone gives the bits it has in the batch.
        ASSERT_TRUE(row_alone_has_its_batch_bits(in, one, p, s, s.rows - 1, log));
      }
    }
  }
}

// Rows whose y and dy take 4 MiB or more run each thread's rows in order, the next row's first
// pass between the current row's finishing chunks. Such rows against float64, with the bits of
// one thread, of three (chunks over threads for 9 rows) and of each row alone.
TEST(CpuRowsBackward, RowsPastTheCacheMatchFloat64AndTheirBitsAlone) {
  const Pair pairs[] = {{SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F32}, {SOFTMAX_DTYPE_F64, SOFTMAX_DTYPE_F64}};
  for (const Pair p : pairs) {
    const Shape s{9, int64_t((size_t{2} << 20) / softmax_test::element_size(p.y)) + 5};
    for (const bool log : {false, true}) {
      const Inputs in = inputs(p, s, log);
      const uint64_t seed = in.seed;
      const Buffer &y = in.y, &dy = in.dy;
      const Buffer two = run_backward(y, dy, p, s.rows, s.cols, log, 2);
      ASSERT_TRUE(softmax_grad_test::grad_matches(y, dy, two, s.rows, s.cols, log, softmax_grad_test::fp64(p)))
          << softmax_grad_test::name(p) << (log ? " log" : "") << " seed " << seed;
      for (const int threads : {1, 3})
        ASSERT_EQ(run_backward(y, dy, p, s.rows, s.cols, log, threads).bytes, two.bytes)
            << softmax_grad_test::name(p) << (log ? " log" : "") << " threads " << threads << " seed " << seed;
      for (const int64_t r : {int64_t{0}, int64_t{4}, int64_t{8}})
        ASSERT_TRUE(row_alone_has_its_batch_bits(in, two, p, s, r, log));
    }
  }
}

// f32 results of 32 MiB and more leave through non-temporal stores where rows start on 64-byte
// boundaries or are at least 128 elements long (the partial vectors at their ends with masked
// ordinary stores), through ordinary stores otherwise. Such a call, dx on and off those
// boundaries, must give the bits of calls of at most 1 MiB of dx (ordinary stores) over the whole
// output and write nothing outside dx.
TEST(CpuRowsBackward, StreamedOutputsEqualSmallCalls) {
  const Pair p{SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F32};
  // Short rows (whole 64-byte lines; odd lengths whose rows start anywhere, in one line and in
  // several), rows of several lines, and rows of many chunks.
  for (const Shape s : {Shape{262147, 32}, Shape{254201, 33}, Shape{66053, 127}, Shape{65537, 131}, Shape{16385, 513},
                        Shape{1025, 8192}, Shape{2, (int64_t{1} << 22) + 3}}) {
    const uint64_t seed = softmax_test::fresh_seed();
    const size_t n = size_t(s.rows * s.cols);
    const Buffer y = softmax_grad_test::uniform(p.y, n, seed, 0.0, 2.0 / double(s.cols));
    const Buffer dy = softmax_grad_test::uniform(p.y, n, seed + 1, -2.0, 2.0);
    for (const bool log : {false, true}) {
      const softmax_options o = softmax_grad_test::options(p, 2, log);
      std::vector<float> small(n);
      const int64_t block = std::max<int64_t>(1, (int64_t{1} << 18) / s.cols);
      for (int64_t r0 = 0; r0 < s.rows; r0 += block) {
        const int64_t nr = std::min(block, s.rows - r0);
        const size_t first = size_t(r0 * s.cols);
        ASSERT_EQ(softmax_rows_backward(y.bytes.data() + 4 * first, dy.bytes.data() + 4 * first, small.data() + first,
                                        nr, s.cols, p.x, &o),
                  SOFTMAX_STATUS_SUCCESS);
      }
      for (const size_t offset : {size_t{0}, size_t{1}, size_t{5}}) {
        softmax_cpu_test::GuardedF32 dx(n, offset);
        ASSERT_EQ(softmax_rows_backward(y.data(), dy.data(), dx.y(), s.rows, s.cols, p.x, &o), SOFTMAX_STATUS_SUCCESS)
            << softmax_last_error();
        ASSERT_TRUE(std::memcmp(small.data(), dx.y(), n * sizeof(float)) == 0 && dx.guards_intact())
            << s.rows << "x" << s.cols << (log ? " log" : "") << " offset " << offset << " seed " << seed;
      }
    }
  }
}

}  // namespace
