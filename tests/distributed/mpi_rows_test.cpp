// SPDX-License-Identifier: Apache-2.0
// softmax_rows_mpi and softmax_rows_backward_mpi, run under mpiexec with any number of ranks.
// Every rank builds the same full matrix (seed from rank 0), runs the unsharded libsoftmax call on
// it locally, runs the adapter on its own columns, and checks its slice against both the float64
// formula and the unsharded result. Every rank makes every adapter call whatever happened before
// (checks are EXPECT_*, never early returns), so a failure on one rank never leaves the others
// waiting in a collective; ctest's timeout catches a hang all the same.
#include <gtest/gtest.h>
#include <softmax/softmax_mpi.h>

#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#if defined(SOFTMAX_TEST_WITH_CUDA)
#include <cuda_runtime_api.h>
#endif

#include "reference.h"
#include "shard_cases.h"
#include "shard_check.h"

namespace {

using softmax_shard_test::Buffer;
using softmax_shard_test::Layout;

int g_rank = 0;
int g_ranks = 1;
uint64_t g_seed = 0;

// A different seed for every case, the same on every rank.
uint64_t case_seed() {
  static uint64_t n = 0;
  return g_seed + 0x9e3779b97f4a7c15ull * ++n;
}

softmax_options options_for(bool log_softmax, softmax_backend backend = SOFTMAX_BACKEND_CPU) {
  softmax_options o = softmax_default_options();
  o.backend = backend;
  o.flags = log_softmax ? SOFTMAX_FLAG_LOG : 0u;
  return o;
}

softmax_options with_y_dtype(softmax_options o, softmax_dtype y) {
  o.flags |= SOFTMAX_FLAG_Y_DTYPE;
  o.y_dtype = y;
  return o;
}

std::string describe(const Layout& l) {
  std::string s = l.name + " [";
  for (size_t i = 0; i < l.cols.size(); ++i) s += (i ? " " : "") + std::to_string(l.cols[i]);
  return s + "]";
}

// The unsharded forward on the whole matrix, on this rank's CPU.
Buffer unsharded_rows(const Buffer& x, softmax_dtype y_dtype, int64_t rows, int64_t cols, const softmax_options& o) {
  Buffer y(y_dtype, x.size());
  y.poison();
  EXPECT_EQ(softmax_rows(x.data(), y.data(), rows, cols, x.dtype, &o), SOFTMAX_STATUS_SUCCESS) << softmax_last_error();
  return y;
}

// One sharded forward case: every rank runs it, each checks its own slice.
void check_forward(const Buffer& x_full, softmax_dtype y_dtype, int64_t rows, int64_t cols, const Layout& layout,
                   const softmax_options& o, const std::string& what) {
  const bool log_softmax = (o.flags & SOFTMAX_FLAG_LOG) != 0;
  SCOPED_TRACE(what + ", " + describe(layout) + ", " + softmax_test::dtype_name(x_full.dtype) + " -> " +
               softmax_test::dtype_name(y_dtype) + (log_softmax ? ", log" : "") + ", rows " + std::to_string(rows) +
               ", cols " + std::to_string(cols) + ", rank " + std::to_string(g_rank) + ", seed " +
               std::to_string(g_seed));
  const Buffer y_full = unsharded_rows(x_full, y_dtype, rows, cols, o);
  const int64_t first = layout.first_col(g_rank), width = layout.cols[size_t(g_rank)];
  const Buffer x = softmax_shard_test::slice(x_full, rows, cols, first, width);
  Buffer y(y_dtype, size_t(rows * width));
  y.poison();
  const softmax_status s = softmax_rows_mpi(width ? x.data() : nullptr, width ? y.data() : nullptr, rows, width,
                                            x_full.dtype, MPI_COMM_WORLD, &o);
  ASSERT_EQ(s, SOFTMAX_STATUS_SUCCESS) << softmax_mpi_last_error();
  EXPECT_STREQ(softmax_mpi_last_error(), "");
  EXPECT_TRUE(softmax_shard_test::forward_slice_ok(x_full, y_full, y, rows, cols, first, width, log_softmax));
}

void check_backward(softmax_dtype x_dtype, softmax_dtype y_dtype, int64_t rows, int64_t cols, const Layout& layout,
                    const softmax_options& o) {
  const bool log_softmax = (o.flags & SOFTMAX_FLAG_LOG) != 0;
  SCOPED_TRACE(describe(layout) + ", " + softmax_test::dtype_name(x_dtype) + " -> " +
               softmax_test::dtype_name(y_dtype) + (log_softmax ? ", log" : "") + ", rows " + std::to_string(rows) +
               ", cols " + std::to_string(cols) + ", rank " + std::to_string(g_rank) + ", seed " +
               std::to_string(g_seed));
  // y is a real forward output; dy is uniform in [-1, 1].
  const Buffer x_full = softmax_test::random_input(x_dtype, size_t(rows * cols), case_seed(), 4.0f);
  const Buffer y_full = unsharded_rows(x_full, y_dtype, rows, cols, o);
  const Buffer dy_full = softmax_test::random_input(y_dtype, size_t(rows * cols), case_seed(), 1.0f);
  Buffer dx_full(x_dtype, size_t(rows * cols));
  dx_full.poison();
  // EXPECT, not ASSERT: returning here would leave the other ranks in the collective below.
  EXPECT_EQ(softmax_rows_backward(y_full.data(), dy_full.data(), dx_full.data(), rows, cols, x_dtype, &o),
            SOFTMAX_STATUS_SUCCESS)
      << softmax_last_error();

  const int64_t first = layout.first_col(g_rank), width = layout.cols[size_t(g_rank)];
  const Buffer y = softmax_shard_test::slice(y_full, rows, cols, first, width);
  const Buffer dy = softmax_shard_test::slice(dy_full, rows, cols, first, width);
  Buffer dx(x_dtype, size_t(rows * width));
  dx.poison();
  const softmax_status s =
      softmax_rows_backward_mpi(width ? y.data() : nullptr, width ? dy.data() : nullptr, width ? dx.data() : nullptr,
                                rows, width, x_dtype, MPI_COMM_WORLD, &o);
  ASSERT_EQ(s, SOFTMAX_STATUS_SUCCESS) << softmax_mpi_last_error();
  EXPECT_TRUE(
      softmax_shard_test::backward_slice_ok(y_full, dy_full, dx_full, dx, rows, cols, first, width, log_softmax));
}

constexpr softmax_dtype kDtypes[] = {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F16, SOFTMAX_DTYPE_BF16};
constexpr int64_t kRows = 16;  // two of each special row kind
constexpr int64_t kCols[] = {7, 300, 3000};

TEST(MpiRows, RandomRowsEveryLayoutDtypeAndLog) {
  for (int64_t cols : kCols)
    for (const Layout& layout : softmax_shard_test::layouts(g_ranks, cols))
      for (softmax_dtype t : kDtypes)
        for (bool log_softmax : {false, true}) {
          const Buffer x = softmax_test::random_input(t, size_t(kRows * cols), case_seed());
          check_forward(x, t, kRows, cols, layout, options_for(log_softmax), "random");
        }
}

TEST(MpiRows, SpecialRowsEveryLayoutDtypeAndLog) {
  for (int64_t cols : kCols)
    for (const Layout& layout : softmax_shard_test::layouts(g_ranks, cols))
      for (softmax_dtype t : kDtypes)
        for (bool log_softmax : {false, true}) {
          const Buffer x = softmax_shard_test::special_input(t, kRows, cols, case_seed());
          check_forward(x, t, kRows, cols, layout, options_for(log_softmax), "special rows");
        }
}

TEST(MpiRows, MixedStorageYInAnotherType) {
  const int64_t cols = 300;
  for (const Layout& layout : softmax_shard_test::layouts(g_ranks, cols))
    for (bool log_softmax : {false, true}) {
      const Buffer x = softmax_shard_test::special_input(SOFTMAX_DTYPE_BF16, kRows, cols, case_seed());
      check_forward(x, SOFTMAX_DTYPE_F32, kRows, cols, layout,
                    with_y_dtype(options_for(log_softmax), SOFTMAX_DTYPE_F32), "bf16 x, f32 y");
    }
}

TEST(MpiRowsBackward, EveryLayoutDtypeAndLog) {
  for (int64_t cols : kCols)
    for (const Layout& layout : softmax_shard_test::layouts(g_ranks, cols))
      for (softmax_dtype t : kDtypes)
        for (bool log_softmax : {false, true}) check_backward(t, t, kRows, cols, layout, options_for(log_softmax));
}

TEST(MpiRowsBackward, MixedStorageYInAnotherType) {
  for (const Layout& layout : softmax_shard_test::layouts(g_ranks, 300))
    for (bool log_softmax : {false, true})
      check_backward(SOFTMAX_DTYPE_BF16, SOFTMAX_DTYPE_F32, kRows, 300, layout,
                     with_y_dtype(options_for(log_softmax), SOFTMAX_DTYPE_F32));
}

// --- failures: every rank returns a status, nobody waits forever, nothing is written ----------

struct FailureCase {
  Buffer x, y, y_before;
  int64_t width;
};

FailureCase failure_case(int64_t rows, int64_t width) {
  FailureCase f{softmax_test::random_input(SOFTMAX_DTYPE_F32, size_t(rows * width), case_seed()),
                Buffer(SOFTMAX_DTYPE_F32, size_t(rows * width)), Buffer(SOFTMAX_DTYPE_F32, 0), width};
  f.y.poison();
  f.y_before = f.y;
  return f;
}

void expect_other_rank_failed(softmax_status s, softmax_status expected) {
  EXPECT_EQ(s, expected);
  EXPECT_NE(std::string(softmax_mpi_last_error()).find("another rank"), std::string::npos) << softmax_mpi_last_error();
}

TEST(MpiRowsErrors, OneRankWithANullInputFailsEveryRank) {
  const int64_t rows = 5;
  FailureCase f = failure_case(rows, 6);
  const softmax_options o = options_for(false);
  const int bad = g_ranks - 1;
  const softmax_status s = softmax_rows_mpi(g_rank == bad ? nullptr : f.x.data(), f.y.data(), rows, f.width,
                                            SOFTMAX_DTYPE_F32, MPI_COMM_WORLD, &o);
  if (g_rank == bad) {
    EXPECT_EQ(s, SOFTMAX_STATUS_NULL_POINTER);
    EXPECT_NE(std::string(softmax_mpi_last_error()).find("softmax_row_stats"), std::string::npos)
        << softmax_mpi_last_error();
  } else {
    expect_other_rank_failed(s, SOFTMAX_STATUS_NULL_POINTER);
  }
  EXPECT_TRUE(f.y.bytes == f.y_before.bytes) << "y was written by a failed call";
}

TEST(MpiRowsErrors, OneRankWithANullOutputFailsEveryRankBeforeAnyWrite) {
  const int64_t rows = 5;
  FailureCase f = failure_case(rows, 6);
  const softmax_options o = options_for(true);
  const softmax_status s = softmax_rows_mpi(f.x.data(), g_rank == 0 ? nullptr : f.y.data(), rows, f.width,
                                            SOFTMAX_DTYPE_F32, MPI_COMM_WORLD, &o);
  if (g_rank == 0) {
    EXPECT_EQ(s, SOFTMAX_STATUS_NULL_POINTER);
    EXPECT_NE(std::string(softmax_mpi_last_error()).find("y is NULL"), std::string::npos) << softmax_mpi_last_error();
  } else {
    expect_other_rank_failed(s, SOFTMAX_STATUS_NULL_POINTER);
  }
  EXPECT_TRUE(f.y.bytes == f.y_before.bytes) << "y was written by a failed call";
}

TEST(MpiRowsErrors, AnOverlappingOutputFailsOnlyItsRankAfterTheAllReduce) {
  // Only softmax_rows_from_stats reads y, after the all-reduce: rank 0's partial overlap of y
  // with x is its own failure (nothing written), the other ranks finish normally.
  const int64_t rows = 3, width = 5;
  Buffer xy = softmax_test::random_input(SOFTMAX_DTYPE_F32, size_t(rows * width + 1), case_seed());
  const Buffer xy_before = xy;
  FailureCase f = failure_case(rows, width);
  const softmax_options o = options_for(false);
  float* x = static_cast<float*>(xy.data());
  const softmax_status s = g_rank == 0 ? softmax_rows_mpi(x, x + 1, rows, width, SOFTMAX_DTYPE_F32, MPI_COMM_WORLD, &o)
                                       : softmax_rows_mpi(f.x.data(), f.y.data(), rows, width, SOFTMAX_DTYPE_F32,
                                                          MPI_COMM_WORLD, &o);
  if (g_rank == 0) {
    EXPECT_EQ(s, SOFTMAX_STATUS_OVERLAPPING_BUFFERS) << softmax_mpi_last_error();
    EXPECT_NE(std::string(softmax_mpi_last_error()).find("softmax_rows_from_stats"), std::string::npos)
        << softmax_mpi_last_error();
    EXPECT_TRUE(xy.bytes == xy_before.bytes) << "a failed call wrote its buffers";
  } else {
    EXPECT_EQ(s, SOFTMAX_STATUS_SUCCESS) << softmax_mpi_last_error();
    EXPECT_FALSE(f.y.bytes == f.y_before.bytes) << "a successful call wrote nothing";
  }
}

TEST(MpiRowsErrors, DifferentFailuresReportTheHighestStatusElsewhere) {
  // Rank 0: negative local_cols (INVALID_SIZE = 2); last rank: a NULL input (NULL_POINTER = 1).
  const int64_t rows = 3;
  FailureCase f = failure_case(rows, 4);
  const softmax_options o = options_for(false);
  const bool last = g_rank == g_ranks - 1;
  const softmax_status s = softmax_rows_mpi(last ? nullptr : f.x.data(), f.y.data(), rows,
                                            g_rank == 0 ? -1 : f.width, SOFTMAX_DTYPE_F32, MPI_COMM_WORLD, &o);
  if (g_rank == 0) {
    EXPECT_EQ(s, SOFTMAX_STATUS_INVALID_SIZE) << softmax_mpi_last_error();
  } else if (last) {
    EXPECT_EQ(s, SOFTMAX_STATUS_NULL_POINTER) << softmax_mpi_last_error();
  } else {
    expect_other_rank_failed(s, SOFTMAX_STATUS_INVALID_SIZE);
  }
  EXPECT_TRUE(f.y.bytes == f.y_before.bytes);
}

TEST(MpiRowsErrors, SameBadArgumentsFailEveryRankWithItsOwnMessage) {
  const int64_t rows = 3;
  FailureCase f = failure_case(rows, 4);
  const softmax_options o = options_for(false);
  // f64 rows cannot be sharded with float statistics.
  EXPECT_EQ(softmax_rows_mpi(f.x.data(), f.y.data(), rows, 2, SOFTMAX_DTYPE_F64, MPI_COMM_WORLD, &o),
            SOFTMAX_STATUS_INVALID_DTYPE);
  EXPECT_NE(std::string(softmax_mpi_last_error()).find("softmax_row_stats"), std::string::npos)
      << softmax_mpi_last_error();
  softmax_options bad_flags = o;
  bad_flags.flags = 0x80000000u;
  EXPECT_EQ(softmax_rows_backward_mpi(f.x.data(), f.x.data(), f.y.data(), rows, f.width, SOFTMAX_DTYPE_F32,
                                      MPI_COMM_WORLD, &bad_flags),
            SOFTMAX_STATUS_INVALID_OPTIONS);
  EXPECT_NE(std::string(softmax_mpi_last_error()).find("softmax_backward_row_stats"), std::string::npos)
      << softmax_mpi_last_error();
  EXPECT_TRUE(f.y.bytes == f.y_before.bytes);
}

TEST(MpiRowsErrors, ChecksBeforeCommunicating) {
  FailureCase f = failure_case(2, 3);
  const softmax_options o = options_for(false);
  EXPECT_EQ(softmax_rows_mpi(f.x.data(), f.y.data(), -1, f.width, SOFTMAX_DTYPE_F32, MPI_COMM_WORLD, &o),
            SOFTMAX_STATUS_INVALID_SIZE);
  EXPECT_NE(std::string(softmax_mpi_last_error()).find("rows must be >= 0"), std::string::npos);
  // Refused before any allocation: one all-reduce carries at most INT_MAX elements.
  EXPECT_EQ(softmax_rows_mpi(f.x.data(), f.y.data(), int64_t{INT_MAX}, 0, SOFTMAX_DTYPE_F32, MPI_COMM_WORLD, &o),
            SOFTMAX_STATUS_SIZE_OVERFLOW);
  EXPECT_EQ(softmax_rows_backward_mpi(f.x.data(), f.x.data(), f.y.data(), int64_t{INT_MAX} - 5, 0,
                                      SOFTMAX_DTYPE_F32, MPI_COMM_WORLD, &o),
            SOFTMAX_STATUS_SIZE_OVERFLOW);
  EXPECT_EQ(softmax_rows_mpi(f.x.data(), f.y.data(), 2, f.width, SOFTMAX_DTYPE_F32, MPI_COMM_NULL, &o),
            SOFTMAX_STATUS_NULL_POINTER);
  EXPECT_NE(std::string(softmax_mpi_last_error()).find("MPI_COMM_NULL"), std::string::npos);
  EXPECT_TRUE(f.y.bytes == f.y_before.bytes);
}

TEST(MpiRowsBackwardErrors, OneRankWithANullGradientFailsEveryRank) {
  const int64_t rows = 4;
  FailureCase f = failure_case(rows, 5);
  const Buffer dy = softmax_test::random_input(SOFTMAX_DTYPE_F32, f.x.size(), case_seed(), 1.0f);
  const softmax_options o = options_for(false);
  const softmax_status s = softmax_rows_backward_mpi(f.x.data(), g_rank == 0 ? nullptr : dy.data(), f.y.data(), rows,
                                                     f.width, SOFTMAX_DTYPE_F32, MPI_COMM_WORLD, &o);
  if (g_rank == 0) {
    EXPECT_EQ(s, SOFTMAX_STATUS_NULL_POINTER);
  } else {
    expect_other_rank_failed(s, SOFTMAX_STATUS_NULL_POINTER);
  }
  EXPECT_TRUE(f.y.bytes == f.y_before.bytes) << "dx was written by a failed call";
  // The communicator is fine afterwards: the next call works on every rank.
  const softmax_status again = softmax_rows_backward_mpi(f.x.data(), dy.data(), f.y.data(), rows, f.width,
                                                         SOFTMAX_DTYPE_F32, MPI_COMM_WORLD, &o);
  EXPECT_EQ(again, SOFTMAX_STATUS_SUCCESS) << softmax_mpi_last_error();
  EXPECT_STREQ(softmax_mpi_last_error(), "");
}

TEST(MpiRowsEmpty, NoRowsIsASuccessThatTouchesNothing) {
  const softmax_options o = options_for(false);
  EXPECT_EQ(softmax_rows_mpi(nullptr, nullptr, 0, 5, SOFTMAX_DTYPE_F16, MPI_COMM_WORLD, &o), SOFTMAX_STATUS_SUCCESS);
  EXPECT_EQ(softmax_rows_backward_mpi(nullptr, nullptr, nullptr, 0, 5, SOFTMAX_DTYPE_F16, MPI_COMM_WORLD, &o),
            SOFTMAX_STATUS_SUCCESS);
  EXPECT_STREQ(softmax_mpi_last_error(), "");
}

// --- device buffers: statistics staged through the host --------------------------------------

#if defined(SOFTMAX_TEST_WITH_CUDA)
struct DeviceCopy {
  void* p = nullptr;
  explicit DeviceCopy(const Buffer& b) {
    if (cudaMalloc(&p, b.bytes.size() + 1) == cudaSuccess) cudaMemcpy(p, b.data(), b.bytes.size(), cudaMemcpyHostToDevice);
  }
  ~DeviceCopy() { cudaFree(p); }
  void to_host(Buffer* b) const { cudaMemcpy(b->data(), p, b->bytes.size(), cudaMemcpyDeviceToHost); }
};
#endif

TEST(MpiRowsDevice, DeviceBuffersOnTheCudaBackend) {
#if !defined(SOFTMAX_TEST_WITH_CUDA)
  GTEST_SKIP() << "built without CUDA: the device-memory path is not compiled";
#else
  // The same answer on every rank (one machine), so every rank skips or none does.
  if (!softmax_backend_available(SOFTMAX_BACKEND_CUDA)) GTEST_SKIP() << "no usable CUDA device on this machine";
  const int64_t rows = kRows, cols = 3000;
  for (const Layout& layout : softmax_shard_test::layouts(g_ranks, cols))
    for (softmax_dtype t : kDtypes)
      for (bool log_softmax : {false, true}) {
        SCOPED_TRACE(describe(layout) + ", " + softmax_test::dtype_name(t) + (log_softmax ? ", log" : "") +
                     ", rank " + std::to_string(g_rank) + ", seed " + std::to_string(g_seed));
        const Buffer x_full = softmax_shard_test::special_input(t, rows, cols, case_seed());
        const Buffer y_full = unsharded_rows(x_full, t, rows, cols, options_for(log_softmax));
        const int64_t first = layout.first_col(g_rank), width = layout.cols[size_t(g_rank)];
        const Buffer x = softmax_shard_test::slice(x_full, rows, cols, first, width);
        Buffer y(t, size_t(rows * width));
        y.poison();
        DeviceCopy dx(x), dy(y);
        const softmax_options o = options_for(log_softmax, SOFTMAX_BACKEND_AUTO);
        EXPECT_EQ(softmax_rows_mpi(dx.p, dy.p, rows, width, t, MPI_COMM_WORLD, &o), SOFTMAX_STATUS_SUCCESS)
            << softmax_mpi_last_error();
        EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        dy.to_host(&y);
        EXPECT_TRUE(softmax_shard_test::forward_slice_ok(x_full, y_full, y, rows, cols, first, width, log_softmax));
      }
#endif
}

// Rank 0 prints GoogleTest's progress; the other ranks print only their failures, with their rank.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: %s\n", g_rank, r.file_name() ? r.file_name() : "?", r.line_number(),
                 r.message());
  }
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_ranks);
  ::testing::InitGoogleTest(&argc, argv);
  if (g_rank != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter);
  }
  // Fresh inputs every run, the same on every rank; printed so that a failure can be replayed
  // (SOFTMAX_TEST_SEED=<seed>).
  if (g_rank == 0) {
    const char* forced = std::getenv("SOFTMAX_TEST_SEED");
    g_seed = forced != nullptr ? std::strtoull(forced, nullptr, 10) : softmax_test::fresh_seed();
    std::printf("%d ranks, seed %llu\n", g_ranks, static_cast<unsigned long long>(g_seed));
  }
  MPI_Bcast(&g_seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);

  const int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed;
}
