// The fuzzer's findings, each replayed with its exact arguments through the same invariant checks
// the fuzzer applies (checked_call.h), plus the argument classes the fuzzer explores, pinned as
// plain unit tests so that they also run in the gcc ASan/UBSan and TSan builds of sanitizers.sh.
// (The thread-count finding is tests/reliability/huge_num_threads_probe.c: it kills the process.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "checked_call.h"
#include "reference.h"

namespace {

using namespace softmax_reliability;

// One arena of `arena_size` random bytes holding x, y and the mask at the given offsets
// (SIZE_MAX = NULL); x's elements are filled with smooth random values when the shape is valid.
struct ArenaCall {
  std::vector<unsigned char> arena;
  std::vector<unsigned char> options;  // 64 bytes, zero tail
  CheckedCall call;

  ArenaCall(Op op, int64_t rows, int64_t cols, int32_t dtype, size_t x_off, size_t y_off,
            size_t mask_off, size_t arena_size, uint64_t seed = softmax_test::fresh_seed())
      : arena(arena_size), options(64, 0) {
    std::mt19937_64 rng(seed);
    for (auto& b : arena) b = static_cast<unsigned char>(rng());
    const size_t es = oracle_element_size(dtype);
    const bool fits = es != 0 && rows > 0 && cols > 0 && x_off != SIZE_MAX &&
                      static_cast<unsigned __int128>(rows) * static_cast<unsigned __int128>(cols) * es <=
                          arena_size - std::min(arena_size, x_off);
    if (fits) {
      std::uniform_real_distribution<float> dist(-8.0f, 8.0f);
      for (size_t i = 0; i < size_t(rows * cols); ++i) {
        const float v = dist(rng);
        if (dtype == SOFTMAX_DTYPE_F32) {
          std::memcpy(arena.data() + x_off + 4 * i, &v, 4);
        } else {
          const uint16_t h = dtype == SOFTMAX_DTYPE_F16 ? softmax_internal::float_to_f16(v)
                                                        : softmax_internal::float_to_bf16(v);
          std::memcpy(arena.data() + x_off + 2 * i, &h, 2);
        }
      }
    }
    auto at = [&](size_t off) -> unsigned char* { return off == SIZE_MAX ? nullptr : arena.data() + off; };
    call.args.op = op;
    call.args.rows = rows;
    call.args.cols = cols;
    call.args.dtype = dtype;
    call.args.x = at(x_off);
    call.args.y = at(y_off);
    call.args.mask = at(mask_off);
    call.args.cuda_available = softmax_backend_available(SOFTMAX_BACKEND_CUDA) != 0;
    call.seed = 42;
    call.offset = 0;
    call.arena = arena.data();
    call.arena_size = arena.size();
    call.options_size = options.size();
  }

  // Options with the backend stored as the raw integer a C caller may write.
  ArenaCall& with_options(size_t struct_size, int32_t backend, uint32_t flags, int32_t threads) {
    softmax_options o = softmax_default_options();
    o.struct_size = struct_size;
    o.flags = flags;
    o.num_threads = threads;
    std::memcpy(options.data(), &o, sizeof o);
    std::memcpy(options.data() + offsetof(softmax_options, backend), &backend, sizeof backend);
    call.args.options = options.data();
    return *this;
  }

  std::string run() { return run_checked(call); }
};

constexpr size_t kNull = SIZE_MAX;

// Found by the fuzzer (fuzz/crashes/ubsan-enum-dtype-out-of-range):
//   softmax_dropout(x=arena+0, y=arena+4, keep_mask=NULL, rows=1, cols=1, dtype=-2135544099,
//                   p=0, seed=0, offset=0, options=NULL)
// made UBSan's enum check fire in src/softmax_api.cpp: the C++ side loads an out-of-range
// softmax_dtype, which a C caller may legally pass. The call must be refused with INVALID_DTYPE;
// in the ASan/UBSan build this test also fails while the library loads the value as its enum type.
TEST(FuzzRegression, ExactFuzzerCaseOutOfRangeDtype) {
  ArenaCall c(Op::Dropout, 1, 1, -2135544099, 0, 4, kNull, 8);
  c.call.args.p = 0.0f;
  c.call.seed = 0;
  c.call.offset = 0;
  EXPECT_EQ(c.run(), "");
}

TEST(FuzzRegression, OutOfRangeDtypeFromCCaller) {
  for (const int32_t dtype : {6, 3, -1, std::numeric_limits<int32_t>::min(), 0x7fffffff}) {
    ArenaCall rows(Op::Rows, 2, 5, dtype, 0, 64, kNull, 192);
    EXPECT_EQ(rows.run(), "") << "dtype " << dtype;
    ArenaCall drop(Op::Dropout, 2, 5, dtype, 0, 64, 128, 192);
    drop.call.args.p = 0.25f;
    EXPECT_EQ(drop.run(), "") << "dtype " << dtype;
  }
}

// Same class: options->backend holding an integer outside the enum.
TEST(FuzzRegression, OutOfRangeBackendFromCCaller) {
  for (const int32_t backend : {3, 7, -1, 1 << 20}) {
    ArenaCall c(Op::Rows, 3, 4, SOFTMAX_DTYPE_F32, 0, 64, kNull, 160);
    c.with_options(sizeof(softmax_options), backend, 0, 0);
    EXPECT_EQ(c.run(), "") << "backend " << backend;
  }
}

// The same class for the two functions that take an enum and return no status.
TEST(FuzzRegression, OutOfRangeStatusAndBackendFromCCaller) {
  for (const int32_t v : {-1, 14, 15, 16, 99, std::numeric_limits<int32_t>::min()}) {
    const char* name = fuzz_status_string(v);
    ASSERT_NE(name, nullptr);
    EXPECT_STREQ(name, "SOFTMAX_STATUS_UNKNOWN") << v;
  }
  for (const int32_t v : {-1, 3, 4, 99, std::numeric_limits<int32_t>::min()}) {
    EXPECT_EQ(fuzz_backend_available(v), 0) << v;
  }
}

TEST(CheckedCalls, MisalignedPointersAreServedAndNothingElseIsWritten) {
  for (const int32_t dtype : {0, 1, 2}) {
    for (const size_t mis : {size_t{1}, size_t{2}, size_t{3}, size_t{5}}) {
      ArenaCall c(Op::Rows, 7, 45, dtype, mis, 7 * 45 * 4 + 2 * mis + 16, kNull, 2 * 7 * 45 * 4 + 64);
      EXPECT_EQ(c.run(), "") << "dtype " << dtype << " misalignment " << mis;
      ArenaCall d(Op::Dropout, 3, 4099, dtype, mis, 3 * 4099 * 4 + mis + 3, 2 * 3 * 4099 * 4 + 40,
                  2 * 3 * 4099 * 4 + 40 + 3 * 4099 + 9);
      d.call.args.p = 0.5f;
      EXPECT_EQ(d.run(), "") << "dropout dtype " << dtype << " misalignment " << mis;
    }
  }
}

TEST(CheckedCalls, InPlaceAndOverlaps) {
  const int64_t rows = 4, cols = 300;
  const size_t bytes = rows * cols * 4;
  ArenaCall in_place(Op::Rows, rows, cols, 0, 8, 8, kNull, bytes + 32);
  EXPECT_EQ(in_place.run(), "");
  for (const size_t shift : {size_t{1}, size_t{4}, bytes - 1}) {
    ArenaCall forward(Op::Rows, rows, cols, 0, 0, shift, kNull, bytes + shift + 8);
    EXPECT_EQ(forward.run(), "") << "y = x + " << shift;
    ArenaCall backward(Op::Rows, rows, cols, 0, shift, 0, kNull, bytes + shift + 8);
    EXPECT_EQ(backward.run(), "") << "x = y + " << shift;
  }
  ArenaCall adjacent(Op::Rows, rows, cols, 0, 0, bytes, kNull, 2 * bytes);
  EXPECT_EQ(adjacent.run(), "");
  // keep_mask on top of x, on top of y, and just touching y's last byte.
  for (const size_t mask_off : {size_t{0}, bytes + 100, 2 * bytes - 1, 2 * bytes}) {
    ArenaCall d(Op::Dropout, rows, cols, 0, 0, bytes, mask_off, 2 * bytes + rows * cols + 8);
    d.call.args.p = 0.1f;
    EXPECT_EQ(d.run(), "") << "mask at " << mask_off;
  }
}

TEST(CheckedCalls, NullsSizesAndOptionStructs) {
  EXPECT_EQ(ArenaCall(Op::Rows, 2, 3, 0, kNull, 64, kNull, 128).run(), "");
  EXPECT_EQ(ArenaCall(Op::Rows, 2, 3, 0, 0, kNull, kNull, 128).run(), "");
  EXPECT_EQ(ArenaCall(Op::Dropout, 2, 3, 1, 0, 64, kNull, 128).run(), "");  // no mask: fine
  for (const int64_t bad : {int64_t{0}, int64_t{-1}, std::numeric_limits<int64_t>::min()}) {
    EXPECT_EQ(ArenaCall(Op::Rows, bad, 3, 0, 0, 64, kNull, 128).run(), "") << bad;
    EXPECT_EQ(ArenaCall(Op::Rows, 3, bad, 0, 0, 64, kNull, 128).run(), "") << bad;
  }
  // Shapes whose byte count overflows: refused before anything is touched.
  const int64_t big = std::numeric_limits<int64_t>::max();
  for (const auto& [r, c] : {std::pair<int64_t, int64_t>{big, big}, {big, 1}, {int64_t{1} << 62, 2},
                             {int64_t{1} << 31, int64_t{1} << 31}}) {
    EXPECT_EQ(ArenaCall(Op::Rows, r, c, 0, 0, 64, kNull, 128).run(), "") << r << "x" << c;
    ArenaCall d(Op::Dropout, r, c, 1, 0, 64, 100, 128);
    EXPECT_EQ(d.run(), "") << r << "x" << c;
  }
  // struct_size: too small, the first version's size, exact, newer with zero / non-zero tail.
  for (const size_t size : {size_t{0}, size_t{8}, kOptionsMinSize - 1, kOptionsMinSize,
                            sizeof(softmax_options), size_t{48}, size_t{64}}) {
    ArenaCall c(Op::Rows, 2, 8, 0, 0, 64, kNull, 128);
    c.with_options(size, SOFTMAX_BACKEND_CPU, 0, 1);
    EXPECT_EQ(c.run(), "") << "struct_size " << size;
    c.options[size > 40 ? 40 : 63] = 1;  // a newer caller's field set (only read when in range)
    EXPECT_EQ(c.run(), "") << "struct_size " << size << " with a non-zero tail";
  }
  for (const uint32_t flags : {SOFTMAX_FLAG_LOG, 2u, 0x80000000u}) {
    for (const Op op : {Op::Rows, Op::Dropout}) {
      ArenaCall c(op, 2, 8, 0, 0, 64, kNull, 128);
      c.with_options(sizeof(softmax_options), SOFTMAX_BACKEND_AUTO, flags, 0);
      EXPECT_EQ(c.run(), "") << "flags " << flags;
    }
  }
  for (const int32_t threads : {-1, std::numeric_limits<int32_t>::min(), 0, 1, 3, 64}) {
    ArenaCall c(Op::Rows, 70, 1000, 2, 0, 70 * 1000 * 2, kNull, 70 * 1000 * 4);
    c.with_options(sizeof(softmax_options), SOFTMAX_BACKEND_CPU, 0, threads);
    EXPECT_EQ(c.run(), "") << "num_threads " << threads;
  }
  ArenaCall cuda(Op::Rows, 2, 8, 0, 0, 64, kNull, 128);
  cuda.with_options(sizeof(softmax_options), SOFTMAX_BACKEND_CUDA, 0, 0);
  EXPECT_EQ(cuda.run(), "") << "host pointers to the CUDA backend";
}

TEST(CheckedCalls, DropoutProbabilities) {
  const float inf = std::numeric_limits<float>::infinity();
  const float ps[] = {0.0f, -0.0f, 1.0f, 0.5f, std::numeric_limits<float>::denorm_min(),
                      std::nextafter(1.0f, 0.0f), std::nextafter(1.0f, 2.0f), -1e-30f,
                      -std::numeric_limits<float>::denorm_min(), inf, -inf,
                      std::numeric_limits<float>::quiet_NaN(), 2.0f};
  for (const int32_t dtype : {0, 1, 2}) {
    for (const float p : ps) {
      ArenaCall d(Op::Dropout, 5, 77, dtype, 0, 5 * 77 * 4, 2 * 5 * 77 * 4, 3 * 5 * 77 * 4);
      d.call.args.p = p;
      d.call.seed = 0x0123456789abcdefull;
      d.call.offset = 7;
      EXPECT_EQ(d.run(), "") << "p " << p << " dtype " << dtype;
    }
  }
}

}  // namespace
