/* SPDX-License-Identifier: Apache-2.0 */
// double -> f16 / bf16 with a single rounding (to nearest even), for outputs computed in fp64 and
// stored in a 16-bit type. Going through float with an ordinary conversion would round twice and
// can land one step off next to a halfway point; rounding to float "to odd" first (truncate, then
// set the last bit if anything was cut off) keeps enough information for the second rounding to
// be exact, because float carries at least two more bits than either 16-bit type everywhere in
// their ranges.
#pragma once

#include <cmath>
#include <cstdint>

#include "backends/common/half_bits.h"

namespace softmax_internal {

inline float double_to_float_round_to_odd(double d) {
  const float nearest = static_cast<float>(d);
  if (!std::isfinite(d) || static_cast<double>(nearest) == d) return nearest;
  uint32_t u = float_bits(nearest);
  // Step a rounded-up magnitude back towards zero (truncation), then mark the result inexact.
  if (std::fabs(static_cast<double>(nearest)) > std::fabs(d)) u -= 1u;
  return bits_float(u | 1u);
}

inline uint16_t double_to_f16(double d) { return float_to_f16(double_to_float_round_to_odd(d)); }
inline uint16_t double_to_bf16(double d) { return float_to_bf16(double_to_float_round_to_odd(d)); }

}  // namespace softmax_internal
