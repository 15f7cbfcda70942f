// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's backward passes, sharded-row statistics and mixed storage types through the
// public C API, against float64 references on fresh random inputs with poisoned outputs: every
// storage type and pair of types, row lengths on both sides of every strategy's capacity,
// misaligned pointers, in place, large magnitudes and non-finite rows, and empty calls.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cuda_test_support.h"

namespace softmax_cuda_test {
namespace {

const size_t kCols[] = {1, 3, 8, 33, 1000, 4097, 12345, 33000, 131075};

size_t rows_for(size_t cols) { return std::max<size_t>(2, std::min<size_t>(301, (size_t{1} << 20) / cols)) | 1; }

// A device copy of a host buffer, `offset` elements into its allocation.
struct Dev {
  DeviceBytes mem;
  void* p;
  Dev(const Buffer& b, size_t offset)
      : mem((b.size() + offset) * element_size(b.dtype)), p(mem.at(offset * element_size(b.dtype))) {
    if (mem.p) (void)cudaMemcpy(p, b.data(), b.bytes.size(), cudaMemcpyHostToDevice);
  }
  Dev(softmax_dtype t, size_t n, size_t offset) : mem((n + offset) * element_size(t)), p(mem.at(offset * element_size(t))) {
    if (mem.p) (void)poison(p, n * element_size(t));
  }
  Buffer host(softmax_dtype t, size_t n) const {
    Buffer b(t, n);
    (void)cudaMemcpy(b.data(), p, n * element_size(t), cudaMemcpyDeviceToHost);
    return b;
  }
};

// The element size of the layout the kernels hold: the primary array's, or the generic kernels'
// 8-byte chunks whenever f64 is involved.
size_t layout_bytes(softmax_dtype primary, softmax_dtype other) {
  return primary == SOFTMAX_DTYPE_F64 || other == SOFTMAX_DTYPE_F64 ? 8 : element_size(primary);
}

// The element size whose chunks the kernels hold for a held array (x of the forward, y of the
// backward) and an output of another type: layout_bytes, except that a 16-bit array whose output
// is f32 is held in chunks of four columns and planned like f32 rows.
size_t held_layout_bytes(softmax_dtype held, softmax_dtype out) {
  if (element_size(held) == 2 && out == SOFTMAX_DTYPE_F32) return 4;
  return layout_bytes(held, out);
}

softmax_options typed_options(softmax_dtype y_dtype, uint32_t flags = 0) {
  softmax_options o = cuda_options(nullptr, flags | SOFTMAX_FLAG_Y_DTYPE);
  o.y_dtype = y_dtype;
  return o;
}

// |got - want| within a budget scaled by the magnitudes that went into want (the backward's dot
// products cancel), the arithmetic's precision and the output type's rounding.
bool near(softmax_dtype out, bool fp64, double got, double want, double scale, size_t cols) {
  if (std::isnan(want)) return std::isnan(got);
  const double storage = out == SOFTMAX_DTYPE_F64 ? 0x1p-52 : out == SOFTMAX_DTYPE_F32 ? 0x1p-23 : out == SOFTMAX_DTYPE_F16 ? 0x1p-10 : 0x1p-7;
  const double arith = (fp64 ? 4e-15 : 2e-6) * (1.0 + std::log2(double(cols) + 1.0));
  // Below the output type's smallest normal, its absolute step (f16's subnormals) or a flush to 0.
  const double floor = out == SOFTMAX_DTYPE_F16 ? 0x1p-24 : out == SOFTMAX_DTYPE_F64 ? 0x1p-1022 : 0x1p-126;
  return std::fabs(got - want) <= std::fabs(want) * storage + scale * arith + floor;
}

// ---- backward ------------------------------------------------------------------------------------

void run_backward(softmax_dtype xt, softmax_dtype yt, size_t rows, size_t cols, bool log_softmax, size_t offset,
                  bool in_place) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(::testing::Message() << "x " << dtype_name(xt) << " y " << dtype_name(yt) << " " << rows << "x"
                                    << cols << (log_softmax ? " log" : "") << " offset " << offset
                                    << (in_place ? " in place" : "") << " seed " << seed);
  const size_t n = rows * cols;
  const Buffer x = random_input(xt, n, seed);
  Buffer y(yt, n), dy(yt, n);
  std::mt19937_64 rng(seed ^ 0x5eed);
  std::normal_distribution<double> normal;
  std::vector<double> ref;
  for (size_t r = 0; r < rows; ++r) {
    reference_row(x, r, cols, log_softmax, &ref);
    for (size_t c = 0; c < cols; ++c) y.set(r * cols + c, ref[c]);
  }
  for (size_t i = 0; i < n; ++i) dy.set(i, normal(rng));
  Dev dyv(dy, offset), yv(y, offset);
  Dev dxv(xt, n, offset);
  void* dx = in_place ? dyv.p : dxv.p;
  const softmax_options o = typed_options(yt, log_softmax ? SOFTMAX_FLAG_LOG : 0u);
  ASSERT_RUNS_OR_REFUSED(softmax_rows_backward(yv.p, dyv.p, dx, int64_t(rows), int64_t(cols), xt, &o),
                         int64_t(cols), held_layout_bytes(yt, xt), 2);
  CUDA_OK(cudaDeviceSynchronize());
  const Buffer got = (in_place ? dyv : dxv).host(xt, n);
  const bool fp64 = xt == SOFTMAX_DTYPE_F64 || yt == SOFTMAX_DTYPE_F64;
  for (size_t r : rows_to_check(rows, cols, seed)) {
    double D = 0, mag = 0;
    for (size_t c = 0; c < cols; ++c) {
      const double yy = y.get(r * cols + c), g = dy.get(r * cols + c);
      D += log_softmax ? g : g * yy;
      mag += std::fabs(log_softmax ? g : g * yy);
    }
    for (size_t c = 0; c < cols; ++c) {
      const double yy = y.get(r * cols + c), g = dy.get(r * cols + c);
      const double want = log_softmax ? g - std::exp(yy) * D : yy * (g - D);
      const double scale = log_softmax ? std::fabs(g) + std::exp(yy) * mag : std::fabs(yy) * (std::fabs(g) + mag);
      ASSERT_TRUE(near(xt, fp64, got.get(r * cols + c), want, scale, cols))
          << "dx[" << r << "][" << c << "] = " << got.get(r * cols + c) << ", want " << want;
    }
  }
}

TEST(CudaBackward, EveryTypeAndLength) {
  REQUIRE_GPU();
  for (softmax_dtype t : kAllDtypes) {
    for (size_t cols : kCols) {
      run_backward(t, t, rows_for(cols), cols, false, 0, false);
      run_backward(t, t, rows_for(cols) / 3 | 1, cols, true, 1, false);
    }
  }
}

TEST(CudaBackward, InPlaceAndMisaligned) {
  REQUIRE_GPU();
  for (softmax_dtype t : {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_BF16}) {
    for (size_t cols : {size_t{33}, size_t{4097}, size_t{70001}}) {
      run_backward(t, t, 17, cols, false, 3, true);
      run_backward(t, t, 17, cols, true, 0, true);
    }
  }
}

// Rows past a cluster's registers: the resident split in many rounds of its groups (more rows
// than groups), aligned and not, softmax and log-softmax, in place; and past what the resident
// blocks hold (on the H200 about 3.2M columns), in waves.
TEST(CudaBackward, SplitRowsInRounds) {
  REQUIRE_GPU();
  run_backward(SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F32, 60, 300001, false, 0, false);
  run_backward(SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F32, 41, 262147, true, 1, true);
  run_backward(SOFTMAX_DTYPE_BF16, SOFTMAX_DTYPE_BF16, 40, 600001, true, 1, false);
  run_backward(SOFTMAX_DTYPE_BF16, SOFTMAX_DTYPE_BF16, 9, 1 << 20, false, 0, true);
  run_backward(SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F32, 2, 4000000, false, 0, false);
  run_backward(SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F32, 60, 300000, false, 0, false);
  run_backward(SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F32, 41, 262144, true, 0, true);
}

// Resident split rows after a block's first, where every row of y and dy starts on a 16-byte
// boundary, go to shared memory by cp.async, the next row while the block writes this one; a
// block's first row, and rows off those boundaries, go through registers. Both sum the same tiles
// in the same order, as do the waves that run a lone row: a row alone (in waves), in a batch
// (copied), one element off (loaded) or in place gives the same bits, over several rounds of rows. Under a forced strategy that cannot
// hold such rows, the batch is refused by name and the case ends there.
void copied_tiles_case(softmax_dtype t, size_t rows, size_t cols, bool log_softmax) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(::testing::Message() << dtype_name(t) << " " << rows << "x" << cols << (log_softmax ? " log" : "")
                                    << " seed " << seed);
  const size_t n = rows * cols, es = element_size(t);
  const Buffer y = random_input(t, n, seed), dy = random_input(t, n, seed ^ 0x5eed);
  const softmax_options o = cuda_options(nullptr, log_softmax ? SOFTMAX_FLAG_LOG : 0u);
  auto rows_of = [&](const Buffer& b, size_t first, size_t count) {
    Buffer part(t, count * cols);
    std::memcpy(part.data(), b.bytes.data() + first * cols * es, count * cols * es);
    return part;
  };
  Buffer batch(t, n);
  {
    Dev yv(y, 0), dyv(dy, 0), dxv(t, n, 0);
    ASSERT_RUNS_OR_REFUSED(softmax_rows_backward(yv.p, dyv.p, dxv.p, int64_t(rows), int64_t(cols), t, &o),
                           int64_t(cols), held_layout_bytes(t, t), 2);
    batch = dxv.host(t, n);
  }
  auto run = [&](size_t first, size_t count, size_t offset, bool in_place) {
    Dev yv(rows_of(y, first, count), offset), dyv(rows_of(dy, first, count), offset), dxv(t, count * cols, offset);
    void* dx = in_place ? dyv.p : dxv.p;
    EXPECT_EQ(softmax_rows_backward(yv.p, dyv.p, dx, int64_t(count), int64_t(cols), t, &o), SOFTMAX_STATUS_SUCCESS)
        << softmax_last_error();
    return (in_place ? dyv : dxv).host(t, count * cols);
  };
  const Buffer in_place = run(0, rows, 0, true), off = run(0, rows, 1, false);
  EXPECT_EQ(0, std::memcmp(batch.data(), off.data(), n * es)) << "one element off";
  EXPECT_EQ(0, std::memcmp(batch.data(), in_place.data(), n * es)) << "in place";
  for (size_t r : {rows / 2, rows - 1}) {
    const Buffer alone = run(r, 1, 0, false);
    EXPECT_EQ(0, std::memcmp(alone.data(), batch.bytes.data() + r * cols * es, cols * es)) << "row " << r << " alone";
  }
}

TEST(CudaBackward, CopiedTilesGiveTheBitsOfLoadedOnes) {
  REQUIRE_GPU();
  for (softmax_dtype t : {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_BF16})
    for (auto [rows, cols] : {std::pair<size_t, size_t>{60, 300000}, {60, 300001}, {9, size_t{1} << 20}})
      for (bool log_softmax : {false, true}) copied_tiles_case(t, rows, cols, log_softmax);
}

// More rows than the device holds blocks or clusters of the long-row kernels at once, so the
// grid loops over the rows (launch_register), with aligned and misaligned rows.
TEST(CudaBackward, LoopingGridOfLongRows) {
  REQUIRE_GPU();
  const size_t rows = rows_past_resident_blocks();
  for (size_t cols : {size_t{12345}, size_t{33000}}) {
    run_backward(SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F32, rows, cols, false, 0, false);
    run_backward(SOFTMAX_DTYPE_BF16, SOFTMAX_DTYPE_BF16, rows, cols, true, 1, false);
  }
}

TEST(CudaBackward, EveryPairOfTypes) {
  REQUIRE_GPU();
  for (softmax_dtype xt : kAllDtypes) {
    for (softmax_dtype yt : kAllDtypes) {
      // Aligned, and one and three elements off alignment.
      for (size_t cols : {size_t{7}, size_t{1000}, size_t{20001}}) {
        run_backward(xt, yt, 9, cols, cols == 1000, cols == 7 ? 0 : cols == 1000 ? 1 : 3, false);
      }
    }
  }
}

// ---- dropout backward ----------------------------------------------------------------------------

void run_dropout_backward(softmax_dtype xt, softmax_dtype yt, size_t rows, size_t cols, float p, uint64_t offset,
                          size_t misalign) {
  const uint64_t seed = fresh_seed(), dseed = seed * 0x9E3779B97F4A7C15ull;
  SCOPED_TRACE(::testing::Message() << "x " << dtype_name(xt) << " dy " << dtype_name(yt) << " " << rows << "x"
                                    << cols << " p " << p << " offset " << offset << " misalign " << misalign
                                    << " seed " << seed);
  const size_t n = rows * cols;
  const Buffer x = random_input(xt, n, seed);
  Buffer dy(yt, n);
  std::mt19937_64 rng(seed ^ 0xd1);
  std::normal_distribution<double> normal;
  for (size_t i = 0; i < n; ++i) dy.set(i, normal(rng));
  Dev xv(x, misalign), dyv(dy, misalign);
  Dev dxv(xt, n, misalign);
  const softmax_options o = typed_options(yt);
  const auto call = [&] {
    return softmax_dropout_backward(xv.p, dyv.p, dxv.p, int64_t(rows), int64_t(cols), xt, p, dseed, offset, &o);
  };
  if (p >= 1.0f) {
    // dx = 0 without a softmax: no strategy, forced or not, is involved.
    ASSERT_EQ(call(), SOFTMAX_STATUS_SUCCESS) << softmax_last_error();
  } else {
    ASSERT_RUNS_OR_REFUSED(call(), int64_t(cols), layout_bytes(xt, yt), 2);
  }
  CUDA_OK(cudaDeviceSynchronize());
  const Buffer got = dxv.host(xt, n);
  const bool fp64 = xt == SOFTMAX_DTYPE_F64 || yt == SOFTMAX_DTYPE_F64;
  // The scale in the arithmetic's precision (fp64 scale for fp64 arithmetic).
  const double scale_p = p >= 1.0f ? 0.0 : fp64 ? 1.0 / (1.0 - double(p)) : double(dropout_scale(p));
  std::vector<double> s;
  for (size_t r : rows_to_check(rows, cols, seed)) {
    reference_row(x, r, cols, false, &s);
    std::vector<double> g(cols);
    double D = 0, mag = 0;
    for (size_t c = 0; c < cols; ++c) {
      const size_t i = r * cols + c;
      g[c] = dropout_keep(dseed, offset, i, p) ? dy.get(i) * scale_p : 0.0;
      D += s[c] * g[c];
      mag += std::fabs(s[c] * g[c]);
    }
    for (size_t c = 0; c < cols; ++c) {
      const double want = s[c] * (g[c] - D);
      ASSERT_TRUE(near(xt, fp64, got.get(r * cols + c), want, s[c] * (std::fabs(g[c]) + mag) * 4, cols))
          << "dx[" << r << "][" << c << "] = " << got.get(r * cols + c) << ", want " << want;
    }
  }
}

TEST(CudaDropoutBackward, MatchesTheForwardsMask) {
  REQUIRE_GPU();
  const uint64_t offsets[] = {0, 1, 2, 3, 4, 7};
  // Pointers off alignment by one element, and by two (16-bit rows of even length in pieces).
  const size_t misalign[] = {0, 0, 1, 0, 2, 1, 0};
  int i = 0;
  for (softmax_dtype t : kAllDtypes) {
    for (size_t cols : kCols) {
      run_dropout_backward(t, t, rows_for(cols) / 2 | 1, cols, 0.2f, offsets[i % 6], misalign[i % 7]);
      ++i;
    }
  }
}

// 16-bit rows that all start on 4-byte boundaries, not all on 16-byte ones, move in pieces:
// even lengths that are not a multiple of 8, and pointers two elements off.
TEST(CudaDropoutBackward, SixteenBitRowsOnFourByteBoundaries) {
  REQUIRE_GPU();
  int i = 0;
  for (softmax_dtype t : {SOFTMAX_DTYPE_BF16, SOFTMAX_DTYPE_F16}) {
    for (size_t cols : {size_t{6}, size_t{130}, size_t{2050}, size_t{4100}, size_t{4096}}) {
      for (size_t misalign : {size_t{0}, size_t{2}}) {
        run_dropout_backward(t, t, rows_for(cols) / 2 | 1, cols, 0.2f, uint64_t(i % 5), misalign);
        ++i;
      }
    }
  }
}

// As CudaBackward.LoopingGridOfLongRows, for the dropout backward.
TEST(CudaDropoutBackward, LoopingGridOfLongRows) {
  REQUIRE_GPU();
  const size_t rows = rows_past_resident_blocks();
  for (size_t cols : {size_t{12345}, size_t{33000}}) {
    run_dropout_backward(SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F32, rows, cols, 0.2f, 3, 0);
    run_dropout_backward(SOFTMAX_DTYPE_BF16, SOFTMAX_DTYPE_BF16, rows, cols, 0.2f, 0, 1);
  }
}

TEST(CudaDropoutBackward, ProbabilityEdgesAndTypePairs) {
  REQUIRE_GPU();
  for (float p : {0.0f, 0.5f, 1.0f}) run_dropout_backward(SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F32, 13, 999, p, 5, 0);
  for (softmax_dtype xt : kAllDtypes) {
    for (softmax_dtype yt : kAllDtypes) run_dropout_backward(xt, yt, 5, 3001, 0.3f, 2, 0);
  }
}

// ---- sharded rows --------------------------------------------------------------------------------

// Row statistics of column shards of x, merged on the host as the header says, then the rows
// from the merged statistics: equal to the float64 softmax of the whole rows.
void run_sharded(softmax_dtype xt, softmax_dtype yt, size_t rows, size_t cols, bool log_softmax, float magnitude) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(::testing::Message() << dtype_name(xt) << "->" << dtype_name(yt) << " " << rows << "x" << cols
                                    << (log_softmax ? " log" : "") << " magnitude " << magnitude << " seed " << seed);
  const size_t n = rows * cols;
  Buffer x = random_input(xt, n, seed, magnitude);
  if (rows > 2) {
    for (size_t c = 0; c < cols; ++c) x.set(cols + c, -INFINITY);  // row 1: all -inf
  }
  // Shards: [0, a), [a, b), [b, cols) with uneven, possibly empty middle.
  const size_t a = cols / 3, b = std::min(cols, a + (cols > 2 ? 1 : 0));
  const size_t cuts[] = {0, a, b, cols};
  std::vector<double> M(rows, -INFINITY), S(rows, 0.0);
  std::vector<std::vector<double>> shard_max(3), shard_sum(3);
  Buffer y(yt, n);
  y.poison();
  for (int sh = 0; sh < 3; ++sh) {
    const size_t w = cuts[sh + 1] - cuts[sh];
    if (w == 0) continue;
    Buffer xs(xt, rows * w);
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < w; ++c) xs.set(r * w + c, x.get(r * cols + cuts[sh] + c));
    Dev xv(xs, sh);
    DeviceBytes mx(rows * 4), se(rows * 4);
    const softmax_options o = typed_options(yt, log_softmax ? SOFTMAX_FLAG_LOG : 0u);
    ASSERT_RUNS_OR_REFUSED(softmax_row_stats(xv.p, mx.at<float>(), se.at<float>(), int64_t(rows), int64_t(w), xt, &o),
                           int64_t(w), element_size(xt), 1);
    std::vector<float> hm(rows), hs(rows);
    CUDA_OK(cudaMemcpy(hm.data(), mx.p, rows * 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(hs.data(), se.p, rows * 4, cudaMemcpyDeviceToHost));
    for (size_t r = 0; r < rows; ++r) {
      const double m = std::max(M[r], double(hm[r]));
      const double ta = S[r] == 0 ? 0.0 : S[r] * std::exp(M[r] - m);
      const double tb = hs[r] == 0 ? 0.0 : double(hs[r]) * std::exp(double(hm[r]) - m);
      M[r] = m;
      S[r] = ta + tb;
    }
  }
  std::vector<float> fm(rows), fs(rows);
  for (size_t r = 0; r < rows; ++r) fm[r] = float(M[r]), fs[r] = float(S[r]);
  for (int sh = 0; sh < 3; ++sh) {
    const size_t w = cuts[sh + 1] - cuts[sh];
    if (w == 0) continue;
    Buffer xs(xt, rows * w);
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < w; ++c) xs.set(r * w + c, x.get(r * cols + cuts[sh] + c));
    Dev xv(xs, 0), yv(yt, rows * w, 1);
    DeviceBytes mx(rows * 4), se(rows * 4);
    CUDA_OK(cudaMemcpy(mx.p, fm.data(), rows * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(se.p, fs.data(), rows * 4, cudaMemcpyHostToDevice));
    const softmax_options o = typed_options(yt, log_softmax ? SOFTMAX_FLAG_LOG : 0u);
    ASSERT_RUNS_OR_REFUSED(softmax_rows_from_stats(xv.p, yv.p, mx.at<float>(), se.at<float>(), int64_t(rows),
                                                   int64_t(w), xt, &o),
                           int64_t(w), held_layout_bytes(xt, yt), 1);
    CUDA_OK(cudaDeviceSynchronize());
    const Buffer ys = yv.host(yt, rows * w);
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < w; ++c) y.set(r * cols + cuts[sh] + c, ys.get(r * w + c));
  }
  std::vector<double> ref;
  for (size_t r = 0; r < rows; ++r) {
    reference_row(x, r, cols, log_softmax, &ref);
    for (size_t c = 0; c < cols; ++c) {
      // The merged statistics are rounded to float once more than the unsharded call's.
      const double want = ref[c], got = y.get(r * cols + c);
      ASSERT_TRUE(element_ok(yt, got, want, log_softmax, cols) ||
                  std::fabs(got - want) <= 2 * tolerance(yt, want, log_softmax, cols) + 1e-6 * std::fabs(want))
          << "y[" << r << "][" << c << "] = " << got << ", want " << want;
    }
  }
}

TEST(CudaSharded, StatisticsMergeToTheWholeRow) {
  REQUIRE_GPU();
  for (softmax_dtype t : {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F16, SOFTMAX_DTYPE_BF16}) {
    for (size_t cols : {size_t{2}, size_t{5}, size_t{1000}, size_t{40001}, size_t{300001}}) {
      run_sharded(t, t, 7, cols, false, 8.0f);
      run_sharded(t, SOFTMAX_DTYPE_F32, 5, cols, true, 8.0f);
    }
  }
  run_sharded(SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F32, 5, 4097, false, 1e30f);
}

TEST(CudaSharded, BackwardStatisticsSumToTheWholeRow) {
  REQUIRE_GPU();
  for (softmax_dtype t : {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_BF16}) {
    for (bool log_softmax : {false, true}) {
      const size_t rows = 9, cols = 5003, n = rows * cols;
      const uint64_t seed = fresh_seed();
      SCOPED_TRACE(::testing::Message() << dtype_name(t) << (log_softmax ? " log" : "") << " seed " << seed);
      Buffer y = random_input(t, n, seed, 1.0f), dy = random_input(t, n, seed + 1, 1.0f);
      Dev yv(y, 0), dyv(dy, 0), dxv(t, n, 0), dx2(t, n, 0);
      DeviceBytes dot(rows * 4);
      const softmax_options o = cuda_options(nullptr, log_softmax ? SOFTMAX_FLAG_LOG : 0u);
      ASSERT_RUNS_OR_REFUSED(softmax_backward_row_stats(yv.p, dyv.p, dot.at<float>(), int64_t(rows), int64_t(cols), t, &o),
                             int64_t(cols), element_size(t), 2);
      ASSERT_RUNS_OR_REFUSED(softmax_rows_backward_from_stats(yv.p, dyv.p, dxv.p, dot.at<float>(), int64_t(rows),
                                                              int64_t(cols), t, &o),
                             int64_t(cols), element_size(t), 2);
      ASSERT_EQ(softmax_rows_backward(yv.p, dyv.p, dx2.p, int64_t(rows), int64_t(cols), t, &o), SOFTMAX_STATUS_SUCCESS);
      CUDA_OK(cudaDeviceSynchronize());
      const Buffer a = dxv.host(t, n), b = dx2.host(t, n);
      for (size_t i = 0; i < n; ++i) {
        const double d = std::fabs(a.get(i) - b.get(i));
        ASSERT_LE(d, 1e-5 * (1 + std::fabs(b.get(i))) + (t == SOFTMAX_DTYPE_F32 ? 0 : 1e-2 * std::fabs(b.get(i))))
            << i << ": " << a.get(i) << " vs " << b.get(i);
      }
    }
  }
}

// ---- storage types and magnitudes ------------------------------------------------------------------

void run_forward_typed(softmax_dtype xt, softmax_dtype yt, size_t rows, size_t cols, bool log_softmax, float magnitude,
                       size_t offset) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(::testing::Message() << dtype_name(xt) << "->" << dtype_name(yt) << " " << rows << "x" << cols
                                    << (log_softmax ? " log" : "") << " magnitude " << magnitude << " offset "
                                    << offset << " seed " << seed);
  const size_t n = rows * cols;
  Buffer x = random_input(xt, n, seed, magnitude);
  // Mixed signs at the extremes, and -inf in every 5th element of row 0.
  if (cols > 2) {
    x.set(0, magnitude);
    x.set(1, -magnitude);
  }
  for (size_t c = 2; c < cols; c += 5) x.set(c, -INFINITY);
  Dev xv(x, offset), yv(yt, n, offset);
  const softmax_options o = typed_options(yt, log_softmax ? SOFTMAX_FLAG_LOG : 0u);
  ASSERT_ROWS_RUN_OR_REFUSED(softmax_rows(xv.p, yv.p, int64_t(rows), int64_t(cols), xt, &o), int64_t(cols),
                             held_layout_bytes(xt, yt));
  CUDA_OK(cudaDeviceSynchronize());
  const Buffer y = yv.host(yt, n);
  const bool fp64 = xt == SOFTMAX_DTYPE_F64 || yt == SOFTMAX_DTYPE_F64;
  std::vector<double> ref;
  for (size_t r : rows_to_check(rows, cols, seed)) {
    reference_row(x, r, cols, log_softmax, &ref);
    for (size_t c = 0; c < cols; ++c) {
      // Magnitudes far past 1 make x - max itself inexact in the input's precision: the
      // log-softmax of such elements is judged relative to |x - max|.
      ASSERT_TRUE(element_ok(yt, y.get(r * cols + c), ref[c], log_softmax, cols, fp64))
          << "y[" << r << "][" << c << "] = " << y.get(r * cols + c) << ", want " << ref[c]
          << " (x = " << x.get(r * cols + c) << ")";
    }
  }
}

// Every pair of storage types from segments to split rows; 1100 and 2050 columns take the blocks
// of three chunks a thread of f32 chunks (f32 rows, 16-bit x with f32 y) and of 16-bit rows;
// 200003 columns take clusters of 16 blocks where y is f32 and x f32 or 16-bit, clusters of eight
// where both are 16-bit, split rows where x is f32 and y 16-bit or either is f64.
TEST(CudaTypes, EveryPairOfStorageTypes) {
  REQUIRE_GPU();
  for (softmax_dtype xt : kAllDtypes) {
    for (softmax_dtype yt : kAllDtypes) {
      for (size_t cols : {size_t{5}, size_t{1000}, size_t{1100}, size_t{2050}, size_t{8193}, size_t{70001},
                          size_t{200003}}) {
        run_forward_typed(xt, yt, 9, cols, false, 8.0f, 0);
        run_forward_typed(xt, yt, 7, cols, true, 8.0f, 1);
      }
    }
  }
}

// 16-bit x with f32 y (and the reverse) on rows long enough for the looping grid of
// launch_register, with more rows than the device holds of those blocks or clusters at once:
// 8191 columns take the eight-chunk kernel in 256-thread blocks, four to an SM, 16384 in
// 512-thread blocks, two to an SM (the kernel that prefetches the next row for 16-bit x), 32769
// in clusters.
TEST(CudaTypes, MixedTypesOnTheLoopingGrid) {
  REQUIRE_GPU();
  const size_t rows = rows_past_resident_blocks();
  for (size_t cols : {size_t{5601}, size_t{8191}, size_t{16384}, size_t{32769}}) {
    run_forward_typed(SOFTMAX_DTYPE_BF16, SOFTMAX_DTYPE_F32, rows, cols, false, 8.0f, 0);
    run_forward_typed(SOFTMAX_DTYPE_F16, SOFTMAX_DTYPE_F32, rows, cols, true, 8.0f, 1);
    run_forward_typed(SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_BF16, rows / 2 | 1, cols, false, 8.0f, 3);
  }
}

TEST(CudaTypes, LargeMagnitudesEveryStrategyLength) {
  REQUIRE_GPU();
  for (float magnitude : {1e4f, 1e8f, 1e10f, 1e20f, 1e30f, 3e38f}) {
    for (softmax_dtype t : {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_BF16, SOFTMAX_DTYPE_F64}) {
      for (size_t cols : {size_t{3}, size_t{100}, size_t{4097}, size_t{100000}, size_t{300001}}) {
        run_forward_typed(t, t, 5, cols, false, magnitude, 0);
        run_forward_typed(t, t, 3, cols, true, magnitude, 0);
      }
    }
  }
}

TEST(CudaEmpty, EveryEntryPointSucceedsWithoutTouchingMemory) {
  REQUIRE_GPU();
  const softmax_options o = cuda_options();
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{0, 5}, {5, 0}, {0, 0}}) {
    EXPECT_EQ(softmax_rows(nullptr, nullptr, rows, cols, SOFTMAX_DTYPE_F32, &o), SOFTMAX_STATUS_SUCCESS);
    EXPECT_EQ(softmax_dropout(nullptr, nullptr, nullptr, rows, cols, SOFTMAX_DTYPE_BF16, 0.5f, 1, 2, &o),
              SOFTMAX_STATUS_SUCCESS);
    EXPECT_EQ(softmax_rows_backward(nullptr, nullptr, nullptr, rows, cols, SOFTMAX_DTYPE_F16, &o), SOFTMAX_STATUS_SUCCESS);
    EXPECT_EQ(softmax_dropout_backward(nullptr, nullptr, nullptr, rows, cols, SOFTMAX_DTYPE_F64, 0.5f, 1, 2, &o),
              SOFTMAX_STATUS_SUCCESS);
    EXPECT_EQ(softmax_row_stats(nullptr, nullptr, nullptr, rows, cols, SOFTMAX_DTYPE_F32, &o), SOFTMAX_STATUS_SUCCESS);
  }
}

}  // namespace
}  // namespace softmax_cuda_test
