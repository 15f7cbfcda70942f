/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libsoftmax — row-wise softmax and fused softmax+dropout, one stable C ABI.
 *
 * Plain C99; nothing from CUDA appears here (streams and device pointers are void*).
 * Every function returns a softmax_status. On failure nothing is written to the outputs and
 * softmax_last_error() says, for the calling thread, exactly what was wrong.
 *
 * Layout: every array is a row-major [rows, cols] matrix, densely packed (row stride == cols).
 * Arithmetic is fp64 when x or y is SOFTMAX_DTYPE_F64, fp32 otherwise.
 *
 * Empty inputs: rows == 0 or cols == 0 succeeds, writes nothing and reads no pointer (pointers
 * may then be NULL). Negative sizes are SOFTMAX_STATUS_INVALID_SIZE.
 *
 * Storage types: `dtype` is the storage type of x. y is stored as x unless the options set
 * SOFTMAX_FLAG_Y_DTYPE, which makes options->y_dtype the storage type of y. The backward and
 * sharded functions take the forward call's (dtype, options) unchanged: arrays that mirror y (y
 * itself, dy) are stored as y, arrays that mirror x (x, dx) as x, so mixed-precision training
 * passes the same arguments forward and backward.
 */
#ifndef SOFTMAX_SOFTMAX_H
#define SOFTMAX_SOFTMAX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define SOFTMAX_API
#else
#define SOFTMAX_API __attribute__((visibility("default")))
#endif

#define SOFTMAX_VERSION_MAJOR 0
#define SOFTMAX_VERSION_MINOR 2
#define SOFTMAX_VERSION_PATCH 0

/* Status codes. Values are part of the ABI: new codes are only ever appended. */
typedef enum softmax_status {
  SOFTMAX_STATUS_SUCCESS = 0,
  SOFTMAX_STATUS_NULL_POINTER = 1,         /* a required pointer was NULL */
  SOFTMAX_STATUS_INVALID_SIZE = 2,         /* rows or cols < 0 */
  SOFTMAX_STATUS_SIZE_OVERFLOW = 3,        /* rows * cols * element size does not fit */
  SOFTMAX_STATUS_INVALID_DTYPE = 4,        /* dtype is not a softmax_dtype value */
  SOFTMAX_STATUS_INVALID_BACKEND = 5,      /* backend is not a softmax_backend value */
  SOFTMAX_STATUS_INVALID_OPTIONS = 6,      /* bad struct_size, unknown flags, bad field */
  SOFTMAX_STATUS_INVALID_PROBABILITY = 7,  /* dropout p is NaN or outside [0, 1] */
  SOFTMAX_STATUS_OVERLAPPING_BUFFERS = 8,  /* x, y, mask partially overlap (x == y is allowed) */
  SOFTMAX_STATUS_BACKEND_UNAVAILABLE = 9,  /* e.g. CUDA asked for but no driver or device */
  SOFTMAX_STATUS_WRONG_MEMORY_SPACE = 10,  /* host pointer to CUDA, device pointer to CPU, mixed */
  SOFTMAX_STATUS_CUDA_ERROR = 11,          /* a CUDA runtime call or kernel launch failed */
  SOFTMAX_STATUS_OUT_OF_MEMORY = 12,       /* workspace could not be allocated */
  SOFTMAX_STATUS_INTERNAL_ERROR = 13,      /* a bug in libsoftmax: please report it */
  SOFTMAX_STATUS_MISALIGNED_POINTER = 14   /* an array is not aligned to its element size */
} softmax_status;

/* Storage types. */
typedef enum softmax_dtype {
  SOFTMAX_DTYPE_F32 = 0,  /* IEEE binary32 */
  SOFTMAX_DTYPE_F16 = 1,  /* IEEE binary16 */
  SOFTMAX_DTYPE_BF16 = 2, /* bfloat16 (upper half of a binary32) */
  SOFTMAX_DTYPE_F64 = 3   /* IEEE binary64 (fp64 arithmetic) */
} softmax_dtype;

typedef enum softmax_backend {
  SOFTMAX_BACKEND_AUTO = 0,  /* CUDA when the pointers are device memory, else CPU */
  SOFTMAX_BACKEND_CPU = 1,   /* OpenMP over rows and over chunks of long rows */
  SOFTMAX_BACKEND_CUDA = 2   /* asynchronous on options->stream */
} softmax_backend;

/* Bits of softmax_options.flags. */
#define SOFTMAX_FLAG_LOG 0x1u     /* log-softmax: y = x - max - log(sum exp(x - max)) */
#define SOFTMAX_FLAG_Y_DTYPE 0x2u /* y (and dy) are stored as options->y_dtype, not as x */

/* The largest struct_size accepted: bytes past sizeof(softmax_options) are read (they must be
 * zero), so a caller must own struct_size bytes; larger values are INVALID_OPTIONS. */
#define SOFTMAX_OPTIONS_MAX_SIZE 4096u

/*
 * Options. struct_size must be set to sizeof(softmax_options) by the caller; the library
 * accepts older (smaller) structs and newer (larger, up to SOFTMAX_OPTIONS_MAX_SIZE) ones whose
 * unknown tail is all zero. Pass NULL for the defaults. Initialise with SOFTMAX_OPTIONS_INIT or
 * softmax_default_options().
 */
typedef struct softmax_options {
  size_t struct_size;      /* sizeof(softmax_options) */
  softmax_backend backend; /* default SOFTMAX_BACKEND_AUTO */
  uint32_t flags;          /* SOFTMAX_FLAG_* bits, default 0 */
  void* stream;            /* cudaStream_t for the CUDA backend; NULL = legacy default stream */
  int32_t num_threads;     /* CPU backend: threads to use, 0 = OpenMP's default */
  softmax_dtype y_dtype;   /* storage type of y and dy; read only with SOFTMAX_FLAG_Y_DTYPE */
} softmax_options;

#define SOFTMAX_OPTIONS_INIT \
  {sizeof(softmax_options), SOFTMAX_BACKEND_AUTO, 0u, NULL, 0, SOFTMAX_DTYPE_F32}

/*
 * y[r, :] = softmax(x[r, :]) for every row r (log-softmax with SOFTMAX_FLAG_LOG).
 * x == y (in place) is allowed when x and y have the same element size; any other overlap is
 * an error. On the CUDA backend the call is asynchronous on options->stream.
 */
SOFTMAX_API softmax_status softmax_rows(const void* x, void* y, int64_t rows, int64_t cols,
                                        softmax_dtype dtype, const softmax_options* options);

/*
 * Softmax fused with inverted dropout, in one pass over memory:
 *   y = keep ? softmax(x) / (1 - p) : 0
 * The keep decision for flat element i (= r * cols + c) is a pure function of (seed, offset, i):
 *   curand_init(seed, i / 4, offset, &s); u = component (i % 4) of curand_uniform4(&s); keep = u > p
 * (Philox4x32-10 as cuRAND's device API defines it), so every backend and every launch shape
 * gives the same mask bit for bit. p must lie in [0, 1]; p = 0 equals softmax_rows, p = 1 gives
 * zeros. keep_mask, if not NULL, receives rows*cols bytes: 1 where kept, 0 where dropped.
 * SOFTMAX_FLAG_LOG is rejected here.
 */
SOFTMAX_API softmax_status softmax_dropout(const void* x, void* y, uint8_t* keep_mask, int64_t rows,
                                           int64_t cols, softmax_dtype dtype, float p,
                                           uint64_t seed, uint64_t offset,
                                           const softmax_options* options);

/*
 * Gradient of softmax_rows. y is the forward output; per row
 *   dx = y * (dy - sum(dy * y)),  or with SOFTMAX_FLAG_LOG (y = log-softmax output)
 *   dx = dy - exp(y) * sum(dy).
 * y and dy are stored as the forward's y, dx as the forward's x. dx may equal dy (in place,
 * same element size); other overlaps are OVERLAPPING_BUFFERS.
 */
SOFTMAX_API softmax_status softmax_rows_backward(const void* y, const void* dy, void* dx,
                                                 int64_t rows, int64_t cols, softmax_dtype dtype,
                                                 const softmax_options* options);

/*
 * Gradient of softmax_dropout with respect to x, from x itself: recomputes s = softmax(x) and
 * the keep mask from (seed, offset) with the forward's rule, so no mask or activation has to be
 * saved. Per row
 *   g = keep ? dy / (1 - p) : 0;  dx = s * (g - sum(s * g)).
 * p = 1 gives dx = 0 whatever x holds, as the forward gives zeros. x and dx are stored as x, dy
 * as the forward's y. dx may equal dy (same element size). SOFTMAX_FLAG_LOG is rejected here.
 */
SOFTMAX_API softmax_status softmax_dropout_backward(const void* x, const void* dy, void* dx,
                                                    int64_t rows, int64_t cols, softmax_dtype dtype,
                                                    float p, uint64_t seed, uint64_t offset,
                                                    const softmax_options* options);

/*
 * Rows sharded by columns (each process or GPU holds a [rows, cols] slice of longer rows):
 *
 *   softmax_row_stats        per-row statistics of this shard:
 *                            row_max[r] = max_c x[r, c], row_sumexp[r] = sum_c exp(x[r, c] - row_max[r])
 *   (merge across shards)    M = max of the shard maxima; S = sum of row_sumexp * exp(shard max - M)
 *                            (terms whose row_sumexp is 0 dropped), with any all-reduce
 *   softmax_rows_from_stats  y = exp(x - row_max) / row_sumexp per row, from the merged (M, S)
 *                            (SOFTMAX_FLAG_LOG: x - row_max - log(row_sumexp))
 *
 * An all -inf shard row gives max -inf and sum 0; a NaN or +inf gives a NaN sum. After the merge
 * every row comes out as the unsharded softmax_rows would give it. The statistics are float
 * arrays of `rows` elements in x's memory space; f64 rows are refused (INVALID_DTYPE), as float
 * statistics cannot carry their range.
 */
SOFTMAX_API softmax_status softmax_row_stats(const void* x, float* row_max, float* row_sumexp,
                                             int64_t rows, int64_t cols, softmax_dtype dtype,
                                             const softmax_options* options);
SOFTMAX_API softmax_status softmax_rows_from_stats(const void* x, void* y, const float* row_max,
                                                   const float* row_sumexp, int64_t rows,
                                                   int64_t cols, softmax_dtype dtype,
                                                   const softmax_options* options);

/*
 * The sharded backward: softmax_backward_row_stats gives this shard's
 *   row_dot[r] = sum_c dy[r, c] * y[r, c]   (SOFTMAX_FLAG_LOG: sum_c dy[r, c]);
 * the shards' row_dot are summed (any all-reduce), then softmax_rows_backward_from_stats gives
 *   dx = y * (dy - row_dot)                 (SOFTMAX_FLAG_LOG: dx = dy - exp(y) * row_dot).
 * Storage types as in softmax_rows_backward; row_dot holds `rows` floats in y's memory space.
 */
SOFTMAX_API softmax_status softmax_backward_row_stats(const void* y, const void* dy, float* row_dot,
                                                      int64_t rows, int64_t cols,
                                                      softmax_dtype dtype,
                                                      const softmax_options* options);
SOFTMAX_API softmax_status softmax_rows_backward_from_stats(const void* y, const void* dy, void* dx,
                                                            const float* row_dot, int64_t rows,
                                                            int64_t cols, softmax_dtype dtype,
                                                            const softmax_options* options);

/* The defaults, with struct_size filled in. */
SOFTMAX_API softmax_options softmax_default_options(void);

/* 1 if the backend can run on this machine now, else 0 (AUTO is always available). */
SOFTMAX_API int softmax_backend_available(softmax_backend backend);

/* A static, human-readable name for a status ("SOFTMAX_STATUS_INVALID_SIZE"). */
SOFTMAX_API const char* softmax_status_string(softmax_status status);

/* The calling thread's message for its last failed call ("cols must be > 0, got -3");
 * "" if the last call succeeded. Valid until this thread's next libsoftmax call. */
SOFTMAX_API const char* softmax_last_error(void);

/* "MAJOR.MINOR.PATCH" of the library actually loaded. */
SOFTMAX_API const char* softmax_version(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SOFTMAX_SOFTMAX_H */
