/* SPDX-License-Identifier: Apache-2.0 */
// Philox4x32-10 keep bytes as Highway vector code, shared by the keep-byte kernel
// (dropout_keep_bytes_highway.cpp) and the short-row dropout kernel (dropout_rows_highway.cpp),
// which draws a tile's keep bytes in one loop while the next tile's x is prefetched. Bit for bit
// dropout_keep() of backends/common/philox.h.
// Per-target code: included from a file that is compiled once per Highway target through
// hwy/foreach_target.h, so it uses the include-guard toggle Highway prescribes for -inl.h files.
//
// Layout: one group of 4 elements per 64-bit lane, its four 32-bit words in four vectors (so
// MulEven gives the full 32x32->64 products), several independent sets of vectors per step so that
// the multiplies of one hide the latency of another. Per round and set: two multiplies, two
// shifts and two three-way xors with the round keys, which are computed once per call; the first
// three rounds cost less (PhiloxUniformHead). Words are not masked back to 32 bits between
// rounds: MulEven reads only the low halves, and the high halves' garbage never reaches a low
// half. The keep decision is an integer compare of the word
// with dropout_word_threshold(p).
#if defined(SOFTMAX_CPU_HIGHWAY_PHILOX_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SOFTMAX_CPU_HIGHWAY_PHILOX_INL_H_
#undef SOFTMAX_CPU_HIGHWAY_PHILOX_INL_H_
#else
#define SOFTMAX_CPU_HIGHWAY_PHILOX_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>

HWY_BEFORE_NAMESPACE();
namespace softmax_internal {
namespace cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR

using D64 = hn::ScalableTag<uint64_t>;
using V64 = hn::Vec<D64>;

// The 32x32->64 product of the low halves of each lane (the high halves of a and b are ignored).
HWY_INLINE V64 MulLow32(const V64 a, const V64 b) {
  const hn::Repartition<uint32_t, D64> d32;
  return hn::MulEven(hn::BitCast(d32, a), hn::BitCast(d32, b));
}

// The four words of a Philox block per lane (the low 32 bits of each 64-bit lane are the word).
struct PhiloxBlock4 {
  V64 w0, w1, w2, w3;
};

constexpr uint32_t kPhiloxMul0 = 0xD2511F53u, kPhiloxMul1 = 0xCD9E8D57u;

HWY_INLINE void PhiloxRound(const V64 mul0, const V64 mul1, const V64 k0, const V64 k1, PhiloxBlock4& b) {
  const V64 p0 = MulLow32(mul0, b.w0);
  const V64 p1 = MulLow32(mul1, b.w2);
  b.w0 = hn::Xor3(hn::ShiftRight<32>(p1), b.w1, k0);
  b.w2 = hn::Xor3(hn::ShiftRight<32>(p0), b.w3, k1);
  b.w1 = p1;
  b.w3 = p0;
}

// Philox blocks per step: enough independent blocks to cover the multiply-shift-xor latency of
// a round (5 cycles on Zen 3 against 2 cycles of issue per block), and on AVX2 a few more than
// fit in registers: the compiler spills a little, which costs less than the latency it hides
// (keep bytes alone, AVX2, Zen 3, ns per element at phase 0 / phase 3: 3 blocks 0.67 / 1.25,
// 4 blocks 0.64 / 1.04, where a phase-3 step holds 2 vectors of groups and their blocks at the
// next counter). AVX-512's 32 registers hold six (Zen 5: 4 blocks 0.175 / 0.290, 6 blocks
// 0.148 / 0.256, 8 blocks 0.170 / 0.250, spilling at phase 0).
constexpr size_t kPhiloxSetsPerStep = HWY_TARGET <= HWY_AVX3 ? 6 : HWY_TARGET <= HWY_AVX2 ? 4 : 2;

// The first three rounds of a block whose counter is (lo64 = ctr_lo, hi64 = group) for groups
// that share the upper 32 bits `group_hi`: the words that come from ctr_lo and group_hi alone are
// the same in every lane, so they are worked out once, in scalar code, and the vector code only
// multiplies what depends on the group's low 32 bits (one product in rounds 1 and 2 instead of
// two). Names follow the round r and word j of the state after r rounds: w_r_j.
struct PhiloxUniformHead {
  V64 u1;  // w_1_0 = hi(mul1 * group_lo) ^ u1
  V64 u4;  // w_2_0 = lo(mul1 * group_lo) ^ u4
  V64 u6;  // w_2_2 = hi(mul0 * w_1_0) ^ u6
  V64 u7;  // w_3_0 = hi(mul1 * w_2_2) ^ u7

  void Set(uint64_t ctr_lo, uint32_t group_hi, const uint32_t* k0, const uint32_t* k1) {
    const D64 d;
    const uint64_t p = uint64_t{kPhiloxMul0} * static_cast<uint32_t>(ctr_lo);
    const uint32_t w_1_2 = static_cast<uint32_t>(p >> 32) ^ group_hi ^ k1[0];
    const uint32_t w_1_3 = static_cast<uint32_t>(p);
    const uint64_t q = uint64_t{kPhiloxMul1} * w_1_2;
    const uint32_t w_2_1 = static_cast<uint32_t>(q);
    u1 = hn::Set(d, uint64_t(static_cast<uint32_t>(ctr_lo >> 32) ^ k0[0]));
    u4 = hn::Set(d, uint64_t(static_cast<uint32_t>(q >> 32) ^ k0[1]));
    u6 = hn::Set(d, uint64_t(w_1_3 ^ k1[1]));
    u7 = hn::Set(d, uint64_t(w_2_1 ^ k0[2]));
  }
};

// Keep bytes of consecutive groups of one call (seed, offset, threshold), kGroupVectors vectors
// of groups per Step. kPhase = offset % 4: the phase at which curand_uniform4 starts reading its
// block, spilling into the block at the next counter when it is not 0. That block is
// (lo64 + 1, group): no other group reads it, so two blocks per group are unavoidable there;
// lo64 = offset / 4 < 2^62 never wraps, so the group number never takes a carry.
template <unsigned kPhase>
class PhiloxKeepStream {
 public:
  static constexpr size_t kGroupVectors = kPhase == 0 ? kPhiloxSetsPerStep : std::max<size_t>(1, kPhiloxSetsPerStep / 2);
  static size_t GroupsPerStep() { return kGroupVectors * hn::Lanes(D64()); }
  // A bound on GroupsPerStep() known at compile time, for buffers that take a whole step.
  static constexpr size_t kMaxGroupsPerStep = kGroupVectors * hn::MaxLanes(D64());

  // The stream starts at group `first_group` (flat elements 4 * first_group ...).
  PhiloxKeepStream(uint64_t seed, uint64_t offset, int64_t threshold, uint64_t first_group) {
    const D64 d;
    uint32_t a = static_cast<uint32_t>(seed), b = static_cast<uint32_t>(seed >> 32);
    for (int r = 0; r < 10; ++r) {
      key0_[r] = a;
      key1_[r] = b;
      k0_[r] = hn::Set(d, a);
      k1_[r] = hn::Set(d, b);
      a += 0x9E3779B9u;
      b += 0xBB67AE85u;
    }
    lo_ = offset >> 2;
    // keep = word > threshold = word >= threshold + 1, which lies in [0, 2^32 - 1] for p < 1.
    keep_from_ = hn::Set(hn::Repartition<uint32_t, D64>(), static_cast<uint32_t>(threshold + 1));
    // Group numbers advance by vector adds: Iota builds its vector through memory, which stalls
    // store forwarding when done every step.
    next_group_ = first_group;
    groups_ = hn::Iota(d, first_group);
    step_ = hn::Set(d, uint64_t(kGroupVectors * hn::Lanes(d)));
    SetHeads(static_cast<uint32_t>(first_group >> 32));
  }

  // Writes the keep bytes of the next GroupsPerStep() groups, 4 per group in element order, to
  // out[0 .. 4 * GroupsPerStep()). Meant for tight loops: the rounds need every vector register.
  HWY_INLINE void Step(uint8_t* out) {
    const D64 d;
    const size_t L = hn::Lanes(d);
    const uint64_t last = next_group_ + kGroupVectors * L - 1;
    PhiloxBlock4 sets[kBlocks];
    if (HWY_LIKELY(static_cast<uint32_t>(next_group_ >> 32) == group_hi_ && (last >> 32) == group_hi_)) {
      UniformHeadRounds(sets);
    } else if ((next_group_ >> 32) == (last >> 32)) {
      SetHeads(static_cast<uint32_t>(next_group_ >> 32));
      UniformHeadRounds(sets);
    } else {
      GeneralHeadRounds(sets);  // the groups of this step straddle a multiple of 2^32
    }
    const V64 mul0 = hn::Set(d, kPhiloxMul0), mul1 = hn::Set(d, kPhiloxMul1);
    HWY_UNROLL(7)
    for (int r = 3; r < 10; ++r) {
      HWY_UNROLL(8)
      for (size_t s = 0; s < kBlocks; ++s) PhiloxRound(mul0, mul1, k0_[r], k1_[r], sets[s]);
    }
    for (size_t v = 0; v < kGroupVectors; ++v)
      StoreKeepBytes(sets[v], sets[kPhase != 0 ? kGroupVectors + v : v], out + 4 * v * L);
    groups_ = hn::Add(groups_, step_);
    next_group_ += kGroupVectors * L;
  }

 private:
  static constexpr size_t kBlocks = kPhase == 0 ? kGroupVectors : 2 * kGroupVectors;

  void SetHeads(uint32_t group_hi) {
    group_hi_ = group_hi;
    head_a_.Set(lo_, group_hi, key0_, key1_);
    if (kPhase != 0) head_b_.Set(lo_ + 1, group_hi, key0_, key1_);
  }

  // Rounds 1..3 of every block of the step through the uniform heads (all its groups share
  // group_hi_). Blocks a and b of a group differ only in the low counter word, so round 1's
  // product of the group number serves both.
  HWY_INLINE void UniformHeadRounds(PhiloxBlock4* sets) const {
    const D64 d;
    const size_t L = hn::Lanes(d);
    const V64 mul0 = hn::Set(d, kPhiloxMul0), mul1 = hn::Set(d, kPhiloxMul1);
    HWY_UNROLL(8)
    for (size_t v = 0; v < kGroupVectors; ++v) {
      const V64 g = hn::Add(groups_, hn::Set(d, uint64_t(v * L)));
      const V64 m = MulLow32(mul1, g);
      const V64 h = hn::ShiftRight<32>(m);
      sets[v] = HeadRounds(head_a_, m, h, mul0, mul1);
      if (kPhase != 0) sets[kGroupVectors + v] = HeadRounds(head_b_, m, h, mul0, mul1);
    }
  }

  // Rounds 1..3 from the head constants; m = mul1 * group_lo, h = its high half.
  HWY_INLINE PhiloxBlock4 HeadRounds(const PhiloxUniformHead& head, const V64 m, const V64 h, const V64 mul0,
                                     const V64 mul1) const {
    const V64 w_1_0 = hn::Xor(h, head.u1);
    const V64 p0 = MulLow32(mul0, w_1_0);  // round 2
    const V64 w_2_0 = hn::Xor(m, head.u4);
    const V64 w_2_2 = hn::Xor(hn::ShiftRight<32>(p0), head.u6);
    const V64 q0 = MulLow32(mul0, w_2_0);  // round 3
    const V64 q1 = MulLow32(mul1, w_2_2);
    return PhiloxBlock4{hn::Xor(hn::ShiftRight<32>(q1), head.u7), q1, hn::Xor3(hn::ShiftRight<32>(q0), p0, k1_[2]),
                        q0};
  }

  // Rounds 1..3 of every block from the full counters.
  HWY_INLINE void GeneralHeadRounds(PhiloxBlock4* sets) const {
    const D64 d;
    const size_t L = hn::Lanes(d);
    for (size_t v = 0; v < kGroupVectors; ++v) {
      const V64 g = hn::Add(groups_, hn::Set(d, uint64_t(v * L)));
      sets[v] = Counters(lo_, g);
      if (kPhase != 0) sets[kGroupVectors + v] = Counters(lo_ + 1, g);
    }
    const V64 mul0 = hn::Set(d, kPhiloxMul0), mul1 = hn::Set(d, kPhiloxMul1);
    for (int r = 0; r < 3; ++r) {
      for (size_t s = 0; s < kBlocks; ++s) PhiloxRound(mul0, mul1, k0_[r], k1_[r], sets[s]);
    }
  }

  static HWY_INLINE PhiloxBlock4 Counters(uint64_t ctr_lo, V64 groups) {
    const D64 d;
    return PhiloxBlock4{hn::Set(d, ctr_lo & 0xffffffffu), hn::Set(d, ctr_lo >> 32), groups, hn::ShiftRight<32>(groups)};
  }

  // Word j (0..3) of each group's draw: words [kPhase, 4) of block a, then [0, kPhase) of b.
  static HWY_INLINE V64 Word(const PhiloxBlock4& a, const PhiloxBlock4& b, unsigned j) {
    const unsigned w = kPhase + j;
    const PhiloxBlock4& src = w < 4 ? a : b;
    switch (w % 4) {
      case 0:
        return src.w0;
      case 1:
        return src.w1;
      case 2:
        return src.w2;
      default:
        return src.w3;
    }
  }

  // The 4 keep bytes of each lane's group, in element order, to out[0 .. 4 * Lanes).
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  // The words gathered into element order by two-table permutes (words 0 and 1, and 2 and 3, of
  // each group side by side, then the pairs of groups 0-3 and of 4-7 interleaved), one unsigned
  // compare per 16 words, and the two masks turned into bytes by one masked move of ones: 9
  // instructions per 8 groups where the generic code below takes 18 (keep bytes alone, Zen 5,
  // 4 blocks a step: 0.193 -> 0.175 ns per element at phase 0, 0.313 -> 0.290 at phase 3).
  HWY_INLINE void StoreKeepBytes(const PhiloxBlock4& a, const PhiloxBlock4& b, uint8_t* out) const {
    const __m512i pairs = _mm512_set_epi32(30, 14, 28, 12, 26, 10, 24, 8, 22, 6, 20, 4, 18, 2, 16, 0);
    const __m512i w01 = _mm512_permutex2var_epi32(Word(a, b, 0).raw, pairs, Word(a, b, 1).raw);
    const __m512i w23 = _mm512_permutex2var_epi32(Word(a, b, 2).raw, pairs, Word(a, b, 3).raw);
    const __m512i groups_0_3 = _mm512_permutex2var_epi64(w01, _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0), w23);
    const __m512i groups_4_7 = _mm512_permutex2var_epi64(w01, _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4), w23);
    const __mmask32 kept = _mm512_kunpackw(_mm512_cmpge_epu32_mask(groups_4_7, keep_from_.raw),
                                           _mm512_cmpge_epu32_mask(groups_0_3, keep_from_.raw));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_maskz_mov_epi8(kept, _mm256_set1_epi8(1)));
  }
#else
  // Words 0 and 1 (2 and 3) of each group share one vector of u32, compared with the threshold at
  // once; the two mask vectors are then interleaved by 64-bit halves into element order (per
  // 128-bit block, which the demotions' per-block packing undoes) and narrowed to bytes.
  HWY_INLINE void StoreKeepBytes(const PhiloxBlock4& a, const PhiloxBlock4& b, uint8_t* out) const {
    const D64 d;
    const hn::Repartition<uint32_t, D64> d32;
    const hn::Repartition<int32_t, D64> di32;
    const hn::Repartition<int16_t, D64> di16;
    const hn::Rebind<int8_t, decltype(di16)> di8;
    const hn::RebindToUnsigned<decltype(di8)> du8;
    const auto w01 = hn::OddEven(hn::BitCast(d32, hn::ShiftLeft<32>(Word(a, b, 1))), hn::BitCast(d32, Word(a, b, 0)));
    const auto w23 = hn::OddEven(hn::BitCast(d32, hn::ShiftLeft<32>(Word(a, b, 3))), hn::BitCast(d32, Word(a, b, 2)));
    const V64 k01 = hn::BitCast(d, hn::VecFromMask(d32, hn::Eq(hn::Max(w01, keep_from_), w01)));
    const V64 k23 = hn::BitCast(d, hn::VecFromMask(d32, hn::Eq(hn::Max(w23, keep_from_), w23)));
    const auto i16 = hn::ReorderDemote2To(di16, hn::BitCast(di32, hn::InterleaveLower(d, k01, k23)),
                                          hn::BitCast(di32, hn::InterleaveUpper(d, k01, k23)));
    hn::StoreU(hn::And(hn::BitCast(du8, hn::DemoteTo(di8, i16)), hn::Set(du8, 1)), du8, out);
  }
#endif

  V64 k0_[10], k1_[10];
  uint32_t key0_[10], key1_[10];
  PhiloxUniformHead head_a_, head_b_;
  uint64_t lo_, next_group_;
  uint32_t group_hi_;
  V64 groups_, step_;
  hn::Vec<hn::Repartition<uint32_t, D64>> keep_from_;
};

#endif  // HWY_TARGET != HWY_SCALAR

}  // namespace HWY_NAMESPACE
}  // namespace cpu
}  // namespace softmax_internal
HWY_AFTER_NAMESPACE();

#endif  // SOFTMAX_CPU_HIGHWAY_PHILOX_INL_H_
