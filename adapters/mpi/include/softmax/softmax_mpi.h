/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libsoftmax_mpi — softmax over rows whose columns are spread across the ranks of an MPI
 * communicator. A separate library (libsoftmax_mpi.so) so that libsoftmax itself never depends
 * on MPI. Plain C99.
 *
 * Every rank holds a [rows, local_cols] slice of the same [rows, sum of local_cols] matrix
 * (row-major, densely packed, local_cols may differ between ranks and may be 0). Each call is
 * collective: every rank of `comm` must make it, in the same order, with the same rows, dtype and
 * options (MPI's own rule for collective operations). Storage types, flags and memory spaces are
 * those of libsoftmax (softmax/softmax.h).
 *
 * Failure: a rank whose local step fails (a bad argument, a NULL output, a CUDA error) still
 * takes part in the all-reduce and tells the others, so no rank waits forever and no rank writes
 * any output. The failing rank returns its own status; the others return the highest failing
 * status of the communicator, and softmax_mpi_last_error() says so. Errors found before any
 * communication (rows < 0 or too large, comm == MPI_COMM_NULL, MPI not initialised) are the same
 * on every rank given the same arguments, so every rank returns without communicating. Faults of
 * the output that only the last step sees (wrong memory space, partial overlap with an input)
 * are reported by that rank alone, after the all-reduce; it writes nothing, the others succeed.
 */
#ifndef SOFTMAX_SOFTMAX_MPI_H
#define SOFTMAX_SOFTMAX_MPI_H

#include <mpi.h>
#include <softmax/softmax.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define SOFTMAX_MPI_API
#else
#define SOFTMAX_MPI_API __attribute__((visibility("default")))
#endif

/*
 * y = softmax(x) (log-softmax with SOFTMAX_FLAG_LOG) over whole rows, each rank writing its own
 * [rows, local_cols] slice of y. One MPI_Allreduce of rows + 1 (max, sum) float pairs:
 *   softmax_row_stats on the local slice, an all-reduce that merges (max, sum) pairs as
 *     M = max(ma, mb),  S = sa * exp(ma - M) + sb * exp(mb - M)   (a term with s == 0 dropped),
 *   then softmax_rows_from_stats with the merged (M, S).
 * A rank with local_cols == 0 contributes (-inf, 0) and writes nothing. Rows come out as the
 * unsharded softmax_rows would give them: NaN where any slice holds a NaN or +inf, NaN for a row
 * that is -inf everywhere.
 *
 * Host memory goes to the all-reduce directly. Device memory (run on the CUDA backend): the row
 * statistics are computed into a stream-ordered device buffer, copied to the host, reduced there
 * and copied back, so any MPI works; the call synchronises options->stream once, before the
 * all-reduce, and returns with the last step enqueued on that stream. f64 storage is refused
 * (INVALID_DTYPE), as for softmax_row_stats.
 */
SOFTMAX_MPI_API softmax_status softmax_rows_mpi(const void* x, void* y, int64_t rows,
                                                int64_t local_cols, softmax_dtype dtype,
                                                MPI_Comm comm, const softmax_options* options);

/*
 * The gradient of softmax_rows_mpi, each rank writing its slice of dx: softmax_backward_row_stats
 * on the local slice, MPI_Allreduce(MPI_SUM) of the rows row_dot values (plus a small failure
 * record), softmax_rows_backward_from_stats. y, dy, dx, dtype and options as for
 * softmax_rows_backward; memory spaces as for softmax_rows_mpi.
 */
SOFTMAX_MPI_API softmax_status softmax_rows_backward_mpi(const void* y, const void* dy, void* dx,
                                                         int64_t rows, int64_t local_cols,
                                                         softmax_dtype dtype, MPI_Comm comm,
                                                         const softmax_options* options);

/*
 * The calling thread's message for its last failed softmax_*_mpi call: the failing step and its
 * text (libsoftmax's softmax_last_error(), MPI_Error_string, or the CUDA error), or which status
 * another rank failed with. "" after a success. Valid until this thread's next adapter call.
 */
SOFTMAX_MPI_API const char* softmax_mpi_last_error(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SOFTMAX_SOFTMAX_MPI_H */
