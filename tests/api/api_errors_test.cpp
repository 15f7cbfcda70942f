// Every kind of bad input gets its named status, a message that says what was wrong, and leaves
// the outputs untouched. Each case runs against canary-filled outputs that are compared afterwards.
#include <softmax/softmax.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace {

constexpr int64_t kRows = 4, kCols = 16;
constexpr size_t kN = kRows * kCols;

// One arena holds x, y and the mask so that overlap cases can be built from offsets.
struct Arena {
  std::vector<float> mem = std::vector<float>(4 * kN);
  float* x() { return mem.data(); }
  float* y() { return mem.data() + kN; }
  uint8_t* mask() { return reinterpret_cast<uint8_t*>(mem.data() + 2 * kN); }
  Arena() {
    for (size_t i = 0; i < kN; ++i) mem[i] = std::sin(0.37f * float(i)) * 3.0f;
    for (size_t i = kN; i < mem.size(); ++i) mem[i] = -12345.5f;  // canary
  }
};

struct ErrorCase {
  const char* name;
  softmax_status expected;
  const char* message_part;  // must appear in softmax_last_error()
  std::function<softmax_status(Arena&)> call;
};

softmax_options cpu_options() {
  softmax_options o = SOFTMAX_OPTIONS_INIT;
  o.backend = SOFTMAX_BACKEND_CPU;
  return o;
}

softmax_status rows_with(Arena& a, softmax_options o) {
  return softmax_rows(a.x(), a.y(), kRows, kCols, SOFTMAX_DTYPE_F32, &o);
}

softmax_status dropout_p(Arena& a, float p) {
  const softmax_options o = cpu_options();
  return softmax_dropout(a.x(), a.y(), a.mask(), kRows, kCols, SOFTMAX_DTYPE_F32, p, 1, 0, &o);
}

std::vector<ErrorCase> error_cases() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  return {
      {"null_x", SOFTMAX_STATUS_NULL_POINTER, "x is NULL",
       [](Arena& a) { return softmax_rows(nullptr, a.y(), kRows, kCols, SOFTMAX_DTYPE_F32, nullptr); }},
      {"null_y", SOFTMAX_STATUS_NULL_POINTER, "y is NULL",
       [](Arena& a) { return softmax_rows(a.x(), nullptr, kRows, kCols, SOFTMAX_DTYPE_F32, nullptr); }},
      {"dropout_null_y", SOFTMAX_STATUS_NULL_POINTER, "y is NULL",
       [](Arena& a) {
         return softmax_dropout(a.x(), nullptr, a.mask(), kRows, kCols, SOFTMAX_DTYPE_F32, 0.5f, 1, 0, nullptr);
       }},
      {"negative_rows", SOFTMAX_STATUS_INVALID_SIZE, "rows must be >= 0, got -1",
       [](Arena& a) { return softmax_rows(a.x(), a.y(), -1, kCols, SOFTMAX_DTYPE_F32, nullptr); }},
      {"negative_cols", SOFTMAX_STATUS_INVALID_SIZE, "cols must be >= 0, got -3",
       [](Arena& a) { return softmax_rows(a.x(), a.y(), kRows, -3, SOFTMAX_DTYPE_F32, nullptr); }},
      {"int64_min_rows", SOFTMAX_STATUS_INVALID_SIZE, "rows must be >= 0, got -9223372036854775808",
       [](Arena& a) {
         return softmax_rows(a.x(), a.y(), std::numeric_limits<int64_t>::min(), kCols, SOFTMAX_DTYPE_F32, nullptr);
       }},
      {"overflowing_product", SOFTMAX_STATUS_SIZE_OVERFLOW, "overflows",
       [](Arena& a) {
         return softmax_rows(a.x(), a.y(), int64_t(1) << 40, int64_t(1) << 30, SOFTMAX_DTYPE_F32, nullptr);
       }},
      {"overflowing_bytes", SOFTMAX_STATUS_SIZE_OVERFLOW, "overflows",
       [](Arena& a) {
         // 2^61 elements fit in int64 but 2^63 bytes do not fit in ptrdiff_t.
         return softmax_rows(a.x(), a.y(), 1, int64_t(1) << 61, SOFTMAX_DTYPE_F32, nullptr);
       }},
      {"overflowing_dropout", SOFTMAX_STATUS_SIZE_OVERFLOW, "overflows",
       [](Arena& a) {
         return softmax_dropout(a.x(), a.y(), nullptr, std::numeric_limits<int64_t>::max(), 2,
                                SOFTMAX_DTYPE_BF16, 0.1f, 1, 0, nullptr);
       }},
      {"unknown_dtype", SOFTMAX_STATUS_INVALID_DTYPE, "dtype is 4",
       [](Arena& a) { return softmax_rows(a.x(), a.y(), kRows, kCols, static_cast<softmax_dtype>(4), nullptr); }},
      {"negative_dtype", SOFTMAX_STATUS_INVALID_DTYPE, "dtype is -1",
       [](Arena& a) { return softmax_rows(a.x(), a.y(), kRows, kCols, static_cast<softmax_dtype>(-1), nullptr); }},
      {"unknown_backend", SOFTMAX_STATUS_INVALID_BACKEND, "options->backend is 9",
       [](Arena& a) {
         softmax_options o = SOFTMAX_OPTIONS_INIT;
         o.backend = static_cast<softmax_backend>(9);
         return rows_with(a, o);
       }},
      {"options_size_zero", SOFTMAX_STATUS_INVALID_OPTIONS, "struct_size is 0",
       [](Arena& a) {
         softmax_options o = cpu_options();
         o.struct_size = 0;
         return rows_with(a, o);
       }},
      {"options_size_too_small", SOFTMAX_STATUS_INVALID_OPTIONS, "struct_size is 8",
       [](Arena& a) {
         softmax_options o = cpu_options();
         o.struct_size = 8;
         return rows_with(a, o);
       }},
      {"options_unknown_tail_set", SOFTMAX_STATUS_INVALID_OPTIONS, "unknown",
       [](Arena& a) {
         // A caller from the future: a larger struct whose extra field is set.
         struct Bigger {
           softmax_options base;
           uint64_t future_field;
         } big{cpu_options(), 7};
         big.base.struct_size = sizeof(Bigger);
         return softmax_rows(a.x(), a.y(), kRows, kCols, SOFTMAX_DTYPE_F32, &big.base);
       }},
      {"unknown_flags", SOFTMAX_STATUS_INVALID_OPTIONS, "unknown bits 0x10",
       [](Arena& a) {
         softmax_options o = cpu_options();
         o.flags = 0x10;
         return rows_with(a, o);
       }},
      {"negative_threads", SOFTMAX_STATUS_INVALID_OPTIONS, "num_threads must be >= 0",
       [](Arena& a) {
         softmax_options o = cpu_options();
         o.num_threads = -2;
         return rows_with(a, o);
       }},
      {"log_with_dropout", SOFTMAX_STATUS_INVALID_OPTIONS, "SOFTMAX_FLAG_LOG",
       [](Arena& a) {
         softmax_options o = cpu_options();
         o.flags = SOFTMAX_FLAG_LOG;
         return softmax_dropout(a.x(), a.y(), nullptr, kRows, kCols, SOFTMAX_DTYPE_F32, 0.5f, 1, 0, &o);
       }},
      {"p_nan", SOFTMAX_STATUS_INVALID_PROBABILITY, "got nan", [nan](Arena& a) { return dropout_p(a, nan); }},
      {"p_negative", SOFTMAX_STATUS_INVALID_PROBABILITY, "got -0.25",
       [](Arena& a) { return dropout_p(a, -0.25f); }},
      {"p_above_one", SOFTMAX_STATUS_INVALID_PROBABILITY, "got 1.5",
       [](Arena& a) { return dropout_p(a, 1.5f); }},
      {"p_infinite", SOFTMAX_STATUS_INVALID_PROBABILITY, "got inf",
       [inf](Arena& a) { return dropout_p(a, inf); }},
      {"y_overlaps_x_partially", SOFTMAX_STATUS_OVERLAPPING_BUFFERS, "x and y overlap",
       [](Arena& a) {
         return softmax_rows(a.x(), a.x() + 3, kRows, kCols, SOFTMAX_DTYPE_F32, nullptr);
       }},
      {"x_overlaps_y_from_above", SOFTMAX_STATUS_OVERLAPPING_BUFFERS, "x and y overlap",
       [](Arena& a) {
         // Reads from y's second half region: x = y + 1 element.
         return softmax_rows(a.y() + 1, a.y(), kRows, kCols / 2, SOFTMAX_DTYPE_F32, nullptr);
       }},
      {"mask_overlaps_y", SOFTMAX_STATUS_OVERLAPPING_BUFFERS, "keep_mask overlaps",
       [](Arena& a) {
         return softmax_dropout(a.x(), a.y(), reinterpret_cast<uint8_t*>(a.y() + 5), kRows, kCols,
                                SOFTMAX_DTYPE_F32, 0.5f, 1, 0, nullptr);
       }},
      {"mask_overlaps_x", SOFTMAX_STATUS_OVERLAPPING_BUFFERS, "keep_mask overlaps",
       [](Arena& a) {
         return softmax_dropout(a.x(), a.y(), reinterpret_cast<uint8_t*>(a.x()), kRows, kCols,
                                SOFTMAX_DTYPE_F32, 0.5f, 1, 0, nullptr);
       }},
  };
}

class ErrorPaths : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(ErrorPaths, NamedStatusMessageAndNothingWritten) {
  const ErrorCase& c = GetParam();
  Arena a;
  const std::vector<float> before = a.mem;
  const softmax_status s = c.call(a);
  EXPECT_EQ(s, c.expected) << softmax_status_string(s) << ": " << softmax_last_error();
  const std::string msg = softmax_last_error();
  EXPECT_NE(msg.find(c.message_part), std::string::npos)
      << "message \"" << msg << "\" lacks \"" << c.message_part << "\"";
  EXPECT_EQ(std::memcmp(before.data(), a.mem.data(), before.size() * sizeof(float)), 0)
      << "a failed call wrote to memory";
}

INSTANTIATE_TEST_SUITE_P(Api, ErrorPaths, ::testing::ValuesIn(error_cases()),
                         [](const ::testing::TestParamInfo<ErrorCase>& i) { return std::string(i.param.name); });

// Without a usable CUDA device, asking for the CUDA backend is a named error, not a crash.
TEST(BackendChoice, CudaRequestedWithoutDevice) {
  if (softmax_backend_available(SOFTMAX_BACKEND_CUDA)) {
    GTEST_SKIP() << "a CUDA device is present; the unavailable path cannot be exercised here";
  }
  Arena a;
  const std::vector<float> before = a.mem;
  softmax_options o = SOFTMAX_OPTIONS_INIT;
  o.backend = SOFTMAX_BACKEND_CUDA;
  EXPECT_EQ(rows_with(a, o), SOFTMAX_STATUS_BACKEND_UNAVAILABLE);
  EXPECT_NE(std::string(softmax_last_error()).find("CUDA backend is unavailable"), std::string::npos)
      << softmax_last_error();
  EXPECT_EQ(before, a.mem);
}

// A host pointer given to the CUDA backend is refused by name when a device is present.
TEST(BackendChoice, HostPointerToCudaBackend) {
  if (!softmax_backend_available(SOFTMAX_BACKEND_CUDA)) {
    GTEST_SKIP() << "no CUDA device: the memory-space check needs one";
  }
  Arena a;
  const std::vector<float> before = a.mem;
  softmax_options o = SOFTMAX_OPTIONS_INIT;
  o.backend = SOFTMAX_BACKEND_CUDA;
  EXPECT_EQ(rows_with(a, o), SOFTMAX_STATUS_WRONG_MEMORY_SPACE);
  EXPECT_NE(std::string(softmax_last_error()).find("x points to host memory"), std::string::npos)
      << softmax_last_error();
  EXPECT_EQ(before, a.mem);
}

// A newer caller's larger struct is fine when the fields we do not know are zero.
TEST(Options, LargerStructWithZeroTailAccepted) {
  struct Bigger {
    softmax_options base;
    uint64_t future_field;
  } big{cpu_options(), 0};
  big.base.struct_size = sizeof(Bigger);
  Arena a;
  EXPECT_EQ(softmax_rows(a.x(), a.y(), kRows, kCols, SOFTMAX_DTYPE_F32, &big.base), SOFTMAX_STATUS_SUCCESS)
      << softmax_last_error();
}

TEST(Options, InPlaceIsAllowed) {
  Arena a;
  const softmax_options o = cpu_options();
  ASSERT_EQ(softmax_rows(a.x(), a.x(), kRows, kCols, SOFTMAX_DTYPE_F32, &o), SOFTMAX_STATUS_SUCCESS)
      << softmax_last_error();
  double sum = 0;
  for (int64_t c = 0; c < kCols; ++c) sum += a.x()[c];
  EXPECT_NEAR(sum, 1.0, 1e-6);
}

TEST(Options, ProbabilityBoundsAreInclusive) {
  Arena a;
  EXPECT_EQ(dropout_p(a, 0.0f), SOFTMAX_STATUS_SUCCESS) << softmax_last_error();
  EXPECT_EQ(dropout_p(a, 1.0f), SOFTMAX_STATUS_SUCCESS) << softmax_last_error();
}

}  // namespace
