// SPDX-License-Identifier: Apache-2.0
// The options struct as callers of different header versions fill it: struct_size bounds (read
// no byte past what the caller owns), a newer caller's zero tail, and y_dtype, which only
// SOFTMAX_FLAG_Y_DTYPE makes the library read. Bad values are in api_errors_test.cpp; here is
// what must be accepted, and how.
#include <softmax/softmax.h>

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "entry_points.h"
#include "reference.h"

namespace {

using softmax_api_test::EntryPoint;
using softmax_api_test::kEntryPoints;
using softmax_test::Buffer;

softmax_options cpu_options() {
  softmax_options o = SOFTMAX_OPTIONS_INIT;
  o.backend = SOFTMAX_BACKEND_CPU;
  return o;
}

// Memory that ends at a PROT_NONE page: an options struct placed so that its last byte is the
// last readable one faults on any read past it.
class GuardedPage {
 public:
  GuardedPage() {
    page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    readable_ = (SOFTMAX_OPTIONS_MAX_SIZE + page_ - 1) / page_ * page_;
    void* p = mmap(nullptr, readable_ + page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;
    base_ = static_cast<unsigned char*>(p);
    if (mprotect(base_ + readable_, page_, PROT_NONE) != 0) {
      munmap(base_, readable_ + page_);
      base_ = nullptr;
    }
  }
  ~GuardedPage() {
    if (base_ != nullptr) munmap(base_, readable_ + page_);
  }
  GuardedPage(const GuardedPage&) = delete;
  GuardedPage& operator=(const GuardedPage&) = delete;

  bool ok() const { return base_ != nullptr; }
  // `bytes` zero bytes ending at the guard page, the first sizeof(softmax_options) of them a copy
  // of `o` (bytes >= sizeof(softmax_options)).
  softmax_options* place(const softmax_options& o, size_t bytes) {
    unsigned char* start = base_ + readable_ - bytes;
    std::memset(base_, 0, readable_);
    std::memcpy(start, &o, sizeof o);
    return reinterpret_cast<softmax_options*>(start);
  }

 private:
  size_t page_ = 0, readable_ = 0;
  unsigned char* base_ = nullptr;
};

// struct_size = SIZE_MAX on a struct that ends at a page boundary used to make the library read
// past it. Sizes above SOFTMAX_OPTIONS_MAX_SIZE are refused before any byte past the struct is
// read, by every entry point; the guard page turns any such read into a crash of this test.
TEST(OptionsSize, AboveTheMaximumIsRefusedWithoutReadingPastTheStruct) {
  GuardedPage guarded;
  ASSERT_TRUE(guarded.ok()) << "mmap/mprotect failed";
  std::vector<float> mem(64, 0.5f);
  for (const size_t size : {SIZE_MAX, size_t{SOFTMAX_OPTIONS_MAX_SIZE} + 1, SIZE_MAX / 2 + 1}) {
    for (const EntryPoint& e : kEntryPoints) {
      softmax_options o = cpu_options();
      o.struct_size = size;
      const softmax_options* at_end = guarded.place(o, sizeof o);
      void* const ptrs[4] = {mem.data(), mem.data() + 16, mem.data() + 32, mem.data() + 48};
      const std::vector<float> before = mem;
      const softmax_status s = e.call(ptrs, 2, 2, SOFTMAX_DTYPE_F32, 0.5f, at_end);
      EXPECT_EQ(s, SOFTMAX_STATUS_INVALID_OPTIONS) << e.name << " struct_size " << size << ": "
                                                   << softmax_last_error();
      EXPECT_NE(std::string(softmax_last_error()).find("struct_size is " + std::to_string(size)), std::string::npos)
          << softmax_last_error();
      EXPECT_EQ(before, mem) << e.name;
    }
  }
}

// Exactly SOFTMAX_OPTIONS_MAX_SIZE bytes, all of the tail zero, ending at the guard page: a
// newer caller's struct that the library must read to its last byte and accept.
TEST(OptionsSize, ExactlyTheMaximumWithAZeroTailIsAccepted) {
  GuardedPage guarded;
  ASSERT_TRUE(guarded.ok()) << "mmap/mprotect failed";
  softmax_options o = cpu_options();
  o.struct_size = SOFTMAX_OPTIONS_MAX_SIZE;
  const softmax_options* big = guarded.place(o, SOFTMAX_OPTIONS_MAX_SIZE);

  const uint64_t seed = softmax_test::fresh_seed();
  SCOPED_TRACE("input seed " + std::to_string(seed));
  const int64_t rows = 3, cols = 50;
  const Buffer x = softmax_test::random_input(SOFTMAX_DTYPE_F32, rows * cols, seed);
  Buffer y(SOFTMAX_DTYPE_F32, rows * cols);
  y.poison();
  ASSERT_EQ(softmax_rows(x.data(), y.data(), rows, cols, SOFTMAX_DTYPE_F32, big), SOFTMAX_STATUS_SUCCESS)
      << softmax_last_error();
  std::vector<double> ref;
  for (size_t r = 0; r < size_t(rows); ++r) {
    softmax_test::reference_row(x, r, cols, false, &ref);
    const softmax_test::RowCheck c = softmax_test::check_row(y, r, cols, ref, false);
    EXPECT_TRUE(c.ok) << "row " << r << " col " << c.bad_col << ": got " << c.got << ", want " << c.want;
  }

  // The last byte of the tail is read: set it and the same struct is refused.
  reinterpret_cast<unsigned char*>(const_cast<softmax_options*>(big))[SOFTMAX_OPTIONS_MAX_SIZE - 1] = 1;
  const Buffer y_before = y;
  EXPECT_EQ(softmax_rows(x.data(), y.data(), rows, cols, SOFTMAX_DTYPE_F32, big), SOFTMAX_STATUS_INVALID_OPTIONS);
  EXPECT_NE(std::string(softmax_last_error()).find("byte 4095 is non-zero"), std::string::npos)
      << softmax_last_error();
  EXPECT_EQ(y_before.bytes, y.bytes);

  // Every entry point reads it the same way: an empty call (which validates everything but
  // touches no array) accepts the zero tail.
  reinterpret_cast<unsigned char*>(const_cast<softmax_options*>(big))[SOFTMAX_OPTIONS_MAX_SIZE - 1] = 0;
  for (const EntryPoint& e : kEntryPoints) {
    void* const none[4] = {nullptr, nullptr, nullptr, nullptr};
    EXPECT_EQ(e.call(none, 0, 7, SOFTMAX_DTYPE_F32, 0.5f, big), SOFTMAX_STATUS_SUCCESS)
        << e.name << ": " << softmax_last_error();
  }
}

// A newer caller's larger struct is fine when the fields we do not know are zero.
TEST(OptionsSize, LargerStructWithZeroTailAccepted) {
  struct Bigger {
    softmax_options base;
    uint64_t future_field;
  } big{cpu_options(), 0};
  big.base.struct_size = sizeof(Bigger);
  std::vector<float> x(64, 1.0f), y(64, -1.0f);
  EXPECT_EQ(softmax_rows(x.data(), y.data(), 4, 16, SOFTMAX_DTYPE_F32, &big.base), SOFTMAX_STATUS_SUCCESS)
      << softmax_last_error();
  EXPECT_FLOAT_EQ(y[0], 1.0f / 16.0f);
}

// Runs softmax_rows on fresh input with `options` and checks that y was written as `y_type`: every
// element right for that type, and no byte past n elements of it touched.
void expect_rows_stored_as(softmax_dtype x_type, softmax_dtype y_type, const softmax_options* options,
                           const std::string& what) {
  const uint64_t seed = softmax_test::fresh_seed();
  const int64_t rows = 5, cols = 37;
  const size_t n = size_t(rows * cols);
  const Buffer x = softmax_test::random_input(x_type, n, seed);
  // Room for the widest type, poisoned: the bytes past y's own must keep the poison.
  Buffer y(y_type, n);
  Buffer room(SOFTMAX_DTYPE_F64, n + 1);
  room.poison();
  const Buffer room_before = room;
  ASSERT_EQ(softmax_rows(x.data(), room.data(), rows, cols, x_type, options), SOFTMAX_STATUS_SUCCESS)
      << what << ": " << softmax_last_error();
  const size_t y_bytes = n * softmax_test::element_size(y_type);
  std::memcpy(y.data(), room.data(), y_bytes);
  EXPECT_EQ(0, std::memcmp(room.bytes.data() + y_bytes, room_before.bytes.data() + y_bytes,
                           room.bytes.size() - y_bytes))
      << what << ": wrote past " << y_bytes << " bytes (y as " << softmax_test::dtype_name(y_type) << ")";
  const bool fp64 = x_type == SOFTMAX_DTYPE_F64 || y_type == SOFTMAX_DTYPE_F64;
  std::vector<double> ref;
  for (size_t r = 0; r < size_t(rows); ++r) {
    softmax_test::reference_row(x, r, cols, false, &ref);
    const softmax_test::RowCheck c = softmax_test::check_row(y, r, cols, ref, false, fp64);
    ASSERT_TRUE(c.ok) << what << ", input seed " << seed << ": row " << r << " col " << c.bad_col << ": got "
                      << c.got << ", want " << c.want;
  }
}

// Options zeroed apart from struct_size (as a C caller's `= {sizeof(softmax_options)}` gives
// them) hold y_dtype = 0 = F32, but without the flag that field is never read: y keeps x's type.
// The same for any value in the field, and for an older caller whose struct ends before it.
TEST(YDtype, WithoutTheFlagTheFieldNeverChangesTheOutputType) {
  for (const softmax_dtype t : {SOFTMAX_DTYPE_F16, SOFTMAX_DTYPE_BF16, SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F64}) {
    const std::string name = softmax_test::dtype_name(t);
    softmax_options zeroed;
    std::memset(&zeroed, 0, sizeof zeroed);
    zeroed.struct_size = sizeof zeroed;
    expect_rows_stored_as(t, t, &zeroed, name + " x, zeroed options");

    for (const int garbage : {int(SOFTMAX_DTYPE_F64), int(SOFTMAX_DTYPE_F16), 99, -1}) {
      softmax_options o = cpu_options();
      std::memcpy(&o.y_dtype, &garbage, sizeof garbage);
      expect_rows_stored_as(t, t, &o, name + " x, y_dtype field " + std::to_string(garbage) + " without the flag");
    }

    // A caller built against the first header: its struct ends after num_threads, and whatever
    // lies behind it (here 0xFF bytes) is not part of it.
    struct {
      softmax_options o;
      unsigned char after[8];
    } old_caller;
    std::memset(&old_caller, 0xFF, sizeof old_caller);
    old_caller.o.struct_size = offsetof(softmax_options, y_dtype);
    old_caller.o.backend = SOFTMAX_BACKEND_CPU;
    old_caller.o.flags = 0;
    old_caller.o.stream = nullptr;
    old_caller.o.num_threads = 0;
    expect_rows_stored_as(t, t, &old_caller.o, name + " x, first-version struct");
  }
}

// With the flag, y is stored as y_dtype, for every pair of storage types.
TEST(YDtype, TheFlagStoresYAsYDtype) {
  for (const softmax_dtype xt : softmax_test::kAllDtypes) {
    for (const softmax_dtype yt : softmax_test::kAllDtypes) {
      softmax_options o = cpu_options();
      o.flags = SOFTMAX_FLAG_Y_DTYPE;
      o.y_dtype = yt;
      expect_rows_stored_as(xt, yt, &o,
                            std::string(softmax_test::dtype_name(xt)) + " x, y_dtype " + softmax_test::dtype_name(yt));
    }
  }
}

// In place needs equal element sizes, not equal types: f16 x into bf16 y is the same two bytes.
TEST(YDtype, InPlaceBetweenTypesOfOneSize) {
  const uint64_t seed = softmax_test::fresh_seed();
  const int64_t rows = 3, cols = 40;
  const Buffer x = softmax_test::random_input(SOFTMAX_DTYPE_F16, rows * cols, seed);
  Buffer inout = x;
  softmax_options o = cpu_options();
  o.flags = SOFTMAX_FLAG_Y_DTYPE;
  o.y_dtype = SOFTMAX_DTYPE_BF16;
  ASSERT_EQ(softmax_rows(inout.data(), inout.data(), rows, cols, SOFTMAX_DTYPE_F16, &o), SOFTMAX_STATUS_SUCCESS)
      << softmax_last_error();
  inout.dtype = SOFTMAX_DTYPE_BF16;
  std::vector<double> ref;
  for (size_t r = 0; r < size_t(rows); ++r) {
    softmax_test::reference_row(x, r, cols, false, &ref);
    const softmax_test::RowCheck c = softmax_test::check_row(inout, r, cols, ref, false);
    EXPECT_TRUE(c.ok) << "input seed " << seed << " row " << r << " col " << c.bad_col << ": got " << c.got
                      << ", want " << c.want;
  }
}

TEST(Options, InPlaceIsAllowed) {
  std::vector<float> x(64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * float(i)) * 3.0f;
  const softmax_options o = cpu_options();
  ASSERT_EQ(softmax_rows(x.data(), x.data(), 4, 16, SOFTMAX_DTYPE_F32, &o), SOFTMAX_STATUS_SUCCESS)
      << softmax_last_error();
  double sum = 0;
  for (int c = 0; c < 16; ++c) sum += x[c];
  EXPECT_NEAR(sum, 1.0, 1e-6);
}

TEST(Options, ProbabilityBoundsAreInclusive) {
  std::vector<float> x(64, 0.25f), y(64);
  std::vector<uint8_t> mask(64);
  const softmax_options o = cpu_options();
  EXPECT_EQ(softmax_dropout(x.data(), y.data(), mask.data(), 4, 16, SOFTMAX_DTYPE_F32, 0.0f, 1, 0, &o),
            SOFTMAX_STATUS_SUCCESS)
      << softmax_last_error();
  EXPECT_EQ(mask, std::vector<uint8_t>(64, 1));
  EXPECT_EQ(softmax_dropout(x.data(), y.data(), mask.data(), 4, 16, SOFTMAX_DTYPE_F32, 1.0f, 1, 0, &o),
            SOFTMAX_STATUS_SUCCESS)
      << softmax_last_error();
  EXPECT_EQ(mask, std::vector<uint8_t>(64, 0));
  EXPECT_EQ(y, std::vector<float>(64, 0.0f));
}

}  // namespace
