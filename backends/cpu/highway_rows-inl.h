/* SPDX-License-Identifier: Apache-2.0 */
// The row passes that the Highway softmax kernels (vector_kernels_highway.cpp) and dropout kernels
// (dropout_rows_highway.cpp) share: a row's max and exp-sum, rows held in registers (16 at a time
// on AVX-512, SixteenRows), and where a chunk's finished values go. Two translation units, so
// that a build spreads the per-target compiles of the two kernel sets over two cores.
// Per-target code: included from a file that is compiled once per Highway target through
// hwy/foreach_target.h, so it uses the include-guard toggle Highway prescribes for -inl.h files.
#if defined(SOFTMAX_CPU_HIGHWAY_ROWS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SOFTMAX_CPU_HIGHWAY_ROWS_INL_H_
#undef SOFTMAX_CPU_HIGHWAY_ROWS_INL_H_
#else
#define SOFTMAX_CPU_HIGHWAY_ROWS_INL_H_
#endif

#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "backends/cpu/highway_exp-inl.h"
#include "backends/cpu/highway_memory-inl.h"
#include "backends/cpu/stream_policy.h"
#include "backends/cpu/thread_scratch.h"
#include "backends/cpu/vector_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace softmax_internal {
namespace cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Output tile: rows are finished here, then written to y in one sweep (see WriteTile).
constexpr int64_t kTileElems = 8192;

// Max of a row or chunk with four independent accumulators. NaN elements may or may not show
// in the result (x86 max drops them in some operand orders): the exp pass catches them.
// `ahead` > 0: also prefetch the elements `ahead` past each one read.
HWY_INLINE float RowMax(const float* x, size_t n, size_t ahead = 0) {
  const DF d;
  const size_t N = hn::Lanes(d);
  VF m0 = hn::Set(d, -std::numeric_limits<float>::infinity()), m1 = m0, m2 = m0, m3 = m0;
  size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    if (ahead != 0) {
      for (size_t b = 0; b < 4 * N * sizeof(float); b += 64)
        PrefetchL2(reinterpret_cast<const char*>(x + i + ahead) + b);
    }
    m0 = hn::Max(m0, hn::LoadU(d, x + i));
    m1 = hn::Max(m1, hn::LoadU(d, x + i + N));
    m2 = hn::Max(m2, hn::LoadU(d, x + i + 2 * N));
    m3 = hn::Max(m3, hn::LoadU(d, x + i + 3 * N));
  }
  if (ahead != 0 && i < n) PrefetchSpan(x + i + ahead, n - i);
  for (; i + N <= n; i += N) m0 = hn::Max(m0, hn::LoadU(d, x + i));
  if (i < n) m1 = hn::Max(m1, LoadTail(d, x + i, n - i, -std::numeric_limits<float>::infinity()));
  return hn::GetLane(hn::MaxOfLanes(d, hn::Max(hn::Max(m0, m1), hn::Max(m2, m3))));
}

// Sum of the scaled e_i = exp(x_i - shift) * 2^64 (ExpScaled) with four independent
// accumulators (fixed tree: the result depends only on n and the data), optionally storing them.
// The sum stays scaled: 1 / sum is then the factor * 2^-64 that the scaled values need.
template <bool kStore>
HWY_INLINE float ExpSum(const float* x, size_t n, float shift, float* e) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const VF vs = hn::Set(d, shift);
  VF a0 = hn::Zero(d), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    const VF e0 = ExpScaled(d, hn::Sub(hn::LoadU(d, x + i), vs));
    const VF e1 = ExpScaled(d, hn::Sub(hn::LoadU(d, x + i + N), vs));
    const VF e2 = ExpScaled(d, hn::Sub(hn::LoadU(d, x + i + 2 * N), vs));
    const VF e3 = ExpScaled(d, hn::Sub(hn::LoadU(d, x + i + 3 * N), vs));
    if (kStore) {
      hn::StoreU(e0, d, e + i);
      hn::StoreU(e1, d, e + i + N);
      hn::StoreU(e2, d, e + i + 2 * N);
      hn::StoreU(e3, d, e + i + 3 * N);
    }
    a0 = hn::Add(a0, e0);
    a1 = hn::Add(a1, e1);
    a2 = hn::Add(a2, e2);
    a3 = hn::Add(a3, e3);
  }
  for (; i + N <= n; i += N) {
    const VF e0 = ExpScaled(d, hn::Sub(hn::LoadU(d, x + i), vs));
    if (kStore) hn::StoreU(e0, d, e + i);
    a0 = hn::Add(a0, e0);
  }
  if (i < n) {
    // -inf padding: each padded lane adds ExpScaled(-inf) < 2^-118 to a sum that holds
    // ExpScaled(0) = 2^64, which does not move it.
    const VF v = LoadTail(d, x + i, n - i, -std::numeric_limits<float>::infinity());
    const VF e0 = ExpScaled(d, hn::Sub(v, vs));
    if (kStore) StoreTail(d, e0, e + i, n - i);
    a1 = hn::Add(a1, e0);
  }
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
}

// Where a chunk's finished fp32 values go: straight into y when it is f32, 4-byte aligned and
// not streamed, else into the thread's Output buffer for WriteTile.
HWY_INLINE float* ChunkOut(void* y, softmax_dtype dtype, int64_t n, bool stream) {
  if (dtype == SOFTMAX_DTYPE_F32 && !stream && reinterpret_cast<uintptr_t>(y) % sizeof(float) == 0)
    return static_cast<float*>(y);
  return thread_scratch_floats(ScratchSlot::Output, size_t(n));
}

HWY_INLINE void FinishChunkOut(float* out, void* y, softmax_dtype dtype, int64_t n, bool stream) {
  if (out != y) WriteTile(out, y, dtype, size_t(n), stream);
}

// log(sum) for log-softmax from the scaled sum ExpSum returns (unscaling is exact).
HWY_INLINE float LogOfScaledSum(float scaled_sum) {
  return static_cast<float>(std::log(double(scaled_sum * kExpUnscaleF32)));
}

// Rows are read in order, so the data `ahead` elements on (the next row, or 4 KiB for short
// rows) is what comes next.
HWY_INLINE size_t RowPrefetchDistance(size_t n) { return std::max<size_t>(n, 1024); }

// The first half of RowInRegisters (and of the dropout's rows in registers): a row of n <= kVecs
// vectors loaded (the last one masked, padded with -inf), its max m in every lane, the scaled
// exps e (padding lanes zeroed) and their sum (added vector by vector, in order).
template <size_t kVecs>
HWY_INLINE float ExpsInRegisters(const float* x, size_t n, VF (&v)[kVecs], VF& m, VF (&e)[kVecs]) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const VF neg_inf = hn::Set(d, -std::numeric_limits<float>::infinity());
  const auto last_mask = hn::FirstN(d, n - (kVecs - 1) * N);  // 1..N valid lanes in the last vector
  PrefetchSpan(x + RowPrefetchDistance(n), n);
  for (size_t k = 0; k + 1 < kVecs; ++k) v[k] = hn::LoadU(d, x + k * N);
  v[kVecs - 1] = hn::IfThenElse(last_mask, hn::MaskedLoad(last_mask, d, x + (kVecs - 1) * N), neg_inf);
  m = v[0];
  for (size_t k = 1; k < kVecs; ++k) m = hn::Max(m, v[k]);
  m = hn::MaxOfLanes(d, m);
  VF sum = hn::Zero(d);
  for (size_t k = 0; k < kVecs; ++k) {
    e[k] = ExpScaled(d, hn::Sub(v[k], m));
    // The padding lanes hold ExpScaled(-inf), a tiny normal number; zeroed so that scaling them
    // below cannot produce a subnormal (slow on some CPUs). The sum does not change.
    if (k + 1 == kVecs) e[k] = hn::IfThenElseZero(last_mask, e[k]);
    sum = hn::Add(sum, e[k]);
  }
  return hn::GetLane(hn::SumOfLanes(d, sum));
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
// Softmax, log-softmax or dropout of 16 consecutive rows of n <= kVecs (1 to 8) vectors, with the
// arithmetic of RowInRegisters (DropoutRowsInRegisters) and the rows' cross-lane reductions taken
// together. Reducing one vector takes its lanes in halves (lane i with i + 8, then i + 4, i + 2,
// i + 1), four shuffles of a 16-lane vector and a dependent chain through them, twice per row;
// here each step of that tree shuffles two rows' vectors into one, so 16 rows cost 30 shuffles
// per reduction where they cost 64, and the pairs, hence the sums and every output bit, are the
// ones a row alone gets.
class SixteenRows {
 public:
  // Softmax and log-softmax rows of up to four vectors (64 f32 columns): up to eight measured
  // 25-30% less time in cache too, but 128-column rows into a big y 5% more. Dropout rows, with
  // more arithmetic per element, up to eight (128 columns): 65-128 columns 9-13% less time in
  // cache, 4-11% in memory.
  static constexpr size_t kMaxVecs = 4;
  static constexpr size_t kMaxDropoutVecs = 8;
  // The reduction of each of 16 vectors: vector r's lands at lane (r % 4) * 4 + r / 4.
  template <class Op>
  static HWY_INLINE __m512 Reduce(const __m512 (&v)[16], Op op) {
    __m512 a[8], b[4], c[2];
    for (int i = 0; i < 8; ++i) {  // lane i with i + 8: rows 2i, 2i + 1 side by side, 8 lanes each
      a[i] = op(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    }
    for (int j = 0; j < 4; ++j) {  // i with i + 4: a 128-bit block per row
      b[j] = op(_mm512_shuffle_f32x4(a[2 * j], a[2 * j + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                _mm512_shuffle_f32x4(a[2 * j], a[2 * j + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    }
    for (int k = 0; k < 2; ++k) {  // i with i + 2: two lanes per row
      c[k] = op(_mm512_shuffle_ps(b[2 * k], b[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                _mm512_shuffle_ps(b[2 * k], b[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    }
    return op(_mm512_shuffle_ps(c[0], c[1], _MM_SHUFFLE(2, 0, 2, 0)),  // i with i + 1
              _mm512_shuffle_ps(c[0], c[1], _MM_SHUFFLE(3, 1, 3, 1)));
  }
  // Row r's lane of a Reduce result, in every lane.
  static HWY_INLINE __m512 Broadcast(__m512 reduced, int r) {
    return _mm512_permutexvar_ps(_mm512_set1_epi32((r % 4) * 4 + r / 4), reduced);
  }

  // What a group's rows are finished with: y = e / sum (softmax), (x - max) - log(sum)
  // (log-softmax), or keep ? e * scale / sum : 0 (dropout, DropoutRowsInRegisters' factor).
  enum class Finish { kSoftmax, kLog, kDropout };

  // `groups` groups of 16 rows, row r at x + r * n, written to out + r * n (streamed: out
  // vector-aligned, n whole vectors); dropout's keep bytes of row r at keep + r * n, read a whole
  // vector past the row's end. A group's rows are written while the next group's exps are taken,
  // so that its stores (and, at big sizes, their memory traffic) run beside that arithmetic
  // rather than in a burst of their own.
  template <size_t kVecs, bool kStream, Finish kFinish>
  static HWY_INLINE void Rows(const float* x, float* out, size_t n, int64_t groups, const uint8_t* keep = nullptr,
                              double scale = 1.0) {
    static_assert(kVecs >= 1 && kVecs <= kMaxDropoutVecs, "rows of one to kMaxDropoutVecs vectors");
    const DF d;
    const size_t N = hn::Lanes(d);
    const auto last_mask = hn::FirstN(d, n - (kVecs - 1) * N);
    const VF neg_inf = hn::Set(d, -std::numeric_limits<float>::infinity());
    // Each group's exps (log-softmax: x - max), until they are written.
    HWY_ALIGN float held[2][16 * kVecs * 16];
    // The previous group's per-row finish, in Reduce's lanes: 1 / sum (log-softmax: log(sum));
    // dropout's two factors, first then second (ScaledFactor, the second 1 where one suffices).
    __m512 first = _mm512_setzero_ps(), second = _mm512_set1_ps(1.0f);
    // Row r of group g, whose values wait in held[g & 1] and whose finish is in first and second.
    const auto write = [&](int64_t g, int r) {
      const size_t row0 = (size_t(g) * 16 + size_t(r)) * n;
      const float* e = held[g & 1] + size_t(r) * kVecs * N;
      float* o = out + row0;
      const VF f{Broadcast(first, r)};
      const VF f2{kFinish == Finish::kDropout ? Broadcast(second, r) : second};
      for (size_t k = 0; k < kVecs; ++k) {
        const VF held_k = hn::Load(d, e + k * N);
        VF v;
        if constexpr (kFinish == Finish::kLog) {
          v = hn::Sub(held_k, f);
        } else if constexpr (kFinish == Finish::kSoftmax) {
          v = hn::Mul(held_k, f);
        } else {
          v = hn::IfThenElseZero(Kept(d, keep + row0 + k * N), hn::Mul(hn::Mul(held_k, f), f2));
        }
        if (kStream) {
          hn::Stream(v, d, o + k * N);
        } else if (k + 1 < kVecs) {
          hn::StoreU(v, d, o + k * N);
        } else {
          hn::BlendedStore(v, last_mask, d, o + k * N);
        }
      }
    };
    for (int64_t g = 0; g < groups; ++g) {
      const float* xg = x + size_t(g) * 16 * n;
      float* e = held[g & 1];
      const auto load = [&](int r, size_t k) {
        const float* p = xg + size_t(r) * n + k * N;
        return k + 1 < kVecs ? hn::LoadU(d, p) : hn::IfThenElse(last_mask, hn::MaskedLoad(last_mask, d, p), neg_inf);
      };
      __m512 part[16];
      for (int r = 0; r < 16; ++r) {
        VF m = load(r, 0);
        for (size_t k = 1; k < kVecs; ++k) m = hn::Max(m, load(r, k));
        part[r] = m.raw;
      }
      const __m512 maxes = Reduce(part, [](__m512 p, __m512 q) { return _mm512_max_ps(p, q); });
      for (int r = 0; r < 16; ++r) {
        const VF m{Broadcast(maxes, r)};
        VF sum = hn::Zero(d);
        for (size_t k = 0; k < kVecs; ++k) {
          const VF shifted = hn::Sub(load(r, k), m);
          VF ek = ExpScaled(d, shifted);
          if (k + 1 == kVecs) ek = hn::IfThenElseZero(last_mask, ek);
          sum = hn::Add(sum, ek);
          hn::Store(kFinish == Finish::kLog ? shifted : ek, d, e + (size_t(r) * kVecs + k) * N);
        }
        part[r] = sum.raw;
        PrefetchSpan(xg + std::max<size_t>(16 * n, 2048) + size_t(r) * n, n);
        if (g > 0) write(g - 1, r);
      }
      const __m512 sums = Reduce(part, [](__m512 p, __m512 q) { return _mm512_add_ps(p, q); });
      if constexpr (kFinish == Finish::kSoftmax) {
        first = _mm512_div_ps(_mm512_set1_ps(1.0f), sums);
      } else {
        HWY_ALIGN float lane[16], lane2[16];
        _mm512_store_ps(lane, sums);
        for (int j = 0; j < 16; ++j) {
          if constexpr (kFinish == Finish::kLog) {
            lane[j] = LogOfScaledSum(lane[j]);
          } else {
            const float factor = static_cast<float>(1.0 / double(lane[j] * kExpUnscaleF32) * scale);
            const bool once = exp_factor_fits_once(factor);
            lane[j] = once ? factor * kExpUnscaleF32 : kExpUnscaleF32;
            lane2[j] = once ? 1.0f : factor;
          }
        }
        first = _mm512_load_ps(lane);
        if constexpr (kFinish == Finish::kDropout) second = _mm512_load_ps(lane2);
      }
    }
    for (int r = 0; r < 16; ++r) write(groups - 1, r);
  }
};
#endif

// Whether short rows of f32 y are finished straight into y with non-temporal stores (StreamTo,
// RowInRegisters' kStream), by stream_policy.h's rule; the others in a streamed output take
// ordinary stores straight into y. (A tile of rows streamed out in one burst after their
// arithmetic stalled the core at the stores: on a 2-core Zen 5 EPYC 1000-4095 columns took
// 1.2-1.45x as long, softmax_dropout 1.1-1.35x.)
HWY_INLINE bool StreamRows(const void* y, int64_t cols, bool stream) {
  return stream && stream_rows_alone(y, cols, hn::Lanes(DF()) * sizeof(float), kForwardStreamRowsFrom);
}

// A streamed f32 chunk that starts on a vector boundary and is whole vectors long can be
// written to y directly with non-temporal stores, skipping the Output buffer and its copy.
HWY_INLINE bool StreamDirect(const void* y, softmax_dtype dtype, int64_t n, bool stream) {
  const size_t N = hn::Lanes(DF());
  return stream && dtype == SOFTMAX_DTYPE_F32 && size_t(n) % N == 0 &&
         reinterpret_cast<uintptr_t>(y) % (N * sizeof(float)) == 0;
}

}  // namespace HWY_NAMESPACE
}  // namespace cpu
}  // namespace softmax_internal
HWY_AFTER_NAMESPACE();

#endif  // SOFTMAX_CPU_HIGHWAY_ROWS_INL_H_ toggle
