// SPDX-License-Identifier: Apache-2.0
// The branch-free storage conversions of the backward kernels (backends/cpu/storage_convert.h)
// against the scalar definitions of backends/common/half_bits.h, bit for bit: every binary16
// and bfloat16 value widened, and every float upper half with low halves that sit on, next to
// and between the rounding boundaries narrowed.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "backends/common/half_bits.h"
#include "backends/cpu/storage_convert.h"

namespace {

namespace convert = softmax_internal::cpu::convert;
using softmax_internal::bits_float;
using softmax_internal::float_bits;

TEST(CpuStorageConvert, WideningEverySixteenBitValue) {
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const float f16 = convert::f16_to_f32(uint16_t(h)), f16_ref = softmax_internal::f16_to_float(uint16_t(h));
    const float bf16 = convert::bf16_to_f32(uint16_t(h)), bf16_ref = softmax_internal::bf16_to_float(uint16_t(h));
    if (std::isnan(f16_ref)) {
      ASSERT_TRUE(std::isnan(f16)) << std::hex << h;
    } else {
      ASSERT_EQ(float_bits(f16), float_bits(f16_ref)) << std::hex << h;
    }
    ASSERT_EQ(float_bits(bf16), float_bits(bf16_ref)) << std::hex << h;
  }
}

TEST(CpuStorageConvert, NarrowingRoundsToNearestEven) {
  // Low halves: exact, the f16 and bf16 halfway points and their neighbours, all ones, and a
  // few random ones drawn fresh each run.
  std::vector<uint32_t> lows = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x7fff, 0x8000, 0x8001, 0xffff};
  std::mt19937 rng(std::random_device{}());
  for (int i = 0; i < 4; ++i) lows.push_back(rng() & 0xffffu);
  for (uint32_t hi = 0; hi <= 0xffffu; ++hi) {
    for (const uint32_t lo : lows) {
      const uint32_t u = hi << 16 | lo;
      const float f = bits_float(u);
      ASSERT_EQ(convert::f32_to_f16(f), softmax_internal::float_to_f16(f)) << std::hex << u;
      ASSERT_EQ(convert::f32_to_bf16(f), softmax_internal::float_to_bf16(f)) << std::hex << u;
    }
  }
}

}  // namespace
