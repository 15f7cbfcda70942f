// SPDX-License-Identifier: Apache-2.0
// The backward and sharded-row kernels (grad_kernels.h): plain loops shaped so that the compiler
// vectorises them (fixed blocks of independent accumulators, branch-free element functions),
// compiled per x86 level with target_clones and picked by the loader at run time. The templates
// below hold the arithmetic once for fp32 and fp64; the exported functions are the clone points.
#include "backends/cpu/grad_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "backends/cpu/full_range_exp.h"
#include "backends/cpu/storage_convert.h"
#include "backends/cpu/stream_policy.h"
#include "backends/cpu/target_clones.h"

#define SOFTMAX_GRAD_INLINE inline __attribute__((always_inline))

namespace softmax_internal {
namespace cpu {

namespace {

using convert::load;
using convert::store;

// Independent accumulators of a reduction: 32 floats (16 doubles) = two AVX-512 or four AVX2
// vectors, enough to hide the add latency; the tree that folds them is fixed, so a sum depends
// only on the data and n.
template <class T>
constexpr size_t kLanes = 64 / sizeof(T) * 2;

// The accumulators as four 32-byte vectors (GCC/clang generic vectors, which each clone lowers to
// its own registers): accumulator j is lane j % W of vector j / W, W = 32 / sizeof(T). So the
// accumulators stay in registers through the fold, a handful of instructions per row, where an
// array of them is folded through stores and reloads; rows of a few dozen elements (the tiles of
// short rows) spend as long on that as on their arithmetic.
template <class T>
struct LaneVec;
template <>
struct LaneVec<float> {
  typedef float type __attribute__((vector_size(32)));
};
template <>
struct LaneVec<double> {
  typedef double type __attribute__((vector_size(32)));
};
template <class T>
using Vec = typename LaneVec<T>::type;
template <class T>
constexpr size_t kVecLanes = 32 / sizeof(T);
static_assert(kLanes<float> == 4 * kVecLanes<float> && kLanes<double> == 4 * kVecLanes<double>,
              "four vectors of accumulators");

// acc += p[0, W) * q[0, W), or acc += q[0, W) when `log`. (Vectors go in and out by reference
// only: passed by value they would have a different ABI in the clones without AVX.)
template <class T>
SOFTMAX_GRAD_INLINE void accumulate(Vec<T>& acc, const T* p, const T* q, bool log) {
  Vec<T> u, v;
  std::memcpy(&v, q, sizeof v);
  if (log) {
    acc += v;
  } else {
    std::memcpy(&u, p, sizeof u);
    acc += u * v;
  }
}

// The fixed tree: accumulator j += accumulator j + w for w = kLanes/2, kLanes/4, ..., 1. The first
// two levels are whole vectors (0 += 2, 1 += 3, then 0 += 1), the rest within vector 0.
template <class T>
SOFTMAX_GRAD_INLINE T tree_sum(const Vec<T>* v) {
  const Vec<T> folded = (v[0] + v[2]) + (v[1] + v[3]);
  T a[kVecLanes<T>];
  std::memcpy(a, &folded, sizeof a);
  for (size_t w = kVecLanes<T> / 2; w >= 1; w /= 2)
    for (size_t j = 0; j < w; ++j) a[j] += a[j + w];
  return a[0];
}

// The same tree over an array of kLanes accumulators.
template <class T>
SOFTMAX_GRAD_INLINE T tree_sum_lanes(T* a) {
  for (size_t w = kLanes<T> / 2; w >= 1; w /= 2)
    for (size_t j = 0; j < w; ++j) a[j] += a[j + w];
  return a[0];
}

SOFTMAX_GRAD_INLINE ExpClamp<float> exp_clamp(float) { return exp_clamp_f32(); }
SOFTMAX_GRAD_INLINE ExpClamp<double> exp_clamp(double) { return exp_clamp_f64(); }
SOFTMAX_GRAD_INLINE float exp_of(float x, ExpClamp<float> c) { return exp_f32(x, c); }
SOFTMAX_GRAD_INLINE double exp_of(double x, ExpClamp<double> c) { return exp_f64(x, c); }

#if SOFTMAX_CPU_X86_LEVELS
bool have_x86_64_v4() {
  static const bool yes = __builtin_cpu_supports("x86-64-v4");
  return yes;
}

// Sixteen results of `finish` on AVX-512 (masked lanes read nothing): y * (dy - dot), or the
// log-softmax gradient dy - exp(y) * dot with the arithmetic of GCC's x86-64-v4 clone of
// `finish`, operation for operation and fused where it fuses, except that exp_f32's scaling of p
// by 2^n, two products (the first exact) that round once, is one vscalefps, which rounds p * 2^n
// once too: the same bits, 20 instructions per 16 elements instead of 27 (the log loop is bound
// by them, not by memory). The clamp keeps a NaN as the scalar code does (vmaxps and vminps
// return their second operand when either is NaN).
template <bool kLog>
__attribute__((target("arch=x86-64-v4"), always_inline)) inline __m512 finish16_avx512(const float* y,
                                                                                   const float* dy, __mmask16 m,
                                                                                   __m512 d) {
  using C = ExpF32;
  const __m512 g = _mm512_maskz_loadu_ps(m, dy);
  __m512 x = _mm512_maskz_loadu_ps(m, y);
  if constexpr (!kLog) return _mm512_mul_ps(x, _mm512_sub_ps(g, d));
  const ExpClamp<float> c = exp_clamp_f32();
  x = _mm512_min_ps(_mm512_set1_ps(c.hi), _mm512_max_ps(_mm512_set1_ps(c.lo), x));
  const __m512 magic = _mm512_set1_ps(C::kMagic), one = _mm512_set1_ps(1.0f);
  const __m512 t = _mm512_fmadd_ps(x, _mm512_set1_ps(C::kLog2e), magic);
  const __m512 k = _mm512_sub_ps(t, magic);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(C::kLn2Hi), x);
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(C::kLn2Lo), r);
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(C::kP5), r, _mm512_set1_ps(C::kP4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(C::kP3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(C::kP2));
  p = _mm512_fmadd_ps(p, r, one);
  p = _mm512_fmadd_ps(p, r, one);
  return _mm512_fnmadd_ps(_mm512_scalef_ps(p, k), d, g);
}

// Sixteen results to p: non-temporal (p 64-byte aligned) or ordinary.
template <bool kStream>
__attribute__((target("arch=x86-64-v4"), always_inline)) inline void store16_avx512(float* p, __m512 v) {
  if constexpr (kStream) {
    _mm512_stream_ps(p, v);
  } else {
    _mm512_storeu_ps(p, v);
  }
}

// `finish` for one row or chunk on AVX-512, written to the caller's memory: with kStream, 64-byte
// non-temporal stores from dx's first 64-byte boundary on (masked ordinary stores before it and
// for a partial last vector), else ordinary stores throughout; no pass through a buffer.
// ahead != 0: each 64 bytes finished also prefetches the y and dy `ahead` elements away (behind
// where negative), so that memory keeps streaming what is read next while this is finished.
template <bool kLog, bool kStream>
__attribute__((target("arch=x86-64-v4"))) void finish_f32_avx512(const float* y, const float* dy, float* dx,
                                                                size_t n, float dot, ptrdiff_t ahead) {
  const __m512 d = _mm512_set1_ps(dot);
  const size_t head =
      kStream ? std::min(n, (64 - reinterpret_cast<uintptr_t>(dx) % 64) % 64 / sizeof(float)) : size_t{0};
  if (head > 0) {
    const __mmask16 m = __mmask16((1u << head) - 1u);
    _mm512_mask_storeu_ps(dx, m, finish16_avx512<kLog>(y, dy, m, d));
  }
  size_t i = head;
  if (ahead != 0) {
    for (; i + 16 <= n; i += 16) {
      _mm_prefetch(reinterpret_cast<const char*>(y + i + ahead), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(dy + i + ahead), _MM_HINT_T0);
      store16_avx512<kStream>(dx + i, finish16_avx512<kLog>(y + i, dy + i, __mmask16(0xffff), d));
    }
  }
  for (; i + 16 <= n; i += 16) store16_avx512<kStream>(dx + i, finish16_avx512<kLog>(y + i, dy + i, __mmask16(0xffff), d));
  if (i < n) {
    const __mmask16 m = __mmask16((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(dx + i, m, finish16_avx512<kLog>(y + i, dy + i, m, d));
  }
}

// lane_dot for f32 on AVX-512, bit for bit: the same four 8-lane accumulators, the products
// fused as the AVX2 and AVX-512 clones of lane_dot fuse them, the zero-padded last block loaded
// masked, and the same fixed tree, folded in registers. The compiled loop padded that block
// through a buffer on the stack, whose reloads waited on its stores (in cache, rows of 129
// columns took 2.3x as long as rows of 128), and folded the tree through memory. (Two 16-lane
// accumulators made rows of 1024 columns one float off a 64-byte boundary 16% slower.)
__attribute__((target("arch=x86-64-v4"))) inline float lane_dot_f32_avx512(const float* a, const float* b, size_t n,
                                                                          bool log) {
  __m256 v0 = _mm256_setzero_ps(), v1 = v0, v2 = v0, v3 = v0;  // accumulators 0-7, 8-15, 16-23, 24-31
  size_t i = 0;
  if (log) {
    for (; i + 32 <= n; i += 32) {
      v0 = _mm256_add_ps(v0, _mm256_loadu_ps(b + i));
      v1 = _mm256_add_ps(v1, _mm256_loadu_ps(b + i + 8));
      v2 = _mm256_add_ps(v2, _mm256_loadu_ps(b + i + 16));
      v3 = _mm256_add_ps(v3, _mm256_loadu_ps(b + i + 24));
    }
  } else {
    for (; i + 32 <= n; i += 32) {
      v0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), v0);
      v1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), v1);
      v2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), v2);
      v3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), v3);
    }
  }
  if (i < n) {
    // The zero-padded last block, loaded masked: lanes past n add +0 (0 * 0), which leaves an
    // accumulator that started at +0 unchanged.
    const size_t m = n - i;
    const auto mask = [m](size_t k) {
      return m >= 8 * (k + 1) ? __mmask8(0xff) : m <= 8 * k ? __mmask8(0) : __mmask8((1u << (m - 8 * k)) - 1u);
    };
    __m256* v[4] = {&v0, &v1, &v2, &v3};
    for (size_t k = 0; k < 4; ++k) {
      const __m256 bk = _mm256_maskz_loadu_ps(mask(k), b + i + 8 * k);
      *v[k] = log ? _mm256_add_ps(*v[k], bk) : _mm256_fmadd_ps(_mm256_maskz_loadu_ps(mask(k), a + i + 8 * k), bk, *v[k]);
    }
  }
  // tree_sum: (v0 + v2) + (v1 + v3), then lanes j += j + 4, j + 2, j + 1.
  const __m256 folded = _mm256_add_ps(_mm256_add_ps(v0, v2), _mm256_add_ps(v1, v3));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(folded), _mm256_extractf128_ps(folded, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
#endif

// sum(a * b), or sum(b) when `log` (the log-softmax gradient needs only sum(dy)). The last,
// partial block is zero-padded: a lane that gains 0 * 0 (or 0) keeps its value exactly, as an
// accumulator that starts at +0 is never -0.
template <class T>
SOFTMAX_GRAD_INLINE T lane_dot(const T* a, const T* b, size_t n, bool log) {
#if SOFTMAX_CPU_X86_LEVELS
  if constexpr (std::is_same_v<T, float>) {
    if (have_x86_64_v4()) return lane_dot_f32_avx512(a, b, n, log);
  }
#endif
  constexpr size_t W = kVecLanes<T>;
  Vec<T> acc[4] = {};
  size_t i = 0;
  if (log) {
    for (; i + kLanes<T> <= n; i += kLanes<T>)
      for (size_t k = 0; k < 4; ++k) accumulate<T>(acc[k], nullptr, b + i + k * W, true);
  } else {
    for (; i + kLanes<T> <= n; i += kLanes<T>)
      for (size_t k = 0; k < 4; ++k) accumulate<T>(acc[k], a + i + k * W, b + i + k * W, false);
  }
  if (i < n) {
    T ta[kLanes<T>] = {}, tb[kLanes<T>] = {};
    std::memcpy(ta, a + i, (n - i) * sizeof(T));
    std::memcpy(tb, b + i, (n - i) * sizeof(T));
    for (size_t k = 0; k < 4; ++k) accumulate<T>(acc[k], ta + k * W, tb + k * W, log);
  }
  return tree_sum<T>(acc);
}

// dx = y * (dy - dot), or dx = dy - exp(y) * dot. Each element is read before its dx is
// written, so dx == dy is fine. prefetch_preceding: f32 log-softmax on AVX-512 prefetches the n
// elements before these (grad_finish_f32).
template <class T>
SOFTMAX_GRAD_INLINE void finish(const T* y, const T* dy, T* dx, size_t n, T dot, bool log,
                                bool prefetch_preceding = false) {
  if (log) {
#if SOFTMAX_CPU_X86_LEVELS
    if constexpr (std::is_same_v<T, float>) {
      if (have_x86_64_v4())
        return finish_f32_avx512<true, false>(y, dy, dx, n, dot, prefetch_preceding ? -ptrdiff_t(n) : 0);
    }
#else
    (void)prefetch_preceding;
#endif
    const ExpClamp<T> c = exp_clamp(T());
    for (size_t i = 0; i < n; ++i) store<T>(dx, i, load<T>(dy, i) - exp_of(load<T>(y, i), c) * dot);
  } else {
    for (size_t i = 0; i < n; ++i) store<T>(dx, i, load<T>(y, i) * (load<T>(dy, i) - dot));
  }
}

// How far past each element a tile's finishing loop prefetches y and dy (grad_streamed_f32):
// the next row, or 4 KB for shorter rows.
template <class T>
SOFTMAX_GRAD_INLINE size_t prefetch_distance(size_t n) {
  return std::max<size_t>(n, 4096 / sizeof(T));
}

// The bytes of y and dy `ahead` elements past a row of n, prefetched.
template <class T>
SOFTMAX_GRAD_INLINE void prefetch_ahead(const T* y, const T* dy, size_t n, size_t ahead) {
  const char* a = reinterpret_cast<const char*>(y + ahead);
  const char* b = reinterpret_cast<const char*>(dy + ahead);
  for (size_t i = 0; i < n * sizeof(T); i += 64) {
    __builtin_prefetch(a + i, 0, 3);
    __builtin_prefetch(b + i, 0, 3);
  }
}

template <class T>
SOFTMAX_GRAD_INLINE void grad_rows(const T* y, const T* dy, T* dx, int64_t rows, int64_t cols,
                                   const T* row_dot, bool log, bool prefetch_following) {
  const size_t n = size_t(cols);
  const size_t ahead = prefetch_following ? prefetch_distance<T>(n) : 0;
  for (int64_t r = 0; r < rows; ++r) {
    const size_t o = size_t(r) * n;
    if (ahead != 0) prefetch_ahead(y + o, dy + o, n, ahead);
    const T dot = row_dot != nullptr ? row_dot[r] : lane_dot(y + o, dy + o, n, log);
    finish(y + o, dy + o, dx + o, n, dot, log);
  }
}

}  // namespace

// ---- conversions ---------------------------------------------------------------------------

namespace {

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// binary16 <-> float with the F16C instructions (every x86-64-v3 CPU), 8 at a time: about ten
// times faster than the portable bit arithmetic, and the same values (vcvtps2ph with imm 0
// rounds to nearest even; NaN stays NaN, its payload truncated rather than replaced).
#define SOFTMAX_GRAD_F16C 1

// CPUID leaf 1: OSXSAVE, AVX and F16C in ECX, then XCR0 for the OS saving the YMM state.
// (Not __builtin_cpu_supports: clang 14 does not know "f16c".)
bool have_f16c() {
  static const bool yes = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(1, &a, &b, &c, &d) == 0) return false;
    const unsigned need = (1u << 27) | (1u << 28) | (1u << 29);
    if ((c & need) != need) return false;
    unsigned lo = 0, hi = 0;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 6u) == 6u;
  }();
  return yes;
}

__attribute__((target("avx,f16c"))) void widen_f16_f16c(const void* src, size_t n, float* dst) {
  const unsigned char* p = static_cast<const unsigned char*>(src);
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i))));
  for (; i < n; ++i) dst[i] = convert::f16_to_f32(load<uint16_t>(src, i));
}

__attribute__((target("avx,f16c"))) void narrow_f16_f16c(const float* src, void* dst, size_t n) {
  unsigned char* p = static_cast<unsigned char*>(dst);
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p + 2 * i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), 0));
  for (; i < n; ++i) store<uint16_t>(dst, i, convert::f32_to_f16(src[i]));
}
#endif

SOFTMAX_CPU_CLONES
void widen_f32_loops(const void* src, softmax_dtype t, int64_t n, float* dst) {
  const size_t m = size_t(n);
  if (t == SOFTMAX_DTYPE_F32) {
    for (size_t i = 0; i < m; ++i) dst[i] = load<float>(src, i);
  } else if (t == SOFTMAX_DTYPE_F16) {
    for (size_t i = 0; i < m; ++i) dst[i] = convert::f16_to_f32(load<uint16_t>(src, i));
  } else {
    for (size_t i = 0; i < m; ++i) dst[i] = convert::bf16_to_f32(load<uint16_t>(src, i));
  }
}

SOFTMAX_CPU_CLONES
void narrow_f32_loops(const float* src, void* dst, softmax_dtype t, int64_t n) {
  const size_t m = size_t(n);
  if (t == SOFTMAX_DTYPE_F32) {
    for (size_t i = 0; i < m; ++i) store<float>(dst, i, src[i]);
  } else if (t == SOFTMAX_DTYPE_F16) {
    for (size_t i = 0; i < m; ++i) store<uint16_t>(dst, i, convert::f32_to_f16(src[i]));
  } else {
    for (size_t i = 0; i < m; ++i) store<uint16_t>(dst, i, convert::f32_to_bf16(src[i]));
  }
}

}  // namespace

SOFTMAX_CPU_CLONES
void widen_f64(const void* src, softmax_dtype t, int64_t n, double* dst) {
  const size_t m = size_t(n);
  switch (t) {
    case SOFTMAX_DTYPE_F64:
      for (size_t i = 0; i < m; ++i) dst[i] = load<double>(src, i);
      return;
    case SOFTMAX_DTYPE_F32:
      for (size_t i = 0; i < m; ++i) dst[i] = double(load<float>(src, i));
      return;
    case SOFTMAX_DTYPE_F16:
      for (size_t i = 0; i < m; ++i) dst[i] = double(convert::f16_to_f32(load<uint16_t>(src, i)));
      return;
    case SOFTMAX_DTYPE_BF16:
      break;
  }
  for (size_t i = 0; i < m; ++i) dst[i] = double(convert::bf16_to_f32(load<uint16_t>(src, i)));
}

void widen_f32(const void* src, softmax_dtype t, int64_t n, float* dst) {
#if defined(SOFTMAX_GRAD_F16C)
  if (t == SOFTMAX_DTYPE_F16 && have_f16c()) return widen_f16_f16c(src, size_t(n), dst);
#endif
  widen_f32_loops(src, t, n, dst);
}

void narrow_f32(const float* src, void* dst, softmax_dtype t, int64_t n) {
#if defined(SOFTMAX_GRAD_F16C)
  if (t == SOFTMAX_DTYPE_F16 && have_f16c()) return narrow_f16_f16c(src, dst, size_t(n));
#endif
  narrow_f32_loops(src, dst, t, n);
}

// 16-bit results go through float (double -> float -> 16 bits may round twice; the extra error
// is under 2^-24 relative, far below the 16-bit rounding itself).
SOFTMAX_CPU_CLONES
void narrow_f64(const double* src, void* dst, softmax_dtype t, int64_t n) {
  const size_t m = size_t(n);
  switch (t) {
    case SOFTMAX_DTYPE_F64:
      for (size_t i = 0; i < m; ++i) store<double>(dst, i, src[i]);
      return;
    case SOFTMAX_DTYPE_F32:
      for (size_t i = 0; i < m; ++i) store<float>(dst, i, float(src[i]));
      return;
    case SOFTMAX_DTYPE_F16:
      for (size_t i = 0; i < m; ++i) store<uint16_t>(dst, i, convert::f32_to_f16(float(src[i])));
      return;
    case SOFTMAX_DTYPE_BF16:
      break;
  }
  for (size_t i = 0; i < m; ++i) store<uint16_t>(dst, i, convert::f32_to_bf16(float(src[i])));
}

// ---- streamed results ----------------------------------------------------------------------

void stream_store_f32(const float* src, void* dst, int64_t n) {
  size_t i = 0;
#if defined(__SSE__)
  const uintptr_t addr = reinterpret_cast<uintptr_t>(dst);
  if (addr % sizeof(float) == 0) {
    const size_t head = std::min(size_t(n), (16 - addr % 16) % 16 / sizeof(float));
    std::memcpy(dst, src, head * sizeof(float));
    float* d = static_cast<float*>(dst);
    for (i = head; i + 4 <= size_t(n); i += 4) _mm_stream_ps(d + i, _mm_loadu_ps(src + i));
    _mm_sfence();
  }
#endif
  std::memcpy(static_cast<unsigned char*>(dst) + i * sizeof(float), src + i, (size_t(n) - i) * sizeof(float));
}

// ---- softmax / log-softmax backward ----------------------------------------------------------

SOFTMAX_CPU_CLONES
float grad_dot_f32(const float* y, const float* dy, int64_t n, bool log) { return lane_dot(y, dy, size_t(n), log); }

SOFTMAX_CPU_CLONES
double grad_dot_f64(const double* y, const double* dy, int64_t n, bool log) {
  return lane_dot(y, dy, size_t(n), log);
}

SOFTMAX_CPU_CLONES
void grad_finish_f32(const float* y, const float* dy, float* dx, int64_t n, float dot, bool log,
                     bool prefetch_preceding) {
  finish(y, dy, dx, size_t(n), dot, log, prefetch_preceding);
}

#if SOFTMAX_CPU_X86_LEVELS
namespace {

// Rows of n elements finished straight into dx (kStream: with non-temporal stores), each row's
// dot (unless given) computed in the same loop by lane_dot_f32_avx512, which lane_dot is in every
// other caller on this CPU: a row gets the bits that the buffered kernels give it, without a
// call through a clone's resolver or lane_dot's test of the CPU per row.
template <bool kLog, bool kStream>
__attribute__((target("arch=x86-64-v4"))) void streamed_rows_avx512(const float* y, const float* dy, float* dx,
                                                                   int64_t rows, size_t n, const float* row_dot,
                                                                   ptrdiff_t ahead) {
  for (int64_t r = 0; r < rows; ++r) {
    const size_t o = size_t(r) * n;
    const float dot = row_dot != nullptr ? row_dot[r] : lane_dot_f32_avx512(y + o, dy + o, n, kLog);
    finish_f32_avx512<kLog, kStream>(y + o, dy + o, dx + o, n, dot, ahead);
  }
}

}  // namespace
#endif

bool grad_streamed_f32(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                       const float* row_dot, bool log, FinishPrefetch prefetch) {
#if SOFTMAX_CPU_X86_LEVELS
  if (!have_x86_64_v4() || reinterpret_cast<uintptr_t>(dx) % sizeof(float) != 0) return false;
  const size_t n = size_t(cols);
  const ptrdiff_t ahead = prefetch == FinishPrefetch::FollowingRows    ? ptrdiff_t(prefetch_distance<float>(n))
                          : prefetch == FinishPrefetch::PrecedingChunk ? -ptrdiff_t(n)
                                                                       : 0;
  // Short rows off 64-byte boundaries take ordinary stores (stream_policy.h).
  if (stream_rows_alone(dx, cols, 64, kBackwardStreamRowsFrom)) {
    (log ? streamed_rows_avx512<true, true> : streamed_rows_avx512<false, true>)(y, dy, dx, rows, n, row_dot, ahead);
    _mm_sfence();
  } else {
    (log ? streamed_rows_avx512<true, false> : streamed_rows_avx512<false, false>)(y, dy, dx, rows, n, row_dot, ahead);
  }
  return true;
#else
  (void)y, (void)dy, (void)dx, (void)rows, (void)cols, (void)row_dot, (void)log, (void)prefetch;
  return false;
#endif
}

SOFTMAX_CPU_CLONES
void grad_finish_f64(const double* y, const double* dy, double* dx, int64_t n, double dot, bool log) {
  finish(y, dy, dx, size_t(n), dot, log);
}

SOFTMAX_CPU_CLONES
void grad_rows_f32(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                   const float* row_dot, bool log, bool prefetch_following) {
  grad_rows(y, dy, dx, rows, cols, row_dot, log, prefetch_following);
}

SOFTMAX_CPU_CLONES
void grad_rows_f64(const double* y, const double* dy, double* dx, int64_t rows, int64_t cols,
                   const double* row_dot, bool log, bool prefetch_following) {
  grad_rows(y, dy, dx, rows, cols, row_dot, log, prefetch_following);
}

SOFTMAX_CPU_CLONES
void grad_row_dots_f32(const float* y, const float* dy, int64_t rows, int64_t cols, bool log, float* out) {
  const size_t n = size_t(cols);
  for (int64_t r = 0; r < rows; ++r) out[r] = lane_dot(y + size_t(r) * n, dy + size_t(r) * n, n, log);
}

// ---- dropout backward --------------------------------------------------------------------

// The select as a bit mask (keep bytes are 0 or 1): +0 where dropped, whatever dy holds.
SOFTMAX_CPU_CLONES
void dropout_grad_f32(const float* dy, const uint8_t* keep, float scale, int64_t n, float* g) {
  for (size_t i = 0; i < size_t(n); ++i) {
    const uint32_t v = convert::bits(load<float>(dy, i) * scale);
    store<float>(g, i, convert::from_bits(v & (0u - uint32_t(keep[i]))));
  }
}

SOFTMAX_CPU_CLONES
void dropout_grad_f64(const double* dy, const uint8_t* keep, double scale, int64_t n, double* g) {
  for (size_t i = 0; i < size_t(n); ++i) {
    const uint64_t v = __builtin_bit_cast(uint64_t, load<double>(dy, i) * scale);
    store<double>(g, i, __builtin_bit_cast(double, v & (uint64_t{0} - uint64_t(keep[i]))));
  }
}

SOFTMAX_CPU_CLONES
void scale_f32(float* v, int64_t n, float factor) {
  for (size_t i = 0; i < size_t(n); ++i) v[i] *= factor;
}

SOFTMAX_CPU_CLONES
void scale_f64(double* v, int64_t n, double factor) {
  for (size_t i = 0; i < size_t(n); ++i) v[i] *= factor;
}

// Max with -inf start (NaN elements never win a comparison; the sum catches them), then
// exp(x - max) summed in lanes. An all -inf chunk is looked at directly: exp(-inf - -inf) would
// be NaN, but such a chunk only contributes nothing (or NaN if it holds a NaN).
SOFTMAX_CPU_CLONES
ChunkStats64 softmax_chunk_stats_f64(const double* x, int64_t n, double* e_out) {
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  const size_t m = size_t(n);
  double mx[kLanes<double>];
  for (size_t j = 0; j < kLanes<double>; ++j) mx[j] = kNegInf;
  size_t i = 0;
  for (; i + kLanes<double> <= m; i += kLanes<double>)
    for (size_t j = 0; j < kLanes<double>; ++j) {
      const double v = load<double>(x, i + j);
      mx[j] = v > mx[j] ? v : mx[j];
    }
  for (size_t j = 0; i + j < m; ++j) {
    const double v = load<double>(x, i + j);
    mx[j] = v > mx[j] ? v : mx[j];
  }
  double max = kNegInf;
  for (size_t j = 0; j < kLanes<double>; ++j) max = mx[j] > max ? mx[j] : max;
  if (max == kNegInf) {
    bool nan = false;
    for (size_t k = 0; k < m; ++k) nan |= std::isnan(load<double>(x, k));
    if (e_out != nullptr) std::fill(e_out, e_out + m, 0.0);
    return ChunkStats64{max, 0.0, nan};
  }
  double acc[kLanes<double>];
  for (size_t j = 0; j < kLanes<double>; ++j) acc[j] = 0.0;
  const ExpClamp<double> clamp = exp_clamp_f64();
  // Two copies of the loop, with and without the stores, so that neither holds a branch.
  if (e_out != nullptr) {
    for (i = 0; i + kLanes<double> <= m; i += kLanes<double>) {
      for (size_t j = 0; j < kLanes<double>; ++j) {
        const double e = exp_f64(load<double>(x, i + j) - max, clamp);
        e_out[i + j] = e;
        acc[j] += e;
      }
    }
    for (size_t j = 0; i + j < m; ++j) {
      const double e = exp_f64(load<double>(x, i + j) - max, clamp);
      e_out[i + j] = e;
      acc[j] += e;
    }
  } else {
    for (i = 0; i + kLanes<double> <= m; i += kLanes<double>)
      for (size_t j = 0; j < kLanes<double>; ++j) acc[j] += exp_f64(load<double>(x, i + j) - max, clamp);
    for (size_t j = 0; i + j < m; ++j) acc[j] += exp_f64(load<double>(x, i + j) - max, clamp);
  }
  const double sum = tree_sum_lanes(acc);
  return ChunkStats64{max, sum, std::isnan(sum)};
}

// ---- sharded forward -----------------------------------------------------------------------

SOFTMAX_CPU_CLONES
void exp_scaled_f32(const float* x, float* y, int64_t n, float shift, float factor) {
  const ExpClamp<float> clamp = exp_clamp_f32();
  for (size_t i = 0; i < size_t(n); ++i) store<float>(y, i, exp_f32(load<float>(x, i) - shift, clamp) * factor);
}

// (x - max) - log_sum: two roundings, each relative to a small value, as the forward does.
SOFTMAX_CPU_CLONES
void log_shifted_f32(const float* x, float* y, int64_t n, float shift, float log_sum) {
  for (size_t i = 0; i < size_t(n); ++i) store<float>(y, i, (load<float>(x, i) - shift) - log_sum);
}

}  // namespace cpu
}  // namespace softmax_internal
