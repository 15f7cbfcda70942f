// SPDX-License-Identifier: Apache-2.0
// softmax_rows on the CUDA backend through the public C API, against the float64 reference on
// fresh random inputs with poisoned outputs: every dtype, softmax and log-softmax, row lengths
// on both sides of every strategy threshold, row counts that are multiples of nothing,
// misaligned pointers, in place, non-finite rows, and single rows up to 2^28 elements.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <thread>
#include <tuple>
#include <vector>

#include "cuda_test_support.h"

namespace softmax_cuda_test {
namespace {

struct Case {
  softmax_dtype dtype;
  size_t rows, cols;
  bool log_softmax = false;
  size_t offset_elems = 0;  // shift x and y by this many elements (misaligned when odd)
  bool in_place = false;
  size_t y_shift_elems = 0;  // shift y by this many elements more than x
};

// Bytes of y's allocation past its last element, which the call must leave as they were.
constexpr size_t kGuardBytes = 32;

// Runs one case on stream `s` and checks it, and that no byte of y's allocation outside y was
// written; the seed is printed on failure.
void run_case(const Case& c, cudaStream_t s = nullptr) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(::testing::Message() << dtype_name(c.dtype) << " " << c.rows << "x" << c.cols
                                    << (c.log_softmax ? " log" : "") << " offset " << c.offset_elems
                                    << (c.in_place ? " in-place" : "") << " y shifted " << c.y_shift_elems
                                    << " seed " << seed);
  const size_t n = c.rows * c.cols, es = element_size(c.dtype);
  const Buffer x = random_input(c.dtype, n, seed);
  const size_t y_offset = (c.offset_elems + (c.in_place ? 0 : c.y_shift_elems)) * es;
  const size_t bytes = (n + c.offset_elems + c.y_shift_elems) * es + kGuardBytes;
  DeviceBytes dx(bytes), dy(bytes);
  ASSERT_NE(dx.p, nullptr);
  ASSERT_NE(dy.p, nullptr);
  void* xp = dx.at(c.offset_elems * es);
  const DeviceBytes& y_alloc = c.in_place ? dx : dy;
  void* yp = y_alloc.at(y_offset);
  CUDA_OK(poison(dx.p, bytes, s));
  CUDA_OK(poison(dy.p, bytes, s));
  CUDA_OK(cudaMemcpyAsync(xp, x.data(), n * es, cudaMemcpyHostToDevice, s));
  const softmax_options o = cuda_options(s, c.log_softmax ? SOFTMAX_FLAG_LOG : 0u);
  ASSERT_ROWS_RUN_OR_REFUSED(softmax_rows(xp, yp, int64_t(c.rows), int64_t(c.cols), c.dtype, &o), int64_t(c.cols), es);
  Buffer y(c.dtype, n);
  std::vector<unsigned char> around(bytes);
  CUDA_OK(cudaMemcpyAsync(y.data(), yp, n * es, cudaMemcpyDeviceToHost, s));
  CUDA_OK(cudaMemcpyAsync(around.data(), y_alloc.p, bytes, cudaMemcpyDeviceToHost, s));
  CUDA_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(rows_match_reference(x, y, c.rows, c.cols, c.log_softmax,
                                   rows_to_check(c.rows, c.cols, seed)));
  for (size_t b = 0; b < bytes; ++b) {
    if (b >= y_offset && b < y_offset + n * es) continue;
    if (around[b] != 0xFF) {
      ADD_FAILURE() << "byte " << b << " of y's allocation, outside y (bytes " << y_offset << " to "
                    << y_offset + n * es << "), was written";
      break;
    }
  }
}

// Row counts chosen to be multiples of nothing (not of 2, 4, 32, 128 or the SM count) and to
// keep each case near a few million elements.
size_t rows_for(size_t cols) {
  size_t r = std::max<size_t>(3, (size_t{3} << 20) / cols);
  r = std::min<size_t>(r, 4099);
  return r | 1;
}

using Param = std::tuple<softmax_dtype, size_t, bool>;

class CudaRowsTest : public ::testing::TestWithParam<Param> {};

TEST_P(CudaRowsTest, MatchesFloat64Reference) {
  REQUIRE_GPU();
  const auto [dtype, cols, log_softmax] = GetParam();
  run_case({dtype, rows_for(cols), cols, log_softmax});
}

TEST_P(CudaRowsTest, MisalignedByOneElement) {
  REQUIRE_GPU();
  const auto [dtype, cols, log_softmax] = GetParam();
  run_case({dtype, std::max<size_t>(3, rows_for(cols) / 7) | 1, cols, log_softmax, 1});
}

const size_t kCols[] = {1,    2,    3,    31,   32,    33,    127,   1000,   1023,  1024,
                        1025, 1536, 2047, 4097, 12345, 32769, 65537, 200003, 1048577};

INSTANTIATE_TEST_SUITE_P(
    AllShapes, CudaRowsTest,
    ::testing::Combine(::testing::Values(SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F16, SOFTMAX_DTYPE_BF16),
                       ::testing::ValuesIn(kCols), ::testing::Bool()),
    [](const ::testing::TestParamInfo<Param>& info) {
      return std::string(dtype_name(std::get<0>(info.param))) + "_cols" +
             std::to_string(std::get<1>(info.param)) + (std::get<2>(info.param) ? "_log" : "");
    });

// Rows of whole 16-byte chunks in segments of one to four lanes, which move through the warps'
// shared-memory stage (warp_stage.cuh; 16-bit rows of four lanes by themselves): every such
// length, row counts that leave a warp's last rows empty, log-softmax, in place, and x and y one
// chunk off (still on 16-byte boundaries, the aligned stage) or one element off (the mid-vector
// stage). SOFTMAX_CUDA_STAGED_ROWS=0 runs the same calls through the unstaged kernels.
TEST(CudaRowsStaged, EveryNarrowSegmentLength) {
  REQUIRE_GPU();
  for (softmax_dtype t : {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F16, SOFTMAX_DTYPE_BF16}) {
    const size_t chunk = 16 / element_size(t);
    for (size_t cols = chunk; cols <= 16 * chunk; cols += chunk) {
      for (size_t rows : {size_t{1}, size_t{7}, size_t{33}, size_t{1001}}) run_case({t, rows, cols});
      run_case({t, 4099, cols, true});
      run_case({t, 515, cols, false, chunk});
      run_case({t, 515, cols, false, 1});
      run_case({t, 515, cols, false, 0, true});
    }
  }
}

// Rows that start mid-vector (lengths that are not a multiple of the vector, pointers off a
// 16-byte boundary, x and y at different offsets) in segments of every width: f32 segments and
// 16-bit ones of up to four lanes move them through the warps' stages as the aligned vectors
// covering each warp's rows, wider ones realign them by shuffles. Lone rows and partial warps,
// whose run ends mid-vector inside the array or at its ends, log-softmax and in place. The ctest
// entries run them again with every segment width staged, aligned rows too
// (cuda.staged_every_width) and with none (cuda.unstaged_rows, SOFTMAX_CUDA_STAGED_ROWS=0).
TEST(CudaRowsStaged, MisalignedRowsOfEverySegmentWidth) {
  REQUIRE_GPU();
  for (softmax_dtype t : {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F16, SOFTMAX_DTYPE_BF16}) {
    const size_t v = 16 / element_size(t);
    for (size_t vectors : {1, 2, 3, 5, 8, 9, 13, 16, 17, 25, 32, 33, 63, 64, 65, 100, 127, 128}) {
      for (size_t cols : {vectors * v - 1, vectors * v + 1, vectors * v}) {
        run_case({t, 301, cols});
        run_case({t, 1, cols, false, 3});
        run_case({t, 7, cols, true, 1});
        run_case({t, 131, cols, false, 1, false, 2});
        run_case({t, 66, cols, false, 0, false, 1});
        run_case({t, 33, cols, false, 1, true});
      }
    }
  }
}

// Shapes that land on each branch of the launcher's table: warp groups of every width, one block
// per row (16-bit rows of 1200 columns: one warp of six chunks; 640, 1100 and 2304 columns: warps
// of three chunks, f32 or 16-bit), clusters of 2/4/8/16 (16: f32 rows of 200003 and 262144
// columns, 16-bit rows of 400000), split rows for few rows, for long rows, and in several L2-sized
// waves.
TEST(CudaRowsStrategies, EveryBranchOfTheTable) {
  REQUIRE_GPU();
  const std::pair<size_t, size_t> shapes[] = {
      {4097, 4},   {1001, 8},   {517, 64},   {301, 256},    {77, 640},    {33, 1024},   {53, 1100},
      {67, 1200},  {131, 2048}, {43, 2304},  {29, 8192},    {201, 8193},  {67, 16384},  {101, 32768},
      {41, 65536}, {5, 20000},  {2, 40000},  {3, 131072},   {1, 1 << 20}, {40, 200003}, {24, 262144},
      {7, 16385},  {3, 400000}};
  for (softmax_dtype t : {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_BF16, SOFTMAX_DTYPE_F16}) {
    for (auto [rows, cols] : shapes) {
      run_case({t, rows, cols, false});
      run_case({t, rows, cols, true, 0});
      run_case({t, rows, cols, false, 3});
    }
  }
}

// Rows past a cluster's registers. Those whose parts fit in the shared memory of the resident
// blocks run the resident split (one cooperative launch; on the H200 up to about 6.4M columns)
// unless the call's x fits in half of L2 (one wave of the waves' two launches): lone rows and
// small batches in waves, rows in several rounds of groups, rows just past a cluster,
// misaligned, log-softmax and in place; 7M columns run in waves. SOFTMAX_CUDA_RESIDENT_SPLIT=0
// runs every call in waves. A cluster holds twice the columns of 16-bit rows (one of 16 blocks:
// 256K f32, 512K 16-bit columns), so their shapes past it are twice as long.
TEST(CudaRowsSplit, ResidentRoundsAndWaves) {
  REQUIRE_GPU();
  for (softmax_dtype t : {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_BF16}) {
    const size_t s = 4 / element_size(t);
    const std::pair<size_t, size_t> shapes[] = {{1, 262144 * s + 1}, {9, size_t{1} << 20}, {40, 262144 * s + 3},
                                                {21, 600001},        {100, 300000 * s},    {1, 6000000},
                                                {2, 7000000}};
    for (auto [rows, cols] : shapes) {
      run_case({t, rows, cols, false});
      run_case({t, rows, cols, true, 1});
    }
    run_case({t, 5, 400003 * s, false, 0, true});
    run_case({t, 100, 300000 * s, true, 0, true});
  }
}

// Resident split rows after a block's first, where every row starts on a 16-byte boundary, go
// from global to shared memory by cp.async, the next row while the block writes this one; a
// block's first row, and rows off those boundaries, are loaded through registers. Both fold the
// same tiles in the same order, and the waves that run a lone row fold the same parts, so a row
// gives the same bits alone (in waves) as in a batch (copied), one element off (loaded), or in
// place: several rounds of rows per group, a part and a tile cut short (300000 f32 columns, 600000
// 16-bit), an odd length, softmax and log-softmax.
TEST(CudaRowsSplit, CopiedTilesGiveTheBitsOfLoadedOnes) {
  REQUIRE_GPU();
  for (softmax_dtype t : {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_BF16}) {
    const size_t s = 4 / element_size(t);  // past a cluster of 16-bit rows: twice the columns
    const std::pair<size_t, size_t> shapes[] = {
        {100, 300000 * s}, {100, 300000 * s + 1}, {9, size_t{1} << 20}, {40, 750000}};
    for (const auto& shape : shapes) {
      const size_t rows = shape.first, cols = shape.second;  // plain variables: the lambda below captures cols
      for (bool log_softmax : {false, true}) {
        const uint64_t seed = fresh_seed();
        SCOPED_TRACE(::testing::Message() << dtype_name(t) << " " << rows << "x" << cols
                                          << (log_softmax ? " log" : "") << " seed " << seed);
        const size_t es = element_size(t);
        const Buffer x = random_input(t, rows * cols, seed);
        const softmax_options o = cuda_options(nullptr, log_softmax ? SOFTMAX_FLAG_LOG : 0u);
        // Rows [first, first + count) of x, `offset_elems` into their allocation.
        auto run = [&](size_t first, size_t count, size_t offset_elems, bool in_place) {
          const size_t n = count * cols;
          DeviceBytes dx((n + offset_elems) * es), dy((n + offset_elems) * es);
          Buffer y(t, n);
          if (dx.p == nullptr || dy.p == nullptr) {
            ADD_FAILURE() << "cudaMalloc failed";
            return y;
          }
          void* xp = dx.at(offset_elems * es);
          void* yp = in_place ? xp : dy.at(offset_elems * es);
          EXPECT_EQ(cudaMemcpy(xp, x.bytes.data() + first * cols * es, n * es, cudaMemcpyHostToDevice), cudaSuccess);
          if (!in_place) EXPECT_EQ(poison(yp, n * es), cudaSuccess);
          EXPECT_EQ(softmax_rows(xp, yp, int64_t(count), int64_t(cols), t, &o), SOFTMAX_STATUS_SUCCESS)
              << softmax_last_error();
          EXPECT_EQ(cudaMemcpy(y.data(), yp, n * es, cudaMemcpyDeviceToHost), cudaSuccess);
          return y;
        };
        const Buffer batch = run(0, rows, 0, false), in_place = run(0, rows, 0, true), off = run(0, rows, 1, false);
        EXPECT_EQ(0, std::memcmp(batch.data(), off.data(), rows * cols * es)) << "one element off";
        EXPECT_EQ(0, std::memcmp(batch.data(), in_place.data(), rows * cols * es)) << "in place";
        for (size_t r : {rows / 2, rows - 1}) {
          const Buffer alone = run(r, 1, 0, false);
          EXPECT_EQ(0, std::memcmp(alone.data(), batch.bytes.data() + r * cols * es, cols * es)) << "row " << r << " alone";
        }
        EXPECT_TRUE(rows_match_reference(x, batch, rows, cols, log_softmax, rows_to_check(rows, cols, seed)));
      }
    }
  }
}

// Many rows: more than the warp kernel's grid has groups, so its row loop takes several steps
// (groups of 1 and 32 lanes), and tens of thousands of single blocks or clusters of 2 per row.
TEST(CudaRowsStrategies, PersistentGridRowLoops) {
  REQUIRE_GPU();
  const std::pair<size_t, size_t> shapes[] = {{9000001, 4}, {150001, 33}, {140001, 128}, {20001, 1100}, {9001, 5000}};
  for (auto [rows, cols] : shapes) {
    run_case({SOFTMAX_DTYPE_F32, rows, cols, false});
    run_case({SOFTMAX_DTYPE_BF16, rows, cols, true});
  }
}

// More rows than the device holds blocks or clusters of the long-row kernels at once (1024-thread
// blocks, clusters of 2 to 8), so the grid loops over the rows (launch_register); aligned,
// misaligned by one and three elements, log and not.
TEST(CudaRowsStrategies, LoopingGridOfLongRows) {
  REQUIRE_GPU();
  const size_t rows = rows_past_resident_blocks();
  for (softmax_dtype t : {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_BF16}) {
    for (size_t cols : {size_t{16000}, size_t{16384}, size_t{32001}, size_t{65536}, size_t{100003}}) {
      run_case({t, rows, cols, false});
      run_case({t, rows, cols, true, 1});
      run_case({t, rows / 2 | 1, cols, false, 3});
    }
  }
}

// A block's warps each hold one row, so a misaligned row moves with its shift known at compile
// time, one code path per shift. Rows one element past a multiple of the vector width start at
// every shift in turn (2 bytes apart for 16-bit rows, 4 for f32), from blocks of a few chunks a
// thread to the eight-chunk kernels; x one element off makes the array's first and last rows
// stick out of whole vectors (the loads that test each unit).
TEST(CudaRowsAlignment, EveryShiftOfBlockRows) {
  REQUIRE_GPU();
  for (softmax_dtype t : {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F16, SOFTMAX_DTYPE_BF16}) {
    for (size_t cols : {size_t{1025}, size_t{2049}, size_t{4097}, size_t{8193}, size_t{32001}}) {
      run_case({t, 17, cols, false});
      run_case({t, 17, cols, true, 1});
      run_case({t, 9, cols, false, 3});
    }
  }
}

TEST(CudaRowsInPlace, AllStrategies) {
  REQUIRE_GPU();
  for (softmax_dtype t : {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F16, SOFTMAX_DTYPE_BF16}) {
    for (auto [rows, cols] : {std::pair<size_t, size_t>{1023, 33}, {257, 1000}, {63, 5000},
                              {129, 40000}, {3, 70001}, {40, 200000}}) {
      run_case({t, rows, cols, false, 0, true});
      run_case({t, rows, cols, true, 1, true});
    }
  }
}

// NaN anywhere, all -inf, or any +inf makes the row NaN; a few -inf in a finite row give 0
// there and leave the rest normal. Each pattern on every strategy.
TEST(CudaRowsNonFinite, TextbookSemantics) {
  REQUIRE_GPU();
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (softmax_dtype t : {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_BF16}) {
    for (auto [rows, cols] : {std::pair<size_t, size_t>{9, 7}, {9, 100}, {9, 1000}, {9, 5000},
                              {9, 40000}, {9, 300001}, {600, 40000}}) {
      for (bool log_softmax : {false, true}) {
        const uint64_t seed = fresh_seed();
        SCOPED_TRACE(::testing::Message() << dtype_name(t) << " " << rows << "x" << cols
                                          << (log_softmax ? " log" : "") << " seed " << seed);
        const size_t n = rows * cols, es = element_size(t);
        Buffer x = random_input(t, n, seed);
        std::mt19937_64 rng(seed);
        // row 0: one NaN; row 1: all -inf; row 2: one +inf; row 3: some -inf; row 4: all NaN;
        // row 5: -inf everywhere but one finite value; row 6: +inf and -inf mixed.
        x.set(0 * cols + rng() % cols, nan);
        for (size_t c = 0; c < cols; ++c) x.set(1 * cols + c, -inf);
        x.set(2 * cols + rng() % cols, inf);
        for (size_t c = 0; c < cols; c += 3) x.set(3 * cols + c, -inf);
        for (size_t c = 0; c < cols; ++c) x.set(4 * cols + c, nan);
        for (size_t c = 0; c < cols; ++c) x.set(5 * cols + c, -inf);
        x.set(5 * cols + cols / 2, 1.5f);
        x.set(6 * cols, inf);
        x.set(6 * cols + cols - 1, -inf);
        DeviceBytes dx(n * es), dy(n * es);
        CUDA_OK(cudaMemcpy(dx.p, x.data(), n * es, cudaMemcpyHostToDevice));
        CUDA_OK(poison(dy.p, n * es));
        const softmax_options o = cuda_options(nullptr, log_softmax ? SOFTMAX_FLAG_LOG : 0u);
        ASSERT_ROWS_RUN_OR_REFUSED(softmax_rows(dx.p, dy.p, int64_t(rows), int64_t(cols), t, &o), int64_t(cols), es);
        Buffer y(t, n);
        CUDA_OK(cudaMemcpy(y.data(), dy.p, n * es, cudaMemcpyDeviceToHost));
        std::vector<size_t> which;
        for (size_t r = 0; r < std::min<size_t>(rows, 9); ++r) which.push_back(r);
        which.push_back(rows - 1);
        EXPECT_TRUE(rows_match_reference(x, y, rows, cols, log_softmax, which));
      }
    }
  }
}

// One row of up to 2^28 elements: generated on the host with a fast counter-based generator,
// its float64 max and sum computed over every element by several threads, and a random sample
// of outputs compared (the full comparison would dominate the suite's run time).
void check_single_long_row(softmax_dtype t, size_t cols, bool log_softmax) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(::testing::Message() << dtype_name(t) << " 1x" << cols << (log_softmax ? " log" : "")
                                    << " seed " << seed);
  const size_t es = element_size(t);
  Buffer x(t, cols);
  const unsigned nthreads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<double> tmax(nthreads, -INFINITY), tsum(nthreads, 0.0);
  auto slice = [&](unsigned i) { return std::pair<size_t, size_t>{cols * i / nthreads, cols * (i + 1) / nthreads}; };
  {
    std::vector<std::thread> pool;
    for (unsigned i = 0; i < nthreads; ++i) {
      pool.emplace_back([&, i] {
        auto [b, e] = slice(i);
        for (size_t k = b; k < e; ++k) {
          uint64_t z = seed + 0x9E3779B97F4A7C15ull * (k + 1);  // splitmix64
          z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
          z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
          z ^= z >> 31;
          x.set(k, float(double(z >> 40) * 0x1p-24 * 16.0 - 8.0));
          tmax[i] = std::max(tmax[i], double(x.get(k)));
        }
      });
    }
    for (auto& th : pool) th.join();
  }
  const double m = *std::max_element(tmax.begin(), tmax.end());
  {
    std::vector<std::thread> pool;
    for (unsigned i = 0; i < nthreads; ++i) {
      pool.emplace_back([&, i] {
        auto [b, e] = slice(i);
        double s = 0;
        for (size_t k = b; k < e; ++k) s += std::exp(double(x.get(k)) - m);
        tsum[i] = s;
      });
    }
    for (auto& th : pool) th.join();
  }
  double s = 0;
  for (double v : tsum) s += v;

  DeviceBytes dx(cols * es), dy(cols * es);
  ASSERT_NE(dx.p, nullptr);
  ASSERT_NE(dy.p, nullptr);
  CUDA_OK(cudaMemcpy(dx.p, x.data(), cols * es, cudaMemcpyHostToDevice));
  CUDA_OK(poison(dy.p, cols * es));
  const softmax_options o = cuda_options(nullptr, log_softmax ? SOFTMAX_FLAG_LOG : 0u);
  ASSERT_ROWS_RUN_OR_REFUSED(softmax_rows(dx.p, dy.p, 1, int64_t(cols), t, &o), int64_t(cols), es);
  Buffer y(t, cols);
  CUDA_OK(cudaMemcpy(y.data(), dy.p, cols * es, cudaMemcpyDeviceToHost));
  // No element may be left unwritten (poison is NaN).
  size_t nans = 0;
  for (size_t k = 0; k < cols; k += 1) nans += std::isnan(y.get(k)) ? 1 : 0;
  EXPECT_EQ(nans, 0u);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 200000; ++i) {
    const size_t k = i < 2 ? (i == 0 ? 0 : cols - 1) : rng() % cols;
    const double d = double(x.get(k)) - m;
    const double want = log_softmax ? d - std::log(s) : std::exp(d) / s;
    const double got = y.get(k);
    ASSERT_TRUE(close(t, got, want, log_softmax, cols))
        << "element " << k << " got " << got << " want " << want;
  }
}

TEST(CudaRowsSingleLongRow, F32UpTo2Pow28) {
  REQUIRE_GPU();
  check_single_long_row(SOFTMAX_DTYPE_F32, (size_t{1} << 20) + 3, false);
  check_single_long_row(SOFTMAX_DTYPE_F32, size_t{1} << 24, true);
  check_single_long_row(SOFTMAX_DTYPE_F32, size_t{1} << 28, false);
}

TEST(CudaRowsSingleLongRow, SixteenBitUpTo2Pow28) {
  REQUIRE_GPU();
  check_single_long_row(SOFTMAX_DTYPE_BF16, size_t{1} << 28, false);
  check_single_long_row(SOFTMAX_DTYPE_F16, (size_t{1} << 22) + 1, true);
}

}  // namespace
}  // namespace softmax_cuda_test
