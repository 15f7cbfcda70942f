// SPDX-License-Identifier: Apache-2.0
// Bitwise determinism of the CPU backend through the public API, on fresh random inputs, for all
// eight functions (and log-softmax where it applies):
//   - run to run: the same call twice gives the same bytes (outputs poisoned differently);
//   - in place: y == x, dx == dy give the same bytes as separate outputs;
//   - batch invariance: a row's result does not depend on how many other rows are in the call
//     (every contiguous slice of rows computed alone equals those rows of the whole call), for
//     row counts on both sides of the backend's rows-over-threads / split-row switch;
//   - thread count: num_threads 1, 2, 3, 4, 8 and 0 (OpenMP default) all give the same bytes.
// tests/cpu has narrower versions of the last two for softmax_rows; these add the other
// functions, slices, in-place and run-to-run.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "op_call.h"
#include "reference.h"

namespace {

using softmax_reliability::Op;
using softmax_reliability::OpCall;
using Arrays = std::vector<std::vector<unsigned char>>;

constexpr softmax_dtype kDtypes[] = {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F16, SOFTMAX_DTYPE_BF16, SOFTMAX_DTYPE_F64};

struct Shape {
  int64_t rows, cols;
};
// Short rows, medium rows, and few long rows (the split-row path with chunk partials).
const std::vector<Shape> kShapes = {{257, 31}, {40, 1000}, {6, 9000}, {3, 70001}, {1, 300007}};
// The same two paths, many short rows and a few long ones, at a fraction of the cost: for the
// functions added after softmax_rows and softmax_dropout (the sanitizer builds run this too).
const std::vector<Shape> kShortAndLong = {{257, 31}, {3, 20001}};

struct Variant {
  Op op;
  bool log;
};
const Variant kVariants[] = {{Op::Rows, false},         {Op::Rows, true},
                             {Op::Dropout, false},      {Op::RowsBackward, false},
                             {Op::RowsBackward, true},  {Op::DropoutBackward, false},
                             {Op::RowStats, false},     {Op::RowsFromStats, false},
                             {Op::RowsFromStats, true}, {Op::BackwardRowStats, false},
                             {Op::BackwardRowStats, true}, {Op::RowsBackwardFromStats, false},
                             {Op::RowsBackwardFromStats, true}};

bool supports(const Variant& v, softmax_dtype t) {
  return t != SOFTMAX_DTYPE_F64 || softmax_reliability::op_rule(v.op).f64_allowed;
}

const std::vector<Shape>& shapes_for(const Variant& v, softmax_dtype t) {
  const bool forward = v.op == Op::Rows || v.op == Op::Dropout;
  return forward && t != SOFTMAX_DTYPE_F64 ? kShapes : kShortAndLong;
}

// Runs `c` and returns its arrays after the call (the outputs poisoned with `poison_byte` first).
Arrays run(const OpCall& c, int threads, uint8_t poison_byte, bool in_place = false) {
  OpCall poisoned = c;
  for (int i = 0; i < c.rule().arrays; ++i) {
    if (c.is_output(i)) std::memset(poisoned.arrays[i].data(), poison_byte, poisoned.arrays[i].size());
  }
  Arrays out;
  EXPECT_EQ(poisoned.run(&out, threads, in_place), SOFTMAX_STATUS_SUCCESS) << c.describe() << ": " << softmax_last_error();
  return out;
}

// The bytes of row r of array i.
size_t row_bytes(const OpCall& c, int i) { return c.arrays[i].size() / static_cast<size_t>(c.rows); }

// Rows [a, b) of `c`, as a call of their own.
OpCall slice(const OpCall& c, int64_t a, int64_t b) {
  OpCall s = c;
  s.rows = b - a;
  for (int i = 0; i < c.rule().arrays; ++i) {
    const size_t rb = row_bytes(c, i);
    s.arrays[i].assign(c.arrays[i].begin() + a * rb, c.arrays[i].begin() + b * rb);
  }
  return s;
}

std::string what(const OpCall& c, uint64_t seed) { return c.describe() + ", input seed " + std::to_string(seed); }

// The outputs of two runs are identical.
void expect_same_outputs(const OpCall& c, const Arrays& x, const Arrays& y, const std::string& how, uint64_t seed) {
  for (int i = 0; i < c.rule().arrays; ++i) {
    if (c.is_output(i)) {
      ASSERT_TRUE(x[i] == y[i]) << how << ": " << c.rule().array[i].name << " differs, " << what(c, seed);
    }
  }
}

TEST(Determinism, SameCallSameBitsRunToRunAndInPlace) {
  for (const softmax_dtype dtype : kDtypes) {
    for (const Variant& v : kVariants) {
      if (!supports(v, dtype)) continue;
      for (const Shape s : shapes_for(v, dtype)) {
        const uint64_t seed = softmax_test::fresh_seed();
        const OpCall c = softmax_reliability::make_op_call(v.op, v.log, dtype, dtype, s.rows, s.cols, seed);
        const Arrays a = run(c, 0, 0x11);
        const Arrays b = run(c, 0, 0xEE);
        expect_same_outputs(c, a, b, "run to run", seed);
        if (c.in_place_output() >= 0) {
          const Arrays in_place = run(c, 0, 0x5A, /*in_place=*/true);
          expect_same_outputs(c, a, in_place, "in place vs separate output", seed);
        }
      }
    }
  }
}

TEST(Determinism, RowResultDoesNotDependOnOtherRowsInTheCall) {
  std::mt19937_64 pick(softmax_test::fresh_seed());
  for (const softmax_dtype dtype : kDtypes) {
    for (const Variant& v : kVariants) {
      // The dropout backward's keep mask follows the flat index, which moves with the slice,
      // and every element of a row depends on the whole row's mask: no slice can match.
      if (!supports(v, dtype) || v.op == Op::DropoutBackward) continue;
      const bool forward = v.op == Op::Rows || v.op == Op::Dropout;
      const std::vector<Shape> shapes = forward && dtype != SOFTMAX_DTYPE_F64
                                            ? std::vector<Shape>{{300, 17}, {64, 2049}, {12, 40000}, {5, 70001}}
                                            : std::vector<Shape>{{300, 17}, {5, 20001}};
      for (const Shape s : shapes) {
        const uint64_t seed = softmax_test::fresh_seed();
        const OpCall c = softmax_reliability::make_op_call(v.op, v.log, dtype, dtype, s.rows, s.cols, seed);
        const Arrays whole = run(c, 0, 0x11);
        // Single rows at both ends and a few random slices, including a one-row-short batch.
        std::vector<std::pair<int64_t, int64_t>> slices = {{0, 1}, {s.rows - 1, s.rows}, {0, s.rows - 1}};
        for (int k = 0; k < 3; ++k) {
          const int64_t a = int64_t(pick() % uint64_t(s.rows));
          const int64_t b = a + 1 + int64_t(pick() % uint64_t(s.rows - a));
          slices.emplace_back(a, b);
        }
        for (const auto& [a, b] : slices) {
          if (b <= a) continue;
          const OpCall part = slice(c, a, b);
          const Arrays got = run(part, 0, 0xEE);
          const std::string where = "rows [" + std::to_string(a) + ", " + std::to_string(b) + ") alone vs in the whole call: ";
          for (int i = 0; i < c.rule().arrays; ++i) {
            if (!c.is_output(i)) continue;
            const size_t rb = row_bytes(c, i);
            const unsigned char* want = whole[i].data() + size_t(a) * rb;
            if (v.op != Op::Dropout) {
              ASSERT_EQ(0, std::memcmp(got[i].data(), want, size_t(b - a) * rb))
                  << where << c.rule().array[i].name << ", " << what(c, seed);
              continue;
            }
            // Dropout's keep decision follows the flat index, which moves with the slice; the
            // value of an element kept in both calls must still be the same bits.
            if (i != 1) continue;
            const size_t es = softmax_test::element_size(dtype), n = size_t(b - a) * size_t(s.cols);
            const unsigned char* part_mask = got[2].data();
            const unsigned char* whole_mask = whole[2].data() + size_t(a) * size_t(s.cols);
            for (size_t e = 0; e < n; ++e) {
              if (part_mask[e] && whole_mask[e]) {
                ASSERT_EQ(0, std::memcmp(got[1].data() + e * es, want + e * es, es))
                    << where << "dropout value of element " << e << ", " << what(c, seed);
              }
            }
          }
        }
      }
    }
  }
}

TEST(Determinism, SameBitsForAnyThreadCount) {
  for (const softmax_dtype dtype : kDtypes) {
    for (const Variant& v : kVariants) {
      if (!supports(v, dtype)) continue;
      for (const Shape s : shapes_for(v, dtype)) {
        const uint64_t seed = softmax_test::fresh_seed();
        const OpCall c = softmax_reliability::make_op_call(v.op, v.log, dtype, dtype, s.rows, s.cols, seed);
        const Arrays one = run(c, 1, 0x11);
        for (const int threads : {2, 3, 4, 8, 0}) {
          const Arrays many = run(c, threads, 0xEE);
          expect_same_outputs(c, one, many, "num_threads " + std::to_string(threads) + " vs 1", seed);
        }
      }
    }
  }
}

// Mixed storage (y in another type than x) follows the same rules, for every pair of types.
TEST(Determinism, MixedStorageSameBitsForAnyThreadCountAndSlice) {
  for (const softmax_dtype xt : kDtypes) {
    for (const softmax_dtype yt : kDtypes) {
      if (xt == yt) continue;
      for (const Variant& v : kVariants) {
        if (!supports(v, xt) || !supports(v, yt)) continue;
        const uint64_t seed = softmax_test::fresh_seed();
        const OpCall c = softmax_reliability::make_op_call(v.op, v.log, xt, yt, 7, 5000, seed);
        const Arrays one = run(c, 1, 0x11);
        for (const int threads : {3, 0}) {
          expect_same_outputs(c, one, run(c, threads, 0xEE), "num_threads " + std::to_string(threads) + " vs 1", seed);
        }
        if (v.op == Op::Dropout || v.op == Op::DropoutBackward) continue;  // masks move with a slice
        const Arrays part = run(slice(c, 2, 5), 0, 0x77);
        for (int i = 0; i < c.rule().arrays; ++i) {
          if (!c.is_output(i)) continue;
          const size_t rb = row_bytes(c, i);
          ASSERT_EQ(0, std::memcmp(part[i].data(), one[i].data() + 2 * rb, 3 * rb))
              << "rows [2, 5) alone: " << c.rule().array[i].name << ", " << what(c, seed);
        }
      }
    }
  }
}

}  // namespace
