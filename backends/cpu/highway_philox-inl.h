/* SPDX-License-Identifier: Apache-2.0 */
// Philox4x32-10 keep bytes as Highway vector code, shared by the keep-byte kernel
// (dropout_keep_bytes_highway.cpp) and the dropout row kernels (vector_kernels_highway.cpp),
// which interleave it with their first pass over x so that the Philox arithmetic overlaps the
// memory traffic. Bit for bit dropout_keep() of backends/common/philox.h.
// Per-target code: included from a file that is compiled once per Highway target through
// hwy/foreach_target.h, so it uses the include-guard toggle Highway prescribes for -inl.h files.
//
// Layout: one group of 4 elements per 64-bit lane, its four 32-bit words in four vectors (so
// MulEven gives the full 32x32->64 products), several independent sets of vectors per step so that
// the multiplies of one hide the latency of another. Per round and set: two multiplies, two
// shifts and two three-way xors with the round keys, which are computed once per call. Words are
// not masked back to 32 bits between rounds: MulEven reads only the low halves, and the high
// halves' garbage never reaches a low half. The keep decision is an integer compare of the word
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

// The four words of a Philox block per lane (the low 32 bits of each 64-bit lane are the word).
struct PhiloxBlock4 {
  V64 w0, w1, w2, w3;
};

HWY_INLINE void PhiloxRound(const V64 mul0, const V64 mul1, const V64 k0, const V64 k1, PhiloxBlock4& b) {
  const hn::Repartition<uint32_t, D64> d32;
  const V64 p0 = hn::MulEven(hn::BitCast(d32, mul0), hn::BitCast(d32, b.w0));
  const V64 p1 = hn::MulEven(hn::BitCast(d32, mul1), hn::BitCast(d32, b.w2));
  b.w0 = hn::Xor3(hn::ShiftRight<32>(p1), b.w1, k0);
  b.w2 = hn::Xor3(hn::ShiftRight<32>(p0), b.w3, k1);
  b.w1 = p1;
  b.w3 = p0;
}

// Philox sets per step: enough independent work to cover the multiply-shift-xor latency of a
// round, few enough to stay in registers (measured on AVX2: 3 sets 0.77 ns per element, 2 sets
// 0.81, 4 sets 0.85 with spills; AVX-512 has twice the registers). At phase 0 every set is a
// vector of groups; otherwise each vector of groups takes two sets (its block at the next counter).
constexpr size_t kPhiloxSetsPerStep = HWY_TARGET <= HWY_AVX3 ? 4 : HWY_TARGET == HWY_AVX2 ? 3 : 2;

// Keep bytes of consecutive groups of one call (seed, offset, threshold), kGroupVectors vectors
// of groups per Step. kPhase = offset % 4: the phase at which curand_uniform4 starts reading its
// block, spilling into the block at the next counter when it is not 0.
template <unsigned kPhase>
class PhiloxKeepStream {
 public:
  static constexpr size_t kGroupVectors = kPhase == 0 ? kPhiloxSetsPerStep : std::max<size_t>(1, kPhiloxSetsPerStep / 2);
  // Rounds of kGroupVectors per Step: enough work per StepOutOfLine call that its cost (the
  // callers' live vectors saved and restored) stays small.
  static constexpr size_t kRepeats = kPhase == 0 ? 1 : 3;
  static size_t GroupsPerStep() { return kRepeats * kGroupVectors * hn::Lanes(D64()); }
  // A bound on GroupsPerStep() known at compile time, for buffers that take a whole step.
  static constexpr size_t kMaxGroupsPerStep = kRepeats * kGroupVectors * hn::MaxLanes(D64());

  // The stream starts at group `first_group` (flat elements 4 * first_group ...).
  PhiloxKeepStream(uint64_t seed, uint64_t offset, int64_t threshold, uint64_t first_group) {
    const D64 d;
    uint32_t a = static_cast<uint32_t>(seed), b = static_cast<uint32_t>(seed >> 32);
    for (int r = 0; r < 10; ++r) {
      k0_[r] = hn::Set(d, a);
      k1_[r] = hn::Set(d, b);
      a += 0x9E3779B9u;
      b += 0xBB67AE85u;
    }
    // Counter of group g: (lo64 = offset / 4, hi64 = g); at phase != 0 the draw continues in the
    // block at the 128-bit counter + 1, which carries into the group number if lo64 wraps.
    lo_ = offset >> 2;
    lo_next_ = lo_ + 1;
    carry_ = hn::Set(d, uint64_t(lo_next_ == 0 ? 1 : 0));
    // keep = word > threshold = word >= threshold + 1, which lies in [0, 2^32 - 1] for p < 1.
    keep_from_ = hn::Set(hn::Repartition<uint32_t, D64>(), static_cast<uint32_t>(threshold + 1));
    // Group numbers advance by vector adds: Iota builds its vector through memory, which stalls
    // store forwarding when done every step.
    groups_ = hn::Iota(d, first_group);
    step_ = hn::Set(d, uint64_t(kGroupVectors * hn::Lanes(d)));
  }

  // Writes the keep bytes of the next GroupsPerStep() groups, 4 per group in element order, to
  // out[0 .. 4 * GroupsPerStep()).
  HWY_INLINE void Step(uint8_t* out) {
    const size_t L = hn::Lanes(D64());
    for (size_t rep = 0; rep < kRepeats; ++rep) StepOnce(out + 4 * rep * kGroupVectors * L);
  }

  // Step as a call, for loops that do other vector work between steps: it needs every vector
  // register, and inlined into the row kernels it made the compiler spill their loop constants
  // (1.59 instead of 1.17 ns per element at 256 x 1024, AVX2); as a call, only what is live
  // across it is saved.
  HWY_NOINLINE void StepOutOfLine(uint8_t* out) { Step(out); }

 private:
  HWY_INLINE void StepOnce(uint8_t* out) {
    const D64 d;
    const size_t L = hn::Lanes(d);
    constexpr size_t kV = kGroupVectors, kSets = kPhase == 0 ? kV : 2 * kV;
    PhiloxBlock4 sets[kSets];
    for (size_t v = 0; v < kV; ++v) {
      const V64 g = hn::Add(groups_, hn::Set(d, uint64_t(v * L)));
      sets[v] = Counters(lo_, g);
      if (kPhase != 0) sets[kV + v] = Counters(lo_next_, hn::Add(g, carry_));
    }
    const V64 mul0 = hn::Set(d, 0xD2511F53u), mul1 = hn::Set(d, 0xCD9E8D57u);
    for (int r = 0; r < 10; ++r) {
      for (size_t s = 0; s < kSets; ++s) PhiloxRound(mul0, mul1, k0_[r], k1_[r], sets[s]);
    }
    for (size_t v = 0; v < kV; ++v) StoreKeepBytes(sets[v], sets[kPhase != 0 ? kV + v : v], out + 4 * v * L);
    groups_ = hn::Add(groups_, step_);
  }

  static HWY_INLINE PhiloxBlock4 Counters(uint64_t ctr_lo, V64 groups) {
    const D64 d;
    const V64 low32 = hn::Set(d, 0xffffffffu);
    return PhiloxBlock4{hn::Set(d, ctr_lo & 0xffffffffu), hn::Set(d, ctr_lo >> 32), hn::And(groups, low32),
                        hn::ShiftRight<32>(groups)};
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

  // The 4 keep bytes of each lane's group, in element order, to out[0 .. 4 * Lanes). Words 0 and 1
  // (2 and 3) of each group share one vector of u32, compared with the threshold at once; the
  // two mask vectors are then interleaved by 64-bit halves into element order (per 128-bit block,
  // which the demotions' per-block packing undoes) and narrowed to bytes.
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

  V64 k0_[10], k1_[10];
  uint64_t lo_, lo_next_;
  V64 carry_, groups_, step_;
  hn::Vec<hn::Repartition<uint32_t, D64>> keep_from_;
};

#endif  // HWY_TARGET != HWY_SCALAR

}  // namespace HWY_NAMESPACE
}  // namespace cpu
}  // namespace softmax_internal
HWY_AFTER_NAMESPACE();

#endif  // SOFTMAX_CPU_HIGHWAY_PHILOX_INL_H_
