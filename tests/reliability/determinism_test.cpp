// Bitwise determinism of the CPU backend through the public API, on fresh random inputs:
//   - run to run: the same call twice gives the same bytes (y poisoned differently each time);
//   - in place: y == x gives the same bytes as a separate y;
//   - batch invariance: a row's result does not depend on how many other rows are in the call
//     (every contiguous slice of rows computed alone equals those rows of the whole call), for
//     row counts on both sides of the backend's rows-over-threads / split-row switch;
//   - thread count: num_threads 1, 2, 3, 4, 8 and 0 (OpenMP default) all give the same bytes,
//     for softmax, log-softmax and dropout (y and keep_mask).
// tests/cpu has narrower versions of the last two for softmax_rows; these add dropout, slices,
// in-place and run-to-run.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "reference.h"

namespace {

using softmax_test::Buffer;

constexpr softmax_dtype kDtypes[] = {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F16, SOFTMAX_DTYPE_BF16};

struct Shape {
  int64_t rows, cols;
};
// Short rows, medium rows, and few long rows (the split-row path with chunk partials).
const Shape kShapes[] = {{257, 31}, {40, 1000}, {6, 9000}, {3, 70001}, {1, 300007}};

enum class Op { Softmax, Log, Dropout };
const char* op_name(Op op) { return op == Op::Softmax ? "softmax" : op == Op::Log ? "log" : "dropout"; }

struct Result {
  Buffer y;
  std::vector<uint8_t> mask;
};

// One call; y starts poisoned with `poison_byte` (a different pattern per run).
Result call(Op op, const Buffer& x, int64_t rows, int64_t cols, int threads, uint8_t poison_byte,
            float p = 0.3f, uint64_t seed = 1234, uint64_t offset = 0, bool in_place = false) {
  Result r{Buffer(x.dtype, size_t(rows * cols)), std::vector<uint8_t>(size_t(rows * cols), poison_byte)};
  if (in_place) {
    r.y.bytes = x.bytes;
  } else {
    std::memset(r.y.data(), poison_byte, r.y.bytes.size());
  }
  softmax_options o = softmax_default_options();
  o.backend = SOFTMAX_BACKEND_CPU;
  o.num_threads = threads;
  const void* xp = in_place ? r.y.data() : x.data();
  softmax_status s;
  if (op == Op::Dropout) {
    s = softmax_dropout(xp, r.y.data(), r.mask.data(), rows, cols, x.dtype, p, seed, offset, &o);
  } else {
    o.flags = op == Op::Log ? SOFTMAX_FLAG_LOG : 0u;
    s = softmax_rows(xp, r.y.data(), rows, cols, x.dtype, &o);
  }
  EXPECT_EQ(s, SOFTMAX_STATUS_SUCCESS) << softmax_last_error();
  return r;
}

std::string what(Op op, softmax_dtype dtype, Shape s, uint64_t seed) {
  return std::string(op_name(op)) + " " + softmax_test::dtype_name(dtype) + " " +
         std::to_string(s.rows) + "x" + std::to_string(s.cols) + " input seed " + std::to_string(seed);
}

TEST(Determinism, SameCallSameBitsRunToRunAndInPlace) {
  for (const softmax_dtype dtype : kDtypes) {
    for (const Shape s : kShapes) {
      const uint64_t seed = softmax_test::fresh_seed();
      const Buffer x = softmax_test::random_input(dtype, size_t(s.rows * s.cols), seed);
      for (const Op op : {Op::Softmax, Op::Log, Op::Dropout}) {
        const Result a = call(op, x, s.rows, s.cols, 0, 0x11);
        const Result b = call(op, x, s.rows, s.cols, 0, 0xEE);
        ASSERT_EQ(a.y.bytes, b.y.bytes) << "run to run: " << what(op, dtype, s, seed);
        if (op == Op::Dropout) ASSERT_EQ(a.mask, b.mask) << "run to run: " << what(op, dtype, s, seed);
        const Result c = call(op, x, s.rows, s.cols, 0, 0x5A, 0.3f, 1234, 0, /*in_place=*/true);
        ASSERT_EQ(a.y.bytes, c.y.bytes) << "in place vs separate y: " << what(op, dtype, s, seed);
      }
    }
  }
}

TEST(Determinism, RowResultDoesNotDependOnOtherRowsInTheCall) {
  std::mt19937_64 pick(softmax_test::fresh_seed());
  for (const softmax_dtype dtype : kDtypes) {
    for (const Shape s : {Shape{300, 17}, Shape{64, 2049}, Shape{12, 40000}, Shape{5, 70001}}) {
      const uint64_t seed = softmax_test::fresh_seed();
      const Buffer x = softmax_test::random_input(dtype, size_t(s.rows * s.cols), seed);
      const size_t es = softmax_test::element_size(dtype);
      const size_t row_bytes = size_t(s.cols) * es;
      for (const Op op : {Op::Softmax, Op::Log, Op::Dropout}) {
        const Result whole = call(op, x, s.rows, s.cols, 0, 0x11);
        // Single rows at both ends and a few random slices, including a one-row-short batch.
        std::vector<std::pair<int64_t, int64_t>> slices = {{0, 1}, {s.rows - 1, s.rows}, {0, s.rows - 1}};
        for (int k = 0; k < 3; ++k) {
          const int64_t a = int64_t(pick() % uint64_t(s.rows));
          const int64_t b = a + 1 + int64_t(pick() % uint64_t(s.rows - a));
          slices.emplace_back(a, b);
        }
        for (const auto& [a, b] : slices) {
          if (b <= a) continue;
          Buffer xs(dtype, size_t((b - a) * s.cols));
          std::memcpy(xs.data(), x.bytes.data() + size_t(a) * row_bytes, size_t(b - a) * row_bytes);
          const Result part = call(op, xs, b - a, s.cols, 0, 0xEE);
          const unsigned char* want = whole.y.bytes.data() + size_t(a) * row_bytes;
          if (op != Op::Dropout) {
            ASSERT_EQ(0, std::memcmp(part.y.data(), want, size_t(b - a) * row_bytes))
                << "rows [" << a << ", " << b << ") alone vs in the whole call: " << what(op, dtype, s, seed);
            continue;
          }
          // Dropout's keep decision follows the flat index, which moves with the slice; the value
          // of an element kept in both calls must still be the same bits.
          const size_t n = size_t(b - a) * size_t(s.cols);
          const uint8_t* want_mask = whole.mask.data() + size_t(a) * size_t(s.cols);
          for (size_t i = 0; i < n; ++i) {
            if (part.mask[i] && want_mask[i]) {
              ASSERT_EQ(0, std::memcmp(part.y.bytes.data() + i * es, want + i * es, es))
                  << "dropout value of element " << i << " of rows [" << a << ", " << b
                  << "): " << what(op, dtype, s, seed);
            }
          }
        }
      }
    }
  }
}

TEST(Determinism, SameBitsForAnyThreadCount) {
  for (const softmax_dtype dtype : kDtypes) {
    for (const Shape s : kShapes) {
      const uint64_t seed = softmax_test::fresh_seed();
      const Buffer x = softmax_test::random_input(dtype, size_t(s.rows * s.cols), seed);
      for (const Op op : {Op::Softmax, Op::Log, Op::Dropout}) {
        const Result one = call(op, x, s.rows, s.cols, 1, 0x11, 0.7f, seed, 5);
        for (const int threads : {2, 3, 4, 8, 0}) {
          const Result many = call(op, x, s.rows, s.cols, threads, 0xEE, 0.7f, seed, 5);
          ASSERT_EQ(one.y.bytes, many.y.bytes)
              << "num_threads " << threads << " vs 1: " << what(op, dtype, s, seed);
          if (op == Op::Dropout) {
            ASSERT_EQ(one.mask, many.mask) << "num_threads " << threads << ": " << what(op, dtype, s, seed);
          }
        }
      }
    }
  }
}

}  // namespace
