// SPDX-License-Identifier: Apache-2.0
// softmax_dropout's vector kernels written with Google Highway, compiled once per x86 target via
// foreach_target.h like vector_kernels_highway.cpp, whose table lists them
// (dropout_rows_highway.h): short rows with their keep bytes drawn a tile ahead, and the chunk
// finishes of long rows. Row passes shared with softmax: highway_rows-inl.h; the Philox keep
// bytes: highway_philox-inl.h.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/dropout_rows_highway.cpp"
#include <hwy/foreach_target.h>  // must come before highway.h

#include <hwy/highway.h>

// Per-target helpers (re-included for every target by foreach_target.h).
#include "backends/cpu/highway_exp-inl.h"
#include "backends/cpu/highway_memory-inl.h"
#include "backends/cpu/highway_philox-inl.h"
#include "backends/cpu/highway_rows-inl.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>

#include "backends/cpu/dropout_keep_bytes.h"
#include "backends/cpu/dropout_rows_highway.h"
#include "backends/cpu/thread_scratch.h"
#include "backends/cpu/vector_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace softmax_internal {
namespace cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

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

// The chunk finishes of long rows: y = keep ? e * factor : 0, with e recomputed from x or taken
// from chunk_partial's stored values.
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

}  // namespace HWY_NAMESPACE
}  // namespace cpu
}  // namespace softmax_internal
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace softmax_internal {
namespace cpu {

HWY_EXPORT(FinishDropout);
HWY_EXPORT(FinishDropoutStored);
HWY_EXPORT(ShortRowsDropout);

void highway_finish_dropout(const void* x, void* y, Dtypes dtype, int64_t n, ChunkFinish f, const uint8_t* keep) {
  HWY_DYNAMIC_DISPATCH(FinishDropout)(x, y, dtype, n, f, keep);
}
void highway_finish_dropout_stored(const void* e, void* y, Dtypes dtype, int64_t n, double factor,
                                   const uint8_t* keep, bool stream) {
  HWY_DYNAMIC_DISPATCH(FinishDropoutStored)(e, y, dtype, n, factor, keep, stream);
}
void highway_short_rows_dropout(const void* x, void* y, Dtypes dtype, int64_t rows, int64_t cols, uint64_t first,
                                const DropoutRule& rule, uint8_t* mask, bool stream) {
  HWY_DYNAMIC_DISPATCH(ShortRowsDropout)(x, y, dtype, rows, cols, first, rule, mask, stream);
}

}  // namespace cpu
}  // namespace softmax_internal
#endif  // HWY_ONCE
