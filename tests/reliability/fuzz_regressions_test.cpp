// SPDX-License-Identifier: Apache-2.0
// The fuzzer's findings, each replayed with its exact arguments through the same invariant checks
// the fuzzer applies (checked_call.h), plus the argument classes the fuzzer explores, pinned as
// plain unit tests for all eight functions so that they also run in the gcc ASan/UBSan and TSan
// builds of sanitizers.sh. (The thread-count finding is tests/reliability/huge_num_threads_probe.c:
// it kills the process.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "checked_call.h"
#include "reference.h"

namespace {

using namespace softmax_reliability;

constexpr size_t kNull = SIZE_MAX;
constexpr Op kAllOps[] = {Op::Rows,     Op::Dropout,       Op::RowsBackward,     Op::DropoutBackward,
                          Op::RowStats, Op::RowsFromStats, Op::BackwardRowStats, Op::RowsBackwardFromStats};

const char* name(Op op) { return op_rule(op).function; }

// Bytes of array `i` of `op` for a [rows, cols] call with x and y element sizes xs and ys.
size_t array_bytes(Op op, int i, int64_t rows, int64_t cols, size_t xs, size_t ys) {
  const auto n = static_cast<size_t>(rows * cols);
  switch (op_rule(op).array[i].storage) {
    case Storage::X: return n * xs;
    case Storage::Y: return n * ys;
    case Storage::Mask: return n;
    case Storage::RowFloat: return static_cast<size_t>(rows) * sizeof(float);
  }
  return 0;
}

// A value written over one element of an input after it was filled.
struct Special {
  int array;   // parameter index
  size_t element;
  double value;
};

// One arena of `arena_size` random bytes holding the call's arrays at the given offsets
// (kNull = NULL). Before each run the inputs get plausible values for their role (when the
// shape and types are valid and the input lies inside the arena): x smooth in [-8, 8], the
// forward's y in [0, 1], dy in [-2, 2], a row_dot in [-1, 1], then `specials` on top; row_max
// and row_sumexp are x's statistics merged with those of a notional other shard, as a caller
// would merge them (see merged_stats).
struct ArenaCall {
  std::vector<unsigned char> arena;
  std::vector<unsigned char> options;  // 64 bytes, zero tail
  CheckedCall call;
  uint64_t fill_seed;
  std::vector<Special> specials;

  ArenaCall(Op op, int64_t rows, int64_t cols, int32_t dtype, std::initializer_list<size_t> offsets,
            size_t arena_size, uint64_t seed = softmax_test::fresh_seed())
      : arena(arena_size), options(64, 0), fill_seed(seed) {
    std::mt19937_64 rng(seed);
    for (auto& b : arena) b = static_cast<unsigned char>(rng());
    call.args.op = op;
    call.args.rows = rows;
    call.args.cols = cols;
    call.args.dtype = dtype;
    int i = 0;
    for (const size_t off : offsets) call.args.array[i++] = off == kNull ? nullptr : arena.data() + off;
    call.args.cuda_available = softmax_backend_available(SOFTMAX_BACKEND_CUDA) != 0;
    call.seed = 42;
    call.offset = 0;
    call.arena = arena.data();
    call.arena_size = arena.size();
    call.options_size = options.size();
  }

  // Options with the backend and y_dtype stored as the raw integers a C caller may write.
  ArenaCall& with_options(size_t struct_size, int32_t backend, uint32_t flags, int32_t threads,
                          int32_t y_dtype = 0) {
    softmax_options o = softmax_default_options();
    o.struct_size = struct_size;
    o.flags = flags;
    o.num_threads = threads;
    std::memcpy(options.data(), &o, sizeof o);
    std::memcpy(options.data() + offsetof(softmax_options, backend), &backend, sizeof backend);
    std::memcpy(options.data() + offsetof(softmax_options, y_dtype), &y_dtype, sizeof y_dtype);
    call.args.options = options.data();
    return *this;
  }

  // The statistics of row r of x merged with an other shard's: (0.5, 3) for even rows, an all
  // -inf shard (-inf, 0) for odd ones, so that an all -inf row of x stays all -inf after the
  // merge. The header's rules: all -inf gives (-inf, 0), NaN or +inf a NaN sum.
  static std::pair<float, float> merged_stats(const softmax_test::Buffer& x, size_t r, size_t cols) {
    double m = -INFINITY, s = 0;
    bool nan = false;
    for (size_t c = 0; c < cols; ++c) {
      const double v = x.get(r * cols + c);
      nan |= std::isnan(v);
      if (v > m) m = v;
    }
    if (nan || m == INFINITY) {
      s = NAN;
    } else if (m != -INFINITY) {
      for (size_t c = 0; c < cols; ++c) s += std::exp(x.get(r * cols + c) - m);
    }
    const double other_m = r % 2 == 0 ? 0.5 : -INFINITY, other_s = r % 2 == 0 ? 3.0 : 0.0;
    const double merged_m = std::max(m, other_m);
    double merged_s = 0;
    if (s != 0) merged_s += s * std::exp(m - merged_m);  // NaN stays NaN
    if (other_s != 0) merged_s += other_s * std::exp(other_m - merged_m);
    return {static_cast<float>(merged_m), static_cast<float>(merged_s)};
  }

  void fill_inputs() {
    const Verdict v = judge(call.args);
    const CallArgs& a = call.args;
    if ((v.allowed & (1u << SOFTMAX_STATUS_INVALID_SIZE)) || v.empty || oracle_element_size(v.x_type) == 0 ||
        oracle_element_size(v.y_type) == 0) {
      return;
    }
    // A shape too large for the arena is only ever passed to be refused: nothing to fill.
    if (static_cast<unsigned __int128>(a.rows) * static_cast<unsigned __int128>(a.cols) > arena.size() ||
        static_cast<uint64_t>(a.rows) > arena.size()) {
      return;
    }
    const OpRule& rule = op_rule(a.op);
    const auto rows = static_cast<size_t>(a.rows), cols = static_cast<size_t>(a.cols);
    std::mt19937_64 rng(fill_seed ^ 0x5eed);
    softmax_test::Buffer x_values(static_cast<softmax_dtype>(v.x_type), 0);
    // Matrices first (x before the statistics that describe it), row statistics after.
    for (const bool matrices : {true, false}) {
      for (int i = 0; i < rule.arrays; ++i) {
        const ArrayRule& ar = rule.array[i];
        if (ar.output || a.array[i] == nullptr || ar.storage == Storage::Mask) continue;
        if ((ar.storage == Storage::RowFloat) == matrices) continue;
        auto* p = static_cast<unsigned char*>(const_cast<void*>(a.array[i]));
        if (v.bytes[i] == 0 || static_cast<size_t>(p - arena.data()) + v.bytes[i] > arena.size()) continue;
        if (ar.storage == Storage::RowFloat) {
          for (size_t r = 0; r < rows; ++r) {
            float f = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);  // row_dot
            if (std::strcmp(ar.name, "row_dot") != 0 && x_values.size() == rows * cols) {  // x not NULL
              const auto [m, sum] = merged_stats(x_values, r, cols);
              f = std::strcmp(ar.name, "row_max") == 0 ? m : sum;
            }
            std::memcpy(p + 4 * r, &f, 4);
          }
          continue;
        }
        const bool is_x = ar.storage == Storage::X, is_dy = std::strcmp(ar.name, "dy") == 0;
        softmax_test::Buffer b(static_cast<softmax_dtype>(is_x ? v.x_type : v.y_type), rows * cols);
        std::uniform_real_distribution<float> dist(is_x ? -8.0f : is_dy ? -2.0f : 0.0f,
                                                   is_x ? 8.0f : is_dy ? 2.0f : 1.0f);
        for (size_t k = 0; k < rows * cols; ++k) b.set(k, dist(rng));
        for (const Special& sp : specials) {
          if (sp.array == i && sp.element < rows * cols) b.set(sp.element, sp.value);
        }
        std::memcpy(p, b.data(), v.bytes[i]);
        if (is_x) x_values = b;
      }
    }
  }

  std::string run() {
    fill_inputs();
    return run_checked(call);
  }
};

// The arrays of `op` one after the other with `gap` bytes between them, from `start`:
// the offsets and the arena size that holds them (plus a tail of canaries).
struct Layout {
  std::vector<size_t> offsets;
  size_t arena_size;
};

// Row statistics (float*) start 4-aligned: a C caller cannot form a misaligned float*.
Layout disjoint(Op op, int64_t rows, int64_t cols, size_t xs, size_t ys, size_t start = 0, size_t gap = 24) {
  Layout l{{}, start};
  for (int i = 0; i < op_rule(op).arrays; ++i) {
    if (op_rule(op).array[i].storage == Storage::RowFloat) l.arena_size = (l.arena_size + 3) & ~size_t{3};
    l.offsets.push_back(l.arena_size);
    l.arena_size += array_bytes(op, i, rows, cols, xs, ys) + gap;
  }
  l.arena_size += 16;
  return l;
}

ArenaCall make(Op op, int64_t rows, int64_t cols, int32_t dtype, const Layout& l) {
  const std::vector<size_t>& o = l.offsets;
  const size_t at[4] = {o.size() > 0 ? o[0] : kNull, o.size() > 1 ? o[1] : kNull, o.size() > 2 ? o[2] : kNull,
                        o.size() > 3 ? o[3] : kNull};
  return ArenaCall(op, rows, cols, dtype, {at[0], at[1], at[2], at[3]}, l.arena_size);
}

// Found by the fuzzer (fuzz/crashes/ubsan-enum-dtype-out-of-range):
//   softmax_dropout(x=arena+0, y=arena+4, keep_mask=NULL, rows=1, cols=1, dtype=-2135544099,
//                   p=0, seed=0, offset=0, options=NULL)
// made UBSan's enum check fire in src/softmax_api.cpp: the C++ side loads an out-of-range
// softmax_dtype, which a C caller may legally pass. The call must be refused with INVALID_DTYPE;
// in the ASan/UBSan build this test also fails while the library loads the value as its enum type.
TEST(FuzzRegression, ExactFuzzerCaseOutOfRangeDtype) {
  ArenaCall c(Op::Dropout, 1, 1, -2135544099, {0, 4, kNull}, 8);
  c.call.args.p = 0.0f;
  c.call.seed = 0;
  c.call.offset = 0;
  EXPECT_EQ(c.run(), "");
}

TEST(FuzzRegression, OutOfRangeDtypeFromCCaller) {
  for (const int32_t dtype : {6, 4, -1, std::numeric_limits<int32_t>::min(), 0x7fffffff}) {
    for (const Op op : kAllOps) {
      ArenaCall c = make(op, 2, 5, dtype, disjoint(op, 2, 5, 8, 8));
      c.call.args.p = 0.25f;
      EXPECT_EQ(c.run(), "") << name(op) << " dtype " << dtype;
      // The same as y_dtype, behind its flag, with a valid dtype.
      ArenaCall y = make(op, 2, 5, SOFTMAX_DTYPE_F32, disjoint(op, 2, 5, 8, 8));
      y.with_options(sizeof(softmax_options), SOFTMAX_BACKEND_CPU, SOFTMAX_FLAG_Y_DTYPE, 0, dtype);
      y.call.args.p = 0.25f;
      EXPECT_EQ(y.run(), "") << name(op) << " y_dtype " << dtype;
    }
  }
}

// Same class: options->backend holding an integer outside the enum.
TEST(FuzzRegression, OutOfRangeBackendFromCCaller) {
  for (const int32_t backend : {3, 7, -1, 1 << 20}) {
    for (const Op op : kAllOps) {
      ArenaCall c = make(op, 3, 4, SOFTMAX_DTYPE_F32, disjoint(op, 3, 4, 4, 4));
      c.with_options(sizeof(softmax_options), backend, 0, 0);
      EXPECT_EQ(c.run(), "") << name(op) << " backend " << backend;
    }
  }
}

// The same class for the two functions that take an enum and return no status.
TEST(FuzzRegression, OutOfRangeStatusAndBackendFromCCaller) {
  for (const int32_t v : {-1, 15, 16, 99, std::numeric_limits<int32_t>::min()}) {
    const char* s = fuzz_status_string(v);
    ASSERT_NE(s, nullptr);
    EXPECT_STREQ(s, "SOFTMAX_STATUS_UNKNOWN") << v;
  }
  for (const int32_t v : {-1, 3, 4, 99, std::numeric_limits<int32_t>::min()}) {
    EXPECT_EQ(fuzz_backend_available(v), 0) << v;
  }
}

TEST(CheckedCalls, MisalignedPointersAreServedAndNothingElseIsWritten) {
  for (const Op op : kAllOps) {
    for (const int32_t dtype : {0, 1, 2, 3}) {
      if (dtype == SOFTMAX_DTYPE_F64 && !op_rule(op).f64_allowed) continue;
      const size_t es = oracle_element_size(dtype);
      for (const size_t mis : {size_t{1}, size_t{2}, size_t{3}, size_t{5}}) {
        ArenaCall c = make(op, 7, 45, dtype, disjoint(op, 7, 45, es, es, mis, 16 + mis));
        c.call.args.p = 0.5f;
        EXPECT_EQ(c.run(), "") << name(op) << " dtype " << dtype << " misalignment " << mis;
        ArenaCall d = make(op, 3, 4099, dtype, disjoint(op, 3, 4099, es, es, mis, 3));
        d.call.args.p = 0.25f;
        EXPECT_EQ(d.run(), "") << name(op) << " 3x4099 dtype " << dtype << " misalignment " << mis;
      }
    }
  }
}

TEST(CheckedCalls, InPlaceAndOverlaps) {
  const int64_t rows = 4, cols = 300;
  const size_t bytes = rows * cols * 4;
  // Forward: x == y; y partially over x either way; adjacent.
  ArenaCall in_place(Op::Rows, rows, cols, 0, {8, 8}, bytes + 32);
  EXPECT_EQ(in_place.run(), "");
  for (const size_t shift : {size_t{1}, size_t{4}, bytes - 1}) {
    ArenaCall forward(Op::Rows, rows, cols, 0, {0, shift}, bytes + shift + 8);
    EXPECT_EQ(forward.run(), "") << "y = x + " << shift;
    ArenaCall backward(Op::Rows, rows, cols, 0, {shift, 0}, bytes + shift + 8);
    EXPECT_EQ(backward.run(), "") << "x = y + " << shift;
  }
  ArenaCall adjacent(Op::Rows, rows, cols, 0, {0, bytes}, 2 * bytes);
  EXPECT_EQ(adjacent.run(), "");
  // keep_mask on top of x, on top of y, and just touching y's last byte.
  for (const size_t mask_off : {size_t{0}, bytes + 100, 2 * bytes - 1, 2 * bytes}) {
    ArenaCall d(Op::Dropout, rows, cols, 0, {0, bytes, mask_off}, 2 * bytes + rows * cols + 8);
    d.call.args.p = 0.1f;
    EXPECT_EQ(d.run(), "") << "mask at " << mask_off;
  }
  // Backward: dx == dy is in place; dx == y (or x) is not; partial overlaps are not.
  const size_t s = rows * cols * 2;  // f16
  for (const Op op : {Op::RowsBackward, Op::DropoutBackward, Op::RowsBackwardFromStats}) {
    const size_t stats = 3 * s + 64;
    ArenaCall same(op, rows, cols, 1, {0, s + 8, s + 8, stats}, stats + 64);
    same.call.args.p = 0.3f;
    EXPECT_EQ(same.run(), "") << name(op) << " dx == dy";
    ArenaCall on_first(op, rows, cols, 1, {0, s + 8, 0, stats}, stats + 64);
    on_first.call.args.p = 0.3f;
    EXPECT_EQ(on_first.run(), "") << name(op) << " dx == its first input";
    for (const size_t shift : {size_t{2}, s - 2}) {
      ArenaCall partial(op, rows, cols, 1, {0, s + 8, s + 8 + shift, stats}, stats + 64);
      EXPECT_EQ(partial.run(), "") << name(op) << " dx = dy + " << shift;
    }
    // The inputs may share memory: y == dy (or x == dy) is a legal if odd call.
    ArenaCall inputs_shared(op, rows, cols, 1, {0, 0, s + 8, stats}, stats + 64);
    EXPECT_EQ(inputs_shared.run(), "") << name(op) << " inputs sharing memory";
  }
  // dx == dy with y in f16 and x in f32: different element sizes, refused.
  ArenaCall mixed(Op::RowsBackward, rows, cols, SOFTMAX_DTYPE_F32, {0, s + 8, s + 8}, 4 * s + 64);
  mixed.with_options(sizeof(softmax_options), SOFTMAX_BACKEND_CPU, SOFTMAX_FLAG_Y_DTYPE, 0, SOFTMAX_DTYPE_F16);
  EXPECT_EQ(mixed.run(), "");
  // Row statistics: on x, on each other, next to each other; from_stats' y over its statistics.
  const size_t xb = rows * cols * 4;
  for (const auto& [max_off, sum_off] : {std::pair<size_t, size_t>{xb, xb}, {xb, xb + 8}, {xb, xb + 16},
                                          {xb - 4, xb + 16}, {0, xb + 16}}) {
    ArenaCall st(Op::RowStats, rows, cols, 0, {0, max_off, sum_off}, xb + 64);
    EXPECT_EQ(st.run(), "") << "row_max at " << max_off << ", row_sumexp at " << sum_off;
  }
  for (const size_t stat_off : {xb, 2 * xb - 4, 2 * xb, size_t{0}}) {
    ArenaCall fs(Op::RowsFromStats, rows, cols, 0, {0, xb, stat_off, 2 * xb + 32}, 2 * xb + 64);
    EXPECT_EQ(fs.run(), "") << "row_max at " << stat_off;
    ArenaCall dot(Op::BackwardRowStats, rows, cols, 0, {0, xb, stat_off}, 2 * xb + 64);
    EXPECT_EQ(dot.run(), "") << "row_dot at " << stat_off;
  }
  ArenaCall from_stats_in_place(Op::RowsFromStats, rows, cols, 0, {0, 0, xb, xb + 16}, xb + 64);
  EXPECT_EQ(from_stats_in_place.run(), "");
}

TEST(CheckedCalls, NullsSizesAndOptionStructs) {
  for (const Op op : kAllOps) {
    const OpRule& rule = op_rule(op);
    // Each array NULL in turn: refused unless optional.
    for (int i = 0; i < rule.arrays; ++i) {
      Layout l = disjoint(op, 2, 3, 4, 4);
      l.offsets[i] = kNull;
      ArenaCall c = make(op, 2, 3, 0, l);
      c.call.args.p = 0.5f;
      EXPECT_EQ(c.run(), "") << name(op) << " " << rule.array[i].name << " NULL";
    }
    // Empty calls: success with every pointer NULL or real, whatever the other size; negative
    // sizes refused.
    for (const auto& [r, c] : {std::pair<int64_t, int64_t>{0, 3}, {3, 0}, {0, 0},
                               {0, std::numeric_limits<int64_t>::max()}, {std::numeric_limits<int64_t>::max(), 0},
                               {0, -1}, {-1, 0}, {-1, 3}, {3, -1}, {std::numeric_limits<int64_t>::min(), 3}}) {
      ArenaCall nulls(op, r, c, 0, {kNull, kNull, kNull, kNull}, 16);
      nulls.call.args.p = 0.5f;
      EXPECT_EQ(nulls.run(), "") << name(op) << " " << r << "x" << c << ", NULL pointers";
      ArenaCall real = make(op, r, c, 0, disjoint(op, 2, 3, 4, 4));
      real.call.args.p = 0.5f;
      EXPECT_EQ(real.run(), "") << name(op) << " " << r << "x" << c << ", real pointers";
    }
    // Shapes whose byte count overflows: refused before anything is touched.
    const int64_t big = std::numeric_limits<int64_t>::max();
    for (const auto& [r, c] : {std::pair<int64_t, int64_t>{big, big}, {big, 1}, {int64_t{1} << 62, 2},
                               {int64_t{1} << 31, int64_t{1} << 31}, {int64_t{1} << 61, 1}}) {
      ArenaCall o = make(op, r, c, 1, disjoint(op, 2, 3, 4, 4));
      o.call.args.p = 0.5f;
      EXPECT_EQ(o.run(), "") << name(op) << " " << r << "x" << c;
    }
  }
  // struct_size: too small, the first version's size, exact, newer with zero / non-zero tail.
  for (const size_t size : {size_t{0}, size_t{8}, kOptionsMinSize - 1, kOptionsMinSize, kOptionsWithYDtype - 1,
                            sizeof(softmax_options), size_t{48}, size_t{64}}) {
    for (const Op op : {Op::Rows, Op::RowStats}) {
      ArenaCall c = make(op, 2, 8, 0, disjoint(op, 2, 8, 4, 4));
      c.with_options(size, SOFTMAX_BACKEND_CPU, 0, 1);
      EXPECT_EQ(c.run(), "") << name(op) << " struct_size " << size;
      c.options[size > 40 ? 40 : 63] = 1;  // a newer caller's field set (only read when in range)
      EXPECT_EQ(c.run(), "") << name(op) << " struct_size " << size << " with a non-zero tail";
      c.options[size > 40 ? 40 : 63] = 0;
      c.with_options(size, SOFTMAX_BACKEND_CPU, SOFTMAX_FLAG_Y_DTYPE, 1, SOFTMAX_DTYPE_BF16);
      EXPECT_EQ(c.run(), "") << name(op) << " struct_size " << size << " with SOFTMAX_FLAG_Y_DTYPE";
    }
  }
  for (const uint32_t flags : {SOFTMAX_FLAG_LOG, SOFTMAX_FLAG_Y_DTYPE, SOFTMAX_FLAG_LOG | SOFTMAX_FLAG_Y_DTYPE, 4u,
                               0x80000000u}) {
    for (const Op op : kAllOps) {
      for (const int32_t y_dtype : {0, 1, 2, 3}) {
        ArenaCall c = make(op, 2, 8, 1, disjoint(op, 2, 8, 8, 8));
        c.with_options(sizeof(softmax_options), SOFTMAX_BACKEND_AUTO, flags, 0, y_dtype);
        c.call.args.p = 0.125f;
        EXPECT_EQ(c.run(), "") << name(op) << " flags " << flags << " y_dtype " << y_dtype;
      }
    }
  }
  for (const int32_t threads : {-1, std::numeric_limits<int32_t>::min(), 0, 1, 3, 64}) {
    ArenaCall c(Op::Rows, 70, 1000, 2, {0, 70 * 1000 * 2}, 70 * 1000 * 4);
    c.with_options(sizeof(softmax_options), SOFTMAX_BACKEND_CPU, 0, threads);
    EXPECT_EQ(c.run(), "") << "num_threads " << threads;
  }
  for (const Op op : kAllOps) {
    ArenaCall cuda = make(op, 2, 8, 0, disjoint(op, 2, 8, 4, 4));
    cuda.with_options(sizeof(softmax_options), SOFTMAX_BACKEND_CUDA, 0, 0);
    EXPECT_EQ(cuda.run(), "") << name(op) << ": host pointers to the CUDA backend";
  }
}

// Every function in every storage combination, log or not: the result checks of a valid call.
TEST(CheckedCalls, EveryFunctionInEveryStorageCombination) {
  for (const Op op : kAllOps) {
    for (const int32_t xt : {0, 1, 2, 3}) {
      for (const int32_t yt : {0, 1, 2, 3}) {
        for (const uint32_t log : {0u, SOFTMAX_FLAG_LOG}) {
          const OpRule& rule = op_rule(op);
          if (log && !rule.log_allowed) continue;
          if (!rule.f64_allowed && (xt == 3 || yt == 3)) continue;
          const int64_t rows = 5, cols = 67;
          ArenaCall c = make(op, rows, cols, xt, disjoint(op, rows, cols, oracle_element_size(xt), oracle_element_size(yt)));
          c.with_options(sizeof(softmax_options), SOFTMAX_BACKEND_CPU, SOFTMAX_FLAG_Y_DTYPE | log, 0, yt);
          c.call.args.p = 0.3f;
          EXPECT_EQ(c.run(), "") << name(op) << " x " << xt << " y " << yt << " flags " << log;
        }
      }
    }
  }
}

// Rows of special values through every function, in every input matrix: a NaN, a +inf, all -inf,
// some -inf, a huge value. The results must be exactly what float64 gives where it is exact (NaN
// rows, -inf statistics, zeros), and close elsewhere.
TEST(CheckedCalls, NonFiniteInputs) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const int64_t rows = 6, cols = 9;
  for (const Op op : kAllOps) {
    const OpRule& rule = op_rule(op);
    for (int target = 0; target < rule.arrays; ++target) {
      if (rule.array[target].output || rule.array[target].storage == Storage::RowFloat) continue;
      for (const int32_t dtype : {0, 1, 3}) {
        for (const uint32_t log : {0u, SOFTMAX_FLAG_LOG}) {
          if ((log && !rule.log_allowed) || (dtype == 3 && !rule.f64_allowed)) continue;
          const size_t es = oracle_element_size(dtype);
          ArenaCall c = make(op, rows, cols, dtype, disjoint(op, rows, cols, es, es));
          c.with_options(sizeof(softmax_options), SOFTMAX_BACKEND_CPU, log, 0);
          c.call.args.p = 0.2f;
          c.specials = {{target, 1 * cols + 4, nan}, {target, 2 * cols + 0, inf}, {target, 4 * cols + 2, -inf},
                        {target, 4 * cols + 7, -inf}, {target, 5 * cols + 3, dtype == 1 ? 6e4 : 3e38}};
          for (int64_t k = 0; k < cols; ++k) c.specials.push_back({target, size_t(3 * cols + k), -inf});
          EXPECT_EQ(c.run(), "") << name(op) << " specials in " << rule.array[target].name << ", dtype " << dtype
                                 << " flags " << log;
        }
      }
    }
  }
}

// Found by the fuzzer: softmax_dropout_backward(rows=2, cols=31, f16, p=1) with a NaN in x. At
// p = 1 nothing is kept and the library writes dx = 0 without a softmax, as the forward writes
// zeros for any x; the oracle wanted the NaN of s * (0 - sum(s * 0)). The header now states the
// rule, and non-finite x at p = 1 must still give +0 everywhere.
TEST(FuzzRegression, DropoutBackwardAtPOneIgnoresNonFiniteX) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (const int32_t dtype : {0, 1, 2, 3}) {
    const size_t es = oracle_element_size(dtype);
    ArenaCall c = make(Op::DropoutBackward, 3, 31, dtype, disjoint(Op::DropoutBackward, 3, 31, es, es));
    c.call.args.p = 1.0f;
    c.call.seed = 4995134463921048897ull;
    c.call.offset = 4995722685159505920ull;
    c.specials = {{0, 0, nan}, {0, 31 + 5, inf}, {0, 62 + 7, -inf}};
    EXPECT_EQ(c.run(), "") << "dtype " << dtype;
  }
}

TEST(CheckedCalls, DropoutProbabilities) {
  const float inf = std::numeric_limits<float>::infinity();
  const float ps[] = {0.0f, -0.0f, 1.0f, 0.5f, std::numeric_limits<float>::denorm_min(),
                      std::nextafter(1.0f, 0.0f), std::nextafter(1.0f, 2.0f), -1e-30f,
                      -std::numeric_limits<float>::denorm_min(), inf, -inf,
                      std::numeric_limits<float>::quiet_NaN(), 2.0f};
  for (const Op op : {Op::Dropout, Op::DropoutBackward}) {
    for (const int32_t dtype : {0, 1, 2, 3}) {
      const size_t es = oracle_element_size(dtype);
      for (const float p : ps) {
        ArenaCall d = make(op, 5, 77, dtype, disjoint(op, 5, 77, es, es));
        d.call.args.p = p;
        d.call.seed = 0x0123456789abcdefull;
        d.call.offset = 7;
        EXPECT_EQ(d.run(), "") << name(op) << " p " << p << " dtype " << dtype;
      }
    }
  }
}

}  // namespace
