// SPDX-License-Identifier: Apache-2.0
// softmax_dropout's keep rule and edge probabilities on every backend, through the public C API:
// the mask and the output follow backends/common/philox.h's rule for Philox offsets 0-7 and
// offsets and seeds next to 2^32 and 2^64 (counter carries), for p = 0 (everything kept: the
// output is softmax_rows' bit for bit), p = 1 (nothing kept: zeros), a tiny p, and p next to 1
// (scale up to 2^24, where only exact zeros keep -inf inputs at zero). Also: passing
// SOFTMAX_FLAG_Y_DTYPE with y's type equal to x's changes nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend_runner.h"
#include "float64_check.h"
#include "input_rows.h"

namespace softmax_semantics {

namespace {

class Backends : public ::testing::TestWithParam<const Runner*> {
 protected:
  void SetUp() override {
    const std::string why = GetParam()->unavailable();
    if (!why.empty()) GTEST_SKIP() << why;
  }
};

struct Pair {
  softmax_dtype x, y;
};
const Pair kPairs[] = {{SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F32},
                       {SOFTMAX_DTYPE_BF16, SOFTMAX_DTYPE_F32},
                       {SOFTMAX_DTYPE_F16, SOFTMAX_DTYPE_BF16},
                       {SOFTMAX_DTYPE_F64, SOFTMAX_DTYPE_F64},
                       {SOFTMAX_DTYPE_F32, SOFTMAX_DTYPE_F64}};

TEST_P(Backends, DropoutKeepRuleAtEveryPhaseAndCounterCarry) {
  const Runner& runner = *GetParam();
  const uint64_t max = ~uint64_t{0};
  std::vector<uint64_t> offsets = {0, 1, 2, 3, 4, 5, 6, 7, (uint64_t{1} << 32) - 1, uint64_t{1} << 32,
                                   (uint64_t{1} << 34) + 2, max - 7, max - 4, max - 1, max};
  const uint64_t seeds[] = {softmax_test::fresh_seed(), max, max - 1, (uint64_t{1} << 32) - 1};
  size_t step = 0;
  for (const uint64_t offset : offsets) {
    for (const uint64_t seed : seeds) {
      // Groups of 4 straddling rows (1, 3, 33) and chunks (8193, once per offset).
      for (const int64_t cols : {int64_t{1}, int64_t{3}, int64_t{33}, int64_t{8193}}) {
        if (cols == 8193 && seed != seeds[0]) continue;
        const Pair pair = kPairs[step++ % (sizeof kPairs / sizeof kPairs[0])];
        const std::vector<RowKind> all = all_kinds(pair.x);
        const std::vector<const RowKind*> kinds = kinds_for(all, cols, step);
        const uint64_t input_seed = softmax_test::fresh_seed();
        const Buffer x = make_input(pair.x, kinds, cols, input_seed);
        Call c;
        c.x = &x;
        c.y_dtype = pair.y;
        c.rows = int64_t(kinds.size());
        c.cols = cols;
        c.dropout = true;
        c.drop = DropoutArgs{0.3f, seed, offset, true};
        ASSERT_TRUE(matches_float64(c, runner.run(c), runner, kinds, input_seed));
      }
    }
  }
}

TEST_P(Backends, DropoutEdgeProbabilities) {
  const Runner& runner = *GetParam();
  const float probabilities[] = {0.0f, 0x1p-24f, 0.999f, 1.0f - 0x1p-20f, 1.0f - 0x1p-24f, 1.0f};
  for (const Pair pair : kPairs) {
    for (const float p : probabilities) {
      for (const int64_t cols : {int64_t{7}, int64_t{4097}, int64_t{32001}}) {
        if (cols == 32001 && pair.x != pair.y) continue;  // long rows: same-type pairs only
        const std::vector<RowKind> all = all_kinds(pair.x);
        const std::vector<const RowKind*> kinds = kinds_for(all, cols, size_t(cols));
        const uint64_t input_seed = softmax_test::fresh_seed();
        const Buffer x = make_input(pair.x, kinds, cols, input_seed);
        Call c;
        c.x = &x;
        c.y_dtype = pair.y;
        c.rows = int64_t(kinds.size());
        c.cols = cols;
        c.dropout = true;
        c.drop = DropoutArgs{p, softmax_test::fresh_seed(), 5, true};
        const Result r = runner.run(c);
        ASSERT_TRUE(matches_float64(c, r, runner, kinds, input_seed));
        if (p == 0.0f) {
          // Everything kept: softmax_rows' output, bit for bit.
          Call plain = c;
          plain.dropout = false;
          ASSERT_EQ(runner.run(plain).y.bytes, r.y.bytes)
              << softmax_test::dtype_name(pair.x) << "->" << softmax_test::dtype_name(pair.y) << " cols " << cols;
        }
      }
    }
  }
}

TEST_P(Backends, YDtypeFlagWithXsOwnTypeChangesNothing) {
  const Runner& runner = *GetParam();
  for (const softmax_dtype t : softmax_test::kAllDtypes) {
    for (const bool log_softmax : {false, true}) {
      const std::vector<RowKind> all = all_kinds(t);
      const std::vector<const RowKind*> kinds = kinds_for(all, 1000, 0);
      const Buffer x = make_input(t, kinds, 1000, softmax_test::fresh_seed());
      Call c;
      c.x = &x;
      c.y_dtype = t;
      c.rows = int64_t(kinds.size());
      c.cols = 1000;
      c.log_softmax = log_softmax;
      const Result without = runner.run(c);
      c.set_y_dtype_flag = true;
      const Result with = runner.run(c);
      if (without.refused_by_forced_strategy && with.refused_by_forced_strategy) continue;
      ASSERT_EQ(without.status, SOFTMAX_STATUS_SUCCESS) << without.message;
      ASSERT_EQ(with.status, SOFTMAX_STATUS_SUCCESS) << with.message;
      ASSERT_EQ(with.y.bytes, without.y.bytes) << softmax_test::dtype_name(t) << (log_softmax ? " log" : "");
    }
  }
}

std::string backend_name(const ::testing::TestParamInfo<const Runner*>& info) { return info.param->name(); }

INSTANTIATE_TEST_SUITE_P(Cpu, Backends, ::testing::Values(&cpu_runner()), backend_name);
#if defined(SOFTMAX_SEMANTICS_WITH_CUDA)
INSTANTIATE_TEST_SUITE_P(Cuda, Backends, ::testing::Values(&cuda_runner()), backend_name);
#endif

}  // namespace
}  // namespace softmax_semantics
