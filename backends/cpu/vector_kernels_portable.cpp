// The portable vector kernels: plain C++ loops shaped so that GCC auto-vectorises them (fixed
// blocks of kLanes independent accumulators, branch-free exp), compiled three times with
// target_clones (x86-64-v4 = AVX-512, x86-64-v3 = AVX2+FMA, baseline SSE2) and picked by the
// loader at run time through an ifunc.
//
// Why this exists next to the Highway kernels: Highway is an optional build dependency, and
// machines without libhwy-dev (the GPU build machine among them) must still get a correct CPU
// backend that is not hopelessly slow. It follows the same arithmetic contract
// (vector_kernels.h) and the same exp algorithm as the Highway kernels; it is simply less
// tuned (no non-temporal stores, compiler-chosen instruction scheduling).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "backends/common/half_bits.h"
#include "backends/cpu/dropout_keep_bytes.h"
#include "backends/cpu/exp_range.h"
#include "backends/cpu/thread_scratch.h"
#include "backends/cpu/vector_kernels.h"

// GCC 11+ knows the x86-64-v3/v4 levels; sanitizer builds use the one baseline version (speed
// does not matter there and ifunc resolvers are best kept out of instrumented code), and so does
// clang, whose target_clones support differs.
#if defined(__x86_64__) && defined(__GNUC__) && __GNUC__ >= 11 && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define SOFTMAX_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SOFTMAX_CPU_CLONES
#endif
#define SOFTMAX_CPU_INLINE inline __attribute__((always_inline))

namespace softmax_internal {
namespace cpu {
namespace {

// Independent accumulators per reduction: 32 floats = two AVX-512 or four AVX2 vectors, enough to
// hide the add latency, and a fixed tree so that sums depend only on the data and n.
constexpr size_t kLanes = 32;
constexpr int64_t kTileElems = 8192;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

SOFTMAX_CPU_INLINE uint32_t bits_of(float f) { return __builtin_bit_cast(uint32_t, f); }
SOFTMAX_CPU_INLINE float float_of(uint32_t u) { return __builtin_bit_cast(float, u); }

// exp(x) * 2^64 for x in [-inf, 0]: the same steps and constants as the Highway kernels'
// ExpScaled (see there for why each step is what it is, and why NaN must propagate) and the
// same range handling (exp_range.h).
SOFTMAX_CPU_INLINE float exp_scaled(float x) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  x = x < kExpClampF32 ? kExpClampF32 : x;  // keeps NaN
  const float t = x * 1.44269504088896341f + kMagic;
  const float n = t - kMagic;
  float r = x - n * 0.693145751953125f;
  r = r - n * 1.428606820309417232e-06f;
  float p = 0.00831252709031105f * r + 0.041890114545822144f;
  p = p * r + 0.16667114198207855f;
  p = p * r + 0.499992311000824f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const uint32_t scale = (bits_of(t) + uint32_t(127 + kExpScaleLog2)) << 23;
  return p * float_of(scale);
}

SOFTMAX_CPU_INLINE float load_f(const float* p, size_t i) {
  float v;
  std::memcpy(&v, p + i, sizeof v);  // the caller's f32 pointer need not be 4-byte aligned
  return v;
}

SOFTMAX_CPU_INLINE float tree_sum(const float* a) {
  float t[kLanes];
  for (size_t j = 0; j < kLanes; ++j) t[j] = a[j];
  for (size_t w = kLanes / 2; w >= 1; w /= 2)
    for (size_t j = 0; j < w; ++j) t[j] += t[j + w];
  return t[0];
}

SOFTMAX_CPU_INLINE float row_max(const float* x, size_t n) {
  float m[kLanes];
  for (size_t j = 0; j < kLanes; ++j) m[j] = kNegInf;
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) {
      const float v = load_f(x, i + j);
      m[j] = v > m[j] ? v : m[j];
    }
  }
  for (size_t j = 0; i + j < n; ++j) {
    const float v = load_f(x, i + j);
    m[j] = v > m[j] ? v : m[j];
  }
  float mx = kNegInf;
  for (size_t j = 0; j < kLanes; ++j) mx = m[j] > mx ? m[j] : mx;
  return mx;
}

SOFTMAX_CPU_INLINE bool any_nan(const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (std::isnan(load_f(x, i))) return true;
  return false;
}

template <bool kStore>
SOFTMAX_CPU_INLINE float exp_sum(const float* x, size_t n, float shift, float* e) {
  float a[kLanes];
  for (size_t j = 0; j < kLanes; ++j) a[j] = 0.0f;
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) {
      const float v = exp_scaled(load_f(x, i + j) - shift);
      if (kStore) e[i + j] = v;
      a[j] += v;
    }
  }
  for (size_t j = 0; i + j < n; ++j) {
    const float v = exp_scaled(load_f(x, i + j) - shift);
    if (kStore) e[i + j] = v;
    a[j] += v;
  }
  return tree_sum(a);
}

// y = e * factor for a scaled e (exp_range.h): one rounding when factor * 2^-64 is normal.
struct ScaledFactor {
  float first, second;
  bool two_steps;
  explicit ScaledFactor(float factor)
      : first(exp_factor_fits_once(factor) ? factor * kExpUnscaleF32 : kExpUnscaleF32),
        second(factor),
        two_steps(!exp_factor_fits_once(factor)) {}
  SOFTMAX_CPU_INLINE float apply(float e) const { return two_steps ? e * first * second : e * first; }
};

SOFTMAX_CPU_INLINE const float* as_f32(const void* x, softmax_dtype dtype, size_t n) {
  if (dtype == SOFTMAX_DTYPE_F32) return static_cast<const float*>(x);
  float* buf = thread_scratch_floats(ScratchSlot::Input, n);
  const unsigned char* p = static_cast<const unsigned char*>(x);
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    buf[i] = dtype == SOFTMAX_DTYPE_F16 ? f16_to_float(h) : bf16_to_float(h);
  }
  return buf;
}

SOFTMAX_CPU_INLINE void write_out(const float* src, void* dst, softmax_dtype dtype, size_t n) {
  if (dtype == SOFTMAX_DTYPE_F32) {
    std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  unsigned char* p = static_cast<unsigned char*>(dst);
  for (size_t i = 0; i < n; ++i) {
    const uint16_t h = dtype == SOFTMAX_DTYPE_F16 ? float_to_f16(src[i]) : float_to_bf16(src[i]);
    std::memcpy(p + 2 * i, &h, 2);
  }
}

// NaN, +inf or all -inf make the sum NaN (exp propagates NaN), hence the whole row NaN.
SOFTMAX_CPU_INLINE void row_in_l1(const float* x, float* out, size_t n, bool log_softmax) {
  const float max = row_max(x, n);
  if (log_softmax) {
    const float s = exp_sum<false>(x, n, max, nullptr);
    const float ls = static_cast<float>(std::log(double(s * kExpUnscaleF32)));
    for (size_t i = 0; i < n; ++i) out[i] = (load_f(x, i) - max) - ls;
  } else {
    const float s = exp_sum<true>(x, n, max, out);
    const float f = 1.0f / s;
    for (size_t i = 0; i < n; ++i) out[i] *= f;
  }
}

SOFTMAX_CPU_CLONES
void short_rows(const void* x, void* y, softmax_dtype dtype, int64_t rows, int64_t cols,
                bool log_softmax, bool /*stream*/) {
  const size_t esize = dtype == SOFTMAX_DTYPE_F32 ? 4 : 2;
  if (dtype == SOFTMAX_DTYPE_F32 && reinterpret_cast<uintptr_t>(y) % sizeof(float) == 0) {
    // f32: finish rows straight into y (each routine reads an element before writing its
    // position, so in place is fine).
    for (int64_t r = 0; r < rows; ++r) {
      row_in_l1(static_cast<const float*>(x) + r * cols, static_cast<float*>(y) + r * cols, size_t(cols),
                log_softmax);
    }
    return;
  }
  const int64_t tile_rows = std::max<int64_t>(1, kTileElems / cols);
  float* tile = thread_scratch_floats(ScratchSlot::Output, size_t(tile_rows * cols));
  const unsigned char* xb = static_cast<const unsigned char*>(x);
  unsigned char* yb = static_cast<unsigned char*>(y);
  for (int64_t r0 = 0; r0 < rows; r0 += tile_rows) {
    const int64_t nr = std::min(tile_rows, rows - r0);
    for (int64_t r = 0; r < nr; ++r) {
      const float* xr = as_f32(xb + size_t((r0 + r) * cols) * esize, dtype, size_t(cols));
      row_in_l1(xr, tile + r * cols, size_t(cols), log_softmax);
    }
    write_out(tile, yb + size_t(r0 * cols) * esize, dtype, size_t(nr * cols));
  }
}

SOFTMAX_CPU_CLONES
ChunkPartial chunk_partial(const void* x, softmax_dtype dtype, int64_t n, float* exp_out) {
  const float* xc = as_f32(x, dtype, size_t(n));
  const float max = row_max(xc, size_t(n));
  if (max == kNegInf) {  // all -inf, possibly with NaN: see the Highway kernels
    if (exp_out != nullptr) std::fill(exp_out, exp_out + n, 0.0f);
    return ChunkPartial{max, 0.0f, any_nan(xc, size_t(n))};
  }
  const float s = exp_out != nullptr ? exp_sum<true>(xc, size_t(n), max, exp_out)
                                     : exp_sum<false>(xc, size_t(n), max, nullptr);
  return ChunkPartial{max, s * kExpUnscaleF32, std::isnan(s)};
}

SOFTMAX_CPU_CLONES
void finish_recompute(const void* x, void* y, softmax_dtype dtype, int64_t n, ChunkFinish f,
                      bool /*stream*/) {
  const float* xc = as_f32(x, dtype, size_t(n));
  float* out = thread_scratch_floats(ScratchSlot::Output, size_t(n));
  const ScaledFactor sf(f.factor);
  for (int64_t i = 0; i < n; ++i) out[i] = sf.apply(exp_scaled(load_f(xc, i) - f.shift));
  write_out(out, y, dtype, size_t(n));
}

SOFTMAX_CPU_CLONES
void finish_stored(const float* e, void* y, softmax_dtype dtype, int64_t n, float factor,
                   bool /*stream*/) {
  float* out = thread_scratch_floats(ScratchSlot::Output, size_t(n));
  const ScaledFactor sf(factor);
  for (int64_t i = 0; i < n; ++i) out[i] = sf.apply(e[i]);
  write_out(out, y, dtype, size_t(n));
}

SOFTMAX_CPU_CLONES
void finish_log(const void* x, void* y, softmax_dtype dtype, int64_t n, float max, float log_sum,
                bool /*stream*/) {
  const float* xc = as_f32(x, dtype, size_t(n));
  float* out = thread_scratch_floats(ScratchSlot::Output, size_t(n));
  for (int64_t i = 0; i < n; ++i) out[i] = (load_f(xc, i) - max) - log_sum;
  write_out(out, y, dtype, size_t(n));
}

SOFTMAX_CPU_CLONES
void finish_dropout(const void* x, void* y, softmax_dtype dtype, int64_t n, ChunkFinish f,
                    const uint8_t* keep) {
  const float* xc = as_f32(x, dtype, size_t(n));
  float* out = thread_scratch_floats(ScratchSlot::Output, size_t(n));
  const ScaledFactor sf(f.factor);
  for (int64_t i = 0; i < n; ++i) {
    const float v = sf.apply(exp_scaled(load_f(xc, i) - f.shift));
    out[i] = keep[i] ? v : 0.0f;
  }
  write_out(out, y, dtype, size_t(n));
}

// Ordinary stores only: nothing to fence.
void stream_fence() {}

}  // namespace

const VectorKernels& portable_vector_kernels() {
  static const VectorKernels kernels{"portable (target_clones)", short_rows, chunk_partial,
                                     finish_recompute, finish_stored, finish_log, finish_dropout,
                                     dropout_keep_bytes, stream_fence};
  return kernels;
}

}  // namespace cpu
}  // namespace softmax_internal
