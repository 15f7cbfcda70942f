// SPDX-License-Identifier: Apache-2.0
// Differential tests of softmax_rows, log-softmax and softmax_dropout against float64 on every
// backend, through the public C API: every (x, y) storage pair, magnitudes from 1 to each type's
// range, -inf / NaN / +inf placements (input_rows.h), row lengths on both sides of every vector
// width and chunk boundary, and x and y one element off alignment or in place. A correct backend
// gives, per element, what reference.h's value_matches accepts: NaN where float64 is NaN, the
// exact infinity where float64 rounded to y's type is infinite, exact +0 where float64 is (clearly)
// below half y's smallest subnormal, and otherwise the float64 value within the arithmetic's and
// y's rounding error. Dropout adds the keep rule of backends/common/philox.h and the scale
// 1 / (1 - p). Backends built without a device skip with the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "backend_runner.h"
#include "backends/common/philox.h"
#include "float64_check.h"
#include "input_rows.h"

namespace softmax_semantics {

namespace {

// Every length that sits on a vector width (4, 8, 16 lanes and the 32-element blocks of the
// kernels), the 8192-element chunk of the CPU's long-row path, or neither.
const int64_t kLengths[] = {1, 2, 3, 7, 8, 9, 31, 32, 33, 1000, 4097, 8191, 8193, 32001, 100003};

enum class Mode { Softmax, Log, Dropout };

struct PairParam {
  const Runner* runner;
  softmax_dtype x, y;
};

class TypePair : public ::testing::TestWithParam<PairParam> {
 protected:
  void SetUp() override {
    const std::string why = GetParam().runner->unavailable();
    if (!why.empty()) GTEST_SKIP() << why;
  }

  void run_mode(Mode mode) {
    const PairParam& pp = GetParam();
    const std::vector<RowKind> all = all_kinds(pp.x);
    const size_t xs = softmax_test::element_size(pp.x), ys = softmax_test::element_size(pp.y);
    const float probabilities[] = {0.1f, 0.5f, 0.9f, 0.999f};
    const uint64_t offsets[] = {0, 1, 2, 3, (uint64_t{1} << 32) + 1, ~uint64_t{0} - 2};
    size_t step = size_t(pp.x) * 4 + size_t(pp.y) + 3 * size_t(mode);
    for (const int64_t cols : kLengths) {
      ++step;
      const uint64_t seed = softmax_test::fresh_seed();
      const std::vector<const RowKind*> kinds = kinds_for(all, cols, step);
      const Buffer x = make_input(pp.x, kinds, cols, seed);
      Call c;
      c.x = &x;
      c.y_dtype = pp.y;
      c.rows = int64_t(kinds.size());
      c.cols = cols;
      c.log_softmax = mode == Mode::Log;
      // The four alignments of (x, y) in turn, and in place every fifth call where it is allowed.
      c.x_offset = step % 2;
      c.y_offset = (step / 2) % 2;
      c.in_place = xs == ys && step % 5 == 4;
      c.set_y_dtype_flag = step % 3 == 0;
      if (mode == Mode::Dropout) {
        c.dropout = true;
        c.drop.p = probabilities[step % 4];
        c.drop.seed = softmax_test::fresh_seed();
        c.drop.offset = offsets[step % 6];
        c.drop.want_mask = step % 7 != 0;
      }
      const Result r = pp.runner->run(c);
      ASSERT_TRUE(matches_float64(c, r, *pp.runner, kinds, seed));
    }
  }
};

TEST_P(TypePair, SoftmaxMatchesFloat64) { run_mode(Mode::Softmax); }
TEST_P(TypePair, LogSoftmaxMatchesFloat64) { run_mode(Mode::Log); }
TEST_P(TypePair, DropoutMatchesFloat64) { run_mode(Mode::Dropout); }

std::vector<PairParam> pairs_on(const Runner& runner) {
  std::vector<PairParam> out;
  for (const softmax_dtype x : softmax_test::kAllDtypes)
    for (const softmax_dtype y : softmax_test::kAllDtypes) out.push_back({&runner, x, y});
  return out;
}

std::string pair_name(const ::testing::TestParamInfo<PairParam>& info) {
  return std::string(softmax_test::dtype_name(info.param.x)) + "_to_" + softmax_test::dtype_name(info.param.y);
}

INSTANTIATE_TEST_SUITE_P(Cpu, TypePair, ::testing::ValuesIn(pairs_on(cpu_runner())), pair_name);
#if defined(SOFTMAX_SEMANTICS_WITH_CUDA)
INSTANTIATE_TEST_SUITE_P(Cuda, TypePair, ::testing::ValuesIn(pairs_on(cuda_runner())), pair_name);
#endif

}  // namespace
}  // namespace softmax_semantics
