/* SPDX-License-Identifier: Apache-2.0 */
// The vector kernels of the backward and sharded-row operations: the per-chunk arithmetic that
// cpu_softmax_backward.cpp, cpu_dropout_backward.cpp and cpu_row_stats.cpp share out over
// threads. Plain loops that the compiler vectorises, cloned per x86 level with target_clones
// (grad_kernels.cpp), in fp32 (the _f32 kernels) and fp64 (_f64) arithmetic.
//
// Arithmetic contract, so that a row's bits never depend on the thread count or the schedule:
// a row is cut into chunks of kChunkElems elements at fixed offsets (as the forward does,
// vector_kernels.h); a reduction over a chunk uses kGradLanes independent accumulators and a
// fixed tree; the chunks of a row are merged in double, in chunk order, by the drivers. A row of
// at most kChunkElems elements is one chunk, and the whole-row kernels below compute its
// reduction with the very same code as the chunk kernels, so e.g. row_dot from
// softmax_backward_row_stats feeds softmax_rows_backward_from_stats to the bits that
// softmax_rows_backward gives.
//
// Work arrays (y, dy, dx, ...) are in the arithmetic type; the drivers widen 16-bit (or mixed)
// storage into per-thread buffers with widen_* and write results back with narrow_*. Pointers
// may be unaligned (all accesses go through memcpy, storage_convert.h).
#pragma once

#include <softmax/softmax.h>

#include <cstdint>

namespace softmax_internal {
namespace cpu {

// Conversions of n elements between storage type t and the work type. The f32 forms never see
// SOFTMAX_DTYPE_F64 (f64 storage means fp64 arithmetic).
void widen_f32(const void* src, softmax_dtype t, int64_t n, float* dst);
void widen_f64(const void* src, softmax_dtype t, int64_t n, double* dst);
void narrow_f32(const float* src, void* dst, softmax_dtype t, int64_t n);
void narrow_f64(const double* src, void* dst, softmax_dtype t, int64_t n);

// dst[0, n) = src[0, n) with non-temporal stores wherever dst is 16-byte aligned (ordinary ones
// for an unaligned head and the tail), then a store fence, so that the stores are visible to
// other threads once the caller's threads meet at a barrier. For results that will not be read
// again soon: they skip the cache, and their lines are not read from memory first.
void stream_store_f32(const float* src, void* dst, int64_t n);

// ---- softmax backward: dx = y * (dy - dot), dot = sum(dy * y);
//      log-softmax backward: dx = dy - exp(y) * dot, dot = sum(dy) ----------------------------

// The reduction of one chunk (n <= kChunkElems): sum(y * dy), or sum(dy) when `log`.
float grad_dot_f32(const float* y, const float* dy, int64_t n, bool log);
double grad_dot_f64(const double* y, const double* dy, int64_t n, bool log);

// dx from the row's merged reduction. dx may be dy (in place). prefetch_preceding: as
// grad_streamed_f32's FinishPrefetch::PrecedingChunk, for the log-softmax on AVX-512 (ignored
// elsewhere).
void grad_finish_f32(const float* y, const float* dy, float* dx, int64_t n, float dot, bool log,
                     bool prefetch_preceding);
void grad_finish_f64(const double* y, const double* dy, double* dx, int64_t n, double dot, bool log);

// `rows` consecutive rows of `cols` <= kChunkElems elements each. With row_dot null, each row's
// reduction is computed (as grad_dot_*) and the row finished while it is in cache; otherwise
// row_dot[r] is used. dx may be dy. prefetch_following: as grad_streamed_f32's
// FinishPrefetch::FollowingRows.
void grad_rows_f32(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                   const float* row_dot, bool log, bool prefetch_following);
void grad_rows_f64(const double* y, const double* dy, double* dx, int64_t rows, int64_t cols,
                   const double* row_dot, bool log, bool prefetch_following);

// grad_rows_f32 (rows of cols <= kChunkElems; or, with rows == 1 and row_dot given, one chunk of
// a longer row) written straight to the caller's dx: with non-temporal stores and then a store
// fence where stream_rows_alone (stream_policy.h) says so, else with ordinary stores. Returns
// false, writing nothing, where the CPU lacks AVX-512 or dx is not 4-byte aligned: the caller
// then computes into a buffer and streams it out (stream_store_f32). dx may not be dy.
// `prefetch`: what the finishing loop prefetches for what the caller reads next (with each 64
// bytes finished, the y and dy a fixed distance away):
// - FollowingRows: the rows after these in memory (a tile of short rows), max(cols, 1024)
//   elements ahead, one row or 4 KB; each row's dot then reads from cache, and memory streams
//   while rows are finished (on a 2-core AVX-512 Xeon, 256-8192 columns: softmax backward
//   +1-13%, log-softmax +15-37%).
// - PrecedingChunk (rows == 1, one chunk of a long row): the `cols` elements just before it, the
//   chunk that a long row's finishing pass, walked backwards, finishes next.
enum class FinishPrefetch { None, FollowingRows, PrecedingChunk };
bool grad_streamed_f32(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                       const float* row_dot, bool log, FinishPrefetch prefetch);

// The reductions alone of `rows` consecutive rows of cols <= kChunkElems: out[r] = grad_dot.
void grad_row_dots_f32(const float* y, const float* dy, int64_t rows, int64_t cols, bool log, float* out);

// ---- dropout backward helpers ------------------------------------------------------------

// g = keep ? dy * scale : 0 (a select: a dropped inf or NaN gradient gives 0).
void dropout_grad_f32(const float* dy, const uint8_t* keep, float scale, int64_t n, float* g);
void dropout_grad_f64(const double* dy, const uint8_t* keep, double scale, int64_t n, double* g);

// v *= factor.
void scale_f32(float* v, int64_t n, float factor);
void scale_f64(double* v, int64_t n, double factor);

// Softmax statistics of one chunk in fp64 (the fp32 ones are the forward's chunk_partial).
struct ChunkStats64 {
  double max;    // -inf when every element is -inf
  double sum;    // sum exp(x - max); 0 when max is -inf
  bool has_nan;  // a NaN or +inf in the chunk
};
// When e_out is not null it receives exp(x - max) (zeros for an all -inf chunk).
ChunkStats64 softmax_chunk_stats_f64(const double* x, int64_t n, double* e_out);

// ---- sharded forward: y = exp(x - max) * inv_sum, or (x - max) - log_sum ----------------

void exp_scaled_f32(const float* x, float* y, int64_t n, float shift, float factor);
void log_shifted_f32(const float* x, float* y, int64_t n, float shift, float log_sum);

}  // namespace cpu
}  // namespace softmax_internal
