// SPDX-License-Identifier: Apache-2.0
// The host Philox4x32-10 in backends/common/philox.h against the Random123 known-answer vectors
// (kat_vectors, philox4x32_10), and the dropout keep decision against its definition through
// cuRAND's curand_init / curand_uniform4 semantics, spelled out here independently.
#include <gtest/gtest.h>

#include <cstdint>

#include "backends/common/philox.h"
#include "curand_reference.h"

namespace {

using softmax_internal::PhiloxBlock;
using softmax_internal::philox4x32_10;

void expect_block(PhiloxBlock ctr, uint32_t k0, uint32_t k1, const uint32_t (&want)[4]) {
  const PhiloxBlock got = philox4x32_10(ctr, k0, k1);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(got.v[i], want[i]) << "word " << i;
}

TEST(Philox, Random123KnownAnswers) {
  expect_block(PhiloxBlock{{0, 0, 0, 0}}, 0, 0, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
  expect_block(PhiloxBlock{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu, 0xffffffffu,
               {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu});
  expect_block(PhiloxBlock{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u, 0x299f31d0u,
               {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u});
}

TEST(Philox, KeepDecisionMatchesCurandDefinition) {
  const uint64_t max = ~uint64_t{0};
  for (const uint64_t seed : {uint64_t{0}, uint64_t{42}, uint64_t{0x123456789abcdefull}, max, max - 1}) {
    for (const uint64_t offset : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{5}, uint64_t{13},
                                  max - 3, max - 2, max}) {
      for (uint64_t i = 0; i < 64; ++i) {
        for (const float p : {0.1f, 0.5f, 0.9f}) {
          EXPECT_EQ(softmax_internal::dropout_keep(seed, offset, i, p), softmax_cpu_test::curand_keep(seed, offset, i, p))
              << "seed " << seed << " offset " << offset << " i " << i << " p " << p;
        }
      }
    }
  }
}

TEST(Philox, UniformsLieInHalfOpenUnitInterval) {
  EXPECT_GT(softmax_internal::philox_word_to_uniform(0), 0.0f);
  EXPECT_EQ(softmax_internal::philox_word_to_uniform(0xffffffffu), 1.0f);
  // p = 1 drops everything, p = 0 keeps everything, with no special case.
  EXPECT_FALSE(softmax_internal::dropout_keep(1, 0, 0, 1.0f) && softmax_internal::dropout_keep(1, 0, 1, 1.0f));
}

}  // namespace
