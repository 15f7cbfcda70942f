/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libsoftmax_nccl — softmax over rows whose columns are spread across the GPUs of an NCCL
 * communicator. A separate library (libsoftmax_nccl.so) so that libsoftmax itself never depends
 * on NCCL. Plain C99; NCCL's header is not needed to include this one.
 *
 * Every rank holds a [rows, local_cols] slice, in device memory, of the same [rows, sum of
 * local_cols] matrix (row-major, densely packed; local_cols may differ between ranks and may be
 * 0). Each call is an NCCL collective: every rank of `comm` must make it, in the same order, with
 * the same rows, dtype and options. Argument errors are found before any collective is enqueued,
 * and a rank that fails there returns without enqueueing them; the other ranks then wait for it,
 * as with any NCCL collective a rank skips: treat an error as fatal for the communicator
 * (ncclCommAbort), unless every rank got it (the same bad arguments everywhere).
 *
 * Asynchrony: the work is enqueued on options->stream (NULL: the legacy default stream), whose
 * device must be the communicator's, and the call returns without waiting for it. It never
 * synchronises and allocates only stream-ordered workspace (cudaMallocAsync / cudaFreeAsync,
 * 3 * rows floats), so it can be captured into a CUDA graph. Errors found on the host are
 * returned; errors of the enqueued work surface on the stream, as for NCCL itself.
 */
#ifndef SOFTMAX_SOFTMAX_NCCL_H
#define SOFTMAX_SOFTMAX_NCCL_H

#include <softmax/softmax.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define SOFTMAX_NCCL_API
#else
#define SOFTMAX_NCCL_API __attribute__((visibility("default")))
#endif

/* nccl.h declares `typedef struct ncclComm* ncclComm_t;`: pass an ncclComm_t as is. */
struct ncclComm;

/*
 * y = softmax(x) (log-softmax with SOFTMAX_FLAG_LOG) over whole rows, each rank writing its own
 * [rows, local_cols] slice of y:
 *   softmax_row_stats on the local slice (a slice without columns contributes (-inf, 0)),
 *   ncclAllReduce(ncclMax) of the row maxima -> M,
 *   the local sums rescaled to M: s * exp(m - M), exactly 0 where s == 0,
 *   ncclAllReduce(ncclSum) of the rescaled sums -> S,
 *   softmax_rows_from_stats with (M, S).
 * Rows come out as the unsharded softmax_rows would give them: NaN where any slice holds a NaN or
 * +inf, NaN for a row that is -inf everywhere. f64 storage is refused (INVALID_DTYPE), as for
 * softmax_row_stats.
 */
SOFTMAX_NCCL_API softmax_status softmax_rows_nccl(const void* x, void* y, int64_t rows,
                                                  int64_t local_cols, softmax_dtype dtype,
                                                  struct ncclComm* comm,
                                                  const softmax_options* options);

/*
 * The gradient of softmax_rows_nccl, each rank writing its slice of dx:
 * softmax_backward_row_stats, ncclAllReduce(ncclSum) of row_dot, softmax_rows_backward_from_stats.
 * y, dy, dx, dtype and options as for softmax_rows_backward.
 */
SOFTMAX_NCCL_API softmax_status softmax_rows_backward_nccl(const void* y, const void* dy, void* dx,
                                                           int64_t rows, int64_t local_cols,
                                                           softmax_dtype dtype,
                                                           struct ncclComm* comm,
                                                           const softmax_options* options);

/*
 * The calling thread's message for its last failed softmax_*_nccl call: the failing step and its
 * text (libsoftmax's softmax_last_error(), ncclGetErrorString and ncclGetLastError, or the CUDA
 * error). "" after a success. Valid until this thread's next adapter call.
 */
SOFTMAX_NCCL_API const char* softmax_nccl_last_error(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SOFTMAX_SOFTMAX_NCCL_H */
