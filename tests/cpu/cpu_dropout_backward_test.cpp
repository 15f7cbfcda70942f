// SPDX-License-Identifier: Apache-2.0
// softmax_dropout_backward on the CPU: dx = s * (g - sum(s * g)) with s = softmax(x) and
// g = keep ? dy * scale : 0, the mask regenerated from (seed, offset). Checked against a float64
// reference that takes its mask from the forward's keep_mask output, for every (x, y) pair; the
// mask implied by dx equals that keep_mask bit for bit; finite differences of the dropout
// forward; p = 0 and p = 1; in place; the same bits for any thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <iterator>
#include <limits>
#include <utility>
#include <vector>

#include "backends/common/philox.h"
#include "grad_test_util.h"

namespace {

using softmax_grad_test::Buffer;
using softmax_grad_test::Pair;

struct Shape {
  int64_t rows, cols;
};

// Tiles of short rows (one tile, and several with a partial last one); whole rows per thread
// with s and g kept (up to 128 chunks); few long rows by chunks; whole rows of 129 chunks, whose
// s and g are recomputed in each pass (kBigShape, for a few pairs only: it is the largest). Odd
// lengths put Philox groups of 4 across rows, tiles and chunks.
const Shape kShapes[] = {{7, 3}, {30, 33}, {200, 37}, {5, 1025}, {9, 2 * 8192 + 5}, {2, 3 * 8192 + 3}};
const Shape kBigShape{8, 128 * 8192 + 1};

const Pair kSomePairs[] = {{SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F32}, {SOFTMAX_DTYPE_BF16, SOFTMAX_DTYPE_F16},
                           {SOFTMAX_DTYPE_F64, SOFTMAX_DTYPE_F64}};

// Every shape for the few pairs, the shapes but the biggest for every pair.
std::vector<std::pair<Pair, Shape>> cases() {
  std::vector<std::pair<Pair, Shape>> out;
  for (const Pair p : softmax_grad_test::all_pairs())
    for (const Shape s : kShapes) out.push_back({p, s});
  for (const Pair p : kSomePairs) out.push_back({p, kBigShape});
  return out;
}

struct Dropout {
  float p;
  uint64_t seed, offset;
};

// The forward's keep mask: a pure function of (seed, offset, flat index, p), so any x will do.
std::vector<uint8_t> forward_mask(int64_t rows, int64_t cols, const Dropout& d) {
  const Buffer x = softmax_test::random_input(SOFTMAX_DTYPE_F32, size_t(rows * cols), d.seed);
  Buffer y(SOFTMAX_DTYPE_F32, x.size());
  std::vector<uint8_t> mask(x.size(), 0xAB);
  const softmax_options o = softmax_grad_test::options({SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F32});
  EXPECT_EQ(softmax_dropout(x.data(), y.data(), mask.data(), rows, cols, SOFTMAX_DTYPE_F32, d.p, d.seed, d.offset, &o),
            SOFTMAX_STATUS_SUCCESS)
      << softmax_last_error();
  return mask;
}

Buffer run_backward(const Buffer& x, const Buffer& dy, Pair p, int64_t rows, int64_t cols, const Dropout& d,
                    int threads) {
  Buffer dx(p.x, x.size());
  dx.poison();
  const softmax_options o = softmax_grad_test::options(p, threads);
  const softmax_status s =
      softmax_dropout_backward(x.data(), dy.data(), dx.data(), rows, cols, p.x, d.p, d.seed, d.offset, &o);
  EXPECT_EQ(s, SOFTMAX_STATUS_SUCCESS) << softmax_last_error();
  return dx;
}

// The inverted-dropout scale as the forward defines it: 1 / (1 - p), exact in float64.
double forward_scale(float p) { return 1.0 / (1.0 - double(p)); }

// Float64 reference: s from the stored x, g from the stored dy, the mask and the forward's scale.
struct DropoutRef {
  std::vector<double> s, dx, bound;
};

DropoutRef reference_row(const Buffer& x, const Buffer& dy, int64_t r, int64_t cols, const std::vector<uint8_t>& mask,
                         float p) {
  DropoutRef out;
  out.s = softmax_grad_test::softmax_row(x, r, cols);
  const double scale = forward_scale(p);
  std::vector<double> g(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c) {
    const size_t i = size_t(r * cols + c);
    g[size_t(c)] = mask[i] != 0 ? dy.get(i) * scale : 0.0;
  }
  const softmax_grad_test::GradRef ref = softmax_grad_test::grad_reference_row(out.s, g, false);
  out.dx = ref.dx;
  out.bound = ref.bound;
  return out;
}

::testing::AssertionResult matches_reference(const Buffer& x, const Buffer& dy, const Buffer& dx, int64_t rows,
                                             int64_t cols, const std::vector<uint8_t>& mask, float p, bool fp64) {
  for (int64_t r = 0; r < rows; ++r) {
    const DropoutRef ref = reference_row(x, dy, r, cols, mask, p);
    for (int64_t c = 0; c < cols; ++c) {
      const double got = dx.get(size_t(r * cols + c)), want = ref.dx[size_t(c)];
      // s itself carries the forward's error (relative, about the same unit): count it in.
      const double bound = 2.0 * ref.bound[size_t(c)];
      const double tol = softmax_grad_test::grad_tolerance(dx.dtype, want, bound, size_t(cols), fp64);
      if (!softmax_grad_test::value_ok(got, want, tol))
        return ::testing::AssertionFailure() << "row " << r << " col " << c << ": got " << got << " want " << want
                                             << " (tolerance " << tol << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(CpuDropoutBackward, EveryPairMatchesFloat64WithTheForwardMask) {
  for (const auto& [p, s] : cases()) {
    const uint64_t seed = softmax_test::fresh_seed();
    const Dropout d{0.3f, seed, seed % 7};
    const size_t n = size_t(s.rows * s.cols);
    const Buffer x = softmax_grad_test::uniform(p.x, n, seed + 1, -6.0, 6.0);
    const Buffer dy = softmax_grad_test::uniform(p.y, n, seed + 2, -2.0, 2.0);
    const std::vector<uint8_t> mask = forward_mask(s.rows, s.cols, d);
    const Buffer dx = run_backward(x, dy, p, s.rows, s.cols, d, 2);
    ASSERT_TRUE(matches_reference(x, dy, dx, s.rows, s.cols, mask, d.p, softmax_grad_test::fp64(p)))
        << softmax_grad_test::name(p) << " " << s.rows << "x" << s.cols << " seed " << seed;
  }
}

// With dy in [1, 2], kept elements have g = dy * scale >= 1 and dropped ones g = 0, and
// g = dx / s + sum(s * g) recovers which is which from dx alone: that mask must be the
// forward's keep_mask, element for element.
TEST(CpuDropoutBackward, ImpliedMaskIsTheForwardKeepMask) {
  for (const Pair p : kSomePairs) {
    for (const Shape s : kShapes) {
      for (const uint64_t offset : {uint64_t{0}, uint64_t{3}, uint64_t{0x100000001}}) {
        const uint64_t seed = softmax_test::fresh_seed();
        const Dropout d{0.5f, seed, offset};
        const size_t n = size_t(s.rows * s.cols);
        const Buffer x = softmax_grad_test::uniform(p.x, n, seed + 1, -3.0, 3.0);
        const Buffer dy = softmax_grad_test::uniform(p.y, n, seed + 2, 1.0, 2.0);
        const std::vector<uint8_t> mask = forward_mask(s.rows, s.cols, d);
        const Buffer dx = run_backward(x, dy, p, s.rows, s.cols, d, 2);
        size_t kept = 0;
        for (int64_t r = 0; r < s.rows; ++r) {
          const DropoutRef ref = reference_row(x, dy, r, s.cols, mask, d.p);
          double dot = 0.0;  // sum(s * g) of the row, from the forward's mask
          const double scale = forward_scale(d.p);
          for (int64_t c = 0; c < s.cols; ++c) {
            const size_t i = size_t(r * s.cols + c);
            dot += ref.s[size_t(c)] * (mask[i] ? dy.get(i) * scale : 0.0);
          }
          for (int64_t c = 0; c < s.cols; ++c) {
            const size_t i = size_t(r * s.cols + c);
            const double g = dx.get(i) / ref.s[size_t(c)] + dot;
            const uint8_t implied = g > 0.5 ? 1 : 0;
            ASSERT_EQ(implied, mask[i]) << softmax_grad_test::name(p) << " " << s.rows << "x" << s.cols << " element "
                                        << i << " offset " << offset << " seed " << seed << " g " << g;
            kept += implied;
          }
        }
        // Both kinds occur (a mask of all ones or all zeros would make the check empty).
        ASSERT_GT(kept, 0u);
        ASSERT_LT(kept, n);
      }
    }
  }
}

// The directional derivative of L(x) = sum(dy * keep * softmax(x) * scale) (the dropout forward in
// float64 with the forward's mask) against sum(dx * v), dx from x and dy in f64 storage.
TEST(CpuDropoutBackward, MatchesFiniteDifferencesOfTheForward) {
  const softmax_dtype f64 = SOFTMAX_DTYPE_F64;
  for (const int64_t cols : {int64_t{5}, int64_t{700}, int64_t{8200}}) {
    const uint64_t seed = softmax_test::fresh_seed();
    const Dropout d{0.25f, seed, 1};
    const size_t n = size_t(cols);
    const Buffer x = softmax_test::random_input(f64, n, seed + 1, 3.0f);
    const Buffer dy = softmax_grad_test::uniform(f64, n, seed + 2, -1.0, 1.0);
    const Buffer v = softmax_grad_test::uniform(f64, n, seed + 3, -1.0, 1.0);
    const std::vector<uint8_t> mask = forward_mask(1, cols, d);
    const double scale = forward_scale(d.p);
    auto loss = [&](double step) {
      Buffer xs(f64, n);
      for (size_t i = 0; i < n; ++i) xs.set(i, x.get(i) + step * v.get(i));
      std::vector<double> s;
      softmax_test::reference_row(xs, 0, n, false, &s);
      double l = 0.0;
      for (size_t i = 0; i < n; ++i) l += mask[i] ? dy.get(i) * s[i] * scale : 0.0;
      return l;
    };
    const double h = 1e-5;
    const double fd = (loss(h) - loss(-h)) / (2 * h);
    const Buffer dx = run_backward(x, dy, {f64, f64}, 1, cols, d, 0);
    double analytic = 0.0, size = 0.0;
    for (size_t i = 0; i < n; ++i) {
      analytic += dx.get(i) * v.get(i);
      size += std::fabs(dx.get(i) * v.get(i));
    }
    EXPECT_NEAR(analytic, fd, 1e-7 * (1.0 + size)) << "cols " << cols << " seed " << seed;
  }
}

TEST(CpuDropoutBackward, PZeroIsThePlainSoftmaxGradientAndPOneIsZero) {
  for (const Pair p : {Pair{SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F32}, Pair{SOFTMAX_DTYPE_F16, SOFTMAX_DTYPE_F64},
                       Pair{SOFTMAX_DTYPE_BF16, SOFTMAX_DTYPE_BF16}}) {
    for (const Shape s : {Shape{30, 33}, Shape{3, 3 * 8192 + 3}}) {
      const uint64_t seed = softmax_test::fresh_seed();
      const size_t n = size_t(s.rows * s.cols);
      const Buffer x = softmax_grad_test::uniform(p.x, n, seed + 1, -6.0, 6.0);
      const Buffer dy = softmax_grad_test::uniform(p.y, n, seed + 2, -2.0, 2.0);
      const Buffer dx0 = run_backward(x, dy, p, s.rows, s.cols, {0.0f, seed, 0}, 2);
      const std::vector<uint8_t> all_kept(n, 1);
      ASSERT_TRUE(matches_reference(x, dy, dx0, s.rows, s.cols, all_kept, 0.0f, softmax_grad_test::fp64(p)))
          << softmax_grad_test::name(p) << " p=0 seed " << seed;
      const Buffer dx1 = run_backward(x, dy, p, s.rows, s.cols, {1.0f, seed, 0}, 2);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(dx1.get(i), 0.0) << softmax_grad_test::name(p) << " p=1 element " << i;
        ASSERT_FALSE(std::signbit(dx1.get(i))) << i;
      }
    }
  }
}

// In fp32 s is the forward's softmax bit for bit and, at p = 0, g is dy itself, so the dropout
// backward must give the bits of softmax_rows_backward applied to softmax_rows' output: for
// tiles of short rows, rows of one chunk, and rows of several chunks.
TEST(CpuDropoutBackward, PZeroGivesTheBitsOfTheSoftmaxBackwardOfTheForward) {
  const Pair p{SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F32};
  for (const Shape s : {Shape{7, 3}, Shape{200, 37}, Shape{9, 512}, Shape{5, 1025}, Shape{3, 3 * 8192 + 3}}) {
    const uint64_t seed = softmax_test::fresh_seed();
    const size_t n = size_t(s.rows * s.cols);
    const Buffer x = softmax_grad_test::uniform(p.x, n, seed + 1, -30.0, 30.0);
    const Buffer dy = softmax_grad_test::uniform(p.y, n, seed + 2, -2.0, 2.0);
    const softmax_options o = softmax_grad_test::options(p, 2);
    Buffer y(p.x, n), dx(p.x, n);
    y.poison();
    dx.poison();
    ASSERT_EQ(softmax_rows(x.data(), y.data(), s.rows, s.cols, p.x, &o), SOFTMAX_STATUS_SUCCESS) << softmax_last_error();
    ASSERT_EQ(softmax_rows_backward(y.data(), dy.data(), dx.data(), s.rows, s.cols, p.x, &o), SOFTMAX_STATUS_SUCCESS)
        << softmax_last_error();
    ASSERT_EQ(run_backward(x, dy, p, s.rows, s.cols, {0.0f, seed, 0}, 2).bytes, dx.bytes)
        << s.rows << "x" << s.cols << " seed " << seed;
  }
}

TEST(CpuDropoutBackward, NonFiniteRowsFollowFloat64) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (const Pair p : {Pair{SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F32}, Pair{SOFTMAX_DTYPE_F16, SOFTMAX_DTYPE_BF16},
                       Pair{SOFTMAX_DTYPE_F64, SOFTMAX_DTYPE_F16}}) {
    for (const int64_t cols : {int64_t{6}, int64_t{3 * 8192 + 1}}) {
      const int64_t rows = 6;
      const uint64_t seed = softmax_test::fresh_seed();
      const Dropout d{0.2f, seed, 5};
      const size_t n = size_t(rows * cols);
      Buffer x = softmax_grad_test::uniform(p.x, n, seed + 1, -6.0, 6.0);
      Buffer dy = softmax_grad_test::uniform(p.y, n, seed + 2, -2.0, 2.0);
      x.set(size_t(0 * cols + 1), nan);                                    // NaN row
      x.set(size_t(1 * cols + cols - 1), inf);                             // NaN row
      for (int64_t c = 0; c < cols; ++c) x.set(size_t(2 * cols + c), -inf);  // all -inf: NaN row
      for (int64_t c = 0; c < cols / 2 + 1; ++c) x.set(size_t(3 * cols + c), -inf);  // zeros, whole -inf chunks
      const std::vector<uint8_t> mask = forward_mask(rows, cols, d);
      // An infinite gradient on a dropped element of row 4 must vanish; on a kept one of row 5 it
      // makes the row's dot infinite.
      for (int64_t c = 0; c < cols; ++c) {
        if (!mask[size_t(4 * cols + c)]) {
          dy.set(size_t(4 * cols + c), inf);
          break;
        }
      }
      for (int64_t c = 0; c < cols; ++c) {
        if (mask[size_t(5 * cols + c)]) {
          dy.set(size_t(5 * cols + c), inf);
          break;
        }
      }
      const Buffer dx = run_backward(x, dy, p, rows, cols, d, 2);
      ASSERT_TRUE(matches_reference(x, dy, dx, rows, cols, mask, d.p, softmax_grad_test::fp64(p)))
          << softmax_grad_test::name(p) << " cols " << cols << " seed " << seed;
    }
  }
}

TEST(CpuDropoutBackward, InPlaceAndSameBitsForAnyThreadCount) {
  for (const Pair p : {Pair{SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F32}, Pair{SOFTMAX_DTYPE_F16, SOFTMAX_DTYPE_BF16},
                       Pair{SOFTMAX_DTYPE_F64, SOFTMAX_DTYPE_F64}}) {
    std::vector<Shape> shapes(std::begin(kShapes), std::end(kShapes));
    shapes.push_back(kBigShape);
    for (const Shape s : shapes) {
      const uint64_t seed = softmax_test::fresh_seed();
      const Dropout d{0.4f, seed, 2};
      const size_t n = size_t(s.rows * s.cols);
      const Buffer x = softmax_grad_test::uniform(p.x, n, seed + 1, -6.0, 6.0);
      const Buffer dy = softmax_grad_test::uniform(p.y, n, seed + 2, -2.0, 2.0);
      const Buffer one = run_backward(x, dy, p, s.rows, s.cols, d, 1);
      for (const int threads : {2, 3, 7})
        ASSERT_EQ(run_backward(x, dy, p, s.rows, s.cols, d, threads).bytes, one.bytes)
            << softmax_grad_test::name(p) << " " << s.rows << "x" << s.cols << " threads " << threads << " seed "
            << seed;
      Buffer shared = dy;
      const softmax_options o = softmax_grad_test::options(p, 2);
      ASSERT_EQ(softmax_dropout_backward(x.data(), shared.data(), shared.data(), s.rows, s.cols, p.x, d.p, d.seed,
                                         d.offset, &o),
                SOFTMAX_STATUS_SUCCESS)
          << softmax_last_error();
      ASSERT_EQ(shared.bytes, one.bytes) << softmax_grad_test::name(p) << " in place seed " << seed;
    }
  }
}

}  // namespace
