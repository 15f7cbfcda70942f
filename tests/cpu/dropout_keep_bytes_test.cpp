// SPDX-License-Identifier: Apache-2.0
// The vector keep-byte kernels (backends/cpu/dropout_keep_bytes.h) against the independent cuRAND
// restatement, at flat positions the public API cannot reach with an allocatable tensor: group
// numbers next to and across multiples of 2^32 (where the Highway kernel leaves its shortcut for
// the counter words shared by all groups of a step) and next to 2^62. Every phase (offset % 4),
// runs that start and end inside a group and inside a vector step, on every Highway target this
// CPU can run and in the portable kernel. Compiled with the backend's source files, as these
// functions are not exported.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#if defined(SOFTMAX_CPU_HAVE_HIGHWAY)
#include <hwy/targets.h>
#endif

#include "backends/cpu/dropout_keep_bytes.h"
#include "curand_reference.h"
#include "reference.h"

namespace {

using softmax_internal::cpu::dropout_word_threshold;
using KeepBytesFn = void (*)(uint64_t, uint64_t, int64_t, uint64_t, int64_t, uint8_t*);

// Every run [first, first + n) around the given flat positions, for every phase, equals the
// reference bytes; `what` names the kernel in failures.
void expect_reference_bytes(KeepBytesFn fn, const std::string& what) {
  const float p = 0.37f;
  const int64_t threshold = dropout_word_threshold(p);
  const uint64_t group_2_32 = uint64_t{4} << 32;  // the flat index of group 2^32
  for (const uint64_t seed : {softmax_test::fresh_seed(), ~uint64_t{0} - 1}) {
    for (const uint64_t offset : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{4}, uint64_t{5},
                                  uint64_t{6}, uint64_t{7}, ~uint64_t{0} - 2, ~uint64_t{0}}) {
      for (const uint64_t around : {uint64_t{0}, group_2_32, 3 * group_2_32, uint64_t{1} << 62}) {
        for (const uint64_t before : {uint64_t{0}, uint64_t{1}, uint64_t{6}, uint64_t{131}, uint64_t{1029}}) {
          if (before > around) continue;
          for (const int64_t n : {int64_t{1}, int64_t{3}, int64_t{4}, int64_t{17}, int64_t{131}, int64_t{2053}}) {
            const uint64_t first = around - before;
            std::vector<uint8_t> keep(size_t(n) + 64, 0xAB);
            fn(seed, offset, threshold, first, n, keep.data());
            for (int64_t j = 0; j < n; ++j) {
              ASSERT_EQ(keep[size_t(j)], softmax_cpu_test::curand_keep(seed, offset, first + uint64_t(j), p) ? 1 : 0)
                  << what << " seed " << seed << " offset " << offset << " first " << first << " n " << n
                  << " element " << j;
            }
            for (size_t j = size_t(n); j < keep.size(); ++j) ASSERT_EQ(keep[j], 0xAB) << what << " wrote past n";
          }
        }
      }
    }
  }
}

TEST(DropoutKeepBytes, PortableKernelEqualsReferenceAtEveryPhaseAndGroupBoundary) {
  expect_reference_bytes(&softmax_internal::cpu::dropout_keep_bytes_portable, "portable");
}

#if defined(SOFTMAX_CPU_HAVE_HIGHWAY)
TEST(DropoutKeepBytes, EveryHighwayTargetEqualsReferenceAtEveryPhaseAndGroupBoundary) {
  const int64_t runnable = hwy::SupportedTargets() & HWY_TARGETS;
  int tested = 0;
  for (int bit = 0; bit < 63; ++bit) {
    const int64_t target = int64_t{1} << bit;
    if ((runnable & target) == 0) continue;
    hwy::SetSupportedTargetsForTest(target);
    ++tested;
    expect_reference_bytes(&softmax_internal::cpu::dropout_keep_bytes_highway, hwy::TargetName(target));
    hwy::SetSupportedTargetsForTest(0);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(tested, 0);
}
#endif

}  // namespace
