// SPDX-License-Identifier: Apache-2.0
// The frame every row kernel shares: which rows a thread works on and where in them (two modes),
// and turning a row's chunks into arithmetic values and back, for every storage type.
//
//   segment mode  a row per segment of G lanes (G <= 32), 32/G segments per warp, R rows per
//                 segment at a time: short rows, no shared memory, no barriers.
//   block mode    R rows per block, or per cluster of blocks: each warp is a 32-lane segment
//                 of the row, reductions go through shared memory and, in a cluster,
//                 distributed shared memory; some kernels realign misaligned rows through
//                 each warp's stage in the launch's dynamic shared memory (row_layout.cuh).
#pragma once

#include <cuda_runtime.h>
#include <softmax/softmax.h>

#include <cstdint>

#include "backends/cuda/row_layout.cuh"
#include "backends/cuda/row_math.cuh"
#include "backends/cuda/storage.cuh"

namespace softmax_internal {
namespace cuda_kernels {

// A launch's shape, as the row kernels see it. Rows held on chip are shorter than 2^31 columns.
struct RowShape {
  int64_t rows;
  int cols;
  int width;    // segment mode: lanes per row (a power of two <= 32); block mode: 32
  int cluster;  // block mode: blocks per row group (1 = a plain block), a power of two
  int cluster_shift;  // log2(cluster): the walk shifts and masks, where three divisions by a
                      // run-time value cost a block ~45 instructions per warp
};

// Whether a block-mode kernel over rows stored as T realigns misaligned rows through its warps'
// stages (Place::realign_in_stage, row_layout.cuh) rather than by shuffles: kernels bound by their
// instruction count over 16-bit rows (softmax_dropout and its backward). On the H200, against the
// shuffles (gpu_sweep.py, back to back, alternated twice): bf16 dropout of 4097 columns +15%,
// its backward +9%. Memory-bound rows lost so (bf16 softmax rows of 32001 columns -14%, 4096
// one element off -4%, the bf16 backward -13%, f32 rows -9-11%) and keep the shuffles: the
// stage's word loads and stores take 4-way bank conflicts (lanes 16 bytes apart), by count some
// 40 shared-memory wavefronts a chunk against eight for the shuffles (not profiled).
template <class T>
constexpr bool kRealignInStage16 = !kGeneric<T> && Elem<T>::kBytes == 2;

// The rows of one iteration and this thread's place in them. Block mode only: kRealignInStage,
// Place::realign_in_stage, and the launch provides the warps' stages (launch_register);
// kOneShift, Place::one_row_per_warp (the realigning paths of a shift known at compile time).
template <int K, int R, bool kBlock, bool kRealignInStage = false, bool kOneShift = kBlock>
struct RowWalk {
  static_assert(!kRealignInStage || kBlock, "only block mode realigns through the warps' stages");
  static_assert(!kOneShift || kBlock, "only block mode has one row per warp");
  Place place;
  int64_t base;  // first row of the current iteration's group
  int in_group;  // offset of this thread's first row in the group
  int step;      // between this thread's R rows
  int64_t stride;  // rows between iterations
  int rank;        // block in the cluster (block mode)

  __device__ __forceinline__ explicit RowWalk(const RowShape& s) {
    if constexpr (!kBlock) {
      const int segs = 32 / s.width;
      const int64_t warp = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
      const int64_t warps = (int64_t(gridDim.x) * blockDim.x) >> 5;
      place = Place{int(threadIdx.x) & (s.width - 1), s.width, 0};
      base = warp * segs * R;
      in_group = int(threadIdx.x & 31) / s.width;
      step = segs;
      stride = warps * segs * R;
      rank = 0;
    } else {
      rank = int(blockIdx.x & unsigned(s.cluster - 1));
      const int warps = int(blockDim.x >> 5);
      const int segment = rank * warps + int(threadIdx.x >> 5);
      place = Place{int(threadIdx.x) & 31, 32, segment * K * 32, kRealignInStage, kOneShift};
      base = int64_t(blockIdx.x >> s.cluster_shift) * R;
      in_group = 0;
      step = 1;
      stride = int64_t(gridDim.x >> s.cluster_shift) * R;
    }
  }
  __device__ __forceinline__ int64_t row(int i) const { return base + in_group + i * step; }
};

// Whether any lane of the warp holds a column >= cols among its K chunks of V columns: only
// then do the held values need padding. A warp-uniform branch, so the common case does not
// pay a compare and a select per element (a per-lane condition is compiled as predication,
// which issues the padding either way). Every lane of the warp calls this together.
template <int K, int V>
__device__ __forceinline__ bool warp_holds_padding(const Place& p, int cols) {
  return __any_sync(kFullMask, (p.chunk(K - 1) + 1) * V > cols);
}

// Values of a thread's chunks (storage T, V per chunk), columns >= cols set to `pad`. Every
// lane of the warp calls this together.
template <class T, class A, int K, int V>
__device__ __forceinline__ void to_values(const Words (&c)[K], const Place& p, int cols, A pad, A (&v)[K][V]) {
  if (!warp_holds_padding<K, V>(p, cols)) {
#pragma unroll
    for (int k = 0; k < K; ++k) {
#pragma unroll
      for (int j = 0; j < V; ++j) v[k][j] = chunk_get<T, A>(c[k], j);
    }
    return;
  }
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int col0 = p.chunk(k) * V;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const A x = chunk_get<T, A>(c[k], j);
      v[k][j] = col0 + j < cols ? x : pad;
    }
  }
}

// A chunk of V values as the bytes of storage type U (16 or 8), in the first words of a chunk.
template <class U, class A, int V>
__device__ __forceinline__ Words pack_as(const A (&v)[V]) {
  Words c = {{0, 0, 0, 0}};
  if constexpr (Elem<U>::kBytes == 2 && sizeof(A) == 4) {
#pragma unroll
    for (int j = 0; j < V / 2; ++j) c.w[j] = pair_bits(v[2 * j], v[2 * j + 1], Elem<U>::kDtype);
  } else {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const uint64_t b = element_bits(v[j], Elem<U>::kDtype);
      if constexpr (Elem<U>::kBytes == 8) {
        c.w[2 * j] = uint32_t(b), c.w[2 * j + 1] = uint32_t(b >> 32);
      } else if constexpr (Elem<U>::kBytes == 4) {
        c.w[j] = uint32_t(b);
      } else {
        c.w[j >> 1] |= uint32_t(b) << (16 * (j & 1));
      }
    }
  }
  return c;
}

// A thread's chunks of values as the bytes of storage type Y (pack_as, chunk by chunk).
template <class Y, class A, int K, int V>
__device__ __forceinline__ void pack_chunks(const A (&v)[K][V], Words (&c)[K]) {
#pragma unroll
  for (int k = 0; k < K; ++k) c[k] = pack_as<Y, A, V>(v[k]);
}

// Writes a thread's chunks, packed as Y (pack_as), to a row stored as Y, through the realigning
// store (or, with kPieces, in pieces: store_chunks_in_pieces): a chunk of V values makes 16 bytes
// of Y (Y of the layout's element size, or f32 from a Narrow 16-bit layout) or 8 (an f32 row
// stored as 16-bit). store_values packs them first. Every lane of the warp calls these together.
template <class Y, int K, int V, bool kPieces>
__device__ __forceinline__ void store_packed(void* row_ptr, int cols, bool live, const Place& p, const Words (&c)[K]) {
  constexpr int kUnit = V * Elem<Y>::kBytes;
  static_assert(kUnit == 16 || kUnit == 8, "a chunk's output is one 16- or 8-byte unit");
  if constexpr (kPieces) {
    store_chunks_in_pieces<K, Elem<Y>::kBytes, kUnit>(static_cast<char*>(row_ptr), cols, live, p, c);
  } else {
    store_chunks<K, Elem<Y>::kBytes, kUnit>(static_cast<char*>(row_ptr), cols, live, p, c);
  }
}

template <class T, class Y, class A, int K, int V, bool kPieces>
__device__ __forceinline__ void store_values(void* row_ptr, int cols, bool live, const Place& p, const A (&v)[K][V]) {
  Words c[K];
  pack_chunks<Y, A, K, V>(v, c);
  store_packed<Y, K, V, kPieces>(row_ptr, cols, live, p, c);
}

// One element of storage type t at p, as A.
template <class A>
__device__ __forceinline__ A load_as(const void* p, softmax_dtype t) {
  switch (t) {
    case SOFTMAX_DTYPE_F64: return static_cast<A>(*static_cast<const double*>(p));
    case SOFTMAX_DTYPE_F32: return static_cast<A>(*static_cast<const float*>(p));
    case SOFTMAX_DTYPE_F16: return static_cast<A>(__half2float(*static_cast<const __half*>(p)));
    case SOFTMAX_DTYPE_BF16: return static_cast<A>(__bfloat162float(*static_cast<const __nv_bfloat16*>(p)));
  }
  return A(0);
}

// Values of a thread's chunks of a row stored as `t`, an input whose element size differs from
// the layout's (chunk k = V elements at column chunk(k) * V); columns >= cols set to `pad`.
template <class A, int K, int V>
__device__ __forceinline__ void load_resized(const void* row_ptr, int cols, bool live, softmax_dtype t,
                                             const Place& p, A pad, A (&v)[K][V]) {
  const char* row = static_cast<const char*>(row_ptr);
  const int es = dtype_bytes(t);
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int L = p.chunk(k);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const int col = L * V + j;
      v[k][j] = (live && col < cols) ? load_as<A>(row + col * es, t) : pad;
    }
  }
}

// Writes a thread's chunks to a row of run-time type t, element by element (generic kernels).
template <class A, int K, int V>
__device__ __forceinline__ void store_generic(void* row_ptr, int cols, bool live, softmax_dtype t, const Place& p,
                                              const A (&v)[K][V]) {
  if (!live) return;
  char* row = static_cast<char*>(row_ptr);
  const int es = dtype_bytes(t);
#pragma unroll
  for (int k = 0; k < K; ++k) {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const int col = p.chunk(k) * V + j;
      if (col < cols) store_element(row + int64_t(col) * es, element_bits(v[k][j], t), es);
    }
  }
}

template <class T>
struct Other16;
template <>
struct Other16<__half> {
  using type = __nv_bfloat16;
};
template <>
struct Other16<__nv_bfloat16> {
  using type = __half;
};

// A row of an input stored as T (kExact), or as t, which may then also be the other 16-bit type
// of a 16-bit T; the generic kernels read any t element by element. kPieces: each thread reads
// its chunks itself (load_chunks_in_pieces, with kLastChunkOnce) instead of through the
// realigning loads. Every lane of the warp calls this together.
template <class T, class A, int K, int V, bool kExact = true, bool kPieces = false, bool kLastChunkOnce = false>
__device__ __forceinline__ void load_values(const void* base, const char* end, int64_t first, int cols, bool live,
                                            softmax_dtype t, const Place& p, A pad, A (&v)[K][V]) {
  if constexpr (kGeneric<T>) {
    load_resized<A, K, V>(static_cast<const char*>(base) + first * dtype_bytes(t), cols, live, t, p, pad, v);
  } else {
    constexpr int kBytes = Elem<T>::kBytes;
    Words c[K];
    const RowBytes rb{static_cast<const char*>(base) + first * kBytes, cols * kBytes,
                      static_cast<const char*>(base), end};
    if constexpr (kPieces) {
      load_chunks_in_pieces<K, kBytes, kChunkBytes<T>, kLastChunkOnce>(rb, live, p, c);
    } else {
      load_chunks<K, kBytes, kChunkBytes<T>>(rb, live, p, c);
    }
    if constexpr (kBytes == 2 && !kExact) {
      if (t != Elem<T>::kDtype) {
        to_values<typename Other16<T>::type, A, K, V>(c, p, cols, pad, v);
        return;
      }
    }
    to_values<T, A, K, V>(c, p, cols, pad, v);
  }
}

// Issues the loads of a thread's chunks of one row of an input stored as T (not generic); a
// HeldRow takes them later (HeldRow::take). Every lane of the warp calls this together.
template <class T, int K>
__device__ __forceinline__ void issue_row(const void* base, const char* end, int64_t first, int cols, bool live,
                                          const Place& p, LoadedUnits<K>& u) {
  constexpr int kBytes = Elem<T>::kBytes;
  const RowBytes rb{static_cast<const char*>(base) + first * kBytes, cols * kBytes, static_cast<const char*>(base),
                    end};
  issue_units<K, kBytes, kChunkBytes<T>>(rb, live, p, u);
}

// The values of a row whose loads issue_row issued (same cols and place): realigned, then
// widened; columns >= cols read as `pad`. Every lane of the warp calls this together.
template <class T, class A, int K, int V>
__device__ __forceinline__ void take_values(const LoadedUnits<K>& u, int cols, const Place& p, A pad, A (&v)[K][V]) {
  Words c[K];
  realign_units<K, kChunkBytes<T>, Elem<T>::kBytes>(u, p, c);
  to_values<T, A, K, V>(c, p, cols, pad, v);
}

// A thread's chunks of one row of an input stored as T, held from the load to the output:
// the values (which the softmax may overwrite with its exps), or, packed (16-bit layouts only),
// the loaded words, widened where an element is used. Packed, 16-bit columns take half the
// registers, at the price of widening each element at every use and, for the softmax, taking
// the exps again on the way out. Columns >= cols read as `pad` either way. kPieces and
// kLastChunkOnce as for load_values.
template <class T, class A, int K, int V, bool kPacked = (Elem<T>::kBytes == 2), bool kPieces = false,
          bool kLastChunkOnce = false>
struct HeldRow {
  static_assert(!kPacked || Elem<T>::kBytes == 2, "only 16-bit layouts are held packed");
  static constexpr bool kHoldsValues = true;
  A v[K][V];
  __device__ __forceinline__ void load(const void* base, const char* end, int64_t first, int cols, bool live,
                                       softmax_dtype t, const Place& p, A pad) {
    load_values<T, A, K, V, true, kPieces, kLastChunkOnce>(base, end, first, cols, live, t, p, pad, v);
  }
  // The row whose loads issue_row issued (same cols and place).
  __device__ __forceinline__ void take(const LoadedUnits<K>& u, int cols, const Place& p, A pad) {
    take_values<T, A, K, V>(u, cols, p, pad, v);
  }
  __device__ __forceinline__ A get(int k, int j) const { return v[k][j]; }
  __device__ __forceinline__ void set(int k, int j, A e) { v[k][j] = e; }
  __device__ __forceinline__ void renew() {}
  // The largest value held (-inf for none; NaNs are passed over, as by fmax).
  __device__ __forceinline__ A max() const {
    A m = A(-INFINITY);
#pragma unroll
    for (int k = 0; k < K; ++k) {
#pragma unroll
      for (int j = 0; j < V; ++j) m = fmax_(m, v[k][j]);
    }
    return m;
  }
};

template <class T, class A, int K, int V, bool kPieces, bool kLastChunkOnce>
struct HeldRow<T, A, K, V, true, kPieces, kLastChunkOnce> {
  static constexpr bool kHoldsValues = false;
  Words c[K];
  __device__ __forceinline__ void load(const void* base, const char* end, int64_t first, int cols, bool live,
                                       softmax_dtype, const Place& p, A pad) {
    const RowBytes rb{static_cast<const char*>(base) + first * 2, cols * 2, static_cast<const char*>(base), end};
    if constexpr (kPieces) {
      load_chunks_in_pieces<K, 2, kChunkBytes<T>, kLastChunkOnce>(rb, live, p, c);
    } else {
      load_chunks<K, 2, kChunkBytes<T>>(rb, live, p, c);
    }
    pad_columns(cols, p, pad);
  }
  // The row whose loads issue_row issued (same cols and place).
  __device__ __forceinline__ void take(const LoadedUnits<K>& u, int cols, const Place& p, A pad) {
    realign_units<K, kChunkBytes<T>, 2>(u, p, c);
    pad_columns(cols, p, pad);
  }
  __device__ __forceinline__ void pad_columns(int cols, const Place& p, A pad) {
    if (!warp_holds_padding<K, V>(p, cols)) return;
    const uint32_t pad_bits = uint32_t(element_bits(pad, Elem<T>::kDtype));
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int col0 = p.chunk(k) * V;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const uint32_t shift = 16u * uint32_t(j & 1);
        if (col0 + j >= cols) c[k].w[j >> 1] = (c[k].w[j >> 1] & ~(0xffffu << shift)) | (pad_bits << shift);
      }
    }
  }
  __device__ __forceinline__ A get(int k, int j) const { return chunk_get<T, A>(c[k], j); }
  __device__ __forceinline__ void set(int, int, A) {}
  // Tells the compiler the held words may have changed, so that values widened from them before
  // are widened again where used after, not kept: a wide kernel (64 columns a thread) that kept
  // its widened row from the sum of exps to the output spilled 200-400 bytes.
  __device__ __forceinline__ void renew() {
#pragma unroll
    for (int k = 0; k < K; ++k) {
#pragma unroll
      for (int i = 0; i < V / 2; ++i) asm volatile("" : "+r"(c[k].w[i]));
    }
  }
  // The largest value held, taken on the packed pairs (exact, and NaNs passed over as by fmax):
  // half the instructions of widening each element, and no widened values for the compiler to
  // keep (the wide kernel spilled 32 bytes more with them).
  __device__ __forceinline__ A max() const {
    uint32_t m = c[0].w[0];
#pragma unroll
    for (int k = 0; k < K; ++k) {
#pragma unroll
      for (int i = k == 0 ? 1 : 0; i < V / 2; ++i) m = pair_max<T>(m, c[k].w[i]);
    }
    const Words w = {{m, 0, 0, 0}};
    return fmax_(chunk_get<T, A>(w, 0), chunk_get<T, A>(w, 1));
  }
};

// Stores a row of an output of type Y (layout T), or of run-time type t (generic kernels); kPieces
// as for store_values.
template <class T, class Y, class A, int K, int V, bool kPieces = false>
__device__ __forceinline__ void store_row(void* base, int64_t first, int cols, bool live, softmax_dtype t,
                                          const Place& p, const A (&v)[K][V]) {
  char* row = static_cast<char*>(base) + first * dtype_bytes(t);
  if constexpr (kGeneric<T>) {
    store_generic<A, K, V>(row, cols, live, t, p, v);
  } else {
    store_values<T, Y, A, K, V, kPieces>(row, cols, live, p, v);
  }
}

}  // namespace cuda_kernels
}  // namespace softmax_internal
