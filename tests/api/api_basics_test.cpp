// SPDX-License-Identifier: Apache-2.0
// What every caller relies on besides the math: version, defaults, availability, status names,
// last-error lifecycle and thread isolation.
#include <softmax/softmax.h>

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

TEST(Basics, VersionMatchesHeader) {
  const std::string expected = std::to_string(SOFTMAX_VERSION_MAJOR) + "." +
                               std::to_string(SOFTMAX_VERSION_MINOR) + "." +
                               std::to_string(SOFTMAX_VERSION_PATCH);
  EXPECT_EQ(expected, softmax_version());
}

TEST(Basics, DefaultOptions) {
  const softmax_options o = softmax_default_options();
  EXPECT_EQ(o.struct_size, sizeof(softmax_options));
  EXPECT_EQ(o.backend, SOFTMAX_BACKEND_AUTO);
  EXPECT_EQ(o.flags, 0u);
  EXPECT_EQ(o.stream, nullptr);
  EXPECT_EQ(o.num_threads, 0);
  const softmax_options init = SOFTMAX_OPTIONS_INIT;
  EXPECT_EQ(init.struct_size, o.struct_size);
}

TEST(Basics, BackendAvailability) {
  EXPECT_EQ(softmax_backend_available(SOFTMAX_BACKEND_AUTO), 1);
  EXPECT_EQ(softmax_backend_available(SOFTMAX_BACKEND_CPU), 1);
  const int cuda = softmax_backend_available(SOFTMAX_BACKEND_CUDA);
  EXPECT_TRUE(cuda == 0 || cuda == 1);
  EXPECT_EQ(softmax_backend_available(static_cast<softmax_backend>(7)), 0);
  EXPECT_EQ(softmax_backend_available(static_cast<softmax_backend>(-1)), 0);
}

TEST(Basics, StatusStringsAreDistinctAndNamed) {
  std::set<std::string> names;
  for (int s = SOFTMAX_STATUS_SUCCESS; s <= SOFTMAX_STATUS_INTERNAL_ERROR; ++s) {
    const std::string name = softmax_status_string(static_cast<softmax_status>(s));
    EXPECT_EQ(name.rfind("SOFTMAX_STATUS_", 0), 0u) << name;
    EXPECT_NE(name, "SOFTMAX_STATUS_UNKNOWN") << s;
    names.insert(name);
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(SOFTMAX_STATUS_INTERNAL_ERROR + 1));
  EXPECT_STREQ(softmax_status_string(static_cast<softmax_status>(999)), "SOFTMAX_STATUS_UNKNOWN");
}

TEST(Basics, SuccessClearsLastError) {
  float x[4] = {0.25f, -1.0f, 3.0f, 2.0f}, y[4];
  ASSERT_EQ(softmax_rows(x, y, 1, -4, SOFTMAX_DTYPE_F32, nullptr), SOFTMAX_STATUS_INVALID_SIZE);
  EXPECT_STRNE(softmax_last_error(), "");
  ASSERT_EQ(softmax_rows(x, y, 1, 4, SOFTMAX_DTYPE_F32, nullptr), SOFTMAX_STATUS_SUCCESS);
  EXPECT_STREQ(softmax_last_error(), "");
}

TEST(Basics, LastErrorIsPerThread) {
  float x[4] = {0.25f, -1.0f, 3.0f, 2.0f}, y[4];
  ASSERT_EQ(softmax_rows(x, y, 1, -3, SOFTMAX_DTYPE_F32, nullptr), SOFTMAX_STATUS_INVALID_SIZE);
  const std::string mine = softmax_last_error();
  std::string other;
  std::thread t([&] {
    float a[2] = {1, 2}, b[2];
    EXPECT_EQ(softmax_rows(a, b, 1, 2, SOFTMAX_DTYPE_F32, nullptr), SOFTMAX_STATUS_SUCCESS);
    other = softmax_last_error();
  });
  t.join();
  EXPECT_EQ(other, "");
  EXPECT_EQ(mine, softmax_last_error());
  EXPECT_NE(mine.find("-3"), std::string::npos) << mine;
}

TEST(Basics, AutoUsesCpuForHostMemory) {
  // Host memory under AUTO must run (on the CPU), with or without a GPU present.
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8}, y(8, -1.0f);
  softmax_options o = SOFTMAX_OPTIONS_INIT;
  ASSERT_EQ(softmax_rows(x.data(), y.data(), 2, 4, SOFTMAX_DTYPE_F32, &o), SOFTMAX_STATUS_SUCCESS)
      << softmax_last_error();
  EXPECT_NEAR(y[0] + y[1] + y[2] + y[3], 1.0, 1e-6);
}

}  // namespace
