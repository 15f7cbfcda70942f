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
// highway_exp-inl.h, tails / conversions / prefetch / output writes in highway_memory-inl.h, the
// row passes shared with softmax_dropout's kernels (dropout_rows_highway.cpp) in
// highway_rows-inl.h, and the dropout keep bytes in dropout_keep_bytes_highway.cpp.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/vector_kernels_highway.cpp"
#include <hwy/foreach_target.h>  // must come before highway.h

#include <hwy/cache_control.h>
#include <hwy/highway.h>

// Per-target helpers (re-included for every target by foreach_target.h).
#include "backends/cpu/highway_exp-inl.h"
#include "backends/cpu/highway_memory-inl.h"
#include "backends/cpu/highway_rows-inl.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "backends/cpu/dropout_keep_bytes.h"
#include "backends/cpu/dropout_rows_highway.h"
#include "backends/cpu/thread_scratch.h"
#include "backends/cpu/vector_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace softmax_internal {
namespace cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

HWY_INLINE bool AnyNaN(const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, x + i, sizeof v);
    if (std::isnan(v)) return true;
  }
  return false;
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

// ---- the table entries ---------------------------------------------------------------------

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
                                     highway_finish_dropout,
                                     highway_finish_dropout_stored,
                                     highway_short_rows_dropout,
                                     keep_bytes,
                                     keep_bytes_for,
                                     stream_fence};
  return kernels;
}

}  // namespace cpu
}  // namespace softmax_internal
#endif  // HWY_ONCE
