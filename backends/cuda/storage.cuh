// SPDX-License-Identifier: Apache-2.0
// Storage types on the device: how an element of each softmax_dtype converts to and from the
// arithmetic type, and explicit global-memory accesses. Rows are moved in 16-byte chunks; the
// stores are written as vector PTX because the compiler otherwise splits a float4 store whose
// value went through per-element arithmetic into four 4-byte stores (seen in the SASS of the
// previous kernels: four STG.E per float4, a quarter of each 32-byte sector per request).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <softmax/softmax.h>

#include <cstdint>
#include <type_traits>

namespace softmax_internal {
namespace cuda_kernels {

// ---- elements ---------------------------------------------------------------------------------

template <class T>
struct Elem;

template <>
struct Elem<float> {
  static constexpr softmax_dtype kDtype = SOFTMAX_DTYPE_F32;
  static constexpr int kBytes = 4;
};
template <>
struct Elem<__half> {
  static constexpr softmax_dtype kDtype = SOFTMAX_DTYPE_F16;
  static constexpr int kBytes = 2;
};
template <>
struct Elem<__nv_bfloat16> {
  static constexpr softmax_dtype kDtype = SOFTMAX_DTYPE_BF16;
  static constexpr int kBytes = 2;
};
template <>
struct Elem<double> {
  static constexpr softmax_dtype kDtype = SOFTMAX_DTYPE_F64;
  static constexpr int kBytes = 8;
};

// The layout of the generic kernels, which serve every pair of storage types involving f64:
// chunks of two columns, each element read and written one by one with its run-time type.
struct AnyDtype {};
template <>
struct Elem<AnyDtype> {
  static constexpr softmax_dtype kDtype = SOFTMAX_DTYPE_F64;
  static constexpr int kBytes = 8;
};
template <class T>
constexpr bool kGeneric = false;
template <>
constexpr bool kGeneric<AnyDtype> = true;

// 16-bit rows held in chunks of 8 bytes (4 columns) instead of 16: the layout of a 16-bit array
// whose output is f32 (x of the forward with f32 y, y and dy of the backward with f32 dx), so that
// each chunk's output is one 16-byte vector of f32, stored like an f32 row. With
// 16-byte x chunks each lane's output is 32 bytes, written as two stores that each fill half of
// 32 sectors; on the H200 a looping bf16 -> f32 conversion ran 2.6-2.8 TB/s that way and
// 3.8-3.9 TB/s with 8-byte loads and 16-byte stores.
template <class T>
struct Narrow {};
template <class T>
struct Elem<Narrow<T>> : Elem<T> {};
template <class T>
constexpr bool kNarrow = false;
template <class T>
constexpr bool kNarrow<Narrow<T>> = true;

// The layout that holds an array of T whose output is stored as Out: Narrow<T> when the output
// is wider (16-bit in, f32 out), T itself otherwise.
template <class T, class Out>
using HeldLayout = std::conditional_t<(Elem<Out>::kBytes > Elem<T>::kBytes), Narrow<T>, T>;

// Bytes of T's layout in one chunk, and the elements they hold.
template <class T>
constexpr int kChunkBytes = kNarrow<T> ? 8 : 16;
template <class T>
constexpr int kChunkElems = kChunkBytes<T> / Elem<T>::kBytes;

__host__ __device__ constexpr int dtype_bytes(softmax_dtype t) {
  return t == SOFTMAX_DTYPE_F64 ? 8 : t == SOFTMAX_DTYPE_F32 ? 4 : 2;
}

// A chunk (16 bytes, or 8 in the first two words) as 32-bit words (the unit the realignment
// shuffles move).
struct Words {
  uint32_t w[4];
};

// Element j of a chunk of T, as the arithmetic type A (f16/bf16 widen exactly).
template <class T, class A>
__device__ __forceinline__ A chunk_get(const Words& c, int j) {
  if constexpr (Elem<T>::kBytes == 8) {
    const uint64_t bits = uint64_t(c.w[2 * j]) | uint64_t(c.w[2 * j + 1]) << 32;
    return static_cast<A>(__longlong_as_double(static_cast<long long>(bits)));
  } else if constexpr (Elem<T>::kBytes == 4) {
    return static_cast<A>(__uint_as_float(c.w[j]));
  } else {
    const uint16_t h = static_cast<uint16_t>(c.w[j >> 1] >> (16 * (j & 1)));
    if constexpr (Elem<T>::kDtype == SOFTMAX_DTYPE_F16) {
      return static_cast<A>(__half2float(__ushort_as_half(h)));
    } else {
      return static_cast<A>(__uint_as_float(uint32_t(h) << 16));
    }
  }
}

// The larger of each pair of 16-bit T elements in two words (a NaN loses to a number, as in
// fmax): exact, one instruction for two elements.
template <class T>
__device__ __forceinline__ uint32_t pair_max(uint32_t a, uint32_t b) {
  static_assert(Elem<T>::kBytes == 2, "pairs of 16-bit elements");
  uint32_t r;
  if constexpr (Elem<T>::kDtype == SOFTMAX_DTYPE_F16) {
    const __half2 m = __hmax2(*reinterpret_cast<const __half2*>(&a), *reinterpret_cast<const __half2*>(&b));
    r = *reinterpret_cast<const uint32_t*>(&m);
  } else {
    const __nv_bfloat162 m =
        __hmax2(*reinterpret_cast<const __nv_bfloat162*>(&a), *reinterpret_cast<const __nv_bfloat162*>(&b));
    r = *reinterpret_cast<const uint32_t*>(&m);
  }
  return r;
}

// One element of storage type `t`, rounded to nearest even from v; returned in the low bits.
template <class A>
__device__ __forceinline__ uint64_t element_bits(A v, softmax_dtype t) {
  switch (t) {
    case SOFTMAX_DTYPE_F64:
      return static_cast<uint64_t>(__double_as_longlong(static_cast<double>(v)));
    case SOFTMAX_DTYPE_F32: return __float_as_uint(static_cast<float>(v));
    case SOFTMAX_DTYPE_F16:
      if constexpr (sizeof(A) == 8) {
        return __half_as_ushort(__double2half(v));
      } else {
        return __half_as_ushort(__float2half_rn(v));
      }
    case SOFTMAX_DTYPE_BF16:
      if constexpr (sizeof(A) == 8) {
        return __bfloat16_as_ushort(__double2bfloat16(v));
      } else {
        return __bfloat16_as_ushort(__float2bfloat16_rn(v));
      }
  }
  return 0;
}

// Two fp32 values as 16-bit storage type `t` (f16 or bf16), each rounded to nearest even, `lo` in
// the low half: one conversion instruction for the pair (element by element, the compiler
// sometimes converts each one alone and merges the halves with a permute).
__device__ __forceinline__ uint32_t pair_bits(float lo, float hi, softmax_dtype t) {
  if (t == SOFTMAX_DTYPE_F16) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return uint32_t(__half_as_ushort(h.x)) | uint32_t(__half_as_ushort(h.y)) << 16;
  }
  const __nv_bfloat162 b = __floats2bfloat162_rn(lo, hi);
  return uint32_t(__bfloat16_as_ushort(b.x)) | uint32_t(__bfloat16_as_ushort(b.y)) << 16;
}

// ---- global memory ----------------------------------------------------------------------------

__device__ __forceinline__ Words load16(const void* p) {
  const uint4 q = *static_cast<const uint4*>(p);
  return Words{{q.x, q.y, q.z, q.w}};
}

// 8 bytes into the first two words.
__device__ __forceinline__ Words load8(const void* p) {
  const uint2 q = *static_cast<const uint2*>(p);
  return Words{{q.x, q.y, 0, 0}};
}

__device__ __forceinline__ void store16(void* p, const Words& c) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(c.w[0]), "r"(c.w[1]),
               "r"(c.w[2]), "r"(c.w[3])
               : "memory");
}

__device__ __forceinline__ void store8(void* p, uint32_t a, uint32_t b) {
  asm volatile("st.global.v2.u32 [%0], {%1, %2};" ::"l"(p), "r"(a), "r"(b) : "memory");
}

__device__ __forceinline__ void store4(void* p, uint32_t a) {
  asm volatile("st.global.u32 [%0], %1;" ::"l"(p), "r"(a) : "memory");
}

// 16 bytes from global to shared memory, past L1, asynchronously.
__device__ __forceinline__ void copy_async16(void* dst, const void* src) {
  const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(to), "l"(src) : "memory");
}
// Closes the copies issued since the last call into one group (one tile).
__device__ __forceinline__ void close_copy_group() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Waits until at most `pending` of the thread's groups are still in flight (at most 3 are kept:
// more counts as 3, which only waits longer).
__device__ __forceinline__ void await_copy_groups(int pending) {
  switch (pending) {
    case 0: asm volatile("cp.async.wait_group 0;" ::: "memory"); break;
    case 1: asm volatile("cp.async.wait_group 1;" ::: "memory"); break;
    case 2: asm volatile("cp.async.wait_group 2;" ::: "memory"); break;
    default: asm volatile("cp.async.wait_group 3;" ::: "memory"); break;
  }
}

// One element of `bytes` bytes (1, 2, 4 or 8), from/to the low bits.
__device__ __forceinline__ uint64_t load_element(const void* p, int bytes) {
  switch (bytes) {
    case 1: return *static_cast<const uint8_t*>(p);
    case 2: return *static_cast<const uint16_t*>(p);
    case 4: return *static_cast<const uint32_t*>(p);
    default: return *static_cast<const uint64_t*>(p);
  }
}
__device__ __forceinline__ void store_element(void* p, uint64_t v, int bytes) {
  switch (bytes) {
    case 1: *static_cast<uint8_t*>(p) = static_cast<uint8_t>(v); break;
    case 2: *static_cast<uint16_t*>(p) = static_cast<uint16_t>(v); break;
    case 4: *static_cast<uint32_t*>(p) = static_cast<uint32_t>(v); break;
    default: *static_cast<uint64_t*>(p) = v; break;
  }
}

}  // namespace cuda_kernels
}  // namespace softmax_internal
