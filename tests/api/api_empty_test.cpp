// SPDX-License-Identifier: Apache-2.0
// Empty inputs, through all eight compute functions: rows == 0 or cols == 0 succeeds, writes
// nothing and reads no pointer (so NULL is fine), whatever the other size; a negative size stays
// INVALID_SIZE; and an empty call still refuses what is wrong with its other arguments (options,
// dtype, y_dtype, p, LOG where not supported, f64 where the statistics cannot carry it).
#include <softmax/softmax.h>

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "entry_points.h"

namespace {

using softmax_api_test::EntryPoint;
using softmax_api_test::kEntryPoints;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
const std::pair<int64_t, int64_t> kEmptyShapes[] = {{0, 0}, {0, 1}, {1, 0}, {0, 77}, {1000, 0},
                                                    {0, kMax}, {kMax, 0}};

softmax_options cpu_options(uint32_t flags = 0) {
  softmax_options o = SOFTMAX_OPTIONS_INIT;
  o.backend = SOFTMAX_BACKEND_CPU;
  o.flags = flags;
  return o;
}

// Canary-filled memory for the pointer arguments, checked after each call.
struct Canaries {
  std::vector<unsigned char> mem = std::vector<unsigned char>(4 * 256, 0xA5);
  void* ptr(int i) { return mem.data() + 256 * i; }
};

std::string shape(int64_t rows, int64_t cols) { return std::to_string(rows) + "x" + std::to_string(cols); }

TEST(EmptyInputs, SucceedWithNullPointersAndClearTheLastError) {
  void* const none[4] = {nullptr, nullptr, nullptr, nullptr};
  const softmax_options cpu = cpu_options();
  for (const EntryPoint& e : kEntryPoints) {
    for (const auto& [rows, cols] : kEmptyShapes) {
      for (const softmax_options* o : {static_cast<const softmax_options*>(nullptr), &cpu}) {
        // A failing call first, so that success visibly clears the thread's message.
        ASSERT_EQ(softmax_rows(nullptr, nullptr, -1, 1, SOFTMAX_DTYPE_F32, nullptr), SOFTMAX_STATUS_INVALID_SIZE);
        EXPECT_EQ(e.call(none, rows, cols, SOFTMAX_DTYPE_F32, 0.5f, o), SOFTMAX_STATUS_SUCCESS)
            << e.name << " " << shape(rows, cols) << (o ? " CPU options" : " NULL options") << ": "
            << softmax_last_error();
        EXPECT_STREQ(softmax_last_error(), "") << e.name << " " << shape(rows, cols);
      }
    }
  }
}

TEST(EmptyInputs, WriteNothingThroughRealPointers) {
  for (const EntryPoint& e : kEntryPoints) {
    for (const auto& [rows, cols] : kEmptyShapes) {
      for (const softmax_dtype t : {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F16, SOFTMAX_DTYPE_BF16, SOFTMAX_DTYPE_F64}) {
        if (t == SOFTMAX_DTYPE_F64 && !e.f64_allowed) continue;
        Canaries c;
        const std::vector<unsigned char> before = c.mem;
        void* const ptrs[4] = {c.ptr(0), c.ptr(1), c.ptr(2), c.ptr(3)};
        const softmax_options o = cpu_options();
        EXPECT_EQ(e.call(ptrs, rows, cols, t, 0.25f, &o), SOFTMAX_STATUS_SUCCESS)
            << e.name << " " << shape(rows, cols) << ": " << softmax_last_error();
        EXPECT_TRUE(before == c.mem) << e.name << " " << shape(rows, cols) << " wrote to memory";
      }
    }
  }
}

// Aliasing that would be refused for a real matrix is moot when there is nothing to read or
// write, and so is which backend would run it: even CUDA without a device reads no pointer.
TEST(EmptyInputs, NeitherOverlapNorBackendChoiceMatters) {
  Canaries c;
  const std::vector<unsigned char> before = c.mem;
  void* const same[4] = {c.ptr(0), c.ptr(0), c.ptr(0), c.ptr(0)};
  softmax_options cuda = SOFTMAX_OPTIONS_INIT;
  cuda.backend = SOFTMAX_BACKEND_CUDA;
  for (const EntryPoint& e : kEntryPoints) {
    EXPECT_EQ(e.call(same, 0, 9, SOFTMAX_DTYPE_F32, 0.5f, nullptr), SOFTMAX_STATUS_SUCCESS)
        << e.name << ": " << softmax_last_error();
    EXPECT_EQ(e.call(same, 9, 0, SOFTMAX_DTYPE_F16, 0.5f, &cuda), SOFTMAX_STATUS_SUCCESS)
        << e.name << ": " << softmax_last_error();
  }
  EXPECT_TRUE(before == c.mem);
}

TEST(EmptyInputs, NegativeSizesStayInvalid) {
  void* const none[4] = {nullptr, nullptr, nullptr, nullptr};
  const std::pair<int64_t, int64_t> shapes[] = {{0, -1}, {-1, 0}, {-5, 3}, {3, -5},
                                                {std::numeric_limits<int64_t>::min(), 0}};
  for (const EntryPoint& e : kEntryPoints) {
    for (const auto& [rows, cols] : shapes) {
      EXPECT_EQ(e.call(none, rows, cols, SOFTMAX_DTYPE_F32, 0.5f, nullptr), SOFTMAX_STATUS_INVALID_SIZE)
          << e.name << " " << shape(rows, cols);
      const std::string msg = softmax_last_error();
      const std::string named = rows < 0 ? "rows must be >= 0, got " + std::to_string(rows)
                                         : "cols must be >= 0, got " + std::to_string(cols);
      EXPECT_NE(msg.find(named), std::string::npos) << e.name << ": \"" << msg << "\"";
    }
  }
}

softmax_dtype raw_dtype(int v) {
  softmax_dtype t;
  std::memcpy(&t, &v, sizeof v);
  return t;
}

// One bad argument at a time on an otherwise valid empty call.
TEST(EmptyInputs, StillRefuseBadOptionsDtypeAndProbability) {
  void* const none[4] = {nullptr, nullptr, nullptr, nullptr};
  for (const EntryPoint& e : kEntryPoints) {
    auto expect = [&](softmax_status want, const char* part, softmax_dtype t, float p, const softmax_options* o,
                      const char* what) {
      EXPECT_EQ(e.call(none, 0, 16, t, p, o), want) << e.name << ", " << what << ": " << softmax_last_error();
      EXPECT_NE(std::string(softmax_last_error()).find(part), std::string::npos)
          << e.name << ", " << what << ": \"" << softmax_last_error() << "\" lacks \"" << part << "\"";
    };
    softmax_options o = cpu_options();
    o.struct_size = 3;
    expect(SOFTMAX_STATUS_INVALID_OPTIONS, "struct_size is 3", SOFTMAX_DTYPE_F32, 0.5f, &o, "struct_size 3");
    o = cpu_options();
    o.struct_size = SIZE_MAX;
    expect(SOFTMAX_STATUS_INVALID_OPTIONS, "struct_size is", SOFTMAX_DTYPE_F32, 0.5f, &o, "struct_size SIZE_MAX");
    o = cpu_options(0x100);
    expect(SOFTMAX_STATUS_INVALID_OPTIONS, "unknown bits 0x100", SOFTMAX_DTYPE_F32, 0.5f, &o, "unknown flag");
    o = cpu_options();
    o.num_threads = -1;
    expect(SOFTMAX_STATUS_INVALID_OPTIONS, "num_threads", SOFTMAX_DTYPE_F32, 0.5f, &o, "num_threads -1");
    o = cpu_options();
    const int bad_backend = 3;
    std::memcpy(&o.backend, &bad_backend, sizeof bad_backend);
    expect(SOFTMAX_STATUS_INVALID_BACKEND, "options->backend is 3", SOFTMAX_DTYPE_F32, 0.5f, &o, "backend 3");
    expect(SOFTMAX_STATUS_INVALID_DTYPE, "dtype is 4", raw_dtype(4), 0.5f, nullptr, "dtype 4");
    expect(SOFTMAX_STATUS_INVALID_DTYPE, "dtype is -1", raw_dtype(-1), 0.5f, nullptr, "dtype -1");
    o = cpu_options(SOFTMAX_FLAG_Y_DTYPE);
    const int bad_y = 9;
    std::memcpy(&o.y_dtype, &bad_y, sizeof bad_y);
    expect(SOFTMAX_STATUS_INVALID_DTYPE, "options->y_dtype is 9", SOFTMAX_DTYPE_F32, 0.5f, &o, "y_dtype 9");
    o = cpu_options(SOFTMAX_FLAG_Y_DTYPE);
    o.struct_size = offsetof(softmax_options, y_dtype);
    expect(SOFTMAX_STATUS_INVALID_OPTIONS, "too small to hold y_dtype", SOFTMAX_DTYPE_F32, 0.5f, &o,
           "y_dtype flag in a first-version struct");
    if (e.takes_p) {
      expect(SOFTMAX_STATUS_INVALID_PROBABILITY, "got 2", SOFTMAX_DTYPE_F32, 2.0f, nullptr, "p 2");
      expect(SOFTMAX_STATUS_INVALID_PROBABILITY, "got nan", SOFTMAX_DTYPE_F32,
             std::numeric_limits<float>::quiet_NaN(), nullptr, "p NaN");
    }
    o = cpu_options(SOFTMAX_FLAG_LOG);
    if (!e.log_allowed) {
      expect(SOFTMAX_STATUS_INVALID_OPTIONS, "SOFTMAX_FLAG_LOG is not supported", SOFTMAX_DTYPE_F32, 0.5f, &o, "LOG");
    } else {
      EXPECT_EQ(e.call(none, 0, 16, SOFTMAX_DTYPE_F32, 0.5f, &o), SOFTMAX_STATUS_SUCCESS)
          << e.name << ", LOG: " << softmax_last_error();
    }
    o = cpu_options(SOFTMAX_FLAG_Y_DTYPE);
    o.y_dtype = SOFTMAX_DTYPE_F64;
    if (!e.f64_allowed) {
      expect(SOFTMAX_STATUS_INVALID_DTYPE, "keeps float row statistics", SOFTMAX_DTYPE_F64, 0.5f, nullptr, "f64");
      expect(SOFTMAX_STATUS_INVALID_DTYPE, "keeps float row statistics", SOFTMAX_DTYPE_F32, 0.5f, &o, "f64 y");
    } else {
      EXPECT_EQ(e.call(none, 0, 16, SOFTMAX_DTYPE_F64, 0.5f, nullptr), SOFTMAX_STATUS_SUCCESS)
          << e.name << ", f64: " << softmax_last_error();
      EXPECT_EQ(e.call(none, 16, 0, SOFTMAX_DTYPE_F16, 0.5f, &o), SOFTMAX_STATUS_SUCCESS)
          << e.name << ", f64 y: " << softmax_last_error();
    }
  }
}

}  // namespace
