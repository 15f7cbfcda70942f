// SPDX-License-Identifier: Apache-2.0
// The vector kernels written with Google Highway: this file is compiled once per x86 target that
// Highway knows (SSSE3 ... AVX-512) via foreach_target.h, and HWY_DYNAMIC_DISPATCH picks the best
// one the running CPU supports. No -march flag is needed or used.
//
// Softmax on this class of machine is bound by exp, not memory, so the kernels are built around
// computing exp once per element while the row (or chunk) is still in L1:
//   max pass -> exp + store + sum pass (4 independent accumulators) -> scale pass (reciprocal
//   multiply) -> one write of the finished tile to y, with non-temporal stores for big outputs
//   so y's lines are not read from memory before being overwritten.
// Arithmetic contract shared with the other implementation: vector_kernels.h. The exp lives in
// highway_exp-inl.h, tails / conversions / prefetch / output writes in highway_memory-inl.h, and
// the dropout keep bytes in dropout_keep_bytes_highway.cpp.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/vector_kernels_highway.cpp"
#include <hwy/foreach_target.h>  // must come before highway.h

#include <hwy/cache_control.h>
#include <hwy/highway.h>

// Per-target helpers (re-included for every target by foreach_target.h).
#include "backends/cpu/highway_exp-inl.h"
#include "backends/cpu/highway_memory-inl.h"
#include "backends/cpu/highway_philox-inl.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>

#include "backends/cpu/dropout_keep_bytes.h"
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

HWY_INLINE bool AnyNaN(const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, x + i, sizeof v);
    if (std::isnan(v)) return true;
  }
  return false;
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

HWY_INLINE void ScaleInPlace(float* v, size_t n, float factor) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const VF f = hn::Set(d, factor);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Mul(hn::LoadU(d, v + i), f), d, v + i);
  if (i < n) StoreTail(d, hn::Mul(LoadTail(d, v + i, n - i, 0.0f), f), v + i, n - i);
}

// y = (x - max) - log_sum: two roundings, each relative to a small value, so large-magnitude
// inputs (1e4) keep full accuracy (x - (max + log_sum) would not).
HWY_INLINE void LogOut(const float* x, float* out, size_t n, float max, float log_sum) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const VF vm = hn::Set(d, max), vl = hn::Set(d, log_sum);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Sub(hn::Sub(hn::LoadU(d, x + i), vm), vl), d, out + i);
  if (i < n) StoreTail(d, hn::Sub(hn::Sub(LoadTail(d, x + i, n - i, 0.0f), vm), vl), out + i, n - i);
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

// ---- the table entries ---------------------------------------------------------------------

// log(sum) for log-softmax from the scaled sum ExpSum returns (unscaling is exact).
HWY_INLINE float LogOfScaledSum(float scaled_sum) {
  return static_cast<float>(std::log(double(scaled_sum * kExpUnscaleF32)));
}

// Rows are read in order, so the data `ahead` elements on (the next row, or 4 KiB for short
// rows) is what comes next.
HWY_INLINE size_t RowPrefetchDistance(size_t n) { return std::max<size_t>(n, 1024); }

// Softmax (or log-softmax) of one row of n <= kChunkElems fp32 values into `out`. A row with a
// NaN, a +inf, or only -inf has a NaN sum (see ExpNonPositive), so 1/sum and log(sum) are NaN and
// the whole row comes out NaN with no extra test.

HWY_INLINE void RowInL1(const float* x, float* out, size_t n, bool log_softmax) {
  const float max = RowMax(x, n, RowPrefetchDistance(n));
  if (log_softmax) {
    const float s = ExpSum<false>(x, n, max, nullptr);
    LogOut(x, out, n, max, LogOfScaledSum(s));
  } else {
    const float s = ExpSum<true>(x, n, max, out);
    ScaleInPlace(out, n, 1.0f / s);
  }
}

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

// Rows of at most kVecs vectors (up to 128 floats on AVX-512), held in registers from load to store: no
// loops, no re-reads, no tile pass. Tiny rows are dominated by per-row overhead and by the
// latency of the two cross-lane reductions, so this path keeps the instruction count per row
// small and lets out-of-order execution overlap consecutive rows. Masked loads and stores
// (which never touch memory outside the mask on AVX2/AVX-512) handle the partial last vector.
// With kStream, `out` is y itself, vector-aligned, and n == kVecs * N: the finished vectors
// go out with non-temporal stores.
template <size_t kVecs, bool kStream = false>
HWY_INLINE void RowInRegisters(const float* x, float* out, size_t n, bool log_softmax) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const auto last_mask = hn::FirstN(d, n - (kVecs - 1) * N);
  VF v[kVecs], m, e[kVecs];
  const float s = ExpsInRegisters<kVecs>(x, n, v, m, e);
  if (log_softmax) {
    const VF ls = hn::Set(d, LogOfScaledSum(s));
    for (size_t k = 0; k < kVecs; ++k) e[k] = hn::Sub(hn::Sub(v[k], m), ls);
  } else {
    const VF f = hn::Set(d, 1.0f / s);
    for (size_t k = 0; k < kVecs; ++k) e[k] = hn::Mul(e[k], f);
  }
  if (kStream) {
    for (size_t k = 0; k < kVecs; ++k) hn::Stream(e[k], d, out + k * N);
    return;
  }
  for (size_t k = 0; k + 1 < kVecs; ++k) hn::StoreU(e[k], d, out + k * N);
  hn::BlendedStore(e[kVecs - 1], last_mask, d, out + (kVecs - 1) * N);
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

// RowInL1 for an f32 row of y (4-byte aligned) in a big output: the e_i wait in `scratch` (L1)
// and the scale pass writes them straight to y, streamed (StreamTo), so the output costs one
// sweep and no separate copy.
HWY_INLINE void RowInL1Streamed(const float* x, float* y, float* scratch, size_t n, bool log_softmax) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const float max = RowMax(x, n, RowPrefetchDistance(n));
  if (log_softmax) {
    const float s = ExpSum<false>(x, n, max, nullptr);
    const VF vm = hn::Set(d, max), vl = hn::Set(d, LogOfScaledSum(s));
    StreamTo(y, n, [&](size_t i, size_t m) {
      return hn::Sub(hn::Sub(LoadUpTo(d, x + i, m), vm), vl);
    });
  } else {
    const float s = ExpSum<true>(x, n, max, scratch);
    const VF f = hn::Set(d, 1.0f / s);
    StreamTo(y, n, [&](size_t i, size_t m) {
      return hn::Mul(LoadUpTo(d, scratch + i, m), f);
    });
  }
}

// Softmax or log-softmax rows of up to kMaxVecs vectors into f32 y, 16 at a time (SixteenRows),
// where the target has the 16-lane shuffles; returns how many rows it finished (the first ones).
template <size_t kVecs, bool kStream>
HWY_INLINE int64_t SixteenRowsAtATime(const unsigned char* xb, unsigned char* yb, Dtypes dtype, int64_t rows,
                                      int64_t cols, bool log_softmax) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if constexpr (kVecs >= 1 && kVecs <= SixteenRows::kMaxVecs) {
    const int64_t groups = rows / 16;
    // 16-bit x goes through AsF32's buffer 16 groups at a time; f32 x is read in place.
    const int64_t batch = dtype.x == SOFTMAX_DTYPE_F32 ? groups : 16;
    for (int64_t g = 0; g < groups; g += batch) {
      const int64_t nb = std::min(batch, groups - g);
      const size_t first = size_t(g * 16 * cols);
      const float* xr = AsF32(xb + first * (dtype.x == SOFTMAX_DTYPE_F32 ? 4 : 2), dtype.x, size_t(nb * 16 * cols));
      float* yr = reinterpret_cast<float*>(yb) + first;
      if (log_softmax) {
        SixteenRows::Rows<kVecs, kStream, SixteenRows::Finish::kLog>(xr, yr, size_t(cols), nb);
      } else {
        SixteenRows::Rows<kVecs, kStream, SixteenRows::Finish::kSoftmax>(xr, yr, size_t(cols), nb);
      }
    }
    return groups * 16;
  }
#endif
  (void)xb, (void)yb, (void)dtype, (void)rows, (void)cols, (void)log_softmax;
  return 0;
}

// Whether short rows of f32 y are finished straight into y with non-temporal stores (StreamTo,
// RowInRegisters' kStream), by stream_policy.h's rule; the others in a streamed output take
// ordinary stores straight into y. (A tile of rows streamed out in one burst after their
// arithmetic stalled the core at the stores: on a 2-core Zen 5 EPYC 1000-4095 columns took
// 1.2-1.45x as long, softmax_dropout 1.1-1.35x.)
HWY_INLINE bool StreamRows(const void* y, int64_t cols, bool stream) {
  return stream && stream_rows_alone(y, cols, hn::Lanes(DF()) * sizeof(float), kForwardStreamRowsFrom);
}

// kVecs > 0: rows of at most kVecs vectors, in registers; 0: any row up to kChunkElems.
template <size_t kVecs>
HWY_INLINE void ShortRowsWith(const void* x, void* y, Dtypes dtype, int64_t rows, int64_t cols,
                              bool log_softmax, bool stream) {
  const size_t xsize = dtype.x == SOFTMAX_DTYPE_F32 ? 4 : 2, ysize = dtype.y == SOFTMAX_DTYPE_F32 ? 4 : 2;
  const unsigned char* xb = static_cast<const unsigned char*>(x);
  unsigned char* yb = static_cast<unsigned char*>(y);
  const bool y_f32 = dtype.y == SOFTMAX_DTYPE_F32 && reinterpret_cast<uintptr_t>(y) % sizeof(float) == 0;
  if (y_f32 && StreamRows(y, cols, stream)) {
    // A big output: finish rows straight into y, streamed (the same arithmetic as the other
    // branches; rows in registers are whole vectors of y here).
    float* scratch = kVecs > 0 ? nullptr : thread_scratch_floats(ScratchSlot::Output, size_t(cols));
    for (int64_t r = SixteenRowsAtATime<kVecs, true>(xb, yb, dtype, rows, cols, log_softmax); r < rows; ++r) {
      const float* xr = AsF32(xb + size_t(r * cols) * xsize, dtype.x, size_t(cols));
      float* yr = reinterpret_cast<float*>(yb + size_t(r * cols) * ysize);
      if (kVecs > 0) {
        RowInRegisters<kVecs == 0 ? 1 : kVecs, true>(xr, yr, size_t(cols), log_softmax);
      } else {
        RowInL1Streamed(xr, yr, scratch, size_t(cols), log_softmax);
      }
    }
    return;
  }
  if (y_f32) {
    // Output that stays in cache, or short rows off vector boundaries: finish each row straight
    // into y. In place is fine: every routine reads an element (or the whole row) before it
    // writes the same position.
    // (Rows 16 at a time only where y stays in cache: into a big y off those boundaries, with
    // ordinary stores, they ran up to 28% slower than one at a time at some lengths, faster at
    // others.)
    const int64_t done = stream ? 0 : SixteenRowsAtATime<kVecs, false>(xb, yb, dtype, rows, cols, log_softmax);
    for (int64_t r = done; r < rows; ++r) {
      const float* xr = AsF32(xb + size_t(r * cols) * xsize, dtype.x, size_t(cols));
      float* yr = reinterpret_cast<float*>(yb + size_t(r * cols) * ysize);
      if (kVecs > 0) {
        RowInRegisters<kVecs == 0 ? 1 : kVecs>(xr, yr, size_t(cols), log_softmax);
      } else {
        RowInL1(xr, yr, size_t(cols), log_softmax);
      }
    }
    return;
  }
  // Otherwise (16-bit y, or y off a 4-byte boundary) finish a tile of rows in L1 and write
  // it out in one sweep, converted to y's storage type. All rows of a tile are read before any
  // of them is written, so in place with equal element sizes is fine.
  const int64_t tile_rows = std::max<int64_t>(1, kTileElems / cols);
  float* tile = thread_scratch_floats(ScratchSlot::Output, size_t(tile_rows * cols));
  for (int64_t r0 = 0; r0 < rows; r0 += tile_rows) {
    const int64_t nr = std::min(tile_rows, rows - r0);
    for (int64_t r = 0; r < nr; ++r) {
      const float* xr = AsF32(xb + size_t((r0 + r) * cols) * xsize, dtype.x, size_t(cols));
      if (kVecs > 0) {
        RowInRegisters<kVecs == 0 ? 1 : kVecs>(xr, tile + r * cols, size_t(cols), log_softmax);
      } else {
        RowInL1(xr, tile + r * cols, size_t(cols), log_softmax);
      }
    }
    WriteTile(tile, yb + size_t(r0 * cols) * ysize, dtype.y, size_t(nr * cols), stream);
  }
}

void ShortRows(const void* x, void* y, Dtypes dtype, int64_t rows, int64_t cols,
               bool log_softmax, bool stream) {
  const int64_t N = int64_t(hn::Lanes(DF()));
  if (kMaskedF32Access && cols <= 8 * N) {
    if (cols <= N) return ShortRowsWith<1>(x, y, dtype, rows, cols, log_softmax, stream);
    if (cols <= 2 * N) return ShortRowsWith<2>(x, y, dtype, rows, cols, log_softmax, stream);
    if (cols <= 3 * N) return ShortRowsWith<3>(x, y, dtype, rows, cols, log_softmax, stream);
    if (cols <= 4 * N) return ShortRowsWith<4>(x, y, dtype, rows, cols, log_softmax, stream);
    if (cols <= 5 * N) return ShortRowsWith<5>(x, y, dtype, rows, cols, log_softmax, stream);
    if (cols <= 6 * N) return ShortRowsWith<6>(x, y, dtype, rows, cols, log_softmax, stream);
    if (cols <= 7 * N) return ShortRowsWith<7>(x, y, dtype, rows, cols, log_softmax, stream);
    return ShortRowsWith<8>(x, y, dtype, rows, cols, log_softmax, stream);
  }
  ShortRowsWith<0>(x, y, dtype, rows, cols, log_softmax, stream);
}

ChunkPartial ChunkPartialOf(const void* x, Dtypes dtype, int64_t n, void* exp_store) {
  const float* xc = AsF32(x, dtype.x, size_t(n));
  float* exp_out = static_cast<float*>(exp_store);
  // Chunks are visited in memory order: prefetch the next one (f32: xc is x itself).
  const float max = RowMax(xc, size_t(n), dtype.x == SOFTMAX_DTYPE_F32 ? size_t(n) : 0);
  if (max == -std::numeric_limits<float>::infinity()) {
    // All -inf (or -inf and NaN): contributes nothing to a finite row, but a NaN must still
    // poison the row, and exp(x - max) would be NaN for the -inf elements, so look directly.
    if (exp_out != nullptr) std::fill(exp_out, exp_out + n, 0.0f);
    return ChunkPartial{max, 0.0, AnyNaN(xc, size_t(n))};
  }
  const float s = exp_out != nullptr ? ExpSum<true>(xc, size_t(n), max, exp_out)
                                     : ExpSum<false>(xc, size_t(n), max, nullptr);
  // A NaN sum means a NaN or a +inf in the chunk: either way the row is NaN.
  return ChunkPartial{max, double(s * kExpUnscaleF32), std::isnan(s)};
}

// A streamed f32 chunk that starts on a vector boundary and is whole vectors long can be
// written to y directly with non-temporal stores, skipping the Output buffer and its copy.
HWY_INLINE bool StreamDirect(const void* y, softmax_dtype dtype, int64_t n, bool stream) {
  const size_t N = hn::Lanes(DF());
  return stream && dtype == SOFTMAX_DTYPE_F32 && size_t(n) % N == 0 &&
         reinterpret_cast<uintptr_t>(y) % (N * sizeof(float)) == 0;
}

void FinishRecompute(const void* x, void* y, Dtypes dtype, int64_t n, ChunkFinish f, bool stream) {
  const float* xc = AsF32(x, dtype.x, size_t(n));
  const DF d;
  const size_t N = hn::Lanes(d);
  const VF vs = hn::Set(d, static_cast<float>(f.shift));
  const ScaledFactor vf = MakeScaledFactor(d, static_cast<float>(f.factor));
  if (StreamDirect(y, dtype.y, n, stream)) {
    float* yf = static_cast<float*>(y);
    for (size_t i = 0; i < size_t(n); i += N)
      hn::Stream(ApplyFactor(vf, ExpScaled(d, hn::Sub(hn::LoadU(d, xc + i), vs))), d, yf + i);
    return;
  }
  float* out = ChunkOut(y, dtype.y, n, stream);
  size_t i = 0;
  for (; i + N <= size_t(n); i += N)
    hn::StoreU(ApplyFactor(vf, ExpScaled(d, hn::Sub(hn::LoadU(d, xc + i), vs))), d, out + i);
  if (i < size_t(n)) {
    const VF v = LoadTail(d, xc + i, size_t(n) - i, 0.0f);
    StoreTail(d, ApplyFactor(vf, ExpScaled(d, hn::Sub(v, vs))), out + i, size_t(n) - i);
  }
  FinishChunkOut(out, y, dtype.y, n, stream);
}

void FinishStored(const void* stored, void* y, Dtypes dtype, int64_t n, double factor, bool stream) {
  const float* e = static_cast<const float*>(stored);
  const DF d;
  const size_t N = hn::Lanes(d);
  const ScaledFactor vf = MakeScaledFactor(d, static_cast<float>(factor));
  if (StreamDirect(y, dtype.y, n, stream)) {
    float* yf = static_cast<float*>(y);
    for (size_t i = 0; i < size_t(n); i += N) hn::Stream(ApplyFactor(vf, hn::LoadU(d, e + i)), d, yf + i);
    return;
  }
  float* out = ChunkOut(y, dtype.y, n, stream);
  size_t i = 0;
  for (; i + N <= size_t(n); i += N) hn::StoreU(ApplyFactor(vf, hn::LoadU(d, e + i)), d, out + i);
  if (i < size_t(n)) StoreTail(d, ApplyFactor(vf, LoadTail(d, e + i, size_t(n) - i, 0.0f)), out + i, size_t(n) - i);
  FinishChunkOut(out, y, dtype.y, n, stream);
}

void FinishLog(const void* x, void* y, Dtypes dtype, int64_t n, double max_d, double log_sum_d,
               bool stream) {
  const float* xc = AsF32(x, dtype.x, size_t(n));
  const float max = static_cast<float>(max_d), log_sum = static_cast<float>(log_sum_d);
  if (StreamDirect(y, dtype.y, n, stream)) {
    const DF d;
    const size_t N = hn::Lanes(d);
    const VF vm = hn::Set(d, max), vl = hn::Set(d, log_sum);
    float* yf = static_cast<float*>(y);
    for (size_t i = 0; i < size_t(n); i += N) hn::Stream(hn::Sub(hn::Sub(hn::LoadU(d, xc + i), vm), vl), d, yf + i);
    return;
  }
  float* out = ChunkOut(y, dtype.y, n, stream);
  LogOut(xc, out, size_t(n), max, log_sum);
  FinishChunkOut(out, y, dtype.y, n, stream);
}

void FinishDropout(const void* x, void* y, Dtypes dtype, int64_t n, ChunkFinish f, const uint8_t* keep) {
  const float* xc = AsF32(x, dtype.x, size_t(n));
  float* out = thread_scratch_floats(ScratchSlot::Output, size_t(n));
  const DF d;
  const size_t N = hn::Lanes(d);
  const VF vs = hn::Set(d, static_cast<float>(f.shift));
  const ScaledFactor vf = MakeScaledFactor(d, static_cast<float>(f.factor));
  size_t i = 0;
  for (; i + N <= size_t(n); i += N) {
    const VF v = ApplyFactor(vf, ExpScaled(d, hn::Sub(hn::LoadU(d, xc + i), vs)));
    const auto kept = Kept(d, keep + i);
    hn::StoreU(hn::IfThenElseZero(kept, v), d, out + i);
  }
  if (i < size_t(n)) {
    const VF v = ApplyFactor(vf, ExpScaled(d, hn::Sub(LoadTail(d, xc + i, size_t(n) - i, 0.0f), vs)));
    StoreTail(d, hn::IfThenElseZero(KeptTail(d, keep + i, size_t(n) - i), v), out + i, size_t(n) - i);
  }
  WriteTile(out, y, dtype.y, size_t(n), false);
}

// ---- dropout ----------------------------------------------------------------------------------

// dst = keep ? e * f : 0 for n scaled e values (keep: 0/1 bytes), with ordinary stores or, when
// `stream`, through StreamTo (dst 4-byte aligned). dst may be e.
HWY_INLINE void ApplyKeep(const float* e, const uint8_t* keep, size_t n, const ScaledFactor& vf, float* dst,
                          bool stream) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const auto value = [&](size_t i, size_t m) {
    if (m == N) {
      return hn::IfThenElseZero(Kept(d, keep + i), ApplyFactor(vf, hn::LoadU(d, e + i)));
    }
    return hn::IfThenElseZero(KeptTail(d, keep + i, m), ApplyFactor(vf, LoadTail(d, e + i, m, 0.0f)));
  };
  if (stream) {
    StreamTo(dst, n, value);
    return;
  }
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(value(i, N), d, dst + i);
  if (i < n) StoreTail(d, value(i, n - i), dst + i, n - i);
}

#if HWY_TARGET != HWY_SCALAR
// Dropout of nr rows of cols <= kVecs vectors, each held in registers from load to store, with
// the arithmetic and sum order of RowInRegisters: out = keep ? e * f : 0 with f formed as
// chunk_finish forms it for a single chunk, (1 / S) * scale in double. Up to 16 vectors, twice
// softmax_rows' limit: past 8, softmax rows gained nothing in registers, where these rows (their
// keep bits applied in the same pass) took 15-30% less time than in L1 on a 2-core Zen 5 EPYC,
// spills to the stack and all. Row r is x (f32 after AsF32) at xb + r * cols elements, its keep
// bytes at keep + r * cols (read a whole vector past the row's last one: the caller leaves room),
// its output at out + r * cols, with non-temporal stores when kStream (out vector-aligned, cols
// whole vectors). With kGroups, rows of up to kMaxDropoutVecs vectors go 16 at a time where the
// target has SixteenRows (same bits).
template <size_t kVecs, bool kStream, bool kGroups>
HWY_NOINLINE void DropoutRowsInRegisters(const unsigned char* xb, Dtypes dtype, int64_t nr, int64_t cols,
                                         const uint8_t* keep, double scale, float* out) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const size_t n = size_t(cols), xsize = dtype.x == SOFTMAX_DTYPE_F32 ? 4 : 2;
  const auto last_mask = hn::FirstN(d, n - (kVecs - 1) * N);
  int64_t r = 0;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if constexpr (kGroups && kVecs <= SixteenRows::kMaxDropoutVecs) {
    const int64_t groups = nr / 16;
    if (groups > 0) {
      SixteenRows::Rows<kVecs, kStream, SixteenRows::Finish::kDropout>(
          AsF32(xb, dtype.x, size_t(groups * 16) * n), out, n, groups, keep, scale);
      r = groups * 16;
    }
  }
#endif
  for (; r < nr; ++r) {
    const float* x = AsF32(xb + size_t(r) * n * xsize, dtype.x, n);
    const uint8_t* kr = keep + size_t(r) * n;
    float* o = out + size_t(r) * n;
    VF v[kVecs], m, e[kVecs];
    const double s = double(ExpsInRegisters<kVecs>(x, n, v, m, e) * kExpUnscaleF32);
    const ScaledFactor f = MakeScaledFactor(d, static_cast<float>(1.0 / s * scale));
    for (size_t k = 0; k < kVecs; ++k) {
      const auto kept = Kept(d, kr + k * N);
      e[k] = hn::IfThenElseZero(kept, ApplyFactor(f, e[k]));
    }
    if (kStream) {
      for (size_t k = 0; k < kVecs; ++k) hn::Stream(e[k], d, o + k * N);
    } else {
      for (size_t k = 0; k + 1 < kVecs; ++k) hn::StoreU(e[k], d, o + k * N);
      hn::BlendedStore(e[kVecs - 1], last_mask, d, o + (kVecs - 1) * N);
    }
  }
}

using DropoutRowsFn = void (*)(const unsigned char*, Dtypes, int64_t, int64_t, const uint8_t*, double, float*);

template <bool kStream, bool kGroups>
DropoutRowsFn DropoutRowsInRegistersFor(int64_t cols) {
  const int64_t N = int64_t(hn::Lanes(DF()));
  if (!kMaskedF32Access || cols > 16 * N) return nullptr;
  switch ((cols + N - 1) / N) {
    case 1: return DropoutRowsInRegisters<1, kStream, kGroups>;
    case 2: return DropoutRowsInRegisters<2, kStream, kGroups>;
    case 3: return DropoutRowsInRegisters<3, kStream, kGroups>;
    case 4: return DropoutRowsInRegisters<4, kStream, kGroups>;
    case 5: return DropoutRowsInRegisters<5, kStream, kGroups>;
    case 6: return DropoutRowsInRegisters<6, kStream, kGroups>;
    case 7: return DropoutRowsInRegisters<7, kStream, kGroups>;
    case 8: return DropoutRowsInRegisters<8, kStream, kGroups>;
    case 9: return DropoutRowsInRegisters<9, kStream, kGroups>;
    case 10: return DropoutRowsInRegisters<10, kStream, kGroups>;
    case 11: return DropoutRowsInRegisters<11, kStream, kGroups>;
    case 12: return DropoutRowsInRegisters<12, kStream, kGroups>;
    case 13: return DropoutRowsInRegisters<13, kStream, kGroups>;
    case 14: return DropoutRowsInRegisters<14, kStream, kGroups>;
    case 15: return DropoutRowsInRegisters<15, kStream, kGroups>;
    default: return DropoutRowsInRegisters<16, kStream, kGroups>;
  }
}

// The keep bytes of one tile of rows, drawn a share at a time: Steps of the Philox stream into
// `out`, each followed by prefetches of a slice of the tile's x (into L2), so that the tile's
// reads run under the arithmetic that draws its bits.
template <unsigned kPhase>
class TileKeepDraw {
 public:
  TileKeepDraw(const DropoutRule& rule, uint64_t tile_first, int64_t elems, const char* x, size_t x_bytes,
               uint8_t* out)
      : stream_(rule.seed, rule.offset, rule.threshold, tile_first / 4), out_(out), pf_(x), pf_end_(x + x_bytes) {
    const size_t groups = (size_t(tile_first % 4) + size_t(elems) + 3) / 4;
    per_step_ = stream_.GroupsPerStep();
    steps_ = (groups + per_step_ - 1) / per_step_;
    pf_per_step_ = ((x_bytes / std::max<size_t>(1, steps_)) + 63) & ~size_t{63};
  }
  // Runs the steps of the first done/of of the tile's draw that have not run yet.
  HWY_INLINE void AdvanceTo(int64_t done, int64_t of) {
    const size_t upto = size_t((uint64_t(steps_) * uint64_t(done) + uint64_t(of) - 1) / uint64_t(of));
    for (; step_ < upto; ++step_) {
      stream_.Step(out_ + 4 * step_ * per_step_);
      for (size_t b = 0; b < pf_per_step_ && pf_ < pf_end_; b += 64, pf_ += 64) PrefetchL2(pf_);
    }
  }

 private:
  PhiloxKeepStream<kPhase> stream_;
  uint8_t* out_;
  const char* pf_;
  const char* pf_end_;
  size_t per_step_ = 0, steps_ = 0, step_ = 0, pf_per_step_ = 0;
};

// Dropout of tiles of rows, kPhase = offset % 4. Per row: the max, exp + store + sum into e,
// then dst = keep ? e * scale / sum : 0, the factor formed as chunk_finish forms it for a single
// chunk, (1 / S) * scale in double. The keep bytes of the next tile are drawn between the rows of
// this one (TileKeepDraw), with that tile's x prefetched as they go: the Philox arithmetic then
// runs beside this tile's memory traffic instead of in a phase of its own.
template <unsigned kPhase>
HWY_INLINE void ShortRowsDropoutPhase(const unsigned char* xb, unsigned char* yb, Dtypes dtype, int64_t rows,
                                      int64_t cols, uint64_t first, const DropoutRule& rule, uint8_t* mask,
                                      bool stream) {
  const size_t xsize = dtype.x == SOFTMAX_DTYPE_F32 ? 4 : 2, ysize = dtype.y == SOFTMAX_DTYPE_F32 ? 4 : 2;
  // Where a row's results go: straight into an f32 y, streamed where StreamRows says so (e
  // waiting in a scratch row), else with ordinary stores (e kept in y itself); or into a tile
  // converted to 16-bit y afterwards.
  const bool y_f32 = dtype.y == SOFTMAX_DTYPE_F32 && reinterpret_cast<uintptr_t>(yb) % sizeof(float) == 0;
  const bool direct_stream = y_f32 && StreamRows(yb, cols, stream);
  const bool direct = y_f32 && !direct_stream;
  const int64_t tile_rows = std::max<int64_t>(1, kTileElems / cols);
  // Rows that fit in registers (into y itself, or into the tile) go a whole tile per call, the
  // next tile's draw after them (taken in batches of 256-4096 elements between the draw's
  // shares, 32- and 128-column rows ran no faster); longer rows one at a time between shares.
  // Rows 16 at a time except into a big y off vector boundaries (ordinary stores), as in
  // ShortRowsWith.
  const DropoutRowsFn in_registers = direct_stream        ? DropoutRowsInRegistersFor<true, true>(cols)
                                     : direct && stream ? DropoutRowsInRegistersFor<false, false>(cols)
                                                        : DropoutRowsInRegistersFor<false, true>(cols);
  const int64_t batch = in_registers != nullptr ? tile_rows : 1;
  // Two tiles' keep bytes (the one being finished, the one being drawn), each from its first
  // whole group on, with room for the stream's last step and for the whole-vector read past the
  // last row in registers.
  const size_t keep_bytes = (size_t(tile_rows * cols) + 8 + 4 * PhiloxKeepStream<kPhase>::kMaxGroupsPerStep +
                             hn::MaxLanes(DF()) + 63) & ~size_t{63};
  uint8_t* keep_now = static_cast<uint8_t*>(thread_scratch(ScratchSlot::Keep, 2 * keep_bytes));
  uint8_t* keep_next = keep_now + keep_bytes;
  float* tile = y_f32 ? nullptr : thread_scratch_floats(ScratchSlot::Output, size_t(tile_rows * cols));
  float* row_e = direct_stream && in_registers == nullptr ? thread_scratch_floats(ScratchSlot::Exp, size_t(cols))
                                                          : nullptr;
  const auto draw_of = [&](int64_t r0, uint8_t* out) {
    const int64_t nr = std::min(tile_rows, rows - r0);
    return TileKeepDraw<kPhase>(rule, first + uint64_t(r0 * cols), nr * cols,
                                reinterpret_cast<const char*>(xb + size_t(r0 * cols) * xsize),
                                size_t(nr * cols) * xsize, out);
  };
  draw_of(0, keep_now).AdvanceTo(1, 1);
  for (int64_t r0 = 0; r0 < rows; r0 += tile_rows) {
    const int64_t nr = std::min(tile_rows, rows - r0);
    const size_t lead = size_t((first + uint64_t(r0 * cols)) % 4);  // keep_now[lead + j]: the tile's element j
    std::optional<TileKeepDraw<kPhase>> next;  // the next tile's draw, when there is one
    if (r0 + nr < rows) next.emplace(draw_of(r0 + nr, keep_next));
    for (int64_t b = 0; b < nr; b += batch) {
      const int64_t nb = std::min(batch, nr - b);
      if (in_registers != nullptr) {
        float* out = tile != nullptr ? tile + b * cols : reinterpret_cast<float*>(yb + size_t((r0 + b) * cols) * ysize);
        in_registers(xb + size_t((r0 + b) * cols) * xsize, dtype, nb, cols, keep_now + lead + size_t(b * cols),
                     rule.scale, out);
      } else {
        const float* xr = AsF32(xb + size_t((r0 + b) * cols) * xsize, dtype.x, size_t(cols));
        const uint8_t* kr = keep_now + lead + size_t(b * cols);
        const float max = RowMax(xr, size_t(cols));
        float* e;
        float* dst;
        if (direct || direct_stream) {
          dst = reinterpret_cast<float*>(yb + size_t((r0 + b) * cols) * ysize);
          e = direct ? dst : row_e;
        } else {
          dst = e = tile + b * cols;
        }
        const float s = ExpSum<true>(xr, size_t(cols), max, e);
        const double sum = double(s * kExpUnscaleF32);
        ApplyKeep(e, kr, size_t(cols), MakeScaledFactor(DF(), static_cast<float>(1.0 / sum * rule.scale)), dst,
                  direct_stream);
      }
      if (next) next->AdvanceTo(b + nb, nr);
    }
    if (mask != nullptr) std::memcpy(mask + r0 * cols, keep_now + lead, size_t(nr * cols));
    if (tile != nullptr) WriteTile(tile, yb + size_t(r0 * cols) * ysize, dtype.y, size_t(nr * cols), stream);
    std::swap(keep_now, keep_next);
  }
}
#endif

void ShortRowsDropout(const void* x, void* y, Dtypes dtype, int64_t rows, int64_t cols, uint64_t first,
                      const DropoutRule& rule, uint8_t* mask, bool stream) {
  const auto* xb = static_cast<const unsigned char*>(x);
  auto* yb = static_cast<unsigned char*>(y);
#if HWY_TARGET == HWY_SCALAR
  // No vector Philox here: the keep bytes of each tile first, then the rows.
  const size_t xsize = dtype.x == SOFTMAX_DTYPE_F32 ? 4 : 2, ysize = dtype.y == SOFTMAX_DTYPE_F32 ? 4 : 2;
  const int64_t tile_rows = std::max<int64_t>(1, kTileElems / cols);
  uint8_t* keep = static_cast<uint8_t*>(thread_scratch(ScratchSlot::Keep, size_t(tile_rows * cols)));
  float* tile = thread_scratch_floats(ScratchSlot::Output, size_t(tile_rows * cols));
  for (int64_t r0 = 0; r0 < rows; r0 += tile_rows) {
    const int64_t nr = std::min(tile_rows, rows - r0);
    dropout_keep_bytes_scalar(rule.seed, rule.offset, rule.threshold, first + uint64_t(r0 * cols), nr * cols, keep);
    if (mask != nullptr) std::memcpy(mask + r0 * cols, keep, size_t(nr * cols));
    for (int64_t r = 0; r < nr; ++r) {
      const float* xr = AsF32(xb + size_t((r0 + r) * cols) * xsize, dtype.x, size_t(cols));
      float* e = tile + r * cols;
      const float s = ExpSum<true>(xr, size_t(cols), RowMax(xr, size_t(cols)), e);
      const double sum = double(s * kExpUnscaleF32);
      ApplyKeep(e, keep + r * cols, size_t(cols), MakeScaledFactor(DF(), static_cast<float>(1.0 / sum * rule.scale)), e,
                false);
    }
    WriteTile(tile, yb + size_t(r0 * cols) * ysize, dtype.y, size_t(nr * cols), stream);
  }
#else
  switch (rule.offset & 3u) {
    case 0:
      return ShortRowsDropoutPhase<0>(xb, yb, dtype, rows, cols, first, rule, mask, stream);
    case 1:
      return ShortRowsDropoutPhase<1>(xb, yb, dtype, rows, cols, first, rule, mask, stream);
    case 2:
      return ShortRowsDropoutPhase<2>(xb, yb, dtype, rows, cols, first, rule, mask, stream);
    default:
      return ShortRowsDropoutPhase<3>(xb, yb, dtype, rows, cols, first, rule, mask, stream);
  }
#endif
}

void FinishDropoutStored(const void* stored, void* y, Dtypes dtype, int64_t n, double factor, const uint8_t* keep,
                         bool stream) {
  const float* e = static_cast<const float*>(stored);
  const ScaledFactor vf = MakeScaledFactor(DF(), static_cast<float>(factor));
  if (StreamDirect(y, dtype.y, n, stream)) {
    ApplyKeep(e, keep, size_t(n), vf, static_cast<float*>(y), true);
    return;
  }
  float* out = ChunkOut(y, dtype.y, n, stream);
  ApplyKeep(e, keep, size_t(n), vf, out, false);
  FinishChunkOut(out, y, dtype.y, n, stream);
}

void StreamFence() { hwy::FlushStream(); }

const char* ChosenTargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace cpu
}  // namespace softmax_internal
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace softmax_internal {
namespace cpu {

HWY_EXPORT(ShortRows);
HWY_EXPORT(ChunkPartialOf);
HWY_EXPORT(FinishRecompute);
HWY_EXPORT(FinishStored);
HWY_EXPORT(FinishLog);
HWY_EXPORT(FinishDropout);
HWY_EXPORT(FinishDropoutStored);
HWY_EXPORT(ShortRowsDropout);
HWY_EXPORT(StreamFence);
HWY_EXPORT(ChosenTargetName);

namespace {

void short_rows(const void* x, void* y, Dtypes dtype, int64_t rows, int64_t cols, bool log_softmax,
                bool stream) {
  HWY_DYNAMIC_DISPATCH(ShortRows)(x, y, dtype, rows, cols, log_softmax, stream);
}
ChunkPartial chunk_partial(const void* x, Dtypes dtype, int64_t n, void* exp_out) {
  return HWY_DYNAMIC_DISPATCH(ChunkPartialOf)(x, dtype, n, exp_out);
}
void finish_recompute(const void* x, void* y, Dtypes dtype, int64_t n, ChunkFinish f, bool stream) {
  HWY_DYNAMIC_DISPATCH(FinishRecompute)(x, y, dtype, n, f, stream);
}
void finish_stored(const void* e, void* y, Dtypes dtype, int64_t n, double factor, bool stream) {
  HWY_DYNAMIC_DISPATCH(FinishStored)(e, y, dtype, n, factor, stream);
}
void finish_log(const void* x, void* y, Dtypes dtype, int64_t n, double max, double log_sum, bool stream) {
  HWY_DYNAMIC_DISPATCH(FinishLog)(x, y, dtype, n, max, log_sum, stream);
}
void finish_dropout(const void* x, void* y, Dtypes dtype, int64_t n, ChunkFinish f, const uint8_t* keep) {
  HWY_DYNAMIC_DISPATCH(FinishDropout)(x, y, dtype, n, f, keep);
}
void finish_dropout_stored(const void* e, void* y, Dtypes dtype, int64_t n, double factor, const uint8_t* keep,
                           bool stream) {
  HWY_DYNAMIC_DISPATCH(FinishDropoutStored)(e, y, dtype, n, factor, keep, stream);
}
void short_rows_dropout(const void* x, void* y, Dtypes dtype, int64_t rows, int64_t cols, uint64_t first,
                        const DropoutRule& rule, uint8_t* mask, bool stream) {
  HWY_DYNAMIC_DISPATCH(ShortRowsDropout)(x, y, dtype, rows, cols, first, rule, mask, stream);
}
void keep_bytes(uint64_t seed, uint64_t offset, float p, uint64_t first, int64_t n, uint8_t* keep) {
  dropout_keep_bytes_highway(seed, offset, dropout_word_threshold(p), first, n, keep);
}
void keep_bytes_for(const DropoutRule& rule, uint64_t first, int64_t n, uint8_t* keep) {
  dropout_keep_bytes_highway(rule.seed, rule.offset, rule.threshold, first, n, keep);
}
void stream_fence() { HWY_DYNAMIC_DISPATCH(StreamFence)(); }

}  // namespace

const VectorKernels& highway_vector_kernels() {
  static const VectorKernels kernels{HWY_DYNAMIC_DISPATCH(ChosenTargetName)(),
                                     sizeof(float),
                                     short_rows,
                                     chunk_partial,
                                     finish_recompute,
                                     finish_stored,
                                     finish_log,
                                     finish_dropout,
                                     finish_dropout_stored,
                                     short_rows_dropout,
                                     keep_bytes,
                                     keep_bytes_for,
                                     stream_fence};
  return kernels;
}

}  // namespace cpu
}  // namespace softmax_internal
#endif  // HWY_ONCE
