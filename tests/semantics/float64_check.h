/* SPDX-License-Identifier: Apache-2.0 */
// Judging one call's output against float64, shared by the differential suites: inputs built
// from row kinds (input_rows.h), the keep rule of backends/common/philox.h, and reference.h's
// per-element rule (value_matches) applied to every element and every mask byte.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend_runner.h"
#include "backends/common/philox.h"
#include "input_rows.h"

namespace softmax_semantics {

// Long rows take a rotating subset of the kinds (about 400K elements per call) so that the
// suite stays quick; over the type pairs and modes every kind meets every length.
inline std::vector<const RowKind*> kinds_for(const std::vector<RowKind>& all, int64_t cols, size_t salt) {
  const size_t budget = std::max<size_t>(2, size_t(400000 / cols));
  std::vector<const RowKind*> out;
  if (all.size() <= budget) {
    for (const RowKind& k : all) out.push_back(&k);
    return out;
  }
  for (size_t i = 0; i < budget; ++i) out.push_back(&all[(salt + i * all.size() / budget) % all.size()]);
  return out;
}

inline Buffer make_input(softmax_dtype t, const std::vector<const RowKind*>& kinds, int64_t cols, uint64_t seed) {
  Buffer x(t, kinds.size() * size_t(cols));
  std::mt19937_64 rng(seed);
  for (size_t r = 0; r < kinds.size(); ++r) kinds[r]->fill(RowSink{&x, r, cols, &rng});
  return x;
}

// The keep bits of flat element i, one Philox evaluation per group of 4.
class KeepBits {
 public:
  KeepBits(uint64_t seed, uint64_t offset, float p) : seed_(seed), offset_(offset), p_(p) {}
  bool operator()(uint64_t i) {
    if (i / 4 != group_) {
      group_ = i / 4;
      bits_ = softmax_internal::dropout_keep4(seed_, offset_, group_, p_);
    }
    return (bits_ >> (i % 4)) & 1u;
  }

 private:
  uint64_t seed_, offset_;
  float p_;
  uint64_t group_ = ~uint64_t{0};
  unsigned bits_ = 0;
};

inline std::string describe(const Call& c, const Runner& runner, uint64_t seed) {
  std::ostringstream s;
  s << runner.name() << " " << softmax_test::dtype_name(c.x->dtype) << "->" << softmax_test::dtype_name(c.y_dtype)
    << " " << c.rows << "x" << c.cols << (c.log_softmax ? " log" : "") << " x+" << c.x_offset << " y+"
    << c.y_offset << (c.in_place ? " in place" : "") << " input seed " << seed;
  if (c.dropout) s << " dropout p=" << c.drop.p << " seed=" << c.drop.seed << " offset=" << c.drop.offset;
  return s.str();
}

// Every element of the call's output against float64 (and the mask against the keep rule).
inline ::testing::AssertionResult matches_float64(const Call& c, const Result& r, const Runner& runner,
                                           const std::vector<const RowKind*>& kinds, uint64_t seed) {
  if (r.refused_by_forced_strategy) return ::testing::AssertionSuccess();
  if (r.status != SOFTMAX_STATUS_SUCCESS) {
    return ::testing::AssertionFailure() << describe(c, runner, seed) << ": " << softmax_status_string(r.status)
                                         << ": " << r.message;
  }
  const bool fp64 = c.x->dtype == SOFTMAX_DTYPE_F64 || c.y_dtype == SOFTMAX_DTYPE_F64;
  const double scale = c.dropout ? 1.0 / (1.0 - double(c.drop.p)) : 1.0;
  KeepBits keep(c.drop.seed, c.drop.offset, c.drop.p);
  std::vector<double> ref;
  for (int64_t row = 0; row < c.rows; ++row) {
    softmax_test::reference_row(*c.x, size_t(row), size_t(c.cols), c.log_softmax, &ref, scale);
    for (int64_t col = 0; col < c.cols; ++col) {
      const size_t i = size_t(row * c.cols + col);
      double want = ref[size_t(col)];
      if (c.dropout) {
        const bool kept = c.drop.p < 1.0f && keep(i);
        if (!r.mask.empty() && r.mask[i] != (kept ? 1 : 0)) {
          return ::testing::AssertionFailure() << describe(c, runner, seed) << ": mask of element " << i
                                               << " is " << int(r.mask[i]) << ", the keep rule says " << kept;
        }
        want = kept ? want : 0.0;
      }
      const double got = r.y.get(i);
      // In fp32 arithmetic a softmax value below the smallest normal float may flush to +0 before
      // the dropout scale multiplies it (README: results below the smallest normal number).
      const bool flushed_before_scale = c.dropout && !fp64 && ref[size_t(col)] / scale < 0x1p-126 && got == 0.0 &&
                                        !std::signbit(got);
      if (!flushed_before_scale && !softmax_test::value_matches(c.y_dtype, got, want, c.log_softmax, size_t(c.cols), fp64,
                                       ref[size_t(col)] / scale)) {
        return ::testing::AssertionFailure()
               << describe(c, runner, seed) << ": row " << row << " (" << kinds[size_t(row)]->name << ") col "
               << col << ": got " << got << ", float64 gives " << want << " (x = " << c.x->get(i) << ")";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace softmax_semantics
